/* test_cuemu.cu: cuemu's own tests. cuemu stands in for a GPU in CI, so it must compute
 * what the GPU computes (barriers, warp shuffles, stream order) and it must catch what the
 * GPU punishes: each misuse below stops the run with a "cuemu:" line (the test expects
 * SIGABRT), returns the error CUDA returns, or leaves the stale data a GPU may leave.
 * Built only through tests/cuemu/cuemu.mk (the host compiler, launches rewritten). */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#define N_BLOCK 256

/* ------------------------------------------------------------------ kernels */

/* One block: out[0] = sum of in[0 .. N_BLOCK) by a shared-memory tree. */
__global__ void k_block_sum(const float *in, float *out)
{
    __shared__ float sh[N_BLOCK];
    sh[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    for (int w = N_BLOCK / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = sh[0];
}

/* out[warp] = sum over the warp's lanes, by xor shuffles. */
__global__ void k_warp_sum(const float *in, float *out)
{
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

/* Threads past n return before the barrier: undefined on the GPU. */
__global__ void k_barrier_after_return(int n, float *x)
{
    if ((int)threadIdx.x >= n) return;
    x[threadIdx.x] = 1.0f;
    __syncthreads();
}

/* out[t] = in[t - 1] through shared memory, without the barrier that makes it correct: each
 * thread reads a neighbour's slot right after writing its own. */
__global__ void k_shift_without_barrier(const float *in, float *out)
{
    __shared__ float sh[N_BLOCK];
    const int t = (int)threadIdx.x;
    sh[t] = in[t];
    out[t] = sh[t > 0 ? t - 1 : 0];
}

/* out[block] = the shared slot before this block writes it, then writes it. */
__global__ void k_read_shared_first(float *out)
{
    __shared__ float sh[1];
    out[blockIdx.x] = sh[0];
    sh[0] = 1.0f;
}

/* out[block] += 1 for every (x, y) block of the grid. */
__global__ void k_count_blocks(float *out)
{
    if (threadIdx.x == 0) out[blockIdx.y * gridDim.x + blockIdx.x] += 1.0f;
}

__global__ void k_fill(size_t n, float v, float *x)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = v;
}

/* ------------------------------------------------------------------ helpers */

static float *dev_floats(size_t n)
{
    float *p = NULL;
    cr_assert_eq(cudaMalloc((void **)&p, n * sizeof(float)), cudaSuccess);
    return p;
}

static cudaStream_t stream_new(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

/* ------------------------------------------------------------------ what a GPU computes */

Test(cuemu, barriers_and_shuffles_compute_what_the_gpu_does)
{
    float h[N_BLOCK], r[8];
    for (int i = 0; i < N_BLOCK; i++) h[i] = (float)(i % 7) - 2.0f;
    float *in = dev_floats(N_BLOCK), *out = dev_floats(8);
    cudaStream_t s = stream_new();
    cudaMemcpyAsync(in, h, sizeof h, cudaMemcpyHostToDevice, s);
    k_block_sum<<<1, N_BLOCK, 0, s>>>(in, out);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    cudaMemcpyAsync(r, out, 4, cudaMemcpyDeviceToHost, s);
    float want = 0;
    for (int i = 0; i < N_BLOCK; i++) want += h[i];
    cr_assert_eq(r[0], want, "block sum %g, want %g", r[0], want);
    k_warp_sum<<<2, 128, 0, s>>>(in, out);
    cudaMemcpyAsync(r, out, 8 * 4, cudaMemcpyDeviceToHost, s);
    for (int w = 0; w < 8; w++) {
        float x = 0;
        for (int l = 0; l < 32; l++) x += h[w * 32 + l];
        cr_assert_eq(r[w], x, "warp %d: %g, want %g", w, r[w], x);
    }
    cudaStreamDestroy(s);
    cudaFree(in), cudaFree(out);
}

/* The shift races: it is right only when every thread runs after its left neighbour. Run
 * in reverse (or shuffled) the race shows; the barrier-correct block sum stays right. */
static int shift_mismatches(const char *order)
{
    setenv("CUEMU_ORDER", order, 1);
    float h[N_BLOCK], r[N_BLOCK], sum = 0;
    for (int i = 0; i < N_BLOCK; i++) h[i] = (float)i;
    float *in = dev_floats(N_BLOCK), *out = dev_floats(N_BLOCK);
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    k_shift_without_barrier<<<1, N_BLOCK>>>(in, out);
    cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < N_BLOCK; i++) bad += r[i] != h[i > 0 ? i - 1 : 0];
    k_block_sum<<<1, N_BLOCK>>>(in, out);
    cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost);
    cr_assert_eq(sum, N_BLOCK * (N_BLOCK - 1) / 2.0f, "%s: block sum %g", order, sum);
    cudaFree(in), cudaFree(out);
    return bad;
}

Test(cuemu, a_missing_barrier_shows_in_reverse_order)
{
    cr_assert_eq(shift_mismatches("forward"), 0, "forward order hides the race");
    cr_assert_eq(shift_mismatches("reverse"), N_BLOCK - 1,
                 "in reverse every thread but 0 reads its neighbour's slot unwritten (NaN)");
    cr_assert_gt(shift_mismatches("shuffle:7"), N_BLOCK / 4);
}

Test(cuemu, shared_memory_holds_garbage_when_a_block_starts)
{
    float *out = dev_floats(2), r[2];
    k_read_shared_first<<<2, 1>>>(out);
    cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
    cr_assert(r[0] != r[0] && r[1] != r[1],
              "each block reads NaN, not zero or the previous block's 1 (got %g, %g)", r[0], r[1]);
    cudaFree(out);
}

Test(cuemu, every_block_runs_once_in_every_order)
{
    const char *orders[] = {"forward", "reverse", "shuffle", "shuffle:12345"};
    for (int o = 0; o < 4; o++) {
        setenv("CUEMU_ORDER", orders[o], 1);
        float *out = dev_floats(7 * 5), r[7 * 5];
        cudaMemset(out, 0, sizeof r);
        k_count_blocks<<<dim3(7, 5), 32>>>(out);
        cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
        for (int i = 0; i < 7 * 5; i++) cr_assert_eq(r[i], 1.0f, "%s: block %d ran %g times",
                                                      orders[o], i, r[i]);
        cudaFree(out);
    }
}

Test(cuemu, an_unknown_order_stops_the_run, .signal = SIGABRT)
{
    setenv("CUEMU_ORDER", "backwards", 1);
    float *x = dev_floats(4);
    k_fill<<<1, 4>>>(4, 1.0f, x);
    cudaDeviceSynchronize();
}

Test(cuemu, bad_launch_configuration_is_an_error_not_a_launch)
{
    float *x = dev_floats(4);
    k_fill<<<1, 2048>>>(4, 1.0f, x);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    cr_assert_eq(cudaGetLastError(), cudaSuccess, "the last error is cleared once read");
    k_fill<<<0, 32>>>(4, 1.0f, x);
    cr_assert_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    cudaFree(x);
}

/* ------------------------------------------------------------------ stream order */

/* Work runs when the host waits for it, so a reader that skips the wait sees stale data. */
Test(cuemu, a_missing_wait_reads_stale_data)
{
    const size_t n = 1000;
    float *x = dev_floats(n);
    float h = 0;
    cudaStream_t a = stream_new(), b = stream_new();
    cudaMemsetAsync(x, 0, n * 4, a);
    cudaStreamSynchronize(a);
    k_fill<<<4, 64, 0, a>>>(n, 3.0f, x);
    /* b reads without waiting for a: the fill has not run */
    cudaMemcpyAsync(&h, x + 7, 4, cudaMemcpyDeviceToHost, b);
    cr_assert_eq(h, 0.0f, "b saw a's unfinished work");
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, a);
    cudaStreamWaitEvent(b, e, 0);
    cudaMemcpyAsync(&h, x + 7, 4, cudaMemcpyDeviceToHost, b);
    cr_assert_eq(h, 3.0f, "after the event wait b sees the fill");
    cudaEventDestroy(e);
    cudaStreamDestroy(a), cudaStreamDestroy(b);
    cudaFree(x);
}

/* Pageable memory is staged at the call; pinned memory is read when the copy runs. */
Test(cuemu, pageable_sources_are_staged_pinned_ones_are_not)
{
    float *x = dev_floats(2), *pinned = NULL, page = 1.0f, back[2];
    cr_assert_eq(cudaMallocHost((void **)&pinned, 4), cudaSuccess);
    cudaStream_t s = stream_new();
    *pinned = 1.0f;
    cudaMemcpyAsync(x, &page, 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(x + 1, pinned, 4, cudaMemcpyHostToDevice, s);
    page = 2.0f, *pinned = 2.0f; /* the host writes before the copies ran */
    cudaMemcpyAsync(back, x, 8, cudaMemcpyDeviceToHost, s);
    cr_assert_eq(back[0], 1.0f);
    cr_assert_eq(back[1], 2.0f);
    cudaStreamDestroy(s);
    cudaFreeHost(pinned);
    cudaFree(x);
}

Test(cuemu, new_device_memory_is_not_zero)
{
    float *x = dev_floats(1), h = 0;
    cudaMemcpy(&h, x, 4, cudaMemcpyDeviceToHost);
    cr_assert(h != h, "cudaMalloc memory reads as NaN (undefined), got %g", h);
    cudaFree(x);
}

Test(cuemu, copies_check_their_direction)
{
    float *x = dev_floats(1), h = 0;
    cr_assert_eq(cudaMemcpy(x, &h, 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(&h, x, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cudaGetLastError();
    cudaFree(x);
}

/* ------------------------------------------------------------------ what a GPU punishes */

Test(cuemu, host_pointer_in_a_kernel_stops_the_run, .signal = SIGABRT)
{
    static float host[4];
    k_fill<<<1, 4>>>(4, 1.0f, host);
}

Test(cuemu, barrier_after_some_threads_returned_stops_the_run, .signal = SIGABRT)
{
    float *x = dev_floats(64);
    k_barrier_after_return<<<1, 64>>>(40, x);
    cudaDeviceSynchronize();
}

Test(cuemu, full_warp_shuffle_in_a_partial_warp_stops_the_run, .signal = SIGABRT)
{
    float *in = dev_floats(48), *out = dev_floats(2);
    k_warp_sum<<<1, 48>>>(in, out); /* the second warp has 16 lanes */
    cudaDeviceSynchronize();
}

Test(cuemu, memory_of_another_device_without_peer_access_stops_the_run, .signal = SIGABRT)
{
    int n = 0;
    cudaGetDeviceCount(&n);
    if (n < 2) raise(SIGABRT); /* CUEMU_DEVICES=1: nothing to test */
    cudaSetDevice(1);
    float *x = dev_floats(4);
    cudaSetDevice(0);
    k_fill<<<1, 4>>>(4, 1.0f, x);
}

Test(cuemu, gemm_past_the_end_of_its_matrix_stops_the_run, .signal = SIGABRT)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *a = dev_floats(16), *c = dev_floats(16), one = 1, zero = 0;
    /* C (4, 5) needs 20 floats, its allocation holds 16 */
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 5, 1, &one, a, CUDA_R_32F, 4, a, CUDA_R_32F, 1,
                 &zero, c, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

Test(cuemu, gemm_leading_dimensions_are_checked)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *a = dev_floats(64), one = 1, zero = 0;
    /* lda 3 < m 4 */
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, CUDA_R_32F, 3, a,
                              CUDA_R_32F, 4, &zero, a + 32, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_INVALID_VALUE);
    cublasDestroy(h);
    cudaFree(a);
}
