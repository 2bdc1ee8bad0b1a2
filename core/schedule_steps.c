/* schedule_steps.c: the passes around the lowering (core/schedule_lower.c) that finish an
 * action IR where the lowering's own write cannot: sched_add_allreduce puts one ALLREDUCE
 * of a replicated stage after the last backward of each of its groups, sched_place_steps
 * puts the optimizer STEP after each group's all-reduce (or its last backward) and
 * sched_assign_versions gives every F the stage's newest weight version, every B/I/W the
 * version of its F and every STEP the next version. sched_finish's lowering does the last
 * two itself as it writes the lists where no stage is replicated and the order has no STEP
 * or ALLREDUCE; imported files (core/schedule_csv.c) and replicated stages take them here.
 *
 * A group is what one optimizer step covers: an iteration (microbatch / microbatches) for
 * the synchronous kinds and 2bw, one backward (the k-th on the replica) for pipedream. */
#include "schedule_impl.h"

#include <stdlib.h>

/* One scan of v (worker w's list) for stage st: whether it has an action of `kind` (*has,
 * 1 or 0), its ALLREDUCEs (*nar), and its groups: each backward end of st is in group
 * microbatch / microbatches (an iteration; ends of a group past the last are not
 * counted), or, for the kinds that step each round, in a group of its own. Returns pos,
 * [*ng + 1]: for each group k the index of the action after which it and every group
 * before it are complete (the last of their members; -1: before the first action), which
 * the caller frees; NULL when out of memory. */
static int *stage_scan(const schedule *s, const actvec *v, int st, int kind, int *has,
                       int *nar, int *ng)
{
    int each = sched_traits_of(s->kind)->step_each_round, n = each ? 0 : s->iterations;
    int cap = each ? 16 : n + 1;
    int *pos = malloc((size_t)cap * sizeof *pos);
    if (!pos) return NULL;
    *has = *nar = 0;
    for (int k = 0; k < n; k++) pos[k] = -1;
    for (int i = 0; i < v->n; i++) {
        const action *a = &v->a[i];
        if (a->stage != st) continue;
        *has |= a->kind == kind;
        *nar += a->kind == ACT_ALLREDUCE;
        if (!act_is_bwd_end(a->kind)) continue;
        if (each) { /* a group of its own */
            if (n + 1 >= cap) {
                int *p = realloc(pos, (size_t)(cap *= 2) * sizeof *pos);
                if (!p) {
                    free(pos);
                    return NULL;
                }
                pos = p;
            }
            pos[n++] = i;
        } else {
            int k = a->microbatch / s->microbatches;
            if (k >= 0 && k < n) pos[k] = i; /* members come in list order: the last stays */
        }
    }
    for (int k = 1; k < n; k++) /* complete when it and all before are */
        if (pos[k] < pos[k - 1]) pos[k] = pos[k - 1];
    *ng = n;
    return pos;
}

int sched_insert_after(actvec *v, const int *after, const action *ins, int nins)
{
    if (nins <= 0) return 0;
    int n = v->n + nins;
    if (n > v->cap) {
        action *p = realloc(v->a, (size_t)n * sizeof *p);
        if (!p) return -1;
        v->a = p, v->cap = n;
    }
    int o = n, k = nins - 1;
    for (int i = v->n - 1; i >= -1; i--) {
        while (k >= 0 && (i < 0 || after[k] >= i))
            v->a[--o] = ins[k--];
        if (i >= 0) v->a[--o] = v->a[i];
    }
    v->n = n;
    return 0;
}

int sched_add_allreduce(const schedule *s, actvec *lists, plumb_err *err)
{
    for (int st = 0; st < s->nstages; st++) {
        if (s->replicas[st] < 2) continue;
        for (int j = 0; j < s->replicas[st]; j++) {
            int w = s->stage_workers[s->stage_first[st] + j], has, nar, ng = 0;
            actvec *v = &lists[w];
            int *pos = stage_scan(s, v, st, ACT_ALLREDUCE, &has, &nar, &ng);
            if (pos && has) {
                free(pos);
                continue;
            }
            action *ins = pos ? malloc((size_t)(ng + 1) * sizeof *ins) : NULL;
            if (!pos || !ins) {
                free(pos), free(ins);
                return err_set(err, NULL, NULL, "out of memory");
            }
            for (int k = 0; k < ng; k++) ins[k] = act_make(ACT_ALLREDUCE, st, -1);
            int rc = sched_insert_after(v, pos, ins, ng);
            free(pos), free(ins);
            if (rc) return err_set(err, NULL, NULL, "out of memory");
        }
    }
    return 0;
}

int sched_step_at_cmp(const void *pa, const void *pb)
{
    const sched_step_at *x = pa, *y = pb;
    if (x->after != y->after) return x->after < y->after ? -1 : 1;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* sched_place_steps for a worker's list v holding the nh stages hs[] (ascending, nh > 1,
 * none replicated: the chunked kinds): the STEPs each stage's pass would place, one stage after
 * the other, found in one scan per stage of the list as it is and placed by one move. A
 * STEP's anchor skips the transfers that follow it, up to a STEP of an earlier stage (mark:
 * [n + 1], 1 at j + 1 when one follows action j). 0; 1, the list unchanged, when a stage
 * has all-reduces to step after; -1 out of memory. */
static int place_steps_held(const schedule *s, actvec *v, const int *hs, int nh)
{
    int n = v->n, nat = 0, rc = -1, cap = 0;
    unsigned char *mark = calloc((size_t)n + 1, 1);
    sched_step_at *at = NULL;
    action *ins = NULL;
    int *after = NULL;
    if (!mark) return -1;
    for (int r = 0; r < nh; r++) {
        int has, nar, ng = 0;
        int *pos = stage_scan(s, v, hs[r], ACT_STEP, &has, &nar, &ng);
        if (!pos) goto done;
        if (has || nar) {
            free(pos);
            if (!nar) continue;
            rc = 1; /* all-reduces (an imported list's): placed stage by stage */
            goto done;
        }
        if (nat + ng > cap) {
            cap = 2 * (nat + ng) + 8;
            sched_step_at *p = realloc(at, (size_t)cap * sizeof *p);
            if (!p) {
                free(pos);
                goto done;
            }
            at = p;
        }
        for (int k = 0; k < ng; k++) {
            while (pos[k] + 1 < n && !mark[pos[k] + 1] && act_is_comm(v->a[pos[k] + 1].kind))
                pos[k]++;
            if (k && pos[k] < pos[k - 1]) pos[k] = pos[k - 1];
        }
        for (int k = 0; k < ng; k++) {
            mark[pos[k] + 1] = 1;
            at[nat++] = (sched_step_at){pos[k], r, k};
        }
        free(pos);
    }
    if (nat > 1) qsort(at, (size_t)nat, sizeof *at, sched_step_at_cmp); /* at is NULL when nat is 0 */
    ins = malloc(((size_t)nat + 1) * sizeof *ins);
    after = malloc(((size_t)nat + 1) * sizeof *after);
    if (!ins || !after) goto done;
    for (int q = 0; q < nat; q++) {
        ins[q] = act_make(ACT_STEP, hs[at[q].rank], -1);
        after[q] = at[q].after;
    }
    rc = sched_insert_after(v, after, ins, nat);
done:
    free(mark), free(at), free(ins), free(after);
    return rc;
}

int sched_place_steps(const schedule *s, actvec *lists, plumb_err *err)
{
    int *hs = malloc(((size_t)s->nstages + 1) * sizeof *hs);
    if (!hs) return err_set(err, NULL, NULL, "out of memory");
    for (int w = 0; w < s->nworkers; w++) {
        int nh = 0, ar = 0;
        for (int st = 0; st < s->nstages; st++)
            if (sched_hosts(s, w, st)) hs[nh++] = st, ar |= s->replicas[st] > 1;
        if (nh > 1 && !ar) { /* several stages: one move for all their STEPs */
            int r = place_steps_held(s, &lists[w], hs, nh);
            if (r < 0) {
                free(hs);
                return err_set(err, NULL, NULL, "out of memory");
            }
            if (r == 0) continue;
        }
        for (int st = 0; st < s->nstages; st++) {
            if (!sched_hosts(s, w, st)) continue;
            actvec *v = &lists[w];
            int has, nar, ng = 0;
            int *pos = stage_scan(s, v, st, ACT_STEP, &has, &nar, &ng);
            if (pos && has) {
                free(pos);
                continue;
            }
            if (pos && nar) { /* after each all-reduce */
                if (nar != ng) {
                    free(pos);
                    free(hs);
                    return err_set(err, NULL, NULL, "worker %d has %d REDUCE_GRAD of stage %d "
                                   "for %d optimizer steps (expected one per step)", w, nar, st,
                                   ng);
                }
                for (int i = 0, k = 0; i < v->n; i++)
                    if (v->a[i].kind == ACT_ALLREDUCE && v->a[i].stage == st) pos[k++] = i;
            }
            action *ins = pos ? malloc((size_t)(ng + 1) * sizeof *ins) : NULL;
            if (!pos || !ins) {
                free(pos), free(ins), free(hs);
                return err_set(err, NULL, NULL, "out of memory");
            }
            /* after the anchor and the transfers that follow it directly (a send then
             * leaves as its data is produced; receives only post) */
            for (int k = 0; k < ng; k++) {
                while (pos[k] + 1 < v->n && act_is_comm(v->a[pos[k] + 1].kind)) pos[k]++;
                ins[k] = act_make(ACT_STEP, st, -1);
            }
            for (int k = 1; k < ng; k++)
                if (pos[k] < pos[k - 1]) pos[k] = pos[k - 1];
            int rc = sched_insert_after(v, pos, ins, ng);
            free(pos), free(ins);
            if (rc) {
                free(hs);
                return err_set(err, NULL, NULL, "out of memory");
            }
        }
    }
    free(hs);
    return 0;
}

void sched_assign_versions(const schedule *s, actvec *lists)
{
    int T = sched_total_mb(s);
    int *fver = malloc((size_t)s->nstages * (size_t)T * sizeof *fver);
    int *cur = malloc((size_t)s->nstages * sizeof *cur);
    if (!fver || !cur) {
        free(fver), free(cur);
        return;
    }
    for (size_t i = 0; i < (size_t)s->nstages * (size_t)T; i++) fver[i] = -1;
    for (int w = 0; w < s->nworkers; w++) {
        int undefined = 0; /* a compute left at version -1 */
        for (int st = 0; st < s->nstages; st++) cur[st] = 0;
        for (int i = 0; i < lists[w].n; i++) {
            action *a = &lists[w].a[i];
            int st = a->stage, m = a->microbatch;
            a->version = -1;
            if (st >= 0 && st < s->nstages) {
                if (a->kind == ACT_STEP) {
                    a->version = ++cur[st];
                } else if (act_is_compute(a->kind) && m >= 0 && m < T) {
                    if (a->kind == ACT_F) fver[(size_t)st * T + m] = cur[st];
                    a->version = a->kind == ACT_F ? cur[st] : fver[(size_t)st * T + m];
                }
            }
            undefined |= act_is_compute(a->kind) && a->version < 0;
        }
        /* B/I/W whose F is on another worker (an invalid IR) keep what fver held; make
         * them well defined */
        for (int i = 0; undefined && i < lists[w].n; i++) {
            action *a = &lists[w].a[i];
            if (act_is_compute(a->kind) && a->version < 0) a->version = 0;
        }
    }
    free(fver);
    free(cur);
}
