/* layout3d.c: a fixed tensor x pipeline x data layout of a transformer
 * (planner/layout3d.h): the dimensions derived and checked, then the analytic profile, the
 * split of the blocks over the virtual stages (even, or Megatron-Core's uneven rules), and
 * Megatron-LM's device order. */
#include "planner/layout3d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pplayout.h"
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

static const char OPT_FIRST[] = "--decoder-first-pipeline-num-layers",
                  OPT_LAST[] = "--decoder-last-pipeline-num-layers",
                  OPT_EMB[] = "--account-for-embedding-in-pipeline-split",
                  OPT_LOSS[] = "--account-for-loss-in-pipeline-split",
                  OPT_LAYOUT[] = "--pipeline-layout";

int layout3d_uneven(const layout3d_options *o)
{
    return layout3d_split_option(o) != NULL;
}

const char *layout3d_split_option(const layout3d_options *o)
{
    return o->pipeline_layout ? OPT_LAYOUT : o->split.first_blocks > 0 ? OPT_FIRST
           : o->split.last_blocks > 0 ? OPT_LAST : o->split.account_embedding ? OPT_EMB
           : o->split.account_loss ? OPT_LOSS : NULL;
}

/* --pipeline-layout with one of the other four split options: Megatron-Core's
 * TransformerConfig.__post_init__ raises "pipeline_model_parallel_layout cannot be set with
 * other pipeline layout arguments". 0, or -1 with err set. */
static int layout_conflict(const layout3d_options *o, plumb_err *err)
{
    layout3d_options rest = *o;
    rest.pipeline_layout = NULL;
    const char *other = layout3d_split_option(&rest);
    if (!o->pipeline_layout || !other) return 0;
    return err_set(err, NULL, OPT_LAYOUT, "expected no %s with it (Megatron-Core refuses "
                   "the layout string with the other pipeline split options)", other);
}

/* Checks a first or last count F of option name against v (Megatron-Core: > 0 and a
 * multiple of the virtual pipeline size, transformer_config.py). 0 or -1. */
static int check_end_count(const char *name, int f, int blocks, int v, plumb_err *err)
{
    if (f < 1 || f > blocks)
        return err_set(err, NULL, name, "expected 1 to the %d blocks (got %d)", blocks, f);
    if (f % v)
        return err_set(err, NULL, name, "expected a multiple of --interleave %d, each of the "
                       "rank's virtual stages holding as many blocks (got %d)", v, f);
    return 0;
}

/* --decoder-first/last-pipeline-num-layers: rank 0 holds F, rank pp - 1 holds L, the middle
 * ranks the rest evenly; rank r's blocks dealt evenly over its chunks c, virtual stage
 * c pp + r (Megatron-Core's get_num_layers_to_build and the offsets of
 * get_transformer_layer_offset). 0 or -1. */
static int split_first_last(const layout3d_options *o, int blocks, int pp, int v, int *n,
                            plumb_err *err)
{
    int F = o->split.first_blocks, L = o->split.last_blocks;
    const char *name = L > 0 ? OPT_LAST : OPT_FIRST;
    if (o->split.account_embedding || o->split.account_loss)
        return err_set(err, NULL, F > 0 ? OPT_FIRST : OPT_LAST, "expected no %s with it "
                       "(Megatron-Core refuses the two kinds of uneven split together)",
                       o->split.account_embedding ? OPT_EMB : OPT_LOSS);
    if (pp < 2)
        return err_set(err, NULL, F > 0 ? OPT_FIRST : OPT_LAST, "expected --pp 2 or more "
                       "(got %d)", pp);
    if (F > 0 && check_end_count(OPT_FIRST, F, blocks, v, err)) return -1;
    if (L > 0 && check_end_count(OPT_LAST, L, blocks, v, err)) return -1;
    int mid = blocks - (F > 0 ? F : 0) - (L > 0 ? L : 0), ranks = pp - (F > 0) - (L > 0);
    if (mid < 0)
        return err_set(err, NULL, name, "expected %s %d and %s %d to sum to at most the %d "
                       "blocks (got %d)", OPT_FIRST, F, OPT_LAST, L, blocks, F + L);
    if (!ranks && mid)
        return err_set(err, NULL, name, "expected the first and last ranks to hold all %d "
                       "blocks at --pp %d (got %d + %d)", blocks, pp, F, L);
    if (!ranks && v > 1) /* Megatron-Core's interleaved offsets divide by the middle ranks */
        return err_set(err, NULL, "--interleave", "expected 1 when the first and last ranks "
                       "hold every block, with no middle rank (got %d)", v);
    if (ranks && !mid)
        return err_set(err, NULL, name, "expected blocks left for the %d middle pipeline "
                       "rank%s (got none of the %d)", ranks, ranks == 1 ? "" : "s", blocks);
    if (ranks && mid % ranks)
        return err_set(err, NULL, name, "expected the %d blocks left to divide over the %d "
                       "other pipeline ranks (got %d / %d)", mid, ranks, mid, ranks);
    int per = ranks ? mid / ranks : 0;
    if (ranks && per % v)
        return err_set(err, NULL, "--interleave", "expected to divide the %d blocks of each "
                       "middle pipeline rank (got %d)", per, v);
    for (int k = 0; k < pp * v; k++) {
        int r = k % pp;
        n[k] = (r == 0 && F > 0 ? F : r == pp - 1 && L > 0 ? L : per) / v;
    }
    return 0;
}

int layout3d_split(const layout3d_options *o, int blocks, int pp, int v, int *n,
                   plumb_err *err)
{
    if (layout_conflict(o, err)) return -1;
    if (o->pipeline_layout) return pplayout_split(o->pipeline_layout, blocks, pp, v, n, err);
    if (o->split.first_blocks > 0 || o->split.last_blocks > 0)
        return split_first_last(o, blocks, pp, v, n, err);
    long long vs = (long long)pp * v;
    int e = o->split.account_embedding ? 1 : 0, l = o->split.account_loss ? 1 : 0;
    int total = blocks + e + l;
    if (!e && !l && blocks % vs)
        return err_set(err, NULL, v > 1 ? "--interleave" : "--pp", "expected --pp x "
                       "--interleave to divide the %d layers (got %d x %d = %lld)", blocks,
                       pp, v, vs);
    if (total % vs) {
        char what[64];
        snprintf(what, sizeof what, "%s%s", e ? " + the embedding" : "", l ? " + the loss" : "");
        return err_set(err, NULL, e ? OPT_EMB : OPT_LOSS, "expected --pp x --interleave to "
                       "divide the %d blocks%s = %d (got %d x %d = %lld)", blocks, what, total,
                       pp, v, vs);
    }
    for (long long k = 0; k < vs; k++) n[k] = (int)(total / vs);
    n[0] -= e; /* Megatron-Core builds one block fewer where the embedding or loss counts */
    n[vs - 1] -= l;
    return 0;
}

/* layout3d_split of d's pipeline into a new array (the caller frees it), after the checks
 * an uneven split needs of o besides: no --balance, a schedule placing virtual stage k on
 * rank k % pp. NULL with err set (out of memory: message "out of memory"). */
int layout3d_split_most(const layout3d_options *o, int blocks, int pp, int v, plumb_err *err)
{
    long long vs = (long long)pp * v;
    if (vs < 1 || vs > (long long)blocks + 2)
        return err_set(err, NULL, v > 1 ? "--interleave" : "--pp", "expected pp x interleave "
                       "from 1 to the %d blocks + the embedding + the loss (got %d x %d)",
                       blocks, pp, v);
    int *n = malloc((size_t)vs * sizeof *n), most = 0;
    if (!n) return err_set(err, NULL, NULL, "out of memory");
    if (layout3d_split(o, blocks, pp, v, n, err)) most = -1;
    for (long long k = 0; most >= 0 && k < vs; k++) most = n[k] > most ? n[k] : most;
    free(n);
    return most;
}

static int *split_of(const transformer *t, const layout3d_options *o, const layout3d_dims *d,
                     plumb_err *err)
{
    int S = d->pp * d->interleave;
    const char *name = layout3d_split_option(o);
    if (layout3d_uneven(o) && o->balance) {
        err_set(err, NULL, "--balance", "expected the even split, which balancing starts "
                "from (got %s)", name);
        return NULL;
    }
    for (int k = 0; layout3d_uneven(o) && k < S; k++) {
        if (sched_kind_rank(d->schedule, k, d->pp) == k % d->pp) continue;
        err_set(err, NULL, name, "expected a schedule that places virtual stage k on "
                "pipeline rank k %% pp, as Megatron-Core's interleaving (got %s)",
                sched_kind_name(d->schedule));
        return NULL;
    }
    int *n = malloc((size_t)S * sizeof *n);
    if (!n) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    if (layout3d_split(o, (int)t->layers, d->pp, d->interleave, n, err)) {
        free(n);
        return NULL;
    }
    return n;
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

/* --pipeline-layout: the string checked against the model's blocks and the pipeline
 * (pplayout_check), its stages per rank into *v. 0 or -1. */
static int layout_chunks(const transformer *t, const layout3d_options *o, int pp, int *v,
                         plumb_err *err)
{
    if (layout_conflict(o, err)) return -1;
    pplayout *l = pplayout_parse(o->pipeline_layout, err);
    if (!l) return -1;
    int rc = pplayout_check(l, (int)t->layers, pp, o->interleave, err);
    *v = l->nstages / pp;
    pplayout_free(l);
    return rc;
}

/* The schedule and its chunks (virtual stages per rank): --interleave, the layout string's
 * stages per rank, or the schedule's default. 0 or -1. */
static int resolve_schedule(const transformer *t, const layout3d_options *o, layout3d_dims *d,
                            plumb_err *err)
{
    if (o->interleave < 0)
        return err_set(err, NULL, "--interleave", "expected an integer >= 1 (got %d)",
                       o->interleave);
    int lv = 0; /* the layout's chunks */
    if (o->pipeline_layout && layout_chunks(t, o, d->pp, &lv, err)) return -1;
    if (lv && o->schedule >= 0) {
        const sched_traits *tr = sched_traits_of((sched_kind)o->schedule);
        if (tr && (lv < tr->chunks_min || lv > tr->chunks_max))
            return err_set(err, NULL, OPT_LAYOUT, "expected %d to %d virtual stages per rank "
                           "with schedule %s (got %d over --pp %d)", tr->chunks_min,
                           tr->chunks_max, tr->name, lv, d->pp);
    }
    if (o->schedule < 0) {
        d->interleave = lv ? lv : o->interleave > 0 ? o->interleave : 1;
        d->schedule = d->interleave > 1 ? SCHED_INTERLEAVED : SCHED_1F1B_FLUSH;
        return 0;
    }
    const sched_traits *tr = sched_traits_of((sched_kind)o->schedule);
    if (!tr)
        return err_set(err, NULL, "--schedule", "expected a schedule kind (got %d)",
                       o->schedule);
    d->schedule = (sched_kind)o->schedule;
    d->interleave = lv ? lv : o->interleave > 0 ? o->interleave : tr->chunks_default;
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
    if (resolve_schedule(t, o, d, err)) return -1;
    int *n = split_of(t, o, d, err), most = 0;
    if (!n) return -1;
    for (int k = 0; k < d->pp * d->interleave; k++) most = n[k] > most ? n[k] : most;
    free(n);
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
    if (plan_checkpoint_check(o->recompute, o->checkpoint_layers, most, NULL, err)) return -1;
    if (o->zero < 0 || o->zero > 1)
        return err_set(err, NULL, "--zero", "expected 0 or 1 (got %d)", o->zero);
    return 0;
}

/* Sets the stages of pl: virtual stage k holds the n[k] blocks after those of stages
 * 0 .. k - 1 (profile layers 1 + offset .. offset + n[k]), the embedding joined to the first
 * and the head to the last, on the dp groups of its pipeline rank. 0 or -1 (out of
 * memory). */
static int place_stages(plan *pl, const layout3d_dims *d, int blocks, const int *n)
{
    int S = d->pp * d->interleave, offset = 0;
    int *devs = malloc((size_t)d->dp * sizeof *devs);
    if (!devs) return -1;
    for (int k = 0; k < S; k++) {
        int rank = sched_kind_rank(d->schedule, k, d->pp);
        int first = k == 0 ? 0 : 1 + offset;
        int last = k == S - 1 ? blocks + 1 : offset + n[k];
        offset += n[k];
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
    lo.cross_entropy = o->cross_entropy;
    lo.grad_accum = o->grad_accum;
    profile *prof = llm_profile_build(t, cut, cluster_file, &lo, err);
    plan *pl = prof ? plan_new(prof, cut, d.pp * d.interleave) : NULL;
    int *n = NULL;
    if (!prof) goto fail;
    if (!(n = split_of(t, o, &d, err))) goto fail;
    if (!pl || place_stages(pl, &d, (int)t->layers, n)) {
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
    pl->cross_entropy = o->cross_entropy; /* recorded: the profile prices it */
    pl->grad_accum = o->grad_accum;       /* likewise */
    pl->optimizer = OPT_ADAM;
    if (!(pl->model = plan_model_new(t))) { /* the model it was laid out from, so that its */
        err_set(err, NULL, NULL, "out of memory"); /* file can be laid out again */
        goto fail;
    }
    pl->model->tf->seq = prof->tokens_per_sample;
    pl->model->attention = lo.attention == LLM_ATTN_FLASH;
    pl->model->balance = o->balance ? 1 : 0;
    pl->model->split = o->split;
    pl->model->split.account_embedding = o->split.account_embedding ? 1 : 0;
    pl->model->split.account_loss = o->split.account_loss ? 1 : 0;
    if (o->pipeline_layout && !(pl->model->pipeline_layout = strdup(o->pipeline_layout))) {
        err_set(err, NULL, NULL, "out of memory");
        goto fail;
    }
    if (plan_validate(pl, "(3D layout)", err)) goto fail;
    free(n);
    profile_free(prof);
    cluster_free(cut);
    return pl;
fail:
    free(n);
    plan_free(pl);
    profile_free(prof);
    cluster_free(cut);
    return NULL;
}

int layout3d_options_from_plan(const plan *pl, layout3d_options *o)
{
    layout3d_options_init(o);
    if (!pl || !pl->model || pl->nstages < 1 || !pl->stages) return -1;
    const plan_model *m = pl->model;
    int v = pl->chunks > 1 ? pl->chunks : 1;
    o->tp = plan_tp(pl);
    o->cp = plan_cp(pl);
    o->pp = pl->nstages / v;
    o->dp = pl->stages[0].replicas;
    o->global_batch = plan_minibatch(pl);
    o->microbatch_size = pl->microbatch_size;
    o->interleave = v;
    o->schedule = pl->schedule;
    o->recompute = pl->recompute;
    /* the interval layout3d_build derives (1 for full, else 0) as not given, so that a
     * what-if's recomputation gets its own default as with --model */
    int def = pl->recompute == RECOMPUTE_FULL ? 1 : 0;
    o->checkpoint_layers = pl->checkpoint_layers == def ? -1 : pl->checkpoint_layers;
    o->sequence_parallel = pl->sequence_parallel;
    o->zero = pl->zero;
    o->precision = pl->precision;
    o->cross_entropy = pl->cross_entropy;
    o->grad_accum = pl->grad_accum;
    o->p2p_sync = pl->p2p_sync;
    o->p2p_whole = pl->p2p_whole;
    o->grad_sync_end = pl->grad_sync_end;
    o->grad_reduce = pl->grad_reduce;
    o->optimizer_state = pl->optimizer_state;
    o->seq = m->tf->seq;
    o->attention = m->attention ? LLM_ATTN_FLASH : LLM_ATTN_STANDARD;
    o->balance = m->balance;
    o->split = m->split;
    o->pipeline_layout = m->pipeline_layout; /* borrowed from pl */
    return 0;
}
