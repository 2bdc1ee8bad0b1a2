/* test_train_zero.c: ZeRO-1 in the pipeline runtime (rt_cfg.zero): each replica of a
 * replicated stage keeps 1/r of the optimizer state, reduce-scatters the gradients, steps
 * its shard and all-gathers the weights. Under the local transport a reduce-scatter's part
 * has the bits of the same part of the all-reduce's sum, and the optimizers are
 * elementwise, so the weights, losses and optimizer state must be the same bits as
 * without it (zero 0) for every optimizer, replica count (shards padded where r does not
 * divide a stage's parameters) and schedule (synchronous, split backward, asynchronous); each replica's device peak is lower by the
 * state it no longer holds; a run resumed from the gathered state equals a whole one. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "exec/runtime.h"
#include "exec/stage.h"
#include "exec/train.h"
#include "tests/batches.h"

static const char *spec =
    "{\"format\":\"plumb-model/1\",\"input\":[2,4,4],\"classes\":4,\"seed\":5,\"layers\":["
    "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3,\"padding\":1},{\"type\":\"relu\"},"
    "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":16},{\"type\":\"gelu\"},"
    "{\"type\":\"linear\",\"out\":12},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";
#define MB 3

/* One run: `kind` over 2 stages (layers 0-3: 841 parameters, 4-8: 256) with reps[s]
 * replicas each, 4 microbatches per iteration, `iters` iterations from `start` with the
 * given state (NULL: fresh), ZeRO-1 when zero; the state is wanted back. */
static int run(fixture *f, sched_kind kind, const int *reps, int opt, int zero, int iters,
               long start, const float *w, const float *mo, const float *v, rt_result *r,
               plumb_err *e)
{
    sched_spec sp = {kind, reps[0] + reps[1], 2, 1, 4, iters, reps, NULL};
    schedule *s = schedule_generate(&sp, e);
    cr_assert(s, "%s: %s", sched_kind_name(kind), e->msg);
    int first[] = {0, 4}, last[] = {3, 8};
    rt_cfg cfg = {.bk = backend_cpu(), .m = f->m, .sched = s, .stage_first = first,
                  .stage_last = last, .microbatch = MB, .opt = train_default_opt(opt),
                  .batch = batch_in_order, .batch_user = f, .timeout_s = 20,
                  .init_params = w, .init_m = mo, .init_v = v, .start_iteration = start,
                  .want_state = 1, .zero = zero};
    int rc = runtime_run(&cfg, r, e);
    schedule_free(s);
    return rc;
}

/* zero 0 and zero 1 runs of the same schedule: the same bits everywhere. */
static void same_case(sched_kind kind, int r0, int r1, int opt)
{
    fixture f = fixture_synthetic("m", spec, 4096, 1, MB);
    plumb_err e = {{0}};
    int reps[] = {r0, r1};
    rt_result a, b;
    cr_assert_eq(run(&f, kind, reps, opt, 0, 3, 0, NULL, NULL, NULL, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(run(&f, kind, reps, opt, 1, 3, 0, NULL, NULL, NULL, &b, &e), 0, "%s", e.msg);
    size_t bytes = (size_t)f.m->nparams * sizeof(float);
    const char *what = sched_kind_name(kind);
    cr_expect_eq(memcmp(a.params, b.params, bytes), 0, "%s %dx%d opt %d: weights differ", what,
                 r0, r1, opt);
    cr_expect_eq(memcmp(a.loss, b.loss, 3 * sizeof(double)), 0, "%s: losses differ", what);
    if (opt != BK_SGD)
        cr_expect_eq(memcmp(a.opt_m, b.opt_m, bytes), 0, "%s: first moments differ", what);
    if (opt == BK_ADAM)
        cr_expect_eq(memcmp(a.opt_v, b.opt_v, bytes), 0, "%s: second moments differ", what);
    rt_result_free(&a);
    rt_result_free(&b);
    fixture_free(&f);
}

Test(zero, adam_2x2_same_bits) { same_case(SCHED_1F1B_FLUSH, 2, 2, BK_ADAM); }
Test(zero, momentum_2x2_same_bits) { same_case(SCHED_1F1B_FLUSH, 2, 2, BK_MOMENTUM); }
Test(zero, sgd_2x2_same_bits) { same_case(SCHED_1F1B_FLUSH, 2, 2, BK_SGD); }
/* 3 does not divide 841: the last shard is padded */
Test(zero, adam_3x2_padded_same_bits) { same_case(SCHED_1F1B_FLUSH, 3, 2, BK_ADAM); }
/* an unreplicated stage keeps its whole state beside a sharded one */
Test(zero, gpipe_2x1_same_bits) { same_case(SCHED_GPIPE, 2, 1, BK_ADAM); }
/* the split backward (I and W) before the reduce-scatter */
Test(zero, zbh1_2x2_same_bits) { same_case(SCHED_ZB_H1, 2, 2, BK_ADAM); }
/* a step per round and stashed weight versions (the stash is taken before the step) */
Test(zero, pipedream_2x2_same_bits) { same_case(SCHED_PIPEDREAM, 2, 2, BK_ADAM); }
Test(zero, twobw_2x2_same_bits) { same_case(SCHED_2BW, 2, 2, BK_MOMENTUM); }

/* Adam's two moments at 1/r: each worker's device peak is lower by at least what it no
 * longer holds: 2 whole vectors of n floats against two shards of c = ceil(n / r) and the
 * weights and gradients padded to r c, n the stage's parameters, each allocation rounded
 * up to the CPU backend's 64 bytes. The reduce-scatter sums the owned shard in place, in
 * the gradients, so there is no shard gradient buffer (c) to subtract; the transport's
 * kept receive buffer is one part under either (2 replicas: the all-reduce's part of
 * ceil(n / 2) + 1 floats, the reduce-scatter's c). */
static double rnd64(long long floats) { return (double)((floats * 4 + 63) / 64 * 64); }

Test(zero, peak_memory_holds_one_shard)
{
    fixture f = fixture_synthetic("m", spec, 4096, 1, MB);
    plumb_err e = {{0}};
    int reps[] = {2, 2};
    rt_result a, b;
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 0, 3, 0, NULL, NULL, NULL, &a, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 1, 3, 0, NULL, NULL, NULL, &b, &e), 0,
                 "%s", e.msg);
    sched_spec sp = {SCHED_1F1B_FLUSH, 4, 2, 1, 4, 3, reps, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "%s", e.msg);
    long long n[] = {841, 256};
    for (int w = 0; w < 4; w++) {
        int st = -1;
        for (int k = 0; k < s->nstages; k++)
            for (int j = 0; j < s->replicas[k]; j++)
                if (s->stage_workers[s->stage_first[k] + j] == w) st = k;
        cr_assert(st >= 0);
        long long c = (n[st] + 1) / 2;
        double want = 4 * rnd64(n[st]) - 2 * rnd64(2 * c) - 2 * rnd64(c);
        cr_expect(a.peak_bytes[w] > 0 && b.peak_bytes[w] > 0, "worker %d: peaks measured", w);
        cr_expect_geq(a.peak_bytes[w] - b.peak_bytes[w], want, "worker %d (stage %d): peak %.0f "
                      "B under zero 0, %.0f B under zero 1: expected at least %.0f B less", w,
                      st, a.peak_bytes[w], b.peak_bytes[w], want);
    }
    schedule_free(s);
    rt_result_free(&a);
    rt_result_free(&b);
    fixture_free(&f);
}

/* Checkpoints: the state comes back whole (gathered), and a run resumed from it (sharded
 * again) equals the whole run and zero 0's. (With 3 replicas of 4 microbatches a resumed
 * run hands the replicas other microbatches than the whole one, zero 0 as well, so its
 * sums differ in order there: resumed, it is compared with zero 0 resumed.) */
static void resume_case(int r0, int r1)
{
    fixture f = fixture_synthetic("m", spec, 4096, 1, MB);
    plumb_err e = {{0}};
    int reps[] = {r0, r1};
    rt_result whole, a, b, ref, refb;
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 1, 5, 0, NULL, NULL, NULL, &whole,
                     &e), 0, "%s", e.msg);
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 1, 2, 0, NULL, NULL, NULL, &a, &e),
                 0, "%s", e.msg);
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 1, 3, 2, a.params, a.opt_m, a.opt_v,
                     &b, &e), 0, "%s", e.msg);
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 0, 5, 0, NULL, NULL, NULL, &ref, &e),
                 0, "%s", e.msg);
    cr_assert_eq(run(&f, SCHED_1F1B_FLUSH, reps, BK_ADAM, 0, 3, 2, a.params, a.opt_m, a.opt_v,
                     &refb, &e), 0, "%s", e.msg);
    size_t bytes = (size_t)f.m->nparams * sizeof(float);
    const rt_result *cmp = r0 == 2 ? &whole : &refb;
    cr_expect_eq(memcmp(cmp->params, b.params, bytes), 0, "%dx%d: resumed weights differ", r0,
                 r1);
    cr_expect_eq(memcmp(cmp->opt_m, b.opt_m, bytes), 0, "first moments differ");
    cr_expect_eq(memcmp(cmp->opt_v, b.opt_v, bytes), 0, "second moments differ");
    cr_expect_eq(memcmp(cmp->loss + (cmp == &whole ? 2 : 0), b.loss, 3 * sizeof(double)), 0,
                 "losses differ");
    cr_expect_eq(memcmp(whole.params, ref.params, bytes), 0, "zero 1 differs from zero 0");
    cr_expect_eq(memcmp(whole.opt_v, ref.opt_v, bytes), 0, "zero 1's state differs");
    rt_result_free(&whole);
    rt_result_free(&a);
    rt_result_free(&b);
    rt_result_free(&ref);
    rt_result_free(&refb);
    fixture_free(&f);
}

Test(zero, resumed_2x2_equals_whole) { resume_case(2, 2); }
Test(zero, resumed_3x2_equals_zero0_resumed) { resume_case(3, 2); }

/* stage_shard_take from a vector of stage_nparams floats, as stage.h allows: the last
 * replica's shard (256 parameters in 3 shards of 86: 84 real floats, 2 of padding) takes
 * the real floats only and zero padding, whatever lies past the vector's end (here 7s in
 * a longer block; the copy of the whole shard read them, past an exactly sized one). */
Test(zero, shard_take_reads_only_the_real_floats)
{
    fixture f = fixture_synthetic("m", spec, 16, 1, MB);
    const backend *bk = backend_cpu();
    plumb_err e = {{0}};
    bk_ctx *ctx = bk->create(0, &e);
    cr_assert(ctx, "%s", e.msg);
    stage_opts so = {0, 0, NULL, 0, 3, 2};
    stage *st = stage_create_opts(bk, ctx, f.m, 4, 8, MB, 1, &so, &e);
    cr_assert(st, "%s", e.msg);
    const long long n = stage_nparams(st), c = stage_shard_count(st);
    cr_assert_eq(n, 256);
    cr_assert_eq(c, 86);
    float host[258], got[86];
    for (int i = 0; i < 258; i++) host[i] = i < n ? (float)(i + 1) : 7.0f;
    float *full = bk->alloc(ctx, sizeof host, &e), *shard = bk->alloc(ctx, sizeof got, &e);
    cr_assert(full && shard, "%s", e.msg);
    bk->upload(ctx, full, host, sizeof host);
    stage_shard_take(st, full, shard);
    bk->download(ctx, got, shard, sizeof got);
    for (int k = 0; k < 86; k++)
        cr_expect_eq(got[k], k < 84 ? (float)(2 * 86 + k + 1) : 0.0f, "shard float %d: %g", k,
                     got[k]);
    bk->free(ctx, full);
    bk->free(ctx, shard);
    stage_free(st);
    bk->destroy(ctx);
    fixture_free(&f);
}

/* Under ZeRO-1 the gradients are settled once, by the runtime before the reduce-scatter
 * (the vocabulary-parallel zero row cleared on every replica, so its sum is 0); stage_step
 * then steps the owned shard and touches no gradient outside it. gpt-mini's embedding on
 * tp rank 0 of 2, replica 0 of 2: 129 token rows (the zero row, 128, last) and 64
 * position rows of 128 floats, 24704 floats in shards of 12352; the zero row, floats
 * 16384 .. 16511, lies in replica 1's shard, so replica 0's step leaves it as it was (it
 * was cleared a second time, in the step, before). */
static int no_allreduce(void *user, float *buf, size_t count)
{
    (void)user, (void)buf, (void)count;
    return 0;
}

Test(zero, step_settles_nothing_outside_its_shard)
{
    plumb_err e = {{0}};
    model *m = model_load("examples/models/gpt-mini.json", &e);
    cr_assert(m, "%s", e.msg);
    const backend *bk = backend_cpu();
    bk_ctx *ctx = bk->create(0, &e);
    cr_assert(ctx, "%s", e.msg);
    stage_tp tp = {.rank = 0, .size = 2, .allreduce = no_allreduce};
    stage_opts so = {0, 0, &tp, 0, 2, 0};
    stage *st = stage_create_opts(bk, ctx, m, 0, 0, 2, 1, &so, &e);
    cr_assert(st, "%s", e.msg);
    const long long n = stage_nparams(st), c = stage_shard_count(st);
    cr_assert_eq(n, 24704);
    cr_assert_eq(c, 12352);
    float *host = malloc((size_t)(2 * c) * sizeof *host);
    cr_assert(host);
    for (long long i = 0; i < 2 * c; i++) host[i] = 1.0f;
    bk->upload(ctx, stage_grads(st), host, (size_t)(2 * c) * sizeof *host);
    bk_opt o = train_default_opt(BK_SGD);
    cr_assert_eq(stage_step(st, &o, &e), 0, "%s", e.msg);
    bk->download(ctx, host, stage_grads(st), (size_t)(2 * c) * sizeof *host);
    for (long long i = 16384; i < 16512; i++)
        cr_expect_eq(host[i], 1.0f, "gradient float %lld (replica 1's zero row): %g", i,
                     host[i]);
    free(host);
    stage_free(st);
    bk->destroy(ctx);
    model_free(m);
}
