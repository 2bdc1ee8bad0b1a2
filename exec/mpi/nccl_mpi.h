/* nccl_mpi.h: bootstrapping the nccl transport under mpirun: one process per GPU, the
 * ncclUniqueId made on rank 0 and shared with MPI_Bcast, each rank's GPU chosen by its rank
 * among the ranks on the same node. Built when both MPI and NCCL were found; elsewhere the
 * functions fail with a message naming what is missing.
 *
 *     mpirun -np 8 -H host1:4,host2:4 plumb train --transport nccl ...
 *
 * MPI itself (MPI_Init / MPI_Finalize) is the caller's. */
#ifndef PLUMB_EXEC_MPI_NCCL_MPI_H
#define PLUMB_EXEC_MPI_NCCL_MPI_H

#include "err.h"
#include "exec/backend.h"
#include "exec/cuda/cuda_nccl.h"

/* The CUDA device this rank should use: its index among the ranks of its node
 * (MPI_COMM_TYPE_SHARED) modulo the node's GPU count. Returns it, or -1 with err set (no
 * GPU, MPI failure, or more ranks on the node than GPUs when strict is set). */
int nccl_mpi_local_device(int strict, plumb_err *err);

/* Joins one communicator over all ranks of MPI_COMM_WORLD on context c (a CUDA context of
 * this rank's GPU): rank 0 makes the id, MPI_Bcast shares it, every rank joins within
 * timeout_s seconds. Collective over MPI_COMM_WORLD. Returns the communicator or NULL with
 * err set (on every rank alike when the id could not be made). */
nccl_comm *nccl_mpi_open(bk_ctx *c, double timeout_s, plumb_err *err);

#endif
