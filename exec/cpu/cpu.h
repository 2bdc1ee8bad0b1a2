/* cpu.h: internals shared by the CPU backend's files: the context (a scratch area that
 * grows on demand, the precision and the sticky error), bf16 rounding, and the entries
 * each file defines. */
#ifndef PLUMB_EXEC_CPU_H
#define PLUMB_EXEC_CPU_H

#include <stdint.h>
#include <string.h>

#include "exec/backend.h"

struct bk_ctx {
    float *scratch;       /* im2col and transposition space, grown by cpu_scratch */
    size_t scratch_n;     /* floats in scratch */
    float *rnd[2];        /* "cpu-bf16": the rounded copies of a GEMM's two operands */
    size_t rnd_n[2];      /* floats in rnd[i] */
    int bf16;             /* "cpu-bf16": GEMM and convolution inputs rounded to bf16 */
    size_t live, peak;    /* bytes allocated through the context now / at the most */
    plumb_err failure;    /* first failure since the last sync ("" when none) */
};

/* Returns scratch space of at least n floats (contents undefined), or NULL after recording
 * "out of memory" in the context. */
float *cpu_scratch(bk_ctx *c, size_t n);

/* x rounded to the nearest bf16 value (8 significant bits), ties to even, as a float;
 * infinities stay, NaNs stay NaN, values beyond bf16's range round to infinity. */
static inline float cpu_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu) u |= 0x00400000u; /* a NaN keeps a mantissa bit: stays NaN */
    } else {
        u += 0x7fffu + ((u >> 16) & 1u);
    }
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A GEMM operand as the context's precision sees it: x itself, or (cpu-bf16) x rounded. */
static inline float cpu_in(const bk_ctx *c, float x) { return c->bf16 ? cpu_bf16(x) : x; }
/* A convolution's result as the context's precision leaves it: cuDNN's bf16 convolutions
 * write bf16 tensors, so cpu-bf16 rounds convolution outputs (not GEMM outputs: cuBLAS
 * writes fp32) the same way. */
static inline float cpu_out(const bk_ctx *c, float x) { return c->bf16 ? cpu_bf16(x) : x; }

/* Row-major C = alpha op(A) op(B) + beta C through OpenBLAS, as the backend's gemm entry;
 * in a cpu-bf16 context A and B are first copied rounded to bf16 (fp32 accumulation, as
 * cuBLAS's bf16 compute type). Records "out of memory" in c when the copies do not fit.
 * With M N K >= 2 CPU_GEMM_PIECE_MNK it cuts C's rows (M > N) or columns into pieces of a
 * width fixed by M, N and K (at any thread count, one included), each one single-threaded
 * OpenBLAS call, and hands the pieces to cpu_par. Safe from several threads at once in an
 * fp32 context (cpu-bf16's copies are the context's). */
/* A piece's least M N K when cpu_sgemm cuts a GEMM: above OpenBLAS's small-matrix and
 * direct kernels' limits (1e6 and 28 512 512), so that every piece takes the blocked path.
 * The pieces do not depend on the thread count, so neither do the bits: OpenBLAS's
 * kernels may round an element differently when a piece's extent changes its tiling (its
 * Zen kernels do: a 300 x 260 x 700 GEMM cut at row 150 differs from the whole in the
 * last bit), so a cut that followed the threads gave other bits at each count
 * (tests/test_cpu_par.c checks 1 to 4 threads). */
#define CPU_GEMM_PIECE_MNK (8.0 * 1024 * 1024)
void cpu_sgemm(bk_ctx *c, int trans_a, int trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* cpu_conv.c */
void cpu_conv2d_fwd(bk_ctx *c, const bk_conv *g, const float *x, const float *w,
                    const float *b, float *y);
void cpu_conv2d_bwd_data(bk_ctx *c, const bk_conv *g, const float *dy, const float *w,
                         float *dx);
void cpu_conv2d_bwd_weight(bk_ctx *c, const bk_conv *g, const float *dy, const float *x,
                           float *dw, float *db);
void cpu_maxpool_fwd(bk_ctx *c, const bk_pool *g, const float *x, float *y);
void cpu_maxpool_bwd(bk_ctx *c, const bk_pool *g, const float *x, const float *dy, float *dx);

/* cpu_par.c. A work function runs items [lo, hi) as thread number slot (0 .. threads-1). */
typedef void (*cpu_par_fn)(void *arg, size_t lo, size_t hi, int slot);
/* The threads cpu_par splits over, 1 to 16: the last cpu_par_set_threads, or on first use
 * cpu_par_budget(). */
int cpu_par_threads(void);
/* Sets the threads cpu_par (and cpu_sgemm) split over, clamped to 1 .. 16, and keeps
 * OpenBLAS itself at one thread. Safe from any thread; calls already splitting keep their
 * split. */
void cpu_par_set_threads(int n);
/* The threads the user gave plumb: OPENBLAS_NUM_THREADS, else GOTO_NUM_THREADS, else
 * OMP_NUM_THREADS (as OpenBLAS reads them; at most the online cores), else every core, or
 * every core when plumb set OPENBLAS_NUM_THREADS=1 itself only to defer OpenBLAS's pool
 * (cli/main.c marks that with PLUMB_BLAS_DEFERRED); at most 16. */
int cpu_par_budget(void);
/* The per-thread scratch slots a kernel that splits n items with cpu_par (min_items 1) sets
 * aside: at least the threads cpu_par uses for it, and, on one machine, the same whatever
 * the thread share (min(n, 16, max(online cores, threads))), so that the scratch `plumb
 * profile` measures is the scratch a pipeline worker with fewer threads allocates. */
int cpu_par_slots(size_t n);
/* Runs fn over [0, n) split into contiguous ranges, one per thread, with at least
 * min_items items per range (fewer threads for small n); range i is items
 * [n i / t, n (i+1) / t) as slot i whichever thread runs it. The caller runs range 0 and
 * every range no idle pool helper was free for (other callers' or nested calls' helpers
 * are busy, or a helper cannot be started), and returns when all have run. Safe from
 * several threads at once and from inside fn; never waits for a helper it did not
 * claim. fn must only write what its own items own. */
void cpu_par(size_t n, size_t min_items, cpu_par_fn fn, void *arg);
/* The pool's helper threads started so far (they persist until exit, when they are
 * joined): at most 15. */
int cpu_par_helpers(void);

/* cpu_vec.c: the activations on blocks of 4 floats. relu_* equal the references bit for
 * bit (NaN inputs give +0, as the references); gelu_* and cpu_exp_fast are within a few
 * float ulp of the double-precision references (test_layers states the bound). */
void cpu_relu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cpu_relu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
void cpu_gelu_fwd(bk_ctx *c, size_t n, const float *x, float *y);
void cpu_gelu_bwd(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx);
/* y[i] = e^x[i] for x clamped to [-87, 88]; y may be x. */
void cpu_exp_fast(size_t n, const float *x, float *y);
/* The 2x2 stride-2 max pooling's backward over one row of Q windows (input rows x0, x1,
 * gradient rows d0, d1, all written): the windows 0 .. r-1 in blocks of 4, r returned
 * (a multiple of 4); the caller does windows r .. Q-1 with the same rule. */
int cpu_maxpool2_bwd_row(int Q, const float *x0, const float *x1, const float *dy, float *d0,
                         float *d1);
/* The scalar references (y = x > 0 ? x : 0; GELU's tanh form in double). */
void cpu_relu_fwd_ref(size_t n, const float *x, float *y);
void cpu_relu_bwd_ref(size_t n, const float *x, const float *dy, float *dx);
void cpu_gelu_fwd_ref(size_t n, const float *x, float *y);
void cpu_gelu_bwd_ref(size_t n, const float *x, const float *dy, float *dx);

/* cpu_layers.c */
void cpu_linear_fwd(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                    const float *b, float *y);
void cpu_linear_bwd_data(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                         float *dx);
void cpu_linear_bwd_weight(bk_ctx *c, int N, int in, int out, const float *dy,
                           const float *x, float *dw, float *db);
void cpu_xent_fwd(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                  float *probs, float *loss, float *correct);
void cpu_xent_bwd(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                  float scale, float *dlogits);
/* the vocabulary-parallel cross-entropy's steps (backend.h: xent_tp_*); the summation
 * order is that of the host arithmetic they replaced (a double sum of each row's exps) */
void cpu_xent_tp_max(bk_ctx *c, int N, int v, const float *logits, float *mx);
void cpu_xent_tp_partial(bk_ctx *c, int N, int v, int T, int lo, const float *maxes,
                         const int32_t *targets, const float *logits, float *e, float *q);
void cpu_xent_tp_finish(bk_ctx *c, int N, int v, int T, const float *maxes, const float *q,
                        float *e, float *loss, float *correct);
void cpu_xent_tp_bwd(bk_ctx *c, int N, int v, int lo, const float *probs,
                     const int32_t *targets, float scale, float *dlogits);

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
