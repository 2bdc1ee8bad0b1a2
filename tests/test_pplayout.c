/* test_pplayout.c: Megatron-Core's pipeline layout string (core/pplayout.h) and the
 * layouts it builds (planner/layout3d.h). The parser's stages are checked against unrollings
 * written out here by hand from Megatron-Core's parse_str_to_list (commas dropped, "(...)*n"
 * then "x*n" unrolled, split at '|') and its checks (the stage count a multiple of pp, E
 * first and once, L last and once, the t count); a layout string equals the uneven split
 * that places the same blocks, stage by stage and in simulated iteration time; each bad
 * input gets its one line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "planner/layout3d.h"
#include "core/pplayout.h"
#include "sim/sim.h"
#include "llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define H100 "profiles/clusters/dgx-h100.json"
#define L405 "examples/llm/nemo/llama31-405b.json"
#define L70 "examples/llm/llama3-70b.json"
#define L70_LAYOUT "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"

/* Checks that s parses into the stages want, written as one string per stage of the
 * characters it holds in order ("Ett", "", "tL"), nstages of them. */
static void expect_stages(const char *s, const char *const *want, int nstages)
{
    plumb_err err = {{0}};
    pplayout *l = pplayout_parse(s, &err);
    cr_assert_not_null(l, "%s: %s", s, err.msg);
    cr_assert_eq(l->nstages, nstages, "%s: %d stages", s, l->nstages);
    char first = 0, last = 0;
    for (int k = 0; k < nstages; k++) {
        int E = 0, t = 0, L = 0, m = 0;
        for (const char *c = want[k]; *c; c++) {
            E += *c == 'E', t += *c == 't', L += *c == 'L', m += *c == 'm';
            if (!first) first = *c;
            last = *c;
        }
        const pplayout_stage *st = &l->stages[k];
        cr_assert(st->embedding == E && st->blocks == t && st->loss == L && st->mtp == m,
                  "%s: stage %d: %d E %d t %d L %d m, expected \"%s\"", s, k, st->embedding,
                  st->blocks, st->loss, st->mtp, want[k]);
    }
    cr_assert_eq(l->first, first, "%s", s);
    cr_assert_eq(l->last, last, "%s", s);
    pplayout_free(l);
}

/* Megatron-Core's own examples (parse_str_to_list's comments) and the Megatron-Bridge
 * strings, unrolled by hand. */
Test(pplayout, parses_as_megatron_unrolls)
{
    /* "Ettt|(tt|)*29,m|L" -> [E t t t] + [t t] x 29 + [m] + [L] */
    const char *a[32] = {"Ettt"};
    for (int k = 1; k <= 29; k++) a[k] = "tt";
    a[30] = "m", a[31] = "L";
    expect_stages("Ettt|(tt|)*29,m|L", a, 32);
    /* "(|tt)*2,tL" -> "|tt|tt" + "tL": an empty first stage, then tt, then tttL */
    const char *b[] = {"", "tt", "tttL"};
    expect_stages("(|tt)*2,tL", b, 3);
    /* "Et*3|t,L" -> commas cosmetic: [E t t t] [t L] */
    const char *c[] = {"Ettt", "tL"};
    expect_stages("Et*3|t,L", c, 2);
    /* commas go first, so "t*1,2" is t*12; "t*0" is nothing; "|*2" two separators */
    const char *d[] = {"Etttttttttttt", "", "L"};
    expect_stages("Et*1,2|*2L", d, 3);
    const char *e[] = {"E", "L"};
    expect_stages("Et*0|L", e, 2);
    /* the 70B string: E t t, 34 x t t, t t t, 3 x t t, t L = 40 stages, 80 t */
    const char *f[40] = {"Ett"};
    for (int k = 1; k <= 34; k++) f[k] = "tt";
    f[35] = "ttt";
    for (int k = 36; k <= 38; k++) f[k] = "tt";
    f[39] = "tL";
    expect_stages(L70_LAYOUT, f, 40);
    /* the 405B accountings' split: E t, 62 x t t, t L = 64 stages, 1 + 124 + 1 = 126 t */
    const char *g[64] = {"Et"};
    for (int k = 1; k <= 62; k++) g[k] = "tt";
    g[63] = "tL";
    expect_stages("Et|(tt|)*62,tL", g, 64);
    /* a group holding x*n: "(t*2|)*2" -> "tt|tt|" */
    const char *h[] = {"Ett", "tt", "L"};
    expect_stages("E(t*2|)*2L", h, 3);
}

/* Checks that s is refused (parse or check against blocks, pp, v) with a line holding
 * want. */
static void expect_refused(const char *s, int blocks, int pp, int v, const char *want)
{
    plumb_err err = {{0}};
    pplayout *l = pplayout_parse(s, &err);
    int rc = l ? pplayout_check(l, blocks, pp, v, &err) : -1;
    pplayout_free(l);
    cr_assert_eq(rc, -1, "%s: accepted, expected \"%s\"", s, want);
    cr_assert(strstr(err.msg, want), "%s: got \"%s\", expected \"%s\"", s, err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'));
}

/* A layout refused: the layout, the model's blocks, pp and v it is checked against, and
 * what its line holds. */
typedef struct refusal {
    const char *s;
    int blocks, pp, v;
    const char *want;
} refusal;

/* expect_refused of each of the n cases (each message names its layout). */
static void expect_refusals(const refusal *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        expect_refused(k[i].s, k[i].blocks, k[i].pp, k[i].v, k[i].want);
}

/* Megatron-Core's checks (arguments.py: stages a multiple of pp; TransformerConfig: the
 * virtual pipeline size given must equal the detected; validate_layer_layout: the first
 * layer E, the last L, each once, the decoder count equal to num_layers) and the two plumb
 * adds (no m; no stage without a layer). */
Test(pplayout, checks_megatron_rules)
{
    plumb_err err = {{0}};
    pplayout *l = pplayout_parse(L70_LAYOUT, &err);
    cr_assert_not_null(l, "%s", err.msg);
    cr_assert_eq(pplayout_check(l, 80, 8, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(pplayout_check(l, 80, 8, 5, &err), 0, "%s", err.msg);
    cr_assert_eq(pplayout_check(l, 80, 4, 10, &err), 0, "%s", err.msg); /* 40 = 4 x 10 */
    cr_assert_eq(pplayout_check(l, 80, 40, 1, &err), 0, "%s", err.msg);
    pplayout_free(l);
    static const refusal K[] = {
        {L70_LAYOUT, 80, 3, 0, "--pipeline-layout: expected a number of virtual "
             "stages ('|'-separated) that is a multiple of --pp 3 (got 40)"},
        {L70_LAYOUT, 80, 8, 4, "--interleave: expected the layout's 40 virtual "
             "stages / --pp 8 = 5 (got 4)"},
        {L70_LAYOUT, 96, 8, 0, "--pipeline-layout: expected as many t as the "
             "model's 96 layers (got 80)"},
        {"tE|tL", 2, 2, 0, "--pipeline-layout: expected the embedding E as the "
             "first layer (got a block t)"},
        {"|EtL", 1, 2, 0, "--pipeline-layout: expected every virtual stage to hold "
             "E, L or a block t: plumb's stages each hold at least one layer (got "
             "virtual stage 0 (rank 0, chunk 0) empty)"},
        {"Et|Lt", 2, 2, 0, "--pipeline-layout: expected the loss L as the last "
             "layer (got a block t)"},
        {"EtE|tL", 2, 2, 0, "--pipeline-layout: expected E exactly once (got 2)"},
        {"EtL|tL", 2, 2, 0, "--pipeline-layout: expected L exactly once (got 2)"},
        {"Et|tm|L|t", 2, 2, 0, "--pipeline-layout: expected the loss L as the last "
             "layer"},
        {"Et|t|m|L", 2, 2, 0, "--pipeline-layout: expected no MTP layer m: plumb "
             "models no multi-token prediction (got 1)"},
        {"Et||tL", 2, 3, 0, "(got virtual stage 1 (rank 1, chunk 0) empty)"},
        {"Et|tL|", 2, 3, 0, "--pipeline-layout: expected every virtual stage"},
        {"", 2, 1, 0, "--pipeline-layout: expected the embedding E as the first "
             "layer (got no layer)"},
    };
    expect_refusals(K, sizeof K / sizeof K[0]);
}

/* The syntax: one line each, nothing expanded past the bound (these return at once). */
Test(pplayout, bad_syntax_one_line_each)
{
    static const refusal K[] = {
        {"Et|x|tL", 2, 1, 0, "--pipeline-layout: expected E, t, L, m, '|', ',' or "
             "a repeat x*n or (...)*n (got 'x' at character 4)"},
        {"Et|T|tL", 2, 1, 0, "(got 'T' at character 4)"},
        {"Et |tL", 2, 1, 0, "(got byte 0x20 at character 3)"},
        {"E(tt|*2,L", 2, 1, 0, "--pipeline-layout: expected ')' to close the '(' at "
             "character 2 (unbalanced parentheses)"},
        {"Ett)*2|L", 2, 1, 0, "--pipeline-layout: expected '(' before the ')' at "
             "character 4 (unbalanced parentheses)"},
        {"E((t|)*2)*2L", 2, 1, 0, "--pipeline-layout: expected no '(' inside the "
             "group opened before character 3"},
        {"E(,)*2tL", 1, 1, 0, "--pipeline-layout: expected layers inside the group "
             "at character 2 (got an empty group)"},
        {"E(tt|)L", 2, 1, 0, "--pipeline-layout: expected a repeat count \"*n\" "
             "after the group at character 2"},
        {"Et*|tL", 2, 1, 0, "--pipeline-layout: expected a repeat count (digits) "
             "after the '*' at character 3"},
        {"E*2tL", 1, 1, 0, "--pipeline-layout: expected E exactly once (got 2)"},
        {"Et*2*3L", 6, 1, 0, "--pipeline-layout: expected one repeat count, not a "
             "second '*' at character 5"},
        {"*2EtL", 1, 1, 0, "--pipeline-layout: expected a character or a (...) "
             "group before the '*' at character 1 (a bad repeat count)"},
        {"Et*99999999999999999999999999|L", 1, 1, 0, "--pipeline-layout: expected "
             "at most 1048576 layers and separators once the repeats are unrolled"},
        {"E(t|)*1048576L", 1, 1, 0, "expected at most 1048576 layers"},
        /* a bound reached by repeats that each pass it alone: 2^10 x 2^10 + more */
        {"E(t*1024|)*1024,(t*1024|)*2L", 1, 1, 0, "expected at most 1048576 "
             "layers"},
    };
    expect_refusals(K, sizeof K / sizeof K[0]);
}

static layout3d_options opts(int gpus, int tp, int pp, int dp, int gb)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = gpus, o.tp = tp, o.pp = pp, o.dp = dp, o.global_batch = gb;
    o.microbatch_size = 1;
    return o;
}

static plan *build(const char *model_path, const char *cluster_path,
                   const layout3d_options *o, plumb_err *err)
{
    transformer *t = llmfix_model(model_path);
    cluster *c = llmfix_cluster(cluster_path);
    plan *pl = layout3d_build(t, c, cluster_path, o, err);
    cluster_free(c);
    transformer_free(t);
    return pl;
}

static double iteration_s(const plan *pl)
{
    plumb_err err = {{0}};
    sim_report *r = sim_run_folded(pl, NULL, 0, &err);
    cr_assert_not_null(r, "%s", err.msg);
    double s = r->iteration_s;
    sim_report_free(r);
    return s;
}

/* Llama 3.1 405B at pp 8 x V 8 with --account-for-embedding-in-pipeline-split and
 * --account-for-loss-in-pipeline-split: (126 + 2) / 64 = 2 a virtual stage, one fewer where
 * E and L count, i.e. E t | 62 x t t | t L = "Et|(tt|)*62,tL"; the two plans hold the same
 * layers on the same devices and simulate to the same iteration. */
Test(pplayout, equals_405b_accounting_split)
{
    plumb_err err = {{0}};
    layout3d_options a = opts(64, 8, 8, 1, 16);
    a.interleave = 8;
    a.split.account_embedding = a.split.account_loss = 1;
    layout3d_options b = opts(64, 8, 8, 1, 16);
    b.pipeline_layout = "Et|(tt|)*62,tL"; /* no --interleave: 64 stages / pp 8 */
    plan *pa = build(L405, A100, &a, &err);
    cr_assert_not_null(pa, "%s", err.msg);
    plan *pb = build(L405, A100, &b, &err);
    cr_assert_not_null(pb, "%s", err.msg);
    cr_assert_eq(pb->nstages, 64);
    cr_assert_eq(pb->chunks, 8);
    cr_assert_eq(pb->schedule, pa->schedule);
    for (int k = 0; k < 64; k++) {
        const plan_stage *x = &pa->stages[k], *y = &pb->stages[k];
        cr_assert(x->first_layer == y->first_layer && x->last_layer == y->last_layer &&
                  x->devices[0] == y->devices[0], "stage %d: %d-%d on %d against %d-%d on %d",
                  k, x->first_layer, x->last_layer, x->devices[0], y->first_layer,
                  y->last_layer, y->devices[0]);
    }
    cr_assert_eq(pb->stages[0].last_layer, 1);   /* embed, block0 */
    cr_assert_eq(pb->stages[63].first_layer, 126); /* block125, head */
    double ta = iteration_s(pa), tb = iteration_s(pb);
    cr_assert_eq(ta, tb, "%.9f s against %.9f s", ta, tb);
    plan_free(pa);
    plan_free(pb);
}

/* The Megatron-Bridge Llama 3 70B string at tp 4 x pp 8 x dp 2, V 5: virtual stage 35
 * (chunk 4 of rank 3) holds three blocks, 70-72, and the last stage one block and the
 * head; the even split's stage 35 holds two. An E or L alone makes a stage of the
 * embedding or the head alone, as the accountings' empty end stage. */
Test(pplayout, builds_70b_stages)
{
    plumb_err err = {{0}};
    layout3d_options o = opts(64, 4, 8, 2, 256);
    o.pipeline_layout = L70_LAYOUT;
    o.interleave = 5;
    plan *pl = build(L70, H100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    cr_assert_eq(pl->nstages, 40);
    cr_assert_eq(pl->schedule, SCHED_INTERLEAVED);
    cr_assert(pl->stages[0].first_layer == 0 && pl->stages[0].last_layer == 2);
    cr_assert(pl->stages[35].first_layer == 71 && pl->stages[35].last_layer == 73);
    cr_assert_eq(pl->stages[35].devices[0], 3 * 2 * 4); /* rank 3 */
    cr_assert(pl->stages[39].first_layer == 80 && pl->stages[39].last_layer == 81);
    plan_free(pl);
    o = opts(8, 4, 2, 1, 8);
    o.pipeline_layout = "E|t*40|t*40|L"; /* pp 2 x V 2: the embedding and the head alone */
    pl = build(L70, H100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    cr_assert(pl->stages[0].first_layer == 0 && pl->stages[0].last_layer == 0);
    cr_assert(pl->stages[1].first_layer == 1 && pl->stages[1].last_layer == 40);
    cr_assert(pl->stages[3].first_layer == 81 && pl->stages[3].last_layer == 81);
    plan_free(pl);
}

static void expect_bad(const char *model_path, const layout3d_options *o, const char *want)
{
    plumb_err err = {{0}};
    plan *pl = build(model_path, H100, o, &err);
    cr_assert_null(pl, "expected \"%s\"", want);
    cr_assert(strstr(err.msg, want), "got \"%s\", expected \"%s\"", err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'));
}

/* What layout3d_build refuses of a layout string beyond its own rules: the other split
 * options (Megatron-Core's TransformerConfig raises "pipeline_model_parallel_layout cannot
 * be set with other pipeline layout arguments"), --balance, a schedule that does not place
 * virtual stage k on rank k % pp, one whose chunks the layout's stages per rank are not. */
Test(pplayout, build_refusals_one_line_each)
{
    layout3d_options o = opts(64, 4, 8, 2, 256);
    o.pipeline_layout = L70_LAYOUT;
    o.split.account_loss = 1;
    expect_bad(L70, &o, "--pipeline-layout: expected no --account-for-loss-in-pipeline-split "
               "with it");
    o.split.account_loss = 0, o.split.first_blocks = 10;
    expect_bad(L70, &o, "--pipeline-layout: expected no --decoder-first-pipeline-num-layers "
               "with it");
    o.split.first_blocks = 0, o.balance = 1;
    expect_bad(L70, &o, "--balance: expected the even split, which balancing starts from "
               "(got --pipeline-layout)");
    o.balance = 0, o.schedule = SCHED_ZB_V, o.interleave = 0;
    o.pipeline_layout = "Et*20|t*20|t*20|t*20L"; /* zb-v's V: stage 3 on rank 0 */
    o.pp = 2, o.dp = 8;
    expect_bad(L70, &o, "--pipeline-layout: expected a schedule that places virtual stage k "
               "on pipeline rank k % pp");
    o = opts(64, 4, 8, 2, 256);
    o.pipeline_layout = L70_LAYOUT;
    o.schedule = SCHED_1F1B_FLUSH;
    expect_bad(L70, &o, "--pipeline-layout: expected 1 to 1 virtual stages per rank with "
               "schedule 1f1b-flush (got 5 over --pp 8)");
    o.schedule = -1, o.interleave = 4;
    expect_bad(L70, &o, "--interleave: expected the layout's 40 virtual stages / --pp 8 = 5 "
               "(got 4)");
}

/* The split's words, which plumb sim's layout line and the dashboard's runtime row both
 * print: only the options set, in Megatron-Core's order, full and brief; truncated to the
 * buffer; none for the even split. */
Test(pplayout, split_words_in_order)
{
    char w[40];
    pplayout_split_opts none = {0, 0, 0, 0};
    cr_expect_eq(pplayout_split_word(&none, 0, 0, w, sizeof w), 0);
    pplayout_split_opts all = {12, 9, 1, 1};
    const char *full[] = {"pp-first-layers-12", "pp-last-layers-9", "embedding-in-split",
                          "loss-in-split"};
    const char *brief[] = {"first-12", "last-9", "emb-split", "loss-split"};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pplayout_split_word(&all, i, 0, w, sizeof w), 1);
        cr_expect_str_eq(w, full[i]);
        cr_assert_eq(pplayout_split_word(&all, i, 1, w, sizeof w), 1);
        cr_expect_str_eq(w, brief[i]);
    }
    cr_expect_eq(pplayout_split_word(&all, 4, 0, w, sizeof w), 0);
    pplayout_split_opts some = {0, 3, 0, 1}; /* the words of what is set, nothing between */
    cr_assert_eq(pplayout_split_word(&some, 0, 0, w, sizeof w), 1);
    cr_expect_str_eq(w, "pp-last-layers-3");
    cr_assert_eq(pplayout_split_word(&some, 1, 1, w, sizeof w), 1);
    cr_expect_str_eq(w, "loss-split");
    cr_expect_eq(pplayout_split_word(&some, 2, 0, w, sizeof w), 0);
    cr_assert_eq(pplayout_split_word(&all, 0, 0, w, 8), 1);
    cr_expect_str_eq(w, "pp-firs");
}
