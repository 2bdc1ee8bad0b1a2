/* profiler.c: per-layer measurement of a model on a backend (exec/profiler.h): one
 * one-layer stage per top-level layer, random inputs, warm-up, then timed forward, fused
 * backward and I/W halves, each between two backend syncs, medians into a profile. */
#include "exec/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/data.h"
#include "exec/stage.h"
#include "exec/train.h"

void profiler_cfg_init(prof_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->bk = backend_cpu();
    c->batch = 64;
    c->warmup = 3;
    c->runs = 20;
    c->workers = 1;
    c->seed = 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double profiler_median(double *v, int n)
{
    if (n < 1) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

profile *profiler_skeleton(const model *m, int batch, const char *device, const char *source,
                           plumb_err *err)
{
    if (batch < 1) {
        err_set(err, NULL, "batch", "expected at least 1 sample (got %d)", batch);
        return NULL;
    }
    profile *p = profile_alloc(m->nlayers, 0);
    if (!p) goto oom;
    p->minibatch = batch;
    if (!(p->name = strdup(m->name ? m->name : "model")) ||
        !(p->device = strdup(device ? device : "")) ||
        !(p->source = strdup(source ? source : "")))
        goto oom;
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        profile_layer *pl = &p->layers[i];
        char name[160], shape[64];
        snprintf(name, sizeof name, "%s", L->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(m->layers[j].name, L->name)) {
                snprintf(name, sizeof name, "%s_%d", L->name, i);
                break;
            }
        shape_format(L->out_ndim, L->out_shape, shape, sizeof shape);
        char desc[96];
        snprintf(desc, sizeof desc, "output %s per sample", shape);
        if (!(pl->name = strdup(name)) || !(pl->kind = strdup(layer_kind_name(L->kind))) ||
            !(pl->desc = strdup(desc)))
            goto oom;
        pl->activation_bytes =
            (double)batch * (double)shape_numel(L->out_ndim, L->out_shape) * sizeof(float);
        pl->parameter_bytes = (double)L->nparams * sizeof(float);
        pl->flops = L->flops >= 0 ? (double)batch * L->flops : -1;
        stage_lbytes lb;
        stage_layer_bytes(m, i, batch, &lb);
        pl->saved_bytes = (double)lb.saved;
        pl->split_saved_bytes = (double)lb.split;
        pl->grad_buffer_bytes = (double)lb.grad_buffers;
    }
    p->input_bytes = (double)batch * (double)shape_numel(m->in_ndim, m->in_shape) * sizeof(float);
    return p;
oom:
    profile_free(p);
    err_set(err, NULL, NULL, "out of memory");
    return NULL;
}

/* Buffers for timing one layer: the one-layer stage and an output gradient. */
typedef struct probe {
    stage *st;
    float *dout;            /* device (batch, output shape); NULL for the loss layer */
    float loss_scale;
} probe;

static void probe_free(const backend *bk, bk_ctx *ctx, probe *pr)
{
    stage_free(pr->st);
    if (pr->dout) bk->free(ctx, pr->dout);
    memset(pr, 0, sizeof *pr);
}

/* Builds the stage of layer i and fills its input, targets and output gradient with
 * random values (token ids for an embedding, class ids for targets). */
static int probe_init(const model *m, int i, const prof_cfg *cfg, bk_ctx *ctx, probe *pr,
                      plumb_err *err)
{
    const backend *bk = cfg->bk;
    const int B = cfg->batch;
    unsigned long long rs = cfg->seed * 0x9E3779B97F4A7C15ULL + (unsigned long long)i;
    float *h = NULL;
    int32_t *t = NULL;
    memset(pr, 0, sizeof *pr);
    /* the model's first layers give no input gradient in a run (stage_opts.no_input_grad):
     * neither here */
    stage_opts so = {1, 0, NULL, i < stage_input_grad_from(m), 0, 0};
    if (!(pr->st = stage_create_opts(bk, ctx, m, i, i, B, 1, &so, err))) return -1;
    size_t nin = (size_t)B * stage_in_numel(pr->st), nout = (size_t)B * stage_out_numel(pr->st);
    size_t nmax = nin > nout ? nin : nout;
    if (!(h = malloc((nmax + 1) * sizeof *h))) goto oom;
    const layer *L = &m->layers[i];
    for (size_t k = 0; k < nin; k++)
        h[k] = L->kind == LK_EMBEDDING
                   ? (float)(int)(rng_uniform(&rs) * L->vocab)
                   : (float)(2 * rng_uniform(&rs) - 1);
    bk->upload(ctx, stage_input(pr->st, 0), h, nin * sizeof(float));
    if (stage_has_loss(pr->st)) {
        int tps = model_targets_per_sample(m);
        int V = L->in_shape[L->in_ndim - 1];
        size_t nt = (size_t)B * (size_t)tps;
        if (!(t = malloc((nt + 1) * sizeof *t))) goto oom;
        for (size_t k = 0; k < nt; k++) t[k] = (int32_t)(rng_uniform(&rs) * V);
        bk->upload(ctx, stage_targets(pr->st, 0), t, nt * sizeof(int32_t));
        pr->loss_scale = (float)(1.0 / ((double)B * tps));
    } else {
        if (!(pr->dout = bk->alloc(ctx, nout * sizeof(float), err))) goto fail;
        for (size_t k = 0; k < nout; k++) h[k] = (float)(0.02 * rng_uniform(&rs) - 0.01);
        bk->upload(ctx, pr->dout, h, nout * sizeof(float));
    }
    free(h);
    free(t);
    return bk->sync(ctx, err);
oom:
    err_set(err, NULL, NULL, "out of memory");
fail:
    free(h);
    free(t);
    probe_free(bk, ctx, pr);
    return -1;
}

enum { PASS_F = 0, PASS_B, PASS_I, PASS_W, NPASS };

/* Runs one pass of the probe; the backend queues it (the caller syncs). */
static void probe_pass(probe *pr, int pass, int B)
{
    switch (pass) {
    case PASS_F: stage_forward(pr->st, 0, B, NULL); break;
    case PASS_B: stage_backward(pr->st, 0, B, NULL, pr->dout, pr->loss_scale); break;
    case PASS_I: stage_backward_input(pr->st, 0, B, NULL, pr->dout, pr->loss_scale); break;
    default: stage_backward_weight(pr->st, 0, B); break;
    }
}

/* Gives the probes of layers 0..n-1 (the whole model) the inputs of training: a batch of d
 * into layer 0 (targets into the loss), then every layer's forward output into the next
 * layer's input. Returns 0, or -1 with err set (out of memory, a backend failure). */
static int probe_chain(const model *m, probe *pr, int n, const dataset *d, const prof_cfg *cfg,
                       bk_ctx *ctx, plumb_err *err)
{
    const backend *bk = cfg->bk;
    const int B = cfg->batch;
    unsigned long long rs = cfg->seed * 0x2545F4914F6CDD1DULL + 7;
    int *idx = malloc((size_t)B * sizeof *idx);
    float *x = malloc(((size_t)B * d->sample_numel + 1) * sizeof *x);
    int32_t *y = malloc(((size_t)B * d->targets_per_sample + 1) * sizeof *y);
    int rc = -1;
    if (!idx || !x || !y) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    for (int k = 0; k < B; k++) idx[k] = (int)(rng_uniform(&rs) * d->n) % d->n;
    data_gather(d, idx, B, x, y);
    bk->upload(ctx, stage_input(pr[0].st, 0), x, (size_t)B * stage_in_numel(pr[0].st) * 4);
    if (stage_has_loss(pr[n - 1].st))
        bk->upload(ctx, stage_targets(pr[n - 1].st, 0), y,
                   (size_t)B * model_targets_per_sample(m) * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        stage_forward(pr[i].st, 0, B, NULL);
        if (i + 1 < n)
            bk->copy(ctx, stage_input(pr[i + 1].st, 0), stage_output(pr[i].st, 0),
                     (size_t)B * stage_in_numel(pr[i + 1].st) * sizeof(float));
        if (bk->sync(ctx, err)) goto done;
    }
    rc = 0;
done:
    free(idx);
    free(x);
    free(y);
    return rc;
}

/* Times every pass of layers [first, last]: cfg->warmup untimed rounds, then cfg->runs
 * timed rounds, each round running F, B, I, W of the first layer, then of the next, and so
 * on. Taking the layers in turn, as training does, spreads every layer's samples over the
 * whole measurement (a burst of load elsewhere on the machine touches all layers alike
 * instead of one) and times each layer with the caches the other layers leave, not hot
 * from its own previous run. The backward passes reuse the forward's saved activations.
 * times is [nlayers][NPASS][runs], ms. Then, where the backend measures its scratch, one
 * more round runs each layer's passes from no scratch at all: ws[layer] is the scratch they
 * grew (bytes). With all the layers at once and data d, the layers see the inputs of
 * training (probe_chain); one layer alone keeps its random input. Returns 0; -2 with err
 * set when the layers' stages could not all be built (out of device memory: the caller may
 * go one layer at a time); -1 with err set on a backend failure. */
static int time_layers(const model *m, int first, int last, const prof_cfg *cfg,
                       const dataset *d, bk_ctx *ctx, double *times, double *ws,
                       plumb_err *err)
{
    const backend *bk = cfg->bk;
    const int n = last - first + 1;
    probe *pr = calloc((size_t)n, sizeof *pr);
    if (!pr) return err_set(err, NULL, NULL, "out of memory"), -2;
    int rc = -2;
    for (int i = 0; i < n; i++)
        if (probe_init(m, first + i, cfg, ctx, &pr[i], err)) goto done;
    rc = -1;
    if (d && first == 0 && last == m->nlayers - 1 && probe_chain(m, pr, n, d, cfg, ctx, err))
        goto done;
    for (int r = 0; r < cfg->warmup + cfg->runs; r++) {
        for (int i = 0; i < n; i++) {
            for (int p = 0; p < NPASS; p++) {
                if (bk->sync(ctx, err)) goto done;
                double t0 = train_now();
                probe_pass(&pr[i], p, cfg->batch);
                if (bk->sync(ctx, err)) goto done;
                double t1 = train_now();
                if (r >= cfg->warmup)
                    times[((size_t)(first + i) * NPASS + p) * cfg->runs + (r - cfg->warmup)] =
                        (t1 - t0) * 1e3;
            }
            /* the weight gradients accumulate run after run; keep them bounded */
            stage_zero_grads(pr[i].st);
        }
        if (cfg->progress) {
            long rounds = cfg->warmup + cfg->runs;
            cfg->progress(cfg->progress_user, (long)first * rounds + (long)(r + 1) * n,
                          (long)m->nlayers * rounds);
        }
    }
    for (int i = 0; bk->scratch_take && i < n; i++) {
        if (bk->sync(ctx, err)) goto done;
        bk->scratch_take(ctx);
        for (int p = 0; p < NPASS; p++) probe_pass(&pr[i], p, cfg->batch);
        if (bk->sync(ctx, err)) goto done;
        ws[first + i] = (double)bk->scratch_take(ctx);
        stage_zero_grads(pr[i].st);
    }
    rc = bk->sync(ctx, err);
done:
    for (int i = 0; i < n; i++) probe_free(bk, ctx, &pr[i]);
    free(pr);
    return rc;
}

/* The median time (ms) of what a first stage's F does before its compute: gather a
 * minibatch of d at random indices (the executor's batch callback) and upload its inputs
 * and targets; cfg->warmup untimed then cfg->runs timed. -1 with err set on failure. */
static double time_gather(const model *m, const dataset *d, const prof_cfg *cfg, bk_ctx *ctx,
                          plumb_err *err)
{
    const backend *bk = cfg->bk;
    const int B = cfg->batch;
    size_t nx = (size_t)B * d->sample_numel, ny = (size_t)B * model_targets_per_sample(m);
    unsigned long long rs = cfg->seed * 0x9E3779B97F4A7C15ULL + 11;
    int *idx = malloc((size_t)B * sizeof *idx);
    double *t = malloc((size_t)cfg->runs * sizeof *t), ms = -1;
    float *hx = bk_host_alloc(bk, ctx, (nx + 1) * sizeof(float), err);
    int32_t *hy = bk_host_alloc(bk, ctx, (ny + 1) * sizeof(int32_t), err);
    float *dx = bk->alloc(ctx, (nx + 1) * sizeof(float), err);
    int32_t *dy = bk->alloc(ctx, (ny + 1) * sizeof(int32_t), err);
    if (!idx || !t) err_set(err, NULL, NULL, "out of memory");
    if (!idx || !t || !hx || !hy || !dx || !dy) goto done;
    for (int r = 0; r < cfg->warmup + cfg->runs; r++) {
        for (int k = 0; k < B; k++) idx[k] = (int)(rng_uniform(&rs) * d->n) % d->n;
        if (bk->sync(ctx, err)) goto done;
        double t0 = train_now();
        data_gather(d, idx, B, hx, hy);
        bk->upload(ctx, dx, hx, nx * sizeof(float));
        bk->upload(ctx, dy, hy, ny * sizeof(int32_t));
        if (bk->sync(ctx, err)) goto done;
        if (r >= cfg->warmup) t[r - cfg->warmup] = (train_now() - t0) * 1e3;
    }
    ms = profiler_median(t, cfg->runs);
done:
    if (dx) bk->free(ctx, dx);
    if (dy) bk->free(ctx, dy);
    if (hx) bk_host_free(bk, hx);
    if (hy) bk_host_free(bk, hy);
    free(idx);
    free(t);
    return ms;
}

/* Times the backend's optimizer steps (sgd, momentum, adam, core/plan.h's order) over n
 * parameters (halved until the four vectors fit the device): ns[k] = the median of
 * cfg->runs steps (after cfg->warmup) per parameter byte, ns. Returns 0, or -1 with err
 * set (out of device memory, a backend failure). */
static int time_steps(long long n, const prof_cfg *cfg, bk_ctx *ctx, double ns[3],
                      plumb_err *err)
{
    const backend *bk = cfg->bk;
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    float *buf[4] = {NULL, NULL, NULL, NULL};
    double *t = malloc((size_t)cfg->runs * sizeof *t);
    float *h = malloc(bytes);
    int rc = -1;
    if (!t || !h) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    for (int k = 0; k < 4; k++)
        if (!(buf[k] = bk->alloc(ctx, bytes, err))) {
            /* weights, gradients and two states of the whole model do not fit the device
             * at once: time the step on fewer parameters (the cost is per byte) */
            for (int j = 0; j < k; j++) bk->free(ctx, buf[j]), buf[j] = NULL;
            if (bytes < 2048) goto done;
            err_clear(err);
            bytes = bytes / 2 / sizeof(float) * sizeof(float);
            k = -1;
        }
    unsigned long long rs = cfg->seed + 13;
    for (size_t k = 0; k < bytes / sizeof(float); k++)
        h[k] = (float)(0.02 * rng_uniform(&rs) - 0.01);
    bk->upload(ctx, buf[1], h, bytes); /* gradients; weights and state start at 0 */
    for (int kind = 0; kind < 3; kind++) {
        bk_opt o = {.kind = kind, .lr = 1e-3f, .momentum = 0.9f, .beta1 = 0.9f,
                    .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0, .step = 0};
        for (int r = 0; r < cfg->warmup + cfg->runs; r++) {
            o.step++;
            if (bk->sync(ctx, err)) goto done;
            double t0 = train_now();
            bk->opt_step(ctx, &o, bytes / sizeof(float), buf[0], buf[1], buf[2], buf[3]);
            if (bk->sync(ctx, err)) goto done;
            if (r >= cfg->warmup) t[r - cfg->warmup] = (train_now() - t0) * 1e9;
        }
        ns[kind] = profiler_median(t, cfg->runs) / (double)bytes;
    }
    rc = 0;
done:
    for (int k = 0; k < 4; k++)
        if (buf[k]) bk->free(ctx, buf[k]);
    free(t);
    free(h);
    return rc;
}

static double vmin(const double *v, int n)
{
    double x = v[0];
    for (int i = 1; i < n; i++) x = v[i] < x ? v[i] : x;
    return x;
}

static double vmax(const double *v, int n)
{
    double x = v[0];
    for (int i = 1; i < n; i++) x = v[i] > x ? v[i] : x;
    return x;
}

/* The data set plumb train uses for m by default (data_default_kind), as the profile's
 * data: Fashion-MNIST's training split, or synthetic samples when its files do not load
 * (a profile needs no labels that mean anything), n text windows or n synthetic samples;
 * *what names it. NULL with err set when none loads. */
static dataset *default_data(const model *m, int n, unsigned long long seed, const char **what,
                             plumb_err *err)
{
    const char *kind = data_default_kind(m);
    if (!strcmp(kind, "fashion-mnist")) {
        plumb_err e2;
        err_clear(&e2);
        dataset *d = data_fashion_mnist(NULL, 1, &e2);
        if (d && !data_check_model(d, m, &e2)) return *what = "fashion-mnist", d;
        data_free(d);
    } else if (!strcmp(kind, "text")) {
        *what = "text";
        return data_text(m, NULL, n, seed, err);
    }
    *what = "synthetic";
    return data_synthetic(m, n, seed, err);
}

profile *profiler_run(const model *m, const prof_cfg *cfg, prof_stats **stats, plumb_err *err)
{
    if (stats) *stats = NULL;
    if (!cfg->bk || cfg->batch < 1 || cfg->warmup < 0 || cfg->runs < 1 || cfg->workers < 1) {
        err_set(err, NULL, NULL, "profiler: expected a backend, batch >= 1, warmup >= 0, "
                "runs >= 1, workers >= 1 (got batch %d, warmup %d, runs %d, workers %d)",
                cfg->batch, cfg->warmup, cfg->runs, cfg->workers);
        return NULL;
    }
    const backend *bk = cfg->bk;
    char device[64], source[320];
    snprintf(device, sizeof device, "%s:%d", bk->name, cfg->device);
    snprintf(source, sizeof source,
             "plumb profile: %s device %d, median of %d runs after %d warm-up, as 1 of %d "
             "workers", bk->name, cfg->device, cfg->runs, cfg->warmup, cfg->workers);
    const char *what = "the caller's";
    dataset *own = NULL;
    const dataset *d = cfg->data;
    if (!d && !(d = own = default_data(m, 4 * cfg->batch, cfg->seed, &what, err)))
        return NULL;
    if (data_check_model(d, m, err)) {
        data_free(own);
        return NULL;
    }
    size_t sl = strlen(source);
    snprintf(source + sl, sizeof source - sl, ", on %s data", what);
    profile *p = profiler_skeleton(m, cfg->batch, device, source, err);
    prof_stats *st = calloc((size_t)m->nlayers + 1, sizeof *st);
    double *times = malloc((size_t)m->nlayers * NPASS * cfg->runs * sizeof *times);
    double *ws = calloc((size_t)m->nlayers + 1, sizeof *ws);
    bk_ctx *ctx = NULL;
    int ok = 0;
    if (!p) goto done;
    if (!st || !times || !ws) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    if (!(ctx = bk->create(cfg->device, err))) goto done;
    if (bk->hint_workers) bk->hint_workers(cfg->workers);
    int trc = time_layers(m, 0, m->nlayers - 1, cfg, d, ctx, times, ws, err);
    if (trc == -2 && m->nlayers > 1) {
        /* all the layers at once do not fit in the device's memory: one at a time */
        err_clear(err);
        char *src = malloc(strlen(p->source) + 64);
        if (!src) { err_set(err, NULL, NULL, "out of memory"); goto done; }
        sprintf(src, "%s; layers timed one at a time (memory)", p->source);
        free(p->source);
        p->source = src;
        for (int i = 0; i < m->nlayers; i++)
            if (time_layers(m, i, i, cfg, d, ctx, times, ws, err)) goto done;
        trc = 0;
    }
    if (trc) goto done;
    if ((p->input_gather_ms = time_gather(m, d, cfg, ctx, err)) < 0 ||
        time_steps(m->nparams, cfg, ctx, p->step_ns_per_byte, err))
        goto done;
    for (int i = 0; i < m->nlayers; i++) {
        double *tf = times + (size_t)i * NPASS * cfg->runs, *tb = tf + cfg->runs,
               *ti = tf + 2 * (size_t)cfg->runs, *tw = tf + 3 * (size_t)cfg->runs;
        prof_stats *s = &st[i];
        s->forward_min_ms = vmin(tf, cfg->runs);
        s->forward_max_ms = vmax(tf, cfg->runs);
        s->backward_min_ms = vmin(tb, cfg->runs);
        s->backward_max_ms = vmax(tb, cfg->runs);
        s->forward_ms = profiler_median(tf, cfg->runs);
        s->backward_ms = profiler_median(tb, cfg->runs);
        s->input_ms = profiler_median(ti, cfg->runs);
        s->weight_ms = profiler_median(tw, cfg->runs);
        profile_layer *L = &p->layers[i];
        L->forward_ms = s->forward_ms;
        L->backward_ms = s->backward_ms;
        double sum = s->input_ms + s->weight_ms;
        L->backward_input_ms = sum > 0 ? s->backward_ms * (s->input_ms / sum) : s->backward_ms;
        L->backward_weight_ms = L->backward_ms - L->backward_input_ms;
        if (L->backward_weight_ms < 0) L->backward_weight_ms = 0;
        L->workspace_bytes = ws[i];
    }
    if (profile_validate(p, "profile", err)) goto done;
    ok = 1;
done:
    if (bk->hint_workers) bk->hint_workers(1);
    if (ctx) bk->destroy(ctx);
    data_free(own);
    free(times);
    free(ws);
    if (!ok) {
        free(st);
        profile_free(p);
        return NULL;
    }
    if (stats) *stats = st;
    else free(st);
    return p;
}
