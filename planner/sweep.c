/* sweep.c: capacity planning: the cluster resized to each GPU count of a range, the native
 * planner's best plan for each, scaling efficiency, cost per million samples, the fewest
 * GPUs for a target, and the text, JSON ("plumb-sweep/1") and SVG forms of the result. */
#include "core/strbuf.h"
#include "core/units.h"
#include "core/svg.h"
#include "planner/sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/json.h"
#include "planner/native_impl.h"

void sweep_result_free(sweep_result *r)
{
    if (!r) return;
    free(r->pts);
    memset(r, 0, sizeof *r);
}

int planner_sweep(const profile *p, const cluster *c, int gmin, int gmax,
                  const native_options *o, double target, double price, sweep_result *res,
                  plumb_err *err)
{
    memset(res, 0, sizeof *res);
    if (gmin < 1 || gmax < gmin || gmax > SWEEP_MAX_GPUS)
        return err_set(err, NULL, "--gpus", "expected A..B with 1 <= A <= B <= %d (got %d..%d)",
                       SWEEP_MAX_GPUS, gmin, gmax);
    native_options dflt;
    if (!o) {
        native_options_init(&dflt);
        o = &dflt;
    }
    /* inputs that cannot work at any size in the range */
    if (native_runtime_check(o, (sched_kind)o->schedule, err)) /* auto: the kind-free rules */
        return -1;
    {
        int use;
        cluster *big = planner_cluster_resize(c, gmax, &use, err);
        if (!big) return -1;
        native_options oc = *o;
        oc.max_devices = use;
        int bad = planner_native_check(p, big, &oc, err);
        cluster_free(big);
        if (bad) return -1;
    }
    snprintf(res->profile_name, sizeof res->profile_name, "%s", p->name ? p->name : "?");
    snprintf(res->cluster_name, sizeof res->cluster_name, "%s", c->name ? c->name : "?");
    res->device_noun = cluster_device_noun(c);
    res->target = target;
    res->price = price;
    res->target_gpus = -1;
    res->p2p_sync = o->p2p_sync ? 1 : 0;
    res->grad_sync_end = o->grad_sync_end ? 1 : 0;
    res->zero = o->zero ? 1 : 0;
    res->overlap_param_gather = o->overlap_param_gather && o->zero ? 1 : 0;
    native_runtime_text(o, res->runtime, sizeof res->runtime);
    const device_type *t0 = cluster_device_type(c, 0);
    double work = profile_compute_ms(p) * 1e-3;
    res->thr1 = work > 0 ? p->minibatch * (t0 && t0->speed > 0 ? t0->speed : 1) / work : 0;
    res->pts = calloc((size_t)(gmax - gmin + 1), sizeof *res->pts);
    if (!res->pts) return err_set(err, NULL, NULL, "out of memory");
    /* the same plan on the same devices recurs at nearby counts: simulated once (NULL when
     * out of memory: every one simulated) */
    nm_sim_memo *memo = nm_sim_memo_new();
    double gpu_sum = 0, sim_used = 0;
    for (int g = gmin; g <= gmax; g++) {
        if (gpu_sum + g > SWEEP_MAX_GPU_SUM) {
            res->budget_from = g, res->budget_to = gmax;
            snprintf(res->budget_why, sizeof res->budget_why, "the counts planned would sum "
                     "to more than %.0f GPUs (1..1024's sum): expected a narrower "
                     "--gpus range", SWEEP_MAX_GPU_SUM);
            break;
        }
        gpu_sum += g;
        sweep_point *pt = &res->pts[res->n++];
        pt->gpus = g;
        pt->usd_per_million = -1;
        int use;
        plumb_err e;
        err_clear(&e);
        cluster *cl = planner_cluster_resize(c, g, &use, &e);
        if (!cl) {
            snprintf(pt->why, sizeof pt->why, "%s", e.msg);
            continue;
        }
        native_options oc = *o;
        oc.max_devices = use;
        oc.no_suggest = 1;
        oc.best_only = 1;
        oc.sim_memo = memo;
        /* a fixed --microbatches: the counts share one budget (the planner's own counts
         * stay small, and the memo of nearby counts' plans makes the sum of the estimates
         * far above what is simulated: each count keeps the search's own) */
        if (o->microbatches > 0) oc.sim_budget = SWEEP_MAX_SIM_ACTIONS - sim_used;
        native_result nr;
        plan *pl = planner_native(p, cl, &oc, &nr, &e);
        sim_used += nr.sim_budget_used;
        if (!pl && nr.over_budget) { /* this count and the rest skipped */
            res->n--;
            res->budget_from = g, res->budget_to = gmax;
            snprintf(res->budget_why, sizeof res->budget_why, "%s", e.msg);
            native_result_free(&nr);
            cluster_free(cl);
            break;
        }
        if (res->nskipped == 0) /* auto's skips: the runtime's, whatever the count */
            for (int i = 0; i < nr.nskipped; i++) res->skipped[res->nskipped++] = nr.skipped[i];
        if (!pl) {
            snprintf(pt->why, sizeof pt->why, "%s", e.msg);
        } else {
            const native_candidate *b = NULL;
            for (int i = 0; i < nr.ncand && !b; i++)
                if (nr.cand[i].fits) b = &nr.cand[i];
            pt->ok = 1;
            pt->samples_per_s = pl->pred_samples_per_s;
            pt->efficiency = res->thr1 > 0 ? pt->samples_per_s / (g * res->thr1) : 0;
            if (price > 0 && pt->samples_per_s > 0)
                pt->usd_per_million = price * g / 3600.0 / pt->samples_per_s * 1e6;
            pt->schedule = pl->schedule;
            pt->microbatches = pl->microbatches;
            pt->microbatch_size = pl->microbatch_size;
            pt->recompute = pl->recompute;
            pt->nstages = pl->nstages;
            if (b) {
                pt->peak_memory_bytes = b->simulated ? b->sim_peak_memory_bytes
                                                     : b->est_peak_memory_bytes;
                snprintf(pt->config, sizeof pt->config, "%s", b->config);
            }
            unsigned char *used = calloc((size_t)pl->clus->ndevices + 1, 1);
            pt->gpus_used = used ? plan_devices_used(pl, used) : g;
            free(used);
        }
        /* a smaller count planned faster: keep its plan, idle GPUs and all */
        const sweep_point *best = NULL;
        for (int i = 0; i + 1 < res->n; i++)
            if (res->pts[i].ok && (!best || res->pts[i].samples_per_s > best->samples_per_s))
                best = &res->pts[i];
        if (best && (!pt->ok || best->samples_per_s > pt->samples_per_s)) {
            sweep_point keep = *best;
            keep.gpus = g;
            keep.efficiency = res->thr1 > 0 ? keep.samples_per_s / (g * res->thr1) : 0;
            keep.usd_per_million = price > 0 && keep.samples_per_s > 0
                                       ? price * g / 3600.0 / keep.samples_per_s * 1e6 : -1;
            keep.why[0] = 0;
            *pt = keep;
        }
        if (pt->ok && target > 0 && res->target_gpus < 0 && pt->samples_per_s >= target)
            res->target_gpus = g;
        plan_free(pl);
        native_result_free(&nr);
        cluster_free(cl);
    }
    nm_sim_memo_free(memo);
    if (res->n == 0 && res->budget_from > 0) /* nothing planned: refused */
        return err_set(err, NULL, NULL, "%s", res->budget_why);
    return 0;
}

void sweep_print(const sweep_result *r, FILE *out)
{
    fprintf(out, "%s on %s (resized); linear baseline: one device %.1f samples/s%s%s\n",
            r->profile_name, r->cluster_name, r->thr1, r->runtime[0] ? "; runtime: " : "",
            r->runtime);
    for (int i = 0; i < r->nskipped; i++)
        fprintf(out, "skipped: %s: %s\n", sched_kind_name(r->skipped[i].schedule),
                r->skipped[i].reason);
    const char *noun = r->device_noun ? r->device_noun : "GPU";
    char head[32];
    snprintf(head, sizeof head, "%ss", noun);
    const int w = strlen(head) > 5 ? (int)strlen(head) : 5; /* "GPUs" keeps 5 */
    fprintf(out, "%*s %-20s %-11s %-13s %-11s %-16s %-10s %s\n", w, head, "throughput",
            "efficiency", "cost", "peak memory", "schedule", "microbatch", "replicas");
    for (int i = 0; i < r->n; i++) {
        const sweep_point *p = &r->pts[i];
        if (!p->ok) {
            fprintf(out, "%*d no plan: %s\n", w, p->gpus, p->why);
            continue;
        }
        char thr[32], eff[16], cost[32], mem[24], sch[32], mb[24];
        snprintf(thr, sizeof thr, "%.1f samples/s", p->samples_per_s);
        snprintf(eff, sizeof eff, "%.1f %%", 100 * p->efficiency);
        if (p->usd_per_million >= 0)
            snprintf(cost, sizeof cost, "%.2f USD/M", p->usd_per_million);
        else
            snprintf(cost, sizeof cost, "-");
        units_bytes(p->peak_memory_bytes, mem, sizeof mem);
        snprintf(sch, sizeof sch, "%s%s", sched_kind_name(p->schedule),
                 p->recompute ? "+rc" : "");
        snprintf(mb, sizeof mb, "%dx%d", p->microbatches, p->microbatch_size);
        char used[48] = "";
        if (p->gpus_used < p->gpus)
            snprintf(used, sizeof used, " (uses %d of %d %ss)", p->gpus_used, p->gpus, noun);
        fprintf(out, "%*d %-20s %-11s %-13s %-11s %-16s %-10s %s%s\n", w, p->gpus, thr, eff, cost,
                mem, sch, mb, p->config, used);
    }
    if (r->budget_from > 0)
        fprintf(out, "skipped: %ss %d..%d: %s\n", noun, r->budget_from, r->budget_to,
                r->budget_why);
    if (r->target > 0) {
        if (r->target_gpus > 0)
            fprintf(out, "target %.1f samples/s: reached with %d %ss\n", r->target,
                    r->target_gpus, noun);
        else
            fprintf(out, "target %.1f samples/s: not reached in %d..%d %ss\n", r->target,
                    r->n ? r->pts[0].gpus : 0, r->n ? r->pts[r->n - 1].gpus : 0, noun);
    }
    fprintf(out, "(efficiency = throughput / (%ss x one-device throughput); cost = price x %ss "
            "/ 3600 / throughput x 1e6, USD per million samples; +rc = recomputation)\n", noun,
            noun);
}

/* "skipped_gpus": {"from", "to", "why"}: the counts the work budget left out. The object
 * added, or NULL when out of memory. */
static cJSON *budget_json(cJSON *root, const sweep_result *r)
{
    cJSON *o = cJSON_AddObjectToObject(root, "skipped_gpus");
    if (!o || !json_add_num(o, "from", r->budget_from) || !json_add_num(o, "to", r->budget_to) ||
        !cJSON_AddStringToObject(o, "why", r->budget_why))
        return NULL;
    return o;
}

cJSON *sweep_to_json(const sweep_result *r)
{
    cJSON *root = cJSON_CreateObject(), *pts = NULL;
    if (!root) return NULL;
    if (!cJSON_AddStringToObject(root, "format", "plumb-sweep/1") ||
        !cJSON_AddStringToObject(root, "profile", r->profile_name) ||
        !cJSON_AddStringToObject(root, "cluster", r->cluster_name) ||
        !json_add_num(root, "one_device_samples_per_s", r->thr1) ||
        !(r->target > 0 ? json_add_num(root, "target_samples_per_s", r->target)
                        : cJSON_AddNullToObject(root, "target_samples_per_s")) ||
        !(r->target_gpus > 0 ? json_add_num(root, "target_gpus", r->target_gpus)
                             : cJSON_AddNullToObject(root, "target_gpus")) ||
        !(r->price > 0 ? json_add_num(root, "price_usd_per_gpu_hour", r->price)
                       : cJSON_AddNullToObject(root, "price_usd_per_gpu_hour")) ||
        (r->p2p_sync && !cJSON_AddStringToObject(root, "p2p", "sync")) ||
        (r->grad_sync_end && !cJSON_AddStringToObject(root, "grad_sync", "end")) ||
        (r->zero && !json_add_num(root, "zero", 1)) ||
        (r->overlap_param_gather && !cJSON_AddTrueToObject(root, "overlap_param_gather")) ||
        (r->budget_from > 0 && !budget_json(root, r)) ||
        !(pts = cJSON_AddArrayToObject(root, "points")))
        goto fail;
    for (int i = 0; i < r->n; i++) {
        const sweep_point *p = &r->pts[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(pts, o)) {
            cJSON_Delete(o);
            goto fail;
        }
        if (!json_add_num(o, "gpus", p->gpus) || !cJSON_AddBoolToObject(o, "ok", p->ok))
            goto fail;
        if (!p->ok) {
            if (!cJSON_AddStringToObject(o, "why", p->why)) goto fail;
            continue;
        }
        if (!json_add_num(o, "gpus_used", p->gpus_used) ||
            !json_add_num(o, "samples_per_s", p->samples_per_s) ||
            !json_add_num(o, "efficiency", p->efficiency) ||
            !(p->usd_per_million >= 0
                  ? json_add_num(o, "usd_per_million_samples", p->usd_per_million)
                  : cJSON_AddNullToObject(o, "usd_per_million_samples")) ||
            !json_add_num(o, "peak_memory_bytes", p->peak_memory_bytes) ||
            !cJSON_AddStringToObject(o, "schedule", sched_kind_name(p->schedule)) ||
            !json_add_num(o, "microbatches", p->microbatches) ||
            !json_add_num(o, "microbatch_size", p->microbatch_size) ||
            !cJSON_AddBoolToObject(o, "recompute", p->recompute) ||
            !json_add_num(o, "stages", p->nstages) ||
            !cJSON_AddStringToObject(o, "replicas", p->config))
            goto fail;
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

/* --- SVG ------------------------------------------------------------------------------------ */

/* Series styles: each line differs from the others in colour and in dash. */
#define COL_THR "#1f5fbf"     /* throughput: solid, circles */
#define COL_LIN "#444444"     /* linear scaling: dashed, drawn over the throughput */
#define COL_COST "#d97a00"    /* cost: solid, squares, right axis */
#define COL_TGT "#2e8b57"     /* target: dotted */
#define DASH_LIN "6 4"
#define DASH_TGT "2 3"

/* The GPU ticks: the first and the last point, and the multiples of a nice step between
 * them that do not crowd either end (at least 24 px apart). */
static void x_tick(sbuf *b, int g, double x, double y)
{
    sbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n",
                x, y, x, y + 5, x, y + 19, g);
}

static void x_ticks(sbuf *b, int g0, int g1, double L, double pw, double y)
{
    int step = (int)svg_nice_step(g1 - g0, 8);
    if (step < 1) step = 1;
    double px = pw / (double)(g1 - g0);
    x_tick(b, g0, L, y);
    for (int g = (g0 / step + 1) * step; g < g1; g += step)
        if ((g - g0) * px >= 24 && (g1 - g) * px >= 24) x_tick(b, g, L + px * (g - g0), y);
    x_tick(b, g1, L + pw, y);
}

/* One line of the legend: a sample of the series' line (and marker) and its name. */
static void legend_entry(sbuf *b, double x, double y, const char *cls, const char *col,
                         const char *dash, const char *marker, const char *name)
{
    sbuf_printf(b, "<line class=\"legend %s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"%s\" stroke-width=\"2\"%s%s%s/>", cls, x, y, x + 28, y, col,
                dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    if (marker && !strcmp(marker, "circle"))
        sbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", x + 14, y, col);
    if (marker && !strcmp(marker, "square"))
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\" fill=\"%s\"/>",
                    x + 11, y - 3, col);
    sbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 34, y + 4, name);
}

char *sweep_svg(const sweep_result *r, size_t *len)
{
    const double W = 760, H = 440, L = 80, R = 90, T = 50, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    int g0 = r->n ? r->pts[0].gpus : 1, g1 = r->n ? r->pts[r->n - 1].gpus : 1;
    if (g1 == g0) g1 = g0 + 1;
    double tmax = r->target > 0 ? r->target : 0, cmax = 0;
    int havecost = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->pts[i].ok && r->pts[i].samples_per_s > tmax) tmax = r->pts[i].samples_per_s;
        if (r->pts[i].ok && r->pts[i].usd_per_million > cmax) cmax = r->pts[i].usd_per_million;
        if (r->pts[i].ok && r->pts[i].usd_per_million >= 0) havecost = 1;
    }
    double tstep = svg_nice_step(tmax > 0 ? tmax : 1, 5);
    tmax = tstep * ceil((tmax > 0 ? tmax * 1.05 : 1) / tstep);
    double cstep = svg_nice_step(cmax > 0 ? cmax : 1, 5);
    cmax = cstep * ceil((cmax > 0 ? cmax * 1.05 : 1) / cstep);
#define X(g) (L + pw * ((g) - g0) / (double)(g1 - g0))
#define YT(v) (T + ph * (1 - (v) / tmax))
#define YC(v) (T + ph * (1 - (v) / cmax))
    sbuf b = {0};
    svg_begin(&b, W, H, 12);
    sbuf_printf(&b, "<text x=\"%.0f\" y=\"18\" font-size=\"15\" text-anchor=\"middle\">plumb sweep: ",
                W / 2);
    svg_escape(&b, r->profile_name);
    sbuf_printf(&b, " on ");
    svg_escape(&b, r->cluster_name);
    sbuf_printf(&b, "</text>\n");
    /* grid and axes */
    for (double v = 0; v <= tmax + 1e-9 * tmax; v += tstep) {
        sbuf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                  L, YT(v), L + pw, YT(v));
        sbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"" COL_THR "\">%g"
                    "</text>\n", L - 6, YT(v) + 4, v);
    }
    if (havecost)
        for (double v = 0; v <= cmax + 1e-9 * cmax; v += cstep)
            sbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"" COL_COST "\">%g</text>\n",
                        L + pw + 6, YC(v) + 4, v);
    x_ticks(&b, g0, g1, L, pw, T + ph);
    sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
              "stroke=\"#444\"/>\n", L, T, pw, ph);
    sbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">GPUs</text>\n", L + pw / 2,
              H - 18);
    sbuf_printf(&b, "<text transform=\"translate(20 %.1f) rotate(-90)\" text-anchor=\"middle\" "
              "fill=\"" COL_THR "\">throughput (samples/s)</text>\n", T + ph / 2);
    if (havecost)
        sbuf_printf(&b, "<text transform=\"translate(%.1f %.1f) rotate(90)\" "
                  "text-anchor=\"middle\" fill=\"" COL_COST "\">cost (USD per million samples)"
                  "</text>\n", W - 18, T + ph / 2);
    if (r->target > 0)
        sbuf_printf(&b, "<line class=\"target\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                    "stroke=\"" COL_TGT "\" stroke-width=\"1.5\" stroke-dasharray=\"" DASH_TGT
                    "\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"" COL_TGT "\">target %g samples/s"
                    "</text>\n", L, YT(r->target), L + pw, YT(r->target), L + 6,
                    YT(r->target) - 5, r->target);
    /* series: cost, then throughput, then linear scaling on top of it */
    for (int series = 1; series >= 0; series--) {
        if (series == 1 && !havecost) continue;
        const char *col = series ? COL_COST : COL_THR;
        sbuf_printf(&b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                    "points=\"", series ? "cost" : "throughput", col);
        for (int i = 0; i < r->n; i++) {
            const sweep_point *p = &r->pts[i];
            if (!p->ok || (series && p->usd_per_million < 0)) continue;
            sbuf_printf(&b, "%.1f,%.1f ", X(p->gpus),
                      series ? YC(p->usd_per_million) : YT(p->samples_per_s));
        }
        sbuf_printf(&b, "\"/>\n");
        for (int i = 0; i < r->n; i++) {
            const sweep_point *p = &r->pts[i];
            if (!p->ok || (series && p->usd_per_million < 0)) continue;
            if (series)
                sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\" fill=\"%s\"/>\n",
                          X(p->gpus) - 3, YC(p->usd_per_million) - 3, col);
            else
                sbuf_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                          X(p->gpus), YT(p->samples_per_s), col);
        }
    }
    if (r->thr1 > 0) { /* clipped to the plot */
        double ge = g1, ye = r->thr1 * g1;
        if (ye > tmax) {
            ge = tmax / r->thr1;
            ye = tmax;
        }
        if (ge > g0)
            sbuf_printf(&b, "<line class=\"linear\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"" COL_LIN "\" stroke-width=\"1.5\" stroke-dasharray=\"" DASH_LIN
                        "\"/>\n", X(g0), YT(r->thr1 * g0 < tmax ? r->thr1 * g0 : tmax), X(ge),
                        YT(ye));
    }
    for (int i = 0; i < r->n; i++)
        if (!r->pts[i].ok)
            sbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#c02020\">"
                      "x</text>\n", X(r->pts[i].gpus), T + ph - 4);
    if (r->target_gpus > 0)
        sbuf_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"" COL_TGT
                    "\" stroke-width=\"1.5\" stroke-dasharray=\"" DASH_TGT "\"/><text x=\"%.1f\" "
                    "y=\"%.1f\" fill=\"" COL_TGT "\">%d GPUs reach the target</text>\n",
                    X(r->target_gpus), T, X(r->target_gpus), T + ph, X(r->target_gpus) + 4,
                    T + 14, r->target_gpus);
    /* legend, between the title and the plot */
    double lx = L, ly = T - 16;
    legend_entry(&b, lx, ly, "throughput", COL_THR, NULL, "circle", "throughput");
    legend_entry(&b, lx + 120, ly, "linear", COL_LIN, DASH_LIN, NULL, "linear scaling");
    if (havecost)
        legend_entry(&b, lx + 265, ly, "cost", COL_COST, NULL, "square", "cost per million samples");
    if (r->target > 0)
        legend_entry(&b, lx + 470, ly, "target", COL_TGT, DASH_TGT, NULL, "target");
    sbuf_printf(&b, "</svg>\n");
#undef X
#undef YT
#undef YC
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.n;
    return b.p;
}
