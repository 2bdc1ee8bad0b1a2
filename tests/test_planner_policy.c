/* test_planner_policy.c: the planning rules every front end shares (planner/policy.h):
 * the dashboard's plan for a what-if is the one planner_native makes for the same cluster
 * and settings, the cluster resize rule, the microbatch rule, the data-parallel baseline
 * plan and the even partitioner. */
#include <criterion/criterion.h>
#include <string.h>

#include "planner/native.h"
#include "planner/planner.h"
#include "planner/policy.h"
#include "ui/eval.h"

#define PROFILE "profiles/pipedream/vgg16.json"
#define CLUSTER "profiles/clusters/cluster-a-4x4.json"

static cluster *load_clus(const char *path)
{
    plumb_err e;
    cluster *c = cluster_load(path, &e);
    cr_assert(c, "%s", e.msg);
    return c;
}

static profile *load_prof(void)
{
    plumb_err e;
    profile *p = profile_load(PROFILE, &e);
    cr_assert(p, "%s", e.msg);
    return p;
}

static ui_whatif whatif(int ngpus, int microbatches)
{
    ui_whatif w;
    memset(&w, 0, sizeof w);
    w.ngpus = ngpus;
    w.schedule = SCHED_1F1B_FLUSH;
    w.microbatches = microbatches;
    w.recompute = UI_RECOMPUTE_AUTO;
    w.straggler = -1;
    w.straggler_factor = 2;
    return w;
}

/* The dashboard's plan for w and planner_native's for the same resized cluster agree in
 * every stage, device and microbatch setting. */
static void check_same_as_native(const ui_base *b, int ngpus, int microbatches)
{
    ui_whatif w = whatif(ngpus, microbatches);
    ui_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(ui_evaluate(b, &w, &r), 0, "%d GPUs: %s", ngpus, r.err);
    cr_assert_str_eq(r.origin, "native planner");

    plumb_err e;
    int use = 0;
    cluster *c = planner_cluster_resize(b->clus, ngpus, &use, &e);
    cr_assert_not_null(c, "%s", e.msg);
    native_options o;
    native_options_init(&o);
    o.schedule = SCHED_1F1B_FLUSH;
    o.microbatches = microbatches;
    o.max_devices = use < c->ndevices ? use : 0;
    plan *pl = planner_native(b->prof, c, &o, NULL, &e);
    cr_assert_not_null(pl, "%s", e.msg);

    cr_assert_eq(r.pl->clus->ndevices, c->ndevices);
    cr_assert_eq(r.pl->nstages, pl->nstages, "%d GPUs", ngpus);
    for (int s = 0; s < pl->nstages; s++) {
        cr_assert_eq(r.pl->stages[s].first_layer, pl->stages[s].first_layer);
        cr_assert_eq(r.pl->stages[s].last_layer, pl->stages[s].last_layer);
        cr_assert_eq(r.pl->stages[s].replicas, pl->stages[s].replicas);
        for (int j = 0; j < pl->stages[s].replicas; j++) {
            cr_assert_eq(r.pl->stages[s].devices[j], pl->stages[s].devices[j]);
            cr_assert_lt(pl->stages[s].devices[j], ngpus, "only the first %d devices", ngpus);
        }
    }
    cr_assert_eq(r.pl->schedule, pl->schedule);
    cr_assert_eq(r.pl->microbatches, pl->microbatches, "%d GPUs", ngpus);
    cr_assert_eq(r.pl->microbatch_size, pl->microbatch_size);
    cr_assert_eq(r.pl->recompute, pl->recompute);
    plan_free(pl);
    cluster_free(c);
    ui_result_free(&r);
}

Test(policy, dashboard_plans_what_plumb_plan_makes)
{
    ui_base b;
    plumb_err e;
    cr_assert_eq(ui_base_load(&b, PROFILE, CLUSTER, NULL, &e), 0, "%s", e.msg);
    check_same_as_native(&b, 8, 0);
    check_same_as_native(&b, 6, 0); /* a partial server: 2 idle devices */
    check_same_as_native(&b, 16, 12);
    ui_base_free(&b);
}

Test(policy, resize_counts_servers_and_types)
{
    cluster *b = load_clus("profiles/clusters/cluster-b-2x8.json");
    plumb_err e;
    int use = 0;
    cluster *r = planner_cluster_resize(b, 3, &use, &e);
    cr_assert(r, "%s", e.msg);
    cr_assert_eq(r->ndevices, 3);
    cr_assert_eq(r->nservers, 1);
    cr_assert_eq(use, 3);
    cluster_free(r);
    r = planner_cluster_resize(b, 12, &use, &e);
    cr_assert(r, "%s", e.msg);
    cr_assert_eq(r->ndevices, 16);
    cr_assert_eq(r->nservers, 2);
    cr_assert_eq(use, 12);
    cluster_free(r);
    r = planner_cluster_resize(b, 6, &use, &e); /* within one server */
    cr_assert(r, "%s", e.msg);
    cr_assert_eq(r->ndevices, 6);
    cr_assert_eq(use, 6);
    cluster_free(r);
    r = planner_cluster_resize(b, 40, &use, &e);
    cr_assert(r, "%s", e.msg);
    cr_assert_eq(r->ndevices, 40);
    cr_assert_eq(r->nservers, 5);
    cr_assert_eq(r->levels[0].count, 8);
    cr_assert_eq(use, 40);
    cluster_free(r);
    cr_assert_null(planner_cluster_resize(b, 0, &use, &e));
    cr_assert(strstr(e.msg, "GPU count"), "%s", e.msg);
    cr_assert_null(planner_cluster_resize(b, PLANNER_MAX_GPUS + 1, &use, &e));
    cluster_free(b);

    /* heterogeneous: server types repeat the pattern H200, H200, V100, V100 */
    cluster *h = load_clus("profiles/clusters/hetero-2xh200-2xv100.json");
    r = planner_cluster_resize(h, 48, &use, &e);
    cr_assert(r, "%s", e.msg);
    cr_assert_eq(r->nservers, 6);
    for (int s = 0; s < 6; s++) cr_assert_eq(r->server_type[s], h->server_type[s % 4]);
    cr_assert_str_eq(cluster_device_type(r, 47)->name, "H200-SXM-141GB");
    cluster_free(r);
    cluster_free(h);
}

/* A two-stage plan of p on c: stage 0 on r0 replicas, stage 1 on r1. */
static plan *two_stages(const profile *p, const cluster *c, int r0, int r1)
{
    plan *pl = plan_new(p, c, 2);
    cr_assert_not_null(pl);
    int devs[16];
    for (int j = 0; j < r0 + r1; j++) devs[j] = j;
    cr_assert_eq(plan_set_stage(pl, 0, 0, 3, r0, devs), 0);
    cr_assert_eq(plan_set_stage(pl, 1, 4, p->nlayers - 1, r1, devs + r0), 0);
    return pl;
}

Test(policy, microbatch_rule)
{
    plumb_err e;
    profile *p = load_prof();
    cluster *c = load_clus(CLUSTER);
    plan *pl = two_stages(p, c, 2, 3);
    cr_assert_eq(planner_replica_round(pl), 6);
    /* round-robin kinds: a multiple of every replica count (lcm 6) */
    cr_assert_eq(planner_microbatches(pl, SCHED_PIPEDREAM, 6), 6);
    cr_assert_eq(planner_microbatches(pl, SCHED_PIPEDREAM, 7), 12);
    cr_assert_eq(planner_microbatches(pl, SCHED_PIPEDREAM, 1), 6);
    /* flushing kinds take what was asked */
    cr_assert_eq(planner_microbatches(pl, SCHED_1F1B_FLUSH, 7), 7);
    /* 0: the native planner's default, the same for the planner and everyone else */
    for (int k = 0; k < SCHED_NKINDS; k++) {
        if (sched_kind_chunked((sched_kind)k)) continue;
        int m = planner_microbatches(pl, (sched_kind)k, 0);
        cr_assert_eq(m, native_default_microbatches(pl, (sched_kind)k));
        cr_assert_geq(m, 4 * pl->nstages, "%s", sched_kind_name((sched_kind)k));
    }
    plan_free(pl);

    /* PipeDream's partitioner deals one round: its 12-3-1 plan of VGG-16 runs 12 */
    pl = planner_pipedream(p, c, NULL, NULL, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert_eq(pl->schedule, SCHED_PIPEDREAM);
    cr_assert_eq(planner_replica_round(pl), 12);
    cr_assert_eq(pl->microbatches, 12);
    plan_free(pl);

    /* the dashboard's even split gets the same default as the planner would give it */
    ui_base b;
    cr_assert_eq(ui_base_load(&b, PROFILE, CLUSTER, NULL, &e), 0, "%s", e.msg);
    b.planner = UI_PLANNER_EVEN;
    ui_whatif w = whatif(16, 0);
    ui_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(ui_evaluate(&b, &w, &r), 0, "%s", r.err);
    cr_assert_str_eq(r.origin, "even split");
    cr_assert_eq(r.pl->microbatches, native_default_microbatches(r.pl, SCHED_1F1B_FLUSH),
                 "even split of %d stages: %d microbatches", r.pl->nstages, r.pl->microbatches);
    ui_result_free(&r);
    ui_base_free(&b);
    cluster_free(c);
    profile_free(p);
}

Test(policy, dp_baseline_and_even_split)
{
    plumb_err e;
    profile *p = load_prof();
    cluster *c = load_clus(CLUSTER);
    plan *pl = two_stages(p, c, 1, 1);
    pl->microbatches = 6;
    pl->microbatch_size = 32;
    pl->recompute = 1;
    plan *dp = planner_dp_plan(pl, 4, &e);
    cr_assert_not_null(dp, "%s", e.msg);
    cr_assert_eq(dp->nstages, 1);
    cr_assert_eq(dp->stages[0].replicas, 4);
    cr_assert_eq(dp->stages[0].last_layer, p->nlayers - 1);
    cr_assert_eq(dp->microbatches, 8);
    cr_assert_eq(dp->microbatch_size, 32);
    cr_assert_eq(dp->recompute, 1);
    cr_assert_eq(plan_validate(dp, NULL, &e), 0, "%s", e.msg);
    plan_free(dp);
    plan_free(pl);

    /* the even split on the first 6 of 16 devices: 6 stages, devices 0..5 */
    plan *ev = planner_split_plan(p, c, 6, SCHED_1F1B_FLUSH, &e);
    cr_assert_not_null(ev, "%s", e.msg);
    cr_assert_eq(ev->nstages * ev->stages[0].replicas, 6);
    for (int s = 0; s < ev->nstages; s++)
        for (int j = 0; j < ev->stages[s].replicas; j++)
            cr_assert_lt(ev->stages[s].devices[j], 6);
    plan_free(ev);

    /* weights: the largest range is the smallest possible */
    static const double w[] = { 5, 1, 1, 1, 1, 1, 6 };
    int first[3], last[3];
    cr_assert_eq(planner_split_weights(w, 7, 3, first, last), 0);
    double worst = 0;
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(first[s], s ? last[s - 1] + 1 : 0);
        double sum = 0;
        for (int i = first[s]; i <= last[s]; i++) sum += w[i];
        if (sum > worst) worst = sum;
    }
    cr_assert_eq(last[2], 6);
    cr_assert_float_eq(worst, 6, 1e-12); /* {5 | 1 1 1 1 1 | 6} or {5 1 | 1 1 1 1 | 6} */
    cr_assert_eq(planner_split_weights(w, 7, 8, first, last), -1);
    cluster_free(c);
    profile_free(p);
}
