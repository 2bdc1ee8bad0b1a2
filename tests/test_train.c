/* test_train.c: sequential training: gradient accumulation over microbatches equals one
 * big batch, the loss falls on learnable data with each optimizer, evaluation counts,
 * checkpoints resume exactly and refuse other models and optimizers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/train.h"

static const char *mlp =
    "{\"format\":\"plumb-model/1\",\"input\":[2,4,4],\"classes\":4,\"seed\":5,\"layers\":["
    "{\"type\":\"conv2d\",\"out_channels\":3,\"kernel\":3,\"padding\":1},{\"type\":\"relu\"},"
    "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":16},{\"type\":\"gelu\"},"
    "{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";

/* Trains `steps` minibatches of mb x micro samples from d; returns the final weights. */
static float *run(const model *m, const dataset *d, int mb, int micro, int kind, int steps,
                  double *last_loss)
{
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    train_cfg cfg = {mb, micro, train_default_opt(kind)};
    seq_trainer *t = seqtrain_create(bk, c, m, &cfg, &e);
    cr_assert(t, "%s", e.msg);
    for (int s = 0; s < steps; s++) {
        size_t off = (size_t)s * mb * micro;
        double l;
        cr_assert_eq(seqtrain_step(t, d->x + off * d->sample_numel, d->y + off, &l, NULL, &e),
                     0, "%s", e.msg);
        if (last_loss) *last_loss = l;
    }
    float *w = malloc((size_t)m->nparams * sizeof *w);
    cr_assert_eq(seqtrain_get_params(t, w, &e), 0);
    seqtrain_free(t);
    bk->destroy(c);
    return w;
}

Test(train, accumulation_equals_big_batch)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", mlp, &e);
    cr_assert(m, "%s", e.msg);
    dataset *d = data_synthetic(m, 96, 1, &e);
    for (int kind = 0; kind < 3; kind++) {
        float *a = run(m, d, 8, 1, kind, 4, NULL);  /* 4 steps of 8 */
        float *b = run(m, d, 2, 4, kind, 4, NULL);  /* the same 4 steps as 4 x 2 */
        float *c = run(m, d, 4, 2, kind, 4, NULL);
        for (long long i = 0; i < m->nparams; i++) {
            cr_expect(fabsf(a[i] - b[i]) <= 1e-5f * (1 + fabsf(a[i])),
                      "opt %d w[%lld]: %g vs %g", kind, i, a[i], b[i]);
            cr_expect(fabsf(a[i] - c[i]) <= 1e-5f * (1 + fabsf(a[i])),
                      "opt %d w[%lld]: %g vs %g", kind, i, a[i], c[i]);
        }
        /* and the weights moved */
        float *w0 = malloc((size_t)m->nparams * sizeof *w0);
        model_init_params(m, 0, m->nlayers - 1, w0);
        double moved = 0;
        for (long long i = 0; i < m->nparams; i++) moved += fabsf(a[i] - w0[i]);
        cr_expect(moved > 1e-3, "optimizer %d did not move the weights", kind);
        free(w0);
        free(a);
        free(b);
        free(c);
    }
    data_free(d);
    model_free(m);
}

Test(train, loss_falls_and_evaluates)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", mlp, &e);
    dataset *d = data_synthetic(m, 2048, 2, &e), *te = data_synthetic(m, 256, 3, &e);
    cr_assert(d && te);
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    train_cfg cfg = {32, 1, train_default_opt(BK_ADAM)};
    cfg.opt.lr = 0.01f;
    seq_trainer *t = seqtrain_create(bk, c, m, &cfg, &e);
    double l0, a0, l1, a1;
    cr_assert_eq(seqtrain_evaluate(t, te, 0, &l0, &a0, &e), 0, "%s", e.msg);
    for (int ep = 0; ep < 3; ep++)
        for (int s = 0; s < 64; s++)
            cr_assert_eq(seqtrain_step(t, d->x + (size_t)s * 32 * 32, d->y + s * 32, NULL, NULL,
                                       &e), 0, "%s", e.msg);
    cr_assert_eq(seqtrain_evaluate(t, te, 0, &l1, &a1, &e), 0);
    cr_expect(l1 < 0.6 * l0, "test loss %g -> %g", l0, l1);
    cr_expect(a1 > 0.6, "test accuracy %g", a1);
    /* evaluation of a partial last chunk: 100 = 3 x 32 + 4 */
    double l2, a2;
    cr_assert_eq(seqtrain_evaluate(t, te, 100, &l2, &a2, &e), 0);
    cr_expect(a2 * 100 == floor(a2 * 100 + 0.5), "accuracy over 100 samples %g", a2);
    seqtrain_free(t);
    bk->destroy(c);
    data_free(d);
    data_free(te);
    model_free(m);
}

Test(train, run_rejects_too_big_batch)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", mlp, &e);
    dataset *d = data_synthetic(m, 10, 2, &e);
    train_run_cfg rc = {.bk = backend_cpu(), .m = m, .train = d,
                        .cfg = {8, 2, train_default_opt(BK_SGD)}, .epochs = 1};
    train_result r;
    cr_expect_eq(train_run(&rc, &r, &e), -1);
    cr_expect(strstr(e.msg, "--batch: expected at most the 10 samples") != NULL, "%s", e.msg);
    data_free(d);
    model_free(m);
}

/* A run stopped after 3 steps and resumed from its checkpoint ends with the weights of an
 * uninterrupted run (Adam: moments and the step count are part of the state). */
Test(train, checkpoint_resume_is_exact)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", mlp, &e);
    dataset *d = data_synthetic(m, 96, 1, &e);
    float *straight = run(m, d, 4, 2, BK_ADAM, 6, NULL);
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    train_cfg cfg = {4, 2, train_default_opt(BK_ADAM)};
    char path[] = "/tmp/plumb-ckpt-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    seq_trainer *a = seqtrain_create(bk, c, m, &cfg, &e);
    for (int s = 0; s < 3; s++)
        cr_assert_eq(seqtrain_step(a, d->x + (size_t)s * 8 * 32, d->y + s * 8, NULL, NULL, &e), 0);
    cr_assert_eq(seqtrain_save(a, path, &e), 0, "%s", e.msg);
    seqtrain_free(a);
    seq_trainer *b = seqtrain_create(bk, c, m, &cfg, &e);
    cr_assert_eq(seqtrain_load(b, path, &e), 0, "%s", e.msg);
    cr_expect_eq(seqtrain_steps(b), 3);
    for (int s = 3; s < 6; s++)
        cr_assert_eq(seqtrain_step(b, d->x + (size_t)s * 8 * 32, d->y + s * 8, NULL, NULL, &e), 0);
    float *w = malloc((size_t)m->nparams * sizeof *w);
    seqtrain_get_params(b, w, &e);
    for (long long i = 0; i < m->nparams; i++)
        cr_expect_eq(w[i], straight[i], "w[%lld]: resumed %g, straight %g", i, w[i], straight[i]);
    /* the wrong optimizer and another model are refused */
    train_cfg sgd = {4, 2, train_default_opt(BK_SGD)};
    seq_trainer *s2 = seqtrain_create(bk, c, m, &sgd, &e);
    cr_expect_eq(seqtrain_load(s2, path, &e), -1);
    cr_expect(strstr(e.msg, "expected a checkpoint of the sgd optimizer (got adam)"), "%s", e.msg);
    model *other = model_parse("o", "{\"format\":\"plumb-model/1\",\"input\":[32],\"classes\":4,"
                               "\"layers\":[{\"type\":\"linear\",\"out\":4},"
                               "{\"type\":\"softmax_cross_entropy\"}]}", &e);
    int kind;
    long step;
    cr_expect_eq(ckpt_peek(path, other, &kind, &step, &e), -1);
    cr_expect(strstr(e.msg, "expected a checkpoint of model") != NULL, "%s", e.msg);
    cr_expect_eq(ckpt_peek(path, m, &kind, &step, &e), 0, "%s", e.msg);
    cr_expect(kind == BK_ADAM && step == 3);
    cr_assert_eq(truncate(path, 100), 0);
    cr_expect_eq(ckpt_peek(path, m, &kind, &step, &e), -1);
    cr_expect(strstr(e.msg, "truncated") != NULL, "%s", e.msg);
    unlink(path);
    seqtrain_free(s2);
    seqtrain_free(b);
    model_free(other);
    free(w);
    free(straight);
    bk->destroy(c);
    data_free(d);
    model_free(m);
}
