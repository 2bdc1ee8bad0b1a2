/* test_sim_whatif.c: `plumb sim`'s what-ifs of a transformer plan's runtime settings
 * (sim_options recompute, checkpoint_layers, zero, tp_overlap, overlap_param_gather,
 * fp8_param_gather, grad_reduce, optimizer_state): each, put into sim_run's view of a plan
 * laid out without it, gives what `plumb plan --model` with the option gives on the same
 * layout (the layout built with the setting and simulated as plan --model simulates it:
 * sim_run_folded), to 1e-9 relative in the iteration and every device's peak memory; and
 * on each layout the setting changes the iteration or the memory (so each check fails
 * without the override).
 * Then the checks plumb sim makes with plan --model's rules (search3d_options_from_plan
 * reads the what-ifs), the engine's range checks, and the names the reports give them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/cluster.h"
#include "core/plan.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "planner/search3d.h"
#include "sim/sim.h"
#include "tests/llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define H100 "profiles/clusters/dgx-h100.json"
#define GPT2 "examples/llm/gpt2.json"
#define LLAMA "examples/llm/nemo/llama2-7b.json"

/* A layout and the runtime plan --model sets on the built plan (its tp_overlap,
 * overlap_param_gather and fp8_param_gather options; the rest are layout3d_options). */
typedef struct layout {
    const char *model, *cluster;
    int tp, pp, dp, gb;
    long long seq;              /* 0: the model's */
    dev_precision precision;
    int recompute, zero;
    dev_precision grad_reduce, optimizer_state;
    int tp_overlap, opg, fp8pg;
    int ckpt_set, ckpt;         /* --checkpoint-layers K given: ckpt; else plan --model's */
} layout;

/* gpt2 at tp 2 x pp 2 x dp 2 on A100s, global batch 16, bf16, every setting its default. */
static layout gpt2_base(void)
{
    return (layout){.model = GPT2, .cluster = A100, .tp = 2, .pp = 2, .dp = 2, .gb = 16,
                    .precision = DEV_BF16, .recompute = RECOMPUTE_NONE,
                    .grad_reduce = DEV_FP32, .optimizer_state = DEV_FP32};
}

/* Llama 2 7B at 1024 tokens on H100s, tp x pp x dp, global batch 16, bf16. */
static layout llama_base(int tp, int pp, int dp)
{
    return (layout){.model = LLAMA, .cluster = H100, .tp = tp, .pp = pp, .dp = dp, .gb = 16,
                    .seq = 1024, .precision = DEV_BF16, .recompute = RECOMPUTE_NONE,
                    .grad_reduce = DEV_FP32, .optimizer_state = DEV_FP32};
}

/* The plan plumb plan --model writes for l (cmd_plan_layout: layout3d_build, then the
 * runtime options set on the built plan). */
static plan *build(const layout *l)
{
    transformer *t = llmfix_model(l->model);
    cluster *c = llmfix_cluster(l->cluster);
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = l->tp, o.pp = l->pp, o.dp = l->dp, o.gpus = l->tp * l->pp * l->dp;
    o.global_batch = l->gb, o.microbatch_size = 1, o.seq = l->seq;
    o.precision = l->precision, o.recompute = l->recompute, o.zero = l->zero;
    o.grad_reduce = l->grad_reduce, o.optimizer_state = l->optimizer_state;
    if (l->ckpt_set) o.checkpoint_layers = l->ckpt;
    plumb_err err = {{0}};
    plan *pl = layout3d_build(t, c, l->cluster, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    pl->tp_overlap = (plan_tp_overlap)l->tp_overlap;
    pl->overlap_param_gather = l->opg;
    pl->fp8_param_gather = l->fp8pg;
    cr_assert_eq(plan_validate(pl, "(layout)", &err), 0, "%s", err.msg);
    transformer_free(t);
    cluster_free(c);
    return pl;
}

static sim_report *run(const plan *pl, const sim_options *o, int folded)
{
    plumb_err err = {{0}};
    sim_report *r = folded ? sim_run_folded(pl, o, 0, &err) : sim_run(pl, o, &err);
    cr_assert_not_null(r, "%s", err.msg);
    return r;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* The check: plan --model with the setting (with, simulated as plan --model does) against
 * the plan without it (base) under the what-if w, as plumb sim runs it (sim_run): the same
 * iteration and peak memory on every device; and the setting changes one of them. */
static void same_as_planned(const layout *with, const layout *base, const sim_options *w,
                            const char *what)
{
    plan *a = build(with), *b = build(base);
    sim_report *planned = run(a, NULL, 1), *asis = run(b, NULL, 0), *wi = run(b, w, 0);
    cr_expect(near(wi->iteration_s, planned->iteration_s), "%s: what-if %.12g s, planned %.12g s",
              what, wi->iteration_s, planned->iteration_s);
    cr_expect(near(wi->peak_memory_bytes, planned->peak_memory_bytes),
              "%s: what-if peak %.0f, planned %.0f", what, wi->peak_memory_bytes,
              planned->peak_memory_bytes);
    cr_assert_eq(wi->ndevices, planned->ndevices, "%s", what);
    for (int i = 0; i < wi->ndevices; i++) {
        cr_expect_eq(wi->devices[i].device, planned->devices[i].device);
        cr_expect(near(wi->devices[i].mem.total, planned->devices[i].mem.total),
                  "%s: device %d: what-if %.0f bytes, planned %.0f", what,
                  wi->devices[i].device, wi->devices[i].mem.total,
                  planned->devices[i].mem.total);
        cr_expect_eq(wi->devices[i].mem.fits, planned->devices[i].mem.fits, "%s", what);
    }
    /* the report's layout figures are the what-if's (the settings line names them) */
    cr_expect_eq(wi->recompute, planned->recompute, "%s", what);
    cr_expect_eq(wi->checkpoint_layers, planned->checkpoint_layers, "%s", what);
    cr_expect_eq(wi->zero, planned->zero, "%s", what);
    cr_expect_eq(wi->grad_reduce, planned->grad_reduce, "%s", what);
    cr_expect_eq(wi->optimizer_state, planned->optimizer_state, "%s", what);
    cr_expect_eq(wi->fp8_param_gather, planned->fp8_param_gather, "%s", what);
    cr_expect(sim_options_has_whatif(&wi->whatif), "%s", what);
    /* the setting matters here: without the override the check above would fail */
    cr_expect(!near(asis->iteration_s, planned->iteration_s) ||
                  !near(asis->peak_memory_bytes, planned->peak_memory_bytes),
              "%s: the plan as written gives the same figures (%.12g s, %.0f bytes): the "
              "check cannot fail", what, asis->iteration_s, asis->peak_memory_bytes);
    sim_report_free(planned);
    sim_report_free(asis);
    sim_report_free(wi);
    plan_free(a);
    plan_free(b);
}

Test(sim_whatif, recompute_full_selective_none)
{
    layout base = gpt2_base(), with = base;
    sim_options w;
    sim_options_init(&w);
    with.recompute = w.recompute = RECOMPUTE_FULL; /* checkpoint_layers 1, plan --model's */
    same_as_planned(&with, &base, &w, "recompute full");
    with.recompute = w.recompute = RECOMPUTE_SELECTIVE;
    same_as_planned(&with, &base, &w, "recompute selective");
    base.recompute = RECOMPUTE_FULL; /* and back: the full plan run without recomputation */
    with.recompute = w.recompute = RECOMPUTE_NONE;
    same_as_planned(&with, &base, &w, "recompute none of a full plan");
}

/* --checkpoint-layers K: a full plan (plan --model's 1) run with K is plan --model
 * --recompute full --checkpoint-layers K (gpt2's 6 blocks a stage: 2 keeps 3 inputs, 0 the
 * stage's alone, 6 one group of all); with --recompute full on a plan without recomputation
 * K applies to the full it asks for; and a plan with K run with another K. The forward runs
 * again whole whatever K, so the peak is what moves (the check's second half). */
Test(sim_whatif, checkpoint_layers)
{
    layout base = gpt2_base(), with;
    base.recompute = RECOMPUTE_FULL;
    sim_options w;
    sim_options_init(&w);
    int ks[] = {2, 0, 6};
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "checkpoint-layers %d of a full plan", ks[i]);
        with = base;
        with.ckpt_set = 1, with.ckpt = w.checkpoint_layers = ks[i];
        same_as_planned(&with, &base, &w, what);
    }
    layout none = gpt2_base();
    with = base;
    with.ckpt_set = 1, with.ckpt = w.checkpoint_layers = 3;
    w.recompute = RECOMPUTE_FULL;
    same_as_planned(&with, &none, &w, "recompute full with checkpoint-layers 3");
    layout two = base;
    two.ckpt_set = 1, two.ckpt = 2;
    sim_options_init(&w);
    w.checkpoint_layers = 1; /* the default, given: a plan with 2 run with 1 */
    same_as_planned(&base, &two, &w, "checkpoint-layers 1 of a plan with 2");
}

Test(sim_whatif, zero)
{
    layout base = gpt2_base(), with = base;
    sim_options w;
    sim_options_init(&w);
    with.zero = w.zero = 1;
    same_as_planned(&with, &base, &w, "zero 1");
    w.zero = 0;
    same_as_planned(&base, &with, &w, "zero 0 of a zero 1 plan");
}

Test(sim_whatif, tp_overlap)
{
    layout base = gpt2_base(), with = base;
    sim_options w;
    sim_options_init(&w);
    with.tp_overlap = w.tp_overlap = TP_OVERLAP_BACKWARD;
    same_as_planned(&with, &base, &w, "tp-overlap backward");
    with.tp_overlap = w.tp_overlap = TP_OVERLAP_FULL;
    same_as_planned(&with, &base, &w, "tp-overlap full");
}

/* The all-gather apart matters where the data-parallel ring is exposed: tp 8 on each of
 * two servers, dp 2 over the network (276 ms against 265 ms). */
Test(sim_whatif, overlap_param_gather)
{
    layout base = llama_base(8, 1, 2), with;
    base.zero = 1;
    with = base;
    sim_options w;
    sim_options_init(&w);
    with.opg = w.overlap_param_gather = 1;
    same_as_planned(&with, &base, &w, "overlap-param-gather");
}

Test(sim_whatif, fp8_param_gather)
{
    layout base = llama_base(2, 2, 2), with;
    base.precision = DEV_FP8, base.zero = 1;
    with = base;
    sim_options w;
    sim_options_init(&w);
    with.fp8pg = w.fp8_param_gather = 1;
    same_as_planned(&with, &base, &w, "fp8-param-gather");
}

/* plumb sim --no-overlap-param-gather and --no-fp8-param-gather (0, not the plan's): a plan
 * with the setting run without it is plan --model's plan without it, alone and with
 * --zero 0 (which the rules take only then: cmd_sim's line says to add them). */
Test(sim_whatif, overlap_param_gather_off)
{
    layout without = llama_base(8, 1, 2), with;
    without.zero = 1;
    with = without;
    with.opg = 1;
    sim_options w;
    sim_options_init(&w);
    w.overlap_param_gather = 0;
    same_as_planned(&without, &with, &w, "no-overlap-param-gather");
    without.zero = w.zero = 0;
    same_as_planned(&without, &with, &w, "zero 0 with no-overlap-param-gather");
}

Test(sim_whatif, fp8_param_gather_off)
{
    layout without = llama_base(2, 2, 2), with;
    without.precision = DEV_FP8, without.zero = 1;
    with = without;
    with.fp8pg = 1;
    sim_options w;
    sim_options_init(&w);
    w.fp8_param_gather = 0;
    same_as_planned(&without, &with, &w, "no-fp8-param-gather");
    without.zero = w.zero = 0;
    same_as_planned(&without, &with, &w, "zero 0 with no-fp8-param-gather");
}

Test(sim_whatif, grad_reduce_and_optimizer_state)
{
    layout base = gpt2_base(), with = base;
    sim_options w;
    sim_options_init(&w);
    with.grad_reduce = DEV_BF16, w.grad_reduce = DEV_BF16;
    same_as_planned(&with, &base, &w, "grad-reduce bf16");
    sim_options_init(&w);
    with = base;
    with.optimizer_state = DEV_BF16, w.optimizer_state = DEV_BF16;
    same_as_planned(&with, &base, &w, "optimizer-state bf16");
    /* both at once, on a zero 1 plan with full recomputation */
    base.zero = 1, base.recompute = RECOMPUTE_FULL;
    with = base;
    with.grad_reduce = with.optimizer_state = DEV_BF16;
    w.grad_reduce = w.optimizer_state = DEV_BF16;
    same_as_planned(&with, &base, &w, "grad-reduce and optimizer-state bf16");
}

/* plumb sim's check (cmd_sim.c runtime_ok): search3d_options_from_plan reads the what-ifs
 * and search3d_runtime_check refuses what plan --model refuses, with its line. */
Test(sim_whatif, runtime_check_reads_the_whatifs)
{
    layout l = gpt2_base();
    plan *pl = build(&l);
    sim_options w;
    search3d_options so;
    plumb_err err;
    /* the all-gather apart without zero 1 */
    sim_options_init(&w);
    w.overlap_param_gather = 1;
    search3d_options_from_plan(pl, &w, &so);
    cr_expect_eq(so.overlap_param_gather, 1);
    err_clear(&err);
    cr_expect_neq(search3d_runtime_check(&so, &err), 0);
    cr_expect(strstr(err.msg, "--overlap-param-gather: belongs to --zero 1"), "%s", err.msg);
    w.zero = 1; /* with it: accepted */
    search3d_options_from_plan(pl, &w, &so);
    err_clear(&err);
    cr_expect_eq(search3d_runtime_check(&so, &err), 0, "%s", err.msg);
    /* FP8 primary weights at bf16 */
    sim_options_init(&w);
    w.fp8_param_gather = 1, w.zero = 1;
    search3d_options_from_plan(pl, &w, &so);
    err_clear(&err);
    cr_expect_neq(search3d_runtime_check(&so, &err), 0);
    cr_expect(strstr(err.msg, "--fp8-param-gather: belongs to --precision fp8"), "%s", err.msg);
    /* recompute: the view's checkpoints (full from none: 1; then none: 0) */
    sim_options_init(&w);
    w.recompute = RECOMPUTE_FULL;
    search3d_options_from_plan(pl, &w, &so);
    cr_expect_eq(so.recompute, RECOMPUTE_FULL);
    cr_expect_eq(so.checkpoint_layers, 1);
    plan view;
    sim_options_view(pl, &w, &view);
    cr_expect_eq(view.checkpoint_layers, 1);
    w.recompute = RECOMPUTE_SELECTIVE;
    sim_options_view(pl, &w, &view);
    cr_expect_eq(view.checkpoint_layers, 0);
    cr_expect_eq(view.recompute, RECOMPUTE_SELECTIVE);
    plan_free(pl);
}

/* plumb sim's --checkpoint-layers check (cmd_sim.c runtime_ok): the view's interval
 * against its recompute and the plan's stages, plan --model's owner and lines
 * (plan_checkpoint_check): over the 6 blocks of gpt2's stages, or under a recompute not
 * full (the plan's none, or selective asked for), refused; full's own taken. */
Test(sim_whatif, checkpoint_layers_checked_as_plan_model)
{
    layout l = gpt2_base();
    plan *none = build(&l);
    l.recompute = RECOMPUTE_FULL;
    plan *full = build(&l);
    cr_assert_eq(plan_blocks_most(full), 6);
    struct { plan *pl; int rc, k; const char *want; } c[] = {
        {full, -1, 7, "--checkpoint-layers: expected at most the 6 blocks of a virtual stage "
                      "(got 7)"},
        {none, RECOMPUTE_FULL, 7, "--checkpoint-layers: expected at most the 6 blocks"},
        {none, -1, 2, "--checkpoint-layers: belongs to --recompute full"},
        {full, RECOMPUTE_SELECTIVE, 1, "--checkpoint-layers: belongs to --recompute full"},
        {full, -1, 6, NULL}, {full, -1, 0, NULL}, {none, RECOMPUTE_FULL, 6, NULL},
        {full, RECOMPUTE_NONE, -1, NULL}, /* none's own 0 */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        sim_options w;
        sim_options_init(&w);
        w.recompute = c[i].rc, w.checkpoint_layers = c[i].k;
        plan view;
        sim_options_view(c[i].pl, &w, &view);
        if (c[i].k >= 0) cr_expect_eq(view.checkpoint_layers, c[i].k, "case %zu", i);
        plumb_err err;
        err_clear(&err);
        int rc = plan_checkpoint_check(view.recompute, view.checkpoint_layers,
                                       plan_blocks_most(c[i].pl), NULL, &err);
        if (c[i].want)
            cr_expect(rc && strstr(err.msg, c[i].want) == err.msg, "case %zu: %s", i, err.msg);
        else
            cr_expect_eq(rc, 0, "case %zu: %s", i, err.msg);
    }
    /* the engine's range: -1 (the plan's) or 0 .. the profile's layers */
    sim_options w;
    sim_options_init(&w);
    cr_expect_not(sim_options_has_runtime(&w));
    w.checkpoint_layers = 2;
    cr_expect(sim_options_has_runtime(&w) && sim_options_has_whatif(&w));
    w.checkpoint_layers = -2;
    plumb_err err;
    err_clear(&err);
    sim_report *r = sim_run(full, &w, &err);
    cr_expect_null(r);
    sim_report_free(r);
    cr_expect(strstr(err.msg, "checkpoint_layers"), "%s", err.msg);
    plan_free(none);
    plan_free(full);
}

/* The engine takes each setting's range only; a bad value is an error naming the field. */
Test(sim_whatif, out_of_range)
{
    layout l = gpt2_base();
    plan *pl = build(&l);
    plumb_err err;
    int *fields[7];
    sim_options w;
    sim_options_init(&w);
    fields[0] = &w.recompute, fields[1] = &w.zero, fields[2] = &w.tp_overlap;
    fields[3] = &w.overlap_param_gather, fields[4] = &w.fp8_param_gather;
    fields[5] = &w.grad_reduce, fields[6] = &w.optimizer_state;
    const char *names[7] = {"recompute", "zero", "tp_overlap", "overlap_param_gather",
                            "fp8_param_gather", "grad_reduce", "optimizer_state"};
    for (int i = 0; i < 7; i++) {
        sim_options_init(&w);
        cr_expect_not(sim_options_has_whatif(&w));
        *fields[i] = i >= 5 ? DEV_FP16 : 3;
        cr_expect(sim_options_has_whatif(&w), "%s", names[i]);
        err_clear(&err);
        sim_report *r = sim_run(pl, &w, &err);
        cr_expect_null(r, "%s = %d accepted", names[i], *fields[i]);
        sim_report_free(r);
        cr_expect(strstr(err.msg, names[i]), "%s: %s", names[i], err.msg);
    }
    plan_free(pl);
}

/* The text report's what-ifs line and the JSON's "whatif" name them as plan --model's
 * options and the plan file's fields. */
Test(sim_whatif, reports_name_them)
{
    layout l = gpt2_base();
    plan *pl = build(&l);
    sim_options w;
    sim_options_init(&w);
    w.p2p_whole = 1;
    w.recompute = RECOMPUTE_FULL, w.checkpoint_layers = 2, w.zero = 1;
    w.tp_overlap = TP_OVERLAP_FULL;
    w.overlap_param_gather = 1, w.grad_reduce = DEV_BF16, w.optimizer_state = DEV_BF16;
    sim_report *r = run(pl, &w, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    cr_assert_not_null(m);
    sim_print_report(r, NULL, m);
    fclose(m);
    const char *want = "what-ifs        p2p-split whole; recompute full; checkpoint-layers 2; "
                       "zero 1; tp-overlap full; overlap-param-gather; grad-reduce bf16; "
                       "optimizer-state bf16 (instead of the plan as written)\n";
    cr_expect(strstr(text, want), "%s", text);
    free(text);
    cJSON *j = sim_report_to_json(r, NULL, "p.json");
    cr_assert_not_null(j);
    char *js = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "whatif"));
    cr_expect_str_eq(js, "{\"p2p_split\":\"whole\",\"recompute\":\"full\","
                         "\"checkpoint_layers\":2,\"zero\":1,"
                         "\"tp_overlap\":\"full\",\"overlap_param_gather\":true,"
                         "\"grad_reduce\":\"bf16\",\"optimizer_state\":\"bf16\"}");
    free(js);
    cJSON_Delete(j);
    sim_report_free(r);
    plan_free(pl);
}
