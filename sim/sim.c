/* sim.c: sim_run, the simulator's entry point: options -> schedule IR -> cost model ->
 * discrete-event engine -> memory model -> report; and the comparison of a what-if run with
 * its base run. */
#include "sim/sim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/bounds.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/memory.h"

void sim_options_init(sim_options *o)
{
    memset(o, 0, sizeof *o);
    o->schedule = -1;
    o->straggler_device = -1;
    o->straggler_factor = 1;
    o->p2p_sync = -1;
    o->grad_sync_end = -1;
    o->p2p_whole = -1;
    o->recompute = o->checkpoint_layers = o->zero = o->tp_overlap = -1;
    o->overlap_param_gather = o->fp8_param_gather = -1;
    o->grad_reduce = o->optimizer_state = -1;
}

int sim_options_has_runtime(const sim_options *o)
{
    return o->recompute >= 0 || o->checkpoint_layers >= 0 || o->zero >= 0 ||
           o->tp_overlap >= 0 || o->overlap_param_gather >= 0 || o->fp8_param_gather >= 0 ||
           o->grad_reduce >= 0 || o->optimizer_state >= 0;
}

int sim_options_has_whatif(const sim_options *o)
{
    if (o->schedule >= 0 || o->microbatches > 0 || o->memory_limit_bytes > 0 ||
        o->p2p_sync >= 0 || o->grad_sync_end >= 0 || o->p2p_whole >= 0 ||
        sim_options_has_runtime(o) || (o->straggler_device >= 0 && o->straggler_factor != 1))
        return 1;
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++)
        if (o->bandwidth_Bps[l] > 0)
            return 1;
    return 0;
}

static int check_options(const plan *pl, const sim_options *o, plumb_err *err)
{
    if (o->schedule < -1 || o->schedule >= SCHED_NKINDS)
        return err_set(err, NULL, "schedule", "expected a schedule kind (got %d)", o->schedule);
    if (o->microbatches < 0 || o->iterations < 0)
        return err_set(err, NULL, o->microbatches < 0 ? "microbatches" : "iterations",
                       "expected a count >= 1 (got %d)",
                       o->microbatches < 0 ? o->microbatches : o->iterations);
    if (o->straggler_device < -1 || o->straggler_device >= pl->clus->ndevices)
        return err_set(err, NULL, "straggler", "expected a device id from 0 to %d (got %d)",
                       pl->clus->ndevices - 1, o->straggler_device);
    if (o->straggler_device >= 0 && !(o->straggler_factor > 0 && isfinite(o->straggler_factor)))
        return err_set(err, NULL, "straggler", "expected a slowdown factor > 0 (got %g)",
                       o->straggler_factor);
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++) {
        if (!(o->bandwidth_Bps[l] == 0 || (o->bandwidth_Bps[l] >= BOUND_BW_BPS_MIN &&
                                            o->bandwidth_Bps[l] <= BOUND_BW_BPS_MAX)))
            return err_set(err, NULL, "bandwidth", "expected 0 (as the cluster says) or a "
                           "bandwidth from %g to %g bytes/s (got %g)", BOUND_BW_BPS_MIN,
                           BOUND_BW_BPS_MAX, o->bandwidth_Bps[l]);
        if (o->bandwidth_Bps[l] > 0 && l >= pl->clus->nlevels)
            return err_set(err, NULL, "bandwidth", "level %d does not exist (the cluster has "
                           "%d levels)", l, pl->clus->nlevels);
    }
    int kind = o->schedule >= 0 ? o->schedule : (int)pl->schedule;
    if (sched_kind_chunked(kind) && pl->chunks < 2)
        return err_set(err, NULL, "schedule", "%s needs a plan with 2 or more chunks "
                       "(stages) per device (got %d; with one stage per device use "
                       "1f1b-flush)", sched_kind_name(kind), pl->chunks);
    if (o->p2p_sync < -1 || o->p2p_sync > 1 || o->grad_sync_end < -1 || o->grad_sync_end > 1)
        return err_set(err, NULL, o->p2p_sync < -1 || o->p2p_sync > 1 ? "p2p" : "grad_sync",
                       "expected -1 (the plan's), 0 or 1 (got %d)",
                       o->p2p_sync < -1 || o->p2p_sync > 1 ? o->p2p_sync : o->grad_sync_end);
    if (o->p2p_whole < -1 || o->p2p_whole > 1)
        return err_set(err, NULL, "p2p_split", "expected -1 (the plan's), 0 or 1 (got %d)",
                       o->p2p_whole);
    const struct { const char *name; int v, hi; } rt[] = {
        {"recompute", o->recompute, RECOMPUTE_NKINDS - 1}, {"zero", o->zero, 1},
        {"tp_overlap", o->tp_overlap, TP_OVERLAP_NKINDS - 1},
        {"overlap_param_gather", o->overlap_param_gather, 1},
        {"fp8_param_gather", o->fp8_param_gather, 1}};
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++)
        if (rt[i].v < -1 || rt[i].v > rt[i].hi)
            return err_set(err, NULL, rt[i].name, "expected -1 (the plan's) or 0 to %d (got %d)",
                           rt[i].hi, rt[i].v);
    if (o->checkpoint_layers < -1 || o->checkpoint_layers > pl->prof->nlayers)
        return err_set(err, NULL, "checkpoint_layers", "expected -1 (the plan's) or 0 to %d "
                       "(got %d)", pl->prof->nlayers, o->checkpoint_layers);
    if (!(o->grad_reduce == -1 || o->grad_reduce == DEV_FP32 || o->grad_reduce == DEV_BF16) ||
        !(o->optimizer_state == -1 || o->optimizer_state == DEV_FP32 ||
          o->optimizer_state == DEV_BF16))
        return err_set(err, NULL, o->grad_reduce == -1 || o->grad_reduce == DEV_FP32 ||
                                  o->grad_reduce == DEV_BF16 ? "optimizer_state" : "grad_reduce",
                       "expected -1 (the plan's), fp32 or bf16");
    if (!(o->memory_limit_bytes >= 0 && isfinite(o->memory_limit_bytes)))
        return err_set(err, NULL, "memory_limit", "expected bytes >= 0 (got %g)",
                       o->memory_limit_bytes);
    return 0;
}

void sim_report_free(sim_report *r)
{
    if (!r)
        return;
    free(r->devices);
    free(r->links);
    free(r->stages);
    free(r->pipeline_layout);
    timeline_free(r->tl);
    free(r);
}

static int cmp_link(const void *a, const void *b)
{
    const sim_link_report *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

void sim_report_mark_used(const sim_report *r, unsigned char *used, int total)
{
    int tp = (r->tp > 1 ? r->tp : 1) * (r->cp > 1 ? r->cp : 1);
    for (int i = 0; i < r->ndevices; i++)
        for (int t = 0; t < tp; t++) {
            int d = r->devices[i].device + t;
            if (d >= 0 && d < total) used[d] = 1;
        }
}

const sim_device_report *sim_report_device(const sim_report *r, int dev)
{
    int lo = 0, hi = r->ndevices; /* the first device id >= dev is in [lo, hi] */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->devices[mid].device < dev) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->ndevices && r->devices[lo].device == dev ? &r->devices[lo] : NULL;
}

int sim_report_devices_text(const sim_report *r, char *buf, size_t n)
{
    int total = r->devices_total > r->ndevices ? r->devices_total : r->ndevices;
    unsigned char *used = calloc((size_t)total + 1, 1);
    if (n) buf[0] = 0;
    if (!used) return -1;
    sim_report_mark_used(r, used, total);
    int k = plan_devices_text(used, total, buf, n);
    free(used);
    return k;
}

/* Fills the report from the engine's result and the model. */
static int fill_report(sim_report *rep, const plan *pl, const sim_model *m, const sim_result *res,
                       const int *versions, const int *inflight, double mem_limit)
{
    const schedule *s = m->sched;
    int nw = s->nworkers;
    rep->ndevices = nw;
    rep->devices_total = pl->clus->ndevices;
    rep->devices = calloc((size_t)nw + 1, sizeof *rep->devices);
    rep->nlinks = res->nlinks;
    rep->links = calloc((size_t)res->nlinks + 1, sizeof *rep->links);
    rep->stages = calloc((size_t)s->nstages + 1, sizeof *rep->stages);
    int *order = malloc(((size_t)nw + 1) * sizeof *order);
    int *pos = malloc(((size_t)nw + 1) * sizeof *pos);
    int *last = malloc(((size_t)nw + 1) * sizeof *last);
    if (!rep->devices || !rep->links || !rep->stages || !order || !pos || !last) {
        free(order), free(pos), free(last);
        return -1;
    }
    /* devices sorted by id (insertion sort on the worker order, usually already sorted) */
    for (int w = 0; w < nw; w++) {
        int j = w;
        while (j > 0 && m->worker_device[order[j - 1]] > m->worker_device[w]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = w;
    }
    /* each device's stages, in stage order, once each: one pass over the placement */
    for (int i = 0; i < nw; i++) pos[order[i]] = i, last[i] = -1;
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++) {
            int w = s->stage_workers[s->stage_first[st] + j];
            if (w < 0 || w >= nw || last[w] == st) continue;
            last[w] = st;
            sim_device_report *d = &rep->devices[pos[w]];
            if (d->nstages < SIM_DEVICE_STAGES)
                d->stages[d->nstages] = st;
            d->nstages++;
            if (versions[st] > d->weight_versions)
                d->weight_versions = versions[st];
        }
    free(pos), free(last);
    double busy_sum = 0;
    rep->fits = 1;
    for (int i = 0; i < nw; i++) {
        int w = order[i];
        sim_device_report *d = &rep->devices[i];
        const device_type *t = cluster_device_type(pl->clus, m->worker_device[w]);
        d->device = m->worker_device[w];
        d->worker = w;
        snprintf(d->type, sizeof d->type, "%s", t && t->name ? t->name : "");
        d->busy_s = res->busy_window[w];
        d->idle_s = rep->iteration_s > d->busy_s ? rep->iteration_s - d->busy_s : 0;
        d->comm_s = res->comm_window[w];
        d->total_busy_s = res->busy_total[w];
        d->max_inflight = res->max_inflight[w];
        double cap = t ? t->memory_bytes : 0;
        if (mem_limit > 0 && (cap <= 0 || mem_limit < cap))
            cap = mem_limit;
        sim_memory_of(m, w, versions, pl->optimizer, cap, &d->mem);
        if (!d->mem.fits)
            rep->fits = 0;
        if (d->mem.total > rep->peak_memory_bytes)
            rep->peak_memory_bytes = d->mem.total;
        busy_sum += d->busy_s;
    }
    free(order);
    double b = rep->iteration_s > 0 ? 1 - busy_sum / (nw * rep->iteration_s) : 0;
    rep->bubble_fraction = b < 0 ? 0 : b > 1 ? 1 : b;
    for (int i = 0; i < res->nlinks; i++) {
        const sim_link_stat *l = &res->links[i];
        rep->links[i] = (sim_link_report){.src = l->src, .dst = l->dst, .level = l->level,
                                          .bytes = l->bytes,
                                          .bytes_per_iteration = l->bytes_window,
                                          .busy_s = l->busy_s, .transfers = l->transfers};
    }
    qsort(rep->links, (size_t)rep->nlinks, sizeof *rep->links, cmp_link);
    for (int st = 0; st < s->nstages; st++) {
        sim_stage_report *g = &rep->stages[st];
        const plan_stage *ps = &pl->stages[st];
        int w0 = s->stage_workers[s->stage_first[st]];
        const double *a = &m->act_s[(size_t)st * SIM_NC];
        double sc = m->worker_scale[w0];
        *g = (sim_stage_report){.first_layer = ps->first_layer, .last_layer = ps->last_layer,
                                .replicas = ps->replicas, .forward_s = a[SIM_C_F] * sc,
                                .backward_s = a[SIM_C_B] * sc, .input_grad_s = a[SIM_C_I] * sc,
                                .weight_grad_s = a[SIM_C_W] * sc,
                                .step_s = a[SIM_C_STEP] * sc +
                                          (m->worker_mem_Bps[w0] > 0
                                               ? m->step_bytes[st] / m->worker_mem_Bps[w0]
                                               : 0),
                                .send_bytes = m->cut_bytes[st],
                                .parameter_bytes = m->param_bytes ? m->param_bytes[st]
                                                                  : m->grad_bytes[st],
                                .activation_bytes = m->stash_bytes[st],
                                .allreduce_s = m->allreduce_s[st],
                                .weight_versions = versions[st] > 0 ? versions[st] : 1,
                                .max_inflight = inflight[st]};
    }
    return 0;
}

/* Dense peak FLOP/s of device type t at precision p: its figure for p, or for fp32 its
 * peak_tflops; 0 when unknown. fp8 training's MFU is against the bf16 peak (its attention,
 * output layer and norms run in bf16; NVIDIA's recipes quote FP8 runs' MFU over 989 TFLOP/s
 * on H100 too: docs/llm.md, "FP8 training"). */
static double peak_flops_at(const device_type *t, dev_precision p)
{
    if (!t) return 0;
    if (p == DEV_FP8) p = DEV_BF16;
    if (p >= 0 && p < DEV_NPREC && t->peak_flops_prec[p] > 0) return t->peak_flops_prec[p];
    return p == DEV_FP32 && t->peak_flops > 0 ? t->peak_flops : 0;
}

/* The parallel layout of the run and its throughput figures (docs/sim.md, "Tensor,
 * sequence and data parallelism"): dims, GPUs, tokens/s, TFLOP/s per GPU with and without
 * recomputation, MFU, and each stage's tensor-parallel collective time. 0, or -1 when out
 * of memory. */
static int fill_layout(sim_report *rep, const plan *pl, const sim_model *m)
{
    const profile *p = pl->prof;
    rep->tp = plan_tp(pl);
    rep->cp = plan_cp(pl);
    rep->interleave = rep->chunks > 0 ? rep->chunks : 1;
    rep->pp = rep->nstages / rep->interleave;
    rep->dp = pl->stages[0].replicas;
    rep->global_batch = plan_minibatch(pl);
    rep->checkpoint_layers = pl->checkpoint_layers;
    rep->sequence_parallel = pl->sequence_parallel;
    rep->zero = pl->zero;
    rep->precision = pl->precision;
    rep->grad_reduce = pl->grad_reduce;
    rep->grad_sync_end = pl->grad_sync_end;
    rep->p2p_whole = pl->p2p_whole;
    rep->fp8_param_gather = pl->fp8_param_gather;
    rep->cross_entropy = pl->cross_entropy;
    rep->grad_accum = pl->grad_accum;
    if (pl->model) { /* the uneven split the plan file records */
        rep->split = pl->model->split;
        if (pl->model->pipeline_layout &&
            !(rep->pipeline_layout = strdup(pl->model->pipeline_layout)))
            return -1;
    }
    rep->optimizer_state = pl->optimizer_state;
    rep->gpus = plan_gpus(pl);
    rep->tokens_per_sample = p->tokens_per_sample;
    rep->tokens_per_s = rep->samples_per_s * (double)p->tokens_per_sample;
    for (int st = 0; st < rep->nstages; st++)
        sim_cost_stage_tp(pl, &m->net, st, &rep->stages[st].tp_comm_forward_s,
                          &rep->stages[st].tp_comm_backward_s);
    /* FLOPs: the profile's forward FLOPs per sample on one rank, x 3 (forward, input and
     * weight gradients) x tp x cp ranks x samples per iteration; full recomputation runs every
     * forward again (selective: its recomputed parts' FLOPs are not in the profile and
     * are not counted) */
    double fwd = 0;
    int known = p->minibatch > 0 && p->nlayers > 0;
    for (int l = 0; l < p->nlayers; l++) {
        const profile_layer *L = &p->layers[l];
        if (profile_layer_is_input(L)) continue;
        if (L->flops < 0) known = 0;
        else fwd += L->flops;
    }
    rep->tflops_per_gpu = rep->model_tflops_per_gpu = rep->mfu = -1;
    if (!known || !(fwd > 0) || !(rep->iteration_s > 0) || rep->gpus < 1) return 0;
    double per_iter = fwd / p->minibatch * rep->global_batch * rep->tp * rep->cp;
    double model = 3 * per_iter, hw = model + (pl->recompute == RECOMPUTE_FULL ? per_iter : 0);
    rep->model_tflops_per_gpu = model / rep->iteration_s / rep->gpus / 1e12;
    rep->tflops_per_gpu = hw / rep->iteration_s / rep->gpus / 1e12;
    unsigned char *used = calloc((size_t)pl->clus->ndevices + 1, 1);
    if (!used) return -1;
    plan_devices_used(pl, used);
    double peak = 0;
    for (int d = 0; d < pl->clus->ndevices && peak >= 0; d++) {
        if (!used[d]) continue;
        double pk = peak_flops_at(cluster_device_type(pl->clus, d), pl->precision);
        peak = pk > 0 ? peak + pk : -1;
    }
    free(used);
    /* a rate over the peak at the plan's precision says the profile's times were made at
     * another one (an fp8 or bf16 profile that does not say its precision, whose plans say
     * fp32; plan_new gives the plans of one that says it its precision): no MFU rather
     * than one over 100 % */
    if (peak > 0 && model / rep->iteration_s <= peak) rep->mfu = model / rep->iteration_s / peak;
    return 0;
}

/* Names the model and the layers of every stage in the report's trace (for plumb
 * compare). 0, or -1 when out of memory. */
static int name_trace(sim_report *rep, const plan *pl)
{
    int n = pl->nstages, rc = -1;
    int *first = malloc(((size_t)n + 1) * sizeof *first);
    int *last = malloc(((size_t)n + 1) * sizeof *last);
    if (first && last) {
        for (int i = 0; i < n; i++) {
            first[i] = pl->stages[i].first_layer;
            last[i] = pl->stages[i].last_layer;
        }
        rc = timeline_set_model(rep->tl, rep->model, n, first, last);
    }
    free(first);
    free(last);
    return rc;
}

/* The steady window steady_need last found, kept by sim_run for the round it grows. The
 * last compute order schedule_from_plan_grown asks about is the one it lowers, and the
 * lowered IR keeps each worker's computations in that order (sim_steady_window reads only
 * F, B and W): sim_run hands the window to the engine instead of scanning the longer IR
 * for it again. */
typedef struct steady_note {
    int k0, k1, known;
} steady_note;

/* The iterations the steady window needs (sim_steady_window), for
 * schedule_from_plan_grown; notes the window in ctx (a steady_note): < 0 out of memory. */
static int steady_need(const schedule *s, void *ctx)
{
    steady_note *n = ctx;
    int rc = sim_steady_window(s, &n->k0, &n->k1);
    n->known = rc >= 0;
    return rc;
}

/* No transparent huge pages here (docs/sim.md, "Huge pages taken back"): on a virtual
 * machine whose balloon reports free 2 MiB blocks to the host (free page reporting), a
 * process started a few seconds after the last one gets its huge pages from blocks the
 * host took back, and the kernel's zeroing of each faults it in again 4 KiB at a time:
 * `plumb sim` of a 64-stage x 1024-microbatch interleaved plan, 3 s after the last
 * process, took 0.28-0.36 s with the heap advised against 0.24-0.25 s without (10 runs). */
void sim_malloc_for_one_run(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

/* The timeline's row names, "device D (TYPE)" per worker, into *names (the text) and
 * *ptrs (one pointer per worker), set as m->device_names; the caller frees both (also on
 * failure, when they may be NULL). Returns 0, or -1 with err set when out of memory. */
static int name_workers(sim_model *m, int nworkers, const cluster *c, char **names,
                        const char ***ptrs, plumb_err *err)
{
    *names = malloc((size_t)nworkers * 64 + 1);
    *ptrs = malloc(((size_t)nworkers + 1) * sizeof **ptrs);
    if (!*names || !*ptrs)
        return err_set(err, NULL, NULL, "out of memory");
    for (int w = 0; w < nworkers; w++) {
        const device_type *t = cluster_device_type(c, m->worker_device[w]);
        snprintf(*names + (size_t)w * 64, 64, "device %d (%s)", m->worker_device[w],
                 t ? t->name : "?");
        (*ptrs)[w] = *names + (size_t)w * 64;
    }
    m->device_names = *ptrs;
    return 0;
}

/* The run's scalar figures into rep: the schedule s replayed for view, its result res,
 * `requested` iterations asked for. */
static void fill_run(sim_report *rep, const plan *view, const schedule *s,
                     const sim_result *res, int requested)
{
    rep->schedule = s->kind;
    rep->microbatches = s->microbatches;
    rep->microbatch_size = view->microbatch_size;
    rep->iterations = res->iterations;
    rep->iterations_requested = requested;
    rep->steady = res->steady;
    rep->steady_first = res->k0;
    rep->steady_last = res->k1;
    rep->settled = res->settled;
    rep->nstages = s->nstages;
    rep->chunks = s->chunks;
    rep->recompute = view->recompute;
    rep->iteration_s = res->iteration_s;
    rep->samples_per_s = res->iteration_s > 0
        ? (double)view->microbatch_size * s->microbatches / res->iteration_s : 0;
    rep->makespan_s = res->makespan_s;
    rep->events = res->events;
    rep->actions = res->actions;
}

/* rep->tl gets each device's predicted peak memory on its track (for plumb compare) and
 * each device's memory over time (Chrome counter events, sim_memory_timeline). Returns 0,
 * or -1 with err set. */
static int trace_memory(sim_report *rep, const sim_model *m, plumb_err *err)
{
    for (int i = 0; i < rep->ndevices; i++)
        for (int k = 0; k < rep->tl->ntracks; k++) {
            tl_track *t = &rep->tl->tracks[k];
            if (t->kind == TL_TRACK_DEVICE && t->device == rep->devices[i].device)
                t->peak_bytes = rep->devices[i].mem.total;
        }
    return sim_memory_timeline(m, rep, rep->tl, err);
}

void sim_options_view(const plan *pl, const sim_options *opt, plan *view)
{
    *view = *pl;
    if (opt->schedule >= 0)
        view->schedule = (sched_kind)opt->schedule;
    if (opt->microbatches > 0)
        view->microbatches = opt->microbatches;
    if (opt->p2p_sync >= 0)
        view->p2p_sync = opt->p2p_sync;
    if (opt->grad_sync_end >= 0)
        view->grad_sync_end = opt->grad_sync_end;
    if (opt->p2p_whole >= 0)
        view->p2p_whole = opt->p2p_whole;
    if (opt->recompute >= 0 && opt->recompute != pl->recompute) {
        view->recompute = opt->recompute;
        view->checkpoint_layers = opt->recompute == RECOMPUTE_FULL &&
                                  profile_is_transformer(pl->prof) ? 1 : 0;
    }
    if (opt->checkpoint_layers >= 0)
        view->checkpoint_layers = opt->checkpoint_layers;
    if (opt->zero >= 0)
        view->zero = opt->zero;
    if (opt->tp_overlap >= 0)
        view->tp_overlap = (plan_tp_overlap)opt->tp_overlap;
    if (opt->overlap_param_gather >= 0)
        view->overlap_param_gather = opt->overlap_param_gather;
    if (opt->fp8_param_gather >= 0)
        view->fp8_param_gather = opt->fp8_param_gather;
    if (opt->grad_reduce >= 0)
        view->grad_reduce = (dev_precision)opt->grad_reduce;
    if (opt->optimizer_state >= 0)
        view->optimizer_state = (dev_precision)opt->optimizer_state;
}

sim_report *sim_run(const plan *pl, const sim_options *opt, plumb_err *err)
{
    sim_options dflt;
    if (!opt) {
        sim_options_init(&dflt);
        opt = &dflt;
    }
    if (!pl || !pl->prof || !pl->clus || pl->nstages < 1) {
        err_set(err, NULL, NULL, "the plan has no stages");
        return NULL;
    }
    if (check_options(pl, opt, err))
        return NULL;
    plan view; /* shallow: only scalar fields change */
    sim_options_view(pl, opt, &view);
    int iters = opt->iterations > 0 ? opt->iterations : SIM_DEFAULT_ITERATIONS;
    if (!opt->sched && sim_work_check(&view, 0, iters, SIM_MAX_ACTIONS,
                                      opt->microbatches > 0 ? "--microbatches" : "microbatches",
                                      err))
        return NULL;

    sim_report *rep = calloc(1, sizeof *rep);
    schedule *own = NULL;
    const schedule *s = opt->sched;
    sim_model m = {0};
    sim_result res = {0};
    int have_res = 0, ok = 0;
    int *versions = NULL, *inflight = NULL;
    char *names = NULL;
    const char **nameptr = NULL;
    if (!rep) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    int requested = iters;
    steady_note win = {0, 0, 0};
    /* Generate, price and replay; while the IR is too short for a steady window, or the
     * window's gaps have not settled, regenerate with more iterations (the window's need
     * grows with the run only until the pipeline is full; settling doubles the run, up to
     * SIM_MAX_ITERATIONS). A prebuilt IR is replayed once as it is. */
    for (int round = 0;; round++) {
        if (!opt->sched) { /* grown on the compute order: only the last is lowered */
            int grown = 0;
            win.known = 0;
            own = schedule_from_plan_grown(&view, iters, steady_need, &win, 8 - round, &grown,
                                           err);
            if (!own)
                goto done;
            round += grown;
            iters = own->iterations;
            s = own;
        }
        sim_net net;
        sim_net_from_cluster(&net, pl->clus, opt->bandwidth_Bps);
        if (sim_cost_build(&m, &view, s, &net, opt->straggler_device,
                           opt->straggler_device >= 0 ? opt->straggler_factor : 1, err))
            goto done;
        if (!opt->sched && win.known) {
            m.window_known = 1;
            m.window_k0 = win.k0;
            m.window_k1 = win.k1;
        }
        m.record = opt->timeline != 0;
        m.skip_ring_hops = opt->timeline == SIM_TIMELINE_NO_RING_HOPS;
        if (m.record && name_workers(&m, s->nworkers, pl->clus, &names, &nameptr, err))
            goto done;
        if (sim_engine_run(&m, &res, err))
            goto done;
        have_res = 1;
        if (!isfinite(res.iteration_s) || !isfinite(res.makespan_s)) { /* defence in depth */
            err_set(err, NULL, NULL, "the simulated times are not finite (got an iteration of "
                    "%g s): a time, size or bandwidth is out of the bounds of docs/formats.md",
                    res.iteration_s);
            goto done;
        }
        int next = 2 * iters < SIM_MAX_ITERATIONS ? 2 * iters : SIM_MAX_ITERATIONS;
        if (opt->sched || res.settled || !res.steady || iters >= SIM_MAX_ITERATIONS ||
            sim_actions_estimate(&view, 0, next) > SIM_MAX_ACTIONS) /* the work budget */
            break;
        sim_result_free(&res);
        have_res = 0;
        sim_model_release(&m);
        schedule_free(own);
        own = NULL;
        free(names);
        free(nameptr);
        names = NULL;
        nameptr = NULL;
        iters = next;
    }
    versions = calloc((size_t)s->nstages + 1, sizeof *versions);
    inflight = calloc((size_t)s->nstages + 1, sizeof *inflight);
    if (!versions || !inflight) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    /* a generated IR carries its lowering's counts (s->counts: no pass) */
    if (schedule_inflight_fresh(s, inflight, versions, err))
        goto done;
    fill_run(rep, &view, s, &res, requested);
    if (fill_report(rep, &view, &m, &res, versions, inflight, opt->memory_limit_bytes) ||
        fill_layout(rep, &view, &m)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    rep->tl = res.tl;
    res.tl = NULL;
    snprintf(rep->model, sizeof rep->model, "%s", pl->prof->name ? pl->prof->name : "");
    if (rep->tl && name_trace(rep, pl)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    rep->whatif = *opt;
    rep->whatif.sched = NULL;
    rep->whatif.timeline = 0;
    rep->device_noun = cluster_device_noun(pl->clus);
    for (int l = 0; l < pl->clus->nlevels && l < CLUSTER_MAX_LEVELS; l++)
        snprintf(rep->level_names[l], sizeof rep->level_names[l], "%s",
                 pl->clus->levels[l].name ? pl->clus->levels[l].name : "");
    if (rep->tl && trace_memory(rep, &m, err))
        goto done;
    ok = 1;
done:
    if (have_res)
        sim_result_free(&res);
    sim_model_release(&m);
    schedule_free(own);
    free(versions);
    free(inflight);
    free(names);
    free(nameptr);
    if (ok)
        return rep;
    sim_report_free(rep);
    return NULL;
}

/* --- what-if comparison ------------------------------------------------------------------- */

static int add_change(sim_changes *c, const char *figure, const char *unit, double base,
                      double whatif)
{
    sim_change *nc = realloc(c->c, ((size_t)c->n + 1) * sizeof *nc);
    if (!nc)
        return -1;
    c->c = nc;
    size_t n = strlen(figure) + 1;
    char *f = malloc(n);
    if (!f)
        return -1;
    memcpy(f, figure, n);
    c->c[c->n++] = (sim_change){.figure = f, .unit = unit, .base = base, .whatif = whatif,
                                .ratio = base != 0 ? whatif / base : 0};
    return 0;
}

static int moved(double a, double b)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) > 1e-3 * m && m > 0;
}

int sim_compare(const sim_report *base, const sim_report *whatif, sim_changes *out)
{
    out->n = 0;
    out->c = NULL;
    if (add_change(out, "samples_per_s", "samples/s", base->samples_per_s,
                   whatif->samples_per_s) ||
        add_change(out, "iteration_s", "s", base->iteration_s, whatif->iteration_s) ||
        add_change(out, "bubble_fraction", "fraction", base->bubble_fraction,
                   whatif->bubble_fraction) ||
        add_change(out, "peak_memory_bytes", "bytes", base->peak_memory_bytes,
                   whatif->peak_memory_bytes) ||
        add_change(out, "fits", "bool", base->fits, whatif->fits))
        goto oom;
    for (int i = 0; i < whatif->ndevices; i++) {
        const sim_device_report *w = &whatif->devices[i], *b = NULL;
        for (int j = 0; j < base->ndevices && !b; j++)
            if (base->devices[j].device == w->device)
                b = &base->devices[j];
        if (!b)
            continue;
        char f[96];
        struct { const char *name, *unit; double x, y; } figs[] = {
            {"busy_s", "s", b->busy_s, w->busy_s},
            {"idle_s", "s", b->idle_s, w->idle_s},
            {"comm_s", "s", b->comm_s, w->comm_s},
            {"peak_memory_bytes", "bytes", b->mem.total, w->mem.total},
            {"memory_capacity_bytes", "bytes", b->mem.capacity, w->mem.capacity},
        };
        for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
            if (!moved(figs[k].x, figs[k].y))
                continue;
            snprintf(f, sizeof f, "devices[%d].%s", w->device, figs[k].name);
            if (add_change(out, f, figs[k].unit, figs[k].x, figs[k].y))
                goto oom;
        }
    }
    return 0;
oom:
    sim_changes_free(out);
    return -1;
}

void sim_changes_free(sim_changes *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        free((char *)c->c[i].figure);
    free(c->c);
    c->c = NULL;
    c->n = 0;
}
