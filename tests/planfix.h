/* planfix.h: plan fixtures of the simulator and planner tests, made or checked or the test
 * fails: a 3D layout of a transformer model file on a cluster file (layout3d_build), the
 * round trip of a plan field that picks how the simulator runs the plan, a plan's simulated
 * iteration or the reason it is refused or its report under a memory limit, a table row of
 * replica counts as stages, and the native planner's runtime checks (the simulation memo's
 * key, the kinds --schedule auto skips).
 * Header-only: each test file is its own binary. */
#ifndef PLUMB_TESTS_PLANFIX_H
#define PLUMB_TESTS_PLANFIX_H

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "planner/native.h"
#include "planner/native_impl.h"
#include "sim/sim.h"

/* layout3d_build of the model file `model` on the cluster file `cluster_path` with o; fails
 * the test with the error's line when a file or the layout is refused. The caller frees the
 * plan with plan_free. */
static inline plan *plan3d(const char *model, const char *cluster_path,
                           const layout3d_options *o)
{
    plumb_err e;
    err_clear(&e);
    transformer *t = transformer_load(model, &e);
    cluster *c = t ? cluster_load(cluster_path, &e) : NULL;
    cr_assert(t && c, "%s", e.msg);
    plan *pl = layout3d_build(t, c, cluster_path, o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    transformer_free(t);
    cluster_free(c);
    return pl;
}

/* A plan field that picks how the plan is simulated: its JSON key, the value that sets it
 * (any other value the file may hold is the default, which is not written), a value it
 * refuses and the values it takes as the error words them ("overlap or sync"), the field
 * as the loaded plan holds it (0 by default, 1 when set) and whether the set value must
 * simulate strictly slower (1) or no faster (0) than the default. */
typedef struct plan_field {
    const char *key, *value, *bad, *choices;
    int (*get)(const plan *pl);
    int slower;
} plan_field;

/* Checks f on the shipped plan at path (which leaves f at its default): the default is not
 * written; the key set to f->value loads as the field set, is written back, makes another
 * plan and is what sim_run simulates; f->bad is one error naming the file, the key and the
 * choices. */
static inline void plan_field_check(const char *path, const plan_field *f)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load(path, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_expect_eq(f->get(pl), 0);
    cJSON *j = plan_to_json(pl);
    cr_assert_not_null(j);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, f->key), "%s: the default is not "
                   "written", f->key);
    cJSON_AddStringToObject(j, f->key, f->value);
    plan *ps = plan_from_json(j, "x.json", &e);
    cr_assert_not_null(ps, "%s", e.msg);
    cr_expect_eq(f->get(ps), 1);
    cJSON *back = plan_to_json(ps);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(back, f->key);
    cr_expect(cJSON_IsString(v) && !strcmp(v->valuestring, f->value));
    cr_expect(!plan_equal(pl, ps));
    sim_report *r0 = sim_run(pl, NULL, &e), *r1 = sim_run(ps, NULL, &e);
    cr_assert(r0 && r1, "%s", e.msg);
    cr_expect(f->slower ? r1->iteration_s > r0->iteration_s
                        : r1->iteration_s >= r0->iteration_s,
              "%s %g s, default %g s", f->value, r1->iteration_s, r0->iteration_s);
    sim_report_free(r0);
    sim_report_free(r1);
    cJSON_ReplaceItemInObjectCaseSensitive(j, f->key, cJSON_CreateString(f->bad));
    cr_expect_null(plan_from_json(j, "x.json", &e));
    char want[160];
    snprintf(want, sizeof want, "x.json: %s: expected %s (got \"%s\")", f->key, f->choices,
             f->bad);
    cr_expect(strstr(e.msg, want) != NULL, "%s", e.msg);
    cJSON_Delete(back);
    cJSON_Delete(j);
    plan_free(ps);
    plan_free(pl);
}

/* The iteration sim_run gives pl (s), or -1 with the refusal's line in msg[n]: the run's,
 * or e's when pl is NULL (its maker refused it, saying why in e). Frees pl. */
static inline double plan_iteration(plan *pl, plumb_err *e, char *msg, size_t n)
{
    double it = -1;
    sim_report *rep = pl ? sim_run(pl, NULL, e) : NULL;
    if (rep)
        it = rep->iteration_s;
    else
        snprintf(msg, n, "%s", e->msg);
    sim_report_free(rep);
    plan_free(pl);
    return it;
}

/* A table row of replica counts ended by 0 or by max entries, as stages: copies the counts
 * into reps[max] and their least common multiple into *lcm (the fewest microbatches every
 * stage's replicas divide). Returns the stage count. */
static inline int shape_replicas(const int *shape, int max, int *reps, int *lcm)
{
    int S = 0;
    *lcm = 1;
    while (S < max && shape[S]) {
        int a = *lcm, b = shape[S];
        while (b) {
            int t = a % b;
            a = b, b = t;
        }
        reps[S] = shape[S];
        *lcm = *lcm / a * shape[S];
        S++;
    }
    return S;
}

/* sim_run's report of pl under the default options but for memory_limit_bytes (0: each
 * device's own capacity); fails the test when it refuses. The caller frees it with
 * sim_report_free. */
static inline sim_report *plan_sim_limit(const plan *pl, double memory_limit_bytes)
{
    plumb_err e;
    sim_options so;
    sim_options_init(&so);
    so.memory_limit_bytes = memory_limit_bytes;
    sim_report *r = sim_run(pl, &so, &e);
    cr_assert(r, "%s", e.msg);
    return r;
}

/* A field of the simulation memo's key: the int field of plan at offset `field`
 * (offsetof), set to `value`; `what` says what a hit would wrongly answer. */
typedef struct memo_flip {
    size_t field;
    int value;
    const char *what;
} memo_flip;

/* The simulation memo's key holds each of the n flips: VGG-16's data-parallel plan on the
 * first 4 devices of cluster-a-4x4 (native_dp_plan, 8 microbatches of the profiled size,
 * its zero field `zero`) misses, is answered once the memo holds a made-up figure (123
 * samples/s) for it, and with each flip alone set (then put back) misses again, under the
 * default options. Fails the test otherwise or when any of it cannot be made. */
static inline void memo_key_holds(int zero, const memo_flip *flips, int n)
{
    plumb_err e;
    profile *p = profile_load("profiles/pipedream/vgg16.json", &e);
    cr_assert(p, "%s", e.msg);
    cluster *c = cluster_load("profiles/clusters/cluster-a-4x4.json", &e);
    cr_assert(c, "%s", e.msg);
    plan *pl = native_dp_plan(p, c, 4, &e);
    cr_assert(pl, "%s", e.msg);
    pl->microbatch_size = p->minibatch;
    pl->microbatches = 8;
    pl->zero = zero;
    native_options o;
    native_options_init(&o);
    nm_sim_memo *mo = nm_sim_memo_new();
    cr_assert(mo);
    int dev[4] = {0, 1, 2, 3};
    double mem[4] = {1, 1, 1, 1};
    nm_sim_fig f = {123.0, 1.0, 0.1, 1.0, 1, 4, dev, mem};
    cr_assert_null(nm_sim_memo_get(mo, pl, &o));
    nm_sim_memo_put(mo, &f);
    const nm_sim_fig *k = nm_sim_memo_get(mo, pl, &o);
    cr_assert(k, "the same plan should hit");
    cr_expect_eq(k->thr, 123.0);
    for (int i = 0; i < n; i++) {
        int *v = (int *)((char *)pl + flips[i].field), was = *v;
        *v = flips[i].value;
        cr_expect_null(nm_sim_memo_get(mo, pl, &o), "%s", flips[i].what);
        *v = was;
    }
    nm_sim_memo_free(mo);
    plan_free(pl);
    cluster_free(c);
    profile_free(p);
}

/* --schedule auto's result res skipped the asynchronous kinds, pipedream then 2bw, and
 * nothing else (the runtime's rules refuse them); fails the test otherwise. */
static inline void auto_skipped_async(const native_result *res)
{
    cr_assert_eq(res->nskipped, 2);
    cr_expect_eq(res->skipped[0].schedule, SCHED_PIPEDREAM);
    cr_expect_eq(res->skipped[1].schedule, SCHED_2BW);
}

#endif
