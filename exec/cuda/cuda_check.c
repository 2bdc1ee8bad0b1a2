/* cuda_check.c: the CUDA backend's error checks: each failing call becomes one line naming
 * the library, the call as written, the file and line, the library's own error string and a
 * hint about what usually causes it. */
#include "exec/cuda/cuda_internal.h"

#include <stdio.h>

const char *cuda_hint_rt(int code)
{
    switch ((cudaError_t)code) {
    case cudaErrorNoDevice:
        return "no CUDA GPU is visible; check nvidia-smi and CUDA_VISIBLE_DEVICES, or run "
               "with --backend cpu";
    case cudaErrorInsufficientDriver:
        return "the NVIDIA driver is missing or older than the CUDA runtime plumb was built "
               "with; run with --backend cpu or update the driver";
    case cudaErrorInvalidDevice:
        return "the device index is beyond the GPUs visible to this process";
    case cudaErrorMemoryAllocation:
        return "the GPU is out of memory; use a smaller microbatch, fewer stages per GPU, "
               "or more GPUs";
    case cudaErrorInvalidValue:
        return "a size or pointer is invalid (a tensor shape that does not match its "
               "buffer?)";
    case cudaErrorIllegalAddress:
        return "a kernel read or wrote outside its buffers; rerun with compute-sanitizer "
               "to find it";
    case cudaErrorLaunchOutOfResources:
        return "too many registers or threads for this kernel on this GPU";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return "plumb's kernels are built for sm_90 and sm_80 with compute_75 PTX, which "
               "this GPU or its driver cannot load; update the driver, or rebuild with "
               "NVCC_ARCH naming this GPU's architecture (-gencode arch=compute_XX,code=sm_XX)";
    case cudaErrorPeerAccessUnsupported:
        return "these GPUs cannot reach each other directly; copies are staged through "
               "host memory";
    case cudaErrorECCUncorrectable:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
        return "the GPU reported a hardware fault; check nvidia-smi -q and dmesg";
    default:
        return "";
    }
}

int cuda_check_fail(plumb_err *e, const char *lib, const char *call, const char *file,
                    int line, const char *what, const char *hint)
{
    if (!e) return -1;
    return err_set(e, NULL, NULL, "%s error: %s at %s:%d: %s%s%s", lib, call, file, line, what,
                   hint && *hint ? "; hint: " : "", hint ? hint : "");
}

int cuda_check_rt(plumb_err *e, int code, const char *call, const char *file, int line)
{
    if (code == cudaSuccess) return 0;
    char what[256];
    snprintf(what, sizeof what, "%s (%s)", cudaGetErrorString((cudaError_t)code),
             cudaGetErrorName((cudaError_t)code));
    return cuda_check_fail(e, "CUDA", call, file, line, what, cuda_hint_rt(code));
}

int cuda_check_blas(plumb_err *e, int code, const char *call, const char *file, int line)
{
    if (code == CUBLAS_STATUS_SUCCESS) return 0;
    const char *hint = "";
    switch ((cublasStatus_t)code) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
        hint = "cuBLAS could not start: no GPU, a driver problem, or no memory left for its "
               "workspace";
        break;
    case CUBLAS_STATUS_ALLOC_FAILED:
        hint = "the GPU is out of memory";
        break;
    case CUBLAS_STATUS_INVALID_VALUE:
        hint = "a GEMM dimension or leading dimension is invalid (a shape mismatch?)";
        break;
    case CUBLAS_STATUS_ARCH_MISMATCH:
        hint = "this GPU lacks the requested math mode (TF32 and bf16 need sm_80 or newer)";
        break;
    case CUBLAS_STATUS_EXECUTION_FAILED:
        hint = "a GPU kernel failed; an earlier error may be the cause";
        break;
    default:
        break;
    }
    char what[256];
    snprintf(what, sizeof what, "%s (%s)", cublasGetStatusString((cublasStatus_t)code),
             cublasGetStatusName((cublasStatus_t)code));
    return cuda_check_fail(e, "cuBLAS", call, file, line, what, hint);
}

int cuda_check_dnn(plumb_err *e, int code, const char *call, const char *file, int line)
{
#ifdef PLUMB_HAVE_CUDNN
    if (code == CUDNN_STATUS_SUCCESS) return 0;
    const char *hint = "";
    switch ((cudnnStatus_t)code) {
    case CUDNN_STATUS_NOT_INITIALIZED:
        hint = "cuDNN could not start: no GPU, or its libraries (libcudnn_*.so) do not match";
        break;
    case CUDNN_STATUS_ALLOC_FAILED:
        hint = "the GPU is out of memory";
        break;
    case CUDNN_STATUS_BAD_PARAM:
        hint = "a convolution shape or descriptor is invalid";
        break;
    case CUDNN_STATUS_NOT_SUPPORTED:
        hint = "cuDNN has no algorithm for this shape, data type and math mode; try "
               "--precision fp32";
        break;
    default:
        break;
    }
    return cuda_check_fail(e, "cuDNN", call, file, line, cudnnGetErrorString((cudnnStatus_t)code),
                      hint);
#else
    if (code == 0) return 0;
    return cuda_check_fail(e, "cuDNN", call, file, line, "status", "plumb was built without cuDNN");
#endif
}
