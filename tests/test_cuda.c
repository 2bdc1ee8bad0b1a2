/* test_cuda.c: the CUDA backend against the CPU backend (the reference), layer by layer,
 * on identical inputs; the error messages; hand-offs between contexts, also through the
 * local transport. Where no GPU is
 * present (or plumb was built without nvcc) the GPU tests skip with a message saying so,
 * and the tests that need no GPU (probing, messages, names) still run.
 *
 * Agreement is measured as the normalized maximum error
 *     err = max_i |cuda_i - cpu_i| / max(max_i |cpu_i|, 1e-30)
 * with these tolerances:
 *   TOL_FP32 1e-4: TF32 off, so the two backends differ only in summation order (cuBLAS,
 *     cuDNN and the kernels' reductions against OpenBLAS and loops); a sum of K fp32 terms
 *     may move by about K 2^-24 of its largest term, under 1e-4 for the K <= 1600 here;
 *   TOL_TF32 1e-2: TF32 rounds GEMM and convolution inputs to 10 mantissa bits (2^-11 =
 *     4.9e-4 each); errors of random sign over K terms grow to a few 1e-3;
 *   TOL_BF16 3e-2: bf16 keeps 7 mantissa bits (2^-8 = 3.9e-3 per input); a product of two
 *     rounded inputs summed over K terms stays around 1e-2 (the bound of cpu-bf16 against
 *     fp32, tests/test_cpu_bf16.c). bf16 results are compared with cpu-bf16, which rounds
 *     the same inputs: far below the bound unless cuDNN falls back to TF32 for a shape.
 * When PLUMB_CUDA_REPORT names a file, each comparison appends one line
 * "check<TAB>precision<TAB>err<TAB>tol<TAB>ok|FAIL" to it (bench/gpu-check.sh prints them). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"

#define TOL_FP32 1e-4
#define TOL_TF32 1e-2
#define TOL_BF16 3e-2

#ifndef PLUMB_HAVE_CUDA

Test(cuda, not_built)
{
    plumb_err e = {{0}};
    cr_assert_null(backend_find("cuda", &e));
    cr_assert(strstr(e.msg, "not built"), "%s", e.msg);
    cr_skip_test("CUDA tests skipped: plumb was built without nvcc, so there is no CUDA backend");
}

#else

#include "exec/cuda/cuda_backend.h"
#include "exec/cuda/cuda_internal.h"
#include "exec/cuda/cuda_nccl.h"
#include "exec/train.h"
#include "exec/train_plan.h"
#include "exec/transport.h"
#include "tests/tpxent.h"

/* Skips the calling test unless a GPU is present. */
static void need_gpu(void)
{
    plumb_err e = {{0}};
    if (cuda_device_count(&e) < 0) cr_skip_test("CUDA test skipped: %s", e.msg);
}

/* ------------------------------------------------------------------ tests without a GPU */

Test(cuda, conv_pick_prefers_less_workspace_among_near_ties)
{
    const size_t MiB = 1 << 20;
    /* as cuDNN lists them, fastest first */
    cuda_conv_result r[] = {
        {.ok = 1, .tensor_math = 1, .ms = 0.50f, .ws = 0},       /* TF32: not in strict fp32 */
        {.ok = 1, .tensor_math = 0, .ms = 1.00f, .ws = 33 * MiB},
        {.ok = 0, .tensor_math = 0, .ms = 1.01f, .ws = 0},       /* failed */
        {.ok = 1, .tensor_math = 0, .ms = 1.04f, .ws = 1 * MiB}, /* within 5 %: less memory */
        {.ok = 1, .tensor_math = 0, .ms = 1.049f, .ws = 1 * MiB},
        {.ok = 1, .tensor_math = 0, .ms = 1.20f, .ws = 0},       /* 20 % slower */
    };
    cr_assert_eq(cuda_conv_pick(r, 6, 1, 1u << 30), 3, "the least workspace within 5 %%, "
                 "then the faster");
    cr_assert_eq(cuda_conv_pick(r, 6, 0, 1u << 30), 0, "tensor cores allowed: the fastest");
    cr_assert_eq(cuda_conv_pick(r, 2, 1, 1u << 30), 1, "alone within 5 %%");
    cr_assert_eq(cuda_conv_pick(r, 6, 1, 16 * MiB), 3, "over the limit: not a candidate");
    cr_assert_eq(cuda_conv_pick(r + 1, 1, 1, 16 * MiB), -1, "nothing allowed");
    cr_assert_eq(cuda_conv_pick(r, 0, 1, 1u << 30), -1, "no results");
    cuda_conv_result tie[] = {{1, 0, 2.0f, 0}, {1, 0, 2.0f, 0}};
    cr_assert_eq(cuda_conv_pick(tie, 2, 1, 0), 0, "equal: the first listed");
}

Test(cuda, names_and_precisions)
{
    plumb_err e = {{0}};
    const backend *b = backend_find("cuda", &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert_str_eq(b->name, "cuda");
    cr_assert_eq(b, backend_cuda());
    cr_assert_str_eq(backend_cuda_precision(CUDA_TF32)->name, "cuda-tf32");
    cr_assert_str_eq(backend_cuda_precision(CUDA_BF16)->name, "cuda-bf16");
    cr_assert_null(backend_cuda_precision(CUDA_NPRECISIONS));
    cr_assert_eq(backend_find("cuda-bf16", &e), backend_cuda_precision(CUDA_BF16));
    cr_assert_eq(backend_find("cuda-tf32", &e), backend_cuda_precision(CUDA_TF32));
    cr_assert_null(backend_find("cuda-fp8", &e));
    cr_assert(strstr(e.msg, "\"cuda-bf16\""), "%s", e.msg);
    cuda_precision p = CUDA_FP32;
    cr_assert_eq(cuda_precision_parse("bf16", &p, &e), 0);
    cr_assert_eq(p, CUDA_BF16);
    cr_assert_eq(cuda_precision_parse("fp16", &p, &e), -1);
    cr_assert_str_eq(e.msg, "--precision: expected fp32, tf32 or bf16 (got \"fp16\")");
    /* every required entry (create .. opt_step) is filled in */
    const void *const *fn = (const void *const *)&b->create;
    size_t nfn = (offsetof(backend, opt_step) - offsetof(backend, create)) / sizeof(void *) + 1;
    for (size_t i = 0; i < nfn; i++) cr_assert_not_null(fn[i], "entry %zu is NULL", i);
}

Test(cuda, check_messages_name_call_place_and_hint)
{
    plumb_err e = {{0}};
    cr_assert_eq(CUDA_CHECK_E(&e, cudaSuccess), 0);
    cr_assert_str_eq(e.msg, "");
    cr_assert_neq(cuda_check_rt(&e, cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "f.c", 12),
                  0);
    cr_assert(strstr(e.msg, "CUDA error: cudaMalloc(&p, n) at f.c:12: "), "%s", e.msg);
    cr_assert(strstr(e.msg, "cudaErrorMemoryAllocation"), "%s", e.msg);
    cr_assert(strstr(e.msg, "hint: the GPU is out of memory"), "%s", e.msg);
    cr_assert_neq(cuda_check_blas(&e, CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx(...)", "g.c",
                                  3), 0);
    cr_assert(strstr(e.msg, "cuBLAS error: cublasGemmEx(...) at g.c:3: "), "%s", e.msg);
    cr_assert(strstr(e.msg, "CUBLAS_STATUS_INVALID_VALUE"), "%s", e.msg);
    cr_assert_neq(cuda_check_dnn(&e, 3, "cudnnX()", "h.c", 4), 0);
    cr_assert(strstr(e.msg, "cuDNN error: cudnnX() at h.c:4: "), "%s", e.msg);
    cr_assert_neq(cuda_check_nccl(&e, 2, "ncclSend()", "n.c", 5), 0);
    cr_assert(strstr(e.msg, "NCCL error: ncclSend() at n.c:5: "), "%s", e.msg);
}

/* Without a GPU, create fails cleanly with the reason; with one, it succeeds. */
Test(cuda, create_fails_cleanly_without_gpu)
{
    plumb_err e = {{0}};
    int n = cuda_device_count(&e);
    bk_ctx *c = backend_cuda()->create(0, &e);
    if (n < 0) {
        cr_assert_null(c);
        cr_assert(!strncmp(e.msg, "no CUDA GPU found (cudaGetDeviceCount: ", 39), "%s", e.msg);
    } else {
        cr_assert_not_null(c, "%s", e.msg);
        backend_cuda()->destroy(c);
        cr_assert_null(backend_cuda()->create(n, &e));
        cr_assert(strstr(e.msg, "expected a CUDA device index"), "%s", e.msg);
    }
}

#ifdef PLUMB_CUEMU
/* TF32 and bf16 need Ampere or newer: on an emulated Turing GPU (sm_75) those precisions
 * are refused with one line naming the device, and fp32 still runs. */
Test(cuda, reduced_precision_needs_ampere)
{
    setenv("CUEMU_CC", "7.5", 1);
    plumb_err e = {{0}};
    for (int p = CUDA_TF32; p <= CUDA_BF16; p++) {
        cr_assert_null(backend_cuda_precision((cuda_precision)p)->create(0, &e));
        cr_assert(strstr(e.msg, "needs a GPU of compute capability 8.0 or newer") &&
                      strstr(e.msg, "is sm_75: use --backend cuda (fp32)") &&
                      strstr(e.msg, cuda_precision_name((cuda_precision)p)),
                  "%s", e.msg);
    }
    bk_ctx *c = backend_cuda()->create(0, &e);
    cr_assert_not_null(c, "fp32 runs on sm_75: %s", e.msg);
    backend_cuda()->destroy(c);
    setenv("CUEMU_CC", "8.6", 1);
    c = backend_cuda_precision(CUDA_BF16)->create(0, &e);
    cr_assert_not_null(c, "bf16 runs on sm_86: %s", e.msg);
    backend_cuda_precision(CUDA_BF16)->destroy(c);
}
#endif

/* ------------------------------------------------------------------ harness */

/* A backend context and the buffers put() gave it (close_side frees them). */
typedef struct side {
    const backend *b;
    bk_ctx *c;
    void *bufs[16];
    int nbufs;
} side;

static side open_side_on(const backend *b, int device)
{
    plumb_err e = {{0}};
    side s = {b, b->create(device, &e), {0}, 0};
    cr_assert_not_null(s.c, "%s: %s", b->name, e.msg);
    return s;
}

static side open_side(const backend *b) { return open_side_on(b, 0); }

static void close_side(side *s)
{
    plumb_err e = {{0}};
    cr_assert_eq(s->b->sync(s->c, &e), 0, "%s: %s", s->b->name, e.msg);
    for (int i = 0; i < s->nbufs; i++) s->b->free(s->c, s->bufs[i]);
    s->b->destroy(s->c);
}

/* A buffer of `bytes` on the side, holding h's bytes (h NULL: zeros); freed by close_side. */
static void *put(side *s, const void *h, size_t bytes)
{
    plumb_err e = {{0}};
    cr_assert_lt(s->nbufs, 16, "test_cuda: more than 16 buffers on one side");
    void *d = s->b->alloc(s->c, bytes, &e);
    cr_assert_not_null(d, "%s", e.msg);
    if (h) s->b->upload(s->c, d, h, bytes);
    s->bufs[s->nbufs++] = d;
    return d;
}

/* Frees the side's buffer d now (before close_side). */
static void drop(side *s, void *d)
{
    for (int i = 0; i < s->nbufs; i++)
        if (s->bufs[i] == d) {
            s->b->free(s->c, d);
            s->bufs[i] = s->bufs[--s->nbufs];
            return;
        }
    cr_assert_fail("test_cuda: drop of a buffer the side does not hold");
}

static void get(side *s, void *h, const void *d, size_t bytes)
{
    plumb_err e = {{0}};
    s->b->download(s->c, h, d, bytes);
    cr_assert_eq(s->b->sync(s->c, &e), 0, "%s: %s", s->b->name, e.msg);
}

static float *host_rand(size_t n, unsigned long long seed, float lo, float hi)
{
    float *h = malloc(n * sizeof *h + 1);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
    return h;
}

/* The CPU reference of a precision: cpu-bf16 (inputs rounded to bf16 the same way, fp32
 * accumulation) for bf16, so that the error left is summation order and any TF32 fallback
 * of cuDNN; the fp32 CPU backend otherwise (TF32 has no CPU twin). */
static const backend *cpu_ref(cuda_precision p)
{
    return p == CUDA_BF16 ? backend_cpu_bf16() : backend_cpu();
}

static double tol_of(cuda_precision p)
{
    return p == CUDA_FP32 ? TOL_FP32 : p == CUDA_TF32 ? TOL_TF32 : TOL_BF16;
}

/* Compares n floats of the CUDA result `got` with the CPU's `ref`; logs to the report. */
static void expect_close(const char *what, cuda_precision p, const float *got, const float *ref,
                         size_t n)
{
    double mx = 0, diff = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(ref[i]));
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= diff)) diff = d, at = i; /* NaN counts as the worst */
    }
    double err = diff / fmax(mx, 1e-30), tol = tol_of(p);
    int ok = err <= tol;
    const char *rep = getenv("PLUMB_CUDA_REPORT");
    if (rep && *rep) {
        FILE *f = fopen(rep, "a");
        if (f) {
            fprintf(f, "%s\t%s\t%.3g\t%.0e\t%s\n", what, cuda_precision_name(p), err, tol,
                    ok ? "ok" : "FAIL");
            fclose(f);
        }
    }
    cr_expect(ok, "%s (%s): normalized max error %.3g > tolerance %.0e (at %zu: cuda %.8g, cpu "
                  "%.8g)", what, cuda_precision_name(p), err, tol, at, got[at], ref[at]);
}

/* ------------------------------------------------------------------ dense math */

static void gemm_case(cuda_precision p, int ta, int tb)
{
    const int M = 33, N = 47, K = 65, lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb,
                 nc = (size_t)M * ldc;
    float *A = host_rand(na, 1, -1, 1), *B = host_rand(nb, 2, -1, 1), *C = host_rand(nc, 3, -1, 1);
    float *out[2];
    const backend *bs[2] = {cpu_ref(p), backend_cuda_precision(p)};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *a = put(&s, A, na * 4), *b = put(&s, B, nb * 4), *c = put(&s, C, nc * 4);
        s.b->gemm(s.c, ta, tb, M, N, K, 0.75f, a, lda, b, ldb, 0.5f, c, ldc);
        out[k] = malloc(nc * 4);
        get(&s, out[k], c, nc * 4);
        close_side(&s);
    }
    char what[32];
    snprintf(what, sizeof what, "gemm %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
    expect_close(what, p, out[1], out[0], nc);
    free(A), free(B), free(C), free(out[0]), free(out[1]);
}

Test(cuda, gemm_all_transposes)
{
    need_gpu();
    for (int t = 0; t < 4; t++) gemm_case(CUDA_FP32, t & 1, t >> 1);
    gemm_case(CUDA_TF32, 0, 1);
    gemm_case(CUDA_BF16, 1, 0);
}

Test(cuda, axpy_scale_add)
{
    need_gpu();
    const size_t n = 100003;
    float *X = host_rand(n, 4, -2, 2), *Y = host_rand(n, 5, -2, 2), *out[2];
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, n * 4), *y = put(&s, Y, n * 4), *z = put(&s, NULL, n * 4);
        s.b->axpy(s.c, n, -0.3f, x, y);
        s.b->scale(s.c, n, 1.7f, y);
        s.b->add(s.c, n, x, y, z);
        out[k] = malloc(n * 4);
        get(&s, out[k], z, n * 4);
        close_side(&s);
    }
    expect_close("axpy+scale+add", CUDA_FP32, out[1], out[0], n);
    free(X), free(Y), free(out[0]), free(out[1]);
}

/* ------------------------------------------------------------------ linear */

static void linear_case(cuda_precision p)
{
    const int N = 300, in = 300, out = 70; /* N: three row chunks of the bias reduction */
    float *X = host_rand((size_t)N * in, 6, -1, 1), *W = host_rand((size_t)out * in, 7, -.1f, .1f);
    float *Bb = host_rand(out, 8, -1, 1), *DY = host_rand((size_t)N * out, 9, -1, 1);
    float *DW0 = host_rand((size_t)out * in, 10, -1, 1), *DB0 = host_rand(out, 11, -1, 1);
    float *y[2], *dx[2], *dw[2], *db[2];
    const backend *bs[2] = {cpu_ref(p), backend_cuda_precision(p)};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, (size_t)N * in * 4), *w = put(&s, W, (size_t)out * in * 4);
        float *b = put(&s, Bb, out * 4), *d = put(&s, DY, (size_t)N * out * 4);
        float *yy = put(&s, NULL, (size_t)N * out * 4), *ddx = put(&s, NULL, (size_t)N * in * 4);
        float *ddw = put(&s, DW0, (size_t)out * in * 4), *ddb = put(&s, DB0, out * 4);
        s.b->linear_fwd(s.c, N, in, out, x, w, b, yy);
        s.b->linear_bwd_data(s.c, N, in, out, d, w, ddx);
        s.b->linear_bwd_weight(s.c, N, in, out, d, x, ddw, ddb); /* accumulates */
        y[k] = malloc((size_t)N * out * 4), dx[k] = malloc((size_t)N * in * 4);
        dw[k] = malloc((size_t)out * in * 4), db[k] = malloc(out * 4);
        get(&s, y[k], yy, (size_t)N * out * 4);
        get(&s, dx[k], ddx, (size_t)N * in * 4);
        get(&s, dw[k], ddw, (size_t)out * in * 4);
        get(&s, db[k], ddb, out * 4);
        close_side(&s);
    }
    expect_close("linear fwd", p, y[1], y[0], (size_t)N * out);
    expect_close("linear bwd data", p, dx[1], dx[0], (size_t)N * in);
    expect_close("linear bwd weight", p, dw[1], dw[0], (size_t)out * in);
    expect_close("linear bwd bias", p, db[1], db[0], out);
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(dw[k]), free(db[k]);
    free(X), free(W), free(Bb), free(DY), free(DW0), free(DB0);
}

Test(cuda, linear)
{
    need_gpu();
    linear_case(CUDA_FP32);
    linear_case(CUDA_TF32);
    linear_case(CUDA_BF16);
}

/* ------------------------------------------------------------------ convolution, pooling */

static void conv_case(cuda_precision p, bk_conv g)
{
    g.P = (g.H + 2 * g.pad - g.kernel) / g.stride + 1;
    g.Q = (g.W + 2 * g.pad - g.kernel) / g.stride + 1;
    const size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.K * g.P * g.Q;
    const size_t nw = (size_t)g.K * g.C * g.kernel * g.kernel;
    float *X = host_rand(nx, 12, -1, 1), *W = host_rand(nw, 13, -.3f, .3f);
    float *Bb = host_rand(g.K, 14, -1, 1), *DY = host_rand(ny, 15, -1, 1);
    float *DW0 = host_rand(nw, 16, -1, 1), *DB0 = host_rand(g.K, 17, -1, 1);
    float *y[2], *dx[2], *dw[2], *db[2];
    const backend *bs[2] = {cpu_ref(p), backend_cuda_precision(p)};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, nx * 4), *w = put(&s, W, nw * 4), *b = put(&s, Bb, g.K * 4);
        float *d = put(&s, DY, ny * 4), *yy = put(&s, NULL, ny * 4), *ddx = put(&s, NULL, nx * 4);
        float *ddw = put(&s, DW0, nw * 4), *ddb = put(&s, DB0, g.K * 4);
        for (int rep = 0; rep < 2; rep++) { /* the second pass runs on the cached plan */
            s.b->conv2d_fwd(s.c, &g, x, w, b, yy);
            s.b->conv2d_bwd_data(s.c, &g, d, w, ddx);
        }
        s.b->conv2d_bwd_weight(s.c, &g, d, x, ddw, ddb);
        y[k] = malloc(ny * 4), dx[k] = malloc(nx * 4), dw[k] = malloc(nw * 4);
        db[k] = malloc(g.K * 4);
        get(&s, y[k], yy, ny * 4);
        get(&s, dx[k], ddx, nx * 4);
        get(&s, dw[k], ddw, nw * 4);
        get(&s, db[k], ddb, g.K * 4);
        close_side(&s);
    }
    char what[96];
    const char *part[4] = {"fwd", "bwd data", "bwd filter", "bwd bias"};
    float **got[4] = {y, dx, dw, db};
    size_t n[4] = {ny, nx, nw, (size_t)g.K};
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof what, "conv %dx%d/%d p%d C%d K%d %s", g.kernel, g.kernel, g.stride,
                 g.pad, g.C, g.K, part[i]);
        expect_close(what, p, got[i][1], got[i][0], n[i]);
    }
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(dw[k]), free(db[k]);
    free(X), free(W), free(Bb), free(DY), free(DW0), free(DB0);
}

Test(cuda, conv2d)
{
    need_gpu();
    const bk_conv gs[] = {
        {.B = 4, .C = 3, .H = 17, .W = 17, .K = 8, .kernel = 3, .stride = 1, .pad = 1},
        {.B = 2, .C = 5, .H = 12, .W = 12, .K = 6, .kernel = 5, .stride = 2, .pad = 2},
        {.B = 3, .C = 16, .H = 8, .W = 8, .K = 32, .kernel = 1, .stride = 1, .pad = 0},
        {.B = 8, .C = 64, .H = 14, .W = 14, .K = 64, .kernel = 3, .stride = 1, .pad = 1},
    };
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) conv_case(CUDA_FP32, gs[i]);
    conv_case(CUDA_TF32, gs[3]);
    conv_case(CUDA_BF16, gs[3]);
    conv_case(CUDA_BF16, gs[1]);
}

/* ties: inputs rounded to multiples of 1/2, so most windows hold several maxima and the
 * backward checks the first-maximum rule (the CPU's) element by element. */
static void pool_case(bk_pool g, int ties)
{
    g.P = (g.H - g.kernel) / g.stride + 1;
    g.Q = (g.W - g.kernel) / g.stride + 1;
    const size_t nx = (size_t)g.B * g.C * g.H * g.W, ny = (size_t)g.B * g.C * g.P * g.Q;
    float *X = host_rand(nx, 18, -1, 1), *DY = host_rand(ny, 19, -1, 1), *y[2], *dx[2];
    for (size_t i = 0; ties && i < nx; i++) X[i] = roundf(X[i] * 2.0f) / 2.0f;
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, nx * 4), *d = put(&s, DY, ny * 4);
        float *yy = put(&s, NULL, ny * 4), *ddx = put(&s, NULL, nx * 4);
        s.b->maxpool_fwd(s.c, &g, x, yy);
        s.b->maxpool_bwd(s.c, &g, x, d, ddx);
        y[k] = malloc(ny * 4), dx[k] = malloc(nx * 4);
        get(&s, y[k], yy, ny * 4);
        get(&s, dx[k], ddx, nx * 4);
        close_side(&s);
    }
    char what[64];
    snprintf(what, sizeof what, "maxpool %d/%d%s fwd", g.kernel, g.stride, ties ? " ties" : "");
    expect_close(what, CUDA_FP32, y[1], y[0], ny);
    snprintf(what, sizeof what, "maxpool %d/%d%s bwd", g.kernel, g.stride, ties ? " ties" : "");
    expect_close(what, CUDA_FP32, dx[1], dx[0], nx);
    /* each dx element is a sum of the same dy values in the same order on both backends */
    if (ties)
        for (size_t i = 0; i < nx; i++)
            cr_expect_eq(dx[1][i], dx[0][i], "%s [%zu]: cuda %.8g, cpu %.8g", what, i,
                         dx[1][i], dx[0][i]);
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]);
    free(X), free(DY);
}

Test(cuda, maxpool)
{
    need_gpu();
    pool_case((bk_pool){.B = 3, .C = 4, .H = 10, .W = 11, .kernel = 2, .stride = 2}, 0);
    pool_case((bk_pool){.B = 2, .C = 3, .H = 13, .W = 13, .kernel = 3, .stride = 2}, 0);
    pool_case((bk_pool){.B = 2, .C = 3, .H = 13, .W = 13, .kernel = 3, .stride = 2}, 1);
}

/* ------------------------------------------------------------------ element-wise, loss */

Test(cuda, relu_gelu)
{
    need_gpu();
    const size_t n = 50001;
    float *X = host_rand(n, 20, -4, 4), *DY = host_rand(n, 21, -1, 1), *o[2][4];
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, n * 4), *d = put(&s, DY, n * 4), *r[4];
        for (int i = 0; i < 4; i++) r[i] = put(&s, NULL, n * 4);
        s.b->relu_fwd(s.c, n, x, r[0]);
        s.b->relu_bwd(s.c, n, x, d, r[1]);
        s.b->gelu_fwd(s.c, n, x, r[2]);
        s.b->gelu_bwd(s.c, n, x, d, r[3]);
        for (int i = 0; i < 4; i++) {
            o[k][i] = malloc(n * 4);
            get(&s, o[k][i], r[i], n * 4);
        }
        close_side(&s);
    }
    const char *names[4] = {"relu fwd", "relu bwd", "gelu fwd", "gelu bwd"};
    for (int i = 0; i < 4; i++) expect_close(names[i], CUDA_FP32, o[1][i], o[0][i], n);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) free(o[k][i]);
    free(X), free(DY);
}

Test(cuda, softmax_cross_entropy)
{
    need_gpu();
    const int N = 37, V = 1000;
    float *Z = host_rand((size_t)N * V, 22, -5, 5), *o[2][4];
    int32_t T[37];
    for (int i = 0; i < N; i++) T[i] = (i * 7919) % V;
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    size_t n[4] = {(size_t)N * V, (size_t)N, (size_t)N, (size_t)N * V};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *z = put(&s, Z, (size_t)N * V * 4);
        int32_t *t = put(&s, T, sizeof T);
        float *r[4];
        for (int i = 0; i < 4; i++) r[i] = put(&s, NULL, n[i] * 4);
        s.b->xent_fwd(s.c, N, V, z, t, r[0], r[1], r[2]);
        s.b->xent_bwd(s.c, N, V, r[0], t, 1.0f / N, r[3]);
        for (int i = 0; i < 4; i++) {
            o[k][i] = malloc(n[i] * 4);
            get(&s, o[k][i], r[i], n[i] * 4);
        }
        close_side(&s);
    }
    const char *names[4] = {"xent probs", "xent loss", "xent correct", "xent bwd"};
    for (int i = 0; i < 4; i++) expect_close(names[i], CUDA_FP32, o[1][i], o[0][i], n[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) free(o[k][i]);
    free(Z);
}

/* The vocabulary-parallel loss's entries (backend.h: xent_tp_*) over a group of 3 ranks of
 * 333 classes (not a multiple of the block), the group's sums on the host in rank order
 * (tests/tpxent.h); rows whose target is the maximum and rows shifted by +60. The CUDA
 * kernels sum each row's exponentials in fp32 in block order, the CPU in double. */
Test(cuda, vocab_parallel_cross_entropy)
{
    need_gpu();
    const int N = 37, T = 3, v = 333, V = T * v;
    float *Z = host_rand((size_t)N * V, 23, -5, 5), *o[2][4];
    int32_t t[37];
    for (int i = 0; i < N; i++) {
        t[i] = (int32_t)(((long long)i * 7919 + 5) % V);
        if (i % 3 == 0) Z[(size_t)i * V + t[i]] += 10.0f;
        if (i % 5 == 1)
            for (int j = 0; j < V; j++) Z[(size_t)i * V + j] += 60.0f;
    }
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    size_t n[4] = {(size_t)N * V, (size_t)N, (size_t)N, (size_t)N * V};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        plumb_err e = {{0}};
        int differ = 0;
        for (int i = 0; i < 4; i++) o[k][i] = malloc(n[i] * 4);
        cr_assert_eq(tpxent_group(s.b, s.c, N, T, v, Z, t, 1.0f / N, o[k][0], o[k][1],
                                  o[k][2], o[k][3], &differ, &e), 0, "%s: %s", s.b->name,
                     e.msg);
        cr_expect_eq(differ, 0, "%s: every rank's loss and correct agree", s.b->name);
        close_side(&s);
    }
    float ones = 0;
    for (int i = 0; i < N; i++) ones += o[0][2][i];
    cr_expect_gt(ones, 0, "some rows are correct");
    const char *names[4] = {"xent_tp probs", "xent_tp loss", "xent_tp correct", "xent_tp bwd"};
    for (int i = 0; i < 4; i++) expect_close(names[i], CUDA_FP32, o[1][i], o[0][i], n[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) free(o[k][i]);
    free(Z);
}

/* ------------------------------------------------------------------ transformer layers */

Test(cuda, layernorm)
{
    need_gpu();
    const int N = 333, D = 300; /* three row chunks of the weight reductions */
    const size_t nd = (size_t)N * D;
    float *X = host_rand(nd, 23, -2, 3), *G = host_rand(D, 24, .5f, 1.5f);
    float *Bt = host_rand(D, 25, -1, 1), *DY = host_rand(nd, 26, -1, 1), *o[2][6];
    size_t n[6] = {nd, (size_t)N, (size_t)N, nd, (size_t)D, (size_t)D};
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *x = put(&s, X, nd * 4), *g = put(&s, G, D * 4), *b = put(&s, Bt, D * 4);
        float *d = put(&s, DY, nd * 4), *r[6];
        for (int i = 0; i < 6; i++) r[i] = put(&s, NULL, n[i] * 4);
        s.b->layernorm_fwd(s.c, N, D, x, g, b, r[0], r[1], r[2]);
        s.b->layernorm_bwd_data(s.c, N, D, x, g, r[1], r[2], d, r[3]);
        s.b->layernorm_bwd_weight(s.c, N, D, x, r[1], r[2], d, r[4], r[5]);
        for (int i = 0; i < 6; i++) {
            o[k][i] = malloc(n[i] * 4);
            get(&s, o[k][i], r[i], n[i] * 4);
        }
        close_side(&s);
    }
    const char *names[6] = {"layernorm fwd", "layernorm mean", "layernorm rstd",
                            "layernorm bwd data", "layernorm bwd gamma", "layernorm bwd beta"};
    for (int i = 0; i < 6; i++) expect_close(names[i], CUDA_FP32, o[1][i], o[0][i], n[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 6; i++) free(o[k][i]);
    free(X), free(G), free(Bt), free(DY);
}

Test(cuda, embedding)
{
    need_gpu();
    const int B = 3, T = 20, V = 50, D = 40;
    float tok[60];
    for (int i = 0; i < B * T; i++) tok[i] = (float)((i * 13) % 17); /* repeated ids */
    float *WTE = host_rand((size_t)V * D, 27, -1, 1), *WPE = host_rand((size_t)T * D, 28, -1, 1);
    float *DY = host_rand((size_t)B * T * D, 29, -1, 1), *o[2][3];
    size_t n[3] = {(size_t)B * T * D, (size_t)V * D, (size_t)T * D};
    const backend *bs[2] = {backend_cpu(), backend_cuda()};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *t = put(&s, tok, sizeof tok), *wte = put(&s, WTE, n[1] * 4);
        float *wpe = put(&s, WPE, n[2] * 4), *d = put(&s, DY, n[0] * 4), *r[3];
        for (int i = 0; i < 3; i++) r[i] = put(&s, NULL, n[i] * 4);
        s.b->embedding_fwd(s.c, B, T, V, D, t, wte, wpe, r[0]);
        s.b->embedding_bwd_weight(s.c, B, T, V, D, t, d, r[1], r[2]);
        for (int i = 0; i < 3; i++) {
            o[k][i] = malloc(n[i] * 4);
            get(&s, o[k][i], r[i], n[i] * 4);
        }
        close_side(&s);
    }
    const char *names[3] = {"embedding fwd", "embedding bwd wte", "embedding bwd wpe"};
    for (int i = 0; i < 3; i++) expect_close(names[i], CUDA_FP32, o[1][i], o[0][i], n[i]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) free(o[k][i]);
    free(WTE), free(WPE), free(DY);
}

static void attention_case(cuda_precision p)
{
    const int B = 3, T = 24, D = 48, H = 4;
    size_t n[4] = {(size_t)B * T * 3 * D, (size_t)B * H * T * T, (size_t)B * T * D,
                   (size_t)B * T * 3 * D};
    float *QKV = host_rand(n[0], 30, -1, 1), *DY = host_rand(n[2], 31, -1, 1), *o[2][3];
    const backend *bs[2] = {cpu_ref(p), backend_cuda_precision(p)};
    for (int k = 0; k < 2; k++) {
        side s = open_side(bs[k]);
        float *qkv = put(&s, QKV, n[0] * 4), *d = put(&s, DY, n[2] * 4);
        float *att = put(&s, NULL, n[1] * 4), *y = put(&s, NULL, n[2] * 4);
        float *dq = put(&s, NULL, n[3] * 4);
        s.b->attention_fwd(s.c, B, T, D, H, qkv, att, y);
        s.b->attention_bwd(s.c, B, T, D, H, qkv, att, d, dq);
        float *r[3] = {att, y, dq};
        for (int i = 0; i < 3; i++) {
            o[k][i] = malloc(n[i + 1] * 4);
            get(&s, o[k][i], r[i], n[i + 1] * 4);
        }
        close_side(&s);
    }
    const char *names[3] = {"attention probs", "attention fwd", "attention bwd"};
    for (int i = 0; i < 3; i++) expect_close(names[i], p, o[1][i], o[0][i], n[i + 1]);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) free(o[k][i]);
    free(QKV), free(DY);
}

Test(cuda, attention)
{
    need_gpu();
    attention_case(CUDA_FP32);
    attention_case(CUDA_BF16);
}

/* ------------------------------------------------------------------ optimizers */

Test(cuda, optimizers)
{
    need_gpu();
    const size_t n = 4099;
    const char *names[3] = {"sgd", "momentum", "adam"};
    for (int kind = 0; kind < 3; kind++) {
        float *W = host_rand(n, 32, -1, 1), *out[2];
        const backend *bs[2] = {backend_cpu(), backend_cuda()};
        for (int k = 0; k < 2; k++) {
            side s = open_side(bs[k]);
            float *w = put(&s, W, n * 4), *m = put(&s, NULL, n * 4), *v = put(&s, NULL, n * 4);
            for (int step = 1; step <= 5; step++) {
                float *G = host_rand(n, 40 + step, -1, 1);
                float *g = put(&s, G, n * 4);
                bk_opt o = {.kind = kind, .lr = 0.01f, .momentum = 0.9f, .beta1 = 0.9f,
                            .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .step = step};
                s.b->opt_step(s.c, &o, n, w, g, kind ? m : NULL, kind == 2 ? v : NULL);
                get(&s, G, g, 4); /* waits before g is freed */
                drop(&s, g);
                free(G);
            }
            out[k] = malloc(n * 4);
            get(&s, out[k], w, n * 4);
            close_side(&s);
        }
        char what[32];
        snprintf(what, sizeof what, "optimizer %s x5", names[kind]);
        expect_close(what, CUDA_FP32, out[1], out[0], n);
        free(W), free(out[0]), free(out[1]);
    }
}

/* ------------------------------------------------------------------ hand-offs, errors */

Test(cuda, handoff_between_contexts)
{
    need_gpu();
    const size_t n = 1 << 20;
    float *X = host_rand(n, 50, -1, 1), *back = malloc(n * 4);
    side a = open_side(backend_cuda()), b = open_side(backend_cuda());
    plumb_err e = {{0}};
    bk_mark *sent = cuda_mark_new(a.c, &e), *done = cuda_mark_new(b.c, &e);
    cr_assert(sent && done, "%s", e.msg);
    float *src = put(&a, X, n * 4), *y = put(&a, NULL, n * 4), *dst = put(&b, NULL, n * 4);
    get(&a, back, src, 4); /* X is on the device */
    a.b->relu_fwd(a.c, n, src, y); /* the producer's work, queued on a's stream */
    cuda_mark_record(a.c, sent);
    cuda_mark_wait(b.c, sent);
    cuda_copy_peer(b.c, dst, a.c, y, n * 4);
    cuda_mark_record(b.c, done);
    cuda_mark_wait(a.c, done);
    a.b->zero(a.c, y, n * 4); /* ordered after the copy by `done` */
    get(&b, back, dst, n * 4);
    for (size_t i = 0; i < n; i++) X[i] = X[i] > 0 ? X[i] : 0;
    expect_close("handoff copy", CUDA_FP32, back, X, n);
    cuda_mark_free(sent), cuda_mark_free(done);
    close_side(&a), close_side(&b);
    free(X), free(back);
}

/* The same hand-off between two GPUs (peer copy, events of two devices); skipped with one. */
Test(cuda, handoff_between_devices)
{
    need_gpu();
    plumb_err e = {{0}};
    if (cuda_device_count(&e) < 2) cr_skip_test("CUDA test skipped: it needs 2 GPUs");
    const size_t n = 100003;
    float *X = host_rand(n, 53, -1, 1), *back = malloc(n * 4);
    side a = open_side(backend_cuda()), b = open_side_on(backend_cuda(), 1);
    cr_assert_eq(cuda_ctx_device(b.c), 1);
    bk_mark *sent = cuda_mark_new(a.c, &e), *done = cuda_mark_new(b.c, &e);
    cr_assert(sent && done, "%s", e.msg);
    float *src = put(&a, X, n * 4), *y = put(&a, NULL, n * 4), *dst = put(&b, NULL, n * 4);
    a.b->relu_fwd(a.c, n, src, y);
    cuda_mark_record(a.c, sent);
    cuda_mark_wait(b.c, sent);
    cuda_copy_peer(b.c, dst, a.c, y, n * 4);
    cuda_mark_record(b.c, done);
    cuda_mark_wait(a.c, done);
    a.b->zero(a.c, y, n * 4);
    b.b->scale(b.c, n, 2.0f, dst); /* device 1 works on its copy */
    get(&b, back, dst, n * 4);
    for (size_t i = 0; i < n; i++) cr_assert_eq(back[i], 2 * (X[i] > 0 ? X[i] : 0), "[%zu]", i);
    cuda_mark_free(sent), cuda_mark_free(done);
    close_side(&a), close_side(&b);
    free(X), free(back);
}

/* The CUDA backend with create wrapped: each context's device is counted. */
static pthread_mutex_t dev_mu = PTHREAD_MUTEX_INITIALIZER;
static int dev_count[16];
static backend dev_bk;

static bk_ctx *dev_create(int device, plumb_err *err)
{
    bk_ctx *c = backend_cuda()->create(device, err);
    if (!c) return NULL;
    pthread_mutex_lock(&dev_mu);
    int d = cuda_ctx_device(c);
    if (d >= 0 && d < 16) dev_count[d]++;
    pthread_mutex_unlock(&dev_mu);
    return c;
}

/* A local pipelined run puts worker w on device --device + w mod --devices (the rule is
 * written out here, not taken from train_worker_device): 4 workers, each case's contexts
 * counted per device, and each worker's peak memory line names that device. Before: worker
 * w on w mod --devices, --device ignored; the line named the schedule's device id (w). */
Test(cuda, pipeline_workers_take_device_plus_w_mod_devices)
{
    need_gpu();
    plumb_err e = {{0}};
    int n = cuda_device_count(&e);
    if (n < 2) cr_skip_test("CUDA test skipped: it needs 2 GPUs");
    dev_bk = *backend_cuda();
    dev_bk.create = dev_create;
    model *m = model_parse("m.json", "{\"format\":\"plumb-model/1\",\"input\":[12],\"classes\":4,"
                           "\"seed\":3,\"layers\":[{\"type\":\"linear\",\"out\":16},{\"type\":"
                           "\"linear\",\"out\":16},{\"type\":\"linear\",\"out\":16},{\"type\":"
                           "\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}", &e);
    cr_assert_not_null(m, "%s", e.msg);
    dataset *d = data_synthetic(m, 64, 1, &e);
    cr_assert_not_null(d, "%s", e.msg);
    const int cases[][2] = {{1, 1}, {0, 2}, {1, 2}, {0, 1}}; /* --device, --devices */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int dev = cases[k][0], nd = cases[k][1];
        if (dev + nd > n) continue; /* {1, 2} needs 3 devices */
        char *log = NULL;
        size_t loglen = 0;
        FILE *lf = open_memstream(&log, &loglen);
        cr_assert_not_null(lf);
        train_run_cfg cfg = {.bk = &dev_bk, .device = dev, .m = m, .train = d, .epochs = 1,
                             .steps = 2, .seed = 1, .log = lf,
                             .cfg = {.microbatch = 4, .microbatches = 4,
                                     .opt = train_default_opt(0)}};
        train_pipeline tp;
        cr_assert_eq(train_from_plan(&cfg, NULL, "1f1b-flush", 4, 4, &tp, &e), 0, "%s", e.msg);
        cr_assert_eq(tp.sched->nworkers, 4);
        memset(dev_count, 0, sizeof dev_count);
        train_result res;
        int rc = train_run_pipeline(&cfg, tp.sched, tp.first, tp.last, nd, &res, NULL, &e);
        train_pipeline_free(&tp);
        cr_assert_eq(fclose(lf), 0);
        cr_assert_eq(rc, 0, "--device %d --devices %d: %s", dev, nd, e.msg);
        int want[16] = {0};
        for (int w = 0; w < 4; w++) {
            want[dev + w % nd]++;
            char line[64];
            snprintf(line, sizeof line, "worker %d (device %d): peak memory ", w, dev + w % nd);
            cr_expect(strstr(log, line), "--device %d --devices %d: no line \"%s\" in:\n%s",
                      dev, nd, line, log);
        }
        free(log);
        for (int x = 0; x < 16; x++)
            cr_expect_eq(dev_count[x], want[x], "--device %d --devices %d: %d contexts on "
                         "device %d, expected %d", dev, nd, dev_count[x], x, want[x]);
    }
    /* before any work: every device must exist */
    cr_expect_eq(train_devices_check(backend_cuda(), 0, n, &e), 0, "%s", e.msg);
    cr_expect_eq(train_devices_check(backend_cuda(), n - 1, 2, &e), -1);
    cr_expect(strstr(e.msg, "--devices: ") == e.msg, "%s", e.msg);
    char want[32];
    snprintf(want, sizeof want, "device %d is missing", n);
    cr_expect(strstr(e.msg, want), "%s", e.msg);
    cr_expect_eq(train_devices_check(backend_cuda(), n, 1, &e), -1);
    cr_expect(strstr(e.msg, "expected a CUDA device index"), "%s", e.msg);
    data_free(d);
    model_free(m);
}

typedef struct ar_peer {
    transport *t;
    side s;
    int self;
    float *buf;
    size_t n;
    int rc;
    plumb_err err;
} ar_peer;

static void *ar_main(void *p)
{
    ar_peer *q = p;
    int group[2] = {0, 1};
    q->rc = q->t->allreduce(q->t, q->s.b, q->s.c, q->self, group, 2, 5, q->buf, q->n,
                            &q->err);
    if (!q->rc) q->rc = q->s.b->sync(q->s.c, &q->err);
    return NULL;
}

/* The local transport between two CUDA contexts moves messages by device copies (the
 * backend's hand-off entries): the sender may overwrite its buffer at once, and an
 * all-reduce sums on the GPU; release frees the staging buffers before the contexts go. */
Test(cuda, local_transport_between_contexts)
{
    need_gpu();
    const size_t n = 1 << 18;
    float *X = host_rand(n, 51, -1, 1), *Y = host_rand(n, 52, -1, 1), *back = malloc(n * 4);
    side a = open_side(backend_cuda()), b = open_side(backend_cuda());
    plumb_err e = {{0}};
    transport *t = transport_local_create(2, 30, &e);
    cr_assert(t, "%s", e.msg);
    float *src = put(&a, X, n * 4), *y = put(&a, NULL, n * 4), *dst = put(&b, NULL, n * 4);
    a.b->relu_fwd(a.c, n, src, y);
    cr_assert_eq(t->send(t, a.b, a.c, 0, 1, 3, y, n * 4, &e), 0, "%s", e.msg);
    a.b->zero(a.c, y, n * 4); /* the message holds its own copy */
    cr_assert_eq(t->recv(t, b.b, b.c, 1, 0, 3, dst, n * 4, &e), 0, "%s", e.msg);
    get(&b, back, dst, n * 4);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(back[i], X[i] > 0 ? X[i] : 0, "sent [%zu]", i);
    /* all-reduce of X (on a) and Y (on b): both end with X + Y */
    float *bx = put(&a, X, n * 4), *by = put(&b, Y, n * 4);
    ar_peer p[2] = {{t, a, 0, bx, n, 0, {{0}}}, {t, b, 1, by, n, 0, {{0}}}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, ar_main, &p[1]), 0);
    ar_main(&p[0]);
    pthread_join(th, NULL);
    for (int k = 0; k < 2; k++) cr_assert_eq(p[k].rc, 0, "member %d: %s", k, p[k].err.msg);
    for (int k = 0; k < 2; k++) {
        get(k ? &b : &a, back, k ? by : bx, n * 4);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(back[i], X[i] + Y[i], "member %d [%zu]", k, i);
    }
    t->release(t, a.b, a.c, 0, 0);
    t->release(t, b.b, b.c, 1, 0);
    close_side(&a), close_side(&b);
    t->destroy(t);
    free(X), free(Y), free(back);
}

/* A one-rank communicator: a grouped send to itself and receive from itself, then an
 * all-reduce (the mean over one rank leaves the data unchanged). */
Test(cuda, nccl_one_rank_send_recv_allreduce)
{
    plumb_err e = {{0}};
    if (!nccl_available(&e)) {
        cr_assert(strstr(e.msg, "not built"), "%s", e.msg);
        cr_skip_test("NCCL test skipped: %s", e.msg);
    }
    need_gpu();
    const size_t n = 300001;
    float *X = host_rand(n, 60, -1, 1), *back = malloc(n * 4);
    side s = open_side(backend_cuda());
    unsigned char id[NCCL_ID_BYTES];
    cr_assert_eq(nccl_make_id(id, &e), 0, "%s", e.msg);
    nccl_comm *nc = nccl_open(s.c, id, 1, 0, 60.0, &e);
    cr_assert_not_null(nc, "%s", e.msg);
    cr_assert_eq(nccl_rank(nc), 0);
    cr_assert_eq(nccl_size(nc), 1);
    float *a = put(&s, X, n * 4), *b = put(&s, NULL, n * 4);
    nccl_group_begin(nc);
    nccl_send(nc, a, n * 4, 0);
    nccl_recv(nc, b, n * 4, 0);
    cr_assert_eq(nccl_group_end(nc, 60.0, &e), 0, "%s", e.msg);
    cr_assert_eq(nccl_wait(nc, 60.0, &e), 0, "%s", e.msg);
    get(&s, back, b, n * 4);
    expect_close("nccl self send/recv", CUDA_FP32, back, X, n);
    nccl_allreduce_start(nc, b, n);
    cr_assert_eq(nccl_allreduce_finish(nc, &e), 0, "%s", e.msg);
    get(&s, back, b, n * 4);
    expect_close("nccl 1-rank all-reduce", CUDA_FP32, back, X, n);
    nccl_close(nc);
    close_side(&s);
    free(X), free(back);
}

/* Two ranks as threads of one process, one GPU each: a grouped exchange (each receives the
 * other's buffer), an all-reduce (mean), and a split that reverses the ranks by key. */
typedef struct nccl_rank_run {
    const unsigned char *id;
    int rank, ok;
    char why[1400];
} nccl_rank_run;

#define RANK_CHECK(q, cond, ...)                                                          \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            snprintf((q)->why, sizeof (q)->why, __VA_ARGS__);                             \
            return NULL;                                                                  \
        }                                                                                 \
    } while (0)

static void *nccl_rank_main(void *arg)
{
    nccl_rank_run *q = arg;
    const int r = q->rank, n = 40001;
    plumb_err e = {{0}};
    side s = open_side_on(backend_cuda(), r);
    float *h = host_rand(n, 70 + r, -1, 1), *peer = host_rand(n, 71 - r, -1, 1);
    float *back = malloc(n * 4);
    nccl_comm *nc = nccl_open(s.c, q->id, 2, r, 60.0, &e);
    RANK_CHECK(q, nc, "rank %d: open: %s", r, e.msg);
    float *a = put(&s, h, n * 4), *x = put(&s, NULL, n * 4);
    nccl_group_begin(nc);
    nccl_recv(nc, x, n * 4, 1 - r);
    nccl_send(nc, a, n * 4, 1 - r);
    RANK_CHECK(q, !nccl_group_end(nc, 60.0, &e) && !nccl_wait(nc, 60.0, &e), "rank %d: %s", r,
               e.msg);
    get(&s, back, x, n * 4);
    for (int i = 0; i < n; i++)
        RANK_CHECK(q, back[i] == peer[i], "rank %d: received [%d] %g, sent %g", r, i, back[i],
                   peer[i]);
    nccl_allreduce_start(nc, a, n);
    RANK_CHECK(q, !nccl_allreduce_finish(nc, &e) && !nccl_wait(nc, 60.0, &e), "rank %d: %s", r,
               e.msg);
    get(&s, back, a, n * 4);
    for (int i = 0; i < n; i++) {
        float want = (r ? peer[i] + h[i] : h[i] + peer[i]) / 2; /* rank 0's term first */
        RANK_CHECK(q, fabsf(back[i] - want) <= 1e-6f * fabsf(want) + 1e-7f,
                   "rank %d: mean [%d] %g, want %g", r, i, back[i], want);
    }
    nccl_comm *rev = NULL;
    RANK_CHECK(q, !nccl_split(nc, 3, -r, 60.0, &rev, &e) && rev, "rank %d: split: %s", r, e.msg);
    RANK_CHECK(q, nccl_size(rev) == 2 && nccl_rank(rev) == 1 - r, "rank %d: split gave %d of %d",
               r, nccl_rank(rev), nccl_size(rev));
    nccl_close(rev);
    nccl_close(nc);
    close_side(&s);
    free(h), free(peer), free(back);
    q->ok = 1;
    return NULL;
}

Test(cuda, nccl_two_ranks_as_threads)
{
    plumb_err e = {{0}};
    if (!nccl_available(&e)) cr_skip_test("NCCL test skipped: %s", e.msg);
    need_gpu();
    if (cuda_device_count(&e) < 2) cr_skip_test("NCCL test skipped: it needs 2 GPUs");
    unsigned char id[NCCL_ID_BYTES];
    cr_assert_eq(nccl_make_id(id, &e), 0, "%s", e.msg);
    nccl_rank_run q[2] = {{id, 0, 0, ""}, {id, 1, 0, ""}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, nccl_rank_main, &q[1]), 0);
    nccl_rank_main(&q[0]);
    pthread_join(th, NULL);
    for (int k = 0; k < 2; k++) cr_assert(q[k].ok, "%s", q[k].why);
}

/* The context counts its buffers (rounded to 256 bytes) and its workspace: the peak is the
 * most held at once, so that traces carry the measured peak memory of each device. */
Test(cuda, memory_peak_counts_buffers_and_workspace)
{
    need_gpu();
    side s = open_side(backend_cuda());
    plumb_err e = {{0}};
    cr_assert_not_null(s.b->mem_peak, "the CUDA backend measures its memory");
    size_t base = s.b->mem_peak(s.c);
    void *a = s.b->alloc(s.c, 1 << 20, &e), *b = s.b->alloc(s.c, (3 << 20) - 100, &e);
    cr_assert(a && b, "%s", e.msg);
    cr_assert_eq(s.b->mem_peak(s.c) - base, 4u << 20, "1 MiB + 3 MiB (rounded up)");
    s.b->free(s.c, a);
    void *c = s.b->alloc(s.c, 512 << 10, &e);
    cr_assert_eq(s.b->mem_peak(s.c) - base, 4u << 20, "a freed buffer no longer counts");
    s.b->free(s.c, b);
    s.b->free(s.c, c);
    cr_assert_not_null(cuda_workspace(s.c, 8u << 20));
    cr_assert_eq(s.b->mem_peak(s.c) - base, 8u << 20, "the workspace counts");
    close_side(&s);
}

Test(cuda, page_locked_host_buffers_upload)
{
    need_gpu();
    side s = open_side(backend_cuda());
    plumb_err e = {{0}};
    cr_assert(s.b->host_alloc && s.b->host_free, "the CUDA backend has page-locked buffers");
    enum { N = 1 << 16 };
    float *h = bk_host_alloc(s.b, s.c, N * sizeof *h, &e), *back = malloc(N * sizeof *back);
    cr_assert(h && back, "%s", e.msg);
    for (int i = 0; i < N; i++) h[i] = (float)i - 7.5f;
    float *d = s.b->alloc(s.c, N * sizeof *d, &e);
    cr_assert_not_null(d, "%s", e.msg);
    s.b->upload(s.c, d, h, N * sizeof *h);
    cr_assert_eq(s.b->sync(s.c, &e), 0, "%s", e.msg);
    for (int i = 0; i < N; i++) h[i] = -1; /* after the sync: the copy has read it */
    s.b->download(s.c, back, d, N * sizeof *back);
    for (int i = 0; i < N; i++) cr_assert_eq(back[i], (float)i - 7.5f, "element %d", i);
    s.b->free(s.c, d);
    bk_host_free(s.b, h);
    bk_host_free(s.b, NULL);
    free(back);
    close_side(&s);
}

Test(cuda, out_of_memory_is_reported_with_a_hint)
{
    need_gpu();
    side s = open_side(backend_cuda());
    plumb_err e = {{0}};
    cr_assert_null(s.b->alloc(s.c, (size_t)1 << 50, &e));
    cr_assert(strstr(e.msg, "CUDA error: cudaMalloc("), "%s", e.msg);
    cr_assert(strstr(e.msg, "hint: the GPU is out of memory"), "%s", e.msg);
    close_side(&s);
}

#endif
