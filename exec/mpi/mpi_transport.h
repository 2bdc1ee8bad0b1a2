/* mpi_transport.h: the mpi transport (exec/transport.h's table) for CPU workers in separate
 * processes under mpirun: worker w is MPI rank w (one worker per rank).
 *
 *     mpirun --allow-run-as-root --oversubscribe -np 2 plumb train MODEL --schedule gpipe \
 *         --stages 2 --transport mpi
 *
 * How it moves data:
 * - a send copies the buffer to the host and posts MPI_Isend from that copy, so the caller
 *   may reuse its buffer at once (sends are buffered); copies are freed as their sends
 *   complete;
 * - a receive polls MPI_Iprobe for (from, tag) on a private duplicate of MPI_COMM_WORLD,
 *   checks the message's size, then receives it (MPI keeps order per sender and tag, and
 *   tags are (microbatch, stage, direction), so messages match like the local transport's);
 * - an all-reduce among a stage's replicas runs MPI_Iallreduce on a sub-communicator of
 *   the group's ranks, made once per group with MPI_Comm_create_group (collective over the
 *   group only);
 * - abort sends a short notice (a reserved tag) to every other rank; every wait polls for
 *   notices and gives up after timeout_s, so a failing or stalled rank ends the run with
 *   an error on every rank instead of a hang (a rank killed outright is mpirun's to
 *   notice: it then ends the job).
 * Summation order: a group of two sums a + b on both sides (as the local transport); larger
 * groups follow MPI's reduction order, which may differ from the local transport's in the
 * last bits.
 *
 * Built when MPI was found (the Makefile compiles exec/mpi/ with mpicc's flags). */
#ifndef PLUMB_EXEC_MPI_MPI_TRANSPORT_H
#define PLUMB_EXEC_MPI_MPI_TRANSPORT_H

#include "err.h"
#include "exec/transport.h"

/* Initializes MPI for plumb (MPI_Init_thread asking for MPI_THREAD_MULTIPLE: the worker
 * runs in a thread of its own) unless already initialized, and gives this process's rank,
 * the number of ranks, and the number of ranks on this node (they share its cores).
 * Returns 0, or -1 with err set (the MPI library offers less than MPI_THREAD_SERIALIZED). */
int mpi_session_begin(int *rank, int *size, int *node_size, plumb_err *err);

/* Ends the MPI session: MPI_Finalize when status is 0, or 2 (bad input, which every rank
 * finds alike before any message is exchanged); otherwise MPI_Abort with status, which ends
 * every rank of the job (a failed rank must not leave the others waiting). */
void mpi_session_end(int status);

/* Creates this rank's transport: nworkers = MPI size, self = MPI rank; collective over
 * MPI_COMM_WORLD (it duplicates it). timeout_s (<= 0: 120) bounds every wait. Returns the
 * transport (free with t->destroy, before mpi_session_end) or NULL with err set. */
transport *transport_mpi_create(double timeout_s, plumb_err *err);

/* Sums host buffers over all ranks of MPI_COMM_WORLD in place (MPI_Allreduce); the nccl
 * transport uses them as its allsum entries. 0 or -1 with err. */
int mpi_allsum_float(float *buf, size_t count, double timeout_s, plumb_err *err);
int mpi_allsum_double(double *buf, size_t count, double timeout_s, plumb_err *err);

#endif
