/* memory.h: the simulator's memory model (sim/memory.c). Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_MEMORY_H
#define PLUMB_SIM_MEMORY_H

#include "sim/engine.h"
#include "sim/sim.h"

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

#endif
