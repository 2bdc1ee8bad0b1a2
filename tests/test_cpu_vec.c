/* test_cpu_vec.c: the CPU backend's vectorised element-wise kernels (cpu_vec.c) against
 * their scalar references: ReLU forward and backward bit for bit (signed zeros, NaN,
 * infinities, subnormals, every tail length), GELU forward and backward and the
 * exponential within a stated error bound over a dense sweep, and the independence of
 * an element's result from its position. */
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
