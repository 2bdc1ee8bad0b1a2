/* bench_search3d.c: CPU time of the layout search (planner/search3d.h) with every dimension
 * free, against its targets (docs/llm.md, "Searching layouts"): GPT-3 175B on 1024 A100s
 * under 10 s, a 1T model on 3072 under 60 s. The baseline, measured in the same run, is one
 * full simulation of the layout the search picks: the search's CPU time is printed as a
 * multiple of it, beside the layouts it estimated (what simulating each would have cost is
 * about that many simulations).
 *   bench_search3d MODEL CLUSTER GPUS GLOBAL_BATCH LIMIT_S */
#include <stdio.h>
#include <stdlib.h>

#include "bench/clock.h"
#include "planner/search3d.h"

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: bench_search3d MODEL CLUSTER GPUS GLOBAL_BATCH LIMIT_S\n");
        return 2;
    }
    plumb_err err = {{0}};
    transformer *t = transformer_load(argv[1], &err);
    cluster *c = t ? cluster_load(argv[2], &err) : NULL;
    if (!c) {
        fprintf(stderr, "bench_search3d: %s\n", err.msg);
        return 1;
    }
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = atoi(argv[3]);
    o.global_batch = atoi(argv[4]);
    double limit = atof(argv[5]);
    double t0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    search3d_result *r = search3d_run(t, c, argv[2], &o, &err);
    double t1 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (!r) {
        fprintf(stderr, "bench_search3d: %s\n", err.msg);
        return 1;
    }
    sim_report *base = sim_run(r->best, NULL, &err);
    double t2 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (!base) {
        fprintf(stderr, "bench_search3d: %s\n", err.msg);
        return 1;
    }
    const search3d_cand *w = &r->ranked[0];
    double search = t1 - t0, one = t2 - t1;
    printf("%s on %d GPUs, global batch %d: %lld layouts estimated (%lld fit), %d simulated: "
           "%.2f s CPU (estimate %.2f s, simulation %.2f s); one simulation of the winner "
           "%.3f s: ratio %.1f; winner tp %d x pp %d x dp %d, microbatch %d, V %d, %.0f "
           "tokens/s, MFU %.1f %%; target < %g s: %s\n", t->name, o.gpus, o.global_batch,
           r->enumerated, r->fitting, r->nranked, search, r->estimate_cpu_s, r->simulate_cpu_s,
           one, one > 0 ? search / one : 0, w->d.tp, w->d.pp, w->d.dp, w->o.microbatch_size,
           w->d.interleave, w->tokens_per_s, 100 * w->mfu, limit,
           search < limit ? "met" : "missed");
    int missed = !(search < limit);
    sim_report_free(base);
    search3d_free(r);
    cluster_free(c);
    transformer_free(t);
    return missed ? 3 : 0;
}
