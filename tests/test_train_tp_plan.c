/* test_train_tp_plan.c: a tensor x pipeline x data parallel plan made by the planner from a
 * transformer description (planner/layout3d.h: examples/llm/gpt-mini.json on
 * examples/clusters/cpu-1x8.json) run by the executor on the model spec it describes
 * (examples/models/gpt-mini.json): the profiled layers mapped onto the model's top-level
 * layers, the plan's stages, replicas, tp, microbatching, schedule and recomputation
 * handed to the runtime, the losses those of sequential training of the same minibatches,
 * and the plans that do not fit the model or that the executor does not run refused with
 * one line naming the field, before any work. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/cluster.h"
#include "core/transformer.h"
#include "exec/data.h"
#include "exec/train_plan.h"
#include "planner/layout3d.h"

#define MODEL "examples/models/gpt-mini.json"
#define LLM "examples/llm/gpt-mini.json"
#define CLUSTER "examples/clusters/cpu-1x8.json"

/* The plan of tp x pp x dp for t (gpt-mini's description unless changed), global batch 8
 * of microbatches of 2, fp32, with the options set(o) changes (may be NULL). NULL with
 * err set when the planner refuses. */
static plan *make_plan(const transformer *t, int tp, int pp, int dp,
                       void (*set)(layout3d_options *), plumb_err *err)
{
    cluster *c = cluster_load(CLUSTER, err);
    cr_assert_not_null(c, "%s", err->msg);
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = tp, o.pp = pp, o.dp = dp;
    o.global_batch = 8;
    o.microbatch_size = 2;
    o.precision = DEV_FP32;
    if (set) set(&o);
    plan *pl = layout3d_build(t, c, CLUSTER, &o, err);
    cluster_free(c);
    return pl;
}

static transformer *gpt_mini(void)
{
    plumb_err e = {{0}};
    transformer *t = transformer_load(LLM, &e);
    cr_assert_not_null(t, "%s", e.msg);
    return t;
}

Test(train_tp_plan, layers_stages_and_workers_of_a_3d_plan)
{
    plumb_err e = {{0}};
    model *m = model_load(MODEL, &e);
    cr_assert_not_null(m, "%s", e.msg);
    transformer *t = gpt_mini();
    plan *pl = make_plan(t, 2, 2, 2, NULL, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert_eq(train_plan_check(m, MODEL, pl, "plan.json", &e), 0, "%s", e.msg);
    /* embed; 4 blocks of an attention and an MLP residual block; ln_f, head, loss */
    int lo[6], hi[6], wlo[] = {0, 1, 3, 5, 7, 9}, whi[] = {0, 2, 4, 6, 8, 11};
    cr_assert_eq(pl->prof->nlayers, 6);
    cr_assert_eq(train_plan_layers(m, pl, lo, hi), 0);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(lo[i], wlo[i], "profiled layer %d starts at %d", i, lo[i]);
        cr_assert_eq(hi[i], whi[i], "profiled layer %d ends at %d", i, hi[i]);
    }
    dataset *d = data_text(m, NULL, 256, 3, &e);
    cr_assert_not_null(d, "%s", e.msg);
    train_run_cfg cfg = {.bk = backend_cpu(), .m = m, .train = d,
                         .cfg = {pl->microbatch_size, pl->microbatches, train_default_opt(OPT_SGD)},
                         .steps = 4, .seed = 7, .tp = 1};
    train_pipeline tpl;
    cr_assert_eq(train_from_plan(&cfg, pl, NULL, 0, pl->microbatches, &tpl, &e), 0, "%s", e.msg);
    cr_assert_eq(cfg.tp, 2, "the plan's tp");
    cr_assert_eq(cfg.sp, 0);
    cr_assert_eq(tpl.nstages, 2);
    /* stage 0: embed .. block1 = model layers 0..4; stage 1: block2 .. head = 5..11 */
    cr_assert(tpl.first[0] == 0 && tpl.last[0] == 4 && tpl.first[1] == 5 && tpl.last[1] == 11,
              "stages %d-%d, %d-%d", tpl.first[0], tpl.last[0], tpl.first[1], tpl.last[1]);
    /* the trace names the plan's ranges, as plumb sim's does */
    cr_assert(tpl.tfirst[0] == 0 && tpl.tlast[0] == 2 && tpl.tfirst[1] == 3 && tpl.tlast[1] == 5);
    cr_assert_eq(tpl.sched->nworkers, 4, "pp 2 x dp 2 workers, each a group of tp 2");
    cr_assert_eq(tpl.sched->microbatches, 4);
    for (int w = 0; w < 4; w++)
        cr_assert_eq(tpl.sched->worker_device[w], 2 * w, "worker %d on its group's first device",
                     w);

    /* the run: the losses of sequential training of the same minibatches (the tolerance
     * of tests/test_train_tp.c: only the summation order differs) */
    train_result pr, sr;
    cr_assert_eq(train_run_pipeline(&cfg, tpl.sched, tpl.first, tpl.last, 1, &pr, NULL, &e), 0,
                 "%s", e.msg);
    train_run_cfg seq = cfg;
    seq.tp = 1;
    cr_assert_eq(train_run(&seq, &sr, &e), 0, "%s", e.msg);
    cr_assert_eq(pr.steps, 4);
    cr_assert(fabs(pr.first_loss - sr.first_loss) <= 1e-5 * sr.first_loss &&
              fabs(pr.last_loss - sr.last_loss) <= 1e-5 * sr.last_loss,
              "losses %.7f .. %.7f, sequential %.7f .. %.7f", pr.first_loss, pr.last_loss,
              sr.first_loss, sr.last_loss);
    cr_assert(pr.last_loss < pr.first_loss - 0.1, "trained: %.4f -> %.4f", pr.first_loss,
              pr.last_loss);
    train_pipeline_free(&tpl);
    data_free(d);
    plan_free(pl);
    transformer_free(t);
    model_free(m);
}

/* train_plan_check's line for a plan of t (tp x pp x dp) against gpt-mini: -1 and text in
 * the message. */
static void check_refused(transformer *t, int tp, int pp, int dp, const char *text)
{
    plumb_err e = {{0}};
    model *m = model_load(MODEL, &e);
    cr_assert_not_null(m, "%s", e.msg);
    plan *pl = make_plan(t, tp, pp, dp, NULL, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert_eq(train_plan_check(m, MODEL, pl, "plan.json", &e), -1, "accepted: %s", text);
    cr_assert(strstr(e.msg, text), "%s (want %s)", e.msg, text);
    cr_assert_null(strchr(e.msg, '\n'), "one line: %s", e.msg);
    plan_free(pl);
    model_free(m);
}

Test(train_tp_plan, plans_of_another_model)
{
    transformer *t = gpt_mini();
    t->layers = 6; /* more blocks than the model */
    check_refused(t, 2, 2, 2, "plan.json: profile.layers: expected an Embedding, 4 "
                  "TransformerBlocks and an LMHead");
    t->layers = 4;
    t->ffn = 256; /* another MLP width: the blocks' weights differ */
    check_refused(t, 2, 2, 2, "plan.json: profile.layers[1].parameter_bytes: expected 398080");
    t->ffn = 512;
    t->max_positions = t->seq = 128; /* another context */
    check_refused(t, 2, 2, 2, "profile.tokens_per_sample: expected 64");
    t->max_positions = t->seq = 64;
    t->heads = t->kv_heads = 8; /* tp 8 splits 8 heads, not the model's 4 */
    check_refused(t, 8, 1, 1, "gpt-mini.json: layers[1].layers[2].heads: expected a multiple "
                  "of tp 8");
    transformer_free(t);
}

static void set_bf16(layout3d_options *o) { o->precision = DEV_BF16; }
static void set_full(layout3d_options *o) { o->recompute = RECOMPUTE_FULL; }
static void set_full0(layout3d_options *o)
{
    o->recompute = RECOMPUTE_FULL;
    o->checkpoint_layers = 0;
}
static void set_selective(layout3d_options *o) { o->recompute = RECOMPUTE_SELECTIVE; }
static void set_zero(layout3d_options *o) { o->zero = 1; }
static void set_sp_zb(layout3d_options *o) { o->sequence_parallel = 1; o->schedule = SCHED_ZB_H1; }
static void set_sp(layout3d_options *o) { o->sequence_parallel = 1; }

Test(train_tp_plan, what_the_executor_runs_and_refuses)
{
    static const struct { void (*set)(layout3d_options *); const char *field; } cases[] = {
        {set_bf16, "precision: the executor runs plans with"},
        {set_full, "checkpoint_layers: the executor runs plans with"},
        {set_selective, "recompute: the executor runs plans with"},
        {set_zero, "zero: the executor runs plans with"},
        {set_sp_zb, "sequence_parallel: expected false with schedule zb-h1"},
    };
    plumb_err e = {{0}};
    model *m = model_load(MODEL, &e);
    cr_assert_not_null(m, "%s", e.msg);
    dataset *d = data_text(m, NULL, 64, 3, &e);
    cr_assert_not_null(d, "%s", e.msg);
    transformer *t = gpt_mini();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        plan *pl = make_plan(t, 2, 2, 2, cases[k].set, &e);
        cr_assert_not_null(pl, "%s", e.msg);
        train_run_cfg cfg = {.m = m, .train = d, .cfg = {2, 4, train_default_opt(OPT_SGD)},
                             .steps = 2};
        train_pipeline tpl;
        cr_assert_eq(train_from_plan(&cfg, pl, NULL, 0, 4, &tpl, &e), 2, "%s ran", cases[k].field);
        cr_assert(strstr(e.msg, cases[k].field), "%s (want %s)", e.msg, cases[k].field);
        cr_assert_null(tpl.sched);
        plan_free(pl);
    }
    /* full recomputation of whole stages, and sequence parallelism under 1F1B, run */
    void (*ok[])(layout3d_options *) = {set_full0, set_sp};
    for (int k = 0; k < 2; k++) {
        plan *pl = make_plan(t, 2, 2, 2, ok[k], &e);
        cr_assert_not_null(pl, "%s", e.msg);
        cr_assert_eq(train_plan_check(m, MODEL, pl, "plan.json", &e), 0, "%s", e.msg);
        train_run_cfg cfg = {.m = m, .train = d, .cfg = {2, 4, train_default_opt(OPT_SGD)},
                             .steps = 2};
        train_pipeline tpl;
        cr_assert_eq(train_from_plan(&cfg, pl, NULL, 0, 4, &tpl, &e), 0, "%s", e.msg);
        cr_assert_eq(cfg.recompute, k == 0);
        cr_assert_eq(cfg.sp, k == 1);
        train_pipeline_free(&tpl);
        plan_free(pl);
    }
    transformer_free(t);
    data_free(d);
    model_free(m);
}
