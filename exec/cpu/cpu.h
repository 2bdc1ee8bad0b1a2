/* cpu.h: internals shared by the CPU backend's files: the context (a scratch area that
 * grows on demand and the sticky error) and the entries each file defines. */
#ifndef PLUMB_EXEC_CPU_H
#define PLUMB_EXEC_CPU_H

#include "exec/backend.h"

struct bk_ctx {
    float *scratch;       /* im2col and transposition space, grown by cpu_scratch */
    size_t scratch_n;     /* floats in scratch */
    size_t live, peak;    /* bytes allocated through the context now / at the most */
    plumb_err failure;    /* first failure since the last sync ("" when none) */
};

/* Returns scratch space of at least n floats (contents undefined), or NULL after recording
 * "out of memory" in the context. */
float *cpu_scratch(bk_ctx *c, size_t n);

/* cpu_conv.c */
void cpu_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                    const float *b, float *y);
void cpu_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                         float *dx);
void cpu_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                           float *dw, float *db);
void cpu_maxpool_fwd(bk_ctx *c, const bk_pool *g, const float *x, float *y);
void cpu_maxpool_bwd(bk_ctx *c, const bk_pool *g, const float *x, const float *dy, float *dx);

/* cpu_layers.c */
void cpu_linear_fwd(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                    const float *b, float *y);
void cpu_linear_bwd_data(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                         float *dx);
void cpu_linear_bwd_weight(bk_ctx *c, int N, int in, int out, const float *dy,
                           const float *x, float *dw, float *db);
void cpu_relu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cpu_relu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
void cpu_gelu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cpu_gelu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
void cpu_xent_fwd(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                  float *probs, float *loss, float *correct);
void cpu_xent_bwd(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                  float scale, float *dlogits);

/* cpu_seq.c: the sequence layers of transformers */
void cpu_layernorm_fwd(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                       const float *beta, float *y, float *mean, float *rstd);
void cpu_layernorm_bwd_data(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                            const float *mean, const float *rstd, const float *dy, float *dx);
void cpu_layernorm_bwd_weight(bk_ctx *c, int N, int D, const float *x, const float *mean,
                              const float *rstd, const float *dy, float *dgamma,
                              float *dbeta);
void cpu_embedding_fwd(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                       const float *wte, const float *wpe, float *y);
void cpu_embedding_bwd_weight(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                              const float *dy, float *dwte, float *dwpe);
void cpu_attention_fwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv, float *att,
                       float *y);
void cpu_attention_bwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                       const float *att, const float *dy, float *dqkv);

#endif
