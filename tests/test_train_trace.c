/* test_train_trace.c: train_trace_gather (exec/train_trace.c), the trace of a run spread
 * over processes. Three threads stand for three mpirun processes over a transport whose
 * allsum_double is written here (a sum under a lock between two barriers, as MPI's
 * all-reduce gives every process the sum); each has timed its own events, one has timed
 * none, and after the gather every one must hold all of them, on the right tracks with
 * their peak memory and tensor-parallel rank, sorted as timeline_sort sorts; and the
 * text of a transport message tag. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "core/timeline.h"
#include "exec/runtime.h"
#include "exec/runtime_trace.h"
#include "exec/train.h"

#define NP 3

typedef struct world {
    pthread_mutex_t mu;
    pthread_barrier_t bar;
    double sum[4096];
} world;

static int allsum(transport *t, double *buf, size_t count, plumb_err *err)
{
    world *w = t->impl;
    if (count > sizeof w->sum / sizeof w->sum[0])
        return err_set(err, NULL, NULL, "test transport: %zu numbers", count);
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < count; i++) w->sum[i] += buf[i];
    pthread_mutex_unlock(&w->mu);
    pthread_barrier_wait(&w->bar);
    memcpy(buf, w->sum, count * sizeof *buf);
    if (pthread_barrier_wait(&w->bar) == PTHREAD_BARRIER_SERIAL_THREAD) /* all have read */
        memset(w->sum, 0, sizeof w->sum);
    pthread_barrier_wait(&w->bar);
    return 0;
}

typedef struct proc {
    transport *tr;
    int rank;
    timeline *tl;
    int rc;
    plumb_err err;
} proc;

static void *run(void *arg)
{
    proc *p = arg;
    p->rc = train_trace_gather(p->tr, p->rank, NP, &p->tl, &p->err);
    return NULL;
}

/* Process r's own trace: rank 2 timed nothing; ranks 0 and 1 a forward on their device
 * (2 r), rank 0 a send to device 2, and rank 1 also a tensor-parallel all-reduce as the
 * second rank of device 0's group (a track of tp rank 1). */
static timeline *own_trace(int r)
{
    if (r == 2) return NULL;
    timeline *tl = timeline_new("exec");
    cr_assert_not_null(tl);
    int dev = timeline_track(tl, TL_TRACK_DEVICE, 2 * r, -1, NULL);
    tl->tracks[dev].peak_bytes = 1000.0 * (r + 1);
    tl_event f = {r ? 0.3 : 0.5, 0.1, 0, dev, TL_F, r, -1, 3 + r, 1};
    cr_assert_eq(timeline_add(tl, &f), 0);
    if (r == 0) {
        int link = timeline_track(tl, TL_TRACK_LINK, 0, 2, NULL);
        tl_event s = {0.7, 0.05, 4096, link, TL_SEND_F, 0, 1, 3, 1};
        cr_assert_eq(timeline_add(tl, &s), 0);
    } else {
        int tp = timeline_track_tp(tl, TL_TRACK_COLLECTIVE, 0, -1, 1, NULL);
        tl_event ar = {0.55, 0.01, 512, tp, TL_TP_ALLREDUCE, 0, -1, 3, 1};
        cr_assert_eq(timeline_add(tl, &ar), 0);
    }
    return tl;
}

Test(train_trace, every_process_gets_every_event)
{
    world w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    pthread_barrier_init(&w.bar, NULL, NP);
    transport tr = {.name = "test", .impl = &w, .allsum_double = allsum};
    proc ps[NP];
    pthread_t th[NP];
    for (int r = 0; r < NP; r++) {
        ps[r] = (proc){&tr, r, own_trace(r), -1, {{0}}};
        cr_assert_eq(pthread_create(&th[r], NULL, run, &ps[r]), 0);
    }
    for (int r = 0; r < NP; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < NP; r++) {
        timeline *tl = ps[r].tl;
        cr_assert_eq(ps[r].rc, 0, "rank %d: %s", r, ps[r].err.msg);
        cr_assert_not_null(tl, "rank %d", r);
        cr_assert_eq(tl->n, 4, "rank %d has %zu events", r, tl->n);
        /* sorted by (track, start) as timeline_sort does: the tracks in the order of the
         * processes, rank 0's device (its F at 0.5 s) and link (the send), rank 1's device
         * (its F at 0.3 s) */
        const tl_event *b = &tl->ev[0], *c = &tl->ev[1], *a = &tl->ev[2];
        cr_assert(a->start_s == 0.3 && a->kind == TL_F && a->stage == 1 && a->microbatch == 4,
                  "%g %d %d %d", a->start_s, a->kind, a->stage, a->microbatch);
        cr_assert(b->start_s == 0.5 && b->kind == TL_F && b->stage == 0 && b->microbatch == 3);
        cr_assert(c->kind == TL_SEND_F && c->bytes == 4096 && c->peer_stage == 1 &&
                  c->dur_s == 0.05 && c->iteration == 1);
        const tl_track *ta = &tl->tracks[a->track], *tb = &tl->tracks[b->track],
                       *tc = &tl->tracks[c->track];
        cr_assert(ta->kind == TL_TRACK_DEVICE && ta->device == 2 && ta->peak_bytes == 2000);
        cr_assert(tb->device == 0 && tb->peak_bytes == 1000);
        cr_assert(tc->kind == TL_TRACK_LINK && tc->device == 0 && tc->peer == 2);
        cr_assert(ta->tp_rank == 0 && tb->tp_rank == 0 && tc->tp_rank == 0);
        /* the tp rank's collective: on its own track, not device 0's rank 0 */
        const tl_event *d = &tl->ev[3];
        const tl_track *td = &tl->tracks[d->track];
        cr_assert(d->kind == TL_TP_ALLREDUCE && d->bytes == 512 && d->microbatch == 3 &&
                  d->start_s == 0.55, "%d %g", d->kind, d->bytes);
        cr_assert(td->kind == TL_TRACK_COLLECTIVE && td->device == 0 && td->tp_rank == 1,
                  "track %d device %d tp rank %d", td->kind, td->device, td->tp_rank);
        timeline_free(tl);
    }
    pthread_barrier_destroy(&w.bar);
    pthread_mutex_destroy(&w.mu);
}

/* A transport's timeout names a message by its tag; runtime_tag_text reads it back as what
 * it carries: pipeline messages ((microbatch x stages + receiving stage) x 2 + gradient)
 * and both messages (-(2 t + 1), -(2 t + 2)) of collective t, tensor-parallel (from 2^40
 * on, numbered from 1), a replicas' all-reduce (stage x 1000003 + round) or, under zero 1,
 * their reduce-scatter or all-gather (from 2^36 on, as the all-reduce). */
Test(train_trace, message_tags_read_as_what_they_carry)
{
    schedule s;
    memset(&s, 0, sizeof s);
    s.nstages = 2;
    char buf[128];
    runtime_tag_text(&s, (5 * 2 + 1) * 2 + 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "the output gradient of microbatch 5 for stage 1");
    runtime_tag_text(&s, (3 * 2 + 0) * 2 + 0, buf, sizeof buf);
    cr_assert_str_eq(buf, "the activations of microbatch 3 for stage 0");
    long t = (1L << 40) + 24;
    runtime_tag_text(&s, -(2 * t + 1), buf, sizeof buf);
    cr_assert_str_eq(buf, "the tensor-parallel group's collective 25");
    runtime_tag_text(&s, -(2 * t + 2), buf, sizeof buf);
    cr_assert_str_eq(buf, "the tensor-parallel group's collective 25");
    t = 1 * 1000003L + 2;
    runtime_tag_text(&s, -(2 * t + 2), buf, sizeof buf);
    cr_assert_str_eq(buf, "the replicas' all-reduce 3 of stage 1");
    t = (1L << 36) + 1 * 1000003L + 4; /* zero 1: reduce-scatters and all-gathers */
    runtime_tag_text(&s, -(2 * t + 1), buf, sizeof buf);
    cr_assert_str_eq(buf, "the replicas' reduce-scatter or all-gather 5 of stage 1 (zero 1)");
}

/* The transport's collective messages (exec/transport.h) and the runtime's own tags
 * (exec/runtime_trace.h) are the numbers the test above reads back. */
Test(train_trace, tags_are_made_as_they_are_read)
{
    schedule s;
    memset(&s, 0, sizeof s);
    s.nstages = 2;
    cr_assert_eq(rt_msg_tag(&s, 5, 1, 1), (5 * 2 + 1) * 2 + 1);
    cr_assert_eq(rt_msg_tag(&s, 3, 0, 0), (3 * 2 + 0) * 2 + 0);
    cr_assert_eq(rt_tp_tag(24), (1L << 40) + 24);
    cr_assert_eq(rt_ar_tag(1, 2), 1 * 1000003L + 2);
    long t = rt_tp_tag(24), back = -7;
    cr_assert_eq(transport_coll_tag(t, 0), -(2 * t + 1));
    cr_assert_eq(transport_coll_tag(t, 1), -(2 * t + 2));
    cr_assert(transport_tag_coll(transport_coll_tag(t, 0), &back) && back == t);
    cr_assert(transport_tag_coll(transport_coll_tag(0, 1), &back) && back == 0);
    cr_assert(!transport_tag_coll(rt_msg_tag(&s, 0, 0, 0), &back) && back == 0);
}
