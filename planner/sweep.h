/* sweep.h: capacity planning (`plumb sweep`). For each GPU count in a range, the cluster is
 * resized (fewer devices in one server, or whole servers added or removed at the outer
 * levels, device types repeating the cluster's server pattern), the native planner finds
 * the best plan, and the sweep reports its simulated throughput, its scaling efficiency
 * against linear (thr(n) / (n x thr(1)), thr(1) being the whole model on device 0 with
 * memory ignored), its cost per million samples (price x n / 3600 / thr x 1e6), and the
 * fewest GPUs that reach a target throughput. Throughput never falls as GPUs are added:
 * when n GPUs plan slower than a smaller count m, the m-GPU plan is reported for n (it
 * leaves n - m GPUs idle, and they still cost). Writers: text table, JSON, SVG plot.
 *
 * Units: samples/s, USD, bytes. Memory: results are owned by the caller. */
#ifndef PLUMB_PLANNER_SWEEP_H
#define PLUMB_PLANNER_SWEEP_H

#include <stdio.h>

#include "core/cluster.h"
#include "core/err.h"
#include "core/profile.h"
#include "planner/native.h"
#include "planner/policy.h" /* planner_cluster_resize: how each count is made */

#define SWEEP_MAX_GPUS PLANNER_MAX_GPUS
/* The sweep's work budget (docs/sim.md, "Work budget"): the GPU counts planned, summed (the
 * planner's work grows with the count: 1..1024, bench/sim_scale.sh's resnet50 sweep, is the
 * largest allowed; alexnet's 1..1024 took N s on 2 cores), and under a fixed --microbatches
 * the simulations of every count together (the native planner's estimate, sim_actions'
 * units: about 20 s). The counts from the first that would exceed either are skipped. */
#define SWEEP_MAX_GPU_SUM 524800.0
#define SWEEP_MAX_SIM_ACTIONS 1e8

typedef struct sweep_point {
    int gpus;
    int ok;                     /* 1: a plan fits on this many GPUs */
    double samples_per_s;       /* simulated throughput of the best plan; 0 when !ok */
    double efficiency;          /* samples_per_s / (gpus x thr1) */
    double usd_per_million;     /* price x gpus / 3600 / samples_per_s x 1e6; < 0 when no
                                   price was given or !ok */
    double peak_memory_bytes;   /* largest device peak of the best plan */
    sched_kind schedule;
    int microbatches, microbatch_size, recompute, nstages;
    int gpus_used;              /* devices the plan uses: the best plan of a smaller count
                                   is kept (the rest idle) when more GPUs plan no faster */
    char config[96];            /* replicas per stage, e.g. "8-8" */
    char why[PLUMB_ERR_MAX];    /* when !ok: why nothing fits (and what would) */
} sweep_point;

typedef struct sweep_result {
    int n;
    sweep_point *pts;           /* [n], gpus ascending */
    double thr1;                /* linear baseline: samples/s of one device (device 0) */
    double target;              /* samples/s asked for; <= 0 when none */
    int target_gpus;            /* fewest GPUs whose best plan reaches target; -1 when none
                                   in the range (or no target) */
    double price;               /* USD per GPU-hour; <= 0 when none */
    char profile_name[64], cluster_name[64];
    const char *device_noun;    /* the cluster's devices in text (cluster_device_noun: "GPU",
                                   "CPU worker"; static) */
    int p2p_sync, grad_sync_end; /* the runtime every plan carries (native_options) */
    int zero, overlap_param_gather; /* likewise (native_options.zero, overlap_param_gather) */
    char runtime[160];          /* it in words (native_runtime_text); "" at the default */
    int nskipped;               /* --schedule auto: the kinds the runtime refuses, with the
                                   owner's line (native_result.skipped); the same at every
                                   count */
    native_skip skipped[NATIVE_MAX_SKIPPED];
    int budget_from, budget_to; /* budget_from > 0: the counts budget_from..budget_to (the
                                   range's end) were not planned, the sweep's work budget
                                   being spent (none planned: sweep_run refuses instead) */
    char budget_why[1024];      /* which budget, in words */
} sweep_result;

void sweep_result_free(sweep_result *r);

/* Runs the sweep over gmin..gmax GPUs (1 <= gmin <= gmax <= SWEEP_MAX_GPUS) with the
 * planner options o (schedule, memory limit, runtime ...; max_devices is set per point).
 * target and price may be <= 0 (not given). Returns 0 and fills *res, or -1 with err on
 * bad input (a fixed schedule the runtime refuses, native_runtime_check's line;
 * planner_native_check on the largest count). */
int planner_sweep(const profile *p, const cluster *c, int gmin, int gmax,
                  const native_options *o, double target, double price, sweep_result *res,
                  plumb_err *err);

/* Text table and the target line, every figure with its unit; the runtime in the first
 * line and the kinds auto skipped after it, when not the default. */
void sweep_print(const sweep_result *r, FILE *out);

/* JSON document "plumb-sweep/1" (docs/planner-native.md); caller frees. */
struct cJSON;
struct cJSON *sweep_to_json(const sweep_result *r);

/* SVG plot of throughput (left axis) and cost per million samples (right axis, when a
 * price was given) against GPUs, with the linear-scaling line and the target. Returns the
 * text (caller frees) or NULL when out of memory. */
char *sweep_svg(const sweep_result *r, size_t *len);

#endif
