/* cluster.c: plumb-cluster/1 files: loading with full validation (every error names the
 * field path), conversion between the file's units (Gbit/s, microseconds, GiB, TFLOP/s) and
 * the struct's SI units (bytes/s, seconds, bytes, FLOP/s), atomic saving, deep copies,
 * comparison, and the device-numbering helpers the planner and simulator use.
 *
 * Unit conversions are made invertible on save: the file value written is the double that
 * converts back to exactly the struct's value, so load -> save -> load gives equal structs. */
#include "cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "device.h"
#include "json.h"
#include "units.h"

/* ---- small helpers ------------------------------------------------------------------- */

/* Product of level counts [from, to), or -1 when it exceeds CLUSTER_MAX_DEVICES. */
static long long count_product(const cluster *c, int from, int to)
{
    long long p = 1;
    for (int i = from; i < to; i++) {
        p *= c->levels[i].count;
        if (p > CLUSTER_MAX_DEVICES) return -1;
    }
    return p;
}

/* ---- lifetime ------------------------------------------------------------------------ */

void cluster_free(cluster *c)
{
    if (!c) return;
    free(c->name);
    free(c->description);
    for (int i = 0; i < c->nlevels && i < CLUSTER_MAX_LEVELS; i++) free(c->levels[i].name);
    if (c->types)
        for (int i = 0; i < c->ntypes; i++) free(c->types[i].name);
    free(c->types);
    free(c->server_type);
    free(c);
}

cluster *cluster_clone(const cluster *c)
{
    if (!c || c->nlevels < 0 || c->nlevels > CLUSTER_MAX_LEVELS || c->ntypes < 0 ||
        c->nservers < 0)
        return NULL;
    cluster *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    *d = *c;
    d->name = NULL;
    d->description = NULL;
    d->types = NULL;
    d->server_type = NULL;
    for (int i = 0; i < CLUSTER_MAX_LEVELS; i++) d->levels[i].name = NULL;
    d->nlevels = 0;
    d->ntypes = 0;
    if (!(d->name = strdup(c->name ? c->name : ""))) goto fail;
    if (!(d->description = strdup(c->description ? c->description : ""))) goto fail;
    for (int i = 0; i < c->nlevels; i++) {
        d->levels[i] = c->levels[i];
        d->levels[i].name = strdup(c->levels[i].name ? c->levels[i].name : "");
        d->nlevels = i + 1;
        if (!d->levels[i].name) goto fail;
    }
    if (c->ntypes > 0) {
        d->types = calloc((size_t)c->ntypes, sizeof *d->types);
        if (!d->types) goto fail;
        d->ntypes = c->ntypes;
        for (int i = 0; i < c->ntypes; i++) {
            d->types[i] = c->types[i];
            d->types[i].name = strdup(c->types[i].name ? c->types[i].name : "");
            if (!d->types[i].name) goto fail;
        }
    }
    if (c->nservers > 0 && c->server_type) {
        d->server_type = malloc((size_t)c->nservers * sizeof *d->server_type);
        if (!d->server_type) goto fail;
        memcpy(d->server_type, c->server_type, (size_t)c->nservers * sizeof *d->server_type);
    }
    return d;
fail:
    cluster_free(d);
    return NULL;
}

static int str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

int cluster_equal(const cluster *a, const cluster *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    if (!str_eq(a->name, b->name) || !str_eq(a->description, b->description)) return 0;
    if (a->nlevels != b->nlevels || a->ntypes != b->ntypes || a->nservers != b->nservers ||
        a->ndevices != b->ndevices)
        return 0;
    for (int i = 0; i < a->nlevels; i++) {
        const cluster_level *x = &a->levels[i], *y = &b->levels[i];
        if (!str_eq(x->name, y->name) || x->count != y->count ||
            x->bandwidth_Bps != y->bandwidth_Bps || x->latency_s != y->latency_s ||
            x->egress_Bps != y->egress_Bps)
            return 0;
    }
    for (int i = 0; i < a->ntypes; i++) {
        const device_type *x = &a->types[i], *y = &b->types[i];
        int xp = x->peak_flops > 0, yp = y->peak_flops > 0;
        if (!str_eq(x->name, y->name) || x->memory_bytes != y->memory_bytes ||
            x->speed != y->speed || xp != yp || (xp && x->peak_flops != y->peak_flops) ||
            x->cores != y->cores)
            return 0;
        if (!device_figures_equal(x, y)) return 0;
    }
    for (int i = 0; i < a->nservers; i++)
        if (a->server_type[i] != b->server_type[i]) return 0;
    return 1;
}

/* ---- validation of an in-memory cluster ---------------------------------------------- */

static int bad_bandwidth(plumb_err *err, const char *file, const char *path, double Bps)
{
    return err_set(err, file, path, "expected a bandwidth from %g to %g Gbit/s (1 kbit/s to "
                   "100 Tbit/s) (got %.10g)", units_Bps_to_gbit(BOUND_BW_BPS_MIN),
                   units_Bps_to_gbit(BOUND_BW_BPS_MAX), units_Bps_to_gbit(Bps));
}

int cluster_validate(const cluster *c, const char *file, plumb_err *err)
{
    char p[128];
    if (!c) return err_set(err, file, NULL, "expected a cluster (got nothing)");
    if (!c->name) return err_set(err, file, "name", "expected a string (got nothing)");
    if (!c->description)
        return err_set(err, file, "description", "expected a string (got nothing)");
    if (c->nlevels < 1 || c->nlevels > CLUSTER_MAX_LEVELS)
        return err_set(err, file, "levels", "expected 1 to %d levels (got %d)",
                       CLUSTER_MAX_LEVELS, c->nlevels);
    for (int i = 0; i < c->nlevels; i++) {
        const cluster_level *l = &c->levels[i];
        char lp[64];
        snprintf(lp, sizeof lp, "levels[%d]", i);
        if (!l->name || !*l->name)
            return err_set(err, file, json_path(p, sizeof p, lp, "name"),
                           "expected a non-empty string");
        if (l->count < 1 || l->count > CLUSTER_MAX_DEVICES)
            return err_set(err, file, json_path(p, sizeof p, lp, "count"),
                           "expected an integer from 1 to %d (got %d)", CLUSTER_MAX_DEVICES,
                           l->count);
        if (!(l->bandwidth_Bps >= BOUND_BW_BPS_MIN && l->bandwidth_Bps <= BOUND_BW_BPS_MAX))
            return bad_bandwidth(err, file, json_path(p, sizeof p, lp, "bandwidth_gbit_per_s"),
                                 l->bandwidth_Bps);
        if (!(l->latency_s >= 0 && l->latency_s <= BOUND_LATENCY_S_MAX))
            return err_set(err, file, json_path(p, sizeof p, lp, "latency_us"),
                           "expected a latency from 0 to %g us (10 s) (got %.10g)",
                           units_s_to_us(BOUND_LATENCY_S_MAX), units_s_to_us(l->latency_s));
        if (!(l->egress_Bps >= BOUND_BW_BPS_MIN && l->egress_Bps <= BOUND_BW_BPS_MAX))
            return bad_bandwidth(err, file, json_path(p, sizeof p, lp, "egress_gbit_per_s"),
                                 l->egress_Bps);
    }
    long long ndev = count_product(c, 0, c->nlevels);
    long long nsrv = count_product(c, 1, c->nlevels);
    if (ndev < 0)
        return err_set(err, file, "levels",
                       "expected the counts to multiply to at most %d devices",
                       CLUSTER_MAX_DEVICES);
    if (c->ndevices != ndev || c->nservers != nsrv)
        return err_set(err, file, "levels",
                       "expected %lld devices in %lld servers (the struct says %d in %d)",
                       ndev, nsrv, c->ndevices, c->nservers);
    if (c->ntypes < 1 || !c->types)
        return err_set(err, file, "device_types", "expected at least one device type");
    for (int i = 0; i < c->ntypes; i++) {
        const device_type *t = &c->types[i];
        char tp[64];
        snprintf(tp, sizeof tp, "device_types[%d]", i);
        if (!t->name || !*t->name)
            return err_set(err, file, json_path(p, sizeof p, tp, "name"),
                           "expected a non-empty string");
        for (int j = 0; j < i; j++)
            if (c->types[j].name && strcmp(c->types[j].name, t->name) == 0)
                return err_set(err, file, json_path(p, sizeof p, tp, "name"),
                               "expected a unique device type name (got \"%.60s\" again, first "
                               "at device_types[%d])", t->name, j);
        if (!(t->memory_bytes >= BOUND_MEMORY_MIN && t->memory_bytes <= BOUND_MEMORY_MAX))
            return err_set(err, file, json_path(p, sizeof p, tp, "memory_gib"),
                           "expected a memory size from %g to %g GiB (1 MiB to 1 PiB) (got "
                           "%.10g)", units_bytes_to_gib(BOUND_MEMORY_MIN),
                           units_bytes_to_gib(BOUND_MEMORY_MAX),
                           units_bytes_to_gib(t->memory_bytes));
        if (!(t->speed >= BOUND_SPEED_MIN && t->speed <= BOUND_SPEED_MAX))
            return err_set(err, file, json_path(p, sizeof p, tp, "speed"),
                           "expected a relative speed from %g to %g (got %.10g)",
                           BOUND_SPEED_MIN, BOUND_SPEED_MAX, t->speed);
        if (!isfinite(t->peak_flops) ||
            (t->peak_flops > 0 &&
             !(t->peak_flops >= BOUND_PEAK_FLOPS_MIN && t->peak_flops <= BOUND_PEAK_FLOPS_MAX)))
            return err_set(err, file, json_path(p, sizeof p, tp, "peak_tflops"),
                           "expected a peak from %g to %g TFLOP/s, or absent (got %.10g)",
                           units_flops_to_tflops(BOUND_PEAK_FLOPS_MIN),
                           units_flops_to_tflops(BOUND_PEAK_FLOPS_MAX),
                           units_flops_to_tflops(t->peak_flops));
        if (device_figures_validate(t, file, tp, err)) return -1;
        if (t->cores < 0)
            return err_set(err, file, json_path(p, sizeof p, tp, "cores"),
                           "expected an integer >= 1 (got %d)", t->cores);
    }
    if (!c->server_type)
        return err_set(err, file, "servers", "expected a device type for each server");
    for (int s = 0; s < c->nservers; s++)
        if (c->server_type[s] < 0 || c->server_type[s] >= c->ntypes)
            return err_set(err, file, json_path_idx(p, sizeof p, "servers", "", s),
                           "expected a device type index from 0 to %d (got %d)",
                           c->ntypes - 1, c->server_type[s]);
    return 0;
}

/* ---- loading ------------------------------------------------------------------------- */

static const char *const ROOT_KEYS[] = { "format", "name", "description", "levels",
                                         "device_types", "device_type", "servers", NULL };
static const char *const LEVEL_KEYS[] = { "name", "count", "bandwidth_gbit_per_s", "latency_us",
                                          "egress_gbit_per_s", NULL };
static const char *const TYPE_KEYS[] = { "name", "memory_gib", "speed", "peak_tflops",
                                         "peak_tflops_by_precision", "memory_gbyte_per_s",
                                         "efficiency", "gemm_tiling", "cores", NULL };
static const char *const SERVER_KEYS[] = { "device_type", "count", NULL };


/* Finds device type `name`; -1 when unknown. */
static int type_index(const cluster *c, const char *name)
{
    for (int i = 0; i < c->ntypes; i++)
        if (strcmp(c->types[i].name, name) == 0) return i;
    return -1;
}

static int unknown_type(const jctx *jc, const cluster *c, const char *fp, const char *name)
{
    char list[256];
    size_t n = 0;
    list[0] = '\0';
    for (int i = 0; i < c->ntypes && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s\"%s\"", i ? ", " : "",
                              c->types[i].name);
    return err_set(jc->err, jc->file, fp, "expected a device type of device_types: %s (got \"%.60s\")",
                   list, name);
}

static int load_levels(const jctx *jc, const cJSON *root, cluster *c)
{
    const cJSON *arr;
    int n;
    char p[128];
    if (json_get_arr(jc, root, "", "levels", 1, &arr, &n)) return -1;
    if (n < 1 || n > CLUSTER_MAX_LEVELS)
        return err_set(jc->err, jc->file, "levels", "expected 1 to %d levels (got %d)",
                       CLUSTER_MAX_LEVELS, n);
    long long prod = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *lv = cJSON_GetArrayItem(arr, i);
        cluster_level *l = &c->levels[i];
        const char *name = NULL;
        long long count = 0;
        json_path_idx(p, sizeof p, "levels", "", i);
        if (json_check_keys(jc, lv, p, LEVEL_KEYS) || json_get_str(jc, lv, p, "name", 1, &name))
            return -1;
        if (!*name) {
            char fp[160];
            return err_set(jc->err, jc->file, json_path(fp, sizeof fp, p, "name"),
                           "expected a non-empty string (got \"\")");
        }
        if (!(l->name = strdup(name))) return err_set(jc->err, jc->file, p, "out of memory");
        c->nlevels = i + 1;
        if (json_get_int(jc, lv, p, "count", 1, 1, CLUSTER_MAX_DEVICES, &count)) return -1;
        prod *= count;
        if (prod > CLUSTER_MAX_DEVICES) {
            char fp[160];
            return err_set(jc->err, jc->file, json_path(fp, sizeof fp, p, "count"),
                           "expected the level counts to multiply to at most %d devices "
                           "(got %lld at this level)", CLUSTER_MAX_DEVICES, count);
        }
        l->count = (int)count;
        if (json_get_converted(jc, lv, p, "bandwidth_gbit_per_s", 1, J_POS, units_gbit_to_Bps,
                               &l->bandwidth_Bps, NULL) ||
            json_get_converted(jc, lv, p, "latency_us", 1, J_NONNEG, units_us_to_s,
                               &l->latency_s, NULL))
            return -1;
        int has_egress = 0;
        if (json_get_converted(jc, lv, p, "egress_gbit_per_s", 0, J_POS, units_gbit_to_Bps,
                               &l->egress_Bps, &has_egress))
            return -1;
        if (!has_egress) l->egress_Bps = l->bandwidth_Bps;
    }
    c->ndevices = (int)prod;
    c->nservers = (int)count_product(c, 1, c->nlevels);
    return 0;
}

static int load_types(const jctx *jc, const cJSON *root, cluster *c)
{
    const cJSON *arr;
    int n;
    char p[128], fp[160];
    if (json_get_arr(jc, root, "", "device_types", 1, &arr, &n)) return -1;
    if (n < 1)
        return err_set(jc->err, jc->file, "device_types",
                       "expected at least one device type (got an empty array)");
    c->types = calloc((size_t)n, sizeof *c->types);
    if (!c->types) return err_set(jc->err, jc->file, "device_types", "out of memory");
    for (int i = 0; i < n; i++) {
        const cJSON *tv = cJSON_GetArrayItem(arr, i);
        device_type *t = &c->types[i];
        const char *name = NULL;
        long long cores = 0;
        json_path_idx(p, sizeof p, "device_types", "", i);
        if (json_check_keys(jc, tv, p, TYPE_KEYS) || json_get_str(jc, tv, p, "name", 1, &name))
            return -1;
        json_path(fp, sizeof fp, p, "name");
        if (!*name)
            return err_set(jc->err, jc->file, fp, "expected a non-empty string (got \"\")");
        int dup = type_index(c, name);
        if (dup >= 0)
            return err_set(jc->err, jc->file, fp,
                           "expected a unique device type name (got \"%.60s\" again, first at "
                           "device_types[%d])", name, dup);
        if (!(t->name = strdup(name))) return err_set(jc->err, jc->file, p, "out of memory");
        c->ntypes = i + 1;
        t->peak_flops = -1;
        if (json_get_converted(jc, tv, p, "memory_gib", 1, J_POS, units_gib_to_bytes,
                               &t->memory_bytes, NULL) ||
            json_get_num(jc, tv, p, "speed", 1, J_POS, &t->speed) ||
            json_get_converted(jc, tv, p, "peak_tflops", 0, J_POS, units_tflops_to_flops,
                               &t->peak_flops, NULL) ||
            device_figures_from_json(jc, tv, p, t) ||
            json_get_int(jc, tv, p, "cores", 0, 1, 1 << 20, &cores))
            return -1;
        t->cores = (int)cores;
    }
    return 0;
}

static int load_servers(const jctx *jc, const cJSON *root, cluster *c)
{
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(root, "device_type");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "servers");
    char p[128], fp[160];
    if (one && list)
        return err_set(jc->err, jc->file, "servers",
                       "expected either \"device_type\" (one type for all servers) or "
                       "\"servers\", not both");
    if (!one && !list)
        return err_set(jc->err, jc->file, "device_type",
                       "missing; expected a device type name for all servers (or a \"servers\" "
                       "list)");
    c->server_type = calloc((size_t)c->nservers, sizeof *c->server_type);
    if (!c->server_type) return err_set(jc->err, jc->file, "servers", "out of memory");
    if (one) {
        const char *name = NULL;
        if (json_get_str(jc, root, "", "device_type", 1, &name)) return -1;
        int t = type_index(c, name);
        if (t < 0) return unknown_type(jc, c, "device_type", name);
        for (int s = 0; s < c->nservers; s++) c->server_type[s] = t;
        return 0;
    }
    const cJSON *arr;
    int n;
    if (json_get_arr(jc, root, "", "servers", 1, &arr, &n)) return -1;
    if (n < 1)
        return err_set(jc->err, jc->file, "servers",
                       "expected at least one {\"device_type\", \"count\"} entry (got an empty "
                       "array)");
    char why[64];
    if (c->nlevels == 1) snprintf(why, sizeof why, "a single-level cluster is one server");
    else if (c->nlevels == 2) snprintf(why, sizeof why, "levels[1].count");
    else snprintf(why, sizeof why, "the product of levels[1..%d].count", c->nlevels - 1);
    long long total = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *sv = cJSON_GetArrayItem(arr, i);
        const char *name = NULL;
        long long count = 0;
        json_path_idx(p, sizeof p, "servers", "", i);
        if (json_check_keys(jc, sv, p, SERVER_KEYS) || json_get_str(jc, sv, p, "device_type", 1, &name))
            return -1;
        int t = type_index(c, name);
        if (t < 0) return unknown_type(jc, c, json_path(fp, sizeof fp, p, "device_type"), name);
        if (json_get_int(jc, sv, p, "count", 1, 1, CLUSTER_MAX_DEVICES, &count)) return -1;
        if (total + count > c->nservers)
            return err_set(jc->err, jc->file, json_path(fp, sizeof fp, p, "count"),
                           "expected the server counts to total %d servers (%s) (got %lld by "
                           "this entry)", c->nservers, why, total + count);
        for (long long k = 0; k < count; k++) c->server_type[total + k] = t;
        total += count;
    }
    if (total != c->nservers)
        return err_set(jc->err, jc->file, "servers",
                       "expected the server counts to total %d servers (%s) (got %lld)",
                       c->nservers, why, total);
    return 0;
}

cluster *cluster_from_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx jc = { file, err };
    const char *s = NULL;
    if (json_check_format(&jc, root, CLUSTER_FORMAT) || json_check_keys(&jc, root, "", ROOT_KEYS))
        return NULL;
    cluster *c = calloc(1, sizeof *c);
    if (!c) { err_set(err, file, NULL, "out of memory"); return NULL; }
    if (json_get_str(&jc, root, "", "name", 1, &s)) goto fail;
    if (!(c->name = strdup(s))) goto oom;
    s = "";
    if (json_get_str(&jc, root, "", "description", 0, &s)) goto fail;
    if (!(c->description = strdup(s))) goto oom;
    if (load_levels(&jc, root, c) || load_types(&jc, root, c) || load_servers(&jc, root, c))
        goto fail;
    if (cluster_validate(c, file, err)) goto fail;
    return c;
oom:
    err_set(err, file, NULL, "out of memory");
fail:
    cluster_free(c);
    return NULL;
}

cluster *cluster_load(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) return NULL;
    cluster *c = cluster_from_json(root, path, err);
    cJSON_Delete(root);
    return c;
}

/* ---- saving -------------------------------------------------------------------------- */

cJSON *cluster_to_json(const cluster *c)
{
    if (!c) return NULL;
    cJSON *root = cJSON_CreateObject(), *arr, *o;
    if (!root) return NULL;
    if (!cJSON_AddStringToObject(root, "format", CLUSTER_FORMAT) ||
        !cJSON_AddStringToObject(root, "name", c->name ? c->name : "") ||
        !cJSON_AddStringToObject(root, "description", c->description ? c->description : ""))
        goto fail;
    if (!(arr = cJSON_AddArrayToObject(root, "levels"))) goto fail;
    for (int i = 0; i < c->nlevels; i++) {
        const cluster_level *l = &c->levels[i];
        if (!(o = cJSON_CreateObject())) goto fail;
        cJSON_AddItemToArray(arr, o);
        if (!cJSON_AddStringToObject(o, "name", l->name ? l->name : "") ||
            !json_add_num(o, "count", l->count) ||
            !json_add_num(o, "bandwidth_gbit_per_s", units_Bps_to_gbit(l->bandwidth_Bps)) ||
            !json_add_num(o, "latency_us", units_s_to_us(l->latency_s)))
            goto fail;
        if (l->egress_Bps != l->bandwidth_Bps &&
            !json_add_num(o, "egress_gbit_per_s", units_Bps_to_gbit(l->egress_Bps)))
            goto fail;
    }
    if (!(arr = cJSON_AddArrayToObject(root, "device_types"))) goto fail;
    for (int i = 0; i < c->ntypes; i++) {
        const device_type *t = &c->types[i];
        if (!(o = cJSON_CreateObject())) goto fail;
        cJSON_AddItemToArray(arr, o);
        if (!cJSON_AddStringToObject(o, "name", t->name ? t->name : "") ||
            !json_add_num(o, "memory_gib", units_bytes_to_gib(t->memory_bytes)) ||
            !json_add_num(o, "speed", t->speed))
            goto fail;
        if (t->peak_flops > 0 &&
            !json_add_num(o, "peak_tflops", units_flops_to_tflops(t->peak_flops)))
            goto fail;
        if (device_figures_to_json(t, o)) goto fail;
        if (t->cores > 0 && !json_add_num(o, "cores", t->cores)) goto fail;
    }
    int uniform = 1;
    for (int s = 1; s < c->nservers; s++)
        if (c->server_type[s] != c->server_type[0]) uniform = 0;
    if (uniform && c->nservers > 0 && c->server_type) {
        int t = c->server_type[0];
        const char *tn = (t >= 0 && t < c->ntypes) ? c->types[t].name : "";
        if (!cJSON_AddStringToObject(root, "device_type", tn)) goto fail;
    } else {
        if (!(arr = cJSON_AddArrayToObject(root, "servers"))) goto fail;
        for (int s = 0; s < c->nservers;) {
            int t = c->server_type[s], e = s;
            while (e < c->nservers && c->server_type[e] == t) e++;
            if (!(o = cJSON_CreateObject())) goto fail;
            cJSON_AddItemToArray(arr, o);
            const char *tn = (t >= 0 && t < c->ntypes) ? c->types[t].name : "";
            if (!cJSON_AddStringToObject(o, "device_type", tn) ||
                !json_add_num(o, "count", e - s))
                goto fail;
            s = e;
        }
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

int cluster_save(const cluster *c, const char *path, plumb_err *err)
{
    if (cluster_validate(c, path, err)) return -1;
    return json_save_tree(path, cluster_to_json(c), err);
}

/* ---- device numbering ---------------------------------------------------------------- */

const char *cluster_device_noun(const cluster *c)
{
    int cpu = 0;
    for (int t = 0; c && t < c->ntypes; t++) cpu += c->types[t].cores > 0;
    if (!c || c->ntypes < 1 || (cpu > 0 && cpu < c->ntypes)) return "device";
    return cpu ? "CPU worker" : "GPU";
}

const device_type *cluster_device_type(const cluster *c, int d)
{
    if (!c || d < 0 || d >= c->ndevices || !c->server_type) return NULL;
    int s = cluster_server_of(c, d);
    if (s < 0 || s >= c->nservers) return NULL;
    int t = c->server_type[s];
    return (t >= 0 && t < c->ntypes) ? &c->types[t] : NULL;
}

int cluster_server_of(const cluster *c, int d)
{
    if (!c || c->nlevels < 1 || c->levels[0].count < 1 || d < 0) return -1;
    return d / c->levels[0].count;
}

int cluster_level_between(const cluster *c, int a, int b)
{
    if (!c || a == b) return -1;
    long long g = 1;
    for (int L = 0; L < c->nlevels; L++) {
        g *= c->levels[L].count;
        if (a / g == b / g) return L;
    }
    return c->nlevels - 1;
}

int cluster_group_size(const cluster *c, int level)
{
    if (!c || level < 0 || level >= c->nlevels) return 0;
    long long p = count_product(c, 0, level + 1);
    return p < 0 ? 0 : (int)p;
}

/* ---- a cut of a large cluster --------------------------------------------------------- */

cluster *cluster_take_gpus(const cluster *c, int gpus, const char *file, plumb_err *err)
{
    int per = c->levels[0].count;
    if (gpus < 1 || gpus % per)
        return err_set(err, file, "--gpus", "expected a multiple of the %d devices per server "
                       "(got %d)", per, gpus), NULL;
    if (gpus > c->ndevices)
        return err_set(err, file, "--gpus", "expected at most the cluster's %d devices (got %d)",
                       c->ndevices, gpus), NULL;
    /* the first level whose groups hold all the gpus: it shrinks, the ones above go */
    int j = 0;
    long long below = per; /* devices per group of level j */
    while (below < gpus) below *= c->levels[++j].count;
    long long inner = below / c->levels[j].count; /* devices per group of level j-1 */
    if (j > 0 && gpus % inner)
        return err_set(err, file, "--gpus", "expected a multiple of the %lld devices per %s "
                       "group (got %d)", inner, c->levels[j - 1].name, gpus), NULL;
    cluster *d = cluster_clone(c);
    if (!d) return err_set(err, file, NULL, "out of memory"), NULL;
    /* one server keeps the level above it, counting that one server: grown again
     * (planner_cluster_resize), the cut adds servers over that level's links */
    int keep = j == 0 ? (d->nlevels > 1 ? 2 : 1) : (gpus == inner ? j : j + 1);
    if (j == 0 && keep == 2) d->levels[1].count = 1;
    if (j > 0 && keep == j + 1) d->levels[j].count = (int)(gpus / inner);
    for (int L = keep; L < d->nlevels; L++) {
        free(d->levels[L].name);
        d->levels[L].name = NULL;
    }
    d->nlevels = keep;
    d->ndevices = gpus;
    d->nservers = gpus / per; /* server_type keeps its first nservers entries */
    if (cluster_validate(d, file, err)) {
        cluster_free(d);
        return NULL;
    }
    return d;
}

cluster *cluster_load_cut(const char *path, int max_devices, int servers, plumb_err *err)
{
    cluster *c = cluster_load(path, err);
    if (!c || c->ndevices <= max_devices) return c;
    cluster *k = cluster_take_gpus(c, servers * c->levels[0].count, path, err);
    cluster_free(c);
    return k;
}
