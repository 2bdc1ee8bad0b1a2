/* llm_profile.c: the analytic profile of a transformer (planner/llm_profile.h): per layer the
 * FLOPs, the roofline times of its kernels on one tensor-parallel rank, the bytes it passes on
 * and keeps for the backward (Korthikanti et al. 2022, generalized to grouped-query
 * attention, gated MLPs and any element size), and its parameter bytes per rank. With
 * precision fp8 (Transformer Engine's FP8 training) the four projections multiply in FP8
 * with their casts, everything else stays bf16 (docs/llm.md, "FP8 training"). */
#include "planner/llm_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/plan.h"
#include "planner/llm_moe.h"

void llm_options_init(llm_options *o)
{
    o->tp = 1;
    o->microbatch = 1;
    o->seq = 0;
    o->precision = DEV_BF16;
    o->sequence_parallel = 0;
    o->attention = LLM_ATTN_STANDARD;
    o->cp = 1;
    o->cross_entropy = LLM_CE_UNFUSED;
    o->grad_accum = LLM_GA_FUSED;
}

/* The words are the plan field's (core/plan.c), as the loss's are. */
const char *llm_grad_accum_name(llm_grad_accum g)
{
    return plan_grad_accum_name((int)g);
}

int llm_grad_accum_parse(const char *s, llm_grad_accum *out)
{
    int k = plan_grad_accum_parse(s);
    if (k < 0) return -1;
    *out = (llm_grad_accum)k;
    return 0;
}

int llm_grad_accum_bytes(dev_precision p)
{
    int grad = dev_precision_bytes(p), main_grad = p == DEV_FP16 ? 2 : 4;
    return grad + 2 * main_grad;
}

/* The words are the plan field's (core/plan.c owns the table; a plan's cross_entropy holds
 * these values). */
const char *llm_cross_entropy_name(llm_cross_entropy c)
{
    return plan_cross_entropy_name((int)c);
}

int llm_cross_entropy_parse(const char *s, llm_cross_entropy *out)
{
    int k = plan_cross_entropy_parse(s);
    if (k < 0) return -1;
    *out = (llm_cross_entropy)k;
    return 0;
}

const char *llm_attention_name(llm_attention a)
{
    return a == LLM_ATTN_FLASH ? "flash" : "standard";
}

int llm_attention_parse(const char *s, llm_attention *out)
{
    if (s && !strcmp(s, "standard")) *out = LLM_ATTN_STANDARD;
    else if (s && !strcmp(s, "flash")) *out = LLM_ATTN_FLASH;
    else return -1;
    return 0;
}

/* The shapes of one rank's share of the model. */
typedef struct shape {
    const transformer *t;
    const device_type *dev;
    dev_precision p;     /* of everything but the projections: bf16 with fp8 */
    dev_precision pj;    /* of the block's projections' multiplies (DEV_FP8 with fp8) */
    int fp8;             /* 1: fp8 training (pj is DEV_FP8) */
    double b, s, M, e;   /* sequences, tokens per sequence on this rank (s / cp), rows b s,
                            bytes per element */
    double skv;          /* keys each query row can attend to on this rank's ring: the whole
                            sequence (cp s) */
    double h, d;         /* width, head width */
    double at, kvt;      /* query heads and key/value heads per rank */
    double ft, vt;       /* MLP width and vocabulary rows per rank */
    double sp;           /* what the tensors outside the tensor-parallel regions are divided
                            by: tp with sequence parallelism, else 1 */
    int flash;           /* 1: the attention core is one fused kernel (LLM_ATTN_FLASH) */
    double band;         /* the share of the s x skv scores a causal fused kernel computes:
                            1/2, or with a sliding window shorter than the sequence 1/2 x the
                            band's pairs over the causal triangle's (add_attention) */
    double keys;         /* keys each query is counted over in the model's FLOPs: skv, or
                            the block's window when shorter (transformer_counted_keys) */
    double mft;          /* with experts: one expert's inner width per rank (moe_ffn / tp) */
} shape;

/* The block's experts as planner/llm_moe.c prices them (t->experts > 0): all the rank's M
 * rows (the whole sequence's with sequence parallelism, gathered before the MLP as for a
 * dense one), in the projections' precision. */
static llm_moe moe_of(const shape *c)
{
    double tp = (double)c->t->heads / c->at; /* the heads per rank are heads / tp */
    llm_moe m = {c->dev, c->pj, c->M, c->h, c->e, (double)c->t->experts,
                 (double)c->t->experts_per_tok, c->mft, tp, (double)c->t->shared_ffn / tp};
    return m;
}

/* One layer's figures per microbatch on one rank: FLOPs (forward multiplies) and seconds. */
typedef struct cost {
    double flops, fwd_s, bwd_in_s, bwd_w_s;
} cost;

/* A projection of M rows from kin to nout features in precision p: the forward, the input
 * gradient dX = dY W^T and the weight gradient dW = X^T dY, each one multiply. */
static void add_linear(const shape *c, cost *k, dev_precision p, double kin, double nout)
{
    k->flops += 2 * c->M * kin * nout;
    k->fwd_s += device_gemm_s(c->dev, p, 1, c->M, nout, kin, 0);
    k->bwd_in_s += device_gemm_s(c->dev, p, 1, c->M, kin, nout, 0);
    k->bwd_w_s += device_gemm_s(c->dev, p, 1, kin, nout, c->M, 0);
}

/* FP8 training's casts, streaming kernels (Transformer Engine 0004dbd023,
 * transformer_engine/pytorch/module/linear.py, _Linear.forward and backward): forward, the
 * inputs of the two projections that follow no norm (the attention's output projection
 * and the MLP's second, after Megatron-Core's bf16 activation) cast to FP8, reading 2 and
 * writing 1 byte an element and, without sequence parallelism, the transpose the weight
 * gradient reads (1 more); the two that follow a norm get their FP8 input from the norm
 * itself (layernorm_fwd_fp8). Backward, each projection's output gradient cast to FP8 with
 * its transpose (grad_output_preprocess): 2 read, 1 + 1 written. Left out (docs/llm.md):
 * the weights' casts, once per step on its first microbatch, and with sequence parallelism
 * the backward's transpose of the FP8 input (fp8_transpose). Without pre norms (OLMo 2) the
 * Q, K, V projection's and the MLP's first inputs follow no norm either: cast alike. */
static void add_fp8_casts(const shape *c, cost *k)
{
    double M = c->M, in = c->at * c->d + c->ft, tr = c->sp > 1 ? 0 : 1;
    double q = (c->at + 2 * c->kvt) * c->d, g = (c->t->gated_mlp ? 2 : 1) * c->ft;
    int casts = 2;
    if (c->t->no_pre_norms) in += 2 * c->h, casts = 4;
    k->fwd_s += device_stream_s(c->dev, M * in * (3 + tr), casts);
    k->bwd_in_s += device_stream_s(c->dev, 4 * M * (q + c->h + g + c->h), 4);
}

/* The attention core per head: scores S = Q K^T (s x s, inner d) and O = P V (s x d, inner s)
 * forward; dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q backward (all input gradient),
 * each 2 s^2 d FLOPs. Standard attention runs them as batched multiplies that read and write
 * the s x s scores and probabilities. Fused (flash) attention is one kernel each way that
 * keeps S and P on chip: the forward reads Q, K, V and writes O (4 s d elements per head) and
 * the softmax statistics (one fp32 per row); the backward computes S = Q K^T again (P from
 * it and the statistics) then the four multiplies, 5 of them, reading Q, K, V, O, dO and
 * writing dQ, dK, dV (8 s d) and reading the statistics and D = rowsum(dO o O) (two fp32 per
 * row). A causal kernel skips the tiles above the diagonal, half the scores (FlashAttention-2
 * counts 4 s^2 d / 2 per head forward for causal), so its time is priced on half the FLOPs;
 * every plumb transformer is a causal decoder. With a sliding window of w < s keys (query i
 * attends keys i - w + 1 .. i) the kernel skips the tiles outside the band too
 * (FlashAttention's window_size): its time is priced on the band's share of the causal
 * pairs, sum min(i + 1, w) over s (s + 1) / 2 (c->band). Standard attention multiplies the
 * whole s x s scores and masks them (Megatron-LM's and transformers' unfused paths): its
 * time stays the full one. The model's FLOPs stay the forward's full 4 s^2 d per head
 * (Megatron-LM's MFU count: no mask, no recomputation), with a window 4 s w d: each query
 * over its whole window, the mask inside it ignored alike (c->keys). */
static void add_attention(const shape *c, cost *k)
{
    /* with context parallelism (skv = cp s) the rank's s queries meet all skv keys over
     * the ring's cp steps, and its balanced causal split (2 cp chunks, rank r holding r and
     * 2 cp - 1 - r) skips half of them too: 1 / cp of the sequence's causal work; Q and O
     * are the rank's s rows, K and V the ring's skv (no window with cp > 1: check_options) */
    double batch = c->b * c->at, s = c->s, kv = c->skv, d = c->d, e = c->e;
    double mult = 2 * batch * s * kv * d; /* one s x skv x d multiply */
    k->flops += c->keys < kv ? 4 * batch * s * c->keys * d : 2 * mult;
    if (c->flash) {
        k->fwd_s += device_fused_s(c->dev, c->p, c->band * 2 * mult,
                                   batch * (2 * (s + kv) * d * e + 4 * s), 1);
        k->bwd_in_s += device_fused_s(c->dev, c->p, c->band * 5 * mult,
                                      batch * (4 * (s + kv) * d * e + 2 * 4 * s), 1);
        return;
    }
    double scores = device_gemm_s(c->dev, c->p, batch, s, s, d, 1);
    double values = device_gemm_s(c->dev, c->p, batch, s, d, s, 1);
    k->fwd_s += scores + values;
    k->bwd_in_s += scores + 3 * values;
}

/* Streaming kernels: `bytes` moved by `kernels` launches forward; the backward moves twice
 * the bytes in twice the launches (input gradient). */
static void add_stream(const shape *c, cost *k, double bytes, int kernels)
{
    k->fwd_s += device_stream_s(c->dev, bytes, kernels);
    k->bwd_in_s += device_stream_s(c->dev, 2 * bytes, 2 * kernels);
}

static void block_cost(const shape *c, cost *k)
{
    const transformer *t = c->t;
    double M = c->M, h = c->h, e = c->e, ft = c->ft;
    double probs = c->b * c->at * c->s * c->s; /* attention probabilities on this rank */
    add_linear(c, k, c->pj, h, (c->at + 2 * c->kvt) * c->d);
    add_attention(c, k);
    add_linear(c, k, c->pj, c->at * c->d, h);
    if (t->experts) { /* the router, top-k, permutations, experts and combine */
        llm_moe m = moe_of(c);
        llm_moe_cost(&m, &k->flops, &k->fwd_s, &k->bwd_in_s, &k->bwd_w_s);
    } else {
        add_linear(c, k, c->pj, h, (t->gated_mlp ? 2 : 1) * ft);
        add_linear(c, k, c->pj, ft, h);
    }
    if (c->fp8) add_fp8_casts(c, k);
    /* two norms (read, write), two residual adds (two reads, one write), the softmax (read,
     * write), the activation (gated: two reads, one write), dropout masks of one byte. Fused
     * attention does its softmax and dropout on chip: no s x s bytes and no softmax kernel,
     * but its backward reads the output and its gradient once more (D = rowsum(dO o O),
     * FlashAttention's preprocessing kernel, below). */
    double bytes = 2 * 2 * M * h * e + 2 * 3 * M * h * e + (t->gated_mlp ? 3 : 2) * M * ft * e;
    if (t->experts) /* the gated activation over the M k routed rows of an expert's width */
        bytes = 2 * 2 * M * h * e + 2 * 3 * M * h * e + 3 * M * t->experts_per_tok * c->mft * e;
    int kernels = 5;
    if (t->no_pre_norms) { /* OLMo 2: no norm before the attention or the MLP */
        bytes -= 2 * 2 * M * h * e;
        kernels -= 2;
    }
    if (!c->flash) {
        bytes += 2 * probs * e;
        kernels++;
    }
    if (t->dropout) bytes += (c->flash ? 0 : probs * (1 + e)) + 2 * M * h;
    if (!t->learned_positions) { /* rotary embedding of the queries and keys */
        bytes += 2 * M * (c->at + c->kvt) * c->d * e;
        kernels++;
    }
    if (t->qk_norm) { /* qk_norm: RMSNorm of each query and key head (or, OLMo 2's, of the
                         rank's whole query and key projections: the same bytes), one kernel
                         each: reads and writes the queries and keys (the weights are noise) */
        bytes += 2 * M * (c->at + c->kvt) * c->d * e;
        kernels += 2;
    }
    if (t->post_norms) { /* Gemma 2's and OLMo 2's norms of the attention's and the MLP's
                            outputs */
        bytes += 2 * 2 * M * h * e;
        kernels += 2;
    }
    if (t->residual_mult > 0) { /* Granite: each half's output times residual_multiplier
                                   before its add, one kernel each (read, write; backward
                                   the gradient alike); a constant keeps nothing */
        bytes += 2 * 2 * M * h * e;
        kernels += 2;
    }
    if (t->attn_softcap > 0 && !c->flash) { /* c tanh(S / c) over the s x s scores, one
                                               kernel (read, write); fused attention does
                                               it on chip (FlashAttention's softcap) */
        bytes += 2 * probs * e;
        kernels++;
    }
    add_stream(c, k, bytes, kernels);
    if (c->flash) /* D = rowsum(dO o O): O and dO read, one fp32 per row written */
        k->bwd_in_s += device_stream_s(c->dev, 2 * M * c->at * c->d * e + 4 * M * c->at, 1);
}

/* The attention core (Korthikanti et al. 2022's selective recomputation): the scores and
 * values multiplies, the softmax and the attention dropout. Its forward time, s; 0 with
 * fused attention, which keeps nothing selective recomputation would drop. */
static double core_forward_s(const shape *c)
{
    if (c->flash) return 0;
    double batch = c->b * c->at, s = c->s, d = c->d, probs = batch * s * s;
    double bytes = 2 * probs * c->e + (c->t->dropout ? probs * (1 + c->e) : 0);
    if (c->t->attn_softcap > 0) bytes += 2 * probs * c->e; /* the scores' soft-capping */
    return device_gemm_s(c->dev, c->p, batch, s, s, d, 1) +
           device_gemm_s(c->dev, c->p, batch, s, d, s, 1) + device_stream_s(c->dev, bytes, 1);
}

/* Bytes the attention core keeps for its backward beyond its inputs (the queries, keys and
 * values) that selective recomputation drops: the softmax output and, with dropout, its mask
 * and output (the 5 a s / (h t) term of s b h for GPT), and with soft-capped scores the
 * capping's s x s tensor (tanh's, which its backward reads). 0 with fused attention, which
 * keeps none of them (flash_saved). */
static double core_saved(const shape *c)
{
    if (c->flash) return 0;
    double probs = c->b * c->at * c->s * c->s;
    return probs * c->e + (c->t->dropout ? probs * (1 + c->e) : 0) +
           (c->t->attn_softcap > 0 ? probs * c->e : 0);
}

/* Bytes fused attention keeps for its backward beyond its inputs and its output: the
 * softmax statistics (the log-sum-exp of each row of scores, fp32: a s b / t values). Its
 * output is the output projection's input, already counted: one tensor where the kernel
 * writes the model's s b (a d) layout (Transformer Engine's fused attention, which
 * Megatron-LM's transformer layer calls). Megatron-LM's older FlashAttention path kept a
 * second, rearranged copy (b s a d for the kernel, a contiguous s b (a d) copy for the
 * projection; megatron/model/transformer.py, 2023): s b h / t more per block, which plumb
 * does not count (docs/llm.md, "Memory against published measurements"). */
static double flash_saved(const shape *c)
{
    return c->flash ? c->b * c->at * c->s * 4 : 0;
}

/* Bytes a block keeps for its backward beyond its input (the previous layer's output), per
 * Korthikanti et al. 2022 (Table 2's terms): the norms' outputs feeding the projections, the
 * queries and keys, the values, the attention core's tensors, the output projection's
 * input, the MLP's inner tensors, the dropout masks. The tensors outside the
 * tensor-parallel regions (the norms' inputs and outputs, the residual masks) are one
 * rank's share of the sequence with sequence parallelism (c->sp). For GPT (e = 2, f = 4h,
 * kv = a, dropout) input + this = s b h (10 + 24/t + 5 a s / (h t)), and with sequence
 * parallelism s b h / t (34 + 5 a s / h); with fused attention s b h (10 + 24/t) + 4 a s b / t
 * (flash_saved's statistics for core_saved's probabilities).
 * fp8: the four projections keep their inputs as Transformer Engine saves them, in FP8 (1
 * byte; linear.py's saved_inputmat or its transpose, the norms' FP8 outputs: the
 * norms' outputs and the MLP's second input, split over the sequence as before), and the
 * output projection's FP8 input beside fused attention's bf16 output (standard attention
 * keeps no bf16 copy: its backward reads the probabilities and V); the rest stays bf16. */
static double block_saved(const shape *c)
{
    const transformer *t = c->t;
    double M = c->M, e = c->e, d = c->d;
    double x = c->fp8 ? 1 : e;                /* bytes of a saved projection input */
    double repl = M * c->h * (x + e + x);                    /* LN1 out, LN2 in, LN2 out */
    if (t->no_pre_norms) /* OLMo 2: Q, K, V read the block's input, the MLP the residual
                            stream, each kept once as the projection's input */
        repl = M * c->h * (x + x);
    double proj_in = c->fp8 ? 1 + (c->flash ? e : 0) : e;    /* the output projection's */
    double attn = M * (c->at + c->kvt) * d * e + M * c->kvt * d * e + M * c->at * d * proj_in +
                  core_saved(c) + flash_saved(c);
    /* the MLP: act(x W1) keeps W1's output (the activation's input) and the activation's
     * output (W2's input); the gated act(a) * b as two kernels (Megatron-LM's swiglu,
     * F.silu(a) * b) keeps the first projection's 2f-wide output (a and b are views of it:
     * the SiLU's input and the product's right operand), the SiLU's output (the product's
     * left operand) and the product (W2's input): 4 f-wide tensors */
    double mlp = ((t->gated_mlp ? 3 : 1) * e + x) * M * c->ft;
    if (t->experts) { /* the router's tensors and k dense MLPs' for the routed rows */
        llm_moe m = moe_of(c);
        mlp = llm_moe_saved(&m);
    }
    if (t->dropout) repl += 2 * M * c->h;                    /* the two residual masks */
    /* qk_norm: the query and key norms keep their inputs (the projection's Q and K before the
     * norm; the rotary embedding after it, linear, keeps nothing) and one fp32 reciprocal
     * RMS per head and token (Transformer Engine's rmsnorm saves input and rsigma) */
    if (t->qk_norm == TF_QK_WIDTH) /* OLMo 2: one reciprocal RMS a token each */
        attn += M * (c->at + c->kvt) * d * e + 2 * M * 4;
    else if (t->qk_norm) attn += M * (c->at + c->kvt) * (d * e + 4);
    /* post norms (Gemma 2): each keeps its input, the output projection's and the MLP's
     * second projection's outputs, whole width (after the all-reduce; split over the
     * sequence with sequence parallelism), no statistics counted as for the other two */
    if (t->post_norms) repl += 2 * M * c->h * e;
    return repl / c->sp + attn + mlp;
}

/* Output gradients of a block's projections, kept between the I and W passes. */
static double block_split_saved(const shape *c)
{
    double g = (c->t->gated_mlp ? 2 : 1) * c->ft;
    if (c->t->experts) {
        llm_moe m = moe_of(c);
        return c->M * c->e * ((c->at + 2 * c->kvt) * c->d + c->h) + llm_moe_split_saved(&m);
    }
    return c->M * c->e * ((c->at + 2 * c->kvt) * c->d + c->h + g + c->h);
}

/* Parameters of one block on one rank: projections split, norms and output biases whole. */
static double block_params(const shape *c)
{
    const transformer *t = c->t;
    double h = c->h, q = (c->at + 2 * c->kvt) * c->d, ft = c->ft;
    double norm = t->norm == TF_LAYERNORM ? 2 * h : h;
    double p = h * q + (t->qkv_bias ? q : 0) + c->at * c->d * h + (t->out_bias ? h : 0);
    if (t->qk_norm == TF_QK_WIDTH) /* OLMo 2's, over the projections: the rank's share */
        p += (c->at + c->kvt) * c->d;
    else if (t->qk_norm) p += 2 * c->d; /* q_norm and k_norm, d weights each, on every rank */
    llm_moe m = moe_of(c);
    if (t->experts) p += llm_moe_params(&m); /* the router whole, the experts split */
    else p += t->gated_mlp ? 3 * h * ft + (t->mlp_bias ? 2 * ft + h : 0)
                      : 2 * h * ft + (t->mlp_bias ? ft + h : 0);
    return p + ((t->post_norms ? 4 : 2) - (t->no_pre_norms ? 2 : 0)) * norm;
}

/* Parameter tensors of one block (the unfused accumulation's kernels, one each): the two norms'
 * weights (and biases with LayerNorm; four norms with post_norms, two again without the pre
 * norms), the query/key/value and output projections and the MLP's two (Megatron-Core fuses a
 * gated MLP's gate and up projections into one; with experts the router's and two an expert),
 * their biases where the model has them, and qk_norm's two weights. */
static int block_tensors(const transformer *t)
{
    int n = ((t->post_norms ? 4 : 2) - (t->no_pre_norms ? 2 : 0)) *
            (t->norm == TF_LAYERNORM ? 2 : 1) + 4;
    if (t->experts) /* the router, two tensors an expert, the shared expert's two and gate */
        n += 2 * (int)t->experts - 1 + (t->shared_ffn ? 3 : 0);
    n += (t->qkv_bias ? 1 : 0) + (t->out_bias ? 1 : 0) + (t->mlp_bias ? 2 : 0);
    return n + (t->qk_norm ? 2 : 0);
}

/* The unfused accumulation of `params` parameters in `tensors` tensors at o's precision
 * (llm_grad_accum): one streaming kernel per tensor on each backward, priced with the
 * weight gradient. 0 when fused. */
static double grad_accum_s(const device_type *dev, const llm_options *o, double params,
                           int tensors)
{
    if (o->grad_accum != LLM_GA_UNFUSED) return 0;
    return device_stream_s(dev, params * llm_grad_accum_bytes(o->precision), tensors);
}

static int set_layer(profile *pr, int i, const char *name, const char *kind, const cost *k,
                     double speed, double out, double params, double saved, double split)
{
    profile_layer *L = &pr->layers[i];
    if (!(L->name = strdup(name)) || !(L->kind = strdup(kind)) || !(L->desc = strdup("")))
        return -1;
    L->forward_ms = k->fwd_s * 1e3 * speed;
    L->backward_input_ms = k->bwd_in_s * 1e3 * speed;
    L->backward_weight_ms = k->bwd_w_s * 1e3 * speed;
    L->backward_ms = L->backward_input_ms + L->backward_weight_ms;
    L->flops = k->flops;
    L->activation_bytes = out;
    L->parameter_bytes = params;
    L->saved_bytes = saved;
    L->split_saved_bytes = split;
    return 0;
}

/* Layer i's tensor-parallel collectives (none at tp 1): fwd and bwd of `bytes` each. */
static void set_collectives(profile *pr, int i, double bytes, int fwd, int bwd)
{
    if (pr->tp < 2) return;
    pr->layers[i].tp_collective_bytes = bytes;
    pr->layers[i].tp_forward_collectives = fwd;
    pr->layers[i].tp_backward_collectives = bwd;
}

/* Block i's context-parallel ring (cp > 1): the K/V chunk bytes of one exchange, the
 * attention core's time the ring's steps overlap, and the ring's buffers as the block's
 * workspace. Transformer Engine (9c61cd7e5e, transformer_engine/pytorch/attention/
 * dot_product_attention/context_parallel.py, AttnFuncWithCPAndKVP2P) keeps every chunk the
 * forward received in its list p2p_comm_buffers until the layer's forward returns (cp - 1
 * beside the rank's own) and saves for the backward only its own q, k, v, out and
 * softmax_lse (in block_saved already); the backward circulates K, V and their gradients in
 * two send / receive buffers each (4 chunks). Its workspace: the larger of the two. */
static void set_ring(profile *pr, int i, const shape *c, double bytes, double speed)
{
    cost a = {0};
    add_attention(c, &a);
    profile_layer *L = &pr->layers[i];
    int cp = pr->cp;
    L->cp_ring_bytes = bytes;
    L->cp_attention_fwd_ms = a.fwd_s * 1e3 * speed;
    L->cp_attention_bwd_ms = a.bwd_in_s * 1e3 * speed;
    L->workspace_bytes = (cp - 1 > 4 ? cp - 1 : 4) * bytes;
}

/* Checks the options against the model; 0 or -1 with err set. */
static int check_options(const transformer *t, const llm_options *o, long long seq,
                         plumb_err *err)
{
    if (o->tp < 1 || t->heads % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the %lld attention heads "
                       "(got %d)", t->heads, o->tp);
    if (t->kv_heads % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the %lld key/value heads "
                       "(got %d)", t->kv_heads, o->tp);
    if (t->ffn % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the MLP width %lld (got %d)",
                       t->ffn, o->tp);
    if (t->experts && t->moe_ffn % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the experts' width %lld (got "
                       "%d)", t->moe_ffn, o->tp);
    if (t->experts && t->shared_ffn % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the shared expert's width "
                       "%lld (got %d)", t->shared_ffn, o->tp);
    if (t->experts && o->precision == DEV_FP8)
        return err_set(err, NULL, "--precision", "expected bf16, fp16, tf32 or fp32 with %s's "
                       "experts: plumb does not price FP8 grouped GEMMs (got fp8)", t->name);
    if (o->sequence_parallel && o->tp < 2)
        return err_set(err, NULL, "--sequence-parallel", "expected --tp 2 or more (sequence "
                       "parallelism splits the tensor-parallel ranks' sequence) (got --tp %d)",
                       o->tp);
    if (o->microbatch < 1)
        return err_set(err, NULL, "--microbatch-size", "expected an integer >= 1 (got %d)",
                       o->microbatch);
    switch (llm_cp_check(o->cp, o->attention, seq, o->tp, 0)) {
    case LLM_CP_OK:
    case LLM_CP_SPANS_SERVERS: /* not asked of a layout given by hand */
        break;
    case LLM_CP_BAD_COUNT:
        return err_set(err, NULL, "--cp", "expected an integer >= 1 (got %d)", o->cp);
    case LLM_CP_NEEDS_FLASH:
        return err_set(err, NULL, "--cp", "expected --attention flash with --cp %d (Transformer "
                       "Engine's context parallelism runs its fused attention)", o->cp);
    case LLM_CP_SPLITS_SEQ:
        return err_set(err, NULL, "--cp", "expected 2 x cp = %lld to divide the sequence of "
                       "%lld tokens (Transformer Engine's load-balanced causal split) (got "
                       "--cp %d)", 2LL * o->cp, seq, o->cp);
    }
    return llm_window_cp_check(t, o->cp, seq, err) || llm_seq_check(t, seq, err);
}

int llm_window_cp_check(const transformer *t, int cp, long long seq, plumb_err *err)
{
    if (cp > 1 && transformer_window_applies(t, seq))
        return err_set(err, NULL, "--cp", "expected 1 with %s's sliding window of %lld keys "
                       "over %lld tokens (Transformer Engine's ring context parallelism takes "
                       "no window; plumb prices none) (got --cp %d)", t->name, t->window, seq,
                       cp);
    return 0;
}

llm_cp_rule llm_cp_check(int cp, llm_attention att, long long seq, int tp, int per_server)
{
    if (cp < 1) return LLM_CP_BAD_COUNT;
    if (cp == 1) return LLM_CP_OK;
    if (att != LLM_ATTN_FLASH) return LLM_CP_NEEDS_FLASH;
    if (seq > 0 && seq % (2LL * cp)) return LLM_CP_SPLITS_SEQ;
    if (per_server > 0 && (tp < 1 || per_server % ((long long)tp * cp)))
        return LLM_CP_SPANS_SERVERS;
    return LLM_CP_OK;
}

int llm_seq_check(const transformer *t, long long seq, plumb_err *err)
{
    if (seq < 1 || (t->learned_positions && seq > t->max_positions))
        return err_set(err, NULL, "--seq-len", "expected 1 to the model's %lld learned "
                       "positions (got %lld)", t->max_positions, seq);
    return 0;
}

/* The one device type of c, or NULL with err set. */
static const device_type *one_type(const cluster *c, const char *file, dev_precision p,
                                   plumb_err *err)
{
    for (int s = 1; s < c->nservers; s++)
        if (c->server_type[s] != c->server_type[0])
            return err_set(err, file, "servers", "expected one device type for an analytic "
                           "profile (got %s and %s)", c->types[c->server_type[0]].name,
                           c->types[c->server_type[s]].name), NULL;
    int i = c->server_type[0];
    return device_has_figures(&c->types[i], p, file, i, err) ? &c->types[i] : NULL;
}

profile *llm_profile_build(const transformer *t, const cluster *c, const char *cluster_file,
                           const llm_options *o, plumb_err *err)
{
    long long seq = o->seq > 0 ? o->seq : t->max_positions;
    if (check_options(t, o, seq, err)) return NULL;
    const device_type *dev = one_type(c, cluster_file, o->precision, err);
    if (!dev) return NULL;
    double tp = o->tp, cp = o->cp > 1 ? o->cp : 1;
    int fp8 = o->precision == DEV_FP8;
    shape sh = {t, dev, fp8 ? DEV_BF16 : o->precision, o->precision, fp8, o->microbatch,
                (double)seq / cp, (double)o->microbatch * seq / cp,
                dev_precision_bytes(o->precision), (double)seq, (double)t->hidden,
                (double)transformer_head_dim(t), t->heads / tp, t->kv_heads / tp, t->ffn / tp,
                ceil((double)t->vocab / tp), o->sequence_parallel ? tp : 1,
                o->attention == LLM_ATTN_FLASH, 0.5, (double)seq, (double)t->moe_ffn / tp};
    /* the window's blocks (cp 1 here) priced on its band, the others on the causal half
     * (Gemma 2's global blocks: transformer_layer_window 0) */
    shape local = sh;
    if (transformer_window_applies(t, seq)) {
        local.band = 0.5 * transformer_band_pairs(seq, t->window) / transformer_band_pairs(seq, 0);
        local.keys = (double)t->window;
        if (!t->full_layers) sh = local;
    }
    double M = sh.M, h = sh.h, e = sh.e, speed = dev->speed, sp = sh.sp;
    double norm = t->norm == TF_LAYERNORM ? 2 * h : h;
    profile *pr = profile_alloc((int)t->layers + 2, 0);
    if (!pr) return err_set(err, NULL, NULL, "out of memory"), NULL;
    char src[512], name[32];
    char cps[32] = "";
    if (cp > 1) snprintf(cps, sizeof cps, ", cp %d", o->cp);
    snprintf(src, sizeof src, "plumb analytic profile (docs/llm.md): %s on %s from %s, tp %d%s%s, "
             "microbatch %d x %lld tokens, %s, %s attention; times x speed %g", t->name,
             dev->name, cluster_file, o->tp, o->sequence_parallel ? " sequence-parallel" : "",
             cps, o->microbatch, seq, dev_precision_name(o->precision),
             llm_attention_name(o->attention), speed);
    pr->minibatch = o->microbatch;
    pr->tp = o->tp;
    pr->cp = (int)cp;
    pr->sequence_parallel = o->sequence_parallel ? 1 : 0;
    pr->tokens_per_sample = seq;
    pr->precision = o->precision; /* what its plans take (plan_new) */
    pr->cross_entropy = o->cross_entropy;
    pr->grad_accum = o->grad_accum;
    pr->input_bytes = M * 8; /* token ids as 64-bit integers */
    if (!(pr->name = strdup(t->name)) || !(pr->device = strdup(dev->name)) ||
        !(pr->source = strdup(src)))
        goto oom;
    /* embedding: a gather of token (and position) rows; its gradient a scatter-add */
    double pos = t->learned_positions ? 1 : 0;
    cost emb = {0, device_stream_s(dev, (2 + 2 * pos) * M * h * e, 1 + (int)pos), 0,
                device_stream_s(dev, (2 + 2 * pos) * M * h * e, 1 + (int)pos) +
                    grad_accum_s(dev, o, (sh.vt + pos * t->max_positions) * h, 1 + (int)pos)};
    if (t->embed_scale || t->embed_mult > 0) { /* Gemma's x sqrt(h), Granite's x
                             embedding_multiplier: one elementwise kernel each way (read,
                             write); scaling by a constant keeps nothing */
        emb.fwd_s += device_stream_s(dev, 2 * M * h * e, 1);
        emb.bwd_w_s += device_stream_s(dev, 2 * M * h * e, 1);
    }
    if (set_layer(pr, 0, "embed", "Embedding", &emb, speed, M * h * e / sp,
                  (sh.vt + pos * t->max_positions) * h * e, t->dropout ? M * h / sp : 0, 0))
        goto oom;
    set_collectives(pr, 0, M * h * e, 1, 0);
    cost blk = {0}, blk_local = {0};
    block_cost(&sh, &blk);
    block_cost(&local, &blk_local);
    blk.bwd_w_s += grad_accum_s(dev, o, block_params(&sh), block_tensors(t));
    blk_local.bwd_w_s += grad_accum_s(dev, o, block_params(&sh), block_tensors(t));
    /* the ring's chunk: this rank's keys and values, key/value heads / tp, in the
     * attention's precision (bf16 with fp8: Megatron-Core's FP8 recipes keep the
     * attention in bf16) */
    double ring_bytes = 2 * M * sh.kvt * sh.d * dev_precision_bytes(sh.p);
    double core_ms = core_forward_s(&sh) * 1e3 * speed, saved = block_saved(&sh);
    for (long long l = 0; l < t->layers; l++) {
        snprintf(name, sizeof name, "block%lld", l);
        const cost *bk = transformer_layer_window(t, l) ? &blk_local : &blk;
        if (set_layer(pr, (int)l + 1, name, "TransformerBlock", bk, speed, M * h * e / sp,
                      block_params(&sh) * e, saved, block_split_saved(&sh)))
            goto oom;
        set_collectives(pr, (int)l + 1, M * h * e, 2, 2);
        if (cp > 1) set_ring(pr, (int)l + 1, &sh, ring_bytes, speed);
        pr->layers[l + 1].selective_recompute_ms = core_ms;
        pr->layers[l + 1].selective_saved_bytes = saved - core_saved(&sh);
    }
    /* LM head: final norm, logits (vocabulary split over ranks), cross-entropy in fp32 as
     * Megatron-Core's vocabulary-parallel cross-entropy runs it (megatron/core/
     * tensor_parallel/cross_entropy.py), one kernel per pass over the logits: forward the
     * fp32 copy (reads e and writes 4 bytes per logit), the row maximum (reads 4), its
     * subtraction in place (8), exp in place (8), the row sum (4) and the division by it in
     * place (8), e + 36 bytes in 6 kernels; backward the product with the loss's gradient in
     * place (8) and the cast back to the precision (4 + e), 12 + e bytes in 2 kernels. It
     * keeps the final norm's output and the fp32 probabilities (which its backward turns into
     * the logits' gradient in place, as Megatron-LM's vocab-parallel cross-entropy does).
     * While it runs it needs one more logits-sized tensor in the model's precision: the
     * logits themselves beside their fp32 copy in the forward, the gradient cast back to the
     * precision beside the fp32 one in the backward (.float()'s backward): the layer's
     * scratch, e bytes per logit. With tied embeddings its vocabulary matrix is layer 0's.
     * LLM_CE_TE, Transformer Engine's fused kernels (transformer_engine/pytorch/triton/
     * cross_entropy.py at v2.7: online_softmax_kernel, cross_entropy_kernel,
     * element_mul_kernel): forward one pass for each row's maximum and sum (reads e bytes a
     * logit) and one that writes the loss and the logits' gradient over the logits (reads e,
     * writes e), 3 e bytes in 2 kernels; backward the product with the loss's gradient in
     * place (2 e in 1). It keeps the logits' tensor, holding that gradient, e bytes a logit,
     * and needs no other logits-sized tensor.
     * LLM_CE_NATIVE, Megatron-Core's fused loss (fusions/fused_cross_entropy.py: the unfused
     * loss's steps in four functions compiled by torch.compile, core/jit.py): forward the
     * fp32 copy with the row maximum (reads e, writes 4), the subtraction, exp and row sum
     * into the copy (reads 4, writes 4) and the division by the sum in place (8), e + 20 bytes
     * in 3 kernels; backward the product with the loss's gradient, written into the saved
     * probabilities (a compiled input mutation: reads 4, writes 4) and cast to bf16 (e), 8 + e
     * in 1. It keeps and needs what the unfused loss does (fp32 probabilities, the logits
     * beside their copy), so only the time differs. */
    cost head = {0};
    /* Megatron-Core's output layer is its own ColumnParallelLinear, not a Transformer Engine
     * module: bf16 with fp8 too (megatron/core/models/gpt/gpt_model.py) */
    add_linear(&sh, &head, sh.p, h, sh.vt);
    /* the output matrix (with tied embeddings a copy of layer 0's, accumulated apart from
     * it on another stage; on the same stage Megatron-LM accumulates the one tensor once,
     * which this prices twice: docs/llm.md) and the final norm */
    head.bwd_w_s +=
        grad_accum_s(dev, o, sh.vt * h + norm, 1 + (t->norm == TF_LAYERNORM ? 2 : 1));
    double logits = M * sh.vt;
    int te_ce = o->cross_entropy == LLM_CE_TE, native_ce = o->cross_entropy == LLM_CE_NATIVE;
    head.fwd_s += device_stream_s(dev, 2 * M * h * e, 1) +
                  (te_ce ? device_stream_s(dev, logits * 3 * e, 2)
                   : native_ce ? device_stream_s(dev, logits * (e + 20), 3)
                               : device_stream_s(dev, logits * (e + 36), 6));
    head.bwd_in_s += device_stream_s(dev, 4 * M * h * e, 2) +
                     (te_ce ? device_stream_s(dev, logits * 2 * e, 1)
                      : native_ce ? device_stream_s(dev, logits * (8 + e), 1)
                                  : device_stream_s(dev, logits * (12 + e), 2));
    double capped = 0; /* the logits' soft-capping (Gemma 2): c tanh(z / c), one kernel forward
                          (read, write) and one backward (reads the gradient and tanh's
                          output, writes the gradient); keeps tanh's output */
    if (t->final_softcap > 0) {
        head.fwd_s += device_stream_s(dev, logits * 2 * e, 1);
        head.bwd_in_s += device_stream_s(dev, logits * 3 * e, 1);
        capped = logits * e;
    }
    if (t->logits_scale > 0) { /* Granite's logits / logits_scaling: one kernel each way
                                  (read, write); a constant keeps nothing */
        head.fwd_s += device_stream_s(dev, logits * 2 * e, 1);
        head.bwd_in_s += device_stream_s(dev, logits * 2 * e, 1);
    }
    if (set_layer(pr, (int)t->layers + 1, "head", "LMHead", &head, speed, M * 4,
                  (sh.vt * h + norm) * e, M * h * e / sp + logits * (te_ce ? e : 4) + capped,
                  M * sh.vt * e))
        goto oom;
    pr->layers[t->layers + 1].workspace_bytes = te_ce ? 0 : M * sh.vt * e;
    if (t->tied_embeddings) {
        pr->layers[t->layers + 1].tied_layer = 0;
        pr->layers[t->layers + 1].tied_bytes = sh.vt * h * e;
    }
    set_collectives(pr, (int)t->layers + 1, M * h * e, 0, 1);
    if (profile_validate(pr, "(analytic profile)", err)) {
        llm_profile_explain_bounds(pr, t, c, cluster_file, dev, o, seq, err);
        profile_free(pr);
        return NULL;
    }
    return pr;
oom:
    profile_free(pr);
    return err_set(err, NULL, NULL, "out of memory"), NULL;
}
