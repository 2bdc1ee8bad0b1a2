/* test_sweep.c: capacity planning (planner/sweep.h; its cluster resize is tested in
 * test_planner_policy.c): the sweep's figures (efficiency = thr(n) / (n thr(1)), cost per
 * million samples = price n / 3600 / thr 1e6, the fewest GPUs for a target), and its JSON
 * and SVG forms. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "planner/native_impl.h"
#include "planner/policy.h"
#include "planner/sweep.h"

static cluster *load_cluster(const char *path)
{
    plumb_err e;
    cluster *c = cluster_load(path, &e);
    cr_assert(c, "%s", e.msg);
    return c;
}

Test(figures, efficiency_cost_and_target)
{
    plumb_err e;
    profile *p = profile_load("profiles/pipedream/resnet18.json", &e);
    cr_assert(p, "%s", e.msg);
    cluster *c = load_cluster("profiles/clusters/cluster-a-4x4.json");
    native_options o;
    native_options_init(&o);
    o.microbatch_size = 64;
    sweep_result r;
    const double price = 2.5;
    cr_assert_eq(planner_sweep(p, c, 1, 6, &o, 0, price, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.n, 6);
    double work = profile_compute_ms(p) / 1e3;
    cr_assert_float_eq(r.thr1, p->minibatch / work, 1e-9 * r.thr1);
    for (int i = 0; i < r.n; i++) {
        const sweep_point *x = &r.pts[i];
        cr_assert_eq(x->gpus, i + 1);
        cr_assert(x->ok, "%d GPUs: %s", x->gpus, x->why);
        cr_assert_gt(x->samples_per_s, 0);
        cr_assert_float_eq(x->efficiency, x->samples_per_s / (x->gpus * r.thr1), 1e-12);
        cr_assert_float_eq(x->usd_per_million, price * x->gpus / 3600.0 / x->samples_per_s * 1e6,
                           1e-9 * x->usd_per_million);
        cr_assert_leq(x->efficiency, 1.0 + 1e-9, "%d GPUs beat linear scaling", x->gpus);
        cr_assert(x->gpus_used >= 1 && x->gpus_used <= x->gpus);
        if (i > 0) cr_assert_geq(x->samples_per_s, r.pts[i - 1].samples_per_s);
    }
    cr_assert_eq(r.target_gpus, -1);
    /* a target between the 3- and the best higher count: the fewest GPUs that reach it */
    double target = r.pts[2].samples_per_s * 1.0001;
    int expect = -1;
    for (int i = 0; i < r.n && expect < 0; i++)
        if (r.pts[i].samples_per_s >= target) expect = r.pts[i].gpus;
    sweep_result_free(&r);
    cr_assert_eq(planner_sweep(p, c, 1, 6, &o, target, 0, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.target_gpus, expect);
    for (int i = 0; i < r.n; i++) cr_assert_lt(r.pts[i].usd_per_million, 0); /* no price */

    /* the JSON document */
    cJSON *j = sweep_to_json(&r);
    cr_assert(j);
    cr_assert_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "plumb-sweep/1");
    cJSON *pts = cJSON_GetObjectItem(j, "points");
    cr_assert_eq(cJSON_GetArraySize(pts), 6);
    cr_assert_float_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(pts, 1), "samples_per_s")->valuedouble,
                       r.pts[1].samples_per_s, 1e-9);
    if (expect > 0) cr_assert_eq(cJSON_GetObjectItem(j, "target_gpus")->valueint, expect);
    cJSON_Delete(j);

    /* the SVG plot */
    size_t len = 0;
    char *svg = sweep_svg(&r, &len);
    cr_assert(svg);
    cr_assert_eq(strlen(svg), len);
    cr_assert(strstr(svg, "<svg") && strstr(svg, "</svg>"));
    cr_assert(strstr(svg, "<polyline"));
    cr_assert(strstr(svg, "throughput (samples/s)"));
    cr_assert(strstr(svg, "GPUs"));
    cr_assert(strstr(svg, "target"));
    free(svg);
    sweep_result_free(&r);
    profile_free(p);
    cluster_free(c);
}

Test(figures, points_that_do_not_fit_say_why)
{
    plumb_err e;
    profile *p = profile_load("profiles/pipedream/vgg16.json", &e);
    cr_assert(p, "%s", e.msg);
    cluster *c = load_cluster("profiles/clusters/cluster-c-4x1.json");
    native_options o;
    native_options_init(&o);
    o.memory_limit_bytes = 3.0 * 1024 * 1024 * 1024; /* vgg16's weights + state need 1.5 GiB */
    o.microbatch_size = p->minibatch; /* not the smaller ones the planner would try */
    sweep_result r;
    cr_assert_eq(planner_sweep(p, c, 1, 2, &o, 0, 1, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.pts[0].ok, 0);
    cr_assert(strstr(r.pts[0].why, "nothing fits"), "%s", r.pts[0].why);
    char *svg = sweep_svg(&r, NULL);
    cr_assert(svg);
    free(svg);
    sweep_result_free(&r);

    /* bad input: a model larger than all the memory of the largest count */
    o.memory_limit_bytes = 0.1 * 1024 * 1024 * 1024;
    cr_assert_neq(planner_sweep(p, c, 1, 2, &o, 0, 1, &r, &e), 0);
    cr_assert(strstr(e.msg, "does not fit"), "%s", e.msg);
    cr_assert_neq(planner_sweep(p, c, 3, 2, &o, 0, 1, &r, &e), 0);
    cr_assert(strstr(e.msg, "--gpus"), "%s", e.msg);
    profile_free(p);
    cluster_free(c);
}

/* a point whose best plan leaves GPUs idle says so: vgg16's plan on 16 devices of
 * cluster-a-4x4 is 14-1 (15 used); the auto sweep is never below the default one */
Test(figures, gpus_used_counts_the_plan)
{
    plumb_err e;
    profile *p = profile_load("profiles/pipedream/vgg16.json", &e);
    cr_assert(p, "%s", e.msg);
    cluster *c = load_cluster("profiles/clusters/cluster-a-4x4.json");
    sweep_result r;
    cr_assert_eq(planner_sweep(p, c, 16, 16, NULL, 0, 0, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.n, 1);
    cr_assert(r.pts[0].ok);
    plan *pl = planner_native(p, c, NULL, NULL, &e);
    cr_assert(pl, "%s", e.msg);
    int used = 0;
    for (int s = 0; s < pl->nstages; s++) used += pl->stages[s].replicas;
    cr_assert_lt(used, 16, "the test expects a plan with idle devices");
    cr_assert_eq(r.pts[0].gpus_used, used);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sweep_print(&r, f);
    fclose(f);
    char want[48];
    snprintf(want, sizeof want, "(uses %d of 16 GPUs)", used);
    cr_assert(strstr(buf, want), "%s", buf);
    free(buf);
    /* --schedule auto ranks the default plan among its own: never below it */
    native_options o;
    native_options_init(&o);
    o.schedule = NATIVE_SCHED_AUTO;
    sweep_result ra;
    cr_assert_eq(planner_sweep(p, c, 16, 16, &o, 0, 0, &ra, &e), 0, "%s", e.msg);
    cr_assert_geq(ra.pts[0].samples_per_s, r.pts[0].samples_per_s * (1 - 1e-9),
                  "auto %.1f < default %.1f samples/s", ra.pts[0].samples_per_s,
                  r.pts[0].samples_per_s);
    sweep_result_free(&ra);
    plan_free(pl);
    sweep_result_free(&r);
    profile_free(p);
    cluster_free(c);
}

/* What a plan's compute alone allows, written here from the profile: each sample runs every
 * layer's forward and backward (the forward twice with recomputation) on one of the plan's
 * devices, none faster than the fastest device: devices x speed x minibatch / work. */
static double compute_cap(const profile *p, const cluster *c, const native_candidate *x)
{
    double f = 0, b = 0, sp = 0;
    for (int i = 0; i < p->nlayers; i++) {
        if (p->layers[i].kind && !strcmp(p->layers[i].kind, "Input")) continue; /* data */
        f += p->layers[i].forward_ms;
        b += p->layers[i].backward_ms;
    }
    for (int d = 0; d < c->ndevices; d++) {
        const device_type *t = cluster_device_type(c, d);
        if (t && t->speed > sp) sp = t->speed;
    }
    sp = sp > 0 ? sp : 1;
    double cap = x->ndevices_used * sp * p->minibatch / ((f + b + (x->recompute ? f : 0)) * 1e-3);
    const plan *pl = x->pl;
    if (!pl || (x->schedule != SCHED_GPIPE && x->schedule != SCHED_1F1B_FLUSH)) return cap;
    /* a flushing pipeline: the first stage starts an iteration only when the previous one
     * has gone back through it; stage s's busiest replica runs ceil(M / replicas) F + B
     * after the stages before it have run one microbatch's F and before they run its B */
    double before = 0, period = 0;
    for (int s = 0; s < pl->nstages; s++) {
        double t = 0;
        for (int l = pl->stages[s].first_layer; l <= pl->stages[s].last_layer; l++) {
            const profile_layer *L = &p->layers[l];
            if (L->kind && !strcmp(L->kind, "Input")) continue;
            t += L->forward_ms * (x->recompute ? 2 : 1) + L->backward_ms;
        }
        t *= (double)x->microbatch_size / p->minibatch * 1e-3 / sp;
        int r = pl->stages[s].replicas, k = (x->microbatches + r - 1) / r;
        if (before + k * t > period) period = before + k * t;
        before += t;
    }
    double pipe = x->microbatches * x->microbatch_size / period;
    return pipe < cap ? pipe : cap;
}

/* The best plan of a fitting simulated candidate: its samples/s, or 0. */
static double best_simulated(const native_result *r)
{
    double best = 0;
    for (int i = 0; i < r->ncand; i++)
        if (r->cand[i].simulated && r->cand[i].fits && r->cand[i].sim_samples_per_s > best)
            best = r->cand[i].sim_samples_per_s;
    return best;
}

/* best_only (what the sweep plans with) leaves out the candidates whose compute caps them
 * below the best simulated plan: the best plan is never worse, and every simulated
 * candidate of every schedule kind (auto) stays within its compute cap, the premise of
 * leaving them out; the sweep simulates fewer plans, solves fewer programs and, once a
 * simulated plan fits, re-prices no other with its schedule's memory counts */
Test(best_only, no_worse_with_fewer_simulations)
{
    static const struct { const char *prof, *clus; int gpus, sched; } cases[] = {
        {"profiles/pipedream/resnet50.json", "profiles/clusters/h200-4x8.json", 64, -2},
        {"profiles/pipedream/resnet50.json", "profiles/clusters/h200-4x8.json", 200, -2},
        {"profiles/pipedream/vgg16.json", "profiles/clusters/cluster-a-4x4.json", 16,
         NATIVE_SCHED_AUTO},
        {"profiles/pipedream/gnmt.json", "profiles/clusters/hetero-2xh200-2xv100.json", 32,
         NATIVE_SCHED_AUTO},
    };
    int sims[2] = {0, 0}, dps[2] = {0, 0}, exact[2] = {0, 0};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        plumb_err e;
        profile *p = profile_load(cases[k].prof, &e);
        cr_assert(p, "%s", e.msg);
        cluster *c0 = load_cluster(cases[k].clus);
        int use;
        cluster *c = planner_cluster_resize(c0, cases[k].gpus, &use, &e);
        cr_assert(c, "%s", e.msg);
        double best[2];
        for (int bo = 0; bo < 2; bo++) {
            native_options o;
            native_options_init(&o);
            if (cases[k].sched != -2) o.schedule = cases[k].sched;
            o.max_devices = use;
            o.best_only = bo;
            native_result r;
            plan *pl = planner_native(p, c, &o, &r, &e);
            cr_assert(pl, "%s on %d: %s", cases[k].prof, cases[k].gpus, e.msg);
            for (int i = 0; i < r.ncand; i++)
                if (r.cand[i].simulated)
                    cr_assert_leq(r.cand[i].sim_samples_per_s,
                                  compute_cap(p, c, &r.cand[i]) * (1 + 1e-12),
                                  "%s on %d, %s: above its compute cap", cases[k].prof,
                                  cases[k].gpus, r.cand[i].config);
            best[bo] = best_simulated(&r);
            cr_assert_float_eq(pl->pred_samples_per_s, best[bo], 1e-9 * best[bo]);
            sims[bo] += r.nsimulated;
            dps[bo] += r.dp_runs;
            exact[bo] += r.nexact;
            plan_free(pl);
            native_result_free(&r);
        }
        cr_assert_geq(best[1], best[0] * (1 - 1e-12), "%s on %d GPUs: best_only %.1f < %.1f",
                      cases[k].prof, cases[k].gpus, best[1], best[0]);
        cluster_free(c);
        cluster_free(c0);
        profile_free(p);
    }
    cr_assert_lt(sims[1], sims[0], "best_only simulated %d plans, without %d", sims[1],
                 sims[0]);
    /* and it leaves recomputation out where data parallelism beats all devices recomputing */
    cr_assert_lt(dps[1], dps[0], "best_only solved %d programs, without %d", dps[1], dps[0]);
    cr_assert_gt(exact[0], 0, "no candidate re-priced exactly without best_only");
    cr_assert_eq(exact[1], 0, "best_only re-priced %d candidates exactly (without: %d)",
                 exact[1], exact[0]);
}

/* The sweep's simulation memo: a plan's figures are found again for the same plan on the
 * same devices of the cluster resized to another count, and not for another microbatch
 * count, another device type or another layout of the servers; a sweep reusing them
 * reports what planning each count alone (best_only, no memo) gives, bit for bit */
Test(sim_memo, same_plan_same_devices_only)
{
    plumb_err e;
    profile *p = profile_load("profiles/pipedream/resnet50.json", &e);
    cr_assert(p, "%s", e.msg);
    cluster *c0 = load_cluster("profiles/clusters/h200-4x8.json");
    cluster *hx = load_cluster("profiles/clusters/hetero-2xh200-2xv100.json");
    native_options o;
    native_options_init(&o);
    int use;
    cluster *a = planner_cluster_resize(c0, 100, &use, &e), *b = planner_cluster_resize(c0, 103, &use, &e);
    cluster *h = planner_cluster_resize(hx, 32, &use, &e);
    cr_assert(a && b && h, "%s", e.msg);
    plan *pa = native_dp_plan(p, a, 24, &e), *pb = native_dp_plan(p, b, 24, &e);
    plan *ph = native_dp_plan(p, h, 24, &e);
    cr_assert(pa && pb && ph, "%s", e.msg);
    /* devices 16..23 of the heterogeneous cluster are V100s: the same ids, other types */
    pa->microbatches = pb->microbatches = ph->microbatches = 48;
    nm_sim_memo *mo = nm_sim_memo_new();
    cr_assert(mo);
    cr_assert_null(nm_sim_memo_get(mo, pa, &o));
    int dev[1] = {3};
    double mem[1] = {1.5};
    nm_sim_fig f = {123.0, 0.5, 0.1, 7.0, 1, 1, dev, mem};
    nm_sim_memo_put(mo, &f);
    const nm_sim_fig *g = nm_sim_memo_get(mo, pb, &o);
    cr_assert(g, "the same plan on the same devices of 103 GPUs is not found");
    cr_assert(g->thr == 123.0 && g->ndev == 1 && g->dev[0] == 3 && g->dev_mem[0] == 1.5);
    cr_assert_null(nm_sim_memo_get(mo, ph, &o), "another device type is found");
    pb->microbatches = 96;
    cr_assert_null(nm_sim_memo_get(mo, pb, &o), "another microbatch count is found");
    /* servers of 4 instead of 8: the same 12 devices, other links between them */
    cluster *c4 = cluster_clone(c0);
    cr_assert(c4);
    c4->levels[0].count = 4;
    cluster *small = planner_cluster_resize(c4, 12, &use, &e);
    cluster *a12 = planner_cluster_resize(c0, 12, &use, &e);
    cr_assert(small && a12, "%s", e.msg);
    plan *ps = native_dp_plan(p, small, 12, &e), *p6 = native_dp_plan(p, a12, 12, &e);
    cr_assert(ps && p6, "%s", e.msg);
    ps->microbatches = p6->microbatches = 24;
    cr_assert_null(nm_sim_memo_get(mo, p6, &o));
    nm_sim_memo_put(mo, &f);
    cr_assert(nm_sim_memo_get(mo, p6, &o));
    cr_assert_null(nm_sim_memo_get(mo, ps, &o), "servers of 4 found as servers of 8");
    nm_sim_memo_free(mo);
    plan_free(ps);
    plan_free(p6);
    cluster_free(small);
    cluster_free(a12);
    cluster_free(c4);
    plan_free(pa);
    plan_free(pb);
    plan_free(ph);
    cluster_free(a);
    cluster_free(b);
    cluster_free(h);

    /* the sweep against each count planned alone */
    sweep_result r;
    cr_assert_eq(planner_sweep(p, c0, 96, 104, NULL, 0, 0, &r, &e), 0, "%s", e.msg);
    double best = 0;
    for (int i = 0; i < r.n; i++) {
        cluster *cl = planner_cluster_resize(c0, r.pts[i].gpus, &use, &e);
        cr_assert(cl, "%s", e.msg);
        native_options oc;
        native_options_init(&oc);
        oc.max_devices = use;
        oc.best_only = 1;
        plan *pl = planner_native(p, cl, &oc, NULL, &e);
        cr_assert(pl, "%s", e.msg);
        if (pl->pred_samples_per_s > best) best = pl->pred_samples_per_s;
        cr_assert(r.pts[i].samples_per_s == best, "%d GPUs: %.17g against %.17g",
                  r.pts[i].gpus, r.pts[i].samples_per_s, best);
        plan_free(pl);
        cluster_free(cl);
    }
    sweep_result_free(&r);
    cluster_free(hx);
    cluster_free(c0);
    profile_free(p);
}
