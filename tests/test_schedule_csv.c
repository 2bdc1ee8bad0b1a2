/* test_schedule_csv.c: the PyTorch torch.distributed.pipelining text and CSV forms of the
 * action IR: action spellings, parsing, the exact CSV bytes (PyTorch 2.11's and 2.15's
 * compute_comms forms), round trips for every kind, reading the files PyTorch 2.11 and 2.15
 * wrote (tests/data/pytorch-csv, made by make.py there), and bad files. */
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

/* An action from its fields in schedule.h's old order (the struct's own order differs:
 * kind, stage and peer_stage share one word). */
#define ACTION(k, st, mb, v, pe, ps)                                                          \
    {.kind = (k), .stage = (st), .microbatch = (mb), .version = (v), .peer = (pe),             \
     .peer_stage = (ps)}

Test(schedule_text, action_spellings)
{
    struct {
        action a;
        const char *want;
    } cases[] = {
        {ACTION(ACT_F, 0, 3, 0, -1, -1), "0F3"}, {ACTION(ACT_B, 1, 2, 0, -1, -1), "1B2"},
        {ACTION(ACT_I, 2, 0, 0, -1, -1), "2I0"}, {ACTION(ACT_W, 2, 0, 0, -1, -1), "2W0"},
        {ACTION(ACT_SEND_F, 0, 3, -1, 1, 1), "0SEND_F3"},
        {ACTION(ACT_RECV_F, 1, 3, -1, 0, 0), "1RECV_F3"},
        {ACTION(ACT_SEND_B, 1, 2, -1, 0, 0), "1SEND_B2"},
        {ACTION(ACT_RECV_B, 0, 2, -1, 1, 1), "0RECV_B2"},
        {ACTION(ACT_ALLREDUCE, 0, -1, -1, -1, -1), "0REDUCE_GRAD"},
        {ACTION(ACT_STEP, 12, -1, 4, -1, -1), "12STEP"},
        {ACTION(ACT_F, 10, 123, 0, -1, -1), "10F123"},
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
                         "0STEP1", "99999999F1", "0F1 2", "0f3", "4096F0", "99999F1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(action_parse(bad[i], &a), -1, "\"%s\" accepted", bad[i]);
    cr_assert_eq(action_parse("1UNSHARD", &a), 1);
    cr_assert_eq(action_parse("1RESHARD", &a), 1);
    cr_assert_eq(action_parse(" 2B7 ", &a), 0);
    cr_assert_eq(a.stage, 2);
    cr_assert_eq(a.microbatch, 7);
}

Test(schedule_text, parses_pytorch_215_waits)
{
    action a;
    cr_assert_eq(action_parse("0WAIT_SEND_F3", &a), 2);
    cr_assert(a.kind == ACT_SEND_F && a.stage == 0 && a.microbatch == 3);
    cr_assert_eq(action_parse("12WAIT_SEND_B2", &a), 2);
    cr_assert(a.kind == ACT_SEND_B && a.stage == 12 && a.microbatch == 2);
    cr_assert_eq(action_parse("1WAIT_REDUCE_GRAD", &a), 2);
    cr_assert(a.kind == ACT_ALLREDUCE && a.stage == 1 && a.microbatch == -1);
    const char *bad[] = {"0WAIT_SEND_F", "0WAIT_REDUCE_GRAD1", "0WAIT3", "0WAIT_RECV_F1",
                         "WAIT_SEND_B1", "0WAIT_SEND_F1x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(action_parse(bad[i], &a), -1, "\"%s\" accepted", bad[i]);
}

Test(schedule_csv, exact_bytes_of_pytorch_form)
{
    schedule *s = gen(SCHED_1F1B_FLUSH, 2, 1, 2, 1, NULL);
    char *t = csv_text(s, SCHED_CSV_NO_WAITS); /* PyTorch 2.11 */
    cr_assert_str_eq(t, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
                        "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\r\n");
    free(t);
    /* PyTorch 2.15 (the default): a forward send's wait after the local backward of that
     * microbatch, backward sends' waits at the end of the row in send order */
    t = csv_text(s, 0);
    cr_assert_str_eq(t, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,"
                        "0WAIT_SEND_F1\r\n"
                        "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,"
                        "1WAIT_SEND_B1\r\n");
    free(t);
    t = csv_text(s, SCHED_CSV_COMPUTE_ONLY);
    cr_assert_str_eq(t, "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
    free(t);
    t = csv_text(s, SCHED_CSV_STEPS);
    cr_assert(strstr(t, "0RECV_B1,0B1,0WAIT_SEND_F1,0STEP\r\n"), "%s", t);
    free(t);
    schedule_free(s);
}

Test(schedule_csv, round_trip_every_kind, .init = setup, .fini = teardown)
{
    int reps[3] = {1, 2, 1};
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int form = 0; form < 6; form++) {
            int chunks = k == SCHED_INTERLEAVED ? 3 : sched_kind_chunks((sched_kind)k);
            int ranks = 3, m = 6, iters = 2;
            const int *r = (chunks == 1) ? reps : NULL;
            schedule *s = gen(k, ranks, chunks, m, iters, r);
            unsigned flags = form == 0   ? 0
                             : form == 1 ? SCHED_CSV_STEPS
                             : form == 2 ? SCHED_CSV_COMPUTE_ONLY
                             : form == 3 ? SCHED_CSV_STEPS | SCHED_CSV_COMPUTE_ONLY
                             : form == 4 ? SCHED_CSV_NO_WAITS
                                         : SCHED_CSV_NO_WAITS | SCHED_CSV_STEPS;
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
    cr_assert(strstr(e.msg, "none.csv: cannot open: No such file"), "%s", e.msg);
}

/* An order whose input the lowering waits for in vain: the lowering's timing (which waits
 * for another worker's input without asking again, core/schedule_lower.c) names the action
 * and why, as when it checked every action it stopped at. ZB-V on 2 ranks: rank 0 holds
 * stages 0 and 3, rank 1 stages 1 and 2. */
static schedule *read_zbv(const char *text, plumb_err *e)
{
    sched_spec sp = {SCHED_ZB_V, 0, 4, 2, 1, 1, NULL, NULL};
    return schedule_read_csv(write_file("lw.csv", text), &sp, e);
}

static void expect_lowering_error(const char *text, const char *needle)
{
    plumb_err e = {{0}};
    cr_assert_null(read_zbv(text, &e), "accepted %s", text);
    cr_assert(strstr(e.msg, needle), "got \"%s\", expected \"%s\"", e.msg, needle);
}

Test(schedule_csv, lowering_names_the_input_it_waits_for, .init = setup, .fini = teardown)
{
    plumb_err e = {{0}};
    schedule *s = read_zbv("0F0,3F0,3B0,0B0\r\n1F0,2F0,2B0,1B0\r\n", &e); /* the order */
    cr_assert(s, "%s", e.msg);
    schedule_free(s);
    /* rank 1 forwards stage 2 before stage 1, whose output it needs */
    expect_lowering_error("0F0,3F0,3B0,0B0\r\n2F0,1F0,2B0,1B0\r\n",
                          "worker 1 action 0 (2F0): its input (forward of stage 1) is computed "
                          "later on the same worker");
    /* the same for a backward, whose output gradient comes from stage 2 on its worker */
    expect_lowering_error("0F0,3F0,3B0,0B0\r\n1F0,2F0,1B0,2B0\r\n",
                          "worker 1 action 2 (1B0): its output gradient (backward of stage 2) "
                          "is computed later on the same worker");
    /* rank 0's stage 3 waits (other worker) while rank 1 never forwards stage 2 */
    expect_lowering_error("0F0,3F0,3B0,0B0\r\n1F0,1B0\r\n", "never computed");
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

Test(schedule_csv, bad_waits, .init = setup, .fini = teardown)
{
    /* plumb's 2.15 export of 1f1b-flush, 2 stages, 2 microbatches, broken one way each */
    const char *r1 = "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,"
                     "1WAIT_SEND_B1\r\n";
    const char *r0 = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,"
                     "0WAIT_SEND_F1";
    char t[512];
    snprintf(t, sizeof t, "%s\r\n%s", r0, r1);
    const char *ok = write_file("ok.csv", t);
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 2, 1, 2, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(ok, &sp, &e);
    cr_assert(s, "%s", e.msg);
    schedule_free(s);

    snprintf(t, sizeof t, "0F0,0WAIT_SEND_F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,"
             "0WAIT_SEND_F1\r\n%s", r1);
    expect_read_error(t, 2, "row 1, field 2: 0WAIT_SEND_F0 has no send before it on this rank");
    snprintf(t, sizeof t, "%s,0WAIT_SEND_F1\r\n%s", r0, r1);
    expect_read_error(t, 2, "row 1, field 11: 0WAIT_SEND_F1 waits a second time");
    snprintf(t, sizeof t, "%s\r\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,"
             "1WAIT_SEND_B0\r\n", r0);
    expect_read_error(t, 2, "row 2, field 8: 1SEND_B1 has no WAIT_SEND_B1 after it");
    snprintf(t, sizeof t, "%s,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\r\n"
             "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD\r\n", r0);
    expect_read_error(t, 2, "row 2, field 9: 1REDUCE_GRAD has no WAIT_REDUCE_GRAD after it");
    expect_read_error("0F0,0B0,0F1,0B1,0WAIT_REDUCE_GRAD\r\n", 1,
                      "row 1, field 5: 0WAIT_REDUCE_GRAD has no pending 0REDUCE_GRAD");
    expect_read_error("0F0,0B0,0F1,0B1,0REDUCE_GRAD,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\r\n", 1,
                      "row 1, field 6: 0REDUCE_GRAD while stage 0's REDUCE_GRAD has no "
                      "WAIT_REDUCE_GRAD yet");
    expect_read_error("0F0,(0F1;0WAIT_SEND_F0)OVERLAP_F_B,0B0,0B1\r\n", 1,
                      "row 1, field 2: expected an action like");
}

/* --- the files PyTorch wrote (tests/data/pytorch-csv/README.md says how) ---------------- */

#define PT_DIR "tests/data/pytorch-csv"

static const struct pt_case {
    const char *stem;      /* file name before .compute_only.csv / .compute_comms.csv */
    sched_kind kind;       /* the plumb kind that places its stages */
    int ranks, chunks, mb;
    int same_as_plumb;     /* 1 when plumb's generator of kind lays out the same order */
} pt_cases[] = {
    {"gpipe-p2-m4", SCHED_GPIPE, 2, 1, 4, 1},
    {"gpipe-p4-m8", SCHED_GPIPE, 4, 1, 8, 1},
    {"interleaved1f1b-p2-m4", SCHED_INTERLEAVED, 2, 2, 4, 1},
    {"interleaved1f1b-p4-m8", SCHED_INTERLEAVED, 4, 2, 8, 1},
    {"interleavedzb-p2-m4", SCHED_INTERLEAVED, 2, 2, 4, 0},
    {"interleavedzb-p4-m8", SCHED_INTERLEAVED, 4, 2, 8, 0},
    {"zbv-p2-m4", SCHED_ZB_V, 2, 2, 4, 1},
    {"zbv-p4-m8", SCHED_ZB_V, 4, 2, 8, 1},
    {"dualpipev-p2-m4", SCHED_ZB_V, 2, 2, 4, 0},
    {"dualpipev-p4-m8", SCHED_ZB_V, 4, 2, 8, 0},
};

static const char *pt_versions[] = {"2.11", "2.15"};

static schedule *pt_read(const struct pt_case *c, const char *version, const char *form)
{
    char path[256];
    snprintf(path, sizeof path, PT_DIR "/%s/%s.%s.csv", version, c->stem, form);
    sched_spec sp = {c->kind, 0, c->ranks * c->chunks, c->chunks, c->mb, 0, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->iterations, 1, "%s", path);
    return s;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int ch;
    while ((ch = fgetc(f)) != EOF) fputc(ch, m);
    fclose(f);
    fclose(m);
    return buf;
}

/* PyTorch's compute_comms file as plumb writes it back, derived from the text alone: FSDP's
 * UNSHARD/RESHARD dropped, (a;b)OVERLAP_F_B as a,b, each WAIT_REDUCE_GRAD moved right after
 * its REDUCE_GRAD (PyTorch's lowering may put a receive between them). */
static char *pt_normalize(const char *text)
{
    char *out = NULL, *work = strdup(text);
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    cr_assert(work && m);
    for (char *save = NULL, *row = strtok_r(work, "\r\n", &save); row;
         row = strtok_r(NULL, "\r\n", &save)) {
        char toks[512][32];
        int n = 0;
        for (char *s2 = NULL, *f = strtok_r(row, ",", &s2); f; f = strtok_r(NULL, ",", &s2)) {
            size_t l = strlen(f);
            if ((l > 7 && !strcmp(f + l - 7, "UNSHARD")) || (l > 7 && !strcmp(f + l - 7, "RESHARD")))
                continue;
            if (f[0] == '(') {
                char *close = strchr(f, ')');
                cr_assert(close && !strcmp(close + 1, "OVERLAP_F_B"), "%s", f);
                *close = '\0';
                for (char *s3 = NULL, *a = strtok_r(f + 1, ";", &s3); a;
                     a = strtok_r(NULL, ";", &s3)) {
                    cr_assert(n < 512);
                    snprintf(toks[n++], sizeof toks[0], "%s", a);
                }
                continue;
            }
            cr_assert(n < 512 && l < sizeof toks[0]);
            const char *wr = strstr(f, "WAIT_REDUCE_GRAD");
            int at = n;
            if (wr) { /* after the last "<stage>REDUCE_GRAD" */
                char want[32];
                snprintf(want, sizeof want, "%.*sREDUCE_GRAD", (int)(wr - f), f);
                for (int i = n - 1; i >= 0; i--)
                    if (!strcmp(toks[i], want)) {
                        at = i + 1;
                        break;
                    }
                memmove(toks[at + 1], toks[at], (size_t)(n - at) * sizeof toks[0]);
            }
            snprintf(toks[at], sizeof toks[0], "%s", f);
            n++;
        }
        for (int i = 0; i < n; i++) fprintf(m, "%s%s", i ? "," : "", toks[i]);
        fputs("\r\n", m);
    }
    fclose(m);
    free(work);
    return out;
}

Test(pytorch_files, compute_only_of_both_versions)
{
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof pt_cases / sizeof pt_cases[0]; i++) {
            const struct pt_case *c = &pt_cases[i];
            schedule *s = pt_read(c, pt_versions[v], "compute_only");
            plumb_err e = {{0}};
            cr_assert_eq(schedule_validate(s, &e), 0, "%s %s: %s", pt_versions[v], c->stem,
                         e.msg);
            cr_assert_eq(schedule_count(s, ACT_F), (long)c->ranks * c->chunks * c->mb);
            if (c->same_as_plumb) { /* PyTorch's order is plumb's generator's, transfers too */
                schedule *g = gen(c->kind, c->ranks, c->chunks, c->mb, 1, NULL);
                cr_assert(schedule_equal(s, g), "%s %s differs from plumb's %s",
                          pt_versions[v], c->stem, sched_kind_name(c->kind));
                schedule_free(g);
            }
            schedule_free(s);
        }
}

Test(pytorch_files, compute_comms_of_both_versions_written_back_alike, .init = setup,
     .fini = teardown)
{
    for (size_t v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof pt_cases / sizeof pt_cases[0]; i++) {
            const struct pt_case *c = &pt_cases[i];
            schedule *s = pt_read(c, pt_versions[v], "compute_comms");
            plumb_err e = {{0}};
            cr_assert_eq(schedule_validate_sem(s, SCHED_SEM_BUFFERED, &e), 0, "%s %s: %s",
                         pt_versions[v], c->stem, e.msg);
            /* one REDUCE_GRAD per stage, as PyTorch lowers it */
            cr_assert_eq(schedule_count(s, ACT_ALLREDUCE), (long)c->ranks * c->chunks);
            /* written back in the file's own version: PyTorch's bytes, sends, receives and
             * waits where PyTorch put them */
            char path[256];
            snprintf(path, sizeof path, PT_DIR "/%s/%s.compute_comms.csv", pt_versions[v],
                     c->stem);
            char *orig = slurp(path), *want = pt_normalize(orig);
            char *got = csv_text(s, v == 0 ? SCHED_CSV_NO_WAITS : 0);
            cr_assert_str_eq(got, want, "%s %s", pt_versions[v], c->stem);
            /* and that text reads back to the same IR */
            const char *p2 = write_file("back.csv", got);
            sched_spec sp = {c->kind, 0, c->ranks * c->chunks, c->chunks, c->mb, 0, NULL, NULL};
            schedule *b = schedule_read_csv(p2, &sp, &e);
            cr_assert(b, "%s", e.msg);
            cr_assert(schedule_equal(s, b));
            schedule_free(b);
            free(orig), free(want), free(got);
            schedule_free(s);
        }
}

Test(pytorch_files, pytorch_1f1b_pipeline_order_is_refused)
{
    /* Schedule1F1B's pipeline_order starts the last rank with F1 and ends it with F<m> (its
     * own _load_csv refuses it too: README.md); plumb names the first wrong action */
    for (size_t v = 0; v < 2; v++) {
        char path[256];
        snprintf(path, sizeof path, PT_DIR "/%s/1f1b-p4-m8.compute_only.csv", pt_versions[v]);
        sched_spec sp = {SCHED_1F1B_FLUSH, 0, 4, 1, 8, 0, NULL, NULL};
        plumb_err e = {{0}};
        schedule *s = schedule_read_csv(path, &sp, &e);
        cr_assert_null(s);
        cr_assert(strstr(e.msg, "1f1b-p4-m8.compute_only.csv"), "%s", e.msg);
        cr_assert(strstr(e.msg, "3B0"), "%s", e.msg);
        /* its other ranks are plumb's 1f1b-flush order (the file has no empty slots) */
        char *orig = slurp(path);
        schedule *g = gen(SCHED_1F1B_FLUSH, 4, 1, 8, 1, NULL);
        char *want = csv_text(g, SCHED_CSV_COMPUTE_ONLY);
        char *last = strstr(want, "\r\n3F0");
        cr_assert(last);
        last[2] = '\0';
        cr_assert(!strncmp(orig, want, strlen(want)), "%s\n%s", orig, want);
        cr_assert(!strncmp(orig + strlen(want), "3F1,", 4), "%s", orig);
        free(orig), free(want);
        schedule_free(g);
    }
}
