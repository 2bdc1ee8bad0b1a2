/* model.h: model specs (plumb-model/1): the layers of a network with their
 * hyper-parameters, validated with exact field paths, with every layer's shape inferred
 * and its parameters counted, and deterministic host-side weight initialization.
 *
 * The top-level layers are the units the planner splits into stages (a residual block is
 * one unit). Shapes exclude the batch dimension: an image model's input is [C, H, W], a
 * language model's input is [T] token ids. All of a model's parameters form one flat fp32
 * vector in pre-order; each top-level layer owns a contiguous range of it, so a stage of
 * layers [a, b] owns the range from layers[a].param_offset to the end of layers[b]. */
#ifndef PLUMB_EXEC_MODEL_H
#define PLUMB_EXEC_MODEL_H

#include <stddef.h>

#include "err.h"

#define MODEL_FORMAT "plumb-model/1"
#define MODEL_MAX_DIMS 3
/* Layers in a model, residual blocks' layers included: a bound on the work and memory a
 * spec can ask for at load (a parse is linear in it). */
#define MODEL_MAX_LAYERS 100000

typedef enum layer_kind {
    LK_LINEAR = 0,   /* "linear": out; optional in_features (checked) */
    LK_CONV2D,       /* "conv2d": out_channels, kernel, stride (1), padding (0);
                        optional in_channels (checked) */
    LK_RELU,         /* "relu" */
    LK_MAXPOOL2D,    /* "maxpool2d": kernel, stride (= kernel) */
    LK_FLATTEN,      /* "flatten" */
    LK_LAYERNORM,    /* "layernorm": over the last dimension */
    LK_GELU,         /* "gelu" (tanh approximation) */
    LK_EMBEDDING,    /* "embedding": vocab, dim; token + learned position embedding; only as
                        the first layer, on an input of [T] token ids */
    LK_ATTENTION,    /* "attention": heads; causal self-attention core on [T, 3D] -> [T, D] */
    LK_RESIDUAL,     /* "residual": layers; y = x + f(x), f's output shape must equal x's */
    LK_XENT,         /* "softmax_cross_entropy": the loss, last; on [classes] or [T, classes] */
    LK_NKINDS
} layer_kind;

typedef struct layer {
    layer_kind kind;
    char *name;            /* the spec's "name", else e.g. "conv2d3" (kind and index) */
    int uid;               /* pre-order index over all layers (seeds the layer's init) */
    /* hyper-parameters (0 where the kind has none) */
    int out;               /* linear: out features; conv2d: out channels */
    int kernel, stride, pad;
    int vocab, dim, heads;
    /* per-sample shapes, batch excluded */
    int in_ndim, in_shape[MODEL_MAX_DIMS];
    int out_ndim, out_shape[MODEL_MAX_DIMS];
    long long nparams;     /* floats, children included */
    long long param_offset;/* floats into the model's flat parameter vector */
    double flops;          /* forward FLOPs per sample (multiply-add = 2), children included */
    int nchildren;         /* residual: the block's layers */
    struct layer *children;
} layer;

typedef struct model {
    char *name;
    int in_ndim, in_shape[MODEL_MAX_DIMS]; /* per-sample input shape */
    int tokens;            /* 1 when the input is token ids (the first layer is embedding) */
    int classes;           /* classes of the loss (the vocabulary for a language model) */
    unsigned long long seed; /* weight initialization seed */
    int nlayers;
    layer *layers;         /* top-level layers; the last is softmax_cross_entropy */
    long long nparams;
} model;

/* Loads and validates a model spec. Returns a new model (free with model_free) or NULL with
 * err set: "FILE: layers[3].in_features: expected 800 (the flattened output of layers[2])
 * (got 512)". Rejects unknown types and fields of the wrong type or range, shapes that do
 * not chain, an embedding that is not first, a loss that is not last, a residual block
 * whose output shape differs from its input. */
model *model_load(const char *path, plumb_err *err);
struct cJSON;
model *model_from_json(const struct cJSON *root, const char *file, plumb_err *err);
/* Parses text (for tests); `name` names it in messages. */
model *model_parse(const char *name, const char *text, plumb_err *err);
void model_free(model *m);

const char *layer_kind_name(layer_kind k); /* the spec's "type" string */

/* Floats per sample of a shape. */
size_t shape_numel(int ndim, const int *shape);
/* Writes "[64,5,5]" into buf; returns buf. */
char *shape_format(int ndim, const int *shape, char *buf, size_t n);

/* Targets per sample: 1 for a classifier, T for a language model (one next token per
 * position). */
int model_targets_per_sample(const model *m);

/* Fills host[0 .. nparams of layers first..last) with the initial weights of top-level
 * layers [first, last], identical whatever the range: each layer draws from its own stream
 * seeded by (m->seed, uid). Linear/conv weights: uniform +-sqrt(3 / fan_in) (variance
 * 1 / fan_in), biases 0; layernorm gamma 1, beta 0; embeddings uniform +-0.02 sqrt(3). */
void model_init_params(const model *m, int first, int last, float *host);

/* Parameters (floats) of top-level layers [first, last]. */
long long model_range_params(const model *m, int first, int last);

/* Checks that the model at `batch` samples per microbatch fits this process's memory
 * (core/schedule.h's sched_memory_available): no top-level layer's output, attention
 * probabilities and children, plus the weights and their gradients, one batch of input and
 * `samples` more samples of input data (0 when the data is checked where it is made), may
 * need more, which every run (train's stages, profile's one layer at a time) allocates at
 * least. Refused before any allocation (a context of 10^6 tokens once filled memory with 4
 * GB buffers until the machine stopped). 0, or -1 with err naming file and the layer. */
int model_check_batch(const model *m, const char *file, int batch, int samples,
                      plumb_err *err);

/* A small deterministic generator (splitmix64) used for initialization, shuffling and
 * synthetic data; the state is the caller's. */
unsigned long long rng_next(unsigned long long *state);
double rng_uniform(unsigned long long *state);   /* [0, 1) */

#endif
