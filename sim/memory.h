/* memory.h: the simulator's memory model (sim/memory.c). Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_MEMORY_H
#define PLUMB_SIM_MEMORY_H

#include "sim/engine.h"
#include "sim/sim.h"

/* Fills out with worker w's memory at its peak: weights x versions[stage] (NULL or <= 0
 * entries count 1 version), gradients, optimizer state for opt, the engine's peak
 * activation bytes, the gradient buffers for `inflight` microbatches in flight (at least
 * 1); fits = total <= capacity. */
void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double peak_act_bytes, int inflight, double capacity, sim_memory *out);

#endif
