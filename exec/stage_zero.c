/* stage_zero.c: a stage's ZeRO-1 shard (stage.h, stage_opts.zero_parts): how its
 * parameter and gradient vectors split into one contiguous shard per data-parallel
 * replica; the replicas' reduce-scatter sums the owned shard in place, in the gradients. The
 * step itself is stage_step's (exec/stage.c); the collectives are the runtime's. */
#include "exec/stage_int.h"

void stage_shard_plan(stage *st, int parts, int index)
{
    st->zparts = parts > 1 ? parts : 1;
    st->zindex = parts > 1 && index > 0 && index < parts ? index : 0;
    /* ceil(nparams / parts) floats each, so the parts cover the vector with padding */
    st->zcount = (st->nparams + st->zparts - 1) / st->zparts;
    if (st->zparts > 1 && st->zcount < 1) st->zcount = 1;
    st->zalloc = st->zcount * st->zparts;
}

long long stage_shard_count(const stage *st) { return st->zcount; }
int stage_shard_index(const stage *st) { return st->zindex; }
float *stage_shard_grads(stage *st)
{
    return st->zparts > 1 ? st->grads + (size_t)st->zindex * (size_t)st->zcount : NULL;
}

long long stage_shard_real(const stage *st, long long *lo)
{
    *lo = (long long)st->zindex * st->zcount;
    long long n = st->nparams - *lo;
    return n < 0 ? 0 : n > st->zcount ? st->zcount : n;
}

void stage_shard_take(stage *st, const float *full, float *shard)
{
    if (st->zparts <= 1) return;
    /* the shard's real floats only: full may end at nparams, inside the last shards */
    long long lo, n = stage_shard_real(st, &lo);
    if (n > 0) st->bk->copy(st->ctx, shard, full + lo, (size_t)n * sizeof(float));
    if (n < st->zcount)
        st->bk->zero(st->ctx, shard + n, (size_t)(st->zcount - n) * sizeof(float));
}
