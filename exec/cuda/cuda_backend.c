/* cuda_backend.c: the CUDA backend's tables (one per precision), contexts (a device, a
 * stream, cuBLAS and cuDNN handles bound to it, a workspace), memory, the sticky error,
 * GEMMs through cuBLAS, and the hand-off marks used by the local transport on GPUs. */
#include "exec/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cuda/cuda_kernels.h"

/* ------------------------------------------------------------------ probing */

int cuda_device_count(plumb_err *err)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        err_set(err, NULL, NULL, "no CUDA GPU found (cudaGetDeviceCount: %s)%s%s",
                cudaGetErrorString(rc), *cuda_hint_rt(rc) ? "; hint: " : "", cuda_hint_rt(rc));
        cudaGetLastError(); /* clear it */
        return -1;
    }
    if (n < 1) {
        err_set(err, NULL, NULL, "no CUDA GPU found (cudaGetDeviceCount: 0 devices)");
        return -1;
    }
    return n;
}

int cuda_device_describe(int device, char *buf, size_t n, plumb_err *err)
{
    struct cudaDeviceProp p;
    if (CUDA_CHECK_E(err, cudaGetDeviceProperties(&p, device))) return -1;
    int drv = 0;
    cudaDriverGetVersion(&drv);
    snprintf(buf, n, "%s, sm_%d%d, %.1f GiB, driver %d.%d", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), drv / 1000,
             (drv % 1000) / 10);
    return 0;
}

/* ------------------------------------------------------------------ errors */

plumb_err *cuda_sticky(bk_ctx *c)
{
    /* Later failures are usually consequences of the first; keep the first. */
    return c->failure.msg[0] ? &c->discard : &c->failure;
}

void cuda_enter(bk_ctx *c)
{
    CUDA_CHECK(c, cudaSetDevice(c->device));
}

/* ------------------------------------------------------------------ contexts */

static bk_ctx *create_with(int device, cuda_precision prec, plumb_err *err)
{
    int n = cuda_device_count(err);
    if (n < 0) return NULL;
    if (device < 0 || device >= n) {
        err_set(err, NULL, "device", "expected a CUDA device index in [0, %d) (got %d)", n,
                device);
        return NULL;
    }
    if (prec != CUDA_FP32) {
        /* TF32 and bf16 tensor cores start with Ampere; older GPUs would fail in cuBLAS
         * (bf16) or silently compute in fp32 (TF32) */
        struct cudaDeviceProp p;
        if (CUDA_CHECK_E(err, cudaGetDeviceProperties(&p, device))) return NULL;
        if (p.major < 8) {
            err_set(err, NULL, "--precision",
                    "%s needs a GPU of compute capability 8.0 or newer (Ampere); device %d "
                    "(%s) is sm_%d%d: use --backend cuda (fp32)", cuda_precision_name(prec),
                    device, p.name, p.major, p.minor);
            return NULL;
        }
    }
    bk_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    c->device = device;
    c->prec = prec;
    const char *lg = getenv("PLUMB_CUDA_LOG");
    c->log = lg && *lg && strcmp(lg, "0") != 0;
    if (CUDA_CHECK_E(err, cudaSetDevice(device))) goto fail;
    if (CUDA_CHECK_E(err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)))
        goto fail;
    if (CUBLAS_CHECK_E(err, cublasCreate(&c->blas))) goto fail;
    if (CUBLAS_CHECK_E(err, cublasSetStream(c->blas, c->stream))) goto fail;
    /* fp32 mode must not use TF32; the compute type of each GEMM says the rest */
    if (CUBLAS_CHECK_E(err, cublasSetMathMode(c->blas, prec == CUDA_FP32 ? CUBLAS_PEDANTIC_MATH
                                                                         : CUBLAS_DEFAULT_MATH)))
        goto fail;
#ifdef PLUMB_HAVE_CUDNN
    if (CUDNN_CHECK_E(err, cudnnCreate(&c->dnn))) goto fail;
    if (CUDNN_CHECK_E(err, cudnnSetStream(c->dnn, c->stream))) goto fail;
#endif
    return c;
fail:
#ifdef PLUMB_HAVE_CUDNN
    if (c->dnn) cudnnDestroy(c->dnn);
#endif
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
    return NULL;
}

static bk_ctx *create_fp32(int device, plumb_err *err) { return create_with(device, CUDA_FP32, err); }
static bk_ctx *create_tf32(int device, plumb_err *err) { return create_with(device, CUDA_TF32, err); }
static bk_ctx *create_bf16(int device, plumb_err *err) { return create_with(device, CUDA_BF16, err); }

static void cuda_destroy(bk_ctx *c)
{
    if (!c) return;
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    cuda_conv_plans_free(c);
    cudaFree(c->ws);
    free(c->bufs); /* the table only: every buffer is its owner's to free */
#ifdef PLUMB_HAVE_CUDNN
    cudnnDestroy(c->dnn);
#endif
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

int cuda_ctx_device(const bk_ctx *c) { return c->device; }

/* Adds bytes to the context's live count and its peak. */
static void count_bytes(bk_ctx *c, size_t bytes)
{
    c->live += bytes;
    if (c->live > c->peak) c->peak = c->live;
}

void *cuda_workspace(bk_ctx *c, size_t bytes)
{
    if (bytes <= c->ws_bytes && c->ws) return c->ws;
    size_t want = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes;
    cuda_enter(c);
    if (CUDA_CHECK(c, cudaStreamSynchronize(c->stream))) return NULL;
    cudaFree(c->ws);
    c->live -= c->ws_bytes;
    c->ws = NULL;
    c->ws_bytes = 0;
    if (CUDA_CHECK(c, cudaMalloc(&c->ws, want))) {
        c->ws = NULL;
        return NULL;
    }
    c->ws_bytes = want;
    count_bytes(c, want);
    if (c->log)
        fprintf(stderr, "plumb cuda: device %d: workspace %zu B (asked for %zu B); %zu B "
                "allocated, peak %zu B\n", c->device, want, bytes, c->live, c->peak);
    return c->ws;
}

static size_t cuda_scratch_take(bk_ctx *c)
{
    size_t n = c->ws_bytes;
    if (!c->ws) return 0;
    cuda_enter(c);
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    cudaFree(c->ws);
    c->live -= n;
    c->ws = NULL;
    c->ws_bytes = 0;
    return n;
}

/* ------------------------------------------------------------------ memory */

static void *cuda_alloc(bk_ctx *c, size_t bytes, plumb_err *err)
{
    void *p = NULL;
    size_t n = bytes ? (bytes + 255) / 256 * 256 : 256; /* aligned and unique when 0 */
    if (CUDA_CHECK_E(err, cudaSetDevice(c->device))) return NULL;
    if (CUDA_CHECK_E(err, cudaMalloc(&p, n))) return NULL;
    /* zeroed before return, so that another context's stream may use it at once */
    if (CUDA_CHECK_E(err, cudaMemsetAsync(p, 0, n, c->stream)) ||
        CUDA_CHECK_E(err, cudaStreamSynchronize(c->stream))) {
        cudaFree(p);
        return NULL;
    }
    if (c->nbufs == c->cap_bufs) {
        int nc = c->cap_bufs ? 2 * c->cap_bufs : 64;
        cuda_buf *nb = realloc(c->bufs, (size_t)nc * sizeof *nb);
        if (!nb) {
            cudaFree(p);
            err_set(err, NULL, NULL, "out of memory");
            return NULL;
        }
        c->bufs = nb;
        c->cap_bufs = nc;
    }
    c->bufs[c->nbufs++] = (cuda_buf){p, n};
    count_bytes(c, n);
    return p;
}

static void cuda_free_buf(bk_ctx *c, void *p)
{
    if (!p) return;
    cuda_enter(c);
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream)); /* p may still be in use */
    CUDA_CHECK(c, cudaFree(p));
    for (int i = c->nbufs - 1; i >= 0; i--) /* frees come mostly in reverse order */
        if (c->bufs[i].p == p) {
            c->live -= c->bufs[i].bytes;
            c->bufs[i] = c->bufs[--c->nbufs];
            break;
        }
}

static size_t cuda_mem_peak(bk_ctx *c) { return c->peak; }

static void cuda_upload(bk_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    cuda_enter(c);
    /* From pageable memory the driver stages src into pinned memory within the call (the
     * "API synchronization behavior" page: it may synchronize with the stream to do so), so
     * the caller may reuse src at once; the page states that plainly only for cudaMemcpy.
     * From page-locked memory (cuda_host_alloc) the copy is queued: src stays unchanged
     * until the next sync. */
    CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}

/* Page-locked host memory: uploads from it are DMAs queued on the stream (the caller keeps
 * it unchanged until the next sync, as backend.h says). */
static void *cuda_host_alloc(bk_ctx *c, size_t bytes, plumb_err *err)
{
    void *p = NULL;
    if (CUDA_CHECK_E(err, cudaSetDevice(c->device)) ||
        CUDA_CHECK_E(err, cudaMallocHost(&p, bytes ? bytes : 1)))
        return NULL;
    return p;
}

static void cuda_host_free(void *p)
{
    if (p) cudaFreeHost(p);
}

static void cuda_download(bk_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    cuda_enter(c);
    if (CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream)))
        return;
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
}

static void cuda_copy(bk_ctx *c, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return;
    cuda_enter(c);
    CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

static void cuda_zero(bk_ctx *c, void *p, size_t bytes)
{
    if (!bytes) return;
    cuda_enter(c);
    CUDA_CHECK(c, cudaMemsetAsync(p, 0, bytes, c->stream));
}

static int cuda_sync(bk_ctx *c, plumb_err *err)
{
    cuda_enter(c);
    CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    if (!c->failure.msg[0]) return 0;
    err_set(err, NULL, NULL, "%s", c->failure.msg);
    err_clear(&c->failure);
    return -1;
}

/* ------------------------------------------------------------------ dense math */

static cublasComputeType_t compute_type(const bk_ctx *c)
{
    switch (c->prec) {
    case CUDA_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case CUDA_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F_PEDANTIC;
    }
}

/* Row-major C = A B is column-major C^T = B^T A^T: swap the operands and M with N. */
void cuda_gemm_rm(bk_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    cuda_enter(c);
    if (K <= 0) { /* C = beta C (BLAS: beta 0 writes zeros without reading C) */
        for (int i = 0; i < M; i++) {
            float *row = C + (size_t)i * ldc;
            if (beta == 0.0f ? CUDA_CHECK(c, cudaMemsetAsync(row, 0, sizeof(float) * N, c->stream))
                             : KERNEL_CHECK(c, ck_scale(c->stream, (size_t)N, beta, row)))
                return;
        }
        return;
    }
    CUBLAS_CHECK(c, cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F,
                                 ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                                 compute_type(c), CUBLAS_GEMM_DEFAULT));
}

void cuda_gemm_rm_batched(bk_ctx *c, int ta, int tb, int M, int N, int K, float alpha,
                          const float *A, int lda, long long sA, const float *B, int ldb,
                          long long sB, float beta, float *C, int ldc, long long sC, int batch)
{
    if (M <= 0 || N <= 0 || batch <= 0) return;
    if (K <= 0) { /* C = beta C for each product, as cuda_gemm_rm does */
        for (int i = 0; i < batch; i++)
            cuda_gemm_rm(c, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C + i * sC, ldc);
        return;
    }
    cuda_enter(c);
    CUBLAS_CHECK(c, cublasGemmStridedBatchedEx(
                        c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                        N, M, K, &alpha, B, CUDA_R_32F, ldb, sB, A, CUDA_R_32F, lda, sA, &beta,
                        C, CUDA_R_32F, ldc, sC, batch, compute_type(c), CUBLAS_GEMM_DEFAULT));
}

static void cuda_axpy(bk_ctx *c, size_t n, float alpha, const float *x, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_axpy(c->stream, n, alpha, x, y));
}

static void cuda_scale(bk_ctx *c, size_t n, float alpha, float *x)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_scale(c->stream, n, alpha, x));
}

static void cuda_add(bk_ctx *c, size_t n, const float *a, const float *b, float *y)
{
    cuda_enter(c);
    KERNEL_CHECK(c, ck_add(c->stream, n, a, b, y));
}

/* ------------------------------------------------------------------ hand-off marks */

struct bk_mark {
    int device;
    cudaEvent_t ev;
};

bk_mark *cuda_mark_new(bk_ctx *c, plumb_err *err)
{
    bk_mark *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    m->device = c->device;
    if (CUDA_CHECK_E(err, cudaSetDevice(c->device)) ||
        CUDA_CHECK_E(err, cudaEventCreateWithFlags(&m->ev, cudaEventDisableTiming))) {
        free(m);
        return NULL;
    }
    return m;
}

void cuda_mark_free(bk_mark *m)
{
    if (!m) return;
    cudaSetDevice(m->device);
    cudaEventDestroy(m->ev);
    free(m);
}

void cuda_mark_record(bk_ctx *c, bk_mark *m)
{
    cuda_enter(c);
    CUDA_CHECK(c, cudaEventRecord(m->ev, c->stream));
}

void cuda_mark_wait(bk_ctx *c, bk_mark *m)
{
    cuda_enter(c);
    CUDA_CHECK(c, cudaStreamWaitEvent(c->stream, m->ev, 0));
}

void cuda_copy_peer(bk_ctx *to, void *dst, const bk_ctx *from, const void *src, size_t bytes)
{
    if (!bytes) return;
    cuda_enter(to);
    if (from->device != to->device) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, to->device, from->device) == cudaSuccess && can) {
            cudaError_t rc = cudaDeviceEnablePeerAccess(from->device, 0);
            if (rc == cudaErrorPeerAccessAlreadyEnabled)
                cudaGetLastError(); /* enabled earlier: fine */
            else if (CUDA_CHECK(to, rc))
                return;
        }
    }
    CUDA_CHECK(to, cudaMemcpyPeerAsync(dst, to->device, src, from->device, bytes, to->stream));
}

/* ------------------------------------------------------------------ tables */

#define CUDA_TABLE(NAME, CREATE)                                                          \
    {                                                                                     \
        .name = NAME, .create = CREATE, .destroy = cuda_destroy, .alloc = cuda_alloc,     \
        .free = cuda_free_buf, .mem_peak = cuda_mem_peak, .upload = cuda_upload,          \
        .scratch_take = cuda_scratch_take, .host_alloc = cuda_host_alloc,                 \
        .host_free = cuda_host_free,                                                      \
        .download = cuda_download,                                                        \
        .copy = cuda_copy, .zero = cuda_zero, .sync = cuda_sync, .gemm = cuda_gemm_rm,    \
        .axpy = cuda_axpy, .scale = cuda_scale, .add = cuda_add,                          \
        .linear_fwd = cuda_linear_fwd, .linear_bwd_data = cuda_linear_bwd_data,           \
        .linear_bwd_weight = cuda_linear_bwd_weight, .conv2d_fwd = cuda_conv2d_fwd,       \
        .conv2d_bwd_data = cuda_conv2d_bwd_data,                                          \
        .conv2d_bwd_weight = cuda_conv2d_bwd_weight, .maxpool_fwd = cuda_maxpool_fwd,     \
        .maxpool_bwd = cuda_maxpool_bwd, .relu_fwd = cuda_relu_fwd,                       \
        .relu_bwd = cuda_relu_bwd, .gelu_fwd = cuda_gelu_fwd, .gelu_bwd = cuda_gelu_bwd,  \
        .layernorm_fwd = cuda_layernorm_fwd, .layernorm_bwd_data = cuda_layernorm_bwd_data, \
        .layernorm_bwd_weight = cuda_layernorm_bwd_weight,                                \
        .embedding_fwd = cuda_embedding_fwd,                                              \
        .embedding_bwd_weight = cuda_embedding_bwd_weight,                                \
        .attention_fwd = cuda_attention_fwd, .attention_bwd = cuda_attention_bwd,         \
        .xent_fwd = cuda_xent_fwd, .xent_bwd = cuda_xent_bwd,                             \
        .xent_tp_max = cuda_xent_tp_max, .xent_tp_partial = cuda_xent_tp_partial,         \
        .xent_tp_finish = cuda_xent_tp_finish, .xent_tp_bwd = cuda_xent_tp_bwd,           \
        .opt_step = cuda_opt_step,                                                        \
        .mark_new = cuda_mark_new, .mark_free = cuda_mark_free,                           \
        .mark_record = cuda_mark_record, .mark_wait = cuda_mark_wait,                     \
        .copy_peer = cuda_copy_peer,                                                      \
    }

static const backend cuda_tables[CUDA_NPRECISIONS] = {
    [CUDA_FP32] = CUDA_TABLE("cuda", create_fp32),
    [CUDA_TF32] = CUDA_TABLE("cuda-tf32", create_tf32),
    [CUDA_BF16] = CUDA_TABLE("cuda-bf16", create_bf16),
};

const backend *backend_cuda(void) { return &cuda_tables[CUDA_FP32]; }

const backend *backend_cuda_precision(cuda_precision p)
{
    return (unsigned)p < CUDA_NPRECISIONS ? &cuda_tables[p] : NULL;
}

static const char *const prec_names[CUDA_NPRECISIONS] = {"fp32", "tf32", "bf16"};

const char *cuda_precision_name(cuda_precision p)
{
    return (unsigned)p < CUDA_NPRECISIONS ? prec_names[p] : "?";
}

int cuda_precision_parse(const char *s, cuda_precision *p, plumb_err *err)
{
    for (int i = 0; i < CUDA_NPRECISIONS; i++)
        if (s && !strcmp(s, prec_names[i])) {
            *p = (cuda_precision)i;
            return 0;
        }
    return err_set(err, NULL, "--precision", "expected fp32, tf32 or bf16 (got \"%s\")",
                   s ? s : "");
}
