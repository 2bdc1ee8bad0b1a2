/* cuda_common.cuh: helpers shared by plumb's .cu files: the block size, grid-stride loops
 * and a fixed-order block reduction. Device code only; not part of any public header. */
#ifndef PLUMB_EXEC_CUDA_COMMON_CUH
#define PLUMB_EXEC_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#define THREADS 256

/* Blocks for a grid-stride loop over n items (at least 1, at most about a million). */
static inline unsigned grid_for(size_t n)
{
    size_t g = (n + THREADS - 1) / THREADS;
    if (g < 1) g = 1;
    if (g > 65535u * 16u) g = 65535u * 16u;
    return (unsigned)g;
}

#define FOR_EACH(i, n)                                                                   \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (size_t)gridDim.x * blockDim.x)

/* Sum of one value per thread over a block of THREADS threads, in a fixed order; every
 * thread gets the result. sh: THREADS floats of shared memory. */
static __device__ inline float block_sum(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* Column reductions over many rows (bias and layer-norm weight gradients) run in two
 * passes, in a fixed order: blocks of COL_BLOCK columns x COL_LANES row lanes each sum one
 * chunk of col_chunk_rows(rows) rows into a partial (lane l takes rows l, l + COL_LANES, ...,
 * then the lanes are added in order), and one thread per column adds the chunks' partials
 * in order. A few thousand rows then spread over many blocks instead of one thread per
 * column walking every row. */
#define COL_BLOCK 32
#define COL_LANES 8

static inline int col_chunk_rows(int rows)
{
    int c = 128;
    while ((rows + c - 1) / c > 65535) c *= 2; /* the grid's y dimension */
    return c;
}

static inline int col_chunks(int rows)
{
    const int c = col_chunk_rows(rows);
    return rows > 0 ? (rows + c - 1) / c : 0;
}

/* The second pass: column j of part (chunks, cols) summed in chunk order. */
static __device__ inline float chunk_sum(const float *part, int chunks, int cols, size_t j)
{
    float s = 0.0f;
    for (int c = 0; c < chunks; c++) s += part[(size_t)c * cols + j];
    return s;
}

/* The sum over the block's row lanes of v, in lane order, returned to lane 0 (threadIdx.y
 * 0); every thread of the block must call it. sh: COL_LANES x COL_BLOCK floats. */
static __device__ inline float lane_sum(float v, float *sh)
{
    sh[threadIdx.y * COL_BLOCK + threadIdx.x] = v;
    __syncthreads();
    float t = 0.0f;
    if (threadIdx.y == 0)
        for (int l = 0; l < COL_LANES; l++) t += sh[l * COL_BLOCK + threadIdx.x];
    __syncthreads();
    return t;
}

#endif
