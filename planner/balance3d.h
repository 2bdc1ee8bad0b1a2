/* balance3d.h: balanced stages for a 3D layout (docs/llm.md, "Balanced stages"). Megatron-LM's
 * even split (planner/layout3d.h) gives every virtual stage the same number of blocks, so the
 * first stage also carries the embedding and the last the LM head. layout3d_balance moves
 * whole blocks between the pp x v virtual stages so that the slowest stage's time per
 * microbatch (F + B, recomputation, tensor-parallel collectives and the head, as the
 * simulator's cost model prices them) is as small as it can be, keeps the split only when
 * the simulator says that it fits and runs faster, and says what it gained. */
#ifndef PLUMB_PLANNER_BALANCE3D_H
#define PLUMB_PLANNER_BALANCE3D_H

#include "core/err.h"
#include "core/plan.h"
#include "sim/sim.h"

/* What balancing found for one layout. Times in seconds. */
typedef struct layout3d_balance_result {
    double even_s, balanced_s;   /* simulated iteration time of the even split, and of the
                                    plan layout3d_balance leaves (even_s when unchanged);
                                    both -1 when the even split is optimal and no report
                                    of it was given (nothing was simulated) */
    double candidate_s;          /* simulated iteration time of the last split tried (0 when
                                    none was: the even split is optimal) */
    double even_bottleneck_s;    /* the even split's slowest stage, F + B per microbatch */
    double bottleneck_s;         /* the last split tried's (the dynamic program's optimum
                                    under the memory caps); even_bottleneck_s when the
                                    even split is already optimal */
    int even_fits;               /* the simulator found the even split within memory; -1
                                    when it was not simulated */
    int changed;                 /* 1: pl's stages were replaced by the balanced split */
    int tried;                   /* 1: a split other than the even one was simulated */
    int memory_rounds;           /* balanced splits refused by the simulator's memory model
                                    before the one kept (each capped a stage's blocks) */
    int even_blocks;             /* blocks per virtual stage in the even split */
    int first_blocks, last_blocks; /* blocks of the first and last virtual stage of the
                                    plan left in pl */
} layout3d_balance_result;

/* Per virtual stage k of pl, the time of one microbatch (F + B, seconds, on the stage's
 * first replica) of each profile layer l as stage k's device prices it:
 * cost[k * nlayers + l]. The simulator's cost model prices them (sim_cost_build on a plan
 * of one stage per layer on that device, the plan's microbatch, recomputation, precision
 * and tensor parallelism; once per server type and place of the group in its server), so
 * a stage's time is the sum over its layers (the batch
 * gather, which the first and the last stage each pay once, sits on the first and the last
 * layer). Returns a malloc'd array of nstages x nlayers (the caller frees it), or NULL
 * with err set (out of memory, a stage without devices). */
double *layout3d_layer_costs(const plan *pl, plumb_err *err);

/* Per virtual stage k of pl, the seconds its pipeline receives add to one microbatch
 * beyond its layers: the scatter-gather's all-gathers after them (sim_cost_recv_gather_s:
 * tp > 1 without sequence parallelism, p2p_split scatter-gather; of the input where stage
 * k - 1 sits on another device, of the output gradient where stage k + 1 does), at the
 * cuts of pl's current split, which a transformer's blocks make the same wherever it cuts.
 * Fills fixed[0..nstages); returns 0, or -1 with err (out of memory). */
int layout3d_recv_gathers(const plan *pl, double *fixed, plumb_err *err);

/* layout3d_balance_split with fixed[k] (NULL: none; layout3d_recv_gathers) added to stage
 * k's time. */
double layout3d_balance_split_fixed(const double *cost, const double *fixed, int blocks,
                                    int nstages, const int *cap, int *count);

/* The split of `blocks` blocks (profile layers 1 .. blocks; layer 0 the embedding, layer
 * blocks + 1 the head) into nstages contiguous ranges, at least one block each, that
 * minimises the largest stage time, stage k's time being the sum of cost[k * (blocks + 2)
 * + l] over its layers (the embedding in stage 0, the head in the last); cap[k] (NULL: no
 * cap) bounds stage k's blocks. Among the splits with that optimum it takes the one
 * closest to the even split (least sum of |blocks of stage k - blocks / nstages|).
 * Writes count[k], the blocks of stage k, and returns the optimum (seconds), or -1 when
 * no split meets the caps (or out of memory). Exact: a dynamic program over (stage,
 * blocks placed), O(nstages x blocks^2). */
double layout3d_balance_split(const double *cost, int blocks, int nstages, const int *cap,
                              int *count);

/* The most memory rounds of layout3d_balance, each one simulation. */
#define BALANCE3D_MAX_ROUNDS 32

/* Balances plan pl, a layout3d_build plan (the embedding, the blocks and the head as its
 * profile's layers, its stages an even split): prices the layers (layout3d_layer_costs),
 * takes the split of layout3d_balance_split and, when it differs from the even one,
 * simulates it with sim_run under so (NULL: defaults; so->memory_limit_bytes lowers the
 * devices' capacity); while a device does not fit, caps its stages' blocks one below what
 * they held and splits again (from the even split's own report too when it does not fit,
 * so that a split which fits may be found), at most BALANCE3D_MAX_ROUNDS times. The split
 * replaces pl's stages (devices kept) only when it fits and simulates faster than the even
 * split (or the even split does not fit); otherwise pl is left as it was. even_report
 * (borrowed; NULL: simulated here when needed) is pl's own report under so. Nothing is
 * simulated when the even split is optimal. Fills *out. Returns 0, or -1 with err set
 * (fewer blocks than stages, out of memory, what sim_run refuses). */
int layout3d_balance(plan *pl, const sim_options *so, const sim_report *even_report,
                     layout3d_balance_result *out, plumb_err *err);

#endif
