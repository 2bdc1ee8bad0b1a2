/* runtime.c: executes a schedule's action lists with one thread per worker: per hosted
 * stage, activation slots for in-flight microbatches, received output gradients, saved
 * input gradients until they are sent, and stashed weight versions; then merges the
 * workers' losses, final weights and timed actions. */
#include "exec/runtime.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/runtime_trace.h"
#include "exec/stage.h"
#include "exec/tp.h"
#include "exec/train.h"

typedef struct slotinfo {
    int mb;                  /* global microbatch held, -1 when free */
    int bwd_done, dx_sent;
    int have_dout;           /* the output gradient arrived (RECV_B) */
    int in_peer, dout_peer;  /* posted RECV_F / RECV_B not yet taken: the sender; or -1 */
} slotinfo;

typedef struct rstage {
    int s, replica;
    int first, last;         /* holds the model input / the loss */
    stage *st;
    int nslots;
    slotinfo *slots;
    float **dout;            /* [nslots] received output gradients (not the loss stage) */
    float **dxst;            /* [nslots] input gradients awaiting SEND_B (not stage 0) */
    int cur;                 /* version of the weights in stage_params */
    int nver;
    int *last_use;           /* [nver] last list index using version v, -1 */
    float **stash;           /* [nver] kept copies of older versions */
    float **pool;            /* free stash buffers */
    int npool;
    long steps;
    int ar_round;
    int last_it;             /* iteration of the stage's latest microbatch action */
    int nsteps, nars;        /* the stage's STEP and ALLREDUCE actions in the list */
    int step_i, ar_i;        /* those run so far (this run) */
    int last_step;           /* list index of the stage's last STEP, -1 */
    long long off;           /* the stage's first parameter in the model's vector */
    int sharded;             /* ZeRO-1 with replicas: the optimizer state is a shard */
    int shard_ready;         /* sharded: the reduce-scatter filled the shard's gradients */
    long zero_round;         /* sharded: reduce-scatters and all-gathers so far (tags) */
} rstage;

typedef struct shared {
    pthread_mutex_t mu;
    plumb_err first;         /* the first failure of any worker */
    int *send_bound;         /* [W x W] schedule_send_bound of the messages that stage */
} shared;

typedef struct worker {
    const rt_cfg *cfg;
    shared *sh;
    transport *tr;
    int w;                   /* the schedule's worker */
    int rank, ep;            /* tensor-parallel rank in w's group; transport endpoint */
    int *tp_group;           /* [tp] the group's endpoints */
    int *dp_group;           /* [most replicas] scratch: a replicas' all-reduce group */
    long tp_round;           /* tensor-parallel all-reduces so far (their tags) */
    int cur_kind, cur_stage, cur_mb, cur_it; /* the action running: what its tp
                                                collectives record */
    float *grads_out;        /* want_grads: the model's gradients (rt_result.grads) */
    float *chk_params, *chk_grads; /* tp rank > 0: its whole view, replicated included */
    bk_ctx *ctx;
    int nst;
    rstage *st;
    float *hx;
    int32_t *hy;
    rt_recs recs;            /* timed actions and collectives (exec/runtime_trace.h) */
    double *loss, *corr, *rows; /* [iterations] */
    float *params_out;
    float *m_out, *v_out;    /* optimizer state out (want_state) */
    double t_origin;
    double peak;             /* the context's most allocated bytes; < 0 unknown */
    plumb_err err;
    int failed;
} worker;

double runtime_loss_scale(const schedule *s, int microbatch, int tps)
{
    double per = sched_traits_of(s->kind)->step_each_round
                     ? (double)s->replicas[s->nstages - 1] : (double)s->microbatches;
    return 1.0 / (per * microbatch * tps);
}

static rstage *find_stage(worker *wk, int s)
{
    for (int i = 0; i < wk->nst; i++)
        if (wk->st[i].s == s) return &wk->st[i];
    return NULL;
}

static int slot_of(rstage *rs, int mb)
{
    for (int i = 0; i < rs->nslots; i++)
        if (rs->slots[i].mb == mb) return i;
    return -1;
}

static int slot_open(rstage *rs, int mb)
{
    for (int i = 0; i < rs->nslots; i++)
        if (rs->slots[i].mb < 0) {
            rs->slots[i].mb = mb;
            rs->slots[i].bwd_done = 0;
            rs->slots[i].dx_sent = rs->first;
            rs->slots[i].have_dout = 0;
            rs->slots[i].in_peer = rs->slots[i].dout_peer = -1;
            return i;
        }
    return -1;
}

static void slot_maybe_close(rstage *rs, int i)
{
    if (rs->slots[i].bwd_done && rs->slots[i].dx_sent) rs->slots[i].mb = -1;
}

static int is_compute(int k) { return k == ACT_F || k == ACT_B || k == ACT_I || k == ACT_W; }

/* ZeRO-1, resuming: uploads the stage's range of the whole state full (host, the model's
 * vector; NULL: nothing) into the stage's gradients, which hold nothing yet, takes this
 * replica's shard into shard (device) and zeroes the gradients again. 0, or -1. */
static int shard_load(worker *wk, rstage *rs, float *shard, const float *full)
{
    if (!shard || !full) return 0;
    if (stage_put_full(rs->st, full + rs->off, stage_grads(rs->st), &wk->err)) return -1;
    stage_shard_take(rs->st, stage_grads(rs->st), shard);
    stage_zero_grads(rs->st);
    return 0;
}

/* Resuming: uploads the stage's range of the starting weights and optimizer state, and
 * sets its optimizer step count to start_iteration iterations' worth of its STEP actions
 * (every iteration of a drained schedule has the same number). */
static int stage_load_state(worker *wk, rstage *rs, const action *list, int n)
{
    const rt_cfg *c = wk->cfg;
    long long off = rs->off;
    long nsteps = 0;
    for (int i = 0; i < n; i++)
        if (list[i].stage == rs->s && list[i].kind == ACT_STEP) nsteps++;
    rs->steps = c->sched->iterations > 0 ? nsteps * c->start_iteration / c->sched->iterations
                                         : 0;
    if (c->init_params &&
        stage_put_full(rs->st, c->init_params + off, stage_params(rs->st), &wk->err))
        return -1;
    if ((c->init_m || c->init_v) && c->opt.kind != BK_SGD) {
        float *m = NULL, *v = NULL;
        if (stage_opt_state(rs->st, c->opt.kind, &m, &v, &wk->err)) return -1;
        if (rs->sharded) /* whole through the (still unused) gradients, then the shard */
            return shard_load(wk, rs, m, c->init_m) || shard_load(wk, rs, v, c->init_v) ? -1 : 0;
        if (m && c->init_m && stage_put_full(rs->st, c->init_m + off, m, &wk->err)) return -1;
        if (v && c->init_v && stage_put_full(rs->st, c->init_v + off, v, &wk->err)) return -1;
    }
    return 0;
}

/* Appends r to wk's timed actions. 0, or -1 out of memory (wk->err set). */
static int record_rec(worker *wk, rt_rec r)
{
    return rt_recs_add(&wk->recs, r) ? err_set(&wk->err, NULL, NULL, "out of memory") : 0;
}

static int record(worker *wk, const action *a, int it, double t0, double t1, double bytes)
{
    return record_rec(wk, (rt_rec){a->kind, a->stage, a->microbatch, a->peer, a->peer_stage,
                                   it, t0, t1, bytes});
}

/* Records a tensor-parallel collective (RT_REC_TP_*) of `bytes` that ran from t0 on, inside
 * the action running (its stage, microbatch and iteration); rc is the collective's. */
static int record_tp(worker *wk, int kind, double t0, double bytes, int rc)
{
    if (rc) { /* where it was: the transport knows only its message */
        char mb[32] = "";
        if (wk->cur_mb >= 0) snprintf(mb, sizeof mb, " of microbatch %d", wk->cur_mb);
        const char *what = kind == RT_REC_TP_AR ? "all-reduce"
                         : kind == RT_REC_TP_RS ? "reduce-scatter" : "all-gather";
        size_t len = strlen(wk->err.msg);
        if (strstr(wk->err.msg, what)) what = NULL; /* the transport named it */
        snprintf(wk->err.msg + len, sizeof wk->err.msg - len, ", in %s%s%sstage %d's %s%s",
                 what ? "the tensor-parallel " : "", what ? what : "", what ? " of " : "",
                 wk->cur_stage, act_kind_name((act_kind)wk->cur_kind), mb);
        return rc;
    }
    return record_rec(wk, (rt_rec){kind, wk->cur_stage, wk->cur_mb, -1, -1, wk->cur_it,
                                   t0 - wk->t_origin, train_now() - wk->t_origin, bytes});
}

/* stage_tp's all-reduce: the sum over wk's tensor-parallel group. */
static int tp_allreduce(void *user, float *buf, size_t count)
{
    worker *wk = user;
    const rt_cfg *c = wk->cfg;
    double t0 = train_now();
    return record_tp(wk, RT_REC_TP_AR, t0, (double)count * sizeof(float),
                     c->tr->allreduce(c->tr, c->bk, wk->ctx, wk->ep, wk->tp_group, c->tp,
                                      rt_tp_tag(wk->tp_round++), buf, count, &wk->err));
}

/* A reduce-scatter or all-gather entry of the transport (the same signature). */
typedef int (*tp_part_coll)(transport *t, const backend *bk, bk_ctx *ctx, int self,
                            const int *group, int n, long tag, const float *src, float *dst,
                            size_t count, plumb_err *err);

/* Runs coll over wk's tensor-parallel group in the all-reduces' tag sequence, recorded as
 * kind (the whole tensor's bytes). */
static int tp_part(worker *wk, int kind, tp_part_coll coll, const float *src, float *dst,
                   size_t count)
{
    const rt_cfg *c = wk->cfg;
    double t0 = train_now();
    return record_tp(wk, kind, t0, (double)count * c->tp * sizeof(float),
                     coll(c->tr, c->bk, wk->ctx, wk->ep, wk->tp_group, c->tp,
                          rt_tp_tag(wk->tp_round++), src, dst, count, &wk->err));
}

/* stage_tp's reduce-scatter and all-gather over wk's tensor-parallel group. */
static int tp_reduce_scatter(void *user, const float *src, float *dst, size_t count)
{
    worker *wk = user;
    return tp_part(wk, RT_REC_TP_RS, wk->cfg->tr->reduce_scatter, src, dst, count);
}

static int tp_all_gather(void *user, const float *src, float *dst, size_t count)
{
    worker *wk = user;
    return tp_part(wk, RT_REC_TP_AG, wk->cfg->tr->all_gather, src, dst, count);
}

/* Writes v (a device vector of rs: weights, gradients, optimizer state) into the model's
 * vector out: this rank's shards, the replicated layers from rank 0; and a rank > 0's
 * replicated layers into chk (when not NULL), for the check that they equal rank 0's. */
static int stage_out(worker *wk, rstage *rs, const float *v, float *out, float *chk)
{
    int which = STAGE_SHARDS | (wk->rank == 0 ? STAGE_REPLICATED : 0);
    if (stage_get_full(rs->st, v, out + rs->off, which, &wk->err)) return -1;
    return chk ? stage_get_full(rs->st, v, chk + rs->off, STAGE_REPLICATED, &wk->err) : 0;
}

static int stage_init(worker *wk, rstage *rs, int s, int replica)
{
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    const action *list = sc->acts[wk->w];
    int n = sc->len[wk->w], split = 0, maxv = 0;
    rs->s = s;
    rs->replica = replica;
    rs->first = c->stage_first[s] == 0;
    rs->last = c->stage_last[s] == c->m->nlayers - 1;
    for (int i = 0; i < n; i++)
        if (list[i].stage == s) {
            split |= list[i].kind == ACT_I || list[i].kind == ACT_W;
            if (list[i].version > maxv) maxv = list[i].version;
        }
    rs->nslots = schedule_slots(sc, wk->w, s);
    rs->off = c->m->layers[c->stage_first[s]].param_offset;
    rs->last_step = -1;
    for (int i = 0; i < n; i++)
        if (list[i].stage == s && list[i].kind == ACT_STEP) rs->last_step = i, rs->nsteps++;
        else if (list[i].stage == s && list[i].kind == ACT_ALLREDUCE) rs->nars++;
    stage_tp tpc = {wk->rank, c->tp, c->sp, tp_allreduce, wk, tp_reduce_scatter,
                    tp_all_gather};
    /* the first stage's input is the data: its gradient is not wanted */
    rs->sharded = c->zero && c->sched->replicas[s] > 1;
    stage_opts so = {split, c->recompute, c->tp > 1 ? &tpc : NULL, rs->first,
                     rs->sharded ? c->sched->replicas[s] : 0, replica};
    rs->st = stage_create_opts(c->bk, wk->ctx, c->m, c->stage_first[s], c->stage_last[s],
                               c->microbatch, rs->nslots, &so, &wk->err);
    if (!rs->st) return -1;
    if (stage_load_state(wk, rs, list, n)) return -1;
    rs->slots = calloc((size_t)rs->nslots, sizeof *rs->slots);
    rs->nver = maxv + 2;
    rs->last_use = malloc((size_t)rs->nver * sizeof *rs->last_use);
    rs->stash = calloc((size_t)rs->nver, sizeof *rs->stash);
    rs->pool = calloc((size_t)rs->nver, sizeof *rs->pool);
    rs->dout = calloc((size_t)rs->nslots, sizeof *rs->dout);
    rs->dxst = calloc((size_t)rs->nslots, sizeof *rs->dxst);
    if (!rs->slots || !rs->last_use || !rs->stash || !rs->pool || !rs->dout || !rs->dxst)
        return err_set(&wk->err, NULL, NULL, "out of memory");
    for (int i = 0; i < rs->nslots; i++) rs->slots[i].mb = -1;
    for (int v = 0; v < rs->nver; v++) rs->last_use[v] = -1;
    for (int i = 0; i < n; i++)
        if (list[i].stage == s && is_compute(list[i].kind) && list[i].version >= 0)
            rs->last_use[list[i].version] = i;
    size_t ob = (size_t)c->microbatch * stage_out_numel(rs->st) * sizeof(float);
    size_t ib = (size_t)c->microbatch * stage_in_numel(rs->st) * sizeof(float);
    for (int i = 0; i < rs->nslots; i++) {
        if (!rs->last && !(rs->dout[i] = c->bk->alloc(wk->ctx, ob, &wk->err))) return -1;
        if (!rs->first && !(rs->dxst[i] = c->bk->alloc(wk->ctx, ib, &wk->err))) return -1;
    }
    return 0;
}

static void stage_fini(worker *wk, rstage *rs)
{
    const backend *bk = wk->cfg->bk;
    for (int i = 0; rs->dout && i < rs->nslots; i++) bk->free(wk->ctx, rs->dout[i]);
    for (int i = 0; rs->dxst && i < rs->nslots; i++) bk->free(wk->ctx, rs->dxst[i]);
    for (int v = 0; rs->stash && v < rs->nver; v++) bk->free(wk->ctx, rs->stash[v]);
    for (int i = 0; rs->pool && i < rs->npool; i++) bk->free(wk->ctx, rs->pool[i]);
    free(rs->dout);
    free(rs->dxst);
    free(rs->stash);
    free(rs->pool);
    free(rs->last_use);
    free(rs->slots);
    stage_free(rs->st);
}

static const float *params_of(worker *wk, rstage *rs, int v)
{
    if (v == rs->cur || v < 0) return stage_params(rs->st);
    if (v < rs->nver && rs->stash[v]) return rs->stash[v];
    err_set(&wk->err, NULL, NULL, "worker %d: stage %d: weight version %d is not kept "
            "(current %d)", wk->w, rs->s, v, rs->cur);
    return NULL;
}

/* After the list's i-th action used version v: drop its stash when no longer needed. */
static void release_version(worker *wk, rstage *rs, int v, int i)
{
    if (v < 0 || v >= rs->nver || v == rs->cur || rs->last_use[v] != i || !rs->stash[v])
        return;
    rs->pool[rs->npool++] = rs->stash[v];
    rs->stash[v] = NULL;
    (void)wk;
}

/* Fills wk->dp_group with the endpoints of stage s's replicas at wk's tensor-parallel
 * rank (the group of its replicas' collectives); returns how many. */
static int dp_group_of(worker *wk, int s)
{
    const schedule *sc = wk->cfg->sched;
    const int *grp = sc->stage_workers + sc->stage_first[s];
    for (int j = 0; j < sc->replicas[s]; j++) wk->dp_group[j] = grp[j] * wk->cfg->tp + wk->rank;
    return sc->replicas[s];
}

/* ZeRO-1: all-gathers every replica's shard (shard: this one's, stage_shard_count floats;
 * may be full's own part) into full (a padded vector of rs: weights, gradients) over the
 * stage's replicas, as the stage's next collective. 0, or -1 with wk->err set. */
static int shard_gather(worker *wk, rstage *rs, const float *shard, float *full)
{
    const rt_cfg *c = wk->cfg;
    int r = dp_group_of(wk, rs->s);
    return c->tr->all_gather(c->tr, c->bk, wk->ctx, wk->ep, wk->dp_group, r,
                             rt_zero_tag(rs->s, rs->zero_round++), shard, full,
                             (size_t)stage_shard_count(rs->st), &wk->err);
}

/* ZeRO-1: the gradients' sum over the replicas, this replica's shard of it only (a
 * reduce-scatter into stage_shard_grads), in place of the all-reduce. 0, or -1. */
static int shard_reduce(worker *wk, rstage *rs)
{
    const rt_cfg *c = wk->cfg;
    stage_tp_finish_grads(rs->st); /* what do_step does before the step, done before the sum */
    stage_settle_grads(rs->st);
    int r = dp_group_of(wk, rs->s);
    if (c->tr->reduce_scatter(c->tr, c->bk, wk->ctx, wk->ep, wk->dp_group, r,
                              rt_zero_tag(rs->s, rs->zero_round++), stage_grads(rs->st),
                              stage_shard_grads(rs->st), (size_t)stage_shard_count(rs->st),
                              &wk->err))
        return -1;
    rs->shard_ready = 1;
    return 0;
}

static int do_step(worker *wk, rstage *rs, const action *a, int i)
{
    const rt_cfg *c = wk->cfg;
    size_t bytes = (size_t)stage_nparams(rs->st) * sizeof(float);
    if (rs->cur < rs->nver && rs->last_use[rs->cur] > i) {
        float *buf = rs->npool ? rs->pool[--rs->npool] : c->bk->alloc(wk->ctx, bytes, &wk->err);
        if (!buf) return -1;
        c->bk->copy(wk->ctx, buf, stage_params(rs->st), bytes);
        rs->stash[rs->cur] = buf;
    }
    if (rs->sharded && !rs->shard_ready)
        return err_set(&wk->err, NULL, NULL, "worker %d: stage %d: STEP under zero 1 without "
                       "the replicas' ALLREDUCE before it", wk->w, rs->s);
    if (!rs->sharded)
        stage_tp_finish_grads(rs->st); /* sequence parallelism: the norms' shares summed */
    /* zero 1: the summed gradients are shards: gathered whole where they are wanted */
    if (c->want_grads && i == rs->last_step && rs->sharded &&
        shard_gather(wk, rs, stage_shard_grads(rs->st), stage_grads(rs->st)))
        return -1;
    if (c->want_grads && i == rs->last_step && rs->replica == 0 &&
        stage_out(wk, rs, stage_grads(rs->st), wk->grads_out, wk->chk_grads))
        return -1;
    bk_opt o = c->opt;
    o.step = ++rs->steps;
    if (stage_step(rs->st, &o, &wk->err)) return -1;
    if (rs->sharded) { /* every replica's stepped shard, to every replica */
        float *p = stage_params(rs->st);
        if (shard_gather(wk, rs, p + (size_t)stage_shard_index(rs->st) *
                                         (size_t)stage_shard_count(rs->st), p))
            return -1;
        rs->shard_ready = 0;
    }
    stage_zero_grads(rs->st);
    rs->cur = a->version >= 0 ? a->version : rs->cur + 1;
    return 0;
}


/* Megatron-LM's scatter/gather of pipeline messages: the floats of the tensor crossing
 * the cut after layer `after` (an activation, or its gradient the other way) that each
 * tensor-parallel rank sends, 1 / tp of it, when that tensor is whole and the same bits
 * on every rank of the group (the receiving ranks all-gather it); 0 when each rank sends
 * the whole (tp 1), its own (the output layer's logits, column-parallel, to the loss), or
 * already its share of the sequence (sequence parallelism). */
static size_t sliced_floats(const rt_cfg *c, int after, size_t floats)
{
    if (c->tp < 2 || c->sp || floats % (size_t)c->tp || tp_layer_role(c->m, after) == TP_COL)
        return 0;
    return floats / (size_t)c->tp;
}

/* Takes the data of the receive posted in slot `slot` of rs for microbatch g: the input
 * activations (grad 0) or the output gradient (grad 1), blocking until it has arrived;
 * a sliced message (sliced_floats) is all-gathered over the group in place. 0, or -1
 * with wk->err set. */
static int take_posted(worker *wk, rstage *rs, int slot, int g, int grad)
{
    const rt_cfg *c = wk->cfg;
    slotinfo *si = &rs->slots[slot];
    size_t n = (size_t)c->microbatch *
               (size_t)(grad ? stage_out_numel(rs->st) : stage_in_numel(rs->st));
    size_t part = sliced_floats(c, grad ? c->stage_last[rs->s] : c->stage_first[rs->s] - 1, n);
    float *buf = grad ? rs->dout[slot] : stage_input(rs->st, slot),
          *mine = buf + (size_t)wk->rank * part;
    int peer = grad ? si->dout_peer : si->in_peer;
    if (c->tr->recv(c->tr, c->bk, wk->ctx, wk->ep, peer * c->tp + wk->rank,
                    rt_msg_tag(c->sched, g, rs->s, grad), mine, (part ? part : n) * sizeof(float),
                    &wk->err))
        return -1;
    if (part && tp_all_gather(wk, mine, buf, part)) return -1;
    if (grad) si->dout_peer = -1, si->have_dout = 1;
    else si->in_peer = -1;
    return 0;
}

/* An injected failure (PLUMB_FAULT) at this worker's step: SIGKILL, a stall past the
 * receive timeout, or an error. Returns -1 with wk->err set (when it returns at all). */
static int inject_fault(worker *wk)
{
    const rt_cfg *c = wk->cfg;
    if (c->fault.mode == RT_FAULT_KILL) {
        fprintf(stderr, "plumb: worker %d: injected fault: SIGKILL at step %ld "
                "(PLUMB_FAULT)\n", wk->w, c->fault.step);
        fflush(stderr);
        raise(SIGKILL);
    }
    if (c->fault.mode == RT_FAULT_STALL) {
        double lim = transport_timeout_s(c->timeout_s) + 5, t0 = train_now();
        while (train_now() - t0 < lim) {
            struct timespec ts = {0, 100000000L};
            nanosleep(&ts, NULL);
        }
        return err_set(&wk->err, NULL, NULL, "worker %d: injected stall at step %ld "
                       "(PLUMB_FAULT)", wk->w, c->fault.step);
    }
    return err_set(&wk->err, NULL, NULL, "worker %d: injected fault at step %ld "
                   "(PLUMB_FAULT)", wk->w, c->fault.step);
}

/* Action F of microbatch a->microbatch (global gbase + g) on stage rs: takes the posted
 * input, or opens a slot (the first stage; a stage whose predecessor is on this worker
 * copies its output), loads the batch at the ends, runs the forward and, on the last
 * stage, adds the loss. *slot is the microbatch's slot (opened here when < 0); *t0 is
 * moved past a wait for the input. Returns 0, 1 when no slot could be had, -1 with
 * wk->err set. */
static int act_forward(worker *wk, rstage *rs, const action *a, long gbase, int *slot,
                       double *t0)
{
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    const backend *bk = c->bk;
    const int mb = c->microbatch, tps = model_targets_per_sample(c->m), g = a->microbatch;
    if (*slot >= 0 && rs->slots[*slot].in_peer >= 0) {
        if (take_posted(wk, rs, *slot, g, 0)) return -1;
        *t0 = train_now();
    }
    if (*slot < 0 && rs->first) *slot = slot_open(rs, g);
    if (*slot < 0 && !rs->first) {
        /* the previous stage on this same worker hands its output over directly */
        rstage *prev = find_stage(wk, a->stage - 1);
        int ps = prev ? slot_of(prev, g) : -1;
        if (ps >= 0 && (*slot = slot_open(rs, g)) >= 0)
            bk->copy(wk->ctx, stage_input(rs->st, *slot), stage_output(prev->st, ps),
                     (size_t)mb * stage_in_numel(rs->st) * sizeof(float));
    }
    if (*slot < 0) return 1;
    if (rs->first || rs->last) {
        if (c->batch(c->batch_user, (int)(gbase + g), wk->hx, wk->hy, &wk->err))
            return -1;
        if (rs->first) stage_map_input(rs->st, wk->hx, mb);
        if (rs->first)
            bk->upload(wk->ctx, stage_input(rs->st, *slot), wk->hx,
                       (size_t)mb * stage_in_numel(rs->st) * sizeof(float));
        if (rs->last)
            bk->upload(wk->ctx, stage_targets(rs->st, *slot), wk->hy,
                       (size_t)mb * tps * sizeof(int32_t));
    }
    const float *P = params_of(wk, rs, a->version);
    if (!P) return -1;
    stage_forward(rs->st, *slot, mb, P);
    if (stage_failed(rs->st)) return -1;
    if (rs->last && wk->rank == 0) { /* tensor-parallel ranks compute the same loss */
        double l, k;
        if (stage_loss(rs->st, *slot, mb, &l, &k, &wk->err)) return -1;
        int it = g / sc->microbatches;
        wk->loss[it] += l;
        wk->corr[it] += k;
        wk->rows[it] += (double)mb * tps;
        if (c->on_loss)
            c->on_loss(c->on_loss_user, (int)(c->start_iteration + it), l, k,
                       (double)mb * tps);
    }
    return 0;
}

/* Action B (or I, the input gradient only) of microbatch a->microbatch in slot `slot` of
 * stage rs: takes the posted output gradient (or the next stage's, on this same worker),
 * runs the backward, keeps the input gradient to send, and releases the weights version
 * and the slot when done. *t0 is moved past a wait for the gradient. Returns 0 or -1 with
 * wk->err set. */
static int act_backward(worker *wk, rstage *rs, const action *a, int i, int slot, double *t0)
{
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    const backend *bk = c->bk;
    const int mb = c->microbatch, tps = model_targets_per_sample(c->m), g = a->microbatch;
    if (rs->slots[slot].dout_peer >= 0) {
        if (take_posted(wk, rs, slot, g, 1)) return -1;
        *t0 = train_now();
    }
    const float *P = params_of(wk, rs, a->version);
    if (!P) return -1;
    float scale = (float)runtime_loss_scale(sc, mb, tps);
    if (!rs->last && !rs->slots[slot].have_dout) {
        /* the next stage on this same worker hands its input gradient over directly */
        rstage *next = find_stage(wk, a->stage + 1);
        int ns = next ? slot_of(next, g) : -1;
        if (ns < 0)
            return err_set(&wk->err, NULL, NULL, "worker %d: %s of stage %d, microbatch "
                           "%d, before its output gradient arrived", wk->w,
                           act_kind_name((act_kind)a->kind), a->stage, g);
        bk->copy(wk->ctx, rs->dout[slot], next->dxst[ns],
                 (size_t)mb * stage_out_numel(rs->st) * sizeof(float));
        rs->slots[slot].have_dout = 1;
        next->slots[ns].dx_sent = 1;
        slot_maybe_close(next, ns);
    }
    const float *dout = rs->last ? NULL : rs->dout[slot];
    if (a->kind == ACT_B) stage_backward(rs->st, slot, mb, P, dout, scale);
    else stage_backward_input(rs->st, slot, mb, P, dout, scale);
    if (stage_failed(rs->st)) return -1;
    if (!rs->first)
        bk->copy(wk->ctx, rs->dxst[slot], stage_input_grad(rs->st),
                 (size_t)mb * stage_in_numel(rs->st) * sizeof(float));
    if (a->kind == ACT_B) rs->slots[slot].bwd_done = 1;
    release_version(wk, rs, a->version, i);
    slot_maybe_close(rs, slot);
    return 0;
}

static int run_action(worker *wk, const action *a, int i)
{
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    const backend *bk = c->bk;
    const int mb = c->microbatch;
    rstage *rs = find_stage(wk, a->stage);
    if (!rs)
        return err_set(&wk->err, NULL, NULL, "worker %d: action on stage %d, which it does "
                       "not host", wk->w, a->stage);
    int g = a->microbatch, slot = g >= 0 ? slot_of(rs, g) : -1;
    if (g >= 0) rs->last_it = g / sc->microbatches;
    /* a step or all-reduce names no microbatch: the k-th of the stage's n belongs to
     * iteration k T / n (every iteration has as many), not to the latest microbatch's,
     * which may be the next iteration's already */
    int it = a->kind == ACT_STEP ? rs->step_i++ * sc->iterations / rs->nsteps
           : a->kind == ACT_ALLREDUCE ? rs->ar_i++ * sc->iterations / rs->nars : rs->last_it;
    wk->cur_kind = a->kind, wk->cur_stage = a->stage, wk->cur_mb = g, wk->cur_it = it;
    if (c->fault.worker == wk->w && wk->rank == 0 && c->fault.step > 0 && g >= 0 &&
        c->start_iteration + g / sc->microbatches + 1 == c->fault.step)
        return inject_fault(wk);
    const long gbase = c->start_iteration * sc->microbatches; /* global microbatch of g = 0 */
    double bytes = 0, t0 = train_now();
    switch (a->kind) {
    case ACT_RECV_F:
        /* posted: the slot holds the buffer; F takes the data (take_posted) */
        if (slot < 0) slot = slot_open(rs, g);
        if (slot < 0) goto noslot;
        rs->slots[slot].in_peer = a->peer;
        break;
    case ACT_F: {
        int rc = act_forward(wk, rs, a, gbase, &slot, &t0);
        if (rc < 0) return -1;
        if (rc > 0) goto noslot;
        break;
    }
    case ACT_SEND_F: {
        if (slot < 0) goto noslot;
        size_t n = (size_t)mb * stage_out_numel(rs->st),
               part = sliced_floats(c, c->stage_last[rs->s], n);
        bytes = (double)(part ? part : n) * sizeof(float);
        /* the output stays in its slot until this microbatch's gradient is back from the
         * peer, which received it first: the transport may copy straight out of it */
        if ((c->tr->send_lent ? c->tr->send_lent : c->tr->send)(
                c->tr, bk, wk->ctx, wk->ep, a->peer * c->tp + wk->rank,
                rt_msg_tag(sc, g, a->peer_stage, 0),
                stage_output(rs->st, slot) + (size_t)wk->rank * part, (size_t)bytes,
                &wk->err))
            return -1;
        break;
    }
    case ACT_RECV_B:
        /* posted: B or I takes the data (take_posted) */
        if (slot < 0) goto noslot;
        rs->slots[slot].dout_peer = a->peer;
        break;
    case ACT_B:
    case ACT_I:
        if (slot < 0) goto noslot;
        if (act_backward(wk, rs, a, i, slot, &t0)) return -1;
        break;
    case ACT_W:
        if (slot < 0) goto noslot;
        stage_backward_weight(rs->st, slot, mb);
        if (stage_failed(rs->st)) return -1;
        rs->slots[slot].bwd_done = 1;
        release_version(wk, rs, a->version, i);
        slot_maybe_close(rs, slot);
        break;
    case ACT_SEND_B: {
        if (slot < 0) goto noslot;
        size_t n = (size_t)mb * stage_in_numel(rs->st),
               part = sliced_floats(c, c->stage_first[rs->s] - 1, n);
        bytes = (double)(part ? part : n) * sizeof(float);
        if (c->tr->send(c->tr, bk, wk->ctx, wk->ep, a->peer * c->tp + wk->rank,
                        rt_msg_tag(sc, g, a->peer_stage, 1),
                        rs->dxst[slot] + (size_t)wk->rank * part, (size_t)bytes, &wk->err))
            return -1;
        rs->slots[slot].dx_sent = 1;
        slot_maybe_close(rs, slot);
        break;
    }
    case ACT_ALLREDUCE: {
        /* among the replicas' ranks of this tensor-parallel rank */
        bytes = (double)stage_nparams(rs->st) * sizeof(float);
        if (rs->sharded) {
            if (shard_reduce(wk, rs)) return -1;
            break;
        }
        dp_group_of(wk, a->stage);
        if (c->tr->allreduce(c->tr, bk, wk->ctx, wk->ep, wk->dp_group, sc->replicas[a->stage],
                             rt_ar_tag(a->stage, rs->ar_round++), stage_grads(rs->st),
                             (size_t)stage_nparams(rs->st), &wk->err))
            return -1;
        break;
    }
    case ACT_STEP:
        if (do_step(wk, rs, a, i)) return -1;
        break;
    default:
        return err_set(&wk->err, NULL, NULL, "worker %d: unknown action kind %d", wk->w,
                       a->kind);
    }
    if (bk->sync(wk->ctx, &wk->err)) return -1;
    if (a->kind != ACT_RECV_F && a->kind != ACT_RECV_B)
        return record(wk, a, it, t0 - wk->t_origin, train_now() - wk->t_origin, bytes);
    return 0;
noslot:
    return err_set(&wk->err, NULL, NULL, "worker %d: action %d (kind %s, stage %d, "
                   "microbatch %d) has no activation slot: the schedule is not well formed",
                   wk->w, i, act_kind_name((act_kind)a->kind), a->stage, g);
}

static void fail(worker *wk)
{
    wk->failed = 1;
    pthread_mutex_lock(&wk->sh->mu);
    if (!wk->sh->first.msg[0]) wk->sh->first = wk->err;
    pthread_mutex_unlock(&wk->sh->mu);
    wk->cfg->tr->abort(wk->cfg->tr, wk->err.msg);
}

/* Has the transport set aside the staging of every pair wk sends on: as many messages as
 * can be in flight on it (schedule_send_bound), each the size of the pair's largest; lent
 * activations need none. */
static int reserve_staging(worker *wk)
{
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    const int W = sc->nworkers;
    if (!c->tr->reserve) return 0;
    size_t *bytes = calloc((size_t)W, sizeof *bytes); /* per peer: the largest message */
    if (!bytes) return err_set(&wk->err, NULL, NULL, "out of memory");
    for (int i = 0; i < sc->len[wk->w]; i++) {
        const action *a = &sc->acts[wk->w][i];
        if (a->peer < 0 || a->peer >= W ||
            !(a->kind == ACT_SEND_B || (a->kind == ACT_SEND_F && !c->tr->send_lent)))
            continue;
        rstage *rs = find_stage(wk, a->stage);
        if (!rs) continue;
        size_t n = a->kind == ACT_SEND_F ? stage_out_numel(rs->st) : stage_in_numel(rs->st);
        if ((size_t)c->microbatch * n * sizeof(float) > bytes[a->peer])
            bytes[a->peer] = (size_t)c->microbatch * n * sizeof(float);
    }
    int rc = 0;
    for (int to = 0; to < W && !rc; to++) {
        int count = wk->sh->send_bound[wk->w * W + to];
        if (count > 0 && bytes[to])
            rc = c->tr->reserve(c->tr, c->bk, wk->ctx, wk->ep, to * c->tp + wk->rank, count,
                                bytes[to], &wk->err);
    }
    free(bytes);
    return rc;
}

/* ZeRO-1, want_state: each optimizer state vector gathered whole over the stage's replicas
 * (every replica takes part, in the order of its stages, as every replica of them does)
 * into the stage's gradients, free after the run's last step, so that the gather needs
 * no memory of its own; replica 0 writes it out. 0, or -1 with wk->err set. */
static int state_out_sharded(worker *wk, rstage *rs)
{
    const rt_cfg *c = wk->cfg;
    float *m = NULL, *v = NULL, *buf = stage_grads(rs->st);
    if (stage_opt_state(rs->st, c->opt.kind, &m, &v, &wk->err)) return -1;
    if (m && (shard_gather(wk, rs, m, buf) ||
              (rs->replica == 0 && stage_out(wk, rs, buf, wk->m_out, NULL))))
        return -1;
    if (v && (shard_gather(wk, rs, v, buf) ||
              (rs->replica == 0 && stage_out(wk, rs, buf, wk->v_out, NULL))))
        return -1;
    stage_zero_grads(rs->st);
    return 0;
}

static void *worker_main(void *arg)
{
    worker *wk = arg;
    const rt_cfg *c = wk->cfg;
    const schedule *sc = c->sched;
    int dev = c->worker_device ? c->worker_device[wk->w] : 0;
    if (!(wk->ctx = c->bk->create(dev, &wk->err))) { fail(wk); return NULL; }
    int n = 0, maxrep = 1;
    for (int s = 0; s < sc->nstages; s++) {
        if (sc->replicas[s] > maxrep) maxrep = sc->replicas[s];
        for (int j = 0; j < sc->replicas[s]; j++)
            if (sc->stage_workers[sc->stage_first[s] + j] == wk->w) n++;
    }
    wk->st = calloc((size_t)(n ? n : 1), sizeof *wk->st);
    wk->tp_group = malloc((size_t)c->tp * sizeof *wk->tp_group);
    wk->dp_group = malloc((size_t)maxrep * sizeof *wk->dp_group);
    size_t numel = shape_numel(c->m->in_ndim, c->m->in_shape);
    int tps = model_targets_per_sample(c->m);
    if (!wk->st || !wk->tp_group || !wk->dp_group) {
        err_set(&wk->err, NULL, NULL, "out of memory");
        fail(wk);
        return NULL;
    }
    for (int r = 0; r < c->tp; r++) wk->tp_group[r] = wk->w * c->tp + r;
    /* the microbatch's data, gathered here and uploaded from here (page-locked on a GPU:
     * the upload is a DMA; the sync that ends each action keeps it unchanged until read) */
    wk->hx = bk_host_alloc(c->bk, wk->ctx, (size_t)c->microbatch * numel * sizeof *wk->hx,
                           &wk->err);
    wk->hy = wk->hx ? bk_host_alloc(c->bk, wk->ctx, (size_t)c->microbatch * tps *
                                                       sizeof *wk->hy, &wk->err) : NULL;
    if (!wk->hy) {
        fail(wk);
        return NULL;
    }
    for (int s = 0; s < sc->nstages; s++)
        for (int j = 0; j < sc->replicas[s]; j++)
            if (sc->stage_workers[sc->stage_first[s] + j] == wk->w) {
                if (stage_init(wk, &wk->st[wk->nst++], s, j)) { fail(wk); return NULL; }
            }
    if (reserve_staging(wk)) { fail(wk); return NULL; }
    for (int i = 0; i < sc->len[wk->w]; i++)
        if (run_action(wk, &sc->acts[wk->w][i], i)) { fail(wk); return NULL; }
    for (int k = 0; k < wk->nst; k++) {
        rstage *rs = &wk->st[k];
        if (rs->sharded && c->want_state && c->opt.kind != BK_SGD) {
            if (state_out_sharded(wk, rs)) { fail(wk); return NULL; }
            if (rs->replica == 0 &&
                stage_out(wk, rs, stage_params(rs->st), wk->params_out, wk->chk_params)) {
                fail(wk);
                return NULL;
            }
            continue;
        }
        if (rs->replica != 0) continue;
        if (stage_out(wk, rs, stage_params(rs->st), wk->params_out, wk->chk_params)) {
            fail(wk);
            return NULL;
        }
        if (c->want_state && c->opt.kind != BK_SGD) {
            float *m = NULL, *v = NULL;
            if (stage_opt_state(rs->st, c->opt.kind, &m, &v, &wk->err) ||
                (m && stage_out(wk, rs, m, wk->m_out, NULL)) ||
                (v && stage_out(wk, rs, v, wk->v_out, NULL))) {
                fail(wk);
                return NULL;
            }
        }
    }
    if (c->bk->sync(wk->ctx, &wk->err)) fail(wk);
    if (c->bk->mem_peak) wk->peak = (double)c->bk->mem_peak(wk->ctx);
    return NULL;
}

static int check_cfg(const rt_cfg *c, plumb_err *err)
{
    const schedule *s = c->sched;
    if (c->microbatch < 1)
        return err_set(err, NULL, NULL, "runtime: expected a microbatch of at least 1 sample");
    int expect = 0;
    for (int i = 0; i < s->nstages; i++) {
        if (c->stage_first[i] != expect || c->stage_last[i] < c->stage_first[i] ||
            c->stage_last[i] >= c->m->nlayers)
            return err_set(err, NULL, "stages",
                           "stage %d: expected layers starting at %d, ending before %d "
                           "(got %d..%d)",
                           i, expect, c->m->nlayers, c->stage_first[i], c->stage_last[i]);
        expect = c->stage_last[i] + 1;
    }
    if (expect != c->m->nlayers)
        return err_set(err, NULL, "stages", "expected the stages to cover all %d layers "
                       "(they end at layer %d)", c->m->nlayers, expect - 1);
    if (c->tp > 1 && tp_check(c->m, c->tp, c->m->name, err)) return -1;
    if (c->sp && (c->tp < 2 || tp_check_seq(c->m, c->tp, c->m->name, err)))
        return c->tp < 2 ? err_set(err, NULL, "sp", "runtime: sequence parallelism needs tp "
                                   ">= 2 (got %d)", c->tp) : -1;
    return 0;
}

static int build_trace(const rt_cfg *c, worker *wks, timeline *tl)
{
    for (int e = 0; e < c->sched->nworkers * c->tp; e++) {
        const worker *wr = &wks[e];
        int dev = c->trace_device ? c->trace_device[wr->w] : wr->w;
        if (runtime_trace_add(tl, &wr->recs, dev, c->trace_device, wr->rank, wr->peak))
            return -1;
    }
    if (runtime_trace_names(c->sched, c->trace_device, c->tp, tl)) return -1;
    timeline_sort(tl);
    return 0;
}

/* Points wk's outputs at res and allocates its own (T iterations' losses; a tensor-parallel
 * rank > 0's view of the replicated layers, NaN elsewhere). 0, or -1 out of memory. */
static int worker_outputs(worker *wk, rt_result *res, int T)
{
    const rt_cfg *c = wk->cfg;
    wk->params_out = res->params;
    wk->m_out = res->opt_m;
    wk->v_out = res->opt_v;
    wk->grads_out = res->grads;
    wk->loss = calloc((size_t)T, sizeof(double));
    wk->corr = calloc((size_t)T, sizeof(double));
    wk->rows = calloc((size_t)T, sizeof(double));
    if (!wk->loss || !wk->corr || !wk->rows) return -1;
    if (wk->rank == 0) return 0;
    size_t n = (size_t)c->m->nparams + 1;
    wk->chk_params = malloc(n * sizeof(float));
    wk->chk_grads = c->want_grads ? malloc(n * sizeof(float)) : NULL;
    if (!wk->chk_params || (c->want_grads && !wk->chk_grads)) return -1;
    for (size_t i = 0; i < n; i++) {
        wk->chk_params[i] = NAN;
        if (wk->chk_grads) wk->chk_grads[i] = NAN;
    }
    return 0;
}

/* Largest |chk - ref| over the replicated values a rank > 0 wrote into chk (the rest of chk
 * is NaN) in its stages' ranges. */
static double range_diff(const worker *wk, const float *chk, const float *ref)
{
    double d = 0;
    for (int k = 0; chk && ref && k < wk->nst; k++) {
        const rstage *rs = &wk->st[k];
        if (rs->replica != 0) continue;
        for (long long i = rs->off; i < rs->off + stage_full_nparams(rs->st); i++) {
            double x = fabs((double)chk[i] - (double)ref[i]);
            if (!isnan(chk[i]) && !(x <= d)) d = x; /* a NaN in ref propagates */
        }
    }
    return d;
}

/* rt_result's tp_weight_diff and tp_grad_diff: each rank > 0's replicated layers against
 * rank 0's in the result. */
static void tp_replica_diffs(const rt_cfg *c, const worker *wks, int E, rt_result *res)
{
    for (int e = 0; e < E; e++) {
        if (wks[e].rank == 0) continue;
        double a = range_diff(&wks[e], wks[e].chk_params, res->params),
               b = range_diff(&wks[e], wks[e].chk_grads, res->grads);
        if (!(a <= res->tp_weight_diff)) res->tp_weight_diff = a;
        if (!(b <= res->tp_grad_diff)) res->tp_grad_diff = b;
    }
    (void)c;
}

int runtime_run(const rt_cfg *cfg, rt_result *res, plumb_err *err)
{
    memset(res, 0, sizeof *res);
    if (check_cfg(cfg, err)) return -1;
    const schedule *s = cfg->sched;
    rt_cfg c = *cfg;
    c.tp = c.tp > 1 ? c.tp : 1;
    transport *own = NULL;
    int W = s->nworkers, T = s->iterations, rc = -1, E = W * c.tp; /* transport endpoints */
    if (!c.tr && !(own = c.tr = transport_local_create(E, c.timeout_s, err)))
        return -1;
    shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    /* every transport's sends are buffered: lists that would wait for ever even so are
     * refused before any worker starts; the counts size what `reserve` sets aside
     * (activations are lent where the transport can: then only gradients stage) */
    unsigned kinds = 1u << ACT_SEND_B | (c.tr->send_lent ? 0u : 1u << ACT_SEND_F);
    if (!(sh.send_bound = malloc((size_t)W * W * sizeof *sh.send_bound)) ||
        schedule_send_bound(s, kinds, sh.send_bound, err)) {
        if (!sh.send_bound) err_set(err, NULL, NULL, "out of memory");
        free(sh.send_bound);
        pthread_mutex_destroy(&sh.mu);
        if (own) own->destroy(own);
        return -1;
    }
    worker *wks = calloc((size_t)E, sizeof *wks);
    pthread_t *th = calloc((size_t)E, sizeof *th);
    int *started = calloc((size_t)E, sizeof *started);
    res->iterations = T;
    res->loss = calloc((size_t)T, sizeof *res->loss);
    res->acc = calloc((size_t)T, sizeof *res->acc);
    res->params = calloc((size_t)c.m->nparams + 1, sizeof *res->params);
    res->trace = timeline_new("exec");
    res->peak_bytes = malloc((size_t)W * sizeof *res->peak_bytes);
    if (c.want_state && c.opt.kind != BK_SGD) {
        res->opt_m = calloc((size_t)c.m->nparams + 1, sizeof *res->opt_m);
        if (c.opt.kind == BK_ADAM) res->opt_v = calloc((size_t)c.m->nparams + 1, sizeof(float));
    }
    if (c.want_grads) res->grads = calloc((size_t)c.m->nparams + 1, sizeof *res->grads);
    if (!wks || !th || !started || !res->loss || !res->acc || !res->params || !res->trace ||
        !res->peak_bytes || (c.want_state && c.opt.kind != BK_SGD && !res->opt_m) ||
        (c.want_state && c.opt.kind == BK_ADAM && !res->opt_v) ||
        (c.want_grads && !res->grads)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    if (c.bk->hint_workers)
        c.bk->hint_workers((c.local_workers ? c.nlocal : E) *
                           (c.node_procs > 1 ? c.node_procs : 1));
    double t0 = train_now();
    int start_failed = 0;
    for (int e = 0; e < E; e++)
        wks[e] = (worker){.cfg = &c, .sh = &sh, .w = e / c.tp, .rank = e % c.tp, .ep = e,
                          .cur_mb = -1,
                          .peak = -1};
    for (int li = 0; li < (c.local_workers ? c.nlocal : E); li++) {
        int w = c.local_workers ? c.local_workers[li] : li; /* an endpoint */
        if (w < 0 || w >= E || started[w]) {
            err_set(err, NULL, NULL, "runtime: local worker %d: expected a distinct worker "
                    "from 0 to %d", w, E - 1);
            c.tr->abort(c.tr, err->msg);
            start_failed = 1;
            break;
        }
        wks[w].t_origin = t0;
        if (worker_outputs(&wks[w], res, T)) {
            err_set(err, NULL, NULL, "out of memory");
            c.tr->abort(c.tr, "out of memory");
            start_failed = 1;
            break;
        }
        if (pthread_create(&th[w], NULL, worker_main, &wks[w]) != 0) {
            err_set(err, NULL, NULL, "cannot start worker thread %d", w);
            c.tr->abort(c.tr, "a worker thread could not start");
            start_failed = 1;
            break;
        }
        started[w] = 1;
    }
    for (int e = 0; e < E; e++)
        if (started[e]) pthread_join(th[e], NULL);
    res->seconds = train_now() - t0;
    if (c.bk->hint_workers) c.bk->hint_workers(1);
    if (start_failed) goto done;
    if (sh.first.msg[0]) {
        err_set(err, NULL, NULL, "%s", sh.first.msg);
        goto done;
    }
    for (int it = 0; it < T; it++) {
        double l = 0, k = 0, r = 0;
        for (int e = 0; e < E; e++) {
            if (!started[e]) continue;
            l += wks[e].loss[it];
            k += wks[e].corr[it];
            r += wks[e].rows[it];
        }
        res->loss[it] = r > 0 ? l / r : 0;
        res->acc[it] = r > 0 ? k / r : 0;
    }
    for (int w = 0; w < W; w++) res->peak_bytes[w] = wks[w * c.tp].peak;
    tp_replica_diffs(&c, wks, E, res);
    if (build_trace(&c, wks, res->trace)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    rc = 0;
done:
    /* a transport shared with other runs may still deliver our workers' messages */
    for (int w = 0; wks && w < E; w++)
        if (wks[w].ctx && c.tr->release) c.tr->release(c.tr, c.bk, wks[w].ctx, w, !own);
    for (int w = 0; wks && w < E; w++) {
        for (int k = 0; k < wks[w].nst; k++) stage_fini(&wks[w], &wks[w].st[k]);
        free(wks[w].st);
        bk_host_free(c.bk, wks[w].hx);
        bk_host_free(c.bk, wks[w].hy);
        rt_recs_free(&wks[w].recs);
        free(wks[w].loss);
        free(wks[w].corr);
        free(wks[w].rows);
        free(wks[w].tp_group);
        free(wks[w].dp_group);
        free(wks[w].chk_params);
        free(wks[w].chk_grads);
        if (wks[w].ctx) c.bk->destroy(wks[w].ctx);
    }
    free(wks);
    free(th);
    free(started);
    pthread_mutex_destroy(&sh.mu);
    free(sh.send_bound);
    if (own) own->destroy(own);
    if (rc) rt_result_free(res);
    return rc;
}

void rt_result_free(rt_result *r)
{
    if (!r) return;
    free(r->loss);
    free(r->acc);
    free(r->params);
    free(r->opt_m);
    free(r->opt_v);
    free(r->peak_bytes);
    free(r->grads);
    timeline_free(r->trace);
    memset(r, 0, sizeof *r);
}

int rt_fault_parse(const char *spec, rt_fault *f, plumb_err *err)
{
    f->worker = -1;
    f->step = 0;
    f->mode = RT_FAULT_ERROR;
    if (!spec || !*spec) return 0;
    int w = -1, used = 0;
    long st = 0;
    char tail[8] = "";
    if (sscanf(spec, "worker:%d:step:%ld%n", &w, &st, &used) == 2 && w >= 0 && st >= 1 &&
        (spec[used] == 0 || (sscanf(spec + used, ":%7s", tail) == 1 &&
                             (!strcmp(tail, "kill") || !strcmp(tail, "stall"))))) {
        f->worker = w;
        f->step = st;
        f->mode = !spec[used] ? RT_FAULT_ERROR : !strcmp(tail, "kill") ? RT_FAULT_KILL
                                                                        : RT_FAULT_STALL;
        return 0;
    }
    return err_set(err, NULL, "PLUMB_FAULT", "expected worker:W:step:S, optionally :kill or :stall, "
                   "with W >= 0 and S >= 1 (got \"%s\")", spec);
}
