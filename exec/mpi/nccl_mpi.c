/* nccl_mpi.c: the MPI bootstrap of the nccl transport (see nccl_mpi.h). */
#include "exec/mpi/nccl_mpi.h"

#if defined(PLUMB_HAVE_NCCL) && defined(PLUMB_HAVE_CUDA)

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "exec/cuda/cuda_backend.h"

/* MPI's message for code rc. */
static int mpi_fail(plumb_err *err, const char *call, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return err_set(err, NULL, NULL, "MPI error: %s: %s", call, msg);
}

int nccl_mpi_local_device(int strict, plumb_err *err)
{
    int ngpu = cuda_device_count(err);
    if (ngpu < 0) return -1;
    MPI_Comm node;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_split_type", rc);
    int lrank = 0, lsize = 1;
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    MPI_Comm_free(&node);
    if (strict && lsize > ngpu)
        return err_set(err, NULL, NULL,
                       "nccl transport: %d ranks on this node but %d GPU(s); start one rank "
                       "per GPU (mpirun -np N -H host:GPUS,...)",
                       lsize, ngpu);
    return lrank % ngpu;
}

nccl_comm *nccl_mpi_open(bk_ctx *c, double timeout_s, plumb_err *err)
{
    int rank = 0, size = 1, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* slot 0 of buf: 1 when rank 0 made the id; the id follows */
    unsigned char buf[1 + NCCL_ID_BYTES];
    memset(buf, 0, sizeof buf);
    plumb_err mine = {{0}};
    if (rank == 0) buf[0] = nccl_make_id(buf + 1, &mine) == 0;
    if ((rc = MPI_Bcast(buf, (int)sizeof buf, MPI_BYTE, 0, MPI_COMM_WORLD)) != MPI_SUCCESS) {
        mpi_fail(err, "MPI_Bcast(ncclUniqueId)", rc);
        return NULL;
    }
    if (!buf[0]) {
        if (rank == 0) err_set(err, NULL, NULL, "%s", mine.msg);
        else err_set(err, NULL, NULL, "nccl transport: rank 0 could not create the NCCL id");
        return NULL;
    }
    return nccl_open(c, buf + 1, size, rank, timeout_s, err);
}

#else /* MPI without NCCL */

static int missing(plumb_err *err)
{
    return err_set(err, NULL, NULL,
                   "the nccl transport is not built into this binary (it needs CUDA, NCCL and "
                   "MPI at build time)");
}

int nccl_mpi_local_device(int strict, plumb_err *err)
{
    (void)strict;
    return missing(err);
}

nccl_comm *nccl_mpi_open(bk_ctx *c, double timeout_s, plumb_err *err)
{
    (void)c, (void)timeout_s;
    missing(err);
    return NULL;
}

#endif
