/* cuda_plugin.c: plumb-cuda.so's entry (exec/plugin.h): the CUDA backend's three tables,
 * "cuda", "cuda-tf32" and "cuda-bf16". */
#include <string.h>

#include "exec/cuda/cuda_backend.h"
#include "exec/plugin.h"

const plugin_api *plumb_plugin_cuda(void);

static const backend *cuda_named(const char *name, plumb_err *err)
{
    for (int p = 0; p < CUDA_NPRECISIONS; p++) {
        const backend *b = backend_cuda_precision((cuda_precision)p);
        if (name && !strcmp(name, b->name)) return b;
    }
    err_set(err, NULL, "--backend",
            "expected \"cuda\", \"cuda-tf32\" or \"cuda-bf16\" (got \"%s\")", name ? name : "");
    return NULL;
}

/* The plugin's table; static, valid for the life of the process. */
const plugin_api *plumb_plugin_cuda(void)
{
    static const plugin_api api = {PLUGIN_API_INIT("cuda"), .backend_named = cuda_named};
    return &api;
}
