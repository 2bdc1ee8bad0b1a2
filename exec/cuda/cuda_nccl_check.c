/* cuda_nccl_check.c: the NCCL error check (cuda_internal.h's cuda_check_nccl), kept apart
 * from the CUDA backend's other checks: it belongs to plumb-nccl.so, so that plumb-cuda.so
 * does not need libnccl. */
#include "exec/cuda/cuda_internal.h"

#ifdef PLUMB_HAVE_NCCL
#include <nccl.h>
#endif

int cuda_check_nccl(plumb_err *e, int code, const char *call, const char *file, int line)
{
#ifdef PLUMB_HAVE_NCCL
    if (code == ncclSuccess) return 0;
    const char *hint = "";
    switch ((ncclResult_t)code) {
    case ncclUnhandledCudaError:
        hint = "a CUDA call inside NCCL failed; run with NCCL_DEBUG=WARN for details";
        break;
    case ncclSystemError:
        hint = "a system call or network operation failed (a peer died, a firewall, or a "
               "wrong NCCL_SOCKET_IFNAME); run with NCCL_DEBUG=INFO";
        break;
    case ncclInternalError:
        hint = "NCCL hit an internal error; run with NCCL_DEBUG=INFO";
        break;
    case ncclInvalidArgument:
        hint = "a count, rank or buffer passed to NCCL is invalid";
        break;
    case ncclInvalidUsage:
        hint = "NCCL calls were made in the wrong order (mismatched sends and receives "
               "between ranks?)";
        break;
    case ncclRemoteError:
        hint = "a remote rank failed or its connection broke";
        break;
    default:
        break;
    }
    return cuda_check_fail(e, "NCCL", call, file, line, ncclGetErrorString((ncclResult_t)code),
                           hint);
#else
    if (code == 0) return 0;
    return cuda_check_fail(e, "NCCL", call, file, line, "status", "plumb was built without NCCL");
#endif
}
