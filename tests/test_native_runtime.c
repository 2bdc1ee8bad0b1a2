/* test_native_runtime.c: the runtime the native planner's plans carry (native_options
 * p2p_sync and grad_sync_end: `plumb plan -p --p2p / --grad-sync`, planner/native_runtime.c):
 * the plan returned carries it and its predicted throughput is the simulator's under it;
 * the simulation memo never answers a plan under one runtime with another's figures;
 * --schedule auto skips the kinds the rules' owner (plan_runtime_check, asked through
 * search3d_runtime_check) refuses, with
 * its line; a fixed kind it refuses is refused with that line; the sweep carries it. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "planner/native.h"
#include "planner/native_impl.h"
#include "planner/search3d.h"
#include "planner/sweep.h"
#include "sim/sim.h"
#include "tests/planfix.h"
#include "tests/shipped.h"

/* `plumb sim PLAN`'s samples/s of pl (its own runtime, default options). */
static double sim_thr(const plan *pl)
{
    sim_report *r = plan_sim_limit(pl, 0);
    double t = r->samples_per_s;
    sim_report_free(r);
    return t;
}

Test(native_runtime, plan_under_p2p_sync_carries_it_and_simulates_to_its_figure)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    plumb_err e;
    native_result base, res;
    plan *p0 = planner_native(p, c, &o, &base, &e);
    cr_assert(p0, "%s", e.msg);
    o.p2p_sync = 1;
    plan *pl = planner_native(p, c, &o, &res, &e);
    cr_assert(pl, "%s", e.msg);
    cr_expect_eq(pl->p2p_sync, 1);
    cr_expect_eq(pl->grad_sync_end, 0);
    for (int i = 0; i < res.ncand; i++)
        if (res.cand[i].pl) cr_expect_eq(res.cand[i].pl->p2p_sync, 1, "candidate %d", i);
    /* the figure the planner reports is the simulator's under blocking transfers */
    double t = sim_thr(pl);
    cr_expect(t == pl->pred_samples_per_s, "sim %.9g, planner %.9g", t, pl->pred_samples_per_s);
    /* and not the overlapped run's: the default plan loses to blocking transfers */
    plan *q = plan_clone(p0);
    cr_assert(q);
    q->p2p_sync = 1;
    cr_expect(sim_thr(q) < p0->pred_samples_per_s, "p2p sync should slow vgg16's default plan");
    cr_expect(pl->pred_samples_per_s >= sim_thr(q) * (1 - 1e-9),
              "the planner under p2p sync (%.1f) should not lose to the default plan run so "
              "(%.1f)", pl->pred_samples_per_s, sim_thr(q));
    plan_free(q);
    plan_free(pl);
    plan_free(p0);
    native_result_free(&res);
    native_result_free(&base);
    cluster_free(c);
    profile_free(p);
}

Test(native_runtime, grad_sync_end_plan_simulates_to_its_figure)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    o.grad_sync_end = 1;
    plumb_err e;
    plan *pl = planner_native(p, c, &o, NULL, &e);
    cr_assert(pl, "%s", e.msg);
    cr_expect_eq(pl->grad_sync_end, 1);
    cr_expect_eq(pl->p2p_sync, 0);
    double t = sim_thr(pl);
    cr_expect(t == pl->pred_samples_per_s, "sim %.9g, planner %.9g", t, pl->pred_samples_per_s);
    plan_free(pl);
    cluster_free(c);
    profile_free(p);
}

/* The memo's key holds the plan's runtime: a plan under p2p sync or grad_sync end is not
 * answered with the figures kept for the same plan under the default runtime. */
Test(native_runtime, memo_key_tells_the_runtimes_apart)
{
    static const memo_flip runtimes[] = {
        {offsetof(plan, p2p_sync), 1, "p2p sync answered with overlap's figures"},
        {offsetof(plan, grad_sync_end), 1, "grad_sync end answered with overlap's figures"}};
    memo_key_holds(0, runtimes, 2);
}

/* A memo filled under the default runtime and handed to a planning call under p2p sync
 * gives that call's own figures, as a call without a memo does. */
Test(native_runtime, shared_memo_does_not_mix_runtimes)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    o.best_only = 1;
    o.no_suggest = 1;
    plumb_err e;
    plan *alone_sync;
    o.p2p_sync = 1;
    alone_sync = planner_native(p, c, &o, NULL, &e);
    cr_assert(alone_sync, "%s", e.msg);
    nm_sim_memo *mo = nm_sim_memo_new();
    cr_assert(mo);
    o.sim_memo = mo;
    o.p2p_sync = 0;
    plan *over = planner_native(p, c, &o, NULL, &e); /* fills the memo */
    cr_assert(over, "%s", e.msg);
    o.p2p_sync = 1;
    plan *sync = planner_native(p, c, &o, NULL, &e);
    cr_assert(sync, "%s", e.msg);
    cr_expect(sync->pred_samples_per_s == alone_sync->pred_samples_per_s,
              "with the memo %.9g, without %.9g", sync->pred_samples_per_s,
              alone_sync->pred_samples_per_s);
    cr_expect(sync->pred_samples_per_s == sim_thr(sync));
    cr_expect(over->pred_samples_per_s != sync->pred_samples_per_s);
    nm_sim_memo_free(mo);
    plan_free(sync);
    plan_free(over);
    plan_free(alone_sync);
    cluster_free(c);
    profile_free(p);
}

Test(native_runtime, auto_skips_the_kinds_the_runtime_refuses)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    o.schedule = NATIVE_SCHED_AUTO;
    o.grad_sync_end = 1;
    plumb_err e;
    native_result res;
    cr_assert_eq(planner_auto(p, c, &o, &res, &e), 0, "%s", e.msg);
    auto_skipped_async(&res);
    /* the owner's line, word for word */
    search3d_options so;
    search3d_options_init(&so);
    so.schedule = SCHED_PIPEDREAM;
    so.grad_sync_end = 1;
    plumb_err own;
    cr_assert(search3d_runtime_check(&so, &own));
    cr_expect_str_eq(res.skipped[0].reason, own.msg);
    for (int i = 0; i < res.ncand; i++) {
        cr_expect(!res.cand[i].async, "candidate %d is %s", i,
                  sched_kind_name(res.cand[i].schedule));
        if (res.cand[i].pl) cr_expect_eq(res.cand[i].pl->grad_sync_end, 1);
    }
    char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    cr_assert(f);
    native_result_print(&res, NATIVE_TOP, f);
    fclose(f);
    cr_expect(strstr(buf, "skipped: pipedream: --grad-sync: expected overlap"), "%s", buf);
    cr_expect(strstr(buf, "skipped: 2bw: --grad-sync: expected overlap"), "%s", buf);
    native_result_free(&res);
    /* p2p sync refuses no kind auto searches (the V kinds are not among them) */
    o.grad_sync_end = 0;
    o.p2p_sync = 1;
    cr_assert_eq(planner_auto(p, c, &o, &res, &e), 0, "%s", e.msg);
    cr_expect_eq(res.nskipped, 0);
    native_result_free(&res);
    cluster_free(c);
    profile_free(p);
}

Test(native_runtime, fixed_kind_refused_with_the_owners_line)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    plumb_err e;
    native_result res;
    o.schedule = SCHED_2BW;
    o.grad_sync_end = 1;
    cr_expect_null(planner_native(p, c, &o, &res, &e));
    cr_expect(strstr(e.msg, "--grad-sync: expected overlap with schedule 2bw"), "%s", e.msg);
    native_result_free(&res);
    o.grad_sync_end = 0;
    o.p2p_sync = 1;
    o.schedule = SCHED_ZB_V;
    cr_expect_null(planner_native(p, c, &o, &res, &e));
    cr_expect(strstr(e.msg, "--p2p: expected overlap with schedule zb-v"), "%s", e.msg);
    native_result_free(&res);
    sweep_result sr;
    cr_expect_eq(planner_sweep(p, c, 2, 4, &o, 0, 0, &sr, &e), -1);
    cr_expect(strstr(e.msg, "--p2p: expected overlap with schedule zb-v"), "%s", e.msg);
    sweep_result_free(&sr);
    cluster_free(c);
    profile_free(p);
}

Test(native_runtime, sweep_plans_under_the_runtime)
{
    profile *p = shipped_profile("vgg16");
    cluster *c = shipped_cluster("cluster-a-4x4");
    native_options o;
    native_options_init(&o);
    o.p2p_sync = 1;
    plumb_err e;
    sweep_result sr;
    cr_assert_eq(planner_sweep(p, c, 8, 8, &o, 0, 0, &sr, &e), 0, "%s", e.msg);
    cr_expect_eq(sr.p2p_sync, 1);
    cr_expect_str_eq(sr.runtime, "p2p sync");
    cr_assert(sr.pts[0].ok, "%s", sr.pts[0].why);
    /* the point's figure is the planner's on 8 devices under p2p sync, memo and all */
    native_options one = o;
    one.max_devices = 8;
    int use;
    cluster *c8 = planner_cluster_resize(c, 8, &use, &e);
    cr_assert(c8, "%s", e.msg);
    one.max_devices = use;
    one.best_only = 1;
    one.no_suggest = 1;
    plan *pl = planner_native(p, c8, &one, NULL, &e);
    cr_assert(pl, "%s", e.msg);
    cr_expect_eq(pl->p2p_sync, 1);
    cr_expect(sr.pts[0].samples_per_s == pl->pred_samples_per_s, "sweep %.9g, plan %.9g",
              sr.pts[0].samples_per_s, pl->pred_samples_per_s);
    cr_expect(pl->pred_samples_per_s == sim_thr(pl));
    plan_free(pl);
    cluster_free(c8);
    sweep_result_free(&sr);
    cluster_free(c);
    profile_free(p);
}
