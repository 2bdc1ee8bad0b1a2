/* plan.h: the planner's answer and the executor's order (plumb-plan/1). A plan is
 * self-contained: it embeds the profile and the cluster it was made for (a file may instead
 * name them by path, relative to the plan file), the schedule kind, the microbatching, and
 * the stages: contiguous ranges of the profile's layer order, each replicated on a list of
 * devices. Predicted figures are in seconds and bytes. */
#ifndef PLUMB_PLAN_H
#define PLUMB_PLAN_H

#include <stddef.h>

#include "cluster.h"
#include "err.h"
#include "pplayout.h"
#include "profile.h"
#include "transformer.h"

#define PLAN_FORMAT "plumb-plan/1"

/* Schedule kinds, in the order `plumb` lists them; what each kind is (chunks, placement,
 * asynchrony, ...) is core/schedule_traits.h's table. */
typedef enum sched_kind {
    SCHED_GPIPE = 0,
    SCHED_1F1B_FLUSH,   /* PipeDream-Flush */
    SCHED_PIPEDREAM,    /* asynchronous 1F1B with weight stashing (1F1B-RR when replicated) */
    SCHED_2BW,          /* PipeDream-2BW */
    SCHED_INTERLEAVED,  /* Megatron-LM interleaved 1F1B, `chunks` virtual stages per device */
    SCHED_ZB_H1,        /* zero-bubble ZB-H1 (B split into I and W) */
    SCHED_ZB_V,         /* zero-bubble ZB-V (2 chunks per device, V placement) */
    SCHED_DUALPIPEV,    /* DualPipeV (2 chunks per device, V placement, both directions
                           overlapped) */
    SCHED_NKINDS
} sched_kind;

/* The kind's name ("gpipe", "1f1b-flush", ..., "dualpipev"; the trait table's), or
 * "unknown". */
const char *sched_kind_name(sched_kind k);
/* Parses a name; returns -1 when unknown. */
int sched_kind_parse(const char *name);
/* 1 when the schedule changes training semantics (pipedream, 2bw: stale weights). */
int sched_kind_is_async(sched_kind k);

typedef enum optimizer_kind {
    OPT_SGD = 0,        /* plain SGD: no optimizer state */
    OPT_MOMENTUM,       /* SGD with momentum: one state tensor per weight */
    OPT_ADAM,           /* Adam: two state tensors per weight */
    OPT_NKINDS
} optimizer_kind;
const char *optimizer_kind_name(optimizer_kind k);  /* "sgd", "momentum", "adam" */
int optimizer_kind_parse(const char *name);         /* -1 when unknown */

/* Activation recomputation: what the backward recomputes instead of keeping. */
typedef enum recompute_kind {
    RECOMPUTE_NONE = 0,      /* every activation is kept until its backward */
    RECOMPUTE_FULL,          /* the forward runs again before the backward, from checkpoints
                                (plan.checkpoint_layers says which inputs are kept) */
    RECOMPUTE_SELECTIVE,     /* only the layers' selective parts (a transformer block's
                                attention core: profile selective_recompute_ms) run again */
    RECOMPUTE_NKINDS
} recompute_kind;
const char *recompute_kind_name(recompute_kind k);  /* "none", "full", "selective" */
int recompute_kind_parse(const char *name);         /* -1 when unknown */

/* Tensor-parallel communication against the GEMMs (sim/cost.c, docs/sim.md). */
typedef enum plan_tp_overlap {
    TP_OVERLAP_NONE = 0,     /* every collective blocks its rank */
    TP_OVERLAP_BACKWARD,     /* the backward's collectives under the weight-gradient GEMM */
    TP_OVERLAP_FULL,         /* every collective pipelined with its adjacent GEMM in chunks */
    TP_OVERLAP_NKINDS
} plan_tp_overlap;
const char *plan_tp_overlap_name(plan_tp_overlap k); /* "none", "backward", "full" */
int plan_tp_overlap_parse(const char *name);         /* -1 when unknown */
/* plan.cross_entropy's words: "unfused" (0), "te" (1), "native" (2); "unknown" out of range. */
const char *plan_cross_entropy_name(int k);
int plan_cross_entropy_parse(const char *name);     /* -1 when unknown */
/* plan.grad_accum's words: "fused" (0), "unfused" (1); "unknown" out of range. */
const char *plan_grad_accum_name(int k);
int plan_grad_accum_parse(const char *name);        /* -1 when unknown */

/* The model a transformer's layout was laid out from (the plan file's "model";
 * planner/layout3d.c sets it on every plan it builds): the transformer and the layout
 * options that the plan's own fields do not hold, so that the plan can be laid out again
 * (plumb ui PLAN.json re-plans it as plumb ui --model does) and says how its blocks were
 * split. The options are planner/layout3d.h's of the same names. */
typedef struct plan_model {
    transformer *tf;             /* owned; tf->seq is the sequence length laid out (the
                                    file's "seq_len", equal to the profile's
                                    tokens_per_sample) */
    int attention;               /* llm_attention: 0 standard, 1 flash (the file's
                                    "attention") */
    int balance;                 /* 1: balanced after building (--balance) */
    pplayout_split_opts split;   /* Megatron-Core's four other uneven-split options (0: not
                                    given) */
    char *pipeline_layout;       /* owned, or NULL: --pipeline-layout, Megatron-Core's
                                    layout string (core/pplayout.h) */
} plan_model;

/* A model of a copy of t (seq as t has it) with every option off; NULL when out of
 * memory. plan_model_clone: a deep copy (NULL for NULL). plan_model_free takes NULL. */
plan_model *plan_model_new(const transformer *t);
plan_model *plan_model_clone(const plan_model *m);
void plan_model_free(plan_model *m);
/* 1 when both are NULL, or both describe the same transformer (transformer_equal) and
 * options. */
int plan_model_equal(const plan_model *a, const plan_model *b);

typedef struct plan_stage {
    int first_layer, last_layer; /* inclusive range in the profile's layer order */
    int replicas;                /* data-parallel copies, >= 1; each is one device, or with
                                    tp > 1 one tensor-parallel group */
    int *devices;                /* [replicas] device ids in the cluster: with tp > 1 the
                                    first device of each group, which holds devices
                                    d .. d + tp - 1, all on one server */
    /* predicted figures (seconds; < 0 when not predicted) */
    double compute_s;            /* forward + backward per minibatch on one replica */
    double comm_s;               /* time to send its output / receive gradients, per minibatch */
} plan_stage;

typedef struct plan {
    profile *prof;               /* owned */
    cluster *clus;               /* owned */
    char *profile_ref;           /* path the file named, or NULL when embedded */
    char *cluster_ref;           /* likewise */
    sched_kind schedule;
    int chunks;                  /* virtual stages per device (the chunked kinds); else 1 */
    int microbatch_size;         /* samples per microbatch, > 0 */
    int microbatches;            /* microbatches per minibatch (per flush), > 0 */
    int recompute;               /* recompute_kind (0 none; 1 full, as the file's `true`) */
    int checkpoint_layers;       /* full recompute keeps the input of every
                                    checkpoint_layers layers of a stage (Megatron-LM's
                                    uniform method; 1: each layer's input); 0: only the
                                    stage's input (the whole stage's forward runs again).
                                    0 unless recompute is full; at most the blocks of the
                                    largest stage (plan_checkpoint_check) */
    int tp;                      /* tensor-parallel ranks per stage replica, >= 1; equals
                                    the profile's tp (its figures are one rank's share) */
    int sequence_parallel;       /* 1: sequence parallelism (equals the profile's) */
    int cp;                      /* context-parallel ranks per stage replica, >= 1 (the
                                    file's "cp", written when > 1; equals the profile's cp):
                                    a replica is then tp x cp devices from its first, tp
                                    fastest (Megatron-Core's order tp-cp-dp-pp), context-
                                    parallel rank k holding tensor group d + k tp, and
                                    tokens_per_sample a multiple of 2 cp (Transformer
                                    Engine's load-balanced causal split) */
    int zero;                    /* ZeRO stage: 0, or 1 (the optimizer state and master
                                    weights sharded over a stage's replicas, Megatron-LM's
                                    distributed optimizer) */
    int overlap_param_gather;    /* 1 (zero 1 only): the distributed optimizer's parameter
                                    all-gather runs after the optimizer step, bucket by
                                    bucket, under the next iteration's forward, which waits
                                    only for the buckets it reaches (Megatron-Core's
                                    --overlap-param-gather); 0: one ring all-reduce with
                                    the last backward (docs/sim.md) */
    int fp8_param_gather;        /* 1 (precision fp8 and zero 1 only): FP8 primary weights
                                    (the file's "fp8_param_gather"; Megatron-Core's
                                    --fp8-param-gather): the transformer blocks' weights
                                    exist only as FP8 tensors (1 byte, and Transformer
                                    Engine's FP8 transpose), no bf16 copy, and the
                                    parameter all-gather moves them at 1 byte each
                                    (sim/memory.c, sim/cost.c; docs/llm.md) */
    int cross_entropy;           /* the LM head's loss as the profile prices it (the file's
                                    "cross_entropy", written only when not "unfused"): 0
                                    "unfused" (default: Megatron-Core's vocabulary-parallel
                                    fp32 loss), 1 "te" (Transformer Engine's fused
                                    cross-entropy), 2 "native" (Megatron-Core's fused one); the
                                    values of planner/llm_profile.h's llm_cross_entropy. A
                                    record of how the profile was built: the simulator reads
                                    the profile's figures, not this */
    int grad_accum;              /* how the profile prices the weight gradients' accumulation
                                    into the main gradients (the file's "grad_accum", written
                                    only when "unfused"): 0 "fused" (default: the weight-
                                    gradient GEMM accumulates into them), 1 "unfused" (a
                                    separate add per parameter tensor per backward); the
                                    values of planner/llm_profile.h's llm_grad_accum. A record,
                                    like cross_entropy: the simulator reads the profile's
                                    figures */
    plan_tp_overlap tp_overlap;  /* the tensor-parallel collectives against the GEMMs
                                    (the file's "tp_overlap"; sim/cost.c): NONE (default,
                                    every collective blocks), BACKWARD (the input-gradient
                                    all-reduce under the weight-gradient GEMM, Megatron-LM's
                                    asynchronous all-reduce) or FULL (each collective
                                    pipelined with its adjacent GEMM in chunks, Transformer
                                    Engine's --tp-comm-overlap); not NONE only with tp > 1 */
    dev_precision precision;     /* of weights and activations (the profile's bytes);
                                    bf16/fp16: mixed precision, with fp32 gradients, fp32
                                    master weights and fp32 optimizer state; fp32/tf32
                                    (default): everything in the parameters' own bytes */
    dev_precision grad_reduce;   /* the data-parallel gradients' element (the file's
                                    "grad_reduce"; sim/memory.c): FP32 (default) keeps and
                                    reduces the precision's own gradients (fp32 main
                                    gradients with bf16); BF16 (precision bf16 only) keeps
                                    and reduces them in bf16, half the bytes (Megatron-Core's
                                    --grad-reduce-in-bf16, apex's grad_sync_dtype bf16) */
    dev_precision optimizer_state; /* the optimizer state's element (the file's
                                    "optimizer_state"; sim/memory.c): FP32 (default) fp32
                                    master weights and moments; BF16 (precision bf16 only)
                                    the moments in bf16 and the bf16 weights as their own
                                    master copy (apex's DistributedFusedAdam dtype bf16) */
    optimizer_kind optimizer;
    int p2p_sync;                /* 1: the runtime's point-to-point transfers are
                                    synchronous (the file's "p2p": "sync"; sim/engine_sync.c):
                                    a send moves once its receiver has posted the receive, and
                                    the sender computes again only when it has arrived; 0
                                    ("overlap", the default): transfers overlap with compute */
    int p2p_whole;               /* 1: with tp > 1 and no sequence parallelism, every
                                    tensor rank sends and receives the whole s x b x h
                                    tensor over its own link (the file's "p2p_split":
                                    "whole"; current Megatron-Core); 0 ("scatter-gather",
                                    the default): a rank sends 1 / tp of it and an
                                    all-gather after the receive rebuilds it (Megatron-LM
                                    of 2021-2022; sim/cost.c, docs/sim.md). No effect with
                                    sequence parallelism or tp 1 (the send is one rank's
                                    share already, or there is one rank) */
    int grad_sync_end;           /* 1: the data-parallel gradient reduction runs after the
                                    worker's last forward / backward of the iteration (the
                                    file's "grad_sync": "end"; sim/engine_gradsync.c): its
                                    stages' rings one after another, then its steps, as
                                    Megatron-LM's own DDP and Megatron-Core without
                                    --overlap-grad-reduce; 0 ("overlap", the default): each
                                    stage's ring overlaps its last backward (PyTorch DDP) */
    int nstages;
    plan_stage *stages;
    /* predicted figures; < 0 when not predicted */
    double pred_iteration_s;     /* time per minibatch (one flush / steady-state round) */
    double pred_samples_per_s;
    double pred_speedup_vs_dp;
    double pred_speedup_vs_1;
    double *pred_peak_memory_bytes; /* [clus->ndevices] or NULL */
    char *planner_config;        /* PipeDream configuration string like "15-1", or NULL */
    plan_model *model;           /* owned, or NULL: the transformer it was laid out from
                                    (the file's "model", written only when set) */
} plan;

/* Loads and validates a plan. Profiles and clusters named by path are loaded relative to
 * the plan file's folder. Returns a new plan (free with plan_free) or NULL with err set.
 * Rejects, besides malformed values: stages that do not cover the layers in order exactly
 * once, devices out of the cluster's range or used by two stages (unless chunks > 1, where
 * each device holds `chunks` stages), replica counts that do not match the device lists,
 * checkpoint_layers with a recompute not full or over the blocks of every stage. */
plan *plan_load(const char *path, plumb_err *err);
/* The path of `ref` (a plan's profile_ref or cluster_ref) as plan_load opened it: relative
 * to the folder of the plan file `file`, unchanged when absolute. Returns a new string the
 * caller frees, NULL when out of memory. */
char *plan_ref_path(const char *file, const char *ref);
struct cJSON;
plan *plan_from_json(const struct cJSON *root, const char *file, plumb_err *err);

/* The "model" object v of plan file `file` whose other fields pl holds, read and checked
 * against pl (valid: plan_validate's): a plumb-transformer/1 "transformer" whose blocks are
 * the profile's (a transformer's analytic profile, its layers less the embedding and the
 * head), "seq_len" the profile's tokens_per_sample (within learned positions),
 * "attention" standard or flash (flash with cp > 1), "balance", and Megatron-Core's
 * uneven split (decoder_first/last_pipeline_num_layers: the blocks the stages give
 * pipeline rank 0 / pp - 1; account_for_embedding/loss_in_pipeline_split;
 * pipeline_model_parallel_layout: a layout string whose virtual stages hold the blocks the
 * plan's stages do; no two kinds together, none with balance). Returns a new model, or NULL with err set to one line
 * naming the file and the field ("FILE: model.seq_len: ..."). */
plan_model *plan_model_from_json(const struct cJSON *v, const plan *pl, const char *file,
                                 plumb_err *err);
/* m as the file's "model" object (the transformer written by transformer_to_json; the
 * options only when set, but seq_len and attention always). NULL when out of memory. */
struct cJSON *plan_model_to_json(const plan_model *m);

/* The plan as JSON, embedding its profile and cluster. Caller frees with cJSON_Delete. */
struct cJSON *plan_to_json(const plan *pl);
int plan_save(const plan *pl, const char *path, plumb_err *err);
int plan_validate(const plan *pl, const char *file, plumb_err *err);

/* The rules between the runtime settings and the schedule, one owner for plan files
 * (plan_validate) and the options of the planners, `plumb sim` and the dashboard
 * (search3d_runtime_check): overlap_param_gather needs zero 1 and a synchronous schedule
 * and an overlapped gradient reduction; p2p sync does not run a V placement (zb-v,
 * dualpipev: it deadlocks); grad_sync end needs a synchronous schedule. tr NULL (no
 * schedule fixed yet) skips the schedule's rules; zero < 0 means not fixed. Returns 0, or -1
 * with err naming the plan file's field (file non-NULL) or the option (file NULL). */
struct sched_traits;
int plan_runtime_check(const struct sched_traits *tr, int zero, int opg, int p2p_sync,
                       int grad_sync_end, const char *file, plumb_err *err);

/* The most blocks a stage of pl holds: on a transformer's plan (profile_is_transformer) its
 * TransformerBlocks (the stage's layers less the embedding and the head), on another its
 * layers; 0 without stages. The bound of checkpoint_layers a plan gives
 * plan_checkpoint_check. pl's stages must be in its profile's layers. */
int plan_blocks_most(const plan *pl);

/* Full recomputation's checkpoint interval k (checkpoint_layers, --checkpoint-layers;
 * Megatron-LM's --recompute-num-layers with the uniform method) against the recompute kind
 * and the most blocks a virtual stage holds: k > 0 only with recompute full (recompute: a
 * recompute_kind, any other value one not full), k at most `most` (most < 0: not known
 * yet, not checked). k < 0 (not given) passes. The one owner of these rules and their
 * lines, for plan files (plan_validate; file non-NULL: the field checkpoint_layers) and
 * the options (file NULL: --checkpoint-layers of plan --model's search3d_runtime_check and
 * layout3d_resolve, and plumb sim's what-if). 0, or -1 with err. */
int plan_checkpoint_check(int recompute, int k, int most, const char *file, plumb_err *err);

/* Whether pl's stages run schedule `kind` under blocking point-to-point transfers (p2p
 * sync) without deadlock. An asynchronous kind (pipedream, 2bw) deadlocks when some stage s
 * of r replicas, each keeping w = ceil(workers of stages s .. p-1 / r) microbatches in
 * flight (the generator's count, sched_inflight_1f1b), feeds a stage of r' replicas keeping w' each with (w - 1) r > (w' + 1) r': the
 * all-reduce of s's first backwards needs sends that stage s + 1 receives only after
 * gradients it sends past that all-reduce (docs/sim.md, "Synchronous point-to-point").
 * Returns 0 (the other kinds, and every layout whose stages have equal replica counts), or
 * -1 with err naming file and field (the plan's "p2p", or the option that asked; no field
 * when out of memory). pl's
 * stages must be valid (plan_validate's). */
int plan_sync_replicas_check(const plan *pl, sched_kind kind, const char *file,
                             const char *field, plumb_err *err);
plan *plan_clone(const plan *pl);
int plan_equal(const plan *a, const plan *b);
void plan_free(plan *pl);

/* Allocates an empty plan over copies of prof and clus with n stages (devices arrays NULL,
 * predicted figures -1, schedule 1f1b-flush, 1 microbatch of the profile's minibatch; the
 * profile's tp, cp, sequence parallelism, loss and precision where it says one, else fp32).
 * Returns NULL when out of memory. */
plan *plan_new(const profile *prof, const cluster *clus, int nstages);

/* Sets stage s to layers [first, last] on `replicas` devices copied from devs. 0 or -1. */
int plan_set_stage(plan *pl, int s, int first, int last, int replicas, const int *devs);

/* Minibatch size in samples per pipeline round: microbatch_size * microbatches. With
 * replicated stages the microbatches are dealt over the replicas, so this is the global
 * batch of a tp x pp x dp plan. */
int plan_minibatch(const plan *pl);

/* The plan's tensor-parallel degree: pl->tp, 1 where it is below 1 or pl is NULL. The one
 * place that clamps it: every part asks here rather than testing pl->tp itself. */
int plan_tp(const plan *pl);

/* The plan's context-parallel degree: pl->cp, 1 where it is below 1 (a plan without
 * context parallelism) or pl is NULL. The one place that clamps it, as plan_tp. */
int plan_cp(const plan *pl);

/* The device of context-parallel rank k of replica r of stage st: the replica's first
 * device (stages[st].devices[r]) plus k tensor groups, Megatron-Core's order tp-cp-dp-pp
 * (the plan's "cp" field above). The one place that says which devices form a replica's
 * context ranks: the data-parallel group, the K/V ring and the simulator's gradient ring
 * ask here. -1 when pl has no such stage, replica or rank (k outside 0 .. plan_cp - 1). */
int plan_cp_device(const plan *pl, int st, int r, int k);

/* Devices one stage replica spans: plan_tp x plan_cp (>= 1). */
int plan_group_width(const plan *pl);

/* Devices the plan runs on: its stages' replicas (on one device each chunk's stages count
 * once) times tp x cp. */
int plan_gpus(const plan *pl);

/* Marks in used[0..pl->clus->ndevices - 1] (caller's array, cleared here) the devices pl's
 * stages run on, every member of a tensor (x context) parallel group. Returns how many are used. */
int plan_devices_used(const plan *pl, unsigned char *used);

/* How many of `total` devices are used, the idle ones listed as ranges: "16 of 16 used",
 * "15 of 16 used (device 15 idle)", "12 of 16 used (devices 3, 12-14 idle)" (cut short
 * with "..." when buf is too small; always terminated). used[i] != 0 marks device i.
 * Returns how many are used. The one wording plan, sim and sweep print. */
int plan_devices_text(const unsigned char *used, int total, char *buf, size_t n);

#endif
