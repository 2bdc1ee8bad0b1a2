/* test_sim_gradsync.c: the data-parallel gradient reduction at the end of the iteration (a
 * plan's "grad_sync": "end", sim/engine_gradsync.c) against timelines worked out by hand
 * here: two replicas of one stage, and an interleaved rank of two chunks, each with the
 * reduction overlapped (a stage's buckets ready evenly through its last backward) and at
 * the end (the rank's rings one after another once its last backward is done, every
 * bucket ready, then its steps). Then the pre-pass's order on generated schedules against
 * a definition written here, its refusal of an asynchronous schedule, the plan field, and
 * the setting's runs with synchronous point-to-point, the folded simulation and ZeRO-1's
 * split reduce-scatter / all-gather.
 * Times in the hand-built runs: F 10 ms, B 20 ms, STEP 5 ms; two servers of one device at
 * 1.31072e9 bytes/s and 1 ms apart; a stage's gradients 2 x SIM_BUCKET_BYTES, so K = 2
 * buckets whose ring (2 replicas: 2 steps) moves SIM_BUCKET_BYTES / 2 per hop and step:
 * 10 ms, plus the latency over K (0.5 ms) per step: 21 ms a bucket. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/plan.h"
#include "core/schedule.h"
#include "core/schedule_impl.h"
#include "core/timeline.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/engine_impl.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/planfix.h"
#include "tests/synth.h"

#define MS 1e-3
#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT17 "examples/llm/megatron/gpt-1.7b.json"
#define MAXA 12

/* Two workers (devices 0 and 1, one per server), each holding replica j of every stage. */
typedef struct hand {
    schedule s;
    int replicas[2], stage_workers[4], stage_first[2], len[2], wdev[2];
    action a[2][MAXA];
    action *rows[2];
} hand;

static action A(int kind, int stage, int mb)
{
    return (action){.kind = kind, .stage = stage, .microbatch = mb, .version = -1, .peer = -1,
                    .peer_stage = -1};
}

static void hand_init(hand *h, int nstages, int microbatches)
{
    memset(h, 0, sizeof *h);
    h->s = (schedule){.kind = SCHED_GPIPE, .nworkers = 2, .nstages = nstages, .chunks = 1,
                      .microbatches = microbatches, .iterations = 1,
                      .replicas = h->replicas, .stage_workers = h->stage_workers,
                      .stage_first = h->stage_first, .len = h->len, .acts = h->rows,
                      .worker_device = h->wdev};
    for (int st = 0; st < nstages; st++) {
        h->replicas[st] = 2;
        h->stage_first[st] = 2 * st;
        h->stage_workers[2 * st] = 0;
        h->stage_workers[2 * st + 1] = 1;
    }
    for (int w = 0; w < 2; w++) {
        h->rows[w] = h->a[w];
        h->wdev[w] = w;
    }
}

/* Both workers get list l[0 .. n). */
static void hand_list(hand *h, const action *l, int n)
{
    for (int w = 0; w < 2; w++) {
        memcpy(h->a[w], l, (size_t)n * sizeof *l);
        h->len[w] = n;
    }
}

/* Runs h with the setting end (0 overlap, 1 end), recording the timeline; r filled. */
static void run_hand(const hand *h, int end, sim_result *r)
{
    cluster *c = synth_servers(2, 1, 1, 1.31072e9 * 8 / 1e9, 0, 1000);
    sim_model m;
    cr_assert_eq(sim_model_alloc(&m, &h->s), 0);
    sim_net_from_cluster(&m.net, c, NULL);
    int dev[2] = {0, 1};
    for (int st = 0; st < h->s.nstages; st++) {
        m.act_s[st * SIM_NC + SIM_C_F] = 10 * MS;
        m.act_s[st * SIM_NC + SIM_C_B] = 20 * MS;
        m.act_s[st * SIM_NC + SIM_C_STEP] = 5 * MS;
        m.grad_bytes[st] = 2 * SIM_BUCKET_BYTES;
        m.allreduce_s[st] = sim_net_allreduce_s(&m.net, dev, 2, m.grad_bytes[st]);
    }
    m.record = 1;
    m.grad_sync_end = end;
    plumb_err e;
    cr_assert_eq(sim_engine_run(&m, r, &e), 0, "%s", e.msg);
    sim_model_release(&m);
    cluster_free(c);
}

/* The k-th event of kind `kind` on a track of type `ttype` of device 0 (-1: none). */
static const tl_event *event_of(const sim_result *r, int ttype, int kind, int k)
{
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *x = &r->tl->ev[i];
        const tl_track *t = &r->tl->tracks[x->track];
        if (t->kind == ttype && t->device == 0 && x->kind == kind && k-- == 0)
            return x;
    }
    return NULL;
}

static void expect_span(const sim_result *r, int ttype, int kind, int k, double from_ms,
                        double to_ms, const char *what)
{
    const tl_event *x = event_of(r, ttype, kind, k);
    cr_assert_not_null(x, "%s: no event", what);
    cr_expect(fabs(x->start_s - from_ms * MS) < 1e-9 &&
                  fabs(x->start_s + x->dur_s - to_ms * MS) < 1e-9,
              "%s: %.6f - %.6f ms, worked out by hand %.1f - %.1f ms", what, x->start_s / MS,
              (x->start_s + x->dur_s) / MS, from_ms, to_ms);
}

/* One stage on two replicas, microbatches 0 and 1: F F B B ALLREDUCE STEP.
 * overlap: B(1) runs 40 - 60 ms, so bucket 0 is ready at 50 and bucket 1 at 60: the ring
 * runs 50 - 71 and 71 - 92; the step 92 - 97.
 * end: the ring starts when both replicas reach the ALLREDUCE (60), both buckets ready:
 * 60 - 102; the step 102 - 107. */
Test(sim_gradsync, two_replicas_by_hand)
{
    hand h;
    hand_init(&h, 1, 2);
    const action l[] = {A(ACT_F, 0, 0), A(ACT_F, 0, 1), A(ACT_B, 0, 0), A(ACT_B, 0, 1),
                        A(ACT_ALLREDUCE, 0, -1), A(ACT_STEP, 0, -1)};
    hand_list(&h, l, 6);
    static const double want[2][4] = {{50, 92, 92, 97}, {60, 102, 102, 107}};
    for (int end = 0; end < 2; end++) {
        sim_result r;
        run_hand(&h, end, &r);
        const char *what = end ? "end" : "overlap";
        expect_span(&r, TL_TRACK_COLLECTIVE, TL_ALLREDUCE, 0, want[end][0], want[end][1], what);
        expect_span(&r, TL_TRACK_DEVICE, TL_STEP, 0, want[end][2], want[end][3], what);
        cr_expect(fabs(r.makespan_s - want[end][3] * MS) < 1e-9, "%s: makespan %.6f ms", what,
                  r.makespan_s / MS);
        sim_result_free(&r);
    }
}

/* An interleaved rank of two chunks (stages 0 and 1) on two replicas, one microbatch, as
 * the IR lays it out: F(0) F(1) B(1) ALLREDUCE(1) STEP(1) B(0) ALLREDUCE(0) STEP(0).
 * overlap: B(1) 20 - 40 (buckets ready 30, 40): ring 1 runs 30 - 72, then STEP(1) 72 - 77,
 * B(0) 77 - 97 (buckets 87, 97): ring 0 87 - 129, STEP(0) 129 - 134.
 * end: F F B(1) B(0) (20 - 40, 40 - 60), then ring 0 60 - 102 and ring 1 102 - 144 (the
 * chunks in model order, one after another), STEP(0) 144 - 149, STEP(1) 149 - 154. */
Test(sim_gradsync, interleaved_rank_by_hand)
{
    hand h;
    hand_init(&h, 2, 1);
    h.s.kind = SCHED_INTERLEAVED;
    h.s.chunks = 2;
    const action l[] = {A(ACT_F, 0, 0), A(ACT_F, 1, 0), A(ACT_B, 1, 0),
                        A(ACT_ALLREDUCE, 1, -1), A(ACT_STEP, 1, -1), A(ACT_B, 0, 0),
                        A(ACT_ALLREDUCE, 0, -1), A(ACT_STEP, 0, -1)};
    hand_list(&h, l, 8);
    /* per setting: the first and second ring, the first and second step, device 0 */
    static const double want[2][8] = {{30, 72, 87, 129, 72, 77, 129, 134},
                                      {60, 102, 102, 144, 144, 149, 149, 154}};
    for (int end = 0; end < 2; end++) {
        sim_result r;
        run_hand(&h, end, &r);
        const char *what = end ? "end" : "overlap";
        const double *x = want[end];
        expect_span(&r, TL_TRACK_COLLECTIVE, TL_ALLREDUCE, 0, x[0], x[1], what);
        expect_span(&r, TL_TRACK_COLLECTIVE, TL_ALLREDUCE, 1, x[2], x[3], what);
        expect_span(&r, TL_TRACK_DEVICE, TL_STEP, 0, x[4], x[5], what);
        expect_span(&r, TL_TRACK_DEVICE, TL_STEP, 1, x[6], x[7], what);
        /* which ring runs first: stage 1 under overlap, stage 0 (model order) at the end */
        const tl_event *first = event_of(&r, TL_TRACK_COLLECTIVE, TL_ALLREDUCE, 0);
        cr_expect_eq(first->stage, end ? 0 : 1, "%s: first ring of stage %d", what,
                     first->stage);
        cr_expect(fabs(r.makespan_s - x[7] * MS) < 1e-9, "%s: makespan %.6f ms", what,
                  r.makespan_s / MS);
        sim_result_free(&r);
    }
}

/* The pre-pass's order, by definition: each worker's ALLREDUCE and STEP actions of an
 * iteration (that of the worker's last computation before them) come right after its last
 * computation of that iteration and the sends that follow it, all-reduces first, then
 * steps, each in ascending stage order; every other action keeps its order. */
static void check_order(const schedule *s, const schedule *o)
{
    int nmb = s->microbatches;
    for (int w = 0; w < s->nworkers; w++) {
        cr_assert_eq(o->len[w], s->len[w]);
        const action *a = s->acts[w], *b = o->acts[w];
        int n = s->len[w], j = 0;
        /* the others in order */
        for (int i = 0; i < n; i++) {
            if (a[i].kind == ACT_ALLREDUCE || a[i].kind == ACT_STEP) continue;
            while (j < n && (b[j].kind == ACT_ALLREDUCE || b[j].kind == ACT_STEP)) j++;
            cr_assert(j < n && !memcmp(&a[i], &b[j], sizeof *a), "worker %d: action %d moved",
                      w, i);
            j++;
        }
        /* each block: after the iteration's last computation and its sends */
        for (int i = 0; i < n; i++) {
            if (b[i].kind != ACT_ALLREDUCE && b[i].kind != ACT_STEP) continue;
            if (i > 0 && (b[i - 1].kind == ACT_ALLREDUCE || b[i - 1].kind == ACT_STEP)) {
                int pa = b[i - 1].kind == ACT_ALLREDUCE, ca = b[i].kind == ACT_ALLREDUCE;
                cr_expect(pa > ca || (pa == ca && b[i - 1].stage <= b[i].stage),
                          "worker %d: %d then %d of stage %d after stage %d", w,
                          b[i - 1].kind, b[i].kind, b[i].stage, b[i - 1].stage);
                continue;
            }
            int k = i - 1; /* the block's first: what comes before it */
            while (k >= 0 && (b[k].kind == ACT_SEND_F || b[k].kind == ACT_SEND_B)) k--;
            cr_assert(k >= 0 && act_is_compute(b[k].kind), "worker %d: block at %d after %d",
                      w, i, k >= 0 ? b[k].kind : -1);
            int it = b[k].microbatch / nmb;
            for (int m = i + 1; m < n; m++)
                cr_expect(!act_is_compute(b[m].kind) || b[m].microbatch / nmb > it,
                          "worker %d: a computation of iteration %d after its block", w, it);
        }
    }
}

Test(sim_gradsync, order_by_definition)
{
    static const struct { sched_kind k; int nst, chunks, reps; } L[] = {
        {SCHED_1F1B_FLUSH, 4, 1, 2}, {SCHED_GPIPE, 3, 1, 2}, {SCHED_INTERLEAVED, 8, 2, 2},
        {SCHED_INTERLEAVED, 12, 3, 3}, {SCHED_ZB_H1, 4, 1, 2}};
    for (size_t i = 0; i < sizeof L / sizeof *L; i++) {
        int rep[16];
        for (int k = 0; k < L[i].nst; k++) rep[k] = L[i].reps;
        sched_spec sp = {.kind = L[i].k, .nstages = L[i].nst, .chunks = L[i].chunks,
                         .microbatches = 4 * L[i].reps, .iterations = 3, .replicas = rep};
        plumb_err e;
        schedule *s = schedule_generate(&sp, &e);
        cr_assert_not_null(s, "%s", e.msg);
        schedule o;
        cr_assert_eq(eng_gradsync_order(s, &o, &e), 0, "%s", e.msg);
        check_order(s, &o);
        eng_sync_order_free(&o);
        schedule_free(s);
    }
}

Test(sim_gradsync, asynchronous_schedule_refused)
{
    int rep[2] = {2, 2};
    sched_spec sp = {.kind = SCHED_PIPEDREAM, .nstages = 2, .chunks = 1, .microbatches = 4,
                     .iterations = 3, .replicas = rep};
    plumb_err e;
    schedule *s = schedule_generate(&sp, &e);
    cr_assert_not_null(s, "%s", e.msg);
    schedule o;
    cr_assert_eq(eng_gradsync_order(s, &o, &e), -1);
    cr_expect(strstr(e.msg, "grad_sync") && strstr(e.msg, "pipedream"), "%s", e.msg);
    schedule_free(s);
}

/* A 3D plan of gpt-1.7b (tp 1, pp 2, interleave 2, dp 4) on the DGX A100 file. */
static plan *gpt_plan(int end, int sync, int zero, int opg)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = 1, o.pp = 2, o.dp = 4, o.gpus = 8;
    o.global_batch = 64, o.microbatch_size = 4, o.interleave = 2;
    o.recompute = RECOMPUTE_FULL;
    o.zero = zero;
    o.p2p_sync = sync;
    o.grad_sync_end = end;
    plan *pl = plan3d(GPT17, A100, &o);
    pl->overlap_param_gather = opg;
    return pl;
}

/* The engine on pl (3 iterations) with its timeline; r filled. */
static void engine_timeline(const plan *pl, sim_result *r)
{
    plumb_err e;
    err_clear(&e);
    schedule *s = schedule_from_plan(pl, 3, &e);
    cr_assert_not_null(s, "%s", e.msg);
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model m;
    cr_assert_eq(sim_cost_build(&m, pl, s, &net, -1, 1, &e), 0, "%s", e.msg);
    m.record = 1;
    cr_assert_eq(sim_engine_run(&m, r, &e), 0, "%s", e.msg);
    sim_model_release(&m);
    schedule_free(s);
}

/* The all-reduces of each device that start before its last computation of their
 * iteration ends. */
static int early_rings(const sim_result *r)
{
    const timeline *tl = r->tl;
    int early = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *x = &tl->ev[i];
        if (x->kind != TL_ALLREDUCE || tl->tracks[x->track].kind != TL_TRACK_COLLECTIVE)
            continue;
        int dev = tl->tracks[x->track].device;
        double last = 0;
        for (size_t j = 0; j < tl->n; j++) {
            const tl_event *y = &tl->ev[j];
            if (y->kind <= TL_W && y->iteration == x->iteration &&
                tl->tracks[y->track].kind == TL_TRACK_DEVICE &&
                tl->tracks[y->track].device == dev && y->start_s + y->dur_s > last)
                last = y->start_s + y->dur_s;
        }
        early += x->start_s < last - 1e-12;
    }
    return early;
}

/* With and without synchronous point-to-point (whose pre-pass reorders the same lists):
 * at the end, no device's ring starts before its last computation of the iteration has
 * ended (overlapped, some do: the check can fail), and the iteration is no shorter. */
Test(sim_gradsync, composes_with_p2p_sync)
{
    for (int sync = 0; sync < 2; sync++) {
        double it[2];
        for (int end = 0; end < 2; end++) {
            plan *pl = gpt_plan(end, sync, 0, 0);
            sim_result r;
            engine_timeline(pl, &r);
            int early = early_rings(&r);
            if (end)
                cr_expect_eq(early, 0, "sync %d: %d rings before the last backward", sync,
                             early);
            else
                cr_expect_gt(early, 0, "sync %d: no ring overlaps a backward", sync);
            it[end] = r.iteration_s;
            sim_result_free(&r);
            plan_free(pl);
        }
        cr_expect_gt(it[1], it[0], "sync %d: end %.9g s, overlap %.9g s", sync, it[1], it[0]);
    }
}

/* The folded simulation (one pipeline and a reduced worker per other replica) gives the
 * full run's figures bit for bit at the end too, with ZeRO-1 (the ring whole) and without,
 * and with synchronous point-to-point. */
Test(sim_gradsync, folded_is_the_full_run)
{
    for (int zero = 0; zero < 2; zero++)
        for (int sync = 0; sync < 2; sync++) {
            plan *pl = gpt_plan(1, sync, zero, 0);
            plumb_err e;
            err_clear(&e);
            sim_report *full = sim_run(pl, NULL, &e);
            cr_assert_not_null(full, "%s", e.msg);
            sim_report *fold = sim_run_folded(pl, NULL, 0, &e);
            cr_assert_not_null(fold, "%s", e.msg);
            cr_expect(full->iteration_s == fold->iteration_s, "zero %d sync %d: full %.17g, "
                      "folded %.17g", zero, sync, full->iteration_s, fold->iteration_s);
            cr_assert_eq(full->ndevices, fold->ndevices);
            for (int i = 0; i < full->ndevices; i++)
                cr_expect(full->devices[i].busy_s == fold->devices[i].busy_s &&
                              full->devices[i].comm_s == fold->devices[i].comm_s,
                          "zero %d sync %d: device %d", zero, sync, full->devices[i].device);
            sim_report_free(full);
            sim_report_free(fold);
            plan_free(pl);
        }
}

/* The what-ifs (sim_options.p2p_sync and grad_sync_end, plumb sim --p2p / --grad-sync)
 * simulate what the plan written with those fields simulates, bit for bit, in sim_run and
 * in the folded simulation, both ways (a written field undone by the what-if); the report
 * names them as what-ifs and its layout the reduction it ran; an option out of range is
 * refused. */
Test(sim_gradsync, whatifs_are_the_plan_fields)
{
    for (int fold = 0; fold < 2; fold++)
        for (int k = 0; k < 4; k++) {
            int end = k & 1, sync = k >> 1;
            plan *asked = gpt_plan(end, sync, 0, 0), *other = gpt_plan(!end, !sync, 0, 0);
            plumb_err e;
            err_clear(&e);
            sim_options o;
            sim_options_init(&o);
            o.grad_sync_end = end;
            o.p2p_sync = sync;
            sim_report *want = fold ? sim_run_folded(asked, NULL, 0, &e) : sim_run(asked, NULL, &e);
            cr_assert_not_null(want, "%s", e.msg);
            sim_report *got = fold ? sim_run_folded(other, &o, 0, &e) : sim_run(other, &o, &e);
            cr_assert_not_null(got, "%s", e.msg);
            sim_report *base = sim_run(other, NULL, &e);
            cr_assert_not_null(base, "%s", e.msg);
            cr_expect(got->iteration_s == want->iteration_s && got->iteration_s !=
                      base->iteration_s, "fold %d end %d sync %d: what-if %.17g, plan "
                      "%.17g, written %.17g", fold, end, sync, got->iteration_s,
                      want->iteration_s, base->iteration_s);
            for (int i = 0; i < got->ndevices && i < want->ndevices; i++)
                cr_expect(got->devices[i].comm_s == want->devices[i].comm_s, "device %d", i);
            cr_expect(sim_options_has_whatif(&got->whatif));
            cr_expect_eq(got->grad_sync_end, end);
            cJSON *w = sim_options_to_json(&got->whatif, other->clus);
            cr_expect_str_eq(cJSON_GetObjectItem(w, "grad_sync")->valuestring,
                             end ? "end" : "overlap");
            cr_expect_str_eq(cJSON_GetObjectItem(w, "p2p")->valuestring,
                             sync ? "sync" : "overlap");
            cJSON_Delete(w);
            sim_report_free(want);
            sim_report_free(got);
            sim_report_free(base);
            plan_free(asked);
            plan_free(other);
        }
    plan *pl = gpt_plan(0, 0, 0, 0);
    sim_options o;
    sim_options_init(&o);
    cr_expect(!sim_options_has_whatif(&o), "the defaults are the plan as written");
    o.grad_sync_end = 2;
    plumb_err e;
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "grad_sync: expected -1 (the plan's), 0 or 1 (got 2)"), "%s", e.msg);
    plan_free(pl);
}

/* ZeRO-1's all-gather apart (overlap_param_gather) follows an overlapped reduction
 * (Megatron-Core asserts --overlap-grad-reduce with --overlap-param-gather): a plan with
 * both is refused with one line naming the field, as an asynchronous schedule is. */
Test(sim_gradsync, plan_refuses_what_cannot_end)
{
    plan *pl = gpt_plan(1, 0, 1, 0);
    plumb_err e;
    err_clear(&e);
    cr_expect_eq(plan_validate(pl, "p.json", &e), 0, "%s", e.msg);
    pl->overlap_param_gather = 1;
    cr_expect_eq(plan_validate(pl, "p.json", &e), -1);
    cr_expect(strstr(e.msg, "overlap_param_gather") && strstr(e.msg, "grad_sync end"), "%s",
              e.msg);
    plan_free(pl);
}

static int grad_sync_end_of(const plan *pl) { return pl->grad_sync_end; }

/* The plan field on a plan of the 2D planner (four replicated gpipe stages):
 * "grad_sync": "end" loads, is written back, and is what sim_run simulates (no shorter:
 * stage 0's ring, after the flush's last backward either way, decides the iteration);
 * overlap is not written; a value other than overlap or end is one clear error naming the
 * field. */
Test(sim_gradsync, plan_field)
{
    const plan_field f = {.key = "grad_sync", .value = "end", .bad = "later",
                          .choices = "overlap or end", .get = grad_sync_end_of, .slower = 0};
    plan_field_check("examples/plans/resnet50-2x8-gpipe-replicated.json", &f);
}
