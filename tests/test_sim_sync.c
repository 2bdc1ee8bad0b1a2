/* test_sim_sync.c: synchronous point-to-point transfers (sim_model.p2p_sync, a plan's
 * "p2p": "sync"; sim/engine_sync.c) against timelines worked out by hand, and the plan
 * field that asks for them. Two workers on two servers, stage 0 on worker 0, stage 1 on
 * worker 1, two microbatches of 1F1B: F 2 ms, B 4 ms on either stage; every transfer
 * 1e7 bytes at 1e9 bytes/s (10 ms on its link) plus 1 ms latency. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/plan.h"
#include "sim/engine.h"
#include "sim/sim.h"
#include "sim/synth.h"

typedef struct hand {
    schedule s;
    int replicas[2], stage_workers[2], stage_first[2], len[2], wdev[2];
    action a[2][8];
    action *rows[2];
} hand;

static action A(int kind, int stage, int mb, int peer, int peer_stage)
{
    return (action){.kind = kind, .stage = stage, .microbatch = mb, .version = -1,
                    .peer = peer, .peer_stage = peer_stage};
}

static void push(hand *h, int w, action a)
{
    h->a[w][h->len[w]++] = a;
}

/* Worker 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1. Worker 1, with early = 0 as a
 * runtime with blocking calls orders it: RECV_F0 F0 B0 SEND_B0 RECV_F1 F1 B1 SEND_B1;
 * with early = 1 it posts RECV_F1 before B0, as plumb's lowering does. */
static void build(hand *h, int early)
{
    memset(h, 0, sizeof *h);
    h->s.kind = SCHED_1F1B_FLUSH;
    h->s.nworkers = h->s.nstages = 2;
    h->s.chunks = 1;
    h->s.microbatches = 2;
    h->s.iterations = 1;
    h->s.replicas = h->replicas;
    h->s.stage_workers = h->stage_workers;
    h->s.stage_first = h->stage_first;
    h->s.len = h->len;
    h->s.acts = h->rows;
    h->s.worker_device = h->wdev;
    h->replicas[0] = h->replicas[1] = 1;
    h->stage_workers[1] = h->stage_first[1] = 1;
    for (int w = 0; w < 2; w++) {
        h->rows[w] = h->a[w];
        h->wdev[w] = w;
    }
    for (int mb = 0; mb < 2; mb++) {
        push(h, 0, A(ACT_F, 0, mb, -1, -1));
        push(h, 0, A(ACT_SEND_F, 0, mb, 1, 1));
    }
    for (int mb = 0; mb < 2; mb++) {
        push(h, 0, A(ACT_RECV_B, 0, mb, 1, 1));
        push(h, 0, A(ACT_B, 0, mb, -1, -1));
    }
    push(h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(h, 1, A(ACT_F, 1, 0, -1, -1));
    if (early) push(h, 1, A(ACT_RECV_F, 1, 1, 0, 0));
    push(h, 1, A(ACT_B, 1, 0, -1, -1));
    push(h, 1, A(ACT_SEND_B, 1, 0, 0, 0));
    if (!early) push(h, 1, A(ACT_RECV_F, 1, 1, 0, 0));
    push(h, 1, A(ACT_F, 1, 1, -1, -1));
    push(h, 1, A(ACT_B, 1, 1, -1, -1));
    push(h, 1, A(ACT_SEND_B, 1, 1, 0, 0));
}

/* The makespan of the hand schedule under p2p_sync = sync; r keeps the result. */
static double run(int early, int sync, sim_result *r)
{
    hand h;
    build(&h, early);
    sim_synth sp;
    sim_synth_init(&sp);
    sp.devices_per_server = 1;
    sp.servers = 2;
    sp.bw_gbit[1] = 8; /* 1e9 bytes/s */
    sp.latency_us[1] = 1000;
    plumb_err e;
    cluster *c = sim_synth_cluster(&sp, &e);
    cr_assert_not_null(c, "%s", e.msg);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int st = 0; st < 2; st++) {
        m.act_s[st * SIM_NC + SIM_C_F] = 2e-3;
        m.act_s[st * SIM_NC + SIM_C_B] = 4e-3;
    }
    m.cut_bytes[0] = 1e7;
    m.p2p_sync = sync;
    m.record = 1;
    cr_assert_eq(sim_engine_run(&m, r, &e), 0, "%s", e.msg);
    sim_model_release(&m);
    cluster_free(c);
    return r->makespan_s;
}

/* The start of the first timeline event of worker w's device track with this kind and
 * microbatch, or -1. */
static double start_of(const sim_result *r, int dev, int kind, int mb)
{
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *ev = &r->tl->ev[i];
        if (ev->kind == kind && ev->microbatch == mb &&
            r->tl->tracks[ev->track].kind == TL_TRACK_DEVICE &&
            r->tl->tracks[ev->track].device == dev)
            return ev->start_s;
    }
    return -1;
}

/* The start of transfer kind (TL_SEND_F / TL_SEND_B) of microbatch mb on its link. */
static double link_start(const sim_result *r, int kind, int mb)
{
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *ev = &r->tl->ev[i];
        if (ev->kind == kind && ev->microbatch == mb &&
            r->tl->tracks[ev->track].kind == TL_TRACK_LINK)
            return ev->start_s;
    }
    return -1;
}

#define NEAR(x, y) (fabs((x) - (y)) < 1e-12)

/* Overlapped (the default), by hand: F0 [0, 2] on worker 0, its send on the link [2, 12],
 * arrives 13; F1 [2, 4], its send queued behind, [12, 22], arrives 23. Worker 1: F0
 * [13, 15], B0 [15, 19], its send [19, 29] arrives 30; F1 [23, 25], B1 [25, 29], its send
 * [29, 39] arrives 40. Worker 0: B0 [30, 34], B1 [40, 44]: 44 ms. */
Test(sim_sync, overlap_by_hand)
{
    sim_result r;
    double t = run(0, 0, &r);
    cr_expect(NEAR(t, 44e-3), "makespan %.9g s", t);
    cr_expect(NEAR(start_of(&r, 0, TL_F, 1), 2e-3));
    cr_expect(NEAR(start_of(&r, 1, TL_F, 1), 23e-3));
    cr_expect(NEAR(start_of(&r, 0, TL_B, 1), 40e-3));
    cr_expect(NEAR(link_start(&r, TL_SEND_F, 1), 12e-3));
    sim_result_free(&r);
}

/* Synchronous, by hand: F0 [0, 2]; worker 1 has posted RECV_F0, so its send moves at once,
 * [2, 12], arrives 13, and worker 0 computes again only then: F1 [13, 15]. Worker 1: F0
 * [13, 15], B0 [15, 19]. At 15 worker 0's send of F1 is held (worker 1 posts RECV_F1
 * only after its B0 and SEND_B0), so its B0 waits. At 19 worker 1 sends B0 (worker 0
 * posted RECV_B0): [19, 29], arrives 30; it posts RECV_F1, which releases F1's send:
 * [19, 29] on the other link, arrives 30. Worker 1 waits for its send: F1 [30, 32], B1
 * [32, 34 + 2]; worker 0: B0 [30, 34], then posts RECV_B1. Worker 1's send of B1 at 36
 * moves at once: [36, 46], arrives 47; worker 0's B1 [47, 51]: 51 ms. */
Test(sim_sync, sync_by_hand)
{
    sim_result r;
    double t = run(0, 1, &r);
    cr_expect(NEAR(t, 51e-3), "makespan %.9g s", t);
    cr_expect(NEAR(start_of(&r, 0, TL_F, 1), 13e-3), "worker 0 F1 at %g",
              start_of(&r, 0, TL_F, 1));
    cr_expect(NEAR(start_of(&r, 0, TL_B, 0), 30e-3));
    cr_expect(NEAR(start_of(&r, 1, TL_F, 1), 30e-3));
    cr_expect(NEAR(start_of(&r, 1, TL_B, 1), 32e-3));
    cr_expect(NEAR(start_of(&r, 0, TL_B, 1), 47e-3));
    cr_expect(NEAR(link_start(&r, TL_SEND_F, 1), 19e-3), "F1's send moves at %g",
              link_start(&r, TL_SEND_F, 1));
    cr_expect(NEAR(link_start(&r, TL_SEND_B, 1), 36e-3));
    sim_result_free(&r);
}

/* A receive posted early (plumb's lowering) is moved to the runtime's batch before its
 * consumer: the same timeline as the list ordered that way, F1's send moving at 19.
 * Without the move, worker 1 would post RECV_F1 when its F0 ends, at 15, and F1's send,
 * issued at 15, would move at once. */
Test(sim_sync, early_receive_joins_its_batch)
{
    sim_result r;
    double t = run(1, 1, &r);
    cr_expect(NEAR(t, 51e-3), "makespan %.9g s", t);
    cr_expect(NEAR(start_of(&r, 1, TL_F, 1), 30e-3));
    cr_expect(NEAR(link_start(&r, TL_SEND_F, 1), 19e-3), "F1's send moves at %g",
              link_start(&r, TL_SEND_F, 1));
    sim_result_free(&r);
    t = run(1, 0, &r);  /* overlapped: where the RECV sits changes nothing */
    cr_expect(NEAR(t, 44e-3), "makespan %.9g s", t);
    sim_result_free(&r);
}

/* The plan field: "p2p": "sync" loads, is written back, and is what sim_run simulates; a
 * value other than overlap or sync is one clear error naming the field. */
Test(sim_sync, plan_field)
{
    plumb_err e;
    plan *pl = plan_load("examples/plans/vgg16-4stage-1f1b.json", &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_expect_eq(pl->p2p_sync, 0);
    cJSON *j = plan_to_json(pl);
    cr_assert_not_null(j);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "p2p"), "overlap is not written");
    cJSON_AddStringToObject(j, "p2p", "sync");
    plan *ps = plan_from_json(j, "x.json", &e);
    cr_assert_not_null(ps, "%s", e.msg);
    cr_expect_eq(ps->p2p_sync, 1);
    cJSON *back = plan_to_json(ps);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(back, "p2p");
    cr_expect(cJSON_IsString(v) && !strcmp(v->valuestring, "sync"));
    cr_expect(!plan_equal(pl, ps));
    sim_report *r0 = sim_run(pl, NULL, &e), *r1 = sim_run(ps, NULL, &e);
    cr_assert(r0 && r1, "%s", e.msg);
    cr_expect(r1->iteration_s > r0->iteration_s, "sync %g s, overlap %g s", r1->iteration_s,
              r0->iteration_s);
    sim_report_free(r0);
    sim_report_free(r1);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "p2p", cJSON_CreateString("blocking"));
    cr_expect_null(plan_from_json(j, "x.json", &e));
    cr_expect(strstr(e.msg, "x.json: p2p: expected overlap or sync (got \"blocking\")") != NULL,
              "%s", e.msg);
    cJSON_Delete(back);
    cJSON_Delete(j);
    plan_free(ps);
    plan_free(pl);
}
