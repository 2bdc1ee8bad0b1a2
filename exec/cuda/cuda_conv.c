/* cuda_conv.c: 2-D convolution on the GPU. With cuDNN, each shape gets a plan on first use:
 * descriptors plus, for each of forward, backward-data and backward-filter, the fastest
 * algorithm cudnnFind* measured among those the context's precision allows (fp32: FMA
 * kernels only, TF32 off; tf32: tensor cores; bf16: bf16 copies of the inputs with fp32
 * accumulation, else TF32). Plans are cached in the context, so the search runs once per
 * shape. Where cuDNN is absent or finds nothing allowed, an im2col + cuBLAS path runs. */
#include "exec/cuda/cuda_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cuda/cuda_kernels.h"

#define WS_LIMIT ((size_t)2 << 30) /* largest cuDNN workspace an algorithm may ask for */
#define ALIGN(n) (((n) + 255) / 256 * 256)

enum { DIR_FWD = 0, DIR_BWD_DATA, DIR_BWD_FILTER, NDIRS };

typedef struct conv_algo {
    int ok;              /* an allowed algorithm was found (else: the im2col path) */
    int bf16;            /* runs on bf16 copies of its inputs */
    int algo;            /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    int math;            /* cudnnMathType_t */
    size_t ws;           /* workspace bytes */
} conv_algo;

struct cuda_conv_plan {
    bk_conv g;
    int searched[NDIRS];
    conv_algo a[NDIRS];
#ifdef PLUMB_HAVE_CUDNN
    /* [0]: fp32 tensors, [1]: bf16 tensors */
    cudnnTensorDescriptor_t x[2], y[2];
    cudnnFilterDescriptor_t w[2];
    cudnnConvolutionDescriptor_t conv[2];
#endif
};

/* ------------------------------------------------------------------ plans */

static void plan_release(cuda_conv_plan *p)
{
#ifdef PLUMB_HAVE_CUDNN
    for (int i = 0; i < 2; i++) {
        if (p->x[i]) cudnnDestroyTensorDescriptor(p->x[i]);
        if (p->y[i]) cudnnDestroyTensorDescriptor(p->y[i]);
        if (p->w[i]) cudnnDestroyFilterDescriptor(p->w[i]);
        if (p->conv[i]) cudnnDestroyConvolutionDescriptor(p->conv[i]);
    }
#endif
    memset(p, 0, sizeof *p);
}

void cuda_conv_plans_free(bk_ctx *c)
{
    for (int i = 0; i < c->nplans; i++) plan_release(&c->plans[i]);
    free(c->plans);
    c->plans = NULL;
    c->nplans = c->cap_plans = 0;
}

#ifdef PLUMB_HAVE_CUDNN
/* Fills the descriptors of both data types. Returns 0 or -1 (failure recorded). */
static int plan_describe(bk_ctx *c, cuda_conv_plan *p)
{
    const bk_conv *g = &p->g;
    for (int i = 0; i < 2; i++) {
        cudnnDataType_t dt = i ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
        if (CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&p->x[i])) ||
            CUDNN_CHECK(c, cudnnCreateTensorDescriptor(&p->y[i])) ||
            CUDNN_CHECK(c, cudnnCreateFilterDescriptor(&p->w[i])) ||
            CUDNN_CHECK(c, cudnnCreateConvolutionDescriptor(&p->conv[i])) ||
            CUDNN_CHECK(c, cudnnSetTensor4dDescriptor(p->x[i], CUDNN_TENSOR_NCHW, dt, g->B, g->C,
                                                      g->H, g->W)) ||
            CUDNN_CHECK(c, cudnnSetTensor4dDescriptor(p->y[i], CUDNN_TENSOR_NCHW, dt, g->B, g->K,
                                                      g->P, g->Q)) ||
            CUDNN_CHECK(c, cudnnSetFilter4dDescriptor(p->w[i], dt, CUDNN_TENSOR_NCHW, g->K, g->C,
                                                      g->kernel, g->kernel)) ||
            /* cross-correlation, as the CPU backend computes; fp32 accumulation */
            CUDNN_CHECK(c, cudnnSetConvolution2dDescriptor(p->conv[i], g->pad, g->pad, g->stride,
                                                           g->stride, 1, 1,
                                                           CUDNN_CROSS_CORRELATION,
                                                           CUDNN_DATA_FLOAT)))
            return -1;
    }
    return 0;
}

static const char *const dir_names[NDIRS] = {"forward", "backward data", "backward filter"};

/* One "plumb cuda:" line on stderr for the algorithm chosen for direction d: its number,
 * math, workspace and measured time, and its rank k among the nr results. */
static void plan_log(const bk_ctx *c, const cuda_conv_plan *p, int d, float ms, int k, int nr)
{
    const bk_conv *g = &p->g;
    const conv_algo *a = &p->a[d];
    fprintf(stderr, "plumb cuda: device %d: conv (%d, %d, %d, %d) -> %d channels, %dx%d/%d "
            "pad %d: %s algorithm %d, %s%s math, workspace %zu B, %.4f ms (result %d of %d)\n",
            c->device, g->B, g->C, g->H, g->W, g->K, g->kernel, g->kernel, g->stride, g->pad,
            dir_names[d], a->algo, a->bf16 ? "bf16 inputs, " : "",
            a->math == CUDNN_FMA_MATH ? "fma" : a->math == CUDNN_DEFAULT_MATH ? "default"
                                                                              : "tensor-op",
            a->ws, ms, k + 1, nr);
}

/* Keeps the n results of a cudnnFind* search (perf: the direction's own
 * cudnnConvolution*AlgoPerf_t array; the three types have the same fields) in r from r[nr]
 * on, advancing nr; none when the search failed (st). A macro: the three types differ. */
#define PERF_KEEP(perf, n, st, r, nr)                                                    \
    for (int k_ = 0; (st) == CUDNN_STATUS_SUCCESS && k_ < (n); k_++, (nr)++)            \
        (r)[nr].status = (perf)[k_].status, (r)[nr].algo = (perf)[k_].algo,             \
        (r)[nr].memory = (perf)[k_].memory, (r)[nr].math = (perf)[k_].mathType,         \
        (r)[nr].ms = (perf)[k_].time

/* Runs cudnnFind* for direction d with tensors of type bf16 (0/1) under `math`, and keeps
 * the fastest successful result whose math type is allowed. Returns 1 when one was found. */
static int plan_find(bk_ctx *c, cuda_conv_plan *p, int d, int bf16, cudnnMathType_t math)
{
    const int i = bf16;
    int n = 0;
    if (cudnnSetConvolutionMathType(p->conv[i], math) != CUDNN_STATUS_SUCCESS) return 0;
    cudnnStatus_t st;
    /* results come sorted, fastest first; each entry: status, algo, time, memory, mathType */
    struct { int status, algo; size_t memory; int math; float ms; } r[16];
    int nr = 0;
    if (d == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        st = cudnnFindConvolutionForwardAlgorithm(c->dnn, p->x[i], p->w[i], p->conv[i], p->y[i],
                                                  16, &n, perf);
        PERF_KEEP(perf, n, st, r, nr);
    } else if (d == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        st = cudnnFindConvolutionBackwardDataAlgorithm(c->dnn, p->w[i], p->y[i], p->conv[i],
                                                       p->x[i], 16, &n, perf);
        PERF_KEEP(perf, n, st, r, nr);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
        st = cudnnFindConvolutionBackwardFilterAlgorithm(c->dnn, p->x[i], p->y[i], p->conv[i],
                                                         p->w[i], 16, &n, perf);
        PERF_KEEP(perf, n, st, r, nr);
    }
    cudaGetLastError(); /* a failed search leaves nothing to report: the next option runs */
    cuda_conv_result cr[16];
    for (int k = 0; k < nr; k++) {
        int tensor = r[k].math == CUDNN_TENSOR_OP_MATH ||
                     r[k].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        cr[k] = (cuda_conv_result){.ok = r[k].status == CUDNN_STATUS_SUCCESS,
                                   .tensor_math = tensor, .ms = r[k].ms, .ws = r[k].memory};
    }
    /* strict fp32: no tensor-core result, and the algorithm runs under CUDNN_FMA_MATH
     * whatever math type the result names (CUDNN_DEFAULT_MATH may use TF32 on sm_80+) */
    int k = cuda_conv_pick(cr, nr, math == CUDNN_FMA_MATH, WS_LIMIT);
    if (k < 0) return 0;
    p->a[d] = (conv_algo){.ok = 1, .bf16 = bf16, .algo = r[k].algo,
                          .math = math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : r[k].math,
                          .ws = r[k].memory};
    if (c->log) plan_log(c, p, d, r[k].ms, k, nr);
    return 1;
}
#endif

static int pick_allowed(const cuda_conv_result *r, int strict_fp32, size_t ws_limit)
{
    return r->ok && r->ws <= ws_limit && !(strict_fp32 && r->tensor_math);
}

int cuda_conv_pick(const cuda_conv_result *r, int n, int strict_fp32, size_t ws_limit)
{
    int fastest = -1, best = -1;
    for (int k = 0; k < n; k++)
        if (pick_allowed(&r[k], strict_fp32, ws_limit) &&
            (fastest < 0 || r[k].ms < r[fastest].ms))
            fastest = k;
    if (fastest < 0) return -1;
    const double within = r[fastest].ms * (1 + CUDA_CONV_TIE);
    for (int k = 0; k < n; k++) {
        if (!pick_allowed(&r[k], strict_fp32, ws_limit) || r[k].ms > within) continue;
        if (best < 0 || r[k].ws < r[best].ws || (r[k].ws == r[best].ws && r[k].ms < r[best].ms))
            best = k;
    }
    return best;
}

/* The plan for g, searching direction d's algorithm on first use; NULL after recording a
 * failure. */
static cuda_conv_plan *plan_get(bk_ctx *c, const bk_conv *g, int d)
{
    cuda_conv_plan *p = NULL;
    for (int i = 0; i < c->nplans && !p; i++)
        if (!memcmp(&c->plans[i].g, g, sizeof *g)) p = &c->plans[i];
    if (!p) {
        if (c->nplans == c->cap_plans) {
            int cap = c->cap_plans ? 2 * c->cap_plans : 8;
            cuda_conv_plan *np = realloc(c->plans, (size_t)cap * sizeof *np);
            if (!np) {
                err_set(cuda_sticky(c), NULL, NULL, "out of memory (convolution plans)");
                return NULL;
            }
            c->plans = np;
            c->cap_plans = cap;
        }
        p = &c->plans[c->nplans++];
        memset(p, 0, sizeof *p);
        p->g = *g;
#ifdef PLUMB_HAVE_CUDNN
        if (plan_describe(c, p)) {
            plan_release(p);
            c->nplans--;
            return NULL;
        }
#endif
    }
    if (!p->searched[d]) {
        p->searched[d] = 1;
#ifdef PLUMB_HAVE_CUDNN
        int found = 0;
        if (c->prec == CUDA_BF16) found = plan_find(c, p, d, 1, CUDNN_TENSOR_OP_MATH);
        if (!found && c->prec != CUDA_FP32) found = plan_find(c, p, d, 0, CUDNN_TENSOR_OP_MATH);
        if (!found && c->prec == CUDA_FP32) found = plan_find(c, p, d, 0, CUDNN_FMA_MATH);
        if (!found && c->log) /* none: the im2col path */
            fprintf(stderr, "plumb cuda: device %d: conv (%d, %d, %d, %d) -> %d channels: %s "
                    "by im2col + cuBLAS (no cuDNN algorithm allowed)\n", c->device, g->B,
                    g->C, g->H, g->W, g->K, dir_names[d]);
#endif
    }
    return p;
}

/* ------------------------------------------------------------------ im2col path */

static size_t col_floats(const bk_conv *g)
{
    return (size_t)g->C * g->kernel * g->kernel * g->P * g->Q;
}

static void im2col_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w, float *y)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    float *col = cuda_workspace(c, col_floats(g) * sizeof(float));
    if (!col) return;
    for (int s = 0; s < g->B; s++) {
        if (KERNEL_CHECK(c, ck_im2col(c->stream, *g, x + (size_t)s * g->C * g->H * g->W, col)))
            return;
        /* y_s (K, PQ) = w (K, CKK) col (CKK, PQ) */
        cuda_gemm_rm(c, 0, 0, g->K, PQ, CKK, 1.0f, w, CKK, col, PQ, 0.0f,
                     y + (size_t)s * g->K * PQ, PQ);
    }
}

static void im2col_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                            float *dx)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    float *col = cuda_workspace(c, col_floats(g) * sizeof(float));
    if (!col) return;
    for (int s = 0; s < g->B; s++) {
        /* col (CKK, PQ) = w^T (CKK, K) dy_s (K, PQ) */
        cuda_gemm_rm(c, 1, 0, CKK, PQ, g->K, 1.0f, w, CKK, dy + (size_t)s * g->K * PQ, PQ, 0.0f,
                     col, PQ);
        if (KERNEL_CHECK(c, ck_col2im(c->stream, *g, col, dx + (size_t)s * g->C * g->H * g->W)))
            return;
    }
}

static void im2col_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                              float *dw)
{
    const int CKK = g->C * g->kernel * g->kernel, PQ = g->P * g->Q;
    float *col = cuda_workspace(c, col_floats(g) * sizeof(float));
    if (!col) return;
    for (int s = 0; s < g->B; s++) {
        if (KERNEL_CHECK(c, ck_im2col(c->stream, *g, x + (size_t)s * g->C * g->H * g->W, col)))
            return;
        /* dw (K, CKK) += dy_s (K, PQ) col^T (PQ, CKK) */
        cuda_gemm_rm(c, 0, 1, g->K, CKK, PQ, 1.0f, dy + (size_t)s * g->K * PQ, PQ, col, PQ, 1.0f,
                     dw, CKK);
    }
}

/* ------------------------------------------------------------------ cuDNN path */

#ifdef PLUMB_HAVE_CUDNN
/* Runs direction d through cuDNN: in1, in2 are the two fp32 inputs (fwd: x, w; bwd data:
 * w, dy; bwd filter: x, dy), out the fp32 output, overwritten (beta 0) or accumulated
 * (beta 1). In bf16 the inputs are converted into the workspace first and the output comes
 * back through an fp32 staging area. Returns 0, or -1 after recording a failure. */
static int dnn_run(bk_ctx *c, cuda_conv_plan *p, int d, const float *in1, const float *in2,
                   float *out, float beta)
{
    const bk_conv *g = &p->g;
    const conv_algo *a = &p->a[d];
    const size_t nx = (size_t)g->B * g->C * g->H * g->W, ny = (size_t)g->B * g->K * g->P * g->Q;
    const size_t nw = (size_t)g->K * g->C * g->kernel * g->kernel;
    size_t n1 = d == DIR_BWD_DATA ? nw : nx, n2 = d == DIR_FWD ? nw : ny;
    size_t no = d == DIR_FWD ? ny : d == DIR_BWD_DATA ? nx : nw;
    size_t bytes = ALIGN(a->ws);
    if (a->bf16) /* bf16 inputs and output, and an fp32 staging area when accumulating */
        bytes += ALIGN(n1 * 2) + ALIGN(n2 * 2) + ALIGN(no * 2) + (beta != 0.0f ? ALIGN(no * 4) : 0);
    char *ws = cuda_workspace(c, bytes);
    if (!ws) return -1;
    const int i = a->bf16;
    const void *i1 = in1, *i2 = in2;
    void *o = out;
    float one = 1.0f, b = beta;
    char *at = ws + ALIGN(a->ws);
    uint16_t *h1 = NULL, *h2 = NULL, *ho = NULL;
    float *stage = NULL;
    if (a->bf16) {
        h1 = (uint16_t *)at, at += ALIGN(n1 * 2);
        h2 = (uint16_t *)at, at += ALIGN(n2 * 2);
        ho = (uint16_t *)at, at += ALIGN(no * 2);
        stage = (float *)at;
        if (KERNEL_CHECK(c, ck_to_bf16(c->stream, n1, in1, h1)) ||
            KERNEL_CHECK(c, ck_to_bf16(c->stream, n2, in2, h2)))
            return -1;
        i1 = h1, i2 = h2, o = ho, b = 0.0f;
    }
    if (CUDNN_CHECK(c, cudnnSetConvolutionMathType(p->conv[i], (cudnnMathType_t)a->math)))
        return -1;
    int rc;
    if (d == DIR_FWD)
        rc = CUDNN_CHECK(c, cudnnConvolutionForward(c->dnn, &one, p->x[i], i1, p->w[i], i2,
                                                    p->conv[i],
                                                    (cudnnConvolutionFwdAlgo_t)a->algo, ws,
                                                    a->ws, &b, p->y[i], o));
    else if (d == DIR_BWD_DATA)
        rc = CUDNN_CHECK(c, cudnnConvolutionBackwardData(c->dnn, &one, p->w[i], i1, p->y[i], i2,
                                                         p->conv[i],
                                                         (cudnnConvolutionBwdDataAlgo_t)a->algo,
                                                         ws, a->ws, &b, p->x[i], o));
    else
        rc = CUDNN_CHECK(c, cudnnConvolutionBackwardFilter(
                                c->dnn, &one, p->x[i], i1, p->y[i], i2, p->conv[i],
                                (cudnnConvolutionBwdFilterAlgo_t)a->algo, ws, a->ws, &b,
                                p->w[i], o));
    if (rc) return -1;
    if (a->bf16) {
        float *dst = beta == 0.0f ? out : stage;
        if (KERNEL_CHECK(c, ck_from_bf16(c->stream, no, ho, dst))) return -1;
        if (beta != 0.0f && KERNEL_CHECK(c, ck_axpy(c->stream, no, 1.0f, stage, out))) return -1;
    }
    return 0;
}
#endif

/* ------------------------------------------------------------------ entries */

/* Runs direction d of g, through cuDNN where plan_get found it an algorithm, else by im2col
 * + cuBLAS. in1, in2 are dnn_run's two inputs (fwd: x, w; bwd data: w, dy; bwd filter: x,
 * dy); out is overwritten, except the filter gradient, which is accumulated. Returns 0, or
 * -1 when there was no plan or cuDNN failed (recorded: the caller adds nothing more). */
static int conv_run(bk_ctx *c, const bk_conv *g, int d, const float *in1, const float *in2,
                    float *out)
{
    cuda_enter(c);
    cuda_conv_plan *p = plan_get(c, g, d);
    if (!p) return -1;
#ifdef PLUMB_HAVE_CUDNN
    if (p->a[d].ok) return dnn_run(c, p, d, in1, in2, out, d == DIR_BWD_FILTER ? 1.0f : 0.0f);
#endif
    if (d == DIR_FWD) im2col_fwd(c, g, in1, in2, out);
    else if (d == DIR_BWD_DATA) im2col_bwd_data(c, g, in2, in1, out);
    else im2col_bwd_weight(c, g, in2, in1, out);
    return 0;
}

void cuda_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                     const float *b, float *y)
{
    if (conv_run(c, g, DIR_FWD, x, w, y)) return;
    if (b) KERNEL_CHECK(c, ck_bias_chw(c->stream, g->B, g->K, g->P * g->Q, b, y));
}

void cuda_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                          float *dx)
{
    conv_run(c, g, DIR_BWD_DATA, w, dy, dx);
}

void cuda_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                            float *dw, float *db)
{
    if (conv_run(c, g, DIR_BWD_FILTER, x, dy, dw)) return;
    if (db) KERNEL_CHECK(c, ck_bias_chw_bwd(c->stream, g->B, g->K, g->P * g->Q, dy, db));
}
