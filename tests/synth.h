/* synth.h: the simulator tests' synthetic fixtures (sim/synth.h) made or the test fails:
 * a plan from a spec, its simulation, a cluster of servers with one link level set, and the tensor-parallel
 * collectives of a plan's layers. Header-only: each test file is its own binary. */
#ifndef PLUMB_TESTS_SYNTH_H
#define PLUMB_TESTS_SYNTH_H

#include <criterion/criterion.h>

#include "core/err.h"
#include "core/plan.h"
#include "sim/sim.h"
#include "sim/synth.h"

/* sim_synth_plan(s); fails the test with the error's line when s is refused. The caller
 * frees the plan with plan_free. */
static inline plan *synth_plan(const sim_synth *s)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = sim_synth_plan(s, &e);
    cr_assert_not_null(pl, "synthetic plan: %s", e.msg);
    return pl;
}

/* sim_run(pl, o); fails the test with the error's line when the run is refused. The
 * caller frees the report with sim_report_free. */
static inline sim_report *synth_run(const plan *pl, const sim_options *o)
{
    plumb_err e;
    err_clear(&e);
    sim_report *r = sim_run(pl, o, &e);
    cr_assert_not_null(r, "sim_run: %s", e.msg);
    return r;
}

/* The cluster sim_synth_cluster builds from s. Fails the test when refused. The caller
 * frees it with cluster_free. */
static inline cluster *synth_cluster_of(const sim_synth *s)
{
    plumb_err e;
    err_clear(&e);
    cluster *c = sim_synth_cluster(s, &e);
    cr_assert_not_null(c, "synthetic cluster: %s", e.msg);
    return c;
}

/* `servers` servers of `per_server` devices (sim_synth_cluster): link level `level` (0
 * inside a server, 1 between servers) at gbit Gb/s, egress_gbit (0: the bandwidth) and
 * latency_us; the other level as sim_synth_init sets it. Fails the test when refused. The
 * caller frees the cluster with cluster_free. */
static inline cluster *synth_servers(int servers, int per_server, int level, double gbit,
                                     double egress_gbit, double latency_us)
{
    sim_synth s;
    sim_synth_init(&s);
    s.servers = servers;
    s.devices_per_server = per_server;
    s.bw_gbit[level] = gbit;
    s.egress_gbit[level] = egress_gbit;
    s.latency_us[level] = latency_us;
    return synth_cluster_of(&s);
}

/* The layout where a ring all-reduce contends with gradient transfers: two stages of 2
 * replicas under GPipe, 4 microbatches, one device per server, 10 GB/s between servers
 * through `lanes` lanes per server port (egress lanes x the bandwidth), 20 MB activations
 * (2 ms per transfer) and 4 ms backwards; parameter_bytes per stage (0: no ring). */
static inline void synth_contended_ring(sim_synth *s, int lanes, double parameter_bytes)
{
    sim_synth_init(s);
    s->schedule = SCHED_GPIPE;
    s->nstages = 2;
    s->replicas = 2;
    s->microbatches = 4;
    s->devices_per_server = 1;
    s->bw_gbit[1] = 80;
    s->egress_gbit[1] = 80.0 * lanes;
    s->activation_bytes = 20e6;
    s->parameter_bytes = parameter_bytes;
    s->backward_ms = 4;
}

/* Tensor parallelism tp on pl (its plan and its profile) and on each layer l of its
 * profile `fwd` forward and `bwd` backward collectives of bytes[l % nbytes] bytes (at the
 * profiled minibatch). */
static inline void synth_set_tp(plan *pl, int tp, const double *bytes, int nbytes, int fwd,
                                int bwd)
{
    pl->prof->tp = pl->tp = tp;
    for (int l = 0; l < pl->prof->nlayers; l++) {
        profile_layer *L = &pl->prof->layers[l];
        L->tp_collective_bytes = bytes[l % nbytes];
        L->tp_forward_collectives = fwd;
        L->tp_backward_collectives = bwd;
    }
}

#endif
