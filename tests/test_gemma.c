/* test_gemma.c: the Gemma families (docs/llm.md, "Gemma"): gemma, gemma2 and gemma3_text read
 * from their Hugging Face configs by transformers' rules, the shipped gemma2-9b and gemma3-1b
 * and four more published shapes counted against sums of their checkpoints' tensors made
 * here and the model cards' figures, the window on some blocks only (Gemma 2's even blocks,
 * Gemma 3's five of six, layer_types) priced block by block, the post norms, soft-capping
 * and scaled embedding priced and kept as counted here, plumb-transformer/1 round trips,
 * bad keys refused in one line, and the executor refusing a Gemma plan. */
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
#define GEMMA2 "examples/llm/gemma2-9b.json"
#define GEMMA3 "examples/llm/gemma3-1b.json"

/* A Hugging Face config of model_type fam with the published shape's keys and `more`. */
static char *cfg(const char *fam, long long h, long long layers, long long heads, long long kv,
                 long long d, long long f, long long vocab, const char *more)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"%s\", \"hidden_size\": %lld, \"num_hidden_layers\": %lld, "
             "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"head_dim\": %lld, "
             "\"intermediate_size\": %lld, \"max_position_embeddings\": 8192, "
             "\"vocab_size\": %lld%s}", fam, h, layers, heads, kv, d, f, vocab, more);
    return buf;
}

Test(gemma, families_read)
{
    transformer *t = llmfix_model(GEMMA2);
    cr_assert_str_eq(t->family, "gemma2");
    cr_assert(t->gated_mlp && t->activation == TF_GELU && t->norm == TF_RMSNORM);
    cr_assert(t->tied_embeddings && t->embed_scale && t->post_norms && !t->qk_norm);
    cr_assert_eq(t->attn_softcap, 50);
    cr_assert_eq(t->final_softcap, 30);
    cr_assert_eq(transformer_head_dim(t), 256);
    cr_assert_eq(t->window, 4096);
    /* transformers' Gemma2: "sliding_attention" where (i + 1) % 2, the even blocks */
    for (long long l = 0; l < t->layers; l++)
        cr_assert_eq(transformer_layer_window(t, l), l % 2 == 0 ? 4096 : 0, "block %lld", l);
    cr_assert_eq(transformer_window_layers(t), 21);
    cr_assert(transformer_window_applies(t, 8192));
    cr_assert_not(transformer_window_applies(t, 4096));
    transformer_free(t);

    t = llmfix_model(GEMMA3);
    cr_assert_str_eq(t->family, "gemma3_text");
    cr_assert(t->qk_norm && t->post_norms && t->embed_scale && t->tied_embeddings);
    cr_assert_eq(t->attn_softcap, 0); /* null in the config: none */
    cr_assert_eq(t->final_softcap, 0);
    cr_assert_eq(t->window, 512);
    /* sliding_window_pattern 6: the blocks at index 5, 11, 17, 23 are full */
    for (long long l = 0; l < t->layers; l++)
        cr_assert_eq(transformer_layer_window(t, l), (l + 1) % 6 == 0 ? 0 : 512, "block %lld", l);
    cr_assert_eq(transformer_window_layers(t), 22);
    transformer_free(t);

    /* Gemma-7B's published keys: gemma (1) has no window, no post norms, no capping */
    t = llmfix_model_text(cfg("gemma", 3072, 28, 16, 16, 256, 24576, 256000,
                     ", \"hidden_act\": \"gelu\", \"hidden_activation\": null"));
    cr_assert_str_eq(t->family, "gemma");
    cr_assert(t->embed_scale && t->tied_embeddings && t->gated_mlp && t->activation == TF_GELU);
    cr_assert(!t->post_norms && !t->qk_norm && t->window == 0 && !t->full_layers);
    cr_assert_eq(t->attn_softcap + t->final_softcap, 0);
    cr_assert_eq(transformer_attn_width(t), 4096); /* 16 x 256, wider than hidden 3072 */
    transformer_free(t);

    /* the architectures name alone, and gemma2's defaults (4096, capping 50 / 30) */
    t = llmfix_model_text("{\"architectures\": [\"Gemma2ForCausalLM\"], \"hidden_size\": 64, "
                 "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"head_dim\": 16, \"intermediate_size\": 128, "
                 "\"max_position_embeddings\": 64, \"vocab_size\": 100}");
    cr_assert_eq(t->window, 4096);
    cr_assert_eq(t->attn_softcap, 50);
    cr_assert_eq(t->final_softcap, 30);
    transformer_free(t);
    /* layer_types over the pattern; a null sliding_window is none */
    t = llmfix_model_text(cfg("gemma3_text", 64, 4, 4, 1, 16, 128, 100,
                     ", \"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
                     "\"sliding_attention\", \"full_attention\", \"sliding_attention\"]"));
    for (long long l = 0; l < 4; l++)
        cr_assert_eq(transformer_layer_window(t, l), l % 2 ? 8 : 0);
    transformer_free(t);
    t = llmfix_model_text(cfg("gemma2", 64, 4, 4, 1, 16, 128, 100, ", \"sliding_window\": null"));
    cr_assert(t->window == 0 && !t->full_layers);
    transformer_free(t);
    /* every layer sliding: the window on every block, no list */
    t = llmfix_model_text(cfg("gemma3_text", 64, 4, 4, 1, 16, 128, 100,
                     ", \"sliding_window\": 8, \"sliding_window_pattern\": 5"));
    cr_assert(t->window == 8 && !t->full_layers);
    transformer_free(t);
}

/* A published Gemma shape and its count: the sum of the checkpoint's tensors, written out
 * here (embed_tokens V h; per block q_proj h a d, k_proj and v_proj h kv d, o_proj a d h,
 * gate_proj, up_proj and down_proj h f each, input_layernorm and post_attention_layernorm h
 * each and for Gemma 2 and 3 pre_ and post_feedforward_layernorm h each, Gemma 3's q_norm
 * and k_norm d each; the final norm h; lm_head tied), and the card's rounded figure. */
static const struct shape {
    const char *name, *fam;
    long long h, layers, heads, kv, d, f, vocab;
    double card, rounding;
} SHAPES[] = {
    {"Gemma-2B", "gemma", 2048, 18, 8, 1, 256, 16384, 256000, 2.51e9, 0.005e9},
    {"Gemma-7B", "gemma", 3072, 28, 16, 16, 256, 24576, 256000, 8.54e9, 0.005e9},
    {"Gemma-2-2B", "gemma2", 2304, 26, 8, 4, 256, 9216, 256000, 2.61e9, 0.005e9},
    {"Gemma-2-9B", "gemma2", 3584, 42, 16, 8, 256, 14336, 256000, 9.24e9, 0.005e9},
    {"Gemma-2-27B", "gemma2", 4608, 46, 32, 16, 128, 36864, 256000, 27.2e9, 0.05e9},
    {"Gemma-3-1B", "gemma3_text", 1152, 26, 4, 1, 256, 6912, 262144, 1.0e9, 0.05e9},
};

static long long tensor_sum(const struct shape *s)
{
    int post = strcmp(s->fam, "gemma") != 0, qk = strcmp(s->fam, "gemma3_text") == 0;
    long long q_proj = s->h * s->heads * s->d, k_proj = s->h * s->kv * s->d;
    long long v_proj = k_proj, o_proj = s->heads * s->d * s->h;
    long long gate = s->h * s->f, up = s->h * s->f, down = s->f * s->h;
    long long norms = (post ? 4 : 2) * s->h, q_norm = qk ? s->d : 0, k_norm = q_norm;
    long long block = q_proj + k_proj + v_proj + o_proj + gate + up + down + norms + q_norm +
                      k_norm;
    return s->vocab * s->h + s->layers * block + s->h;
}

Test(gemma, parameter_counts)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const struct shape *s = &SHAPES[i];
        transformer *t = llmfix_model_text(cfg(s->fam, s->h, s->layers, s->heads, s->kv, s->d, s->f,
                                      s->vocab, ""));
        long long n = transformer_param_count(t), want = tensor_sum(s);
        cr_assert_eq(n, want, "%s: %lld, the tensors %lld", s->name, n, want);
        cr_assert(fabs((double)n - s->card) <= s->rounding, "%s: %lld vs the card's %.3g",
                  s->name, n, s->card);
        transformer_free(t);
    }
    /* the shipped files: the same sums */
    transformer *t = llmfix_model(GEMMA2);
    cr_assert_eq(transformer_param_count(t), tensor_sum(&SHAPES[3]));
    cr_assert_eq(transformer_param_count(t), 9241705984LL);
    transformer_free(t);
    t = llmfix_model(GEMMA3);
    cr_assert_eq(transformer_param_count(t), tensor_sum(&SHAPES[5]));
    cr_assert_eq(transformer_param_count(t), 999885952LL);
    transformer_free(t);
}

static profile *build(const transformer *t, int tp, long long seq, llm_attention att)
{
    llm_options o;
    llm_options_init(&o);
    o.tp = tp;
    o.seq = seq;
    o.attention = att;
    return llmfix_profile(t, H100, &o);
}

/* Each block with its own window: at 8192 tokens (window 4096) a local block's fused
 * attention is faster than a global one's both ways and counts fewer FLOPs, by the band's
 * pairs; at 4096 tokens they are alike; standard attention multiplies the whole masked
 * s x s on both (the same time and memory), its FLOPs counted over the window. The model's
 * FLOPs: 21 blocks of 4 s w and 21 of 4 s s per attention width, counted here. */
Test(gemma, blocks_priced_with_their_own_window)
{
    transformer *t = llmfix_model(GEMMA2);
    profile *p = build(t, 2, 8192, LLM_ATTN_FLASH);
    const profile_layer *loc = &p->layers[1], *glob = &p->layers[2];
    cr_assert_lt(loc->forward_ms, glob->forward_ms);
    cr_assert_lt(loc->backward_input_ms, glob->backward_input_ms);
    cr_assert_eq(loc->backward_weight_ms, glob->backward_weight_ms);
    cr_assert_eq(loc->saved_bytes, glob->saved_bytes);
    double s = 8192, w = 4096, aw = 16 * 256 / 2; /* tp 2 */
    cr_assert(fabs((glob->flops - loc->flops) - 4 * s * (s - w) * aw) <= 1e-9 * glob->flops,
              "%.17g", glob->flops - loc->flops);
    for (int l = 3; l <= 42; l++) /* alternating */
        cr_assert_eq(p->layers[l].forward_ms, p->layers[l % 2 ? 1 : 2].forward_ms, "layer %d", l);
    profile_free(p);
    p = build(t, 2, 4096, LLM_ATTN_FLASH);
    cr_assert_eq(p->layers[1].forward_ms, p->layers[2].forward_ms);
    cr_assert_eq(p->layers[1].flops, p->layers[2].flops);
    profile_free(p);
    p = build(t, 2, 8192, LLM_ATTN_STANDARD);
    cr_assert_eq(p->layers[1].forward_ms, p->layers[2].forward_ms);
    cr_assert_eq(p->layers[1].backward_ms, p->layers[2].backward_ms);
    cr_assert_eq(p->layers[1].saved_bytes, p->layers[2].saved_bytes);
    cr_assert_lt(p->layers[1].flops, p->layers[2].flops);
    profile_free(p);
    /* the model's FLOPs */
    double h = 3584, f = 14336, V = 256000, full_aw = 4096, q = (16 + 2 * 8) * 256.0;
    double common = 2 * s * h * q + 2 * s * full_aw * h + 6 * s * h * f;
    double want = 21 * (common + 4 * s * w * full_aw) + 21 * (common + 4 * s * s * full_aw) +
                  2 * s * h * V;
    t->seq = 8192;
    cr_assert(fabs(transformer_forward_flops(t) - want) <= 1e-12 * want, "%.17g vs %.17g",
              transformer_forward_flops(t), want);
    transformer_free(t);
}

/* Gemma's parts as counted here: the post norms keep their inputs (2 s b h e more a block)
 * and add two norm kernels; standard attention's soft-capping keeps one s x s tensor a
 * head (core_saved, dropped by selective recomputation) and fused attention nothing; the
 * logits' capping keeps the logits (s b V / t e); the embedding's scale keeps nothing but
 * costs a kernel each way; the post norms' parameters 2 h a block. */
Test(gemma, parts_priced_and_kept)
{
    transformer *t = llmfix_model(GEMMA2), *bare = transformer_clone(t);
    bare->post_norms = 0;
    bare->attn_softcap = bare->final_softcap = 0;
    bare->embed_scale = 0;
    double s = 4096, h = 3584, e = 2, V = 256000, heads = 16 / 2;
    llm_attention att[] = {LLM_ATTN_STANDARD, LLM_ATTN_FLASH};
    for (int k = 0; k < 2; k++) {
        profile *p = build(t, 2, 4096, att[k]), *q = build(bare, 2, 4096, att[k]);
        double probs = att[k] == LLM_ATTN_STANDARD ? heads * s * s * e : 0;
        cr_assert_eq(p->layers[1].saved_bytes - q->layers[1].saved_bytes, 2 * s * h * e + probs);
        cr_assert_eq(p->layers[1].selective_saved_bytes - q->layers[1].selective_saved_bytes,
                     2 * s * h * e);
        cr_assert_eq(p->layers[1].parameter_bytes - q->layers[1].parameter_bytes, 2 * h * e);
        cr_assert_gt(p->layers[1].forward_ms, q->layers[1].forward_ms);
        cr_assert_eq(p->layers[1].flops, q->layers[1].flops);
        cr_assert_eq(p->layers[0].saved_bytes, q->layers[0].saved_bytes);
        cr_assert_gt(p->layers[0].forward_ms, q->layers[0].forward_ms);
        int head = (int)t->layers + 1;
        cr_assert_eq(p->layers[head].saved_bytes - q->layers[head].saved_bytes, s * V / 2 * e);
        cr_assert_gt(p->layers[head].forward_ms, q->layers[head].forward_ms);
        profile_free(p);
        profile_free(q);
    }
    transformer_free(bare);
    transformer_free(t);
}

/* plumb-transformer/1 holds every Gemma part and the window's blocks: the description reads
 * back equal, with the same count and FLOPs; a model without them writes none of the keys. */
Test(gemma, description_round_trips)
{
    const char *files[] = {GEMMA2, GEMMA3};
    for (int k = 0; k < 2; k++) {
        plumb_err err = {{0}};
        transformer *t = llmfix_model(files[k]);
        cJSON *o = transformer_to_json(t);
        cr_assert_not_null(o);
        const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
        cr_assert(cJSON_IsArray(lt) && cJSON_GetArraySize(lt) == t->layers);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "post_norms")));
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "embedding_scale")));
        cr_assert_eq(cJSON_GetObjectItemCaseSensitive(o, "attn_logit_softcapping") != NULL,
                     k == 0);
        transformer *r = transformer_from_json(o, "d.json", &err);
        cr_assert_not_null(r, "%s", err.msg);
        cr_assert(transformer_equal(t, r));
        cr_assert_eq(transformer_param_count(r), transformer_param_count(t));
        cr_assert_eq(transformer_forward_flops(r), transformer_forward_flops(t));
        for (long long l = 0; l < t->layers; l++)
            cr_assert_eq(transformer_layer_window(r, l), transformer_layer_window(t, l));
        r->full_layers[0] = !r->full_layers[0]; /* the window's blocks are part of the model */
        cr_assert_not(transformer_equal(t, r));
        r->full_layers[0] = !r->full_layers[0];
        r->post_norms = 0;
        cr_assert_not(transformer_equal(t, r));
        transformer *c = transformer_clone(t);
        cr_assert(transformer_equal(t, c));
        transformer_free(c);
        transformer_free(r);
        cJSON_Delete(o);
        transformer_free(t);
    }
    transformer *t = llmfix_model("examples/llm/llama3-8b.json");
    cJSON *o = transformer_to_json(t);
    const char *keys[] = {"layer_types", "post_norms", "embedding_scale",
                          "attn_logit_softcapping", "final_logit_softcapping"};
    for (int i = 0; i < 5; i++) cr_assert_null(cJSON_GetObjectItemCaseSensitive(o, keys[i]));
    cJSON_Delete(o);
    transformer_free(t);
}

Test(gemma, bad_keys_refused)
{
    llmfix_expect_bad(cfg("gemma2", 64, 4, 4, 1, 16, 128, 100, ", \"layer_types\": [\"full_attention\"]"),
               "t.json: layer_types: expected an array of 4 strings");
    llmfix_expect_bad(cfg("gemma3_text", 64, 4, 4, 1, 16, 128, 100,
                   ", \"layer_types\": [\"full_attention\", \"local\", \"full_attention\", "
                   "\"full_attention\"]"),
               "t.json: layer_types[1]: expected \"sliding_attention\" or \"full_attention\" "
               "(got \"local\")");
    llmfix_expect_bad(cfg("gemma3_text", 64, 4, 4, 1, 16, 128, 100, ", \"layer_types\": 3"),
               "t.json: layer_types: expected an array");
    llmfix_expect_bad(cfg("gemma2", 64, 4, 4, 1, 16, 128, 100, ", \"attn_logit_softcapping\": -50"),
               "t.json: attn_logit_softcapping: expected");
    llmfix_expect_bad(cfg("gemma2", 64, 4, 4, 1, 16, 128, 100, ", \"final_logit_softcapping\": \"30\""),
               "t.json: final_logit_softcapping: expected");
    llmfix_expect_bad(cfg("gemma3_text", 64, 4, 4, 1, 16, 128, 100, ", \"sliding_window_pattern\": 0"),
               "t.json: sliding_window_pattern: expected");
    llmfix_expect_bad(cfg("gemma2", 64, 4, 4, 1, 16, 128, 100, ", \"sliding_window\": 0"),
               "t.json: sliding_window: expected");
    llmfix_expect_bad(cfg("gemma", 64, 4, 4, 1, 16, 128, 100, ", \"hidden_activation\": \"tanh\""),
               "t.json: hidden_activation: expected gelu");
    llmfix_expect_bad("{\"model_type\": \"gemma\", \"hidden_size\": 64, \"num_hidden_layers\": 4, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"intermediate_size\": "
               "128, \"max_position_embeddings\": 64, \"vocab_size\": 100}",
               "t.json: head_dim: missing");
    llmfix_expect_bad("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 2560}}",
               "t.json: model_type: \"gemma3\" is Gemma 3's image-and-text model");
    llmfix_expect_bad("{\"architectures\": [\"Gemma3ForConditionalGeneration\"]}",
               "t.json: architectures[0]: \"Gemma3ForConditionalGeneration\" is Gemma 3's");
    /* plumb-transformer/1: layer_types only with a window */
    llmfix_expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": 64, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10, \"mlp\": \"geglu\", "
               "\"norm\": \"rmsnorm\", \"position_embedding\": \"rotary\", \"bias\": false, "
               "\"tie_word_embeddings\": true, \"dropout\": false, \"layer_types\": "
               "[\"full_attention\", \"sliding_attention\"]}",
               "t.json: layer_types: expected only with a sliding_window");
    llmfix_expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": 64, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10, \"mlp\": \"geglu\", "
               "\"norm\": \"rmsnorm\", \"position_embedding\": \"rotary\", \"bias\": false, "
               "\"tie_word_embeddings\": true, \"dropout\": false, \"post_norms\": 1}",
               "t.json: post_norms:");
}

/* The executor's blocks have no Gemma parts: a plan laid out from gpt-mini's description
 * with any of them is refused by name in one line; without them it runs. */
Test(gemma, executor_refuses_gemma_parts)
{
    transformer *t = llmfix_model("examples/llm/gpt-mini.json");
    llmexec_check(t, NULL);
    t->post_norms = 1;
    llmexec_check(t, "plan.json: model.transformer.post_norms: expected none: gpt-mini.json's "
                  "transformer has no Gemma block");
    t->post_norms = 0;
    t->attn_softcap = 50;
    llmexec_check(t, "plan.json: model.transformer.attn_logit_softcapping: expected none");
    t->attn_softcap = 0;
    t->final_softcap = 30;
    llmexec_check(t, "plan.json: model.transformer.final_logit_softcapping: expected none");
    t->final_softcap = 0;
    t->embed_scale = 1;
    llmexec_check(t, "plan.json: model.transformer.embedding_scale: expected none");
    transformer_free(t);
}
