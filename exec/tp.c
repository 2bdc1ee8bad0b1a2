/* tp.c: the layers tensor parallelism splits (tp.h) and the divisibility check. */
#include "exec/tp.h"

#include <stdio.h>

static int is_mid(const layer *L)
{
    return L->kind == LK_ATTENTION || L->kind == LK_GELU || L->kind == LK_RELU;
}

/* Index of the first child of the split run in blk, or -1. */
static int run_start(const layer *blk)
{
    if (blk->kind != LK_RESIDUAL) return -1;
    for (int i = 0; i + 2 < blk->nchildren; i++)
        if (blk->children[i].kind == LK_LINEAR && is_mid(&blk->children[i + 1]) &&
            blk->children[i + 2].kind == LK_LINEAR)
            return i;
    return -1;
}

tp_role tp_child_role(const layer *blk, int i, int *groups)
{
    int s = run_start(blk);
    if (groups) *groups = 1;
    if (s < 0 || i < s || i > s + 2) return TP_REPL;
    if (i == s + 1) return TP_LOCAL;
    if (i == s + 2) return TP_ROW;
    if (groups && blk->children[s + 1].kind == LK_ATTENTION) *groups = 3;
    return TP_COL;
}

/* Checks the blocks under L (path: its field path); counts split blocks in *nsplit. */
static int check_layer(const layer *L, const char *lpath, int tp, const char *file,
                       int *nsplit, plumb_err *err)
{
    char p[256];
    int s = run_start(L);
    if (s >= 0) {
        const layer *mid = &L->children[s + 1];
        (*nsplit)++;
        if (mid->kind == LK_ATTENTION && mid->heads % tp) {
            snprintf(p, sizeof p, "%s.layers[%d].heads", lpath, s + 1);
            return err_set(err, file, p, "expected a multiple of tp %d, so that each "
                           "rank holds whole heads (got %d)", tp, mid->heads);
        }
        if (mid->kind != LK_ATTENTION && L->children[s].out % tp) {
            snprintf(p, sizeof p, "%s.layers[%d].out", lpath, s);
            return err_set(err, file, p, "expected a multiple of tp %d, so that each "
                           "rank holds the same share of the hidden width (got %d)", tp,
                           L->children[s].out);
        }
    }
    for (int i = 0; i < L->nchildren; i++) {
        snprintf(p, sizeof p, "%s.layers[%d]", lpath, i);
        if (check_layer(&L->children[i], p, tp, file, nsplit, err)) return -1;
    }
    return 0;
}

tp_role tp_layer_role(const model *m, int i)
{
    const layer *L = &m->layers[i];
    if (L->kind == LK_EMBEDDING) return TP_VOCAB;
    if (L->kind == LK_XENT) return TP_LOCAL;
    if (L->kind == LK_LINEAR && i + 1 < m->nlayers && m->layers[i + 1].kind == LK_XENT)
        return TP_COL;
    return TP_REPL;
}

int tp_check(const model *m, int tp, const char *path, plumb_err *err)
{
    if (tp < 1) return err_set(err, path, "tp", "expected at least 1 (got %d)", tp);
    if (tp == 1) return 0;
    int nsplit = 0;
    char p[64];
    for (int i = 0; i < m->nlayers; i++) {
        snprintf(p, sizeof p, "layers[%d]", i);
        if (check_layer(&m->layers[i], p, tp, path, &nsplit, err)) return -1;
        if (tp_layer_role(m, i) == TP_COL && m->layers[i].out % tp)
            return err_set(err, path, NULL, "%s.out: expected a multiple of tp %d, so that "
                           "each rank holds the same share of the classes (got %d)", p, tp,
                           m->layers[i].out);
        if (m->layers[i].kind == LK_EMBEDDING && m->layers[i].vocab % tp)
            return err_set(err, path, NULL, "%s.vocab: expected a multiple of tp %d, so that "
                           "each rank holds the same share of the token rows (got %d)", p, tp,
                           m->layers[i].vocab);
    }
    if (!nsplit)
        return err_set(err, path, "layers", "expected for tp %d at least one residual block "
                       "of linear, attention or activation, linear to split over the ranks "
                       "(got none)", tp);
    return 0;
}

int tp_check_seq(const model *m, int tp, const char *path, plumb_err *err)
{
    if (!m->tokens)
        return err_set(err, path, "input", "expected token ids for sequence parallelism (a "
                       "model starting with an embedding)");
    if (m->in_shape[0] % tp)
        return err_set(err, path, "input[0]", "expected a multiple of tp %d, so that each "
                       "rank holds the same share of the sequence (got %d)", tp,
                       m->in_shape[0]);
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        int ok = L->kind == LK_EMBEDDING || L->kind == LK_LAYERNORM || L->kind == LK_XENT ||
                 tp_layer_role(m, i) == TP_COL || (L->kind == LK_RESIDUAL && run_start(L) >= 0);
        for (int j = 0; ok && L->kind == LK_RESIDUAL && j < L->nchildren; j++)
            ok = tp_child_role(L, j, NULL) != TP_REPL || L->children[j].kind == LK_LAYERNORM;
        if (!ok)
            return err_set(err, path, NULL, "layers[%d]: expected for sequence parallelism an "
                           "embedding, a layer norm, a residual block of layer norms and a split "
                           "run, the output layer or the loss (got %s)", i,
                           layer_kind_name(L->kind));
    }
    return 0;
}
