/* test_sim_fold.c: the one-pipeline simulation of a data-parallel 3D layout
 * (sim_run_folded, sim/sim_fold.c) against the full simulation of every replica (sim_run)
 * on GPT-3 175B and Llama 3 layouts of the shipped DGX A100 cluster: several tp x pp x dp,
 * every schedule, interleave, ZeRO, recomputation, sequence parallelism and 1024 GPUs.
 * Iteration time, throughput and bubble within 1e-9 relative, each device's memory
 * identical byte for byte, and every device and link of the full run in the folded
 * report; without mixed rings every figure bit for bit (the folded run replays replica
 * 0's actions on the same links). The layouts that must fold do (sim_fold_check), so the comparison is not
 * against sim_run itself; those whose transfers would share a port beyond its lanes must
 * not. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/schedule.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "sim/sim.h"
#include "tests/planfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT3 "examples/llm/gpt3-175b.json"
#define LLAMA "examples/llm/llama3-70b.json"

typedef struct lay {
    const char *model;
    int gpus, tp, pp, dp, batch, recompute, interleave, schedule, zero, seqpar;
    int folds; /* 1: sim_fold_check must accept it, 0: must refuse it */
} lay;

/* opg 1: overlap_param_gather (zero 1), the all-gather under the next forward */
static plan *build_opg(const lay *L, int opg)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = L->gpus, o.tp = L->tp, o.pp = L->pp, o.dp = L->dp;
    o.global_batch = L->batch;
    o.microbatch_size = 1;
    o.recompute = L->recompute;
    o.interleave = L->interleave;
    o.schedule = L->schedule;
    o.zero = L->zero;
    o.sequence_parallel = L->seqpar;
    plan *pl = plan3d(L->model, A100, &o);
    pl->overlap_param_gather = opg;
    return pl;
}


static double rel(double a, double b)
{
    return a == b ? 0 : fabs(a - b) / fmax(fabs(a), fabs(b));
}

static void check_opg(const lay *L, int opg)
{
    plan *pl = build_opg(L, opg);
    plumb_err e;
    err_clear(&e);
    schedule *s = schedule_from_plan(pl, 3, &e);
    cr_assert(s, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    char why[160] = "";
    int folds = sim_fold_check(pl, s, &o, 1, why, sizeof why);
    schedule_free(s);
    cr_assert_eq(folds, L->folds, "%dx%dx%d schedule %d: folds %d (%s)", L->tp, L->pp, L->dp,
                 L->schedule, folds, why);
    sim_report *full = sim_run(pl, NULL, &e);
    cr_assert(full, "%s", e.msg);
    sim_report *one = sim_run_folded(pl, NULL, 1, &e);
    cr_assert(one, "%s", e.msg);
    /* without mixed rings: sim_run's report bit for bit (or sim_run itself) */
    sim_report *exact = sim_run_folded(pl, NULL, 0, &e);
    cr_assert(exact, "%s", e.msg);
    cr_assert_eq(exact->ndevices, full->ndevices);
    cr_expect(exact->iteration_s == full->iteration_s &&
              exact->samples_per_s == full->samples_per_s &&
              exact->bubble_fraction == full->bubble_fraction && exact->mfu == full->mfu);
    for (int i = 0; i < full->ndevices; i++) {
        const sim_device_report *a = &full->devices[i], *b = &exact->devices[i];
        cr_expect(a->device == b->device && a->busy_s == b->busy_s && a->comm_s == b->comm_s &&
                  a->idle_s == b->idle_s && !memcmp(&a->mem, &b->mem, sizeof a->mem),
                  "device %d: not sim_run's bit for bit", a->device);
    }
    sim_report_free(exact);
    const char *what = L->model;
    cr_expect_leq(rel(full->iteration_s, one->iteration_s), 1e-9, "%s %dx%dx%d: %.12g vs %.12g",
                  what, L->tp, L->pp, L->dp, full->iteration_s, one->iteration_s);
    cr_expect_leq(rel(full->samples_per_s, one->samples_per_s), 1e-9);
    cr_expect_leq(fabs(full->bubble_fraction - one->bubble_fraction), 1e-9);
    cr_expect_leq(rel(full->mfu, one->mfu), 1e-9);
    cr_expect_eq(full->iterations, one->iterations);
    cr_expect_eq(full->microbatches, one->microbatches);
    cr_expect_eq(full->fits, one->fits);
    cr_expect_eq(full->peak_memory_bytes, one->peak_memory_bytes);
    cr_assert_eq(full->ndevices, one->ndevices);
    for (int i = 0; i < full->ndevices; i++) {
        const sim_device_report *a = &full->devices[i], *b = &one->devices[i];
        cr_assert_eq(a->device, b->device);
        cr_expect(!memcmp(&a->mem, &b->mem, sizeof a->mem), "device %d memory differs",
                  a->device);
        cr_expect_leq(rel(a->busy_s, b->busy_s), 1e-9, "device %d busy", a->device);
        cr_expect_leq(rel(a->comm_s, b->comm_s), 1e-9, "device %d comm", a->device);
        cr_expect_eq(a->nstages, b->nstages);
        cr_expect_eq(a->max_inflight, b->max_inflight);
    }
    cr_assert_eq(full->nlinks, one->nlinks);
    for (int i = 0; i < full->nlinks; i++) {
        cr_expect(full->links[i].src == one->links[i].src &&
                  full->links[i].dst == one->links[i].dst, "link %d", i);
        cr_expect_leq(rel(full->links[i].bytes, one->links[i].bytes), 1e-9, "link %d bytes", i);
    }
    sim_report_free(full);
    sim_report_free(one);
    plan_free(pl);
}

/* One event as a comparable row: its track's kind and devices, then the event. */
typedef struct row {
    int tkind, dev, peer, kind, stage, peer_stage, mb, iter;
    double start, dur, bytes;
} row;

static int cmp_row(const void *a, const void *b)
{
    const row *x = a, *y = b;
    const int *p = &x->tkind, *q = &y->tkind;
    for (int i = 0; i < 8; i++)
        if (p[i] != q[i]) return p[i] < q[i] ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static row *rows_of(const timeline *tl)
{
    row *v = malloc((tl->n + 1) * sizeof *v);
    cr_assert(v);
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        const tl_track *t = &tl->tracks[e->track];
        v[i] = (row){t->kind, t->device, t->peer, e->kind, e->stage, e->peer_stage,
                     e->microbatch, e->iteration, e->start_s, e->dur_s, e->bytes};
    }
    qsort(v, tl->n, sizeof *v, cmp_row);
    return v;
}

/* The timelines of both runs hold the same events on the same devices and links, with
 * the same microbatches (replica j's k-th of an iteration: k r + j) and times. */
static void check_timeline_opg(const lay *L, int mode, int opg)
{
    plan *pl = build_opg(L, opg);
    plumb_err e;
    err_clear(&e);
    sim_options o;
    sim_options_init(&o);
    o.timeline = mode;
    schedule *s = schedule_from_plan(pl, 3, &e);
    cr_assert(s && sim_fold_check(pl, s, &o, 0, NULL, 0), "the layout does not fold");
    schedule_free(s);
    sim_report *full = sim_run(pl, &o, &e), *one = sim_run_folded(pl, &o, 0, &e);
    cr_assert(full && one && full->tl && one->tl, "%s", e.msg);
    cr_assert_eq(full->tl->n, one->tl->n, "%zu vs %zu events", full->tl->n, one->tl->n);
    row *a = rows_of(full->tl), *b = rows_of(one->tl);
    for (size_t i = 0; i < full->tl->n; i++) {
        cr_assert(!memcmp(&a[i], &b[i], 8 * sizeof(int)), "event %zu: device %d kind %d "
                  "mb %d vs device %d kind %d mb %d", i, a[i].dev, a[i].kind, a[i].mb,
                  b[i].dev, b[i].kind, b[i].mb);
        cr_assert_leq(fabs(a[i].start - b[i].start), 1e-9 * fmax(1, a[i].start));
        cr_assert_leq(fabs(a[i].dur - b[i].dur), 1e-9 * fmax(1, a[i].dur));
    }
    for (int k = 0; k < full->tl->ntracks; k++) {
        const tl_track *t = &full->tl->tracks[k];
        int found = 0;
        for (int j = 0; j < one->tl->ntracks && !found; j++) {
            const tl_track *u = &one->tl->tracks[j];
            found = u->kind == t->kind && u->device == t->device && u->peer == t->peer &&
                    !strcmp(u->name, t->name) && u->peak_bytes == t->peak_bytes;
        }
        cr_expect(found, "track %s missing or unlike", t->name);
    }
    cr_expect_eq(full->tl->ncounters, one->tl->ncounters);
    free(a), free(b);
    sim_report_free(full);
    sim_report_free(one);
    plan_free(pl);
}

static void check(const lay *L)
{
    check_opg(L, 0);
}

static void check_timeline(const lay *L, int mode)
{
    check_timeline_opg(L, mode, 0);
}

Test(sim_fold, timeline_dashboard)
{
    check_timeline(&(lay){GPT3, 256, 8, 4, 8, 64, RECOMPUTE_FULL, 0, -1, 0, 0, 1},
                   SIM_TIMELINE_NO_RING_HOPS);
    check_timeline(&(lay){GPT3, 256, 8, 4, 8, 64, RECOMPUTE_NONE, 3, -1, 1, 0, 1},
                   SIM_TIMELINE_NO_RING_HOPS);
}

/* The parameter all-gather apart (overlap_param_gather): its ring over every replica's
 * device, the forwards waiting for its buckets, the same in the folded run. */
Test(sim_fold, param_gather_apart)
{
    check_opg(&(lay){GPT3, 1024, 8, 8, 16, 1536, RECOMPUTE_FULL, 2, -1, 1, 1, 1}, 1);
    check_opg(&(lay){LLAMA, 256, 8, 2, 16, 512, RECOMPUTE_FULL, 5, -1, 1, 0, 1}, 1);
}

Test(sim_fold, param_gather_apart_every_schedule)
{
    for (int k = 0; k < SCHED_NKINDS; k++)
        check_opg(&(lay){GPT3, 512, 8, 8, 8, 512, RECOMPUTE_NONE, 0, k, 1, 0, 1}, 1);
}

Test(sim_fold, param_gather_apart_timelines)
{
    check_timeline_opg(&(lay){GPT3, 256, 8, 4, 8, 64, RECOMPUTE_NONE, 3, -1, 1, 0, 1},
                       SIM_TIMELINE_NO_RING_HOPS, 1);
    check_timeline_opg(&(lay){LLAMA, 128, 8, 4, 4, 32, RECOMPUTE_SELECTIVE, 0, SCHED_ZB_H1, 1,
                              0, 1}, SIM_TIMELINE_FULL, 1);
}

Test(sim_fold, timeline_full)
{
    check_timeline(&(lay){LLAMA, 128, 8, 4, 4, 32, RECOMPUTE_SELECTIVE, 0, SCHED_ZB_H1, 0, 0, 1},
                   SIM_TIMELINE_FULL);
}

/* recompute: 0 none, 1 selective, 2 full; interleave 0 and schedule -1: the defaults */
Test(sim_fold, gpt3_1024_megatron_layout)
{
    check(&(lay){GPT3, 1024, 8, 8, 16, 1536, RECOMPUTE_FULL, 0, -1, 0, 0, 1});
}

Test(sim_fold, gpt3_1024_interleaved_zero)
{
    check(&(lay){GPT3, 1024, 8, 8, 16, 1536, RECOMPUTE_FULL, 2, -1, 1, 1, 1});
}

Test(sim_fold, gpt3_1024_pp16)
{
    check(&(lay){GPT3, 1024, 8, 16, 8, 1536, RECOMPUTE_SELECTIVE, 0, -1, 1, 0, 1});
}

Test(sim_fold, gpt3_every_schedule)
{
    for (int k = 0; k < SCHED_NKINDS; k++)
        check(&(lay){GPT3, 512, 8, 8, 8, 512, RECOMPUTE_NONE, 0, k, k & 1, 0, 1});
}

Test(sim_fold, llama_layouts)
{
    check(&(lay){LLAMA, 256, 8, 4, 8, 256, RECOMPUTE_SELECTIVE, 0, -1, 0, 1, 1});
    check(&(lay){LLAMA, 256, 8, 2, 16, 512, RECOMPUTE_FULL, 5, -1, 1, 0, 1});
    check(&(lay){LLAMA, 128, 8, 8, 2, 64, RECOMPUTE_NONE, 0, SCHED_GPIPE, 0, 0, 1});
}

/* tp 4 and 2: ring hops inside a server and across it, so the replicas' devices
 * communicate for different times (each device's comm_s is its own) */
Test(sim_fold, mixed_ring)
{
    check(&(lay){GPT3, 1024, 4, 8, 32, 1536, RECOMPUTE_FULL, 0, -1, 0, 0, 1});
    check(&(lay){LLAMA, 128, 4, 4, 8, 128, RECOMPUTE_SELECTIVE, 2, -1, 1, 0, 1});
}

/* tp 1: the eight replicas of a server send through its port at once, beyond its lanes */
Test(sim_fold, shared_port_falls_back)
{
    check(&(lay){GPT3, 128, 1, 8, 16, 256, RECOMPUTE_FULL, 0, -1, 0, 0, 0});
}

/* A plan whose stages have different replica counts (PipeDream's hybrid plans) is not
 * folded: sim_run's report itself. */
Test(sim_fold, unequal_replicas_run_in_full)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load("examples/plans/vgg16-hybrid-pipedream.json", &e);
    cr_assert(pl, "%s", e.msg);
    int differ = 0;
    for (int st = 1; st < pl->nstages; st++)
        differ |= pl->stages[st].replicas != pl->stages[0].replicas;
    cr_assert(differ && pl->stages[0].replicas >= 2, "the example's stages should differ");
    sim_report *a = sim_run(pl, NULL, &e), *b = sim_run_folded(pl, NULL, 1, &e);
    cr_assert(a && b, "%s", e.msg);
    cr_expect(a->iteration_s == b->iteration_s && a->events == b->events &&
              a->ndevices == b->ndevices);
    sim_report_free(a);
    sim_report_free(b);
    plan_free(pl);
}

/* A runtime what-if reaches the folded run as sim_run's view of the plan (sim_options_view):
 * a --recompute full what-if on a zb-v plan without recomputation is priced, and ordered
 * (zb-v's order reads the plan's recompute, schedule_plan_costs), as sim_run does it. */
Test(sim_fold, runtime_whatif_reaches_the_cut_plan)
{
    lay L = {GPT3, 512, 8, 8, 8, 512, RECOMPUTE_NONE, 0, SCHED_ZB_V, 0, 0, 1};
    plan *pl = build_opg(&L, 0);
    plumb_err e;
    err_clear(&e);
    sim_options o;
    sim_options_init(&o);
    o.recompute = RECOMPUTE_FULL;
    sim_report *full = sim_run(pl, &o, &e), *one = sim_run_folded(pl, &o, 0, &e);
    cr_assert(full && one, "%s", e.msg);
    sim_report *plain = sim_run(pl, NULL, &e);
    cr_assert(plain, "%s", e.msg);
    cr_expect_gt(full->iteration_s, plain->iteration_s * 1.05, "full recompute should cost");
    cr_expect_leq(rel(full->iteration_s, one->iteration_s), 1e-9, "%.12g vs %.12g",
                  full->iteration_s, one->iteration_s);
    cr_expect_eq(full->peak_memory_bytes, one->peak_memory_bytes);
    sim_report_free(full);
    sim_report_free(one);
    sim_report_free(plain);
    plan_free(pl);
}
