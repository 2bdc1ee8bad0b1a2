/* test_sim_allreduce.c: the engine's grouped ring all-reduce (sim/engine_ring.c). The hops
 * of a ring step whose links and ports nothing else uses run as one event, and so do the
 * shared hops that find their link and ports free when the step starts, until something
 * queues behind them; these tests run the same plans with every step as per-hop transfers
 * (sim_model.ring_per_hop) and require the same results bit for bit (times, per-device
 * figures, link statistics, the timeline), check that contended hops are split back into
 * transfers mid-step (on a shared port, on a link two rings use), that the grouped ring's
 * cost grows linearly in the replicas, that steps repeating their ring's last one in O(1)
 * give the per-hop results (also for the two rings of an interleaved device, which share
 * its links: one class), that steps of rings of private hops run without the event queue
 * keep their places among equal-time events, that quiet point-to-point transfers (no end
 * event unless something queues behind them) give the results of transfers with end
 * events on random plans, that the dashboard's timeline without the ring hops
 * is the full one less those events and grows linearly too, and that the exact repeated addition behind the
 * deferred statistics matches the loop it replaces. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/engine_impl.h"
#include "sim/synth.h"
#include "tests/synth.h"

/* The engine on schedule s of plan pl: record 0 no timeline, 1 the full one, 2 without
 * the ring hops' link events (the dashboard's, sim_model.skip_ring_hops); per_hop: every
 * ring step as per-hop transfers; sync: synchronous point-to-point; xev: every transfer's
 * end an event (sim_model.xfer_events). sim_engine_run's return, its error in e. */
static int engine_on(const plan *pl, const schedule *s, int record, int per_hop, int sync,
                     int xev, sim_result *r, plumb_err *e)
{
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model m;
    cr_assert_eq(sim_cost_build(&m, pl, s, &net, -1, 1, e), 0, "%s", e->msg);
    m.record = record != 0;
    m.skip_ring_hops = record == 2;
    m.ring_per_hop = per_hop;
    m.p2p_sync = sync;
    m.xfer_events = xev;
    int rc = sim_engine_run(&m, r, e);
    sim_model_release(&m);
    return rc;
}

/* Runs plan s for iters iterations with grouped steps allowed (per_hop 0) or not; record
 * as engine_on. */
static void run_engine(const sim_synth *sp, int iters, int per_hop, int record, sim_result *r)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = synth_plan(sp);
    schedule *s = schedule_from_plan(pl, iters, &e);
    cr_assert_not_null(s, "schedule: %s", e.msg);
    cr_assert_eq(engine_on(pl, s, record, per_hop, 0, 0, r, &e), 0, "%s", e.msg);
    schedule_free(s);
    plan_free(pl);
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Every figure of two results alike, bit for bit (the event counts aside). */
static void expect_same(const sim_result *a, const sim_result *b, const char *what)
{
    cr_assert_eq(a->iterations, b->iterations, "%s", what);
    cr_expect_eq(a->k0, b->k0, "%s", what);
    cr_expect_eq(a->k1, b->k1, "%s", what);
    cr_expect_eq(a->settled, b->settled, "%s", what);
    cr_expect_eq(a->actions, b->actions, "%s", what);
    cr_expect(same_bits(a->makespan_s, b->makespan_s), "%s: makespan %.17g vs %.17g", what,
              a->makespan_s, b->makespan_s);
    cr_expect(same_bits(a->iteration_s, b->iteration_s), "%s: iteration %.17g vs %.17g",
              what, a->iteration_s, b->iteration_s);
    for (int k = 0; k < a->iterations; k++)
        cr_expect(same_bits(a->iter_end[k], b->iter_end[k]), "%s: end of iteration %d", what,
                  k);
    for (int w = 0; w < a->nworkers; w++) {
        cr_expect(same_bits(a->busy_window[w], b->busy_window[w]), "%s: busy %d", what, w);
        cr_expect(same_bits(a->comm_window[w], b->comm_window[w]),
                  "%s: comm of worker %d %.17g vs %.17g", what, w, a->comm_window[w],
                  b->comm_window[w]);
        cr_expect_eq(a->max_inflight[w], b->max_inflight[w], "%s: in flight on %d", what, w);
    }
    cr_assert_eq(a->nlinks, b->nlinks, "%s", what);
    for (int i = 0; i < a->nlinks; i++) {
        const sim_link_stat *x = &a->links[i], *y = &b->links[i];
        cr_expect(x->src == y->src && x->dst == y->dst && x->level == y->level, "%s", what);
        cr_expect(same_bits(x->bytes, y->bytes) && same_bits(x->bytes_window, y->bytes_window),
                  "%s: link %d->%d bytes %.17g vs %.17g", what, x->src, x->dst, x->bytes,
                  y->bytes);
        cr_expect(same_bits(x->busy_s, y->busy_s), "%s: link %d->%d busy %.17g vs %.17g",
                  what, x->src, x->dst, x->busy_s, y->busy_s);
        cr_expect_eq(x->transfers, y->transfers, "%s", what);
    }
    cr_assert_eq(!a->tl, !b->tl, "%s", what);
    if (!a->tl)
        return;
    cr_assert_eq(a->tl->ntracks, b->tl->ntracks, "%s", what);
    for (int t = 0; t < a->tl->ntracks; t++)
        cr_expect_str_eq(a->tl->tracks[t].name, b->tl->tracks[t].name, "%s", what);
    cr_assert_eq(a->tl->n, b->tl->n, "%s", what);
    for (size_t i = 0; i < a->tl->n; i++) {
        const tl_event *x = &a->tl->ev[i], *y = &b->tl->ev[i];
        cr_expect(same_bits(x->start_s, y->start_s) && same_bits(x->dur_s, y->dur_s) &&
                      same_bits(x->bytes, y->bytes) && x->track == y->track &&
                      x->kind == y->kind && x->stage == y->stage &&
                      x->peer_stage == y->peer_stage && x->microbatch == y->microbatch &&
                      x->iteration == y->iteration,
                  "%s: timeline event %zu", what, i);
    }
}

static long long last_virtual, last_split, last_repeated; /* the last both_ways grouped
                                                           run's */
static long long last_repeated_dash; /* its run with the dashboard's timeline */

/* Runs sp both ways, with the full timeline, with the dashboard's (no ring hops) and
 * without one; returns the grouped run's grouped steps (and its events through *events,
 * the per-hop run's through *events_hop; its virtual and split hops in last_virtual,
 * last_split, its steps repeated in last_repeated, with the dashboard's timeline in
 * last_repeated_dash). */
static long long both_ways(const sim_synth *sp, int iters, const char *what, long long *events,
                           long long *events_hop)
{
    long long grouped = 0;
    for (int i = 0; i < 3; i++) {
        int record = i == 2 ? 0 : 1 + i; /* full, dashboard, none (last) */
        char how[160];
        snprintf(how, sizeof how, "%s, %s", what,
                 record == 1 ? "full timeline" : record == 2 ? "dashboard timeline"
                                                             : "no timeline");
        sim_result g, h;
        run_engine(sp, iters, 0, record, &g);
        run_engine(sp, iters, 1, record, &h);
        expect_same(&g, &h, how);
        cr_expect_eq(h.ring_steps_grouped, 0, "%s", how);
        cr_expect_eq(h.ring_hops_virtual, 0, "%s", how);
        grouped = g.ring_steps_grouped;
        last_virtual = g.ring_hops_virtual;
        last_split = g.ring_hops_split;
        last_repeated = g.ring_steps_repeated;
        if (record == 2)
            last_repeated_dash = g.ring_steps_repeated;
        cr_expect_eq(h.ring_steps_repeated, 0, "%s", how);
        if (record == 1)  /* a timeline records every step's hops: none repeats */
            cr_expect_eq(g.ring_steps_repeated, 0, "%s", how);
        if (events)
            *events = g.events;
        if (events_hop)
            *events_hop = h.events;
        sim_result_free(&g);
        sim_result_free(&h);
    }
    return grouped;
}

/* Pure data parallelism, 16 replicas on servers of 4 (hops inside servers and between
 * them, each on its own ports), 3 gradient buckets overlapping the backward, latencies on
 * both levels: every step runs grouped, 3 buckets x 2 x 15 steps per iteration. */
Test(sim_allreduce, data_parallel_grouped_like_per_hop)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.replicas = 16;
    s.microbatches = 16;
    s.devices_per_server = 4;
    s.bw_gbit[0] = 1200;
    s.bw_gbit[1] = 100;
    s.latency_us[0] = 3;
    s.latency_us[1] = 7;
    s.parameter_bytes = 2.5 * 25.0 * 1024 * 1024; /* K = 3 buckets */
    s.backward_ms = 5;
    long long ev, ev_hop;
    long long grouped = both_ways(&s, 3, "data parallel", &ev, &ev_hop);
    cr_expect_eq(grouped, 3 * 3 * 2 * 15, "grouped steps %lld", grouped);
    cr_expect(ev < ev_hop / 4, "events: %lld grouped, %lld per hop", ev, ev_hop);
}

/* Two stages of 4 replicas, a server each: the rings stay inside their servers (level-0
 * device ports) while activations and gradients cross between the servers (level-1
 * ports), so the rings are private even though their workers send point-to-point too
 * (their link time then adds to comm_s in between the ring's: the deferred additions
 * must keep that order). 1F1B, GPipe and PipeDream (asynchronous, rings of different
 * iterations in flight). */
Test(sim_allreduce, pipeline_rings_inside_servers)
{
    sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_GPIPE, SCHED_PIPEDREAM};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        sim_synth s;
        sim_synth_init(&s);
        s.schedule = kinds[i];
        s.nstages = 2;
        s.replicas = 4;
        s.microbatches = 8;
        s.devices_per_server = 4;
        s.bw_gbit[0] = 300;
        s.bw_gbit[1] = 25;
        s.latency_us[0] = 2;
        s.latency_us[1] = 11;
        s.activation_bytes = 3e6;
        s.parameter_bytes = 30e6; /* 2 buckets */
        char what[64];
        snprintf(what, sizeof what, "pipeline, %s", sched_kind_name(kinds[i]));
        long long grouped = both_ways(&s, 5, what, NULL, NULL);
        cr_expect(grouped > 0, "%s: no grouped step", what);
    }
}

/* Rings that share a server's single egress lane with gradient transfers (one device per
 * server, as in sim::allreduce_contends_with_transfers): those transfers and the ring's
 * hops wait for each other. A hop that finds the lane free starts without a transfer of
 * its own and becomes one when a transfer queues behind it, mid-step; a hop that finds it
 * taken is a transfer from the start. With two lanes nothing waits: every hop is private.
 * Both give the per-hop results. */
Test(sim_allreduce, contended_ring_splits_hops)
{
    for (int lanes = 1; lanes <= 2; lanes++) {
        sim_synth s;
        synth_contended_ring(&s, lanes, 20e6);
        long long grouped = both_ways(&s, 3, lanes == 1 ? "one lane" : "two lanes", NULL,
                                      NULL);
        cr_expect(grouped > 0, "no grouped step");
        if (lanes == 1) {
            cr_expect(last_virtual > 0, "one lane: no virtual hop");
            cr_expect(last_split > 0, "one lane: no hop split");
        } else {  /* every hop private */
            cr_expect_eq(last_virtual, 0, "two lanes: %lld virtual hops", last_virtual);
        }
    }
}

/* Two stages of `replicas` replicas on servers of dps devices, levels at bw0 / bw1
 * Gbit/s (latency lat1 us between servers), parameters of `params` bytes, backward ms. */
static void two_stages(sim_synth *s, sched_kind k, int replicas, int mb, int dps, double bw0,
                       double bw1, double lat1, double act, double params, double backward)
{
    sim_synth_init(s);
    s->schedule = k;
    s->nstages = 2;
    s->replicas = replicas;
    s->microbatches = mb;
    s->devices_per_server = dps;
    s->bw_gbit[0] = bw0;
    s->bw_gbit[1] = bw1;
    s->latency_us[1] = lat1;
    s->activation_bytes = act;
    s->parameter_bytes = params;
    s->backward_ms = backward;
}

/* Rings over two servers of 2 devices each, per stage: the hops inside a server are
 * private, the two that cross servers share the servers' single egress lane with the
 * activations and gradients between the stages and run as transfers, waiting for them.
 * Each step then runs its private hops as one event and the crossing ones as transfers,
 * with the per-hop results. */
Test(sim_allreduce, partly_private_rings)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        sim_synth s;
        two_stages(&s, kinds[i], 4, 8, 2, 400, 40, 5, 6e6, 40e6 /* 2 buckets */, 3);
        char what[64];
        snprintf(what, sizeof what, "partly private, %s", sched_kind_name(kinds[i]));
        long long grouped = both_ways(&s, 4, what, NULL, NULL);
        cr_expect(grouped > 0, "%s: no grouped step", what);
    }
}

/* A worker in two rings adds both rings' link time to its comm_s, so neither ring's hops
 * are private (their deferred additions would interleave); they run as virtual hops,
 * whose link time is added when they start. A hand-built IR: 3 workers, one per server
 * (two egress lanes each), holding both stages; stage 0's ring runs 0 -> 1 -> 2; stage
 * 1's 0 -> 2 -> 1 (same_links 0: the rings share no link and no port beyond its lanes,
 * only workers) or 0 -> 1 -> 2 (same_links 1: both rings on the same links, stage 1's
 * all-reduce still moving when stage 0's starts, so hops queue behind virtual ones). */
static void two_rings(int per_hop, int same_links, sim_result *r)
{
    int replicas[2] = {3, 3}, first[2] = {0, 3}, sw[6] = {0, 1, 2, 0, 2, 1};
    if (same_links) {
        sw[4] = 1;
        sw[5] = 2;
    }
    int len[3], wdev[3] = {0, 1, 2};
    action acts[3][6], *rows[3];
    for (int w = 0; w < 3; w++) {
        int k = 0;
        acts[w][k++] = (action){.kind = ACT_F, .stage = 0, .microbatch = w, .peer = -1};
        acts[w][k++] = (action){.kind = ACT_F, .stage = 1, .microbatch = w, .peer = -1};
        acts[w][k++] = (action){.kind = ACT_B, .stage = 1, .microbatch = w, .peer = -1};
        acts[w][k++] = (action){.kind = ACT_B, .stage = 0, .microbatch = w, .peer = -1};
        acts[w][k++] = (action){.kind = ACT_ALLREDUCE, .stage = 1, .microbatch = -1,
                                .peer = -1};
        acts[w][k++] = (action){.kind = ACT_ALLREDUCE, .stage = 0, .microbatch = -1,
                                .peer = -1};
        len[w] = k;
        rows[w] = acts[w];
    }
    schedule s = {.kind = SCHED_GPIPE, .nworkers = 3, .nstages = 2, .chunks = 1,
                  .microbatches = 3, .iterations = 1, .replicas = replicas,
                  .stage_workers = sw, .stage_first = first, .len = len, .acts = rows,
                  .worker_device = wdev};
    cluster *c = synth_servers(3, 1, 1, 80, 160, 0);
    plumb_err e;
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int st = 0; st < 2; st++) {
        m.act_s[st * SIM_NC + SIM_C_F] = 1e-3;
        m.act_s[st * SIM_NC + SIM_C_B] = 2e-3;
        m.grad_bytes[st] = st ? 17e6 : 30e6;
        m.allreduce_s[st] = 1e-3;  /* only its sign matters to the engine */
    }
    m.ring_per_hop = per_hop;
    cr_assert_eq(sim_engine_run(&m, r, &e), 0, "%s", e.msg);
    sim_model_release(&m);
    cluster_free(c);
}

Test(sim_allreduce, worker_in_two_rings)
{
    for (int same = 0; same < 2; same++) {
        sim_result g, h;
        two_rings(0, same, &g);
        two_rings(1, same, &h);
        const char *what = same ? "two rings, same links" : "two rings";
        expect_same(&g, &h, what);
        cr_expect(g.ring_hops_virtual > 0, "%s: no virtual hop", what);
        if (same)
            cr_expect(g.ring_hops_split > 0, "%s: no hop split", what);
        else
            cr_expect_eq(g.ring_hops_split, 0, "%s", what);
        cr_expect(g.comm_window[0] > 0);
        sim_result_free(&g);
        sim_result_free(&h);
    }
}

/* A sweep of small pipelines whose rings cross servers through the ports their
 * activations and gradients use: every schedule that replicates stages (the chunked ones
 * with two virtual stages a device), one or two devices per server, one or
 * two egress lanes (with two, hops are private), 2 or 3 replicas, with and without latency, one or several buckets.
 * Contention arrives at every point of a step (at its start, mid-step, at a hop's end);
 * every run gives the per-hop results, and some hops split. */
Test(sim_allreduce, shared_port_sweep)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM, SCHED_2BW,
                          SCHED_ZB_H1, SCHED_INTERLEAVED, SCHED_ZB_V};
    long long split = 0, virt = 0, rep = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        for (int v = 0; v < 16; v++) {
            sim_synth s;
            sim_synth_init(&s);
            s.schedule = kinds[i];
            s.chunks = sched_kind_chunks(kinds[i]);  /* chunked: rings sharing devices */
            s.nstages = 2 * s.chunks;
            s.replicas = 2 + (v & 1);
            s.devices_per_server = 1 + (v >> 1 & 1);
            s.microbatches = 6;
            s.bw_gbit[0] = 400;
            s.bw_gbit[1] = 40;
            s.egress_gbit[1] = 40.0 * (1 + (v >> 2 & 1));
            s.latency_us[1] = v >> 3 & 1 ? 7 : 0;
            s.activation_bytes = 3e6 + 1e6 * v;
            s.parameter_bytes = v & 4 ? 30e6 : 9e6; /* 2 buckets, or 1 */
            s.backward_ms = 2 + 0.25 * v;
            if (kinds[i] == SCHED_ZB_H1 || kinds[i] == SCHED_ZB_V) {
                s.input_ms = s.backward_ms / 2;
                s.weight_ms = s.backward_ms / 2;
            }
            char what[80];
            snprintf(what, sizeof what, "%s, variant %d", sched_kind_name(kinds[i]), v);
            both_ways(&s, 4, what, NULL, NULL);
            split += last_split;
            virt += last_virtual;
            rep += last_repeated;
        }
    cr_expect(virt > 0, "no virtual hop");
    cr_expect(split > 0, "no hop split");
    cr_log_info("shared port sweep: %lld virtual hops, %lld split, %lld steps repeated",
                virt, split, rep);
}

/* both_ways of s over 3 iterations (what names it), whose grouped run repeats a step,
 * with and without the dashboard's timeline, and has a virtual hop. */
static void expect_repeated_steps(const sim_synth *s, const char *what)
{
    both_ways(s, 3, what, NULL, NULL);
    cr_expect(last_repeated > 0, "%s: no step repeated", what);
    cr_expect(last_repeated_dash > 0, "%s: no step repeated with the dashboard's "
              "timeline", what);
    cr_expect(last_virtual > 0, "%s: no virtual hop", what);
}

/* Two stages of 24 replicas on servers of 8: each ring's hop out of a server shares the
 * server's egress port with the activations and gradients, so it is shared; once the
 * pipeline has drained, the two rings' steps start every shared hop virtual, step after
 * step, and nothing else runs: the steps repeat in O(1) (ring_repeat), their additions
 * deferred, while the other ring's steps run between them. With latency on both levels,
 * two buckets, four schedules: the per-hop results, and steps repeated. */
Test(sim_allreduce, repeated_steps_like_per_hop)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM, SCHED_ZB_H1};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        sim_synth s;
        two_stages(&s, kinds[i], 24, 48, 8, 300, 50, 9, 2e6, 60e6 /* 2 buckets */, 2.5);
        s.latency_us[0] = 2;
        if (kinds[i] == SCHED_ZB_H1)
            s.input_ms = s.weight_ms = 1.25;
        char what[64];
        snprintf(what, sizeof what, "repeated steps, %s", sched_kind_name(kinds[i]));
        expect_repeated_steps(&s, what);
    }
}

/* Interleaved 1F1B, 2 ranks x 2 chunks of 16 replicas on servers of 8: each device holds
 * two virtual stages, whose rings run over the same links and ports (and, for the
 * devices' workers, the same worker), so no hop is private and the two rings form one
 * class; a step that repeats its ring's last one runs in O(1) until the other ring's
 * all-reduce (or anything else on the links) runs. The per-hop results, and steps
 * repeated, with and without the dashboard's timeline. */
Test(sim_allreduce, interleaved_rings_repeat)
{
    for (int lat = 0; lat < 2; lat++) {
        sim_synth s;
        two_stages(&s, SCHED_INTERLEAVED, 16, 16, 8, 300, 50, lat ? 9 : 0, 2e6,
                   60e6 /* 2 buckets */, 2.5);
        s.chunks = 2;
        s.nstages = 4;
        s.latency_us[0] = lat ? 2 : 0;
        char what[64];
        snprintf(what, sizeof what, "interleaved rings, latency %d", lat);
        expect_repeated_steps(&s, what);
    }
}

/* Four stages of 8 replicas, a server each: every ring stays inside its server, all its
 * hops private, so a step's end and the next step's start run without the event queue
 * while each is the earliest event (eng_ring_chain). The stages' rings move the same
 * bytes at the same rate, so their steps end at equal times, and with no ring latency
 * the next step starts at its step's end: the chained events must keep their places
 * among equal-time events (the other rings', the workers', the transfers') by sequence
 * number. The per-hop results, three schedules, with and without latency. */
Test(sim_allreduce, chained_steps_like_per_hop)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM};
    for (int lat = 0; lat < 2; lat++)
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
            sim_synth s;
            two_stages(&s, kinds[i], 8, 16, 8, 257.3, 31.7, lat ? 4 : 0, 3.31e6,
                       47.7e6 /* 2 buckets */, 2.13);
            s.nstages = 4;
            s.latency_us[0] = lat ? 1 : 0;
            s.forward_ms = 1.07;
            char what[64];
            snprintf(what, sizeof what, "chained steps, %s, latency %d",
                     sched_kind_name(kinds[i]), lat);
            long long grouped = both_ways(&s, 4, what, NULL, NULL);
            cr_expect(grouped > 0, "%s: no grouped step", what);
            cr_expect_eq(last_virtual, 0, "%s: %lld virtual hops (a hop not private)", what,
                         last_virtual);
        }
}

/* Pure data parallelism over r replicas on servers of 8, 10 MB of parameters. */
static void dp_synth(sim_synth *s, int r)
{
    sim_synth_init(s);
    s->nstages = 1;
    s->replicas = r;
    s->microbatches = r;
    s->devices_per_server = 8;
    s->parameter_bytes = 10e6;
}

/* Cost: a grouped bucket takes 2 events per ring step, so the events of a pure
 * data-parallel run grow linearly with the replicas (per hop: with their square). */
Test(sim_allreduce, events_grow_linearly)
{
    long long ev[2], ev_hop[2];
    int rs[2] = {32, 64};
    for (int i = 0; i < 2; i++) {
        sim_synth s;
        dp_synth(&s, rs[i]);
        sim_result g, h;
        run_engine(&s, 3, 0, 0, &g);
        run_engine(&s, 3, 1, 0, &h);
        expect_same(&g, &h, "scaling");
        ev[i] = g.events;
        ev_hop[i] = h.events;
        sim_result_free(&g);
        sim_result_free(&h);
    }
    cr_expect(ev[1] < 2.2 * ev[0], "grouped: %lld events at 32 replicas, %lld at 64", ev[0],
              ev[1]);
    cr_expect(ev_hop[1] > 3.5 * ev_hop[0], "per hop: %lld events at 32, %lld at 64",
              ev_hop[0], ev_hop[1]);
}

/* The ring all-reduce hops of a timeline: all-reduce events on link tracks. */
static int is_ring_hop(const timeline *tl, const tl_event *e)
{
    return e->kind == TL_ALLREDUCE && tl->tracks[e->track].kind == TL_TRACK_LINK;
}

/* Without the ring hops (skip_ring_hops) the timeline is the full one with its ring hop
 * events taken out, every other event alike and in the same order (tracks matched by
 * name), and the figures are the same bit for bit. Two replicated stages over servers of
 * 4 (private and shared hops, activation transfers on links), 1F1B and PipeDream. */
Test(sim_allreduce, dashboard_timeline_is_full_less_ring_hops)
{
    sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_PIPEDREAM};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        sim_synth s;
        sim_synth_init(&s);
        s.nstages = 2;
        s.replicas = 6;
        s.microbatches = 6;
        s.devices_per_server = 4;
        s.schedule = kinds[i];
        s.latency_us[0] = 2;
        s.latency_us[1] = 9;
        s.parameter_bytes = 40e6;
        s.backward_ms = 4;
        sim_result full, dash;
        run_engine(&s, 3, 0, 1, &full);
        run_engine(&s, 3, 0, 2, &dash);
        const timeline *a = full.tl, *b = dash.tl;
        cr_assert(a && b);
        size_t hops = 0, j = 0;
        for (size_t k = 0; k < a->n; k++) {
            const tl_event *x = &a->ev[k];
            if (is_ring_hop(a, x)) {
                hops++;
                continue;
            }
            cr_assert_lt(j, b->n, "kind %d: dashboard timeline short", (int)kinds[i]);
            const tl_event *y = &b->ev[j++];
            cr_expect_str_eq(a->tracks[x->track].name, b->tracks[y->track].name);
            cr_expect(same_bits(x->start_s, y->start_s) && same_bits(x->dur_s, y->dur_s) &&
                          same_bits(x->bytes, y->bytes) && x->kind == y->kind &&
                          x->stage == y->stage && x->peer_stage == y->peer_stage &&
                          x->microbatch == y->microbatch && x->iteration == y->iteration,
                      "kind %d: event %zu", (int)kinds[i], k);
        }
        cr_expect_eq(j, b->n, "kind %d: %zu events left over", (int)kinds[i], b->n - j);
        cr_expect_gt(hops, 0, "kind %d: no ring hops in the full timeline", (int)kinds[i]);
        /* the figures: expect_same less the timeline */
        timeline *ta = full.tl, *tb = dash.tl;
        full.tl = dash.tl = NULL;
        expect_same(&full, &dash, "dashboard timeline");
        full.tl = ta;
        dash.tl = tb;
        sim_result_free(&full);
        sim_result_free(&dash);
    }
}

/* The dashboard's timeline of pure data parallelism grows linearly with the replicas
 * (one all-reduce event per device and bucket); the full one, with a link event per hop of
 * every ring step, with their square. */
Test(sim_allreduce, dashboard_timeline_grows_linearly)
{
    size_t n[2][2];
    int rs[2] = {32, 64};
    for (int i = 0; i < 2; i++)
        for (int rec = 1; rec <= 2; rec++) {
            sim_synth s;
            dp_synth(&s, rs[i]);
            sim_result r;
            run_engine(&s, 3, 0, rec, &r);
            cr_assert_not_null(r.tl);
            n[rec - 1][i] = r.tl->n;
            sim_result_free(&r);
        }
    cr_expect(n[1][1] < 2.2 * n[1][0], "dashboard: %zu events at 32 replicas, %zu at 64",
              n[1][0], n[1][1]);
    cr_expect(n[0][1] > 3.5 * n[0][0], "full: %zu events at 32 replicas, %zu at 64", n[0][0],
              n[0][1]);
}

static double loop_add(double s, double v, long long n)
{
    for (long long i = 0; i < n; i++)
        s += v;
    return s;
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* eng_add_repeated against the loop, bit for bit: random starts and steps over many
 * orders of magnitude, exact ties (a step of q + 1/2 ulps, from odd and even starts), a
 * step below half an ulp, zero starts, steps larger than the start. */
Test(sim_allreduce, add_repeated_matches_loop)
{
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 3000; i++) {
        double s = (rng_next(&x) % 4 == 0) ? 0
                   : ldexp((double)(rng_next(&x) >> 11), (int)(rng_next(&x) % 80) - 90);
        double v = ldexp((double)(rng_next(&x) >> 11), (int)(rng_next(&x) % 80) - 100);
        long long n = (long long)(rng_next(&x) % 5000);
        double a = eng_add_repeated(s, v, n), b = loop_add(s, v, n);
        cr_assert(same_bits(a, b), "s %a v %a n %lld: %a vs %a", s, v, n, a, b);
    }
    for (int q = 0; q < 6; q++)
        for (int odd = 0; odd < 2; odd++) {
            double s = ldexp((double)((1ULL << 52) + 2 * 12345 + (unsigned)odd), -52);
            double u = ldexp(1, -52), v = (q + 0.5) * u;
            for (long long n = 0; n < 40; n += 3) {
                double a = eng_add_repeated(s, v, n), b = loop_add(s, v, n);
                cr_assert(same_bits(a, b), "tie q %d odd %d n %lld: %a vs %a", q, odd, n, a, b);
            }
            double a = eng_add_repeated(s, v, 3000000), b = loop_add(s, v, 3000000);
            cr_assert(same_bits(a, b), "tie q %d odd %d: %a vs %a", q, odd, a, b);
        }
    /* starts whose scaling by 2^(53 - e) leaves the normal doubles (the smallest starts
     * handled in steps) or comes near either end */
    static const int es[] = {-999, -985, -971, -970, -969, -968, -950, 0, 900, 1000, 1020};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        for (int k = 0; k < 64; k += 3) {
            double s = ldexp((double)(rng_next(&x) >> 11) + 1, es[i] - 53);
            double v = ldexp((double)(rng_next(&x) >> 11) + 1, es[i] - 53 - k);
            long long n = 1 + (long long)(rng_next(&x) % 3000);
            double a = eng_add_repeated(s, v, n), b = loop_add(s, v, n);
            cr_assert(same_bits(a, b), "e %d k %d: s %a v %a n %lld: %a vs %a", es[i], k, s, v,
                      n, a, b);
        }
    cr_expect(same_bits(eng_add_repeated(1e9, 1e-9, 1000000), 1e9));
    cr_expect(same_bits(eng_add_repeated(0.0, 0.1, 1000000), loop_add(0.0, 0.1, 1000000)));
    cr_expect(same_bits(eng_add_repeated(1e-3, 3.7, 777777), loop_add(1e-3, 3.7, 777777)));
    cr_expect(same_bits(eng_add_repeated(5.0, 0.0, 10), 5.0));
}

/* One run of sp for the quiet transfers' test: xfer_events 1 posts every point-to-point
 * transfer's end as an event (the reference), 0 lets the engine end quiet ones without;
 * the rest as engine_on. 0; 1 when the engine refused the run (its message in msg); -1
 * when the synthetic plan or its schedule is refused (the random case is skipped). */
static int run_quiet(const sim_synth *sp, int iters, int xev, int record, int per_hop,
                     int sync, sim_result *r, char *msg, size_t nmsg)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = sim_synth_plan(sp, &e);
    if (!pl)
        return -1;
    schedule *s = schedule_from_plan(pl, iters, &e);
    if (!s) {
        plan_free(pl);
        return -1;
    }
    int rc = engine_on(pl, s, record, per_hop, sync, xev, r, &e) ? 1 : 0;
    snprintf(msg, nmsg, "%s", rc ? e.msg : "");
    schedule_free(s);
    plan_free(pl);
    return rc;
}

/* Quiet point-to-point transfers (engine_comm.c): a transfer that starts with nothing
 * queued behind it ends without an event of its own unless something queues behind it
 * while it moves. Random plans of every kind (2-5 ranks, 1-3 replicas, 1-12 microbatches,
 * 1-4 iterations), on servers of 1-4 devices whose links and egress lanes are slow enough
 * for transfers to queue on a link and at a port (1-3 lanes), with and without a timeline,
 * per-hop rings and synchronous transfers, against the same runs with every transfer's
 * end an event: every result bit for bit, and the same event count. The cases must start
 * quiet transfers and post some of their ends after all (contention), and runs whose rings
 * share links must keep to events. */
Test(sim_allreduce, quiet_transfers_like_events)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    long long quiet = 0, split = 0;
    int ran = 0;
    for (int i = 0; i < 400; i++) {
        sim_synth sp;
        sim_synth_init(&sp);
        sp.schedule = (sched_kind)(rng_next(&x) % SCHED_NKINDS);
        sp.chunks = sched_kind_chunks(sp.schedule);
        int ranks = 2 + (int)(rng_next(&x) % 4);
        sp.nstages = ranks * sp.chunks;
        sp.replicas = 1 + (int)(rng_next(&x) % 3);
        sp.microbatches = 1 + (int)(rng_next(&x) % 12);
        sp.devices_per_server = 1 + (int)(rng_next(&x) % 4);
        sp.forward_ms = 0.2 + (double)(rng_next(&x) % 100) / 50;
        sp.backward_ms = 0.2 + (double)(rng_next(&x) % 100) / 25;
        if (rng_next(&x) % 3 == 0) {
            sp.input_ms = sp.backward_ms / 2;
            sp.weight_ms = sp.backward_ms / 2;
        }
        sp.activation_bytes = 1e5 * (double)(1 + rng_next(&x) % 400);
        sp.parameter_bytes = 1e5 * (double)(1 + rng_next(&x) % 200);
        for (int l = 0; l < 2; l++) {
            sp.bw_gbit[l] = 1 + (double)(rng_next(&x) % 200);
            sp.egress_gbit[l] = sp.bw_gbit[l] * (double)(1 + rng_next(&x) % 3);
            sp.latency_us[l] = (double)(rng_next(&x) % 3) * 5;
        }
        int iters = 1 + (int)(rng_next(&x) % 4), record = (int)(rng_next(&x) % 3);
        int per_hop = rng_next(&x) % 3 == 0, sync = rng_next(&x) % 3 == 0;
        sim_result a, b;
        char ma[1100], mb[1100], what[200];
        int ra = run_quiet(&sp, iters, 1, record, per_hop, sync, &a, ma, sizeof ma);
        if (ra < 0)
            continue;
        snprintf(what, sizeof what, "case %d: %s, %d stages x %d replicas, %d microbatches, "
                 "%d iterations, record %d, per-hop %d, sync %d", i,
                 sched_kind_name(sp.schedule), sp.nstages, sp.replicas, sp.microbatches,
                 iters, record, per_hop, sync);
        int rb = run_quiet(&sp, iters, 0, record, per_hop, sync, &b, mb, sizeof mb);
        cr_assert_eq(ra, rb, "%s: %s / %s", what, ma, mb);
        if (ra) {  /* refused alike (a synchronous schedule that deadlocks) */
            cr_expect_str_eq(ma, mb, "%s", what);
            continue;
        }
        expect_same(&a, &b, what);
        cr_expect_eq(a.events, b.events, "%s: %lld events vs %lld", what, a.events, b.events);
        cr_expect_eq(a.xfers_quiet, 0, "%s: quiet transfers in the reference", what);
        if (b.ring_hops_virtual > 0)
            cr_expect_eq(b.xfers_quiet, 0, "%s: quiet transfers beside shared ring hops",
                         what);
        quiet += b.xfers_quiet;
        split += b.xfers_quiet_split;
        ran++;
        sim_result_free(&a);
        sim_result_free(&b);
    }
    cr_expect(ran >= 150, "only %d random cases ran", ran);
    cr_expect(quiet > 1000, "%lld quiet transfers", quiet);
    cr_expect(split > 50, "%lld quiet transfers' ends posted after all", split);
}
