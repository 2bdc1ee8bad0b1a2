/* layout3d.h: a fixed tensor x pipeline x data layout of a transformer, as Megatron-LM lays
 * it out: the analytic profile at the layout's tensor-parallel degree (planner/llm_profile.h),
 * the blocks split evenly over pp x v virtual stages (the embedding with the first, the head
 * with the last) or by Megatron-Core's uneven-split rules (layout3d_split), virtual stage k on pipeline rank k % pp (or the schedule's own placement),
 * and Megatron's rank order (tensor-parallel ranks fastest, then data-parallel, then
 * pipeline): replica r of pipeline rank p on the group whose first device is (p dp + r) tp.
 * The global batch is dealt over the dp replicas in microbatches (docs/llm.md, "3D
 * layouts"). The search over layouts is not here: every dimension is given or derived. */
#ifndef PLUMB_LAYOUT3D_H
#define PLUMB_LAYOUT3D_H

#include "core/cluster.h"
#include "core/plan.h"
#include "core/transformer.h"

typedef struct layout3d_options {
    int gpus;              /* devices used, whole servers from the cluster's first; 0: tp x pp
                              x dp when all three are given, else the whole cluster */
    int tp, pp, dp;        /* 0: not given; with two given, the third is gpus / (product x
                              cp) */
    int cp;                /* context-parallel ranks, >= 1 (0: 1): each replica is tp x cp
                              devices, tp fastest (Megatron-Core's order tp-cp-dp-pp) */
    int global_batch;      /* sequences per iteration, > 0 */
    int microbatch_size;   /* sequences per microbatch, > 0 */
    int interleave;        /* virtual stages per pipeline rank; 0: 1, or the schedule's
                              default chunks */
    int recompute;         /* recompute_kind */
    int checkpoint_layers; /* full recompute's checkpoint interval; -1: 1 for full, else 0 */
    int sequence_parallel; /* 1: sequence parallelism (needs tp > 1) */
    int zero;              /* 0, or 1: the distributed optimizer */
    dev_precision precision;
    int schedule;          /* sched_kind; -1: interleaved when interleave > 1, else
                              1f1b-flush */
    long long seq;         /* tokens per sequence; 0: the model's max_position_embeddings */
    int balance;           /* 1: the caller balances the stages after building
                              (layout3d_balance, planner/balance3d.h); layout3d_build
                              itself always makes the even split */
    int attention;         /* llm_attention of the blocks (planner/llm_profile.h): standard
                              (0, the default) or flash */
    int cross_entropy;     /* llm_cross_entropy of the loss: unfused (0, the default), te or native */
    int grad_accum;        /* llm_grad_accum of the weight gradients: fused (0, the default)
                              or unfused */
    int p2p_sync;          /* 1: the plan's "p2p": "sync" (synchronous point-to-point
                              transfers, sim/engine_sync.c); 0: overlapped (the default) */
    int p2p_whole;         /* 1: the plan's "p2p_split": "whole" (with tp > 1 and no
                              sequence parallelism every tensor rank sends the whole
                              tensor, sim/cost.c); 0: scatter-gather (the default) */
    int grad_sync_end;     /* 1: the plan's "grad_sync": "end" (the gradients reduced after
                              the last backward, sim/engine_gradsync.c); 0: overlapped */
    dev_precision grad_reduce;     /* the plan's grad_reduce: DEV_FP32 (default) or
                                      DEV_BF16 (with precision bf16) */
    dev_precision optimizer_state; /* the plan's optimizer_state, likewise */
    pplayout_split_opts split; /* Megatron-Core's uneven pipeline splits (layout3d_split):
                              first_blocks F, pipeline rank 0 holds F blocks over its v
                              virtual stages; last_blocks, rank pp - 1 likewise;
                              account_embedding / account_loss 1: the embedding / the head
                              and loss count as a block in the split; all 0: the even split */
    const char *pipeline_layout; /* --pipeline-layout: Megatron-Core's layout string
                              (core/pplayout.h; borrowed, the caller keeps it alive), which
                              fixes the blocks of every virtual stage and the stages per rank;
                              NULL: not given. Excludes the four options above */
} layout3d_options;

/* Nothing given (tp, pp, dp, gpus 0), global batch and microbatch size 0 (the caller must
 * set them), interleave 0, no recomputation, default checkpoints, no sequence parallelism,
 * zero 0, bf16, the default schedule, the model's sequence length, standard attention, no
 * balancing, overlapped point-to-point transfers. */
void layout3d_options_init(layout3d_options *o);

/* The resolved dimensions of a layout (layout3d_resolve). */
typedef struct layout3d_dims {
    int gpus, tp, pp, dp, interleave, microbatches;
    int cp;                /* context-parallel ranks, >= 1 */
    sched_kind schedule;
} layout3d_dims;

/* Derives and checks the dimensions of o for model t on cluster c (file cluster_file, for
 * messages) without building anything: the missing dimension, the schedule and its chunks,
 * the microbatches. 0, or -1 with err set to one line naming the option ("--tp", "--pp",
 * "--dp", "--gpus", "--interleave", "--global-batch", "--schedule", ...), with what
 * layout3d_split refuses, an uneven split with --balance or with a schedule that does
 * not place virtual stage k on rank k % pp, and --checkpoint-layers over the blocks of
 * every virtual stage or without --recompute full (plan_checkpoint_check's lines). */
int layout3d_resolve(const transformer *t, const cluster *c, const char *cluster_file,
                     const layout3d_options *o, layout3d_dims *dims, plumb_err *err);

/* 1 when o asks for one of Megatron-Core's uneven splits (first_blocks, last_blocks,
 * account_embedding, account_loss or pipeline_layout set), else 0. */
int layout3d_uneven(const layout3d_options *o);

/* The command-line option of o's uneven split, for messages ("--pipeline-layout",
 * "--decoder-first-pipeline-num-layers", ...: the first set in that order), or NULL for the
 * even split. */
const char *layout3d_split_option(const layout3d_options *o);

/* The blocks of each of the pp x v virtual stages of a model of `blocks` blocks, as
 * Megatron-Core splits them (megatron/core/transformer/transformer_block.py,
 * get_num_layers_to_build; transformer_layer.py, get_transformer_layer_offset;
 * transformer_config.py's checks): virtual stage k = c pp + r is chunk c of pipeline rank r
 * and holds blocks in order of k. Even (no option): blocks / (pp v) each. With first_blocks
 * F and/or last_blocks L: rank 0 holds F, rank pp - 1 holds L, the other ranks split the
 * rest evenly, each rank's blocks over its v chunks evenly. With the accountings: the split
 * of blocks + 1 (+ 1) evenly over pp x v, then one fewer on virtual stage 0 (embedding)
 * and on the last (loss), which may hold no block. With pipeline_layout: the 't' count of
 * each of the string's virtual stages (pplayout_split: its rules, v equal to its stages
 * / pp), refused with any of the other four options (Megatron-Core's TransformerConfig
 * refuses pipeline_model_parallel_layout with them). Writes n[0 .. pp v - 1]. 0, or -1 with
 * err set to one line naming the option Megatron refuses: --decoder-first-pipeline-num-
 * layers / --decoder-last-pipeline-num-layers with an accounting, counts that are not
 * multiples of v, more than the blocks, middle blocks that do not divide over the middle
 * ranks (and then v), pp 1; the accountings' total that does not divide over pp (and then
 * v); the even split's --pp x --interleave that does not divide the blocks. */
int layout3d_split(const layout3d_options *o, int blocks, int pp, int v, int *n,
                   plumb_err *err);

/* The most blocks a virtual stage of layout3d_split's split holds (>= 0; the bound of
 * --checkpoint-layers), or -1 with err set: layout3d_split's lines, pp x v out of 1 to
 * blocks + 2, out of memory. */
int layout3d_split_most(const layout3d_options *o, int blocks, int pp, int v,
                        plumb_err *err);

/* The first device of the tensor-parallel group of replica r of pipeline rank p
 * (Megatron-LM's order: tp fastest, then dp, then pp): (p dp + r) tp. With context
 * parallelism pass tp x cp as tp: the replica's tp x cp devices from there, tp fastest
 * (Megatron-Core's tp-cp-ep-dp-pp, megatron/core/parallel_state.py at 934c8260ad,
 * initialize_model_parallel's order); which of them context rank k holds is the plan's
 * (plan_cp_device), not computed here. */
int layout3d_group_device(int p, int r, int tp, int dp);

/* Builds the plan of model t under o on the first gpus devices of cluster c: the profile
 * from llm_profile_build (tp, sequence parallelism, microbatch size, precision, sequence
 * length, attention of o), the stages, devices, microbatches, recomputation, ZeRO, precision and the
 * adam optimizer. The plan embeds the cut cluster and owns copies of everything. Returns a
 * new plan (plan_free), or NULL with err set to one line: what layout3d_resolve refuses,
 * what llm_profile_build refuses (a tp that does not divide the heads, key/value heads or
 * MLP width; --seq-len; --sequence-parallel at tp 1; the device figures), or out of
 * memory. The plan's model (plan.model, the file's "model") is a copy of t laid out at the
 * profile's sequence length with o's attention, balance and uneven split. */
plan *layout3d_build(const transformer *t, const cluster *c, const char *cluster_file,
                     const layout3d_options *o, plumb_err *err);

/* The layout options that lay pl out again (pl written by layout3d_build, its model set:
 * pl->model): tp, cp, pp, dp and the devices they make, global batch, microbatch size,
 * interleave, schedule, recomputation (the checkpoint interval only where it is not the
 * default's), sequence parallelism, ZeRO, precision, the loss, p2p, grad-sync, the
 * gradient and optimizer-state precision from the plan; sequence length, attention,
 * balance and the uneven split from its model (o->pipeline_layout borrowed from pl->model:
 * valid while pl is). layout3d_build(pl->model->tf, pl->clus, ..., o) then gives pl's
 * stages again (before balancing) and its profile. 0, or -1 when pl has no model or no
 * stages. */
int layout3d_options_from_plan(const plan *pl, layout3d_options *o);

#endif
