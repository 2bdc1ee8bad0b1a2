/* mpi_transport.c: the mpi transport: pipeline workers as MPI ranks exchanging host copies
 * of their buffers (buffered MPI_Isend, probed receives), all-reduce, reduce-scatter and
 * all-gather on cached sub-communicators (one per replica or tensor-parallel group),
 * abort notices on a reserved tag, and timeouts on every wait (exec/mpi/mpi_transport.h). */
#include "exec/mpi/mpi_transport.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct pending {
    struct pending *next;
    MPI_Request req;
    unsigned char data[];    /* the host copy being sent */
} pending;

typedef struct group {
    int n;
    int *members;
    MPI_Comm comm;
} group;

typedef struct mt {
    MPI_Comm comm;           /* private duplicate of MPI_COMM_WORLD */
    int self, n;
    int abort_tag;           /* reserved: abort notices; data tags are below it */
    double timeout_s;
    pthread_mutex_t mu;      /* guards everything below (abort may come from another thread) */
    pending *sends;
    group *groups;
    int ngroups;
    int aborted;
    char why[512];
} mt;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleeps a little more each time a wait finds nothing: spin first, then up to 0.2 ms. */
static void backoff(int *round)
{
    if (*round < 64) { (*round)++; return; }
    long ns = 20000L << (*round - 64 < 6 ? *round - 64 : 6);
    if (ns > 200000L) ns = 200000L;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    (*round)++;
}

/* Frees the copies of completed sends (lock held). */
static void reap_sends(mt *x)
{
    pending **pp = &x->sends;
    while (*pp) {
        int done = 0;
        MPI_Test(&(*pp)->req, &done, MPI_STATUS_IGNORE);
        if (done) {
            pending *d = *pp;
            *pp = d->next;
            free(d);
        } else {
            pp = &(*pp)->next;
        }
    }
}

/* Takes any abort notice that arrived (lock held). Returns 1 when aborted. */
static int check_abort(mt *x)
{
    if (x->aborted) return 1;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, x->abort_tag, x->comm, &flag, &st);
    if (!flag) return 0;
    char note[400] = "";
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    if (len < 0 || len > (int)sizeof note - 1) len = (int)sizeof note - 1;
    MPI_Recv(note, len, MPI_CHAR, st.MPI_SOURCE, x->abort_tag, x->comm, MPI_STATUS_IGNORE);
    note[len] = 0;
    x->aborted = 1;
    snprintf(x->why, sizeof x->why, "rank %d failed: %s", st.MPI_SOURCE, note);
    return 1;
}

/* A data tag in [0, abort_tag). */
static int mpi_tag(const mt *x, long tag)
{
    long r = tag % x->abort_tag;
    return (int)(r < 0 ? r + x->abort_tag : r);
}

static int aborted_err(mt *x, plumb_err *err)
{
    return err_set(err, NULL, NULL, "%s", x->why[0] ? x->why : "transport aborted");
}

static int mpi_send(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                    const void *buf, size_t bytes, plumb_err *err)
{
    mt *x = t->impl;
    if (from != x->self || to < 0 || to >= x->n)
        return err_set(err, NULL, NULL, "mpi transport: send from worker %d (this rank is "
                       "%d) to worker %d: expected 0 to %d", from, x->self, to, x->n - 1);
    if (bytes > INT_MAX)
        return err_set(err, NULL, NULL, "mpi transport: a %zu-byte message is larger than "
                       "one MPI send (%d bytes)", bytes, INT_MAX);
    pending *p = malloc(sizeof *p + bytes + 1);
    if (!p) return err_set(err, NULL, NULL, "out of memory for a %zu-byte message", bytes);
    if (bytes) bk->download(ctx, p->data, buf, bytes);
    if (bk->sync(ctx, err)) { free(p); return -1; }
    pthread_mutex_lock(&x->mu);
    if (check_abort(x)) {
        pthread_mutex_unlock(&x->mu);
        free(p);
        return aborted_err(x, err);
    }
    int rc = MPI_Isend(p->data, (int)bytes, MPI_BYTE, to, mpi_tag(x, tag), x->comm,
                       &p->req);
    if (rc != MPI_SUCCESS) {
        pthread_mutex_unlock(&x->mu);
        free(p);
        return err_set(err, NULL, NULL, "mpi transport: MPI_Isend to rank %d failed", to);
    }
    p->next = x->sends;
    x->sends = p;
    reap_sends(x);
    pthread_mutex_unlock(&x->mu);
    return 0;
}

static int mpi_recv(transport *t, const backend *bk, bk_ctx *ctx, int to, int from, long tag,
                    void *buf, size_t bytes, plumb_err *err)
{
    mt *x = t->impl;
    if (to != x->self || from < 0 || from >= x->n)
        return err_set(err, NULL, NULL, "mpi transport: receive by worker %d (this rank is "
                       "%d) from worker %d: expected 0 to %d", to, x->self, from, x->n - 1);
    const int mtag = mpi_tag(x, tag);
    double t0 = now_s();
    int round = 0;
    for (;;) {
        pthread_mutex_lock(&x->mu);
        if (check_abort(x)) {
            pthread_mutex_unlock(&x->mu);
            return aborted_err(x, err);
        }
        reap_sends(x);
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(from, mtag, x->comm, &flag, &st);
        if (flag) {
            int count = 0;
            MPI_Get_count(&st, MPI_BYTE, &count);
            if ((size_t)count != bytes) {
                pthread_mutex_unlock(&x->mu);
                return err_set(err, NULL, NULL, "worker %d: message %ld from worker %d has %d "
                               "bytes, expected %zu", to, tag, from, count, bytes);
            }
            unsigned char *host = malloc(bytes + 1);
            if (!host) {
                pthread_mutex_unlock(&x->mu);
                return err_set(err, NULL, NULL, "out of memory for a %zu-byte message", bytes);
            }
            int rc = MPI_Recv(host, count, MPI_BYTE, from, mtag, x->comm, MPI_STATUS_IGNORE);
            pthread_mutex_unlock(&x->mu);
            if (rc != MPI_SUCCESS) {
                free(host);
                return err_set(err, NULL, NULL, "mpi transport: MPI_Recv from rank %d failed",
                               from);
            }
            if (bytes) bk->upload(ctx, buf, host, bytes);
            rc = bk->sync(ctx, err);
            free(host);
            return rc;
        }
        pthread_mutex_unlock(&x->mu);
        if (now_s() - t0 > x->timeout_s)
            return err_set(err, NULL, NULL, "worker %d waited %.0f s for message %ld from "
                           "worker %d: deadlock or a stalled peer", to, x->timeout_s, tag, from);
        backoff(&round);
    }
}

/* Waits for req (a collective) with the abort check and the timeout. 0 or -1. */
static int wait_req(mt *x, MPI_Request *req, const char *what, plumb_err *err)
{
    double t0 = now_s();
    int round = 0;
    for (;;) {
        pthread_mutex_lock(&x->mu);
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        int ab = !done && check_abort(x);
        pthread_mutex_unlock(&x->mu);
        if (done) return 0;
        if (ab) return aborted_err(x, err);
        if (now_s() - t0 > x->timeout_s)
            return err_set(err, NULL, NULL, "rank %d waited %.0f s for %s: a stalled peer",
                           x->self, x->timeout_s, what);
        backoff(&round);
    }
}

/* The cached sub-communicator of group g (members in order); made on first use. */
static MPI_Comm group_comm(mt *x, const int *g, int n, plumb_err *err)
{
    for (int i = 0; i < x->ngroups; i++)
        if (x->groups[i].n == n && !memcmp(x->groups[i].members, g, (size_t)n * sizeof(int)))
            return x->groups[i].comm;
    group *ng = realloc(x->groups, (size_t)(x->ngroups + 1) * sizeof *ng);
    int *mem = malloc((size_t)n * sizeof *mem);
    if (ng) x->groups = ng;
    if (!ng || !mem) {
        free(mem);
        err_set(err, NULL, NULL, "out of memory");
        return MPI_COMM_NULL;
    }
    memcpy(mem, g, (size_t)n * sizeof *mem);
    MPI_Group world, sub;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_group(x->comm, &world);
    MPI_Group_incl(world, n, mem, &sub);
    int rc = MPI_Comm_create_group(x->comm, sub, 1, &c);
    MPI_Group_free(&sub);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS || c == MPI_COMM_NULL) {
        free(mem);
        err_set(err, NULL, NULL, "mpi transport: MPI_Comm_create_group of %d ranks failed", n);
        return MPI_COMM_NULL;
    }
    x->groups[x->ngroups++] = (group){n, mem, c};
    return c;
}

/* The collectives, each on its group's cached communicator through host copies. */
enum { COLL_AR, COLL_RS, COLL_AG };
static const struct {
    const char *what, *call, *wait;
} coll_names[] = {
    [COLL_AR] = {"all-reduce", "MPI_Iallreduce", "a gradient all-reduce"},
    [COLL_RS] = {"reduce-scatter", "MPI_Ireduce_scatter_block", "a reduce-scatter"},
    [COLL_AG] = {"all-gather", "MPI_Iallgather", "an all-gather"},
};

/* Runs collective `kind` over group grp (n members, self among them): an all-reduce of
 * count floats (src = dst), a reduce-scatter of n * count floats into this member's count
 * (dst apart from src, or src + rank count: in place), an all-gather of count floats into n * count; waited for with the abort check and the
 * timeout; for one member a copy. 0, or -1 with err set. */
static int mpi_coll(transport *t, const backend *bk, bk_ctx *ctx, int self, const int *grp,
                    int n, int kind, const float *src, float *dst, size_t count,
                    plumb_err *err)
{
    mt *x = t->impl;
    if (n <= 1) {
        if (src != dst) bk->copy(ctx, dst, src, count * sizeof(float));
        return 0;
    }
    if (self != x->self)
        return err_set(err, NULL, NULL, "mpi transport: %s by worker %d on rank %d",
                       coll_names[kind].what, self, x->self);
    const size_t whole = kind == COLL_AR ? count : (size_t)n * count;
    if (whole > INT_MAX)
        return err_set(err, NULL, NULL, "mpi transport: %s of %zu floats is larger than "
                       "one MPI call", coll_names[kind].what, whole);
    /* host: the input, then the all-gather's result; the all-reduce and the
     * reduce-scatter sum in place (MPI_IN_PLACE: the reduce-scatter's part lands at the
     * start), so dst may also be src's own part (src + rank count) */
    const size_t in = kind == COLL_AG ? count : whole, out = kind == COLL_RS ? count : whole,
                 res = kind == COLL_AG ? in : 0;
    float *host = malloc((res + out > in ? res + out : in) * sizeof(float) + 1);
    if (!host) return err_set(err, NULL, NULL, "out of memory");
    bk->download(ctx, host, src, in * sizeof(float));
    int rc = -1;
    if (bk->sync(ctx, err)) goto done;
    /* sub-communicators are made by the worker thread only; the lock keeps MPI serialized */
    pthread_mutex_lock(&x->mu);
    int ab = check_abort(x);
    MPI_Comm c = ab ? MPI_COMM_NULL : group_comm(x, grp, n, err);
    MPI_Request req = MPI_REQUEST_NULL;
    int prc = MPI_ERR_COMM;
    if (c != MPI_COMM_NULL && kind == COLL_AR)
        prc = MPI_Iallreduce(MPI_IN_PLACE, host, (int)count, MPI_FLOAT, MPI_SUM, c, &req);
    else if (c != MPI_COMM_NULL && kind == COLL_AG)
        prc = MPI_Iallgather(host, (int)count, MPI_FLOAT, host + res, (int)count, MPI_FLOAT, c,
                             &req);
    else if (c != MPI_COMM_NULL)
        prc = MPI_Ireduce_scatter_block(MPI_IN_PLACE, host, (int)count, MPI_FLOAT, MPI_SUM, c,
                                        &req);
    pthread_mutex_unlock(&x->mu);
    if (ab) { aborted_err(x, err); goto done; }
    if (c == MPI_COMM_NULL) goto done;
    if (prc != MPI_SUCCESS) {
        err_set(err, NULL, NULL, "mpi transport: %s failed", coll_names[kind].call);
        goto done;
    }
    if (wait_req(x, &req, coll_names[kind].wait, err)) goto done;
    bk->upload(ctx, dst, host + res, out * sizeof(float));
    rc = bk->sync(ctx, err);
done:
    free(host);
    return rc;
}

static int mpi_allreduce(transport *t, const backend *bk, bk_ctx *ctx, int self,
                         const int *grp, int n, long tag, float *buf, size_t count,
                         plumb_err *err)
{
    (void)tag;
    return mpi_coll(t, bk, ctx, self, grp, n, COLL_AR, buf, buf, count, err);
}

static int mpi_reduce_scatter(transport *t, const backend *bk, bk_ctx *ctx, int self,
                              const int *grp, int n, long tag, const float *src, float *dst,
                              size_t count, plumb_err *err)
{
    (void)tag;
    return mpi_coll(t, bk, ctx, self, grp, n, COLL_RS, src, dst, count, err);
}

static int mpi_all_gather(transport *t, const backend *bk, bk_ctx *ctx, int self,
                          const int *grp, int n, long tag, const float *src, float *dst,
                          size_t count, plumb_err *err)
{
    (void)tag;
    return mpi_coll(t, bk, ctx, self, grp, n, COLL_AG, src, dst, count, err);
}

static void mpi_abort_tr(transport *t, const char *why)
{
    mt *x = t->impl;
    pthread_mutex_lock(&x->mu);
    if (!x->aborted) {
        x->aborted = 1;
        snprintf(x->why, sizeof x->why, "%s", why ? why : "transport aborted");
        int len = (int)strlen(x->why);
        if (len > 380) len = 380;
        for (int r = 0; r < x->n; r++) {
            if (r == x->self) continue;
            pending *p = malloc(sizeof *p + (size_t)len + 1);
            if (!p) break;
            memcpy(p->data, x->why, (size_t)len);
            if (MPI_Isend(p->data, len, MPI_CHAR, r, x->abort_tag, x->comm, &p->req) !=
                MPI_SUCCESS) {
                free(p);
                continue;
            }
            p->next = x->sends;
            x->sends = p;
        }
    }
    pthread_mutex_unlock(&x->mu);
}

static int allsum(transport *t, void *buf, size_t count, MPI_Datatype type, plumb_err *err)
{
    mt *x = t->impl;
    if (count > INT_MAX)
        return err_set(err, NULL, NULL, "mpi transport: a sum of %zu values is larger than "
                       "one MPI call", count);
    MPI_Request req = MPI_REQUEST_NULL;
    pthread_mutex_lock(&x->mu);
    int ab = check_abort(x);
    int rc = ab ? MPI_SUCCESS
                : MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, type, MPI_SUM, x->comm, &req);
    pthread_mutex_unlock(&x->mu);
    if (ab) return aborted_err(x, err);
    if (rc != MPI_SUCCESS) return err_set(err, NULL, NULL, "mpi transport: MPI_Iallreduce failed");
    return wait_req(x, &req, "the weights and losses of the other ranks", err);
}

static int mpi_allsum_f(transport *t, float *buf, size_t count, plumb_err *err)
{
    return allsum(t, buf, count, MPI_FLOAT, err);
}

static int mpi_allsum_d(transport *t, double *buf, size_t count, plumb_err *err)
{
    return allsum(t, buf, count, MPI_DOUBLE, err);
}

static void mpi_destroy(transport *t)
{
    if (!t) return;
    mt *x = t->impl;
    /* let the last sends finish (their receivers are running); a stalled one is cancelled */
    double t0 = now_s();
    int round = 0;
    while (x->sends && !x->aborted && now_s() - t0 < 5) {
        reap_sends(x);
        if (x->sends) backoff(&round);
    }
    while (x->sends) {
        pending *p = x->sends;
        x->sends = p->next;
        int done = 0;
        MPI_Test(&p->req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            MPI_Cancel(&p->req);
            MPI_Request_free(&p->req);
            continue; /* the copy leaks rather than be freed under MPI's feet */
        }
        free(p);
    }
    for (int i = 0; i < x->ngroups; i++) {
        MPI_Comm_free(&x->groups[i].comm);
        free(x->groups[i].members);
    }
    free(x->groups);
    MPI_Comm_free(&x->comm);
    pthread_mutex_destroy(&x->mu);
    free(x);
    free(t);
}

transport *transport_mpi_create(double timeout_s, plumb_err *err)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        err_set(err, NULL, NULL, "mpi transport: MPI is not initialized (start plumb with "
                "mpirun)");
        return NULL;
    }
    transport *t = calloc(1, sizeof *t);
    mt *x = calloc(1, sizeof *x);
    if (!t || !x) {
        free(t), free(x);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    if (MPI_Comm_dup(MPI_COMM_WORLD, &x->comm) != MPI_SUCCESS) {
        free(t), free(x);
        err_set(err, NULL, NULL, "mpi transport: MPI_Comm_dup failed");
        return NULL;
    }
    MPI_Comm_set_errhandler(x->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(x->comm, &x->self);
    MPI_Comm_size(x->comm, &x->n);
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    x->abort_tag = flag && ub && *ub > 1 ? *ub : 32767;
    x->timeout_s = transport_timeout_s(timeout_s);
    pthread_mutex_init(&x->mu, NULL);
    t->name = "mpi";
    t->impl = x;
    t->send = mpi_send;
    t->recv = mpi_recv;
    t->allreduce = mpi_allreduce;
    t->reduce_scatter = mpi_reduce_scatter;
    t->all_gather = mpi_all_gather;
    t->abort = mpi_abort_tr;
    t->destroy = mpi_destroy;
    t->allsum_float = mpi_allsum_f;
    t->allsum_double = mpi_allsum_d;
    return t;
}

int mpi_session_begin(int *rank, int *size, int *node_size, plumb_err *err)
{
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return err_set(err, NULL, NULL, "MPI_Init_thread failed");
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return err_set(err, NULL, NULL, "the MPI library offers thread level %d; plumb's "
                       "workers need at least MPI_THREAD_SERIALIZED", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm node;
    *node_size = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL,
                            &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, node_size);
        MPI_Comm_free(&node);
    }
    return 0;
}

void mpi_session_end(int status)
{
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited || fin) return;
    if (status && status != 2) MPI_Abort(MPI_COMM_WORLD, status);
    else MPI_Finalize();
}

static int world_sum(void *buf, size_t count, MPI_Datatype type, double timeout_s,
                     plumb_err *err)
{
    if (count > INT_MAX)
        return err_set(err, NULL, NULL, "a sum of %zu values is larger than one MPI call",
                       count);
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, type, MPI_SUM, MPI_COMM_WORLD, &req) !=
        MPI_SUCCESS)
        return err_set(err, NULL, NULL, "MPI_Iallreduce over all ranks failed");
    double t0 = now_s(), lim = transport_timeout_s(timeout_s);
    int round = 0, done = 0;
    for (;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return 0;
        if (now_s() - t0 > lim)
            return err_set(err, NULL, NULL, "waited %.0f s for the other ranks' weights: a "
                           "stalled peer", lim);
        backoff(&round);
    }
}

int mpi_allsum_float(float *buf, size_t count, double timeout_s, plumb_err *err)
{
    return world_sum(buf, count, MPI_FLOAT, timeout_s, err);
}

int mpi_allsum_double(double *buf, size_t count, double timeout_s, plumb_err *err)
{
    return world_sum(buf, count, MPI_DOUBLE, timeout_s, err);
}
