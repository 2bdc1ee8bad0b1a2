/* cuda_kernels.h: plumb's own CUDA kernels behind plain C launchers (defined in
 * exec/cuda/cuda_kernels.cu and cuda_seq.cu). Each launcher queues its kernel(s) on stream s
 * and returns cudaGetLastError() (cudaSuccess when the launch was accepted); execution
 * errors surface at the next synchronization. All pointers are device pointers; shapes as in
 * exec/backend.h. None allocates memory. */
#ifndef PLUMB_EXEC_CUDA_KERNELS_H
#define PLUMB_EXEC_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- element-wise (cuda_kernels.cu) ------------------------------------------------------ */
cudaError_t ck_axpy(cudaStream_t s, size_t n, float a, const float *x, float *y); /* y += a x */
cudaError_t ck_scale(cudaStream_t s, size_t n, float a, float *x);               /* x *= a */
cudaError_t ck_add(cudaStream_t s, size_t n, const float *a, const float *b, float *y);
cudaError_t ck_relu_fwd(cudaStream_t s, size_t n, const float *x, float *y);
cudaError_t ck_relu_bwd(cudaStream_t s, size_t n, const float *x, const float *dy, float *dx);
cudaError_t ck_gelu_fwd(cudaStream_t s, size_t n, const float *x, float *y);
cudaError_t ck_gelu_bwd(cudaStream_t s, size_t n, const float *x, const float *dy, float *dx);
/* fp32 <-> bf16 (bf16 stored as raw uint16, round to nearest even). */
cudaError_t ck_to_bf16(cudaStream_t s, size_t n, const float *x, uint16_t *y);
cudaError_t ck_from_bf16(cudaStream_t s, size_t n, const uint16_t *x, float *y);

/* --- biases ------------------------------------------------------------------------------ */
/* y (rows, cols) += b (cols) broadcast over rows. */
cudaError_t ck_bias_rows(cudaStream_t s, int rows, int cols, const float *b, float *y);
/* Floats of scratch that one column reduction of a (rows, cols) matrix needs (the partial
 * sums of ck_colsum_acc; ck_layernorm_bwd_weight needs twice this). */
size_t ck_col_scratch(int rows, int cols);
/* db (cols) += column sums of dy (rows, cols); part: ck_col_scratch(rows, cols) floats of
 * device scratch, free once the reduction has run (stream order). */
cudaError_t ck_colsum_acc(cudaStream_t s, int rows, int cols, const float *dy, float *db,
                          float *part);
/* y (B, K, PQ) += b (K) broadcast over B and PQ. */
cudaError_t ck_bias_chw(cudaStream_t s, int B, int K, int PQ, const float *b, float *y);
/* db (K) += sums of dy (B, K, PQ) over B and PQ. */
cudaError_t ck_bias_chw_bwd(cudaStream_t s, int B, int K, int PQ, const float *dy, float *db);

/* --- convolution without cuDNN and pooling ---------------------------------------------- */
/* col (C k k, P Q) = the receptive fields of one sample x (C, H, W). */
cudaError_t ck_im2col(cudaStream_t s, bk_conv g, const float *x, float *col);
/* dx (C, H, W) = the adjoint of im2col applied to col (C k k, P Q) (overwrites dx). */
cudaError_t ck_col2im(cudaStream_t s, bk_conv g, const float *col, float *dx);
cudaError_t ck_maxpool_fwd(cudaStream_t s, bk_pool g, const float *x, float *y);
/* dx overwritten; each input element gathers dy from the windows whose first maximum it is. */
cudaError_t ck_maxpool_bwd(cudaStream_t s, bk_pool g, const float *x, const float *dy,
                           float *dx);

/* --- loss and optimizer ----------------------------------------------------------------- */
cudaError_t ck_xent_fwd(cudaStream_t s, int N, int V, const float *logits,
                        const int32_t *targets, float *probs, float *loss, float *correct);
cudaError_t ck_xent_bwd(cudaStream_t s, int N, int V, const float *probs,
                        const int32_t *targets, float scale, float *dlogits);
/* The vocabulary-parallel cross-entropy's steps (backend.h: xent_tp_*), one block per row
 * (the row sums of exps in the fixed order of block_sum, in fp32). */
cudaError_t ck_xent_tp_max(cudaStream_t s, int N, int v, const float *logits, float *mx);
cudaError_t ck_xent_tp_partial(cudaStream_t s, int N, int v, int T, int lo,
                               const float *maxes, const int32_t *targets,
                               const float *logits, float *e, float *q);
cudaError_t ck_xent_tp_finish(cudaStream_t s, int N, int v, int T, const float *maxes,
                              const float *q, float *e, float *loss, float *correct);
cudaError_t ck_xent_tp_bwd(cudaStream_t s, int N, int v, int lo, const float *probs,
                           const int32_t *targets, float scale, float *dlogits);
/* One optimizer step over n weights; c1 and c2 are Adam's bias corrections
 * 1 - beta1^step and 1 - beta2^step (computed by the caller as the CPU backend does). */
cudaError_t ck_opt_step(cudaStream_t s, bk_opt o, float c1, float c2, size_t n, float *w,
                        const float *g, float *m, float *v);

/* --- sequence layers (cuda_seq.cu) ------------------------------------------------------- */
cudaError_t ck_layernorm_fwd(cudaStream_t s, int N, int D, const float *x, const float *gamma,
                             const float *beta, float *y, float *mean, float *rstd);
cudaError_t ck_layernorm_bwd_data(cudaStream_t s, int N, int D, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *dy, float *dx);
/* dgamma, dbeta (D) += sums over the N rows; part: 2 ck_col_scratch(N, D) floats of
 * device scratch. */
cudaError_t ck_layernorm_bwd_weight(cudaStream_t s, int N, int D, const float *x,
                                    const float *mean, const float *rstd, const float *dy,
                                    float *dgamma, float *dbeta, float *part);
cudaError_t ck_embedding_fwd(cudaStream_t s, int B, int T, int V, int D, const float *tokens,
                             const float *wte, const float *wpe, float *y);
cudaError_t ck_embedding_bwd_weight(cudaStream_t s, int B, int T, int V, int D,
                                    const float *tokens, const float *dy, float *dwte,
                                    float *dwpe);
/* att (rows, T, T) holds scaled scores; replaces each row t of each (T, T) block with the
 * softmax over columns u <= t and zeros above the diagonal. rows = B H. */
cudaError_t ck_causal_softmax(cudaStream_t s, int rows, int T, float *att);
/* d (rows, T, T) holds dL/datt; replaced by dL/dscores = att (d - sum_u att d) (zero above
 * the diagonal, since att is). */
cudaError_t ck_causal_softmax_bwd(cudaStream_t s, int rows, int T, const float *att, float *d);

#ifdef __cplusplus
}
#endif

#endif
