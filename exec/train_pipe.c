/* train_pipe.c: `plumb train` with a multi-stage plan: the training run of train.c
 * executed by the pipeline runtime, with the same sample order, then the final weights
 * evaluated on the test set by a sequential trainer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "exec/runtime.h"
#include "exec/train.h"

/* Samples of global microbatch g: minibatch it = g / M of the shuffled order of epoch
 * it / per_epoch, its (g % M)-th part; permutations are made up front (read-only after). */
typedef struct batcher {
    const dataset *d;
    int mb, M, epochs;
    long per_epoch;
    int **perm;             /* [epochs][n] */
} batcher;

static int batcher_fn(void *user, int g, float *x, int32_t *y, plumb_err *err)
{
    const batcher *b = user;
    long it = g / b->M;
    int e = (int)(it / b->per_epoch);
    if (e >= b->epochs) return err_set(err, NULL, NULL, "microbatch %d beyond the data", g);
    long pos = it % b->per_epoch;
    data_gather(b->d, b->perm[e] + pos * b->mb * b->M + (long)(g % b->M) * b->mb, b->mb, x, y);
    return 0;
}

/* Live progress: microbatch losses arrive from the loss workers in any order; an
 * iteration is complete when all its targets are counted, and lines are printed for
 * complete iterations in order, one per logging interval. */
typedef struct progress {
    pthread_mutex_t mu;
    FILE *log;
    double *l, *c, *r;      /* [iterations] sums */
    double want;            /* targets per iteration */
    int n, next;            /* iterations, first not yet complete */
    long every, per_epoch;
    int mbs;
    double t0, tlast, lw, aw;
    long nw;
    train_result *res;
} progress;

static void on_loss(void *user, int it, double loss, double correct, double rows)
{
    progress *p = user;
    pthread_mutex_lock(&p->mu);
    if (it >= 0 && it < p->n) {
        p->l[it] += loss;
        p->c[it] += correct;
        p->r[it] += rows;
    }
    while (p->next < p->n && p->r[p->next] >= p->want) {
        int i = p->next++;
        p->lw += p->l[i] / p->r[i];
        p->aw += p->c[i] / p->r[i];
        p->nw++;
        if ((i + 1) % p->every == 0 || i + 1 == p->n) {
            double now = train_now();
            p->res->train_loss = p->lw / p->nw;
            p->res->train_acc = p->aw / p->nw;
            if (p->log) {
                double el = now - p->t0, eta = el / (i + 1) * (p->n - i - 1);
                fprintf(p->log,
                        "step %d/%d  epoch %ld  loss %.4f  accuracy %.1f%%  %.0f samples/s  "
                        "ETA %.0f s\n",
                        i + 1, p->n, i / p->per_epoch + 1, p->res->train_loss,
                        100 * p->res->train_acc, (double)p->nw * p->mbs / (now - p->tlast), eta);
                fflush(p->log);
            }
            p->tlast = now;
            p->lw = p->aw = 0;
            p->nw = 0;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

int train_run_pipeline(const train_run_cfg *rc, const schedule *s, const int *first,
                       const int *last, int ndevices, train_result *res, timeline **trace,
                       plumb_err *err)
{
    const dataset *d = rc->train;
    const int mbs = rc->cfg.microbatch * s->microbatches;
    memset(res, 0, sizeof *res);
    res->test_loss = res->test_acc = -1;
    if (trace) *trace = NULL;
    if (data_check_model(d, rc->m, err) || (rc->test && data_check_model(rc->test, rc->m, err)))
        return -1;
    if (mbs > d->n)
        return err_set(err, NULL, "--batch", "expected at most the %d samples of the %s data "
                       "(got a minibatch of %d)", d->n, d->name, mbs);
    batcher b = {d, rc->cfg.microbatch, s->microbatches, 0, d->n / mbs, NULL};
    b.epochs = (int)((s->iterations + b.per_epoch - 1) / b.per_epoch);
    int rcode = -1;
    int *devs = calloc((size_t)s->nworkers, sizeof *devs);
    b.perm = calloc((size_t)b.epochs, sizeof *b.perm);
    rt_result rr;
    memset(&rr, 0, sizeof rr);
    bk_ctx *ctx = NULL;
    seq_trainer *t = NULL;
    if (!devs || !b.perm) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    for (int e = 0; e < b.epochs; e++) {
        if (!(b.perm[e] = malloc((size_t)d->n * sizeof(int)))) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
        data_shuffle(b.perm[e], d->n, rc->seed, e);
    }
    for (int w = 0; w < s->nworkers; w++) devs[w] = ndevices > 0 ? w % ndevices : 0;
    if (rc->log)
        fprintf(rc->log,
                "plumb train: %s (%lld parameters) on %s, %s data (%d samples), %s schedule: "
                "%d stages on %d workers, minibatch %d = %d x %d, %d steps%s\n",
                rc->m->name, rc->m->nparams, rc->bk->name, d->name, d->n,
                sched_kind_name(s->kind), s->nstages, s->nworkers, mbs, s->microbatches,
                rc->cfg.microbatch, s->iterations,
                rc->recompute ? ", activations recomputed" : "");
    if (rc->log && rc->bk->note && rc->bk->note()) fprintf(rc->log, "%s\n", rc->bk->note());
    long every = rc->log_every > 0 ? rc->log_every : (s->iterations + 19) / 20;
    progress pg = {.log = rc->log, .want = (double)mbs * model_targets_per_sample(rc->m),
                   .n = s->iterations, .every = every < 1 ? 1 : every,
                   .per_epoch = b.per_epoch, .mbs = mbs, .res = res};
    pg.l = calloc((size_t)s->iterations, sizeof(double));
    pg.c = calloc((size_t)s->iterations, sizeof(double));
    pg.r = calloc((size_t)s->iterations, sizeof(double));
    if (!pg.l || !pg.c || !pg.r) {
        free(pg.l), free(pg.c), free(pg.r);
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    pthread_mutex_init(&pg.mu, NULL);
    pg.t0 = pg.tlast = train_now();
    rt_cfg cfg = {.bk = rc->bk, .m = rc->m, .sched = s, .stage_first = first,
                  .stage_last = last, .worker_device = devs, .trace_device = s->worker_device,
                  .microbatch = rc->cfg.microbatch, .recompute = rc->recompute,
                  .opt = rc->cfg.opt, .batch = batcher_fn,
                  .batch_user = &b, .on_loss = on_loss, .on_loss_user = &pg};
    int failed = runtime_run(&cfg, &rr, err);
    pthread_mutex_destroy(&pg.mu);
    free(pg.l), free(pg.c), free(pg.r);
    if (failed) goto done;
    res->steps = rr.iterations;
    res->first_loss = rr.loss[0];
    res->last_loss = rr.loss[rr.iterations - 1];
    res->seconds = rr.seconds;
    res->samples_per_s = rr.seconds > 0 ? (double)rr.iterations * mbs / rr.seconds : 0;
    if (rc->test) {
        if (!(ctx = rc->bk->create(rc->device, err))) goto done;
        if (!(t = seqtrain_create(rc->bk, ctx, rc->m, &rc->cfg, err)) ||
            seqtrain_set_params(t, rr.params, err) ||
            seqtrain_evaluate(t, rc->test, 0, &res->test_loss, &res->test_acc, err))
            goto done;
        if (rc->log)
            fprintf(rc->log, "test: loss %.4f  accuracy %.2f%% (%d samples)\n", res->test_loss,
                    100 * res->test_acc, rc->test->n);
    }
    if (rc->log) {
        fprintf(rc->log, "trained %d steps in %.1f s: %.0f samples/s\n", rr.iterations,
                res->seconds, res->samples_per_s);
        for (int w = 0; w < s->nworkers; w++)
            if (rr.peak_bytes[w] >= 0)
                fprintf(rc->log, "worker %d (device %d): peak memory %.2f MiB\n", w,
                        s->worker_device ? s->worker_device[w] : w,
                        rr.peak_bytes[w] / 1048576.0);
    }
    if (trace) {
        *trace = rr.trace;
        rr.trace = NULL;
    }
    rcode = 0;
done:
    seqtrain_free(t);
    if (ctx) rc->bk->destroy(ctx);
    rt_result_free(&rr);
    for (int e = 0; b.perm && e < b.epochs; e++) free(b.perm[e]);
    free(b.perm);
    free(devs);
    return rcode;
}
