/* test_step_copy.c: the optimizer's fp32 copy of 16-bit gradients as a moment of its own
 * (sim/memory.c, docs/sim.md "16-bit gradients and optimizer state"): made in the step and
 * freed by the next iteration's zero_grad before its forwards, it never coexists with the
 * activations. A device's peak is the larger of its run's moment (weights, gradients,
 * resident optimizer state, activations, buffers, scratch) and its step's (weights,
 * gradients, optimizer state, scratch, kept inputs and the copy); the layout search's
 * estimate reads the same formula. gpt-mini (examples/llm) on DGX-H100, pp 4 x dp 2, ZeRO-1,
 * bf16 weights with bf16 gradients: per parameter 12 / 2 bytes of resident fp32 state
 * and 4 / 2 of copy. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "planner/search3d.h"
#include "sim/memory.h"
#include "sim/sim.h"
#include "llmfix.h"

#define H100 "profiles/clusters/dgx-h100.json"
#define MINI "examples/llm/gpt-mini.json"

/* Each test's model and cluster (Criterion runs each test in its own process). */
static transformer *t;
static cluster *c;

static void setup(void)
{
    t = llmfix_model(MINI);
    c = llmfix_cluster(H100);
}

static void teardown(void)
{
    cluster_free(c);
    transformer_free(t);
}

/* gpt-mini at pp 4 x dp 2, microbatch 1, global batch 8, ZeRO-1, precision prec with
 * gradients in grad, recompute rc: the plan (the caller frees it). */
static plan *mini_plan(dev_precision prec, dev_precision grad, int rc)
{
    plumb_err err = {{0}};
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 8, o.tp = 1, o.pp = 4, o.dp = 2;
    o.global_batch = 8, o.microbatch_size = 1, o.recompute = rc;
    o.zero = 1, o.precision = prec, o.grad_reduce = grad;
    plan *pl = layout3d_build(t, c, H100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    return pl;
}

/* sim_run's report of pl under the default options; fails the test, naming label, when it
 * refuses. The caller frees it with sim_report_free. */
static sim_report *run_ok(const plan *pl, const char *label)
{
    plumb_err err = {{0}};
    sim_report *r = sim_run(pl, NULL, &err);
    cr_assert_not_null(r, "%s: %s", label, err.msg);
    return r;
}

/* r's text report (sim_print_report); the caller frees it. */
static char *report_text(const sim_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    sim_print_report(r, NULL, f);
    fclose(f);
    return buf;
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-6; }

/* The run's moment of m: every part but the step's copy. */
static double run_moment(const sim_memory *m)
{
    return m->weights + m->gradients + m->optimizer + m->activations + m->buffers +
           m->workspace + m->staging;
}

/* The step's moment of m: the resident state, scratch, kept inputs and the copy. */
static double step_moment(const sim_memory *m)
{
    return m->weights + m->gradients + m->optimizer + m->workspace + m->staging +
           m->kept_inputs + m->step_transient;
}

/* Checks device i's state of r by hand (e bytes an element; 16-bit gradients): gradients
 * e, resident optimizer (4 master + 8 moments) / 2, copy 4 / 2 per parameter. */
static void check_state(const sim_report *r, int i, double e)
{
    const sim_memory *m = &r->devices[i].mem;
    double n = m->weights / e; /* parameters on the device */
    cr_expect(close_to(m->gradients, e * n), "device %d: gradients %g", i, m->gradients);
    cr_expect(close_to(m->optimizer, 12 * n / 2), "device %d: optimizer %g, wanted %g (the "
              "copy not in it)", i, m->optimizer, 12 * n / 2);
    cr_expect(close_to(m->step_transient, 4 * n / 2), "device %d: copy %g, wanted %g", i,
              m->step_transient, 4 * n / 2);
}

/* The estimate's peak (search3d_estimate) against the simulator's. */
static void check_estimate(plan *pl, const sim_report *r)
{
    plumb_err err = {{0}};
    search3d_est e;
    cr_assert_eq(search3d_estimate(pl, &e, &err), 0, "%s", err.msg);
    cr_expect(close_to(e.peak_bytes, r->peak_memory_bytes), "estimate %.0f, simulator %.0f",
              e.peak_bytes, r->peak_memory_bytes);
}

/* Without recompute the first rank's activations (1.18 MB) outweigh its copy (0.48 MB):
 * its peak is exactly the run's moment, the step's below it; with bf16 and fp16 alike. */
Test(step_copy, activations_peak_excludes_the_copy, .init = setup, .fini = teardown)
{
    dev_precision ps[] = {DEV_BF16, DEV_FP16};
    for (int k = 0; k < 2; k++) {
        /* fp16 keeps fp16 gradients under the default grad_reduce */
        plan *pl = mini_plan(ps[k], k ? DEV_FP32 : DEV_BF16, RECOMPUTE_NONE);
        sim_report *r = run_ok(pl, dev_precision_name(ps[k]));
        const sim_memory *m = &r->devices[0].mem;
        check_state(r, 0, 2);
        cr_expect(m->step_transient > 0 && m->step_transient < m->activations,
                  "copy %g, activations %g", m->step_transient, m->activations);
        cr_expect_eq(m->total, run_moment(m), "%s: peak %.0f, run's moment %.0f",
                     dev_precision_name(ps[k]), m->total, run_moment(m));
        cr_expect(step_moment(m) < m->total, "step %.0f, peak %.0f", step_moment(m), m->total);
        cr_expect(close_to(sim_memory_step_total(m), step_moment(m)));
        check_estimate(pl, r);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* With full recomputation the activations (0.36 MB on rank 1) and buffers are smaller
 * than the copy (0.40 MB): every device peaks at the step, and the run's moment is below. */
Test(step_copy, step_moment_is_the_peak, .init = setup, .fini = teardown)
{
    plan *pl = mini_plan(DEV_BF16, DEV_BF16, RECOMPUTE_FULL);
    sim_report *r = run_ok(pl, "bf16 gradients, full recompute");
    for (int i = 0; i < r->ndevices; i++) {
        const sim_memory *m = &r->devices[i].mem;
        check_state(r, i, 2);
        cr_expect_eq(m->total, step_moment(m), "device %d: peak %.0f, step's moment %.0f", i,
                     m->total, step_moment(m));
        cr_expect(run_moment(m) < m->total, "device %d: run %.0f, peak %.0f", i,
                  run_moment(m), m->total);
    }
    check_estimate(pl, r);
    sim_report_free(r);
    plan_free(pl);
}

/* fp32 gradients make no copy: no step moment, the peak the run's, and the report's text
 * has no step line (the JSON leaves out step_transient_bytes alike, sim/report_json.c). */
Test(step_copy, fp32_gradients_make_no_copy, .init = setup, .fini = teardown)
{
    plan *pl = mini_plan(DEV_BF16, DEV_FP32, RECOMPUTE_FULL);
    sim_report *r = run_ok(pl, "fp32 gradients");
    for (int i = 0; i < r->ndevices; i++) {
        const sim_memory *m = &r->devices[i].mem;
        cr_expect_eq(m->step_transient, 0);
        cr_expect_eq(sim_memory_step_total(m), 0);
        cr_expect_eq(m->total, run_moment(m));
    }
    char *buf = report_text(r);
    cr_expect_null(strstr(buf, "at the step"), "%s", buf);
    free(buf);
    sim_report_free(r);
    plan_free(pl);
}

/* The text report's memory line names the step's moment where there is a copy. */
Test(step_copy, text_report_names_the_step, .init = setup, .fini = teardown)
{
    plan *pl = mini_plan(DEV_BF16, DEV_BF16, RECOMPUTE_FULL);
    sim_report *r = run_ok(pl, "bf16 gradients");
    char *buf = report_text(r);
    cr_expect_not_null(strstr(buf, "fp32 gradient copy"), "%s", buf);
    free(buf);
    sim_report_free(r);
    plan_free(pl);
}
