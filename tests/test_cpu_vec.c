/* test_cpu_vec.c: the CPU backend's vectorised element-wise kernels (cpu_vec.c) against
 * their scalar references: ReLU forward and backward bit for bit (signed zeros, NaN,
 * infinities, subnormals, every tail length), GELU forward and backward and the
 * exponential within a stated error bound over a dense sweep, the independence of an
 * element's result from its position, the fp32 attention and the 2x2 max pooling against
 * replays. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu/cpu.h"

#define N 4099 /* not a multiple of the block: the tail path runs too */

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Inputs: a sweep over [-12, 12], then the special values. */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = -12.0f + 24.0f * (float)i / (float)n;
    const float sp[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f,
                        FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 1.0f, -1.0f};
    for (size_t i = 0; i < sizeof sp / sizeof *sp && i < n; i++) x[i * 7 % n] = sp[i];
}

Test(cpu_vec, relu_equals_reference_bitwise)
{
    static float x[N], dy[N], a[N], b[N];
    fill(x, N);
    for (size_t i = 0; i < N; i++) dy[i] = (float)i - 2000.5f;
    dy[3] = -0.0f;
    dy[5] = NAN;
    for (size_t n = 0; n <= N; n += n < 40 ? 1 : 1009) {
        memset(a, 0xa5, sizeof a);
        memset(b, 0x5a, sizeof b);
        cpu_relu_fwd(NULL, n, x, a);
        cpu_relu_fwd_ref(n, x, b);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(bits(a[i]), bits(b[i]), "relu_fwd n=%zu i=%zu x=%g: %g vs %g", n, i,
                         x[i], a[i], b[i]);
        for (size_t i = n; i < N; i++)
            cr_assert_eq(bits(a[i]), 0xa5a5a5a5u, "relu_fwd n=%zu wrote i=%zu", n, i);
        memset(a, 0xa5, sizeof a);
        memset(b, 0x5a, sizeof b);
        cpu_relu_bwd(NULL, n, x, dy, a);
        cpu_relu_bwd_ref(n, x, dy, b);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(bits(a[i]), bits(b[i]), "relu_bwd n=%zu i=%zu", n, i);
        for (size_t i = n; i < N; i++) /* nothing past n is written */
            cr_assert_eq(bits(a[i]), 0xa5a5a5a5u, "relu_bwd n=%zu wrote i=%zu", n, i);
    }
}

/* |got - want| <= 8 float ulp of |want| + atol. The absolute terms: GELU itself 1e-8 (below
 * x = -9 the double tanh rounds to -1 and the reference gives 0 where the kernel keeps the
 * true ~1e-30; near x = -3.4 the float argument u costs ~20 ulp of a ~1e-3 value); its
 * derivative 2^-21, 4 ulp of 1 (it crosses zero near x = -0.75, where s and the second
 * term cancel). Measured over 2^20 points of [-20, 20]: within both. */
static int close_enough(float got, float want, double atol)
{
    if (isnan(want)) return isnan(got);
    double tol = 8.0 * 0x1p-24 * fabs((double)want) + atol;
    return fabs((double)got - (double)want) <= tol;
}

Test(cpu_vec, gelu_within_stated_bound_of_reference)
{
    enum { M = 1 << 16 };
    static float x[M], dy[M], a[M], b[M];
    for (size_t i = 0; i < M; i++) {
        x[i] = -20.0f + 40.0f * (float)i / M;
        dy[i] = 1.0f + (float)(i % 7) * 0.25f;
    }
    cpu_gelu_fwd(NULL, M, x, a);
    cpu_gelu_fwd_ref(M, x, b);
    for (size_t i = 0; i < M; i++)
        cr_assert(close_enough(a[i], b[i], 1e-8), "gelu_fwd x=%.9g: %.9g vs %.9g", x[i], a[i], b[i]);
    cpu_gelu_bwd(NULL, M, x, dy, a);
    cpu_gelu_bwd_ref(M, x, dy, b);
    for (size_t i = 0; i < M; i++)
        cr_assert(close_enough(a[i], b[i], 0x1p-21), "gelu_bwd x=%.9g: %.9g vs %.9g", x[i], a[i], b[i]);
    /* NaN in, NaN out; +inf stays +inf, as in the tanh form */
    float s[2] = {NAN, INFINITY}, o[2];
    cpu_gelu_fwd(NULL, 2, s, o);
    cr_assert(isnan(o[0]));
    cr_assert(o[1] == INFINITY);
}

Test(cpu_vec, exp_within_2_ulp)
{
    enum { M = 1 << 16 };
    static float x[M], y[M];
    for (size_t i = 0; i < M; i++) x[i] = -87.0f + 175.0f * (float)i / M;
    cpu_exp_fast(M, x, y);
    for (size_t i = 0; i < M; i++) {
        double want = exp((double)x[i]);
        cr_assert(fabs(y[i] - want) <= 2.0 * 0x1p-24 * want, "exp(%.9g): %.9g vs %.9g", x[i],
                  y[i], want);
    }
}

Test(cpu_vec, result_does_not_depend_on_position)
{
    static float x[64], a[64], b[64];
    for (int i = 0; i < 64; i++) x[i] = 0.37f * (float)(i - 31);
    cpu_gelu_fwd(NULL, 64, x, a);
    for (int off = 1; off < 8; off++) { /* the same values through other blocks / the tail */
        cpu_gelu_fwd(NULL, (size_t)(64 - off), x + off, b);
        for (int i = off; i < 64; i++)
            cr_assert_eq(bits(a[i]), bits(b[i - off]), "off %d i %d", off, i);
    }
}

/* The fp32 attention (per-head GEMMs, split over threads): the forward against a direct
 * double-precision replay written here, and forward and backward the same bits at 1 and 2
 * threads (each (sample, head) is one thread's item). */
static void attention_run(int threads, int B, int T, int D, int H, const float *qkv,
                          const float *dy, float *att, float *y, float *dqkv)
{
    plumb_err e = {{0}};
    const backend *bk = backend_find("cpu", &e);
    cr_assert_not_null(bk);
    bk_ctx *c = bk->create(0, &e);
    cr_assert_not_null(c);
    cpu_par_set_threads(threads);
    cr_assert_eq(cpu_par_threads(), threads);
    cpu_attention_fwd(c, B, T, D, H, qkv, att, y);
    cpu_attention_bwd(c, B, T, D, H, qkv, att, dy, dqkv);
    cr_assert_str_empty(c->failure.msg);
    bk->destroy(c);
}

Test(cpu_vec, attention_matches_replay_at_any_thread_count)
{
    enum { B = 3, T = 9, D = 8, H = 2, hs = D / H };
    static float qkv[B * T * 3 * D], dy[B * T * D];
    static float att1[B * H * T * T], y1[B * T * D], g1[B * T * 3 * D];
    static float att2[B * H * T * T], y2[B * T * D], g2[B * T * 3 * D];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof qkv / sizeof *qkv; i++) {
        s = s * 1664525u + 1013904223u;
        qkv[i] = (float)(s >> 8) / (float)(1 << 24) * 4.0f - 2.0f;
    }
    for (size_t i = 0; i < sizeof dy / sizeof *dy; i++) dy[i] = (float)((i * 37) % 11) - 5.0f;
    attention_run(1, B, T, D, H, qkv, dy, att1, y1, g1);
    attention_run(2, B, T, D, H, qkv, dy, att2, y2, g2);
    cr_assert_eq(memcmp(att1, att2, sizeof att1), 0);
    cr_assert_eq(memcmp(y1, y2, sizeof y1), 0);
    cr_assert_eq(memcmp(g1, g2, sizeof g1), 0);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * D + h * hs;
                double sc[T], mx = -1e300, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * D + D + h * hs;
                    sc[u] = 0;
                    for (int i = 0; i < hs; i++) sc[u] += (double)q[i] * k[i];
                    sc[u] /= sqrt((double)hs);
                    if (sc[u] > mx) mx = sc[u];
                }
                for (int u = 0; u <= t; u++) sum += (sc[u] = exp(sc[u] - mx));
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++)
                        o += sc[u] / sum * qkv[((size_t)b * T + u) * 3 * D + 2 * D + h * hs + i];
                    float got = y1[((size_t)b * T + t) * D + h * hs + i];
                    cr_assert(fabs(got - o) <= 1e-5 * (1 + fabs(o)), "b%d h%d t%d i%d: %g vs %g",
                              b, h, t, i, got, o);
                }
                for (int u = t + 1; u < T; u++)
                    cr_assert_eq(att1[(((size_t)b * H + h) * T + t) * T + u], 0.0f);
            }
}

/* The replay's rule: the first maximum of window (p, q) in row order (a NaN never wins). */
static int first_max(const float *xs, int W, int p, int q)
{
    int best = (2 * p) * W + 2 * q;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (xs[(2 * p + i) * W + 2 * q + j] > xs[best]) best = (2 * p + i) * W + 2 * q + j;
    return best;
}

/* The 2x2 stride-2 max pooling (split over threads) against a replay: the maximum and the
 * gradient at the first maximum in row order, with ties, at 1 and 2 threads. */
Test(cpu_vec, maxpool2_matches_replay_with_ties)
{
    enum { B = 5, C = 7, H = 64, W = 62, P = 32, Q = 31 }; /* 2 threads: 17+ planes each */
    static float x[B * C * H * W], dy[B * C * P * Q], y[B * C * P * Q], dx[B * C * H * W];
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = (float)((i * 7919) % 5); /* ties */
    for (size_t i = 0; i < sizeof dy / sizeof *dy; i++) dy[i] = (float)i + 1.0f;
    bk_pool g = {.B = B, .C = C, .H = H, .W = W, .kernel = 2, .stride = 2, .P = P, .Q = Q};
    for (int th = 1; th <= 2; th++) {
        cpu_par_set_threads(th);
        memset(dx, 0xa5, sizeof dx); /* the backward zeroes dx itself */
        cpu_maxpool_fwd(NULL, &g, x, y);
        cpu_maxpool_bwd(NULL, &g, x, dy, dx);
        for (int bc = 0; bc < B * C; bc++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    const float *xs = x + (size_t)bc * H * W;
                    int best = first_max(xs, W, p, q);
                    cr_assert_eq(y[((size_t)bc * P + p) * Q + q], xs[best]);
                    float *d = dx + (size_t)bc * H * W;
                    for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 2; j++) {
                            int at = (2 * p + i) * W + 2 * q + j;
                            float want = at == best ? dy[((size_t)bc * P + p) * Q + q] : 0.0f;
                            cr_assert_eq(d[at], want, "th %d bc %d p %d q %d", th, bc, p, q);
                        }
                }
    }
}

/* The 2x2 stride-2 pooling's backward (blocks of 4 windows, then a scalar tail) bit for
 * bit against the general rule replayed here (dx zeroed, dx[first maximum] += dy): NaN,
 * signed zeros, infinities and ties in x, -0 and NaN in dy, odd H and W (an uncovered row
 * and column, which must come out +0 over the garbage dx held). */
Test(cpu_vec, maxpool2_bwd_bitwise_with_specials_and_odd_sizes)
{
    enum { B = 2, C = 3, H = 19, W = 23, P = 9, Q = 11 };
    static float x[B * C * H * W], dy[B * C * P * Q], dx[B * C * H * W], want[B * C * H * W];
    const float sp[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY, 1.0f, 1.0f, -2.0f, 3.5f};
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = sp[(i * 7 + i / 5) % 9];
    for (size_t i = 0; i < sizeof dy / sizeof *dy; i++)
        dy[i] = i % 13 == 0 ? -0.0f : i % 17 == 0 ? NAN : (float)i - 100.0f;
    bk_pool g = {.B = B, .C = C, .H = H, .W = W, .kernel = 2, .stride = 2, .P = P, .Q = Q};
    for (int th = 1; th <= 2; th++) {
        cpu_par_set_threads(th);
        memset(dx, 0xa5, sizeof dx);
        cpu_maxpool_bwd(NULL, &g, x, dy, dx);
        memset(want, 0, sizeof want);
        for (int bc = 0; bc < B * C; bc++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    const float *xs = x + (size_t)bc * H * W;
                    int best = first_max(xs, W, p, q);
                    want[(size_t)bc * H * W + best] += dy[((size_t)bc * P + p) * Q + q];
                }
        for (size_t i = 0; i < sizeof dx / sizeof *dx; i++)
            cr_assert_eq(bits(dx[i]), bits(want[i]), "th %d i %zu: %g vs %g", th, i, dx[i],
                         want[i]);
    }
}
