/* stage.h: a contiguous range of a model's top-level layers instantiated on one backend
 * context: its parameters, gradients and optimizer state on the device, and activation
 * buffers for `nslots` microbatches in flight at once (a pipeline stage keeps the
 * activations of every microbatch whose backward has not run yet). The whole model is the
 * stage [0, nlayers - 1].
 *
 * Forward and backward take the parameter vector to use as an argument, so that a caller
 * keeping several weight versions (weight stashing, 2BW) runs each microbatch on its own
 * version; gradients always accumulate into the stage's one gradient vector.
 *
 * With stage_opts.tp a stage is one rank of a tensor-parallel group (exec/tp.h): it holds
 * its rank's shard of the split layers, and sums across the group where they need it. */
#ifndef PLUMB_EXEC_STAGE_H
#define PLUMB_EXEC_STAGE_H

#include <stdint.h>

#include "exec/backend.h"
#include "exec/model.h"

typedef struct stage stage;

/* Builds the stage of top-level layers [first, last] of m on (bk, ctx), for microbatches of
 * up to max_batch samples and nslots microbatches in flight. split_bw = 1 also keeps, per
 * slot, the output gradient of every layer with weights, so that the backward can run as
 * an input-gradient pass and a later weight-gradient pass (zero-bubble I and W).
 * Parameters are initialized from m's seed (identical to any other split of the model).
 * Returns NULL with err set when out of memory or the range is empty. m must outlive the
 * stage; ctx stays the caller's. */
stage *stage_create(const backend *bk, bk_ctx *ctx, const model *m, int first, int last,
                    int max_batch, int nslots, int split_bw, plumb_err *err);
/* Options beyond stage_create's: split_bw as there; recompute = 1 keeps only each slot's
 * input and output (and the loss) between forward and backward, and recomputes the
 * activations from the input before the backward (and again before a split weight pass):
 * one slot of activations instead of nslots, for about one more forward per backward.
 * no_input_grad = 1: the stage's input gradient is not wanted (the model's first stage,
 * whose input is the data): the backward leaves out the input gradients that only lead to
 * it (its first layers' that no weight gradient needs), with the same weight gradients to
 * the bit, and stage_input_grad is NULL. */
/* The first of m's top-level layers whose input gradient a first stage made with
 * no_input_grad computes (the ones before it give none: what plumb profile times). */
int stage_input_grad_from(const model *m);

typedef struct stage_opts {
    int split_bw;
    int recompute;
    const struct stage_tp *tp; /* NULL: no tensor parallelism */
    int no_input_grad;
    /* ZeRO-1 (exec/stage_zero.c): the stage is replica zero_index of zero_parts > 1 data-
     * parallel replicas that each keep 1/zero_parts of its optimizer state; <= 1: none */
    int zero_parts, zero_index;
} stage_opts;

/* Tensor parallelism (exec/tp.h's layout): this stage is rank `rank` of a group of `size`
 * that runs the same stage on the same microbatches. The stage holds its rank's shard of
 * the split layers and the whole of the others; its inputs, outputs, input gradients and
 * loss are whole and the same on every rank. `allreduce` sums buf (count floats, a device
 * buffer of the stage's context) in place over the group, every rank calling it in the
 * same order; it returns 0, or -1 after recording its failure where the caller can read
 * it: the stage then makes no further call and stage_failed says so. The struct is
 * copied; user must outlive the stage. */
typedef struct stage_tp {
    int rank, size;
    /* 1: sequence parallelism (Megatron-LM's): the activations between the split layers
     * (the residual stream, the layer norms, the stage's inputs and outputs) hold this
     * rank's share of the sequence, T / size positions of each sample; a column-parallel
     * layer all-gathers its input, a row-parallel layer and the embedding reduce-scatter
     * their output; the layer norms' gradients are summed by stage_tp_finish_grads. */
    int seq;
    int (*allreduce)(void *user, float *buf, size_t count);
    void *user;
    /* Needed with seq, under the same rules as allreduce: the group's reduce-scatter (src
     * size * count floats summed over the group, this rank's part, floats [rank count,
     * (rank + 1) count) of the sum, in dst) and all-gather (src count floats of each rank,
     * rank i's at dst + i count). src and dst are device buffers that do not overlap. */
    int (*reduce_scatter)(void *user, const float *src, float *dst, size_t count);
    int (*all_gather)(void *user, const float *src, float *dst, size_t count);
} stage_tp;
stage *stage_create_opts(const backend *bk, bk_ctx *ctx, const model *m, int first, int last,
                         int max_batch, int nslots, const stage_opts *o, plumb_err *err);

void stage_free(stage *st);

/* What a stage holds for top-level layer i of m at B samples per microbatch, in bytes, by
 * what it scales with (the simulator's memory model reads these from the profile):
 * out: the layer's output, per activation slot (0 for a flatten, which aliases its input);
 * saved: kept for the backward beyond the output, per activation slot: a block's inner
 * outputs, normalization statistics, attention probabilities, the loss's rows, and the
 * targets; split: per slot with split_bw, the output gradients of the layers with weights
 * kept for the W pass; grad_buffers: input-gradient buffers of a block's inner layers,
 * once per stage (the top-level layers share the stage's two). */
typedef struct stage_lbytes {
    size_t out, saved, split, grad_buffers;
} stage_lbytes;
void stage_layer_bytes(const model *m, int i, int B, stage_lbytes *out);

/* Device buffer the caller fills with slot's input, (B, input shape of layers[first]):
 * images, features or token ids as floats. */
float *stage_input(stage *st, int slot);
/* Prepares host, B samples of the input, for upload into stage_input: with a
 * vocabulary-parallel embedding (tp.h) each token id becomes this rank's row of it, or its
 * zero row for another rank's token; otherwise nothing changes. */
void stage_map_input(const stage *st, float *host, int B);
/* Device buffer for slot's targets (B * targets per sample, int32) when the stage holds the
 * loss; NULL otherwise. */
int32_t *stage_targets(stage *st, int slot);
/* slot's output after stage_forward, (B, output shape of layers[last]); for the loss
 * stage, the class probabilities. */
const float *stage_output(stage *st, int slot);
/* The gradient of the stage's input after a backward (of the latest microbatch),
 * (B, input shape); NULL when the stage starts with the embedding or was made with
 * stage_opts.no_input_grad. Valid until the next backward. */
const float *stage_input_grad(stage *st);

/* Forward of B samples in slot with parameter vector params (device, stage_nparams floats;
 * NULL = the stage's own). */
void stage_forward(stage *st, int slot, int B, const float *params);

/* Full backward of slot: dout is the gradient of the stage's output (B, output shape), or
 * NULL for the loss stage, whose gradient is loss_scale (probs - onehot), loss_scale being
 * 1 / (targets in the whole minibatch) for a mean loss. Input gradient into
 * stage_input_grad; weight gradients accumulate into the stage's gradient vector. */
void stage_backward(stage *st, int slot, int B, const float *params, const float *dout,
                    float loss_scale);
/* The two halves (needs split_bw): the input gradient only, then later the weight
 * gradient of the same slot. */
void stage_backward_input(stage *st, int slot, int B, const float *params, const float *dout,
                          float loss_scale);
void stage_backward_weight(stage *st, int slot, int B);

/* Sums the loss and correct predictions over the B samples' targets of slot (loss stage
 * only; blocks for the download). Returns 0, or -1 with err set (not the loss stage, or a
 * backend failure). */
int stage_loss(stage *st, int slot, int B, double *loss_sum, double *correct_sum,
               plumb_err *err);

/* Sequence parallelism: sums the layer norms' gradients (each rank's covers its share of
 * the sequence) over the group; call once per step, on every rank, before the gradients
 * are used. Nothing otherwise. */
void stage_tp_finish_grads(stage *st);

/* 1 when a tensor-parallel all-reduce of the stage failed (its forward and backward
 * results are then garbage); 0 otherwise. */
int stage_failed(const stage *st);

/* Parameters of the stage's layers in the whole model (floats: model_range_params). */
long long stage_full_nparams(const stage *st);
/* Uploads this rank's part of full (host, stage_full_nparams floats: the layers' whole
 * weights, gradients or optimizer state in the model's order) into dev (one of the
 * stage's device vectors, stage_nparams floats): shards of the split layers, the others
 * whole. Returns 0, or -1 with err set (out of memory, backend failure). */
int stage_put_full(stage *st, const float *full, float *dev, plumb_err *err);
/* The reverse: downloads dev and writes into full what `which` asks for: this rank's
 * shards of the split layers (STAGE_SHARDS), the replicated layers' values
 * (STAGE_REPLICATED), or both; the rest of full is left as it was. Blocks. Without tensor
 * parallelism every layer counts as replicated. 0 or -1. */
enum { STAGE_SHARDS = 1, STAGE_REPLICATED = 2 };
int stage_get_full(stage *st, const float *dev, float *full, int which, plumb_err *err);

/* Parameters of the stage (floats: this rank's, with tensor parallelism), and its device
 * vectors. */
long long stage_nparams(const stage *st);
float *stage_params(stage *st);
float *stage_grads(stage *st);
void stage_zero_grads(stage *st);
/* One optimizer step on the stage's own parameters with its gradients (state allocated on
 * first use); with ZeRO-1, on the owned shard only, from stage_shard_grads (the caller
 * all-gathers the weights after), reading and writing nothing of the gradients outside it:
 * stage_settle_grads is then the caller's, before the reduce-scatter. Does not zero the
 * gradients. Returns 0, or -1 with err when out of memory. */
int stage_step(stage *st, const bk_opt *o, plumb_err *err);

/* The optimizer state vectors (device, stage_nparams floats; with ZeRO-1 the shard's
 * stage_shard_count floats), allocated zeroed for `kind`
 * when missing: *m for momentum and Adam, *v for Adam; NULL where the optimizer has none.
 * Returns 0, or -1 with err when out of memory. */
int stage_opt_state(stage *st, int kind, float **m, float **v, plumb_err *err);

/* ZeRO-1 (stage_opts.zero_parts = r > 1, exec/stage_zero.c): the parameters and
 * gradients are allocated padded to r x stage_shard_count floats (the padding zero), split
 * into r contiguous shards; replica i owns shard i: the floats [i c, (i + 1) c) of the
 * vectors, c = stage_shard_count. The replicas reduce-scatter their gradients in place into
 * stage_shard_grads (the owned c floats of the gradients themselves), stage_step updates the owned shard of the weights from it
 * with optimizer state of c floats (stage_opt_state returns those), and the replicas then
 * all-gather the weights. Without zero_parts: stage_shard_count is stage_nparams and
 * stage_shard_grads NULL. */
long long stage_shard_count(const stage *st);
int stage_shard_index(const stage *st);
float *stage_shard_grads(stage *st);
/* Makes the gradients final before they are summed over replicas: clears the vocabulary-
 * parallel zero row's gradient. stage_step does it for a stage without zero_parts (doing
 * it twice is harmless); a stage with zero_parts must be settled by the caller before its
 * reduce-scatter, since its stage_step touches the owned shard alone. */
void stage_settle_grads(stage *st);
/* Copies this replica's shard of a whole device vector full (stage_nparams floats or more,
 * e.g. the gradients' buffer holding an uploaded optimizer state) into the shard-sized
 * vector shard (c floats): its floats below stage_nparams, zeros for the padding past it
 * (nothing of full is read there). Nothing without zero_parts. */
void stage_shard_take(stage *st, const float *full, float *shard);

/* Targets per sample of the loss, samples' input floats, output floats per sample. */
size_t stage_in_numel(const stage *st);
size_t stage_out_numel(const stage *st);
int stage_has_loss(const stage *st);

#endif
