/* stage_tp.c: a stage under tensor parallelism (exec/tp.h's layout): each node's share of
 * its layer, the mapping between a rank's parameter vector and the whole model's, the
 * mapping of token ids to a rank's embedding rows, the group's sums, sequence
 * parallelism's all-gathers and reduce-scatters, and the vocabulary-parallel
 * cross-entropy. */
#include <stdlib.h>
#include <string.h>

#include "exec/stage_int.h"
#include "exec/tp.h"

/* n's share of the layer under its tensor-parallel role (role, groups): features,
 * heads, floats per sample, and its parameters, placed at the stage's next offset *pnext. */
void stage_node_shape(stage *st, snode *n, const layer *L, int role, int groups,
                      long long *pnext)
{
    const int tp = st->tp.size;
    n->role = tp > 1 ? role : TP_REPL;
    n->groups = groups;
    n->in_n = shape_numel(L->in_ndim, L->in_shape);
    n->out_n = shape_numel(L->out_ndim, L->out_shape);
    n->fin = L->in_shape[L->in_ndim - 1];
    n->fout = L->out;
    n->dim = L->dim;
    n->heads = L->heads;
    n->vocab = L->vocab;
    if (n->role == TP_VOCAB) n->vocab = L->vocab / tp + 1;
    if (n->role == TP_COL) n->fout /= tp, n->out_n /= (size_t)tp;
    if (n->role == TP_ROW) n->fin /= tp, n->in_n /= (size_t)tp;
    if (n->role == TP_LOCAL) {
        n->fin /= tp; /* the loss: this rank's classes */
        n->in_n /= (size_t)tp;
        n->out_n /= (size_t)tp;
        n->dim /= tp;
        n->heads /= tp;
    }
    n->seq = 0;
    if (tp > 1 && st->tp.seq) {
        /* the sequence-split parts: rows of the residual stream and the norms, the input
         * of a column-parallel layer, the output of a row-parallel one and the embedding */
        size_t F = 0;
        if (L->kind == LK_RESIDUAL || L->kind == LK_LAYERNORM)
            n->seq = 1, n->in_n /= (size_t)tp, n->out_n /= (size_t)tp;
        else if (n->role == TP_COL)
            n->seq = 1, n->in_n /= (size_t)tp, F = (size_t)n->fin;
        else if (n->role == TP_ROW)
            n->seq = 1, n->out_n /= (size_t)tp, F = (size_t)n->fout;
        else if (n->role == TP_VOCAB)
            n->seq = 1, n->out_n /= (size_t)tp, F = (size_t)L->dim;
        size_t need = (size_t)st->max_batch * L->in_shape[0] * F;
        if (need > st->seq_floats) st->seq_floats = need;
    }
    n->foff = L->param_offset - st->m->layers[st->first].param_offset;
    n->poff = *pnext;
    n->np = 0;
    if (L->kind == LK_LINEAR) n->np = (long long)n->fout * n->fin + n->fout;
    else if (L->kind == LK_EMBEDDING) n->np = ((long long)n->vocab + L->in_shape[0]) * L->dim;
    else if (stage_has_weights(L)) n->np = L->nparams;
    *pnext += n->np;
}

/* Sums buf (count floats) over the tensor-parallel group; after a failure, nothing. */
void stage_tp_sum(stage *st, float *buf, size_t count)
{
    if (st->tp.size > 1 && !st->failed && st->tp.allreduce(st->tp.user, buf, count))
        st->failed = 1;
}

/* The vocabulary-parallel cross-entropy's forward (backend.h: xent_tp_*): x this rank's
 * logits (N, v), probs (N, v) out, aux (2, N) loss | correct, the same on every rank. The
 * arithmetic runs on the backend; only the small vectors cross the group, in xsum: the
 * ranks' row maxima (T, N), zero-padded, then the partial sums (3, N). */
void stage_xent_tp_fwd(stage *st, snode *n, int N, const float *x, float *probs, float *aux)
{
    const backend *bk = st->bk;
    const int T = st->tp.size, v = n->fin, lo = st->tp.rank * v;
    const int32_t *t = st->targets[st->xslot];
    float *g = st->xsum, *q = st->xsum + (size_t)T * N;
    bk->zero(st->ctx, g, (size_t)T * N * sizeof *g);
    bk->xent_tp_max(st->ctx, N, v, x, g + (size_t)st->tp.rank * N);
    stage_tp_sum(st, g, (size_t)T * N);
    bk->xent_tp_partial(st->ctx, N, v, T, lo, g, t, x, probs, q);
    stage_tp_sum(st, q, 3 * (size_t)N);
    bk->xent_tp_finish(st->ctx, N, v, T, g, q, probs, aux, aux + N);
}

/* Its backward: dx (N, v) = loss_scale (probs - onehot(target)) on this rank's classes. */
void stage_xent_tp_bwd(stage *st, snode *n, int N, const float *probs, float *dx)
{
    st->bk->xent_tp_bwd(st->ctx, N, n->fin, st->tp.rank * n->fin, probs,
                        st->targets[st->xslot], st->loss_scale, dx);
}

void stage_map_input(const stage *st, float *host, int B)
{
    const snode *e = &st->nodes[0];
    if (e->role != TP_VOCAB) return;
    const int v = e->vocab - 1, lo = st->tp.rank * v;
    for (size_t i = 0; i < (size_t)B * e->in_n; i++) {
        int id = (int)host[i];
        host[i] = (float)(id >= lo && id < lo + v ? id - lo : v);
    }
}

/* Copies n's parameters (and its children's) between this rank's vector `loc` and the
 * whole range `full` (host): to_full = 0 takes the rank's part of full, 1 writes it back
 * (the shards when which has STAGE_SHARDS, the replicated values when STAGE_REPLICATED). */
static void node_map(const stage *st, const snode *n, float *loc, float *full, int to_full,
                     int which)
{
    const int shards = !to_full || (which & STAGE_SHARDS),
              repl = !to_full || (which & STAGE_REPLICATED);
    const layer *L = n->L;
    float *l = loc + n->poff, *f = full + n->foff;
    const int r = st->tp.rank;
    if (n->role == TP_COL && shards) {
        /* local row j: group j / per of the outputs, this rank's share of that group */
        int per = n->fout / n->groups, in = n->fin, out = L->out;
        for (int j = 0; j < n->fout; j++) {
            size_t fr = (size_t)(j / per) * (out / n->groups) + (size_t)r * per + j % per;
            float *a = l + (size_t)j * in, *b = f + fr * in;
            float *ab = l + (size_t)n->fout * in + j, *bb = f + (size_t)out * in + fr;
            memcpy(to_full ? b : a, to_full ? a : b, (size_t)in * sizeof(float));
            *(to_full ? bb : ab) = *(to_full ? ab : bb);
        }
    } else if (n->role == TP_ROW) {
        /* local columns: this rank's share of the inputs; the bias whole */
        int in = L->in_shape[L->in_ndim - 1];
        for (int o = 0; o < n->fout && shards; o++) {
            float *a = l + (size_t)o * n->fin, *b = f + (size_t)o * in + (size_t)r * n->fin;
            memcpy(to_full ? b : a, to_full ? a : b, (size_t)n->fin * sizeof(float));
        }
        float *ab = l + (size_t)n->fout * n->fin, *bb = f + (size_t)n->fout * in;
        if (repl) memcpy(to_full ? bb : ab, to_full ? ab : bb, (size_t)n->fout * sizeof(float));
    } else if (n->role == TP_VOCAB) {
        /* this rank's token rows (its zero row has no place in full); positions whole */
        const size_t D = (size_t)L->dim, v = (size_t)n->vocab - 1;
        if (shards) memcpy(to_full ? f + r * v * D : l, to_full ? l : f + r * v * D,
                           v * D * sizeof(float));
        if (!to_full) memset(l + v * D, 0, D * sizeof(float));
        if (repl) memcpy(to_full ? f + (size_t)L->vocab * D : l + (v + 1) * D,
                         to_full ? l + (v + 1) * D : f + (size_t)L->vocab * D,
                         (size_t)L->in_shape[0] * D * sizeof(float));
    } else if (n->role != TP_COL && n->np && repl) {
        memcpy(to_full ? f : l, to_full ? l : f, (size_t)n->np * sizeof(float));
    }
    for (int i = 0; i < n->nchildren; i++)
        node_map(st, &n->children[i], loc, full, to_full, which);
}

int stage_put_full(stage *st, const float *full, float *dev, plumb_err *err)
{
    size_t bytes = (size_t)st->nparams * sizeof(float);
    if (st->tp.size <= 1) {
        st->bk->upload(st->ctx, dev, full, bytes);
        return st->bk->sync(st->ctx, err);
    }
    float *loc = malloc(bytes + sizeof(float));
    if (!loc) return err_set(err, NULL, NULL, "out of memory");
    for (int i = 0; i < st->nnodes; i++) node_map(st, &st->nodes[i], loc, (float *)full, 0, 0);
    st->bk->upload(st->ctx, dev, loc, bytes);
    int rc = st->bk->sync(st->ctx, err); /* the upload may read loc until then */
    free(loc);
    return rc;
}

int stage_get_full(stage *st, const float *dev, float *full, int which, plumb_err *err)
{
    size_t bytes = (size_t)st->nparams * sizeof(float);
    if (st->tp.size <= 1) {
        if (which & STAGE_REPLICATED) st->bk->download(st->ctx, full, dev, bytes);
        return st->bk->sync(st->ctx, err);
    }
    float *loc = malloc(bytes + sizeof(float));
    if (!loc) return err_set(err, NULL, NULL, "out of memory");
    st->bk->download(st->ctx, loc, dev, bytes);
    int rc = st->bk->sync(st->ctx, err);
    if (!rc)
        for (int i = 0; i < st->nnodes; i++) node_map(st, &st->nodes[i], loc, full, 1, which);
    free(loc);
    return rc;
}

/* Copies between seq (B, T, F), the sequence order, and rk (tp, B, T / tp, F), the rank
 * order of the collectives: to_rank 1 seq -> rk, 0 rk -> seq. */
static void seq_reorder(stage *st, float *seq, float *rk, int B, int F, int to_rank)
{
    const int T = st->m->in_shape[0], tl = T / st->tp.size;
    const size_t part = (size_t)tl * F;
    for (int r = 0; r < st->tp.size; r++)
        for (int b = 0; b < B; b++) {
            float *s = seq + ((size_t)b * T + (size_t)r * tl) * F,
                  *k = rk + ((size_t)r * B + b) * part;
            st->bk->copy(st->ctx, to_rank ? k : s, to_rank ? s : k, part * sizeof(float));
        }
}

void stage_seq_gather(stage *st, const float *src, float *dst, int B, int F)
{
    const size_t part = (size_t)B * (st->m->in_shape[0] / st->tp.size) * F;
    if (st->failed) return;
    if (st->tp.all_gather(st->tp.user, src, st->seqtmp, part)) {
        st->failed = 1;
        return;
    }
    seq_reorder(st, dst, st->seqtmp, B, F, 0);
}

void stage_seq_scatter(stage *st, float *full, float *dst, int B, int F)
{
    const size_t part = (size_t)B * (st->m->in_shape[0] / st->tp.size) * F;
    if (st->failed) return;
    seq_reorder(st, full, st->seqtmp, B, F, 1);
    if (st->tp.reduce_scatter(st->tp.user, st->seqtmp, dst, part)) st->failed = 1;
}

/* Sums the gradients of n's layer norms (and its children's) over the group. */
static void node_norm_sum(stage *st, const snode *n)
{
    if (n->L->kind == LK_LAYERNORM && n->seq) stage_tp_sum(st, st->grads + n->poff, (size_t)n->np);
    for (int i = 0; i < n->nchildren; i++) node_norm_sum(st, &n->children[i]);
}

void stage_tp_finish_grads(stage *st)
{
    if (st->tp.size <= 1 || !st->tp.seq) return;
    for (int i = 0; i < st->nnodes; i++) node_norm_sum(st, &st->nodes[i]);
}
