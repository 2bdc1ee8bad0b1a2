/* stage_int.h: the stage's private parts shared by exec/stage.c (layers forward and
 * backward) and exec/stage_tp.c (tensor parallelism: shapes and parameters of a rank's
 * shard, the group's sums, the vocabulary-parallel loss). Not for other files. */
#ifndef PLUMB_EXEC_STAGE_INT_H
#define PLUMB_EXEC_STAGE_INT_H

#include "exec/stage.h"

typedef struct snode {
    const layer *L;
    int nchildren;
    struct snode *children;
    size_t in_n, out_n;     /* floats per sample of input and output */
    float **out;            /* [act_slots] (max_batch, out shape); flatten aliases its input */
    float **aux;            /* [act_slots] layernorm: mean | rstd (2 rows); attention:
                               (B, H, T, T) probabilities; loss: loss | correct (2 rows) */
    const float **in;       /* [act_slots] the input tensor forward used */
    float **dyst;           /* [nslots] split_bw: the output gradient kept for W */
    float *dx;              /* (max_batch, in shape) input gradient; NULL when aliased/none;
                               top-level layers: one of the stage's dxbuf (not owned) */
    int role, groups;       /* tp_role under tensor parallelism (TP_REPL without);
                               TP_COL: output groups split separately (3: q | k | v) */
    int fin, fout;          /* linear: this rank's input and output features */
    int dim, heads;         /* attention: this rank's width and heads */
    int vocab;              /* embedding: rows of its token table here (TP_VOCAB: V / tp
                               and a last zero row that other ranks' tokens map to) */
    long long poff;         /* the layer's weights in the stage's (this rank's) vectors */
    long long foff;         /* ... and in the whole stage range (the model's order) */
    long long np;           /* this rank's parameters of the layer itself */
    int seq;                /* sequence parallelism: its rows (layer norm, residual), input
                               (column-parallel) or output (row-parallel, embedding) hold
                               this rank's share of the sequence */
    float **gx;             /* column-parallel under it: [act_slots] the gathered input */
} snode;

struct stage {
    const backend *bk;
    bk_ctx *ctx;
    const model *m;
    int first, last, max_batch, nslots, split_bw;
    int recompute;          /* activations of one slot only, recomputed before backward */
    int act_slots;          /* slots of layer activations: nslots, or 1 with recompute */
    int xslot;              /* the caller's slot being processed (targets, dyst) */
    float **outcopy;        /* recompute: [nslots] each slot's output, kept */
    float **auxcopy;        /* recompute, loss stage: [nslots] each slot's loss | correct */
    const float **ipass_params; /* recompute + split_bw: [nslots] weights of the I pass */
    long long nparams;      /* this rank's parameters (all of them without tp) */
    float *params, *grads, *opt_m, *opt_v; /* device, nparams floats each */
    int nnodes;
    snode *nodes;
    float **input;          /* [nslots] (max_batch, in shape) */
    int32_t **targets;      /* [nslots] (max_batch, targets per sample) or NULL */
    const float *input_grad;
    int dx_from;            /* the top-level layers from which on the input gradient is
                               needed (0 unless stage_opts.no_input_grad) */
    float loss_scale;
    float *dxbuf[2];        /* the top-level layers' input gradients, taken in turns */
    stage_tp tp;            /* size 1: no tensor parallelism */
    int failed;             /* a tensor-parallel all-reduce failed */
    long long full_nparams; /* the stage's layers' parameters in the whole model */
    float *zero_pos;        /* TP_VOCAB, rank > 0: (T, D) zeros in place of the position
                               rows, which rank 0 adds */
    float *xsum;            /* vocabulary-parallel loss: (tp + 3, rows) the sums' buffer */
    float *seqbuf;          /* sequence parallelism: a whole (max_batch, T, F) tensor for
                               gathers and scatters, F the widest gathered */
    float *seqtmp;          /* and the same in rank order, (tp, max_batch, T / tp, F): what
                               the collectives move */
    size_t seq_floats;      /* the floats of each */
    int zparts, zindex;     /* ZeRO-1: replicas sharing the optimizer state, this one's
                               shard; zparts 1: none */
    long long zcount;       /* floats per shard (nparams without ZeRO-1) */
    long long zalloc;       /* floats allocated for params and grads: zparts x zcount */
};

static inline int stage_has_weights(const layer *L)
{
    return L->kind == LK_LINEAR || L->kind == LK_CONV2D || L->kind == LK_LAYERNORM ||
           L->kind == LK_EMBEDDING;
}

/* n's share of layer L under its tensor-parallel role (tp.h; TP_REPL without tp):
 * features, heads, floats per sample, and its parameters, placed at the stage's next
 * offset *pnext, which moves past them. */
void stage_node_shape(stage *st, snode *n, const layer *L, int role, int groups,
                      long long *pnext);
/* Sums buf (count floats, device) over the tensor-parallel group; after a failure,
 * nothing (the stage is marked failed). */
void stage_tp_sum(stage *st, float *buf, size_t count);
/* The vocabulary-parallel cross-entropy of N rows (tp.h): forward from this rank's logits
 * x into its probabilities and aux (loss | correct, 2 rows); backward into dx. Failures
 * mark the stage failed. */
void stage_xent_tp_fwd(stage *st, snode *n, int N, const float *x, float *probs, float *aux);
void stage_xent_tp_bwd(stage *st, snode *n, int N, const float *probs, float *dx);
/* Sequence parallelism, B samples of T positions of F features: all-gathers every rank's
 * share src (B, T / tp, F) into dst (B, T, F); reduce-scatters a whole tensor full
 * (B, T, F) over the group, this rank's share of the sum into dst (B, T / tp, F). Each
 * moves (tp - 1) / tp of the whole per rank each way; the rank-order copy between the
 * sequence order and the collectives' stays on the device (st->seqtmp). dst must not be
 * seqtmp; full is left changed. */
void stage_seq_gather(stage *st, const float *src, float *dst, int B, int F);
void stage_seq_scatter(stage *st, float *full, float *dst, int B, int F);

/* Sets st's ZeRO-1 shard (exec/stage_zero.c): parts replicas (<= 1: none, one shard of
 * nparams), this one `index`; fills zparts, zindex, zcount and zalloc from nparams. */
void stage_shard_plan(stage *st, int parts, int index);
/* The owned shard's real floats: their count (0 .. zcount; the last shards may be padding,
 * partly or wholly), the first at *lo in the parameter vector. */
long long stage_shard_real(const stage *st, long long *lo);

#endif
