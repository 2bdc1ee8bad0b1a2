/* test_train_async.c: the weights the pipeline runtime ends with, against references that
 * share no code with it.
 *
 * Synchronous kinds (gpipe, 1f1b-flush, interleaved, zb-h1) over 1 to 4 stages (ranks),
 * with and without replicated stages: 20 steps give the weights of sequential minibatch
 * SGD with gradient accumulation (seqtrain_step) within 1e-5 (max abs difference).
 *
 * Asynchronous kinds (pipedream with weight stashing, 2bw): a single-threaded replay of
 * the schedule's per-stage order of F, B, ALLREDUCE and STEP. Each stage's weight versions
 * are counted from that order alone (a forward uses the weights after every STEP of its
 * stage that came before it; its backward the same weights; a STEP applies the gradients
 * accumulated since the previous one), checked against the `version` fields of the IR and
 * against PipeDream's closed forms (paper section 3.3: stage s of p runs forward m on the
 * weights after m - (p - s - 1) updates; 2BW after floor((m - (p - s - 1)) / M) updates),
 * then the replay's final weights are compared with runtime_run's (max abs difference
 * <= 1e-5 after 20 steps, p = 2, 3, 4). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "exec/data.h"
#include "exec/runtime.h"
#include "exec/stage.h"
#include "exec/train.h"
#include "tests/batches.h"

/* A small MLP, 10 top-level layers so that 4 ranks x 2 chunks can split it. */
static const char *spec =
    "{\"format\":\"plumb-model/1\",\"input\":[8],\"classes\":4,\"seed\":11,\"layers\":["
    "{\"type\":\"linear\",\"out\":12},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"out\":12},{\"type\":\"gelu\"},"
    "{\"type\":\"linear\",\"out\":10},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"out\":8},{\"type\":\"relu\"},"
    "{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";
#define MB 4        /* samples per microbatch */
#define STEPS 20    /* optimizer steps per stage (sync: iterations) */
#define TOL 1e-5    /* max abs difference allowed */

/* The MLP and 2048 synthetic samples; global microbatch g (batch_in_order) = samples
 * [g MB, (g + 1) MB) of them, in order. */
static fixture setup(void) { return fixture_synthetic("mlp", spec, 2048, 3, MB); }

static double max_abs_diff(const float *a, const float *b, long long n)
{
    double d = 0;
    for (long long i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        if (!(x <= d)) d = x; /* NaN propagates */
    }
    return d;
}

/* Layer ranges of n stages cut evenly over the model's layers. */
static void cut(const model *m, int n, int *first, int *last)
{
    for (int i = 0; i < n; i++) first[i] = i * m->nlayers / n;
    for (int i = 0; i < n; i++) last[i] = i + 1 < n ? first[i + 1] - 1 : m->nlayers - 1;
}

static schedule *make_sched(sched_kind kind, int ranks, int chunks, const int *reps, int M,
                            int iters)
{
    plumb_err e = {{0}};
    int nworkers = 0;
    for (int s = 0; s < ranks; s++) nworkers += reps ? reps[s] : 1;
    sched_spec sp = {kind, nworkers, ranks * chunks, chunks, M, iters, reps, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "%s: %s", sched_kind_name(kind), e.msg);
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    return s;
}

static void run_pipeline(fixture *f, const schedule *s, bk_opt opt, rt_result *r)
{
    plumb_err e = {{0}};
    int first[16], last[16];
    cut(f->m, s->nstages, first, last);
    rt_cfg cfg = {.bk = backend_cpu(), .m = f->m, .sched = s, .stage_first = first,
                  .stage_last = last, .microbatch = MB, .opt = opt,
                  .batch = batch_in_order, .batch_user = f, .timeout_s = 20};
    cr_assert_eq(runtime_run(&cfg, r, &e), 0, "%s: %s", sched_kind_name(s->kind), e.msg);
}

/* ---- synchronous kinds against sequential SGD with gradient accumulation ------------- */

static float *sequential(fixture *f, int M, int iters, bk_opt opt)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    cr_assert(c, "%s", e.msg);
    train_cfg cfg = {MB, M, opt};
    seq_trainer *t = seqtrain_create(bk, c, f->m, &cfg, &e);
    cr_assert(t, "%s", e.msg);
    float *x = malloc((size_t)M * MB * f->d->sample_numel * sizeof *x);
    int32_t *y = malloc((size_t)M * MB * f->d->targets_per_sample * sizeof *y);
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < M; k++)
            batch_in_order(f, it * M + k, x + (size_t)k * MB * f->d->sample_numel,
                  y + (size_t)k * MB * f->d->targets_per_sample, &e);
        cr_assert_eq(seqtrain_step(t, x, y, NULL, NULL, &e), 0, "%s", e.msg);
    }
    float *w = malloc((size_t)f->m->nparams * sizeof *w);
    cr_assert_eq(seqtrain_get_params(t, w, &e), 0, "%s", e.msg);
    free(x);
    free(y);
    seqtrain_free(t);
    bk->destroy(c);
    return w;
}

/* Runs kind on `ranks` ranks (x chunks), replicas reps (NULL: none), M microbatches, for
 * STEPS iterations; returns the max abs difference to the sequential weights. */
static double sync_diff(fixture *f, const float *ref, sched_kind kind, int ranks, int chunks,
                        const int *reps, int M)
{
    schedule *s = make_sched(kind, ranks, chunks, reps, M, STEPS);
    rt_result r;
    run_pipeline(f, s, train_default_opt(BK_SGD), &r);
    double d = max_abs_diff(ref, r.params, f->m->nparams);
    cr_expect(isfinite(r.loss[STEPS - 1]) && r.loss[STEPS - 1] < r.loss[0],
              "%s: the loss falls (%g -> %g)", sched_kind_name(kind), r.loss[0],
              r.loss[STEPS - 1]);
    rt_result_free(&r);
    schedule_free(s);
    return d;
}

Test(sync_grid, equals_sequential_sgd_within_1e5)
{
    fixture f = setup();
    const int M = 4;
    float *ref = sequential(&f, M, STEPS, train_default_opt(BK_SGD));
    /* the reference itself moved: the comparison is not between two initial weights */
    float *w0 = malloc((size_t)f.m->nparams * sizeof *w0);
    model_init_params(f.m, 0, f.m->nlayers - 1, w0);
    cr_assert(max_abs_diff(ref, w0, f.m->nparams) > 1e-2, "sequential training moved");
    free(w0);
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_ZB_H1, SCHED_INTERLEAVED};
    double worst = 0;
    for (int k = 0; k < 4; k++)
        for (int p = 1; p <= 4; p++)
            for (int rep = 0; rep < 2; rep++) {
                int chunks = kinds[k] == SCHED_INTERLEAVED ? 2 : 1;
                if (rep && chunks > 1) continue; /* interleaved takes no replicas */
                int reps[4] = {1, 1, 1, 1};
                if (rep) {
                    reps[0] = 2;                /* the input stage on 2 replicas */
                    if (p >= 3) reps[p - 1] = 3; /* and the loss stage on 3 */
                }
                double d = sync_diff(&f, ref, kinds[k], p, chunks, rep ? reps : NULL, M);
                fprintf(stderr, "sync %-11s %d rank(s) x %d chunk(s)%s: max |w - w_seq| = "
                        "%.3g\n", sched_kind_name(kinds[k]), p, chunks,
                        rep ? ", replicated" : "", d);
                cr_expect(d <= TOL, "%s, %d ranks%s: max abs diff %g > %g",
                          sched_kind_name(kinds[k]), p, rep ? ", replicated" : "", d, TOL);
                if (d > worst || d != d) worst = d;
            }
    fprintf(stderr, "sync grid: worst max abs diff %.3g (limit %g)\n", worst, TOL);
    free(ref);
    fixture_free(&f);
}

/* ---- asynchronous kinds against a single-threaded replay of the schedule ------------- */

/* SGD with a larger rate than the default 0.05, so that a wrong version (no stashing, an
 * update applied one step early or late) moves the weights far beyond the tolerance. */
static bk_opt async_opt(void)
{
    bk_opt o = train_default_opt(BK_SGD);
    o.lr = 0.2f;
    return o;
}

/* One (worker, stage) of the replay: a stage object whose parameter vector holds the
 * newest version; older versions are kept as copies (all of them: the run is short). */
typedef struct rstate {
    int w, s;
    stage *st;
    float **old;        /* [nsteps + 1] copies of versions < cur */
    int cur;            /* newest version = steps taken */
    int *fver;          /* [G] version the forward of microbatch g used; -1 */
    float *dout;        /* (MB, stage out) device buffer for the output gradient */
    int nred;
} rstate;

typedef struct replay {
    fixture *f;
    const schedule *sc;
    bk_ctx *ctx;
    int G;              /* microbatches in the schedule */
    int nst;
    rstate *rs;
    float **act;        /* [nstages * G] host output of stage s for g */
    float **dgr;        /* [nstages * G] host input gradient of stage s for g */
    int version_mismatch;
} replay;

static rstate *state_of(replay *rp, int w, int s)
{
    for (int i = 0; i < rp->nst; i++)
        if (rp->rs[i].w == w && rp->rs[i].s == s) return &rp->rs[i];
    return NULL;
}

/* Targets per step of a microbatch's loss (the minibatch the paper defines): one
 * microbatch per replica of the loss stage for pipedream, an iteration's microbatches
 * for 2bw and the synchronous kinds. */
static float ref_scale(const schedule *sc)
{
    int per = sc->kind == SCHED_PIPEDREAM ? sc->replicas[sc->nstages - 1] : sc->microbatches;
    return 1.0f / (float)(per * MB);
}

/* Runs action a of worker w if its inputs exist; returns 1 when done, 0 when it must
 * wait. SEND/RECV are no-ops: data moves through act/dgr. */
static int replay_action(replay *rp, int w, const action *a, int *pos)
{
    const backend *bk = backend_cpu();
    const schedule *sc = rp->sc;
    int S = sc->nstages, g = a->microbatch, s = a->stage;
    plumb_err e = {{0}};
    rstate *r = state_of(rp, w, s);
    switch (a->kind) {
    case ACT_SEND_F: case ACT_RECV_F: case ACT_SEND_B: case ACT_RECV_B:
        return 1;
    case ACT_F: {
        if (s > 0 && !rp->act[(s - 1) * rp->G + g]) return 0;
        float *x = malloc((size_t)MB * rp->f->d->sample_numel * sizeof *x);
        int32_t *y = malloc((size_t)MB * rp->f->d->targets_per_sample * sizeof *y);
        batch_in_order(rp->f, g, x, y, &e);
        if (s == 0) bk->upload(rp->ctx, stage_input(r->st, g), x,
                               (size_t)MB * stage_in_numel(r->st) * sizeof(float));
        else bk->upload(rp->ctx, stage_input(r->st, g), rp->act[(s - 1) * rp->G + g],
                        (size_t)MB * stage_in_numel(r->st) * sizeof(float));
        if (s == S - 1) bk->upload(rp->ctx, stage_targets(r->st, g), y,
                                   (size_t)MB * rp->f->d->targets_per_sample * sizeof(int32_t));
        free(x);
        free(y);
        r->fver[g] = r->cur;               /* the newest weights of this stage */
        if (a->version != r->cur) rp->version_mismatch++;
        stage_forward(r->st, g, MB, stage_params(r->st));
        if (s < S - 1) {
            size_t n = (size_t)MB * stage_out_numel(r->st);
            float *h = malloc(n * sizeof *h);
            bk->download(rp->ctx, h, stage_output(r->st, g), n * sizeof *h);
            rp->act[s * rp->G + g] = h;
        }
        return 1;
    }
    case ACT_B: {
        if (s < S - 1 && !rp->dgr[(s + 1) * rp->G + g]) return 0;
        cr_assert(r->fver[g] >= 0, "B before F");
        if (a->version != r->fver[g]) rp->version_mismatch++;
        const float *P = r->fver[g] == r->cur ? stage_params(r->st) : r->old[r->fver[g]];
        if (s < S - 1)
            bk->upload(rp->ctx, r->dout, rp->dgr[(s + 1) * rp->G + g],
                       (size_t)MB * stage_out_numel(r->st) * sizeof(float));
        stage_backward(r->st, g, MB, P, s < S - 1 ? r->dout : NULL, ref_scale(sc));
        if (s > 0) {
            size_t n = (size_t)MB * stage_in_numel(r->st);
            float *h = malloc(n * sizeof *h);
            bk->download(rp->ctx, h, stage_input_grad(r->st), n * sizeof *h);
            rp->dgr[s * rp->G + g] = h;
        }
        return 1;
    }
    case ACT_ALLREDUCE: {
        /* a barrier: every replica of s must stand at its next all-reduce */
        int nr = sc->replicas[s];
        rstate *reps[16];
        for (int j = 0; j < nr; j++) {
            int wj = sc->stage_workers[sc->stage_first[s] + j];
            const action *aj = &sc->acts[wj][pos[wj]];
            if (pos[wj] >= sc->len[wj] || aj->kind != ACT_ALLREDUCE || aj->stage != s) return 0;
            reps[j] = state_of(rp, wj, s);
        }
        long long n = stage_nparams(r->st);
        float *sum = calloc((size_t)n, sizeof *sum), *h = malloc((size_t)n * sizeof *h);
        for (int j = 0; j < nr; j++) {
            bk->download(rp->ctx, h, stage_grads(reps[j]->st), (size_t)n * sizeof *h);
            for (long long i = 0; i < n; i++) sum[i] += h[i];
        }
        for (int j = 0; j < nr; j++) {
            bk->upload(rp->ctx, stage_grads(reps[j]->st), sum, (size_t)n * sizeof *sum);
            int wj = sc->stage_workers[sc->stage_first[s] + j];
            if (wj != w) pos[wj]++;        /* the caller advances w itself */
        }
        free(sum);
        free(h);
        return 1;
    }
    case ACT_STEP: {
        size_t bytes = (size_t)stage_nparams(r->st) * sizeof(float);
        r->old[r->cur] = bk->alloc(rp->ctx, bytes, &e);
        cr_assert(r->old[r->cur], "%s", e.msg);
        bk->copy(rp->ctx, r->old[r->cur], stage_params(r->st), bytes);
        bk_opt o = async_opt();
        o.step = r->cur + 1;
        cr_assert_eq(stage_step(r->st, &o, &e), 0, "%s", e.msg);
        stage_zero_grads(r->st);
        r->cur++;
        if (a->version != r->cur) rp->version_mismatch++;
        return 1;
    }
    default:
        cr_assert(0, "the replay handles F, B, transfers, ALLREDUCE and STEP only");
    }
    return 0;
}

/* Replays sc on one thread (each worker's list in its order, a worker moving on only when
 * the data its next action needs exist) and returns the final weights of the first
 * replica of every stage. *mismatch counts IR version fields that differ from the
 * versions counted by the replay. fver_out[s * G + g] (may be NULL) gets the version stage
 * s used for microbatch g (first replica holding g). */
static float *replay_run(fixture *f, const schedule *sc, int *mismatch, int *fver_out)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    replay rp = {.f = f, .sc = sc, .G = sc->microbatches * sc->iterations};
    rp.ctx = bk->create(0, &e);
    cr_assert(rp.ctx, "%s", e.msg);
    int first[16], last[16], S = sc->nstages;
    cut(f->m, S, first, last);
    rp.rs = calloc((size_t)sc->nworkers * S, sizeof *rp.rs);
    for (int s = 0; s < S; s++)
        for (int j = 0; j < sc->replicas[s]; j++) {
            rstate *r = &rp.rs[rp.nst++];
            r->w = sc->stage_workers[sc->stage_first[s] + j];
            r->s = s;
            r->st = stage_create(bk, rp.ctx, f->m, first[s], last[s], MB, rp.G, 0, &e);
            cr_assert(r->st, "%s", e.msg);
            r->old = calloc((size_t)rp.G + 2, sizeof *r->old);
            r->fver = malloc((size_t)rp.G * sizeof *r->fver);
            for (int g = 0; g < rp.G; g++) r->fver[g] = -1;
            r->dout = bk->alloc(rp.ctx, (size_t)MB * stage_out_numel(r->st) * sizeof(float), &e);
            cr_assert(r->dout, "%s", e.msg);
        }
    rp.act = calloc((size_t)S * rp.G, sizeof *rp.act);
    rp.dgr = calloc((size_t)S * rp.G, sizeof *rp.dgr);
    int *pos = calloc((size_t)sc->nworkers, sizeof *pos);
    for (;;) {
        int moved = 0, done = 1;
        for (int w = 0; w < sc->nworkers; w++) {
            while (pos[w] < sc->len[w] && replay_action(&rp, w, &sc->acts[w][pos[w]], pos)) {
                pos[w]++;
                moved = 1;
            }
            if (pos[w] < sc->len[w]) done = 0;
        }
        if (done) break;
        cr_assert(moved, "the replay is stuck: the schedule's data dependencies form a cycle");
    }
    float *wts = calloc((size_t)f->m->nparams, sizeof *wts);
    for (int s = 0; s < S; s++) {
        rstate *r = state_of(&rp, sc->stage_workers[sc->stage_first[s]], s);
        long long off = f->m->layers[first[s]].param_offset;
        bk->download(rp.ctx, wts + off, stage_params(r->st),
                     (size_t)stage_nparams(r->st) * sizeof(float));
        if (fver_out)
            for (int g = 0; g < rp.G; g++) {
                rstate *o = state_of(&rp, schedule_worker_of(sc, s, g), s);
                fver_out[s * rp.G + g] = o->fver[g];
            }
    }
    *mismatch = rp.version_mismatch;
    for (int i = 0; i < rp.nst; i++) {
        rstate *r = &rp.rs[i];
        for (int v = 0; v <= rp.G; v++)
            if (r->old[v]) bk->free(rp.ctx, r->old[v]);
        free(r->old);
        free(r->fver);
        bk->free(rp.ctx, r->dout);
        stage_free(r->st);
    }
    for (long i = 0; i < (long)S * rp.G; i++) {
        free(rp.act[i]);
        free(rp.dgr[i]);
    }
    free(rp.act);
    free(rp.dgr);
    free(rp.rs);
    free(pos);
    bk->destroy(rp.ctx);
    return wts;
}

/* PipeDream (vertical sync off, no replication): stage s of p admits p - s microbatches,
 * so the forward of m comes after the backwards of 0 .. m - (p - s) and uses the weights
 * after max(0, m - (p - s - 1)) updates (2bw: the updates of completed minibatches of M). */
static int closed_form_version(const schedule *sc, int s, int g)
{
    int done = g - (sc->nstages - s - 1); /* backwards finished on s before F(g) */
    if (done < 0) done = 0;
    return sc->kind == SCHED_PIPEDREAM ? done : done / sc->microbatches;
}

static void async_case(sched_kind kind, int p, const int *reps, int M)
{
    fixture f = setup();
    /* pipedream steps once per microbatch (per replica set of the loss stage): 20 steps
     * per stage; 2bw once per iteration: 20 iterations */
    int per_step = kind == SCHED_PIPEDREAM ? (reps ? reps[p - 1] : 1) : M;
    int iters = STEPS * per_step / M;
    schedule *sc = make_sched(kind, p, 1, reps, M, iters);
    int G = M * iters, mismatch = -1;
    int *fver = malloc((size_t)p * G * sizeof *fver);
    float *ref = replay_run(&f, sc, &mismatch, fver);
    cr_expect_eq(mismatch, 0, "%s: %d IR versions differ from the replay's counts",
                 sched_kind_name(kind), mismatch);
    int stale = 0, bad_form = 0;
    for (int s = 0; s < p; s++)
        for (int g = 0; g < G; g++) {
            if (!reps && fver[s * G + g] != closed_form_version(sc, s, g)) bad_form++;
            if (g > 0 && fver[s * G + g] < g / per_step) stale++;
        }
    cr_expect_eq(bad_form, 0, "%s, %d stages: %d forwards off PipeDream's delay",
                 sched_kind_name(kind), p, bad_form);
    if (p > 1) cr_expect(stale > 0, "%s: some forward runs on delayed weights", sched_kind_name(kind));
    rt_result r;
    run_pipeline(&f, sc, async_opt(), &r);
    double d = max_abs_diff(ref, r.params, f.m->nparams);
    /* the delayed updates matter: plain sequential SGD over the same microbatches differs */
    float *seq = sequential(&f, per_step, STEPS, async_opt());
    double dseq = max_abs_diff(seq, r.params, f.m->nparams);
    fprintf(stderr, "async %-9s %d stages%s, M %d, %d steps: max |w - w_replay| = %.3g "
            "(sequential SGD without delay differs by %.3g)\n", sched_kind_name(kind), p,
            reps ? " (replicated)" : "", M, STEPS, d, dseq);
    cr_expect(d <= TOL, "%s, %d stages: max abs diff %g > %g", sched_kind_name(kind), p, d,
              TOL);
    if (p > 1) cr_expect(dseq > 100 * TOL, "%s: the reference is not plain SGD",
                         sched_kind_name(kind));
    free(seq);
    free(ref);
    free(fver);
    rt_result_free(&r);
    schedule_free(sc);
    fixture_free(&f);
}

Test(async, pipedream_equals_stashed_delayed_sgd)
{
    for (int p = 2; p <= 4; p++) async_case(SCHED_PIPEDREAM, p, NULL, 4);
}

Test(async, pipedream_replicated_equals_replay)
{
    int reps[] = {2, 1, 2};
    async_case(SCHED_PIPEDREAM, 3, reps, 4);
}

Test(async, twobw_equals_double_buffered_replay)
{
    for (int p = 2; p <= 4; p++) async_case(SCHED_2BW, p, NULL, 4);
}

Test(async, twobw_replicated_equals_replay)
{
    int reps[] = {2, 1};
    async_case(SCHED_2BW, 2, reps, 4);
}
