/* bench_trace.c: what the Chrome trace writer costs, written and only counted. Usage:
 * bench_trace PLAN.json [REPEATS]. Simulates the plan as `plumb sim --trace` does (ring
 * hops left out), then times, alternating, best of REPEATS (CPU seconds of this process):
 * timeline_chrome_text (the text built), timeline_chrome_size (the writer's counting pass:
 * formats every field, stores nothing), timeline_chrome_stream into a temporary file
 * within half the text's length (writes up to the limit, counts the rest: a refusal as
 * plumb sim --trace makes it) and timeline_chrome_stream of the whole text (as plumb sim
 * --trace writes it). Prints one line with the four times, the
 * counting pass and the streamed write as ratios of the text built, and checks that the
 * count and the streamed length equal the text's length (exit 1 when not). */
#include <stdio.h>
#include <stdlib.h>

#include "bench/clock.h"
#include "core/plan.h"
#include "core/timeline.h"
#include "sim/sim.h"

static double cpu_s(void)
{
    return bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_trace PLAN.json [REPEATS]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    plumb_err err;
    err_clear(&err);
    plan *pl = plan_load(argv[1], &err);
    if (!pl || reps < 1) {
        fprintf(stderr, "bench_trace: %s\n", pl ? "bad REPEATS" : err.msg);
        return 2;
    }
    sim_options o;
    sim_options_init(&o);
    o.timeline = SIM_TIMELINE_NO_RING_HOPS;
    sim_report *r = sim_run(pl, &o, &err);
    if (!r) {
        fprintf(stderr, "bench_trace: %s\n", err.msg);
        return 1;
    }
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    size_t len = 0, count = 0, rlen = 0, slen = 0;
    int bad = 0;
    for (int k = 0; k < reps; k++) {
        double t0 = cpu_s();
        char *text = timeline_chrome_text(r->tl, &len);
        double t1 = cpu_s();
        free(text);
        count = timeline_chrome_size(r->tl);
        double t2 = cpu_s();
        FILE *h = tmpfile();
        int rc = h ? timeline_chrome_stream(r->tl, h, len / 2, &rlen) : -1;
        bad |= !h;
        if (h) fclose(h);
        double t3 = cpu_s();
        FILE *f = tmpfile();
        int src = f ? timeline_chrome_stream(r->tl, f, 0, &slen) : -1;
        bad |= !f || fflush(f) != 0;
        if (f) fclose(f);
        double t4 = cpu_s();
        bad |= !text || count != len || rc != 1 || rlen != len || src != 0 || slen != len;
        best[0] = t1 - t0 < best[0] ? t1 - t0 : best[0];
        best[1] = t2 - t1 < best[1] ? t2 - t1 : best[1];
        best[2] = t3 - t2 < best[2] ? t3 - t2 : best[2];
        best[3] = t4 - t3 < best[3] ? t4 - t3 : best[3];
    }
    printf("trace %zu bytes, %zu events: written %.3f s, counted %.3f s (%.2fx the written), "
           "refused at half %.3f s, streamed to a file %.3f s (%.2fx); count %s the text\n",
           len, r->tl->n, best[0], best[1], best[1] / best[0], best[2], best[3],
           best[3] / best[0], bad ? "DIFFERS FROM" : "equals");
    sim_report_free(r);
    plan_free(pl);
    return bad;
}
