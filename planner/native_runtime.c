/* native_runtime.c: the runtime the native planner's plans carry (native_options.p2p_sync,
 * grad_sync_end, zero, overlap_param_gather: `plumb plan -p --p2p / --grad-sync / --zero /
 * --overlap-param-gather`): which schedule kinds can take it, asked of the rule's one owner
 * (search3d_runtime_check, planner/search3d.h) and never decided here; its words; and
 * setting it on a candidate plan. */
#include "planner/native.h"

#include <stdio.h>

#include "planner/search3d.h"

/* The search3d options that carry o's runtime for schedule k (every other setting free:
 * none of their rules refuses). */
static void runtime_options(const native_options *o, int k, search3d_options *so)
{
    search3d_options_init(so);
    so->schedule = k;
    so->p2p_sync = o->p2p_sync ? 1 : 0;
    so->grad_sync_end = o->grad_sync_end ? 1 : 0;
    so->zero = o->zero ? 1 : 0;
    so->overlap_param_gather = o->overlap_param_gather ? 1 : 0;
}

int native_runtime_check(const native_options *o, sched_kind k, plumb_err *err)
{
    search3d_options so;
    runtime_options(o, (int)k, &so);
    return search3d_runtime_check(&so, err);
}

void native_runtime_text(const native_options *o, char *buf, size_t n)
{
    search3d_options so;
    runtime_options(o, SEARCH3D_FREE, &so);
    char rest[256];
    search3d_runtime_text(&so, rest, sizeof rest);
    /* the all-gather's words name zero 1 already ("... under the forward (zero 1)") */
    int zero = o->zero && !o->overlap_param_gather;
    snprintf(buf, n, "%s%s%s", zero ? "zero 1" : "", zero && rest[0] ? ", " : "", rest);
}

void native_runtime_apply(plan *pl, const native_options *o)
{
    if (!pl || !o) return;
    pl->p2p_sync = o->p2p_sync ? 1 : 0;
    pl->grad_sync_end = o->grad_sync_end ? 1 : 0;
    pl->zero = o->zero ? 1 : 0;
    const sched_traits *tr = sched_traits_of(pl->schedule);
    pl->overlap_param_gather = o->overlap_param_gather && pl->zero && tr && !tr->async;
}
