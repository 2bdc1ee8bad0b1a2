/* search3d.h: the search over tensor x pipeline x data layouts of a transformer
 * (docs/llm.md, "Searching layouts"). Every layout of the free dimensions is built with
 * planner/layout3d.h and priced with the simulator's own cost and memory model
 * (sim_cost_build and sim_memory_of on a short schedule of the plan) plus the makespan of
 * its schedule kind (a closed form, or the short schedule's order replayed at the priced
 * times); those that do not fit their devices' memory are dropped, the
 * best estimates are simulated in full (sim_run) and ranked by simulated throughput. Only
 * synchronous schedules are searched (1f1b-flush, interleaved, and a kind the caller
 * fixes among the synchronous ones); PipeDream's asynchronous kinds change what training
 * computes and stay with fixed layouts and `plumb plan -p`. */
#ifndef PLUMB_SEARCH3D_H
#define PLUMB_SEARCH3D_H

#include "core/cluster.h"
#include "core/plan.h"
#include "core/transformer.h"
#include "planner/balance3d.h"
#include "planner/layout3d.h"
#include "sim/sim.h"

#define SEARCH3D_SIMULATE 5 /* estimates simulated in full by default */
#define SEARCH3D_FREE (-1)   /* a dimension the search chooses */
#define SEARCH3D_SYNC_FACTOR 2 /* x SEARCH3D_SIMULATE under p2p sync: a margin for the
                                  rendezvous, which the estimate prices by kind (1f1b-flush's
                                  blocking sends; interleaved's and zb-h1's orders replayed
                                  under the synchronous rules): within 1 % of the simulator
                                  on the layouts measured (docs/llm.md) */

typedef struct search3d_options {
    int gpus;              /* devices, whole servers from the cluster's first; 0: all */
    int global_batch;      /* sequences per iteration, > 0 */
    int tp, pp, dp;        /* fixed when > 0, else searched */
    int cp;                /* context-parallel ranks: fixed when > 0; 0: searched in {1, 2,
                              4, 8} where 2 cp divides the sequence, the attention is flash
                              (Transformer Engine runs context parallelism only there) and
                              tp x cp divides a server (docs/llm.md, "Context parallelism") */
    int microbatch_size;   /* fixed when > 0, else searched */
    int interleave;        /* fixed when > 0, else searched (1, and V > 1 interleaved) */
    int recompute;         /* recompute_kind, or SEARCH3D_FREE */
    int sequence_parallel; /* 0 or 1, or SEARCH3D_FREE (searched where tp > 1) */
    int zero;              /* 0 or 1, or SEARCH3D_FREE (searched where dp > 1) */
    int schedule;          /* a synchronous sched_kind, or SEARCH3D_FREE (1f1b-flush at
                              V = 1, interleaved at V > 1) */
    int checkpoint_layers; /* as layout3d_options (-1: the default) */
    dev_precision precision;
    dev_precision grad_reduce;     /* of every candidate (layout3d_options) */
    dev_precision optimizer_state; /* likewise */
    long long seq;         /* tokens per sequence; 0: the model's */
    int attention;         /* llm_attention of every layout (standard or flash) */
    int cross_entropy;     /* llm_cross_entropy of every layout (unfused, te or native) */
    int grad_accum;        /* llm_grad_accum of every layout (fused or unfused) */
    int simulate;          /* best estimates simulated in full; 0: SEARCH3D_SIMULATE (x
                              SEARCH3D_SYNC_FACTOR with p2p_sync) */
    /* the runtime, fixed for every candidate (not searched; docs/llm.md, "Searching
     * layouts"): set on each plan estimated and simulated where it applies */
    plan_tp_overlap tp_overlap; /* candidates with tp > 1 (tp 1 has no collectives) */
    int overlap_param_gather;   /* 1: on the zero 1 candidates (all schedules searched are
                                   synchronous) */
    int p2p_sync;               /* 1: synchronous point-to-point transfers; the V kinds
                                   (zb-v, dualpipev), which deadlock under it, are skipped */
    int p2p_whole;              /* 1: the pipeline sends of tp > 1 without sequence
                                   parallelism move the whole tensor from every tensor rank
                                   (plan "p2p_split": "whole"); 0: scatter-gather */
    int fp8_param_gather;       /* 1 (precision fp8, zero 1): FP8 primary weights on
                                   every candidate (plan "fp8_param_gather"; Megatron-Core's
                                   --fp8-param-gather) */
    int grad_sync_end;          /* 1: the gradients reduced after each worker's last
                                   backward (plan "grad_sync": "end"); all schedules searched
                                   flush, so every candidate takes it */
    int balance;                /* 1: each candidate simulated in full has its stages
                                   balanced first (layout3d_balance, planner/balance3d.h) and
                                   is ranked by the plan it keeps; the estimates stay even */
} search3d_options;

/* Everything free, bf16, the model's sequence length; gpus and global_batch 0 (the caller
 * sets the batch); the default runtime (tp_overlap none, no parameter all-gather apart,
 * overlapped point-to-point). */
void search3d_options_init(search3d_options *o);

/* Initialises *so (search3d_options_init) and copies into it every field that the fixed
 * layout o fixes: gpus, global batch, tp, pp, dp, microbatch size, interleave (0 stays 0:
 * layout3d_resolve derives it), recompute, checkpoint layers, sequence parallelism, zero,
 * schedule (-1: SEARCH3D_FREE, layout3d's default), precision, gradient and optimizer-state
 * precision, sequence length, attention, p2p, p2p split and balance. What a layout does not hold
 * stays at search3d_options_init's value (simulate, tp_overlap, overlap_param_gather): the
 * caller sets those, and frees the fields it searches. The one owner of this copy (`plumb
 * plan --model`'s search and fixed layout, `plumb ui --model`'s runtime check). Cannot
 * fail; o is not kept. */
void search3d_options_from_layout(const layout3d_options *o, search3d_options *so);

/* Initialises *so (search3d_options_init) and copies into it what plan pl fixes, as the
 * simulator runs it under the what-ifs w (NULL: the plan as written; else the plan
 * sim_options_view makes, w's fields where it sets them): the schedule, gpus (plan_gpus),
 * the global batch (microbatch size x microbatches), tp, pp (stages / chunks), dp (the
 * stages' replica count, 0 where they differ: no one dp), microbatch size, interleave
 * (chunks), recompute, checkpoint layers (full recompute's own: -1 with another kind),
 * sequence parallelism, zero, precision, gradient and optimizer-state precision, tp
 * overlap, the all-gather apart, FP8 primary weights, p2p split, p2p and grad-sync. What a plan does not hold stays at
 * search3d_options_init's value (seq, attention, simulate, balance); pl NULL leaves every
 * setting there (free). The one owner of a plan's runtime as search3d_runtime_check reads
 * it (`plumb sim`'s what-ifs, the 2D dashboard's schedule keys). Cannot fail; pl and w
 * are not kept. */
void search3d_options_from_plan(const plan *pl, const sim_options *w, search3d_options *so);

/* The closed-form estimate of one layout, seconds per iteration and its parts. */
typedef struct search3d_est {
    double iteration_s;    /* the estimate: pipeline makespan + exposed all-reduce + step */
    double compute_s;      /* the busiest pipeline rank's F and B of every microbatch,
                              without recomputation and tensor-parallel collectives */
    double recompute_s;    /* ... its recomputation */
    double tp_s;           /* ... its tensor-parallel collectives */
    double bubble_s;       /* fill and drain of the pipeline (ramp-up and ramp-down) */
    double p2p_s;          /* pipeline sends on the fill and drain path; with p2p sync also
                              every send of the busiest rank's microbatches (blocking) */
    double dp_s;           /* the data-parallel all-reduce left exposed after the backward
                              (with overlap_param_gather: the reduce-scatter, plus the
                              all-gather's part the next first forward waits for) */
    double step_s;         /* the optimizer step */
    double peak_bytes;     /* the largest device memory, the simulator's memory model */
    double capacity_bytes; /* that device's capacity */
    int fits;              /* every device fits */
} search3d_est;

/* One layout: its options (every dimension set), dimensions and figures. */
typedef struct search3d_cand {
    layout3d_options o;
    layout3d_dims d;
    search3d_est est;
    int simulated;         /* 1: the figures below are sim_run's */
    double iteration_s, tokens_per_s, tflops_per_gpu, mfu, bubble_fraction, peak_bytes;
    int fits;
    int balanced;          /* with search3d_options.balance: 1 when its stages moved (the
                              figures above are the balanced plan's) */
    double even_iteration_s; /* ... the even split's simulated iteration (balanced: before) */
} search3d_cand;

typedef struct search3d_result {
    long long enumerated;  /* layouts built and estimated */
    long long fitting;     /* of which fit memory by the estimate */
    int nranked;           /* simulated and fitting, best first */
    search3d_cand *ranked; /* [nranked] by simulated tokens/s, descending */
    plan *best;            /* the best layout's plan (pred_* set from its run); owned */
    sim_report *best_report; /* its simulation; owned */
    layout3d_balance_result best_balance; /* with search3d_options.balance: what balancing
                                             the best layout's stages found */
    double estimate_cpu_s, simulate_cpu_s; /* CPU time of the two phases */
} search3d_result;

/* Estimates the layout of plan pl (built by layout3d_build) into out: the priced stages
 * (sim_cost_build on a schedule of the plan cut to the microbatches that reach its
 * steady memory), the device memory (sim_memory_of) of each pipeline rank's first
 * group, and the closed-form iteration time of its schedule kind, under the plan's
 * runtime (tp_overlap, overlap_param_gather, p2p_sync, grad_sync_end;
 * search3d_apply_runtime). 0, or -1
 * with err (out of memory, a schedule the generator refuses). */
int search3d_estimate(const plan *pl, search3d_est *out, plumb_err *err);

/* search3d_estimate of pl at each of the nz ZeRO stages zeros[] into out[0..nz), from one
 * schedule and, where the stage does not change the runtime's buffers, one priced model
 * (the ZeRO stage changes the training state, the all-reduce and the step, not the
 * stages' times). 0, or -1 with err as search3d_estimate. */
int search3d_estimate_zeros(const plan *pl, int nz, const int *zeros, search3d_est *out,
                            plumb_err *err);

/* Searches the layouts of model t on the first o->gpus devices of cluster c (file
 * cluster_file, for messages) under o. Returns a new result (search3d_free) whose
 * ranking holds at least one layout, or NULL with err set to one line: an option's bad
 * value ("--tp", ..., as layout3d_resolve), an asynchronous --schedule, a GPU count no
 * layout can use, a global batch no layout divides, a model that fits no layout's memory
 * (naming what would: more GPUs, recomputation, smaller microbatches), out of memory. */
search3d_result *search3d_run(const transformer *t, const cluster *c, const char *cluster_file,
                              const search3d_options *o, plumb_err *err);

void search3d_free(search3d_result *r);

/* Checks the options that do not depend on the GPU count, as `plumb plan --model`'s search
 * does: a fixed --schedule that is synchronous, and a fixed interleave within the kind's
 * chunks (2 or more for the chunked kinds); then search3d_runtime_check; a global batch
 * >= 1. 0, or -1 with err naming the option ("--schedule", ...). search3d_run checks them
 * first. */
int search3d_options_check(const search3d_options *o, plumb_err *err);

/* The checks of o that hold for a fixed layout too (`plumb plan --model --tp T --pp P
 * --dp D` and `plumb ui --model` give their own values: zero 0 or 1, tp the given or
 * resolved one, 0 when not known yet): checkpoint_layers > 0 only with recompute full;
 * overlap_param_gather not with zero fixed at 0 nor with an asynchronous schedule fixed;
 * p2p_sync not with a fixed V-placed schedule (zb-v, dualpipev: they deadlock under it);
 * grad_sync_end not with an asynchronous schedule fixed (its iterations overlap) nor with
 * overlap_param_gather; grad_reduce or optimizer_state bf16 only at precision bf16;
 * fp8_param_gather only at precision fp8 with zero fixed at 1 (Megatron-Core's FP8 primary
 * weights need the distributed optimizer); tp_overlap not with tp fixed at 1. 0, or -1
 * with err naming the option ("--checkpoint-layers: belongs to --recompute
 * full"). The one owner of these rules and their lines. */
int search3d_runtime_check(const search3d_options *o, plumb_err *err);

/* The runtime o gives every candidate (tp_overlap, overlap_param_gather, p2p_sync,
 * p2p_whole, grad_sync_end, grad_reduce, optimizer_state) as "tp overlap full (tp > 1),
 * parameter all-gather under the forward (zero 1), p2p sync, p2p whole tensor (tp > 1
 * without sequence parallelism), gradients reduced at the end, gradients
 * bf16, optimizer state bf16, fp8 param gather, grad accumulation unfused" into buf (always
 * terminated); "" at the default runtime. */
void search3d_runtime_text(const search3d_options *o, char *buf, size_t n);

/* 1 when every dimension of o is fixed (the search has one layout to try). */
int search3d_all_fixed(const search3d_options *o);

/* Why ranked candidate i of r wins or loses, one line into buf (always terminated): its
 * bubble, tensor-parallel and exposed data-parallel shares and how it fits memory; for
 * i > 0 also how much slower than the first and the part that costs it most. */
void search3d_why(const search3d_result *r, int i, char *buf, size_t n);

/* Sets o's runtime (tp_overlap, overlap_param_gather, p2p_sync, p2p_whole, grad_sync_end,
 * fp8_param_gather) on plan pl,
 * each where pl can take it (plan_validate): tp_overlap where pl->tp > 1, the all-gather
 * apart where pl->zero is 1 and its schedule synchronous, the reduction at the end where
 * its schedule is synchronous, FP8 primary weights where its precision is fp8 and zero 1. */
void search3d_apply_runtime(plan *pl, const search3d_options *o);

/* Candidate c as a JSON object: "tp", "pp", "dp", "microbatch_size", "interleave",
 * "schedule", "recompute", "sequence_parallel", "zero", "iteration_s",
 * "estimate_iteration_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_bytes",
 * "capacity_bytes"; with balance also "balanced" and "even_iteration_s". NULL when out of
 * memory; the caller owns it (cJSON_Delete). */
struct cJSON;
struct cJSON *search3d_cand_json(const search3d_cand *c);

#endif
