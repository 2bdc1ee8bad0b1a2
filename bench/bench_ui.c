/* bench_ui.c: the dashboard's speed per keypress: for each profile on a cluster, opens
 * the dashboard (plan + simulate) and presses every what-if key of KEYS in turn, timing
 * each key's re-plan + re-simulate + redraw (ui_app_key, then ui_app_draw into a 160x50
 * frame buffer: the drawing the terminal front end copies into its windows). Prints one
 * line per profile: layers, the open time, the median and largest time per key, the
 * largest among keys that ran the partitioner and among keys that did not (schedule,
 * microbatches, straggler, recomputation, cached plans), the slowest key, and the largest
 * CPU time of a key, all threads (the machine may be shared: then wall time also measures the
 * neighbours). Times in ms. Usage: bench_ui [-P native|pipedream|even] [-k KEYS] CLUSTER
 * PROFILE...
 *
 * bench_ui [-k KEYS] -L MODEL CLUSTER GPUS TP PP DP GLOBAL_BATCH RECOMPUTE: the same for a
 * transformer's 3D layout (plumb ui --model, microbatch size 1), with the 3D keys; per key
 * also the layout (layout3d_build), the simulation and the drawing apart, and as the
 * baseline, measured in the same run, one bare simulation of the opening layout (sim_run
 * without timeline, what plumb plan --model runs): the median key's ratio to it is the
 * dashboard's overhead (the timeline, the drawing) over the least a keypress must do. A
 * second pass runs the keys as the terminal does, with the layouts on the background
 * worker (ui_app_async_start): the key's answer and redraw, and the time until the
 * layout is on screen. Per key that laid out a new layout, the full simulation of every
 * replica with the key's options (sim_run, what a key ran before the dashboard simulated
 * one pipeline: sim_run_folded) is timed apart, in the same run, as full-cpu.
 *
 * bench_ui -D PLAN [N]: the redraw alone: opens PLAN's dashboard and draws its 160x50
 * frame N times (default 200); prints the median and fastest redraw, ms wall and CPU (a
 * plan with one stage of many replicas times the stage rows' device lookups). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui/app.h"
#include "bench/clock.h"

#define DEFAULT_KEYS "cCmMrTtbB+-xXpPuuuuUU<left>zZ-+"
#define DEFAULT_KEYS3D "GgdDWwnNiIrrraaooCcxXbBpPuuuuUU"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *key_name(int k, char *buf)
{
    switch (k) {
    case UI_KEY_LEFT: return "<left>";
    case UI_KEY_RIGHT: return "<right>";
    case UI_KEY_UP: return "<up>";
    case UI_KEY_DOWN: return "<down>";
    default: buf[0] = (char)k; buf[1] = 0; return buf;
    }
}

/* One bare simulation of a's live plan (no timeline, no what-if), wall ms; -1 on error. */
static double bare_sim_ms(const ui_app *a, double *cpu_ms)
{
    plumb_err e;
    err_clear(&e);
    double t0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    sim_report *r = sim_run(a->cur.pl, NULL, &e);
    double ms = 1e3 * (bench_clock_s(CLOCK_MONOTONIC) - t0);
    *cpu_ms = 1e3 * (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
    if (!r) return -1;
    sim_report_free(r);
    return ms;
}

/* CPU ms of the full simulation of a's live layout with its options (sim_run, every
 * replica), what a key ran before sim_run_folded; -1 on error. */
static double full_sim_cpu_ms(const ui_app *a)
{
    plumb_err e;
    err_clear(&e);
    double c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    sim_report *r = sim_run(a->cur.pl, &a->cur.opt, &e);
    double ms = 1e3 * (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
    sim_report_free(r);
    return r ? ms : -1;
}

/* The 3D mode: argv holds MODEL CLUSTER GPUS TP PP DP GLOBAL_BATCH RECOMPUTE. */
static int bench_layout3d(char **argv, const char *keyspec)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = atoi(argv[2]), o.tp = atoi(argv[3]), o.pp = atoi(argv[4]), o.dp = atoi(argv[5]);
    o.global_batch = atoi(argv[6]);
    o.microbatch_size = 1;
    o.recompute = recompute_kind_parse(argv[7]);
    int keys[256];
    plumb_err e;
    err_clear(&e);
    int nk = ui_keys_parse(keyspec, keys, 256, &e);
    ui_app *a = malloc(sizeof *a);
    ui_fb fb = { 0, 0, NULL };
    if (nk <= 0 || !a || ui_fb_resize(&fb, 160, 50)) {
        fprintf(stderr, "bench_ui: %s\n", nk < 0 ? e.msg : "no keys or out of memory");
        free(a);
        return 2;
    }
    double t0 = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
    if (ui_app_open_model(a, argv[0], argv[1], &o, NULL, ".", &e)) {
        fprintf(stderr, "bench_ui: %s\n", e.msg);
        free(a);
        ui_fb_free(&fb);
        return 2;
    }
    ui_app_draw(a, &fb);
    double open_ms = 1e3 * bench_clock_s(CLOCK_MONOTONIC) - t0, base_cpu;
    double base = bare_sim_ms(a, &base_cpu);
    printf("bench_ui: %s on %s, %d GPUs (tp %d pp %d dp %d), %d keys \"%s\"; per key: "
           "layout + simulate (timeline) + redraw (160x50), ms\n", a->base.prof->name,
           argv[1], o.gpus, o.tp, o.pp, o.dp, nk, keyspec);
    printf("open %.1f ms wall; baseline: one bare simulation (no timeline) %.1f ms wall, %.1f "
           "ms CPU\n", open_ms, base, base_cpu);
    printf("%-6s %-22s %9s %9s %9s %9s %9s %9s\n", "key", "layout", "wall", "cpu", "layout",
           "sim", "draw", "full-cpu");
    double wall[256], cpu[256], nwall[256], ncpu[256], fcpu[256];
    int nn = 0;
    for (int i = 0; i < nk; i++) {
        double s = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
        double c = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        a->cur.plan_ms = a->cur.eval_ms = 0;
        ui_app_key(a, keys[i]);
        double d0 = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
        ui_app_draw(a, &fb);
        double d1 = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
        wall[i] = d1 - s;
        cpu[i] = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c;
        const ui_whatif *w = &a->st->cur;
        char kb[4], lay[48];
        snprintf(lay, sizeof lay, "%dx%dx%d mbs%d v%d %s%s%s", w->tp, w->pp, w->dp, w->mbs,
                 w->interleave, recompute_kind_name((recompute_kind)w->recompute),
                 w->seqpar ? " sp" : "", w->zero ? " z1" : "");
        int fresh = !a->cur.reused && a->cur.eval_ms > 0; /* a new layout simulated */
        double full = fresh ? full_sim_cpu_ms(a) : 0;
        if (fresh) nwall[nn] = wall[i], fcpu[nn] = full, ncpu[nn++] = cpu[i];
        printf("%-6s %-22s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f%s\n", key_name(keys[i], kb),
               lay, wall[i], cpu[i], fresh ? a->cur.plan_ms : 0,
               fresh ? a->cur.eval_ms - a->cur.plan_ms : 0, d1 - d0, full,
               a->msg_err ? "  (not taken, or a note)" : !fresh ? "  (kept or no change)" : "");
        a->cur.eval_ms = 0; /* a kept result shows its first visit's time */
    }
    int over = 0, fover = 0;
    for (int i = 0; i < nn; i++) over += ncpu[i] >= 50, fover += fcpu[i] >= 50;
    qsort(nwall, (size_t)nn, sizeof nwall[0], cmp_d);
    qsort(ncpu, (size_t)nn, sizeof ncpu[0], cmp_d);
    qsort(fcpu, (size_t)nn, sizeof fcpu[0], cmp_d);
    if (nn)
        printf("the same layouts simulated in full (sim_run with the key's timeline, what a key "
               "ran before the one-pipeline simulation): median %.2f ms CPU, slowest %.2f ms "
               "CPU; keys over 50 ms CPU: %d, in full %d\n", fcpu[nn / 2], fcpu[nn - 1], over,
               fover);
    if (nn)
        printf("keys that laid out and simulated a new layout: %d, median %.2f ms wall, %.2f ms "
               "CPU; slowest %.2f ms wall, %.2f ms CPU; median / bare simulation %.2fx (CPU "
               "%.2fx)\n", nn, nwall[nn / 2], ncpu[nn / 2], nwall[nn - 1], ncpu[nn - 1],
               base > 0 ? nwall[nn / 2] / base : 0, base_cpu > 0 ? ncpu[nn / 2] / base_cpu : 0);
    qsort(wall, (size_t)nk, sizeof wall[0], cmp_d);
    qsort(cpu, (size_t)nk, sizeof cpu[0], cmp_d);
    printf("all %d keys: median %.2f ms wall, %.2f ms CPU; slowest %.2f ms wall, %.2f ms CPU\n",
           nk, wall[nk / 2], cpu[nk / 2], wall[nk - 1], cpu[nk - 1]);
    ui_app_free(a);
    /* the terminal's way: the layout on the background worker; the key's answer (state,
     * redraw) apart from the time until the layout is on screen */
    if (ui_app_open_model(a, argv[0], argv[1], &o, NULL, ".", &e) || ui_app_async_start(a)) {
        fprintf(stderr, "bench_ui: %s\n", e.msg[0] ? e.msg : "no worker thread");
        free(a);
        ui_fb_free(&fb);
        return 2;
    }
    double done[256];
    int worst = 0;
    for (int i = 0; i < nk; i++) {
        double s0 = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
        ui_app_key(a, keys[i]);
        ui_app_draw(a, &fb);
        wall[i] = 1e3 * bench_clock_s(CLOCK_MONOTONIC) - s0;
        if (wall[i] > wall[worst]) worst = i;
        ui_app_wait(a);
        ui_app_draw(a, &fb);
        done[i] = 1e3 * bench_clock_s(CLOCK_MONOTONIC) - s0;
    }
    char wk[4];
    key_name(keys[worst], wk);
    qsort(wall, (size_t)nk, sizeof wall[0], cmp_d);
    qsort(done, (size_t)nk, sizeof done[0], cmp_d);
    printf("with the background worker (plumb ui in a terminal): key answered and redrawn: "
           "median %.2f ms, slowest %.2f ms wall (%s); the layout on screen: median %.2f ms, "
           "slowest %.2f ms wall\n", wall[nk / 2], wall[nk - 1], wk, done[nk / 2],
           done[nk - 1]);
    ui_app_free(a);
    free(a);
    ui_fb_free(&fb);
    return 0;
}

/* bench_ui -D PLAN [N]: the median and least of N redraws of PLAN's dashboard. */
static int bench_draw(const char *planf, int n)
{
    ui_app *a = malloc(sizeof *a);
    ui_fb fb = { 0, 0, NULL };
    if (!a || ui_fb_resize(&fb, 160, 50) || ui_app_open(a, NULL, NULL, planf, ".",
                                                         UI_PLANNER_NATIVE))
        return 1;
    if (!a->loaded) {
        fprintf(stderr, "bench_ui: %s: %s\n", planf, a->load_err);
        return 1;
    }
    double *w = malloc((size_t)n * sizeof *w), *c = malloc((size_t)n * sizeof *c);
    if (!w || !c) return 1;
    for (int i = 0; i < n; i++) {
        double s = bench_clock_s(CLOCK_MONOTONIC), u = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        ui_app_draw(a, &fb);
        w[i] = 1e3 * (bench_clock_s(CLOCK_MONOTONIC) - s);
        c[i] = 1e3 * (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - u);
    }
    qsort(w, (size_t)n, sizeof *w, cmp_d);
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    printf("bench_ui: %s, %d redraws (160x50): median %.3f ms wall, %.3f ms CPU; fastest "
           "%.3f ms wall, %.3f ms CPU\n", planf, n, w[n / 2], c[n / 2], w[0], c[0]);
    free(w);
    free(c);
    ui_fb_free(&fb);
    ui_app_free(a);
    free(a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "-D"))
        return bench_draw(argv[2], argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 200);
    const char *keyspec = NULL;
    int planner = UI_PLANNER_NATIVE, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "-L") && argc - i - 1 == 8)
            return bench_layout3d(argv + i + 1, keyspec ? keyspec : DEFAULT_KEYS3D);
        if (!strcmp(argv[i], "-k")) keyspec = argv[i + 1];
        else if (!strcmp(argv[i], "-P") && ui_planner_parse(argv[i + 1]) >= 0)
            planner = ui_planner_parse(argv[i + 1]);
        else break;
    }
    if (argc - i < 2) {
        fprintf(stderr, "usage: bench_ui [-P native|pipedream|even] [-k KEYS] CLUSTER "
                        "PROFILE...\n       bench_ui [-k KEYS] -L MODEL CLUSTER GPUS TP PP DP "
                        "GLOBAL_BATCH RECOMPUTE\n       bench_ui -D PLAN [N]\n");
        return 2;
    }
    if (!keyspec) keyspec = DEFAULT_KEYS;
    const char *clusterf = argv[i];
    int first = i + 1, nprof = argc - first;
    int keys[256];
    plumb_err e;
    err_clear(&e);
    int nk = ui_keys_parse(keyspec, keys, 256, &e);
    if (nk <= 0) {
        fprintf(stderr, "bench_ui: %s\n", nk < 0 ? e.msg : "no keys");
        return 2;
    }
    ui_fb fb = { 0, 0, NULL };
    if (ui_fb_resize(&fb, 160, 50)) return 1;
    int rc = 0;
    printf("bench_ui: %s planner, %d keys \"%s\" per profile on %s; per key: re-plan + "
           "re-simulate + redraw (160x50), wall ms\n", ui_planner_name(planner), nk, keyspec,
           clusterf);
    printf("%-16s %6s %8s %8s %8s %10s %10s %8s  %s\n", "profile", "layers", "open", "median",
           "max", "max-plan", "max-noplan", "max-cpu", "slowest key");
    for (int p = first; p < first + nprof; p++) {
        ui_app *a = malloc(sizeof *a);
        double t0 = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
        if (!a || ui_app_open(a, argv[p], clusterf, NULL, ".", planner)) return 1;
        ui_app_draw(a, &fb);
        double open_ms = 1e3 * bench_clock_s(CLOCK_MONOTONIC) - t0;
        if (!a->loaded) {
            printf("%-16s load failed: %s\n", argv[p], a->load_err);
            rc = 1;
            ui_app_free(a);
            free(a);
            continue;
        }
        double t[256], maxp = 0, maxn = 0, worst = -1, maxcpu = 0;
        int worst_k = 0;
        for (int i = 0; i < nk; i++) {
            double s = 1e3 * bench_clock_s(CLOCK_MONOTONIC);
            double c = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
            ui_app_key(a, keys[i]);
            ui_app_draw(a, &fb);
            t[i] = 1e3 * bench_clock_s(CLOCK_MONOTONIC) - s;
            c = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c;
            if (c > maxcpu) maxcpu = c;
            int planned = a->cur.plan_ms > 0 || a->pin.plan_ms > 0;
            if (planned && t[i] > maxp) maxp = t[i];
            if (!planned && t[i] > maxn) maxn = t[i];
            if (t[i] > worst) worst = t[i], worst_k = keys[i];
            a->cur.plan_ms = a->pin.plan_ms = 0; /* count each partitioner run once */
        }
        qsort(t, (size_t)nk, sizeof t[0], cmp_d);
        const char *name = a->base.prof->name;
        char kb[4];
        printf("%-16s %6d %8.2f %8.2f %8.2f %10.2f %10.2f %8.2f  %s\n", name,
               a->base.prof->nlayers, open_ms, t[nk / 2], t[nk - 1], maxp, maxn, maxcpu,
               key_name(worst_k, kb));
        fflush(stdout);
        ui_app_free(a);
        free(a);
    }
    ui_fb_free(&fb);
    return rc;
}
