/* synth.h: synthetic plans for the simulator's tests, its benchmark and quick experiments:
 * a chain of equal layers, a two-level cluster (servers of devices), and a plan that cuts
 * the chain into equal stages placed on consecutive devices. */
#ifndef PLUMB_SIM_SYNTH_H
#define PLUMB_SIM_SYNTH_H

#include "core/plan.h"

typedef struct sim_synth {
    int nstages;              /* (virtual) stages; with chunks > 1, ranks x chunks */
    int layers_per_stage;     /* >= 1 */
    int replicas;             /* replicas of every stage, >= 1 */
    double forward_ms, backward_ms;      /* per layer, at the profiled minibatch */
    double input_ms, weight_ms;          /* backward split per layer; < 0 = not split */
    double activation_bytes, parameter_bytes; /* per layer, at the profiled minibatch */
    int minibatch;            /* profiled minibatch (samples) */
    int devices_per_server;   /* level 0 count */
    int servers;              /* level 1 count; 0 = as many as the stages need */
    double bw_gbit[2], latency_us[2], egress_gbit[2]; /* per level; egress 0 = bandwidth */
    double memory_gib, speed;
    sched_kind schedule;
    int chunks;               /* virtual stages per device (the chunked kinds) */
    int microbatches, microbatch_size;
    int recompute;
    optimizer_kind optimizer;
} sim_synth;

/* Defaults: 4 stages of 1 layer, 1 replica, F = 1 ms, B = 2 ms, no split, 1 MB
 * activations, 4 MB parameters, minibatch 32, 8 devices per server, 100 Gb/s, 0 latency,
 * 80 GiB, speed 1, 1f1b-flush, 8 microbatches of 32 samples, sgd. */
void sim_synth_init(sim_synth *s);

/* Builds the plan (stage s replica j on device s' * replicas + j, where s' = s for
 * chunks == 1 and otherwise the rank the kind's placement gives it: s mod ranks, or the V;
 * sched_kind_rank). Returns NULL with err on a bad spec. */
plan *sim_synth_plan(const sim_synth *s, plumb_err *err);

/* The cluster alone: `servers` servers of `devices_per_server` devices. */
cluster *sim_synth_cluster(const sim_synth *s, plumb_err *err);

#endif
