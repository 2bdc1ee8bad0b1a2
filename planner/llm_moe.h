/* llm_moe.h: the analytic price of one transformer block's mixture of experts on one
 * tensor-parallel rank (planner/llm_profile.c's block pricing calls it), with expert
 * parallelism 1: every rank holds all experts, each expert's MLP split over the
 * tensor-parallel ranks as a dense MLP is (Megatron-Core's MoE layer with
 * --expert-model-parallel-size 1 and expert tensor parallelism = tp). Routing is taken as
 * balanced and dropless: each of the E experts gets M k / E of the M tokens' k choices
 * (docs/llm.md, "Mixtures of experts"). */
#ifndef PLUMB_LLM_MOE_H
#define PLUMB_LLM_MOE_H

#include "core/device.h"

/* One block's experts as one rank sees them. */
typedef struct llm_moe {
    const device_type *dev;
    dev_precision p; /* of the router's and the experts' multiplies */
    double M;        /* tokens (rows) of the microbatch on the rank: all of them, as a dense
                        MLP sees them */
    double h;        /* model width */
    double e;        /* bytes per element */
    double E, k;     /* experts, and experts each token runs */
    double ft;       /* one expert's inner width on this rank (moe_intermediate_size / tp) */
    double tp;       /* tensor-parallel ranks: the router's GEMM, run whole on each, counts
                        1 / tp of its FLOPs on each in the model's FLOPs */
    double fs;       /* the shared expert's inner width on this rank (Qwen2-MoE's
                        shared_expert_intermediate_size / tp); 0: none */
} llm_moe;

/* Adds the block's experts' FLOPs (model FLOPs: the router's and the shared expert's gate's
 * once over the tensor-parallel ranks, the k experts' each token runs, the shared expert's)
 * and seconds (forward, input gradient, weight gradient) to *flops, *fwd_s, *bwd_in_s and
 * *bwd_w_s: the router's GEMM (M x h x E, whole on every rank), its softmax and top-k, the
 * tokens' permutation to their experts and back, a grouped GEMM of E groups of M k / E rows
 * for each of the experts' two projections (h to 2 ft, ft to h), the weighted combine and,
 * with fs, the shared expert (a dense gated MLP of fs over the M rows, its activation, the
 * gate's h x 1 GEMM, the sigmoid scaling and the add). The routed experts' gated activation
 * is the block's own streaming kernel (llm_profile.c, over M k rows of ft). */
void llm_moe_cost(const llm_moe *m, double *flops, double *fwd_s, double *bwd_in_s,
                  double *bwd_w_s);

/* Bytes the experts keep for the backward (the router's probabilities and choices, the
 * permuted tokens, each expert's inner tensors as a dense gated MLP's for M k rows, the
 * experts' outputs the combine weighs; the shared expert's inner tensors, its output and its
 * gate's sigmoid), in place of a dense MLP's. */
double llm_moe_saved(const llm_moe *m);

/* Output gradients of the experts' projections, the router's and the shared expert's and its
 * gate's, kept between the I and W passes. */
double llm_moe_split_saved(const llm_moe *m);

/* Parameters on the rank: the router (h x E, whole), E experts of 3 h ft, the shared expert
 * (3 h fs) and its gate (h, whole). */
double llm_moe_params(const llm_moe *m);

/* Parameter tensors: the router's and each expert's two (Megatron-Core's grouped experts
 * hold one fc1 with the gate and up projections fused and one fc2 each), and the shared
 * expert's two and its gate. */
int llm_moe_tensors(const llm_moe *m);

#endif
