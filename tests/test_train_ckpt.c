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
#include <sys/wait.h>
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
    char *latest = ckpt_find_latest(dir, m, NULL, &e);
    cr_assert(latest, "%s", e.msg);
    cr_expect(strstr(latest, "ckpt-00000020.ckpt") != NULL, "%s", latest);
    free(latest);
    /* a truncated newest file is reported, not skipped: the message names it and the
     * previous intact one, which still loads */
    snprintf(path, sizeof path, "%s/ckpt-00000020.ckpt", dir);
    cr_assert_eq(truncate(path, 100), 0);
    cr_expect_null(ckpt_find_latest(dir, m, NULL, &e));
    cr_expect(strstr(e.msg, path) && strstr(e.msg, "truncated") &&
              strstr(e.msg, "the newest intact one is ckpt-00000015.ckpt"), "%s", e.msg);
    cr_expect(strchr(e.msg, '\n') == NULL);
    snprintf(path, sizeof path, "%s/ckpt-00000015.ckpt", dir);
    ckpt c;
    cr_assert_eq(ckpt_load(path, m, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.step, 15);
    cr_expect_eq(c.w[0], 15.0f);
    ckpt_free(&c);
    /* an empty folder: an error naming it */
    char *empty = make_tmpdir_named("ckpt-empty");
    cr_expect_null(ckpt_find_latest(empty, m, NULL, &e));
    cr_expect(strstr(e.msg, "found none") != NULL, "%s", e.msg);
    cr_expect_eq(rm_tree(dir), 0);
    cr_expect_eq(rm_tree(empty), 0);
    free(w);
    model_free(m);
}

/* The test model of `spec`. */
static model *spec_model(void)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", spec, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

/* Every kind of damage to a checkpoint (adam: weights, m and v) is refused by ckpt_load
 * with a line naming the file: each header field flipped, each tensor's byte flipped, a
 * NaN weight, truncation, an extra byte. ckpt_peek, which reads the header only, refuses
 * the header's damage and a wrong size alike, and passes a damaged tensor with the
 * header's kind and steps. Before the checksums, 6 of such files (a flipped weight byte, a
 * NaN weight, a flipped step count, ...) resumed silently. The same file undamaged loads
 * back exactly. */
Test(ckpt, every_corruption_is_refused)
{
    plumb_err e = {{0}};
    model *m = spec_model();
    size_t n = (size_t)m->nparams;
    char *dir = make_tmpdir_named("ckpt-hdr"), path[256];
    snprintf(path, sizeof path, "%s/x.ckpt", dir);
    float *w = calloc(3 * n, sizeof *w);
    for (size_t i = 0; i < 3 * n; i++) w[i] = 0.01f * (float)i - 1.0f;
    ckpt c = {2, 7, w, w + n, w + 2 * n}, back;
    long body = 64, wl = (long)(4 * n);
    const unsigned char nan_le[4] = {0x00, 0x00, 0xc0, 0x7f};
    static const struct {
        long at; /* < 0: from the end of the header plus -at - 1 tensors */
        const char *what, *want;
    } cases[] = {
        {0, "magic", "not a plumb checkpoint"},
        {8, "version", "not a plumb checkpoint"},
        {10, "version's high bytes", "not a plumb checkpoint"},
        {12, "optimizer kind", "header checksum"},
        {14, "optimizer kind's high bytes", "header checksum"},
        {16, "parameter count", "header checksum"},
        {24, "step count", "header checksum"},
        {31, "step count's top byte", "header checksum"},
        {32, "model fingerprint", "header checksum"},
        {40, "weights' checksum", "header checksum"},
        {44, "m's checksum", "header checksum"},
        {48, "v's checksum", "header checksum"},
        {52, "a reserved word", "header checksum"},
        {56, "the other reserved word", "header checksum"},
        {60, "header checksum", "header checksum"},
        {-1, "a weight byte", "weights checksum"},
        {-2, "a byte of m", "momentum (m) checksum"},
        {-3, "a byte of v", "second moment (v) checksum"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 3; i++) {
        cr_assert_eq(ckpt_save(path, m, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(ckpt_load(path, m, &back, &e), 0, "%s", e.msg);
        cr_assert(back.step == 7 && !memcmp(back.w, w, n * 4) && !memcmp(back.m, w + n, n * 4) &&
                  !memcmp(back.v, w + 2 * n, n * 4));
        ckpt_free(&back);
        const char *what, *want;
        FILE *f = fopen(path, "r+b");
        cr_assert(f);
        if (i < sizeof cases / sizeof cases[0]) {
            long at = cases[i].at >= 0 ? cases[i].at : body + (-cases[i].at - 1) * wl + 5;
            what = cases[i].what, want = cases[i].want;
            cr_assert_eq(fseek(f, at, SEEK_SET), 0);
            int b = fgetc(f);
            cr_assert_eq(fseek(f, at, SEEK_SET), 0);
            cr_assert_eq(fputc(b ^ 0x10, f), b ^ 0x10);
        } else if (i == sizeof cases / sizeof cases[0]) {
            what = "a NaN weight", want = "weights checksum";
            cr_assert_eq(fseek(f, body + 4 * 3, SEEK_SET), 0);
            cr_assert_eq(fwrite(nan_le, 1, 4, f), 4);
        } else if (i == sizeof cases / sizeof cases[0] + 1) {
            what = "truncation", want = "truncated";
            cr_assert_eq(ftruncate(fileno(f), body + 3 * wl - 1), 0);
        } else {
            what = "an extra byte", want = "(got more)";
            cr_assert_eq(fseek(f, 0, SEEK_END), 0);
            cr_assert_eq(fputc(0, f), 0);
        }
        cr_assert_eq(fclose(f), 0);
        int kind;
        long step;
        const int in_tensor = i >= 15 && i <= sizeof cases / sizeof cases[0];
        int pk = ckpt_peek(path, m, &kind, &step, &e);
        if (in_tensor)
            cr_expect(pk == 0 && kind == 2 && step == 7, "%s: peek reads the header: %s",
                      what, e.msg);
        else
            cr_expect(pk == -1 && strstr(e.msg, want) && strstr(e.msg, path),
                      "%s: accepted by peek (%s)", what, e.msg);
        cr_expect_eq(ckpt_load(path, m, &back, &e), -1, "%s: accepted by load", what);
        cr_expect(strstr(e.msg, want) && strstr(e.msg, path) && !strchr(e.msg, '\n'),
                  "%s: %s", what, e.msg);
    }
    /* a version 1 file (no checksums) is refused with a line that says so */
    unsigned char v1[40] = "PLUMBCK1\x01";
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(v1, 1, sizeof v1, f), sizeof v1);
    cr_assert_eq(fclose(f), 0);
    cr_expect_eq(ckpt_load(path, m, &back, &e), -1);
    cr_expect(strstr(e.msg, "checkpoint version 1 has no checksums; expected version 2"),
              "%s", e.msg);
    /* a non-finite value with a matching checksum: a diverged run's file */
    w[5] = INFINITY;
    cr_assert_eq(ckpt_save(path, m, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(ckpt_load(path, m, &back, &e), -1);
    cr_expect(strstr(e.msg, "weights[5]: expected a finite number (got inf)"), "%s", e.msg);
    cr_expect_eq(rm_tree(dir), 0);
    free(w);
    model_free(m);
}

/* A kill during an atomic write leaves "NAME.tmp.PID" behind; the next save into the
 * folder (or to the same file) removes those of dead PIDs, and nothing else. */
Test(ckpt, orphaned_temporary_files_are_removed)
{
    plumb_err e = {{0}};
    model *m = spec_model();
    pid_t dead = fork();
    cr_assert(dead >= 0);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    char *dir = make_tmpdir_named("ckpt-tmp"), p[6][320];
    snprintf(p[0], sizeof p[0], "%s/ckpt-00000030.ckpt.tmp.%d", dir, (int)dead); /* orphan */
    snprintf(p[1], sizeof p[1], "%s/ckpt-00000030.ckpt.tmp.%d", dir, (int)getppid()); /* live */
    snprintf(p[2], sizeof p[2], "%s/notes.txt.tmp.%d", dir, (int)dead);  /* not plumb's */
    snprintf(p[3], sizeof p[3], "%s/final.ckpt.tmp.%d", dir, (int)dead); /* --save's orphan */
    snprintf(p[4], sizeof p[4], "%s/ckpt-00000030.ckpt.tmp.x%d", dir, (int)dead); /* no pid */
    /* as files_write_atomic names them now: PID, then the write's index */
    snprintf(p[5], sizeof p[5], "%s/ckpt-00000031.ckpt.tmp.%d.0", dir, (int)dead); /* orphan */
    for (int i = 0; i < 6; i++) {
        FILE *f = fopen(p[i], "w");
        cr_assert(f);
        fclose(f);
    }
    float *w = calloc((size_t)m->nparams, sizeof *w);
    ckpt c = {0, 40, w, NULL, NULL};
    cr_assert_eq(ckpt_save_dir(dir, m, &c, 2, &e), 0, "%s", e.msg);
    cr_expect(access(p[0], F_OK) != 0, "the dead writer's temporary file is left");
    cr_expect(access(p[1], F_OK) == 0, "a live writer's temporary file was removed");
    cr_expect(access(p[2], F_OK) == 0, "a file not of plumb's pattern was removed");
    cr_expect(access(p[3], F_OK) == 0, "another file's temporary was removed by the folder");
    cr_expect(access(p[4], F_OK) == 0, "a name without a PID was removed");
    cr_expect(access(p[5], F_OK) != 0, "the dead writer's indexed temporary file is left");
    char fin[320];
    snprintf(fin, sizeof fin, "%s/final.ckpt", dir);
    cr_assert_eq(ckpt_save(fin, m, &c, &e), 0, "%s", e.msg);
    cr_expect(access(p[3], F_OK) != 0, "--save's orphan is left");
    cr_expect(access(p[2], F_OK) == 0);
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

/* The files a --checkpoint folder writes and prunes: "ckpt-STEP.ckpt" directly in it, by
 * any spelling of the folder; not another name there, nor that name elsewhere. */
Test(ckpt, dir_owns_its_checkpoint_names)
{
    char *dir = make_tmpdir_named("ckpt-owns"), p[320], q[320];
    snprintf(p, sizeof p, "%s/ckpt-00000009.ckpt", dir); /* need not exist */
    cr_expect_eq(ckpt_dir_owns(dir, p), 1);
    snprintf(q, sizeof q, "%s/./ckpt-00000001.ckpt", dir);
    cr_expect_eq(ckpt_dir_owns(dir, q), 1);
    snprintf(q, sizeof q, "%s/final.ckpt", dir);
    cr_expect_eq(ckpt_dir_owns(dir, q), 0);
    snprintf(q, sizeof q, "%s/ckpt-00000001.ckpt.tmp.1", dir);
    cr_expect_eq(ckpt_dir_owns(dir, q), 0);
    cr_expect_eq(ckpt_dir_owns("/", p), 0, "another folder");
    snprintf(q, sizeof q, "%s/nope", dir);
    cr_expect_eq(ckpt_dir_owns(q, p), 0, "a folder that does not exist");
    cr_expect_eq(rm_tree(dir), 0);
}
