/* test_sim_sync.c: where synchronous point-to-point (a plan's "p2p": "sync",
 * sim/engine_sync.c) puts an interleaved schedule's sends and receives, against a replay
 * written here of the runtime it models: Megatron-LM's interleaved 1F1B loop of 2022
 * (megatron/schedules.py at 2e90a342f5), whose every exchange is one blocking batch:
 *  - warmup forwards F(0 .. w-1), w = min(2 (p - r - 1) + (V - 1) p, M V): after F(k) one
 *    batch sends F(k)'s output and receives F(k + 1)'s input; after the last warmup forward
 *    of a rank with a steady state the same batch also receives B(0)'s gradient;
 *  - when w = M V (every forward in the warmup) the gradient for B(0) is received after the
 *    last forward's send;
 *  - steady pairs F(w + t), B(t) back to back, then one batch: F(w + t)'s output and B(t)'s
 *    input gradient sent, F(w + t + 1)'s input and B(t + 1)'s gradient received;
 *  - cooldown B(t): B(t)'s gradient sent and B(t + 1)'s received.
 * Each comm action's batch is the gap after the computation it follows (0: before the
 * first). The simulator must also run every such layout, including M = p, where a rank
 * whose warmup holds every forward used to be treated as pairing its last forward with its
 * first backward and deadlocked. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/transformer.h"
#include "planner/layout3d.h"
#include "sim/engine_impl.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "planfix.h"

#define A100 "profiles/clusters/dgx-a100-80g.json"
#define GPT17 "examples/llm/megatron/gpt-1.7b.json"

static int is_comm(int k)
{
    return k == ACT_SEND_F || k == ACT_SEND_B || k == ACT_RECV_F || k == ACT_RECV_B;
}

/* One worker's computations of one iteration, as the replay sees them. */
typedef struct comps {
    int n, nf, nb;
    int f_at[256], b_at[256];    /* k-th F / t-th B of the iteration: computation index */
    int f_st[256], f_mb[256], b_st[256], b_mb[256];
} comps;

/* The expected gap of comm action a on a worker of pipeline rank r with warmup w; -2 when
 * the action is not one the replay knows (a test failure). */
static int megatron_gap(const comps *c, const action *a, int w)
{
    int total = c->nf, all_warmup = w >= total;
    if (a->kind == ACT_SEND_F || a->kind == ACT_RECV_F) {
        for (int k = 0; k < c->nf; k++) {
            if (c->f_st[k] != a->stage || c->f_mb[k] != a->microbatch) continue;
            if (a->kind == ACT_SEND_F)  /* a steady forward's output leaves after its B */
                return !all_warmup && k >= w ? c->b_at[k - w] + 1 : c->f_at[k] + 1;
            if (k == 0) return c->f_at[0];  /* before the iteration's first forward */
            if (k <= w) return c->f_at[k - 1] + 1;
            return c->b_at[k - w - 1] + 1;
        }
    } else {
        for (int t = 0; t < c->nb; t++) {
            if (c->b_st[t] != a->stage || c->b_mb[t] != a->microbatch) continue;
            if (a->kind == ACT_SEND_B) return c->b_at[t] + 1;
            if (t > 0) return c->b_at[t - 1] + 1;
            return all_warmup ? c->f_at[total - 1] + 1 : c->f_at[w - 1] + 1;
        }
    }
    return -2;
}

/* Megatron-LM's warmup of rank r, written from its loop (M a multiple of p). */
static int megatron_warmup(int p, int V, int M, int r)
{
    int w = 2 * (p - r - 1) + (V - 1) * p;
    return w > M * V ? M * V : w;
}

/* Checks every comm action of every worker of the p x V interleaved schedule with M
 * microbatches per replica, reps replicas and `iters` iterations. */
static void check_layout(int p, int V, int M, int reps, int iters)
{
    int replicas[64], nst = p * V;
    for (int i = 0; i < nst; i++) replicas[i] = reps;
    sched_spec sp = {.kind = SCHED_INTERLEAVED, .nstages = nst, .chunks = V,
                     .microbatches = M * reps, .iterations = iters,
                     .replicas = reps > 1 ? replicas : NULL};
    plumb_err e;
    schedule *s = schedule_generate(&sp, &e);
    cr_assert_not_null(s, "%s", e.msg);
    schedule b;
    cr_assert_eq(eng_sync_order(s, &b), 0);
    for (int r = 0; r < p; r++)
        for (int j = 0; j < reps; j++) {
            int wk = s->stage_workers[s->stage_first[r] + j];
            int w = megatron_warmup(p, V, M, r);
            for (int it = 0; it < iters; it++) {
                /* the iteration's computations, indexed among the worker's non-comm
                 * actions as the batches are */
                comps c = {0};
                for (int i = 0, ci = 0; i < b.len[wk]; i++) {
                    const action *a = &b.acts[wk][i];
                    if (is_comm(a->kind)) continue;
                    if (a->microbatch >= 0 && a->microbatch / (M * reps) == it) {
                        if (a->kind == ACT_F) {
                            c.f_at[c.nf] = ci, c.f_st[c.nf] = a->stage;
                            c.f_mb[c.nf++] = a->microbatch;
                        } else if (a->kind == ACT_B) {
                            c.b_at[c.nb] = ci, c.b_st[c.nb] = a->stage;
                            c.b_mb[c.nb++] = a->microbatch;
                        }
                    }
                    ci++;
                }
                cr_assert_eq(c.nf, M * V);
                cr_assert_eq(c.nb, M * V);
                for (int i = 0, ci = 0; i < b.len[wk]; i++) {
                    const action *a = &b.acts[wk][i];
                    if (!is_comm(a->kind)) {
                        ci++;
                        continue;
                    }
                    if (a->microbatch / (M * reps) != it) continue;
                    int want = megatron_gap(&c, a, w);
                    cr_expect_eq(ci, want,
                                 "p %d V %d M %d reps %d: rank %d replica %d iteration %d: "
                                 "kind %d of stage %d microbatch %d in the batch after "
                                 "computation %d, Megatron-LM's after %d (warmup %d)",
                                 p, V, M, reps, r, j, it, a->kind, a->stage, a->microbatch,
                                 ci - 1, want - 1, w);
                }
            }
        }
    eng_sync_order_free(&b);
    schedule_free(s);
}

Test(sim_sync, interleaved_batches_are_megatron_s)
{
    static const int ps[] = {2, 3, 4, 8}, vs[] = {2, 3, 4}, ms[] = {1, 2, 3};
    for (size_t a = 0; a < sizeof ps / sizeof *ps; a++)
        for (size_t v = 0; v < sizeof vs / sizeof *vs; v++)
            for (size_t m = 0; m < sizeof ms / sizeof *ms; m++)
                for (int reps = 1; reps <= 2; reps++)
                    check_layout(ps[a], vs[v], ms[m] * ps[a], reps, 1 + (reps == 2));
}

/* GPT 1.7B on `gpus` A100s, tp 1, pp p, dp gpus / p, interleaved V, per_rank microbatches
 * per rank and replica (1: M = p); the iteration in seconds, or -1 when the layout is
 * refused. */
static double iteration_on(int gpus, int p, int V, int per_rank, int sync, char *msg, size_t n)
{
    plumb_err e;
    transformer *t = transformer_load(GPT17, &e);
    cluster *c = cluster_load(A100, &e);
    cr_assert(t && c, "%s", e.msg);
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = gpus, o.tp = 1, o.pp = p, o.dp = gpus / p;
    o.global_batch = o.dp * p * per_rank;
    o.microbatch_size = 1;
    o.interleave = V;
    o.p2p_sync = sync;
    double it = plan_iteration(layout3d_build(t, c, A100, &o, &e), &e, msg, n);
    cluster_free(c);
    transformer_free(t);
    return it;
}

/* Every M = p layout runs under sync (each deadlocked before), takes longer than with
 * overlapped transfers, and so do the layouts with more microbatches. */
Test(sim_sync, interleaved_runs_at_as_many_microbatches_as_ranks)
{
    static const int pv[][2] = {{2, 2}, {4, 2}, {4, 3}, {4, 6}, {8, 3}};
    for (size_t i = 0; i < sizeof pv / sizeof *pv; i++)
        for (int per = 1; per <= 2; per++) {
            char msg[1100] = "";
            double ov = iteration_on(8, pv[i][0], pv[i][1], per, 0, msg, sizeof msg);
            double sy = iteration_on(8, pv[i][0], pv[i][1], per, 1, msg, sizeof msg);
            cr_expect(ov > 0 && sy > 0, "pp %d V %d M %d: %s", pv[i][0], pv[i][1],
                      per * pv[i][0], msg);
            cr_expect(sy >= ov, "pp %d V %d M %d: sync %g s faster than overlapped %g s",
                      pv[i][0], pv[i][1], per * pv[i][0], sy, ov);
        }
}

/* Many replicas are simulated folded by plumb plan --model and the search (one pipeline
 * and the rings' other members: sim_run_folded, whose IR's fields count replicas it does
 * not lay out); under sync its iteration is sim_run's, which lays out every replica. */
Test(sim_sync, interleaved_folded_replicas_pair_as_one_pipeline)
{
    plumb_err e;
    transformer *t = transformer_load(GPT17, &e);
    cluster *c = cluster_load(A100, &e);
    cr_assert(t && c, "%s", e.msg);
    for (int per = 1; per <= 3; per++) {
        layout3d_options o;
        layout3d_options_init(&o);
        o.gpus = 512, o.tp = 8, o.pp = 4, o.dp = 16;
        o.global_batch = 16 * 4 * per;
        o.microbatch_size = 1;
        o.interleave = 3;
        o.p2p_sync = 1;
        plan *pl = layout3d_build(t, c, A100, &o, &e);
        cr_assert_not_null(pl, "%s", e.msg);
        sim_report *full = sim_run(pl, NULL, &e), *fold = sim_run_folded(pl, NULL, 0, &e);
        cr_assert(full && fold, "%s", e.msg);
        cr_expect(fabs(fold->iteration_s - full->iteration_s) <= 1e-9 * full->iteration_s,
                  "M %d: folded %.9g s, every replica %.9g s", 4 * per, fold->iteration_s,
                  full->iteration_s);
        sim_report_free(full);
        sim_report_free(fold);
        plan_free(pl);
    }
    cluster_free(c);
    transformer_free(t);
}

/* --- the asynchronous kinds (pipedream, 2bw) on stages of different replica counts ------ */

/* The batch (gap among the worker's computations, 0: before the first) a 1F1B loop with
 * blocking batched exchanges gives comm action a of worker list acts[0 .. len), written
 * here from the loop: F, one exchange, B, one exchange, then the step (and the stage's
 * all-reduce), which never drain the pipeline; a SEND leaves in the exchange right after
 * the computation that made its data, a RECV arrives in the exchange right after the
 * forward or backward before the one that takes it (before the first computation when
 * none precedes it). -2: not found (a test failure). */
static int loop_gap(const action *acts, int len, const action *a)
{
    int send = a->kind == ACT_SEND_F || a->kind == ACT_SEND_B;
    int want = a->kind == ACT_SEND_F || a->kind == ACT_RECV_F ? ACT_F : ACT_B;
    int last_fb = -1;  /* computation index of the latest F or B seen */
    for (int i = 0, ci = 0; i < len; i++) {
        const action *c = &acts[i];
        if (is_comm(c->kind)) continue;
        if (c->kind == want && c->stage == a->stage && c->microbatch == a->microbatch)
            return send ? ci + 1 : last_fb + 1;
        if (c->kind == ACT_F || c->kind == ACT_B) last_fb = ci;
        ci++;
    }
    return -2;
}

/* Checks every comm action of the 2-stage `kind` schedule with replicas r0, r1 and M
 * microbatches against loop_gap. */
static void check_async_layout(sched_kind kind, int r0, int r1, int M, int iters)
{
    int replicas[2] = {r0, r1};
    sched_spec sp = {.kind = kind, .nstages = 2, .chunks = 1, .microbatches = M,
                     .iterations = iters, .replicas = replicas};
    plumb_err e;
    schedule *s = schedule_generate(&sp, &e);
    cr_assert_not_null(s, "%s", e.msg);
    schedule b;
    cr_assert_eq(eng_sync_order(s, &b), 0);
    for (int w = 0; w < b.nworkers; w++)
        for (int i = 0, ci = 0; i < b.len[w]; i++) {
            const action *a = &b.acts[w][i];
            if (!is_comm(a->kind)) {
                ci++;
                continue;
            }
            int want = loop_gap(b.acts[w], b.len[w], a);
            cr_expect_eq(ci, want, "kind %d replicas %d,%d M %d: worker %d: kind %d of stage "
                         "%d microbatch %d in the batch after computation %d, the 1F1B "
                         "loop's after %d", kind, r0, r1, M, w, a->kind, a->stage,
                         a->microbatch, ci - 1, want - 1);
        }
    eng_sync_order_free(&b);
    schedule_free(s);
}

/* The step between a backward and the next forward of pipedream and 2bw was a batch point:
 * the last stage's gradient send and next input's receive were two batches, the step
 * between them waiting for the send, and 2 replicas of stage 0 over 1 of stage 1
 * deadlocked (the vgg16-hybrid-pipedream.json shape, smaller). */
Test(sim_sync, async_batches_are_the_1f1b_loop_s)
{
    static const int rr[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {2, 3}, {3, 2}, {3, 1}, {4, 3}};
    static const sched_kind kinds[] = {SCHED_PIPEDREAM, SCHED_2BW};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof rr / sizeof *rr; i++)
            for (int per = 1; per <= 2; per++)
                for (int it = 1; it <= 2; it++)
                    check_async_layout(kinds[k], rr[i][0], rr[i][1], per * rr[i][0] * rr[i][1],
                                       it);
}

/* The synthetic `kind` plan of nst stages with replicas reps[] (stage s on the next
 * reps[s] devices of one server) and M microbatches. The caller frees it with plan_free. */
static plan *async_plan(sched_kind kind, const int *reps, int nst, int M, int sync)
{
    sim_synth sy;
    sim_synth_init(&sy);
    sy.schedule = kind;
    sy.nstages = nst;
    sy.replicas = 1;
    sy.microbatches = M;
    sy.servers = 1;
    sy.devices_per_server = 0;
    for (int st = 0; st < nst; st++) sy.devices_per_server += reps[st];
    plumb_err e;
    plan *pl = sim_synth_plan(&sy, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    for (int st = 0, d = 0; st < nst; st++) {
        free(pl->stages[st].devices);
        pl->stages[st].devices = malloc((size_t)reps[st] * sizeof *pl->stages[st].devices);
        cr_assert_not_null(pl->stages[st].devices);
        pl->stages[st].replicas = reps[st];
        for (int j = 0; j < reps[st]; j++) pl->stages[st].devices[j] = d++;
    }
    pl->p2p_sync = sync;
    return pl;
}

/* The iteration of the synthetic 2-stage `kind` plan with replicas r0, r1 and M
 * microbatches, or -1 with msg when the run is refused. */
static double async_iteration(sched_kind kind, int r0, int r1, int M, int sync, char *msg,
                              size_t n)
{
    int reps[2] = {r0, r1};
    plumb_err e;
    return plan_iteration(async_plan(kind, reps, 2, M, sync), &e, msg, n);
}

/* Stage 0 on up to twice stage 1's replicas runs under sync (2,1 and 2,3 deadlocked),
 * no faster than with overlapped transfers. */
Test(sim_sync, async_unequal_replicas_run)
{
    static const int rr[][2] = {{2, 1}, {2, 3}, {3, 2}, {4, 3}, {4, 2}, {1, 2}};
    static const sched_kind kinds[] = {SCHED_PIPEDREAM, SCHED_2BW};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof rr / sizeof *rr; i++) {
            int M = rr[i][0] * rr[i][1];
            char msg[1100] = "";
            double ov = async_iteration(kinds[k], rr[i][0], rr[i][1], M, 0, msg, sizeof msg);
            double sy = async_iteration(kinds[k], rr[i][0], rr[i][1], M, 1, msg, sizeof msg);
            cr_expect(ov > 0 && sy > 0, "kind %d replicas %d,%d: %s", kinds[k], rr[i][0],
                      rr[i][1], msg);
            cr_expect(sy >= ov * (1 - 1e-12), "kind %d replicas %d,%d: sync %g s faster than "
                      "overlapped %g s", kinds[k], rr[i][0], rr[i][1], sy, ov);
        }
}

/* What the engine does with blocking transfers on every replica shape of 2 and 3 stages (1
 * to 5 replicas each, at most 16 devices, M a multiple of every count, at least twice the
 * devices) is what
 * plan_sync_replicas_check says: it refuses exactly the shapes that deadlock (stage 0 on 15
 * replicas over 1, vgg16-hybrid-pipedream.json, among them) and the others run. */
Test(sim_sync, async_replica_rule_refuses_what_deadlocks)
{
    static const sched_kind kinds[] = {SCHED_PIPEDREAM, SCHED_2BW};
    int refused = 0, ran = 0;
    for (size_t k = 0; k < 2; k++)
        for (int nst = 2; nst <= 3; nst++)
            for (int code = 0; code < 125; code++) {
                int reps[3] = {1 + code % 5, 1 + code / 5 % 5, 1 + code / 25}, sum = 0, M = 1;
                if (nst == 2 && reps[2] > 1) continue;
                for (int st = 0; st < nst; st++) {
                    int a = M, b = reps[st];
                    while (b) { int t = a % b; a = b; b = t; }
                    M = M / a * reps[st];
                    sum += reps[st];
                }
                if (sum > 16) continue;
                for (int l = M; M < 2 * sum;) M += l;  /* 2bw: a minibatch covers the in-flight */
                plan *pl = async_plan(kinds[k], reps, nst, M, 1);
                plumb_err e, re;
                err_clear(&e);
                err_clear(&re);
                int refuse = plan_sync_replicas_check(pl, kinds[k], "p.json", "p2p", &re) != 0;
                sim_report *rep = sim_run(pl, NULL, &e);
                int dead = !rep && strstr(e.msg, "deadlock") != NULL;
                cr_expect(rep || dead, "%s", e.msg);
                cr_expect_eq(refuse, dead, "kind %d replicas %d,%d,%d (%d stages): rule %s, "
                             "engine %s", kinds[k], reps[0], reps[1], reps[2], nst,
                             refuse ? re.msg : "runs", rep ? "runs" : e.msg);
                refused += refuse, ran += !refuse;
                sim_report_free(rep);
                plan_free(pl);
            }
    cr_expect(refused > 10 && ran > 100, "%d refused, %d ran", refused, ran);
}

/* The file of the bad-input sweep with "p2p": "sync": one line naming the field. */
Test(sim_sync, async_replica_rule_names_the_field)
{
    plumb_err e;
    plan *pl = plan_load("examples/plans/vgg16-hybrid-pipedream.json", &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_expect_eq(plan_validate(pl, "v.json", &e), 0, "%s", e.msg);
    pl->p2p_sync = 1;
    err_clear(&e);
    cr_expect_neq(plan_validate(pl, "v.json", &e), 0);
    cr_expect(strstr(e.msg, "v.json") && strstr(e.msg, "p2p") &&
              strstr(e.msg, "expected overlap with schedule pipedream") &&
              strstr(e.msg, "stage 0's 15 replicas") && !strchr(e.msg, '\n'), "%s", e.msg);
    pl->p2p_sync = 0;
    cr_expect_eq(plan_sync_replicas_check(pl, SCHED_1F1B_FLUSH, NULL, "p2p", &e), 0);
    plan_free(pl);
}
