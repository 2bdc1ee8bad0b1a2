/* test_native_rr.c: the planner's price of stages with unequal replica counts
 * (planner/native_rr.c). Microbatch g of a stage of r replicas runs on replica g % r; each
 * replica runs its microbatches in the generator's order (gpipe: every forward then every
 * backward; 1F1B: ceil(W / r) - 1 warmup forwards, W the devices of this stage and those
 * after it). Checked three ways: the steady period of a pair of stages against its closed
 * form (derived in docs/planner-native.md, "Unequal replica counts"), the simulator's
 * iteration against a replay written here (a recursion over each replica's actions, not the
 * planner's sweep nor the simulator's engine) on small synthetic plans, and the planner's
 * estimate against the simulator on shipped profiles whose plans have unequal counts.
 * Then the estimate's other terms on synthetic plans whose answer the test works out by
 * hand or with its replay (docs/planner-native.md, section 8): a server's port, the fill
 * when a port binds, equal counts replayed, each stage's all-reduce after its own last
 * backward; and a straight pipeline's memory, read from its schedule. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "core/schedule.h"
#include "planner/native.h"
#include "planner/native_impl.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "planfix.h"
#include "shipped.h"
#include "synth.h"

/* --- the test's own replay ------------------------------------------------------------ */

typedef struct ref {
    int S, n, hold_all;
    const int *reps;
    const double *f, *b, *x;
    const double *late;   /* [n] or NULL: microbatch g's activation into stage 1 that much
                             later than x[0] */
    int nw;
    int *wst, *wrep;      /* [nw] stage and replica index of each worker */
    int *len, **act;      /* [nw] each worker's actions: +(g + 1) forward, -(g + 1) backward */
    double **end;         /* [nw][len] end times, < 0 unknown */
    int *fpos, *bpos;     /* [S n] where stage s's forward / backward of g sits in its
                             worker's list */
} ref;

/* The end of worker w's action i: the later of its previous action's end and the arrival
 * of its input, plus its cost (recursion over the dependencies, memoised). */
static double ref_end(ref *R, int w, int i)
{
    if (R->end[w][i] >= 0) return R->end[w][i];
    int s = R->wst[w], v = R->act[w][i], g = (v > 0 ? v : -v) - 1;
    double t = i > 0 ? ref_end(R, w, i - 1) : 0, in = 0;
    if (v > 0 && s > 0) {
        int q = R->reps[s - 1], wp = 0;
        for (int k = 0; k < s - 1; k++) wp += R->reps[k];
        in = ref_end(R, wp + g % q, R->fpos[(s - 1) * R->n + g]) + R->x[s - 1];
        if (s == 1 && R->late) in += R->late[g];
    }
    if (v < 0 && s + 1 < R->S) {
        int q = R->reps[s + 1], wn = 0;
        for (int k = 0; k <= s; k++) wn += R->reps[k];
        in = ref_end(R, wn + g % q, R->bpos[(s + 1) * R->n + g]) + R->x[s];
    }
    if (in > t) t = in;
    t += v > 0 ? R->f[s] : R->b[s];
    return R->end[w][i] = t;
}

/* One flushed iteration of n microbatches on reps[s] replicas (devices), as the
 * generator orders them, microbatch g's activation into stage 1 late[g] later (NULL:
 * none): the last action's end; stage_end[s] (NULL: not asked) the end of stage s's last
 * action. */
static double ref_iteration_late(int S, const int *reps, const double *f, const double *b,
                                 const double *x, const double *late, int n, int hold_all,
                                 double *stage_end)
{
    ref R = {S, n, hold_all, reps, f, b, x, late, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    for (int s = 0; s < S; s++) R.nw += reps[s];
    R.wst = calloc(R.nw, sizeof *R.wst), R.wrep = calloc(R.nw, sizeof *R.wrep);
    R.len = calloc(R.nw, sizeof *R.len), R.act = calloc(R.nw, sizeof *R.act);
    R.end = calloc(R.nw, sizeof *R.end);
    R.fpos = calloc((size_t)S * n, sizeof *R.fpos), R.bpos = calloc((size_t)S * n, sizeof *R.bpos);
    cr_assert(R.wst && R.wrep && R.len && R.act && R.end && R.fpos && R.bpos);
    int w = 0;
    for (int s = 0; s < S; s++) {
        int W = 0;
        for (int t = s; t < S; t++) W += reps[t];
        for (int j = 0; j < reps[s]; j++, w++) {
            int mine[4096], cnt = 0;
            for (int g = j; g < n; g += reps[s]) mine[cnt++] = g;
            R.wst[w] = s, R.wrep[w] = j;
            R.act[w] = malloc(2 * (cnt + 1) * sizeof(int));
            R.end[w] = malloc(2 * (cnt + 1) * sizeof(double));
            cr_assert(R.act[w] && R.end[w]);
            int *a = R.act[w], L = 0;
            if (hold_all) {
                for (int t = 0; t < cnt; t++) a[L++] = mine[t] + 1;
                for (int t = 0; t < cnt; t++) a[L++] = -(mine[t] + 1);
            } else {
                int k = (W + reps[s] - 1) / reps[s] - 1; /* warmup forwards */
                if (k > cnt) k = cnt;
                int nf = 0, nb = 0;
                while (nf < k) a[L++] = mine[nf++] + 1;
                while (nb < cnt) {
                    if (nf < cnt) a[L++] = mine[nf++] + 1;
                    a[L++] = -(mine[nb++] + 1);
                }
            }
            R.len[w] = L;
            for (int i = 0; i < L; i++) {
                R.end[w][i] = -1;
                int g = (a[i] > 0 ? a[i] : -a[i]) - 1;
                (a[i] > 0 ? R.fpos : R.bpos)[s * n + g] = i;
            }
        }
    }
    double span = 0;
    for (w = 0; w < R.nw; w++) {
        /* in order, so that the recursion stays shallow */
        for (int i = 0; i < R.len[w]; i++) ref_end(&R, w, i);
    }
    for (int pass = 0; pass < 2; pass++)
        for (w = 0; w < R.nw; w++)
            if (R.len[w] > 0 && R.end[w][R.len[w] - 1] > span) span = R.end[w][R.len[w] - 1];
    for (int t = 0; stage_end && t < S; t++) stage_end[t] = 0;
    for (w = 0; stage_end && w < R.nw; w++)
        if (R.len[w] > 0 && R.end[w][R.len[w] - 1] > stage_end[R.wst[w]])
            stage_end[R.wst[w]] = R.end[w][R.len[w] - 1];
    for (w = 0; w < R.nw; w++) free(R.act[w]), free(R.end[w]);
    free(R.wst), free(R.wrep), free(R.len), free(R.act), free(R.end), free(R.fpos), free(R.bpos);
    return span;
}

/* ref_iteration_late without late activations. */
static double ref_iteration(int S, const int *reps, const double *f, const double *b,
                            const double *x, int n, int hold_all, double *stage_end)
{
    return ref_iteration_late(S, reps, f, b, x, NULL, n, hold_all, stage_end);
}

/* --- the planner's orders are the generator's ---------------------------------------- */

/* sched_replica_order, which the planner's replay calls, against schedule_generate's
 * compute actions (F and B of each worker, in order), for gpipe, 1f1b-flush, pipedream
 * and 2bw on 2 to 4 stages of 1 to 6 replicas and 1 to 3 rounds of microbatches: the
 * generator lays its order out with the same function, so the two are one rule. */
Test(native_rr, orders_are_the_generators)
{
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM,
                                       SCHED_2BW};
    unsigned seed = 11;
    int shapes = 0, workers = 0;
    for (int t = 0; t < 300; t++) {
        int S = 2 + (int)(rand_r(&seed) % 3), reps[4], lcm = 1;
        for (int s = 0; s < S; s++) {
            reps[s] = 1 + (int)(rand_r(&seed) % 6);
            lcm = lcm / (int)nm_gcd(lcm, reps[s]) * reps[s];
        }
        sched_kind kind = kinds[t % 4];
        int n = lcm * (1 + (int)(rand_r(&seed) % 3));
        sched_spec sp = {kind, 0, S, 1, n, 1, reps, NULL};
        plumb_err e;
        err_clear(&e);
        schedule *sc = schedule_generate(&sp, &e);
        if (!sc) continue; /* 2bw needs enough microbatches for its versions */
        int w = 0, W = 0, mine[512];
        for (int s = 0; s < S; s++) W += reps[s];
        for (int s = 0; s < S; s++) {
            int k = (W + reps[s] - 1) / reps[s] - 1;
            for (int j = 0; j < reps[s]; j++, w++) {
                int cnt = sched_replica_order(reps[s], j, 0, n, k,
                                              sched_traits_of(kind)->hold == SCHED_HOLD_ALL,
                                              mine);
                int worker = sc->stage_workers[sc->stage_first[s] + j], i = 0;
                for (int x = 0; x < sc->len[worker]; x++) {
                    const action *a = &sc->acts[worker][x];
                    if (a->kind != ACT_F && a->kind != ACT_B) continue;
                    int v = a->kind == ACT_F ? a->microbatch + 1 : -(a->microbatch + 1);
                    cr_assert(i < cnt && mine[i] == v,
                              "%s %d stages, stage %d replica %d of %d, %d microbatches: "
                              "action %d is %d, the planner's %d", sched_kind_name(kind), S, s,
                              j, reps[s], n, i, v, i < cnt ? mine[i] : 0);
                    i++;
                }
                cr_assert_eq(i, cnt, "stage %d replica %d: %d compute actions, planner %d", s,
                             j, i, cnt);
            }
            W -= reps[s];
        }
        workers += w;
        shapes++;
        schedule_free(sc);
    }
    cr_log_info("native_rr: %d shapes, %d workers' orders equal to the generator's\n", shapes,
                workers);
    cr_assert_gt(shapes, 250);
}

/* --- a pair of stages in the steady state -------------------------------------------- */

/* A pair of stages with r1 and r2 replicas, c = f + b per microbatch and x per transfer,
 * settles at max(c1 / r1, c2 / r2, (c1 + c2 + 2 x) / (r1 k1)) seconds per microbatch, k1 =
 * ceil((r1 + r2) / r1) the first stage's microbatches in flight per replica: the round
 * robin alone makes no replica of a pair wait (docs/planner-native.md). Asynchronous 1F1B
 * (pipedream: no flush) gives the steady period; checked on many pairs. */
Test(native_rr, pair_settles_at_its_closed_form)
{
    const int pairs[][2] = {{2, 3}, {3, 2}, {3, 4}, {4, 3}, {4, 6}, {6, 4}, {1, 2}, {2, 1},
                            {3, 5}, {5, 2}, {2, 4}, {4, 2}};
    const double xs[] = {0, 0.05, 0.4};
    const double costs[][4] = {{1, 2, 1, 2}, {0.5, 1.5, 1.2, 2.0}, {2, 3, 0.3, 0.9}};
    int checked = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        for (size_t j = 0; j < sizeof xs / sizeof xs[0]; j++)
            for (size_t k = 0; k < sizeof costs / sizeof costs[0]; k++) {
                int reps[2] = {pairs[i][0], pairs[i][1]};
                double f[2] = {costs[k][0], costs[k][2]}, b[2] = {costs[k][1], costs[k][3]};
                double x[2] = {xs[j], 0};
                int l = reps[0] * reps[1], M = 40 * l;
                double t = nm_rr_time(SCHED_PIPEDREAM, 2, reps, f, b, x, NULL, NULL, M, NULL);
                int k1 = (reps[0] + reps[1] + reps[0] - 1) / reps[0];
                double c1 = f[0] + b[0], c2 = f[1] + b[1], per = c1 / reps[0];
                if (c2 / reps[1] > per) per = c2 / reps[1];
                if ((c1 + c2 + 2 * x[0]) / (reps[0] * k1) > per)
                    per = (c1 + c2 + 2 * x[0]) / (reps[0] * k1);
                cr_expect(fabs(t / (M * per) - 1) < 0.01,
                          "%d/%d x %g costs %zu: %g s per microbatch, closed form %g",
                          reps[0], reps[1], x[0], k, t / M, per);
                checked++;
            }
    cr_assert_eq(checked, 108);
}

/* Three stages do wait: with 2, 3 and 4 replicas and balanced stages (c = r) the steady
 * period is 1.25 s where every stage alone needs 1 s (worked by the replay here, which
 * knows nothing of the planner's); the planner's replay says the same. */
Test(native_rr, three_stages_wait_on_out_of_phase_neighbours)
{
    int reps[3] = {2, 3, 4};
    double f[3] = {2.0 / 3, 1, 4.0 / 3}, b[3] = {4.0 / 3, 2, 8.0 / 3}, x[3] = {0, 0, 0};
    int M = 12 * 20;
    double a = ref_iteration(3, reps, f, b, x, M, 0, NULL);
    double z = ref_iteration(3, reps, f, b, x, 2 * M, 0, NULL);
    cr_assert(fabs((z - a) / M - 1.25) < 1e-9, "steady period %g", (z - a) / M);
    double t = nm_rr_time(SCHED_PIPEDREAM, 3, reps, f, b, x, NULL, NULL, M, NULL);
    cr_assert(fabs(t / M - 1.25) < 1e-9, "planner: %g", t / M);
    /* flushed: one iteration as the test's replay lays it out */
    cr_assert(fabs(nm_rr_time(SCHED_1F1B_FLUSH, 3, reps, f, b, x, NULL, NULL, M, NULL) - a) < 1e-9);
}

/* --- against the simulator ------------------------------------------------------------ */

/* A chain of S stages, stage s of nl[s] layers of F 1 ms and B 2 ms (the synthetic
 * defaults) on reps[s] consecutive devices of one server, act bytes per activation at
 * gbit Gb/s, no parameters (no all-reduce), kind, M microbatches. */
static plan *rr_plan(int S, const int *nl, const int *reps, double act, double gbit,
                     sched_kind kind, int M)
{
    sim_synth sp;
    sim_synth_init(&sp);
    int L = 0, rmax = 1, nd = 0;
    for (int s = 0; s < S; s++) {
        L += nl[s];
        nd += reps[s];
        if (reps[s] > rmax) rmax = reps[s];
    }
    sp.nstages = L;
    sp.layers_per_stage = 1;
    sp.replicas = 1;
    sp.activation_bytes = act;
    sp.parameter_bytes = 0;
    sp.devices_per_server = nd > L ? nd : L;
    sp.servers = 1;
    sp.bw_gbit[0] = gbit;
    sp.schedule = kind;
    sp.microbatches = M;
    sp.microbatch_size = sp.minibatch;
    plan *pl = synth_plan(&sp);
    /* regroup the one-layer stages into S stages of nl[s] layers on reps[s] devices */
    int first = 0, dev = 0;
    for (int s = 0; s < S; s++) {
        plan_stage *st = &pl->stages[s];
        st->first_layer = first;
        st->last_layer = first + nl[s] - 1;
        first += nl[s];
        free(st->devices);
        st->devices = malloc(reps[s] * sizeof *st->devices);
        cr_assert(st->devices);
        st->replicas = reps[s];
        for (int j = 0; j < reps[s]; j++) st->devices[j] = dev++;
    }
    for (int s = S; s < pl->nstages; s++) free(pl->stages[s].devices);
    pl->nstages = S;
    return pl;
}

/* The simulator's steady iteration against the test's replay and the planner's, on pairs
 * and triples of replica counts (2/3, 3/4, 4/6, 3/2, 2/3/4, 4/3/5, 1/2/3), balanced and
 * not, with and without transfers (1 MB at 100 Gb/s: 80 us each way), 1f1b-flush and
 * gpipe. */
Test(native_rr, simulator_against_the_replays)
{
    const struct {
        int S, nl[3], reps[3];
    } cases[] = {
        {2, {2, 3}, {2, 3}}, {2, {3, 4}, {3, 4}}, {2, {2, 3}, {4, 6}}, {2, {3, 2}, {3, 2}},
        {2, {1, 1}, {2, 3}}, {3, {2, 3, 4}, {2, 3, 4}}, {3, {1, 1, 1}, {4, 3, 5}},
        {3, {1, 2, 3}, {1, 2, 3}}, {3, {4, 3, 5}, {4, 3, 5}},
    };
    const sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_GPIPE};
    const double acts[] = {0, 1e6};
    double worst = 0;
    int n = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t k = 0; k < 2; k++)
            for (size_t a = 0; a < 2; a++) {
                int S = cases[c].S, M = 1;
                for (int s = 0; s < S; s++) M = M * cases[c].reps[s];
                M *= 2;
                plan *pl = rr_plan(S, cases[c].nl, cases[c].reps, acts[a], 100, kinds[k], M);
                sim_options o;
                sim_options_init(&o);
                sim_report *r = synth_run(pl, &o);
                double f[3], b[3], x[3] = {0, 0, 0};
                for (int s = 0; s < S; s++) {
                    f[s] = cases[c].nl[s] * 1e-3;
                    b[s] = cases[c].nl[s] * 2e-3;
                    if (s + 1 < S) x[s] = acts[a] * 8 / 100e9;
                }
                double want = ref_iteration(S, cases[c].reps, f, b, x, M,
                                            kinds[k] == SCHED_GPIPE, NULL);
                double mine = nm_rr_time(kinds[k], S, cases[c].reps, f, b, x, NULL, NULL, M, NULL);
                double e = fabs(r->iteration_s / want - 1);
                cr_expect(e < 0.02, "case %zu %s act %g: simulated %g s, replay %g s", c,
                          sched_kind_name(kinds[k]), acts[a], r->iteration_s, want);
                cr_expect(fabs(mine / want - 1) < 1e-9, "case %zu: planner %g, replay %g", c,
                          mine, want);
                if (e > worst) worst = e;
                n++;
                sim_report_free(r);
                plan_free(pl);
            }
    cr_log_info("native_rr: %d plans, simulator against the replay: worst %.3f %%\n", n,
                100 * worst);
}

/* --- the planner's estimate against the simulator -------------------------------------- */

/* A partition of m into S stages at random cuts with reps[s] units each (consecutive). */
static void cut_part(const nm_model *m, unsigned *seed, int S, const int *reps, nm_part *pt)
{
    memset(pt, 0, sizeof *pt);
    int cuts[NM_MAX_STAGES + 1], u = 0;
    cuts[0] = 0, cuts[S] = m->nb;
    for (;;) { /* S - 1 distinct ascending cuts inside (0, nb) */
        for (int s = 1; s < S; s++) cuts[s] = 1 + (int)(rand_r(seed) % (unsigned)(m->nb - 1));
        int ok = 1;
        for (int a = 1; a < S; a++)
            for (int b = a + 1; b < S; b++)
                if (cuts[a] >= cuts[b]) ok = 0;
        if (ok) break;
    }
    pt->nst = pt->ranks = S;
    for (int s = 0; s < S; s++) {
        pt->st[s] = (nm_stage){cuts[s], cuts[s + 1], u, reps[s]};
        u += reps[s];
    }
}

/* The simulator's iteration of the plan the planner writes for partition pt under s. */
static double simulate_part(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    plumb_err e;
    plan *pl = nm_plan(m, s, pt, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    sim_report *r = synth_run(pl, &o);
    double t = r->iteration_s;
    sim_report_free(r);
    plan_free(pl);
    return t;
}

/* The planner's estimate of plans with unequal replica counts (gnmt, vgg16 and resnet50 on
 * 16 devices of dgx-h100, two servers; 2 to 4 stages at random cuts; 1f1b-flush, gpipe
 * and 2bw) against the simulator's run of the plan it writes: within 3 % each, 1 % in the
 * geometric mean (measured: worst 0.99 %, mean 0.20 %; the closed form `M x period +
 * fill` alone: worst 13.56 %, mean 2.35 %). */
Test(native_rr, estimate_against_the_simulator, .timeout = 120)
{
    static const char *profs[] = {"gnmt", "vgg16", "resnet50"};
    static const int shapes[][5] = {{2, 3, 4, 0, 0}, {3, 4, 5, 4, 0}, {4, 3, 5, 0, 0},
                                    {2, 3, 2, 3, 0}, {5, 3, 0, 0, 0}, {1, 2, 4, 0, 0},
                                    {4, 2, 4, 4, 0}};
    static const sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_GPIPE, SCHED_2BW};
    plumb_err e;
    cluster *c = cluster_load_cut(CLUSTER_DIR "/dgx-h100.json", 16, 2, &e);
    cr_assert_not_null(c, "%s", e.msg);
    unsigned seed = 7;
    double worst = 0, logsum = 0;
    int n = 0;
    for (int f = 0; f < 3; f++) {
        profile *p = shipped_profile(profs[f]);
        nm_model m;
        cr_assert_eq(nm_model_build(&m, p, c, c->ndevices, NULL, 0, &e), 0, "%s", e.msg);
        cr_assert_eq(m.g, 1);
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
            int reps[5], lcm, S = shape_replicas(shapes[h], 5, reps, &lcm);
            nm_part pt;
            cut_part(&m, &seed, S, reps, &pt);
            for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                nm_setting s = {.kind = kinds[k], .M = 4 * lcm, .mbsize = p->minibatch / 4,
                                .recompute = 0, .chunks = 1, .opt = OPT_SGD};
                nm_part q = pt;
                nm_price(&m, &s, &q);
                double sim = simulate_part(&m, &s, &q), err = q.iter_s / sim - 1;
                cr_expect(fabs(err) < 0.03, "%s shape %zu %s: estimate %.6f s, simulated %.6f s",
                          profs[f], h, sched_kind_name(kinds[k]), q.iter_s, sim);
                if (fabs(err) > worst) worst = fabs(err);
                logsum += log(1 + fabs(err));
                n++;
            }
        }
        nm_model_free(&m);
        profile_free(p);
    }
    double gm = exp(logsum / n) - 1;
    cr_log_info("native_rr: %d plans with unequal replica counts: estimate against the "
                "simulator worst %.2f %%, geometric mean %.2f %%\n", n, 100 * worst, 100 * gm);
    cr_expect(gm < 0.01, "geometric mean error %.2f %%", 100 * gm);
    cluster_free(c);
}

/* The schedule takes at most 1024 replicas a stage: the default plan of resnet50 on the
 * 2208 GPUs of dgx-a100-80g (one stage of 2208 replicas before, which the simulator
 * refused and `plumb plan` returned unsimulated) keeps every stage within it, and the
 * simulator runs it. */
Test(native_rr, no_stage_above_the_schedules_replicas, .timeout = 120)
{
    plumb_err e;
    profile *p;
    cluster *c;
    load_pair(PROFILE_DIR "/resnet50.json", CLUSTER_DIR "/dgx-a100-80g.json", &p, &c);
    cr_assert_gt(c->ndevices, SCHED_MAX_REPLICAS);
    native_options o;
    native_options_init(&o);
    native_result res;
    memset(&res, 0, sizeof res);
    plan *pl = planner_native(p, c, &o, &res, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    for (int s = 0; s < pl->nstages; s++)
        cr_expect_leq(pl->stages[s].replicas, SCHED_MAX_REPLICAS, "stage %d: %d replicas", s,
                      pl->stages[s].replicas);
    cr_expect(res.ncand > 0 && res.cand[0].simulated, "the plan returned was not simulated");
    sim_options so;
    sim_options_init(&so);
    sim_report *r = sim_run(pl, &so, &e);
    cr_expect_not_null(r, "sim_run: %s", e.msg);
    sim_report_free(r);
    plan_free(pl);
    native_result_free(&res);
    cluster_free(c);
    profile_free(p);
}

/* --- the estimate's other terms, on synthetic plans ------------------------------------ */

/* A chain of L layers of F 1 ms and B 2 ms at the profiled minibatch (32 samples, one
 * microbatch), act bytes out of each, params[l] parameter bytes (NULL: p0 each), on
 * `servers` servers of `per` devices with gbit0 Gb/s inside a server and gbit1 between
 * them, no latency: the profile and cluster of a plan that nm_model_build then models
 * (the caller frees the plan, which owns both). */
static plan *est_base(int L, double act, const double *params, double p0, int servers,
                      int per, double gbit0, double gbit1)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.nstages = L;
    sp.activation_bytes = act;
    sp.parameter_bytes = p0;
    sp.servers = servers;
    sp.devices_per_server = per;
    sp.bw_gbit[0] = gbit0;
    sp.bw_gbit[1] = gbit1;
    plan *pl = synth_plan(&sp);
    for (int l = 0; params && l < L; l++) pl->prof->layers[l].parameter_bytes = params[l];
    return pl;
}

/* The estimate of S stages (stage s: layers [first[s], first[s + 1]) on reps[s]
 * consecutive devices from dev0[s]) of base's chain under kind with M microbatches of the
 * profiled size, and the simulator's iteration of the plan the planner writes for it. */
static double est_iteration(const plan *base, int S, const int *first, const int *dev0,
                            const int *reps, sched_kind kind, int M, nm_part *out,
                            double *simulated)
{
    plumb_err e;
    nm_model m;
    cr_assert_eq(nm_model_build(&m, base->prof, base->clus, base->clus->ndevices, NULL, 0, &e),
                 0, "%s", e.msg);
    cr_assert_eq(m.g, 1);
    cr_assert_eq(m.nb, base->prof->nlayers, "one block per layer");
    nm_part pt;
    memset(&pt, 0, sizeof pt);
    pt.nst = pt.ranks = S;
    for (int s = 0; s < S; s++) pt.st[s] = (nm_stage){first[s], first[s + 1], dev0[s], reps[s]};
    nm_setting st = {.kind = kind, .M = M, .mbsize = base->prof->minibatch, .recompute = 0,
                     .chunks = 1, .opt = OPT_SGD};
    nm_price(&m, &st, &pt);
    *simulated = simulate_part(&m, &st, &pt);
    if (out) *out = pt;
    nm_model_free(&m);
    return pt.iter_s;
}

/* A server's port carries a cut's bytes once per microbatch and direction, whichever of
 * its devices send them: stages of 8 replicas on server 0 and 8 on server 1 of a 10 Gb/s
 * network, 8 MB a microbatch across the cut: server 0 sends every activation, server 1
 * every gradient, so the port binds at 8 MB / 1.25 GB/s = 6.4 ms a microbatch (the
 * compute: 12 ms / 8 replicas = 1.5 ms). The port's count flipped a "counted" mark on
 * every device, so a server's devices added its load every other time: 4 x 6.4 ms on
 * server 1, 0 on server 0 (gnmt on Cluster-B: estimate -15.6 %). */
Test(native_rr, a_servers_port_counts_a_cut_once)
{
    plan *base = est_base(8, 8e6, NULL, 1e5, 2, 8, 100, 10);
    const int first[] = {0, 4, 8}, dev0[] = {0, 8}, reps[] = {8, 8};
    nm_part pt;
    double sim, est = est_iteration(base, 2, first, dev0, reps, SCHED_1F1B_FLUSH, 32, &pt, &sim);
    const double port = 8e6 / (10e9 / 8);
    cr_expect(fabs(pt.period / port - 1) < 1e-9, "period %.9g s, the port's %.9g s", pt.period,
              port);
    cr_expect(fabs(est / sim - 1) < 0.03, "estimate %.6g s, simulated %.6g s", est, sim);
    plan_free(base);
}

/* When a server's port binds, no stage's latency hides in the M periods: the iteration is
 * the first forward before the port's first activation, M transfers back to back, and the
 * last microbatch's way back (the stage after, the gradient's transfer, the backward).
 * Stage 0 (4 layers) on 4 replicas of server 0, stage 1 (1 layer) on one device of server
 * 1, 6.25 MB a microbatch at 10 Gb/s: 5 ms a transfer each way, against 3 ms of stage 0's
 * compute a microbatch; 16 microbatches: 4 + 16 x 5 + 1 + 2 + 5 + 8 = 100 ms (and the
 * all-reduce of 0.4 MB in the server, 0.024 ms). The fill used to drop the latency of the
 * stage of the largest period, here stage 0's 22 ms (alexnet on Cluster-A: +17.6 %). */
Test(native_rr, a_binding_port_keeps_every_stage_in_the_fill)
{
    plan *base = est_base(5, 6.25e6, NULL, 1e5, 2, 4, 100, 10);
    const int first[] = {0, 4, 5}, dev0[] = {0, 4}, reps[] = {4, 1};
    const double x = 6.25e6 / (10e9 / 8), M = 16;
    const double want = 4e-3 + M * x + 1e-3 + 2e-3 + x + 8e-3 + 2 * 3.0 / 4 * 4e5 / 12.5e9;
    double sim, est = est_iteration(base, 2, first, dev0, reps, SCHED_1F1B_FLUSH, M, NULL, &sim);
    cr_expect(fabs(sim / want - 1) < 0.01, "simulated %.6g s, by hand %.6g s", sim, want);
    cr_expect(fabs(est / want - 1) < 0.01, "estimate %.6g s, by hand %.6g s", est, want);
    plan_free(base);
}

/* Equal replica counts are replayed too: with a replica's few microbatches a fast stage
 * after a slow one never holds it up, which the closed form's fill (the other stages'
 * latency) prices as if it did. Stage 0 (3 layers) and stage 1 (1 layer) on 2 replicas
 * each, 4 microbatches: the test's replay (ref_iteration) gives about 18 ms, the closed
 * form 4 x 4.5 + 3 = 21 ms (densenet121 on the heterogeneous cluster: -8.0 %; resnet18 on
 * dgx-a100-80g, 6 microbatches a replica: +12.6 %). */
Test(native_rr, equal_counts_are_replayed)
{
    plan *base = est_base(4, 1e5, NULL, 1e3, 1, 4, 100, 100);
    const int first[] = {0, 3, 4}, dev0[] = {0, 2}, reps[] = {2, 2};
    const double f[] = {3e-3, 1e-3}, b[] = {6e-3, 2e-3}, x[] = {1e5 / 12.5e9, 0};
    for (int k = 0; k < 2; k++) {
        sched_kind kind = k ? SCHED_GPIPE : SCHED_1F1B_FLUSH;
        double want = ref_iteration(2, reps, f, b, x, 4, kind == SCHED_GPIPE, NULL);
        double sim, est = est_iteration(base, 2, first, dev0, reps, kind, 4, NULL, &sim);
        cr_expect(fabs(sim / want - 1) < 0.005, "%s: simulated %.6g s, replay %.6g s",
                  sched_kind_name(kind), sim, want);
        cr_expect(fabs(est / want - 1) < 0.005, "%s: estimate %.6g s, replay %.6g s",
                  sched_kind_name(kind), est, want);
    }
    plan_free(base);
}

/* Each stage all-reduces after its own last backward, not after the pipeline's: stage 0
 * (4 layers, 4 kB of parameters) and stage 1 (1 layer, 20 MB: one bucket) on 2 replicas
 * each at 10 Gb/s, 4 microbatches. Stage 1's ring takes 2 (1/2) 20 MB / 1.25 GB/s = 16
 * ms after its last backward, which ends about 13 ms before stage 0's: the iteration is
 * the later of the two ends (the test's replay plus each ring), not the last backward plus
 * the slowest ring (vgg16 on the heterogeneous cluster, its 494 MB of fully connected
 * layers on the V100s: -17 %). */
Test(native_rr, each_stage_all_reduces_after_its_own_last_backward)
{
    const double params[] = {1e3, 1e3, 1e3, 1e3, 2e7};
    plan *base = est_base(5, 1e5, params, 0, 1, 4, 10, 10);
    const int first[] = {0, 4, 5}, dev0[] = {0, 2}, reps[] = {2, 2};
    const double f[] = {4e-3, 1e-3}, b[] = {8e-3, 2e-3}, x[] = {1e5 / 1.25e9, 0};
    const double ring[] = {4e3 / 1.25e9, 2e7 / 1.25e9};
    double end[2];
    ref_iteration(2, reps, f, b, x, 4, 0, end);
    double want = end[0] + ring[0] > end[1] + ring[1] ? end[0] + ring[0] : end[1] + ring[1];
    cr_assert_gt(end[1] + ring[1], end[0] + ring[0]); /* the case this is about */
    double sim, est = est_iteration(base, 2, first, dev0, reps, SCHED_1F1B_FLUSH, 4, NULL, &sim);
    cr_expect(fabs(sim / want - 1) < 0.005, "simulated %.6g s, by hand %.6g s", sim, want);
    cr_expect(fabs(est / want - 1) < 0.005, "estimate %.6g s, by hand %.6g s", est, want);
    plan_free(base);
}

/* Every replica of stage 0 runs its first forward at once, so their first activations
 * leave a server together and queue at its port: stage 0 (4 layers of F 10 ms, B 20 ms)
 * on 4 replicas of server 0, stage 1 (1 layer) on 4 of server 1, 6.25 MB at 10 Gb/s (5
 * ms a transfer, one lane), 8 microbatches: microbatch g < 4 reaches stage 1 g x 5 ms
 * later than alone (the second ones leave 40 ms later, the port long free; the gradients
 * come back staggered). The test's replay with those arrivals, plus each stage's ring,
 * is the iteration; the estimate charged every transfer alone, 15 ms short (resnet50 on
 * the heterogeneous cluster, 16-16: +7.2 %). */
Test(native_rr, first_sends_queue_at_the_port)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.nstages = 5;
    sp.forward_ms = 10, sp.backward_ms = 20;
    sp.activation_bytes = 6.25e6;
    sp.parameter_bytes = 1e3;
    sp.servers = 2, sp.devices_per_server = 4;
    sp.bw_gbit[1] = 10;
    plan *base = synth_plan(&sp);
    const int first[] = {0, 4, 5}, dev0[] = {0, 4}, reps[] = {4, 4};
    const double x = 6.25e6 / 1.25e9, f[] = {40e-3, 10e-3}, b[] = {80e-3, 20e-3};
    const double xs[] = {x, 0}, late[8] = {0, x, 2 * x, 3 * x, 0, 0, 0, 0};
    double end[2];
    ref_iteration_late(2, reps, f, b, xs, late, 8, 0, end);
    const double ring0 = 2 * 3.0 / 4 * 4e3 / 12.5e9, ring1 = 2 * 3.0 / 4 * 1e3 / 12.5e9;
    double want = end[0] + ring0 > end[1] + ring1 ? end[0] + ring0 : end[1] + ring1;
    double sim, est = est_iteration(base, 2, first, dev0, reps, SCHED_1F1B_FLUSH, 8, NULL, &sim);
    cr_expect(fabs(sim / want - 1) < 0.005, "simulated %.6g s, by hand %.6g s", sim, want);
    cr_expect(fabs(est / want - 1) < 0.005, "estimate %.6g s, by hand %.6g s", est, want);
    plan_free(base);
}

/* --- memory: a straight pipeline's counts are its schedule's ----------------------------- */

/* The planner's memory of each device of partition pt (nm_part_memory) against the
 * simulator's report of the plan it writes; returns the devices that differ, *worst the
 * largest relative difference of a device's total. */
static int straight_memory_differs(const nm_model *m, const nm_setting *s, const nm_part *pt,
                                   double *worst)
{
    plumb_err e;
    sim_memory est[NM_MAX_STAGES];
    cr_assert_eq(nm_part_memory(m, s, pt, est), pt->nst);
    plan *pl = nm_plan(m, s, pt, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    sim_report *r = synth_run(pl, &o);
    int bad = 0;
    for (int i = 0; i < pt->nst; i++) {
        const sim_device_report *d = sim_report_device(r, pl->stages[i].devices[0]);
        cr_assert_not_null(d);
        double rel = fabs(est[i].total / d->mem.total - 1);
        if (rel > *worst) *worst = rel;
        bad += rel > 1e-12 || est[i].activations != d->mem.activations ||
               est[i].buffers != d->mem.buffers;
    }
    sim_report_free(r);
    plan_free(pl);
    return bad;
}

/* A straight pipeline's buffer slots follow the stages' costs: the lowering posts a
 * RECV_F when the stage before produces the data, so a stage after a slower one receives
 * its next input after its backward and holds no slot more, which the closed form counted
 * for every receiver. The planner's memory of a complete pipeline is the schedule's
 * (nm_part_memory, nm_price_exact): a synthetic 3-stage chain whose first stage is 4x
 * slower, and alexnet's 12-stage pipelines on cluster-a-4x4 at random cuts (what the
 * equal-count programs proposed), under 1f1b-flush, pipedream and 2bw, hold every
 * device's total, activations and buffers equal to the simulator's (with the closed
 * form's counts: 72 of the 81 devices off, worst 46.2 %). */
Test(native_rr, straight_pipelines_hold_the_schedules_slots, .timeout = 120)
{
    static const sched_kind kinds[] = {SCHED_1F1B_FLUSH, SCHED_PIPEDREAM, SCHED_2BW};
    plumb_err e;
    int bad = 0, n = 0;
    double worst = 0;
    plan *base = est_base(6, 4e6, NULL, 1e6, 1, 4, 100, 100);
    nm_model m;
    cr_assert_eq(nm_model_build(&m, base->prof, base->clus, 3, NULL, 0, &e), 0, "%s", e.msg);
    nm_part pt;
    memset(&pt, 0, sizeof pt);
    pt.nst = pt.ranks = 3;
    pt.st[0] = (nm_stage){0, 4, 0, 1}, pt.st[1] = (nm_stage){4, 5, 1, 1};
    pt.st[2] = (nm_stage){5, 6, 2, 1};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        nm_setting s = {.kind = kinds[k], .M = 8, .mbsize = base->prof->minibatch,
                        .recompute = 0, .chunks = 1, .opt = OPT_SGD};
        bad += straight_memory_differs(&m, &s, &pt, &worst);
        n += 3;
    }
    nm_model_free(&m);
    plan_free(base);
    profile *p = profile_load(PROFILE_DIR "/alexnet.json", &e);
    cr_assert_not_null(p, "%s", e.msg);
    cluster *c = cluster_load(CLUSTER_DIR "/cluster-a-4x4.json", &e);
    cr_assert_not_null(c, "%s", e.msg);
    cr_assert_eq(nm_model_build(&m, p, c, c->ndevices, NULL, 0, &e), 0, "%s", e.msg);
    unsigned seed = 3;
    cr_assert_geq(m.nb, 12);
    for (int t = 0; t < 6; t++) {
        /* 11 distinct cuts in (0, nb): the first 11 of a shuffle, in order */
        int pos[NM_MAX_BLOCKS], cuts[13];
        for (int i = 1; i < m.nb; i++) pos[i - 1] = i;
        for (int i = m.nb - 2; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), v = pos[i];
            pos[i] = pos[j], pos[j] = v;
        }
        cuts[0] = 0, cuts[12] = m.nb;
        for (int i = 1; i < 12; i++) {
            int v = pos[i - 1], j = i;
            while (j > 1 && cuts[j - 1] > v) cuts[j] = cuts[j - 1], j--;
            cuts[j] = v;
        }
        memset(&pt, 0, sizeof pt);
        pt.nst = pt.ranks = 12;
        for (int i = 0; i < 12; i++) pt.st[i] = (nm_stage){cuts[i], cuts[i + 1], i, 1};
        nm_setting s = {.kind = kinds[t % 3], .M = 48, .mbsize = p->minibatch,
                        .recompute = 0, .chunks = 1, .opt = OPT_SGD};
        bad += straight_memory_differs(&m, &s, &pt, &worst);
        n += 12;
    }
    cr_log_info("native_rr: straight pipelines: %d of %d devices off the simulator's memory, "
                "worst %.1f %%\n", bad, n, 100 * worst);
    cr_expect_eq(bad, 0, "%d of %d devices off the simulator's memory (worst %.1f %%)", bad, n,
                 100 * worst);
    nm_model_free(&m);
    cluster_free(c);
    profile_free(p);
}

/* A server's port that carries a cut's activations and the cut before's gradients is idle
 * while the pipeline fills and drains: stages of 2 layers on 2 replicas each of servers
 * 0, 1 and 2 (F 2 ms, B 4 ms a microbatch), 3.125 MB across each cut at 10 Gb/s (2.5 ms a
 * transfer), 16 microbatches: server 1 sends stage 1's activations and gradients, 5 ms a
 * microbatch against 3 ms of compute. Its port can send only the warmup's activations
 * (3 per replica) before the first microbatch's round trip brings a gradient, and only
 * the gradients that follow each replica's last forward after the last activation: the
 * estimate (port_bound) within 1 % of the simulator. It was M x 5 ms plus every stage's
 * latency but one transfer: 103.0 ms against the simulator's 100.5 (gnmt on
 * cluster-a-4x4, 2-2-4-1-3-4: -5.1 %). */
Test(native_rr, a_port_idles_while_the_pipeline_fills_and_drains)
{
    plan *base = est_base(6, 3.125e6, NULL, 1e3, 3, 2, 100, 10);
    const int first[] = {0, 2, 4, 6}, dev0[] = {0, 2, 4}, reps[] = {2, 2, 2};
    nm_part pt;
    double sim, est = est_iteration(base, 3, first, dev0, reps, SCHED_1F1B_FLUSH, 16, &pt, &sim);
    cr_expect(fabs(pt.period / 5e-3 - 1) < 1e-9, "period %.9g s, the port's 5 ms", pt.period);
    cr_expect(fabs(est / sim - 1) < 0.01, "estimate %.6g s, simulated %.6g s", est, sim);
    cr_log_info("a port idle in the fill and drain: estimate %.6g s, simulated %.6g s", est, sim);
    plan_free(base);
}

/* Stage 0's first sends queue at a server's port in replica order, and only those that
 * leave their server: stage 0 (4 layers of F 10 ms, B 20 ms) on 5 replicas, 4 of server
 * 0 and 1 of server 1, stage 1 (1 layer) on 3 replicas of server 1, 6.25 MB at 10 Gb/s
 * in a server and between them (5 ms a transfer), 15 microbatches: replica g < 4 sends
 * g x 5 ms late, replica 4 (in server 1) not at all. The test's replay with those arrivals, plus each stage's ring, is
 * the iteration; the estimate delayed every first send by the last one's 15 ms (alexnet
 * on Cluster-B 14-2: -4.6 %). */
Test(native_rr, first_sends_queue_in_replica_order)
{
    sim_synth sp;
    sim_synth_init(&sp);
    sp.nstages = 5;
    sp.forward_ms = 10, sp.backward_ms = 20;
    sp.activation_bytes = 6.25e6;
    sp.parameter_bytes = 1e3;
    sp.servers = 2, sp.devices_per_server = 4;
    sp.bw_gbit[0] = sp.bw_gbit[1] = 10; /* every transfer 5 ms, in a server or not */
    plan *base = synth_plan(&sp);
    const int first[] = {0, 4, 5}, dev0[] = {0, 5}, reps[] = {5, 3};
    const double x = 6.25e6 / 1.25e9, f[] = {40e-3, 10e-3}, b[] = {80e-3, 20e-3};
    const double xs[] = {x, 0};
    const double late[15] = {0, x, 2 * x, 3 * x};
    double end[2];
    ref_iteration_late(2, reps, f, b, xs, late, 15, 0, end);
    const double ring0 = 2 * 4.0 / 5 * 4e3 / 1.25e9, ring1 = 2 * 2.0 / 3 * 1e3 / 1.25e9;
    double want = end[0] + ring0 > end[1] + ring1 ? end[0] + ring0 : end[1] + ring1;
    double sim, est = est_iteration(base, 2, first, dev0, reps, SCHED_1F1B_FLUSH, 15, NULL, &sim);
    cr_expect(fabs(sim / want - 1) < 0.005, "simulated %.6g s, by hand %.6g s", sim, want);
    cr_expect(fabs(est / want - 1) < 0.005, "estimate %.6g s, by hand %.6g s", est, want);
    plan_free(base);
}
