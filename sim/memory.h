/* memory.h: the simulator's memory model (sim/memory.c). Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_MEMORY_H
#define PLUMB_SIM_MEMORY_H

#include "sim/engine.h"
#include "sim/sim.h"

/* The optimizer state per parameter byte: sgd 0, momentum 1, adam 2 (the native planner
 * prices its estimate with the same figure). */
double sim_memory_optimizer_mul(optimizer_kind opt);

/* Fills out with worker w's memory: weights x versions[stage] (NULL or <= 0 entries
 * count 1 version), gradients, optimizer state for opt, activations and gradient buffers
 * for the buffer slots of w's stages, the largest scratch; fits = total <= capacity. */
void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double capacity, sim_memory *out);

/* Fills m->staging_bytes from m's schedule and cut_bytes: per worker, for each peer it
 * sends gradients to, schedule_send_bound's count of them x the pair's largest (a SEND_B
 * of stage s carries cut_bytes[s - 1]; activations and all-reduce messages are lent, not
 * staged). Returns 0, or -1 with err (out of memory, a schedule that deadlocks). */
int sim_memory_staging(sim_model *m, plumb_err *err);

/* Adds to tl a memory sample per change of each device's memory over the run (see
 * tl_counter): the device's peak rep->devices[i].mem.total less its buffer slots'
 * activations and buffers, plus those of the microbatches in flight at the time on each
 * of its stages (from the start of their F to the end of their B, or W when the backward
 * is split), at the per-slot size the memory model counts. The samples never exceed the
 * peak (the model reserves schedule_slots slots, the most the list can hold open).
 * Returns 0, or -1 with err when out of memory. */
int sim_memory_timeline(const sim_model *m, const sim_report *rep, timeline *tl,
                        plumb_err *err);

#endif
