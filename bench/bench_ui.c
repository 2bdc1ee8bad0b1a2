/* bench_ui.c: the dashboard's speed per keypress: for each profile on a cluster, opens
 * the dashboard (plan + simulate) and presses every what-if key of KEYS in turn, timing
 * each key's re-plan + re-simulate + redraw (ui_app_key, then ui_app_draw into a 160x50
 * frame buffer: the drawing the terminal front end copies into its windows). Prints one
 * line per profile: layers, the open time, the median and largest time per key, the
 * largest among keys that ran the partitioner and among keys that did not (schedule,
 * microbatches, straggler, recomputation, cached plans), the slowest key, and the largest
 * CPU time of a key, all threads (the machine may be shared: then wall time also measures the
 * neighbours). Times in ms. Usage: bench_ui [-P native|pipedream|even] [-k KEYS] CLUSTER
 * PROFILE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui/app.h"
#include "bench/clock.h"

#define DEFAULT_KEYS "cCmMrTtbB+-xXpPuuuuUU<left>zZ-+"

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

int main(int argc, char **argv)
{
    const char *keyspec = DEFAULT_KEYS;
    int planner = UI_PLANNER_NATIVE, i = 1;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "-k")) keyspec = argv[i + 1];
        else if (!strcmp(argv[i], "-P") && ui_planner_parse(argv[i + 1]) >= 0)
            planner = ui_planner_parse(argv[i + 1]);
        else break;
    }
    if (argc - i < 2) {
        fprintf(stderr, "usage: bench_ui [-P native|pipedream|even] [-k KEYS] CLUSTER "
                        "PROFILE...\n");
        return 2;
    }
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
