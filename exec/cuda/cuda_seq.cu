/* cuda_seq.cu: kernels of the transformer layers: layer normalization, token + position
 * embedding, and the causal softmax of attention (its GEMMs run in cuBLAS, see
 * cuda_layers.c). Reductions run in a fixed order (no atomics), so results reproduce. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "exec/cuda/cuda_common.cuh"
#include "exec/cuda/cuda_kernels.h"

#define LN_EPS 1e-5f
#define WARP 32

static __device__ inline float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ inline float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* ---------------------------------------------------------------- layer normalization */

/* One block per row: mean, then variance around it (two passes, as the CPU does). */
__global__ void k_ln_fwd(int D, const float *x, const float *gamma, const float *beta, float *y,
                         float *mean, float *rstd)
{
    __shared__ float sh[THREADS];
    const size_t row = blockIdx.x;
    const float *xi = x + row * D;
    float *yi = y + row * D;
    float s = 0.0f;
    for (int j = threadIdx.x; j < D; j += THREADS) s += xi[j];
    const float m = block_sum(s, sh) / D;
    float v = 0.0f;
    for (int j = threadIdx.x; j < D; j += THREADS) {
        float d = xi[j] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(block_sum(v, sh) / D + LN_EPS);
    for (int j = threadIdx.x; j < D; j += THREADS) yi[j] = (xi[j] - m) * r * gamma[j] + beta[j];
    if (threadIdx.x == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* One block per row: dx = rstd (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)). */
__global__ void k_ln_bwd_data(int D, const float *x, const float *gamma, const float *mean,
                              const float *rstd, const float *dy, float *dx)
{
    __shared__ float sh[THREADS];
    const size_t row = blockIdx.x;
    const float *xi = x + row * D, *dyi = dy + row * D;
    float *dxi = dx + row * D;
    const float m = mean[row], r = rstd[row];
    float a = 0.0f, b = 0.0f;
    for (int j = threadIdx.x; j < D; j += THREADS) {
        float g = dyi[j] * gamma[j];
        a += g;
        b += g * ((xi[j] - m) * r);
    }
    a = block_sum(a, sh) / D;
    b = block_sum(b, sh) / D;
    for (int j = threadIdx.x; j < D; j += THREADS) {
        float xh = (xi[j] - m) * r;
        dxi[j] = r * (dyi[j] * gamma[j] - a - xh * b);
    }
}

/* pg, pb (chunks, D): per chunk of rows, the sums of dy xhat and of dy for each column
 * (the two-pass column reduction of cuda_common.cuh). */
__global__ void k_ln_bwd_weight_part(int N, int D, int chunk, const float *x, const float *mean,
                                     const float *rstd, const float *dy, float *pg, float *pb)
{
    __shared__ float sh[COL_LANES * COL_BLOCK];
    const int j = blockIdx.x * COL_BLOCK + threadIdx.x;
    const int r0 = blockIdx.y * chunk, r1 = r0 + chunk < N ? r0 + chunk : N;
    float sg = 0.0f, sb = 0.0f;
    if (j < D)
        for (int i = r0 + (int)threadIdx.y; i < r1; i += COL_LANES) {
            float d = dy[(size_t)i * D + j];
            sg += d * ((x[(size_t)i * D + j] - mean[i]) * rstd[i]);
            sb += d;
        }
    sg = lane_sum(sg, sh);
    sb = lane_sum(sb, sh);
    if (threadIdx.y == 0 && j < D) {
        pg[(size_t)blockIdx.y * D + j] = sg;
        pb[(size_t)blockIdx.y * D + j] = sb;
    }
}

/* dgamma, dbeta (D) += the chunks' partials, in chunk order. */
__global__ void k_ln_bwd_weight_finish(int chunks, int D, const float *pg, const float *pb,
                                       float *dgamma, float *dbeta)
{
    FOR_EACH(j, (size_t)D)
    {
        dgamma[j] += chunk_sum(pg, chunks, D, j);
        dbeta[j] += chunk_sum(pb, chunks, D, j);
    }
}

extern "C" cudaError_t ck_layernorm_fwd(cudaStream_t s, int N, int D, const float *x,
                                        const float *gamma, const float *beta, float *y,
                                        float *mean, float *rstd)
{
    if (N > 0 && D > 0) k_ln_fwd<<<N, THREADS, 0, s>>>(D, x, gamma, beta, y, mean, rstd);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_layernorm_bwd_data(cudaStream_t s, int N, int D, const float *x,
                                             const float *gamma, const float *mean,
                                             const float *rstd, const float *dy, float *dx)
{
    if (N > 0 && D > 0) k_ln_bwd_data<<<N, THREADS, 0, s>>>(D, x, gamma, mean, rstd, dy, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_layernorm_bwd_weight(cudaStream_t s, int N, int D, const float *x,
                                               const float *mean, const float *rstd,
                                               const float *dy, float *dgamma, float *dbeta,
                                               float *part)
{
    if (N <= 0 || D <= 0) return cudaGetLastError();
    const int chunks = col_chunks(N);
    float *pg = part, *pb = part + (size_t)chunks * D;
    const dim3 grid((D + COL_BLOCK - 1) / COL_BLOCK, chunks);
    k_ln_bwd_weight_part<<<grid, dim3(COL_BLOCK, COL_LANES), 0, s>>>(N, D, col_chunk_rows(N), x, mean, rstd, dy, pg, pb);
    k_ln_bwd_weight_finish<<<grid_for(D), THREADS, 0, s>>>(chunks, D, pg, pb, dgamma, dbeta);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- embedding */

static __device__ inline int token_id(float f, int V)
{
    int id = (int)f;
    return (id < 0 || id >= V) ? 0 : id; /* the data loader validates ids */
}

__global__ void k_emb_fwd(int B, int T, int V, int D, const float *tokens, const float *wte,
                          const float *wpe, float *y)
{
    FOR_EACH(i, (size_t)B * T * D)
    {
        int j = (int)(i % D);
        size_t bt = i / D;
        int t = (int)(bt % T);
        int id = token_id(tokens[bt], V);
        y[i] = wte[(size_t)id * D + j] + wpe[(size_t)t * D + j];
    }
}

/* dwte: thread (j, p) owns column j of the vocabulary rows whose id % parts == p and walks
 * every token in order, adding the rows it owns (no two threads touch the same element, so
 * no atomics, and each element sums its tokens in order: the result does not depend on
 * `parts`). */
__global__ void k_emb_bwd_wte(int BT, int V, int D, int parts, const float *tokens,
                              const float *dy, float *dwte)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x, p = blockIdx.y;
    if (j >= D) return;
    for (int i = 0; i < BT; i++) {
        int id = token_id(tokens[i], V);
        if (id % parts == p) dwte[(size_t)id * D + j] += dy[(size_t)i * D + j];
    }
}

/* dwpe (T, D): one thread per element, sums over the batch. */
__global__ void k_emb_bwd_wpe(int B, int T, int D, const float *dy, float *dwpe)
{
    FOR_EACH(i, (size_t)T * D)
    {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dy[(size_t)b * T * D + i];
        dwpe[i] += s;
    }
}

extern "C" cudaError_t ck_embedding_fwd(cudaStream_t s, int B, int T, int V, int D,
                                        const float *tokens, const float *wte, const float *wpe,
                                        float *y)
{
    size_t n = (size_t)B * T * D;
    if (n) k_emb_fwd<<<grid_for(n), THREADS, 0, s>>>(B, T, V, D, tokens, wte, wpe, y);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_embedding_bwd_weight(cudaStream_t s, int B, int T, int V, int D,
                                               const float *tokens, const float *dy,
                                               float *dwte, float *dwpe)
{
    if (D <= 0 || B <= 0 || T <= 0) return cudaGetLastError();
    const int parts = V < 64 ? V : 64; /* vocabulary partitions: 64x the threads */
    k_emb_bwd_wte<<<dim3((D + 63) / 64, parts), 64, 0, s>>>(B * T, V, D, parts, tokens, dy, dwte);
    size_t n = (size_t)T * D;
    k_emb_bwd_wpe<<<grid_for(n), THREADS, 0, s>>>(B, T, D, dy, dwpe);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- causal softmax */

/* One warp per row of length T; row r is position t = r % T of its (T, T) block. */
__global__ void k_causal_softmax(size_t nrows, int T, float *att)
{
    size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x % WARP;
    if (r >= nrows) return;
    int t = (int)(r % T);
    float *a = att + r * T;
    float mx = -INFINITY;
    for (int u = lane; u <= t; u += WARP) mx = fmaxf(mx, a[u]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int u = lane; u <= t; u += WARP) {
        float e = expf(a[u] - mx);
        a[u] = e;
        s += e;
    }
    const float inv = 1.0f / warp_sum(s);
    for (int u = lane; u < T; u += WARP) a[u] = u <= t ? a[u] * inv : 0.0f;
}

__global__ void k_causal_softmax_bwd(size_t nrows, int T, const float *att, float *d)
{
    size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
    int lane = threadIdx.x % WARP;
    if (r >= nrows) return;
    int t = (int)(r % T);
    const float *a = att + r * T;
    float *dr = d + r * T;
    float dot = 0.0f;
    for (int u = lane; u <= t; u += WARP) dot += a[u] * dr[u];
    dot = warp_sum(dot);
    for (int u = lane; u < T; u += WARP) dr[u] = u <= t ? a[u] * (dr[u] - dot) : 0.0f;
}

static unsigned warp_blocks(size_t nrows)
{
    return (unsigned)((nrows * WARP + THREADS - 1) / THREADS);
}

extern "C" cudaError_t ck_causal_softmax(cudaStream_t s, int rows, int T, float *att)
{
    size_t n = (size_t)rows * T;
    if (n) k_causal_softmax<<<warp_blocks(n), THREADS, 0, s>>>(n, T, att);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_causal_softmax_bwd(cudaStream_t s, int rows, int T, const float *att,
                                             float *d)
{
    size_t n = (size_t)rows * T;
    if (n) k_causal_softmax_bwd<<<warp_blocks(n), THREADS, 0, s>>>(n, T, att, d);
    return cudaGetLastError();
}
