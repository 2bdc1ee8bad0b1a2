/* transformer_size.c: what a transformer description implies (core/transformer.h): its head
 * and attention widths, parameter counts, the window of each block and the query-key pairs
 * a window leaves, and the matrix-multiply FLOPs of a forward pass. */
#include "transformer.h"

long long transformer_head_dim(const transformer *t)
{
    return t->head_dim ? t->head_dim : t->hidden / t->heads;
}

int transformer_own_head_dim(const transformer *t)
{
    return t->hidden % t->heads != 0 || transformer_head_dim(t) != t->hidden / t->heads;
}

long long transformer_attn_width(const transformer *t)
{
    return t->heads * transformer_head_dim(t);
}

/* Output width of the fused Q, K, V projection: (heads + 2 kv_heads) d. */
static long long qkv_width(const transformer *t)
{
    return (t->heads + 2 * t->kv_heads) * transformer_head_dim(t);
}

static long long norm_params(const transformer *t)
{
    return t->norm == TF_LAYERNORM ? 2 * t->hidden : t->hidden;
}

/* q_norm and k_norm: head_dim weights each (Qwen3's, per head), or the projections' widths
 * (OLMo 2's, over the whole query and key projections). */
static long long qk_norm_params(const transformer *t)
{
    long long d = transformer_head_dim(t);
    if (t->qk_norm == TF_QK_WIDTH) return (t->heads + t->kv_heads) * d;
    return t->qk_norm ? 2 * d : 0;
}

/* One block's parameters with n of its experts (all of them for the count, k for the
 * active); the router (hidden x experts, no bias) and the shared expert with its hidden x 1
 * gate whole either way. */
static long long block_params_n(const transformer *t, long long n)
{
    long long h = t->hidden, f = t->ffn, q = qkv_width(t), aw = transformer_attn_width(t);
    long long attn = h * q + (t->qkv_bias ? q : 0) + aw * h + (t->out_bias ? h : 0) +
                     qk_norm_params(t);
    long long mlp = t->gated_mlp ? 3 * h * f + (t->mlp_bias ? 2 * f + h : 0)
                                 : 2 * h * f + (t->mlp_bias ? f + h : 0);
    if (t->experts) /* gated, no biases */
        mlp = n * 3 * h * t->moe_ffn + h * t->experts +
              (t->shared_ffn ? 3 * h * t->shared_ffn + h : 0);
    /* Gemma 2's post norms beside the pre norms; OLMo 2's alone */
    return attn + mlp + ((t->post_norms ? 4 : 2) - (t->no_pre_norms ? 2 : 0)) * norm_params(t);
}

long long transformer_block_params(const transformer *t)
{
    return block_params_n(t, t->experts);
}

/* The whole model with n experts a block. */
static long long param_count_n(const transformer *t, long long n)
{
    long long h = t->hidden, emb = t->vocab * h;
    long long pos = t->learned_positions ? t->max_positions * h : 0;
    return emb + pos + t->layers * block_params_n(t, n) + norm_params(t) +
           (t->tied_embeddings ? 0 : emb);
}

long long transformer_param_count(const transformer *t)
{
    return param_count_n(t, t->experts);
}

long long transformer_active_param_count(const transformer *t)
{
    return param_count_n(t, t->experts_per_tok);
}

int transformer_window_applies(const transformer *t, long long seq)
{
    return t->window > 0 && t->window < seq && transformer_window_layers(t) > 0;
}

long long transformer_layer_window(const transformer *t, long long l)
{
    if (t->window <= 0 || (t->full_layers && l >= 0 && l < t->layers && t->full_layers[l]))
        return 0;
    return t->window;
}

long long transformer_window_layers(const transformer *t)
{
    long long n = 0;
    for (long long l = 0; l < t->layers; l++) n += transformer_layer_window(t, l) > 0;
    return n;
}

double transformer_band_pairs(long long seq, long long w)
{
    if (seq < 1) return 0;
    double s = (double)seq;
    if (w <= 0 || w >= seq) return s * (s + 1) / 2;
    double wd = (double)w; /* queries 0 .. w - 1 see i + 1 keys, the other s - w see w */
    return wd * (wd + 1) / 2 + (s - wd) * wd;
}

long long transformer_counted_keys(const transformer *t, long long l, long long seq)
{
    long long w = transformer_layer_window(t, l);
    return w > 0 && w < seq ? w : seq;
}

/* One block's forward FLOPs with each query over kv keys. */
static double block_flops(const transformer *t, double kv)
{
    double h = (double)t->hidden, s = (double)t->seq, f = (double)t->ffn;
    double aw = (double)transformer_attn_width(t); /* heads x d: h unless head_dim says */
    return 2 * s * h * (double)qkv_width(t) /* Q, K, V */
           + 2 * s * kv * aw                /* scores Q K^T, all heads */
           + 2 * s * kv * aw                /* probabilities times V */
           + 2 * s * aw * h                 /* output projection */
           + (t->experts ? 2 * s * h * (double)t->experts /* the router */
                               + 6 * s * h * (double)t->moe_ffn * (double)t->experts_per_tok
                               + (t->shared_ffn ? 6 * s * h * (double)t->shared_ffn + 2 * s * h
                                                : 0)
                         : (t->gated_mlp ? 6 : 4) * s * h * f);
}

double transformer_forward_flops(const transformer *t)
{
    double head = 2 * (double)t->seq * (double)t->hidden * (double)t->vocab;
    if (!t->full_layers) /* every block alike */
        return (double)t->layers * block_flops(t, (double)transformer_counted_keys(t, 0, t->seq)) +
               head;
    double sum = 0; /* each block with its own window (Gemma 2's local and global blocks) */
    for (long long l = 0; l < t->layers; l++)
        sum += block_flops(t, (double)transformer_counted_keys(t, l, t->seq));
    return sum + head;
}
