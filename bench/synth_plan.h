/* synth_plan.h: the synthetic plan the simulator's benchmarks share (header-only: each
 * bench is its own program): equal stages of one layer, 1 MB activations, 8 devices per
 * server, 2 us and 10 us latency, split backward for the kinds that split it. */
#ifndef PLUMB_BENCH_SYNTH_PLAN_H
#define PLUMB_BENCH_SYNTH_PLAN_H

#include "core/schedule_traits.h"
#include "sim/synth.h"

/* A plan of `stages` pipeline ranks (each with its kind's default chunks), each stage
 * replicated `replicas` times, `mb` microbatches. NULL with err on a bad shape; the
 * caller frees it with plan_free. */
static inline plan *bench_synth_plan(int kind, int stages, int replicas, int mb,
                                     plumb_err *err)
{
    sim_synth s;
    sim_synth_init(&s);
    s.schedule = (sched_kind)kind;
    s.chunks = sched_kind_chunks((sched_kind)kind);
    s.nstages = stages * s.chunks;
    s.replicas = replicas;
    s.microbatches = mb;
    s.latency_us[0] = 2;
    s.latency_us[1] = 10;
    if (sched_traits_of((sched_kind)kind)->split_backward) s.input_ms = s.weight_ms = 1;
    err_clear(err);
    return sim_synth_plan(&s, err);
}

#endif
