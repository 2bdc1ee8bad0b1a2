/* memory.h: the simulator's memory model (sim/memory.c). Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_MEMORY_H
#define PLUMB_SIM_MEMORY_H

#include "sim/engine.h"
#include "sim/sim.h"

/* The optimizer state per parameter byte: sgd 0, momentum 1, adam 2 (the native planner
 * prices its estimate with the same figure). */
double sim_memory_optimizer_mul(optimizer_kind opt);

/* A stage's training state and traffic per parameter byte (the profile's parameter bytes,
 * in the plan's precision). */
typedef struct sim_state_mul {
    double gradients;  /* gradient buffers */
    double optimizer;  /* optimizer state, with mixed precision the fp32 master weights
                          (and with fp16 the fp32 copy of the gradients) too; divided by
                          the stage's replicas with ZeRO-1 */
    double reduce;     /* the data-parallel reduction as all-reduce bytes for the ring: the
                          gradients, or with ZeRO-1 a reduce-scatter of the gradients and
                          an all-gather of the parameters, (gradients + 1) / 2 */
    double step;       /* bytes one optimizer step reads and writes (sharded with ZeRO-1) */
} sim_state_mul;

/* Fills out for precision prec, ZeRO stage zero (0 or 1) over `replicas`, optimizer opt.
 * fp32 and tf32 without ZeRO: gradients 1, optimizer sim_memory_optimizer_mul, reduce 1,
 * step sim_step_bytes_per_param (the model before mixed precision). bf16: gradients 4 / e
 * (fp32 main gradients, e = 2 bytes an element), optimizer (4 master + 4 per state
 * tensor) / e. fp16: gradients 1 (fp16, as Megatron-LM keeps them), optimizer (4 master +
 * 4 fp32 gradients + 4 per state) / e. So bf16 with adam takes 2 + 4 + 12 = 18 bytes per
 * parameter, 6 + 12 / d with ZeRO-1 over d replicas (docs/sim.md). */
void sim_memory_state(dev_precision prec, int zero, int replicas, optimizer_kind opt,
                      sim_state_mul *out);

/* Fills out with worker w's memory: weights x versions[stage] (NULL or <= 0 entries
 * count 1 version), gradients, optimizer state (m's param_bytes, gradmem_bytes and
 * optmem_bytes; in a model without them, grad_bytes and opt), activations and gradient buffers
 * for the buffer slots of w's stages, the largest scratch; fits = total <= capacity. With
 * m->nccl_buffers (a Megatron-LM-style runtime) the activations are the most w's list holds
 * at once (in-flight microbatches' stash_bytes, received inputs waiting for their forward
 * at cut_bytes, one backward's transient_bytes) and the gradient buffers the largest of its
 * stages' (one backward at a time). */
void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double capacity, sim_memory *out);

/* Fills m->staging_bytes from m's schedule and cut_bytes: per worker, for each peer it
 * sends gradients to, schedule_send_bound's count of them x the pair's largest (a SEND_B
 * of stage s carries cut_bytes[s - 1]; activations and all-reduce messages are lent, not
 * staged). Returns 0, or -1 with err (out of memory, a schedule that deadlocks). */
int sim_memory_staging(sim_model *m, plumb_err *err);

/* Adds to tl a memory sample per change of each device's memory over the run (see
 * tl_counter): the device's peak rep->devices[i].mem.total less its buffer slots'
 * activations and buffers (with m->nccl_buffers, less its activations), plus those of the microbatches in flight at the time on each
 * of its stages (from the start of their F to the end of their B, or W when the backward
 * is split), at the per-slot size the memory model counts. The samples never exceed the
 * peak (the model reserves schedule_slots slots, the most the list can hold open).
 * Returns 0, or -1 with err when out of memory. */
int sim_memory_timeline(const sim_model *m, const sim_report *rep, timeline *tl,
                        plumb_err *err);

#endif
