/* test_transformer_hf.c: the head width a Hugging Face config gives (head_dim) and the Qwen3
 * family (qk_norm): the shipped Mistral-Nemo and Qwen3 configs count their published
 * parameters, a head_dim equal to hidden / heads changes nothing, plumb-transformer/1 round
 * trips both keys, bad head_dim values get one line, and the analytic profile prices the
 * heads x head_dim attention and the per-head norms (docs/llm.md, "Models from Hugging Face
 * configs"). */
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

static transformer *from_json_ok(const cJSON *root, const char *file)
{
    plumb_err err = {{0}};
    transformer *t = transformer_from_json(root, file, &err);
    cr_assert_not_null(t, "%s: %s", file, err.msg);
    return t;
}

static profile *build(const transformer *t, int tp, int b, long long s)
{
    llm_options o;
    llm_options_init(&o);
    o.tp = tp;
    o.microbatch = b;
    o.seq = s;
    return llmfix_profile(t, H100, &o);
}

/* The parameters of t as plumb counted them before head_dim and qk_norm: d = hidden / heads,
 * no per-head norms. */
static long long old_count(const transformer *t)
{
    transformer *o = transformer_clone(t);
    cr_assert_not_null(o);
    o->head_dim = 0;
    o->qk_norm = 0;
    long long n = transformer_param_count(o);
    transformer_free(o);
    return n;
}

/* Exact totals: the sums of every tensor of the published checkpoints' shapes (written out in
 * docs/llm.md; the model cards round them to 12.2B, 8.2B and 32.8B, non-embedding 6.95B and
 * 31.2B for Qwen3). */
Test(headdim, published_parameter_counts)
{
    static const struct {
        const char *file;
        long long exact, old;
        double card;
    } m[] = {
        {"examples/llm/mistral-nemo-12b.json", 12247782400LL, 12772070400LL, 12.2e9},
        {"examples/llm/qwen3-8b.json", 8190735360LL, 8190726144LL, 8.2e9},
        {"examples/llm/qwen3-32b.json", 32762123264LL, 30497182720LL, 32.8e9},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        transformer *t = llmfix_model(m[i].file);
        long long n = transformer_param_count(t);
        cr_assert_eq(n, m[i].exact, "%s: %lld, expected %lld", m[i].file, n, m[i].exact);
        cr_assert(fabs((double)n - m[i].card) <= 0.05e9, "%s: %lld vs the card's %.3g",
                  m[i].file, n, m[i].card);
        cr_assert_eq(old_count(t), m[i].old, "%s: the old count %lld", m[i].file,
                     old_count(t));
        cr_assert_eq(transformer_head_dim(t), 128);
        transformer_free(t);
    }
}

Test(headdim, qwen3_fields)
{
    transformer *t = llmfix_model("examples/llm/qwen3-32b.json");
    cr_assert_str_eq(t->family, "qwen3");
    cr_assert(t->qk_norm && t->gated_mlp && t->norm == TF_RMSNORM && !t->learned_positions);
    cr_assert(!t->qkv_bias && !t->out_bias && !t->mlp_bias && !t->tied_embeddings);
    cr_assert_eq(transformer_attn_width(t), 8192);
    /* q 5120x8192, k and v 5120x1024 each, o 8192x5120, MLP 3x5120x25600, two RMSNorms of
     * 5120, q_norm and k_norm of 128 */
    long long block = 5120LL * 8192 + 2 * 5120LL * 1024 + 8192LL * 5120 + 3 * 5120LL * 25600 +
                      2 * 5120 + 2 * 128;
    cr_assert_eq(transformer_block_params(t), block);
    transformer_free(t);

    /* attention_bias: the Q, K, V and output biases (Qwen3's MLP has none); the
     * architectures fallback names the family too */
    static const char *text =
        "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 64, "
        "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"head_dim\": 32, \"intermediate_size\": 128, \"max_position_embeddings\": 32, "
        "\"vocab_size\": 100, \"attention_bias\": true, \"tie_word_embeddings\": true}";
    plumb_err err = {{0}};
    cJSON *root = json_parse_text("q.json", text, strlen(text), &err);
    cr_assert_not_null(root, "%s", err.msg);
    t = from_json_ok(root, "q.json");
    cJSON_Delete(root);
    cr_assert(t->qkv_bias && t->out_bias && !t->mlp_bias && t->qk_norm);
    block = (64 * 128 + 128) + 2 * (64 * 64 + 64) + (128 * 64 + 64) + 3 * 64 * 128 + 2 * 64 +
            2 * 32;
    cr_assert_eq(transformer_block_params(t), block);
    cr_assert_eq(transformer_param_count(t), 100 * 64 + 2 * block + 64);
    transformer_free(t);
}

/* llama3-8b with head_dim 128 written out (= 4096 / 32): the same transformer, the same
 * counts and FLOPs, the same analytic profile figure for figure, and its description
 * without the key. */
Test(headdim, explicit_equal_head_dim_changes_nothing)
{
    plumb_err err = {{0}};
    cJSON *root = json_load_file("examples/llm/llama3-8b.json", &err);
    cr_assert_not_null(root, "%s", err.msg);
    transformer *a = from_json_ok(root, "llama3-8b.json");
    cJSON_AddNumberToObject(root, "head_dim", 128);
    transformer *b = from_json_ok(root, "llama3-8b.json");
    cJSON_Delete(root);
    cr_assert_eq(b->head_dim, 128);
    cr_assert(transformer_equal(a, b));
    cr_assert_eq(transformer_param_count(a), transformer_param_count(b));
    cr_assert_eq(transformer_forward_flops(a), transformer_forward_flops(b));
    int tps[] = {1, 8};
    for (int i = 0; i < 2; i++) {
        profile *pa = build(a, tps[i], 2, 4096), *pb = build(b, tps[i], 2, 4096);
        cJSON *ja = profile_to_json(pa), *jb = profile_to_json(pb);
        char *sa = cJSON_PrintUnformatted(ja), *sb = cJSON_PrintUnformatted(jb);
        cr_assert_str_eq(sa, sb, "tp %d: the profiles differ", tps[i]);
        free(sa);
        free(sb);
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        profile_free(pa);
        profile_free(pb);
    }
    cJSON *w = transformer_to_json(b);
    cr_assert_not_null(w);
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(w, "head_dim"));
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(w, "qk_norm"));
    cJSON_Delete(w);
    transformer_free(a);
    transformer_free(b);
}

Test(headdim, description_round_trips)
{
    const char *files[] = {"examples/llm/qwen3-32b.json", "examples/llm/mistral-nemo-12b.json",
                           "examples/llm/qwen3-8b.json"};
    for (int i = 0; i < 3; i++) {
        transformer *t = llmfix_model(files[i]);
        cJSON *w = transformer_to_json(t);
        cr_assert_not_null(w);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(w, "head_dim");
        /* Qwen3-8B's 128 is 4096 / 32: no key */
        if (i < 2) cr_assert(cJSON_IsNumber(d) && d->valuedouble == 128, "%s", files[i]);
        else cr_assert_null(d);
        cr_assert_eq(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "qk_norm")), i != 1);
        transformer *r = from_json_ok(w, files[i]);
        cr_assert_str_eq(r->family, "plumb");
        cr_assert(transformer_equal(t, r), "%s", files[i]);
        cr_assert_eq(transformer_param_count(t), transformer_param_count(r));
        transformer_free(r);
        cJSON_Delete(w);
        transformer_free(t);
    }
}

#define CFG(fam, hd)                                                                          \
    "{\"model_type\": \"" fam "\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "           \
    "\"num_attention_heads\": 4, \"intermediate_size\": 128, \"max_position_embeddings\": "   \
    "32, \"vocab_size\": 100, \"head_dim\": " hd "}"

Test(headdim, bad_head_dim_refused)
{
    llmfix_expect_bad(CFG("mistral", "0"), "t.json: head_dim: expected");
    llmfix_expect_bad(CFG("llama", "-128"), "t.json: head_dim: expected");
    llmfix_expect_bad(CFG("qwen2", "12.5"), "t.json: head_dim: expected");
    llmfix_expect_bad(CFG("qwen3", "\"128\""), "t.json: head_dim: expected");
    llmfix_expect_bad(CFG("qwen3", "129"), "t.json: head_dim: expected at most 8 x hidden_size");
    llmfix_expect_bad(CFG("llama", "1e12"), "t.json: head_dim: expected");
    llmfix_expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": 64, "
               "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"head_dim\": 0, "
               "\"intermediate_size\": 8, \"max_position_embeddings\": 8, \"vocab_size\": 10, "
               "\"mlp\": \"swiglu\", \"norm\": \"rmsnorm\", \"position_embedding\": \"rotary\", "
               "\"bias\": false, \"tie_word_embeddings\": false, \"dropout\": false}",
               "t.json: head_dim: expected");
    /* without head_dim the width must still divide into the heads; with it, it need not;
     * null is absent (as transformers writes it) */
    llmfix_expect_bad("{\"model_type\": \"qwen3\", \"hidden_size\": 60, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 8, \"intermediate_size\": 128, "
               "\"max_position_embeddings\": 32, \"vocab_size\": 100}",
               "t.json: num_attention_heads: expected a divisor");
    const char *ok[] = {CFG("qwen3", "null"), CFG("mistral", "128"),
                        "{\"model_type\": \"qwen3\", \"hidden_size\": 60, \"num_hidden_layers\": "
                        "2, \"num_attention_heads\": 8, \"head_dim\": 16, \"intermediate_size\": "
                        "128, \"max_position_embeddings\": 32, \"vocab_size\": 100}"};
    long long want_d[] = {16, 128, 16};
    for (int i = 0; i < 3; i++) {
        plumb_err err = {{0}};
        cJSON *root = json_parse_text("t.json", ok[i], strlen(ok[i]), &err);
        cr_assert_not_null(root, "%s", err.msg);
        transformer *t = from_json_ok(root, "t.json");
        cr_assert_eq(transformer_head_dim(t), want_d[i], "%s", ok[i]);
        transformer_free(t);
        cJSON_Delete(root);
    }
}

/* The MFU count with an 8192-wide attention in a 5120-wide model: QKV 2 s h (a + 2 kv) d,
 * scores and values 2 s^2 a d each, the output projection 2 s a d h. */
Test(headdim, forward_flops_use_heads_times_head_dim)
{
    transformer *t = llmfix_model("examples/llm/qwen3-32b.json");
    t->seq = 4096;
    double s = 4096, h = 5120, aw = 8192, q = (64 + 16) * 128.0, f = 25600, V = 151936;
    double block = 2 * s * h * q + 4 * s * s * aw + 2 * s * aw * h + 6 * s * h * f;
    double want = 64 * block + 2 * s * h * V;
    cr_assert(fabs(transformer_forward_flops(t) - want) <= 1e-12 * want, "%.17g vs %.17g",
              transformer_forward_flops(t), want);
    profile *p = build(t, 8, 1, 4096);
    double sum = 0;
    for (int i = 0; i < p->nlayers; i++) sum += p->layers[i].flops;
    cr_assert(fabs(sum - want / 8) <= 1e-9 * want, "profile %.17g vs %.17g", sum, want / 8);
    profile_free(p);
    transformer_free(t);
}

/* A block's profile at tp 8: parameters, and what qk_norm adds to the saved bytes (its
 * inputs, the raw queries and keys, and one fp32 per head and token) and to the stream time. */
Test(headdim, profile_prices_width_and_qk_norm)
{
    transformer *t = llmfix_model("examples/llm/qwen3-32b.json");
    int tp = 8, b = 1;
    long long s = 4096;
    profile *p = build(t, tp, b, s);
    const profile_layer *L = &p->layers[1];
    double e = 2, at = 64 / tp, kvt = 8 / tp, d = 128, h = 5120, M = b * s;
    double params = h * (at + 2 * kvt) * d + at * d * h + 3 * h * 25600 / tp + 2 * h + 2 * d;
    cr_assert_eq(L->parameter_bytes, params * e, "%.17g vs %.17g", L->parameter_bytes,
                 params * e);
    t->qk_norm = 0;
    profile *p0 = build(t, tp, b, s);
    const profile_layer *L0 = &p0->layers[1];
    cr_assert_eq(L->saved_bytes - L0->saved_bytes, M * (at + kvt) * (d * e + 4));
    cr_assert_eq(L->parameter_bytes - L0->parameter_bytes, 2 * d * e);
    cr_assert_gt(L->forward_ms, L0->forward_ms);
    cr_assert_gt(L->backward_input_ms, L0->backward_input_ms);
    cr_assert_eq(L->flops, L0->flops);
    profile_free(p0);
    profile_free(p);
    transformer_free(t);
}

/* The brief's layout of Qwen3-32B (64 H100s, tp 8 x pp 4 x dp 2, global batch 64 of
 * microbatch 1; at 4096 tokens: the published 40960-token context needs 1.76 TiB on a device
 * without recomputation or flash attention) builds, and its first stage (the embedding and 16
 * blocks) holds the weights of the 8192-wide attention: 1,072,582,656 parameters a rank
 * (1,001,967,616 with the old 80-wide heads), and its FLOPs are the 8192-wide count. */
Test(headdim, qwen3_32b_layout_prices_wide_attention)
{
    transformer *t = llmfix_model("examples/llm/qwen3-32b.json");
    plumb_err err = {{0}};
    cluster *c = llmfix_cluster(H100);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 64;
    o.tp = 8;
    o.pp = 4;
    o.dp = 2;
    o.global_batch = 64;
    o.microbatch_size = 1;
    o.seq = 4096;
    plan *pl = layout3d_build(t, c, H100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    const plan_stage *s0 = &pl->stages[0];
    cr_assert_eq(s0->first_layer, 0);
    cr_assert_eq(s0->last_layer, 16);
    double params = 0, flops = 0;
    for (int i = s0->first_layer; i <= s0->last_layer; i++) {
        params += pl->prof->layers[i].parameter_bytes;
        flops += pl->prof->layers[i].flops;
    }
    cr_assert_eq(params, 2 * 1072582656.0, "%.17g", params);
    double s = 4096, h = 5120, aw = 8192, q = (64 + 16) * 128.0, f = 25600;
    double block = 2 * s * h * q + 4 * s * s * aw + 2 * s * aw * h + 6 * s * h * f;
    cr_assert(fabs(flops - 16 * block / 8) <= 1e-9 * flops, "%.17g vs %.17g", flops,
              16 * block / 8);
    plan_free(pl);
    o.seq = 0; /* the published context builds too (the memory check is the simulator's) */
    pl = layout3d_build(t, c, H100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    cr_assert_eq(pl->prof->tokens_per_sample, 40960);
    plan_free(pl);
    cluster_free(c);
    transformer_free(t);
}

/* The executor's attention splits its width into the heads and has no per-head norms: a plan
 * laid out from gpt-mini's description with its own head width or qk_norm is refused by name
 * (exec/train_plan.c's check), not run as another model. */
Test(headdim, executor_refuses_own_head_width)
{
    transformer *t = llmfix_model("examples/llm/gpt-mini.json");
    long long d = t->hidden / t->heads;
    llmexec_check(t, NULL);
    t->head_dim = d; /* said, but the same width: runs */
    llmexec_check(t, NULL);
    char want[160];
    snprintf(want, sizeof want, "plan.json: model.transformer.head_dim: expected hidden_size "
             "/ num_attention_heads = %lld", d);
    t->head_dim = 2 * d;
    llmexec_check(t, want);
    t->head_dim = 0;
    t->qk_norm = 1;
    llmexec_check(t, "plan.json: model.transformer.qk_norm: expected false");
    transformer_free(t);
}
