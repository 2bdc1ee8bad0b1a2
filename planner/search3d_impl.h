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
} est_stage;

/* search3d_est_dp.c: the exposed part of rank r's data-parallel all-reduces after its
 * stages' last backwards (and the parameter all-gather apart, where it is), seconds; 0
 * where nothing is reduced or the ring cannot be priced. Allocates nothing it keeps. */
double est_exposed_allreduce(const sim_model *mo, const sim_net *net, const plan *pl,
                             const sched_traits *tr, int r, int p, const est_stage *st,
                             int split);

/* search3d_est_dp.c: stage k's own data-parallel ring, seconds, 0 where nothing is
 * reduced or the ring cannot be priced. f < 0: the part of its all-reduce left exposed
 * after its last backward of du seconds (0 under grad_sync end; the reduce-scatter alone
 * where the parameter all-gather runs apart). f >= 0: where the all-gather runs apart, the
 * wait of the stage's next first forward (f seconds) from the gather's start, *whole the
 * gather's whole time (0 where it does not run apart). Allocates nothing it keeps. */
double est_stage_allreduce(const sim_model *mo, const sim_net *net, const plan *pl, int k,
                           double du, double f, double *whole);

/* search3d_est_dp.c: the time the all-reduces and steps add after the pipeline (the worst
 * rank's, less its slack), seconds; *dp_s and *step_s its two parts. expo: per stage, its
 * rank's exposed all-reduce at the rank's first stage (0 elsewhere). */
double est_tail(const est_stage *st, const double *expo, int S, int p,
                const sched_traits *tr, double *dp_s, double *step_s);

/* search3d_est_pipe.c: the overlapped replay of schedule s's order at the priced times,
 * iters times over; the makespan, or -1 when the lists stall. tail: NULL (the steps and
 * all-reduces cost nothing), or of 2 S: tail[k] the time stage k's STEP holds its worker
 * (its exposed all-reduce and its step), tail[S + k] how long after its worker's
 * last STEP the stage's first forward of the next iteration may start (its parameter
 * all-gather); then the steps count. Scratch: done (2 S M iters), t (2 x workers), pos
 * (workers); *first: when the first iteration ends. */
double est_replay(const schedule *s, const est_stage *st, const double *tail, int sends,
                  int iters, double *done, double *t, int *pos, double *first);

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
