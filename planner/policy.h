/* policy.h: the planning rules every front end shares. `plumb plan`, `plumb sweep`, the
 * dashboard and `plumb train` call these, and nothing else decides them, so the dashboard
 * never shows a plan that `plumb plan` would not make:
 *  - how a cluster is resized to n GPUs (planner_cluster_resize);
 *  - how many microbatches a plan runs (planner_microbatches);
 *  - the even partitioner: contiguous ranges balanced by cost (planner_split_weights,
 *    planner_split_ranges) and the plan built on it (planner_split_plan);
 *  - the data-parallel baseline plan (planner_dp_plan).
 * Memory: returned plans and clusters are owned by the caller. */
#ifndef PLUMB_PLANNER_POLICY_H
#define PLUMB_PLANNER_POLICY_H

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/schedule.h"

#define PLANNER_MAX_GPUS 4096

/* The cluster c resized to n devices (1 <= n <= PLANNER_MAX_GPUS): within one server, a
 * server of n devices; beyond, ceil(n / per_server) servers (the inner levels kept up to
 * their original counts, the outermost taking the rest) with server types repeating c's
 * pattern. When that makes more than n devices (n not a multiple of the server size, or
 * the servers not filling the inner levels) the extra devices stay idle: plan on the first
 * *use_devices = n only. Returns a new cluster or NULL with err set. */
cluster *planner_cluster_resize(const cluster *c, int n, int *use_devices, plumb_err *err);

/* The most microbatches a round of replicas may take (planner_replica_round). */
#define PLANNER_MAX_ROUND (1 << 20)

/* The least common multiple of pl's stage replica counts: the microbatches one round of
 * a round-robin schedule (pipedream, 2bw) deals, one to each replica of every stage.
 * Returns it, or 0 when it exceeds PLANNER_MAX_ROUND (too many to simulate). */
int planner_replica_round(const plan *pl);

/* The microbatch count pl runs under schedule k: `requested` (> 0: what the user asked)
 * rounded up to a multiple of planner_replica_round when k deals microbatches to replicas
 * round-robin (pipedream, 2bw; as asked when that round is too large); 0 = the native
 * planner's default for pl's stages and replicas (flushing kinds 2 x depth per replica, at
 * least 4 per stage; chunked kinds 2 x ranks). Returns >= 1. */
int planner_microbatches(const plan *pl, sched_kind k, int requested);

/* Splits n items of cost[0..n-1] into nstages contiguous ranges (each at least one item)
 * minimising the largest range's cost. Writes first[s] and last[s] (inclusive). Returns 0,
 * or -1 when nstages < 1, nstages > n, or out of memory. */
int planner_split_weights(const double *cost, int n, int nstages, int *first, int *last);

/* planner_split_weights over prof's layers, cost = forward + backward time. */
int planner_split_ranges(const profile *prof, int nstages, int *first, int *last);

/* The even split of prof on the first ndev devices of clus (ndev <= 0 or more than the
 * cluster has: all) for schedule `kind`:
 *  - one-stage-per-device schedules: depth = the largest divisor of ndev that is at most
 *    the layer count, every stage replicated ndev/depth times on consecutive devices;
 *  - chunked schedules: sched_kind_chunks per rank, ranks = min(ndev, layers / chunks),
 *    no replicas, stage s on the rank the schedule's default placement gives it.
 * Microbatching and recomputation are the caller's to set. Returns a new plan or NULL with
 * err set (too few layers for the schedule, out of memory). */
plan *planner_split_plan(const profile *prof, const cluster *clus, int ndev, sched_kind kind,
                         plumb_err *err);

/* Plain data parallelism against which pl is measured: one stage of every layer replicated
 * on the first ndev devices of pl's cluster (ndev <= 0: all), 1f1b-flush, pl's microbatch
 * size, recomputation and optimizer, pl's microbatches rounded up to a multiple of ndev
 * (the same samples per iteration, whole rounds of replicas). Returns a new plan or NULL
 * with err set. */
plan *planner_dp_plan(const plan *pl, int ndev, plumb_err *err);

#endif
