/* test_schedule_traits.c: the schedule kinds' trait table (core/schedule_traits.h) and
 * DualPipeV, the kind added through it: its order on each rank against the one derived by
 * hand from DeepSeek's phase description, the validator's proof over p = 1..8 ranks and
 * many microbatch counts, the activations each stage holds (2p - s, derived by hand), and
 * the simulator's makespan against a replay written here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "core/schedule_traits.h"
#include "sim/sim.h"
#include "sim/synth.h"

Test(traits, one_row_per_kind)
{
    for (int k = 0; k < SCHED_NKINDS; k++) {
        const sched_traits *t = sched_traits_of((sched_kind)k);
        cr_assert_not_null(t);
        cr_assert_eq((int)t->kind, k, "row %d is kind %d", k, (int)t->kind);
        cr_assert_eq(sched_traits_find(t->name), t);
        cr_assert(t->chunks_min >= 1 && t->chunks_min <= t->chunks_default &&
                  t->chunks_default <= t->chunks_max, "%s: chunks", t->name);
        /* several chunks per rank go with a loop or a V, one with a stage per rank */
        cr_assert_eq(t->chunks_max > 1, t->place != SCHED_PLACE_STAGE, "%s", t->name);
        cr_assert_eq(t->place == SCHED_PLACE_V, t->chunks_min == 2 && t->chunks_max == 2);
        cr_assert(t->versions == 1 || t->async, "%s: several versions without asynchrony",
                  t->name);
        cr_assert(!t->async || !t->split_backward);
        cr_assert_eq(sched_traits_of(t->partition_twin)->async, t->async);
    }
    cr_assert_null(sched_traits_of(SCHED_NKINDS));
    cr_assert_null(sched_traits_of((sched_kind)-1));
    cr_assert_null(sched_traits_find("1F1B"));
    cr_assert_null(sched_traits_find(NULL));
    char buf[200];
    cr_assert_str_eq(sched_kind_list(buf, sizeof buf, ", "), "gpipe, 1f1b-flush, pipedream, "
                     "2bw, interleaved, zb-h1, zb-v, dualpipev");
    cr_assert_str_eq(sched_kind_list(buf, 12, "|"), "gpipe|1f1b-");
}

Test(traits, placements)
{
    /* 3 ranks: the loop 0 1 2 0 1 2, the V 0 1 2 2 1 0 */
    static const int loop[6] = {0, 1, 2, 0, 1, 2}, vee[6] = {0, 1, 2, 2, 1, 0};
    for (int st = 0; st < 6; st++) {
        cr_assert_eq(sched_kind_rank(SCHED_INTERLEAVED, st, 3), loop[st]);
        cr_assert_eq(sched_kind_rank(SCHED_ZB_V, st, 3), vee[st]);
        cr_assert_eq(sched_kind_rank(SCHED_DUALPIPEV, st, 3), vee[st]);
        cr_assert_eq(sched_kind_rank(SCHED_1F1B_FLUSH, st, 3), st);
    }
    cr_assert_eq(sched_kind_rank(SCHED_NKINDS, 0, 3), -1);
    cr_assert_eq(sched_kind_chunks(SCHED_DUALPIPEV), 2);
    cr_assert_eq(sched_kind_chunks(SCHED_GPIPE), 1);
    cr_assert(sched_kind_chunked(SCHED_DUALPIPEV) && !sched_kind_chunked(SCHED_ZB_H1));
}

static schedule *dpv(int p, int m, int iters, plumb_err *e)
{
    sched_spec sp = {SCHED_DUALPIPEV, 0, 2 * p, 2, m, iters, NULL, NULL};
    return schedule_generate(&sp, e);
}

/* The compute actions of worker w, space-separated ("0F0 3I0 ..."). */
static void compute_order(const schedule *s, int w, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < s->len[w] && o + 16 < n; i++) {
        const action *a = &s->acts[w][i];
        if (a->kind == ACT_F || a->kind == ACT_B || a->kind == ACT_I || a->kind == ACT_W) {
            char t[48];
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? " " : "", action_format(a, t,
                                  sizeof t));
        }
    }
}

/* p = 2, 4 microbatches, worked through DeepSeek's eight phases by hand. Rank 0 holds
 * stages 0 and 3: 2 (p - r - 1) = 2 forwards of stage 0; r + 1 = 1 pair F0 F3; p - r - 1 =
 * 1 split backward of stage 3 with its W at once, then F3; M - 2p + r + 1 = 1 round of
 * F0 B3 F3 B0; 1 round of B3 F3 B0; r + 1 = 1 round of the drain, an even rank splitting
 * after its stage-3 backward (B3, then I0 of stage 0); 1 round of W, I; the last W. */
Test(dualpipev, order_derived_by_hand)
{
    plumb_err e = {{0}};
    schedule *s = dpv(2, 4, 1, &e);
    cr_assert_not_null(s, "%s", e.msg);
    char got[512];
    compute_order(s, 0, got, sizeof got);
    cr_expect_str_eq(got, "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 "
                     "0W2 0I3 0W3");
    /* rank 1 (stages 1 and 2, the bottom of the V): no fill, 2 pairs F1 F2, 2 rounds of
     * F1 B2 F2 B1, the drain split from the second round on (odd rank: before B2) */
    compute_order(s, 1, got, sizeof got);
    cr_expect_str_eq(got, "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 "
                     "2W3 1W3");
    schedule_free(s);
}

Test(dualpipev, validator_proves_every_shape)
{
    long built = 0;
    for (int p = 1; p <= 8; p++) {
        const int ms[] = {1, 2, p, 2 * p - 1, 2 * p, 2 * p + 1, 3 * p + 1, 24};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            for (int iters = 1; iters <= 2; iters++) {
                int m = ms[i];
                plumb_err e = {{0}};
                schedule *s = dpv(p, m, iters, &e);
                cr_assert_not_null(s, "p=%d m=%d: %s", p, m, e.msg);
                cr_assert_eq(s->nworkers, p);
                cr_assert_eq(schedule_validate(s, &e), 0, "p=%d m=%d it=%d: %s", p, m, iters,
                             e.msg);
                cr_assert_eq(schedule_validate_sem(s, SCHED_SEM_BUFFERED, &e), 0, "%s", e.msg);
                long T = (long)m * iters, S = 2 * p;
                cr_assert_eq(schedule_count(s, ACT_F), T * S);
                cr_assert_eq(schedule_count(s, ACT_B) + schedule_count(s, ACT_I), T * S);
                cr_assert_eq(schedule_count(s, ACT_I), schedule_count(s, ACT_W));
                cr_assert_eq(schedule_count(s, ACT_STEP), iters * S);
                /* the V: rank r holds stages r and 2p - 1 - r; the turn is on one worker */
                for (int r = 0; r < p; r++)
                    cr_assert_eq(s->stage_workers[s->stage_first[r]],
                                 s->stage_workers[s->stage_first[S - 1 - r]]);
                for (int w = 0; w < p; w++)
                    for (int j = 0; j < s->len[w]; j++)
                        if (s->acts[w][j].kind == ACT_SEND_F)
                            cr_assert_neq(s->acts[w][j].stage, p - 1);
                built++;
                schedule_free(s);
            }
    }
    cr_assert_eq(built, 8 * 8 * 2);
}

/* Stage s of the 2p stages holds at most 2p - s microbatches' activations (M >= 2p): rank
 * r's stage r forwards 2 (p - r - 1) + (r + 1) + 1 = 2p - r before its first backward
 * (phases 1, 2 and the first round of phase 4), and stage 2p - 1 - r forwards r + 1
 * (phase 2) and then frees one before each further forward (phases 3 and 4). Fewer
 * microbatches cap it at M. */
Test(dualpipev, activations_held_per_stage)
{
    for (int p = 2; p <= 6; p++)
        for (int m = 1; m <= 3 * p; m++) {
            plumb_err e = {{0}};
            schedule *s = dpv(p, m, 2, &e);
            cr_assert_not_null(s);
            int act[16], ver[16];
            cr_assert_eq(schedule_inflight(s, act, ver, &e), 0, "%s", e.msg);
            for (int st = 0; st < 2 * p; st++) {
                int want = 2 * p - st < m ? 2 * p - st : m;
                cr_expect_eq(act[st], want, "p=%d m=%d stage %d holds %d, want %d", p, m, st,
                             act[st], want);
                cr_expect_eq(ver[st], 1);
            }
            schedule_free(s);
        }
}

Test(dualpipev, bad_specs_rejected)
{
    plumb_err e = {{0}};
    sched_spec sp = {SCHED_DUALPIPEV, 0, 6, 3, 4, 1, NULL, NULL};
    cr_assert_null(schedule_generate(&sp, &e));
    cr_assert(strstr(e.msg, "dualpipev needs exactly 2 chunks"), "%s", e.msg);
    int reps[4] = {2, 1, 1, 1};
    sched_spec rp = {SCHED_DUALPIPEV, 0, 4, 2, 4, 1, reps, NULL};
    cr_assert_null(schedule_generate(&rp, &e));
    cr_assert(strstr(e.msg, "replica"), "%s", e.msg);
    int loop[4] = {0, 1, 0, 1}; /* the interleaved placement is not a V */
    sched_spec lp = {SCHED_DUALPIPEV, 0, 4, 2, 4, 1, NULL, loop};
    cr_assert_null(schedule_generate(&lp, &e));
    cr_assert(strstr(e.msg, "workers"), "%s", e.msg);
}

/* The end of the last computation when every worker runs its list in order, a RECV waits
 * for its data and everything else for the worker only; transfers take no time. Written
 * here from the IR's rules, not taken from the simulator: fin[] holds when each (kind,
 * stage, microbatch) computation ended. f/i/w: seconds per stage of F, I, W (B = I + W). */
static double replay(const schedule *s, double f, double i, double w)
{
    int S = s->nstages, T = s->microbatches * s->iterations;
    double *fin = malloc(sizeof(double) * 2 * S * T), *clock = calloc(s->nworkers, sizeof *clock);
    int *at = calloc(s->nworkers, sizeof *at), moved = 1;
    for (int k = 0; k < 2 * S * T; k++) fin[k] = -1;
#define FWD(st, m) fin[(st) * T + (m)]
#define BWD(st, m) fin[S * T + (st) * T + (m)]
    while (moved) {
        moved = 0;
        for (int wk = 0; wk < s->nworkers; wk++)
            for (; at[wk] < s->len[wk]; at[wk]++, moved = 1) {
                const action *a = &s->acts[wk][at[wk]];
                double ready = clock[wk];
                if (a->kind == ACT_RECV_F || a->kind == ACT_RECV_B) {
                    double d = a->kind == ACT_RECV_F ? FWD(a->stage - 1, a->microbatch)
                                                     : BWD(a->stage + 1, a->microbatch);
                    if (d < 0) break; /* not produced yet: another worker first */
                    clock[wk] = d > ready ? d : ready;
                    continue;
                }
                double dt = a->kind == ACT_F ? f : a->kind == ACT_I ? i : a->kind == ACT_W ? w
                          : a->kind == ACT_B ? i + w : 0;
                clock[wk] = ready + dt;
                if (a->kind == ACT_F) FWD(a->stage, a->microbatch) = clock[wk];
                if (a->kind == ACT_B || a->kind == ACT_I) BWD(a->stage, a->microbatch) = clock[wk];
            }
    }
    double end = 0;
    for (int wk = 0; wk < s->nworkers; wk++) {
        cr_assert_eq(at[wk], s->len[wk], "replay stuck on worker %d", wk);
        if (clock[wk] > end) end = clock[wk];
    }
#undef FWD
#undef BWD
    free(fin), free(clock), free(at);
    return end;
}

/* A synthetic DualPipeV plan of 2p stages of one layer (F f ms, I i ms, W w ms) on p
 * devices, M microbatches, free transfers and steps (no activations, latency, parameters). */
static plan *dpv_plan(int p, int m, double f, double i, double w)
{
    sim_synth s;
    sim_synth_init(&s);
    s.activation_bytes = 0;
    s.latency_us[0] = s.latency_us[1] = 0;
    s.parameter_bytes = 0;
    s.schedule = SCHED_DUALPIPEV;
    s.chunks = 2;
    s.nstages = 2 * p;
    s.microbatches = m;
    s.forward_ms = f;
    s.backward_ms = i + w;
    s.input_ms = i;
    s.weight_ms = w;
    plumb_err e = {{0}};
    plan *pl = sim_synth_plan(&s, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    return pl;
}

/* The simulator runs DualPipeV: with free transfers and steps its makespan is the replay's
 * (F = 2 ms, I = 1.5 ms, W = 1 ms per stage). */
Test(dualpipev, simulator_matches_replay)
{
    for (int p = 2; p <= 4; p++) {
        plan *pl = dpv_plan(p, 3 * p, 2, 1.5, 1);
        plumb_err e = {{0}};
        sim_report *r = sim_run(pl, NULL, &e);
        cr_assert_not_null(r, "%s", e.msg);
        schedule *sc = schedule_from_plan(pl, r->iterations, &e);
        cr_assert_not_null(sc, "%s", e.msg);
        double want = replay(sc, 2e-3, 1.5e-3, 1e-3);
        cr_expect(fabs(r->makespan_s - want) <= 1e-9 * want, "p=%d: simulated %.9g s, replay "
                  "%.9g s", p, r->makespan_s, want);
        cr_expect_gt(r->iteration_s, 0);
        schedule_free(sc);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* 8 stages of 1 layer on 4 devices (F = 1 ms, I = W = 1 ms), 8 microbatches, free
 * transfers: a device works 2 x 8 x 3 = 48 ms per iteration, and DualPipeV's iteration
 * lies between that and 1f1b-flush's closed form on the same layers cut into 4 stages,
 * (M + p - 1)(F + B) = 11 x 6 = 66 ms. */
Test(dualpipev, iteration_between_work_and_1f1b)
{
    plan *pl = dpv_plan(4, 8, 1, 1, 1);
    plumb_err e = {{0}};
    sim_report *r = sim_run(pl, NULL, &e);
    cr_assert_not_null(r, "%s", e.msg);
    cr_expect(r->iteration_s >= 48e-3 - 1e-12 && r->iteration_s < 66e-3, "iteration %g s",
              r->iteration_s);
    cr_expect(r->bubble_fraction < 0.1, "bubble %g", r->bubble_fraction);
    sim_report_free(r);
    plan_free(pl);
}
