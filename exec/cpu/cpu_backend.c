/* cpu_backend.c: the CPU backend's table, memory, dense math (OpenBLAS) and optimizers.
 * Device buffers are plain host memory; every entry runs synchronously. */
#include "exec/cpu/cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bk_ctx *cpu_create(int device, plumb_err *err)
{
    if (device != 0) {
        err_set(err, NULL, "device", "the CPU backend has one device, 0 (got %d)", device);
        return NULL;
    }
    bk_ctx *c = calloc(1, sizeof *c);
    if (!c) err_set(err, NULL, NULL, "out of memory");
    return c;
}

static bk_ctx *cpu_create_bf16(int device, plumb_err *err)
{
    bk_ctx *c = cpu_create(device, err);
    if (c) c->bf16 = 1;
    return c;
}

static void cpu_destroy(bk_ctx *c)
{
    if (!c) return;
    free(c->scratch);
    free(c->rnd[0]);
    free(c->rnd[1]);
    free(c);
}

/* Grows *buf (of *have floats) to at least n floats, counting the growth in the context's
 * memory; NULL after recording "out of memory (... bytes of <what>)". */
static float *grow_space(bk_ctx *c, float **buf, size_t *have, size_t n, const char *what)
{
    if (n <= *have) return *buf;
    float *p = realloc(*buf, n * sizeof *p);
    if (!p) {
        if (!c->failure.msg[0])
            err_set(&c->failure, NULL, NULL, "out of memory (%zu bytes of %s)", n * sizeof *p,
                    what);
        return NULL;
    }
    c->live += (n - *have) * sizeof *p;
    if (c->live > c->peak) c->peak = c->live;
    *buf = p;
    *have = n;
    return p;
}

float *cpu_scratch(bk_ctx *c, size_t n)
{
    return grow_space(c, &c->scratch, &c->scratch_n, n, "scratch space");
}

/* Buffers carry a 64-byte header in front holding their size, for the memory count. */
#define CPU_HDR 64

static void *cpu_alloc(bk_ctx *c, size_t bytes, plumb_err *err)
{
    /* 64-byte alignment for vector loads; a whole number of alignment units */
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0) n = 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, n + CPU_HDR) != 0) {
        err_set(err, NULL, NULL, "out of memory (%zu bytes)", bytes);
        return NULL;
    }
    memset(p, 0, n + CPU_HDR);
    memcpy(p, &n, sizeof n);
    c->live += n;
    if (c->live > c->peak) c->peak = c->live;
    return (char *)p + CPU_HDR;
}

static void cpu_free(bk_ctx *c, void *p)
{
    if (!p) return;
    char *base = (char *)p - CPU_HDR;
    size_t n;
    memcpy(&n, base, sizeof n);
    c->live -= n;
    free(base);
}

static size_t cpu_mem_peak(bk_ctx *c) { return c->peak; }

static size_t cpu_scratch_take(bk_ctx *c)
{
    size_t n = c->scratch_n + c->rnd_n[0] + c->rnd_n[1];
    free(c->scratch);
    free(c->rnd[0]);
    free(c->rnd[1]);
    c->scratch = c->rnd[0] = c->rnd[1] = NULL;
    c->scratch_n = c->rnd_n[0] = c->rnd_n[1] = 0;
    c->live -= n * sizeof(float);
    return n * sizeof(float);
}

static void cpu_copy(bk_ctx *c, void *dst, const void *src, size_t bytes)
{
    (void)c;
    if (bytes && dst != src) memmove(dst, src, bytes);
}

/* Hand-offs: every context's buffers are host memory and every entry has finished when it
 * returns, so a copy between contexts is a memcpy and a mark has nothing to order. One
 * static mark stands for all of them (mark_new must not return NULL). */
static char cpu_mark_token;

static bk_mark *cpu_mark_new(bk_ctx *c, plumb_err *err)
{
    (void)c, (void)err;
    return (bk_mark *)&cpu_mark_token;
}

static void cpu_mark_free(bk_mark *m) { (void)m; }

static void cpu_mark_note(bk_ctx *c, bk_mark *m) { (void)c, (void)m; }

static void cpu_copy_peer(bk_ctx *to, void *dst, const bk_ctx *from, const void *src,
                          size_t bytes)
{
    (void)from;
    cpu_copy(to, dst, src, bytes);
}

static void cpu_zero(bk_ctx *c, void *p, size_t bytes) { (void)c; memset(p, 0, bytes); }

static int cpu_sync(bk_ctx *c, plumb_err *err)
{
    if (!c->failure.msg[0]) return 0;
    err_set(err, NULL, NULL, "%s", c->failure.msg);
    err_clear(&c->failure);
    return -1;
}

/* The n floats from x rounded to bf16, in the context's operand copy `slot`; NULL after
 * recording "out of memory". */
static const float *rounded(bk_ctx *c, int slot, const float *x, size_t n)
{
    float *r = grow_space(c, &c->rnd[slot], &c->rnd_n[slot], n, "bf16 operand space");
    if (r)
        for (size_t i = 0; i < n; i++) r[i] = cpu_bf16(x[i]);
    return r;
}

/* A GEMM cut into fixed pieces: piece p computes the rows (or columns) [w p, w (p + 1)) of
 * C, the last one up to the end, as its own single-threaded OpenBLAS call. The cut depends
 * on M, N and K only, never on the thread count: OpenBLAS's kernels may round an element
 * differently when a piece's extent changes its tiling (Zen's do), so the pieces, not the
 * threads, fix the bits. */
typedef struct gemm_arg {
    int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
    size_t width, pieces;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_arg;

static void gemm_part(void *p, size_t first, size_t end, int slot)
{
    const gemm_arg *g = p;
    (void)slot;
    size_t n = (size_t)(g->by_rows ? g->M : g->N);
    for (size_t q = first; q < end; q++) {
        size_t lo = q * g->width, hi = q + 1 == g->pieces ? n : lo + g->width;
        const float *A = g->A, *B = g->B;
        float *C = g->C;
        int M = g->M, N = g->N;
        if (g->by_rows) { /* rows lo..hi of C: of op(A) */
            A += g->ta ? lo : lo * (size_t)g->lda;
            C += lo * (size_t)g->ldc;
            M = (int)(hi - lo);
        } else { /* columns lo..hi of C: of op(B) */
            B += g->tb ? lo * (size_t)g->ldb : lo;
            C += lo;
            N = (int)(hi - lo);
        }
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, M, N, g->K, g->alpha, A, g->lda, B,
                    g->ldb, g->beta, C, g->ldc);
    }
}

void cpu_sgemm(bk_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (c->bf16 && M > 0 && N > 0 && K > 0) {
        /* the extent of each operand as stored: rows of ld, the last one only its columns */
        size_t na = (size_t)((ta ? K : M) - 1) * lda + (size_t)(ta ? M : K);
        size_t nb = (size_t)((tb ? N : K) - 1) * ldb + (size_t)(tb ? K : N);
        if (!(A = rounded(c, 0, A, na)) || !(B = rounded(c, 1, B, nb))) return;
    }
    double mnk = (double)M * N * K;
    if (mnk >= 2 * CPU_GEMM_PIECE_MNK) {
        gemm_arg g = {ta, tb, M, N, K, lda, ldb, ldc, M > N, 0, 0, alpha, beta, A, B, C};
        size_t n = (size_t)(g.by_rows ? M : N);
        size_t w = (size_t)(CPU_GEMM_PIECE_MNK / ((double)(g.by_rows ? N : M) * K)) + 1;
        if (w < 16) w = 16; /* no thin piece (OpenBLAS may send 1-wide ones to GEMV) */
        g.width = w;
        g.pieces = n / w > 0 ? n / w : 1; /* the last piece takes the rest: w .. 2w - 1 */
        cpu_par(g.pieces, 1, gemm_part, &g);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cpu_axpy(bk_ctx *c, size_t n, float alpha, const float *x, float *y)
{
    (void)c;
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

static void cpu_scale(bk_ctx *c, size_t n, float alpha, float *x)
{
    (void)c;
    for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

static void cpu_add(bk_ctx *c, size_t n, const float *a, const float *b, float *y)
{
    (void)c;
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void cpu_opt_step(bk_ctx *c, const bk_opt *o, size_t n, float *w, const float *g,
                         float *m, float *v)
{
    (void)c;
    const float lr = o->lr, wd = o->weight_decay;
    switch (o->kind) {
    case BK_SGD:
        for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
        break;
    case BK_MOMENTUM:
        for (size_t i = 0; i < n; i++) {
            m[i] = o->momentum * m[i] + g[i] + wd * w[i];
            w[i] -= lr * m[i];
        }
        break;
    case BK_ADAM: {
        const float b1 = o->beta1, b2 = o->beta2;
        const float c1 = 1.0f - powf(b1, (float)o->step);
        const float c2 = 1.0f - powf(b2, (float)o->step);
        for (size_t i = 0; i < n; i++) {
            m[i] = b1 * m[i] + (1.0f - b1) * g[i];
            v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
            float mh = m[i] / c1, vh = v[i] / c2;
            w[i] -= lr * (mh / (sqrtf(vh) + o->eps) + wd * w[i]);
        }
        break;
    }
    default:
        if (!c->failure.msg[0])
            err_set(&c->failure, NULL, NULL, "unknown optimizer kind %d", o->kind);
    }
}

static void cpu_hint_workers(int workers)
{
    /* several workers calling at once each get their share of the threads, so that
     * their splits do not oversubscribe the cores */
    int budget = cpu_par_budget();
    int per = workers > 0 ? budget / workers : budget;
    cpu_par_set_threads(per > 0 ? per : 1);
}

static const char *cpu_note(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* some OpenBLAS builds fall back to their SSE3 kernels on CPUs they do not know */
    const char *core = openblas_get_corename();
    if (core && !strcmp(core, "Prescott") && __builtin_cpu_supports("avx2"))
        return __builtin_cpu_supports("avx512f")
                   ? "note: OpenBLAS runs its generic Prescott kernels on this AVX-512 CPU; "
                     "OPENBLAS_CORETYPE=SkylakeX makes GEMMs about 4x faster"
                   : "note: OpenBLAS runs its generic Prescott kernels on this AVX2 CPU; "
                     "OPENBLAS_CORETYPE=Haswell makes GEMMs faster";
#endif
    return NULL;
}

/* One table per precision: "cpu" (fp32) and "cpu-bf16", whose contexts round the inputs of
 * GEMMs and convolutions to bf16 and accumulate in fp32, a reference for mixed precision
 * on GPUs (all tensors, so the master weights too, stay fp32). */
#define CPU_TABLE(NAME, CREATE)                                                          \
    {                                                                                    \
        .name = NAME, .create = CREATE,                                                  \
        .destroy = cpu_destroy,                                                          \
        .alloc = cpu_alloc,                                                              \
        .free = cpu_free,                                                                \
        .upload = cpu_copy,                                                              \
        .download = cpu_copy,                                                            \
        .copy = cpu_copy,                                                                \
        .mark_new = cpu_mark_new,                                                        \
        .mark_free = cpu_mark_free,                                                      \
        .mark_record = cpu_mark_note,                                                    \
        .mark_wait = cpu_mark_note,                                                      \
        .copy_peer = cpu_copy_peer,                                                      \
        .zero = cpu_zero,                                                                \
        .sync = cpu_sync,                                                                \
        .gemm = cpu_sgemm,                                                               \
        .axpy = cpu_axpy,                                                                \
        .scale = cpu_scale,                                                              \
        .add = cpu_add,                                                                  \
        .linear_fwd = cpu_linear_fwd,                                                    \
        .linear_bwd_data = cpu_linear_bwd_data,                                          \
        .linear_bwd_weight = cpu_linear_bwd_weight,                                      \
        .conv2d_fwd = cpu_conv2d_fwd,                                                    \
        .conv2d_bwd_data = cpu_conv2d_bwd_data,                                          \
        .conv2d_bwd_weight = cpu_conv2d_bwd_weight,                                      \
        .maxpool_fwd = cpu_maxpool_fwd,                                                  \
        .maxpool_bwd = cpu_maxpool_bwd,                                                  \
        .relu_fwd = cpu_relu_fwd,                                                        \
        .relu_bwd = cpu_relu_bwd,                                                        \
        .gelu_fwd = cpu_gelu_fwd,                                                        \
        .gelu_bwd = cpu_gelu_bwd,                                                        \
        .layernorm_fwd = cpu_layernorm_fwd,                                              \
        .layernorm_bwd_data = cpu_layernorm_bwd_data,                                    \
        .layernorm_bwd_weight = cpu_layernorm_bwd_weight,                                \
        .embedding_fwd = cpu_embedding_fwd,                                              \
        .embedding_bwd_weight = cpu_embedding_bwd_weight,                                \
        .attention_fwd = cpu_attention_fwd,                                              \
        .attention_bwd = cpu_attention_bwd,                                              \
        .xent_fwd = cpu_xent_fwd,                                                        \
        .xent_bwd = cpu_xent_bwd,                                                        \
        .xent_tp_max = cpu_xent_tp_max,                                                  \
        .xent_tp_partial = cpu_xent_tp_partial,                                          \
        .xent_tp_finish = cpu_xent_tp_finish,                                            \
        .xent_tp_bwd = cpu_xent_tp_bwd,                                                  \
        .opt_step = cpu_opt_step,                                                        \
        .hint_workers = cpu_hint_workers,                                                \
        .note = cpu_note,                                                                \
        .mem_peak = cpu_mem_peak,                                                        \
        .scratch_take = cpu_scratch_take,                                                \
    }

static const backend cpu_backend = CPU_TABLE("cpu", cpu_create);
static const backend cpu_bf16_backend = CPU_TABLE("cpu-bf16", cpu_create_bf16);

const backend *backend_cpu(void) { return &cpu_backend; }

const backend *backend_cpu_bf16(void) { return &cpu_bf16_backend; }
