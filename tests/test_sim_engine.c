/* test_sim_engine.c: the discrete-event engine on hand-built schedules and models: egress
 * port contention, link FIFO order, latency, the errors for malformed or deadlocking IR,
 * and synchronous point-to-point transfers (a plan's "p2p": "sync") with that plan field.
 * Times are seconds; a "unit" transfer of 1e7 bytes at 1e9 bytes/s takes 10 ms. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/plan.h"
#include "core/schedule_traits.h"
#include "sim/engine.h"
#include "sim/engine_impl.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/planfix.h"
#include "tests/synth.h"

#define MAXA 8

/* A schedule of up to 4 workers with literal action lists. */
typedef struct hand {
    schedule s;
    int replicas[4], stage_workers[8], stage_first[4], len[4], wdev[4];
    action a[4][MAXA];
    action *rows[4];
} hand;

static action A(int kind, int stage, int mb, int peer, int peer_stage)
{
    return (action){.kind = kind, .stage = stage, .microbatch = mb, .version = -1,
                    .peer = peer, .peer_stage = peer_stage};
}

static void hand_init(hand *h, int nworkers, int nstages)
{
    memset(h, 0, sizeof *h);
    h->s.kind = SCHED_GPIPE;
    h->s.nworkers = nworkers;
    h->s.nstages = nstages;
    h->s.chunks = 1;
    h->s.microbatches = 2;
    h->s.iterations = 1;
    h->s.replicas = h->replicas;
    h->s.stage_workers = h->stage_workers;
    h->s.stage_first = h->stage_first;
    h->s.len = h->len;
    h->s.acts = h->rows;
    h->s.worker_device = h->wdev;
    for (int w = 0; w < 4; w++) {
        h->rows[w] = h->a[w];
        h->wdev[w] = w;
    }
}

static void push(hand *h, int w, action a)
{
    h->a[w][h->len[w]++] = a;
}

/* Two workers, stage 0 on worker 0 and stage 1 on worker 1, empty lists. */
static void hand_pair(hand *h)
{
    hand_init(h, 2, 2);
    h->replicas[0] = h->replicas[1] = 1;
    h->stage_workers[1] = 1;
    h->stage_first[1] = 1;
}

/* Two servers of one device each, 1e9 bytes/s (8 Gb/s) and latency_us between them. */
static cluster *two_servers(double latency_us)
{
    return synth_servers(2, 1, 1, 8, 0, latency_us);
}

/* Runs m and returns its makespan; releases m and c. */
static double makespan_and_free(sim_model *m, cluster *c)
{
    sim_result r;
    plumb_err e;
    cr_assert_eq(sim_engine_run(m, &r, &e), 0, "%s", e.msg);
    double t = r.makespan_s;
    sim_result_free(&r);
    sim_model_release(m);
    cluster_free(c);
    return t;
}

/* Two senders on server 0 (devices 0, 1) each send one unit transfer to server 1
 * (devices 2, 3) after a 1 ms forward; receivers then run a 1 ms forward.
 * One egress lane (egress = bandwidth): the transfers queue, makespan 1 + 10 + 10 + 1 ms.
 * Two lanes (egress = 2 x bandwidth): they overlap, makespan 1 + 10 + 1 ms. */
static double contention_makespan(double egress_gbit, sim_result *out)
{
    hand h;
    hand_init(&h, 4, 2);
    h.replicas[0] = h.replicas[1] = 2;
    h.stage_first[1] = 2;
    for (int i = 0; i < 4; i++)
        h.stage_workers[i] = i;
    for (int w = 0; w < 2; w++) {
        push(&h, w, A(ACT_F, 0, w, -1, -1));
        push(&h, w, A(ACT_SEND_F, 0, w, w + 2, 1));
        push(&h, w + 2, A(ACT_RECV_F, 1, w, w, 0));
        push(&h, w + 2, A(ACT_F, 1, w, -1, -1));
    }
    cluster *c = synth_servers(2, 2, 1, 8, egress_gbit, 0); /* 1e9 bytes/s */
    plumb_err e;
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int st = 0; st < 2; st++)
        m.act_s[st * SIM_NC + SIM_C_F] = 1e-3;
    m.cut_bytes[0] = 1e7;
    cr_assert_eq(sim_engine_run(&m, out, &e), 0, "%s", e.msg);
    sim_model_release(&m);
    cluster_free(c);
    return out->makespan_s;
}

Test(sim_engine, egress_contention)
{
    sim_result r;
    double one = contention_makespan(8, &r);
    cr_expect(fabs(one - 22e-3) < 1e-12, "one lane: %g s", one);
    cr_expect_eq(r.nlinks, 2);
    cr_expect(fabs(r.links[0].busy_s - 10e-3) < 1e-12);
    sim_result_free(&r);
    double two = contention_makespan(16, &r);
    cr_expect(fabs(two - 12e-3) < 1e-12, "two lanes: %g s", two);
    sim_result_free(&r);
    /* egress below bandwidth: one transfer alone runs at the egress rate (0.5e9 B/s) */
    double slow = contention_makespan(4, &r);
    cr_expect(fabs(slow - (1e-3 + 20e-3 + 20e-3 + 1e-3)) < 1e-12, "half egress: %g s", slow);
    sim_result_free(&r);
}

/* A device's own egress port (level 0): device 0 sends one unit transfer to each of devices
 * 1 and 2 (same server) at once after a 1 ms forward. Egress = bandwidth: one lane, the
 * second transfer waits: 1 + 10 + 10 + 1 ms. Egress = 2 x bandwidth: 1 + 10 + 1 ms. */
static double fanout_makespan(double egress_gbit)
{
    hand h;
    hand_init(&h, 3, 2);
    h.replicas[0] = 1;
    h.replicas[1] = 2;
    h.stage_first[1] = 1;
    for (int i = 0; i < 3; i++)
        h.stage_workers[i] = i;
    push(&h, 0, A(ACT_F, 0, 0, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 0, A(ACT_SEND_F, 0, 1, 2, 1));
    for (int w = 1; w < 3; w++) {
        push(&h, w, A(ACT_RECV_F, 1, w - 1, 0, 0));
        push(&h, w, A(ACT_F, 1, w - 1, -1, -1));
    }
    cluster *c = synth_servers(1, 4, 0, 8, egress_gbit, 0);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    m.act_s[0 * SIM_NC + SIM_C_F] = m.act_s[1 * SIM_NC + SIM_C_F] = 1e-3;
    m.cut_bytes[0] = 1e7;
    return makespan_and_free(&m, c);
}

Test(sim_engine, device_egress_port)
{
    double one = fanout_makespan(8), two = fanout_makespan(16);
    cr_expect(fabs(one - 22e-3) < 1e-12, "one lane: %g s", one);
    cr_expect(fabs(two - 12e-3) < 1e-12, "two lanes: %g s", two);
}

/* One link carries transfers in the order they were issued; latency delays the arrival but
 * does not hold the link: two back-to-back sends of 10 ms with 5 ms latency arrive at
 * 1 + 10 + 5 and 1 + 20 + 5 ms (the receiver's forwards then end at 17 and 27 ms). */
Test(sim_engine, link_fifo_and_latency)
{
    hand h;
    hand_init(&h, 2, 2);
    h.replicas[0] = h.replicas[1] = 1;
    h.stage_workers[0] = 0;
    h.stage_workers[1] = 1;
    h.stage_first[1] = 1;
    push(&h, 0, A(ACT_F, 0, 0, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 0, A(ACT_F, 0, 1, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 1, 1, 1));
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_F, 1, 0, -1, -1));
    push(&h, 1, A(ACT_RECV_F, 1, 1, 0, 0));
    push(&h, 1, A(ACT_F, 1, 1, -1, -1));
    plumb_err e;
    cluster *c = two_servers(5000);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    m.act_s[0 * SIM_NC + SIM_C_F] = 1e-3;
    m.act_s[1 * SIM_NC + SIM_C_F] = 1e-3;
    m.cut_bytes[0] = 1e7;
    m.record = 1;
    sim_result r;
    cr_assert_eq(sim_engine_run(&m, &r, &e), 0, "%s", e.msg);
    /* first transfer occupies 1..11 ms, the second waits for the link: 11..21 ms (the
     * sender's second forward ran 1..2 ms) */
    double f1_end = -1;
    for (size_t i = 0; i < r.tl->n; i++) {
        const tl_event *ev = &r.tl->ev[i];
        if (ev->kind == TL_F && ev->stage == 1 && ev->microbatch == 1)
            f1_end = ev->start_s + ev->dur_s;
        if (ev->kind == TL_SEND_F && ev->microbatch == 1)
            cr_expect(fabs(ev->start_s - 11e-3) < 1e-12, "second transfer at %g", ev->start_s);
    }
    cr_expect(fabs(f1_end - 27e-3) < 1e-12, "%g", f1_end);
    cr_expect(fabs(r.makespan_s - 27e-3) < 1e-12, "%g", r.makespan_s);
    cr_expect_eq(r.events > 0, 1);
    sim_result_free(&r);
    sim_model_release(&m);
    cluster_free(c);
}

static int run_expect_error(hand *h, const char *needle)
{
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h->s), 0);
    m.net.nlevels = 1;
    m.net.gsize[0] = 1000;
    m.net.bw[0] = m.net.egress[0] = 1e9;
    m.act_s[SIM_C_F] = 1e-3;
    sim_result r;
    plumb_err e;
    err_clear(&e);
    int rc = sim_engine_run(&m, &r, &e);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(e.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", e.msg, needle);
    sim_model_release(&m);
    return rc;
}

/* Both workers receive before they send: a cycle, reported with the waiting action. */
Test(sim_engine, deadlock_reported)
{
    hand h;
    hand_pair(&h);
    push(&h, 0, A(ACT_RECV_B, 0, 0, 1, 1));
    push(&h, 0, A(ACT_B, 0, 0, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_F, 1, 0, -1, -1));
    push(&h, 1, A(ACT_SEND_B, 1, 0, 0, 0));
    run_expect_error(&h, "deadlocks: worker 0 waits forever at action 1 (0B0): its data is "
                     "never sent");
}

/* Posting a receive never blocks: the same lists without the consumers run, and the
 * receives left untaken are reported. */
Test(sim_engine, receive_posted_not_taken)
{
    hand h;
    hand_pair(&h);
    push(&h, 0, A(ACT_RECV_B, 0, 0, 1, 1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_SEND_B, 1, 0, 0, 0));
    run_expect_error(&h, "(0RECV_B0): receive posted but no later computation");
}

Test(sim_engine, unmatched_receive)
{
    hand h;
    hand_pair(&h);
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_F, 1, 0, -1, -1));
    run_expect_error(&h, "(1F0): its data is never sent");
}

/* A transfer naming a worker or stage outside the schedule is refused with its action,
 * on either side of the range (the checks compare as unsigned: -1 is out of range too). */
Test(sim_engine, transfer_peer_out_of_range)
{
    static const struct { int kind, peer, peer_stage; const char *msg; } bad[] = {
        {ACT_SEND_F, -1, 1, "(0SEND_F0): peer worker or stage out of range"},
        {ACT_SEND_F, 2, 1, "(0SEND_F0): peer worker or stage out of range"},
        {ACT_SEND_F, 1, -1, "(0SEND_F0): peer worker or stage out of range"},
        {ACT_SEND_F, 1, 2, "(0SEND_F0): peer worker or stage out of range"},
        {ACT_RECV_B, -1, 1, "(0RECV_B0): peer worker out of range"},
        {ACT_RECV_B, 2, 1, "(0RECV_B0): peer worker out of range"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hand h;
        hand_pair(&h);
        push(&h, 0, A(ACT_F, 0, 0, -1, -1));
        push(&h, 0, A(bad[i].kind, 0, 0, bad[i].peer, bad[i].peer_stage));
        run_expect_error(&h, bad[i].msg);
    }
}

/* sim_steady_window by its definition, each computation's iteration divided out of its
 * microbatch (microbatch / microbatches, 0 for none, at most the last), against the
 * engine's, which divides only when a worker's microbatches move to another iteration. */
static int window_by_division(const schedule *s, int *k0, int *k1)
{
    int n = s->iterations > 0 ? s->iterations : 1, nmb = s->microbatches, overlap = 0, D = 0;
    int cnt[8];
    for (int w = 0; w < s->nworkers; w++) {
        memset(cnt, 0, sizeof cnt);
        int oldest = 0, inflight = 0, most = 0;
        long nf = 0;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind != ACT_F && a->kind != ACT_B && a->kind != ACT_W) continue;
            int it = a->microbatch >= 0 && nmb > 0 ? a->microbatch / nmb : 0;
            it = it >= n ? n - 1 : it;
            if (a->kind == ACT_F) {
                while (oldest < it && cnt[oldest] == 0) oldest++;
                if (inflight > 0 && oldest < it) overlap = 1;
                cnt[it]++, nf++;
                if (++inflight > most) most = inflight;
            } else if (cnt[it] > 0) {
                cnt[it]--, inflight--;
            }
        }
        if (nf > 0) {
            int d = (int)ceil(most / ((double)nf / n) - 1e-9);
            if (d > D) D = d;
        }
    }
    if (!overlap) {
        *k0 = 1, *k1 = n - 1;
        return 3;
    }
    *k0 = D + 1, *k1 = n - 1 - D;
    return 2 * D + 3;
}

Test(sim_engine, steady_window_iterations_as_divided)
{
    enum { NA = 48 };
    static const int kinds[] = {ACT_F, ACT_F, ACT_B, ACT_W, ACT_I, ACT_STEP, ACT_SEND_F};
    unsigned x = 12345;
    int moved = 0;
    for (int trial = 0; trial < 400; trial++) {
        action a[3][NA], *rows[3];
        int len[3];
        schedule s = {0};
        s.nworkers = 1 + trial % 3, s.microbatches = trial % 7 == 6 ? 0 : 1 + trial % 5;
        s.iterations = 1 + trial % 6;
        s.len = len, s.acts = rows;
        int top = (s.microbatches > 0 ? s.microbatches : 4) * (s.iterations + 1);
        for (int w = 0; w < s.nworkers; w++) {
            rows[w] = a[w], len[w] = NA;
            int mb = 0;
            for (int i = 0; i < NA; i++) {
                x = x * 1103515245u + 12345u;
                unsigned r = x >> 8;
                /* mostly the next microbatches, now and then a jump (back, far, none) */
                if (r % 5 == 0) mb = (int)(r / 5 % (unsigned)(top + 2)) - 1, moved++;
                else mb += (int)(r / 5 % 3);
                a[w][i] = (action){.kind = kinds[r / 16 % 7], .stage = 0,
                                   .microbatch = mb, .version = -1, .peer = -1,
                                   .peer_stage = -1};
            }
        }
        int k0, k1, r0, r1;
        int got = sim_steady_window(&s, &k0, &k1), want = window_by_division(&s, &r0, &r1);
        cr_assert_eq(got, want, "trial %d: need %d, by division %d", trial, got, want);
        cr_assert(k0 == r0 && k1 == r1, "trial %d: window %d..%d, by division %d..%d", trial,
                  k0, k1, r0, r1);
    }
    cr_assert_gt(moved, 1000);
}

Test(sim_engine, net_path_levels)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.devices_per_server = 4;
    sp.servers = 2;
    sp.bw_gbit[0] = 800;
    sp.bw_gbit[1] = 80;
    sp.latency_us[0] = 1;
    sp.latency_us[1] = 20;
    cluster *c = synth_cluster_of(&sp);
    sim_net n;
    sim_net_from_cluster(&n, c, NULL);
    double rate, lat;
    cr_expect_eq(sim_net_path(&n, 0, 3, &rate, &lat), 0);
    cr_expect(fabs(rate - 1e11) < 1 && fabs(lat - 1e-6) < 1e-15);
    cr_expect_eq(sim_net_path(&n, 3, 4, &rate, &lat), 1);
    cr_expect(fabs(rate - 1e10) < 1 && fabs(lat - 20e-6) < 1e-15);
    cr_expect_eq(sim_net_path(&n, 2, 2, &rate, &lat), -1);
    /* ring of 0, 1, 4, 5: slowest hop crosses servers; one hop leaves each server */
    int devs[] = {0, 1, 4, 5};
    double t = sim_net_allreduce_s(&n, devs, 4, 1e9);
    cr_expect(fabs(t - (2.0 * 3 / 4 * 1e9 / 1e10 + 2.0 * 3 * 20e-6)) < 1e-12, "%g", t);
    /* ring 0, 4, 1, 5: two hops leave each server through one port: half the rate */
    int devs2[] = {0, 4, 1, 5};
    double t2 = sim_net_allreduce_s(&n, devs2, 4, 1e9);
    cr_expect(fabs(t2 - (2.0 * 3 / 4 * 1e9 / 0.5e10 + 2.0 * 3 * 20e-6)) < 1e-12, "%g", t2);
    /* a bandwidth override on level 1 */
    double ov[CLUSTER_MAX_LEVELS] = {0, 4e9};
    sim_net_from_cluster(&n, c, ov);
    sim_net_path(&n, 0, 4, &rate, &lat);
    cr_expect(fabs(rate - 4e9) < 1);
    cluster_free(c);
}

/* Two servers of four devices: 1e11 bytes/s inside a server, 1e9 bytes/s (8 Gb/s) per
 * network port between them and egress_gbit out of each server (egress / bandwidth lanes),
 * no latency. */
static cluster *rail_servers(double egress_gbit)
{
    sim_synth s;
    sim_synth_init(&s);
    s.servers = 2;
    s.devices_per_server = 4;
    s.bw_gbit[0] = 800;
    s.bw_gbit[1] = 8;
    s.egress_gbit[1] = egress_gbit;
    return synth_cluster_of(&s);
}

/* A ring with k members in each server moves its inter-server hop over min(k, lanes)
 * lanes (sim_net_ring_widths), as a collective library's channels leave a rail-optimized
 * server through several devices' ports. Worked by hand for 1e9 bytes: */
Test(sim_engine, net_ring_rails)
{
    int eight[] = {0, 1, 2, 3, 4, 5, 6, 7}, two[] = {0, 4}, zig[] = {0, 4, 1, 5};
    int w[8];
    /* 4 members per server, 8 lanes: the two crossing hops (3 -> 4, 7 -> 0) 4 wide, so
     * the ring runs at 4e9 bytes/s: 2 x 7/8 x 1e9 / 4e9 = 0.4375 s */
    cluster *c = rail_servers(64);
    sim_net n;
    sim_net_from_cluster(&n, c, NULL);
    cr_assert_eq(sim_net_lanes(&n, 1), 8);
    cr_assert_eq(sim_net_ring_widths(&n, eight, 8, w), 0);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(w[i], i == 3 || i == 7 ? 4 : 1, "hop %d: width %d", i, w[i]);
    double t = sim_net_allreduce_s(&n, eight, 8, 1e9);
    cr_expect(fabs(t - 0.4375) < 1e-12, "4 per server, 8 lanes: %.12g s", t);
    /* one member per server: one lane, as before: 2 x 1/2 x 1e9 / 1e9 = 1 s */
    t = sim_net_allreduce_s(&n, two, 2, 1e9);
    cr_expect(fabs(t - 1.0) < 1e-12, "1 per server: %.12g s", t);
    /* 0 -> 4 -> 1 -> 5: two members and two hops out of each server, 1 lane each (and
     * the port's 8e9 bytes/s shared by two): 2 x 3/4 x 1e9 / 1e9 = 1.5 s */
    cr_assert_eq(sim_net_ring_widths(&n, zig, 4, w), 0);
    cr_expect(w[0] == 1 && w[1] == 1 && w[2] == 1 && w[3] == 1);
    t = sim_net_allreduce_s(&n, zig, 4, 1e9);
    cr_expect(fabs(t - 1.5) < 1e-12, "zigzag: %.12g s", t);
    cluster_free(c);
    /* 3 lanes: the crossing hops 3 wide: 2 x 7/8 x 1e9 / 3e9 */
    c = rail_servers(24);
    sim_net_from_cluster(&n, c, NULL);
    t = sim_net_allreduce_s(&n, eight, 8, 1e9);
    cr_expect(fabs(t - 1.75 / 3) < 1e-12, "4 per server, 3 lanes: %.12g s", t);
    cluster_free(c);
    /* egress = bandwidth (one lane): the slowest hop's 1e9 bytes/s, as before */
    c = rail_servers(0);
    sim_net_from_cluster(&n, c, NULL);
    cr_assert_eq(sim_net_ring_widths(&n, eight, 8, w), 0);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(w[i], 1);
    t = sim_net_allreduce_s(&n, eight, 8, 1e9);
    cr_expect(fabs(t - 1.75) < 1e-12, "one lane: %.12g s", t);
    cluster_free(c);
}

/* The level devices a != b meet at, by its definition (test's own). */
static int meet_level(const sim_net *n, int a, int b)
{
    int l = 0;
    while (l < n->nlevels - 1 && a / n->gsize[l] != b / n->gsize[l])
        l++;
    return l;
}

/* sim_net_ring_widths against its definition, replayed in O(r^2) per hop: random rings
 * (ascending, shuffled, with repeated devices) on a three-level net of 4 devices per
 * server, 4 servers per pod, 4 lanes per server port and 3 per pod port. */
Test(sim_engine, net_ring_widths_by_definition)
{
    sim_net n = {.nlevels = 3, .gsize = {4, 16, 1 << 20}, .bw = {1e11, 1e10, 5e9},
                 .lat = {0, 0, 0}, .egress = {1e11, 4e10, 1.5e10}};
    cr_assert_eq(sim_net_lanes(&n, 1), 4);
    cr_assert_eq(sim_net_lanes(&n, 2), 3);
    unsigned long long x = 12345;
    for (int trial = 0; trial < 3000; trial++) {
        int r = 2 + trial % 23, devs[24], w[24];
        for (int i = 0; i < r; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            devs[i] = (int)((x >> 33) % 64);
        }
        if (trial % 3 == 0)  /* ascending, distinct: a contiguous range */
            for (int i = 0; i < r; i++)
                devs[i] = (int)(trial / 3 % 40) + i;
        cr_assert_eq(sim_net_ring_widths(&n, devs, r, w), 0);
        for (int i = 0; i < r; i++) {
            int a = devs[i], b = devs[(i + 1) % r], want = 1;
            int L = a == b ? -1 : meet_level(&n, a, b);
            for (int l = 1; l <= L; l++) {
                long long gs = n.gsize[l - 1], G = a / gs;
                int k = 0, j = 0;
                for (int q = 0; q < r; q++) {
                    int first = 1;  /* distinct devices of the ring in group G */
                    for (int p = 0; p < q; p++)
                        first &= devs[p] != devs[q];
                    k += first && devs[q] / gs == G;
                    int c = devs[q], d = devs[(q + 1) % r];
                    j += c != d && meet_level(&n, c, d) >= l && c / gs == G;
                }
                int lanes = l == 1 ? 4 : 3, wl = (k < lanes ? k : lanes) / j;
                wl = wl < 1 ? 1 : wl;
                want = l == 1 || wl < want ? wl : want;
            }
            cr_assert_eq(w[i], want, "trial %d, r %d, hop %d (%d -> %d): width %d, want %d",
                         trial, r, i, a, b, w[i], want);
        }
    }
}

/* Fills s as a one-microbatch, one-iteration gpipe schedule of nw workers (rows[w] of
 * len[w] actions on device dev[w]) and nstages stages (stage k's replicas[k] workers from
 * first[k] in sw); s keeps pointers to the arrays, which the caller owns. */
static void one_step_gpipe(schedule *s, int nw, int nstages, int *replicas, int *first,
                           int *sw, int *len, action **rows, int *dev)
{
    s->kind = SCHED_GPIPE;
    s->nworkers = nw;
    s->nstages = nstages;
    s->chunks = 1;
    s->microbatches = 1;
    s->iterations = 1;
    s->replicas = replicas;
    s->stage_first = first;
    s->stage_workers = sw;
    s->len = len;
    s->acts = rows;
    s->worker_device = dev;
}

/* Two rings of four, stage 0 on devices 0, 1, 4, 5 and stage 1 on 2, 3, 6, 7 of
 * rail_servers: each has two members per server, so its crossing hops are 2 wide (2e9
 * bytes/s) when the port has 2 lanes free. Every worker runs its stage's ALLREDUCE of 4e6
 * bytes at once (one bucket: 6 steps of 1e6 bytes per hop, the crossing hop 0.5 ms at 2
 * wide, 1 ms at 1). Run with or without stage 1 (alone: 0 = off), grouped or per hop. */
static double two_rail_rings(double egress_gbit, int both, int per_hop)
{
    schedule s = {0};
    int replicas[2] = {4, 4}, first[2] = {0, 4}, sw[8], wdev[8], len[8];
    int dev[8] = {0, 1, 4, 5, 2, 3, 6, 7};
    action acts[8], *rows[8];
    int nw = both ? 8 : 4;
    for (int w = 0; w < 8; w++) {
        sw[w] = w;
        wdev[w] = dev[w];
        len[w] = 1;
        acts[w] = A(ACT_ALLREDUCE, w / 4, 0, -1, -1);
        rows[w] = &acts[w];
    }
    one_step_gpipe(&s, nw, both ? 2 : 1, replicas, first, sw, len, rows, wdev);
    cluster *c = rail_servers(egress_gbit);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int w = 0; w < nw; w++)
        m.worker_device[w] = dev[w];
    for (int st = 0; st < s.nstages; st++) {
        m.grad_bytes[st] = 4e6;
        m.allreduce_s[st] = sim_net_allreduce_s(&m.net, dev + 4 * st, 4, 4e6);
    }
    m.ring_per_hop = per_hop;
    return makespan_and_free(&m, c);
}

Test(sim_engine, rail_rings_share_the_port)
{
    for (int per_hop = 0; per_hop < 2; per_hop++) {
        /* 4 lanes: both rings' crossing hops 2 wide at once: 6 x 0.5 ms; the closed form
         * of one ring says the same */
        double one = two_rail_rings(32, 0, per_hop), two = two_rail_rings(32, 1, per_hop);
        cr_expect(fabs(one - 3e-3) < 1e-12, "4 lanes, one ring: %.12g s", one);
        cr_expect(fabs(two - 3e-3) < 1e-12, "4 lanes, two rings: %.12g s", two);
        cluster *c = rail_servers(32);
        sim_net n;
        sim_net_from_cluster(&n, c, NULL);
        int ring0[] = {0, 1, 4, 5};
        double closed = sim_net_allreduce_s(&n, ring0, 4, 4e6);
        cr_expect(fabs(closed - one) < 1e-12, "closed form %.12g s, engine %.12g s", closed,
                  one);
        cluster_free(c);
        /* 3 lanes: still 2 wide; each port carries 12 crossing hops of 2 lanes x 0.5 ms,
         * 12 lane-ms over 3 lanes: 4 ms at best, reached as each hop's per-lane shares
         * take lanes as they free (waiting for 2 lanes at once took 6 ms) */
        one = two_rail_rings(24, 0, per_hop), two = two_rail_rings(24, 1, per_hop);
        cr_expect(fabs(one - 3e-3) < 1e-12, "3 lanes, one ring: %.12g s", one);
        cr_expect(fabs(two - 4e-3) < 1e-12, "3 lanes, two rings: %.12g s", two);
        /* one lane: 1 wide, 1 ms a crossing hop, the rings in turn: 12 ms */
        two = two_rail_rings(0, 1, per_hop);
        cr_expect(fabs(two - 12e-3) < 1e-12, "one lane, two rings: %.12g s", two);
    }
}

/* Pipeline sends and a wide ring hop through one port (rail_servers(16): 2 lanes).
 * Stage 0 (devices 0, 1, 4, 5) runs a 0.1 ms forward, then its ALLREDUCE of 4e6 bytes (6
 * steps of 1e6 bytes per hop; the crossing hops 1 -> 4 and 5 -> 0 2 wide, 0.5 ms; the
 * in-server ones 10 us). Stage 1 (device 2) sends 1e6 bytes to stage 2 (device 6) at 0,
 * one lane of server 0's port for 1 ms; stage 2 then runs a 0.1 ms forward.
 * Per-lane shares: step 1's hop 1 -> 4 finds one lane free at 0.1 ms; one share moves
 * 0.1 - 0.6, the other on the lane it frees, 0.6 - 1.1; steps 2-6 then take 0.5 ms each:
 * the ring ends at 1.1 + 2.5 = 3.6 ms (the send arrives at 1 ms, stage 2 ends at 1.1).
 * Waiting for both lanes at once would start the hop at 1.0 and end at 4.0 ms.
 * With second (stage 3 on device 3 sends 1e6 bytes to stage 4 on device 7 after a 0.3 ms
 * forward): both lanes are taken at 0.3 (the first send, the hop's first share), so it
 * queues behind the hop's waiting share and starts when the first send ends, 1.0 - 2.0;
 * step 2 (at 1.1) finds one lane free: 1.1 - 1.6 and 1.6 - 2.1; steps 3-6 end at 4.1 ms.
 * Waiting for both lanes at once, the second send found a lane free at 0.3 and passed the
 * waiting hop (0.3 - 1.3), the hop moved 1.3 - 1.8 and the ring ended at 4.3 ms.
 * hop: the link 1 -> 4's figures (its split hop counted once, its link time by lanes). */
static double ring_and_send(int per_hop, int second, sim_link_stat *hop)
{
    schedule s = {0};
    int replicas[5] = {4, 1, 1, 1, 1}, first[5] = {0, 4, 5, 6, 7}, sw[8], len[8];
    int dev[8] = {0, 1, 4, 5, 2, 6, 3, 7}, nw = second ? 8 : 6;
    action acts[8][2], *rows[8];
    for (int w = 0; w < 8; w++) {
        sw[w] = w;
        rows[w] = acts[w];
        len[w] = 2;
    }
    for (int w = 0; w < 4; w++) {
        acts[w][0] = A(ACT_F, 0, 0, -1, -1);
        acts[w][1] = A(ACT_ALLREDUCE, 0, 0, -1, -1);
    }
    for (int k = 0; k < 2; k++) {  /* stage 1 + 2k sends to stage 2 + 2k */
        acts[4 + 2 * k][0] = A(ACT_F, 1 + 2 * k, 0, -1, -1);
        acts[4 + 2 * k][1] = A(ACT_SEND_F, 1 + 2 * k, 0, 5 + 2 * k, 2 + 2 * k);
        acts[5 + 2 * k][0] = A(ACT_RECV_F, 2 + 2 * k, 0, 4 + 2 * k, 1 + 2 * k);
        acts[5 + 2 * k][1] = A(ACT_F, 2 + 2 * k, 0, -1, -1);
    }
    one_step_gpipe(&s, nw, second ? 5 : 3, replicas, first, sw, len, rows, dev);
    cluster *c = rail_servers(16);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int w = 0; w < nw; w++)
        m.worker_device[w] = dev[w];
    double f[5] = {1e-4, 0, 1e-4, 3e-4, 1e-4};
    for (int st = 0; st < s.nstages; st++)
        m.act_s[st * SIM_NC + SIM_C_F] = f[st];
    m.cut_bytes[1] = 1e6;
    if (second)
        m.cut_bytes[3] = 1e6;
    m.grad_bytes[0] = 4e6;
    m.allreduce_s[0] = sim_net_allreduce_s(&m.net, dev, 4, 4e6);
    m.ring_per_hop = per_hop;
    sim_result r;
    plumb_err e;
    cr_assert_eq(sim_engine_run(&m, &r, &e), 0, "%s", e.msg);
    double t = r.makespan_s;
    for (int i = 0; i < r.nlinks; i++)
        if (r.links[i].src == 1 && r.links[i].dst == 4)
            *hop = r.links[i];
    sim_result_free(&r);
    sim_model_release(&m);
    cluster_free(c);
    return t;
}

Test(sim_engine, wide_hop_shares_take_free_lanes)
{
    for (int per_hop = 0; per_hop < 2; per_hop++) {
        sim_link_stat h = {0};
        double t = ring_and_send(per_hop, 0, &h);
        cr_expect(fabs(t - 3.6e-3) < 1e-12, "per hop %d: %.12g s, want 3.6 ms", per_hop, t);
        /* 6 hops of 1e6 bytes, 0.5 ms of the link's time each (step 1's as two halves of
         * 0.5 ms on one lane each) */
        cr_expect(h.transfers == 6 && fabs(h.bytes - 6e6) < 1e-6 &&
                  fabs(h.busy_s - 3e-3) < 1e-12, "link 1 -> 4: %lld transfers, %.12g bytes, "
                  "%.12g s", h.transfers, h.bytes, h.busy_s);
        t = ring_and_send(per_hop, 1, &h);
        cr_expect(fabs(t - 4.1e-3) < 1e-12, "two sends, per hop %d: %.12g s, want 4.1 ms",
                  per_hop, t);
    }
}

/* A path without bandwidth (a hand-built net the loader would refuse): the run stops with
 * one error naming the path instead of moving the data for free or never finishing. */
Test(sim_engine, zero_bandwidth_path)
{
    hand h;
    hand_pair(&h);
    push(&h, 0, A(ACT_F, 0, 0, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_F, 1, 0, -1, -1));
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    m.net.nlevels = 1;
    m.net.gsize[0] = 1000;
    m.net.bw[0] = 0, m.net.egress[0] = 1e9;
    m.act_s[SIM_C_F] = m.act_s[SIM_NC + SIM_C_F] = 1e-3;
    m.cut_bytes[0] = 1e6;
    sim_result r;
    plumb_err e;
    err_clear(&e);
    cr_expect_neq(sim_engine_run(&m, &r, &e), 0);
    cr_expect(strstr(e.msg, "from device 0 to device 1 (level 0) has 0 bytes/s") &&
              strstr(e.msg, "its transfers never complete"), "%s", e.msg);
    sim_model_release(&m);
}

/* Synchronous point-to-point (p2p_sync, sim/engine_sync.c) against timelines worked out
 * by hand: two workers on two servers, stage 0 on worker 0, stage 1 on worker 1, two
 * microbatches of 1F1B: F 2 ms, B 4 ms on either stage; every transfer 1e7 bytes at 1e9
 * bytes/s (10 ms on its link) plus 1 ms latency.
 * Worker 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1. Worker 1, with early = 0 as a
 * runtime with blocking calls orders it: RECV_F0 F0 B0 SEND_B0 RECV_F1 F1 B1 SEND_B1;
 * with early = 1 it posts RECV_F1 before B0, as plumb's lowering does. */
static void sync_build(hand *h, int early)
{
    hand_pair(h);
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
static double sync_run(int early, int sync, sim_result *r)
{
    hand h;
    sync_build(&h, early);
    plumb_err e;
    cluster *c = two_servers(1000);
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

/* The start of the first timeline event of this kind and microbatch on a track of
 * track_kind (TL_TRACK_DEVICE: device dev's; TL_TRACK_LINK: any link), or -1. */
static double event_start(const sim_result *r, int track_kind, int dev, int kind, int mb)
{
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *ev = &r->tl->ev[i];
        const tl_track *tr = &r->tl->tracks[ev->track];
        if (ev->kind == kind && ev->microbatch == mb && tr->kind == track_kind &&
            (track_kind != TL_TRACK_DEVICE || tr->device == dev))
            return ev->start_s;
    }
    return -1;
}

/* Runs the hand schedule and checks, in ms: the makespan, then the starts of worker 0's F1
 * and B0, worker 1's F1 and B1, worker 0's B1, and of F1's and B1's transfers on their
 * links. */
static void expect_times(int early, int sync, const double want_ms[8])
{
    sim_result r;
    double got[8];
    got[0] = sync_run(early, sync, &r);
    got[1] = event_start(&r, TL_TRACK_DEVICE, 0, TL_F, 1);
    got[2] = event_start(&r, TL_TRACK_DEVICE, 0, TL_B, 0);
    got[3] = event_start(&r, TL_TRACK_DEVICE, 1, TL_F, 1);
    got[4] = event_start(&r, TL_TRACK_DEVICE, 1, TL_B, 1);
    got[5] = event_start(&r, TL_TRACK_DEVICE, 0, TL_B, 1);
    got[6] = event_start(&r, TL_TRACK_LINK, -1, TL_SEND_F, 1);
    got[7] = event_start(&r, TL_TRACK_LINK, -1, TL_SEND_B, 1);
    for (int i = 0; i < 8; i++)
        cr_expect(fabs(got[i] - want_ms[i] * 1e-3) < 1e-12, "early %d sync %d: time %d is "
                  "%.9g s, by hand %g ms", early, sync, i, got[i], want_ms[i]);
    sim_result_free(&r);
}

static const double OVERLAP_MS[8] = {44, 2, 30, 23, 25, 40, 12, 29};
static const double SYNC_MS[8] = {51, 13, 30, 30, 32, 47, 19, 36};

/* Overlapped (the default), by hand: F0 [0, 2] on worker 0, its send on the link [2, 12],
 * arrives 13; F1 [2, 4], its send queued behind, [12, 22], arrives 23. Worker 1: F0
 * [13, 15], B0 [15, 19], its send [19, 29] arrives 30; F1 [23, 25], B1 [25, 29], its send
 * [29, 39] arrives 40. Worker 0: B0 [30, 34], B1 [40, 44]: 44 ms. */
Test(sim_engine, sync_off_overlaps_by_hand)
{
    expect_times(0, 0, OVERLAP_MS);
}

/* Synchronous, by hand: F0 [0, 2]; worker 1 has posted RECV_F0, so its send moves at once,
 * [2, 12], arrives 13, and worker 0 computes again only then: F1 [13, 15]. Worker 1: F0
 * [13, 15], B0 [15, 19]. At 15 worker 0's send of F1 is held (worker 1 posts RECV_F1
 * only after its B0 and SEND_B0), so its B0 waits. At 19 worker 1 sends B0 (worker 0
 * posted RECV_B0): [19, 29], arrives 30; it posts RECV_F1, which releases F1's send:
 * [19, 29] on the other link, arrives 30. Worker 1 waits for its send: F1 [30, 32], B1
 * [32, 34 + 2]; worker 0: B0 [30, 34], then posts RECV_B1. Worker 1's send of B1 at 36
 * moves at once: [36, 46], arrives 47; worker 0's B1 [47, 51]: 51 ms. */
Test(sim_engine, sync_blocking_by_hand)
{
    expect_times(0, 1, SYNC_MS);
}

/* A receive posted early (plumb's lowering) is moved to the runtime's batch before its
 * consumer: the same timeline as the list ordered that way, F1's send moving at 19.
 * Without the move, worker 1 would post RECV_F1 when its F0 ends, at 15, and F1's send,
 * issued at 15, would move at once. */
Test(sim_engine, sync_early_receive_joins_its_batch)
{
    expect_times(1, 1, SYNC_MS);
    expect_times(1, 0, OVERLAP_MS);  /* overlapped: where the RECV sits changes nothing */
}

static int p2p_sync_of(const plan *pl) { return pl->p2p_sync; }

/* The plan field: "p2p": "sync" loads, is written back, and is what sim_run simulates; a
 * value other than overlap or sync is one clear error naming the field. */
Test(sim_engine, sync_plan_field)
{
    const plan_field f = {.key = "p2p", .value = "sync", .bad = "blocking",
                          .choices = "overlap or sync", .get = p2p_sync_of, .slower = 1};
    plan_field_check("examples/plans/vgg16-4stage-1f1b.json", &f);
}

/* Every timed action of a microbatch is recorded in its iteration, microbatch / M (the last
 * simulated one for a microbatch past it), which the engine finds without dividing while a
 * worker stays in one iteration's microbatches: every kind, one and two replicas (the
 * one-stage kinds and interleaved), 1 to 4 iterations. */
Test(sim_engine, events_in_their_microbatch_s_iteration)
{
    int checked = 0;
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int reps = 1; reps <= 2; reps++)
            for (int iters = 1; iters <= 4; iters++) {
                const sched_traits *tr = sched_traits_of(k);
                if (reps > 1 && tr->chunks_max > 1 && k != SCHED_INTERLEAVED) continue;
                sim_synth sp;
                sim_synth_init(&sp);
                sp.schedule = k;
                sp.replicas = reps;
                sp.chunks = tr->chunks_max > 1 ? 2 : 1;
                sp.nstages = 4 * sp.chunks;
                if (tr->split_backward) sp.input_ms = 1, sp.weight_ms = 1;
                sp.microbatches = 8;
                plan *pl = synth_plan(&sp);
                sim_options o;
                sim_options_init(&o);
                o.iterations = iters;
                o.timeline = SIM_TIMELINE_FULL;
                plumb_err e;
                sim_report *r = sim_run(pl, &o, &e);
                cr_assert_not_null(r, "%s: %s", tr->name, e.msg);
                int M = r->microbatches, niter = 0;
                for (size_t i = 0; i < r->tl->n; i++)
                    if (r->tl->ev[i].iteration + 1 > niter) niter = r->tl->ev[i].iteration + 1;
                cr_assert(M > 0 && niter >= 1);
                for (size_t i = 0; i < r->tl->n; i++) {
                    const tl_event *ev = &r->tl->ev[i];
                    if (ev->microbatch < 0) continue;
                    int want = ev->microbatch / M;
                    if (want > niter - 1) want = niter - 1;
                    cr_expect_eq(ev->iteration, want, "%s reps %d iterations %d: kind %d of "
                                 "microbatch %d in iteration %d, by division %d", tr->name,
                                 reps, iters, ev->kind, ev->microbatch, ev->iteration, want);
                    checked++;
                }
                sim_report_free(r);
                plan_free(pl);
            }
    cr_assert_gt(checked, 1000);
}

/* The engine's growable arrays, and core/grow.h's array_room that core and the executor
 * grow their int-counted arrays by, grow as core/grow.h says (doubling from a first
 * capacity; aligned ones on a cache line) and refuse, unchanged, a capacity past what an
 * int counts or a byte size that overflows, rather than wrapping. */
Test(sim_engine, arrays_grow_by_the_one_rule)
{
    void *p = NULL;
    int cap = 0;
    cr_assert_eq(eng_grow(&p, 0, &cap, 8), 0);
    cr_expect_eq(cap, 64);
    cr_assert_eq(eng_grow(&p, 10, &cap, 8), 0);
    cr_expect_eq(cap, 64, "room left: unchanged");
    cr_assert_eq(eng_grow(&p, 64, &cap, 8), 0);
    cr_expect_eq(cap, 128);
    void *q = p;
    int big = INT_MAX / 2 + 1;
    cr_expect_eq(eng_grow(&p, big, &big, 1), -1, "past INT_MAX");
    cr_expect(p == q && big == INT_MAX / 2 + 1);
    cap = 128;
    cr_expect_eq(eng_grow(&p, 128, &cap, SIZE_MAX / 200), -1, "bytes overflow");
    cr_expect(p == q && cap == 128);
    free(p);
    void *l = NULL;
    int lc = 0;
    cr_assert_eq(eng_grow_lines(&l, 0, &lc, 64), 0);
    cr_expect_eq(lc, 16);
    memset(l, 7, 64);
    cr_assert_eq(eng_grow_lines(&l, 16, &lc, 64), 0);
    cr_expect_eq(lc, 32);
    cr_expect_eq((uintptr_t)l % 64, 0);
    cr_expect_eq(((unsigned char *)l)[63], 7, "the records move with the array");
    cr_expect_eq(eng_grow_lines(&l, INT_MAX / 2 + 1, &(int){INT_MAX / 2 + 1}, 64), -1);
    free(l);
    cr_expect_eq(array_next_cap(0, 16, 8), 16);
    cr_expect_eq(array_next_cap(16, 16, 8), 32);
    cr_expect_eq(array_next_cap(SIZE_MAX / 2 + 1, 16, 1), 0);
    cr_expect_eq(array_next_cap(SIZE_MAX / 8, 16, 8), 0);
    /* array_room, the int-counted arrays' (core's and the executor's) */
    int ac = 0, *a = array_room(NULL, 0, &ac, 8, sizeof *a);
    cr_assert_not_null(a);
    cr_expect_eq(ac, 8);
    cr_expect(array_room(a, 7, &ac, 8, sizeof *a) == a && ac == 8, "room left: unchanged");
    a = array_room(a, 8, &ac, 8, sizeof *a);
    cr_assert_not_null(a);
    cr_expect_eq(ac, 16);
    int huge = INT_MAX / 2 + 1;
    cr_expect_null(array_room(a, huge, &huge, 8, sizeof *a), "past INT_MAX");
    cr_expect_eq(huge, INT_MAX / 2 + 1);
    cr_expect_null(array_room(a, 16, &ac, 8, SIZE_MAX / 20), "bytes overflow");
    cr_expect_eq(ac, 16);
    free(a);
    cr_expect_eq(array_next_cap(SIZE_MAX / 32, 16, 8), SIZE_MAX / 32 * 2);
}

/* A tensor-parallel group's pipeline send holds a lane per rank of the group's own (its
 * ranks' NICs: sim_model.p2p_lanes, sim_net_p2p_lanes), which its sends to both neighbours
 * share. Three servers of 8 devices, 1e9 bytes/s per transfer between servers, egress_gbit
 * / 8 lanes at the level-1 port (a group's own: lanes x tp / 8), no latency, no compute
 * time. Worker 1 (device 8, server 1) receives stage 0's activation (1e6 bytes, 1 ms),
 * then sends its own forward to worker 2 (device 16) and an input gradient back to worker
 * 0 (device 0) at once, 1e6 bytes each: two links, one group. Worked by hand:
 *  - tp 1 (one lane of the server's 8 each): both move at once, 1 -> 2 ms;
 *  - tp 8 or tp 4 on 8 lanes (one NIC per rank): each NIC carries both shares, the
 *    second transfer waits for the first's lanes: 1 -> 2 -> 3 ms, twice one send's time;
 *  - tp 8 or tp 4 on 16 lanes (two NICs per rank): the lanes suffice, 2 ms as before;
 *  - tp 8 on 4 lanes: 8 ranks on the group's 4, two shares a lane (2 ms each transfer),
 *    stage 0's too: 0 -> 2, then the two one after the other, 2 -> 4 -> 6 ms;
 *  - tp 2 on one lane (egress = bandwidth): the same, 2 ms each: 6 ms.
 * Before the change every case took 2 ms (one lane of the server's per transfer). */
static double tp_batch(int tp, double egress_gbit, int events)
{
    hand h;
    hand_init(&h, 3, 3);
    for (int st = 0; st < 3; st++) {
        h.replicas[st] = 1;
        h.stage_workers[st] = st;
        h.stage_first[st] = st;
        h.wdev[st] = 8 * st;
    }
    h.s.microbatches = 1;
    push(&h, 0, A(ACT_F, 0, 0, -1, -1));
    push(&h, 0, A(ACT_SEND_F, 0, 0, 1, 1));
    push(&h, 0, A(ACT_RECV_B, 0, 0, 1, 1));
    push(&h, 0, A(ACT_B, 0, 0, -1, -1));
    push(&h, 1, A(ACT_RECV_F, 1, 0, 0, 0));
    push(&h, 1, A(ACT_F, 1, 0, -1, -1));
    push(&h, 1, A(ACT_SEND_F, 1, 0, 2, 2));
    push(&h, 1, A(ACT_SEND_B, 1, 0, 0, 0));
    push(&h, 2, A(ACT_RECV_F, 2, 0, 1, 1));
    push(&h, 2, A(ACT_F, 2, 0, -1, -1));
    sim_synth sy;
    sim_synth_init(&sy);
    sy.servers = 3;
    sy.devices_per_server = 8;
    sy.bw_gbit[0] = 800;
    sy.bw_gbit[1] = 8;
    sy.egress_gbit[1] = egress_gbit;
    cluster *c = synth_cluster_of(&sy);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h.s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int w = 0; w < 3; w++)
        m.worker_device[w] = 8 * w;
    m.cut_bytes[0] = m.cut_bytes[1] = 1e6;
    m.p2p_lanes = tp;
    m.xfer_events = events;
    return makespan_and_free(&m, c);
}

Test(sim_engine, tp_group_send_holds_a_lane_per_rank)
{
    sim_net n;
    sim_synth sy;
    sim_synth_init(&sy);
    sy.servers = 3;
    sy.devices_per_server = 8;
    sy.bw_gbit[1] = 8;
    sy.egress_gbit[1] = 64;
    cluster *c = synth_cluster_of(&sy);
    sim_net_from_cluster(&n, c, NULL);
    cluster_free(c);
    double share;
    int own;
    cr_expect_eq(sim_net_p2p_lanes(&n, 8, 8, &own, &share), 8);
    cr_expect(own == 8 && share == 1);
    cr_expect_eq(sim_net_p2p_lanes(&n, 12, 8, &own, &share), 4); /* 4 of its ranks inside */
    cr_expect(own == 4 && share == 1);
    cr_expect_eq(sim_net_p2p_lanes(&n, 8, 1, &own, &share), 1);
    cr_expect(own == 1 && share == 1);
    for (int ev = 0; ev < 2; ev++) {
        double want[][3] = {{1, 64, 2e-3}, {4, 64, 3e-3}, {8, 64, 3e-3}, {8, 128, 2e-3},
                            {4, 128, 2e-3}, {8, 32, 6e-3}, {2, 8, 6e-3}};
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            double t = tp_batch((int)want[i][0], want[i][1], ev);
            cr_expect(fabs(t - want[i][2]) < 1e-12, "tp %g, %g Gb/s egress, events %d: "
                      "%.12g s, want %g", want[i][0], want[i][1], ev, t, want[i][2]);
        }
    }
}
