/* test_llm.c: transformers and their analytic profiles. The shipped configs parse to their
 * published parameter counts; missing and unknown keys are named; the per-layer FLOPs sum to
 * the closed forms of Narayanan et al. 2021 (and its grouped-query, gated generalization,
 * written out here); the blocks' kept bytes match Korthikanti et al. 2022's formula; the
 * roofline's efficiency rises with size towards its plateau and a matrix-vector product is
 * bandwidth-bound; Transformer Engine's fused cross-entropy streams fewer bytes over the
 * logits than the unfused loss; the profile round-trips through the loader; cluster files carry device
 * figures, and a large cluster is cut to its first N GPUs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/json.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"
#include "tests/tmpdir.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"

static transformer *load_ok(const char *path)
{
    plumb_err err = {{0}};
    transformer *t = transformer_load(path, &err);
    cr_assert_not_null(t, "%s: %s", path, err.msg);
    return t;
}

static transformer *from_text(const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text("t.json", text, strlen(text), err);
    if (!root) return NULL;
    transformer *t = transformer_from_json(root, "t.json", err);
    cJSON_Delete(root);
    return t;
}

static cluster *cluster_ok(const char *path)
{
    plumb_err err = {{0}};
    cluster *c = cluster_load(path, &err);
    cr_assert_not_null(c, "%s: %s", path, err.msg);
    return c;
}

static profile *build_ok(const transformer *t, const char *cpath, int tp, int b, long long s)
{
    cluster *c = cluster_ok(cpath);
    llm_options o;
    llm_options_init(&o);
    o.tp = tp;
    o.microbatch = b;
    o.seq = s;
    plumb_err err = {{0}};
    profile *p = llm_profile_build(t, c, cpath, &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cluster_free(c);
    return p;
}

static void expect_within(double got, double want, double rel, const char *what)
{
    cr_assert(fabs(got - want) <= rel * want, "%s: %.6g, expected %.6g within %.2g %%", what,
              got, want, 100 * rel);
}

/* ---- configs --------------------------------------------------------------------------- */

Test(llm, gpt2_parameters_exact)
{
    transformer *t = load_ok("examples/llm/gpt2.json");
    cr_assert_eq(transformer_param_count(t), 124439808LL, "got %lld",
                 transformer_param_count(t));
    cr_assert_eq(t->ffn, 3072); /* n_inner null: 4 h */
    cr_assert(t->tied_embeddings && t->learned_positions && t->dropout && !t->gated_mlp);
    cr_assert_str_eq(t->family, "gpt2");
    transformer_free(t);
}

Test(llm, published_parameter_counts)
{
    static const struct { const char *file; double published; } m[] = {
        {"examples/llm/gpt3-175b.json", 174.6e9},  {"examples/llm/llama3-8b.json", 8.03e9},
        {"examples/llm/llama3-70b.json", 70.6e9}, {"examples/llm/mistral-7b.json", 7.24e9}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        transformer *t = load_ok(m[i].file);
        expect_within((double)transformer_param_count(t), m[i].published, 0.005, m[i].file);
        transformer_free(t);
    }
}

Test(llm, llama_fields)
{
    transformer *t = load_ok("examples/llm/llama3-8b.json");
    cr_assert_eq(t->kv_heads, 8);
    cr_assert_eq(t->heads, 32);
    cr_assert(t->gated_mlp && !t->tied_embeddings && t->norm == TF_RMSNORM);
    cr_assert(!t->learned_positions && !t->qkv_bias && !t->dropout);
    cr_assert_eq(t->seq, 8192);
    transformer_free(t);
}

static void expect_bad(const char *text, const char *want)
{
    plumb_err err = {{0}};
    transformer *t = from_text(text, &err);
    cr_assert_null(t, "accepted: %s", text);
    cr_assert(strstr(err.msg, want), "message \"%s\" lacks \"%s\"", err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'), "more than one line: %s", err.msg);
}

Test(llm, missing_and_unknown_keys)
{
    expect_bad("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_positions\": 8, "
               "\"vocab_size\": 10}", "t.json: n_embd: missing");
    expect_bad("{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"max_position_embeddings\": 8, \"vocab_size\": 10}",
               "t.json: intermediate_size: missing");
    expect_bad("{\"model_type\": \"gpt2\", \"n_embd\": null, \"n_layer\": 2, \"n_head\": 2, "
               "\"n_positions\": 8, \"vocab_size\": 10}", "t.json: n_embd: missing");
    expect_bad("{\"model_type\": \"bert\"}", "t.json: model_type: unknown architecture");
    expect_bad("{\"architectures\": [\"T5ForConditionalGeneration\"]}",
               "t.json: architectures[0]: unknown architecture");
    expect_bad("{\"vocab_size\": 10}", "t.json: model_type: missing");
    expect_bad("{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 3, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10}",
               "t.json: num_attention_heads: expected a divisor");
    expect_bad("{\"model_type\": \"mistral\", \"hidden_size\": 8, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10}",
               "t.json: num_key_value_heads: expected a divisor");
    expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hiden_size\": 8}",
               "hiden_size");
    expect_bad("{\"format\": \"plumb-transformer/1\", \"name\": \"x\", \"hidden_size\": 8, "
               "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 8, "
               "\"max_position_embeddings\": 8, \"vocab_size\": 10, \"mlp\": \"tanh\"}",
               "t.json: mlp: expected one of gelu, relu, swiglu, geglu");
}

Test(llm, architectures_fallback_and_qwen2_bias)
{
    plumb_err err = {{0}};
    transformer *t = from_text(
        "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64, "
        "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
        "\"intermediate_size\": 128, \"max_position_embeddings\": 32, \"vocab_size\": 100, "
        "\"tie_word_embeddings\": true}", &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_str_eq(t->family, "qwen2");
    /* written out: q 64x64+64, k and v 64x32+32 each, o 64x64, MLP 3x64x128, 2 RMSNorms */
    long long block = (64 * 64 + 64) + 2 * (64 * 32 + 32) + 64 * 64 + 3 * 64 * 128 + 2 * 64;
    cr_assert_eq(transformer_block_params(t), block);
    cr_assert_eq(transformer_param_count(t), 100 * 64 + 2 * block + 64);
    transformer_free(t);
}

/* ---- FLOPs and memory closed forms ------------------------------------------------------ */

static double sum_flops(const profile *p)
{
    double f = 0;
    for (int i = 0; i < p->nlayers; i++) f += p->layers[i].flops;
    return f;
}

/* GPT-3 with the vocabulary Megatron pads it to (51200, divisible by 8): 3 x the forward
 * FLOPs of all ranks = 72 B s l h^2 (1 + s / 6h + V / (12 l h)) (Narayanan et al. 2021,
 * without recomputation). */
Test(llm, flops_match_narayanan_closed_form)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    t->vocab = 51200;
    for (int tp = 1; tp <= 8; tp *= 8) {
        double B = 2, s = 2048, l = 96, h = 12288, V = 51200;
        profile *p = build_ok(t, A100, tp, (int)B, (long long)s);
        double closed = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
        expect_within(3 * sum_flops(p) * tp, closed, 1e-12, "3 x forward FLOPs x tp");
        profile_free(p);
    }
    transformer_free(t);
}

/* Llama-3-8B (grouped-query attention, gated MLP): per block 2 s h (h + 2 kv d) + 4 s^2 h +
 * 2 s h^2 + 6 s h f, plus the head's 2 s h V, times the microbatch. */
Test(llm, flops_gqa_gated)
{
    transformer *t = load_ok("examples/llm/llama3-8b.json");
    double b = 3, s = 1024, h = 4096, f = 14336, V = 128256, kv = 8, d = 128, l = 32;
    profile *p = build_ok(t, A100, 1, (int)b, (long long)s);
    double block = 2 * s * h * (h + 2 * kv * d) + 4 * s * s * h + 2 * s * h * h + 6 * s * h * f;
    expect_within(sum_flops(p), b * (l * block + 2 * s * h * V), 1e-12, "forward FLOPs");
    expect_within(sum_flops(p) / b, transformer_forward_flops(&(transformer){
                  .hidden = 4096, .layers = 32, .heads = 32, .kv_heads = 8, .ffn = 14336,
                  .vocab = 128256, .seq = 1024, .gated_mlp = 1}), 1e-12, "per sequence");
    profile_free(p);
    transformer_free(t);
}

/* Korthikanti et al. 2022, eq. 2 (no sequence parallelism, no recomputation, 16-bit):
 * a block keeps s b h (10 + 24/t + 5 a s / (h t)) bytes, its input included. */
Test(llm, saved_bytes_match_korthikanti)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    double b = 1, s = 2048, h = 12288, a = 96;
    for (int tp = 1; tp <= 8; tp *= 2) {
        profile *p = build_ok(t, A100, tp, (int)b, (long long)s);
        const profile_layer *L = &p->layers[1];
        double want = s * b * h * (10 + 24.0 / tp + 5 * a * s / (h * tp));
        expect_within(L->activation_bytes + L->saved_bytes, want, 1e-12, "block bytes");
        /* the block's parameters, 2 bytes each, split t ways except norms and output biases */
        if (tp == 1)
            cr_assert_eq(L->parameter_bytes, 2.0 * transformer_block_params(t));
        profile_free(p);
    }
    transformer_free(t);
}

/* ---- the roofline ----------------------------------------------------------------------- */

Test(llm, gemm_efficiency_rises_to_plateau)
{
    cluster *c = cluster_ok(A100);
    const device_type *d = &c->types[0];
    double last = 0;
    for (double n = 16; n <= 32768; n *= 2) {
        double e = device_gemm_efficiency(d, DEV_BF16, 1, n, n, n, 0);
        cr_assert(e > last, "efficiency fell at n = %g: %g after %g", n, e, last);
        cr_assert(e > 0 && e <= d->eff.gemm, "efficiency %g at n = %g out of (0, %g]", e, n,
                  d->eff.gemm);
        last = e;
    }
    cr_assert(last > 0.99 * d->eff.gemm, "8192^3 reaches %g of the %g plateau", last,
              d->eff.gemm);
    last = 0;
    for (double k = 1; k <= 65536; k *= 4) { /* deeper products at one output shape */
        double e = device_gemm_efficiency(d, DEV_BF16, 1, 4096, 4096, k, 0);
        cr_assert(e > last && e <= d->eff.gemm);
        last = e;
    }
    double att = device_gemm_efficiency(d, DEV_BF16, 1024, 8192, 8192, 8192, 1);
    cr_assert(att <= d->eff.attention && att > 0.99 * d->eff.attention);
    cluster_free(c);
}

Test(llm, matrix_vector_is_bandwidth_bound)
{
    cluster *c = cluster_ok(A100);
    const device_type *d = &c->types[0];
    /* 1 x 8192 by 8192 x 8192 in bf16: 134 MB of weights for 134 MFLOP */
    double n = 8192, bytes = 2 * (n + n * n + n);
    /* the file's figures: 2039 GB/s, 312 TFLOP/s bf16, and its efficiencies */
    double em = d->eff.memory, eg = d->eff.gemm, ov = d->eff.kernel_overhead_s;
    cr_assert(em > 0 && eg > 0 && ov > 0);
    double want = bytes / (2039e9 * em) + ov;
    expect_within(device_gemm_s(d, DEV_BF16, 1, 1, n, n, 0), want, 1e-12, "GEMV time");
    cr_assert(device_gemm_efficiency(d, DEV_BF16, 1, 1, n, n, 0) < 0.01);
    /* a large square product is compute-bound: 2 n^3 / (312 TFLOP/s x gemm) + overhead */
    expect_within(device_gemm_s(d, DEV_BF16, 1, n, n, n, 0), 2 * n * n * n / (312e12 * eg) +
                  ov, 1e-12, "GEMM time");
    cluster_free(c);
}

/* ---- the profile ------------------------------------------------------------------------ */

Test(llm, profile_round_trips_and_splits_backward)
{
    transformer *t = load_ok("examples/llm/llama3-70b.json");
    profile *p = build_ok(t, "profiles/clusters/dgx-h100.json", 8, 1, 4096);
    cr_assert_eq(p->nlayers, 82);
    cr_assert_str_eq(p->layers[0].kind, "Embedding");
    cr_assert_str_eq(p->layers[81].kind, "LMHead");
    for (int i = 1; i <= 80; i++) {
        const profile_layer *L = &p->layers[i];
        cr_assert(L->forward_ms > 0 && L->backward_input_ms > 0 && L->backward_weight_ms > 0);
        /* the weight-gradient half is the forward's projections again: under the forward */
        cr_assert(L->backward_weight_ms < L->forward_ms);
        cr_assert(L->backward_ms > 1.5 * L->forward_ms && L->backward_ms < 3 * L->forward_ms);
    }
    char *dir = make_tmpdir_named("llm");
    char path[256];
    snprintf(path, sizeof path, "%s/p.json", dir);
    plumb_err err = {{0}};
    cr_assert_eq(profile_save(p, path, &err), 0, "%s", err.msg);
    profile *q = profile_load(path, &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    profile_free(q);
    remove(path);
    rmdir(dir);
    free(dir);
    profile_free(p);
    transformer_free(t);
}

/* Transformer Engine's fused cross-entropy (--cross-entropy te) streams 3 e bytes a logit
 * in 2 kernels forward and 2 e in 1 backward where the unfused loss streams e + 36 in 6 and
 * 12 + e in 2: Llama 3 70B's head at TP 4, bf16, 8192 tokens (32064 vocabulary rows a
 * rank) is 42 bytes a logit cheaper, everything else the same; it keeps the logits at e bytes
 * (their gradient, in place) instead of the fp32 probabilities, and needs no scratch. */
Test(llm, te_cross_entropy_streams_fewer_bytes)
{
    transformer *t = load_ok("examples/llm/llama3-70b.json");
    const char *cpath = "profiles/clusters/dgx-h100.json";
    cluster *c = cluster_ok(cpath);
    llm_options o;
    llm_options_init(&o);
    o.tp = 4;
    o.seq = 8192;
    plumb_err err = {{0}};
    profile *u = llm_profile_build(t, c, cpath, &o, &err);
    cr_assert_not_null(u, "%s", err.msg);
    o.cross_entropy = LLM_CE_TE;
    profile *f = llm_profile_build(t, c, cpath, &o, &err);
    cr_assert_not_null(f, "%s", err.msg);
    const device_type *d = &c->types[0];
    double logits = 8192.0 * 32064, e = 2;
    const profile_layer *hu = &u->layers[81], *hf = &f->layers[81];
    double dfwd = device_stream_s(d, logits * (e + 36), 6) - device_stream_s(d, logits * 3 * e, 2);
    double dbwd = device_stream_s(d, logits * (12 + e), 2) - device_stream_s(d, logits * 2 * e, 1);
    expect_within(hu->forward_ms - hf->forward_ms, dfwd * 1e3, 1e-9, "forward saved (ms)");
    expect_within(hu->backward_input_ms - hf->backward_input_ms, dbwd * 1e3, 1e-9,
                  "backward saved (ms)");
    cr_assert_eq(hu->backward_weight_ms, hf->backward_weight_ms);
    cr_assert_eq(hu->flops, hf->flops);
    expect_within(hu->saved_bytes - hf->saved_bytes, logits * (4 - e), 1e-12, "kept bytes");
    cr_assert_eq(hf->workspace_bytes, 0);
    cr_assert_eq(hu->workspace_bytes, logits * e);
    for (int i = 0; i < 81; i++) /* the embedding and the blocks are the same */
        cr_assert_eq(u->layers[i].forward_ms, f->layers[i].forward_ms);
    llm_cross_entropy ce;
    cr_assert_eq(llm_cross_entropy_parse("te", &ce), 0);
    cr_assert_eq(ce, LLM_CE_TE);
    cr_assert_eq(llm_cross_entropy_parse("unfused", &ce), 0);
    cr_assert_eq(ce, LLM_CE_UNFUSED);
    cr_assert_eq(llm_cross_entropy_parse("native", &ce), 0);
    cr_assert_eq(ce, LLM_CE_NATIVE);
    cr_assert_eq(llm_cross_entropy_parse("fused", &ce), -1);
    cr_assert_str_eq(llm_cross_entropy_name(LLM_CE_TE), "te");
    cr_assert_str_eq(llm_cross_entropy_name(LLM_CE_NATIVE), "native");
    profile_free(u);
    profile_free(f);
    cluster_free(c);
    transformer_free(t);
}

/* The unfused gradient accumulation (--grad-accum unfused) adds to each layer's weight-
 * gradient time one streaming pass over its parameters on the rank, at A100's 2039 GB/s
 * x memory efficiency 0.6 (dgx-a100-80g.json), plus 5 us a parameter tensor, and nothing
 * else. Counted here from the model's shape, not the planner's: GPT 530B (h 20480, 105
 * layers, LayerNorm, biases everywhere, vocabulary 51200, 2048 learned positions, tied) at
 * TP 8 in fp16, 2 + 2 + 2 bytes a parameter (Megatron-LM keeps fp16 main gradients without
 * --accumulate-allreduce-grads-in-fp32): a block 12 h^2 / 8 + 7 h / 8 split + 6 h whole in
 * 12 tensors, the embedding (51200 / 8 + 2048) h in 2, the head 51200 / 8 h + 2 h in 3;
 * Llama 3 70B (h 8192, 64 heads of 128, 8 key/value heads, gated MLP of 28672, RMSNorm, no
 * biases) at TP 8 in bf16, 2 + 4 + 4 bytes: a block (8192 (64 + 16) 128 + 64 128 8192 +
 * 3 8192 28672) / 8 + 2 8192 in 6 tensors. Fused (the default) is the profile as before. */
Test(llm, unfused_grad_accum_adds_one_pass_per_backward)
{
    struct {
        const char *model;
        dev_precision prec;
        double block, emb, head, bytes; /* parameters a rank; bytes a parameter */
        int tensors[3];                 /* of a block, the embedding, the head */
    } set[] = {
        {"examples/llm/megatron/gpt-530b.json", DEV_FP16,
         12.0 * 20480 * 20480 / 8 + 7.0 * 20480 / 8 + 6.0 * 20480, (51200.0 / 8 + 2048) * 20480,
         51200.0 / 8 * 20480 + 2.0 * 20480, 6, {12, 2, 3}},
        {"examples/llm/llama3-70b.json", DEV_BF16,
         (8192.0 * 80 * 128 + 64.0 * 128 * 8192 + 3.0 * 8192 * 28672) / 8 + 2.0 * 8192,
         128256.0 / 8 * 8192, 128256.0 / 8 * 8192 + 8192, 10, {6, 1, 2}},
    };
    cluster *c = cluster_ok(A100);
    for (int k = 0; k < 2; k++) {
        transformer *t = load_ok(set[k].model);
        llm_options o;
        llm_options_init(&o);
        o.tp = 8;
        o.seq = 2048;
        o.precision = set[k].prec;
        plumb_err err = {{0}};
        profile *f = llm_profile_build(t, c, A100, &o, &err);
        cr_assert_not_null(f, "%s", err.msg);
        o.grad_accum = LLM_GA_FUSED; /* said: the same profile */
        profile *f2 = llm_profile_build(t, c, A100, &o, &err);
        cr_assert(profile_equal(f, f2), "%s: fused said differs from the default", set[k].model);
        o.grad_accum = LLM_GA_UNFUSED;
        profile *u = llm_profile_build(t, c, A100, &o, &err);
        cr_assert_not_null(u, "%s", err.msg);
        cr_assert_eq(f->grad_accum, 0);
        cr_assert_eq(u->grad_accum, 1);
        int head = f->nlayers - 1;
        for (int i = 0; i < f->nlayers; i++) {
            int which = i == 0 ? 1 : i == head ? 2 : 0;
            double params = which == 1 ? set[k].emb : which == 2 ? set[k].head : set[k].block;
            double want = params * set[k].bytes / (2039e9 * 0.6) + set[k].tensors[which] * 5e-6;
            const profile_layer *a = &f->layers[i], *b = &u->layers[i];
            expect_within(b->backward_weight_ms - a->backward_weight_ms, want * 1e3, 1e-9,
                          "added W (ms)");
            expect_within(b->backward_ms - a->backward_ms, want * 1e3, 1e-9, "added backward");
            cr_assert_eq(a->forward_ms, b->forward_ms);
            cr_assert_eq(a->backward_input_ms, b->backward_input_ms);
            cr_assert_eq(a->parameter_bytes, b->parameter_bytes);
            cr_assert_eq(a->saved_bytes, b->saved_bytes);
        }
        profile_free(f);
        profile_free(f2);
        profile_free(u);
        transformer_free(t);
    }
    cr_assert_eq(llm_grad_accum_bytes(DEV_FP16), 6);
    cr_assert_eq(llm_grad_accum_bytes(DEV_BF16), 10);
    cr_assert_eq(llm_grad_accum_bytes(DEV_FP8), 10);
    cr_assert_eq(llm_grad_accum_bytes(DEV_FP32), 12);
    llm_grad_accum g;
    cr_assert_eq(llm_grad_accum_parse("unfused", &g), 0);
    cr_assert_eq(g, LLM_GA_UNFUSED);
    cr_assert_eq(llm_grad_accum_parse("fused", &g), 0);
    cr_assert_eq(g, LLM_GA_FUSED);
    cr_assert_eq(llm_grad_accum_parse("foo", &g), -1);
    cr_assert_str_eq(llm_grad_accum_name(LLM_GA_UNFUSED), "unfused");
    cluster_free(c);
}

/* Megatron-Core's fused loss (cross_entropy_fusion_impl "native"), NeMo 25.02's GPT-3 175B
 * (TP 4, microbatch 2, sequence 2048): by hand, forward the fp32 copy with the row maximum
 * (e + 4 bytes a logit), subtraction, exp and sum into the copy (8) and the division (8) in
 * 3 kernels against the unfused loss's e + 36 in 6; backward the gradient written into the
 * saved probabilities and cast to bf16 (8 + e) in 1 kernel against 12 + e in 2. It keeps
 * the fp32 probabilities and needs the logits beside their copy, as the unfused loss. */
Test(llm, native_cross_entropy_streams_fewer_bytes)
{
    transformer *t = load_ok("examples/llm/nemo/gpt3-175b-v50688.json");
    const char *cpath = "profiles/clusters/dgx-h100.json";
    cluster *c = cluster_ok(cpath);
    llm_options o;
    llm_options_init(&o);
    o.tp = 4;
    o.microbatch = 2;
    plumb_err err = {{0}};
    profile *u = llm_profile_build(t, c, cpath, &o, &err);
    cr_assert_not_null(u, "%s", err.msg);
    o.cross_entropy = LLM_CE_NATIVE;
    profile *f = llm_profile_build(t, c, cpath, &o, &err);
    cr_assert_not_null(f, "%s", err.msg);
    const device_type *d = &c->types[0];
    double logits = 2 * 2048.0 * (50688 / 4), e = 2;
    const profile_layer *hu = &u->layers[97], *hf = &f->layers[97];
    cr_assert_str_eq(hf->kind, "LMHead");
    double dfwd = device_stream_s(d, logits * (e + 36), 6) -
                  device_stream_s(d, logits * ((e + 4) + 8 + 8), 3);
    double dbwd = device_stream_s(d, logits * (12 + e), 2) - device_stream_s(d, logits * (8 + e), 1);
    cr_assert_gt(dfwd, 0);
    cr_assert_gt(dbwd, 0);
    expect_within(hu->forward_ms - hf->forward_ms, dfwd * 1e3, 1e-9, "forward saved (ms)");
    expect_within(hu->backward_input_ms - hf->backward_input_ms, dbwd * 1e3, 1e-9,
                  "backward saved (ms)");
    cr_assert_eq(hu->backward_weight_ms, hf->backward_weight_ms);
    cr_assert_eq(hu->flops, hf->flops);
    cr_assert_eq(hu->saved_bytes, hf->saved_bytes);
    cr_assert_eq(hf->workspace_bytes, logits * e);
    cr_assert_eq(hu->workspace_bytes, hf->workspace_bytes);
    for (int i = 0; i < 97; i++) /* the embedding and the blocks are the same */
        cr_assert_eq(u->layers[i].forward_ms, f->layers[i].forward_ms);
    profile_free(u);
    profile_free(f);
    cluster_free(c);
    transformer_free(t);
}

Test(llm, option_errors_name_the_option)
{
    static const struct { const char *model; int tp; long long seq; const char *want; } c[] = {
        {"examples/llm/gpt3-175b.json", 5, 0, "--tp: expected a divisor of the 96 attention"},
        {"examples/llm/llama3-8b.json", 16, 0, "--tp: expected a divisor of the 8 key/value"},
        {"examples/llm/gpt2.json", 1, 2048, "--seq-len: expected 1 to the model's 1024"},
    };
    cluster *cl = cluster_ok(A100);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        transformer *t = load_ok(c[i].model);
        llm_options o;
        llm_options_init(&o);
        o.tp = c[i].tp;
        o.seq = c[i].seq;
        plumb_err err = {{0}};
        cr_assert_null(llm_profile_build(t, cl, A100, &o, &err));
        cr_assert(strstr(err.msg, c[i].want), "\"%s\" lacks \"%s\"", err.msg, c[i].want);
        transformer_free(t);
    }
    cluster_free(cl);
    /* a cluster file without the figures: the first missing one is named */
    transformer *t = load_ok("examples/llm/gpt2.json");
    cluster *old = cluster_ok("profiles/clusters/h200-4x8.json");
    llm_options o;
    llm_options_init(&o);
    plumb_err err = {{0}};
    cr_assert_null(llm_profile_build(t, old, "h.json", &o, &err));
    cr_assert(strstr(err.msg, "h.json: device_types[0].peak_tflops_by_precision.bf16: missing"),
              "%s", err.msg);
    cluster_free(old);
    transformer_free(t);
}

/* ---- clusters ---------------------------------------------------------------------------- */

Test(llm, dgx_files_carry_datasheet_figures)
{
    static const struct { const char *file; double bf16, bw; int n; } f[] = {
        {A100, 312e12, 2039e9, 3072},
        {"profiles/clusters/dgx-h100.json", 989.4e12, 3350e9, 4096},
        {"profiles/clusters/dgx-h200.json", 989.4e12, 4800e9, 4096}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        cluster *c = cluster_ok(f[i].file);
        cr_assert_eq(c->ndevices, f[i].n);
        cr_assert_eq(c->types[0].peak_flops_prec[DEV_BF16], f[i].bf16);
        cr_assert_eq(c->types[0].memory_Bps, f[i].bw);
        cr_assert_eq(c->levels[0].count, 8);
        cluster_free(c);
    }
}

static cluster *cluster_text(const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text("c.json", text, strlen(text), err);
    if (!root) return NULL;
    cluster *c = cluster_from_json(root, "c.json", err);
    cJSON_Delete(root);
    return c;
}

#define CL_HEAD "{\"format\": \"plumb-cluster/1\", \"name\": \"x\", \"levels\": [{\"name\": " \
    "\"nv\", \"count\": 8, \"bandwidth_gbit_per_s\": 100, \"latency_us\": 1}], "         \
    "\"device_type\": \"g\", \"device_types\": [{\"name\": \"g\", \"memory_gib\": 8, "   \
    "\"speed\": 1, "

Test(llm, device_figures_validated_and_round_trip)
{
    static const struct { const char *tail, *want; } bad[] = {
        {"\"efficiency\": {\"gemm\": 1.5, \"attention\": 0.5, \"memory\": 0.5, "
         "\"kernel_overhead_us\": 1}}]}", "c.json: device_types[0].efficiency.gemm: expected a "
         "fraction"},
        {"\"efficiency\": {\"gemm\": 0.5, \"attention\": 0.5, \"kernel_overhead_us\": 1}}]}",
         "c.json: device_types[0].efficiency.memory: missing"},
        {"\"peak_tflops_by_precision\": {\"int8\": 1}}]}",
         "c.json: device_types[0].peak_tflops_by_precision.int8"},
        {"\"efficiency\": {\"gemm\": 0.5, \"attention\": 0.5, \"memory\": 0.5, "
         "\"kernel_overhead_us\": 1, \"gemm_fp8\": 1.5}}]}",
         "c.json: device_types[0].efficiency.gemm_fp8: expected a fraction"},
        {"\"memory_gbyte_per_s\": -3}]}", "c.json: device_types[0].memory_gbyte_per_s"},
        {"\"gemm_tiling\": {\"sms\": 0, \"tile_m\": 128, \"tile_n\": 256}}]}",
         "c.json: device_types[0].gemm_tiling.sms"},
        {"\"gemm_tiling\": {\"sms\": 132, \"tile_m\": 128}}]}",
         "c.json: device_types[0].gemm_tiling.tile_n: missing"},
        {"\"gemm_tiling\": {\"sms\": 132, \"tile_m\": 128.5, \"tile_n\": 256}}]}",
         "c.json: device_types[0].gemm_tiling.tile_m"},
        {"\"gemm_tiling\": {\"sms\": 132, \"tile_m\": 128, \"tile_n\": 256, "
         "\"tile_k\": 64}}]}", "c.json: device_types[0].gemm_tiling.tile_k"},
        {"\"gemm_tiling\": 132}]}", "c.json: device_types[0].gemm_tiling"},
    };
    char text[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "%s%s", CL_HEAD, bad[i].tail);
        plumb_err err = {{0}};
        cr_assert_null(cluster_text(text, &err), "accepted %s", text);
        cr_assert(strstr(err.msg, bad[i].want), "\"%s\" lacks \"%s\"", err.msg, bad[i].want);
    }
    cluster *c = cluster_ok("profiles/clusters/dgx-h200.json");
    char *dir = make_tmpdir_named("llm");
    char path[256];
    snprintf(path, sizeof path, "%s/c.json", dir);
    plumb_err err = {{0}};
    cr_assert_eq(cluster_save(c, path, &err), 0, "%s", err.msg);
    cluster *d = cluster_ok(path);
    cr_assert(cluster_equal(c, d));
    d->types[0].eff.attention = 0.25;
    cr_assert(!cluster_equal(c, d), "a changed efficiency compares equal");
    cluster_free(d);
    /* a device's tiling: read, saved, read back equal; a changed or dropped one differs */
    c->types[0].tiling = (device_tiling){132, 128, 256};
    cr_assert_eq(cluster_save(c, path, &err), 0, "%s", err.msg);
    d = cluster_ok(path);
    cr_assert_eq(d->types[0].tiling.sms, 132);
    cr_assert_eq(d->types[0].tiling.tile_n, 256);
    cr_assert(cluster_equal(c, d));
    d->types[0].tiling.tile_n = 128;
    cr_assert(!cluster_equal(c, d), "a changed tile compares equal");
    d->types[0].tiling.sms = 0;
    cr_assert(!cluster_equal(c, d), "a dropped tiling compares equal");
    cluster_free(d);
    cluster_free(c);
    remove(path);
    rmdir(dir);
    free(dir);
}

Test(llm, take_gpus_whole_servers)
{
    cluster *c = cluster_ok(A100);
    plumb_err err = {{0}};
    cluster *d = cluster_take_gpus(c, 64, A100, &err);
    cr_assert_not_null(d, "%s", err.msg);
    cr_assert_eq(d->ndevices, 64);
    cr_assert_eq(d->nlevels, 2);
    cr_assert_eq(d->levels[1].count, 8);
    cr_assert_eq(d->levels[1].egress_Bps, c->levels[1].egress_Bps);
    cluster_free(d);
    d = cluster_take_gpus(c, 8, A100, &err); /* one server keeps its InfiniBand, 1 server */
    cr_assert_not_null(d, "%s", err.msg);
    cr_assert_eq(d->nlevels, 2);
    cr_assert_eq(d->levels[1].count, 1);
    cr_assert_eq(d->levels[1].bandwidth_Bps, c->levels[1].bandwidth_Bps);
    cr_assert_eq(d->ndevices, 8);
    cluster_free(d);
    cr_assert_null(cluster_take_gpus(c, 12, A100, &err));
    cr_assert(strstr(err.msg, "--gpus: expected a multiple of the 8 devices per server (got 12)"),
              "%s", err.msg);
    cr_assert_null(cluster_take_gpus(c, 3080, A100, &err));
    cr_assert(strstr(err.msg, "at most the cluster's 3072 devices"), "%s", err.msg);
    cluster_free(c);
    /* three levels (8 per server, 4 servers per rack, 10 racks), two device types */
    const char *three =
        "{\"format\": \"plumb-cluster/1\", \"name\": \"r\", \"levels\": ["
        "{\"name\": \"nv\", \"count\": 8, \"bandwidth_gbit_per_s\": 100, \"latency_us\": 1},"
        "{\"name\": \"rack\", \"count\": 4, \"bandwidth_gbit_per_s\": 50, \"latency_us\": 1},"
        "{\"name\": \"spine\", \"count\": 10, \"bandwidth_gbit_per_s\": 10, \"latency_us\": 1}],"
        "\"device_types\": [{\"name\": \"a\", \"memory_gib\": 8, \"speed\": 1},"
        "{\"name\": \"b\", \"memory_gib\": 4, \"speed\": 1}],"
        "\"servers\": [{\"device_type\": \"b\", \"count\": 1}, {\"device_type\": \"a\", "
        "\"count\": 39}]}";
    c = cluster_text(three, &err);
    cr_assert_not_null(c, "%s", err.msg);
    d = cluster_take_gpus(c, 64, "r.json", &err); /* two racks */
    cr_assert_not_null(d, "%s", err.msg);
    cr_assert_eq(d->nlevels, 3);
    cr_assert_eq(d->levels[1].count, 4);
    cr_assert_eq(d->levels[2].count, 2);
    cr_assert_eq(d->server_type[0], 1);
    cr_assert_eq(d->server_type[7], 0);
    cluster_free(d);
    d = cluster_take_gpus(c, 16, "r.json", &err); /* two servers of one rack */
    cr_assert_not_null(d, "%s", err.msg);
    cr_assert_eq(d->nlevels, 2);
    cr_assert_eq(d->levels[1].count, 2);
    cluster_free(d);
    cr_assert_null(cluster_take_gpus(c, 40, "r.json", &err)); /* 5 servers: 1.25 racks */
    cr_assert(strstr(err.msg, "r.json: --gpus: expected a multiple of the 32 devices per rack"),
              "%s", err.msg);
    cluster_free(c);
}

/* The profile's times are the device's own times multiplied by its speed (planning divides
 * by it); fp32 uses the fp32 peak and 4-byte elements; a cluster of two device types is
 * refused. */
Test(llm, speed_precision_and_one_device_type)
{
    transformer *t = load_ok("examples/llm/gpt2.json");
    cluster *c = cluster_ok(A100);
    llm_options o;
    llm_options_init(&o);
    plumb_err err = {{0}};
    profile *p1 = llm_profile_build(t, c, A100, &o, &err);
    c->types[0].speed = 2;
    profile *p2 = llm_profile_build(t, c, A100, &o, &err);
    cr_assert(p1 && p2, "%s", err.msg);
    for (int i = 0; i < p1->nlayers; i++) {
        cr_assert_eq(p2->layers[i].forward_ms, 2 * p1->layers[i].forward_ms);
        cr_assert_eq(p2->layers[i].backward_weight_ms, 2 * p1->layers[i].backward_weight_ms);
    }
    c->types[0].speed = 1;
    o.precision = DEV_FP32;
    profile *p3 = llm_profile_build(t, c, A100, &o, &err);
    cr_assert_not_null(p3, "%s", err.msg);
    cr_assert_eq(p3->layers[1].activation_bytes, 2 * p1->layers[1].activation_bytes);
    cr_assert_eq(p3->layers[1].parameter_bytes, 2 * p1->layers[1].parameter_bytes);
    /* compute-bound projections at 19.5 instead of 312 TFLOP/s: far slower */
    cr_assert(p3->layers[1].forward_ms > 5 * p1->layers[1].forward_ms);
    profile_free(p1);
    profile_free(p2);
    profile_free(p3);
    cluster_free(c);
    c = cluster_ok("profiles/clusters/hetero-2xh200-2xv100.json");
    o.precision = DEV_BF16;
    cr_assert_null(llm_profile_build(t, c, "het.json", &o, &err));
    cr_assert(strstr(err.msg, "het.json: servers: expected one device type"), "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
}

static profile *build_opts_on(const transformer *t, const llm_options *o, const char *file)
{
    cluster *c = cluster_ok(file);
    plumb_err err = {{0}};
    profile *p = llm_profile_build(t, c, file, o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cluster_free(c);
    return p;
}

static profile *build_opts(const transformer *t, const llm_options *o)
{
    return build_opts_on(t, o, A100);
}

/* Megatron-LM's tensor parallelism: per block two collectives of B S h elements forward and
 * two backward, the vocabulary-parallel embedding one forward, the head's input gradient one
 * backward; none at T = 1. The profile says its tp, sequence parallelism and tokens. */
Test(llm, tensor_parallel_collectives)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    llm_options o;
    llm_options_init(&o);
    o.seq = 1024;
    profile *p = build_opts(t, &o);
    cr_assert_eq(p->tp, 1);
    cr_assert_eq(p->tokens_per_sample, 1024);
    for (int i = 0; i < p->nlayers; i++) {
        cr_assert_eq(p->layers[i].tp_forward_collectives, 0);
        cr_assert_eq(p->layers[i].tp_backward_collectives, 0);
        cr_assert_eq(p->layers[i].tp_collective_bytes, 0);
    }
    profile_free(p);
    o.tp = 8;
    o.microbatch = 4;
    for (int sp = 0; sp <= 1; sp++) {
        o.sequence_parallel = sp;
        p = build_opts(t, &o);
        cr_assert_eq(p->tp, 8);
        cr_assert_eq(p->sequence_parallel, sp);
        cr_assert_eq(p->tokens_per_sample, 1024);
        double bytes = 4.0 * 1024 * 12288 * 2;
        int want[3][2] = {{1, 0}, {2, 2}, {0, 1}};
        for (int i = 0; i < p->nlayers; i++) {
            const profile_layer *L = &p->layers[i];
            int k = i == 0 ? 0 : i == p->nlayers - 1 ? 2 : 1;
            cr_assert_eq(L->tp_forward_collectives, want[k][0], "layer %d", i);
            cr_assert_eq(L->tp_backward_collectives, want[k][1], "layer %d", i);
            cr_assert_eq(L->tp_collective_bytes, bytes, "layer %d", i);
        }
        profile_free(p);
    }
    transformer_free(t);
}

/* Korthikanti et al. 2022, Table 2: with sequence parallelism a block keeps
 * s b h / t (34 + 5 a s / h); with selective recomputation the 5 a s / h term (the attention
 * core's softmax output, dropout mask and output) goes: s b h (10 + 24 / t) without sequence
 * parallelism, 34 s b h / t with it. The embedding's output and dropout mask are one rank's
 * share with sequence parallelism. */
Test(llm, sequence_parallel_and_selective_match_korthikanti)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    double b = 2, s = 2048, h = 12288, a = 96;
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int sp = 0; sp <= (tp > 1); sp++) {
            llm_options o;
            llm_options_init(&o);
            o.tp = tp;
            o.microbatch = (int)b;
            o.seq = (long long)s;
            o.sequence_parallel = sp;
            profile *p = build_opts(t, &o);
            const profile_layer *L = &p->layers[1], *E = &p->layers[0];
            double sbh = s * b * h, full, sel;
            if (sp) {
                full = sbh / tp * (34 + 5 * a * s / h);
                sel = 34 * sbh / tp;
            } else {
                full = sbh * (10 + 24.0 / tp + 5 * a * s / (h * tp));
                sel = sbh * (10 + 24.0 / tp);
            }
            expect_within(L->activation_bytes + L->saved_bytes, full, 1e-12, "block bytes");
            expect_within(L->activation_bytes + L->selective_saved_bytes, sel, 1e-12,
                          "selective block bytes");
            expect_within(E->activation_bytes, 2 * sbh / (sp ? tp : 1), 1e-12, "embedding");
            expect_within(E->saved_bytes, sbh / (sp ? tp : 1), 1e-12, "embedding mask");
            cr_assert_lt(E->selective_recompute_ms, 0);
            cr_assert_lt(p->layers[p->nlayers - 1].selective_saved_bytes, 0);
            plumb_err err = {{0}}; /* the new fields survive the file */
            cJSON *j = profile_to_json(p);
            profile *q = j ? profile_from_json(j, "p.json", &err) : NULL;
            cr_assert_not_null(q, "%s", err.msg);
            cr_assert(profile_equal(p, q));
            cJSON_Delete(j);
            profile_free(q);
            profile_free(p);
        }
    transformer_free(t);
}

/* The selective part's time is the attention core's forward, replayed here from the
 * roofline: the two batched multiplies, the softmax (read and write the probabilities)
 * and the dropout (read them, write a one-byte mask and the output). */
Test(llm, selective_recompute_time_is_attention_core)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    cluster *c = cluster_ok(A100);
    llm_options o;
    llm_options_init(&o);
    o.tp = 8;
    o.seq = 2048;
    profile *p = build_opts(t, &o);
    const device_type *dev = &c->types[c->server_type[0]];
    double batch = 96 / 8, s = 2048, d = 128, probs = batch * s * s;
    double want = device_gemm_s(dev, DEV_BF16, batch, s, s, d, 1) +
                  device_gemm_s(dev, DEV_BF16, batch, s, d, s, 1) +
                  (2 * probs * 2 + probs * 3) / (dev->memory_Bps * dev->eff.memory) +
                  dev->eff.kernel_overhead_s;
    expect_within(p->layers[1].selective_recompute_ms, want * 1e3 * dev->speed, 1e-12,
                  "attention core");
    cr_assert_lt(p->layers[1].selective_recompute_ms, p->layers[1].forward_ms / 2);
    profile_free(p);
    cluster_free(c);
    transformer_free(t);
}

/* Sequence parallelism without tensor parallelism is refused, naming the option. */
Test(llm, sequence_parallel_needs_tp)
{
    transformer *t = load_ok("examples/llm/gpt3-175b.json");
    cluster *c = cluster_ok(A100);
    llm_options o;
    llm_options_init(&o);
    o.sequence_parallel = 1;
    plumb_err err = {{0}};
    cr_assert_null(llm_profile_build(t, c, A100, &o, &err));
    cr_assert(strstr(err.msg, "--sequence-parallel: expected --tp 2 or more"), "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
}

/* ---- fused attention, gated MLPs, the head ----------------------------------------------- */

/* Fused (flash) attention keeps no s x s tensor: a GPT block keeps s b h (10 + 24/t) bytes
 * (selective recomputation's figure) plus the softmax statistics, one fp32 per row of
 * scores (4 a s b / t bytes), and selective recomputation has nothing left to recompute.
 * It is one kernel each way on the attention plateau, priced on half the scores (causal):
 * forward 2 multiplies of 2 s^2 d per head moving Q, K, V, O and the statistics, backward
 * 5 multiplies (S again, dP, dV, dQ, dK) moving Q, K, V, O, dO, dQ, dK, dV and two fp32 per
 * row, plus the D = rowsum(dO o O) kernel; no probabilities, no softmax kernel. The FLOPs
 * stay the forward's full count. Replayed here from the roofline, written out for the fused
 * kernels and through device_gemm_s for standard attention's multiplies: GPT-3 175B on A100
 * at sequence 2048 and the README's 177B on H100 at 4096, where both fused kernels must come
 * out compute-bound (before, their per-multiply s x s bytes made them memory-bound). */
static double roof(const device_type *dev, double flops, double plateau, double bytes)
{
    double c = flops / (dev->peak_flops_prec[DEV_BF16] * plateau);
    double m = bytes / (dev->memory_Bps * dev->eff.memory);
    return (c > m ? c : m) + dev->eff.kernel_overhead_s;
}

static void check_flash(const char *model, const char *file, double s)
{
    transformer *t = load_ok(model);
    cluster *c = cluster_ok(file);
    const device_type *dev = &c->types[c->server_type[0]];
    double b = 2, h = 12288, a = 96, d = 128, e = 2;
    for (int tp = 1; tp <= 8; tp *= 4) {
        llm_options o;
        llm_options_init(&o);
        o.tp = tp;
        o.microbatch = (int)b;
        o.seq = (long long)s;
        profile *std = build_opts_on(t, &o, file);
        o.attention = LLM_ATTN_FLASH;
        profile *fl = build_opts_on(t, &o, file);
        const profile_layer *F = &fl->layers[1], *S = &std->layers[1];
        double sbh = s * b * h;
        expect_within(F->activation_bytes + F->saved_bytes,
                      sbh * (10 + 24.0 / tp) + 4 * a * s * b / tp, 1e-12, "flash block bytes");
        cr_assert_eq(F->selective_saved_bytes, F->saved_bytes);
        cr_assert_eq(F->selective_recompute_ms, 0);
        cr_assert_eq(F->flops, S->flops);
        double at = a / tp, heads = b * at, probs = heads * s * s;
        double BW = dev->memory_Bps * dev->eff.memory, att = dev->eff.attention;
        double ko = dev->eff.kernel_overhead_s, ms = 1e3 * dev->speed;
        double mult = 2 * heads * s * s * d; /* one s x s x d multiply, all heads */
        double fwd = roof(dev, mult, att, heads * (4 * s * d * e + 4 * s));
        double bwd = roof(dev, 2.5 * mult, att, heads * (8 * s * d * e + 8 * s));
        /* compute-bound: the fused kernels' time is their (causal) FLOPs on the plateau */
        double peak = dev->peak_flops_prec[DEV_BF16] * att;
        expect_within(fwd, mult / peak + ko, 1e-12, "forward compute-bound");
        expect_within(bwd, 2.5 * mult / peak + ko, 1e-12, "backward compute-bound");
        double s2 = 2 * probs * e + probs * 3; /* softmax read + write, dropout mask + out */
        double scores = device_gemm_s(dev, DEV_BF16, heads, s, s, d, 1);
        double values = device_gemm_s(dev, DEV_BF16, heads, s, d, s, 1);
        expect_within(S->forward_ms - F->forward_ms,
                      (scores + values + s2 / BW + ko - fwd) * ms, 1e-9, "forward");
        double pre = (2 * s * b * at * d * e + 4 * s * b * at) / BW + ko; /* D = rowsum */
        expect_within(S->backward_input_ms - F->backward_input_ms,
                      (scores + 3 * values + 2 * (s2 / BW + ko) - bwd - pre) * ms, 1e-9,
                      "backward");
        cr_assert_eq(F->backward_weight_ms, S->backward_weight_ms);
        cr_assert(strstr(fl->source, "flash attention") != NULL, "%s", fl->source);
        profile_free(std);
        profile_free(fl);
    }
    cluster_free(c);
    transformer_free(t);
}

Test(llm, flash_attention_bytes_and_times)
{
    check_flash("examples/llm/gpt3-175b.json", A100, 2048);
    check_flash("examples/llm/megatron-h100/gpt-177b.json", "profiles/clusters/dgx-h100.json",
                4096);
    llm_attention k;
    cr_assert_eq(llm_attention_parse("flash", &k), 0);
    cr_assert_eq(k, LLM_ATTN_FLASH);
    cr_assert_eq(llm_attention_parse("standard", &k), 0);
    cr_assert_eq(k, LLM_ATTN_STANDARD);
    cr_assert_neq(llm_attention_parse("fused", &k), 0);
    cr_assert_str_eq(llm_attention_name(LLM_ATTN_FLASH), "flash");
}

/* A gated MLP computed as act(a) * b keeps four f-wide tensors (the first projection's 2f
 * output, the activation's output, the product); with grouped-query attention the keys
 * and values are kv d wide. Llama 3 8B (no dropout, rotary positions), flash attention:
 * input h + norms 3 h + queries h + keys and values 2 kv d + projection input h + 4 f, in
 * bf16, plus the statistics. */
Test(llm, gated_mlp_and_gqa_bytes)
{
    transformer *t = load_ok("examples/llm/llama3-8b.json");
    llm_options o;
    llm_options_init(&o);
    o.tp = 2;
    o.microbatch = 1;
    o.seq = 4096;
    o.attention = LLM_ATTN_FLASH;
    profile *p = build_opts(t, &o);
    double s = 4096, h = 4096, f = 14336, kvd = 8 * 128, a = 32, tp = 2;
    double want = 2 * s * (h + 3 * h + (h + 2 * kvd + h + 4 * f) / tp) + 4 * a * s / tp;
    expect_within(p->layers[1].activation_bytes + p->layers[1].saved_bytes, want, 1e-12,
                  "llama block bytes");
    profile_free(p);
    transformer_free(t);
}

/* The head's cross-entropy as Megatron-Core's vocabulary-parallel one runs it, one kernel
 * per pass over the L = b s V / t logits (bytes per logit): forward the fp32 copy (e + 4),
 * the row maximum (4), its subtraction (4 + 4), exp (4 + 4), the row sum (4), the division
 * (4 + 4); backward the product with the loss's gradient (4 + 4) and the cast back (4 + e).
 * The README's 1.7B model on H100 (vocabulary 131,072) at tp 1 and 2: the head's times less
 * its logits multiply and final norm are those passes at the file's streaming bandwidth. */
Test(llm, head_cross_entropy_passes)
{
    const char *file = "profiles/clusters/dgx-h100.json";
    transformer *t = load_ok("examples/llm/megatron-h100/gpt-1.7b.json");
    cluster *c = cluster_ok(file);
    const device_type *dev = &c->types[0];
    double BW = dev->memory_Bps * dev->eff.memory, ko = dev->eff.kernel_overhead_s;
    double s = 4096, h = 2048, e = 2, ms = 1e3 * dev->speed;
    for (int tp = 1; tp <= 2; tp++) {
        profile *p = build_ok(t, file, tp, 1, 4096);
        const profile_layer *H = &p->layers[p->nlayers - 1];
        double vt = 131072.0 / tp, L = s * vt;
        double logits = device_gemm_s(dev, DEV_BF16, 1, s, vt, h, 0);
        double dx = device_gemm_s(dev, DEV_BF16, 1, s, h, vt, 0);
        double fwd = logits + (2 * s * h * e / BW + ko) + (L * 38 / BW + 6 * ko);
        double bwd = dx + (4 * s * h * e / BW + 2 * ko) + (L * 14 / BW + 2 * ko);
        expect_within(H->forward_ms, fwd * ms, 1e-12, "head forward");
        expect_within(H->backward_input_ms, bwd * ms, 1e-12, "head input gradient");
        /* at tp 1 the passes move 38 + 14 bytes per logit, 27.9 GB: 10.4 ms at 2.68 TB/s */
        if (tp == 1) expect_within(L * 52 / BW, 10.4e-3, 0.01, "the passes' time");
        profile_free(p);
    }
    cluster_free(c);
    transformer_free(t);
}

/* The head: its scratch is one logits tensor in the model's precision (the logits beside
 * their fp32 copy, or the gradient cast back beside the fp32 one); with tied embeddings its
 * vocabulary matrix is the embedding's (layer 0), untied it is its own. */
Test(llm, head_scratch_and_tied_matrix)
{
    transformer *t = load_ok("examples/llm/megatron-7b-swiglu.json"); /* tied */
    profile *p = build_ok(t, A100, 2, 2, 2048);
    const profile_layer *H = &p->layers[p->nlayers - 1];
    double vt = 50304.0 / 2, h = 4096; /* the file's padded vocabulary, split 2 ways */
    cr_assert_eq(H->workspace_bytes, 2048 * 2 * vt * 2);
    cr_assert_eq(H->tied_layer, 0);
    cr_assert_eq(H->tied_bytes, vt * h * 2);
    plumb_err err = {{0}};
    cr_assert_eq(profile_validate(p, "p", &err), 0, "%s", err.msg);
    profile_free(p);
    transformer_free(t);
    t = load_ok("examples/llm/llama3-8b.json"); /* untied */
    p = build_ok(t, A100, 1, 1, 1024);
    cr_assert_eq(p->layers[p->nlayers - 1].tied_bytes, 0);
    cr_assert_eq(p->layers[p->nlayers - 1].tied_layer, -1);
    profile_free(p);
    transformer_free(t);
}
