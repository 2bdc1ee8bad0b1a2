/* nccl_plugin.c: plumb-nccl.so's entry (exec/plugin.h): the nccl transport, one process per
 * GPU under mpirun; the MPI session comes from plumb-mpi.so, which it links. */
#include "exec/mpi/mpi_transport.h"
#include "exec/mpi/nccl_mpi.h"
#include "exec/mpi/nccl_transport.h"
#include "exec/plugin.h"

const plugin_api *plumb_plugin_nccl(void);

/* The plugin's table; static, valid for the life of the process. */
const plugin_api *plumb_plugin_nccl(void)
{
    static const plugin_api api = {
        PLUGIN_API_INIT("nccl"),
        .session_begin = mpi_session_begin,
        .session_end = mpi_session_end,
        .local_device = nccl_mpi_local_device,
        .transport_create = transport_nccl_create,
    };
    return &api;
}
