/* backend.c: finds a compute backend by name among those built into this binary; host
 * buffers for uploads. */
#include "exec/backend.h"

#include <stdlib.h>
#include <string.h>

#ifdef PLUMB_HAVE_CUDA
/* A strong reference: it pulls the CUDA backend's objects out of libplumb.a (a weak one
 * would not, and the backend would look missing). */
#include "exec/cuda/cuda_backend.h"
#endif

const backend *backend_find(const char *name, plumb_err *err)
{
    if (name && !strcmp(name, "cpu")) return backend_cpu();
    if (name && !strcmp(name, "cpu-bf16")) return backend_cpu_bf16();
#ifdef PLUMB_HAVE_CUDA
    if (name && !strcmp(name, "cuda")) return backend_cuda();
    /* "cuda-tf32", "cuda-bf16": the CUDA backend with TF32 or bf16 arithmetic */
    for (int p = 0; p < CUDA_NPRECISIONS; p++)
        if (name && !strcmp(name, backend_cuda_precision((cuda_precision)p)->name))
            return backend_cuda_precision((cuda_precision)p);
    err_set(err, NULL, "--backend",
            "expected \"cpu\", \"cpu-bf16\", \"cuda\", \"cuda-tf32\" or \"cuda-bf16\" "
            "(got \"%s\")", name ? name : "");
#else
    if (name && !strcmp(name, "cuda"))
        err_set(err, NULL, "--backend",
                "the CUDA backend is not built into this binary (nvcc was not found at build "
                "time); expected \"cpu\" or \"cpu-bf16\"");
    else
        err_set(err, NULL, "--backend", "expected \"cpu\" or \"cpu-bf16\" (got \"%s\")",
                name ? name : "");
#endif
    return NULL;
}

void *bk_host_alloc(const backend *bk, bk_ctx *c, size_t bytes, plumb_err *err)
{
    if (bk->host_alloc) return bk->host_alloc(c, bytes, err);
    void *p = malloc(bytes ? bytes : 1);
    if (!p) err_set(err, NULL, NULL, "out of memory (%zu bytes of host memory)", bytes);
    return p;
}

void bk_host_free(const backend *bk, void *p)
{
    if (bk->host_free) bk->host_free(p);
    else free(p);
}
