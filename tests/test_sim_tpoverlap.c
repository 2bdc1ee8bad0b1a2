/* test_sim_tpoverlap.c: the plan's tp_overlap setting (tensor-parallel collectives against
 * the GEMMs, sim/cost.c) against figures computed here by hand: per layer, c its ring
 * collectives' seconds in a pass (2 (t - 1) / t x bytes / bandwidth + 2 (t - 1) x latency
 * each) and g the pass's compute; "backward" blocks max(0, c - W) of the backward and all
 * of c in F and in a split backward's I; "full" blocks max(0, c - g) + min(c, g) / t in each
 * pass (with sequence parallelism "backward" hides half of the backward's, the input
 * gradients' reduce-scatters). One layer's collectives are shorter than its passes, the other's longer, so both
 * branches count. Also the plan file's round trip and its refusals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

#define BW0 200e9   /* level 0: 1600 Gbit/s */
#define LAT0 2e-6
#define SMALL 8e6   /* layer 0's collective bytes at the profiled minibatch */
#define LARGE 8e8   /* layer 1's */

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(b) > 1e-300 ? fabs(b) : 1);
}

/* One stage of two layers (F 1 ms, B 2 ms per layer at 32 samples, no I/W split: half
 * each), microbatches of 16 samples, tp = 2 on devices 0-1 of one server; each layer 2
 * forward and 2 backward collectives, layer 0 of SMALL bytes, layer 1 of LARGE. */
static plan *overlap_plan(void)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.layers_per_stage = 2;
    s.devices_per_server = 4;
    s.servers = 1;
    s.bw_gbit[0] = BW0 * 8 / 1e9;
    s.latency_us[0] = LAT0 * 1e6;
    s.microbatch_size = 16;
    s.microbatches = 1;
    plan *pl = synth_plan(&s);
    const double bytes[2] = {SMALL, LARGE};
    synth_set_tp(pl, 2, bytes, 2, 2, 2);
    int devs[1] = {0};
    cr_assert_eq(plan_set_stage(pl, 0, 0, 1, 1, devs), 0);
    return pl;
}

/* One collective of `bytes` on the 2-device ring. */
static double ring2(double bytes)
{
    return bytes / BW0 + 2 * LAT0;
}

static double max0(double x) { return x > 0 ? x : 0; }

Test(sim_tpoverlap, exposed_time_by_hand)
{
    plan *pl = overlap_plan();
    double scale = 16.0 / 32, f = 1e-3 * scale, in = 1e-3 * scale, w = 1e-3 * scale;
    double c0 = 2 * ring2(SMALL * scale), c1 = 2 * ring2(LARGE * scale);
    cr_assert(c0 < f && c1 > f + in, "the two layers fall on both sides: %g %g", c0, c1);
    struct { plan_tp_overlap mode; double f, b, i; } want[] = {
        {TP_OVERLAP_NONE, c0 + c1, c0 + c1, c0 + c1},
        {TP_OVERLAP_BACKWARD, c0 + c1, max0(c0 - w) + max0(c1 - w), c0 + c1},
        {TP_OVERLAP_FULL, c0 / 2 + (c1 - f) + f / 2,
         c0 / 2 + (c1 - (in + w)) + (in + w) / 2, c0 / 2 + (c1 - in) + in / 2},
    };
    for (int k = 0; k < 3; k++) {
        pl->tp_overlap = want[k].mode;
        plumb_err e;
        cr_assert_eq(plan_validate(pl, "p.json", &e), 0, "%s", e.msg);
        sim_report *r = synth_run(pl, NULL);
        const sim_stage_report *g = &r->stages[0];
        const char *m = plan_tp_overlap_name(want[k].mode);
        cr_expect(close_to(g->tp_comm_forward_s, want[k].f), "%s: F %g, want %g", m,
                  g->tp_comm_forward_s, want[k].f);
        cr_expect(close_to(g->tp_comm_backward_s, want[k].b), "%s: B %g, want %g", m,
                  g->tp_comm_backward_s, want[k].b);
        cr_expect(close_to(g->forward_s, 2 * f + want[k].f), "%s: forward_s %g", m,
                  g->forward_s);
        cr_expect(close_to(g->backward_s, 2 * (in + w) + want[k].b), "%s: backward_s %g", m,
                  g->backward_s);
        cr_expect(close_to(g->input_grad_s, 2 * in + want[k].i), "%s: input_grad_s %g", m,
                  g->input_grad_s);
        cr_expect(close_to(g->weight_grad_s, 2 * w), "%s: W has no collective", m);
        /* one microbatch, one stage: the iteration is F then B (no step time: sgd of
         * zero-byte parameters is not asserted, only the difference to none below) */
        sim_report_free(r);
    }
    /* backward with sequence parallelism: half of each layer's backward collectives are
     * the input gradients' reduce-scatters (under W), half the output gradients'
     * all-gathers (blocking) */
    pl->prof->sequence_parallel = pl->sequence_parallel = 1;
    pl->tp_overlap = TP_OVERLAP_BACKWARD;
    sim_report *sp = synth_run(pl, NULL);
    double bsp = c0 / 2 + max0(c0 / 2 - w) + c1 / 2 + max0(c1 / 2 - w);
    cr_expect(close_to(sp->stages[0].tp_comm_backward_s, bsp), "backward, SP: B %g, want %g",
              sp->stages[0].tp_comm_backward_s, bsp);
    cr_expect(close_to(sp->stages[0].tp_comm_forward_s, c0 + c1));
    sim_report_free(sp);
    pl->prof->sequence_parallel = pl->sequence_parallel = 0;
    /* the overlap shortens the iteration by what it hides */
    pl->tp_overlap = TP_OVERLAP_NONE;
    sim_report *a = synth_run(pl, NULL);
    pl->tp_overlap = TP_OVERLAP_FULL;
    sim_report *b = synth_run(pl, NULL);
    double hidden = (want[0].f - want[2].f) + (want[0].b - want[2].b);
    cr_expect(close_to(a->iteration_s - b->iteration_s, hidden), "%g against %g",
              a->iteration_s - b->iteration_s, hidden);
    sim_report_free(a);
    sim_report_free(b);
    plan_free(pl);
}

/* The file keeps the setting ("tp_overlap": "backward"), plan_equal compares it, none is
 * left out of the file; a bad value and a value other than none with tp 1 are refused
 * with the field's name. */
Test(sim_tpoverlap, plan_file_round_trip_and_refusals)
{
    plan *pl = overlap_plan();
    plumb_err e;
    pl->tp_overlap = TP_OVERLAP_BACKWARD;
    cJSON *j = plan_to_json(pl);
    cr_assert_not_null(j);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "tp_overlap");
    cr_assert(cJSON_IsString(v) && !strcmp(v->valuestring, "backward"));
    plan *back = plan_from_json(j, "p.json", &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_expect_eq(back->tp_overlap, TP_OVERLAP_BACKWARD);
    cr_expect(plan_equal(pl, back));
    back->tp_overlap = TP_OVERLAP_FULL;
    cr_expect(!plan_equal(pl, back), "plan_equal compares the setting");
    plan_free(back);
    /* a bad value: one line naming the field */
    cJSON_ReplaceItemInObjectCaseSensitive(j, "tp_overlap", cJSON_CreateString("some"));
    cr_expect_null(plan_from_json(j, "p.json", &e));
    cr_expect(strstr(e.msg, "tp_overlap: expected none, backward or full (got \"some\")"),
              "%s", e.msg);
    cJSON_ReplaceItemInObjectCaseSensitive(j, "tp_overlap", cJSON_CreateNumber(1));
    cr_expect_null(plan_from_json(j, "p.json", &e));
    cr_expect(strstr(e.msg, "tp_overlap: expected none, backward or full"), "%s", e.msg);
    cJSON_Delete(j);
    /* none is the default and stays out of the file */
    pl->tp_overlap = TP_OVERLAP_NONE;
    j = plan_to_json(pl);
    cr_assert_not_null(j);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "tp_overlap"));
    cJSON_Delete(j);
    /* nothing to overlap at tp 1 */
    pl->prof->tp = pl->tp = 1;
    for (int l = 0; l < 2; l++) {
        profile_layer *L = &pl->prof->layers[l];
        L->tp_collective_bytes = 0;
        L->tp_forward_collectives = L->tp_backward_collectives = 0;
    }
    pl->tp_overlap = TP_OVERLAP_NONE;
    cr_expect_eq(plan_validate(pl, "p.json", &e), 0, "%s", e.msg);
    pl->tp_overlap = TP_OVERLAP_FULL;
    cr_expect_neq(plan_validate(pl, "p.json", &e), 0);
    cr_expect(strstr(e.msg, "tp_overlap: expected none with tp 1"), "%s", e.msg);
    plan_free(pl);
}
