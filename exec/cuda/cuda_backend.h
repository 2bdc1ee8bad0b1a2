/* cuda_backend.h: the CUDA backend of the executor (plain C; the kernels live in .cu files
 * behind exec/cuda/cuda_kernels.h). GEMMs go through cuBLAS, convolutions through cuDNN
 * (an im2col + cuBLAS path where plumb was built without cuDNN), everything else through
 * plumb's own kernels. Every context owns one CUDA stream, so each pipeline stage (worker)
 * runs on its own stream; several contexts may share a GPU.
 *
 * Precision: every tensor in memory is fp32 (weights, activations, gradients, optimizer
 * state), so the master weights are always fp32. What changes is the arithmetic of the
 * GEMMs and convolutions:
 *   CUDA_FP32  plain fp32 (TF32 off in cuBLAS and cuDNN): the mode that is checked against
 *              the CPU backend;
 *   CUDA_TF32  TF32 tensor cores for GEMMs and convolutions (10-bit mantissa inputs, fp32
 *              accumulation);
 *   CUDA_BF16  bf16 compute with fp32 master weights: GEMM inputs are rounded to bf16 on
 *              the fly (cuBLAS CUBLAS_COMPUTE_32F_FAST_16BF, fp32 accumulation), and
 *              convolutions run on bf16 copies of their inputs (cuDNN, fp32 accumulation);
 *              element-wise layers, normalization, softmax, the loss and the optimizer
 *              stay fp32. */
#ifndef PLUMB_EXEC_CUDA_BACKEND_H
#define PLUMB_EXEC_CUDA_BACKEND_H

#include <stddef.h>

#include "exec/backend.h"

typedef enum cuda_precision { CUDA_FP32 = 0, CUDA_TF32, CUDA_BF16, CUDA_NPRECISIONS } cuda_precision;

/* The CUDA backend in fp32 (TF32 off), named "cuda". create() fails with
 * "no CUDA GPU found (cudaGetDeviceCount: ...)" on a machine without a usable GPU. */
const backend *backend_cuda(void);

/* The CUDA backend with the given arithmetic, named "cuda" (fp32), "cuda-tf32" or
 * "cuda-bf16". Returns NULL for an out-of-range value. */
const backend *backend_cuda_precision(cuda_precision p);

/* Parses "fp32", "tf32" or "bf16". Returns 0, or -1 with err set (path "--precision"). */
int cuda_precision_parse(const char *s, cuda_precision *p, plumb_err *err);
const char *cuda_precision_name(cuda_precision p);

/* Number of usable CUDA GPUs (>= 1), or -1 with err set to
 * "no CUDA GPU found (cudaGetDeviceCount: <CUDA's reason>)". Never aborts, so tests and
 * `plumb train --backend cuda` can probe for a GPU and skip or fail cleanly. */
int cuda_device_count(plumb_err *err);

/* Writes "NVIDIA H200, sm_90, 139.8 GiB, driver 13.0" for `device` into buf (n bytes).
 * Returns 0, or -1 with err set. */
int cuda_device_describe(int device, char *buf, size_t n, plumb_err *err);

/* The CUDA device a context of this backend runs on. */
int cuda_ctx_device(const bk_ctx *c);

/* --- hand-offs between contexts (the local transport on GPUs) ------------------------------
 * A mark (backend.h's bk_mark) is a CUDA event. These five are the backend table's mark_new,
 * mark_free, mark_record, mark_wait and copy_peer entries, with which the local transport
 * moves an activation from stage s (context `from`, possibly on another GPU) to stage s+1
 * (context `to`) without blocking any host thread:
 *     sender:   copy into a staging buffer, cuda_mark_record(from, sent), post it
 *     receiver: cuda_mark_wait(to, sent);             orders the copy after the producer
 *               cuda_copy_peer(to, dst, from, staging, bytes);
 *               cuda_mark_record(to, done);           then returns the staging buffer
 *     sender:   cuda_mark_wait(from, done);           before filling it again
 * A wait must be queued after the record it waits for (the transport's host-side hand-shake
 * guarantees that); waiting on a mark never recorded is a no-op. */
/* A new mark on c's device; NULL with err set on failure. Free with cuda_mark_free. */
bk_mark *cuda_mark_new(bk_ctx *c, plumb_err *err);
void cuda_mark_free(bk_mark *m); /* NULL allowed */
/* Records m after all work queued so far on c's stream. */
void cuda_mark_record(bk_ctx *c, bk_mark *m);
/* Makes c's stream wait (on the device, the host does not block) for m's last record. */
void cuda_mark_wait(bk_ctx *c, bk_mark *m);
/* Copies bytes from src (a buffer of context `from`) to dst (a buffer of context `to`) on
 * to's stream, directly over NVLink/PCIe where peer access is possible, else staged by the
 * driver. Asynchronous; failures are recorded in `to` (reported by its next sync). */
void cuda_copy_peer(bk_ctx *to, void *dst, const bk_ctx *from, const void *src, size_t bytes);

#endif
