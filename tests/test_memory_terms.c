/* test_memory_terms.c: the native planner's memory estimate and the simulator's memory
 * model (sim/memory.c) agree term by term (docs/planner-native.md, "One model"). For every
 * shipped profile (profiles/pipedream) on every shipped cluster (profiles/clusters; the
 * DGX files cut to their first 4 servers), every schedule kind the native planner makes
 * and recomputation off and on, the planner gathers its candidates as `plumb plan` does
 * (nm_gather) and the first two become plans that the simulator runs (sim_run on a
 * 4-iteration IR of the plan). Then:
 *  - per stage, the planner's terms (nm_stage_terms: weights of one version, gradients,
 *    optimizer state, bytes per buffer slot kept and of gradients, recomputation's
 *    transient, gradient buffers, scratch) equal the simulator's priced model's
 *    (sim_cost_build) exactly;
 *  - per device (each stage's first replica; chunked kinds: each rank), the planner's
 *    estimate (nm_part_memory) has the simulator's gradients, optimizer state and scratch
 *    exactly; its weights, activations, buffers, staging and total too, except where the
 *    closed form's count (weight versions, buffer slots, staged gradients) differs from
 *    the IR's: there the planner's terms with the IR's counts (schedule_inflight,
 *    schedule_slots, the simulator's staging) give the simulator's figure exactly, so the
 *    count is the whole difference, and the test tallies those devices per kind;
 *  - the estimate's peak (nm_price) is the largest of those devices.
 * A profile with tied parameters checks that the planner holds a tied tensor once, as
 * the simulator does. MEMORY_TERMS_VERBOSE=1 prints each device whose counts differ. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "planner/native_impl.h"
#include "sim/cost.h"
#include "sim/sim.h"
#include "tests/shipped.h"

#define ITERATIONS 3 /* as the planner's scoring simulation lays out the flushing kinds */

static int eq(double a, double b)
{
    return fabs(a - b) <= 1e-12 * (fabs(a) > fabs(b) ? fabs(a) : fabs(b)) + 1e-300;
}

typedef struct tally {
    int plans, stages, devices, exact;
    int versions, slots, staging; /* devices whose closed-form count differs */
    int straight;                 /* of those, in plans without a replicated stage */
    double worst;                 /* the largest |estimate - simulator| / simulator total */
} tally;

/* The report's device d, or NULL. */
static const sim_device_report *device_of(const sim_report *r, int d)
{
    for (int i = 0; i < r->ndevices; i++)
        if (r->devices[i].device == d) return &r->devices[i];
    return NULL;
}

#define CMP(what, a, b)                                                                    \
    cr_expect(eq(a, b), "%s: %s %.17g, simulator %.17g", where, what, (double)(a), (double)(b))

/* Compares the planner's memory of candidate pt (settled s on model m) with the
 * simulator's. */
static void check_part(const char *where, const nm_model *m, const nm_setting *s,
                       const nm_part *pt, tally *k)
{
    plumb_err e;
    plan *pl = nm_plan(m, s, pt, &e);
    cr_assert_not_null(pl, "%s: %s", where, e.msg);
    schedule *sch = schedule_from_plan(pl, ITERATIONS, &e);
    cr_assert_not_null(sch, "%s: %s", where, e.msg);
    sim_options o;
    sim_options_init(&o);
    o.sched = sch;
    sim_report *r = sim_run(pl, &o, &e);
    cr_assert_not_null(r, "%s: %s", where, e.msg);
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model sm;
    cr_assert_eq(sim_cost_build(&sm, pl, sch, &net, -1, 1, &e), 0, "%s", e.msg);
    int *vers = calloc((size_t)pt->nst + 1, sizeof *vers);
    cr_assert_eq(schedule_inflight(sch, NULL, vers, &e), 0, "%s", e.msg);
    k->plans++;
    /* per stage: every term */
    nm_terms *t = calloc((size_t)pt->nst, sizeof *t);
    for (int i = 0; i < pt->nst; i++) {
        nm_stage_terms(m, s, &pt->st[i], &t[i]);
        const sim_stage_mem *a = &t[i].mem;
        char w2[320];
        snprintf(w2, sizeof w2, "%.250s stage %d", where, i);
        const char *where_ = where;
        where = w2;
        CMP("weights", a->params, sm.param_bytes[i]);
        CMP("gradients", a->gradients, sm.gradmem_bytes[i]);
        CMP("optimizer", a->optimizer, sm.optmem_bytes[i]);
        CMP("stash per slot", a->stash, sm.stash_bytes[i]);
        CMP("gradients per slot", a->slotbuf, sm.slotbuf_bytes[i]);
        CMP("transient", a->transient, sm.transient_bytes[i]);
        CMP("gradient buffers", a->gradbuf, sm.gradbuf_bytes[i]);
        CMP("workspace", a->workspace, sm.workspace_bytes[i]);
        where = where_;
        k->stages++;
    }
    /* per device: the planner's estimate against the simulator's report */
    sim_memory est[NM_MAX_STAGES];
    int nd = nm_part_memory(m, s, pt, est);
    cr_assert_gt(nd, 0);
    double peak = 0;
    for (int q = 0; q < nd; q++) {
        if (est[q].total > peak) peak = est[q].total;
        const int dev = pl->stages[q].devices[0];
        const sim_device_report *dr = device_of(r, dev);
        cr_assert_not_null(dr, "%s: device %d not in the report", where, dev);
        const sim_memory *sim = &dr->mem;
        char w2[320];
        snprintf(w2, sizeof w2, "%.250s device %d", where, dev);
        const char *where_ = where;
        where = w2;
        CMP("gradients", est[q].gradients, sim->gradients);
        CMP("optimizer", est[q].optimizer, sim->optimizer);
        CMP("workspace", est[q].workspace, sim->workspace);
        /* the planner's terms with the IR's counts give the simulator's figure */
        sim_memory_acc acc;
        memset(&acc, 0, sizeof acc);
        for (int st = 0; st < pt->nst; st++)
            for (int j = 0; j < pl->stages[st].replicas; j++)
                if (pl->stages[st].devices[j] == dev) {
                    sim_memory_add(&acc, &t[st].mem, vers[st], schedule_slots(sch, dr->worker, st),
                                   sim_allreduce_scratch(t[st].mem.gradients,
                                                         pl->stages[st].replicas, j), 0);
                }
        sim_memory irc;
        sim_memory_close(&acc, sm.staging_bytes[dr->worker], sim->capacity, &irc);
        CMP("weights (IR's versions)", irc.weights, sim->weights);
        CMP("activations (IR's slots)", irc.activations, sim->activations);
        CMP("buffers (IR's slots)", irc.buffers, sim->buffers);
        CMP("staging (IR's)", irc.staging, sim->staging);
        CMP("total (IR's counts)", irc.total, sim->total);
        where = where_;
        /* the closed form's counts against the IR's */
        int v = !eq(est[q].weights, sim->weights), sl = !eq(est[q].activations,
                                                            sim->activations) ||
                                                         !eq(est[q].buffers, sim->buffers);
        int sg = !eq(est[q].staging, sim->staging);
        if ((v || sl || sg) && getenv("MEMORY_TERMS_VERBOSE"))
            fprintf(stderr, "%s device %d: estimate weights %.4g act %.4g buf %.4g staging "
                    "%.4g total %.4g; simulator %.4g %.4g %.4g %.4g %.4g\n", where, dev,
                    est[q].weights, est[q].activations, est[q].buffers, est[q].staging,
                    est[q].total, sim->weights, sim->activations, sim->buffers, sim->staging,
                    sim->total);
        if (v && getenv("MEMORY_TERMS_VERBOSE"))
            fprintf(stderr, "  versions: stage %d of %d, IR %d, replicas %d\n", q, pt->nst,
                    vers[q], pl->stages[q].replicas);
        int replicated = 0;
        for (int st = 0; st < pt->nst; st++) replicated |= pl->stages[st].replicas > 1;
        k->straight += (v || sl || sg) && !replicated;
        k->versions += v;
        k->slots += sl;
        k->staging += sg;
        if (!v && !sl && !sg) {
            cr_expect(eq(est[q].total, sim->total), "%s device %d: total %.17g, simulator "
                      "%.17g with the same counts", where, dev, est[q].total, sim->total);
            k->exact++;
        }
        double rel = fabs(est[q].total - sim->total) / sim->total;
        if (rel > k->worst) k->worst = rel;
        k->devices++;
    }
    cr_expect(eq(peak, pt->peak_mem), "%s: estimated peak %.17g, its devices' largest %.17g",
              where, pt->peak_mem, peak);
    free(t);
    free(vers);
    sim_model_release(&sm);
    sim_report_free(r);
    schedule_free(sch);
    plan_free(pl);
}

static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM, SCHED_2BW,
                                   SCHED_INTERLEAVED, SCHED_ZB_H1, SCHED_ZB_V, SCHED_DUALPIPEV};
#define NKINDS (int)(sizeof kinds / sizeof kinds[0])

/* One profile on one cluster: every kind, recomputation off and on, the optimizers in
 * turn; the first two candidates of each. */
static void check_pair(const char *pname, const char *cname, const profile *p,
                       const cluster *c, void *arg)
{
    tally *k = arg;
    static const optimizer_kind opts[] = {OPT_SGD, OPT_MOMENTUM, OPT_ADAM};
    static int turn;
    plumb_err e;
    nm_models ms;
    cr_assert_eq(nm_models_build(&ms, p, c, c->ndevices, 0, &e), 0, "%s", e.msg);
    for (int x = 0; x < NKINDS; x++)
        for (int rc = 0; rc < 2; rc++) {
            nm_setting s = {kinds[x], 0, p->minibatch, rc,
                            sched_kind_chunked(kinds[x]) ? 2 : 1, opts[turn++ % 3], 1, 0};
            nm_cands cs = {0};
            int runs = 0;
            cr_assert_geq(nm_gather(&ms, &s, 0, &cs, &runs), 0);
            for (int i = 0; i < cs.n && i < 2; i++) {
                char where[256];
                snprintf(where, sizeof where, "%.100s on %.100s, %s%s, candidate %d", pname,
                         cname, sched_kind_name(kinds[x]), rc ? " recompute" : "", i);
                check_part(where, &ms.m[cs.v[i].mod], &cs.v[i].s, &cs.v[i].pt, &k[x]);
            }
            nm_cands_free(&cs);
        }
    nm_models_free(&ms);
}

Test(memory_terms, shipped_profiles_clusters_and_schedules, .timeout = 1200)
{
    static tally k[NKINDS];
    memset(k, 0, sizeof k);
    shipped_each(check_pair, k);
    const int np = shipped_profiles();
    for (int x = 0; x < NKINDS; x++) {
        fprintf(stderr, "memory_terms: %-11s %4d plans, %5d stages, %5d devices: %5d exact; "
                "counts differ: versions %d, slots %d, staging %d (%d without replicas); worst total "
                "%.1f %%\n", sched_kind_name(kinds[x]), k[x].plans, k[x].stages, k[x].devices,
                k[x].exact, k[x].versions, k[x].slots, k[x].staging, k[x].straight,
                100 * k[x].worst);
        cr_expect_gt(k[x].plans, np, "%s: too few plans compared", sched_kind_name(kinds[x]));
        cr_expect_gt(k[x].exact, 0, "%s: no device exact", sched_kind_name(kinds[x]));
        /* the closed form counts a straight pipeline's slots, versions and staging as its
         * IR does; replicated stages take more (docs/planner-native.md, "One model"), and
         * zb-h1's every stage the pipeline's largest warmup */
        if (kinds[x] != SCHED_ZB_H1)
            cr_expect_eq(k[x].straight, 0, "%s: %d devices of straight pipelines differ",
                         sched_kind_name(kinds[x]), k[x].straight);
    }
}

/* A chain whose last layer's weights are the first's (a language model's head tied to
 * its embedding): on one device the tensor is held, reduced and counted once, by the
 * planner's estimate as by the simulator; split over two stages, twice. */
Test(memory_terms, tied_parameters_counted_once)
{
    const int n = 6;
    profile *p = profile_alloc(n, 0);
    cr_assert_not_null(p);
    p->name = strdup("tied");
    p->device = strdup("V100");
    p->source = strdup("");
    p->minibatch = 8;
    p->input_bytes = 1 << 20;
    for (int i = 0; i < n; i++) {
        profile_layer *L = &p->layers[i];
        char nm[16];
        snprintf(nm, sizeof nm, "l%d", i);
        L->name = strdup(nm);
        L->kind = strdup(i == 0 ? "embedding" : "linear");
        L->desc = strdup("");
        L->forward_ms = 1 + i;
        L->backward_ms = 2 + i;
        L->activation_bytes = (4 + i) << 20;
        L->parameter_bytes = (i == 0 || i == n - 1 ? 64.0 : 8.0) * (1 << 20);
    }
    p->layers[n - 1].tied_layer = 0;
    p->layers[n - 1].tied_bytes = 48.0 * (1 << 20);
    plumb_err e;
    cluster *c = cluster_load_cut(CLUSTER_DIR "/cluster-a-4x4.json", 64, 4, &e);
    cr_assert_not_null(c, "%s", e.msg);
    nm_model m;
    cr_assert_eq(nm_model_build(&m, p, c, 2, NULL, 0, &e), 0, "%s", e.msg);
    double total = 0;
    for (int i = 0; i < n; i++) total += p->layers[i].parameter_bytes;
    nm_setting s = {SCHED_1F1B_FLUSH, 4, p->minibatch, 0, 1, OPT_ADAM, 1, 0};
    /* one stage on one device; then two stages, the tied layers apart */
    nm_part one = {.nst = 1, .st = {{0, m.nb, 0, 1}}, .ranks = 1};
    nm_part two = {.nst = 2, .st = {{0, m.nb / 2, 0, 1}, {m.nb / 2, m.nb, 1, 1}}, .ranks = 2};
    nm_price(&m, &s, &one);
    nm_price(&m, &s, &two);
    nm_terms t;
    nm_stage_terms(&m, &s, &one.st[0], &t);
    cr_expect(eq(t.mem.params, total - p->layers[n - 1].tied_bytes), "one stage: %.17g",
              t.mem.params);
    nm_stage_terms(&m, &s, &two.st[1], &t);
    cr_expect(eq(t.mem.params, total / 2), "second stage: %.17g", t.mem.params);
    tally k = {0};
    check_part("tied, one stage", &m, &s, &one, &k);
    check_part("tied, two stages", &m, &s, &two, &k);
    cr_expect_eq(k.exact, 3, "%d of 3 devices exact", k.exact);
    /* the planner's first check asks for the least any plan holds: the tied tensor once
     * (adam: weights, gradients and 2 states, 4 x 112 MiB = 448 MiB; counted twice 640
     * MiB, more than the 600 MiB limit) */
    native_options o;
    native_options_init(&o);
    o.optimizer = OPT_ADAM;
    o.max_devices = 1;
    o.memory_limit_bytes = 600.0 * (1 << 20);
    cr_expect_eq(planner_native_check(p, c, &o, &e), 0, "%s", e.msg);
    o.memory_limit_bytes = 440.0 * (1 << 20);
    cr_expect_neq(planner_native_check(p, c, &o, &e), 0);
    nm_model_free(&m);
    cluster_free(c);
    profile_free(p);
}
