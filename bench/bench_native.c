/* bench_native.c: the native planner's speed and quality on every profile x cluster.
 * Usage: bench_native PROFILE_DIR CLUSTER_DIR [REPEATS]. For each pair prints one row:
 * planning time (best of REPEATS, CPU ms) of `plumb plan` (native, 1f1b-flush) and of
 * `--schedule auto`; the simulated samples/s of the default plan and, scored the same way
 * (native_sim_as: 1f1b-flush, the profiled microbatch size, the default microbatch count,
 * recomputation when it helps), of plain data parallelism, PipeDream's partition and
 * PipeDream's straight pipeline ("no fit" when they do not fit memory), and of the planner
 * with recomputation off. Exits 1 when a native plan takes 100 ms or more, an auto plan 150
 * ms or more (auto runs the default plan too, to rank its winner: AUTO_BOUND_MS), a plan of
 * any schedule on a 16-GPU cluster 50 ms or more (the dashboard re-plans on every
 * keypress), or the default plan is slower than a baseline that fits. CPU time: the
 * machine may be shared. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/native.h"
#include "planner/planner.h"
#include "sim/sim.h"
#include "bench/clock.h"

#define AUTO_BOUND_MS 150.0 /* its own search (at most 66 ms here before) + the default plan */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted *.json paths of dir; returns the count (paths malloc'd). */
static int list_json(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *out = NULL;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **v = realloc(*out, (size_t)cap * sizeof *v);
            if (!v) break;
            *out = v;
        }
        size_t m = strlen(dir) + l + 2;
        (*out)[n] = malloc(m);
        if (!(*out)[n]) break;
        snprintf((*out)[n], m, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(*out, (size_t)n, sizeof **out, cmp_str);
    return n;
}

/* Best CPU ms of planning p on c with schedule k (NATIVE_SCHED_AUTO too); *thr, *fits of
 * the plan (0 when none). */
static double time_native(const profile *p, const cluster *c, int k, int reps, double *thr,
                          plan **keep)
{
    double best = 1e30;
    *thr = 0;
    for (int i = 0; i < reps; i++) {
        native_options o;
        native_options_init(&o);
        o.schedule = k;
        plumb_err e;
        double t0 = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        plan *pl = planner_native(p, c, &o, NULL, &e);
        double t = 1e3 * bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
        if (t < best) best = t;
        if (pl) *thr = pl->pred_samples_per_s;
        if (keep && i == reps - 1) *keep = pl;
        else plan_free(pl);
    }
    return best;
}

/* pl's partition scored as the planner scores its own (native_sim_as, default options:
 * 1f1b-flush, profiled microbatch size, default microbatch count, recomputation when it
 * helps). -1 when it does not fit (or the simulator refused it). */
static double as_native(const plan *pl)
{
    int fits = 0;
    double t = pl ? native_sim_as(pl, NULL, NULL, &fits) : -1;
    return fits ? t : -1;
}

static void show(double t)
{
    if (t > 0) printf(" %8.1f smp/s", t);
    else printf(" %14s", "no fit");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_native PROFILE_DIR CLUSTER_DIR [REPEATS]\n");
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (reps < 1) reps = 1;
    char **pp, **cc;
    int np = list_json(argv[1], &pp), nc = list_json(argv[2], &cc), rc = 0;
    double worst = 0, worst_auto = 0, worst_ui = 0;
    int worse = 0, pairs = 0;
    printf("%-15s %-22s %9s %9s %14s %14s %14s %14s %14s\n", "profile", "cluster", "native",
           "auto", "native plan", "data-parallel", "pipedream-part", "pd-straight",
           "no recompute");
    for (int i = 0; i < np; i++) {
        plumb_err e;
        profile *p = profile_load(pp[i], &e);
        if (!p) continue;
        for (int j = 0; j < nc; j++) {
            /* the DGX files (docs/llm.md): their first 4 servers */
            cluster *c = cluster_load_cut(cc[j], 64, 4, &e);
            if (!c) continue;
            double thr, thra;
            plan *nat = NULL;
            double tn = time_native(p, c, SCHED_1F1B_FLUSH, reps, &thr, &nat);
            /* the dashboard may ask for any schedule: on 16 GPUs, the slowest of them */
            double tui = 0;
            for (int k = 0; c->ndevices == 16 && k < SCHED_NKINDS; k++) {
                double t = time_native(p, c, k, reps, &thra, NULL);
                if (t > tui) tui = t;
            }
            if (tui > worst_ui) worst_ui = tui;
            double ta = time_native(p, c, NATIVE_SCHED_AUTO, reps, &thra, NULL);
            /* quality: the native plan (as simulated by the planner) against data
             * parallelism and PipeDream's partition, scored the same way */
            double tnat = nat ? nat->pred_samples_per_s : -1;
            plan *dp = native_dp_plan(p, c, 0, &e);
            double tdp = as_native(dp);
            plan *pd = planner_pipedream(p, c, NULL, NULL, &e);
            double tpd = as_native(pd);
            pd_options so;
            pd_options_default(&so);
            so.straight = 1;
            plan *st = planner_pipedream(p, c, &so, NULL, &e);
            double tst = as_native(st);
            plan_free(st);
            /* the same planner with recomputation off */
            double th9 = -1;
            {
                native_options o;
                native_options_init(&o);
                o.recompute = 0;
                plan *old = planner_native(p, c, &o, NULL, &e);
                if (old) th9 = old->pred_samples_per_s;
                plan_free(old);
            }
            int bad = (tdp > 0 && tnat < 0.995 * tdp) || (tpd > 0 && tnat < 0.995 * tpd) ||
                      (tst > 0 && tnat < 0.995 * tst);
            pairs++;
            worse += bad;
            printf("%-15s %-22s %6.1f ms %6.1f ms", p->name, c->name, tn, ta);
            show(tnat);
            show(tdp);
            show(tpd);
            show(tst);
            show(th9);
            printf("%s\n", bad ? "  WORSE" : "");
            fflush(stdout);
            if (tn > worst) worst = tn;
            if (ta > worst_auto) worst_auto = ta;
            if (tn >= 100 || ta >= AUTO_BOUND_MS) rc = 1;
            if (c->ndevices == 16 && tui >= 50) rc = 1;
            plan_free(nat);
            plan_free(dp);
            plan_free(pd);
            cluster_free(c);
        }
        profile_free(p);
    }
    printf("native plan slower than data parallelism, PipeDream's partition or PipeDream's "
           "straight pipeline (scored like the plan): %d of %d pairs\n", worse, pairs);
    if (worse) rc = 1;
    printf("slowest: native %.1f ms, auto %.1f ms, any schedule on 16 GPUs %.1f ms (CPU, best "
           "of %d); bounds 100 ms (auto %.0f ms), 50 ms on 16 GPUs\n", worst, worst_auto,
           worst_ui, reps, AUTO_BOUND_MS);
    printf("(simulated samples/s, 1f1b-flush, default microbatch count; the native plan: the "
           "profiled microbatch size or a half or a quarter of it, recomputation when it "
           "helps; the baselines: the profiled size; no recompute: the planner with "
           "--recompute off)\n");
    for (int i = 0; i < np; i++) free(pp[i]);
    for (int j = 0; j < nc; j++) free(cc[j]);
    free(pp);
    free(cc);
    return rc;
}
