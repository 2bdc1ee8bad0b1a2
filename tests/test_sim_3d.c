/* test_sim_3d.c: the simulator's tensor, sequence and data parallelism, recomputation
 * modes and mixed-precision state, against figures computed here by hand: the ring
 * formula 2 (t - 1) / t x bytes / bandwidth + 2 (t - 1) x latency per collective for the
 * tensor-parallel all-reduces inside F and B; Korthikanti et al. 2022's closed forms
 * (Table 2) for the activations a first pipeline stage of GPT-3 blocks keeps under 1F1B
 * in each recompute mode; Megatron-LM's published bytes per parameter of the
 * (distributed) optimizer for fp16, bf16 and fp32. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/cluster.h"
#include "core/device.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "sim/engine.h"
#include "sim/memory.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

static int close_to(double a, double b, double rel)
{
    return fabs(a - b) <= rel * (fabs(b) > 1e-300 ? fabs(b) : 1);
}

/* ---- (a) tensor-parallel collectives on a small 2-server cluster ------------------------ */

#define BW0 200e9   /* level 0: 1600 Gbit/s */
#define LAT0 2e-6
#define BW1 12.5e9  /* level 1: 100 Gbit/s */
#define LAT1 5e-6
#define COLL 8e6    /* bytes of one collective at the profiled minibatch */

/* Two stages of two layers (F 1 ms, B 2 ms per layer at 32 samples), microbatches of 16
 * samples, tp = 2: stage 0 on devices 0-1 (server 0), stage 1 on devices 4-5 (server 1),
 * each layer 2 forward and 2 backward all-reduces of COLL bytes; `replicas` copies of each
 * stage (replica j of stage s on device 4 j + 2 s). */
static plan *tp_plan(int replicas, int sp)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 2;
    s.layers_per_stage = 2;
    s.devices_per_server = 4;
    s.servers = 2;
    s.bw_gbit[0] = BW0 * 8 / 1e9;
    s.bw_gbit[1] = BW1 * 8 / 1e9;
    s.latency_us[0] = LAT0 * 1e6;
    s.latency_us[1] = LAT1 * 1e6;
    s.microbatch_size = 16;
    s.microbatches = 4;
    plan *pl = synth_plan(&s);
    const double coll = COLL;
    synth_set_tp(pl, 2, &coll, 1, 2, 2);
    pl->prof->sequence_parallel = pl->sequence_parallel = sp;
    for (int st = 0; st < 2; st++) {
        int devs[2] = {2 * st, 4 + 2 * st};
        if (replicas == 1) devs[0] = 4 * st; /* across the servers */
        cr_assert_eq(plan_set_stage(pl, st, 2 * st, 2 * st + 1, replicas, devs), 0);
    }
    return pl;
}

/* One all-reduce (or reduce-scatter + all-gather) among t devices of one server. */
static double ring_tp(double bytes, int t)
{
    return 2.0 * (t - 1) / t * bytes / BW0 + 2.0 * (t - 1) * LAT0;
}

Test(sim_3d, tp_collectives_in_f_and_b)
{
    plan *pl = tp_plan(1, 0);
    sim_report *r = synth_run(pl, NULL);
    double scale = 16.0 / 32;
    double coll = ring_tp(COLL * scale, 2);  /* 20 us + 4 us */
    double tpf = 2 * 2 * coll;                /* 2 layers x 2 collectives */
    /* the scatter-gather's all-gather of the received 1e6 x scale bytes (half a ring
     * all-reduce of them), in stage 1's F (its input) and stage 0's B and I (the gradient) */
    double ag = ring_tp(1e6 * scale, 2) / 2;
    for (int st = 0; st < 2; st++) {
        const sim_stage_report *g = &r->stages[st];
        double gf = st == 1 ? ag : 0, gb = st == 0 ? ag : 0;
        cr_expect(close_to(g->tp_comm_forward_s, tpf, 1e-12), "%g %g", g->tp_comm_forward_s, tpf);
        cr_expect(close_to(g->tp_comm_backward_s, tpf, 1e-12));
        cr_expect(close_to(g->forward_s, 2 * 1e-3 * scale + tpf + gf, 1e-12), "F %g",
                  g->forward_s);
        cr_expect(close_to(g->backward_s, 2 * 2e-3 * scale + tpf + gb, 1e-12), "B %g",
                  g->backward_s);
        cr_expect(close_to(g->input_grad_s, 2 * 1e-3 * scale + tpf + gb, 1e-12));
        cr_expect(close_to(g->weight_grad_s, 2 * 1e-3 * scale, 1e-12)); /* W: no collective */
    }
    /* without sequence parallelism each rank sends 1 / tp of the activation */
    cr_expect(close_to(r->stages[0].send_bytes, 1e6 * scale / 2, 1e-12), "%g",
              r->stages[0].send_bytes);
    cr_expect_eq(r->tp, 2);
    cr_expect_eq(r->pp, 2);
    cr_expect_eq(r->dp, 1);
    cr_expect_eq(r->gpus, 4);
    cr_expect_eq(r->global_batch, 64);
    sim_report_free(r);

    /* full recompute repeats the forward, collectives included (the receive's all-gather
     * not); selective adds its part */
    pl->recompute = RECOMPUTE_FULL;
    r = synth_run(pl, NULL);
    cr_expect(close_to(r->stages[0].backward_s,
                       2 * 2e-3 * scale + tpf + 2 * 1e-3 * scale + tpf + ag, 1e-12), "%g",
              r->stages[0].backward_s);
    cr_expect(close_to(r->stages[1].backward_s,
                       2 * 2e-3 * scale + tpf + 2 * 1e-3 * scale + tpf, 1e-12), "%g",
              r->stages[1].backward_s); /* the gathered input is kept: not gathered again */
    sim_report_free(r);
    pl->recompute = RECOMPUTE_SELECTIVE;
    for (int l = 0; l < pl->prof->nlayers; l++) pl->prof->layers[l].selective_recompute_ms = 0.3;
    r = synth_run(pl, NULL);
    cr_expect(close_to(r->stages[0].backward_s,
                       2 * 2e-3 * scale + tpf + 2 * 0.3e-3 * scale + ag, 1e-12), "%g",
              r->stages[0].backward_s);
    sim_report_free(r);
    plan_free(pl);
}

/* With sequence parallelism the cut is one rank's share already and is sent whole; with
 * one microbatch nothing overlaps, so the iteration grows by exactly both stages' F and B
 * collectives against the same plan with none. */
Test(sim_3d, tp_collectives_on_the_critical_path)
{
    plan *pl = tp_plan(1, 1);
    pl->microbatches = 1;
    sim_report *r = synth_run(pl, NULL);
    double scale = 16.0 / 32, coll = ring_tp(COLL * scale, 2);
    cr_expect(close_to(r->stages[0].send_bytes, 1e6 * scale, 1e-12));
    for (int l = 0; l < pl->prof->nlayers; l++) pl->prof->layers[l].tp_collective_bytes = 0;
    sim_report *r0 = synth_run(pl, NULL);
    double want = 2 /* stages */ * 2 /* F, B */ * 2 /* layers */ * 2 * coll;
    cr_expect(close_to(r->iteration_s - r0->iteration_s, want, 1e-9), "%g vs %g",
              r->iteration_s - r0->iteration_s, want);
    sim_report_free(r);
    sim_report_free(r0);
    plan_free(pl);
}

/* The data-parallel reduction of a tp = 2 stage over 2 replicas on two servers: bf16
 * reduces fp32 main gradients (2 x the parameter bytes); with ZeRO-1 a reduce-scatter of
 * them and an all-gather of the bf16 parameters (1.5 x). fp32: the parameter bytes. With
 * grad_reduce bf16 the gradients are bf16: the parameter bytes either way (a reduce-scatter
 * of 1 x and the all-gather of 1 x; the optimizer state's element changes nothing). */
Test(sim_3d, data_parallel_reduction_bytes)
{
    const double P = 2 * 4e6; /* two layers of 4 MB per stage */
    struct { dev_precision prec; int zero; dev_precision grad, ostate; double mul; } c[] = {
        {DEV_FP32, 0, DEV_FP32, DEV_FP32, 1}, {DEV_BF16, 0, DEV_FP32, DEV_FP32, 2},
        {DEV_BF16, 1, DEV_FP32, DEV_FP32, 1.5}, {DEV_FP16, 0, DEV_FP32, DEV_FP32, 1},
        {DEV_BF16, 0, DEV_BF16, DEV_FP32, 1}, {DEV_BF16, 1, DEV_BF16, DEV_FP32, 1},
        {DEV_BF16, 1, DEV_BF16, DEV_BF16, 1}, {DEV_BF16, 1, DEV_FP32, DEV_BF16, 1.5},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        plan *pl = tp_plan(2, 0);
        pl->precision = c[i].prec;
        pl->zero = c[i].zero;
        pl->grad_reduce = c[i].grad;
        pl->optimizer_state = c[i].ostate;
        sim_report *r = synth_run(pl, NULL);
        /* a ring of 2 across the servers: 2 (r - 1) / r x bytes / BW1 + 2 (r - 1) x LAT1 */
        double want = c[i].mul * P / BW1 + 2 * LAT1;
        cr_expect(close_to(r->stages[0].allreduce_s, want, 1e-12), "case %zu: %g vs %g", i,
                  r->stages[0].allreduce_s, want);
        cr_expect_eq(r->dp, 2);
        cr_expect_eq(r->gpus, 8);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* ---- (c) bytes per parameter: Megatron-LM's distributed-optimizer table ---------------- */

/* Megatron-LM docs (distributed optimizer): bytes per parameter, adam,
 * non-distributed / distributed over d data-parallel ranks, as held at the optimizer step:
 * fp16's 4 (or 4 / d) fp32 gradient copy is there only then (sim_state_mul.stepcopy). */
static double megatron_bytes(dev_precision p, int d)
{
    switch (p) {
    case DEV_FP16: return d ? 4 + 16.0 / d : 20; /* fp16 params, fp16 grads */
    case DEV_BF16: return d ? 6 + 12.0 / d : 18; /* bf16 params, fp32 grads */
    default: return d ? 8 + 8.0 / d : 16;        /* fp32 params, fp32 grads */
    }
}

Test(sim_3d, bytes_per_parameter_table)
{
    dev_precision ps[] = {DEV_FP16, DEV_BF16, DEV_FP32};
    for (size_t i = 0; i < 3; i++)
        for (int d = 0; d <= 64; d = d ? 2 * d : 1) {
            sim_state_mul m;
            sim_memory_state(ps[i], d > 0, d > 0 ? d : 1, OPT_ADAM, &m);
            double e = dev_precision_bytes(ps[i]);
            double got = e * (1 + m.gradients + m.optimizer + m.stepcopy);
            double want = megatron_bytes(ps[i], d);
            double copy = ps[i] == DEV_FP16 ? 4.0 / (d > 0 ? d : 1) : 0;
            cr_expect(close_to(e * m.stepcopy, copy, 1e-12), "%s d=%d: copy %g vs %g",
                      dev_precision_name(ps[i]), d, e * m.stepcopy, copy);
            if (d == 1) want = megatron_bytes(ps[i], 0); /* one rank: nothing to shard */
            cr_expect(close_to(got, want, 1e-12), "%s d=%d: %g vs %g",
                      dev_precision_name(ps[i]), d, got, want);
        }
}

/* The same through sim_run: a bf16 adam stage of 2 replicas with ZeRO-1 holds
 * (6 + 12 / 2) bytes per parameter of weights, gradients and optimizer state. */
Test(sim_3d, bytes_per_parameter_in_a_run)
{
    for (int zero = 0; zero <= 1; zero++) {
        plan *pl = tp_plan(2, 0);
        pl->precision = DEV_BF16;
        pl->zero = zero;
        pl->optimizer = OPT_ADAM;
        sim_report *r = synth_run(pl, NULL);
        double params = 2 * 4e6 / 2; /* elements of the stage: 8 MB of bf16 */
        const sim_memory *m = &r->devices[0].mem;
        double got = (m->weights + m->gradients + m->optimizer) / params;
        cr_expect(close_to(got, megatron_bytes(DEV_BF16, zero ? 2 : 0), 1e-12), "%g", got);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* Bytes per parameter of bf16 weights with adam under the plan's grad_reduce and
 * optimizer_state (g, o), worked by hand, non-distributed / distributed over d ranks:
 * weights 2; gradients 4 (fp32 main gradients) or 2 (bf16); fp32 state: master 4 + two
 * moments 8; bf16 state (apex DistributedFusedAdam dtype bf16, store_params off): two bf16
 * moments 4, no master. The optimizer step's traffic per parameter: the gradient read, the
 * weight read and written, each moment read and written (bf16 state: 2 + 4 + 8 = 14). */
static double hand_bytes(dev_precision g, dev_precision o, int d)
{
    double grad = g == DEV_BF16 ? 2 : 4;
    double opt = o == DEV_BF16 ? 4 : 4 + 8;
    return 2 + grad + (d > 1 ? opt / d : opt);
}

/* With bf16 gradients and an fp32 state, the optimizer's fp32 copy of the gradients, made
 * in the step and held only until the next zero_grad: 4 bytes, / d distributed
 * (Megatron-Core: `shard_model_grad.float()`; Megatron-LM's table gives 4 + 16 / d for
 * 16-bit gradients, counting it); 0 otherwise. */
static double hand_copy(dev_precision g, dev_precision o, int d)
{
    double copy = g == DEV_BF16 && o != DEV_BF16 ? 4 : 0;
    return d > 1 ? copy / d : copy;
}

Test(sim_3d, bytes_per_parameter_with_16bit_state)
{
    dev_precision dt[] = {DEV_FP32, DEV_BF16};
    for (int gi = 0; gi < 2; gi++)
        for (int oi = 0; oi < 2; oi++)
            for (int d = 1; d <= 64; d *= 2)
                for (int zero = 0; zero <= 1; zero++) {
                    sim_state_mul m;
                    sim_memory_state_of(DEV_BF16, dt[gi], dt[oi], zero, d, OPT_ADAM, &m);
                    double got = 2 * (1 + m.gradients + m.optimizer);
                    double want = hand_bytes(dt[gi], dt[oi], zero ? d : 1);
                    cr_expect(close_to(got, want, 1e-12), "grad %s state %s d=%d zero %d: %g "
                              "vs %g", dev_precision_name(dt[gi]), dev_precision_name(dt[oi]),
                              d, zero, got, want);
                    double copy = hand_copy(dt[gi], dt[oi], zero ? d : 1);
                    cr_expect(close_to(2 * m.stepcopy, copy, 1e-12), "grad %s state %s d=%d "
                              "zero %d: copy %g vs %g", dev_precision_name(dt[gi]),
                              dev_precision_name(dt[oi]), d, zero, 2 * m.stepcopy, copy);
                }
    /* the figures named in the docs: both bf16 take 8 bytes, 4 + 4 / d distributed */
    cr_expect(close_to(hand_bytes(DEV_BF16, DEV_BF16, 1), 8, 0));
    cr_expect(close_to(hand_bytes(DEV_BF16, DEV_BF16, 4), 5, 0));
    cr_expect(close_to(hand_bytes(DEV_BF16, DEV_FP32, 4), 7, 0));
    cr_expect(close_to(hand_copy(DEV_BF16, DEV_FP32, 4), 1, 0));
    sim_state_mul m;
    sim_memory_state_of(DEV_BF16, DEV_BF16, DEV_BF16, 0, 1, OPT_ADAM, &m);
    cr_expect(close_to(2 * m.step, 2 + 2 + 2 + 4 + 4, 1e-12), "step %g", 2 * m.step);
    sim_memory_state_of(DEV_BF16, DEV_BF16, DEV_FP32, 0, 1, OPT_ADAM, &m);
    cr_expect(close_to(2 * m.step, 2 + 8 + 16 + 2, 1e-12), "step %g", 2 * m.step);
    /* the defaults are sim_memory_state's, and nothing changes away from bf16 */
    sim_state_mul a, b;
    sim_memory_state(DEV_BF16, 1, 8, OPT_ADAM, &a);
    sim_memory_state_of(DEV_BF16, DEV_FP32, DEV_FP32, 1, 8, OPT_ADAM, &b);
    cr_expect(!memcmp(&a, &b, sizeof a));
    sim_memory_state(DEV_FP16, 1, 8, OPT_ADAM, &a);
    sim_memory_state_of(DEV_FP16, DEV_BF16, DEV_BF16, 1, 8, OPT_ADAM, &b);
    cr_expect(!memcmp(&a, &b, sizeof a));
}

/* Through sim_run: a bf16 adam stage of 2 replicas, both settings bf16, holds 8 bytes per
 * parameter of weights, gradients and optimizer state without ZeRO, 4 + 4 / 2 with it. */
Test(sim_3d, bytes_per_parameter_in_a_run_with_16bit_state)
{
    for (int zero = 0; zero <= 1; zero++) {
        plan *pl = tp_plan(2, 0);
        pl->precision = DEV_BF16;
        pl->grad_reduce = pl->optimizer_state = DEV_BF16;
        pl->zero = zero;
        pl->optimizer = OPT_ADAM;
        plumb_err e;
        cr_assert_eq(plan_validate(pl, "t", &e), 0, "%s", e.msg);
        sim_report *r = sim_run(pl, NULL, &e);
        cr_assert_not_null(r, "%s", e.msg);
        double params = 2 * 4e6 / 2;
        const sim_memory *m = &r->devices[0].mem;
        cr_expect(close_to(m->gradients / params, 2, 1e-12), "%g", m->gradients / params);
        double got = (m->weights + m->gradients + m->optimizer) / params;
        cr_expect(close_to(got, zero ? 6 : 8, 1e-12), "zero %d: %g", zero, got);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* ---- (b) GPT-3 activations of the first stage against Korthikanti et al. 2022 ---------- */

#define GPT3 "examples/llm/gpt3-175b.json"
#define A100 "profiles/clusters/dgx-a100-80g.json"
#define PP 8     /* stages */
#define T 8      /* tensor-parallel ranks */

typedef struct gpt_case {
    plan *pl;
    double s, b, h, a, L; /* sequence, microbatch, hidden, heads, blocks per stage */
} gpt_case;

/* Loads the transformer `model` and the A100 cluster file, or fails the test. */
static void load_model(const char *model, transformer **t, cluster **c)
{
    plumb_err e = {{0}};
    *t = transformer_load(model, &e);
    cr_assert_not_null(*t, "%s", e.msg);
    *c = cluster_load(A100, &e);
    cr_assert_not_null(*c, "%s", e.msg);
}

/* GPT-3 175B at tp 8, microbatch 1, 2048 tokens, on pp stages of 96 / pp blocks (the
 * first also the embedding, the last the head), 1F1B with 16 microbatches. sp: the
 * sequence-parallel profile fields, set as Korthikanti's Table 2 counts them. */
static gpt_case gpt_plan_pp(int sp, int pp)
{
    plumb_err e = {{0}};
    transformer *t;
    cluster *c;
    load_model(GPT3, &t, &c);
    llm_options o;
    llm_options_init(&o);
    o.tp = T;
    o.microbatch = 1;
    o.seq = 2048;
    profile *p = llm_profile_build(t, c, A100, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    gpt_case g = {NULL, 2048, 1, (double)t->hidden, (double)t->heads,
                  (double)t->layers / pp};
    double sbh = g.s * g.b * g.h;
    p->tp = T;
    p->sequence_parallel = sp;
    for (int l = 1; l <= (int)t->layers; l++) {
        profile_layer *L = &p->layers[l];
        if (sp) { /* input + saved = s b h / t (34 + 5 a s / h) */
            L->activation_bytes = 2 * sbh / T;
            L->saved_bytes = sbh / T * (34 + 5 * g.a * g.s / g.h) - 2 * sbh / T;
            L->selective_saved_bytes = 34 * sbh / T - 2 * sbh / T;
        } else {  /* selective without SP: s b h (10 + 24 / t) */
            L->selective_saved_bytes = sbh * (10 + 24.0 / T) - 2 * sbh;
        }
        L->selective_recompute_ms = 1;
    }
    if (sp) {
        p->layers[0].activation_bytes = 2 * sbh / T;
        p->layers[0].saved_bytes = sbh / T; /* the embedding's dropout mask */
    }
    plan *pl = plan_new(p, c, pp);
    cr_assert_not_null(pl);
    for (int st = 0; st < pp; st++) {
        int first = st == 0 ? 0 : 1 + st * (int)g.L, last = (st + 1) * (int)g.L;
        if (st == pp - 1) last = p->nlayers - 1;
        int dev = st * T;
        cr_assert_eq(plan_set_stage(pl, st, first, last, 1, &dev), 0);
    }
    pl->schedule = SCHED_1F1B_FLUSH;
    pl->microbatch_size = 1;
    pl->microbatches = 16;
    pl->precision = DEV_BF16;
    pl->optimizer = OPT_ADAM;
    cr_assert_eq(pl->tp, T);
    cr_assert_eq(pl->sequence_parallel, sp);
    profile_free(p);
    cluster_free(c);
    transformer_free(t);
    g.pl = pl;
    return g;
}

/* gpt_plan_pp on PP stages of 12 blocks. */
static gpt_case gpt_plan(int sp)
{
    return gpt_plan_pp(sp, PP);
}

static double first_stage_activations(plan *pl)
{
    sim_report *r = synth_run(pl, NULL);
    cr_assert_eq(r->devices[0].device, 0);
    cr_expect_eq(r->devices[0].max_inflight, PP); /* 1F1B: p microbatches in flight */
    double a = r->devices[0].mem.activations;
    sim_report_free(r);
    return a;
}

Test(sim_3d, korthikanti_activations_per_mode)
{
    for (int sp = 0; sp <= 1; sp++) {
        gpt_case g = gpt_plan(sp);
        double s = g.s, b = g.b, h = g.h, a = g.a, L = g.L, t = T, sbh = s * b * h;
        double div = sp ? t : 1;
        /* what plumb keeps besides the blocks' own: the token ids (8 bytes each) and the
         * embedding's dropout mask (s b h, the paper's too; / t with SP); not the stage's
         * output, which a Megatron-LM-style runtime frees once it is sent */
        double extra = 8 * s * b + sbh / div;
        double none = sp ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
        double sel = sp ? 34 * sbh / t : sbh * (10 + 24 / t);
        double full = 2 * sbh / div;
        /* none */
        double got = first_stage_activations(g.pl);
        cr_expect(close_to(got, PP * (L * none + extra), 1e-12), "sp %d none: %g vs %g", sp,
                  got, PP * (L * none + extra));
        /* selective: the attention core (5 a s^2 b / t) is recomputed, one layer's at once */
        g.pl->recompute = RECOMPUTE_SELECTIVE;
        got = first_stage_activations(g.pl);
        double want = PP * (L * sel + extra) + (none - sel);
        cr_expect(close_to(got, want, 1e-12), "sp %d selective: %g vs %g", sp, got, want);
        /* full, every layer's input kept: 2 s b h per layer; one layer recomputed at once */
        g.pl->recompute = RECOMPUTE_FULL;
        g.pl->checkpoint_layers = 1;
        got = first_stage_activations(g.pl);
        want = PP * (L * full + 8 * s * b) + none;
        cr_expect(close_to(got, want, 1e-12), "sp %d full: %g vs %g", sp, got, want);
        plan_free(g.pl);
    }
}

/* Full recompute with checkpoints every k layers keeps ceil(blocks / k) inputs and
 * recomputes one group of k layers at a time; checkpoint_layers 0 keeps the stage input
 * alone and recomputes the whole stage. */
Test(sim_3d, checkpoint_layers_groups)
{
    gpt_case g = gpt_plan(0);
    double s = g.s, b = g.b, h = g.h, a = g.a, t = T, sbh = s * b * h;
    double none = sbh * (10 + 24 / t + 5 * a * s / (h * t));
    g.pl->recompute = RECOMPUTE_FULL;
    /* stage 0: embedding + 12 blocks (layers 0..12); k = 4 keeps the inputs of layers 4
     * and 8 and 12 beyond the stage's own (the token ids), groups {0..3} {4..7} {8..11}
     * {12}: the largest holds 4 blocks' (or the embedding's and 3 blocks') tensors; the
     * stage's output is freed once sent */
    g.pl->checkpoint_layers = 4;
    double got = first_stage_activations(g.pl);
    double want = PP * (8 * s * b + 3 * 2 * sbh) + 4 * none;
    cr_expect(close_to(got, want, 1e-12), "k 4: %g vs %g", got, want);
    /* k = 0: the whole stage's activations once */
    g.pl->checkpoint_layers = 0;
    got = first_stage_activations(g.pl);
    want = PP * (8 * s * b) + (12 * none + 2 * sbh + sbh);
    cr_expect(close_to(got, want, 1e-12), "k 0: %g vs %g", got, want);
    plan_free(g.pl);
}

/* The report: dims, tokens/s, TFLOP/s per GPU with and without recomputation, and MFU
 * from the profile's FLOPs and the A100's bf16 peak (312 TFLOP/s). */
Test(sim_3d, throughput_figures)
{
    gpt_case g = gpt_plan(1);
    const profile *p = g.pl->prof;
    double fwd = 0;
    for (int l = 0; l < p->nlayers; l++) fwd += p->layers[l].flops;
    p = NULL;
    for (int rc = 0; rc <= 1; rc++) {
        g.pl->recompute = rc ? RECOMPUTE_FULL : RECOMPUTE_NONE;
        g.pl->prof->tokens_per_sample = 2048;
        sim_report *r = synth_run(g.pl, NULL);
        cr_expect_eq(r->tp, T);
        cr_expect_eq(r->pp, PP);
        cr_expect_eq(r->dp, 1);
        cr_expect_eq(r->gpus, PP * T);
        cr_expect_eq(r->global_batch, 16);
        cr_expect(close_to(r->tokens_per_s, r->samples_per_s * 2048, 1e-12));
        double model = 3 * fwd * 16 * T / r->iteration_s / (PP * T) / 1e12;
        cr_expect(close_to(r->model_tflops_per_gpu, model, 1e-12), "%g vs %g",
                  r->model_tflops_per_gpu, model);
        cr_expect(close_to(r->tflops_per_gpu, model * (rc ? 4.0 / 3 : 1), 1e-12));
        cr_expect(close_to(r->mfu, model / 312, 1e-12), "%g", r->mfu);
        cr_expect(r->mfu > 0.05 && r->mfu < 0.8, "%g", r->mfu);
        sim_report_free(r);
    }
    plan_free(g.pl);
}

/* MFU is never a rate over the peak: a plan that says fp32 (what a planner gives every plan
 * it makes from a profile) over a profile timed at bf16 runs its model FLOPs faster than the
 * A100's fp32 peak (19.5 TFLOP/s), so the report has no MFU (the dashboard showed 912 % for
 * a transformer's fp8 layout re-planned so); the same plan at bf16 has its bf16 MFU. */
Test(sim_3d, no_mfu_over_the_peak_of_the_plans_precision)
{
    gpt_case g = gpt_plan(1);
    g.pl->precision = DEV_BF16;
    sim_report *r = synth_run(g.pl, NULL);
    cr_assert(r->mfu > 0.05 && r->mfu < 0.8, "%g", r->mfu);
    double bf16 = r->mfu;
    sim_report_free(r);
    g.pl->precision = DEV_FP32;
    r = synth_run(g.pl, NULL);
    cr_assert(r->model_tflops_per_gpu > 19.5, "%g TFLOP/s: the check cannot fail",
              r->model_tflops_per_gpu);
    cr_expect(r->mfu < 0, "MFU %g (%g at bf16) against the fp32 peak", r->mfu, bf16);
    cr_expect(r->model_tflops_per_gpu > 0, "the FLOP rate stays");
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    cr_assert_not_null(j);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "mfu"));
    cJSON_Delete(j);
    sim_report_free(r);
    plan_free(g.pl);
}

/* A 3D plan's memory counts the buffers of the runtime it describes (Megatron-LM's over
 * NCCL): the backward's gradient buffers and one microbatch's received and sent
 * gradients, no in-process all-reduce receive buffer and no staging; every member of a
 * tensor-parallel group is a used device. */
Test(sim_3d, runtime_buffers_and_devices)
{
    plan *pl = tp_plan(2, 0);
    sim_report *r = synth_run(pl, NULL);
    const sim_memory *m = &r->devices[0].mem;
    /* stage 0 (layers 0, 1 of 1 MB outputs at 32 samples; microbatches of 16): the input
     * gradient of layer 1 (0.5 MB; layer 0 has no input) and the received output
     * gradient (0.5 MB, whole on each rank) */
    cr_expect(close_to(m->buffers, 0.5e6 + 0.5e6, 1e-12), "%g", m->buffers);
    cr_expect_eq(m->staging, 0);
    char used[160];
    cr_expect_eq(sim_report_devices_text(r, used, sizeof used), 8, "%s", used);
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    cr_assert_not_null(j);
    const char *keys[] = {"iteration_s", "samples_per_s", "tp", "pp", "dp", "interleave",
                          "global_batch", "microbatch_size", "recompute", "sequence_parallel",
                          "zero", "precision", "gpus"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        cr_expect_not_null(cJSON_GetObjectItemCaseSensitive(j, keys[k]), "%s", keys[k]);
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "tokens_per_s")); /* no tokens */
    cr_expect_null(cJSON_GetObjectItemCaseSensitive(j, "mfu")); /* no FLOPs */
    cr_expect_str_eq(cJSON_GetObjectItemCaseSensitive(j, "recompute")->valuestring, "none");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "idle_devices")), 0);
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(j, "devices_used")->valuedouble, 8);
    const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "devices"), 0);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d0, "memory");
    cr_expect_eq(cJSON_GetObjectItemCaseSensitive(mem, "peak_bytes")->valuedouble, m->total);
    cJSON_Delete(j);
    sim_report_free(r);
    plan_free(pl);
}

/* The text report: the layout line, the model speed line where tokens and FLOPs are
 * known, and the per-stage collectives table with tp > 1. */
Test(sim_3d, text_report_lines)
{
    gpt_case g = gpt_plan(1);
    g.pl->prof->tokens_per_sample = 2048;
    sim_report *r = synth_run(g.pl, NULL);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    sim_print_report(r, NULL, f);
    fclose(f);
    cr_expect_not_null(strstr(buf, "layout          tp 8 x pp 8 x dp 1 = 64 GPUs, global batch "
                                   "16, bf16, sequence parallel\n"), "%s", buf);
    char want[128];
    snprintf(want, sizeof want, "model speed     %.0f tokens/s, %.1f TFLOP/s per GPU",
             r->tokens_per_s, r->tflops_per_gpu);
    cr_expect_not_null(strstr(buf, want), "%s", want);
    cr_expect_not_null(strstr(buf, "MFU "));
    cr_expect_not_null(strstr(buf, "per stage, per microbatch (tensor-parallel collectives"));
    cr_expect_not_null(strstr(buf, "devices         64 of 3072 used"));
    free(buf);
    sim_report_free(r);
    plan_free(g.pl);
}

/* ---- (d) a Megatron-LM-style runtime's activations -------------------------------------- */

/* A middle stage of the GPT-3 layout (12 blocks, 7 microbatches in flight under 1F1B)
 * keeps per microbatch its blocks' inputs and saved tensors, 12 x s b h (10 + 24/t +
 * 5 a s / (h t)) (the stage's output is freed once sent), and one received input waiting
 * for its forward: the whole 2 s b h tensor on every tensor rank (Megatron-LM all-gathers
 * the 1 / t each rank received), not a whole microbatch's activations. */
Test(sim_3d, receive_holds_the_received_tensor)
{
    gpt_case g = gpt_plan(0);
    double s = g.s, b = g.b, h = g.h, a = g.a, t = T, sbh = s * b * h;
    double none = sbh * (10 + 24 / t + 5 * a * s / (h * t));
    sim_report *r = synth_run(g.pl, NULL);
    const sim_device_report *d = NULL;
    for (int i = 0; i < r->ndevices; i++)
        if (r->devices[i].device == T) d = &r->devices[i]; /* stage 1 */
    cr_assert_not_null(d);
    cr_expect_eq(d->max_inflight, PP - 1);
    double want = (PP - 1) * g.L * none + 2 * sbh;
    cr_expect(close_to(d->mem.activations, want, 1e-12), "%g vs %g", d->mem.activations, want);
    sim_report_free(r);
    plan_free(g.pl);
}

/* GPT-3 175B at tp 8, pp 2 (48 blocks a stage), 1F1B: the second (last) stage holds one
 * microbatch, its input, its 48 blocks' inputs and saved tensors and the head's bytes
 * (read from the profile), and at its peak the next microbatch's input, received before
 * its forward. Without sequence parallelism that input is the whole s b h tensor on every
 * tensor rank, 2 x 2048 x 1 x 12288 = 50331648 bytes (48 MiB) in bf16, though each rank's
 * transfer moved 1 / 8 of it (Megatron-LM's scatter-gather sends 1 / t and all-gathers it
 * after the receive); with sequence parallelism it is 1 / 8 of it, 6291456 bytes. */
Test(sim_3d, received_input_whole_per_tensor_rank)
{
    for (int sp = 0; sp <= 1; sp++) {
        gpt_case g = gpt_plan_pp(sp, 2);
        const profile *p = g.pl->prof;
        double s = g.s, b = g.b, h = g.h, a = g.a, t = T, sbh = s * b * h;
        double block = sp ? sbh / t * (34 + 5 * a * s / h)
                          : sbh * (10 + 24 / t + 5 * a * s / (h * t));
        double x = sp ? 2 * sbh / t : 2 * sbh; /* a block's output, the stage's input */
        double head = 0;
        for (int l = 1 + 2 * (int)g.L; l < p->nlayers; l++)
            head += p->layers[l].activation_bytes + p->layers[l].saved_bytes;
        cr_assert_eq(x, sp ? 6291456.0 : 50331648.0);
        sim_report *r = synth_run(g.pl, NULL);
        const sim_device_report *d = NULL;
        for (int i = 0; i < r->ndevices; i++)
            if (r->devices[i].device == T) d = &r->devices[i]; /* stage 1 */
        cr_assert_not_null(d);
        cr_expect_eq(d->max_inflight, 1);
        /* 48 x (a block's input, the first's the stage's, and saved) + the last block's
         * output + the head, then the received input */
        double want = g.L * block + x + head + x;
        cr_expect(close_to(d->mem.activations, want, 1e-12), "sp %d: %.0f vs %.0f (diff %.0f)",
                  sp, d->mem.activations, want, d->mem.activations - want);
        sim_report_free(r);
        plan_free(g.pl);
    }
}

/* A layout3d plan of `model` on one DGX A100 (8 GPUs): tp 1, pp, dp 8 / pp, 2 pp
 * microbatches of 1 sequence of 1024 tokens per replica, v virtual stages per rank,
 * recompute rc; pipeline rank k's first replica on device k (8 / pp). */
static plan *layout_plan(const char *model, int pp, int v, int rc, int flash)
{
    plumb_err e = {{0}};
    transformer *t;
    cluster *c;
    load_model(model, &t, &c);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 8;
    o.tp = 1;
    o.pp = pp;
    o.dp = 8 / pp;
    o.global_batch = 2 * pp * (8 / pp);
    o.microbatch_size = 1;
    o.interleave = v;
    o.recompute = rc;
    o.seq = 1024;
    o.attention = flash ? LLM_ATTN_FLASH : LLM_ATTN_STANDARD;
    plan *pl = layout3d_build(t, c, A100, &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cluster_free(c);
    transformer_free(t);
    return pl;
}

/* The report of device `device`. */
static const sim_device_report *dev_of(const sim_report *r, int device)
{
    for (int i = 0; i < r->ndevices; i++)
        if (r->devices[i].device == device) return &r->devices[i];
    cr_assert_fail("no device %d in the report", device);
    return NULL;
}

static sim_report *run_ok(const plan *pl)
{
    sim_report *r = synth_run(pl, NULL);
    return r;
}

/* A device recomputes one block at a time: with 2 virtual stages per rank, selective
 * recomputation adds one block's attention-core tensors (5 a s^2 b bytes for GPT-2 with
 * dropout) to the device's activations, not one per virtual stage. The reference is the
 * same plan whose blocks keep exactly their selective bytes (nothing recomputed to hold). */
Test(sim_3d, recompute_transient_once_per_device)
{
    plan *pl = layout_plan("examples/llm/gpt2.json", 2, 2, RECOMPUTE_SELECTIVE, 0);
    cr_assert_eq(pl->nstages, 4);
    sim_report *sel = run_ok(pl);
    for (int l = 0; l < pl->prof->nlayers; l++)
        if (pl->prof->layers[l].selective_saved_bytes >= 0)
            pl->prof->layers[l].saved_bytes = pl->prof->layers[l].selective_saved_bytes;
    sim_report *ref = run_ok(pl);
    double s = 1024, a = 12, x = 5 * a * s * s;
    for (int k = 0; k < 2; k++) {
        int d = k * 4;
        double got = dev_of(sel, d)->mem.activations - dev_of(ref, d)->mem.activations;
        cr_expect(close_to(got, x, 1e-12), "device %d: %g, one block's %g (x %g)", d, got, x,
                  got / x);
    }
    sim_report_free(sel);
    sim_report_free(ref);
    plan_free(pl);
}

/* A head tied to the embedding on the same device (pp 1) holds the vocabulary matrix once:
 * weights = the model's parameters (tied counted once) x 2 bytes; at pp 2 the last stage
 * holds its own copy (Megatron-LM keeps both and all-reduces their gradients). */
Test(sim_3d, tied_head_counted_once_on_one_device)
{
    plumb_err e = {{0}};
    transformer *t = transformer_load("examples/llm/gpt2.json", &e);
    cr_assert_not_null(t, "%s", e.msg);
    double params = (double)transformer_param_count(t), vocab = (double)t->vocab * t->hidden;
    transformer_free(t);
    plan *pl = layout_plan("examples/llm/gpt2.json", 1, 1, RECOMPUTE_NONE, 1);
    sim_report *r = run_ok(pl);
    plan_free(pl);
    cr_expect(close_to(dev_of(r, 0)->mem.weights, 2 * params, 1e-12), "%g vs %g",
              dev_of(r, 0)->mem.weights, 2 * params);
    sim_report_free(r);
    pl = layout_plan("examples/llm/gpt2.json", 2, 1, RECOMPUTE_NONE, 1);
    r = run_ok(pl);
    plan_free(pl);
    double w = dev_of(r, 0)->mem.weights + dev_of(r, 4)->mem.weights;
    cr_expect(close_to(w, 2 * (params + vocab), 1e-12), "%g vs %g", w, 2 * (params + vocab));
    sim_report_free(r);
}

/* Schedules that mix whole backwards (B) and split ones (I, W) in one list (DualPipeV) free
 * a microbatch's activations at its B or at its W: the device's activations stay within
 * what its in-flight microbatches hold. The bound, written here: at most 2 pp + 2
 * microbatches of the largest stash per virtual stage (DualPipeV's warm-up holds 2 pp - 1
 * across its two chunks) plus the largest recompute transient and received input. Before
 * the fix a B in such a list never freed, and GPT-2 at pp 2 held every microbatch. */
Test(sim_3d, mixed_backward_kinds_free_their_microbatch)
{
    plumb_err e = {{0}};
    transformer *t;
    cluster *c;
    load_model("examples/llm/gpt2.json", &t, &c);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 8, o.tp = 1, o.pp = 2, o.dp = 4;
    o.global_batch = 32 * 4; /* 32 per replica: far more than are ever in flight */
    o.microbatch_size = 1, o.seq = 1024;
    o.schedule = SCHED_DUALPIPEV;
    plan *pl = layout3d_build(t, c, A100, &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cluster_free(c);
    transformer_free(t);
    sim_report *r = run_ok(pl);
    double stash = 0, cut = 0;
    for (int s = 0; s < r->nstages; s++) {
        if (r->stages[s].activation_bytes > stash) stash = r->stages[s].activation_bytes;
        if (r->stages[s].send_bytes > cut) cut = r->stages[s].send_bytes;
    }
    for (int i = 0; i < r->ndevices; i++) {
        double a = r->devices[i].mem.activations, bound = (2 * 2 + 2) * stash + 2 * cut;
        cr_expect(a > 0 && a <= bound, "device %d: activations %g above %g (%.1f microbatches)",
                  r->devices[i].device, a, bound, a / stash);
    }
    sim_report_free(r);
    plan_free(pl);
}

/* ---- (e) what a Megatron-LM-style runtime keeps between iterations ---------------------- */

/* The JSON report's kept_inputs_bytes of device `device`, or -1 when the key is absent. */
static double json_kept(const sim_report *r, int device)
{
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    cr_assert_not_null(j);
    double v = -1;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "devices"))
    {
        if (cJSON_GetObjectItemCaseSensitive(d, "device")->valuedouble != device) continue;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(d, "memory");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(m, "kept_inputs_bytes");
        if (k) v = k->valuedouble;
    }
    cJSON_Delete(j);
    return v;
}

/* Megatron-LM hands each model chunk its received input (set_input_tensor: the chunk's
 * TransformerBlock keeps it until its next forward) and retains that input's gradient
 * (backward_step: retain_grad), so after the last microbatch every chunk that receives
 * its input still holds one s x b x h tensor and its gradient, in bf16 2 x 2 s b h bytes,
 * outside the peak. GPT-2 (h 768) at pp 2 with 2 virtual stages per rank, sequences of
 * 1024, microbatch 1: rank 0 (device 0) holds stages 0 and 2, of which stage 2 receives:
 * 2 x 2 x 1024 x 768 = 3,145,728 bytes; rank 1 (device 4) stages 1 and 3: twice that. At
 * pp 1 nothing is received: 0, and the JSON report leaves the key out. The peak (total)
 * is the sum of the other terms, as before. */
Test(sim_3d, kept_inputs_between_iterations)
{
    const double one = 2.0 * 2 * 1024 * 768;
    plan *pl = layout_plan("examples/llm/gpt2.json", 2, 2, RECOMPUTE_NONE, 1);
    cr_assert_eq(pl->nstages, 4);
    sim_report *r = run_ok(pl);
    plan_free(pl);
    for (int d = 0; d <= 4; d += 4) {
        const sim_memory *m = &dev_of(r, d)->mem;
        double want = d == 0 ? one : 2 * one;
        cr_expect(close_to(m->kept_inputs, want, 1e-12), "device %d: %g vs %g", d,
                  m->kept_inputs, want);
        cr_expect(close_to(json_kept(r, d), want, 1e-12), "device %d: JSON %g", d,
                  json_kept(r, d));
        double sum = m->weights + m->gradients + m->optimizer + m->activations + m->buffers +
                     m->workspace + m->staging;
        cr_expect(close_to(m->total, sum, 1e-12), "device %d: peak %g vs %g", d, m->total, sum);
    }
    sim_report_free(r);
    pl = layout_plan("examples/llm/gpt2.json", 1, 1, RECOMPUTE_NONE, 1);
    r = run_ok(pl);
    plan_free(pl);
    cr_expect_eq(dev_of(r, 0)->mem.kept_inputs, 0);
    cr_expect_eq(json_kept(r, 0), -1);
    sim_report_free(r);
}

/* The kept input is the tensor a rank receives: with tensor parallelism alone the whole
 * s b h activation on every rank (2 x 2 s b h bytes in bf16), with sequence parallelism
 * its 1 / t share (2 x 2 s b h / t). GPT-3 175B at tp 8 over 8 stages, one stage per
 * device group: the first stage (device 0) receives nothing, the second (device 8) one
 * input. */
Test(sim_3d, kept_inputs_per_tensor_rank)
{
    for (int sp = 0; sp <= 1; sp++) {
        gpt_case g = gpt_plan(sp);
        double sbh = g.s * g.b * g.h, want = 2 * 2 * sbh / (sp ? T : 1);
        sim_report *r = synth_run(g.pl, NULL);
        cr_expect_eq(dev_of(r, 0)->mem.kept_inputs, 0, "sp %d", sp);
        cr_expect(close_to(dev_of(r, T)->mem.kept_inputs, want, 1e-12), "sp %d: %g vs %g", sp,
                  dev_of(r, T)->mem.kept_inputs, want);
        sim_report_free(r);
        plan_free(g.pl);
    }
}

/* The pipeline send's form at tp 8 without sequence parallelism (plan p2p_split): GPT-3
 * 175B at tp 8 x pp 2 on DGX A100s (stage 0 on devices 0-7, stage 1 on 8-15: the send
 * crosses InfiniBand, 200 Gbit/s, 5 us), one microbatch, synchronous transfers. A stage's
 * output is 2 s b h = 50331648 bytes in bf16: scatter-gather (the default) sends 1 / 8 of
 * it per tensor rank, whole all of it, 8 times the bytes. One microbatch runs F0, the
 * activation's send, F1, B1, the gradient's send, B0 and the steps in a chain, so the
 * iteration grows by 2 x (x - x / 8) / rate exactly (the latencies cancel). With sequence
 * parallelism the choice changes nothing (the send is s / t x b x h already). */
Test(sim_3d, p2p_split_whole_sends_t_times_the_bytes)
{
    sim_net net;
    double rate, lat;
    for (int sp = 0; sp <= 1; sp++) {
        gpt_case g = gpt_plan_pp(sp, 2);
        double x = 2 * g.s * g.b * g.h, t = T;
        g.pl->microbatches = 1;
        g.pl->p2p_sync = 1;
        sim_net_from_cluster(&net, g.pl->clus, NULL);
        cr_assert_eq(sim_net_path(&net, 0, T, &rate, &lat), 1);
        cr_assert(close_to(rate, 25e9, 1e-12), "%g", rate);
        cr_assert_eq(g.pl->p2p_whole, 0); /* the default */
        sim_report *sg = synth_run(g.pl, NULL);
        g.pl->p2p_whole = 1;
        sim_report *wh = synth_run(g.pl, NULL);
        double want_sg = x / t, want_wh = sp ? x / t : x; /* sp: x is s / t b h */
        cr_expect(close_to(sg->stages[0].send_bytes, want_sg, 1e-12), "sp %d: %.0f",
                  sp, sg->stages[0].send_bytes);
        cr_expect(close_to(wh->stages[0].send_bytes, want_wh, 1e-12), "sp %d: %.0f",
                  sp, wh->stages[0].send_bytes);
        /* 3.52 ms less the scatter-gather's two all-gathers after the receives over the
         * NVLink ring (scatter_gather_prices_the_all_gather_after_receives): 0.34 ms */
        double ag = (t - 1) / t * x / 300e9 + (t - 1) * 3e-6;
        double dt = sp ? 0 : 2 * (x - x / t) / rate - 2 * ag;
        cr_expect(close_to(wh->iteration_s - sg->iteration_s, dt, 1e-6) ||
                      (sp && fabs(wh->iteration_s - sg->iteration_s) < 1e-12),
                  "sp %d: whole %.6f s, scatter-gather %.6f s (diff %.6f, want %.6f)", sp,
                  wh->iteration_s, sg->iteration_s, wh->iteration_s - sg->iteration_s, dt);
        /* the what-if (sim_options.p2p_whole, plumb sim --p2p-split) is the plan field:
         * the scatter-gather plan run as whole gives the whole plan's figures */
        g.pl->p2p_whole = 0;
        sim_options o;
        sim_options_init(&o);
        o.p2p_whole = 1;
        sim_report *wi = synth_run(g.pl, &o);
        cr_expect_eq(wi->iteration_s, wh->iteration_s, "sp %d: what-if %.9f s, plan %.9f s",
                     sp, wi->iteration_s, wh->iteration_s);
        cr_expect_eq(wi->stages[0].send_bytes, wh->stages[0].send_bytes);
        cr_expect(sim_options_has_whatif(&wi->whatif));
        sim_report_free(wi);
        sim_report_free(sg);
        sim_report_free(wh);
        plan_free(g.pl);
    }
}

/* GPT-3 175B (2048 tokens, microbatch 1, bf16) on DGX A100s at tp t x pp 2 (x dp 4 at tp
 * 1, a whole server) with v
 * virtual stages per rank, one microbatch per pipeline rank, p2p sync, built by the layout
 * search's builder; sp: sequence parallelism, whole: p2p_split whole. */
static plan *gather_plan(int t, int v, int sp, int whole)
{
    plumb_err e = {{0}};
    transformer *tr;
    cluster *c;
    load_model(GPT3, &tr, &c);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 2 * t < 8 ? 8 : 2 * t; /* whole servers */
    o.tp = t;
    o.pp = 2;
    o.dp = o.gpus / (2 * t);
    o.global_batch = o.dp * (v > 1 ? 2 : 1);
    o.microbatch_size = 1;
    o.interleave = v;
    o.seq = 2048;
    o.sequence_parallel = sp;
    o.p2p_sync = 1;
    o.p2p_whole = whole;
    plan *pl = layout3d_build(tr, c, A100, &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cluster_free(c);
    transformer_free(tr);
    return pl;
}

/* The scatter-gather sends' all-gather after each receive (Megatron-LM's
 * gather_split_1d_tensor), priced inside the receiver's F (forward input) and B / I
 * (output gradient). GPT-3 at tp 8 x pp 2, one microbatch, p2p sync: the cut is x = 2 s b
 * h = 2 x 2048 x 12288 = 50331648 bytes; the scatter-gather sends x / 8 over a rank's own
 * 25 GB/s NIC where whole sends x, and stage 1's F and stage 0's B each all-gather x over
 * the server's NVLink ring of 8 (300 GB/s, 3 us a hop): g = 7 / 8 x 50331648 / 300e9 +
 * 7 x 3e-6 = 146.8 us + 21 us = 167.8 us. So against whole sends the iteration is 2 x 7 / 8
 * x 50331648 / 25e9 = 3.523 ms shorter and 2 g = 0.336 ms longer: it grows by exactly the
 * two all-gathers against the scatter-gather left unpriced. Stage 0's F and stage 1's B
 * receive nothing. Nothing changes with sequence parallelism (the send is one rank's
 * share, nothing gathered), with whole sends, or at tp 1. Interleaved (2 virtual stages per
 * rank): every chunk that receives gathers, the first chunk's F and the last's B do not. */
Test(sim_3d, scatter_gather_prices_the_all_gather_after_receives)
{
    const double x = 2.0 * 2048 * 12288, t = T, nic = 25e9, nvl = 300e9, lat = 3e-6;
    const double g = (t - 1) / t * x / nvl + (t - 1) * lat;
    cr_assert(close_to(g, 167.8e-6, 1e-3), "%g", g);
    for (int sp = 0; sp <= 1; sp++) {
        plan *ps = gather_plan(T, 1, sp, 0), *pw = gather_plan(T, 1, sp, 1);
        sim_report *sg = synth_run(ps, NULL), *wh = synth_run(pw, NULL);
        double dg = sp ? 0 : g, dsend = sp ? 0 : 2 * (x - x / t) / nic;
        cr_expect(close_to(sg->stages[1].forward_s - wh->stages[1].forward_s, dg, 1e-9) ||
                      (sp && fabs(sg->stages[1].forward_s - wh->stages[1].forward_s) < 1e-15),
                  "sp %d: stage 1 F %.9f against %.9f", sp, sg->stages[1].forward_s,
                  wh->stages[1].forward_s);
        cr_expect(close_to(sg->stages[0].backward_s - wh->stages[0].backward_s, dg, 1e-9) ||
                      (sp && fabs(sg->stages[0].backward_s - wh->stages[0].backward_s) < 1e-15),
                  "sp %d: stage 0 B %.9f against %.9f", sp, sg->stages[0].backward_s,
                  wh->stages[0].backward_s);
        cr_expect_eq(sg->stages[0].forward_s, wh->stages[0].forward_s, "sp %d", sp);
        cr_expect_eq(sg->stages[1].backward_s, wh->stages[1].backward_s, "sp %d", sp);
        /* the iteration: whole less the scatter-gather's saving on the sends, plus 2 g */
        double grown = sg->iteration_s - (wh->iteration_s - dsend);
        cr_expect(close_to(grown, 2 * dg, 1e-6) || (sp && fabs(grown) < 1e-12),
                  "sp %d: scatter-gather %.6f s, whole %.6f s: grown %.9f s, want %.9f", sp,
                  sg->iteration_s, wh->iteration_s, grown, 2 * dg);
        sim_report_free(sg);
        sim_report_free(wh);
        plan_free(ps);
        plan_free(pw);
    }
    /* tp 1: one rank, nothing scattered or gathered; whole changes nothing */
    plan *p1 = gather_plan(1, 1, 0, 0), *p1w = gather_plan(1, 1, 0, 1);
    sim_report *r1 = synth_run(p1, NULL), *r1w = synth_run(p1w, NULL);
    cr_expect_eq(r1->iteration_s, r1w->iteration_s);
    cr_expect_eq(r1->stages[1].forward_s, r1w->stages[1].forward_s);
    cr_expect_eq(r1->stages[0].backward_s, r1w->stages[0].backward_s);
    sim_report_free(r1);
    sim_report_free(r1w);
    plan_free(p1);
    plan_free(p1w);
    /* interleaved: virtual stages 0..3 on ranks 0, 1, 0, 1 */
    plan *pi = gather_plan(T, 2, 0, 0), *piw = gather_plan(T, 2, 0, 1);
    cr_assert_eq(pi->nstages, 4);
    sim_report *ri = synth_run(pi, NULL), *riw = synth_run(piw, NULL);
    for (int k = 0; k < 4; k++) {
        double df = ri->stages[k].forward_s - riw->stages[k].forward_s;
        double db = ri->stages[k].backward_s - riw->stages[k].backward_s;
        cr_expect(k == 0 ? df == 0 : close_to(df, g, 1e-9), "chunk %d F +%.9f", k, df);
        cr_expect(k == 3 ? db == 0 : close_to(db, g, 1e-9), "chunk %d B +%.9f", k, db);
    }
    sim_report_free(ri);
    sim_report_free(riw);
    plan_free(pi);
    plan_free(piw);
}

/* GPT-3 175B (2048 tokens, microbatch 1, bf16) at tp 8 x pp 4 on four DGX A100 servers,
 * v virtual stages per rank, 8 microbatches, p2p sync, whole sends (each rank sends the
 * whole 48 MiB cut over its own NIC), the servers' level-1 egress times nic_scale. */
static plan *lanes_plan(int v, double nic_scale)
{
    plumb_err e = {{0}};
    transformer *tr;
    cluster *c;
    load_model(GPT3, &tr, &c);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 32;
    o.tp = T;
    o.pp = 4;
    o.dp = 1;
    o.global_batch = 8;
    o.microbatch_size = 1;
    o.interleave = v;
    o.seq = 2048;
    o.p2p_sync = 1;
    o.p2p_whole = 1;
    plan *pl = layout3d_build(tr, c, A100, &o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cluster_free(c);
    transformer_free(tr);
    pl->clus->levels[1].egress_Bps *= nic_scale;
    return pl;
}

/* A tensor-parallel group's pipeline send holds a lane per rank of its own, its ranks'
 * NICs (sim_net_p2p_lanes; docs/sim.md, "Pipeline sends with tp > 1"), at the plan level.
 * Interleaved under p2p sync a rank's steady batch sends its output forward and its input
 * gradient back at once: 16 rank sends on a DGX A100 server's 8 NICs, so the two leave one
 * after the other, at least one send (x / 25 GB/s = 2.01 ms) more on the critical path than
 * on the same servers with two NICs a GPU (egress doubled: the group's own 16 lanes), where
 * they leave together; before the change (one lane a send) the two were equal (3.869859 s;
 * now 3.877227 s on 8 NICs). 1F1B sends one tensor a batch: the lanes suffice and the
 * iteration is the same bit for bit. */
Test(sim_3d, tp_group_sends_hold_their_ranks_nics)
{
    const double x = 2.0 * 2048 * 12288, nic = 25e9;
    for (int v = 1; v <= 2; v++) {
        plan *p8 = lanes_plan(v, 1), *p16 = lanes_plan(v, 2);
        sim_net net;
        sim_net_from_cluster(&net, p8->clus, NULL);
        cr_assert_eq(sim_net_lanes(&net, 1), 8);
        sim_report *a = synth_run(p8, NULL), *b = synth_run(p16, NULL);
        if (v == 1)
            cr_expect_eq(a->iteration_s, b->iteration_s, "1f1b: %.9f s on 8 NICs, %.9f s on 16",
                         a->iteration_s, b->iteration_s);
        else
            cr_expect_geq(a->iteration_s - b->iteration_s, x / nic - 1e-9,
                          "interleaved: %.6f s on 8 NICs, %.6f s on 16 (want at least %.6f s "
                          "more)", a->iteration_s, b->iteration_s, x / nic);
        sim_report_free(a);
        sim_report_free(b);
        plan_free(p8);
        plan_free(p16);
    }
}
