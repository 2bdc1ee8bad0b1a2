/* test_train_transport.c: the local transport on its own: messages match by (from, to,
 * tag) in any order, sizes are checked, all-reduce sums over a group of threads, a missing
 * message times out, and an abort wakes every waiting receiver; repeated all-reduces
 * allocate nothing after the first. With a backend that has the hand-off entries
 * (tests/markbk.h), messages move through staging buffers that are reused, ordered by
 * marks, and freed by release, also while a shared receiver lags; reserved buffers serve
 * as many sends in flight without allocating; lent sends and all-reduces stage nothing. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/transport.h"
#include "tests/markbk.h"

typedef struct peer {
    transport *tr;
    const backend *bk;
    bk_ctx *ctx;
    int self, n;
    float buf[4];
    int rc;
    plumb_err err;
} peer;

Test(transport, out_of_order_tags_and_sizes)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    transport *t = transport_local_create(2, 5, &e);
    cr_assert(t, "%s", e.msg);
    float a[2] = {1, 2}, b[3] = {3, 4, 5}, out[3] = {0};
    cr_assert_eq(t->send(t, bk, c, 0, 1, 7, a, sizeof a, &e), 0);
    cr_assert_eq(t->send(t, bk, c, 0, 1, 9, b, sizeof b, &e), 0);
    /* the later tag first */
    cr_assert_eq(t->recv(t, bk, c, 1, 0, 9, out, sizeof b, &e), 0, "%s", e.msg);
    cr_expect(out[0] == 3 && out[2] == 5);
    /* a receive of the wrong size fails with both sizes */
    cr_expect_eq(t->recv(t, bk, c, 1, 0, 7, out, sizeof b, &e), -1);
    cr_expect(strstr(e.msg, "has 8 bytes, expected 12") != NULL, "%s", e.msg);
    /* a message never sent: a timeout naming the wait */
    transport *t2 = transport_local_create(2, 1, &e);
    cr_expect_eq(t2->recv(t2, bk, c, 1, 0, 3, out, 4, &e), -1);
    cr_expect(strstr(e.msg, "worker 1 waited 1 s for message 3 from worker 0") != NULL, "%s",
              e.msg);
    cr_expect_eq(t->send(t, bk, c, 0, 5, 1, a, 4, &e), -1, "a worker out of range");
    t2->destroy(t2);
    t->release(t, bk, c, 0, 0); /* frees worker 0's staging buffers */
    t->destroy(t);
    bk->destroy(c);
}

/* One timeout for every transport and the runtime: the one given, or 120 s for none. */
Test(transport, timeout_default_is_one_rule)
{
    cr_expect_eq(transport_timeout_s(5), 5);
    cr_expect_eq(transport_timeout_s(0.25), 0.25);
    cr_expect_eq(transport_timeout_s(0), 120);
    cr_expect_eq(transport_timeout_s(-1), 120);
}

static void *reduce_main(void *p)
{
    peer *q = p;
    int group[3] = {2, 0, 1}; /* the first member gathers */
    q->rc = q->tr->allreduce(q->tr, q->bk, q->ctx, q->self, group, 3, 11 + q->n, q->buf, 4,
                             &q->err);
    return NULL;
}

/* One all-reduce over three threads (round r: tag 11 + r); every buffer must be the sum. */
static void allreduce_round(peer *p, int r)
{
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        p[i].n = r;
        for (int k = 0; k < 4; k++) p[i].buf[k] = (float)(10 * i + k + r);
        pthread_create(&th[i], NULL, reduce_main, &p[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(p[i].rc, 0, "%s", p[i].err.msg);
        for (int k = 0; k < 4; k++)
            cr_expect_float_eq(p[i].buf[k], (float)(30 + 3 * k + 3 * r), 1e-6,
                               "round %d, worker %d [%d]", r, i, k);
    }
}

/* Runs five all-reduces over three workers; returns the buffers (markbk's count) the
 * transport held after the first. */
static long allreduce_three_workers(const backend *bk)
{
    plumb_err e = {{0}};
    transport *t = transport_local_create(3, 5, &e);
    peer p[3];
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].tr = t;
        p[i].bk = bk;
        p[i].ctx = bk->create(0, &e);
        p[i].self = i;
    }
    const long live = markbk_bufs_live;
    allreduce_round(p, 0);
    const long held = markbk_bufs_live - live;
    long first = markbk_allocs;
    /* later rounds reuse the root's receive buffer and the staging buffers: on a GPU an
     * allocation per round would stall every stream of the device */
    for (int r = 1; r < 5; r++) allreduce_round(p, r);
    cr_expect_eq(markbk_allocs, first, "rounds 2 to 5 allocated %ld more buffers",
                 (long)markbk_allocs - first);
    for (int i = 0; i < 3; i++) {
        if (t->release) t->release(t, bk, p[i].ctx, i, 0);
        bk->destroy(p[i].ctx);
    }
    t->destroy(t);
    return held;
}

Test(transport, allreduce_three_workers)
{
    allreduce_three_workers(hostbk()); /* host copies */
}

Test(transport, allreduce_three_workers_device_path)
{
    long held = allreduce_three_workers(markbk());
    cr_expect_eq(held, 3, "lent both ways: only each member's receive scratch, not %ld", held);
    cr_expect_gt(markbk_peer_copies, 0, "the sums travelled by device copies");
    cr_expect_eq(markbk_violations, 0, "marks recorded by their maker, before any wait");
    cr_expect_eq(markbk_bufs_live, 0, "staging and scratch buffers all freed");
    cr_expect_eq(markbk_marks_live, 0);
}

static void *wait_main(void *p)
{
    peer *q = p;
    q->rc = q->tr->recv(q->tr, q->bk, q->ctx, q->self, 0, 1, q->buf, 4, &q->err);
    return NULL;
}

Test(transport, abort_wakes_waiters)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    transport *t = transport_local_create(3, 60, &e);
    peer p[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].tr = t;
        p[i].bk = bk;
        p[i].ctx = bk->create(0, &e);
        p[i].self = i + 1;
        pthread_create(&th[i], NULL, wait_main, &p[i]);
    }
    t->abort(t, "worker 0: out of memory");
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(p[i].rc, -1);
        cr_expect_str_eq(p[i].err.msg, "worker 0: out of memory");
        bk->destroy(p[i].ctx);
    }
    float x = 0;
    bk_ctx *c = bk->create(0, &e);
    cr_expect_eq(t->send(t, bk, c, 0, 1, 2, &x, 4, &e), -1, "sends fail after an abort");
    t->release(t, bk, c, 0, 0);
    bk->destroy(c);
    t->destroy(t);
}

/* Sends n floats of value v from worker 0 (ctx a, buffer src) to worker 1 under tag. */
static void send_val(transport *t, const backend *bk, bk_ctx *a, float *src, int n, float v,
                     long tag)
{
    plumb_err e = {{0}};
    float h[8];
    for (int k = 0; k < n; k++) h[k] = v + (float)k;
    bk->upload(a, src, h, (size_t)n * sizeof(float));
    cr_assert_eq(t->send(t, bk, a, 0, 1, tag, src, (size_t)n * sizeof(float), &e), 0, "%s",
                 e.msg);
}

static void expect_val(transport *t, const backend *bk, bk_ctx *b, float *dst, int n, float v,
                       long tag)
{
    plumb_err e = {{0}};
    float h[8];
    cr_assert_eq(t->recv(t, bk, b, 1, 0, tag, dst, (size_t)n * sizeof(float), &e), 0, "%s",
                 e.msg);
    bk->download(b, h, dst, (size_t)n * sizeof(float));
    for (int k = 0; k < n; k++) cr_expect_eq(h[k], v + (float)k, "tag %ld [%d]", tag, k);
}

/* Two workers on markbk: worker 0 sends from src (ctx a), worker 1 receives into dst
 * (ctx b), each 8 floats, over a local transport of the given timeout. */
typedef struct duo {
    const backend *bk;
    bk_ctx *a, *b;
    transport *t;
    float *src, *dst;
} duo;

static duo duo_open(double timeout_s)
{
    plumb_err e = {{0}};
    duo d = {.bk = markbk()};
    d.a = d.bk->create(0, &e);
    d.b = d.bk->create(0, &e);
    d.t = transport_local_create(2, timeout_s, &e);
    cr_assert(d.a && d.b && d.t, "%s", e.msg);
    d.src = d.bk->alloc(d.a, 8 * sizeof(float), &e);
    d.dst = d.bk->alloc(d.b, 8 * sizeof(float), &e);
    return d;
}

static void duo_close(duo *d)
{
    d->bk->free(d->a, d->src);
    d->bk->free(d->b, d->dst);
    d->t->destroy(d->t);
    d->bk->destroy(d->a);
    d->bk->destroy(d->b);
}

Test(transport, device_handoffs_reuse_staging_and_release_it)
{
    plumb_err e = {{0}};
    duo d = duo_open(1);
    const backend *bk = d.bk;
    bk_ctx *a = d.a, *b = d.b;
    transport *t = d.t;
    float *src = d.src, *dst = d.dst;
    const long base = markbk_bufs_live;
    /* the sender overwrites its buffer after each send: the message keeps its own copy */
    for (int i = 0; i < 5; i++) {
        send_val(t, bk, a, src, 3, 10.0f * (float)i, 100 + i);
        bk->zero(a, src, 8 * sizeof(float));
        expect_val(t, bk, b, dst, 3, 10.0f * (float)i, 100 + i);
    }
    cr_expect_eq(markbk_bufs_live, base + 1, "one staging buffer, reused five times");
    cr_expect_eq(markbk_peer_copies, 5);
    /* two in flight need two; received in the other order */
    send_val(t, bk, a, src, 3, 1, 7);
    send_val(t, bk, a, src, 2, 2, 8);
    expect_val(t, bk, b, dst, 2, 2, 8);
    expect_val(t, bk, b, dst, 3, 1, 7);
    cr_expect_eq(markbk_bufs_live, base + 2);
    /* a larger message cannot use them */
    send_val(t, bk, a, src, 8, 3, 9);
    expect_val(t, bk, b, dst, 8, 3, 9);
    cr_expect_eq(markbk_bufs_live, base + 3);
    /* one left unread: release (not shared) drops it and frees every staging buffer */
    send_val(t, bk, a, src, 4, 4, 10);
    t->release(t, bk, b, 1, 0); /* worker 1 sent nothing: nothing to free */
    cr_expect_eq(markbk_bufs_live, base + 3);
    t->release(t, bk, a, 0, 0);
    cr_expect_eq(markbk_bufs_live, base, "staging buffers freed by release");
    cr_expect_eq(markbk_marks_live, 0, "their marks too");
    cr_expect_eq(markbk_violations, 0);
    float out[4];
    cr_expect_eq(t->recv(t, bk, b, 1, 0, 10, dst, sizeof out, &e), -1, "dropped: a stall");
    duo_close(&d);
}

typedef struct lagger {
    transport *t;
    const backend *bk;
    bk_ctx *b;
    float *dst;
} lagger;

static void *lag_main(void *p)
{
    lagger *g = p;
    nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL);
    expect_val(g->t, g->bk, g->b, g->dst, 4, 5, 1);
    return NULL;
}

Test(transport, release_of_a_shared_transport_waits_for_the_receiver)
{
    duo d = duo_open(20);
    const backend *bk = d.bk;
    bk_ctx *a = d.a, *b = d.b;
    transport *t = d.t;
    float *src = d.src, *dst = d.dst;
    lagger g = {t, bk, b, dst};
    pthread_t th;
    send_val(t, bk, a, src, 4, 5, 1);
    cr_assert_eq(pthread_create(&th, NULL, lag_main, &g), 0);
    t->release(t, bk, a, 0, 1);
    /* the receiver's copy out of the staging buffer came before release freed it */
    cr_expect_eq(markbk_peer_copies, 1, "release returned before the message was received");
    pthread_join(th, NULL);
    cr_expect_eq(markbk_violations, 0);
    duo_close(&d);
    cr_expect_eq(markbk_bufs_live, 0);
    cr_expect_eq(markbk_marks_live, 0);
}

/* reserve sets staging aside up front, so that as many sends in flight allocate nothing;
 * a lent send needs no staging buffer at all, the receiver copying out of the sender's. */
Test(transport, reserve_and_lent_sends_allocate_nothing_while_running)
{
    plumb_err e = {{0}};
    duo d = duo_open(1);
    transport *t = d.t;
    const long base = markbk_bufs_live;
    cr_assert_eq(t->reserve(t, d.bk, d.a, 0, 1, 3, 8 * sizeof(float), &e), 0, "%s", e.msg);
    cr_expect_eq(markbk_bufs_live, base + 3);
    cr_expect_eq(t->reserve(t, d.bk, d.a, 0, 2, 1, 4, &e), -1, "a worker out of range");
    const long allocs = markbk_allocs;
    for (int i = 0; i < 3; i++) send_val(t, d.bk, d.a, d.src, 8 - i, (float)i, 20 + i);
    for (int i = 2; i >= 0; i--) expect_val(t, d.bk, d.b, d.dst, 8 - i, (float)i, 20 + i);
    cr_expect_eq(markbk_allocs, allocs, "three in flight fit the reserved buffers");
    /* lent: what the receiver gets is src as it stands */
    float h[4] = {7, 8, 9, 10};
    d.bk->upload(d.a, d.src, h, sizeof h);
    const long copies = markbk_peer_copies;
    cr_assert_eq(t->send_lent(t, d.bk, d.a, 0, 1, 30, d.src, sizeof h, &e), 0, "%s", e.msg);
    expect_val(t, d.bk, d.b, d.dst, 4, 7, 30);
    cr_expect_eq(markbk_peer_copies, copies + 1, "one copy, straight out of src");
    cr_expect_eq(markbk_bufs_live, base + 3, "no staging buffer for a lent send");
    t->release(t, d.bk, d.a, 0, 0);
    cr_expect_eq(markbk_bufs_live, base, "the reserved buffers freed by release");
    cr_expect_eq(markbk_marks_live, 0);
    cr_expect_eq(markbk_violations, 0);
    duo_close(&d);
}

/* Any group order, any count (fewer floats than members too): every member ends with the
 * bits of the sum in group order, ((b[g0] + b[g1]) + b[g2]) + ..., which a reduce-scatter
 * then all-gather gives as a gather to one member did. */
typedef struct wide_peer {
    transport *tr;
    const backend *bk;
    bk_ctx *ctx;
    const int *group;
    int self, n;
    float *buf;
    size_t count;
    int rc;
    plumb_err err;
} wide_peer;

static void *wide_main(void *p)
{
    wide_peer *q = p;
    q->rc = q->tr->allreduce(q->tr, q->bk, q->ctx, q->self, q->group, q->n, 5, q->buf,
                             q->count, &q->err);
    return NULL;
}

static void allreduce_bits(const backend *bk, int n, size_t count)
{
    plumb_err e = {{0}};
    transport *t = transport_local_create(n, 5, &e);
    cr_assert(t, "%s", e.msg);
    int group[5];
    for (int i = 0; i < n; i++) group[i] = n - 1 - i; /* not in worker order */
    wide_peer p[5];
    pthread_t th[5];
    float *want = calloc(count, sizeof *want);
    unsigned seed = (unsigned)(n * 7919 + count);
    for (int i = 0; i < n; i++) {
        p[i] = (wide_peer){.tr = t, .bk = bk, .ctx = bk->create(0, &e), .group = group,
                           .self = i, .n = n, .buf = malloc(count * sizeof(float)),
                           .count = count};
        for (size_t k = 0; k < count; k++) {
            seed = seed * 1103515245u + 12345u;
            /* magnitudes from 1e-3 to 1e3, both signs: the order of the sum shows */
            p[i].buf[k] = ((float)(seed >> 8 & 0xffff) / 65536.0f - 0.5f) *
                          (float)(1 << (seed >> 24 & 7)) * ((seed & 1) ? 1e-3f : 1e2f);
        }
    }
    for (size_t k = 0; k < count; k++) {
        float sum = p[group[0]].buf[k];
        for (int i = 1; i < n; i++) sum += p[group[i]].buf[k];
        want[k] = sum;
    }
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, wide_main, &p[i]);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(p[i].rc, 0, "%s", p[i].err.msg);
        cr_expect_eq(memcmp(p[i].buf, want, count * sizeof(float)), 0,
                     "n %d, count %zu: member %d's sum differs from the group-order sum", n,
                     count, i);
        if (t->release) t->release(t, bk, p[i].ctx, i, 0);
        bk->destroy(p[i].ctx);
        free(p[i].buf);
    }
    free(want);
    t->destroy(t);
}

Test(transport, allreduce_group_order_bits)
{
    const size_t counts[] = {1, 2, 3, 4, 7, 1001};
    for (int n = 2; n <= 5; n++)
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
            allreduce_bits(hostbk(), n, counts[c]);
            allreduce_bits(markbk(), n, counts[c]);
            allreduce_bits(backend_cpu(), n, counts[c]);
        }
}
