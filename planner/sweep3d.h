/* sweep3d.h: capacity planning of a transformer over GPU counts (`plumb sweep --model`):
 * for each count the layout search (planner/search3d.h) finds the best tensor x pipeline x
 * data layout, and the sweep reports its tokens/s, MFU, the days to train a token budget,
 * the cost (USD at a price per GPU-hour, else GPU-hours) and the cost per million tokens,
 * the fewest GPUs that finish by a deadline, and the Pareto front of time against cost.
 * Counts are whole servers: the first multiple of a server's devices from the range's
 * start, doubled up to its end, and the end's multiple. Writers: text, JSON, SVG.
 *
 * Units: tokens/s, days, USD (or GPU-hours), bytes. Results are owned by the caller. */
#ifndef PLUMB_PLANNER_SWEEP3D_H
#define PLUMB_PLANNER_SWEEP3D_H

#include <stdio.h>

#include "core/err.h"
#include "planner/search3d.h"

#define SWEEP3D_SIMULATE 3 /* best estimates simulated per count by default */

typedef struct sweep3d_point {
    int gpus;
    int ok;                  /* 1: a layout fits on this many GPUs */
    search3d_cand best;      /* the best layout when ok */
    double days;             /* to train the token budget; < 0 without one or !ok */
    double cost;             /* of that: USD with a price, else GPU-hours; < 0 as days */
    double usd_per_million;  /* USD per million tokens; < 0 without a price or !ok */
    int pareto;              /* 1: no other count trains both sooner and cheaper */
    char why[PLUMB_ERR_MAX]; /* when !ok: why nothing fits (and what would) */
} sweep3d_point;

typedef struct sweep3d_result {
    int n;
    sweep3d_point *pts;      /* [n], gpus ascending */
    double tokens;           /* token budget; <= 0 when none */
    double price;            /* USD per GPU-hour; <= 0 when none */
    double deadline_days;    /* <= 0 when none */
    int deadline_gpus;       /* fewest GPUs that train the budget by the deadline; -1 when
                                none in the range (or no deadline) */
    char model[64], cluster[64];
    const char *device_noun;    /* the cluster's devices in text (cluster_device_noun: "GPU",
                                   "CPU worker"; static) */
    search3d_options opts;   /* the options every count was searched with (gpus 0): its
                                runtime (tp_overlap, overlap_param_gather, p2p_sync,
                                grad_reduce, optimizer_state) and balance go into
                                every writer */
    double cpu_s;            /* CPU time of the whole sweep */
} sweep3d_result;

/* Sweeps model t on gmin..gmax GPUs of cluster c (file cluster_file, for messages) under
 * the search options o (their gpus is set per count; o->simulate 0 means
 * SWEEP3D_SIMULATE, x SEARCH3D_SYNC_FACTOR under p2p sync as the search's default). tokens, price and deadline may be <= 0 (not given); a deadline needs
 * tokens. Returns 0 and fills *res (sweep3d_result_free), or -1 with err: a range with no
 * whole server in it or beyond the cluster, a deadline without tokens, no count on which
 * a layout fits (the largest count's line), out of memory. */
int sweep3d_run(const transformer *t, const cluster *c, const char *cluster_file,
                const search3d_options *o, int gmin, int gmax, double tokens, double price,
                double deadline, sweep3d_result *res, plumb_err *err);

void sweep3d_result_free(sweep3d_result *r);

/* The table (after a line naming the runtime of every layout where it is not the
 * default, one for --cross-entropy te or native and one for --balance), the deadline line and the front, every figure with its unit. */
void sweep3d_print(const sweep3d_result *r, FILE *out);

/* {"format": "plumb-sweep3d/1", ..., "tp_overlap", "overlap_param_gather", "p2p",
 * ["grad_reduce", "optimizer_state" when bf16, "fp8_param_gather", "cross_entropy" when "te" or "native",
 * "grad_accum" when "unfused", "balance" when set],
 * "points"}
 * (docs/llm.md, "Sweeping GPU counts"); caller frees. */
struct cJSON;
struct cJSON *sweep3d_to_json(const sweep3d_result *r);

/* SVG of days to train against cost, one point per count that fits (labelled with its
 * GPUs), the Pareto front joined and filled, the deadline as a dashed line, the runtime
 * and the loss (--cross-entropy te or native) of every layout at the foot where they are
 * not the defaults. NULL when out
 * of memory or without a token budget (nothing to plot). Caller frees. */
char *sweep3d_svg(const sweep3d_result *r, size_t *len);

#endif
