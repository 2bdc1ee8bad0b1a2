/* test_train_pipeline.c: the pipeline runtime executing schedule IRs with worker threads
 * and the local transport. Synchronous schedules (gpipe, 1f1b-flush, zb-h1, interleaved,
 * zb-v, dualpipev, replicated stages) must give the same weights as sequential training with
 * gradient accumulation; the asynchronous ones (pipedream, 2bw) must train; a one-stage
 * pipedream equals per-microbatch SGD; a broken IR fails instead of hanging. Moving
 * activations, gradients and all-reduce sums by device hand-offs (the CPU backend's, with
 * checks: tests/markbk.h) gives the same bits as host copies. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "exec/data.h"
#include "exec/runtime.h"
#include "exec/train.h"
#include "tests/batches.h"
#include "tests/markbk.h"

static const char *spec =
    "{\"format\":\"plumb-model/1\",\"input\":[2,4,4],\"classes\":4,\"seed\":5,\"layers\":["
    "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3,\"padding\":1},{\"type\":\"relu\"},"
    "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":16},{\"type\":\"gelu\"},"
    "{\"type\":\"linear\",\"out\":12},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";
#define MB 3

/* The backend the pipelines run on (NULL: the CPU's). */
static const backend *run_bk;

/* The model and 4096 synthetic samples; microbatch g (batch_in_order) = samples
 * [g MB, (g + 1) MB) of them, in order. */
static fixture setup(void) { return fixture_synthetic("m", spec, 4096, 1, MB); }

/* Sequential reference: `iters` minibatches of M microbatches of MB. */
static float *sequential(fixture *f, int M, int iters, int kind)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    train_cfg cfg = {MB, M, train_default_opt(kind)};
    seq_trainer *t = seqtrain_create(bk, c, f->m, &cfg, &e);
    cr_assert(t, "%s", e.msg);
    for (int it = 0; it < iters; it++) {
        size_t off = (size_t)it * M * MB;
        cr_assert_eq(seqtrain_step(t, f->d->x + off * f->d->sample_numel, f->d->y + off, NULL,
                                   NULL, &e), 0, "%s", e.msg);
    }
    float *w = malloc((size_t)f->m->nparams * sizeof *w);
    seqtrain_get_params(t, w, &e);
    seqtrain_free(t);
    bk->destroy(c);
    return w;
}

/* The measured trace's computations on each worker's device track, in time order, are
 * the IR's F/B/I/W of that worker in list order: a posted receive never reorders them. */
static void expect_trace_order(const schedule *s, const timeline *tl)
{
    for (int w = 0; w < s->nworkers; w++) {
        int i = 0, n = 0;
        for (size_t k = 0; k < tl->n; k++) {
            const tl_event *ev = &tl->ev[k];
            const tl_track *t = &tl->tracks[ev->track];
            if (t->kind != TL_TRACK_DEVICE || t->device != w || ev->kind > TL_W) continue;
            while (i < s->len[w] && s->acts[w][i].kind > ACT_W) i++;
            cr_assert_lt(i, s->len[w], "worker %d: more computations measured than listed", w);
            const action *a = &s->acts[w][i++];
            cr_expect(ev->kind == a->kind && ev->stage == a->stage &&
                      ev->microbatch == a->microbatch, "worker %d computation %d: measured "
                      "kind %d stage %d microbatch %d, listed %s", w, n, ev->kind, ev->stage,
                      ev->microbatch, act_kind_name((act_kind)a->kind));
            n++;
        }
        while (i < s->len[w] && s->acts[w][i].kind > ACT_W) i++;
        cr_expect_gt(n, 0, "worker %d: no computation measured", w);
        cr_expect_eq(i, s->len[w], "worker %d: %d computations measured, fewer than listed", w,
                     n);
    }
}

/* Runs the schedule of `kind` over stage boundaries `cuts` (first layer of each stage). */
static int pipeline_rc(fixture *f, sched_kind kind, int nstages, const int *firsts,
                       int chunks, const int *replicas, int M, int iters, int opt,
                       int recompute, rt_result *res, plumb_err *e)
{
    int nranks = nstages / chunks, nworkers = 0;
    for (int s = 0; s < nranks; s++) nworkers += replicas ? replicas[s] : 1;
    sched_spec sp = {kind, nworkers, nstages, chunks, M, iters, replicas, NULL};
    schedule *s = schedule_generate(&sp, e);
    cr_assert(s, "%s: %s", sched_kind_name(kind), e->msg);
    cr_assert_eq(schedule_validate(s, e), 0, "%s", e->msg);
    int first[8], last[8];
    for (int i = 0; i < nstages; i++) {
        first[i] = firsts[i];
        last[i] = i + 1 < nstages ? firsts[i + 1] - 1 : f->m->nlayers - 1;
    }
    rt_cfg cfg = {.bk = run_bk ? run_bk : backend_cpu(), .m = f->m, .sched = s,
                  .stage_first = first, .stage_last = last, .microbatch = MB,
                  .opt = train_default_opt(opt),
                  .batch = batch_in_order, .batch_user = f, .timeout_s = 20, .recompute = recompute};
    int rc = runtime_run(&cfg, res, e);
    if (rc == 0) expect_trace_order(s, res->trace);
    schedule_free(s);
    return rc;
}

static int pipeline(fixture *f, sched_kind kind, int nstages, const int *firsts, int chunks,
                    const int *replicas, int M, int iters, int opt, rt_result *res,
                    plumb_err *e)
{
    return pipeline_rc(f, kind, nstages, firsts, chunks, replicas, M, iters, opt, 0, res, e);
}

static void expect_same(const fixture *f, const float *a, const float *b, const char *what)
{
    int bad = 0;
    for (long long i = 0; i < f->m->nparams && bad < 5; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-5f)) { /* the bound: max abs diff 1e-5 */
            cr_expect(0, "%s: w[%lld] pipeline %g, sequential %g", what, i, b[i], a[i]);
            bad++;
        }
}

static void sync_case(sched_kind kind, int nstages, const int *firsts, int chunks, int M,
                      int opt)
{
    fixture f = setup();
    plumb_err e = {{0}};
    float *ref = sequential(&f, M, 3, opt);
    rt_result r;
    cr_assert_eq(pipeline(&f, kind, nstages, firsts, chunks, NULL, M, 3, opt, &r, &e), 0,
                 "%s", e.msg);
    expect_same(&f, ref, r.params, sched_kind_name(kind));
    cr_expect(r.loss[0] > 0 && isfinite(r.loss[2]));
    cr_expect(r.trace && r.trace->n > 0, "a measured trace");
    /* every device track carries its worker's peak memory (weights and gradients at least) */
    size_t wbytes = (size_t)f.m->nparams * sizeof(float);
    double sum = 0;
    for (int t = 0; r.trace && t < r.trace->ntracks; t++)
        if (r.trace->tracks[t].kind == TL_TRACK_DEVICE) {
            cr_expect_gt(r.trace->tracks[t].peak_bytes, 0, "track %d has a peak", t);
            sum += r.trace->tracks[t].peak_bytes;
        }
    cr_expect_gt(sum, 2.0 * wbytes, "the workers' peaks hold all weights and gradients");
    free(ref);
    rt_result_free(&r);
    fixture_free(&f);
}

Test(pipeline, gpipe_equals_sequential)
{
    int f2[] = {0, 4}, f3[] = {0, 3, 6};
    sync_case(SCHED_GPIPE, 2, f2, 1, 4, BK_SGD);
    sync_case(SCHED_GPIPE, 3, f3, 1, 4, BK_ADAM);
}

Test(pipeline, flush_1f1b_equals_sequential)
{
    int f2[] = {0, 4}, f4[] = {0, 2, 4, 7};
    sync_case(SCHED_1F1B_FLUSH, 2, f2, 1, 4, BK_MOMENTUM);
    sync_case(SCHED_1F1B_FLUSH, 4, f4, 1, 6, BK_SGD);
}

Test(pipeline, zero_bubble_equals_sequential)
{
    int f3[] = {0, 3, 6}, f4[] = {0, 2, 4, 7};
    sync_case(SCHED_ZB_H1, 3, f3, 1, 4, BK_SGD);
    sync_case(SCHED_ZB_V, 4, f4, 2, 4, BK_SGD);
}

/* DualPipeV: 2 and 3 ranks in a V, microbatches from fewer than 2p (laid out and dropped)
 * to more, not a multiple of anything */
Test(pipeline, dualpipev_equals_sequential)
{
    int f4[] = {0, 2, 4, 7}, f6[] = {0, 1, 3, 4, 6, 7};
    sync_case(SCHED_DUALPIPEV, 4, f4, 2, 4, BK_SGD);
    sync_case(SCHED_DUALPIPEV, 4, f4, 2, 3, BK_MOMENTUM);
    sync_case(SCHED_DUALPIPEV, 6, f6, 2, 7, BK_ADAM);
}

Test(pipeline, interleaved_equals_sequential)
{
    int f4[] = {0, 2, 4, 7};
    sync_case(SCHED_INTERLEAVED, 4, f4, 2, 4, BK_ADAM);
}

Test(pipeline, replicated_stage_equals_sequential)
{
    fixture f = setup();
    plumb_err e = {{0}};
    int firsts[] = {0, 4}, reps[] = {2, 1};
    float *ref = sequential(&f, 4, 3, BK_SGD);
    rt_result r;
    cr_assert_eq(pipeline(&f, SCHED_1F1B_FLUSH, 2, firsts, 1, reps, 4, 3, BK_SGD, &r, &e), 0,
                 "%s", e.msg);
    expect_same(&f, ref, r.params, "1f1b-flush with stage 0 on 2 replicas");
    free(ref);
    rt_result_free(&r);
    fixture_free(&f);
}

/* Runs one schedule with host copies (the CPU backend without its hand-off entries) and
 * with checked device hand-offs (markbk): the weights and losses must be the same bits,
 * and nothing may be left allocated. */
static void handoff_case(sched_kind kind, int nstages, const int *firsts, int chunks,
                         const int *replicas, int opt)
{
    fixture f = setup();
    plumb_err e = {{0}};
    rt_result host, dev;
    run_bk = hostbk();
    cr_assert_eq(pipeline(&f, kind, nstages, firsts, chunks, replicas, 4, 3, opt, &host, &e),
                 0, "%s", e.msg);
    long copies = markbk_peer_copies;
    run_bk = markbk();
    cr_assert_eq(pipeline(&f, kind, nstages, firsts, chunks, replicas, 4, 3, opt, &dev, &e),
                 0, "%s", e.msg);
    run_bk = NULL;
    const char *what = sched_kind_name(kind);
    cr_expect_gt(markbk_peer_copies, copies, "%s: messages moved by device copies", what);
    cr_expect_eq(memcmp(host.params, dev.params, (size_t)f.m->nparams * sizeof(float)), 0,
                 "%s: the same weights", what);
    cr_expect_eq(memcmp(host.loss, dev.loss, 3 * sizeof(double)), 0, "%s: the same losses",
                 what);
    cr_expect_eq(markbk_violations, 0, "%s: marks recorded by their maker, before any wait",
                 what);
    cr_expect_eq(markbk_bufs_live, 0, "%s: every buffer freed", what);
    cr_expect_eq(markbk_marks_live, 0, "%s: every mark freed", what);
    rt_result_free(&host);
    rt_result_free(&dev);
    fixture_free(&f);
}

Test(pipeline, device_handoffs_equal_host_copies)
{
    int f2[] = {0, 4}, f4[] = {0, 2, 4, 7}, reps[] = {2, 3};
    handoff_case(SCHED_1F1B_FLUSH, 4, f4, 1, NULL, BK_MOMENTUM);
    handoff_case(SCHED_ZB_V, 4, f4, 2, NULL, BK_SGD);
    handoff_case(SCHED_1F1B_FLUSH, 2, f2, 1, reps, BK_ADAM); /* all-reduces of 2 and 3 */
    handoff_case(SCHED_PIPEDREAM, 2, f2, 1, NULL, BK_SGD);
}

/* Buffers allocated by a run of `iters` iterations on the counting backend (the runtime's,
 * the stages' and the transport's staging). */
static long allocs_for(fixture *f, sched_kind kind, int nstages, const int *firsts, int chunks,
                       const int *replicas, int iters)
{
    plumb_err e = {{0}};
    rt_result r;
    long before = markbk_allocs;
    run_bk = countbk();
    cr_assert_eq(pipeline(f, kind, nstages, firsts, chunks, replicas, 4, iters, BK_ADAM, &r, &e),
                 0, "%s", e.msg);
    run_bk = NULL;
    rt_result_free(&r);
    return markbk_allocs - before;
}

/* Every buffer a run needs is allocated in its first iterations: six more iterations allocate
 * nothing (on a GPU each cudaMalloc and cudaFree in the loop would synchronize the device). */
Test(pipeline, steady_iterations_allocate_nothing)
{
    int f2[] = {0, 4}, f4[] = {0, 2, 4, 7}, reps[] = {2, 3};
    struct { sched_kind kind; int nstages, chunks; const int *firsts, *reps; } c[] = {
        {SCHED_1F1B_FLUSH, 4, 1, f4, NULL}, {SCHED_ZB_V, 4, 2, f4, NULL},
        {SCHED_1F1B_FLUSH, 2, 1, f2, reps}, {SCHED_PIPEDREAM, 2, 1, f2, NULL},
        {SCHED_GPIPE, 4, 1, f4, NULL}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        fixture f = setup();
        long a = allocs_for(&f, c[i].kind, c[i].nstages, c[i].firsts, c[i].chunks, c[i].reps, 3);
        long b = allocs_for(&f, c[i].kind, c[i].nstages, c[i].firsts, c[i].chunks, c[i].reps, 9);
        cr_expect_eq(a, b, "%s%s: 3 iterations allocate %ld buffers, 9 allocate %ld",
                     sched_kind_name(c[i].kind), c[i].reps ? " (replicated)" : "", a, b);
        cr_expect_eq(markbk_bufs_live, 0, "every buffer freed");
        fixture_free(&f);
    }
}

/* Recomputed activations (plan "recompute"): the same weights as sequential training,
 * also with split I/W passes and with stashed versions. */
Test(pipeline, recompute_equals_sequential)
{
    int f3[] = {0, 3, 6};
    sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_ZB_H1};
    for (int k = 0; k < 2; k++) {
        fixture f = setup();
        plumb_err e = {{0}};
        float *ref = sequential(&f, 4, 3, BK_ADAM);
        rt_result r;
        cr_assert_eq(pipeline_rc(&f, kinds[k], 3, f3, 1, NULL, 4, 3, BK_ADAM, 1, &r, &e), 0,
                     "%s", e.msg);
        expect_same(&f, ref, r.params, sched_kind_name(kinds[k]));
        free(ref);
        rt_result_free(&r);
        fixture_free(&f);
    }
    /* pipedream with recompute equals pipedream without (stashed versions recompute) */
    fixture f = setup();
    plumb_err e = {{0}};
    rt_result a, b;
    cr_assert_eq(pipeline_rc(&f, SCHED_PIPEDREAM, 3, f3, 1, NULL, 4, 3, BK_SGD, 0, &a, &e), 0);
    cr_assert_eq(pipeline_rc(&f, SCHED_PIPEDREAM, 3, f3, 1, NULL, 4, 3, BK_SGD, 1, &b, &e), 0);
    expect_same(&f, a.params, b.params, "pipedream recompute");
    rt_result_free(&a);
    rt_result_free(&b);
    fixture_free(&f);
}

/* One stage under pipedream: one optimizer step per microbatch, i.e. SGD on MB samples. */
Test(pipeline, pipedream_one_stage_is_per_microbatch_sgd)
{
    fixture f = setup();
    plumb_err e = {{0}};
    int firsts[] = {0};
    float *ref = sequential(&f, 1, 8, BK_SGD);
    rt_result r;
    cr_assert_eq(pipeline(&f, SCHED_PIPEDREAM, 1, firsts, 1, NULL, 4, 2, BK_SGD, &r, &e), 0,
                 "%s", e.msg);
    expect_same(&f, ref, r.params, "pipedream, 1 stage");
    free(ref);
    rt_result_free(&r);
    fixture_free(&f);
}

/* The asynchronous schedules keep stashed versions and still learn: their loss over the
 * last iterations comes close to that of the synchronous gpipe on the same data. */
Test(pipeline, async_schedules_train)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_PIPEDREAM, SCHED_2BW};
    double tail[3];
    for (int k = 0; k < 3; k++) {
        fixture f = setup();
        plumb_err e = {{0}};
        int firsts[] = {0, 3, 6};
        rt_result r;
        cr_assert_eq(pipeline(&f, kinds[k], 3, firsts, 1, NULL, 4, 60, BK_MOMENTUM, &r, &e), 0,
                     "%s: %s", sched_kind_name(kinds[k]), e.msg);
        double a = 0, b = 0;
        for (int i = 0; i < 10; i++) {
            a += r.loss[i] / 10;
            b += r.loss[50 + i] / 10;
        }
        tail[k] = b;
        cr_expect(b < 0.97 * a, "%s: loss %g -> %g", sched_kind_name(kinds[k]), a, b);
        rt_result_free(&r);
        fixture_free(&f);
    }
    /* pipedream steps once per microbatch (4 x more steps): at least as good as gpipe */
    cr_expect(tail[1] < tail[0], "pipedream %g vs gpipe %g", tail[1], tail[0]);
    /* 2bw: one step per iteration with one step of delay: near gpipe */
    cr_expect(tail[2] < tail[0] + 0.05, "2bw %g vs gpipe %g", tail[2], tail[0]);
}

/* A schedule whose send was removed: the runtime refuses it before running, over any
 * transport, since its replay (schedule_send_bound) finds workers that would wait for
 * ever. */
Test(pipeline, broken_schedule_fails_not_hangs)
{
    fixture f = setup();
    plumb_err e = {{0}};
    sched_spec sp = {SCHED_GPIPE, 2, 2, 1, 2, 1, NULL, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "%s", e.msg);
    for (int i = 0; i < s->len[0]; i++)
        if (s->acts[0][i].kind == ACT_SEND_F) {
            memmove(&s->acts[0][i], &s->acts[0][i + 1],
                    (size_t)(s->len[0] - i - 1) * sizeof(action));
            s->len[0]--;
            break;
        }
    int first[] = {0, 4}, last[] = {3, 8};
    rt_cfg cfg = {.bk = backend_cpu(), .m = f.m, .sched = s, .stage_first = first,
                  .stage_last = last, .microbatch = MB, .opt = train_default_opt(BK_SGD),
                  .batch = batch_in_order, .batch_user = &f, .timeout_s = 1};
    rt_result r;
    cr_expect_eq(runtime_run(&cfg, &r, &e), -1);
    cr_expect(strstr(e.msg, "waits for ever at action 3 (0RECV_B0)") != NULL, "%s", e.msg);
    /* so is it over a transport that neither reserves nor lends (as mpi and nccl) */
    transport *t = transport_local_create(2, 1, &e);
    cr_assert(t, "%s", e.msg);
    t->reserve = NULL;
    t->send_lent = NULL;
    cfg.tr = t;
    cr_expect_eq(runtime_run(&cfg, &r, &e), -1);
    cr_expect(strstr(e.msg, "waits for ever at action 3 (0RECV_B0)") != NULL, "%s", e.msg);
    cfg.tr = NULL;
    t->destroy(t);
    /* stage ranges that do not cover the model */
    int bad_last[] = {3, 7};
    cfg.stage_last = bad_last;
    cr_expect_eq(runtime_run(&cfg, &r, &e), -1);
    cr_expect(strstr(e.msg, "expected the stages to cover all 9 layers") != NULL, "%s", e.msg);
    schedule_free(s);
    fixture_free(&f);
}

/* One process per rank, emulated: two runtime_run calls in two threads, each running one
 * worker, joined by one shared transport; together they give the sequential weights. */
typedef struct rank_arg {
    rt_cfg cfg;
    rt_result res;
    plumb_err err;
    int rc;
} rank_arg;

static void *rank_main(void *p)
{
    rank_arg *a = p;
    a->rc = runtime_run(&a->cfg, &a->res, &a->err);
    return NULL;
}

static void one_process_per_rank(const backend *bk)
{
    fixture f = setup();
    plumb_err e = {{0}};
    float *ref = sequential(&f, 4, 3, BK_MOMENTUM);
    sched_spec sp = {SCHED_1F1B_FLUSH, 2, 2, 1, 4, 3, NULL, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "%s", e.msg);
    transport *tr = transport_local_create(2, 20, &e);
    int first[] = {0, 4}, last[] = {3, 8}, me[2] = {0, 1};
    rank_arg ra[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        memset(&ra[r], 0, sizeof ra[r]);
        ra[r].cfg = (rt_cfg){.bk = bk, .m = f.m, .sched = s, .stage_first = first,
                             .stage_last = last, .microbatch = MB,
                             .opt = train_default_opt(BK_MOMENTUM), .batch = batch_in_order,
                             .batch_user = &f, .tr = tr, .local_workers = &me[r], .nlocal = 1};
        cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &ra[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) cr_assert_eq(ra[r].rc, 0, "rank %d: %s", r, ra[r].err.msg);
    /* rank 0 owns stage 0's weights, rank 1 stage 1's and the loss */
    long long split = f.m->layers[4].param_offset;
    float *w = malloc((size_t)f.m->nparams * sizeof *w);
    memcpy(w, ra[0].res.params, (size_t)split * sizeof *w);
    memcpy(w + split, ra[1].res.params + split, (size_t)(f.m->nparams - split) * sizeof *w);
    expect_same(&f, ref, w, "two ranks");
    cr_expect(ra[1].res.loss[0] > 0 && ra[0].res.loss[0] == 0, "the loss lives on rank 1");
    for (int r = 0; r < 2; r++) rt_result_free(&ra[r].res);
    free(w);
    free(ref);
    tr->destroy(tr);
    schedule_free(s);
    fixture_free(&f);
}

Test(pipeline, one_process_per_rank)
{
    one_process_per_rank(backend_cpu());
}

/* Rank 0 may finish (and release its staging buffers) before rank 1 has received its
 * last activations: release waits for them. */
Test(pipeline, one_process_per_rank_device_handoffs)
{
    one_process_per_rank(markbk());
    cr_expect_gt(markbk_peer_copies, 0);
    cr_expect_eq(markbk_violations, 0);
    cr_expect_eq(markbk_bufs_live, 0);
    cr_expect_eq(markbk_marks_live, 0);
}
