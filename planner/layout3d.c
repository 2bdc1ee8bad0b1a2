/* layout3d.c: a fixed tensor x pipeline x data layout of a transformer
 * (planner/layout3d.h): the dimensions derived and checked, then the analytic profile, the
 * even split of the blocks over the virtual stages, and Megatron-LM's device order. */
#include "planner/layout3d.h"

#include <stdlib.h>

#include "core/schedule_traits.h"
#include "planner/llm_profile.h"

void layout3d_options_init(layout3d_options *o)
{
    *o = (layout3d_options){0};
    o->recompute = RECOMPUTE_NONE;
    o->checkpoint_layers = -1;
    o->precision = DEV_BF16;
    o->schedule = -1;
}

int layout3d_group_device(int p, int r, int tp, int dp)
{
    return (p * dp + r) * tp;
}

/* Fills the missing one of tp, pp, dp from gpus and checks their product. 0 or -1. */
static int resolve_dims(const layout3d_options *o, int gpus, layout3d_dims *d, plumb_err *err)
{
    int given = (o->tp > 0) + (o->pp > 0) + (o->dp > 0);
    if (given < 2)
        return err_set(err, NULL, "--tp/--pp/--dp", "expected at least two of the three "
                       "(the third is --gpus divided by their product; with fewer, plumb plan "
                       "--model searches the layouts) (got %d)", given);
    d->tp = o->tp, d->pp = o->pp, d->dp = o->dp;
    int cp = d->cp;
    if (given == 2) {
        int *miss = !o->tp ? &d->tp : !o->pp ? &d->pp : &d->dp;
        const char *name = !o->tp ? "--tp" : !o->pp ? "--pp" : "--dp";
        long long prod = (long long)(o->tp ? o->tp : 1) * (o->pp ? o->pp : 1) *
                         (o->dp ? o->dp : 1) * cp;
        if (gpus % prod)
            return err_set(err, NULL, name, "expected --gpus / (the other two%s) to be whole "
                           "(got %d / %lld)", cp > 1 ? " x --cp" : "", gpus, prod);
        *miss = (int)(gpus / prod);
    }
    if (cp > 1 && (long long)d->tp * cp * d->pp * d->dp != gpus)
        return err_set(err, NULL, "--gpus", "expected tp x cp x pp x dp = %d x %d x %d x %d = "
                       "%lld devices (got %d)", d->tp, cp, d->pp, d->dp,
                       (long long)d->tp * cp * d->pp * d->dp, gpus);
    if ((long long)d->tp * cp * d->pp * d->dp != gpus)
        return err_set(err, NULL, "--gpus", "expected tp x pp x dp = %d x %d x %d = %lld "
                       "devices (got %d)", d->tp, d->pp, d->dp,
                       (long long)d->tp * d->pp * d->dp, gpus);
    return 0;
}

/* The schedule and its chunks (virtual stages per rank). 0 or -1. */
static int resolve_schedule(const layout3d_options *o, layout3d_dims *d, plumb_err *err)
{
    if (o->interleave < 0)
        return err_set(err, NULL, "--interleave", "expected an integer >= 1 (got %d)",
                       o->interleave);
    if (o->schedule < 0) {
        d->interleave = o->interleave > 0 ? o->interleave : 1;
        d->schedule = d->interleave > 1 ? SCHED_INTERLEAVED : SCHED_1F1B_FLUSH;
        return 0;
    }
    const sched_traits *tr = sched_traits_of((sched_kind)o->schedule);
    if (!tr)
        return err_set(err, NULL, "--schedule", "expected a schedule kind (got %d)",
                       o->schedule);
    d->schedule = (sched_kind)o->schedule;
    d->interleave = o->interleave > 0 ? o->interleave : tr->chunks_default;
    if (d->interleave > 1 && tr->chunks_max == 1)
        return err_set(err, NULL, "--interleave", "expected 1 with schedule %s, which runs "
                       "one stage per pipeline rank (got %d)", tr->name, d->interleave);
    if (d->interleave < tr->chunks_min || d->interleave > tr->chunks_max)
        return err_set(err, NULL, "--interleave", "expected %d to %d virtual stages per rank "
                       "with schedule %s (got %d)", tr->chunks_min, tr->chunks_max, tr->name,
                       d->interleave);
    return 0;
}

int layout3d_resolve(const transformer *t, const cluster *c, const char *cluster_file,
                     const layout3d_options *o, layout3d_dims *d, plumb_err *err)
{
    int per_server = c->levels[0].count;
    if (o->tp < 0 || o->pp < 0 || o->dp < 0 || o->gpus < 0 || o->cp < 0)
        return err_set(err, NULL, o->tp < 0 ? "--tp" : o->pp < 0 ? "--pp" : o->dp < 0
                       ? "--dp" : o->cp < 0 ? "--cp" : "--gpus", "expected a positive integer");
    d->cp = o->cp > 1 ? o->cp : 1;
    if (o->tp > per_server)
        return err_set(err, NULL, "--tp", "expected at most the %d devices of one server "
                       "(got %d)", per_server, o->tp);
    if (o->tp > 0 && per_server % o->tp)
        return err_set(err, NULL, "--tp", "expected a divisor of the %d devices of one server, "
                       "so that each tensor-parallel group is on one server (got %d)",
                       per_server, o->tp);
    d->gpus = o->gpus > 0 ? o->gpus
              : o->tp > 0 && o->pp > 0 && o->dp > 0 ? o->tp * d->cp * o->pp * o->dp
              : c->ndevices;
    cluster *cut = cluster_take_gpus(c, d->gpus, cluster_file, err);
    if (!cut) return -1;
    cluster_free(cut);
    if (resolve_dims(o, d->gpus, d, err)) return -1;
    if (d->tp > per_server || per_server % d->tp) /* derived */
        return err_set(err, NULL, "--tp", "expected a divisor of the %d devices of one server "
                       "(got --gpus / (pp x dp) = %d)", per_server, d->tp);
    if (d->pp > t->layers)
        return err_set(err, NULL, "--pp", "expected at most the %lld layers (got %d)",
                       t->layers, d->pp);
    if (resolve_schedule(o, d, err)) return -1;
    long long vs = (long long)d->pp * d->interleave;
    if (t->layers % vs)
        return err_set(err, NULL, d->interleave > 1 ? "--interleave" : "--pp", "expected --pp x "
                       "--interleave to divide the %lld layers (got %d x %d = %lld)", t->layers,
                       d->pp, d->interleave, vs);
    if (o->microbatch_size < 1)
        return err_set(err, NULL, "--microbatch-size", "expected an integer >= 1 (got %d)",
                       o->microbatch_size);
    long long unit = (long long)d->dp * o->microbatch_size;
    if (o->global_batch < 1 || o->global_batch % unit)
        return err_set(err, NULL, "--global-batch", "expected a multiple of dp x microbatch "
                       "size = %d x %d = %lld (got %d)", d->dp, o->microbatch_size, unit,
                       o->global_batch);
    d->microbatches = o->global_batch / o->microbatch_size;
    if (o->recompute < 0 || o->recompute >= RECOMPUTE_NKINDS)
        return err_set(err, NULL, "--recompute", "expected none, selective or full (got %d)",
                       o->recompute);
    if (o->checkpoint_layers > t->layers / vs)
        return err_set(err, NULL, "--checkpoint-layers", "expected at most the %lld blocks of a "
                       "virtual stage (got %d)", t->layers / vs, o->checkpoint_layers);
    if (o->zero < 0 || o->zero > 1)
        return err_set(err, NULL, "--zero", "expected 0 or 1 (got %d)", o->zero);
    return 0;
}

/* Sets the stages of pl: virtual stage k holds blocks [k n, (k + 1) n) (profile layers
 * 1 + k n .. (k + 1) n), the embedding joined to the first and the head to the last, on
 * the dp groups of its pipeline rank. 0 or -1 (out of memory). */
static int place_stages(plan *pl, const layout3d_dims *d, int blocks)
{
    int S = d->pp * d->interleave, n = blocks / S;
    int *devs = malloc((size_t)d->dp * sizeof *devs);
    if (!devs) return -1;
    for (int k = 0; k < S; k++) {
        int rank = sched_kind_rank(d->schedule, k, d->pp);
        int first = k == 0 ? 0 : 1 + k * n, last = k == S - 1 ? blocks + 1 : (k + 1) * n;
        for (int r = 0; r < d->dp; r++)
            devs[r] = layout3d_group_device(rank, r, d->tp * d->cp, d->dp);
        if (plan_set_stage(pl, k, first, last, d->dp, devs)) {
            free(devs);
            return -1;
        }
    }
    free(devs);
    return 0;
}

plan *layout3d_build(const transformer *t, const cluster *c, const char *cluster_file,
                     const layout3d_options *o, plumb_err *err)
{
    layout3d_dims d;
    if (layout3d_resolve(t, c, cluster_file, o, &d, err)) return NULL;
    cluster *cut = cluster_take_gpus(c, d.gpus, cluster_file, err);
    if (!cut) return NULL;
    llm_options lo;
    llm_options_init(&lo);
    lo.tp = d.tp;
    lo.microbatch = o->microbatch_size;
    lo.seq = o->seq;
    lo.precision = o->precision;
    lo.sequence_parallel = o->sequence_parallel;
    lo.attention = o->attention == LLM_ATTN_FLASH ? LLM_ATTN_FLASH : LLM_ATTN_STANDARD;
    lo.cp = d.cp;
    profile *prof = llm_profile_build(t, cut, cluster_file, &lo, err);
    plan *pl = prof ? plan_new(prof, cut, d.pp * d.interleave) : NULL;
    if (!prof) goto fail;
    if (!pl || place_stages(pl, &d, (int)t->layers)) {
        err_set(err, NULL, NULL, "out of memory");
        goto fail;
    }
    pl->schedule = d.schedule;
    pl->chunks = d.interleave;
    pl->microbatch_size = o->microbatch_size;
    pl->microbatches = d.microbatches;
    pl->recompute = o->recompute;
    pl->checkpoint_layers = o->checkpoint_layers >= 0 ? o->checkpoint_layers
                            : o->recompute == RECOMPUTE_FULL ? 1 : 0;
    pl->zero = o->zero;
    pl->p2p_sync = o->p2p_sync ? 1 : 0;
    pl->p2p_whole = o->p2p_whole ? 1 : 0;
    pl->grad_sync_end = o->grad_sync_end ? 1 : 0;
    pl->precision = o->precision;
    pl->grad_reduce = o->grad_reduce;
    pl->optimizer_state = o->optimizer_state;
    pl->optimizer = OPT_ADAM;
    if (plan_validate(pl, "(3D layout)", err)) goto fail;
    profile_free(prof);
    cluster_free(cut);
    return pl;
fail:
    plan_free(pl);
    profile_free(prof);
    cluster_free(cut);
    return NULL;
}
