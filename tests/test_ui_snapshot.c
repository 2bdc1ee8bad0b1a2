/* test_ui_snapshot.c: frames of the dashboard rendered as text (the --snapshot path) after
 * key sequences: their content, their size at every screen size, the figures against
 * `plumb sim --json` of the very plan the UI saves, load errors shown in the frame, the
 * help overlay, save and export, the 3D dashboard's background worker and quitting while
 * it works; a plan file that names its model shows the frames of plumb ui --model. Runs
 * from the repository root (make test does). */
#include <criterion/criterion.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"
#include "planner/native.h"
#include "tests/tmpdir.h"
#include "ui/app.h"
#include "ui/draw.h"

#define PROFILE "profiles/pipedream/vgg16.json"
#define CLUSTER "profiles/clusters/cluster-a-4x4.json"
#define PLAN "examples/plans/vgg16-hybrid-pipedream.json"

/* each test's own folder for what the dashboard saves and exports, removed after it */
static char *tmpdir;

static void make_tmp(void)
{
    tmpdir = make_tmpdir_named("ui");
}

static void remove_tmp(void)
{
    cr_expect_eq(rm_tree(tmpdir), 0, "a folder left in the test's temporary folder");
}

TestSuite(ui_snapshot, .init = make_tmp, .fini = remove_tmp);

static char *snap(ui_app *a, int w, int h, const char *keys)
{
    int k[256];
    plumb_err e;
    err_clear(&e);
    int n = ui_keys_parse(keys ? keys : "", k, 256, &e);
    cr_assert_geq(n, 0, "%s", e.msg);
    char *s = ui_app_snapshot(a, w, h, k, n);
    cr_assert_not_null(s);
    return s;
}

/* The line of text starting with `prefix` (after any leading blanks), or NULL. */
static const char *line_with(const char *text, const char *prefix)
{
    for (const char *l = text; l && *l;) {
        const char *p = l;
        while (*p == ' ') p++;
        if (!strncmp(p, prefix, strlen(prefix))) return p;
        l = strchr(l, '\n');
        if (l) l++;
    }
    return NULL;
}

/* Reads the live figures from a frame: samples/s, iteration (s), bubble (fraction),
 * peak memory and capacity (GiB). */
typedef struct figs {
    double sps, iter_s, bubble, mem_gib, cap_gib, vs_dp;
} figs;

static figs read_figs(const char *frame)
{
    figs f;
    memset(&f, 0, sizeof f);
    const char *l = line_with(frame, "samples/s ");
    if (!l) l = line_with(frame, "live  samples/s ");
    cr_assert_not_null(l, "no figures line in\n%s", frame);
    l = strstr(l, "samples/s ");
    char unit[8];
    double it;
    int n = sscanf(l, "samples/s %lf iter %lf %7s bubble %lf%%", &f.sps, &it, unit, &f.bubble);
    /* a transformer's figures name tokens/s and MFU instead of the data-parallel ratio */
    const char *dp = strstr(l, "vs DP "), *tok = strstr(l, "tokens/s ");
    const char *mem = dp ? strstr(dp, " mem ") : tok ? strstr(tok, " mem ") : NULL;
    cr_assert(n == 4 && (dp || tok) && mem, "figures line not understood: %.120s", l);
    if (dp && strncmp(dp, "vs DP no-fit", 12)) /* no-fit: data parallelism does not fit, 0 */
        cr_assert_eq(sscanf(dp, "vs DP %lfx", &f.vs_dp), 1, "%.120s", l);
    cr_assert_eq(sscanf(mem, " mem %lf/%lf GiB", &f.mem_gib, &f.cap_gib), 2, "%.120s", l);
    f.iter_s = !strcmp(unit, "s") ? it : !strcmp(unit, "ms") ? it / 1e3 : it / 1e6;
    f.bubble /= 100;
    return f;
}

/* Runs `plumb sim PLAN --json ARGS...` in this process, returns the parsed report. */
static cJSON *sim_json(const char *plan_path, const char *a1, const char *a2)
{
    char out[128];
    snprintf(out, sizeof out, "%s/sim.json", tmpdir);
    fflush(stdout);
    int saved = dup(1), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    char *argv[8] = { "sim", (char *)plan_path, "--json", NULL, NULL, NULL, NULL, NULL };
    int argc = 3;
    if (a1) argv[argc++] = (char *)a1;
    if (a2) argv[argc++] = (char *)a2;
    int rc = cmd_sim(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    cr_assert_eq(rc, 0, "plumb sim failed");
    plumb_err e;
    err_clear(&e);
    cJSON *j = json_load_file(out, &e);
    cr_assert_not_null(j, "%s", e.msg);
    return j;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(v), "report has no number %s", k);
    return v->valuedouble;
}

/* The frame's figures equal the report's to the precision the frame prints; label names
 * the frame in a failure's message. */
static void assert_same_figures(const figs *f, const cJSON *rep, const char *label)
{
    double sps = jnum(rep, "samples_per_s"), it = jnum(rep, "iteration_s");
    double bub = jnum(rep, "bubble_fraction"), peak = jnum(rep, "peak_memory_bytes");
    cr_assert(fabs(f->sps - sps) <= (sps >= 1000 ? 0.5 : 0.05) + 1e-9, "%s: samples/s %g vs %g",
              label, f->sps, sps);
    cr_assert(fabs(f->iter_s - it) <= 0.0006 * it, "%s: iteration %g vs %g s", label, f->iter_s,
              it);
    cr_assert(fabs(f->bubble - bub) <= 0.0005 + 1e-12, "%s: bubble %g vs %g", label, f->bubble,
              bub);
    double gib = peak / (1024.0 * 1024.0 * 1024.0);
    cr_assert(fabs(f->mem_gib - gib) <= 0.005 + 1e-12, "%s: memory %g vs %g GiB", label,
              f->mem_gib, gib);
}

static char *saved_plan_path(const char *frame)
{
    const char *m = strstr(frame, "saved ");
    cr_assert_not_null(m, "no 'saved' message in\n%s", frame);
    static char path[512];
    sscanf(m + 6, "%511s", path);
    return path;
}

/* plumb sim's report of the plan the frame saved (its status line names the file), run
 * with a1 and a2 (NULL: none), whose figures the frame shows (assert_same_figures, label
 * naming the frame); the frame's figures into *f when f is not NULL. The caller frees the
 * report with cJSON_Delete. */
static cJSON *frame_sim(const char *frame, const char *a1, const char *a2, const char *label,
                        figs *f)
{
    figs own = read_figs(frame);
    cJSON *rep = sim_json(saved_plan_path(frame), a1, a2);
    assert_same_figures(&own, rep, label);
    if (f) *f = own;
    return rep;
}

/* The figures the frame shows are plumb sim's of the plan it saved (frame_sim). */
static void expect_frame_is_sim(const char *frame, const char *label)
{
    cJSON_Delete(frame_sim(frame, NULL, NULL, label, NULL));
}

Test(ui_snapshot, default_frame_80x24_shows_every_panel)
{
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 80, 24, NULL);
    cr_assert(strstr(s, "plumb ui  vgg16 on cluster-a-4x4  pipedream (async)  mb 15x32  2 stages"),
              "%s", s);
    figs f = read_figs(s);
    cr_assert_gt(f.sps, 0);
    cr_assert_eq(f.cap_gib, 15.0);
    cr_assert(line_with(s, "GPUs 16 bw 1:pcie 128 Gb/s [2:ethernet 10 Gb/s] limit off strag off "
                           "recomp off"), "%s", s);
    cr_assert(strstr(s, "+ stages -"));
    cr_assert(strstr(s, "|  0 0-31       15 0-14"), "%s", s);
    cr_assert(strstr(s, "|  1 32-40       1 15"), "%s", s);
    char tl[64]; /* the iterations simulated: 3, or more when the pipeline needs them */
    snprintf(tl, sizeof tl, "+ timeline: %d iterations", a.cur.rep->iterations);
    cr_assert(a.cur.rep->iterations >= 3 && strstr(s, tl), "%s", s);
    cr_assert(strstr(s, "|>d0 "), "the selected device is marked:\n%s", s);
    cr_assert(strstr(s, "| time |0 s"));
    const char *last = strrchr(s, '\n');
    while (last > s && last[-1] != '\n') last--;
    cr_assert(!strncmp(last, "q quit  ? help", 14), "status line: %s", last);
    free(s);
    ui_app_free(&a);
}

/* The header marks asynchronous schedules and labels the time of the last evaluation. */
Test(ui_snapshot, header_marks_async_schedules_and_labels_the_time)
{
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE), 0);
    char *s = snap(&a, 160, 40, NULL);
    cr_assert(strstr(s, "pipedream (async: weight stashing)  mb 15x32"), "%s", s);
    char *nl = strchr(s, '\n');
    cr_assert(nl && nl - s > 20);
    *nl = 0;
    const char *t = strstr(s, " plan+sim ");
    cr_assert(t, "the time top right is labelled: %s", s);
    double v = 0;
    char unit[8] = "";
    cr_assert_eq(sscanf(t + 10, "%lf %7s", &v, unit), 2, "%s", t);
    cr_assert(v > 0 && (!strcmp(unit, "ms") || !strcmp(unit, "us") || !strcmp(unit, "s")), "%s", t);
    free(s);
    s = snap(&a, 160, 40, "c"); /* 2bw: asynchronous too */
    cr_assert(strstr(s, "2bw (async: 2 weight versions)"), "%s", s);
    free(s);
    s = snap(&a, 160, 40, "c"); /* interleaved flushes */
    cr_assert(strstr(s, "  interleaved  mb"), "%s", s);
    cr_assert(!strstr(s, "async"), "%s", s);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, frames_fit_every_screen_size)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    int kk[] = { 'p', '+' };
    for (int i = 0; i < 2; i++) ui_app_key(&a, kk[i]); /* pinned: every panel shows */
    for (int w = 80; w <= 300; w += 11)
        for (int h = 24; h <= 100; h += 7) {
            char *s = ui_app_snapshot(&a, w, h, NULL, 0);
            cr_assert_not_null(s);
            int lines = 0;
            for (const char *l = s; *l;) {
                const char *e = strchr(l, '\n');
                cr_assert_not_null(e);
                cr_assert_leq(e - l, w, "%dx%d: line %d is %d wide", w, h, lines, (int)(e - l));
                lines++;
                l = e + 1;
            }
            cr_assert_eq(lines, h, "%dx%d: %d lines", w, h, lines);
            cr_assert(strstr(s, "pin   samples/s"), "%dx%d: no pinned figures", w, h);
            if (w >= 160) cr_assert(strstr(s, "stages (pinned)"), "%dx%d", w, h);
            if (h >= 50) cr_assert(strstr(s, "timeline (pinned)"), "%dx%d", w, h);
            free(s);
        }
    ui_app_free(&a);
}

Test(ui_snapshot, figures_equal_plumb_sim_json_for_the_saved_plan)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    /* 1f1b-flush, 30 microbatches, ethernet doubled, recompute (off -> auto ->) on, save */
    char *s = snap(&a, 120, 40, "Cmbrrs");
    cr_assert(strstr(s, "1f1b-flush  mb 30x32"), "%s", s);
    cr_assert(strstr(s, "[2:ethernet 20 Gb/s x2]"), "%s", s);
    cJSON *rep = frame_sim(s, NULL, NULL, "Cmbrrs", NULL);
    cr_assert_str_eq(cJSON_GetObjectItem(rep, "schedule")->valuestring, "1f1b-flush");
    cJSON_Delete(rep);
    free(s);
    ui_app_free(&a);
}

/* A stage's row shows its fullest replica's memory: three replicas of VGG-16's
 * classifier, whose third keeps two parts of the all-reduce's scratch where the first
 * keeps one (sim_allreduce_scratch), 1.70 against 1.55 GiB. */
Test(ui_snapshot, stage_row_shows_the_fullest_replica)
{
    char path[512], cwd[256];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(path, sizeof path, "%s/rep3.json", tmpdir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"format\": \"plumb-plan/1\", \"profile\": \"%s/" PROFILE "\", "
               "\"cluster\": \"%s/" CLUSTER "\", \"schedule\": \"1f1b-flush\", "
               "\"microbatch_size\": 16, \"microbatches\": 12, \"recompute\": false, "
               "\"optimizer\": \"momentum\", \"stages\": ["
               "{\"first_layer\": 0, \"last_layer\": 31, \"replicas\": 1, \"devices\": [0]}, "
               "{\"first_layer\": 32, \"last_layer\": 40, \"replicas\": 3, "
               "\"devices\": [1, 2, 3]}]}\n", cwd, cwd);
    fclose(f);
    cJSON *rep = sim_json(path, NULL, NULL);
    double first = -1, most = 0;
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(rep, "devices")) {
        int dev = (int)jnum(d, "device");
        double peak = jnum(d, "peak_memory_bytes");
        if (dev == 1) first = peak;
        if (dev >= 1 && peak > most) most = peak;
    }
    cJSON_Delete(rep);
    char want[32], was[32];
    snprintf(want, sizeof want, "%.2f/15.00", most / (1024.0 * 1024 * 1024));
    snprintf(was, sizeof was, "%.2f/15.00", first / (1024.0 * 1024 * 1024));
    cr_assert_str_neq(want, was, "the replicas' peaks should differ visibly (%s)", want);
    ui_app a;
    ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE);
    char *s = snap(&a, 100, 30, "");
    const char *row = strstr(s, "|  1 32-40");
    cr_assert_not_null(row, "%s", s);
    cr_assert(strstr(row, want) && strstr(row, want) < strchr(row, '\n'),
              "stage 1's row shows %.60s, expected the fullest replica's %s", row, want);
    free(s);
    ui_app_free(&a);
}

/* Writes a 4-stage 1f1b-flush plan of VGG-16 on cluster-a-4x4 with the runtime field
 * `extra` ("\"p2p\": \"sync\"") to tmpdir/name; returns its path (static). */
static const char *runtime_plan(const char *name, const char *extra)
{
    static char path[512];
    char cwd[256];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"format\": \"plumb-plan/1\", \"profile\": \"%s/" PROFILE "\", "
               "\"cluster\": \"%s/" CLUSTER "\", \"schedule\": \"1f1b-flush\", "
               "\"microbatch_size\": 32, \"microbatches\": 8, \"recompute\": false, "
               "\"optimizer\": \"momentum\", %s, \"stages\": ["
               "{\"first_layer\": 0, \"last_layer\": 3, \"replicas\": 1, \"devices\": [0]}, "
               "{\"first_layer\": 4, \"last_layer\": 10, \"replicas\": 1, \"devices\": [1]}, "
               "{\"first_layer\": 11, \"last_layer\": 17, \"replicas\": 1, \"devices\": [2]}, "
               "{\"first_layer\": 18, \"last_layer\": 40, \"replicas\": 1, \"devices\": [3]}]}\n",
            cwd, cwd, extra);
    fclose(f);
    return path;
}

/* A plan file's runtime rides every what-if of the 2D view, and c C pass by the kinds it
 * cannot take: under "grad_sync": "end" c goes from 1f1b-flush past pipedream and 2bw to
 * interleaved (re-planned, reduced at the end: plumb sim of the saved plan gives the
 * figures); under "p2p": "sync" c and C never reach zb-v or dualpipev (which deadlock),
 * and the interleaved plan the native planner makes is saved with p2p sync. */
Test(ui_snapshot, plan_runtime_rides_the_schedule_keys)
{
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, runtime_plan("gs.json", "\"grad_sync\": \"end\""),
                             tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 120, 30, "cs");
    cr_assert(!a.cur.err[0] && a.cur.pl, "%s", a.cur.err);
    cr_assert_eq(a.st->cur.schedule, SCHED_INTERLEAVED, "%s", s);
    cr_assert(a.cur.pl->grad_sync_end);
    plan *pl = plan_load(saved_plan_path(s), &(plumb_err){ 0 });
    cr_assert(pl && pl->grad_sync_end && pl->schedule == SCHED_INTERLEAVED);
    plan_free(pl);
    expect_frame_is_sim(s, "interleaved, gsync end");
    free(s);
    s = snap(&a, 120, 30, "uC"); /* back, then C: gpipe, not 2bw */
    cr_assert_eq(a.st->cur.schedule, SCHED_GPIPE, "%s", s);
    cr_assert(!a.cur.err[0], "%s", a.cur.err);
    free(s);
    ui_app_free(&a);

    cr_assert_eq(ui_app_open(&a, NULL, NULL, runtime_plan("p2p.json", "\"p2p\": \"sync\""),
                             tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    for (int k = 0; k < 2 * SCHED_NKINDS; k++) {
        s = snap(&a, 100, 30, k < SCHED_NKINDS ? "c" : "C");
        int kind = a.st->cur.schedule;
        cr_assert(kind != SCHED_ZB_V && kind != SCHED_DUALPIPEV, "%s", s);
        cr_assert(!a.cur.err[0] && a.cur.pl && a.cur.pl->p2p_sync, "%s: %s",
                  sched_kind_name((sched_kind)kind), a.cur.err);
        if (kind == SCHED_INTERLEAVED && k < SCHED_NKINDS) {
            free(s);
            s = snap(&a, 100, 30, "s");
            pl = plan_load(saved_plan_path(s), &(plumb_err){ 0 });
            cr_assert(pl && pl->p2p_sync && pl->schedule == SCHED_INTERLEAVED);
            plan_free(pl);
            expect_frame_is_sim(s, "interleaved, p2p sync");
        }
        free(s);
    }
    ui_app_free(&a);
}

/* The 2D header names a plan file's runtime when it is not the default: a fourth row (a
 * sixth pinned) under the what-ifs, "p2p sync  gsync end  opg off" (the option names from
 * 160 columns), in every frame size; the all-gather apart stays on on a re-planned plan
 * (made under the file's ZeRO-1). A plan at the default runtime keeps its three rows. */
Test(ui_snapshot, header_shows_the_plan_runtime)
{
    ui_app a;
    const char *path = runtime_plan("se.json", "\"p2p\": \"sync\", \"grad_sync\": \"end\"");
    cr_assert_eq(ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 80, 24, NULL);
    const char *row = line_with(s, "p2p sync gsync end opg off");
    cr_assert(row, "%s", s);
    cr_assert(line_with(s, "GPUs 16 bw") && line_with(s, "GPUs 16 bw") < row, "%s", s);
    cr_assert(!strncmp(strchr(row, '\n') + 1, "+ stages", 8), "the header's last row:\n%s", s);
    free(s);
    s = snap(&a, 120, 30, NULL);
    cr_assert(line_with(s, "p2p sync  gsync end  opg off"), "%s", s);
    free(s);
    s = snap(&a, 160, 40, NULL);
    cr_assert(line_with(s, "runtime  p2p sync  grad-sync end  overlap-param-gather off"), "%s",
              s);
    free(s);
    int kk[] = { 'p', '-' }; /* pinned, re-planned on fewer GPUs: the runtime rides it */
    for (int i = 0; i < 2; i++) ui_app_key(&a, kk[i]);
    for (int w = 80; w <= 300; w += 22)
        for (int h = 24; h <= 100; h += 19) {
            s = ui_app_snapshot(&a, w, h, NULL, 0);
            cr_assert_not_null(s);
            int lines = 0;
            for (const char *l = s; *l; lines++) {
                const char *e = strchr(l, '\n');
                cr_assert_not_null(e);
                cr_assert_leq(e - l, w, "%dx%d: line %d is %d wide", w, h, lines, (int)(e - l));
                if (lines == 5) cr_assert(!strncmp(l, w >= 160 ? "runtime  p2p sync" : "p2p sync",
                                                   w >= 160 ? 17 : 8), "%dx%d:\n%s", w, h, s);
                l = e + 1;
            }
            cr_assert_eq(lines, h, "%dx%d: %d lines", w, h, lines);
            free(s);
        }
    ui_app_free(&a);

    /* a file with zero 1 alone has the row too, its zero shown (re-plans keep it) */
    path = runtime_plan("z1.json", "\"zero\": 1");
    cr_assert_eq(ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    s = snap(&a, 80, 24, NULL);
    cr_assert(line_with(s, "p2p overlap gsync overlap opg off zero 1"), "%s", s);
    free(s);
    ui_app_key(&a, '-');
    s = snap(&a, 80, 24, NULL);
    cr_assert(line_with(s, "p2p overlap gsync overlap opg off zero 1"), "re-planned:\n%s", s);
    free(s);
    ui_app_free(&a);

    /* the all-gather apart: on with the file's ZeRO-1 stages, and on a re-planned plan,
     * which the planner makes under the file's zero 1 (ui_replan) */
    path = runtime_plan("opg.json", "\"zero\": 1, \"overlap_param_gather\": true");
    cr_assert_eq(ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    s = snap(&a, 100, 30, NULL);
    cr_assert(line_with(s, "p2p overlap  gsync overlap  opg on"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "-"); /* 12 GPUs: re-planned */
    cr_assert(strstr(s, "(native planner)"), "%s", s);
    cr_assert(a.cur.pl && a.cur.pl->zero == 1 && a.cur.pl->overlap_param_gather, "%s", s);
    cr_assert(line_with(s, "p2p overlap  gsync overlap  opg on"), "%s", s);
    free(s);
    s = snap(&a, 160, 30, NULL);
    cr_assert(line_with(s, "runtime  p2p overlap  grad-sync overlap  overlap-param-gather on"),
              "%s", s);
    free(s);
    ui_app_free(&a);

    cr_assert_eq(ui_app_open(&a, NULL, NULL, runtime_plan("none.json", "\"p2p\": \"overlap\""),
                             tmpdir, UI_PLANNER_NATIVE), 0);
    s = snap(&a, 80, 24, NULL);
    row = line_with(s, "GPUs 16 bw");
    cr_assert(row && !strncmp(strchr(row, '\n') + 1, "+ stages", 8), "%s", s);
    cr_assert(!strstr(s, "p2p"), "%s", s);
    free(s);
    ui_app_free(&a);
}

/* An analytic profile made with a fused loss (`plumb profile --model --cross-entropy te`;
 * here GPT-2 on 8 H100s at bf16) and its plan from the native planner (`plumb plan -p`):
 * the 2D view of the plan file, and of the profile itself (re-planned by the native
 * planner), names the loss in the runtime row as the 3D row names it ("cross-entropy-te",
 * or "ce-te" where that does not fit), and the plans shown are the profile's precision
 * (bf16), not fp32. Before, the 2D view had no runtime row for them. */
Test(ui_snapshot, plan_of_an_analytic_profile_names_its_loss)
{
    plumb_err e = {{0}};
    cluster *all = cluster_load("profiles/clusters/dgx-h100.json", &e);
    cr_assert_not_null(all, "%s", e.msg);
    cluster *c = cluster_take_gpus(all, 8, "dgx-h100.json", &e);
    cr_assert_not_null(c, "%s", e.msg);
    transformer *t = transformer_load("examples/llm/gpt2.json", &e);
    cr_assert_not_null(t, "%s", e.msg);
    const char *words[][2] = {{"te", "cross-entropy-te"}, {"native", "cross-entropy-native"}};
    for (int k = 0; k < 2; k++) {
        llm_options lo;
        llm_options_init(&lo);
        lo.seq = 512;
        lo.cross_entropy = k ? LLM_CE_NATIVE : LLM_CE_TE;
        profile *p = llm_profile_build(t, c, "dgx-h100.json", &lo, &e);
        cr_assert_not_null(p, "%s", e.msg);
        char pp[512], cp[512], lp[512];
        snprintf(pp, sizeof pp, "%s/%s.json", tmpdir, words[k][0]);
        snprintf(cp, sizeof cp, "%s/h100x8.json", tmpdir);
        snprintf(lp, sizeof lp, "%s/%s-plan.json", tmpdir, words[k][0]);
        cr_assert_eq(profile_save(p, pp, &e), 0, "%s", e.msg);
        cr_assert_eq(cluster_save(c, cp, &e), 0, "%s", e.msg);
        native_options no;
        native_options_init(&no);
        plan *pl = planner_native(p, c, &no, NULL, &e);
        cr_assert_not_null(pl, "%s", e.msg);
        cr_expect_eq(pl->precision, DEV_BF16);
        cr_expect_eq(pl->cross_entropy, lo.cross_entropy);
        cr_assert_eq(plan_save(pl, lp, &e), 0, "%s", e.msg);
        plan_free(pl);
        profile_free(p);
        for (int from = 0; from < 2; from++) { /* the plan file, the profile */
            ui_app a;
            cr_assert_eq(from ? ui_app_open(&a, pp, cp, NULL, tmpdir, UI_PLANNER_NATIVE)
                              : ui_app_open(&a, NULL, NULL, lp, tmpdir, UI_PLANNER_NATIVE), 0);
            cr_assert(a.loaded, "%s", a.load_err);
            cr_assert(a.cur.pl, "%s", a.cur.err);
            cr_expect_eq(a.cur.pl->precision, DEV_BF16, "%s", from ? "profile" : "plan file");
            char brief[16];
            snprintf(brief, sizeof brief, "ce-%s", words[k][0]);
            char *s = snap(&a, 80, 24, NULL);
            const char *row = line_with(s, "p2p overlap");
            const char *w = row ? strstr(row, words[k][1]) : NULL; /* where it fits */
            if (!w && row) w = strstr(row, brief);
            cr_expect(w && w < strchr(row, '\n'), "%s, %s: no %s in the runtime row:\n%s",
                      words[k][0], from ? "profile" : "plan file", brief, s);
            free(s);
            s = snap(&a, 160, 40, NULL);
            row = line_with(s, "runtime  p2p overlap");
            cr_expect(row && strstr(row, words[k][1]) && strstr(row, words[k][1]) <
                      strchr(row, '\n'), "%s, %s: no %s in the runtime row:\n%s",
                      words[k][0], from ? "profile" : "plan file", words[k][1], s);
            free(s);
            ui_app_free(&a);
        }
    }
    transformer_free(t);
    cluster_free(c);
    cluster_free(all);
}

Test(ui_snapshot, straggler_and_memory_limit_match_plumb_sim_options)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    char *s = snap(&a, 120, 40, "<down><down><down>tTxs");
    cr_assert(strstr(s, "straggler d3 x3"), "%s", s);
    cr_assert(strstr(s, "mem limit 12 GiB"), "%s", s);
    cr_assert(strstr(s, ">d3!"), "the selected straggler is marked:\n%s", s);
    figs f;
    cJSON_Delete(frame_sim(s, "--straggler=3=3", "--memory-limit=12", "tTx", &f));
    cr_assert_eq(f.cap_gib, 12.0);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, replanning_on_gpu_changes_matches_plumb_sim)
{
    ui_app a;
    ui_app_open(&a, PROFILE, CLUSTER, NULL, tmpdir, UI_PLANNER_NATIVE);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 100, 30, "-s");
    cr_assert(strstr(s, "GPUs 12"), "%s", s);
    cr_assert(strstr(s, "(native planner)"), "%s", s);
    expect_frame_is_sim(s, "GPUs 12");
    free(s);
    s = snap(&a, 100, 30, "CC"); /* dualpipev, the last kind: a V placement, even split */
    cr_assert(strstr(s, "dualpipev"), "%s", s);
    cr_assert(strstr(s, "(even split)"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "C"); /* zb-v: the planner does not make V placements */
    cr_assert(strstr(s, "zb-v"), "%s", s);
    cr_assert(strstr(s, "(even split)"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "CCs"); /* interleaved: the native planner's virtual stages */
    cr_assert(strstr(s, "interleaved"), "%s", s);
    cr_assert(strstr(s, "(native planner)") || strstr(s, "(even split: no plan"), "%s", s);
    expect_frame_is_sim(s, "interleaved");
    free(s);
    ui_app_free(&a);
}

/* Without a plan file recomputation starts on auto: the native planner tries both (and
 * half and a quarter of the profiled microbatch), as `plumb plan` does, and keeps the
 * faster: VGG-16 on cluster-a runs 32-sample microbatches without recomputation at 2588
 * samples/s, and 1968 with it. */
Test(ui_snapshot, fresh_session_lets_the_planner_choose_recompute)
{
    ui_app a;
    ui_app_open(&a, PROFILE, CLUSTER, NULL, tmpdir, UI_PLANNER_NATIVE);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 120, 40, "s");
    cr_assert(strstr(s, "recompute auto (on)") || strstr(s, "recompute auto (off)"), "%s", s);
    cr_assert(strstr(s, "vs DP "), "%s", s);
    figs aut;
    cJSON_Delete(frame_sim(s, NULL, NULL, "recompute auto", &aut));
    free(s);
    s = snap(&a, 120, 40, "r"); /* auto -> on */
    cr_assert(strstr(s, "recompute on"), "%s", s);
    figs on = read_figs(s);
    free(s);
    s = snap(&a, 120, 40, "r"); /* on -> off: the planner must do without */
    cr_assert(strstr(s, "recompute off"), "%s", s);
    figs off = read_figs(s);
    cr_assert_geq(aut.sps, on.sps, "auto picked the slower plan (%g < %g samples/s with)",
                  aut.sps, on.sps);
    cr_assert_geq(aut.sps, off.sps, "auto picked the slower plan (%g < %g samples/s without)",
                  aut.sps, off.sps);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, what_if_keys_undo_and_pin)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    char *s0 = snap(&a, 100, 30, NULL);
    figs f0 = read_figs(s0);
    char *s = snap(&a, 100, 30, "+");
    cr_assert(strstr(s, "GPUs 20"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "r"); /* the plan file's "off" -> auto: the planner's choice */
    cr_assert(strstr(s, "recompute auto (on)") || strstr(s, "recompute auto (off)"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "r");
    cr_assert(strstr(s, "recompute on"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "uuu");
    figs f1 = read_figs(s);
    cr_assert(f0.sps == f1.sps && f0.iter_s == f1.iter_s && f0.mem_gib == f1.mem_gib,
              "undo restores the figures");
    cr_assert(strstr(s, "GPUs 16"));
    free(s);
    s = snap(&a, 100, 30, "u");
    cr_assert(strstr(s, "nothing to undo"), "%s", s);
    free(s);
    s = snap(&a, 100, 30, "pB"); /* pin, then halve the ethernet */
    cr_assert(strstr(s, "live  samples/s"), "%s", s);
    cr_assert(strstr(s, "pin   samples/s"), "%s", s);
    cr_assert(strstr(s, "diff  samples/s -"), "slower network, fewer samples/s:\n%s", s);
    free(s);
    free(s0);
    ui_app_free(&a);
}

Test(ui_snapshot, help_overlay_and_too_small)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    char *s = snap(&a, 80, 24, "?");
    cr_assert(strstr(s, "+ help -"), "%s", s);
    cr_assert(strstr(s, "q  ^C         quit"), "%s", s);
    free(s);
    s = snap(&a, 80, 24, "x"); /* the key closes help and does nothing else */
    cr_assert(!strstr(s, "+ help -"));
    cr_assert(strstr(s, "limit off"), "%s", s);
    free(s);
    s = snap(&a, 60, 20, NULL);
    cr_assert(strstr(s, "terminal too small: 60x20"), "%s", s);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, load_errors_are_shown_not_fatal)
{
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, "/nonexistent/plan.json", tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(!a.loaded);
    char *s = snap(&a, 80, 24, "+bcms");
    cr_assert(strstr(s, "nothing loaded"), "%s", s);
    cr_assert(strstr(s, "error: /nonexistent/plan.json: "), "%s", s);
    free(s);
    ui_app_free(&a);

    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad.json", tmpdir);
    FILE *f = fopen(bad, "w");
    fputs("{\"format\": \"plumb-profile/1\", \"name\": 3}", f);
    fclose(f);
    ui_app_open(&a, bad, CLUSTER, NULL, tmpdir, UI_PLANNER_NATIVE);
    s = snap(&a, 100, 24, NULL);
    cr_assert(strstr(s, "error: ") && strstr(s, "bad.json: "), "%s", s);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, save_and_export_write_files)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    char *s = snap(&a, 200, 30, "e");
    cr_assert(strstr(s, "exported "), "%s", s);
    free(s);
    const char *ext[] = { "report.json", "trace.json", "svg" };
    for (int i = 0; i < 3; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/vgg16-16gpu-pipedream.%s", tmpdir, ext[i]);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0, "%s missing", p);
        cr_assert_gt(st.st_size, 100);
    }
    /* the exported trace is what `plumb sim --trace` writes of the plan by default: the
     * ring all-reduce hops left out (this plan's replicated stage has some), byte for byte */
    char tp[256];
    snprintf(tp, sizeof tp, "%s/vgg16-16gpu-pipedream.trace.json", tmpdir);
    plumb_err te;
    err_clear(&te);
    size_t flen;
    char *file = file_read_all(tp, (size_t)1 << 30, "too large", &flen, &te);
    cr_assert_not_null(file, "%s", te.msg);
    sim_options o;
    sim_options_init(&o);
    o.timeline = SIM_TIMELINE_NO_RING_HOPS;
    sim_report *lean = sim_run(a.cur.pl, &o, &te);
    cr_assert_not_null(lean, "%s", te.msg);
    size_t len;
    char *want = timeline_chrome_text(lean->tl, &len);
    cr_assert_not_null(want);
    cr_expect(flen == len && !memcmp(file, want, len), "exported trace (%zu bytes) is not "
              "plumb sim's (%zu bytes)", flen, len);
    o.timeline = SIM_TIMELINE_FULL;
    sim_report *full = sim_run(a.cur.pl, &o, &te);
    cr_assert_not_null(full, "%s", te.msg);
    cr_expect_lt(lean->tl->n, full->tl->n, "the plan has no ring hop to leave out");
    free(want);
    free(file);
    sim_report_free(full);
    sim_report_free(lean);
    s = snap(&a, 200, 30, "s");
    char p[256];
    snprintf(p, sizeof p, "%s/vgg16-16gpu-pipedream.plan.json", tmpdir);
    cr_assert(strstr(s, p), "%s", s);
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load(p, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert_eq(pl->nstages, 2);
    cr_assert_gt(pl->pred_samples_per_s, 0);
    plan_free(pl);
    free(s);
    ui_app_free(&a);
}

/* The files already there are kept: a save or export whose derived name is taken (here by
 * a file of someone's, then by the dashboard's own earlier save) writes under the next free
 * stem, STEM-2, STEM-3, never over a file (the dashboard's input plan included). */
Test(ui_snapshot, save_and_export_never_replace_a_file)
{
    const char *dir = tmpdir;
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/vgg16-16gpu-pipedream.plan.json", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("someone's file\n", f);
    fclose(f);
    snprintf(q, sizeof q, "%s/vgg16-16gpu-pipedream.svg", dir);
    f = fopen(q, "w");
    cr_assert_not_null(f);
    fputs("someone's picture\n", f);
    fclose(f);
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, dir, UI_PLANNER_NATIVE);
    char *s = snap(&a, 200, 30, "s");
    char want[300];
    snprintf(want, sizeof want, "saved %s/vgg16-16gpu-pipedream-2.plan.json", dir);
    cr_expect(strstr(s, want), "%s", s);
    free(s);
    s = snap(&a, 200, 30, "s");
    snprintf(want, sizeof want, "saved %s/vgg16-16gpu-pipedream-3.plan.json", dir);
    cr_expect(strstr(s, want), "%s", s);
    free(s);
    s = snap(&a, 200, 30, "e");  /* the .svg is taken: all three files move to -2 */
    snprintf(want, sizeof want, "exported %s/vgg16-16gpu-pipedream-2.{", dir);
    cr_expect(strstr(s, want), "%s", s);
    free(s);
    plumb_err e;
    err_clear(&e);
    size_t n;
    char *text = file_read_all(p, 1 << 20, "too large", &n, &e);
    cr_assert_not_null(text, "%s", e.msg);
    cr_expect_str_eq(text, "someone's file\n");
    free(text);
    text = file_read_all(q, 1 << 20, "too large", &n, &e);
    cr_assert_not_null(text, "%s", e.msg);
    cr_expect_str_eq(text, "someone's picture\n");
    free(text);
    char r[256];
    snprintf(r, sizeof r, "%s/vgg16-16gpu-pipedream-2.report.json", dir);
    struct stat st;
    cr_expect_eq(stat(r, &st), 0, "%s missing", r);
    snprintf(r, sizeof r, "%s/vgg16-16gpu-pipedream.report.json", dir);
    cr_expect_neq(stat(r, &st), 0, "%s written beside a taken .svg", r);
    ui_app_free(&a);
}

Test(ui_snapshot, keys_parser)
{
    int k[16];
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_keys_parse("a<up><lt>b<C-c>", k, 16, &e), 5);
    cr_assert(k[0] == 'a' && k[1] == UI_KEY_UP && k[2] == '<' && k[3] == 'b' &&
              k[4] == UI_KEY_CTRL_C);
    cr_assert_eq(ui_keys_parse("<bogus>", k, 16, &e), -1);
    cr_assert(strstr(e.msg, "--keys"));
    cr_assert_eq(ui_keys_parse("<up", k, 16, &e), -1);
    cr_assert_eq(ui_keys_parse("aaaa", k, 2, &e), -1);
}

/* Defence in depth: a simulation whose times are not finite (NaN start, infinite
 * duration: what a 1e-308 Gbit/s link once produced) is drawn without a crash; the
 * timeline's column indices come only from finite times. */
Test(ui_snapshot, non_finite_times_draw_without_crash)
{
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded && a.cur.rep && a.cur.rep->tl && a.cur.rep->tl->n > 2, "%s", a.load_err);
    timeline *tl = a.cur.rep->tl;
    for (size_t i = 0; i < tl->n; i += 2) tl->ev[i].start_s = NAN;
    tl->ev[1].dur_s = INFINITY;
    char *s = snap(&a, 120, 40, NULL);
    cr_expect(strstr(s, "timeline") != NULL, "%s", s);
    free(s);
    ui_app_free(&a);
}

/* ---- a transformer's 3D layout (plumb ui --model) ------------------------------------ */

#define GPT3 "examples/llm/gpt3-175b.json"
#define A100 "profiles/clusters/dgx-a100-80g.json"

/* GPT-3 175B on 1024 A100s as Narayanan et al. 2021 lay it out: tp 8 x pp 8 x dp 16,
 * global batch 1536, microbatch size 1, full recomputation. */
static void open_gpt3(ui_app *a)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 1024, o.tp = 8, o.pp = 8, o.dp = 16;
    o.global_batch = 1536;
    o.microbatch_size = 1;
    o.recompute = RECOMPUTE_FULL;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(a, GPT3, A100, &o, NULL, tmpdir, &e), 0, "%s", e.msg);
}

/* A trace over the dashboard's limit: one status line naming its size, nothing written,
 * the files already there kept; within the limit (its exact length) all three written. */
Test(ui_snapshot, export_over_the_trace_limit_writes_nothing)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    size_t len;
    char *text = timeline_chrome_text(a.cur.rep->tl, &len);
    cr_assert_not_null(text);
    free(text);
    const char *ext[] = {"report.json", "trace.json", "svg"};
    char p[3][256];
    for (int i = 0; i < 3; i++)
        snprintf(p[i], sizeof p[i], "%s/vgg16-16gpu-pipedream.%s", tmpdir, ext[i]);
    FILE *f = fopen(p[1], "w");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    a.trace_limit_bytes = (double)len - 1;
    char *s = snap(&a, 200, 30, "e");
    char want[128];
    snprintf(want, sizeof want, "the trace would be %.3g GiB (%zu bytes, %zu events), over the",
             (double)len / 1073741824.0, len, a.cur.rep->tl->n);
    cr_expect(strstr(a.msg, want) && strstr(a.msg, "nothing written") && a.msg_err,
              "status: %s", a.msg);
    cr_expect(strstr(s, "nothing written"), "%s", s);
    free(s);
    struct stat st;
    cr_expect_neq(stat(p[0], &st), 0, "the report was written");
    cr_expect_neq(stat(p[2], &st), 0, "the SVG was written");
    cr_expect(stat(p[1], &st) == 0 && st.st_size == 3, "the trace there before was replaced");
    a.trace_limit_bytes = (double)len;
    s = snap(&a, 200, 30, "e");
    cr_expect(strstr(a.msg, "exported ") && !a.msg_err, "status: %s", a.msg);
    free(s);
    /* within the limit: written beside the trace that was there, which is kept */
    cr_expect(stat(p[1], &st) == 0 && st.st_size == 3, "the trace there before was replaced");
    for (int i = 0; i < 3; i++)
        snprintf(p[i], sizeof p[i], "%s/vgg16-16gpu-pipedream-2.%s", tmpdir, ext[i]);
    for (int i = 0; i < 3; i++)
        cr_expect(stat(p[i], &st) == 0 && st.st_size > 100, "%s not written", p[i]);
    cr_expect_eq(stat(p[1], &st), 0);
    cr_expect_eq((size_t)st.st_size, len, "the trace is %zu bytes, %zu counted",
                 (size_t)st.st_size, len);
    ui_app_free(&a);
}

/* Layout options tp x pp x dp on as many GPUs, global batch b, microbatch size 1. */
static layout3d_options layout_of(int tp, int pp, int dp, int b)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = tp * pp * dp, o.tp = tp, o.pp = pp, o.dp = dp;
    o.global_batch = b;
    o.microbatch_size = 1;
    return o;
}

/* Opens GPT-2 on dgx-a100-80g laid out as o, at the default runtime. */
static void open_gpt2(ui_app *a, layout3d_options o)
{
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(a, "examples/llm/gpt2.json", A100, &o, NULL, tmpdir, &e), 0,
                 "%s", e.msg);
}

/* A transformer's layout is simulated folded (one pipeline for its alike replicas, copied
 * to the others: the same figures to rounding where rings mix): the export runs its plan
 * in full, so the trace is plumb sim's of that plan byte for byte (without its 4-way data
 * parallel ring hops). */
Test(ui_snapshot, export_of_a_layout_is_the_unfolded_trace)
{
    ui_app a;
    plumb_err e;
    err_clear(&e);
    open_gpt2(&a, layout_of(2, 2, 4, 32));
    char *s = snap(&a, 200, 30, "e");
    cr_assert(strstr(a.msg, "exported ") && !a.msg_err, "status: %s", a.msg);
    free(s);
    char stem[700], tp[800];
    ui_app_stem(&a, stem, sizeof stem);
    snprintf(tp, sizeof tp, "%s.trace.json", stem);
    size_t flen, len;
    char *file = file_read_all(tp, (size_t)1 << 30, "too large", &flen, &e);
    cr_assert_not_null(file, "%s", e.msg);
    sim_options so = a.cur.opt;
    so.timeline = SIM_TIMELINE_NO_RING_HOPS;
    sim_report *r = sim_run(a.cur.pl, &so, &e);
    cr_assert_not_null(r, "%s", e.msg);
    char *want = timeline_chrome_text(r->tl, &len);
    cr_assert_not_null(want);
    cr_expect(flen == len && !memcmp(file, want, len), "exported trace (%zu bytes) is not "
              "plumb sim's (%zu bytes)", flen, len);
    free(want);
    free(file);
    sim_report_free(r);
    ui_app_free(&a);
}

/* The last line of a frame, trailing blanks cut, into buf. */
static const char *status_of(const char *frame, char *buf, size_t n)
{
    size_t len = strlen(frame);
    while (len && (frame[len - 1] == '\n' || frame[len - 1] == ' ')) len--;
    size_t b = len;
    while (b && frame[b - 1] != '\n') b--;
    snprintf(buf, n, "%.*s", (int)(len - b), frame + b);
    while (*buf && buf[strlen(buf) - 1] == ' ') buf[strlen(buf) - 1] = 0;
    return buf;
}

/* A transformer's status line at 80 to 160 columns: every key whole, the runtime keys
 * (k j y E f) there from 80 on; a refusal's long line leaves "q quit  ? help" after it. */
Test(ui_snapshot, layout3d_status_line_keeps_whole_keys)
{
    static const struct { int w; const char *end; } T[] = {
        { 80, "  kK tpo  j opg  y p2p  E gsync" },
        { 100, "  kK tpo  j opg  y p2p  E gsync  f attn  vV cp  nN mbs" },
        { 120, "  y p2p  E gsync  f attn  vV cp  nN mbs  iI intlv  r recomp" },
        { 160, "  f attn  vV cp  nN mbs  iI intlv  r recomp  a sp  o zero  u undo  p pin  s save" },
    };
    ui_app a;
    open_gpt2(&a, layout_of(2, 2, 2, 16));
    char st[512];
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        char *s = snap(&a, T[i].w, 30, NULL);
        status_of(s, st, sizeof st);
        size_t l = strlen(st), k = strlen(T[i].end);
        cr_assert(!strncmp(st, "q quit  ? help  gG tp", 21) && l >= k &&
                  !strcmp(st + l - k, T[i].end), "at %d: %s", T[i].w, st);
        free(s);
    }
    char *s = snap(&a, 80, 24, "j"); /* refused at zero 0: plan --model's line */
    status_of(s, st, sizeof st);
    cr_assert(a.msg_err && strstr(a.msg, "--overlap-param-gather"), "%s", a.msg);
    cr_assert(!strncmp(st, "--overlap-param-gather", 22) && strlen(st) <= 80 &&
              !strcmp(st + strlen(st) - 16, "  q quit  ? help"), "%s", st);
    free(s);
    ui_app_free(&a);
}

/* plumb ui --model --cp: the layout row names cp, the memory panel's ranks span tp x cp x
 * dp devices, v V lay out again with their cp (the GPUs kept, dp following), s saves the
 * plan with its "cp" and plumb sim prices it as the frame shows, and f (standard
 * attention) at cp 2 is refused with plan --model's line. */
Test(ui_snapshot, layout3d_context_parallelism_rides_the_keys_and_is_saved)
{
    ui_app a;
    layout3d_options o = layout_of(2, 2, 2, 16);
    o.cp = 2, o.gpus = 16, o.attention = LLM_ATTN_FLASH;
    open_gpt2(&a, o);
    char *s = snap(&a, 130, 40, NULL);
    cr_assert(strstr(s, "GPUs 16 = tp 2 x cp 2 x pp 2 x dp 2  mbs 1  v 1"), "%s", s);
    cr_assert(strstr(s, "|   1 1       8-15 "), "rank 1 on devices 8-15:\n%s", s);
    free(s);
    static const struct { const char *keys, *row; int cp, dp; } K[] = {
        { "vs", "GPUs 16 = tp 2 x cp 4 x pp 2 x dp 1  mbs 1", 4, 1 },
        { "VVs", "GPUs 16 = tp 2 x pp 2 x dp 4  mbs 1", 1, 4 },
        { "vws", "GPUs 32 = tp 2 x cp 2 x pp 2 x dp 4  mbs 1", 2, 4 },
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++) {
        s = snap(&a, 130, 40, K[i].keys);
        cr_assert(strstr(s, K[i].row), "after %s:\n%s", K[i].keys, s);
        cJSON *rep = frame_sim(s, NULL, NULL, K[i].keys, NULL);
        const cJSON *cp = cJSON_GetObjectItemCaseSensitive(rep, "cp");
        cr_assert_eq(cp ? (int)cp->valuedouble : 1, K[i].cp, "after %s", K[i].keys);
        cr_assert_eq(jnum(rep, "dp"), K[i].dp);
        cJSON_Delete(rep);
        free(s);
    }
    s = snap(&a, 200, 40, "f"); /* at cp 2 from the keys above */
    cr_assert(strstr(s, "kept the layout: --cp: expected --attention flash with --cp 2"), "%s",
              s);
    cr_assert(strstr(s, "GPUs 32 = tp 2 x cp 2 x pp 2 x dp 4"), "%s", s);
    free(s);
    ui_app_free(&a);
}

/* The frame's figures and layout equal plumb sim --json of the plan it saves. */
static void assert_saved_layout(const char *frame, int tp, int pp, int dp, int sp, int zero)
{
    char label[64];
    snprintf(label, sizeof label, "tp %d pp %d dp %d", tp, pp, dp);
    cJSON *rep = frame_sim(frame, NULL, NULL, label, NULL);
    cr_assert(jnum(rep, "tp") == tp && jnum(rep, "pp") == pp && jnum(rep, "dp") == dp,
              "report: tp %g pp %g dp %g", jnum(rep, "tp"), jnum(rep, "pp"), jnum(rep, "dp"));
    cr_assert(jnum(rep, "gpus") == tp * pp * dp);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(rep, "sequence_parallel")) == sp);
    cr_assert_eq(jnum(rep, "zero"), zero);
    double tok;
    const char *t = strstr(frame, "tokens/s ");
    cr_assert(t && sscanf(t, "tokens/s %lf", &tok) == 1, "%s", frame);
    cr_assert(fabs(tok - jnum(rep, "tokens_per_s")) <= 0.5, "tokens/s %g vs %g", tok,
              jnum(rep, "tokens_per_s"));
    cJSON_Delete(rep);
}

/* sim_report_device (the stage rows' lookup, a binary search) finds each device of a
 * report as a scan finds it, and no device where no worker runs: on a plan's report and on
 * a 3D layout's one-pipeline (folded) one, whose devices are copied to every replica. */
static void check_lookup(const sim_report *r)
{
    cr_assert_gt(r->ndevices, 0);
    int hi = r->devices[r->ndevices - 1].device;
    for (int dev = -1; dev <= hi + 1; dev++) {
        const sim_device_report *want = NULL;
        for (int i = 0; i < r->ndevices && !want; i++)
            if (r->devices[i].device == dev) want = &r->devices[i];
        cr_assert_eq(sim_report_device(r, dev), want, "device %d of %d", dev, r->ndevices);
    }
}

Test(ui_snapshot, report_device_lookup_finds_what_a_scan_finds)
{
    ui_app a;
    ui_app_open(&a, NULL, NULL, PLAN, tmpdir, UI_PLANNER_NATIVE);
    cr_assert_not_null(a.cur.rep);
    check_lookup(a.cur.rep);
    ui_app_free(&a);
    open_gpt3(&a);
    cr_assert_eq(a.cur.rep->ndevices, 8 * 16, "%d devices", a.cur.rep->ndevices); /* pp x dp groups */
    check_lookup(a.cur.rep);
    char *s = snap(&a, 130, 40, "GG"); /* tp 2 x pp 8 x dp 64 */
    free(s);
    check_lookup(a.cur.rep);
    ui_app_free(&a);
}

Test(ui_snapshot, layout3d_keys_lay_out_again_and_match_plumb_sim)
{
    ui_app a;
    open_gpt3(&a);
    char *s = snap(&a, 130, 40, NULL);
    cr_assert(strstr(s, "GPUs 1024 = tp 8 x pp 8 x dp 16  mbs 1  v 1  recomp full  sp off  "
                        "zero 0"), "%s", s);
    cr_assert(strstr(s, "1f1b-flush  mb 1536x1  8 stages (3D layout)"), "%s", s);
    cr_assert(strstr(s, "memory per pipeline rank"), "%s", s);
    cr_assert(strstr(s, "|   7 7       896-1023 "), "every pipeline rank has a row:\n%s", s);
    cr_assert(strstr(s, "MFU "), "%s", s);
    free(s);
    /* ZeRO-1, then tp down: the GPUs stay, dp follows; saved and simulated by plumb sim
     * (which takes only layouts that fit) */
    s = snap(&a, 130, 40, "oGs");
    cr_assert(strstr(s, "GPUs 1024 = tp 4 x pp 8 x dp 32  mbs 1  v 1  recomp full  sp off  "
                        "zero 1"), "%s", s);
    assert_saved_layout(s, 4, 8, 32, 0, 1);
    free(s);
    /* pp up (dp follows), sequence parallelism on, dp down (the GPUs follow: 1536 / 15, 14
     * and 13 are fractional) */
    s = snap(&a, 130, 40, "daWs");
    cr_assert(strstr(s, "GPUs 768 = tp 4 x pp 16 x dp 12  mbs 1  v 1  recomp full  sp on  "
                        "zero 1"), "%s", s);
    assert_saved_layout(s, 4, 16, 12, 1, 1);
    free(s);
    /* interleave 2 and the microbatch size 2: the interleaved schedule, 768 microbatches */
    s = snap(&a, 130, 40, "ins");
    cr_assert(strstr(s, "interleaved  mb 768x2  32 stages (3D layout)"), "%s", s);
    cr_assert(strstr(s, "mbs 2  v 2"), "%s", s);
    assert_saved_layout(s, 4, 16, 12, 1, 1);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, layout3d_refused_layout_keeps_the_plan_and_says_why)
{
    ui_app a;
    open_gpt3(&a);
    char *s = snap(&a, 120, 40, "g");
    cr_assert(strstr(s, "no larger tp 8: tp must divide a server's 8 devices"), "%s", s);
    figs first = read_figs(s);
    free(s);
    /* sequence parallelism needs tp 2 or more: the third G is refused by the layout (pp 32
     * first keeps dp, and the simulation's all-reduce rings, small) */
    s = snap(&a, 120, 40, "ddaGG");
    cr_assert(strstr(s, "tp 2 x pp 32 x dp 16"), "%s", s);
    figs before = read_figs(s);
    free(s);
    s = snap(&a, 120, 40, "G");
    cr_assert(strstr(s, "--sequence-parallel: expected --tp 2 or more"), "%s", s);
    cr_assert(strstr(s, "kept the layout: --sequence-parallel"), "%s", s);
    cr_assert(strstr(s, "GPUs 1024 = tp 2 x pp 32 x dp 16") && strstr(s, "sp on"), "%s", s);
    figs after = read_figs(s);
    cr_assert(before.iter_s == after.iter_s && before.mem_gib == after.mem_gib);
    cr_assert_eq(a.st->undo_n, 5, "the refused key is not on the undo stack");
    cr_assert_eq(a.st->redo_n, 0);
    free(s);
    s = snap(&a, 160, 40, "uuuuu");
    cr_assert(strstr(s, "tp 8 x pp 8 x dp 16") && strstr(s, "sp off"), "%s", s);
    /* the layouts undo returns to were kept, not simulated again: the same figures */
    cr_assert(strstr(s, "(kept)"), "%s", s);
    figs back = read_figs(s);
    cr_assert(back.iter_s == first.iter_s && back.sps == first.sps && back.mem_gib ==
              first.mem_gib);
    free(s);
    ui_app_free(&a);
}

/* Row `rank` of the memory panel: W G O A and the peak, GiB. */
static void mem_row(const char *frame, int rank, double v[5])
{
    char pre[32];
    snprintf(pre, sizeof pre, "|%4d %d ", rank, rank);
    const char *l = strstr(frame, pre);
    cr_assert_not_null(l, "no memory row %d in\n%s", rank, frame);
    int r, st;
    char devs[32];
    double fb;
    cr_assert_eq(sscanf(l + 1, "%d %d %31s %lf %lf %lf %lf %lf %lf", &r, &st, devs, &fb, &v[0],
                        &v[1], &v[2], &v[3], &v[4]), 9, "%.100s", l);
}

/* The runtime of plumb plan --model (tp overlap, p2p, gradient precision, balancing) rides
 * every layout the keys reach: the row names it (n/a where the layout cannot take it), the
 * figures equal plumb sim --json of the plan saved, and that plan carries the runtime. */
Test(ui_snapshot, layout3d_runtime_rides_every_layout_and_is_saved)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = 2, o.pp = 2, o.dp = 2;
    o.global_batch = 16;
    o.microbatch_size = 1;
    o.p2p_sync = 1;
    o.grad_reduce = DEV_BF16;
    o.balance = 1;
    ui_runtime rt = { TP_OVERLAP_FULL, 0, 0 };
    ui_app a;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(&a, "examples/llm/gpt2.json", A100, &o, &rt, tmpdir, &e), 0,
                 "%s", e.msg);
    cr_assert(a.cur.pl && a.cur.pl->tp_overlap == TP_OVERLAP_FULL && a.cur.pl->p2p_sync &&
              a.cur.pl->grad_reduce == DEV_BF16 && a.cur.balanced);
    char *s = snap(&a, 80, 24, NULL);
    cr_assert(strstr(s, "\ntpo full opg off p2p sync grad bf16 state fp32 attn standard bal "),
              "%s", s);
    free(s);
    /* dp up: the runtime stays, balanced again; saved, simulated by plumb sim */
    s = snap(&a, 130, 40, "ws");
    cr_assert(strstr(s, "tpo full  opg off  p2p sync  grad bf16"), "%s", s);
    assert_saved_layout(s, 2, 2, 4, 0, 0);
    plan *pl = plan_load(saved_plan_path(s), &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert(pl->tp_overlap == TP_OVERLAP_FULL && pl->p2p_sync && pl->grad_reduce == DEV_BF16);
    plan_free(pl);
    free(s);
    /* tp down to 1: no tensor-parallel collectives, tp overlap n/a, the rest stays */
    s = snap(&a, 130, 40, "Gs");
    cr_assert(strstr(s, "GPUs 16 = tp 1 x pp 2 x dp 8"), "%s", s);
    cr_assert(strstr(s, "tpo n/a  opg off  p2p sync  grad bf16"), "%s", s);
    assert_saved_layout(s, 1, 2, 8, 0, 0);
    pl = plan_load(saved_plan_path(s), &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert(pl->tp_overlap == TP_OVERLAP_NONE && pl->p2p_sync && pl->grad_reduce == DEV_BF16);
    plan_free(pl);
    free(s);
    ui_app_free(&a);
}

/* Layout options tp x pp x dp on as many GPUs, global batch b, microbatch size 1. */
static layout3d_options layout_of(int tp, int pp, int dp, int b);

/* The sum of the forward times of a plan's layers (its profile: the attention kind's). */
static double forward_ms(const plan *pl)
{
    double s = 0;
    for (int i = 0; i < pl->prof->nlayers; i++) s += pl->prof->layers[i].forward_ms;
    return s;
}

/* The runtime keys (k tp overlap, y p2p, f attention, j the all-gather apart) lay the
 * model out again with the setting: the row names it, the figures equal plumb sim --json
 * of the plan saved, which carries it (attention flash: the profile layout3d_build makes
 * with it); a setting the layout cannot take is refused with the runtime check's line,
 * the plan, settings and undo stack kept. */
Test(ui_snapshot, layout3d_runtime_keys_lay_out_again_and_are_saved)
{
    layout3d_options o = layout_of(2, 2, 2, 16);
    o.zero = 1;
    ui_app a;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(&a, "examples/llm/gpt2.json", A100, &o, NULL, tmpdir, &e), 0,
                 "%s", e.msg);
    char *s = snap(&a, 130, 40, NULL);
    figs first = read_figs(s);
    free(s);
    s = snap(&a, 130, 40, "kyfs");
    cr_assert(strstr(s, "tpo backward  opg off  p2p sync  grad fp32  state fp32  attn flash"),
              "%s", s);
    assert_saved_layout(s, 2, 2, 2, 0, 1);
    figs kyf = read_figs(s);
    cr_assert(kyf.iter_s != first.iter_s);
    plan *pl = plan_load(saved_plan_path(s), &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_assert(pl->tp_overlap == TP_OVERLAP_BACKWARD && pl->p2p_sync == 1 &&
              pl->overlap_param_gather == 0);
    transformer *t = transformer_load("examples/llm/gpt2.json", &e);
    cluster *c = cluster_load(A100, &e);
    cr_assert(t && c, "%s", e.msg);
    layout3d_options fo = o;
    fo.attention = LLM_ATTN_FLASH;
    plan *flash = layout3d_build(t, c, A100, &fo, &e);
    cr_assert_not_null(flash, "%s", e.msg);
    cr_assert_float_eq(forward_ms(pl), forward_ms(flash), 1e-9 * forward_ms(flash),
                       "the saved plan's layers are not flash attention's");
    plan_free(flash);
    plan_free(pl);
    free(s);
    /* j: the all-gather under the forward (zero 1), saved */
    s = snap(&a, 130, 40, "js");
    cr_assert(strstr(s, "opg on"), "%s", s);
    assert_saved_layout(s, 2, 2, 2, 0, 1);
    pl = plan_load(saved_plan_path(s), &e);
    cr_assert(pl && pl->overlap_param_gather == 1, "%s", e.msg);
    plan_free(pl);
    free(s);
    /* ZeRO off: the all-gather asked shows n/a; asked again (off, on) it is refused */
    s = snap(&a, 130, 40, "oj");
    cr_assert(strstr(s, "opg off"), "%s", s);
    free(s);
    int undo = a.st->undo_n;
    s = snap(&a, 130, 40, NULL);
    figs before = read_figs(s);
    free(s);
    s = snap(&a, 130, 40, "j");
    cr_assert(strstr(s, "--overlap-param-gather: belongs to --zero 1"), "%s", s);
    cr_assert(strstr(a.msg, "--overlap-param-gather: belongs to --zero 1") && a.msg_err);
    cr_assert(strstr(s, "opg off") && strstr(s, "zero 0"), "%s", s);
    figs after = read_figs(s);
    cr_assert(before.iter_s == after.iter_s && a.st->undo_n == undo);
    free(s);
    /* undo walks back through the runtime keys to the first layout, kept */
    for (int i = 0; i < undo; i++) ui_app_key(&a, 'u');
    s = snap(&a, 130, 40, NULL);
    cr_assert(strstr(s, "tpo none  opg off  p2p overlap"), "%s", s);
    cr_assert_eq(read_figs(s).iter_s, first.iter_s);
    free(s);
    transformer_free(t);
    cluster_free(c);
    ui_app_free(&a);
}

Test(ui_snapshot, layout3d_memory_panel_holds_megatron_bytes_per_parameter)
{
    ui_app a;
    open_gpt3(&a);
    /* a middle rank holds 12 blocks of 12 h^2 weights (biases and norms aside, < 0.1 %)
     * split 8 ways; mixed precision (Korthikanti et al. 2022, Table 1 of Rajbhandari et al.):
     * 2 bytes of bf16 weights, 4 of fp32 gradients, 12 of fp32 master weights and Adam
     * moments per parameter */
    const double h = 12288, P = 12 * 12 * h * h / 8, G = 1024.0 * 1024 * 1024;
    char *s = snap(&a, 160, 40, NULL);
    double v[5];
    mem_row(s, 3, v);
    cr_assert(fabs(v[0] - 2 * P / G) < 0.01 * 2 * P / G, "weights %g GiB", v[0]);
    cr_assert(fabs(v[1] - 4 * P / G) < 0.01 * 4 * P / G, "gradients %g GiB", v[1]);
    cr_assert(fabs(v[2] - 12 * P / G) < 0.01 * 12 * P / G, "optimizer %g GiB", v[2]);
    cr_assert(v[4] >= v[0] + v[1] + v[2] + v[3] - 0.02, "peak %g below its parts", v[4]);
    double act_full = v[3];
    free(s);
    /* ZeRO-1 shards the 12 bytes over the 16 replicas; weights and gradients stay */
    s = snap(&a, 160, 40, "o");
    double z[5];
    mem_row(s, 3, z);
    cr_assert(fabs(z[2] - 12 * P / 16 / G) < 0.01 * 12 * P / 16 / G + 0.005, "%g GiB", z[2]);
    cr_assert(z[0] == v[0] && z[1] == v[1]);
    free(s);
    /* no recomputation keeps every block's activations: more than full's checkpoints */
    s = snap(&a, 160, 40, "r");
    cr_assert(strstr(s, "recomp none"), "%s", s);
    mem_row(s, 3, z);
    cr_assert(z[3] > 5 * act_full, "activations %g GiB vs %g with full recompute", z[3],
              act_full);
    free(s);
    ui_app_free(&a);
}

Test(ui_snapshot, layout3d_frames_fit_every_screen_size)
{
    ui_app a;
    open_gpt3(&a);
    const int sizes[][2] = { { 80, 24 }, { 100, 30 }, { 160, 50 }, { 300, 100 } };
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 3; k++) {
            char *s = snap(&a, sizes[i][0], sizes[i][1], k == 0 ? NULL : k == 1 ? "p" : "?");
            int lines = 0;
            for (const char *l = s; *l; l++) lines += *l == '\n';
            cr_assert_eq(lines, sizes[i][1]);
            for (const char *l = s; *l;) {
                const char *e = strchr(l, '\n');
                cr_assert(e && e - l <= sizes[i][0], "a line wider than %d", sizes[i][0]);
                l = e + 1;
            }
            cr_assert(k == 2 || strstr(s, "memory per"), "%dx%d:\n%s", sizes[i][0],
                      sizes[i][1], s);
            cr_assert(k != 2 || strstr(s, "tensor-parallel ranks up / down"), "%s", s);
            free(s);
            if (k == 2) free(snap(&a, sizes[i][0], sizes[i][1], "?")); /* close it */
        }
        free(snap(&a, 80, 24, "P"));
    }
    ui_app_free(&a);
}

Test(ui_snapshot, layout3d_background_worker_answers_keys_at_once)
{
    ui_app a, b; /* a lays out in the background, b here: the same frames once done */
    open_gpt3(&a);
    open_gpt3(&b);
    cr_assert_eq(ui_app_async_start(&a), 0);
    cr_assert_not_null(a.worker);
    char *s0 = snap(&a, 130, 40, NULL);
    figs f0 = read_figs(s0);
    free(s0);
    ui_app_key(&a, 'o');
    cr_assert_eq(a.pending, 1, "a new layout is laid out in the background");
    char *s = snap(&a, 130, 40, NULL);
    cr_assert(strstr(s, "laying out and simulating") && strstr(s, "zero 1"), "%s", s);
    figs f1 = read_figs(s);
    cr_assert(f1.mem_gib == f0.mem_gib && f1.iter_s == f0.iter_s,
              "the figures are the layout before:\n%s", s);
    free(s);
    ui_app_key(&a, 'G'); /* before the first answer is taken: that one is kept aside */
    ui_app_wait(&a);
    cr_assert_eq(a.pending, 0);
    char *x = snap(&a, 130, 40, NULL), *y = snap(&b, 130, 40, "oG");
    figs fx = read_figs(x), fy = read_figs(y);
    cr_assert(fx.iter_s == fy.iter_s && fx.sps == fy.sps && fx.mem_gib == fy.mem_gib);
    cr_assert(strstr(x, "GPUs 1024 = tp 4 x pp 8 x dp 32") && strstr(x, "zero 1"), "%s", x);
    free(x);
    free(y);
    /* back to ZeRO alone: kept when the worker answered 'o' before 'G' replaced it (then
     * shown at once), else laid out now; either way b's frame */
    ui_app_key(&a, 'g');
    cr_assert(a.cur.reused || a.pending);
    ui_app_wait(&a);
    x = snap(&a, 130, 40, NULL);
    y = snap(&b, 130, 40, "g");
    fx = read_figs(x), fy = read_figs(y);
    cr_assert(fx.iter_s == fy.iter_s && fx.mem_gib == fy.mem_gib && fx.mem_gib < 30, "%s", x);
    free(x);
    free(y);
    /* refused in the background after keys went on: the rejection takes back the last key
     * and lays out where that leaves them (tp 2, never shown before) */
    ui_app_key(&a, 'd');
    ui_app_key(&a, 'd');
    ui_app_key(&a, 'a');
    ui_app_key(&a, 'G');
    ui_app_key(&a, 'G');
    ui_app_key(&a, 'G');
    ui_app_wait(&a);
    s = snap(&a, 130, 40, NULL);
    cr_assert(strstr(s, "kept the layout: --sequence-parallel: expected --tp 2"), "%s", s);
    cr_assert(strstr(s, "GPUs 1024 = tp 2 x pp 32 x dp 16  mbs 1  v 1  recomp full  sp on"),
              "%s", s);
    figs fa = read_figs(s);
    free(s);
    y = snap(&b, 130, 40, "ddaGG");
    cr_assert(strstr(y, "tp 2 x pp 32 x dp 16"), "%s", y);
    fy = read_figs(y);
    cr_assert(fa.iter_s == fy.iter_s && fa.mem_gib == fy.mem_gib);
    free(y);
    ui_app_free(&a); /* joins the worker */
    ui_app_free(&b);
}

/* Quitting while the worker lays out a slow layout (tp 1 x pp 8 x dp 128: its replicas
 * share their servers' ports, so it is simulated in full, seconds) does not wait for it:
 * the worker is left to finish alone with the app's base, which the app gives up. */
Test(ui_snapshot, layout3d_quit_leaves_a_layout_in_progress_to_the_worker)
{
    ui_app a;
    open_gpt3(&a);
    cr_assert_eq(ui_app_async_start(&a), 0);
    for (int i = 0; i < 3; i++) ui_app_key(&a, 'G'); /* tp 4, 2, then 1: dp 128 */
    cr_assert_eq(a.pending, 1);
    /* the worker takes tp 4 (a fraction of a second), then tp 1 (a large fraction of a
     * second here): quit as soon as tp 1 is taken, not after a guessed time */
    int waited_ms = 0;
    while (!ui_app_async_evaluating(&a) && waited_ms < 60000) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        waited_ms++;
    }
    cr_assert(waited_ms < 60000, "the worker never took tp 1");
    ui_app_async_stop(&a);
    cr_assert_null(a.worker);
    cr_assert_eq(a.pending, 0);
    cr_assert_null(a.base.model, "the base went to the worker still laying out tp 1");
    ui_app_free(&a);
}

/* The settings on screen and the plan shown always agree: every layout shown is the
 * report's tp x pp x dp, microbatch size, interleave, recompute, sp and zero of the
 * settings row. */
static void assert_in_step(const ui_app *a)
{
    const ui_whatif *w = &a->st->cur;
    const sim_report *r = a->cur.rep;
    cr_assert_not_null(r, "no layout shown: %s", a->cur.err);
    cr_assert(ui_whatif_equal(&a->cur_w, w), "the plan shown is for other settings");
    cr_assert(r->tp == w->tp && r->pp == w->pp && r->dp == w->dp && r->gpus == w->ngpus,
              "report %d x %d x %d on %d, settings %d x %d x %d on %d", r->tp, r->pp, r->dp,
              r->gpus, w->tp, w->pp, w->dp, w->ngpus);
    cr_assert(r->microbatch_size == w->mbs && r->interleave == w->interleave &&
              r->recompute == w->recompute && r->sequence_parallel == w->seqpar &&
              r->zero == w->zero && (int)r->schedule == w->schedule);
    /* the runtime: p2p as asked; tp overlap where tp > 1, the all-gather apart where zero
     * is 1 and the schedule synchronous (pipedream and 2bw are not) */
    const plan *pl = a->cur.pl;
    int sync = w->schedule != SCHED_PIPEDREAM && w->schedule != SCHED_2BW;
    cr_assert_eq(pl->p2p_sync, w->p2p_sync);
    cr_assert_eq((int)pl->tp_overlap, w->tp > 1 ? w->tp_overlap : TP_OVERLAP_NONE);
    cr_assert_eq(pl->overlap_param_gather, w->opg && w->zero == 1 && sync);
    cr_assert(!w->p2p_sync || (w->schedule != SCHED_ZB_V && w->schedule != SCHED_DUALPIPEV));
}

Test(ui_snapshot, layout3d_random_keys_keep_the_screen_and_the_settings_in_step)
{
    /* GPT-2 (12 layers, 12 heads: tp 8 is refused by the layout) on 64 A100s; each of
     * the two apps, one evaluating in the key and one on the worker, presses the same 400
     * random keys */
    layout3d_options o = layout_of(2, 4, 8, 256);
    for (int async = 0; async < 2; async++) {
        ui_app a;
        plumb_err e;
        err_clear(&e);
        cr_assert_eq(ui_app_open_model(&a, "examples/llm/gpt2.json", A100, &o, NULL, tmpdir,
                                       &e), 0, "%s", e.msg);
        if (async) cr_assert_eq(ui_app_async_start(&a), 0);
        const char keys[] = "gGdDwWnNmMiIraocC+-uUuxXbBkKjyf";
        unsigned seed = 2024;
        int refused = 0;
        for (int i = 0; i < 400; i++) {
            seed = seed * 1103515245u + 12345u;
            ui_app_key(&a, keys[(seed >> 16) % (sizeof keys - 1)]);
            refused += !!strstr(a.msg, "kept the layout:");
            if (!async || i % 7 == 0) {
                ui_app_wait(&a); /* a refusal on the worker is answered here */
                refused += async && strstr(a.msg, "kept the layout:");
                assert_in_step(&a);
            }
        }
        ui_app_wait(&a);
        assert_in_step(&a);
        cr_assert_gt(refused, 0, "no key was refused: the rejection path went untested");
        ui_app_free(&a);
    }
}

/* The plan frame s saved (its status line names the file): plumb sim prices it as the frame
 * shows (assert_same_figures); the plan as loaded, which the caller frees. */
static plan *saved_plan_as_shown(const char *s)
{
    figs f = read_figs(s);
    const char *path = saved_plan_path(s);
    cJSON *rep = sim_json(path, NULL, NULL);
    assert_same_figures(&f, rep, "the saved plan");
    cJSON_Delete(rep);
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load(path, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    return pl;
}

/* Megatron-Core's uneven split and FP8 primary weights (plumb ui --model
 * --decoder-first-pipeline-num-layers 4; --fp8-param-gather) ride the keys: the runtime
 * row names each (one word), w lays out again with it, s saves a plan that plumb sim
 * prices as the frame shows (rank 0: the embedding and 4 blocks; "fp8_param_gather"),
 * and o (ZeRO 0) under FP8 primary weights is refused with plan --model's line. */
Test(ui_snapshot, layout3d_uneven_split_and_fp8_param_gather_ride_the_keys)
{
    ui_app a;
    layout3d_options o = layout_of(2, 2, 2, 16);
    o.split.first_blocks = 4;
    open_gpt2(&a, o);
    char *s = snap(&a, 160, 40, NULL);
    cr_assert(strstr(s, "balance off  pp-first-layers-4"), "%s", s);
    free(s);
    s = snap(&a, 80, 24, NULL);
    cr_assert(strstr(s, " first-4"), "%s", s);
    free(s);
    s = snap(&a, 130, 40, "ws");
    cr_assert(strstr(s, "GPUs 16 = tp 2 x pp 2 x dp 4"), "%s", s);
    plan *pl = saved_plan_as_shown(s);
    cr_assert(pl->nstages == 2 && pl->stages[0].last_layer == 4, "stage 0 ends at %d",
              pl->stages[0].last_layer);
    plan_free(pl);
    free(s);
    ui_app_free(&a);

    o = layout_of(2, 2, 2, 16);
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024;
    ui_runtime rt = { 0, 0, 1 };
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(&a, "examples/llm/nemo/llama2-7b.json",
                                   "profiles/clusters/dgx-h100.json", &o, &rt, tmpdir, &e), 0,
                 "%s", e.msg);
    s = snap(&a, 200, 40, "ws");
    cr_assert(strstr(s, "fp8-param-gather"), "%s", s);
    cJSON *rep = frame_sim(s, NULL, NULL, "ws", NULL);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "fp8_param_gather")),
              "the saved plan has no fp8_param_gather");
    cJSON_Delete(rep);
    free(s);
    s = snap(&a, 200, 40, "o");
    cr_assert(strstr(s, "--fp8-param-gather: expected --zero 1"), "%s", s);
    cr_assert(a.st->cur.zero == 1 && a.cur.pl->fp8_param_gather);
    free(s);
    ui_app_free(&a);
}

/* layout3d_build of llama2-7b on dgx-h100 with layout o (the plan names its cluster
 * "dgx-h100.json"); fails the test when a file or the layout is refused. The caller frees
 * it with plan_free. */
static plan *llama_plan(const layout3d_options *o)
{
    plumb_err e;
    err_clear(&e);
    transformer *t = transformer_load("examples/llm/nemo/llama2-7b.json", &e);
    cluster *c = t ? cluster_load("profiles/clusters/dgx-h100.json", &e) : NULL;
    cr_assert_not_null(c, "%s", e.msg);
    plan *pl = layout3d_build(t, c, "dgx-h100.json", o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cluster_free(c);
    transformer_free(t);
    return pl;
}

/* A plan file of a transformer's fp8 layout (tp 1) that does not name its model: - (fewer GPUs, which the native planner
 * would re-plan without its precision and runtime, at an MFU of 847.7 % against the fp32
 * peak) is refused like a refused layout: the frame keeps the file's plan, its figures and
 * MFU, the status line names the plumb ui --model command, and u finds nothing to undo. */
Test(ui_snapshot, layout_plan_file_refuses_a_replan_and_keeps_fp8)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = 1, o.pp = 2, o.dp = 4, o.gpus = 8, o.global_batch = 16, o.microbatch_size = 1;
    o.precision = DEV_FP8, o.seq = 1024;
    plumb_err e;
    err_clear(&e);
    plan *pl = llama_plan(&o);
    plan_model_free(pl->model); /* a file that does not name its model */
    pl->model = NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/fp8.json", tmpdir);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    ui_app a;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    char *s = snap(&a, 300, 40, "");
    figs before = read_figs(s);
    const char *m = strstr(s, "MFU ");
    cr_assert_not_null(m, "%s", s);
    char mfu[16];
    snprintf(mfu, sizeof mfu, "%.10s", m);
    free(s);
    s = snap(&a, 300, 40, "-");
    cr_expect(strstr(s, "a transformer's layout (llama2-7b, fp8) is re-planned only as a "
                        "layout; its plan file does not name its model: plumb ui --model FILE "
                        "-c CLUSTER --tp 1 --pp 2 --dp 4 --global-batch 16 --precision fp8 "
                        "--seq-len 1024"), "%s", s);
    cr_expect(strstr(s, "(plan file)") && !strstr(s, "native planner"), "%s", s);
    cr_expect(strstr(s, mfu), "the MFU is not the file's %s:\n%s", mfu, s);
    figs after = read_figs(s);
    cr_expect(after.iter_s == before.iter_s && after.mem_gib == before.mem_gib, "%s", s);
    cr_expect_eq(a.st->undo_n, 0, "the refused key is on the undo stack");
    cr_expect_eq(a.st->cur.ngpus, 8);
    cr_expect_eq(a.cur.pl->precision, DEV_FP8);
    free(s);
    s = snap(&a, 300, 40, "u");
    cr_expect(strstr(s, "nothing to undo"), "%s", s);
    free(s);
    ui_app_free(&a);
    plan_free(pl);
}

/* The frame without its first line (the title, which names the files and the time the
 * frame took). */
static const char *below_title(const char *frame)
{
    const char *nl = strchr(frame, '\n');
    return nl ? nl + 1 : frame;
}

/* A plan file of plan --model (llama2-7b, fp8, FP8 primary weights, rank 0 holding 12 of
 * the 32 blocks, tp 2 x pp 2 x dp 4 on two servers) names its model: plumb ui PLAN.json
 * shows the frames of plumb ui --model with the same options, the first one and after dp
 * down (W), dp up past the file's devices (w) and microbatch size up (n), the runtime row
 * naming pp-first-layers-12; s saves a plan that names the model again. */
Test(ui_snapshot, plan_file_with_model_shows_ui_model_frames)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.tp = 2, o.pp = 2, o.dp = 4, o.gpus = 16, o.global_batch = 16, o.microbatch_size = 1;
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024, o.split.first_blocks = 12;
    ui_runtime rt = { 0, 0, 1 };
    plumb_err e;
    err_clear(&e);
    plan *pl = llama_plan(&o);
    pl->fp8_param_gather = 1;
    char path[600];
    snprintf(path, sizeof path, "%s/model.json", tmpdir);
    cr_assert_eq(plan_save(pl, path, &e), 0, "%s", e.msg);
    ui_app a, m;
    cr_assert_eq(ui_app_open(&a, NULL, NULL, path, tmpdir, UI_PLANNER_NATIVE), 0);
    cr_assert(a.loaded, "%s", a.load_err);
    cr_assert_eq(ui_app_open_model(&m, "examples/llm/nemo/llama2-7b.json",
                                   "profiles/clusters/dgx-h100.json", &o, &rt, tmpdir, &e), 0,
                 "%s", e.msg);
    static const char *const keys[] = { "", "W", "w", "n" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char *x = snap(&a, 200, 30, keys[i]), *y = snap(&m, 200, 30, keys[i]);
        cr_expect_str_eq(below_title(x), below_title(y), "after '%s'", keys[i]);
        cr_expect(strstr(x, "(3D layout)") && strstr(x, "pp-first-layers-12"), "%s", x);
        free(x);
        free(y);
    }
    char *x = snap(&a, 200, 30, "s");
    free(x);
    cr_assert_not_null(a.cur.pl->model);
    cr_expect_eq(a.cur.pl->model->split.first_blocks, 12);
    ui_app_free(&a);
    ui_app_free(&m);
    plan_free(pl);
}

/* R under full recomputation: the what-if row names the interval (recomp full/2), s saves a
 * plan whose checkpoint_layers is 2 and that plumb sim prices as the frame shows; under
 * none the key is refused with its line and the frame keeps the plan. */
Test(ui_snapshot, checkpoint_interval_key)
{
    ui_app a;
    layout3d_options o = layout_of(2, 2, 2, 16);
    o.recompute = RECOMPUTE_FULL;
    open_gpt2(&a, o);
    char *s = snap(&a, 160, 40, NULL);
    cr_assert(strstr(s, "recomp full ") && !strstr(s, "full/"), "%s", s);
    free(s);
    s = snap(&a, 160, 40, "Rs");
    cr_assert(strstr(s, "recomp full/2"), "%s", s);
    plan *pl = saved_plan_as_shown(s);
    cr_expect_eq(pl->checkpoint_layers, 2);
    plan_free(pl);
    free(s);
    s = snap(&a, 160, 40, "rR");
    cr_assert(strstr(s, "--checkpoint-layers: the interval of full recomputation's"), "%s", s);
    free(s);
    ui_app_free(&a);
}
