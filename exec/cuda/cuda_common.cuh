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

#endif
