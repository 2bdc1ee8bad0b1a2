/* auto.c: `--schedule auto`: the search over schedules, microbatch counts, microbatch sizes
 * and recomputation (each candidate partitioned by the native dynamic program and priced by
 * the native cost model, the best simulated; the kinds the asked runtime refuses skipped,
 * with the reason its rule's owner gives), the reason each ranked candidate wins or
 * loses, and the ranking's text and JSON forms. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/json.h"

static const sched_kind AUTO_KINDS[] = {SCHED_PIPEDREAM, SCHED_1F1B_FLUSH, SCHED_2BW,
                                        SCHED_GPIPE, SCHED_INTERLEAVED, SCHED_ZB_H1};
#define AUTO_NKINDS (int)(sizeof AUTO_KINDS / sizeof AUTO_KINDS[0])
#define AUTO_MAX_M 1024

static int flushing(sched_kind k) { return !sched_traits_of(k)->async; }

/* Adds, for the fitting candidates cs->v[from..], the same partitions with 2x the
 * microbatches (flushing kinds only: more microbatches per flush shrink the bubble, at the
 * price of a larger minibatch and, for gpipe, memory). */
static int add_m_variants(const nm_models *ms, nm_cands *cs, int from)
{
    int end = cs->n;
    for (int i = from; i < end; i++) {
        if (!flushing(cs->v[i].s.kind)) continue;
        for (int f = 2; f <= 2; f *= 2) {
            nm_cand c = cs->v[i];
            c.s.M *= f;
            c.must = 0; /* the baseline itself is simulated; its variant competes */
            if (c.s.M > AUTO_MAX_M) break;
            nm_price(&ms->m[c.mod], &c.s, &c.pt);
            if (!c.pt.fits) break;
            if (nm_cands_push(cs, &c)) return -1;
        }
    }
    return 0;
}

/* 1 when a and b run the same partition the same way (schedule, microbatching,
 * recomputation, stages and their devices); predicted figures are not compared. */
static int same_partition(const native_candidate *a, const native_candidate *b)
{
    const plan *x = a->pl, *y = b->pl;
    if (!x || !y || x->schedule != y->schedule || x->chunks != y->chunks ||
        x->microbatches != y->microbatches || x->microbatch_size != y->microbatch_size ||
        x->recompute != y->recompute || x->nstages != y->nstages)
        return 0;
    for (int s = 0; s < x->nstages; s++) {
        const plan_stage *u = &x->stages[s], *v = &y->stages[s];
        if (u->first_layer != v->first_layer || u->last_layer != v->last_layer ||
            u->replicas != v->replicas ||
            memcmp(u->devices, v->devices, (size_t)u->replicas * sizeof(int)))
            return 0;
    }
    return 1;
}

/* 1 when o's runtime refuses kind (native_runtime_check, the rule's owner): recorded in
 * res->skipped with the owner's line, for the ranking to say. 0 when it takes it. */
static int skip_kind(const native_options *o, sched_kind kind, native_result *res)
{
    plumb_err e;
    err_clear(&e);
    if (!native_runtime_check(o, kind, &e)) return 0;
    if (res->nskipped < NATIVE_MAX_SKIPPED) {
        res->skipped[res->nskipped].schedule = kind;
        char *r = res->skipped[res->nskipped].reason;
        snprintf(r, sizeof res->skipped[0].reason, "%.*s",
                 (int)sizeof res->skipped[0].reason - 1, e.msg);
        res->nskipped++;
    }
    return 1;
}

/* The default plan's search (planner_native for 1f1b-flush under the same options) on
 * auto's own models ms, into dr (native_result_free): auto's search is coarser per
 * schedule (quick programs for recomputation and smaller microbatches, one simulated
 * estimate per schedule), and without the default's winner it could rank a slower plan
 * first than the one `plumb plan` gives by default. It runs before auto's own search, so
 * that auto's 1f1b-flush programs, the default's in their quick form, are the ones the
 * models keep (nm_model.kept) and not solved twice. Returns nm_search's 0 or -1. */
static int default_search(const nm_models *ms, const profile *p, const native_options *o,
                          const native_result *res, native_result *dr, plumb_err *err)
{
    native_options od = *o;
    od.schedule = SCHED_1F1B_FLUSH;
    od.no_suggest = 1;
    nm_setting s = {.kind = SCHED_1F1B_FLUSH, .M = o->microbatches,
                    .mbsize = o->microbatch_size > 0 ? o->microbatch_size : p->minibatch,
                    .recompute = o->recompute == 1,
                    .chunks = o->chunks > 1 ? o->chunks : sched_kind_chunks(SCHED_1F1B_FLUSH),
                    .opt = o->optimizer, .nstages = o->nstages,
                    .p2p_sync = o->p2p_sync ? 1 : 0,
                    .grad_sync_end = o->grad_sync_end ? 1 : 0, .zero = o->zero ? 1 : 0};
    memset(dr, 0, sizeof *dr);
    dr->single_samples_per_s = res->single_samples_per_s; /* nm_begin's, as for auto */
    dr->capacity_bytes = res->capacity_bytes;
    return nm_search(ms, &od, &s, dr, err);
}

/* Ranks the default search's winner (dr, failed: its nm_search failed) among auto's
 * candidates, replacing auto's own copy of that partition, by the planner's one rule
 * (nm_rank_results); frees dr. Returns 0 (also when the default found no plan: auto's own
 * ranking stands), -1 with err when out of memory. */
static int add_default(native_result *dr, int failed, native_result *res, plumb_err *err)
{
    res->dp_runs += dr->dp_runs;
    res->nsimulated += dr->nsimulated;
    res->nexact += dr->nexact;
    res->sim_budget_used += dr->sim_budget_used;
    native_candidate *d = NULL;
    for (int i = 0; !failed && i < dr->ncand && !d; i++)
        if (dr->cand[i].fits && dr->cand[i].pl) d = &dr->cand[i];
    if (!d) {
        native_result_free(dr);
        return 0;
    }
    int at = -1;
    for (int i = 0; i < res->ncand && at < 0; i++)
        if (same_partition(&res->cand[i], d)) at = i;
    if (at < 0) {
        native_candidate *v = realloc(res->cand, ((size_t)res->ncand + 1) * sizeof *v);
        if (!v) {
            native_result_free(dr);
            return err_set(err, NULL, NULL, "out of memory");
        }
        res->cand = v;
        at = res->ncand++;
    } else {
        plan_free(res->cand[at].pl);
    }
    res->cand[at] = *d;
    d->pl = NULL; /* now res's */
    native_result_free(dr);
    res->nothing_fits = 0;
    nm_rank_results(res);
    nm_reasons(res);
    return 0;
}

int planner_auto(const profile *p, const cluster *c, const native_options *o,
                 native_result *res, plumb_err *err)
{
    native_options dflt;
    if (!o) {
        native_options_init(&dflt);
        o = &dflt;
    }
    double t0 = nm_now_ms();
    nm_models ms;
    if (nm_begin(p, c, o, res, &ms, err)) return -1;
    nm_cands cs = {0};
    native_result dr;
    plumb_err de;
    int dfail = default_search(&ms, p, o, res, &dr, &de);
    if (dfail && dr.over_budget) { /* auto simulates at least as much: refused now */
        *err = de;
        res->over_budget = 1;
        res->sim_budget_used += dr.sim_budget_used;
        nm_models_free(&ms);
        native_result_free(&dr);
        return -1;
    }
    int mb0 = o->microbatch_size > 0 ? o->microbatch_size : p->minibatch;
    /* baselines: data parallelism only (have bit 1 set: a 32-stage straight pipeline
     * takes ~10 ms to simulate, and auto's own 1f1b-flush candidates include pipelines) */
    int fixedM = o->microbatches > 0, have = 2;
    /* zb-h1 reuses 1f1b-flush's partitions and 2bw pipedream's (re-priced: their memory
     * differs a little); each gets its own program only when none of those fits */
    for (int k = 0; k < AUTO_NKINDS; k++) {
        sched_kind kind = AUTO_KINDS[k];
        if (skip_kind(o, kind, res)) continue;
        /* the profiled microbatch size first; smaller ones only when nothing fits */
        for (int mb = mb0; mb >= 1; mb /= 2) {
            int before = cs.n, fit = 0;
            /* recomputation off, on, or both (the default), as asked */
            for (int rc = o->recompute == 1 ? 1 : 0; rc <= (o->recompute == 0 ? 0 : 1); rc++) {
                nm_setting s = {.kind = kind, .M = o->microbatches, .mbsize = mb,
                                .recompute = rc,
                                .chunks = o->chunks > 1 ? o->chunks : sched_kind_chunks(kind),
                                .opt = o->optimizer, .quick = rc || mb != mb0,
                                .nstages = o->nstages, .p2p_sync = o->p2p_sync ? 1 : 0,
                                .grad_sync_end = o->grad_sync_end ? 1 : 0,
                                .zero = o->zero ? 1 : 0};
                /* quick (min-max and one threshold) for recomputation and the smaller
                 * microbatches: they matter when memory is short, where the min-max
                 * partition is what fits */
                int n = 0;
                sched_kind base = sched_traits_of(kind)->partition_twin;
                if (base != kind) {
                    int from = -1, to = -1;
                    for (int i = 0; i < cs.n; i++)
                        if (cs.v[i].s.kind == base && cs.v[i].s.mbsize == mb &&
                            cs.v[i].s.recompute == rc) {
                            if (from < 0) from = i;
                            to = i + 1;
                        }
                    if (from >= 0) n = nm_reprice(&ms, &cs, from, to, kind, fixedM);
                }
                if (n == 0) n = nm_gather(&ms, &s, fixedM, &cs, &res->dp_runs);
                /* the default schedule's data parallelism, simulated (unless clearly
                 * slower), so auto never ranks below it */
                /* (at the largest microbatch size where it fits) */
                if (n >= 0 && kind == SCHED_1F1B_FLUSH) {
                    int b = nm_baselines(&ms, &s, fixedM, &cs, &res->dp_runs, &have);
                    n = b < 0 ? -1 : n + b;
                }
                if (n < 0) goto oom;
                fit += n;
            }
            if (!fixedM && add_m_variants(&ms, &cs, before)) goto oom;
            if (o->microbatch_size > 0) break;
            /* halving the microbatch frees activation memory (other partitions, fewer
             * stages, more replicas); tried down to a quarter of the profiled size, where
             * the linear scaling of layer times is still plausible, further only when
             * nothing fits */
            if (fit && mb * 4 <= mb0) break;
        }
    }
    int nsim = o->sim_top > 0 ? o->sim_top : o->sim_top < 0 ? 0 : 6;
    if (nm_finish(&ms, &cs, o, nsim, res, err)) {
        nm_cands_free(&cs);
        nm_models_free(&ms);
        native_result_free(&dr);
        return -1;
    }
    nm_cands_free(&cs);
    int rc = add_default(&dr, dfail, res, err);
    nm_models_free(&ms);
    if (rc) return -1;
    res->plan_ms = nm_now_ms() - t0;
    return 0;
oom:
    nm_cands_free(&cs);
    nm_models_free(&ms);
    native_result_free(&dr);
    return err_set(err, NULL, NULL, "out of memory");
}

/* --- reasons ------------------------------------------------------------------------------ */

static const char *semantics(const native_candidate *c)
{
    return sched_traits_of(c->schedule)->semantics;
}

void nm_reasons(native_result *res)
{
    const native_candidate *top = NULL;
    for (int i = 0; i < res->ncand && !top; i++)
        if (res->cand[i].fits) top = &res->cand[i];
    for (int i = 0; i < res->ncand; i++) {
        native_candidate *c = &res->cand[i];
        char *r = c->reason;
        size_t n = sizeof c->reason, o = 0;
        double peak = nm_result_peak(c);
        if (!c->fits) {
            snprintf(r, n, "rejected: peak %.1f GiB > %.1f GiB per device%s", nm_gib(peak),
                     nm_gib(c->capacity_bytes),
                     c->simulated ? " (simulated)" : "");
            continue;
        }
        if (c == top) {
            o += (size_t)snprintf(r + o, n - o, "wins: highest %s throughput",
                                  c->simulated ? "simulated" : "estimated");
        } else {
            double t = nm_result_thr(c), t0 = nm_result_thr(top);
            o += (size_t)snprintf(r + o, n - o, "loses: %.1f%% below #1", t0 > 0 ?
                                  100 * (1 - t / t0) : 0);
            if (c->simulated && top->simulated &&
                c->sim_bubble_fraction > top->sim_bubble_fraction + 0.02)
                o += (size_t)snprintf(r + o, n - o, ", bubble %.0f%% vs %.0f%%",
                                      100 * c->sim_bubble_fraction,
                                      100 * top->sim_bubble_fraction);
            if (c->recompute && !top->recompute && o < n)
                o += (size_t)snprintf(r + o, n - o, ", recomputation repeats the forward");
            if (!c->simulated && o < n)
                o += (size_t)snprintf(r + o, n - o, " (estimated, not simulated)");
        }
        if (o < n && c->simulated && !sched_traits_of(c->schedule)->async)
            o += (size_t)snprintf(r + o, n - o, "; bubble %.0f%%", 100 * c->sim_bubble_fraction);
        if (o < n)
            o += (size_t)snprintf(r + o, n - o, "; peak %.1f of %.1f GiB", nm_gib(peak),
                                  nm_gib(c->capacity_bytes));
        if (o < n) snprintf(r + o, n - o, "; %s", semantics(c));
    }
}

/* --- output ------------------------------------------------------------------------------- */

void native_result_print(const native_result *res, int top, FILE *out)
{
    fprintf(out, "%-4s %-11s %-5s %-16s %-9s %-6s %-14s %-16s %-7s %-16s %s\n", "rank",
            "schedule", "mode", "microbatches", "recompute", "stages", "replicas",
            "throughput", "bubble", "peak memory", "reason");
    int shown = 0;
    for (int i = 0; i < res->ncand && shown < top; i++, shown++) {
        const native_candidate *c = &res->cand[i];
        char mbs[32], thr[32], bub[16], mem[32], cfg[16];
        snprintf(mbs, sizeof mbs, "%d x %d smp", c->microbatches, c->microbatch_size);
        snprintf(thr, sizeof thr, "%.1f smp/s%s", nm_result_thr(c), c->simulated ? "" : "*");
        if (c->simulated)
            snprintf(bub, sizeof bub, "%.0f %%", 100 * c->sim_bubble_fraction);
        else
            snprintf(bub, sizeof bub, "-");
        snprintf(mem, sizeof mem, "%.1f/%.1f GiB", nm_gib(nm_result_peak(c)),
                 nm_gib(c->capacity_bytes));
        snprintf(cfg, sizeof cfg, "%.13s%s", c->config, strlen(c->config) > 13 ? ".." : "");
        fprintf(out, "%-4d %-11s %-5s %-16s %-9s %-6d %-14s %-16s %-7s %-16s %s\n", i + 1,
                sched_kind_name(c->schedule), c->async ? "ASYNC" : "sync", mbs,
                c->recompute ? "yes" : "no", c->nstages, cfg, thr, bub, mem, c->reason);
    }
    fprintf(out, "(smp = samples; * = cost-model estimate, not simulated; ASYNC = the schedule "
            "changes training semantics; %d candidates, %d simulated, %d dynamic programs, "
            "%.1f ms)\n", res->ncand, res->nsimulated, res->dp_runs, res->plan_ms);
    for (int i = 0; i < res->nskipped; i++)
        fprintf(out, "skipped: %s: %s\n", sched_kind_name(res->skipped[i].schedule),
                res->skipped[i].reason);
}

cJSON *native_skipped_to_json(const native_result *res)
{
    if (res->nskipped < 1) return NULL;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < res->nskipped; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        if (!cJSON_AddStringToObject(o, "schedule", sched_kind_name(res->skipped[i].schedule)) ||
            !cJSON_AddStringToObject(o, "reason", res->skipped[i].reason)) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

cJSON *native_result_to_json(const native_result *res, int top)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    for (int i = 0; i < res->ncand && i < top; i++) {
        const native_candidate *c = &res->cand[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        if (!json_add_num(o, "rank", i + 1) ||
            !cJSON_AddStringToObject(o, "schedule", sched_kind_name(c->schedule)) ||
            !cJSON_AddBoolToObject(o, "async", c->async) ||
            !json_add_num(o, "microbatches", c->microbatches) ||
            !json_add_num(o, "microbatch_size", c->microbatch_size) ||
            !cJSON_AddBoolToObject(o, "recompute", c->recompute) ||
            !json_add_num(o, "stages", c->nstages) ||
            !json_add_num(o, "chunks", c->chunks) ||
            !cJSON_AddStringToObject(o, "replicas", c->config) ||
            !cJSON_AddBoolToObject(o, "simulated", c->simulated) ||
            !json_add_num(o, "samples_per_s", nm_result_thr(c)) ||
            !json_add_num(o, "estimated_samples_per_s", c->est_samples_per_s) ||
            !json_add_num(o, "iteration_s", c->simulated ? c->sim_iteration_s
                                                         : c->est_iteration_s) ||
            !json_add_num(o, "bubble_fraction", c->simulated ? c->sim_bubble_fraction : -1) ||
            !json_add_num(o, "peak_memory_bytes", nm_result_peak(c)) ||
            !json_add_num(o, "capacity_bytes", c->capacity_bytes) ||
            !cJSON_AddBoolToObject(o, "fits", c->fits) ||
            !cJSON_AddStringToObject(o, "reason", c->reason)) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}
