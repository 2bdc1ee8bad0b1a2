/* planner.h: plumb's planners. The first one is PipeDream's hierarchical partitioner
 * (SOSP 2019, §3.1) in PipeDream-compatible mode: it reaches the same optimum as PipeDream's
 * optimizer_graph_hierarchical.py on the same profile and the same per-level machine counts
 * and bandwidths (see docs/planner-pipedream.md for the recurrence and every place where
 * PipeDream's code differs from its paper). The cost of a stage goes through a pd_cost table
 * so that a plumb-native cost model can replace PipeDream's formulas later.
 *
 * Memory: functions return new objects the caller frees (pd_result_free, plan_free). */
#ifndef PLUMB_PLANNER_H
#define PLUMB_PLANNER_H

#include "cluster.h"
#include "err.h"
#include "plan.h"
#include "profile.h"

#define PD_MAX_LEVELS 8

/* The stage cost model. PipeDream's formulas are the default (pd_cost_pipedream); a native
 * model fills the same two functions. Times in seconds, sizes in bytes.
 *   base:  one stage covering a whole (sub)problem, `r` replicas at level `level`;
 *          inner_s is the compute time (level 0) or the best time one level down.
 *   split: the last stage of a split, same meaning.
 * Both return the stage time in seconds. */
typedef struct pd_cost {
    double (*base)(const void *ctx, int level, double inner_s, double param_bytes, int r,
                   double bandwidth_Bps, int machines_below);
    double (*split)(const void *ctx, int level, double inner_s, double param_bytes, int r,
                    double bandwidth_Bps, int machines_below);
    const void *ctx;
} pd_cost;

/* PipeDream's own formulas (optimizer_graph_hierarchical.py). */
extern const pd_cost pd_cost_pipedream;

typedef struct pd_options {
    int nlevels;                          /* levels, innermost first (PipeDream's -n order) */
    int machines[PD_MAX_LEVELS];          /* -n: members per level, >= 1 */
    double bandwidth_Bps[PD_MAX_LEVELS];  /* -b: bytes/s per level, > 0 */
    double memory_bytes;                  /* -s/--memory_size, default 16e9 */
    int machines_in_first_level;          /* -m; 0 = not given */
    int straight;                         /* --straight_pipeline: no replication */
    int use_memory_constraint;            /* --use_memory_constraint */
    int use_fewer_machines;               /* --use_fewer_machines */
    double activation_compression_ratio;  /* --activation_compression_ratio; <= 0 = not given
                                             (then activation transfers are not counted) */
    double speed;                         /* compute times are divided by it; default 1 */
    int max_states;                       /* antichain states before branch compression is
                                             applied (0 = default PD_DEFAULT_MAX_STATES) */
    const pd_cost *cost;                  /* NULL = pd_cost_pipedream */
} pd_options;

#define PD_DEFAULT_MAX_STATES 4000

/* Fills o with PipeDream's defaults: one level of 1 machine at 1e9 B/s, 16e9 bytes memory,
 * no options, speed 1. */
void pd_options_default(pd_options *o);

/* Fills the levels of o from a cluster: machines = level counts, bandwidths = level
 * bandwidths, memory = the smallest device memory, speed = the slowest device's speed.
 * Leaves the other options as they are. */
void pd_options_from_cluster(pd_options *o, const cluster *c);

/* The inverse, for PipeDream's own flags (plumb plan --pipedream -n ... -b ...): a plumb
 * cluster named "pipedream-levels" of o's levels (count o->machines[L], bandwidth
 * o->bandwidth_Bps[L], no latency) and one device type of o->memory_bytes at speed 1.
 * Returns a new cluster (cluster_free) or NULL with err set (a level the cluster format
 * rejects, out of memory). */
cluster *pd_options_to_cluster(const pd_options *o, plumb_err *err);

typedef struct pd_stage {
    int nlayers;
    int *layers;          /* profile layer indices of this stage, ascending */
    int replicas;         /* devices running a copy of this stage */
    int *devices;         /* [replicas] device ids (level-major numbering, like cluster.h) */
    int level_replicas[PD_MAX_LEVELS]; /* replicas chosen at each level for this stage */
    int first_state, last_state;       /* the antichain states bounding it (exclusive, incl.) */
    double compute_s;     /* forward+backward of its layers for one minibatch on one device */
    double dp_sync_s;     /* weight synchronisation time by PipeDream's formula, per level
                             summed (4 (r-1) P / (B r) at each level where r > 1) */
    double activation_s;  /* time to send its output and receive its gradient
                             (2 x output bytes / bandwidth of the level it crosses, divided by
                             the compression ratio when given); 0 for the last stage */
    double time_s;        /* its time in PipeDream's model at the innermost level */
} pd_stage;

typedef struct pd_result {
    double time_per_stage_s;   /* the optimum: the slowest stage's time, seconds */
    double single_stage_s;     /* the whole model on one device, seconds per minibatch */
    double data_parallel_s;    /* PipeDream's data-parallel time with all machines */
    double speedup_vs_1;       /* single_stage_s / time_per_stage_s */
    double speedup_vs_dp;      /* data_parallel_s / time_per_stage_s */
    int nstates;               /* antichain states the program ran over */
    int compressed;            /* 0: exact graph; 1: branches compressed; 2: prefixes of a topological order */
    int machines_used;         /* devices used (less than all with use_fewer_machines) */
    char *config;              /* GPUs per stage joined by '-', e.g. "15-1" */
    int nstages;
    pd_stage *stages;
} pd_result;

void pd_result_free(pd_result *r);

/* Runs PipeDream's hierarchical partitioner on p. `start_order` (may be NULL) lists the
 * profile's layers in the order PipeDream's graph dictionary holds them (the file order of
 * a graph.txt); it only decides which source the antichain enumeration starts from; NULL
 * means the profile's layer order. Returns 0 and fills *res (free with pd_result_free), or
 * -1 with err set when no plan exists (e.g. every split breaks the memory constraint) or
 * the options are invalid. */
int planner_pipedream_run(const profile *p, const int *start_order, const pd_options *o,
                          pd_result *res, plumb_err *err);

/* Builds a plumb plan from a result: a copy of p whose layers are reordered so that every
 * stage is a contiguous range (stage by stage, each stage's layers in the profile's order:
 * a topological order consistent with the antichain cuts), on a copy of c, schedule
 * "pipedream" (1F1B with weight stashing), one microbatch of the profile's minibatch, and
 * the predicted figures. c must have at least res->machines_used devices. Returns a new
 * plan or NULL with err set. */
plan *planner_pipedream_plan(const profile *p, const cluster *c, const pd_result *res,
                             plumb_err *err);

/* Convenience: options from the cluster (plus the caller's flags in o, may be NULL), run,
 * and build the plan. Returns a new plan and fills *res when res is not NULL. */
plan *planner_pipedream(const profile *p, const cluster *c, const pd_options *o,
                        pd_result *res, plumb_err *err);

#endif
