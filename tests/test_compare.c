/* test_compare.c: plumb compare's alignment and error maths on small hand-built timelines
 * and reports: per (stage, kind) means and medians, skipped warm-up iterations, per-replica
 * busy time, steady-state iteration time, the error convention, report summaries (B, or
 * I and W for zero-bubble), JSON output, and bad inputs (unreadable, neither a trace nor a
 * report, malformed, different plans) refused with exit status 2. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/timeline.h"
#include "sim/compare.h"
#include "sim/sim.h"
#include "sim/synth.h"

#define MS 1e-3

static void add(timeline *tl, int track, int kind, int stage, int mb, int it, double t0_ms,
                double dur_ms)
{
    tl_event e = {t0_ms * MS, dur_ms * MS, 0, track, kind, stage, -1, mb, it};
    if (kind == TL_SEND_F) e.peer_stage = stage + 1;
    if (kind == TL_SEND_B) e.peer_stage = stage - 1;
    cr_assert_eq(timeline_add(tl, &e), 0);
}

/* Two stages on devices 0 and 1, `iters` iterations of one microbatch each, every F of
 * stage s lasting f[s] ms and every B b[s] ms, a 0.5 ms transfer each way; iteration i
 * starts at i * period_ms. Iteration 0 is slowed by `warm` (x). */
static timeline *pipe2(const char *src, int iters, const double *f, const double *b,
                       double period_ms, double warm)
{
    timeline *tl = timeline_new(src);
    cr_assert_not_null(tl);
    int d0 = timeline_track(tl, TL_TRACK_DEVICE, 0, -1, NULL);
    int d1 = timeline_track(tl, TL_TRACK_DEVICE, 1, -1, NULL);
    int l01 = timeline_track(tl, TL_TRACK_LINK, 0, 1, NULL);
    int l10 = timeline_track(tl, TL_TRACK_LINK, 1, 0, NULL);
    for (int i = 0; i < iters; i++) {
        double x = i == 0 ? warm : 1, t = i * period_ms;
        add(tl, d0, TL_F, 0, i, i, t, f[0] * x);
        t += f[0] * x;
        add(tl, l01, TL_SEND_F, 0, i, i, t, 0.5);
        t += 0.5;
        add(tl, d1, TL_F, 1, i, i, t, f[1] * x);
        t += f[1] * x;
        add(tl, d1, TL_B, 1, i, i, t, b[1] * x);
        t += b[1] * x;
        add(tl, l10, TL_SEND_B, 1, i, i, t, 0.5);
        t += 0.5;
        add(tl, d0, TL_B, 0, i, i, t, b[0] * x);
        t += b[0] * x;
        add(tl, d0, TL_STEP, 0, -1, i, t, 0.1);
        add(tl, d1, TL_STEP, 1, -1, i, t, 0.1);
    }
    return tl;
}

static const compare_row *find_row(const compare_result *r, int stage, int kind)
{
    for (int i = 0; i < r->nrows; i++)
        if (r->rows[i].stage == stage && r->rows[i].kind == kind) return &r->rows[i];
    return NULL;
}

static void near(double got, double want, const char *what)
{
    cr_assert(fabs(got - want) <= 1e-9 * fmax(1, fabs(want)), "%s: got %.12g, want %.12g", what,
              got, want);
}

/* t's side of a comparison (compare_side_from_timeline, skipping skip iterations) from
 * the file src of kind what; fails the test, naming src, when it is refused. The caller
 * frees s with compare_side_free. */
static void side_of(const timeline *t, int skip, const char *src, const char *what,
                    compare_side *s)
{
    plumb_err err = {{0}};
    cr_assert_eq(compare_side_from_timeline(t, skip, src, what, s, &err), 0, "%s: %s", src,
                 err.msg);
}

/* The comparison of predicted side p with measured side m into r; fails the test, naming
 * label, when it is refused. The caller frees r with compare_result_free. */
static void compare_ok(const compare_side *p, const compare_side *m, compare_result *r,
                       const char *label)
{
    plumb_err err = {{0}};
    cr_assert_eq(compare_sides(p, m, r, &err), 0, "%s: %s", label, err.msg);
}

/* Frees a comparison: its result r, its sides a and b and their timelines ta and tb (NULL:
 * none, as when both sides are of ta). */
static void free_comparison(compare_result *r, compare_side *a, compare_side *b, timeline *ta,
                            timeline *tb)
{
    compare_result_free(r);
    compare_side_free(a);
    compare_side_free(b);
    timeline_free(ta);
    timeline_free(tb);
}

Test(compare, error_convention)
{
    near(compare_error(1.0, 1.25), -0.2, "faster prediction");
    near(compare_error(3.0, 2.0), 0.5, "slower prediction");
    cr_assert(isnan(compare_error(1.0, 0)));
    cr_assert(isnan(compare_error(-1, 2.0)));
    near(compare_error(0, 2.0), -1, "zero prediction");
}

Test(compare, aligns_stages_and_kinds)
{
    double pf[] = {1.0, 2.0}, pb[] = {2.0, 4.0}, mf[] = {1.25, 2.0}, mb[] = {2.5, 3.2};
    timeline *pt = pipe2("sim", 3, pf, pb, 20, 1);
    timeline *mt = pipe2("exec", 5, mf, mb, 25, 2); /* a slow first iteration */
    compare_side p, m;
    side_of(pt, 1, "pred.json", "sim trace", &p);
    /* skip 2: the slow iteration 0 also moves the end of iteration 0, where the
     * steady-state period would otherwise start */
    side_of(mt, 2, "meas.json", "exec trace", &m);
    cr_assert_eq(p.nstages, 2);
    cr_assert_eq(p.iterations, 3);
    cr_assert_eq(p.used, 2);
    cr_assert_eq(m.iterations, 5);
    cr_assert_eq(m.used, 3);
    compare_result r;
    compare_ok(&p, &m, &r, "pred.json against meas.json");
    /* per (stage, kind): the skipped warm-up iteration does not count */
    const compare_row *f0 = find_row(&r, 0, TL_F), *b1 = find_row(&r, 1, TL_B);
    cr_assert_not_null(f0);
    cr_assert_not_null(b1);
    near(f0->pred_s, 1.0 * MS, "pred F s0");
    near(f0->meas_s, 1.25 * MS, "meas F s0");
    near(f0->error, -0.2, "F s0 error");
    cr_assert_eq(f0->pred_n, 2);
    cr_assert_eq(f0->meas_n, 3);
    near(b1->error, 4.0 / 3.2 - 1, "B s1 error");
    near(b1->error_med, 4.0 / 3.2 - 1, "B s1 median error");
    const compare_row *sf = find_row(&r, 0, TL_SEND_F), *sb = find_row(&r, 1, TL_SEND_B);
    cr_assert(sf && sb);
    near(sf->error, 0, "send_f");
    cr_assert_null(find_row(&r, 1, TL_SEND_F));
    cr_assert_null(find_row(&r, 0, TL_ALLREDUCE));
    /* per kind over all stages: F means (1 + 2) / 2 against (1.25 + 2) / 2 */
    int fk = -1;
    for (int i = 0; i < r.nkinds; i++)
        if (r.kinds[i].kind == TL_F) fk = i;
    cr_assert(fk >= 0);
    near(r.kinds[fk].pred_s, 1.5 * MS, "kind F pred");
    near(r.kinds[fk].meas_s, 1.625 * MS, "kind F meas");
    /* per stage compute per iteration: F + B + step */
    cr_assert_eq(r.nstages, 2);
    near(r.stages[0].pred_s, (1.0 + 2.0 + 0.1) * MS, "busy s0 pred");
    near(r.stages[0].meas_s, (1.25 + 2.5 + 0.1) * MS, "busy s0 meas");
    near(r.idle[0].pred_s, (20 - 3.1) * MS, "idle s0 pred");
    near(r.idle[1].meas_s, (25 - (2.0 + 3.2 + 0.1)) * MS, "idle s1 meas");
    /* iteration: the period of the steady state */
    near(r.iteration.pred_s, 20 * MS, "pred iteration");
    near(r.iteration.meas_s, 25 * MS, "meas iteration");
    near(r.iteration.error, -0.2, "iteration error");
    /* mean |error| of F/B: s0 F -0.2, s0 B -0.2, s1 F 0, s1 B +0.25 */
    near(r.mean_abs_error, (0.2 + 0.2 + 0 + 0.25) / 4, "mean |error|");
    free_comparison(&r, &p, &m, pt, mt);
}

Test(compare, skip_zero_counts_the_warm_up_and_skip_is_clamped)
{
    double f[] = {1.0, 1.0}, b[] = {1.0, 1.0};
    timeline *t = pipe2("exec", 2, f, b, 10, 3);
    compare_side s;
    side_of(t, 0, "t", "exec trace", &s);
    cr_assert_eq(s.used, 2);
    near(s.cells[0 * TL_NKINDS + TL_F].total_s, (3.0 + 1.0) * MS, "F s0 total");
    near(s.cells[0 * TL_NKINDS + TL_F].median_s, 2.0 * MS, "F s0 median of 3 and 1");
    compare_side_free(&s);
    side_of(t, 99, "t", "exec trace", &s);
    cr_assert_eq(s.used, 1); /* at least the last iteration is kept */
    near(s.cells[0 * TL_NKINDS + TL_F].total_s, 1.0 * MS, "F s0 last only");
    compare_side_free(&s);
    timeline_free(t);
}

Test(compare, medians_resist_a_long_tail)
{
    timeline *t = timeline_new("exec");
    int d = timeline_track(t, TL_TRACK_DEVICE, 0, -1, NULL);
    double durs[] = {1, 2, 30, 2, 1.5}; /* one preempted action */
    for (int i = 0; i < 5; i++) add(t, d, TL_F, 0, i, 1, 100.0 * i, durs[i]);
    add(t, d, TL_F, 0, 9, 0, 0, 500); /* iteration 0, skipped */
    compare_side s;
    side_of(t, 1, "t", "exec trace", &s);
    near(s.cells[TL_F].total_s / s.cells[TL_F].n, 36.5 / 5 * MS, "mean");
    near(s.cells[TL_F].median_s, 2 * MS, "median");
    near(s.kinds[TL_F].median_s, 2 * MS, "kind median");
    near(s.busy_s[0], 36.5 * MS, "busy per iteration (one counted)");
    compare_side_free(&s);
    timeline_free(t);
}

Test(compare, busy_time_is_per_replica)
{
    timeline *t = timeline_new("exec");
    int d0 = timeline_track(t, TL_TRACK_DEVICE, 0, -1, NULL);
    int d1 = timeline_track(t, TL_TRACK_DEVICE, 1, -1, NULL);
    int c0 = timeline_track(t, TL_TRACK_COLLECTIVE, 0, -1, NULL);
    int c1 = timeline_track(t, TL_TRACK_COLLECTIVE, 1, -1, NULL);
    for (int it = 0; it < 3; it++) {
        add(t, d0, TL_F, 0, 2 * it, it, 10.0 * it, 1);
        add(t, d1, TL_F, 0, 2 * it + 1, it, 10.0 * it, 3);
        add(t, c0, TL_ALLREDUCE, 0, -1, it, 10.0 * it + 4, 2);
        add(t, c1, TL_ALLREDUCE, 0, -1, it, 10.0 * it + 4, 2);
    }
    compare_side s;
    side_of(t, 1, "t", "exec trace", &s);
    near(s.busy_s[0], 2 * MS, "(1 + 3) ms over 2 replicas");
    cr_assert_eq(s.cells[TL_ALLREDUCE].n, 4);
    near(s.iteration_s, 10 * MS, "iteration");
    compare_side_free(&s);
    timeline_free(t);
}

static const char *const report_text =
    "{\"format\": \"plumb-sim-report/1\", \"schedule\": \"%s\", \"microbatches\": 4,"
    " \"iterations\": 3, \"iteration_s\": 0.02, \"stages\": ["
    " {\"stage\": 0, \"replicas\": 1, \"forward_s\": 0.001, \"backward_s\": 0.002,"
    "  \"input_grad_s\": 0.0012, \"weight_grad_s\": 0.0008, \"allreduce_s\": 0},"
    " {\"stage\": 1, \"replicas\": 2, \"forward_s\": 0.002, \"backward_s\": 0.004,"
    "  \"input_grad_s\": 0.003, \"weight_grad_s\": 0.001, \"allreduce_s\": 0.005}]}";

static cJSON *report(const char *sched)
{
    char text[1024];
    snprintf(text, sizeof text, report_text, sched);
    plumb_err err = {{0}};
    cJSON *j = json_parse_text("r.json", text, strlen(text), &err);
    cr_assert_not_null(j, "%s", err.msg);
    return j;
}

Test(compare, report_side)
{
    cJSON *j = report("1f1b-flush");
    plumb_err err = {{0}};
    compare_side s;
    cr_assert_eq(compare_side_from_report(j, "r.json", &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.nstages, 2);
    cr_assert_str_eq(s.what, "sim report");
    cr_assert_eq(s.cells[TL_F].n, 4);
    near(s.cells[TL_F].total_s / 4, 0.001, "F s0");
    near(s.cells[TL_B].median_s, 0.002, "B s0");
    cr_assert_eq(s.cells[TL_I].n, 0); /* 1F1B runs fused backwards */
    cr_assert_eq(s.cells[TL_ALLREDUCE].n, 0);
    cr_assert_eq(s.cells[TL_NKINDS + TL_ALLREDUCE].n, 2);
    near(s.busy_s[0], 4 * 0.003, "busy s0");
    near(s.busy_s[1], 4.0 / 2 * 0.006, "busy s1 per replica");
    near(s.iteration_s, 0.02, "iteration");
    compare_side_free(&s);
    cJSON_Delete(j);

    j = report("zb-h1");
    cr_assert_eq(compare_side_from_report(j, "r.json", &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.cells[TL_B].n, 0);
    near(s.cells[TL_I].median_s, 0.0012, "I s0");
    near(s.cells[TL_W].median_s, 0.0008, "W s0");
    near(s.busy_s[0], 4 * 0.003, "busy s0 (F + I + W)");
    compare_side_free(&s);
    cJSON_Delete(j);
}

Test(compare, report_field_errors_name_the_path)
{
    const char *text = "{\"format\": \"plumb-sim-report/1\", \"schedule\": \"gpipe\","
                       " \"microbatches\": 2, \"iterations\": 1, \"iteration_s\": 1,"
                       " \"stages\": [{\"replicas\": 1, \"forward_s\": -1}]}";
    plumb_err err = {{0}};
    cJSON *j = json_parse_text("r.json", text, strlen(text), &err);
    cr_assert_not_null(j);
    compare_side s;
    cr_assert_eq(compare_side_from_report(j, "r.json", &s, &err), -1);
    cr_assert(strstr(err.msg, "r.json: stages[0].forward_s"), "%s", err.msg);
    cJSON_Delete(j);
}

Test(compare, different_plans_are_refused)
{
    double f[] = {1, 1}, b[] = {1, 1};
    timeline *t2 = pipe2("sim", 2, f, b, 10, 1);
    timeline *t1 = timeline_new("exec");
    int d = timeline_track(t1, TL_TRACK_DEVICE, 0, -1, NULL);
    add(t1, d, TL_F, 0, 0, 0, 0, 1);
    plumb_err err = {{0}};
    compare_side a, c;
    compare_result r;
    side_of(t2, 1, "p.json", "sim trace", &a);
    side_of(t1, 1, "m.json", "exec trace", &c);
    cr_assert_eq(c.used, 1);
    cr_assert_eq(compare_sides(&a, &c, &r, &err), -1);
    cr_assert(strstr(err.msg, "m.json: stages: expected the 2 stages"), "%s", err.msg);
    compare_side_free(&a);
    compare_side_free(&c);
    timeline_free(t1);
    timeline_free(t2);
    timeline *t0 = timeline_new("exec");
    cr_assert_eq(compare_side_from_timeline(t0, 1, "e.json", "exec trace", &a, &err), -1);
    cr_assert(strstr(err.msg, "e.json: traceEvents: expected timed actions"), "%s", err.msg);
    /* absurd stage or iteration numbers (a hand-edited file) are refused, not allocated */
    d = timeline_track(t0, TL_TRACK_DEVICE, 0, -1, NULL);
    add(t0, d, TL_F, 2147483647, 0, 0, 0, 1);
    cr_assert_eq(compare_side_from_timeline(t0, 1, "e.json", "exec trace", &a, &err), -1);
    cr_assert(strstr(err.msg, "expected stages below"), "%s", err.msg);
    t0->ev[0].stage = 0;
    t0->ev[0].iteration = 2147483647;
    cr_assert_eq(compare_side_from_timeline(t0, 1, "e.json", "exec trace", &a, &err), -1);
    timeline_free(t0);
}

/* Writes text to a new temporary file; returns its path (static buffer per slot). */
static const char *tmpfile_with(int slot, const char *text)
{
    static char paths[4][64];
    snprintf(paths[slot], sizeof paths[slot], "/tmp/plumb-test-compare-%d-XXXXXX", slot);
    int fd = mkstemp(paths[slot]);
    cr_assert(fd >= 0);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return paths[slot];
}

Test(compare, files_round_trip_and_json_output)
{
    double pf[] = {1.0, 2.0}, pb[] = {2.0, 4.0}, mf[] = {1.25, 2.0}, mb[] = {2.5, 3.2};
    timeline *pt = pipe2("sim", 3, pf, pb, 20, 1), *mt = pipe2("exec", 4, mf, mb, 25, 1);
    size_t n;
    char *ptext = timeline_chrome_text(pt, &n), *mtext = timeline_chrome_text(mt, &n);
    const char *pp = tmpfile_with(0, ptext), *mp = tmpfile_with(1, mtext);
    free(ptext);
    free(mtext);
    plumb_err err = {{0}};
    compare_side p, m;
    cr_assert_eq(compare_side_load(pp, 1, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(compare_side_load(mp, 1, &m, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.what, "sim trace");
    cr_assert_str_eq(m.what, "exec trace");
    compare_result r;
    compare_ok(&p, &m, &r, "the files");
    const compare_row *f0 = find_row(&r, 0, TL_F);
    near(f0->error, -0.2, "F s0 error through the files");
    cJSON *j = compare_to_json(&r);
    cr_assert_not_null(j);
    cr_assert_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, COMPARE_FORMAT);
    cJSON *acts = cJSON_GetObjectItem(j, "actions");
    cr_assert_eq(cJSON_GetArraySize(acts), r.nrows);
    cJSON *a0 = cJSON_GetArrayItem(acts, 0);
    cr_assert_str_eq(cJSON_GetObjectItem(a0, "kind")->valuestring, "F");
    near(cJSON_GetObjectItem(a0, "predicted_ms")->valuedouble, 1.0, "json predicted_ms");
    near(cJSON_GetObjectItem(a0, "error")->valuedouble, -0.2, "json error");
    near(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "iteration"), "measured_ms")->valuedouble,
         25, "json iteration");
    cJSON_Delete(j);

    /* CLI: both forms succeed; the printed table carries units */
    char *ok[] = {"compare", (char *)pp, (char *)mp, NULL};
    cr_assert_eq(cmd_compare(3, ok), 0);
    char *okj[] = {"compare", "--json", "--median", (char *)pp, (char *)mp, NULL};
    cr_assert_eq(cmd_compare(5, okj), 0);
    compare_result_free(&r);
    compare_side_free(&p);
    compare_side_free(&m);
    unlink(pp);
    unlink(mp);
    timeline_free(pt);
    timeline_free(mt);
}

Test(compare, bad_files_exit_2)
{
    const char *notjson = tmpfile_with(0, "{ not json");
    const char *neither = tmpfile_with(1, "{\"format\": \"plumb-plan/1\"}");
    const char *badev = tmpfile_with(2, "{\"traceEvents\": [{\"name\": \"a\", \"ph\": \"X\","
                                        " \"ts\": 0, \"dur\": 1,"
                                        " \"pid\": 1, \"tid\": 0, \"args\": {\"kind\": \"Q\","
                                        " \"stage\": 0}}]}");
    const char *good = tmpfile_with(3, "{\"traceEvents\": [{\"name\": \"a\", \"ph\": \"X\","
                                       " \"ts\": 0, \"dur\": 1,"
                                       " \"pid\": 1, \"tid\": 0, \"args\": {\"kind\": \"F\","
                                       " \"stage\": 0}}]}");
    plumb_err err = {{0}};
    compare_side s;
    cr_assert_eq(compare_side_load(neither, 1, &s, &err), -1);
    cr_assert(strstr(err.msg, "expected a simulator report"), "%s", err.msg);
    cr_assert_eq(compare_side_load(badev, 1, &s, &err), -1);
    cr_assert(strstr(err.msg, "kind"), "%s", err.msg);
    cr_assert_eq(compare_side_load(good, 1, &s, &err), 0, "%s", err.msg);
    compare_side_free(&s);

    const char *cases[][2] = {{notjson, good}, {good, neither}, {badev, good},
                              {"/nonexistent/plumb.json", good}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"compare", (char *)cases[i][0], (char *)cases[i][1], NULL};
        cr_assert_eq(cmd_compare(3, argv), 2, "case %zu", i);
    }
    char *one[] = {"compare", (char *)good, NULL};
    cr_assert_eq(cmd_compare(2, one), 2);
    char *unknown[] = {"compare", "--frobnicate", (char *)good, (char *)good, NULL};
    cr_assert_eq(cmd_compare(4, unknown), 2);
    char *skip[] = {"compare", "--skip", "-1", (char *)good, (char *)good, NULL};
    cr_assert_eq(cmd_compare(5, skip), 2);
    unlink(notjson);
    unlink(neither);
    unlink(badev);
    unlink(good);
}

/* The simulator's trace of a replicated stage: its ring steps on link tracks (kind
 * all-reduce) are traffic, not all-reduces: compare counts the collective track's one
 * all-reduce per replica and iteration, with the whole all-reduce's time. */
Test(compare, ring_steps_are_not_allreduces)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 1;
    s.replicas = 4;
    s.microbatches = 4;
    s.devices_per_server = 1;
    s.parameter_bytes = 10e6;
    plumb_err e;
    plan *pl = sim_synth_plan(&s, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    sim_report *r = sim_run(pl, &o, &e);
    cr_assert_not_null(r, "%s", e.msg);
    size_t on_links = 0;
    for (size_t i = 0; i < r->tl->n; i++)
        on_links += r->tl->ev[i].kind == TL_ALLREDUCE &&
                    r->tl->tracks[r->tl->ev[i].track].kind == TL_TRACK_LINK;
    cr_expect_gt(on_links, 0);  /* 2 (r - 1) steps x r hops per iteration */
    compare_side side;
    cr_assert_eq(compare_side_from_timeline(r->tl, 0, "sim", "trace", &side, &e), 0, "%s",
                 e.msg);
    cr_expect_eq(side.kinds[TL_ALLREDUCE].n, 4 * r->iterations);
    cr_expect(fabs(side.kinds[TL_ALLREDUCE].median_s - r->stages[0].allreduce_s) <
              1e-9 + 1e-6 * r->stages[0].allreduce_s, "%g vs %g s",
              side.kinds[TL_ALLREDUCE].median_s, r->stages[0].allreduce_s);
    compare_side_free(&side);
    sim_report_free(r);
    plan_free(pl);
}

/* The text's lines of one table from its header line on (up to the blank line): n of
 * them into len[]; a table's rows with counts are as long as its header when their
 * columns line up. */
static int table_lens(const char *text, const char *header, size_t *len, int cap)
{
    const char *l = strstr(text, header);
    cr_assert_not_null(l, "no '%s' in:\n%s", header, text);
    int n = 0;
    while (*l && *l != '\n' && n < cap) {
        const char *e = strchr(l, '\n');
        len[n++] = e ? (size_t)(e - l) : strlen(l);
        l = e ? e + 1 : l + strlen(l);
    }
    return n;
}

/* A label longer than the column's 14 characters (a tensor-parallel collective's kind,
 * measured only) widens the column for every row, so that the figures stay in their
 * columns; when every label fits the table is as before (14). */
Test(compare, long_labels_widen_the_label_column)
{
    double f[] = {1.0, 2.0}, b[] = {2.0, 4.0};
    for (int tp = 0; tp < 2; tp++) {
        timeline *pt = pipe2("sim", 3, f, b, 20, 1), *mt = pipe2("exec", 3, f, b, 20, 1);
        if (tp) {
            int c = timeline_track(mt, TL_TRACK_COLLECTIVE, 0, -1, NULL);
            for (int i = 0; i < 3; i++) add(mt, c, TL_TP_REDUCE_SCATTER, 0, i, i, i * 20, 0.2);
        }
        compare_side p, m;
        compare_result r;
        side_of(pt, 0, "p.json", "sim trace", &p);
        side_of(mt, 0, "m.json", "exec trace", &m);
        compare_ok(&p, &m, &r, tp ? "tp collectives" : "no tp");
        char *text = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&text, &size);
        cr_assert_not_null(out);
        compare_print(&r, 0, out);
        fclose(out);
        size_t len[32];
        int n = table_lens(text, "stage kind ", len, 32);
        cr_assert_geq(n, 8);
        for (int i = 1; i < n; i++)
            cr_expect_eq(len[i], len[0], "line %d of the table is %zu long, the header %zu:\n%s",
                         i, len[i], len[0], text);
        const char *row = strstr(text, "\n0     tp_reduce_scatter ");
        cr_expect_eq(row != NULL, tp, "%s", text);
        /* the per-kind rows line up with the per-stage ones */
        const char *k = strstr(text, tp ? "\ntp_reduce_scatter " : "\nF ");
        cr_assert_not_null(k, "%s", text);
        const char *ke = strchr(k + 1, '\n');
        cr_expect_eq((size_t)(ke - k - 1), len[0], "%s", text);
        if (!tp) /* every label fits: the column keeps its 14 characters */
            cr_expect_not_null(strstr(text, "\nstage kind        predicted      measured"), "%s",
                               text);
        free(text);
        free_comparison(&r, &p, &m, pt, mt);
    }
}

/* Peak memory: devices are grouped by the stages they run (replicas of a stage merge, the
 * largest peak kept), matched across sides by those stages whatever their device ids, and a
 * stage set on one side only is a row with the other side absent. */
Test(compare, peak_memory_by_stage_set)
{
    /* predicted: devices 4 and 5 are stage 0's replicas, device 6 runs stages 1 and 2,
     * device 7 stage 3 without a peak */
    timeline *p = timeline_new("sim");
    int p4 = timeline_track(p, TL_TRACK_DEVICE, 4, -1, NULL);
    int p5 = timeline_track(p, TL_TRACK_DEVICE, 5, -1, NULL);
    int p6 = timeline_track(p, TL_TRACK_DEVICE, 6, -1, NULL);
    int p7 = timeline_track(p, TL_TRACK_DEVICE, 7, -1, NULL); /* stage 3, peak unknown */
    add(p, p7, TL_F, 3, 0, 0, 4, 1);
    add(p, p4, TL_F, 0, 0, 0, 0, 1);
    add(p, p5, TL_F, 0, 1, 0, 0, 1);
    add(p, p6, TL_F, 2, 0, 0, 2, 1);
    add(p, p6, TL_F, 1, 0, 0, 1, 1);
    add(p, p6, TL_B, 2, 0, 0, 3, 1);
    p->tracks[p4].peak_bytes = 100;
    p->tracks[p5].peak_bytes = 300;
    p->tracks[p6].peak_bytes = 1000;
    /* measured: workers 0 and 1 run stage 0, worker 2 stages 1 and 2, worker 3 stage 3
     * (whose peak the prediction lacks); worker 1's peak is unknown */
    timeline *m = timeline_new("exec");
    int m0 = timeline_track(m, TL_TRACK_DEVICE, 0, -1, NULL);
    int m1 = timeline_track(m, TL_TRACK_DEVICE, 1, -1, NULL);
    int m2 = timeline_track(m, TL_TRACK_DEVICE, 2, -1, NULL);
    int m3 = timeline_track(m, TL_TRACK_DEVICE, 3, -1, NULL);
    add(m, m0, TL_F, 0, 0, 0, 0, 1);
    add(m, m1, TL_F, 0, 1, 0, 0, 1);
    add(m, m2, TL_F, 1, 0, 0, 1, 1);
    add(m, m2, TL_F, 2, 0, 0, 2, 1);
    add(m, m3, TL_F, 3, 0, 0, 3, 1);
    m->tracks[m0].peak_bytes = 400;
    m->tracks[m2].peak_bytes = 800;
    m->tracks[m3].peak_bytes = 50;
    compare_side ps, ms;
    side_of(p, 0, "p", "sim trace", &ps);
    side_of(m, 0, "m", "exec trace", &ms);
    cr_assert_eq(ps.nmem, 2);
    cr_assert_str_eq(ps.mem[0].stages, "0");
    cr_assert_eq(ps.mem[0].ndevices, 2);
    near(ps.mem[0].peak_bytes, 300, "the largest replica");
    cr_assert_str_eq(ps.mem[1].stages, "1,2");
    cr_assert_eq(ms.nmem, 3, "worker 1 (no peak) is left out");
    compare_result r;
    compare_ok(&ps, &ms, &r, "peaks by stage set");
    cr_assert_eq(r.nmem, 3);
    cr_assert_str_eq(r.mem[0].stages, "0");
    near(r.mem[0].error, (300.0 - 400) / 400, "stage 0");
    cr_assert_eq(r.mem[0].meas_devices, 1);
    cr_assert_str_eq(r.mem[1].stages, "1,2");
    near(r.mem[1].error, (1000.0 - 800) / 800, "stages 1 and 2");
    cr_assert_str_eq(r.mem[2].stages, "3");
    cr_assert(r.mem[2].pred_bytes < 0 && isnan(r.mem[2].error), "stage 3: predicted absent");
    near(r.mem_mean_abs_error, (0.25 + 0.25) / 2, "mean over the rows both sides have");
    cJSON *j = compare_to_json(&r);
    cJSON *mem = cJSON_GetObjectItem(j, "memory");
    cr_assert_eq(cJSON_GetArraySize(mem), 3);
    cJSON *m1j = cJSON_GetArrayItem(mem, 1);
    cr_assert_str_eq(cJSON_GetObjectItem(m1j, "stages")->valuestring, "1,2");
    near(cJSON_GetObjectItem(m1j, "measured_bytes")->valuedouble, 800, "json measured_bytes");
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(mem, 2), "predicted_bytes")));
    cJSON_Delete(j);
    free_comparison(&r, &ps, &ms, p, m);
}

/* Without peaks (an older trace) there are no memory rows and the JSON array is empty. */
Test(compare, no_memory_figures_no_rows)
{
    double f[] = {1, 2}, b[] = {2, 4};
    timeline *t = pipe2("sim", 2, f, b, 20, 1);
    compare_side a, c;
    side_of(t, 0, "t", "sim trace", &a);
    side_of(t, 0, "t", "sim trace", &c);
    cr_assert_eq(a.nmem, 0);
    compare_result r;
    compare_ok(&a, &c, &r, "no peaks");
    cr_assert_eq(r.nmem, 0);
    cJSON *j = compare_to_json(&r);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "memory")), 0);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(j, "memory_mean_abs_error")));
    cJSON_Delete(j);
    free_comparison(&r, &a, &c, t, NULL);
}

/* A report's devices give its memory figures; a malformed entry names its path. */
Test(compare, report_memory)
{
    const char *text =
        "{\"format\": \"plumb-sim-report/1\", \"schedule\": \"gpipe\", \"microbatches\": 2,"
        " \"iterations\": 1, \"iteration_s\": 1, \"stages\": [{\"replicas\": 2, \"forward_s\": 1,"
        " \"backward_s\": 1, \"input_grad_s\": 0.5, \"weight_grad_s\": 0.5, \"allreduce_s\": 0}],"
        " \"devices\": [{\"stages\": [0], \"peak_memory_bytes\": 5},"
        "  {\"stages\": [0], \"peak_memory_bytes\": 7}, {\"stages\": [], \"peak_memory_bytes\": 0}]}";
    plumb_err err = {{0}};
    cJSON *j = json_parse_text("r.json", text, strlen(text), &err);
    compare_side s;
    cr_assert_eq(compare_side_from_report(j, "r.json", &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.nmem, 1);
    cr_assert_eq(s.mem[0].ndevices, 2);
    near(s.mem[0].peak_bytes, 7, "report peak");
    compare_side_free(&s);
    cJSON_Delete(j);
    const char *bad =
        "{\"format\": \"plumb-sim-report/1\", \"schedule\": \"gpipe\", \"microbatches\": 2,"
        " \"iterations\": 1, \"iteration_s\": 1, \"stages\": [{\"replicas\": 1, \"forward_s\": 1,"
        " \"backward_s\": 1, \"input_grad_s\": 0.5, \"weight_grad_s\": 0.5, \"allreduce_s\": 0}],"
        " \"devices\": [{\"stages\": [0.5], \"peak_memory_bytes\": 5}]}";
    j = json_parse_text("r.json", bad, strlen(bad), &err);
    cr_assert_eq(compare_side_from_report(j, "r.json", &s, &err), -1);
    cr_assert(strstr(err.msg, "devices[0].stages[0]"), "%s", err.msg);
    cJSON_Delete(j);
}

/* Side of a 2-stage timeline that names model and stage layers (first0..last0 | ..last1),
 * read back through the trace file, as plumb compare reads it. */
static void named_side(const char *src, const char *model, int last0, int last1, int slot,
                       compare_side *out)
{
    double f[] = {1, 2}, b[] = {2, 4};
    timeline *tl = pipe2(src, 3, f, b, 20, 1);
    int first[2] = {0, last0 + 1}, last[2] = {last0, last1};
    cr_assert_eq(timeline_set_model(tl, model, 2, first, last), 0);
    size_t n;
    char *text = timeline_chrome_text(tl, &n);
    const char *path = tmpfile_with(slot, text);
    free(text);
    timeline_free(tl);
    plumb_err err = {{0}};
    cr_assert_eq(compare_side_load(path, 1, out, &err), 0, "%s", err.msg);
    unlink(path);
}

Test(compare, different_models_and_layer_ranges_are_refused)
{
    compare_side p, m, q, u;
    compare_result r;
    plumb_err err = {{0}};
    named_side("sim", "alexnet", 10, 22, 0, &p);
    named_side("exec", "fmnist-mlp", 1, 6, 1, &m);
    cr_assert_str_eq(p.model, "alexnet");
    cr_assert_eq(m.nlayer_stages, 2);
    cr_assert_eq(m.layers[2], 2);
    cr_assert_eq(m.layers[3], 6);
    /* the same stage count, different models: refused, naming both */
    cr_assert_eq(compare_sides(&p, &m, &r, &err), -1);
    cr_assert(strstr(err.msg, "model: expected \"alexnet\"") && strstr(err.msg, "\"fmnist-mlp\""),
              "%s", err.msg);
    /* the same model, other layer ranges (another plan): refused, naming the stage */
    named_side("sim", "fmnist-mlp", 2, 6, 2, &q);
    cr_assert_eq(compare_sides(&q, &m, &r, &err), -1);
    cr_assert(strstr(err.msg, "stages[0]: expected layers 0..2"), "%s", err.msg);
    cr_assert(strstr(err.msg, "(got layers 0..1)"), "%s", err.msg);
    /* the same model and plan: compared */
    compare_side_free(&q);
    named_side("sim", "fmnist-mlp", 1, 6, 2, &q);
    compare_ok(&q, &m, &r, "the same model and plan");
    compare_result_free(&r);
    /* a trace that names nothing (an older file) is not refused for it */
    double f[] = {1, 2}, b[] = {2, 4};
    timeline *tl = pipe2("exec", 3, f, b, 20, 1);
    side_of(tl, 1, "old.json", "exec trace", &u);
    cr_assert_null(u.model);
    compare_ok(&p, &u, &r, "a trace naming nothing");
    compare_result_free(&r);
    timeline_free(tl);
    compare_side_free(&u);
    compare_side_free(&q);
    compare_side_free(&p);
    compare_side_free(&m);
}

/* A simulator report names its model and its stages' layers: compared against a trace of
 * another model, it is refused too. */
Test(compare, report_names_its_model)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 2;
    plumb_err err = {{0}};
    plan *pl = sim_synth_plan(&s, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    sim_report *rep = sim_run(pl, NULL, &err);
    cr_assert_not_null(rep, "%s", err.msg);
    cJSON *j = sim_report_to_json(rep, NULL, NULL);
    compare_side p, m;
    cr_assert_eq(compare_side_from_report(j, "r.json", &p, &err), 0, "%s", err.msg);
    cr_assert_not_null(p.model);
    cr_assert_str_eq(p.model, pl->prof->name);
    cr_assert_eq(p.nlayer_stages, 2);
    cr_assert_eq(p.layers[1], pl->stages[0].last_layer);
    named_side("exec", "not-the-synth-model", p.layers[1], p.layers[3], 0, &m);
    compare_result r;
    cr_assert_eq(compare_sides(&p, &m, &r, &err), -1);
    cr_assert(strstr(err.msg, "model: expected"), "%s", err.msg);
    compare_side_free(&m);
    compare_side_free(&p);
    cJSON_Delete(j);
    sim_report_free(rep);
    plan_free(pl);
}

/* A simulator trace with flows and memory counters reads as before those events existed:
 * the same summary as the timeline it was written from. */
Test(compare, reads_traces_with_flows_and_counters)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    plumb_err e;
    err_clear(&e);
    plan *pl = sim_synth_plan(&s, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    sim_report *r = sim_run(pl, &o, &e);
    cr_assert_not_null(r, "%s", e.msg);
    cr_assert_gt(r->tl->ncounters, 0);
    char path[] = "/tmp/plumb-test-cmp-flow-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(timeline_write_chrome(r->tl, path, &e), 0, "%s", e.msg);
    char *text = timeline_chrome_text(r->tl, NULL);
    cr_assert(text && strstr(text, "\"ph\": \"s\"") && strstr(text, "\"ph\": \"C\""));
    free(text);
    compare_side a, b;
    cr_assert_eq(compare_side_load(path, 1, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(compare_side_from_timeline(r->tl, 1, "x", "sim trace", &b, &e), 0, "%s", e.msg);
    cr_assert_eq(a.nstages, b.nstages);
    for (int k = 0; k < TL_NKINDS; k++) cr_expect_eq(a.kinds[k].n, b.kinds[k].n, "kind %d", k);
    near(a.iteration_s, b.iteration_s, "iteration");
    cr_expect_eq(a.nmem, b.nmem);
    compare_side_free(&a);
    compare_side_free(&b);
    unlink(path);
    sim_report_free(r);
    plan_free(pl);
}
