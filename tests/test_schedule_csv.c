/* test_schedule_csv.c: the PyTorch torch.distributed.pipelining text and CSV forms of the
 * action IR: action spellings, parsing, the exact CSV bytes, round trips for every kind,
 * reading PyTorch's compute_only and compute_comms files, and bad files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"
#include "tests/tmpdir.h"

static char *tmpdir;

static void setup(void)
{
    tmpdir = make_tmpdir_named("sched-csv");
}

static void teardown(void)
{
    cr_assert_eq(rm_tree(tmpdir), 0);
}

static const char *write_file(const char *name, const char *text)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static char *csv_text(const schedule *s, unsigned flags)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(schedule_write_csv_flags(s, f, flags), 0);
    fclose(f);
    return buf;
}

static schedule *gen(sched_kind k, int ranks, int chunks, int m, int iters, const int *reps)
{
    plumb_err e = {{0}};
    sched_spec sp = {k, 0, ranks * chunks, chunks, m, iters, reps, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "%s", e.msg);
    return s;
}

Test(schedule_text, action_spellings)
{
    struct {
        action a;
        const char *want;
    } cases[] = {
        {{ACT_F, 0, 3, 0, -1, -1}, "0F3"},           {{ACT_B, 1, 2, 0, -1, -1}, "1B2"},
        {{ACT_I, 2, 0, 0, -1, -1}, "2I0"},           {{ACT_W, 2, 0, 0, -1, -1}, "2W0"},
        {{ACT_SEND_F, 0, 3, -1, 1, 1}, "0SEND_F3"},  {{ACT_RECV_F, 1, 3, -1, 0, 0}, "1RECV_F3"},
        {{ACT_SEND_B, 1, 2, -1, 0, 0}, "1SEND_B2"},  {{ACT_RECV_B, 0, 2, -1, 1, 1}, "0RECV_B2"},
        {{ACT_ALLREDUCE, 0, -1, -1, -1, -1}, "0REDUCE_GRAD"},
        {{ACT_STEP, 12, -1, 4, -1, -1}, "12STEP"},   {{ACT_F, 10, 123, 0, -1, -1}, "10F123"},
    };
    char buf[48];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_str_eq(action_format(&cases[i].a, buf, sizeof buf), cases[i].want);
        action p;
        cr_assert_eq(action_parse(cases[i].want, &p), 0, "%s", cases[i].want);
        cr_assert_eq(p.kind, cases[i].a.kind);
        cr_assert_eq(p.stage, cases[i].a.stage);
        cr_assert_eq(p.microbatch, cases[i].a.microbatch);
    }
    cr_assert_str_eq(act_kind_name(ACT_ALLREDUCE), "REDUCE_GRAD");
}

Test(schedule_text, parse_rejects_and_ignores)
{
    action a;
    const char *bad[] = {"", "F3", "0X3", "0F", "0F3x", "0REDUCE_GRAD3", "-1F3", "0SEND_F",
                         "0STEP1", "99999999F1", "0F1 2", "0f3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(action_parse(bad[i], &a), -1, "\"%s\" accepted", bad[i]);
    cr_assert_eq(action_parse("1UNSHARD", &a), 1);
    cr_assert_eq(action_parse("1RESHARD", &a), 1);
    cr_assert_eq(action_parse(" 2B7 ", &a), 0);
    cr_assert_eq(a.stage, 2);
    cr_assert_eq(a.microbatch, 7);
}

Test(schedule_csv, exact_bytes_of_pytorch_form)
{
    schedule *s = gen(SCHED_1F1B_FLUSH, 2, 1, 2, 1, NULL);
    char *t = csv_text(s, 0);
    cr_assert_str_eq(t, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
                        "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\r\n");
    free(t);
    t = csv_text(s, SCHED_CSV_COMPUTE_ONLY);
    cr_assert_str_eq(t, "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
    free(t);
    t = csv_text(s, SCHED_CSV_STEPS);
    cr_assert(strstr(t, "0RECV_B1,0B1,0STEP\r\n"), "%s", t);
    free(t);
    schedule_free(s);
}

Test(schedule_csv, round_trip_every_kind, .init = setup, .fini = teardown)
{
    int reps[3] = {1, 2, 1};
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int form = 0; form < 4; form++) {
            int chunks = k == SCHED_INTERLEAVED ? 3 : sched_kind_chunks((sched_kind)k);
            int ranks = 3, m = 6, iters = 2;
            const int *r = (chunks == 1) ? reps : NULL;
            schedule *s = gen(k, ranks, chunks, m, iters, r);
            unsigned flags = form == 0   ? 0
                             : form == 1 ? SCHED_CSV_STEPS
                             : form == 2 ? SCHED_CSV_COMPUTE_ONLY
                                         : SCHED_CSV_STEPS | SCHED_CSV_COMPUTE_ONLY;
            char *t = csv_text(s, flags);
            const char *path = write_file("rt.csv", t);
            sched_spec sp = {k, 0, ranks * chunks, chunks, m, 0, r, NULL};
            plumb_err e = {{0}};
            schedule *b = schedule_read_csv(path, &sp, &e);
            cr_assert(b, "kind %d form %d: %s", k, form, e.msg);
            cr_assert_eq(b->iterations, iters);
            cr_assert(schedule_equal(s, b), "kind %d form %d: the round trip differs", k, form);
            cr_assert_eq(schedule_validate(b, &e), 0, "%s", e.msg);
            free(t);
            schedule_free(s);
            schedule_free(b);
        }
}

Test(schedule_csv, reads_pytorch_compute_only_with_empty_slots, .init = setup,
     .fini = teardown)
{
    /* what Schedule1F1B's pipeline_order looks like for 2 ranks and 2 microbatches, with
     * None slots written as empty fields */
    const char *path = write_file("co.csv", "0F0,0F1,,0B0,,0B1\r\n,1F0,1B0,1F1,1B1\r\n");
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 2, 1, 2, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    cr_assert_eq(schedule_count(s, ACT_SEND_F), 2);
    cr_assert_eq(schedule_count(s, ACT_RECV_B), 2);
    cr_assert_eq(schedule_count(s, ACT_STEP), 2);
    schedule_free(s);
}

Test(schedule_csv, reads_pytorch_compute_comms_with_reduce_grad, .init = setup,
     .fini = teardown)
{
    const char *path = write_file("cc.csv",
                                  "0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD\n"
                                  "1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD\n");
    sched_spec sp = {SCHED_GPIPE, 0, 2, 1, 1, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    cr_assert_eq(s->acts[0][1].peer, 1);
    cr_assert_eq(s->acts[0][1].peer_stage, 1);
    /* the step follows the all-reduce */
    cr_assert_eq(s->acts[1][4].kind, ACT_ALLREDUCE);
    cr_assert_eq(s->acts[1][5].kind, ACT_STEP);
    cr_assert_eq(s->acts[1][5].version, 1);
    schedule_free(s);
}

Test(schedule_csv, reads_overlap_and_fsdp_actions, .init = setup, .fini = teardown)
{
    const char *path = write_file("ov.csv", "0UNSHARD,0F0,(0F1;0B0)OVERLAP_F_B,0B1,0RESHARD\r\n");
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 1, 1, 2, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert(s, "%s", e.msg);
    char t[48];
    cr_assert_str_eq(action_format(&s->acts[0][1], t, sizeof t), "0F1");
    cr_assert_str_eq(action_format(&s->acts[0][2], t, sizeof t), "0B0");
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    schedule_free(s);
}

static void expect_read_error(const char *text, int stages, const char *needle)
{
    const char *path = write_file("bad.csv", text);
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, stages, 1, 2, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert_null(s, "accepted %s", text);
    cr_assert(strstr(e.msg, needle), "got \"%s\", expected \"%s\"", e.msg, needle);
    cr_assert(strstr(e.msg, "bad.csv"), "%s", e.msg);
}

Test(schedule_csv, bad_files, .init = setup, .fini = teardown)
{
    expect_read_error("0F0,0F1,0Q0\r\n1F0\r\n", 2,
                      "row 1, field 3: expected an action like 0F3");
    expect_read_error("0F0,0F1,0B0,0B1\r\n1F0,0B0\r\n", 2, "row 2, field 2: stage 0 is not "
                      "placed on rank 1");
    expect_read_error("0F0,0F1,0B0,0B1\r\n", 2, "expected 2 rows, one per rank");
    expect_read_error("0F0,0F1,0B1,0B0\r\n1F0,1F1,1B0,1B1\r\n1F0\r\n", 2, "expected 2 rows");
    expect_read_error("0F0,0B0,0F1,0B2\r\n", 1, "(0B2): backward before its forward");
    /* a compute order that cannot run: rank 0 waits for a backward rank 1 gives late */
    expect_read_error("0F0,0B0,0F1,0B1\r\n1F1,1F0,1B0,1B1\r\n", 2, "cannot run");
    plumb_err e = {{0}};
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 1, 1, 2, 0, NULL, NULL};
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.csv", tmpdir);
    cr_assert_null(schedule_read_csv(missing, &sp, &e));
    cr_assert(strstr(e.msg, "none.csv: cannot read"), "%s", e.msg);
}

Test(schedule_csv, iterations_bound, .init = setup, .fini = teardown)
{
    const char *path = write_file("it.csv", "0F0,0B0,0F1,0B1,0F2,0B2\r\n");
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 1, 1, 2, 1, NULL, NULL};
    plumb_err e = {{0}};
    cr_assert_null(schedule_read_csv(path, &sp, &e));
    cr_assert(strstr(e.msg, "microbatch 2 is beyond 2 microbatches x 1 iterations"), "%s", e.msg);
    sp.iterations = 0; /* derived: 2 iterations, the second half-empty */
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->iterations, 2);
    cr_assert_eq(schedule_validate(s, &e), -1);
    cr_assert(strstr(e.msg, "microbatch 3: forward missing"), "%s", e.msg);
    schedule_free(s);
}
