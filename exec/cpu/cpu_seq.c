/* cpu_seq.c: the CPU backend's transformer layers: layer normalization, token + position
 * embedding, and the causal multi-head attention core. Layer normalization and embedding
 * are plain loops with double accumulators; the fp32 attention runs its products as GEMMs
 * per (sample, head). In a cpu-bf16 context the attention keeps its loops, each product's
 * inputs rounded to bf16 (cpu_in), as cuBLAS's. */
#include "exec/cpu/cpu.h"

#include <math.h>
#include <string.h>

#define LN_EPS 1e-5

/* Layer normalization's rows split over threads (cpu_par): each row is one item. */
typedef struct ln_arg {
    int D;
    const float *x, *gamma, *beta, *mean_in, *rstd_in, *dy;
    float *y, *mean, *rstd;
} ln_arg;

/* Sums in double over 8 interleaved partial sums (element j to sum j % 8, added in a
 * fixed order): 8 independent additions in flight instead of one chain of D. */
#define SUM8(D, EXPR, OUT)                                                               \
    do {                                                                                 \
        double p_[8] = {0};                                                              \
        int j = 0;                                                                       \
        while (j + 8 <= (D))                                                             \
            for (int k_ = 0; k_ < 8; k_++, j++) p_[k_] += (EXPR);                        \
        for (int k_ = 0; j < (D); j++, k_++) p_[k_] += (EXPR);                           \
        (OUT) = ((p_[0] + p_[1]) + (p_[2] + p_[3])) + ((p_[4] + p_[5]) + (p_[6] + p_[7])); \
    } while (0)

static void layernorm_fwd_rows(void *p, size_t lo, size_t hi, int slot)
{
    const ln_arg *g = p;
    const int D = g->D;
    (void)slot;
    for (size_t i = lo; i < hi; i++) {
        const float *xi = g->x + i * D;
        float *yi = g->y + i * D;
        double m, v;
        SUM8(D, (double)xi[j], m);
        m /= D;
        SUM8(D, (xi[j] - m) * (xi[j] - m), v);
        v /= D;
        double r = 1.0 / sqrt(v + LN_EPS);
        for (int j = 0; j < D; j++)
            yi[j] = (float)((xi[j] - m) * r) * g->gamma[j] + g->beta[j];
        g->mean[i] = (float)m;
        g->rstd[i] = (float)r;
    }
}

void cpu_layernorm_fwd(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                       const float *beta, float *y, float *mean, float *rstd)
{
    (void)c;
    ln_arg g = {.D = D, .x = x, .gamma = gamma, .beta = beta, .y = y, .mean = mean,
                .rstd = rstd};
    cpu_par((size_t)N, 64, layernorm_fwd_rows, &g);
}

static void layernorm_bwd_rows(void *p, size_t lo, size_t hi, int slot)
{
    const ln_arg *g = p;
    const int D = g->D;
    const float *mean = g->mean_in, *rstd = g->rstd_in, *gamma = g->gamma;
    (void)slot;
    for (size_t i = lo; i < hi; i++) {
        const float *xi = g->x + i * D, *dyi = g->dy + i * D;
        float *dxi = g->y + i * D;
        double a, b; /* mean of dy gamma, and of dy gamma xhat */
        SUM8(D, (double)dyi[j] * gamma[j], a);
        SUM8(D, (double)dyi[j] * gamma[j] * ((xi[j] - mean[i]) * rstd[i]), b);
        a /= D;
        b /= D;
        for (int j = 0; j < D; j++) {
            double xh = (xi[j] - mean[i]) * rstd[i];
            dxi[j] = (float)(rstd[i] * ((double)dyi[j] * gamma[j] - a - xh * b));
        }
    }
}

void cpu_layernorm_bwd_data(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                            const float *mean, const float *rstd, const float *dy, float *dx)
{
    (void)c;
    ln_arg g = {.D = D, .x = x, .gamma = gamma, .mean_in = mean, .rstd_in = rstd, .dy = dy,
                .y = dx};
    cpu_par((size_t)N, 64, layernorm_bwd_rows, &g);
}

void cpu_layernorm_bwd_weight(bk_ctx *c, int N, int D, const float *x, const float *mean,
                              const float *rstd, const float *dy, float *dgamma, float *dbeta)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * D, *dyi = dy + (size_t)i * D;
        for (int j = 0; j < D; j++) {
            dgamma[j] += dyi[j] * ((xi[j] - mean[i]) * rstd[i]);
            dbeta[j] += dyi[j];
        }
    }
}

void cpu_embedding_fwd(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                       const float *wte, const float *wpe, float *y)
{
    (void)c;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int id = (int)tokens[b * T + t];
            if (id < 0 || id >= V) id = 0; /* the data loader validates ids */
            const float *e = wte + (size_t)id * D, *p = wpe + (size_t)t * D;
            float *o = y + ((size_t)b * T + t) * D;
            for (int j = 0; j < D; j++) o[j] = e[j] + p[j];
        }
}

void cpu_embedding_bwd_weight(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                              const float *dy, float *dwte, float *dwpe)
{
    (void)c;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int id = (int)tokens[b * T + t];
            if (id < 0 || id >= V) id = 0;
            const float *d = dy + ((size_t)b * T + t) * D;
            float *e = dwte + (size_t)id * D, *p = dwpe + (size_t)t * D;
            for (int j = 0; j < D; j++) {
                e[j] += d[j];
                p[j] += d[j];
            }
        }
}

/* The attention as plain loops, each product's inputs through cpu_in: the cpu-bf16 path. */
static void attention_fwd_loops(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                                float *att, float *y)
{
    const int hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * D3 + h * hs;
                float *a = att + (((size_t)b * H + h) * T + t) * T;
                float mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * D3 + D + h * hs;
                    float s = 0;
                    for (int i = 0; i < hs; i++) s += cpu_in(c, q[i]) * cpu_in(c, k[i]);
                    a[u] = s * scale;
                    if (a[u] > mx) mx = a[u];
                }
                double sum = 0;
                for (int u = 0; u <= t; u++) {
                    a[u] = expf(a[u] - mx);
                    sum += a[u];
                }
                float inv = (float)(1.0 / sum);
                for (int u = 0; u <= t; u++) a[u] *= inv;
                for (int u = t + 1; u < T; u++) a[u] = 0.0f;
                float *o = y + ((size_t)b * T + t) * D + h * hs;
                memset(o, 0, hs * sizeof(float));
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * D3 + 2 * D + h * hs;
                    const float au = cpu_in(c, a[u]);
                    for (int i = 0; i < hs; i++) o[i] += au * cpu_in(c, v[i]);
                }
            }
}

static void attention_bwd_loops(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                                const float *att, const float *dy, float *dqkv)
{
    const int hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    float *da = cpu_scratch(c, (size_t)T);
    if (!da) return;
    memset(dqkv, 0, (size_t)B * T * D3 * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * H + h) * T + t) * T;
                const float *d = dy + ((size_t)b * T + t) * D + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * D3 + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * D3 + h * hs;
                /* through y = sum_u a[u] v[u] */
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * D3 + 2 * D + h * hs;
                    float *dv = dqkv + ((size_t)b * T + u) * D3 + 2 * D + h * hs;
                    const float au = cpu_in(c, a[u]);
                    float s = 0;
                    for (int i = 0; i < hs; i++) {
                        const float di = cpu_in(c, d[i]);
                        s += di * cpu_in(c, v[i]);
                        dv[i] += au * di;
                    }
                    da[u] = s;
                    dot += (double)a[u] * s;
                }
                /* through the softmax and the scaled scores q . k */
                for (int u = 0; u <= t; u++) {
                    /* cpu-bf16: the unscaled score gradient is the product's input */
                    float ds = cpu_in(c, a[u] * (da[u] - (float)dot)) * scale;
                    const float *k = qkv + ((size_t)b * T + u) * D3 + D + h * hs;
                    float *dk = dqkv + ((size_t)b * T + u) * D3 + D + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * cpu_in(c, k[i]);
                        dk[i] += ds * cpu_in(c, q[i]);
                    }
                }
            }
}

/* The fp32 attention's arguments, shared by its threads; items are (sample, head) pairs,
 * each writing only its own blocks of att, y and dqkv. */
typedef struct att_arg {
    bk_ctx *c;
    int T, D, H;
    const float *qkv, *att_in, *dy;
    float *att, *y, *dqkv, *ds; /* ds: T T floats of scratch per thread */
} att_arg;

/* A softmax row's reductions over 8 interleaved partial results (element u to part
 * u % 8, combined in a fixed order): 8 independent chains instead of one. */
static inline float row_max(const float *r, int n)
{
    float p[8];
    for (int j = 0; j < 8; j++) p[j] = r[0];
    int u = 0;
    for (; u + 8 <= n; u += 8)
        for (int j = 0; j < 8; j++) p[j] = r[u + j] > p[j] ? r[u + j] : p[j];
    for (; u < n; u++) p[u % 8] = r[u] > p[u % 8] ? r[u] : p[u % 8];
    float a = p[0] > p[1] ? p[0] : p[1], b = p[2] > p[3] ? p[2] : p[3];
    float c = p[4] > p[5] ? p[4] : p[5], d = p[6] > p[7] ? p[6] : p[7];
    a = a > b ? a : b;
    c = c > d ? c : d;
    return a > c ? a : c;
}

static inline float row_sum(const float *r, int n)
{
    float p[8] = {0};
    int u = 0;
    for (; u + 8 <= n; u += 8)
        for (int j = 0; j < 8; j++) p[j] += r[u + j];
    for (; u < n; u++) p[u % 8] += r[u];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

static inline float row_dot(const float *a, const float *b, int n)
{
    float p[8] = {0};
    int u = 0;
    for (; u + 8 <= n; u += 8)
        for (int j = 0; j < 8; j++) p[j] += a[u + j] * b[u + j];
    for (; u < n; u++) p[u % 8] += a[u] * b[u];
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/* fp32: per (sample, head) the scores S = Q K^T, the masked softmax in place, and
 * Y = A V as GEMMs over the head's strided columns of qkv (leading dimension 3D). */
static void attention_fwd_part(void *p, size_t lo, size_t hi, int slot)
{
    const att_arg *g = p;
    const int T = g->T, D = g->D, H = g->H, hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    (void)slot;
    for (size_t bh = lo; bh < hi; bh++) {
        const int b = (int)(bh / H), h = (int)(bh % H);
        const float *q = g->qkv + (size_t)b * T * D3 + h * hs;
        float *a = g->att + bh * T * T;
        /* a (T, T) = scale q (T, hs) k^T (hs, T) */
        cpu_sgemm(g->c, 0, 1, T, T, hs, scale, q, D3, q + D, D3, 0.0f, a, T);
        for (int t = 0; t < T; t++) {
            float *r = a + (size_t)t * T, mx = row_max(r, t + 1);
            for (int u = 0; u <= t; u++) r[u] -= mx;
            cpu_exp_fast((size_t)t + 1, r, r);
            float inv = 1.0f / row_sum(r, t + 1);
            for (int u = 0; u <= t; u++) r[u] *= inv;
            for (int u = t + 1; u < T; u++) r[u] = 0.0f;
        }
        /* y (T, hs) = a (T, T) v (T, hs) */
        cpu_sgemm(g->c, 0, 0, T, hs, T, 1.0f, a, T, q + 2 * D, D3, 0.0f,
                  g->y + (size_t)b * T * D + h * hs, D);
    }
}

/* fp32 backward: dA = dY V^T, dV = A^T dY, dS = A (dA - rowsum(A dA)) scale in place,
 * dQ = dS K and dK = dS^T Q, each a GEMM writing its block of dqkv. */
static void attention_bwd_part(void *p, size_t lo, size_t hi, int slot)
{
    const att_arg *g = p;
    const int T = g->T, D = g->D, H = g->H, hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    float *ds = g->ds + (size_t)slot * T * T;
    for (size_t bh = lo; bh < hi; bh++) {
        const int b = (int)(bh / H), h = (int)(bh % H);
        const float *q = g->qkv + (size_t)b * T * D3 + h * hs;
        const float *a = g->att_in + bh * T * T;
        const float *d = g->dy + (size_t)b * T * D + h * hs;
        float *dq = g->dqkv + (size_t)b * T * D3 + h * hs;
        /* ds (T, T) = d (T, hs) v^T (hs, T); dv (T, hs) = a^T (T, T) d (T, hs) */
        cpu_sgemm(g->c, 0, 1, T, T, hs, 1.0f, d, D, q + 2 * D, D3, 0.0f, ds, T);
        cpu_sgemm(g->c, 1, 0, T, hs, T, 1.0f, a, T, d, D, 0.0f, dq + 2 * D, D3);
        for (int t = 0; t < T; t++) {
            const float *ar = a + (size_t)t * T;
            float *r = ds + (size_t)t * T, dot = row_dot(ar, r, t + 1);
            for (int u = 0; u <= t; u++) r[u] = ar[u] * (r[u] - dot) * scale;
            for (int u = t + 1; u < T; u++) r[u] = 0.0f;
        }
        /* dq (T, hs) = ds (T, T) k (T, hs); dk (T, hs) = ds^T (T, T) q (T, hs) */
        cpu_sgemm(g->c, 0, 0, T, hs, T, 1.0f, ds, T, q + D, D3, 0.0f, dq, D3);
        cpu_sgemm(g->c, 1, 0, T, hs, T, 1.0f, ds, T, q, D3, 0.0f, dq + D, D3);
    }
}

static void attention_fwd_gemm(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                               float *att, float *y)
{
    att_arg g = {.c = c, .T = T, .D = D, .H = H, .qkv = qkv, .att = att, .y = y};
    cpu_par((size_t)B * H, 1, attention_fwd_part, &g);
}

static void attention_bwd_gemm(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                               const float *att, const float *dy, float *dqkv)
{
    float *ds = cpu_scratch(c, (size_t)T * T * cpu_par_slots((size_t)B * H));
    if (!ds) return;
    if ((D / H) * H != D) /* columns no head has */
        memset(dqkv, 0, (size_t)B * T * 3 * D * sizeof(float));
    att_arg g = {.c = c, .T = T, .D = D, .H = H, .qkv = qkv, .att_in = att, .dy = dy,
                 .dqkv = dqkv, .ds = ds};
    cpu_par((size_t)B * H, 1, attention_bwd_part, &g);
}

void cpu_attention_fwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv, float *att,
                       float *y)
{
    if (c->bf16) attention_fwd_loops(c, B, T, D, H, qkv, att, y);
    else attention_fwd_gemm(c, B, T, D, H, qkv, att, y);
}

void cpu_attention_bwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                       const float *att, const float *dy, float *dqkv)
{
    if (c->bf16) attention_bwd_loops(c, B, T, D, H, qkv, att, dy, dqkv);
    else attention_bwd_gemm(c, B, T, D, H, qkv, att, dy, dqkv);
}
