/* transformer.c: reading transformer descriptions (Hugging Face config.json files of the
 * gpt2, gpt_neox, llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral,
 * qwen3_moe, qwen2_moe, phi3, starcoder2, olmo2 and granite families, and
 * plumb-transformer/1), copying, comparing and writing them (sizes and FLOPs:
 * transformer_size.c). Every missing, unknown or bad key gets one error line naming the file
 * and the key. */
#include "transformer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "json.h"
#include "transformer_read.h"

/* The largest sizes taken: with these the parameter count stays below 2^63; the layers
 * are core/bounds.h's (a search's time grows with them). */
static const struct { const char *key; long long max; } LIMITS[] = {
    {"n_embd", 1000000},        {"hidden_size", 1000000},     {"n_layer", BOUND_BLOCKS_MAX},
    {"num_hidden_layers", BOUND_BLOCKS_MAX}, {"n_inner", 10000000},
    {"intermediate_size", 10000000}, {"head_dim", 1000000},
    {"moe_intermediate_size", 10000000}, {"shared_expert_intermediate_size", 10000000},
};

static long long dim_max(const char *key)
{
    for (size_t i = 0; i < sizeof LIMITS / sizeof LIMITS[0]; i++)
        if (strcmp(key, LIMITS[i].key) == 0) return LIMITS[i].max;
    return TF_MAX_DIM;
}

void transformer_free(transformer *t)
{
    if (!t) return;
    free(t->name);
    free(t->family);
    free(t->full_layers);
    free(t);
}

/* ---- key readers ---------------------------------------------------------------------- */

/* A positive integer at root.key into *out; an absent or null key is an error when
 * required, else *out keeps its default. */
int tf_get_dim(const jctx *jc, const cJSON *root, const char *key, int required,
               long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsNull(v) && !required) return 0;
    if (cJSON_IsNull(v)) v = NULL;
    if (!v && required)
        return err_set(jc->err, jc->file, key,
                       "missing; expected a positive integer (this model family needs it)");
    return json_get_int(jc, root, "", key, required, 1, dim_max(key), out);
}

/* A boolean at root.key into *out (absent or null: *out keeps its default). */
int tf_get_flag(const jctx *jc, const cJSON *root, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    return json_get_bool(jc, root, "", key, 1, out);
}

/* A dropout probability at root.key: sets *out to 1 when it is > 0 (absent: unchanged). */
int tf_get_dropout(const jctx *jc, const cJSON *root, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    double p = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (json_get_num(jc, root, "", key, 1, J_NONNEG, &p)) return -1;
    if (p >= 1)
        return err_set(jc->err, jc->file, key, "expected a probability below 1 (got %g)", p);
    if (p > 0) *out = 1;
    return 0;
}

/* The activation named at root.key (absent: *out keeps its default). */
int tf_get_act(const jctx *jc, const cJSON *root, const char *key, tf_act *out)
{
    static const struct { const char *name; tf_act act; } acts[] = {
        {"gelu", TF_GELU}, {"gelu_new", TF_GELU}, {"gelu_fast", TF_GELU},
        {"gelu_pytorch_tanh", TF_GELU}, {"relu", TF_RELU}, {"silu", TF_SILU},
        {"swish", TF_SILU}};
    const char *s = NULL;
    if (!cJSON_GetObjectItemCaseSensitive(root, key)) return 0;
    if (json_get_str(jc, root, "", key, 1, &s)) return -1;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(s, acts[i].name) == 0) {
            *out = acts[i].act;
            return 0;
        }
    return err_set(jc->err, jc->file, key,
                   "expected gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, relu, silu or swish "
                   "(got \"%.40s\")", s);
}

/* One of `n` names at root.key (required): its index into *out. */
static int get_choice(const jctx *jc, const cJSON *root, const char *key,
                      const char *const *names, int n, int *out)
{
    const char *s = NULL;
    if (json_get_str(jc, root, "", key, 1, &s)) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    char list[160];
    size_t k = 0;
    list[0] = '\0';
    for (int i = 0; i < n && k < sizeof list; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", names[i]);
    return err_set(jc->err, jc->file, key, "expected one of %s (got \"%.40s\")", list, s);
}

/* ---- the families ---------------------------------------------------------------------- */


static const struct {
    const char *model_type, *architecture;
    tf_fam f;
} FAMILIES[] = {
    {"gpt2", "GPT2LMHeadModel", F_GPT2},
    {"gpt_neox", "GPTNeoXForCausalLM", F_NEOX},
    {"llama", "LlamaForCausalLM", F_LLAMA},
    {"mistral", "MistralForCausalLM", F_MISTRAL},
    {"qwen2", "Qwen2ForCausalLM", F_QWEN2},
    {"qwen3", "Qwen3ForCausalLM", F_QWEN3},
    {"gemma", "GemmaForCausalLM", F_GEMMA},
    {"gemma2", "Gemma2ForCausalLM", F_GEMMA2},
    {"gemma3_text", "Gemma3ForCausalLM", F_GEMMA3},
    {"mixtral", "MixtralForCausalLM", F_MIXTRAL},
    {"qwen3_moe", "Qwen3MoeForCausalLM", F_QWEN3_MOE},
    {"qwen2_moe", "Qwen2MoeForCausalLM", F_QWEN2_MOE},
    {"phi3", "Phi3ForCausalLM", F_PHI3},
    {"starcoder2", "Starcoder2ForCausalLM", F_STARCODER2},
    {"olmo2", "Olmo2ForCausalLM", F_OLMO2},
    {"granite", "GraniteForCausalLM", F_GRANITE},
};
#define NFAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

/* The family of a Hugging Face config: its model_type, else its architectures[0]. */
static int hf_family(const jctx *jc, const cJSON *root, tf_fam *out)
{
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const char *s = NULL, *key = "model_type";
    if (mt) {
        if (json_get_str(jc, root, "", "model_type", 1, &s)) return -1;
    } else {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "architectures");
        const cJSON *a0 = cJSON_IsArray(arr) ? cJSON_GetArrayItem(arr, 0) : NULL;
        key = "architectures[0]";
        if (!cJSON_IsString(a0))
            return err_set(jc->err, jc->file, "model_type",
                           "missing; expected a model type (gpt2, gpt_neox, llama, mistral, "
                           "qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral, qwen3_moe, "
                           "qwen2_moe, phi3, starcoder2, olmo2, granite) or an architectures "
                           "list");
        s = a0->valuestring;
    }
    for (int i = 0; i < NFAMILIES; i++)
        if (strcmp(s, mt ? FAMILIES[i].model_type : FAMILIES[i].architecture) == 0) {
            *out = FAMILIES[i].f;
            return 0;
        }
    if (strcmp(s, mt ? "gemma3" : "Gemma3ForConditionalGeneration") == 0)
        return err_set(jc->err, jc->file, key,
                       "\"%s\" is Gemma 3's image-and-text model, whose vision tower plumb does "
                       "not price; expected its language model alone: give its text_config as "
                       "a file of its own with \"model_type\": \"gemma3_text\"", s);
    return err_set(jc->err, jc->file, key,
                   "unknown architecture; expected %s (got \"%.60s\")",
                   mt ? "gpt2, gpt_neox, llama, mistral, qwen2, qwen3, gemma, gemma2, "
                        "gemma3_text, mixtral, qwen3_moe, qwen2_moe, phi3, starcoder2, "
                        "olmo2 or granite"
                      : "GPT2LMHeadModel, GPTNeoXForCausalLM, LlamaForCausalLM, "
                        "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                        "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                        "MixtralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, "
                        "Phi3ForCausalLM, Starcoder2ForCausalLM, Olmo2ForCausalLM or "
                        "GraniteForCausalLM",
                   s);
}

static int load_gpt2(const jctx *jc, const cJSON *root, transformer *t)
{
    t->ffn = 0;
    if (tf_get_dim(jc, root, "n_embd", 1, &t->hidden) ||
        tf_get_dim(jc, root, "n_layer", 1, &t->layers) ||
        tf_get_dim(jc, root, "n_head", 1, &t->heads) ||
        tf_get_dim(jc, root, "n_positions", 1, &t->max_positions) ||
        tf_get_dim(jc, root, "vocab_size", 1, &t->vocab) ||
        tf_get_dim(jc, root, "n_inner", 0, &t->ffn))
        return -1;
    if (!t->ffn) t->ffn = 4 * t->hidden; /* n_inner null or absent: 4 h */
    t->kv_heads = t->heads;
    t->activation = TF_GELU;
    t->norm = TF_LAYERNORM;
    t->learned_positions = 1;
    t->qkv_bias = t->out_bias = t->mlp_bias = 1;
    t->tied_embeddings = 1;
    t->dropout = 0;
    return tf_get_act(jc, root, "activation_function", &t->activation) ||
           tf_get_flag(jc, root, "tie_word_embeddings", &t->tied_embeddings) ||
           tf_get_dropout(jc, root, "attn_pdrop", &t->dropout) ||
           tf_get_dropout(jc, root, "resid_pdrop", &t->dropout);
}

/* gpt_neox, llama, mistral, qwen2, qwen3 (and the gemma families: tf_load_gemma; mixtral,
 * mistral's attention, qwen3_moe, qwen3's, and qwen2_moe, qwen2's with qkv_bias, with their
 * experts: tf_load_moe): the common keys. All but gpt_neox take head_dim (the head width;
 * absent or null: hidden_size / num_attention_heads, as transformers' attention modules read
 * it). qwen3 is llama's block with attention_bias on the Q, K, V and output projections (no MLP
 * bias) and the per-head query and key RMSNorms (q_norm, k_norm). phi3 (transformers'
 * modular_phi3.py) is mistral's block with the Q, K, V projections fused into qkv_proj and gate
 * and up into gate_up_proj (the same shapes and FLOPs as separate ones; no biases), dropout
 * after each half (resid_pdrop) and mistral's sliding window on every block (sliding_window;
 * Phi-3-mini-4k's 2047); its partial rotary embedding costs nothing. olmo2 (transformers'
 * modular_olmo2.py) is llama's block (attention_bias, no mlp_bias) with its two RMSNorms moved
 * after the attention and the MLP, none before (post_norms, no_pre_norms), and q_norm and
 * k_norm over the whole query and key projections (qk_norm TF_QK_WIDTH); no window. granite
 * (modeling_granite.py) is llama's block (attention_bias, mlp_bias) with four scalings,
 * tf_get_granite, each 1.0 when absent and applied whatever its value. starcoder2:
 * tf_load_starcoder2. */
static int load_hf(const jctx *jc, const cJSON *root, tf_fam f, transformer *t)
{
    if (tf_get_dim(jc, root, "hidden_size", 1, &t->hidden) ||
        tf_get_dim(jc, root, "num_hidden_layers", 1, &t->layers) ||
        tf_get_dim(jc, root, "num_attention_heads", 1, &t->heads) ||
        tf_get_dim(jc, root, "intermediate_size", 1, &t->ffn) ||
        tf_get_dim(jc, root, "max_position_embeddings", 1, &t->max_positions) ||
        tf_get_dim(jc, root, "vocab_size", 1, &t->vocab))
        return -1;
    t->kv_heads = t->heads;
    t->learned_positions = 0;
    t->tied_embeddings = 0;
    t->dropout = 0;
    if (f == F_GEMMA || f == F_GEMMA2 || f == F_GEMMA3) return tf_load_gemma(jc, root, f, t);
    if (f == F_NEOX) {
        t->activation = TF_GELU;
        t->norm = TF_LAYERNORM;
        t->qkv_bias = t->out_bias = t->mlp_bias = 1;
        return tf_get_act(jc, root, "hidden_act", &t->activation) ||
               tf_get_flag(jc, root, "tie_word_embeddings", &t->tied_embeddings) ||
               tf_get_dropout(jc, root, "attention_dropout", &t->dropout) ||
               tf_get_dropout(jc, root, "hidden_dropout", &t->dropout);
    }
    if (f == F_STARCODER2) return tf_load_starcoder2(jc, root, t);
    t->gated_mlp = 1;
    t->activation = TF_SILU;
    t->norm = TF_RMSNORM;
    t->qkv_bias = f == F_QWEN2 || f == F_QWEN2_MOE;
    t->qk_norm = f == F_QWEN3 || f == F_QWEN3_MOE ? TF_QK_HEAD : f == F_OLMO2 ? TF_QK_WIDTH : 0;
    t->post_norms = t->no_pre_norms = f == F_OLMO2;
    if (tf_get_dim(jc, root, "num_key_value_heads", 0, &t->kv_heads) ||
        tf_get_dim(jc, root, "head_dim", 0, &t->head_dim) ||
        tf_get_act(jc, root, "hidden_act", &t->activation) ||
        tf_get_flag(jc, root, "tie_word_embeddings", &t->tied_embeddings) ||
        tf_get_dropout(jc, root, "attention_dropout", &t->dropout))
        return -1;
    if ((f == F_MISTRAL || f == F_QWEN2 || f == F_QWEN3) && tf_get_window(jc, root, f, t))
        return -1;
    if (f == F_PHI3 && (tf_get_dropout(jc, root, "resid_pdrop", &t->dropout) ||
                        tf_get_window(jc, root, F_MISTRAL, t)))
        return -1;
    if (f == F_MIXTRAL && tf_get_window(jc, root, F_MISTRAL, t)) return -1;
    if (f == F_QWEN2_MOE && tf_get_flag(jc, root, "qkv_bias", &t->qkv_bias)) return -1;
    if (f == F_QWEN3_MOE || f == F_QWEN2_MOE) { /* their configs keep sliding_window only
                                                   with use_sliding_window */
        long long w = 0;
        int use = 0;
        if (tf_get_dim(jc, root, "sliding_window", 0, &w) ||
            tf_get_flag(jc, root, "use_sliding_window", &use))
            return -1;
        if (use)
            return err_set(jc->err, jc->file, "use_sliding_window", "expected false: plumb "
                           "does not price %s's sliding window (got true)",
                           f == F_QWEN3_MOE ? "qwen3_moe" : "qwen2_moe");
    }
    if ((f == F_MIXTRAL || f == F_QWEN3_MOE || f == F_QWEN2_MOE) && tf_load_moe(jc, root, f, t))
        return -1;
    if (f == F_GRANITE && tf_get_granite(jc, root, 1, t)) return -1;
    if (f == F_LLAMA || f == F_QWEN3 || f == F_QWEN3_MOE || f == F_OLMO2 || f == F_GRANITE) {
        int ab = 0;
        if (tf_get_flag(jc, root, "attention_bias", &ab) ||
            ((f == F_LLAMA || f == F_GRANITE) && tf_get_flag(jc, root, "mlp_bias", &t->mlp_bias)))
            return -1;
        t->qkv_bias = t->out_bias = ab;
    }
    return 0;
}

static const char *const PLUMB_KEYS[] = {
    "format", "name", "description", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "max_position_embeddings",
    "vocab_size", "mlp", "norm", "position_embedding", "bias", "qkv_bias", "out_bias",
    "mlp_bias", "qk_norm", "qk_norm_full", "sliding_window", "layer_types", "post_norms",
    "pre_norms", "embedding_scale", "embedding_multiplier", "residual_multiplier",
    "attention_multiplier", "logits_scaling",
    "attn_logit_softcapping", "final_logit_softcapping", "tie_word_embeddings", "dropout",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", NULL};

/* plumb-transformer/1's "mlp" words: the activation of each and whether it is gated (the
 * plain silu and the gated relu say what a Hugging Face config with those activations
 * computes, so that transformer_to_json writes every family's model). */
static const char *const MLP_NAMES[] = {"gelu", "relu", "swiglu", "geglu", "silu", "reglu"};
static const tf_act MLP_ACT[] = {TF_GELU, TF_RELU, TF_SILU, TF_GELU, TF_SILU, TF_RELU};
static const int MLP_GATED[] = {0, 0, 1, 1, 0, 1};
#define NMLP ((int)(sizeof MLP_NAMES / sizeof MLP_NAMES[0]))

static int load_plumb(const jctx *jc, const cJSON *root, transformer *t)
{
    static const char *const norms[] = {"layernorm", "rmsnorm"};
    static const char *const pos[] = {"learned", "rotary"};
    const char *name = NULL, *desc = NULL;
    int mlp = 0, norm = 0, p = 0, bias = 0;
    if (json_check_keys(jc, root, "", PLUMB_KEYS) ||
        json_get_str(jc, root, "", "name", 1, &name) ||
        json_get_str(jc, root, "", "description", 0, &desc))
        return -1;
    if (!*name) return err_set(jc->err, jc->file, "name", "expected a non-empty string");
    free(t->name);
    if (!(t->name = strdup(name))) return err_set(jc->err, jc->file, NULL, "out of memory");
    if (load_hf(jc, root, F_LLAMA, t) || get_choice(jc, root, "mlp", MLP_NAMES, NMLP, &mlp) ||
        get_choice(jc, root, "norm", norms, 2, &norm) ||
        get_choice(jc, root, "position_embedding", pos, 2, &p) ||
        json_get_bool(jc, root, "", "bias", 1, &bias) ||
        json_get_bool(jc, root, "", "tie_word_embeddings", 1, &t->tied_embeddings) ||
        json_get_bool(jc, root, "", "dropout", 1, &t->dropout))
        return -1;
    t->gated_mlp = MLP_GATED[mlp];
    t->activation = MLP_ACT[mlp];
    t->norm = norm ? TF_RMSNORM : TF_LAYERNORM;
    t->learned_positions = p == 0;
    t->qkv_bias = t->out_bias = t->mlp_bias = bias; /* each projection's own key over it */
    long long w = 0;
    int qk_full = 0, pre = 1;
    if (tf_get_flag(jc, root, "qkv_bias", &t->qkv_bias) ||
        tf_get_flag(jc, root, "out_bias", &t->out_bias) ||
        tf_get_flag(jc, root, "mlp_bias", &t->mlp_bias) ||
        tf_get_flag(jc, root, "qk_norm", &t->qk_norm) ||
        tf_get_flag(jc, root, "qk_norm_full", &qk_full) ||
        tf_get_flag(jc, root, "post_norms", &t->post_norms) ||
        tf_get_flag(jc, root, "pre_norms", &pre) ||
        tf_get_flag(jc, root, "embedding_scale", &t->embed_scale) ||
        tf_get_softcap(jc, root, "attn_logit_softcapping", &t->attn_softcap) ||
        tf_get_softcap(jc, root, "final_logit_softcapping", &t->final_softcap) ||
        tf_get_dim(jc, root, "sliding_window", 0, &w) || tf_load_moe_plumb(jc, root, t) ||
        tf_get_granite(jc, root, 0, t))
        return -1;
    if (qk_full && !t->qk_norm)
        return err_set(jc->err, jc->file, "qk_norm_full", "expected only with qk_norm true "
                       "(the query and key norms it widens)");
    if (qk_full) t->qk_norm = TF_QK_WIDTH;
    if (!pre && !t->post_norms)
        return err_set(jc->err, jc->file, "pre_norms", "expected false only with post_norms "
                       "true (a block keeps its norms before or after attention and MLP)");
    t->no_pre_norms = !pre;
    if (t->experts && t->mlp_bias)
        return err_set(jc->err, jc->file, "mlp_bias", "expected false with experts: plumb's "
                       "experts have no biases (Mixtral's, Qwen3-MoE's)");
    /* layer_types: the blocks the window leaves (written only where some do) */
    unsigned char *full = calloc((size_t)t->layers, 1);
    int given = 0, rc = -1;
    if (!full) return err_set(jc->err, jc->file, NULL, "out of memory");
    if (!tf_get_layer_types(jc, root, t->layers, full, &given)) {
        if (given && !w)
            err_set(jc->err, jc->file, "layer_types", "expected only with a sliding_window (the "
                    "layers that have it)");
        else
            rc = tf_set_windows(jc, t, w, full);
    }
    free(full);
    return rc;
}

/* Shape rules every family shares. A head_dim given frees the width from dividing into the
 * heads; the attention it makes (heads x head_dim) stays within 8 x hidden, which bounds the
 * parameter count as the other sizes' limits do. */
static int check_shapes(const jctx *jc, const transformer *t, const char *heads_key,
                        const char *hidden_key)
{
    if (t->head_dim && t->heads * t->head_dim > 8 * t->hidden)
        return err_set(jc->err, jc->file, "head_dim",
                       "expected at most 8 x %s / %s = %lld, the attention heads x head_dim "
                       "within 8 x %s (got %lld)", hidden_key, heads_key,
                       8 * t->hidden / t->heads, hidden_key, t->head_dim);
    if (!t->head_dim && t->hidden % t->heads)
        return err_set(jc->err, jc->file, heads_key,
                       "expected a divisor of %s = %lld (got %lld)", hidden_key, t->hidden,
                       t->heads);
    if (t->kv_heads > t->heads || t->heads % t->kv_heads)
        return err_set(jc->err, jc->file, "num_key_value_heads",
                       "expected a divisor of the %lld attention heads (got %lld)", t->heads,
                       t->kv_heads);
    return 0;
}

int transformer_json_is_config(const cJSON *root)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (cJSON_IsString(f)) return strcmp(f->valuestring, TRANSFORMER_FORMAT) == 0;
    return cJSON_GetObjectItemCaseSensitive(root, "model_type") != NULL ||
           cJSON_GetObjectItemCaseSensitive(root, "architectures") != NULL;
}

/* The file's base name without folder and ".json": the name of a Hugging Face model. */
static char *base_name(const char *file)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".json") == 0) n -= 5;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

transformer *transformer_from_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx jc = {file, err};
    if (!cJSON_IsObject(root)) {
        err_set(err, file, NULL, "expected a JSON object (a config.json or %s)",
                TRANSFORMER_FORMAT);
        return NULL;
    }
    transformer *t = calloc(1, sizeof *t);
    if (!t || !(t->name = base_name(file))) {
        err_set(err, file, NULL, "out of memory");
        transformer_free(t);
        return NULL;
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    tf_fam f = F_PLUMB;
    int rc;
    if (format) rc = json_check_format(&jc, root, TRANSFORMER_FORMAT) || load_plumb(&jc, root, t);
    else if ((rc = json_check_unique(&jc, root, "") || hf_family(&jc, root, &f)) == 0)
        rc = f == F_GPT2 ? load_gpt2(&jc, root, t) : load_hf(&jc, root, f, t);
    const char *fname = f == F_PLUMB ? "plumb" : FAMILIES[f].model_type;
    if (!rc) rc = f == F_GPT2 ? check_shapes(&jc, t, "n_head", "n_embd")
                              : check_shapes(&jc, t, "num_attention_heads", "hidden_size");
    if (!rc && !(t->family = strdup(fname))) rc = err_set(err, file, NULL, "out of memory");
    if (rc) {
        transformer_free(t);
        return NULL;
    }
    t->seq = t->max_positions;
    return t;
}

transformer *transformer_load(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) return NULL;
    transformer *t = transformer_from_json(root, path, err);
    cJSON_Delete(root);
    return t;
}

/* ---- copies and writing ------------------------------------------------------------------ */

transformer *transformer_clone(const transformer *t)
{
    if (!t) return NULL;
    transformer *d = malloc(sizeof *d);
    if (!d) return NULL;
    *d = *t;
    d->name = t->name ? strdup(t->name) : NULL;
    d->family = t->family ? strdup(t->family) : NULL;
    d->full_layers = t->full_layers ? malloc((size_t)t->layers) : NULL;
    if (d->full_layers) memcpy(d->full_layers, t->full_layers, (size_t)t->layers);
    if ((t->name && !d->name) || (t->family && !d->family) ||
        (t->full_layers && !d->full_layers)) {
        transformer_free(d);
        return NULL;
    }
    return d;
}

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* 1 when a and b (of as many layers) put the window on the same blocks. */
static int same_windows(const transformer *a, const transformer *b)
{
    for (long long l = 0; l < a->layers; l++)
        if (transformer_layer_window(a, l) != transformer_layer_window(b, l)) return 0;
    return 1;
}

int transformer_equal(const transformer *a, const transformer *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    return str_eq(a->name, b->name) && a->hidden == b->hidden && a->layers == b->layers &&
           a->heads == b->heads && a->kv_heads == b->kv_heads &&
           transformer_head_dim(a) == transformer_head_dim(b) && a->ffn == b->ffn &&
           a->vocab == b->vocab && a->max_positions == b->max_positions && a->seq == b->seq &&
           a->gated_mlp == b->gated_mlp && a->activation == b->activation &&
           a->norm == b->norm && a->learned_positions == b->learned_positions &&
           a->qkv_bias == b->qkv_bias && a->out_bias == b->out_bias &&
           a->mlp_bias == b->mlp_bias && a->tied_embeddings == b->tied_embeddings &&
           a->dropout == b->dropout && a->qk_norm == b->qk_norm &&
           a->window == b->window && same_windows(a, b) &&
           (a->post_norms != 0) == (b->post_norms != 0) &&
           (a->no_pre_norms != 0) == (b->no_pre_norms != 0) &&
           (a->embed_scale != 0) == (b->embed_scale != 0) &&
           a->attn_softcap == b->attn_softcap && a->final_softcap == b->final_softcap &&
           a->embed_mult == b->embed_mult && a->residual_mult == b->residual_mult &&
           a->attn_mult == b->attn_mult && a->logits_scale == b->logits_scale &&
           a->experts == b->experts && a->experts_per_tok == b->experts_per_tok &&
           a->moe_ffn == b->moe_ffn && a->shared_ffn == b->shared_ffn;
}

/* o.layer_types: t's blocks as transformers names them; the array, or NULL when out of
 * memory. */
static cJSON *add_layer_types(cJSON *o, const transformer *t)
{
    cJSON *a = cJSON_AddArrayToObject(o, "layer_types");
    for (long long l = 0; a && l < t->layers; l++) {
        cJSON *v = cJSON_CreateString(transformer_layer_window(t, l) ? "sliding_attention"
                                                                     : "full_attention");
        if (!v || !cJSON_AddItemToArray(a, v)) return cJSON_Delete(v), NULL;
    }
    return a;
}

cJSON *transformer_to_json(const transformer *t)
{
    if (!t) return NULL;
    int mlp = -1;
    for (int i = 0; i < NMLP; i++)
        if (MLP_ACT[i] == t->activation && MLP_GATED[i] == (t->gated_mlp != 0)) mlp = i;
    int bias = t->qkv_bias && t->out_bias && t->mlp_bias;
    /* head_dim, qk_norm, sliding_window, layer_types, Gemma's keys and the experts' only
     * where they say something, so that the description of every model without them reads
     * as before */
    int own_d = transformer_own_head_dim(t);
    cJSON *o = cJSON_CreateObject();
    if (!o || mlp < 0) goto fail;
    if (!cJSON_AddStringToObject(o, "format", TRANSFORMER_FORMAT) ||
        !cJSON_AddStringToObject(o, "name", t->name && *t->name ? t->name : "model") ||
        !json_add_num(o, "hidden_size", (double)t->hidden) ||
        !json_add_num(o, "num_hidden_layers", (double)t->layers) ||
        !json_add_num(o, "num_attention_heads", (double)t->heads) ||
        !json_add_num(o, "num_key_value_heads", (double)t->kv_heads) ||
        (own_d && !json_add_num(o, "head_dim", (double)transformer_head_dim(t))) ||
        !json_add_num(o, "intermediate_size", (double)t->ffn) ||
        !json_add_num(o, "max_position_embeddings", (double)t->max_positions) ||
        !json_add_num(o, "vocab_size", (double)t->vocab) ||
        !cJSON_AddStringToObject(o, "mlp", MLP_NAMES[mlp]) ||
        !cJSON_AddStringToObject(o, "norm", t->norm == TF_RMSNORM ? "rmsnorm" : "layernorm") ||
        !cJSON_AddStringToObject(o, "position_embedding",
                                 t->learned_positions ? "learned" : "rotary") ||
        !cJSON_AddBoolToObject(o, "bias", bias) ||
        ((t->qkv_bias != 0) != bias && !cJSON_AddBoolToObject(o, "qkv_bias", t->qkv_bias)) ||
        ((t->out_bias != 0) != bias && !cJSON_AddBoolToObject(o, "out_bias", t->out_bias)) ||
        ((t->mlp_bias != 0) != bias && !cJSON_AddBoolToObject(o, "mlp_bias", t->mlp_bias)) ||
        (t->qk_norm && !cJSON_AddBoolToObject(o, "qk_norm", 1)) ||
        (t->qk_norm == TF_QK_WIDTH && !cJSON_AddBoolToObject(o, "qk_norm_full", 1)) ||
        (t->window && !json_add_num(o, "sliding_window", (double)t->window)) ||
        (t->window && t->full_layers && !add_layer_types(o, t)) ||
        (t->post_norms && !cJSON_AddBoolToObject(o, "post_norms", 1)) ||
        (t->no_pre_norms && !cJSON_AddBoolToObject(o, "pre_norms", 0)) ||
        (t->embed_scale && !cJSON_AddBoolToObject(o, "embedding_scale", 1)) ||
        (t->attn_softcap > 0 && !json_add_num(o, "attn_logit_softcapping", t->attn_softcap)) ||
        (t->final_softcap > 0 && !json_add_num(o, "final_logit_softcapping", t->final_softcap)) ||
        (t->embed_mult > 0 && !json_add_num(o, "embedding_multiplier", t->embed_mult)) ||
        (t->residual_mult > 0 && !json_add_num(o, "residual_multiplier", t->residual_mult)) ||
        (t->attn_mult > 0 && !json_add_num(o, "attention_multiplier", t->attn_mult)) ||
        (t->logits_scale > 0 && !json_add_num(o, "logits_scaling", t->logits_scale)) ||
        (t->experts && (!json_add_num(o, "num_experts", (double)t->experts) ||
                        !json_add_num(o, "num_experts_per_tok", (double)t->experts_per_tok) ||
                        !json_add_num(o, "moe_intermediate_size", (double)t->moe_ffn))) ||
        (t->shared_ffn &&
         !json_add_num(o, "shared_expert_intermediate_size", (double)t->shared_ffn)) ||
        !cJSON_AddBoolToObject(o, "tie_word_embeddings", t->tied_embeddings) ||
        !cJSON_AddBoolToObject(o, "dropout", t->dropout))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}
