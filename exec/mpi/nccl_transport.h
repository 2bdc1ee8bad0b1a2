/* nccl_transport.h: the nccl transport (exec/transport.h's table) for one process per GPU
 * under mpirun: worker w is MPI rank w and runs on its own GPU.
 *
 * How it moves data:
 * - every ordered pair of ranks (a -> b) has its own two-rank NCCL communicator, made at
 *   creation (ids exchanged with one MPI_Alltoall), with a stream on each side. A pair's
 *   channel only ever carries a -> b messages, so the two directions between a and b can
 *   never wait on each other (no send/receive deadlock whatever order the schedule posts
 *   them in);
 * - a send queues a 16-byte header (tag, bytes) and the payload on the pair's stream after
 *   the worker's queued work; the host does not wait. `send` first copies the buffer into
 *   a staging buffer (so the caller may reuse it at once: sends are buffered, as the
 *   interface asks), `send_lent` sends straight from it. `reserve` allocates staging
 *   buffers in the worker's context before a run (they count in its peak memory) and
 *   `release` frees them once the rank's sends have been delivered; staging beyond them
 *   comes from the stream-ordered allocator;
 * - a receive reads headers in arrival order; a message with another tag is set aside in
 *   device memory until its receive comes, so messages match by (from, to, tag) like the
 *   local transport's. The host blocks until the payload is in place;
 * - an all-reduce makes (once per group, through MPI point-to-point among the members
 *   only) a communicator of the group and runs ncclAllReduce on a stream of its own,
 *   ordered after the worker's queued work and before its later work;
 * - every wait polls NCCL's asynchronous errors and gives up after timeout_s: a dead peer
 *   aborts the communicators and ends the run with an error, never a hang.
 * Memory: 2 (ranks - 1) two-rank communicators per rank (NCCL buffers each; for many ranks
 * lower NCCL_MAX_NCHANNELS). MPI must allow calls from the worker's thread
 * (MPI_Init_thread with MPI_THREAD_SERIALIZED when the worker is not the main thread).
 *
 * Built when CUDA, NCCL and MPI were all found; elsewhere create fails with a message
 * naming what is missing. */
#ifndef PLUMB_EXEC_MPI_NCCL_TRANSPORT_H
#define PLUMB_EXEC_MPI_NCCL_TRANSPORT_H

#include "exec/backend.h"
#include "exec/transport.h"

/* Creates the transport of this rank: nworkers = MPI size, self = MPI rank; c is this
 * rank's CUDA context (its device); collective over MPI_COMM_WORLD. timeout_s (<= 0: 120)
 * bounds every wait. Returns the transport (free with t->destroy) or NULL with err set. */
transport *transport_nccl_create(bk_ctx *c, double timeout_s, plumb_err *err);

#endif
