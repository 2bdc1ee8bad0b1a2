/* bench_plan.c: how long PipeDream-compatible planning takes for every shipped profile on
 * every shipped cluster (every .json in profiles/pipedream times every .json in profiles/clusters), as a
 * markdown table: states, graph handling, configuration, predicted time per stage, and the
 * planning time (best of up to REPEAT runs, profile and cluster already loaded): wall-clock
 * ms and CPU ms of this process (the planner is single-threaded; CPU time does not count
 * waiting for a busy machine).
 * Usage: bench_plan [PROFILE_DIR [CLUSTER_DIR [REPEAT]]]  (defaults: the shipped folders, 3) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cluster.h"
#include "core/profile.h"
#include "planner/planner.h"
#include "bench/clock.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted list of the .json paths in DIR; *n receives the count. Caller frees. */
static char **list_json(const char *dir, int *n)
{
    DIR *d = opendir(dir);
    char **v = NULL;
    int cnt = 0, cap = 0;
    *n = 0;
    if (!d) return NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 32;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        size_t need = strlen(dir) + len + 2;
        v[cnt] = malloc(need);
        if (!v[cnt]) break;
        snprintf(v[cnt], need, "%s/%s", dir, e->d_name);
        cnt++;
    }
    closedir(d);
    qsort(v, (size_t)cnt, sizeof *v, cmp_str);
    *n = cnt;
    return v;
}

int main(int argc, char **argv)
{
    const char *pdir = argc > 1 ? argv[1] : "profiles/pipedream";
    const char *cdir = argc > 2 ? argv[2] : "profiles/clusters";
    int repeat = argc > 3 ? atoi(argv[3]) : 3;
    if (repeat < 1) repeat = 1;
    int np, nc;
    char **ps = list_json(pdir, &np), **cs = list_json(cdir, &nc);
    if (!np || !nc) {
        fprintf(stderr, "bench_plan: no profiles in %s or no clusters in %s\n", pdir, cdir);
        return 1;
    }
    printf("| profile | cluster | states | graph | config | time per stage (ms) | plan wall (ms) "
           "| plan CPU (ms) |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    int over = 0, total = 0;
    double worst = 0;
    for (int i = 0; i < np; i++) {
        plumb_err e;
        profile *p = profile_load(ps[i], &e);
        if (!p) {
            fprintf(stderr, "bench_plan: %s\n", e.msg);
            continue;
        }
        for (int j = 0; j < nc; j++) {
            /* the DGX files (docs/llm.md): their first 4 servers */
            cluster *c = cluster_load_cut(cs[j], 64, 4, &e);
            if (!c) {
                fprintf(stderr, "bench_plan: %s\n", e.msg);
                continue;
            }
            pd_options o;
            pd_options_default(&o);
            pd_options_from_cluster(&o, c);
            double best = 1e30, bestcpu = 1e30;
            pd_result r = {0};
            int ok = 1;
            for (int k = 0; k < repeat && ok; k++) {
                pd_result_free(&r);
                double t0 = bench_clock_s(CLOCK_MONOTONIC);
                double c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
                ok = planner_pipedream_run(p, NULL, &o, &r, &e) == 0;
                double t = bench_clock_s(CLOCK_MONOTONIC) - t0;
                double tc = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
                if (t < best) best = t;
                if (tc < bestcpu) bestcpu = tc;
                if (t > 1.0) break; /* slow cases: once is enough */
            }
            if (ok) {
                printf("| %s | %s | %d | %s | %s | %.3f | %.1f | %.1f |\n", p->name, c->name,
                       r.nstates,
                       r.compressed == 0 ? "exact" : r.compressed == 1 ? "branches compressed"
                                                                     : "topological prefixes",
                       r.config, r.time_per_stage_s * 1e3, best * 1e3, bestcpu * 1e3);
                total++;
                over += bestcpu > 0.1;
                if (bestcpu > worst) worst = bestcpu;
            } else {
                printf("| %s | %s | - | - | no plan: %s | - | - | - |\n", p->name, c->name, e.msg);
            }
            fflush(stdout);
            pd_result_free(&r);
            cluster_free(c);
        }
        profile_free(p);
    }
    printf("\n%d plans; %d took more than 100 ms of CPU; slowest %.1f ms\n", total, over,
           worst * 1e3);
    for (int i = 0; i < np; i++) free(ps[i]);
    for (int j = 0; j < nc; j++) free(cs[j]);
    free(ps);
    free(cs);
    return 0;
}
