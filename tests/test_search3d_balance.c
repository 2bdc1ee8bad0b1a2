/* test_search3d_balance.c: the layout search with --balance (search3d_options.balance):
 * every candidate simulated in full has its stages balanced as a fixed layout's are
 * (layout3d_balance), and is ranked by the plan it keeps; the estimates stay even. GPT-2 on
 * 8 A100s at pp 4, whose head costs more than a block, gains; the checks that plan and
 * sweep share (search3d_options_check, search3d_runtime_check) name the option. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/cluster.h"
#include "core/schedule_traits.h"
#include "core/transformer.h"
#include "planner/balance3d.h"
#include "planner/search3d.h"
#include "sim/sim.h"
#include "llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT2 "examples/llm/gpt2.json"

static transformer *t;
static cluster *c;

static void setup(void)
{
    t = llmfix_model(GPT2);
    c = llmfix_cluster(A100);
}

static void teardown(void)
{
    cluster_free(c);
    transformer_free(t);
}

/* GPT-2 on 8 GPUs at pp 4, global batch 64, the best 8 estimates simulated. */
static search3d_result *search(int balance)
{
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 8, o.pp = 4, o.global_batch = 64, o.simulate = 8, o.balance = balance;
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, c, A100, &o, &err);
    cr_assert_not_null(r, "%s", err.msg);
    return r;
}

/* Each ranked candidate's figures are those of its layout built, simulated, balanced by
 * layout3d_balance and simulated again, here outside the search; the even split's
 * iteration is kept beside it. Fails when the search ignores balance (no candidate
 * balanced). */
Test(search3d_balance, each_simulated_layout_is_balanced, .init = setup, .fini = teardown)
{
    search3d_result *r = search(1);
    int moved = 0;
    for (int i = 0; i < r->nranked; i++) {
        const search3d_cand *k = &r->ranked[i];
        plumb_err err = {{0}};
        plan *pl = layout3d_build(t, c, A100, &k->o, &err);
        cr_assert_not_null(pl, "%s", err.msg);
        sim_report *even = sim_run(pl, NULL, &err);
        cr_assert_not_null(even, "%s", err.msg);
        layout3d_balance_result bal;
        cr_assert_eq(layout3d_balance(pl, NULL, even, &bal, &err), 0, "%s", err.msg);
        sim_report *kept = bal.changed ? sim_run(pl, NULL, &err) : NULL;
        double want = kept ? kept->iteration_s : even->iteration_s;
        cr_expect_eq(k->balanced, bal.changed, "#%d: balanced %d, layout3d_balance %d", i + 1,
                     k->balanced, bal.changed);
        cr_expect(fabs(k->iteration_s / want - 1) < 1e-12, "#%d %s: ranked at %.6f s, its "
                  "balanced plan simulates %.6f s", i + 1, sched_kind_name(k->d.schedule),
                  k->iteration_s, want);
        cr_expect(fabs(k->even_iteration_s / even->iteration_s - 1) < 1e-12, "#%d: even "
                  "split %.6f s, simulated %.6f s", i + 1, k->even_iteration_s,
                  even->iteration_s);
        if (i == 0) /* the plan kept is the balanced one, stage by stage */
            for (int s = 0; s < pl->nstages; s++)
                cr_expect_eq(r->best->stages[s].first_layer, pl->stages[s].first_layer,
                             "best plan's stage %d starts at layer %d, balanced at %d", s,
                             r->best->stages[s].first_layer, pl->stages[s].first_layer);
        moved += bal.changed;
        sim_report_free(kept);
        sim_report_free(even);
        plan_free(pl);
    }
    cr_expect_gt(moved, 0, "no simulated layout of GPT-2 at pp 4 was balanced");
    cr_expect_eq(r->best_balance.changed, r->ranked[0].balanced);
    search3d_free(r);
}

/* The same estimates are simulated with and without balance (they stay even), and
 * balancing keeps a split only when it runs faster: the best can only gain, and here does
 * (the head of GPT-2's 50,257-entry vocabulary outweighs a block). */
Test(search3d_balance, balanced_best_no_slower, .init = setup, .fini = teardown)
{
    search3d_result *even = search(0), *bal = search(1);
    cr_expect_eq(even->fitting, bal->fitting);
    cr_expect_lt(bal->ranked[0].iteration_s, even->ranked[0].iteration_s * (1 - 0.05),
                 "balanced best %.4f s against the even best %.4f s",
                 bal->ranked[0].iteration_s, even->ranked[0].iteration_s);
    for (int i = 0; i < even->nranked; i++)
        cr_expect_eq(even->ranked[i].balanced, 0);
    search3d_free(even);
    search3d_free(bal);
}

/* One check for plan (fixed layout and search) and sweep: each refusal names its option. */
Test(search3d_balance, shared_checks_name_the_option)
{
    search3d_options o;
    plumb_err err = {{0}};
    search3d_options_init(&o);
    o.global_batch = 8;
    cr_expect_eq(search3d_options_check(&o, &err), 0, "%s", err.msg);
    o.precision = DEV_FP16, o.optimizer_state = DEV_BF16;
    cr_expect_eq(search3d_runtime_check(&o, &err), -1);
    cr_expect_str_eq(err.msg, "--optimizer-state bf16: belongs to --precision bf16 or fp8 (got "
                     "--precision fp16)");
    o.grad_reduce = DEV_BF16;
    cr_expect_eq(search3d_options_check(&o, &err), -1);
    cr_expect_str_eq(err.msg, "--grad-reduce bf16: belongs to --precision bf16 or fp8 (got "
                     "--precision fp16)");
    search3d_options_init(&o);
    o.global_batch = 8, o.schedule = SCHED_ZB_H1, o.interleave = 2;
    cr_expect_eq(search3d_options_check(&o, &err), -1);
    cr_expect_str_eq(err.msg, "--interleave: expected 1 with schedule zb-h1, which runs one "
                     "stage per pipeline rank (got 2)");
    o.schedule = SCHED_ZB_V, o.interleave = 3;
    cr_expect_eq(search3d_options_check(&o, &err), -1);
    cr_expect_str_eq(err.msg, "--interleave: expected 2 to 2 virtual stages per rank with "
                     "schedule zb-v (got 3)");
    o.schedule = SCHED_INTERLEAVED, o.interleave = 1;
    cr_expect_eq(search3d_options_check(&o, &err), -1);
    cr_expect(strstr(err.msg, "--interleave: expected 2 or more virtual stages per rank with "
                     "schedule interleaved (got 1;") == err.msg, "%s", err.msg);
    o.interleave = 2;
    cr_expect_eq(search3d_options_check(&o, &err), 0, "%s", err.msg);
    o.schedule = SCHED_ZB_H1, o.interleave = 1, o.zero = 0, o.overlap_param_gather = 1;
    cr_expect_eq(search3d_runtime_check(&o, &err), -1);
    cr_expect(strstr(err.msg, "--overlap-param-gather: belongs to --zero 1") == err.msg, "%s",
              err.msg);
    o.zero = SEARCH3D_FREE; /* the search gathers apart on its zero 1 candidates */
    cr_expect_eq(search3d_runtime_check(&o, &err), 0, "%s", err.msg);
}
