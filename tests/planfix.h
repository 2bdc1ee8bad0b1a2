/* planfix.h: plan fixtures of the simulator and planner tests, made or checked or the test
 * fails: a 3D layout of a transformer model file on a cluster file (layout3d_build), the
 * round trip of a plan field that picks how the simulator runs the plan, a plan's simulated
 * iteration or the reason it is refused, and a table row of replica counts as stages.
 * Header-only: each test file is its own binary. */
#ifndef PLUMB_TESTS_PLANFIX_H
#define PLUMB_TESTS_PLANFIX_H

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
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

#endif
