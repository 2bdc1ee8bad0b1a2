/* cpu_conv.c: 2-D convolution by im2col + OpenBLAS GEMM and max pooling. The forward and
 * the input gradient run one sample at a time, samples split over threads: a sample's
 * im2col matrix stays in cache for its GEMM, which reads and writes the activations in
 * their own (C, H, W) layout. The weight gradient runs chunks of a fixed number of
 * samples, one GEMM each (split over threads by cpu_sgemm). In a cpu-bf16 context the GEMMs take bf16-rounded inputs and each direction's
 * result is rounded to bf16 once (cuDNN's bf16 tensors). */
#include "exec/cpu/cpu.h"

#include <string.h>

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

/* col (C k k, P Q), rows ld apart: column p holds the receptive field of output pixel p of
 * one sample x (C, H, W). Rows are filled in runs: zeros where the window leaves the
 * image, a copy (stride 1) or a strided gather in between. */
static void im2col(const bk_conv *g, const float *x, float *col, size_t ld)
{
    const int k = g->kernel, st = g->stride;
    for (int ch = 0; ch < g->C; ch++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + (size_t)((ch * k + ki) * k + kj) * ld;
                const float *xs = x + (size_t)ch * g->H * g->W;
                int q0, q1;
                valid_q(g, kj, &q0, &q1);
                for (int p = 0; p < g->P; p++) {
                    float *o = row + p * g->Q;
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

/* The adjoint of im2col for one sample: adds col's (C k k, P Q) entries back into dx
 * (C, H, W), which the caller zeroed. */
static void col2im(const bk_conv *g, const float *col, float *dx)
{
    const int k = g->kernel, PQ = g->P * g->Q, st = g->stride;
    for (int ch = 0; ch < g->C; ch++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + (size_t)((ch * k + ki) * k + kj) * PQ;
                float *xs = dx + (size_t)ch * g->H * g->W;
                int q0, q1;
                valid_q(g, kj, &q0, &q1);
                for (int p = 0; p < g->P; p++) {
                    int h = p * st - g->pad + ki;
                    if (h < 0 || h >= g->H) continue;
                    float *xr = xs + h * g->W - g->pad + kj;
                    const float *o = row + p * g->Q;
                    if (st == 1)
                        for (int q = q0; q < q1; q++) xr[q] += o[q];
                    else
                        for (int q = q0; q < q1; q++) xr[q * st] += o[q];
                }
            }
}

/* The convolution's arguments, shared by its threads. Forward and input gradient: items
 * are samples, each with its own im2col matrix (col + slot ncol) and its own block of y
 * or dx. Weight gradient: items are a chunk's samples, each filling its columns of the
 * chunk's im2col matrix col and of the gradient copy t (both rows ld apart). */
typedef struct conv_arg {
    bk_ctx *c;
    const bk_conv *g;
    const float *x, *w, *b, *dy;
    float *y, *col, *t; /* y: the output, or the input gradient when data */
    size_t ncol, ld;
    int data; /* the per-sample pass is the input gradient's */
} conv_arg;

/* Samples lo..hi of the forward (a->data 0: y = w * im2col(x) + b) or of the input
 * gradient (a->data 1: dx = col2im(w^T dy)), with the slot's im2col matrix. */
static void conv_sample_part(void *p, size_t lo, size_t hi, int slot)
{
    const conv_arg *a = p;
    const bk_conv *g = a->g;
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    const size_t in_n = (size_t)g->C * g->H * g->W, out_n = (size_t)g->K * PQ;
    float *col = a->col + (size_t)slot * a->ncol;
    for (size_t s = lo; s < hi; s++) {
        if (a->data) {
            float *dxs = a->y + s * in_n;
            /* col (CKK, PQ) = w^T (CKK, K) dy_s (K, PQ) */
            cpu_sgemm(a->c, 1, 0, CKK, PQ, g->K, 1.0f, a->w, CKK, a->dy + s * out_n, PQ,
                      0.0f, col, PQ);
            memset(dxs, 0, in_n * sizeof(float));
            col2im(g, col, dxs);
            if (a->c->bf16)
                for (size_t i = 0; i < in_n; i++) dxs[i] = cpu_bf16(dxs[i]);
            continue;
        }
        float *ys = a->y + s * out_n;
        im2col(g, a->x + s * in_n, col, (size_t)PQ);
        /* ys (K, PQ) = w (K, CKK) col (CKK, PQ) */
        cpu_sgemm(a->c, 0, 0, g->K, PQ, CKK, 1.0f, a->w, CKK, col, PQ, 0.0f, ys, PQ);
        for (int k = 0; k < g->K; k++) {
            float *r = ys + (size_t)k * PQ;
            const float bk = a->b ? a->b[k] : 0.0f;
            if (a->c->bf16)
                for (int i = 0; i < PQ; i++) r[i] = cpu_bf16(r[i]) + bk;
            else
                for (int i = 0; i < PQ; i++) r[i] += bk;
        }
    }
}

/* Splits a per-sample pass over threads with one im2col matrix per thread; cpu-bf16 runs
 * it on the caller's thread alone (its GEMMs share the context's rounded copies). */
static void conv_per_sample(bk_ctx *c, conv_arg *a)
{
    const bk_conv *g = a->g;
    int slots = c->bf16 ? 1 : cpu_par_slots((size_t)g->B);
    a->ncol = (size_t)g->C * g->kernel * g->kernel * g->P * g->Q;
    if (!(a->col = cpu_scratch(c, a->ncol * (size_t)slots))) return;
    if (c->bf16) conv_sample_part(a, 0, (size_t)g->B, 0);
    else cpu_par((size_t)g->B, 1, conv_sample_part, a);
}

void cpu_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                    const float *b, float *y)
{
    conv_arg a = {.c = c, .g = g, .x = x, .w = w, .b = b, .y = y};
    conv_per_sample(c, &a);
}

void cpu_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                         float *dx)
{
    conv_arg a = {.c = c, .g = g, .w = w, .dy = dy, .y = dx, .data = 1};
    conv_per_sample(c, &a);
}

/* The sum of r[0 .. n) in double, over 8 interleaved partial sums (element i to sum
 * i % 8, added in a fixed order): 8 independent additions in flight instead of one chain. */
static double sum_double(const float *r, size_t n)
{
    double p[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) p[j] += r[i + j];
    for (; i < n; i++) p[i % 8] += r[i];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/* Weight gradient: chunks of samples (a count fixed by the shape: the same sums at any
 * thread count), each one GEMM whose inner dimension is the chunk's pixels, split over
 * threads by cpu_sgemm; one sample at a time when such a GEMM is too small to split. The budget per chunk operand, in floats (4 MiB): fmnist conv2
 * takes 18 samples a chunk. */
#define WGRAD_CHUNK_FLOATS ((size_t)1 << 20)

/* Sample s0 + i of the chunk: its im2col block and its dy rows at column i PQ. */
static void conv_wgrad_prep(void *p, size_t lo, size_t hi, int slot)
{
    const conv_arg *a = p;
    const bk_conv *g = a->g;
    const size_t PQ = (size_t)g->P * g->Q, in_n = (size_t)g->C * g->H * g->W;
    (void)slot;
    for (size_t i = lo; i < hi; i++) {
        im2col(g, a->x + i * in_n, a->col + i * PQ, a->ld);
        for (int k = 0; k < g->K; k++)
            memcpy(a->t + (size_t)k * a->ld + i * PQ, a->dy + (i * g->K + k) * PQ,
                   PQ * sizeof(float));
    }
}

void cpu_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                           float *dw, float *db)
{
    const int CKK = g->C * g->kernel * g->kernel;
    const size_t PQ = (size_t)g->P * g->Q, in_n = (size_t)g->C * g->H * g->W;
    const size_t nw = (size_t)g->K * CKK, per = (size_t)(CKK > g->K ? CKK : g->K) * PQ;
    size_t nbmax = per ? WGRAD_CHUNK_FLOATS / per : 1;
    if (nbmax < 1) nbmax = 1;
    if (nbmax > (size_t)g->B) nbmax = (size_t)g->B;
    /* a chunk's GEMM too small for cpu_sgemm to split runs one sample at a time instead
     * (the choice follows the shape only): its im2col matrix stays in cache and dy needs
     * no copy (fmnist conv1) */
    if ((double)g->K * CKK * (double)(nbmax * PQ) < 2 * CPU_GEMM_PIECE_MNK) nbmax = 1;
    /* the bias sums in double (K of them, first: malloc's alignment), the chunk's im2col
     * matrix and dy copy (none for one sample: dy's rows are the GEMM's); cpu-bf16: the
     * whole batch's weight gradient is summed apart, then rounded and added */
    const size_t nsum = 2 * (size_t)(db ? g->K : 0), ncol = (size_t)CKK * nbmax * PQ;
    const size_t nt = nbmax > 1 ? (size_t)g->K * nbmax * PQ : 0;
    float *space = cpu_scratch(c, nsum + ncol + nt + (c->bf16 ? nw : 0));
    if (!space) return;
    double *bsum = (double *)(void *)space;
    float *acc = c->bf16 ? space + nsum + ncol + nt : dw; /* (K, CKK) */
    if (db) memset(bsum, 0, (size_t)g->K * sizeof *bsum);
    for (size_t s0 = 0; s0 < (size_t)g->B; s0 += nbmax) {
        size_t nb = (size_t)g->B - s0 < nbmax ? (size_t)g->B - s0 : nbmax;
        conv_arg a = {.c = c, .g = g, .x = x + s0 * in_n, .dy = dy + s0 * g->K * PQ,
                      .col = space + nsum, .t = space + nsum + ncol, .ld = nb * PQ};
        const float *t = a.t;
        if (nbmax == 1) {
            im2col(g, a.x, a.col, PQ);
            t = a.dy;
        } else {
            cpu_par(nb, 1, conv_wgrad_prep, &a);
        }
        /* acc (K, CKK) += t (K, nb PQ) col^T (nb PQ, CKK) */
        cpu_sgemm(c, 0, 1, g->K, CKK, (int)a.ld, 1.0f, t, (int)a.ld, a.col, (int)a.ld,
                  acc == dw || s0 > 0 ? 1.0f : 0.0f, acc, CKK);
        if (db)
            for (int k = 0; k < g->K; k++) bsum[k] += sum_double(t + k * a.ld, a.ld);
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
