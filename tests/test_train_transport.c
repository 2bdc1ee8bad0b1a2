/* test_train_transport.c: the local transport on its own: messages match by (from, to,
 * tag) in any order, sizes are checked, all-reduce sums over a group of threads, a missing
 * message times out, and an abort wakes every waiting receiver. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "exec/transport.h"

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
    t->destroy(t);
    bk->destroy(c);
}

static void *reduce_main(void *p)
{
    peer *q = p;
    int group[3] = {2, 0, 1}; /* the first member gathers */
    q->rc = q->tr->allreduce(q->tr, q->bk, q->ctx, q->self, group, 3, 11, q->buf, 4, &q->err);
    return NULL;
}

Test(transport, allreduce_three_workers)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    transport *t = transport_local_create(3, 5, &e);
    peer p[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].tr = t;
        p[i].bk = bk;
        p[i].ctx = bk->create(0, &e);
        p[i].self = i;
        for (int k = 0; k < 4; k++) p[i].buf[k] = (float)(10 * i + k);
        pthread_create(&th[i], NULL, reduce_main, &p[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(p[i].rc, 0, "%s", p[i].err.msg);
        for (int k = 0; k < 4; k++)
            cr_expect_float_eq(p[i].buf[k], (float)(30 + 3 * k), 1e-6, "worker %d [%d]", i, k);
        bk->destroy(p[i].ctx);
    }
    t->destroy(t);
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
    bk->destroy(c);
    t->destroy(t);
}
