/* bench_balance3d.c: what `plumb plan --model ... --balance` adds to a 3D layout's planning
 * time (planner/balance3d.h): per layout, the CPU time of layout3d_balance given the even
 * split's report, against the baseline measured in the same run, building the layout
 * (layout3d_build) and simulating it once (sim_run), the work `plumb plan --model` does
 * without --balance; best of REPEAT runs, as a markdown table with the ratio.
 * Usage: bench_balance3d [REPEAT]  (default 3; run from the repository root) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/clock.h"
#include "core/cluster.h"
#include "core/transformer.h"
#include "planner/balance3d.h"
#include "planner/layout3d.h"
#include "sim/sim.h"

static const struct {
    const char *model;
    int gpus, tp, pp, dp, v, gb, prec;
} cases[] = {
    {"examples/llm/gpt3-175b.json", 1024, 8, 8, 16, 1, 1536, DEV_BF16},
    {"examples/llm/gpt3-175b.json", 1024, 8, 16, 8, 1, 1536, DEV_BF16},
    {"examples/llm/gpt3-175b.json", 1024, 8, 16, 8, 2, 1536, DEV_BF16},
    {"examples/llm/megatron/gpt-1t.json", 3072, 8, 64, 6, 1, 3072, DEV_FP16},
    {"examples/llm/llama3-8b.json", 8, 2, 4, 1, 1, 64, DEV_BF16},
    {"examples/llm/gpt2.json", 8, 1, 4, 2, 1, 64, DEV_BF16},
};

#define CLUSTER "profiles/clusters/dgx-a100-80g.json"

int main(int argc, char **argv)
{
    int repeat = argc > 1 ? atoi(argv[1]) : 3;
    if (repeat < 1) repeat = 1;
    plumb_err err = {{0}};
    cluster *c = cluster_load(CLUSTER, &err);
    if (!c) {
        fprintf(stderr, "bench_balance3d: %s\n", err.msg);
        return 1;
    }
    printf("| model | tp x pp x dp (v) | build + sim CPU (ms) | balance CPU (ms) | ratio | "
           "gain |\n|---|---|---|---|---|---|\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        transformer *t = transformer_load(cases[i].model, &err);
        if (!t) {
            fprintf(stderr, "bench_balance3d: %s\n", err.msg);
            rc = 1;
            continue;
        }
        layout3d_options o;
        layout3d_options_init(&o);
        o.gpus = cases[i].gpus, o.tp = cases[i].tp, o.pp = cases[i].pp, o.dp = cases[i].dp;
        o.interleave = cases[i].v, o.global_batch = cases[i].gb, o.microbatch_size = 1;
        o.recompute = RECOMPUTE_FULL, o.precision = (dev_precision)cases[i].prec;
        double base = 1e30, bal = 1e30;
        layout3d_balance_result b = {0};
        for (int k = 0; k < repeat; k++) {
            double t0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
            plan *pl = layout3d_build(t, c, CLUSTER, &o, &err);
            sim_report *r = pl ? sim_run(pl, NULL, &err) : NULL;
            double t1 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (!r || layout3d_balance(pl, NULL, r, &b, &err)) {
                fprintf(stderr, "bench_balance3d: %s: %s\n", cases[i].model, err.msg);
                rc = 1;
            }
            double t2 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (t1 - t0 < base) base = t1 - t0;
            if (t2 - t1 < bal) bal = t2 - t1;
            sim_report_free(r);
            plan_free(pl);
        }
        printf("| %s | %d x %d x %d (%d) | %.1f | %.1f | %.3f | ", cases[i].model, o.tp, o.pp,
               o.dp, o.interleave, 1e3 * base, 1e3 * bal, bal / base);
        if (b.changed) printf("%+.1f %% |\n", 100 * (b.balanced_s / b.even_s - 1));
        else printf("none (%s) |\n", b.tried ? "not faster" : "even optimal");
        transformer_free(t);
    }
    cluster_free(c);
    return rc;
}
