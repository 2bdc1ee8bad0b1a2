/* test_sim_replay.c: the simulator against an independent replay written here, with
 * transfers that cost time. The replay runs each worker's compute order (F, B, I, W,
 * STEP; an all-reduce a barrier of the stage's replicas) and lets a computation wait only
 * for the data it needs; a transfer leaves when its producer ends, queues FIFO on its
 * directed link (one sender per link here: one device per server) for bytes / rate and
 * arrives latency later. The simulator must give the same makespan for random non-uniform
 * plans of every schedule kind, the reproduction of issue #22 (19.0 ms, not 23.0), and
 * the steady iteration time of zb-h1 with latency (not an average over the drain). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "core/schedule_traits.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

/* --- the replay ------------------------------------------------------------------------ */

/* Transfer time parameters of the replay: rate[a * W + b], lat[a * W + b] for workers a, b
 * on different devices (the model's devices). */
typedef struct rnet {
    int W;
    double *rate, *lat;
} rnet;

static void rnet_init(rnet *n, const sim_model *m, int W)
{
    n->W = W;
    n->rate = calloc((size_t)W * W, sizeof *n->rate);
    n->lat = calloc((size_t)W * W, sizeof *n->lat);
    cr_assert(n->rate && n->lat);
    for (int a = 0; a < W; a++)
        for (int b = 0; b < W; b++)
            if (m->worker_device[a] != m->worker_device[b])
                sim_net_path(&m->net, m->worker_device[a], m->worker_device[b],
                             &n->rate[a * W + b], &n->lat[a * W + b]);
}

static void rnet_free(rnet *n)
{
    free(n->rate), free(n->lat);
}

/* Duration of compute action a on worker w. */
static double rdur(const sim_model *m, int w, const action *a)
{
    int slot = a->kind == ACT_F ? SIM_C_F : a->kind == ACT_B ? SIM_C_B
             : a->kind == ACT_I ? SIM_C_I : a->kind == ACT_W ? SIM_C_W : SIM_C_STEP;
    double d = m->act_s[a->stage * SIM_NC + slot] * m->worker_scale[w];
    if (a->kind == ACT_STEP && m->worker_mem_Bps[w] > 0) /* a step also moves its bytes */
        d += m->step_bytes[a->stage] / m->worker_mem_Bps[w];
    return d;
}

/* Replays m->sched: returns the makespan and fills iter_end[iterations] (when not NULL)
 * with the end of each iteration's last computation (an all-reduce or a step counts in
 * the iteration of its worker's last F/B/I/W). */
static double replay(const sim_model *m, double *iter_end)
{
    const schedule *s = m->sched;
    int S = s->nstages, T = s->microbatches * s->iterations, W = s->nworkers;
    size_t ST = (size_t)S * T;
    int *fw = malloc(ST * sizeof *fw), *bw = malloc(ST * sizeof *bw);
    double *fend = malloc(ST * sizeof *fend), *bend = malloc(ST * sizeof *bend);
    double *farr = malloc(ST * sizeof *farr), *barr = malloc(ST * sizeof *barr);
    int *pc = calloc((size_t)W, sizeof *pc), *arc = calloc((size_t)W * S, sizeof *arc);
    double *fr = calloc((size_t)W, sizeof *fr), *lfree = calloc((size_t)W * W, sizeof *lfree);
    int *last_it = calloc((size_t)W, sizeof *last_it);
    cr_assert(fw && bw && fend && bend && farr && barr && pc && arc && fr && lfree && last_it);
    rnet n;
    rnet_init(&n, m, W);
    for (size_t k = 0; k < ST; k++) fw[k] = bw[k] = -1, fend[k] = bend[k] = -1;
    for (int w = 0; w < W; w++)
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            size_t k = (size_t)a->stage * T + a->microbatch;
            if (a->kind == ACT_F) fw[k] = w;
            if (a->kind == ACT_B || a->kind == ACT_I) bw[k] = w;
        }
    if (iter_end)
        for (int it = 0; it < s->iterations; it++) iter_end[it] = 0;
    double makespan = 0;
    int left = 1;
    while (left) {
        int progress = 0;
        left = 0;
        for (int w = 0; w < W; w++) {
            while (pc[w] < s->len[w]) {
                const action *a = &s->acts[w][pc[w]];
                int st = a->stage, mb = a->microbatch;
                size_t k = (size_t)st * T + (mb >= 0 ? mb : 0);
                double ready = fr[w];
                if (a->kind == ACT_SEND_F || a->kind == ACT_SEND_B || a->kind == ACT_RECV_F ||
                    a->kind == ACT_RECV_B) {
                    pc[w]++; /* the replay moves data on its own */
                    continue;
                }
                if (a->kind == ACT_ALLREDUCE) {
                    int kth = arc[w * S + st], all = 1;
                    for (int j = 0; j < s->replicas[st] && all; j++) {
                        int v = s->stage_workers[s->stage_first[st] + j];
                        all = pc[v] < s->len[v] && s->acts[v][pc[v]].kind == ACT_ALLREDUCE &&
                              s->acts[v][pc[v]].stage == st && arc[v * S + st] == kth;
                        if (all && fr[v] > ready) ready = fr[v];
                    }
                    if (!all) break;
                    for (int j = 0; j < s->replicas[st]; j++) {
                        int v = s->stage_workers[s->stage_first[st] + j];
                        fr[v] = ready;
                        arc[v * S + st]++;
                        pc[v]++;
                    }
                    progress = 1;
                    continue;
                }
                if (a->kind == ACT_F && st > 0) {
                    if (fend[k - T] < 0) break;
                    double t = fw[k - T] == w ? fend[k - T] : farr[k - T];
                    if (t > ready) ready = t;
                }
                if ((a->kind == ACT_B || a->kind == ACT_I) && st + 1 < S) {
                    if (bend[k + T] < 0) break;
                    double t = bw[k + T] == w ? bend[k + T] : barr[k + T];
                    if (t > ready) ready = t;
                }
                double end = ready + rdur(m, w, a);
                fr[w] = end;
                if (mb >= 0) last_it[w] = mb / s->microbatches;
                if (iter_end && end > iter_end[last_it[w]]) iter_end[last_it[w]] = end;
                if (end > makespan) makespan = end;
                if (a->kind == ACT_F) {
                    fend[k] = end;
                    int to = st + 1 < S ? fw[k + T] : -1;
                    if (to >= 0 && to != w) {
                        double occ = m->cut_bytes[st] / n.rate[w * W + to];
                        double t0 = end > lfree[w * W + to] ? end : lfree[w * W + to];
                        lfree[w * W + to] = t0 + occ;
                        farr[k] = t0 + occ + n.lat[w * W + to];
                    }
                }
                if (a->kind == ACT_B || a->kind == ACT_I) {
                    bend[k] = end;
                    int to = st > 0 ? bw[k - T] : -1;
                    if (to >= 0 && to != w) {
                        double occ = m->cut_bytes[st - 1] / n.rate[w * W + to];
                        double t0 = end > lfree[w * W + to] ? end : lfree[w * W + to];
                        lfree[w * W + to] = t0 + occ;
                        barr[k] = t0 + occ + n.lat[w * W + to];
                    }
                }
                pc[w]++;
                progress = 1;
            }
            left += pc[w] < s->len[w];
        }
        cr_assert(progress || !left, "the replay is stuck: the compute order cannot run");
    }
    rnet_free(&n);
    free(fw), free(bw), free(fend), free(bend), free(farr), free(barr), free(pc), free(arc);
    free(fr), free(lfree), free(last_it);
    return makespan;
}

/* --- models ---------------------------------------------------------------------------- */

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static double urand(double lo, double hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static int irand(int lo, int hi)
{
    return lo + (int)urand(0, hi - lo + 1 - 1e-9);
}

/* A net of servers of one device each: latency lat_s and rate Bps between any two, egress
 * ports wide enough that only links queue. */
static void one_device_servers(sim_model *m, int ndev, double rate_Bps, double lat_s)
{
    double gbit = rate_Bps * 8e-9;
    cluster *c = synth_servers(ndev, 1, 1, gbit, 64 * gbit, lat_s * 1e6);
    sim_net_from_cluster(&m->net, c, NULL);
    cluster_free(c);
}

/* The model of s with stage costs cost[3 * S] (F, I, W in ms; B = I + W), step_ms per
 * STEP, cut bytes and a uniform net. */
static void model_of(sim_model *m, const schedule *s, const double *cost, double step_ms,
                     const double *bytes, double rate, double lat)
{
    cr_assert_eq(sim_model_alloc(m, s), 0);
    for (int st = 0; st < s->nstages; st++) {
        double *a = m->act_s + st * SIM_NC;
        a[SIM_C_F] = cost[3 * st] * 1e-3;
        a[SIM_C_I] = cost[3 * st + 1] * 1e-3;
        a[SIM_C_W] = cost[3 * st + 2] * 1e-3;
        a[SIM_C_B] = a[SIM_C_I] + a[SIM_C_W];
        a[SIM_C_STEP] = step_ms * 1e-3;
        m->cut_bytes[st] = bytes ? bytes[st] : 0;
    }
    one_device_servers(m, s->nworkers, rate, lat);
}

static double sim_makespan(const sim_model *m, sim_result *r)
{
    plumb_err e;
    cr_assert_eq(sim_engine_run(m, r, &e), 0, "%s", e.msg);
    return r->makespan_s;
}

/* --- tests ----------------------------------------------------------------------------- */

/* Issue #22's reproduction: 2 stages, F = [3, 1] ms, B = [4, 1] ms, 2 microbatches, 3 ms
 * per transfer, zero bytes. Worker 0 runs F0 F1 B0 B1, worker 1 F0 B0 F1 B1: F0 0-3,
 * F1 3-6 (sent, arrives 9), stage 1 F0 6-7 B0 7-8 (gradient arrives 11), F1 9-10 B1
 * 10-11 (arrives 14), stage 0 B0 11-15 B1 15-19. A receive that blocked the worker where
 * it stands in the list made it 23 ms. */
Test(sim_replay, two_stage_reproduction)
{
    double cost[] = {3, 2, 2, 1, 0.5, 0.5};
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 2, 1, 2, 1, NULL, NULL};
    plumb_err e;
    schedule *s = schedule_generate_costed(&sp, cost, &e);
    cr_assert_not_null(s, "%s", e.msg);
    sim_model m;
    model_of(&m, s, cost, 0, NULL, 1e9, 3e-3);
    sim_result r;
    double t = sim_makespan(&m, &r);
    cr_expect(fabs(t - 19e-3) < 1e-12, "makespan %.6f ms, expected 19.000 ms", t * 1e3);
    cr_expect(fabs(replay(&m, NULL) - 19e-3) < 1e-12, "replay %.6f ms", replay(&m, NULL) * 1e3);
    sim_result_free(&r);
    sim_model_release(&m);
    schedule_free(s);
}

/* One random plan of kind k: 2-8 pipeline ranks, optional replicas, costs 0.2-5 ms per
 * stage and pass, steps 0-0.2 ms, cuts 0.1-20 MB, 1-100 Gb/s, latency 0.1-3 ms. Returns
 * the relative error of the simulator's makespan, or -1 when the spec was refused (too few
 * microbatches for 2bw, ...). */
static double random_case(sched_kind k, char *desc, size_t ndesc)
{
    int chunked = sched_kind_chunked(k);
    int ranks = irand(2, 8), chunks = chunked ? sched_kind_chunks(k) : 1, S = ranks * chunks;
    int M = irand(1, 10), iters = irand(1, 3);
    int reps[16], any = 0;
    /* chunked kinds replicate whole pipelines: every stage twice, or none */
    int whole = chunked && urand(0, 1) < 0.25;
    for (int st = 0; st < S; st++) {
        reps[st] = whole || (!chunked && urand(0, 1) < 0.25) ? 2 : 1;
        any |= reps[st] > 1;
    }
    if (sched_traits_of(k)->mb_per_replica || whole)
        M = 2 * irand(1, 5); /* a multiple of every replica count */
    double cost[48], bytes[16];
    for (int i = 0; i < 3 * S; i++) cost[i] = urand(0.2, 5);
    for (int st = 0; st < S; st++) bytes[st] = urand(1e5, 2e7);
    double rate = urand(1, 100) * 1.25e8, lat = urand(0.1, 3) * 1e-3, step = urand(0, 0.2);
    sched_spec sp = {k, 0, S, chunks, M, iters, any ? reps : NULL, NULL};
    plumb_err e;
    /* lowered with unit costs or the real ones: where a RECV is posted changes no timing */
    schedule *s = schedule_generate_costed(&sp, urand(0, 1) < 0.5 ? cost : NULL, &e);
    if (!s) return -1;
    sim_model m;
    model_of(&m, s, cost, step, bytes, rate, lat);
    sim_result r;
    double got = sim_makespan(&m, &r), want = replay(&m, NULL);
    snprintf(desc, ndesc, "%s: %d stages (%s), %d microbatches x %d iterations, %.2f ms "
             "latency, %.1f Gb/s: simulator %.6f ms, replay %.6f ms", sched_kind_name(k), S,
             any ? "replicated" : "no replicas", M, iters, lat * 1e3, rate * 8e-9, got * 1e3,
             want * 1e3);
    sim_result_free(&r);
    sim_model_release(&m);
    schedule_free(s);
    return fabs(got - want) / want;
}

/* 30 random plans per schedule kind; the makespans agree to 1e-9 (relative). */
Test(sim_replay, random_plans_every_kind)
{
    double worst = 0;
    int cases = 0;
    char desc[256], wdesc[256] = "";
    for (int k = 0; k < SCHED_NKINDS; k++) {
        int done = 0;
        for (int tries = 0; done < 30 && tries < 200; tries++) {
            double err = random_case((sched_kind)k, desc, sizeof desc);
            if (err < 0) continue;
            done++;
            cr_expect(err <= 1e-9, "%s", desc);
            if (err > worst) worst = err, snprintf(wdesc, sizeof wdesc, "%s", desc);
        }
        cr_expect_eq(done, 30, "%s: only %d plans generated", sched_kind_name(k), done);
        cases += done;
    }
    cr_log_info("%d random plans, worst relative error %.3g%s%s", cases, worst,
                wdesc[0] ? ": " : "", wdesc);
}

/* ZB-H1 on 2 stages with latency (F 1 ms, I 1 ms, W 1.5 ms per stage, 3 microbatches,
 * 100 us and 100 Gb/s between the devices): stage 1 posts the next iteration's first
 * receive before its optimizer step. The steady iteration time sim_run reports, from its
 * default 3 iterations, must be the replay's gap between two iteration ends in the middle
 * of a 16-iteration run, not an average that takes in the drain of a longer run. */
Test(sim_replay, zb_h1_steady_state)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.nstages = 2;
    sp.schedule = SCHED_ZB_H1;
    sp.forward_ms = 1, sp.input_ms = 1, sp.weight_ms = 1.5, sp.backward_ms = 2.5;
    sp.devices_per_server = 1;
    sp.latency_us[1] = 100;
    sp.bw_gbit[1] = 100;
    sp.microbatches = 3;
    plumb_err e;
    plan *pl = synth_plan(&sp);
    /* the truth: the replay of a long run on the simulator's priced model */
    enum { N = 16 };
    schedule *s = schedule_from_plan(pl, N, &e);
    cr_assert_not_null(s, "%s", e.msg);
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model m;
    cr_assert_eq(sim_cost_build(&m, pl, s, &net, -1, 1, &e), 0, "%s", e.msg);
    double end[N];
    replay(&m, end);
    double steady = end[N / 2] - end[N / 2 - 1];
    for (int k = 2; k < N - 1; k++)
        cr_assert(fabs(end[k] - end[k - 1] - steady) < 1e-12, "replay gap %d: %.6f ms", k,
                  (end[k] - end[k - 1]) * 1e3);
    sim_options o;
    sim_options_init(&o);
    sim_report *r = synth_run(pl, &o);
    cr_expect(fabs(r->iteration_s - steady) <= 1e-9 * steady,
              "steady iteration %.6f ms, the replay's %.6f ms", r->iteration_s * 1e3,
              steady * 1e3);
    cr_expect_eq(r->iterations, SIM_DEFAULT_ITERATIONS, "settled after %d iterations",
                 r->iterations);
    cr_log_info("zb-h1 steady iteration %.6f ms (replay %.6f ms), %d iterations simulated",
                r->iteration_s * 1e3, steady * 1e3, r->iterations);
    sim_report_free(r);
    sim_model_release(&m);
    schedule_free(s);
    plan_free(pl);
}
