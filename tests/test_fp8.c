/* test_fp8.c: --precision fp8, Transformer Engine's FP8 training (docs/llm.md, "FP8
 * training"). An FP8 multiply costs on the fp8 peak at efficiency.gemm_fp8 (gemm when the
 * file has none) with one-byte operands and a bf16 output; a profile's projections take
 * exactly that time plus the casts, by a hand computation of the roofline, while attention,
 * the output layer and the FLOPs stay bf16's; the blocks keep their projections' inputs in
 * one byte; the memory model's state is bf16's and the weights gain the FP8 copies; a
 * device without an fp8 peak is one error naming the field. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "sim/cost.h"
#include "sim/memory.h"

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
                          DEV_FP32};
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
