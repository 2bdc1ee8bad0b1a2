/* test_layout3d.c: fixed tensor x pipeline x data layouts (planner/layout3d.h). The stages'
 * layer ranges (embedding with the first, head with the last), Megatron-LM's device order
 * (tp fastest, then dp, then pp), the interleaved placement, the derived dimension and the
 * microbatch count are checked against the rules written out here; the schedule of a plan
 * whose every stage is replicated dp times is replayed against dp straight 1F1B pipelines
 * written in this file; each bad input gets its one line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "llmfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT3 "examples/llm/gpt3-175b.json"

static transformer *model(const char *path) { return llmfix_model(path); }

static transformer *small_model(int kv, int ffn) { return llmfix_small(kv, ffn); }

static cluster *a100(void) { return llmfix_cluster(A100); }

static layout3d_options opts(int gpus, int tp, int pp, int dp, int gb, int mbs)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = gpus, o.tp = tp, o.pp = pp, o.dp = dp, o.global_batch = gb;
    o.microbatch_size = mbs;
    return o;
}

static plan *build_ok(const char *path, const layout3d_options *o)
{
    transformer *t = model(path);
    cluster *c = a100();
    plumb_err err = {{0}};
    plan *pl = layout3d_build(t, c, A100, o, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
    return pl;
}

/* GPT-3 175B at tp 8 x pp 8 x dp 16 on 1024 A100s (Narayanan et al. 2021's layout): 12
 * blocks per stage, the embedding on stage 0 and the head on stage 7; replica r of stage p
 * on devices (16 p + r) 8 ... + 7; 1536 microbatches of 1, 96 per replica. */
Test(layout3d, megatron_placement)
{
    layout3d_options o = opts(1024, 8, 8, 16, 1536, 1);
    o.recompute = RECOMPUTE_FULL;
    plan *pl = build_ok(GPT3, &o);
    cr_assert_eq(pl->nstages, 8);
    cr_assert_eq(pl->clus->ndevices, 1024);
    cr_assert_eq(pl->tp, 8);
    cr_assert_eq(pl->prof->tp, 8);
    cr_assert_eq(pl->prof->tokens_per_sample, 2048);
    cr_assert_eq(pl->schedule, SCHED_1F1B_FLUSH);
    cr_assert_eq(pl->chunks, 1);
    cr_assert_eq(pl->microbatch_size, 1);
    cr_assert_eq(pl->microbatches, 1536);
    cr_assert_eq(plan_minibatch(pl), 1536);
    cr_assert_eq(pl->recompute, RECOMPUTE_FULL);
    cr_assert_eq(pl->checkpoint_layers, 1);
    cr_assert_eq(pl->optimizer, OPT_ADAM);
    cr_assert_eq(pl->precision, DEV_BF16);
    cr_assert_eq(plan_gpus(pl), 1024);
    for (int p = 0; p < 8; p++) {
        const plan_stage *s = &pl->stages[p];
        cr_assert_eq(s->first_layer, p == 0 ? 0 : 1 + 12 * p, "stage %d", p);
        cr_assert_eq(s->last_layer, p == 7 ? 97 : 12 * (p + 1), "stage %d", p);
        cr_assert_eq(s->replicas, 16);
        for (int r = 0; r < 16; r++)
            cr_assert_eq(s->devices[r], (16 * p + r) * 8, "stage %d replica %d", p, r);
    }
    cr_assert_str_eq(pl->prof->layers[pl->stages[0].first_layer].name, "embed");
    cr_assert_str_eq(pl->prof->layers[pl->stages[7].last_layer].name, "head");
    unsigned char *used = calloc(1024, 1);
    cr_assert_eq(plan_devices_used(pl, used), 1024);
    free(used);
    plan_free(pl);
}

/* Interleaving: 16 virtual stages of 6 blocks on 8 ranks, virtual stage k on rank k % 8
 * (devices 8 (k % 8) ...); the derived dp is 1 on 64 GPUs. */
Test(layout3d, interleaved_placement_and_derived_dp)
{
    layout3d_options o = opts(64, 8, 8, 0, 512, 2);
    o.interleave = 2;
    plan *pl = build_ok(GPT3, &o);
    cr_assert_eq(pl->schedule, SCHED_INTERLEAVED);
    cr_assert_eq(pl->chunks, 2);
    cr_assert_eq(pl->nstages, 16);
    cr_assert_eq(pl->microbatches, 256);
    cr_assert_eq(pl->microbatch_size, 2);
    cr_assert_eq(pl->checkpoint_layers, 0);
    for (int k = 0; k < 16; k++) {
        const plan_stage *s = &pl->stages[k];
        cr_assert_eq(s->replicas, 1);
        cr_assert_eq(s->devices[0], (k % 8) * 8, "virtual stage %d", k);
        cr_assert_eq(s->first_layer, k == 0 ? 0 : 1 + 6 * k);
        cr_assert_eq(s->last_layer, k == 15 ? 97 : 6 * (k + 1));
    }
    plan_free(pl);
}

/* Interleaving with data parallelism: dp whole interleaved pipelines, replica r of every
 * chunk of rank p on the group (p dp + r) tp; the schedule generates and the plan
 * simulates. */
Test(layout3d, interleaved_with_replicas)
{
    layout3d_options o = opts(128, 8, 8, 2, 32, 1);
    o.interleave = 2;
    plan *pl = build_ok(GPT3, &o);
    cr_assert_eq(pl->schedule, SCHED_INTERLEAVED);
    cr_assert_eq(pl->nstages, 16);
    for (int k = 0; k < 16; k++)
        for (int r = 0; r < 2; r++)
            cr_assert_eq(pl->stages[k].devices[r], ((k % 8) * 2 + r) * 8, "stage %d replica %d",
                         k, r);
    plumb_err err = {{0}};
    schedule *s = schedule_from_plan(pl, 2, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(s->nworkers, 16);
    cr_assert_eq(schedule_validate(s, &err), 0, "%s", err.msg);
    schedule_free(s);
    plan_free(pl);
}

/* The third dimension from --gpus: pp from tp and dp, tp from pp and dp. */
Test(layout3d, derived_dimension)
{
    transformer *t = model(GPT3);
    cluster *c = a100();
    plumb_err err = {{0}};
    layout3d_dims d;
    layout3d_options o = opts(1024, 8, 0, 16, 1536, 1);
    cr_assert_eq(layout3d_resolve(t, c, A100, &o, &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.pp, 8);
    o = opts(256, 0, 16, 4, 1536, 1);
    cr_assert_eq(layout3d_resolve(t, c, A100, &o, &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.tp, 4);
    cr_assert_eq(d.microbatches, 1536);
    o = opts(0, 2, 4, 2, 64, 2); /* no --gpus: their product */
    cr_assert_eq(layout3d_resolve(t, c, A100, &o, &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.gpus, 16);
    cr_assert_eq(d.microbatches, 32);
    cluster_free(c);
    transformer_free(t);
}

static int is_compute(int k) { return k == ACT_F || k == ACT_B || k == ACT_I || k == ACT_W; }
static int is_comm(int k) { return k >= ACT_SEND_F && k <= ACT_RECV_B; }

/* One worker's F/B order in a straight 1F1B pipeline of p stages, stage s, n microbatches
 * mb[0..n): p - s - 1 warmup forwards, then one forward and one backward in turn, then the
 * remaining backwards (written here, not the generator's). */
static int straight_1f1b(int p, int s, const int *mb, int n, int *kind, int *mbo)
{
    int k = p - s - 1 < n ? p - s - 1 : n, len = 0, f = 0;
    for (; f < k; f++) kind[len] = ACT_F, mbo[len++] = mb[f];
    for (int b = 0; b < n; b++) {
        if (f < n) kind[len] = ACT_F, mbo[len++] = mb[f++];
        kind[len] = ACT_B, mbo[len++] = mb[b];
    }
    return len;
}

/* With every stage replicated dp times, the schedule is dp straight pipelines: replica j of
 * every stage runs microbatches j, j + dp, ... (global / (dp mbs) per iteration), in the
 * 1F1B order of its stage, sending to and receiving from replica j of its neighbours. */
Test(layout3d, replicated_stages_run_dp_straight_pipelines)
{
    layout3d_options o = opts(16, 2, 4, 2, 16, 1);
    plan *pl = build_ok("examples/llm/gpt2.json", &o);
    int iters = 2, dp = 2, pp = 4, M = 16, n = M / dp;
    plumb_err err = {{0}};
    schedule *s = schedule_from_plan(pl, iters, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(s->nworkers, pp * dp);
    int kind[64], mbo[64], mb[16];
    for (int st = 0; st < pp; st++)
        for (int j = 0; j < dp; j++) {
            int dev = (st * dp + j) * 2, w = -1;
            for (int q = 0; q < s->nworkers; q++)
                if (s->worker_device[q] == dev) w = q;
            cr_assert_geq(w, 0, "no worker on device %d", dev);
            int at = 0, want = 0;
            for (int it = 0; it < iters; it++) {
                for (int i = 0; i < n; i++) mb[i] = it * M + j + i * dp;
                want = straight_1f1b(pp, st, mb, n, kind, mbo);
                for (int i = 0; i < want; i++) {
                    while (at < s->len[w] && !is_compute(s->acts[w][at].kind)) {
                        const action *a = &s->acts[w][at++];
                        if (!is_comm(a->kind)) continue;
                        int pd = s->worker_device[a->peer];
                        cr_assert_eq(pd, (a->peer_stage * dp + j) * 2,
                                     "stage %d replica %d talks to device %d", st, j, pd);
                    }
                    cr_assert_lt(at, s->len[w]);
                    const action *a = &s->acts[w][at++];
                    cr_assert_eq(a->kind, kind[i], "stage %d replica %d action %d", st, j, i);
                    cr_assert_eq(a->microbatch, mbo[i], "stage %d replica %d action %d", st, j,
                                 i);
                    cr_assert_eq(a->stage, st);
                }
            }
            for (; at < s->len[w]; at++)
                cr_assert(!is_compute(s->acts[w][at].kind), "extra compute on %d", dev);
        }
    schedule_free(s);
    plan_free(pl);
}

static void expect_bad(const transformer *t, const layout3d_options *o, const char *want)
{
    cluster *c = a100();
    plumb_err err = {{0}};
    plan *pl = layout3d_build(t, c, A100, o, &err);
    cr_assert_null(pl, "expected \"%s\"", want);
    cr_assert(strstr(err.msg, want), "got \"%s\", expected \"%s\"", err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'));
    cluster_free(c);
}

Test(layout3d, bad_inputs_one_line_each)
{
    transformer *g3 = model(GPT3), *g2 = model("examples/llm/gpt2.json");
    layout3d_options o = opts(1024, 16, 8, 8, 1536, 1);
    expect_bad(g3, &o, "--tp: expected at most the 8 devices of one server (got 16)");
    o = opts(24, 3, 8, 1, 8, 1);
    expect_bad(g3, &o, "--tp: expected a divisor of the 8 devices of one server");
    o = opts(32, 8, 4, 1, 64, 1);
    expect_bad(g2, &o, "--tp: expected a divisor of the 12 attention heads (got 8)");
    transformer *kv = small_model(2, 1000), *mlp = small_model(8, 1004);
    o = opts(8, 4, 2, 1, 8, 1);
    expect_bad(kv, &o, "--tp: expected a divisor of the 2 key/value heads (got 4)");
    o = opts(16, 8, 2, 1, 8, 1);
    expect_bad(mlp, &o, "--tp: expected a divisor of the MLP width 1004 (got 8)");
    transformer_free(mlp);
    o = opts(512, 8, 8, 16, 1536, 1);
    expect_bad(g3, &o, "--gpus: expected tp x pp x dp = 8 x 8 x 16 = 1024 devices (got 512)");
    o = opts(12, 4, 3, 1, 8, 1);
    expect_bad(g3, &o, "--gpus: expected a multiple of the 8 devices per server (got 12)");
    o = opts(4096, 8, 8, 64, 4096, 1);
    expect_bad(g3, &o, "--gpus: expected at most the cluster's 3072 devices (got 4096)");
    o = opts(64, 8, 0, 3, 48, 1);
    expect_bad(g3, &o, "--pp: expected --gpus / (the other two) to be whole (got 64 / 24)");
    o = opts(1024, 8, 8, 16, 1000, 1);
    expect_bad(g3, &o, "--global-batch: expected a multiple of dp x microbatch size = 16 x 1 "
               "= 16 (got 1000)");
    o = opts(1024, 8, 8, 16, 1552, 2);
    expect_bad(g3, &o, "--global-batch: expected a multiple of dp x microbatch size = 16 x 2");
    o = opts(16, 1, 16, 1, 16, 1);
    expect_bad(g2, &o, "--pp: expected at most the 12 layers (got 16)");
    o = opts(40, 8, 5, 1, 8, 1);
    expect_bad(g3, &o, "--pp: expected --pp x --interleave to divide the 96 layers (got 5 x 1 "
               "= 5)");
    o = opts(64, 8, 8, 1, 8, 1);
    o.interleave = 5;
    expect_bad(g3, &o, "--interleave: expected --pp x --interleave to divide the 96 layers "
               "(got 8 x 5 = 40)");
    o.interleave = 2;
    o.schedule = SCHED_1F1B_FLUSH;
    expect_bad(g3, &o, "--interleave: expected 1 with schedule 1f1b-flush, which runs one "
               "stage per pipeline rank (got 2)");
    o.schedule = SCHED_ZB_V;
    o.interleave = 3;
    expect_bad(g3, &o, "--interleave: expected 2 to 2 virtual stages per rank with schedule "
               "zb-v (got 3)");
    o = opts(64, 8, 0, 0, 16, 1);
    expect_bad(g3, &o, "--tp/--pp/--dp: expected at least two of the three");
    o = opts(64, 1, 8, 8, 64, 1);
    o.sequence_parallel = 1;
    expect_bad(g3, &o, "--sequence-parallel: expected --tp 2 or more");
    o = opts(64, 8, 8, 1, 64, 1);
    o.recompute = RECOMPUTE_FULL;
    o.checkpoint_layers = 13;
    expect_bad(g3, &o, "--checkpoint-layers: expected at most the 12 blocks of a virtual stage");
    o = opts(64, 8, 8, 1, 64, 1);
    o.seq = 4096;
    expect_bad(g3, &o, "--seq-len: expected 1 to the model's 2048 learned positions");
    transformer_free(kv);
    transformer_free(g2);
    transformer_free(g3);
}

/* A schedule with a V placement (zb-v: rank r holds virtual stages r and 2 pp - 1 - r)
 * places through the trait table, not the loop. */
Test(layout3d, v_placement_from_the_trait_table)
{
    layout3d_options o = opts(32, 8, 4, 1, 16, 1);
    o.schedule = SCHED_ZB_V;
    plan *pl = build_ok(GPT3, &o);
    cr_assert_eq(pl->nstages, 8);
    cr_assert_eq(pl->chunks, 2);
    int want[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int k = 0; k < 8; k++) cr_assert_eq(pl->stages[k].devices[0], want[k] * 8, "%d", k);
    plan_free(pl);
}

/* Megatron-Core's uneven splits, by its own formulas written out here (megatron/core/
 * transformer/transformer_block.py get_num_layers_to_build, transformer_layer.py
 * get_transformer_layer_offset): the first block (0-based, "offset") and the block count of
 * chunk c of pipeline rank r, for pp ranks of v chunks, with first / last counts F, L (0:
 * not given) or the embedding / loss accounted (e, l). */
static void megatron_chunk(int blocks, int pp, int v, int F, int L, int e, int l, int c, int r,
                           int *offset, int *count)
{
    if (F || L) {
        int mid_stages = pp - (F > 0) - (L > 0), mid = blocks - F - L;
        int per_rank = r == 0 && F ? F : r == pp - 1 && L ? L : mid / mid_stages;
        *count = per_rank / v;
        int mid_rank = F ? r - 1 : r;
        if (v == 1) { /* not interleaved: no virtual pipeline size */
            int per = mid_stages > 0 ? mid / mid_stages : 0;
            *offset = r == 0 ? 0 : mid_rank * per + F;
            return;
        }
        int total_chunks = F / v + mid / v + L / v; /* blocks per model chunk, all ranks */
        *offset = r == 0 ? c * total_chunks
                         : c * total_chunks + F / v + mid_rank * (mid / v / mid_stages);
        return;
    }
    int n = blocks + e + l, per_virtual = n / pp / v;
    *count = per_virtual - (e && c == 0 && r == 0) - (l && c == v - 1 && r == pp - 1);
    *offset = c * (n / v) + r * per_virtual - (e && !(c == 0 && r == 0));
}

/* Checks every virtual stage k = c pp + r of pl against megatron_chunk: profile layers
 * 1 + offset .. offset + count, the embedding (layer 0) joined to the first, the head to the
 * last, on rank r's devices. */
static void expect_megatron_split(const plan *pl, int blocks, int pp, int v, int F, int L,
                                  int e, int l)
{
    cr_assert_eq(pl->nstages, pp * v);
    int sum = 0;
    for (int c = 0; c < v; c++)
        for (int r = 0; r < pp; r++) {
            int k = c * pp + r, off, cnt;
            megatron_chunk(blocks, pp, v, F, L, e, l, c, r, &off, &cnt);
            cr_assert_geq(cnt, 0, "chunk %d of rank %d", c, r);
            sum += cnt;
            const plan_stage *s = &pl->stages[k];
            cr_assert_eq(s->first_layer, k == 0 ? 0 : 1 + off, "stage %d", k);
            cr_assert_eq(s->last_layer, k == pp * v - 1 ? blocks + 1 : off + cnt, "stage %d",
                         k);
            cr_assert_eq(s->devices[0], r * pl->tp * s->replicas, "stage %d", k);
        }
    cr_assert_eq(sum, blocks);
}

/* Llama 3.1 405B as Megatron-Bridge runs it on 1024 H100s: 126 blocks, pp 8 x V 8, the
 * embedding and the loss counted as a block each: 128 / 64 = 2 per virtual stage, the first
 * holding the embedding and one block, the last one block and the head. */
Test(layout3d, uneven_405b_accounts_embedding_and_loss)
{
    layout3d_options o = opts(64, 8, 8, 1, 16, 1);
    o.interleave = 8;
    o.split.account_embedding = o.split.account_loss = 1;
    plan *pl = build_ok("examples/llm/nemo/llama31-405b.json", &o);
    expect_megatron_split(pl, 126, 8, 8, 0, 0, 1, 1);
    cr_assert_eq(pl->stages[0].last_layer, 1);     /* embed, block0 */
    cr_assert_eq(pl->stages[1].first_layer, 2);    /* block1, block2 */
    cr_assert_eq(pl->stages[63].first_layer, 126); /* block125, head */
    cr_assert_eq(pl->schedule, SCHED_INTERLEAVED);
    plan_free(pl);
    /* without the accountings 126 blocks do not split over 64 virtual stages */
    o.split.account_embedding = o.split.account_loss = 0;
    transformer *t = model("examples/llm/nemo/llama31-405b.json");
    cluster *c = a100();
    plumb_err err = {{0}};
    cr_assert_null(layout3d_build(t, c, A100, &o, &err));
    cr_assert(strstr(err.msg, "--interleave: expected --pp x --interleave to divide the 126"),
              "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
}

/* One accounting at a time, down to virtual stages of one block: Llama 3 8B's 32 blocks + 1
 * over pp 3 x V 11 leave the first (embedding) or the last (loss) stage no block at all. */
Test(layout3d, uneven_one_accounting_empty_end_stage)
{
    for (int which = 0; which < 2; which++) {
        layout3d_options o = opts(24, 8, 3, 1, 33, 1);
        o.interleave = 11;
        o.split.account_embedding = which == 0, o.split.account_loss = which == 1;
        plan *pl = build_ok("examples/llm/llama3-8b.json", &o);
        expect_megatron_split(pl, 32, 3, 11, 0, 0, which == 0, which == 1);
        if (which == 0) cr_assert_eq(pl->stages[0].last_layer, 0);   /* the embedding alone */
        else cr_assert_eq(pl->stages[32].first_layer, 33);           /* the head alone */
        plan_free(pl);
        o.interleave = 1; /* 33 / 3: 11 per rank, one fewer on the accounted end */
        pl = build_ok("examples/llm/llama3-8b.json", &o);
        expect_megatron_split(pl, 32, 3, 1, 0, 0, which == 0, which == 1);
        plan_free(pl);
    }
}

/* --decoder-first/last-pipeline-num-layers on GPT-3 175B's 96 blocks: first and last 6 at
 * pp 8 x V 2 (the middle six ranks 14 each, 7 a chunk); first 18 alone at pp 4 (the rest 26
 * each); last 30 alone at pp 4 x V 2 (22 each, 11 a chunk); pp 2 holding 40 + 56 (not
 * interleaved: Megatron-Core's interleaved offsets divide by the middle ranks, none here). */
Test(layout3d, uneven_first_last_pipeline_num_layers)
{
    struct { int pp, v, F, L; } cases[] = {{8, 2, 6, 6}, {4, 1, 18, 0}, {4, 2, 0, 30},
                                           {2, 1, 40, 56}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        layout3d_options o = opts(8 * cases[i].pp, 8, cases[i].pp, 1, 8 * cases[i].pp, 1);
        o.interleave = cases[i].v;
        o.split.first_blocks = cases[i].F, o.split.last_blocks = cases[i].L;
        plan *pl = build_ok(GPT3, &o);
        expect_megatron_split(pl, 96, cases[i].pp, cases[i].v, cases[i].F, cases[i].L, 0, 0);
        plan_free(pl);
    }
}

Test(layout3d, uneven_bad_inputs_one_line_each)
{
    transformer *g3 = model(GPT3), *l405 = model("examples/llm/nemo/llama31-405b.json");
    layout3d_options o = opts(64, 8, 8, 1, 64, 1);
    o.split.first_blocks = 6;
    o.split.account_loss = 1;
    expect_bad(g3, &o, "--decoder-first-pipeline-num-layers: expected no "
               "--account-for-loss-in-pipeline-split with it");
    o = opts(64, 8, 8, 1, 64, 1);
    o.interleave = 4, o.split.last_blocks = 6;
    expect_bad(g3, &o, "--decoder-last-pipeline-num-layers: expected a multiple of "
               "--interleave 4");
    o = opts(64, 8, 8, 1, 64, 1);
    o.split.first_blocks = 97;
    expect_bad(g3, &o, "--decoder-first-pipeline-num-layers: expected 1 to the 96 blocks "
               "(got 97)");
    o.split.first_blocks = 50, o.split.last_blocks = 50;
    expect_bad(g3, &o, "--decoder-last-pipeline-num-layers: expected "
               "--decoder-first-pipeline-num-layers 50 and --decoder-last-pipeline-num-layers "
               "50 to sum to at most the 96 blocks (got 100)");
    o.split.first_blocks = 5, o.split.last_blocks = 5;
    expect_bad(g3, &o, "--decoder-last-pipeline-num-layers: expected the 86 blocks left to "
               "divide over the 6 other pipeline ranks");
    o = opts(32, 8, 4, 1, 32, 1);
    o.split.first_blocks = 39, o.interleave = 3; /* (96 - 39) / 3 = 19 a middle rank */
    expect_bad(g3, &o, "--interleave: expected to divide the 19 blocks of each middle "
               "pipeline rank (got 3)");
    o = opts(16, 8, 2, 1, 16, 1);
    o.split.first_blocks = 40, o.split.last_blocks = 40;
    expect_bad(g3, &o, "--decoder-last-pipeline-num-layers: expected the first and last ranks "
               "to hold all 96 blocks at --pp 2 (got 40 + 40)");
    o.split.last_blocks = 56, o.interleave = 4;
    expect_bad(g3, &o, "--interleave: expected 1 when the first and last ranks hold every "
               "block, with no middle rank (got 4)");
    o = opts(32, 8, 4, 1, 32, 1);
    o.split.last_blocks = 96;
    expect_bad(g3, &o, "--decoder-last-pipeline-num-layers: expected blocks left for the 3 "
               "middle pipeline ranks (got none of the 96)");
    o = opts(8, 8, 1, 1, 8, 1);
    o.split.first_blocks = 96;
    expect_bad(g3, &o, "--decoder-first-pipeline-num-layers: expected --pp 2 or more (got 1)");
    o = opts(64, 8, 8, 1, 64, 1);
    o.interleave = 8, o.split.account_embedding = 1;
    expect_bad(l405, &o, "--account-for-embedding-in-pipeline-split: expected --pp x "
               "--interleave to divide the 126 blocks + the embedding = 127 (got 8 x 8 = 64)");
    o.split.account_embedding = 0, o.split.account_loss = 1, o.interleave = 3;
    expect_bad(l405, &o, "--account-for-loss-in-pipeline-split: expected --pp x --interleave "
               "to divide the 126 blocks + the loss = 127 (got 8 x 3 = 24)");
    o = opts(64, 8, 8, 1, 64, 1);
    o.split.first_blocks = 12, o.balance = 1;
    expect_bad(g3, &o, "--balance: expected the even split, which balancing starts from (got "
               "--decoder-first-pipeline-num-layers)");
    o = opts(32, 8, 4, 1, 16, 1);
    o.schedule = SCHED_ZB_V, o.split.account_embedding = o.split.account_loss = 1;
    expect_bad(l405, &o, "--account-for-embedding-in-pipeline-split: expected a schedule that "
               "places virtual stage k on pipeline rank k % pp");
    o = opts(64, 8, 8, 1, 64, 1);
    o.split.first_blocks = 12, o.recompute = RECOMPUTE_FULL, o.checkpoint_layers = 13;
    expect_bad(g3, &o, "--checkpoint-layers: expected at most the 12 blocks of a virtual stage");
    transformer_free(l405);
    transformer_free(g3);
}
