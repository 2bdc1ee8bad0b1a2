/* transport.h: how pipeline workers exchange activations and gradients and all-reduce
 * weight gradients: one table of function pointers per transport. `local` (workers as
 * threads of one process) is always built; `mpi` and `nccl` implement the same table.
 *
 * Buffers are DEVICE buffers of the calling worker's backend context (a transport moves
 * them through the host or directly, as it can). Messages are matched by (from, to, tag);
 * sends may return before the receive happens (buffered), and a receive blocks until its
 * message arrives. Any failure of a worker aborts the transport so that every worker
 * blocked in it returns an error instead of hanging. */
#ifndef PLUMB_EXEC_TRANSPORT_H
#define PLUMB_EXEC_TRANSPORT_H

#include <stddef.h>

#include "err.h"
#include "exec/backend.h"

typedef struct transport transport;

/* The receive timeout, in seconds, of every transport and of the runtime that waits on
 * it: timeout_s, or 120 s when it is <= 0 (none given). A receive or collective that waits
 * longer fails as a deadlock. */
static inline double transport_timeout_s(double timeout_s)
{
    return timeout_s > 0 ? timeout_s : 120;
}

/* Message tags. The callers' tags (send, recv, and each collective's own) are >= 0. A
 * transport that runs a collective as messages of its own (local) tags them from the
 * collective's tag t with transport_coll_tag, one tag per leg (0: what goes to the
 * member that sums or gathers it, 1: the sums coming back), so that an error naming
 * such a message by its tag can be read back as the collective's (transport_tag_coll). */
static inline long transport_coll_tag(long t, int leg)
{
    return -(2 * t + 1 + (leg != 0));
}

/* 1 with *t set to the collective's tag when tag is one of a collective's messages
 * (transport_coll_tag), 0 (*t untouched) when it is a caller's tag. */
static inline int transport_tag_coll(long tag, long *t)
{
    if (tag >= 0) return 0;
    *t = (-tag - 1) / 2;
    return 1;
}

struct transport {
    const char *name;       /* "local", "mpi", "nccl" */
    void *impl;             /* the transport's own state */
    /* Sends bytes of buf (device, ctx's) from worker `from` to worker `to` under tag.
     * Returns 0, or -1 with err set (aborted, out of memory). */
    int (*send)(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                const void *buf, size_t bytes, plumb_err *err);
    /* Optional (NULL: use send): like send, but buf is lent, not copied: the caller keeps
     * it allocated and unchanged until a message from `to` that `to` sent after receiving
     * this one has been received (the runtime lends a stage's output activations, which
     * stay in their slot until the next stage's gradient of the same microbatch is back).
     * The receiver copies straight out of buf, so the message needs no staging buffer. */
    int (*send_lent)(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                     const void *buf, size_t bytes, plumb_err *err);
    /* Receives the message (from, to, tag) into buf, which must be `bytes` long. Blocks.
     * Returns 0, or -1 with err set (aborted, size mismatch, no message within the
     * transport's timeout: a deadlock). */
    int (*recv)(transport *t, const backend *bk, bk_ctx *ctx, int to, int from, long tag,
                void *buf, size_t bytes, plumb_err *err);
    /* Sums buf (count floats) over the n workers of group (self among them) in place;
     * every member calls it with the same group order and tag. Returns 0 or -1. */
    int (*allreduce)(transport *t, const backend *bk, bk_ctx *ctx, int self, const int *group,
                     int n, long tag, float *buf, size_t count, plumb_err *err);
    /* Reduce-scatter: src (n * count floats, device, ctx's) is summed over the n workers
     * of group and member i of the group receives floats [i count, (i + 1) count) of the
     * sum in dst (count floats). dst is either apart from src (src is left unchanged) or
     * src + i count, member i's own part (in place, as NCCL allows: the rest of src is
     * left unchanged); no other overlap. Every member calls it with the same group order,
     * tag and count. Each worker sends and receives (n - 1) count floats, a ring's share.
     * Returns 0, or -1 with err set (aborted, a member stalled past the timeout). */
    int (*reduce_scatter)(transport *t, const backend *bk, bk_ctx *ctx, int self,
                          const int *group, int n, long tag, const float *src, float *dst,
                          size_t count, plumb_err *err);
    /* All-gather: member i's src (count floats) lands at dst + i count (dst: n * count
     * floats) on every member, its own included; the bits are copied, not summed. The
     * same rules as reduce_scatter, and the same (n - 1) count floats each way, except
     * that src may also be dst + i count (in place, as NCCL allows). */
    int (*all_gather)(transport *t, const backend *bk, bk_ctx *ctx, int self,
                      const int *group, int n, long tag, const float *src, float *dst,
                      size_t count, plumb_err *err);
    /* Optional (NULL: sends allocate as they go): sets aside in ctx, worker `from`'s
     * context, what `count` messages of at most `bytes` from `from` to `to` need while in
     * flight, so that no send of a run allocates. The runtime calls it for each pair its
     * workers send on, before they start, with schedule_send_bound's count and the pair's
     * largest message. What is set aside is freed by `release`. Returns 0, or -1 with err
     * set (out of memory, workers out of range). */
    int (*reserve)(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, int count,
                   size_t bytes, plumb_err *err);
    /* Makes every pending and later call fail with `why` (first reason kept). */
    void (*abort)(transport *t, const char *why);
    /* Optional (NULL: nothing to release): frees what the transport holds in ctx, worker
     * `worker`'s context, such as device staging buffers of messages it sent. The runtime
     * calls it for each of its workers after they stopped and before destroying their
     * contexts. With `wait` set (the transport is shared with workers still running), it
     * first waits until the messages the worker sent were received, or the transport was
     * aborted, or its timeout passed (those messages are then dropped: their receives fail
     * as stalls). */
    void (*release)(transport *t, const backend *bk, bk_ctx *ctx, int worker, int wait);
    void (*destroy)(transport *t);
    /* Optional, for transports spanning processes (NULL in-process): sums count floats /
     * doubles in place over all processes (each holds zeros for what it does not own), so
     * that every process gets the whole weights or losses. Collective: every process calls
     * it with the same count, between runs of the pipeline. Returns 0, or -1 with err set
     * (aborted, a peer stalled past the timeout). */
    int (*allsum_float)(transport *t, float *buf, size_t count, plumb_err *err);
    int (*allsum_double)(transport *t, double *buf, size_t count, plumb_err *err);
};

/* The in-process transport for nworkers threads: a mailbox guarded by a mutex. Messages
 * travel as host copies, or, where the backend has the hand-off entries (mark_new ...
 * copy_peer: the CPU and CUDA backends), as staging buffers of the sender's context that
 * the receiver copies from on its own queue, kept per pair for reuse (`reserve` sets them
 * aside), or straight out of the sender's buffer for `send_lent`. All-reduce sums with
 * the backend's axpy on the group's first member, lending buffers both ways, so that it
 * stages nothing besides the root's receive buffer. Reduce-scatter and all-gather are
 * direct: each member lends every other member its part and sums (or copies) its own
 * from all, in group order, so that a reduce-scatter's part has the bits of the same part
 * of the all-reduce's sum. A receive that waits longer than
 * timeout_s seconds fails as a deadlock (timeout_s <= 0: 120 s). NULL with err when out
 * of memory. */
transport *transport_local_create(int nworkers, double timeout_s, plumb_err *err);

#endif
