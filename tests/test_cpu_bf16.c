/* test_cpu_bf16.c: the "cpu-bf16" backend, the CPU reference for mixed precision: bf16
 * rounding (to nearest, ties to even), each GEMM-based layer equal bit for bit to the fp32
 * layer on pre-rounded inputs (convolutions: with the result rounded once, as cuDNN's bf16
 * tensors) and within the bf16 tolerance of fp32, element-wise layers and
 * the optimizer untouched (fp32 master weights), and training that tracks fp32.
 *
 * Tolerances (normalized max error, as tests/test_cuda.c measures it): TOL_BF16 3e-2, the
 * same bound as cuda-bf16 against the CPU (7 mantissa bits: 2^-8 = 3.9e-3 per input, errors
 * of random sign over K terms stay around 1e-2); and above 1e-4, so that a layer that
 * forgot to round (and agrees with fp32 to summation order) fails. Training: per-step
 * losses within LOSS_TOL (relative) of fp32 over 20 steps (measured: 1.1e-3 for the CNN,
 * 3.2e-4 for the transformer). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/cpu/cpu.h"
#include "exec/data.h"
#include "exec/model.h"
#include "exec/train.h"

#define TOL_BF16 3e-2
#define LOSS_TOL 5e-3

static float *rnd(size_t n, unsigned seed, float lo, float hi)
{
    float *x = malloc(n * sizeof *x);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = lo + (hi - lo) * (float)((s >> 8) & 0xffffff) / 16777216.0f;
    }
    return x;
}

static float *rounded_copy(const float *x, size_t n)
{
    float *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = cpu_bf16(x[i]);
    return y;
}

static void round_in_place(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = cpu_bf16(x[i]);
}

static double nmax_err(const float *a, const float *ref, size_t n)
{
    double d = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs((double)ref[i]));
    }
    return d / m;
}

Test(cpu_bf16, rounds_to_nearest_even)
{
    const float ulp1 = 1.0f / 128; /* bf16's spacing at 1 */
    cr_expect_eq(cpu_bf16(1.0f), 1.0f);
    cr_expect_eq(cpu_bf16(1.0f + ulp1 / 2), 1.0f, "a tie goes to the even neighbour");
    cr_expect_eq(cpu_bf16(1.0f + 3 * ulp1 / 2), 1.0f + 2 * ulp1, "a tie goes to even");
    cr_expect_eq(cpu_bf16(1.0f + ulp1 / 2 + 1.0f / (1 << 20)), 1.0f + ulp1, "above a tie");
    cr_expect_eq(cpu_bf16(-(1.0f + ulp1 / 4)), -1.0f);
    cr_expect_eq(cpu_bf16(3.14159265f), 3.140625f);
    cr_expect(signbit(cpu_bf16(-0.0f)) && cpu_bf16(-0.0f) == 0.0f);
    cr_expect(isinf(cpu_bf16(INFINITY)) && cpu_bf16(-INFINITY) < 0);
    cr_expect(isinf(cpu_bf16(FLT_MAX)), "beyond bf16's largest finite value");
    cr_expect(isnan(cpu_bf16(NAN)));
    float tiny_nan; /* a NaN whose mantissa bits all lie in the dropped half */
    unsigned u = 0x7f800001u;
    memcpy(&tiny_nan, &u, sizeof u);
    cr_expect(isnan(cpu_bf16(tiny_nan)), "stays NaN, not infinity");
    float x = 1e-40f; /* subnormal: bf16's spacing there is 2^-133 */
    cr_expect(cpu_bf16(x) != 0 && fabsf(cpu_bf16(x) - x) <= ldexpf(1.0f, -134));
}

typedef struct two {
    const backend *f, *h; /* fp32, bf16 */
    bk_ctx *cf, *ch;
} two;

static two open_two(void)
{
    plumb_err e = {{0}};
    two t = {backend_cpu(), backend_find("cpu-bf16", &e), NULL, NULL};
    cr_assert(t.h, "%s", e.msg);
    cr_assert_str_eq(t.h->name, "cpu-bf16");
    t.cf = t.f->create(0, &e);
    t.ch = t.h->create(0, &e);
    cr_assert(t.cf && t.ch, "%s", e.msg);
    return t;
}

static void close_two(two *t)
{
    plumb_err e = {{0}};
    cr_expect_eq(t->h->sync(t->ch, &e), 0, "%s", e.msg);
    t->f->destroy(t->cf);
    t->h->destroy(t->ch);
}

/* bf16 result y16 against fp32 on rounded inputs (yr: the same bits) and on the raw
 * inputs (y32: within TOL_BF16 but not closer than 1e-4). */
static void expect_bf16(const char *what, const float *y16, const float *yr, const float *y32,
                        size_t n)
{
    cr_expect_eq(memcmp(y16, yr, n * sizeof *y16), 0, "%s: not the fp32 result on rounded "
                 "inputs", what);
    double err = nmax_err(y16, y32, n);
    cr_expect(err <= TOL_BF16 && err > 1e-4, "%s: error against fp32 %.3g, expected in "
              "(1e-4, %g]", what, err, TOL_BF16);
}

Test(cpu_bf16, linear_and_gemm)
{
    two t = open_two();
    const int N = 33, in = 70, out = 41;
    float *x = rnd((size_t)N * in, 1, -1, 1), *w = rnd((size_t)out * in, 2, -1, 1);
    float *dy = rnd((size_t)N * out, 3, -1, 1), *b = rnd(out, 4, -1, 1);
    float *xr = rounded_copy(x, (size_t)N * in), *wr = rounded_copy(w, (size_t)out * in);
    float *dyr = rounded_copy(dy, (size_t)N * out);
    float *y16 = calloc((size_t)N * out, 4), *yr = calloc((size_t)N * out, 4);
    float *y32 = calloc((size_t)N * out, 4);
    t.h->linear_fwd(t.ch, N, in, out, x, w, b, y16);
    t.f->linear_fwd(t.cf, N, in, out, xr, wr, b, yr);
    t.f->linear_fwd(t.cf, N, in, out, x, w, b, y32);
    expect_bf16("linear forward", y16, yr, y32, (size_t)N * out);
    float *d16 = calloc((size_t)N * in, 4), *dr = calloc((size_t)N * in, 4);
    float *d32 = calloc((size_t)N * in, 4);
    t.h->linear_bwd_data(t.ch, N, in, out, dy, w, d16);
    t.f->linear_bwd_data(t.cf, N, in, out, dyr, wr, dr);
    t.f->linear_bwd_data(t.cf, N, in, out, dy, w, d32);
    expect_bf16("linear backward-data", d16, dr, d32, (size_t)N * in);
    float *g16 = calloc((size_t)out * in, 4), *gr = calloc((size_t)out * in, 4);
    float *g32 = calloc((size_t)out * in, 4), *db16 = calloc(out, 4), *db32 = calloc(out, 4);
    t.h->linear_bwd_weight(t.ch, N, in, out, dy, x, g16, db16);
    t.f->linear_bwd_weight(t.cf, N, in, out, dyr, xr, gr, NULL);
    t.f->linear_bwd_weight(t.cf, N, in, out, dy, x, g32, db32);
    expect_bf16("linear backward-weight", g16, gr, g32, (size_t)out * in);
    cr_expect_eq(memcmp(db16, db32, out * 4), 0, "bias gradients are fp32 sums");
    /* gemm, both transposed and strided (ld > the columns used): only the extent is read */
    memset(y16, 0, (size_t)N * out * 4), memset(yr, 0, (size_t)N * out * 4);
    memset(y32, 0, (size_t)N * out * 4);
    t.h->gemm(t.ch, 1, 1, 20, out, N, 0.5f, x, in, w, in, 0.0f, y16, out);
    t.f->gemm(t.cf, 1, 1, 20, out, N, 0.5f, xr, in, wr, in, 0.0f, yr, out);
    t.f->gemm(t.cf, 1, 1, 20, out, N, 0.5f, x, in, w, in, 0.0f, y32, out);
    expect_bf16("gemm (T, T)", y16, yr, y32, (size_t)20 * out);
    free(x), free(w), free(dy), free(b), free(xr), free(wr), free(dyr), free(y16), free(yr);
    free(y32), free(d16), free(dr), free(d32), free(g16), free(gr), free(g32), free(db16);
    free(db32);
    close_two(&t);
}

Test(cpu_bf16, convolution)
{
    two t = open_two();
    bk_conv g = {.B = 3, .C = 5, .H = 9, .W = 8, .K = 6, .kernel = 3, .stride = 2, .pad = 1};
    g.P = (g.H + 2 * g.pad - g.kernel) / g.stride + 1;
    g.Q = (g.W + 2 * g.pad - g.kernel) / g.stride + 1;
    size_t nx = (size_t)g.B * g.C * g.H * g.W, nw = (size_t)g.K * g.C * 9;
    size_t ny = (size_t)g.B * g.K * g.P * g.Q;
    float *x = rnd(nx, 5, -1, 1), *w = rnd(nw, 6, -1, 1), *dy = rnd(ny, 7, -1, 1);
    float *xr = rounded_copy(x, nx), *wr = rounded_copy(w, nw), *dyr = rounded_copy(dy, ny);
    float *a = calloc(nx + nw + ny, 4), *r = calloc(nx + nw + ny, 4), *f = calloc(nx + nw + ny, 4);
    /* each result is rounded to bf16 once, as cuDNN's bf16 tensors are */
    t.h->conv2d_fwd(t.ch, &g, x, w, NULL, a);
    t.f->conv2d_fwd(t.cf, &g, xr, wr, NULL, r);
    t.f->conv2d_fwd(t.cf, &g, x, w, NULL, f);
    round_in_place(r, ny);
    expect_bf16("conv forward", a, r, f, ny);
    t.h->conv2d_bwd_data(t.ch, &g, dy, w, a);
    t.f->conv2d_bwd_data(t.cf, &g, dyr, wr, r);
    t.f->conv2d_bwd_data(t.cf, &g, dy, w, f);
    round_in_place(r, nx);
    expect_bf16("conv backward-data", a, r, f, nx);
    /* backward-weight adds the rounded gradient of the whole batch to dw */
    for (size_t i = 0; i < nw; i++) a[i] = r[i] = f[i] = 0.25f;
    t.h->conv2d_bwd_weight(t.ch, &g, dy, x, a, NULL);
    memset(r, 0, nw * 4);
    t.f->conv2d_bwd_weight(t.cf, &g, dyr, xr, r, NULL);
    for (size_t i = 0; i < nw; i++) r[i] = 0.25f + cpu_bf16(r[i]);
    t.f->conv2d_bwd_weight(t.cf, &g, dy, x, f, NULL);
    expect_bf16("conv backward-weight", a, r, f, nw);
    /* a batch of many samples (one im2col GEMM each): still one rounding at the end */
    bk_conv big = {.B = 40, .C = 32, .H = 32, .W = 32, .K = 8, .kernel = 3, .stride = 1,
                   .pad = 1, .P = 32, .Q = 32}; /* 40 samples: 40 GEMMs accumulate */
    size_t bx = (size_t)big.B * big.C * big.H * big.W, by = (size_t)big.B * big.K * 32 * 32;
    size_t bw = (size_t)big.K * big.C * 9;
    float *X = rnd(bx, 12, -1, 1), *DY = rnd(by, 13, -1, 1);
    float *Xr = rounded_copy(X, bx), *DYr = rounded_copy(DY, by);
    float *ga = calloc(bw, 4), *gr = calloc(bw, 4);
    t.h->conv2d_bwd_weight(t.ch, &big, DY, X, ga, NULL);
    t.f->conv2d_bwd_weight(t.cf, &big, DYr, Xr, gr, NULL);
    round_in_place(gr, bw);
    cr_expect_eq(memcmp(ga, gr, bw * 4), 0, "conv backward-weight over several samples");
    free(X), free(DY), free(Xr), free(DYr), free(ga), free(gr);
    free(x), free(w), free(dy), free(xr), free(wr), free(dyr), free(a), free(r), free(f);
    close_two(&t);
}

Test(cpu_bf16, attention)
{
    two t = open_two();
    const int B = 2, T = 7, D = 16, H = 2;
    size_t nq = (size_t)B * T * 3 * D, na = (size_t)B * H * T * T, ny = (size_t)B * T * D;
    float *qkv = rnd(nq, 8, -1, 1), *dy = rnd(ny, 9, -1, 1);
    float *a16 = calloc(na, 4), *a32 = calloc(na, 4), *y16 = calloc(ny, 4), *y32 = calloc(ny, 4);
    t.h->attention_fwd(t.ch, B, T, D, H, qkv, a16, y16);
    t.f->attention_fwd(t.cf, B, T, D, H, qkv, a32, y32);
    double ea = nmax_err(a16, a32, na), ey = nmax_err(y16, y32, ny);
    cr_expect(ea <= TOL_BF16 && ea > 1e-4, "attention probabilities: %.3g", ea);
    cr_expect(ey <= TOL_BF16 && ey > 1e-4, "attention output: %.3g", ey);
    float *d16 = calloc(nq, 4), *d32 = calloc(nq, 4);
    t.h->attention_bwd(t.ch, B, T, D, H, qkv, a16, dy, d16);
    t.f->attention_bwd(t.cf, B, T, D, H, qkv, a32, dy, d32);
    double ed = nmax_err(d16, d32, nq);
    cr_expect(ed <= TOL_BF16 && ed > 1e-4, "attention backward: %.3g", ed);
    free(qkv), free(dy), free(a16), free(a32), free(y16), free(y32), free(d16), free(d32);
    close_two(&t);
}

/* Element-wise layers and the optimizer compute in fp32 in both; the weights stay fp32:
 * an update far below bf16's spacing is kept. */
Test(cpu_bf16, elementwise_and_master_weights_stay_fp32)
{
    two t = open_two();
    const size_t n = 1000;
    float *x = rnd(n, 10, -2, 2), *dy = rnd(n, 11, -1, 1);
    float *a = calloc(n, 4), *b = calloc(n, 4);
    t.h->gelu_fwd(t.ch, n, x, a);
    t.f->gelu_fwd(t.cf, n, x, b);
    cr_expect_eq(memcmp(a, b, n * 4), 0, "GELU forward");
    t.h->gelu_bwd(t.ch, n, x, dy, a);
    t.f->gelu_bwd(t.cf, n, x, dy, b);
    cr_expect_eq(memcmp(a, b, n * 4), 0, "GELU backward");
    float w[2] = {1.0f, 0.5f}, g[2] = {1.0f, -1.0f};
    bk_opt o = train_default_opt(BK_SGD);
    o.lr = 1e-4f;
    t.h->opt_step(t.ch, &o, 2, w, g, NULL, NULL);
    cr_expect_eq(w[0], 1.0f - 1e-4f, "a step 1/78 of bf16's spacing is kept");
    cr_expect_eq(w[1], 0.5f + 1e-4f);
    free(x), free(dy), free(a), free(b);
    close_two(&t);
}

static double *train_losses(const backend *bk, const char *spec, int steps, int mb)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    cr_assert(m, "%s", e.msg);
    dataset *d = data_synthetic(m, steps * mb, 3, &e);
    cr_assert(d, "%s", e.msg);
    bk_ctx *c = bk->create(0, &e);
    train_cfg cfg = {mb, 1, train_default_opt(BK_MOMENTUM)};
    seq_trainer *t = seqtrain_create(bk, c, m, &cfg, &e);
    cr_assert(t, "%s", e.msg);
    double *loss = calloc((size_t)steps, sizeof *loss);
    int tps = model_targets_per_sample(m);
    for (int s = 0; s < steps; s++) {
        size_t off = (size_t)s * mb;
        cr_assert_eq(seqtrain_step(t, d->x + off * d->sample_numel, d->y + off * tps, &loss[s],
                                   NULL, &e), 0, "%s", e.msg);
    }
    seqtrain_free(t);
    bk->destroy(c);
    data_free(d);
    model_free(m);
    return loss;
}

static void expect_tracks(const char *what, const char *spec, int steps, int mb)
{
    plumb_err e = {{0}};
    double *l32 = train_losses(backend_cpu(), spec, steps, mb);
    double *l16 = train_losses(backend_find("cpu-bf16", &e), spec, steps, mb);
    double worst = 0, differ = 0;
    for (int s = 0; s < steps; s++) {
        double rel = fabs(l16[s] - l32[s]) / fabs(l32[s]);
        worst = fmax(worst, rel);
        differ += l16[s] != l32[s];
        cr_expect(rel <= LOSS_TOL, "%s step %d: loss %.6f in bf16, %.6f in fp32", what, s + 1,
                  l16[s], l32[s]);
    }
    cr_expect_gt(differ, 0, "%s: bf16 rounding changed no loss", what);
    cr_expect_lt(l32[steps - 1], l32[0], "%s: fp32 training lowers the loss", what);
    cr_expect_lt(l16[steps - 1], l16[0], "%s: bf16 training lowers the loss", what);
    cr_log_info("%s: worst relative loss difference over %d steps %.2e", what, steps, worst);
    free(l32);
    free(l16);
}

Test(cpu_bf16, training_tracks_fp32)
{
    expect_tracks("cnn",
                  "{\"format\":\"plumb-model/1\",\"input\":[1,12,12],\"classes\":10,\"seed\":3,"
                  "\"layers\":[{\"type\":\"conv2d\",\"out_channels\":8,\"kernel\":3,"
                  "\"padding\":1},{\"type\":\"relu\"},{\"type\":\"maxpool2d\",\"kernel\":2},"
                  "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":32},{\"type\":\"relu\"},"
                  "{\"type\":\"linear\",\"out\":10},{\"type\":\"softmax_cross_entropy\"}]}",
                  20, 32);
    expect_tracks("transformer",
                  "{\"format\":\"plumb-model/1\",\"input\":[16],\"classes\":64,\"seed\":4,"
                  "\"layers\":[{\"type\":\"embedding\",\"vocab\":64,\"dim\":32},"
                  "{\"type\":\"residual\",\"layers\":[{\"type\":\"layernorm\"},"
                  "{\"type\":\"linear\",\"out\":96},{\"type\":\"attention\",\"heads\":2},"
                  "{\"type\":\"linear\",\"out\":32}]},{\"type\":\"layernorm\"},"
                  "{\"type\":\"linear\",\"out\":64},{\"type\":\"softmax_cross_entropy\"}]}",
                  20, 8);
}
