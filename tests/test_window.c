/* test_window.c: sliding-window attention (docs/llm.md, "Sliding-window attention"): the
 * window a Hugging Face config gives (Mistral's sliding_window; Qwen2's and Qwen3's only with
 * use_sliding_window, on the layers from max_window_layers), bad values refused in one line,
 * plumb-transformer/1 round trips it, the band's pairs and the model's FLOPs against counts
 * made here, fused attention priced on the band at 32k and unchanged at s <= w, standard
 * attention's time and memory unchanged, context parallelism (profile, 3D search) and the
 * executor refusing a window shorter than the sequence. */
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
#include "planner/search3d.h"
#include "llmexec.h"
#include "llmfix.h"

#define H100 "profiles/clusters/dgx-h100.json"
#define MISTRAL "examples/llm/mistral-7b.json"

/* The window text gives (it must read). */
static long long window_of(const char *text)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_parse(text, &err);
    cr_assert_not_null(t, "%s: %s", text, err.msg);
    long long w = t->window;
    transformer_free(t);
    return w;
}

/* A config of family fam (4 layers) with the extra keys `more` (",\"k\": v" ...). */
static char *cfg(const char *fam, const char *more)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"%s\", \"hidden_size\": 64, \"num_hidden_layers\": 4, "
             "\"num_attention_heads\": 4, \"intermediate_size\": 128, "
             "\"max_position_embeddings\": 64, \"vocab_size\": 100%s}", fam, more);
    return buf;
}

Test(window, config_read)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(MISTRAL);
    cr_assert_eq(t->window, 4096);
    cr_assert_eq(t->seq, 32768);
    transformer_free(t);
    t = transformer_load("examples/llm/mistral-nemo-12b.json", &err); /* no key */
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_eq(t->window, 0);
    transformer_free(t);
    cr_assert_eq(window_of(cfg("mistral", ", \"sliding_window\": 16")), 16);
    cr_assert_eq(window_of(cfg("mistral", ", \"sliding_window\": null")), 0);
    cr_assert_eq(window_of(cfg("mistral", "")), 0);
    /* llama has no window: transformers' LlamaConfig takes no such key */
    cr_assert_eq(window_of(cfg("llama", ", \"sliding_window\": 16")), 0);
    /* Qwen2-0.5B's published keys: use_sliding_window false, so no window */
    cr_assert_eq(window_of(cfg("qwen2", ", \"sliding_window\": 131072, \"max_window_layers\": "
                               "24, \"use_sliding_window\": false")), 0);
    cr_assert_eq(window_of(cfg("qwen3", ", \"sliding_window\": null, \"max_window_layers\": "
                               "4, \"use_sliding_window\": false")), 0);
    cr_assert_eq(window_of(cfg("qwen2", ", \"sliding_window\": 16")), 0); /* use: false */
    /* use_sliding_window true: the layers at index >= max_window_layers slide */
    cr_assert_eq(window_of(cfg("qwen2", ", \"sliding_window\": 16, \"use_sliding_window\": "
                               "true, \"max_window_layers\": 0")), 16);
    cr_assert_eq(window_of(cfg("qwen3", ", \"sliding_window\": 16, \"use_sliding_window\": "
                               "true, \"max_window_layers\": 4")), 0);
    /* absent: transformers' default 28, past these 4 layers: none slide */
    cr_assert_eq(window_of(cfg("qwen2", ", \"sliding_window\": 16, \"use_sliding_window\": "
                               "true")), 0);
    cr_assert_eq(window_of(cfg("qwen3", ", \"sliding_window\": null, \"use_sliding_window\": "
                               "true, \"max_window_layers\": 0")), 0);
    /* some layers only: the window on the layers from max_window_layers, the others full
     * (transformers' layer_types rule for Qwen2 and Qwen3) */
    long long from[] = {1, 3};
    for (int k = 0; k < 2; k++) {
        char more[128];
        snprintf(more, sizeof more, ", \"sliding_window\": 16, \"use_sliding_window\": true, "
                 "\"max_window_layers\": %lld", from[k]);
        plumb_err err = {{0}};
        transformer *t = llmfix_parse(cfg(k ? "qwen3" : "qwen2", more), &err);
        cr_assert_not_null(t, "%s", err.msg);
        cr_assert_eq(t->window, 16);
        for (long long l = 0; l < 4; l++)
            cr_assert_eq(transformer_layer_window(t, l), l < from[k] ? 0 : 16, "layer %lld", l);
        transformer_free(t);
    }
}

Test(window, bad_values_refused)
{
    const char *bad[] = {"0", "-4096", "4096.5", "\"4096\"", "1e12", "true"};
    char more[64];
    for (int i = 0; i < 6; i++) {
        snprintf(more, sizeof more, ", \"sliding_window\": %s", bad[i]);
        llmfix_expect_bad(cfg("mistral", more), "t.json: sliding_window: expected");
        /* checked whatever use_sliding_window says */
        llmfix_expect_bad(cfg("qwen2", more), "t.json: sliding_window: expected");
    }
    llmfix_expect_bad(cfg("qwen2", ", \"use_sliding_window\": true, \"max_window_layers\": -1"),
               "t.json: max_window_layers: expected");
    llmfix_expect_bad(cfg("qwen3", ", \"use_sliding_window\": true, \"max_window_layers\": 1.5"),
               "t.json: max_window_layers: expected");
    llmfix_expect_bad(cfg("qwen3", ", \"use_sliding_window\": 1"), "t.json: use_sliding_window:");
    llmfix_expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": 64, "
               "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10, \"mlp\": \"swiglu\", "
               "\"norm\": \"rmsnorm\", \"position_embedding\": \"rotary\", \"bias\": false, "
               "\"tie_word_embeddings\": false, \"dropout\": false, \"sliding_window\": 0}",
               "t.json: sliding_window: expected");
}

Test(window, description_round_trips)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(MISTRAL);
    cJSON *w = transformer_to_json(t);
    cr_assert_not_null(w);
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(w, "sliding_window");
    cr_assert(cJSON_IsNumber(sw) && sw->valuedouble == 4096);
    transformer *r = transformer_from_json(w, "d.json", &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert_eq(r->window, 4096);
    cr_assert(transformer_equal(t, r));
    r->window = 0; /* the window is part of the model */
    cr_assert_not(transformer_equal(t, r));
    transformer_free(r);
    cJSON_Delete(w);
    t->window = 0; /* no window: no key, the description as before */
    w = transformer_to_json(t);
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(w, "sliding_window"));
    cJSON_Delete(w);
    transformer_free(t);
}

/* sum over i of the keys query i sees, counted one by one */
static double brute_pairs(long long s, long long w)
{
    double n = 0;
    for (long long i = 0; i < s; i++)
        for (long long j = 0; j <= i; j++)
            if (w <= 0 || i - j < w) n++; /* keys i - w + 1 .. i */
    return n;
}

Test(window, band_pairs_against_brute_force)
{
    static const long long sw[][2] = {{1, 1}, {1, 0},   {7, 1},    {7, 3},   {7, 7},
                                      {7, 9}, {64, 16}, {100, 99}, {333, 0}, {500, 128}};
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++)
        cr_assert_eq(transformer_band_pairs(sw[i][0], sw[i][1]), brute_pairs(sw[i][0], sw[i][1]),
                     "s %lld w %lld", sw[i][0], sw[i][1]);
    cr_assert_eq(transformer_band_pairs(0, 4), 0);
    /* Mistral at 32768 tokens: the first 4096 queries a triangle, the rest 4096 keys each */
    cr_assert_eq(transformer_band_pairs(32768, 4096), 4096.0 * 4097 / 2 + 28672.0 * 4096);
}

/* The model's FLOPs at 32768 tokens: every query counted over its 4096-key window, the scores
 * and the values 2 x 4096 x 4096 (heads x d) each per token; at 4096 tokens the full s. */
Test(window, forward_flops_count_the_window)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(MISTRAL);
    double h = 4096, aw = 4096, q = (32 + 16) * 128.0, f = 14336, V = 32000;
    long long seqs[] = {32768, 4096, 1000};
    for (int k = 0; k < 3; k++) {
        double s = (double)seqs[k], keys = 0;
        for (long long i = 0; i < seqs[k]; i++) keys += s < 4096 ? s : 4096;
        t->seq = seqs[k];
        double block = 2 * s * h * q + 4 * keys * aw + 2 * s * aw * h + 6 * s * h * f;
        double want = 32 * block + 2 * s * h * V;
        cr_assert(fabs(transformer_forward_flops(t) - want) <= 1e-12 * want, "s %g: %.17g vs "
                  "%.17g", s, transformer_forward_flops(t), want);
        llm_options o;
        llm_options_init(&o);
        o.tp = 4;
        o.seq = seqs[k];
        o.attention = LLM_ATTN_FLASH;
        cluster *c = llmfix_cluster(H100);
        profile *p = llm_profile_build(t, c, H100, &o, &err);
        cr_assert_not_null(p, "%s", err.msg);
        double sum = 0;
        for (int i = 0; i < p->nlayers; i++) sum += p->layers[i].flops;
        cr_assert(fabs(sum - want / 4) <= 1e-9 * want, "profile %.17g vs %.17g", sum, want / 4);
        profile_free(p);
        cluster_free(c);
    }
    transformer_free(t);
}

static profile *build(const transformer *t, long long seq, llm_attention att)
{
    llm_options o;
    llm_options_init(&o);
    o.tp = 8;
    o.seq = seq;
    o.attention = att;
    return llmfix_profile(t, H100, &o);
}

/* Everything of a block but its FLOPs is the same in p and q. */
static void same_block_but_flops(const profile *p, const profile *q)
{
    const profile_layer *a = &p->layers[1], *b = &q->layers[1];
    cr_assert_eq(a->forward_ms, b->forward_ms);
    cr_assert_eq(a->backward_input_ms, b->backward_input_ms);
    cr_assert_eq(a->backward_weight_ms, b->backward_weight_ms);
    cr_assert_eq(a->saved_bytes, b->saved_bytes);
    cr_assert_eq(a->selective_recompute_ms, b->selective_recompute_ms);
    cr_assert_eq(a->selective_saved_bytes, b->selective_saved_bytes);
    cr_assert_eq(a->workspace_bytes, b->workspace_bytes);
}

/* Fused attention at 32768 tokens: the kernel's time falls by the band's share of the causal
 * pairs, both ways (its FLOPs dominate its bytes there: compute-bound on both sides, so the
 * drop is the FLOPs' drop at the attention plateau); at s <= w nothing moves. Standard
 * attention multiplies the whole masked s x s: time and memory as without a window. */
Test(window, fused_attention_priced_on_the_band)
{
    transformer *t = llmfix_model(MISTRAL);
    transformer *full = transformer_clone(t);
    full->window = 0;
    cluster *c = llmfix_cluster(H100);
    const device_type *dev = &c->types[0];
    double s = 32768, batch = 32 / 8, d = 128, mult = 2 * batch * s * s * d;
    double share = 0.5 * brute_pairs(32768, 4096) / (s * (s + 1) / 2); /* of s x s */
    profile *pw = build(t, 32768, LLM_ATTN_FLASH), *pf = build(full, 32768, LLM_ATTN_FLASH);
    const profile_layer *w = &pw->layers[1], *f = &pf->layers[1];
    double fwd = (device_fused_s(dev, DEV_BF16, 0.5 * 2 * mult, 0, 1) -
                  device_fused_s(dev, DEV_BF16, share * 2 * mult, 0, 1)) * 1e3 * dev->speed;
    double bwd = (device_fused_s(dev, DEV_BF16, 0.5 * 5 * mult, 0, 1) -
                  device_fused_s(dev, DEV_BF16, share * 5 * mult, 0, 1)) * 1e3 * dev->speed;
    cr_assert(share > 0.11 && share < 0.12, "%g", share); /* about w / s - w^2 / (2 s^2) */
    cr_assert(fabs((f->forward_ms - w->forward_ms) - fwd) <= 1e-9 * fwd, "%.17g vs %.17g",
              f->forward_ms - w->forward_ms, fwd);
    cr_assert(fabs((f->backward_input_ms - w->backward_input_ms) - bwd) <= 1e-9 * bwd);
    cr_assert_eq(w->backward_weight_ms, f->backward_weight_ms);
    cr_assert_eq(w->saved_bytes, f->saved_bytes); /* the statistics: one per row either way */
    profile_free(pw);
    profile_free(pf);
    long long at_most_w[] = {4096, 2048};
    for (int k = 0; k < 2; k++) {
        pw = build(t, at_most_w[k], LLM_ATTN_FLASH);
        pf = build(full, at_most_w[k], LLM_ATTN_FLASH);
        same_block_but_flops(pw, pf);
        cr_assert_eq(pw->layers[1].flops, pf->layers[1].flops);
        profile_free(pw);
        profile_free(pf);
    }
    pw = build(t, 32768 / 4, LLM_ATTN_STANDARD);
    pf = build(full, 32768 / 4, LLM_ATTN_STANDARD);
    same_block_but_flops(pw, pf);
    cr_assert_lt(pw->layers[1].flops, pf->layers[1].flops);
    profile_free(pw);
    profile_free(pf);
    cluster_free(c);
    transformer_free(full);
    transformer_free(t);
}

/* Transformer Engine's ring (p2p) takes no window: cp > 1 is refused where the window is
 * shorter than the sequence, taken where it is not. */
Test(window, context_parallelism_refused)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(MISTRAL);
    cluster *c = llmfix_cluster(H100);
    llm_options o;
    llm_options_init(&o);
    o.tp = 4;
    o.cp = 2;
    o.attention = LLM_ATTN_FLASH;
    cr_assert_null(llm_profile_build(t, c, H100, &o, &err));
    cr_assert(strstr(err.msg, "--cp: expected 1 with mistral-7b's sliding window of 4096 keys "
                     "over 32768 tokens"), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'));
    o.seq = 4096;
    profile *p = llm_profile_build(t, c, H100, &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    profile_free(p);
    cluster_free(c);
    transformer_free(t);
}

/* The 3D search tries cp > 1 only for a model whose window is not shorter than the
 * sequence, and refuses a pinned cp with the profile's line. */
Test(window, search_leaves_cp_out)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_model(MISTRAL);
    transformer *full = transformer_clone(t);
    full->window = 0;
    cluster *c = llmfix_cluster(H100);
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 8, o.global_batch = 8, o.attention = LLM_ATTN_FLASH;
    search3d_result *rw = search3d_run(t, c, H100, &o, &err);
    cr_assert_not_null(rw, "%s", err.msg);
    search3d_result *rf = search3d_run(full, c, H100, &o, &err);
    cr_assert_not_null(rf, "%s", err.msg);
    cr_assert_gt(rw->nranked, 0);
    for (int k = 0; k < rw->nranked; k++) cr_assert_eq(rw->ranked[k].d.cp, 1);
    cr_assert_lt(rw->enumerated, rf->enumerated); /* the window-free model searches cp too */
    search3d_free(rw);
    search3d_free(rf);
    o.cp = 2;
    cr_assert_null(search3d_run(t, c, H100, &o, &err));
    cr_assert(strstr(err.msg, "--cp: expected 1 with mistral-7b's sliding window"), "%s",
              err.msg);
    cluster_free(c);
    transformer_free(full);
    transformer_free(t);
}

/* The executor's attention is full causal: a plan whose window is shorter than its sequence
 * is refused by name; a window as long as the sequence runs. */
Test(window, executor_refuses_a_window)
{
    transformer *t = llmfix_model("examples/llm/gpt-mini.json");
    t->window = 16;
    llmexec_check(t, "plan.json: model.transformer.sliding_window: expected none or at "
                         "least the sequence's 64 tokens");
    t->window = 64;
    llmexec_check(t, NULL);
    transformer_free(t);
}
