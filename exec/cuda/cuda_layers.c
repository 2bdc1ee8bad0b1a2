/* cuda_layers.c: the CUDA backend's layer entries other than convolution: linear layers and
 * attention as cuBLAS GEMMs plus small kernels, the rest as plumb's own kernels
 * (exec/cuda/cuda_kernels.h). Every entry is queued on the context's stream. */
#include "exec/cuda/cuda_internal.h"

#include <math.h>

#include "exec/cuda/cuda_kernels.h"

/* ------------------------------------------------------------------ linear */

void cuda_linear_fwd(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                     const float *b, float *y)
{
    /* y (N, out) = x (N, in) w^T (in, out) + b */
    cuda_gemm_rm(c, 0, 1, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b) KERNEL_CHECK(c, ck_bias_rows(c->stream, N, out, b, y));
}

void cuda_linear_bwd_data(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                          float *dx)
{
    /* dx (N, in) = dy (N, out) w (out, in) */
    cuda_gemm_rm(c, 0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

void cuda_linear_bwd_weight(bk_ctx *c, int N, int in, int out, const float *dy,
                            const float *x, float *dw, float *db)
{
    /* dw (out, in) += dy^T (out, N) x (N, in); db (out) += column sums of dy */
    cuda_gemm_rm(c, 1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (!db || N <= 0 || out <= 0) return;
    cuda_enter(c);
    float *part = cuda_workspace(c, sizeof(float) * ck_col_scratch(N, out));
    if (part) KERNEL_CHECK(c, ck_colsum_acc(c->stream, N, out, dy, db, part));
}

/* ------------------------------------------------------------------ element-wise, pooling */

void cuda_relu_fwd(bk_ctx *c, size_t n, const float *x, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_relu_fwd(c->stream, n, x, y));
}

void cuda_relu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_relu_bwd(c->stream, n, x, dy, dx));
}

void cuda_gelu_fwd(bk_ctx *c, size_t n, const float *x, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_gelu_fwd(c->stream, n, x, y));
}

void cuda_gelu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_gelu_bwd(c->stream, n, x, dy, dx));
}

void cuda_maxpool_fwd(bk_ctx *c, const bk_pool *g, const float *x, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_maxpool_fwd(c->stream, *g, x, y));
}

void cuda_maxpool_bwd(bk_ctx *c, const bk_pool *g, const float *x, const float *dy, float *dx)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_maxpool_bwd(c->stream, *g, x, dy, dx));
}

/* ------------------------------------------------------------------ transformer layers */

void cuda_layernorm_fwd(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                        const float *beta, float *y, float *mean, float *rstd)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_layernorm_fwd(c->stream, N, D, x, gamma, beta, y, mean, rstd));
}

void cuda_layernorm_bwd_data(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                             const float *mean, const float *rstd, const float *dy, float *dx)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_layernorm_bwd_data(c->stream, N, D, x, gamma, mean, rstd, dy, dx));
}

void cuda_layernorm_bwd_weight(bk_ctx *c, int N, int D, const float *x, const float *mean,
                               const float *rstd, const float *dy, float *dgamma,
                               float *dbeta)
{
    cuda_enter(c);
    if (N <= 0 || D <= 0) return;
    float *part = cuda_workspace(c, 2 * sizeof(float) * ck_col_scratch(N, D));
    if (part)
        KERNEL_CHECK(c, ck_layernorm_bwd_weight(c->stream, N, D, x, mean, rstd, dy, dgamma, dbeta,
                                                part));
}

void cuda_embedding_fwd(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                        const float *wte, const float *wpe, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_embedding_fwd(c->stream, B, T, V, D, tokens, wte, wpe, y));
}

void cuda_embedding_bwd_weight(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                               const float *dy, float *dwte, float *dwpe)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_embedding_bwd_weight(c->stream, B, T, V, D, tokens, dy, dwte, dwpe));
}

/* Attention as strided-batched GEMMs, one call per head h with the batch b as the batch
 * index: head h of sample b's q is the (T, hs) block at qkv + b T 3D + h hs with row stride
 * 3D; k and v follow at + D and + 2D; att's block (b, h) is (T, T) at (b H + h) T T. */
void cuda_attention_fwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv, float *att,
                        float *y)
{
    const int hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sQ = (long long)T * D3, sA = (long long)H * T * T, sY = (long long)T * D;
    for (int h = 0; h < H; h++) /* scores (T, T) = scale q (T, hs) k^T (hs, T) */
        cuda_gemm_rm_batched(c, 0, 1, T, T, hs, scale, qkv + h * hs, D3, sQ, qkv + D + h * hs,
                             D3, sQ, 0.0f, att + (size_t)h * T * T, T, sA, B);
    KERNEL_CHECK(c, ck_causal_softmax(c->stream, B * H, T, att));
    for (int h = 0; h < H; h++) /* y (T, hs) = att (T, T) v (T, hs) */
        cuda_gemm_rm_batched(c, 0, 0, T, hs, T, 1.0f, att + (size_t)h * T * T, T, sA,
                             qkv + 2 * D + h * hs, D3, sQ, 0.0f, y + h * hs, D, sY, B);
}

void cuda_attention_bwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                        const float *att, const float *dy, float *dqkv)
{
    const int hs = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hs);
    const long long sQ = (long long)T * D3, sA = (long long)H * T * T, sY = (long long)T * D;
    float *da = cuda_workspace(c, sizeof(float) * (size_t)B * H * T * T); /* (B, H, T, T) */
    if (!da) return;
    for (int h = 0; h < H; h++) {
        /* dv (T, hs) = att^T (T, T) dy (T, hs) */
        cuda_gemm_rm_batched(c, 1, 0, T, hs, T, 1.0f, att + (size_t)h * T * T, T, sA,
                             dy + h * hs, D, sY, 0.0f, dqkv + 2 * D + h * hs, D3, sQ, B);
        /* datt (T, T) = dy (T, hs) v^T (hs, T) */
        cuda_gemm_rm_batched(c, 0, 1, T, T, hs, 1.0f, dy + h * hs, D, sY, qkv + 2 * D + h * hs,
                             D3, sQ, 0.0f, da + (size_t)h * T * T, T, sA, B);
    }
    KERNEL_CHECK(c, ck_causal_softmax_bwd(c->stream, B * H, T, att, da)); /* datt -> dscores */
    for (int h = 0; h < H; h++) {
        /* dq (T, hs) = scale dscores (T, T) k (T, hs) */
        cuda_gemm_rm_batched(c, 0, 0, T, hs, T, scale, da + (size_t)h * T * T, T, sA,
                             qkv + D + h * hs, D3, sQ, 0.0f, dqkv + h * hs, D3, sQ, B);
        /* dk (T, hs) = scale dscores^T (T, T) q (T, hs) */
        cuda_gemm_rm_batched(c, 1, 0, T, hs, T, scale, da + (size_t)h * T * T, T, sA,
                             qkv + h * hs, D3, sQ, 0.0f, dqkv + D + h * hs, D3, sQ, B);
    }
}

/* ------------------------------------------------------------------ loss, optimizer */

void cuda_xent_fwd(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                   float *probs, float *loss, float *correct)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_fwd(c->stream, N, V, logits, targets, probs, loss, correct));
}

void cuda_xent_bwd(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                   float scale, float *dlogits)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_bwd(c->stream, N, V, probs, targets, scale, dlogits));
}

void cuda_xent_tp_max(bk_ctx *c, int N, int v, const float *logits, float *mx)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_tp_max(c->stream, N, v, logits, mx));
}

void cuda_xent_tp_partial(bk_ctx *c, int N, int v, int T, int lo, const float *maxes,
                          const int32_t *targets, const float *logits, float *e, float *q)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_tp_partial(c->stream, N, v, T, lo, maxes, targets, logits, e, q));
}

void cuda_xent_tp_finish(bk_ctx *c, int N, int v, int T, const float *maxes, const float *q,
                         float *e, float *loss, float *correct)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_tp_finish(c->stream, N, v, T, maxes, q, e, loss, correct));
}

void cuda_xent_tp_bwd(bk_ctx *c, int N, int v, int lo, const float *probs,
                      const int32_t *targets, float scale, float *dlogits)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_xent_tp_bwd(c->stream, N, v, lo, probs, targets, scale, dlogits));
}

void cuda_opt_step(bk_ctx *c, const bk_opt *o, size_t n, float *w, const float *g, float *m,
                   float *v)
{
    float c1 = 1.0f, c2 = 1.0f;
    if (o->kind == BK_ADAM) { /* bias corrections, computed as the CPU backend does */
        c1 = 1.0f - powf(o->beta1, (float)o->step);
        c2 = 1.0f - powf(o->beta2, (float)o->step);
    }
    if (o->kind != BK_SGD && o->kind != BK_MOMENTUM && o->kind != BK_ADAM) {
        err_set(cuda_sticky(c), NULL, NULL, "unknown optimizer kind %d", o->kind);
        return;
    }
    cuda_enter(c);
    KERNEL_CHECK(c, ck_opt_step(c->stream, *o, c1, c2, n, w, g, m, v));
}
