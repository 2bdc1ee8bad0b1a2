/* bench_native.c: the native planner's speed and quality on every profile x cluster.
 * Usage: bench_native PROFILE_DIR CLUSTER_DIR [REPEATS]. For each pair prints one row:
 * planning time (best of REPEATS, CPU ms) of `plumb plan` (native, 1f1b-flush) and of
 * `--schedule auto`; the simulated throughput of the native plan for the pipedream
 * schedule and of PipeDream's own partition (compatible mode) under the same schedule and
 * microbatch count, their ratio, and whether each fits device memory. Exits 1 when a
 * native or auto plan takes 100 ms or more, or a plan of any schedule on a 16-GPU cluster 50
 * ms or more (the dashboard re-plans on every keypress). CPU time: the machine may be
 * shared. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/native.h"
#include "planner/planner.h"
#include "sim/sim.h"

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

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
        double t0 = cpu_ms();
        plan *pl = planner_native(p, c, &o, NULL, &e);
        double t = cpu_ms() - t0;
        if (t < best) best = t;
        if (pl) *thr = pl->pred_samples_per_s;
        if (keep && i == reps - 1) *keep = pl;
        else plan_free(pl);
    }
    return best;
}

/* Simulates pl with schedule k and a microbatch count that suits its replicas. */
static double sim_as(const plan *pl, sched_kind k, int *fits)
{
    long long L = 1;
    for (int s = 0; s < pl->nstages; s++) {
        long long a = L, b = pl->stages[s].replicas;
        while (b) {
            long long t = a % b;
            a = b;
            b = t;
        }
        L = L / a * pl->stages[s].replicas;
        if (L > 4096) return -1;
    }
    int M = (int)L;
    while (M < 2 * pl->nstages) M += (int)L;
    sim_options so;
    sim_options_init(&so);
    so.schedule = k;
    so.microbatches = M;
    so.iterations = 4; /* the asynchronous schedule needs a few to reach steady state */
    plumb_err e;
    sim_report *r = sim_run(pl, &so, &e);
    if (!r) return -1;
    double t = r->samples_per_s;
    *fits = r->fits;
    sim_report_free(r);
    return t;
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
    printf("%-20s %-22s %9s %9s %13s %13s %7s %5s\n", "profile", "cluster", "native", "auto",
           "native-pd", "pipedream-pd", "ratio", "fits");
    for (int i = 0; i < np; i++) {
        plumb_err e;
        profile *p = profile_load(pp[i], &e);
        if (!p) continue;
        for (int j = 0; j < nc; j++) {
            cluster *c = cluster_load(cc[j], &e);
            if (!c) continue;
            double thr, thra, thrp;
            double tn = time_native(p, c, SCHED_1F1B_FLUSH, reps, &thr, NULL);
            /* the dashboard may ask for any schedule: on 16 GPUs, the slowest of them */
            double tui = 0;
            for (int k = 0; c->ndevices == 16 && k < SCHED_NKINDS; k++) {
                double t = time_native(p, c, k, reps, &thra, NULL);
                if (t > tui) tui = t;
            }
            if (tui > worst_ui) worst_ui = tui;
            double ta = time_native(p, c, NATIVE_SCHED_AUTO, reps, &thra, NULL);
            plan *np_ = NULL;
            time_native(p, c, SCHED_PIPEDREAM, 1, &thrp, &np_);
            double native_pd = -1, pipedream_pd = -1;
            int fn = 0, fp = 0;
            if (np_) native_pd = sim_as(np_, SCHED_PIPEDREAM, &fn);
            plan *pd = planner_pipedream(p, c, NULL, NULL, &e);
            if (pd) pipedream_pd = sim_as(pd, SCHED_PIPEDREAM, &fp);
            printf("%-20s %-22s %6.1f ms %6.1f ms %7.1f smp/s %7.1f smp/s %6.2fx %d/%d\n",
                   p->name, c->name, tn, ta, native_pd, pipedream_pd,
                   native_pd > 0 && pipedream_pd > 0 ? native_pd / pipedream_pd : 0, fn, fp);
            if (tn > worst) worst = tn;
            if (ta > worst_auto) worst_auto = ta;
            if (tn >= 100 || ta >= 100) rc = 1;
            if (c->ndevices == 16 && tui >= 50) rc = 1;
            plan_free(np_);
            plan_free(pd);
            cluster_free(c);
        }
        profile_free(p);
    }
    printf("slowest: native %.1f ms, auto %.1f ms, any schedule on 16 GPUs %.1f ms (CPU, best "
           "of %d); bounds 100 ms, 50 ms on 16 GPUs\n", worst, worst_auto, worst_ui, reps);
    printf("(native-pd / pipedream-pd: simulated samples/s of the pipedream schedule on the "
           "native partition and on PipeDream's; fits: native/PipeDream plan fits memory)\n");
    for (int i = 0; i < np; i++) free(pp[i]);
    for (int j = 0; j < nc; j++) free(cc[j]);
    free(pp);
    free(cc);
    return rc;
}
