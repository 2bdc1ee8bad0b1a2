/* cuemu_kernel.h: what a .cu file needs to compile with the host C++ compiler under cuemu
 * (force-included with -include before anything else). The build rewrites every launch
 * `k<<<grid, block, shmem, stream>>>(args)` into `CUEMU_LAUNCH(k, grid, block, shmem,
 * stream)(args)` (see tests/cuemu/cuemu.mk); the kernel then runs through
 * cuemu_fiber.cc: one block at a time, each GPU thread a fiber, so __syncthreads and warp
 * shuffles behave as on the GPU and misuse of them (a barrier some threads skip, a full-warp
 * shuffle with lanes missing) stops the run with a message.
 *
 * Device built-ins provided: threadIdx, blockIdx, blockDim, gridDim, __syncthreads,
 * __shfl_xor_sync (32-bit types), __float_as_uint, __uint_as_float; __shared__ variables are
 * static, which is per block since blocks run one at a time, and hold NaN bytes when each
 * block starts. */
#ifndef PLUMB_CUEMU_KERNEL_H
#define PLUMB_CUEMU_KERNEL_H

#ifdef __cplusplus

/* Before cuda_runtime.h, which keeps these when they are defined. */
#define __global__
#define __device__
#define __host__
/* kernels run one at a time, under cuemu's lock, so a static serves every block; the
 * section lets the scheduler fill all of them with NaN bytes when a block starts */
#define __shared__ __attribute__((section("cuemu_shared"))) static
#define __forceinline__ inline

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuemu {

/* The running GPU thread's coordinates, set by the block scheduler. Plain globals, not
 * thread-locals: kernels run one at a time under cuemu's lock, and UBSan's null check on a
 * thread-local's address misfires after the linker rewrites the access (add -> lea). */
extern uint3 t_thread_idx, t_block_idx, t_block_dim, t_grid_dim;

/* __syncthreads: waits until every thread of the block has reached a barrier. */
void sync_block();
/* __shfl_xor_sync on 32 bits: the value of lane (lane ^ lane_mask) within groups of
 * `width` lanes; every lane named in mask must take part. */
uint32_t shfl_xor_bits(unsigned mask, uint32_t v, int lane_mask, int width);

/* Validates the launch configuration (a bad one sets the calling thread's last error to
 * cudaErrorInvalidConfiguration and queues nothing) and queues body on stream s: body runs
 * the kernel for the current GPU thread. `name` is the kernel's name for messages. */
void launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
            std::function<void()> body);

/* A kernel's pointer argument `index`: NULL or device memory that the stream's device may
 * touch, else fail() naming the kernel and the argument. */
void check_kernel_pointer(const char *name, int index, const void *p, cudaStream_t s);

template <class T>
static inline void check_kernel_arg(const char *name, int index, cudaStream_t s, const T &v)
{
    if constexpr (std::is_pointer_v<T>) {
        if (v) check_kernel_pointer(name, index, (const void *)v, s);
    } else {
        (void)name, (void)index, (void)s, (void)v;
    }
}

template <class... P> struct launcher {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;

    /* Arguments are converted to the kernel's parameter types and copied, as a launch does. */
    template <class... A> void operator()(A &&...a) const
    {
        auto args = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(a)...);
        int index = 0;
        std::apply([&](const auto &...v) { (check_kernel_arg(name, index++, stream, v), ...); },
                   *args);
        void (*k)(P...) = kernel;
        launch(name, grid, block, shmem, stream, [k, args] { std::apply(k, *args); });
    }
};

template <class... P>
static inline launcher<P...> make_launcher(const char *name, void (*kernel)(P...), dim3 grid,
                                           dim3 block, size_t shmem = 0, cudaStream_t s = 0)
{
    return launcher<P...>{name, kernel, grid, block, shmem, s};
}

}  // namespace cuemu

#define CUEMU_LAUNCH(k, ...) ::cuemu::make_launcher(#k, k, __VA_ARGS__)

#define threadIdx (::cuemu::t_thread_idx)
#define blockIdx (::cuemu::t_block_idx)
#define blockDim (::cuemu::t_block_dim)
#define gridDim (::cuemu::t_grid_dim)

static inline void __syncthreads(void) { ::cuemu::sync_block(); }

static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u = ::cuemu::shfl_xor_bits(mask, u, lane_mask, width);
    memcpy(&v, &u, 4);
    return v;
}
static inline int __shfl_xor_sync(unsigned mask, int v, int lane_mask, int width = 32)
{
    return (int)::cuemu::shfl_xor_bits(mask, (uint32_t)v, lane_mask, width);
}
static inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask, int width = 32)
{
    return ::cuemu::shfl_xor_bits(mask, v, lane_mask, width);
}

static inline unsigned __float_as_uint(float x)
{
    unsigned u;
    memcpy(&u, &x, 4);
    return u;
}
static inline float __uint_as_float(unsigned u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

#endif /* __cplusplus */
#endif
