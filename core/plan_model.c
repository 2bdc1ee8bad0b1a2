/* plan_model.c: a plan's "model" object (plumb-plan/1): the transformer a layout was laid
 * out from and the layout options its plan does not otherwise hold (sequence length,
 * attention, balancing, Megatron-Core's uneven split); its copies, its JSON, and reading it
 * back checked against the plan's profile and stages. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "plan.h"
#include "pplayout.h"
#include "schedule_traits.h"

#define SEQ_MAX 100000000LL /* --seq-len's bound */

plan_model *plan_model_new(const transformer *t)
{
    plan_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (!(m->tf = transformer_clone(t))) {
        free(m);
        return NULL;
    }
    return m;
}

plan_model *plan_model_clone(const plan_model *m)
{
    if (!m) return NULL;
    plan_model *d = plan_model_new(m->tf);
    if (!d) return NULL;
    transformer *tf = d->tf;
    *d = *m;
    d->tf = tf;
    d->pipeline_layout = NULL;
    if (m->pipeline_layout && !(d->pipeline_layout = strdup(m->pipeline_layout))) {
        plan_model_free(d);
        return NULL;
    }
    return d;
}

void plan_model_free(plan_model *m)
{
    if (!m) return;
    transformer_free(m->tf);
    free(m->pipeline_layout);
    free(m);
}

int plan_model_equal(const plan_model *a, const plan_model *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    return transformer_equal(a->tf, b->tf) && a->attention == b->attention &&
           a->balance == b->balance && pplayout_split_equal(&a->split, &b->split) &&
           !a->pipeline_layout == !b->pipeline_layout &&
           (!a->pipeline_layout || !strcmp(a->pipeline_layout, b->pipeline_layout));
}

/* The file's keys for the uneven split: Megatron-Core's option names. */
#define K_FIRST "decoder_first_pipeline_num_layers"
#define K_LAST "decoder_last_pipeline_num_layers"
#define K_EMB "account_for_embedding_in_pipeline_split"
#define K_LOSS "account_for_loss_in_pipeline_split"
#define K_LAYOUT "pipeline_model_parallel_layout"

static const char *const MODEL_KEYS[] = { "transformer", "seq_len", "attention", "balance",
                                          K_FIRST, K_LAST, K_EMB, K_LOSS, K_LAYOUT,
                                          NULL };

cJSON *plan_model_to_json(const plan_model *m)
{
    cJSON *o = m ? cJSON_CreateObject() : NULL, *t = m ? transformer_to_json(m->tf) : NULL;
    if (!o || !t) goto fail;
    cJSON_AddItemToObject(o, "transformer", t);
    t = NULL;
    if (!json_add_num(o, "seq_len", (double)m->tf->seq) ||
        !cJSON_AddStringToObject(o, "attention", m->attention ? "flash" : "standard") ||
        (m->balance && !cJSON_AddBoolToObject(o, "balance", 1)) ||
        (m->split.first_blocks > 0 && !json_add_num(o, K_FIRST, m->split.first_blocks)) ||
        (m->split.last_blocks > 0 && !json_add_num(o, K_LAST, m->split.last_blocks)) ||
        (m->split.account_embedding && !cJSON_AddBoolToObject(o, K_EMB, 1)) ||
        (m->split.account_loss && !cJSON_AddBoolToObject(o, K_LOSS, 1)) ||
        (m->pipeline_layout && !cJSON_AddStringToObject(o, K_LAYOUT, m->pipeline_layout)))
        goto fail;
    return o;
fail:
    cJSON_Delete(t);
    cJSON_Delete(o);
    return NULL;
}

/* The blocks of pl's stage k (its layers less the embedding, layer 0, and the head). */
static int stage_blocks(const plan *pl, int k)
{
    const plan_stage *st = &pl->stages[k];
    int head = pl->prof->nlayers - 1;
    int a = st->first_layer < 1 ? 1 : st->first_layer;
    int b = st->last_layer >= head ? head - 1 : st->last_layer;
    return b >= a ? b - a + 1 : 0;
}

int plan_blocks_most(const plan *pl)
{
    int tf = profile_is_transformer(pl->prof), most = 0;
    for (int k = 0; k < pl->nstages; k++) {
        const plan_stage *st = &pl->stages[k];
        int n = tf ? stage_blocks(pl, k) : st->last_layer - st->first_layer + 1;
        if (n > most) most = n;
    }
    return most;
}

/* The transformer blocks pl's stages give pipeline rank `rank` (the sum of its stages'
 * stage_blocks). */
static int rank_blocks(const plan *pl, int rank)
{
    int v = pl->chunks > 1 ? pl->chunks : 1, pp = pl->nstages / v, n = 0;
    for (int k = 0; k < pl->nstages; k++)
        if (sched_kind_rank(pl->schedule, k, pp) == rank) n += stage_blocks(pl, k);
    return n;
}

/* The model's transformer at v.transformer: a plumb-transformer/1 description, its errors
 * filed under "model.transformer". NULL with err. */
static transformer *load_transformer(const jctx *jc, const cJSON *v)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "transformer");
    const cJSON *f = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "format") : NULL;
    char got[96];
    if (!t) {
        err_set(jc->err, jc->file, "model.transformer", "missing; expected the %s description "
                "of the model laid out", TRANSFORMER_FORMAT);
        return NULL;
    }
    if (!cJSON_IsObject(t)) {
        err_set(jc->err, jc->file, "model.transformer", "expected a %s object (got %s)",
                TRANSFORMER_FORMAT, json_describe(t, got, sizeof got));
        return NULL;
    }
    if (!cJSON_IsString(f) || strcmp(f->valuestring, TRANSFORMER_FORMAT)) {
        err_set(jc->err, jc->file, "model.transformer.format", "expected \"%s\" (got %s)",
                TRANSFORMER_FORMAT, f ? json_describe(f, got, sizeof got) : "nothing");
        return NULL;
    }
    plumb_err in;
    err_clear(&in);
    transformer *tf = transformer_from_json(t, "", &in);
    if (!tf) { /* "KEY: text" becomes "model.transformer.KEY: text" */
        const char *m = in.msg, *colon = strstr(m, ": ");
        int is_path = colon && colon > m && memchr(m, ' ', (size_t)(colon - m)) == NULL;
        err_set(jc->err, jc->file, NULL, "model.transformer%s%s", is_path ? "." : ": ", m);
    }
    return tf;
}

/* m's pipeline_model_parallel_layout at v (absent: none), checked against pl: alone (no
 * other uneven split: `uneven`, nor balance), a layout string Megatron-Core takes for the
 * plan's pp x v virtual stages (pplayout_split), each holding the blocks the plan's stage of
 * that index holds. 0, or -1 with err naming model.pipeline_model_parallel_layout. */
static int load_layout(const jctx *jc, const cJSON *v, const plan *pl, plan_model *m,
                       int uneven)
{
    const char *s = NULL;
    if (json_get_str(jc, v, "model", K_LAYOUT, 0, &s)) return -1;
    if (!s) return 0;
    if (uneven || m->balance)
        return err_set(jc->err, jc->file, "model." K_LAYOUT, "expected no %s with it "
                       "(Megatron-Core takes one kind of uneven split)",
                       m->balance ? "balance" : "decoder_first/last or account_for option");
    int vv = pl->chunks > 1 ? pl->chunks : 1, pp = pl->nstages / vv;
    int *n = calloc((size_t)pl->nstages, sizeof *n);
    if (!n) return err_set(jc->err, jc->file, "model." K_LAYOUT, "out of memory");
    plumb_err in;
    err_clear(&in);
    int rc = 0;
    if (pplayout_split(s, (int)m->tf->layers, pp, vv, n, &in)) {
        rc = err_set(jc->err, jc->file, "model." K_LAYOUT, "%s", in.msg);
    } else {
        for (int k = 0; k < pl->nstages && !rc; k++)
            if (n[k] != stage_blocks(pl, k))
                rc = err_set(jc->err, jc->file, "model." K_LAYOUT, "expected virtual stage %d "
                             "to hold the %d blocks of the plan's stage %d (the layout gives "
                             "%d)", k, stage_blocks(pl, k), k, n[k]);
    }
    free(n);
    if (!rc && !(m->pipeline_layout = strdup(s)))
        rc = err_set(jc->err, jc->file, "model." K_LAYOUT, "out of memory");
    return rc;
}

/* The options of m at v, checked against pl. 0, or -1 with err. */
static int load_options(const jctx *jc, const cJSON *v, const plan *pl, plan_model *m)
{
    const transformer *tf = m->tf;
    const profile *p = pl->prof;
    long long x = 0;
    const char *s = "standard";
    if (json_get_int(jc, v, "model", "seq_len", 1, 1, SEQ_MAX, &x)) return -1;
    if (x != p->tokens_per_sample)
        return err_set(jc->err, jc->file, "model.seq_len", "expected the profile's "
                       "tokens_per_sample %lld (got %lld)", p->tokens_per_sample, x);
    if (tf->learned_positions && x > tf->max_positions)
        return err_set(jc->err, jc->file, "model.seq_len", "expected at most the %lld learned "
                       "positions (got %lld)", tf->max_positions, x);
    m->tf->seq = x;
    if (json_get_str(jc, v, "model", "attention", 0, &s)) return -1;
    if (strcmp(s, "standard") && strcmp(s, "flash"))
        return err_set(jc->err, jc->file, "model.attention", "expected standard or flash (got "
                       "\"%.40s\")", s);
    m->attention = strcmp(s, "flash") == 0;
    if (plan_cp(pl) > 1 && !m->attention)
        return err_set(jc->err, jc->file, "model.attention", "expected flash with cp %d "
                       "(context parallelism runs the fused attention)", plan_cp(pl));
    if (json_get_bool(jc, v, "model", "balance", 0, &m->balance) ||
        json_get_bool(jc, v, "model", K_EMB, 0, &m->split.account_embedding) ||
        json_get_bool(jc, v, "model", K_LOSS, 0, &m->split.account_loss))
        return -1;
    x = 0;
    if (json_get_int(jc, v, "model", K_FIRST, 0, 1, tf->layers, &x)) return -1;
    m->split.first_blocks = (int)x;
    x = 0;
    if (json_get_int(jc, v, "model", K_LAST, 0, 1, tf->layers, &x)) return -1;
    m->split.last_blocks = (int)x;
    int counts = m->split.first_blocks || m->split.last_blocks;
    int acc = m->split.account_embedding || m->split.account_loss;
    const char *kf = m->split.first_blocks ? "model." K_FIRST : "model." K_LAST;
    if (counts && acc)
        return err_set(jc->err, jc->file, kf, "expected no count with %s (Megatron-Core takes "
                       "one kind of uneven split)",
                       m->split.account_embedding ? K_EMB : K_LOSS);
    if (m->balance && (counts || acc))
        return err_set(jc->err, jc->file, "model.balance", "expected false with an uneven "
                       "split (the stages are Megatron-Core's, not balanced)");
    int v_ = pl->chunks > 1 ? pl->chunks : 1, pp = pl->nstages / v_;
    if (load_layout(jc, v, pl, m, counts || acc)) return -1;
    if (m->split.first_blocks && rank_blocks(pl, 0) != m->split.first_blocks)
        return err_set(jc->err, jc->file, "model." K_FIRST, "expected the %d blocks the stages "
                       "give pipeline rank 0 (got %d)", rank_blocks(pl, 0),
                       m->split.first_blocks);
    if (m->split.last_blocks && rank_blocks(pl, pp - 1) != m->split.last_blocks)
        return err_set(jc->err, jc->file, "model." K_LAST, "expected the %d blocks the stages "
                       "give pipeline rank %d (got %d)", rank_blocks(pl, pp - 1), pp - 1,
                       m->split.last_blocks);
    return 0;
}

plan_model *plan_model_from_json(const cJSON *v, const plan *pl, const char *file,
                                 plumb_err *err)
{
    jctx jc = { file, err };
    char got[96];
    if (!cJSON_IsObject(v)) {
        err_set(err, file, "model", "expected an object (the transformer laid out and its "
                "options; got %s)", json_describe(v, got, sizeof got));
        return NULL;
    }
    if (json_check_keys(&jc, v, "model", MODEL_KEYS)) return NULL;
    if (!profile_is_transformer(pl->prof)) {
        err_set(err, file, "model", "expected a plan of a transformer's layout (its profile's "
                "layers an Embedding, TransformerBlocks and an LMHead)");
        return NULL;
    }
    transformer *tf = load_transformer(&jc, v);
    if (!tf) return NULL;
    plan_model *m = calloc(1, sizeof *m);
    if (!m) {
        transformer_free(tf);
        err_set(err, file, "model", "out of memory");
        return NULL;
    }
    m->tf = tf;
    if (tf->layers != pl->prof->nlayers - 2) {
        err_set(err, file, "model.transformer.num_hidden_layers", "expected the profile's %d "
                "blocks (its layers less the embedding and the head; got %lld)",
                pl->prof->nlayers - 2, tf->layers);
        goto fail;
    }
    if (load_options(&jc, v, pl, m)) goto fail;
    return m;
fail:
    plan_model_free(m);
    return NULL;
}
