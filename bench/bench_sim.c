/* bench_sim.c: the simulator's speed on a synthetic plan (equal stages of one layer, 1 MB
 * activations, 8 devices per server). Usage: bench_sim SCHEDULE STAGES MICROBATCHES
 * ITERATIONS [REPEATS]. Prints one line: actions, events, the engine's CPU time (best of
 * REPEATS; its wall time beside it) and events per CPU second, the CPU time of schedule
 * generation and of the whole sim_run (generation, the validator's in-flight replay, cost
 * model, engine, report; with the iterations it ran: more than asked when the steady state
 * needs them), and the process's peak resident memory. CPU time because the
 * machine may be shared: wall time then measures the neighbours. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "sim/cost.h"
#include "sim/sim.h"
#include "bench/clock.h"
#include "bench/synth_plan.h"

static double now_s(void)
{
    return bench_clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: the machine may be shared, wall time then overstates */
static double cpu_s(void)
{
    return bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench_sim SCHEDULE STAGES MICROBATCHES ITERATIONS [REPEATS]\n");
        return 2;
    }
    int kind = sched_kind_parse(argv[1]);
    int stages = atoi(argv[2]), mb = atoi(argv[3]), iters = atoi(argv[4]);
    int reps = argc > 5 ? atoi(argv[5]) : 3;
    if (kind < 0 || stages < 1 || mb < 1 || iters < 1 || reps < 1) {
        fprintf(stderr, "bench_sim: bad arguments\n");
        return 2;
    }
    plumb_err err;
    plan *pl = bench_synth_plan(kind, stages, 1, mb, &err);
    if (!pl) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    double t0 = cpu_s();
    schedule *sch = schedule_from_plan(pl, iters, &err);
    double t_gen = cpu_s() - t0;
    if (!sch) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    sim_model m;
    if (sim_cost_build(&m, pl, sch, &net, -1, 1, &err)) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    double best = 1e30, best_wall = 1e30;
    long long events = 0, actions = 0;
    double iteration_s = 0;
    for (int r = 0; r < reps; r++) {
        sim_result res;
        double t = cpu_s(), tw = now_s();
        if (sim_engine_run(&m, &res, &err)) {
            fprintf(stderr, "bench_sim: %s\n", err.msg);
            return 1;
        }
        t = cpu_s() - t;
        tw = now_s() - tw;
        if (t < best)
            best = t;
        if (tw < best_wall)
            best_wall = tw;
        events = res.events;
        actions = res.actions;
        iteration_s = res.iteration_s;
        sim_result_free(&res);
    }
    sim_model_release(&m);
    schedule_free(sch);
    sim_options o;
    sim_options_init(&o);
    o.iterations = iters;
    t0 = cpu_s();
    sim_report *rep = sim_run(pl, &o, &err);
    double t_run = cpu_s() - t0;
    if (!rep) {
        fprintf(stderr, "bench_sim: %s\n", err.msg);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%-11s stages=%-3d microbatches=%-5d iterations=%d actions=%lld events=%lld "
           "engine=%.4f s (wall %.4f s) events/s=%.1fM generate=%.4f s sim_run=%.4f s "
           "(%d iterations) peak_rss=%.1f MiB (simulated iteration %.4f s, bubble %.3f)\n",
           argv[1], stages, mb, iters, actions, events, best, best_wall, events / best / 1e6,
           t_gen, t_run, rep->iterations, ru.ru_maxrss / 1024.0, iteration_s,
           rep->bubble_fraction);
    sim_report_free(rep);
    plan_free(pl);
    return 0;
}
