/* budget.c: the simulator's work budget: the actions one simulation will replay, estimated
 * from the plan before anything is generated, and the refusal of a run above the limit
 * (docs/sim.md, "Work budget"). */
#include "sim/sim.h"

#include <stdlib.h>

#include "core/schedule_traits.h"

double sim_actions_estimate(const plan *pl, int microbatches, int iterations)
{
    if (!pl || pl->nstages < 1 || !pl->stages || iterations < 1) return 0;
    int m = microbatches > 0 ? microbatches : pl->microbatches;
    const sched_traits *tr = sched_traits_of(pl->schedule);
    double per_mb = tr && tr->async ? 7 : 6; /* the asynchronous kinds step per microbatch */
    double act = 0;
    for (int st = 0; st < pl->nstages; st++) {
        int r = pl->stages[st].replicas > 0 ? pl->stages[st].replicas : 1;
        act += per_mb * (m > 0 ? m : 0) + 2.0 * r; /* F, B, 2 sends, 2 receives; all-reduce, step */
    }
    return act * iterations;
}

int sim_work_check(const plan *pl, int microbatches, int iterations, double limit,
                   const char *field, plumb_err *err)
{
    if (!(limit > 0)) limit = SIM_MAX_ACTIONS;
    double need = sim_actions_estimate(pl, microbatches, iterations);
    if (need <= limit) return 0;
    /* above the memory it may use: the generator's own line (its size in GiB) speaks */
    if (need * SCHED_BYTES_PER_ACTION > sched_memory_available()) return 0;
    int m = microbatches > 0 ? microbatches : pl->microbatches;
    return err_set(err, NULL, field ? field : "microbatches",
                   "%d stages x %d microbatches x %d iterations make about %.3g actions to "
                   "simulate, above the %.3g one run may take (about %.0f s): expected fewer "
                   "microbatches or stages", pl->nstages, m, iterations, need, limit,
                   limit / SIM_ACTIONS_PER_S);
}
