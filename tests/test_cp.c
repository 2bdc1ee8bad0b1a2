/* test_cp.c: context parallelism (--cp, docs/llm.md "Context parallelism"): a context-parallel
 * rank's share of the compute (half of cp 1's FLOPs at cp 2, its activations those of s / cp
 * tokens), the K/V ring's bytes and buffers by hand, Megatron-Core's device order (tp
 * fastest, then cp, then dp; plan_cp_device its one owner) and the data-parallel group over
 * dp x cp ranks, the ring's time in the simulator's cost, the engine's gradient ring over
 * every cp rank, of one replica or several (its transfers, the hops inside a replica's, and
 * their contention with the pipeline's sends; grouped as hop by hop), the plan file's "cp"
 * round trip, the one rule of where cp applies (llm_cp_check), and each bad input's one
 * line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/sim.h"
#include "llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"

/* A 4-block model of 8 heads (head width 32) with 2 key/value heads, 128 positions. */
static transformer *small_model(void) { return llmfix_small(2, 512); }

static cluster *a100(void) { return llmfix_cluster(A100); }

static profile *prof_at(int tp, int cp, long long seq)
{
    transformer *t = small_model();
    cluster *c = a100();
    llm_options o;
    llm_options_init(&o);
    o.tp = tp, o.cp = cp, o.seq = seq, o.attention = LLM_ATTN_FLASH;
    plumb_err err = {{0}};
    profile *p = llm_profile_build(t, c, A100, &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
    return p;
}

static layout3d_options opts(int tp, int cp, int pp, int dp)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = tp, o.cp = cp, o.pp = pp, o.dp = dp, o.global_batch = 8 * dp, o.microbatch_size = 1;
    o.attention = LLM_ATTN_FLASH;
    return o;
}

static plan *build(const layout3d_options *o, plumb_err *err)
{
    transformer *t = small_model();
    cluster *c = a100();
    plan *pl = layout3d_build(t, c, A100, o, err);
    cluster_free(c);
    transformer_free(t);
    return pl;
}

/* The small model's layout o on cluster c (NULL: dgx-a100-80g); fails the test, naming
 * label, when it is refused. The caller frees it with plan_free. */
static plan *build_ok(const layout3d_options *o, const cluster *c, const char *label)
{
    plumb_err err = {{0}};
    plan *pl;
    if (c) {
        transformer *t = small_model();
        pl = layout3d_build(t, c, "x.json", o, &err);
        transformer_free(t);
    } else {
        pl = build(o, &err);
    }
    cr_assert_not_null(pl, "%s: %s", label, err.msg);
    return pl;
}

/* The engine's model m of pl over iters iterations on its cluster's network (copied into
 * *net when not NULL); returns the schedule. The caller frees it with schedule_free and m
 * with sim_model_release. Fails the test, naming label, when either is refused. */
static schedule *model_of(const plan *pl, int iters, sim_model *m, sim_net *net,
                          const char *label)
{
    plumb_err err = {{0}};
    sim_net own;
    if (!net) net = &own;
    sim_net_from_cluster(net, pl->clus, NULL);
    schedule *s = schedule_from_plan(pl, iters, &err);
    cr_assert_not_null(s, "%s: %s", label, err.msg);
    cr_assert_eq(sim_cost_build(m, pl, s, net, -1, 1, &err), 0, "%s: %s", label, err.msg);
    return s;
}

/* m run by the engine grouped (into r[0]) and hop by hop (ring_per_hop, r[1]); fails the
 * test, naming label, when a run is refused. The caller frees both with sim_result_free. */
static void run_grouped_and_per_hop(sim_model *m, sim_result r[2], const char *label)
{
    plumb_err err = {{0}};
    for (int per_hop = 0; per_hop < 2; per_hop++) {
        m->ring_per_hop = per_hop;
        cr_assert_eq(sim_engine_run(m, &r[per_hop], &err), 0, "%s, %s: %s", label,
                     per_hop ? "hop by hop" : "grouped", err.msg);
    }
}

/* Each context-parallel rank computes s / cp tokens of every GEMM and 1 / cp of the causal
 * attention: every layer's FLOPs at cp 2 are half of cp 1's (the attention's 4 s^2 d per
 * head becomes 4 (s / 2) s d on the rank), and the head's are its GEMM's alone. */
Test(cp, compute_half)
{
    profile *one = prof_at(1, 1, 128), *two = prof_at(1, 2, 128);
    cr_assert_eq(two->cp, 2);
    cr_assert_eq(two->tokens_per_sample, 128, "tokens per sample stay the whole sequence");
    for (int l = 0; l < one->nlayers; l++)
        cr_assert_float_eq(two->layers[l].flops, one->layers[l].flops / 2, 1e-6,
                           "layer %d: %g against %g / 2", l, two->layers[l].flops,
                           one->layers[l].flops);
    /* the head: 2 M h V of the logits GEMM with M = 64 rows on the rank */
    cr_assert_float_eq(two->layers[5].flops, 2.0 * 64 * 256 * 1000, 1e-6);
    profile_free(one);
    profile_free(two);
}

/* The ring's chunk: the rank's K and V, 2 x (s / cp) x (kv heads / tp) x head width x 2
 * bytes = 2 x 64 x 1 x 32 x 2 = 8192 at tp 2, cp 2; its buffers the block's workspace,
 * max(cp - 1, 4) chunks (TE's forward list, its backward's two K/V + dK/dV buffers); no
 * ring at cp 1. */
Test(cp, ring_bytes_by_hand)
{
    profile *p = prof_at(2, 2, 128), *one = prof_at(2, 1, 128);
    for (int l = 1; l <= 4; l++) {
        cr_assert_float_eq(p->layers[l].cp_ring_bytes, 8192, 1e-9, "block %d", l);
        cr_assert_float_eq(p->layers[l].workspace_bytes, 4 * 8192, 1e-9);
        cr_assert_gt(p->layers[l].cp_attention_fwd_ms, 0);
        cr_assert_gt(p->layers[l].cp_attention_bwd_ms, p->layers[l].cp_attention_fwd_ms);
        cr_assert_eq(one->layers[l].cp_ring_bytes, 0);
    }
    cr_assert_eq(p->layers[0].cp_ring_bytes, 0, "the embedding has no ring");
    cr_assert_eq(p->layers[5].cp_ring_bytes, 0, "the head has no ring");
    profile_free(p);
    profile_free(one);
}

/* Memory: a block keeps for its backward what it keeps for s / cp tokens (the profile at
 * cp 2 and 128 tokens against cp 1 at 64), its output is s / cp tokens, and the weights do
 * not change. */
Test(cp, memory_terms)
{
    profile *two = prof_at(1, 2, 128), *half = prof_at(1, 1, 64), *one = prof_at(1, 1, 128);
    for (int l = 0; l < two->nlayers; l++) {
        cr_assert_float_eq(two->layers[l].saved_bytes, half->layers[l].saved_bytes, 1e-6,
                           "layer %d", l);
        cr_assert_float_eq(two->layers[l].activation_bytes, half->layers[l].activation_bytes,
                           1e-6, "layer %d", l);
        cr_assert_float_eq(two->layers[l].parameter_bytes, one->layers[l].parameter_bytes,
                           1e-9, "layer %d", l);
    }
    /* by hand for block 1 (rmsnorm, swiglu, flash, bf16): 64 rows; LN1 out, LN2 in and
     * out (3 x 256 x 2), Q and K (10 heads x 32 x 2), V (2 x 32 x 2), the output
     * projection's input (256 x 2), the softmax statistics (8 heads x 4), the MLP's 4
     * tensors of 512 (x 2) */
    double M = 64, byhand = M * (3 * 256 * 2 + 10 * 32 * 2 + 2 * 32 * 2 + 256 * 2 + 8 * 4 +
                                 4 * 512 * 2);
    cr_assert_float_eq(two->layers[1].saved_bytes, byhand, 1e-6, "%g against %g",
                       two->layers[1].saved_bytes, byhand);
    profile_free(two);
    profile_free(half);
    profile_free(one);
}

/* Megatron-Core's order tp-cp-dp-pp: at tp 2, cp 2, dp 2 on one 8-GPU server replica r of
 * the one stage starts at device 4 r, holds 4 devices, and its data-parallel group is
 * every context-parallel rank of every replica: devices 0, 2, 4, 6 (the first tensor rank's
 * of each), 4 ranks the gradients are reduced and the optimizer state sharded over. */
Test(cp, order_and_dp_group)
{
    layout3d_options o = opts(2, 2, 1, 2);
    plan *pl = build_ok(&o, NULL, "tp 2 cp 2 pp 1 dp 2");
    cr_assert_eq(pl->cp, 2);
    cr_assert_eq(pl->stages[0].replicas, 2);
    cr_assert_eq(pl->stages[0].devices[0], 0);
    cr_assert_eq(pl->stages[0].devices[1], 4);
    cr_assert_eq(plan_gpus(pl), 8);
    cr_assert_eq(plan_group_width(pl), 4);
    int devs[8];
    cr_assert_eq(sim_cost_dp_group(pl, 0, devs), 4);
    int want[4] = {0, 2, 4, 6};
    for (int i = 0; i < 4; i++) cr_assert_eq(devs[i], want[i], "member %d", i);
    /* the reduction: the ring over those 4 devices */
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model m;
    schedule s = {0};
    s.nstages = 1, s.nworkers = 2;
    cr_assert_eq(sim_model_alloc(&m, &s), 0);
    m.param_bytes = calloc(2, sizeof *m.param_bytes);
    m.gradmem_bytes = calloc(2, sizeof *m.gradmem_bytes);
    m.optmem_bytes = calloc(2, sizeof *m.optmem_bytes);
    sim_cost_stage_state(&m, pl, &net, 0, 1e9);
    cr_assert_float_eq(m.allreduce_s[0], sim_net_allreduce_s(&net, devs, 4, m.grad_bytes[0]),
                       1e-12);
    /* ZeRO off: fp32 main gradients of bf16 weights reduced, unscaled: the engine's ring
     * runs the 4 members' steps (ring_members) */
    cr_assert_float_eq(m.grad_bytes[0], 2e9, 1);
    cr_assert_eq(m.ring_members[0], 4);
    sim_model_release(&m);
    plan_free(pl);
}

/* plan_tp and plan_cp, the one clamp of each degree: a plan's own degree, 1 below 1 (a plan
 * written without the field) and for no plan; plan_group_width is their product. */
Test(cp, degree_accessors)
{
    layout3d_options o = opts(2, 4, 1, 1);
    plan *pl = build_ok(&o, NULL, "tp 2 cp 4 pp 1 dp 1");
    cr_assert_eq(plan_tp(pl), 2);
    cr_assert_eq(plan_cp(pl), 4);
    cr_assert_eq(plan_group_width(pl), 8);
    pl->tp = 0, pl->cp = 0;
    cr_assert_eq(plan_tp(pl), 1);
    cr_assert_eq(plan_cp(pl), 1);
    cr_assert_eq(plan_group_width(pl), 1);
    pl->tp = 2, pl->cp = 4;
    cr_assert_eq(plan_tp(NULL), 1);
    cr_assert_eq(plan_cp(NULL), 1);
    cr_assert_eq(plan_group_width(NULL), 1);
    plan_free(pl);
}

/* plan_cp_device, the one owner of a replica's context ranks: at tp 2, cp 2, dp 2, pp 2 on
 * two 8-GPU servers, replica r of pipeline rank p starts at (2 p + r) 4 and its rank k is
 * the tensor group 2 k further; out of range is -1. The data-parallel group, the K/V ring
 * and the engine's ring devices (sim_model.ring_devices) are those devices. */
Test(cp, rank_devices_one_owner)
{
    layout3d_options o = opts(2, 2, 2, 2);
    o.gpus = 16;
    transformer *t = small_model();
    cluster *c = a100();
    plumb_err err = {{0}};
    plan *pl = layout3d_build(t, c, A100, &o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    for (int st = 0; st < 2; st++)
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 2; k++)
                cr_assert_eq(plan_cp_device(pl, st, r, k), (2 * st + r) * 4 + 2 * k,
                             "stage %d replica %d rank %d", st, r, k);
    cr_assert_eq(plan_cp_device(pl, 0, 0, 2), -1);
    cr_assert_eq(plan_cp_device(pl, 0, 2, 0), -1);
    cr_assert_eq(plan_cp_device(pl, 2, 0, 0), -1);
    cr_assert_eq(plan_cp_device(NULL, 0, 0, 0), -1);
    int devs[4];
    cr_assert_eq(sim_cost_dp_group(pl, 1, devs), 4);
    int want[4] = {8, 10, 12, 14};
    for (int i = 0; i < 4; i++) cr_assert_eq(devs[i], want[i], "member %d", i);
    sim_model m;
    schedule *s = model_of(pl, 2, &m, NULL, "tp 2 cp 2 pp 2 dp 2");
    cr_assert_eq(m.ring_members[1], 4);
    cr_assert_not_null(m.ring_devices[1]);
    for (int i = 0; i < 4; i++) cr_assert_eq(m.ring_devices[1][i], want[i], "member %d", i);
    sim_model_release(&m);
    schedule_free(s);
    plan_free(pl);
    cluster_free(c);
    transformer_free(t);
}

/* The ring in the cost: at cp 2 each block's forward moves one chunk and its backward two
 * per step over the ring's link; the steps' own time is that, and what blocks is no more;
 * nothing at cp 1. */
Test(cp, ring_cost)
{
    layout3d_options o = opts(1, 2, 1, 4);
    plumb_err err = {{0}};
    plan *pl = build_ok(&o, NULL, "tp 1 cp 2 pp 1 dp 4");
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_tp_times t;
    sim_cost_stage_cp(pl, &net, 0, &t);
    double rate, lat;
    sim_net_path(&net, 0, 1, &rate, &lat);
    double chunk = 2 * 64 * 2 * 32 * 2.0; /* K and V, 64 tokens, 2 kv heads, 32, bf16 */
    cr_assert_float_eq(t.comm_f, 4 * (chunk / rate + lat), 1e-12, "%g", t.comm_f);
    cr_assert_float_eq(t.comm_b, 4 * (2 * chunk / rate + lat), 1e-12, "%g", t.comm_b);
    cr_assert(t.f >= 0 && t.f <= t.comm_f);
    cr_assert(t.b >= 0 && t.b <= t.comm_b);
    cr_assert_float_eq(t.i, t.b, 1e-15);
    plan_free(pl);
    layout3d_options o1 = opts(1, 1, 1, 8);
    pl = build(&o1, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    sim_cost_stage_cp(pl, &net, 0, &t);
    cr_assert_eq(t.comm_f, 0);
    cr_assert_eq(t.f, 0);
    plan_free(pl);
}

/* The iteration of pl (iters iterations) by the engine, and in *priced the figure of the
 * model before the engine ran one replica's ring: no ring for a stage of one replica
 * (ring_members 0), what of its reduction outlasts the stage's last backward added to its
 * optimizer step instead, the engine's buckets replayed (each allreduce_s / K, ready
 * evenly through that backward, all at its end with grad_sync end; the cost's former
 * cp_reduce_exposed_s). */
static double run_both(const plan *pl, int iters, double *priced)
{
    plumb_err err = {{0}};
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    schedule *s = schedule_from_plan(pl, iters, &err);
    cr_assert_not_null(s, "%s", err.msg);
    double fig[2];
    for (int old = 0; old < 2; old++) {
        sim_model m;
        cr_assert_eq(sim_cost_build(&m, pl, s, &net, -1, 1, &err), 0, "%s", err.msg);
        for (int st = 0; old && st < pl->nstages; st++) {
            if (pl->stages[st].replicas > 1 || !(m.allreduce_s[st] > 0)) continue;
            double ar = m.allreduce_s[st], b = m.act_s[(size_t)st * SIM_NC + SIM_C_B];
            double kb = ceil(m.grad_bytes[st] / SIM_BUCKET_BYTES), end = 0;
            int K = kb < 1 ? 1 : kb > 4096 ? 4096 : (int)kb;
            for (int k = 0; k < K; k++) {
                double ready = pl->grad_sync_end ? b : b * (k + 1) / K;
                end = (end > ready ? end : ready) + ar / K;
            }
            m.act_s[(size_t)st * SIM_NC + SIM_C_STEP] += end - b;
            m.ring_members[st] = 0;
        }
        sim_result r;
        cr_assert_eq(sim_engine_run(&m, &r, &err), 0, "%s", err.msg);
        fig[old] = r.iteration_s;
        sim_result_free(&r);
        sim_model_release(&m);
    }
    schedule_free(s);
    *priced = fig[1];
    return fig[0];
}

/* dp 1, cp 4 (tp 2, pp 1): the stage's gradients are still reduced over its four cp
 * ranks, a ring over NVLink (devices 0, 2, 4, 6) of the fp32 gradients' bytes, 2 (4 - 1) / 4
 * bytes / rate + 2 (4 - 1) latencies. The engine runs it (one replica's ring over its
 * context ranks), hop by hop or grouped alike: per bucket its 2 (4 - 1) steps, each a
 * transfer on every hop 0 -> 2 -> 4 -> 6 -> 0 of a quarter of the bucket, nothing added to
 * the step; with no pipeline sends to share a port with, the iteration is the figure of
 * the former priced reduction within 0.1 %. */
Test(cp, reduce_dp1_runs_the_ring)
{
    layout3d_options o = opts(2, 4, 1, 1);
    plumb_err err = {{0}};
    plan *pl = build_ok(&o, NULL, "tp 2 cp 4");
    cr_assert_eq(pl->stages[0].replicas, 1);
    sim_net net;
    int iters = 3;
    sim_model m;
    schedule *s = model_of(pl, iters, &m, &net, "tp 2 cp 4");
    double rate, lat;
    cr_assert(sim_net_path(&net, 0, 2, &rate, &lat) >= 0);
    double g = m.grad_bytes[0], kb = ceil(g / SIM_BUCKET_BYTES), fig[2];
    cr_assert(g > 0);
    cr_assert_float_eq(m.allreduce_s[0], 1.5 * g / rate + 6 * lat,
                       1e-12 * (1 + m.allreduce_s[0]));
    cr_assert_eq(m.act_s[SIM_C_STEP], 0, "the step holds no priced reduction");
    cr_assert_eq(m.ring_members[0], 4);
    for (int per_hop = 0; per_hop < 2; per_hop++) {
        m.ring_per_hop = per_hop;
        sim_result r;
        cr_assert_eq(sim_engine_run(&m, &r, &err), 0, "%s", err.msg);
        int found = 0;
        for (int i = 0; i < r.nlinks; i++) {
            const sim_link_stat *l = &r.links[i];
            if (l->dst != (l->src + 2) % 8 || l->src % 2) continue;
            found++;
            cr_assert_eq(l->transfers, (long long)(iters * kb * 6), "%lld", l->transfers);
            cr_assert_float_eq(l->bytes, iters * g * 6 / 4, 1e-6 * g);
        }
        cr_assert_eq(found, 4, "links 0 -> 2 -> 4 -> 6 -> 0 (got %d)", found);
        fig[per_hop] = r.iteration_s;
        sim_result_free(&r);
    }
    cr_assert_eq(fig[0], fig[1], "grouped %.17g, hop by hop %.17g", fig[0], fig[1]);
    sim_model_release(&m);
    schedule_free(s);
    double priced, ran = run_both(pl, 3, &priced);
    cr_assert(fabs(ran / priced - 1) <= 1e-3, "%.9g against %.9g", ran, priced);
    pl->grad_sync_end = 1; /* the reduction after the last backward: all of it exposed */
    ran = run_both(pl, 3, &priced);
    cr_assert(fabs(ran / priced - 1) <= 1e-3, "grad_sync end: %.9g against %.9g", ran, priced);
    plan_free(pl);
}

/* n servers of per A100s each (2400 Gb/s among them) over 25 Gb/s Ethernet, each server's
 * egress egress_gbit Gb/s (25: one lane, as one link; 200: 8 lanes). */
static cluster *eth_servers(int per, int n, int egress_gbit)
{
    char text[1024];
    snprintf(text, sizeof text, "{\"format\": \"plumb-cluster/1\", \"name\": \"x\", "
             "\"levels\": [{\"name\": \"local\", \"count\": %d, "
             "\"bandwidth_gbit_per_s\": 2400, \"latency_us\": 3}, {\"name\": \"eth\", "
             "\"count\": %d, \"bandwidth_gbit_per_s\": 25, \"latency_us\": 5, "
             "\"egress_gbit_per_s\": %d}], \"device_types\": [{\"name\": "
             "\"A100\", \"memory_gib\": 79, \"speed\": 1, \"peak_tflops\": 19.5, "
             "\"peak_tflops_by_precision\": {\"bf16\": 312}, "
             "\"memory_gbyte_per_s\": 2039, \"efficiency\": {\"gemm\": 0.77, "
             "\"attention\": 0.5, \"memory\": 0.6, \"kernel_overhead_us\": 5}}], "
             "\"device_type\": \"A100\"}",
             per, n, egress_gbit);
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j);
    plumb_err err = {{0}};
    cluster *c = cluster_from_json(j, "x.json", &err);
    cJSON_Delete(j);
    cr_assert_not_null(c, "%s", err.msg);
    return c;
}

/* One A100 per server over 25 Gb/s Ethernet whose egress is one link's (one lane) or 8
 * times it: dp 1, cp 2, pp 2 puts stage 0's context ranks on servers 0 and 1 and stage 1's
 * on 2 and 3, so the cp ring's hop 0 -> 1 leaves server 0's port with the pipeline's
 * sends 0 -> 2, and 2 -> 3 server 2's with 2 -> 0. With 8 lanes nothing waits and the
 * engine's ring gives the former priced figure within 0.1 %; with one lane the ring's
 * transfers and the sends queue on the port: slower than the priced figure, which did not
 * see them. */
Test(cp, reduce_dp1_contends_with_sends)
{
    double fig[2], priced[2];
    for (int lanes = 0; lanes < 2; lanes++) {
        cluster *c = eth_servers(1, 4, lanes ? 25 : 200);
        layout3d_options o = opts(1, 2, 2, 1);
        plan *pl = build_ok(&o, c, lanes ? "one lane" : "8 lanes");
        cr_assert_eq(plan_cp_device(pl, 0, 0, 1), 1);
        cr_assert_eq(pl->stages[1].devices[0], 2);
        fig[lanes] = run_both(pl, 4, &priced[lanes]);
        plan_free(pl);
        cluster_free(c);
    }
    cr_assert(fabs(fig[0] / priced[0] - 1) <= 1e-3, "8 lanes: %.9g against %.9g", fig[0],
              priced[0]);
    cr_assert_float_eq(priced[1], priced[0], 1e-12 * priced[0], "the priced figure sees no port");
    cr_assert(fig[1] > priced[1] * 1.001, "one lane: %.9g against %.9g", fig[1], priced[1]);
}

/* The links of r whose bytes run src -> dst: each must have moved `transfers` transfers
 * of `bytes` in all (within 1e-6 of g); returns how many such links r has. */
static int ring_links(const sim_result *r, const int *src, const int *dst, int n,
                      long long transfers, double bytes, double g)
{
    int found = 0;
    for (int i = 0; i < r->nlinks; i++) {
        const sim_link_stat *l = &r->links[i];
        for (int k = 0; k < n; k++) {
            if (l->src != src[k] || l->dst != dst[k]) continue;
            found++;
            cr_assert_eq(l->transfers, transfers, "%d -> %d: %lld", l->src, l->dst,
                         l->transfers);
            cr_assert_float_eq(l->bytes, bytes, 1e-6 * g, "%d -> %d", l->src, l->dst);
        }
    }
    return found;
}

/* Two runs of one model, grouped and hop by hop (ring_per_hop), alike bit for bit: the
 * iteration, every worker's compute and link time, every link's statistics. */
static void same_runs(const sim_result *a, const sim_result *b)
{
    cr_assert_eq(a->iteration_s, b->iteration_s, "grouped %.17g, hop by hop %.17g",
                 a->iteration_s, b->iteration_s);
    cr_assert_eq(a->nworkers, b->nworkers);
    for (int w = 0; w < a->nworkers; w++) {
        cr_assert_eq(a->comm_window[w], b->comm_window[w], "worker %d: %.17g, %.17g", w,
                     a->comm_window[w], b->comm_window[w]);
        cr_assert_eq(a->busy_window[w], b->busy_window[w], "worker %d", w);
    }
    cr_assert_eq(a->nlinks, b->nlinks);
    for (int i = 0; i < a->nlinks; i++)
        cr_assert(!memcmp(&a->links[i], &b->links[i], sizeof a->links[i]), "link %d -> %d",
                  a->links[i].src, a->links[i].dst);
}

/* dp 2, cp 2 (tp 2): the engine's ring runs over the 4 members 0 -> 2 -> 4 -> 6 -> 0
 * (replica 0's context ranks 0 and 2, replica 1's 4 and 6), every hop a transfer, the hops
 * inside a replica (0 -> 2, 4 -> 6) as those between replicas: per bucket 2 (4 - 1) steps
 * of a quarter of it on each, hop by hop or grouped alike; nothing runs 0 -> 4. */
Test(cp, reduce_dp2_four_members)
{
    layout3d_options o = opts(2, 2, 1, 2);
    plan *pl = build_ok(&o, NULL, "tp 2 cp 2 dp 2");
    cr_assert_eq(pl->stages[0].devices[1], 4);
    int iters = 3;
    sim_model m;
    schedule *s = model_of(pl, iters, &m, NULL, "tp 2 cp 2 dp 2");
    double g = m.grad_bytes[0], kb = ceil(g / SIM_BUCKET_BYTES);
    const int src[4] = {0, 2, 4, 6}, dst[4] = {2, 4, 6, 0}, from0[1] = {0}, to4[1] = {4};
    sim_result r[2];
    run_grouped_and_per_hop(&m, r, "tp 2 cp 2 dp 2");
    for (int per_hop = 0; per_hop < 2; per_hop++) {
        int found = ring_links(&r[per_hop], src, dst, 4, (long long)(iters * kb * 6),
                               iters * g * 6 / 4, g);
        cr_assert_eq(found, 4, "links 0 -> 2 -> 4 -> 6 -> 0 (got %d)", found);
        cr_assert_eq(ring_links(&r[per_hop], from0, to4, 1, 0, 0, g), 0, "a link 0 -> 4");
    }
    same_runs(&r[0], &r[1]);
    sim_result_free(&r[0]);
    sim_result_free(&r[1]);
    sim_model_release(&m);
    schedule_free(s);
    plan_free(pl);
}

/* The dp x cp ring grouped is the ring hop by hop, bit for bit, where a worker sends hops
 * of unequal link time (its replica's NVLink hops, then one to the next replica's
 * server): tp 2 x cp 4 x dp 2 on two and four 8-A100 servers, pp 1 and 2 (every hop
 * private: each step one event, no hop a transfer), and tp 1 x cp 2 x pp 2 x dp 2 on
 * servers of two A100s with one Ethernet lane out (each worker's two hops shared, the
 * Ethernet one with the pipeline's sends; steps repeat, their link time added step after
 * step in ring order). */
Test(cp, ring_grouped_as_hop_by_hop)
{
    for (int pp = 1; pp <= 2; pp++) {
        layout3d_options o = opts(2, 4, pp, 2);
        o.gpus = 16 * pp;
        const char *label = pp == 1 ? "pp 1" : "pp 2";
        plan *pl = build_ok(&o, NULL, label);
        cr_assert_eq(pl->stages[0].devices[1], 8);
        sim_model m;
        schedule *s = model_of(pl, 4, &m, NULL, label);
        sim_result r[2];
        run_grouped_and_per_hop(&m, r, label);
        same_runs(&r[0], &r[1]);
        cr_assert_eq(r[0].ring_hops_virtual, 0, "pp %d: every hop private", pp);
        cr_assert_lt(r[0].events, r[1].events);
        sim_result_free(&r[0]);
        sim_result_free(&r[1]);
        sim_model_release(&m);
        schedule_free(s);
        plan_free(pl);
    }
    /* two A100s per server, one Ethernet lane out of each: tp 1 x cp 2 x pp 2 x dp 2 */
    cluster *c = eth_servers(2, 4, 25);
    layout3d_options o = opts(1, 2, 2, 2);
    o.global_batch = 32;
    plan *pl = build_ok(&o, c, "Ethernet");
    sim_model m;
    schedule *s = model_of(pl, 6, &m, NULL, "Ethernet");
    sim_result r[2];
    run_grouped_and_per_hop(&m, r, "Ethernet");
    same_runs(&r[0], &r[1]);
    cr_assert_gt(r[0].ring_steps_repeated, 0);
    sim_result_free(&r[0]);
    sim_result_free(&r[1]);
    sim_model_release(&m);
    schedule_free(s);
    plan_free(pl);
    cluster_free(c);
}

/* dp 2, cp 2, pp 2 on one-A100 servers (25 Gb/s Ethernet, egress one lane or 8): stage 0's
 * replicas hold context ranks 0, 1 and 2, 3, stage 1's 4, 5 and 6, 7. The ring's hop
 * inside replica 0, 0 -> 1, is a transfer of a quarter bucket per step (2 (4 - 1) per
 * bucket) and leaves server 0 through the port of the pipeline's sends 0 -> 4, as 2 -> 3
 * does with 2 -> 6; the hops between replicas (1 -> 2, 3 -> 0) leave servers that send
 * nothing else. With 8 lanes nothing waits; with one lane those in-replica hops queue with
 * the sends on their ports: slower, grouped and hop by hop alike. */
Test(cp, reduce_dp2_in_replica_hop_contends_with_sends)
{
    double fig[2];
    const int src[4] = {0, 1, 2, 3}, dst[4] = {1, 2, 3, 0};
    for (int lanes = 0; lanes < 2; lanes++) {
        cluster *c = eth_servers(1, 8, lanes ? 25 : 200);
        layout3d_options o = opts(1, 2, 2, 2);
        const char *label = lanes ? "one lane" : "8 lanes";
        plan *pl = build_ok(&o, c, label);
        cr_assert_eq(plan_cp_device(pl, 0, 0, 1), 1);
        cr_assert_eq(plan_cp_device(pl, 0, 1, 0), 2);
        cr_assert_eq(pl->stages[1].devices[0], 4);
        int iters = 4;
        sim_model m;
        schedule *s = model_of(pl, iters, &m, NULL, label);
        double g = m.grad_bytes[0], kb = ceil(g / SIM_BUCKET_BYTES);
        sim_result r[2];
        run_grouped_and_per_hop(&m, r, label);
        for (int per_hop = 0; per_hop < 2; per_hop++) {
            int found = ring_links(&r[per_hop], src, dst, 4, (long long)(iters * kb * 6),
                                   iters * g * 6 / 4, g);
            cr_assert_eq(found, 4, "links 0 -> 1 -> 2 -> 3 -> 0 (got %d)", found);
        }
        same_runs(&r[0], &r[1]);
        fig[lanes] = r[0].iteration_s;
        sim_result_free(&r[0]);
        sim_result_free(&r[1]);
        sim_model_release(&m);
        schedule_free(s);
        plan_free(pl);
        cluster_free(c);
    }
    cr_assert(fig[1] > fig[0] * 1.001, "one lane %.9g, 8 lanes %.9g", fig[1], fig[0]);
}

/* The plan file carries "cp" (and its profile context_parallel); it reads back equal. */
Test(cp, plan_round_trip)
{
    layout3d_options o = opts(2, 2, 2, 1);
    plumb_err err = {{0}};
    plan *pl = build_ok(&o, NULL, "tp 2 cp 2 pp 2 dp 1");
    cJSON *j = plan_to_json(pl);
    cr_assert_not_null(j);
    const cJSON *cpj = cJSON_GetObjectItemCaseSensitive(j, "cp");
    cr_assert(cJSON_IsNumber(cpj) && cpj->valuedouble == 2);
    plan *back = plan_from_json(j, "p.json", &err);
    cr_assert_not_null(back, "%s", err.msg);
    cr_assert(plan_equal(pl, back));
    cr_assert_eq(back->cp, 2);
    cr_assert_eq(back->prof->cp, 2);
    cr_assert_float_eq(back->prof->layers[1].cp_ring_bytes, pl->prof->layers[1].cp_ring_bytes,
                       1e-9);
    plan_free(back);
    /* a plan at cp 1 writes no "cp" */
    layout3d_options o1 = opts(2, 1, 2, 2);
    plan *one = build(&o1, &err);
    cr_assert_not_null(one, "%s", err.msg);
    cJSON *j1 = plan_to_json(one);
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(j1, "cp"));
    cJSON_Delete(j1);
    plan_free(one);
    /* "cp" not the profile's: one line naming the field */
    cJSON_ReplaceItemInObjectCaseSensitive(j, "cp", cJSON_CreateNumber(4));
    cr_assert_null(plan_from_json(j, "p.json", &err));
    cr_assert(strstr(err.msg, "p.json") && strstr(err.msg, "cp") &&
              strstr(err.msg, "context_parallel"), "%s", err.msg);
    cJSON_Delete(j);
    plan_free(pl);
}

/* Bad input, one line each: 2 cp not dividing the sequence, standard attention, a layout
 * whose product is not the GPUs. */
Test(cp, bad_input)
{
    plumb_err err = {{0}};
    layout3d_options o = opts(1, 4, 1, 2); /* 2 x 4 does not divide 100 tokens */
    o.seq = 100;
    cr_assert_null(build(&o, &err));
    cr_assert(strstr(err.msg, "--cp") && strstr(err.msg, "divide"), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'));
    o = opts(1, 2, 1, 4);
    o.attention = LLM_ATTN_STANDARD;
    cr_assert_null(build(&o, &err));
    cr_assert(strstr(err.msg, "--cp") && strstr(err.msg, "flash"), "%s", err.msg);
    o = opts(1, 2, 1, 2);
    o.gpus = 16;
    cr_assert_null(build(&o, &err));
    cr_assert(strstr(err.msg, "--gpus") && strstr(err.msg, "cp"), "%s", err.msg);
    o = opts(1, 2, 1, 0); /* the third from --gpus: 8 / (1 x 1 x 2) = 4 replicas */
    o.gpus = 8, o.global_batch = 32;
    plan *pl = build(&o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    cr_assert_eq(pl->stages[0].replicas, 4);
    plan_free(pl);
}

/* The one rule of what cp asks (llm_cp_check), which the profile's errors, the search's
 * candidates and the dashboard's cp keys all read: flash attention, 2 cp dividing the
 * sequence, tp x cp dividing a server; cp 1 always, cp 0 never; an unknown sequence (0) or
 * server (0) not checked. */
/* One case of llm_cp_check: its arguments and the answer wanted. */
typedef struct cp_rule_case {
    int cp, attention;
    long long seq;
    int tp, per_server, want;
} cp_rule_case;

/* Expects llm_cp_check's answer to each of the n cases, naming the case's index. */
static void expect_cp_rules(const cp_rule_case *k, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(llm_cp_check(k[i].cp, k[i].attention, k[i].seq, k[i].tp,
                                  k[i].per_server), k[i].want,
                     "case %d: cp %d seq %lld tp %d per server %d", i, k[i].cp, k[i].seq,
                     k[i].tp, k[i].per_server);
}

Test(cp, rule_is_flash_and_the_balanced_split)
{
    static const cp_rule_case k[] = {
        {1, LLM_ATTN_STANDARD, 2049, 3, 8, LLM_CP_OK},
        {0, LLM_ATTN_FLASH, 2048, 1, 8, LLM_CP_BAD_COUNT},
        {2, LLM_ATTN_STANDARD, 2048, 1, 8, LLM_CP_NEEDS_FLASH},
        /* 8 does not divide 2052, 4 does */
        {4, LLM_ATTN_FLASH, 2052, 1, 8, LLM_CP_SPLITS_SEQ},
        {2, LLM_ATTN_FLASH, 2052, 1, 8, LLM_CP_OK},
        {8, LLM_ATTN_FLASH, 0, 1, 8, LLM_CP_OK},
        {8, LLM_ATTN_FLASH, 0, 1, 0, LLM_CP_OK},
    };
    expect_cp_rules(k, 7);
    /* the profile refuses what the rule refuses, naming --cp */
    transformer *t = llmfix_model("examples/llm/gpt2.json");
    cluster *c = llmfix_cluster("profiles/clusters/dgx-a100-80g.json");
    llm_options o;
    llm_options_init(&o);
    o.cp = 4;
    o.attention = LLM_ATTN_FLASH;
    o.seq = 1020; /* 8 does not divide it */
    plumb_err e;
    err_clear(&e);
    cr_assert_null(llm_profile_build(t, c, "dgx-a100-80g.json", &o, &e));
    cr_assert(strstr(e.msg, "--cp"), "%s", e.msg);
    transformer_free(t);
    cluster_free(c);
}

/* tp x cp must divide a server's devices where a server is given: tp 2 x cp 4 on 8, not tp
 * 4 x cp 4 (16) nor tp 2 x cp 3 (6); the sequence's rule first; a layout given by hand (no
 * server, as llm_profile_build asks) may span servers, and the profile builds it. */
Test(cp, rule_tp_cp_within_a_server)
{
    static const cp_rule_case k[] = {
        {4, LLM_ATTN_FLASH, 8192, 2, 8, LLM_CP_OK},
        {4, LLM_ATTN_FLASH, 8192, 4, 8, LLM_CP_SPANS_SERVERS},
        {3, LLM_ATTN_FLASH, 8190, 2, 8, LLM_CP_SPANS_SERVERS},
        {3, LLM_ATTN_FLASH, 8192, 2, 8, LLM_CP_SPLITS_SEQ},
        {2, LLM_ATTN_STANDARD, 8192, 8, 8, LLM_CP_NEEDS_FLASH},
        {2, LLM_ATTN_FLASH, 8192, 8, 1, LLM_CP_SPANS_SERVERS},
        {2, LLM_ATTN_FLASH, 8192, 8, 0, LLM_CP_OK},
        {1, LLM_ATTN_FLASH, 8192, 8, 4, LLM_CP_OK}, /* tp's own rule */
    };
    expect_cp_rules(k, 8);
    layout3d_options o = opts(2, 8, 1, 1); /* 16 ranks over two 8-GPU servers */
    o.gpus = 16;
    plan *pl = build_ok(&o, NULL, "tp 2 cp 8");
    cr_assert_eq(plan_cp_device(pl, 0, 0, 4), 8);
    plan_free(pl);
}
