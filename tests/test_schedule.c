/* test_schedule.c: the schedule generators and the validator: every generator's output
 * validates over a grid of shapes, the theory of each schedule holds (in-flight activations
 * and weight versions per stage), and each class of broken IR is caught with its message. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/schedule.h"
#include "core/schedule_impl.h"
#include "core/schedule_traits.h"

static schedule *gen(sched_kind k, int ranks, int chunks, int m, int iters, const int *reps)
{
    plumb_err e = {{0}};
    sched_spec sp = {k, 0, ranks * chunks, chunks, m, iters, reps, NULL};
    schedule *s = schedule_generate(&sp, &e);
    cr_assert(s, "generate %d p=%d v=%d m=%d: %s", k, ranks, chunks, m, e.msg);
    return s;
}

/* Generates spec (NULL when rejected, with the reason in e). */
static schedule *try_gen(sched_kind k, int ranks, int chunks, int m, int iters, const int *reps,
                         plumb_err *e)
{
    sched_spec sp = {k, 0, ranks * chunks, chunks, m, iters, reps, NULL};
    return schedule_generate(&sp, e);
}

/* Kind k's schedule on p ranks (its own chunks a rank) of m microbatches and iters
 * iterations, its stages replicated {2, 1, 3, 1} when replicated and the kind is not
 * chunked; NULL for a shape the kind does not take. */
static schedule *gen_shape(int k, int p, int m, int iters, int replicated)
{
    static const int reps[4] = {2, 1, 3, 1};
    plumb_err e = {{0}};
    return try_gen(k, p, sched_kind_chunks((sched_kind)k), m, iters,
                   replicated && !sched_kind_chunked((sched_kind)k) ? reps : NULL, &e);
}

Test(schedule_grid, every_generator_validates)
{
    /* replica patterns over up to 8 stages; -1 = unreplicated */
    static const int pats[3][8] = {
        {1, 2, 1, 1, 1, 1, 1, 1}, {2, 1, 1, 3, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 2}};
    long built = 0;
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 16; m++)
                for (int v = 1; v <= 3; v++)
                    for (int pi = -1; pi < 3; pi++) {
                        const sched_traits *tr = sched_traits_of((sched_kind)k);
                        int chunked = tr->chunks_max > 1;
                        if (v < tr->chunks_min || v > tr->chunks_max) continue;
                        if (chunked && pi >= 0) continue;
                        const int *reps = pi >= 0 ? pats[pi] : NULL;
                        plumb_err e = {{0}};
                        int iters = 1 + (m + p) % 2;
                        schedule *s = try_gen(k, p, v, m, iters, reps, &e);
                        if (!s) {
                            /* the only rejections: async kinds whose microbatches do not
                             * split over a stage's replicas, and 2bw below its minimum */
                            cr_assert(tr->mb_per_replica, "kind %d p=%d m=%d v=%d pat %d rejected: %s", k, p,
                                      m, v, pi, e.msg);
                            cr_assert(strstr(e.msg, "microbatches"), "%s", e.msg);
                            continue;
                        }
                        cr_assert_eq(schedule_validate(s, &e), 0,
                                     "kind %d p=%d m=%d v=%d pat %d: %s", k, p, m, v, pi, e.msg);
                        cr_assert_eq(schedule_validate_sem(s, SCHED_SEM_BUFFERED, &e), 0, "%s",
                                     e.msg);
                        long T = (long)m * iters;
                        cr_assert_eq(schedule_count(s, ACT_F), T * s->nstages);
                        cr_assert_eq(schedule_count(s, ACT_B) + schedule_count(s, ACT_I),
                                     T * s->nstages);
                        /* what the lowering tells the cost model of the I's */
                        cr_assert_eq(s->backward_split, schedule_count(s, ACT_I)
                                     ? SCHED_SPLIT_YES : SCHED_SPLIT_NO, "kind %d", k);
                        for (int st = 0; st < s->nstages; st++)
                            if (s->replicas[st] > 1) cr_assert(schedule_count(s, ACT_ALLREDUCE));
                        built++;
                        schedule_free(s);
                    }
    cr_assert_gt(built, 2000, "built %ld", built);
}

Test(schedule_grid, interleaved_any_microbatches)
{
    for (int p = 2; p <= 8; p++)
        for (int m = 1; m <= 40; m++)
            for (int v = 2; v <= 4; v++) {
                schedule *s = gen(SCHED_INTERLEAVED, p, v, m, 2, NULL);
                plumb_err e = {{0}};
                cr_assert_eq(schedule_validate(s, &e), 0, "p=%d m=%d v=%d: %s", p, m, v, e.msg);
                schedule_free(s);
            }
}

Test(schedule_grid, placement_and_fields)
{
    int reps[3] = {1, 2, 1};
    schedule *s = gen(SCHED_1F1B_FLUSH, 3, 1, 4, 1, reps);
    cr_assert_eq(s->nworkers, 4);
    cr_assert_eq(schedule_worker_of(s, 1, 0), 1);
    cr_assert_eq(schedule_worker_of(s, 1, 3), 2);
    cr_assert_eq(schedule_worker_of(s, 2, 3), 3);
    /* microbatch 3 goes 0 -> replica 1 (worker 2) -> 3 */
    int found = 0;
    for (int i = 0; i < s->len[0]; i++) {
        action *a = &s->acts[0][i];
        if (a->kind == ACT_SEND_F && a->microbatch == 3) {
            cr_assert_eq(a->peer, 2);
            cr_assert_eq(a->peer_stage, 1);
            found = 1;
        }
    }
    cr_assert(found);
    schedule_free(s);
    /* zb-v: V placement, no transfer between the two stages at the bottom of the V */
    s = gen(SCHED_ZB_V, 4, 2, 8, 1, NULL);
    cr_assert_eq(s->nworkers, 4);
    cr_assert_eq(s->stage_workers[s->stage_first[3]], 3);
    cr_assert_eq(s->stage_workers[s->stage_first[4]], 3);
    cr_assert_eq(s->stage_workers[s->stage_first[7]], 0);
    for (int w = 0; w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++)
            if (s->acts[w][i].kind == ACT_SEND_F) cr_assert_neq(s->acts[w][i].stage, 3);
    schedule_free(s);
}

Test(schedule_grid, bad_specs_rejected)
{
    plumb_err e = {{0}};
    cr_assert_null(try_gen(SCHED_ZB_V, 4, 3, 8, 1, NULL, &e));
    cr_assert(strstr(e.msg, "chunks"), "%s", e.msg);
    cr_assert_null(try_gen(SCHED_GPIPE, 4, 2, 8, 1, NULL, &e));
    cr_assert(strstr(e.msg, "chunks"), "%s", e.msg);
    cr_assert_null(try_gen(SCHED_1F1B_FLUSH, 4, 1, 0, 1, NULL, &e));
    cr_assert(strstr(e.msg, "microbatches"), "%s", e.msg);
    cr_assert_null(try_gen(SCHED_2BW, 4, 1, 2, 1, NULL, &e));
    cr_assert(strstr(e.msg, "2bw"), "%s", e.msg);
    int reps[2] = {2, 1};
    cr_assert_null(try_gen(SCHED_PIPEDREAM, 2, 1, 3, 1, reps, &e));
    cr_assert(strstr(e.msg, "multiple of 2"), "%s", e.msg);
    int zero[2] = {1, 0};
    cr_assert_null(try_gen(SCHED_GPIPE, 2, 1, 3, 1, zero, &e));
    cr_assert(strstr(e.msg, "replicas"), "%s", e.msg);
    int shared[2] = {0, 0};
    sched_spec sp = {SCHED_GPIPE, 0, 2, 1, 4, 1, NULL, shared};
    cr_assert_null(schedule_generate(&sp, &e));
    cr_assert(strstr(e.msg, "both on worker 0"), "%s", e.msg);
}

/* No fixed limit on a schedule's size, only the memory it needs: 4 x 300000 x 1 (above the
 * 1000000 stage-microbatch passes once refused) generates within a 1 GiB data limit, and
 * 4 x 400000 x 1 (about 1.1 GiB: 6 actions per pass at SCHED_BYTES_PER_ACTION, plus one
 * all-reduce-or-step pair per stage) is refused with its size and estimate. Criterion runs
 * each test in its own process, so the limit stays here. */
Test(schedule_grid, size_limited_by_memory_only)
{
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("AddressSanitizer cannot map its shadow memory under a 1 GiB data limit");
#endif
    struct rlimit rl = {1024L * 1024 * 1024, 1024L * 1024 * 1024};
    cr_assert_eq(setrlimit(RLIMIT_DATA, &rl), 0);
    plumb_err e = {{0}};
    sched_spec big = {SCHED_1F1B_FLUSH, 0, 4, 1, 400000, 1, NULL, NULL};
    cr_expect_float_eq(schedule_bytes_estimate(&big), (6.0 * 4 * 400000 + 8) * 128, 1);
    cr_assert_null(schedule_generate(&big, &e));
    cr_expect(strstr(e.msg, "microbatches: stages x microbatches x iterations = 4 x 400000 x 1 "
                            "needs about 1.1 GiB to simulate (about 9600008 actions at 128 "
                            "bytes each), above the 1.0 GiB this process may use"), "%s", e.msg);
    schedule *s = gen(SCHED_1F1B_FLUSH, 4, 1, 300000, 1, NULL);
    cr_expect_eq(schedule_count(s, ACT_F), 4L * 300000);
    schedule_free(s);
}

/* --- theory ---------------------------------------------------------------------------- */

static void inflight(const schedule *s, int *act, int *ver)
{
    plumb_err e = {{0}};
    cr_assert_eq(schedule_inflight(s, act, ver, &e), 0, "%s", e.msg);
}

Test(schedule_theory, one_f_one_b_flush_holds_p_minus_s)
{
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 12; m++) {
            schedule *s = gen(SCHED_1F1B_FLUSH, p, 1, m, 2, NULL);
            int act[8], ver[8];
            inflight(s, act, ver);
            for (int st = 0; st < p; st++) {
                int want = p - st < m ? p - st : m;
                cr_assert_eq(act[st], want, "p=%d m=%d stage %d: %d in flight, want %d", p, m,
                             st, act[st], want);
                cr_assert_eq(ver[st], 1);
            }
            schedule_free(s);
        }
}

Test(schedule_theory, gpipe_holds_all_microbatches)
{
    for (int p = 1; p <= 6; p++)
        for (int m = 1; m <= 12; m++) {
            schedule *s = gen(SCHED_GPIPE, p, 1, m, 2, NULL);
            int act[8], ver[8];
            inflight(s, act, ver);
            for (int st = 0; st < p; st++) {
                cr_assert_eq(act[st], m);
                cr_assert_eq(ver[st], 1);
            }
            schedule_free(s);
        }
}

Test(schedule_theory, pipedream_keeps_p_minus_s_versions)
{
    for (int p = 1; p <= 8; p++) {
        schedule *s = gen(SCHED_PIPEDREAM, p, 1, 16, 2, NULL);
        int act[8], ver[8];
        inflight(s, act, ver);
        for (int st = 0; st < p; st++) {
            cr_assert_eq(ver[st], p - st, "p=%d stage %d: %d versions", p, st, ver[st]);
            cr_assert_eq(act[st], p - st);
        }
        /* each microbatch is a minibatch: one step per backward at every stage */
        cr_assert_eq(schedule_count(s, ACT_STEP), (long)p * 32);
        schedule_free(s);
    }
}

Test(schedule_theory, pipedream_rr_input_stage_noam)
{
    /* 1F1B-RR: stage 0 on 2 replicas in front of 3 single stages: NOAM = ceil(5 / 2) = 3 */
    int reps[4] = {2, 1, 1, 1};
    schedule *s = gen(SCHED_PIPEDREAM, 4, 1, 16, 1, reps);
    int act[4], ver[4];
    inflight(s, act, ver);
    cr_assert_eq(act[0], 3);
    cr_assert_eq(act[1], 3);
    cr_assert_eq(act[3], 1);
    /* microbatch m at stage 0 runs on replica m % 2 */
    for (int i = 0; i < s->len[1]; i++)
        if (s->acts[1][i].kind == ACT_F) cr_assert_eq(s->acts[1][i].microbatch % 2, 1);
    /* the replicas all-reduce before each step */
    cr_assert_eq(schedule_count(s, ACT_ALLREDUCE), 16);
    schedule_free(s);
}

/* sched_inflight_1f1b, the count the generator lays out and plan_sync_replicas_check
 * prices, is what the IR holds: pipedream's activations in flight per replica of each
 * stage over replica patterns of up to 4 stages; out of range: -1. */
Test(schedule_theory, inflight_1f1b_is_the_irs)
{
    static const int pats[6][4] = {{1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1},
                                   {3, 2, 1, 1}, {2, 2, 2, 2}, {1, 1, 3, 2}};
    for (int i = 0; i < 6; i++) {
        schedule *s = gen(SCHED_PIPEDREAM, 4, 1, 24, 1, pats[i]);
        int act[4], ver[4];
        inflight(s, act, ver);
        for (int st = 0; st < 4; st++)
            cr_assert_eq(sched_inflight_1f1b(pats[i], 4, st), act[st],
                         "pattern %d stage %d: %d, the IR holds %d", i, st,
                         sched_inflight_1f1b(pats[i], 4, st), act[st]);
        schedule_free(s);
    }
    cr_expect_eq(sched_inflight_1f1b(pats[3], 4, 0), 3); /* ceil(7 / 3) */
    cr_expect_eq(sched_inflight_1f1b(pats[0], 4, 4), -1);
    cr_expect_eq(sched_inflight_1f1b(pats[0], 4, -1), -1);
    cr_expect_eq(sched_inflight_1f1b(NULL, 4, 0), -1);
}

Test(schedule_theory, twobw_at_most_two_versions)
{
    for (int p = 2; p <= 8; p++)
        for (int m = p; m <= 16; m += 3) {
            schedule *s = gen(SCHED_2BW, p, 1, m, 3, NULL);
            int act[8], ver[8];
            inflight(s, act, ver);
            for (int st = 0; st < p; st++) cr_assert_leq(ver[st], 2, "p=%d m=%d st=%d", p, m, st);
            cr_assert_eq(ver[0], 2, "p=%d m=%d", p, m);
            /* one step per minibatch of m microbatches */
            cr_assert_eq(schedule_count(s, ACT_STEP), (long)p * 3);
            schedule_free(s);
        }
}

Test(schedule_theory, twobw_backward_uses_forward_version)
{
    schedule *s = gen(SCHED_2BW, 4, 1, 4, 3, NULL);
    /* stage 0 (worker 0): microbatch 4 (2nd minibatch) was forwarded before the first step
     * produced version 1, so its backward uses version 0 after that step */
    int fv = -1, bv = -1, stepped = 0, b_after_step = 0;
    for (int i = 0; i < s->len[0]; i++) {
        action *a = &s->acts[0][i];
        if (a->kind == ACT_F && a->microbatch == 4) fv = a->version;
        if (a->kind == ACT_STEP && a->version == 1) stepped = 1;
        if (a->kind == ACT_B && a->microbatch == 4) bv = a->version, b_after_step = stepped;
    }
    cr_assert_eq(fv, 0);
    cr_assert_eq(bv, 0);
    cr_assert(b_after_step);
    schedule_free(s);
}

Test(schedule_theory, zb_h1_memory_of_1f1b)
{
    for (int p = 2; p <= 8; p++)
        for (int m = 1; m <= 16; m++) {
            schedule *z = gen(SCHED_ZB_H1, p, 1, m, 1, NULL);
            schedule *f = gen(SCHED_1F1B_FLUSH, p, 1, m, 1, NULL);
            int za[8], zv[8], fa[8], fv[8], zmax = 0, fmax = 0;
            inflight(z, za, zv);
            inflight(f, fa, fv);
            for (int st = 0; st < p; st++) {
                if (za[st] > zmax) zmax = za[st];
                if (fa[st] > fmax) fmax = fa[st];
            }
            cr_assert_eq(zmax, fmax, "p=%d m=%d: zb-h1 peak %d, 1f1b peak %d", p, m, zmax, fmax);
            cr_assert_eq(schedule_count(z, ACT_B), 0);
            cr_assert_eq(schedule_count(z, ACT_W), (long)p * m);
            schedule_free(z);
            schedule_free(f);
        }
}

Test(schedule_theory, interleaved_orders_like_megatron)
{
    /* 2 ranks, 2 chunks, 4 microbatches: rank 0 warms up with 2 (2 - 0 - 1) + (2 - 1) 2 = 4
     * forwards: microbatches 0, 1 of chunk 0 (stage 0), then 0, 1 of chunk 1 (stage 2) */
    schedule *s = gen(SCHED_INTERLEAVED, 2, 2, 4, 1, NULL);
    char want[][8] = {"0F0", "0F1", "2F0", "2F1", "0F2", "2B0"};
    int n = 0;
    char t[48];
    for (int i = 0; i < s->len[0] && n < 6; i++) {
        action *a = &s->acts[0][i];
        if (a->kind != ACT_F && a->kind != ACT_B) continue;
        cr_assert_str_eq(action_format(a, t, sizeof t), want[n], "op %d", n);
        n++;
    }
    cr_assert_eq(n, 6);
    schedule_free(s);
}

/* --- the validator's failure classes --------------------------------------------------- */

static void del_at(schedule *s, int w, int i)
{
    memmove(&s->acts[w][i], &s->acts[w][i + 1], (size_t)(s->len[w] - i - 1) * sizeof(action));
    s->len[w]--;
}

static int find(const schedule *s, int w, int kind, int stage, int mb)
{
    for (int i = 0; i < s->len[w]; i++) {
        const action *a = &s->acts[w][i];
        if (a->kind == kind && a->stage == stage && (mb < 0 || a->microbatch == mb)) return i;
    }
    return -1;
}

static void expect_invalid(const schedule *s, const char *needle)
{
    plumb_err e = {{0}};
    cr_assert_eq(schedule_validate(s, &e), -1, "expected \"%s\"", needle);
    cr_assert(strstr(e.msg, needle), "got \"%s\", expected \"%s\"", e.msg, needle);
}

/* A schedule from CSV text rows for 2 stages x 2 microbatches of 1f1b-flush. */
static schedule *from_text(sched_kind k, int stages, int m, const char *r0, const char *r1)
{
    char *rows_txt[2] = {strdup(r0), strdup(r1)};
    char **rows[2];
    int nf[2];
    for (int r = 0; r < 2; r++) {
        rows[r] = calloc(64, sizeof(char *));
        nf[r] = 0;
        for (char *tok = strtok(rows_txt[r], ","); tok; tok = strtok(NULL, ","))
            rows[r][nf[r]++] = tok;
    }
    sched_spec sp = {k, 0, stages, 1, m, 1, NULL, NULL};
    plumb_err e = {{0}};
    schedule *s = schedule_from_rows("t.csv", rows, nf, 2, &sp, &e);
    cr_assert(s, "%s", e.msg);
    for (int r = 0; r < 2; r++) free(rows[r]), free(rows_txt[r]);
    return s;
}

Test(schedule_validate, deadlock_under_rendezvous_names_the_cycle)
{
    schedule *s = from_text(SCHED_1F1B_FLUSH, 2, 2,
                            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1",
                            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1");
    expect_invalid(s, "deadlock: worker 0 waits at action 3 (0SEND_F1) for worker 1, worker 1 "
                      "waits at action 3 (1SEND_B0) for worker 0");
    /* with buffered sends the same lists run */
    plumb_err e = {{0}};
    cr_assert_eq(schedule_validate_sem(s, SCHED_SEM_BUFFERED, &e), 0, "%s", e.msg);
    schedule_free(s);
}

Test(schedule_validate, deadlock_both_receive_first)
{
    schedule *s = from_text(SCHED_GPIPE, 2, 1, "0F0,0RECV_B0,0SEND_F0,0B0",
                            "1RECV_F0,1F0,1B0,1SEND_B0");
    expect_invalid(s, "deadlock: worker 0 waits at action 1 (0RECV_B0) for worker 1, worker 1 "
                      "waits at action 0 (1RECV_F0) for worker 0");
    plumb_err e = {{0}};
    cr_assert_eq(schedule_validate_sem(s, SCHED_SEM_BUFFERED, &e), -1);
    cr_assert(strstr(e.msg, "deadlock"), "%s", e.msg);
    schedule_free(s);
}

Test(schedule_validate, send_without_receive)
{
    schedule *s = gen(SCHED_1F1B_FLUSH, 3, 1, 4, 1, NULL);
    del_at(s, 1, find(s, 1, ACT_RECV_F, 1, 2));
    expect_invalid(s, "(0SEND_F2): send without its receive: worker 1 has no 1RECV_F2");
    schedule_free(s);
    s = gen(SCHED_1F1B_FLUSH, 3, 1, 4, 1, NULL);
    del_at(s, 2, find(s, 2, ACT_SEND_B, 2, 1));
    expect_invalid(s, "(1RECV_B1): receive without its send: worker 2 has no 2SEND_B1");
    schedule_free(s);
}

Test(schedule_validate, backward_before_forward)
{
    schedule *s = from_text(SCHED_GPIPE, 2, 1, "0F0,0SEND_F0,0RECV_B0,0B0",
                            "1B0,1RECV_F0,1F0,1SEND_B0");
    expect_invalid(s, "worker 1 action 0 (1B0): B before its F");
    schedule_free(s);
}

Test(schedule_validate, forward_before_its_input)
{
    schedule *s = from_text(SCHED_GPIPE, 2, 1, "0F0,0SEND_F0,0RECV_B0,0B0",
                            "1F0,1RECV_F0,1B0,1SEND_B0");
    expect_invalid(s, "worker 1 action 0 (1F0): forward before its input (RECV_F)");
    schedule_free(s);
}

Test(schedule_validate, w_before_i)
{
    schedule *s = gen(SCHED_ZB_H1, 2, 1, 2, 1, NULL);
    int i = find(s, 1, ACT_I, 1, 0), w = find(s, 1, ACT_W, 1, 0);
    cr_assert(i >= 0 && w > i);
    action t = s->acts[1][i];
    s->acts[1][i] = s->acts[1][w];
    s->acts[1][w] = t;
    expect_invalid(s, "(1W0): W before its I");
    schedule_free(s);
}

Test(schedule_validate, forward_missing_and_duplicated)
{
    schedule *s = gen(SCHED_GPIPE, 1, 1, 3, 1, NULL);
    del_at(s, 0, find(s, 0, ACT_F, 0, 1));
    expect_invalid(s, "stage 0 microbatch 1: forward missing");
    schedule_free(s);
    s = gen(SCHED_GPIPE, 1, 1, 3, 1, NULL);
    s->acts[0][find(s, 0, ACT_F, 0, 2)].microbatch = 1;
    expect_invalid(s, "stage 0 microbatch 1: forward duplicated");
    schedule_free(s);
    s = gen(SCHED_GPIPE, 1, 1, 3, 1, NULL);
    del_at(s, 0, find(s, 0, ACT_B, 0, 2));
    expect_invalid(s, "stage 0 microbatch 2: backward missing");
    schedule_free(s);
}

Test(schedule_validate, step_version_order)
{
    schedule *s = gen(SCHED_PIPEDREAM, 2, 1, 4, 1, NULL);
    int i = find(s, 0, ACT_STEP, 0, -1);
    s->acts[0][i].version = 2;
    expect_invalid(s, "STEP version order: produces version 2 after version 0");
    schedule_free(s);
}

Test(schedule_validate, weight_versions)
{
    schedule *s = gen(SCHED_PIPEDREAM, 2, 1, 4, 1, NULL);
    int i = find(s, 0, ACT_B, 0, 2);
    s->acts[0][i].version++;
    expect_invalid(s, "backward uses weight version");
    schedule_free(s);
    s = gen(SCHED_PIPEDREAM, 2, 1, 4, 1, NULL);
    i = find(s, 0, ACT_F, 0, 3);
    s->acts[0][i].version = 0;
    expect_invalid(s, "forward uses weight version 0 but the newest is");
    schedule_free(s);
}

Test(schedule_validate, sync_step_inside_the_flush)
{
    schedule *s = gen(SCHED_GPIPE, 1, 1, 2, 1, NULL);
    /* F0 F1 B0 B1 STEP -> F0 F1 B0 STEP B1 */
    int i = find(s, 0, ACT_STEP, 0, -1);
    action t = s->acts[0][i];
    s->acts[0][i] = s->acts[0][i - 1];
    s->acts[0][i - 1] = t;
    expect_invalid(s, "still in flight at the step");
    schedule_free(s);
}

Test(schedule_validate, replicated_step_needs_allreduce)
{
    int reps[2] = {2, 1};
    schedule *s = gen(SCHED_1F1B_FLUSH, 2, 1, 4, 1, reps);
    del_at(s, 0, find(s, 0, ACT_ALLREDUCE, 0, -1));
    expect_invalid(s, "its replicas hold 0 and 1 REDUCE_GRAD");
    del_at(s, 1, find(s, 1, ACT_ALLREDUCE, 0, -1));
    expect_invalid(s, "stage 0 has 2 replicas but no REDUCE_GRAD before this step");
    schedule_free(s);
}

Test(schedule_validate, fields)
{
    schedule *s = gen(SCHED_1F1B_FLUSH, 3, 1, 2, 1, NULL);
    int i = find(s, 0, ACT_SEND_F, 0, 0);
    s->acts[0][i].peer = 2;
    expect_invalid(s, "peer worker 2 does not hold stage 1");
    schedule_free(s);
    s = gen(SCHED_1F1B_FLUSH, 3, 1, 2, 1, NULL);
    s->acts[1][find(s, 1, ACT_F, 1, 0)].stage = 2;
    expect_invalid(s, "stage 2 is not placed on worker 1");
    schedule_free(s);
    s = gen(SCHED_1F1B_FLUSH, 3, 1, 2, 1, NULL);
    s->acts[1][find(s, 1, ACT_F, 1, 0)].microbatch = 9;
    expect_invalid(s, "microbatch out of range 0..1");
    schedule_free(s);
}

Test(schedule_plan, from_plan_maps_devices_to_workers)
{
    /* three stages on devices {9}, {6, 5}, {4}: workers are numbered by device id */
    int d0[1] = {9}, d1[2] = {6, 5}, d2[1] = {4};
    plan_stage st[3] = {{0, 1, 1, d0, -1, -1}, {2, 3, 2, d1, -1, -1}, {4, 5, 1, d2, -1, -1}};
    plan pl;
    memset(&pl, 0, sizeof pl);
    pl.schedule = SCHED_PIPEDREAM;
    pl.chunks = 1;
    pl.microbatches = 4;
    pl.nstages = 3;
    pl.stages = st;
    plumb_err e = {{0}};
    schedule *s = schedule_from_plan(&pl, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->nworkers, 4);
    int want_dev[4] = {4, 5, 6, 9};
    for (int w = 0; w < 4; w++) cr_assert_eq(s->worker_device[w], want_dev[w]);
    cr_assert_eq(s->stage_workers[s->stage_first[0]], 3);
    cr_assert_eq(s->stage_workers[s->stage_first[1]], 2);
    cr_assert_eq(s->stage_workers[s->stage_first[1] + 1], 1);
    cr_assert_eq(s->stage_workers[s->stage_first[2]], 0);
    cr_assert_eq(s->iterations, 2);
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    schedule_free(s);
    pl.schedule = SCHED_INTERLEAVED; /* a device per stage is not a chunked placement */
    pl.chunks = 3;
    cr_assert_null(schedule_from_plan(&pl, 1, &e));
}

/* --- costed transfer placement --------------------------------------------------------- */

/* Makespan of s replayed with buffered sends and RECVs that block in list order; F takes
 * cost[3s], I cost[3s+1], W cost[3s+2], B their sum; transfers are instantaneous. */
static double replay_makespan(const schedule *s, const double *cost)
{
    int W = s->nworkers, S = s->nstages, T = s->microbatches * s->iterations;
    double *sent = malloc(sizeof(double) * 2 * S * T), *t = calloc(W, sizeof(double));
    int *pc = calloc(W, sizeof(int));
    for (int i = 0; i < 2 * S * T; i++) sent[i] = -1;
    for (int left = 1; left;) {
        int progress = 0;
        left = 0;
        for (int w = 0; w < W; w++)
            while (pc[w] < s->len[w]) {
                const action *a = &s->acts[w][pc[w]];
                const double *c = &cost[3 * a->stage];
                if (a->kind == ACT_SEND_F || a->kind == ACT_SEND_B) {
                    sent[(a->kind == ACT_SEND_B) * S * T + a->stage * T + a->microbatch] = t[w];
                } else if (a->kind == ACT_RECV_F || a->kind == ACT_RECV_B) {
                    double x = sent[(a->kind == ACT_RECV_B) * S * T + a->peer_stage * T +
                                    a->microbatch];
                    if (x < 0) break;
                    if (x > t[w]) t[w] = x;
                } else {
                    t[w] += a->kind == ACT_F ? c[0] : a->kind == ACT_I ? c[1]
                          : a->kind == ACT_W ? c[2] : a->kind == ACT_B ? c[1] + c[2] : 0;
                }
                pc[w]++;
                progress = 1;
            }
        for (int w = 0; w < W; w++) left |= pc[w] < s->len[w];
        cr_assert(!left || progress, "replay stuck");
    }
    double m = 0;
    for (int w = 0; w < W; w++) m = t[w] > m ? t[w] : m;
    free(sent), free(t), free(pc);
    return m;
}

/* Moves every RECV right before the computation that consumes it: the order that waits only
 * for data dependencies (valid with buffered sends, not with blocking ones). */
static void recv_just_in_time(schedule *s)
{
    for (int w = 0; w < s->nworkers; w++) {
        action *L = s->acts[w];
        int n = s->len[w];
        for (int i = n - 1; i >= 0; i--) {
            if (L[i].kind != ACT_RECV_F && L[i].kind != ACT_RECV_B) continue;
            int j = i + 1;
            while (j < n && !(L[j].stage == L[i].stage && L[j].microbatch == L[i].microbatch &&
                              (L[i].kind == ACT_RECV_F ? L[j].kind == ACT_F
                                                       : L[j].kind == ACT_B || L[j].kind == ACT_I)))
                j++;
            action r = L[i];
            memmove(&L[i], &L[i + 1], sizeof(action) * (size_t)(j - 1 - i));
            L[j - 1] = r;
        }
    }
}

Test(schedule_costed, transfers_wait_only_for_data)
{
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM,
                                       SCHED_ZB_H1, SCHED_INTERLEAVED, SCHED_ZB_V,
                                       SCHED_DUALPIPEV};
    double worst_unit = 1;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
        for (int slow = 0; slow < 4; slow++) {
            sched_kind k = kinds[ki];
            int chunks = sched_kind_chunks(k), S = 4 * chunks;
            double cost[24];
            for (int st = 0; st < S; st++) {
                double f = st == slow ? 2.5 : 1;
                cost[3 * st] = f, cost[3 * st + 1] = 1.2 * f, cost[3 * st + 2] = 0.8 * f;
            }
            sched_spec sp = {k, 0, S, chunks, 8, 2, NULL, NULL};
            plumb_err e = {{0}};
            schedule *c = schedule_generate_costed(&sp, cost, &e);
            cr_assert(c, "%s", e.msg);
            cr_assert_eq(schedule_validate(c, &e), 0, "kind %d: %s", k, e.msg);
            schedule *u = schedule_generate(&sp, &e);
            double mc = replay_makespan(c, cost), mu = replay_makespan(u, cost);
            recv_just_in_time(c);
            double ideal = replay_makespan(c, cost);
            cr_assert_float_eq(mc, ideal, 1e-9, "kind %d slow %d: costed %g, ideal %g", k, slow,
                               mc, ideal);
            cr_assert_geq(mu, ideal - 1e-9);
            if (mu / ideal > worst_unit) worst_unit = mu / ideal;
            schedule_free(c);
            schedule_free(u);
        }
    /* the unit-cost order does lose time on imbalanced stages: the costs matter */
    cr_assert_gt(worst_unit, 1.01);
    plumb_err e = {{0}};
    double bad[6] = {1, 1, 1, 1, 0, 1};
    sched_spec sp = {SCHED_GPIPE, 0, 2, 1, 2, 1, NULL, NULL};
    cr_assert_null(schedule_generate_costed(&sp, bad, &e));
    cr_assert(strstr(e.msg, "stage 1: expected times > 0"), "%s", e.msg);
}

Test(schedule_costed, plan_costs_from_profile_and_devices)
{
    profile_layer ly[4];
    memset(ly, 0, sizeof ly);
    double fw[4] = {1, 2, 3, 4}, bw[4] = {2, 4, 6, 8};
    for (int i = 0; i < 4; i++) {
        ly[i].forward_ms = fw[i], ly[i].backward_ms = bw[i];
        ly[i].backward_input_ms = ly[i].backward_weight_ms = -1;
    }
    ly[3].backward_input_ms = 5, ly[3].backward_weight_ms = 3;
    profile prof;
    memset(&prof, 0, sizeof prof);
    prof.nlayers = 4, prof.layers = ly, prof.minibatch = 8;
    device_type types[2] = {{.name = "slow", .memory_bytes = 1e9, .speed = 1.0},
                            {.name = "fast", .memory_bytes = 1e9, .speed = 2.0}};
    int server_type[2] = {0, 1};
    cluster clus;
    memset(&clus, 0, sizeof clus);
    clus.nlevels = 2, clus.levels[0].count = 2, clus.levels[1].count = 2;
    clus.ntypes = 2, clus.types = types, clus.nservers = 2, clus.server_type = server_type;
    clus.ndevices = 4;
    int d0[1] = {0}, d1[1] = {2};
    plan_stage st[2] = {{0, 1, 1, d0, -1, -1}, {2, 3, 1, d1, -1, -1}};
    plan pl;
    memset(&pl, 0, sizeof pl);
    pl.prof = &prof, pl.clus = &clus, pl.schedule = SCHED_ZB_H1, pl.chunks = 1;
    pl.microbatches = 4, pl.nstages = 2, pl.stages = st;
    double cost[6];
    cr_assert_eq(schedule_plan_costs(&pl, cost), 0);
    double want[6] = {3, 3, 3, 3.5, 4, 3}; /* stage 1 on a device twice as fast */
    for (int i = 0; i < 6; i++) cr_assert_float_eq(cost[i], want[i], 1e-12, "cost[%d] %g", i, cost[i]);
    pl.recompute = 1;
    cr_assert_eq(schedule_plan_costs(&pl, cost), 0);
    cr_assert_float_eq(cost[1], 6, 1e-12);
    plumb_err e = {{0}};
    schedule *s = schedule_from_plan(&pl, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(schedule_validate(s, &e), 0, "%s", e.msg);
    cr_assert_eq(s->worker_device[1], 2);
    schedule_free(s);
}

Test(schedule_validate, deadlock_through_an_allreduce)
{
    /* stage 0 on workers 0 and 1, stage 1 on worker 2: worker 0 all-reduces before taking
     * its last gradient, so worker 2 blocks sending it while worker 1 waits for its own */
    int reps[2] = {2, 1};
    schedule *s = gen(SCHED_GPIPE, 2, 1, 4, 1, reps);
    int ar = find(s, 0, ACT_ALLREDUCE, 0, -1), rb = find(s, 0, ACT_RECV_B, 0, 2);
    cr_assert(rb >= 0 && ar > rb);
    action a = s->acts[0][ar];
    memmove(&s->acts[0][rb + 1], &s->acts[0][rb], (size_t)(ar - rb) * sizeof(action));
    s->acts[0][rb] = a;
    plumb_err e = {{0}};
    cr_assert_eq(schedule_validate(s, &e), -1);
    cr_assert(strstr(e.msg, "deadlock:"), "%s", e.msg);
    cr_assert(strstr(e.msg, "(0REDUCE_GRAD) for worker 1"), "%s", e.msg);
    schedule_free(s);
}

Test(schedule_text, listing)
{
    schedule *s = gen(SCHED_GPIPE, 2, 1, 1, 1, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    schedule_print(s, f);
    fclose(f);
    cr_assert_str_eq(buf, "gpipe: 2 stages on 2 workers (1 chunk per rank), 1 microbatch x 1 "
                          "iteration, 10 actions\n"
                          "        Rank 0   Rank 1\n"
                          "Step 0: 0F0      1RECV_F0\n"
                          "Step 1: 0SEND_F0 1F0\n"
                          "Step 2: 0RECV_B0 1B0\n"
                          "Step 3: 0B0      1SEND_B0\n"
                          "Step 4: 0STEP    1STEP\n");
    free(buf);
    schedule_free(s);
}

/* schedule_send_bound. A random replay under buffered sends: at each step one worker whose
 * next action can run (a receive whose message was posted, an all-reduce whose replicas
 * have all reached it, anything else) runs it; peak[from * W + to] is the most messages of
 * the kinds in `sends` that were posted and not yet received. */
static void random_replay(const schedule *s, unsigned sends, unsigned seed, int *peak)
{
    const int W = s->nworkers;
    int *pc = calloc((size_t)W, sizeof *pc), *now = calloc((size_t)W * W, sizeof *now);
    int cap = 16, n = 0;
    action *posted = malloc((size_t)cap * sizeof *posted); /* peer = the sender */
    int *to = malloc((size_t)cap * sizeof *to);
    memset(peak, 0, (size_t)W * W * sizeof *peak);
    for (;;) {
        int ready[64], nready = 0, left = 0;
        for (int w = 0; w < W; w++) {
            if (pc[w] >= s->len[w]) continue;
            left = 1;
            const action *a = &s->acts[w][pc[w]];
            int ok = 1;
            if (a->kind == ACT_RECV_F || a->kind == ACT_RECV_B) {
                ok = 0;
                for (int i = 0; i < n && !ok; i++)
                    ok = to[i] == w && posted[i].peer == a->peer &&
                         posted[i].microbatch == a->microbatch &&
                         posted[i].peer_stage == a->stage &&
                         posted[i].kind == (a->kind == ACT_RECV_F ? ACT_SEND_F : ACT_SEND_B);
            } else if (a->kind == ACT_ALLREDUCE) {
                const int st = a->stage, *g = s->stage_workers + s->stage_first[st];
                for (int j = 0; j < s->replicas[st]; j++) {
                    const action *b = pc[g[j]] < s->len[g[j]] ? &s->acts[g[j]][pc[g[j]]] : NULL;
                    ok = ok && b && b->kind == ACT_ALLREDUCE && b->stage == st;
                }
            }
            if (ok) ready[nready++] = w;
        }
        if (!left) break;
        cr_assert_gt(nready, 0, "the replay is stuck");
        seed = seed * 1103515245u + 12345u;
        const int w = ready[(seed >> 16) % (unsigned)nready];
        const action *a = &s->acts[w][pc[w]];
        if (a->kind == ACT_SEND_F || a->kind == ACT_SEND_B) {
            if (n == cap) {
                cap *= 2;
                posted = realloc(posted, (size_t)cap * sizeof *posted);
                to = realloc(to, (size_t)cap * sizeof *to);
            }
            posted[n] = *a;
            posted[n].peer = w;
            to[n++] = a->peer;
            if (sends & (1u << a->kind)) {
                int *c = &now[w * W + a->peer];
                if (++*c > peak[w * W + a->peer]) peak[w * W + a->peer] = *c;
            }
            pc[w]++;
        } else if (a->kind == ACT_RECV_F || a->kind == ACT_RECV_B) {
            const int k = a->kind == ACT_RECV_F ? ACT_SEND_F : ACT_SEND_B;
            for (int i = 0; i < n; i++)
                if (to[i] == w && posted[i].peer == a->peer &&
                    posted[i].microbatch == a->microbatch && posted[i].peer_stage == a->stage &&
                    posted[i].kind == k) {
                    if (sends & (1u << k)) now[a->peer * W + w]--;
                    posted[i] = posted[--n];
                    to[i] = to[n];
                    break;
                }
            pc[w]++;
        } else if (a->kind == ACT_ALLREDUCE) {
            const int st = a->stage, *g = s->stage_workers + s->stage_first[st];
            for (int j = 0; j < s->replicas[st]; j++) pc[g[j]]++;
        } else {
            pc[w]++;
        }
    }
    cr_assert_eq(n, 0, "every message was received");
    free(pc), free(now), free(posted), free(to);
}

static int *send_bound(const schedule *s, unsigned sends)
{
    plumb_err e = {{0}};
    int *b = malloc((size_t)s->nworkers * s->nworkers * sizeof *b);
    cr_assert_eq(schedule_send_bound(s, sends, b, &e), 0, "%s", e.msg);
    return b;
}

#define SENDS_FB ((1u << ACT_SEND_F) | (1u << ACT_SEND_B))

Test(schedule_bound, gpipe_and_1f1b_in_closed_form)
{
    for (int p = 2; p <= 6; p++)
        for (int m = 1; m <= 10; m++) {
            schedule *g = gen(SCHED_GPIPE, p, 1, m, 2, NULL);
            schedule *o = gen(SCHED_1F1B_FLUSH, p, 1, m, 2, NULL);
            int *bg = send_bound(g, SENDS_FB), *bo = send_bound(o, SENDS_FB);
            int *bb = send_bound(o, 1u << ACT_SEND_B), *bf = send_bound(o, 1u << ACT_SEND_F);
            for (int a = 0; a < p; a++)
                for (int b = 0; b < p; b++) {
                    const int i = a * p + b, adj = b == a + 1 || a == b + 1;
                    /* gpipe: every forward goes before any backward comes back */
                    cr_expect_eq(bg[i], adj ? m : 0, "gpipe p=%d m=%d %d->%d", p, m, a, b);
                    /* 1f1b: stage s holds p - s microbatches open; the gradients of as many
                     * can be on their way back to it */
                    const int s = a < b ? a : b, want = adj ? (m < p - s ? m : p - s) : 0;
                    cr_expect_eq(bo[i], want, "1f1b p=%d m=%d %d->%d: %d", p, m, a, b, bo[i]);
                    cr_expect_eq(bb[i], b == a - 1 ? want : 0, "gradients only %d->%d", a, b);
                    cr_expect_eq(bf[i], b == a + 1 ? want : 0, "activations only %d->%d", a, b);
                }
            free(bg), free(bo), free(bb), free(bf);
            schedule_free(g);
            schedule_free(o);
        }
}

/* No timing of the schedule exceeds the bound, over every generator and replicas. */
Test(schedule_bound, no_replay_exceeds_it)
{
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 2; p <= 4; p++)
            for (int m = 1; m <= 9; m += 4)
                for (int r = 0; r < 2; r++) {
                    schedule *s = gen_shape(k, p, m, 2, r);
                    if (!s) continue; /* a shape this kind does not take */
                    const int W = s->nworkers;
                    int *b = send_bound(s, SENDS_FB), *peak = malloc((size_t)W * W * sizeof *peak);
                    for (unsigned seed = 1; seed <= 40; seed++) {
                        random_replay(s, SENDS_FB, seed, peak);
                        for (int i = 0; i < W * W; i++)
                            cr_assert_leq(peak[i], b[i], "%s p=%d m=%d reps=%d seed %u: %d->%d "
                                          "had %d in flight, bound %d", sched_kind_name(k), p,
                                          m, r, seed, i / W, i % W, peak[i], b[i]);
                    }
                    free(b), free(peak);
                    schedule_free(s);
                }
}

/* The list form holds the matrix's pairs: one entry per pair with a counted send or
 * receive, sorted, the same bound; every other entry of the matrix is 0. */
Test(schedule_bound, pairs_match_the_matrix)
{
    static const int reps[4] = {2, 1, 3, 1};
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int m = 1; m <= 9; m += 4)
            for (int r = 0; r < 2; r++)
                for (unsigned sends = 1; sends <= 3; sends++) {
                    const int chunked = k == SCHED_INTERLEAVED || k == SCHED_ZB_V;
                    plumb_err e = {{0}};
                    schedule *s = try_gen(k, 4, chunked ? 2 : 1, m, 2,
                                          r && !chunked ? reps : NULL, &e);
                    if (!s) continue;
                    const unsigned mask = ((sends & 1) ? 1u << ACT_SEND_F : 0) |
                                          ((sends & 2) ? 1u << ACT_SEND_B : 0);
                    const int W = s->nworkers;
                    int *b = send_bound(s, mask), *seen = calloc((size_t)W * W, sizeof *seen);
                    sched_pair_bound *p = NULL;
                    int n = -1;
                    cr_assert_eq(schedule_send_bound_pairs(s, mask, &p, &n, &e), 0, "%s", e.msg);
                    cr_assert_gt(n, 0);
                    for (int i = 0; i < n; i++) {
                        const int at = p[i].from * W + p[i].to;
                        cr_expect_eq(p[i].bound, b[at], "%s %d->%d", sched_kind_name(k),
                                     p[i].from, p[i].to);
                        cr_expect(i == 0 || p[i - 1].from < p[i].from ||
                                  (p[i - 1].from == p[i].from && p[i - 1].to < p[i].to));
                        seen[at] = 1;
                    }
                    for (int i = 0; i < W * W; i++)
                        cr_expect(seen[i] || b[i] == 0, "%d->%d: %d not listed", i / W, i % W,
                                  b[i]);
                    free(b), free(seen), free(p);
                    schedule_free(s);
                }
}

/* schedule_send_bound from its definition, without vector clocks: the happens-before
 * relation of the actions as sets of ancestors (list order; a SEND before the computation
 * that takes its data, the first F (B or I) after the receiver's RECV of it; the k-th
 * all-reduce of a stage on every replica before each replica's next action), then per
 * counted SEND of a to b: the pair's sends so far less the takes of the pair among its
 * ancestors. bound[from * W + to]; NULL-free, the caller frees. */
static int *bound_by_ancestors(const schedule *s, unsigned sends)
{
    const int W = s->nworkers;
    int *base = calloc((size_t)W + 1, sizeof *base), N = 0;
    for (int w = 0; w < W; w++) base[w] = N, N += s->len[w];
    base[W] = N;
    const size_t words = (size_t)N / 64 + 1;
    unsigned long long *anc = calloc((size_t)N * words, sizeof *anc);
    int *take_of = malloc((size_t)N * sizeof *take_of); /* the node of a SEND's taker */
    int *pc = calloc((size_t)W, sizeof *pc), *arc = calloc((size_t)W * s->nstages, sizeof *arc);
    for (int x = 0; x < N; x++) take_of[x] = -1;
#define ANC(x) (anc + (size_t)(x) * words)
#define ADD(into, from)                                                                        \
    do {                                                                                       \
        for (size_t q = 0; q < words; q++) ANC(into)[q] |= ANC(from)[q];                       \
        ANC(into)[(from) / 64] |= 1ull << ((from) % 64);                                       \
    } while (0)
    /* the taker of each SEND: on its receiver, the first F (B, I) of the next (previous)
     * stage and the microbatch after the RECV */
    for (int w = 0; w < W; w++)
        for (int i = 0; i < s->len[w]; i++) {
            const action *r = &s->acts[w][i];
            if (r->kind != ACT_RECV_F && r->kind != ACT_RECV_B) continue;
            int sender = r->peer, j = -1;
            for (int k = 0; k < s->len[sender] && j < 0; k++) {
                const action *x = &s->acts[sender][k];
                if (x->kind == r->kind - 1 && x->stage == r->peer_stage &&
                    x->microbatch == r->microbatch && x->peer == w)
                    j = k;
            }
            cr_assert_geq(j, 0, "the send of worker %d's action %d", w, i);
            for (int k = i + 1; k < s->len[w]; k++) {
                const action *c = &s->acts[w][k];
                int takes = r->kind == ACT_RECV_F ? c->kind == ACT_F
                                                  : c->kind == ACT_B || c->kind == ACT_I;
                if (takes && c->stage == r->stage && c->microbatch == r->microbatch) {
                    take_of[base[sender] + j] = base[w] + k;
                    break;
                }
            }
        }
    /* ancestors, in an order that runs each action after its predecessors */
    for (int left = N; left > 0;) {
        int moved = 0;
        for (int w = 0; w < W; w++)
            while (pc[w] < s->len[w]) {
                const action *a = &s->acts[w][pc[w]];
                const int x = base[w] + pc[w];
                int ok = 1;
                for (int v = 0; v < W && ok; v++) /* a send whose taker is x: done? */
                    for (int k = 0; k < s->len[v] && ok; k++)
                        if (take_of[base[v] + k] == x && k >= pc[v]) ok = 0;
                if (!ok) break;
                if (a->kind == ACT_ALLREDUCE) {
                    const int st = a->stage, *g = s->stage_workers + s->stage_first[st];
                    for (int j = 0; j < s->replicas[st]; j++) {
                        const action *b = pc[g[j]] < s->len[g[j]] ? &s->acts[g[j]][pc[g[j]]] : NULL;
                        ok = ok && b && b->kind == ACT_ALLREDUCE && b->stage == st &&
                             arc[g[j] * s->nstages + st] == arc[w * s->nstages + st];
                    }
                    if (!ok) break;
                    /* every replica's all-reduce is an ancestor of each one's next action:
                     * give each all-reduce node the union, marked by all of them */
                    const int y0 = base[g[0]] + pc[g[0]];
                    for (int j = 0; j < s->replicas[st]; j++) {
                        const int y = base[g[j]] + pc[g[j]];
                        if (pc[g[j]] > 0) ADD(y0, y - 1);
                    }
                    for (int j = 0; j < s->replicas[st]; j++) {
                        const int y = base[g[j]] + pc[g[j]];
                        ANC(y0)[y / 64] |= 1ull << (y % 64);
                    }
                    for (int j = 0; j < s->replicas[st]; j++) {
                        const int y = base[g[j]] + pc[g[j]];
                        if (y != y0) memcpy(ANC(y), ANC(y0), words * sizeof *anc);
                        arc[g[j] * s->nstages + st]++;
                        pc[g[j]]++;
                        left--;
                    }
                    moved = 1;
                    continue;
                }
                if (pc[w] > 0) ADD(x, x - 1);
                for (int v = 0; v < W; v++)
                    for (int k = 0; k < s->len[v]; k++)
                        if (take_of[base[v] + k] == x) ADD(x, base[v] + k);
                pc[w]++;
                left--;
                moved = 1;
            }
        cr_assert(moved, "the replay of the ancestors is stuck");
    }
    int *bound = calloc((size_t)W * W, sizeof *bound);
    for (int a = 0; a < W; a++) {
        int *sent = calloc((size_t)W, sizeof *sent);
        for (int i = 0; i < s->len[a]; i++) {
            const action *x = &s->acts[a][i];
            if (!act_is_send(x->kind) || !(sends & (1u << x->kind))) continue;
            const int b = x->peer, me = base[a] + i;
            int taken = 0;
            for (int k = 0; k < s->len[b]; k++) { /* b's takes of a's counted messages */
                const int y = base[b] + k;
                int from_a = 0;
                for (int j = 0; j < s->len[a] && !from_a; j++)
                    from_a = take_of[base[a] + j] == y &&
                             (sends & (1u << s->acts[a][j].kind));
                if (from_a && (ANC(me)[y / 64] >> (y % 64) & 1)) taken++;
            }
            const int waiting = ++sent[b] - taken;
            if (waiting > bound[a * W + b]) bound[a * W + b] = waiting;
        }
        free(sent);
    }
#undef ADD
#undef ANC
    free(base), free(anc), free(take_of), free(pc), free(arc);
    return bound;
}

/* The replay's bounds are those of the definition (bound_by_ancestors), for every
 * generator, with and without replicas, over iterations, each kind of message counted. */
Test(schedule_bound, equals_the_definition)
{
    long long pairs = 0;
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 2; p <= 3; p++)
            for (int m = 1; m <= 7; m += 3)
                for (int r = 0; r < 2; r++) {
                    schedule *s = gen_shape(k, p, m * (r ? 6 : 1), 2, r);
                    if (!s) continue;
                    const int W = s->nworkers;
                    for (unsigned sends = 1; sends <= 3; sends++) {
                        const unsigned mask = ((sends & 1) ? 1u << ACT_SEND_F : 0) |
                                              ((sends & 2) ? 1u << ACT_SEND_B : 0);
                        int *got = send_bound(s, mask), *want = bound_by_ancestors(s, mask);
                        for (int i = 0; i < W * W; i++) {
                            cr_expect_eq(got[i], want[i], "%s p=%d m=%d reps %d sends %u: "
                                         "%d->%d: %d, by definition %d", sched_kind_name(k),
                                         p, s->microbatches, r, mask, i / W, i % W, got[i],
                                         want[i]);
                            pairs += want[i] > 0;
                        }
                        free(got), free(want);
                    }
                    schedule_free(s);
                }
    cr_expect_gt(pairs, 300, "%lld pairs with messages", pairs);
}

/* Gradients sent to a worker the placement sends none to (the last stage's): the replay
 * keeps clocks only for the workers messages go to in the placement, finds the odd
 * receiver and starts again with one for every worker; nobody there takes them, so all
 * of them can be waiting. */
Test(schedule_bound, send_outside_the_placement)
{
    schedule *s = gen(SCHED_GPIPE, 3, 1, 4, 1, NULL);
    for (int i = 0; i < s->len[1]; i++)
        if (s->acts[1][i].kind == ACT_SEND_B) s->acts[1][i].peer = 2;
    int *b = send_bound(s, 1u << ACT_SEND_B);
    /* 1->2: all 4; 2->1: all 4 as in gpipe (worker 2 learns nothing of 1's takes) */
    static const int want[9] = {0, 0, 0, 0, 0, 4, 0, 4, 0};
    for (int i = 0; i < 9; i++) cr_expect_eq(b[i], want[i], "%d->%d: %d", i / 3, i % 3, b[i]);
    free(b);
    schedule_free(s);
}

Test(schedule_bound, replicated_stage_and_deadlock)
{
    /* stage 0 on workers 0 and 1 takes alternate microbatches: at most 2 each way per pair */
    int reps[2] = {2, 1};
    schedule *s = gen(SCHED_1F1B_FLUSH, 2, 1, 8, 2, reps);
    int *b = send_bound(s, SENDS_FB);
    static const int want[9] = {0, 0, 2, 0, 0, 2, 2, 2, 0};
    for (int i = 0; i < 9; i++) cr_expect_eq(b[i], want[i], "%d->%d: %d", i / 3, i % 3, b[i]);
    free(b);
    schedule_free(s);
    /* a removed send: its receiver waits for ever, and so does worker 0 for the gradient */
    s = gen(SCHED_GPIPE, 2, 1, 2, 1, NULL);
    del_at(s, 0, find(s, 0, ACT_SEND_F, 0, 1));
    plumb_err e = {{0}};
    int out[4];
    cr_expect_eq(schedule_send_bound(s, SENDS_FB, out, &e), -1);
    cr_expect(strstr(e.msg, "schedule: worker 0 waits for ever at action 3 (0RECV_B0) with "
                            "buffered sends"), "%s", e.msg);
    schedule_free(s);
}

/* Chunked kinds with every stage replicated r times run r whole pipelines (Megatron-LM's
 * data parallelism): replica j's compute order is one pipeline's order over M / r
 * microbatches, renamed m -> m r + j, plus an all-reduce per stage; the IR validates and
 * each worker holds one (rank, replica). Uneven replicas and M not a multiple of r are
 * refused. */
static int is_compute(int k) { return k == ACT_F || k == ACT_B || k == ACT_I || k == ACT_W; }

Test(schedule_grid, chunked_kinds_replicate_whole_pipelines)
{
    sched_kind kinds[3] = {SCHED_INTERLEAVED, SCHED_ZB_V, SCHED_DUALPIPEV};
    for (int k = 0; k < 3; k++) {
        int p = 3, v = 2, r = 2, M = 12, S = p * v;
        int reps[6] = {r, r, r, r, r, r};
        schedule *one = gen(kinds[k], p, v, M / r, 2, NULL);
        schedule *many = gen(kinds[k], p, v, M, 2, reps);
        plumb_err e = {{0}};
        cr_assert_eq(schedule_validate(many, &e), 0, "%s", e.msg);
        cr_assert_eq(many->nworkers, p * r);
        for (int q = 0; q < p; q++)
            for (int j = 0; j < r; j++) {
                int w1 = one->stage_workers[one->stage_first[q]];
                int wm = many->stage_workers[many->stage_first[q] + j];
                for (int st = 0; st < S; st++) /* every chunk of rank q, replica j: one worker */
                    if (sched_kind_rank(kinds[k], st, p) == q)
                        cr_assert_eq(many->stage_workers[many->stage_first[st] + j], wm);
                int a = 0, b = 0;
                for (;;) {
                    while (a < one->len[w1] && !is_compute(one->acts[w1][a].kind)) a++;
                    while (b < many->len[wm] && !is_compute(many->acts[wm][b].kind)) b++;
                    if (a == one->len[w1] || b == many->len[wm]) break;
                    const action *x = &one->acts[w1][a++], *y = &many->acts[wm][b++];
                    int it = x->microbatch / (M / r), m = x->microbatch % (M / r);
                    cr_assert_eq(y->kind, x->kind);
                    cr_assert_eq(y->stage, x->stage);
                    cr_assert_eq(y->microbatch, it * M + m * r + j, "%s rank %d replica %d",
                                 sched_kind_name(kinds[k]), q, j);
                }
                cr_assert(a == one->len[w1] && b == many->len[wm], "same compute count");
            }
        schedule_free(one);
        schedule_free(many);
    }
    plumb_err e = {{0}};
    int uneven[4] = {2, 2, 1, 2};
    cr_assert_null(try_gen(SCHED_INTERLEAVED, 2, 2, 8, 1, uneven, &e));
    cr_assert(strstr(e.msg, "whole pipelines"), "%s", e.msg);
    int two[4] = {2, 2, 2, 2};
    cr_assert_null(try_gen(SCHED_INTERLEAVED, 2, 2, 7, 1, two, &e));
    cr_assert(strstr(e.msg, "multiple of 2"), "%s", e.msg);
}

/* The bounds of every generator (2 to 4 ranks, three replica layouts, 5 and 13
 * microbatches, 3 iterations: all-reduces that join the replicas' clocks) under each
 * message mask, with *knob = a and with *knob = b, compared pair by pair (what names the
 * two settings in a failure). Returns the pairs with messages. */
static long long bounds_agree(int *knob, int a, int b, const char *what)
{
    static const int reps[3][4] = {{1, 1, 1, 1}, {3, 2, 4, 1}, {6, 6, 5, 6}};
    const int keep = *knob, keep_fast = sched_bound_fast;
    if (knob != &sched_bound_fast) sched_bound_fast = 0; /* the replay's own settings */
    long long pairs = 0;
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 2; p <= 4; p++)
            for (int r = 0; r < 3; r++)
                for (int m = 5; m <= 13; m += 8) {
                    const int chunked = sched_kind_chunked((sched_kind)k);
                    int rr[4];
                    for (int i = 0; i < 4; i++) rr[i] = reps[r][i];
                    if (sched_traits_of((sched_kind)k)->mb_per_replica)
                        for (int i = 0; i < 4; i++) rr[i] = r ? 2 : 1;
                    plumb_err e = {{0}};
                    schedule *s = try_gen(k, p, sched_kind_chunks((sched_kind)k),
                                          m * (r ? 2 : 1), 3, r && !chunked ? rr : NULL, &e);
                    if (!s) continue;
                    const int W = s->nworkers;
                    for (unsigned sends = 1; sends <= 3; sends++) {
                        const unsigned mask = ((sends & 1) ? 1u << ACT_SEND_F : 0) |
                                              ((sends & 2) ? 1u << ACT_SEND_B : 0);
                        *knob = a;
                        int *ba = send_bound(s, mask);
                        *knob = b;
                        int *bb = send_bound(s, mask);
                        *knob = keep;
                        for (int i = 0; i < W * W; i++) {
                            cr_expect_eq(bb[i], ba[i], "%s p=%d reps %d m=%d sends %u: %d->%d "
                                         "%s: %d against %d", sched_kind_name(k), p, r, m,
                                         sends, i / W, i % W, what, bb[i], ba[i]);
                            pairs += ba[i] > 0;
                        }
                        free(ba), free(bb);
                    }
                    schedule_free(s);
                }
    sched_bound_fast = keep_fast;
    return pairs;
}

/* The replay's sparse vector clocks (core/schedule_vclock.c, used with hundreds of
 * replicas) give the dense clocks' bounds: every generator, with and without replicas,
 * several iterations (all-reduces that join the replicas' bases), both kinds of messages
 * counted; sched_bound_sparse 1 makes every clock sparse (and, K being small, folds
 * their entries often: more than K / 4), 0 every clock dense. */
Test(schedule_bound, sparse_clocks_like_dense)
{
    long long pairs = bounds_agree(&sched_bound_sparse, 0, 1, "sparse against dense");
    cr_expect_gt(pairs, 1000, "%lld pairs with messages", pairs);
}

/* The dense clocks' 16-bit components (lists of at most 65535 actions) give the 32-bit
 * ones' bounds: every generator, with and without replicas (all-reduces, whose replicas'
 * own components are written as they join), both kinds of messages counted; and a list
 * longer than 65535 actions (2 ranks, 17000 microbatches: components past 65535) keeps
 * 32-bit components, where 16-bit ones would wrap and count the takes as not known. */
Test(schedule_bound, narrow_clocks_like_wide)
{
    const int keep_sparse = sched_bound_sparse;
    sched_bound_sparse = 0;
    long long pairs = bounds_agree(&sched_bound_narrow, 0, -1, "16-bit against 32-bit");
    cr_expect_gt(pairs, 1000, "%lld pairs with messages", pairs);
    const int keep = sched_bound_narrow;
    schedule *s = gen(SCHED_1F1B_FLUSH, 2, 1, 17000, 1, NULL);
    cr_assert_gt(s->len[0], 65535, "a list past 16 bits (%d actions)", s->len[0]);
    sched_bound_narrow = 0;
    int *wide = send_bound(s, SENDS_FB);
    sched_bound_narrow = -1;
    int *narrow = send_bound(s, SENDS_FB);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(narrow[i], wide[i], "long lists: %d->%d: %d, 32-bit %d", i / 2, i % 2,
                     narrow[i], wide[i]);
    cr_expect(wide[1] > 0 && wide[2] > 0, "messages both ways (%d, %d)", wide[1], wide[2]);
    free(wide), free(narrow);
    schedule_free(s);
    sched_bound_narrow = keep, sched_bound_sparse = keep_sparse;
}

/* The generated IR's bound read off its lists (sched_bound_tree, core/schedule_bound_tree.c)
 * against the full replay, pair by pair, over every kind x ranks x chunks x microbatches x
 * iterations x replicas x message mask: the same pairs and bounds. The lists are read
 * exactly where the placement's workers talk along a forest and no stage is replicated
 * (every kind but interleaved on 3 ranks or more with 2 chunks or more, whose loop closes
 * a ring), and never
 * for lists changed after generation (counts dropped). */
Test(schedule_bound, lists_read_like_the_replay)
{
    static const int mbs[] = {1, 2, 3, 5, 8, 13};
    static const int reps[6] = {2, 1, 3, 1, 2, 2};
    const int keep = sched_bound_fast;
    long long read = 0, replayed = 0, pairs = 0;
    for (int k = 0; k < SCHED_NKINDS; k++) {
        const sched_traits *tr = sched_traits_of((sched_kind)k);
        const int chunked = sched_kind_chunked((sched_kind)k);
        for (int p = 1; p <= 5; p++)
            for (int v = tr->chunks_min; v <= tr->chunks_max && v <= 3; v++)
                for (size_t mi = 0; mi < sizeof mbs / sizeof mbs[0]; mi++)
                    for (int it = 1; it <= 2; it++)
                        for (int r = 0; r < 2; r++) {
                            int rr[16];
                            for (int i = 0; i < p * v; i++)
                                rr[i] = chunked || tr->mb_per_replica ? 2 : reps[i % 6];
                            const int m = mbs[mi] * (r && tr->mb_per_replica ? 6 : 1);
                            plumb_err e = {{0}};
                            schedule *s = try_gen(k, p, v, m, it, r ? rr : NULL, &e);
                            if (!s) continue;
                            const int ring = tr->place == SCHED_PLACE_LOOP && p > 2 && v > 1;
                            for (unsigned sends = 1; sends <= 3; sends++) {
                                const unsigned mask = ((sends & 1) ? 1u << ACT_SEND_F : 0) |
                                                      ((sends & 2) ? 1u << ACT_SEND_B : 0);
                                sched_pair_bound *fp = NULL, *rp = NULL;
                                int fn = -1, rn = -1;
                                int got = sched_bound_tree(s, mask, &fp, &fn, &e);
                                cr_assert_eq(got, r || ring ? 0 : 1, "%s p=%d v=%d m=%d it=%d "
                                             "reps %d: sched_bound_tree %d", tr->name, p, v,
                                             m, it, r, got);
                                read += got == 1, replayed += got == 0;
                                sched_bound_fast = 0;
                                cr_assert_eq(schedule_send_bound_pairs(s, mask, &rp, &rn, &e), 0,
                                             "%s", e.msg);
                                sched_bound_fast = keep;
                                if (got == 1) {
                                    cr_assert_eq(fn, rn, "%s p=%d v=%d m=%d it=%d sends %u: "
                                                 "%d pairs read, %d replayed", tr->name, p, v,
                                                 m, it, mask, fn, rn);
                                    for (int i = 0; i < rn; i++) {
                                        cr_expect(fp[i].from == rp[i].from &&
                                                  fp[i].to == rp[i].to &&
                                                  fp[i].bound == rp[i].bound,
                                                  "%s p=%d v=%d m=%d it=%d sends %u: "
                                                  "%d->%d: %d read, %d->%d: %d replayed",
                                                  tr->name, p, v, m, it, mask, fp[i].from,
                                                  fp[i].to, fp[i].bound, rp[i].from,
                                                  rp[i].to, rp[i].bound);
                                        pairs += rp[i].bound > 0;
                                    }
                                }
                                free(fp), free(rp);
                            }
                            if (!r && !ring) { /* lists changed after generation: replayed */
                                free(s->counts);
                                s->counts = NULL;
                                sched_pair_bound *fp = NULL;
                                int fn = -1;
                                cr_expect_eq(sched_bound_tree(s, SENDS_FB, &fp, &fn, &e), 0);
                                free(fp);
                            }
                            schedule_free(s);
                        }
    }
    cr_expect_gt(read, 1000, "%lld bounds read off the lists", read);
    cr_expect_gt(replayed, 300, "%lld replayed", replayed);
    cr_expect_gt(pairs, 4000, "%lld pairs with messages compared", pairs);
}

/* schedule_slots by its definition, as intervals: a microbatch of stage st opens on
 * worker w at a RECV_F or F of it there while it is closed, and closes at the first later
 * action by which both its backward is done (B or W of st) and its input gradient is gone
 * (SEND_B of st, a B or I of st - 1 on the same worker, or st = 0); the slots are the most
 * intervals that hold one position (at least 1). */
static int slots_by_intervals(const schedule *s, int w, int st)
{
    const action *l = s->acts[w];
    const int n = s->len[w], T = s->microbatches * s->iterations;
    int *depth = calloc((size_t)n + 1, sizeof *depth), *until = malloc(((size_t)T + 1) * sizeof *until);
    cr_assert(depth && until);
    for (int m = 0; m < T; m++) until[m] = -1;
    for (int j = 0; j < n; j++) {
        const action *a = &l[j];
        int m = a->microbatch;
        if (a->stage != st || (a->kind != ACT_RECV_F && a->kind != ACT_F)) continue;
        cr_assert(m >= 0 && m < T);
        if (until[m] > j) continue; /* open already */
        int bwd = 0, dx = st == 0, c = j + 1;
        for (; c < n && !(bwd && dx); c++) {
            const action *b = &l[c];
            if (b->microbatch != m) continue;
            if (b->stage == st && (b->kind == ACT_B || b->kind == ACT_W)) bwd = 1;
            if (b->stage == st && b->kind == ACT_SEND_B) dx = 1;
            if (b->stage == st - 1 && (b->kind == ACT_B || b->kind == ACT_I)) dx = 1;
        }
        if (bwd && dx) c--; /* the action that closes it holds it no more */
        for (int q = j; q < c || q == j; q++) depth[q]++;
        until[m] = c > j ? c : j + 1;
    }
    int best = 0;
    for (int q = 0; q < n; q++) best = depth[q] > best ? depth[q] : best;
    free(depth), free(until);
    return best > 0 ? best : 1;
}

Test(schedule_slots, counts_by_definition)
{
    long checked = 0, many = 0;
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 1; p <= 5; p++)
            for (int m = 1; m <= 9; m += 2)
                for (int it = 1; it <= 3; it += 2)
                    for (int r = 0; r < 2; r++) {
                        static const int reps[5] = {2, 1, 3, 1, 2};
                        const int chunked = sched_kind_chunked((sched_kind)k);
                        plumb_err e = {{0}};
                        schedule *s = try_gen(k, p, sched_kind_chunks((sched_kind)k),
                                              r ? 6 * m : m, it, r && !chunked ? reps : NULL,
                                              &e);
                        if (!s) continue;
                        for (int w = 0; w < s->nworkers; w++)
                            for (int st = 0; st < s->nstages; st++) {
                                int hosts = 0;
                                for (int j = 0; j < s->replicas[st]; j++)
                                    hosts |= s->stage_workers[s->stage_first[st] + j] == w;
                                if (!hosts) continue;
                                int want = slots_by_intervals(s, w, st),
                                    got = schedule_slots(s, w, st);
                                cr_expect_eq(got, want, "%s p=%d m=%d it=%d reps %d: worker %d "
                                             "stage %d: %d slots, by definition %d",
                                             sched_kind_name(k), p, m, it, r, w, st, got, want);
                                checked++;
                                many += want > 1;
                            }
                        schedule_free(s);
                    }
    cr_expect_gt(checked, 2000, "%ld (worker, stage) counted", checked);
    cr_expect_gt(many, 500, "%ld hold several microbatches", many);
}

/* schedule_slots numbers microbatches by their own number while they lie in [0, T), and
 * begins again with a hash table when it meets one outside, at the first action or midway:
 * renumbering the microbatches one to one (some or all moved past T) keeps every count. */
Test(schedule_slots, renumbered_microbatches_same_slots)
{
    for (int k = 0; k < SCHED_NKINDS; k++) {
        const sched_traits *tr = sched_traits_of((sched_kind)k);
        schedule *s = gen((sched_kind)k, 4, tr->chunks_min > 1 ? tr->chunks_min : 1, 8, 2, NULL);
        int T = s->microbatches * s->iterations, W = s->nworkers, S = s->nstages;
        int *want = calloc((size_t)W * S, sizeof *want);
        cr_assert(want);
        long busy = 0;
        for (int w = 0; w < W; w++)
            for (int st = 0; st < S; st++) {
                want[w * S + st] = schedule_slots(s, w, st);
                busy += want[w * S + st] > 1;
            }
        cr_assert_gt(busy, 0, "kind %d: some worker holds several microbatches", k);
        for (int pass = 0; pass < 2; pass++) {
            for (int w = 0; w < W; w++)
                for (int i = 0; i < s->len[w]; i++) {
                    action *a = &s->acts[w][i];
                    if (a->microbatch < 0) continue;
                    /* pass 0: the later half moved past T (met midway); pass 1: all moved */
                    if (pass == 1 || a->microbatch >= T / 2) a->microbatch += 3 * T;
                }
            for (int w = 0; w < W; w++)
                for (int st = 0; st < S; st++)
                    cr_assert_eq(schedule_slots(s, w, st), want[w * S + st],
                                 "kind %d pass %d worker %d stage %d", k, pass, w, st);
        }
        free(want);
        schedule_free(s);
    }
}

/* schedule_inflight against its definition, counted here per worker and stage: the
 * microbatches forwarded and not yet backwarded (B, or W when split), and the versions
 * held (the newest, one up at each STEP, and those the in-flight microbatches' forwards
 * used), their most at once, the most over a stage's replicas; every kind, replicated
 * stages, several iterations. */
Test(schedule_inflight, counts_by_definition)
{
    for (int k = 0; k < SCHED_NKINDS; k++)
        for (int p = 2; p <= 4; p++)
            for (int r = 0; r < 2; r++) {
                schedule *s = gen_shape(k, p, 12, 3, r);
                if (!s) continue;
                const int S = s->nstages, T = s->microbatches * s->iterations;
                int *act = calloc((size_t)S, sizeof *act), *ver = calloc((size_t)S, sizeof *ver);
                int *want_a = calloc((size_t)S, sizeof *want_a);
                int *want_v = calloc((size_t)S, sizeof *want_v);
                int *fv = malloc((size_t)S * T * sizeof *fv);
                int *open = malloc((size_t)T * sizeof *open); /* in flight: their versions */
                inflight(s, act, ver);
                for (int w = 0; w < s->nworkers; w++)
                    for (int st = 0; st < S; st++) {
                        int n = 0, cur = 0;
                        for (int i = 0; i < s->len[w]; i++) {
                            const action *a = &s->acts[w][i];
                            if (a->stage != st) continue;
                            if (a->kind == ACT_F) {
                                fv[st * T + a->microbatch] = a->version;
                                open[n++] = a->microbatch;
                            } else if (a->kind == ACT_B || a->kind == ACT_W) {
                                for (int j = 0; j < n; j++)
                                    if (open[j] == a->microbatch) open[j] = open[--n];
                            } else if (a->kind == ACT_STEP) {
                                cur++;
                            }
                            int held = 1; /* the newest, then each other version once */
                            for (int j = 0; j < n; j++) {
                                int v = fv[st * T + open[j]], seen = v == cur;
                                for (int q = 0; q < j && !seen; q++) seen = fv[st * T + open[q]] == v;
                                held += !seen;
                            }
                            if (n > want_a[st]) want_a[st] = n;
                            if (held > want_v[st]) want_v[st] = held;
                        }
                    }
                for (int st = 0; st < S; st++) {
                    cr_expect_eq(act[st], want_a[st], "%s p=%d reps %d stage %d: %d in flight, "
                                 "by definition %d", sched_kind_name(k), p, r, st, act[st],
                                 want_a[st]);
                    cr_expect_eq(ver[st], want_v[st] > 0 ? want_v[st] : 1, "%s p=%d reps %d "
                                 "stage %d: %d versions, by definition %d", sched_kind_name(k),
                                 p, r, st, ver[st], want_v[st]);
                }
                free(act), free(ver), free(want_a), free(want_v), free(fv), free(open);
                schedule_free(s);
            }
}

/* schedule_inflight checks each action's fields in its counting pass: the first bad one
 * in worker order is reported as schedule_validate reports it, whatever the kind of
 * field and however far into the list. */
Test(schedule_inflight, bad_field_reported_as_by_validate)
{
    for (int c = 0; c < 3; c++) {
        schedule *s = gen(SCHED_1F1B_FLUSH, 4, 1, 6, 2, NULL);
        int *act = calloc((size_t)s->nstages, sizeof *act);
        int *ver = calloc((size_t)s->nstages, sizeof *ver);
        int last = s->len[1] - 1; /* past the STEPs: an action with a microbatch */
        while (s->acts[1][last].microbatch < 0) last--;
        s->acts[2][1].stage = 99; /* a later worker, an earlier action */
        if (c == 0) s->acts[1][last].microbatch = 100000;
        if (c == 1) s->acts[1][last].kind = 15; /* no kind (the field's largest) */
        plumb_err ev = {{0}}, ei = {{0}};
        cr_assert_neq(schedule_validate(s, &ev), 0);
        cr_assert_neq(schedule_inflight(s, act, ver, &ei), 0);
        cr_assert_str_eq(ei.msg, ev.msg);
        cr_assert(strstr(ei.msg, c < 2 ? "worker 1 action" : "worker 2 action 1 "), "%s",
                  ei.msg);
        free(act), free(ver);
        schedule_free(s);
    }
}

/* The validator's count reads a transfer's peer placement once per peer stage: a worker
 * that was a good peer for one stage and is named for another is still refused, with
 * schedule_validate's message (1F1B over 4 ranks: worker 1's last gradient, for stage 0,
 * sent to worker 2, which received its activations). */
Test(schedule_inflight, peer_of_another_stage_refused)
{
    schedule *s = gen(SCHED_1F1B_FLUSH, 4, 1, 6, 1, NULL);
    int *act = calloc((size_t)s->nstages, sizeof *act);
    int *ver = calloc((size_t)s->nstages, sizeof *ver);
    int last = s->len[1] - 1;
    while (s->acts[1][last].kind != ACT_SEND_B) last--;
    cr_assert_eq(s->acts[1][last].peer, 0);
    s->acts[1][last].peer = 2;
    plumb_err ev = {{0}}, ei = {{0}};
    cr_assert_neq(schedule_validate(s, &ev), 0);
    cr_assert_neq(schedule_inflight(s, act, ver, &ei), 0, "a gradient to worker 2 counted");
    cr_assert_str_eq(ei.msg, ev.msg);
    cr_assert(strstr(ei.msg, "peer worker 2 does not hold stage 0"), "%s", ei.msg);
    free(act), free(ver);
    schedule_free(s);
}

/* Case i (0 <= i < LOWER_CASES) of the generated schedules the lowering tests below run
 * over: every kind, 1 to 6 ranks, 1 to 9 microbatches, 1 to 3 iterations, unit and uneven
 * costs, and costs so far apart that a forward's end rounds to its start (its send then
 * sorts before it: the lowering's general merge). Fills *sp, cost[3 * stages] and *c (the
 * cost shape); NULL where the kind refuses (2bw below its minimum). */
enum { LOWER_CASES = SCHED_NKINDS * 6 * 9 * 3 * 3 };
static schedule *lower_case(long i, sched_spec *sp, double *cost, int *c)
{
    int k = (int)(i / (6 * 9 * 3 * 3)), p = 1 + (int)(i / (9 * 3 * 3) % 6);
    int m = 1 + (int)(i / (3 * 3) % 9), it = 1 + (int)(i / 3 % 3), v = sched_kind_chunks(k);
    int S = p * v;
    *c = (int)(i % 3);
    for (int st = 0; st < S; st++)
        for (int q = 0; q < 3; q++)
            cost[3 * st + q] = *c == 0 ? 1
                : *c == 1 ? 1 + 0.37 * ((st * 7 + q * 3 + m) % 5)
                : st == 0 && q == 0 ? 1e-9 : 1e9;
    *sp = (sched_spec){(sched_kind)k, 0, S, v, m, it, NULL, NULL};
    plumb_err e = {{0}};
    return schedule_generate_costed(sp, cost, &e);
}

/* The compute order of IR s (its F, B, I, W in list order), each with version -1 and the
 * given peer: a new vector per worker (the caller frees the array). */
static actvec *compute_order_of(const schedule *s, int peer)
{
    actvec *l = calloc((size_t)s->nworkers, sizeof *l);
    cr_assert(l);
    for (int w = 0; w < s->nworkers; w++)
        for (int j = 0; j < s->len[w]; j++) {
            action a = s->acts[w][j];
            if (!act_is_compute(a.kind)) continue;
            a.version = -1, a.peer = peer;
            cr_assert_eq(actvec_push(&l[w], a), 0);
        }
    return l;
}

/* The lowering of a generated order places the STEPs and fills the versions as it writes
 * (no replicated stage); the IR must be the one sched_lower then sched_place_steps and
 * sched_assign_versions (the passes an imported file still takes) build from the same
 * compute order and costs, in every case of lower_case. */
Test(schedule_lower, fused_steps_and_versions_as_the_passes)
{
    long checked = 0;
    for (long i = 0; i < LOWER_CASES; i++) {
        sched_spec sp;
        double cost[3 * 64];
        int c, k, p, m, it;
        schedule *s = lower_case(i, &sp, cost, &c);
        if (!s) continue;
        k = sp.kind, p = sp.nstages / sp.chunks, m = sp.microbatches;
        it = sp.iterations;
        plumb_err e = {{0}};
        schedule *r = sched_alloc(&sp, &e);
        cr_assert(r, "%s", e.msg);
        actvec *l = compute_order_of(s, -1);
        cr_assert_eq(sched_lower(r, l, cost, &e), 0, "%s", e.msg);
        cr_assert_eq(sched_place_steps(r, l, &e), 0, "%s", e.msg);
        sched_assign_versions(r, l);
        cr_assert_eq(sched_adopt(r, l, &e), 0);
        r->backward_split = s->backward_split;
        cr_assert(schedule_equal(s, r), "kind %d p=%d m=%d it=%d costs %d", k, p,
                  m, it, c);
        free(l);
        schedule_free(r);
        schedule_free(s);
        checked++;
    }
    cr_assert_gt(checked, 1200, "checked %ld", checked);
}

/* The fused lowering keeps each compute's start in the compute's version and peer while
 * it writes, where every compute has -1 there; an order whose computes carry a peer of
 * their own is timed again as it is written instead (core/schedule_lower.c, emit_start):
 * the same IR but for that peer, kept, and the same counts, in every seventh case of
 * lower_case (rounding costs included). It fails when the start is kept in such a compute
 * (its peer comes back as -1) or when the two timings differ. */
Test(schedule_lower, computes_with_a_peer_timed_again)
{
    long checked = 0;
    for (long i = 0; i < LOWER_CASES; i += 7) {
        sched_spec sp;
        double cost[3 * 64];
        int c;
        schedule *s = lower_case(i, &sp, cost, &c);
        if (!s) continue;
        plumb_err e = {{0}};
        schedule *r = sched_alloc(&sp, &e);
        cr_assert(r, "%s", e.msg);
        actvec *l = compute_order_of(s, 7);
        cr_assert_eq(sched_finish(r, l, cost, &e), 0, "%s", e.msg);
        for (int w = 0; w < s->nworkers; w++) {
            cr_assert_eq(r->len[w], s->len[w], "case %ld worker %d", i, w);
            for (int j = 0; j < s->len[w]; j++) {
                action x = r->acts[w][j];
                if (act_is_compute(x.kind)) {
                    cr_assert_eq(x.peer, 7, "case %ld worker %d action %d", i, w, j);
                    x.peer = -1;
                }
                cr_assert(!memcmp(&x, &s->acts[w][j], sizeof x), "case %ld worker %d action %d "
                          "(costs %d)", i, w, j, c);
            }
        }
        cr_assert(r->counts && s->counts);
        cr_assert(!memcmp(r->counts, s->counts, 3 * (size_t)s->nstages * sizeof *s->counts));
        free(l);
        schedule_free(r);
        schedule_free(s);
        checked++;
    }
    cr_assert_gt(checked, 150, "checked %ld", checked);
}

/* A compute whose stage or microbatch lies outside the schedule (below 0 or past the
 * last) is refused by the lowering with its worker and place, before anything indexes by
 * it. */
Test(schedule_lower, compute_out_of_range_refused)
{
    static const int bad[][2] = {{-1, 0}, {2, 0}, {0, -1}, {0, 2}}; /* stage, microbatch */
    sched_spec sp = {SCHED_GPIPE, 0, 2, 1, 2, 1, NULL, NULL};
    for (int b = 0; b < 4; b++) {
        plumb_err e = {{0}};
        schedule *r = sched_alloc(&sp, &e);
        cr_assert(r, "%s", e.msg);
        actvec l[2] = {{0}};
        cr_assert_eq(actvec_push(&l[0], act_make(ACT_F, 0, 0)), 0);
        cr_assert_eq(actvec_push(&l[0], act_make(ACT_F, bad[b][0], bad[b][1])), 0);
        cr_assert_eq(sched_lower(r, l, NULL, &e), -1);
        cr_assert(strstr(e.msg, "worker 0 action 1 ("), "%s", e.msg);
        cr_assert(strstr(e.msg, "): stage or microbatch out of range"), "%s", e.msg);
        actvec_free(&l[0]);
        actvec_free(&l[1]);
        schedule_free(r);
    }
}

/* A generated IR with no replicated stage carries its lowering's counts (s->counts) and
 * schedule_inflight_fresh and schedule_slots_fresh answer them: they must be
 * schedule_inflight's and schedule_slots' (each checked against its definition in this
 * file) in every case of lower_case (its far apart costs take the lowering's general
 * merge, which writes a list again). That the answer is the stored one, not a pass: a
 * list changed afterwards without dropping them (outside the contract) keeps the counts
 * taken at lowering. A replicated schedule and an imported file carry none (the pass and
 * the scan answer). */
Test(schedule_inflight, fresh_counts_equal_the_pass)
{
    long checked = 0;
    for (long i = 0; i < LOWER_CASES; i++) {
        sched_spec sp;
        double cost[3 * 64];
        int c;
        schedule *s = lower_case(i, &sp, cost, &c);
        if (!s) continue;
        int k = sp.kind, p = sp.nstages / sp.chunks, m = sp.microbatches;
        int it = sp.iterations, S = sp.nstages;
        plumb_err e = {{0}};
        int act[64], ver[64], fa[64], fv[64];
        inflight(s, act, ver);
        cr_assert(s->counts, "%s p=%d m=%d it=%d costs %d: no counts taken",
                  sched_kind_name(k), p, m, it, c);
        cr_assert_eq(schedule_inflight_fresh(s, fa, fv, &e), 0, "%s", e.msg);
        for (int st = 0; st < S; st++) {
            cr_assert_eq(fa[st], act[st], "%s p=%d m=%d it=%d costs %d stage "
                         "%d: %d in flight, the pass %d", sched_kind_name(k),
                         p, m, it, c, st, fa[st], act[st]);
            cr_assert_eq(fv[st], ver[st], "%s p=%d m=%d it=%d costs %d stage "
                         "%d: %d versions, the pass %d", sched_kind_name(k),
                         p, m, it, c, st, fv[st], ver[st]);
            int w = s->stage_workers[s->stage_first[st]];
            int fs = schedule_slots_fresh(s, w, st), ps = schedule_slots(s, w, st);
            cr_assert_eq(fs, ps, "%s p=%d m=%d it=%d costs %d stage %d: %d slots, the "
                         "scan %d", sched_kind_name(k), p, m, it, c, st, fs, ps);
        }
        schedule_free(s);
        checked++;
    }
    cr_assert_gt(checked, 1200, "checked %ld", checked);

    /* the lowering's answer: a forward dropped afterwards changes the pass, not it */
    schedule *s = gen(SCHED_GPIPE, 3, 1, 6, 1, NULL);
    int act[3], ver[3], fa[3], fv[3];
    inflight(s, act, ver);
    for (int i = 0; i < s->len[0]; i++)
        if (s->acts[0][i].kind == ACT_F) s->acts[0][i].kind = ACT_I; /* counts nothing */
    plumb_err e = {{0}};
    cr_assert_eq(schedule_inflight_fresh(s, fa, fv, &e), 0, "%s", e.msg);
    cr_assert_eq(fa[0], act[0], "fresh %d, lowered %d", fa[0], act[0]);
    cr_assert_eq(act[0], 6);
    cr_assert_eq(schedule_slots_fresh(s, 0, 0), 6);
    cr_assert_eq(schedule_slots(s, 0, 0), 1, "the scan counts the changed list");
    int changed[3];
    inflight(s, changed, ver);
    cr_assert_eq(changed[0], 0, "the pass counts the changed list (%d)", changed[0]);
    schedule_free(s);
    /* a replicated schedule carries none: the pass counts its changed list */
    static const int reps[3] = {1, 2, 1};
    s = gen(SCHED_GPIPE, 3, 1, 6, 1, reps);
    cr_assert_null(s->counts);
    for (int i = 0; i < s->len[0]; i++)
        if (s->acts[0][i].kind == ACT_F) s->acts[0][i].kind = ACT_I;
    cr_assert_eq(schedule_inflight_fresh(s, fa, fv, &e), 0, "%s", e.msg);
    cr_assert_eq(fa[0], 0, "replicated: the pass (got %d)", fa[0]);
    schedule_free(s);
    /* nor does an imported file (its lists adopted: sched_adopt drops counts) */
    s = gen(SCHED_1F1B_FLUSH, 3, 1, 6, 1, NULL);
    char path[] = "/tmp/plumb_fresh_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_eq(schedule_write_csv(s, f), 0);
    fclose(f);
    sched_spec sp = {SCHED_1F1B_FLUSH, 0, 3, 1, 6, 1, NULL, NULL};
    schedule *r = schedule_read_csv(path, &sp, &e);
    unlink(path);
    cr_assert(r, "%s", e.msg);
    cr_assert_null(r->counts);
    inflight(s, act, ver);
    cr_assert_eq(schedule_inflight_fresh(r, fa, fv, &e), 0, "%s", e.msg);
    for (int st = 0; st < 3; st++)
        cr_assert(fa[st] == act[st] && fv[st] == ver[st], "stage %d", st);
    schedule_free(r);
    schedule_free(s);
}
