/* native_baseline.c: the plans the native planner must never lose to, and how they are
 * scored: plain data parallelism (one stage on every device) and any given plan (a
 * straight pipeline, PipeDream's partition) simulated under the same settings the planner
 * uses (schedule, microbatch size, default microbatch count, recomputation when allowed,
 * memory limit, iterations), and that scoring itself (nm_sim_score, `plumb sim`'s run of
 * the plan unless the iterations are fixed). Tests and
 * bench/native.sh compare the planner with these. */
#include "planner/native_impl.h"

#include <stdlib.h>

#include "core/schedule.h"
#include "sim/sim.h"

sim_report *nm_sim_score(const plan *pl, const native_options *o, plumb_err *err)
{
    sim_options so;
    sim_options_init(&so);
    so.memory_limit_bytes = o->memory_limit_bytes;
    /* the default: the run `plumb sim` of the written plan makes (sim_run grows the IR to
     * the steady window and doubles it until the window's gaps settle), so the figures
     * the planner ranks by and reports are that command's */
    if (o->sim_iterations <= 0) return sim_run(pl, &so, err);
    /* o->sim_iterations given: that many, replayed once as built */
    schedule *sc = schedule_from_plan(pl, o->sim_iterations, err);
    if (!sc) return NULL;
    so.sched = sc;
    sim_report *r = sim_run(pl, &so, err);
    schedule_free(sc);
    return r;
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
        sim_report *r = nm_sim_score(q, o, &e);
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
