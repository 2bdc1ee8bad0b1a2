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
 *  - per device (each stage's fullest replica; chunked kinds: each rank), the planner's
 *    estimate (nm_part_memory) has the simulator's weights, activations, buffers, staging,
 *    gradients, optimizer state, scratch and total exactly: its counts (weight versions,
 *    buffer slots, staged gradients) are the IR's, replicated stages (PipeDream's hybrid
 *    plans), zb-h1 and straight pipelines included (the planner reads them from the
 *    plan's schedule, counts_need_ir); the planner's terms with the IR's counts
 *    (schedule_inflight, schedule_slots, the simulator's staging) give the simulator's
 *    figure too, and the test tallies per kind the devices whose counts differ (none);
 *  - the exact estimate's peak (nm_price_exact) is the largest of those devices; the
 *    test tallies the plans whose peak with the closed form's counts (nm_price, what the
 *    dynamic program ranks with) is below or above it.
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
    int versions, slots, staging; /* devices whose count differs from the IR's */
    int straight;                 /* of those, in plans without a replicated stage */
    int replicated;               /* devices of stages with more than one replica */
    int lower, above;             /* plans whose closed-form peak is below / above */
    double worst;                 /* the largest |estimate - simulator| / simulator total */
} tally;

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
        /* the stage's fullest replica (the first of the largest total), as the estimate
         * counts it */
        const sim_device_report *dr = NULL;
        for (int j = 0; j < pl->stages[q].replicas; j++) {
            const sim_device_report *x = sim_report_device(r, pl->stages[q].devices[j]);
            cr_assert_not_null(x, "%s: device %d not in the report", where,
                               pl->stages[q].devices[j]);
            if (!dr || x->mem.total > dr->mem.total) dr = x;
        }
        const int dev = dr->device;
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
        k->replicated += pl->stages[q].replicas > 1;
        k->versions += v;
        k->slots += sl;
        k->staging += sg;
        cr_expect(!v && !sl && !sg, "%s device %d (stage %d of %d, %d replicas): counts "
                  "differ from the IR's: weights %.17g / %.17g, activations %.17g / %.17g, "
                  "buffers %.17g / %.17g, staging %.17g / %.17g", where, dev, q, pt->nst,
                  pl->stages[q].replicas, est[q].weights, sim->weights, est[q].activations,
                  sim->activations, est[q].buffers, sim->buffers, est[q].staging, sim->staging);
        cr_expect(eq(est[q].total, sim->total), "%s device %d: total %.17g, simulator %.17g",
                  where, dev, est[q].total, sim->total);
        if (!v && !sl && !sg && eq(est[q].total, sim->total)) k->exact++;
        double rel = fabs(est[q].total - sim->total) / sim->total;
        if (rel > k->worst) k->worst = rel;
        k->devices++;
    }
    /* the exact estimate's peak is its devices' largest; the program's (nm_price, the
     * closed form's counts) is tallied against it */
    nm_part ex = *pt, lo = *pt;
    nm_price_exact(m, s, &ex);
    nm_price(m, s, &lo);
    cr_expect(eq(peak, ex.peak_mem), "%s: estimated peak %.17g, its devices' largest %.17g",
              where, ex.peak_mem, peak);
    k->above += lo.peak_mem > peak * (1 + 1e-12);
    k->lower += lo.peak_mem < peak * (1 - 1e-12);
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
            nm_setting s = {.kind = kinds[x], .M = 0, .mbsize = p->minibatch,
                            .recompute = rc, .chunks = sched_kind_chunked(kinds[x]) ? 2 : 1,
                            .opt = opts[turn++ % 3], .quick = 1};
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

/* (Every timed test of this file has the same timeout: Criterion 2.4's runner, run with
 * --jobs 2 under LeakSanitizer, can leak 48 bytes when a file mixes timeouts.) */
Test(memory_terms, shipped_profiles_clusters_and_schedules, .timeout = 1200)
{
    static tally k[NKINDS];
    memset(k, 0, sizeof k);
    shipped_each(check_pair, k);
    const int np = shipped_profiles();
    for (int x = 0; x < NKINDS; x++) {
        fprintf(stderr, "memory_terms: %-11s %4d plans, %5d stages, %5d devices (%4d of "
                "replicated stages): %5d exact; counts differ: versions %d, slots %d, staging "
                "%d (%d without replicas); worst total %.1f %%; closed-form peak below %d, above %d\n",
                sched_kind_name(kinds[x]), k[x].plans, k[x].stages, k[x].devices,
                k[x].replicated, k[x].exact, k[x].versions, k[x].slots, k[x].staging,
                k[x].straight, 100 * k[x].worst, k[x].lower, k[x].above);
        cr_expect_gt(k[x].plans, np, "%s: too few plans compared", sched_kind_name(kinds[x]));
        cr_expect_eq(k[x].exact, k[x].devices, "%s: %d of %d devices exact",
                     sched_kind_name(kinds[x]), k[x].exact, k[x].devices);
    }
}

static int gcd_int(int a, int b) { return b ? gcd_int(b, a % b) : a; }

/* A random hybrid partition of m into pt: 2 to 5 stages at random block boundaries, each
 * on a random run of units, at least one stage replicated; 0, or -1 when m is too small. */
static int random_part(const nm_model *m, unsigned *seed, nm_part *pt)
{
    int maxst = m->nb < m->U ? m->nb : m->U;
    if (maxst > 5) maxst = 5;
    if (maxst < 2 || m->U < 3) return -1;
    memset(pt, 0, sizeof *pt);
    pt->nst = 2 + (int)(rand_r(seed) % (unsigned)(maxst - 1));
    int cut[NM_MAX_STAGES + 1], r[NM_MAX_STAGES], left = m->U - pt->nst;
    /* distinct sorted boundaries in 1..nb-1 */
    cut[0] = 0, cut[pt->nst] = m->nb;
    for (int i = 1; i < pt->nst; i++) {
        int lo = cut[i - 1] + 1, hi = m->nb - (pt->nst - i);
        cut[i] = lo + (int)(rand_r(seed) % (unsigned)(hi - lo + 1));
    }
    for (int i = 0; i < pt->nst; i++) r[i] = 1;
    /* the spare units to random stages (at least one) */
    int extra = 1 + (int)(rand_r(seed) % (unsigned)left);
    for (int x = 0; x < extra; x++) r[rand_r(seed) % (unsigned)pt->nst]++;
    for (int i = 0, u = 0; i < pt->nst; i++) {
        pt->st[i] = (nm_stage){cut[i], cut[i + 1], u, r[i]};
        u += r[i];
    }
    pt->ranks = pt->nst;
    return 0;
}

/* Random hybrid plans (replicated stages anywhere: before, after and between straight
 * ones) of three shipped profiles on a 16-GPU cluster under every one-stage-per-rank kind:
 * the estimate's memory of each stage's fullest device equals the simulator's, counts
 * included (the planner reads them from the plan's IR; its closed form, which sees only
 * the devices from a stage on, undercounts a stage after a more replicated one). */
Test(memory_terms, random_replicated_plans_exact, .timeout = 1200)
{
    static const char *profs[] = {"vgg16", "resnet50", "gnmt"};
    static const sched_kind k1[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM, SCHED_2BW,
                                    SCHED_ZB_H1};
    plumb_err e;
    cluster *c = cluster_load_cut(CLUSTER_DIR "/cluster-a-4x4.json", 64, 4, &e);
    cr_assert_not_null(c, "%s", e.msg);
    unsigned seed = 23;
    tally k = {0};
    for (int f = 0; f < 3; f++) {
        profile *p = shipped_profile(profs[f]);
        nm_model m;
        cr_assert_eq(nm_model_build(&m, p, c, c->ndevices, NULL, 0, &e), 0, "%s", e.msg);
        for (int t = 0; t < 8; t++) {
            nm_part pt;
            cr_assert_eq(random_part(&m, &seed, &pt), 0, "%s: too small", profs[f]);
            int lcm = 1, total = 0;
            for (int i = 0; i < pt.nst; i++) {
                int n = pt.st[i].r * m.g;
                lcm = lcm / gcd_int(lcm, n) * n;
                total += n;
            }
            for (int x = 0; x < (int)(sizeof k1 / sizeof k1[0]); x++) {
                nm_setting s = {.kind = k1[x], .M = lcm * ((2 * total + lcm - 1) / lcm),
                                .mbsize = p->minibatch, .recompute = (t + x) % 2,
                                .chunks = 1, .opt = OPT_ADAM, .quick = 1};
                nm_part q = pt;
                nm_price(&m, &s, &q);
                char where[256];
                snprintf(where, sizeof where, "%s random plan %d (%d stages), %s%s", profs[f], t,
                         pt.nst, sched_kind_name(k1[x]), s.recompute ? " recompute" : "");
                check_part(where, &m, &s, &q, &k);
            }
        }
        nm_model_free(&m);
        profile_free(p);
    }
    fprintf(stderr, "memory_terms: random hybrid plans: %d plans, %d devices (%d of replicated "
            "stages): %d exact; counts differ: versions %d, slots %d, staging %d; worst total "
            "%.1f %%; closed-form peak below %d, above %d\n", k.plans, k.devices, k.replicated,
            k.exact, k.versions, k.slots, k.staging, 100 * k.worst, k.lower, k.above);
    cr_expect_eq(k.plans, 3 * 8 * 5);
    cr_expect_gt(k.replicated, 0);
    cr_expect_eq(k.exact, k.devices, "%d of %d devices exact", k.exact, k.devices);
    cluster_free(c);
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
    nm_setting s = {.kind = SCHED_1F1B_FLUSH, .M = 4, .mbsize = p->minibatch, .recompute = 0,
                    .chunks = 1, .opt = OPT_ADAM, .quick = 1};
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
