/* plan.c: plumb-plan/1 files: schedule and optimizer names, loading (profile and cluster
 * embedded or named by a path relative to the plan file), the structural checks every
 * consumer relies on (stages cover the layers in order, devices exist and are not shared
 * unless the schedule interleaves chunks), saving with both nouns embedded, deep copies,
 * comparison, and the small builders the planner uses. */
#include "plan.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bounds.h"
#include "device.h"
#include "json.h"
#include "schedule.h"
#include "schedule_traits.h"

/* ---- names --------------------------------------------------------------------------- */

/* The chunked kinds' names, quoted, comma-separated, into buf. */
static char *chunked_names(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < SCHED_NKINDS && o < n; k++)
        if (sched_kind_chunked((sched_kind)k))
            o += (size_t)snprintf(buf + o, n - o, "%s\"%s\"", o ? ", " : "",
                                  sched_kind_name((sched_kind)k));
    return buf;
}

/* names[k] for 0 <= k < n, else "unknown"; and the index of name in names, or -1. */
static const char *enum_name(const char *const *names, int n, int k)
{
    return k >= 0 && k < n ? names[k] : "unknown";
}

static int enum_parse(const char *const *names, int n, const char *name)
{
    for (int k = 0; name && k < n; k++)
        if (strcmp(name, names[k]) == 0) return k;
    return -1;
}

static const char *const opt_names[OPT_NKINDS] = { "sgd", "momentum", "adam" };

const char *optimizer_kind_name(optimizer_kind k)
{
    return enum_name(opt_names, OPT_NKINDS, (int)k);
}

int optimizer_kind_parse(const char *name)
{
    return enum_parse(opt_names, OPT_NKINDS, name);
}

static const char *const recompute_names[RECOMPUTE_NKINDS] = { "none", "full", "selective" };
static const char *const tp_overlap_names[TP_OVERLAP_NKINDS] = { "none", "backward", "full" };

const char *recompute_kind_name(recompute_kind k)
{
    return enum_name(recompute_names, RECOMPUTE_NKINDS, (int)k);
}

int recompute_kind_parse(const char *name)
{
    return enum_parse(recompute_names, RECOMPUTE_NKINDS, name);
}

static const char *const cross_entropy_names[] = { "unfused", "te", "native" };
#define CROSS_ENTROPY_NKINDS 3

const char *plan_cross_entropy_name(int k)
{
    return enum_name(cross_entropy_names, CROSS_ENTROPY_NKINDS, k);
}

int plan_cross_entropy_parse(const char *name)
{
    return enum_parse(cross_entropy_names, CROSS_ENTROPY_NKINDS, name);
}

static const char *const grad_accum_names[] = { "fused", "unfused" };
#define GRAD_ACCUM_NKINDS 2

const char *plan_grad_accum_name(int k)
{
    return enum_name(grad_accum_names, GRAD_ACCUM_NKINDS, k);
}

int plan_grad_accum_parse(const char *name)
{
    return enum_parse(grad_accum_names, GRAD_ACCUM_NKINDS, name);
}

const char *plan_tp_overlap_name(plan_tp_overlap k)
{
    return enum_name(tp_overlap_names, TP_OVERLAP_NKINDS, (int)k);
}

int plan_tp_overlap_parse(const char *name)
{
    return enum_parse(tp_overlap_names, TP_OVERLAP_NKINDS, name);
}

/* ---- lifetime ------------------------------------------------------------------------ */

void plan_free(plan *pl)
{
    if (!pl) return;
    profile_free(pl->prof);
    cluster_free(pl->clus);
    free(pl->profile_ref);
    free(pl->cluster_ref);
    if (pl->stages)
        for (int s = 0; s < pl->nstages; s++) free(pl->stages[s].devices);
    free(pl->stages);
    free(pl->pred_peak_memory_bytes);
    free(pl->planner_config);
    plan_model_free(pl->model);
    free(pl);
}

/* A plan owning nothing yet, with the defaults of plan_new; NULL when out of memory. */
static plan *plan_blank(int nstages)
{
    plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->stages = calloc((size_t)(nstages > 0 ? nstages : 1), sizeof *pl->stages);
    if (!pl->stages) { free(pl); return NULL; }
    pl->nstages = nstages;
    for (int s = 0; s < nstages; s++) pl->stages[s].compute_s = pl->stages[s].comm_s = -1;
    pl->schedule = SCHED_1F1B_FLUSH;
    pl->chunks = 1;
    pl->microbatch_size = 1;
    pl->microbatches = 1;
    pl->optimizer = OPT_SGD;
    pl->tp = 1;
    pl->cp = 1;
    pl->precision = DEV_FP32;
    pl->pred_iteration_s = pl->pred_samples_per_s = -1;
    pl->pred_speedup_vs_dp = pl->pred_speedup_vs_1 = -1;
    return pl;
}

plan *plan_new(const profile *prof, const cluster *clus, int nstages)
{
    if (!prof || !clus || nstages < 0) return NULL;
    plan *pl = plan_blank(nstages);
    if (!pl) return NULL;
    pl->prof = profile_clone(prof);
    pl->clus = cluster_clone(clus);
    if (!pl->prof || !pl->clus) { plan_free(pl); return NULL; }
    pl->microbatch_size = prof->minibatch > 0 ? prof->minibatch : 1;
    pl->tp = prof->tp > 0 ? prof->tp : 1;
    pl->cp = prof->cp > 0 ? prof->cp : 1;
    pl->sequence_parallel = prof->sequence_parallel;
    if (prof->precision >= 0) pl->precision = (dev_precision)prof->precision;
    pl->cross_entropy = prof->cross_entropy;
    pl->grad_accum = prof->grad_accum;
    return pl;
}

int plan_set_stage(plan *pl, int s, int first, int last, int replicas, const int *devs)
{
    if (!pl || s < 0 || s >= pl->nstages || first < 0 || last < first || replicas < 1 || !devs)
        return -1;
    int *d = malloc((size_t)replicas * sizeof *d);
    if (!d) return -1;
    memcpy(d, devs, (size_t)replicas * sizeof *d);
    plan_stage *st = &pl->stages[s];
    free(st->devices);
    st->devices = d;
    st->first_layer = first;
    st->last_layer = last;
    st->replicas = replicas;
    return 0;
}

int plan_minibatch(const plan *pl)
{
    if (!pl) return 0;
    long long m = (long long)pl->microbatch_size * pl->microbatches;
    return m > INT_MAX ? INT_MAX : (int)m;
}

int plan_tp(const plan *pl)
{
    return pl && pl->tp > 1 ? pl->tp : 1;
}

int plan_cp(const plan *pl)
{
    return pl && pl->cp > 1 ? pl->cp : 1;
}

int plan_cp_device(const plan *pl, int st, int r, int k)
{
    if (!pl || st < 0 || st >= pl->nstages || !pl->stages[st].devices || r < 0 ||
        r >= pl->stages[st].replicas || k < 0 || k >= plan_cp(pl))
        return -1;
    return pl->stages[st].devices[r] + k * plan_tp(pl);
}

int plan_group_width(const plan *pl)
{
    return plan_tp(pl) * plan_cp(pl);
}

int plan_devices_used(const plan *pl, unsigned char *used)
{
    int nd = pl && pl->clus ? pl->clus->ndevices : 0, k = 0;
    int tp = plan_group_width(pl);
    if (nd > 0) memset(used, 0, (size_t)nd);
    for (int s = 0; pl && s < pl->nstages; s++)
        for (int q = 0; pl->stages[s].devices && q < pl->stages[s].replicas; q++)
            for (int t = 0; t < tp; t++) {
                int d = pl->stages[s].devices[q] + t;
                if (d >= 0 && d < nd && !used[d]) {
                    used[d] = 1;
                    k++;
                }
            }
    return k;
}

int plan_gpus(const plan *pl)
{
    if (!pl || !pl->clus || pl->clus->ndevices < 1) return 0;
    unsigned char *used = malloc((size_t)pl->clus->ndevices);
    if (!used) return 0;
    int k = plan_devices_used(pl, used);
    free(used);
    return k;
}

int plan_devices_text(const unsigned char *used, int total, char *buf, size_t n)
{
    int k = 0, nidle = 0;
    for (int d = 0; d < total; d++) {
        k += used[d] != 0;
        nidle += used[d] == 0;
    }
    if (n == 0) return k;
    size_t o = (size_t)snprintf(buf, n, "%d of %d used", k, total);
    if (nidle == 0 || o >= n) return k;
    o += (size_t)snprintf(buf + o, n - o, " (device%s ", nidle > 1 ? "s" : "");
    for (int d = 0, first = 1; d < total && o < n; d++) {
        if (used[d]) continue;
        int e = d;
        while (e + 1 < total && !used[e + 1]) e++;
        if (e > d) o += (size_t)snprintf(buf + o, n - o, "%s%d-%d", first ? "" : ", ", d, e);
        else o += (size_t)snprintf(buf + o, n - o, "%s%d", first ? "" : ", ", d);
        first = 0;
        d = e;
    }
    if (o < n) o += (size_t)snprintf(buf + o, n - o, " idle)");
    if (o >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    return k;
}

plan *plan_clone(const plan *pl)
{
    if (!pl || pl->nstages < 0) return NULL;
    plan *d = plan_blank(pl->nstages);
    if (!d) return NULL;
    plan_stage *stages = d->stages;
    *d = *pl;
    d->stages = stages;
    d->prof = NULL;
    d->clus = NULL;
    d->profile_ref = d->cluster_ref = d->planner_config = NULL;
    d->pred_peak_memory_bytes = NULL;
    d->model = NULL;
    for (int s = 0; s < pl->nstages; s++) {
        d->stages[s] = pl->stages[s];
        d->stages[s].devices = NULL;
        if (pl->stages[s].devices && pl->stages[s].replicas > 0) {
            size_t sz = (size_t)pl->stages[s].replicas * sizeof(int);
            if (!(d->stages[s].devices = malloc(sz))) goto fail;
            memcpy(d->stages[s].devices, pl->stages[s].devices, sz);
        }
    }
    if (pl->prof && !(d->prof = profile_clone(pl->prof))) goto fail;
    if (pl->clus && !(d->clus = cluster_clone(pl->clus))) goto fail;
    if (pl->profile_ref && !(d->profile_ref = strdup(pl->profile_ref))) goto fail;
    if (pl->cluster_ref && !(d->cluster_ref = strdup(pl->cluster_ref))) goto fail;
    if (pl->planner_config && !(d->planner_config = strdup(pl->planner_config))) goto fail;
    if (pl->model && !(d->model = plan_model_clone(pl->model))) goto fail;
    if (pl->pred_peak_memory_bytes && pl->clus && pl->clus->ndevices > 0) {
        size_t sz = (size_t)pl->clus->ndevices * sizeof(double);
        if (!(d->pred_peak_memory_bytes = malloc(sz))) goto fail;
        memcpy(d->pred_peak_memory_bytes, pl->pred_peak_memory_bytes, sz);
    }
    return d;
fail:
    plan_free(d);
    return NULL;
}

/* Equal predicted figures: both absent (< 0) or exactly equal. */
static int pred_eq(double a, double b)
{
    if (a < 0 && b < 0) return 1;
    return a == b;
}

int plan_equal(const plan *a, const plan *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    if (!profile_equal(a->prof, b->prof) || !cluster_equal(a->clus, b->clus)) return 0;
    if (a->schedule != b->schedule || a->chunks != b->chunks ||
        a->microbatch_size != b->microbatch_size || a->microbatches != b->microbatches ||
        a->recompute != b->recompute || a->optimizer != b->optimizer ||
        a->checkpoint_layers != b->checkpoint_layers || a->tp != b->tp || a->cp != b->cp ||
        a->sequence_parallel != b->sequence_parallel || a->zero != b->zero ||
        a->precision != b->precision || a->p2p_sync != b->p2p_sync ||
        a->grad_sync_end != b->grad_sync_end || a->p2p_whole != b->p2p_whole ||
        a->overlap_param_gather != b->overlap_param_gather ||
        a->fp8_param_gather != b->fp8_param_gather || a->tp_overlap != b->tp_overlap ||
        a->cross_entropy != b->cross_entropy || a->grad_accum != b->grad_accum ||
        a->grad_reduce != b->grad_reduce ||
        a->optimizer_state != b->optimizer_state || a->nstages != b->nstages)
        return 0;
    for (int s = 0; s < a->nstages; s++) {
        const plan_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->first_layer != y->first_layer || x->last_layer != y->last_layer ||
            x->replicas != y->replicas || !pred_eq(x->compute_s, y->compute_s) ||
            !pred_eq(x->comm_s, y->comm_s))
            return 0;
        if (!x->devices != !y->devices) return 0;
        if (x->devices && memcmp(x->devices, y->devices, (size_t)x->replicas * sizeof(int)))
            return 0;
    }
    if (!pred_eq(a->pred_iteration_s, b->pred_iteration_s) ||
        !pred_eq(a->pred_samples_per_s, b->pred_samples_per_s) ||
        !pred_eq(a->pred_speedup_vs_dp, b->pred_speedup_vs_dp) ||
        !pred_eq(a->pred_speedup_vs_1, b->pred_speedup_vs_1))
        return 0;
    if (!a->pred_peak_memory_bytes != !b->pred_peak_memory_bytes) return 0;
    if (a->pred_peak_memory_bytes && !a->clus) return 0;
    if (a->pred_peak_memory_bytes)
        for (int d = 0; d < a->clus->ndevices; d++)
            if (a->pred_peak_memory_bytes[d] != b->pred_peak_memory_bytes[d]) return 0;
    if (!a->planner_config != !b->planner_config) return 0;
    if (a->planner_config && strcmp(a->planner_config, b->planner_config)) return 0;
    return plan_model_equal(a->model, b->model);
}

/* ---- validation ---------------------------------------------------------------------- */

/* Re-files an error from a nested noun under `prefix` (e.g. "profile"): a message that starts
 * with a field path gets "prefix." before it, any other gets "prefix: ". */
static int err_nest(plumb_err *err, const char *file, const char *prefix, const plumb_err *in)
{
    const char *m = in->msg;
    const char *colon = strstr(m, ": ");
    int is_path = colon && colon > m && memchr(m, ' ', (size_t)(colon - m)) == NULL;
    return err_set(err, file, NULL, "%s%s%s", prefix, is_path ? "." : ": ", m);
}

static int check_pred(plumb_err *err, const char *file, const char *path, double v,
                      const char *unit)
{
    if (isnan(v) || isinf(v))
        return err_set(err, file, path, "expected a finite number of %s, or absent (got %g)",
                       unit, v);
    return 0;
}

/* Cross-checks of stages against the profile and the cluster. `uses` has ndevices slots. */
static int check_stages(const plan *pl, const char *file, plumb_err *err, int *uses,
                        int *first_stage)
{
    char p[128];
    int nl = pl->prof->nlayers, nd = pl->clus->ndevices, width = plan_group_width(pl);
    if (pl->nstages < 1 || !pl->stages)
        return err_set(err, file, "stages", "expected at least one stage (got %d)", pl->nstages);
    if (pl->nstages > nl)
        return err_set(err, file, "stages",
                       "expected at most %d stages (one per layer of the profile) (got %d)", nl,
                       pl->nstages);
    for (int d = 0; d < nd; d++) uses[d] = 0, first_stage[d] = -1;
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        int want = s == 0 ? 0 : pl->stages[s - 1].last_layer + 1;
        if (st->first_layer != want) {
            snprintf(p, sizeof p, "stages[%d].first_layer", s);
            if (s == 0)
                return err_set(err, file, p, "expected 0, the first layer (got %d)",
                               st->first_layer);
            return err_set(err, file, p,
                           "expected %d, the layer after stages[%d].last_layer; stages must "
                           "cover the layers in order without %s (got %d)",
                           want, s - 1, st->first_layer < want ? "overlap" : "gaps",
                           st->first_layer);
        }
        snprintf(p, sizeof p, "stages[%d].last_layer", s);
        if (st->last_layer < st->first_layer || st->last_layer >= nl)
            return err_set(err, file, p,
                           "expected a layer from %d (first_layer) to %d (the profile's last) "
                           "(got %d)", st->first_layer, nl - 1, st->last_layer);
        if (s == pl->nstages - 1 && st->last_layer != nl - 1)
            return err_set(err, file, p,
                           "expected %d: the last stage must end at the profile's last layer "
                           "(got %d)", nl - 1, st->last_layer);
        snprintf(p, sizeof p, "stages[%d].replicas", s);
        if (st->replicas < 1 || st->replicas > nd)
            return err_set(err, file, p, "expected an integer from 1 to %d (devices in the "
                           "cluster) (got %d)", nd, st->replicas);
        if (!st->devices)
            return err_set(err, file, p, "expected %d device ids (got none)", st->replicas);
        for (int r = 0; r < st->replicas; r++) {
            int d = st->devices[r];
            snprintf(p, sizeof p, "stages[%d].devices[%d]", s, r);
            if (d < 0 || d >= nd)
                return err_set(err, file, p, "expected a device id from 0 to %d (got %d)",
                               nd - 1, d);
            if (pl->tp > 1 && (d + pl->tp > nd ||
                               cluster_server_of(pl->clus, d) !=
                                   cluster_server_of(pl->clus, d + pl->tp - 1)))
                return err_set(err, file, p, "expected the first device of a tensor-parallel "
                               "group of tp = %d devices on one server (devices %d to %d are "
                               "not)", pl->tp, d, d + pl->tp - 1);
            if (pl->cp > 1 && (d + width > nd || (pl->tp > 1 && d % pl->tp)))
                return err_set(err, file, p, "expected the first device of a tp x cp = %d x %d "
                               "group in the cluster, a multiple of tp (devices %d to %d)",
                               pl->tp, pl->cp, d, d + width - 1);
            for (int q = 0; q < r; q++)
                if (st->devices[q] == d)
                    return err_set(err, file, p,
                                   "expected distinct devices within a stage (device %d is "
                                   "also stages[%d].devices[%d])", d, s, q);
            for (int t = 0; t < width; t++) { /* each member of the group holds the stage */
                int m = d + t;
                if (pl->chunks == 1 && uses[m] > 0)
                    return err_set(err, file, p,
                                   "expected a device no other stage uses (device %d is also "
                                   "in stages[%d]; only schedules with chunks > 1 share "
                                   "devices)", m, first_stage[m]);
                if (uses[m] >= pl->chunks)
                    return err_set(err, file, p,
                                   "expected each device to hold exactly chunks = %d stages "
                                   "(device %d holds more)", pl->chunks, m);
                if (first_stage[m] < 0) first_stage[m] = s;
                uses[m]++;
            }
        }
        snprintf(p, sizeof p, "stages[%d]", s);
        if (check_pred(err, file, p, st->compute_s, "seconds (compute_s)") ||
            check_pred(err, file, p, st->comm_s, "seconds (comm_s)"))
            return -1;
    }
    if (pl->chunks > 1) {
        if (pl->nstages % pl->chunks)
            return err_set(err, file, "stages",
                           "expected a multiple of chunks = %d stages (got %d)", pl->chunks,
                           pl->nstages);
        for (int d = 0; d < nd; d++)
            if (uses[d] != 0 && uses[d] != pl->chunks) {
                snprintf(p, sizeof p, "stages[%d].devices", first_stage[d]);
                return err_set(err, file, p,
                               "expected each device to hold exactly chunks = %d stages "
                               "(device %d holds %d)", pl->chunks, d, uses[d]);
            }
    }
    return 0;
}

/* A training state's element (grad_reduce, optimizer_state, v): fp32, or bf16 with
 * precision bf16 or fp8 (whose weights are bf16; 16-bit state beside fp32 or fp16 weights
 * is not modelled). */
static int check_dtype(const plan *pl, const char *file, plumb_err *err, const char *key,
                       dev_precision v)
{
    if (v != DEV_FP32 && v != DEV_BF16)
        return err_set(err, file, key, "expected fp32 or bf16 (got %d)", (int)v);
    if (v == DEV_BF16 && pl->precision != DEV_BF16 && pl->precision != DEV_FP8)
        return err_set(err, file, key, "expected fp32 unless precision is bf16 or fp8 (got bf16 "
                       "with precision %s)", dev_precision_name(pl->precision));
    return 0;
}

int plan_sync_replicas_check(const plan *pl, sched_kind kind, const char *file,
                             const char *field, plumb_err *err)
{
    const sched_traits *tr = sched_traits_of(kind);
    if (!tr || !tr->async)
        return 0;
    int n = pl->nstages, rc = 0;
    int *rep = malloc((size_t)(n > 0 ? n : 1) * sizeof *rep);
    if (!rep) return err_set(err, file, NULL, "out of memory");
    for (int s = 0; s < n; s++) rep[s] = pl->stages[s].replicas;
    /* in flight per replica: the IR's (sched_inflight_1f1b); the last stage first */
    for (int s = n - 2; s >= 0 && !rc; s--) {
        int r = rep[s], r_next = rep[s + 1];
        int w = sched_inflight_1f1b(rep, n, s), w_next = sched_inflight_1f1b(rep, n, s + 1);
        if ((long long)(w - 1) * r > (long long)(w_next + 1) * r_next)
            rc = err_set(err, file, field, "expected overlap with schedule %s on these "
                         "replicas: stage %d's %d replicas keep %d microbatches in flight each "
                         "and stage %d's %d keep %d, (%d - 1) x %d > (%d + 1) x %d, so the "
                         "all-reduce of stage %d waits on forwards that stage %d receives only "
                         "after gradients it sends past that all-reduce: blocking transfers "
                         "deadlock (docs/sim.md) (got sync)", tr->name, s, r, w, s + 1, r_next,
                         w_next, w, r, w_next, r_next, s, s + 1);
    }
    free(rep);
    return rc;
}

/* The runtime rules' messages, one row per rule, in the two namings: a plan file's fields
 * (file non-NULL) and the options of `plumb plan`/`sweep`/`sim`/`ui` (file NULL). */
typedef struct {
    const char *file_field, *file_why, *opt_field, *opt_why;
} runtime_rule_text;

enum { RULE_OPG_ZERO, RULE_OPG_ASYNC, RULE_P2P_V, RULE_GSYNC_OPG, RULE_GSYNC_ASYNC };

static const runtime_rule_text RUNTIME_RULES[] = {
    [RULE_OPG_ZERO] = {"overlap_param_gather", "expected false unless zero is 1 (the parameter "
                       "all-gather is the distributed optimizer's) (got true)",
                       "--overlap-param-gather", "belongs to --zero 1 (the distributed "
                       "optimizer's parameter all-gather)"},
    [RULE_OPG_ASYNC] = {"overlap_param_gather", "expected false with schedule %s "
                        "(asynchronous: its forwards run ahead of the step) (got true)",
                        "--overlap-param-gather", "expected a synchronous schedule (got %s, "
                        "whose forwards run ahead of the step)"},
    [RULE_P2P_V] = {"p2p", "expected overlap with schedule %s (its V placement deadlocks "
                    "under blocking transfers; docs/sim.md) (got sync)",
                    "--p2p", "expected overlap with schedule %s (its V placement deadlocks "
                    "under blocking transfers; docs/sim.md) (got sync)"},
    [RULE_GSYNC_OPG] = {"overlap_param_gather", "expected false with grad_sync end (the "
                        "all-gather apart follows an overlapped reduction, as Megatron-Core's "
                        "--overlap-param-gather needs --overlap-grad-reduce) (got true)",
                        "--overlap-param-gather", "expected --grad-sync overlap (the all-gather "
                        "apart follows an overlapped reduction: Megatron-Core's "
                        "--overlap-param-gather needs --overlap-grad-reduce) (got --grad-sync "
                        "end)"},
    [RULE_GSYNC_ASYNC] = {"grad_sync", "expected overlap with schedule %s (asynchronous: its "
                          "iterations overlap on a worker) (got end)",
                          "--grad-sync", "expected overlap with schedule %s (its iterations "
                          "overlap: no end of the backward to reduce at) (got end)"},
};

int plan_runtime_check(const sched_traits *tr, int zero, int opg, int p2p_sync,
                       int grad_sync_end, const char *file, plumb_err *err)
{
    int rule = -1;
    if (opg && zero == 0) rule = RULE_OPG_ZERO;
    else if (opg && tr && tr->async) rule = RULE_OPG_ASYNC;
    else if (p2p_sync && tr && tr->place == SCHED_PLACE_V) rule = RULE_P2P_V;
    else if (grad_sync_end && opg) rule = RULE_GSYNC_OPG;
    else if (grad_sync_end && tr && tr->async) rule = RULE_GSYNC_ASYNC;
    if (rule < 0) return 0;
    const runtime_rule_text *t = &RUNTIME_RULES[rule];
    return err_set(err, file, file ? t->file_field : t->opt_field, file ? t->file_why : t->opt_why,
                   tr ? tr->name : "");
}

int plan_checkpoint_check(int recompute, int k, int most, const char *file, plumb_err *err)
{
    if (k > 0 && recompute != RECOMPUTE_FULL) {
        if (!file)
            return err_set(err, NULL, "--checkpoint-layers", "belongs to --recompute full");
        return err_set(err, file, "checkpoint_layers", "expected 0 with recompute %s (the "
                       "interval of full recomputation's checkpoints) (got %d)",
                       recompute >= 0 && recompute < RECOMPUTE_NKINDS
                       ? recompute_kind_name((recompute_kind)recompute) : "not full", k);
    }
    if (most >= 0 && k > most)
        return err_set(err, file, file ? "checkpoint_layers" : "--checkpoint-layers",
                       "expected at most the %d blocks of a virtual stage (got %d)", most, k);
    return 0;
}

int plan_validate(const plan *pl, const char *file, plumb_err *err)
{
    plumb_err in;
    if (!pl) return err_set(err, file, NULL, "expected a plan (got nothing)");
    if (!pl->prof) return err_set(err, file, "profile", "expected a profile (got nothing)");
    if (!pl->clus) return err_set(err, file, "cluster", "expected a cluster (got nothing)");
    err_clear(&in);
    if (profile_validate(pl->prof, "", &in)) return err_nest(err, file, "profile", &in);
    if (cluster_validate(pl->clus, "", &in)) return err_nest(err, file, "cluster", &in);
    if ((int)pl->schedule < 0 || pl->schedule >= SCHED_NKINDS)
        return err_set(err, file, "schedule", "expected a known schedule kind (got %d)",
                       (int)pl->schedule);
    if ((int)pl->optimizer < 0 || pl->optimizer >= OPT_NKINDS)
        return err_set(err, file, "optimizer", "expected a known optimizer (got %d)",
                       (int)pl->optimizer);
    if (pl->chunks < 1)
        return err_set(err, file, "chunks", "expected an integer >= 1 (got %d)", pl->chunks);
    const sched_traits *tr = sched_traits_of(pl->schedule);
    char names[96];
    if (tr->chunks_min > 1 && tr->chunks_min == tr->chunks_max && pl->chunks != tr->chunks_min)
        return err_set(err, file, "chunks", "expected %d for schedule \"%s\" (got %d)",
                       tr->chunks_min, tr->name, pl->chunks);
    if (pl->chunks > 1 && tr->chunks_max == 1)
        return err_set(err, file, "chunks",
                       "expected 1 for schedule \"%s\"; only the chunked schedules (%s) "
                       "place several stages on a device (got %d)", tr->name,
                       chunked_names(names, sizeof names), pl->chunks);
    if (pl->microbatch_size < 1)
        return err_set(err, file, "microbatch_size", "expected an integer >= 1 (got %d)",
                       pl->microbatch_size);
    if (pl->microbatches < 1)
        return err_set(err, file, "microbatches", "expected an integer >= 1 (got %d)",
                       pl->microbatches);
    if ((long long)pl->microbatch_size * pl->microbatches > INT_MAX)
        return err_set(err, file, "microbatches",
                       "expected microbatch_size * microbatches <= %d samples (got %lld)",
                       INT_MAX, (long long)pl->microbatch_size * pl->microbatches);
    if (pl->recompute < 0 || pl->recompute >= RECOMPUTE_NKINDS)
        return err_set(err, file, "recompute", "expected none, full or selective (got %d)",
                       pl->recompute);
    if (pl->checkpoint_layers < 0)
        return err_set(err, file, "checkpoint_layers", "expected an integer >= 0 (got %d)",
                       pl->checkpoint_layers);
    if (pl->tp != pl->prof->tp)
        return err_set(err, file, "tp", "expected %d, the profile's tensor_parallel (its "
                       "figures are one rank's share of tp ranks) (got %d)", pl->prof->tp,
                       pl->tp);
    if (pl->cp != pl->prof->cp)
        return err_set(err, file, "cp", "expected %d, the profile's context_parallel (its "
                       "figures are one rank's share of cp ranks) (got %d)", pl->prof->cp,
                       pl->cp);
    if (pl->cp > 1 && pl->prof->tokens_per_sample % (2LL * pl->cp))
        return err_set(err, file, "cp", "expected 2 x cp to divide the %lld tokens of a "
                       "sequence (Transformer Engine's load-balanced causal split) (got cp "
                       "%d)", pl->prof->tokens_per_sample, pl->cp);
    if (pl->sequence_parallel != pl->prof->sequence_parallel)
        return err_set(err, file, "sequence_parallel", "expected %s, as the profile was made "
                       "(got %s)", pl->prof->sequence_parallel ? "true" : "false",
                       pl->sequence_parallel ? "true" : "false");
    if (pl->zero < 0 || pl->zero > 1)
        return err_set(err, file, "zero", "expected 0 or 1 (got %d)", pl->zero);
    if (plan_runtime_check(tr, pl->zero, pl->overlap_param_gather, pl->p2p_sync,
                           pl->grad_sync_end, file, err))
        return -1;
    if ((int)pl->tp_overlap < 0 || pl->tp_overlap >= TP_OVERLAP_NKINDS)
        return err_set(err, file, "tp_overlap", "expected none, backward or full (got %d)",
                       (int)pl->tp_overlap);
    if (pl->tp_overlap != TP_OVERLAP_NONE && pl->tp < 2)
        return err_set(err, file, "tp_overlap", "expected none with tp 1 (no tensor-parallel "
                       "collectives to overlap) (got %s)", plan_tp_overlap_name(pl->tp_overlap));
    if ((int)pl->precision < 0 || pl->precision >= DEV_NPREC)
        return err_set(err, file, "precision", "expected fp32, tf32, bf16, fp16 or fp8 (got %d)",
                       (int)pl->precision);
    /* a profile that says how it was made (an analytic one, planner/llm_profile.c) made
     * its times and bytes at the plan's precision and priced the plan's loss: every plan
     * plumb makes of it takes both (plan_new; with fp8 the profile says fp8 too) */
    if (pl->prof->precision >= 0 && (int)pl->precision != pl->prof->precision)
        return err_set(err, file, "precision", "expected %s, the precision the profile was "
                       "made at (got %s)", dev_precision_name(pl->prof->precision),
                       dev_precision_name(pl->precision));
    if (pl->prof->cross_entropy > 0 && pl->cross_entropy != pl->prof->cross_entropy)
        return err_set(err, file, "cross_entropy", "expected %s, the loss the profile prices "
                       "(got %s)", plan_cross_entropy_name(pl->prof->cross_entropy),
                       plan_cross_entropy_name(pl->cross_entropy));
    if (pl->prof->grad_accum > 0 && pl->grad_accum != pl->prof->grad_accum)
        return err_set(err, file, "grad_accum", "expected %s, the accumulation the profile "
                       "prices (got %s)", plan_grad_accum_name(pl->prof->grad_accum),
                       plan_grad_accum_name(pl->grad_accum));
    if (check_dtype(pl, file, err, "grad_reduce", pl->grad_reduce) ||
        check_dtype(pl, file, err, "optimizer_state", pl->optimizer_state))
        return -1;
    /* Megatron-Core: fp8_param needs fp8 (TransformerConfig), --fp8-param-gather the
     * distributed optimizer (arguments.py; docs/llm.md, "FP8 primary weights") */
    if (pl->fp8_param_gather && pl->precision != DEV_FP8)
        return err_set(err, file, "fp8_param_gather", "expected false unless precision is fp8 "
                       "(FP8 primary weights) (got true with precision %s)",
                       dev_precision_name(pl->precision));
    if (pl->fp8_param_gather && !pl->zero)
        return err_set(err, file, "fp8_param_gather", "expected false unless zero is 1 "
                       "(Megatron-Core's FP8 primary weights need the distributed optimizer) "
                       "(got true with zero 0)");
    if (pl->cross_entropy < 0 || pl->cross_entropy >= CROSS_ENTROPY_NKINDS)
        return err_set(err, file, "cross_entropy", "expected unfused, te or native (got %d)",
                       pl->cross_entropy);
    if (pl->grad_accum < 0 || pl->grad_accum >= GRAD_ACCUM_NKINDS)
        return err_set(err, file, "grad_accum", "expected fused or unfused (got %d)",
                       pl->grad_accum);
    int nd = pl->clus->ndevices;
    int *uses = malloc((size_t)(nd > 0 ? nd : 1) * 2 * sizeof *uses);
    if (!uses) return err_set(err, file, NULL, "out of memory");
    int rc = check_stages(pl, file, err, uses, uses + nd);
    free(uses);
    if (rc) return rc;
    if (plan_checkpoint_check(pl->recompute, pl->checkpoint_layers, plan_blocks_most(pl), file,
                              err))
        return -1;
    if (pl->p2p_sync && plan_sync_replicas_check(pl, pl->schedule, file, "p2p", err))
        return -1;
    if (check_pred(err, file, "predicted.iteration_s", pl->pred_iteration_s, "seconds") ||
        check_pred(err, file, "predicted.samples_per_s", pl->pred_samples_per_s, "samples/s") ||
        check_pred(err, file, "predicted.speedup_vs_dp", pl->pred_speedup_vs_dp, "x") ||
        check_pred(err, file, "predicted.speedup_vs_1", pl->pred_speedup_vs_1, "x"))
        return -1;
    if (pl->pred_peak_memory_bytes)
        for (int d = 0; d < nd; d++) {
            double v = pl->pred_peak_memory_bytes[d];
            if (!isfinite(v) || v < 0) {
                char p[96];
                snprintf(p, sizeof p, "predicted.peak_memory_bytes[%d]", d);
                return err_set(err, file, p, "expected a finite number of bytes >= 0 (got %g)",
                               v);
            }
        }
    return 0;
}

/* ---- loading ------------------------------------------------------------------------- */

static const char *const ROOT_KEYS[] = { "format", "profile", "cluster", "schedule", "chunks",
                                         "microbatch_size", "microbatches", "recompute",
                                         "optimizer", "stages", "predicted", "planner_config",
                                         "checkpoint_layers", "tp", "cp", "sequence_parallel",
                                         "zero", "overlap_param_gather", "precision", "p2p",
                                         "tp_overlap", "grad_reduce", "optimizer_state",
                                         "grad_sync", "p2p_split", "fp8_param_gather",
                                         "cross_entropy", "grad_accum", "model",
                                         NULL };
static const char *const STAGE_KEYS[] = { "first_layer", "last_layer", "replicas", "devices",
                                          "compute_s", "comm_s", NULL };
static const char *const PRED_KEYS[] = { "iteration_s", "samples_per_s", "speedup_vs_dp",
                                         "speedup_vs_1", "peak_memory_bytes", NULL };


char *plan_ref_path(const char *file, const char *ref)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (ref[0] == '/' || !slash) return strdup(ref);
    size_t dl = (size_t)(slash - file) + 1, rl = strlen(ref);
    char *p = malloc(dl + rl + 1);
    if (!p) return NULL;
    memcpy(p, file, dl);
    memcpy(p + dl, ref, rl + 1);
    return p;
}

/* Loads the noun at root[key]: an embedded object or a path string. Sets *out (a profile or
 * a cluster) and *ref (the path, or NULL). */
static int load_noun(const jctx *jc, const cJSON *root, const char *key, int is_profile,
                     void **out, char **ref)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char got[96];
    plumb_err in;
    err_clear(&in);
    if (!v)
        return err_set(jc->err, jc->file, key,
                       "missing; expected the embedded %s object or a path to its file", key);
    if (cJSON_IsObject(v)) {
        *out = is_profile ? (void *)profile_from_json(v, "", &in)
                          : (void *)cluster_from_json(v, "", &in);
        if (!*out) return err_nest(jc->err, jc->file, key, &in);
        return 0;
    }
    if (!cJSON_IsString(v) || !*v->valuestring)
        return err_set(jc->err, jc->file, key,
                       "expected an embedded %s object or a file path string (got %s)", key,
                       json_describe(v, got, sizeof got));
    if (!(*ref = strdup(v->valuestring))) return err_set(jc->err, jc->file, key, "out of memory");
    char *path = plan_ref_path(jc->file, v->valuestring);
    if (!path) return err_set(jc->err, jc->file, key, "out of memory");
    struct stat st; /* a path that is not there: the line names the plan and its field (it
                     * named only the resolved path: "plumb: ../x.json: cannot open: ...") */
    if (stat(path, &st) != 0) {
        int e = errno;
        err_set(jc->err, jc->file, key,
                "expected the path of a %s file, relative to the plan's folder, or the "
                "embedded %s object (got %s: %s: %s)", key, key,
                json_describe(v, got, sizeof got), path, strerror(e));
        free(path);
        return -1;
    }
    *out = is_profile ? (void *)profile_load(path, jc->err) : (void *)cluster_load(path, jc->err);
    free(path);
    return *out ? 0 : -1;
}

/* Index of a layer given by index or by name at stage.key. */
static int get_layer(const jctx *jc, const cJSON *st, const char *path, const char *key,
                     const profile *prof, int *out)
{
    char fp[160], got[96];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
    json_path(fp, sizeof fp, path, key);
    if (cJSON_IsString(v)) {
        for (int i = 0; i < prof->nlayers; i++)
            if (prof->layers[i].name && strcmp(prof->layers[i].name, v->valuestring) == 0) {
                *out = i;
                return 0;
            }
        return err_set(jc->err, jc->file, fp,
                       "expected a layer index or the name of a layer of the profile (got %s)",
                       json_describe(v, got, sizeof got));
    }
    long long x = 0;
    if (json_get_int(jc, st, path, key, 1, 0, prof->nlayers - 1, &x)) return -1;
    *out = (int)x;
    return 0;
}

static int load_stages(const jctx *jc, const cJSON *root, plan *pl)
{
    const cJSON *arr, *devs;
    int n, nd;
    char p[96], fp[160];
    if (json_get_arr(jc, root, "", "stages", 1, &arr, &n)) return -1;
    if (n < 1 || n > pl->prof->nlayers)
        return err_set(jc->err, jc->file, "stages",
                       "expected 1 to %d stages (at most one per layer) (got %d)",
                       pl->prof->nlayers, n);
    pl->stages = calloc((size_t)n, sizeof *pl->stages);
    if (!pl->stages) return err_set(jc->err, jc->file, "stages", "out of memory");
    pl->nstages = n;
    for (int s = 0; s < n; s++) pl->stages[s].compute_s = pl->stages[s].comm_s = -1;
    for (int s = 0; s < n; s++) {
        const cJSON *sv = cJSON_GetArrayItem(arr, s);
        plan_stage *st = &pl->stages[s];
        long long r = 0;
        json_path_idx(p, sizeof p, "stages", "", s);
        if (!cJSON_IsObject(sv)) {
            char got[96];
            return err_set(jc->err, jc->file, p, "expected an object (got %s)",
                           json_describe(sv, got, sizeof got));
        }
        if (json_check_keys(jc, sv, p, STAGE_KEYS) ||
            get_layer(jc, sv, p, "first_layer", pl->prof, &st->first_layer) ||
            get_layer(jc, sv, p, "last_layer", pl->prof, &st->last_layer) ||
            json_get_int(jc, sv, p, "replicas", 1, 1, pl->clus->ndevices, &r) ||
            json_get_arr(jc, sv, p, "devices", 1, &devs, &nd))
            return -1;
        if (nd != r)
            return err_set(jc->err, jc->file, json_path(fp, sizeof fp, p, "devices"),
                           "expected %lld device ids, one per replica (got %d)", r, nd);
        st->replicas = (int)r;
        if (!(st->devices = malloc((size_t)r * sizeof *st->devices)))
            return err_set(jc->err, jc->file, p, "out of memory");
        json_path(fp, sizeof fp, p, "devices");
        for (int i = 0; i < nd; i++) {
            long long d = 0;
            if (json_item_int(jc, cJSON_GetArrayItem(devs, i), fp, i, 0,
                              pl->clus->ndevices - 1, &d))
                return -1;
            st->devices[i] = (int)d;
        }
        if (json_get_num(jc, sv, p, "compute_s", 0, J_NONNEG, &st->compute_s) ||
            json_get_num(jc, sv, p, "comm_s", 0, J_NONNEG, &st->comm_s))
            return -1;
    }
    return 0;
}

static int load_predicted(const jctx *jc, const cJSON *root, plan *pl)
{
    const cJSON *pr, *arr;
    int n;
    if (json_get_obj(jc, root, "", "predicted", 0, &pr)) return -1;
    if (!pr) return 0;
    const char *pp = "predicted";
    if (json_check_keys(jc, pr, pp, PRED_KEYS)) return -1;
    if (json_get_num(jc, pr, pp, "iteration_s", 0, J_NONNEG, &pl->pred_iteration_s) ||
        json_get_num(jc, pr, pp, "samples_per_s", 0, J_NONNEG, &pl->pred_samples_per_s) ||
        json_get_num(jc, pr, pp, "speedup_vs_dp", 0, J_NONNEG, &pl->pred_speedup_vs_dp) ||
        json_get_num(jc, pr, pp, "speedup_vs_1", 0, J_NONNEG, &pl->pred_speedup_vs_1) ||
        json_get_arr(jc, pr, pp, "peak_memory_bytes", 0, &arr, &n))
        return -1;
    if (!arr) return 0;
    if (n != pl->clus->ndevices)
        return err_set(jc->err, jc->file, "predicted.peak_memory_bytes",
                       "expected %d numbers, one per device of the cluster (got %d)",
                       pl->clus->ndevices, n);
    pl->pred_peak_memory_bytes = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!pl->pred_peak_memory_bytes)
        return err_set(jc->err, jc->file, "predicted.peak_memory_bytes", "out of memory");
    for (int d = 0; d < n; d++)
        if (json_item_num(jc, cJSON_GetArrayItem(arr, d), "predicted.peak_memory_bytes", d,
                          J_NONNEG, &pl->pred_peak_memory_bytes[d]))
            return -1;
    return 0;
}

/* "recompute": false / true (none / full, the first files' form) or a recompute_kind
 * name. */
static int load_recompute(const jctx *jc, const cJSON *root, plan *pl)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "recompute");
    char got[96];
    pl->recompute = RECOMPUTE_NONE;
    if (!v) return 0;
    if (cJSON_IsBool(v)) {
        pl->recompute = cJSON_IsTrue(v) ? RECOMPUTE_FULL : RECOMPUTE_NONE;
        return 0;
    }
    if (cJSON_IsString(v) && recompute_kind_parse(v->valuestring) >= 0) {
        pl->recompute = recompute_kind_parse(v->valuestring);
        return 0;
    }
    return err_set(jc->err, jc->file, "recompute", "expected none, full, selective, true or "
                   "false (got %s)", json_describe(v, got, sizeof got));
}

/* A field of two strings: absent or `off` (the default) gives *out 0, `on` 1; else -1 with
 * the error naming the field. "p2p": "overlap" or "sync" (sim/engine_sync.c); "grad_sync":
 * "overlap" or "end" (sim/engine_gradsync.c); "p2p_split": "scatter-gather" or "whole"
 * (sim/cost.c). */
static int load_switch(const jctx *jc, const cJSON *root, const char *key, const char *off,
                       const char *on, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char got[96];
    *out = 0;
    if (!v) return 0;
    if (cJSON_IsString(v) && (!strcmp(v->valuestring, off) || !strcmp(v->valuestring, on))) {
        *out = !strcmp(v->valuestring, on);
        return 0;
    }
    return err_set(jc->err, jc->file, key, "expected %s or %s (got %s)", off, on,
                   json_describe(v, got, sizeof got));
}

/* "tp_overlap": "none" (the default), "backward" or "full" (sim/cost.c). */
static int load_tp_overlap(const jctx *jc, const cJSON *root, plan *pl)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "tp_overlap");
    char got[96];
    pl->tp_overlap = TP_OVERLAP_NONE;
    if (!v) return 0;
    if (cJSON_IsString(v) && plan_tp_overlap_parse(v->valuestring) >= 0) {
        pl->tp_overlap = (plan_tp_overlap)plan_tp_overlap_parse(v->valuestring);
        return 0;
    }
    return err_set(jc->err, jc->file, "tp_overlap", "expected none, backward or full (got %s)",
                   json_describe(v, got, sizeof got));
}

/* "cross_entropy": "unfused", "te" or "native" (planner/llm_profile.c); absent, the
 * profile's (unfused when it says none). */
static int load_cross_entropy(const jctx *jc, const cJSON *root, plan *pl)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "cross_entropy");
    char got[96];
    pl->cross_entropy = pl->prof->cross_entropy;
    if (!v) return 0;
    if (cJSON_IsString(v) && plan_cross_entropy_parse(v->valuestring) >= 0) {
        pl->cross_entropy = plan_cross_entropy_parse(v->valuestring);
        return 0;
    }
    return err_set(jc->err, jc->file, "cross_entropy", "expected unfused, te or native (got %s)",
                   json_describe(v, got, sizeof got));
}

/* A 16-bit training state's element field (grad_reduce, optimizer_state): "fp32" (the
 * default, the precision's own) or "bf16"; plan_validate checks it against the precision. */
static int load_dtype(const jctx *jc, const cJSON *root, const char *key, dev_precision *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    char got[96];
    *out = DEV_FP32;
    if (!v) return 0;
    if (cJSON_IsString(v) && (!strcmp(v->valuestring, "fp32") ||
                              !strcmp(v->valuestring, "bf16"))) {
        *out = strcmp(v->valuestring, "bf16") ? DEV_FP32 : DEV_BF16;
        return 0;
    }
    return err_set(jc->err, jc->file, key, "expected fp32 or bf16 (got %s)",
                   json_describe(v, got, sizeof got));
}

plan *plan_from_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx jc = { file, err };
    const char *s = NULL;
    long long x = 0;
    char got[96];
    if (json_check_format(&jc, root, PLAN_FORMAT) || json_check_keys(&jc, root, "", ROOT_KEYS))
        return NULL;
    plan *pl = plan_blank(0);
    if (!pl) { err_set(err, file, NULL, "out of memory"); return NULL; }
    free(pl->stages);
    pl->stages = NULL;
    if (load_noun(&jc, root, "profile", 1, (void **)&pl->prof, &pl->profile_ref) ||
        load_noun(&jc, root, "cluster", 0, (void **)&pl->clus, &pl->cluster_ref))
        goto fail;
    if (json_get_str(&jc, root, "", "schedule", 1, &s)) goto fail;
    if (sched_kind_parse(s) < 0) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schedule");
        char kinds[160];
        err_set(err, file, "schedule", "expected one of %s (got %s)",
                sched_kind_list(kinds, sizeof kinds, ", "), json_describe(v, got, sizeof got));
        goto fail;
    }
    pl->schedule = (sched_kind)sched_kind_parse(s);
    x = 1;
    if (json_get_int(&jc, root, "", "chunks", 0, 1, pl->prof->nlayers, &x)) goto fail;
    pl->chunks = (int)x;
    if (json_get_int(&jc, root, "", "microbatch_size", 1, 1, INT_MAX, &x)) goto fail;
    pl->microbatch_size = (int)x;
    if (json_get_int(&jc, root, "", "microbatches", 1, 1, INT_MAX, &x)) goto fail;
    pl->microbatches = (int)x;
    if (load_recompute(&jc, root, pl)) goto fail;
    x = 0;
    /* its bound, the blocks of a stage, once the stages are read: plan_validate */
    if (json_get_int(&jc, root, "", "checkpoint_layers", 0, 0, INT_MAX, &x)) goto fail;
    pl->checkpoint_layers = (int)x;
    x = pl->prof->tp;
    if (json_get_int(&jc, root, "", "tp", 0, 1, BOUND_TP_MAX, &x)) goto fail;
    pl->tp = (int)x;
    x = pl->prof->cp;
    if (json_get_int(&jc, root, "", "cp", 0, 1, BOUND_TP_MAX, &x)) goto fail;
    pl->cp = (int)x;
    pl->sequence_parallel = pl->prof->sequence_parallel;
    if (json_get_bool(&jc, root, "", "sequence_parallel", 0, &pl->sequence_parallel)) goto fail;
    x = 0;
    if (json_get_int(&jc, root, "", "zero", 0, 0, 1, &x)) goto fail;
    pl->zero = (int)x;
    if (load_switch(&jc, root, "p2p", "overlap", "sync", &pl->p2p_sync)) goto fail;
    if (load_switch(&jc, root, "grad_sync", "overlap", "end", &pl->grad_sync_end)) goto fail;
    if (load_switch(&jc, root, "p2p_split", "scatter-gather", "whole", &pl->p2p_whole))
        goto fail;
    if (load_tp_overlap(&jc, root, pl)) goto fail;
    if (json_get_bool(&jc, root, "", "overlap_param_gather", 0, &pl->overlap_param_gather))
        goto fail;
    if (json_get_bool(&jc, root, "", "fp8_param_gather", 0, &pl->fp8_param_gather)) goto fail;
    if (load_cross_entropy(&jc, root, pl)) goto fail;
    /* absent: the profile's (fused when it says none) */
    if (cJSON_GetObjectItemCaseSensitive(root, "grad_accum")) {
        if (load_switch(&jc, root, "grad_accum", "fused", "unfused", &pl->grad_accum)) goto fail;
    } else
        pl->grad_accum = pl->prof->grad_accum;
    if (load_dtype(&jc, root, "grad_reduce", &pl->grad_reduce) ||
        load_dtype(&jc, root, "optimizer_state", &pl->optimizer_state))
        goto fail;
    s = pl->prof->precision >= 0 ? dev_precision_name(pl->prof->precision) : "fp32";
    if (json_get_str(&jc, root, "", "precision", 0, &s)) goto fail;
    if (dev_precision_parse(s) < 0) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "precision");
        err_set(err, file, "precision", "expected one of fp32, tf32, bf16, fp16, fp8 (got %s)",
                json_describe(v, got, sizeof got));
        goto fail;
    }
    pl->precision = (dev_precision)dev_precision_parse(s);
    s = "sgd";
    if (json_get_str(&jc, root, "", "optimizer", 0, &s)) goto fail;
    if (optimizer_kind_parse(s) < 0) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
        err_set(err, file, "optimizer", "expected one of sgd, momentum, adam (got %s)",
                json_describe(v, got, sizeof got));
        goto fail;
    }
    pl->optimizer = (optimizer_kind)optimizer_kind_parse(s);
    if (load_stages(&jc, root, pl) || load_predicted(&jc, root, pl)) goto fail;
    s = NULL;
    if (json_get_str(&jc, root, "", "planner_config", 0, &s)) goto fail;
    if (s && !(pl->planner_config = strdup(s))) {
        err_set(err, file, NULL, "out of memory");
        goto fail;
    }
    if (plan_validate(pl, file, err)) goto fail;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !(pl->model = plan_model_from_json(model, pl, file, err))) goto fail;
    return pl;
fail:
    plan_free(pl);
    return NULL;
}

plan *plan_load(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) return NULL;
    plan *pl = plan_from_json(root, path, err);
    cJSON_Delete(root);
    return pl;
}

/* ---- saving -------------------------------------------------------------------------- */

cJSON *plan_to_json(const plan *pl)
{
    if (!pl || !pl->prof || !pl->clus) return NULL;
    cJSON *root = cJSON_CreateObject(), *arr, *o, *sub;
    if (!root) return NULL;
    if (!cJSON_AddStringToObject(root, "format", PLAN_FORMAT)) goto fail;
    if (!(sub = profile_to_json(pl->prof))) goto fail;
    cJSON_AddItemToObject(root, "profile", sub);
    if (!(sub = cluster_to_json(pl->clus))) goto fail;
    cJSON_AddItemToObject(root, "cluster", sub);
    if (!cJSON_AddStringToObject(root, "schedule", sched_kind_name(pl->schedule)) ||
        !json_add_num(root, "chunks", pl->chunks) ||
        !json_add_num(root, "microbatch_size", pl->microbatch_size) ||
        !json_add_num(root, "microbatches", pl->microbatches) ||
        (pl->recompute == RECOMPUTE_SELECTIVE
             ? !cJSON_AddStringToObject(root, "recompute", "selective")
             : !cJSON_AddBoolToObject(root, "recompute", pl->recompute != 0)) ||
        !cJSON_AddStringToObject(root, "optimizer", optimizer_kind_name(pl->optimizer)))
        goto fail;
    /* the 3D fields only when set, so plans without them read as before */
    if ((pl->checkpoint_layers > 0 &&
         !json_add_num(root, "checkpoint_layers", pl->checkpoint_layers)) ||
        (pl->tp > 1 && !json_add_num(root, "tp", pl->tp)) ||
        (pl->cp > 1 && !json_add_num(root, "cp", pl->cp)) ||
        (pl->sequence_parallel && !cJSON_AddBoolToObject(root, "sequence_parallel", 1)) ||
        (pl->zero && !json_add_num(root, "zero", pl->zero)) ||
        (pl->p2p_sync && !cJSON_AddStringToObject(root, "p2p", "sync")) ||
        (pl->grad_sync_end && !cJSON_AddStringToObject(root, "grad_sync", "end")) ||
        (pl->p2p_whole && !cJSON_AddStringToObject(root, "p2p_split", "whole")) ||
        (pl->tp_overlap != TP_OVERLAP_NONE &&
         !cJSON_AddStringToObject(root, "tp_overlap", plan_tp_overlap_name(pl->tp_overlap))) ||
        (pl->overlap_param_gather &&
         !cJSON_AddBoolToObject(root, "overlap_param_gather", 1)) ||
        (pl->precision != DEV_FP32 &&
         !cJSON_AddStringToObject(root, "precision", dev_precision_name(pl->precision))) ||
        (pl->fp8_param_gather && !cJSON_AddBoolToObject(root, "fp8_param_gather", 1)) ||
        (pl->cross_entropy && !cJSON_AddStringToObject(root, "cross_entropy",
                                                        plan_cross_entropy_name(pl->cross_entropy))) ||
        (pl->grad_accum && !cJSON_AddStringToObject(root, "grad_accum",
                                                     plan_grad_accum_name(pl->grad_accum))) ||
        (pl->grad_reduce != DEV_FP32 &&
         !cJSON_AddStringToObject(root, "grad_reduce", dev_precision_name(pl->grad_reduce))) ||
        (pl->optimizer_state != DEV_FP32 &&
         !cJSON_AddStringToObject(root, "optimizer_state",
                                  dev_precision_name(pl->optimizer_state))))
        goto fail;
    if (!(arr = cJSON_AddArrayToObject(root, "stages"))) goto fail;
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        if (!(o = cJSON_CreateObject())) goto fail;
        cJSON_AddItemToArray(arr, o);
        if (!json_add_num(o, "first_layer", st->first_layer) ||
            !json_add_num(o, "last_layer", st->last_layer) ||
            !json_add_num(o, "replicas", st->replicas))
            goto fail;
        cJSON *devs = st->devices ? cJSON_CreateIntArray(st->devices, st->replicas)
                                  : cJSON_CreateArray();
        if (!devs) goto fail;
        cJSON_AddItemToObject(o, "devices", devs);
        if ((st->compute_s >= 0 && !json_add_num(o, "compute_s", st->compute_s)) ||
            (st->comm_s >= 0 && !json_add_num(o, "comm_s", st->comm_s)))
            goto fail;
    }
    if (pl->pred_iteration_s >= 0 || pl->pred_samples_per_s >= 0 ||
        pl->pred_speedup_vs_dp >= 0 || pl->pred_speedup_vs_1 >= 0 ||
        pl->pred_peak_memory_bytes) {
        if (!(o = cJSON_AddObjectToObject(root, "predicted"))) goto fail;
        if ((pl->pred_iteration_s >= 0 && !json_add_num(o, "iteration_s", pl->pred_iteration_s)) ||
            (pl->pred_samples_per_s >= 0 &&
             !json_add_num(o, "samples_per_s", pl->pred_samples_per_s)) ||
            (pl->pred_speedup_vs_dp >= 0 &&
             !json_add_num(o, "speedup_vs_dp", pl->pred_speedup_vs_dp)) ||
            (pl->pred_speedup_vs_1 >= 0 &&
             !json_add_num(o, "speedup_vs_1", pl->pred_speedup_vs_1)))
            goto fail;
        if (pl->pred_peak_memory_bytes) {
            cJSON *m = cJSON_CreateDoubleArray(pl->pred_peak_memory_bytes, pl->clus->ndevices);
            if (!m) goto fail;
            cJSON_AddItemToObject(o, "peak_memory_bytes", m);
        }
    }
    if (pl->planner_config &&
        !cJSON_AddStringToObject(root, "planner_config", pl->planner_config))
        goto fail;
    if (pl->model) { /* only when set: plans of profiles read and write as before */
        if (!(sub = plan_model_to_json(pl->model))) goto fail;
        cJSON_AddItemToObject(root, "model", sub);
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

int plan_save(const plan *pl, const char *path, plumb_err *err)
{
    if (plan_validate(pl, path, err)) return -1;
    return json_save_tree(path, plan_to_json(pl), err);
}
