/* llmfix.h: the transformer tests' fixtures: a model file or a model text, and a cluster
 * file, loaded or the test failed with the loader's line. Header-only: each test file is
 * its own binary. */
#ifndef PLUMB_TESTS_LLMFIX_H
#define PLUMB_TESTS_LLMFIX_H

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"

/* The transformer of the model file at path; the caller frees it. Fails the test when it
 * does not load. */
static inline transformer *llmfix_model(const char *path)
{
    plumb_err err = {{0}};
    transformer *t = transformer_load(path, &err);
    cr_assert_not_null(t, "%s: %s", path, err.msg);
    return t;
}

/* The transformer of a model text (named "t.json" in errors), or NULL with err set to the
 * loader's line; the caller frees it. Fails the test when the text is not JSON. */
static inline transformer *llmfix_parse(const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text("t.json", text, strlen(text), err);
    cr_assert_not_null(root, "%s", err->msg);
    transformer *t = transformer_from_json(root, "t.json", err);
    cJSON_Delete(root);
    return t;
}

/* The transformer of a model file's text (named "t.json" in errors); the caller frees it.
 * Fails the test when it does not parse or load. */
static inline transformer *llmfix_model_text(const char *text)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_parse(text, &err);
    cr_assert_not_null(t, "%s: %s", text, err.msg);
    return t;
}

/* Fails the test unless the model text is refused in one line that contains want. */
static inline void llmfix_expect_bad(const char *text, const char *want)
{
    plumb_err err = {{0}};
    transformer *t = llmfix_parse(text, &err);
    cr_assert_null(t, "accepted: %s", text);
    cr_assert(strstr(err.msg, want), "message \"%s\" lacks \"%s\"", err.msg, want);
    cr_assert_null(strchr(err.msg, '\n'), "more than one line: %s", err.msg);
}

/* A 4-block model of 8 heads (head width 32, hidden 256) with kv key/value heads and an
 * MLP (SwiGLU) of width ffn, 128 positions, a vocabulary of 1000; the caller frees it. */
static inline transformer *llmfix_small(int kv, int ffn)
{
    char text[640];
    snprintf(text, sizeof text, "{\"format\": \"plumb-transformer/1\", \"name\": \"small\", "
             "\"hidden_size\": 256, \"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
             "\"num_key_value_heads\": %d, \"intermediate_size\": %d, "
             "\"max_position_embeddings\": 128, \"vocab_size\": 1000, \"mlp\": \"swiglu\", "
             "\"norm\": \"rmsnorm\", \"position_embedding\": \"rotary\", \"bias\": false, "
             "\"tie_word_embeddings\": false, \"dropout\": false}", kv, ffn);
    return llmfix_model_text(text);
}

/* The analytic profile of t under o on the cluster file at cluster_path; the caller frees
 * it. Fails the test when the cluster does not load or the profile is refused. */
static inline profile *llmfix_profile(const transformer *t, const char *cluster_path,
                                      const llm_options *o)
{
    plumb_err err = {{0}};
    cluster *c = cluster_load(cluster_path, &err);
    cr_assert_not_null(c, "%s", err.msg);
    profile *p = llm_profile_build(t, c, cluster_path, o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cluster_free(c);
    return p;
}

/* The cluster file at path; the caller frees it. Fails the test when it does not load. */
static inline cluster *llmfix_cluster(const char *path)
{
    plumb_err err = {{0}};
    cluster *c = cluster_load(path, &err);
    cr_assert_not_null(c, "%s", err.msg);
    return c;
}

#endif
