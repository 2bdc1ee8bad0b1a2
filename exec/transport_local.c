/* transport_local.c: the in-process transport: workers are threads of one process and
 * exchange host copies of their buffers through one mailbox (a list guarded by a mutex and
 * a condition variable). All-reduce gathers to the group's first member, sums and sends
 * the result back. A receive that waits too long reports a deadlock. */
#include "exec/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct msg {
    struct msg *next;
    int from, to;
    long tag;
    size_t bytes;
    unsigned char data[];
} msg;

typedef struct local {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    msg *head, *tail;
    int nworkers;
    double timeout_s;
    int aborted;
    char why[512];
} local;

static int aborted_err(local *l, plumb_err *err)
{
    return err_set(err, NULL, NULL, "%s", l->why[0] ? l->why : "transport aborted");
}

static int local_send(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                      const void *buf, size_t bytes, plumb_err *err)
{
    local *l = t->impl;
    if (to < 0 || to >= l->nworkers)
        return err_set(err, NULL, NULL, "send to worker %d: expected 0 to %d", to,
                       l->nworkers - 1);
    msg *m = malloc(sizeof *m + bytes + 1);
    if (!m) return err_set(err, NULL, NULL, "out of memory for a %zu-byte message", bytes);
    m->next = NULL;
    m->from = from;
    m->to = to;
    m->tag = tag;
    m->bytes = bytes;
    if (bytes) bk->download(ctx, m->data, buf, bytes);
    pthread_mutex_lock(&l->mu);
    if (l->aborted) {
        pthread_mutex_unlock(&l->mu);
        free(m);
        return aborted_err(l, err);
    }
    if (l->tail) l->tail->next = m;
    else l->head = m;
    l->tail = m;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static int local_recv(transport *t, const backend *bk, bk_ctx *ctx, int to, int from, long tag,
                      void *buf, size_t bytes, plumb_err *err)
{
    local *l = t->impl;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)l->timeout_s;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->aborted) {
            pthread_mutex_unlock(&l->mu);
            return aborted_err(l, err);
        }
        msg *prev = NULL, *m = l->head;
        while (m && !(m->from == from && m->to == to && m->tag == tag)) {
            prev = m;
            m = m->next;
        }
        if (m) {
            if (prev) prev->next = m->next;
            else l->head = m->next;
            if (l->tail == m) l->tail = prev;
            pthread_mutex_unlock(&l->mu);
            int rc = 0;
            if (m->bytes != bytes)
                rc = err_set(err, NULL, NULL, "worker %d: message %ld from worker %d has %zu "
                             "bytes, expected %zu", to, tag, from, m->bytes, bytes);
            else if (bytes)
                bk->upload(ctx, buf, m->data, bytes);
            free(m);
            return rc;
        }
        int w = pthread_cond_timedwait(&l->cv, &l->mu, &dl);
        if (w == ETIMEDOUT) {
            pthread_mutex_unlock(&l->mu);
            return err_set(err, NULL, NULL, "worker %d waited %.0f s for message %ld from "
                           "worker %d: deadlock or a stalled peer", to, l->timeout_s, tag, from);
        }
    }
}

static int local_allreduce(transport *t, const backend *bk, bk_ctx *ctx, int self,
                           const int *group, int n, long tag, float *buf, size_t count,
                           plumb_err *err)
{
    if (n <= 1) return 0;
    const size_t bytes = count * sizeof(float);
    const long up = -(2 * tag + 1), down = -(2 * tag + 2);
    int root = group[0];
    if (self != root) {
        if (local_send(t, bk, ctx, self, root, up, buf, bytes, err)) return -1;
        return local_recv(t, bk, ctx, self, root, down, buf, bytes, err);
    }
    float *sum = malloc(bytes + sizeof(float)), *part = malloc(bytes + sizeof(float));
    void *tmp = bk->alloc(ctx, bytes, err);
    int rc = -1;
    if (!sum || !part || !tmp) {
        if (sum && part) err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    bk->download(ctx, sum, buf, bytes);
    for (int i = 1; i < n; i++) {
        if (local_recv(t, bk, ctx, self, group[i], up, tmp, bytes, err)) goto done;
        bk->download(ctx, part, tmp, bytes);
        for (size_t k = 0; k < count; k++) sum[k] += part[k];
    }
    bk->upload(ctx, buf, sum, bytes);
    for (int i = 1; i < n; i++)
        if (local_send(t, bk, ctx, self, group[i], down, buf, bytes, err)) goto done;
    rc = 0;
done:
    free(sum);
    free(part);
    if (tmp) bk->free(ctx, tmp);
    return rc;
}

static void local_abort(transport *t, const char *why)
{
    local *l = t->impl;
    pthread_mutex_lock(&l->mu);
    if (!l->aborted) {
        l->aborted = 1;
        strncpy(l->why, why ? why : "transport aborted", sizeof l->why - 1);
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static void local_destroy(transport *t)
{
    if (!t) return;
    local *l = t->impl;
    msg *m = l->head;
    while (m) {
        msg *n = m->next;
        free(m);
        m = n;
    }
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
    free(t);
}

transport *transport_local_create(int nworkers, double timeout_s, plumb_err *err)
{
    transport *t = calloc(1, sizeof *t);
    local *l = calloc(1, sizeof *l);
    if (!t || !l) {
        free(t);
        free(l);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->nworkers = nworkers;
    l->timeout_s = timeout_s > 0 ? timeout_s : 120;
    t->name = "local";
    t->impl = l;
    t->send = local_send;
    t->recv = local_recv;
    t->allreduce = local_allreduce;
    t->abort = local_abort;
    t->destroy = local_destroy;
    return t;
}
