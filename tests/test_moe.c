/* test_moe.c: the mixtures of experts (docs/llm.md, "Mixtures of experts"): mixtral,
 * qwen3_moe and qwen2_moe read from their Hugging Face configs by transformers' rules,
 * Mixtral-8x7B, Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen1.5-MoE-A2.7B and Qwen2-57B-A14B counted,
 * total and active, against sums of their checkpoints' tensor shapes made here and the model
 * cards' figures, a block's experts priced as computed here (the router's GEMM, E grouped
 * GEMMs of M k / E rows, the routing's streaming bytes; Qwen2-MoE's shared expert and its
 * gate), plumb-transformer/1 round trips, bad keys refused in one line, and the
 * executor refusing a plan with experts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/json.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "exec/train_plan.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "llmexec.h"
#include "llmfix.h"

#define H100 "profiles/clusters/dgx-h100.json"
#define MIXTRAL "examples/llm/mixtral-8x7b.json"
#define QWEN3M "examples/llm/qwen3-30b-a3b.json"

Test(moe, families_read)
{
    transformer *t = llmfix_model(MIXTRAL);
    cr_assert_str_eq(t->family, "mixtral");
    cr_assert_eq(t->experts, 8);
    cr_assert_eq(t->experts_per_tok, 2);
    cr_assert_eq(t->moe_ffn, 14336); /* intermediate_size: each expert's width */
    cr_assert(t->gated_mlp && t->activation == TF_SILU && t->norm == TF_RMSNORM);
    cr_assert(!t->qk_norm && !t->qkv_bias && !t->mlp_bias && !t->tied_embeddings);
    cr_assert_eq(t->kv_heads, 8);
    cr_assert_eq(t->window, 0); /* sliding_window null */
    transformer_free(t);
    t = llmfix_model(QWEN3M);
    cr_assert_str_eq(t->family, "qwen3_moe");
    cr_assert_eq(t->experts, 128);
    cr_assert_eq(t->experts_per_tok, 8);
    cr_assert_eq(t->moe_ffn, 768);
    cr_assert_eq(t->ffn, 6144); /* the dense width, which no block of it uses */
    cr_assert(t->qk_norm && t->gated_mlp && !t->qkv_bias);
    cr_assert_eq(transformer_head_dim(t), 128);
    transformer_free(t);
    /* told apart by architectures alone; Mixtral's window read as Mistral's */
    plumb_err err = {{0}};
    t = llmfix_parse("{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 64, "
              "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
              "\"intermediate_size\": 96, \"max_position_embeddings\": 512, \"vocab_size\": 100, "
              "\"num_local_experts\": 4, \"num_experts_per_tok\": 1, \"sliding_window\": 128}",
              &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_str_eq(t->family, "mixtral");
    cr_assert_eq(t->window, 128);
    cr_assert_eq(t->experts, 4);
    transformer_free(t);
    /* DeepSeek's MLA and shared experts stay unknown */
    llmfix_expect_bad("{\"model_type\": \"deepseek_v3\"}", "model_type: unknown architecture");
    llmfix_expect_bad("{\"model_type\": \"olmoe\"}", "model_type: unknown architecture");
}

/* A published shape and the sums of its checkpoint's tensors, counted here from the
 * tensors' names and shapes (model.embed_tokens [V, h]; per layer input_layernorm [h],
 * q_proj [a d, h], k_proj and v_proj [kv d, h], o_proj [h, a d], q_norm and k_norm [d]
 * (Qwen3-MoE), post_attention_layernorm [h], the router gate [E, h] and per expert w1 / gate_proj
 * [f, h], w3 / up_proj [f, h], w2 / down_proj [h, f]; model.norm [h]; lm_head [V, h]), with
 * the experts a token runs for the active count. */
static const struct moe_shape {
    const char *name, *fam;
    long long h, layers, heads, kv, d, f, E, k, vocab;
    double card, card_active, rounding, rounding_active;
    long long fs; /* qwen2_moe: the shared expert's width */
} SHAPES[] = {
    /* mistralai/Mixtral-8x7B-v0.1: 46.7 B total, 12.9 B active (the model card) */
    {"Mixtral-8x7B", "mixtral", 4096, 32, 32, 8, 128, 14336, 8, 2, 32000, 46.7e9, 12.9e9,
     0.05e9, 0.05e9, 0},
    /* Qwen/Qwen3-30B-A3B: 30.5 B, 3.3 B activated (the card's figure is 3.35 B cut to one
     * decimal) */
    {"Qwen3-30B-A3B", "qwen3_moe", 2048, 48, 32, 4, 128, 768, 128, 8, 151936, 30.5e9, 3.3e9,
     0.05e9, 0.06e9, 0},
    /* Qwen/Qwen3-235B-A22B: 235 B, 22 B activated */
    {"Qwen3-235B-A22B", "qwen3_moe", 4096, 94, 64, 4, 128, 1536, 128, 8, 151936, 235e9, 22e9,
     0.5e9, 0.5e9, 0},
    /* Qwen/Qwen1.5-MoE-A2.7B: 14.3 B, 2.7 B activated; a shared expert of 5632 */
    {"Qwen1.5-MoE-A2.7B", "qwen2_moe", 2048, 24, 16, 16, 128, 1408, 60, 4, 151936, 14.3e9,
     2.7e9, 0.05e9, 0.05e9, 5632},
    /* Qwen/Qwen2-57B-A14B: 57 B, 14 B activated; a shared expert of 20480 */
    {"Qwen2-57B-A14B", "qwen2_moe", 3584, 28, 28, 4, 128, 2560, 64, 8, 151936, 57e9, 14e9,
     0.5e9, 0.5e9, 20480},
};

static long long tensor_sum(const struct moe_shape *s, long long experts)
{
    long long h = s->h, d = s->d, f = s->f, sum = 0;
    sum += s->vocab * h; /* embed_tokens */
    for (long long l = 0; l < s->layers; l++) {
        sum += h;                                          /* input_layernorm */
        sum += s->heads * d * h + 2 * (s->kv * d * h);     /* q_proj, k_proj, v_proj */
        sum += h * s->heads * d;                           /* o_proj */
        if (!strcmp(s->fam, "qwen3_moe")) sum += d + d;    /* q_norm, k_norm */
        if (!strcmp(s->fam, "qwen2_moe"))                  /* q, k, v biases */
            sum += s->heads * d + 2 * s->kv * d;
        sum += h;                                          /* post_attention_layernorm */
        sum += s->E * h;                                   /* the router */
        for (long long x = 0; x < experts; x++) sum += f * h + f * h + h * f; /* w1, w3, w2 */
        if (s->fs) sum += 3 * s->fs * h + h; /* shared_expert's three, shared_expert_gate */
    }
    return sum + h + s->vocab * h; /* model.norm, lm_head */
}

static char *cfg(const struct moe_shape *s)
{
    static char buf[1024];
    int mx = !strcmp(s->fam, "mixtral");
    int n = snprintf(buf, sizeof buf,
             "{\"model_type\": \"%s\", \"hidden_size\": %lld, \"num_hidden_layers\": %lld, "
             "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"head_dim\": %lld, "
             "\"intermediate_size\": %lld, \"max_position_embeddings\": 32768, "
             "\"vocab_size\": %lld, \"%s\": %lld, \"num_experts_per_tok\": %lld%s%lld",
             s->fam, s->h, s->layers, s->heads, s->kv, s->d, mx ? s->f : 12288, s->vocab,
             mx ? "num_local_experts" : "num_experts", s->E, s->k,
             mx ? ", \"rope_theta\": " : ", \"moe_intermediate_size\": ", mx ? 1000000 : s->f);
    if (s->fs) n += snprintf(buf + n, sizeof buf - (size_t)n,
                             ", \"shared_expert_intermediate_size\": %lld", s->fs);
    snprintf(buf + n, sizeof buf - (size_t)n, "}");
    return buf;
}

/* qwen2_moe: qwen2's attention (Q, K, V biases unless qkv_bias says false, no output bias),
 * the experts and the shared expert. */
Test(moe, qwen2_moe_read)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_parse(cfg(&SHAPES[3]), &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_str_eq(t->family, "qwen2_moe");
    cr_assert(t->qkv_bias && !t->out_bias && !t->mlp_bias && !t->qk_norm && t->gated_mlp);
    cr_assert_eq(t->experts, 60);
    cr_assert_eq(t->experts_per_tok, 4);
    cr_assert_eq(t->moe_ffn, 1408);
    cr_assert_eq(t->shared_ffn, 5632);
    transformer_free(t);
    char text[1100];
    snprintf(text, sizeof text, "%.*s, \"qkv_bias\": false}", (int)strlen(cfg(&SHAPES[3])) - 1,
             cfg(&SHAPES[3]));
    t = llmfix_parse(text, &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_not(t->qkv_bias);
    transformer_free(t);
}

Test(moe, parameter_counts)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const struct moe_shape *s = &SHAPES[i];
        plumb_err err = {{0}};
        transformer *t = llmfix_parse(cfg(s), &err);
        cr_assert_not_null(t, "%s: %s", s->name, err.msg);
        long long n = transformer_param_count(t), a = transformer_active_param_count(t);
        cr_assert_eq(n, tensor_sum(s, s->E), "%s: %lld, the tensors %lld", s->name, n,
                     tensor_sum(s, s->E));
        cr_assert_eq(a, tensor_sum(s, s->k), "%s active: %lld, the tensors %lld", s->name, a,
                     tensor_sum(s, s->k));
        cr_assert(fabs((double)n - s->card) <= s->rounding, "%s: %lld vs %.4g", s->name, n,
                  s->card);
        cr_assert(fabs((double)a - s->card_active) <= s->rounding_active, "%s: %lld vs %.4g",
                  s->name, a, s->card_active);
        transformer_free(t);
    }
    transformer *t = llmfix_model(MIXTRAL);
    cr_assert_eq(transformer_param_count(t), 46702792704LL);
    cr_assert_eq(transformer_active_param_count(t), 12879925248LL);
    transformer_free(t);
    t = llmfix_model(QWEN3M);
    cr_assert_eq(transformer_param_count(t), tensor_sum(&SHAPES[1], 128));
    cr_assert_eq(transformer_active_param_count(t), tensor_sum(&SHAPES[1], 8));
    transformer_free(t);
    t = llmfix_model("examples/llm/llama3-8b.json"); /* no experts: active = total */
    cr_assert_eq(transformer_active_param_count(t), transformer_param_count(t));
    transformer_free(t);
}

static profile *build(const transformer *t, int tp, long long seq, double *speed)
{
    llm_options o;
    llm_options_init(&o);
    o.tp = tp;
    o.seq = seq;
    o.attention = LLM_ATTN_FLASH;
    if (speed) {
        cluster *c = llmfix_cluster(H100);
        *speed = c->types[0].speed;
        cluster_free(c);
    }
    return llmfix_profile(t, H100, &o);
}

static void near(double got, double want, const char *what)
{
    cr_assert(fabs(got - want) <= 1e-9 * fabs(want) + 1e-12, "%s: %.17g, computed here %.17g",
              what, got, want);
}

/* Mixtral's block at tp 2, 4096 tokens, against the same block with one dense SwiGLU MLP of
 * an expert's width: the difference is what the mixture adds, computed here from the device's
 * GEMM and streaming prices: the router's GEMM (4096 x 4096 x 8, whole on each rank), a
 * grouped GEMM of E = 8 groups of M k / E = 1024 rows (a batch of 8 for the device) for each
 * expert projection in place of one of 4096 rows, the
 * routing's bytes (softmax and top-k over the scores, the permutation and its inverse of
 * M k rows, the combine) in 5 kernels, the activation over M k rows; FLOPs, parameters and
 * kept bytes alike. */
Test(moe, block_priced_as_computed_here)
{
    transformer *t = llmfix_model(MIXTRAL), *dense = transformer_clone(t);
    dense->experts = dense->experts_per_tok = dense->moe_ffn = 0;
    double speed = 1;
    profile *p = build(t, 2, 4096, &speed), *q = build(dense, 2, 4096, NULL);
    plumb_err err = {{0}};
    cluster *c = cluster_load(H100, &err);
    const device_type *dev = &c->types[0];
    double M = 4096, h = 4096, E = 8, k = 2, f = 14336 / 2.0, e = 2, rows = M * k / E;
    dev_precision P = DEV_BF16;
    double router_f = device_gemm_s(dev, P, 1, M, E, h, 0);
    double experts_f = device_gemm_s(dev, P, E, rows, 2 * f, h, 0) +
                       device_gemm_s(dev, P, E, rows, h, f, 0);
    double dense_f = device_gemm_s(dev, P, 1, M, 2 * f, h, 0) + device_gemm_s(dev, P, 1, M, h, f, 0);
    double route_bytes = M * E * (e + 4) + M * E * 4 + 12 * M * k /* softmax, top-k */
                         + 2 * 2 * M * k * h * e                  /* permute, un-permute */
                         + M * k * h * e + 4 * M * k + M * h * e; /* combine */
    double act = 3 * M * k * f * e - 3 * M * f * e;
    double want = router_f + experts_f - dense_f + device_stream_s(dev, route_bytes, 5) +
                  device_stream_s(dev, act, 0);
    const profile_layer *m = &p->layers[1], *d = &q->layers[1];
    near((m->forward_ms - d->forward_ms) / 1e3 / speed, want, "forward");
    double router_w = device_gemm_s(dev, P, 1, h, E, M, 0);
    double experts_w = device_gemm_s(dev, P, E, h, 2 * f, rows, 0) +
                       device_gemm_s(dev, P, E, f, h, rows, 0);
    double dense_w = device_gemm_s(dev, P, 1, h, 2 * f, M, 0) + device_gemm_s(dev, P, 1, f, h, M, 0);
    near((m->backward_weight_ms - d->backward_weight_ms) / 1e3 / speed,
         router_w + experts_w - dense_w, "weight gradient");
    /* FLOPs: the router's 2 M h E (once over the 2 ranks) and k - 1 more experts' 6 M h f */
    near(m->flops - d->flops, 2 * M * h * E / 2 + (k - 1) * 6 * M * h * f, "flops");
    /* parameters: the router and E - 1 more experts */
    near(m->parameter_bytes - d->parameter_bytes, (h * E + (E - 1) * 3 * h * f) * e, "params");
    /* kept: the router's fp32 probabilities and top-k (weights, indices), the permuted tokens
     * and the experts' outputs (M k h each), k - 1 more rows of the MLP's inner tensors */
    near(m->saved_bytes - d->saved_bytes,
         4 * M * E + 12 * M * k + 2 * M * k * h * e + (k - 1) * 4 * M * f * e, "saved");
    cr_assert_gt(m->forward_ms, d->forward_ms);
    /* the model's FLOPs (MFU): the blocks' and head's per rank sum to the active ones / tp */
    double sum = 0;
    for (int i = 0; i < p->nlayers; i++) sum += p->layers[i].flops;
    t->seq = 4096;
    near(sum * 2, transformer_forward_flops(t), "model flops");
    profile_free(p);
    profile_free(q);
    cluster_free(c);
    transformer_free(dense);
    transformer_free(t);
}

/* Qwen1.5-MoE-A2.7B's block at tp 2, 4096 tokens, against the same block without its shared
 * expert: the difference is the shared expert as a dense SwiGLU of 5632 / 2 over the 4096
 * rows, its gate's 4096 x 2048 x 1 GEMM (whole on each rank), and three streaming kernels
 * (the activation, the sigmoid scaling, the add), computed here; FLOPs, parameters and kept
 * bytes alike. */
Test(moe, shared_expert_priced_as_computed_here)
{
    const struct moe_shape *q = &SHAPES[3];
    plumb_err err = {{0}};
    transformer *t = llmfix_parse(cfg(q), &err);
    cr_assert_not_null(t, "%s", err.msg);
    transformer *bare = transformer_clone(t);
    bare->shared_ffn = 0;
    double speed = 1;
    profile *p = build(t, 2, 4096, &speed), *b = build(bare, 2, 4096, NULL);
    cluster *c = cluster_load(H100, &err);
    const device_type *dev = &c->types[0];
    double M = 4096, h = 2048, fs = 5632 / 2.0, e = 2;
    dev_precision P = DEV_BF16;
    double fwd = device_gemm_s(dev, P, 1, M, 2 * fs, h, 0) + device_gemm_s(dev, P, 1, M, h, fs, 0) +
                 device_gemm_s(dev, P, 1, M, 1, h, 0);
    /* the block's routed kernels are 5; 8 with the shared expert's three */
    double bytes = 3 * M * fs * e + 2 * M * h * e + M * e + 3 * M * h * e;
    fwd += device_stream_s(dev, bytes, 3);
    const profile_layer *m = &p->layers[1], *d = &b->layers[1];
    near((m->forward_ms - d->forward_ms) / 1e3 / speed, fwd, "forward");
    near(m->flops - d->flops, 6 * M * h * fs + 2 * M * h / 2, "flops");
    near(m->parameter_bytes - d->parameter_bytes, (3 * h * fs + h) * e, "params");
    near(m->saved_bytes - d->saved_bytes, 4 * e * M * fs + M * h * e + M * e, "saved");
    profile_free(p);
    profile_free(b);
    cluster_free(c);
    transformer_free(bare);
    transformer_free(t);
}

/* plumb-transformer/1 holds the experts: the description reads back equal, with the same
 * counts; a dense model writes none of the keys. */
Test(moe, description_round_trips)
{
    for (int i = 0; i < 3; i++) {
        plumb_err err = {{0}};
        transformer *t = i < 2 ? llmfix_model(i ? QWEN3M : MIXTRAL) : llmfix_parse(cfg(&SHAPES[4]), &err);
        cr_assert_not_null(t, "%s", err.msg);
        cJSON *o = transformer_to_json(t);
        cr_assert_not_null(o);
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "num_experts")->valuedouble,
                     (double)t->experts);
        transformer *r = transformer_from_json(o, "d.json", &err);
        cr_assert_not_null(r, "%s", err.msg);
        cr_assert(transformer_equal(t, r));
        cr_assert_eq(transformer_param_count(r), transformer_param_count(t));
        cr_assert_eq(transformer_active_param_count(r), transformer_active_param_count(t));
        cr_assert_eq(r->shared_ffn, i == 2 ? 20480 : 0);
        r->experts_per_tok = 1;
        cr_assert_not(transformer_equal(t, r));
        r->experts_per_tok = t->experts_per_tok;
        r->shared_ffn += 1;
        cr_assert_not(transformer_equal(t, r));
        transformer *c = transformer_clone(t);
        cr_assert(transformer_equal(t, c));
        transformer_free(c);
        transformer_free(r);
        cJSON_Delete(o);
        transformer_free(t);
    }
    transformer *t = llmfix_model("examples/llm/qwen3-8b.json");
    cJSON *o = transformer_to_json(t);
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "num_experts"));
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "moe_intermediate_size"));
    cJSON_Delete(o);
    transformer_free(t);
}

#define MX_BASE "{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_hidden_layers\": 2, " \
                "\"num_attention_heads\": 4, \"intermediate_size\": 96, "                  \
                "\"max_position_embeddings\": 512, \"vocab_size\": 100"
#define Q3_BASE "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, " \
                "\"num_attention_heads\": 4, \"intermediate_size\": 96, "                    \
                "\"max_position_embeddings\": 512, \"vocab_size\": 100, "                    \
                "\"num_experts\": 4, \"num_experts_per_tok\": 2"
#define PL_BASE "{\"format\": \"plumb-transformer/1\", \"name\": \"m\", \"hidden_size\": 64, "   \
                "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 96, " \
                "\"max_position_embeddings\": 512, \"vocab_size\": 100, \"norm\": \"rmsnorm\", "  \
                "\"position_embedding\": \"rotary\", \"tie_word_embeddings\": false, "         \
                "\"dropout\": false, "

Test(moe, bad_keys_refused)
{
    llmfix_expect_bad(MX_BASE ", \"num_local_experts\": 8, \"num_experts_per_tok\": 9}",
               "t.json: num_experts_per_tok: expected at most num_local_experts = 8 (got 9)");
    llmfix_expect_bad(MX_BASE ", \"num_local_experts\": 0, \"num_experts_per_tok\": 1}",
               "t.json: num_local_experts: expected an integer from 1 to 1024 (got 0)");
    llmfix_expect_bad(MX_BASE ", \"num_experts_per_tok\": 2}",
               "t.json: num_local_experts: missing; expected the experts on each block");
    llmfix_expect_bad(MX_BASE ", \"num_local_experts\": 8}",
               "t.json: num_experts_per_tok: missing; expected the experts each token");
    llmfix_expect_bad(MX_BASE ", \"num_local_experts\": 8, \"num_experts_per_tok\": 0.5}",
               "t.json: num_experts_per_tok:");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 2500001}",
               "t.json: num_experts: expected num_experts x the expert width");
    llmfix_expect_bad(Q3_BASE "}", "t.json: moe_intermediate_size: missing");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 32, \"mlp_only_layers\": [1]}",
               "t.json: mlp_only_layers: expected [] or null");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 32, \"mlp_only_layers\": 1}",
               "t.json: mlp_only_layers: expected a list");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 32, \"decoder_sparse_step\": 2}",
               "t.json: decoder_sparse_step: expected 1");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 32, \"use_sliding_window\": true}",
               "t.json: use_sliding_window: expected false");
    llmfix_expect_bad(Q3_BASE ", \"moe_intermediate_size\": 32, \"norm_topk_prob\": 3}",
               "t.json: norm_topk_prob:");
    llmfix_expect_bad("{\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"intermediate_size\": 96, "
               "\"max_position_embeddings\": 512, \"vocab_size\": 100, \"num_experts\": 4, "
               "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}",
               "t.json: shared_expert_intermediate_size: missing");
    /* plumb-transformer/1: gated experts without biases, the three keys together */
    llmfix_expect_bad(PL_BASE "\"mlp\": \"gelu\", \"bias\": false, \"num_experts\": 4, "
               "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}",
               "t.json: mlp: expected a gated MLP");
    llmfix_expect_bad(PL_BASE "\"mlp\": \"swiglu\", \"bias\": true, \"num_experts\": 4, "
               "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}",
               "t.json: mlp_bias: expected false with experts");
    llmfix_expect_bad(PL_BASE "\"mlp\": \"swiglu\", \"bias\": false, \"num_experts\": 4}",
               "t.json: moe_intermediate_size: missing");
    llmfix_expect_bad(PL_BASE "\"mlp\": \"swiglu\", \"bias\": false, \"num_experts\": 4, "
               "\"moe_intermediate_size\": 32}",
               "t.json: num_experts_per_tok: missing");
    llmfix_expect_bad(PL_BASE "\"mlp\": \"swiglu\", \"bias\": false, "
               "\"shared_expert_intermediate_size\": 32}",
               "t.json: shared_expert_intermediate_size: expected only with num_experts");
}

/* The options a mixture cannot take: a tp that does not divide the experts' width, FP8. */
Test(moe, options_refused)
{
    plumb_err err = {{0}};
    cluster *c = cluster_load(H100, &err);
    transformer *t = llmfix_model(QWEN3M);
    llm_options o;
    llm_options_init(&o);
    o.precision = DEV_FP8;
    cr_assert_null(llm_profile_build(t, c, H100, &o, &err));
    cr_assert(strstr(err.msg, "--precision: expected bf16, fp16, tf32 or fp32 with "
                              "qwen3-30b-a3b's experts"), "%s", err.msg);
    t->moe_ffn = 770; /* 770 / 4 is not whole; the heads divide by 4 */
    llm_options_init(&o);
    o.tp = 4;
    cr_assert_null(llm_profile_build(t, c, H100, &o, &err));
    cr_assert(strstr(err.msg, "--tp: expected a divisor of the experts' width 770"), "%s",
              err.msg);
    transformer_free(t);
    cluster_free(c);
}

/* The executor's blocks have a dense MLP: a plan laid out from gpt-mini's description with
 * experts is refused by name in one line. */
Test(moe, executor_refuses_experts)
{
    transformer *t = llmfix_model("examples/llm/gpt-mini.json");
    t->gated_mlp = 1;
    t->activation = TF_SILU;
    t->mlp_bias = 0;
    t->experts = 4, t->experts_per_tok = 2, t->moe_ffn = 64;
    llmexec_check(t, "plan.json: model.transformer.num_experts: expected none: "
                         "gpt-mini.json's blocks have a dense MLP");
    transformer_free(t);
}
