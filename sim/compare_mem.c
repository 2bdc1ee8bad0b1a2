/* compare_mem.c: the memory half of `plumb compare` (sim/compare.h): each side's peak
 * memory per device, grouped by the set of stages the devices run (the simulator numbers
 * the plan's devices, the executor may number its workers, but both run stage s where the
 * plan puts it), the alignment of the two sides' groups, and their table and JSON. */
#include "sim/compare.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

/* Appends stage to the key text ("0,4"), ending it with "..." when it no longer fits. */
static void key_add(char *key, size_t n, int stage)
{
    size_t len = strlen(key);
    if (len >= 3 && !strcmp(key + len - 3, "...")) return;
    char num[16];
    snprintf(num, sizeof num, "%s%d", len ? "," : "", stage);
    if (len + strlen(num) + 4 > n) snprintf(key + len, n - len, "...");
    else memcpy(key + len, num, strlen(num) + 1);
}

static int cmp_mem(const void *a, const void *b)
{
    const compare_mem *x = a, *y = b;
    if (x->first_stage != y->first_stage) return x->first_stage < y->first_stage ? -1 : 1;
    return strcmp(x->stages, y->stages);
}

/* Sorts s->mem and merges entries of the same stage set (largest peak, devices added). */
static void merge_groups(compare_side *s)
{
    if (s->nmem == 0) return;
    qsort(s->mem, (size_t)s->nmem, sizeof *s->mem, cmp_mem);
    int n = 1;
    for (int i = 1; i < s->nmem; i++) {
        compare_mem *last = &s->mem[n - 1];
        if (!cmp_mem(last, &s->mem[i])) {
            last->ndevices += s->mem[i].ndevices;
            if (s->mem[i].peak_bytes > last->peak_bytes) last->peak_bytes = s->mem[i].peak_bytes;
        } else {
            s->mem[n++] = s->mem[i];
        }
    }
    s->nmem = n;
}

typedef struct track_stage {
    int track, stage;
} track_stage;

static int cmp_ts(const void *a, const void *b)
{
    const track_stage *x = a, *y = b;
    if (x->track != y->track) return x->track < y->track ? -1 : 1;
    return (x->stage > y->stage) - (x->stage < y->stage);
}

int compare_mem_from_timeline(const timeline *tl, const char *file, compare_side *s,
                              plumb_err *err)
{
    s->nmem = 0;
    s->mem = NULL;
    int any = 0;
    for (int t = 0; t < tl->ntracks; t++)
        any |= tl->tracks[t].kind == TL_TRACK_DEVICE && tl->tracks[t].peak_bytes >= 0;
    if (!any || tl->n == 0) return 0;
    /* (track, stage) of every compute action on a device track with a peak, sorted */
    track_stage *ts = malloc(tl->n * sizeof *ts);
    s->mem = calloc((size_t)tl->ntracks, sizeof *s->mem);
    if (!ts || !s->mem) {
        free(ts);
        free(s->mem);
        s->mem = NULL;
        return err_set(err, file, NULL, "out of memory");
    }
    size_t n = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (e->track < 0 || e->track >= tl->ntracks || e->stage < 0 ||
            !tl_kind_is_compute(e->kind))
            continue;
        const tl_track *t = &tl->tracks[e->track];
        if (t->kind == TL_TRACK_DEVICE && t->peak_bytes >= 0 && t->tp_rank == 0)
            ts[n++] = (track_stage){e->track, e->stage}; /* a tp group: its first rank */
    }
    qsort(ts, n, sizeof *ts, cmp_ts);
    for (size_t i = 0; i < n;) {
        compare_mem *m = &s->mem[s->nmem++];
        *m = (compare_mem){.first_stage = ts[i].stage, .ndevices = 1,
                           .peak_bytes = tl->tracks[ts[i].track].peak_bytes};
        size_t j = i;
        for (; j < n && ts[j].track == ts[i].track; j++)
            if (j == i || ts[j].stage != ts[j - 1].stage)
                key_add(m->stages, sizeof m->stages, ts[j].stage);
        i = j;
    }
    free(ts);
    merge_groups(s);
    return 0;
}

int compare_mem_from_report(const cJSON *root, const char *file, compare_side *s,
                            plumb_err *err)
{
    jctx c = {file, err};
    const cJSON *devs;
    int n;
    s->nmem = 0;
    s->mem = NULL;
    if (json_get_arr(&c, root, "", "devices", 0, &devs, &n)) return -1;
    if (!devs || n == 0) return 0;
    if (!(s->mem = calloc((size_t)n, sizeof *s->mem)))
        return err_set(err, file, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        char p[64];
        json_path_idx(p, sizeof p, "", "devices", i);
        const cJSON *d = cJSON_GetArrayItem(devs, i), *st;
        double peak;
        int ns;
        if (!cJSON_IsObject(d)) {
            char got[64];
            return err_set(err, file, p, "expected an object (got %s)",
                           json_describe(d, got, sizeof got));
        }
        if (json_get_num(&c, d, p, "peak_memory_bytes", 1, J_NONNEG, &peak) ||
            json_get_arr(&c, d, p, "stages", 1, &st, &ns))
            return -1;
        if (ns == 0) continue; /* a device without a stage holds nothing to compare */
        compare_mem *m = &s->mem[s->nmem++];
        *m = (compare_mem){.ndevices = 1, .peak_bytes = peak};
        char sp[96];
        json_path(sp, sizeof sp, p, "stages");
        for (int k = 0; k < ns; k++) {
            double v;
            if (json_item_num(&c, cJSON_GetArrayItem(st, k), sp, k, J_NONNEG, &v)) return -1;
            if (v != floor(v) || v > COMPARE_MAX_STAGES) {
                char ip[112];
                snprintf(ip, sizeof ip, "%s[%d]", sp, k);
                return err_set(err, file, ip, "expected a stage index (got %g)", v);
            }
            if (k == 0 || (int)v < m->first_stage) m->first_stage = (int)v;
            key_add(m->stages, sizeof m->stages, (int)v);
        }
    }
    merge_groups(s);
    return 0;
}

int compare_mem_align(compare_result *r)
{
    const compare_side *p = r->pred, *m = r->meas;
    r->nmem = 0;
    r->mem = NULL;
    r->mem_mean_abs_error = NAN;
    if (!p->nmem && !m->nmem) return 0;
    r->mem = calloc((size_t)(p->nmem + m->nmem), sizeof *r->mem);
    if (!r->mem) return -1;
    double sum = 0;
    int nsum = 0, i = 0, j = 0;
    while (i < p->nmem || j < m->nmem) { /* both sorted by (first stage, key) */
        int c = i >= p->nmem ? 1 : j >= m->nmem ? -1 : cmp_mem(&p->mem[i], &m->mem[j]);
        compare_mem_row *row = &r->mem[r->nmem++];
        const compare_mem *a = c <= 0 ? &p->mem[i] : NULL, *b = c >= 0 ? &m->mem[j] : NULL;
        /* the row's stages from whichever side has it (no null path for the compiler) */
        snprintf(row->stages, sizeof row->stages, "%s",
                 (c <= 0 ? &p->mem[i] : &m->mem[j])->stages);
        row->pred_bytes = a ? a->peak_bytes : -1;
        row->meas_bytes = b ? b->peak_bytes : -1;
        row->pred_devices = a ? a->ndevices : 0;
        row->meas_devices = b ? b->ndevices : 0;
        row->error = compare_error(row->pred_bytes, row->meas_bytes);
        if (!isnan(row->error)) {
            sum += fabs(row->error);
            nsum++;
        }
        i += a != NULL;
        j += b != NULL;
    }
    if (nsum) r->mem_mean_abs_error = sum / nsum;
    return 0;
}

static const char *fmt_mib(double bytes, char *buf, size_t n)
{
    if (bytes < 0) snprintf(buf, n, "%14s", "-");
    else snprintf(buf, n, "%10.1f MiB", bytes / 1048576.0);
    return buf;
}

void compare_mem_print(const compare_result *r, FILE *out)
{
    if (!r->nmem) return;
    int w = 14; /* the label column: the longest list of stages when longer */
    for (int i = 0; i < r->nmem; i++)
        if ((int)strlen(r->mem[i].stages) > w) w = (int)strlen(r->mem[i].stages);
    fprintf(out, "\npeak memory per device, by the stages it runs (the largest of its replicas; "
            "measured:\nwhat the backend allocated):\n");
    fprintf(out, "%-*s %14s  %14s  %9s  %15s\n", w, "stages", "predicted", "measured", "error",
            "devices (p / m)");
    for (int i = 0; i < r->nmem; i++) {
        const compare_mem_row *m = &r->mem[i];
        char a[32], b[32], e[32];
        fprintf(out, "%-*s %s  %s  %s  %6d / %-6d\n", w, m->stages,
                fmt_mib(m->pred_bytes, a, sizeof a), fmt_mib(m->meas_bytes, b, sizeof b),
                compare_fmt_error(m->error, e, sizeof e), m->pred_devices, m->meas_devices);
    }
    if (!isnan(r->mem_mean_abs_error))
        fprintf(out, "mean |error| of the peak memory: %.1f %%\n", 100 * r->mem_mean_abs_error);
}

int compare_mem_json(const compare_result *r, cJSON *o)
{
    cJSON *a = cJSON_AddArrayToObject(o, "memory");
    if (!a) return -1;
    for (int i = 0; i < r->nmem; i++) {
        const compare_mem_row *m = &r->mem[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) return -1;
        cJSON_AddItemToArray(a, x);
        cJSON_AddStringToObject(x, "stages", m->stages);
        compare_json_opt(x, "predicted_bytes", m->pred_bytes >= 0 ? m->pred_bytes : NAN);
        compare_json_opt(x, "measured_bytes", m->meas_bytes >= 0 ? m->meas_bytes : NAN);
        compare_json_opt(x, "error", m->error);
        cJSON_AddNumberToObject(x, "predicted_devices", m->pred_devices);
        cJSON_AddNumberToObject(x, "measured_devices", m->meas_devices);
    }
    compare_json_opt(o, "memory_mean_abs_error", r->mem_mean_abs_error);
    return 0;
}
