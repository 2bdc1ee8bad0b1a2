/* net.c: the cluster's network as the simulator prices it: which level a transfer crosses,
 * its rate and latency, and the time of a ring all-reduce (docs/sim.md, "Communication"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine.h"

void sim_net_from_cluster(sim_net *n, const cluster *c, const double *bw_override)
{
    n->nlevels = c->nlevels;
    long long g = 1;
    for (int l = 0; l < c->nlevels; l++) {
        const cluster_level *lv = &c->levels[l];
        g *= lv->count > 0 ? lv->count : 1;
        n->gsize[l] = g;
        double ratio = 1;
        if (bw_override && bw_override[l] > 0 && lv->bandwidth_Bps > 0)
            ratio = bw_override[l] / lv->bandwidth_Bps;
        n->bw[l] = lv->bandwidth_Bps * ratio;
        n->lat[l] = lv->latency_s;
        n->egress[l] = (lv->egress_Bps > 0 ? lv->egress_Bps : lv->bandwidth_Bps) * ratio;
    }
}

/* Levels of a transfer crossing level L: level 0 alone inside a server, else 1..L (the
 * server's own fabric is not on the way out: the NIC reads the device's memory). The
 * transfer leaves through the egress port of level l of the sender's level-(l-1) group
 * (for l = 0, of the device itself). */
static int path_first(int L)
{
    return L == 0 ? 0 : 1;
}

/* The level crossed between devices a != b (the lowest level whose groups hold both). */
static int net_level(const sim_net *n, int a, int b)
{
    for (int l = 0; l < n->nlevels; l++)
        if (a / n->gsize[l] == b / n->gsize[l])
            return l;
    return n->nlevels - 1;
}

int sim_net_path(const sim_net *n, int a, int b, double *rate, double *latency)
{
    *rate = INFINITY;
    *latency = 0;
    if (a == b)
        return -1;
    int L = net_level(n, a, b);
    for (int l = path_first(L); l <= L; l++) {
        double r = n->bw[l] < n->egress[l] ? n->bw[l] : n->egress[l];
        if (r < *rate)
            *rate = r;
        *latency += n->lat[l];
    }
    return L;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int sim_net_lanes(const sim_net *n, int l)
{
    /* floor(egress / rate): that many transfers leave at full speed at once */
    double r1 = n->bw[l] < n->egress[l] ? n->bw[l] : n->egress[l];
    double lanes = r1 > 0 ? floor(n->egress[l] / r1 + 1e-9) : 1;
    return lanes < 1 ? 1 : lanes > 1e6 ? 1000000 : (int)lanes;
}

int sim_net_p2p_lanes(const sim_net *n, int a, int tp, int *own, double *share)
{
    int ranks = 1, w = 1;
    *own = 1;
    if (tp > 1 && n->nlevels > 1 && n->gsize[0] >= 1) {
        long long g = n->gsize[0], room = g - a % g; /* the group's ranks in a's server */
        ranks = room < tp ? (int)room : tp;
        double o = floor(sim_net_lanes(n, 1) * (double)ranks / (double)g + 1e-9);
        *own = o < 1 ? 1 : o > 1e6 ? 1000000 : (int)o;
        w = ranks < *own ? ranks : *own;
    }
    if (share)
        *share = (double)ranks / w;
    return w;
}

/* 1 when a port of some level above 0 has more than one lane (only then can a ring hop be
 * wider than 1). */
static int net_multilane(const sim_net *n)
{
    for (int l = 1; l < n->nlevels; l++)
        if (sim_net_lanes(n, l) > 1)
            return 1;
    return 0;
}

/* The first index of the sorted values v[0..nv) that is >= x (nv when none is). */
static int lower_bound(const int *v, int nv, long long x)
{
    int a = 0, b = nv;
    while (a < b) {
        int m = a + (b - a) / 2;
        if (v[m] < x)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* How many of the sorted values v[0..nv) lie in [lo, hi). */
static int count_in(const int *v, int nv, long long lo, long long hi)
{
    return lower_bound(v, nv, hi) - lower_bound(v, nv, lo);
}

/* Hop width at level l: the k members of the sender's group share its j hops out,
 * min(k, lanes) lanes of its port among them; at least 1. Sets width[i] at level 1 and
 * keeps the least over the levels above. */
static void set_width(int *width, int i, int l, int k, int lanes, int j)
{
    int w = (k < lanes ? k : lanes) / j;
    if (w < 1)
        w = 1;
    if (l == 1 || w < width[i])
        width[i] = w;
}

/* Widths of a ring whose devices ascend (a level's groups are runs of it): per run, its
 * length is k and its hops crossing level l or above are j. O(r) per level. */
static void widths_ascending(const sim_net *n, const int *devs, int r, const int *lvl,
                             int *width)
{
    for (int l = 1; l < n->nlevels; l++) {
        int lanes = sim_net_lanes(n, l);
        long long gs = n->gsize[l - 1];
        for (int a = 0; a < r;) {
            long long g = devs[a] / gs;
            int b = a, j = 0;
            for (; b < r && devs[b] / gs == g; b++)
                j += lvl[b] >= l;
            for (int i = a; i < b; i++)
                if (lvl[i] >= l)
                    set_width(width, i, l, b - a, lanes, j);
            a = b;
        }
    }
}

/* Widths of any ring: mem, the ring's distinct devices sorted (a level's groups are then
 * contiguous), and out, the senders of the hops crossing level l or above sorted, counted
 * by binary search (mem and out: r ints of scratch each). */
static void widths_any(const sim_net *n, const int *devs, int r, const int *lvl, int *mem,
                       int *out, int *width)
{
    memcpy(mem, devs, (size_t)r * sizeof *mem);
    qsort(mem, (size_t)r, sizeof *mem, cmp_int);
    int nm = 0;
    for (int i = 0; i < r; i++)
        if (!nm || mem[i] != mem[nm - 1])
            mem[nm++] = mem[i];
    for (int l = 1; l < n->nlevels; l++) {
        int lanes = sim_net_lanes(n, l), no = 0;
        long long gs = n->gsize[l - 1];
        for (int i = 0; i < r; i++)
            if (lvl[i] >= l)
                out[no++] = devs[i];
        if (no == 0)
            break;
        qsort(out, (size_t)no, sizeof *out, cmp_int);
        for (int i = 0; i < r; i++) {
            if (lvl[i] < l)
                continue;
            long long lo = devs[i] / gs * gs;
            set_width(width, i, l, count_in(mem, nm, lo, lo + gs), lanes,
                      count_in(out, no, lo, lo + gs));
        }
    }
}

int sim_net_ring_widths(const sim_net *n, const int *devs, int r, int *width)
{
    for (int i = 0; i < r; i++)
        width[i] = 1;
    if (r <= 1 || !net_multilane(n))
        return 0;
    int *lvl = malloc((size_t)3 * r * sizeof *lvl);  /* lvl, then widths_any's scratch */
    if (!lvl)
        return -1;
    int ascending = 1;
    for (int i = 0; i < r; i++) {
        int a = devs[i], b = devs[(i + 1) % r];
        lvl[i] = a == b ? -1 : net_level(n, a, b);
        if (i + 1 < r && b <= a)
            ascending = 0;
    }
    if (ascending)
        widths_ascending(n, devs, r, lvl, width);
    else
        widths_any(n, devs, r, lvl, lvl + r, lvl + 2 * r, width);
    free(lvl);
    return 0;
}

int sim_net_ring(const sim_net *n, const int *devs, int r, double *per_byte, double *fixed)
{
    *per_byte = 0;
    *fixed = 0;
    if (r <= 1)
        return -1;
    /* slowest hop of the ring, each at its path's rate times its width (the lanes it
     * moves over, sim_net_ring_widths); hops leaving a group through the same egress port
     * share it */
    double rate = INFINITY, lat = 0;
    long long *ports = malloc((size_t)r * CLUSTER_MAX_LEVELS * sizeof *ports);
    int *width = net_multilane(n) ? malloc((size_t)r * sizeof *width) : NULL;
    if (width && sim_net_ring_widths(n, devs, r, width)) {
        free(width);
        width = NULL;
    }
    int np = 0;
    for (int i = 0; i < r; i++) {
        int a = devs[i], b = devs[(i + 1) % r];
        double hr, hl;
        int L = sim_net_path(n, a, b, &hr, &hl);
        if (L < 0)
            continue;
        if (width && width[i] > 1)
            hr *= width[i];
        if (hr < rate)
            rate = hr;
        if (hl > lat)
            lat = hl;
        for (int l = path_first(L); ports && l <= L; l++)
            ports[np++] = (long long)l << 40 | (l ? a / n->gsize[l - 1] : a);
    }
    if (ports && np > 1) {
        qsort(ports, (size_t)np, sizeof *ports, cmp_ll);
        for (int i = 0; i < np;) {
            int j = i;
            while (j < np && ports[j] == ports[i])
                j++;
            int l = (int)(ports[i] >> 40);
            double share = n->egress[l] / (j - i);
            if (share < rate)
                rate = share;
            i = j;
        }
    }
    free(ports);
    free(width);
    if (!isfinite(rate) || rate <= 0)
        return -1;
    *per_byte = 2.0 * (r - 1) / r / rate;
    *fixed = 2.0 * (r - 1) * lat;
    return 0;
}

double sim_net_allreduce_s(const sim_net *n, const int *devs, int r, double bytes)
{
    double per_byte, fixed;
    if (r <= 1 || bytes <= 0 || sim_net_ring(n, devs, r, &per_byte, &fixed))
        return 0;
    return per_byte * bytes + fixed;
}
