/* test_layers.c: every layer's input and weight gradients on the CPU backend against
 * central finite differences, for several shapes; the loss; whole models (a CNN and a small
 * transformer) end to end; and the split input/weight backward against the full one.
 *
 * Method: a stage holding just the layer under test computes y = f(x; w); the scalar is
 * L = sum(y * r) for a fixed random r (accumulated in double on the host), so dL/dy = r.
 * fp32 forward passes, eps = 1e-2 (1e-3 for the whole CNN), tolerance |num - ana| <= 2e-3 + 3e-2 max(|num|, |ana|).
 * Inputs are kept away from kinks (ReLU at 0, ties in max pooling). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "exec/model.h"
#include "exec/stage.h"

#define EPS 1e-2f
#define ATOL 2e-3
#define RTOL 3e-2
#define CHECKS 40 /* coordinates checked per tensor */

typedef struct gc {
    const backend *bk;
    bk_ctx *ctx;
    model *m;
    stage *st;
    int B;
    size_t nin, nout;      /* floats of the batch's input and output */
    long long np;
    float *x, *w, *r;      /* host copies */
    int32_t *t;            /* host targets */
} gc;

static double lossval(gc *g)
{
    plumb_err e = {{0}};
    g->bk->upload(g->ctx, stage_input(g->st, 0), g->x, g->nin * sizeof(float));
    g->bk->upload(g->ctx, stage_params(g->st), g->w, (size_t)g->np * sizeof(float));
    stage_forward(g->st, 0, g->B, NULL);
    if (stage_has_loss(g->st)) {
        double l, a;
        cr_assert_eq(stage_loss(g->st, 0, g->B, &l, &a, &e), 0, "%s", e.msg);
        return l;
    }
    float *y = malloc(g->nout * sizeof *y);
    g->bk->download(g->ctx, y, stage_output(g->st, 0), g->nout * sizeof(float));
    double s = 0;
    for (size_t i = 0; i < g->nout; i++) s += (double)y[i] * g->r[i];
    free(y);
    return s;
}

static void check_close(const char *what, size_t i, double num, double ana)
{
    double tol = ATOL + RTOL * fmax(fabs(num), fabs(ana));
    cr_expect(fabs(num - ana) <= tol, "%s[%zu]: finite difference %.6g, backward %.6g", what, i,
              num, ana);
}

/* Builds the model from text, the stage of layers [0, upto], random inputs (filled by
 * `fill` or uniform [-1, 1]), runs backward and checks dx and dw at sampled coordinates. */
static void gradcheck_eps(const char *text, int upto, int B,
                          void (*fill)(float *, size_t, int), int check_dx, float eps)
{
    gc g = {0};
    plumb_err e = {{0}};
    g.bk = backend_cpu();
    g.ctx = g.bk->create(0, &e);
    cr_assert(g.ctx);
    g.m = model_parse("test", text, &e);
    cr_assert(g.m, "%s", e.msg);
    g.st = stage_create(g.bk, g.ctx, g.m, 0, upto, B, 1, 0, &e);
    cr_assert(g.st, "%s", e.msg);
    g.B = B;
    g.nin = (size_t)B * stage_in_numel(g.st);
    g.nout = (size_t)B * stage_out_numel(g.st);
    g.np = stage_nparams(g.st);
    g.x = malloc(g.nin * sizeof(float));
    g.w = malloc(((size_t)g.np + 1) * sizeof(float));
    g.r = malloc(g.nout * sizeof(float));
    unsigned long long s = 42;
    if (fill) fill(g.x, g.nin, B);
    else
        for (size_t i = 0; i < g.nin; i++) g.x[i] = (float)(2 * rng_uniform(&s) - 1);
    for (size_t i = 0; i < g.nout; i++) g.r[i] = (float)(2 * rng_uniform(&s) - 1);
    g.bk->download(g.ctx, g.w, stage_params(g.st), (size_t)g.np * sizeof(float));
    /* non-trivial biases and norm parameters */
    for (long long i = 0; i < g.np; i++) g.w[i] += (float)(0.2 * (rng_uniform(&s) - 0.5));
    if (stage_has_loss(g.st)) {
        int tps = model_targets_per_sample(g.m);
        g.t = malloc((size_t)B * tps * sizeof(int32_t));
        for (int i = 0; i < B * tps; i++) g.t[i] = (int32_t)(rng_next(&s) % g.m->classes);
        g.bk->upload(g.ctx, stage_targets(g.st, 0), g.t, (size_t)B * tps * sizeof(int32_t));
    }
    /* analytic gradients */
    lossval(&g);
    float *dout = g.bk->alloc(g.ctx, g.nout * sizeof(float), &e);
    g.bk->upload(g.ctx, dout, g.r, g.nout * sizeof(float));
    stage_zero_grads(g.st);
    stage_backward(g.st, 0, B, NULL, stage_has_loss(g.st) ? NULL : dout, 1.0f);
    float *dx = malloc(g.nin * sizeof(float)), *dw = malloc(((size_t)g.np + 1) * sizeof(float));
    if (check_dx) {
        cr_assert(stage_input_grad(g.st));
        g.bk->download(g.ctx, dx, stage_input_grad(g.st), g.nin * sizeof(float));
    }
    g.bk->download(g.ctx, dw, stage_grads(g.st), (size_t)g.np * sizeof(float));
    cr_assert_eq(g.bk->sync(g.ctx, &e), 0, "%s", e.msg);
    /* numeric gradients at sampled coordinates */
    for (int k = 0; check_dx && k < CHECKS && (size_t)k < g.nin; k++) {
        size_t i = g.nin <= CHECKS ? (size_t)k : rng_next(&s) % g.nin;
        float v = g.x[i];
        g.x[i] = v + eps;
        double lp = lossval(&g);
        g.x[i] = v - eps;
        double lm = lossval(&g);
        g.x[i] = v;
        check_close("dx", i, (lp - lm) / (2 * eps), dx[i]);
    }
    for (int k = 0; k < CHECKS && k < g.np; k++) {
        size_t i = g.np <= CHECKS ? (size_t)k : rng_next(&s) % (size_t)g.np;
        float v = g.w[i];
        g.w[i] = v + eps;
        double lp = lossval(&g);
        g.w[i] = v - eps;
        double lm = lossval(&g);
        g.w[i] = v;
        check_close("dw", i, (lp - lm) / (2 * eps), dw[i]);
    }
    g.bk->free(g.ctx, dout);
    free(dx);
    free(dw);
    free(g.x);
    free(g.w);
    free(g.r);
    free(g.t);
    stage_free(g.st);
    model_free(g.m);
    g.bk->destroy(g.ctx);
}

static void gradcheck(const char *text, int upto, int B, void (*fill)(float *, size_t, int),
                      int check_dx)
{
    gradcheck_eps(text, upto, B, fill, check_dx, EPS);
}

/* A model text: input, the layers under test, then a flatten + linear head and the loss
 * so that the spec validates (the stage under test stops before the head). */
static char *spec(const char *input, const char *layers, int classes)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"format\":\"plumb-model/1\",\"input\":%s,\"classes\":%d,\"seed\":7,"
             "\"layers\":[%s,{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":%d},"
             "{\"type\":\"softmax_cross_entropy\"}]}",
             input, classes, layers, classes);
    return buf;
}

/* Values away from 0 (ReLU's kink): |x| in [0.1, 1]. */
static void fill_away0(float *x, size_t n, int B)
{
    (void)B;
    unsigned long long s = 3;
    for (size_t i = 0; i < n; i++) {
        double u = 0.1 + 0.9 * rng_uniform(&s);
        x[i] = (float)(rng_next(&s) & 1 ? u : -u);
    }
}

/* Distinct values 0.05 apart in random order: no ties or near-ties within a window. */
static void fill_distinct(float *x, size_t n, int B)
{
    (void)B;
    unsigned long long s = 5;
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.05 * (double)i - 0.025 * (double)n);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next(&s) % (i + 1);
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

/* Token ids in [0, 11) as floats. */
static void fill_tokens(float *x, size_t n, int B)
{
    (void)B;
    unsigned long long s = 9;
    for (size_t i = 0; i < n; i++) x[i] = (float)(rng_next(&s) % 11);
}

Test(layers, linear)
{
    gradcheck(spec("[7]", "{\"type\":\"linear\",\"out\":5}", 3), 0, 4, NULL, 1);
    gradcheck(spec("[1]", "{\"type\":\"linear\",\"out\":1}", 2), 0, 1, NULL, 1);
    gradcheck(spec("[6,8]", "{\"type\":\"linear\",\"out\":12}", 3), 0, 3, NULL, 1);
}

Test(layers, conv2d)
{
    gradcheck(spec("[2,6,6]", "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3}", 2), 0, 2,
              NULL, 1);
    gradcheck(spec("[3,7,5]",
                   "{\"type\":\"conv2d\",\"out_channels\":4,\"kernel\":3,\"stride\":2,"
                   "\"padding\":1}", 2),
              0, 3, NULL, 1);
    gradcheck(spec("[1,5,5]", "{\"type\":\"conv2d\",\"out_channels\":2,\"kernel\":1}", 2), 0, 1,
              NULL, 1);
    gradcheck(spec("[2,4,4]",
                   "{\"type\":\"conv2d\",\"out_channels\":2,\"kernel\":4,\"padding\":2}", 2),
              0, 2, NULL, 1);
}

Test(layers, relu)
{
    gradcheck(spec("[10]", "{\"type\":\"relu\"}", 2), 0, 3, fill_away0, 1);
    gradcheck(spec("[2,3,3]", "{\"type\":\"relu\"}", 2), 0, 2, fill_away0, 1);
}

Test(layers, gelu)
{
    gradcheck(spec("[10]", "{\"type\":\"gelu\"}", 2), 0, 3, NULL, 1);
    gradcheck(spec("[4,6]", "{\"type\":\"gelu\"}", 2), 0, 2, NULL, 1);
}

Test(layers, maxpool2d)
{
    gradcheck(spec("[2,4,4]", "{\"type\":\"maxpool2d\",\"kernel\":2}", 2), 0, 2, fill_distinct,
              1);
    gradcheck(spec("[1,7,7]", "{\"type\":\"maxpool2d\",\"kernel\":3,\"stride\":2}", 2), 0, 2,
              fill_distinct, 1);
    gradcheck(spec("[3,5,6]", "{\"type\":\"maxpool2d\",\"kernel\":2,\"stride\":1}", 2), 0, 1,
              fill_distinct, 1);
}

Test(layers, flatten)
{
    gradcheck(spec("[2,3,3]", "{\"type\":\"flatten\"}", 2), 0, 2, NULL, 1);
}

Test(layers, layernorm)
{
    gradcheck(spec("[16]", "{\"type\":\"layernorm\"}", 2), 0, 3, NULL, 1);
    gradcheck(spec("[5,8]", "{\"type\":\"layernorm\"}", 2), 0, 2, NULL, 1);
}

Test(layers, embedding)
{
    gradcheck(spec("[6]", "{\"type\":\"embedding\",\"vocab\":11,\"dim\":4}", 11), 0, 3,
              fill_tokens, 0);
}

Test(layers, attention)
{
    gradcheck(spec("[5,12]", "{\"type\":\"attention\",\"heads\":2}", 2), 0, 2, NULL, 1);
    gradcheck(spec("[4,6]", "{\"type\":\"attention\",\"heads\":1}", 2), 0, 3, NULL, 1);
    gradcheck(spec("[1,24]", "{\"type\":\"attention\",\"heads\":4}", 2), 0, 2, NULL, 1);
}

Test(layers, residual)
{
    gradcheck(spec("[4,8]",
                   "{\"type\":\"residual\",\"layers\":[{\"type\":\"layernorm\"},"
                   "{\"type\":\"linear\",\"out\":16},{\"type\":\"gelu\"},"
                   "{\"type\":\"linear\",\"out\":8}]}", 2),
              0, 2, NULL, 1);
}

Test(layers, loss)
{
    /* the loss alone: sum over rows of -log softmax(x)[target] */
    gradcheck("{\"format\":\"plumb-model/1\",\"input\":[6],\"classes\":6,"
              "\"layers\":[{\"type\":\"softmax_cross_entropy\"}]}",
              0, 5, NULL, 1);
    gradcheck("{\"format\":\"plumb-model/1\",\"input\":[3,4],\"classes\":4,"
              "\"layers\":[{\"type\":\"softmax_cross_entropy\"}]}",
              0, 2, NULL, 1);
}

Test(layers, whole_cnn)
{
    gradcheck_eps("{\"format\":\"plumb-model/1\",\"input\":[1,8,8],\"classes\":3,\"layers\":["
              "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3,\"padding\":1},"
              "{\"type\":\"relu\"},{\"type\":\"maxpool2d\",\"kernel\":2},{\"type\":\"flatten\"},"
              "{\"type\":\"linear\",\"out\":3},{\"type\":\"softmax_cross_entropy\"}]}",
              5, 2, fill_distinct, 1, 1e-3f); /* small steps: ReLU and pooling kinks */
}

Test(layers, whole_transformer)
{
    gradcheck("{\"format\":\"plumb-model/1\",\"input\":[5],\"classes\":11,\"layers\":["
              "{\"type\":\"embedding\",\"vocab\":11,\"dim\":8},"
              "{\"type\":\"residual\",\"layers\":[{\"type\":\"layernorm\"},"
              "{\"type\":\"linear\",\"out\":24},{\"type\":\"attention\",\"heads\":2},"
              "{\"type\":\"linear\",\"out\":8}]},"
              "{\"type\":\"layernorm\"},{\"type\":\"linear\",\"out\":11},"
              "{\"type\":\"softmax_cross_entropy\"}]}",
              4, 2, fill_tokens, 0);
}

/* The split backward (input pass for two microbatches, then both weight passes) gives the
 * same gradients as two full backwards. */
Test(layers, split_backward_matches_full)
{
    const char *text = spec("[2,6,6]",
                            "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3},"
                            "{\"type\":\"relu\"},{\"type\":\"flatten\"},"
                            "{\"type\":\"linear\",\"out\":5},{\"type\":\"layernorm\"}",
                            2);
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    model *m = model_parse("t", text, &e);
    cr_assert(m, "%s", e.msg);
    stage *full = stage_create(bk, c, m, 0, 4, 3, 2, 0, &e);
    stage *split = stage_create(bk, c, m, 0, 4, 3, 2, 1, &e);
    cr_assert(full && split, "%s", e.msg);
    size_t nin = 3 * stage_in_numel(full), nout = 3 * stage_out_numel(full);
    long long np = stage_nparams(full);
    float *x = malloc(nin * sizeof *x), *d = malloc(nout * sizeof *d);
    unsigned long long s = 1;
    stage *both[2] = {full, split};
    float *g[2];
    for (int k = 0; k < 2; k++) {
        stage_zero_grads(both[k]);
        for (int slot = 0; slot < 2; slot++) {
            for (size_t i = 0; i < nin; i++) x[i] = (float)(rng_uniform(&s) - 0.5 + slot);
            bk->upload(c, stage_input(both[k], slot), x, nin * sizeof *x);
            stage_forward(both[k], slot, 3, NULL);
        }
        for (int slot = 0; slot < 2; slot++) {
            for (size_t i = 0; i < nout; i++) d[i] = (float)(slot + 1) * 0.1f * (float)(i % 7);
            float *dd = bk->alloc(c, nout * sizeof *d, &e);
            bk->upload(c, dd, d, nout * sizeof *d);
            if (k == 0) stage_backward(full, slot, 3, NULL, dd, 1);
            else stage_backward_input(split, slot, 3, NULL, dd, 1);
            bk->free(c, dd);
        }
        if (k == 1) {
            stage_backward_weight(split, 1, 3);
            stage_backward_weight(split, 0, 3);
        }
        g[k] = malloc((size_t)np * sizeof(float));
        bk->download(c, g[k], stage_grads(both[k]), (size_t)np * sizeof(float));
        s = 1;
    }
    for (long long i = 0; i < np; i++)
        cr_expect_float_eq(g[0][i], g[1][i], 1e-5 * (1 + fabsf(g[0][i])), "grad[%lld]", i);
    free(g[0]);
    free(g[1]);
    free(x);
    free(d);
    stage_free(full);
    stage_free(split);
    model_free(m);
    bk->destroy(c);
}

/* Optimizers: one step of each from known values. */
Test(layers, optimizers)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, m[2] = {0.1f, 0}, v[2] = {0, 0};
    bk_opt o = {.kind = BK_SGD, .lr = 0.1f};
    bk->opt_step(c, &o, 2, w, g, NULL, NULL);
    cr_expect_float_eq(w[0], 0.95f, 1e-6);
    cr_expect_float_eq(w[1], -2.025f, 1e-6);
    o = (bk_opt){.kind = BK_MOMENTUM, .lr = 0.1f, .momentum = 0.9f};
    bk->opt_step(c, &o, 2, w, g, m, NULL);
    cr_expect_float_eq(m[0], 0.59f, 1e-6);            /* 0.9 * 0.1 + 0.5 */
    cr_expect_float_eq(w[0], 0.95f - 0.059f, 1e-6);
    o = (bk_opt){.kind = BK_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                 .step = 1};
    float w2[1] = {1.0f}, g2[1] = {3.0f}, m2[1] = {0}, v2[1] = {0};
    bk->opt_step(c, &o, 1, w2, g2, m2, v2);
    /* first Adam step moves by lr sign(g) */
    cr_expect_float_eq(w2[0], 0.99f, 1e-5);
    (void)v;
    bk->destroy(c);
}

/* Bytes a stage of `k` linear layers (256 -> 256, batch 16, one slot) holds on the CPU. */
static size_t chain_bytes(int k)
{
    char layers[1024] = "";
    for (int i = 0; i < k; i++)
        strcat(layers, i ? ",{\"type\":\"linear\",\"out\":256}" : "{\"type\":\"linear\",\"out\":256}");
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    model *m = model_parse("chain", spec("[256]", layers, 4), &e);
    cr_assert(m, "%s", e.msg);
    stage *st = stage_create(bk, c, m, 0, k - 1, 16, 1, 0, &e);
    cr_assert(st, "%s", e.msg);
    size_t bytes = bk->mem_peak(c);
    stage_free(st);
    model_free(m);
    bk->destroy(c);
    return bytes;
}

/* The layers' input gradients share two buffers: each layer more costs its weights, their
 * gradients and its output, and no input gradient of its own. */
Test(layers, input_gradients_share_two_buffers)
{
    size_t two = chain_bytes(2), six = chain_bytes(6);
    size_t per_layer = 2 * (256 * 256 + 256) * sizeof(float) + 16 * 256 * sizeof(float);
    cr_assert_eq(six - two, 4 * per_layer, "4 more layers cost %zu bytes, expected %zu",
                 six - two, 4 * per_layer);
}

/* The input-gradient entries of the CPU backend, counted (no_input_grad below). */
static const backend *cpu_bk;
static int n_dx; /* input-gradient calls: every *_bwd_data, relu_bwd and add */
static void cnt_add(bk_ctx *c, size_t n, const float *a, const float *b, float *y)
{
    n_dx++;
    cpu_bk->add(c, n, a, b, y);
}
static void cnt_linear(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                       float *dx)
{
    n_dx++;
    cpu_bk->linear_bwd_data(c, N, in, out, dy, w, dx);
}
static void cnt_conv(bk_ctx *c, const bk_conv *g, const float *dy, const float *w, float *dx)
{
    n_dx++;
    cpu_bk->conv2d_bwd_data(c, g, dy, w, dx);
}
static void cnt_relu(bk_ctx *c, size_t n, const float *x, const float *dy, float *dx)
{
    n_dx++;
    cpu_bk->relu_bwd(c, n, x, dy, dx);
}
static void cnt_ln(bk_ctx *c, int N, int D, const float *x, const float *gamma,
                   const float *mean, const float *rstd, const float *dy, float *dx)
{
    n_dx++;
    cpu_bk->layernorm_bwd_data(c, N, D, x, gamma, mean, rstd, dy, dx);
}

/* Runs 2 microbatches' forward and backward (split: input passes, then weight passes) of
 * stage [0, last] of m on bk, returns its gradients (malloc'd) and the input-gradient
 * calls of the backward in *calls; *dx_null: stage_input_grad was NULL after it. */
static float *grads_of(const backend *bk, const model *m, int last, int split, int recompute,
                       int no_dx, int *calls, int *dx_null)
{
    plumb_err e = {{0}};
    bk_ctx *c = bk->create(0, &e);
    stage_opts o = {split, recompute, NULL, no_dx, 0, 0};
    stage *st = stage_create_opts(bk, c, m, 0, last, 3, 2, &o, &e);
    cr_assert(st, "%s", e.msg);
    size_t nin = 3 * stage_in_numel(st), nout = 3 * stage_out_numel(st);
    long long np = stage_nparams(st);
    float *x = malloc(nin * sizeof *x), *d = malloc(nout * sizeof *d);
    float *dd = bk->alloc(c, nout * sizeof *d, &e);
    unsigned long long s = 11;
    stage_zero_grads(st);
    for (int slot = 0; slot < 2; slot++) {
        for (size_t i = 0; i < nin; i++) x[i] = (float)(rng_uniform(&s) - 0.5 + slot);
        bk->upload(c, stage_input(st, slot), x, nin * sizeof *x);
        stage_forward(st, slot, 3, NULL);
    }
    n_dx = 0;
    *dx_null = 1;
    for (int slot = 0; slot < 2; slot++) {
        for (size_t i = 0; i < nout; i++) d[i] = (float)(slot + 1) * 0.1f * (float)(i % 7);
        bk->upload(c, dd, d, nout * sizeof *d);
        if (split) stage_backward_input(st, slot, 3, NULL, dd, 1);
        else stage_backward(st, slot, 3, NULL, dd, 1);
        *dx_null &= stage_input_grad(st) == NULL;
    }
    for (int slot = 0; split && slot < 2; slot++) stage_backward_weight(st, slot, 3);
    *calls = n_dx;
    float *g = malloc((size_t)np * sizeof *g);
    bk->download(c, g, stage_grads(st), (size_t)np * sizeof *g);
    cr_assert_eq(bk->sync(c, &e), 0, "%s", e.msg);
    bk->free(c, dd);
    free(x);
    free(d);
    stage_free(st);
    bk->destroy(c);
    return g;
}

/* A first stage made with no_input_grad leaves out the input gradients that lead only to
 * its input (the data): `fewer` input-gradient calls per backward, for the first layer
 * with weights (and the weightless layers before it, and a residual block's sum), with
 * the same weight gradients to the bit, full or split backward, with or without
 * recomputation; stage_input_grad is then NULL. */
Test(layers, no_input_grad_leaves_out_the_first_layers_input_gradient)
{
    backend cnt = *backend_cpu();
    cpu_bk = backend_cpu();
    cnt.add = cnt_add;
    cnt.linear_bwd_data = cnt_linear;
    cnt.conv2d_bwd_data = cnt_conv;
    cnt.relu_bwd = cnt_relu;
    cnt.layernorm_bwd_data = cnt_ln;
    struct { const char *input, *layers; int last, fewer; } cases[] = {
        /* linear: its dx (the flatten before it has none to give) */
        {"[2,3,4]", "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":6},"
                    "{\"type\":\"relu\"},{\"type\":\"linear\",\"out\":5}", 3, 1},
        /* conv2d: its dx */
        {"[2,6,6]", "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3},"
                    "{\"type\":\"relu\"},{\"type\":\"flatten\"},"
                    "{\"type\":\"linear\",\"out\":5}", 3, 1},
        /* relu then linear: both */
        {"[7]", "{\"type\":\"relu\"},{\"type\":\"linear\",\"out\":6},{\"type\":\"relu\"}", 2, 2},
        /* a residual block first: its layer norm's dx and the block's sum */
        {"[4,8]", "{\"type\":\"residual\",\"layers\":[{\"type\":\"layernorm\"},"
                  "{\"type\":\"linear\",\"out\":16},{\"type\":\"gelu\"},"
                  "{\"type\":\"linear\",\"out\":8}]},{\"type\":\"layernorm\"}", 1, 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        plumb_err e = {{0}};
        model *m = model_parse("t", spec(cases[k].input, cases[k].layers, 2), &e);
        cr_assert(m, "%s", e.msg);
        for (int mode = 0; mode < 4; mode++) {
            int split = mode & 1, rc = mode >> 1, n_all, n_skip, null_all, null_skip;
            float *all = grads_of(&cnt, m, cases[k].last, split, rc, 0, &n_all, &null_all);
            float *skip = grads_of(&cnt, m, cases[k].last, split, rc, 1, &n_skip, &null_skip);
            long long np = model_range_params(m, 0, cases[k].last);
            cr_expect_eq(memcmp(all, skip, (size_t)np * sizeof *all), 0,
                         "case %zu, split %d, recompute %d: weight gradients differ", k, split,
                         rc);
            cr_expect_eq(n_all - n_skip, 2 * cases[k].fewer, "case %zu, split %d, recompute "
                         "%d: %d input-gradient calls, %d without the input's (expected %d "
                         "fewer)", k, split, rc, n_all, n_skip, 2 * cases[k].fewer);
            cr_expect(!null_all && null_skip, "case %zu: stage_input_grad", k);
            free(all);
            free(skip);
        }
        model_free(m);
    }
}

/* The layers before stage_input_grad_from give no input gradient in a first stage (plumb
 * profile times them so): up to and including the first with weights. */
Test(layers, input_grad_from_the_first_layer_with_weights)
{
    struct { const char *file; int from; } want[] = {
        {"examples/models/fmnist-mlp.json", 2}, /* flatten, linear */
        {"examples/models/fmnist-cnn.json", 1}, /* conv1 */
        {"examples/models/gpt-mini.json", 1},   /* the embedding */
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        plumb_err e = {{0}};
        model *m = model_load(want[k].file, &e);
        cr_assert(m, "%s", e.msg);
        cr_expect_eq(stage_input_grad_from(m), want[k].from, "%s", want[k].file);
        model_free(m);
    }
    plumb_err e = {{0}}; /* a weightless layer, then a residual block: both */
    model *m = model_parse("t", spec("[4,8]", "{\"type\":\"gelu\"},{\"type\":\"residual\","
                                     "\"layers\":[{\"type\":\"layernorm\"}]}", 2), &e);
    cr_assert(m, "%s", e.msg);
    cr_expect_eq(stage_input_grad_from(m), 2);
    model_free(m);
}
