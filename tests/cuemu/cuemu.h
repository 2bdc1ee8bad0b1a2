/* cuemu.h: the internal interface between the parts of cuemu, plumb's CPU emulator of the
 * CUDA runtime, cuBLAS and cuDNN (tests/cuemu/). cuemu lets CI run the CUDA backend
 * (exec/cuda/) and its kernels without a GPU: the kernels are compiled by the host C++
 * compiler and run one block at a time, each GPU thread a fiber; library calls are computed
 * by plain reference loops. It is a test oracle, not a fast path: it checks what a GPU
 * would punish (host pointers handed to the device, arguments cuBLAS or cuDNN reject, work
 * read before the stream that makes it was waited for) and stops with one "cuemu: ..." line.
 *
 * Execution model: every asynchronous call is queued on its stream and runs as late as
 * CUDA allows (when the host waits for the stream, an event of it, or the device), so a
 * missing wait shows up as stale data. One recursive lock serializes the whole emulator;
 * queued work runs on whichever host thread waits for it.
 *
 * C++ only (the parts are C++; the code under test keeps calling the C API). */
#ifndef PLUMB_CUEMU_H
#define PLUMB_CUEMU_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>

namespace cuemu {

/* Prints "cuemu: <message>" on stderr and aborts: the GPU would fault, hang or compute
 * garbage here. Never returns. */
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The emulator's lock (recursive). Every C API entry point holds it while it runs. */
struct lock {
    lock();
    ~lock();
    lock(const lock &) = delete;
    lock &operator=(const lock &) = delete;
};

/* The calling host thread's current device (cudaSetDevice). */
int current_device();

/* The device of stream s; s == NULL (the legacy default stream) means the current device's
 * default stream. */
int stream_device(cudaStream_t s);

/* Queues op on stream s (NULL: the current device's default stream). `what` names the call
 * in messages ("cublasGemmEx"). The op runs later, in stream order, under the lock, on some
 * host thread, with the stream's device current; it must own copies of everything it reads
 * from the host. */
void enqueue(cudaStream_t s, const char *what, std::function<void()> op);

/* Checks that [p, p + bytes) lies inside one live cudaMalloc allocation that device `dev`
 * may touch (its own, or a peer's after cudaDeviceEnablePeerAccess). On failure calls
 * fail() naming `what` (the call) and `arg` (the argument: "A", "x"). bytes 0 checks p
 * alone. p == NULL fails. */
void check_device_range(const char *what, const char *arg, int dev, const void *p, size_t bytes);

/* The same as a query: 1 if the range is device memory that dev may touch, else 0. */
int is_device_range(int dev, const void *p, size_t bytes);

/* The device a library call (cuBLAS, cuDNN) runs on: its stream's, which must be the
 * device of the handle (`handle_device`), and its scaling factors alpha and beta must be host
 * memory (host pointer mode); else fail() naming `what`. */
int library_device(const char *what, int handle_device, cudaStream_t s, const void *alpha,
                   const void *beta);

/* Rounding used by the emulated tensor cores: fp32 to bf16 (to nearest, ties to even; NaN
 * stays NaN) and to TF32 (10 mantissa bits, to nearest, ties away from zero). Return the
 * rounded value as a float. */
float round_bf16(float x);
float round_tf32(float x);
/* bf16 bits <-> float. */
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float x);

}  // namespace cuemu

#endif
