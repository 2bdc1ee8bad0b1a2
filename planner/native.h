/* native.h: plumb's own planner (the default of `plumb plan`). Beside PipeDream's
 * partitioner (planner.h, compatible mode) it prices stages with plumb's native cost model:
 * gradient all-reduce overlapped with the backward pass (and, for flushing schedules, paid
 * once per iteration, not per microbatch), activation transfers always counted (on their
 * own links, overlapped with compute), the pipeline fill and drain of flushing schedules,
 * heterogeneous device speeds, and the simulator's memory model (weight versions, stashed
 * activations, gradients, optimizer state) as a hard constraint. A dynamic program over
 * contiguous ranges of the profile's topological order, with per-stage replication on
 * contiguous device ranges (so stages follow the cluster's hierarchy), proposes candidates;
 * the simulator (sim/sim.h) scores the best of them, and plain data parallelism and a
 * straight pipeline, so the plan returned is never slower than those (as simulated). planner_auto searches schedules,
 * microbatch counts, microbatch sizes and recomputation the same way and ranks by
 * simulated throughput. docs/planner-native.md explains every difference with PipeDream.
 *
 * Units: seconds, bytes, samples/s. Memory: returned plans and results are owned by the
 * caller (plan_free, native_result_free). No global state: safe to call from any thread
 * on distinct arguments. */
#ifndef PLUMB_PLANNER_NATIVE_H
#define PLUMB_PLANNER_NATIVE_H

#include <stdio.h>

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/profile.h"

#define NATIVE_SCHED_AUTO (-1)     /* native_options.schedule: search every schedule */
#define NATIVE_RECOMPUTE_AUTO (-1) /* native_options.recompute: try both */
#define NATIVE_TOP 5               /* candidates `plumb plan --schedule auto` prints */
#define NATIVE_MAX_SKIPPED 8       /* kinds auto can skip (native_result.skipped) */

/* What to plan. Fill with native_options_init, then change. */
typedef struct native_options {
    int schedule;               /* sched_kind (any, zb-v included), or NATIVE_SCHED_AUTO.
                                   Default 1f1b-flush */
    int microbatches;           /* per iteration (per optimizer step of the flushing kinds);
                                   0 = choose (native_default_microbatches) */
    int microbatch_size;        /* samples per microbatch; 0 = the profile's minibatch (the
                                   size it was measured at); auto also tries halving it when
                                   memory is short */
    int recompute;              /* 0 off, 1 on, NATIVE_RECOMPUTE_AUTO (the default): both
                                   tried, the simulator ranks them */
    int chunks;                 /* virtual stages per device for interleaved; 0 = 2 (zb-v
                                   always has 2) */
    double memory_limit_bytes;  /* > 0: each device's capacity is min(its memory, this) */
    optimizer_kind optimizer;   /* its state counts in memory; default OPT_MOMENTUM */
    int max_devices;            /* > 0: plan on devices 0..max_devices-1 only; 0 = all */
    int sim_top;                /* candidates scored by the simulator; 0 = default (4 for
                                   one schedule, 2 for a chunked one, 6 for auto); -1 =
                                   none (estimates only) */
    int sim_iterations;         /* iterations per scoring simulation; 0 = the first steady
                                   window (3 for the flushing schedules, what the window
                                   needs for pipedream and 2bw, at most 32), the leaders
                                   then settled as `plumb sim` runs them */
    int no_suggest;             /* 1: when nothing fits, do not search what would fit */
    double sim_budget;          /* > 0: the work budget of the simulations one search must
                                   run (sim_actions' units) instead of its own (1e8; plumb
                                   sweep passes what is left of its own); 0 = its own */
    struct nm_sim_memo *sim_memo; /* plumb sweep: simulations kept across the counts and
                                   reused for the same plan on the same devices (see
                                   planner/native.c, nm_sim_memo_new), or NULL */
    int best_only;              /* 1: only the best plan matters (plumb sweep): a candidate
                                   whose compute alone (planner/native.c, nm_compute_bound)
                                   caps it below the best simulated plan that fits is not
                                   simulated, and every baseline is a candidate; the best
                                   plan is then the best of at least the same candidates;
                                   once a simulated plan fits, the candidates not
                                   simulated keep the dynamic program's closed-form
                                   memory counts (their fits and estimated peak; they
                                   rank below it either way) */
    int nstages;                /* > 0: pin the pipeline depth: exactly this many stages
                                   (pipeline ranks for interleaved and zb-v), each still
                                   replicated as the program chooses; 0 = the planner
                                   chooses. At most the devices (and the model's blocks) */
    int p2p_sync;               /* 1: every plan's point-to-point transfers are synchronous
                                   (the plan file's "p2p": "sync"; sim/engine_sync.c): the
                                   candidates are simulated so and the plan carries it;
                                   0 ("overlap") the default. The cost model's estimate
                                   ignores it (docs/planner-native.md) */
    int grad_sync_end;          /* 1: every plan's data-parallel reduction runs after the
                                   worker's whole forward-backward loop ("grad_sync": "end";
                                   sim/engine_gradsync.c), simulated and carried alike; 0
                                   ("overlap") the default; the estimate ignores it too.
                                   Which kinds take either: native_runtime_check */
    int zero;                   /* 1: ZeRO-1, the distributed optimizer (the plan file's
                                   "zero": 1): each replica of a stage keeps 1/r of the
                                   optimizer state, which the candidates' memory counts
                                   (sim_memory_state), and reduces its gradients as a
                                   reduce-scatter then an all-gather; 0 the default */
    int overlap_param_gather;   /* 1 (with zero 1 only): the all-gather after the step runs
                                   under the next forwards ("overlap_param_gather": true),
                                   simulated and carried; not with the asynchronous kinds
                                   nor grad_sync_end (native_runtime_check) */
} native_options;

/* Sets o to the defaults above. */
void native_options_init(native_options *o);

/* Whether schedule k can run under o's runtime (p2p_sync, grad_sync_end, zero,
 * overlap_param_gather), as the rule's one owner (planner/search3d.h,
 * search3d_runtime_check) says: p2p sync not with a V-placed kind (zb-v, dualpipev),
 * grad_sync end not with an asynchronous one (pipedream, 2bw), overlap_param_gather only
 * with zero 1, not with an asynchronous kind nor grad_sync end; zero 1 itself with every
 * kind. 0, or -1 with err set to the owner's line ("--grad-sync: expected overlap with
 * schedule pipedream (...) (got end)"). */
int native_runtime_check(const native_options *o, sched_kind k, plumb_err *err);

/* o's runtime in words: "zero 1" when set, then search3d_runtime_text's ("parameter
 * all-gather under the forward (zero 1), p2p sync, gradients reduced at the end"), into
 * buf (always terminated); "" at the default. */
void native_runtime_text(const native_options *o, char *buf, size_t n);

/* Sets o's runtime (p2p_sync, grad_sync_end, zero, overlap_param_gather) on plan pl, as
 * the planner's candidates carry it (before they are simulated and when they are
 * returned); overlap_param_gather only where pl can take it (zero 1, a synchronous
 * kind). */
void native_runtime_apply(plan *pl, const native_options *o);

/* The microbatch count the native planner gives pl's stages under schedule k when none is
 * asked for: a multiple of every stage's replica count (of the largest when their lcm
 * exceeds 64; always of the lcm for pipedream and 2bw), at least 4 x stages and the
 * largest replica count; for the flushing kinds also 2 x stages microbatches per replica
 * of the most replicated stage, up to 4 x the devices used (2bw: what its weight
 * versions need; interleaved and zb-v: 2 x ranks). The planner
 * falls back to 4 x stages when that does not fit memory (gpipe). Baselines compared
 * with the planner (tests, bench) use it too. */
int native_default_microbatches(const plan *pl, sched_kind k);

/* One evaluated candidate (a schedule, a microbatching, a recomputation choice and the
 * best partition the dynamic program found for them). */
typedef struct native_candidate {
    plan *pl;                   /* owned; its predicted figures are the simulator's when
                                   simulated, else the cost model's */
    sched_kind schedule;
    int microbatches, microbatch_size, recompute, chunks, nstages, ndevices_used;
    int async;                  /* 1: the schedule changes training semantics (stale weights) */
    double est_iteration_s;     /* native cost model */
    double est_samples_per_s;
    double est_peak_memory_bytes; /* largest device, native memory model */
    int simulated;              /* 1: the sim_* figures below are set */
    double sim_iteration_s;
    double sim_samples_per_s;
    double sim_bubble_fraction;
    double sim_peak_memory_bytes; /* largest device peak, simulator's memory model */
    double capacity_bytes;      /* smallest capacity among the devices used */
    int fits;                   /* the simulator (or, when not simulated, the model) says
                                   every device fits */
    char config[96];            /* replicas per stage joined by '-', e.g. "4-2-1-1" */
    char reason[320];           /* why it wins or loses (auto ranking), with units */
} native_candidate;

/* A kind `--schedule auto` did not search, and why. */
typedef struct native_skip {
    sched_kind schedule;
    char reason[256];           /* the owner's line (native_runtime_check) */
} native_skip;

typedef struct native_result {
    int ncand;
    native_candidate *cand;     /* ranked: fitting candidates by simulated (else estimated)
                                   throughput, best first; then those that do not fit */
    int nsimulated;             /* simulator runs made */
    int dp_runs;                /* dynamic programs solved */
    int nexact;                 /* candidates re-priced with their schedule's memory
                                   counts (nm_price_exact) */
    double single_samples_per_s; /* whole model on the fastest device, compute only */
    double capacity_bytes;      /* smallest device capacity considered (after the limit) */
    int nothing_fits;           /* 1: no candidate fits memory */
    int over_budget;            /* 1: refused, the simulations it must run being above the
                                   work budget (docs/sim.md, "Work budget") */
    double sim_budget_used;     /* the estimate of those simulations (sim_actions' units) */
    char suggestion[640];       /* when nothing fits: what would ("recomputation (peak 9.1
                                   GiB)", "microbatches of 32 samples", "24 devices") */
    int nskipped;               /* --schedule auto: kinds not searched, as their runtime
                                   refuses them (native_runtime_check) */
    native_skip skipped[NATIVE_MAX_SKIPPED];
    double plan_ms;             /* wall time of the call */
} native_result;

void native_result_free(native_result *r);

/* Checks that profile p and cluster c can work together at all (bad input, exit 2): the
 * cluster has devices, every level a bandwidth > 0, every device memory > 0; the profile
 * has layers and some compute; the model's weights, gradients and optimizer state (the
 * least any plan needs) fit in the memory of all devices together. Returns 0, or -1 with
 * err set to one line naming the profile and cluster and what is wrong. */
int planner_native_check(const profile *p, const cluster *c, const native_options *o,
                         plumb_err *err);

/* Plans p on c with the native cost model for o->schedule (or every schedule when it is
 * NATIVE_SCHED_AUTO). Returns the best plan that fits memory (caller frees with plan_free)
 * with its predicted figures, and fills *res when res is not NULL (ranked candidates).
 * Returns NULL with err set when the inputs are bad (planner_native_check's message) or
 * when nothing fits: then err says so and names what would fit (res->nothing_fits = 1 and
 * res->suggestion hold the same). */
plan *planner_native(const profile *p, const cluster *c, const native_options *o,
                     native_result *res, plumb_err *err);

/* Auto search: every schedule (pipedream, 1f1b-flush, 2bw, gpipe, interleaved, zb-h1) x
 * microbatch counts x recomputation (x smaller microbatches when memory is short), each
 * partitioned by the dynamic program and estimated by the cost model; the best are
 * simulated and everything is ranked by simulated throughput with a reason per candidate.
 * o->schedule is ignored. Returns 0 and fills *res (at least one candidate), or -1 with err
 * on bad input. res->nothing_fits tells whether any candidate fits. */
int planner_auto(const profile *p, const cluster *c, const native_options *o,
                 native_result *res, plumb_err *err);

/* Plain data parallelism: one stage of every layer on devices 0..ndev-1 (ndev <= 0: all),
 * schedule 1f1b-flush, the profile's minibatch. NULL with err when out of memory. */
plan *native_dp_plan(const profile *p, const cluster *c, int ndev, plumb_err *err);

/* Simulates pl's partition as planner_native would score it under o (NULL = defaults):
 * o's schedule (NATIVE_SCHED_AUTO: 1f1b-flush), microbatch size (0: the profile's),
 * microbatches (0: native_default_microbatches), optimizer, runtime (p2p_sync,
 * grad_sync_end), memory limit and iterations;
 * recomputation off, on, or both (o->recompute), keeping the run that fits, then the
 * faster. Returns its samples/s (-1 when the simulator refused every run) and sets
 * *recompute and *fits (either may be NULL). Does not modify pl. */
double native_sim_as(const plan *pl, const native_options *o, int *recompute, int *fits);

/* Prints the top `top` candidates of res as a table (rank, schedule, sync/async mark,
 * microbatches x size, recompute, stages, throughput, peak memory, reason), every figure
 * with its unit; then one line per kind auto skipped ("skipped: pipedream: --grad-sync:
 * ..."). */
void native_result_print(const native_result *res, int top, FILE *out);

/* The JSON of res's top `top` candidates (an array of objects; caller frees). */
struct cJSON;
struct cJSON *native_result_to_json(const native_result *res, int top);

/* The kinds auto skipped as a JSON array of {"schedule", "reason"} (caller frees); NULL
 * when none was skipped or out of memory. */
struct cJSON *native_skipped_to_json(const native_result *res);

#endif
