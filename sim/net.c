/* net.c: the cluster's network as the simulator prices it: which level a transfer crosses,
 * its rate and latency, and the time of a ring all-reduce (docs/sim.md, "Communication"). */
#include <math.h>
#include <stdlib.h>

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

int sim_net_path(const sim_net *n, int a, int b, double *rate, double *latency)
{
    *rate = INFINITY;
    *latency = 0;
    if (a == b)
        return -1;
    int L = n->nlevels - 1;
    for (int l = 0; l < n->nlevels; l++)
        if (a / n->gsize[l] == b / n->gsize[l]) {
            L = l;
            break;
        }
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

int sim_net_ring(const sim_net *n, const int *devs, int r, double *per_byte, double *fixed)
{
    *per_byte = 0;
    *fixed = 0;
    if (r <= 1)
        return -1;
    /* slowest hop of the ring; hops leaving a group through the same egress port share it */
    double rate = INFINITY, lat = 0;
    long long *ports = malloc((size_t)r * CLUSTER_MAX_LEVELS * sizeof *ports);
    int np = 0;
    for (int i = 0; i < r; i++) {
        int a = devs[i], b = devs[(i + 1) % r];
        double hr, hl;
        int L = sim_net_path(n, a, b, &hr, &hl);
        if (L < 0)
            continue;
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
