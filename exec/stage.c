/* stage.c: runs a range of a model's layers forward and backward through a backend's
 * table: one runtime node per layer (residual blocks hold their children), with per-slot
 * activations and two input-gradient buffers that the stage's layers take turns in (a
 * layer's backward reads the one its successor wrote and writes the other). Under tensor
 * parallelism a node holds its rank's share of its layer (exec/stage_tp.c). */
#include "exec/stage_int.h"

#include "exec/tp.h"

#include <stdlib.h>
#include <string.h>

/* Rows of a row-wise layer (linear, layernorm, loss): all leading dimensions. */
static int rows_of(const layer *L, int B)
{
    return (int)((size_t)B * shape_numel(L->in_ndim - 1, L->in_shape));
}

static void *dalloc(stage *st, size_t floats, plumb_err *err)
{
    return st->bk->alloc(st->ctx, floats * sizeof(float), err);
}

static float **slot_array_n(stage *st, int count, size_t floats, plumb_err *err)
{
    float **a = calloc((size_t)st->nslots, sizeof *a); /* nslots >= count: frees by nslots */
    if (!a) { err_set(err, NULL, NULL, "out of memory"); return NULL; }
    for (int s = 0; s < count; s++)
        if (!(a[s] = dalloc(st, floats, err))) {
            for (int j = 0; j < s; j++) st->bk->free(st->ctx, a[j]);
            free(a);
            return NULL;
        }
    return a;
}

static float **slot_array(stage *st, size_t floats, plumb_err *err)
{
    return slot_array_n(st, st->nslots, floats, err);
}

static float **act_array(stage *st, size_t floats, plumb_err *err)
{
    return slot_array_n(st, st->act_slots, floats, err);
}

static void slot_free(stage *st, float **a)
{
    if (!a) return;
    for (int s = 0; s < st->nslots; s++) st->bk->free(st->ctx, a[s]);
    free(a);
}

static void node_free(stage *st, snode *n)
{
    if (!n->L) return; /* a block's child after one whose allocation failed: never set up */
    for (int i = 0; i < n->nchildren; i++) node_free(st, &n->children[i]);
    free(n->children);
    if (n->L->kind != LK_FLATTEN) slot_free(st, n->out);
    else free(n->out);
    slot_free(st, n->aux);
    slot_free(st, n->dyst);
    slot_free(st, n->gx);
    free(n->in);
    if (n->dx != st->dxbuf[0] && n->dx != st->dxbuf[1]) st->bk->free(st->ctx, n->dx);
}

/* Floats a layer keeps for its backward per slot beyond its output (B samples): layernorm's
 * mean | rstd, attention's (B, H, T, T) probabilities, the loss's loss | correct rows. */
static size_t aux_floats(const layer *L, int B, int heads)
{
    if (L->kind == LK_LAYERNORM || L->kind == LK_XENT) return 2 * (size_t)rows_of(L, B);
    if (L->kind == LK_ATTENTION)
        return (size_t)B * heads * (size_t)L->in_shape[0] * L->in_shape[0];
    return 0;
}

/* Adds to o what node_init allocates for L at B samples (top: a layer of the stage itself,
 * whose own output is o->out and whose input gradient is the stage's shared buffer). */
static void layer_bytes_add(const layer *L, const model *m, int B, int top, stage_lbytes *o)
{
    const size_t f = sizeof(float), outb = (size_t)B * shape_numel(L->out_ndim, L->out_shape) * f;
    size_t out = L->kind == LK_FLATTEN ? 0 : outb; /* a flatten aliases its input */
    if (top) o->out += out;
    else o->saved += out;
    o->saved += aux_floats(L, B, L->heads) * f;
    if (L->kind == LK_XENT) o->saved += (size_t)B * model_targets_per_sample(m) * sizeof(int32_t);
    if (stage_has_weights(L)) o->split += outb;
    if (!top && L->kind != LK_FLATTEN && L->kind != LK_EMBEDDING)
        o->grad_buffers += (size_t)B * shape_numel(L->in_ndim, L->in_shape) * f;
    for (int i = 0; i < L->nchildren; i++) layer_bytes_add(&L->children[i], m, B, 0, o);
}

void stage_layer_bytes(const model *m, int i, int B, stage_lbytes *out)
{
    memset(out, 0, sizeof *out);
    layer_bytes_add(&m->layers[i], m, B, 1, out);
}

/* top = 1: a layer of the stage itself, whose input gradient goes in a shared buffer
 * (share_dx assigns it); a residual block's children own theirs. role, groups: its
 * tensor-parallel role (tp.h); *pnext: where its parameters start in the stage's vectors,
 * moved past them (pre-order, as the model's). */
/* Floats per sample of the output gradient that n's weight pass reads: its output's,
 * but the whole sequence's for a sequence-split row-parallel layer, whose input pass
 * all-gathers it (the embedding keeps its share and gathers it in the weight pass). */
static size_t dy_kept(const stage *st, const snode *n)
{
    return n->seq && n->role == TP_ROW ? n->out_n * (size_t)st->tp.size : n->out_n;
}

static int node_init(stage *st, snode *n, const layer *L, int top, int role, int groups,
                     long long *pnext, plumb_err *err)
{
    const size_t B = (size_t)st->max_batch;
    n->L = L;
    stage_node_shape(st, n, L, role, groups, pnext);
    n->in = calloc((size_t)st->act_slots, sizeof *n->in);
    if (!n->in) return err_set(err, NULL, NULL, "out of memory");
    if (L->kind == LK_FLATTEN) {
        if (!(n->out = calloc((size_t)st->nslots, sizeof *n->out)))
            return err_set(err, NULL, NULL, "out of memory");
    } else if (!(n->out = act_array(st, B * n->out_n, err))) {
        return -1;
    }
    size_t aux = aux_floats(L, st->max_batch, n->heads);
    if (aux && !(n->aux = act_array(st, aux, err))) return -1;
    if (n->seq && n->role == TP_COL &&
        !(n->gx = act_array(st, B * L->in_shape[0] * (size_t)n->fin, err)))
        return -1;
    if (st->split_bw && stage_has_weights(L) &&
        !(n->dyst = slot_array(st, B * dy_kept(st, n), err)))
        return -1;
    if (L->kind != LK_FLATTEN && L->kind != LK_EMBEDDING && !top &&
        !(n->dx = dalloc(st, B * n->in_n, err)))
        return -1;
    if (L->kind == LK_RESIDUAL) {
        n->children = calloc((size_t)L->nchildren, sizeof *n->children);
        if (!n->children) return err_set(err, NULL, NULL, "out of memory");
        n->nchildren = L->nchildren;
        for (int i = 0; i < L->nchildren; i++) {
            int g, r = tp_child_role(L, i, &g);
            if (node_init(st, &n->children[i], &L->children[i], 0, r, g, pnext, err))
                return -1;
        }
    }
    return 0;
}

/* Gives each top-level layer that has an input gradient one of two shared buffers, walking
 * in backward order: the buffer that does not hold the layer's output gradient (a flatten
 * passes its output gradient through, the embedding ends the chain). Activation memory
 * for input gradients is then 2 x the largest instead of the sum over the stage's layers.
 * Their contents live until the next backward, as stage_input_grad promises. */
static int share_dx(stage *st, plumb_err *err)
{
    size_t need[2] = {0, 0};
    int hold = -1; /* the buffer holding the output gradient; -1: the caller's */
    int *pick = malloc(((size_t)st->nnodes + 1) * sizeof *pick);
    if (!pick) return err_set(err, NULL, NULL, "out of memory");
    for (int i = st->nnodes - 1; i >= 0; i--) {
        const snode *n = &st->nodes[i];
        pick[i] = -1;
        if (n->L->kind == LK_FLATTEN) continue;
        if (n->L->kind == LK_EMBEDDING) {
            hold = -1;
            continue;
        }
        pick[i] = hold == 0 ? 1 : 0;
        size_t f = (size_t)st->max_batch * n->in_n;
        if (f > need[pick[i]]) need[pick[i]] = f;
        hold = pick[i];
    }
    for (int b = 0; b < 2; b++)
        if (need[b] && !(st->dxbuf[b] = dalloc(st, need[b], err))) {
            free(pick);
            return -1;
        }
    for (int i = 0; i < st->nnodes; i++)
        if (pick[i] >= 0) st->nodes[i].dx = st->dxbuf[pick[i]];
    free(pick);
    return 0;
}

/* 1 when layer L's backward needs its output gradient: for its weight gradient, or for
 * its input gradient when that is needed (need_dx); a residual block's when it or any of
 * its layers does. */
static int layer_needs_dy(const layer *L, int need_dx)
{
    if (L->kind != LK_RESIDUAL) return need_dx || stage_has_weights(L);
    int need = need_dx; /* the first layer's input gradient is added to the block's */
    for (int i = 0; i < L->nchildren; i++) need = layer_needs_dy(&L->children[i], need);
    return need || need_dx;
}

/* Of the layers a[0 .. n - 1], run in that order, the first whose input gradient is
 * needed when the input gradient of a[0] is not (need_dx = 0): the one after the first
 * that needs its output gradient, or n. With need_dx, 0: every one's. */
static int dx_needed_from(const layer *a, int n, int need_dx)
{
    if (need_dx) return 0;
    for (int i = 0; i < n; i++)
        if (layer_needs_dy(&a[i], 0)) return i + 1;
    return n;
}

int stage_input_grad_from(const model *m)
{
    return dx_needed_from(m->layers, m->nlayers, 0);
}

stage *stage_create(const backend *bk, bk_ctx *ctx, const model *m, int first, int last,
                    int max_batch, int nslots, int split_bw, plumb_err *err)
{
    stage_opts o = {split_bw, 0, NULL, 0, 0, 0};
    return stage_create_opts(bk, ctx, m, first, last, max_batch, nslots, &o, err);
}

stage *stage_create_opts(const backend *bk, bk_ctx *ctx, const model *m, int first, int last,
                         int max_batch, int nslots, const stage_opts *o, plumb_err *err)
{
    if (first < 0 || last >= m->nlayers || first > last || max_batch < 1 || nslots < 1) {
        err_set(err, NULL, NULL, "stage: expected 0 <= first <= last < %d, max_batch >= 1, "
                "nslots >= 1 (got %d, %d, %d, %d)", m->nlayers, first, last, max_batch, nslots);
        return NULL;
    }
    stage *st = calloc(1, sizeof *st);
    float *host = NULL;
    if (!st) { err_set(err, NULL, NULL, "out of memory"); return NULL; }
    st->bk = bk;
    st->ctx = ctx;
    st->m = m;
    st->first = first;
    st->last = last;
    st->max_batch = max_batch;
    st->nslots = nslots;
    st->split_bw = o->split_bw;
    st->recompute = o->recompute;
    st->act_slots = o->recompute ? 1 : nslots;
    st->tp = o->tp && o->tp->size > 1 ? *o->tp : (stage_tp){.size = 1};
    if (!(st->ipass_params = calloc((size_t)nslots, sizeof *st->ipass_params))) {
        err_set(err, NULL, NULL, "out of memory");
        goto fail;
    }
    st->full_nparams = model_range_params(m, first, last);
    st->nnodes = last - first + 1;
    st->nodes = calloc((size_t)st->nnodes, sizeof *st->nodes);
    if (!st->nodes) { err_set(err, NULL, NULL, "out of memory"); goto fail; }
    for (int i = 0; i < st->nnodes; i++)
        if (node_init(st, &st->nodes[i], &m->layers[first + i], 1,
                      tp_layer_role(m, first + i), 1, &st->nparams, err))
            goto fail;
    if (st->tp.seq && (!st->tp.reduce_scatter || !st->tp.all_gather)) {
        err_set(err, NULL, NULL, "stage: sequence parallelism needs the group's "
                "reduce-scatter and all-gather");
        goto fail;
    }
    if (st->seq_floats && (!(st->seqbuf = dalloc(st, st->seq_floats, err)) ||
                           !(st->seqtmp = dalloc(st, st->seq_floats, err))))
        goto fail;
    const snode *ln = &st->nodes[st->nnodes - 1];
    if (ln->L->kind == LK_XENT && ln->role == TP_LOCAL &&
        !(st->xsum = dalloc(st, (size_t)(st->tp.size + 3) * rows_of(ln->L, max_batch), err)))
        goto fail;
    if (st->nodes[0].role == TP_VOCAB && st->tp.rank > 0 &&
        !(st->zero_pos = dalloc(st, (size_t)m->layers[first].in_shape[0] * st->nodes[0].dim,
                                err)))
        goto fail;
    st->dx_from = dx_needed_from(&m->layers[first], st->nnodes, !o->no_input_grad);
    if (share_dx(st, err)) goto fail;
    stage_shard_plan(st, o->zero_parts, o->zero_index);
    if (!(st->params = dalloc(st, (size_t)st->zalloc, err)) ||
        !(st->grads = dalloc(st, (size_t)st->zalloc, err)))
        goto fail;
    if (!(st->input = slot_array(st, (size_t)max_batch * st->nodes[0].in_n, err))) goto fail;
    if (st->recompute &&
        !(st->outcopy = slot_array(st, (size_t)max_batch * st->nodes[st->nnodes - 1].out_n, err)))
        goto fail;
    if (stage_has_loss(st)) {
        size_t nt = (size_t)max_batch * model_targets_per_sample(m);
        st->targets = calloc((size_t)nslots, sizeof *st->targets);
        if (!st->targets) { err_set(err, NULL, NULL, "out of memory"); goto fail; }
        for (int s = 0; s < nslots; s++)
            if (!(st->targets[s] = bk->alloc(ctx, nt * sizeof(int32_t), err))) goto fail;
        if (st->recompute &&
            !(st->auxcopy = slot_array(st, 2 * (size_t)max_batch * model_targets_per_sample(m),
                                       err)))
            goto fail;
    }
    /* the whole layers' weights, as any split of the model draws them; this rank's part */
    host = malloc(((size_t)st->full_nparams + 1) * sizeof *host);
    if (!host) { err_set(err, NULL, NULL, "out of memory"); goto fail; }
    model_init_params(m, first, last, host);
    if (stage_put_full(st, host, st->params, err)) goto fail;
    free(host);
    host = NULL;
    return st;
fail:
    free(host);
    stage_free(st);
    return NULL;
}

void stage_free(stage *st)
{
    if (!st) return;
    if (st->nodes)
        for (int i = 0; i < st->nnodes; i++)
            if (st->nodes[i].L) node_free(st, &st->nodes[i]);
    free(st->nodes);
    st->bk->free(st->ctx, st->dxbuf[0]);
    st->bk->free(st->ctx, st->dxbuf[1]);
    slot_free(st, st->input);
    slot_free(st, st->outcopy);
    free(st->ipass_params);
    slot_free(st, st->auxcopy);
    if (st->targets) slot_free(st, (float **)st->targets);
    st->bk->free(st->ctx, st->params);
    st->bk->free(st->ctx, st->grads);
    st->bk->free(st->ctx, st->opt_m);
    st->bk->free(st->ctx, st->opt_v);
    st->bk->free(st->ctx, st->zero_pos);
    st->bk->free(st->ctx, st->xsum);
    st->bk->free(st->ctx, st->seqbuf);
    st->bk->free(st->ctx, st->seqtmp);
    free(st);
}

float *stage_input(stage *st, int slot) { return st->input[slot]; }
int32_t *stage_targets(stage *st, int slot) { return st->targets ? st->targets[slot] : NULL; }
const float *stage_output(stage *st, int slot)
{
    return st->recompute ? st->outcopy[slot] : st->nodes[st->nnodes - 1].out[slot];
}
const float *stage_input_grad(stage *st) { return st->input_grad; }
long long stage_nparams(const stage *st) { return st->nparams; }
long long stage_full_nparams(const stage *st) { return st->full_nparams; }
int stage_failed(const stage *st) { return st->failed; }
float *stage_params(stage *st) { return st->params; }
float *stage_grads(stage *st) { return st->grads; }
size_t stage_in_numel(const stage *st) { return st->nodes[0].in_n; }
size_t stage_out_numel(const stage *st) { return st->nodes[st->nnodes - 1].out_n; }
int stage_has_loss(const stage *st) { return st->last == st->m->nlayers - 1; }

void stage_zero_grads(stage *st)
{
    st->bk->zero(st->ctx, st->grads, (size_t)st->zalloc * sizeof(float));
}

static bk_conv conv_geom(const layer *L, int B)
{
    bk_conv g = {B, L->in_shape[0], L->in_shape[1], L->in_shape[2], L->out, L->kernel,
                 L->stride, L->pad, L->out_shape[1], L->out_shape[2]};
    return g;
}

static bk_pool pool_geom(const layer *L, int B)
{
    bk_pool g = {B, L->in_shape[0], L->in_shape[1], L->in_shape[2], L->kernel, L->stride,
                 L->out_shape[1], L->out_shape[2]};
    return g;
}

/* The layer's weights inside the parameter (or gradient) vector P of the stage. */
static float *lp(const stage *st, const snode *n, const float *P)
{
    (void)st;
    return (float *)P + n->poff;
}

static const float *node_fwd(stage *st, snode *n, int slot, int B, const float *P,
                             const float *x)
{
    const backend *bk = st->bk;
    bk_ctx *c = st->ctx;
    const layer *L = n->L;
    float *y = n->out[slot], *w = lp(st, n, P);
    n->in[slot] = x;
    switch (L->kind) {
    case LK_LINEAR: {
        /* row-parallel: the bias is added once, by rank 0, before the sum */
        const float *b = n->role == TP_ROW && st->tp.rank != 0 ? NULL
                                                               : w + (size_t)n->fout * n->fin;
        if (n->seq && n->role == TP_COL) { /* the whole sequence's input, kept for W */
            stage_seq_gather(st, x, n->gx[slot], B, n->fin);
            n->in[slot] = x = n->gx[slot];
        }
        bk->linear_fwd(c, rows_of(L, B), n->fin, n->fout, x, w, b,
                       n->seq && n->role == TP_ROW ? st->seqbuf : y);
        if (n->seq && n->role == TP_ROW) stage_seq_scatter(st, st->seqbuf, y, B, n->fout);
        else if (n->role == TP_ROW) stage_tp_sum(st, y, (size_t)B * n->out_n);
        break;
    }
    case LK_CONV2D: {
        bk_conv g = conv_geom(L, B);
        bk->conv2d_fwd(c, &g, x, w, w + (size_t)g.K * g.C * g.kernel * g.kernel, y);
        break;
    }
    case LK_RELU: bk->relu_fwd(c, (size_t)B * n->in_n, x, y); break;
    case LK_GELU: bk->gelu_fwd(c, (size_t)B * n->in_n, x, y); break;
    case LK_MAXPOOL2D: {
        bk_pool g = pool_geom(L, B);
        bk->maxpool_fwd(c, &g, x, y);
        break;
    }
    case LK_FLATTEN: n->out[slot] = (float *)x; y = (float *)x; break;
    case LK_LAYERNORM: {
        int N = rows_of(L, B) / (n->seq ? st->tp.size : 1);
        bk->layernorm_fwd(c, N, L->dim, x, w, w + L->dim, y, n->aux[slot], n->aux[slot] + N);
        break;
    }
    case LK_EMBEDDING: {
        /* vocabulary-parallel: the position rows added once, by rank 0, before the sum */
        const float *pos = st->zero_pos ? st->zero_pos : w + (size_t)n->vocab * L->dim;
        bk->embedding_fwd(c, B, L->in_shape[0], n->vocab, L->dim, x, w, pos,
                          n->seq ? st->seqbuf : y);
        if (n->seq) stage_seq_scatter(st, st->seqbuf, y, B, L->dim);
        else if (n->role == TP_VOCAB) stage_tp_sum(st, y, (size_t)B * n->out_n);
        break;
    }
    case LK_ATTENTION:
        bk->attention_fwd(c, B, L->in_shape[0], n->dim, n->heads, x, n->aux[slot], y);
        break;
    case LK_RESIDUAL: {
        const float *h = x;
        for (int i = 0; i < n->nchildren; i++) h = node_fwd(st, &n->children[i], slot, B, P, h);
        bk->add(c, (size_t)B * n->out_n, x, h, y);
        break;
    }
    case LK_XENT: {
        int N = rows_of(L, B);
        if (n->role == TP_LOCAL) stage_xent_tp_fwd(st, n, N, x, y, n->aux[slot]);
        else bk->xent_fwd(c, N, L->in_shape[L->in_ndim - 1], x, st->targets[st->xslot], y,
                          n->aux[slot], n->aux[slot] + N);
        break;
    }
    default: break;
    }
    return y;
}

/* Forward of the caller's slot into activation slot as (returns as). */
static int forward_into(stage *st, int slot, int B, const float *P)
{
    int as = st->recompute ? 0 : slot;
    st->xslot = slot;
    const float *h = st->input[slot];
    for (int i = 0; i < st->nnodes; i++) h = node_fwd(st, &st->nodes[i], as, B, P, h);
    return as;
}

void stage_forward(stage *st, int slot, int B, const float *params)
{
    const float *P = params ? params : st->params;
    forward_into(st, slot, B, P);
    if (st->recompute) {
        const snode *n = &st->nodes[st->nnodes - 1];
        st->bk->copy(st->ctx, st->outcopy[slot], n->out[0],
                     (size_t)B * n->out_n * sizeof(float));
        if (stage_has_loss(st))
            st->bk->copy(st->ctx, st->auxcopy[slot], n->aux[0],
                         2 * (size_t)rows_of(n->L, B) * sizeof(float));
    }
}

/* Weight gradient of one layer from its output gradient dy and its forward input. */
static void node_wgrad(stage *st, snode *n, int slot, int B, const float *dy)
{
    const backend *bk = st->bk;
    bk_ctx *c = st->ctx;
    const layer *L = n->L;
    const float *x = n->in[slot];
    float *g = lp(st, n, st->grads);
    switch (L->kind) {
    case LK_LINEAR:
        bk->linear_bwd_weight(c, rows_of(L, B), n->fin, n->fout, dy, x, g,
                              g + (size_t)n->fout * n->fin);
        break;
    case LK_CONV2D: {
        bk_conv gm = conv_geom(L, B);
        bk->conv2d_bwd_weight(c, &gm, dy, x, g, g + (size_t)gm.K * gm.C * gm.kernel * gm.kernel);
        break;
    }
    case LK_LAYERNORM: {
        int N = rows_of(L, B) / (n->seq ? st->tp.size : 1);
        bk->layernorm_bwd_weight(c, N, L->dim, x, n->aux[slot], n->aux[slot] + N, dy, g,
                                 g + L->dim);
        break;
    }
    case LK_EMBEDDING:
        if (n->seq) { /* the whole sequence's output gradient */
            stage_seq_gather(st, dy, st->seqbuf, B, L->dim);
            dy = st->seqbuf;
        }
        bk->embedding_bwd_weight(c, B, L->in_shape[0], n->vocab, L->dim, x, dy, g,
                                 g + (size_t)n->vocab * L->dim);
        break;
    default: break;
    }
}

/* Backward of one node: returns the gradient of its input (NULL for the embedding, and
 * when need_dx is 0: then only the weight gradients are computed, and dy is read only
 * where they need it). split = 1 keeps dy for a later weight pass instead of computing
 * the weight gradient. */
static const float *node_bwd(stage *st, snode *n, int slot, int B, const float *P,
                             const float *dy, int split, int need_dx)
{
    const backend *bk = st->bk;
    bk_ctx *c = st->ctx;
    const layer *L = n->L;
    const float *x = n->in[slot], *w = lp(st, n, P);
    float *dx = n->dx;
    if (!need_dx && !layer_needs_dy(L, 0)) return NULL;
    if (n->seq && n->role == TP_ROW) { /* the whole sequence's output gradient */
        stage_seq_gather(st, dy, st->seqbuf, B, n->fout);
        dy = st->seqbuf;
    }
    if (stage_has_weights(L)) {
        if (split)
            bk->copy(c, n->dyst[st->xslot], dy, (size_t)B * dy_kept(st, n) * sizeof(float));
        else node_wgrad(st, n, slot, B, dy);
    }
    if (!need_dx && L->kind != LK_RESIDUAL) return NULL;
    switch (L->kind) {
    case LK_LINEAR:
        bk->linear_bwd_data(c, rows_of(L, B), n->fin, n->fout, dy, w,
                            n->seq && n->role == TP_COL ? st->seqbuf : dx);
        /* column-parallel: each rank's input gradient is a part of the sum */
        if (n->seq && n->role == TP_COL) stage_seq_scatter(st, st->seqbuf, dx, B, n->fin);
        else if (n->role == TP_COL) stage_tp_sum(st, dx, (size_t)B * n->in_n);
        break;
    case LK_CONV2D: {
        bk_conv g = conv_geom(L, B);
        bk->conv2d_bwd_data(c, &g, dy, w, dx);
        break;
    }
    case LK_RELU: bk->relu_bwd(c, (size_t)B * n->in_n, x, dy, dx); break;
    case LK_GELU: bk->gelu_bwd(c, (size_t)B * n->in_n, x, dy, dx); break;
    case LK_MAXPOOL2D: {
        bk_pool g = pool_geom(L, B);
        bk->maxpool_bwd(c, &g, x, dy, dx);
        break;
    }
    case LK_FLATTEN: return dy;
    case LK_LAYERNORM: {
        int N = rows_of(L, B) / (n->seq ? st->tp.size : 1);
        bk->layernorm_bwd_data(c, N, L->dim, x, w, n->aux[slot], n->aux[slot] + N, dy, dx);
        break;
    }
    case LK_EMBEDDING: return NULL;
    case LK_ATTENTION:
        bk->attention_bwd(c, B, L->in_shape[0], n->dim, n->heads, x, n->aux[slot], dy, dx);
        break;
    case LK_RESIDUAL: {
        const float *h = dy;
        int from = dx_needed_from(L->children, n->nchildren, need_dx);
        for (int i = n->nchildren - 1; i >= 0; i--)
            h = node_bwd(st, &n->children[i], slot, B, P, h, split, i >= from);
        if (!need_dx) return NULL;
        bk->add(c, (size_t)B * n->in_n, dy, h, dx);
        break;
    }
    case LK_XENT:
        if (n->role == TP_LOCAL) stage_xent_tp_bwd(st, n, rows_of(L, B), n->out[slot], dx);
        else bk->xent_bwd(c, rows_of(L, B), L->in_shape[L->in_ndim - 1], n->out[slot],
                          st->targets[st->xslot], st->loss_scale, dx);
        break;
    default: break;
    }
    return dx;
}

static void backward(stage *st, int slot, int B, const float *params, const float *dout,
                     float loss_scale, int split)
{
    const float *P = params ? params : st->params;
    st->loss_scale = loss_scale;
    /* recompute: the activations are rebuilt from the kept input first */
    int as = st->recompute ? forward_into(st, slot, B, P) : slot;
    st->xslot = slot;
    st->ipass_params[slot] = P;
    const float *h = dout;
    for (int i = st->nnodes - 1; i >= 0; i--)
        h = node_bwd(st, &st->nodes[i], as, B, P, h, split, i >= st->dx_from);
    st->input_grad = h;
}

void stage_backward(stage *st, int slot, int B, const float *params, const float *dout,
                    float loss_scale)
{
    backward(st, slot, B, params, dout, loss_scale, 0);
}

void stage_backward_input(stage *st, int slot, int B, const float *params, const float *dout,
                          float loss_scale)
{
    backward(st, slot, B, params, dout, loss_scale, st->split_bw);
}

static void wpass(stage *st, snode *n, int slot, int B)
{
    if (stage_has_weights(n->L)) node_wgrad(st, n, slot, B, n->dyst[st->xslot]);
    for (int i = 0; i < n->nchildren; i++) wpass(st, &n->children[i], slot, B);
}

void stage_backward_weight(stage *st, int slot, int B)
{
    if (!st->split_bw) return; /* the input pass already computed the weight gradients */
    int as = st->recompute ? forward_into(st, slot, B, st->ipass_params[slot]) : slot;
    st->xslot = slot;
    for (int i = 0; i < st->nnodes; i++) wpass(st, &st->nodes[i], as, B);
}

int stage_loss(stage *st, int slot, int B, double *loss_sum, double *correct_sum,
               plumb_err *err)
{
    if (!stage_has_loss(st))
        return err_set(err, NULL, NULL, "stage_loss: the stage does not hold the loss");
    snode *n = &st->nodes[st->nnodes - 1];
    int N = rows_of(n->L, B);
    float *h = malloc(2 * (size_t)N * sizeof *h);
    if (!h) return err_set(err, NULL, NULL, "out of memory");
    st->bk->download(st->ctx, h, st->recompute ? st->auxcopy[slot] : n->aux[slot],
                     2 * (size_t)N * sizeof *h);
    if (st->bk->sync(st->ctx, err)) { free(h); return -1; }
    double l = 0, a = 0;
    for (int i = 0; i < N; i++) {
        l += h[i];
        a += h[N + i];
    }
    free(h);
    *loss_sum = l;
    *correct_sum = a;
    return 0;
}

int stage_opt_state(stage *st, int kind, float **m, float **v, plumb_err *err)
{
    size_t n = (size_t)st->zcount;
    if (kind != BK_SGD && !st->opt_m && !(st->opt_m = dalloc(st, n, err))) return -1;
    if (kind == BK_ADAM && !st->opt_v && !(st->opt_v = dalloc(st, n, err))) return -1;
    *m = kind != BK_SGD ? st->opt_m : NULL;
    *v = kind == BK_ADAM ? st->opt_v : NULL;
    return 0;
}

void stage_settle_grads(stage *st)
{
    const snode *e = &st->nodes[0];
    if (e->role == TP_VOCAB) /* the zero row's gradient (other ranks' tokens): it stays 0 */
        st->bk->zero(st->ctx, st->grads + e->poff + (size_t)(e->vocab - 1) * e->L->dim,
                     (size_t)e->L->dim * sizeof(float));
}

int stage_step(stage *st, const bk_opt *o, plumb_err *err)
{
    float *m = NULL, *v = NULL;
    if (stage_opt_state(st, o->kind, &m, &v, err)) return -1;
    if (st->zparts <= 1) {
        stage_settle_grads(st); /* sharded: settled before the reduce-scatter, once */
        st->bk->opt_step(st->ctx, o, (size_t)st->nparams, st->params, st->grads, m, v);
        return 0;
    }
    long long lo, n = stage_shard_real(st, &lo); /* the owned shard's real floats */
    if (n > 0) st->bk->opt_step(st->ctx, o, (size_t)n, st->params + lo, st->grads + lo, m, v);
    return 0;
}
