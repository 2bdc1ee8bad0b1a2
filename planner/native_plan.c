/* native_plan.c: from a priced partition to a plan: the microbatch counts the planner
 * runs each schedule with (nm_policy_microbatches, nm_default_microbatches,
 * nm_legacy_microbatches), the replica string (nm_config) and the plan itself (nm_plan). */
#include "planner/native_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long nm_gcd(long long a, long long b)
{
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int nm_policy_microbatches(sched_kind k, int nst, const int *reps)
{
    if (nst < 1) return 1;
    long long L = 1;
    int maxr = 1, W = 0;
    for (int i = 0; i < nst; i++) {
        int n = reps[i] > 0 ? reps[i] : 1;
        if (n > maxr) maxr = n;
        W += n;
        L = L / nm_gcd(L, n) * n;
        if (L > 4096) L = 4097;
    }
    /* flushing kinds: every replica of every stage gets 2 x depth microbatches per flush
     * (a replicated stage with one microbatch per replica idles through the whole fill
     * and drain), at most 4 per device used; the asynchronous kinds never drain: 4 x
     * stages, at least the largest replica count */
    const sched_traits *tr = sched_traits_of(k);
    int base = 2 * nst * maxr;
    if (base > 4 * W) base = 4 * W;
    if (tr->async) base = maxr;
    if (base < 4 * nst) base = 4 * nst;
    if (tr->mb_cover_inflight) {
        for (int i = 0; i < nst; i++) {
            int n = reps[i] > 0 ? reps[i] : 1, need = (nm_ceil_div(W, n) - 1) * n;
            if (need > base) base = need;
            W -= n;
        }
    }
    int unit = L <= 64 ? (int)L : maxr;
    if (tr->mb_per_replica && L <= 4096) unit = (int)L;
    return nm_ceil_div(base, unit) * unit;
}

int nm_default_microbatches(const nm_model *m, sched_kind k, const nm_part *pt)
{
    if (sched_kind_chunked(k)) return 2 * (pt->ranks > 0 ? pt->ranks : 1); /* chunks shrink the bubble */
    int reps[NM_MAX_STAGES];
    for (int i = 0; i < pt->nst; i++) reps[i] = pt->st[i].r * m->g;
    return nm_policy_microbatches(k, pt->nst, reps);
}

int nm_legacy_microbatches(const nm_model *m, sched_kind k, const nm_part *pt)
{
    int M = nm_default_microbatches(m, k, pt);
    if (sched_kind_chunked(k) || sched_traits_of(k)->async) return M; /* M-free memory */
    long long L = 1;
    int maxr = 1;
    for (int i = 0; i < pt->nst; i++) {
        int n = pt->st[i].r * m->g;
        if (n > maxr) maxr = n;
        L = L / nm_gcd(L, n) * n;
        if (L > 4096) L = 4097;
    }
    int base = 4 * pt->nst > maxr ? 4 * pt->nst : maxr;
    int unit = L <= 64 ? (int)L : maxr;
    if (sched_traits_of(k)->mb_per_replica && L <= 4096) unit = (int)L;
    int lm = nm_ceil_div(base, unit) * unit;
    return lm < M ? lm : M;
}

void nm_config(const nm_model *m, const nm_part *pt, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < pt->nst && o + 8 < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? "-" : "", pt->st[i].r * m->g);
    if (o + 8 >= n && n > 4) snprintf(buf + n - 4, 4, "...");
}

/* A chunked partition's stage i (one replica): its compute per microbatch (*compute, F +
 * B) and its transfers (*comm: its output to stage i + 1 and that gradient back, each the
 * path's time that nm_price's replay sends them in, nm_chunk_transfer's), which a unit
 * range's next unit (nm_stage_cost) does not see. */
static void chunked_stage_costs(const nm_model *m, const nm_setting *s, const nm_part *pt,
                                int i, double *compute, double *comm)
{
    const nm_stage *st = &pt->st[i];
    double F, B;
    nm_stage_compute(m, s, st->b0, st->b1, st->u, 1, &F, &B);
    *compute = F + B;
    *comm = 2 * nm_chunk_transfer(m, s, pt, i, NULL);
}

plan *nm_plan(const nm_model *m, const nm_setting *s, const nm_part *pt, plumb_err *err)
{
    plan *pl = plan_new(m->p, m->c, pt->nst);
    int *devs = malloc(((size_t)m->ndev + 1) * sizeof *devs);
    if (!pl || !devs) goto oom;
    for (int i = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        int nd = st->r * m->g;
        for (int k = 0; k < nd; k++) devs[k] = m->order[st->u * m->g + k];
        if (plan_set_stage(pl, i, m->bfirst[st->b0], m->bfirst[st->b1] - 1, nd, devs)) goto oom;
        if (sched_kind_chunked(s->kind)) {
            chunked_stage_costs(m, s, pt, i, &pl->stages[i].compute_s, &pl->stages[i].comm_s);
            continue;
        }
        nm_cost o;
        nm_stage_cost(m, s, st->b0, st->b1, st->u, st->r, m->ndev, &o);
        pl->stages[i].compute_s = o.c;
        pl->stages[i].comm_s = o.lat - o.c;
    }
    pl->schedule = s->kind;
    pl->chunks = sched_kind_chunked(s->kind) ? pt->nst / (pt->ranks > 0 ? pt->ranks : 1) : 1;
    pl->microbatch_size = s->mbsize;
    pl->microbatches = s->M;
    pl->recompute = s->recompute;
    pl->optimizer = s->opt;
    pl->pred_iteration_s = pt->iter_s;
    pl->pred_samples_per_s = pt->thr;
    char cfg[96];
    nm_config(m, pt, cfg, sizeof cfg);
    pl->planner_config = strdup(cfg);
    free(devs);
    if (!pl->planner_config) goto oom2;
    return pl;
oom:
    free(devs);
oom2:
    plan_free(pl);
    err_set(err, NULL, NULL, "out of memory");
    return NULL;
}
