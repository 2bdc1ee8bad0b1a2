/* cpu_conv.c: 2-D convolution by im2col + OpenBLAS GEMM, over chunks of samples so that
 * each GEMM is large, and max pooling. In a cpu-bf16 context the GEMMs take bf16-rounded
 * inputs and each direction's result is rounded to bf16 once (cuDNN's bf16 tensors). */
#include "exec/cpu/cpu.h"

#include <string.h>

/* Scratch budget per GEMM operand, in floats (a chunk of samples fits in it). */
#define CONV_CHUNK_FLOATS ((size_t)4 << 20)

/* Samples per chunk: as many as fit in the budget, at least 1. */
static int conv_chunk(const bk_conv *g)
{
    size_t per = (size_t)g->C * g->kernel * g->kernel * g->P * g->Q;
    size_t per_out = (size_t)g->K * g->P * g->Q;
    if (per_out > per) per = per_out;
    size_t nb = per ? CONV_CHUNK_FLOATS / per : 1;
    if (nb < 1) nb = 1;
    if (nb > (size_t)g->B) nb = (size_t)g->B;
    return (int)nb;
}

/* Floats in each of the two scratch operands: what one chunk needs (within the budget, or
 * one sample when that is larger), so that a small convolution holds little scratch. */
static size_t conv_operand(const bk_conv *g)
{
    size_t per = (size_t)g->C * g->kernel * g->kernel * g->P * g->Q;
    size_t per_out = (size_t)g->K * g->P * g->Q;
    if (per_out > per) per = per_out;
    return per * (size_t)conv_chunk(g);
}

/* Output columns q whose input column q stride - pad + kj lies inside [0, W): [*q0, *q1). */
static void valid_q(const bk_conv *g, int kj, int *q0, int *q1)
{
    int lo = g->pad - kj, hi = g->W + g->pad - kj; /* need lo <= q stride < hi */
    int a = lo <= 0 ? 0 : (lo + g->stride - 1) / g->stride;
    int b = hi <= 0 ? 0 : (hi + g->stride - 1) / g->stride;
    *q0 = a < g->Q ? a : g->Q;
    *q1 = b < g->Q ? b : g->Q;
    if (*q1 < *q0) *q1 = *q0;
}

/* col (C k k, nb P Q): column j = (sample s, output pixel p) holds the receptive field of
 * that pixel; x (nb, C, H, W) is the chunk's input. Rows are filled in runs: zeros where
 * the window leaves the image, a copy (stride 1) or a strided gather in between. */
static void im2col(const bk_conv *g, int nb, const float *x, float *col)
{
    const int k = g->kernel, PQ = g->P * g->Q, ld = nb * PQ, st = g->stride;
    for (int ch = 0; ch < g->C; ch++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + (size_t)((ch * k + ki) * k + kj) * ld;
                int q0, q1;
                valid_q(g, kj, &q0, &q1);
                for (int s = 0; s < nb; s++) {
                    const float *xs = x + ((size_t)s * g->C + ch) * g->H * g->W;
                    float *r = row + (size_t)s * PQ;
                    for (int p = 0; p < g->P; p++) {
                        float *o = r + p * g->Q;
                        int h = p * st - g->pad + ki;
                        if (h < 0 || h >= g->H) {
                            memset(o, 0, sizeof(float) * g->Q);
                            continue;
                        }
                        const float *xr = xs + h * g->W - g->pad + kj;
                        if (q0 > 0) memset(o, 0, sizeof(float) * q0);
                        if (st == 1) memcpy(o + q0, xr + q0, sizeof(float) * (q1 - q0));
                        else
                            for (int q = q0; q < q1; q++) o[q] = xr[q * st];
                        if (q1 < g->Q) memset(o + q1, 0, sizeof(float) * (g->Q - q1));
                    }
                }
            }
}

/* The adjoint of im2col: adds col's entries back into dx (nb, C, H, W), which the caller
 * zeroed. */
static void col2im(const bk_conv *g, int nb, const float *col, float *dx)
{
    const int k = g->kernel, PQ = g->P * g->Q, ld = nb * PQ, st = g->stride;
    for (int ch = 0; ch < g->C; ch++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + (size_t)((ch * k + ki) * k + kj) * ld;
                int q0, q1;
                valid_q(g, kj, &q0, &q1);
                for (int s = 0; s < nb; s++) {
                    float *xs = dx + ((size_t)s * g->C + ch) * g->H * g->W;
                    const float *r = row + (size_t)s * PQ;
                    for (int p = 0; p < g->P; p++) {
                        int h = p * st - g->pad + ki;
                        if (h < 0 || h >= g->H) continue;
                        float *xr = xs + h * g->W - g->pad + kj;
                        const float *o = r + p * g->Q;
                        for (int q = q0; q < q1; q++) xr[q * st] += o[q];
                    }
                }
            }
}

/* Between y's layout (nb, K, PQ) and the GEMM's (K, nb PQ). */
static void to_kmajor(const bk_conv *g, int nb, const float *y, float *t)
{
    const size_t PQ = (size_t)g->P * g->Q;
    for (int s = 0; s < nb; s++)
        for (int k = 0; k < g->K; k++)
            memcpy(t + (size_t)k * nb * PQ + s * PQ, y + ((size_t)s * g->K + k) * PQ,
                   PQ * sizeof(float));
}

void cpu_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                    const float *b, float *y)
{
    const int nbmax = conv_chunk(g), CKK = g->C * g->kernel * g->kernel;
    const size_t PQ = (size_t)g->P * g->Q, in_n = (size_t)g->C * g->H * g->W;
    const size_t opn = conv_operand(g);
    float *col = cpu_scratch(c, 2 * opn);
    if (!col) return;
    float *t = col + opn;
    for (int s0 = 0; s0 < g->B; s0 += nbmax) {
        int nb = g->B - s0 < nbmax ? g->B - s0 : nbmax;
        im2col(g, nb, x + s0 * in_n, col);
        /* t (K, nb PQ) = w (K, CKK) col (CKK, nb PQ) */
        cpu_sgemm(c, 0, 0, g->K, (int)(nb * PQ), CKK, 1.0f, w, CKK, col, (int)(nb * PQ), 0.0f,
                  t, (int)(nb * PQ));
        for (int s = 0; s < nb; s++)
            for (int k = 0; k < g->K; k++) {
                float *dst = y + ((size_t)(s0 + s) * g->K + k) * PQ;
                const float *src = t + (size_t)k * nb * PQ + s * PQ;
                const float bk = b ? b[k] : 0.0f;
                if (c->bf16)
                    for (size_t i = 0; i < PQ; i++) dst[i] = cpu_bf16(src[i]) + bk;
                else
                    for (size_t i = 0; i < PQ; i++) dst[i] = src[i] + bk;
            }
    }
}

void cpu_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                         float *dx)
{
    const int nbmax = conv_chunk(g), CKK = g->C * g->kernel * g->kernel;
    const size_t PQ = (size_t)g->P * g->Q, in_n = (size_t)g->C * g->H * g->W;
    const size_t opn = conv_operand(g);
    float *col = cpu_scratch(c, 2 * opn);
    if (!col) return;
    float *t = col + opn;
    memset(dx, 0, (size_t)g->B * in_n * sizeof(float));
    for (int s0 = 0; s0 < g->B; s0 += nbmax) {
        int nb = g->B - s0 < nbmax ? g->B - s0 : nbmax;
        to_kmajor(g, nb, dy + (size_t)s0 * g->K * PQ, t);
        /* col (CKK, nb PQ) = w^T (CKK, K) t (K, nb PQ) */
        cpu_sgemm(c, 1, 0, CKK, (int)(nb * PQ), g->K, 1.0f, w, CKK, t, (int)(nb * PQ), 0.0f,
                  col, (int)(nb * PQ));
        col2im(g, nb, col, dx + s0 * in_n);
        if (c->bf16)
            for (size_t i = 0; i < (size_t)nb * in_n; i++)
                dx[s0 * in_n + i] = cpu_bf16(dx[s0 * in_n + i]);
    }
}

void cpu_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                           float *dw, float *db)
{
    const int nbmax = conv_chunk(g), CKK = g->C * g->kernel * g->kernel;
    const size_t PQ = (size_t)g->P * g->Q, in_n = (size_t)g->C * g->H * g->W;
    const size_t opn = conv_operand(g), nw = (size_t)g->K * CKK;
    /* cpu-bf16: the whole batch's gradient is summed apart, then rounded and added */
    float *col = cpu_scratch(c, 2 * opn + (c->bf16 ? nw : 0));
    if (!col) return;
    float *t = col + opn, *acc = c->bf16 ? t + opn : dw; // (K, CKK)
    for (int s0 = 0; s0 < g->B; s0 += nbmax) {
        int nb = g->B - s0 < nbmax ? g->B - s0 : nbmax;
        im2col(g, nb, x + s0 * in_n, col);
        to_kmajor(g, nb, dy + (size_t)s0 * g->K * PQ, t);
        /* acc (K, CKK) += t (K, nb PQ) col^T (nb PQ, CKK) */
        cpu_sgemm(c, 0, 1, g->K, CKK, (int)(nb * PQ), 1.0f, t, (int)(nb * PQ), col,
                  (int)(nb * PQ), acc == dw || s0 > 0 ? 1.0f : 0.0f, acc, CKK);
        if (db)
            for (int k = 0; k < g->K; k++) {
                const float *r = t + (size_t)k * nb * PQ;
                double s = 0;
                for (size_t i = 0; i < nb * PQ; i++) s += r[i];
                db[k] += (float)s;
            }
    }
    if (acc != dw)
        for (size_t i = 0; i < nw; i++) dw[i] += cpu_bf16(acc[i]);
}

/* The 2x2 window at stride 2 (the common pooling), the general loops' comparisons in
 * their order: the same maxima and the same first-maximum positions. Items are (sample,
 * channel) planes, split over threads (cpu_par). */
typedef struct pool_arg {
    const bk_pool *g;
    const float *x, *dy;
    float *y;
} pool_arg;

static void maxpool2_fwd(void *arg, size_t lo, size_t hi, int slot)
{
    const pool_arg *a = arg;
    const bk_pool *g = a->g;
    (void)slot;
    for (size_t bc = lo; bc < hi; bc++) {
        const float *xs = a->x + bc * g->H * g->W;
        float *ys = a->y + bc * g->P * g->Q;
        for (int p = 0; p < g->P; p++) {
            const float *r0 = xs + (size_t)(2 * p) * g->W, *r1 = r0 + g->W;
            float *o = ys + (size_t)p * g->Q;
            for (int q = 0; q < g->Q; q++) {
                float m = r0[2 * q];
                m = r0[2 * q + 1] > m ? r0[2 * q + 1] : m;
                m = r1[2 * q] > m ? r1[2 * q] : m;
                m = r1[2 * q + 1] > m ? r1[2 * q + 1] : m;
                o[q] = m;
            }
        }
    }
}

/* dx (the planes lo..hi) gets each window's dy at its first maximum and +0 elsewhere,
 * written once per element without branches on the data: the window's four selections
 * follow the forward's comparisons in their order (a NaN never wins, so a NaN first
 * element keeps the window, as in the general loop). The winner gets +0 + dy, the general
 * loop's sum into a zeroed dx (so a -0 dy gives +0 there too). Rows and columns no window
 * covers (odd H or W) are zeroed. */
/* m ? a : b for an all-ones or all-zeros mask m, on the bits. */
static inline float fbits_select(uint32_t m, float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

static void maxpool2_bwd(void *arg, size_t lo, size_t hi, int slot)
{
    const pool_arg *a = arg;
    const bk_pool *g = a->g;
    const int W = g->W, Q = g->Q;
    (void)slot;
    for (size_t bc = lo; bc < hi; bc++) {
        const float *xs = a->x + bc * g->H * W;
        float *dxs = a->y + bc * g->H * W;
        const float *dys = a->dy + bc * g->P * Q;
        for (int p = 0; p < g->P; p++) {
            const float *x0 = xs + (size_t)(2 * p) * W, *x1 = x0 + W;
            float *d0 = dxs + (size_t)(2 * p) * W, *d1 = d0 + W;
            const float *dy = dys + (size_t)p * Q;
            for (int q = cpu_maxpool2_bwd_row(Q, x0, x1, dy, d0, d1); q < Q; q++) {
                const float v00 = x0[2 * q], v01 = x0[2 * q + 1];
                const float v10 = x1[2 * q], v11 = x1[2 * q + 1];
                /* all-ones masks; selections as bit operations, not branches */
                const uint32_t s01 = -(uint32_t)(v01 > v00);
                const float m1 = fbits_select(s01, v01, v00);
                const uint32_t s10 = -(uint32_t)(v10 > m1);
                const float m2 = fbits_select(s10, v10, m1);
                const uint32_t s11 = -(uint32_t)(v11 > m2);
                const float gq = 0.0f + dy[q];
                d0[2 * q] = fbits_select(s01 | s10 | s11, 0.0f, gq);
                d0[2 * q + 1] = fbits_select(s01 & ~s10 & ~s11, gq, 0.0f);
                d1[2 * q] = fbits_select(s10 & ~s11, gq, 0.0f);
                d1[2 * q + 1] = fbits_select(s11, gq, 0.0f);
            }
            if (2 * Q < W) {
                memset(d0 + 2 * Q, 0, (size_t)(W - 2 * Q) * sizeof(float));
                memset(d1 + 2 * Q, 0, (size_t)(W - 2 * Q) * sizeof(float));
            }
        }
        if (2 * g->P < g->H)
            memset(dxs + (size_t)(2 * g->P) * W, 0, (size_t)(g->H - 2 * g->P) * W * sizeof(float));
    }
}

/* Planes per thread: at least ~64 K input floats each. */
static size_t pool_min_planes(const bk_pool *g)
{
    size_t plane = (size_t)g->H * g->W;
    return plane ? ((size_t)1 << 16) / plane + 1 : 1;
}

void cpu_maxpool_fwd(bk_ctx *c, const bk_pool *g, const float *x, float *y)
{
    (void)c;
    if (g->kernel == 2 && g->stride == 2) {
        pool_arg a = {g, x, NULL, y};
        cpu_par((size_t)g->B * g->C, pool_min_planes(g), maxpool2_fwd, &a);
        return;
    }
    for (size_t bc = 0; bc < (size_t)g->B * g->C; bc++) {
        const float *xs = x + bc * g->H * g->W;
        float *ys = y + bc * g->P * g->Q;
        for (int p = 0; p < g->P; p++)
            for (int q = 0; q < g->Q; q++) {
                const float *win = xs + (p * g->stride) * g->W + q * g->stride;
                float m = win[0];
                for (int i = 0; i < g->kernel; i++)
                    for (int j = 0; j < g->kernel; j++)
                        if (win[i * g->W + j] > m) m = win[i * g->W + j];
                ys[p * g->Q + q] = m;
            }
    }
}

void cpu_maxpool_bwd(bk_ctx *c, const bk_pool *g, const float *x, const float *dy, float *dx)
{
    (void)c;
    if (g->kernel == 2 && g->stride == 2) {
        pool_arg a = {g, x, dy, dx};
        cpu_par((size_t)g->B * g->C, pool_min_planes(g), maxpool2_bwd, &a);
        return;
    }
    memset(dx, 0, (size_t)g->B * g->C * g->H * g->W * sizeof(float));
    for (size_t bc = 0; bc < (size_t)g->B * g->C; bc++) {
        const float *xs = x + bc * g->H * g->W;
        float *dxs = dx + bc * g->H * g->W;
        const float *dys = dy + bc * g->P * g->Q;
        for (int p = 0; p < g->P; p++)
            for (int q = 0; q < g->Q; q++) {
                int base = (p * g->stride) * g->W + q * g->stride, best = base;
                for (int i = 0; i < g->kernel; i++)
                    for (int j = 0; j < g->kernel; j++)
                        if (xs[base + i * g->W + j] > xs[best]) best = base + i * g->W + j;
                dxs[best] += dys[p * g->Q + q];
            }
    }
}
