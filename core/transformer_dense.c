/* transformer_dense.c: the dense families whose block needs more than the common llama
 * keys (core/transformer.c's load_hf): starcoder2's LayerNorm block with biases and
 * Granite's scalings (elementwise constants, no parameters), read by transformers' rules
 * into a transformer (core/transformer_read.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "transformer_read.h"

/* Granite's scalings (transformers' modeling_granite.py: the embedding times
 * embedding_multiplier, each half's output times residual_multiplier, the scores times
 * attention_multiplier, the logits over logits_scaling); with defaults an absent key is
 * 1.0, as configuration_granite.py has it. */
int tf_get_granite(const jctx *jc, const cJSON *root, int defaults, transformer *t)
{
    static const char *const keys[] = {"embedding_multiplier", "residual_multiplier",
                                       "attention_multiplier", "logits_scaling"};
    double *out[] = {&t->embed_mult, &t->residual_mult, &t->attn_mult, &t->logits_scale};
    for (int i = 0; i < 4; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        *out[i] = defaults ? 1.0 : 0;
        if (v && json_get_num(jc, root, "", keys[i], 1, J_POS, out[i])) return -1;
    }
    return 0;
}

/* starcoder2 (transformers' modeling_starcoder2.py): a LayerNorm block (weight and bias) with
 * biases on the Q, K, V, output and both MLP projections as use_bias says (default true), a
 * plain MLP c_fc, act (hidden_act, default gelu_pytorch_tanh), c_proj, grouped-query
 * attention (num_key_value_heads, required: its configuration's default is 2, not the
 * heads), embeddings tied unless tie_word_embeddings says otherwise, dropout after the
 * attention probabilities (attention_dropout) and each half (residual_dropout), and
 * mistral's sliding window (sliding_window: null or absent none) on every block. */
int tf_load_starcoder2(const jctx *jc, const cJSON *root, transformer *t)
{
    int bias = 1;
    t->activation = TF_GELU;
    t->norm = TF_LAYERNORM;
    t->tied_embeddings = 1;
    if (tf_get_dim(jc, root, "num_key_value_heads", 1, &t->kv_heads) ||
        tf_get_dim(jc, root, "head_dim", 0, &t->head_dim) ||
        tf_get_act(jc, root, "hidden_act", &t->activation) ||
        tf_get_flag(jc, root, "use_bias", &bias) ||
        tf_get_flag(jc, root, "tie_word_embeddings", &t->tied_embeddings) ||
        tf_get_dropout(jc, root, "attention_dropout", &t->dropout) ||
        tf_get_dropout(jc, root, "residual_dropout", &t->dropout))
        return -1;
    t->qkv_bias = t->out_bias = t->mlp_bias = bias;
    return tf_get_window(jc, root, F_MISTRAL, t);
}
