/* bench_sim_scale.c: how the simulator's cost grows with the work, as ratios measured in
 * one run (synthetic plans from sim/synth.c), each against its target (docs/sim.md,
 * "Performance"): PASS or MISS per line. The sizes of a ratio are run alternately,
 * BENCH_REPS times each (default 5), and the least CPU time of each is kept: the machine
 * may be shared, and a neighbour only ever adds time. Each run is a child process of its
 * own, cold as `plumb sim` starts (with its allocator settings, sim_malloc_for_one_run).
 * Usage:
 *   bench_sim_scale micro STAGES MB     per schedule, the CPU time of sim_run at MB and at
 *                                       8 x MB microbatches (1 iteration asked) and their
 *                                       ratio (target < 10)
 *   bench_sim_scale replicas STAGES R MB  every schedule that replicates stages, with every
 *                                       stage replicated R and 4 x R times: CPU time and
 *                                       ratio (target < 5)
 *   bench_sim_scale events STAGES MB ITERS  per schedule, the whole sim_run (generation,
 *                                       validation, memory model, engine, report): events
 *                                       and events per CPU second (target >= 10 M)
 *   bench_sim_scale lower STAGES MB     per schedule, the CPU time of schedule_from_plan
 *                                       (generation and lowering: the action IR sim_run
 *                                       starts from) at MB and 8 x MB microbatches (the
 *                                       mean of 16 and of 2 runs in a row of one plan,
 *                                       after a first not counted), and their ratio
 *   bench_sim_scale one SCHEDULE STAGES REPLICAS MB ITERS  one sim_run, for profiling
 *   bench_sim_scale plan SCHEDULE STAGES REPLICAS MB OUT.json  writes the synthetic plan
 *                                       (profile and cluster embedded) for `plumb sim`:
 *                                       bench/sim_same.sh compares two builds on them
 * CPU time of the process, since the machine may be shared. Exit 1 when a run fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/schedule_traits.h"
#include "sim/sim.h"
#include "bench/clock.h"
#include "bench/synth_plan.h"

/* every schedule kind, by the trait table's names */
#define NKINDS SCHED_NKINDS
#define KNAME(k) sched_kind_name((sched_kind)(k))

/* One sim_run of a synthetic plan: CPU seconds, or < 0 on failure; *events set. */
static double run_one(const char *kname, int stages, int replicas, int mb, int iters,
                      long long *events)
{
    int kind = sched_kind_parse(kname);
    if (kind < 0) return -1;
    plumb_err err;
    plan *pl = bench_synth_plan(kind, stages, replicas, mb, &err);
    if (!pl) {
        fprintf(stderr, "bench_sim_scale: %s\n", err.msg);
        return -1;
    }
    sim_options o;
    sim_options_init(&o);
    o.iterations = iters;
    double t0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    sim_report *rep = sim_run(pl, &o, &err);
    double t = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
    plan_free(pl);
    if (!rep) {
        fprintf(stderr, "bench_sim_scale: %s %d x %d x %d: %s\n", kname, stages, mb, iters,
                err.msg);
        return -1;
    }
    if (events) *events = rep->events;
    sim_report_free(rep);
    return t;
}

/* run_one in a child process, cold as a `plumb sim` process starts (a run after others in
 * one process finds their freed memory: a small run's pages are then all warm, a large
 * one's mostly fresh, and their ratio would measure the allocator): CPU seconds, or < 0
 * on failure; *events set. */
static double run_cold(const char *kname, int stages, int replicas, int mb, int iters,
                       long long *events)
{
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        struct { double t; long long ev; } out = {0, 0};
        out.t = run_one(kname, stages, replicas, mb, iters, &out.ev);
        _exit(write(fd[1], &out, sizeof out) == (ssize_t)sizeof out && out.t >= 0 ? 0 : 1);
    }
    close(fd[1]);
    struct { double t; long long ev; } in = {-1, 0};
    ssize_t got = read(fd[0], &in, sizeof in);
    close(fd[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        got != (ssize_t)sizeof in)
        return -1;
    if (events) *events = in.ev;
    return in.t;
}

/* Repetitions of each measurement (BENCH_REPS, default 5). */
static int reps_of(void)
{
    const char *e = getenv("BENCH_REPS");
    int r = e ? atoi(e) : 5;
    return r > 0 ? r : 1;
}

/* The least CPU time of reps runs of two sizes, run alternately (a, then b, then a...):
 * *ta and *tb; 0, or -1 when a run fails. */
static int run_pair(const char *kname, int stages, int ra, int ma, int rb, int mb, double *ta,
                    double *tb)
{
    *ta = *tb = 1e30;
    for (int i = 0, n = reps_of(); i < n; i++) {
        double a = run_cold(kname, stages, ra, ma, 1, NULL);
        double b = run_cold(kname, stages, rb, mb, 1, NULL);
        if (a < 0 || b < 0) return -1;
        if (a < *ta) *ta = a;
        if (b < *tb) *tb = b;
    }
    return 0;
}

/* schedule_from_plan of one synthetic plan, reps + 1 times in a row: the mean CPU seconds
 * of the last reps (the first warms the heap, as the runs of a sweep find it), or < 0 on
 * failure. */
static double lower_one(const char *kname, int stages, int mb, int reps)
{
    int kind = sched_kind_parse(kname);
    if (kind < 0) return -1;
    plumb_err err;
    plan *pl = bench_synth_plan(kind, stages, 1, mb, &err);
    if (!pl) {
        fprintf(stderr, "bench_sim_scale: %s\n", err.msg);
        return -1;
    }
    double t = 0;
    for (int r = 0; r <= reps; r++) {
        double t0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        schedule *s = schedule_from_plan(pl, 1, &err);
        if (r) t += bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
        if (!s) {
            fprintf(stderr, "bench_sim_scale: %s %d x %d: %s\n", kname, stages, mb, err.msg);
            plan_free(pl);
            return -1;
        }
        schedule_free(s);
    }
    plan_free(pl);
    return t / reps;
}

int main(int argc, char **argv)
{
    sim_malloc_for_one_run(); /* as `plumb sim` runs (its children inherit it) */
    const char *mode = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
    int c = argc > 4 ? atoi(argv[4]) : 0;
    long long ev = 0;
    if (!strcmp(mode, "micro") && argc == 4 && a > 0 && b > 0) {
        for (int k = 0; k < NKINDS; k++) {
            double t1, t8;
            if (run_pair(KNAME(k), a, 1, b, 1, 8 * b, &t1, &t8)) return 1;
            printf("micro    %-11s stages=%d microbatches %d -> %d: %.4f s -> %.4f s CPU, "
                   "ratio %.2f (8x the work; target < 10: %s)\n", KNAME(k), a, b, 8 * b, t1,
                   t8, t8 / t1, t8 / t1 < 10 ? "PASS" : "MISS");
        }
        return 0;
    }
    if (!strcmp(mode, "lower") && argc == 4 && a > 0 && b > 0) {
        for (int k = 0; k < NKINDS; k++) {
            double t1 = lower_one(KNAME(k), a, b, 16), t8 = lower_one(KNAME(k), a, 8 * b, 2);
            if (t1 < 0 || t8 < 0) return 1;
            printf("lower    %-11s stages=%d microbatches %d -> %d: %.4f s -> %.4f s CPU, "
                   "ratio %.2f (8x the work)\n", KNAME(k), a, b, 8 * b, t1, t8, t8 / t1);
        }
        return 0;
    }
    if (!strcmp(mode, "replicas") && argc == 5 && a > 0 && b > 0 && c > 0) {
        for (int k = 0; k < NKINDS; k++) { /* the kinds that replicate: not chunked */
            if (sched_kind_chunked((sched_kind)k)) continue;
            double t1, t4;
            if (run_pair(KNAME(k), a, b, c, 4 * b, 4 * c, &t1, &t4)) return 1;
            printf("replicas %-11s stages=%d replicas %d -> %d (microbatches %d -> %d): "
                   "%.4f s -> %.4f s CPU, ratio %.2f (4x the work; target < 5: %s)\n",
                   KNAME(k), a, b, 4 * b, c, 4 * c, t1, t4, t4 / t1,
                   t4 / t1 < 5 ? "PASS" : "MISS");
        }
        return 0;
    }
    if (!strcmp(mode, "events") && argc == 5 && a > 0 && b > 0 && c > 0) {
        for (int k = 0; k < NKINDS; k++) {
            double t = 1e30;
            for (int i = 0, n = reps_of(); i < n; i++) {
                double ti = run_cold(KNAME(k), a, 1, b, c, &ev);
                if (ti < 0) return 1;
                if (ti < t) t = ti;
            }
            printf("events   %-11s %d x %d x %d: %lld events in %.3f s CPU (whole sim_run): "
                   "%.1f M events/s (target >= 10 M: %s)\n", KNAME(k), a, b, c, ev, t,
                   ev / t / 1e6, ev / t >= 10e6 ? "PASS" : "MISS");
        }
        return 0;
    }
    if (!strcmp(mode, "one") && argc == 7) {
        double t = run_one(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                           atoi(argv[6]), &ev);
        if (t < 0) return 1;
        printf("one      %s: %lld events in %.3f s CPU: %.1f M events/s\n", argv[2], ev, t,
               ev / t / 1e6);
        return 0;
    }
    if (!strcmp(mode, "plan") && argc == 7) {
        plumb_err err;
        int kind = sched_kind_parse(argv[2]);
        plan *pl = kind < 0 ? NULL : bench_synth_plan(kind, atoi(argv[3]), atoi(argv[4]),
                                                      atoi(argv[5]), &err);
        if (!pl || plan_save(pl, argv[6], &err)) {
            fprintf(stderr, "bench_sim_scale: %s\n", kind < 0 ? "unknown schedule" : err.msg);
            plan_free(pl);
            return 1;
        }
        plan_free(pl);
        return 0;
    }
    fprintf(stderr, "usage: bench_sim_scale micro STAGES MB | lower STAGES MB | "
            "replicas STAGES R MB | events STAGES MB ITERS | "
            "one SCHEDULE STAGES REPLICAS MB ITERS | plan SCHEDULE STAGES REPLICAS MB OUT\n");
    return 2;
}
