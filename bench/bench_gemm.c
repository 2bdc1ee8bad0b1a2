/* bench_gemm.c: the CPU backend's dense and convolution throughput (GFLOP/s) against
 * OpenBLAS's own cblas_sgemm rate measured in the same run, at the same thread count (the
 * backend's: OPENBLAS_NUM_THREADS or every core; OpenBLAS's own threads for its
 * reference, the backend's pool for the backend): square GEMMs, the linear layer, and
 * conv2d forward / input-gradient / weight-gradient (im2col + GEMM) at the shapes of
 * fmnist-cnn and of a VGG-16 block.
 * Usage: bench_gemm [SECONDS_PER_CASE]   (default 0.3) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/cpu/cpu.h"
#include "exec/train.h"

typedef struct bench {
    const backend *bk;
    bk_ctx *c;
    double budget;       /* seconds per case */
} bench;

static float *rnd(bench *b, size_t n)
{
    plumb_err e = {{0}};
    float *p = b->bk->alloc(b->c, n * sizeof(float), &e);
    if (!p) { fprintf(stderr, "bench_gemm: %s\n", e.msg); exit(1); }
    unsigned long long s = n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
    }
    return p;
}

/* Runs `call` once to warm up, then until the budget is spent; out = seconds per call. */
#define TIME(b, out, call)                                                                 \
    do {                                                                                   \
        call;                                                                              \
        long n_ = 0;                                                                       \
        double t0_ = train_now(), t_;                                                      \
        do {                                                                               \
            call;                                                                          \
            n_++;                                                                          \
        } while ((t_ = train_now() - t0_) < (b)->budget);                                 \
        out = t_ / (double)n_;                                                             \
    } while (0)

/* TIME for a direct OpenBLAS call, on OpenBLAS's own threads, as many as the backend's;
 * the backend's single-threaded OpenBLAS is restored after. */
#define TIME_BLAS(b, out, call)                                                            \
    do {                                                                                   \
        int th_ = cpu_par_threads();                                                       \
        openblas_set_num_threads(th_);                                                     \
        TIME(b, out, call);                                                                \
        cpu_par_set_threads(th_);                                                          \
    } while (0)

static void square(bench *b, int n)
{
    float *A = rnd(b, (size_t)n * n), *B = rnd(b, (size_t)n * n), *C = rnd(b, (size_t)n * n);
    double flop = 2.0 * n * n * n;
    double tb;
    TIME_BLAS(b, tb, cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A,
                                    n, B, n, 0.0f, C, n));
    double tk;
    TIME(b, tk, b->bk->gemm(b->c, 0, 0, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n));
    printf("gemm %4dx%4dx%4d        openblas %7.1f GFLOP/s   backend %7.1f GFLOP/s  (%3.0f%%)\n",
           n, n, n, flop / tb * 1e-9, flop / tk * 1e-9, 100 * tb / tk);
    b->bk->free(b->c, A);
    b->bk->free(b->c, B);
    b->bk->free(b->c, C);
}

static void linear(bench *b, int N, int in, int out)
{
    float *x = rnd(b, (size_t)N * in), *w = rnd(b, (size_t)out * in), *bias = rnd(b, out);
    float *y = rnd(b, (size_t)N * out), *dx = rnd(b, (size_t)N * in);
    float *dw = rnd(b, (size_t)out * in), *db = rnd(b, out);
    double flop = 2.0 * N * in * out;
    double tb;
    TIME_BLAS(b, tb, cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x,
                                    in, w, in, 0.0f, y, out));
    double tf;
    TIME(b, tf, b->bk->linear_fwd(b->c, N, in, out, x, w, bias, y));
    double td;
    TIME(b, td, b->bk->linear_bwd_data(b->c, N, in, out, y, w, dx));
    double tw;
    TIME(b, tw, b->bk->linear_bwd_weight(b->c, N, in, out, y, x, dw, db));
    printf("linear N=%d %d->%d   openblas %7.1f GFLOP/s   fwd %7.1f  bwd-data %7.1f  "
           "bwd-weight %7.1f GFLOP/s\n",
           N, in, out, flop / tb * 1e-9, flop / tf * 1e-9, flop / td * 1e-9, flop / tw * 1e-9);
    float *ps[] = {x, w, bias, y, dx, dw, db};
    for (int i = 0; i < 7; i++) b->bk->free(b->c, ps[i]);
}

static void conv(bench *b, const char *name, int B, int C, int H, int K, int k, int pad)
{
    bk_conv g = {B, C, H, H, K, k, 1, pad, H + 2 * pad - k + 1, H + 2 * pad - k + 1};
    size_t nx = (size_t)B * C * H * H, nw = (size_t)K * C * k * k, ny = (size_t)B * K * g.P * g.Q;
    float *x = rnd(b, nx), *w = rnd(b, nw), *bias = rnd(b, K), *y = rnd(b, ny);
    float *dx = rnd(b, nx), *dw = rnd(b, nw), *db = rnd(b, K);
    double flop = 2.0 * B * K * g.P * g.Q * (double)C * k * k;
    /* the same GEMM as one call: (K, CKK) x (CKK, B P Q) */
    int M = K, N = B * g.P * g.Q, KK = C * k * k;
    float *ga = rnd(b, (size_t)M * KK), *gb = rnd(b, (size_t)KK * N), *gc = rnd(b, (size_t)M * N);
    double tb;
    TIME_BLAS(b, tb, cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, KK, 1.0f, ga,
                                    KK, gb, N, 0.0f, gc, N));
    double tf;
    TIME(b, tf, b->bk->conv2d_fwd(b->c, &g, x, w, bias, y));
    double td;
    TIME(b, td, b->bk->conv2d_bwd_data(b->c, &g, y, w, dx));
    double tw;
    TIME(b, tw, b->bk->conv2d_bwd_weight(b->c, &g, y, x, dw, db));
    printf("conv %-22s openblas %7.1f GFLOP/s   fwd %7.1f  bwd-data %7.1f  bwd-weight %7.1f "
           "GFLOP/s  (fwd at %3.0f%% of the GEMM)\n",
           name, flop / tb * 1e-9, flop / tf * 1e-9, flop / td * 1e-9, flop / tw * 1e-9,
           100 * tb / tf);
    float *ps[] = {x, w, bias, y, dx, dw, db, ga, gb, gc};
    for (int i = 0; i < 10; i++) b->bk->free(b->c, ps[i]);
}

/* The causal attention core (per (sample, head): scores, softmax, A V; backward: four
 * products) against its GEMMs alone: the same per-head products through cblas_sgemm, one
 * after another, on OpenBLAS's threads. The figure is the attention's time over that of
 * its GEMMs (100 %: the softmax and the masking cost nothing). */
static void attention(bench *b, int B, int T, int D, int H)
{
    const int hs = D / H, D3 = 3 * D;
    float *qkv = rnd(b, (size_t)B * T * D3), *att = rnd(b, (size_t)B * H * T * T);
    float *y = rnd(b, (size_t)B * T * D), *dqkv = rnd(b, (size_t)B * T * D3);
    float *s = rnd(b, (size_t)T * T);
    double tg;
    TIME_BLAS(b, tg, for (int bh = 0; bh < B * H; bh++) {
        const float *q = qkv + (size_t)(bh / H) * T * D3 + (bh % H) * hs;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, q, D3, q + D,
                    D3, 0.0f, s, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, s, T,
                    q + 2 * D, D3, 0.0f, y + (size_t)(bh / H) * T * D + (bh % H) * hs, D);
    });
    double tf, tbw;
    TIME(b, tf, b->bk->attention_fwd(b->c, B, T, D, H, qkv, att, y));
    TIME(b, tbw, b->bk->attention_bwd(b->c, B, T, D, H, qkv, att, y, dqkv));
    double flop = 4.0 * B * H * T * T * hs; /* the forward's two products */
    printf("attention B=%d T=%d D=%d H=%d   its GEMMs %7.1f GFLOP/s   fwd %7.1f  bwd %7.1f "
           "GFLOP/s  (fwd at %3.0f%% of its GEMMs)\n",
           B, T, D, H, flop / tg * 1e-9, flop / tf * 1e-9, 2 * flop / tbw * 1e-9,
           100 * tg / tf);
    float *ps[] = {qkv, att, y, dqkv, s};
    for (int i = 0; i < 5; i++) b->bk->free(b->c, ps[i]);
}

int main(int argc, char **argv)
{
    plumb_err e = {{0}};
    bench b = {backend_cpu(), NULL, argc > 1 ? atof(argv[1]) : 0.3};
    if (!(b.budget > 0)) {
        fprintf(stderr, "bench_gemm: expected seconds per case > 0 (got \"%s\")\n", argv[1]);
        return 2;
    }
    if (!(b.c = b.bk->create(0, &e))) {
        fprintf(stderr, "bench_gemm: %s\n", e.msg);
        return 1;
    }
    printf("bench_gemm: CPU backend vs cblas_sgemm (OpenBLAS core %s), %d threads each, fp32, "
           "%.2f s per case\n",
           openblas_get_corename(), cpu_par_threads(), b.budget);
    square(&b, 256);
    square(&b, 512);
    square(&b, 1024);
    linear(&b, 64, 784, 256);
    linear(&b, 512, 128, 512);
    linear(&b, 64, 3136, 128);
    conv(&b, "fmnist conv1 1->32@28", 64, 1, 28, 32, 3, 1);
    conv(&b, "fmnist conv2 32->64@14", 64, 32, 14, 64, 3, 1);
    conv(&b, "vgg conv3 128->256@56", 2, 128, 56, 256, 3, 1);
    attention(&b, 64, 64, 128, 4); /* gpt-mini's */
    b.bk->destroy(b.c);
    return 0;
}
