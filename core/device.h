/* device.h: a device type's datasheet figures (dense peak FLOP/s per precision, memory
 * bandwidth) and the roofline cost model built on them: the time of a matrix multiply, a
 * batched matrix multiply and a streaming (elementwise) kernel as a function of its shape.
 *
 * The model (docs/llm.md): a kernel takes
 *     t = max(F / (peak * e_c), B / (bw * e_m)) + overhead
 * where F is its FLOPs, B the bytes it reads and writes once, e_c the compute plateau
 * (efficiency.gemm or efficiency.attention), e_m efficiency.memory and overhead the fixed
 * time of one kernel launch. Its achieved fraction of peak F / (peak t) therefore rises with
 * size and arithmetic intensity towards e_c and never exceeds it. A device type with
 * gemm_tiling prices a multiply's F as the SMs run it: whole output tiles in whole waves
 * (device_gemm_waste), so its efficiency is a sawtooth under e_c. */
#ifndef PLUMB_DEVICE_H
#define PLUMB_DEVICE_H

#include "cluster.h"
#include "json.h"

/* "fp32", "tf32", "bf16", "fp16", "fp8". */
const char *dev_precision_name(dev_precision p);
/* Parses a name; -1 when unknown. */
int dev_precision_parse(const char *name);
/* Bytes of one element stored in precision p (tf32 is stored as fp32; fp8 training keeps its
 * weights and activations in bf16, 2). */
int dev_precision_bytes(dev_precision p);

/* 1 when t carries everything the roofline needs for precision p: its peak, the memory
 * bandwidth and the efficiency figures (fp8: the bf16 peak too, for everything but the
 * projections). Otherwise 0, with err naming (file and
 * device_types[i]) the first missing field. */
int device_has_figures(const device_type *t, dev_precision p, const char *file, int i,
                       plumb_err *err);

/* Tile and wave quantization of a multiply with a batch x m x n output on tiling g: the work
 * the SMs do over the work asked, >= 1. A multiply of `tiles` = batch ceil(m / tile_m)
 * ceil(n / tile_n) output tiles runs in ceil(tiles / sms) waves of sms tiles each, so it
 * costs ceil(tiles / sms) sms tile_m tile_n / (batch m n) times its FLOPs; the tile is taken
 * whichever way round wastes less. 1 (no waste) without tiling (g->sms <= 0) and for a
 * multiply under one full wave or narrower than the tile either way round: cuBLAS runs those
 * with smaller tiles or split K, which this does not model (docs/llm.md). */
double device_gemm_waste(const device_tiling *g, double batch, double m, double n);

/* Seconds of one (m x k) by (k x n) multiply in precision p, `batch` times over (a batched
 * kernel, one launch): F = 2 batch m n k, B = bytes(p) batch (m k + k n + m n), the compute
 * side priced on F times device_gemm_waste. `attention` selects the attention plateau
 * instead of the GEMM one. p DEV_FP8 (Transformer Engine's FP8 GEMM): one-byte operands and a
 * bf16 output, B = batch (m k + k n + 2 m n), on the fp8 peak at efficiency.gemm_fp8 when
 * the file gives it, else efficiency.gemm. Needs device_has_figures. */
double device_gemm_s(const device_type *t, dev_precision p, double batch, double m, double n,
                     double k, int attention);

/* Achieved fraction of the peak of that multiply: F / (peak t), in (0, plateau]. */
double device_gemm_efficiency(const device_type *t, dev_precision p, double batch, double m,
                              double n, double k, int attention);

/* Seconds of one fused kernel (one launch) of `flops` FLOPs that reads and writes `bytes`
 * bytes in precision p's compute peak, on the attention plateau when `attention` is set,
 * else the GEMM one: max(flops / (peak plateau), bytes / (bw memory)) + one launch. For
 * kernels whose intermediate tensors stay on chip (fused attention), where device_gemm_s
 * would count each multiply's inputs and outputs as memory traffic. Needs
 * device_has_figures. */
double device_fused_s(const device_type *t, dev_precision p, double flops, double bytes,
                      int attention);

/* Seconds of `kernels` streaming kernels that move `bytes` bytes in all. */
double device_stream_s(const device_type *t, double bytes, int kernels);

/* The cluster loader's hooks for the optional figures of a device type (core/cluster.c):
 * reading (0, or -1 with err set naming path.field), checking an in-memory device type (0 or
 * -1), writing (0, or -1 when out of memory) and comparing (1 when equal). */
int device_figures_from_json(const jctx *jc, const cJSON *tv, const char *path, device_type *t);
int device_figures_validate(const device_type *t, const char *file, const char *path,
                            plumb_err *err);
int device_figures_to_json(const device_type *t, cJSON *o);
int device_figures_equal(const device_type *a, const device_type *b);

#endif
