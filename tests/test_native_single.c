/* test_native_single.c: the native planner's estimate of one replicated stage (data
 * parallelism) under the asynchronous kinds (pipedream, 2bw), which no replay prices
 * (nm_rr_applies wants two stages): the ring's buckets against the backward, the step,
 * and the rounds (docs/planner-native.md, section 8, "One stage under the asynchronous
 * kinds"), against the simulator's run of the plan the planner writes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/native.h"
#include "planner/native_impl.h"
#include "sim/sim.h"
#include "shipped.h"

/* The estimate's error (estimate / simulated - 1) for profile prof on one stage over the
 * first ndev devices of cluster file cname (all: ndev 0), kind, rounds microbatches per
 * replica of the profile's minibatch / div samples, against sim_run of nm_plan's plan. */
static double single_error(const char *cname, int ndev, const char *prof, sched_kind kind,
                           int rounds, int div)
{
    plumb_err e;
    char cpath[256];
    snprintf(cpath, sizeof cpath, CLUSTER_DIR "/%s.json", cname);
    cluster *c = cluster_load(cpath, &e);
    cr_assert_not_null(c, "%s", e.msg);
    profile *p = shipped_profile(prof);
    nm_model m;
    cr_assert_eq(nm_model_build(&m, p, c, ndev > 0 ? ndev : c->ndevices, NULL, 0, &e), 0,
                 "%s", e.msg);
    nm_part pt;
    memset(&pt, 0, sizeof pt);
    pt.nst = pt.ranks = 1;
    pt.st[0] = (nm_stage){0, m.nb, 0, m.U};
    const int n = m.U * m.g;
    nm_setting s = {.kind = kind, .M = rounds * n, .mbsize = p->minibatch / div,
                    .recompute = 0, .chunks = 1, .opt = OPT_SGD};
    nm_price(&m, &s, &pt);
    plan *pl = nm_plan(&m, &s, &pt, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    sim_report *r = sim_run(pl, &o, &e);
    cr_assert_not_null(r, "%s %s: %s", cname, prof, e.msg);
    const double err = pt.iter_s / r->iteration_s - 1;
    cr_log_info("%s %s on %s, %d replicas, %d microbatches of %d: estimate %.6f s, "
                "simulated %.6f s, %+.2f %%\n", sched_kind_name(kind), prof, cname, n, s.M,
                s.mbsize, pt.iter_s, r->iteration_s, 100 * err);
    sim_report_free(r);
    plan_free(pl);
    nm_model_free(&m);
    profile_free(p);
    cluster_free(c);
    return err;
}

/* The single stages left beyond 5 % (bench/native_est.sh): resnet50, resnet101 and
 * resnext101 on cluster-a-4x4's 16 V100s, alexnet on cluster-c-4x1's 4, one microbatch
 * per replica and three, of the profile's minibatch and half of it, pipedream and 2bw:
 * each within 0.5 % of the simulator's iteration (measured: 0.00 %). Before, the closed
 * form's M x period: 18 of the 32 beyond 3 %, worst -6.3 % (resnet50, 64 samples, one
 * round: the ring exposed max(ring - backward, last bucket), where the simulator's first
 * bucket is ready only a K-th into the backward, so its ring of 154.8 ms over 4 buckets
 * after a backward of 130.5 ms ends 57.0 ms after it, not 39.7; and no optimizer step). */
Test(native_single, data_parallel_against_the_simulator, .timeout = 120)
{
    static const struct {
        const char *cl, *prof;
    } cases[] = {{"cluster-a-4x4", "resnet50"},
                 {"cluster-a-4x4", "resnet101"},
                 {"cluster-a-4x4", "resnext101"},
                 {"cluster-c-4x1", "alexnet"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int k = 0; k < 2; k++)
            for (int rounds = 1; rounds <= 3; rounds += 2)
                for (int div = 1; div <= 2; div++) {
                    const sched_kind kind = k ? SCHED_2BW : SCHED_PIPEDREAM;
                    double err = single_error(cases[i].cl, 0, cases[i].prof, kind, rounds, div);
                    cr_expect(fabs(err) < 0.005, "%s %s on %s, %d rounds, minibatch / %d: "
                              "%+.2f %%", sched_kind_name(kind), cases[i].prof, cases[i].cl,
                              rounds, div, 100 * err);
                }
}

/* One stage over the heterogeneous cluster's 32 devices (H200 and V100 servers): every
 * replica steps on its own device, and the V100's step is the one the ring's next start
 * waits for (nm_stage_step_s: the stage's slowest). gnmt and alexnet, pipedream and 2bw:
 * within 0.5 % of the simulator's iteration (measured: 0.00 %; with the first device's
 * step, an H200's: gnmt -1.3 %, alexnet -0.7 %; before both fixes -2.8 and -0.6 %). */
Test(native_single, heterogeneous_replicas_step_on_the_slowest, .timeout = 120)
{
    static const char *profs[] = {"gnmt", "alexnet"};
    for (int fi = 0; fi < 2; fi++)
        for (int k = 0; k < 2; k++) {
            const sched_kind kind = k ? SCHED_2BW : SCHED_PIPEDREAM;
            double err = single_error("hetero-2xh200-2xv100", 0, profs[fi], kind, 1, 1);
            cr_expect(fabs(err) < 0.005, "%s %s: %+.2f %%", sched_kind_name(kind), profs[fi],
                      100 * err);
        }
}
