/* backend.c: finds a compute backend by name (the CUDA backend in its plugin, loaded on
 * demand); host buffers for uploads. */
#include "exec/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/plugin.h"

const backend *backend_find(const char *name, plumb_err *err)
{
    if (name && !strcmp(name, "cpu")) return backend_cpu();
    if (name && !strcmp(name, "cpu-bf16")) return backend_cpu_bf16();
    if (name && !strncmp(name, "cuda", 4)) {
        /* "cuda", "cuda-tf32", "cuda-bf16": plumb-cuda.so, loaded now */
        char opt[96];
        snprintf(opt, sizeof opt, "--backend %.80s", name);
        const plugin_api *api = plugin_load("cuda", opt, err);
        return api ? api->backend_named(name, err) : NULL;
    }
    err_set(err, NULL, "--backend",
            "expected \"cpu\", \"cpu-bf16\", \"cuda\", \"cuda-tf32\" or \"cuda-bf16\" "
            "(got \"%s\")", name ? name : "");
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
