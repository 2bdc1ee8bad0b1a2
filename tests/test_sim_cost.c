/* test_sim_cost.c: the simulator's cost model: transfer bytes across a DAG's cut, the
 * zero-bubble split (from the profile, or half and half), per-device speed on a
 * heterogeneous cluster, the linear scaling from the profiled minibatch, and the optimizer
 * step's memory-bound cost. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/json.h"
#include "sim/cost.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1);
}

/* A 4-layer DAG with a skip connection 0 -> 2 (0 -> 1 -> 2 -> 3): cut after layer 1 carries
 * the outputs of layers 1 and 0 (layer 0 has a consumer beyond the cut), each once; the cut
 * after layer 2 carries layer 2's output only. Layer i's output is (i + 1) MB. */
Test(sim_cost, dag_cut_bytes)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 4;
    plan *pl = synth_plan(&s);
    profile *p = pl->prof;
    for (int i = 0; i < 4; i++)
        p->layers[i].activation_bytes = (i + 1) * 1e6;
    profile_edge edges[] = {{0, 1}, {1, 2}, {0, 2}, {2, 3}};
    free(p->edges); /* profile_alloc left a placeholder */
    p->edges = malloc(sizeof edges);
    memcpy(p->edges, edges, sizeof edges);
    p->nedges = 4;
    /* stages: [0, 1] and [2, 3] */
    int d0 = 0, d1 = 1;
    plan_set_stage(pl, 0, 0, 1, 1, &d0);
    plan_set_stage(pl, 1, 2, 3, 1, &d1);
    pl->nstages = 2;
    sim_report *r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].send_bytes, 2e6 + 1e6), "%g", r->stages[0].send_bytes);
    cr_expect(near(r->stages[1].send_bytes, 0));
    /* stage 1 stashes its input (3 MB) and its outputs (3 + 4 MB) per microbatch */
    cr_expect(near(r->stages[1].activation_bytes, 3e6 + 7e6), "%g",
              r->stages[1].activation_bytes);
    sim_report_free(r);
    /* stages [0..2] and [3]: layer 0's skip ends inside the first stage */
    plan_set_stage(pl, 0, 0, 2, 1, &d0);
    plan_set_stage(pl, 1, 3, 3, 1, &d1);
    r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].send_bytes, 3e6), "%g", r->stages[0].send_bytes);
    sim_report_free(r);
    pl->nstages = 4; /* plan_free frees every allocated stage */
    plan_free(pl);
}

/* I and W: from backward_input_ms / backward_weight_ms when the layer has them, else half of
 * its backward each; scaled by microbatch / minibatch like everything else. */
Test(sim_cost, zero_bubble_split)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.layers_per_stage = 2;
    s.microbatch_size = 64; /* twice the profiled 32 */
    plan *pl = synth_plan(&s);
    pl->prof->layers[0].backward_ms = 3;
    pl->prof->layers[0].backward_input_ms = 1;
    pl->prof->layers[0].backward_weight_ms = 2;
    pl->prof->layers[1].backward_ms = 4; /* no split: 2 + 2 */
    sim_report *r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].input_grad_s, 2 * (1 + 2) * 1e-3), "%g",
              r->stages[0].input_grad_s);
    cr_expect(near(r->stages[0].weight_grad_s, 2 * (2 + 2) * 1e-3));
    cr_expect(near(r->stages[0].backward_s, 2 * 7e-3));
    cr_expect(near(r->stages[0].forward_s, 2 * 2e-3));
    sim_report_free(r);
    plan_free(pl);
}

/* Two device types, speeds 4 and 1: the same stage takes a quarter of the time on the fast
 * one; a 2-stage pipeline (fast, slow) under pipedream runs at the slow stage's pace. */
Test(sim_cost, heterogeneous_speed)
{
    const char *text =
        "{\"format\": \"plumb-cluster/1\", \"name\": \"het\", \"levels\": ["
        "{\"name\": \"l0\", \"count\": 1, \"bandwidth_gbit_per_s\": 100, \"latency_us\": 0},"
        "{\"name\": \"l1\", \"count\": 2, \"bandwidth_gbit_per_s\": 100, \"latency_us\": 0}],"
        "\"device_types\": [{\"name\": \"fast\", \"memory_gib\": 80, \"speed\": 4},"
        "{\"name\": \"slow\", \"memory_gib\": 16, \"speed\": 1}],"
        "\"servers\": [{\"device_type\": \"fast\", \"count\": 1},"
        "{\"device_type\": \"slow\", \"count\": 1}]}";
    plumb_err e;
    cJSON *root = json_parse_text("het", text, strlen(text), &e);
    cr_assert_not_null(root, "%s", e.msg);
    cluster *c = cluster_from_json(root, "het", &e);
    cJSON_Delete(root);
    cr_assert_not_null(c, "%s", e.msg);
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 2;
    s.activation_bytes = 0;
    s.schedule = SCHED_PIPEDREAM;
    s.microbatches = 8;
    plan *syn = synth_plan(&s);
    plan *pl = plan_new(syn->prof, c, 2);
    int d0 = 0, d1 = 1;
    plan_set_stage(pl, 0, 0, 0, 1, &d0);
    plan_set_stage(pl, 1, 1, 1, 1, &d1);
    pl->schedule = SCHED_PIPEDREAM;
    pl->microbatches = 8;
    sim_options o;
    sim_options_init(&o);
    o.iterations = 4;
    sim_report *r = synth_run(pl, &o);
    cr_expect(near(r->stages[0].forward_s, 1e-3 / 4));
    cr_expect(near(r->stages[1].forward_s, 1e-3));
    cr_expect_str_eq(r->devices[0].type, "fast");
    cr_expect(near(r->devices[1].mem.capacity, 16.0 * 1073741824));
    /* the slow stage steps after each backward: 3 x 4 MB at its default 0.9 TB/s */
    cr_expect(near(r->stages[1].step_s, 12e6 / 0.9e12));
    cr_expect(near(r->iteration_s, 8 * (3e-3 + r->stages[1].step_s)), "%g", r->iteration_s);
    sim_report_free(r);
    plan_free(pl);
    plan_free(syn);
    cluster_free(c);
}

/* sim_cost_build refuses a schedule whose stages do not match the plan's. */
Test(sim_cost, schedule_must_match_plan)
{
    sim_synth s;
    sim_synth_init(&s);
    plan *pl = synth_plan(&s);
    s.nstages = 3;
    plan *other = synth_plan(&s);
    plumb_err e;
    schedule *sch = schedule_from_plan(other, 1, &e);
    cr_assert_not_null(sch, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    o.sched = sch;
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "stages") != NULL, "%s", e.msg);
    schedule_free(sch);
    plan_free(pl);
    plan_free(other);
}

/* Memory bandwidth of a device type: known names, else 0.07 B/FLOP of its peak, else
 * 0.9 TB/s x its speed. */
Test(sim_cost, device_memory_bandwidth)
{
    device_type t = {.name = "H200-SXM-141GB", .speed = 4, .peak_flops = 67e12};
    cr_expect(near(sim_device_mem_Bps(&t), 4.8e12));
    t.name = "V100-PCIe-16GB";
    cr_expect(near(sim_device_mem_Bps(&t), 0.9e12));
    t.name = "cpu-worker";
    cr_expect(near(sim_device_mem_Bps(&t), 10e9));
    t.name = "mystery";
    t.peak_flops = 10e12;
    cr_expect(near(sim_device_mem_Bps(&t), 0.7e12));
    t.peak_flops = 0;
    t.speed = 2;
    cr_expect(near(sim_device_mem_Bps(&t), 1.8e12));
    cr_expect(near(sim_device_mem_Bps(NULL), 0.9e12));
    cr_expect(near(sim_step_bytes_per_param(OPT_SGD), 3));
    cr_expect(near(sim_step_bytes_per_param(OPT_MOMENTUM), 5));
    cr_expect(near(sim_step_bytes_per_param(OPT_ADAM), 7));
}

/* The optimizer step is memory-bound: one stage on one device (no pipeline), 4 layers of
 * 100 MB parameters: the step moves k x 400 MB (k = 3 sgd, 5 momentum, 7 adam) at the
 * synthetic device's 0.9 TB/s, after the iteration's compute m (F + B); a straggler
 * slows it like the compute. */
/* One stage on one device, 4 layers of 100 MB parameters and no activations, 2
 * microbatches: the plan of the optimizer-step tests. */
static void step_synth(sim_synth *s)
{
    sim_synth_init(s);
    s->nstages = 1;
    s->layers_per_stage = 4;
    s->microbatches = 2;
    s->activation_bytes = 0;
    s->parameter_bytes = 100e6;
}

Test(sim_cost, optimizer_step_time)
{
    sim_synth s;
    step_synth(&s);
    static const optimizer_kind opts[] = {OPT_SGD, OPT_MOMENTUM, OPT_ADAM};
    static const double k[] = {3, 5, 7};
    for (int i = 0; i < 3; i++) {
        s.optimizer = opts[i];
        plan *pl = synth_plan(&s);
        sim_options o;
        sim_options_init(&o);
        o.timeline = 1;
        sim_report *r = synth_run(pl, &o);
        double step = k[i] * 400e6 / 0.9e12;
        cr_expect(near(r->stages[0].step_s, step), "%g vs %g", r->stages[0].step_s, step);
        cr_expect(near(r->iteration_s, 2 * 4 * 3e-3 + step), "%g", r->iteration_s);
        cr_expect(near(r->devices[0].busy_s, r->iteration_s));
        int steps = 0;  /* the timeline shows each step with its time */
        for (size_t j = 0; j < r->tl->n; j++)
            if (r->tl->ev[j].kind == TL_STEP) {
                steps++;
                cr_expect(near(r->tl->ev[j].dur_s, step));
            }
        cr_expect_eq(steps, r->iterations);
        o.timeline = 0;
        o.straggler_device = 0;
        o.straggler_factor = 2;
        sim_report *slow = synth_run(pl, &o);
        cr_expect(near(slow->iteration_s, 2 * r->iteration_s), "%g", slow->iteration_s);
        sim_report_free(slow);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* An input node (kind "Input": PipeDream's data-loading time) costs the device nothing:
 * stage 0 of 3 one-ms layers, the first an Input of 500 ms, takes 2 ms of forward, scaled
 * to the microbatch as the other layers are. */
Test(sim_cost, input_layer_costs_no_device_time)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 2;
    s.layers_per_stage = 3;
    plan *pl = synth_plan(&s);
    sim_report *base = synth_run(pl, NULL);
    free(pl->prof->layers[0].kind);
    pl->prof->layers[0].kind = strdup("Input");
    pl->prof->layers[0].forward_ms = 500;
    sim_report *r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].forward_s, base->stages[0].forward_s * 2 / 3), "%g vs %g",
              r->stages[0].forward_s, base->stages[0].forward_s);
    cr_expect(near(r->stages[1].forward_s, base->stages[1].forward_s));
    sim_report_free(r);
    sim_report_free(base);
    plan_free(pl);
}

/* A measured optimizer step (the profile's step_ns_per_byte) replaces the memory-bound
 * price: 4 layers of 100 MB at 0.25 ns per parameter byte (sgd) step in 0.1 s; doubling
 * the measured cost doubles the step and lengthens the iteration by that much; a speed-2
 * device steps twice as fast; other optimizers keep the memory-bound price. Checked by
 * hand against sim_cost_step_Bps: sgd moves 3 bytes per parameter byte. */
Test(sim_cost, measured_optimizer_step)
{
    sim_synth s;
    step_synth(&s);
    s.optimizer = OPT_SGD;
    plan *pl = synth_plan(&s);
    sim_report *base = synth_run(pl, NULL);
    cr_expect(near(base->stages[0].step_s, 3 * 400e6 / 0.9e12));
    pl->prof->step_ns_per_byte[OPT_SGD] = 0.25;
    sim_report *r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].step_s, 400e6 * 0.25e-9), "%g", r->stages[0].step_s);
    cr_expect(near(r->iteration_s, 2 * 4 * 3e-3 + 0.1), "%g", r->iteration_s);
    pl->prof->step_ns_per_byte[OPT_SGD] = 0.5;
    sim_report *r2 = synth_run(pl, NULL);
    cr_expect(near(r2->stages[0].step_s, 0.2), "%g", r2->stages[0].step_s);
    cr_expect(near(r2->iteration_s - r->iteration_s, 0.1), "%g", r2->iteration_s);
    device_type t = {.name = "cpu-worker", .speed = 2};
    cr_expect(near(sim_cost_step_Bps(pl->prof, OPT_SGD, &t), 3 / 0.5e-9 * 2));
    cr_expect(near(sim_cost_step_Bps(pl->prof, OPT_ADAM, &t), 10e9)); /* not measured */
    cr_expect(near(sim_cost_step_Bps(NULL, OPT_SGD, NULL), 0.9e12));
    sim_report_free(base);
    sim_report_free(r);
    sim_report_free(r2);
    plan_free(pl);
}

/* The batch gather (the profile's input_gather_ms) is added to the F of the first and the
 * last stage only, once to a stage that is both, scaled from the profiled minibatch (32)
 * to the microbatch (64): 2 ms -> 4 ms. */
Test(sim_cost, batch_gather_in_first_and_last_f)
{
    cr_expect(near(sim_cost_gather_s(NULL, 64), 0));
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    s.layers_per_stage = 2;
    s.microbatch_size = 64;
    plumb_err e;
    plan *pl = synth_plan(&s);
    cr_expect(near(sim_cost_gather_s(pl->prof, 64), 0));
    sim_report *base = synth_run(pl, NULL);
    pl->prof->input_gather_ms = 2;
    cr_expect(near(sim_cost_gather_s(pl->prof, 64), 4e-3));
    cr_expect(near(sim_cost_gather_s(pl->prof, 16), 1e-3));
    sim_report *r = synth_run(pl, NULL);
    cr_expect(near(r->stages[0].forward_s, base->stages[0].forward_s + 4e-3), "%g",
              r->stages[0].forward_s);
    cr_expect(near(r->stages[1].forward_s, base->stages[1].forward_s));
    cr_expect(near(r->stages[2].forward_s, base->stages[2].forward_s + 4e-3));
    cr_expect(near(r->stages[0].backward_s, base->stages[0].backward_s));
    sim_report_free(base);
    sim_report_free(r);
    plan_free(pl);
    s.nstages = 1; /* first and last: once */
    pl = synth_plan(&s);
    base = sim_run(pl, NULL, &e);
    pl->prof->input_gather_ms = 2;
    r = sim_run(pl, NULL, &e);
    cr_assert(base && r, "%s", e.msg);
    cr_expect(near(r->stages[0].forward_s, base->stages[0].forward_s + 4e-3));
    sim_report_free(base);
    sim_report_free(r);
    plan_free(pl);
}

/* Shared cores: 4 workers on one server whose type has 2 cores compute at half speed
 * (F, B and the step twice as long); with 4 cores, or no cores given, at full speed. */
Test(sim_cost, shared_cores)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 4;
    s.devices_per_server = 4;
    s.servers = 1;
    plan *pl = synth_plan(&s);
    int wd[4] = {0, 1, 2, 3};
    cr_expect(near(sim_cost_core_share(pl->clus, wd, 4, 0), 1));
    sim_report *base = synth_run(pl, NULL);
    pl->clus->types[0].cores = 2;
    cr_expect(near(sim_cost_core_share(pl->clus, wd, 4, 0), 2));
    cr_expect(near(sim_cost_core_share(pl->clus, wd, 2, 0), 1)); /* 2 workers, 2 cores */
    cr_expect(near(sim_cost_core_share(pl->clus, wd, 3, 3), 1.5));
    sim_report *r = synth_run(pl, NULL);
    for (int st = 0; st < 4; st++) {
        cr_expect(near(r->stages[st].forward_s, 2 * base->stages[st].forward_s));
        cr_expect(near(r->stages[st].backward_s, 2 * base->stages[st].backward_s));
        cr_expect(near(r->stages[st].step_s, 2 * base->stages[st].step_s));
    }
    pl->clus->types[0].cores = 4;
    sim_report *r4 = synth_run(pl, NULL);
    cr_expect(near(r4->iteration_s, base->iteration_s));
    sim_report_free(base);
    sim_report_free(r);
    sim_report_free(r4);
    plan_free(pl);
}
