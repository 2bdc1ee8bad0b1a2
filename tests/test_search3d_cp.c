/* test_search3d_cp.c: the layout search with context parallelism (planner/search3d.c,
 * docs/llm.md "Context parallelism"): the estimate of cp layouts against the simulator
 * within 0.2 % (dp 1, whose ring runs over the cp ranks, and dp > 1, whose ring runs over
 * dp x cp), the search trying cp only where it applies (flash attention, 2 cp dividing the
 * sequence), a pinned cp, and the ranking's JSON rows naming cp. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "sim/sim.h"
#include "llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define L3 "examples/llm/llama3-8b.json"
#define EST_TOL 0.002 /* the estimate's iteration against the simulator's: the same rings */

static transformer *t;
static cluster *c;

static void setup(void)
{
    t = llmfix_model(L3);
    c = llmfix_cluster(A100);
}

static void teardown(void)
{
    cluster_free(c);
    transformer_free(t);
}

/* Estimate and simulation of Llama 3 8B at tp x cp x pp x dp on 8 A100s, flash attention,
 * its 8192 tokens, global batch 16, microbatch 1, recompute full, zero 1. */
static void est_vs_gb(int gpus, int gb, int tp, int cp, int pp, int dp, int sched)
{
    plumb_err err = {{0}};
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = gpus, o.global_batch = gb, o.microbatch_size = 1;
    o.tp = tp, o.cp = cp, o.pp = pp, o.dp = dp;
    o.recompute = RECOMPUTE_FULL, o.zero = 1, o.attention = LLM_ATTN_FLASH;
    o.schedule = sched;
    plan *pl = layout3d_build(t, c, A100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    search3d_options rt;
    search3d_options_init(&rt);
    search3d_apply_runtime(pl, &rt);
    search3d_est e;
    cr_assert_eq(search3d_estimate(pl, &e, &err), 0, "%s", err.msg);
    sim_report *r = sim_run(pl, NULL, &err);
    cr_assert_not_null(r, "%s", err.msg);
    double rel = e.iteration_s / r->iteration_s - 1;
    cr_expect(fabs(rel) <= EST_TOL, "tp %d cp %d pp %d dp %d: estimate %.4f s, simulated %.4f "
              "s (%+.2f %%)", tp, cp, pp, dp, e.iteration_s, r->iteration_s, 100 * rel);
    sim_report_free(r);
    plan_free(pl);
}

static void est_vs_sim(int tp, int cp, int pp, int dp, int sched)
{
    est_vs_gb(8, 16, tp, cp, pp, dp, sched);
}

Test(search3d_cp, estimate_against_the_simulator, .init = setup, .fini = teardown)
{
    est_vs_sim(1, 2, 1, 4, SCHED_1F1B_FLUSH);
    est_vs_sim(2, 2, 1, 2, SCHED_1F1B_FLUSH);
    est_vs_sim(1, 4, 1, 2, SCHED_1F1B_FLUSH);
    est_vs_sim(2, 2, 2, 1, SCHED_1F1B_FLUSH);  /* dp 1: the cp ranks' reduction */
    est_vs_sim(1, 8, 1, 1, SCHED_1F1B_FLUSH);
    est_vs_sim(1, 4, 2, 1, SCHED_INTERLEAVED);
    est_vs_sim(1, 2, 2, 2, SCHED_ZB_H1);
    /* two servers, one microbatch per replica: the dp x cp ring crosses InfiniBand */
    est_vs_gb(16, 2, 4, 2, 1, 2, SCHED_1F1B_FLUSH);
    est_vs_gb(16, 4, 2, 4, 1, 2, SCHED_1F1B_FLUSH);
    est_vs_gb(16, 2, 8, 2, 1, 1, SCHED_1F1B_FLUSH);
}

static search3d_result *search(int attention, long long seq, int cp)
{
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 8, o.global_batch = 16, o.attention = attention, o.seq = seq, o.cp = cp;
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, c, A100, &o, &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert_geq(r->nranked, 1);
    return r;
}

/* cp is searched with flash attention where 2 cp divides the sequence: at 8192 tokens the
 * best layout has cp > 1 (each rank computes half the sequence or less) and its JSON row
 * says so; standard attention, or 8190 tokens, search cp 1 only (no row has cp, no "cp"). */
Test(search3d_cp, searched_where_it_applies, .init = setup, .fini = teardown)
{
    search3d_result *r = search(LLM_ATTN_FLASH, 0, 0);
    cr_assert_gt(r->ranked[0].d.cp, 1, "best cp %d", r->ranked[0].d.cp);
    cJSON *j = search3d_cand_json(&r->ranked[0]);
    const cJSON *cpj = cJSON_GetObjectItemCaseSensitive(j, "cp");
    cr_assert(cJSON_IsNumber(cpj) && cpj->valueint == r->ranked[0].d.cp);
    cJSON_Delete(j);
    long long with_cp = r->enumerated;
    search3d_free(r);
    int att[2] = {LLM_ATTN_STANDARD, LLM_ATTN_FLASH};
    long long seqs[2] = {0, 8190};
    for (int i = 0; i < 2; i++) {
        r = search(att[i], seqs[i], 0);
        for (int k = 0; k < r->nranked; k++) cr_assert_eq(r->ranked[k].d.cp, 1);
        j = search3d_cand_json(&r->ranked[0]);
        cr_assert_null(cJSON_GetObjectItemCaseSensitive(j, "cp"));
        cJSON_Delete(j);
        cr_assert_lt(r->enumerated, with_cp);
        search3d_free(r);
    }
}

/* --cp C pins it: every layout ranked has cp C; cp 1 pinned searches what the search
 * searched before cp; ZeRO is searched over dp x cp. */
Test(search3d_cp, pinned, .init = setup, .fini = teardown)
{
    search3d_result *r = search(LLM_ATTN_FLASH, 0, 2);
    for (int k = 0; k < r->nranked; k++) cr_assert_eq(r->ranked[k].d.cp, 2);
    search3d_free(r);
    r = search(LLM_ATTN_FLASH, 0, 1);
    for (int k = 0; k < r->nranked; k++) cr_assert_eq(r->ranked[k].d.cp, 1);
    search3d_free(r);
    /* cp 8 on 8 GPUs is dp 1: it fits only with ZeRO-1 over the 8 cp ranks, which the
     * search tries where dp x cp > 1 */
    r = search(LLM_ATTN_FLASH, 0, 8);
    cr_assert_eq(r->ranked[0].d.cp, 8);
    cr_assert_eq(r->ranked[0].d.dp, 1);
    cr_assert_eq(r->ranked[0].o.zero, 1);
    search3d_free(r);
}
