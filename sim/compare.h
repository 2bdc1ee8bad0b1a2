/* compare.h: prediction against measurement (`plumb compare`). Each side is a run summary:
 * per (stage, action kind) the number of actions and their total time, per stage the
 * compute time per iteration, and the steady-state time per iteration. A summary is built
 * from a timeline (core/timeline.h: the simulator's `plumb sim --trace` and the executor's
 * `plumb train --trace` are the same Chrome trace format, read by the same reader), or,
 * for a prediction, from a simulator report (`plumb sim --json`, plumb-sim-report/1),
 * whose per-stage action times and iteration time stand in for a trace. The two sides are
 * aligned by (stage, kind): the simulator and the executor run the same schedule IR, so
 * stage s's F in one is stage s's F in the other.
 *
 * Error convention everywhere: error = (predicted - measured) / measured, a fraction
 * (> 0: the prediction is too slow). Units: seconds in these structs, ms when printed. */
#ifndef PLUMB_SIM_COMPARE_H
#define PLUMB_SIM_COMPARE_H

#include <stdio.h>

#include "core/err.h"
#include "core/timeline.h"

#define COMPARE_FORMAT "plumb-compare/1"
#define COMPARE_MAX_STAGES (1 << 20)      /* a trace naming more is not a plan's run */
#define COMPARE_MAX_ITERATIONS (1 << 26)

/* Totals of one kind of action on one stage. */
typedef struct compare_cell {
    long long n;          /* actions counted (0: the side has none of this kind) */
    double total_s;       /* their summed duration, seconds */
    double median_s;      /* their median duration, seconds (a report: its one figure) */
} compare_cell;

/* Peak memory of the devices that run one set of stages (sim/compare_mem.c). Devices are
 * matched across the two sides by the stages they run, not by their ids: a measured trace
 * may number workers where the prediction numbers the plan's devices. */
typedef struct compare_mem {
    char stages[64];      /* the (virtual) stages, "0" or "1,5" (cut with "..." when long) */
    int first_stage;      /* the lowest of them: the order of the rows */
    int ndevices;         /* devices that run this set */
    double peak_bytes;    /* the largest peak among them, bytes */
} compare_mem;

/* One side (a run) summarised. */
typedef struct compare_side {
    char *file;           /* where it was read from (owned; may be "") */
    char *what;           /* "sim trace", "exec trace", "sim report", ... (owned) */
    int nstages;
    compare_cell *cells;  /* [nstages * TL_NKINDS], cell of (stage s, kind k) at
                             s * TL_NKINDS + k */
    compare_cell kinds[TL_NKINDS]; /* per kind over all stages */
    double *busy_s;       /* [nstages] compute time (F, B, I, W, step) per iteration, per
                             replica of the stage; < 0 when unknown */
    int iterations;       /* iterations in the run */
    int used;             /* iterations counted in the cells (the last `used` ones) */
    double iteration_s;   /* steady-state time per iteration; < 0 when unknown */
    int nmem;             /* peak memory by stage set, ordered by first stage; 0 when the
                             side carries no memory figures (an older trace) */
    compare_mem *mem;
    char *model;          /* the model the run ran (owned); NULL when the file names none */
    int nlayer_stages;    /* stages in layers; 0 when the file gives no layer ranges */
    int *layers;          /* [2 * nlayer_stages]: first and last layer of each stage (owned) */
} compare_side;

/* Summarises a timeline, skipping its first `skip` iterations (warm-up, pipeline fill)
 * in the per-action cells and the per-stage busy time while at least one iteration is
 * left (skip is lowered otherwise). The iteration time is the mean gap between the
 * completion times of consecutive iterations from the end of iteration max(skip, 1) - 1
 * to the end of the last (the simulator's definition for skip = 1), or the end of the run
 * when there is one iteration. `file` and `what` are copied. Returns 0, or -1 with err
 * when the timeline is empty, names a stage or iteration beyond COMPARE_MAX_STAGES /
 * COMPARE_MAX_ITERATIONS, or out of memory. Free with compare_side_free. */
struct cJSON;
int compare_side_from_timeline(const timeline *tl, int skip, const char *file,
                               const char *what, compare_side *out, plumb_err *err);

/* Summarises a simulator report object (plumb-sim-report/1): per stage, one action of
 * each kind the schedule runs (F, and B, or I and W for zero-bubble schedules, and
 * allreduce when replicated) with the report's per-microbatch time; busy time =
 * microbatches / replicas x (F + B); iteration time = iteration_s. Transfers and steps are
 * absent (a report does not price them per stage). Returns 0, or -1 with err naming the
 * field ("FILE: stages[1].forward_s: expected ..."). */
int compare_side_from_report(const struct cJSON *root, const char *file, compare_side *out,
                             plumb_err *err);

/* Memory figures of a side (sim/compare_mem.c): from a timeline, each device track's
 * peak_bytes grouped by the stages its compute actions ran; from a report, its "devices"
 * array (stages, peak_memory_bytes; absent: no figures). Set s->mem and s->nmem. Return 0,
 * or -1 with err when out of memory or (report) a malformed device entry. */
int compare_mem_from_timeline(const timeline *tl, const char *file, compare_side *s,
                              plumb_err *err);
int compare_mem_from_report(const struct cJSON *root, const char *file, compare_side *s,
                            plumb_err *err);

/* What a side ran (sim/compare_id.c): from a timeline, its model and stage layers
 * (timeline_set_model); from a report, its "model" and each stage's first_layer and
 * last_layer. Set s->model, s->layers and s->nlayer_stages (left NULL / 0 when absent).
 * Return 0, or -1 with err when out of memory or (report) a malformed field. */
int compare_id_from_timeline(const timeline *tl, const char *file, compare_side *s,
                             plumb_err *err);
int compare_id_from_report(const struct cJSON *root, const char *file, compare_side *s,
                           plumb_err *err);

/* Whether two sides are runs of one model and plan: where both name their model, the names
 * must be equal, and where both give their stages' layer ranges, the ranges must be equal.
 * Returns 0, or -1 with err saying what differs ("M.json: model: expected \"alexnet\", the
 * model of the prediction P.json (got \"fmnist-mlp\")"). compare_sides checks this first. */
int compare_id_check(const compare_side *pred, const compare_side *meas, plumb_err *err);

/* Reads path: a plumb-sim-report/1 report or a Chrome trace (anything with traceEvents),
 * and summarises it as above. Returns 0, or -1 with err set for an unreadable or
 * malformed file, or one that is neither. */
int compare_side_load(const char *path, int skip, compare_side *out, plumb_err *err);

void compare_side_free(compare_side *s);

/* One stage set's peak memory on both sides. */
typedef struct compare_mem_row {
    char stages[64];
    double pred_bytes, meas_bytes; /* < 0: absent on that side */
    int pred_devices, meas_devices;
    double error;         /* (pred - meas) / meas; NAN when either is absent */
} compare_mem_row;

/* One aligned figure. */
typedef struct compare_row {
    int stage;            /* -1 for a row over all stages */
    int kind;             /* tl_kind; -1 for a busy-time or iteration row */
    double pred_s, meas_s;    /* mean seconds per action (or per iteration); < 0: absent */
    long long pred_n, meas_n; /* actions behind each mean */
    double error;         /* (pred - meas) / meas; NAN when either is absent or meas is 0 */
    double pred_med_s, meas_med_s; /* median seconds per action; < 0: absent (and for
                                      the busy-time and iteration rows, which are sums) */
    double error_med;     /* the error of the medians; NAN when absent */
} compare_row;

typedef struct compare_result {
    const compare_side *pred, *meas;  /* borrowed */
    int nrows;
    compare_row *rows;    /* per (stage, kind) present on either side, by stage then kind */
    int nkinds;
    compare_row *kinds;   /* per kind over all stages (stage = -1) */
    int nstages;
    compare_row *stages;  /* per stage compute time per iteration (kind = -1) */
    compare_row *idle;    /* [nstages] per stage iteration time - compute time: on the
                             executor blocking sends, waits for data and for a CPU */
    compare_row iteration;/* time per iteration (stage = kind = -1) */
    double mean_abs_error;/* mean |error| over the per-(stage, kind) compute rows
                             (F, B, I, W) that both sides have; NAN when none */
    double mean_abs_error_med; /* the same over the medians' errors */
    int nmem;
    compare_mem_row *mem; /* peak memory per stage set present on either side; none when
                             neither side has memory figures */
    double mem_mean_abs_error; /* mean |error| over the memory rows both sides have */
} compare_result;

/* (pred - meas) / meas; NAN when either is < 0 (absent) or meas is 0. */
double compare_error(double pred, double meas);

/* Aligns pred and meas (both must outlive the result). Returns 0, or -1 with err when the
 * two runs have different numbers of stages (they are not runs of the same plan) or out
 * of memory. Free with compare_result_free. */
int compare_sides(const compare_side *pred, const compare_side *meas, compare_result *out,
                  plumb_err *err);
void compare_result_free(compare_result *r);

/* The tables: per stage and kind, per kind, per stage busy time, per iteration, every
 * figure with its unit (ms, %, actions). median = 1 shows the medians per action instead
 * of the means (robust to a loaded machine's long tail; the busy-time and iteration rows
 * stay sums). */
void compare_print(const compare_result *r, int median, FILE *out);

/* The result as JSON (format plumb-compare/1, docs/loop.md); NULL when out of memory.
 * Caller frees with cJSON_Delete. */
struct cJSON *compare_to_json(const compare_result *r);

/* Shared by the tables and JSON of compare.c and compare_mem.c: an error as "  +12.3 %"
 * (or "-" when NAN) into buf, returning buf; key = v on o, or null when v is NAN. */
const char *compare_fmt_error(double e, char *buf, size_t n);
void compare_json_opt(struct cJSON *o, const char *key, double v);

/* Aligns the memory figures of r->pred and r->meas into r->mem; 0, or -1 out of memory. */
int compare_mem_align(compare_result *r);
/* The memory table (nothing when r has no memory rows) and its JSON array "memory". */
void compare_mem_print(const compare_result *r, FILE *out);
int compare_mem_json(const compare_result *r, struct cJSON *o);

#endif
