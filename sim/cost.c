/* cost.c: the simulator's cost model: turns a plan (its profile, cluster and stages) and the
 * schedule built for it into a priced sim_model (docs/sim.md, "Cost model").
 *
 *  - compute: a stage's F (B) time is the sum of its layers' forward (backward) times,
 *    scaled linearly from the profiled minibatch to the plan's microbatch
 *    (x microbatch_size / profile.minibatch) and divided by the device type's speed;
 *  - zero-bubble halves: I and W from backward_input_ms / backward_weight_ms where a layer
 *    has them, else half of its backward each;
 *  - recompute: the forward runs again before the backward (added to B and to I);
 *  - transfers: the activation bytes crossing the cut after a stage (for a chain, the last
 *    layer's output; for a DAG every tensor with a consumer beyond the cut), scaled the same;
 *  - all-reduce: ring over the stage's replicas (sim_net_allreduce_s) of its parameter bytes;
 *  - optimizer step: memory-bound, (3 sgd, 5 momentum, 7 adam) x the parameter bytes read
 *    and written at the device's memory bandwidth (sim_device_mem_Bps), or at the
 *    bandwidth the profile's measured step implies (sim_cost_step_Bps);
 *  - shared cores: a CPU server's workers beyond its `cores` share them (sim_cost_core_share
 *    slows compute and the step by workers / cores);
 *  - batch gather: the first and the last stage gather their microbatch from the data set
 *    inside F (sim_cost_gather_s, from the profile's input_gather_ms);
 *  - memory: stashed bytes per in-flight microbatch (stage input + every layer's output, or
 *    the stage input alone with recompute, plus the recomputed outputs while backward runs). */
#include "sim/cost.h"
#include "sim/memory.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Memory bandwidths of known devices (bytes/s; vendors' data sheets), matched as a
 * case-insensitive part of the device type's name, first match wins. */
static const struct { const char *part; double Bps; } known_mem[] = {
    {"h200", 4.8e12}, {"h100", 3.35e12}, {"a100", 2.0e12}, {"v100", 0.9e12},
    {"p100", 0.732e12}, {"titanx", 0.48e12}, {"titan x", 0.48e12}, {"cpu", 10e9},
};

/* 1 when `part` occurs in `name`, ignoring case. */
static int has_part(const char *name, const char *part)
{
    size_t n = strlen(part);
    for (const char *p = name; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == part[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

double sim_device_mem_Bps(const device_type *t)
{
    if (t && t->name)
        for (size_t i = 0; i < sizeof known_mem / sizeof known_mem[0]; i++)
            if (has_part(t->name, known_mem[i].part))
                return known_mem[i].Bps;
    if (t && t->peak_flops > 0)
        return SIM_MEM_BYTES_PER_FLOP * t->peak_flops;
    return SIM_MEM_DEFAULT_BPS * (t && t->speed > 0 ? t->speed : 1);
}

double sim_step_bytes_per_param(optimizer_kind opt)
{
    /* read weights and gradients, write weights; each state tensor read and written */
    return opt == OPT_ADAM ? 7 : opt == OPT_MOMENTUM ? 5 : 3;
}

double sim_cost_step_Bps(const profile *p, optimizer_kind opt, const device_type *t)
{
    if (p && opt >= 0 && opt < 3 && p->step_ns_per_byte[opt] > 0) {
        double speed = t && t->speed > 0 ? t->speed : 1;
        return sim_step_bytes_per_param(opt) / (p->step_ns_per_byte[opt] * 1e-9) * speed;
    }
    return sim_device_mem_Bps(t);
}

double sim_cost_gather_s(const profile *p, int microbatch)
{
    if (!p || p->input_gather_ms <= 0 || p->minibatch <= 0 || microbatch <= 0) return 0;
    return p->input_gather_ms * ((double)microbatch / p->minibatch) / 1e3;
}

double sim_cost_core_share(const cluster *c, const int *worker_device, int nworkers, int d)
{
    const device_type *t = cluster_device_type(c, d);
    if (!t || t->cores <= 0) return 1;
    int server = cluster_server_of(c, d), n = 0;
    for (int w = 0; w < nworkers; w++)
        if (worker_device[w] >= 0 && cluster_server_of(c, worker_device[w]) == server) n++;
    return n > t->cores ? (double)n / t->cores : 1;
}

/* The two input-gradient buffers the executor gives the top-level layers [first, last] of
 * a chain, at the profile's minibatch: walking backward, each layer writes its input
 * gradient into the buffer that does not hold its output gradient, a flatten passes its
 * gradient through and an embedding has none; each buffer is as large as the largest
 * input written into it. */
static double chain_gradbuf(const profile *p, int first, int last)
{
    double need[2] = {0, 0};
    int hold = -1;
    for (int l = last < p->nlayers ? last : p->nlayers - 1; l >= first; l--) {
        const char *k = p->layers[l].kind;
        if (!strcmp(k, "flatten")) continue;
        if (!strcmp(k, "embedding")) {
            hold = -1;
            continue;
        }
        int b = hold == 0 ? 1 : 0;
        double in = l > 0 ? p->layers[l - 1].activation_bytes : p->input_bytes;
        if (in > need[b]) need[b] = in;
        hold = b;
    }
    return need[0] + need[1];
}

double *sim_cross_bytes(const profile *p)
{
    /* a difference array over the order: +bytes after the producer, -bytes after the
     * last consumer */
    int n = p->nlayers;
    double *cross = calloc((size_t)n + 1, sizeof *cross);
    int *far = malloc(((size_t)n + 1) * sizeof *far);
    if (!cross || !far) {
        free(cross);
        free(far);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        far[i] = p->nedges ? i : i + 1;  /* a chain: each output feeds the next layer */
    for (int e = 0; e < p->nedges; e++) {
        int a = p->edges[e].src, b = p->edges[e].dst;
        if (a >= 0 && a < n && b > far[a] && b < n)
            far[a] = b;
    }
    for (int i = 0; i < n; i++)
        if (far[i] > i && far[i] <= n) {
            cross[i] += p->layers[i].activation_bytes;
            cross[far[i] < n ? far[i] : n] -= p->layers[i].activation_bytes;
        }
    for (int i = 1; i <= n; i++)
        cross[i] += cross[i - 1];
    free(far);
    return cross;
}

int sim_cost_build(sim_model *m, const plan *pl, const schedule *s, const sim_net *net,
                   int straggler_device, double straggler_factor, plumb_err *err)
{
    const profile *p = pl->prof;
    const cluster *c = pl->clus;
    if (s->nstages != pl->nstages)
        return err_set(err, NULL, NULL, "schedule has %d stages but the plan has %d",
                       s->nstages, pl->nstages);
    if (sim_model_alloc(m, s))
        return err_set(err, NULL, NULL, "out of memory");
    m->net = *net;
    for (int w = 0; w < s->nworkers; w++)
        m->worker_device[w] = -1;
    /* workers -> devices, from the stage placement of both */
    for (int st = 0; st < s->nstages; st++) {
        const plan_stage *ps = &pl->stages[st];
        if (s->replicas[st] != ps->replicas)
            return err_set(err, NULL, NULL, "schedule stage %d has %d replicas but the plan "
                           "stage has %d", st, s->replicas[st], ps->replicas);
        for (int j = 0; j < ps->replicas; j++) {
            int w = s->stage_workers[s->stage_first[st] + j], d = ps->devices[j];
            if (w < 0 || w >= s->nworkers || d < 0 || d >= c->ndevices)
                return err_set(err, NULL, NULL, "stage %d replica %d: worker %d / device %d "
                               "out of range", st, j, w, d);
            if (m->worker_device[w] >= 0 && m->worker_device[w] != d)
                return err_set(err, NULL, NULL, "worker %d runs on two devices (%d and %d)",
                               w, m->worker_device[w], d);
            m->worker_device[w] = d;
        }
    }
    for (int w = 0; w < s->nworkers; w++) {
        if (m->worker_device[w] < 0)
            return err_set(err, NULL, NULL, "worker %d holds no stage of the plan", w);
        const device_type *t = cluster_device_type(c, m->worker_device[w]);
        double speed = t && t->speed > 0 ? t->speed : 1;
        m->worker_scale[w] = 1.0 / speed;
        m->worker_mem_Bps[w] = sim_cost_step_Bps(p, pl->optimizer, t);
        double share = sim_cost_core_share(c, m->worker_device, s->nworkers, m->worker_device[w]);
        m->worker_scale[w] *= share;
        m->worker_mem_Bps[w] /= share;
        if (m->worker_device[w] == straggler_device) {
            m->worker_scale[w] *= straggler_factor;
            m->worker_mem_Bps[w] /= straggler_factor;
        }
    }

    int n = p->nlayers;
    double scale = (double)pl->microbatch_size / (p->minibatch > 0 ? p->minibatch : 1);
    double *cross = sim_cross_bytes(p);
    if (!cross)
        return err_set(err, NULL, NULL, "out of memory");

    int splits = 0; /* a zero-bubble schedule: backwards run as I and W */
    for (int w = 0; w < s->nworkers && !splits; w++)
        for (int i = 0; i < s->len[w]; i++)
            if (s->acts[w][i].kind == ACT_I) { splits = 1; break; }
    for (int st = 0; st < s->nstages; st++) {
        const plan_stage *ps = &pl->stages[st];
        double f = 0, b = 0, in = 0, wt = 0, params = 0, acts = 0, maxact = 0;
        double saved = 0, split = 0, inner = 0, ws = 0, lastact = 0;
        int nl = 0;
        for (int l = ps->first_layer; l <= ps->last_layer && l < n; l++) {
            const profile_layer *L = &p->layers[l];
            nl++;
            if (l < ps->last_layer && L->activation_bytes > maxact) /* the next one's input */
                maxact = L->activation_bytes;
            saved += L->saved_bytes;
            split += L->split_saved_bytes;
            inner += L->grad_buffer_bytes;
            if (L->workspace_bytes > ws) ws = L->workspace_bytes;
            lastact = L->activation_bytes;
            /* the executor's flatten hands on its input's buffer: nothing more is held */
            double held = !p->nedges && !strcmp(L->kind, "flatten") ? 0 : L->activation_bytes;
            if (profile_layer_is_input(L)) { /* the data loader's time, not the device's */
                params += L->parameter_bytes;
                acts += held;
                continue;
            }
            f += L->forward_ms;
            b += L->backward_ms;
            if (L->backward_input_ms >= 0 && L->backward_weight_ms >= 0) {
                in += L->backward_input_ms;
                wt += L->backward_weight_ms;
            } else {
                in += L->backward_ms / 2;
                wt += L->backward_ms / 2;
            }
            params += L->parameter_bytes;
            acts += held;
        }
        double *a = &m->act_s[(size_t)st * SIM_NC];
        a[SIM_C_F] = f * scale / 1e3;
        a[SIM_C_B] = b * scale / 1e3;
        a[SIM_C_I] = in * scale / 1e3;
        a[SIM_C_W] = wt * scale / 1e3;
        a[SIM_C_STEP] = 0;
        if (pl->recompute) {
            a[SIM_C_B] += a[SIM_C_F];
            a[SIM_C_I] += a[SIM_C_F];
        }
        if (ps->first_layer == 0 || ps->last_layer >= n - 1) /* the batch callback */
            a[SIM_C_F] += sim_cost_gather_s(p, pl->microbatch_size);
        int last = ps->last_layer < n ? ps->last_layer : n - 1;
        m->cut_bytes[st] = st + 1 < s->nstages && last >= 0 ? cross[last] * scale : 0;
        double input = st > 0 && ps->first_layer > 0 ? cross[ps->first_layer - 1] * scale : 0;
        /* the executor's slots also hold the first stage's input (the data) */
        double held_in = ps->first_layer == 0 ? p->input_bytes * scale : input;
        m->grad_bytes[st] = params;
        m->step_bytes[st] = sim_step_bytes_per_param(pl->optimizer) * params;
        m->allreduce_s[st] = sim_net_allreduce_s(net, ps->devices, ps->replicas, params);
        double maxin = maxact * scale > input ? maxact * scale : input;
        m->gradbuf_bytes[st] = (p->nedges ? (nl > 1 ? 2 : 1) * maxin
                                          : chain_gradbuf(p, ps->first_layer, ps->last_layer) *
                                                scale) +
                               inner * scale;
        m->slotbuf_bytes[st] = m->cut_bytes[st] + input;
        m->workspace_bytes[st] = ws;
        double keep = splits ? split * scale : 0; /* output gradients kept for W */
        if (pl->recompute) {
            /* per microbatch the input and the output (the loss stage: also its loss rows
             * and targets, the loss layer's saved bytes); one microbatch's activations */
            double loss = ps->last_layer >= n - 1 ? p->layers[n - 1].saved_bytes : 0;
            m->stash_bytes[st] = held_in + (lastact + loss) * scale + keep;
            m->transient_bytes[st] = (acts + saved) * scale;
        } else {
            m->stash_bytes[st] = held_in + (acts + saved) * scale + keep;
            m->transient_bytes[st] = 0;
        }
    }
    free(cross);
    return sim_memory_staging(m, err);
}

int sim_model_alloc(sim_model *m, const schedule *s)
{
    memset(m, 0, sizeof *m);
    m->sched = s;
    size_t nw = (size_t)s->nworkers + 1, ns = (size_t)s->nstages + 1;
    m->worker_device = calloc(nw, sizeof *m->worker_device);
    m->worker_scale = malloc(nw * sizeof *m->worker_scale);
    m->act_s = calloc(ns * SIM_NC, sizeof *m->act_s);
    m->cut_bytes = calloc(ns, sizeof *m->cut_bytes);
    m->allreduce_s = calloc(ns, sizeof *m->allreduce_s);
    m->grad_bytes = calloc(ns, sizeof *m->grad_bytes);
    m->stash_bytes = calloc(ns, sizeof *m->stash_bytes);
    m->transient_bytes = calloc(ns, sizeof *m->transient_bytes);
    m->gradbuf_bytes = calloc(ns, sizeof *m->gradbuf_bytes);
    m->slotbuf_bytes = calloc(ns, sizeof *m->slotbuf_bytes);
    m->workspace_bytes = calloc(ns, sizeof *m->workspace_bytes);
    m->step_bytes = calloc(ns, sizeof *m->step_bytes);
    m->worker_mem_Bps = calloc(nw, sizeof *m->worker_mem_Bps);
    m->staging_bytes = calloc(nw, sizeof *m->staging_bytes);
    if (!m->staging_bytes || !m->worker_device || !m->worker_scale || !m->act_s || !m->cut_bytes ||
        !m->allreduce_s || !m->grad_bytes || !m->stash_bytes || !m->transient_bytes ||
        !m->gradbuf_bytes || !m->slotbuf_bytes || !m->workspace_bytes || !m->step_bytes ||
        !m->worker_mem_Bps) {
        sim_model_release(m);
        return -1;
    }
    for (int w = 0; w < s->nworkers; w++) {
        m->worker_device[w] = w;
        m->worker_scale[w] = 1;
    }
    return 0;
}

void sim_model_release(sim_model *m)
{
    free(m->worker_device);
    free(m->worker_scale);
    free(m->act_s);
    free(m->cut_bytes);
    free(m->allreduce_s);
    free(m->grad_bytes);
    free(m->stash_bytes);
    free(m->transient_bytes);
    free(m->gradbuf_bytes);
    free(m->slotbuf_bytes);
    free(m->workspace_bytes);
    free(m->step_bytes);
    free(m->worker_mem_Bps);
    free(m->staging_bytes);
    memset(m, 0, sizeof *m);
}
