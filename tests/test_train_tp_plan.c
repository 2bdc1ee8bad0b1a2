/* test_train_tp_plan.c: a tensor x pipeline x data parallel plan made by the planner from a
 * transformer description (planner/layout3d.h: examples/llm/gpt-mini.json on
 * examples/clusters/cpu-1x8.json) run by the executor on the model spec it describes
 * (examples/models/gpt-mini.json): the profiled layers mapped onto the model's top-level
 * layers, the plan's stages, replicas, tp, microbatching, schedule and recomputation
 * handed to the runtime, the losses those of sequential training of the same minibatches,
 * and the plans that do not fit the model or that the executor does not run refused with
 * one line naming the field, before any work. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cluster.h"
#include "core/transformer.h"
#include "exec/data.h"
#include "exec/train_plan.h"
#include "planner/layout3d.h"
#include "sim/compare.h"

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

/* gpt-mini's model spec and description, and the planner's tp 2 x pp 2 x dp 2 plan of it. */
static plan *plan_222(model **m, transformer **t)
{
    plumb_err e = {{0}};
    *m = model_load(MODEL, &e);
    cr_assert_not_null(*m, "%s", e.msg);
    *t = gpt_mini();
    plan *pl = make_plan(*t, 2, 2, 2, NULL, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    return pl;
}

Test(train_tp_plan, layers_stages_and_workers_of_a_3d_plan)
{
    plumb_err e = {{0}};
    model *m;
    transformer *t;
    plan *pl = plan_222(&m, &t);
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
    /* an fp8 plan (Transformer Engine's FP8 projections): the executor has no FP8 kernels */
    plan *p8 = make_plan(t, 2, 2, 2, NULL, &e);
    cr_assert_not_null(p8, "%s", e.msg);
    p8->precision = DEV_FP8;
    train_run_cfg c8 = {.m = m, .train = d, .cfg = {2, 4, train_default_opt(OPT_SGD)},
                        .steps = 2};
    train_pipeline t8;
    cr_assert_eq(train_from_plan(&c8, p8, NULL, 0, 4, &t8, &e), 2, "an fp8 plan ran");
    cr_assert(strstr(e.msg, "precision: the executor runs plans with") &&
              strstr(e.msg, "fp8"), "%s", e.msg);
    cr_assert_null(t8.sched);
    plan_free(p8);
    /* full recomputation of whole stages, sequence parallelism under 1F1B and under
     * zb-h1's split backward, and ZeRO-1 (the replicas' shards of the optimizer state) run */
    void (*ok[])(layout3d_options *) = {set_full0, set_sp, set_sp_zb, set_zero};
    for (int k = 0; k < 4; k++) {
        plan *pl = make_plan(t, 2, 2, 2, ok[k], &e);
        cr_assert_not_null(pl, "%s", e.msg);
        cr_assert_eq(train_plan_check(m, MODEL, pl, "plan.json", &e), 0, "%s", e.msg);
        train_run_cfg cfg = {.m = m, .train = d, .cfg = {2, 4, train_default_opt(OPT_SGD)},
                             .steps = 2};
        train_pipeline tpl;
        cr_assert_eq(train_from_plan(&cfg, pl, NULL, 0, 4, &tpl, &e), 0, "%s", e.msg);
        cr_assert_eq(cfg.recompute, k == 0);
        cr_assert_eq(cfg.sp, k == 1 || k == 2);
        cr_assert_eq(cfg.zero, k == 3);
        train_pipeline_free(&tpl);
        plan_free(pl);
    }
    transformer_free(t);
    data_free(d);
    model_free(m);
}

/* The measured trace of the 3D plan: every tensor-parallel rank's actions on tracks of its
 * own (tl_track.tp_rank, named by worker, tp rank, stage and replica), each rank's tp
 * collectives as events of their own with their bytes, every stage's optimizer steps
 * labelled with iterations 0 .. N-1 once per track (the last stage's first step was
 * labelled with the next iteration), the Chrome text read back alike, and plumb compare
 * counting rank 0's tracks only, as the simulator's trace has them. */
Test(train_tp_plan, trace_of_every_tp_rank)
{
    plumb_err e = {{0}};
    model *m;
    transformer *t;
    plan *pl = plan_222(&m, &t);
    dataset *d = data_text(m, NULL, 256, 3, &e);
    cr_assert_not_null(d, "%s", e.msg);
    const int N = 5;
    train_run_cfg cfg = {.bk = backend_cpu(), .m = m, .train = d,
                         .cfg = {pl->microbatch_size, pl->microbatches, train_default_opt(OPT_SGD)},
                         .steps = N, .seed = 7, .tp = 1};
    train_pipeline tpl;
    cr_assert_eq(train_from_plan(&cfg, pl, NULL, 0, pl->microbatches, &tpl, &e), 0, "%s", e.msg);
    train_result pr;
    timeline *tl = NULL;
    cr_assert_eq(train_run_pipeline(&cfg, tpl.sched, tpl.first, tpl.last, 1, &pr, &tl, &e), 0,
                 "%s", e.msg);
    cr_assert_not_null(tl);
    /* per track: steps by iteration, compute actions, tp collectives and their bytes */
    int nt = tl->ntracks, steps[64][8] = {{0}}, compute[64] = {0}, coll[64] = {0};
    cr_assert(nt <= 64);
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *ev = &tl->ev[i];
        if (ev->kind == TL_STEP) {
            cr_assert(ev->iteration >= 0 && ev->iteration < N, "step of iteration %d",
                      ev->iteration);
            steps[ev->track][ev->iteration]++;
        }
        compute[ev->track] += tl_kind_is_compute(ev->kind);
        if (ev->kind == TL_TP_ALLREDUCE || ev->kind == TL_TP_REDUCE_SCATTER ||
            ev->kind == TL_TP_ALL_GATHER) {
            coll[ev->track]++;
            cr_assert_eq(tl->tracks[ev->track].kind, TL_TRACK_COLLECTIVE);
            cr_assert(ev->bytes > 0 && ev->dur_s >= 0 && ev->stage >= 0 && ev->microbatch >= 0,
                      "tp collective: %.0f bytes, stage %d, microbatch %d", ev->bytes,
                      ev->stage, ev->microbatch);
            cr_assert(ev->iteration == ev->microbatch / pl->microbatches);
        }
    }
    int dev_tracks[2] = {0}, coll_tracks[2] = {0}, sum_coll[2] = {0};
    for (int k = 0; k < nt; k++) {
        const tl_track *tk = &tl->tracks[k];
        cr_assert(tk->tp_rank == 0 || tk->tp_rank == 1, "track %s: tp rank %d", tk->name,
                  tk->tp_rank);
        char want[64];
        snprintf(want, sizeof want, "tp rank %d (stage ", tk->tp_rank);
        cr_assert_not_null(strstr(tk->name, want), "track name \"%s\"", tk->name);
        cr_assert_not_null(strstr(tk->name, "worker "), "track name \"%s\"", tk->name);
        cr_assert_not_null(strstr(tk->name, "replica "), "track name \"%s\"", tk->name);
        if (tk->kind == TL_TRACK_DEVICE) {
            dev_tracks[tk->tp_rank]++;
            cr_assert(compute[k] > 0, "track %s computes nothing", tk->name);
            for (int it = 0; it < N; it++)
                cr_assert_eq(steps[k][it], 1, "track %s: %d steps of iteration %d", tk->name,
                             steps[k][it], it);
        }
        if (tk->kind == TL_TRACK_COLLECTIVE) {
            coll_tracks[tk->tp_rank]++;
            sum_coll[tk->tp_rank] += coll[k];
            cr_assert(coll[k] > 0, "track %s holds no tp collective", tk->name);
        }
    }
    cr_assert(dev_tracks[0] == 4 && dev_tracks[1] == 4, "device tracks: %d of rank 0, %d of 1",
              dev_tracks[0], dev_tracks[1]);
    cr_assert(coll_tracks[0] == 4 && coll_tracks[1] == 4);
    cr_assert(sum_coll[0] == sum_coll[1] && sum_coll[0] > 0,
              "every rank runs the same collectives (%d, %d)", sum_coll[0], sum_coll[1]);

    /* the Chrome text: JSON that names each track's tp rank and reads back the same */
    size_t len;
    char *text = timeline_chrome_text(tl, &len);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "the trace is not JSON");
    timeline *back = timeline_from_chrome_json(root, "trace.json", &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_assert_eq(back->ntracks, tl->ntracks);
    cr_assert_eq(back->n, tl->n);
    int tids[64], ntids = 0;
    for (const cJSON *ev = cJSON_GetObjectItem(root, "traceEvents")->child; ev; ev = ev->next) {
        const cJSON *nm = cJSON_GetObjectItem(ev, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, "thread_name")) continue;
        int pid = cJSON_GetObjectItem(ev, "pid")->valueint,
            tid = cJSON_GetObjectItem(ev, "tid")->valueint;
        for (int i = 0; i < ntids; i++)
            cr_assert(tids[i] != pid * 1000000 + tid, "two tracks share pid %d tid %d", pid,
                      tid);
        tids[ntids++] = pid * 1000000 + tid;
    }
    cr_assert_eq(ntids, nt);
    for (int k = 0; k < nt; k++) {
        int j = timeline_track_tp(back, tl->tracks[k].kind, tl->tracks[k].device,
                                  tl->tracks[k].peer, tl->tracks[k].tp_rank, NULL);
        cr_assert(j >= 0 && j < nt && !strcmp(back->tracks[j].name, tl->tracks[k].name),
                  "track %s read back as %d", tl->tracks[k].name, j);
    }

    /* compare: rank 0's tracks, as the simulator's trace has one per group */
    compare_side side;
    cr_assert_eq(compare_side_from_timeline(back, 0, "trace.json", "exec trace", &side, &e), 0,
                 "%s", e.msg);
    int M = pl->microbatches;
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(side.cells[s * TL_NKINDS + TL_F].n, N * M, "stage %d: %d forwards", s,
                     side.cells[s * TL_NKINDS + TL_F].n);
        cr_assert_eq(side.cells[s * TL_NKINDS + TL_STEP].n, N * 2, "stage %d: %d steps", s,
                     side.cells[s * TL_NKINDS + TL_STEP].n);
        cr_assert(side.cells[s * TL_NKINDS + TL_TP_ALLREDUCE].n > 0);
    }
    cr_assert_eq(side.kinds[TL_TP_ALLREDUCE].n + side.kinds[TL_TP_REDUCE_SCATTER].n +
                     side.kinds[TL_TP_ALL_GATHER].n,
                 sum_coll[0]);
    compare_side_free(&side);
    timeline_free(back);
    cJSON_Delete(root);
    free(text);
    timeline_free(tl);
    train_pipeline_free(&tpl);
    data_free(d);
    plan_free(pl);
    transformer_free(t);
    model_free(m);
}
