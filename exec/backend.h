/* backend.h: the compute backend interface of the executor: one table of function pointers
 * that the CPU backend (exec/cpu/, the reference) and the CUDA backend (exec/cuda/, cuBLAS
 * and cuDNN behind plain C) both fill in. The layer code in exec/stage.c only calls through
 * this table, so a model runs unchanged on either backend.
 *
 * Conventions every entry follows:
 * - All float tensors are fp32, dense, row-major (C order); shapes are given in the comments
 *   as `// (B, C, H, W)`. B is the (micro)batch. Pointers named x, y, w, dx, ... are DEVICE
 *   buffers from `alloc` of the same context; the host never dereferences them (use upload
 *   and download). Integer tensors (class labels, next-token targets) are int32 on device.
 *   Token ids entering an embedding travel as floats (exact below 2^24) so that every
 *   activation crossing a pipeline stage is a float tensor.
 * - Forward entries overwrite their outputs. Input-gradient entries (`*_bwd_data`) overwrite
 *   dx. Weight-gradient entries (`*_bwd_weight`) ACCUMULATE (+=) into dw/db, so microbatch
 *   gradient accumulation is free; zero them with `zero` before a minibatch.
 * - Data and weight gradients are separate entries so that zero-bubble schedules (I and W
 *   actions) can run them at different times.
 * - Entries are asynchronous on devices that allow it (a CUDA stream per context). They do
 *   not return errors: a failure is recorded in the context and reported by the next `sync`
 *   (sticky), like CUDA's own error model. Only create/alloc/sync report failures directly.
 * - A context (bk_ctx) belongs to one thread at a time. Workers each create their own.
 *
 * Weights are always initialized on the host (exec/model.c, from the seed) and uploaded, so
 * the CPU and CUDA backends start from identical weights. */
#ifndef PLUMB_BACKEND_H
#define PLUMB_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct bk_ctx bk_ctx; /* backend-defined: device, stream, handles, scratch space */
typedef struct bk_mark bk_mark; /* backend-defined: a point in a context's queue (an event) */

/* 2-D convolution geometry (square kernel, same stride and zero padding on both axes). */
typedef struct bk_conv {
    int B, C, H, W;     /* input (B, C, H, W) */
    int K;              /* output channels: weights (K, C, kernel, kernel), bias (K) */
    int kernel, stride, pad;
    int P, Q;           /* output (B, K, P, Q): P = (H + 2 pad - kernel) / stride + 1 */
} bk_conv;

/* Max pooling geometry (no padding; windows that do not fit are dropped). */
typedef struct bk_pool {
    int B, C, H, W;     /* input (B, C, H, W) */
    int kernel, stride;
    int P, Q;           /* output (B, C, P, Q): P = (H - kernel) / stride + 1 */
} bk_pool;

/* Optimizer step parameters. */
typedef enum bk_opt_kind { BK_SGD = 0, BK_MOMENTUM, BK_ADAM } bk_opt_kind;
typedef struct bk_opt {
    int kind;           /* bk_opt_kind (same order as core/plan.h's optimizer_kind) */
    float lr;           /* learning rate */
    float momentum;     /* BK_MOMENTUM: m = momentum m + g; w -= lr m */
    float beta1, beta2, eps; /* BK_ADAM */
    float weight_decay; /* L2 added to the gradient (SGD, momentum) or decoupled (Adam: AdamW) */
    long step;          /* 1-based count of steps taken including this one (Adam's bias
                           correction) */
} bk_opt;

typedef struct backend {
    const char *name;   /* "cpu", "cuda" */

    /* --- contexts and memory ------------------------------------------------------------ */
    /* Opens a context on device `device` (0 for the CPU). NULL with err set on failure
     * (no such device, driver error). Free with destroy. */
    bk_ctx *(*create)(int device, plumb_err *err);
    void (*destroy)(bk_ctx *c);
    /* Device buffer of `bytes` bytes, zero-filled. NULL with err set when out of memory.
     * bytes == 0 returns a valid unique pointer. */
    void *(*alloc)(bk_ctx *c, size_t bytes, plumb_err *err);
    void (*free)(bk_ctx *c, void *p);                        /* NULL allowed */
    void (*upload)(bk_ctx *c, void *dst, const void *host_src, size_t bytes);
    void (*download)(bk_ctx *c, void *host_dst, const void *src, size_t bytes); /* blocks */
    void (*copy)(bk_ctx *c, void *dst, const void *src, size_t bytes); /* device to device */
    void (*zero)(bk_ctx *c, void *p, size_t bytes);
    /* Waits for all work queued on c. Returns 0, or -1 with err set to the first failure
     * since the last sync (the failure is then cleared). */
    int (*sync)(bk_ctx *c, plumb_err *err);
    /* Optional (NULL: plain malloc and free, through bk_host_alloc/bk_host_free): host
     * memory that upload reads at full speed (CUDA: page-locked, so the copy is a DMA with
     * no staging by the driver), uninitialized; NULL with err set on failure. An upload
     * from it may return before it has read src: src must stay unchanged until c's next
     * sync. host_free takes NULL, from any thread. */
    void *(*host_alloc)(bk_ctx *c, size_t bytes, plumb_err *err);
    void (*host_free)(void *p);

    /* --- dense math ----------------------------------------------------------------------- */
    /* C = alpha op(A) op(B) + beta C, row-major; op(A) (M, K), op(B) (K, N), C (M, N);
     * lda/ldb/ldc are row strides of A, B, C as stored. */
    void (*gemm)(bk_ctx *c, int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C,
                 int ldc);
    void (*axpy)(bk_ctx *c, size_t n, float alpha, const float *x, float *y); /* y += a x */
    void (*scale)(bk_ctx *c, size_t n, float alpha, float *x);                /* x *= a */
    void (*add)(bk_ctx *c, size_t n, const float *a, const float *b, float *y); /* y = a+b */

    /* --- layers --------------------------------------------------------------------------- */
    /* Linear: x (N, in), w (out, in), b (out), y (N, out); y = x w^T + b (b may be NULL in
     * the forward: no bias, as a row-parallel layer's ranks other than 0 run it).
     * N counts rows: batch times any leading sequence dimension. */
    void (*linear_fwd)(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                       const float *b, float *y);
    void (*linear_bwd_data)(bk_ctx *c, int N, int in, int out, const float *dy,
                            const float *w, float *dx);              /* dx = dy w */
    void (*linear_bwd_weight)(bk_ctx *c, int N, int in, int out, const float *dy,
                              const float *x, float *dw, float *db); /* dw += dy^T x ... */

    /* Conv2d: x (B, C, H, W), w (K, C, k, k), b (K), y (B, K, P, Q). */
    void (*conv2d_fwd)(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                       const float *b, float *y);
    void (*conv2d_bwd_data)(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                            float *dx);
    void (*conv2d_bwd_weight)(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                              float *dw, float *db);

    /* Max pooling: x (B, C, H, W), y (B, C, P, Q). Backward recomputes the arg-max from x
     * (first maximum in the window wins), so no index tensor is kept; dx is overwritten
     * (zero where no window picked the element). */
    void (*maxpool_fwd)(bk_ctx *c, const bk_pool *g, const float *x, float *y);
    void (*maxpool_bwd)(bk_ctx *c, const bk_pool *g, const float *x, const float *dy,
                        float *dx);

    /* Element-wise activations over n values. ReLU backward uses the forward INPUT x
     * (gradient 0 where x <= 0). GELU is the tanh approximation
     * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
    void (*relu_fwd)(bk_ctx *c, size_t n, const float *x, float *y);
    void (*relu_bwd)(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
    void (*gelu_fwd)(bk_ctx *c, size_t n, const float *x, float *y);
    void (*gelu_bwd)(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);

    /* Layer normalization over the last dimension: x (N, D), gamma/beta (D), y (N, D);
     * forward saves mean (N) and rstd (N) = 1/sqrt(var + 1e-5) for the backward. */
    void (*layernorm_fwd)(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                          const float *beta, float *y, float *mean, float *rstd);
    void (*layernorm_bwd_data)(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                               const float *mean, const float *rstd, const float *dy,
                               float *dx);
    void (*layernorm_bwd_weight)(bk_ctx *c, int N, int D, const float *x, const float *mean,
                                 const float *rstd, const float *dy, float *dgamma,
                                 float *dbeta);

    /* Token + position embedding: tokens (B, T) as floats holding ids in [0, V),
     * wte (V, D), wpe (T, D), y (B, T, D) = wte[token] + wpe[t]. No input gradient. */
    void (*embedding_fwd)(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                          const float *wte, const float *wpe, float *y);
    void (*embedding_bwd_weight)(bk_ctx *c, int B, int T, int V, int D, const float *tokens,
                                 const float *dy, float *dwte, float *dwpe);

    /* Causal multi-head self-attention core (no projections; those are linear layers):
     * qkv (B, T, 3D) laid out as [q | k | v] along the last axis, each split into H heads
     * of D/H; att (B, H, T, T) saved softmax probabilities (zero above the diagonal);
     * y (B, T, D). Scores are scaled by 1/sqrt(D/H). */
    void (*attention_fwd)(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                          float *att, float *y);
    void (*attention_bwd)(bk_ctx *c, int B, int T, int D, int H, const float *qkv,
                          const float *att, const float *dy, float *dqkv);

    /* Softmax cross-entropy over V classes for N rows: logits (N, V), targets (N) int32 in
     * [0, V). Forward writes probs (N, V), loss (N) = -log p[target], and correct (N) =
     * 1.0 where the arg-max equals the target else 0.0 (correct may be NULL).
     * Backward: dlogits (N, V) = scale (probs - onehot(target)), overwritten; the caller
     * passes scale = 1 / (rows in the whole minibatch) for a mean loss. */
    void (*xent_fwd)(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                     float *probs, float *loss, float *correct);
    void (*xent_bwd)(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                     float scale, float *dlogits);

    /* Vocabulary-parallel softmax cross-entropy (tensor parallelism, exec/tp.h): rank r of
     * a group of T holds the logits (N, v) of classes [lo, lo + v) of each of N rows;
     * targets (N) int32 are class ids of the whole vocabulary. Between the steps the caller
     * sums the small vectors over the group (an all-reduce in group order):
     * 1. xent_tp_max: mx (N) = each row's largest logit here. The caller puts it in row r
     *    of maxes (T, N), zeros in the other rows, and sums maxes over the group.
     * 2. xent_tp_partial: with m (N) = the largest of maxes' T rows (each row's maximum
     *    over the whole vocabulary): e (N, v) = exp(logits - m), and q (3, N) = e's row
     *    sums | the target's logit where this rank holds the target, else 0 | 1 where that
     *    logit equals m, else 0. e must not overlap logits. The caller sums q.
     * 3. xent_tp_finish: e (N, v) becomes the probabilities e / q's summed row sums (in
     *    place); loss (N) = log(sum) + m - the target's logit, correct (N) = 1.0 where
     *    some rank flagged its target as the maximum, else 0.0.
     * xent_tp_bwd: dlogits (N, v) = scale (probs - onehot(target - lo)), overwritten (no
     * one-hot where the target is another rank's). */
    void (*xent_tp_max)(bk_ctx *c, int N, int v, const float *logits, float *mx);
    void (*xent_tp_partial)(bk_ctx *c, int N, int v, int T, int lo, const float *maxes,
                            const int32_t *targets, const float *logits, float *e, float *q);
    void (*xent_tp_finish)(bk_ctx *c, int N, int v, int T, const float *maxes,
                           const float *q, float *e, float *loss, float *correct);
    void (*xent_tp_bwd)(bk_ctx *c, int N, int v, int lo, const float *probs,
                        const int32_t *targets, float scale, float *dlogits);

    /* --- optimizer ------------------------------------------------------------------------ */
    /* Updates n weights w in place from gradients g. State: m (n) for momentum and Adam,
     * v (n) for Adam; NULL where the optimizer has none. */
    void (*opt_step)(bk_ctx *c, const bk_opt *o, size_t n, float *w, const float *g,
                     float *m, float *v);

    /* --- optional ------------------------------------------------------------------------- */
    /* Hint: `workers` threads of this process will use the backend at once (the pipeline
     * runtime's workers); 1 again when they are done. The CPU backend divides the BLAS
     * threads among them (a process-wide setting). NULL: no effect. */
    void (*hint_workers)(int workers);
    /* A line worth telling the user about the backend's setup (e.g. a misdetected BLAS
     * core), or NULL. NULL entry: nothing to say. */
    const char *(*note)(void);
    /* Most bytes of device memory allocated through c at once so far (buffers and scratch
     * space). NULL entry: not measured. */
    size_t (*mem_peak)(bk_ctx *c);
    /* Bytes of scratch space c holds now (grown on demand by the layers that need it: the
     * CPU's im2col and bf16 operands, the GPU's cuDNN and kernel workspace), which it then
     * waits for and releases, so that the next layer's passes grow it from nothing: how the
     * profiler measures each layer's scratch. NULL entry: not measured. */
    size_t (*scratch_take)(bk_ctx *c);

    /* --- optional: hand-offs between contexts ---------------------------------------------
     * With all five set, the local transport moves a message from one worker's context to
     * another's through a staging buffer of the sender's context, by copies ordered with
     * marks, so that no host thread waits for an asynchronous copy (CUDA streams), and the
     * staging counts in the sender's memory (exec/transport_local.c); left NULL, it moves
     * messages through host memory with download and upload. A mark belongs to the device
     * of the context that made it; it may be waited on from any context. The CPU backend's
     * marks order nothing (its entries are synchronous) and its copy_peer is a memcpy. */
    /* A new mark on c's device; NULL with err set on failure. Free with mark_free. */
    bk_mark *(*mark_new)(bk_ctx *c, plumb_err *err);
    void (*mark_free)(bk_mark *m);                 /* NULL allowed; any thread */
    /* Records m after all the work queued so far on c (c must be on m's device). */
    void (*mark_record)(bk_ctx *c, bk_mark *m);
    /* Makes c's later work wait for m's last record (the host does not block). The record
     * must have been issued before the wait; waiting on a mark never recorded is a no-op. */
    void (*mark_wait)(bk_ctx *c, bk_mark *m);
    /* Copies bytes from src (a buffer of context `from`) to dst (a buffer of `to`), queued
     * on to, possibly across devices. Failures are reported by to's next sync. */
    void (*copy_peer)(bk_ctx *to, void *dst, const bk_ctx *from, const void *src,
                      size_t bytes);
} backend;

/* The CPU backend (always built; OpenBLAS GEMMs). */
const backend *backend_cpu(void);
/* The CPU backend with the inputs of GEMMs, convolutions and attention's products rounded
 * to bf16 and fp32 accumulation ("cpu-bf16"): the reference for "cuda-bf16". Slower than
 * "cpu" (it copies operands to round them); for checking mixed precision, not for speed. */
const backend *backend_cpu_bf16(void);

/* Finds a backend by name ("cpu", "cpu-bf16", "cuda", "cuda-tf32", "cuda-bf16"); the CUDA
 * ones load plumb-cuda.so on first use (exec/plugin.h). Returns NULL with err set when the
 * name is unknown, or the CUDA plugin was not built, is missing, or lacks a library (the
 * message says which). */
const backend *backend_find(const char *name, plumb_err *err);
/* Host buffers for uploads: bk->host_alloc where the backend has one, else malloc (NULL
 * with err set when out of memory); free them with bk_host_free on the same backend. */
void *bk_host_alloc(const backend *bk, bk_ctx *c, size_t bytes, plumb_err *err);
void bk_host_free(const backend *bk, void *p);

#endif
