/* test_fp8.c: --precision fp8, Transformer Engine's FP8 training (docs/llm.md, "FP8
 * training"). An FP8 multiply costs on the fp8 peak at efficiency.gemm_fp8 (gemm when the
 * file has none) with one-byte operands and a bf16 output; a profile's projections take
 * exactly that time plus the casts, by a hand computation of the roofline, while attention,
 * the output layer and the FLOPs stay bf16's; the blocks keep their projections' inputs in
 * one byte; the memory model's state is bf16's and the weights gain the FP8 copies; with
 * FP8 primary weights (fp8_param_gather) the blocks' weights are the FP8 ones only and the
 * ZeRO-1 parameter all-gather moves them at 1 byte; a device without an fp8 peak is one
 * error naming the field. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "core/schedule.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/memory.h"
#include "sim/sim.h"

#define H100 "profiles/clusters/dgx-h100.json"
#define A100 "profiles/clusters/dgx-a100-80g.json"
#define LLAMA "examples/llm/nemo/llama2-7b.json"

/* A device with round figures: bf16 1000 and fp8 2000 TFLOP/s, 1000 GB/s at full
 * efficiency, no launch overhead. */
static device_type round_device(double gemm_fp8)
{
    device_type t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < DEV_NPREC; i++) t.peak_flops_prec[i] = -1;
    t.peak_flops_prec[DEV_BF16] = 1000e12;
    t.peak_flops_prec[DEV_FP8] = 2000e12;
    t.memory_Bps = 1000e9;
    t.eff = (device_efficiency){.gemm = 0.5, .gemm_fp8 = gemm_fp8, .attention = 0.5,
                                .memory = 1, .kernel_overhead_s = 0};
    return t;
}

Test(fp8, multiply_on_the_fp8_peak)
{
    device_type t = round_device(0.4);
    double n = 8192, f = 2 * n * n * n;
    /* compute-bound: the fp8 peak at gemm_fp8 */
    cr_assert_float_eq(device_gemm_s(&t, DEV_FP8, 1, n, n, n, 0), f / (2000e12 * 0.4), 1e-12);
    /* without gemm_fp8, gemm's plateau */
    device_type g = round_device(-1);
    cr_assert_float_eq(device_gemm_s(&g, DEV_FP8, 1, n, n, n, 0), f / (2000e12 * 0.5), 1e-12);
    /* bf16 is unchanged: its own peak at gemm */
    cr_assert_float_eq(device_gemm_s(&t, DEV_BF16, 1, n, n, n, 0), f / (1000e12 * 0.5), 1e-12);
    /* memory-bound: a 1 x n by n x n multiply reads n + n n one-byte elements and writes n
     * bf16 ones */
    cr_assert_float_eq(device_gemm_s(&t, DEV_FP8, 1, 1, n, n, 0), (n + n * n + 2 * n) / 1000e9,
                       1e-15);
    cr_assert_eq(dev_precision_bytes(DEV_FP8), 2); /* everything else stays bf16 */
    cr_assert_str_eq(dev_precision_name(DEV_FP8), "fp8");
    cr_assert_eq(dev_precision_parse("fp8"), DEV_FP8);
}

/* The roofline by hand: max(F / (peak eff), B / (bw em)) + one launch. */
static double roof(const device_type *d, double F, double peak, double eff, double B)
{
    double c = F / (peak * eff), m = B / (d->memory_Bps * d->eff.memory);
    return (c > m ? c : m) + d->eff.kernel_overhead_s;
}

/* One projection's forward, input-gradient and weight-gradient multiplies (M x k by k x n
 * and its two transposes) in bf16 or fp8, by hand. */
static void proj_by_hand(const device_type *d, int fp8, double M, double k, double n,
                         double *fwd, double *bwd)
{
    double F = 2 * M * k * n;
    double peak = fp8 ? d->peak_flops_prec[DEV_FP8] : d->peak_flops_prec[DEV_BF16];
    double eff = fp8 ? d->eff.gemm_fp8 : d->eff.gemm, in = fp8 ? 1 : 2;
    *fwd += roof(d, F, peak, eff, in * (M * k + k * n) + 2 * M * n);
    *bwd += roof(d, F, peak, eff, in * (M * n + n * k) + 2 * M * k) +
            roof(d, F, peak, eff, in * (k * M + M * n) + 2 * k * n);
}

static profile *llama_profile(dev_precision p, const cluster *c, plumb_err *err)
{
    transformer *t = transformer_load(LLAMA, err);
    cr_assert_not_null(t, "%s", err->msg);
    llm_options o;
    llm_options_init(&o);
    o.precision = p;
    o.attention = LLM_ATTN_FLASH;
    profile *pr = llm_profile_build(t, c, H100, &o, err);
    transformer_free(t);
    return pr;
}

Test(fp8, projections_priced_at_the_fp8_peak)
{
    plumb_err e = {{0}};
    cluster *c = cluster_load(H100, &e);
    cr_assert_not_null(c, "%s", e.msg);
    const device_type *d = &c->types[0];
    cr_assert_float_eq(d->peak_flops_prec[DEV_FP8], 1979e12, 1);
    cr_assert(d->eff.gemm_fp8 > 0 && d->eff.gemm_fp8 <= 1);
    profile *b = llama_profile(DEV_BF16, c, &e), *f = llama_profile(DEV_FP8, c, &e);
    cr_assert(b && f, "%s", e.msg);
    /* Llama 2 7B, one sequence of 4096: M 4096 rows, width 4096, QKV 3 x 4096, MLP 2 x
     * 11008 gated */
    double M = 4096, h = 4096, q = 3 * 4096, ff = 11008;
    double fb = 0, bb = 0, f8 = 0, b8 = 0;
    double shapes[4][2] = {{h, q}, {h, h}, {h, 2 * ff}, {ff, h}};
    for (int i = 0; i < 4; i++) {
        proj_by_hand(d, 0, M, shapes[i][0], shapes[i][1], &fb, &bb);
        proj_by_hand(d, 1, M, shapes[i][0], shapes[i][1], &f8, &b8);
    }
    /* the casts (no sequence parallelism: with the weight gradient's transpose): forward
     * the output projection's and the MLP's second inputs, 2 read + 1 + 1 written an
     * element, two kernels; backward the four output gradients, likewise, four kernels */
    double castf = 4 * M * (h + ff) / (d->memory_Bps * d->eff.memory) +
                   2 * d->eff.kernel_overhead_s;
    double castb = 4 * M * (q + h + 2 * ff + h) / (d->memory_Bps * d->eff.memory) +
                   4 * d->eff.kernel_overhead_s;
    const profile_layer *B = &b->layers[1], *F = &f->layers[1];
    cr_assert_str_eq(F->kind, "TransformerBlock");
    double df = (F->forward_ms - B->forward_ms) / 1e3;
    double db = (F->backward_ms - B->backward_ms) / 1e3;
    cr_assert(fabs(df - (f8 - fb + castf)) < 1e-9, "forward %.9g, by hand %.9g", df,
              f8 - fb + castf);
    cr_assert(fabs(db - (b8 - bb + castb)) < 1e-9, "backward %.9g, by hand %.9g", db,
              b8 - bb + castb);
    cr_assert(F->forward_ms < B->forward_ms); /* FP8 is faster on the whole */
    /* the output layer is Megatron-Core's own (bf16), the embedding a gather: unchanged */
    for (int l = 0; l < b->nlayers; l += b->nlayers - 1) {
        cr_assert_eq(f->layers[l].forward_ms, b->layers[l].forward_ms, "layer %d", l);
        cr_assert_eq(f->layers[l].backward_ms, b->layers[l].backward_ms, "layer %d", l);
        cr_assert_eq(f->layers[l].saved_bytes, b->layers[l].saved_bytes, "layer %d", l);
    }
    /* the model's FLOPs and its bf16 weights do not change */
    for (int l = 0; l < b->nlayers; l++) {
        cr_assert_eq(f->layers[l].flops, b->layers[l].flops);
        cr_assert_eq(f->layers[l].parameter_bytes, b->layers[l].parameter_bytes);
    }
    /* saved: the norms' outputs (QKV's and the MLP's inputs), the output projection's and
     * the MLP's second inputs in one byte; the output projection's input also kept in bf16
     * by fused attention; the rest bf16 (queries, keys, values, the MLP's 2f-wide output
     * and the SiLU's output, the second norm's input), plus the softmax statistics */
    double a = 32, s = 4096;
    double want8 = M * h * (1 + 2 + 1) + M * q * 2 + M * h * (1 + 2) + 4 * a * s +
                   (3 * 2 + 1) * M * ff;
    double want16 = 3 * M * h * 2 + M * q * 2 + M * h * 2 + 4 * a * s + 4 * M * ff * 2;
    cr_assert_eq(F->saved_bytes, want8, "%.0f, by hand %.0f", F->saved_bytes, want8);
    cr_assert_eq(B->saved_bytes, want16, "%.0f, by hand %.0f", B->saved_bytes, want16);
    profile_free(b);
    profile_free(f);
    cluster_free(c);
}

Test(fp8, memory_state_as_bf16_and_weight_copies)
{
    sim_state_mul s8, s16;
    for (int z = 0; z < 2; z++) {
        sim_memory_state_of(DEV_FP8, DEV_FP32, DEV_FP32, z, 8, OPT_ADAM, &s8);
        sim_memory_state_of(DEV_BF16, DEV_FP32, DEV_FP32, z, 8, OPT_ADAM, &s16);
        cr_assert(s8.gradients == s16.gradients && s8.optimizer == s16.optimizer &&
                  s8.reduce == s16.reduce && s8.step == s16.step, "zero %d", z);
    }
    /* 2 bytes of fp32 gradients and 4 + 8 of master weight and moments per bf16 byte */
    cr_assert_float_eq(s8.gradients, 2, 1e-12);
    plumb_err e = {{0}};
    cluster *c = cluster_load(H100, &e);
    cr_assert_not_null(c, "%s", e.msg);
    profile *p = llama_profile(DEV_FP8, c, &e);
    cr_assert_not_null(p, "%s", e.msg);
    double *cross = sim_cross_bytes(p);
    cr_assert_not_null(cross);
    sim_stage_layers L;
    sim_memory_layers(p, cross, 0, p->nlayers - 1, 0, &L);
    double blocks = 0;
    for (int l = 1; l < p->nlayers - 1; l++) blocks += p->layers[l].parameter_bytes;
    cr_assert_eq(L.fp8_copies, blocks);
    sim_mem_setting ms = {1, RECOMPUTE_NONE, 0, 0, 1, DEV_FP8, 1, 8, OPT_ADAM, DEV_FP32,
                          DEV_FP32, 0};
    sim_stage_mem m8, m16;
    sim_memory_stage(&L, &ms, &m8);
    ms.precision = DEV_BF16;
    sim_memory_stage(&L, &ms, &m16);
    /* the FP8 copy and its transpose: one byte each per block parameter (2 bytes in bf16) */
    cr_assert_eq(m8.params - m16.params, blocks);
    cr_assert_eq(m8.gradients, m16.gradients);
    cr_assert_eq(m8.optimizer, m16.optimizer);
    /* Llama 2 7B: 32 blocks of 202,383,360 parameters */
    cr_assert_eq(blocks, 32.0 * 202383360 * 2);
    free(cross);
    profile_free(p);
    cluster_free(c);
}

Test(fp8, device_without_fp8_peak)
{
    plumb_err e = {{0}};
    cluster *c = cluster_load(A100, &e);
    cr_assert_not_null(c, "%s", e.msg);
    transformer *t = transformer_load(LLAMA, &e);
    cr_assert_not_null(t, "%s", e.msg);
    llm_options o;
    llm_options_init(&o);
    o.precision = DEV_FP8;
    cr_assert_null(llm_profile_build(t, c, A100, &o, &e));
    cr_assert(strstr(e.msg, "dgx-a100-80g.json: device_types[0].peak_tflops_by_precision.fp8: "
                     "missing"), "%s", e.msg);
    cr_assert_null(strchr(e.msg, '\n'));
    /* the 3D search (plan --model without a layout, sweep) names the same field, not a
     * layout it could not find */
    search3d_options so;
    search3d_options_init(&so);
    so.gpus = 8;
    so.global_batch = 16;
    so.precision = DEV_FP8;
    plumb_err e2 = {{0}};
    cr_assert_null(search3d_run(t, c, A100, &so, &e2));
    cr_assert(strstr(e2.msg, "peak_tflops_by_precision.fp8: missing"), "%s", e2.msg);
    transformer_free(t);
    cluster_free(c);
}

/* Llama 2 7B at tp 2 x pp 2 x dp 2 on one DGX-H100, fp8, zero 1 with the parameter
 * all-gather apart; fpg sets FP8 primary weights. */
static plan *fp8_layout(int fpg, transformer **t, cluster **c)
{
    plumb_err e = {{0}};
    *c = cluster_load(H100, &e);
    cr_assert_not_null(*c, "%s", e.msg);
    *t = transformer_load(LLAMA, &e);
    cr_assert_not_null(*t, "%s", e.msg);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 8, o.tp = 2, o.pp = 2, o.dp = 2;
    o.global_batch = 8, o.microbatch_size = 1, o.seq = 1024;
    o.precision = DEV_FP8;
    o.zero = 1;
    o.sequence_parallel = 1;
    o.attention = LLM_ATTN_FLASH;
    plan *pl = layout3d_build(*t, *c, H100, &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    pl->overlap_param_gather = 1;
    pl->fp8_param_gather = fpg;
    cr_assert_eq(plan_validate(pl, NULL, &e), 0, "%s", e.msg);
    return pl;
}

/* FP8 primary weights, derived in docs/llm.md ("FP8 primary weights"): per block parameter
 * 1 byte of FP8 weight and 1 of its transpose and no bf16 copy, so a stage's weights drop
 * by its blocks' FP8 copies (fp8_copies: 2 bytes a parameter) and come to the bf16 plan's;
 * gradients and optimizer state unchanged; the ZeRO-1 all-gather moves fp8_copies / 2
 * fewer bytes, the ring's mean of its two halves fp8_copies / 4 fewer; a device's memory
 * total is lower by its stage's fp8_copies exactly. */
Test(fp8, fp8_param_gather_weights_and_all_gather)
{
    transformer *t0, *t1;
    cluster *c0, *c1;
    plan *p0 = fp8_layout(0, &t0, &c0), *p1 = fp8_layout(1, &t1, &c1);
    plumb_err e = {{0}};
    schedule *s = schedule_from_plan(p0, 1, &e);
    cr_assert_not_null(s, "%s", e.msg);
    sim_net net;
    sim_net_from_cluster(&net, p0->clus, NULL);
    sim_model m0 = {0}, m1 = {0};
    cr_assert_eq(sim_cost_build(&m0, p0, s, &net, -1, 1, &e), 0, "%s", e.msg);
    cr_assert_eq(sim_cost_build(&m1, p1, s, &net, -1, 1, &e), 0, "%s", e.msg);
    double *cross = sim_cross_bytes(p0->prof);
    cr_assert_not_null(cross);
    for (int st = 0; st < p0->nstages; st++) {
        sim_stage_layers L;
        const plan_stage *ps = &p0->stages[st];
        sim_memory_layers(p0->prof, cross, ps->first_layer, ps->last_layer, 0, &L);
        cr_assert_gt(L.fp8_copies, 0);
        cr_assert_eq(m0.fp8_weight_bytes[st], L.fp8_copies, "stage %d", st);
        cr_assert_eq(m1.fp8_weight_bytes[st], 0, "stage %d", st);
        cr_assert_eq(m1.param_bytes[st], m0.param_bytes[st]);
        cr_assert_eq(m1.gradmem_bytes[st], m0.gradmem_bytes[st]);
        cr_assert_eq(m1.optmem_bytes[st], m0.optmem_bytes[st]);
        cr_assert_eq(m0.gather_bytes[st], L.params, "stage %d", st);
        cr_assert_eq(m1.gather_bytes[st], L.params - L.fp8_copies / 2, "stage %d", st);
        cr_assert_float_eq(m0.grad_bytes[st] - m1.grad_bytes[st], L.fp8_copies / 4, 1e-3);
        for (int w = 0; w < s->nworkers; w++) {
            if (s->stage_workers[s->stage_first[st]] != w) continue;
            sim_memory a, b;
            sim_memory_of(&m0, w, NULL, p0->optimizer, 80e9, &a);
            sim_memory_of(&m1, w, NULL, p1->optimizer, 80e9, &b);
            cr_assert_float_eq(a.total - b.total, L.fp8_copies, 1e-3, "stage %d: %.0f vs %.0f",
                               st, a.total - b.total, L.fp8_copies);
            cr_assert_eq(a.weights - b.weights, L.fp8_copies);
        }
    }
    /* Llama 2 7B: 16 blocks a stage, each rank 1 / 2 of a block's 202,375,168 projection
     * parameters and both norms' 8,192, 2 bytes each */
    cr_assert_eq(m0.fp8_weight_bytes[0], 16.0 * (202375168 / 2 + 8192) * 2, "%.0f",
                 m0.fp8_weight_bytes[0]);
    free(cross);
    sim_model_release(&m0);
    sim_model_release(&m1);
    schedule_free(s);
    plan_free(p0), plan_free(p1);
    transformer_free(t0), transformer_free(t1);
    cluster_free(c0), cluster_free(c1);
}

/* The option's rules, one line naming it: precision fp8, and zero 1 given (Megatron-Core's
 * --fp8-param-gather needs the distributed optimizer). */
Test(fp8, fp8_param_gather_needs_fp8_and_zero_1)
{
    search3d_options o;
    search3d_options_init(&o);
    o.global_batch = 8;
    o.fp8_param_gather = 1;
    o.zero = 1;
    plumb_err e = {{0}};
    cr_assert_neq(search3d_runtime_check(&o, &e), 0);
    cr_assert(strstr(e.msg, "--fp8-param-gather: belongs to --precision fp8"), "%s", e.msg);
    o.precision = DEV_FP8;
    o.zero = SEARCH3D_FREE;
    cr_assert_neq(search3d_runtime_check(&o, &e), 0);
    cr_assert(strstr(e.msg, "--fp8-param-gather: expected --zero 1 (Megatron-Core's FP8 "
                     "primary weights need the distributed optimizer) (got no --zero)"),
              "%s", e.msg);
    o.zero = 0;
    cr_assert_neq(search3d_runtime_check(&o, &e), 0);
    cr_assert(strstr(e.msg, "(got --zero 0)"), "%s", e.msg);
    o.zero = 1;
    cr_assert_eq(search3d_runtime_check(&o, &e), 0, "%s", e.msg);
}
