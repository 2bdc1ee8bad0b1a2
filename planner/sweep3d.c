/* sweep3d.c: capacity planning of a transformer over GPU counts (planner/sweep3d.h): the
 * layout search per count, the days and cost of a token budget, the deadline and the
 * Pareto front; the text and JSON writers (the SVG is planner/sweep3d_svg.c). */
#include "planner/sweep3d.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/device.h"
#include "core/schedule_traits.h"
#include "planner/llm_profile.h"

void sweep3d_result_free(sweep3d_result *r)
{
    if (!r) return;
    free(r->pts);
    memset(r, 0, sizeof *r);
}

/* The counts to try: whole servers of `per` devices, the first multiple >= gmin doubled
 * while <= gmax, and the last multiple <= gmax. Returns how many (into g[], room for 64). */
static int counts(int gmin, int gmax, int per, int *g)
{
    int n = 0, first = (gmin + per - 1) / per * per, last = gmax / per * per;
    for (long long x = first; x <= last && n < 63; x *= 2) g[n++] = (int)x;
    if (last >= first && (n == 0 || g[n - 1] != last)) g[n++] = last;
    return n;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Marks the points no other trains both sooner and cheaper. */
static void mark_front(sweep3d_result *r)
{
    for (int i = 0; i < r->n; i++) {
        sweep3d_point *a = &r->pts[i];
        a->pareto = a->ok && a->days >= 0 && a->cost >= 0;
        for (int j = 0; j < r->n && a->pareto; j++) {
            const sweep3d_point *b = &r->pts[j];
            if (j == i || !b->ok || b->days < 0) continue;
            if (b->days <= a->days && b->cost <= a->cost &&
                (b->days < a->days || b->cost < a->cost))
                a->pareto = 0;
        }
    }
}

int sweep3d_run(const transformer *t, const cluster *c, const char *cluster_file,
                const search3d_options *o, int gmin, int gmax, double tokens, double price,
                double deadline, sweep3d_result *res, plumb_err *err)
{
    memset(res, 0, sizeof *res);
    int per = c->levels[0].count, g[64];
    double t0 = cpu_s();
    if (search3d_options_check(o, err)) return -1; /* no count would take them */
    if (deadline > 0 && !(tokens > 0))
        return err_set(err, NULL, "--deadline", "expected --tokens N with it (the days to "
                       "train need a token budget)");
    if (gmax > c->ndevices)
        return err_set(err, cluster_file, "--gpus", "expected at most the cluster's %d "
                       "devices (got %d)", c->ndevices, gmax);
    int n = counts(gmin, gmax, per, g);
    if (!n)
        return err_set(err, cluster_file, "--gpus", "expected a range holding a whole server "
                       "(a multiple of the %d devices per server) (got %d..%d)", per, gmin,
                       gmax);
    res->pts = calloc((size_t)n, sizeof *res->pts);
    if (!res->pts) return err_set(err, NULL, NULL, "out of memory");
    res->n = n;
    res->tokens = tokens, res->price = price, res->deadline_days = deadline;
    res->deadline_gpus = -1;
    snprintf(res->model, sizeof res->model, "%s", t->name ? t->name : "model");
    snprintf(res->cluster, sizeof res->cluster, "%s", c->name ? c->name : "cluster");
    res->device_noun = cluster_device_noun(c);
    res->opts = *o;
    res->opts.gpus = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        sweep3d_point *p = &res->pts[i];
        search3d_options so = *o;
        so.gpus = p->gpus = g[i];
        if (so.simulate <= 0) /* with the search's margin under p2p sync */
            so.simulate = SWEEP3D_SIMULATE * (o->p2p_sync ? SEARCH3D_SYNC_FACTOR : 1);
        plumb_err e = {{0}};
        search3d_result *r = search3d_run(t, c, cluster_file, &so, &e);
        p->days = p->cost = p->usd_per_million = -1;
        if (!r) {
            snprintf(p->why, sizeof p->why, "%s", e.msg);
            if (strstr(e.msg, "out of memory") == e.msg) {
                *err = e;
                sweep3d_result_free(res);
                return -1;
            }
            continue;
        }
        p->ok = any = 1;
        p->best = r->ranked[0];
        search3d_free(r);
        double tps = p->best.tokens_per_s;
        if (price > 0 && tps > 0) p->usd_per_million = price * p->gpus / 3600 / tps * 1e6;
        if (tokens > 0 && tps > 0) {
            p->days = tokens / tps / 86400;
            p->cost = p->days * 24 * p->gpus * (price > 0 ? price : 1);
        }
        if (deadline > 0 && p->days >= 0 && p->days <= deadline && res->deadline_gpus < 0)
            res->deadline_gpus = p->gpus;
    }
    if (!any) {
        err_set(err, NULL, NULL, "%s", res->pts[n - 1].why);
        sweep3d_result_free(res);
        return -1;
    }
    mark_front(res);
    res->cpu_s = cpu_s() - t0;
    return 0;
}

void sweep3d_print(const sweep3d_result *r, FILE *out)
{
    const char *noun = r->device_noun ? r->device_noun : "GPU";
    char head[32], hours[40];
    snprintf(head, sizeof head, "%ss", noun);
    snprintf(hours, sizeof hours, "%s-hours", noun);
    const int w = strlen(head) > 6 ? (int)strlen(head) : 6; /* "GPUs" keeps 6, */
    const int wc = strlen(hours) > 14 ? (int)strlen(hours) : 14; /* "GPU-hours" 14 */
    fprintf(out, "plumb sweep: %s on %s, %d %s counts (%.1f s of CPU)\n", r->model,
            r->cluster, r->n, noun, r->cpu_s);
    char rt[160];
    search3d_runtime_text(&r->opts, rt, sizeof rt);
    if (rt[0]) fprintf(out, "runtime of every layout: %s\n", rt);
    if (r->opts.cross_entropy == LLM_CE_TE) /* only when set: default sweeps read as before */
        fprintf(out, "loss of every layout: cross-entropy te (Transformer Engine's fused "
                "loss)\n");
    else if (r->opts.cross_entropy == LLM_CE_NATIVE)
        fprintf(out, "loss of every layout: cross-entropy native (Megatron-Core's fused "
                "loss)\n");
    if (r->opts.balance)
        fprintf(out, "stages balanced (--balance) in every layout simulated; the estimates "
                "split the blocks evenly\n");
    fprintf(out, "%*s  %-52s %12s %6s %10s %*s %12s\n", w, head, "best layout", "tokens/s",
            "MFU", "days", wc, r->price > 0 ? "cost (USD)" : hours,
            "USD/M tokens");
    for (int i = 0; i < r->n; i++) {
        const sweep3d_point *p = &r->pts[i];
        if (!p->ok) {
            fprintf(out, "%*d  does not fit: %s\n", w, p->gpus, p->why);
            continue;
        }
        const search3d_cand *b = &p->best;
        char lay[96], v[16] = "", cps[16] = "", days[24] = "-", cost[24] = "-", usd[24] = "-";
        if (b->d.interleave > 1) snprintf(v, sizeof v, " V %d", b->d.interleave);
        if (b->d.cp > 1) snprintf(cps, sizeof cps, " cp %d", b->d.cp); /* only > 1: as before */
        snprintf(lay, sizeof lay, "tp %d%s pp %d dp %d b %d %s%s %s%s z%d", b->d.tp, cps, b->d.pp,
                 b->d.dp, b->o.microbatch_size, sched_kind_name(b->d.schedule), v,
                 recompute_kind_name((recompute_kind)b->o.recompute),
                 b->o.sequence_parallel ? " sp" : "", b->o.zero);
        if (p->days >= 0) snprintf(days, sizeof days, "%.2f", p->days);
        if (p->cost >= 0) snprintf(cost, sizeof cost, "%.0f", p->cost);
        if (p->usd_per_million >= 0) snprintf(usd, sizeof usd, "%.3f", p->usd_per_million);
        fprintf(out, "%*d  %-52s %12.0f %5.1f%% %10s %*s %12s%s\n", w, p->gpus, lay,
                b->tokens_per_s, 100 * b->mfu, days, wc, cost, usd, p->pareto ? "  front" : "");
    }
    if (r->tokens > 0)
        fprintf(out, "days and cost to train %.4g tokens; \"front\": no other count trains "
                "both sooner and cheaper\n", r->tokens);
    if (r->deadline_days > 0) {
        if (r->deadline_gpus > 0)
            fprintf(out, "fewest %ss that train %.4g tokens within %g days: %d\n", noun,
                    r->tokens, r->deadline_days, r->deadline_gpus);
        else
            fprintf(out, "no %s count in the range trains %.4g tokens within %g days\n",
                    noun, r->tokens, r->deadline_days);
    }
}

cJSON *sweep3d_to_json(const sweep3d_result *r)
{
    cJSON *j = cJSON_CreateObject(), *a;
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "format", "plumb-sweep3d/1");
    cJSON_AddStringToObject(j, "model", r->model);
    cJSON_AddStringToObject(j, "cluster", r->cluster);
    if (r->tokens > 0) cJSON_AddNumberToObject(j, "tokens", r->tokens);
    if (r->price > 0) cJSON_AddNumberToObject(j, "price_usd_per_gpu_hour", r->price);
    if (r->deadline_days > 0) {
        cJSON_AddNumberToObject(j, "deadline_days", r->deadline_days);
        cJSON_AddNumberToObject(j, "deadline_gpus", r->deadline_gpus);
    }
    cJSON_AddStringToObject(j, "tp_overlap", plan_tp_overlap_name(r->opts.tp_overlap));
    cJSON_AddBoolToObject(j, "overlap_param_gather", r->opts.overlap_param_gather);
    cJSON_AddStringToObject(j, "p2p", r->opts.p2p_sync ? "sync" : "overlap");
    if (r->opts.grad_sync_end) /* only when set: default sweeps read as before */
        cJSON_AddStringToObject(j, "grad_sync", "end");
    if (r->opts.p2p_whole) /* only when set, as plan --model's ranking */
        cJSON_AddStringToObject(j, "p2p_split", "whole");
    if (r->opts.grad_reduce != DEV_FP32) /* only when set, as plan --model's ranking */
        cJSON_AddStringToObject(j, "grad_reduce", dev_precision_name(r->opts.grad_reduce));
    if (r->opts.optimizer_state != DEV_FP32)
        cJSON_AddStringToObject(j, "optimizer_state",
                                dev_precision_name(r->opts.optimizer_state));
    if (r->opts.fp8_param_gather) /* only when set, as plan --model's ranking */
        cJSON_AddBoolToObject(j, "fp8_param_gather", 1);
    if (r->opts.cross_entropy != LLM_CE_UNFUSED) /* likewise */
        cJSON_AddStringToObject(j, "cross_entropy", llm_cross_entropy_name(r->opts.cross_entropy));
    if (r->opts.grad_accum != LLM_GA_FUSED) /* likewise */
        cJSON_AddStringToObject(j, "grad_accum", llm_grad_accum_name(r->opts.grad_accum));
    if (r->opts.balance) cJSON_AddBoolToObject(j, "balance", 1);
    if (!(a = cJSON_AddArrayToObject(j, "points"))) {
        cJSON_Delete(j);
        return NULL;
    }
    for (int i = 0; i < r->n; i++) {
        const sweep3d_point *p = &r->pts[i];
        const search3d_cand *b = &p->best;
        cJSON *e = cJSON_CreateObject();
        if (!e) {
            cJSON_Delete(j);
            return NULL;
        }
        cJSON_AddItemToArray(a, e);
        cJSON_AddNumberToObject(e, "gpus", p->gpus);
        cJSON_AddBoolToObject(e, "ok", p->ok);
        if (!p->ok) {
            cJSON_AddStringToObject(e, "why", p->why);
            continue;
        }
        cJSON *lay = search3d_cand_json(b);
        if (!lay) {
            cJSON_Delete(j);
            return NULL;
        }
        cJSON_AddItemToObject(e, "layout", lay);
        if (p->days >= 0) {
            cJSON_AddNumberToObject(e, "days", p->days);
            cJSON_AddNumberToObject(e, r->price > 0 ? "cost_usd" : "gpu_hours", p->cost);
            cJSON_AddBoolToObject(e, "pareto", p->pareto);
        }
        if (p->usd_per_million >= 0)
            cJSON_AddNumberToObject(e, "usd_per_million_tokens", p->usd_per_million);
    }
    return j;
}
