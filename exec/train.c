/* train.c: sequential minibatch training with gradient accumulation over microbatches
 * (the reference for pipelined runs), evaluation, and the run loop of `plumb train`. */
#include "exec/train.h"

#include "exec/checkpoint.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct seq_trainer {
    const backend *bk;
    bk_ctx *ctx;
    const model *m;
    train_cfg cfg;
    stage *st;
    long steps;
};

double train_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bk_opt train_default_opt(int kind)
{
    bk_opt o = {.kind = kind, .lr = 0.05f};
    if (kind == BK_MOMENTUM) {
        o.lr = 0.01f;
        o.momentum = 0.9f;
    } else if (kind == BK_ADAM) {
        o.lr = 1e-3f;
        o.beta1 = 0.9f;
        o.beta2 = 0.999f;
        o.eps = 1e-8f;
    }
    return o;
}

seq_trainer *seqtrain_create(const backend *bk, bk_ctx *ctx, const model *m,
                             const train_cfg *cfg, plumb_err *err)
{
    if (cfg->microbatch < 1 || cfg->microbatches < 1) {
        err_set(err, NULL, NULL, "expected microbatch >= 1 and microbatches >= 1 (got %d, %d)",
                cfg->microbatch, cfg->microbatches);
        return NULL;
    }
    seq_trainer *t = calloc(1, sizeof *t);
    if (!t) { err_set(err, NULL, NULL, "out of memory"); return NULL; }
    t->bk = bk;
    t->ctx = ctx;
    t->m = m;
    t->cfg = *cfg;
    stage_opts so = {0, 0, NULL, 1, 0, 0}; /* the input is the data: no input gradient */
    t->st = stage_create_opts(bk, ctx, m, 0, m->nlayers - 1, cfg->microbatch, 1, &so, err);
    if (!t->st) { free(t); return NULL; }
    return t;
}

void seqtrain_free(seq_trainer *t)
{
    if (!t) return;
    stage_free(t->st);
    free(t);
}

stage *seqtrain_stage(seq_trainer *t) { return t->st; }
long seqtrain_steps(const seq_trainer *t) { return t->steps; }

static const char *const opt_names[] = {"sgd", "momentum", "adam"};

/* The trainer's state as a checkpoint c (host copies; free with ckpt_free). 0 or -1. */
static int seqtrain_state(seq_trainer *t, ckpt *c, plumb_err *err)
{
    size_t n = (size_t)stage_nparams(t->st), bytes = n * sizeof(float);
    *c = (ckpt){t->cfg.opt.kind, t->steps, malloc(bytes + 1), NULL, NULL};
    float *dm, *dv;
    if (stage_opt_state(t->st, c->opt_kind, &dm, &dv, err)) return -1;
    if (dm) c->m = malloc(bytes + 1);
    if (dv) c->v = malloc(bytes + 1);
    if (!c->w || (dm && !c->m) || (dv && !c->v))
        return err_set(err, NULL, NULL, "out of memory for a checkpoint");
    t->bk->download(t->ctx, c->w, stage_params(t->st), bytes);
    if (dm) t->bk->download(t->ctx, c->m, dm, bytes);
    if (dv) t->bk->download(t->ctx, c->v, dv, bytes);
    return t->bk->sync(t->ctx, err);
}

int seqtrain_save(seq_trainer *t, const char *path, plumb_err *err)
{
    ckpt c;
    int rc = seqtrain_state(t, &c, err) ? -1 : ckpt_save(path, t->m, &c, err);
    ckpt_free(&c);
    return rc;
}

/* seqtrain_save into a checkpoint folder (ckpt_save_dir, the 2 newest kept). */
static int seqtrain_save_dir(seq_trainer *t, const char *dir, plumb_err *err)
{
    ckpt c;
    int rc = seqtrain_state(t, &c, err) ? -1 : ckpt_save_dir(dir, t->m, &c, 2, err);
    ckpt_free(&c);
    return rc;
}

int seqtrain_restore(seq_trainer *t, const ckpt *c, const char *path, plumb_err *err)
{
    float *dm, *dv;
    size_t bytes = (size_t)stage_nparams(t->st) * sizeof(float);
    if (c->opt_kind != t->cfg.opt.kind)
        return err_set(err, path, NULL, "expected a checkpoint of the %s optimizer (got %s); "
                       "resume with --optimizer %s", opt_names[t->cfg.opt.kind],
                       opt_names[c->opt_kind], opt_names[c->opt_kind]);
    if (stage_opt_state(t->st, c->opt_kind, &dm, &dv, err)) return -1;
    t->bk->upload(t->ctx, stage_params(t->st), c->w, bytes);
    if (dm) t->bk->upload(t->ctx, dm, c->m, bytes);
    if (dv) t->bk->upload(t->ctx, dv, c->v, bytes);
    t->steps = c->step;
    return t->bk->sync(t->ctx, err);
}

int seqtrain_load(seq_trainer *t, const char *path, plumb_err *err)
{
    ckpt c;
    if (ckpt_load(path, t->m, &c, err)) return -1;
    int rc = seqtrain_restore(t, &c, path, err);
    ckpt_free(&c);
    return rc;
}

int seqtrain_step(seq_trainer *t, const float *x, const int32_t *y, double *loss,
                  double *acc, plumb_err *err)
{
    const int mb = t->cfg.microbatch, tps = model_targets_per_sample(t->m);
    const size_t numel = stage_in_numel(t->st);
    const double rows = (double)mb * t->cfg.microbatches * tps;
    double lsum = 0, csum = 0;
    stage_zero_grads(t->st);
    for (int k = 0; k < t->cfg.microbatches; k++) {
        t->bk->upload(t->ctx, stage_input(t->st, 0), x + (size_t)k * mb * numel,
                      (size_t)mb * numel * sizeof(float));
        t->bk->upload(t->ctx, stage_targets(t->st, 0), y + (size_t)k * mb * tps,
                      (size_t)mb * tps * sizeof(int32_t));
        stage_forward(t->st, 0, mb, NULL);
        double l, c;
        if (stage_loss(t->st, 0, mb, &l, &c, err)) return -1;
        lsum += l;
        csum += c;
        stage_backward(t->st, 0, mb, NULL, NULL, (float)(1.0 / rows));
    }
    bk_opt o = t->cfg.opt;
    o.step = ++t->steps;
    if (stage_step(t->st, &o, err) || t->bk->sync(t->ctx, err)) return -1;
    if (loss) *loss = lsum / rows;
    if (acc) *acc = csum / rows;
    if (!isfinite(lsum))
        return err_set(err, NULL, NULL, "the loss diverged (not finite) at step %ld; lower "
                       "--lr", t->steps);
    return 0;
}

int seqtrain_evaluate(seq_trainer *t, const dataset *d, int limit, double *loss, double *acc,
                      plumb_err *err)
{
    const int mb = t->cfg.microbatch, tps = d->targets_per_sample;
    int n = limit > 0 && limit < d->n ? limit : d->n;
    double lsum = 0, csum = 0;
    for (int s0 = 0; s0 < n; s0 += mb) {
        int B = n - s0 < mb ? n - s0 : mb;
        t->bk->upload(t->ctx, stage_input(t->st, 0), d->x + (size_t)s0 * d->sample_numel,
                      (size_t)B * d->sample_numel * sizeof(float));
        t->bk->upload(t->ctx, stage_targets(t->st, 0), d->y + (size_t)s0 * tps,
                      (size_t)B * tps * sizeof(int32_t));
        stage_forward(t->st, 0, B, NULL);
        double l, c;
        if (stage_loss(t->st, 0, B, &l, &c, err)) return -1;
        lsum += l;
        csum += c;
    }
    *loss = lsum / ((double)n * tps);
    *acc = csum / ((double)n * tps);
    return 0;
}

int seqtrain_set_params(seq_trainer *t, const float *host, plumb_err *err)
{
    t->bk->upload(t->ctx, stage_params(t->st), host,
                  (size_t)stage_nparams(t->st) * sizeof(float));
    return t->bk->sync(t->ctx, err);
}

int seqtrain_get_params(seq_trainer *t, float *host, plumb_err *err)
{
    t->bk->download(t->ctx, host, stage_params(t->st),
                    (size_t)stage_nparams(t->st) * sizeof(float));
    return t->bk->sync(t->ctx, err);
}

static void fmt_eta(double s, char *buf, size_t n)
{
    if (s < 120) snprintf(buf, n, "%.0f s", s);
    else if (s < 7200) snprintf(buf, n, "%.1f min", s / 60);
    else snprintf(buf, n, "%.1f h", s / 3600);
}

int train_run(const train_run_cfg *rc, train_result *res, plumb_err *err)
{
    const model *m = rc->m;
    const dataset *d = rc->train;
    const int mbs = rc->cfg.microbatch * rc->cfg.microbatches;
    int rcode = -1;
    bk_ctx *ctx = NULL;
    seq_trainer *t = NULL;
    int *perm = NULL;
    float *x = NULL;
    int32_t *y = NULL;
    memset(res, 0, sizeof *res);
    res->test_loss = res->test_acc = -1;
    if (data_check_model(d, m, err) || (rc->test && data_check_model(rc->test, m, err)))
        return -1;
    if (mbs > d->n)
        return err_set(err, NULL, "--batch", "expected at most the %d samples of the %s data "
                       "(got a minibatch of %d)", d->n, d->name, mbs);
    long per_epoch = d->n / mbs;
    long total = rc->steps > 0 ? rc->steps : (long)rc->epochs * per_epoch;
    long every = rc->log_every > 0 ? rc->log_every : (total + 19) / 20;
    if (every < 1) every = 1;
    if (!(ctx = rc->bk->create(rc->device, err))) goto done;
    if (rc->bk->hint_workers) rc->bk->hint_workers(1); /* one worker: every core */
    if (!(t = seqtrain_create(rc->bk, ctx, m, &rc->cfg, err))) goto done;
    if (rc->resume_state) { /* read once by the caller; uploaded, its arrays are freed */
        int bad = seqtrain_restore(t, rc->resume_state, rc->resume, err);
        ckpt_free(rc->resume_state);
        if (bad) goto done;
    } else if (rc->resume && seqtrain_load(t, rc->resume, err)) {
        goto done;
    }
    long start = seqtrain_steps(t);
    if (start > total) start = total;
    perm = malloc((size_t)d->n * sizeof *perm);
    if (!perm) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    /* the minibatch, gathered here and uploaded from here: page-locked on a GPU (each
     * seqtrain_step ends with a sync, so it stays unchanged until read) */
    if (!(x = bk_host_alloc(rc->bk, ctx, (size_t)mbs * d->sample_numel * sizeof *x, err)) ||
        !(y = bk_host_alloc(rc->bk, ctx, (size_t)mbs * d->targets_per_sample * sizeof *y, err)))
        goto done;
    if (rc->log)
        fprintf(rc->log,
                "plumb train: %s (%lld parameters) on %s, %s data (%d samples), minibatch %d "
                "= %d x %d, %s lr %g, %ld steps\n",
                m->name, m->nparams, rc->bk->name, d->name, d->n, mbs, rc->cfg.microbatches,
                rc->cfg.microbatch,
                rc->cfg.opt.kind == BK_SGD ? "sgd" : rc->cfg.opt.kind == BK_MOMENTUM ? "momentum"
                                                                                 : "adam",
                (double)rc->cfg.opt.lr, total);
    if (rc->log && rc->bk->note && rc->bk->note()) fprintf(rc->log, "%s\n", rc->bk->note());
    double t0 = train_now(), tlast = t0, lwin = 0, awin = 0;
    long nwin = 0;
    if (rc->log && start > 0)
        fprintf(rc->log, "resumed from %s at step %ld\n", rc->resume, start);
    for (long s = start; s < total; s++) {
        long e = s / per_epoch, pos = s % per_epoch;
        if (rc->fault.worker == 0 && rc->fault.step == s + 1) {
            if (rc->fault.mode == RT_FAULT_KILL) {
                fprintf(stderr, "plumb: worker 0: injected fault: SIGKILL at step %ld "
                        "(PLUMB_FAULT)\n", s + 1);
                fflush(stderr);
                raise(SIGKILL);
            }
            err_set(err, NULL, NULL, "worker 0: injected fault at step %ld (PLUMB_FAULT)",
                    s + 1);
            goto done;
        }
        if (pos == 0 || s == start) data_shuffle(perm, d->n, rc->seed, (int)e);
        data_gather(d, perm + pos * mbs, mbs, x, y);
        double l, a;
        if (seqtrain_step(t, x, y, &l, &a, err)) goto done;
        if (s == start) res->first_loss = l;
        res->last_loss = l;
        if (rc->checkpoint_every > 0 && rc->checkpoint_dir &&
            ((s + 1) % rc->checkpoint_every == 0 || s + 1 == total) &&
            seqtrain_save_dir(t, rc->checkpoint_dir, err))
            goto done;
        lwin += l;
        awin += a;
        nwin++;
        if ((s + 1) % every == 0 || s + 1 == total) {
            double now = train_now(), el = now - t0;
            res->train_loss = lwin / nwin;
            res->train_acc = awin / nwin;
            if (rc->log) {
                char eta[32];
                fmt_eta(el / (double)(s + 1 - start) * (double)(total - s - 1), eta, sizeof eta);
                fprintf(rc->log,
                        "step %ld/%ld  epoch %ld  loss %.4f  accuracy %.1f%%  %.0f samples/s  "
                        "ETA %s\n",
                        s + 1, total, e + 1, res->train_loss, 100 * res->train_acc,
                        (double)nwin * mbs / (now - tlast), eta);
                fflush(rc->log);
            }
            tlast = now;
            lwin = awin = 0;
            nwin = 0;
        }
    }
    res->steps = total;
    res->steps_run = total - start;
    res->seconds = train_now() - t0;
    res->samples_per_s = res->seconds > 0 ? (double)(total - start) * mbs / res->seconds : 0;
    if (rc->save && seqtrain_save(t, rc->save, err)) goto done;
    if (rc->test) {
        if (seqtrain_evaluate(t, rc->test, 0, &res->test_loss, &res->test_acc, err)) goto done;
        if (rc->log)
            fprintf(rc->log, "test: loss %.4f  accuracy %.2f%% (%d samples)\n", res->test_loss,
                    100 * res->test_acc, rc->test->n);
    }
    if (rc->log)
        fprintf(rc->log, "trained %ld steps in %.1f s: %.0f samples/s\n", total - start,
                res->seconds, res->samples_per_s);
    rcode = 0;
done:
    free(perm);
    bk_host_free(rc->bk, x);
    bk_host_free(rc->bk, y);
    seqtrain_free(t);
    if (ctx) rc->bk->destroy(ctx);
    return rcode;
}
