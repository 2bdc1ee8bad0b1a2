/* llm_profile.h: the analytic profile of a transformer on a described device: one profile
 * layer for the embedding, one per transformer block and one for the LM head (final norm,
 * logits, loss), each costed per tensor-parallel rank from its matrix multiplies, attention
 * and streaming kernels on the device's roofline (core/device.h). The result is an ordinary
 * plumb-profile/1 that plan, sim, sweep and ui read like a measured one (docs/llm.md). */
#ifndef PLUMB_LLM_PROFILE_H
#define PLUMB_LLM_PROFILE_H

#include "core/cluster.h"
#include "core/profile.h"
#include "core/transformer.h"

/* How a block computes its attention core. */
typedef enum llm_attention {
    LLM_ATTN_STANDARD, /* scores, softmax and dropout as separate kernels: the s x s
                          probabilities (and dropout mask and output) are written and kept */
    LLM_ATTN_FLASH,    /* one fused kernel (FlashAttention): the s x s scores stay on chip;
                          it keeps its output and the softmax statistics (fp32, one per row)
                          and its backward recomputes the scores and probabilities */
} llm_attention;

/* "standard" or "flash". */
const char *llm_attention_name(llm_attention a);

/* Parses "standard" or "flash" into *out; 0, or -1 for anything else. */
int llm_attention_parse(const char *s, llm_attention *out);

/* The loss's kernels over the logits. LLM_CE_UNFUSED: Megatron-Core's vocab-parallel
 * cross-entropy (tensor_parallel/cross_entropy.py, an fp32 copy of the logits and a kernel per
 * pass). LLM_CE_TE: Transformer Engine's fused parallel cross-entropy
 * (transformer_engine/pytorch/triton/cross_entropy.py; Megatron-Core's
 * cross_entropy_loss_fusion with cross_entropy_fusion_impl "te"): two forward passes over the
 * logits in their own precision, the gradient written in place of them, one backward pass.
 * LLM_CE_NATIVE: Megatron-Core's own fused loss (fusions/fused_cross_entropy.py;
 * cross_entropy_fusion_impl "native", NeMo 2.0's cross_entropy_loss_fusion): the unfused
 * loss's fp32 steps compiled into three forward passes and one backward pass. */
typedef enum llm_cross_entropy { LLM_CE_UNFUSED = 0, LLM_CE_TE, LLM_CE_NATIVE } llm_cross_entropy;

/* "unfused", "te" or "native". */
const char *llm_cross_entropy_name(llm_cross_entropy c);

/* Parses "unfused", "te" or "native" into *out; 0, or -1 for anything else. */
int llm_cross_entropy_parse(const char *s, llm_cross_entropy *out);

/* How each backward's weight gradients reach the iteration's main gradients. LLM_GA_FUSED:
 * the weight-gradient GEMM accumulates straight into them (Megatron-LM's
 * gradient_accumulation_fusion), nothing more to price. LLM_GA_UNFUSED: the GEMM writes a
 * fresh gradient in the parameters' precision and a hook adds it into the main gradient
 * (Megatron-LM's DDP hook `main_grad.add_(grad)`, or PyTorch's own accumulation), one
 * streaming kernel per parameter tensor on every backward: read the gradient, read and
 * write the main gradient, which is fp32 except with fp16 (Megatron-LM keeps it fp16 unless
 * --accumulate-allreduce-grads-in-fp32; docs/llm.md, "Gradient accumulation"). */
typedef enum llm_grad_accum { LLM_GA_FUSED = 0, LLM_GA_UNFUSED } llm_grad_accum;

/* "fused" or "unfused". */
const char *llm_grad_accum_name(llm_grad_accum g);

/* Parses "fused" or "unfused" into *out; 0, or -1 for anything else. */
int llm_grad_accum_parse(const char *s, llm_grad_accum *out);

/* Bytes the unfused accumulation streams per parameter at precision p: the new gradient
 * (2 bytes with the 16-bit formats and fp8, whose weights are bf16; 4 with fp32 and tf32)
 * read, and the main gradient (2 bytes with fp16, else 4) read and written. Pure. */
int llm_grad_accum_bytes(dev_precision p);

typedef struct llm_options {
    int tp;                  /* tensor-parallel ranks the heads, MLP and vocabulary split over */
    int microbatch;          /* sequences per profiled minibatch (the microbatch size), > 0 */
    long long seq;           /* tokens per sequence; 0: the model's max_position_embeddings */
    dev_precision precision; /* of weights, activations and the multiplies */
    int sequence_parallel;   /* 1: sequence parallelism (needs tp > 1): the activations
                                outside the tensor-parallel regions are split over the
                                sequence, so each rank keeps 1/tp of them */
    llm_attention attention; /* the attention core's kernels */
    int cp;                  /* context-parallel ranks each sequence is split over, >= 1 (> 1
                                needs flash attention and seq a multiple of 2 cp): each
                                rank's figures are s / cp tokens of every sequence, 1 / cp of
                                the causal attention, and each block carries its K/V ring
                                (profile_layer.cp_ring_bytes) */
    int cross_entropy;       /* llm_cross_entropy of the loss (default LLM_CE_UNFUSED) */
    int grad_accum;          /* llm_grad_accum of the weight gradients (default LLM_GA_FUSED):
                                unfused adds to every backward of a layer with weights
                                llm_grad_accum_bytes x its parameters on the rank, streamed,
                                and a kernel per parameter tensor */
} llm_options;

/* tp 1, microbatch 1, the model's sequence length, bf16, no sequence parallelism, standard
 * attention, cp 1, the unfused cross-entropy, the fused gradient accumulation. */
void llm_options_init(llm_options *o);

/* What context parallelism at cp ranks asks of a run (Transformer Engine's ring): the one
 * rule llm_profile_build, the 3D search and the dashboard's cp keys apply. */
typedef enum llm_cp_rule {
    LLM_CP_OK,         /* cp 1, or cp > 1 with all of the below */
    LLM_CP_BAD_COUNT,  /* cp < 1 */
    LLM_CP_NEEDS_FLASH, /* cp > 1 runs TE's fused attention */
    LLM_CP_SPLITS_SEQ, /* 2 cp must divide the sequence (the load-balanced causal split) */
    LLM_CP_SPANS_SERVERS, /* tp x cp must divide a server's devices (the search's and the
                             dashboard's layouts: each replica's tp x cp ranks on one
                             server) */
} llm_cp_rule;

/* The rule cp ranks break with attention att on sequences of seq tokens (seq <= 0: not
 * checked) at tp tensor ranks on servers of per_server devices (per_server <= 0: not
 * checked; a layout given by hand, layout3d and llm_profile_build, may put its context
 * ranks on several servers), the first broken in the enum's order, or LLM_CP_OK. Pure. */
llm_cp_rule llm_cp_check(int cp, llm_attention att, long long seq, int tp, int per_server);

/* 0 when cp context-parallel ranks suit t at seq tokens; -1 with err naming "--cp" when
 * cp > 1 and t's sliding window is shorter than seq (Transformer Engine's ring attention
 * (p2p) takes no window, and plumb's ring pricing assumes the whole causal triangle). */
int llm_window_cp_check(const transformer *t, int cp, long long seq, plumb_err *err);

/* 0 when seq tokens per sequence suit t (>= 1, and no more than its learned positions when
 * it has them); -1 with err naming "--seq-len" otherwise. */
int llm_seq_check(const transformer *t, long long seq, plumb_err *err);

/* Builds the profile of model t under o on the device type of the cluster c (whose file is
 * cluster_file, for messages). Times are ms per microbatch on one rank, multiplied by the
 * device type's speed so that planning on c divides them back to the device's own time; the
 * backward is split into input-gradient and weight-gradient halves. The profile's tp,
 * sequence_parallel and tokens_per_sample are o's; with tp > 1 each layer carries its
 * tensor-parallel collectives (Megatron-LM's layout: a block 2 forward and 2 backward of
 * B S h element bytes, the embedding 1 forward, the head 1 backward), and each block its
 * selective recomputation (the attention core's forward time, and the bytes kept without
 * the core's tensors; 0 and all of them with fused attention, which keeps no s x s
 * tensor). The head's scratch (workspace_bytes) is one logits tensor in the precision; with
 * tied embeddings its vocabulary matrix is tied to layer 0's (profile_layer.tied_*). The
 * profile records o's precision, loss and accumulation (profile.precision, .cross_entropy,
 * .grad_accum), which its plans take. Returns a new profile (profile_free), or NULL with
 * err set to one line: a tp that does not divide the heads, key and value heads or MLP
 * width ("--tp"), sequence parallelism at tp 1 ("--sequence-parallel"), cp > 1 with a
 * sliding window shorter than the sequence ("--cp"), a sequence longer than learned
 * positions allow ("--seq-len"), a cluster with several device types ("servers") or
 * without the device figures the roofline needs (the missing field). */
profile *llm_profile_build(const transformer *t, const cluster *c, const char *cluster_file,
                           const llm_options *o, plumb_err *err);

/* After profile_validate refused pr (llm_profile_build's last step): err names what made
 * a figure leave the bounds a profile takes instead of the figure alone: the device's peak
 * (device_types[k].peak_tflops_by_precision.P or .peak_tflops) or memory bandwidth
 * (.memory_gbyte_per_s) of cluster_file for a time on a device under 1 TFLOP/s or 10 GB/s,
 * else --seq-len and/or --microbatch-size (those above the model's sequence and 1), with
 * the layer's figure and the bound. dev is c's type the profile was built for, seq the
 * tokens costed. err is left as it is when no figure of pr is out of bounds. */
void llm_profile_explain_bounds(const profile *pr, const transformer *t, const cluster *c,
                                const char *cluster_file, const device_type *dev,
                                const llm_options *o, long long seq, plumb_err *err);

#endif
