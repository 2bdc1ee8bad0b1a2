/* policy.c: the planning rules shared by plan, sweep, the dashboard and train (see
 * policy.h): cluster resize, microbatch count, the even partitioner, the data-parallel
 * baseline plan. */
#include "planner/policy.h"

#include <stdlib.h>

#include "core/schedule_traits.h"
#include "planner/native.h"

cluster *planner_cluster_resize(const cluster *c, int n, int *use_devices, plumb_err *err)
{
    if (!c || c->nlevels < 1 || c->ndevices < 1) {
        err_set(err, NULL, NULL, "the cluster has no devices");
        return NULL;
    }
    if (n < 1 || n > PLANNER_MAX_GPUS) {
        err_set(err, NULL, NULL, "GPU count: expected 1 to %d (got %d)", PLANNER_MAX_GPUS, n);
        return NULL;
    }
    cluster *r = cluster_clone(c);
    if (!r) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    int per = c->levels[0].count;
    long long nserv = 1;
    if (n <= per || c->nlevels == 1) {
        r->levels[0].count = n;
        for (int l = 1; l < r->nlevels; l++) r->levels[l].count = 1;
    } else {
        int need = (n + per - 1) / per;
        for (int l = 1; l < r->nlevels; l++) {
            int cnt = l == r->nlevels - 1 ? need
                      : (c->levels[l].count < need ? c->levels[l].count : need);
            r->levels[l].count = cnt;
            need = (need + cnt - 1) / cnt;
            nserv *= cnt;
        }
    }
    int *st = malloc((size_t)nserv * sizeof *st);
    if (!st) {
        cluster_free(r);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    for (long long s = 0; s < nserv; s++)
        st[s] = c->server_type ? c->server_type[s % c->nservers] : 0;
    free(r->server_type);
    r->server_type = st;
    r->nservers = (int)nserv;
    r->ndevices = (int)(nserv * r->levels[0].count);
    if (cluster_validate(r, NULL, err)) {
        cluster_free(r);
        return NULL;
    }
    *use_devices = n < r->ndevices ? n : r->ndevices;
    return r;
}

static long long gcd_ll(long long a, long long b) { return b ? gcd_ll(b, a % b) : a; }

int planner_replica_round(const plan *pl)
{
    long long l = 1;
    for (int s = 0; pl && s < pl->nstages; s++) {
        int r = pl->stages[s].replicas > 0 ? pl->stages[s].replicas : 1;
        l = l / gcd_ll(l, r) * r;
        if (l > PLANNER_MAX_ROUND) return 0;
    }
    return (int)l;
}

int planner_microbatches(const plan *pl, sched_kind k, int requested)
{
    if (requested <= 0) return native_default_microbatches(pl, k);
    int l = sched_traits_of(k)->mb_per_replica ? planner_replica_round(pl) : 1;
    if (!l) return requested; /* no round that small: as asked */
    long long m = ((long long)requested + l - 1) / l * l;
    return m > PLANNER_MAX_ROUND ? requested : (int)m;
}

/* Cost of items [a, b] from prefix sums. */
static double range_cost(const double *pre, int a, int b) { return pre[b + 1] - pre[a]; }

/* Greedy cut under cap T: the number of ranges (each with at least one item) a left-to-
 * right cut needs so that every range costs <= T. Returns the count, or n + 1 when one
 * item alone costs more than T. */
static int ranges_needed(const double *pre, int n, double T)
{
    int count = 0, a = 0;
    while (a < n) {
        int b = a;
        if (range_cost(pre, a, a) > T) return n + 1;
        while (b + 1 < n && range_cost(pre, a, b + 1) <= T) b++;
        count++;
        a = b + 1;
    }
    return count;
}

int planner_split_weights(const double *cost, int n, int nstages, int *first, int *last)
{
    if (nstages < 1 || nstages > n) return -1;
    double *pre = malloc(((size_t)n + 1) * sizeof *pre);
    if (!pre) return -1;
    pre[0] = 0;
    double maxl = 0;
    for (int i = 0; i < n; i++) {
        pre[i + 1] = pre[i] + cost[i];
        if (cost[i] > maxl) maxl = cost[i];
    }
    /* binary search the smallest cap that needs at most nstages ranges */
    double lo = maxl, hi = pre[n] > maxl ? pre[n] : maxl;
    for (int it = 0; it < 60 && hi - lo > 1e-9 * (hi + 1); it++) {
        double mid = (lo + hi) / 2;
        if (ranges_needed(pre, n, mid) <= nstages) hi = mid;
        else lo = mid;
    }
    /* cut greedily under cap hi, but never leave fewer items than ranges still to make */
    int a = 0;
    for (int s = 0; s < nstages; s++) {
        int left = nstages - s - 1, b = a;
        if (left == 0) b = n - 1;
        else
            while (b + 1 < n - left && range_cost(pre, a, b + 1) <= hi) b++;
        first[s] = a;
        last[s] = b;
        a = b + 1;
    }
    free(pre);
    return 0;
}

int planner_split_ranges(const profile *prof, int nstages, int *first, int *last)
{
    int n = prof->nlayers;
    if (nstages < 1 || nstages > n) return -1;
    double *cost = malloc((size_t)n * sizeof *cost);
    if (!cost) return -1;
    for (int i = 0; i < n; i++)
        cost[i] = profile_layer_forward_ms(&prof->layers[i]) +
                  profile_layer_backward_ms(&prof->layers[i]);
    int rc = planner_split_weights(cost, n, nstages, first, last);
    free(cost);
    return rc;
}

plan *planner_split_plan(const profile *prof, const cluster *clus, int ndev, sched_kind kind,
                         plumb_err *err)
{
    int nd = ndev > 0 && ndev < clus->ndevices ? ndev : clus->ndevices, nl = prof->nlayers;
    int chunked = sched_kind_chunked(kind), chunks = sched_kind_chunks(kind);
    int ranks, depth, reps;
    if (chunked) {
        ranks = nd < nl / chunks ? nd : nl / chunks;
        if (ranks < 1) {
            err_set(err, NULL, "schedule", "%s needs at least %d layers (the profile has %d)",
                    sched_kind_name(kind), chunks, nl);
            return NULL;
        }
        depth = chunks * ranks;
        reps = 1;
    } else {
        depth = 1;
        for (int d = 1; d <= nd && d <= nl; d++)
            if (nd % d == 0) depth = d;
        reps = nd / depth;
        ranks = depth;
    }
    int *first = malloc((size_t)depth * sizeof *first), *last = malloc((size_t)depth * sizeof *last);
    int *devs = malloc((size_t)reps * sizeof *devs);
    plan *pl = NULL;
    if (!first || !last || !devs || planner_split_ranges(prof, depth, first, last)) goto oom;
    pl = plan_new(prof, clus, depth);
    if (!pl) goto oom;
    pl->schedule = kind;
    pl->chunks = chunked ? chunks : 1;
    for (int s = 0; s < depth; s++) {
        if (chunked) {
            devs[0] = sched_kind_rank(kind, s, ranks);
        } else {
            for (int j = 0; j < reps; j++) devs[j] = s * reps + j;
        }
        if (plan_set_stage(pl, s, first[s], last[s], reps, devs)) goto oom;
    }
    free(first);
    free(last);
    free(devs);
    return pl;
oom:
    err_set(err, NULL, NULL, "out of memory");
    plan_free(pl);
    free(first);
    free(last);
    free(devs);
    return NULL;
}

plan *planner_dp_plan(const plan *pl, int ndev, plumb_err *err)
{
    int nd = ndev > 0 && ndev < pl->clus->ndevices ? ndev : pl->clus->ndevices;
    plan *dp = native_dp_plan(pl->prof, pl->clus, nd, err);
    if (!dp) return NULL;
    dp->schedule = SCHED_1F1B_FLUSH;
    dp->microbatch_size = pl->microbatch_size;
    dp->microbatches = (pl->microbatches + nd - 1) / nd * nd;
    dp->recompute = pl->recompute;
    dp->optimizer = pl->optimizer;
    return dp;
}
