/* llm_profile.h: the analytic profile of a transformer on a described device: one profile
 * layer for the embedding, one per transformer block and one for the LM head (final norm,
 * logits, loss), each costed per tensor-parallel rank from its matrix multiplies, attention
 * and streaming kernels on the device's roofline (core/device.h). The result is an ordinary
 * plumb-profile/1 that plan, sim, sweep and ui read like a measured one (docs/llm.md). */
#ifndef PLUMB_LLM_PROFILE_H
#define PLUMB_LLM_PROFILE_H

#include "core/cluster.h"
#include "core/profile.h"
#include "core/transformer.h"

typedef struct llm_options {
    int tp;                  /* tensor-parallel ranks the heads, MLP and vocabulary split over */
    int microbatch;          /* sequences per profiled minibatch (the microbatch size), > 0 */
    long long seq;           /* tokens per sequence; 0: the model's max_position_embeddings */
    dev_precision precision; /* of weights, activations and the multiplies */
} llm_options;

/* tp 1, microbatch 1, the model's sequence length, bf16. */
void llm_options_init(llm_options *o);

/* Builds the profile of model t under o on the device type of the cluster c (whose file is
 * cluster_file, for messages). Times are ms per microbatch on one rank, multiplied by the
 * device type's speed so that planning on c divides them back to the device's own time; the
 * backward is split into input-gradient and weight-gradient halves. Returns a new profile
 * (profile_free), or NULL with err set to one line: a tp that does not divide the heads, key
 * and value heads or MLP width ("--tp"), a sequence longer than learned positions allow
 * ("--seq-len"), a cluster with several device types ("servers") or without the device
 * figures the roofline needs (the missing field). */
profile *llm_profile_build(const transformer *t, const cluster *c, const char *cluster_file,
                           const llm_options *o, plumb_err *err);

/* The tensor-parallel collectives of one transformer block per microbatch, which the
 * profile's times leave out (Megatron-LM's layout: the attention and the MLP each end in a
 * row-parallel projection whose partial outputs are summed across the T ranks). */
typedef struct llm_collectives {
    int forward_allreduces;   /* all-reduces in the forward: 2 when T > 1, else 0 */
    int backward_allreduces;  /* in the backward (the column-parallel inputs' gradients): 2 */
    double bytes;             /* size of each: the block's activation, B S h element bytes */
} llm_collectives;

/* Fills *out for model t under o (o->seq 0: the model's length). */
void llm_block_collectives(const transformer *t, const llm_options *o, llm_collectives *out);

#endif
