/* test_sim_pgather.c: ZeRO-1's parameter all-gather run apart from the gradients'
 * reduce-scatter (sim_model.gather_bytes, the plan's overlap_param_gather): on a
 * hand-built two-replica stage whose ring runs over two servers, every time of the run is
 * worked out by hand below (bucket readiness, the two halves' ring steps, the step, the
 * all-gather's buckets and the next forward's wait), and through sim_run a 3D plan with
 * the setting against the same plan without it. Times in milliseconds in the comments,
 * seconds in the code. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/engine.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

#define MS 1e-3
#define BKT SIM_BUCKET_BYTES

/* One stage on two workers (devices 0 and 1, one per server, 1e9 bytes/s between them,
 * no latency), two iterations of one microbatch each: F, B, ALLREDUCE, STEP. */
typedef struct two {
    schedule s;
    int replicas[1], stage_workers[2], stage_first[1], len[2], wdev[2];
    action a[2][8];
    action *rows[2];
} two;

static void two_init(two *h)
{
    memset(h, 0, sizeof *h);
    h->s = (schedule){.kind = SCHED_GPIPE, .nworkers = 2, .nstages = 1, .chunks = 1,
                      .microbatches = 1, .iterations = 2, .replicas = h->replicas,
                      .stage_workers = h->stage_workers, .stage_first = h->stage_first,
                      .len = h->len, .acts = h->rows, .worker_device = h->wdev};
    h->replicas[0] = 2;
    for (int w = 0; w < 2; w++) {
        h->rows[w] = h->a[w];
        h->wdev[w] = w;
        h->stage_workers[w] = w;
        for (int it = 0; it < 2; it++) {
            int kinds[4] = {ACT_F, ACT_B, ACT_ALLREDUCE, ACT_STEP};
            for (int k = 0; k < 4; k++)
                h->a[w][h->len[w]++] = (action){.kind = kinds[k], .stage = 0,
                                                .microbatch = k < 2 ? it : -1,
                                                .version = -1, .peer = -1,
                                                .peer_stage = -1};
        }
    }
}

/* Two servers of one device, 1e9 bytes/s between them, no latency. */
static cluster *two_servers(void)
{
    return synth_servers(2, 1, 1, 8, 0, 0); /* 1e9 bytes/s */
}

/* Runs schedule s on c with its nst stages priced alike: forward f, backward 20 ms, step
 * 4 ms, parameters of one bucket (BKT bytes) and gradients of two (2 BKT: grad_bytes
 * 1.5 BKT, so K = 2 buckets); gather 1: the all-gather apart. A timeline into r. */
static void run_priced(const schedule *s, const cluster *c, double f, int gather,
                       sim_result *r)
{
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    for (int st = 0; st < s->nstages; st++) {
        m.act_s[st * SIM_NC + SIM_C_F] = f;
        m.act_s[st * SIM_NC + SIM_C_B] = 20 * MS;
        m.act_s[st * SIM_NC + SIM_C_STEP] = 4 * MS;
        m.grad_bytes[st] = 1.5 * BKT;
        m.gather_bytes[st] = gather ? BKT : 0;
        m.allreduce_s[st] = 1; /* > 0: the ring moves */
    }
    m.record = 1;
    plumb_err e;
    cr_assert_eq(sim_engine_run(&m, r, &e), 0, "%s", e.msg);
    sim_model_release(&m);
}

/* The one-stage pair with forward f (run_priced). */
static void run_two(double f, int gather, sim_result *r)
{
    two h;
    two_init(&h);
    cluster *c = two_servers();
    run_priced(&h.s, c, f, gather, r);
    cluster_free(c);
}

/* The event of kind k of iteration it on worker 0's device (device track for compute,
 * collective track otherwise), the n-th such. */
static const tl_event *event_of(const sim_result *r, int k, int it, int n)
{
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *ev = &r->tl->ev[i];
        const tl_track *tr = &r->tl->tracks[ev->track];
        int want = k == TL_ALLREDUCE ? TL_TRACK_COLLECTIVE : TL_TRACK_DEVICE;
        if (ev->kind == k && ev->iteration == it && tr->device == 0 && tr->kind == want &&
            n-- == 0)
            return ev;
    }
    return NULL;
}

static void expect_span(const tl_event *ev, double start, double dur, const char *what)
{
    cr_assert_not_null(ev, "%s: no event", what);
    cr_expect(fabs(ev->start_s - start) < 1e-12, "%s starts at %.9f s, expected %.9f s", what,
              ev->start_s, start);
    cr_expect(fabs(ev->dur_s - dur) < 1e-12, "%s lasts %.9f s, expected %.9f s", what,
              ev->dur_s, dur);
}

/* Hand replay, forward 10 ms. A hop of BKT/4 bytes takes q = 6.5536 ms at 1e9 bytes/s.
 * Iteration 0: F 0-10, B 10-30; the gradient buckets are ready at 20 and 30. Split: the
 * reduce-scatter moves 2 BKT / (K r) = 2q per hop, one step (r - 1) per bucket: 20-33.1072
 * and 33.1072-46.2144, which releases the ALLREDUCE; STEP 46.2144-50.2144; the all-gather
 * moves BKT / (K r) = q per hop: bucket 0 (the first layers) 50.2144-56.768, bucket 1
 * 56.768-63.3216. The next forward, ready at 50.2144, reaches bucket 1 halfway (5 ms in),
 * so it ends at max(60.2144, 56.768 + 10, 63.3216 + 5) = 68.3216: it runs 58.3216-68.3216,
 * after bucket 0 and reaching bucket 1 as it ends. Without the split the one ring moves
 * 1.5 BKT / 4 = 1.5q per hop in 2 steps per bucket: 20-39.6608, 39.6608-59.3216, STEP
 * 59.3216-63.3216, F 63.3216-73.3216: 5 ms later. */
Test(sim_pgather, forward_waits_for_the_buckets_it_reaches)
{
    double q = BKT / 4.0 / 1e9;
    sim_result r;
    run_two(10 * MS, 1, &r);
    double rs0 = 20 * MS, rs1 = rs0 + 2 * q + 2 * q, step = rs1 + 4 * MS;
    double ag0 = step + q, ag1 = ag0 + q;
    expect_span(event_of(&r, TL_ALLREDUCE, 0, 0), rs0, rs1 - rs0, "reduce-scatter 0");
    expect_span(event_of(&r, TL_STEP, 0, 0), rs1, 4 * MS, "step 0");
    expect_span(event_of(&r, TL_ALLREDUCE, 0, 1), step, ag1 - step, "all-gather 0");
    double fend = fmax(fmax(step + 10 * MS, ag0 + 10 * MS), ag1 + 5 * MS);
    cr_expect(fabs(fend - (ag1 + 5 * MS)) < 1e-12); /* bucket 1 decides here */
    expect_span(event_of(&r, TL_F, 1, 0), fend - 10 * MS, 10 * MS, "forward 1");
    expect_span(event_of(&r, TL_B, 1, 0), fend, 20 * MS, "backward 1");
    /* iteration 1 repeats from the forward's end: buckets ready 10 and 20 ms into the
     * backward, the first reduce-scatter step (2q) outlasts the second's wait */
    expect_span(event_of(&r, TL_ALLREDUCE, 1, 0), fend + 10 * MS, 4 * q, "reduce-scatter 1");
    cr_expect(event_of(&r, TL_ALLREDUCE, 1, 1) != NULL, "the last iteration's all-gather runs");
    cr_expect_eq(r.busy_total[0], r.busy_total[1]);
    double bytes = 0;
    for (int i = 0; i < r.nlinks; i++)
        bytes += r.links[i].bytes;
    /* per iteration and hop: the reduce-scatter 2 BKT / 2, the all-gather BKT / 2 */
    cr_expect(fabs(bytes - 2 * 2 * (BKT + BKT / 2.0)) < 1e-3, "link bytes %.1f", bytes);
    sim_result_free(&r);

    run_two(10 * MS, 0, &r);
    double ar1 = 20 * MS + 4 * 1.5 * q;
    expect_span(event_of(&r, TL_ALLREDUCE, 0, 0), 20 * MS, ar1 - 20 * MS, "all-reduce 0");
    expect_span(event_of(&r, TL_F, 1, 0), ar1 + 4 * MS, 10 * MS, "forward 1, one ring");
    cr_expect(fend < ar1 + 14 * MS - 4.9 * MS, "the split ends the forward 5 ms sooner");
    sim_result_free(&r);
}

/* Forward 40 ms: iteration 0's F 0-40, B 40-60, buckets ready at 50 and 60, reduce-scatter
 * 50-63.1072 and 63.1072-76.2144, STEP -80.2144, all-gather 80.2144-86.768 and -93.3216.
 * The forward reaches bucket 1 20 ms in: it ends at max(120.2144, 86.768 + 40,
 * 93.3216 + 20) = 126.768, so it starts the moment bucket 0 has arrived (86.768), before
 * the all-gather ends: it waits for the first bucket only. */
Test(sim_pgather, long_forward_waits_for_the_first_bucket_only)
{
    double q = BKT / 4.0 / 1e9;
    sim_result r;
    run_two(40 * MS, 1, &r);
    double step = 50 * MS + 4 * q + 4 * MS, ag0 = step + q, ag1 = ag0 + q;
    const tl_event *f = event_of(&r, TL_F, 1, 0);
    expect_span(f, ag0, 40 * MS, "forward 1");
    cr_expect(f && f->start_s < ag1, "it starts before the all-gather ends");
    expect_span(event_of(&r, TL_ALLREDUCE, 0, 1), step, ag1 - step, "all-gather 0");
    sim_result_free(&r);
}

/* Two stages on each of the two workers (an interleaved rank's two virtual stages, both
 * replicated on devices 0 and 1), per iteration F0 F1 B1 B0, then ALLREDUCE and STEP of
 * stage 1, then of stage 0; forwards 10 ms, backwards 20 ms, steps 4 ms, each stage's
 * parameters one bucket (K = 2 as above). Iteration 0: F0 0-10, F1 10-20, B1 20-40, B0
 * 40-60. Stage 1's reduce-scatter (2q per bucket) runs 30-43.1072-56.2144; stage 0's
 * buckets, ready at 50 and 60, queue behind it on the same two links: 56.2144-69.3216-
 * 82.4288. STEP 1 60-64 (its members arrive at 60), STEP 0 82.4288-86.4288. Only then (the
 * rank's one optimizer step) the all-gathers run, stage 0 first: 86.4288-92.9824-99.536,
 * then stage 1: -106.0896-112.6432. Iteration 1: F0, ready at 86.4288, ends at
 * max(96.4288, 92.9824 + 10, 99.536 + 5) = 104.536; F1, ready then, waits for stage 1's
 * gather and ends at max(114.536, 106.0896 + 10, 112.6432 + 5) = 117.6432. */
Test(sim_pgather, a_rank_gathers_its_stages_in_order_after_its_step)
{
    schedule sc = {.kind = SCHED_GPIPE, .nworkers = 2, .nstages = 2, .chunks = 2,
                   .microbatches = 1, .iterations = 2};
    int replicas[2] = {2, 2}, first[2] = {0, 2}, sw[4] = {0, 1, 0, 1}, len[2] = {0, 0};
    int wdev[2] = {0, 1};
    action a[2][16], *rows[2] = {a[0], a[1]};
    sc.replicas = replicas, sc.stage_first = first, sc.stage_workers = sw, sc.len = len;
    sc.acts = rows, sc.worker_device = wdev;
    for (int w = 0; w < 2; w++)
        for (int it = 0; it < 2; it++) {
            int kinds[8] = {ACT_F, ACT_F, ACT_B, ACT_B, ACT_ALLREDUCE, ACT_STEP, ACT_ALLREDUCE,
                            ACT_STEP};
            int stage[8] = {0, 1, 1, 0, 1, 1, 0, 0};
            for (int k = 0; k < 8; k++)
                a[w][len[w]++] = (action){.kind = kinds[k], .stage = stage[k],
                                          .microbatch = k < 4 ? it : -1, .version = -1,
                                          .peer = -1, .peer_stage = -1};
        }
    cluster *c = two_servers();
    sim_result r;
    run_priced(&sc, c, 10 * MS, 1, &r);
    double q = BKT / 4.0 / 1e9;
    double rs1 = 30 * MS + 4 * q, rs0 = rs1 + 4 * q, step0 = rs0 + 4 * MS;
    double ag0 = step0 + 2 * q, ag1 = ag0 + 2 * q;
    const tl_event *got[2] = {NULL, NULL};
    int n = 0;
    for (size_t i = 0; i < r.tl->n; i++) {  /* the all-gathers: after each reduce-scatter */
        const tl_event *ev = &r.tl->ev[i];
        if (ev->kind == TL_ALLREDUCE && ev->iteration == 0 &&
            r.tl->tracks[ev->track].kind == TL_TRACK_COLLECTIVE &&
            r.tl->tracks[ev->track].device == 0 && ev->start_s >= step0 - 1e-12 && n < 2)
            got[n++] = ev;
    }
    cr_assert_eq(n, 2, "two all-gathers of iteration 0 on device 0");
    expect_span(got[0], step0, ag0 - step0, "stage 0's all-gather");
    cr_expect_eq(got[0]->stage, 0);
    expect_span(got[1], ag0, ag1 - ag0, "stage 1's all-gather");
    cr_expect_eq(got[1]->stage, 1);
    double f0 = ag0 + 5 * MS;  /* bucket 1 of stage 0 decides */
    double f1 = ag1 + 5 * MS;
    const tl_event *ev0 = NULL, *ev1 = NULL;
    for (size_t i = 0; i < r.tl->n; i++) {
        const tl_event *ev = &r.tl->ev[i];
        if (ev->kind == TL_F && ev->iteration == 1 && r.tl->tracks[ev->track].device == 0)
            *(ev->stage == 0 ? &ev0 : &ev1) = ev;
    }
    expect_span(ev0, f0 - 10 * MS, 10 * MS, "forward 1 of stage 0");
    expect_span(ev1, f1 - 10 * MS, 10 * MS, "forward 1 of stage 1");
    sim_result_free(&r);
    cluster_free(c);
}

/* Through sim_run: a 3D plan (4 stages x 2 replicas on servers of 2 devices, zero 1, bf16)
 * with overlap_param_gather against the same plan without it. Split, the ring moves the
 * same bytes (reduce-scatter 2 P + all-gather P per stage = 2 x 1.5 P), and the
 * iteration is no longer (the all-gather leaves the backward's tail). The setting belongs
 * to zero 1: a plan with it and zero 0 is refused by plan_validate. */
Test(sim_pgather, plan_setting_through_sim_run)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.nstages = 4;
    sp.replicas = 2;
    sp.devices_per_server = 2;
    sp.bw_gbit[1] = 25;
    sp.parameter_bytes = 400e6;
    sp.microbatches = 4;
    sp.optimizer = OPT_ADAM;
    plumb_err e;
    plan *pl = synth_plan(&sp);
    pl->zero = 1;
    pl->precision = DEV_BF16;
    sim_report *a = synth_run(pl, NULL);
    pl->overlap_param_gather = 1;
    cr_expect_eq(plan_validate(pl, "p.json", &e), 0, "%s", e.msg);
    sim_report *b = synth_run(pl, NULL);
    cr_expect(b->iteration_s < a->iteration_s, "split %.6f s, one ring %.6f s",
              b->iteration_s, a->iteration_s);
    double ba = 0, bb = 0;
    for (int i = 0; i < a->nlinks; i++)
        ba += a->links[i].bytes;
    for (int i = 0; i < b->nlinks; i++)
        bb += b->links[i].bytes;
    cr_expect(fabs(ba - bb) <= 1e-9 * ba, "link bytes %.1f against %.1f", bb, ba);
    sim_report_free(a);
    sim_report_free(b);
    /* the file keeps it */
    char path[] = "/tmp/plumb_pgather_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    plan *back = plan_load(path, &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_expect_eq(back->overlap_param_gather, 1);
    cr_expect(plan_equal(pl, back));
    back->overlap_param_gather = 0;
    cr_expect(!plan_equal(pl, back), "plan_equal compares the setting");
    plan_free(back);
    unlink(path);
    pl->schedule = SCHED_PIPEDREAM;
    cr_expect_neq(plan_validate(pl, "p.json", &e), 0);
    cr_expect(strstr(e.msg, "overlap_param_gather: expected false with schedule pipedream") !=
              NULL, "%s", e.msg);
    pl->schedule = SCHED_1F1B_FLUSH;
    pl->zero = 0;
    cr_expect_neq(plan_validate(pl, "p.json", &e), 0);
    cr_expect(strstr(e.msg, "overlap_param_gather: expected false unless zero is 1") != NULL,
              "%s", e.msg);
    plan_free(pl);
}
