/* llmexec.h: the executor's check of a transformer's plan, for the tests of the model
 * families the executor's own model cannot run (their refusals by name). Header-only: each
 * test file is its own binary. Apart from llmfix.h because exec/train_plan.h's `model`
 * would clash with test files that name a helper so. */
#ifndef PLUMB_TESTS_LLMEXEC_H
#define PLUMB_TESTS_LLMEXEC_H

#include <string.h>

#include <criterion/criterion.h>

#include "core/cluster.h"
#include "core/transformer.h"
#include "exec/train_plan.h"
#include "planner/layout3d.h"

/* Lays t out at tp 2 x pp 2 x dp 2 on examples/clusters/cpu-1x8.json (fp32, global batch 8
 * of microbatches of 2) and checks the plan against the executor's own model,
 * examples/models/gpt-mini.json (exec/train_plan.c): it must run when want is NULL, else be
 * refused in one line that contains want. */
static inline void llmexec_check(const transformer *t, const char *want)
{
    plumb_err e = {{0}};
    model *m = model_load("examples/models/gpt-mini.json", &e);
    cr_assert_not_null(m, "%s", e.msg);
    cluster *c = cluster_load("examples/clusters/cpu-1x8.json", &e);
    cr_assert_not_null(c, "%s", e.msg);
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = 2, o.pp = 2, o.dp = 2;
    o.global_batch = 8;
    o.microbatch_size = 2;
    o.precision = DEV_FP32;
    plan *pl = layout3d_build(t, c, "examples/clusters/cpu-1x8.json", &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    int rc = train_plan_check(m, "gpt-mini.json", pl, "plan.json", &e);
    if (!want) cr_assert_eq(rc, 0, "%s", e.msg);
    else {
        cr_assert_eq(rc, -1, "accepted: %s", want);
        cr_assert(strstr(e.msg, want), "%s (want %s)", e.msg, want);
        cr_assert_null(strchr(e.msg, '\n'), "one line: %s", e.msg);
    }
    plan_free(pl);
    cluster_free(c);
    model_free(m);
}

#endif
