/* mpi_plugin.c: plumb-mpi.so's entry (exec/plugin.h): the mpi transport and the MPI session
 * every transport across processes starts with. */
#include "exec/mpi/mpi_transport.h"
#include "exec/plugin.h"

const plugin_api *plumb_plugin_mpi(void);

static transport *mpi_create(bk_ctx *c, double timeout_s, plumb_err *err)
{
    (void)c; /* CPU workers: the transport stages through host memory */
    return transport_mpi_create(timeout_s, err);
}

/* The plugin's table; static, valid for the life of the process. */
const plugin_api *plumb_plugin_mpi(void)
{
    static const plugin_api api = {
        PLUGIN_API_INIT("mpi"),
        .session_begin = mpi_session_begin,
        .session_end = mpi_session_end,
        .transport_create = mpi_create,
    };
    return &api;
}
