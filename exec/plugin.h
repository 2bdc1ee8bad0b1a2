/* plugin.h: the parts of plumb that need GPU or MPI libraries (the CUDA backend, the mpi and
 * nccl transports) are shared objects next to the binary, loaded only when a command asks
 * for them, so that planning, simulation and the dashboard never map cuBLAS, cuDNN, NCCL or
 * MPI. Each plugin file plumb-NAME.so exports one function, plumb_plugin_NAME, returning its
 * table below.
 *
 *     plumb-cuda.so   backends "cuda", "cuda-tf32", "cuda-bf16" (cuBLAS, cuDNN, CUDA runtime)
 *     plumb-mpi.so    transport "mpi" (libmpi)
 *     plumb-nccl.so   transport "nccl" (NCCL; needs plumb-cuda.so and plumb-mpi.so)
 *
 * A program linked with a plugin's objects (the tests of the CUDA backend) uses them
 * directly: plugin_load finds its function linked in and opens no file. */
#ifndef PLUMB_EXEC_PLUGIN_H
#define PLUMB_EXEC_PLUGIN_H

#include "err.h"
#include "exec/backend.h"
#include "exec/transport.h"

#define PLUGIN_ABI 1 /* raise when plugin_api's meaning changes */

typedef struct plugin_api {
    int abi;                  /* PLUGIN_ABI */
    unsigned api_size;        /* sizeof(plugin_api), sizeof(backend), sizeof(transport) as */
    unsigned backend_size;    /* the plugin was built with: a plugin of another build of */
    unsigned transport_size;  /* plumb is refused */
    const char *name;         /* "cuda", "mpi", "nccl" */

    /* backends: the one named `name`, or NULL with err set naming those it has */
    const backend *(*backend_named)(const char *name, plumb_err *err);

    /* transports across processes (mpi, nccl; NULL elsewhere) */
    /* Starts MPI (once per process) and gives this process's rank, the number of ranks and
     * the ranks on this node. 0, or -1 with err set. */
    int (*session_begin)(int *rank, int *size, int *node_size, plumb_err *err);
    /* Ends MPI: finalizes on status 0 or 2, else aborts the job with status. */
    void (*session_end)(int status);
    /* nccl: the CUDA device this rank should use, or -1 with err set; NULL for mpi. */
    int (*local_device)(int strict, plumb_err *err);
    /* This rank's transport: collective over all ranks. c: the rank's CUDA context (nccl),
     * NULL for mpi. NULL with err set on failure; free with t->destroy. */
    transport *(*transport_create)(bk_ctx *c, double timeout_s, plumb_err *err);
} plugin_api;

#define PLUGIN_API_INIT(nm)                                                                \
    .abi = PLUGIN_ABI, .api_size = sizeof(plugin_api), .backend_size = sizeof(backend),  \
    .transport_size = sizeof(transport), .name = (nm)

/* Loads plugin `name` ("cuda", "mpi" or "nccl") from plumb-NAME.so in the folder of the
 * running binary (/proc/self/exe), unless its objects are linked into the program. `opt`
 * names what asked for it in messages ("--backend cuda"). Returns its table (valid until
 * the process ends: plugins are never unloaded), or NULL with err set to one line: the
 * plugin was not built, its file is missing, a library it needs is missing (the loader's
 * own words, naming the library), or it belongs to another build. */
const plugin_api *plugin_load(const char *name, const char *opt, plumb_err *err);

#endif
