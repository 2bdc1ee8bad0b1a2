/* test_transport_coll.c: the local transport's reduce-scatter and all-gather over threads:
 * a reduce-scatter gives each member the bits of its part of the all-reduce's sum (the
 * same summation order), an all-gather the members' parts in group order, on the host
 * path and on the device path (tests/markbk.h: lent, ordered by marks, nothing allocated
 * after the first round, everything freed); an in-place reduce-scatter (dst: the member's
 * own part of src) gives the same bits as out of place, for 2 to 4 members; a member that never comes makes the others
 * fail with the timeout's line, and an abort wakes them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "exec/transport.h"
#include "tests/markbk.h"

enum { NW = 4, PART = 37 };
enum { OP_AR, OP_RS, OP_AG, OP_RS_IN_PLACE };

typedef struct member {
    transport *tr;
    const backend *bk;
    bk_ctx *ctx;
    int self, op;
    long tag;
    const int *group;
    int n;
    float *src, *dst; /* device buffers: NW * PART floats each */
    int rc;
    plumb_err err;
} member;

static void *member_main(void *p)
{
    member *m = p;
    transport *t = m->tr;
    if (m->op == OP_AR)
        m->rc = t->allreduce(t, m->bk, m->ctx, m->self, m->group, m->n, m->tag, m->dst,
                             (size_t)m->n * PART, &m->err);
    else if (m->op == OP_RS)
        m->rc = t->reduce_scatter(t, m->bk, m->ctx, m->self, m->group, m->n, m->tag, m->src,
                                  m->dst, PART, &m->err);
    else if (m->op == OP_RS_IN_PLACE) { /* into the member's own part of src */
        int me = 0;
        while (me < m->n && m->group[me] != m->self) me++;
        m->rc = t->reduce_scatter(t, m->bk, m->ctx, m->self, m->group, m->n, m->tag, m->src,
                                  m->src + (size_t)me * PART, PART, &m->err);
    }
    else
        m->rc = t->all_gather(t, m->bk, m->ctx, m->self, m->group, m->n, m->tag, m->src,
                              m->dst, PART, &m->err);
    return NULL;
}

/* Runs op on the first `come` of the n members at once. */
static void run_op(member *m, int n, int come, int op, long tag)
{
    pthread_t th[NW];
    for (int i = 0; i < come; i++) {
        m[i].op = op;
        m[i].tag = tag;
        m[i].n = n;
        pthread_create(&th[i], NULL, member_main, &m[i]);
    }
    for (int i = 0; i < come; i++) pthread_join(th[i], NULL);
}

/* Values of many magnitudes, so that the order of a sum shows in its bits. */
static float val(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    float x = (float)(*s >> 8) / (float)(1u << 24) - 0.5f;
    return x * (float)(1u << (*s % 24));
}

typedef struct world {
    const backend *bk;
    transport *t;
    member m[NW];
} world;

/* NW workers of bk over a local transport of the given timeout; group {2, 0, 3, 1}. */
static void world_open(world *w, const backend *bk, double timeout_s)
{
    static const int group[NW] = {2, 0, 3, 1};
    plumb_err e = {{0}};
    w->bk = bk;
    w->t = transport_local_create(NW, timeout_s, &e);
    cr_assert(w->t, "%s", e.msg);
    for (int i = 0; i < NW; i++) {
        member *m = &w->m[i];
        memset(m, 0, sizeof *m);
        m->tr = w->t;
        m->bk = bk;
        m->ctx = bk->create(0, &e);
        cr_assert(m->ctx, "%s", e.msg);
        m->self = group[i]; /* m[i] is member i of the group */
        m->group = group;
        m->src = bk->alloc(m->ctx, NW * PART * sizeof(float), &e);
        m->dst = bk->alloc(m->ctx, NW * PART * sizeof(float), &e);
        cr_assert(m->src && m->dst, "%s", e.msg);
    }
}

static void world_close(world *w)
{
    for (int i = 0; i < NW; i++) {
        member *m = &w->m[i];
        w->t->release(w->t, w->bk, m->ctx, m->self, 0);
        w->bk->free(m->ctx, m->src);
        w->bk->free(m->ctx, m->dst);
        w->bk->destroy(m->ctx);
    }
    w->t->destroy(w->t);
}

static void put(member *m, float *dev, const float *h, size_t n)
{
    m->bk->upload(m->ctx, dev, h, n * sizeof(float));
}

static void get(member *m, float *h, const float *dev, size_t n)
{
    plumb_err e = {{0}};
    m->bk->download(m->ctx, h, dev, n * sizeof(float));
    cr_assert_eq(m->bk->sync(m->ctx, &e), 0, "%s", e.msg);
}

/* One round: every member's src random (seed r), the all-reduce of copies of them, then
 * the reduce-scatter and the all-gather; checks the bits of both. */
static void round_check(world *w, int r)
{
    static float in[NW][NW * PART], sum[NW * PART], h[NW * PART];
    uint32_t s = 7u + (uint32_t)r;
    for (int i = 0; i < NW; i++) {
        for (int k = 0; k < NW * PART; k++) in[i][k] = val(&s);
        put(&w->m[i], w->m[i].src, in[i], NW * PART);
        put(&w->m[i], w->m[i].dst, in[i], NW * PART);
    }
    run_op(w->m, NW, NW, OP_AR, 100 + 3 * r);
    for (int i = 0; i < NW; i++) cr_assert_eq(w->m[i].rc, 0, "%s", w->m[i].err.msg);
    get(&w->m[0], sum, w->m[0].dst, NW * PART);
    run_op(w->m, NW, NW, OP_RS, 101 + 3 * r);
    for (int i = 0; i < NW; i++) {
        cr_assert_eq(w->m[i].rc, 0, "%s", w->m[i].err.msg);
        get(&w->m[i], h, w->m[i].dst, PART);
        cr_expect(!memcmp(h, sum + i * PART, PART * sizeof(float)),
                  "round %d: member %d's part differs from the all-reduce's", r, i);
        get(&w->m[i], h, w->m[i].src, NW * PART);
        cr_expect(!memcmp(h, in[i], sizeof h), "round %d: member %d's src was changed", r, i);
    }
    /* all-gather: member i contributes part i of its own input */
    for (int i = 0; i < NW; i++)
        w->m[i].bk->copy(w->m[i].ctx, w->m[i].src, w->m[i].src + i * PART, PART * sizeof(float));
    run_op(w->m, NW, NW, OP_AG, 102 + 3 * r);
    for (int i = 0; i < NW; i++) {
        cr_assert_eq(w->m[i].rc, 0, "%s", w->m[i].err.msg);
        get(&w->m[i], h, w->m[i].dst, NW * PART);
        for (int j = 0; j < NW; j++)
            cr_expect(!memcmp(h + j * PART, in[j] + j * PART, PART * sizeof(float)),
                      "round %d: member %d holds a wrong part %d", r, i, j);
    }
}

Test(transport_coll, host_path_bits)
{
    world w;
    world_open(&w, hostbk(), 10);
    for (int r = 0; r < 3; r++) round_check(&w, r);
    world_close(&w);
}

Test(transport_coll, device_path_lent_and_reused)
{
    const long bufs = markbk_bufs_live, marks = markbk_marks_live;
    world w;
    world_open(&w, markbk(), 10);
    round_check(&w, 0);
    const long first = markbk_allocs, copies = markbk_peer_copies;
    for (int r = 1; r < 4; r++) round_check(&w, r);
    cr_expect_eq(markbk_allocs, first, "rounds 2 to 4 allocated %ld more buffers",
                 (long)markbk_allocs - first);
    cr_expect_gt(markbk_peer_copies, copies, "the parts travelled by device copies");
    world_close(&w);
    cr_expect_eq(markbk_violations, 0, "marks recorded by their maker, before any wait");
    cr_expect_eq(markbk_bufs_live, bufs, "receive buffers all freed");
    cr_expect_eq(markbk_marks_live, marks);
}

/* Reduce-scatters of the first n members of the group (n = 2 to 4: in place, members 0 and
 * 1 sum into their part, members 2 and 3 through the kept buffer), out of place and then
 * in place on the same inputs: member i's own part of src ends with the bits of the
 * out-of-place dst, and the rest of its src is unchanged. */
static void in_place_check(world *w, int r)
{
    static float in[NW][NW * PART], out[NW][PART], h[NW * PART];
    for (int n = 2; n <= NW; n++) {
        uint32_t s = 31u + (uint32_t)(r * NW + n);
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < n * PART; k++) in[i][k] = val(&s);
            put(&w->m[i], w->m[i].src, in[i], (size_t)n * PART);
        }
        run_op(w->m, n, n, OP_RS, 200 + 2 * (r * NW + n));
        for (int i = 0; i < n; i++) {
            cr_assert_eq(w->m[i].rc, 0, "%s", w->m[i].err.msg);
            get(&w->m[i], out[i], w->m[i].dst, PART);
        }
        run_op(w->m, n, n, OP_RS_IN_PLACE, 201 + 2 * (r * NW + n));
        for (int i = 0; i < n; i++) {
            cr_assert_eq(w->m[i].rc, 0, "%s", w->m[i].err.msg);
            get(&w->m[i], h, w->m[i].src, (size_t)n * PART);
            cr_expect(!memcmp(h + i * PART, out[i], sizeof out[i]), "round %d, %d members: "
                      "member %d's in-place part differs from out of place", r, n, i);
            memcpy(h + i * PART, in[i] + i * PART, sizeof out[i]);
            cr_expect(!memcmp(h, in[i], (size_t)n * PART * sizeof(float)), "round %d, %d "
                      "members: member %d's other parts were changed", r, n, i);
        }
    }
}

Test(transport_coll, in_place_reduce_scatter_bits_host)
{
    world w;
    world_open(&w, hostbk(), 10);
    for (int r = 0; r < 2; r++) in_place_check(&w, r);
    world_close(&w);
}

Test(transport_coll, in_place_reduce_scatter_bits_device)
{
    world w;
    world_open(&w, markbk(), 10);
    for (int r = 0; r < 2; r++) in_place_check(&w, r);
    world_close(&w);
    cr_expect_eq(markbk_violations, 0, "marks recorded by their maker, before any wait");
}

/* A member that never comes: the others fail with the timeout's line, for both. */
Test(transport_coll, missing_member_times_out)
{
    for (int op = OP_RS; op <= OP_AG; op++) {
        world w;
        world_open(&w, markbk(), 1);
        run_op(w.m, NW, NW - 1, op, 5);
        for (int i = 0; i < NW - 1; i++) {
            cr_expect_eq(w.m[i].rc, -1, "op %d member %d", op, i);
            cr_expect(strstr(w.m[i].err.msg, "waited 1 s for message") &&
                      strstr(w.m[i].err.msg, "from worker 1: deadlock or a stalled peer"),
                      "op %d: %s", op, w.m[i].err.msg);
        }
        world_close(&w);
    }
}

static void *abort_later(void *p)
{
    transport *t = p;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    t->abort(t, "worker 1: out of memory");
    return NULL;
}

Test(transport_coll, abort_wakes_members)
{
    for (int op = OP_RS; op <= OP_AG; op++) {
        world w;
        world_open(&w, hostbk(), 60);
        pthread_t a;
        pthread_create(&a, NULL, abort_later, w.t);
        run_op(w.m, NW, NW - 1, op, 5);
        pthread_join(a, NULL);
        for (int i = 0; i < NW - 1; i++) {
            cr_expect_eq(w.m[i].rc, -1);
            cr_expect_str_eq(w.m[i].err.msg, "worker 1: out of memory");
        }
        world_close(&w);
    }
}

Test(transport_coll, not_a_member)
{
    world w;
    world_open(&w, hostbk(), 5);
    static const int other[2] = {0, 2};
    plumb_err e = {{0}};
    member *m = &w.m[3]; /* worker 1 */
    cr_expect_eq(w.t->reduce_scatter(w.t, w.bk, m->ctx, 1, other, 2, 1, m->src, m->dst, PART,
                                     &e), -1);
    cr_expect(strstr(e.msg, "worker 1 is not in the group") != NULL, "%s", e.msg);
    world_close(&w);
}
