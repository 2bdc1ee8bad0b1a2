/* cost.h: the simulator's cost model (sim/cost.c): a plan and its schedule priced into the
 * engine's sim_model. Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_COST_H
#define PLUMB_SIM_COST_H

#include "core/plan.h"
#include "core/schedule.h"
#include "sim/engine.h"

/* Fills m (allocating its arrays; release with sim_model_release even on failure) for
 * schedule s of plan pl on network net; compute on straggler_device (-1 = none) is
 * multiplied by straggler_factor. Returns 0, or -1 with err when the schedule's stages and
 * workers do not match the plan's stages and devices. */
int sim_cost_build(sim_model *m, const plan *pl, const schedule *s, const sim_net *net,
                   int straggler_device, double straggler_factor, plumb_err *err);

#endif
