/* native_model.c: plumb's native cost model and partitioner (docs/planner-native.md).
 *
 * The profile's topological order is coarsened into at most NM_MAX_BLOCKS blocks (cuts
 * placed near equal-work points, at the boundary in a small window that the fewest
 * activation bytes cross); the devices, in a placement order that follows the cluster's
 * hierarchy, into at most NM_MAX_UNITS units. A stage is a block range on a unit range:
 * its replicas are the range's devices, its speed the slowest of them. Per microbatch a
 * stage costs
 *   compute  c = (F + B [+ F with recompute]) x microbatch / profiled minibatch / speed,
 *   period   max(c / replicas [+ exposed all-reduce / replicas for pipedream],
 *                output bytes / the range's outgoing transfer rate)   (links overlap compute)
 *   latency  c + 2 (link latency + bytes / rate)   (the fill and drain of flushing kinds)
 * and the all-reduce of its gradients is overlapped with the backward: only
 * max(all-reduce - backward, last bucket) is exposed, once per iteration for the flushing
 * kinds and 2bw, once per microbatch round for pipedream. Memory: the simulator's own
 * functions (sim/memory.h: sim_memory_layers per block range, sim_memory_stage,
 * sim_memory_add and sim_memory_close) with the planner's counts of weight versions,
 * buffer slots and staged gradients (a closed form of the schedule's warmup; chunked
 * schedules take theirs from the generated schedule).
 *
 * The dynamic program runs over suffixes: V(b, u) is the best way to place blocks b.. on
 * units u.. (trailing units may stay idle). A first pass minimises the slowest period; then,
 * for a few thresholds above that optimum, a second pass minimises the summed latency (the
 * fill) among partitions whose every period stays under the threshold. The priced
 * candidates go to the simulator (native.c). */
#include "planner/native_impl.h"

#include "core/schedule.h"
#include "sim/cost.h"   /* sim_cross_bytes */
#include "sim/memory.h" /* sim_memory_optimizer_mul */

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* --- the model ------------------------------------------------------------------------- */

/* A schedule's structure as its memory depends on it: the worker and buffer slots of each
 * stage, and how many gradients each pair can have in flight; for one-stage-per-rank
 * kinds also each stage's weight versions and staged gradients (its first replica's). The
 * schedule is laid out as the simulator lays out the plan's (schedule_from_plan: with the
 * stages' costs, which move where the receives land, so the slots depend on the
 * partition). */
typedef struct nm_sched_memo {
    sched_kind kind;
    int p, nst, M;    /* p == 0: unused; -1: the schedule could not be built */
    int rc;           /* recomputation (its forward adds to the costs) */
    int *b0;          /* [nst + 1] the partition's block boundaries */
    int *ur;          /* [2 nst] each stage's first unit and units */
    int *worker;      /* [nst] (its first replica's) */
    int *slots;       /* [nst] schedule_slots of the stage on its worker */
    int *bound;       /* chunked: [p x p] schedule_send_bound of gradients */
    int *ver;         /* one stage per rank: [nst] schedule_inflight's versions */
    int *staged;      /* one stage per rank: [2 nworkers] per replica (the stages' in
                         turn) its slots and the gradients its worker can have staged
                         (schedule_send_bound summed over its peers) */
} nm_sched_memo;

static void memo_clear(nm_sched_memo *e)
{
    free(e->b0);
    free(e->ur);
    free(e->worker);
    free(e->slots);
    free(e->bound);
    free(e->ver);
    free(e->staged);
    memset(e, 0, sizeof *e);
}

/* 1 when memo entry e is the schedule of partition pt (p ranks) under s. */
static int memo_is(const nm_sched_memo *e, const nm_setting *s, const nm_part *pt, int p)
{
    if (!e->p || e->kind != s->kind || abs(e->p) != p || e->nst != pt->nst || e->M != s->M ||
        e->rc != s->recompute)
        return 0;
    for (int i = 0; i < pt->nst; i++)
        if (e->b0[i] != pt->st[i].b0 || e->ur[2 * i] != pt->st[i].u ||
            e->ur[2 * i + 1] != pt->st[i].r)
            return 0;
    return e->b0[pt->nst] == pt->st[pt->nst - 1].b1;
}

/* Iterations of the schedule a one-stage-per-rank plan's counts are read from: as the
 * planner's scoring simulation lays out the flushing kinds (one is not enough: a stage's
 * staged gradients and slots can peak across an iteration's boundary). */
#define NM_IR_ITERATIONS 3

/* The schedule of partition pt (p ranks) under s: generated as schedule_from_plan
 * generates nm_plan's plan of it (the stages' costs from schedule_plan_costs over a view
 * of that plan: the layers and devices, nothing copied); chunked, one iteration, else
 * NM_IR_ITERATIONS with the stages' replicas. NULL with err. */
static schedule *memo_schedule(const nm_model *m, const nm_setting *s, const nm_part *pt,
                               int p, plumb_err *err)
{
    plan_stage st[NM_MAX_STAGES];
    plan view;
    const int chunked = sched_kind_chunked(s->kind);
    memset(&view, 0, sizeof view);
    view.prof = (profile *)m->p; /* read only: schedule_plan_costs reads it */
    view.clus = (cluster *)m->c;
    view.nstages = pt->nst;
    view.stages = st;
    view.recompute = s->recompute;
    view.schedule = s->kind;
    view.chunks = chunked ? pt->nst / p : 1;
    view.microbatches = s->M;
    for (int i = 0; i < pt->nst; i++) {
        st[i] = (plan_stage){.first_layer = m->bfirst[pt->st[i].b0],
                             .last_layer = m->bfirst[pt->st[i].b1] - 1,
                             .replicas = chunked ? 1 : pt->st[i].r * m->g,
                             .devices = &m->order[pt->st[i].u * m->g]};
    }
    if (!chunked) return schedule_from_plan(&view, NM_IR_ITERATIONS, err);
    double cost[3 * NM_MAX_STAGES];
    sched_spec sp = {s->kind, p, pt->nst, pt->nst / p, s->M, 1, NULL, NULL};
    return schedule_generate_costed(&sp, schedule_plan_costs(&view, cost) ? NULL : cost, err);
}

/* Fills e's counts from its schedule sc: per stage its first replica's worker and slots;
 * chunked, the gradients each pair of ranks can have in flight (e->bound, p x p); one
 * stage per rank, the stage's versions (schedule_inflight) and per replica its slots and
 * the gradients its worker can have staged toward all its peers. 0, or -1 (out of memory,
 * or the IR refused). */
static int memo_fill(nm_sched_memo *e, const schedule *sc, int p)
{
    plumb_err err;
    const int nst = e->nst, nw = sc->nworkers;
    e->worker = malloc((size_t)nst * sizeof *e->worker);
    e->slots = malloc((size_t)nst * sizeof *e->slots);
    if (!e->worker || !e->slots) return -1;
    for (int i = 0; i < nst; i++) {
        e->worker[i] = sc->stage_workers[sc->stage_first[i]];
        e->slots[i] = schedule_slots(sc, e->worker[i], i);
    }
    if (sched_kind_chunked(e->kind)) {
        e->bound = malloc((size_t)p * p * sizeof *e->bound);
        return e->bound && !schedule_send_bound(sc, 1u << ACT_SEND_B, e->bound, &err) ? 0 : -1;
    }
    int *bound = malloc((size_t)nw * nw * sizeof *bound);
    e->ver = malloc((size_t)nst * sizeof *e->ver);
    e->staged = calloc(2 * (size_t)nw, sizeof *e->staged);
    /* one version wherever the kind keeps one (schedule_inflight's replay is skipped) */
    const int one = sched_traits_of(e->kind)->versions == 1;
    for (int i = 0; one && e->ver && i < nst; i++) e->ver[i] = 1;
    int rc = !bound || !e->ver || !e->staged ||
             schedule_send_bound(sc, 1u << ACT_SEND_B, bound, &err) ||
             (!one && schedule_inflight(sc, NULL, e->ver, &err));
    for (int i = 0, q = 0; i < nst && !rc; i++)
        for (int j = 0; j < sc->replicas[i] && q < nw; j++, q++) {
            const int w = sc->stage_workers[sc->stage_first[i] + j];
            e->staged[2 * q] = schedule_slots(sc, w, i);
            for (int to = 0; to < nw; to++) e->staged[2 * q + 1] += bound[w * nw + to];
        }
    free(bound);
    return rc ? -1 : 0;
}

/* The memo of partition pt (p ranks: the stages when one per rank) under s in m, built on
 * first use (the oldest entry makes room). NULL when the schedule cannot be built or
 * memory runs out. */
static const nm_sched_memo *memo_get(const nm_model *m, const nm_setting *s, const nm_part *pt,
                                     int p)
{
    if (!m->memo || s->M < 1) return NULL;
    const int nst = pt->nst;
    int slot = 0;
    for (int i = 0; i < NM_MEMO; i++) {
        nm_sched_memo *e = &m->memo[i];
        if (memo_is(e, s, pt, p)) return e->p > 0 ? e : NULL;
        if (!e->p) slot = i;
    }
    if (m->memo[slot].p) { /* full: shift out the oldest */
        memo_clear(&m->memo[0]);
        memmove(&m->memo[0], &m->memo[1], (NM_MEMO - 1) * sizeof m->memo[0]);
        memset(&m->memo[NM_MEMO - 1], 0, sizeof m->memo[0]);
        slot = NM_MEMO - 1;
    }
    nm_sched_memo *e = &m->memo[slot];
    *e = (nm_sched_memo){.kind = s->kind, .p = -p, .nst = nst, .M = s->M, .rc = s->recompute};
    plumb_err err;
    e->b0 = malloc(((size_t)nst + 1) * sizeof *e->b0);
    e->ur = malloc(2 * (size_t)nst * sizeof *e->ur);
    if (!e->b0 || !e->ur) {
        memo_clear(e);
        return NULL; /* the entry stays unused */
    }
    for (int i = 0; i < nst; i++) {
        e->b0[i] = pt->st[i].b0;
        e->ur[2 * i] = pt->st[i].u;
        e->ur[2 * i + 1] = pt->st[i].r;
    }
    e->b0[nst] = pt->st[nst - 1].b1;
    schedule *sc = memo_schedule(m, s, pt, p, &err);
    int rc = !sc || memo_fill(e, sc, p);
    schedule_free(sc);
    if (rc) {
        free(e->worker), free(e->slots), free(e->bound), free(e->ver), free(e->staged);
        e->worker = e->slots = e->bound = e->ver = e->staged = NULL;
        return NULL; /* remembered as unbuildable (p < 0) */
    }
    e->p = p;
    return e;
}

static struct nm_dp_memo *kept_new(void); /* the programs solved (nm_partitions) */

void nm_model_free(nm_model *m)
{
    if (!m) return;
    for (int i = 0; m->memo && i < NM_MEMO; i++) memo_clear(&m->memo[i]);
    free(m->memo);
    free(m->kept);
    free(m->order);
    free(m->bfirst);
    free(m->cF);
    free(m->cB);
    free(m->cS);
    free(m->cG);
    free(m->cP);
    free(m->cut);
    free(m->lay);
    free(m->rg);
    memset(m, 0, sizeof *m);
}

/* Block cuts: near each equal-work point, the boundary in a window of +-h layers that the
 * fewest bytes cross (ties: the closest). Fills bfirst and returns the block count. */
/* 1 when no stage may end after layer i: an Input layer (PipeDream's data-loading node)
 * stays with the layer that consumes it. */
static int no_cut_after(const profile *p, int i)
{
    return p->layers[i].kind && !strcmp(p->layers[i].kind, "Input");
}

static int make_blocks(const profile *p, const double *cross, int *bfirst)
{
    int n = p->nlayers;
    if (n <= NM_MAX_BLOCKS) {
        int nb = 0;
        bfirst[nb++] = 0;
        for (int i = 0; i + 1 < n; i++)
            if (!no_cut_after(p, i)) bfirst[nb++] = i + 1;
        bfirst[nb] = n;
        return nb;
    }
    double total = 0;
    for (int i = 0; i < n; i++)
        total += profile_layer_forward_ms(&p->layers[i]) + profile_layer_backward_ms(&p->layers[i]);
    int nb = 0, h = n / (2 * NM_MAX_BLOCKS) > 1 ? n / (2 * NM_MAX_BLOCKS) : 1, prev = -1;
    bfirst[nb++] = 0;
    double acc = 0;
    int x = 0;
    for (int k = 1; k < NM_MAX_BLOCKS; k++) {
        double target = total * k / NM_MAX_BLOCKS;
        while (x < n - 1 && acc + profile_layer_forward_ms(&p->layers[x]) +
                                    profile_layer_backward_ms(&p->layers[x]) < target) {
            acc += profile_layer_forward_ms(&p->layers[x]) + profile_layer_backward_ms(&p->layers[x]);
            x++;
        }
        /* boundary after layer i, i in [x - h, x + h], i > prev, i <= n - 2 */
        int best = -1;
        for (int i = x - h; i <= x + h; i++) {
            if (i <= prev || i < 0 || i > n - 2 || no_cut_after(p, i)) continue;
            if (best < 0 || cross[i] < cross[best] ||
                (cross[i] == cross[best] && abs(i - x) < abs(best - x)))
                best = i;
        }
        if (best < 0) continue;
        bfirst[nb++] = best + 1;
        prev = best;
    }
    bfirst[nb] = n;
    return nb;
}

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

int nm_orders(const cluster *c, int ndev, int *orders)
{
    for (int d = 0; d < ndev; d++) orders[d] = d;
    int per = c->nlevels > 0 && c->levels[0].count > 0 ? c->levels[0].count : 1;
    int ns = (ndev + per - 1) / per, hetero = 0;
    for (int s = 1; s < ns && s < c->nservers; s++)
        if (c->server_type[s] != c->server_type[0]) hetero = 1;
    if (!hetero) return 1;
    int k = 0;
    for (int s = ns - 1; s >= 0; s--)
        for (int d = s * per; d < (s + 1) * per && d < ndev; d++) orders[ndev + k++] = d;
    return 2;
}

/* Bytes/s that the devices [d0, d1) of the order send at once over level L at `rate`
 * each: every device has its own link inside a server; across servers, each server's
 * traffic shares its egress port. */
static double range_total(const nm_model *m, const cluster *c, int d0, int d1, int L,
                          double rate, int ident)
{
    double total = rate * (d1 - d0);
    if (L > 0) {
        int nserv = 0, last = -1, per = c->levels[0].count;
        double eg = INFINITY;
        if (ident && per > 0) { /* the order is the devices': servers d0 / per .. */
            nserv = (d1 - 1) / per - d0 / per + 1;
        } else {
            for (int d = d0; d < d1; d++) {
                int s = cluster_server_of(c, m->order[d]);
                if (s != last) nserv++;
                last = s;
            }
        }
        for (int l = 1; l <= L; l++)
            if (m->net.egress[l] < eg) eg = m->net.egress[l];
        if (eg * nserv < total) total = eg * nserv;
    }
    return total;
}

int nm_model_build(nm_model *m, const profile *p, const cluster *c, int ndev,
                   const int *order, double mem_limit, plumb_err *err)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->c = c;
    m->ndev = ndev;
    m->g = (ndev + NM_MAX_UNITS - 1) / NM_MAX_UNITS;
    m->U = ndev / m->g;
    int n = p->nlayers, U = m->U;
    double *cross = sim_cross_bytes(p);
    m->order = malloc((size_t)ndev * sizeof *m->order);
    m->memo = calloc(NM_MEMO, sizeof *m->memo); /* NULL: chunked memory from warmup counts */
    m->kept = kept_new(); /* NULL: every program solved again */
    m->bfirst = malloc(((size_t)n + 2) * sizeof *m->bfirst);
    m->rg = calloc((size_t)U * (U + 1), sizeof *m->rg);
    if (!cross || !m->order || !m->bfirst || !m->rg) goto oom;
    for (int d = 0; d < ndev; d++) m->order[d] = order ? order[d] : d;
    m->nb = make_blocks(p, cross, m->bfirst);
    int nb = m->nb;
    m->cF = calloc((size_t)nb + 1, sizeof(double));
    m->cB = calloc((size_t)nb + 1, sizeof(double));
    m->cS = calloc((size_t)nb + 1, sizeof(double));
    m->cG = calloc((size_t)nb + 1, sizeof(double));
    m->cP = calloc((size_t)nb + 1, sizeof(double));
    m->cut = calloc((size_t)nb + 1, sizeof(double));
    m->lay = malloc((size_t)nb * (nb + 1) * sizeof *m->lay);
    if (!m->cF || !m->cB || !m->cS || !m->cG || !m->cP || !m->cut || !m->lay) goto oom;
    for (int b = 0; b < nb; b++) {
        double f = 0, bw = 0, a = 0, pr = 0, gb = 0;
        for (int i = m->bfirst[b]; i < m->bfirst[b + 1]; i++) {
            const profile_layer *L = &p->layers[i];
            f += profile_layer_forward_ms(L);
            bw += profile_layer_backward_ms(L);
            /* as sim_memory_layers counts them: a chain's flatten holds nothing */
            a += (!p->nedges && !strcmp(L->kind, "flatten") ? 0 : L->activation_bytes) +
                 L->saved_bytes;
            gb += L->grad_buffer_bytes;
            pr += L->parameter_bytes;
            m->tied_total += L->tied_bytes;
        }
        m->cF[b + 1] = m->cF[b] + f;
        m->cB[b + 1] = m->cB[b] + bw;
        m->cS[b + 1] = m->cS[b] + a;
        m->cG[b + 1] = m->cG[b] + gb;
        m->cP[b + 1] = m->cP[b] + pr;
        m->cut[b] = b > 0 ? cross[m->bfirst[b] - 1] : 0;
    }
    m->cut[nb] = 0;
    /* what every block range holds, by the simulator's own function */
    for (int b0 = 0; b0 < nb; b0++)
        for (int b1 = b0 + 1; b1 <= nb; b1++)
            sim_memory_layers(p, cross, m->bfirst[b0], m->bfirst[b1] - 1, 0,
                              &m->lay[b0 * (nb + 1) + b1]);
    free(cross);
    cross = NULL;

    /* replica counts (units): 1..8, powers of two, whole servers, everything, and all
     * but 1..4 units (PipeDream's typical "15-1": one big replicated stage beside a few
     * small ones); none above the schedule's SCHED_MAX_REPLICAS per stage */
    int per = c->levels[0].count > 0 ? c->levels[0].count : 1;
    for (int r = 1; r <= U && m->nr < NM_MAX_UNITS; r++)
        if ((r <= 8 || is_pow2(r) || (r * m->g) % per == 0 || r >= U - 4) &&
            (r == 1 || r * m->g <= SCHED_MAX_REPLICAS))
            m->rlist[m->nr++] = r;

    sim_net_from_cluster(&m->net, c, NULL);
    /* the ring over a range of consecutive devices depends only on where it starts in its
     * server group (the group of the next-to-outermost level) and on its length: rings the
     * identity order's earlier unit ranges priced are taken from them (1024 devices: 32
     * rings priced instead of 528) */
    int ident = 1, same[NM_MAX_UNITS];
    for (int d = 0; d < ndev && ident; d++) ident = m->order[d] == d;
    long long S = m->net.nlevels >= 2 ? m->net.gsize[m->net.nlevels - 2] : 1;
    for (int u = 0; u < U; u++) {
        same[u] = u;
        for (int v = 0; v < u && ident && same[u] == u; v++)
            if ((long long)v * m->g % S == (long long)u * m->g % S) same[u] = v;
    }
    for (int u = 0; u < U; u++) {
        double sp = INFINITY, cap = INFINITY;
        for (int r = 1; u + r <= U; r++) {
            nm_range *R = &m->rg[u * (U + 1) + r];
            int d0 = u * m->g, d1 = (u + r) * m->g; /* devices [d0, d1) of the order */
            for (int d = (u + r - 1) * m->g; d < d1; d++) {
                const device_type *t = cluster_device_type(c, m->order[d]);
                double s = t && t->speed > 0 ? t->speed : 1;
                double mc = t ? t->memory_bytes : 0;
                if (mem_limit > 0 && mem_limit < mc) mc = mem_limit;
                if (s < sp) sp = s;
                if (mc < cap) cap = mc;
            }
            R->speed = sp;
            R->cap = cap;
            {
                int s0 = cluster_server_of(c, m->order[d0]);
                int s1 = cluster_server_of(c, m->order[d1 - 1]);
                int a0 = d0 == 0 || cluster_server_of(c, m->order[d0 - 1]) != s0;
                int a1 = d1 == ndev || cluster_server_of(c, m->order[d1]) != s1;
                R->ok = s0 == s1 || a0 || a1;
            }
            int nd = d1 - d0;
            if (same[u] != u) {
                R->ar_a = m->rg[same[u] * (U + 1) + r].ar_a;
                R->ar_b = m->rg[same[u] * (U + 1) + r].ar_b;
            } else if (nd > 1) {
                sim_net_ring(&m->net, m->order + d0, nd, &R->ar_a, &R->ar_b);
            }
            double rate, lat;
            if (d0 > 0) {
                int L = sim_net_path(&m->net, m->order[d0 - 1], m->order[d1 - 1], &rate, &lat);
                R->in_total = range_total(m, c, d0, d1, L, rate, ident);
            }
            if (d1 < ndev) {
                /* microbatches go round-robin from every replica to the next stage: the
                 * transfers cross the outermost level between the range and its successor */
                int L = sim_net_path(&m->net, m->order[d0], m->order[d1], &rate, &lat);
                R->out_rate = rate;
                R->out_lat = lat;
                R->out_total = range_total(m, c, d0, d1, L, rate, ident);
            }
        }
    }
    return 0;
oom:
    free(cross);
    nm_model_free(m);
    return err_set(err, NULL, NULL, "out of memory");
}

/* --- pricing one stage ------------------------------------------------------------------ */

typedef struct nm_cost {
    double c, b;      /* compute and backward per microbatch on one replica */
    double per;       /* period */
    double comm;      /* seconds per microbatch of its busiest link (0: none) */
    double lat;       /* latency per microbatch through the stage and its output link */
    double arx;       /* exposed all-reduce */
    double mem;       /* bytes per device */
    double cap;
} nm_cost;

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* The input gradients a stage holding k microbatches (km per flush; 0: no flush) can have
 * on their way back to the stage before it, each in a staging buffer of the local
 * transport (schedule_send_bound): all of them under GPipe; else the previous stage's
 * k + 1 at most, since it holds one microbatch more. */
static int staged_grads(sched_kind kind, int k, int km)
{
    int g = sched_traits_of(kind)->hold == SCHED_HOLD_ALL ? k : k + 1;
    return km > 0 && g > km ? km : g;
}

/* The buffer slots (schedule_slots) of a stage holding k microbatches (km per flush; 0: no
 * flush): under 1F1B, PipeDream and 2BW a stage that receives posts the next RECV_F ahead
 * of the compute before it, so it holds one more (exact without replicas; the simulator
 * counts the rest); under GPipe and the zero-bubble kinds the k already cover it. */
static int held_slots(sched_kind kind, int k, int km, int receives)
{
    if (!receives || sched_traits_of(kind)->hold != SCHED_HOLD_1F1B)
        return k;
    return km > 0 && k + 1 > km ? km : k + 1;
}

/* Chunked schedules hold several stages per device, placed as the trait table says
 * (sched_kind_chunked, sched_kind_rank: interleaved stage i on rank i % p; the V kinds
 * ranks 0..p-1, then p-1..0). */

/* The all-reduce of P parameter bytes over range R of n devices (sim_net_allreduce_s's
 * ring, from R's coefficients). */
static double range_allreduce_s(const nm_range *R, int n, double P)
{
    return n > 1 && P > 0 ? R->ar_a * P + R->ar_b : 0;
}

/* How the plan nm_plan makes runs a stage of n replicas under s, for the memory model:
 * the plan's precision (fp32) and ZeRO stage (0), no checkpoints; the schedule's split
 * backward (the simulator looks for I actions in the generated lists: the kinds with
 * split_backward have them). */
static sim_mem_setting mem_setting(const nm_model *m, const nm_setting *s, int n)
{
    sim_mem_setting ms = {(double)s->mbsize / m->p->minibatch,
                          s->recompute ? RECOMPUTE_FULL : RECOMPUTE_NONE,
                          0,
                          sched_traits_of(s->kind)->split_backward,
                          0,
                          DEV_FP32,
                          0,
                          n,
                          s->opt,
                          DEV_FP32,
                          DEV_FP32};
    return ms;
}

/* The memory terms of blocks [b0, b1) on n replicas under s: the simulator's formula
 * (sim_memory_stage) over the simulator's sums of the range's layers. */
static void block_mem(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                      sim_stage_mem *t)
{
    sim_mem_setting ms = mem_setting(m, s, n);
    sim_memory_stage(&m->lay[b0 * (m->nb + 1) + b1], &ms, t);
}

/* What the closed form counts for a stage: its weight versions, buffer slots and staged
 * input gradients (the schedule's; docs/planner-native.md). */
typedef struct stage_counts {
    int ver, slots, staged;
} stage_counts;

/* The counts of a stage starting at block b0 on n devices, W devices from it to the end
 * of the pipeline, kzb the zero-bubble kinds' pipeline-wide warmup (0: unknown). */
static void count_stage(const nm_setting *s, int b0, int W, int n, int kzb, stage_counts *o)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    int k;
    switch (tr->hold) {
    case SCHED_HOLD_ALL: k = ceil_div(s->M, n); break;
    case SCHED_HOLD_1F1B:
        k = !tr->async && ceil_div(s->M, n) < ceil_div(W, n) ? ceil_div(s->M, n)
                                                              : ceil_div(W, n);
        break;
    case SCHED_HOLD_ZB: {
        /* every stage holds the first stage's warmup plus the deferred weight gradients:
         * the largest ceil(devices from a stage on / its replicas) of the pipeline (kzb),
         * at most its microbatches per flush; unknown (kzb 0): this stage's + 1 */
        int a = kzb > 0 ? kzb : ceil_div(W, n) + 1, b = ceil_div(s->M, n);
        k = a < b ? a : b;
        break;
    }
    default: k = ceil_div(W, n); break;
    }
    const int km = s->M > 0 ? ceil_div(s->M, n) : 0;
    /* a stage keeps no more versions than microbatches in flight (2bw's last stage: 1) */
    const int kw = ceil_div(W, n);
    o->ver = tr->versions > 0 ? (tr->versions < kw ? tr->versions : kw) : k;
    o->slots = held_slots(s->kind, k, km, b0 > 0);
    o->staged = staged_grads(s->kind, k, km);
}

/* The memory of the first device of a stage (blocks [b0, b1) on n devices) with counts
 * cn, capacity cap: the simulator's terms (block_mem) summed as the simulator sums them
 * (sim_memory_add: the all-reduce scratch of a replicated stage's fullest replica too), the
 * staging of the gradients it sends back (the input's bytes each). */
static void stage_memory(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                         const stage_counts *cn, double cap, sim_memory *out)
{
    sim_stage_mem t;
    block_mem(m, s, b0, b1, n, &t);
    sim_memory_acc a;
    memset(&a, 0, sizeof a);
    sim_memory_add(&a, &t, cn->ver, cn->slots, sim_allreduce_scratch_max(t.gradients, n), 0);
    double in = b0 > 0 ? m->cut[b0] * ((double)s->mbsize / m->p->minibatch) : 0;
    sim_memory_close(&a, cn->staged * in, cap, out);
}

/* W: devices of this stage and every later one; given: the stage's memory (its fullest
 * device's), or NULL for the closed form's counts (count_stage). Returns 1 when it fits
 * memory. */
static int stage_cost_k(const nm_model *m, const nm_setting *s, int b0, int b1, int u,
                        int r, int W, int kzb, const sim_memory *given, nm_cost *o)
{
    const nm_range *R = &m->rg[u * (m->U + 1) + r];
    int n = r * m->g;
    double scale = (double)s->mbsize / m->p->minibatch * 1e-3 / R->speed;
    double F = (m->cF[b1] - m->cF[b0]) * scale, B = (m->cB[b1] - m->cB[b0]) * scale;
    if (s->recompute) B += F;
    if (b0 == 0 || b1 == m->nb) /* the batch gather, priced as the simulator does */
        F += sim_cost_gather_s(m->p, s->mbsize) / R->speed;
    double c = F + B, P = m->lay[b0 * (m->nb + 1) + b1].params;
    double ar = range_allreduce_s(R, n, P), arx = 0;
    if (ar > 0) {
        double tail = ar * (NM_BUCKET_BYTES < P ? NM_BUCKET_BYTES / P : 1);
        arx = ar - B > tail ? ar - B : tail;
    }
    double bscale = (double)s->mbsize / m->p->minibatch;
    double out = b1 < m->nb ? m->cut[b1] * bscale : 0;
    double comm = 0, lat = c;
    if (out > 0) {
        if (!(R->out_total > 0)) return 0; /* no next unit */
        comm = out / R->out_total;
        lat += 2 * (R->out_lat + out / R->out_rate);
    }
    double in = b0 > 0 ? m->cut[b0] * bscale : 0;
    if (in > 0 && R->in_total > 0 && in / R->in_total > comm) comm = in / R->in_total;
    const sched_traits *tr = sched_traits_of(s->kind);
    double per = tr->step_each_round ? (c + arx) / n : c / n;
    if (comm > per) per = comm;
    sim_memory mm;
    if (given) {
        mm = *given;
    } else {
        stage_counts cn;
        count_stage(s, b0, W, n, kzb, &cn);
        stage_memory(m, s, b0, b1, n, &cn, R->cap, &mm);
    }
    double mem = mm.total;
    o->c = c;
    o->b = B;
    o->per = per;
    o->comm = comm;
    o->lat = lat;
    o->arx = arx;
    o->mem = mem;
    o->cap = R->cap;
    if (tr->mb_per_replica && s->M > 0 && s->M % n)
        return 0; /* a fixed microbatch count must split evenly over the replicas */
    return mem <= R->cap;
}

static int stage_cost(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                      int W, nm_cost *o)
{
    return stage_cost_k(m, s, b0, b1, u, r, W, 0, NULL, o);
}

void nm_stage_terms(const nm_model *m, const nm_setting *s, const nm_stage *st, nm_terms *out)
{
    const nm_range *R = &m->rg[st->u * (m->U + 1) + st->r];
    const double bscale = (double)s->mbsize / m->p->minibatch;
    const double P = m->lay[st->b0 * (m->nb + 1) + st->b1].params;
    out->in_bytes = st->b0 > 0 ? m->cut[st->b0] * bscale : 0;
    out->out_bytes = st->b1 < m->nb ? m->cut[st->b1] * bscale : 0;
    out->xfer_s = out->out_bytes > 0 && R->out_rate > 0
                      ? R->out_lat + out->out_bytes / R->out_rate
                      : 0;
    out->allreduce_s = range_allreduce_s(R, st->r * m->g, P);
    block_mem(m, s, st->b0, st->b1, st->r * m->g, &out->mem);
}

/* The server of the d-th device of stage st. */
static int server_at(const nm_model *m, const nm_stage *st, int d)
{
    return cluster_server_of(m->c, m->order[st->u * m->g + d]);
}

/* Seconds per microbatch that each server's port spends on the activations (lf) and the
 * gradients (lb) of each cut leaving the server: lf[sv * (nst - 1) + i] for cut i (stage
 * i to i + 1), likewise lb. Microbatches go round-robin, so a cut's bytes spread evenly
 * over the pairs of sending and receiving replicas: a server holding a of the na senders
 * and b of the nb receivers sends x a (nb - b) / (na nb) forward and x b (na - a) /
 * (na nb) back per microbatch of x bytes. Each server is counted once per cut (its first
 * device of either stage in the order adds it). 0, or -1 out of memory. */
static int port_loads(const nm_model *m, const nm_setting *s, const nm_part *pt, double eg,
                      double *lf, double *lb)
{
    const cluster *c = m->c;
    const int nc = pt->nst - 1;
    int *ca = calloc((size_t)c->nservers, sizeof *ca), *cb = calloc((size_t)c->nservers, sizeof *cb);
    if (!ca || !cb) {
        free(ca), free(cb);
        return -1;
    }
    double bscale = (double)s->mbsize / m->p->minibatch;
    for (int i = 0; i < nc; i++) {
        const nm_stage *A = &pt->st[i], *B = &pt->st[i + 1];
        const double x = m->cut[A->b1] * bscale;
        const int na = A->r * m->g, nb = B->r * m->g, n = na + nb;
        if (x <= 0) continue;
        for (int d = 0; d < na; d++) ca[server_at(m, A, d)]++;
        for (int d = 0; d < nb; d++) cb[server_at(m, B, d)]++;
        for (int d = 0; d < n; d++) {
            const int sv = d < na ? server_at(m, A, d) : server_at(m, B, d - na);
            if (ca[sv] < 0) continue; /* counted */
            lf[sv * nc + i] = x * ((double)ca[sv] * (nb - cb[sv])) / ((double)na * nb) / eg;
            lb[sv * nc + i] = x * ((double)cb[sv] * (na - ca[sv])) / ((double)na * nb) / eg;
            ca[sv] = -1;
        }
        for (int d = 0; d < n; d++) {
            const int sv = d < na ? server_at(m, A, d) : server_at(m, B, d - na);
            ca[sv] = cb[sv] = 0;
        }
    }
    free(ca), free(cb);
    return 0;
}

/* The egress rate of a server's port (bytes/s), or 0 when no port is shared. */
static double port_rate(const nm_model *m)
{
    const cluster *c = m->c;
    if (c->nlevels < 2 || c->nservers < 2) return 0;
    return m->net.egress[1] > m->net.bw[1] ? m->net.egress[1] : m->net.bw[1];
}

/* Seconds per microbatch that the busiest server port spends on activations and gradients
 * leaving its server, all stages together (port_loads; the program prices stages one by
 * one, this is where stages sharing a server's port meet). 0 when no port is shared or
 * out of memory. */
static double port_time(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    const double eg = port_rate(m);
    const int nc = pt->nst - 1, ns = m->c->nservers;
    if (!(eg > 0) || nc < 1) return 0;
    double *lf = calloc((size_t)ns * nc, sizeof *lf), *lb = calloc((size_t)ns * nc, sizeof *lb);
    double worst = 0;
    if (lf && lb && !port_loads(m, s, pt, eg, lf, lb))
        for (int sv = 0; sv < ns; sv++) {
            double t = 0;
            for (int i = 0; i < nc; i++) t += lf[sv * nc + i] + lb[sv * nc + i];
            if (t > worst) worst = t;
        }
    free(lf), free(lb);
    return worst;
}

/* The least a flushed iteration of M microbatches takes for its servers' ports
 * (docs/planner-native.md, section 8): per server, its M microbatches of traffic
 * (port_loads) between the first microbatch's way to its first send (head) and the way
 * from its last send to the end (tail), and the gaps the order forces on it. A stage runs
 * only w = its warmup forwards + 1 per replica (gpipe: all M) before its first backward,
 * so a server's port carries at most those activations before the first microbatch's
 * round trip brings a gradient (or a later forward) to it; and after the last activation
 * only the c = warmup + 1 backwards per replica that follow each replica's last forward.
 * Stage s computes f[s] + b[s] a microbatch, x[s] seconds per transfer to stage s + 1;
 * kind the schedule (hold_all: gpipe's w and c are M). 0 when no port is shared or out of
 * memory. */
static double port_bound(const nm_model *m, const nm_setting *s, const nm_part *pt,
                         const double *f, const double *b, const double *x)
{
    const double eg = port_rate(m);
    const int S = pt->nst, nc = S - 1, ns = m->c->nservers, M = s->M;
    if (!(eg > 0) || nc < 1 || M < 1) return 0;
    const int hold_all = sched_traits_of(s->kind)->hold == SCHED_HOLD_ALL;
    double *lf = calloc((size_t)ns * nc, sizeof *lf), *lb = calloc((size_t)ns * nc, sizeof *lb);
    double fend[NM_MAX_STAGES], bend[NM_MAX_STAGES], one[NM_MAX_STAGES];
    int warm[NM_MAX_STAGES], W = 0;
    double worst = 0;
    if (!lf || !lb || port_loads(m, s, pt, eg, lf, lb)) goto done;
    /* the first microbatch alone: its forward on stage i ends at fend[i], its backward on
     * stage i at bend[i]; one[i] a whole microbatch of cut i on one port */
    for (int i = 0; i < S; i++) W += pt->st[i].r * m->g;
    for (int i = 0; i < S; i++) {
        const int r = pt->st[i].r * m->g;
        fend[i] = (i > 0 ? fend[i - 1] + x[i - 1] : 0) + f[i];
        int k = hold_all ? M : r * ((W + r - 1) / r); /* (warmup + 1) x replicas */
        warm[i] = k < M ? k : M;
        W -= r;
        one[i] = i < nc ? m->cut[pt->st[i].b1] * ((double)s->mbsize / m->p->minibatch) / eg : 0;
    }
    for (int i = S - 1; i >= 0; i--) bend[i] = (i < nc ? bend[i + 1] + x[i] : fend[S - 1]) + b[i];
    for (int sv = 0; sv < ns; sv++) {
        double total = 0, Wf = 0, Wd = 0, head = INFINITY, tail = INFINITY;
        double s2 = INFINITY, e2 = INFINITY;
        for (int i = 0; i < nc; i++) {
            const double F = lf[sv * nc + i], B = lb[sv * nc + i];
            total += M * (F + B);
            if (F > 0) { /* activations: sent as stage i's forwards end */
                const double t = bend[0] - fend[i] - one[i];
                if (fend[i] < head) head = fend[i];
                if (t < tail) tail = t;
                if (t < e2) e2 = t; /* the last activation, then its whole way */
                Wf += F * warm[i];
                if (warm[i] < M && bend[i] + f[i] < s2) s2 = bend[i] + f[i];
            }
            if (B > 0) { /* gradients: sent as stage i + 1's backwards end */
                const double t = bend[0] - bend[i + 1] - one[i];
                if (bend[i + 1] < head) head = bend[i + 1];
                if (bend[i + 1] < s2) s2 = bend[i + 1];
                if (t < tail) tail = t;
                Wd += B * warm[i + 1];
                /* a gradient before stage i + 1's last forward: that forward's way on */
                const double tn = bend[0] - fend[i + 1] + f[i + 1] - one[i];
                if (warm[i + 1] < M && tn < e2) e2 = tn;
            }
        }
        if (!(total > 0)) continue;
        double t;
        if (Wf + Wd > total) {
            t = head + total + tail; /* few microbatches: no steady part */
        } else {
            const double start = head + Wf > s2 || s2 == INFINITY ? head + Wf : s2;
            const double end = Wd + tail > e2 || e2 == INFINITY ? Wd + tail : e2;
            t = start + (total - Wf - Wd) + end;
        }
        if (t > worst) worst = t;
    }
done:
    free(lf), free(lb);
    return worst;
}

/* The memory of each rank of a chunked partition (out[pt->ranks]): per stage its terms
 * (block_mem, one replica) with one weight version and its buffer slots (schedule_slots
 * of the generated schedule, each stage's own most, as the executor allocates them), and
 * per peer the staging of the gradients sent to it (schedule_send_bound x the largest:
 * stage i sends them to stage i - 1's worker), summed as the simulator sums them. When
 * the schedule cannot be built, the slots of rank r are its warmup count, 2 (p - r - 1) +
 * (v - 1) p + 1 at most M v, shared by its v stages, and no staging. */
static void chunked_memory(const nm_model *m, const nm_setting *s, const nm_part *pt,
                           sim_memory *out)
{
    const int p = pt->ranks > 0 ? pt->ranks : 1, v = pt->nst / p;
    const nm_sched_memo *e = p <= NM_MAX_UNITS ? memo_get(m, s, pt, p) : NULL;
    const double bscale = (double)s->mbsize / m->p->minibatch;
    sim_memory_acc acc[NM_MAX_UNITS];
    double big[NM_MAX_UNITS * NM_MAX_UNITS] = {0}; /* [p x p] largest gradient per pair */
    memset(acc, 0, sizeof acc);
    for (int i = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        const int rk = sched_kind_rank(s->kind, i, p);
        sim_stage_mem t;
        block_mem(m, s, st->b0, st->b1, 1, &t);
        double slots;
        if (e) {
            slots = e->slots[i];
            double in = st->b0 > 0 ? m->cut[st->b0] * bscale : 0;
            double *b = &big[e->worker[i] * p + e->worker[i > 0 ? i - 1 : 0]];
            if (i > 0 && in > *b) *b = in;
        } else {
            int k = (p - rk - 1) * 2 + (v - 1) * p + 1;
            if (k > s->M * v) k = s->M * v;
            slots = (double)k / v;
        }
        sim_memory_add(&acc[rk], &t, 1, slots, 0, 0);
    }
    for (int w = 0; w < p; w++) {
        double staging = 0;
        for (int to = 0; e && to < p; to++) staging += e->bound[w * p + to] * big[w * p + to];
        sim_memory_close(&acc[w], staging, m->rg[pt->st[w].u * (m->U + 1) + 1].cap, &out[w]);
    }
}

/* The zero-bubble kinds' warmup of a pipeline: the largest ceil(devices from a stage on /
 * its replicas). */
static int pipeline_kzb(const nm_model *m, const nm_part *pt)
{
    int W = 0, kzb = 0;
    for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
    for (int i = 0, w = W; i < pt->nst; i++) {
        int k = ceil_div(w, pt->st[i].r * m->g);
        if (k > kzb) kzb = k;
        w -= pt->st[i].r * m->g;
    }
    return kzb;
}

/* 1 when the closed form's counts may differ from the schedule's for pt under s (a
 * one-stage-per-rank kind): any pipeline of two stages or more. A replicated stage's
 * counts depend on the stages before it as well; zb-h1's on its deferred weight
 * gradients; and a straight pipeline's buffer slots on the stages' costs: the lowering
 * posts a RECV_F when the stage before produces the data, so a stage holds the one slot
 * more that the closed form counts for every receiver only when its input comes ahead of
 * its previous backward (alexnet on cluster-a-4x4, 12 one-device stages at random cuts:
 * the closed form a slot over on most devices, up to 46 % of a device's total). The
 * schedule owns that rule; the estimate of a complete plan reads it there, the dynamic
 * program keeps the closed form (a slot over where they differ). */
static int counts_need_ir(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    (void)m, (void)s;
    return pt->nst >= 2; /* one stage: data parallelism, nothing received or sent back */
}

/* The memory of the fullest replica (the first of the largest total) of stage i of the
 * complete partition pt under s, its replicas' counts from e (memo_fill; q0: its first
 * replica's index there), capacity cap: per replica the stage's versions, its slots and
 * staged gradients and its all-reduce scratch, as the simulator sums a device's. */
static void stage_memory_ir(const nm_model *m, const nm_setting *s, const nm_stage *st,
                            const nm_sched_memo *e, int i, int q0, double cap, sim_memory *out)
{
    const int n = st->r * m->g;
    sim_stage_mem t;
    block_mem(m, s, st->b0, st->b1, n, &t);
    const double in = st->b0 > 0 ? m->cut[st->b0] * ((double)s->mbsize / m->p->minibatch) : 0;
    for (int j = 0; j < n; j++) {
        const int *c = &e->staged[2 * (q0 + j)];
        sim_memory_acc a;
        sim_memory mm;
        memset(&a, 0, sizeof a);
        sim_memory_add(&a, &t, e->ver[i], c[0], sim_allreduce_scratch(t.gradients, n, j), 0);
        sim_memory_close(&a, c[1] * in, cap, &mm);
        if (j == 0 || mm.total > out->total) *out = mm;
    }
}

/* The memory of each stage's fullest device of the complete one-stage-per-rank partition
 * pt under s into out[pt->nst]: exact 1, with the schedule's counts (the plan's IR,
 * memo_get) where the closed form's may differ (counts_need_ir); else (exact 0, or the
 * schedule cannot be built) with the closed form's (count_stage: the first replica, the
 * fullest replica's all-reduce scratch). */
static void part_memory(const nm_model *m, const nm_setting *s, const nm_part *pt, int exact,
                        sim_memory *out)
{
    const nm_sched_memo *e = exact && counts_need_ir(m, s, pt) ? memo_get(m, s, pt, pt->nst)
                                                               : NULL;
    int W = 0, kzb = pipeline_kzb(m, pt);
    for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
    for (int i = 0, q = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        const int n = st->r * m->g;
        const double cap = m->rg[st->u * (m->U + 1) + st->r].cap;
        if (e) {
            stage_memory_ir(m, s, st, e, i, q, cap, &out[i]);
        } else {
            stage_counts cn;
            count_stage(s, st->b0, W, n, kzb, &cn);
            stage_memory(m, s, st->b0, st->b1, n, &cn, cap, &out[i]);
        }
        W -= n;
        q += n;
    }
}

int nm_part_memory(const nm_model *m, const nm_setting *s, const nm_part *pt,
                   sim_memory *out)
{
    if (sched_kind_chunked(s->kind)) {
        chunked_memory(m, s, pt, out);
        return pt->ranks;
    }
    part_memory(m, s, pt, 1, out);
    return pt->nst;
}

/* How late each of stage 0's first sends arrives (late[g] for replica g of stage 0, na
 * of them): every replica of stage 0 runs its first forward at once, and those whose
 * receiver (stage 1's replica g % r1 for replica g) is in another server queue at their
 * server's port in replica order, lanes at a time (sim_net_lanes), each bytes / rate of
 * its path: the j-th such send of a server (from 1) (ceil(j / lanes) - 1) transfers late.
 * Returns a new array (the caller frees it), or NULL when no port is shared or out of
 * memory (none late). */
static double *first_late(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    const cluster *c = m->c;
    if (pt->nst < 2 || c->nlevels < 2 || c->nservers < 2) return NULL;
    const nm_stage *A = &pt->st[0], *B = &pt->st[1];
    const double bytes = m->cut[A->b1] * ((double)s->mbsize / m->p->minibatch);
    const int na = A->r * m->g, nb = B->r * m->g;
    if (bytes <= 0) return NULL;
    int *k = calloc((size_t)c->nservers, sizeof *k);
    double *late = calloc((size_t)na, sizeof *late);
    int any = 0;
    if (!k || !late) goto done;
    for (int g = 0; g < na; g++) {
        const int a = m->order[A->u * m->g + g], b = m->order[B->u * m->g + g % nb];
        const int sv = cluster_server_of(c, a);
        double rate, lat;
        int L = sim_net_path(&m->net, a, b, &rate, &lat);
        if (L < 1 || !(rate > 0)) continue; /* inside the server */
        const int lanes = sim_net_lanes(&m->net, L);
        k[sv]++;
        late[g] = ((k[sv] + lanes - 1) / lanes - 1) * (bytes / rate);
        any |= late[g] > 0;
    }
done:
    free(k);
    if (!any) {
        free(late);
        return NULL;
    }
    return late;
}

/* nm_price, with the schedule's counts where the closed form's may differ (exact 1), or
 * the closed form's only (0). */
static void price(const nm_model *m, const nm_setting *s, nm_part *pt, int exact)
{
    double per = 0, sumlat = 0, botlat = 0, ar = 0, peak = 0, cap = INFINITY;
    int fits = 1, memfits = 1;
    if (sched_kind_chunked(s->kind)) {
        /* per device: its chunks' compute; links per stage */
        int p = pt->ranks, v = pt->nst / (p > 0 ? p : 1);
        double devper[NM_MAX_UNITS] = {0};
        for (int i = 0; i < pt->nst; i++) {
            const nm_stage *st = &pt->st[i];
            nm_cost o;
            nm_setting one = *s;
            one.kind = SCHED_1F1B_FLUSH;
            stage_cost(m, &one, st->b0, st->b1, st->u, 1, m->ndev, &o);
            int rk = sched_kind_rank(s->kind, i, p);
            devper[rk] += o.c;
            double comm = i + 1 < pt->nst && o.lat > o.c ? (o.lat - o.c) / 2 : 0;
            if (comm > per) per = comm;
            sumlat += o.lat - o.c;
            if (o.cap < cap) cap = o.cap;
        }
        sim_memory mem[NM_MAX_UNITS];
        chunked_memory(m, s, pt, mem);
        double dmax = 0;
        for (int rk = 0; rk < p; rk++) {
            if (devper[rk] > dmax) dmax = devper[rk];
            if (mem[rk].total > peak) peak = mem[rk].total;
            if (!mem[rk].fits) memfits = 0;
        }
        if (dmax > per) per = dmax;
        pt->period = per;
        pt->fill = (p - 1) * dmax / v + sumlat;
        pt->ar = 0;
    } else {
        int W = 0, kzb = pipeline_kzb(m, pt), reps[NM_MAX_STAGES];
        double f[NM_MAX_STAGES], b[NM_MAX_STAGES], x[NM_MAX_STAGES], arx[NM_MAX_STAGES];
        double comm = 0;
        sim_memory mem[NM_MAX_STAGES];
        part_memory(m, s, pt, exact, mem);
        for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
        for (int i = 0; i < pt->nst; i++) {
            const nm_stage *st = &pt->st[i];
            nm_cost o = {0};
            if (!stage_cost_k(m, s, st->b0, st->b1, st->u, st->r, W, kzb, &mem[i], &o)) {
                if (o.mem > o.cap) memfits = 0;
                else fits = 0; /* no next unit, or microbatches that do not split evenly */
            }
            W -= st->r * m->g;
            if (o.per > per) {
                /* the bottleneck's own latency is what M periods replace in the fill: the
                 * stage's, or when its link binds one transfer (its compute stays) */
                per = o.per;
                botlat = o.comm > 0 && o.comm >= o.per ? o.comm : o.lat;
            }
            sumlat += o.lat;
            if (o.arx > ar) ar = o.arx;
            if (o.mem > peak) peak = o.mem;
            if (o.cap < cap) cap = o.cap;
            if (o.comm > comm) comm = o.comm;
            reps[i] = st->r * m->g;
            f[i] = o.c - o.b;
            b[i] = o.b;
            x[i] = (o.lat - o.c) / 2;
            arx[i] = o.arx;
        }
        double port = port_time(m, s, pt), link = comm;
        if (port > per) {
            per = port; /* a server's port binds: every stage's latency is in the fill */
            botlat = port;
        }
        pt->period = per;
        pt->fill = sumlat - botlat;
        pt->ar = sched_traits_of(s->kind)->step_each_round ? 0 : ar;
        /* the compute order replayed prices what the closed form cannot see: replicas
         * waiting on out-of-phase neighbours (unequal counts), a replica's few
         * microbatches, each stage's all-reduce from its own last backward (native_rr.c);
         * the closed form keeps the links' and ports' bound */
        if (s->M > 0 && nm_rr_applies(s->kind, pt->nst)) {
            const sched_traits *tr = sched_traits_of(s->kind);
            double *late = tr->async ? NULL : first_late(m, s, pt);
            double plain, t = nm_rr_time(s->kind, pt->nst, reps, f, b, x,
                                         tr->async ? NULL : arx, late, s->M, &plain);
            free(late);
            if (t > 0) {
                /* links or ports slower than the order: everything ends that much later;
                 * a port's traffic only from its first send to its last (port_bound), a
                 * link's every stage's latency but one transfer */
                double bound = link > 0 ? s->M * link + sumlat - link : 0;
                if (port > 0) {
                    double pb = port_bound(m, s, pt, f, b, x);
                    if (pb > bound) bound = pb;
                }
                pt->M = s->M;
                if (tr->async) pt->iter_s = (t > s->M * per ? t : s->M * per) + pt->ar;
                else pt->iter_s = t + (bound > plain ? bound - plain : 0);
                goto done;
            }
        }
    }
    /* the fill and drain: none without a flush, less where split backwards fill it */
    const sched_traits *tr = sched_traits_of(s->kind);
    double fillfac = tr->async ? 0 : tr->split_backward ? 0.4 : 1;
    pt->M = s->M;
    pt->iter_s = s->M * pt->period + fillfac * pt->fill + pt->ar;
done:
    pt->thr = pt->iter_s > 0 ? (double)s->M * s->mbsize / pt->iter_s : 0;
    pt->peak_mem = peak;
    pt->cap = cap;
    pt->fits = fits && memfits;
}

void nm_price(const nm_model *m, const nm_setting *s, nm_part *pt) { price(m, s, pt, 0); }

void nm_price_exact(const nm_model *m, const nm_setting *s, nm_part *pt) { price(m, s, pt, 1); }

/* --- the dynamic program ---------------------------------------------------------------- */

#define NM_DP_TAUS 4 /* latency programs solved together (nm_partitions' thresholds) */

typedef struct nm_dp {
    int nb, U;
    int K;            /* stages pinned (s->nstages), or 0: any count */
    size_t ns;        /* states of one program: L (nb + 1) (U + 1), L = K + 1 layers when
                         pinned (layer k: k stages left), else 1 */
    double *val;      /* [ns NM_DP_TAUS]: state i's values of the programs together
                         (dp_v: program t's at i NM_DP_TAUS + t, one cache line) */
    int *cj, *cr;     /* [ns NM_DP_TAUS] choice: next block, units (dp_v) */
} nm_dp;

/* Index of state (k stages left, first block b, first unit u) in the dp's arrays. */
static size_t dp_at(const nm_dp *d, int k, int b, int u)
{
    return ((size_t)k * (d->nb + 1) + b) * (d->U + 1) + u;
}

/* Where program t's value (and choice) of state i is in the dp's arrays. */
static size_t dp_v(int t, size_t i) { return i * NM_DP_TAUS + t; }

/* One layer of the program: the states with `left` stages left (d->K > 0: stages pinned;
 * a stage with one left ends at the last block, one with more leaves blocks to the rest),
 * or, unpinned (left = 0), the only layer, any count. mode 0: V = min max period (program
 * 0); mode 1: nt programs at once, program t: V = min sum latency with every period <=
 * tau[t] (ascending), each as if solved alone (a stage's costs are computed once for all).
 * The inner loop is stage_cost specialised: what depends on the unit range only is hoisted
 * out of the loop over the stage's last block. */
static void dp_layer(const nm_model *m, const nm_setting *s, nm_dp *d, int mode,
                     const double *tau, int nt, int left)
{
    int nb = m->nb, U = m->U, W1 = U + 1, rc = s->recompute, K = d->K;
    double bscale = (double)s->mbsize / m->p->minibatch, kscale = bscale * 1e-3;
    const double gather = sim_cost_gather_s(m->p, s->mbsize); /* the first/last stage's */
    const sched_traits *tr = sched_traits_of(s->kind);
    int evenM = tr->mb_per_replica && s->M > 0;
    const size_t lay = dp_at(d, left, 0, 0), nxt = dp_at(d, K > 0 ? left - 1 : 0, 0, 0);
    const double tmax = mode ? tau[nt - 1] : 0;
    if (!mode) nt = 1;
    for (int t = 0; t < nt; t++) {
        for (int u = 0; u <= U; u++) d->val[dp_v(t, lay + nb * W1 + u)] = K > 0 ? INFINITY : 0;
        for (int b = 0; b < nb; b++) d->val[dp_v(t, lay + b * W1 + U)] = INFINITY;
    }
    /* the memory terms of the stages starting at block b, by their end: the plan's ZeRO
     * stage is 0, so they do not depend on the replicas (sim_memory_state) */
    const sim_mem_setting ms1 = mem_setting(m, s, 1);
    sim_stage_mem bt[NM_MAX_BLOCKS + 1];
    /* the training state per parameter byte on each replica count (ZeRO 0: the same for
     * every count, but taken as sim_memory_state gives it) */
    sim_state_mul smr[NM_MAX_UNITS];
    for (int ri = 0; ri < m->nr; ri++)
        sim_memory_state(ms1.precision, ms1.zero, m->rlist[ri] * m->g, s->opt, &smr[ri]);
    for (int b = nb - 1; b >= 0; b--) {
        double in = b > 0 ? m->cut[b] * bscale : 0;
        for (int j = b + 1; j <= nb; j++) sim_memory_stage(&m->lay[b * (nb + 1) + j], &ms1, &bt[j]);
        for (int u = U - 1; u >= 0; u--) {
            double bests[NM_DP_TAUS];
            int bjs[NM_DP_TAUS], brs[NM_DP_TAUS], W = m->ndev - u * m->g;
            for (int t = 0; t < nt; t++) {
                bests[t] = INFINITY;
                bjs[t] = brs[t] = -1;
            }
            double best = INFINITY; /* mode 0's */
            for (int ri = 0; ri < m->nr; ri++) {
                int r = m->rlist[ri];
                if (u + r > U) break;
                const nm_range *R = &m->rg[u * W1 + r];
                if (!R->ok) continue;
                int n = r * m->g;
                if (evenM && s->M % n) continue;
                int k, kw = ceil_div(W, n), km = ceil_div(s->M, n);
                switch (tr->hold) {
                case SCHED_HOLD_ALL: k = km; break;
                case SCHED_HOLD_1F1B: k = !tr->async && km < kw ? km : kw; break;
                /* the first stage's warmup is usually the pipeline's largest */
                case SCHED_HOLD_ZB: k = (b ? kw + 1 : kw) < km ? (b ? kw + 1 : kw) : km; break;
                default: k = kw; break;
                }
                const int kf = s->M > 0 ? km : 0;
                /* versions: the kind's, no more than in flight (count_stage) */
                const stage_counts cn = {tr->versions > 0 && tr->versions < kw ? tr->versions : kw,
                                         held_slots(s->kind, k, kf, b > 0),
                                         staged_grads(s->kind, k, kf)};
                const sim_state_mul sm = smr[ri];
                /* a lower bound of the stage's memory that grows with its last block j:
                 * the parameters (less every tied tensor) x versions, gradients (and the
                 * all-reduce's receive buffer), optimizer; per slot the input (the data)
                 * and the input gradient, the kept outputs without recompute; the inner
                 * gradient buffers; the staging */
                const double pcoef = cn.ver + sm.gradients + sm.optimizer +
                                     (n > 1 ? sm.gradients : 0);
                const double fixed = cn.slots * ((b ? in : m->p->input_bytes * bscale) + in) +
                                     cn.staged * in;
                double sc = kscale / R->speed;
                double incomm = in > 0 && R->in_total > 0 ? in / R->in_total : 0;
                /* the last units can only hold the last stage; pinned, the last stage
                 * takes the last blocks and the others leave some */
                const int j0 = u + r == U || left == 1 ? nb : b + 1;
                const int j1 = K > 0 && left > 1 ? nb - 1 : nb;
                for (int j = j0; j <= j1; j++) {
                    const size_t at = nxt + j * W1 + u + r;
                    const double *vt = &d->val[dp_v(0, at)]; /* the programs' */
                    double next = vt[0];
                    if (!mode) {
                        if (!(next < best)) continue;
                    } else {
                        int any = 0; /* lat + next >= next: useless unless below a best */
                        for (int t = 0; t < nt && !any; t++)
                            any = vt[t] < bests[t];
                        if (!any) continue;
                    }
                    double lp = m->cP[j] - m->cP[b] - m->tied_total;
                    double lower = (lp > 0 ? lp : 0) * pcoef + fixed +
                                   (m->cG[j] - m->cG[b] + (rc ? 0 : cn.slots * (m->cS[j] - m->cS[b]))) *
                                       bscale;
                    if (lower > R->cap) break; /* memory grows with j */
                    const double P = bt[j].params;
                    double F = (m->cF[j] - m->cF[b]) * sc, B = (m->cB[j] - m->cB[b]) * sc;
                    if (rc) B += F;
                    if (b == 0 || j == nb) F += gather / R->speed;
                    double c = F + B, per = c / n;
                    /* compute grows with j: no later j can do better either (whether this
                     * one fits memory or not) */
                    if (mode == 0 && per >= best) break;
                    if (mode == 1 && per > tmax) break;
                    if (n > 1 && P > 0 && (tr->step_each_round || s->M > 0)) {
                        /* the exposed all-reduce: per microbatch round for pipedream; once
                         * per iteration for the others, M microbatches sharing it (without
                         * this share the program would always find data parallelism the
                         * fastest, however slow its all-reduce) */
                        double ar = R->ar_a * P + R->ar_b;
                        double tail = ar * (NM_BUCKET_BYTES < P ? NM_BUCKET_BYTES / P : 1);
                        double x = ar - B > tail ? ar - B : tail;
                        per += tr->step_each_round ? x / n : x / s->M;
                    }
                    double out = j < nb ? m->cut[j] * bscale : 0, comm = incomm, lat = c;
                    if (out > 0) {
                        if (!(R->out_total > 0)) continue;
                        if (out / R->out_total > comm) comm = out / R->out_total;
                        lat += 2 * (R->out_lat + out / R->out_rate);
                    }
                    if (comm > per) per = comm;
                    /* a stage that would improve no best needs no memory check */
                    double v0 = per > next ? per : next;
                    int gain = 0;
                    if (mode == 0) {
                        gain = v0 < best;
                    } else {
                        for (int t = nt - 1; t >= 0 && !(per > tau[t]) && !gain; t--)
                            gain = lat + vt[t] < bests[t];
                    }
                    if (!gain) continue;
                    /* the memory itself, as the simulator counts it (not monotone in j:
                     * with recompute a slot keeps the stage's output) */
                    sim_memory_acc acc;
                    memset(&acc, 0, sizeof acc);
                    sim_memory_add(&acc, &bt[j], cn.ver, cn.slots,
                                   sim_allreduce_scratch_max(bt[j].gradients, n), 0);
                    sim_memory mm;
                    sim_memory_close(&acc, cn.staged * in, R->cap, &mm);
                    if (!mm.fits) continue;
                    if (mode == 0) {
                        best = bests[0] = v0;
                        bjs[0] = j;
                        brs[0] = r;
                        continue;
                    }
                    for (int t = nt - 1; t >= 0 && !(per > tau[t]); t--) {
                        double v = lat + vt[t];
                        if (v < bests[t]) {
                            bests[t] = v;
                            bjs[t] = j;
                            brs[t] = r;
                        }
                    }
                }
            }
            for (int t = 0; t < nt; t++) {
                const size_t here = dp_v(t, lay + b * W1 + u);
                d->val[here] = bests[t];
                d->cj[here] = bjs[t];
                d->cr[here] = brs[t];
            }
        }
    }
}

/* Solves the programs (dp_layer's modes; nt of them in mode 1): unpinned one layer;
 * pinned, layer 0 (no stage left: only the end is reached) and then 1..K. */
static void dp_solve(const nm_model *m, const nm_setting *s, nm_dp *d, int mode,
                     const double *tau, int nt)
{
    if (d->K > 0)
        for (int t = 0; t < (mode ? nt : 1); t++)
            for (int b = 0; b <= d->nb; b++)
                for (int u = 0; u <= d->U; u++)
                    d->val[dp_v(t, dp_at(d, 0, b, u))] = b == d->nb ? 0 : INFINITY;
    for (int k = d->K > 0 ? 1 : 0; k <= d->K; k++) dp_layer(m, s, d, mode, tau, nt, k);
}

/* Program t's partition (from the start state). 0, or -1 when it has none. */
static int dp_extract(const nm_model *m, const nm_dp *d, int t, nm_part *pt)
{
    int b = 0, u = 0, k = d->K;
    pt->nst = 0;
    while (b < m->nb) {
        if (d->K > 0 && k < 1) return -1;
        size_t at = dp_v(t, dp_at(d, k, b, u));
        int j = d->cj[at], r = d->cr[at];
        if (d->K > 0) k--;
        if (j < 0 || pt->nst >= NM_MAX_STAGES) return -1;
        pt->st[pt->nst++] = (nm_stage){b, j, u, r};
        b = j;
        u += r;
    }
    pt->ranks = pt->nst;
    return 0;
}

static int same_part(const nm_part *a, const nm_part *b)
{
    if (a->nst != b->nst) return 0;
    for (int i = 0; i < a->nst; i++)
        if (memcmp(&a->st[i], &b->st[i], sizeof a->st[i])) return 0;
    return 1;
}

/* One setting's programs, solved: the min-max partition and each threshold's, priced
 * (nm_model.kept; ranked out by kept_out). */
typedef struct nm_dp_kept {
    nm_setting s;             /* quick cleared */
    int nf;                   /* thresholds solved: 1 (quick, asynchronous kinds) or all */
    int solved;               /* 0: an empty slot */
    int tau_ok;               /* the min-max program has a partition that fits */
    int has0, hasf[NM_DP_TAUS];
    nm_part p0, pf[NM_DP_TAUS];
} nm_dp_kept;

struct nm_dp_memo {
    int next;                 /* the slot the next setting solved replaces */
    nm_dp_kept e[NM_DP_KEPT];
};

static struct nm_dp_memo *kept_new(void) { return calloc(1, sizeof(struct nm_dp_memo)); }

static int kept_is(const nm_dp_kept *e, const nm_setting *s)
{
    return e->solved && e->s.kind == s->kind && e->s.M == s->M && e->s.mbsize == s->mbsize &&
           e->s.recompute == s->recompute && e->s.chunks == s->chunks && e->s.opt == s->opt &&
           e->s.nstages == s->nstages;
}

/* Solves the programs of s with nf thresholds into e. 0, or -1 out of memory. */
static int kept_solve(const nm_model *m, const nm_setting *s, int nf, nm_dp_kept *e)
{
    int K = s->nstages > 0 ? s->nstages : 0;
    size_t ns = (size_t)(K + 1) * (m->nb + 1) * (m->U + 1);
    nm_dp d = {m->nb, m->U, K, ns, malloc(NM_DP_TAUS * ns * sizeof(double)),
               malloc(NM_DP_TAUS * ns * sizeof(int)), malloc(NM_DP_TAUS * ns * sizeof(int))};
    int rc = -1;
    memset(e, 0, offsetof(nm_dp_kept, p0));
    e->s = *s;
    e->s.quick = 0;
    e->nf = nf;
    if (!d.val || !d.cj || !d.cr) goto done;
    const size_t top = dp_at(&d, K, 0, 0);
    dp_solve(m, s, &d, 0, NULL, 1);
    double tau = d.val[dp_v(0, top)];
    e->solved = 1;
    rc = 0;
    if (!(e->tau_ok = isfinite(tau))) goto done;
    if ((e->has0 = dp_extract(m, &d, 0, &e->p0) == 0)) nm_price(m, s, &e->p0);
    /* the latency programs under each threshold, solved together (their order and
     * results as if one after the other: the first of them is the quick setting's) */
    static const double fac_sync[NM_DP_TAUS] = {1.000001, 1.15, 1.4, 2.0};
    double taus[NM_DP_TAUS];
    for (int f = 0; f < nf; f++) taus[f] = tau * fac_sync[f];
    dp_solve(m, s, &d, 1, taus, nf);
    for (int f = 0; f < nf; f++)
        if ((e->hasf[f] = isfinite(d.val[dp_v(f, top)]) && dp_extract(m, &d, f, &e->pf[f]) == 0))
            nm_price(m, s, &e->pf[f]);
done:
    free(d.val);
    free(d.cj);
    free(d.cr);
    return rc;
}

/* The partitions of e for nf thresholds, distinct, at most max into out; counts the
 * programs into *dp_runs when fresh (as solving them one by one would). */
static int kept_out(const nm_dp_kept *e, int nf, int fresh, nm_part *out, int max,
                    int *dp_runs)
{
    int n = 0;
    if (fresh) (*dp_runs)++;
    if (!e->tau_ok) return 0;
    if (e->has0) out[n++] = e->p0;
    for (int f = 0; f < nf && n < max; f++) {
        if (fresh) (*dp_runs)++;
        if (!e->hasf[f]) continue;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= same_part(&out[i], &e->pf[f]);
        if (!dup) out[n++] = e->pf[f];
    }
    return n;
}

int nm_partitions(const nm_model *m, const nm_setting *s, nm_part *out, int max, int *dp_runs)
{
    if (sched_kind_chunked(s->kind)) return nm_partitions_interleaved(m, s, out, max);
    int K = s->nstages > 0 ? s->nstages : 0;
    if (K > m->nb || K > m->U || K > NM_MAX_STAGES) return 0; /* nm_begin says why */
    if (max < 1) return 0;
    int nf = sched_traits_of(s->kind)->async || s->quick ? 1 : NM_DP_TAUS;
    /* a setting solved before with at least these thresholds: its partitions again */
    struct nm_dp_memo *mo = m->kept;
    for (int i = 0; mo && i < NM_DP_KEPT; i++)
        if (kept_is(&mo->e[i], s) && mo->e[i].nf >= nf)
            return kept_out(&mo->e[i], nf, 0, out, max, dp_runs);
    nm_dp_kept *e = mo ? &mo->e[mo->next] : malloc(sizeof *e);
    if (!e) return 0;
    int n = kept_solve(m, s, nf, e) ? 0 : kept_out(e, nf, 1, out, max, dp_runs);
    if (!mo) free(e);
    else if (e->solved) mo->next = (mo->next + 1) % NM_DP_KEPT;
    return n;
}

/* Splits blocks into S parts whose work follows the targets share[s] (summing to 1). */
static int split_shares(const nm_model *m, int S, const double *share, nm_part *pt)
{
    if (S > m->nb || S > NM_MAX_STAGES) return -1;
    double total = m->cF[m->nb] + m->cB[m->nb], acc = 0;
    int b = 0;
    for (int s = 0; s < S; s++) {
        acc += share[s] * total;
        int j = b + 1;
        int maxj = m->nb - (S - s - 1);
        while (j < maxj && m->cF[j + 1] + m->cB[j + 1] <= acc) j++;
        if (j < maxj && fabs(m->cF[j + 1] + m->cB[j + 1] - acc) < fabs(m->cF[j] + m->cB[j] - acc))
            j++;
        if (s == S - 1) j = m->nb;
        pt->st[s] = (nm_stage){b, j, 0, 1};
        b = j;
    }
    pt->nst = S;
    return 0;
}

int nm_partitions_interleaved(const nm_model *m, const nm_setting *s, nm_part *out, int max)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    int v = tr->chunks_min == tr->chunks_max ? tr->chunks_min
            : s->chunks > 1 ? s->chunks : tr->chunks_default, n = 0;
    if (m->g != 1) return 0; /* chunked schedules do not replicate: one device per rank */
    for (int p = s->nstages > 0 ? s->nstages : m->U; p >= 2 && n < max;
         p = s->nstages > 0 ? 0 : p / 2) {
        int S = p * v;
        if (S > m->nb || S > NM_MAX_STAGES) continue;
        double share[NM_MAX_STAGES], sum = 0;
        for (int i = 0; i < S; i++)
            sum += m->rg[sched_kind_rank(s->kind, i, p) * (m->U + 1) + 1].speed;
        for (int i = 0; i < S; i++)
            share[i] = m->rg[sched_kind_rank(s->kind, i, p) * (m->U + 1) + 1].speed / sum;
        nm_part pt;
        if (split_shares(m, S, share, &pt)) continue;
        for (int i = 0; i < S; i++) pt.st[i].u = sched_kind_rank(s->kind, i, p);
        pt.ranks = p;
        nm_setting one = *s;
        one.chunks = v;
        nm_price(m, &one, &pt);
        if (pt.fits) out[n++] = pt;
    }
    return n;
}

/* --- plans ------------------------------------------------------------------------------ */

long long nm_gcd(long long a, long long b)
{
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int nm_policy_microbatches(sched_kind k, int nst, const int *reps)
{
    if (nst < 1) return 1;
    long long L = 1;
    int maxr = 1, W = 0;
    for (int i = 0; i < nst; i++) {
        int n = reps[i] > 0 ? reps[i] : 1;
        if (n > maxr) maxr = n;
        W += n;
        L = L / nm_gcd(L, n) * n;
        if (L > 4096) L = 4097;
    }
    /* flushing kinds: every replica of every stage gets 2 x depth microbatches per flush
     * (a replicated stage with one microbatch per replica idles through the whole fill
     * and drain), at most 4 per device used; the asynchronous kinds never drain: 4 x
     * stages, at least the largest replica count */
    const sched_traits *tr = sched_traits_of(k);
    int base = 2 * nst * maxr;
    if (base > 4 * W) base = 4 * W;
    if (tr->async) base = maxr;
    if (base < 4 * nst) base = 4 * nst;
    if (tr->mb_cover_inflight) {
        for (int i = 0; i < nst; i++) {
            int n = reps[i] > 0 ? reps[i] : 1, need = (ceil_div(W, n) - 1) * n;
            if (need > base) base = need;
            W -= n;
        }
    }
    int unit = L <= 64 ? (int)L : maxr;
    if (tr->mb_per_replica && L <= 4096) unit = (int)L;
    return ceil_div(base, unit) * unit;
}

int nm_default_microbatches(const nm_model *m, sched_kind k, const nm_part *pt)
{
    if (sched_kind_chunked(k)) return 2 * (pt->ranks > 0 ? pt->ranks : 1); /* chunks shrink the bubble */
    int reps[NM_MAX_STAGES];
    for (int i = 0; i < pt->nst; i++) reps[i] = pt->st[i].r * m->g;
    return nm_policy_microbatches(k, pt->nst, reps);
}

int nm_legacy_microbatches(const nm_model *m, sched_kind k, const nm_part *pt)
{
    int M = nm_default_microbatches(m, k, pt);
    if (sched_kind_chunked(k) || sched_traits_of(k)->async) return M; /* M-free memory */
    long long L = 1;
    int maxr = 1;
    for (int i = 0; i < pt->nst; i++) {
        int n = pt->st[i].r * m->g;
        if (n > maxr) maxr = n;
        L = L / nm_gcd(L, n) * n;
        if (L > 4096) L = 4097;
    }
    int base = 4 * pt->nst > maxr ? 4 * pt->nst : maxr;
    int unit = L <= 64 ? (int)L : maxr;
    if (sched_traits_of(k)->mb_per_replica && L <= 4096) unit = (int)L;
    int lm = ceil_div(base, unit) * unit;
    return lm < M ? lm : M;
}

void nm_config(const nm_model *m, const nm_part *pt, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < pt->nst && o + 8 < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? "-" : "", pt->st[i].r * m->g);
    if (o + 8 >= n && n > 4) snprintf(buf + n - 4, 4, "...");
}

plan *nm_plan(const nm_model *m, const nm_setting *s, const nm_part *pt, plumb_err *err)
{
    plan *pl = plan_new(m->p, m->c, pt->nst);
    int *devs = malloc(((size_t)m->ndev + 1) * sizeof *devs);
    if (!pl || !devs) goto oom;
    for (int i = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        int nd = st->r * m->g;
        for (int k = 0; k < nd; k++) devs[k] = m->order[st->u * m->g + k];
        if (plan_set_stage(pl, i, m->bfirst[st->b0], m->bfirst[st->b1] - 1, nd, devs)) goto oom;
        nm_cost o;
        nm_setting one = *s;
        if (sched_kind_chunked(one.kind)) one.kind = SCHED_1F1B_FLUSH;
        stage_cost(m, &one, st->b0, st->b1, st->u, st->r, m->ndev, &o);
        pl->stages[i].compute_s = o.c;
        pl->stages[i].comm_s = o.lat - o.c;
    }
    pl->schedule = s->kind;
    pl->chunks = sched_kind_chunked(s->kind) ? pt->nst / (pt->ranks > 0 ? pt->ranks : 1) : 1;
    pl->microbatch_size = s->mbsize;
    pl->microbatches = s->M;
    pl->recompute = s->recompute;
    pl->optimizer = s->opt;
    pl->pred_iteration_s = pt->iter_s;
    pl->pred_samples_per_s = pt->thr;
    char cfg[96];
    nm_config(m, pt, cfg, sizeof cfg);
    pl->planner_config = strdup(cfg);
    free(devs);
    if (!pl->planner_config) goto oom2;
    return pl;
oom:
    free(devs);
oom2:
    plan_free(pl);
    err_set(err, NULL, NULL, "out of memory");
    return NULL;
}
