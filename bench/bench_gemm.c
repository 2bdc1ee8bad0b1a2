/* bench_gemm.c: the CPU backend's dense and convolution throughput (GFLOP/s) against
 * OpenBLAS's own cblas_sgemm rate measured in the same run, at the same thread count (the
 * backend's: OPENBLAS_NUM_THREADS or every core; OpenBLAS's own threads for its
 * reference, the backend's pool for the backend): square GEMMs, the linear layer, and
 * conv2d forward / input-gradient / weight-gradient (im2col + GEMM) at the shapes of
 * fmnist-cnn and of a VGG-16 block.
 * Usage: bench_gemm [SECONDS_PER_CASE]   (default 0.3, at most 60)
 *
 * --curve: the efficiency curve of a backend (bench/gpu-check.sh runs it with cuda-bf16):
 * each transformer block's GEMMs (the QKV, attention output, MLP up and down projections
 * and the LM head; forward, input gradient and weight gradient) and its attention core
 * (forward, backward), at the shapes one tensor-parallel rank of the given model files runs
 * at TP 1, 2, 4 and 8 with one sequence per microbatch, timed through the backend's own
 * entries (gemm, attention_fwd/bwd). One tab-separated row per case on stdout, a header
 * first: model, tp, op, pass, batch, M, N, K, GFLOP, ms, TFLOP/s, and TFLOP/s over --peak
 * (the device's dense peak for the precision; "-" without it).
 *   bench_gemm --curve [--backend NAME] [--peak TFLOPS] [--seconds S] [--tp LIST]
 *              [--seq TOKENS] MODEL.json...
 * Defaults: cuda-bf16, no peak, 0.02 s per case, TP 1,2,4,8, each model's own sequence.
 * Ranges: --peak 0 (none) to 1e9, --seconds above 0 to 60, --seq 0 (the model's) to 2^30,
 * --tp 1 to 8 degrees of 1 to 1024.
 * A TP that does not divide the model's heads, and a case with an operand of 2^31 elements or
 * more, are left out (a line on stderr each). Exit 0; 1 when the backend could not start or
 * a case failed (a line on stderr, no row, the next case runs); 2 on bad arguments (an
 * unknown --backend included) or model files. */
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"
#include "core/transformer.h"
#include "exec/backend.h"
#include "exec/cpu/cpu.h"
#include "exec/train.h"

#define SECONDS_MAX 60.0 /* per case: a round of up to 2^20 calls stops at the budget, so
                            an unbounded one (inf, 1e308) never ended */

/* The number v of option opt: finite, from lo (excluded with lo_open) to hi. 0 with *out
 * set, or 2 after one line naming the option and the range. */
static int arg_num(const char *opt, const char *v, double lo, int lo_open, double hi,
                   double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || (lo_open ? !(x > lo) : !(x >= lo)) ||
        x > hi) {
        fprintf(stderr, "bench_gemm: %s: expected a number %s %g and at most %.15g (got \"%s\")\n",
                opt, lo_open ? ">" : ">=", lo, hi, v);
        return 2;
    }
    *out = x;
    return 0;
}

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

/* ------------------------------------------------------------------ the --curve mode */

typedef struct curve {
    const backend *bk;
    bk_ctx *c;
    double budget; /* seconds per case, at least */
    double peak;   /* TFLOP/s; 0: unknown */
    float *buf[4]; /* A, B, C of a GEMM (qkv, y, dqkv of attention) and att: each as large as
                      the largest case needs, filled once */
    size_t cap[4]; /* their floats */
} curve;

/* One case of a model at one TP: a GEMM (M, N, K; ta, tb: transposed operands) or, with
 * attn set, the attention core of `batch` heads over M tokens of head size K. */
typedef struct curve_case {
    const char *op, *pass;
    int M, N, K, ta, tb, attn, batch, D;
} curve_case;

/* Writes the cases of one rank of model t at tensor-parallel degree tp over `seq` tokens
 * into out (room for 17); returns how many, 0 when tp does not divide the heads. */
static int curve_cases(const transformer *t, int tp, int seq, curve_case *out)
{
    if (t->heads % tp || t->hidden % tp || t->ffn % tp) return 0;
    int h = (int)t->hidden, hd = (int)transformer_head_dim(t), heads = (int)(t->heads / tp);
    int kv = t->kv_heads >= tp ? (int)(t->kv_heads / tp) : 1; /* replicated below tp */
    int ff = (int)(t->ffn / tp), vocab = (int)((t->vocab + tp - 1) / tp);
    struct { const char *op; int in, out; } lin[] = {
        {"qkv", h, (heads + 2 * kv) * hd},
        {"attn-out", heads * hd, h},
        {"mlp-up", h, (t->gated_mlp ? 2 : 1) * ff},
        {"mlp-down", ff, h},
        {"lm-head", h, vocab},
    };
    int n = 0;
    for (int i = 0; i < 5; i++) { /* y (seq, out) = x w^T; dx = dy w; dw += dy^T x */
        out[n++] = (curve_case){lin[i].op, "fwd", seq, lin[i].out, lin[i].in, 0, 1, 0, 1, 0};
        out[n++] = (curve_case){lin[i].op, "bwd-data", seq, lin[i].in, lin[i].out, 0, 0, 0, 1, 0};
        out[n++] = (curve_case){lin[i].op, "bwd-weight", lin[i].out, lin[i].in, seq, 1, 0, 0, 1, 0};
    }
    out[n++] = (curve_case){"attention", "fwd", seq, seq, hd, 0, 0, 1, heads, heads * hd};
    out[n++] = (curve_case){"attention", "bwd", seq, seq, hd, 0, 0, 1, heads, heads * hd};
    return n;
}

/* The floats each of the four buffers needs for case k. */
static void curve_needs(const curve_case *k, size_t need[4])
{
    size_t M = (size_t)k->M, N = (size_t)k->N, K = (size_t)k->K;
    if (k->attn) { /* qkv (T, 3D), y (T, D), dqkv (T, 3D), att (H, T, T) */
        need[0] = M * 3 * (size_t)k->D;
        need[1] = M * (size_t)k->D;
        need[2] = need[0];
        need[3] = (size_t)k->batch * M * M;
    } else {
        need[0] = M * K;
        need[1] = K * N;
        need[2] = M * N;
        need[3] = 0;
    }
}

/* 1 when every operand of case k has fewer than 2^31 elements (cuBLAS's 32-bit interface,
 * which the backend calls); the larger ones (the LM head at TP 1 of a model over 16k wide)
 * are left out. */
static int curve_fits(const curve_case *k)
{
    size_t need[4];
    curve_needs(k, need);
    for (int r = 0; r < 4; r++)
        if (need[r] > (size_t)INT_MAX) return 0;
    return 1;
}

/* Fills n floats at p with a repeating pseudo-random pattern: one uploaded chunk, then
 * device copies doubling what is filled. 0, or -1 with err set. */
static int curve_fill(curve *cv, float *p, size_t n, plumb_err *err)
{
    size_t chunk = n < (1u << 20) ? n : (1u << 20);
    float *h = bk_host_alloc(cv->bk, cv->c, chunk * sizeof(float) + 1, err);
    if (!h) return -1;
    unsigned long long s = 88172645463325252ULL;
    for (size_t i = 0; i < chunk; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        h[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
    }
    cv->bk->upload(cv->c, p, h, chunk * sizeof(float));
    for (size_t done = chunk; done < n;) {
        size_t m = done < n - done ? done : n - done;
        cv->bk->copy(cv->c, p + done, p, m * sizeof(float));
        done += m;
    }
    int rc = cv->bk->sync(cv->c, err);
    bk_host_free(cv->bk, h);
    return rc;
}

/* Runs case k once on the buffers. */
static void curve_call(curve *cv, const curve_case *k)
{
    float **b = cv->buf;
    if (!k->attn) {
        int lda = k->ta ? k->M : k->K, ldb = k->tb ? k->K : k->N;
        cv->bk->gemm(cv->c, k->ta, k->tb, k->M, k->N, k->K, 1.0f, b[0], lda, b[1], ldb, 0.0f,
                     b[2], k->N);
    } else if (!strcmp(k->pass, "fwd")) {
        cv->bk->attention_fwd(cv->c, 1, k->M, k->D, k->batch, b[0], b[3], b[1]);
    } else {
        cv->bk->attention_bwd(cv->c, 1, k->M, k->D, k->batch, b[0], b[3], b[1], b[2]);
    }
}

/* Seconds per call of case k: one call to warm up, then 1, 2, 4 ... calls between syncs
 * until one round takes the budget. -1 with err set when the backend fails. */
static double curve_time(curve *cv, const curve_case *k, plumb_err *err)
{
    curve_call(cv, k);
    if (cv->bk->sync(cv->c, err)) return -1;
    for (long n = 1;; n *= 2) {
        double t0 = train_now();
        for (long i = 0; i < n; i++) curve_call(cv, k);
        if (cv->bk->sync(cv->c, err)) return -1;
        double t = train_now() - t0;
        if (t >= cv->budget || n >= (1L << 20)) return t / (double)n;
    }
}

/* A comma-separated list of TP degrees into tps (at most 8); their count, 0 when bad (a
 * ninth degree was dropped without a word, "1," taken as "1"). */
static int parse_tps(const char *s, int *tps)
{
    int n = 0;
    for (const char *p = s;; p++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (n == 8 || errno || end == p || v < 1 || v > 1024 || (*end && *end != ','))
            return 0;
        tps[n++] = (int)v;
        p = end;
        if (!*p) return n;
    }
}

static int curve_main(int argc, char **argv)
{
    const char *bk_name = "cuda-bf16";
    curve cv = {0};
    cv.budget = 0.02;
    int tps[8] = {1, 2, 4, 8}, ntp = 4, seq = 0, rc = 2, nfail = 0;
    curve_case cs[17];
    transformer **models = calloc((size_t)argc, sizeof *models);
    int nm = 0;
    plumb_err e = {{0}};
    if (!models) return 1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(a, "--backend") && v) bk_name = v;
        else if (!strcmp(a, "--peak") && v) { /* TFLOP/s: core/bounds.h's peaks */
            if (arg_num(a, v, 0, 0, BOUND_PEAK_FLOPS_MAX / 1e12, &cv.peak)) goto done;
        } else if (!strcmp(a, "--seconds") && v) {
            if (arg_num(a, v, 0, 1, SECONDS_MAX, &cv.budget)) goto done;
        } else if (!strcmp(a, "--seq") && v) { /* an int: 2^32 + 32 was taken as 32 */
            if (arg_num(a, v, 0, 0, (double)BOUND_TOKENS_MAX, &x)) goto done;
            if (x != floor(x)) {
                fprintf(stderr, "bench_gemm: --seq: expected a whole number of tokens (got "
                                "\"%s\")\n", v);
                goto done;
            }
            seq = (int)x;
        } else if (!strcmp(a, "--tp") && v) {
            if (!(ntp = parse_tps(v, tps))) {
                fprintf(stderr, "bench_gemm: --tp: expected 1 to 8 degrees 1..1024 separated by "
                                "commas (got \"%s\")\n", v);
                goto done;
            }
        } else if (a[0] == '-') {
            fprintf(stderr, "bench_gemm: unknown option %s (or it lacks its value)\n", a);
            goto done;
        } else {
            if (!(models[nm] = transformer_load(a, &e))) {
                fprintf(stderr, "bench_gemm: %s\n", e.msg);
                goto done;
            }
            nm++;
            continue;
        }
        i++;
    }
    if (!nm) {
        fprintf(stderr, "bench_gemm: --curve needs model files\n");
        goto done;
    }
    if (!(cv.bk = backend_find(bk_name, &e))) { /* a name no backend has: bad input */
        fprintf(stderr, "bench_gemm: %s\n", e.msg);
        goto done;
    }
    rc = 1;
    if (!(cv.c = cv.bk->create(0, &e))) {
        fprintf(stderr, "bench_gemm: %s\n", e.msg);
        goto done;
    }
    /* the largest case of all sizes the buffers, allocated and filled once */
    for (int m = 0; m < nm; m++)
        for (int j = 0; j < ntp; j++) {
            int n = curve_cases(models[m], tps[j], seq ? seq : (int)models[m]->seq, cs);
            for (int k = 0; k < n; k++) {
                size_t need[4];
                if (!curve_fits(&cs[k])) continue;
                curve_needs(&cs[k], need);
                for (int r = 0; r < 4; r++)
                    if (need[r] > cv.cap[r]) cv.cap[r] = need[r];
            }
        }
    for (int r = 0; r < 4; r++) {
        if (!(cv.buf[r] = cv.bk->alloc(cv.c, cv.cap[r] * sizeof(float), &e)) ||
            curve_fill(&cv, cv.buf[r], cv.cap[r], &e)) {
            fprintf(stderr, "bench_gemm: %s\n", e.msg);
            goto done;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("model\ttp\top\tpass\tbatch\tM\tN\tK\tgflop\tms\ttflops\tpeak_fraction\n");
    for (int m = 0; m < nm; m++)
        for (int j = 0; j < ntp; j++) {
            int s = seq ? seq : (int)models[m]->seq;
            int n = curve_cases(models[m], tps[j], s, cs);
            if (!n) {
                fprintf(stderr, "bench_gemm: %s: tp %d does not divide its %lld heads, %lld width "
                                "and %lld MLP width: left out\n",
                        models[m]->name, tps[j], models[m]->heads, models[m]->hidden,
                        models[m]->ffn);
                continue;
            }
            for (int k = 0; k < n; k++) {
                const curve_case *q = &cs[k];
                if (!curve_fits(q)) {
                    fprintf(stderr, "bench_gemm: %s tp %d %s %s: an operand of 2^31 elements or "
                                    "more: left out\n", models[m]->name, tps[j], q->op, q->pass);
                    continue;
                }
                /* GEMM: 2 M N K; attention: its two products per head forward, four backward */
                double flop = q->attn ? (strcmp(q->pass, "fwd") ? 8.0 : 4.0) * q->batch *
                                            (double)q->M * q->M * q->K
                                      : 2.0 * q->M * (double)q->N * q->K;
                double sec = curve_time(&cv, q, &e);
                if (sec < 0) { /* one line, and on to the next case: a row less */
                    fprintf(stderr, "bench_gemm: %s tp %d %s %s: %s\n", models[m]->name,
                            tps[j], q->op, q->pass, e.msg);
                    nfail++;
                    continue;
                }
                double tf = flop / sec * 1e-12;
                printf("%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%.4g\t%.4g\t%.4g\t", models[m]->name,
                       tps[j], q->op, q->pass, q->batch, q->M, q->N, q->K, flop * 1e-9, sec * 1e3,
                       tf);
                if (cv.peak > 0) printf("%.3f\n", tf / cv.peak);
                else printf("-\n");
            }
        }
    rc = nfail ? 1 : 0;
done:
    for (int r = 0; r < 4; r++)
        if (cv.buf[r]) cv.bk->free(cv.c, cv.buf[r]);
    if (cv.c) cv.bk->destroy(cv.c);
    for (int m = 0; m < nm; m++) transformer_free(models[m]);
    free(models);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--curve")) return curve_main(argc, argv);
    plumb_err e = {{0}};
    bench b = {backend_cpu(), NULL, 0.3};
    if (argc > 2) { /* a second argument was ignored */
        fprintf(stderr, "bench_gemm: expected at most SECONDS_PER_CASE (got \"%s\" too)\n",
                argv[2]);
        return 2;
    }
    if (argc > 1 && arg_num("SECONDS_PER_CASE", argv[1], 0, 1, SECONDS_MAX, &b.budget))
        return 2;
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
