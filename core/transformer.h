/* transformer.h: a decoder-only transformer as plumb models its cost: width, depth, heads
 * (grouped-query attention through kv_heads; the head width hidden / heads unless the file
 * gives head_dim), MLP width and kind (plain or gated, or a mixture of experts), vocabulary,
 * sequence length, norms (and Qwen3's per-head query/key norms), positions, biases, dropout and
 * embedding tying. Read from a Hugging Face config.json (gpt2, gpt_neox, llama, mistral, qwen2,
 * qwen3, gemma, gemma2, gemma3_text, phi3, starcoder2, olmo2, granite, and the mixtures of
 * experts mixtral, qwen2_moe and qwen3_moe) or from plumb's own description
 * (plumb-transformer/1, the same keys under a format tag; docs/llm.md), with sliding-window
 * attention on every block or on some (Gemma 2's and Gemma 3's local layers, layer_types), and
 * Gemma's norms after attention and MLP, soft-capped scores and logits and scaled embedding. */
#ifndef PLUMB_TRANSFORMER_H
#define PLUMB_TRANSFORMER_H

#include "err.h"

#define TRANSFORMER_FORMAT "plumb-transformer/1"

typedef enum tf_norm { TF_LAYERNORM = 0, TF_RMSNORM } tf_norm;
typedef enum tf_act { TF_GELU = 0, TF_RELU, TF_SILU } tf_act;
enum { TF_QK_HEAD = 1, TF_QK_WIDTH = 2 }; /* transformer.qk_norm's kinds */

typedef struct transformer {
    char *name;              /* e.g. "llama3-8b"; owned */
    char *family;            /* "gpt2", "gpt_neox", "llama", "mistral", "qwen2", "qwen3",
                                "gemma", "gemma2", "gemma3_text", "mixtral",
                                "qwen2_moe", "qwen3_moe", "phi3", "starcoder2", "olmo2",
                                "granite" or "plumb" */
    long long hidden;        /* h: model width */
    long long layers;        /* l: transformer blocks */
    long long heads;         /* a: attention (query) heads; hidden % heads == 0 unless
                                head_dim is set */
    long long kv_heads;      /* key/value heads (== heads without grouped-query attention) */
    long long head_dim;      /* d: width of one head; 0: hidden / heads. The attention is
                                heads x d wide (Q and the output projection's input), which
                                need not be hidden (Mistral-Nemo, Qwen3) */
    long long ffn;           /* MLP inner width (per gate for gated MLPs) */
    long long vocab;         /* V */
    long long max_positions; /* the longest sequence the model takes */
    long long seq;           /* s: the sequence length costed (max_positions unless set) */
    int gated_mlp;           /* 1: act(x W_gate) * (x W_up) then W_down (SwiGLU); 0: act(x W1) W2 */
    tf_act activation;
    tf_norm norm;            /* LayerNorm (weight and bias) or RMSNorm (weight only) */
    int learned_positions;   /* 1: a max_positions x hidden position table (GPT-2/3) */
    int qkv_bias;            /* 1: the Q, K, V projections have biases (GPT-2/3, NeoX, Qwen2) */
    int out_bias;            /* 1: the attention output projection has a bias */
    int mlp_bias;            /* 1: the MLP projections have biases */
    int tied_embeddings;     /* 1: the LM head reuses the token embedding */
    int dropout;             /* 1: dropout after attention probabilities and each block half */
    int qk_norm;             /* 1 (TF_QK_HEAD): an RMSNorm of head_dim weights over each query
                                head and one over each key head, before the rotary embedding
                                (Qwen3); 2 (TF_QK_WIDTH): one over the whole query projection
                                (heads x head_dim weights) and one over the whole key
                                projection (kv_heads x head_dim), OLMo 2's q_norm and k_norm */
    long long window;        /* sliding-window attention: query i attends the keys
                                max(0, i - window + 1) .. i, window keys with itself
                                (transformers' sliding_window_overlay), on every block but
                                those full_layers names; 0: none (Mistral's sliding_window,
                                Qwen2's and Qwen3's with use_sliding_window, Gemma 2's and
                                Gemma 3's) */
    unsigned char *full_layers; /* with a window: layers entries, 1 for a block whose attention
                                   is the full causal one (transformers' layer_types
                                   "full_attention": Gemma 2's odd blocks, Gemma 3's every
                                   sixth); NULL: the window on every block. Owned; never all
                                   ones (no window then) nor set without a window */
    int post_norms;          /* 1: a norm after the attention and one after the MLP too, each
                                before its residual add: four a block (Gemma 2, Gemma 3) */
    int no_pre_norms;        /* 1 (only with post_norms): no norm before the attention or the
                                MLP, the post norms alone: two a block (OLMo 2) */
    int embed_scale;         /* 1: the token embedding times sqrt(hidden) (Gemma) */
    double attn_softcap;     /* > 0: attention scores soft-capped, c tanh(x / c) (Gemma 2's
                                attn_logit_softcapping); 0: none */
    double final_softcap;    /* > 0: the logits soft-capped alike (final_logit_softcapping) */
    double embed_mult;       /* > 0: Granite's scalings, applied whatever their value (1.0
                                included): the token embedding times embedding_multiplier, */
    double residual_mult;    /* each half's output times residual_multiplier before its
                                residual add, */
    double attn_mult;        /* the attention scores times attention_multiplier in place of
                                1 / sqrt(head_dim) (no cost), */
    double logits_scale;     /* the logits divided by logits_scaling; 0: none (every family
                                but granite) */
    long long experts;       /* a mixture of experts on every block: E experts, each a gated MLP
                                of moe_ffn (Mixtral's num_local_experts, Qwen3-MoE's
                                num_experts), chosen by a router of hidden x E weights; 0: the
                                dense MLP of ffn */
    long long experts_per_tok; /* k: the experts each token runs (1 <= k <= experts) */
    long long moe_ffn;       /* one expert's inner width (Mixtral: intermediate_size;
                                Qwen3-MoE, Qwen2-MoE: moe_intermediate_size); 0 without
                                experts */
    long long shared_ffn;    /* with experts: a shared expert every token runs, a gated MLP of
                                this width scaled by sigmoid(x w) of a hidden x 1 gate
                                (Qwen2-MoE's shared_expert_intermediate_size); 0: none */
} transformer;

/* Reads a model file: a Hugging Face config.json (told apart by its "model_type", else its
 * "architectures") or a plumb-transformer/1 description. Returns a new transformer (free with
 * transformer_free) or NULL with err set to one line naming the file and the missing, unknown
 * or bad key ("FILE: n_embd: missing; expected ..."). */
transformer *transformer_load(const char *path, plumb_err *err);
struct cJSON;
transformer *transformer_from_json(const struct cJSON *root, const char *file, plumb_err *err);

/* 1 when the parsed JSON looks like a transformer file (it has "model_type", "architectures"
 * or format plumb-transformer/1) rather than a plumb-model/1 spec. */
int transformer_json_is_config(const struct cJSON *root);

void transformer_free(transformer *t);

/* A deep copy of t (NULL when t is NULL or out of memory; free with transformer_free). */
transformer *transformer_clone(const transformer *t);

/* 1 when a and b describe the same model as plumb costs it: name, every size (the head width as
 * transformer_head_dim gives it), the sequence length, the attention window, the MLP, norms
 * (qk_norm's kind and the norms' places too), positions, biases, tying and dropout (not the
 * family the file came from: a Hugging Face config and its plumb-transformer/1 equivalent are
 * equal). */
int transformer_equal(const transformer *a, const transformer *b);

/* t as a plumb-transformer/1 description (whatever family it was read from): reading it
 * back (transformer_from_json) gives a transformer equal to t but for seq, which the
 * description does not hold (it reads back as max_position_embeddings). A new object the
 * caller frees with cJSON_Delete; NULL when out of memory. */
struct cJSON *transformer_to_json(const transformer *t);

/* Head width: head_dim when set, else hidden / heads. */
long long transformer_head_dim(const transformer *t);

/* 1 when t's heads are not hidden / heads wide (a head_dim that says otherwise, as in
 * Mistral-Nemo and Qwen3-32B), else 0. */
int transformer_own_head_dim(const transformer *t);

/* Parameters of the whole model (tied embeddings counted once). */
long long transformer_param_count(const transformer *t);
/* Width of the attention: heads x the head width (the query projection's output and the output
 * projection's input; hidden unless head_dim says otherwise). */
long long transformer_attn_width(const transformer *t);
/* Parameters of one transformer block (with experts: all of them and the router). */
long long transformer_block_params(const transformer *t);

/* Parameters one token runs through: transformer_param_count with each block's experts
 * counted experts_per_tok times instead of experts times (the router and the shared expert
 * whole); the whole count for a model without experts. */
long long transformer_active_param_count(const transformer *t);

/* 1 when t's sliding window changes attention over seq tokens (a window shorter than the
 * sequence, on any block), else 0. */
int transformer_window_applies(const transformer *t, long long seq);

/* The window of block l (0 <= l < t->layers): t->window, or 0 where the block's attention is
 * full (no window, or full_layers says so). */
long long transformer_layer_window(const transformer *t, long long l);

/* Blocks with the window (every block when full_layers is NULL; 0 without a window). */
long long transformer_window_layers(const transformer *t);

/* Query-key pairs a causal attention over seq tokens computes with a window of w keys
 * (w <= 0: no window): the sum over queries i = 0 .. seq - 1 of min(i + 1, w), seq (seq + 1)
 * / 2 without a window or with w >= seq. 0 when seq < 1. */
double transformer_band_pairs(long long seq, long long w);

/* Keys each query of block l is counted over in the model's FLOPs at seq tokens: seq
 * (Megatron-LM's count, the causal mask ignored), or the block's window when it is shorter
 * (each query over its whole window, the mask inside it ignored the same way;
 * docs/llm.md). */
long long transformer_counted_keys(const transformer *t, long long l, long long seq);

/* Matrix-multiply FLOPs of one forward pass per sequence (2 per multiply-add): every block's
 * projections, attention scores and attention over values (each query over the block's
 * transformer_counted_keys keys), and the LM head. With experts the MLP's are the router's,
 * the experts_per_tok experts' each token runs and the shared expert's with its gate (the
 * active parameters'). */
double transformer_forward_flops(const transformer *t);

#endif
