/* search3d_impl.h: internals of the 3D search's estimate (planner/search3d_est.c, the
 * driver; search3d_est_pipe.c, the pipeline's makespan overlapped: closed forms and the
 * replay of the order; search3d_est_sync.c, the synchronous replay under p2p sync;
 * search3d_est_dp.c, the data-parallel all-reduce and the step after the pipeline). Not a
 * public API: the rest of plumb calls planner/search3d.h. Units: seconds, bytes. */
#ifndef PLUMB_PLANNER_SEARCH3D_IMPL_H
#define PLUMB_PLANNER_SEARCH3D_IMPL_H

#include "core/plan.h"
#include "core/schedule.h"
#include "core/schedule_traits.h"
#include "planner/search3d.h"
#include "sim/cost.h"
#include "sim/engine.h"

/* One virtual stage as priced (its first replica): forward, fused backward, input and
 * weight gradient (I, W), the blocking tensor-parallel time inside them, the optimizer
 * step, and its send to the next stage. */
typedef struct est_stage {
    double F, B, I, W, tp, step, send;
    double hold; /* of send: the time it holds its link and ports (bytes over rate) */
    int lvl;     /* the level its path crosses (sim_net_path), -1 when nothing moves */
    /* per level l >= 1: the stage's replicas (one sending worker each, on its tensor-parallel
     * group's first device) in its first replica's level-(l - 1) group, which share that
     * group's level-l egress port with it; 1 at level 0 (the device's own port) */
    int peers[CLUSTER_MAX_LEVELS];
    /* 1: a send leaving the server holds a lane per tensor-parallel rank of the group's own
     * (tp > 1, sim_net_p2p_lanes), fewer than two sends take, so the two of a batch leave
     * one after the other */
    int own_queue;
} est_stage;

/* One action of a schedule's order that the overlapped replay (est_replay) times: a
 * forward, backward (B, or I and W) or step of stage k on microbatch mb; cross: its input
 * comes from another worker (a forward's from stage k - 1, a B's or I's from k + 1). */
typedef struct est_op {
    int k, mb;
    unsigned char kind, cross;
} est_op;

/* A schedule's order as est_replay reads it (est_order_of): per worker w its actions
 * op[off[w] .. off[w + 1]) in list order, the transfers and the rest left out (they hold
 * nothing there); bad: an F, B, I or W names no stage or microbatch of the schedule. */
typedef struct est_order {
    int *off;
    est_op *op;
    int bad;
} est_order;

/* The data-parallel rings of one plan's stages (their groups: sim_cost_dp_group), each
 * priced once (sim_net_ring) for every ZeRO stage and part of an estimate that asks, and
 * shared by the stages of a rank whose groups are the same devices (interleaved's
 * chunks). Set up by est_rings_init, freed by est_rings_free. */
typedef struct est_rings {
    int S, p, nmax;
    double *per_byte, *fixed;
    signed char *state; /* per stage: 0 not priced yet, 1 priced, -1 no ring */
    int *rank_stage;    /* per rank: the stage whose group rank_devs holds, -1 none */
    int *rank_n, *rank_devs, *devs; /* per rank its group (p x nmax); scratch of nmax */
} est_rings;

/* search3d_est_dp.c: rg set up for plan pl's stages (p ranks): 0, or -1 on no memory
 * (rg then holds nothing to free). */
int est_rings_init(est_rings *rg, const plan *pl, int p);

/* search3d_est_dp.c: frees what est_rings_init allocated (rg may be zeroed). */
void est_rings_free(est_rings *rg);

/* The pricing schedules of one layout at one set of stage costs (est_cache). */
typedef struct est_scheds {
    schedule *s, *full; /* the pricing schedule, the V kinds' longer order (or NULL) */
    est_order ord;      /* the order replayed (full's, else s's) as est_replay reads it */
    double *cost;       /* the 3 x stages costs they were placed with */
    int costed;         /* schedule_plan_costs gave cost (else the unit costs) */
} est_scheds;

/* What the estimates of one layout share across its recomputations and ZeRO stages
 * (search3d_estimate_cached): the pricing schedules of the last two sets of stage costs
 * they were placed with (schedule_plan_costs: any recomputation adds a forward to I, so
 * full and selective share theirs, none has its own), and the stages' rings. Zeroed to
 * start; est_cache_free frees it. */
typedef struct est_cache {
    est_scheds sc[2];
    int last;     /* the slot set last */
    est_rings rg; /* the stages' rings, set once rg.per_byte is */
} est_cache;

/* search3d_est.c: search3d_estimate_zeros, sharing c (NULL: nothing shared) with the
 * earlier calls on the same layout (the same stages, devices, schedule, chunks and
 * microbatches; the runtime, recomputation and ZeRO stage free). 0, or -1 with err. */
int search3d_estimate_cached(const plan *pl, int nz, const int *zeros, search3d_est *out,
                             est_cache *c, plumb_err *err);

/* search3d_est.c: frees what c holds and zeroes it. */
void est_cache_free(est_cache *c);

/* search3d_est_dp.c: the exposed part of rank r's data-parallel all-reduces after its
 * stages' last backwards (and the parameter all-gather apart, where it is), seconds; 0
 * where nothing is reduced or the ring cannot be priced (rg: est_rings_init's, of pl).
 * Allocates nothing it keeps. */
double est_exposed_allreduce(const sim_model *mo, const sim_net *net, est_rings *rg,
                             const plan *pl, const sched_traits *tr, int r, int p,
                             const est_stage *st, int split);

/* search3d_est_dp.c: stage k's own data-parallel ring, seconds, 0 where nothing is reduced or
 * the ring cannot be priced (rg: est_rings_init's, of pl). f < 0: the part of its all-reduce
 * left exposed after its last backward of du seconds (0 under grad_sync end; the reduce-scatter
 * alone where the parameter all-gather runs apart). f >= 0: where the all-gather runs apart,
 * the wait of the stage's next first forward (f seconds) from the gather's start, *whole the
 * gather's whole time (0 where it does not run apart). Allocates nothing it keeps. */
double est_stage_allreduce(const sim_model *mo, const sim_net *net, est_rings *rg,
                           const plan *pl, int k, double du, double f, double *whole);

/* search3d_est_dp.c: the time the all-reduces and steps add after the pipeline (the worst
 * rank's, less its slack), seconds; *dp_s and *step_s its two parts. expo: per stage, its
 * rank's exposed all-reduce at the rank's first stage (0 elsewhere). */
double est_tail(const est_stage *st, const double *expo, int S, int p,
                const sched_traits *tr, double *dp_s, double *step_s);

/* search3d_est_pipe.c: schedule s's order as est_replay reads it, into o (est_order_free
 * frees it). 0, or -1 on no memory (o then holds nothing). */
int est_order_of(const schedule *s, est_order *o);

/* search3d_est_pipe.c: frees what est_order_of allocated (o may be zeroed). */
void est_order_free(est_order *o);

/* search3d_est_pipe.c: the overlapped replay of schedule s's order (o: est_order_of's of s) at
 * the priced times, iters times over; the makespan, or -1 when the lists stall. tail: NULL (the
 * steps and all-reduces cost nothing), or of 2 S: tail[k] the time stage k's STEP holds its
 * worker (its exposed all-reduce and its step), tail[S + k] how long after its worker's last
 * STEP the stage's first forward of the next iteration may start (its parameter all-gather);
 * then the steps count. Scratch: done (2 S M iters), t (2 x workers), pos (workers); *first:
 * when the first iteration ends. */
double est_replay(const schedule *s, const est_order *o, const est_stage *st,
                  const double *tail, int sends, int iters, double *done, double *t, int *pos,
                  double *first);

/* search3d_est_pipe.c: the closed-form parts of out (compute_s, tp_s, bubble_s, p2p_s)
 * from the priced stages; *fill_p2p: the part of p2p_s that is the fill and drain's
 * sends. Cannot fail. */
void est_pipeline(const est_stage *st, int S, int p, int m, int split, int sync,
                  const sched_traits *tr, search3d_est *out, double *fill_p2p);

/* search3d_est_sync.c: the makespan of an interleaved or zb-h1 pipeline's computations
 * under the simulator's synchronous rules (sync 1) or without them (sync 0), each stage's
 * ALLREDUCE holding its worker ar[k] (NULL: none); -1 when the
 * lists stall, or on no memory (it frees what it allocates). *slope: the steady state's
 * time per microbatch (interleaved: its steady pairs'; zb-h1: its W's), 0 when too few. */
double est_sync_replay(const schedule *s, const est_stage *st, const double *ar,
                       const sim_net *net, int p, int v, int sync, double *slope);

#endif
