/* compare.c: run summaries from timelines and simulator reports, their alignment by
 * (stage, action kind), and the tables and JSON of `plumb compare` (sim/compare.h); the
 * peak-memory figures are compare_mem.c's. */
#include "sim/compare.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "sim/sim.h"

void compare_side_free(compare_side *s)
{
    if (!s) return;
    free(s->file);
    free(s->what);
    free(s->cells);
    free(s->busy_s);
    free(s->mem);
    free(s->model);
    free(s->layers);
    memset(s, 0, sizeof *s);
}

/* Allocates the side's arrays for n stages; busy times start unknown (-1). */
static int side_alloc(compare_side *s, int n, const char *file, const char *what)
{
    memset(s, 0, sizeof *s);
    s->nstages = n;
    s->iteration_s = -1;
    s->file = strdup(file ? file : "");
    s->what = strdup(what ? what : "");
    s->cells = calloc((size_t)n * TL_NKINDS + 1, sizeof *s->cells);
    s->busy_s = malloc(((size_t)n + 1) * sizeof *s->busy_s);
    if (!s->file || !s->what || !s->cells || !s->busy_s) {
        compare_side_free(s);
        return -1;
    }
    for (int i = 0; i < n; i++) s->busy_s[i] = -1;
    return 0;
}

/* Sort keys of counted events for the medians: by (stage, kind, duration) or, with
 * by_stage = 0, by (kind, duration). */
typedef struct evkey {
    int stage, kind;
    double dur;
} evkey;

static int cmp_stage_kind(const void *a, const void *b)
{
    const evkey *x = a, *y = b;
    if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->dur < y->dur ? -1 : x->dur > y->dur;
}

static int cmp_kind(const void *a, const void *b)
{
    const evkey *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->dur < y->dur ? -1 : x->dur > y->dur;
}

/* Sets the median of every run of equal keys in k[0..n-1] (sorted) into its cell. */
static void set_medians(compare_side *s, evkey *k, size_t n, int by_stage)
{
    qsort(k, n, sizeof *k, by_stage ? cmp_stage_kind : cmp_kind);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && k[j].kind == k[i].kind && (!by_stage || k[j].stage == k[i].stage)) j++;
        size_t m = j - i;
        double med = m % 2 ? k[i + m / 2].dur : 0.5 * (k[i + m / 2 - 1].dur + k[i + m / 2].dur);
        if (by_stage) s->cells[(size_t)k[i].stage * TL_NKINDS + k[i].kind].median_s = med;
        else s->kinds[k[i].kind].median_s = med;
        i = j;
    }
}

int compare_side_from_timeline(const timeline *tl, int skip, const char *file,
                               const char *what, compare_side *out, plumb_err *err)
{
    memset(out, 0, sizeof *out);
    if (!tl || tl->n == 0)
        return err_set(err, file, "traceEvents", "expected timed actions (got none)");
    int itmax = 0, smax = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (e->stage > COMPARE_MAX_STAGES || e->peer_stage > COMPARE_MAX_STAGES ||
            e->iteration > COMPARE_MAX_ITERATIONS) {
            char ev[96];
            return err_set(err, file, "traceEvents",
                           "expected stages below %d and iterations below %d (got stage %d, "
                           "peer stage %d, iteration %d in \"%s\")", COMPARE_MAX_STAGES,
                           COMPARE_MAX_ITERATIONS, e->stage, e->peer_stage, e->iteration,
                           tl_event_name(e, ev, sizeof ev));
        }
        if (e->iteration > itmax) itmax = e->iteration;
        if (e->stage > smax) smax = e->stage;
        if (e->peer_stage > smax) smax = e->peer_stage;
    }
    int nst = smax + 1, nt = tl->ntracks > 0 ? tl->ntracks : 1;
    int from = skip < 0 ? 0 : skip > itmax ? itmax : skip;
    double *end = calloc((size_t)itmax + 1, sizeof *end);
    double *busy = calloc((size_t)nst, sizeof *busy);
    unsigned char *holds = calloc((size_t)nst * nt, 1); /* stage s computes on track t */
    evkey *keys = malloc(tl->n * sizeof *keys);
    size_t nk = 0;
    if (!end || !busy || !holds || !keys || side_alloc(out, nst, file, what)) {
        free(end);
        free(busy);
        free(holds);
        free(keys);
        return err_set(err, file, NULL, "out of memory");
    }
    out->iterations = itmax + 1;
    out->used = itmax + 1 - from;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        double fin = e->start_s + e->dur_s;
        if (e->iteration >= 0 && fin > end[e->iteration]) end[e->iteration] = fin;
        if (e->stage < 0 || e->kind < 0 || e->kind >= TL_NKINDS) continue;
        /* the simulator's ring steps on link tracks: the collective track holds the whole
         * all-reduce, the figure compared */
        if (e->kind == TL_ALLREDUCE && e->track >= 0 && e->track < tl->ntracks &&
            tl->tracks[e->track].kind == TL_TRACK_LINK) continue;
        /* tensor parallelism: the group's first rank stands for it, as in the simulator's
         * trace (the other ranks' tracks are for the viewer) */
        if (e->track >= 0 && e->track < tl->ntracks && tl->tracks[e->track].tp_rank > 0)
            continue;
        if (tl_kind_is_compute(e->kind) && e->track >= 0 && e->track < nt)
            holds[(size_t)e->stage * nt + e->track] = 1;
        if (e->iteration < from) continue;
        compare_cell *c = &out->cells[(size_t)e->stage * TL_NKINDS + e->kind];
        c->n++;
        c->total_s += e->dur_s;
        out->kinds[e->kind].n++;
        out->kinds[e->kind].total_s += e->dur_s;
        keys[nk++] = (evkey){e->stage, e->kind, e->dur_s};
        if (tl_kind_is_compute(e->kind)) busy[e->stage] += e->dur_s;
    }
    set_medians(out, keys, nk, 1);
    set_medians(out, keys, nk, 0);
    for (int s = 0; s < nst; s++) {
        int replicas = 0;
        for (int t = 0; t < nt; t++) replicas += holds[(size_t)s * nt + t];
        if (replicas > 0) out->busy_s[s] = busy[s] / out->used / replicas;
    }
    if (itmax >= 1) {
        int a = (from > 1 ? from : 1) - 1;
        out->iteration_s = (end[itmax] - end[a]) / (itmax - a);
    } else {
        out->iteration_s = timeline_end(tl);
    }
    free(keys);
    free(busy);
    free(end);
    free(holds);
    if (compare_mem_from_timeline(tl, file, out, err) ||
        compare_id_from_timeline(tl, file, out, err)) {
        compare_side_free(out);
        return -1;
    }
    return 0;
}

int compare_side_from_report(const cJSON *root, const char *file, compare_side *out,
                             plumb_err *err)
{
    jctx c = {file, err};
    const char *sched;
    long long micro, iters;
    double it_s;
    const cJSON *stages;
    int n;
    memset(out, 0, sizeof *out);
    if (json_check_format(&c, root, SIM_REPORT_FORMAT) ||
        json_get_str(&c, root, "", "schedule", 1, &sched) ||
        json_get_int(&c, root, "", "microbatches", 1, 1, 2147483647LL, &micro) ||
        json_get_int(&c, root, "", "iterations", 1, 1, 2147483647LL, &iters) ||
        json_get_num(&c, root, "", "iteration_s", 1, J_NONNEG, &it_s) ||
        json_get_arr(&c, root, "", "stages", 1, &stages, &n))
        return -1;
    if (n < 1) return err_set(err, file, "stages", "expected at least one stage (got none)");
    if (side_alloc(out, n, file, "sim report")) return err_set(err, file, NULL, "out of memory");
    int zb = strncmp(sched, "zb", 2) == 0;
    for (int s = 0; s < n; s++) {
        char p[64];
        json_path_idx(p, sizeof p, "", "stages", s);
        const cJSON *st = cJSON_GetArrayItem(stages, s);
        double f, b, in, w, ar;
        long long r = 1;
        if (!cJSON_IsObject(st)) {
            char got[64];
            compare_side_free(out);
            return err_set(err, file, p, "expected an object (got %s)",
                           json_describe(st, got, sizeof got));
        }
        if (json_get_num(&c, st, p, "forward_s", 1, J_NONNEG, &f) ||
            json_get_num(&c, st, p, "backward_s", 1, J_NONNEG, &b) ||
            json_get_num(&c, st, p, "input_grad_s", 1, J_NONNEG, &in) ||
            json_get_num(&c, st, p, "weight_grad_s", 1, J_NONNEG, &w) ||
            json_get_num(&c, st, p, "allreduce_s", 1, J_NONNEG, &ar) ||
            json_get_int(&c, st, p, "replicas", 1, 1, 1 << 20, &r)) {
            compare_side_free(out);
            return -1;
        }
        compare_cell *cell = &out->cells[(size_t)s * TL_NKINDS];
        cell[TL_F] = (compare_cell){micro, (double)micro * f, f};
        if (zb) {
            cell[TL_I] = (compare_cell){micro, (double)micro * in, in};
            cell[TL_W] = (compare_cell){micro, (double)micro * w, w};
        } else {
            cell[TL_B] = (compare_cell){micro, (double)micro * b, b};
        }
        if (r > 1) cell[TL_ALLREDUCE] = (compare_cell){r, (double)r * ar, ar};
        out->busy_s[s] = (double)micro / (double)r * (f + (zb ? in + w : b));
        for (int k = 0; k < TL_NKINDS; k++) {
            out->kinds[k].n += cell[k].n;
            out->kinds[k].total_s += cell[k].total_s;
        }
    }
    /* one figure per stage: the "median" over all stages is the action-weighted mean */
    for (int k = 0; k < TL_NKINDS; k++)
        if (out->kinds[k].n) out->kinds[k].median_s = out->kinds[k].total_s / out->kinds[k].n;
    out->iterations = out->used = (int)iters;
    out->iteration_s = it_s;
    if (compare_mem_from_report(root, file, out, err) ||
        compare_id_from_report(root, file, out, err)) {
        compare_side_free(out);
        return -1;
    }
    return 0;
}

int compare_side_load(const char *path, int skip, compare_side *out, plumb_err *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = json_load_file(path, err);
    if (!root) return -1;
    int rc = -1;
    const cJSON *fmt = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "format")
                                            : NULL;
    if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, SIM_REPORT_FORMAT)) {
        rc = compare_side_from_report(root, path, out, err);
    } else if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        timeline *tl = timeline_from_chrome_json(root, path, err);
        if (tl) {
            char what[64];
            snprintf(what, sizeof what, "%s trace", tl->source[0] ? tl->source : "unnamed");
            rc = compare_side_from_timeline(tl, skip, path, what, out, err);
            timeline_free(tl);
        }
    } else {
        char got[64];
        err_set(err, path, cJSON_IsString(fmt) ? "format" : NULL,
                "expected a simulator report (\"format\": \"%s\") or a Chrome trace with "
                "traceEvents (plumb sim --trace, plumb train --trace) (got %s)",
                SIM_REPORT_FORMAT, cJSON_IsString(fmt) ? fmt->valuestring
                                                       : json_describe(root, got, sizeof got));
    }
    cJSON_Delete(root);
    return rc;
}

double compare_error(double pred, double meas)
{
    if (!(pred >= 0) || !(meas > 0)) return NAN;
    return (pred - meas) / meas;
}

static compare_row make_row(int stage, int kind, compare_cell p, compare_cell m)
{
    compare_row r = {stage, kind, p.n ? p.total_s / p.n : -1, m.n ? m.total_s / m.n : -1, p.n,
                     m.n, 0, p.n ? p.median_s : -1, m.n ? m.median_s : -1, 0};
    r.error = compare_error(r.pred_s, r.meas_s);
    r.error_med = compare_error(r.pred_med_s, r.meas_med_s);
    return r;
}

/* A row of sums (busy time, iteration time): no medians. */
static compare_row sum_row(int stage, double p, double m, long long pn, long long mn)
{
    compare_row r = {stage, -1, p, m, pn, mn, compare_error(p, m), -1, -1, NAN};
    return r;
}

void compare_result_free(compare_result *r)
{
    if (!r) return;
    free(r->rows);
    free(r->kinds);
    free(r->stages);
    free(r->idle);
    free(r->mem);
    memset(r, 0, sizeof *r);
}

/* Iteration time less stage s's compute time (>= 0), or -1 when either is unknown. */
static double idle_of(const compare_side *x, int s)
{
    if (x->iteration_s < 0 || x->busy_s[s] < 0) return -1;
    return x->iteration_s > x->busy_s[s] ? x->iteration_s - x->busy_s[s] : 0;
}

int compare_sides(const compare_side *pred, const compare_side *meas, compare_result *out,
                  plumb_err *err)
{
    memset(out, 0, sizeof *out);
    if (compare_id_check(pred, meas, err))
        return -1;
    if (pred->nstages != meas->nstages)
        return err_set(err, meas->file, "stages",
                       "expected the %d stages of the prediction %s, a run of the same plan "
                       "(got %d)", pred->nstages, pred->file, meas->nstages);
    const int n = pred->nstages;
    out->pred = pred;
    out->meas = meas;
    out->rows = calloc((size_t)n * TL_NKINDS + 1, sizeof *out->rows);
    out->kinds = calloc(TL_NKINDS, sizeof *out->kinds);
    out->stages = calloc((size_t)n + 1, sizeof *out->stages);
    out->idle = calloc((size_t)n + 1, sizeof *out->idle);
    if (!out->rows || !out->kinds || !out->stages || !out->idle) {
        compare_result_free(out);
        return err_set(err, NULL, NULL, "out of memory");
    }
    double sum_abs = 0, sum_med = 0;
    int nabs = 0, nmed = 0;
    for (int s = 0; s < n; s++)
        for (int k = 0; k < TL_NKINDS; k++) {
            compare_cell p = pred->cells[(size_t)s * TL_NKINDS + k];
            compare_cell m = meas->cells[(size_t)s * TL_NKINDS + k];
            if (!p.n && !m.n) continue;
            compare_row r = make_row(s, k, p, m);
            out->rows[out->nrows++] = r;
            if (k != TL_STEP && tl_kind_is_compute(k) && !isnan(r.error)) {
                sum_abs += fabs(r.error);
                nabs++;
            }
            if (k != TL_STEP && tl_kind_is_compute(k) && !isnan(r.error_med)) {
                sum_med += fabs(r.error_med);
                nmed++;
            }
        }
    for (int k = 0; k < TL_NKINDS; k++)
        if (pred->kinds[k].n || meas->kinds[k].n)
            out->kinds[out->nkinds++] = make_row(-1, k, pred->kinds[k], meas->kinds[k]);
    for (int s = 0; s < n; s++) {
        out->idle[s] = sum_row(s, idle_of(pred, s), idle_of(meas, s), pred->used, meas->used);
        out->stages[out->nstages++] =
            sum_row(s, pred->busy_s[s], meas->busy_s[s], pred->used, meas->used);
    }
    out->iteration = sum_row(-1, pred->iteration_s, meas->iteration_s, pred->iterations,
                             meas->iterations);
    out->mean_abs_error = nabs ? sum_abs / nabs : NAN;
    out->mean_abs_error_med = nmed ? sum_med / nmed : NAN;
    if (compare_mem_align(out)) {
        compare_result_free(out);
        return err_set(err, NULL, NULL, "out of memory");
    }
    return 0;
}

/* "  12.3456 ms" or "        - " into buf. */
static const char *fmt_ms(double s, char *buf, size_t n)
{
    if (s < 0) snprintf(buf, n, "%12s", "-");
    else snprintf(buf, n, "%9.4f ms", s * 1e3);
    return buf;
}

const char *compare_fmt_error(double e, char *buf, size_t n)
{
    if (isnan(e)) snprintf(buf, n, "%9s", "-");
    else snprintf(buf, n, "%+7.1f %%", fabs(e) < 5e-4 ? 0.0 : 100 * e);
    return buf;
}

static void print_row(FILE *out, int width, const char *label, const compare_row *r,
                      int counts, int median)
{
    char a[32], b[32], e[32];
    median = median && counts;
    fprintf(out, "%-*s %s  %s  %s", width, label, fmt_ms(median ? r->pred_med_s : r->pred_s, a, sizeof a),
            fmt_ms(median ? r->meas_med_s : r->meas_s, b, sizeof b),
            compare_fmt_error(median ? r->error_med : r->error, e, sizeof e));
    if (counts) fprintf(out, "  %6lld / %-6lld", r->pred_n, r->meas_n);
    fputc('\n', out);
}

/* The label of the text's rows: a stage's action kind (`stage` >= 0; "1     tp_all_gather")
 * or a kind over all stages; "stage N" with kind < 0. */
static void row_label(char *buf, size_t n, int stage, int kind)
{
    if (kind < 0) snprintf(buf, n, "stage %d", stage);
    else if (stage >= 0) snprintf(buf, n, "%-5d %s", stage, tl_kind_name(kind));
    else snprintf(buf, n, "%s", tl_kind_name(kind));
}

/* The width of the label column: 14, or the longest label present when longer (a
 * tensor-parallel collective's kind, "0     tp_reduce_scatter"), so that every row's
 * figures stay in their columns. */
static int label_width(const compare_result *r)
{
    char label[48];
    int w = 14;
    for (int i = 0; i < r->nrows + r->nkinds + r->nstages; i++) {
        if (i < r->nrows) row_label(label, sizeof label, r->rows[i].stage, r->rows[i].kind);
        else if (i < r->nrows + r->nkinds)
            row_label(label, sizeof label, -1, r->kinds[i - r->nrows].kind);
        else row_label(label, sizeof label, r->stages[i - r->nrows - r->nkinds].stage, -1);
        if ((int)strlen(label) > w) w = (int)strlen(label);
    }
    return w;
}

void compare_print(const compare_result *r, int median, FILE *out)
{
    const compare_side *p = r->pred, *m = r->meas;
    const int w = label_width(r);
    fprintf(out, "plumb compare: predicted %s (%s, %d iterations, last %d counted)\n",
            p->file, p->what, p->iterations, p->used);
    fprintf(out, "           against measured %s (%s, %d iterations, last %d counted)\n",
            m->file, m->what, m->iterations, m->used);
    fprintf(out, "error = (predicted - measured) / measured; > 0: the prediction is slower\n\n");
    const char *stat = median ? "median" : "mean";
    fprintf(out, "per stage and action kind, %s time per action:\n", stat);
    fprintf(out, "%-*s %12s  %12s  %9s  %15s\n", w, "stage kind", "predicted", "measured",
            "error", "actions (p / m)");
    char label[48];
    for (int i = 0; i < r->nrows; i++) {
        row_label(label, sizeof label, r->rows[i].stage, r->rows[i].kind);
        print_row(out, w, label, &r->rows[i], 1, median);
    }
    fprintf(out, "\nper action kind, all stages, %s time per action:\n", stat);
    for (int i = 0; i < r->nkinds; i++) {
        row_label(label, sizeof label, -1, r->kinds[i].kind);
        print_row(out, w, label, &r->kinds[i], 1, median);
    }
    fprintf(out, "\nper stage, compute time (F, B, I, W, step) per iteration per replica:\n");
    for (int i = 0; i < r->nstages; i++) {
        row_label(label, sizeof label, r->stages[i].stage, -1);
        print_row(out, w, label, &r->stages[i], 0, 0);
    }
    fprintf(out, "\nper stage, idle time per iteration (iteration - compute; measured: blocking "
            "sends,\nwaits for data and for a CPU):\n");
    for (int i = 0; i < r->nstages; i++) {
        row_label(label, sizeof label, r->idle[i].stage, -1);
        print_row(out, w, label, &r->idle[i], 0, 0);
    }
    fprintf(out, "\nper iteration (steady state):\n");
    print_row(out, w, "iteration", &r->iteration, 0, 0);
    double mae = median ? r->mean_abs_error_med : r->mean_abs_error;
    if (isnan(mae))
        fprintf(out, "\nmean |error| of the per-stage F/B/I/W %s times: - (no figure on both "
                "sides)\n", stat);
    else
        fprintf(out, "\nmean |error| of the per-stage F/B/I/W %s times: %.1f %%\n", stat,
                100 * mae);
    compare_mem_print(r, out);
}

void compare_json_opt(cJSON *o, const char *key, double v)
{
    if (isnan(v)) cJSON_AddNullToObject(o, key);
    else json_add_num(o, key, v);
}

static cJSON *row_json(const compare_row *r, int counts)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    if (r->stage >= 0) cJSON_AddNumberToObject(o, "stage", r->stage);
    if (r->kind >= 0) cJSON_AddStringToObject(o, "kind", tl_kind_name(r->kind));
    if (r->pred_s >= 0) json_add_num(o, "predicted_ms", r->pred_s * 1e3);
    else cJSON_AddNullToObject(o, "predicted_ms");
    if (r->meas_s >= 0) json_add_num(o, "measured_ms", r->meas_s * 1e3);
    else cJSON_AddNullToObject(o, "measured_ms");
    compare_json_opt(o, "error", r->error);
    if (counts) {
        if (r->pred_med_s >= 0) json_add_num(o, "predicted_median_ms", r->pred_med_s * 1e3);
        else cJSON_AddNullToObject(o, "predicted_median_ms");
        if (r->meas_med_s >= 0) json_add_num(o, "measured_median_ms", r->meas_med_s * 1e3);
        else cJSON_AddNullToObject(o, "measured_median_ms");
        compare_json_opt(o, "error_median", r->error_med);
        cJSON_AddNumberToObject(o, "predicted_actions", (double)r->pred_n);
        cJSON_AddNumberToObject(o, "measured_actions", (double)r->meas_n);
    }
    return o;
}

static cJSON *side_json(const compare_side *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "file", s->file);
    cJSON_AddStringToObject(o, "what", s->what);
    cJSON_AddNumberToObject(o, "stages", s->nstages);
    cJSON_AddNumberToObject(o, "iterations", s->iterations);
    cJSON_AddNumberToObject(o, "iterations_counted", s->used);
    return o;
}

static int add_rows(cJSON *o, const char *key, const compare_row *rows, int n, int counts)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    if (!a) return -1;
    for (int i = 0; i < n; i++) {
        cJSON *r = row_json(&rows[i], counts);
        if (!r) return -1;
        cJSON_AddItemToArray(a, r);
    }
    return 0;
}

cJSON *compare_to_json(const compare_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *p = side_json(r->pred), *m = side_json(r->meas), *it = row_json(&r->iteration, 0);
    if (!p || !m || !it) {
        cJSON_Delete(p);
        cJSON_Delete(m);
        cJSON_Delete(it);
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddStringToObject(o, "format", COMPARE_FORMAT);
    cJSON_AddStringToObject(o, "error_definition", "(predicted - measured) / measured");
    cJSON_AddItemToObject(o, "predicted", p);
    cJSON_AddItemToObject(o, "measured", m);
    if (add_rows(o, "actions", r->rows, r->nrows, 1) ||
        add_rows(o, "kinds", r->kinds, r->nkinds, 1) ||
        add_rows(o, "stages", r->stages, r->nstages, 0) ||
        add_rows(o, "idle", r->idle, r->nstages, 0)) {
        cJSON_Delete(it);
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(o, "iteration", it);
    compare_json_opt(o, "mean_abs_error", r->mean_abs_error);
    compare_json_opt(o, "mean_abs_error_median", r->mean_abs_error_med);
    if (compare_mem_json(r, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
