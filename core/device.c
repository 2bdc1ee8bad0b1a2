/* device.c: device datasheet figures in cluster files (reading, checking, writing, comparing)
 * and the roofline cost of matrix multiplies and streaming kernels (core/device.h). */
#include "device.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "units.h"

static const char *const PREC_NAMES[DEV_NPREC] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
static const char *const PREC_KEYS[] = {"fp32", "tf32", "bf16", "fp16", "fp8", NULL};
static const char *const EFF_KEYS[] = {"gemm", "attention", "memory", "kernel_overhead_us",
                                       "gemm_fp8", NULL};
static const char *const TILING_KEYS[] = {"sms", "tile_m", "tile_n", NULL};

const char *dev_precision_name(dev_precision p)
{
    return p >= 0 && p < DEV_NPREC ? PREC_NAMES[p] : "?";
}

int dev_precision_parse(const char *name)
{
    for (int i = 0; i < DEV_NPREC; i++)
        if (name && strcmp(name, PREC_NAMES[i]) == 0) return i;
    return -1;
}

/* fp8: the bf16 element of everything but the projections' FP8 operands (docs/llm.md) */
int dev_precision_bytes(dev_precision p)
{
    return p == DEV_BF16 || p == DEV_FP16 || p == DEV_FP8 ? 2 : 4;
}

/* ---- the file's figures ------------------------------------------------------------------ */

/* The optional "gemm_tiling" object: all three fields or none. 0, or -1 with jc->err set. */
static int tiling_from_json(const jctx *jc, const cJSON *tv, const char *path, device_type *t)
{
    const cJSON *g = NULL;
    char gp[192];
    long long sms = 0, tm = 0, tn = 0;
    memset(&t->tiling, 0, sizeof t->tiling);
    if (json_get_obj(jc, tv, path, "gemm_tiling", 0, &g)) return -1;
    if (!g) return 0;
    json_path(gp, sizeof gp, path, "gemm_tiling");
    if (json_check_keys(jc, g, gp, TILING_KEYS) ||
        json_get_int(jc, g, gp, "sms", 1, 1, 1 << 20, &sms) ||
        json_get_int(jc, g, gp, "tile_m", 1, 1, 1 << 16, &tm) ||
        json_get_int(jc, g, gp, "tile_n", 1, 1, 1 << 16, &tn))
        return -1;
    t->tiling = (device_tiling){(int)sms, (int)tm, (int)tn};
    return 0;
}

int device_figures_from_json(const jctx *jc, const cJSON *tv, const char *path, device_type *t)
{
    const cJSON *prec = NULL, *eff = NULL;
    char pp[192], ep[192];
    if (tiling_from_json(jc, tv, path, t)) return -1;
    for (int i = 0; i < DEV_NPREC; i++) t->peak_flops_prec[i] = -1;
    t->memory_Bps = -1;
    t->eff.gemm = t->eff.attention = t->eff.memory = t->eff.kernel_overhead_s = -1;
    t->eff.gemm_fp8 = -1;
    if (json_get_obj(jc, tv, path, "peak_tflops_by_precision", 0, &prec) ||
        json_get_obj(jc, tv, path, "efficiency", 0, &eff) ||
        json_get_converted(jc, tv, path, "memory_gbyte_per_s", 0, J_POS, units_gbyte_to_Bps,
                           &t->memory_Bps, NULL))
        return -1;
    json_path(pp, sizeof pp, path, "peak_tflops_by_precision");
    json_path(ep, sizeof ep, path, "efficiency");
    if (prec) {
        if (json_check_keys(jc, prec, pp, PREC_KEYS)) return -1;
        for (int i = 0; i < DEV_NPREC; i++)
            if (json_get_converted(jc, prec, pp, PREC_NAMES[i], 0, J_POS, units_tflops_to_flops,
                                   &t->peak_flops_prec[i], NULL))
                return -1;
    }
    if (eff) {
        /* all four together: a curve with a missing part is not a curve */
        if (json_check_keys(jc, eff, ep, EFF_KEYS) ||
            json_get_converted(jc, eff, ep, "gemm", 1, J_POS, NULL, &t->eff.gemm, NULL) ||
            json_get_converted(jc, eff, ep, "attention", 1, J_POS, NULL, &t->eff.attention,
                               NULL) ||
            json_get_converted(jc, eff, ep, "memory", 1, J_POS, NULL, &t->eff.memory, NULL) ||
            json_get_converted(jc, eff, ep, "kernel_overhead_us", 1, J_NONNEG, units_us_to_s,
                               &t->eff.kernel_overhead_s, NULL) ||
            json_get_converted(jc, eff, ep, "gemm_fp8", 0, J_POS, NULL, &t->eff.gemm_fp8, NULL))
            return -1;
    }
    return 0;
}

int device_figures_validate(const device_type *t, const char *file, const char *path,
                            plumb_err *err)
{
    char fp[192];
    const struct { double v; const char *key; } fr[] = {
        {t->eff.gemm, "efficiency.gemm"}, {t->eff.attention, "efficiency.attention"},
        {t->eff.memory, "efficiency.memory"}, {t->eff.gemm_fp8, "efficiency.gemm_fp8"}};
    for (int i = 0; i < 4; i++) /* absent: <= 0 (gemm_fp8 alone may be) */
        if (!isfinite(fr[i].v) || fr[i].v > 1 || (fr[i].v > 0 && fr[i].v < BOUND_EFFICIENCY_MIN))
            return err_set(err, file, json_path(fp, sizeof fp, path, fr[i].key),
                           "expected a fraction of the peak from %g to 1 (got %g)",
                           BOUND_EFFICIENCY_MIN, fr[i].v);
    /* core/bounds.h's ranges (absent: <= 0, or < 0 for the overhead): a peak of 1e-308
     * TFLOP/s or a memory of 1e-299 bytes/s made every block's time infinite, refused far
     * from the file ("plan: --microbatch-size: ... (got 0)", "(analytic profile):
     * layers[1].forward_ms: expected a finite number (got inf)") */
    for (int i = 0; i < DEV_NPREC; i++) {
        double v = t->peak_flops_prec[i];
        if (!isfinite(v) || (v > 0 && !(v >= BOUND_PEAK_FLOPS_MIN && v <= BOUND_PEAK_FLOPS_MAX))) {
            int n = (int)strlen(json_path(fp, sizeof fp, path, "peak_tflops_by_precision"));
            snprintf(fp + n, sizeof fp - (size_t)n, ".%s", PREC_NAMES[i]);
            return err_set(err, file, fp, "expected a peak from %g to %g TFLOP/s, or absent "
                           "(got %.10g)", units_flops_to_tflops(BOUND_PEAK_FLOPS_MIN),
                           units_flops_to_tflops(BOUND_PEAK_FLOPS_MAX),
                           units_flops_to_tflops(v));
        }
    }
    double m = t->memory_Bps;
    if (!isfinite(m) || (m > 0 && !(m >= BOUND_MEMORY_BPS_MIN && m <= BOUND_MEMORY_BPS_MAX)))
        return err_set(err, file, json_path(fp, sizeof fp, path, "memory_gbyte_per_s"),
                       "expected a bandwidth from %g to %g GB/s, or absent (got %.10g)",
                       units_Bps_to_gbyte(BOUND_MEMORY_BPS_MIN),
                       units_Bps_to_gbyte(BOUND_MEMORY_BPS_MAX), units_Bps_to_gbyte(m));
    double k = t->eff.kernel_overhead_s;
    if (!isfinite(k) || k > BOUND_LATENCY_S_MAX)
        return err_set(err, file, json_path(fp, sizeof fp, path, "efficiency.kernel_overhead_us"),
                       "expected a time from 0 to %g us (got %.10g)",
                       units_s_to_us(BOUND_LATENCY_S_MAX), units_s_to_us(k));
    if (t->tiling.sms < 0 || (t->tiling.sms > 0 && (t->tiling.tile_m < 1 || t->tiling.tile_n < 1)))
        return err_set(err, file, json_path(fp, sizeof fp, path, "gemm_tiling"),
                       "expected sms >= 1 and a tile of at least 1 x 1 (got %d SMs, %d x %d)",
                       t->tiling.sms, t->tiling.tile_m, t->tiling.tile_n);
    return 0;
}

int device_figures_to_json(const device_type *t, cJSON *o)
{
    int any = 0;
    for (int i = 0; i < DEV_NPREC; i++) any |= t->peak_flops_prec[i] > 0;
    if (any) {
        cJSON *p = cJSON_AddObjectToObject(o, "peak_tflops_by_precision");
        if (!p) return -1;
        for (int i = 0; i < DEV_NPREC; i++)
            if (t->peak_flops_prec[i] > 0 &&
                !json_add_num(p, PREC_NAMES[i], units_flops_to_tflops(t->peak_flops_prec[i])))
                return -1;
    }
    if (t->memory_Bps > 0 &&
        !json_add_num(o, "memory_gbyte_per_s", units_Bps_to_gbyte(t->memory_Bps)))
        return -1;
    if (t->eff.gemm > 0) {
        cJSON *e = cJSON_AddObjectToObject(o, "efficiency");
        if (!e || !json_add_num(e, "gemm", t->eff.gemm) ||
            !json_add_num(e, "attention", t->eff.attention) ||
            !json_add_num(e, "memory", t->eff.memory) ||
            !json_add_num(e, "kernel_overhead_us", units_s_to_us(t->eff.kernel_overhead_s)) ||
            (t->eff.gemm_fp8 > 0 && !json_add_num(e, "gemm_fp8", t->eff.gemm_fp8)))
            return -1;
    }
    if (t->tiling.sms > 0) {
        cJSON *g = cJSON_AddObjectToObject(o, "gemm_tiling");
        if (!g || !json_add_num(g, "sms", t->tiling.sms) ||
            !json_add_num(g, "tile_m", t->tiling.tile_m) ||
            !json_add_num(g, "tile_n", t->tiling.tile_n))
            return -1;
    }
    return 0;
}

/* Equal as figures: both absent (<= 0) or the same double. */
static int same(double a, double b) { return (a <= 0 && b <= 0) || a == b; }

int device_figures_equal(const device_type *a, const device_type *b)
{
    for (int i = 0; i < DEV_NPREC; i++)
        if (!same(a->peak_flops_prec[i], b->peak_flops_prec[i])) return 0;
    int ea = a->eff.gemm > 0, eb = b->eff.gemm > 0;
    const device_tiling *ga = &a->tiling, *gb = &b->tiling;
    if (ga->sms != gb->sms ||
        (ga->sms > 0 && (ga->tile_m != gb->tile_m || ga->tile_n != gb->tile_n)))
        return 0;
    return same(a->memory_Bps, b->memory_Bps) && ea == eb &&
           (!ea || (a->eff.gemm == b->eff.gemm && a->eff.attention == b->eff.attention &&
                    a->eff.memory == b->eff.memory &&
                    a->eff.kernel_overhead_s == b->eff.kernel_overhead_s &&
                    same(a->eff.gemm_fp8, b->eff.gemm_fp8)));
}

int device_has_figures(const device_type *t, dev_precision p, const char *file, int i,
                       plumb_err *err)
{
    char fp[96];
    snprintf(fp, sizeof fp, "device_types[%d]", i);
    size_t n = strlen(fp);
    if (!(t->peak_flops_prec[p] > 0)) {
        snprintf(fp + n, sizeof fp - n, ".peak_tflops_by_precision.%s", PREC_NAMES[p]);
        return err_set(err, file, fp, "missing; the analytic profile needs the device's dense "
                       "peak TFLOP/s in %s%s", PREC_NAMES[p],
                       p == DEV_FP8 ? " (FP8 training runs the projections in FP8)" : ""), 0;
    }
    /* FP8 training runs everything but the projections in bf16 */
    if (p == DEV_FP8 && !(t->peak_flops_prec[DEV_BF16] > 0)) {
        snprintf(fp + n, sizeof fp - n, ".peak_tflops_by_precision.bf16");
        return err_set(err, file, fp, "missing; fp8 training runs attention and the output "
                       "layer in bf16, so the analytic profile needs the bf16 peak too"), 0;
    }
    if (!(t->memory_Bps > 0)) {
        snprintf(fp + n, sizeof fp - n, ".memory_gbyte_per_s");
        return err_set(err, file, fp, "missing; the analytic profile needs the device's "
                       "memory bandwidth"), 0;
    }
    if (!(t->eff.gemm > 0)) {
        snprintf(fp + n, sizeof fp - n, ".efficiency");
        return err_set(err, file, fp, "missing; the analytic profile needs {gemm, attention, "
                       "memory, kernel_overhead_us} (docs/llm.md)"), 0;
    }
    return 1;
}

/* ---- the roofline ------------------------------------------------------------------------ */

static double roofline_s(const device_type *t, double flops, double peak, double bytes,
                         int kernels)
{
    double compute = flops / peak, memory = bytes / (t->memory_Bps * t->eff.memory);
    return (compute > memory ? compute : memory) + kernels * t->eff.kernel_overhead_s;
}

double device_gemm_waste(const device_tiling *g, double batch, double m, double n)
{
    if (g->sms <= 0) return 1;
    double best = -1;
    for (int o = 0; o < 2; o++) { /* the tile either way round: the better one is run */
        double tm = o ? g->tile_n : g->tile_m, tn = o ? g->tile_m : g->tile_n;
        if (m < tm || n < tn) continue;
        double tiles = batch * ceil(m / tm) * ceil(n / tn);
        if (tiles < g->sms) continue;
        double w = ceil(tiles / g->sms) * g->sms * tm * tn / (batch * m * n);
        if (best < 0 || w < best) best = w;
    }
    return best < 0 ? 1 : best;
}

double device_gemm_s(const device_type *t, dev_precision p, double batch, double m, double n,
                     double k, int attention)
{
    double flops = 2 * batch * m * n * k;
    double bytes = dev_precision_bytes(p) * batch * (m * k + k * n + m * n);
    double plateau = attention ? t->eff.attention : t->eff.gemm;
    if (p == DEV_FP8) { /* one-byte operands, a bf16 output; its own plateau when given */
        bytes = batch * (m * k + k * n + 2 * m * n);
        if (!attention && t->eff.gemm_fp8 > 0) plateau = t->eff.gemm_fp8;
    }
    double run = flops * device_gemm_waste(&t->tiling, batch, m, n);
    return roofline_s(t, run, t->peak_flops_prec[p] * plateau, bytes, 1);
}

double device_gemm_efficiency(const device_type *t, dev_precision p, double batch, double m,
                              double n, double k, int attention)
{
    double s = device_gemm_s(t, p, batch, m, n, k, attention);
    return 2 * batch * m * n * k / (t->peak_flops_prec[p] * s);
}

double device_fused_s(const device_type *t, dev_precision p, double flops, double bytes,
                      int attention)
{
    double plateau = attention ? t->eff.attention : t->eff.gemm;
    return roofline_s(t, flops, t->peak_flops_prec[p] * plateau, bytes, 1);
}

double device_stream_s(const device_type *t, double bytes, int kernels)
{
    return roofline_s(t, 0, 1, bytes, kernels);
}
