/* eval.c: from what was loaded and the what-if settings to the figures the dashboard
 * shows: cluster what-ifs, re-planning, simulation with timeline, and the data-parallel
 * baseline for the speedup. */
#include "ui/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/schedule_traits.h"
#include "core/bounds.h"
#include "core/device.h"
#include "planner/balance3d.h"
#include "planner/native.h"
#include "planner/planner.h"
#include "planner/policy.h"

const char *ui_planner_name(int p)
{
    static const char *const N[UI_PLANNER_N] = { "native", "pipedream", "even" };
    return p >= 0 && p < UI_PLANNER_N ? N[p] : "?";
}

int ui_planner_parse(const char *name)
{
    for (int p = 0; p < UI_PLANNER_N; p++)
        if (!strcmp(name, ui_planner_name(p))) return p;
    return -1;
}

/* Planner answers remembered by the what-ifs that shape them. */
#define UI_CACHE_SLOTS 32

typedef struct cache_slot {
    int used;
    long long stamp;                 /* last use, for replacement */
    ui_whatif w;                     /* the key (straggler fields unused) */
    plan *pl;                        /* NULL: the planner failed with `err` */
    char err[PLUMB_ERR_MAX];
} cache_slot;

struct ui_plan_cache {
    long long clock;
    cache_slot slot[UI_CACHE_SLOTS];
};

static void cache_free(struct ui_plan_cache *c)
{
    if (!c) return;
    for (int i = 0; i < UI_CACHE_SLOTS; i++) plan_free(c->slot[i].pl);
    free(c);
}

/* Planner answers depend on everything but the straggler (the simulator's what-if), the
 * runtime the native planner ranks under included. */
static int same_key(const ui_whatif *a, const ui_whatif *b)
{
    return a->ngpus == b->ngpus && a->mem_limit_bytes == b->mem_limit_bytes &&
           a->schedule == b->schedule && a->microbatches == b->microbatches &&
           a->recompute == b->recompute && a->p2p_sync == b->p2p_sync &&
           a->grad_sync_end == b->grad_sync_end && a->zero == b->zero && a->opg == b->opg &&
           !memcmp(a->bw_exp, b->bw_exp, sizeof a->bw_exp);
}

static cache_slot *cache_find(struct ui_plan_cache *c, const ui_whatif *w)
{
    for (int i = 0; c && i < UI_CACHE_SLOTS; i++) {
        cache_slot *s = &c->slot[i];
        if (s->used && same_key(&s->w, w)) {
            s->stamp = ++c->clock;
            return s;
        }
    }
    return NULL;
}

/* Takes ownership of pl (may be NULL with err). */
static void cache_put(struct ui_plan_cache *c, const ui_whatif *w, plan *pl, const char *err)
{
    if (!c) {
        plan_free(pl);
        return;
    }
    cache_slot *s = &c->slot[0];
    for (int i = 0; i < UI_CACHE_SLOTS; i++) {
        if (!c->slot[i].used) {
            s = &c->slot[i];
            break;
        }
        if (c->slot[i].stamp < s->stamp) s = &c->slot[i];
    }
    plan_free(s->pl);
    memset(s, 0, sizeof *s);
    s->used = 1;
    s->stamp = ++c->clock;
    s->w = *w;
    s->pl = pl;
    snprintf(s->err, sizeof s->err, "%s", err ? err : "");
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

void ui_base_free(ui_base *b)
{
    profile_free(b->prof);
    cluster_free(b->clus);
    plan_free(b->loaded);
    free(b->source);
    cache_free(b->cache);
    transformer_free(b->model);
    free(b->cluster_file);
    free(b->pipeline_layout);
    memset(b, 0, sizeof *b);
}

/* The rest of a base whose profile and cluster are loaded: its title, the native planner,
 * an empty plan cache. 0, or -1 with err (b freed) when out of memory or when the profile
 * or cluster is missing. */
static int base_finish(ui_base *b, const char *src, plumb_err *err)
{
    b->source = dup_str(src);
    b->planner = UI_PLANNER_NATIVE;
    b->cache = calloc(1, sizeof *b->cache);
    if (b->prof && b->clus && b->source && b->cache) return 0;
    err_set(err, NULL, NULL, "out of memory");
    ui_base_free(b);
    return -1;
}

static int base_model(ui_base *b, transformer *t, cluster *c, const char *cluster_file,
                      const layout3d_options *o, const ui_runtime *rt, const char *src,
                      const plan *file, plumb_err *err);

/* The base of plan file `path` (L, taken) that names its model (L->model): laid out again
 * with the options plan --model took (layout3d_options_from_plan, and its runtime), as ui
 * --model opens them. 0, or -1 with err naming the file (b empty). */
static int base_plan_model(ui_base *b, plan *L, const char *path, const char *src,
                           plumb_err *err)
{
    layout3d_options o;
    ui_runtime rt = { L->tp_overlap, L->overlap_param_gather, L->fp8_param_gather };
    transformer *t = NULL;
    cluster *c = NULL;
    plumb_err in;
    err_clear(&in);
    int rc = -1;
    if (layout3d_options_from_plan(L, &o) || !(t = transformer_clone(L->model->tf)) ||
        !(c = cluster_clone(L->clus)) ||
        (o.pipeline_layout && !(b->pipeline_layout = dup_str(o.pipeline_layout)))) {
        transformer_free(t);
        cluster_free(c);
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    o.pipeline_layout = b->pipeline_layout; /* L goes: the base keeps its own copy */
    rc = base_model(b, t, c, path, &o, &rt, src, L, &in);
    if (rc) err_set(err, path, "model", "%s", in.msg);
done:
    plan_free(L);
    return rc;
}

int ui_base_load(ui_base *b, const char *profile_path, const char *cluster_path,
                 const char *plan_path, plumb_err *err)
{
    char src[512];
    memset(b, 0, sizeof *b);
    if (plan_path) {
        if (!(b->loaded = plan_load(plan_path, err))) goto fail;
        snprintf(src, sizeof src, "%s", base_name(plan_path));
        if (b->loaded->model) { /* a transformer's layout that names its model */
            plan *L = b->loaded;
            b->loaded = NULL;
            return base_plan_model(b, L, plan_path, src, err);
        }
        b->prof = profile_clone(b->loaded->prof);
        b->clus = cluster_clone(b->loaded->clus);
    } else {
        if (!profile_path || !cluster_path) {
            err_set(err, NULL, NULL, "expected a plan file, or a profile (-p) and a cluster (-c)");
            goto fail;
        }
        if (!(b->prof = profile_load(profile_path, err))) goto fail;
        if (!(b->clus = cluster_load(cluster_path, err))) goto fail;
        snprintf(src, sizeof src, "%s + %s", base_name(profile_path), base_name(cluster_path));
    }
    return base_finish(b, src, err);
fail:
    ui_base_free(b);
    return -1;
}

/* The options of the runtime check and search3d_apply_runtime for layout options o and
 * runtime rt (NULL: the default) at tp (0: not known): what `plumb plan --model` fixes
 * for a fixed layout. */
static void runtime_options(const layout3d_options *o, const ui_runtime *rt, int tp,
                            search3d_options *so)
{
    search3d_options_from_layout(o, so);
    so->tp = tp;
    if (rt) {
        so->tp_overlap = (plan_tp_overlap)rt->tp_overlap;
        so->overlap_param_gather = rt->overlap_param_gather;
        so->fp8_param_gather = rt->fp8_param_gather;
    }
}

int ui_runtime_check(const layout3d_options *o, const ui_runtime *rt, int tp, plumb_err *err)
{
    search3d_options so;
    runtime_options(o, rt, tp, &so);
    return search3d_runtime_check(&so, err);
}

/* The first stage where pl's stages differ from the file's F (layer ranges, replicas,
 * devices), or -1 when they are the same. */
static int stages_differ(const plan *pl, const plan *F)
{
    if (pl->nstages != F->nstages) return 0;
    for (int k = 0; k < F->nstages; k++) {
        const plan_stage *a = &pl->stages[k], *f = &F->stages[k];
        if (a->first_layer != f->first_layer || a->last_layer != f->last_layer ||
            a->replicas != f->replicas ||
            memcmp(a->devices, f->devices, (size_t)f->replicas * sizeof *f->devices))
            return k;
    }
    return -1;
}

/* The base of transformer t on cluster c (both taken; cluster_file names c in layout3d's
 * messages) under o and rt, titled src, as ui_base_load_model sets it up; with file (a
 * plan file's plan, not balanced) the layout must give its stages. 0, or -1 with err (b
 * empty). */
static int base_model(ui_base *b, transformer *t, cluster *c, const char *cluster_file,
                      const layout3d_options *o, const ui_runtime *rt, const char *src,
                      const plan *file, plumb_err *err)
{
    plan *pl = NULL;
    b->model = t;
    b->clus = c;
    b->lopt = *o;
    if (layout3d_resolve(b->model, b->clus, cluster_file, o, &b->dims, err)) goto fail;
    /* again with the tp the other two gave, as plumb plan --model checks a fixed layout */
    runtime_options(o, rt, b->dims.tp, &b->rt);
    if (search3d_runtime_check(&b->rt, err)) goto fail;
    if (!(pl = layout3d_build(b->model, b->clus, cluster_file, o, err))) goto fail;
    int k = file && !o->balance ? stages_differ(pl, file) : -1;
    if (k >= 0) {
        err_set(err, NULL, NULL, "laid out again, its stage %d holds layers %d-%d, the file's "
                "%d-%d (expected the layout the file's stages were laid out as)", k,
                k < pl->nstages ? pl->stages[k].first_layer : -1,
                k < pl->nstages ? pl->stages[k].last_layer : -1, file->stages[k].first_layer,
                file->stages[k].last_layer);
        goto fail;
    }
    b->prof = profile_clone(pl->prof);
    plan_free(pl);
    pl = NULL;
    if (!(b->cluster_file = dup_str(cluster_file))) {
        err_set(err, NULL, NULL, "out of memory");
        goto fail;
    }
    return base_finish(b, src, err);
fail:
    plan_free(pl);
    ui_base_free(b);
    return -1;
}

int ui_base_load_model(ui_base *b, const char *model_path, const char *cluster_path,
                       const layout3d_options *o, const ui_runtime *rt, plumb_err *err)
{
    char src[512];
    transformer *t;
    cluster *c = NULL;
    memset(b, 0, sizeof *b);
    if (!(t = transformer_load(model_path, err))) return -1;
    if (!(c = cluster_load(cluster_path, err))) {
        transformer_free(t);
        return -1;
    }
    snprintf(src, sizeof src, "%s + %s", base_name(model_path), base_name(cluster_path));
    return base_model(b, t, c, cluster_path, o, rt, src, NULL, err);
}

void ui_base_whatif(const ui_base *b, ui_whatif *w)
{
    memset(w, 0, sizeof *w);
    w->ngpus = b->clus->ndevices;
    w->straggler = -1;
    w->straggler_factor = 2;
    if (b->model) {
        const layout3d_dims *d = &b->dims;
        w->ngpus = d->gpus;
        w->schedule = d->schedule;
        w->microbatches = d->microbatches;
        w->recompute = b->lopt.recompute;
        w->tp = d->tp, w->pp = d->pp, w->dp = d->dp;
        w->cp = d->cp;
        w->mbs = b->lopt.microbatch_size;
        w->interleave = d->interleave;
        w->ckpt = b->lopt.checkpoint_layers >= 0 ? b->lopt.checkpoint_layers : 1;
        w->seqpar = b->lopt.sequence_parallel;
        w->zero = b->lopt.zero;
        w->tp_overlap = b->rt.tp_overlap;
        w->opg = b->rt.overlap_param_gather;
        w->fp8pg = b->rt.fp8_param_gather;
        w->p2p_sync = b->lopt.p2p_sync;
        w->grad_sync_end = b->lopt.grad_sync_end;
        w->attention = b->lopt.attention;
    } else if (b->loaded) {
        w->schedule = b->loaded->schedule;
        w->microbatches = b->loaded->microbatches;
        w->recompute = b->loaded->recompute;
        w->zero = b->loaded->zero; /* the file's ZeRO stage and runtime: every what-if's */
        w->opg = b->loaded->overlap_param_gather;
        w->fp8pg = b->loaded->fp8_param_gather;
        w->p2p_sync = b->loaded->p2p_sync;
        w->grad_sync_end = b->loaded->grad_sync_end;
    } else {
        w->schedule = b->planner == UI_PLANNER_PIPEDREAM ? SCHED_PIPEDREAM : SCHED_1F1B_FLUSH;
        w->microbatches = 0; /* the planner chooses; the app adopts its choice */
        w->recompute = UI_RECOMPUTE_AUTO;
    }
    if (w->ngpus > UI_MAX_GPUS) w->ngpus = UI_MAX_GPUS;
}

int ui_base_cut_note(const ui_base *b, char *buf, size_t n)
{
    if (n) buf[0] = 0;
    if (!b->clus || b->clus->ndevices <= UI_MAX_GPUS) return 0;
    const char *noun = cluster_device_noun(b->clus);
    snprintf(buf, n, "the cluster has %d %ss; the dashboard plans on its first %d (plumb "
             "plan and plumb sim take them all)", b->clus->ndevices, noun, UI_MAX_GPUS);
    return 1;
}

cluster *ui_cluster_whatif(const cluster *base, const ui_whatif *w, plumb_err *err)
{
    int use;
    cluster *c = planner_cluster_resize(base, w->ngpus, &use, err);
    if (!c) return NULL;
    for (int l = 0; l < c->nlevels; l++) {
        double f = ldexp(1.0, w->bw_exp[l]); /* kept within the bounds a file may give */
        c->levels[l].bandwidth_Bps =
            fmin(fmax(c->levels[l].bandwidth_Bps * f, BOUND_BW_BPS_MIN), BOUND_BW_BPS_MAX);
        c->levels[l].egress_Bps =
            fmin(fmax(c->levels[l].egress_Bps * f, BOUND_BW_BPS_MIN), BOUND_BW_BPS_MAX);
    }
    if (cluster_validate(c, NULL, err)) {
        cluster_free(c);
        return NULL;
    }
    return c;
}

static int chunked(int kind) { return sched_kind_chunked((sched_kind)kind); }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The plan of b's planner (native or PipeDream's partitioner) for w on clus, remembered in
 * b's cache. The native planner plans w's schedule, microbatches, recomputation and memory
 * limit under w's ZeRO stage and runtime (zero, the all-gather apart where w's schedule
 * takes it, p2p, grad-sync: its candidates' memory counted and simulated and ranked so, as
 * `plumb plan -p --zero --overlap-param-gather --p2p --grad-sync` ranks them). Returns a
 * new plan, or NULL with err. */

/* 1 when w's plans take its all-gather apart: zero 1, a synchronous schedule, gradients
 * reduced under the backward (plan_validate's conditions). */
static int opg_taken(const ui_whatif *w)
{
    const sched_traits *tr = sched_traits_of((sched_kind)w->schedule);
    return w->opg && w->zero == 1 && tr && !tr->async && !w->grad_sync_end;
}

static plan *planned(const ui_base *b, const cluster *clus, const ui_whatif *w,
                     double *plan_ms, plumb_err *err)
{
    cache_slot *hit = cache_find(b->cache, w);
    if (!hit) {
        double t0 = now_ms();
        plumb_err e;
        err_clear(&e);
        plan *pl = NULL;
        if (b->planner == UI_PLANNER_NATIVE) {
            native_options o;
            native_options_init(&o);
            o.schedule = w->schedule;
            o.microbatches = w->microbatches;
            o.recompute = w->recompute == UI_RECOMPUTE_AUTO ? NATIVE_RECOMPUTE_AUTO
                                                             : w->recompute;
            o.memory_limit_bytes = w->mem_limit_bytes;
            o.max_devices = w->ngpus < clus->ndevices ? w->ngpus : 0;
            o.p2p_sync = w->p2p_sync; /* ranked under the runtime it runs, as plumb plan */
            o.grad_sync_end = w->grad_sync_end; /* -p --p2p --grad-sync ranks them */
            o.zero = w->zero;                   /* and --zero 1: its memory too */
            o.overlap_param_gather = opg_taken(w);
            if (b->loaded) {
                o.microbatch_size = b->loaded->microbatch_size;
                o.optimizer = b->loaded->optimizer;
            }
            pl = planner_native(b->prof, clus, &o, NULL, &e);
        } else {
            pd_options o;
            pd_options_default(&o);
            pd_options_from_cluster(&o, clus);
            if (w->mem_limit_bytes > 0) {
                if (w->mem_limit_bytes < o.memory_bytes) o.memory_bytes = w->mem_limit_bytes;
                o.use_memory_constraint = 1;
            }
            pd_result res;
            if (!planner_pipedream_run(b->prof, NULL, &o, &res, &e)) {
                pl = planner_pipedream_plan(b->prof, clus, &res, &e);
                pd_result_free(&res);
            }
        }
        *plan_ms += now_ms() - t0;
        cache_put(b->cache, w, pl, e.msg);
        hit = cache_find(b->cache, w);
        if (!hit) { /* no cache (out of memory): answer once */
            if (!pl) err_set(err, NULL, NULL, "%s", e.msg);
            return pl;
        }
    }
    if (!hit->pl) {
        err_set(err, NULL, NULL, "%s", hit->err);
        return NULL;
    }
    plan *pl = plan_clone(hit->pl);
    if (!pl) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    cluster *cc = cluster_clone(clus); /* same devices; the bandwidths are this what-if's */
    if (!cc) {
        plan_free(pl);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    cluster_free(pl->clus);
    pl->clus = cc;
    return pl;
}

/* 1 when w leaves the loaded cluster as it was: its GPU count, every level's bandwidth,
 * no memory limit. Any other cluster re-plans, so that the plan shown is made for it. */
static int cluster_as_loaded(const ui_whatif *w, int ndevices)
{
    if (w->ngpus != ndevices || w->mem_limit_bytes > 0) return 0;
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++)
        if (w->bw_exp[l]) return 0;
    return 1;
}

int ui_base_layout_file(const ui_base *b)
{
    return b && !b->model && b->loaded && b->prof &&
           (b->prof->tp > 1 || b->prof->cp > 1 || profile_is_transformer(b->prof));
}

/* The refusal of a re-plan of plan file L, a transformer's layout: its line names the
 * plumb ui --model command that lays the file's layout out with keys for it. */
static void layout_file_refused(const plan *L, plumb_err *err)
{
    const profile *p = L->prof;
    int v = L->chunks > 1 ? L->chunks : 1;
    char extra[160] = "";
    size_t k = 0;
    if (L->microbatch_size > 1)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " --microbatch-size %d",
                              L->microbatch_size);
    if (v > 1 && k < sizeof extra)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " --interleave %d", v);
    if (L->schedule != SCHED_1F1B_FLUSH && v == 1 && k < sizeof extra)
        k += (size_t)snprintf(extra + k, sizeof extra - k, " --schedule %s",
                              sched_kind_name(L->schedule));
    if (p->tokens_per_sample > 0 && k < sizeof extra)
        snprintf(extra + k, sizeof extra - k, " --seq-len %lld", p->tokens_per_sample);
    err_set(err, NULL, NULL, "a transformer's layout (%s, %s) is re-planned only as a "
            "layout; its plan file does not name its model: plumb ui --model FILE -c CLUSTER "
            "--tp %d --pp %d --dp %d --global-batch %d --precision %s%s", p->name ? p->name : "?", dev_precision_name((dev_precision)L->precision),
            plan_tp(L), L->nstages / v, L->stages[0].replicas, plan_minibatch(L),
            dev_precision_name((dev_precision)L->precision), extra);
}

/* The transformer's layout for w on clus (layout3d_build), or NULL with err. */
static plan *layout(const ui_base *b, const cluster *clus, const ui_whatif *w, plumb_err *err)
{
    layout3d_options o = ui_whatif_layout3d(&b->lopt, w);
    search3d_options rt = b->rt; /* the runtime w asks for */
    rt.tp_overlap = (plan_tp_overlap)w->tp_overlap;
    rt.overlap_param_gather = w->opg;
    rt.fp8_param_gather = w->fp8pg;
    rt.p2p_sync = w->p2p_sync;
    rt.grad_sync_end = w->grad_sync_end;
    plan *pl = layout3d_build(b->model, clus, b->cluster_file, &o, err);
    if (pl) search3d_apply_runtime(pl, &rt); /* each setting where this layout takes it */
    return pl;
}

plan *ui_replan(const ui_base *b, const cluster *clus, const ui_whatif *w, const char **origin,
                double *plan_ms, char *note, size_t note_n, plumb_err *err)
{
    const plan *L = b->loaded;
    plan *pl = NULL;
    if (note_n) note[0] = 0;
    if (b->model) {
        double t0 = now_ms();
        pl = layout(b, clus, w, err);
        *plan_ms += now_ms() - t0;
        *origin = "3D layout";
        return pl; /* layout3d_build validated it; no predictions yet */
    }
    int keep = L && cluster_as_loaded(w, L->clus->ndevices) &&
               (chunked(w->schedule) ? (int)L->schedule == w->schedule : L->chunks == 1);
    if (keep) {
        cluster *cc = cluster_clone(clus);
        pl = plan_clone(L);
        if (!pl || !cc) {
            cluster_free(cc);
            plan_free(pl);
            err_set(err, NULL, NULL, "out of memory");
            return NULL;
        }
        cluster_free(pl->clus);
        pl->clus = cc;
        *origin = "plan file";
    } else if (b->prof->tp > 1) { /* its planners hold whole layers on single devices */
        return err_set(err, NULL, NULL, "a tensor-parallel layout (tp %d) is re-planned only "
                       "by plumb plan --model FILE --tp --pp --dp (plumb ui --model with the "
                       "same options has keys for them)", b->prof->tp), NULL;
    } else if (b->prof->cp > 1) { /* likewise: a replica is cp devices */
        return err_set(err, NULL, NULL, "a context-parallel layout (cp %d) is re-planned only "
                       "by plumb plan --model FILE --cp --tp --pp --dp", b->prof->cp), NULL;
    } else if (ui_base_layout_file(b)) { /* the native planner would drop its precision,
                                            its 3D runtime and its layout */
        return layout_file_refused(L, err), NULL;
    } else {
        /* the dashboard does not ask the native planner for V placements */
        int can = b->planner == UI_PLANNER_NATIVE
                  ? sched_traits_of((sched_kind)w->schedule)->place != SCHED_PLACE_V
                  : b->planner == UI_PLANNER_PIPEDREAM
                  ? !chunked(w->schedule) && w->ngpus >= clus->ndevices /* whole levels */
                  : 0;
        if (can) {
            plumb_err pe;
            err_clear(&pe);
            pl = planned(b, clus, w, plan_ms, &pe);
            *origin = b->planner == UI_PLANNER_NATIVE ? "native planner" : "pipedream planner";
            if (!pl) snprintf(note, note_n, "planner: %s", pe.msg);
        }
        if (!pl) {
            pl = planner_split_plan(b->prof, clus, w->ngpus, (sched_kind)w->schedule, err);
            if (!pl) return NULL;
            *origin = can ? "even split: no plan from the planner" : "even split";
            pl->microbatch_size = L ? L->microbatch_size : b->prof->minibatch;
            if (L) pl->optimizer = L->optimizer;
        }
    }
    pl->schedule = (sched_kind)w->schedule;
    if (w->microbatches > 0 || strcmp(*origin, "native planner")) /* else: its choice */
        pl->microbatches = planner_microbatches(pl, (sched_kind)w->schedule, w->microbatches);
    if (w->recompute != UI_RECOMPUTE_AUTO) pl->recompute = w->recompute;
    if (pl->recompute != RECOMPUTE_FULL) pl->checkpoint_layers = 0; /* full's own */
    /* the plan file's ZeRO stage and runtime ride every plan (the native planner's already
     * planned under them); the all-gather apart where the schedule shown takes it */
    pl->p2p_sync = w->p2p_sync;
    pl->grad_sync_end = w->grad_sync_end;
    pl->zero = w->zero;
    pl->overlap_param_gather = opg_taken(w);
    /* the file's FP8 primary weights where the plan shown takes them (fp8, ZeRO 1) */
    pl->fp8_param_gather = w->fp8pg && pl->precision == DEV_FP8 && pl->zero == 1;
    pl->pred_iteration_s = pl->pred_samples_per_s = pl->pred_speedup_vs_dp = -1;
    pl->pred_speedup_vs_1 = -1;
    free(pl->pred_peak_memory_bytes);
    pl->pred_peak_memory_bytes = NULL;
    for (int s = 0; s < pl->nstages; s++) pl->stages[s].compute_s = pl->stages[s].comm_s = -1;
    if (plan_validate(pl, NULL, err)) {
        plan_free(pl);
        return NULL;
    }
    return pl;
}

double ui_dp_samples_per_s(const plan *pl, int ndev, const sim_options *opt)
{
    plumb_err e;
    err_clear(&e);
    if (pl->tp > 1) return -1; /* its profile is one rank's share: no whole-model baseline */
    plan *dp = planner_dp_plan(pl, ndev, &e);
    if (!dp) return -1;
    sim_options o = *opt;
    o.schedule = -1;
    o.microbatches = 0;
    o.timeline = 0;
    o.sched = NULL;
    sim_report *r = sim_run(dp, &o, &e);
    double v = -1;
    if (r) v = r->fits ? r->samples_per_s : 0; /* over memory: no baseline to beat */
    sim_report_free(r);
    plan_free(dp);
    return v;
}

void ui_result_free(ui_result *r)
{
    plan_free(r->pl);
    sim_report_free(r->rep);
    memset(r, 0, sizeof *r);
}

/* Copies the simulated figures into the plan's predictions, so a saved plan carries them. */
static void predict(plan *pl, const sim_report *r, double dp)
{
    pl->pred_iteration_s = r->iteration_s;
    pl->pred_samples_per_s = r->samples_per_s;
    pl->pred_speedup_vs_dp = dp > 0 ? r->samples_per_s / dp : -1;
    int nd = pl->clus->ndevices;
    pl->pred_peak_memory_bytes = calloc((size_t)nd, sizeof *pl->pred_peak_memory_bytes);
    if (pl->pred_peak_memory_bytes)
        for (int i = 0; i < r->ndevices; i++)
            if (r->devices[i].device >= 0 && r->devices[i].device < nd)
                pl->pred_peak_memory_bytes[r->devices[i].device] = r->devices[i].mem.total;
}

/* --balance: balances r's layout (layout3d_balance under r's options, its even report
 * given) and simulates it again when its stages moved; r->rep is NULL with err when either
 * fails. */
static void balance(ui_result *r, plumb_err *err)
{
    sim_options o = r->opt;
    o.timeline = 0; /* balancing reads the figures; the shown run draws the timeline */
    r->balanced = 1;
    int rc = layout3d_balance(r->pl, &o, r->rep, &r->balance, err);
    if (rc || r->balance.changed) {
        sim_report_free(r->rep);
        r->rep = NULL;
    }
    if (!rc && r->balance.changed) r->rep = sim_run_folded(r->pl, &r->opt, 1, err);
}

int ui_evaluate(const ui_base *b, const ui_whatif *w, ui_result *r)
{
    plumb_err e;
    err_clear(&e);
    ui_result_free(r);
    double t0 = now_ms();
    sim_options_init(&r->opt);
    r->opt.timeline = SIM_TIMELINE_NO_RING_HOPS; /* the timeline draws compute only */
    r->opt.memory_limit_bytes = w->mem_limit_bytes;
    if (w->straggler >= 0 && w->straggler < w->ngpus) {
        r->opt.straggler_device = w->straggler;
        r->opt.straggler_factor = w->straggler_factor;
    }
    cluster *c = ui_cluster_whatif(b->clus, w, &e);
    if (c) r->pl = ui_replan(b, c, w, &r->origin, &r->plan_ms, r->note, sizeof r->note, &e);
    cluster_free(c);
    /* a transformer's layout simulates one pipeline where its replicas are alike
     * (sim_run_folded: the same figures and timeline in a fraction of the time; with
     * mixed_rings, comm_s of a device whose ring hops differ from replica 0's to rounding:
     * the dashboard shows four digits) */
    if (r->pl)
        r->rep = b->model ? sim_run_folded(r->pl, &r->opt, 1, &e) : sim_run(r->pl, &r->opt, &e);
    if (r->rep && b->model && b->lopt.balance) /* as plumb plan --model --balance */
        balance(r, &e);
    if (r->rep) {
        /* a transformer's layouts are compared by their MFU, not against a data-parallel
         * copy of the whole model (which would cost more than the layout) */
        r->dp_samples_per_s = b->model ? -1 : ui_dp_samples_per_s(r->pl, w->ngpus, &r->opt);
        predict(r->pl, r->rep, r->dp_samples_per_s);
    }
    r->eval_ms = now_ms() - t0;
    snprintf(r->err, sizeof r->err, "%s", e.msg);
    return r->rep ? 0 : -1;
}
