/* cpu_vec.c: the CPU backend's element-wise activations, written branch-free on blocks of
 * 16 floats with the compiler's portable vector types (SSE2, AVX2, AVX-512 or NEON,
 * whatever the build targets or the CPU offers; no -march flag needed), next to the plain scalar references the tests
 * compare them with. Every element goes through the same block code (the tail is padded
 * into one block), so an element's result does not depend on its position or on n. */
#include "exec/cpu/cpu.h"

#include <math.h>
#include <string.h>

/* Lanes per block: 16 floats, which the compiler lowers to the target's widest vectors
 * (4 SSE2 operations by default). On x86-64 with GCC the block loops are also compiled
 * for AVX2 and AVX-512 and picked at load time (target_clones): the same IEEE operations
 * lane by lane (ISO C: no contraction into FMAs), so the same bits on every path. */
#define VW 16
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

typedef float v8f __attribute__((vector_size(4 * VW)));
typedef int32_t v8i __attribute__((vector_size(4 * VW)));
#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

/* The helpers take and give blocks through pointers, never as vector arguments or
 * results, whose calling convention would depend on the target (no psabi notes). */
#define VSET(x) ((v8f){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})
/* m ? a : b lane-wise, m a comparison's mask (all ones or zeros). */
#define VSEL(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))

/* y = x > 0 ? x : +0 lane-wise (a NaN gives +0), by masking the bits. */
static inline void relu8(const float *x, float *y)
{
    v8f v;
    memcpy(&v, x, sizeof v);
    v8i m = v > VSET(0.0f);
    v = (v8f)((v8i)v & m);
    memcpy(y, &v, sizeof v);
}

/* dx = x > 0 ? dy : +0 lane-wise. */
static inline void relu_bwd8(const float *x, const float *dy, float *dx)
{
    v8f v, d;
    memcpy(&v, x, sizeof v);
    memcpy(&d, dy, sizeof d);
    v8i m = v > VSET(0.0f);
    d = (v8f)((v8i)d & m);
    memcpy(dx, &d, sizeof d);
}

/* *x = e^*x lane-wise for x clamped to [-87, 88] (normal results): x = n ln2 + r,
 * |r| <= ln2/2, e^r by its degree-7 Taylor polynomial, 2^n put in the exponent bits.
 * Within 2 ulp of expf on the clamped range; a NaN stays NaN. */
static inline void exp8(v8f *xp)
{
    const v8f lo = VSET(-87.0f), hi = VSET(88.0f), magic = VSET(12582912.0f);
    v8f x = *xp;
    x = VSEL(x < lo, lo, x); /* NaN lanes keep x */
    x = VSEL(x > hi, hi, x);
    v8f n = (x * VSET(1.44269504088896341f) + magic) - magic; /* round(x / ln2) */
    v8f r = x - n * VSET(0.693145751953125f);                  /* ln2, high part */
    r = r - n * VSET(1.428606765330187e-06f);                  /* ln2, low part */
    v8f p = VSET(1.0f / 5040);
    p = p * r + VSET(1.0f / 720);
    p = p * r + VSET(1.0f / 120);
    p = p * r + VSET(1.0f / 24);
    p = p * r + VSET(1.0f / 6);
    p = p * r + VSET(0.5f);
    p = p * r + VSET(1.0f);
    p = p * r + VSET(1.0f);
    n = VSEL(n == n, n, VSET(0.0f)); /* no NaN reaches the integer conversion */
    v8i e = (__builtin_convertvector(n, v8i) + 127) << 23;
    *xp = p * (v8f)e;
}

static inline void exp_block(const float *x, float *y)
{
    v8f v;
    memcpy(&v, x, sizeof v);
    exp8(&v);
    memcpy(y, &v, sizeof v);
}

/* GELU (tanh form) as x sigmoid(2u), u = k (x + 0.044715 x^3): 0.5 (1 + tanh u) equals
 * 1 / (1 + e^-2u), which keeps its relative accuracy where tanh u nears -1. */
static inline void gelu8(const float *xs, float *y)
{
    v8f x;
    memcpy(&x, xs, sizeof x);
    v8f u = VSET(GELU_K) * (x + VSET(0.044715f) * x * x * x);
    v8f e = VSET(-2.0f) * u;
    exp8(&e);
    x = x / (VSET(1.0f) + e);
    memcpy(y, &x, sizeof x);
}

/* dy GELU'(x): with s = sigmoid(2u), GELU' = s + 2 x s (1 - s) du/dx, 1 - s = e s. */
static inline void gelu_bwd8(const float *xs, const float *dys, float *dx)
{
    v8f x, dy;
    memcpy(&x, xs, sizeof x);
    memcpy(&dy, dys, sizeof dy);
    v8f u = VSET(GELU_K) * (x + VSET(0.044715f) * x * x * x);
    v8f e = VSET(-2.0f) * u;
    exp8(&e);
    v8f s = VSET(1.0f) / (VSET(1.0f) + e);
    v8f du = VSET(GELU_K) * (VSET(1.0f) + VSET(3.0f * 0.044715f) * x * x);
    dy = dy * (s + VSET(2.0f) * x * s * (e * s) * du);
    memcpy(dx, &dy, sizeof dy);
}

/* The block loops: full blocks in place, the tail (n % VW) through a zero-padded block. */
#define UNARY_LOOP(F, n, x, y)                                                           \
    do {                                                                                 \
        size_t i_ = 0;                                                                   \
        for (; i_ + VW <= (n); i_ += VW) F((x) + i_, (y) + i_);                          \
        if (i_ < (n)) {                                                                  \
            float a_[VW] = {0}, o_[VW];                                                  \
            memcpy(a_, (x) + i_, ((n) - i_) * sizeof(float));                            \
            F(a_, o_);                                                                   \
            memcpy((y) + i_, o_, ((n) - i_) * sizeof(float));                            \
        }                                                                                \
    } while (0)

#define BINARY_LOOP(F, n, x, dy, dx)                                                     \
    do {                                                                                 \
        size_t i_ = 0;                                                                   \
        for (; i_ + VW <= (n); i_ += VW) F((x) + i_, (dy) + i_, (dx) + i_);              \
        if (i_ < (n)) {                                                                  \
            float a_[VW] = {0}, b_[VW] = {0}, o_[VW];                                    \
            memcpy(a_, (x) + i_, ((n) - i_) * sizeof(float));                            \
            memcpy(b_, (dy) + i_, ((n) - i_) * sizeof(float));                           \
            F(a_, b_, o_);                                                               \
            memcpy((dx) + i_, o_, ((n) - i_) * sizeof(float));                           \
        }                                                                                \
    } while (0)

/* Over threads: a lane's result depends only on its inputs, so any split gives the same
 * bits. At least PAR_MIN elements per thread (a split costs ~9 us: docs/exec.md). */
#define PAR_MIN ((size_t)1 << 15)

typedef struct ew_arg {
    const float *x, *dy;
    float *y;
} ew_arg;

/* An activation's entries: NAME_fwd and NAME_bwd run the block functions FWD and BWD
 * over threads, at least MIN elements per thread. */
#define EW_ENTRIES(NAME, FWD, BWD, MIN)                                                  \
    VEC_CLONES static void NAME##_fwd_part(void *p, size_t lo, size_t hi, int slot)      \
    {                                                                                    \
        ew_arg *a = p;                                                                   \
        (void)slot;                                                                      \
        UNARY_LOOP(FWD, hi - lo, a->x + lo, a->y + lo);                                  \
    }                                                                                    \
    VEC_CLONES static void NAME##_bwd_part(void *p, size_t lo, size_t hi, int slot)      \
    {                                                                                    \
        ew_arg *a = p;                                                                   \
        (void)slot;                                                                      \
        BINARY_LOOP(BWD, hi - lo, a->x + lo, a->dy + lo, a->y + lo);                     \
    }                                                                                    \
    void NAME##_fwd(bk_ctx *c, size_t n, const float *x, float *y)                       \
    {                                                                                    \
        (void)c;                                                                         \
        ew_arg a = {x, NULL, y};                                                         \
        cpu_par(n, MIN, NAME##_fwd_part, &a);                                            \
    }                                                                                    \
    void NAME##_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx)     \
    {                                                                                    \
        (void)c;                                                                         \
        ew_arg a = {x, dy, dx};                                                          \
        cpu_par(n, MIN, NAME##_bwd_part, &a);                                            \
    }

/* ReLU is memory-bound: larger pieces per thread. */
EW_ENTRIES(cpu_relu, relu8, relu_bwd8, 4 * PAR_MIN)
EW_ENTRIES(cpu_gelu, gelu8, gelu_bwd8, PAR_MIN)

VEC_CLONES void cpu_exp_fast(size_t n, const float *x, float *y)
{
    UNARY_LOOP(exp_block, n, x, y);
}

/* The pooling's 4-lane blocks (its shuffles are written for 4 lanes). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f v4_load(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v4_store(float *p, v4f v) { memcpy(p, &v, sizeof v); }

static inline v4f v4_select(v4i m, v4f a, v4f b) { return (v4f)(((v4i)a & m) | ((v4i)b & ~m)); }

/* Lane shuffles of two blocks (GCC and clang spell them differently). */
#if defined(__clang__)
#define V4_EVEN(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6)
#define V4_ODD(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7)
#define V4_LO(a, b) __builtin_shufflevector(a, b, 0, 4, 1, 5)
#define V4_HI(a, b) __builtin_shufflevector(a, b, 2, 6, 3, 7)
#else
#define V4_EVEN(a, b) __builtin_shuffle(a, b, (v4i){0, 2, 4, 6})
#define V4_ODD(a, b) __builtin_shuffle(a, b, (v4i){1, 3, 5, 7})
#define V4_LO(a, b) __builtin_shuffle(a, b, (v4i){0, 4, 1, 5})
#define V4_HI(a, b) __builtin_shuffle(a, b, (v4i){2, 6, 3, 7})
#endif

/* One output row of the 2x2 stride-2 max pooling's backward, 4 windows per block: the
 * same comparisons in the same order as the scalar rule in cpu_conv.c (first maximum in
 * row order wins; a NaN never wins), the winner gets +0 + dy, the others +0. Returns the
 * windows done (a multiple of 4); the caller does the rest. */
int cpu_maxpool2_bwd_row(int Q, const float *x0, const float *x1, const float *dy, float *d0,
                         float *d1)
{
    int q = 0;
    for (; q + 4 <= Q; q += 4) {
        v4f a0 = v4_load(x0 + 2 * q), b0 = v4_load(x0 + 2 * q + 4);
        v4f a1 = v4_load(x1 + 2 * q), b1 = v4_load(x1 + 2 * q + 4);
        v4f v00 = V4_EVEN(a0, b0), v01 = V4_ODD(a0, b0);
        v4f v10 = V4_EVEN(a1, b1), v11 = V4_ODD(a1, b1);
        v4i s01 = v01 > v00;
        v4f m1 = v4_select(s01, v01, v00);
        v4i s10 = v10 > m1;
        v4f m2 = v4_select(s10, v10, m1);
        v4i s11 = v11 > m2;
        const v4f z = {0.0f, 0.0f, 0.0f, 0.0f};
        v4f g = z + v4_load(dy + q);
        v4f o00 = v4_select(s01 | s10 | s11, z, g);
        v4f o01 = v4_select(s01 & ~s10 & ~s11, g, z);
        v4f o10 = v4_select(s10 & ~s11, g, z);
        v4f o11 = v4_select(s11, g, z);
        v4_store(d0 + 2 * q, V4_LO(o00, o01));
        v4_store(d0 + 2 * q + 4, V4_HI(o00, o01));
        v4_store(d1 + 2 * q, V4_LO(o10, o11));
        v4_store(d1 + 2 * q + 4, V4_HI(o10, o11));
    }
    return q;
}

/* The scalar references. */

void cpu_relu_fwd_ref(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_relu_bwd_ref(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

void cpu_gelu_fwd_ref(size_t n, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + tanh(GELU_K * (v + 0.044715 * v * v * v))));
    }
}

void cpu_gelu_bwd_ref(size_t n, const float *x, const float *dy, float *dx)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        double t = tanh(GELU_K * (v + 0.044715 * v * v * v));
        double du = GELU_K * (1.0 + 3.0 * 0.044715 * v * v);
        dx[i] = (float)(dy[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du));
    }
}
