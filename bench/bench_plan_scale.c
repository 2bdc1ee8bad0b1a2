/* bench_plan_scale.c: planning time and peak memory against model size and cluster size, on
 * synthetic models: chains and DAGs (two-branch blocks, as in Inception-style models) of 10
 * to 1000 layers, on two-level clusters of 1 to 1024 GPUs (servers of 8), with
 * PipeDream's partitioner (compat mode) and with the native planner (simulator in the
 * loop). Every case runs in a forked child, so its CPU time and peak resident memory come
 * from the kernel (wait4) and a case that runs away is stopped (a time limit per case).
 * Peak memory is the child's peak RSS less that of an idle child (the libraries). Prints a
 * markdown table.
 * Usage: bench_plan_scale [MAX_LAYERS [MAX_GPUS [LIMIT_S]]]  (defaults 1000, 1024, 60) */
#define _DEFAULT_SOURCE /* wait4 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cluster.h"
#include "core/plan.h"
#include "core/profile.h"
#include "planner/native.h"
#include "planner/planner.h"
#include "sim/synth.h"
#include "bench/clock.h"

/* A synthetic model of n layers. Chain: layer i feeds i+1. DAG: blocks of 6 layers, a
 * fork layer feeding two branches (of 2 layers and of 1) that meet in a join layer, then
 * one more; the layers after the last whole block form a chain.
 * Times and sizes vary deterministically from layer to layer (1-5 ms forward, backward
 * twice that, 1-3 MB activations, 0-12 MB parameters). NULL when out of memory. */
static profile *synth_model(int n, int dag)
{
    int nedges = 0;
    for (int i = 1; i < n; i++) nedges += dag && i % 6 == 4 && i - 4 + 5 < n ? 2 : 1;
    profile *p = profile_alloc(n, nedges);
    if (!p) return NULL;
    p->name = strdup(dag ? "synthetic-dag" : "synthetic-chain");
    p->device = strdup("V100");
    p->source = strdup("bench_plan_scale");
    p->minibatch = 32;
    int e = 0;
    for (int i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "l%d", i);
        profile_layer *L = &p->layers[i];
        L->name = strdup(nm);
        L->kind = strdup("Linear");
        L->desc = strdup("");
        L->forward_ms = 1.0 + (double)((i * 7) % 5);
        L->backward_ms = 2.0 * L->forward_ms;
        L->activation_bytes = 1e6 * (double)(1 + i % 3);
        L->parameter_bytes = 4e6 * (double)(i % 4);
        if (i == 0) continue;
        if (!dag || i - i % 6 + 5 >= n) {
            p->edges[e++] = (profile_edge){i - 1, i};
            continue;
        }
        /* block b = i / 6: 6b fork, 6b+1 -> 6b+2 and 6b+3 -> ... as two branches */
        int r = i % 6, b0 = i - r;
        switch (r) {
        case 1: p->edges[e++] = (profile_edge){b0, i}; break;     /* branch A start */
        case 2: p->edges[e++] = (profile_edge){i - 1, i}; break;  /* branch A */
        case 3: p->edges[e++] = (profile_edge){b0, i}; break;     /* branch B start */
        case 4:                                                   /* join */
            p->edges[e++] = (profile_edge){b0 + 2, i};
            p->edges[e++] = (profile_edge){b0 + 3, i};
            break;
        default: p->edges[e++] = (profile_edge){i - 1, i}; break; /* 5, and 0 of next */
        }
    }
    return p;
}

/* A cluster of g GPUs: servers of min(g, 8) devices. NULL with err when out of memory. */
static cluster *synth_cluster(int g, plumb_err *err)
{
    sim_synth s;
    sim_synth_init(&s);
    s.devices_per_server = g < 8 ? g : 8;
    s.servers = g < 8 ? 1 : g / 8;
    s.bw_gbit[0] = 1200;
    s.bw_gbit[1] = 200;
    s.memory_gib = 80;
    return sim_synth_cluster(&s, err);
}

/* What a child reports through its pipe. */
typedef struct case_out {
    int ok, states;
    char what[96];
} case_out;

static void run_case(int n, int dag, int g, int native, case_out *out)
{
    plumb_err err;
    err_clear(&err);
    profile *p = synth_model(n, dag);
    cluster *c = p ? synth_cluster(g, &err) : NULL;
    if (!p || !c) {
        snprintf(out->what, sizeof out->what, "setup: %.80s", p ? err.msg : "out of memory");
        profile_free(p);
        cluster_free(c);
        return;
    }
    if (native) {
        native_options o;
        native_options_init(&o);
        plan *pl = planner_native(p, c, &o, NULL, &err);
        out->ok = pl != NULL;
        if (pl) snprintf(out->what, sizeof out->what, "%d stage%s", pl->nstages, pl->nstages > 1 ? "s" : "");
        else snprintf(out->what, sizeof out->what, "%.90s", err.msg);
        plan_free(pl);
    } else {
        pd_options o;
        pd_options_default(&o);
        pd_options_from_cluster(&o, c);
        pd_result r;
        int rc = planner_pipedream_run(p, NULL, &o, &r, &err);
        out->ok = rc == 0;
        if (rc == 0) {
            out->states = r.nstates;
            snprintf(out->what, sizeof out->what, "%d stage%s%s", r.nstages, r.nstages > 1 ? "s" : "",
                     r.compressed == 1 ? ", branches compressed"
                     : r.compressed == 2 ? ", topological prefixes" : "");
            pd_result_free(&r);
        } else {
            snprintf(out->what, sizeof out->what, "%.90s", err.msg);
        }
    }
    profile_free(p);
    cluster_free(c);
}

/* Forks a child for one case (n < 0: an idle child). Fills *out, the wall and CPU seconds
 * and the peak RSS in KiB; returns 0, or 1 when the child passed the limit. */
static int measure(int n, int dag, int g, int native, int limit_s, case_out *out, double *wall,
                   double *cpu, long *rss_kib)
{
    int fd[2];
    memset(out, 0, sizeof *out);
    if (pipe(fd)) return -1;
    double t0 = bench_clock_s(CLOCK_MONOTONIC);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        alarm((unsigned)limit_s);
        case_out o;
        memset(&o, 0, sizeof o);
        if (n >= 0) run_case(n, dag, g, native, &o);
        else o.ok = 1;
        ssize_t w = write(fd[1], &o, sizeof o);
        _exit(w == (ssize_t)sizeof o ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof *out);
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
    *wall = bench_clock_s(CLOCK_MONOTONIC) - t0;
    *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    *rss_kib = ru.ru_maxrss;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return 1;
    if (got != (ssize_t)sizeof *out) snprintf(out->what, sizeof out->what, "child failed");
    return 0;
}

int main(int argc, char **argv)
{
    int max_layers = argc > 1 ? atoi(argv[1]) : 1000;
    int max_gpus = argc > 2 ? atoi(argv[2]) : 1024;
    int limit_s = argc > 3 ? atoi(argv[3]) : 60;
    if (max_layers < 10 || max_gpus < 1 || limit_s < 1) {
        fprintf(stderr, "usage: bench_plan_scale [MAX_LAYERS>=10 [MAX_GPUS>=1 [LIMIT_S>=1]]]\n");
        return 2;
    }
    static const int sizes[] = {10, 30, 100, 300, 1000};
    static const int gpus[] = {1, 8, 64, 256, 1024};
    case_out o;
    double wall, cpu;
    long base_kib = 0;
    measure(-1, 0, 0, 0, limit_s, &o, &wall, &cpu, &base_kib);
    printf("Synthetic models (chain; DAG of two-branch blocks), servers of 8 GPUs (1200 / 200 "
           "Gbit/s), one case per forked child, limit %d s; peak RSS less an idle child's "
           "(%.1f MiB).\n\n", limit_s, (double)base_kib / 1024.0);
    printf("| model | layers | GPUs | planner | states | result | wall (ms) | CPU (ms) | "
           "peak RSS (MiB) |\n|---|---|---|---|---|---|---|---|---|\n");
    int over = 0;
    for (int dag = 0; dag < 2; dag++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            if (sizes[si] > max_layers) continue;
            for (size_t gi = 0; gi < sizeof gpus / sizeof *gpus; gi++) {
                if (gpus[gi] > max_gpus) continue;
                for (int native = 0; native < 2; native++) {
                    long kib = 0;
                    int late = measure(sizes[si], dag, gpus[gi], native, limit_s, &o, &wall,
                                       &cpu, &kib);
                    over += late != 0;
                    char states[16] = "-";
                    if (o.states) snprintf(states, sizeof states, "%d", o.states);
                    double mib = (double)(kib - base_kib) / 1024.0;
                    printf("| %s | %d | %d | %s | %s | %s | %.1f | %.1f | %.1f |\n",
                           dag ? "dag" : "chain", sizes[si], gpus[gi],
                           native ? "native" : "pipedream", states,
                           late ? "over the limit" : o.ok ? o.what : o.what, wall * 1e3,
                           cpu * 1e3, mib > 0 ? mib : 0.0);
                    fflush(stdout);
                }
            }
        }
    printf("\n%d cases over the %d s limit\n", over, limit_s);
    return 0;
}
