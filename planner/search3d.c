/* search3d.c: the search over tensor x pipeline x data layouts (planner/search3d.h): the
 * free dimensions enumerated (tp dividing a server and the model's heads, key/value heads
 * and MLP width; pp and pp x V dividing the layers; dp the rest of the GPUs; microbatch
 * sizes dividing the batch of a replica, smallest first; recomputation, sequence
 * parallelism, ZeRO-1), each layout built once per (tp, sequence parallelism, microbatch
 * size, pp, V) and estimated for every recomputation and ZeRO stage (search3d_est.c), the
 * best estimates that fit simulated in full and ranked by simulated throughput. */
#include "planner/search3d.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/schedule_traits.h"
#include "core/units.h"

#include "planner/llm_profile.h"
#include "planner/search3d_impl.h"

/* The work budget of the search's full simulations (docs/sim.md, "Work budget"): 2e8
 * actions, about 20 s on 2 cores; one at most SIM_MAX_ACTIONS */
#define SEARCH3D_MAX_ACTIONS 2e8

void search3d_options_init(search3d_options *o)
{
    memset(o, 0, sizeof *o);
    o->recompute = o->sequence_parallel = o->zero = o->schedule = SEARCH3D_FREE;
    o->checkpoint_layers = -1;
    o->precision = DEV_BF16;
}

void search3d_options_from_layout(const layout3d_options *o, search3d_options *so)
{
    search3d_options_init(so);
    so->gpus = o->gpus;
    so->global_batch = o->global_batch;
    so->tp = o->tp, so->pp = o->pp, so->dp = o->dp;
    so->cp = o->cp;
    so->microbatch_size = o->microbatch_size;
    so->interleave = o->interleave;
    so->recompute = o->recompute;
    so->checkpoint_layers = o->checkpoint_layers;
    so->sequence_parallel = o->sequence_parallel;
    so->zero = o->zero;
    so->schedule = o->schedule >= 0 ? o->schedule : SEARCH3D_FREE;
    so->precision = o->precision;
    so->grad_reduce = o->grad_reduce;
    so->optimizer_state = o->optimizer_state;
    so->seq = o->seq;
    so->attention = o->attention;
    so->cross_entropy = o->cross_entropy;
    so->grad_accum = o->grad_accum;
    so->p2p_sync = o->p2p_sync;
    so->p2p_whole = o->p2p_whole;
    so->grad_sync_end = o->grad_sync_end;
    so->balance = o->balance;
}

void search3d_options_from_plan(const plan *in, const sim_options *w, search3d_options *so)
{
    search3d_options_init(so);
    if (!in) return;
    plan view; /* the plan as the simulator runs it under w */
    if (w) sim_options_view(in, w, &view);
    const plan *pl = w ? &view : in;
    int chunks = pl->chunks > 0 ? pl->chunks : 1;
    so->gpus = plan_gpus(pl);
    so->global_batch = pl->microbatch_size * pl->microbatches;
    so->tp = pl->tp;
    so->cp = plan_cp(pl);
    so->pp = pl->nstages / chunks;
    so->dp = pl->nstages > 0 ? pl->stages[0].replicas : 0;
    for (int s = 1; s < pl->nstages; s++)
        if (pl->stages[s].replicas != so->dp) so->dp = 0;
    so->microbatch_size = pl->microbatch_size;
    so->interleave = chunks;
    so->recompute = pl->recompute;
    so->checkpoint_layers = pl->recompute == RECOMPUTE_FULL ? pl->checkpoint_layers : -1;
    so->sequence_parallel = pl->sequence_parallel;
    so->zero = pl->zero;
    so->schedule = (int)pl->schedule;
    so->precision = pl->precision;
    so->grad_reduce = pl->grad_reduce;
    so->optimizer_state = pl->optimizer_state;
    so->tp_overlap = pl->tp_overlap;
    so->overlap_param_gather = pl->overlap_param_gather;
    so->fp8_param_gather = pl->fp8_param_gather;
    so->cross_entropy = pl->cross_entropy;
    so->grad_accum = pl->grad_accum;
    so->p2p_sync = pl->p2p_sync;
    so->p2p_whole = pl->p2p_whole;
    so->grad_sync_end = pl->grad_sync_end;
}

int search3d_all_fixed(const search3d_options *o)
{
    return o->tp > 0 && o->pp > 0 && o->dp > 0 && o->microbatch_size > 0 && o->interleave > 0 &&
           o->recompute != SEARCH3D_FREE && o->sequence_parallel != SEARCH3D_FREE &&
           o->zero != SEARCH3D_FREE;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The growing list of estimated layouts that fit. */
typedef struct cand_list {
    search3d_cand *c;
    long long n, cap;
    long long enumerated;
    search3d_cand smallest; /* the layout with the smallest peak memory among those that
                               do not fit (for the message when none fits) */
    double smallest_ratio;
    int min_dp;             /* the fewest replicas of any layout (for the batch's message) */
    long long built;        /* layouts whose plan was built (their profile made) */
    plumb_err build_err;    /* the first layout's build error, for the line when none was
                               built: a device whose figures give a block a time past the
                               profile's bounds failed every layout alike, and the search
                               blamed "--microbatch-size ... (got 0)" */
} cand_list;

static int list_push(cand_list *L, const search3d_cand *c)
{
    if (L->n == L->cap) {
        long long cap = L->cap ? 2 * L->cap : 256;
        search3d_cand *nc = realloc(L->c, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        L->c = nc;
        L->cap = cap;
    }
    L->c[L->n++] = *c;
    return 0;
}

/* The options of layout (tp, pp, dp, b, V, schedule) under o, the rest from o (free ones
 * at their first value). */
static layout3d_options layout_of(const search3d_options *o, int gpus, int tp, int cp, int pp,
                                  int dp, int b, int v, int sched)
{
    layout3d_options l;
    layout3d_options_init(&l);
    l.gpus = gpus, l.tp = tp, l.pp = pp, l.dp = dp;
    l.cp = cp > 1 ? cp : 0;
    l.global_batch = o->global_batch;
    l.microbatch_size = b;
    l.interleave = v;
    l.schedule = sched;
    l.recompute = o->recompute != SEARCH3D_FREE ? o->recompute : RECOMPUTE_NONE;
    l.checkpoint_layers = o->checkpoint_layers;
    l.sequence_parallel = o->sequence_parallel > 0;
    l.zero = o->zero > 0;
    l.precision = o->precision;
    l.grad_reduce = o->grad_reduce;
    l.optimizer_state = o->optimizer_state;
    l.seq = o->seq;
    l.attention = o->attention;
    l.cross_entropy = o->cross_entropy;
    l.grad_accum = o->grad_accum;
    l.p2p_sync = o->p2p_sync;
    l.p2p_whole = o->p2p_whole;
    l.grad_sync_end = o->grad_sync_end;
    return l;
}

void search3d_apply_runtime(plan *pl, const search3d_options *o)
{
    const sched_traits *tr = sched_traits_of(pl->schedule);
    pl->tp_overlap = pl->tp > 1 ? o->tp_overlap : TP_OVERLAP_NONE;
    pl->overlap_param_gather = o->overlap_param_gather && pl->zero == 1 && tr && !tr->async;
    pl->p2p_sync = o->p2p_sync ? 1 : 0;
    pl->p2p_whole = o->p2p_whole ? 1 : 0;
    pl->grad_sync_end = o->grad_sync_end && tr && !tr->async;
    pl->fp8_param_gather = o->fp8_param_gather && pl->precision == DEV_FP8 && pl->zero == 1;
}

/* 1 when the search tries kind k at V chunks per rank on pp ranks of `layers` layers: the
 * kind o fixes, else every synchronous kind that does not hold every microbatch of the
 * flush at once (gpipe: 1F1B's time with more memory); V within the kind's chunks, pp x V
 * dividing the layers, and two ranks or more for the chunked kinds. */
static int kind_ok(const search3d_options *o, int k, int v, int pp, long long layers)
{
    const sched_traits *tr = sched_traits_of((sched_kind)k);
    if (!tr || v < tr->chunks_min || v > tr->chunks_max) return 0;
    if (o->schedule != SEARCH3D_FREE ? k != o->schedule : tr->async || tr->hold == SCHED_HOLD_ALL)
        return 0;
    if (tr->chunks_max > 1 && pp < 2) return 0;
    if (sched_kind_chunked(k) && v < 2) return 0; /* the simulator refuses it (1f1b-flush) */
    if (o->p2p_sync && tr->place == SCHED_PLACE_V && o->schedule == SEARCH3D_FREE)
        return 0; /* they deadlock under blocking transfers (docs/sim.md) */
    return layers % ((long long)pp * v) == 0;
}

/* Adds estimated layout c to L when it fits (else remembers the one nearest to fitting).
 * Returns 1 when it fits, 0 when not, -1 when out of memory. */
static int record(cand_list *L, const search3d_cand *c)
{
    L->enumerated++;
    if (!c->est.fits) {
        double ratio = c->est.peak_bytes / (c->est.capacity_bytes > 0 ? c->est.capacity_bytes
                                                                       : 1);
        if (L->smallest_ratio == 0 || ratio < L->smallest_ratio) {
            L->smallest_ratio = ratio;
            L->smallest = *c;
        }
        return 0;
    }
    return list_push(L, c) ? -1 : 1;
}

/* Estimates plan pl at recomputation rc and the ZeRO stages want[0..nw) into est, sharing
 * ec with the layout's other estimates. */
static int estimate_at(plan *pl, const search3d_options *o, int rc, int nw, const int *want,
                       search3d_est *est, est_cache *ec, plumb_err *err)
{
    search3d_apply_runtime(pl, o);
    /* at every ZeRO stage estimated: sim_cost_stage_state gathers apart at zero 1 only */
    pl->overlap_param_gather = o->overlap_param_gather;
    pl->recompute = rc;
    pl->checkpoint_layers = rc != RECOMPUTE_FULL ? 0
                            : o->checkpoint_layers >= 0 ? o->checkpoint_layers : 1;
    return search3d_estimate_cached(pl, nw, want, est, ec, err);
}

/* Estimates the built plan pl of layout l at each recomputation and ZeRO stage o allows.
 * Full recomputation first: when it fits at no ZeRO stage, nothing less does (it keeps the
 * least). Then less recomputation first: recomputing only adds compute (sim/cost.c), so
 * once a ZeRO stage fits, more recomputation at that stage is not tried. Sets *any_fit when
 * one fits. 0, or -1 with err. */
static int try_plan_shared(cand_list *L, const search3d_options *o, plan *pl,
                           layout3d_options l, const layout3d_dims *d, int *any_fit,
                           est_cache *ec, plumb_err *err)
{
    static const int order[] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    int zeros[2], nz = 0, done[2] = {0, 0}, full_fits = 0;
    search3d_est full[2];
    for (int z = 0; z <= 1; z++)
        if (o->zero != SEARCH3D_FREE ? z == o->zero : !z || d->dp * d->cp > 1)
            zeros[nz++] = z; /* ZeRO-1 shards over dp x cp */
    if (o->recompute == SEARCH3D_FREE) {
        if (estimate_at(pl, o, RECOMPUTE_FULL, nz, zeros, full, ec, err)) return -1;
        for (int i = 0; i < nz; i++) full_fits |= full[i].fits;
        if (!full_fits) {
            for (int i = 0; i < nz; i++) {
                search3d_cand c = {.o = l, .d = *d, .est = full[i]};
                c.o.recompute = RECOMPUTE_FULL;
                c.o.zero = zeros[i];
                record(L, &c);
            }
            return 0;
        }
    }
    for (int ri = 0; ri < 3; ri++) {
        int rc = order[ri], want[2], nw = 0, idx[2];
        if (o->recompute != SEARCH3D_FREE && rc != o->recompute) continue;
        for (int i = 0; i < nz; i++)
            if (!done[i]) idx[nw] = i, want[nw++] = zeros[i];
        if (!nw) break;
        search3d_est est[2];
        if (o->recompute == SEARCH3D_FREE && rc == RECOMPUTE_FULL) {
            for (int i = 0; i < nw; i++) est[i] = full[idx[i]];
        } else if (estimate_at(pl, o, rc, nw, want, est, ec, err)) {
            return -1;
        }
        for (int i = 0; i < nw; i++) {
            search3d_cand c = {.o = l, .d = *d, .est = est[i]};
            c.o.recompute = rc;
            c.o.zero = want[i];
            int k = record(L, &c);
            if (k < 0) return err_set(err, NULL, NULL, "out of memory");
            if (k) *any_fit = done[idx[i]] = 1;
        }
    }
    return 0;
}

/* try_plan_shared, the layout's estimates sharing its schedules and rings (est_cache). */
static int try_plan(cand_list *L, const search3d_options *o, plan *pl, layout3d_options l,
                    const layout3d_dims *d, int *any_fit, plumb_err *err)
{
    est_cache ec = {0};
    int rc = try_plan_shared(L, o, pl, l, d, any_fit, &ec, err);
    est_cache_free(&ec);
    return rc;
}

/* 1 when tp ranks divide a server of per_server devices and the model's heads, key/value
 * heads and MLP width (what llm_profile_build asks). */
static int tp_ok(const transformer *t, int tp, int per_server)
{
    return per_server % tp == 0 && t->heads % tp == 0 && t->kv_heads % tp == 0 &&
           t->ffn % tp == 0;
}

/* 1 when the search tries cp context-parallel ranks at tp: the cp o fixes (> 0), else 1,
 * or 2, 4, 8 that llm_cp_check allows: the attention flash, 2 cp dividing the sequence
 * (seq tokens) and tp x cp a server of per_server devices, and t has no sliding window
 * shorter than the sequence (llm_profile_build refuses cp > 1 with one). */
static int cp_ok(const transformer *t, const search3d_options *o, int tp, int cp,
                 long long seq, int per_server)
{
    if (o->cp > 0) return cp == o->cp;
    if (cp == 1) return 1;
    return (cp == 2 || cp == 4 || cp == 8) && !transformer_window_applies(t, seq) &&
           llm_cp_check(cp, o->attention, seq, tp, per_server) == LLM_CP_OK;
}

/* Enumerates and estimates every layout of the free dimensions. 0, or -1 with err. */
static int enumerate(cand_list *L, const transformer *t, const cluster *cut,
                     const char *cluster_file, const search3d_options *o, int *layouts,
                     int *batch_layouts, plumb_err *err)
{
    int gpus = cut->ndevices, per_server = cut->levels[0].count;
    long long seq = o->seq > 0 ? o->seq : t->seq;
    *layouts = *batch_layouts = 0;
    for (int tcp = 0; tcp < per_server * 8; tcp++) {
        int tp = 1 + tcp % per_server, cp = 1 + tcp / per_server;
        if (o->tp > 0 ? tp != o->tp : !tp_ok(t, tp, per_server)) continue;
        if (!cp_ok(t, o, tp, cp, seq, per_server)) continue;
        for (int pp = 1; pp <= t->layers && pp <= gpus / (tp * cp); pp++) {
            if ((o->pp > 0 && pp != o->pp) || t->layers % pp || gpus % (tp * cp * pp)) continue;
            int dp = gpus / (tp * cp * pp);
            if (o->dp > 0 && dp != o->dp) continue;
            for (int vk = 0; vk < 64 * SCHED_NKINDS; vk++) {
                int v = 1 + vk / SCHED_NKINDS, k = vk % SCHED_NKINDS;
                if ((o->interleave > 0 && v != o->interleave) || v * pp > t->layers) continue;
                if (!kind_ok(o, k, v, pp, t->layers)) continue;
                ++*layouts;
                if (!L->min_dp || dp < L->min_dp) L->min_dp = dp;
                if (o->global_batch % dp) continue;
                ++*batch_layouts;
                int per_replica = o->global_batch / dp;
                for (int b = 1; b <= per_replica; b++) {
                    if (o->microbatch_size > 0 ? b != o->microbatch_size : per_replica % b)
                        continue;
                    int fit_b = 0;
                    for (int sp = 0; sp <= 1; sp++) {
                        if (o->sequence_parallel != SEARCH3D_FREE ? sp != o->sequence_parallel
                                                                  : sp && tp < 2)
                            continue;
                        layout3d_options l = layout_of(o, gpus, tp, cp, pp, dp, b, v, k);
                        l.sequence_parallel = sp;
                        layout3d_dims d;
                        plumb_err e2 = {{0}};
                        if (layout3d_resolve(t, cut, cluster_file, &l, &d, &e2)) continue;
                        plan *pl = layout3d_build(t, cut, cluster_file, &l, &e2);
                        if (!pl) { /* e.g. a tp the model does not divide */
                            if (!L->build_err.msg[0]) L->build_err = e2;
                            continue;
                        }
                        L->built++;
                        int rc = try_plan(L, o, pl, l, &d, &fit_b, err);
                        plan_free(pl);
                        if (rc) return -1;
                    }
                    /* larger microbatches need more memory: none will fit */
                    if (!fit_b && o->microbatch_size <= 0) break;
                }
            }
        }
    }
    return 0;
}

static int cmp_est(const void *a, const void *b)
{
    const search3d_cand *x = a, *y = b;
    if (x->est.iteration_s != y->est.iteration_s)
        return x->est.iteration_s < y->est.iteration_s ? -1 : 1;
    return 0;
}

/* By simulated throughput, then by the estimate (the order the best was kept in). */
static int cmp_sim(const void *a, const void *b)
{
    const search3d_cand *x = a, *y = b;
    if (x->tokens_per_s != y->tokens_per_s) return x->tokens_per_s > y->tokens_per_s ? -1 : 1;
    return cmp_est(a, b);
}

/* The line when no layout fits: the smallest peak and what would fit. */
static void no_fit(const cand_list *L, const search3d_options *o, int gpus, plumb_err *err)
{
    const search3d_cand *s = &L->smallest;
    char pk[32], cap[32], hint[256];
    size_t h = 0;
    hint[0] = 0;
    if (o->recompute != SEARCH3D_FREE && o->recompute != RECOMPUTE_FULL)
        h += (size_t)snprintf(hint + h, sizeof hint - h, "--recompute full, ");
    if (o->microbatch_size > 1)
        h += (size_t)snprintf(hint + h, sizeof hint - h, "a smaller --microbatch-size, ");
    if (o->zero == 0)
        h += (size_t)snprintf(hint + h, sizeof hint - h, "--zero 1, ");
    if (o->tp > 0 || o->pp > 0)
        h += (size_t)snprintf(hint + h, sizeof hint - h, "freeing --tp/--pp, ");
    double more = gpus * L->smallest_ratio;
    int per = s->o.tp * (s->o.cp > 1 ? s->o.cp : 1) * s->o.pp;
    long long need = per > 0 ? ((long long)(more + per - 1) / per) * per : (long long)more;
    snprintf(hint + h, sizeof hint - h, "about %lld GPUs or more", need);
    char cps[24] = ""; /* only > 1: as before */
    if (s->d.cp > 1) snprintf(cps, sizeof cps, " x cp %d", s->d.cp);
    err_set(err, NULL, "--gpus", "expected a layout that fits the devices' memory (got the "
            "smallest peak %s of %s, at tp %d%s x pp %d x dp %d, microbatch %d, recompute %s); "
            "try %s", units_bytes(s->est.peak_bytes, pk, sizeof pk),
            units_bytes(s->est.capacity_bytes, cap, sizeof cap), s->d.tp, cps, s->d.pp, s->d.dp,
            s->o.microbatch_size, recompute_kind_name((recompute_kind)s->o.recompute), hint);
}

/* One line for a search that found no layout: the fixed options' own error (what
 * layout3d refuses), the GPU count, the global batch or the memory. */
static void explain(const cand_list *L, const transformer *t, const cluster *cut,
                    const char *cluster_file, const search3d_options *o, int layouts,
                    int batch_layouts, plumb_err *err)
{
    int gpus = cut->ndevices, per = cut->levels[0].count;
    if (!layouts) {
        /* a fixed option that layout3d refuses names itself */
        layout3d_options l = layout_of(o, gpus, o->tp, o->cp, o->pp, o->dp,
                                       o->microbatch_size > 0 ? o->microbatch_size : 1,
                                       o->interleave > 0 ? o->interleave : 0, o->schedule);
        if ((o->tp > 0) + (o->pp > 0) + (o->dp > 0) >= 2) {
            layout3d_dims d;
            l.global_batch = o->global_batch;
            if (layout3d_resolve(t, cut, cluster_file, &l, &d, err)) return;
        }
        if (o->tp > 0 && !tp_ok(t, o->tp, per)) {
            err_set(err, NULL, "--tp", "expected a divisor of the %d devices of one server and "
                    "of the model's %lld heads, %lld key/value heads and MLP width %lld (got "
                    "%d)", per, t->heads, t->kv_heads, t->ffn, o->tp);
            return;
        }
        if (o->pp > 0 && (o->pp > t->layers || t->layers % o->pp)) {
            err_set(err, NULL, "--pp", "expected a divisor of the %lld layers (got %d)",
                    t->layers, o->pp);
            return;
        }
        err_set(err, NULL, "--gpus", "expected a GPU count that tp (dividing a server's %d "
                "devices and the model's heads) x pp (dividing the %lld layers, with the "
                "interleaving) x dp can use%s (got %d)", per, t->layers,
                o->tp > 0 || o->pp > 0 || o->dp > 0 || o->interleave > 0
                    ? ", with the fixed dimensions" : "", gpus);
        return;
    }
    if (!batch_layouts) {
        err_set(err, NULL, "--global-batch", "expected a multiple of the data-parallel "
                "replicas of some layout (dp = %d GPUs / (tp x pp)%s: a multiple of %d would "
                "do) (got %d)", gpus, o->dp > 0 ? ", fixed by --dp" : "", L->min_dp,
                o->global_batch);
        return;
    }
    if (L->smallest_ratio > 0) {
        no_fit(L, o, gpus, err);
        return;
    }
    if (!L->built && L->build_err.msg[0]) { /* every layout failed to build: say why */
        *err = L->build_err;
        return;
    }
    err_set(err, NULL, "--microbatch-size", "expected a microbatch size that divides the "
            "global batch of each replica (got %d)", o->microbatch_size);
}

/* --balance: balances pl's stages (layout3d_balance, from pl's even report *rep) and, when
 * they moved, replaces *rep with the balanced plan's simulation. 0, or -1 with err. */
static int balance_plan(plan *pl, sim_report **rep, layout3d_balance_result *bal,
                        plumb_err *err)
{
    if (layout3d_balance(pl, NULL, *rep, bal, err)) return -1;
    if (!bal->changed) return 0;
    sim_report_free(*rep);
    *rep = sim_run_folded(pl, NULL, 0, err);
    return *rep ? 0 : -1;
}

/* Refuses, before any is simulated, first k candidates of L whose simulations would
 * together replay more than SEARCH3D_MAX_ACTIONS, or one more than SIM_MAX_ACTIONS
 * (sim_actions_estimate of the whole plan: what sim_run_folded checks where it cannot fold;
 * a folded run takes less): -1 with err on --global-batch, else 0 (also when a plan does
 * not build: simulate says why). */
static int over_budget(const cand_list *L, const transformer *t, const cluster *cut,
                       const char *cluster_file, int k, plumb_err *err)
{
    double total = 0, top = 0;
    int big_st = 0, big_m = 0;
    for (int i = 0; i < k; i++) {
        plumb_err e;
        err_clear(&e);
        plan *pl = layout3d_build(t, cut, cluster_file, &L->c[i].o, &e);
        if (!pl) continue;
        int m = pl->microbatches;
        double a = sim_actions_estimate(pl, m, SIM_DEFAULT_ITERATIONS);
        total += a;
        if (a > top) top = a, big_st = pl->nstages, big_m = m;
        plan_free(pl);
    }
    if (top > SIM_MAX_ACTIONS)
        return err_set(err, NULL, "--global-batch", "a layout the search simulates makes "
                       "about %.3g actions (%d stages x %d microbatches), above the %.3g one "
                       "run may take (about %.0f s): expected a smaller global batch (or a "
                       "larger --microbatch-size)", top, big_st, big_m, SIM_MAX_ACTIONS,
                       SIM_MAX_ACTIONS / SIM_ACTIONS_PER_S);
    if (total <= SEARCH3D_MAX_ACTIONS) return 0;
    return err_set(err, NULL, "--global-batch", "the %d layouts the search simulates make about "
                   "%.3g actions (the largest %d stages x %d microbatches), above the %.3g one "
                   "search may take (about %.0f s): expected a smaller global batch (or a "
                   "larger --microbatch-size)", k, total, big_st, big_m, SEARCH3D_MAX_ACTIONS,
                   SEARCH3D_MAX_ACTIONS / SIM_ACTIONS_PER_S);
}

/* Simulates the first k candidates of L in full and ranks those that fit by simulated
 * throughput; keeps the best one's plan and report in r. 0 or -1 with err. */
static int simulate(search3d_result *r, cand_list *L, const transformer *t, const cluster *cut,
                    const char *cluster_file, const search3d_options *o, int k, plumb_err *err)
{
    if (over_budget(L, t, cut, cluster_file, k, err)) return -1;
    r->ranked = calloc((size_t)k + 1, sizeof *r->ranked);
    if (!r->ranked) return err_set(err, NULL, NULL, "out of memory");
    double best = 0;
    for (int i = 0; i < k; i++) {
        search3d_cand c = L->c[i];
        plan *pl = layout3d_build(t, cut, cluster_file, &c.o, err);
        if (pl) search3d_apply_runtime(pl, o);
        sim_report *rep = pl ? sim_run_folded(pl, NULL, 0, err) : NULL;
        layout3d_balance_result bal = {0};
        if (rep) c.even_iteration_s = rep->iteration_s;
        if (rep && o->balance && balance_plan(pl, &rep, &bal, err)) {
            sim_report_free(rep);
            rep = NULL;
        }
        if (!rep) {
            plan_free(pl);
            return -1;
        }
        c.o.balance = o->balance;
        c.balanced = bal.changed;
        c.simulated = 1;
        c.iteration_s = rep->iteration_s;
        c.tokens_per_s = rep->tokens_per_s;
        c.tflops_per_gpu = rep->tflops_per_gpu;
        c.mfu = rep->mfu;
        c.bubble_fraction = rep->bubble_fraction;
        c.peak_bytes = rep->peak_memory_bytes;
        c.fits = rep->fits;
        if (c.fits) r->ranked[r->nranked++] = c;
        if (c.fits && (!r->best_report || c.tokens_per_s > best)) { /* ties: the estimate's */
            plan_free(r->best);
            sim_report_free(r->best_report);
            r->best = pl, r->best_report = rep;
            r->best_balance = bal;
            pl = NULL, rep = NULL;
            best = c.tokens_per_s;
        }
        plan_free(pl);
        sim_report_free(rep);
    }
    qsort(r->ranked, (size_t)r->nranked, sizeof *r->ranked, cmp_sim);
    return 0;
}

int search3d_runtime_check(const search3d_options *o, plumb_err *err)
{
    if (plan_checkpoint_check(o->recompute, o->checkpoint_layers, -1, NULL, err)) return -1;
    const sched_traits *tr = o->schedule >= 0 ? sched_traits_of((sched_kind)o->schedule) : NULL;
    if (plan_runtime_check(tr, o->zero == SEARCH3D_FREE ? -1 : o->zero, o->overlap_param_gather,
                           o->p2p_sync, o->grad_sync_end, NULL, err))
        return -1;
    if (o->precision != DEV_BF16 && o->precision != DEV_FP8 &&
        (o->grad_reduce == DEV_BF16 || o->optimizer_state == DEV_BF16))
        return err_set(err, NULL, o->grad_reduce == DEV_BF16 ? "--grad-reduce bf16"
                                                              : "--optimizer-state bf16",
                       "belongs to --precision bf16 or fp8 (got --precision %s)",
                       dev_precision_name(o->precision));
    /* Megatron-Core: fp8_param needs fp8 (TransformerConfig), --fp8-param-gather the
     * distributed optimizer (arguments.py; docs/llm.md, "FP8 primary weights") */
    if (o->fp8_param_gather && o->precision != DEV_FP8)
        return err_set(err, NULL, "--fp8-param-gather", "belongs to --precision fp8 (FP8 "
                       "primary weights) (got --precision %s)", dev_precision_name(o->precision));
    if (o->fp8_param_gather && o->zero != 1)
        return err_set(err, NULL, "--fp8-param-gather", "expected --zero 1 (Megatron-Core's "
                       "FP8 primary weights need the distributed optimizer) (got %s)",
                       o->zero == 0 ? "--zero 0" : "no --zero");
    if (o->tp_overlap != TP_OVERLAP_NONE && o->tp > 0 && o->tp < 2)
        return err_set(err, NULL, "--tp-overlap", "expected --tp 2 or more (no "
                       "tensor-parallel collectives to overlap) (got --tp %d)", o->tp);
    return 0;
}

int search3d_options_check(const search3d_options *o, plumb_err *err)
{
    if (o->schedule != SEARCH3D_FREE) {
        const sched_traits *tr = sched_traits_of((sched_kind)o->schedule);
        if (!tr)
            return err_set(err, NULL, "--schedule", "expected a schedule kind (got %d)",
                           o->schedule);
        if (tr->async)
            return err_set(err, NULL, "--schedule", "expected a synchronous schedule for the "
                           "layout search (got %s, %s: it changes training semantics; give "
                           "--tp, --pp and --dp to lay it out as it is)", tr->name,
                           tr->semantics);
        if (o->interleave > 0) { /* no layout could take them (layout3d's words) */
            int v = o->interleave;
            if (v > 1 && tr->chunks_max == 1)
                return err_set(err, NULL, "--interleave", "expected 1 with schedule %s, "
                               "which runs one stage per pipeline rank (got %d)", tr->name, v);
            if (v < tr->chunks_min || v > tr->chunks_max)
                return err_set(err, NULL, "--interleave", "expected %d to %d virtual stages "
                               "per rank with schedule %s (got %d)", tr->chunks_min,
                               tr->chunks_max, tr->name, v);
            if (v < 2 && sched_kind_chunked(o->schedule))
                return err_set(err, NULL, "--interleave", "expected 2 or more virtual stages "
                               "per rank with schedule %s (got 1; with one stage per rank "
                               "use 1f1b-flush)", tr->name);
        }
    }
    if (search3d_runtime_check(o, err)) return -1;
    if (o->global_batch < 1)
        return err_set(err, NULL, "--global-batch", "expected an integer >= 1 (got %d)",
                       o->global_batch);
    return 0;
}

void search3d_runtime_text(const search3d_options *o, char *buf, size_t n)
{
    size_t h = 0;
    buf[0] = 0;
    if (o->tp_overlap != TP_OVERLAP_NONE)
        h += (size_t)snprintf(buf, n, "tp overlap %s (tp > 1)",
                              plan_tp_overlap_name(o->tp_overlap));
    if (o->overlap_param_gather && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%sparameter all-gather under the forward "
                              "(zero 1)", h ? ", " : "");
    if (o->p2p_sync && h < n) h += (size_t)snprintf(buf + h, n - h, "%sp2p sync", h ? ", " : "");
    if (o->p2p_whole && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%sp2p whole tensor (tp > 1 without sequence "
                              "parallelism)", h ? ", " : "");
    if (o->grad_sync_end && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%sgradients reduced at the end", h ? ", " : "");
    if (o->grad_reduce != DEV_FP32 && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%sgradients %s", h ? ", " : "",
                              dev_precision_name(o->grad_reduce));
    if (o->optimizer_state != DEV_FP32 && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%soptimizer state %s", h ? ", " : "",
                              dev_precision_name(o->optimizer_state));
    if (o->fp8_param_gather && h < n)
        h += (size_t)snprintf(buf + h, n - h, "%sfp8 param gather", h ? ", " : "");
    if (o->grad_accum == LLM_GA_UNFUSED && h < n)
        snprintf(buf + h, n - h, "%sgrad accumulation unfused", h ? ", " : "");
}

search3d_result *search3d_run(const transformer *t, const cluster *c, const char *cluster_file,
                              const search3d_options *o, plumb_err *err)
{
    long long seq = o->seq > 0 ? o->seq : t->max_positions;
    if (search3d_options_check(o, err) || llm_seq_check(t, seq, err) ||
        llm_window_cp_check(t, o->cp, seq, err))
        return NULL;
    search3d_result *r = calloc(1, sizeof *r);
    cand_list L = {0};
    cluster *cut = NULL;
    if (!r) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    double t0 = cpu_s();
    cut = cluster_take_gpus(c, o->gpus > 0 ? o->gpus : c->ndevices, cluster_file, err);
    if (!cut) goto fail;
    /* a device without the precision's figures (fp8 on A100) is named here: every layout's
     * profile would fail alike and the search would report no layout instead */
    if (cut->nservers > 0 &&
        !device_has_figures(&cut->types[cut->server_type[0]], o->precision, cluster_file,
                            cut->server_type[0], err))
        goto fail;
    int layouts, batch_layouts;
    if (enumerate(&L, t, cut, cluster_file, o, &layouts, &batch_layouts, err)) goto fail;
    r->enumerated = L.enumerated;
    r->fitting = L.n;
    if (!L.n) {
        explain(&L, t, cut, cluster_file, o, layouts, batch_layouts, err);
        goto fail;
    }
    qsort(L.c, (size_t)L.n, sizeof *L.c, cmp_est);
    double t1 = cpu_s();
    r->estimate_cpu_s = t1 - t0;
    int k = o->simulate > 0 ? o->simulate
            : SEARCH3D_SIMULATE * (o->p2p_sync ? SEARCH3D_SYNC_FACTOR : 1);
    if (k > L.n) k = (int)L.n;
    if (simulate(r, &L, t, cut, cluster_file, o, k, err)) goto fail;
    if (!r->nranked) {
        err_set(err, NULL, "--gpus", "expected a layout that fits the devices' memory in the "
                "simulation (the %d best estimates do not)", k);
        goto fail;
    }
    r->best->pred_iteration_s = r->best_report->iteration_s;
    r->best->pred_samples_per_s = r->best_report->samples_per_s;
    r->simulate_cpu_s = cpu_s() - t1;
    free(L.c);
    cluster_free(cut);
    return r;
fail:
    free(L.c);
    cluster_free(cut);
    search3d_free(r);
    return NULL;
}

void search3d_free(search3d_result *r)
{
    if (!r) return;
    free(r->ranked);
    plan_free(r->best);
    sim_report_free(r->best_report);
    free(r);
}

void search3d_why(const search3d_result *r, int i, char *buf, size_t n)
{
    const search3d_cand *c = &r->ranked[i], *w = &r->ranked[0];
    const search3d_est *e = &c->est;
    double it = e->iteration_s > 0 ? e->iteration_s : 1;
    size_t h = 0;
    buf[0] = 0;
    if (i > 0 && w->tokens_per_s > 0) {
        /* the part of the estimate that grew most against the winner's (seconds) */
        struct { const char *name; double x, y; } part[] = {
            {"bubble", e->bubble_s, w->est.bubble_s}, {"TP comm", e->tp_s, w->est.tp_s},
            {"DP all-reduce", e->dp_s, w->est.dp_s}, {"pipeline sends", e->p2p_s, w->est.p2p_s},
            {"busiest rank's compute", e->compute_s, w->est.compute_s},
            {"optimizer step", e->step_s, w->est.step_s}};
        int worst = 0;
        for (int k = 1; k < 6; k++)
            if (part[k].x - part[k].y > part[worst].x - part[worst].y) worst = k;
        double slower = 100 * (1 - c->tokens_per_s / w->tokens_per_s);
        if (part[worst].x - part[worst].y < 1e-3 * it) { /* the estimate sees no loss */
            h += (size_t)snprintf(buf + h, n - h, "%.1f %% slower in the full simulation "
                                  "(the estimate has it %.1f %% %s #1); ", slower,
                                  100 * fabs(e->iteration_s / w->est.iteration_s - 1),
                                  e->iteration_s < w->est.iteration_s ? "ahead of" : "behind");
        } else {
            h += (size_t)snprintf(buf + h, n - h, "%.1f %% slower: %s %+.2f s against #1 "
                                  "(%.1f %% of its iteration) at tp %d x pp %d", slower,
                                  part[worst].name, part[worst].x - part[worst].y,
                                  100 * part[worst].x / it, c->d.tp, c->d.pp);
            if (worst == 4 && c->o.recompute != w->o.recompute)
                h += (size_t)snprintf(buf + h, n - h, " with %s recompute",
                                      recompute_kind_name((recompute_kind)c->o.recompute));
            h += (size_t)snprintf(buf + h, n - h, "; ");
        }
        if (h >= n) return;
    }
    snprintf(buf + h, n - h, "bubble %.1f %%, TP comm %.1f %%, DP exposed %.1f %%, fits with "
             "%s recompute", 100 * e->bubble_s / it, 100 * e->tp_s / it, 100 * e->dp_s / it,
             recompute_kind_name((recompute_kind)c->o.recompute));
}

cJSON *search3d_cand_json(const search3d_cand *c)
{
    cJSON *e = cJSON_CreateObject();
    if (!e) return NULL;
    cJSON_AddNumberToObject(e, "tp", c->d.tp);
    if (c->d.cp > 1) cJSON_AddNumberToObject(e, "cp", c->d.cp); /* only > 1: as before */
    cJSON_AddNumberToObject(e, "pp", c->d.pp);
    cJSON_AddNumberToObject(e, "dp", c->d.dp);
    cJSON_AddNumberToObject(e, "microbatch_size", c->o.microbatch_size);
    cJSON_AddNumberToObject(e, "interleave", c->d.interleave);
    cJSON_AddStringToObject(e, "schedule", sched_kind_name(c->d.schedule));
    cJSON_AddStringToObject(e, "recompute", recompute_kind_name((recompute_kind)c->o.recompute));
    cJSON_AddBoolToObject(e, "sequence_parallel", c->o.sequence_parallel);
    cJSON_AddNumberToObject(e, "zero", c->o.zero);
    cJSON_AddNumberToObject(e, "iteration_s", c->iteration_s);
    cJSON_AddNumberToObject(e, "estimate_iteration_s", c->est.iteration_s);
    cJSON_AddNumberToObject(e, "tokens_per_s", c->tokens_per_s);
    cJSON_AddNumberToObject(e, "tflops_per_gpu", c->tflops_per_gpu);
    cJSON_AddNumberToObject(e, "mfu", c->mfu);
    cJSON_AddNumberToObject(e, "peak_bytes", c->peak_bytes);
    cJSON_AddNumberToObject(e, "capacity_bytes", c->est.capacity_bytes);
    if (c->o.balance) { /* only with --balance: other rankings read as before */
        cJSON_AddBoolToObject(e, "balanced", c->balanced);
        cJSON_AddNumberToObject(e, "even_iteration_s", c->even_iteration_s);
    }
    return e;
}
