/* transformer_gemma.c: the Gemma families' Hugging Face configs (gemma, gemma2,
 * gemma3_text), read by transformers' rules into a transformer (core/transformer_read.h),
 * and the soft-capping keys they and plumb-transformer/1 share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "transformer_read.h"

/* A soft-capping constant at root.key into *out: a positive number, or null (none: 0);
 * absent: *out keeps its default. */
int tf_get_softcap(const jctx *jc, const cJSON *root, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return 0;
    if (cJSON_IsNull(v)) {
        *out = 0;
        return 0;
    }
    return json_get_num(jc, root, "", key, 1, J_POS, out);
}

/* gemma, gemma2, gemma3_text (transformers' modeling_gemma*.py): llama's block with head_dim
 * and num_key_value_heads given, a gated GELU MLP (hidden_activation, else hidden_act),
 * RMSNorm (its weight applied as 1 + w: the same cost), embeddings tied unless
 * tie_word_embeddings says otherwise, attention_bias on the Q, K, V and output projections,
 * the embedding scaled by sqrt(hidden_size). gemma2 and gemma3_text add a norm after the
 * attention and one after the MLP, the attention scores' and the logits' soft-capping
 * (attn_logit_softcapping, final_logit_softcapping: gemma2's default 50 and 30,
 * gemma3_text's none) and the sliding window on some layers (tf_get_window); gemma3_text adds
 * q_norm and k_norm. query_pre_attn_scalar and the rope bases cost nothing. */
int tf_load_gemma(const jctx *jc, const cJSON *root, tf_fam f, transformer *t)
{
    int ab = 0;
    t->gated_mlp = 1;
    t->activation = TF_GELU;
    t->norm = TF_RMSNORM;
    t->tied_embeddings = 1;
    t->embed_scale = 1;
    t->post_norms = f != F_GEMMA;
    t->qk_norm = f == F_GEMMA3;
    if (f == F_GEMMA2) {
        t->attn_softcap = 50;
        t->final_softcap = 30;
    }
    static const char *const acts[] = {"hidden_act", "hidden_activation"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, acts[i]);
        if (v && !cJSON_IsNull(v) && tf_get_act(jc, root, acts[i], &t->activation)) return -1;
    }
    if (tf_get_dim(jc, root, "num_key_value_heads", 1, &t->kv_heads) ||
        tf_get_dim(jc, root, "head_dim", 1, &t->head_dim) ||
        tf_get_flag(jc, root, "tie_word_embeddings", &t->tied_embeddings) ||
        tf_get_flag(jc, root, "attention_bias", &ab) ||
        tf_get_dropout(jc, root, "attention_dropout", &t->dropout))
        return -1;
    t->qkv_bias = t->out_bias = ab;
    if (f == F_GEMMA) return 0;
    return tf_get_softcap(jc, root, "attn_logit_softcapping", &t->attn_softcap) ||
           tf_get_softcap(jc, root, "final_logit_softcapping", &t->final_softcap) ||
           tf_get_window(jc, root, f, t);
}
