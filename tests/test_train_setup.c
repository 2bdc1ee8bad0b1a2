/* test_train_setup.c: what `plumb train` prepares before a run (exec/train_setup.h): the
 * default data kind that train and the profiler share, the training and test sets and the
 * bad-input answers, and the checkpoint a run resumes from (a file, or the newest in a
 * folder; the optimizer must be the run's). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/checkpoint.h"
#include "exec/train.h"
#include "exec/train_plan.h"
#include "exec/train_setup.h"
#include "tests/tmpdir.h"

/* A token model with 16 classes: too few for byte-level text. */
static const char *tok16 =
    "{\"format\":\"plumb-model/1\",\"input\":[8],\"classes\":16,\"seed\":5,\"layers\":["
    "{\"type\":\"embedding\",\"vocab\":16,\"dim\":4},{\"type\":\"linear\",\"out\":16},"
    "{\"type\":\"softmax_cross_entropy\"}]}";
/* Features without embedding: 12 inputs, 4 classes. */
static const char *mlp12 =
    "{\"format\":\"plumb-model/1\",\"input\":[12],\"classes\":4,\"seed\":3,\"layers\":["
    "{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";

static model *load(const char *path)
{
    plumb_err e = {{0}};
    model *m = model_load(path, &e);
    cr_assert_not_null(m, "%s: %s", path, e.msg);
    return m;
}

static model *parse(const char *spec)
{
    plumb_err e = {{0}};
    model *m = model_parse("m.json", spec, &e);
    cr_assert_not_null(m, "%s", e.msg);
    return m;
}

/* One rule for train and profile: Fashion-MNIST's shape, byte text for a token model that
 * can hold bytes, else synthetic (a 16-class token model cannot take text). */
Test(train_setup, default_data_kind)
{
    model *cnn = load("examples/models/fmnist-cnn.json");
    model *mlp = load("examples/models/fmnist-mlp.json");
    model *gpt = load("examples/models/gpt-mini.json"), *t16 = parse(tok16), *f12 = parse(mlp12);
    cr_expect_str_eq(data_default_kind(cnn), "fashion-mnist");
    cr_expect_str_eq(data_default_kind(mlp), "fashion-mnist");
    cr_expect_str_eq(data_default_kind(gpt), "text");
    cr_expect_str_eq(data_default_kind(t16), "synthetic");
    cr_expect_str_eq(data_default_kind(f12), "synthetic");
    model_free(cnn);
    model_free(mlp);
    model_free(gpt);
    model_free(t16);
    model_free(f12);
}

/* The sets' sizes and seeds: samples for training, a quarter (at least 1) for the test,
 * seeded apart; the default kind of a 16-class token model loads (synthetic tokens). */
Test(train_setup, data_sets_and_their_sizes)
{
    plumb_err e = {{0}};
    model *gpt = load("examples/models/gpt-mini.json"), *t16 = parse(tok16);
    dataset *tr, *te;
    train_data_spec sp = {NULL, NULL, NULL, 40};
    cr_assert_eq(train_data_load(gpt, "gpt.json", &sp, &tr, &te, &e), 0, "%s", e.msg);
    cr_expect_eq(tr->n, 40);
    cr_expect_eq(te->n, 10);
    cr_expect_eq(tr->classes, 256);
    cr_expect(memcmp(tr->x, te->x, te->sample_numel * sizeof *te->x), "test set seeded apart");
    data_free(tr);
    data_free(te);
    sp.samples = 3;
    cr_assert_eq(train_data_load(t16, "t16.json", &sp, &tr, &te, &e), 0, "%s", e.msg);
    cr_expect_eq(tr->n, 3);
    cr_expect_eq(te->n, 1);
    cr_expect(strstr(tr->name, "synthetic") != NULL, "%s", tr->name);
    data_free(tr);
    data_free(te);
    model_free(gpt);
    model_free(t16);
}

/* Bad input: an unknown kind, text for a model that cannot take it, Fashion-MNIST for a
 * model of another shape (the model file named in front), a missing folder. Nothing is
 * left allocated (the pointers stay NULL). */
Test(train_setup, data_refusals)
{
    plumb_err e = {{0}};
    model *t16 = parse(tok16), *f12 = parse(mlp12);
    dataset *tr = (dataset *)1, *te = (dataset *)1;
    train_data_spec sp = {"imagenet", NULL, NULL, 16};
    cr_expect_eq(train_data_load(f12, "f12.json", &sp, &tr, &te, &e), -1);
    cr_expect(strstr(e.msg, "--data") && strstr(e.msg, "imagenet"), "%s", e.msg);
    cr_expect(tr == NULL && te == NULL);
    sp.kind = "text";
    cr_expect_eq(train_data_load(t16, "t16.json", &sp, &tr, &te, &e), -1);
    cr_expect(strstr(e.msg, "at least 256 classes"), "%s", e.msg);
    sp.kind = "fashion-mnist";
    if (access(FMNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0) {
        cr_expect_eq(train_data_load(f12, "f12.json", &sp, &tr, &te, &e), -1);
        cr_expect(strstr(e.msg, "f12.json") == e.msg, "%s", e.msg);
    }
    sp.dir = "/nonexistent-plumb-dir";
    cr_expect_eq(train_data_load(f12, "f12.json", &sp, &tr, &te, &e), -1);
    cr_expect(strstr(e.msg, "/nonexistent-plumb-dir"), "%s", e.msg);
    cr_expect(tr == NULL && te == NULL);
    /* a source the kind does not read: refused, not ignored */
    sp.kind = "synthetic";
    cr_expect_eq(train_data_load(f12, "f12.json", &sp, &tr, &te, &e), -1);
    cr_expect(strstr(e.msg, "--data-dir: belongs to --data fashion-mnist (the data is "
                     "synthetic)"), "%s", e.msg);
    sp.dir = NULL;
    sp.kind = NULL;
    sp.text = "t.txt";
    cr_expect_eq(train_data_load(f12, "f12.json", &sp, &tr, &te, &e), -1);
    cr_expect(strstr(e.msg, "--text: belongs to --data text (the data is synthetic, the "
                     "model's default)"), "%s", e.msg);
    cr_expect(tr == NULL && te == NULL);
    model_free(t16);
    model_free(f12);
}

/* A folder resumes from its newest checkpoint, a file from itself; another optimizer's
 * checkpoint is one line naming the file and the --optimizer that resumes it. */
Test(train_setup, resume_file_or_newest_in_folder)
{
    plumb_err e = {{0}};
    model *m = parse(mlp12);
    char *dir = make_tmpdir_named("setup"), path[300];
    float *w = calloc((size_t)m->nparams * 2, sizeof *w);
    cr_assert_not_null(w);
    for (long k = 3; k <= 9; k += 3) {
        w[1] = (float)k;
        ckpt c = {1, k, w, w + m->nparams, NULL};
        cr_assert_eq(ckpt_save_dir(dir, m, &c, 2, &e), 0, "%s", e.msg);
    }
    ckpt st;
    char *p = train_resume_open(dir, m, 1, &st, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_expect(strstr(p, "ckpt-00000009.ckpt") != NULL, "%s", p);
    cr_expect(st.opt_kind == 1 && st.step == 9 && st.w && st.m && !st.v);
    cr_expect_eq(st.w[1], 9.0f);
    ckpt_free(&st);
    free(p);
    snprintf(path, sizeof path, "%s/ckpt-00000006.ckpt", dir);
    p = train_resume_open(path, m, 1, &st, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_expect_str_eq(p, path);
    free(p);
    cr_expect_eq(st.step, 6);
    ckpt_free(&st);
    cr_expect_null(train_resume_open(path, m, 2, &st, &e));
    cr_expect(!st.w && !st.m, "nothing kept on failure");
    cr_expect(strstr(e.msg, path) && strstr(e.msg, "expected a checkpoint of the adam "
              "optimizer (got momentum); resume with --optimizer momentum"), "%s", e.msg);
    snprintf(path, sizeof path, "%s/none.ckpt", dir);
    cr_expect_null(train_resume_open(path, m, 1, &st, &e));
    cr_expect(strstr(e.msg, "cannot open"), "%s", e.msg);
    cr_expect_eq(rm_tree(dir), 0);
    free(w);
    model_free(m);
}

/* A resumed run reads the checkpoint once: train_resume_open's state is handed to the run
 * (train_run_cfg.resume_state), which neither opens resume again nor needs it to exist,
 * sequential and pipelined alike; the run takes the state's arrays (no second copy). */
Test(train_setup, resume_reads_the_file_once)
{
    plumb_err e = {{0}};
    model *m = parse(mlp12);
    dataset *d = data_synthetic(m, 64, 1, &e);
    cr_assert_not_null(d, "%s", e.msg);
    char *dir = make_tmpdir_named("setup-once"), path[300];
    snprintf(path, sizeof path, "%s/x.ckpt", dir);
    float *w = calloc((size_t)m->nparams, sizeof *w);
    cr_assert_not_null(w);
    ckpt c = {0, 2, w, NULL, NULL};
    for (int pipelined = 0; pipelined < 2; pipelined++) {
        cr_assert_eq(ckpt_save(path, m, &c, &e), 0, "%s", e.msg);
        ckpt st;
        char *p = train_resume_open(path, m, 0, &st, &e);
        cr_assert_not_null(p, "%s", e.msg);
        cr_assert_eq(unlink(path), 0); /* a second read would fail now */
        char *log = NULL;
        size_t loglen = 0;
        FILE *lf = open_memstream(&log, &loglen);
        cr_assert_not_null(lf);
        train_run_cfg cfg = {.bk = backend_cpu(), .m = m, .train = d, .epochs = 1, .steps = 4,
                             .seed = 1, .log = lf, .resume = p, .resume_state = &st,
                             .cfg = {.microbatch = 4, .microbatches = 2,
                                     .opt = train_default_opt(0)}};
        train_result res;
        int rc;
        if (pipelined) {
            train_pipeline tp;
            cr_assert_eq(train_from_plan(&cfg, NULL, "1f1b-flush", 2, 2, &tp, &e), 0, "%s",
                         e.msg);
            rc = train_run_pipeline(&cfg, tp.sched, tp.first, tp.last, 1, &res, NULL, &e);
            train_pipeline_free(&tp);
        } else {
            rc = train_run(&cfg, &res, &e);
        }
        cr_expect(!st.w, "the run took the state's weights (pipelined %d)", pipelined);
        cr_assert_eq(fclose(lf), 0);
        cr_expect_eq(rc, 0, "%s", e.msg);
        cr_expect(strstr(log, "at step 2") != NULL, "%s", log);
        free(log);
        ckpt_free(&st);
        free(p);
    }
    cr_expect_eq(rm_tree(dir), 0);
    free(w);
    data_free(d);
    model_free(m);
}
