/* cpu_conv.c: 2-D convolution by im2col + OpenBLAS GEMM, one sample at a time: the
 * sample's im2col matrix stays in cache for its GEMM, and the GEMMs read and write the
 * activations in their own (C, H, W) layout, with no copy between layouts. And max
 * pooling. In a cpu-bf16 context the GEMMs take bf16-rounded inputs and each direction's
 * result is rounded to bf16 once (cuDNN's bf16 tensors). */
#include "exec/cpu/cpu.h"

#include <string.h>

/* Floats of one sample's im2col matrix (C k k, P Q). */
static size_t conv_col(const bk_conv *g)
{
    return (size_t)g->C * g->kernel * g->kernel * g->P * g->Q;
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
                        if (st == 1)
                            for (int q = q0; q < q1; q++) xr[q] += o[q];
                        else
                            for (int q = q0; q < q1; q++) xr[q * st] += o[q];
                    }
                }
            }
}

void cpu_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                    const float *b, float *y)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    const size_t in_n = (size_t)g->C * g->H * g->W, out_n = (size_t)g->K * PQ;
    float *col = cpu_scratch(c, conv_col(g));
    if (!col) return;
    for (int s = 0; s < g->B; s++) {
        float *ys = y + s * out_n;
        im2col(g, 1, x + s * in_n, col);
        /* ys (K, PQ) = w (K, CKK) col (CKK, PQ) */
        cpu_sgemm(c, 0, 0, g->K, PQ, CKK, 1.0f, w, CKK, col, PQ, 0.0f, ys, PQ);
        for (int k = 0; k < g->K; k++) {
            float *r = ys + (size_t)k * PQ;
            const float bk = b ? b[k] : 0.0f;
            if (c->bf16)
                for (int i = 0; i < PQ; i++) r[i] = cpu_bf16(r[i]) + bk;
            else
                for (int i = 0; i < PQ; i++) r[i] += bk;
        }
    }
}

void cpu_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                         float *dx)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    const size_t in_n = (size_t)g->C * g->H * g->W, out_n = (size_t)g->K * PQ;
    float *col = cpu_scratch(c, conv_col(g));
    if (!col) return;
    for (int s = 0; s < g->B; s++) {
        float *dxs = dx + s * in_n;
        /* col (CKK, PQ) = w^T (CKK, K) dy_s (K, PQ) */
        cpu_sgemm(c, 1, 0, CKK, PQ, g->K, 1.0f, w, CKK, dy + s * out_n, PQ, 0.0f, col, PQ);
        memset(dxs, 0, in_n * sizeof(float));
        col2im(g, 1, col, dxs);
        if (c->bf16)
            for (size_t i = 0; i < in_n; i++) dxs[i] = cpu_bf16(dxs[i]);
    }
}

/* The sum of r[0 .. n) in double, over 8 interleaved partial sums (element i to sum
 * i % 8, added in a fixed order): 8 independent additions in flight instead of one chain. */
static double sum_double(const float *r, int n)
{
    double p[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) p[j] += r[i + j];
    for (; i < n; i++) p[i % 8] += r[i];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

void cpu_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                           float *dw, float *db)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    const size_t in_n = (size_t)g->C * g->H * g->W, out_n = (size_t)g->K * PQ;
    const size_t ncol = conv_col(g), nw = (size_t)g->K * CKK;
    /* the bias sums in double (K of them, first: malloc's alignment), then the im2col
     * matrix; cpu-bf16: the whole batch's weight gradient is summed apart, then rounded
     * and added */
    const size_t nsum = 2 * (size_t)(db ? g->K : 0);
    float *space = cpu_scratch(c, nsum + ncol + (c->bf16 ? nw : 0));
    if (!space) return;
    double *bsum = (double *)(void *)space;
    float *col = space + nsum, *acc = c->bf16 ? col + ncol : dw; /* (K, CKK) */
    if (db) memset(bsum, 0, (size_t)g->K * sizeof *bsum);
    for (int s = 0; s < g->B; s++) {
        const float *dys = dy + s * out_n;
        im2col(g, 1, x + s * in_n, col);
        /* acc (K, CKK) += dy_s (K, PQ) col^T (PQ, CKK) */
        cpu_sgemm(c, 0, 1, g->K, CKK, PQ, 1.0f, dys, PQ, col, PQ,
                  acc == dw || s > 0 ? 1.0f : 0.0f, acc, CKK);
        if (db)
            for (int k = 0; k < g->K; k++) bsum[k] += sum_double(dys + (size_t)k * PQ, PQ);
    }
    if (db)
        for (int k = 0; k < g->K; k++) db[k] += (float)bsum[k];
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
