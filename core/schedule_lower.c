/* schedule_lower.c: the passes that turn a compute order into a complete action IR.
 *
 * sched_add_allreduce puts one ALLREDUCE of a replicated stage after the last backward of
 * each of its groups; sched_lower times the compute order (with the stages' costs when
 * given, else F 1, I 1, W 1, B 2; all-reduce and step 1/1000 of the cheapest stage) and
 * inserts every SEND/RECV pair at the moment the data is
 * produced, so that all workers' lists are restrictions of one global order in which each
 * pair is adjacent: the IR then cannot deadlock even when a send blocks until its receive
 * is reached (and so neither with buffered sends). sched_place_steps puts the optimizer
 * STEP after each group's all-reduce (or its last backward), and sched_assign_versions
 * gives every F the stage's newest weight version, every B/I/W the version of its F and
 * every STEP the next version.
 *
 * A group is what one optimizer step covers: an iteration (microbatch / microbatches) for
 * the synchronous kinds and 2bw, one backward (the k-th on the replica) for pipedream. */
#include "schedule_impl.h"

#include <stdlib.h>
#include <string.h>

/* 1 when a finishes the backward of its microbatch at its stage (B, or W of a split). */
static int is_bwd_end(int k) { return k == ACT_B || k == ACT_W; }

/* Groups of (worker w, stage st) and the group of each backward end; fills grp[i] for the
 * list's actions (-1 for others). Returns the number of groups. */
static int groups_of(const schedule *s, const actvec *v, int st, int *grp)
{
    int g = 0, step_each_round = sched_traits_of(s->kind)->step_each_round;
    for (int i = 0; i < v->n; i++) {
        grp[i] = -1;
        const action *a = &v->a[i];
        if (a->stage != st || !is_bwd_end(a->kind)) continue;
        if (step_each_round)
            grp[i] = g++;
        else
            grp[i] = a->microbatch / s->microbatches;
    }
    return step_each_round ? g : s->iterations;
}

/* For each group k of (w, st), the index of the action after which the group completes
 * (-1: before the first action). pos has ngroups entries. */
static void group_ends(const actvec *v, const int *grp, int ngroups, int *pos)
{
    int *left = calloc((size_t)(ngroups > 0 ? ngroups : 1), sizeof *left);
    if (!left) {
        for (int k = 0; k < ngroups; k++) pos[k] = v->n - 1;
        return;
    }
    for (int i = 0; i < v->n; i++)
        if (grp[i] >= 0 && grp[i] < ngroups) left[grp[i]]++;
    int next = 0;
    while (next < ngroups && left[next] == 0) pos[next++] = -1;
    for (int i = 0; i < v->n && next < ngroups; i++) {
        if (grp[i] >= 0 && grp[i] < ngroups) left[grp[i]]--;
        while (next < ngroups && left[next] == 0) pos[next++] = i;
    }
    while (next < ngroups) pos[next++] = v->n - 1;
    free(left);
}

/* Rebuilds v with ins[k] placed after index after[k] (ascending; -1 = at the front). */
static int insert_after(actvec *v, const int *after, const action *ins, int nins)
{
    actvec out = {0};
    int k = 0;
    while (k < nins && after[k] < 0)
        if (actvec_push(&out, ins[k++])) goto oom;
    for (int i = 0; i < v->n; i++) {
        if (actvec_push(&out, v->a[i])) goto oom;
        while (k < nins && after[k] == i)
            if (actvec_push(&out, ins[k++])) goto oom;
    }
    while (k < nins)
        if (actvec_push(&out, ins[k++])) goto oom;
    actvec_free(v);
    *v = out;
    return 0;
oom:
    actvec_free(&out);
    return -1;
}

static int has_kind(const actvec *v, int kind, int st)
{
    for (int i = 0; i < v->n; i++)
        if (v->a[i].kind == kind && v->a[i].stage == st) return 1;
    return 0;
}

int sched_add_allreduce(const schedule *s, actvec *lists, plumb_err *err)
{
    for (int st = 0; st < s->nstages; st++) {
        if (s->replicas[st] < 2) continue;
        for (int j = 0; j < s->replicas[st]; j++) {
            int w = s->stage_workers[s->stage_first[st] + j];
            actvec *v = &lists[w];
            if (has_kind(v, ACT_ALLREDUCE, st)) continue;
            int *grp = malloc((size_t)(v->n + 1) * sizeof *grp);
            if (!grp) return err_set(err, NULL, NULL, "out of memory");
            int ng = groups_of(s, v, st, grp);
            int *pos = malloc((size_t)(ng + 1) * sizeof *pos);
            action *ins = malloc((size_t)(ng + 1) * sizeof *ins);
            if (!pos || !ins) {
                free(grp), free(pos), free(ins);
                return err_set(err, NULL, NULL, "out of memory");
            }
            group_ends(v, grp, ng, pos);
            for (int k = 0; k < ng; k++) ins[k] = act_make(ACT_ALLREDUCE, st, -1);
            int rc = insert_after(v, pos, ins, ng);
            free(grp), free(pos), free(ins);
            if (rc) return err_set(err, NULL, NULL, "out of memory");
        }
    }
    return 0;
}

int sched_place_steps(const schedule *s, actvec *lists, plumb_err *err)
{
    for (int w = 0; w < s->nworkers; w++) {
        for (int st = 0; st < s->nstages; st++) {
            if (!sched_hosts(s, w, st)) continue;
            actvec *v = &lists[w];
            if (has_kind(v, ACT_STEP, st)) continue;
            int *grp = malloc((size_t)(v->n + 1) * sizeof *grp);
            if (!grp) return err_set(err, NULL, NULL, "out of memory");
            int ng = groups_of(s, v, st, grp);
            int *pos = malloc((size_t)(ng + 1) * sizeof *pos);
            action *ins = malloc((size_t)(ng + 1) * sizeof *ins);
            if (!pos || !ins) {
                free(grp), free(pos), free(ins);
                return err_set(err, NULL, NULL, "out of memory");
            }
            int nar = 0;
            for (int i = 0; i < v->n; i++)
                if (v->a[i].kind == ACT_ALLREDUCE && v->a[i].stage == st) {
                    if (nar < ng) pos[nar] = i;
                    nar++;
                }
            if (nar && nar != ng) {
                free(grp), free(pos), free(ins);
                return err_set(err, NULL, NULL, "worker %d has %d REDUCE_GRAD of stage %d for "
                               "%d optimizer steps (expected one per step)", w, nar, st, ng);
            }
            if (!nar) group_ends(v, grp, ng, pos);
            /* after the anchor and the transfers that follow it directly (a send then
             * leaves as its data is produced; receives only post) */
            for (int k = 0; k < ng; k++) {
                while (pos[k] + 1 < v->n && act_is_comm(v->a[pos[k] + 1].kind)) pos[k]++;
                ins[k] = act_make(ACT_STEP, st, -1);
            }
            for (int k = 1; k < ng; k++)
                if (pos[k] < pos[k - 1]) pos[k] = pos[k - 1];
            int rc = insert_after(v, pos, ins, ng);
            free(grp), free(pos), free(ins);
            if (rc) return err_set(err, NULL, NULL, "out of memory");
        }
    }
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
        for (int st = 0; st < s->nstages; st++) cur[st] = 0;
        for (int i = 0; i < lists[w].n; i++) {
            action *a = &lists[w].a[i];
            int st = a->stage, m = a->microbatch;
            a->version = -1;
            if (st < 0 || st >= s->nstages) continue;
            if (a->kind == ACT_STEP) {
                a->version = ++cur[st];
            } else if (act_is_compute(a->kind) && m >= 0 && m < T) {
                if (a->kind == ACT_F) fver[(size_t)st * T + m] = cur[st];
                a->version = a->kind == ACT_F ? cur[st] : fver[(size_t)st * T + m];
            }
        }
        /* B/I/W whose F is on another worker (an invalid IR) keep what fver held; make
         * them well defined */
        for (int i = 0; i < lists[w].n; i++) {
            action *a = &lists[w].a[i];
            if (act_is_compute(a->kind) && a->version < 0) a->version = 0;
        }
    }
    free(fver);
    free(cur);
}

/* --- lowering ------------------------------------------------------------------------ */

typedef struct ev {
    double t;     /* time */
    int cls;      /* 0 communication, 1 compute */
    long id;      /* pair id, or the index in the compute order */
    action a;
} ev;

static int ev_cmp(const void *pa, const void *pb)
{
    const ev *x = pa, *y = pb;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->cls != y->cls) return x->cls - y->cls;
    return (x->id > y->id) - (x->id < y->id);
}

/* Duration of a of stage st under cost ([S*3] F, I, W; NULL = unit costs); tiny is the
 * duration of an all-reduce or a step. */
static double dur_of(const action *a, const double *cost, double tiny)
{
    double f = 1, i = 1, w = 1;
    if (cost && a->stage >= 0) {
        f = cost[3 * a->stage], i = cost[3 * a->stage + 1], w = cost[3 * a->stage + 2];
    }
    switch (a->kind) {
    case ACT_F: return f;
    case ACT_B: return i + w;
    case ACT_I: return i;
    case ACT_W: return w;
    default: return tiny;
    }
}

typedef struct evvec {
    ev *e;
    int n, cap;
} evvec;

static int evvec_push(evvec *v, ev e)
{
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 32;
        ev *p = realloc(v->e, (size_t)cap * sizeof *p);
        if (!p) return -1;
        v->e = p;
        v->cap = cap;
    }
    v->e[v->n++] = e;
    return 0;
}

static int lower_compute(const schedule *s, actvec *lists, const double *cost, plumb_err *err)
{
    int S = s->nstages, T = sched_total_mb(s), W = s->nworkers, rc = -1;
    size_t ST = (size_t)S * (size_t)T;
    char a_txt[48];
    int *fw = malloc(ST * sizeof *fw), *bw = malloc(ST * sizeof *bw);
    double *fend = malloc(ST * sizeof *fend), *bend = malloc(ST * sizeof *bend);
    double *iend = malloc(ST * sizeof *iend);
    int *pc = calloc((size_t)W, sizeof *pc), *arcnt = calloc((size_t)W * S, sizeof *arcnt);
    double *freet = calloc((size_t)W, sizeof *freet);
    double **start = calloc((size_t)W, sizeof *start);
    evvec *evs = calloc((size_t)W, sizeof *evs);
    double tiny = 1e-3;
    if (!fw || !bw || !fend || !bend || !iend || !pc || !arcnt || !freet || !start || !evs) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    if (cost) {
        tiny = -1;
        for (int i = 0; i < 3 * S; i++)
            if (!(cost[i] > 0) || cost[i] > 1e300) {
                err_set(err, NULL, "stage_cost", "stage %d: expected times > 0 (got %g)", i / 3,
                        cost[i]);
                goto done;
            }
        for (int i = 0; i < 3 * S; i++)
            if (tiny < 0 || cost[i] < tiny) tiny = cost[i];
        tiny *= 1e-3;
    }
    for (size_t i = 0; i < ST; i++) fw[i] = bw[i] = -1, fend[i] = bend[i] = iend[i] = -1;
    long total = 0;
    for (int w = 0; w < W; w++) {
        start[w] = malloc((size_t)(lists[w].n + 1) * sizeof **start);
        if (!start[w]) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
        total += lists[w].n;
        for (int i = 0; i < lists[w].n; i++) {
            const action *a = &lists[w].a[i];
            if (act_is_comm(a->kind)) {
                err_set(err, NULL, NULL, "worker %d action %d (%s): lowering expects a "
                        "compute-only order", w, i, action_format(a, a_txt, sizeof a_txt));
                goto done;
            }
            if (!act_is_compute(a->kind)) continue;
            if (a->stage < 0 || a->stage >= S || a->microbatch < 0 || a->microbatch >= T) {
                err_set(err, NULL, NULL, "worker %d action %d (%s): stage or microbatch out of "
                        "range", w, i, action_format(a, a_txt, sizeof a_txt));
                goto done;
            }
            size_t k = (size_t)a->stage * T + a->microbatch;
            if (a->kind == ACT_F) {
                if (fw[k] >= 0) {
                    err_set(err, NULL, NULL, "stage %d microbatch %d has two forwards (workers "
                            "%d and %d)", a->stage, a->microbatch, fw[k], w);
                    goto done;
                }
                fw[k] = w;
            } else if (a->kind == ACT_B || a->kind == ACT_I) {
                if (bw[k] >= 0) {
                    err_set(err, NULL, NULL, "stage %d microbatch %d has two backwards (workers "
                            "%d and %d)", a->stage, a->microbatch, bw[k], w);
                    goto done;
                }
                bw[k] = w;
            }
        }
    }
    long done_n = 0;
    while (done_n < total) {
        int progress = 0;
        for (int w = 0; w < W; w++) {
            while (pc[w] < lists[w].n) {
                const action *a = &lists[w].a[pc[w]];
                int st = a->stage, m = a->microbatch;
                size_t k = (size_t)(st >= 0 ? st : 0) * T + (m >= 0 ? m : 0);
                double ready = freet[w];
                if (a->kind == ACT_F && st > 0) {
                    size_t kp = k - (size_t)T;
                    if (fend[kp] < 0) {
                        if (fw[kp] == w || fw[kp] < 0) {
                            err_set(err, NULL, NULL, "worker %d action %d (%s): its input "
                                    "(forward of stage %d) is %s", w, pc[w],
                                    action_format(a, a_txt, sizeof a_txt), st - 1,
                                    fw[kp] < 0 ? "never computed" : "computed later on the "
                                    "same worker");
                            goto done;
                        }
                        break;
                    }
                    if (fend[kp] > ready) ready = fend[kp];
                } else if (a->kind == ACT_B || a->kind == ACT_I) {
                    if (fend[k] < 0 || fw[k] != w) {
                        err_set(err, NULL, NULL, "worker %d action %d (%s): backward before its "
                                "forward on this worker", w, pc[w],
                                action_format(a, a_txt, sizeof a_txt));
                        goto done;
                    }
                    if (st < S - 1) {
                        size_t kn = k + (size_t)T;
                        if (bend[kn] < 0) {
                            if (bw[kn] == w || bw[kn] < 0) {
                                err_set(err, NULL, NULL, "worker %d action %d (%s): its output "
                                        "gradient (backward of stage %d) is %s", w, pc[w],
                                        action_format(a, a_txt, sizeof a_txt), st + 1,
                                        bw[kn] < 0 ? "never computed" : "computed later on the "
                                        "same worker");
                                goto done;
                            }
                            break;
                        }
                        if (bend[kn] > ready) ready = bend[kn];
                    }
                } else if (a->kind == ACT_W) {
                    if (iend[k] < 0) {
                        err_set(err, NULL, NULL, "worker %d action %d (%s): W before its I", w,
                                pc[w], action_format(a, a_txt, sizeof a_txt));
                        goto done;
                    }
                } else if (a->kind == ACT_ALLREDUCE) {
                    /* barrier: every replica at its matching all-reduce of this stage */
                    int kth = arcnt[(size_t)w * S + st], all = 1;
                    for (int j = 0; j < s->replicas[st] && all; j++) {
                        int w2 = s->stage_workers[s->stage_first[st] + j];
                        if (pc[w2] >= lists[w2].n) {
                            all = 0;
                            break;
                        }
                        const action *b = &lists[w2].a[pc[w2]];
                        if (b->kind != ACT_ALLREDUCE || b->stage != st ||
                            arcnt[(size_t)w2 * S + st] != kth)
                            all = 0;
                        else if (freet[w2] > ready)
                            ready = freet[w2];
                    }
                    if (!all) break;
                    for (int j = 0; j < s->replicas[st]; j++) {
                        int w2 = s->stage_workers[s->stage_first[st] + j];
                        start[w2][pc[w2]] = ready;
                        freet[w2] = ready + tiny;
                        arcnt[(size_t)w2 * S + st]++;
                        pc[w2]++;
                        done_n++;
                    }
                    progress = 1;
                    continue;
                }
                double end = ready + dur_of(a, cost, tiny);
                start[w][pc[w]] = ready;
                freet[w] = end;
                if (a->kind == ACT_F) fend[k] = end;
                if (a->kind == ACT_B || a->kind == ACT_I) bend[k] = end;
                if (a->kind == ACT_I) iend[k] = end;
                if (a->kind == ACT_B) iend[k] = end;
                pc[w]++;
                done_n++;
                progress = 1;
            }
        }
        if (!progress) {
            for (int w = 0; w < W; w++)
                if (pc[w] < lists[w].n) {
                    err_set(err, NULL, NULL, "the compute order cannot run: worker %d waits "
                            "forever at action %d (%s)", w, pc[w],
                            action_format(&lists[w].a[pc[w]], a_txt, sizeof a_txt));
                    break;
                }
            goto done;
        }
    }
    /* the computes, then a SEND/RECV pair wherever data crosses workers */
    for (int w = 0; w < W; w++)
        for (int i = 0; i < lists[w].n; i++) {
            ev e = {start[w][i], 1, i, lists[w].a[i]};
            if (evvec_push(&evs[w], e)) goto oom;
        }
    for (int st = 0; st < S; st++)
        for (int m = 0; m < T; m++) {
            size_t k = (size_t)st * T + m;
            if (st + 1 < S && fw[k] >= 0 && fw[k + T] >= 0 && fw[k] != fw[k + T]) {
                long id = (long)k * 2;
                ev snd = {fend[k], 0, id, act_make(ACT_SEND_F, st, m)};
                snd.a.peer = fw[k + T], snd.a.peer_stage = st + 1;
                ev rcv = {fend[k], 0, id, act_make(ACT_RECV_F, st + 1, m)};
                rcv.a.peer = fw[k], rcv.a.peer_stage = st;
                if (evvec_push(&evs[fw[k]], snd) || evvec_push(&evs[fw[k + T]], rcv)) goto oom;
            }
            if (st > 0 && bw[k] >= 0 && bw[k - T] >= 0 && bw[k] != bw[k - T]) {
                long id = (long)k * 2 + 1;
                ev snd = {bend[k], 0, id, act_make(ACT_SEND_B, st, m)};
                snd.a.peer = bw[k - T], snd.a.peer_stage = st - 1;
                ev rcv = {bend[k], 0, id, act_make(ACT_RECV_B, st - 1, m)};
                rcv.a.peer = bw[k], rcv.a.peer_stage = st;
                if (evvec_push(&evs[bw[k]], snd) || evvec_push(&evs[bw[k - T]], rcv)) goto oom;
            }
        }
    for (int w = 0; w < W; w++) {
        if (evs[w].n > 1) qsort(evs[w].e, (size_t)evs[w].n, sizeof *evs[w].e, ev_cmp);
        lists[w].n = 0;
        for (int i = 0; i < evs[w].n; i++)
            if (actvec_push(&lists[w], evs[w].e[i].a)) goto oom;
    }
    rc = 0;
    goto done;
oom:
    err_set(err, NULL, NULL, "out of memory");
done:
    free(fw), free(bw), free(fend), free(bend), free(iend), free(pc), free(arcnt), free(freet);
    if (start)
        for (int w = 0; w < W; w++) free(start[w]);
    free(start);
    if (evs)
        for (int w = 0; w < W; w++) free(evs[w].e);
    free(evs);
    return rc;
}

/* STEPs already in the order (an imported file's) are taken out while the transfers are
 * timed and put back after the same compute action, past the sends that follow it, as
 * sched_place_steps would place them. */
int sched_lower(const schedule *s, actvec *lists, const double *cost, plumb_err *err)
{
    int W = s->nworkers, rc = -1;
    actvec *steps = calloc((size_t)W, sizeof *steps);
    if (!steps) return err_set(err, NULL, NULL, "out of memory");
    for (int w = 0; w < W; w++) {
        int n = 0, kept = 0;
        for (int i = 0; i < lists[w].n; i++) {
            action a = lists[w].a[i];
            if (a.kind == ACT_STEP) {
                a.microbatch = kept; /* the anchor: compute actions before it */
                if (actvec_push(&steps[w], a)) goto oom;
            } else {
                lists[w].a[n++] = a;
                kept++;
            }
        }
        lists[w].n = n;
    }
    if (lower_compute(s, lists, cost, err)) goto done;
    for (int w = 0; w < W; w++) {
        if (!steps[w].n) continue;
        int *after = malloc((size_t)steps[w].n * sizeof *after);
        if (!after) goto oom;
        int k = 0, seen = 0;
        for (int i = -1; i < lists[w].n && k < steps[w].n; i++) {
            if (i >= 0 && !act_is_comm(lists[w].a[i].kind)) seen++;
            while (k < steps[w].n && steps[w].a[k].microbatch == seen) {
                int j = i;
                while (j + 1 < lists[w].n && act_is_comm(lists[w].a[j + 1].kind)) j++;
                after[k++] = j;
            }
        }
        while (k < steps[w].n) after[k++] = lists[w].n - 1;
        for (int q = 0; q < steps[w].n; q++) {
            steps[w].a[q].microbatch = -1;
            if (q && after[q] < after[q - 1]) after[q] = after[q - 1];
        }
        int bad = insert_after(&lists[w], after, steps[w].a, steps[w].n);
        free(after);
        if (bad) goto oom;
    }
    rc = 0;
    goto done;
oom:
    err_set(err, NULL, NULL, "out of memory");
done:
    for (int w = 0; w < W; w++) actvec_free(&steps[w]);
    free(steps);
    return rc;
}

int sched_finish(schedule *s, actvec *lists, const double *cost, plumb_err *err)
{
    if (sched_add_allreduce(s, lists, err)) return -1;
    if (sched_lower(s, lists, cost, err)) return -1;
    if (sched_place_steps(s, lists, err)) return -1;
    sched_assign_versions(s, lists);
    return sched_adopt(s, lists, err);
}
