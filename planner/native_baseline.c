/* native_baseline.c: the plans the native planner must never lose to, and how they are
 * scored: plain data parallelism (one stage on every device) and any given plan (a
 * straight pipeline, PipeDream's partition) simulated under the same settings the planner
 * uses (schedule, microbatch size, default microbatch count, recomputation when allowed,
 * memory limit, iterations), and that scoring itself (nm_sim_score, the cheap window;
 * nm_sim_settled, `plumb sim`'s run). Tests and bench/native.sh compare the planner with
 * these. */
#include "planner/native_impl.h"

#include <stdlib.h>

#include "core/schedule.h"
#include "sim/engine.h" /* sim_steady_window */
#include "sim/sim.h"

sim_report *nm_sim_score(const plan *pl, const native_options *o, plumb_err *err)
{
    /* the first steady window: 3 iterations for the flushing schedules (their iterations
     * repeat), what the window needs for pipedream and 2bw (the fill and drain left out);
     * o->sim_iterations when given */
    int iters = o->sim_iterations > 0 ? o->sim_iterations : 3;
    schedule *sc = schedule_from_plan(pl, iters, err);
    if (!sc) return NULL;
    int k0, k1, need = sim_steady_window(sc, &k0, &k1);
    /* a longer IR may need a longer window again (a worker of pipedream's with one
     * microbatch an iteration holds more of them once the pipeline is deeper than 3
     * iterations): rebuilt until the window fits, as sim_run raises its own */
    while (o->sim_iterations <= 0 && need > iters && iters < NM_SCORE_MAX_ITERATIONS) {
        iters = need < NM_SCORE_MAX_ITERATIONS ? need : NM_SCORE_MAX_ITERATIONS;
        schedule_free(sc);
        sc = schedule_from_plan(pl, iters, err);
        if (!sc) return NULL;
        need = sim_steady_window(sc, &k0, &k1);
    }
    sim_options so;
    sim_options_init(&so);
    so.memory_limit_bytes = o->memory_limit_bytes;
    so.sched = sc;
    sim_report *r = sim_run(pl, &so, err);
    schedule_free(sc);
    return r;
}

sim_report *nm_sim_settled(const plan *pl, const native_options *o, plumb_err *err)
{
    if (o->sim_iterations > 0) return nm_sim_score(pl, o, err); /* the IR fixed */
    sim_options so;
    sim_options_init(&so);
    so.memory_limit_bytes = o->memory_limit_bytes;
    return sim_run(pl, &so, err);
}

int nm_sim_exact(const sim_report *r, const native_options *o)
{
    return o->sim_iterations > 0 || (r->steady && r->settled);
}

plan *native_dp_plan(const profile *p, const cluster *c, int ndev, plumb_err *err)
{
    if (ndev <= 0 || ndev > c->ndevices) ndev = c->ndevices;
    plan *pl = plan_new(p, c, 1);
    int *devs = malloc((size_t)ndev * sizeof *devs);
    if (!pl || !devs) goto oom;
    for (int d = 0; d < ndev; d++) devs[d] = d;
    if (plan_set_stage(pl, 0, 0, p->nlayers - 1, ndev, devs)) goto oom;
    free(devs);
    return pl;
oom:
    free(devs);
    plan_free(pl);
    err_set(err, NULL, NULL, "out of memory");
    return NULL;
}

double native_sim_as(const plan *pl, const native_options *o, int *recompute, int *fits)
{
    native_options dflt;
    if (!o) {
        native_options_init(&dflt);
        o = &dflt;
    }
    sched_kind k = o->schedule >= 0 && o->schedule < SCHED_NKINDS ? (sched_kind)o->schedule
                                                                    : SCHED_1F1B_FLUSH;
    int rc0 = o->recompute == 1 ? 1 : 0, rc1 = o->recompute == 0 ? 0 : 1;
    double best = -1;
    int bestrc = rc0, anyfit = 0;
    for (int rc = rc0; rc <= rc1; rc++) {
        plan *q = plan_clone(pl);
        if (!q) return -1;
        q->schedule = k;
        q->microbatch_size = o->microbatch_size > 0 ? o->microbatch_size : pl->prof->minibatch;
        q->microbatches = o->microbatches > 0 ? o->microbatches
                                              : native_default_microbatches(q, k);
        q->recompute = rc;
        q->optimizer = o->optimizer;
        native_runtime_apply(q, o);
        if (!sched_kind_chunked(k)) q->chunks = 1;
        plumb_err e;
        sim_report *r = nm_sim_settled(q, o, &e);
        plan_free(q);
        if (!r) continue;
        /* the fitting run wins over one that does not; then the faster */
        if ((r->fits && !anyfit) || (r->fits == anyfit && r->samples_per_s > best)) {
            best = r->samples_per_s;
            bestrc = rc;
            anyfit = r->fits;
        }
        sim_report_free(r);
    }
    if (recompute) *recompute = bestrc;
    if (fits) *fits = anyfit;
    return best;
}
