/* train_plan.c: the stages and schedule a pipelined `plumb train` runs, from a plan or
 * from --schedule/--stages (see train_plan.h). */
#include "exec/train_plan.h"

#include "core/device.h"

#include <stdlib.h>
#include <string.h>

#include "exec/tp.h"
#include "planner/policy.h"

int train_plan_layers(const model *m, const plan *pl, int *lo, int *hi)
{
    const profile *p = pl->prof;
    if (!profile_is_transformer(p)) {
        if (p->nlayers != m->nlayers) return -1;
        for (int i = 0; i < p->nlayers; i++) lo[i] = hi[i] = i;
        return 0;
    }
    int L = p->nlayers - 2;
    if (m->nlayers < 2 * L + 2 || m->layers[0].kind != LK_EMBEDDING) return -1;
    lo[0] = hi[0] = 0;
    for (int b = 0; b < L; b++) {
        lo[b + 1] = 1 + 2 * b;
        hi[b + 1] = 2 + 2 * b;
        if (m->layers[lo[b + 1]].kind != LK_RESIDUAL || m->layers[hi[b + 1]].kind != LK_RESIDUAL)
            return -1;
    }
    lo[L + 1] = 2 * L + 1;
    hi[L + 1] = m->nlayers - 1;
    for (int i = lo[L + 1]; i <= hi[L + 1]; i++)
        if (m->layers[i].kind == LK_RESIDUAL) return -1;
    return 0;
}

/* Parameters one of tp ranks holds of top-level layer i of m, as the analytic profile
 * counts them (docs/llm.md): split layers 1/tp (the vocabulary-parallel embedding's token
 * rows, column-parallel layers, row-parallel weights), the rest whole (norms, position
 * rows, row-parallel biases); the output layer without its bias, which the analytic LM
 * head does not have (Megatron-LM's has none; the executor's keeps classes / tp per
 * rank). tp divides what it splits (tp_check). */
static long long rank_params(const model *m, int i, int tp)
{
    const layer *l = &m->layers[i];
    switch (tp_layer_role(m, i)) {
    case TP_VOCAB: { /* token rows split, position rows whole */
        long long tokens = (long long)l->vocab * l->dim;
        return tokens / tp + l->nparams - tokens;
    }
    case TP_COL: return (l->nparams - l->out) / tp;
    case TP_LOCAL: return 0;
    default: break;
    }
    if (l->kind != LK_RESIDUAL) return l->nparams;
    long long n = 0;
    for (int j = 0; j < l->nchildren; j++) {
        const layer *c = &l->children[j];
        tp_role r = tp_child_role(l, j, NULL);
        long long w = (long long)c->in_shape[c->in_ndim - 1] * c->out;
        n += r == TP_COL ? c->nparams / tp : r == TP_ROW ? w / tp + c->nparams - w
             : c->nparams;
    }
    return n;
}

/* train_plan_check for a plan made from a transformer description (profile_is_transformer). The
 * executor's attention layer splits the model width into its heads and has no per-head norms or
 * sliding window, and its blocks have no Gemma parts: a plan laid out from a transformer with
 * Granite's scalings, without pre norms (OLMo 2's), with Gemma's post norms, soft-capping or
 * scaled embedding, experts, its own head width (head_dim), qk_norm or a window shorter than
 * its sequence describes a model it cannot run, refused by name before the layer sizes would
 * say it. */
static int check_llm(const model *m, const char *model_path, const plan *pl,
                     const char *plan_path, plumb_err *err)
{
    const profile *p = pl->prof;
    const transformer *tf = pl->model ? pl->model->tf : NULL;
    if (tf && (tf->embed_mult > 0 || tf->residual_mult > 0 || tf->attn_mult > 0 ||
               tf->logits_scale > 0))
        return err_set(err, plan_path,
                       tf->residual_mult > 0 ? "model.transformer.residual_multiplier"
                       : tf->embed_mult > 0 ? "model.transformer.embedding_multiplier"
                       : tf->attn_mult > 0 ? "model.transformer.attention_multiplier"
                                            : "model.transformer.logits_scaling",
                       "expected none: %s's transformer has no Granite scalings (of the "
                       "embedding, the residual branches, the scores, the logits)", model_path);
    if (tf && tf->no_pre_norms)
        return err_set(err, plan_path, "model.transformer.pre_norms", "expected true: %s's "
                       "blocks have a norm before the attention and one before the MLP (got "
                       "false: norms after them only, OLMo 2's)", model_path);
    if (tf && (tf->post_norms || tf->attn_softcap > 0 || tf->final_softcap > 0 ||
               tf->embed_scale))
        return err_set(err, plan_path, tf->post_norms ? "model.transformer.post_norms"
                       : tf->attn_softcap > 0 ? "model.transformer.attn_logit_softcapping"
                       : tf->final_softcap > 0 ? "model.transformer.final_logit_softcapping"
                                               : "model.transformer.embedding_scale",
                       "expected none: %s's transformer has no Gemma block (norms after "
                       "attention and MLP, soft-capped scores or logits, a scaled embedding)",
                       model_path);
    if (tf && tf->experts)
        return err_set(err, plan_path, "model.transformer.num_experts", "expected none: %s's "
                       "blocks have a dense MLP, no mixture of experts (got %lld experts)",
                       model_path, tf->experts);
    if (tf && transformer_own_head_dim(tf))
        return err_set(err, plan_path, "model.transformer.head_dim", "expected hidden_size / "
                       "num_attention_heads = %lld: %s's attention splits the width into its "
                       "heads (got %lld)", tf->hidden / tf->heads, model_path,
                       transformer_head_dim(tf));
    if (tf && tf->qk_norm)
        return err_set(err, plan_path, "model.transformer.qk_norm", "expected false: %s's "
                       "attention has no per-head query and key norms (got true)", model_path);
    if (tf && transformer_window_applies(tf, tf->seq))
        return err_set(err, plan_path, "model.transformer.sliding_window", "expected none or "
                       "at least the sequence's %lld tokens: %s's attention is full causal "
                       "(got %lld)", tf->seq, model_path, tf->window);
    int n = p->nlayers, *lo = malloc((size_t)n * sizeof *lo), *hi = malloc((size_t)n * sizeof *hi);
    int rc = -1;
    if (!lo || !hi) { err_set(err, NULL, NULL, "out of memory"); goto done; }
    if (train_plan_layers(m, pl, lo, hi)) {
        int nres = 0;
        for (int i = 0; i < m->nlayers; i++) nres += m->layers[i].kind == LK_RESIDUAL;
        if (m->layers[0].kind != LK_EMBEDDING || nres < 2) {
            err_set(err, plan_path, "profile.layers", "expected %d layers, one per top-level "
                    "layer of %s, which is no transformer (got a transformer's embedding, %d "
                    "blocks and head): the plan was made for another model", m->nlayers,
                    model_path, n - 2);
            goto done;
        }
        err_set(err, plan_path, "profile.layers", "expected an Embedding, %d TransformerBlocks "
                "and an LMHead for %s, whose first layer is the embedding, each block a pair of "
                "residual blocks (attention, MLP), the rest the final norm, the output layer "
                "and the loss (got %d TransformerBlocks for %d top-level layers): the plan was "
                "made for another model", nres / 2, model_path, n - 2, m->nlayers);
        goto done;
    }
    if (p->tokens_per_sample != m->in_shape[0]) {
        err_set(err, plan_path, "profile.tokens_per_sample", "expected %d, the context of %s "
                "(got %lld)", m->in_shape[0], model_path, p->tokens_per_sample);
        goto done;
    }
    /* the tensor-parallel degree must split the model: heads, widths, vocabulary */
    if (pl->tp > 1 && tp_check(m, pl->tp, model_path, err)) goto done;
    if (pl->sequence_parallel && tp_check_seq(m, pl->tp, model_path, err)) goto done;
    int e = dev_precision_bytes(pl->precision);
    for (int i = 0; i < n; i++) {
        long long want = 0;
        for (int k = lo[i]; k <= hi[i]; k++) want += rank_params(m, k, pl->tp);
        if (p->layers[i].parameter_bytes != (double)want * e) {
            err_set(err, plan_path, NULL, "profile.layers[%d].parameter_bytes: expected %lld, "
                    "one tensor-parallel rank's share (tp %d, %d bytes each) of layers %d-%d of "
                    "%s (got %.0f): the plan was made for another model", i, want * e, pl->tp,
                    e, lo[i], hi[i], model_path, p->layers[i].parameter_bytes);
            goto done;
        }
    }
    rc = 0;
done:
    free(lo);
    free(hi);
    return rc;
}

int train_plan_check(const model *m, const char *model_path, const plan *pl,
                     const char *plan_path, plumb_err *err)
{
    if (profile_is_transformer(pl->prof)) return check_llm(m, model_path, pl, plan_path, err);
    if (pl->prof->nlayers != m->nlayers)
        return err_set(err, plan_path, "profile.layers",
                       "expected %d layers, one per top-level layer of %s (got %d)",
                       m->nlayers, model_path, pl->prof->nlayers);
    for (int i = 0; i < m->nlayers; i++) {
        double want = (double)m->layers[i].nparams * sizeof(float),
               got = pl->prof->layers[i].parameter_bytes;
        if (got != want)
            return err_set(err, plan_path, NULL, "profile.layers[%d].parameter_bytes: "
                           "expected %.0f, the weights of layer %d of %s (got %.0f): the "
                           "plan was made for another model", i, want, i, model_path, got);
    }
    if (pl->tp > 1 && tp_check(m, pl->tp, model_path, err)) return -1;
    return 0;
}

/* Splits m's top-level layers into n contiguous stages (each at least one layer) by the
 * planner's even partitioner, the cost of a layer its forward FLOPs (+ 1, so that layers
 * without FLOPs still count). Returns 0, or -1 out of memory. */
static int split_by_flops(const model *m, int n, int *first, int *last)
{
    double *cost = malloc((size_t)m->nlayers * sizeof *cost);
    if (!cost) return -1;
    for (int i = 0; i < m->nlayers; i++) cost[i] = (double)m->layers[i].flops + 1;
    int rc = planner_split_weights(cost, m->nlayers, n, first, last);
    free(cost);
    return rc;
}

schedule *train_pipeline_segment(void *user, int iterations, plumb_err *err)
{
    const train_pipeline *tp = user;
    if (tp->pl) return schedule_from_plan(tp->pl, iterations, err);
    sched_spec sp = tp->spec;
    sp.iterations = iterations;
    return schedule_generate(&sp, err);
}

void train_pipeline_free(train_pipeline *tp)
{
    if (!tp) return;
    schedule_free(tp->sched);
    if (tp->tfirst != tp->first) free(tp->tfirst);
    if (tp->tlast != tp->last) free(tp->tlast);
    free(tp->first);
    free(tp->last);
    memset(tp, 0, sizeof *tp);
}

/* 0 when the executor runs what pl asks for; else 2 with err set to one line naming the
 * field it does not run yet. */
static int plan_supported(const plan *pl, plumb_err *err)
{
    const char *f = pl->checkpoint_layers > 0 ? "checkpoint_layers"
                  : pl->recompute == RECOMPUTE_SELECTIVE ? "recompute"
                  : pl->precision == DEV_BF16 || pl->precision == DEV_FP16 ||
                    pl->precision == DEV_FP8 ? "precision"
                  : NULL;
    if (f)
        return err_set(err, NULL, f, "the executor runs plans with whole-stage recomputation "
                       "(recompute none, or full with checkpoint_layers 0) and fp32 or tf32 "
                       "(this plan has checkpoint_layers %d, recompute %s, %s); "
                       "plumb plan --model takes --checkpoint-layers 0 and --precision fp32",
                       pl->checkpoint_layers, recompute_kind_name(pl->recompute),
                       dev_precision_name(pl->precision)), 2;
    return 0;
}

int train_from_plan(train_run_cfg *cfg, const plan *pl, const char *schedname, int nstages,
                    int nmicro, train_pipeline *tp, plumb_err *err)
{
    memset(tp, 0, sizeof *tp);
    const model *m = cfg->m;
    if (pl) {
        int rc = plan_supported(pl, err);
        if (rc) return rc;
    }
    long per_epoch = cfg->train->n / (cfg->cfg.microbatch * nmicro);
    long iters = cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * (per_epoch > 0 ? per_epoch : 1);
    if (iters > TRAIN_MAX_PIPELINED_STEPS)
        return err_set(err, NULL, "--steps", "expected at most %d pipelined steps (got %ld)",
                       TRAIN_MAX_PIPELINED_STEPS, iters), 2;
    int n = pl ? pl->nstages : schedname ? (nstages ? nstages : 2) : 1;
    if (n > m->nlayers)
        return err_set(err, NULL, "--stages", "expected at most the model's %d layers (got %d)",
                       m->nlayers, n), 2;
    tp->nstages = n;
    tp->pl = pl;
    tp->first = calloc((size_t)n, sizeof *tp->first);
    tp->last = calloc((size_t)n, sizeof *tp->last);
    if (!tp->first || !tp->last) goto oom;
    if (pl) {
        /* the plan's stages are ranges of its profile's layers: in the model's */
        int np = pl->prof->nlayers;
        int *lo = malloc((size_t)np * sizeof *lo), *hi = malloc((size_t)np * sizeof *hi);
        int bad = !lo || !hi ? 1 : train_plan_layers(m, pl, lo, hi) ? 2 : 0;
        for (int i = 0; !bad && i < n; i++) {
            tp->first[i] = lo[pl->stages[i].first_layer];
            tp->last[i] = hi[pl->stages[i].last_layer];
        }
        free(lo);
        free(hi);
        if (bad == 1) goto oom;
        if (bad) {
            train_pipeline_free(tp);
            return err_set(err, NULL, "profile.layers", "expected one layer per top-level "
                           "layer of %s, or a transformer's Embedding, TransformerBlocks and "
                           "LMHead over its layers (got %d)", m->name, np), 2;
        }
        tp->tfirst = calloc((size_t)n, sizeof *tp->tfirst);
        tp->tlast = calloc((size_t)n, sizeof *tp->tlast);
        if (!tp->tfirst || !tp->tlast) goto oom;
        for (int i = 0; i < n; i++) {
            tp->tfirst[i] = pl->stages[i].first_layer;
            tp->tlast[i] = pl->stages[i].last_layer;
        }
    } else {
        tp->tfirst = tp->first;
        tp->tlast = tp->last;
        if (split_by_flops(m, n, tp->first, tp->last)) goto oom;
        int kind = schedname ? sched_kind_parse(schedname) : SCHED_1F1B_FLUSH;
        int chunks = sched_kind_chunks((sched_kind)kind);
        if (n % chunks) {
            err_set(err, NULL, "--stages", "expected a multiple of %d for %s (got %d)", chunks,
                    schedname, n);
            train_pipeline_free(tp);
            return 2;
        }
        sched_spec sp = {kind, n / chunks, n, chunks, nmicro, (int)iters, NULL, NULL};
        tp->spec = sp;
    }
    if (!(tp->sched = train_pipeline_segment(tp, (int)iters, err))) {
        train_pipeline_free(tp);
        return 2;
    }
    if (pl) { /* what the plan says runs */
        cfg->tp = pl->tp;
        cfg->sp = pl->sequence_parallel;
        cfg->zero = pl->zero;
        if (pl->recompute == RECOMPUTE_FULL) cfg->recompute = 1;
    }
    cfg->make_sched = train_pipeline_segment;
    cfg->make_sched_user = tp;
    return 0;
oom:
    train_pipeline_free(tp);
    err_set(err, NULL, NULL, "out of memory");
    return 1;
}
