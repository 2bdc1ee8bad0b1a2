/* transformer_moe.c: the mixture-of-experts keys of the mixtral, qwen3_moe and qwen2_moe
 * Hugging Face configs and of plumb-transformer/1, read by transformers' rules into a
 * transformer's experts, experts_per_tok, moe_ffn and shared_ffn (core/transformer_read.h). */
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "transformer_read.h"

#define TF_MAX_EXPERTS 1024LL          /* experts on a block */
#define TF_MAX_EXPERT_WIDTH 10000000LL /* experts x an expert's width: intermediate_size's
                                          limit, which keeps the parameter count in range */

/* The experts' count at root.ekey (required), k at num_experts_per_tok and the expert width
 * already in t->moe_ffn: each checked, k against the count. */
static int get_experts(const jctx *jc, const cJSON *root, const char *ekey, transformer *t)
{
    const char *kkey = "num_experts_per_tok";
    if (!cJSON_GetObjectItemCaseSensitive(root, ekey) ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, ekey)))
        return err_set(jc->err, jc->file, ekey, "missing; expected the experts on each block, "
                       "a positive integer (this model family needs it)");
    if (json_get_int(jc, root, "", ekey, 1, 1, TF_MAX_EXPERTS, &t->experts)) return -1;
    if (!cJSON_GetObjectItemCaseSensitive(root, kkey) ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, kkey)))
        return err_set(jc->err, jc->file, kkey, "missing; expected the experts each token is "
                       "routed to, a positive integer (this model family needs it)");
    if (json_get_int(jc, root, "", kkey, 1, 1, TF_MAX_EXPERTS, &t->experts_per_tok)) return -1;
    if (t->experts_per_tok > t->experts)
        return err_set(jc->err, jc->file, kkey, "expected at most %s = %lld (got %lld)", ekey,
                       t->experts, t->experts_per_tok);
    if (t->experts * t->moe_ffn > TF_MAX_EXPERT_WIDTH)
        return err_set(jc->err, jc->file, ekey, "expected %s x the expert width %lld within "
                       "%lld (got %lld experts)", ekey, t->moe_ffn, TF_MAX_EXPERT_WIDTH,
                       t->experts);
    return 0;
}

/* mixtral (transformers' modeling_mixtral.py, MixtralSparseMoeBlock): every block's MLP is
 * num_local_experts SwiGLU experts of intermediate_size (w1, w3, w2, no biases) and a router
 * (gate: hidden_size x num_local_experts, no bias); each token runs the num_experts_per_tok
 * with the highest router scores, their outputs summed weighted by the softmax of those
 * scores. No shared expert; the attention is mistral's. router_jitter_noise and the auxiliary
 * loss (output_router_logits) cost nothing plumb prices.
 * qwen3_moe (modeling_qwen3_moe.py, configuration_qwen3_moe.py): qwen3's attention (q_norm,
 * k_norm), num_experts SwiGLU experts of moe_intermediate_size and a router alike;
 * norm_topk_prob (default false) renormalizes the k weights, a few elements a token. A block
 * is a mixture when its index is not in mlp_only_layers and (index + 1) % decoder_sparse_step
 * == 0, else a dense MLP of intermediate_size: plumb prices one kind of block, so a config
 * with dense blocks (mlp_only_layers not empty, decoder_sparse_step above 1) is refused
 * naming the key, as is num_experts 0 (no experts: the dense qwen3).
 * qwen2_moe (modeling_qwen2_moe.py, configuration_qwen2_moe.py): qwen2's attention (Q, K, V
 * biases as qkv_bias says, default true), qwen3_moe's experts, router and rules for dense
 * blocks, and a shared expert every token runs: a SwiGLU MLP of
 * shared_expert_intermediate_size whose output is scaled by sigmoid(x w) of a hidden x 1
 * shared_expert_gate (no biases) and added to the experts' sum. */
int tf_load_moe(const jctx *jc, const cJSON *root, tf_fam f, transformer *t)
{
    if (f == F_MIXTRAL) {
        t->moe_ffn = t->ffn;
        return get_experts(jc, root, "num_local_experts", t);
    }
    long long step = 1;
    int norm_topk = 0;
    const cJSON *only = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (tf_get_dim(jc, root, "moe_intermediate_size", 1, &t->moe_ffn) ||
        (f == F_QWEN2_MOE &&
         tf_get_dim(jc, root, "shared_expert_intermediate_size", 1, &t->shared_ffn)))
        return -1;
    if (get_experts(jc, root, "num_experts", t) ||
        tf_get_dim(jc, root, "decoder_sparse_step", 0, &step) ||
        tf_get_flag(jc, root, "norm_topk_prob", &norm_topk))
        return -1;
    if (only && !cJSON_IsNull(only) && !cJSON_IsArray(only))
        return err_set(jc->err, jc->file, "mlp_only_layers", "expected a list of layer indices");
    if (cJSON_GetArraySize(only) > 0)
        return err_set(jc->err, jc->file, "mlp_only_layers", "expected [] or null: plumb prices "
                       "a mixture of experts on every block, not dense MLPs on some (got %d "
                       "layers)", cJSON_GetArraySize(only));
    if (step != 1)
        return err_set(jc->err, jc->file, "decoder_sparse_step", "expected 1: plumb prices a "
                       "mixture of experts on every block, not dense MLPs between them (got "
                       "%lld)", step);
    return 0;
}

int tf_load_moe_plumb(const jctx *jc, const cJSON *root, transformer *t)
{
    static const char *const keys[] = {"num_experts", "num_experts_per_tok",
                                       "moe_intermediate_size"};
    int n = 0;
    for (int i = 0; i < 3; i++) n += cJSON_GetObjectItemCaseSensitive(root, keys[i]) != NULL;
    if (n == 0) {
        if (cJSON_GetObjectItemCaseSensitive(root, "shared_expert_intermediate_size"))
            return err_set(jc->err, jc->file, "shared_expert_intermediate_size", "expected "
                           "only with num_experts (a shared expert beside the routed ones)");
        return 0;
    }
    if (tf_get_dim(jc, root, "moe_intermediate_size", 1, &t->moe_ffn) ||
        tf_get_dim(jc, root, "shared_expert_intermediate_size", 0, &t->shared_ffn))
        return -1;
    if (!t->gated_mlp)
        return err_set(jc->err, jc->file, "mlp", "expected a gated MLP (swiglu, geglu, reglu) "
                       "with experts: plumb's experts are gated");
    return get_experts(jc, root, "num_experts", t);
}
