/* test_sim.c: the simulator against closed-form pipeline results. Each test states its
 * formula; plans are synthetic (sim/synth.h): a chain of equal layers cut into equal stages,
 * F = forward and B = backward time of one stage for one microbatch. "Free communication"
 * means zero activation bytes and zero latency. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/engine.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"
#include "bench/synth_plan.h"

/* Free communication, and no parameters (so a free optimizer step): the closed forms of
 * the pipeline papers. Tests that set parameters add the step, stages[].step_s. */
static void free_comm(sim_synth *s)
{
    s->activation_bytes = 0;
    s->latency_us[0] = s->latency_us[1] = 0;
    s->parameter_bytes = 0;
}

/* sim_synth's defaults without communication (free_comm) under schedule kind on nstages
 * stages of m microbatches. */
static sim_synth quiet_synth(sched_kind kind, int nstages, int m)
{
    sim_synth s;
    sim_synth_init(&s);
    free_comm(&s);
    s.schedule = kind;
    s.nstages = nstages;
    s.microbatches = m;
    return s;
}

/* |a - b| within a relative tolerance (absolute when b is about 0). */
static int near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (fabs(b) > 1e-12 ? fabs(b) : 1);
}
#define NEAR(a, b, tol) near((a), (b), (tol))

/* GPipe, p equal stages, m microbatches, free communication:
 * iteration = (m + p - 1)(F + B), bubble = (p - 1) / (m + p - 1). */
Test(sim, gpipe_bubble)
{
    sim_synth s;
    sim_synth_init(&s);
    free_comm(&s);
    s.schedule = SCHED_GPIPE;
    int cases[][2] = {{4, 8}, {4, 4}, {8, 16}, {2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.nstages = cases[i][0];
        s.microbatches = cases[i][1];
        plan *pl = synth_plan(&s);
        sim_report *r = synth_run(pl, NULL);
        double p = s.nstages, m = s.microbatches;
        cr_expect(NEAR(r->iteration_s, (m + p - 1) * 3e-3, 1e-9), "p=%g m=%g: %g s", p, m,
                  r->iteration_s);
        cr_expect(NEAR(r->bubble_fraction, (p - 1) / (m + p - 1), 1e-9),
                  "p=%g m=%g: bubble %g", p, m, r->bubble_fraction);
        cr_expect(NEAR(r->samples_per_s, m * 32 / ((m + p - 1) * 3e-3), 1e-9));
        sim_report_free(r);
        plan_free(pl);
    }
}

/* 1F1B with flush (PipeDream-Flush): the same bubble (p - 1) / (m + p - 1); peak in-flight
 * activations at stage 0 are p (GPipe: m). */
Test(sim, one_f_one_b_bubble_and_inflight)
{
    sim_synth s = quiet_synth(SCHED_1F1B_FLUSH, 4, 12);
    plan *pl = synth_plan(&s);
    sim_report *r = synth_run(pl, NULL);
    cr_expect(NEAR(r->bubble_fraction, 3.0 / 15, 1e-9), "bubble %g", r->bubble_fraction);
    cr_expect(NEAR(r->iteration_s, 15 * 3e-3, 1e-9), "iteration %g", r->iteration_s);
    cr_expect_eq(r->devices[0].max_inflight, 4);
    cr_expect_eq(r->devices[3].max_inflight, 1);
    sim_report_free(r);

    sim_options o;
    sim_options_init(&o);
    o.schedule = SCHED_GPIPE;
    r = synth_run(pl, &o);
    cr_expect_eq(r->devices[0].max_inflight, 12);
    cr_expect_eq(r->devices[3].max_inflight, 12);
    sim_report_free(r);
    plan_free(pl);
}

/* Interleaved 1F1B, v chunks per device, p devices, m microbatches (m a multiple of p):
 * idle time / compute time = (p - 1) / (v m) (Narayanan et al. 2021, eq. for t_pb / t_id),
 * i.e. bubble_fraction = x / (1 + x) with x = (p - 1) / (v m). */
Test(sim, interleaved_bubble)
{
    sim_synth s;
    sim_synth_init(&s);
    free_comm(&s);
    s.schedule = SCHED_INTERLEAVED;
    int cases[][3] = {{4, 2, 8}, {4, 2, 16}, {2, 3, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int p = cases[i][0], v = cases[i][1], m = cases[i][2];
        s.nstages = p * v;
        s.chunks = v;
        s.microbatches = m;
        plan *pl = synth_plan(&s);
        sim_report *r = synth_run(pl, NULL);
        double x = (double)(p - 1) / (v * m);
        cr_expect(NEAR(r->bubble_fraction, x / (1 + x), 1e-6), "p=%d v=%d m=%d: %g vs %g", p,
                  v, m, r->bubble_fraction, x / (1 + x));
        sim_report_free(r);
        plan_free(pl);
    }
}

/* ZB-H1 with F = I = W (B = I + W): its bubble time is (p - 1)(F + I - W) = (p - 1) F
 * against 1F1B's (p - 1)(F + B) = 3 (p - 1) F: about a third. */
Test(sim, zb_h1_third_of_1f1b)
{
    sim_synth s = quiet_synth(SCHED_1F1B_FLUSH, 4, 8);
    s.forward_ms = 1;
    s.backward_ms = 2;
    s.input_ms = s.weight_ms = 1;
    plan *pl = synth_plan(&s);
    sim_report *flush = synth_run(pl, NULL);
    sim_options o;
    sim_options_init(&o);
    o.schedule = SCHED_ZB_H1;
    sim_report *zb = synth_run(pl, &o);
    double idle_1f1b = flush->iteration_s - 8 * 3e-3, idle_zb = zb->iteration_s - 8 * 3e-3;
    cr_expect(NEAR(idle_1f1b, 3 * 3e-3, 1e-9), "1f1b bubble time %g", idle_1f1b);
    cr_expect(idle_zb > 0.25 * idle_1f1b && idle_zb < 0.45 * idle_1f1b,
              "zb-h1 bubble time %g vs 1f1b %g", idle_zb, idle_1f1b);
    cr_expect(zb->bubble_fraction < flush->bubble_fraction);
    sim_report_free(flush);
    sim_report_free(zb);
    plan_free(pl);
}

/* PipeDream (asynchronous 1F1B with weight stashing): in steady state one microbatch
 * leaves every max_s(F_s + B_s); so an iteration of m microbatches takes m x max stage
 * time. Stage s (of p) keeps p - s weight versions; 2BW at most 2. */
Test(sim, pipedream_steady_state_and_versions)
{
    sim_synth s = quiet_synth(SCHED_PIPEDREAM, 4, 16);
    s.parameter_bytes = 1e6;
    plan *pl = synth_plan(&s);
    /* make stage 2 the slowest: F = 2 ms, B = 4 ms, max stage time 6 ms */
    pl->prof->layers[2].forward_ms = 2;
    pl->prof->layers[2].backward_ms = 4;
    sim_options o;
    sim_options_init(&o);
    o.iterations = 4;
    sim_report *r = synth_run(pl, &o);
    /* PipeDream steps after every backward: stage 2's cycle is F + B + its step, the
     * step sgd's 3 x 1 MB at the default 0.9 TB/s */
    double step = r->stages[2].step_s;
    cr_expect(NEAR(step, 3e6 / 0.9e12, 1e-9), "step %g s", step);
    cr_expect(NEAR(r->iteration_s, 16 * (6e-3 + step), 1e-6), "iteration %g s",
              r->iteration_s);
    cr_expect(NEAR(r->samples_per_s, 32 / (6e-3 + step), 1e-6), "%g samples/s",
              r->samples_per_s);
    for (int st = 0; st < 4; st++) {
        cr_expect_eq(r->stages[st].weight_versions, 4 - st, "stage %d: %d versions", st,
                     r->stages[st].weight_versions);
        cr_expect(NEAR(r->devices[st].mem.weights, (4 - st) * 1e6, 1e-12));
    }
    sim_report_free(r);
    o.schedule = SCHED_2BW;
    r = synth_run(pl, &o);
    for (int st = 0; st < 4; st++)
        cr_expect(r->stages[st].weight_versions <= 2 && r->stages[st].weight_versions >= 1,
                  "2bw stage %d: %d versions", st, r->stages[st].weight_versions);
    cr_expect(r->devices[0].mem.weights <= 2e6 + 1);
    sim_report_free(r);
    plan_free(pl);
}

/* One stage on one device: an iteration is m x sum over layers of (F + B), scaled from the
 * profiled minibatch to the microbatch and divided by the device speed. */
Test(sim, one_stage_sums_layers)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.layers_per_stage = 3;
    s.microbatches = 5;
    s.microbatch_size = 16; /* half the profiled minibatch of 32 */
    s.speed = 2;
    s.parameter_bytes = 0;  /* no optimizer step */
    plan *pl = synth_plan(&s);
    double f[3] = {1, 2, 3}, b[3] = {2, 5, 7}, sum = 0;
    for (int i = 0; i < 3; i++) {
        pl->prof->layers[i].forward_ms = f[i];
        pl->prof->layers[i].backward_ms = b[i];
        sum += f[i] + b[i];
    }
    sim_report *r = synth_run(pl, NULL);
    double want = 5 * sum * 1e-3 * (16.0 / 32) / 2;
    cr_expect(NEAR(r->iteration_s, want, 1e-9), "%g vs %g", r->iteration_s, want);
    cr_expect(NEAR(r->bubble_fraction, 0, 1e-9) || r->bubble_fraction < 1e-9);
    cr_expect(NEAR(r->stages[0].forward_s, 6e-3 * 0.25, 1e-9));
    cr_expect_eq(r->nlinks, 0);
    sim_report_free(r);
    plan_free(pl);
}

/* Ring all-reduce of P bytes among r replicas over links of bandwidth W (one device per
 * server, zero latency): 2 (r - 1) / r x P / W. One stage replicated r times, m = r
 * microbatches (one per replica, round robin); one gradient bucket: the all-reduce cannot
 * overlap, so iteration = F + B + 2 (r - 1) / r x P / W. Each replica sends 2 (r - 1) / r x P
 * to the next in the ring per iteration. */
Test(sim, ring_allreduce)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.devices_per_server = 1;
    s.bw_gbit[1] = 8;                 /* 1e9 bytes/s */
    s.parameter_bytes = 10e6;         /* below one 25 MiB bucket */
    int rs[] = {2, 4, 8};
    for (size_t i = 0; i < 3; i++) {
        int r = rs[i];
        s.replicas = r;
        s.microbatches = r;
        plan *pl = synth_plan(&s);
        sim_report *rep = synth_run(pl, NULL);
        double ar = 2.0 * (r - 1) / r * 10e6 / 1e9;
        cr_expect(NEAR(rep->stages[0].allreduce_s, ar, 1e-9), "r=%d: %g vs %g", r,
                  rep->stages[0].allreduce_s, ar);
        double step = rep->stages[0].step_s;  /* after the all-reduce */
        cr_expect(NEAR(step, 3 * 10e6 / 0.9e12, 1e-9));
        cr_expect(NEAR(rep->iteration_s, 3e-3 + ar + step, 1e-9), "r=%d: iteration %g vs %g",
                  r, rep->iteration_s, 3e-3 + ar + step);
        cr_expect(NEAR(rep->devices[0].comm_s, ar, 1e-9));
        /* the ring's traffic: 2 (r - 1) / r x P leave each replica per iteration */
        cr_assert_eq(rep->nlinks, r == 2 ? 2 : r);
        for (int l = 0; l < rep->nlinks; l++) {
            cr_expect_eq(rep->links[l].dst, (rep->links[l].src + 1) % r);
            cr_expect(NEAR(rep->links[l].bytes, 3 * 2.0 * (r - 1) / r * 10e6, 1e-9));
            cr_expect(NEAR(rep->links[l].bytes_per_iteration, 2.0 * (r - 1) / r * 10e6,
                           1e-9));
        }
        sim_report_free(rep);
        plan_free(pl);
    }
}

/* Bucketed overlap: with K buckets ready evenly through the last backward (time b) and a
 * ring time T, the all-reduce ends max(b / K + T, b + T / K) after that backward starts. */
Test(sim, allreduce_overlaps_backward)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.devices_per_server = 1;
    s.bw_gbit[1] = 8;
    s.replicas = 2;
    s.microbatches = 2;
    s.backward_ms = 40;
    s.parameter_bytes = 4 * 25.0 * 1024 * 1024; /* exactly K = 4 buckets */
    plan *pl = synth_plan(&s);
    sim_report *rep = synth_run(pl, NULL);
    double T = 2.0 * 1 / 2 * s.parameter_bytes / 1e9, b = 40e-3, K = 4;
    double tail = fmax(b / K + T, b + T / K) + rep->stages[0].step_s;
    cr_expect(NEAR(rep->iteration_s, 1e-3 + tail, 1e-9), "%g vs %g", rep->iteration_s,
              1e-3 + tail);
    cr_expect(rep->iteration_s < 1e-3 + b + T);
    sim_report_free(rep);
    plan_free(pl);
}

/* Straggler: device d slowed by factor k does k x its compute; with pipedream's steady
 * state the iteration becomes m x k x (F + B) when that stage becomes the slowest. */
Test(sim, straggler_whatif)
{
    sim_synth s = quiet_synth(SCHED_PIPEDREAM, 4, 8);
    plan *pl = synth_plan(&s);
    sim_options o;
    sim_options_init(&o);
    o.iterations = 4;
    sim_report *base = synth_run(pl, &o);
    o.straggler_device = 1;
    o.straggler_factor = 2;
    sim_report *slow = synth_run(pl, &o);
    cr_expect(NEAR(base->iteration_s, 8 * 3e-3, 1e-6));
    cr_expect(NEAR(slow->iteration_s, 8 * 6e-3, 1e-6), "%g", slow->iteration_s);
    cr_expect(NEAR(slow->devices[1].busy_s, 2 * base->devices[1].busy_s, 1e-9));
    cr_expect(NEAR(slow->devices[0].busy_s, base->devices[0].busy_s, 1e-9));
    sim_changes ch;
    cr_assert_eq(sim_compare(base, slow, &ch), 0);
    int found = 0;
    for (int i = 0; i < ch.n; i++)
        if (strcmp(ch.c[i].figure, "samples_per_s") == 0) {
            found = 1;
            cr_expect(NEAR(ch.c[i].ratio, 0.5, 1e-6), "ratio %g", ch.c[i].ratio);
        }
    cr_expect(found);
    sim_changes_free(&ch);
    sim_report_free(base);
    sim_report_free(slow);
    plan_free(pl);
}

/* Bandwidth what-if: transfer time = latency + bytes / bandwidth of the level crossed, so
 * halving the inter-server bandwidth doubles the link time of every cross-server transfer
 * and leaves the bytes alone; the iteration grows when communication is exposed. */
Test(sim, bandwidth_whatif)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 2;
    s.devices_per_server = 1;         /* stage 0 and 1 on different servers */
    s.bw_gbit[1] = 8;                 /* 1e9 bytes/s */
    s.activation_bytes = 2e6;         /* 2 ms per transfer */
    s.latency_us[1] = 10;
    plan *pl = synth_plan(&s);
    sim_report *base = synth_run(pl, NULL);
    sim_options o;
    sim_options_init(&o);
    o.bandwidth_Bps[1] = 0.5e9;
    sim_report *slow = synth_run(pl, &o);
    cr_assert_eq(base->nlinks, 2);
    for (int i = 0; i < 2; i++) {
        cr_expect(NEAR(slow->links[i].bytes, base->links[i].bytes, 1e-12));
        cr_expect(NEAR(slow->links[i].busy_s, 2 * base->links[i].busy_s, 1e-9));
        /* 8 microbatches x 3 iterations x 2 MB each way */
        cr_expect(NEAR(base->links[i].bytes, 8 * 3 * 2e6, 1e-12));
        cr_expect(NEAR(base->links[i].busy_s, 8 * 3 * 2e-3, 1e-9));
    }
    cr_expect(slow->iteration_s > base->iteration_s);
    cr_expect(NEAR(slow->devices[0].comm_s, 2 * base->devices[0].comm_s, 1e-9));
    sim_report_free(base);
    sim_report_free(slow);
    plan_free(pl);
}

/* Memory: what the executor allocates. Weights x versions + gradients + optimizer state
 * (sgd 0, momentum 1x, adam 2x) + per buffer slot the stage input and the layer outputs +
 * gradient buffers. The executor's slots (schedule_slots) are the in-flight microbatches
 * plus, on a stage that receives, the one whose RECV_F is posted before the compute ahead
 * of it. Recompute keeps only the stage input and output per slot plus one microbatch's
 * outputs. The local transport stages the gradients a device sends, as many per peer as
 * schedule_send_bound says can be in flight. */
Test(sim, memory_model)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 4;
    s.microbatches = 8;
    s.layers_per_stage = 2;
    s.parameter_bytes = 1e6;   /* 2 MB per stage */
    s.activation_bytes = 1e6;
    s.optimizer = OPT_ADAM;
    plan *pl = synth_plan(&s);
    sim_report *r = synth_run(pl, NULL);
    const sim_memory *m = &r->devices[1].mem; /* stage 1: 3 in flight under 1f1b */
    cr_expect(NEAR(m->weights, 2e6, 1e-12));
    cr_expect(NEAR(m->gradients, 2e6, 1e-12));
    cr_expect(NEAR(m->optimizer, 4e6, 1e-12));
    cr_expect_eq(r->devices[1].max_inflight, 3);
    cr_expect_eq(r->devices[3].max_inflight, 1);
    plumb_err e;
    schedule *sc = schedule_from_plan(pl, 1, &e);
    cr_assert_not_null(sc, "%s", e.msg);
    cr_expect_eq(schedule_slots(sc, 0, 0), 4, "stage 0 receives nothing: 4 in flight");
    cr_expect_eq(schedule_slots(sc, 1, 1), 4);
    cr_expect_eq(schedule_slots(sc, 3, 3), 2);
    schedule_free(sc);
    cr_expect(NEAR(m->activations, 4 * 3e6, 1e-12), "%g", m->activations); /* in + 2 out */
    /* gradient buffers: the two input-gradient buffers (each layer's input, 1 MB), and per
     * slot the received output gradient (1 MB) and the input gradient to send (1 MB) */
    cr_expect(NEAR(m->buffers, 2 * 1e6 + 4 * 2e6, 1e-12), "%g", m->buffers);
    cr_expect(NEAR(r->devices[3].mem.buffers, 2 * 1e6 + 2 * 1e6, 1e-12),
              "the last stage sends but receives no gradient: %g", r->devices[3].mem.buffers);
    cr_expect(NEAR(r->devices[0].mem.activations, 4 * 2e6, 1e-12),
              "the profile gives no input bytes: %g", r->devices[0].mem.activations);
    /* staging of the gradients sent back: 4 to stage 0 can be in flight (1 MB each) */
    cr_expect(NEAR(m->staging, 4 * 1e6, 1e-12), "%g", m->staging);
    cr_expect(NEAR(r->devices[3].mem.staging, 2 * 1e6, 1e-12), "%g", r->devices[3].mem.staging);
    cr_expect(NEAR(r->devices[0].mem.staging, 0, 1e-12), "stage 0 sends no gradient");
    cr_expect(NEAR(m->total, 2e6 + 2e6 + 4e6 + 12e6 + 10e6 + 4e6, 1e-12));
    cr_expect(m->fits);
    sim_report_free(r);

    pl->recompute = 1;
    r = synth_run(pl, NULL);
    m = &r->devices[1].mem;
    cr_expect(NEAR(m->activations, 4 * 2e6 + 2e6, 1e-12), "%g", m->activations);
    /* recompute: B = F + B */
    cr_expect(NEAR(r->stages[1].backward_s, 2 * 1e-3 + 2 * 2e-3, 1e-12));
    sim_report_free(r);

    sim_options o;
    sim_options_init(&o);
    o.memory_limit_bytes = 5e6;
    r = synth_run(pl, &o);
    cr_expect(!r->fits);
    cr_expect(NEAR(r->devices[0].mem.capacity, 5e6, 1e-12));
    sim_report_free(r);
    plan_free(pl);
}

Test(sim, rejects_bad_options)
{
    sim_synth s;
    sim_synth_init(&s);
    plan *pl = synth_plan(&s);
    sim_options o;
    plumb_err e;
    sim_options_init(&o);
    o.straggler_device = 99;
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "straggler") != NULL, "%s", e.msg);
    sim_options_init(&o);
    o.bandwidth_Bps[5] = 1e9;
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "level 5") != NULL, "%s", e.msg);
    sim_options_init(&o);
    o.straggler_device = 0;
    o.straggler_factor = 0;
    cr_expect_null(sim_run(pl, &o, &e));
    /* interleaved on a plan with one stage per device: refused (the generator would lay
     * out PyTorch's one-chunk Interleaved1F1B, 2 (p - 1) forwards in flight at rank 0,
     * not the plan's 1F1B) */
    sim_options_init(&o);
    o.schedule = SCHED_INTERLEAVED;
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "interleaved needs a plan with 2 or more chunks") != NULL, "%s",
              e.msg);
    plan_free(pl);
}

/* The timeline holds one compute event per F and B, and transfers on link tracks. */
Test(sim, timeline_recorded)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    s.microbatches = 4;
    plan *pl = synth_plan(&s);
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    o.iterations = 2;
    sim_report *r = synth_run(pl, &o);
    cr_assert_not_null(r->tl);
    size_t nf = 0, nb = 0, nx = 0;
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *e = &r->tl->ev[i];
        nf += e->kind == TL_F;
        nb += e->kind == TL_B;
        nx += e->kind == TL_SEND_F || e->kind == TL_SEND_B;
        cr_expect(e->start_s >= 0 && e->start_s + e->dur_s <= r->makespan_s + 1e-12);
    }
    int n = r->iterations;  /* 3: 2 raised to what the steady window needs */
    cr_expect_eq(n, 3);
    cr_expect_eq(nf, 3 * 4 * n);
    cr_expect_eq(nb, 3 * 4 * n);
    cr_expect_eq(nx, 2 * 2 * 4 * n);
    sim_report_free(r);
    plan_free(pl);
}

/* Steady state whatever the iteration count: samples/s of every schedule on a few plans
 * (balanced, one slow stage, replicated stages, a slow network) stays within 1 % of a long
 * run's for 1 to 8 requested iterations (sim_run raises the count where the pipeline needs
 * more to fill; before, pipedream with 2 iterations measured up to 10x off). */
Test(sim, steady_state_any_iterations)
{
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM,
                                       SCHED_2BW, SCHED_INTERLEAVED, SCHED_ZB_H1, SCHED_ZB_V,
                                       SCHED_DUALPIPEV};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int variant = 0; variant < 4; variant++) {
            sim_synth s;
            sim_synth_init(&s);
            s.schedule = kinds[k];
            int chunked = sched_kind_chunked(kinds[k]);
            s.chunks = chunked ? 2 : 1;
            s.nstages = chunked ? 8 : 4;
            s.microbatches = 8;
            s.layers_per_stage = 2;
            if (variant == 2 && !chunked) {
                s.replicas = 2;       /* two replicas per stage, 4 microbatches each */
                s.parameter_bytes = 20e6;
            }
            if (variant == 3) {
                s.devices_per_server = 2;   /* stages cross a slow network */
                s.bw_gbit[1] = 4;
                s.activation_bytes = 2e6;
                s.microbatches = 4;
            }
            plan *pl = synth_plan(&s);
            if (variant == 1)   /* stage 1 twice as slow */
                for (int l = 2; l < 4; l++) {
                    pl->prof->layers[l].forward_ms *= 2;
                    pl->prof->layers[l].backward_ms *= 2;
                }
            sim_options o;
            sim_options_init(&o);
            o.iterations = 24;
            sim_report *ref = synth_run(pl, &o);
            cr_assert(ref->steady);
            for (int n = 1; n <= 8; n++) {
                o.iterations = n;
                sim_report *r = synth_run(pl, &o);
                cr_expect(NEAR(r->samples_per_s, ref->samples_per_s, 0.01),
                          "%s variant %d, %d iterations (%d simulated): %g vs %g samples/s",
                          sched_kind_name(kinds[k]), variant, n, r->iterations,
                          r->samples_per_s, ref->samples_per_s);
                cr_expect(r->iterations >= n && r->iterations_requested == n && r->steady);
                sim_report_free(r);
            }
            sim_report_free(ref);
            plan_free(pl);
        }
}

/* The ring all-reduce shares links and egress ports with point-to-point transfers. Two
 * stages of 2 replicas, a device per server, GPipe: stage 1 all-reduces 40 MB (2 buckets)
 * from its last backward on, while its gradients go back to stage 0 through the same
 * server ports. With one lane per port (egress = bandwidth) a gradient transfer waits for
 * the ring step ahead of it (and the ring for it); with two lanes nothing waits, and the
 * iteration is what it was before the ring took link time. Without parameters the lanes
 * make no difference at all. */
Test(sim, allreduce_contends_with_transfers)
{
    double it[2][2];
    for (int params = 0; params < 2; params++)
        for (int lanes = 1; lanes <= 2; lanes++) {
            sim_synth s;
            synth_contended_ring(&s, lanes, params ? 20e6 : 0);
            plan *pl = synth_plan(&s);
            sim_report *r = synth_run(pl, NULL);
            it[params][lanes - 1] = r->iteration_s;
            if (params && lanes == 1) {
                /* the ring's bytes: 2 (r - 1) / r x 20 MB per replica per iteration */
                for (int l = 0; l < r->nlinks; l++)
                    if (r->links[l].src / 2 == r->links[l].dst / 2)
                        cr_expect(NEAR(r->links[l].bytes_per_iteration, 20e6, 1e-9),
                                  "%d->%d: %g", r->links[l].src, r->links[l].dst,
                                  r->links[l].bytes_per_iteration);
            }
            sim_report_free(r);
            plan_free(pl);
        }
    cr_expect(NEAR(it[0][0], it[0][1], 1e-12), "no ring: %g vs %g s", it[0][0], it[0][1]);
    cr_expect(it[1][0] > it[1][1] * 1.02, "contention: %g s with one lane vs %g s with two",
              it[1][0], it[1][1]);
}

/* The steady window's need, for schedule_from_plan_grown. */
static int window_need(const schedule *s, void *ctx)
{
    (void)ctx;
    int k0, k1;
    return sim_steady_window(s, &k0, &k1);
}

/* sim_run grows the iterations on the compute order before lowering: the IR must be the
 * one that generating, lowering and asking the lowered IR gives (the loop sim_run ran
 * before), for kinds that grow (pipedream, 2bw: their window needs 2 D + 3) and those that
 * do not, with replicas and chunks. */
Test(sim, grown_like_regenerated)
{
    const struct { sched_kind k; int stages, replicas, mb, iters, grows; } cases[] = {
        {SCHED_PIPEDREAM, 4, 1, 8, 1, 1}, {SCHED_2BW, 4, 1, 8, 2, 1},
        {SCHED_PIPEDREAM, 3, 2, 4, 1, 1}, {SCHED_1F1B_FLUSH, 4, 1, 8, 3, 0},
        {SCHED_INTERLEAVED, 8, 2, 4, 1, 1}, {SCHED_ZB_V, 8, 1, 6, 3, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sim_synth sy;
        sim_synth_init(&sy);
        sy.schedule = cases[c].k;
        sy.chunks = sched_kind_chunks(cases[c].k);
        sy.nstages = cases[c].stages;
        sy.replicas = cases[c].replicas;
        sy.microbatches = cases[c].mb;
        plan *pl = synth_plan(&sy);
        plumb_err e;
        err_clear(&e);
        /* the old way: lower, ask, regenerate */
        int it = cases[c].iters, rounds = 0;
        schedule *ref = NULL;
        for (;;) {
            ref = schedule_from_plan(pl, it, &e);
            cr_assert_not_null(ref, "case %zu: %s", c, e.msg);
            int need = window_need(ref, NULL);
            if (need <= it) break;
            schedule_free(ref);
            it = need, rounds++;
        }
        int grown = -1;
        schedule *s = schedule_from_plan_grown(pl, cases[c].iters, window_need, NULL, 8, &grown, &e);
        cr_assert_not_null(s, "case %zu: %s", c, e.msg);
        cr_expect_eq(grown, rounds, "case %zu: grown %d times, regenerated %d", c, grown,
                     rounds);
        cr_expect_eq(rounds > 0, cases[c].grows, "case %zu: %d rounds", c, rounds);
        cr_expect_eq(s->iterations, it, "case %zu", c);
        cr_expect(schedule_equal(s, ref), "case %zu: the IR differs", c);
        schedule_free(s);
        /* no rounds left: the first order, as asked */
        s = schedule_from_plan_grown(pl, cases[c].iters, window_need, NULL, 0, &grown, &e);
        cr_assert_not_null(s, "case %zu: %s", c, e.msg);
        cr_expect_eq(grown, 0);
        cr_expect_eq(s->iterations, cases[c].iters, "case %zu", c);
        schedule_free(s);
        schedule_free(ref);
        plan_free(pl);
    }
}

/* The window of the compute order schedule_from_plan_grown asked about last. */
typedef struct { int k0, k1, asked; } window_seen;
static int window_note(const schedule *s, void *ctx)
{
    window_seen *n = ctx; /* passed through by schedule_from_plan_grown */
    n->asked++;
    return sim_steady_window(s, &n->k0, &n->k1);
}

/* sim_run hands the engine the steady window of the last compute order the growth asked
 * about instead of scanning the lowered IR again: both must give the same window, for
 * every kind, with replicas, few and many microbatches, and runs too short for one. */
Test(sim, window_of_the_order_is_the_ir_s)
{
    int checked[SCHED_NKINDS] = {0};
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int ranks = 2; ranks <= 3; ranks++)
            for (int rep = 1; rep <= 2; rep++)
                for (int mb = 1; mb <= 9; mb += 4)
                    for (int iters = 1; iters <= 5; iters += 2) {
                        plumb_err e;
                        plan *pl = bench_synth_plan(k, ranks, rep, mb, &e);
                        if (!pl)
                            continue; /* a spec the kind refuses */
                        window_seen seen = {-1, -1, 0};
                        schedule *s = schedule_from_plan_grown(pl, iters, window_note, &seen,
                                                               8, NULL, &e);
                        if (s) {
                            int k0, k1;
                            cr_assert_geq(sim_steady_window(s, &k0, &k1), 0);
                            cr_assert_gt(seen.asked, 0);
                            cr_expect(k0 == seen.k0 && k1 == seen.k1,
                                      "%s %d ranks x %d, %d mb, %d iterations: the IR's "
                                      "window %d..%d, the order's %d..%d",
                                      sched_kind_name((sched_kind)k), ranks, rep, mb, iters,
                                      k0, k1, seen.k0, seen.k1);
                            checked[k]++;
                            schedule_free(s);
                        }
                        plan_free(pl);
                    }
    for (int k = 0; k < SCHED_NKINDS; k++)
        cr_expect_gt(checked[k], 4, "%s: %d cases", sched_kind_name((sched_kind)k),
                     checked[k]);
}

/* The memory model reads a generated schedule's counts from its lowering (schedule.counts:
 * schedule_inflight_fresh, schedule_slots_fresh) and, where they are kept, its gradient
 * senders from the placement (sim_memory_staging): the report must be the one the passes
 * give, the same schedule simulated with its counts dropped (NULL: the passes and scans),
 * for every kind, with and without replicas (which carry none), 1 to 9 microbatches, with
 * non-zero costs and activations. */
Test(sim, lowering_counts_give_the_passes_report)
{
    int with[SCHED_NKINDS] = {0};
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int ranks = 2; ranks <= 4; ranks += 2)
            for (int rep = 1; rep <= 2; rep++)
                for (int mb = 1; mb <= 9; mb += 4) {
                    plumb_err e;
                    plan *pl = bench_synth_plan(k, ranks, rep, mb, &e);
                    if (!pl) continue; /* a spec the kind refuses */
                    schedule *s = schedule_from_plan(pl, 2, &e);
                    if (!s) { /* microbatches the kind refuses with these replicas */
                        plan_free(pl);
                        continue;
                    }
                    with[k] += s->counts != NULL;
                    sim_options o;
                    sim_options_init(&o);
                    o.sched = s;
                    sim_report *a = sim_run(pl, &o, &e);
                    cr_assert(a, "%s", e.msg);
                    free(s->counts);
                    s->counts = NULL;
                    sim_report *b = sim_run(pl, &o, &e);
                    cr_assert(b, "%s", e.msg);
                    cr_assert_eq(a->ndevices, b->ndevices);
                    for (int d = 0; d < a->ndevices; d++) {
                        const sim_device_report *x = &a->devices[d], *y = &b->devices[d];
                        cr_assert(!memcmp(&x->mem, &y->mem, sizeof x->mem) &&
                                      x->weight_versions == y->weight_versions,
                                  "%s %d ranks x %d, %d mb: device %d's memory %.0f with the "
                                  "lowering's counts, %.0f with the passes'",
                                  sched_kind_name((sched_kind)k), ranks, rep, mb, d,
                                  x->mem.total, y->mem.total);
                    }
                    for (int st = 0; st < a->nstages; st++)
                        cr_assert(a->stages[st].weight_versions ==
                                          b->stages[st].weight_versions &&
                                      a->stages[st].max_inflight == b->stages[st].max_inflight,
                                  "%s stage %d", sched_kind_name((sched_kind)k), st);
                    sim_report_free(a);
                    sim_report_free(b);
                    schedule_free(s);
                    plan_free(pl);
                }
    for (int k = 0; k < SCHED_NKINDS; k++)
        cr_expect_gt(with[k], 0, "%s: no schedule carried counts", sched_kind_name((sched_kind)k));
}
