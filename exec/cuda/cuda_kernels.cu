/* cuda_kernels.cu: plumb's own CUDA kernels for the element-wise layers, biases, im2col,
 * max pooling, the softmax cross-entropy loss (whole and vocabulary-parallel) and the
 * optimizers. Every reduction runs in a
 * fixed order, so results are bit-for-bit reproducible from run to run. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "exec/cuda/cuda_common.cuh"
#include "exec/cuda/cuda_kernels.h"

/* The body of a ck_ entry that runs kernel k over n items: k launched on stream s with
 * grid_for(n) blocks of THREADS (for a FOR_EACH loop) and the arguments after k, or not at
 * all when n is 0; returns the launch's error. A macro in this file, not a function, so
 * that each launch stays the kernel's own: cuemu's build rewrites every launch line of a
 * .cu file into a launch that names the kernel in its messages. */
#define RETURN_LAUNCH(s, n, k, ...)                                                      \
    do {                                                                                 \
        if (n) k<<<grid_for(n), THREADS, 0, s>>>(__VA_ARGS__);                          \
        return cudaGetLastError();                                                       \
    } while (0)

/* ---------------------------------------------------------------- element-wise */

__global__ void k_axpy(size_t n, float a, const float *x, float *y)
{
    FOR_EACH(i, n) y[i] += a * x[i];
}

__global__ void k_scale(size_t n, float a, float *x)
{
    FOR_EACH(i, n) x[i] *= a;
}

__global__ void k_add(size_t n, const float *a, const float *b, float *y)
{
    FOR_EACH(i, n) y[i] = a[i] + b[i];
}

__global__ void k_relu_fwd(size_t n, const float *x, float *y)
{
    FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void k_relu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    FOR_EACH(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

__global__ void k_gelu_fwd(size_t n, const float *x, float *y)
{
    FOR_EACH(i, n)
    {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

__global__ void k_gelu_bwd(size_t n, const float *x, const float *dy, float *dx)
{
    FOR_EACH(i, n)
    {
        float v = x[i];
        float t = tanhf(GELU_K * (v + 0.044715f * v * v * v));
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
}

__global__ void k_to_bf16(size_t n, const float *x, uint16_t *y)
{
    FOR_EACH(i, n)
    {
        uint32_t u = __float_as_uint(x[i]);
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
            y[i] = (uint16_t)((u >> 16) | 0x40u); /* NaN stays a quiet NaN */
        } else {
            u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
            y[i] = (uint16_t)(u >> 16);
        }
    }
}

__global__ void k_from_bf16(size_t n, const uint16_t *x, float *y)
{
    FOR_EACH(i, n) y[i] = __uint_as_float((uint32_t)x[i] << 16);
}

extern "C" cudaError_t ck_axpy(cudaStream_t s, size_t n, float a, const float *x, float *y)
{
    RETURN_LAUNCH(s, n, k_axpy, n, a, x, y);
}

extern "C" cudaError_t ck_scale(cudaStream_t s, size_t n, float a, float *x)
{
    RETURN_LAUNCH(s, n, k_scale, n, a, x);
}

extern "C" cudaError_t ck_add(cudaStream_t s, size_t n, const float *a, const float *b, float *y)
{
    RETURN_LAUNCH(s, n, k_add, n, a, b, y);
}

extern "C" cudaError_t ck_relu_fwd(cudaStream_t s, size_t n, const float *x, float *y)
{
    RETURN_LAUNCH(s, n, k_relu_fwd, n, x, y);
}

extern "C" cudaError_t ck_relu_bwd(cudaStream_t s, size_t n, const float *x, const float *dy,
                                   float *dx)
{
    RETURN_LAUNCH(s, n, k_relu_bwd, n, x, dy, dx);
}

extern "C" cudaError_t ck_gelu_fwd(cudaStream_t s, size_t n, const float *x, float *y)
{
    RETURN_LAUNCH(s, n, k_gelu_fwd, n, x, y);
}

extern "C" cudaError_t ck_gelu_bwd(cudaStream_t s, size_t n, const float *x, const float *dy,
                                   float *dx)
{
    RETURN_LAUNCH(s, n, k_gelu_bwd, n, x, dy, dx);
}

extern "C" cudaError_t ck_to_bf16(cudaStream_t s, size_t n, const float *x, uint16_t *y)
{
    RETURN_LAUNCH(s, n, k_to_bf16, n, x, y);
}

extern "C" cudaError_t ck_from_bf16(cudaStream_t s, size_t n, const uint16_t *x, float *y)
{
    RETURN_LAUNCH(s, n, k_from_bf16, n, x, y);
}

/* ---------------------------------------------------------------- biases */

__global__ void k_bias_rows(int rows, int cols, const float *b, float *y)
{
    FOR_EACH(i, (size_t)rows * cols) y[i] += b[i % cols];
}

/* part (chunks, cols): column sums of each chunk of rows of dy (see cuda_common.cuh). */
__global__ void k_colsum_part(int rows, int cols, int chunk, const float *dy, float *part)
{
    __shared__ float sh[COL_LANES * COL_BLOCK];
    const int j = blockIdx.x * COL_BLOCK + threadIdx.x;
    const int r0 = blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float s = 0.0f;
    if (j < cols)
        for (int i = r0 + (int)threadIdx.y; i < r1; i += COL_LANES) s += dy[(size_t)i * cols + j];
    s = lane_sum(s, sh);
    if (threadIdx.y == 0 && j < cols) part[(size_t)blockIdx.y * cols + j] = s;
}

/* db (cols) += the chunks' partials (chunks, cols), added in chunk order. */
__global__ void k_colsum_finish(int chunks, int cols, const float *part, float *db)
{
    FOR_EACH(j, (size_t)cols) db[j] += chunk_sum(part, chunks, cols, j);
}

__global__ void k_bias_chw(int B, int K, int PQ, const float *b, float *y)
{
    FOR_EACH(i, (size_t)B * K * PQ) y[i] += b[(i / PQ) % K];
}

/* One block per output channel k. */
__global__ void k_bias_chw_bwd(int B, int K, int PQ, const float *dy, float *db)
{
    __shared__ float sh[THREADS];
    int k = blockIdx.x;
    float s = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *r = dy + ((size_t)b * K + k) * PQ;
        for (int i = threadIdx.x; i < PQ; i += THREADS) s += r[i];
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) db[k] += s;
}

extern "C" cudaError_t ck_bias_rows(cudaStream_t s, int rows, int cols, const float *b, float *y)
{
    size_t n = (size_t)rows * cols;
    RETURN_LAUNCH(s, n, k_bias_rows, rows, cols, b, y);
}

extern "C" size_t ck_col_scratch(int rows, int cols)
{
    return cols > 0 ? (size_t)col_chunks(rows) * cols : 0;
}

extern "C" cudaError_t ck_colsum_acc(cudaStream_t s, int rows, int cols, const float *dy,
                                     float *db, float *part)
{
    if (rows <= 0 || cols <= 0) return cudaGetLastError();
    const int chunks = col_chunks(rows);
    const dim3 grid((cols + COL_BLOCK - 1) / COL_BLOCK, chunks);
    k_colsum_part<<<grid, dim3(COL_BLOCK, COL_LANES), 0, s>>>(rows, cols, col_chunk_rows(rows), dy, part);
    k_colsum_finish<<<grid_for(cols), THREADS, 0, s>>>(chunks, cols, part, db);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_bias_chw(cudaStream_t s, int B, int K, int PQ, const float *b, float *y)
{
    size_t n = (size_t)B * K * PQ;
    RETURN_LAUNCH(s, n, k_bias_chw, B, K, PQ, b, y);
}

extern "C" cudaError_t ck_bias_chw_bwd(cudaStream_t s, int B, int K, int PQ, const float *dy,
                                       float *db)
{
    if (K > 0) k_bias_chw_bwd<<<K, THREADS, 0, s>>>(B, K, PQ, dy, db);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- im2col, pooling */

/* col (C k k, P Q): one thread per entry. */
__global__ void k_im2col(bk_conv g, const float *x, float *col)
{
    const int k = g.kernel, PQ = g.P * g.Q;
    FOR_EACH(i, (size_t)g.C * k * k * PQ)
    {
        int pix = (int)(i % PQ), row = (int)(i / PQ);
        int kj = row % k, ki = (row / k) % k, ch = row / (k * k);
        int p = pix / g.Q, q = pix % g.Q;
        int h = p * g.stride - g.pad + ki, w = q * g.stride - g.pad + kj;
        col[i] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[((size_t)ch * g.H + h) * g.W + w]
                                                           : 0.0f;
    }
}

/* dx (C, H, W): one thread per input element, gathering the col entries that read it. */
__global__ void k_col2im(bk_conv g, const float *col, float *dx)
{
    const int k = g.kernel, PQ = g.P * g.Q;
    FOR_EACH(i, (size_t)g.C * g.H * g.W)
    {
        int w = (int)(i % g.W), h = (int)((i / g.W) % g.H), ch = (int)(i / ((size_t)g.W * g.H));
        float s = 0.0f;
        for (int ki = 0; ki < k; ki++) {
            int ph = h + g.pad - ki;
            if (ph < 0 || ph % g.stride) continue;
            int p = ph / g.stride;
            if (p >= g.P) continue;
            for (int kj = 0; kj < k; kj++) {
                int qw = w + g.pad - kj;
                if (qw < 0 || qw % g.stride) continue;
                int q = qw / g.stride;
                if (q >= g.Q) continue;
                s += col[(size_t)((ch * k + ki) * k + kj) * PQ + p * g.Q + q];
            }
        }
        dx[i] = s;
    }
}

/* The offset of the first maximum of window (p, q) in one (H, W) plane. */
__device__ int pool_argmax(const bk_pool &g, const float *xs, int p, int q)
{
    int base = (p * g.stride) * g.W + q * g.stride, best = base;
    for (int i = 0; i < g.kernel; i++)
        for (int j = 0; j < g.kernel; j++)
            if (xs[base + i * g.W + j] > xs[best]) best = base + i * g.W + j;
    return best;
}

__global__ void k_maxpool_fwd(bk_pool g, const float *x, float *y)
{
    FOR_EACH(i, (size_t)g.B * g.C * g.P * g.Q)
    {
        int q = (int)(i % g.Q), p = (int)((i / g.Q) % g.P);
        size_t bc = i / ((size_t)g.P * g.Q);
        const float *xs = x + bc * g.H * g.W;
        y[i] = xs[pool_argmax(g, xs, p, q)];
    }
}

__global__ void k_maxpool_bwd(bk_pool g, const float *x, const float *dy, float *dx)
{
    FOR_EACH(i, (size_t)g.B * g.C * g.H * g.W)
    {
        int w = (int)(i % g.W), h = (int)((i / g.W) % g.H);
        size_t bc = i / ((size_t)g.H * g.W);
        const float *xs = x + bc * g.H * g.W;
        const float *dys = dy + bc * g.P * g.Q;
        int off = h * g.W + w;
        /* windows p with p s <= h < p s + kernel, likewise q */
        int p0 = h - g.kernel + 1 > 0 ? (h - g.kernel + g.stride) / g.stride : 0;
        int q0 = w - g.kernel + 1 > 0 ? (w - g.kernel + g.stride) / g.stride : 0;
        int p1 = h / g.stride < g.P - 1 ? h / g.stride : g.P - 1;
        int q1 = w / g.stride < g.Q - 1 ? w / g.stride : g.Q - 1;
        float s = 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++)
                if (pool_argmax(g, xs, p, q) == off) s += dys[p * g.Q + q];
        dx[i] = s;
    }
}

extern "C" cudaError_t ck_im2col(cudaStream_t s, bk_conv g, const float *x, float *col)
{
    size_t n = (size_t)g.C * g.kernel * g.kernel * g.P * g.Q;
    RETURN_LAUNCH(s, n, k_im2col, g, x, col);
}

extern "C" cudaError_t ck_col2im(cudaStream_t s, bk_conv g, const float *col, float *dx)
{
    size_t n = (size_t)g.C * g.H * g.W;
    RETURN_LAUNCH(s, n, k_col2im, g, col, dx);
}

extern "C" cudaError_t ck_maxpool_fwd(cudaStream_t s, bk_pool g, const float *x, float *y)
{
    size_t n = (size_t)g.B * g.C * g.P * g.Q;
    RETURN_LAUNCH(s, n, k_maxpool_fwd, g, x, y);
}

extern "C" cudaError_t ck_maxpool_bwd(cudaStream_t s, bk_pool g, const float *x, const float *dy,
                                      float *dx)
{
    size_t n = (size_t)g.B * g.C * g.H * g.W;
    RETURN_LAUNCH(s, n, k_maxpool_bwd, g, x, dy, dx);
}

/* ---------------------------------------------------------------- loss */

/* One block per row: arg-max (first maximum wins, as on the CPU), sum of exponentials,
 * probabilities, loss and correctness. */
__global__ void k_xent_fwd(int V, const float *logits, const int32_t *targets, float *probs,
                           float *loss, float *correct)
{
    __shared__ float shv[THREADS];
    __shared__ int shi[THREADS];
    const size_t row = blockIdx.x;
    const float *z = logits + row * V;
    float *p = probs + row * V;
    float best = -INFINITY;
    int arg = V; /* sentinel larger than every index */
    for (int j = threadIdx.x; j < V; j += THREADS)
        if (z[j] > best || (z[j] == best && j < arg)) best = z[j], arg = j;
    shv[threadIdx.x] = best;
    shi[threadIdx.x] = arg;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            float ov = shv[threadIdx.x + w];
            int oi = shi[threadIdx.x + w];
            if (ov > shv[threadIdx.x] || (ov == shv[threadIdx.x] && oi < shi[threadIdx.x]))
                shv[threadIdx.x] = ov, shi[threadIdx.x] = oi;
        }
        __syncthreads();
    }
    const float mx = shv[0];
    const int am = shi[0] < V ? shi[0] : 0; /* NaN logits: report class 0 */
    __syncthreads();
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += THREADS) {
        float e = expf(z[j] - mx);
        p[j] = e;
        s += e;
    }
    __shared__ float sh[THREADS];
    s = block_sum(s, sh);
    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < V; j += THREADS) p[j] *= inv;
    if (threadIdx.x == 0) {
        int t = targets[row];
        if (t < 0 || t >= V) t = 0; /* the data loader validates targets */
        loss[row] = logf(s) - (z[t] - mx);
        if (correct) correct[row] = am == t ? 1.0f : 0.0f;
    }
}

__global__ void k_xent_bwd(int N, int V, const float *probs, const int32_t *targets, float scale,
                           float *dlogits)
{
    FOR_EACH(i, (size_t)N * V)
    {
        int j = (int)(i % V);
        int t = targets[i / V];
        dlogits[i] = scale * probs[i] - (j == t ? scale : 0.0f);
    }
}

extern "C" cudaError_t ck_xent_fwd(cudaStream_t s, int N, int V, const float *logits,
                                   const int32_t *targets, float *probs, float *loss,
                                   float *correct)
{
    if (N > 0 && V > 0) k_xent_fwd<<<N, THREADS, 0, s>>>(V, logits, targets, probs, loss, correct);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_xent_bwd(cudaStream_t s, int N, int V, const float *probs,
                                   const int32_t *targets, float scale, float *dlogits)
{
    size_t n = (size_t)N * V;
    RETURN_LAUNCH(s, n, k_xent_bwd, N, V, probs, targets, scale, dlogits);
}

/* The vocabulary-parallel cross-entropy (backend.h: xent_tp_*), one block per row. */

/* Row i's maximum over the whole vocabulary: the largest of maxes' T rows (T, N). */
static __device__ inline float tp_row_max(const float *maxes, int N, int T, size_t i)
{
    float m = maxes[i];
    for (int k = 1; k < T; k++)
        if (maxes[(size_t)k * N + i] > m) m = maxes[(size_t)k * N + i];
    return m;
}

__global__ void k_xent_tp_max(int v, const float *logits, float *mx)
{
    __shared__ float sh[THREADS];
    const float *z = logits + (size_t)blockIdx.x * v;
    float best = -INFINITY;
    for (int j = threadIdx.x; j < v; j += THREADS)
        if (z[j] > best) best = z[j];
    sh[threadIdx.x] = best;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w && sh[threadIdx.x + w] > sh[threadIdx.x])
            sh[threadIdx.x] = sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) mx[blockIdx.x] = sh[0];
}

__global__ void k_xent_tp_partial(int N, int v, int T, int lo, const float *maxes,
                                  const int32_t *targets, const float *logits, float *e,
                                  float *q)
{
    __shared__ float sh[THREADS];
    const size_t row = blockIdx.x;
    const float *z = logits + row * v;
    float *r = e + row * v;
    const float m = tp_row_max(maxes, N, T, row);
    float s = 0.0f;
    for (int j = threadIdx.x; j < v; j += THREADS) {
        float x = expf(z[j] - m);
        r[j] = x;
        s += x;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        int k = targets[row] - lo;
        int here = k >= 0 && k < v;
        q[row] = s;
        q[N + row] = here ? z[k] : 0.0f;
        q[2 * (size_t)N + row] = here && z[k] == m ? 1.0f : 0.0f;
    }
}

__global__ void k_xent_tp_finish(int N, int v, int T, const float *maxes, const float *q,
                                 float *e, float *loss, float *correct)
{
    const size_t row = blockIdx.x;
    const float inv = (float)(1.0 / (double)q[row]);
    float *r = e + row * v;
    for (int j = threadIdx.x; j < v; j += THREADS) r[j] *= inv;
    if (threadIdx.x == 0) {
        const float m = tp_row_max(maxes, N, T, row);
        loss[row] = (float)(log((double)q[row]) - (double)(q[N + row] - m));
        correct[row] = q[2 * (size_t)N + row] > 0.0f ? 1.0f : 0.0f;
    }
}

__global__ void k_xent_tp_bwd(int N, int v, int lo, const float *probs, const int32_t *targets,
                              float scale, float *dlogits)
{
    FOR_EACH(i, (size_t)N * v)
    {
        int j = (int)(i % v);
        int k = targets[i / v] - lo;
        dlogits[i] = scale * (probs[i] - (j == k ? 1.0f : 0.0f));
    }
}

extern "C" cudaError_t ck_xent_tp_max(cudaStream_t s, int N, int v, const float *logits,
                                      float *mx)
{
    if (N > 0 && v > 0) k_xent_tp_max<<<N, THREADS, 0, s>>>(v, logits, mx);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_xent_tp_partial(cudaStream_t s, int N, int v, int T, int lo,
                                          const float *maxes, const int32_t *targets,
                                          const float *logits, float *e, float *q)
{
    if (N > 0 && v > 0) k_xent_tp_partial<<<N, THREADS, 0, s>>>(N, v, T, lo, maxes, targets, logits, e, q);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_xent_tp_finish(cudaStream_t s, int N, int v, int T,
                                         const float *maxes, const float *q, float *e,
                                         float *loss, float *correct)
{
    if (N > 0 && v > 0) k_xent_tp_finish<<<N, THREADS, 0, s>>>(N, v, T, maxes, q, e, loss, correct);
    return cudaGetLastError();
}

extern "C" cudaError_t ck_xent_tp_bwd(cudaStream_t s, int N, int v, int lo, const float *probs,
                                      const int32_t *targets, float scale, float *dlogits)
{
    size_t n = (size_t)N * v;
    RETURN_LAUNCH(s, n, k_xent_tp_bwd, N, v, lo, probs, targets, scale, dlogits);
}

/* ---------------------------------------------------------------- optimizers */

__global__ void k_sgd(size_t n, float lr, float wd, float *w, const float *g)
{
    FOR_EACH(i, n) w[i] -= lr * (g[i] + wd * w[i]);
}

__global__ void k_momentum(size_t n, float lr, float mu, float wd, float *w, const float *g,
                           float *m)
{
    FOR_EACH(i, n)
    {
        float mi = mu * m[i] + g[i] + wd * w[i];
        m[i] = mi;
        w[i] -= lr * mi;
    }
}

__global__ void k_adam(size_t n, float lr, float b1, float b2, float eps, float wd, float c1,
                       float c2, float *w, const float *g, float *m, float *v)
{
    FOR_EACH(i, n)
    {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mh = mi / c1, vh = vi / c2;
        w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[i]);
    }
}

extern "C" cudaError_t ck_opt_step(cudaStream_t s, bk_opt o, float c1, float c2, size_t n,
                                   float *w, const float *g, float *m, float *v)
{
    if (!n) return cudaGetLastError();
    switch (o.kind) {
    case BK_SGD:
        k_sgd<<<grid_for(n), THREADS, 0, s>>>(n, o.lr, o.weight_decay, w, g);
        break;
    case BK_MOMENTUM:
        k_momentum<<<grid_for(n), THREADS, 0, s>>>(n, o.lr, o.momentum, o.weight_decay, w, g, m);
        break;
    case BK_ADAM:
        k_adam<<<grid_for(n), THREADS, 0, s>>>(n, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
                                                c1, c2, w, g, m, v);
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
