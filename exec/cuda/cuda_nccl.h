/* cuda_nccl.h: the NCCL layer of the nccl transport (plain C): a communicator bound to one
 * CUDA backend context, point-to-point sends and receives grouped so that opposite
 * directions cannot deadlock, gradient all-reduce on a stream of its own, and waiting with
 * NCCL's asynchronous errors polled, so that a dead peer ends the run with a clear error
 * instead of a hang. Bootstrapping across processes (sharing the unique id) is the caller's:
 * exec/mpi/nccl_mpi.h does it with MPI_Bcast; a one-process communicator needs nothing.
 *
 * Communicators are created non-blocking (NCCL's config.blocking = 0): every NCCL call
 * returns at once and this layer polls for completion, so it can give up on a timeout.
 * Failures of the queuing calls are recorded in the communicator (first one wins) and
 * reported by nccl_group_end, nccl_wait or nccl_allreduce_finish.
 *
 * Built only with CUDA; without NCCL every function fails with "plumb was built without
 * NCCL" (nccl_available says so up front). */
#ifndef PLUMB_EXEC_CUDA_NCCL_H
#define PLUMB_EXEC_CUDA_NCCL_H

#include <stddef.h>

#include "exec/backend.h"

#define NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

typedef struct nccl_comm nccl_comm;

/* 1 when plumb was built with NCCL; else 0 with err set. */
int nccl_available(plumb_err *err);

/* Makes a new unique id (on one rank; the others receive it). Returns 0 or -1 with err. */
int nccl_make_id(unsigned char id[NCCL_ID_BYTES], plumb_err *err);

/* Joins communicator `id` as `rank` of `nranks`, on context c's device (c must be a CUDA
 * backend context and outlive the communicator). Blocks until every rank has joined or
 * timeout_s seconds have passed. Returns the communicator (free with nccl_close) or NULL
 * with err set. */
nccl_comm *nccl_open(bk_ctx *c, const unsigned char id[NCCL_ID_BYTES], int nranks, int rank,
                     double timeout_s, plumb_err *err);

/* A sub-communicator of the ranks of `parent` that pass the same color (e.g. the replicas of
 * one stage), ranked by key; every rank of parent must call it. color < 0: this rank joins
 * none and *out is NULL. Returns 0 or -1 with err set. */
int nccl_split(nccl_comm *parent, int color, int key, double timeout_s, nccl_comm **out,
               plumb_err *err);

/* Frees the communicator; aborts it (without waiting for peers) when it failed. */
void nccl_close(nccl_comm *nc);

int nccl_rank(const nccl_comm *nc);
int nccl_size(const nccl_comm *nc);

/* Sends and receives between nccl_group_begin and nccl_group_end run as one NCCL group, so
 * a stage that sends its activations forward while receiving gradients backward cannot
 * deadlock against a peer that posts them in the opposite order. They are queued on the
 * context's own stream, after its work so far: later work on that stream sees received
 * data, and send buffers may be overwritten by later work on it. bytes may be 0. */
void nccl_group_begin(nccl_comm *nc);
void nccl_send(nccl_comm *nc, const void *buf, size_t bytes, int peer);
void nccl_recv(nccl_comm *nc, void *buf, size_t bytes, int peer);
/* Returns 0 once the group is queued, or -1 with err set (a failure since the last report,
 * or the peer's death while connecting). */
int nccl_group_end(nccl_comm *nc, double timeout_s, plumb_err *err);

/* Averages n floats of buf over the communicator (gradient all-reduce of replicas) on the
 * communicator's own stream: it starts after the work queued so far on the context's stream
 * and runs alongside later work; nccl_allreduce_finish makes the context's stream wait for
 * it (before the optimizer step). The host waits (at most the timeout given to nccl_open or
 * nccl_split) until NCCL has queued the all-reduce, not for it to run. */
void nccl_allreduce_start(nccl_comm *nc, float *buf, size_t n);
int nccl_allreduce_finish(nccl_comm *nc, plumb_err *err);

/* Waits (host side) until everything queued on the context's stream and the all-reduce
 * stream is done, polling NCCL's asynchronous errors: a failed peer or timeout_s seconds
 * without completion abort the communicator and return -1 with err set. Returns 0. */
int nccl_wait(nccl_comm *nc, double timeout_s, plumb_err *err);

#endif
