/* test_search3d.c: the layout search (planner/search3d.h) and the sweep over GPU counts
 * built on it (planner/sweep3d.h). The fast estimate against the simulator on layouts of
 * every searched kind (iteration within ESTIMATE_TOL, the memory of each device exact); the
 * search's winner against layouts picked by hand, each simulated (none may beat it); fixed
 * dimensions stay fixed; asynchronous schedules are refused; each bad input (a GPU count no
 * layout uses, a batch no layout divides, a model no layout fits) gets its one line. The
 * sweep: its counts (whole servers, doubled), each count's best against the search on that
 * count alone, the days, cost and cost per million tokens recomputed here from the tokens/s,
 * the deadline's fewest GPUs and the Pareto front found here by comparing every pair, the
 * SVG and its bad inputs. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/schedule_traits.h"
#include "core/transformer.h"
#include "llmfix.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "planner/sweep3d.h"
#include "sim/sim.h"
#include "sim/synth.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT3 "examples/llm/gpt3-175b.json"
#define LLAMA8B "examples/llm/llama3-8b.json"
#define LLAMA70B "examples/llm/llama3-70b.json"
#define H100 "profiles/clusters/dgx-h100.json"
#define ESTIMATE_TOL 0.001 /* the estimate's iteration against the simulator's (was 0.05
                             before the interleaved and zb-h1 orders were replayed and
                             the interleaved chunks' all-reduces added up: 3.8 % worst;
                             0.01 before the V kinds' tails were replayed: 0.76 % worst,
                             dualpipev; 0.005 before interleaved's were: 0.27 %,
                             interleaved V 12; now 0.000 %) */

static transformer *model(const char *path) { return llmfix_model(path); }

static cluster *a100(void) { return llmfix_cluster(A100); }

typedef struct hand {
    int tp, pp, b, v, rc, sp, zero, sched;
} hand;

static layout3d_options layout(int gpus, int gb, const hand *h)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = gpus, o.global_batch = gb;
    o.tp = h->tp, o.pp = h->pp, o.dp = gpus / (h->tp * h->pp);
    o.microbatch_size = h->b, o.interleave = h->v, o.recompute = h->rc;
    o.sequence_parallel = h->sp, o.zero = h->zero, o.schedule = h->sched;
    return o;
}

/* Simulates layout h; *fits and the report's tokens/s. NULL when it does not build. */
static sim_report *simulate(const transformer *t, const cluster *c, int gpus, int gb,
                            const hand *h)
{
    plumb_err err = {{0}};
    layout3d_options o = layout(gpus, gb, h);
    plan *pl = layout3d_build(t, c, A100, &o, &err);
    cr_assert_not_null(pl, "tp %d pp %d: %s", h->tp, h->pp, err.msg);
    sim_report *r = sim_run(pl, NULL, &err);
    cr_assert_not_null(r, "%s", err.msg);
    plan_free(pl);
    return r;
}

enum { N = RECOMPUTE_NONE, F = RECOMPUTE_FULL, S = RECOMPUTE_SELECTIVE };
enum { K1 = SCHED_1F1B_FLUSH, KI = SCHED_INTERLEAVED, KZ = SCHED_ZB_H1, KV = SCHED_ZB_V,
       KD = SCHED_DUALPIPEV };

/* A case of the estimate's tests: the layout built (o, its plan pl and model t), estimated
 * (e) and simulated (r); est_run_free frees them. */
typedef struct est_case { const char *model; int gpus, gb; hand h; } est_case;
typedef struct est_run {
    layout3d_options o;
    search3d_est e;
    transformer *t;
    plan *pl;
    sim_report *r;
} est_run;

/* Case k on cp context ranks (flash attention where cp > 1, dp the rest). */
static void estimate_and_simulate_cp(const est_case *k, int cp, cluster *c, size_t i,
                                     est_run *x)
{
    x->t = model(k->model);
    plumb_err err = {{0}};
    x->o = layout(k->gpus, k->gb, &k->h);
    if (cp > 1) {
        x->o.cp = cp, x->o.dp /= cp;
        x->o.attention = LLM_ATTN_FLASH;
    }
    x->pl = layout3d_build(x->t, c, A100, &x->o, &err);
    cr_assert_not_null(x->pl, "case %zu: %s", i, err.msg);
    cr_assert_eq(search3d_estimate(x->pl, &x->e, &err), 0, "case %zu: %s", i, err.msg);
    x->r = sim_run(x->pl, NULL, &err);
    cr_assert_not_null(x->r, "%s", err.msg);
}

static void estimate_and_simulate(const est_case *k, cluster *c, size_t i, est_run *x)
{
    estimate_and_simulate_cp(k, 1, c, i, x);
}

static void est_run_free(est_run *x)
{
    sim_report_free(x->r);
    plan_free(x->pl);
    transformer_free(x->t);
}

/* The estimate against the simulator: GPT-3 on 64 and 256 A100s and Llama-3-8B
 * (grouped-query attention, SwiGLU) on 32, every searched schedule, recomputation, ZeRO stage, sequence
 * parallelism, microbatch sizes, data parallelism with and without interleaving. */
Test(search3d, estimate_agrees_with_the_simulator)
{
    static const est_case cases[] = {
        {GPT3, 64, 64, {8, 8, 1, 1, F, 0, 0, K1}},
        {GPT3, 64, 64, {8, 8, 1, 2, S, 1, 0, KI}},
        {GPT3, 64, 64, {8, 8, 1, 12, S, 1, 0, KI}},
        {GPT3, 64, 128, {8, 4, 1, 3, F, 1, 1, KI}},
        {GPT3, 64, 128, {8, 4, 2, 1, S, 1, 1, K1}},
        {GPT3, 64, 64, {4, 16, 1, 1, F, 0, 0, K1}},
        {GPT3, 64, 64, {8, 8, 1, 1, S, 1, 0, KZ}},
        {GPT3, 64, 64, {8, 8, 1, 2, S, 1, 0, KV}},
        {GPT3, 64, 64, {8, 8, 1, 2, S, 1, 0, KD}},
        {GPT3, 64, 128, {8, 2, 1, 1, F, 1, 1, K1}},
        {GPT3, 256, 256, {4, 8, 1, 12, S, 1, 1, KI}}, /* 12 chunks' rings on 8 replicas */
        {LLAMA8B, 32, 128, {2, 4, 1, 1, N, 1, 1, K1}},
        {LLAMA8B, 32, 128, {1, 4, 2, 2, S, 0, 1, KI}},
        {LLAMA8B, 32, 256, {4, 2, 4, 1, F, 1, 0, K1}},
        {LLAMA8B, 32, 64, {8, 1, 1, 1, N, 0, 1, K1}},
    };
    cluster *c = a100();
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        est_run x;
        estimate_and_simulate(&cases[i], c, i, &x);
        double rel = x.e.iteration_s / x.r->iteration_s - 1;
        if (fabs(rel) > worst) worst = fabs(rel);
        cr_expect(fabs(rel) <= ESTIMATE_TOL, "case %zu (%s tp %d pp %d v %d): estimate %.4f s, "
                  "simulated %.4f s (%+.1f %%)", i, sched_kind_name(x.pl->schedule), x.o.tp, x.o.pp,
                  x.o.interleave, x.e.iteration_s, x.r->iteration_s, 100 * rel);
        cr_expect(fabs(x.e.peak_bytes - x.r->peak_memory_bytes) <= 1e-9 * x.r->peak_memory_bytes,
                  "case %zu: peak memory %.0f estimated, %.0f simulated", i, x.e.peak_bytes,
                  x.r->peak_memory_bytes);
        cr_expect_eq(x.e.fits, x.r->fits, "case %zu", i);
        /* the parts add up to the estimate */
        cr_expect(x.e.compute_s > 0 && x.e.bubble_s >= 0 && x.e.dp_s >= 0 && x.e.step_s >= 0);
        est_run_free(&x);
    }
    printf("search3d: the estimate's worst error against the simulator: %.3f %%\n", 100 * worst);
    cluster_free(c);
}

/* Wide data-parallel rings: tensor 1, pipeline 2 on 64 and 128 A100s, 32 and 64 replicas
 * over 4 and 8 servers, so each stage's ring has the most buckets (4096) and the most
 * steps. The simulator pays the ring's 2 (r - 1) latencies once per all-reduce, a K-th per
 * bucket; the estimate paid them in every bucket (+13 to +34 % on these layouts of GPT-3 on
 * H100s, the exposed all-reduce 2.6 s too long at 64 replicas). 1f1b-flush and zb-h1, two
 * microbatches (the tail weighs most) and eight. */
#define WIDE_RING_TOL 0.001
Test(search3d, wide_rings_pay_latency_once)
{
    static const est_case cases[] = {
        {GPT3, 128, 128, {1, 2, 1, 1, F, 0, 0, KZ}},
        {GPT3, 128, 128, {1, 2, 1, 1, F, 0, 0, K1}},
        {GPT3, 64, 256, {1, 2, 1, 1, S, 0, 0, KZ}},
        {LLAMA8B, 128, 128, {1, 2, 1, 1, S, 0, 0, KZ}},
    };
    cluster *c = a100();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        est_run x;
        estimate_and_simulate(&cases[i], c, i, &x);
        double rel = x.e.iteration_s / x.r->iteration_s - 1;
        cr_expect(fabs(rel) <= WIDE_RING_TOL, "case %zu (%s dp %d): estimate %.4f s (dp %.4f s), "
                  "simulated %.4f s (%+.2f %%)", i, sched_kind_name(x.pl->schedule), x.o.dp,
                  x.e.iteration_s, x.e.dp_s, x.r->iteration_s, 100 * rel);
        est_run_free(&x);
    }
    cluster_free(c);
}

/* The V kinds (zb-v, dualpipev) hold their own fill and drain, not ZB-H1's (p - 1) max (F +
 * I - W): their bubble is replayed from the schedule's order. Few microbatches per replica
 * (m 4 to 2 p, where the fill and drain weigh most) and many, 4 and 8 ranks, tensor,
 * sequence and data parallelism: each within V_TOL of the simulator (ZB-H1's bubble was
 * 2 to 14 % off on these). */
#define V_TOL 0.001 /* 0.02 before the replay covered two iterations (worst +1.65 %), 0.01
                       before it covered every microbatch (dualpipev at m = 8 p: +0.8 %,
                       the fill and drain of the order cut to 4 p) */
Test(search3d, v_kinds_bubble_against_the_simulator)
{
    static const est_case cases[] = {
        {GPT3, 64, 8, {8, 8, 1, 2, S, 1, 0, KV}},     /* m = p */
        {GPT3, 64, 8, {8, 8, 1, 2, S, 1, 0, KD}},
        {GPT3, 64, 16, {8, 8, 1, 2, S, 1, 0, KV}},    /* m = 2 p */
        {GPT3, 64, 24, {8, 8, 1, 2, S, 1, 0, KV}},
        {GPT3, 64, 64, {8, 8, 1, 2, S, 1, 0, KD}},
        {LLAMA8B, 32, 64, {1, 4, 2, 2, S, 0, 1, KD}}, /* m = p, 8 replicas */
        {LLAMA8B, 32, 32, {2, 4, 1, 2, N, 1, 1, KV}},
        {LLAMA8B, 32, 32, {2, 4, 1, 2, N, 1, 1, KD}},
        {LLAMA8B, 32, 128, {1, 8, 1, 2, F, 0, 1, KV}},
        {LLAMA8B, 32, 32, {1, 8, 1, 2, F, 0, 1, KV}},
    };
    cluster *c = a100();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        est_run x;
        estimate_and_simulate(&cases[i], c, i, &x);
        double rel = x.e.iteration_s / x.r->iteration_s - 1;
        cr_expect(fabs(rel) <= V_TOL, "case %zu (%s tp %d pp %d, %d microbatches per replica): "
                  "estimate %.4f s, simulated %.4f s (%+.1f %%)", i,
                  sched_kind_name(x.pl->schedule), x.o.tp, x.o.pp, x.pl->microbatches / x.o.dp,
                  x.e.iteration_s, x.r->iteration_s, 100 * rel);
        cr_expect(x.e.bubble_s > 0 && x.e.p2p_s > 0, "case %zu", i);
        est_run_free(&x);
    }
    cluster_free(c);
}

/* The V kinds' data-parallel tails on H100s: each stage's all-reduce after its own last
 * backward (dualpipev's last ones are whole B, not W) and its step where the order puts
 * them, a rank's second chunk's in the wait while the V drains (replayed, not each rank's
 * two tails added). Data-parallel layouts of 2 to 8 ranks, m = p and 4 p microbatches per
 * replica; the seventh has one replica (its steps alone), the last two 2 context ranks
 * (the rings over dp x cp). Before: +17.0, +12.0, +6.5, +4.5, +2.5, +1.8, +0.4, +22.8 and
 * +3.6 % (the worst of a grid of 688 zb-v and dualpipev layouts:
 * GPT-3 175B, Llama 3 8B and 70B on 64 and 128 H100s, tp 1 to 8, pp 2 to 16, full and
 * selective recomputation; dualpipev +19.5 %, zb-v +2.5 %); after, the grid's worst is
 * 0.01 %. */
#define V_TAIL_TOL 0.001
Test(search3d, v_kinds_data_parallel_tails)
{
    static const est_case cases[] = {
        {GPT3, 64, 32, {2, 2, 1, 2, F, 1, 0, KD}},    /* dp 16, m = p */
        {LLAMA8B, 64, 8, {8, 2, 1, 2, F, 1, 0, KD}},  /* dp 4 */
        {GPT3, 64, 32, {2, 4, 1, 2, S, 1, 0, KD}},    /* dp 8 */
        {GPT3, 128, 16, {8, 8, 1, 2, F, 1, 0, KD}},   /* dp 2 */
        {LLAMA70B, 64, 32, {8, 2, 1, 2, F, 1, 0, KV}}, /* dp 4, m = 4 p */
        {GPT3, 128, 64, {8, 4, 1, 2, F, 1, 0, KV}},   /* dp 4, m = 4 p */
        {GPT3, 64, 32, {8, 8, 1, 2, S, 1, 0, KV}},    /* dp 1 */
        {LLAMA8B, 128, 16, {4, 2, 1, 2, F, 1, 0, KD}}, /* cp 2 (below): dp 8 x cp 2 rings */
        {LLAMA8B, 128, 16, {4, 4, 1, 2, S, 1, 0, KV}}, /* cp 2, dp 4 */
    };
    cluster *c = llmfix_cluster(H100);
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        est_run x;
        estimate_and_simulate_cp(&cases[i], i >= 7 ? 2 : 1, c, i, &x);
        double rel = x.e.iteration_s / x.r->iteration_s - 1;
        if (fabs(rel) > worst) worst = fabs(rel);
        cr_expect(fabs(rel) <= V_TAIL_TOL, "case %zu (%s tp %d pp %d dp %d, %d microbatches "
                  "per replica): estimate %.4f s (dp %.4f s, step %.4f s), simulated %.4f s "
                  "(%+.2f %%)", i, sched_kind_name(x.pl->schedule), x.o.tp, x.o.pp, x.o.dp,
                  x.pl->microbatches / x.o.dp, x.e.iteration_s, x.e.dp_s, x.e.step_s,
                  x.r->iteration_s, 100 * rel);
        cr_expect(x.e.dp_s >= 0 && x.e.step_s >= 0, "case %zu", i);
        est_run_free(&x);
    }
    printf("search3d: the V kinds' tails, worst error against the simulator: %.3f %%\n",
           100 * worst);
    cluster_free(c);
}

/* Interleaved's all-reduces and steps in their places on H100s: the lowering puts each
 * chunk's ALLREDUCE and STEP right after its last backward, between the rank's later
 * chunks' backwards, where they partly hide in the drain's waits (V 8 and 12: the est's
 * steps summed after the pipeline were too long) or hold the backwards the next rank waits
 * for (cp 2, 8 replicas: the rings too short). Before they were replayed in the order:
 * +1.21, +1.20, +1.11, -2.59 and +1.79 % (the worst of the grid in docs/llm.md, "Searching
 * layouts", default runtime and cp 2). */
#define INTERLEAVED_TOL 0.001
Test(search3d, interleaved_tails_against_the_simulator)
{
    static const est_case cases[] = {
        {LLAMA8B, 64, 8, {8, 4, 1, 8, S, 1, 0, KI}},  /* dp 2, m = p */
        {GPT3, 64, 8, {8, 8, 1, 12, S, 1, 0, KI}},    /* dp 1, m = p */
        {GPT3, 128, 32, {4, 16, 1, 6, S, 1, 0, KI}},  /* dp 2, m = p */
        {LLAMA8B, 128, 16, {4, 2, 1, 2, S, 1, 0, KI}}, /* cp 2 (below), dp 8 */
        {LLAMA8B, 64, 16, {2, 4, 1, 8, S, 1, 0, KI}},  /* cp 2, dp 4 */
    };
    cluster *c = llmfix_cluster(H100);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        est_run x;
        estimate_and_simulate_cp(&cases[i], i >= 3 ? 2 : 1, c, i, &x);
        double rel = x.e.iteration_s / x.r->iteration_s - 1;
        cr_expect(fabs(rel) <= INTERLEAVED_TOL, "case %zu (tp %d pp %d V %d dp %d, %d "
                  "microbatches per replica): estimate %.4f s (dp %.4f s, step %.4f s), "
                  "simulated %.4f s (%+.2f %%)", i, x.o.tp, x.o.pp, x.o.interleave, x.o.dp,
                  x.pl->microbatches / x.o.dp, x.e.iteration_s, x.e.dp_s, x.e.step_s,
                  x.r->iteration_s, 100 * rel);
        est_run_free(&x);
    }
    cluster_free(c);
}

/* zb-h1's bubble by hand, against the simulator: p = 4 equal stages of F, I and W (ms),
 * m = 8 microbatches, sends of ~0.1 us, no replicas. In the steady state (the simulator's
 * iteration: the next iteration's forwards start under the last rank's deferred W) plumb's
 * zb-h1 order (W from the r-th step on rank r, docs/schedules.md) runs m (F + I + W) +
 * (p - 1) max(I, F + I - W) per iteration: found by replaying the order over three
 * iterations on F, I, W in {0.5, 1, 1.5, 2, 3}, p 2 to 7, m p to 5p (3750 cases, none
 * off). ZB-H1's (p - 1) (F + I - W) holds only for W <= F and gives 32 ms, 40.5 ms and 36
 * ms (its bubble at 0) for the first three (35, 42 and 37.5 here); one iteration alone
 * would give 39 ms for the third. The simulator must give the hand figure, and the estimate
 * the simulator's. */
Test(search3d, zb_h1_bubble_when_w_outweighs_f)
{
    static const struct { double F, I, W, want_ms; } cases[] = {
        {1, 1, 2, 8 * 4 + 3 * 1.0},     /* W > F: I */
        {1, 2, 1.5, 8 * 4.5 + 3 * 2.0}, /* W > F, I > W: I */
        {1, 0.5, 3, 8 * 4.5 + 3 * 0.5}, /* W > F > I: I */
        {2, 1, 1, 8 * 4 + 3 * 2.0},     /* W <= F: F + I - W, as before */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_synth sy;
        sim_synth_init(&sy);
        sy.schedule = SCHED_ZB_H1;
        sy.forward_ms = cases[i].F;
        sy.input_ms = cases[i].I, sy.weight_ms = cases[i].W;
        sy.backward_ms = cases[i].I + cases[i].W;
        sy.bw_gbit[0] = sy.bw_gbit[1] = 1e5; /* sends of ~0.1 us */
        plumb_err err = {{0}};
        plan *pl = sim_synth_plan(&sy, &err);
        cr_assert_not_null(pl, "%s", err.msg);
        sim_report *r = sim_run(pl, NULL, &err);
        cr_assert_not_null(r, "%s", err.msg);
        search3d_est e;
        cr_assert_eq(search3d_estimate(pl, &e, &err), 0, "%s", err.msg);
        double want = cases[i].want_ms * 1e-3;
        cr_expect(fabs(r->iteration_s - want) <= 1e-3 * want, "case %zu: simulated %.4f ms, "
                  "by hand %.4f ms", i, 1e3 * r->iteration_s, 1e3 * want);
        cr_expect(fabs(e.iteration_s - r->iteration_s) <= 1e-3 * r->iteration_s, "case %zu "
                  "(F %g, I %g, W %g): estimate %.4f ms, simulated %.4f ms", i, cases[i].F,
                  cases[i].I, cases[i].W, 1e3 * e.iteration_s, 1e3 * r->iteration_s);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* The chunked kinds (interleaved) run 2 chunks per rank or more: the search never tries
 * interleaved at V = 1 (1f1b-flush's layout, which the simulator refuses under that kind).
 * Llama-3-8B on 16 A100s with 40 simulated: 13f6d63's search tried them, and one among the
 * 40 made the whole search fail ("interleaved needs a plan with 2 or more chunks"). */
Test(search3d, chunked_kinds_have_two_chunks_or_more)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 16, o.global_batch = 64, o.simulate = 40;
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, c, A100, &o, &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_expect_eq(r->nranked, 40);
    for (int i = 0; i < r->nranked; i++)
        if (sched_kind_chunked(r->ranked[i].d.schedule))
            cr_expect_geq(r->ranked[i].d.interleave, 2, "ranked %d: %s at V %d", i,
                          sched_kind_name(r->ranked[i].d.schedule), r->ranked[i].d.interleave);
    search3d_free(r);
    cluster_free(c);
    transformer_free(t);
}

static search3d_result *search_ok(const transformer *t, const cluster *c,
                                  const search3d_options *o)
{
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, c, A100, o, &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert_geq(r->nranked, 1);
    cr_assert_not_null(r->best);
    cr_assert_not_null(r->best_report);
    return r;
}

/* The winner on 64 A100s (GPT-3, global batch 64) against layouts a person would try:
 * Megatron's defaults, more pipeline, more data parallelism, interleaving, every
 * recomputation, the zero-bubble and V schedules. None that fits may beat it, and the ranking is in
 * simulated throughput, its first the plan and report the result keeps. */
Test(search3d, winner_beats_layouts_by_hand)
{
    static const hand hands[] = {
        {8, 8, 1, 1, F, 0, 0, K1}, {8, 8, 1, 1, S, 1, 0, K1}, {8, 8, 1, 2, S, 1, 0, KI},
        {8, 8, 1, 4, S, 1, 0, KI}, {8, 8, 1, 6, S, 1, 0, KI}, {8, 8, 1, 12, S, 1, 0, KI},
        {8, 8, 1, 3, N, 1, 0, KI}, {8, 4, 1, 8, S, 1, 1, KI}, {8, 4, 1, 1, F, 1, 1, K1},
        {4, 16, 1, 1, F, 1, 0, K1}, {4, 16, 1, 6, S, 1, 0, KI}, {8, 2, 1, 1, F, 1, 1, K1},
        {8, 8, 2, 1, F, 1, 0, K1}, {8, 8, 1, 1, S, 1, 0, KZ}, {4, 16, 1, 1, N, 1, 0, K1},
        {8, 8, 1, 2, S, 1, 0, KV}, {8, 8, 1, 2, S, 1, 0, KD}, {4, 16, 1, 2, S, 1, 0, KV},
    };
    transformer *t = model(GPT3);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64;
    search3d_result *r = search_ok(t, c, &o);
    const search3d_cand *w = &r->ranked[0];
    cr_assert(w->simulated && w->fits);
    cr_assert_float_eq(w->tokens_per_s, r->best_report->tokens_per_s, 1e-9 * w->tokens_per_s);
    for (int i = 1; i < r->nranked; i++)
        cr_assert_geq(r->ranked[i - 1].tokens_per_s, r->ranked[i].tokens_per_s);
    int fitting = 0;
    for (size_t i = 0; i < sizeof hands / sizeof hands[0]; i++) {
        sim_report *h = simulate(t, c, 64, 64, &hands[i]);
        if (h->fits) {
            fitting++;
            cr_expect_geq(w->tokens_per_s, h->tokens_per_s * (1 - 1e-9), "by hand %zu (tp %d "
                          "pp %d v %d) runs %.0f tokens/s, the winner %.0f", i, hands[i].tp,
                          hands[i].pp, hands[i].v, h->tokens_per_s, w->tokens_per_s);
        }
        sim_report_free(h);
    }
    cr_assert_geq(fitting, 8, "too few of the hand layouts fit to compare (%d)", fitting);
    search3d_free(r);
    cluster_free(c);
    transformer_free(t);
}

/* Fixed dimensions stay fixed: tp 4 and full recomputation for Llama-3-8B on 32 GPUs. */
Test(search3d, fixed_dimensions)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 32, o.global_batch = 128, o.tp = 4, o.recompute = RECOMPUTE_FULL;
    o.microbatch_size = 2;
    search3d_result *r = search_ok(t, c, &o);
    for (int i = 0; i < r->nranked; i++) {
        cr_assert_eq(r->ranked[i].d.tp, 4);
        cr_assert_eq(r->ranked[i].o.recompute, RECOMPUTE_FULL);
        cr_assert_eq(r->ranked[i].o.microbatch_size, 2);
        cr_assert_eq(r->ranked[i].d.tp * r->ranked[i].d.pp * r->ranked[i].d.dp, 32);
    }
    cr_assert_eq(r->best->tp, 4);
    cr_assert_eq(r->best->recompute, RECOMPUTE_FULL);
    char why[512];
    search3d_why(r, r->nranked - 1, why, sizeof why);
    cr_assert(strstr(why, "full recompute"), "%s", why);
    if (r->nranked > 1) cr_assert(strstr(why, "slower"), "%s", why);
    search3d_free(r);
    cluster_free(c);
    transformer_free(t);
}

/* search3d_options_from_plan: every setting a plan fixes, the what-ifs of sim_options in
 * place of the plan's (schedule, microbatches, p2p, grad-sync; -1 and 0 keep the plan's),
 * a checkpoint interval only with full recompute, no one dp over replicas that differ, and
 * no plan at all as search3d_options_init. */
Test(search3d, options_from_plan)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    hand h = { 2, 2, 1, 2, RECOMPUTE_FULL, 1, 1, SCHED_INTERLEAVED };
    layout3d_options lo = layout(8, 16, &h);
    lo.checkpoint_layers = 2;
    lo.precision = DEV_BF16, lo.grad_reduce = DEV_BF16, lo.optimizer_state = DEV_BF16;
    lo.p2p_sync = 1;
    plumb_err err = {{0}};
    plan *pl = layout3d_build(t, c, A100, &lo, &err);
    cr_assert_not_null(pl, "%s", err.msg);
    pl->tp_overlap = TP_OVERLAP_FULL;
    pl->overlap_param_gather = 1;
    search3d_options o;
    memset(&o, 0x5a, sizeof o); /* initialised by the builder, not by the caller */
    search3d_options_from_plan(pl, NULL, &o);
    cr_assert_eq(o.gpus, 8);
    cr_assert_eq(o.global_batch, 16);
    cr_assert(o.tp == 2 && o.pp == 2 && o.dp == 2, "%d x %d x %d", o.tp, o.pp, o.dp);
    cr_assert_eq(o.microbatch_size, 1);
    cr_assert_eq(o.interleave, 2);
    cr_assert_eq(o.recompute, RECOMPUTE_FULL);
    cr_assert_eq(o.checkpoint_layers, 2);
    cr_assert_eq(o.sequence_parallel, 1);
    cr_assert_eq(o.zero, 1);
    cr_assert_eq(o.schedule, SCHED_INTERLEAVED);
    cr_assert_eq(o.precision, DEV_BF16);
    cr_assert_eq(o.grad_reduce, DEV_BF16);
    cr_assert_eq(o.optimizer_state, DEV_BF16);
    cr_assert_eq(o.tp_overlap, TP_OVERLAP_FULL);
    cr_assert_eq(o.overlap_param_gather, 1);
    cr_assert_eq(o.p2p_sync, 1);
    cr_assert_eq(o.grad_sync_end, 0);
    search3d_options init; /* what a plan does not hold */
    search3d_options_init(&init);
    cr_assert(o.seq == init.seq && o.attention == init.attention &&
              o.simulate == init.simulate && o.balance == init.balance);
    cr_assert_eq(search3d_runtime_check(&o, &err), 0, "%s", err.msg);

    /* the what-ifs in the plan's place, each where it is set */
    sim_options w;
    sim_options_init(&w);
    search3d_options_from_plan(pl, &w, &init);
    cr_assert_eq(memcmp(&init, &o, sizeof o), 0, "no what-if: the plan as written");
    w.schedule = SCHED_PIPEDREAM, w.microbatches = 4, w.p2p_sync = 0, w.grad_sync_end = 1;
    search3d_options_from_plan(pl, &w, &o);
    cr_assert_eq(o.schedule, SCHED_PIPEDREAM);
    cr_assert_eq(o.global_batch, 4);
    cr_assert_eq(o.p2p_sync, 0);
    cr_assert_eq(o.grad_sync_end, 1);
    cr_assert_eq(o.interleave, 2, "the simulator keeps the plan's chunks");
    cr_assert_eq(search3d_runtime_check(&o, &err), -1, "pipedream with the all-gather apart");
    cr_assert(strstr(err.msg, "--overlap-param-gather: expected a synchronous schedule"),
              "%s", err.msg);
    sim_options_init(&w);
    w.p2p_sync = 0;
    search3d_options_from_plan(pl, &w, &o);
    cr_assert(o.p2p_sync == 0 && o.grad_sync_end == 0 && o.schedule == SCHED_INTERLEAVED &&
              o.global_batch == 16);

    /* a checkpoint interval is full recompute's own: one under another kind is not read
     * here (a plan file's loader refuses it, plumb sim's --checkpoint-layers check too:
     * plan_checkpoint_check; the simulator reads it only under full) */
    pl->recompute = RECOMPUTE_SELECTIVE;
    search3d_options_from_plan(pl, NULL, &o);
    cr_assert_eq(o.recompute, RECOMPUTE_SELECTIVE);
    cr_assert_eq(o.checkpoint_layers, -1);
    cr_assert_eq(search3d_runtime_check(&o, &err), 0, "%s", err.msg);
    plan_free(pl);

    /* PipeDream's 15-1 plan: two stages of 15 and 1 replicas, no one dp */
    pl = plan_load("examples/plans/vgg16-hybrid-pipedream.json", &err);
    cr_assert_not_null(pl, "%s", err.msg);
    search3d_options_from_plan(pl, NULL, &o);
    cr_assert(o.gpus == 16 && o.pp == 2 && o.dp == 0 && o.tp == 1 && o.interleave == 1,
              "%d gpus, pp %d, dp %d", o.gpus, o.pp, o.dp);
    cr_assert_eq(o.schedule, SCHED_PIPEDREAM);
    cr_assert_eq(o.global_batch, pl->microbatch_size * pl->microbatches);
    cr_assert_eq(o.checkpoint_layers, -1);
    plan_free(pl);

    search3d_options_from_plan(NULL, &w, &o); /* no plan: every setting free */
    search3d_options_init(&init);
    cr_assert_eq(memcmp(&init, &o, sizeof o), 0);
    cluster_free(c);
    transformer_free(t);
}

static void bad(const char *path, search3d_options *o, const char *want)
{
    transformer *t = model(path);
    cluster *c = a100();
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, c, A100, o, &err);
    cr_assert_null(r, "expected \"%s\"", want);
    cr_assert(strstr(err.msg, want), "got \"%s\", expected \"%s\"", err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
    cluster_free(c);
    transformer_free(t);
}

/* Each bad input gets its one line. */
Test(search3d, bad_input)
{
    search3d_options o;
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.tp = 8, o.pp = 3; /* 24 does not divide 64 */
    bad(GPT3, &o, "expected --gpus / (the other two) to be whole");
    search3d_options_init(&o);
    o.gpus = 40, o.global_batch = 64, o.tp = 8, o.pp = 5; /* 5 does not divide 96 layers */
    bad(GPT3, &o, "--pp");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 12, o.tp = 8, o.pp = 1; /* dp 8 */
    bad(GPT3, &o, "--global-batch: expected a multiple of the data-parallel replicas");
    bad(GPT3, &o, "a multiple of 8 would do) (got 12)");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.pp = 5; /* one dimension fixed: the search's line */
    bad(GPT3, &o, "--pp: expected a divisor of the 96 layers (got 5)");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.tp = 3;
    bad(GPT3, &o, "--tp: expected a divisor of the 8 devices of one server and of the "
        "model's 96 heads");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.pp = 32, o.interleave = 5; /* 32 x 5 > 96 layers */
    bad(GPT3, &o, "--gpus: expected a GPU count that tp");
    search3d_options_init(&o);
    o.gpus = 8, o.global_batch = 8; /* 175B on 8 GPUs */
    bad(GPT3, &o, "--gpus: expected a layout that fits the devices' memory");
    bad(GPT3, &o, "GPUs or more");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.recompute = RECOMPUTE_NONE, o.microbatch_size = 8;
    bad(GPT3, &o, "try --recompute full, a smaller --microbatch-size");
    search3d_options_init(&o);
    o.gpus = 64, o.global_batch = 64, o.schedule = SCHED_PIPEDREAM;
    bad(GPT3, &o, "expected a synchronous schedule for the layout search (got pipedream");
    search3d_options_init(&o);
    o.gpus = 12, o.global_batch = 64;
    bad(GPT3, &o, "--gpus: expected a multiple of the 8 devices per server (got 12)");
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

/* Llama-3-8B on 8..40 GPUs (8, 16, 32 and 40; a global batch of 640 that dp 5 divides),
 * 1e11 tokens at 2 USD per GPU-hour, within 60 days. */
Test(sweep3d, figures_deadline_and_front)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.global_batch = 640;
    const double tokens = 1e11, price = 2, deadline = 60;
    sweep3d_result r;
    plumb_err err = {{0}};
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 3, 40, tokens, price, deadline, &r, &err), 0,
                 "%s", err.msg);
    static const int want[] = {8, 16, 32, 40};
    cr_assert_eq(r.n, 4);
    int fewest = -1;
    for (int i = 0; i < r.n; i++) {
        const sweep3d_point *p = &r.pts[i];
        cr_assert_eq(p->gpus, want[i]);
        cr_assert(p->ok, "%d GPUs: %s", p->gpus, p->why);
        double tps = p->best.tokens_per_s;
        cr_assert_gt(tps, 0);
        cr_assert_eq(p->best.d.tp * p->best.d.pp * p->best.d.dp, p->gpus);
        cr_assert_float_eq(p->days, tokens / tps / 86400, 1e-9 * p->days);
        cr_assert_float_eq(p->cost, p->days * 24 * p->gpus * price, 1e-9 * p->cost);
        cr_assert_float_eq(p->usd_per_million, price * p->gpus / 3600 / tps * 1e6,
                           1e-9 * p->usd_per_million);
        if (fewest < 0 && p->days <= deadline) fewest = p->gpus;
        int dominated = 0;
        for (int j = 0; j < r.n; j++)
            if (j != i && r.pts[j].ok && r.pts[j].days <= p->days && r.pts[j].cost <= p->cost &&
                (r.pts[j].days < p->days || r.pts[j].cost < p->cost))
                dominated = 1;
        cr_assert_eq(p->pareto, !dominated, "%d GPUs", p->gpus);
    }
    cr_assert_eq(r.deadline_gpus, fewest);
    /* the sweep's best on 16 GPUs is the search's best on 16 (same simulated count) */
    search3d_options so = o;
    so.gpus = 16, so.simulate = SWEEP3D_SIMULATE;
    search3d_result *s = search3d_run(t, c, A100, &so, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_float_eq(s->ranked[0].tokens_per_s, r.pts[1].best.tokens_per_s, 1e-9);
    search3d_free(s);
    size_t len = 0;
    char *svg = sweep3d_svg(&r, &len);
    cr_assert_not_null(svg);
    cr_assert_eq(strlen(svg), len);
    cr_assert_eq(count_of(svg, "<circle class=\"point"), 4);
    int front = 0;
    for (int i = 0; i < r.n; i++) front += r.pts[i].pareto;
    cr_assert_eq(count_of(svg, "<circle class=\"point front\""), front);
    cr_assert_eq(count_of(svg, "class=\"deadline\""), 1);
    cr_assert(strstr(svg, "32 GPUs"));
    cr_assert(strstr(svg, "</svg>"));
    free(svg);
    cJSON *j = sweep3d_to_json(&r);
    cr_assert_not_null(j);
    cJSON_Delete(j);
    sweep3d_result_free(&r);
    cluster_free(c);
    transformer_free(t);
}

/* GPT-3 fits no layout on 8 or 16 GPUs: those counts say why; none at all is bad input. */
Test(sweep3d, counts_that_do_not_fit)
{
    transformer *t = model(GPT3);
    cluster *c = a100();
    search3d_options o;
    search3d_options_init(&o);
    o.global_batch = 64;
    sweep3d_result r;
    plumb_err err = {{0}};
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 64, 0, 0, 0, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, 4);
    cr_assert(!r.pts[0].ok && !r.pts[1].ok);
    cr_assert(strstr(r.pts[0].why, "expected a layout that fits"), "%s", r.pts[0].why);
    cr_assert(r.pts[3].ok);
    cr_assert_lt(r.pts[3].days, 0);
    cr_assert_null(sweep3d_svg(&r, &(size_t){0})); /* no token budget: nothing to plot */
    sweep3d_result_free(&r);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 16, 0, 0, 0, &r, &err), -1);
    cr_assert(strstr(err.msg, "expected a layout that fits"), "%s", err.msg);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 1, 7, 0, 0, 0, &r, &err), -1);
    cr_assert(strstr(err.msg, "--gpus: expected a range holding a whole server"), "%s",
              err.msg);
    cr_assert_eq(sweep3d_run(t, c, A100, &o, 8, 64, 0, 0, 30, &r, &err), -1);
    cr_assert(strstr(err.msg, "--deadline: expected --tokens N"), "%s", err.msg);
    cluster_free(c);
    transformer_free(t);
}

/* The runtime of plan --model's search (tp overlap, the parameter all-gather apart, p2p
 * sync, gradients and optimizer state in bf16), the precision and a fixed schedule, each
 * swept over Llama-3-8B on 8 and 16 H100s:
 * every count's best is the search's best on that count alone with the same options (same
 * layout, same simulated iteration), and each writer names the runtime. */
Test(sweep3d, runtime_settings_as_the_search)
{
    transformer *t = model(LLAMA8B);
    plumb_err err = {{0}};
    cluster *c = cluster_load(H100, &err);
    cr_assert_not_null(c, "%s", err.msg);
    enum { F32 = DEV_FP32, B16 = DEV_BF16 };
    static const struct { int tpo, opg, sync, prec, sched, gred, ostate; const char *text; }
    set[] = {
        {TP_OVERLAP_FULL, 0, 0, B16, SEARCH3D_FREE, F32, F32, "tp overlap full (tp > 1)"},
        {TP_OVERLAP_BACKWARD, 0, 0, B16, SEARCH3D_FREE, F32, F32, "tp overlap backward"},
        {TP_OVERLAP_NONE, 1, 0, B16, SEARCH3D_FREE, F32, F32, "parameter all-gather under "
         "the forward (zero 1)"},
        {TP_OVERLAP_NONE, 0, 1, B16, SEARCH3D_FREE, F32, F32, "p2p sync"},
        {TP_OVERLAP_FULL, 1, 1, DEV_FP16, SCHED_ZB_H1, F32, F32, "tp overlap full (tp > 1), "
         "parameter all-gather under the forward (zero 1), p2p sync"},
        {TP_OVERLAP_NONE, 0, 0, B16, SEARCH3D_FREE, B16, B16, "runtime of every layout: "
         "gradients bf16, optimizer state bf16"},
        {TP_OVERLAP_NONE, 1, 0, B16, SEARCH3D_FREE, B16, F32, "parameter all-gather under "
         "the forward (zero 1), gradients bf16"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        search3d_options o;
        search3d_options_init(&o);
        o.global_batch = 128;
        o.tp_overlap = (plan_tp_overlap)set[i].tpo;
        o.overlap_param_gather = set[i].opg;
        o.p2p_sync = set[i].sync;
        o.precision = (dev_precision)set[i].prec;
        o.schedule = set[i].sched;
        o.grad_reduce = (dev_precision)set[i].gred;
        o.optimizer_state = (dev_precision)set[i].ostate;
        sweep3d_result r;
        cr_assert_eq(sweep3d_run(t, c, H100, &o, 8, 16, 1e11, 0, 0, &r, &err), 0, "setting "
                     "%zu: %s", i, err.msg);
        cr_assert_eq(r.n, 2);
        for (int k = 0; k < r.n; k++) {
            const search3d_cand *b = &r.pts[k].best;
            search3d_options so = o;
            so.gpus = r.pts[k].gpus;
            so.simulate = SWEEP3D_SIMULATE * (o.p2p_sync ? SEARCH3D_SYNC_FACTOR : 1);
            search3d_result *s = search3d_run(t, c, H100, &so, &err);
            cr_assert_not_null(s, "%s", err.msg);
            const search3d_cand *w = &s->ranked[0];
            cr_expect(w->d.tp == b->d.tp && w->d.pp == b->d.pp && w->d.dp == b->d.dp &&
                      w->d.interleave == b->d.interleave && w->d.schedule == b->d.schedule &&
                      w->o.microbatch_size == b->o.microbatch_size &&
                      w->o.recompute == b->o.recompute && w->o.zero == b->o.zero &&
                      w->o.sequence_parallel == b->o.sequence_parallel,
                      "setting %zu, %d GPUs: the sweep's best is not the search's", i,
                      r.pts[k].gpus);
            cr_expect_eq(w->iteration_s, b->iteration_s, "setting %zu, %d GPUs: %.6f s "
                         "searched, %.6f s swept", i, r.pts[k].gpus, w->iteration_s,
                         b->iteration_s);
            /* the winner's plan runs the setting where it applies */
            cr_expect_eq(s->best->tp_overlap, s->best->tp > 1 ? o.tp_overlap : TP_OVERLAP_NONE);
            cr_expect_eq(s->best->overlap_param_gather, o.overlap_param_gather &&
                         s->best->zero == 1);
            cr_expect_eq(s->best->p2p_sync, o.p2p_sync);
            cr_expect_eq(s->best->precision, o.precision);
            cr_expect_eq(s->best->grad_reduce, o.grad_reduce);
            cr_expect_eq(s->best->optimizer_state, o.optimizer_state);
            if (o.schedule != SEARCH3D_FREE) cr_expect_eq(b->d.schedule, o.schedule);
            search3d_free(s);
        }
        char buf[1 << 14] = "";
        FILE *f = fmemopen(buf, sizeof buf - 1, "w");
        cr_assert_not_null(f);
        sweep3d_print(&r, f);
        fclose(f);
        cr_expect(strstr(buf, set[i].text), "setting %zu: the table lacks \"%s\":\n%s", i,
                  set[i].text, buf);
        char *svg = sweep3d_svg(&r, &(size_t){0});
        cr_assert_not_null(svg);
        cr_expect(strstr(svg, set[i].text), "setting %zu: the plot lacks \"%s\"", i,
                  set[i].text);
        free(svg);
        cJSON *j = sweep3d_to_json(&r);
        cr_assert_not_null(j);
        const char *tpo = cJSON_GetStringValue(cJSON_GetObjectItem(j, "tp_overlap"));
        const char *p2p = cJSON_GetStringValue(cJSON_GetObjectItem(j, "p2p"));
        cr_expect(tpo && !strcmp(tpo, plan_tp_overlap_name(o.tp_overlap)), "setting %zu", i);
        cr_expect(cJSON_IsBool(cJSON_GetObjectItem(j, "overlap_param_gather")) &&
                  cJSON_IsTrue(cJSON_GetObjectItem(j, "overlap_param_gather")) ==
                      o.overlap_param_gather, "setting %zu", i);
        cr_expect(p2p && !strcmp(p2p, o.p2p_sync ? "sync" : "overlap"), "setting %zu", i);
        const char *gr = cJSON_GetStringValue(cJSON_GetObjectItem(j, "grad_reduce"));
        const char *os = cJSON_GetStringValue(cJSON_GetObjectItem(j, "optimizer_state"));
        cr_expect(o.grad_reduce == DEV_BF16 ? gr && !strcmp(gr, "bf16") : !gr, "setting %zu: "
                  "grad_reduce %s", i, gr ? gr : "absent");
        cr_expect(o.optimizer_state == DEV_BF16 ? os && !strcmp(os, "bf16") : !os, "setting "
                  "%zu: optimizer_state %s", i, os ? os : "absent");
        cJSON_Delete(j);
        sweep3d_result_free(&r);
    }
    cluster_free(c);
    transformer_free(t);
}

/* The combinations plan --model refuses, refused by the sweep before any count is searched,
 * with plan's lines. */
Test(sweep3d, bad_runtime_combinations)
{
    transformer *t = model(LLAMA8B);
    cluster *c = a100();
    static const struct { int zero, opg, tp, tpo, sync, sched, rc, ckpt; const char *line; }
    bad[] = {
        {0, 1, 0, 0, 0, SEARCH3D_FREE, SEARCH3D_FREE, -1,
         "--overlap-param-gather: belongs to --zero 1 (the distributed optimizer's parameter "
         "all-gather)"},
        {SEARCH3D_FREE, 0, 1, TP_OVERLAP_FULL, 0, SEARCH3D_FREE, SEARCH3D_FREE, -1,
         "--tp-overlap: expected --tp 2 or more (no tensor-parallel collectives to overlap) "
         "(got --tp 1)"},
        {SEARCH3D_FREE, 0, 0, 0, 1, SCHED_ZB_V, SEARCH3D_FREE, -1,
         "--p2p: expected overlap with schedule zb-v (its V placement deadlocks"},
        {SEARCH3D_FREE, 0, 0, 0, 1, SCHED_DUALPIPEV, SEARCH3D_FREE, -1,
         "--p2p: expected overlap with schedule dualpipev"},
        {SEARCH3D_FREE, 0, 0, 0, 0, SCHED_2BW, SEARCH3D_FREE, -1,
         "--schedule: expected a synchronous schedule for the layout search (got 2bw"},
        {SEARCH3D_FREE, 0, 0, 0, 0, SEARCH3D_FREE, RECOMPUTE_SELECTIVE, 2,
         "--checkpoint-layers: belongs to --recompute full"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        search3d_options o;
        search3d_options_init(&o);
        o.global_batch = 64;
        o.zero = bad[i].zero, o.overlap_param_gather = bad[i].opg, o.tp = bad[i].tp;
        o.tp_overlap = (plan_tp_overlap)bad[i].tpo, o.p2p_sync = bad[i].sync;
        o.schedule = bad[i].sched, o.recompute = bad[i].rc, o.checkpoint_layers = bad[i].ckpt;
        sweep3d_result r;
        plumb_err err = {{0}};
        cr_expect_eq(sweep3d_run(t, c, A100, &o, 8, 16, 1e11, 0, 0, &r, &err), -1,
                     "case %zu: swept", i);
        cr_expect(strstr(err.msg, bad[i].line) == err.msg, "case %zu: \"%s\"", i, err.msg);
        cr_expect_eq(r.n, 0);
    }
    cluster_free(c);
    transformer_free(t);
}

/* The plot names the loss of every layout where it is fused (--cross-entropy te or native),
 * in the table's words, at the foot beside the runtime, and nothing at the default: a
 * sweep of two counts written by hand (the writer reads only the points and the options). */
Test(sweep3d, plot_names_the_loss)
{
    sweep3d_point pts[2];
    memset(pts, 0, sizeof pts);
    for (int i = 0; i < 2; i++) {
        pts[i].gpus = 8 << i;
        pts[i].ok = 1;
        pts[i].days = 20.0 / (1 << i);
        pts[i].cost = 1000.0 + 50 * i;
        pts[i].pareto = 1;
    }
    sweep3d_result r;
    memset(&r, 0, sizeof r);
    r.n = 2;
    r.pts = pts;
    r.tokens = 1e11;
    r.deadline_gpus = -1;
    snprintf(r.model, sizeof r.model, "llama3-8b");
    snprintf(r.cluster, sizeof r.cluster, "dgx-h100");
    search3d_options_init(&r.opts);
    static const struct { int ce, sync; const char *want; } set[] = {
        {LLM_CE_UNFUSED, 0, NULL},
        {LLM_CE_UNFUSED, 1, "runtime of every layout: p2p sync</text>"},
        {LLM_CE_TE, 0, ">loss of every layout: cross-entropy te</text>"},
        {LLM_CE_NATIVE, 1, ">runtime of every layout: p2p sync; loss of every layout: "
         "cross-entropy native</text>"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        r.opts.cross_entropy = set[i].ce;
        r.opts.p2p_sync = set[i].sync;
        char *svg = sweep3d_svg(&r, &(size_t){0});
        cr_assert_not_null(svg);
        if (set[i].want) cr_expect(strstr(svg, set[i].want), "setting %zu:\n%s", i, svg);
        else cr_expect_null(strstr(svg, "class=\"runtime\""), "setting %zu:\n%s", i, svg);
        cr_expect_eq(count_of(svg, "cross-entropy"), set[i].ce != LLM_CE_UNFUSED,
                     "setting %zu", i);
        free(svg);
    }
}
