/* nccl_transport.c: the nccl transport (see nccl_transport.h): a two-rank NCCL communicator
 * per ordered pair of ranks, buffered sends (through staging buffers, reserved in the
 * worker's context before a run, or lent straight from the caller's), tag-matched receives,
 * all-reduce, reduce-scatter and all-gather on group communicators made on first use (one
 * per replica or tensor-parallel group), every wait polled for NCCL's asynchronous errors
 * and bounded by a timeout. */
#include "exec/mpi/nccl_transport.h"

#if defined(PLUMB_HAVE_NCCL) && defined(PLUMB_HAVE_CUDA)

#include <mpi.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/cuda/cuda_internal.h"
#include "exec/mpi/mpi_transport.h"

#define HDR 16          /* header bytes: int64 tag, int64 payload bytes */
#define MPI_TAG_ID 7301 /* MPI tag of group-communicator ids */

typedef enum slot_kind {
    SLOT_POOL,          /* payload from the stream-ordered pool, grown as needed */
    SLOT_RESERVED,      /* payload from the worker's context (reserve), freed by release */
    SLOT_LENT           /* no payload: the header of a lent send */
} slot_kind;

typedef struct slot {   /* a send's header and, unless lent, its staged payload */
    char *p;            /* payload (device), NULL for SLOT_LENT */
    int64_t *hd;        /* the header (device) */
    int64_t *hh;        /* and its pinned host copy (copied asynchronously) */
    size_t cap;         /* payload bytes */
    slot_kind kind;
    cudaEvent_t done;   /* recorded on the pair stream after the send */
    int used;           /* done has been recorded at least once */
} slot;

typedef struct held {   /* a message received ahead of its receive */
    long tag;
    size_t bytes;
    void *p;
} held;

typedef struct pair_link {   /* this rank and one peer */
    ncclComm_t out, in; /* this -> peer (we are rank 0), peer -> this (we are rank 1) */
    cudaStream_t s_out, s_in;
    slot *slots;
    int nslots;
    held *held;
    int nheld, capheld;
} pair_link;

typedef struct group {  /* a group of a collective: replicas or tensor-parallel ranks */
    int n;
    int *members;
    ncclComm_t comm;
    cudaStream_t s;
} group;

typedef struct nt {
    int self, n, device;
    double timeout_s;
    pair_link *links;        /* [n], links[self] unused */
    group *groups;
    int ngroups;
    int64_t *hdr_dev;   /* receive header (device) */
    int64_t *hdr_host;  /* and its pinned host copy (so waiting for it can be polled) */
    cudaEvent_t ev;     /* ordering between the worker's stream and the pair streams */
    atomic_int aborted;
    char why[512];
} nt;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(void)
{
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ failure */

static void abort_comms(nt *x)
{
    for (int j = 0; j < x->n && x->links; j++) {
        if (j == x->self) continue;
        if (x->links[j].out) ncclCommAbort(x->links[j].out);
        if (x->links[j].in) ncclCommAbort(x->links[j].in);
        x->links[j].out = x->links[j].in = NULL;
    }
    for (int g = 0; g < x->ngroups; g++) {
        if (x->groups[g].comm) ncclCommAbort(x->groups[g].comm);
        x->groups[g].comm = NULL;
    }
}

/* Records the first failure, aborts every communicator; returns -1 with err set. */
static int fail(nt *x, plumb_err *err, const char *msg)
{
    if (!atomic_load(&x->aborted)) {
        snprintf(x->why, sizeof x->why, "%s", msg);
        atomic_store(&x->aborted, 1);
        abort_comms(x);
    }
    return err_set(err, NULL, NULL, "%s", x->why);
}

static int fail_nccl(nt *x, plumb_err *err, ncclResult_t rc, const char *call, int line)
{
    plumb_err e = {{0}};
    cuda_check_nccl(&e, (int)rc, call, __FILE__, line);
    return fail(x, err, e.msg);
}

static int fail_cuda(nt *x, plumb_err *err, cudaError_t rc, const char *call, int line)
{
    plumb_err e = {{0}};
    cuda_check_rt(&e, (int)rc, call, __FILE__, line);
    return fail(x, err, e.msg);
}

#define NQ(x, err, call)                                                                   \
    do {                                                                                   \
        ncclResult_t rc_ = (call);                                                         \
        if (rc_ != ncclSuccess && rc_ != ncclInProgress)                                   \
            return fail_nccl((x), (err), rc_, #call, __LINE__);                            \
    } while (0)
#define CQ(x, err, call)                                                                   \
    do {                                                                                   \
        cudaError_t rc_ = (call);                                                          \
        if (rc_ != cudaSuccess) return fail_cuda((x), (err), rc_, #call, __LINE__);        \
    } while (0)

/* Polls comm until it is no longer in progress (an enqueue or an init has finished). */
static int settle(nt *x, ncclComm_t comm, const char *what, plumb_err *err)
{
    const double t0 = now_s();
    for (;;) {
        if (atomic_load(&x->aborted)) return err_set(err, NULL, NULL, "%s", x->why);
        ncclResult_t st = ncclInProgress, rc = ncclCommGetAsyncError(comm, &st);
        if (rc != ncclSuccess) st = rc;
        if (st == ncclSuccess) return 0;
        if (st != ncclInProgress) return fail_nccl(x, err, st, what, __LINE__);
        if (now_s() - t0 > x->timeout_s) break;
        nap();
    }
    char msg[300];
    snprintf(msg, sizeof msg, "nccl transport: rank %d: %s made no progress for %.0f s (a peer "
             "rank died or never joined?); the communicators were aborted", x->self, what,
             x->timeout_s);
    return fail(x, err, msg);
}

/* Waits (host) for stream s, polling comm's asynchronous errors; what names the wait. */
static int wait_stream(nt *x, cudaStream_t s, ncclComm_t comm, const char *what, plumb_err *err)
{
    const double t0 = now_s();
    for (;;) {
        if (atomic_load(&x->aborted)) return err_set(err, NULL, NULL, "%s", x->why);
        ncclResult_t st = ncclSuccess, rc = ncclCommGetAsyncError(comm, &st);
        if (rc != ncclSuccess) st = rc;
        if (st != ncclSuccess && st != ncclInProgress) return fail_nccl(x, err, st, what, __LINE__);
        cudaError_t q = cudaStreamQuery(s);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) return fail_cuda(x, err, q, what, __LINE__);
        if (now_s() - t0 > x->timeout_s) break;
        nap();
    }
    char msg[300];
    snprintf(msg, sizeof msg, "nccl transport: rank %d waited %.0f s for %s: deadlock or a dead "
             "peer; the communicators were aborted", x->self, x->timeout_s, what);
    return fail(x, err, msg);
}

/* The transport moves CUDA device buffers: the worker must run the CUDA backend. */
static int need_cuda(const backend *bk, plumb_err *err)
{
    if (bk && !strncmp(bk->name, "cuda", 4)) return 0;
    return err_set(err, NULL, NULL, "the nccl transport needs --backend cuda (got %s)",
                   bk ? bk->name : "none");
}

/* ------------------------------------------------------------------ send */

/* Appends an idle slot of `kind` with `cap` payload bytes to l: the payload from ctx's
 * backend for SLOT_RESERVED (counted in the worker's memory), from the stream-ordered pool
 * on cs for SLOT_POOL (cudaMalloc/cudaFree would wait for the whole device, including this
 * rank's sends blocked until their peer receives, while the peer may be doing the same),
 * none for SLOT_LENT. NULL with err set (and the transport aborted) when out of memory. */
static slot *slot_add(nt *x, pair_link *l, slot_kind kind, size_t cap, const backend *bk,
                      bk_ctx *ctx, cudaStream_t cs, plumb_err *err)
{
    slot *ns = realloc(l->slots, (size_t)(l->nslots + 1) * sizeof *ns);
    if (!ns) return fail(x, err, "nccl transport: out of memory"), NULL;
    l->slots = ns;
    slot *s = &l->slots[l->nslots];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    if (cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming) != cudaSuccess) goto oom;
    if (cudaMallocHost((void **)&s->hh, HDR) != cudaSuccess) goto oom_event;
    if (cudaMallocAsync((void **)&s->hd, HDR, cs) != cudaSuccess) goto oom_host;
    if (kind == SLOT_RESERVED) {
        plumb_err e = {{0}};
        if (!(s->p = bk->alloc(ctx, cap, &e))) {
            cudaFreeAsync(s->hd, cs);
            cudaFreeHost(s->hh);
            cudaEventDestroy(s->done);
            return fail(x, err, e.msg), NULL;
        }
    } else if (kind == SLOT_POOL && cap &&
               cudaMallocAsync((void **)&s->p, cap, cs) != cudaSuccess) {
        cudaFreeAsync(s->hd, cs);
        goto oom_host;
    }
    s->cap = cap;
    l->nslots++;
    return s;
oom_host:
    cudaFreeHost(s->hh);
oom_event:
    cudaEventDestroy(s->done);
oom:
    cudaGetLastError();
    fail(x, err, "nccl transport: out of GPU memory for a send's staging buffer");
    return NULL;
}

/* An idle slot for a send of `bytes` (lent: a header only) whose previous send has
 * completed: a lent send takes a header slot, a staged one the smallest idle reserved slot
 * that fits, else a pool slot (an idle pool slot too small is grown). Reserved slots cover
 * what can be in flight (schedule_send_bound), so the pool is only drawn on without them.
 * Frees and allocations are ordered on the worker's stream cs (see slot_add). */
static slot *slot_get(nt *x, pair_link *l, size_t bytes, int lent, const backend *bk,
                      bk_ctx *ctx, cudaStream_t cs, plumb_err *err)
{
    slot *best = NULL, *small = NULL;
    for (int i = 0; i < l->nslots; i++) {
        slot *s = &l->slots[i];
        if ((s->kind == SLOT_LENT) != lent) continue;
        if (s->used && cudaEventQuery(s->done) != cudaSuccess) continue; /* in flight */
        if (lent) return s;
        if (s->cap >= bytes) {
            if (!best || (s->kind == SLOT_RESERVED && best->kind != SLOT_RESERVED) ||
                (s->kind == best->kind && s->cap < best->cap))
                best = s;
        } else if (s->kind == SLOT_POOL && !small) {
            small = s;
        }
    }
    if (best) return best;
    if (small) { /* idle but too small: grow it */
        if (small->p) cudaFreeAsync(small->p, cs);
        small->p = NULL;
        small->cap = 0;
        if (cudaMallocAsync((void **)&small->p, bytes, cs) != cudaSuccess) {
            cudaGetLastError();
            fail(x, err, "nccl transport: out of GPU memory for a send's staging buffer");
            return NULL;
        }
        small->cap = bytes;
        return small;
    }
    return slot_add(x, l, lent ? SLOT_LENT : SLOT_POOL, lent ? 0 : bytes, bk, ctx, cs, err);
}

/* The checks every send makes; the pair link to `to`, or NULL with err set. */
static pair_link *send_link(nt *x, const backend *bk, int from, int to, plumb_err *err)
{
    if (need_cuda(bk, err)) return NULL;
    if (atomic_load(&x->aborted)) return err_set(err, NULL, NULL, "%s", x->why), NULL;
    if (from != x->self || to < 0 || to >= x->n || to == x->self) {
        err_set(err, NULL, NULL, "nccl transport: rank %d cannot send as worker %d to worker "
                "%d (one worker per rank, 0 to %d)", x->self, from, to, x->n - 1);
        return NULL;
    }
    cudaError_t rc = cudaSetDevice(x->device);
    if (rc != cudaSuccess) {
        fail_cuda(x, err, rc, "cudaSetDevice(device)", __LINE__);
        return NULL;
    }
    return &x->links[to];
}

/* Queues slot s's header and the payload at src on the pair's stream, after the work queued
 * on the worker's stream so far. The host does not wait. */
static int send_queue(nt *x, pair_link *l, slot *s, bk_ctx *ctx, long tag, const void *src,
                      size_t bytes, plumb_err *err)
{
    /* pinned source: the copy is asynchronous; hh is not rewritten before s->done */
    s->hh[0] = (int64_t)tag;
    s->hh[1] = (int64_t)bytes;
    CQ(x, err, cudaMemcpyAsync(s->hd, s->hh, HDR, cudaMemcpyHostToDevice, ctx->stream));
    CQ(x, err, cudaEventRecord(x->ev, ctx->stream));
    CQ(x, err, cudaStreamWaitEvent(l->s_out, x->ev, 0));
    NQ(x, err, ncclGroupStart());
    NQ(x, err, ncclSend(s->hd, HDR, ncclUint8, 1, l->out, l->s_out));
    if (bytes) NQ(x, err, ncclSend(src, bytes, ncclUint8, 1, l->out, l->s_out));
    NQ(x, err, ncclGroupEnd());
    if (settle(x, l->out, "ncclSend", err)) return -1;
    CQ(x, err, cudaEventRecord(s->done, l->s_out));
    s->used = 1;
    return 0;
}

/* A buffered send: the payload is copied into a staging slot on the worker's stream, so
 * the caller may reuse buf at once. */
static int nt_send(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                   const void *buf, size_t bytes, plumb_err *err)
{
    nt *x = t->impl;
    pair_link *l = send_link(x, bk, from, to, err);
    if (!l) return -1;
    slot *s = slot_get(x, l, bytes, 0, bk, ctx, ctx->stream, err);
    if (!s) return -1;
    if (bytes)
        CQ(x, err, cudaMemcpyAsync(s->p, buf, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return send_queue(x, l, s, ctx, tag, s->p, bytes, err);
}

/* A lent send: NCCL reads the payload straight out of buf, which the caller keeps unchanged
 * until `to` has answered after receiving it (transport.h); only the header is staged. */
static int nt_send_lent(transport *t, const backend *bk, bk_ctx *ctx, int from, int to,
                        long tag, const void *buf, size_t bytes, plumb_err *err)
{
    nt *x = t->impl;
    pair_link *l = send_link(x, bk, from, to, err);
    if (!l) return -1;
    slot *s = slot_get(x, l, 0, 1, bk, ctx, ctx->stream, err);
    if (!s) return -1;
    return send_queue(x, l, s, ctx, tag, buf, bytes, err);
}

/* Sets aside `count` staging slots of `bytes` for sends to `to`, their payloads allocated
 * in ctx (this worker's context, so they count in its peak memory); release frees them. */
static int nt_reserve(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, int count,
                      size_t bytes, plumb_err *err)
{
    nt *x = t->impl;
    pair_link *l = send_link(x, bk, from, to, err);
    if (!l) return -1;
    for (int i = 0; i < count; i++)
        if (!slot_add(x, l, SLOT_RESERVED, bytes, bk, ctx, ctx->stream, err)) return -1;
    return 0;
}

/* ------------------------------------------------------------------ receive */

static int nt_recv(transport *t, const backend *bk, bk_ctx *ctx, int to, int from, long tag,
                   void *buf, size_t bytes, plumb_err *err)
{
    nt *x = t->impl;
    if (need_cuda(bk, err)) return -1;
    if (atomic_load(&x->aborted)) return err_set(err, NULL, NULL, "%s", x->why);
    if (to != x->self || from < 0 || from >= x->n || from == x->self)
        return err_set(err, NULL, NULL, "nccl transport: rank %d cannot receive as worker %d "
                       "from worker %d (one worker per rank, 0 to %d)", x->self, to, from,
                       x->n - 1);
    pair_link *l = &x->links[from];
    CQ(x, err, cudaSetDevice(x->device));
    char what[96];
    snprintf(what, sizeof what, "message %ld from rank %d", tag, from);
    for (int i = 0; i < l->nheld; i++) { /* arrived earlier? */
        if (l->held[i].tag != tag) continue;
        held hd = l->held[i];
        l->held[i] = l->held[--l->nheld];
        int rc = 0;
        if (hd.bytes != bytes)
            rc = err_set(err, NULL, NULL, "nccl transport: rank %d: %s has %zu bytes, expected "
                         "%zu", x->self, what, hd.bytes, bytes);
        else if (bytes) {
            CQ(x, err, cudaMemcpyAsync(buf, hd.p, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
            CQ(x, err, cudaStreamSynchronize(ctx->stream));
        }
        /* stream-ordered: cudaFree would wait for the whole device, including our own send
         * kernels blocked until their peer receives, while the peer may be doing the same */
        cudaFreeAsync(hd.p, ctx->stream);
        return rc;
    }
    for (;;) {
        /* the next header of this pair */
        NQ(x, err, ncclRecv(x->hdr_dev, HDR, ncclUint8, 0, l->in, l->s_in));
        if (settle(x, l->in, "ncclRecv", err)) return -1;
        /* into pinned memory, so the host polls instead of blocking in the copy */
        CQ(x, err, cudaMemcpyAsync(x->hdr_host, x->hdr_dev, HDR, cudaMemcpyDeviceToHost,
                                   l->s_in));
        if (wait_stream(x, l->s_in, l->in, what, err)) return -1;
        const int64_t h[2] = {x->hdr_host[0], x->hdr_host[1]};
        size_t nb = (size_t)h[1];
        if (h[0] == tag) {
            if (nb != bytes) {
                char msg[200];
                snprintf(msg, sizeof msg, "nccl transport: rank %d: %s has %zu bytes, expected "
                         "%zu", x->self, what, nb, bytes);
                return fail(x, err, msg); /* the payload is still in the pipe: unrecoverable */
            }
            if (!bytes) return 0;
            /* buf may still be read by work queued on the worker's stream */
            CQ(x, err, cudaEventRecord(x->ev, ctx->stream));
            CQ(x, err, cudaStreamWaitEvent(l->s_in, x->ev, 0));
            NQ(x, err, ncclRecv(buf, bytes, ncclUint8, 0, l->in, l->s_in));
            if (settle(x, l->in, "ncclRecv", err)) return -1;
            return wait_stream(x, l->s_in, l->in, what, err);
        }
        /* another message: set it aside until its receive comes */
        if (l->nheld == l->capheld) {
            int cap = l->capheld ? 2 * l->capheld : 8;
            held *nh = realloc(l->held, (size_t)cap * sizeof *nh);
            if (!nh) return fail(x, err, "nccl transport: out of memory");
            l->held = nh;
            l->capheld = cap;
        }
        held *hd = &l->held[l->nheld];
        hd->tag = (long)h[0];
        hd->bytes = nb;
        hd->p = NULL;
        if (cudaMallocAsync(&hd->p, nb ? nb : 1, l->s_in) != cudaSuccess) { /* see above */
            cudaGetLastError();
            return fail(x, err, "nccl transport: out of GPU memory for an early message");
        }
        l->nheld++;
        if (nb) {
            NQ(x, err, ncclRecv(hd->p, nb, ncclUint8, 0, l->in, l->s_in));
            if (settle(x, l->in, "ncclRecv", err)) return -1;
            if (wait_stream(x, l->s_in, l->in, what, err)) return -1;
        }
    }
}

/* ------------------------------------------------------------------ collectives */

/* The communicator of group (made on first use: the first member makes the id and sends
 * it to the others with MPI; only members take part). NULL after a failure. */
static group *group_get(nt *x, const int *members, int n, plumb_err *err)
{
    for (int g = 0; g < x->ngroups; g++)
        if (x->groups[g].n == n && !memcmp(x->groups[g].members, members, n * sizeof(int)))
            return &x->groups[g];
    int me = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == x->self) me = i;
    if (me < 0) {
        err_set(err, NULL, NULL, "nccl transport: rank %d is not in its all-reduce group",
                x->self);
        return NULL;
    }
    group *ng = realloc(x->groups, (size_t)(x->ngroups + 1) * sizeof *ng);
    if (!ng) {
        fail(x, err, "nccl transport: out of memory");
        return NULL;
    }
    x->groups = ng;
    group *gr = &x->groups[x->ngroups];
    memset(gr, 0, sizeof *gr);
    gr->members = malloc((size_t)n * sizeof(int));
    if (!gr->members) {
        fail(x, err, "nccl transport: out of memory");
        return NULL;
    }
    memcpy(gr->members, members, (size_t)n * sizeof(int));
    gr->n = n;
    ncclUniqueId id;
    if (me == 0) {
        ncclResult_t rc = ncclGetUniqueId(&id);
        if (rc != ncclSuccess) {
            fail_nccl(x, err, rc, "ncclGetUniqueId(&id)", __LINE__);
            free(gr->members);
            return NULL;
        }
        for (int i = 1; i < n; i++)
            MPI_Send(&id, (int)sizeof id, MPI_BYTE, members[i], MPI_TAG_ID, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&id, (int)sizeof id, MPI_BYTE, members[0], MPI_TAG_ID, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(&gr->comm, n, id, me, &cfg);
    if ((rc != ncclSuccess && rc != ncclInProgress) ||
        cudaStreamCreateWithFlags(&gr->s, cudaStreamNonBlocking) != cudaSuccess) {
        if (rc != ncclSuccess && rc != ncclInProgress)
            fail_nccl(x, err, rc, "ncclCommInitRankConfig(group)", __LINE__);
        else
            fail(x, err, "nccl transport: cannot create a CUDA stream");
        free(gr->members);
        return NULL;
    }
    x->ngroups++;
    if (settle(x, gr->comm, "the all-reduce group's ncclCommInitRank", err)) return NULL;
    return gr;
}

/* The collectives, each on its group's communicator and stream, ordered after and before
 * the worker's stream. */
enum { COLL_AR, COLL_RS, COLL_AG };
static const struct {
    const char *what, *call, *wait;
} coll_names[] = {
    [COLL_AR] = {"all-reduce", "ncclAllReduce", "the gradient all-reduce"},
    [COLL_RS] = {"reduce-scatter", "ncclReduceScatter", "a reduce-scatter"},
    [COLL_AG] = {"all-gather", "ncclAllGather", "an all-gather"},
};

/* Runs collective `kind` over members (n, self among them): an all-reduce of count floats
 * (src = dst), a reduce-scatter of n * count floats into this member's count (dst may be
 * src + rank count: in place), an all-gather of count floats into n * count (src may be dst + rank count: in place); for
 * one member a copy. 0, or -1 with err set (the communicators aborted on NCCL errors). */
static int nt_coll(transport *t, const backend *bk, bk_ctx *ctx, int self, const int *members,
                   int n, int kind, const float *src, float *dst, size_t count,
                   plumb_err *err)
{
    nt *x = t->impl;
    if (need_cuda(bk, err)) return -1;
    if (atomic_load(&x->aborted)) return err_set(err, NULL, NULL, "%s", x->why);
    if (n <= 1) {
        if (src != dst) bk->copy(ctx, dst, src, count * sizeof(float));
        return 0;
    }
    if (self != x->self)
        return err_set(err, NULL, NULL, "nccl transport: rank %d cannot %s as worker %d",
                       x->self, coll_names[kind].what, self);
    CQ(x, err, cudaSetDevice(x->device));
    group *g = group_get(x, members, n, err);
    if (!g) return -1;
    CQ(x, err, cudaEventRecord(x->ev, ctx->stream));
    CQ(x, err, cudaStreamWaitEvent(g->s, x->ev, 0));
    if (kind == COLL_AR)
        NQ(x, err, ncclAllReduce(src, dst, count, ncclFloat, ncclSum, g->comm, g->s));
    else if (kind == COLL_AG)
        NQ(x, err, ncclAllGather(src, dst, count, ncclFloat, g->comm, g->s));
    else
        NQ(x, err, ncclReduceScatter(src, dst, count, ncclFloat, ncclSum, g->comm, g->s));
    if (settle(x, g->comm, coll_names[kind].call, err)) return -1;
    CQ(x, err, cudaEventRecord(x->ev, g->s));
    CQ(x, err, cudaStreamWaitEvent(ctx->stream, x->ev, 0));
    return wait_stream(x, g->s, g->comm, coll_names[kind].wait, err);
}

static int nt_allreduce(transport *t, const backend *bk, bk_ctx *ctx, int self,
                        const int *members, int n, long tag, float *buf, size_t count,
                        plumb_err *err)
{
    (void)tag;
    return nt_coll(t, bk, ctx, self, members, n, COLL_AR, buf, buf, count, err);
}

static int nt_reduce_scatter(transport *t, const backend *bk, bk_ctx *ctx, int self,
                             const int *members, int n, long tag, const float *src, float *dst,
                             size_t count, plumb_err *err)
{
    (void)tag;
    return nt_coll(t, bk, ctx, self, members, n, COLL_RS, src, dst, count, err);
}

static int nt_all_gather(transport *t, const backend *bk, bk_ctx *ctx, int self,
                         const int *members, int n, long tag, const float *src, float *dst,
                         size_t count, plumb_err *err)
{
    (void)tag;
    return nt_coll(t, bk, ctx, self, members, n, COLL_AG, src, dst, count, err);
}

/* ------------------------------------------------------------------ life cycle */

static void nt_abort(transport *t, const char *why)
{
    nt *x = t->impl;
    if (atomic_load(&x->aborted)) return;
    snprintf(x->why, sizeof x->why, "%s", why ? why : "transport aborted");
    atomic_store(&x->aborted, 1); /* the worker's polling sees it and aborts the comms */
}

/* Frees the slots reserve set aside in ctx, once this rank's sends have been delivered
 * (or the transport aborted: then nothing is left in flight), before the runtime destroys
 * the context. Other slots stay for later runs. */
static void nt_release(transport *t, const backend *bk, bk_ctx *ctx, int worker, int wait)
{
    (void)wait; /* a reserved buffer is never freed under a send in flight */
    nt *x = t->impl;
    if (worker != x->self || !x->links) return;
    cudaSetDevice(x->device);
    plumb_err e = {{0}};
    for (int j = 0; j < x->n && !atomic_load(&x->aborted); j++)
        if (j != x->self && x->links[j].nslots &&
            wait_stream(x, x->links[j].s_out, x->links[j].out, "the last sends", &e))
            break;
    for (int j = 0; j < x->n; j++) {
        if (j == x->self) continue;
        pair_link *l = &x->links[j];
        int kept = 0;
        for (int i = 0; i < l->nslots; i++) {
            slot *s = &l->slots[i];
            if (s->kind != SLOT_RESERVED) {
                l->slots[kept++] = *s;
                continue;
            }
            bk->free(ctx, s->p); /* waits for ctx's stream first */
            cudaFreeAsync(s->hd, ctx->stream);
            cudaFreeHost(s->hh);
            cudaEventDestroy(s->done);
        }
        l->nslots = kept;
    }
}

/* Finalizes every communicator (each flushes its operations with its peers) before any is
 * destroyed: all finalizations are queued first (non-blocking), then each is polled, so the
 * order in which ranks list their communicators cannot deadlock. A failure or a timeout
 * aborts them all (their handles become NULL). */
static void finalize_comms(nt *x, plumb_err *err)
{
    ncclComm_t all[2 * x->n + x->ngroups];
    int k = 0;
    for (int j = 0; j < x->n; j++) {
        if (j == x->self) continue;
        if (x->links[j].out) all[k++] = x->links[j].out;
        if (x->links[j].in) all[k++] = x->links[j].in;
    }
    for (int g = 0; g < x->ngroups; g++)
        if (x->groups[g].comm) all[k++] = x->groups[g].comm;
    for (int i = 0; i < k; i++) {
        ncclResult_t rc = ncclCommFinalize(all[i]);
        if (rc != ncclSuccess && rc != ncclInProgress) {
            fail_nccl(x, err, rc, "ncclCommFinalize(comm)", __LINE__);
            return;
        }
    }
    for (int i = 0; i < k; i++)
        if (settle(x, all[i], "ncclCommFinalize", err)) return;
}

static void nt_destroy(transport *t)
{
    if (!t) return;
    nt *x = t->impl;
    cudaSetDevice(x->device);
    int ok = !atomic_load(&x->aborted) && x->links; /* no links: create ran out of memory */
    plumb_err e = {{0}};
    for (int j = 0; j < x->n && ok; j++) /* deliver the last sends */
        if (j != x->self && wait_stream(x, x->links[j].s_out, x->links[j].out,
                                        "the last sends", &e))
            ok = 0;
    if (!ok) abort_comms(x);
    else finalize_comms(x, &e);
    for (int j = 0; j < x->n; j++) {
        if (j == x->self || !x->links) continue;
        pair_link *l = &x->links[j];
        if (l->out) ncclCommDestroy(l->out);
        if (l->in) ncclCommDestroy(l->in);
        for (int i = 0; i < l->nslots; i++) { /* reserved payloads went with release */
            if (l->slots[i].kind == SLOT_POOL) cudaFree(l->slots[i].p);
            cudaFree(l->slots[i].hd);
            cudaFreeHost(l->slots[i].hh);
            cudaEventDestroy(l->slots[i].done);
        }
        for (int i = 0; i < l->nheld; i++) cudaFree(l->held[i].p);
        free(l->slots);
        free(l->held);
        if (l->s_out) cudaStreamDestroy(l->s_out);
        if (l->s_in) cudaStreamDestroy(l->s_in);
    }
    for (int g = 0; g < x->ngroups; g++) {
        if (x->groups[g].comm) ncclCommDestroy(x->groups[g].comm);
        if (x->groups[g].s) cudaStreamDestroy(x->groups[g].s);
        free(x->groups[g].members);
    }
    free(x->groups);
    free(x->links);
    cudaFree(x->hdr_dev);
    cudaFreeHost(x->hdr_host);
    if (x->ev) cudaEventDestroy(x->ev);
    free(x);
    free(t);
}

/* The allsum entries: host buffers summed over all ranks through MPI. */
static int nt_allsum_f(transport *t, float *buf, size_t count, plumb_err *err)
{
    return mpi_allsum_float(buf, count, ((nt *)t->impl)->timeout_s, err);
}

static int nt_allsum_d(transport *t, double *buf, size_t count, plumb_err *err)
{
    return mpi_allsum_double(buf, count, ((nt *)t->impl)->timeout_s, err);
}

transport *transport_nccl_create(bk_ctx *c, double timeout_s, plumb_err *err)
{
    transport *t = calloc(1, sizeof *t);
    nt *x = calloc(1, sizeof *x);
    ncclUniqueId *ids_out = NULL, *ids_in = NULL;
    if (!t || !x) goto oom;
    t->name = "nccl";
    t->impl = x;
    t->send = nt_send;
    t->send_lent = nt_send_lent;
    t->reserve = nt_reserve;
    t->release = nt_release;
    t->recv = nt_recv;
    t->allreduce = nt_allreduce;
    t->reduce_scatter = nt_reduce_scatter;
    t->all_gather = nt_all_gather;
    t->abort = nt_abort;
    t->destroy = nt_destroy;
    t->allsum_float = nt_allsum_f;
    t->allsum_double = nt_allsum_d;
    MPI_Comm_rank(MPI_COMM_WORLD, &x->self);
    MPI_Comm_size(MPI_COMM_WORLD, &x->n);
    x->device = cuda_ctx_device(c);
    x->timeout_s = transport_timeout_s(timeout_s);
    atomic_init(&x->aborted, 0);
    x->links = calloc((size_t)x->n, sizeof *x->links);
    ids_out = calloc((size_t)x->n, sizeof *ids_out);
    ids_in = calloc((size_t)x->n, sizeof *ids_in);
    if (!x->links || !ids_out || !ids_in) goto oom;
    if (CUDA_CHECK_E(err, cudaSetDevice(x->device)) ||
        CUDA_CHECK_E(err, cudaMalloc((void **)&x->hdr_dev, HDR)) ||
        CUDA_CHECK_E(err, cudaMallocHost((void **)&x->hdr_host, HDR)) ||
        CUDA_CHECK_E(err, cudaEventCreateWithFlags(&x->ev, cudaEventDisableTiming)))
        goto fail;
    /* ids_out[j]: the id of this -> j; after the exchange ids_in[j]: the id of j -> this */
    for (int j = 0; j < x->n; j++)
        if (j != x->self && NCCL_CHECK_E(err, ncclGetUniqueId(&ids_out[j]))) goto fail;
    if (MPI_Alltoall(ids_out, (int)sizeof(ncclUniqueId), MPI_BYTE, ids_in,
                     (int)sizeof(ncclUniqueId), MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS) {
        err_set(err, NULL, NULL, "nccl transport: MPI_Alltoall of the NCCL ids failed");
        goto fail;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t rc = ncclGroupStart();
    for (int j = 0; j < x->n && (rc == ncclSuccess || rc == ncclInProgress); j++) {
        if (j == x->self) continue;
        pair_link *l = &x->links[j];
        if (CUDA_CHECK_E(err, cudaStreamCreateWithFlags(&l->s_out, cudaStreamNonBlocking)) ||
            CUDA_CHECK_E(err, cudaStreamCreateWithFlags(&l->s_in, cudaStreamNonBlocking))) {
            ncclGroupEnd();
            goto fail;
        }
        ncclConfig_t c1 = cfg, c2 = cfg;
        rc = ncclCommInitRankConfig(&l->out, 2, ids_out[j], 0, &c1);
        if (rc == ncclSuccess || rc == ncclInProgress)
            rc = ncclCommInitRankConfig(&l->in, 2, ids_in[j], 1, &c2);
    }
    ncclResult_t rc2 = ncclGroupEnd();
    if (rc != ncclSuccess && rc != ncclInProgress) rc2 = rc;
    if (rc2 != ncclSuccess && rc2 != ncclInProgress) {
        NCCL_CHECK_E(err, rc2);
        goto fail;
    }
    for (int j = 0; j < x->n; j++) {
        if (j == x->self) continue;
        if (settle(x, x->links[j].out, "ncclCommInitRank (pair)", err) ||
            settle(x, x->links[j].in, "ncclCommInitRank (pair)", err))
            goto fail;
    }
    free(ids_out);
    free(ids_in);
    return t;
oom:
    err_set(err, NULL, NULL, "out of memory");
fail:
    free(ids_out);
    free(ids_in);
    if (x && !atomic_load(&x->aborted) && x->links) {
        atomic_store(&x->aborted, 1);
        abort_comms(x);
    }
    if (t && x) nt_destroy(t);
    else free(t), free(x);
    return NULL;
}

#else /* without CUDA, NCCL or MPI */

transport *transport_nccl_create(bk_ctx *c, double timeout_s, plumb_err *err)
{
    (void)c, (void)timeout_s;
    err_set(err, NULL, NULL,
            "the nccl transport is not built into this binary (it needs CUDA, NCCL and MPI "
            "at build time)");
    return NULL;
}

#endif
