/* sim.h: plumb's pipeline simulator. sim_run takes a plan, builds (or takes) its schedule
 * IR, prices every action with the cost model (layer times scaled to the microbatch and the
 * device, transfers over the cluster's levels, ring all-reduce among a stage's replicas),
 * replays the IR on a discrete-event engine whose resources are each device's compute
 * stream, each directed link and each server's shared network egress port, and returns a
 * report: steady-state throughput, iteration time, bubble fraction, per-device busy / idle /
 * communication time and peak memory (with its breakdown), per-link bytes, and optionally
 * the timeline of every timed action. docs/sim.md documents the model.
 *
 * Units: seconds, bytes, samples/s everywhere in this header. */
#ifndef PLUMB_SIM_H
#define PLUMB_SIM_H

#include <stdio.h>

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/timeline.h"

#define SIM_REPORT_FORMAT "plumb-sim-report/1"
#define SIM_DEFAULT_ITERATIONS 3
#define SIM_BUCKET_BYTES (25.0 * 1024 * 1024) /* gradient bucket for the all-reduce overlap */
/* The work budget (sim/budget.c; docs/sim.md, "Work budget"): the most actions (sim_actions_
 * estimate) one simulation may replay, and the rate the limit's time is quoted at (measured
 * on 2 cores: 24 M actions of `plumb sim` in 2.1 s). */
#define SIM_MAX_ACTIONS 1e8
#define SIM_ACTIONS_PER_S 1e7

/* What to simulate besides the plan as written. Fill with sim_options_init, then change. */
typedef struct sim_options {
    int schedule;             /* sched_kind to use instead of the plan's; -1 = the plan's */
    int microbatches;         /* microbatches per iteration instead of the plan's; 0 = plan's */
    int iterations;           /* iterations to simulate (>= 1); 0 = SIM_DEFAULT_ITERATIONS.
                                 sim_run raises it to the fewest that hold a steady window
                                 (sim_steady_window: 2 for flushing schedules, more for
                                 asynchronous ones) unless `sched` is given */
    int straggler_device;     /* cluster device id whose compute is slowed; -1 = none */
    double straggler_factor;  /* its compute times are multiplied by this (2 = half speed) */
    double bandwidth_Bps[CLUSTER_MAX_LEVELS]; /* > 0: replaces level L's bandwidth (its
                                 egress is scaled by the same ratio); 0 = keep */
    double memory_limit_bytes; /* > 0: each device's capacity is min(its memory, this) */
    int p2p_sync;             /* the runtime's point-to-point transfers instead of the plan's
                                 "p2p": 0 overlap, 1 sync; -1 = the plan's */
    int grad_sync_end;        /* the data-parallel reduction instead of the plan's
                                 "grad_sync": 0 overlap, 1 end; -1 = the plan's. Neither is
                                 checked against the schedule here: the engine refuses end
                                 with an asynchronous kind; callers check the rest (plumb
                                 sim: search3d_runtime_check) */
    int p2p_whole;            /* the pipeline sends at tp > 1 without sequence parallelism
                                 instead of the plan's "p2p_split": 0 scatter-gather, 1
                                 whole; -1 = the plan's */
    /* The runtime settings of a transformer's plan (`plumb plan --model`'s options; plumb
     * sim's what-ifs), each instead of the plan's field; -1 = the plan's. Range-checked
     * here, not against each other nor against the plan: callers check that as plan
     * --model checks its options (plumb sim: search3d_runtime_check on
     * search3d_options_from_plan) and that the profile has what they need. */
    int recompute;            /* recompute_kind. Full on a plan that is not full checkpoints
                                 as the planners do: every block's input on a transformer's
                                 plan (checkpoint_layers 1, plan --model's default), the
                                 stage's input on another (0); a full plan keeps its own.
                                 None and selective: checkpoint_layers 0 */
    int checkpoint_layers;    /* full recomputation's checkpoint interval instead of the
                                 plan's (or the one --recompute gives): every K-th block's
                                 input kept, 0 the stage's input alone; -1 = the plan's.
                                 Callers check it against the recompute and the stages'
                                 blocks (plan_checkpoint_check, as plan --model) */
    int zero;                 /* ZeRO stage, 0 or 1 */
    int tp_overlap;           /* plan_tp_overlap */
    int overlap_param_gather; /* 0 or 1 */
    int fp8_param_gather;     /* 0 or 1 */
    int grad_reduce;          /* dev_precision of the gradients: DEV_FP32 or DEV_BF16 */
    int optimizer_state;      /* dev_precision of the optimizer state: DEV_FP32 or DEV_BF16 */
    int timeline;             /* SIM_TIMELINE_FULL (1): record every timed action in
                                 report->tl; SIM_TIMELINE_NO_RING_HOPS: all of them but
                                 the per-hop link events of ring all-reduces (each
                                 device's all-reduce event stays; what the dashboard
                                 draws, without the events that grow with the square of
                                 the replicas); 0: none */
    const schedule *sched;    /* borrowed: run this IR instead of generating one from the
                                 plan (its stages must be the plan's); NULL = generate */
} sim_options;

#define SIM_TIMELINE_FULL 1
#define SIM_TIMELINE_NO_RING_HOPS 2

/* Sets o to "the plan as written": no overrides, default iterations, no timeline. */
void sim_options_init(sim_options *o);
/* For a process that runs one large simulation and exits (`plumb sim`; the benchmarks
 * that stand for it): the allocator keeps what is freed for the next allocation instead
 * of handing it back to the kernel and faulting fresh pages in again (glibc's mallopt:
 * no mmap for blocks under 32 MiB, no trimming under 1 GiB; nothing elsewhere). Half the
 * page faults of a 64-stage x 1024-microbatch run (docs/sim.md, Speed). It asks for no
 * transparent huge pages (docs/sim.md, "Huge pages taken back"). Call it first. */
void sim_malloc_for_one_run(void);

/* 1 when o asks for any what-if (schedule, microbatches, straggler, bandwidth, memory,
 * p2p, grad_sync, p2p_split, and the runtime settings recompute .. optimizer_state). */
int sim_options_has_whatif(const sim_options *o);

/* 1 when o replaces one of a transformer plan's runtime settings (recompute,
 * checkpoint_layers, zero, tp_overlap, overlap_param_gather, fp8_param_gather, grad_reduce,
 * optimizer_state). */
int sim_options_has_runtime(const sim_options *o);

/* *view = *pl (shallow: stages, profile and cluster stay pl's) with the plan fields that o's
 * what-ifs replace put in: schedule, microbatches, p2p, grad_sync, p2p_split and the
 * runtime settings (recompute with its checkpoints: sim_options.recompute, then
 * checkpoint_layers where given, so that it applies to the recompute asked for). The plan
 * sim_run simulates; search3d_options_from_plan reads the what-ifs' runtime from it.
 * Checks nothing (sim_run checks o's ranges). */
void sim_options_view(const plan *pl, const sim_options *o, plan *view);

/* Memory of one device at its peak, bytes. */
typedef struct sim_memory {
    double weights;           /* parameter bytes x weight versions kept, summed over stages */
    double gradients;         /* one gradient buffer per stage */
    double optimizer;         /* sgd 0, momentum 1x, adam 2x the parameter bytes */
    double activations;       /* stashed activations at the peak (in-flight microbatches) */
    double buffers;           /* gradient buffers: the backward's input gradients, and per
                                 in-flight microbatch the received and the sent gradient,
                                 and a block's inner input gradients */
    double workspace;         /* the backend's scratch: the most any layer on it needs */
    double staging;           /* the in-process transport's staging buffers of the
                                 gradients the device sends: per peer, the most that can be
                                 in flight (schedule_send_bound) x the largest */
    double total;             /* the peak: sum of the above, or where larger the step's
                                 moment (sim_memory_step_total: weights, gradients,
                                 optimizer, workspace, staging, kept_inputs and
                                 step_transient) */
    double step_transient;    /* at the optimizer step only, not in the sum above: the
                                 fp32 copy of 16-bit gradients the step makes, freed by the
                                 next iteration's zero_grad before its forwards; 0 with
                                 fp32 gradients */
    double kept_inputs;       /* between iterations, not at the peak and not in total: with
                                 a Megatron-LM-style runtime (3D plans), what the device
                                 keeps beyond its weights, gradients and optimizer state:
                                 each of its stages but the first keeps the last
                                 microbatch's received input and that input's gradient
                                 (sim_stage_mem.kept); 0 otherwise */
    double capacity;          /* device memory (or the memory limit when smaller) */
    int fits;                 /* total <= capacity */
} sim_memory;

/* Per device that runs a worker. Times are per steady-state iteration (see iteration_s). */
#define SIM_DEVICE_STAGES 64 /* the most stages a device's report lists */

typedef struct sim_device_report {
    int device;               /* cluster device id */
    int worker;               /* schedule worker id */
    char type[48];            /* device type name (cut to 47 characters) */
    int nstages;              /* stages it holds (chunks, or 1) */
    int stages[SIM_DEVICE_STAGES]; /* the stage indices (all: a device holds one stage per
                                      chunk, and schedules have at most 64 chunks) */
    double busy_s;            /* compute (F, B, I, W, step) per iteration */
    double idle_s;            /* iteration_s - busy_s */
    double comm_s;            /* time its outgoing transfers and all-reduces take per
                                 iteration (overlaps compute; not part of idle_s) */
    double total_busy_s;      /* compute over the whole simulated run */
    int max_inflight;         /* most microbatches with stashed activations at once */
    int weight_versions;      /* most weight versions held by one of its stages */
    sim_memory mem;           /* at the peak */
} sim_device_report;

/* Per directed link (device pair) that carried data: point-to-point transfers and the
 * ring all-reduce's traffic (2 (r - 1) / r x gradient bytes per replica and iteration). */
typedef struct sim_link_report {
    int src, dst;             /* cluster device ids */
    int level;                /* outermost cluster level the link crosses */
    double bytes;             /* bytes over the whole run */
    double bytes_per_iteration;
    double busy_s;            /* time the link was transferring (bytes / rate), whole run */
    long long transfers;      /* point-to-point transfers and all-reduce ring hops */
} sim_link_report;

/* Per (virtual) stage: the priced actions, per microbatch, on the stage's first replica. */
typedef struct sim_stage_report {
    int first_layer, last_layer, replicas;
    double forward_s, backward_s;          /* backward includes recompute when on */
    double input_grad_s, weight_grad_s;    /* the zero-bubble split (I, W) */
    double step_s;                         /* one optimizer step (memory-bound) */
    double send_bytes;                     /* activations sent to the next stage */
    double parameter_bytes;
    double activation_bytes;               /* stashed per in-flight microbatch */
    double allreduce_s;                    /* ring all-reduce time alone (0 when r = 1) */
    double tp_comm_forward_s;              /* tensor-parallel collectives inside forward_s
                                              (what blocks of them: plan tp_overlap) */
    double tp_comm_backward_s;             /* ... inside backward_s and input_grad_s (with
                                              full recompute the forward's again too;
                                              with tp_overlap I may hold more) */
    int weight_versions;                   /* from schedule_inflight */
    int max_inflight;                      /* from schedule_inflight */
} sim_stage_report;

typedef struct sim_report {
    sched_kind schedule;
    int microbatches, microbatch_size, iterations, nstages, chunks, recompute;
    int iterations_requested; /* options.iterations (or the default); `iterations` is what
                                 was simulated, more when the steady state needed more */
    int steady;               /* 1: iteration_s is measured on steady iterations
                                 steady_first..steady_last; 0: only with a prebuilt IR too
                                 short for that (then makespan / iterations) */
    int steady_first, steady_last;
    int settled;              /* 1: the window's gaps show the repetition settled (the
                                 engine's sim_result.settled) */
    double samples_per_s;     /* minibatch samples / iteration_s */
    double iteration_s;       /* steady-state time per iteration: the mean gap between the
                                 completion times of consecutive iterations, leaving out
                                 those that end while the pipeline fills or drains
                                 (sim_steady_window in sim/engine.h) */
    double bubble_fraction;   /* 1 - compute busy time / (devices x iteration_s) */
    double makespan_s;        /* end of the last action of the run */
    double peak_memory_bytes; /* the largest device peak */
    int fits;                 /* every device fits its capacity */
    long long events;         /* discrete events processed */
    long long actions;        /* IR actions replayed */
    int ndevices;             /* devices that run a worker (the plan's) */
    int devices_total;        /* devices in the plan's cluster: the others are idle */
    sim_device_report *devices; /* sorted by device id */
    int nlinks;
    sim_link_report *links;   /* sorted by (src, dst) */
    sim_stage_report *stages; /* [nstages] */
    timeline *tl;             /* the timed actions when options.timeline, else NULL */
    char model[128];          /* the profile's model name ("" when it has none) */
    sim_options whatif;       /* the options this run applied (sched NULL, timeline 0):
                                 sim_options_has_whatif(&whatif) says whether any what-if
                                 changed the plan as written; the writers list them */
    char level_names[CLUSTER_MAX_LEVELS][32]; /* the cluster's level names ("" beyond its
                                 levels), to name a bandwidth what-if */
    /* The parallel layout and its figures (docs/sim.md, "Tensor, sequence and data
     * parallelism"): */
    int tp, pp, dp;           /* tensor-parallel ranks; pipeline ranks (stages / chunks);
                                 replicas of stage 0 */
    int cp;                   /* context-parallel ranks per replica (the plan's, >= 1) */
    int interleave;           /* chunks (virtual stages per device) */
    int global_batch;         /* samples per iteration (plan_minibatch) */
    int checkpoint_layers;    /* the plan's (full recompute) */
    int sequence_parallel, zero;
    dev_precision precision;
    dev_precision grad_reduce, optimizer_state; /* the plan's (DEV_FP32 unless bf16) */
    int grad_sync_end;        /* the plan's: 1 when its gradients are reduced at the end */
    int p2p_whole;            /* the plan's p2p_split: 1 for "whole" */
    int fp8_param_gather;     /* the plan's fp8_param_gather (FP8 primary weights) */
    int cross_entropy;        /* the plan's cross_entropy: 1 "te", 2 "native" (fused) */
    int grad_accum;           /* the plan's grad_accum: 1 "unfused" */
    pplayout_split_opts split; /* the plan's model's uneven split (all 0: not given) */
    char *pipeline_layout;    /* owned, or NULL: its --pipeline-layout string */
    int gpus;                 /* every member of every group (plan_gpus) */
    const char *device_noun;  /* what the cluster's devices are called in text
                                 (cluster_device_noun: "GPU", "CPU worker"; static; NULL
                                 reads "GPU") */
    long long tokens_per_sample; /* the profile's; 0 when unknown */
    double tokens_per_s;      /* samples_per_s x tokens_per_sample; 0 when unknown */
    double tflops_per_gpu;    /* FLOP/s the GPUs execute, recomputation included, per GPU,
                                 in TFLOP/s; < 0 when the profile lacks FLOPs */
    double model_tflops_per_gpu; /* the same without recomputation; < 0 when unknown */
    double mfu;               /* model FLOP/s / the GPUs' peak at the precision; < 0 when
                                 unknown, or when over 1 (the profile's times were made at
                                 another precision than the plan's) */
} sim_report;

/* Simulates pl under opt (NULL = sim_options_init defaults). Returns a new report the
 * caller frees with sim_report_free, or NULL with err set: the plan asks for a schedule
 * the IR cannot build, the options are out of range (straggler device not in the plan's
 * cluster, factor <= 0, bad level), the IR deadlocks, or the run is above the work budget
 * (sim_work_check with SIM_MAX_ACTIONS, before anything is generated; the settling rounds
 * stop doubling the iterations where the next round would pass it). Does not modify pl. */
sim_report *sim_run(const plan *pl, const sim_options *opt, plumb_err *err);

/* The actions simulating pl with `microbatches` per iteration (<= 0: the plan's) over
 * `iterations` takes: per stage (virtual stages counted, each chunk's) and iteration,
 * 6 per microbatch (forward, backward, two sends, two receives; 7 under the asynchronous
 * kinds, which step after each) plus 2 per replica (its all-reduce and its optimizer
 * step), as schedule_bytes_estimate counts; at least the IR's actions, at most 2x them
 * (the end stages send one way, a lone replica has no all-reduce). 0 for NULL, a
 * plan without stages or iterations < 1. Pure arithmetic: no schedule is built. */
double sim_actions_estimate(const plan *pl, int microbatches, int iterations);

/* Refuses a run whose sim_actions_estimate is above `limit` actions (<= 0:
 * SIM_MAX_ACTIONS): -1 with err set on `field` (NULL: "microbatches"; a caller names the
 * option that sets the count, "--microbatches") to one line with the stages x microbatches
 * x iterations, the estimate and the limit; 0 when it is within the limit, and also when
 * the estimate's memory (x SCHED_BYTES_PER_ACTION) is above sched_memory_available (the
 * generator's memory refusal, with its size in GiB, then speaks). */
int sim_work_check(const plan *pl, int microbatches, int iterations, double limit,
                   const char *field, plumb_err *err);

/* sim_run of a plan whose stages all have the same r >= 2 data-parallel replicas, by
 * simulating one pipeline (sim/sim_fold.c, docs/sim.md "Folded data parallelism"): the
 * IR of pl cut to two replicas, replica 0's workers as they are, and for every other
 * replica of every stage a worker with the stage's ALLREDUCE actions alone, so that the
 * ring all-reduce still runs over all r devices and the real links; the report's devices,
 * links and timeline tracks are then replica 0's copied to every replica (microbatches
 * renamed as the full IR names them). Used only where that is exact (sim_fold_check);
 * elsewhere it returns sim_run(pl, opt, err). The report is sim_run's bit for bit but for
 * `events` and `actions` (the folded run's work) and the order of the timeline's events,
 * tracks and memory samples; with mixed_rings 1 it also folds layouts whose replicas' ring
 * hops cross different levels, and the devices whose own hops differ from replica 0's
 * then have comm_s equal to sim_run's to rounding (1e-12 relative) instead. */
sim_report *sim_run_folded(const plan *pl, const sim_options *opt, int mixed_rings,
                           plumb_err *err);

/* 1 when sim_run_folded folds pl under opt; else 0 with why (may be NULL, n its size)
 * saying which condition fails: a straggler or prebuilt IR, unequal replicas, devices of
 * different types or sharing CPU cores, replicas whose pipeline sends cross different
 * levels, ring hops that cross different levels (unless mixed_rings; and always when no
 * other replica's hop crosses replica 0's levels), or an egress port with more links than
 * lanes (the replicas' transfers would queue behind one another). s: pl's IR
 * (schedule_from_plan), or that of pl cut to fewer replicas. */
int sim_fold_check(const plan *pl, const schedule *s, const sim_options *opt, int mixed_rings,
                   char *why, size_t n);

/* Frees r and everything it owns (its timeline too); NULL is allowed. */
void sim_report_free(sim_report *r);

/* The report of cluster device dev in r (a pointer into r->devices, owned by r), or NULL
 * when no worker of r runs on dev (an idle device, one outside the cluster, a negative
 * id). A binary search over r->devices, which sim_run sorts by device id: about 10 steps
 * for 1024 devices. Where several of r's entries share dev, the first. */
const sim_device_report *sim_report_device(const sim_report *r, int dev);

/* "15 of 16 used (device 15 idle)": r's devices against its cluster's (plan_devices_text).
 * Fills buf (always terminated) and returns how many are used, or -1 when out of memory
 * (buf empty). */
int sim_report_devices_text(const sim_report *r, char *buf, size_t n);

/* Sets used[d] (the caller's array of `total`, cleared by the caller) for every device
 * r runs on: each device of r->devices, and with tp > 1 the rest of its group. */
void sim_report_mark_used(const sim_report *r, unsigned char *used, int total);

/* One figure that a what-if changed: base and what-if values and their ratio. */
typedef struct sim_change {
    const char *figure;       /* "samples_per_s", "iteration_s", "bubble_fraction",
                                 "peak_memory_bytes", "devices[3].busy_s", ... (owned) */
    const char *unit;         /* "samples/s", "s", "fraction", "bytes" (static) */
    double base, whatif;
    double ratio;             /* whatif / base; 0 when base is 0 */
} sim_change;

typedef struct sim_changes {
    int n;
    sim_change *c;
} sim_changes;

/* Compares a what-if report with its base run: the headline figures always, per-device
 * figures when they moved by more than 0.1 %. Returns 0 or -1 when out of memory; free
 * with sim_changes_free. */
int sim_compare(const sim_report *base, const sim_report *whatif, sim_changes *out);
void sim_changes_free(sim_changes *c);

/* --- writers (sim/report_json.c, sim/svg.c, sim/gantt.c) ------------------------------ */

/* The report as JSON (format "plumb-sim-report/1", docs/formats.md); `changes` may be
 * NULL; `plan_file` names the plan (may be NULL). It names the model and, when the run
 * applied what-ifs, lists them under "whatif". Caller frees with cJSON_Delete. */
struct cJSON;
struct cJSON *sim_report_to_json(const sim_report *r, const sim_changes *changes,
                                 const char *plan_file);

/* The what-ifs of o as JSON ({"straggler": {...}, "bandwidth": [...], ...}; {} when none);
 * c (may be NULL) names the levels. Caller frees with cJSON_Delete. sim_report_to_json
 * adds the what-ifs its run applied this way as "whatif" (when there are any). */
struct cJSON *sim_options_to_json(const sim_options *o, const cluster *c);

/* SVG timeline of r->tl: a row per device labelled with its stages (idle devices of the
 * cluster too, consecutive ones folded into one row), F/B/I/W blocks coloured by
 * microbatch and shaded by kind, one row per stage boundary that carried transfers, a
 * time axis, and a legend of the kinds the run has. Boxes narrower than a pixel are merged
 * per lane into one box per run of pixels of the same busy fraction (docs/sim.md), so the
 * text grows with the rows and the picture's width, not with the events. Streamed into the
 * temporary file of an atomic write (sim_svg_file_write), never held whole in memory; -1
 * with err when r has no timeline or the file cannot be written. */
int sim_write_svg(const sim_report *r, const char *path, plumb_err *err);

/* The SVG text built in memory (caller frees), NULL when r has no timeline or out of
 * memory. The same text as the streamed file, byte for byte. */
char *sim_svg_text(const sim_report *r, size_t *len);

/* An SVG streamed into the temporary file of an atomic write (core/json.h's
 * files_write_atomic_out, with sim_svg_file_write as the file's writer). */
typedef struct sim_svg_file {
    const sim_report *r;
    const char *path; /* named in the error */
} sim_svg_file;

/* files_write_atomic_out's writer of a sim_svg_file (ctx): formats the SVG straight into f,
 * holding the picture's rows and its narrow boxes' spans, not the text. Returns 0; -1 with err
 * naming the path when the report has no timeline, memory runs out or a write fails. */
int sim_svg_file_write(FILE *f, void *ctx, plumb_err *err);

/* Text Gantt of r->tl on `width` columns (>= 20): one row per device, a letter per column
 * for the action that fills most of it (F, B, I, W, S = step, . = idle), and a time axis. */
void sim_print_gantt(const sim_report *r, int width, FILE *out);

/* The per-device table, headline figures and link bytes, every figure with its unit. */
void sim_print_report(const sim_report *r, const sim_changes *changes, FILE *out);

#endif
