/* test_families.c: the dense Hugging Face families beyond llama's own (docs/llm.md, "Model
 * files"): phi3, starcoder2, olmo2 and granite read by transformers' rules
 * (modular_phi3.py, modeling_starcoder2.py, modular_olmo2.py, modeling_granite.py), the
 * shipped phi3-mini-4k, starcoder2-7b, olmo2-7b and granite-3-8b and the other published
 * shapes counted against sums of their checkpoints' tensors made here and the model cards'
 * figures, their windows and FLOPs counted here, the profile of phi3's fused projections
 * equal to mistral's separate ones, starcoder2's biases and OLMo 2's norms priced as counted
 * here, Granite's scalings priced as kernels that keep nothing, plumb-transformer/1 round
 * trips, bad keys refused in one line, and the executor refusing OLMo 2's block and
 * Granite's scalings (a window: test_window). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "exec/train_plan.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "llmexec.h"
#include "llmfix.h"

#define H100 "profiles/clusters/dgx-h100.json"
#define PHI3 "examples/llm/phi3-mini-4k.json"
#define SC2 "examples/llm/starcoder2-7b.json"
#define OLMO2 "examples/llm/olmo2-7b.json"
#define GRANITE "examples/llm/granite-3-8b.json"

/* A Hugging Face config of model_type fam with a published shape's keys and `more`. */
static char *cfg(const char *fam, long long h, long long layers, long long heads, long long kv,
                 long long f, long long vocab, const char *more)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"%s\", \"hidden_size\": %lld, \"num_hidden_layers\": %lld, "
             "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, "
             "\"intermediate_size\": %lld, \"max_position_embeddings\": 4096, "
             "\"vocab_size\": %lld%s}", fam, h, layers, heads, kv, f, vocab, more);
    return buf;
}

Test(families, phi3_read)
{
    transformer *t = llmfix_model(PHI3);
    cr_assert_str_eq(t->family, "phi3");
    cr_assert(t->gated_mlp && t->activation == TF_SILU && t->norm == TF_RMSNORM);
    cr_assert(!t->qkv_bias && !t->out_bias && !t->mlp_bias && !t->qk_norm && !t->post_norms);
    cr_assert(!t->tied_embeddings && !t->learned_positions && !t->dropout);
    cr_assert_eq(t->kv_heads, 32);
    cr_assert_eq(transformer_head_dim(t), 96);
    /* mistral's rule: the window on every block (MistralModel's sliding-window mask) */
    cr_assert_eq(t->window, 2047);
    cr_assert_null(t->full_layers);
    cr_assert_eq(transformer_window_layers(t), 32);
    cr_assert(transformer_window_applies(t, 4096));
    cr_assert_not(transformer_window_applies(t, 2047));
    transformer_free(t);
    /* the architectures name alone; a null window is none; resid_pdrop is dropout */
    t = llmfix_model_text("{\"architectures\": [\"Phi3ForCausalLM\"], \"hidden_size\": 64, "
                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": "
                 "128, \"max_position_embeddings\": 64, \"vocab_size\": 100, "
                 "\"sliding_window\": null, \"resid_pdrop\": 0.1}");
    cr_assert_str_eq(t->family, "phi3");
    cr_assert(t->window == 0 && t->dropout && t->kv_heads == 4);
    transformer_free(t);
}

Test(families, starcoder2_read)
{
    transformer *t = llmfix_model(SC2);
    cr_assert_str_eq(t->family, "starcoder2");
    cr_assert(!t->gated_mlp && t->activation == TF_GELU && t->norm == TF_LAYERNORM);
    cr_assert(t->qkv_bias && t->out_bias && t->mlp_bias && t->tied_embeddings);
    cr_assert(!t->learned_positions && !t->qk_norm && !t->post_norms && !t->dropout);
    cr_assert_eq(t->kv_heads, 4);
    cr_assert_eq(transformer_head_dim(t), 128);
    cr_assert_eq(t->window, 4096);
    cr_assert_null(t->full_layers);
    cr_assert(transformer_window_applies(t, 16384));
    transformer_free(t);
    /* use_bias false takes every bias away; the dropouts; tying as the file says */
    t = llmfix_model_text(cfg("starcoder2", 64, 2, 4, 2, 256, 100,
                     ", \"use_bias\": false, \"residual_dropout\": 0.1, "
                     "\"tie_word_embeddings\": false, \"hidden_act\": \"gelu\""));
    cr_assert(!t->qkv_bias && !t->out_bias && !t->mlp_bias && !t->tied_embeddings);
    cr_assert(t->dropout && t->window == 0);
    transformer_free(t);
    t = llmfix_model_text("{\"architectures\": [\"Starcoder2ForCausalLM\"], \"hidden_size\": 64, "
                 "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 1, \"intermediate_size\": 128, "
                 "\"max_position_embeddings\": 64, \"vocab_size\": 100, "
                 "\"attention_dropout\": 0.1}");
    cr_assert_str_eq(t->family, "starcoder2");
    cr_assert(t->dropout && t->qkv_bias && t->tied_embeddings);
    transformer_free(t);
}

/* A published shape and its count: the sum of the checkpoint's tensors, written out here.
 * phi3: embed_tokens V h; per block qkv_proj h x (a + 2 kv) d, o_proj a d x h,
 * gate_up_proj h x 2 f, down_proj f x h (no biases), input_layernorm and
 * post_attention_layernorm h each; norm h; lm_head V h (untied). starcoder2: embed_tokens
 * V h; per block q_proj h a d + a d, k_proj and v_proj h kv d + kv d each, o_proj a d h + h,
 * c_fc h f + f, c_proj f h + h, two LayerNorms 2 h each; norm 2 h; lm_head V h unless tied. */
static const struct shape {
    const char *name, *fam;
    long long h, layers, heads, kv, f, vocab;
    int tied;
    double card, rounding;
} SHAPES[] = {
    {"Phi-3-mini-4k", "phi3", 3072, 32, 32, 32, 8192, 32064, 0, 3.82e9, 0.005e9},
    {"Phi-3-medium-4k", "phi3", 5120, 40, 40, 10, 17920, 32064, 0, 14e9, 0.5e9},
    {"StarCoder2-3B", "starcoder2", 3072, 30, 24, 2, 12288, 49152, 1, 3.03e9, 0.005e9},
    {"StarCoder2-7B", "starcoder2", 4608, 32, 36, 4, 18432, 49152, 1, 7.17e9, 0.005e9},
    {"StarCoder2-15B", "starcoder2", 6144, 40, 48, 4, 24576, 49152, 0, 15.96e9, 0.005e9},
};

static long long tensor_sum(const struct shape *s)
{
    long long d = s->h / s->heads, emb = s->vocab * s->h;
    if (strcmp(s->fam, "phi3") == 0) {
        long long qkv_proj = s->h * (s->heads + 2 * s->kv) * d, o_proj = s->heads * d * s->h;
        long long gate_up = s->h * 2 * s->f, down = s->f * s->h, norms = 2 * s->h;
        return emb + s->layers * (qkv_proj + o_proj + gate_up + down + norms) + s->h + emb;
    }
    long long q = s->h * s->heads * d + s->heads * d, k = s->h * s->kv * d + s->kv * d;
    long long o = s->heads * d * s->h + s->h, c_fc = s->h * s->f + s->f, c_proj = s->f * s->h + s->h;
    long long norms = 2 * 2 * s->h;
    return emb + s->layers * (q + 2 * k + o + c_fc + c_proj + norms) + 2 * s->h +
           (s->tied ? 0 : emb);
}

Test(families, parameter_counts)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const struct shape *s = &SHAPES[i];
        transformer *t = llmfix_model_text(cfg(s->fam, s->h, s->layers, s->heads, s->kv, s->f, s->vocab,
                                      s->tied ? ", \"tie_word_embeddings\": true"
                                              : ", \"tie_word_embeddings\": false"));
        long long n = transformer_param_count(t), want = tensor_sum(s);
        cr_assert_eq(n, want, "%s: %lld, the tensors %lld", s->name, n, want);
        cr_assert(fabs((double)n - s->card) <= s->rounding, "%s: %lld vs the card's %.4g",
                  s->name, n, s->card);
        cr_assert_eq(transformer_active_param_count(t), n);
        transformer_free(t);
    }
    transformer *t = llmfix_model(PHI3);
    cr_assert_eq(transformer_param_count(t), tensor_sum(&SHAPES[0]));
    cr_assert_eq(transformer_param_count(t), 3821079552LL);
    transformer_free(t);
    t = llmfix_model(SC2);
    cr_assert_eq(transformer_param_count(t), tensor_sum(&SHAPES[3]));
    cr_assert_eq(transformer_param_count(t), 7173923840LL);
    transformer_free(t);
}

/* The forward FLOPs at the files' lengths, counted here: per block 2 s h (a + 2 kv) d for Q,
 * K, V, 4 s w a d for the scores and the values over the window's w keys, 2 s a d h for the
 * output projection, the MLP 6 s h f gated (phi3) or 4 s h f plain (starcoder2); the head
 * 2 s h V. */
Test(families, forward_flops)
{
    transformer *t = llmfix_model(PHI3);
    double s = 4096, h = 3072, w = 2047, f = 8192, V = 32064;
    double block = 2 * s * h * 3 * h + 4 * s * w * h + 2 * s * h * h + 6 * s * h * f;
    double want = 32 * block + 2 * s * h * V;
    cr_assert(fabs(transformer_forward_flops(t) - want) <= 1e-12 * want, "%.17g vs %.17g",
              transformer_forward_flops(t), want);
    transformer_free(t);
    t = llmfix_model(SC2);
    s = 16384, h = 4608, w = 4096, f = 18432, V = 49152;
    double kvw = 4 * 128;
    block = 2 * s * h * (h + 2 * kvw) + 4 * s * w * h + 2 * s * h * h + 4 * s * h * f;
    want = 32 * block + 2 * s * h * V;
    cr_assert(fabs(transformer_forward_flops(t) - want) <= 1e-12 * want, "%.17g vs %.17g",
              transformer_forward_flops(t), want);
    transformer_free(t);
}

static profile *build(const transformer *t, int tp, long long seq)
{
    llm_options o;
    llm_options_init(&o);
    o.tp = tp;
    o.seq = seq;
    o.attention = LLM_ATTN_FLASH;
    return llmfix_profile(t, H100, &o);
}

/* phi3's fused qkv_proj and gate_up_proj are priced as mistral's separate projections of
 * the same shapes (Megatron-Core fuses them alike): the profile of Phi-3-mini's file is
 * the profile of a mistral config with its keys, layer for layer. */
Test(families, phi3_priced_as_mistral)
{
    transformer *t = llmfix_model(PHI3);
    transformer *m = llmfix_model_text("{\"model_type\": \"mistral\", \"hidden_size\": 3072, "
                              "\"num_hidden_layers\": 32, \"num_attention_heads\": 32, "
                              "\"num_key_value_heads\": 32, \"intermediate_size\": 8192, "
                              "\"max_position_embeddings\": 4096, \"vocab_size\": 32064, "
                              "\"sliding_window\": 2047}");
    profile *p = build(t, 2, 4096), *q = build(m, 2, 4096);
    cr_assert_eq(p->nlayers, q->nlayers);
    for (int l = 0; l < p->nlayers; l++) {
        cr_assert_eq(p->layers[l].forward_ms, q->layers[l].forward_ms, "layer %d", l);
        cr_assert_eq(p->layers[l].backward_ms, q->layers[l].backward_ms, "layer %d", l);
        cr_assert_eq(p->layers[l].flops, q->layers[l].flops, "layer %d", l);
        cr_assert_eq(p->layers[l].parameter_bytes, q->layers[l].parameter_bytes, "layer %d", l);
        cr_assert_eq(p->layers[l].saved_bytes, q->layers[l].saved_bytes, "layer %d", l);
    }
    profile_free(p);
    profile_free(q);
    transformer_free(m);
    transformer_free(t);
}

/* starcoder2's block at tp 2 keeps a rank's share of its tensors, counted here: the
 * column-parallel Q, K, V and c_fc with their biases split, the row-parallel o_proj and
 * c_proj whole-bias, the two LayerNorms' weights and biases whole (2 bytes each); without
 * use_bias the six biases go, and the parameters' difference is theirs. */
Test(families, starcoder2_priced_with_its_biases)
{
    transformer *t = llmfix_model(SC2), *nb = transformer_clone(t);
    nb->qkv_bias = nb->out_bias = nb->mlp_bias = 0;
    profile *p = build(t, 2, 4096), *q = build(nb, 2, 4096);
    double h = 4608, f = 18432, kvw = 4 * 128, e = 2;
    double rank = (h * (h + 2 * kvw) + (h + 2 * kvw)) / 2 + (h * h) / 2 + h +
                  (h * f + f) / 2 + (f * h) / 2 + h + 2 * 2 * h;
    cr_assert_eq(p->layers[1].parameter_bytes, rank * e, "%.0f vs %.0f",
                 p->layers[1].parameter_bytes, rank * e);
    double biases = (h + 2 * kvw) / 2 + h + f / 2 + h;
    cr_assert_eq(p->layers[1].parameter_bytes - q->layers[1].parameter_bytes, biases * e);
    cr_assert_eq(p->layers[1].flops, q->layers[1].flops); /* the bias adds are no GEMM */
    profile_free(p);
    profile_free(q);
    transformer_free(nb);
    transformer_free(t);
}

/* plumb-transformer/1 holds both families with the keys it had: the descriptions read back
 * equal with the same count and FLOPs, and name no family. */
Test(families, description_round_trips)
{
    const char *files[] = {PHI3, SC2};
    for (int k = 0; k < 2; k++) {
        plumb_err err = {{0}};
        transformer *t = llmfix_model(files[k]);
        cJSON *o = transformer_to_json(t);
        cr_assert_not_null(o);
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "sliding_window")->valuedouble,
                     (double)t->window);
        transformer *r = transformer_from_json(o, "d.json", &err);
        cr_assert_not_null(r, "%s", err.msg);
        cr_assert(transformer_equal(t, r));
        cr_assert_str_eq(r->family, "plumb");
        cr_assert_eq(transformer_param_count(r), transformer_param_count(t));
        cr_assert_eq(transformer_forward_flops(r), transformer_forward_flops(t));
        transformer_free(r);
        cJSON_Delete(o);
        transformer_free(t);
    }
}

Test(families, bad_keys_refused)
{
    llmfix_expect_bad(cfg("phi3", 64, 2, 4, 4, 128, 100, ", \"sliding_window\": 0"),
               "t.json: sliding_window: expected");
    llmfix_expect_bad(cfg("phi3", 64, 2, 4, 4, 128, 100, ", \"resid_pdrop\": 1.5"),
               "t.json: resid_pdrop: expected a probability below 1");
    llmfix_expect_bad(cfg("phi3", 64, 2, 4, 3, 128, 100, ""),
               "t.json: num_key_value_heads: expected a divisor of the 4 attention heads");
    llmfix_expect_bad("{\"model_type\": \"phi3\", \"num_hidden_layers\": 2}",
               "t.json: hidden_size: missing");
    llmfix_expect_bad(cfg("starcoder2", 64, 2, 4, 2, 128, 100, ", \"use_bias\": \"yes\""),
               "t.json: use_bias: expected");
    llmfix_expect_bad(cfg("starcoder2", 64, 2, 4, 2, 128, 100, ", \"hidden_act\": \"tanh\""),
               "t.json: hidden_act: expected gelu");
    llmfix_expect_bad(cfg("starcoder2", 64, 2, 4, 2, 128, 100, ", \"residual_dropout\": -0.1"),
               "t.json: residual_dropout: expected");
    llmfix_expect_bad("{\"model_type\": \"starcoder2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"intermediate_size\": 128, "
               "\"max_position_embeddings\": 64, \"vocab_size\": 100}",
               "t.json: num_key_value_heads: missing");
    llmfix_expect_bad("{\"model_type\": \"phi\"}", "t.json: model_type: unknown architecture");
    llmfix_expect_bad("{\"architectures\": [\"Phi3SmallForCausalLM\"]}",
               "t.json: architectures[0]: unknown architecture");
}

/* olmo2 (transformers' modular_olmo2.py): llama's block with its two RMSNorms after the
 * attention and the MLP and none before, and q_norm and k_norm over the whole projections. */
Test(families, olmo2_read)
{
    transformer *t = llmfix_model(OLMO2);
    cr_assert_str_eq(t->family, "olmo2");
    cr_assert(t->gated_mlp && t->activation == TF_SILU && t->norm == TF_RMSNORM);
    cr_assert(t->post_norms && t->no_pre_norms && t->qk_norm == TF_QK_WIDTH);
    cr_assert(!t->qkv_bias && !t->out_bias && !t->mlp_bias && !t->tied_embeddings);
    cr_assert(t->window == 0 && !t->embed_scale && t->attn_softcap == 0);
    transformer_free(t);
    t = llmfix_model_text(cfg("olmo2", 64, 2, 4, 2, 128, 100, ", \"attention_bias\": true"));
    cr_assert(t->qkv_bias && t->out_bias && !t->mlp_bias);
    transformer_free(t);
}

/* OLMo 2's counts: the checkpoint's tensors (embed_tokens V h; per block q_proj h a d,
 * k_proj and v_proj h kv d, o_proj a d h, gate_proj, up_proj, down_proj h f each,
 * q_norm a d, k_norm kv d, post_attention_layernorm and post_feedforward_layernorm h each;
 * norm h; lm_head V h), against the cards: OLMo-2-1124-7B 7.30 B, OLMo-2-1124-13B 13.7 B.
 * Qwen3's per-head norms would give 2 d a block instead of (a + kv) d. */
Test(families, olmo2_parameter_counts)
{
    static const struct { long long h, layers, heads, kv, f, vocab; double card, round; } S[] = {
        {4096, 32, 32, 32, 11008, 100352, 7.30e9, 0.005e9},
        {5120, 40, 40, 40, 13824, 100352, 13.7e9, 0.05e9},
    };
    for (int i = 0; i < 2; i++) {
        long long h = S[i].h, d = h / S[i].heads, a = S[i].heads, kv = S[i].kv;
        long long block = h * a * d + 2 * h * kv * d + a * d * h + 3 * h * S[i].f + a * d +
                          kv * d + 2 * h;
        long long want = 2 * S[i].vocab * h + S[i].layers * block + h;
        transformer *t = llmfix_model_text(cfg("olmo2", h, S[i].layers, a, kv, S[i].f, S[i].vocab, ""));
        cr_assert_eq(transformer_param_count(t), want, "%lld vs %lld",
                     transformer_param_count(t), want);
        cr_assert(fabs((double)want - S[i].card) <= S[i].round, "%lld vs %.4g", want, S[i].card);
        transformer_free(t);
    }
    transformer *t = llmfix_model(OLMO2);
    cr_assert_eq(transformer_param_count(t), 7298617344LL);
    transformer_free(t);
}

/* OLMo 2's block against llama's of the same shape, at tp 2 over 4096 tokens, as counted
 * here: the same FLOPs; the parameters q_norm's and k_norm's share on the rank, (16 + 16)
 * 128 weights; kept, the Q, K, V input is the block's input and the MLP's the residual
 * (one tensor fewer than llama's norm input and output, M h e less), the post norms'
 * inputs (2 M h e more), the query and key norms' inputs (M (16 + 16) 128 e) and one fp32
 * statistic a token each (8 M); two more norm kernels each way, so it is slower. */
Test(families, olmo2_priced_as_counted)
{
    transformer *t = llmfix_model(OLMO2), *l = transformer_clone(t);
    l->post_norms = l->no_pre_norms = 0;
    l->qk_norm = 0;
    profile *p = build(t, 2, 4096), *q = build(l, 2, 4096);
    double M = 4096, h = 4096, e = 2, w = (16 + 16) * 128;
    cr_assert_eq(p->layers[1].flops, q->layers[1].flops);
    cr_assert_eq(p->layers[1].parameter_bytes - q->layers[1].parameter_bytes, w * e);
    cr_assert_eq(p->layers[1].saved_bytes - q->layers[1].saved_bytes,
                 -M * h * e + 2 * M * h * e + M * w * e + 8 * M, "%.0f",
                 p->layers[1].saved_bytes - q->layers[1].saved_bytes);
    cr_assert_gt(p->layers[1].forward_ms, q->layers[1].forward_ms);
    /* Qwen3's per-head norms instead: 2 d weights on every rank */
    l->qk_norm = TF_QK_HEAD;
    profile_free(q);
    q = build(l, 2, 4096);
    cr_assert_eq(q->layers[1].parameter_bytes - p->layers[1].parameter_bytes,
                 (2 * 128 - w) * e);
    profile_free(p);
    profile_free(q);
    transformer_free(l);
    transformer_free(t);
}

/* plumb-transformer/1 holds OLMo 2's block in two new keys, written only when set:
 * "pre_norms": false and "qk_norm_full": true; a description reads back equal. */
Test(families, olmo2_description)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(OLMO2);
    cJSON *o = transformer_to_json(t);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "pre_norms")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "qk_norm_full")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "post_norms")));
    transformer *r = transformer_from_json(o, "d.json", &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert(transformer_equal(t, r));
    cr_assert_eq(transformer_param_count(r), transformer_param_count(t));
    r->qk_norm = TF_QK_HEAD;
    cr_assert_not(transformer_equal(t, r));
    r->qk_norm = TF_QK_WIDTH;
    r->no_pre_norms = 0;
    cr_assert_not(transformer_equal(t, r));
    transformer_free(r);
    cJSON_Delete(o);
    transformer_free(t);
    const char *files[] = {"examples/llm/qwen3-8b.json", "examples/llm/gemma2-9b.json", PHI3};
    for (int k = 0; k < 3; k++) {
        t = llmfix_model(files[k]);
        o = transformer_to_json(t);
        cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "pre_norms"), "%s", files[k]);
        cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "qk_norm_full"), "%s", files[k]);
        cJSON_Delete(o);
        transformer_free(t);
    }
    const char *base = "{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": "
                       "64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                       "\"intermediate_size\": 8, \"max_position_embeddings\": 8, "
                       "\"vocab_size\": 10, \"mlp\": \"swiglu\", \"norm\": \"rmsnorm\", "
                       "\"position_embedding\": \"rotary\", \"bias\": false, "
                       "\"tie_word_embeddings\": false, \"dropout\": false";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s, \"pre_norms\": false}", base);
    llmfix_expect_bad(buf, "t.json: pre_norms: expected false only with post_norms true");
    snprintf(buf, sizeof buf, "%s, \"qk_norm_full\": true}", base);
    llmfix_expect_bad(buf, "t.json: qk_norm_full: expected only with qk_norm true");
    snprintf(buf, sizeof buf, "%s, \"pre_norms\": 0, \"post_norms\": true}", base);
    llmfix_expect_bad(buf, "t.json: pre_norms:");
}

Test(families, olmo2_bad_keys_refused)
{
    llmfix_expect_bad(cfg("olmo2", 64, 2, 4, 2, 128, 100, ", \"attention_bias\": 1"),
               "t.json: attention_bias:");
    llmfix_expect_bad(cfg("olmo2", 64, 2, 4, 3, 128, 100, ""),
               "t.json: num_key_value_heads: expected a divisor");
    llmfix_expect_bad("{\"model_type\": \"olmo2\", \"hidden_size\": 64}",
               "t.json: num_hidden_layers: missing");
    llmfix_expect_bad("{\"model_type\": \"olmo\"}", "t.json: model_type: unknown architecture");
}

/* The executor's blocks have their norms before attention and MLP: an OLMo 2 block is
 * refused by name. */
Test(families, executor_refuses_olmo2)
{
    transformer *t = llmfix_model("examples/llm/gpt-mini.json");
    t->post_norms = t->no_pre_norms = 1;
    llmexec_check(t, "plan.json: model.transformer.pre_norms: expected true: "
                         "gpt-mini.json's blocks have a norm before the attention");
    transformer_free(t);
}

/* granite (transformers' modeling_granite.py, configuration_granite.py): llama's block and
 * four scalings, each 1.0 when absent and applied whatever its value. */
Test(families, granite_read_and_counted)
{
    transformer *t = llmfix_model(GRANITE);
    cr_assert_str_eq(t->family, "granite");
    cr_assert(t->gated_mlp && t->norm == TF_RMSNORM && t->tied_embeddings);
    cr_assert(!t->qkv_bias && !t->mlp_bias && !t->post_norms && !t->qk_norm);
    cr_assert_eq(t->embed_mult, 12.0);
    cr_assert_eq(t->residual_mult, 0.22);
    cr_assert_eq(t->attn_mult, 0.0078125);
    cr_assert_eq(t->logits_scale, 16.0);
    /* the tensors (embed_tokens V h, tied; per block q_proj h a d, k_proj and v_proj h kv d,
     * o_proj a d h, gate_proj, up_proj, down_proj h f, two RMSNorms h; norm h): 8.17 B */
    long long h = 4096, a = 32, kv = 8, d = 128, f = 12800, V = 49159;
    long long want = V * h + 40 * (h * a * d + 2 * h * kv * d + a * d * h + 3 * h * f + 2 * h) + h;
    cr_assert_eq(transformer_param_count(t), want);
    cr_assert_eq(want, 8170864640LL);
    cr_assert(fabs((double)want - 8.17e9) <= 0.005e9);
    transformer_free(t);
    /* configuration_granite.py's defaults: 1.0 each, untied, biases as the keys say */
    t = llmfix_model_text(cfg("granite", 64, 2, 4, 2, 128, 100, ", \"mlp_bias\": true"));
    cr_assert(t->embed_mult == 1 && t->residual_mult == 1 && t->attn_mult == 1 &&
              t->logits_scale == 1);
    cr_assert(t->mlp_bias && !t->qkv_bias && !t->tied_embeddings);
    transformer_free(t);
}

/* The scalings cost streaming kernels and keep nothing: against llama's block of the same
 * shape, the embedding's, a block's and the head's forward and backward are longer, their
 * FLOPs, parameters and kept bytes the same. */
Test(families, granite_scalings_priced)
{
    transformer *t = llmfix_model(GRANITE), *l = transformer_clone(t);
    l->embed_mult = l->residual_mult = l->attn_mult = l->logits_scale = 0;
    profile *p = build(t, 2, 4096), *q = build(l, 2, 4096);
    int layers[] = {0, 1, (int)t->layers + 1};
    for (int i = 0; i < 3; i++) {
        const profile_layer *x = &p->layers[layers[i]], *y = &q->layers[layers[i]];
        cr_assert_gt(x->forward_ms, y->forward_ms, "layer %d", layers[i]);
        cr_assert_gt(x->backward_ms, y->backward_ms, "layer %d", layers[i]);
        cr_assert_eq(x->flops, y->flops);
        cr_assert_eq(x->parameter_bytes, y->parameter_bytes);
        cr_assert_eq(x->saved_bytes, y->saved_bytes);
    }
    /* the attention multiplier alone costs nothing */
    l->attn_mult = 0.0078125;
    profile_free(q);
    q = build(l, 2, 4096);
    t->embed_mult = t->residual_mult = t->logits_scale = 0;
    profile_free(p);
    p = build(t, 2, 4096);
    for (int i = 0; i < p->nlayers; i++)
        cr_assert_eq(p->layers[i].forward_ms, q->layers[i].forward_ms);
    profile_free(p);
    profile_free(q);
    transformer_free(l);
    transformer_free(t);
}

/* plumb-transformer/1's four Granite keys, written only when set, read back equal; bad
 * values and an executor plan refused by name in one line. */
Test(families, granite_description_and_refusals)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(GRANITE);
    cJSON *o = transformer_to_json(t);
    cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "residual_multiplier")->valuedouble, 0.22);
    transformer *r = transformer_from_json(o, "d.json", &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert(transformer_equal(t, r));
    r->logits_scale = 8;
    cr_assert_not(transformer_equal(t, r));
    transformer_free(r);
    cJSON_Delete(o);
    transformer_free(t);
    t = llmfix_model(OLMO2);
    o = transformer_to_json(t);
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "logits_scaling"));
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, "embedding_multiplier"));
    cJSON_Delete(o);
    transformer_free(t);
    llmfix_expect_bad(cfg("granite", 64, 2, 4, 2, 128, 100, ", \"logits_scaling\": 0"),
               "t.json: logits_scaling: expected");
    llmfix_expect_bad(cfg("granite", 64, 2, 4, 2, 128, 100, ", \"residual_multiplier\": \"0.22\""),
               "t.json: residual_multiplier: expected");
    llmfix_expect_bad(cfg("granite", 64, 2, 4, 2, 128, 100, ", \"embedding_multiplier\": -12"),
               "t.json: embedding_multiplier: expected");

    t = llmfix_model("examples/llm/gpt-mini.json");
    t->residual_mult = 0.22;
    llmexec_check(t, "plan.json: model.transformer.residual_multiplier: expected none: "
                         "gpt-mini.json's transformer has no Granite scalings");
    transformer_free(t);
}
