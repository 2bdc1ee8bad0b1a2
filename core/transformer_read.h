/* transformer_read.h: the key readers shared by the transformer loader's files
 * (core/transformer.c, transformer_window.c, transformer_gemma.c, transformer_moe.c,
 * transformer_dense.c); internal to them, not part of core/transformer.h's interface. Each
 * returns 0, or -1 with jc->err set to one line naming the file and the key. */
#ifndef PLUMB_TRANSFORMER_READ_H
#define PLUMB_TRANSFORMER_READ_H

#include "json.h"
#include "transformer.h"

#define TF_MAX_DIM 100000000LL /* heads, vocabulary, positions */

/* The families a file is read as (core/transformer.c's FAMILIES table, in this order). */
typedef enum tf_fam {
    F_GPT2, F_NEOX, F_LLAMA, F_MISTRAL, F_QWEN2, F_QWEN3, F_GEMMA, F_GEMMA2, F_GEMMA3,
    F_MIXTRAL, F_QWEN3_MOE, F_QWEN2_MOE, F_PHI3, F_STARCODER2, F_OLMO2, F_GRANITE, F_PLUMB
} tf_fam;

/* A positive integer at root.key (within the key's limit) into *out; an absent or null key
 * is an error when required, else *out keeps its default. */
int tf_get_dim(const jctx *jc, const cJSON *root, const char *key, int required,
               long long *out);
/* A boolean at root.key into *out (absent or null: *out keeps its default). */
int tf_get_flag(const jctx *jc, const cJSON *root, const char *key, int *out);
/* A dropout probability at root.key: *out set to 1 when it is > 0 (absent: unchanged). */
int tf_get_dropout(const jctx *jc, const cJSON *root, const char *key, int *out);
/* The activation named at root.key (absent: *out keeps its default). */
int tf_get_act(const jctx *jc, const cJSON *root, const char *key, tf_act *out);

/* transformer_window.c. The per-layer attention kinds at root.layer_types (transformers'
 * list: one string a layer, "sliding_attention" or "full_attention") into full[] (layers
 * entries, 1: full), *given set to 1; absent or null: *given 0 and full[] unchanged. */
int tf_get_layer_types(const jctx *jc, const cJSON *root, long long layers,
                       unsigned char *full, int *given);
/* t->window = w on the layers full[] leaves (t->layers entries, 1: full attention), kept in
 * t->full_layers (a copy) unless every layer has the window; no window when w is 0 or no
 * layer has it. */
int tf_set_windows(const jctx *jc, transformer *t, long long w, const unsigned char *full);
/* The sliding window of a mistral, qwen2, qwen3, gemma2 or gemma3_text config into
 * t->window and t->full_layers by the family's rule (t->layers already read); phi3,
 * starcoder2 and mixtral are read as F_MISTRAL. */
int tf_get_window(const jctx *jc, const cJSON *root, tf_fam f, transformer *t);

/* transformer_dense.c. starcoder2's keys beyond the six every rotary family has (t's sizes
 * already read): its norms, biases, MLP, heads, tying, dropout and window. */
int tf_load_starcoder2(const jctx *jc, const cJSON *root, transformer *t);
/* transformer_dense.c. Granite's four scalings (embedding_multiplier,
 * residual_multiplier, attention_multiplier, logits_scaling: positive numbers) into t: each
 * absent one 1.0 (configuration_granite.py's default) with `defaults`, else left 0. */
int tf_get_granite(const jctx *jc, const cJSON *root, int defaults, transformer *t);
/* A soft-capping constant at root.key into *out: a positive number, or
 * null (none: 0); absent: *out keeps its default. */
int tf_get_softcap(const jctx *jc, const cJSON *root, const char *key, double *out);
/* The Gemma families' keys beyond the six every rotary family has (F_GEMMA, F_GEMMA2 or
 * F_GEMMA3; t's sizes already read). */
int tf_load_gemma(const jctx *jc, const cJSON *root, tf_fam f, transformer *t);

/* transformer_moe.c. The experts of a mixtral, qwen3_moe or qwen2_moe config (F_MIXTRAL,
 * F_QWEN3_MOE, F_QWEN2_MOE) into t->experts, t->experts_per_tok, t->moe_ffn and
 * t->shared_ffn (t's other sizes already read). */
int tf_load_moe(const jctx *jc, const cJSON *root, tf_fam f, transformer *t);
/* plumb-transformer/1's num_experts, num_experts_per_tok and moe_intermediate_size (all
 * three or none) and shared_expert_intermediate_size (only with them) into t. */
int tf_load_moe_plumb(const jctx *jc, const cJSON *root, transformer *t);

#endif
