/* native_model.c: the native planner's model of a profile on a cluster
 * (docs/planner-native.md): what every stage's price reads, built once per (profile,
 * cluster, device count) and read-only afterwards but for its memos.
 *
 * The profile's topological order is coarsened into at most NM_MAX_BLOCKS blocks (cuts
 * placed near equal-work points, at the boundary in a small window that the fewest
 * activation bytes cross); the devices, in a placement order that follows the cluster's
 * hierarchy, into at most NM_MAX_UNITS units. A stage is a block range on a unit range:
 * its replicas are the range's devices, its speed the slowest of them. Prefix sums over the
 * blocks (compute, parameters, saved tensors, the bytes crossing each cut) and each unit
 * range's transfer rates, all-reduce ring and capacity are kept here; native_stage.c
 * prices a stage from them, native_price.c a complete partition, native_dp.c chooses
 * partitions, native_plan.c writes the plan. */
#include "planner/native_impl.h"

#include "sim/cost.h" /* sim_cross_bytes */

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nm_model_free(nm_model *m)
{
    if (!m) return;
    nm_memo_free(m->memo);
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
    m->memo = nm_memo_new(); /* NULL: chunked memory from warmup counts */
    m->kept = nm_kept_new(); /* NULL: every program solved again */
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
                sim_net_path(&m->net, m->order[d0], m->order[d0 - 1], &R->in_rate, &R->in_lat);
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
