/* test_planner_pipedream.c: the PipeDream-compatible planner against PipeDream's own
 * optimizer (tests/data/pipedream_expected.json: its outputs on the shipped profiles for
 * many machine counts, bandwidths and options, to a relative 1e-9), its fixed tie rule, the
 * options, the plans it builds, and its errors. Cases marked slow run with PLUMB_LONG=1. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/profile.h"
#include "planner/planner.h"

#define EXPECTED "tests/data/pipedream_expected.json"

static double rel(double a, double b)
{
    return fabs(a - b) / fmax(fabs(b), 1e-300);
}

static profile *load(const char *path)
{
    plumb_err e;
    err_clear(&e);
    profile *p = profile_load(path, &e);
    cr_assert(p, "%s: %s", path, e.msg);
    return p;
}

/* Runs every expected case; returns how many were checked. */
static int run_cases(int want_slow, int *failures)
{
    plumb_err e;
    err_clear(&e);
    cJSON *doc = json_load_file(EXPECTED, &e);
    cr_assert(doc, "%s", e.msg);
    cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    cr_assert(cJSON_IsArray(cases));
    int checked = 0;
    profile *p = NULL;
    char cur[512] = "";
    cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *path = cJSON_GetObjectItem(c, "profile")->valuestring;
        cJSON *osec = cJSON_GetObjectItem(c, "plumb_slow");
        if (osec && cJSON_IsTrue(osec) && !want_slow) continue;
        if (strcmp(cur, path) != 0) {
            profile_free(p);
            p = load(path);
            snprintf(cur, sizeof cur, "%s", path);
        }
        pd_options o;
        pd_options_default(&o);
        cJSON *n = cJSON_GetObjectItem(c, "machines"), *b = cJSON_GetObjectItem(c, "bandwidth_Bps");
        o.nlevels = cJSON_GetArraySize(n);
        for (int L = 0; L < o.nlevels; L++) {
            o.machines[L] = cJSON_GetArrayItem(n, L)->valueint;
            o.bandwidth_Bps[L] = cJSON_GetArrayItem(b, L)->valuedouble;
        }
        o.memory_bytes = cJSON_GetObjectItem(c, "memory_bytes")->valuedouble;
        o.straight = cJSON_IsTrue(cJSON_GetObjectItem(c, "straight_pipeline"));
        o.use_memory_constraint = cJSON_IsTrue(cJSON_GetObjectItem(c, "use_memory_constraint"));
        o.use_fewer_machines = cJSON_IsTrue(cJSON_GetObjectItem(c, "use_fewer_machines"));
        cJSON *r = cJSON_GetObjectItem(c, "activation_compression_ratio");
        if (cJSON_IsNumber(r)) o.activation_compression_ratio = r->valuedouble;
        cJSON *fm = cJSON_GetObjectItem(c, "num_machines_in_first_level");
        if (cJSON_IsNumber(fm)) o.machines_in_first_level = fm->valueint;
        const char *args = cJSON_GetObjectItem(c, "pipedream_args")->valuestring;
        pd_result res;
        err_clear(&e);
        int rc = planner_pipedream_run(p, NULL, &o, &res, &e);
        checked++;
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "no_plan"))) {
            cr_expect(rc != 0, "%s: PipeDream has no plan, plumb found %s", args,
                      rc ? "" : res.config);
            if (rc == 0) {
                (*failures)++;
                pd_result_free(&res);
            }
            continue;
        }
        cr_expect(rc == 0, "%s: %s", args, e.msg);
        if (rc) {
            (*failures)++;
            continue;
        }
        double t = cJSON_GetObjectItem(c, "time_per_stage_s")->valuedouble;
        double s1 = cJSON_GetObjectItem(c, "speedup_vs_1")->valuedouble;
        double sd = cJSON_GetObjectItem(c, "speedup_vs_dp")->valuedouble;
        int bad = rel(res.time_per_stage_s, t) > 1e-9 || rel(res.speedup_vs_1, s1) > 1e-9 ||
                  rel(res.speedup_vs_dp, sd) > 1e-9;
        cr_expect(!bad, "%s: plumb %.17g %.17g %.17g, PipeDream %.17g %.17g %.17g", args,
                  res.time_per_stage_s, res.speedup_vs_1, res.speedup_vs_dp, t, s1, sd);
        *failures += bad;
        /* the stages cover the model with the machines of every level */
        int total = 1, used = 0;
        for (int L = 0; L < o.nlevels; L++) total *= o.machines[L];
        for (int s = 0; s < res.nstages; s++) used += res.stages[s].replicas;
        cr_expect(used == res.machines_used && used <= total, "%s: %d devices of %d", args,
                  used, total);
        if (!o.use_fewer_machines) cr_expect(used == total, "%s: %d of %d devices", args, used,
                                             total);
        if (o.straight)
            for (int s = 0; s < res.nstages; s++)
                cr_expect(res.stages[s].replicas == 1, "%s: straight pipeline replicated", args);
        pd_result_free(&res);
    }
    profile_free(p);
    cJSON_Delete(doc);
    return checked;
}

/* (Every timed test of this file has the same timeout: Criterion 2.4's runner, run with
 * --jobs 2 under LeakSanitizer, can leak 48 bytes when a file mixes timeouts.) */
Test(planner_pipedream, matches_pipedream_optimizer, .timeout = 600)
{
    int failures = 0;
    int n = run_cases(getenv("PLUMB_LONG") != NULL, &failures);
    cr_assert(n >= 250, "only %d cases checked", n);
    cr_assert(failures == 0, "%d of %d cases differ from PipeDream", failures, n);
}

/* A chain of n layers, all alike: forward f ms, no backward, params bytes each. */
static profile *chain(int n, double f, double params)
{
    profile *p = profile_alloc(n, n - 1);
    p->name = strdup("chain");
    p->device = strdup("V100");
    p->source = strdup("");
    p->minibatch = 32;
    for (int i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "l%d", i);
        p->layers[i].name = strdup(nm);
        p->layers[i].kind = strdup("Linear");
        p->layers[i].desc = strdup("Linear");
        p->layers[i].forward_ms = f;
        p->layers[i].activation_bytes = 1e6;
        p->layers[i].parameter_bytes = params;
        if (i) p->edges[i - 1] = (profile_edge){i - 1, i};
    }
    return p;
}

static pd_options one_level(int m, double bw)
{
    pd_options o;
    pd_options_default(&o);
    o.machines[0] = m;
    o.bandwidth_Bps[0] = bw;
    return o;
}

Test(planner_pipedream, ties_take_the_single_stage_first)
{
    /* 4 equal layers, no parameters, 2 machines: 2 replicas of everything (2c) ties with
     * every 2-stage split; the rule keeps the single stage. */
    profile *p = chain(4, 10, 0);
    pd_options o = one_level(2, 1e9);
    pd_result r;
    plumb_err e;
    cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s", e.msg);
    cr_expect(fabs(r.time_per_stage_s - 0.02) < 1e-15);
    cr_expect_str_eq(r.config, "2");
    pd_result_free(&r);
    profile_free(p);
}

Test(planner_pipedream, ties_take_the_earliest_cut)
{
    /* 3 equal layers with huge parameters (replication is slow): splits after layer 0 and
     * after layer 1 tie at 2c; the earliest cut wins. */
    profile *p = chain(3, 10, 1e12);
    pd_options o = one_level(2, 1e9);
    pd_result r;
    plumb_err e;
    cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s", e.msg);
    cr_expect(fabs(r.time_per_stage_s - 0.02) < 1e-15);
    cr_assert_eq(r.nstages, 2);
    cr_expect_eq(r.stages[0].nlayers, 1);
    cr_expect_eq(r.stages[0].layers[0], 0);
    cr_expect_str_eq(r.config, "1-1");
    pd_result_free(&r);
    profile_free(p);
}

static int same_result(const pd_result *a, const pd_result *b)
{
    if (a->time_per_stage_s != b->time_per_stage_s || a->nstages != b->nstages ||
        strcmp(a->config, b->config) != 0)
        return 0;
    for (int s = 0; s < a->nstages; s++) {
        const pd_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->nlayers != y->nlayers || x->replicas != y->replicas) return 0;
        if (memcmp(x->layers, y->layers, (size_t)x->nlayers * sizeof(int)) ||
            memcmp(x->devices, y->devices, (size_t)x->replicas * sizeof(int)))
            return 0;
    }
    return 1;
}

Test(planner_pipedream, same_input_same_plan)
{
    const char *paths[] = {"profiles/pipedream/resnet18.json", "profiles/pipedream/gnmt.json",
                           "profiles/pipedream/squeezenet1_0.json"};
    for (int i = 0; i < 3; i++) {
        profile *p = load(paths[i]);
        pd_options o;
        pd_options_default(&o);
        o.nlevels = 2;
        o.machines[0] = 4;
        o.machines[1] = 2;
        o.bandwidth_Bps[0] = 1e10;
        o.bandwidth_Bps[1] = 1e9;
        pd_result a, b;
        plumb_err e;
        cr_assert(planner_pipedream_run(p, NULL, &o, &a, &e) == 0, "%s", e.msg);
        cr_assert(planner_pipedream_run(p, NULL, &o, &b, &e) == 0, "%s", e.msg);
        cr_expect(same_result(&a, &b), "%s: two runs differ", paths[i]);
        pd_result_free(&a);
        pd_result_free(&b);
        profile_free(p);
    }
}

Test(planner_pipedream, vgg16_paper_plan)
{
    /* PipeDream's paper reports 15-1 for VGG-16 on 16 GPUs; on a 4-machine 1 GB/s level the
     * optimizer picks 3-1 (tests/data). Check the plan object too. */
    profile *p = load("profiles/pipedream/vgg16.json");
    pd_options o = one_level(4, 1e9);
    pd_result r;
    plumb_err e;
    cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s", e.msg);
    cr_expect_str_eq(r.config, "3-1");
    cr_expect(rel(r.time_per_stage_s, 0.175732624) < 1e-9);
    int layers = 0;
    for (int s = 0; s < r.nstages; s++) layers += r.stages[s].nlayers;
    cr_expect_eq(layers, p->nlayers, "every layer, Input included, is in a stage");
    pd_result_free(&r);
    profile_free(p);
}

Test(planner_pipedream, plan_is_valid_and_contiguous)
{
    const char *paths[] = {"profiles/pipedream/resnet18.json", "profiles/pipedream/gnmt.json",
                           "profiles/pipedream/vgg16.json"};
    plumb_err e;
    cluster *c = cluster_load("profiles/clusters/cluster-a-4x4.json", &e);
    cr_assert(c, "%s", e.msg);
    for (int i = 0; i < 3; i++) {
        profile *p = load(paths[i]);
        pd_result r;
        plan *pl = planner_pipedream(p, c, NULL, &r, &e);
        cr_assert(pl, "%s: %s", paths[i], e.msg);
        cr_expect(plan_validate(pl, "plan", &e) == 0, "%s: %s", paths[i], e.msg);
        cr_expect_eq(pl->nstages, r.nstages);
        cr_expect_eq(pl->stages[0].first_layer, 0);
        cr_expect_eq(pl->stages[pl->nstages - 1].last_layer, p->nlayers - 1);
        cr_expect_str_eq(pl->planner_config, r.config);
        cr_expect(rel(pl->pred_speedup_vs_dp, r.speedup_vs_dp) < 1e-15);
        /* reordered layers keep every edge pointing forward */
        for (int k = 0; k < pl->prof->nedges; k++)
            cr_expect(pl->prof->edges[k].src < pl->prof->edges[k].dst);
        pd_result_free(&r);
        plan_free(pl);
        profile_free(p);
    }
    cluster_free(c);
}

Test(planner_pipedream, memory_constraint_can_leave_no_plan)
{
    /* PipeDream's stash count is ceil(machines after / replicas): a stage that uses the last
     * machines never breaks it, so data parallelism always fits; a straight pipeline on a
     * tiny memory does not. */
    profile *p = load("profiles/pipedream/vgg16.json");
    pd_options o = one_level(4, 1e9);
    o.use_memory_constraint = 1;
    o.memory_bytes = 1e6; /* far below any stage */
    pd_result r;
    plumb_err e;
    cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s", e.msg);
    cr_expect_str_eq(r.config, "4");
    pd_result_free(&r);
    o.straight = 1;
    err_clear(&e);
    cr_expect(planner_pipedream_run(p, NULL, &o, &r, &e) != 0);
    cr_expect(strstr(e.msg, "memory") != NULL, "%s", e.msg);
    profile_free(p);
}

Test(planner_pipedream, bad_options_are_refused)
{
    profile *p = chain(3, 1, 0);
    pd_options o = one_level(0, 1e9);
    pd_result r;
    plumb_err e;
    cr_expect(planner_pipedream_run(p, NULL, &o, &r, &e) != 0);
    o = one_level(2, -1);
    cr_expect(planner_pipedream_run(p, NULL, &o, &r, &e) != 0);
    o = one_level(2, 1e9);
    o.machines_in_first_level = 3;
    cr_expect(planner_pipedream_run(p, NULL, &o, &r, &e) != 0);
    profile_free(p);
}

Test(planner_pipedream, big_dags_are_planned, .timeout = 600)
{
    /* PipeDream cannot plan NASNet, nor Inception-v3 uncompressed; plumb compresses and
     * plans them, and says so. */
    const char *paths[] = {"profiles/pipedream/inception_v3.json",
                           "profiles/pipedream/nasnetamobile.json"};
    for (int i = 0; i < 2; i++) {
        profile *p = load(paths[i]);
        pd_options o = one_level(8, 3.125e9);
        pd_result r;
        plumb_err e;
        cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s: %s", paths[i], e.msg);
        cr_expect(r.compressed > 0, "%s", paths[i]);
        cr_expect(r.speedup_vs_1 > 1.0, "%s: speedup %g", paths[i], r.speedup_vs_1);
        int layers = 0;
        for (int s = 0; s < r.nstages; s++) layers += r.stages[s].nlayers;
        cr_expect_eq(layers, p->nlayers);
        pd_result_free(&r);
        profile_free(p);
    }
}

Test(planner_pipedream, gnmt16_two_levels, .timeout = 600)
{
    /* GNMT-16 on two levels takes PipeDream's optimizer hours; plumb must plan it. */
    profile *p = load("profiles/pipedream/gnmt_large.json");
    pd_options o;
    pd_options_default(&o);
    o.nlevels = 2;
    o.machines[0] = 4;
    o.machines[1] = 4;
    o.bandwidth_Bps[0] = 16e9;
    o.bandwidth_Bps[1] = 1.25e9;
    pd_result r;
    plumb_err e;
    cr_assert(planner_pipedream_run(p, NULL, &o, &r, &e) == 0, "%s", e.msg);
    cr_expect_eq(r.compressed, 0);
    cr_expect_eq(r.machines_used, 16);
    cr_expect(r.speedup_vs_1 > 1.0);
    pd_result_free(&r);
    profile_free(p);
}

/* Every shipped profile on every shipped cluster with each of PipeDream's options keeps the
 * plan recorded in tests/data/pipedream_plans.json (taken before the exactness-preserving
 * pruning of planner/pd_dp.c): the same configuration, the same stages (states and
 * replicas) and the same optimum. Values are PipeDream's (matches_pipedream_optimizer);
 * this guards the fixed tie rule and the read-back of the split against any pruning that
 * would drop a candidate that ties or a stage's bounds. */
Test(planner_pipedream, shipped_pairs_keep_their_plans, .timeout = 600)
{
    plumb_err e;
    err_clear(&e);
    cJSON *doc = json_load_file("tests/data/pipedream_plans.json", &e);
    cr_assert(doc, "%s", e.msg);
    cJSON *cases = cJSON_GetObjectItem(doc, "cases"), *c;
    int checked = 0, failures = 0;
    profile *p = NULL;
    char cur[512] = "";
    cJSON_ArrayForEach(c, cases) {
        const char *ppath = cJSON_GetObjectItem(c, "profile")->valuestring;
        const char *cpath = cJSON_GetObjectItem(c, "cluster")->valuestring;
        const char *opt = cJSON_GetObjectItem(c, "options")->valuestring;
        if (strcmp(cur, ppath) != 0) {
            profile_free(p);
            p = load(ppath);
            snprintf(cur, sizeof cur, "%s", ppath);
        }
        cluster *cl = cluster_load(cpath, &e);
        cr_assert(cl, "%s: %s", cpath, e.msg);
        pd_options o;
        pd_options_default(&o);
        o.straight = strcmp(opt, "--straight") == 0;
        o.use_fewer_machines = strcmp(opt, "--fewer-machines") == 0;
        o.use_memory_constraint = strcmp(opt, "--memory-constraint") == 0;
        if (strcmp(opt, "--compression 10") == 0) o.activation_compression_ratio = 10;
        pd_options_from_cluster(&o, cl);
        cluster_free(cl);
        pd_result r;
        err_clear(&e);
        int rc = planner_pipedream_run(p, NULL, &o, &r, &e);
        checked++;
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "no_plan"))) {
            cr_expect(rc != 0, "%s %s %s: a plan where there was none", ppath, cpath, opt);
            failures += rc == 0;
            if (rc == 0) pd_result_free(&r);
            continue;
        }
        cr_expect(rc == 0, "%s %s %s: %s", ppath, cpath, opt, e.msg);
        if (rc) {
            failures++;
            continue;
        }
        const char *config = cJSON_GetObjectItem(c, "config")->valuestring;
        double t = cJSON_GetObjectItem(c, "time_per_stage_s")->valuedouble;
        cJSON *st = cJSON_GetObjectItem(c, "stages");
        int bad = strcmp(r.config, config) != 0 || rel(r.time_per_stage_s, t) > 1e-12 ||
                  r.nstages != cJSON_GetArraySize(st);
        for (int s = 0; !bad && s < r.nstages; s++) {
            cJSON *se = cJSON_GetArrayItem(st, s);
            bad |= r.stages[s].first_state + 1 != cJSON_GetArrayItem(se, 0)->valueint ||
                   r.stages[s].last_state + 1 != cJSON_GetArrayItem(se, 1)->valueint ||
                   r.stages[s].replicas != cJSON_GetArrayItem(se, 2)->valueint;
        }
        cr_expect(!bad, "%s %s %s: %s (%.17g s) where it was %s (%.17g s)", ppath, cpath, opt,
                  r.config, r.time_per_stage_s, config, t);
        failures += bad;
        pd_result_free(&r);
    }
    profile_free(p);
    cJSON_Delete(doc);
    cr_assert(checked == 375, "%d cases", checked);
    cr_assert(failures == 0, "%d of %d plans changed", failures, checked);
}

Test(planner_pipedream, cluster_from_pipedream_flags)
{
    /* plumb plan --pipedream -n 4 2 -b 16e9 1.25e9 --memory_size 8e9 */
    pd_options o;
    pd_options_default(&o);
    o.nlevels = 2;
    o.machines[0] = 4;
    o.machines[1] = 2;
    o.bandwidth_Bps[0] = 16e9;
    o.bandwidth_Bps[1] = 1.25e9;
    o.memory_bytes = 8e9;
    plumb_err e;
    cluster *c = pd_options_to_cluster(&o, &e);
    cr_assert_not_null(c, "%s", e.msg);
    cr_assert_str_eq(c->name, "pipedream-levels");
    cr_assert_eq(c->ndevices, 8);
    cr_assert_eq(c->nlevels, 2);
    cr_assert_eq(c->levels[0].count, 4);
    cr_assert_eq(c->levels[1].count, 2);
    cr_assert_float_eq(c->levels[0].bandwidth_Bps, 16e9, 16e9 * 1e-9);
    cr_assert_float_eq(c->levels[1].bandwidth_Bps, 1.25e9, 1.25e9 * 1e-9);
    cr_assert_eq(c->ntypes, 1);
    cr_assert_float_eq(c->types[0].memory_bytes, 8e9, 8e9 * 1e-9);
    /* and back: the same levels */
    pd_options back;
    pd_options_default(&back);
    pd_options_from_cluster(&back, c);
    cr_assert_eq(back.nlevels, 2);
    cr_assert_eq(back.machines[0], 4);
    cr_assert_eq(back.machines[1], 2);
    cr_assert_float_eq(back.memory_bytes, 8e9, 8e9 * 1e-9);
    cluster_free(c);
    /* a level the cluster format refuses: one line, no cluster */
    o.machines[1] = 0;
    cr_assert_null(pd_options_to_cluster(&o, &e));
    cr_assert(strstr(e.msg, "count"), "%s", e.msg);
}
