/* train_pipe.c: `plumb train` with a multi-stage plan: the training run of train.c
 * executed by the pipeline runtime, with the same sample order, then the final weights
 * evaluated on the test set by a sequential trainer. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"
#include "exec/checkpoint.h"
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
    int start;              /* first iteration of this run (resumed) */
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
                double el = now - p->t0, eta = el / (i + 1 - p->start) * (p->n - i - 1);
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

/* 0 when every loss sum of iterations [from, to) is finite, else -1 with the sequential
 * trainer's line naming the first step whose loss was not (the pipelined run trained on to
 * a NaN loss, exit 0, and saved its NaN weights with --save). A process that holds no loss
 * worker has zero sums here until the run's sums are gathered. */
static int check_diverged(const progress *p, long from, long to, plumb_err *err)
{
    for (long i = from; i < to; i++)
        if (!isfinite(p->l[i]))
            return err_set(err, NULL, NULL, "the loss diverged (not finite) at step %ld; lower "
                           "--lr", i + 1);
    return 0;
}

/* Sums a process's share of weights, optimizer state and losses over all processes of a
 * transport that spans several (each holds zeros for what it does not own). */
static int gather(transport *tr, const model *m, rt_result *rr, plumb_err *err)
{
    if (!tr || !tr->allsum_float) return 0;
    size_t n = (size_t)m->nparams;
    if (tr->allsum_float(tr, rr->params, n, err)) return -1;
    if (rr->opt_m && tr->allsum_float(tr, rr->opt_m, n, err)) return -1;
    return rr->opt_v ? tr->allsum_float(tr, rr->opt_v, n, err) : 0;
}

/* The run's loss figures from the per-iteration sums of iterations [start, n): the first
 * and last iteration's mean loss, and the means over the last logging interval. */
static void loss_figures(const progress *p, long start, train_result *res)
{
    if (p->n <= start) return;
    long lo = (long)(p->n - 1) / p->every * p->every;
    if (lo < start) lo = start;
    double lw = 0, aw = 0;
    for (long i = lo; i < p->n; i++)
        if (p->r[i] > 0) lw += p->l[i] / p->r[i], aw += p->c[i] / p->r[i];
    res->train_loss = lw / (double)(p->n - lo);
    res->train_acc = aw / (double)(p->n - lo);
    if (p->r[start] > 0) res->first_loss = p->l[start] / p->r[start];
    if (p->r[p->n - 1] > 0) res->last_loss = p->l[p->n - 1] / p->r[p->n - 1];
}

/* Moves (steals) a float array out of *src into *dst, freeing what dst held. */
static void take(float **dst, float **src)
{
    free(*dst);
    *dst = *src;
    *src = NULL;
}

/* Writes into buf what transport endpoint e of schedule s under tp ranks per worker is:
 * "worker W tp rank R (stage S, replica D)", or with `rank` (an MPI rank, which is the
 * endpoint) "rank E (worker W tp rank R, stage S, replica D)"; a worker of several stages
 * (chunked kinds) without the stage and replica. */
static void endpoint_text(const schedule *s, int tp, long e, int rank, char *buf, size_t n)
{
    int w = (int)(e / tp), r = (int)(e % tp), st = s->worker_stage ? s->worker_stage[w] : -1;
    int rep = -1;
    for (int j = 0; st >= 0 && j < s->replicas[st]; j++)
        if (s->stage_workers[s->stage_first[st] + j] == w) rep = j;
    char where[48] = "";
    if (st >= 0 && rep >= 0)
        snprintf(where, sizeof where, "%sstage %d, replica %d", rank ? ", " : " (", st, rep);
    if (rank)
        snprintf(buf, n, "rank %ld (worker %d tp rank %d%s)", e, w, r, where);
    else
        snprintf(buf, n, "worker %d tp rank %d%s%s", w, r, where, where[0] ? ")" : "");
}

/* Under tensor parallelism a transport's timeout ("worker E waited ... for message T from
 * worker F", "rank E waited ...") numbers transport endpoints (worker x tp + tp rank) and
 * tags messages: names each endpoint as the worker, tp rank, stage and replica it is, and
 * each tag by what it carries (runtime_tag_text), in place. Other messages are left as
 * they are (the runtime's own name schedule workers already). */
static void name_endpoints(const schedule *s, int tp, plumb_err *err)
{
    if (tp <= 1 || !strstr(err->msg, " waited ")) return;
    char out[PLUMB_ERR_MAX], who[96];
    size_t o = 0;
    const char *p = err->msg;
    while (*p && o + 1 < sizeof out) {
        if (!strncmp(p, "message ", 8) && (isdigit((unsigned char)p[8]) || p[8] == '-')) {
            /* a transport's raw tag: what it carries, then the tag */
            char *end;
            long tag = strtol(p + 8, &end, 10);
            int n = runtime_tag_text(s, tag, out + o, sizeof out - o);
            if (n < 0 || (size_t)n >= sizeof out - o) break;
            o += (size_t)n;
            n = snprintf(out + o, sizeof out - o, " (message %ld)", tag);
            if (n < 0 || (size_t)n >= sizeof out - o) break;
            o += (size_t)n;
            p = end;
            continue;
        }
        size_t k = !strncmp(p, "worker ", 7) ? 7 : !strncmp(p, "rank ", 5) ? 5 : 0;
        if (k && isdigit((unsigned char)p[k]) &&
            (p == err->msg || !isalnum((unsigned char)p[-1]))) {
            char *end;
            long e = strtol(p + k, &end, 10);
            if (e >= 0 && e < (long)s->nworkers * tp) {
                endpoint_text(s, tp, e, k == 5, who, sizeof who);
                int n = snprintf(out + o, sizeof out - o, "%s", who);
                if (n < 0 || (size_t)n >= sizeof out - o) break;
                o += (size_t)n;
                p = end;
                continue;
            }
        }
        out[o++] = *p++;
    }
    out[o] = 0;
    memcpy(err->msg, out, o + 1);
}

int train_worker_device(const train_run_cfg *rc, int w, int ndevices)
{
    if (rc->local_workers) return rc->device; /* mpirun: this process's one device */
    return rc->device + (ndevices > 1 ? w % ndevices : 0);
}

int train_devices_check(const backend *bk, int device, int ndevices, plumb_err *err)
{
    if (ndevices < 1) ndevices = 1;
    for (int d = device; d < device + ndevices; d++) {
        plumb_err e = {{0}};
        bk_ctx *probe = bk->create(d, &e);
        if (probe) {
            bk->destroy(probe);
            continue;
        }
        if (d == device) { /* --device itself: the backend's own line */
            *err = e;
            return -1;
        }
        const char *why = strncmp(e.msg, "device: ", 8) ? e.msg : e.msg + 8;
        return err_set(err, NULL, "--devices", "expected the workers' devices %d to %d "
                       "(--device %d, --devices %d) to exist, device %d is missing (%s)",
                       device, device + ndevices - 1, device, ndevices, d, why);
    }
    return 0;
}

int train_run_pipeline(const train_run_cfg *rc, const schedule *s, const int *first,
                       const int *last, int ndevices, train_result *res, timeline **trace,
                       plumb_err *err)
{
    const dataset *d = rc->train;
    const model *m = rc->m;
    const int mbs = rc->cfg.microbatch * s->microbatches;
    FILE *log0 = rc->rank == 0 ? rc->log : NULL; /* header and final lines */
    memset(res, 0, sizeof *res);
    res->test_loss = res->test_acc = -1;
    if (trace) *trace = NULL;
    if (data_check_model(d, m, err) || (rc->test && data_check_model(rc->test, m, err)))
        return -1;
    if (mbs > d->n)
        return err_set(err, NULL, "--batch", "expected at most the %d samples of the %s data "
                       "(got a minibatch of %d)", d->n, d->name, mbs);
    const long total = s->iterations, every_ck = rc->checkpoint_every;
    if ((every_ck > 0 || rc->resume || rc->resume_state) && !rc->make_sched)
        return err_set(err, NULL, NULL, "pipelined checkpoints need a schedule maker");
    batcher b = {d, rc->cfg.microbatch, s->microbatches, 0, d->n / mbs, NULL};
    b.epochs = (int)((total + b.per_epoch - 1) / b.per_epoch);
    int rcode = -1;
    int *devs = calloc((size_t)s->nworkers, sizeof *devs);
    b.perm = calloc((size_t)b.epochs, sizeof *b.perm);
    rt_result rr;
    memset(&rr, 0, sizeof rr);
    bk_ctx *ctx = NULL;
    seq_trainer *t = NULL;
    ckpt ck = {0, 0, NULL, NULL, NULL};
    float *cur_w = NULL, *cur_m = NULL, *cur_v = NULL;
    schedule *seg_s = NULL;
    progress pg = {.log = rc->log, .want = (double)mbs * model_targets_per_sample(m),
                   .n = (int)total, .per_epoch = b.per_epoch, .mbs = mbs, .res = res};
    int pg_inited = 0;
    if (!devs || !b.perm) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    for (int e = 0; e < b.epochs; e++) {
        if (!(b.perm[e] = malloc((size_t)d->n * sizeof(int)))) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
        data_shuffle(b.perm[e], d->n, rc->seed, e);
    }
    for (int w = 0; w < s->nworkers; w++) devs[w] = train_worker_device(rc, w, ndevices);
    const int tpn = rc->tp > 1 ? rc->tp : 1; /* local workers are endpoints w tp + r */
    long start = 0;
    if (rc->resume_state) { /* read once by the caller: its arrays are taken */
        ck = *rc->resume_state;
        rc->resume_state->w = rc->resume_state->m = rc->resume_state->v = NULL;
    } else if (rc->resume && ckpt_load(rc->resume, m, &ck, err)) {
        goto done;
    }
    if (rc->resume || rc->resume_state) {
        if (ck.opt_kind != (int)rc->cfg.opt.kind) {
            err_set(err, rc->resume, NULL, "expected a checkpoint of the run's optimizer "
                    "(kind %d, got %d)", (int)rc->cfg.opt.kind, ck.opt_kind);
            goto done;
        }
        start = ck.step < total ? ck.step : total;
    }
    char tpnote[64] = "";
    if (rc->tp > 1)
        snprintf(tpnote, sizeof tpnote, " x tp %d%s (%d %s)", rc->tp,
                 rc->sp ? " sequence-parallel" : "", s->nworkers * rc->tp,
                 rc->local_workers ? "ranks" : "threads");
    if (log0)
        fprintf(log0,
                "plumb train: %s (%lld parameters) on %s, %s data (%d samples), %s schedule: "
                "%d stages on %d workers%s, minibatch %d = %d x %d, %ld steps%s%s%s%s\n",
                m->name, m->nparams, rc->bk->name, d->name, d->n, sched_kind_name(s->kind),
                s->nstages, s->nworkers, tpnote, mbs, s->microbatches, rc->cfg.microbatch, total,
                rc->recompute ? ", activations recomputed" : "",
                rc->zero ? ", zero 1 (each replica keeps its share of the optimizer state)" : "",
                rc->tr ? ", transport " : "", rc->tr ? rc->tr->name : "");
    if (log0 && rc->bk->note && rc->bk->note()) fprintf(log0, "%s\n", rc->bk->note());
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (log0 && !rc->local_workers && !strncmp(rc->bk->name, "cpu", 3) && cores > 0 &&
        s->nworkers > cores)
        fprintf(log0, "note: %d workers share %ld CPU cores, so each computes slower than a "
                "profile of one worker per core says (a cluster device type's \"cores\" lets "
                "plumb sim model it)\n", s->nworkers, cores);
    if (log0 && start > 0) fprintf(log0, "resumed from %s at step %ld\n", rc->resume, start);
    long every = rc->log_every > 0 ? rc->log_every : (total + 19) / 20;
    pg.every = every < 1 ? 1 : every;
    pg.next = pg.start = (int)start;
    pg.l = calloc((size_t)total + 1, sizeof(double));
    pg.c = calloc((size_t)total + 1, sizeof(double));
    pg.r = calloc((size_t)total + 1, sizeof(double));
    if (!pg.l || !pg.c || !pg.r) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    pthread_mutex_init(&pg.mu, NULL);
    pg_inited = 1;
    pg.t0 = pg.tlast = train_now();
    cur_w = ck.w, cur_m = ck.m, cur_v = ck.v; /* the state each segment starts from */
    ck.w = ck.m = ck.v = NULL;
    int want_state = every_ck > 0 || rc->save;
    double seconds = 0;
    for (long it0 = start; it0 < total;) {
        long it1 = total;
        if (every_ck > 0 && (it0 / every_ck + 1) * every_ck < total)
            it1 = (it0 / every_ck + 1) * every_ck;
        const schedule *run_s = s;
        if (it0 != 0 || it1 != total) {
            schedule_free(seg_s);
            if (!(seg_s = rc->make_sched(rc->make_sched_user, (int)(it1 - it0), err))) goto done;
            run_s = seg_s;
        }
        rt_result_free(&rr);
        rt_cfg cfg = {.bk = rc->bk, .m = m, .sched = run_s, .stage_first = first,
                      .stage_last = last, .worker_device = devs,
                      .trace_device = run_s->worker_device, .microbatch = rc->cfg.microbatch,
                      .recompute = rc->recompute, .opt = rc->cfg.opt, .batch = batcher_fn,
                      .batch_user = &b, .on_loss = on_loss, .on_loss_user = &pg, .tr = rc->tr,
                      .local_workers = rc->local_workers, .nlocal = rc->nlocal,
                      .node_procs = rc->node_procs,
                      .timeout_s = rc->timeout_s, .init_params = cur_w, .init_m = cur_m,
                      .init_v = cur_v, .start_iteration = it0, .want_state = want_state,
                      .fault = rc->fault, .tp = rc->tp, .sp = rc->sp,
                      .zero = rc->zero};
        if (trace && rc->tr && rc->tr->allsum_double) { /* the processes start together */
            double z = 0;
            if (rc->tr->allsum_double(rc->tr, &z, 1, err)) goto done;
        }
        if (runtime_run(&cfg, &rr, err)) {
            name_endpoints(run_s, rc->tp, err);
            goto done;
        }
        if (gather(rc->tr, m, &rr, err)) goto done;
        seconds += rr.seconds;
        take(&cur_w, &rr.params);
        take(&cur_m, &rr.opt_m);
        take(&cur_v, &rr.opt_v);
        if (check_diverged(&pg, it0, it1, err)) goto done;
        if (every_ck > 0 && rc->checkpoint_dir && rc->rank == 0) {
            ckpt c = {(int)rc->cfg.opt.kind, it1, cur_w, cur_m, cur_v};
            if (ckpt_save_dir(rc->checkpoint_dir, m, &c, 2, err)) goto done;
        }
        it0 = it1;
    }
    if (rc->tr && rc->tr->allsum_double) { /* the loss sums of every process */
        pthread_mutex_lock(&pg.mu);
        int bad = rc->tr->allsum_double(rc->tr, pg.l, (size_t)total, err) ||
                  rc->tr->allsum_double(rc->tr, pg.c, (size_t)total, err) ||
                  rc->tr->allsum_double(rc->tr, pg.r, (size_t)total, err);
        pthread_mutex_unlock(&pg.mu);
        if (bad || check_diverged(&pg, start, total, err)) goto done;
    }
    if (trace && rc->tr && rc->tr->allsum_double &&
        (train_trace_gather(rc->tr, rc->rank, s->nworkers * tpn, &rr.trace, err) ||
         runtime_trace_names(s, s->worker_device, rc->tp, rr.trace))) {
        if (!err->msg[0]) err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    loss_figures(&pg, start, res);
    res->steps = total;
    res->steps_run = total - start;
    res->seconds = seconds;
    res->samples_per_s = seconds > 0 ? (double)(total - start) * mbs / seconds : 0;
    if (rc->save && rc->rank == 0) {
        ckpt c = {(int)rc->cfg.opt.kind, total, cur_w, cur_m, cur_v};
        if (ckpt_save(rc->save, m, &c, err)) goto done;
    }
    if (rc->test && rc->rank == 0) {
        if (!(ctx = rc->bk->create(rc->device, err))) goto done;
        if (!(t = seqtrain_create(rc->bk, ctx, m, &rc->cfg, err)) ||
            seqtrain_set_params(t, cur_w, err) ||
            seqtrain_evaluate(t, rc->test, 0, &res->test_loss, &res->test_acc, err))
            goto done;
        if (log0)
            fprintf(log0, "test: loss %.4f  accuracy %.2f%% (%d samples)\n", res->test_loss,
                    100 * res->test_acc, rc->test->n);
    }
    if (log0)
        fprintf(log0, "trained %ld steps in %.1f s: %.0f samples/s\n", total - start,
                res->seconds, res->samples_per_s);
    if (rc->log && rr.peak_bytes) /* each worker's backend device: the one it ran on */
        for (int w = 0; w < s->nworkers; w++)
            if (rr.peak_bytes[w] >= 0)
                fprintf(rc->log, "worker %d (device %d): peak memory %.2f MiB\n", w, devs[w],
                        rr.peak_bytes[w] / 1048576.0);
    if (trace) {
        *trace = rr.trace;
        rr.trace = NULL;
    }
    rcode = 0;
done:
    free(cur_w);
    free(cur_m);
    free(cur_v);
    if (pg_inited) pthread_mutex_destroy(&pg.mu);
    free(pg.l), free(pg.c), free(pg.r);
    ckpt_free(&ck);
    schedule_free(seg_s);
    seqtrain_free(t);
    if (ctx) rc->bk->destroy(ctx);
    rt_result_free(&rr);
    for (int e = 0; b.perm && e < b.epochs; e++) free(b.perm[e]);
    free(b.perm);
    free(devs);
    return rcode;
}
