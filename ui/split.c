/* split.c: the dashboard's fallback partitioner (balanced contiguous ranges, uniform
 * replication), used when no planner is linked in. */
#include "ui/split.h"

#include <stdlib.h>

#include "core/schedule_traits.h"

/* Cost of layers [a, b] from prefix sums. */
static double range_cost(const double *pre, int a, int b) { return pre[b + 1] - pre[a]; }

/* Greedy cut under cap T: the number of ranges (each with at least one layer) a left-to-
 * right cut needs so that every range costs <= T. Returns the count, or n + 1 when one
 * layer alone costs more than T. */
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

int ui_split_ranges(const profile *prof, int nstages, int *first, int *last)
{
    int n = prof->nlayers;
    if (nstages < 1 || nstages > n) return -1;
    double *pre = malloc(((size_t)n + 1) * sizeof *pre);
    if (!pre) return -1;
    pre[0] = 0;
    double maxl = 0;
    for (int i = 0; i < n; i++) {
        double c = profile_layer_forward_ms(&prof->layers[i]) +
                   profile_layer_backward_ms(&prof->layers[i]);
        pre[i + 1] = pre[i] + c;
        if (c > maxl) maxl = c;
    }
    /* binary search the smallest cap that needs at most nstages ranges */
    double lo = maxl, hi = pre[n] > maxl ? pre[n] : maxl;
    for (int it = 0; it < 60 && hi - lo > 1e-9 * (hi + 1); it++) {
        double mid = (lo + hi) / 2;
        if (ranges_needed(pre, n, mid) <= nstages) hi = mid;
        else lo = mid;
    }
    /* cut greedily under cap hi, but never leave fewer layers than ranges still to make */
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

plan *ui_split_plan(const profile *prof, const cluster *clus, sched_kind kind, plumb_err *err)
{
    int nd = clus->ndevices, nl = prof->nlayers;
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
    if (!first || !last || !devs || ui_split_ranges(prof, depth, first, last)) goto oom;
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
