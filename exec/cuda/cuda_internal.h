/* cuda_internal.h: internals shared by the CUDA backend's C files: the context, the error
 * checks (CUDA_CHECK, CUBLAS_CHECK, CUDNN_CHECK, NCCL_CHECK) and the GEMM helpers. C only;
 * the .cu files see just exec/cuda/cuda_kernels.h. */
#ifndef PLUMB_EXEC_CUDA_INTERNAL_H
#define PLUMB_EXEC_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef PLUMB_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "exec/cuda/cuda_backend.h"

typedef struct cuda_conv_plan cuda_conv_plan; /* cuda_conv.c: one cached shape */

/* A buffer of the context, for the memory count. */
typedef struct cuda_buf {
    void *p;
    size_t bytes;
} cuda_buf;

struct bk_ctx {
    int device;
    cuda_precision prec;
    cudaStream_t stream;       /* every entry of this context is queued here */
    cublasHandle_t blas;       /* bound to stream */
#ifdef PLUMB_HAVE_CUDNN
    cudnnHandle_t dnn;         /* bound to stream */
#endif
    void *ws;                  /* workspace for cuDNN and scratch tensors, grown on demand */
    size_t ws_bytes;
    cuda_conv_plan *plans;     /* cached convolution algorithms, one per shape */
    int nplans, cap_plans;
    cuda_buf *bufs;            /* live buffers of cuda_alloc, with their sizes */
    int nbufs, cap_bufs;
    size_t live, peak;         /* bytes of those buffers and the workspace: now, at most */
    int log;                   /* PLUMB_CUDA_LOG set: algorithm choices and workspace growth
                                * are written to stderr, one "plumb cuda:" line each */
    plumb_err failure;         /* first failure since the last sync ("" when none) */
    plumb_err discard;         /* later failures land here (see cuda_sticky) */
};

/* --- error checks -------------------------------------------------------------------------
 * Each records the first failure in the context's sticky error as
 * "CUDA error: cudaMalloc(&p, n) at exec/cuda/cuda_backend.c:120: out of memory
 *  (cudaErrorMemoryAllocation); hint: ..." and evaluates to non-zero on failure, so callers
 * can write `if (CUDA_CHECK(c, cudaMemsetAsync(...))) return;`. e is a plumb_err *. */
int cuda_check_rt(plumb_err *e, int code, const char *call, const char *file, int line);
int cuda_check_blas(plumb_err *e, int code, const char *call, const char *file, int line);
int cuda_check_dnn(plumb_err *e, int code, const char *call, const char *file, int line);
int cuda_check_nccl(plumb_err *e, int code, const char *call, const char *file, int line);
/* Formats the one line shared by all checks into e ("LIB error: CALL at FILE:LINE: WHAT;
 * hint: HINT"). Returns -1 (also when e is NULL). */
int cuda_check_fail(plumb_err *e, const char *lib, const char *call, const char *file,
                    int line, const char *what, const char *hint);
/* The hint printed after a CUDA runtime error code ("" when none). */
const char *cuda_hint_rt(int code);

#define CUDA_CHECK_E(e, call) cuda_check_rt((e), (int)(call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK_E(e, call) cuda_check_blas((e), (int)(call), #call, __FILE__, __LINE__)
#define CUDNN_CHECK_E(e, call) cuda_check_dnn((e), (int)(call), #call, __FILE__, __LINE__)
#define NCCL_CHECK_E(e, call) cuda_check_nccl((e), (int)(call), #call, __FILE__, __LINE__)
/* The same, recording into context c's sticky error (the first failure wins). */
#define CUDA_CHECK(c, call) CUDA_CHECK_E(cuda_sticky(c), call)
#define CUBLAS_CHECK(c, call) CUBLAS_CHECK_E(cuda_sticky(c), call)
#define CUDNN_CHECK(c, call) CUDNN_CHECK_E(cuda_sticky(c), call)
/* A kernel launcher's result (cudaGetLastError after the launch). */
#define KERNEL_CHECK(c, launch) CUDA_CHECK(c, launch)

/* The context's error record when no failure is recorded yet, else its throw-away record,
 * so that the first failure since the last sync is the one reported. */
plumb_err *cuda_sticky(bk_ctx *c);

/* Makes c's device current on the calling thread (contexts may move between threads). */
void cuda_enter(bk_ctx *c);

/* Workspace of at least `bytes` bytes on c's device (contents undefined), or NULL after
 * recording the failure. Growing it waits for the work queued on c (the old buffer may be in
 * use). */
void *cuda_workspace(bk_ctx *c, size_t bytes);

/* Row-major GEMM with the context's precision (see backend.h's gemm for the arguments);
 * strided-batched form: `batch` products, operand i at A + i sA, B + i sB, C + i sC. */
void cuda_gemm_rm(bk_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
void cuda_gemm_rm_batched(bk_ctx *c, int ta, int tb, int M, int N, int K, float alpha,
                          const float *A, int lda, long long sA, const float *B, int ldb,
                          long long sB, float beta, float *C, int ldc, long long sC, int batch);

/* cuda_conv.c */
void cuda_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                     const float *b, float *y);
void cuda_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                          float *dx);
void cuda_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                            float *dw, float *db);
/* Frees the cached convolution plans (at destroy). */
void cuda_conv_plans_free(bk_ctx *c);
/* One result of a cuDNN algorithm search, as cuDNN returns them (fastest first). */
typedef struct cuda_conv_result {
    int ok;          /* the search ran it successfully */
    int tensor_math; /* it ran with tensor-core math (TF32 on fp32 tensors) */
    float ms;        /* its measured time */
    size_t ws;       /* its workspace bytes */
} cuda_conv_result;
/* Which of the n results to use (an index), or -1 when none is allowed: allowed are those
 * that ran, need at most ws_limit bytes of workspace and, when strict_fp32, used no tensor
 * cores. Among the allowed ones within CUDA_CONV_TIE of the fastest, the one with the
 * least workspace (then the faster): cuDNN's timings of near-equal algorithms vary from
 * run to run, and picking by time alone let a profile and a training run of the same shape
 * take workspaces tens of MiB apart (measured on an H200). */
#define CUDA_CONV_TIE 0.05
int cuda_conv_pick(const cuda_conv_result *r, int n, int strict_fp32, size_t ws_limit);

/* cuda_layers.c: the entries that are kernel launches or GEMM compositions */
void cuda_linear_fwd(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                     const float *b, float *y);
void cuda_linear_bwd_data(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                          float *dx);
void cuda_linear_bwd_weight(bk_ctx *c, int N, int in, int out, const float *dy,
                            const float *x, float *dw, float *db);
void cuda_maxpool_fwd(bk_ctx *c, const bk_pool *g, const float *x, float *y);
void cuda_maxpool_bwd(bk_ctx *c, const bk_pool *g, const float *x, const float *dy,
                      float *dx);
void cuda_relu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cuda_relu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
void cuda_gelu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cuda_gelu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
void cuda_layernorm_fwd(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                        const float *beta, float *y, float *mean, float *rstd);
void cuda_layernorm_bwd_data(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                             const float *mean, const float *rstd, const float *dy,
                             float *dx);
void cuda_layernorm_bwd_weight(bk_ctx *c, int N, int D, const float *x, const float *mean,
                               const float *rstd, const float *dy, float *dgamma,
                               float *dbeta);
void cuda_embedding_fwd(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                        const float *wte, const float *wpe, float *y);
void cuda_embedding_bwd_weight(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                               const float *dy, float *dwte, float *dwpe);
void cuda_attention_fwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv, float *att,
                        float *y);
void cuda_attention_bwd(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                        const float *att, const float *dy, float *dqkv);
void cuda_xent_fwd(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                   float *probs, float *loss, float *correct);
void cuda_xent_bwd(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                   float scale, float *dlogits);
void cuda_xent_tp_max(bk_ctx *c, int N, int v, const float *logits, float *mx);
void cuda_xent_tp_partial(bk_ctx *c, int N, int v, int T, int lo, const float *maxes,
                          const int32_t *targets, const float *logits, float *e, float *q);
void cuda_xent_tp_finish(bk_ctx *c, int N, int v, int T, const float *maxes, const float *q,
                         float *e, float *loss, float *correct);
void cuda_xent_tp_bwd(bk_ctx *c, int N, int v, int lo, const float *probs,
                      const int32_t *targets, float scale, float *dlogits);
void cuda_opt_step(bk_ctx *c, const bk_opt *o, size_t n, float *w, const float *g, float *m,
                   float *v);

#endif
