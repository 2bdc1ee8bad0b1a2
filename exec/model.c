/* model.c: loading and validating model specs (plumb-model/1), shape inference, parameter
 * counts and deterministic weight initialization. */
#include "exec/model.h"
#include "core/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static const char *const kind_names[LK_NKINDS] = {
    "linear", "conv2d", "relu", "maxpool2d", "flatten", "layernorm", "gelu", "embedding",
    "attention", "residual", "softmax_cross_entropy",
};

/* Fields each kind accepts besides "type" and "name". */
static const char *const kind_fields[LK_NKINDS] = {
    "out, in_features", "out_channels, kernel, stride, padding, in_channels", "",
    "kernel, stride", "", "", "", "vocab, dim", "heads", "layers", "",
};

const char *layer_kind_name(layer_kind k)
{
    return (unsigned)k < LK_NKINDS ? kind_names[k] : "?";
}

size_t shape_numel(int ndim, const int *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return n;
}

char *shape_format(int ndim, const int *shape, char *buf, size_t n)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, i ? ",%d" : "%d", shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

unsigned long long rng_next(unsigned long long *s)
{
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double rng_uniform(unsigned long long *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static void layers_free(layer *ls, int n)
{
    if (!ls) return;
    for (int i = 0; i < n; i++) {
        free(ls[i].name);
        layers_free(ls[i].children, ls[i].nchildren);
    }
    free(ls);
}

void model_free(model *m)
{
    if (!m) return;
    free(m->name);
    layers_free(m->layers, m->nlayers);
    free(m);
}

/* Parsing state shared down the layer tree. */
typedef struct parse_st {
    const jctx *c;
    int next_uid;
    long long next_offset;
    int classes;
} parse_st;

/* Where the current input came from, for messages: "the model input", "the output of
 * layers[2]" or "the flattened output of layers[2]". */
typedef struct origin {
    char text[400];
} origin;

static int check_fields(const jctx *c, const cJSON *obj, const char *lpath, layer_kind k)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, obj)
    {
        const char *key = f->string;
        if (!strcmp(key, "type") || !strcmp(key, "name")) continue;
        const char *list = kind_fields[k];
        size_t kl = strlen(key);
        const char *p = list;
        int ok = 0;
        while (kl && (p = strstr(p, key)) != NULL) { /* an empty key matches nothing */
            int start = p == list || p[-1] == ' ';
            int end = p[kl] == '\0' || p[kl] == ',';
            if (start && end) { ok = 1; break; }
            p += kl;
        }
        if (!ok) {
            char fp[320];
            json_path(fp, sizeof fp, lpath, key);
            if (*list)
                return err_set(c->err, c->file, fp,
                               "unknown field for %s; expected one of type, name, %s",
                               kind_names[k], list);
            return err_set(c->err, c->file, fp,
                           "unknown field for %s; expected only type and name", kind_names[k]);
        }
    }
    return json_check_unique(c, obj, lpath);
}

static int get_hp(const jctx *c, const cJSON *obj, const char *lpath, const char *key,
                  int required, long long lo, long long hi, int *out)
{
    long long v = *out;
    if (json_get_int(c, obj, lpath, key, required, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

static int parse_list(parse_st *ps, const cJSON *arr, int n, const char *path, int top,
                      int *ndim, int *shape, origin *org, layer *ls);

/* A hyper-parameter's bound for widths, channels and vocabularies. */
#define LAYER_MAX_WIDTH (1 << 24)

/* One layer being parsed: where it is, its input shape (which its kind's parser turns into
 * its output shape) and where that input came from. */
typedef struct lparse {
    parse_st *ps;
    const cJSON *obj;
    const char *lpath;
    int top, index, count; /* top-level: its index among count; else 0 */
    int *ndim, *shape;     /* in: the input shape; out: the output shape */
    origin *org;           /* where the input came from, for messages */
    const char *sb;        /* the input shape, formatted */
} lparse;

/* A linear layer: out features; the input [features] or [T, features]. */
static int parse_linear(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    char fp[320];
    if (get_hp(c, p->obj, p->lpath, "out", 1, 1, LAYER_MAX_WIDTH, &L->out)) return -1;
    if (*p->ndim < 1 || *p->ndim > 2)
        return err_set(c->err, c->file, p->lpath,
                       "linear: expected an input of [features] or [T, features] (got %s "
                       "from %s); add a flatten layer before it",
                       p->sb, p->org->text);
    int in = p->shape[*p->ndim - 1], want = in;
    if (get_hp(c, p->obj, p->lpath, "in_features", 0, 1, LAYER_MAX_WIDTH, &want)) return -1;
    if (want != in)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "in_features"),
                       "expected %d (%s) (got %d)", in, p->org->text, want);
    L->nparams = (long long)L->out * in + L->out;
    size_t rows = shape_numel(*p->ndim - 1, p->shape);
    L->flops = 2.0 * (double)rows * in * L->out;
    p->shape[*p->ndim - 1] = L->out;
    return 0;
}

/* A convolution: channels, kernel, stride, padding on [C, H, W]. */
static int parse_conv2d(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    char fp[320];
    L->stride = 1;
    if (get_hp(c, p->obj, p->lpath, "out_channels", 1, 1, LAYER_MAX_WIDTH, &L->out) ||
        get_hp(c, p->obj, p->lpath, "kernel", 1, 1, 4096, &L->kernel) ||
        get_hp(c, p->obj, p->lpath, "stride", 0, 1, 4096, &L->stride) ||
        get_hp(c, p->obj, p->lpath, "padding", 0, 0, 4096, &L->pad))
        return -1;
    if (*p->ndim != 3)
        return err_set(c->err, c->file, p->lpath,
                       "conv2d: expected an input of [channels, height, width] (got %s "
                       "from %s)",
                       p->sb, p->org->text);
    int C = p->shape[0], want = C;
    if (get_hp(c, p->obj, p->lpath, "in_channels", 0, 1, LAYER_MAX_WIDTH, &want)) return -1;
    if (want != C)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "in_channels"),
                       "expected %d (the channels of %s) (got %d)", C, p->org->text, want);
    int H = p->shape[1] + 2 * L->pad, W = p->shape[2] + 2 * L->pad;
    if (L->kernel > H || L->kernel > W)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "kernel"),
                       "expected at most %d (the padded input %dx%d of %s) (got %d)",
                       H < W ? H : W, H, W, p->org->text, L->kernel);
    int P = (H - L->kernel) / L->stride + 1, Q = (W - L->kernel) / L->stride + 1;
    L->nparams = (long long)L->out * C * L->kernel * L->kernel + L->out;
    L->flops = 2.0 * L->out * P * Q * (double)C * L->kernel * L->kernel;
    p->shape[0] = L->out;
    p->shape[1] = P;
    p->shape[2] = Q;
    return 0;
}

/* Max pooling: kernel, stride on [C, H, W]. */
static int parse_maxpool2d(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    char fp[320];
    if (get_hp(c, p->obj, p->lpath, "kernel", 1, 1, 4096, &L->kernel)) return -1;
    L->stride = L->kernel;
    if (get_hp(c, p->obj, p->lpath, "stride", 0, 1, 4096, &L->stride)) return -1;
    if (*p->ndim != 3)
        return err_set(c->err, c->file, p->lpath,
                       "maxpool2d: expected an input of [channels, height, width] (got %s "
                       "from %s)",
                       p->sb, p->org->text);
    if (L->kernel > p->shape[1] || L->kernel > p->shape[2])
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "kernel"),
                       "expected at most %d (the input %dx%d of %s) (got %d)",
                       p->shape[1] < p->shape[2] ? p->shape[1] : p->shape[2], p->shape[1],
                       p->shape[2], p->org->text, L->kernel);
    p->shape[1] = (p->shape[1] - L->kernel) / L->stride + 1;
    p->shape[2] = (p->shape[2] - L->kernel) / L->stride + 1;
    L->flops = (double)shape_numel(3, p->shape) * L->kernel * L->kernel;
    return 0;
}

/* An element-wise activation (relu, gelu): same shape. */
static int parse_activation(const lparse *p, layer *L)
{
    L->flops = (double)shape_numel(*p->ndim, p->shape) * (L->kind == LK_GELU ? 8 : 1);
    return 0;
}

/* Flatten: [C, H, W] or [T, D] to one dimension. */
static int parse_flatten(const lparse *p, layer *L)
{
    (void)L;
    size_t n = shape_numel(*p->ndim, p->shape);
    *p->ndim = 1;
    p->shape[0] = (int)n;
    p->shape[1] = p->shape[2] = 0;
    return 0;
}

/* Layer normalization over the last dimension: gamma and beta. */
static int parse_layernorm(const lparse *p, layer *L)
{
    L->dim = p->shape[*p->ndim - 1];
    L->nparams = 2LL * L->dim;
    L->flops = 8.0 * (double)shape_numel(*p->ndim, p->shape);
    return 0;
}

/* Token + position embedding: only first, on [T] token ids. */
static int parse_embedding(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    if (get_hp(c, p->obj, p->lpath, "vocab", 1, 1, LAYER_MAX_WIDTH, &L->vocab) ||
        get_hp(c, p->obj, p->lpath, "dim", 1, 1, LAYER_MAX_WIDTH, &L->dim))
        return -1;
    if (!p->top || p->index != 0)
        return err_set(c->err, c->file, p->lpath,
                       "embedding: expected only as the first layer of the model");
    if (*p->ndim != 1)
        return err_set(c->err, c->file, p->lpath,
                       "embedding: expected the model input to be [T] token ids (got %s)",
                       p->sb);
    int T = p->shape[0];
    L->nparams = (long long)L->vocab * L->dim + (long long)T * L->dim;
    L->flops = (double)T * L->dim;
    *p->ndim = 2;
    p->shape[1] = L->dim;
    return 0;
}

/* The causal attention core: [T, 3 D] to [T, D], heads dividing D. */
static int parse_attention(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    char fp[320];
    if (get_hp(c, p->obj, p->lpath, "heads", 1, 1, 4096, &L->heads)) return -1;
    if (*p->ndim != 2 || p->shape[1] % 3 != 0)
        return err_set(c->err, c->file, p->lpath,
                       "attention: expected an input of [T, 3 dim] (queries, keys and "
                       "values; got %s from %s); put a linear layer with out = 3 dim "
                       "before it",
                       p->sb, p->org->text);
    int D = p->shape[1] / 3, T = p->shape[0];
    if (D % L->heads)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "heads"),
                       "expected a divisor of the model width %d (got %d)", D, L->heads);
    L->dim = D;
    L->flops = 2.0 * 2.0 * T * (double)T * D;
    p->shape[1] = D;
    return 0;
}

/* A residual block: its layers, whose output shape must equal the input. */
static int parse_residual(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    char fp[320];
    const cJSON *arr;
    int n;
    if (json_get_arr(c, p->obj, p->lpath, "layers", 1, &arr, &n)) return -1;
    if (n == 0)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "layers"),
                       "expected at least one layer (got an empty array)");
    if (n > MODEL_MAX_LAYERS - p->ps->next_uid)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, p->lpath, "layers"),
                       "expected at most %d layers in all, residual blocks' layers "
                       "included (got %d more here)", MODEL_MAX_LAYERS, n);
    L->children = calloc((size_t)n, sizeof *L->children);
    if (!L->children) return err_set(c->err, c->file, p->lpath, "out of memory");
    L->nchildren = n;
    int cnd = *p->ndim, csh[MODEL_MAX_DIMS];
    memcpy(csh, p->shape, sizeof csh);
    origin corg = *p->org;
    json_path(fp, sizeof fp, p->lpath, "layers");
    if (parse_list(p->ps, arr, n, fp, 0, &cnd, csh, &corg, L->children)) return -1;
    char ob[64];
    if (cnd != *p->ndim || memcmp(csh, p->shape, sizeof(int) * (size_t)cnd))
        return err_set(c->err, c->file, fp,
                       "expected the block's output shape to equal its input %s, so that "
                       "it can be added (got %s)",
                       p->sb, shape_format(cnd, csh, ob, sizeof ob));
    for (int i = 0; i < n; i++) {
        L->nparams += L->children[i].nparams;
        L->flops += L->children[i].flops;
    }
    L->flops += (double)shape_numel(*p->ndim, p->shape);
    return 0;
}

/* The softmax cross-entropy loss: only last, on [classes] or [T, classes]. */
static int parse_xent(const lparse *p, layer *L)
{
    const jctx *c = p->ps->c;
    if (!p->top || p->index != p->count - 1)
        return err_set(c->err, c->file, p->lpath,
                       "softmax_cross_entropy: expected only as the last layer of the "
                       "model");
    if (*p->ndim < 1 || *p->ndim > 2 || p->shape[*p->ndim - 1] != p->ps->classes)
        return err_set(c->err, c->file, p->lpath,
                       "softmax_cross_entropy: expected an input of [%d] or [T, %d] "
                       "(classes) (got %s from %s)",
                       p->ps->classes, p->ps->classes, p->sb, p->org->text);
    L->flops = 4.0 * (double)shape_numel(*p->ndim, p->shape);
    return 0;
}

/* Reads the hyper-parameters of L's kind, checks its input shape and sets its parameter
 * count, FLOPs and output shape. Returns 0, or -1 with the error set. */
static int parse_kind(const lparse *p, layer *L)
{
    switch (L->kind) {
    case LK_LINEAR: return parse_linear(p, L);
    case LK_CONV2D: return parse_conv2d(p, L);
    case LK_MAXPOOL2D: return parse_maxpool2d(p, L);
    case LK_RELU: return parse_activation(p, L);
    case LK_GELU: return parse_activation(p, L);
    case LK_FLATTEN: return parse_flatten(p, L);
    case LK_LAYERNORM: return parse_layernorm(p, L);
    case LK_EMBEDDING: return parse_embedding(p, L);
    case LK_ATTENTION: return parse_attention(p, L);
    case LK_RESIDUAL: return parse_residual(p, L);
    case LK_XENT: return parse_xent(p, L);
    default: return 0;
    }
}

/* Parses one layer at lpath with input shape (ndim, shape) coming from `org`; writes its
 * output shape back into (ndim, shape). */
static int parse_layer(parse_st *ps, const cJSON *obj, const char *lpath, int top, int index,
                       int count, int *ndim, int *shape, origin *org, layer *L)
{
    const jctx *c = ps->c;
    char fp[320], sb[64], got[96];
    if (!cJSON_IsObject(obj))
        return err_set(c->err, c->file, lpath, "expected a layer object (got %s)",
                       json_describe(obj, got, sizeof got));
    const char *type = NULL;
    if (json_get_str(c, obj, lpath, "type", 1, &type)) return -1;
    int k;
    for (k = 0; k < LK_NKINDS; k++)
        if (!strcmp(type, kind_names[k])) break;
    if (k == LK_NKINDS)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, lpath, "type"),
                       "expected one of linear, conv2d, relu, maxpool2d, flatten, layernorm, "
                       "gelu, embedding, attention, residual, softmax_cross_entropy (got \"%s\")",
                       type);
    L->kind = (layer_kind)k;
    L->uid = ps->next_uid++;
    if (check_fields(c, obj, lpath, L->kind)) return -1;
    const char *name = NULL;
    if (json_get_str(c, obj, lpath, "name", 0, &name)) return -1;
    char defname[48];
    snprintf(defname, sizeof defname, "%s%d", kind_names[k], L->uid);
    L->name = strdup(name ? name : defname);
    if (!L->name) return err_set(c->err, c->file, lpath, "out of memory");
    L->in_ndim = *ndim;
    memcpy(L->in_shape, shape, sizeof(int) * MODEL_MAX_DIMS);
    L->param_offset = ps->next_offset;
    shape_format(*ndim, shape, sb, sizeof sb);
    const lparse p = {ps, obj, lpath, top, index, count, ndim, shape, org, sb};
    if (parse_kind(&p, L)) return -1;
    if (L->kind != LK_RESIDUAL) ps->next_offset += L->nparams;
    for (int i = 0; i < *ndim; i++)
        if (shape[i] < 1)
            return err_set(c->err, c->file, lpath, "%s: output would be empty (from %s)",
                           kind_names[k], org->text);
    if ((double)shape_numel(*ndim, shape) > 2147483647.0)
        return err_set(c->err, c->file, lpath, "%s: output too large (more than 2^31 values "
                       "per sample)", kind_names[k]);
    L->out_ndim = *ndim;
    memcpy(L->out_shape, shape, sizeof(int) * MODEL_MAX_DIMS);
    snprintf(org->text, sizeof org->text, "%s output of %s",
             L->kind == LK_FLATTEN ? "the flattened" : "the", lpath);
    return 0;
}

static int parse_list(parse_st *ps, const cJSON *arr, int n, const char *path, int top,
                      int *ndim, int *shape, origin *org, layer *ls)
{
    /* walk the child/next chain: cJSON_GetArrayItem(arr, i) is linear in i */
    int i = 0;
    for (const cJSON *it = arr->child; it && i < n; it = it->next, i++) {
        char lp[300];
        json_path_idx(lp, sizeof lp, path, "", i);
        if (ps->next_uid >= MODEL_MAX_LAYERS)
            return err_set(ps->c->err, ps->c->file, lp,
                           "expected at most %d layers in all, residual blocks' layers "
                           "included (got more)", MODEL_MAX_LAYERS);
        if (parse_layer(ps, it, lp, top, i, n, ndim, shape, org, &ls[i])) return -1;
    }
    return 0;
}

model *model_from_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx c = {file, err};
    if (json_check_format(&c, root, MODEL_FORMAT)) return NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) { err_set(err, file, NULL, "out of memory"); return NULL; }
    const char *name = "model";
    const cJSON *in, *arr;
    int nin, n;
    long long classes = 0, seed = 1;
    {
        const cJSON *f;
        cJSON_ArrayForEach(f, root)
        {
            static const char *const ok[] = {"format", "name", "input", "classes", "seed",
                                             "layers", "description"};
            size_t j;
            for (j = 0; j < sizeof ok / sizeof ok[0]; j++)
                if (!strcmp(f->string, ok[j])) break;
            if (j == sizeof ok / sizeof ok[0]) {
                err_set(err, file, f->string,
                        "unknown field; expected one of format, name, description, input, "
                        "classes, seed, layers");
                goto fail;
            }
        }
    }
    const char *desc = NULL;
    if (json_check_unique(&c, root, "") || json_get_str(&c, root, "", "name", 0, &name) ||
        json_get_str(&c, root, "", "description", 0, &desc) ||
        json_get_arr(&c, root, "", "input", 1, &in, &nin) ||
        json_get_int(&c, root, "", "classes", 1, 2, 1 << 24, &classes) ||
        json_get_int(&c, root, "", "seed", 0, 0, 9007199254740991LL, &seed) ||
        json_get_arr(&c, root, "", "layers", 1, &arr, &n))
        goto fail;
    m->name = strdup(name);
    m->classes = (int)classes;
    m->seed = (unsigned long long)seed;
    if (nin < 1 || nin > MODEL_MAX_DIMS) {
        err_set(err, file, "input",
                "expected [T] token ids, [features] or [channels, height, width] (got %d "
                "dimensions)",
                nin);
        goto fail;
    }
    m->in_ndim = nin;
    for (int i = 0; i < nin; i++) {
        long long v;
        if (json_item_int(&c, cJSON_GetArrayItem(in, i), "input", i, 1, 1 << 24, &v)) goto fail;
        m->in_shape[i] = (int)v;
    }
    if (shape_numel(nin, m->in_shape) > 2147483647u) {
        err_set(err, file, "input", "expected at most 2^31 values per sample");
        goto fail;
    }
    if (n < 1) {
        err_set(err, file, "layers", "expected at least the loss layer (got an empty array)");
        goto fail;
    }
    if (n > MODEL_MAX_LAYERS) {
        err_set(err, file, "layers", "expected at most %d layers (got %d)", MODEL_MAX_LAYERS, n);
        goto fail;
    }
    m->layers = calloc((size_t)n, sizeof *m->layers);
    if (!m->name || !m->layers) { err_set(err, file, NULL, "out of memory"); goto fail; }
    m->nlayers = n;
    parse_st ps = {&c, 0, 0, m->classes};
    int ndim = m->in_ndim, shape[MODEL_MAX_DIMS];
    memcpy(shape, m->in_shape, sizeof shape);
    origin org;
    snprintf(org.text, sizeof org.text, "the model input");
    if (parse_list(&ps, arr, n, "layers", 1, &ndim, shape, &org, m->layers)) goto fail;
    if (m->layers[n - 1].kind != LK_XENT) {
        char lp[32];
        snprintf(lp, sizeof lp, "layers[%d].type", n - 1);
        err_set(err, file, lp, "expected the last layer to be the loss, "
                "\"softmax_cross_entropy\" (got \"%s\")", kind_names[m->layers[n - 1].kind]);
        goto fail;
    }
    m->tokens = m->layers[0].kind == LK_EMBEDDING;
    if (m->tokens && m->layers[0].vocab != m->classes) {
        err_set(err, file, "classes", "expected %d (the vocabulary of layers[0], since the "
                "targets are next tokens) (got %d)", m->layers[0].vocab, m->classes);
        goto fail;
    }
    m->nparams = ps.next_offset;
    return m;
fail:
    model_free(m);
    return NULL;
}

model *model_parse(const char *name, const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text(name, text, strlen(text), err);
    if (!root) return NULL;
    model *m = model_from_json(root, name, err);
    cJSON_Delete(root);
    return m;
}

model *model_load(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) return NULL;
    model *m = model_from_json(root, path, err);
    cJSON_Delete(root);
    return m;
}

int model_targets_per_sample(const model *m)
{
    const layer *L = &m->layers[m->nlayers - 1];
    return L->in_ndim == 2 ? L->in_shape[0] : 1;
}

long long model_range_params(const model *m, int first, int last)
{
    long long n = 0;
    for (int i = first; i <= last; i++) n += m->layers[i].nparams;
    return n;
}

static void fill_uniform(unsigned long long *s, float *p, long long n, double bound)
{
    for (long long i = 0; i < n; i++) p[i] = (float)((2.0 * rng_uniform(s) - 1.0) * bound);
}

/* Initializes one layer's parameters at p (the layer's own range). */
static void init_layer(const model *m, const layer *L, float *p)
{
    unsigned long long s = m->seed * 0x9E3779B97F4A7C15ULL + (unsigned long long)L->uid + 1;
    rng_next(&s);
    switch (L->kind) {
    case LK_LINEAR: {
        int in = L->in_shape[L->in_ndim - 1];
        fill_uniform(&s, p, (long long)L->out * in, sqrt(3.0 / in));
        memset(p + (size_t)L->out * in, 0, sizeof(float) * (size_t)L->out);
        break;
    }
    case LK_CONV2D: {
        long long fan = (long long)L->in_shape[0] * L->kernel * L->kernel;
        fill_uniform(&s, p, L->out * fan, sqrt(3.0 / (double)fan));
        memset(p + L->out * fan, 0, sizeof(float) * (size_t)L->out);
        break;
    }
    case LK_LAYERNORM:
        for (int i = 0; i < L->dim; i++) {
            p[i] = 1.0f;
            p[L->dim + i] = 0.0f;
        }
        break;
    case LK_EMBEDDING:
        fill_uniform(&s, p, L->nparams, 0.02 * sqrt(3.0));
        break;
    case LK_RESIDUAL:
        for (int i = 0; i < L->nchildren; i++)
            init_layer(m, &L->children[i],
                       p + (L->children[i].param_offset - L->param_offset));
        break;
    default:
        break;
    }
}

void model_init_params(const model *m, int first, int last, float *host)
{
    long long base = m->layers[first].param_offset;
    for (int i = first; i <= last; i++)
        init_layer(m, &m->layers[i], host + (m->layers[i].param_offset - base));
}

/* A lower bound of the bytes a run allocates for L at B samples (its output, an attention's
 * probabilities, its children's), in double: B x heads x T x T wraps a size_t for a context
 * of 2^24 tokens. */
static double layer_bytes_min(const layer *L, int B)
{
    double b = (double)B * (double)shape_numel(L->out_ndim, L->out_shape);
    if (L->kind == LK_ATTENTION)
        b += (double)B * L->heads * (double)L->in_shape[0] * (double)L->in_shape[0];
    b *= sizeof(float);
    for (int i = 0; i < L->nchildren; i++) b += layer_bytes_min(&L->children[i], B);
    return b;
}

int model_check_batch(const model *m, const char *file, int batch, int samples,
                      plumb_err *err)
{
    double in = (double)shape_numel(m->in_ndim, m->in_shape) * sizeof(float);
    double have = sched_memory_available(), weights = 8.0 * (double)m->nparams,
           fixed = weights + in * ((double)samples + batch); /* the data and one input */
    for (int i = 0; i < m->nlayers; i++) {
        double need = fixed + layer_bytes_min(&m->layers[i], batch);
        if (need <= have) continue;
        char path[32];
        snprintf(path, sizeof path, "layers[%d]", i);
        return err_set(err, file, path, "%s at %d samples per microbatch needs at least %.1f "
                       "GiB with the weights, their gradients and the input, above the %.1f "
                       "GiB this process may use: expected a smaller input or batch",
                       kind_names[m->layers[i].kind], batch, need / 1073741824.0,
                       have / 1073741824.0);
    }
    return 0;
}
