/* profile.h: a model as the planner sees it (plumb-profile/1): per-layer times and sizes
 * measured on one device at one minibatch size, and the layer graph (a DAG; a chain when
 * the file has no edges). Times are milliseconds in the file and in this struct. */
#ifndef PLUMB_PROFILE_H
#define PLUMB_PROFILE_H

#include "err.h"

#define PROFILE_FORMAT "plumb-profile/1"

typedef struct profile_layer {
    char *name;            /* unique id, e.g. "node11" for PipeDream imports */
    char *kind;            /* operator kind, e.g. "Conv2d", "ReLU", "Input", "Add" */
    char *desc;            /* full description (may be ""), e.g. PipeDream's module string */
    double forward_ms;     /* forward time per profiled minibatch, ms, >= 0 */
    double backward_ms;    /* backward time per profiled minibatch, ms, >= 0 */
    double backward_input_ms;  /* input-gradient part of backward (I), ms; < 0 when not split */
    double backward_weight_ms; /* weight-gradient part of backward (W), ms; < 0 when not split */
    double activation_bytes;   /* bytes of this layer's output for the minibatch, >= 0 */
    double parameter_bytes;    /* bytes of this layer's weights and biases, >= 0 */
    double flops;              /* forward FLOPs per minibatch; < 0 when unknown */
    /* What the executor holds besides outputs and weights (0 when the profile does not
     * say, as in PipeDream's), bytes at the minibatch: */
    double saved_bytes;        /* kept for the backward per microbatch in flight beyond the
                                  output: a block's inner outputs, normalization statistics,
                                  attention probabilities, the loss's rows and targets */
    double split_saved_bytes;  /* kept per microbatch between the I and W passes of zero-bubble
                                  schedules: the output gradients of the layers with weights */
    double grad_buffer_bytes;  /* input-gradient buffers of a block's inner layers, once per
                                  stage */
    double workspace_bytes;    /* the backend's scratch during the layer's passes (im2col,
                                  cuDNN workspace); a device's layers share it: the largest
                                  counts, and it is not scaled with the microbatch */
    /* Tensor parallelism (profile.tp > 1; 0 otherwise): the layer's collectives among the
     * tp ranks, which its times leave out. Each is an all-reduce of tp_collective_bytes
     * (with sequence parallelism a reduce-scatter and an all-gather of that many bytes,
     * which a ring moves in the same time) at the minibatch on one rank. */
    double tp_collective_bytes;
    int tp_forward_collectives;  /* in the forward (a Megatron block: 2) */
    int tp_backward_collectives; /* in the input-gradient half of the backward (2) */
    /* Context parallelism (profile.cp > 1; 0 otherwise): the attention's K/V ring among the
     * cp ranks of a context-parallel group (Transformer Engine's AttnFuncWithCPAndKVP2P),
     * which the layer's times leave out. Each of the cp - 1 steps forward sends this rank's
     * K and V chunk (cp_ring_bytes at the minibatch) to the next rank, and each backward
     * step K, V and their gradients (twice the bytes), each step overlapped with the
     * attention of the chunk before (cp_attention_fwd_ms, cp_attention_bwd_ms: the
     * attention core's whole time on the rank, of cp equal steps; sim/cost.c). */
    double cp_ring_bytes;
    double cp_attention_fwd_ms, cp_attention_bwd_ms;
    /* Selective recomputation (Korthikanti et al. 2022): the parts of the layer recomputed
     * instead of kept (a block's attention core); both < 0 when the layer has none. */
    double selective_recompute_ms; /* forward time of the recomputed part, ms, before the
                                      backward */
    double selective_saved_bytes;  /* saved_bytes when those parts are recomputed, <=
                                      saved_bytes */
    /* Tied parameters (file field "tied": {"layer": L, "bytes": B}): B of this layer's
     * parameter bytes are the same tensor as part of layer L's (a language model's head
     * sharing the token embedding's matrix). A device that holds both layers in one stage
     * holds, updates and reduces that tensor once; on different devices each keeps its
     * copy. tied_bytes 0: none (tied_layer is then -1). */
    int tied_layer;
    double tied_bytes;
} profile_layer;

typedef struct profile_edge {
    int src, dst; /* layer indices, data flows src -> dst */
} profile_edge;

typedef struct profile {
    char *name;        /* model name, e.g. "vgg16" */
    char *device;      /* the device the times were measured on, e.g. "V100" */
    char *source;      /* provenance text (may be "") */
    int minibatch;     /* samples per profiled minibatch, > 0 */
    double input_bytes; /* the model's input for the minibatch as the executor holds it, >= 0
                           (0: not said) */
    double input_gather_ms; /* a first or last stage's gathering of one minibatch from the data
                               set and its upload (inside its F), ms, >= 0 (0: not said) */
    double step_ns_per_byte[3]; /* the optimizer step's time per parameter byte, ns, measured
                                   on the device, indexed by optimizer_kind (sgd, momentum,
                                   adam), >= 0 (0: not said) */
    int tp;            /* tensor-parallel ranks each layer's figures are one share of, >= 1
                          (file key tensor_parallel; 1 when absent) */
    int cp;            /* context-parallel ranks each sequence is split over, >= 1 (file key
                          context_parallel; 1 when absent): each layer's figures are one
                          rank's tokens_per_sample / cp tokens of every sequence */
    int sequence_parallel; /* 1: with tp > 1, the activations outside the tensor-parallel
                              regions (norms, dropout, the blocks' outputs) are split over
                              the sequence too, so activation_bytes is one rank's share */
    long long tokens_per_sample; /* tokens in one sample (a sequence), 0 when the model
                                    is not a token model or the profile does not say */
    int precision;     /* the dev_precision (core/cluster.h) the times and bytes were made
                          at (file key "precision": "fp32", "tf32", "bf16", "fp16" or "fp8"),
                          which a plan of the profile takes (plan_new; plan_validate refuses
                          another); -1 when the profile does not say: measured and
                          PipeDream profiles. Analytic profiles (planner/llm_profile) say */
    int cross_entropy; /* the LM head's loss the times price (file key "cross_entropy": "te"
                          or "native", written only when not "unfused"; core/plan.h's
                          values), which a plan of the profile records (plan_new): 0 when
                          unfused or not said */
    int grad_accum;    /* how the backward times price the weight gradients' accumulation
                          (file key "grad_accum": "unfused", written only then; core/plan.h's
                          values), which a plan of the profile records (plan_new): 0 when
                          fused or not said */
    int nlayers;
    profile_layer *layers; /* in a topological order of the graph */
    int nedges;
    profile_edge *edges;   /* empty for a chain; otherwise the full DAG */
    int *stage_ids;        /* NULL, or nlayers entries: the stage a partitioned PipeDream
                            * graph gave each layer (file field layers[i].stage_id), -1 for
                            * none. Informational only; the planner makes its own stages. */
} profile;

/* Allocates a profile with n layers and m edges, everything zero except tp and cp (1),
 * precision (-1: not said) and the optional numbers (backward_input_ms, backward_weight_ms, flops, selective_recompute_ms,
 * selective_saved_bytes, tied_layer), which are -1 (absent); strings
 * are NULL for the caller to fill with malloc'd text (profile_free frees them).
 * NULL when out of memory or n < 0 or m < 0. */
profile *profile_alloc(int n, int m);

/* Loads and validates a profile file. Returns a new profile the caller frees with
 * profile_free, or NULL with err set ("FILE: FIELD.PATH: expected ... (got ...)").
 * Rejects: malformed JSON, wrong format version, missing fields, wrong types, negative or
 * non-finite numbers, duplicate layer names, edges naming missing layers, cycles, and layer
 * order that is not topological. */
profile *profile_load(const char *path, plumb_err *err);

/* Same as profile_load on an already parsed JSON object (`file` names it in messages). */
struct cJSON;
profile *profile_from_json(const struct cJSON *root, const char *file, plumb_err *err);

/* Builds the JSON object of p (caller frees with cJSON_Delete); NULL when out of memory. */
struct cJSON *profile_to_json(const profile *p);

/* Writes p to path atomically. Returns 0, or -1 with err set; nothing is left on failure. */
int profile_save(const profile *p, const char *path, plumb_err *err);

/* Checks p's invariants (the same checks as the loader, on an in-memory profile).
 * Returns 0, or -1 with err set using `file` as the name. */
int profile_validate(const profile *p, const char *file, plumb_err *err);

/* Deep copy; NULL when out of memory. */
profile *profile_clone(const profile *p);

/* 1 when a and b are equal field by field (exact doubles), else 0. */
int profile_equal(const profile *a, const profile *b);

/* Frees p and everything it owns; NULL is allowed. */
void profile_free(profile *p);

/* 1 when the profile's graph is a chain (no edges, or edges i -> i+1 only). */
int profile_is_chain(const profile *p);

/* 1 when p is a transformer's analytic profile (planner/llm_profile: plumb profile --model,
 * plumb plan --model): an Embedding layer, TransformerBlock layers, an LMHead layer. Pure. */
int profile_is_transformer(const profile *p);

/* 1 when L is an input node (kind "Input"): PipeDream's profiles time the data loader
 * there. plumb's cost models charge such a layer no device time, as the data loader runs
 * beside the device and PipeDream's planner drops these nodes too. */
int profile_layer_is_input(const profile_layer *L);

/* Device time of L's forward and backward, ms: its times, or 0 for an input node. */
double profile_layer_forward_ms(const profile_layer *L);
double profile_layer_backward_ms(const profile_layer *L);

/* Device compute of the whole model per minibatch, ms: the sum over layers of
 * profile_layer_forward_ms + profile_layer_backward_ms. */
double profile_compute_ms(const profile *p);

/* Sums over all layers (input nodes included: the file's own totals). */
double profile_total_forward_ms(const profile *p);
double profile_total_backward_ms(const profile *p);
double profile_total_parameter_bytes(const profile *p);
double profile_total_activation_bytes(const profile *p);

/* Index of the layer named `name`, or -1 (linear search). */
int profile_find_layer(const profile *p, const char *name);

#endif
