/* test_model.c: model specs: the shipped examples load with the expected shapes and
 * parameter counts, weight initialization is independent of the stage split, and bad specs
 * fail with one message naming the field path and what was expected. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/model.h"

static model *load_ok(const char *path)
{
    plumb_err e = {{0}};
    model *m = model_load(path, &e);
    cr_assert(m, "%s: %s", path, e.msg);
    return m;
}

Test(model, fmnist_mlp)
{
    model *m = load_ok("examples/models/fmnist-mlp.json");
    cr_expect_eq(m->nlayers, 7);
    cr_expect_eq(m->nparams, 784LL * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    cr_expect_eq(m->layers[0].out_ndim, 1);
    cr_expect_eq(m->layers[0].out_shape[0], 784);
    cr_expect_eq(m->tokens, 0);
    cr_expect_eq(model_targets_per_sample(m), 1);
    model_free(m);
}

Test(model, fmnist_cnn_shapes)
{
    model *m = load_ok("examples/models/fmnist-cnn.json");
    int want[][3] = {{32, 28, 28}, {32, 28, 28}, {32, 14, 14}, {64, 14, 14}, {64, 14, 14},
                     {64, 7, 7}, {3136, 0, 0}, {128, 0, 0}, {128, 0, 0}, {10, 0, 0}};
    for (int i = 0; i < 10; i++)
        for (int d = 0; d < m->layers[i].out_ndim; d++)
            cr_expect_eq(m->layers[i].out_shape[d], want[i][d], "layers[%d] dim %d", i, d);
    cr_expect_eq(m->nparams, 320 + 18496 + 3136LL * 128 + 128 + 1290);
    cr_expect_str_eq(m->layers[0].name, "conv1");
    cr_expect_str_eq(m->layers[1].name, "relu1");
    /* parameter ranges are contiguous in layer order */
    cr_expect_eq(m->layers[3].param_offset, 320);
    cr_expect_eq(m->layers[7].param_offset, 320 + 18496);
    /* conv1 forward FLOPs per sample: 2 * 32 * 28 * 28 * 1 * 9 */
    cr_expect_float_eq(m->layers[0].flops, 2.0 * 32 * 28 * 28 * 9, 1e-6);
    model_free(m);
}

Test(model, vgg16)
{
    model *m = load_ok("examples/models/vgg16.json");
    cr_expect_eq(m->nparams, 138357544LL); /* the published VGG-16 count */
    int convs = 0;
    for (int i = 0; i < m->nlayers; i++) convs += m->layers[i].kind == LK_CONV2D;
    cr_expect_eq(convs, 13);
    /* the last pool's output is 512 x 7 x 7 */
    int i = 0;
    while (m->layers[i].kind != LK_FLATTEN) i++;
    cr_expect_eq(m->layers[i].in_shape[0], 512);
    cr_expect_eq(m->layers[i].in_shape[1], 7);
    cr_expect_eq(m->layers[i].in_shape[2], 7);
    model_free(m);
}

Test(model, gpt_mini)
{
    model *m = load_ok("examples/models/gpt-mini.json");
    cr_expect_eq(m->tokens, 1);
    cr_expect_eq(m->nlayers, 1 + 8 + 3);
    cr_expect_eq(model_targets_per_sample(m), 64);
    long long emb = 256 * 128 + 64 * 128;
    long long attn = 256 + 128 * 384 + 384 + 128 * 128 + 128;
    long long mlp = 256 + 128 * 512 + 512 + 512 * 128 + 128;
    cr_expect_eq(m->nparams, emb + 4 * (attn + mlp) + 256 + 128 * 256 + 256);
    cr_expect_eq(m->layers[1].nchildren, 4);
    cr_expect_eq(m->layers[1].children[2].kind, LK_ATTENTION);
    cr_expect_eq(m->layers[1].children[2].out_shape[1], 128);
    cr_expect_eq(m->layers[11].in_shape[0], 64);
    cr_expect_eq(m->layers[11].in_shape[1], 256);
    model_free(m);
}

/* The weights of a layer do not depend on which range they are initialized in. */
Test(model, init_independent_of_split)
{
    model *m = load_ok("examples/models/fmnist-cnn.json");
    float *all = malloc((size_t)m->nparams * sizeof *all);
    model_init_params(m, 0, m->nlayers - 1, all);
    long long off = m->layers[3].param_offset, n = model_range_params(m, 3, 7);
    float *part = malloc((size_t)n * sizeof *part);
    model_init_params(m, 3, 7, part);
    cr_expect_eq(memcmp(all + off, part, (size_t)n * sizeof *part), 0);
    /* weights are not all zero and biases are */
    cr_expect_neq(all[0], 0.0f);
    cr_expect_eq(all[319], 0.0f);
    free(all);
    free(part);
    model_free(m);
}

/* Expects spec text to fail with a message containing `want`. */
static void bad(const char *text, const char *want)
{
    plumb_err e = {{0}};
    model *m = model_parse("spec.json", text, &e);
    cr_expect_null(m, "accepted: %s", text);
    model_free(m);
    cr_expect(strstr(e.msg, want) != NULL, "message \"%s\" lacks \"%s\"", e.msg, want);
    cr_expect(strncmp(e.msg, "spec.json: ", 11) == 0, "message \"%s\" does not name the file",
              e.msg);
}

#define HEAD "{\"format\":\"plumb-model/1\",\"input\":[1,8,8],\"classes\":3,\"layers\":["
#define TAIL "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":3}," \
             "{\"type\":\"softmax_cross_entropy\"}]}"

Test(model, validation_errors)
{
    bad("{\"format\":\"plumb-model/2\"}", "format: expected \"plumb-model/1\"");
    bad(HEAD "{\"type\":\"conv3d\"}," TAIL, "layers[0].type: expected one of linear, conv2d");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4,\"kernel\":0}," TAIL,
        "layers[0].kernel: expected an integer from 1 to 4096 (got 0)");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4}," TAIL,
        "layers[0].kernel: missing required field");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4,\"kernal\":3}," TAIL,
        "layers[0].kernal: unknown field for conv2d");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4,\"kernel\":3,\"\":3}," TAIL,
        "unknown field for conv2d"); /* an empty key (once an endless loop) */
    bad(HEAD "{\"type\":\"relu\",\"\":1}," TAIL, "unknown field for relu");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4,\"kernel\":9}," TAIL,
        "layers[0].kernel: expected at most 8");
    bad(HEAD "{\"type\":\"conv2d\",\"out_channels\":4,\"kernel\":3,\"in_channels\":3}," TAIL,
        "layers[0].in_channels: expected 1 (the channels of the model input) (got 3)");
    bad(HEAD "{\"type\":\"linear\",\"out\":4}," TAIL, "layers[0]: linear: expected an input of "
        "[features] or [T, features] (got [1,8,8] from the model input)");
    bad(HEAD "{\"type\":\"relu\"},{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":3,"
        "\"in_features\":60},{\"type\":\"softmax_cross_entropy\"}]}",
        "layers[2].in_features: expected 64 (the flattened output of layers[1]) (got 60)");
    bad(HEAD "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":4}]}",
        "layers[1].type: expected the last layer to be the loss");
    bad(HEAD "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":5},"
        "{\"type\":\"softmax_cross_entropy\"}]}",
        "layers[2]: softmax_cross_entropy: expected an input of [3] or [T, 3]");
    bad(HEAD "{\"type\":\"flatten\"},{\"type\":\"softmax_cross_entropy\"},"
        "{\"type\":\"linear\",\"out\":3}]}",
        "layers[1]: softmax_cross_entropy: expected only as the last layer");
    bad(HEAD "{\"type\":\"maxpool2d\",\"kernel\":2,\"stride\":0}," TAIL,
        "layers[0].stride: expected an integer from 1 to 4096 (got 0)");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4,6],\"classes\":3,\"layers\":["
        "{\"type\":\"attention\",\"heads\":4}," TAIL,
        "layers[0].heads: expected a divisor of the model width 2 (got 4)");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4,8],\"classes\":3,\"layers\":["
        "{\"type\":\"attention\",\"heads\":1}," TAIL,
        "layers[0]: attention: expected an input of [T, 3 dim]");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4,8],\"classes\":3,\"layers\":["
        "{\"type\":\"residual\",\"layers\":[{\"type\":\"linear\",\"out\":16}]}," TAIL,
        "layers[0].layers: expected the block's output shape to equal its input [4,8]");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4,8],\"classes\":3,\"layers\":["
        "{\"type\":\"residual\",\"layers\":[{\"type\":\"relu\"},{\"type\":\"linear\","
        "\"out\":8,\"in_features\":7}]}," TAIL,
        "layers[0].layers[1].in_features: expected 8 (the output of layers[0].layers[0]) "
        "(got 7)");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4],\"classes\":3,\"layers\":["
        "{\"type\":\"relu\"},{\"type\":\"embedding\",\"vocab\":3,\"dim\":2}," TAIL,
        "layers[1]: embedding: expected only as the first layer");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4],\"classes\":3,\"layers\":["
        "{\"type\":\"embedding\",\"vocab\":5,\"dim\":2}," TAIL,
        "classes: expected 5 (the vocabulary of layers[0]");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4,4,4,4],\"classes\":3,\"layers\":[" TAIL,
        "input: expected [T] token ids");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4],\"classes\":3,\"layers\":[]}",
        "layers: expected at least the loss layer");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4],\"classes\":3,\"layerz\":[]}",
        "layerz: unknown field");
    bad("{\"format\":\"plumb-model/1\",\"input\":[4],\"classes\":3,\"layers\":[7]}",
        "layers[0]: expected a layer object (got 7)");
}

Test(model, load_errors_name_the_file)
{
    plumb_err e = {{0}};
    cr_expect_null(model_load("/nonexistent/m.json", &e));
    cr_expect(strstr(e.msg, "/nonexistent/m.json: cannot open") != NULL, "%s", e.msg);
}

/* A spec of `n` relu layers before flatten/linear/loss, with a residual block of `inner`
 * relus in the middle when inner > 0. The caller frees the text. */
static char *long_spec(int n, int inner)
{
    size_t cap = (size_t)(n + inner) * 20 + 512, len = 0;
    char *s = malloc(cap);
    cr_assert(s);
    len += (size_t)snprintf(s + len, cap - len, "%s", HEAD);
    for (int i = 0; i < n; i++) {
        if (inner > 0 && i == n / 2) {
            len += (size_t)snprintf(s + len, cap - len, "{\"type\":\"residual\",\"layers\":[");
            for (int k = 0; k < inner; k++)
                len += (size_t)snprintf(s + len, cap - len, "%s{\"type\":\"relu\"}",
                                        k ? "," : "");
            len += (size_t)snprintf(s + len, cap - len, "]},");
        }
        len += (size_t)snprintf(s + len, cap - len, "{\"type\":\"relu\"},");
    }
    snprintf(s + len, cap - len, "%s", TAIL);
    return s;
}

/* 50k layers parse (the array walk is linear: once quadratic, 61 s for this size), each
 * layer at its place; beyond MODEL_MAX_LAYERS the spec gets one line naming the limit. */
Test(model, many_layers_and_the_limit)
{
    plumb_err e = {{0}};
    char *text = long_spec(50000, 0);
    model *m = model_parse("spec.json", text, &e);
    cr_assert(m, "%s", e.msg);
    cr_expect_eq(m->nlayers, 50003);
    cr_expect_eq(m->layers[49999].kind, LK_RELU);
    cr_expect_eq(m->layers[49999].uid, 49999);
    cr_expect_eq(m->layers[50001].kind, LK_LINEAR);
    cr_expect_eq(m->layers[50002].kind, LK_XENT);
    model_free(m);
    free(text);

    text = long_spec(MODEL_MAX_LAYERS, 0);
    bad(text, "layers: expected at most 100000 layers (got 100003)");
    free(text);
    /* nested layers count too: a block of 90k after 15k layers; 60k + 50k at the top */
    text = long_spec(30000, 90000);
    bad(text, "layers[15000].layers: expected at most 100000 layers in all");
    free(text);
    text = long_spec(60000, 50000);
    bad(text, "layers[50000]: expected at most 100000 layers in all");
    free(text);
}
