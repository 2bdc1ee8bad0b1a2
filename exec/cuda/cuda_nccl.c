/* cuda_nccl.c: the NCCL layer (see cuda_nccl.h): non-blocking communicators, grouped
 * point-to-point transfers on the context's stream, all-reduce on a stream of its own, and
 * waits that poll NCCL's asynchronous errors and give up after a timeout. */
#include "exec/cuda/cuda_nccl.h"

#include "exec/cuda/cuda_internal.h"

#ifdef PLUMB_HAVE_NCCL

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(ncclUniqueId) == NCCL_ID_BYTES, "NCCL_ID_BYTES must match ncclUniqueId");

struct nccl_comm {
    bk_ctx *c;
    ncclComm_t comm;
    int rank, size;
    int failed;                /* aborted: no further NCCL calls */
    double timeout_s;          /* for waits that take no timeout (the all-reduce's enqueue) */
    cudaStream_t ar_stream;    /* all-reduce */
    cudaEvent_t ev_in, ev_out; /* compute -> all-reduce, all-reduce -> compute */
    plumb_err failure;         /* first failure since the last report */
    plumb_err discard;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(void)
{
    struct timespec ts = {0, 50000}; /* 50 us */
    nanosleep(&ts, NULL);
}

static plumb_err *sticky(nccl_comm *nc)
{
    return nc->failure.msg[0] ? &nc->discard : &nc->failure;
}

/* A queuing call's result: ncclInProgress is fine for a non-blocking communicator. */
#define NCCL_Q(nc, call)                                                                   \
    do {                                                                                   \
        ncclResult_t rc_ = (call);                                                         \
        if (rc_ != ncclSuccess && rc_ != ncclInProgress)                                   \
            cuda_check_nccl(sticky(nc), (int)rc_, #call, __FILE__, __LINE__);              \
    } while (0)

/* Reports (and clears) the recorded failure, if any. */
static int report(nccl_comm *nc, plumb_err *err)
{
    if (!nc->failure.msg[0]) return 0;
    err_set(err, NULL, NULL, "%s", nc->failure.msg);
    err_clear(&nc->failure);
    return -1;
}

/* Aborts the communicator after a failure so that no call can hang on it later. */
static int fail_abort(nccl_comm *nc, plumb_err *err, const char *msg)
{
    if (!nc->failed) {
        ncclCommAbort(nc->comm);
        nc->failed = 1;
    }
    if (nc->failure.msg[0]) return report(nc, err);
    return err_set(err, NULL, NULL, "%s", msg);
}

/* The message of a timeout. */
static int fail_timeout(nccl_comm *nc, plumb_err *err, const char *what, double timeout_s)
{
    char msg[256];
    snprintf(msg, sizeof msg,
             "NCCL: %s within %.0f s (a peer rank died, never joined, or posts mismatched "
             "sends and receives?); the communicator was aborted",
             what, timeout_s);
    return fail_abort(nc, err, msg);
}

/* Polls until the communicator is no longer in progress. Returns 0 or -1 (aborted). */
static int settle(nccl_comm *nc, double timeout_s, plumb_err *err)
{
    const double t0 = now_s();
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t rc = ncclCommGetAsyncError(nc->comm, &st);
        if (rc != ncclSuccess) st = rc;
        if (st == ncclSuccess) return report(nc, err);
        if (st != ncclInProgress) {
            cuda_check_nccl(sticky(nc), (int)st, "ncclCommGetAsyncError(comm, &state)", __FILE__,
                            __LINE__);
            return fail_abort(nc, err, "NCCL failed");
        }
        if (now_s() - t0 > timeout_s)
            return fail_timeout(nc, err, "the communicator made no progress", timeout_s);
        nap();
    }
}

/* After a queuing call outside a group: waits until NCCL has put it on its stream. A
 * non-blocking communicator may return ncclInProgress and finish queuing in the background;
 * until its state is ncclSuccess no other NCCL call may be made on it and nothing may be
 * queued after the operation on its stream. A failure (or a timeout, which aborts the
 * communicator) is recorded for the next report. Returns 0 or -1. */
static int enqueued(nccl_comm *nc)
{
    plumb_err e = {{0}};
    if (!settle(nc, nc->timeout_s, &e)) return 0;
    if (!nc->failure.msg[0]) err_set(&nc->failure, NULL, NULL, "%s", e.msg);
    return -1;
}

int nccl_available(plumb_err *err)
{
    (void)err;
    return 1;
}

int nccl_make_id(unsigned char id[NCCL_ID_BYTES], plumb_err *err)
{
    ncclUniqueId u;
    if (NCCL_CHECK_E(err, ncclGetUniqueId(&u))) return -1;
    memcpy(id, &u, NCCL_ID_BYTES);
    return 0;
}

/* The streams and events shared by nccl_open and nccl_split. */
static nccl_comm *comm_alloc(bk_ctx *c, plumb_err *err)
{
    nccl_comm *nc = calloc(1, sizeof *nc);
    if (!nc) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    nc->c = c;
    if (CUDA_CHECK_E(err, cudaSetDevice(c->device)) ||
        CUDA_CHECK_E(err, cudaStreamCreateWithFlags(&nc->ar_stream, cudaStreamNonBlocking)) ||
        CUDA_CHECK_E(err, cudaEventCreateWithFlags(&nc->ev_in, cudaEventDisableTiming)) ||
        CUDA_CHECK_E(err, cudaEventCreateWithFlags(&nc->ev_out, cudaEventDisableTiming))) {
        if (nc->ev_in) cudaEventDestroy(nc->ev_in);
        if (nc->ar_stream) cudaStreamDestroy(nc->ar_stream);
        free(nc);
        return NULL;
    }
    return nc;
}

static void comm_free(nccl_comm *nc)
{
    cudaSetDevice(nc->c->device);
    cudaEventDestroy(nc->ev_in);
    cudaEventDestroy(nc->ev_out);
    cudaStreamDestroy(nc->ar_stream);
    free(nc);
}

nccl_comm *nccl_open(bk_ctx *c, const unsigned char id[NCCL_ID_BYTES], int nranks, int rank,
                     double timeout_s, plumb_err *err)
{
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        err_set(err, NULL, NULL, "NCCL: rank %d of %d is out of range", rank, nranks);
        return NULL;
    }
    nccl_comm *nc = comm_alloc(c, err);
    if (!nc) return NULL;
    ncclUniqueId u;
    memcpy(&u, id, NCCL_ID_BYTES);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(&nc->comm, nranks, u, rank, &cfg);
    if (rc != ncclSuccess && rc != ncclInProgress) {
        NCCL_CHECK_E(err, rc);
        comm_free(nc);
        return NULL;
    }
    if (settle(nc, timeout_s, err)) {
        if (!nc->failed) ncclCommAbort(nc->comm);
        comm_free(nc);
        return NULL;
    }
    nc->rank = rank;
    nc->size = nranks;
    nc->timeout_s = timeout_s;
    return nc;
}

int nccl_split(nccl_comm *parent, int color, int key, double timeout_s, nccl_comm **out,
               plumb_err *err)
{
    *out = NULL;
    nccl_comm *nc = comm_alloc(parent->c, err);
    if (!nc) return -1;
    nc->timeout_s = timeout_s;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    NCCL_Q(parent, ncclCommSplit(parent->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
                                 &nc->comm, &cfg));
    if (settle(parent, timeout_s, err)) {
        if (nc->comm) ncclCommAbort(nc->comm); /* the split may have made it */
        comm_free(nc);
        return -1;
    }
    if (color < 0 || !nc->comm) {
        comm_free(nc);
        return 0;
    }
    if (settle(nc, timeout_s, err) || NCCL_CHECK_E(err, ncclCommUserRank(nc->comm, &nc->rank)) ||
        NCCL_CHECK_E(err, ncclCommCount(nc->comm, &nc->size))) {
        nccl_close(nc);
        return -1;
    }
    *out = nc;
    return 0;
}

void nccl_close(nccl_comm *nc)
{
    if (!nc) return;
    cudaSetDevice(nc->c->device);
    if (nc->failed) {
        /* already aborted */
    } else if (nc->failure.msg[0]) {
        ncclCommAbort(nc->comm);
    } else {
        /* flush pending operations, then free; a peer that died meanwhile ends in abort */
        plumb_err ignored = {{0}};
        cudaStreamSynchronize(nc->ar_stream);
        ncclCommFinalize(nc->comm);
        if (!settle(nc, 60.0, &ignored)) ncclCommDestroy(nc->comm);
    }
    comm_free(nc);
}

int nccl_rank(const nccl_comm *nc) { return nc->rank; }
int nccl_size(const nccl_comm *nc) { return nc->size; }

void nccl_group_begin(nccl_comm *nc)
{
    if (nc->failed) return;
    cudaSetDevice(nc->c->device);
    NCCL_Q(nc, ncclGroupStart());
}

void nccl_send(nccl_comm *nc, const void *buf, size_t bytes, int peer)
{
    if (nc->failed) return;
    NCCL_Q(nc, ncclSend(buf, bytes, ncclUint8, peer, nc->comm, nc->c->stream));
}

void nccl_recv(nccl_comm *nc, void *buf, size_t bytes, int peer)
{
    if (nc->failed) return;
    NCCL_Q(nc, ncclRecv(buf, bytes, ncclUint8, peer, nc->comm, nc->c->stream));
}

int nccl_group_end(nccl_comm *nc, double timeout_s, plumb_err *err)
{
    if (nc->failed) return err_set(err, NULL, NULL, "NCCL: the communicator was aborted");
    NCCL_Q(nc, ncclGroupEnd());
    return settle(nc, timeout_s, err);
}

void nccl_allreduce_start(nccl_comm *nc, float *buf, size_t n)
{
    if (nc->failed) return;
    cudaSetDevice(nc->c->device);
    if (CUDA_CHECK_E(sticky(nc), cudaEventRecord(nc->ev_in, nc->c->stream)) ||
        CUDA_CHECK_E(sticky(nc), cudaStreamWaitEvent(nc->ar_stream, nc->ev_in, 0)))
        return;
    NCCL_Q(nc, ncclAllReduce(buf, buf, n, ncclFloat, ncclAvg, nc->comm, nc->ar_stream));
    /* a non-blocking communicator may still be queuing the all-reduce (ncclInProgress):
     * recording ev_out before it is on ar_stream would let the compute stream run ahead */
    if (enqueued(nc)) return;
    CUDA_CHECK_E(sticky(nc), cudaEventRecord(nc->ev_out, nc->ar_stream));
}

int nccl_allreduce_finish(nccl_comm *nc, plumb_err *err)
{
    if (nc->failed) return err_set(err, NULL, NULL, "NCCL: the communicator was aborted");
    cudaSetDevice(nc->c->device);
    CUDA_CHECK_E(sticky(nc), cudaStreamWaitEvent(nc->c->stream, nc->ev_out, 0));
    return report(nc, err);
}

int nccl_wait(nccl_comm *nc, double timeout_s, plumb_err *err)
{
    if (nc->failed) return err_set(err, NULL, NULL, "NCCL: the communicator was aborted");
    cudaSetDevice(nc->c->device);
    const double t0 = now_s();
    cudaStream_t ss[2] = {nc->c->stream, nc->ar_stream};
    for (;;) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t rc = ncclCommGetAsyncError(nc->comm, &st);
        if (rc != ncclSuccess) st = rc;
        if (st != ncclSuccess && st != ncclInProgress) {
            cuda_check_nccl(sticky(nc), (int)st, "ncclCommGetAsyncError(comm, &state)", __FILE__,
                            __LINE__);
            return fail_abort(nc, err, "NCCL failed");
        }
        int done = 1;
        for (int i = 0; i < 2; i++) {
            cudaError_t q = cudaStreamQuery(ss[i]);
            if (q == cudaErrorNotReady) {
                done = 0;
            } else if (q != cudaSuccess) {
                CUDA_CHECK_E(sticky(nc), q);
                return fail_abort(nc, err, "CUDA failed");
            }
        }
        if (done) return report(nc, err);
        if (now_s() - t0 > timeout_s)
            return fail_timeout(nc, err, "transfers did not complete", timeout_s);
        nap();
    }
}

#else /* without NCCL: every entry says so */

struct nccl_comm {
    int unused;
};

static int no_nccl(plumb_err *err)
{
    return err_set(err, NULL, NULL,
                   "the nccl transport is not built into this binary (nccl.h/libnccl were "
                   "not found at build time)");
}

int nccl_available(plumb_err *err) { return no_nccl(err), 0; }
int nccl_make_id(unsigned char id[NCCL_ID_BYTES], plumb_err *err)
{
    (void)id;
    return no_nccl(err);
}
nccl_comm *nccl_open(bk_ctx *c, const unsigned char id[NCCL_ID_BYTES], int nranks, int rank,
                     double timeout_s, plumb_err *err)
{
    (void)c, (void)id, (void)nranks, (void)rank, (void)timeout_s;
    no_nccl(err);
    return NULL;
}
int nccl_split(nccl_comm *parent, int color, int key, double timeout_s, nccl_comm **out,
               plumb_err *err)
{
    (void)parent, (void)color, (void)key, (void)timeout_s;
    *out = NULL;
    return no_nccl(err);
}
void nccl_close(nccl_comm *nc) { (void)nc; }
int nccl_rank(const nccl_comm *nc) { return (void)nc, 0; }
int nccl_size(const nccl_comm *nc) { return (void)nc, 1; }
void nccl_group_begin(nccl_comm *nc) { (void)nc; }
void nccl_send(nccl_comm *nc, const void *buf, size_t bytes, int peer)
{
    (void)nc, (void)buf, (void)bytes, (void)peer;
}
void nccl_recv(nccl_comm *nc, void *buf, size_t bytes, int peer)
{
    (void)nc, (void)buf, (void)bytes, (void)peer;
}
int nccl_group_end(nccl_comm *nc, double timeout_s, plumb_err *err)
{
    (void)nc, (void)timeout_s;
    return no_nccl(err);
}
void nccl_allreduce_start(nccl_comm *nc, float *buf, size_t n) { (void)nc, (void)buf, (void)n; }
int nccl_allreduce_finish(nccl_comm *nc, plumb_err *err)
{
    (void)nc;
    return no_nccl(err);
}
int nccl_wait(nccl_comm *nc, double timeout_s, plumb_err *err)
{
    (void)nc, (void)timeout_s;
    return no_nccl(err);
}

#endif
