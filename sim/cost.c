/* cost.c: the simulator's cost model: turns a plan (its profile, cluster and stages) and the
 * schedule built for it into a priced sim_model (docs/sim.md, "Cost model").
 *
 *  - compute: a stage's F (B) time is the sum of its layers' forward (backward) times,
 *    scaled linearly from the profiled minibatch to the plan's microbatch
 *    (x microbatch_size / profile.minibatch) and divided by the device type's speed;
 *  - zero-bubble halves: I and W from backward_input_ms / backward_weight_ms where a layer
 *    has them, else half of its backward each;
 *  - recompute: full, the forward runs again before the backward (added to B and to I);
 *    selective, the layers' selective parts (selective_recompute_ms) do;
 *  - tensor parallelism (plan tp > 1): each layer's collectives, a ring over the group's
 *    devices (sim_cost_tp_s), inside F and inside B and I: blocking by default; with the
 *    plan's tp_overlap "backward" the backward's beyond the layer's weight-gradient time,
 *    with "full" each layer's beyond its pass's time plus one of tp chunks
 *    (sim_cost_stage_tp3);
 *  - transfers: the activation bytes crossing the cut after a stage (for a chain, the last
 *    layer's output; for a DAG every tensor with a consumer beyond the cut), scaled the same;
 *    with tp > 1 and no sequence parallelism a rank sends 1 / tp of them (and holds them
 *    whole once received: recv_bytes, the memory's), the receiver all-gathering them over
 *    its tensor group inside the F or B / I that takes them (sim_cost_stage_recv_gather);
 *  - all-reduce: ring over the stage's replicas (sim_net_allreduce_s) of its gradient bytes
 *    (sim_memory_state: fp32 main gradients with bf16; with ZeRO-1 a reduce-scatter of the
 *    gradients and an all-gather of the parameters);
 *  - optimizer step: memory-bound, (3 sgd, 5 momentum, 7 adam) x the parameter bytes read
 *    and written at the device's memory bandwidth (sim_device_mem_Bps), or at the
 *    bandwidth the profile's measured step implies (sim_cost_step_Bps);
 *  - shared cores: a CPU server's workers beyond its `cores` share them (sim_cost_core_share
 *    slows compute and the step by workers / cores);
 *  - batch gather: the first and the last stage gather their microbatch from the data set
 *    inside F (sim_cost_gather_s, from the profile's input_gather_ms);
 *  - memory: stashed bytes per in-flight microbatch (stage input + every layer's output, or
 *    the stage input alone with recompute, plus the recomputed outputs while backward runs;
 *    with checkpoint_layers k the inputs of every k-th layer too, and one group's outputs;
 *    selective: selective_saved_bytes for saved_bytes; for 3D plans less the stage's output
 *    once sent, which a Megatron-LM-style runtime frees); weights, gradients and optimizer
 *    state per precision and ZeRO (sim_memory_state), parameters tied to another layer of
 *    the same stage counted once. */
#include "sim/cost.h"
#include "sim/memory.h"
#include "sim/sim.h"

#include <ctype.h>
#include <math.h>
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

int sim_cost_plan_is_3d(const plan *pl)
{
    return pl->tp > 1 || pl->sequence_parallel || pl->zero || pl->checkpoint_layers > 0 ||
           pl->recompute == RECOMPUTE_SELECTIVE || pl->precision == DEV_BF16 ||
           pl->precision == DEV_FP16 || pl->precision == DEV_FP8;
}

/* What the layers [first, last] of a stage take to compute, at the profile's minibatch
 * (ms; its memory: sim_memory_layers). */
typedef struct stage_sums {
    double f, b, in, wt;          /* forward, backward, its input and weight halves */
    double sel_ms;                /* forward time of the selective parts */
} stage_sums;

static void stage_sum(const profile *p, int first, int last, stage_sums *o)
{
    memset(o, 0, sizeof *o);
    for (int l = first; l <= last && l < p->nlayers; l++) {
        const profile_layer *L = &p->layers[l];
        if (profile_layer_is_input(L)) /* the data loader's time, not the device's */
            continue;
        o->f += L->forward_ms;
        o->b += L->backward_ms;
        if (L->backward_input_ms >= 0 && L->backward_weight_ms >= 0) {
            o->in += L->backward_input_ms;
            o->wt += L->backward_weight_ms;
        } else {
            o->in += L->backward_ms / 2;
            o->wt += L->backward_ms / 2;
        }
        if (L->selective_recompute_ms > 0) o->sel_ms += L->selective_recompute_ms;
    }
}

/* The ring of the tp devices first_device .. first_device + tp - 1 (sim_net_ring): its
 * seconds per byte and per collective. 0 when found; -1 (both 0) when tp <= 1, out of
 * memory or no ring. */
static int tp_ring(const sim_net *n, int first_device, int tp, double *per_byte, double *fixed)
{
    *per_byte = *fixed = 0;
    if (tp <= 1) return -1;
    int small[64], *devs = tp <= 64 ? small : malloc((size_t)tp * sizeof *devs);
    if (!devs) return -1;
    for (int i = 0; i < tp; i++) devs[i] = first_device + i;
    int rc = sim_net_ring(n, devs, tp, per_byte, fixed);
    if (devs != small) free(devs);
    if (rc) *per_byte = *fixed = 0;
    return rc ? -1 : 0;
}

/* per_byte x bytes + fixed x collectives of a ring, 0 when nothing moves */
static double tp_line(double per_byte, double fixed, double bytes, int collectives)
{
    return collectives > 0 && bytes > 0 ? per_byte * bytes + fixed * collectives : 0;
}

double sim_cost_tp_s(const sim_net *n, int first_device, int tp, double bytes, int collectives)
{
    double per_byte, fixed;
    if (tp <= 1 || collectives <= 0 || !(bytes > 0)) return 0;
    if (tp_ring(n, first_device, tp, &per_byte, &fixed)) return 0;
    return tp_line(per_byte, fixed, bytes, collectives);
}

/* Seconds of a collective of c seconds pipelined in k chunks with a GEMM of g seconds that
 * its rank would wait for anyway: what it adds beyond the GEMM, the longer of the two less
 * the GEMM plus one chunk of the shorter (the pipeline's fill and drain). */
static double overlap_exposed(double c, double g, int k)
{
    if (!(c > 0)) return 0;
    if (!(g > 0)) return c;
    return (c > g ? c - g : 0) + (c < g ? c : g) / (k > 1 ? k : 1);
}

void sim_cost_stage_tp3(const plan *pl, const sim_net *n, int st, sim_tp_times *t)
{
    const profile *p = pl->prof;
    const plan_stage *ps = &pl->stages[st];
    double scale = (double)pl->microbatch_size / (p->minibatch > 0 ? p->minibatch : 1);
    double per_byte, fixed;
    memset(t, 0, sizeof *t);
    if (pl->tp <= 1 || !ps->devices || ps->replicas < 1) return;
    if (tp_ring(n, ps->devices[0], pl->tp, &per_byte, &fixed)) return;
    const device_type *dt = pl->clus ? cluster_device_type(pl->clus, ps->devices[0]) : NULL;
    double ms_s = scale / 1e3 / (dt && dt->speed > 0 ? dt->speed : 1);
    /* one walk: the blocking sums (tp_overlap none, and the collectives' own time) and,
     * per layer, its collectives against its own passes' compute on the group's device
     * (the profile's ms x scale / speed) */
    double fb = 0, bb = 0, of = 0, ob = 0, oi = 0;
    int nf = 0, nb = 0;
    for (int l = ps->first_layer; l <= ps->last_layer && l < p->nlayers; l++) {
        const profile_layer *L = &p->layers[l];
        if (profile_layer_is_input(L) || !(L->tp_collective_bytes > 0)) continue;
        fb += L->tp_forward_collectives * L->tp_collective_bytes;
        bb += L->tp_backward_collectives * L->tp_collective_bytes;
        nf += L->tp_forward_collectives;
        nb += L->tp_backward_collectives;
        if (pl->tp_overlap == TP_OVERLAP_NONE) continue;
        double one = per_byte * L->tp_collective_bytes * scale + fixed;
        double cf = L->tp_forward_collectives * one, cb = L->tp_backward_collectives * one;
        double in = L->backward_input_ms >= 0 ? L->backward_input_ms : L->backward_ms / 2;
        double wt = L->backward_weight_ms >= 0 ? L->backward_weight_ms : L->backward_ms / 2;
        if (pl->tp_overlap == TP_OVERLAP_FULL) {
            of += overlap_exposed(cf, L->forward_ms * ms_s, pl->tp);
            ob += overlap_exposed(cb, (in + wt) * ms_s, pl->tp);
            oi += overlap_exposed(cb, in * ms_s, pl->tp);
        } else { /* backward: the input gradient's all-reduce while the weight gradient is
                  * computed, only what outlasts it blocks; with sequence parallelism half
                  * of the backward's collectives are that (the reduce-scatters of the input
                  * gradients), the other half the all-gathers of the output gradients,
                  * which block; a split backward defers W, so its I waits for all */
            double async = pl->sequence_parallel ? cb / 2 : cb, g = wt * ms_s;
            of += cf;
            ob += (cb - async) + (async > g ? async - g : 0);
            oi += cb;
        }
    }
    t->comm_f = t->f = tp_line(per_byte, fixed, fb * scale, nf);
    t->comm_b = t->b = t->i = tp_line(per_byte, fixed, bb * scale, nb);
    if (pl->tp_overlap == TP_OVERLAP_NONE || !(t->comm_f > 0 || t->comm_b > 0)) return;
    t->f = of;
    t->b = ob;
    t->i = oi;
}

void sim_cost_stage_tp(const plan *pl, const sim_net *n, int st, double *fwd_s, double *bwd_s)
{
    sim_tp_times t;
    sim_cost_stage_tp3(pl, n, st, &t);
    *fwd_s = t.f;
    *bwd_s = t.b;
}

/* 1 when stages a and b of pl sit on different devices (their first replicas): a
 * pipeline transfer between them moves over a link */
static int stages_apart(const plan *pl, int a, int b)
{
    const plan_stage *x = &pl->stages[a], *y = &pl->stages[b];
    return x->devices && y->devices && x->replicas > 0 && y->replicas > 0 &&
           x->devices[0] != y->devices[0];
}

double sim_cost_recv_gather_s(const plan *pl, const sim_net *n, int st, double bytes)
{
    const plan_stage *ps = &pl->stages[st];
    if (pl->tp <= 1 || pl->sequence_parallel || pl->p2p_whole || !ps->devices ||
        ps->replicas < 1)
        return 0;
    /* the ring all-gather of the whole tensor: half the all-reduce's 2 (t - 1) / t of its
     * bytes and 2 (t - 1) latencies */
    return sim_cost_tp_s(n, ps->devices[0], pl->tp, bytes, 1) / 2;
}

void sim_cost_recv_gathers(const plan *pl, const sim_net *n, int st, double in_bytes,
                           double out_bytes, double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    if (st > 0 && stages_apart(pl, st - 1, st))
        *fwd_s = sim_cost_recv_gather_s(pl, n, st, in_bytes);
    if (st + 1 < pl->nstages && stages_apart(pl, st, st + 1))
        *bwd_s = sim_cost_recv_gather_s(pl, n, st, out_bytes);
}

void sim_cost_stage_recv_gather(const sim_model *m, const plan *pl, const sim_net *n, int st,
                                double *fwd_s, double *bwd_s)
{
    *fwd_s = *bwd_s = 0;
    if (!m->cut_bytes) return;
    /* cut_bytes is a rank's 1 / tp share of the scatter-gather's cut */
    sim_cost_recv_gathers(pl, n, st, st > 0 ? m->cut_bytes[st - 1] * pl->tp : 0,
                          m->cut_bytes[st] * pl->tp, fwd_s, bwd_s);
}

/* The factor worker_scale of stage st's first replica has without the straggler: what a
 * time that is not compute (the tensor-parallel collectives) is divided by in act_s so
 * that the engine's scaling gives it back. */
static double comm_scale(const sim_model *m, const schedule *s, int st, int straggler_device,
                         double straggler_factor)
{
    int w0 = s->stage_workers[s->stage_first[st]];
    double sc = m->worker_scale[w0];
    if (m->worker_device[w0] == straggler_device && straggler_factor > 0)
        sc /= straggler_factor;
    return sc > 0 ? sc : 1;
}

int sim_cost_dp_group(const plan *pl, int st, int *devs)
{
    const plan_stage *ps = &pl->stages[st];
    int cp = plan_cp(pl), n = 0;
    for (int r = 0; r < ps->replicas; r++)
        for (int k = 0; k < cp; k++) devs[n++] = plan_cp_device(pl, st, r, k);
    return n;
}

/* The ring all-reduce of stage st's gradient bytes over its data-parallel group: its
 * replicas, or with cp > 1 their every context-parallel rank (sim_cost_dp_group). */
static double dp_allreduce_s(const plan *pl, const sim_net *net, int st, double bytes)
{
    const plan_stage *ps = &pl->stages[st];
    if (pl->cp <= 1) return sim_net_allreduce_s(net, ps->devices, ps->replicas, bytes);
    int *devs = malloc((size_t)ps->replicas * pl->cp * sizeof *devs);
    if (!devs) return 0;
    int n = sim_cost_dp_group(pl, st, devs);
    double s = sim_net_allreduce_s(net, devs, n, bytes);
    free(devs);
    return s;
}

void sim_cost_stage_state(sim_model *m, const plan *pl, const sim_net *net, int st,
                          double params)
{
    const plan_stage *ps = &pl->stages[st];
    int cp = plan_cp(pl), group = ps->replicas * cp;
    sim_state_mul sm;
    sim_memory_state_of(pl->precision, pl->grad_reduce, pl->optimizer_state, pl->zero,
                        group, pl->optimizer, &sm);
    m->param_bytes[st] = params;
    m->gradmem_bytes[st] = params * sm.gradients;
    m->optmem_bytes[st] = params * sm.optimizer;
    if (m->stepcopy_bytes) m->stepcopy_bytes[st] = params * sm.stepcopy;
    /* FP8 primary weights: the all-gather half moves the blocks' weights at 1 byte */
    double ag = params - (pl->zero && group > 1 && m->fp8_param_bytes ? m->fp8_param_bytes[st] / 2
                                                                        : 0);
    m->grad_bytes[st] = params * sm.reduce - (params - ag) / 2;
    m->step_bytes[st] = params * sm.step;
    m->allreduce_s[st] = dp_allreduce_s(pl, net, st, m->grad_bytes[st]);
    /* the all-gather apart needs each iteration's forwards after the last one's step: not
     * under the asynchronous kinds, whose forwards run ahead of the all-reduce */
    const sched_traits *tr = sched_traits_of(pl->schedule);
    if (m->gather_bytes)
        m->gather_bytes[st] = pl->overlap_param_gather && pl->zero && ps->replicas > 1 &&
                              tr && !tr->async ? ag : 0;
    /* with cp > 1 the engine runs the dp x cp ring over its members' devices, every hop a
     * transfer, one replica's as several (sim_model.ring_members, ring_devices; docs/sim.md,
     * "Context parallelism") */
    if (m->ring_members) m->ring_members[st] = cp > 1 ? group : 0;
    if (m->ring_devices && st < m->ring_nstages) { /* sim_cost_build reports a failed malloc */
        free(m->ring_devices[st]);
        m->ring_devices[st] = cp > 1 ? malloc((size_t)group * sizeof **m->ring_devices) : NULL;
        if (m->ring_devices[st]) sim_cost_dp_group(pl, st, m->ring_devices[st]);
    }
}

void sim_cost_stage_cp(const plan *pl, const sim_net *n, int st, sim_tp_times *t)
{
    const profile *p = pl->prof;
    const plan_stage *ps = &pl->stages[st];
    memset(t, 0, sizeof *t);
    if (pl->cp <= 1 || !ps->devices || ps->replicas < 1) return;
    int cp = plan_cp(pl), small[64];
    int *devs = cp <= 64 ? small : malloc((size_t)cp * sizeof *devs);
    if (!devs) return;
    for (int k = 0; k < cp; k++) devs[k] = plan_cp_device(pl, st, 0, k);
    double per_byte, fixed;
    int rc = sim_net_ring(n, devs, cp, &per_byte, &fixed);
    if (devs != small) free(devs);
    if (rc) return;
    /* one ring step, every rank sending to the next at once: bytes / rate + latency, the
     * all-reduce's line taken apart (2 (cp - 1) such steps) */
    double step_pb = per_byte * cp / (2.0 * (cp - 1)), step_lat = fixed / (2.0 * (cp - 1));
    double scale = (double)pl->microbatch_size / (p->minibatch > 0 ? p->minibatch : 1);
    const device_type *dt = pl->clus ? cluster_device_type(pl->clus, ps->devices[0]) : NULL;
    double ms_s = scale / 1e3 / (dt && dt->speed > 0 ? dt->speed : 1);
    for (int l = ps->first_layer; l <= ps->last_layer && l < p->nlayers; l++) {
        const profile_layer *L = &p->layers[l];
        if (profile_layer_is_input(L) || !(L->cp_ring_bytes > 0)) continue;
        double xf = step_pb * L->cp_ring_bytes * scale + step_lat;
        double xb = step_pb * 2 * L->cp_ring_bytes * scale + step_lat;
        double af = L->cp_attention_fwd_ms * ms_s / cp, ab = L->cp_attention_bwd_ms * ms_s / cp;
        t->comm_f += (cp - 1) * xf;
        t->comm_b += (cp - 1) * xb;
        t->f += (cp - 1) * (xf > af ? xf - af : 0);
        t->b += (cp - 1) * (xb > ab ? xb - ab : 0);
    }
    t->i = t->b;
}

/* Prices stage st of pl (cross: sim_cross_bytes; splits: the schedule splits backwards
 * into I and W) into m. */
static void price_stage(sim_model *m, const plan *pl, const schedule *s, const sim_net *net,
                        const double *cross, int st, int splits, int straggler_device,
                        double straggler_factor)
{
    const profile *p = pl->prof;
    const plan_stage *ps = &pl->stages[st];
    int n = p->nlayers, full = pl->recompute == RECOMPUTE_FULL;
    double scale = (double)pl->microbatch_size / (p->minibatch > 0 ? p->minibatch : 1);
    stage_sums S;
    stage_sum(p, ps->first_layer, ps->last_layer, &S);
    double *a = &m->act_s[(size_t)st * SIM_NC];
    a[SIM_C_F] = S.f * scale / 1e3;
    a[SIM_C_B] = S.b * scale / 1e3;
    a[SIM_C_I] = S.in * scale / 1e3;
    a[SIM_C_W] = S.wt * scale / 1e3;
    a[SIM_C_STEP] = 0;
    /* tensor-parallel collectives: what of them blocks (all unless the plan overlaps
     * them, sim_cost_stage_tp3), inside F and B and the input-gradient half */
    sim_tp_times tp;
    sim_cost_stage_tp3(pl, net, st, &tp);
    if (tp.f > 0 || tp.b > 0 || tp.i > 0) {
        double cs = comm_scale(m, s, st, straggler_device, straggler_factor);
        a[SIM_C_F] += tp.f / cs;
        a[SIM_C_B] += tp.b / cs;
        a[SIM_C_I] += tp.i / cs;
    }
    /* context parallelism: what of the attention's K/V ring outlasts the attention it
     * overlaps (sim_cost_stage_cp), inside F and B and the input-gradient half */
    sim_tp_times cpt;
    sim_cost_stage_cp(pl, net, st, &cpt);
    if (cpt.f > 0 || cpt.b > 0) {
        double cs = comm_scale(m, s, st, straggler_device, straggler_factor);
        a[SIM_C_F] += cpt.f / cs;
        a[SIM_C_B] += cpt.b / cs;
        a[SIM_C_I] += cpt.i / cs;
    }
    if (full) { /* the forward again, its collectives too */
        a[SIM_C_B] += a[SIM_C_F];
        a[SIM_C_I] += a[SIM_C_F];
    } else if (pl->recompute == RECOMPUTE_SELECTIVE) {
        a[SIM_C_B] += S.sel_ms * scale / 1e3;
        a[SIM_C_I] += S.sel_ms * scale / 1e3;
    }
    if (ps->first_layer == 0 || ps->last_layer >= n - 1) /* the batch callback */
        a[SIM_C_F] += sim_cost_gather_s(p, pl->microbatch_size);
    int last = ps->last_layer < n ? ps->last_layer : n - 1;
    double cut = st + 1 < s->nstages && last >= 0 ? cross[last] * scale : 0;
    /* with tp > 1 every rank sends on its own link: without sequence parallelism the
     * activation is whole on each rank and a rank sends 1 / tp of it (scatter-gather, the
     * default; the receiver all-gathers it, sim_cost_stage_recv_gather, priced by
     * sim_cost_build) or all of it (p2p_split whole, current Megatron-Core) */
    m->cut_bytes[st] = pl->tp > 1 && !pl->sequence_parallel && !pl->p2p_whole ? cut / pl->tp
                                                                             : cut;
    /* its memory: the one formula the native planner's estimate calls too */
    sim_stage_layers L;
    sim_memory_layers(p, cross, ps->first_layer, ps->last_layer,
                      full ? pl->checkpoint_layers : 0, &L);
    /* its state and gradient reduction; with cp > 1 the engine runs the dp x cp ring over
     * its members' devices (sim_model.ring_devices), one replica's too */
    m->fp8_param_bytes[st] = pl->fp8_param_gather && pl->precision == DEV_FP8 ? L.fp8_copies : 0;
    sim_cost_stage_state(m, pl, net, st, L.params);
    sim_mem_setting ms = {scale, pl->recompute, pl->checkpoint_layers, splits,
                          m->nccl_buffers, pl->precision, pl->zero,
                          ps->replicas * plan_cp(pl),
                          pl->optimizer, pl->grad_reduce, pl->optimizer_state,
                          pl->fp8_param_gather};
    sim_stage_mem t;
    sim_memory_stage(&L, &ms, &t);
    m->fp8_weight_bytes[st] = t.params - L.params;
    m->stash_bytes[st] = t.stash;
    m->transient_bytes[st] = t.transient;
    m->gradbuf_bytes[st] = t.gradbuf;
    m->slotbuf_bytes[st] = t.slotbuf;
    m->workspace_bytes[st] = t.workspace;
    m->kept_bytes[st] = t.kept;
    m->recv_bytes[st] = t.received;
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

    double *cross = sim_cross_bytes(p);
    if (!cross)
        return err_set(err, NULL, NULL, "out of memory");

    /* a zero-bubble schedule: backwards run as I and W (the generator's lowering knows) */
    int splits = s->backward_split == SCHED_SPLIT_YES;
    for (int w = 0; w < s->nworkers && !splits && s->backward_split == SCHED_SPLIT_UNKNOWN; w++)
        for (int i = 0; i < s->len[w]; i++)
            if (s->acts[w][i].kind == ACT_I) { splits = 1; break; }
    size_t ns = (size_t)s->nstages + 1;
    m->param_bytes = calloc(ns, sizeof *m->param_bytes);
    m->fp8_weight_bytes = calloc(ns, sizeof *m->fp8_weight_bytes);
    m->fp8_param_bytes = calloc(ns, sizeof *m->fp8_param_bytes);
    m->gradmem_bytes = calloc(ns, sizeof *m->gradmem_bytes);
    m->optmem_bytes = calloc(ns, sizeof *m->optmem_bytes);
    m->stepcopy_bytes = calloc(ns, sizeof *m->stepcopy_bytes);
    m->kept_bytes = calloc(ns, sizeof *m->kept_bytes);
    m->recv_bytes = calloc(ns, sizeof *m->recv_bytes);
    if (!m->param_bytes || !m->gradmem_bytes || !m->optmem_bytes || !m->stepcopy_bytes ||
        !m->kept_bytes ||
        !m->recv_bytes || !m->fp8_weight_bytes || !m->fp8_param_bytes) {
        free(cross);
        return err_set(err, NULL, NULL, "out of memory");
    }
    m->nccl_buffers = sim_cost_plan_is_3d(pl);
    m->p2p_sync = pl->p2p_sync;
    m->p2p_lanes = plan_tp(pl);
    m->grad_sync_end = pl->grad_sync_end;
    for (int st = 0; st < s->nstages; st++)
        price_stage(m, pl, s, net, cross, st, splits, straggler_device, straggler_factor);
    free(cross);
    /* the scatter-gather's all-gather after each receive, on the compute stream (blocking)
     * inside the F that takes the input and the B / I that take the output gradient; not
     * recomputed (every stage's cut_bytes set first) */
    for (int st = 0; st < s->nstages; st++) {
        double gf, gb;
        sim_cost_stage_recv_gather(m, pl, net, st, &gf, &gb);
        if (!(gf > 0 || gb > 0)) continue;
        double cs = comm_scale(m, s, st, straggler_device, straggler_factor);
        double *a = &m->act_s[(size_t)st * SIM_NC];
        a[SIM_C_F] += gf / cs;
        a[SIM_C_B] += gb / cs;
        a[SIM_C_I] += gb / cs;
    }
    for (int st = 0; st < s->nstages; st++)
        if (m->ring_members[st] > 0 && !m->ring_devices[st])
            return err_set(err, NULL, NULL, "out of memory");
    if (m->nccl_buffers) return 0; /* staging_bytes stay 0 */
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
    m->ring_members = calloc(ns, sizeof *m->ring_members);
    m->ring_devices = calloc(ns, sizeof *m->ring_devices);
    m->ring_nstages = s->nstages;
    m->stash_bytes = calloc(ns, sizeof *m->stash_bytes);
    m->transient_bytes = calloc(ns, sizeof *m->transient_bytes);
    m->gradbuf_bytes = calloc(ns, sizeof *m->gradbuf_bytes);
    m->slotbuf_bytes = calloc(ns, sizeof *m->slotbuf_bytes);
    m->workspace_bytes = calloc(ns, sizeof *m->workspace_bytes);
    m->step_bytes = calloc(ns, sizeof *m->step_bytes);
    m->gather_bytes = calloc(ns, sizeof *m->gather_bytes);
    m->worker_mem_Bps = calloc(nw, sizeof *m->worker_mem_Bps);
    m->staging_bytes = calloc(nw, sizeof *m->staging_bytes);
    if (!m->staging_bytes || !m->worker_device || !m->worker_scale || !m->act_s || !m->cut_bytes ||
        !m->allreduce_s || !m->grad_bytes || !m->stash_bytes || !m->transient_bytes ||
        !m->gradbuf_bytes || !m->slotbuf_bytes || !m->workspace_bytes || !m->step_bytes ||
        !m->worker_mem_Bps || !m->gather_bytes || !m->ring_members ||
        !m->ring_devices) {
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
    free(m->ring_members);
    for (int st = 0; m->ring_devices && st < m->ring_nstages; st++)
        free(m->ring_devices[st]);
    free(m->ring_devices);
    free(m->grad_bytes);
    free(m->stash_bytes);
    free(m->transient_bytes);
    free(m->gradbuf_bytes);
    free(m->slotbuf_bytes);
    free(m->workspace_bytes);
    free(m->step_bytes);
    free(m->gather_bytes);
    free(m->worker_mem_Bps);
    free(m->staging_bytes);
    free(m->param_bytes);
    free(m->fp8_weight_bytes);
    free(m->fp8_param_bytes);
    free(m->gradmem_bytes);
    free(m->optmem_bytes);
    free(m->stepcopy_bytes);
    free(m->kept_bytes);
    free(m->recv_bytes);
    memset(m, 0, sizeof *m);
}
