/* cuemu_cublas.cc: cuemu's cuBLAS: handles (device, stream, math mode) and the two fp32
 * GEMM entry points plumb calls, cublasGemmEx and cublasGemmStridedBatchedEx, computed on
 * the CPU in stream order. Arguments are checked as cuBLAS documents them (a bad value is a
 * returned status); operands that are not live device memory stop the run (cuemu::fail),
 * as the GPU would fault on them. Pointer mode is host only: alpha and beta are read at the
 * call. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "cuemu.h"

/* The opaque handle type of <cublas_api.h>. */
struct cublasContext {
    int device;              /* the current device at cublasCreate */
    cudaStream_t stream;     /* NULL: the legacy default stream */
    cublasMath_t math_mode;  /* cublasSetMathMode's value, flags included */
};

namespace {

/* The handles created and not yet destroyed, so that a stale handle stops the run rather
 * than reading freed memory. */
std::unordered_set<const cublasContext *> &live_handles()
{
    static std::unordered_set<const cublasContext *> handles;
    return handles;
}

/* A handle argument as cuBLAS checks it: NULL is CUBLAS_STATUS_NOT_INITIALIZED (returns
 * false); a destroyed one stops the run. */
bool handle_ok(const char *what, const cublasContext *h)
{
    if (!h) return false;
    if (!live_handles().count(h))
        cuemu::fail("%s: handle %p was destroyed (or never created)", what, (const void *)h);
    return true;
}

/* How the emulated GEMM treats its fp32 operands before multiplying. */
enum class operand_rounding { exact, tf32, bf16 };

/* The operand rounding of compute type ct on a handle in math mode `mode`, or false when
 * the emulator does not support ct with fp32 matrices. CUBLAS_COMPUTE_32F follows the
 * handle: CUBLAS_TF32_TENSOR_OP_MATH lets it use TF32 tensor cores, any other mode keeps
 * fp32 (the deprecated CUBLAS_TENSOR_OP_MATH would allow fp16 down-conversion, which the
 * emulator does not model). The _PEDANTIC and _FAST_ types ignore the mode. */
bool rounding_for(cublasComputeType_t ct, cublasMath_t mode, operand_rounding *r)
{
    switch (ct) {
    case CUBLAS_COMPUTE_32F:
        *r = (mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH ? operand_rounding::tf32
                                                         : operand_rounding::exact;
        return true;
    case CUBLAS_COMPUTE_32F_PEDANTIC: *r = operand_rounding::exact; return true;
    case CUBLAS_COMPUTE_32F_FAST_TF32: *r = operand_rounding::tf32; return true;
    case CUBLAS_COMPUTE_32F_FAST_16BF: *r = operand_rounding::bf16; return true;
    default: return false;
    }
}

bool algo_known(cublasGemmAlgo_t algo)
{
    int a = (int)algo;
    return a == CUBLAS_GEMM_DEFAULT || (a >= CUBLAS_GEMM_ALGO0 && a <= CUBLAS_GEMM_ALGO23) ||
           (a >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && a <= CUBLAS_GEMM_ALGO15_TENSOR_OP) ||
           a == CUBLAS_GEMM_AUTOTUNE;
}

bool op_valid(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* Floats spanned by a column-major matrix of `rows` x `cols` (both >= 1) with leading
 * dimension ld: the last column starts ld (cols - 1) floats in. */
size_t span_floats(int rows, int cols, int ld)
{
    return (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
}

/* Address of batch entry i of a strided operand (strides are signed, in elements). */
template <typename T> T *entry(T *base, long long stride, int i)
{
    return reinterpret_cast<T *>(reinterpret_cast<uintptr_t>(base) +
                                 (uintptr_t)((long long)i * stride * (long long)sizeof(float)));
}

/* One queued GEMM: everything it needs, copied at the call. Column-major throughout. */
struct gemm_job {
    bool trans_a, trans_b;  /* op(X) is X^T (CUBLAS_OP_T or _C: the same for real data) */
    int m, n, k;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int lda, ldb, ldc;
    long long stride_a, stride_b, stride_c;
    int batch;
    operand_rounding rounding;
};

inline float rounded(float x, operand_rounding r)
{
    switch (r) {
    case operand_rounding::tf32: return cuemu::round_tf32(x);
    case operand_rounding::bf16: return cuemu::round_bf16(x);
    default: return x;
    }
}

/* The product is computed in tiles of kTileRows x kTileCols elements of C, each held in
 * registers for the whole sum over k: op(A) is packed into panels of kTileRows rows and op(B)
 * into panels of kTileCols columns, each stored k-major and padded with zeros, so that every
 * step of the sum reads two 4-float vectors of A and kTileCols floats of B. (GCC and Clang
 * vector types: at -O2 neither compiler vectorizes the plain loop.) */
constexpr int kTileRows = 8;
constexpr int kTileCols = 4;
typedef float float4v __attribute__((vector_size(16)));
static_assert(kTileRows == 8, "the kernel holds a tile column in two float4v");

/* Packs the rows (or, for B, columns) [first, first + tile) of an operand into a panel:
 * panel[p * tile + t] = element(first + t, p) rounded, or 0 past `count`. */
template <int tile, typename Element>
void pack_panel(float *panel, int first, int count, int k, operand_rounding r, Element element)
{
    for (int p = 0; p < k; p++)
        for (int t = 0; t < tile; t++)
            panel[(size_t)p * tile + t] =
                first + t < count ? rounded(element(first + t, p), r) : 0.0f;
}

/* Runs the job: for each batch entry, op(A) and op(B) are packed once (rounded as the
 * compute type says), then C = alpha op(A) op(B) + beta C with each element's products
 * summed in float, in order of k (a multiply and an add each rounded: the GPU's FMA rounds
 * once, a difference far below any test's tolerance). beta == 0 writes C without
 * reading it; alpha == 0 or k == 0 skips the product (BLAS: A and B are not referenced). */
void run_gemm(const gemm_job &j)
{
    const int m = j.m, n = j.n, k = j.k;
    const bool product = k > 0 && j.alpha != 0.0f;
    const int row_panels = (m + kTileRows - 1) / kTileRows;
    const int col_panels = (n + kTileCols - 1) / kTileCols;
    std::vector<float> a_packed(product ? (size_t)row_panels * kTileRows * k : 0);
    std::vector<float> b_packed(product ? (size_t)col_panels * kTileCols * k : 0);
    for (int e = 0; e < j.batch; e++) {
        const float *A = entry(j.A, j.stride_a, e), *B = entry(j.B, j.stride_b, e);
        float *C = entry(j.C, j.stride_c, e);
        if (product) {
            auto a_at = [&](int i, int p) {  /* op(A)(i, p) */
                return j.trans_a ? A[(size_t)i * j.lda + p] : A[(size_t)p * j.lda + i];
            };
            auto b_at = [&](int c, int p) {  /* op(B)(p, c) */
                return j.trans_b ? B[(size_t)p * j.ldb + c] : B[(size_t)c * j.ldb + p];
            };
            for (int t = 0; t < row_panels; t++)
                pack_panel<kTileRows>(&a_packed[(size_t)t * kTileRows * k], t * kTileRows, m, k,
                                      j.rounding, a_at);
            for (int t = 0; t < col_panels; t++)
                pack_panel<kTileCols>(&b_packed[(size_t)t * kTileCols * k], t * kTileCols, n, k,
                                      j.rounding, b_at);
        }
        for (int cp = 0; cp < col_panels; cp++)
            for (int rp = 0; rp < row_panels; rp++) {
                float4v sum[kTileCols][2] = {};
                if (product) {
                    const float *a = &a_packed[(size_t)rp * kTileRows * k];
                    const float *b = &b_packed[(size_t)cp * kTileCols * k];
                    for (int p = 0; p < k; p++, a += kTileRows, b += kTileCols) {
                        float4v a_lo, a_hi;
                        memcpy(&a_lo, a, sizeof a_lo);
                        memcpy(&a_hi, a + 4, sizeof a_hi);
                        for (int c = 0; c < kTileCols; c++) {
                            sum[c][0] += a_lo * b[c];
                            sum[c][1] += a_hi * b[c];
                        }
                    }
                }
                const int rows = std::min(kTileRows, m - rp * kTileRows);
                const int cols = std::min(kTileCols, n - cp * kTileCols);
                for (int c = 0; c < cols; c++) {
                    float *out = C + (size_t)(cp * kTileCols + c) * j.ldc + rp * kTileRows;
                    for (int i = 0; i < rows; i++) {
                        const float v = j.alpha * sum[c][i / 4][i % 4];
                        out[i] = j.beta == 0.0f ? v : v + j.beta * out[i];
                    }
                }
            }
    }
}

/* The shared body of both GEMM entry points (cublasGemmEx is the batch of one). Checks the
 * arguments in cuBLAS's order (handle, values, types), the operands' memory, and queues the
 * product on the handle's stream. */
cublasStatus_t gemm(const char *what, cublasHandle_t handle, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const void *alpha,
                    const void *A, cudaDataType Atype, int lda, long long strideA, const void *B,
                    cudaDataType Btype, int ldb, long long strideB, const void *beta, void *C,
                    cudaDataType Ctype, int ldc, long long strideC, int batchCount,
                    cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    if (!handle_ok(what, handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    if (m < 0 || n < 0 || k < 0 || batchCount < 0 || !op_valid(transa) || !op_valid(transb) ||
        lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m) ||
        !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    operand_rounding rounding;
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F ||
        !rounding_for(computeType, handle->math_mode, &rounding) || !algo_known(algo))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS;

    const int dev = cuemu::library_device(what, handle->device, handle->stream, alpha, beta);

    gemm_job j;
    j.trans_a = ta, j.trans_b = tb;
    j.m = m, j.n = n, j.k = k;
    j.alpha = *static_cast<const float *>(alpha);
    j.beta = *static_cast<const float *>(beta);
    j.A = static_cast<const float *>(A), j.B = static_cast<const float *>(B);
    j.C = static_cast<float *>(C);
    j.lda = lda, j.ldb = ldb, j.ldc = ldc;
    j.stride_a = strideA, j.stride_b = strideB, j.stride_c = strideC;
    j.batch = batchCount;
    j.rounding = rounding;

    /* every operand of every batch entry must be device memory the stream's device reaches */
    const size_t a_bytes = k ? span_floats(ta ? k : m, ta ? m : k, lda) * sizeof(float) : 0;
    const size_t b_bytes = k ? span_floats(tb ? n : k, tb ? k : n, ldb) * sizeof(float) : 0;
    const size_t c_bytes = span_floats(m, n, ldc) * sizeof(float);
    auto check_operands = [j, a_bytes, b_bytes, c_bytes, dev, what]() {
        for (int e = 0; e < j.batch; e++) {
            if (a_bytes)
                cuemu::check_device_range(what, "A", dev, entry(j.A, j.stride_a, e), a_bytes);
            if (b_bytes)
                cuemu::check_device_range(what, "B", dev, entry(j.B, j.stride_b, e), b_bytes);
            cuemu::check_device_range(what, "C", dev, entry(j.C, j.stride_c, e), c_bytes);
        }
    };
    check_operands();
    /* checked again when it runs: a buffer freed before the queued GEMM ran is a fault too */
    cuemu::enqueue(handle->stream, what, [j, check_operands]() {
        check_operands();
        run_gemm(j);
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    cuemu::lock hold;
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    cublasContext *h = new cublasContext;
    h->device = cuemu::current_device();
    h->stream = NULL;
    h->math_mode = CUBLAS_DEFAULT_MATH;
    live_handles().insert(h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

/* Like the real one, synchronizes the handle's device first (cuBLAS documents that
 * cublasDestroy implies cudaDeviceSynchronize); the current device is kept. */
cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    cuemu::lock hold;
    if (!handle_ok("cublasDestroy", handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int current = cuemu::current_device();
    cudaSetDevice(handle->device);
    cudaDeviceSynchronize();
    cudaSetDevice(current);
    live_handles().erase(handle);
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

/* The stream is only recorded; GEMMs check that it belongs to the handle's device. */
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t streamId)
{
    cuemu::lock hold;
    if (!handle_ok("cublasSetStream", handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

/* Accepts the modes of <cublas_api.h>, optionally with
 * CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION; anything else is INVALID_VALUE. */
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    cuemu::lock hold;
    if (!handle_ok("cublasSetMathMode", handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    switch (base) {
    case CUBLAS_DEFAULT_MATH:
    case CUBLAS_TENSOR_OP_MATH:
    case CUBLAS_PEDANTIC_MATH:
    case CUBLAS_TF32_TENSOR_OP_MATH:
    case CUBLAS_FP32_EMULATED_BF16X9_MATH:
    case CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH: break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    cuemu::lock hold;
    if (!handle_ok("cublasGetMathMode", handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

/* C = alpha op(A) op(B) + beta C, column-major, fp32 matrices (see gemm above). */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
    cuemu::lock hold;
    return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B,
                Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

/* batchCount products; entry i uses A + i strideA, B + i strideB, C + i strideC (strides
 * in elements, signed). */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    cuemu::lock hold;
    return gemm("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype,
                lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                computeType, algo);
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the cuBLAS handle is not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "a cuBLAS resource could not be allocated";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was passed to cuBLAS";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a feature the call needs";
    case CUBLAS_STATUS_MAPPING_ERROR: return "access to GPU memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "a GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "a license error occurred";
    }
    return "an unknown cuBLAS status";
}

}  // extern "C"
