/* test_train_ckpt.c: nothing lost. Checkpoint folders keep the newest files and skip broken
 * ones; PLUMB_FAULT specs parse; a pipelined run cut into segments (each starting from the
 * previous one's weights, optimizer state and iteration count) ends with exactly the
 * weights of one whole run for a synchronous schedule, with every optimizer; an injected
 * worker failure ends the run with its error. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/runtime.h"
#include "exec/train.h"
#include "tests/batches.h"
#include "tests/tmpdir.h"

static const char *spec =
    "{\"format\":\"plumb-model/1\",\"input\":[12],\"classes\":4,\"seed\":3,\"layers\":["
    "{\"type\":\"linear\",\"out\":16},{\"type\":\"relu\"},{\"type\":\"linear\",\"out\":8},"
    "{\"type\":\"gelu\"},{\"type\":\"linear\",\"out\":4},{\"type\":\"softmax_cross_entropy\"}]}";
#define MB 4

static int batch(void *user, int g, float *x, int32_t *y, plumb_err *err)
{
    (void)err;
    gather_in_order(user, MB, g, x, y);
    return 0;
}

Test(ckpt, folder_keeps_newest_and_finds_latest_valid)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    cr_assert(m, "%s", e.msg);
    char *dir = make_tmpdir_named("ckpt"), path[256];
    float *w = calloc((size_t)m->nparams, sizeof *w);
    for (long st = 5; st <= 20; st += 5) {
        w[0] = (float)st;
        ckpt c = {0, st, w, NULL, NULL};
        cr_assert_eq(ckpt_save_dir(dir, m, &c, 2, &e), 0, "%s", e.msg);
    }
    snprintf(path, sizeof path, "%s/ckpt-00000005.ckpt", dir);
    cr_expect(access(path, F_OK) != 0, "older checkpoints removed");
    snprintf(path, sizeof path, "%s/ckpt-00000015.ckpt", dir);
    cr_expect(access(path, F_OK) == 0, "the 2 newest kept");
    /* a truncated newest file is skipped: the previous one is found */
    snprintf(path, sizeof path, "%s/ckpt-00000020.ckpt", dir);
    cr_assert_eq(truncate(path, 100), 0);
    char *latest = ckpt_find_latest(dir, m, &e);
    cr_assert(latest, "%s", e.msg);
    cr_expect(strstr(latest, "ckpt-00000015.ckpt") != NULL, "%s", latest);
    ckpt c;
    cr_assert_eq(ckpt_load(latest, m, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.step, 15);
    cr_expect_eq(c.w[0], 15.0f);
    ckpt_free(&c);
    free(latest);
    /* an empty folder: an error naming it */
    char *empty = make_tmpdir_named("ckpt-empty");
    cr_expect_null(ckpt_find_latest(empty, m, &e));
    cr_expect(strstr(e.msg, "found none") != NULL, "%s", e.msg);
    cr_expect_eq(rm_tree(dir), 0);
    cr_expect_eq(rm_tree(empty), 0);
    free(w);
    model_free(m);
}

/* Sets `n` bytes of path at offset `at` to `val`. */
static void patch(const char *path, long at, const unsigned char *val, size_t n)
{
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    cr_assert_eq(fseek(f, at, SEEK_SET), 0);
    cr_assert_eq(fwrite(val, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* A header whose reserved bytes are set, or whose step count does not fit a long, is
 * refused with a message (both were read silently before the checkpoint fuzzer). */
Test(ckpt, corrupt_headers_are_refused)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    cr_assert(m, "%s", e.msg);
    char *dir = make_tmpdir_named("ckpt-hdr"), path[256];
    snprintf(path, sizeof path, "%s/x.ckpt", dir);
    float *w = calloc((size_t)m->nparams, sizeof *w);
    ckpt c = {0, 7, w, NULL, NULL}, back;
    static const struct {
        long at;
        unsigned char val[8];
        size_t n;
        const char *want;
    } cases[] = {
        {10, {1}, 1, "not a plumb checkpoint"},
        {14, {1}, 1, "optimizer kind: expected a 32-bit 0, 1 or 2"},
        {24, {0, 0, 0, 0, 0, 0, 0, 0x80}, 8, "steps: expected at most"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(ckpt_save(path, m, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(ckpt_load(path, m, &back, &e), 0, "%s", e.msg);
        ckpt_free(&back);
        patch(path, cases[i].at, cases[i].val, cases[i].n);
        int kind;
        long step;
        cr_expect_eq(ckpt_peek(path, m, &kind, &step, &e), -1, "case %zu", i);
        cr_expect_eq(ckpt_load(path, m, &back, &e), -1, "case %zu", i);
        cr_expect(strstr(e.msg, cases[i].want) && strstr(e.msg, path), "case %zu: %s", i,
                  e.msg);
    }
    cr_expect_eq(rm_tree(dir), 0);
    free(w);
    model_free(m);
}

Test(fault, spec_parsing)
{
    plumb_err e = {{0}};
    rt_fault f;
    cr_expect_eq(rt_fault_parse(NULL, &f, &e), 0);
    cr_expect_eq(f.worker, -1);
    cr_expect_eq(rt_fault_parse("worker:2:step:7", &f, &e), 0);
    cr_expect(f.worker == 2 && f.step == 7 && f.mode == RT_FAULT_ERROR);
    cr_expect_eq(rt_fault_parse("worker:0:step:1:kill", &f, &e), 0);
    cr_expect(f.worker == 0 && f.step == 1 && f.mode == RT_FAULT_KILL);
    cr_expect_eq(rt_fault_parse("worker:1:step:2:stall", &f, &e), 0);
    cr_expect(f.worker == 1 && f.step == 2 && f.mode == RT_FAULT_STALL);
    const char *bad[] = {"worker:1", "worker:-1:step:3", "worker:1:step:0", "worker:1:step:3:x",
                         "step:3", "worker:1:step:3:killer"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_eq(rt_fault_parse(bad[i], &f, &e), -1, "%s accepted", bad[i]);
        cr_expect(strstr(e.msg, "PLUMB_FAULT") != NULL, "%s", e.msg);
    }
}

/* One run of `iters` gpipe iterations on 3 stages from the given state (NULL: fresh). */
static int run(const model *m, const dataset *d, int kind, int iters, long start,
               const float *w, const float *mo, const float *v, rt_fault fault, rt_result *r,
               plumb_err *e)
{
    sched_spec sp = {SCHED_1F1B_FLUSH, 3, 3, 1, 4, iters, NULL, NULL};
    schedule *s = schedule_generate(&sp, e);
    cr_assert(s, "%s", e->msg);
    int first[] = {0, 2, 4}, last[] = {1, 3, 5};
    rt_cfg cfg = {.bk = backend_cpu(), .m = m, .sched = s, .stage_first = first,
                  .stage_last = last, .microbatch = MB, .opt = train_default_opt(kind),
                  .batch = batch, .batch_user = (void *)d, .timeout_s = 20,
                  .init_params = w, .init_m = mo, .init_v = v, .start_iteration = start,
                  .want_state = 1, .fault = fault};
    int rc = runtime_run(&cfg, r, e);
    schedule_free(s);
    return rc;
}

static void segments_case(int kind)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    dataset *d = data_synthetic(m, 512, 2, &e);
    cr_assert(m && d, "%s", e.msg);
    rt_fault none = {-1, 0, 0};
    rt_result whole, a, b;
    cr_assert_eq(run(m, d, kind, 5, 0, NULL, NULL, NULL, none, &whole, &e), 0, "%s", e.msg);
    cr_assert_eq(run(m, d, kind, 2, 0, NULL, NULL, NULL, none, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(run(m, d, kind, 3, 2, a.params, a.opt_m, a.opt_v, none, &b, &e), 0, "%s",
                 e.msg);
    cr_expect_eq(memcmp(whole.params, b.params, (size_t)m->nparams * sizeof(float)), 0,
                 "optimizer %d: 2 + 3 iterations differ from 5", kind);
    if (kind != BK_SGD)
        cr_expect_eq(memcmp(whole.opt_m, b.opt_m, (size_t)m->nparams * sizeof(float)), 0,
                     "optimizer %d: state differs", kind);
    cr_expect(fabs(whole.loss[4] - b.loss[2]) < 1e-12, "the same losses");
    rt_result_free(&whole);
    rt_result_free(&a);
    rt_result_free(&b);
    data_free(d);
    model_free(m);
}

Test(segments, sgd_equals_whole_run) { segments_case(BK_SGD); }
Test(segments, momentum_equals_whole_run) { segments_case(BK_MOMENTUM); }
Test(segments, adam_equals_whole_run) { segments_case(BK_ADAM); }

Test(fault, injected_worker_failure_ends_the_run)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    dataset *d = data_synthetic(m, 512, 2, &e);
    cr_assert(m && d, "%s", e.msg);
    rt_fault f = {1, 3, 0};
    rt_result r;
    cr_expect_eq(run(m, d, BK_SGD, 5, 0, NULL, NULL, NULL, f, &r, &e), -1);
    cr_expect(strstr(e.msg, "worker 1: injected fault at step 3") != NULL, "%s", e.msg);
    /* counted in absolute steps: a run resumed past step 3 is not affected */
    cr_expect_eq(run(m, d, BK_SGD, 2, 3, NULL, NULL, NULL, f, &r, &e), 0, "%s", e.msg);
    rt_result_free(&r);
    data_free(d);
    model_free(m);
}
