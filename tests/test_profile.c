/* test_profile.c: the plumb-profile/1 loader, validator, writer and graph queries:
 * every shipped profile round-trips exactly, and each class of bad input is rejected with
 * the exact field path in its one-line message. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cluster.h"
#include "core/json.h"
#include "core/profile.h"

/* A 4-layer diamond: in -> a, in -> b, a -> out, b -> out. %s slots let tests inject text. */
#define LAYER(nm, extra)                                                                     \
    "{\"name\": \"" nm "\", \"kind\": \"Conv2d\", \"desc\": \"Conv2d(3, 8)\", "                \
    "\"forward_ms\": 1.5, \"backward_ms\": 3.0, \"activation_bytes\": 1024, "                 \
    "\"parameter_bytes\": 256" extra "}"

static const char *GOOD =
    "{\"format\": \"plumb-profile/1\", \"name\": \"tiny\", \"device\": \"V100\", "
    "\"source\": \"hand-written\", \"minibatch\": 32, \"input_bytes\": 2048, \"layers\": ["
    LAYER("in", "") ", "
    LAYER("a", ", \"backward_input_ms\": 1.0, \"backward_weight_ms\": 2.0, \"flops\": 1e9") ", "
    LAYER("b", ", \"stage_id\": 1, \"saved_bytes\": 512, \"split_saved_bytes\": 128, "
             "\"grad_buffer_bytes\": 64, \"workspace_bytes\": 4096") ", "
    LAYER("out", "")
    "], \"edges\": [[0, 1], [0, 2], [1, 3], [2, 3]]}";

static profile *parse(const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text("t.json", text, strlen(text), err);
    if (!root) return NULL;
    profile *p = profile_from_json(root, "t.json", err);
    cJSON_Delete(root);
    return p;
}

/* Replaces the first occurrence of `from` in GOOD by `to`, parses, and expects the error
 * message to be exactly `want`. */
static void expect_bad(const char *from, const char *to, const char *want)
{
    const char *at = strstr(GOOD, from);
    cr_assert(at, "test bug: \"%s\" not in GOOD", from);
    size_t n = strlen(GOOD) + strlen(to) + 1;
    char *text = malloc(n);
    snprintf(text, n, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    plumb_err err;
    err_clear(&err);
    profile *p = parse(text, &err);
    cr_assert_null(p, "accepted: %s", text);
    cr_assert_str_eq(err.msg, want);
    free(text);
}

Test(profile, loads_good_file_with_optional_fields)
{
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_str_eq(p->name, "tiny");
    cr_assert_str_eq(p->device, "V100");
    cr_assert_str_eq(p->source, "hand-written");
    cr_assert_eq(p->minibatch, 32);
    cr_assert_eq(p->nlayers, 4);
    cr_assert_eq(p->nedges, 4);
    cr_assert_str_eq(p->layers[1].desc, "Conv2d(3, 8)");
    cr_assert_eq(p->layers[0].backward_input_ms, -1);
    cr_assert_eq(p->layers[0].backward_weight_ms, -1);
    cr_assert_eq(p->layers[0].flops, -1);
    cr_assert_eq(p->layers[1].backward_input_ms, 1.0);
    cr_assert_eq(p->layers[1].backward_weight_ms, 2.0);
    cr_assert_eq(p->layers[1].flops, 1e9);
    cr_assert_not_null(p->stage_ids);
    cr_assert_eq(p->stage_ids[0], -1);
    cr_assert_eq(p->stage_ids[2], 1);
    cr_assert_eq(p->input_bytes, 2048);
    cr_assert_eq(p->layers[0].saved_bytes, 0, "absent: 0");
    cr_assert_eq(p->layers[2].saved_bytes, 512);
    cr_assert_eq(p->layers[2].split_saved_bytes, 128);
    cr_assert_eq(p->layers[2].grad_buffer_bytes, 64);
    cr_assert_eq(p->layers[2].workspace_bytes, 4096);
    cr_assert_eq(p->edges[3].src, 2);
    cr_assert_eq(p->edges[3].dst, 3);
    cr_assert_float_eq(profile_total_forward_ms(p), 6.0, 1e-12);
    cr_assert_float_eq(profile_total_backward_ms(p), 12.0, 1e-12);
    cr_assert_float_eq(profile_total_parameter_bytes(p), 1024.0, 1e-12);
    cr_assert_float_eq(profile_total_activation_bytes(p), 4096.0, 1e-12);
    cr_assert_eq(profile_is_chain(p), 0);
    cr_assert_eq(profile_find_layer(p, "b"), 2);
    cr_assert_eq(profile_find_layer(p, "zz"), -1);
    profile_free(p);
}

Test(profile, minimal_chain_without_optional_fields)
{
    const char *t = "{\"format\": \"plumb-profile/1\", \"name\": \"c\", \"device\": \"cpu\", "
                    "\"minibatch\": 1, \"layers\": [{\"name\": \"x\", \"kind\": \"Linear\", "
                    "\"forward_ms\": 0, \"backward_ms\": 0, \"activation_bytes\": 0, "
                    "\"parameter_bytes\": 0}]}";
    plumb_err err;
    profile *p = parse(t, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_str_eq(p->source, "");
    cr_assert_str_eq(p->layers[0].desc, "");
    cr_assert_null(p->stage_ids);
    cr_assert_eq(p->nedges, 0);
    cr_assert_eq(profile_is_chain(p), 1);
    profile_free(p);
}

Test(profile, json_clone_and_equal_round_trip)
{
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cJSON *j = profile_to_json(p);
    cr_assert_not_null(j);
    profile *q = profile_from_json(j, "mem", &err);
    cJSON_Delete(j);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    profile *r = profile_clone(p);
    cr_assert(profile_equal(p, r));
    r->layers[2].parameter_bytes += 1;
    cr_assert_not(profile_equal(p, r));
    r->layers[2].parameter_bytes -= 1;
    r->layers[2].workspace_bytes = 0;
    cr_assert_not(profile_equal(p, r));
    r->layers[2].workspace_bytes = 4096;
    r->input_bytes = 0;
    cr_assert_not(profile_equal(p, r));
    r->input_bytes = 2048;
    cr_assert(profile_equal(p, r));
    r->stage_ids[2] = 0;
    cr_assert_not(profile_equal(p, r));
    r->stage_ids[2] = 1;
    r->edges[0].dst = 2;
    cr_assert_not(profile_equal(p, r));
    profile_free(p);
    profile_free(q);
    profile_free(r);
}

Test(profile, save_then_load_is_identical_and_atomic)
{
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p);
    p->layers[0].forward_ms = 0.1 + 0.2; /* not exactly printable with 15 digits */
    char dir[] = "/tmp/plumb-test-profile-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/p.json", dir);
    cr_assert_eq(profile_save(p, path, &err), 0, "%s", err.msg);
    profile *q = profile_load(path, &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    /* an invalid profile is refused and the old file stays as it was */
    q->layers[1].backward_ms = -1;
    cr_assert_eq(profile_save(q, path, &err), -1);
    cr_assert(strstr(err.msg, "layers[1].backward_ms"), "%s", err.msg);
    profile *r = profile_load(path, &err);
    cr_assert_not_null(r, "%s", err.msg);
    cr_assert(profile_equal(p, r));
    /* a directory that does not exist: error, nothing written */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/p.json", dir);
    cr_assert_eq(profile_save(p, bad, &err), -1);
    unlink(path);
    cr_assert_eq(rmdir(dir), 0, "temporary files left in %s", dir);
    profile_free(p);
    profile_free(q);
    profile_free(r);
}

/* ---- every shipped profile ---------------------------------------------------------- */

static int roundtrip_dir(const char *dir, const char *tmp)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            count += roundtrip_dir(path, tmp);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json")) continue;
        plumb_err err;
        /* profiles/ also ships other nouns (clusters): skip files of another plumb format */
        cJSON *root = json_load_file(path, &err);
        cr_assert_not_null(root, "%s", err.msg);
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
        int other = cJSON_IsString(fmt) && !strncmp(fmt->valuestring, "plumb-", 6) &&
                    strncmp(fmt->valuestring, "plumb-profile/", 14);
        cJSON_Delete(root);
        if (other) continue;
        profile *p = profile_load(path, &err);
        cr_assert_not_null(p, "%s", err.msg);
        cr_assert_eq(profile_save(p, tmp, &err), 0, "%s", err.msg);
        profile *q = profile_load(tmp, &err);
        cr_assert_not_null(q, "%s", err.msg);
        cr_assert(profile_equal(p, q), "%s changed in a save/load round trip", path);
        profile *c = profile_clone(p);
        cr_assert(profile_equal(p, c));
        cr_assert_eq(profile_validate(c, path, &err), 0, "%s", err.msg);
        profile_free(p);
        profile_free(q);
        profile_free(c);
        count++;
    }
    closedir(d);
    return count;
}

Test(profile, every_shipped_profile_round_trips)
{
    char tmp[] = "/tmp/plumb-test-shipped-XXXXXX";
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    int n = roundtrip_dir("profiles", tmp);
    unlink(tmp);
    cr_assert(n >= 20, "%d profiles found under profiles/, expected at least the 20 PipeDream ones (run the "
              "tests from the repository root)", n);
}

/* ---- bad input, one test per class ---------------------------------------------------- */

Test(profile_bad, malformed_json)
{
    plumb_err err;
    cr_assert_null(parse("{\"format\": ", &err));
    cr_assert(strstr(err.msg, "t.json: malformed JSON at line 1"), "%s", err.msg);
}

Test(profile_bad, wrong_format)
{
    expect_bad("plumb-profile/1", "plumb-plan/1",
               "t.json: format: expected \"plumb-profile/1\" (got \"plumb-plan/1\")");
}

Test(profile_bad, missing_field)
{
    expect_bad("\"device\": \"V100\", ", "", "t.json: device: missing required field");
    expect_bad("\"activation_bytes\": 1024, ", "",
               "t.json: layers[0].activation_bytes: missing required field");
}

Test(profile_bad, wrong_type)
{
    expect_bad("\"minibatch\": 32", "\"minibatch\": \"32\"",
               "t.json: minibatch: expected an integer (got \"32\")");
    expect_bad("\"forward_ms\": 1.5", "\"forward_ms\": \"fast\"",
               "t.json: layers[0].forward_ms: expected a number (got \"fast\")");
    expect_bad("\"kind\": \"Conv2d\"", "\"kind\": 7",
               "t.json: layers[0].kind: expected a string (got 7)");
    expect_bad("\"layers\": [", "\"layers\": [3, ",
               "t.json: layers[0]: expected a layer object (got 3)");
    expect_bad("[0, 1]", "[0, 1, 2]",
               "t.json: edges[0]: expected [src, dst], two layer indices (got an array)");
    expect_bad("[0, 1]", "[0, 0.5]", "t.json: edges[0][1]: expected an integer (got 0.5)");
}

Test(profile_bad, negative_and_zero)
{
    expect_bad("\"backward_ms\": 3.0", "\"backward_ms\": -3.0",
               "t.json: layers[0].backward_ms: expected a number >= 0 (got -3)");
    expect_bad("\"minibatch\": 32", "\"minibatch\": 0",
               "t.json: minibatch: expected an integer from 1 to 16777216 (got 0)");
    expect_bad("\"stage_id\": 1", "\"stage_id\": -1",
               "t.json: layers[2].stage_id: expected an integer from 0 to 2147483647 (got -1)");
}

Test(profile_bad, negative_memory_fields)
{
    expect_bad("\"saved_bytes\": 512", "\"saved_bytes\": -512",
               "t.json: layers[2].saved_bytes: expected a number >= 0 (got -512)");
    expect_bad("\"workspace_bytes\": 4096", "\"workspace_bytes\": \"big\"",
               "t.json: layers[2].workspace_bytes: expected a number (got \"big\")");
    expect_bad("\"input_bytes\": 2048", "\"input_bytes\": -1",
               "t.json: input_bytes: expected a number >= 0 (got -1)");
}

Test(profile_bad, non_finite)
{
    expect_bad("\"parameter_bytes\": 256", "\"parameter_bytes\": 1e999",
               "t.json: layers[0].parameter_bytes: expected a finite number (got inf)");
    /* the in-memory validator sees NaN, which JSON cannot carry */
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p);
    p->layers[3].flops = NAN;
    cr_assert_eq(profile_validate(p, "mem", &err), -1);
    cr_assert_str_eq(err.msg, "mem: layers[3].flops: expected a finite number (got nan)");
    profile_free(p);
}

Test(profile_bad, empty_strings_and_layers)
{
    expect_bad("\"name\": \"tiny\"", "\"name\": \"\"", "t.json: name: expected a non-empty string");
    expect_bad("\"name\": \"b\"", "\"name\": \"\"",
               "t.json: layers[2].name: expected a non-empty string (got \"\")");
    const char *t = "{\"format\": \"plumb-profile/1\", \"name\": \"c\", \"device\": \"cpu\", "
                    "\"minibatch\": 1, \"layers\": []}";
    plumb_err err;
    cr_assert_null(parse(t, &err));
    cr_assert_str_eq(err.msg, "t.json: layers: expected at least one layer (got [])");
}

Test(profile_bad, unknown_field)
{
    expect_bad("\"flops\": 1e9", "\"flop\": 1e9",
               "t.json: layers[1].flop: unknown field; expected one of name, kind, desc, "
               "forward_ms, backward_ms, backward_input_ms, backward_weight_ms, "
               "activation_bytes, parameter_bytes, flops, saved_bytes, split_saved_bytes, "
               "grad_buffer_bytes, workspace_bytes, stage_id, tp_collective_bytes, "
               "tp_forward_collectives, tp_backward_collectives, cp_ring_bytes, cp_attention_fwd_ms, "
               "cp_attention_bwd_ms, selective_recompute_ms, "
               "selective_saved_bytes, tied");
}

/* "tied": another layer's index and at most both layers' parameter bytes; bad ones get
 * one line naming the member. */
Test(profile_bad, tied)
{
    const char *from = "\"workspace_bytes\": 4096";
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": 1",
               "t.json: layers[2].tied: expected an object {\"layer\": L, \"bytes\": B} (got 1)");
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 1}",
               "t.json: layers[2].tied.bytes: missing required field");
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 9, \"bytes\": 8}",
               "t.json: layers[2].tied.layer: expected an integer from 0 to 3 (got 9)");
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 2, \"bytes\": 8}",
               "t.json: layers[2].tied.layer: expected the index of another layer, 0 to 3 "
               "(got 2)");
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 1, \"bytes\": 300}",
               "t.json: layers[2].tied.bytes: expected at most the parameter bytes of layers 2 "
               "and 1, 256 (got 300)");
    expect_bad(from, "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 1, \"bytes\": 8, "
               "\"x\": 1}", "t.json: layers[2].tied.x: unknown field; expected one of layer, "
               "bytes");
}

Test(profile_bad, repeated_field)
{
    expect_bad("\"minibatch\": 32", "\"minibatch\": 32, \"minibatch\": 64",
               "t.json: minibatch: expected each field once (got it twice)");
    expect_bad("\"flops\": 1e9", "\"flops\": 1e9, \"flops\": 2e9",
               "t.json: layers[1].flops: expected each field once (got it twice)");
}

Test(profile_bad, split_backward)
{
    expect_bad("\"backward_input_ms\": 1.0, ", "",
               "t.json: layers[1].backward_input_ms: missing; expected backward_input_ms and "
               "backward_weight_ms together (both or neither)");
    expect_bad("\"backward_weight_ms\": 2.0", "\"backward_weight_ms\": 2.5",
               "t.json: layers[1].backward_weight_ms: expected backward_input_ms + "
               "backward_weight_ms = backward_ms = 3 (got 1 + 2.5 = 3.5)");
}

Test(profile_bad, duplicate_names)
{
    expect_bad("\"name\": \"b\"", "\"name\": \"a\"",
               "t.json: layers[2].name: expected a unique layer name (got \"a\", already used "
               "by layers[1])");
}

Test(profile_bad, edge_out_of_range)
{
    expect_bad("[2, 3]", "[2, 4]",
               "t.json: edges[3][1]: expected an integer from 0 to 3 (got 4)");
    expect_bad("[0, 1]", "[-1, 1]",
               "t.json: edges[0][0]: expected an integer from 0 to 3 (got -1)");
}

Test(profile_bad, self_loop)
{
    expect_bad("[1, 3]", "[1, 1]",
               "t.json: edges[2]: expected an edge between two different layers (got a self "
               "loop on layer 1 \"a\")");
}

Test(profile_bad, duplicate_edge)
{
    expect_bad("[2, 3]", "[0, 2]",
               "t.json: edges[3]: expected each edge once (got [0, 2] again, first at edges[1])");
}

Test(profile_bad, cycle_names_its_layers)
{
    /* a -> out -> b -> a closes a cycle through three layers */
    expect_bad("[2, 3]]", "[3, 2], [2, 1]]",
               "t.json: edges: expected an acyclic graph (got the cycle \"a\" -> \"out\" -> "
               "\"b\" -> \"a\")");
}

Test(profile_bad, order_not_topological)
{
    expect_bad("[2, 3]]", "[2, 3], [2, 1]]",
               "t.json: edges[4]: expected layers in topological order, each after its inputs "
               "(got layer 2 \"b\" feeding the earlier layer 1 \"a\")");
}

Test(profile_bad, in_memory_invariants)
{
    plumb_err err;
    profile *p = profile_alloc(2, 1);
    cr_assert_not_null(p);
    cr_assert_eq(profile_validate(p, "mem", &err), -1);
    cr_assert_str_eq(err.msg, "mem: name: expected a non-empty string");
    p->name = strdup("m");
    p->device = strdup("d");
    p->minibatch = 4;
    p->layers[0].name = strdup("x");
    p->layers[0].kind = strdup("K");
    p->layers[1].name = strdup("y");
    cr_assert_eq(profile_validate(p, "mem", &err), -1);
    cr_assert_str_eq(err.msg, "mem: layers[1].kind: expected a non-empty string");
    p->layers[1].kind = strdup("K");
    p->edges[0] = (profile_edge){0, 2};
    cr_assert_eq(profile_validate(p, "mem", &err), -1);
    cr_assert_str_eq(err.msg, "mem: edges[0]: expected layer indices from 0 to 1 (got [0, 2])");
    p->edges[0] = (profile_edge){0, 1};
    cr_assert_eq(profile_validate(p, "mem", &err), 0, "%s", err.msg);
    cr_assert_eq(profile_is_chain(p), 1);
    profile_free(p);
}

Test(profile_bad, long_cycle_message_stays_one_bounded_line)
{
    /* 200 layers in one cycle: the message is truncated, never overflows */
    int n = 200;
    profile *p = profile_alloc(n, n);
    p->name = strdup("m");
    p->device = strdup("d");
    p->minibatch = 1;
    for (int i = 0; i < n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "a_rather_long_layer_name_%d", i);
        p->layers[i].name = strdup(nm);
        p->layers[i].kind = strdup("K");
        p->edges[i] = (profile_edge){i, (i + 1) % n};
    }
    plumb_err err;
    cr_assert_eq(profile_validate(p, "mem", &err), -1);
    cr_assert(strstr(err.msg, "expected an acyclic graph (got the cycle \"a_rather_long_layer_name_0\""),
              "%s", err.msg);
    cr_assert(strstr(err.msg, "(200 layers in the cycle)"), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'));
    profile_free(p);
}

/* Finite values beyond core/bounds.h (a 1e308-byte layer once printed "inf TiB" and made
 * the simulator's memory infinite) get one line naming the field and the range. */
Test(profile_bad, out_of_physical_bounds)
{
    expect_bad("\"parameter_bytes\": 256", "\"parameter_bytes\": 1e308",
               "t.json: layers[0].parameter_bytes: expected a number from 0 to 1e+15 (got 1e+308)");
    expect_bad("\"activation_bytes\": 1024", "\"activation_bytes\": 2e15",
               "t.json: layers[0].activation_bytes: expected a number from 0 to 1e+15 (got 2e+15)");
    expect_bad("\"forward_ms\": 1.5", "\"forward_ms\": 1e300",
               "t.json: layers[0].forward_ms: expected a number from 0 to 1e+09 (got 1e+300)");
    expect_bad("\"flops\": 1e9", "\"flops\": 1e22",
               "t.json: layers[1].flops: expected a number from 0 to 1e+21 (got 1e+22)");
    expect_bad("\"workspace_bytes\": 4096", "\"workspace_bytes\": 1e16",
               "t.json: layers[2].workspace_bytes: expected a number from 0 to 1e+15 (got 1e+16)");
    expect_bad("\"input_bytes\": 2048", "\"input_bytes\": 1e200",
               "t.json: input_bytes: expected a number from 0 to 1e+15 (got 1e+200)");
}

/* The tensor-parallel and selective-recompute fields round-trip and are checked. */
/* A tied layer loads, round-trips through JSON and the clone, and counts in equality. */
Test(profile, tied_parameters)
{
    const char *from = "\"workspace_bytes\": 4096";
    const char *at = strstr(GOOD, from);
    char text[4096];
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD), GOOD,
             "\"workspace_bytes\": 4096, \"tied\": {\"layer\": 1, \"bytes\": 200}",
             at + strlen(from));
    plumb_err err;
    profile *p = parse(text, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(p->layers[2].tied_layer, 1);
    cr_assert_float_eq(p->layers[2].tied_bytes, 200, 0);
    cr_assert_eq(p->layers[1].tied_layer, -1);
    cr_assert_float_eq(p->layers[1].tied_bytes, 0, 0);
    cJSON *j = profile_to_json(p);
    profile *q = profile_from_json(j, "m", &err), *c = profile_clone(p);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    cr_assert(profile_equal(p, c));
    c->layers[2].tied_layer = 0;
    cr_assert_not(profile_equal(p, c));
    c->layers[2].tied_layer = 1;
    c->layers[2].tied_bytes = 100;
    cr_assert_not(profile_equal(p, c));
    profile_free(c);
    profile_free(q);
    cJSON_Delete(j);
    profile *g = parse(GOOD, &err); /* without the field: nothing tied, nothing written */
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_not(profile_equal(p, g));
    j = profile_to_json(g);
    char *txt = cJSON_PrintUnformatted(j);
    cr_assert(txt && strstr(txt, "tied") == NULL);
    free(txt);
    cJSON_Delete(j);
    profile_free(g);
    profile_free(p);
}

Test(profile, tensor_parallel_fields)
{
    profile *p = profile_alloc(2, 0);
    cr_assert_eq(p->tp, 1);
    cr_assert_lt(p->layers[0].selective_recompute_ms, 0);
    p->name = strdup("m");
    p->device = strdup("A100");
    p->source = strdup("");
    p->minibatch = 1;
    for (int i = 0; i < 2; i++) {
        p->layers[i].name = strdup(i ? "b" : "a");
        p->layers[i].kind = strdup("TransformerBlock");
        p->layers[i].desc = strdup("");
        p->layers[i].forward_ms = 1;
        p->layers[i].backward_ms = 2;
        p->layers[i].saved_bytes = 100;
    }
    p->tp = 4;
    p->sequence_parallel = 1;
    p->tokens_per_sample = 2048;
    p->layers[1].tp_collective_bytes = 5e6;
    p->layers[1].tp_forward_collectives = 2;
    p->layers[1].tp_backward_collectives = 2;
    p->layers[1].selective_recompute_ms = 0.25;
    p->layers[1].selective_saved_bytes = 40;
    plumb_err err;
    cr_assert_eq(profile_validate(p, "m", &err), 0, "%s", err.msg);
    cJSON *j = profile_to_json(p);
    profile *q = profile_from_json(j, "m", &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    profile_free(q);
    cJSON_Delete(j);
    p->layers[1].selective_saved_bytes = 200; /* more than it keeps without recomputation */
    cr_assert_neq(profile_validate(p, "m", &err), 0);
    cr_assert(strstr(err.msg, "layers[1].selective_saved_bytes: expected at most") != NULL,
              "%s", err.msg);
    p->layers[1].selective_saved_bytes = -1; /* one of the pair alone */
    cr_assert_neq(profile_validate(p, "m", &err), 0);
    cr_assert(strstr(err.msg, "selective_saved_bytes: missing") != NULL, "%s", err.msg);
    p->layers[1].selective_saved_bytes = 40;
    p->tp = 1; /* collectives without a tensor-parallel group, and sequence parallelism */
    cr_assert_neq(profile_validate(p, "m", &err), 0);
    cr_assert(strstr(err.msg, "sequence_parallel") != NULL, "%s", err.msg);
    p->sequence_parallel = 0;
    cr_assert_neq(profile_validate(p, "m", &err), 0);
    cr_assert(strstr(err.msg, "layers[1].tp_forward_collectives") != NULL, "%s", err.msg);
    profile_free(p);
}

/* A transformer's analytic profile is an Embedding, TransformerBlocks and an LMHead, the
 * shape the dashboard (which refuses to re-plan such a file with the native planner) and
 * the executor (which maps its blocks onto a model's layers) both read. */
Test(profile, transformer_shape_is_embedding_blocks_head)
{
    static const char *kinds[][4] = {
        {"Embedding", "TransformerBlock", "TransformerBlock", "LMHead"}, /* yes */
        {"Embedding", "TransformerBlock", "Linear", "LMHead"},           /* a foreign layer */
        {"Embedding", "TransformerBlock", "TransformerBlock", "Linear"},  /* no head */
    };
    for (int k = 0; k < 3; k++) {
        char t[1024];
        int n = snprintf(t, sizeof t, "{\"format\": \"plumb-profile/1\", \"name\": \"t\", "
                         "\"device\": \"cpu\", \"minibatch\": 1, \"layers\": [");
        for (int i = 0; i < 4; i++)
            n += snprintf(t + n, sizeof t - (size_t)n, "%s{\"name\": \"l%d\", \"kind\": \"%s\", "
                          "\"forward_ms\": 1, \"backward_ms\": 2, \"activation_bytes\": 4, "
                          "\"parameter_bytes\": 8}", i ? ", " : "", i, kinds[k][i]);
        snprintf(t + n, sizeof t - (size_t)n, "]}");
        plumb_err err;
        profile *p = parse(t, &err);
        cr_assert_not_null(p, "%s", err.msg);
        cr_expect_eq(profile_is_transformer(p), k == 0, "case %d", k);
        profile_free(p);
    }
    cr_expect_eq(profile_is_transformer(NULL), 0);
}

/* The precision and the loss an analytic profile was made with ("precision",
 * "cross_entropy"): read, kept by clone and equal, written back only where the profile
 * says them, so that a profile without them (measured, PipeDream's) writes as before. */
Test(profile, precision_and_loss_round_trip)
{
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_expect_eq(p->precision, -1, "absent: not said");
    cr_expect_eq(p->cross_entropy, 0, "absent: not said (unfused)");
    cJSON *j = profile_to_json(p);
    cr_assert_not_null(j);
    cr_expect_null(cJSON_GetObjectItem(j, "precision"), "absent stays absent");
    cr_expect_null(cJSON_GetObjectItem(j, "cross_entropy"), "absent stays absent");
    cJSON_Delete(j);
    const char *at = strstr(GOOD, "\"minibatch\"");
    char text[4096];
    snprintf(text, sizeof text, "%.*s\"precision\": \"fp8\", \"cross_entropy\": \"te\", %s",
             (int)(at - GOOD), GOOD, at);
    profile *q = parse(text, &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_expect_eq(q->precision, DEV_FP8);
    cr_expect_eq(q->cross_entropy, 1);
    cr_expect_not(profile_equal(p, q), "the precision and loss are compared");
    j = profile_to_json(q);
    cr_assert_not_null(j);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "precision")), "fp8");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "cross_entropy")), "te");
    profile *r = profile_from_json(j, "mem", &err);
    cJSON_Delete(j);
    cr_assert_not_null(r, "%s", err.msg);
    cr_expect(profile_equal(q, r));
    profile *c = profile_clone(q);
    cr_assert_not_null(c);
    cr_expect(profile_equal(q, c));
    c->precision = DEV_BF16;
    cr_expect_not(profile_equal(q, c));
    c->precision = DEV_FP8;
    c->cross_entropy = 2;
    cr_expect_not(profile_equal(q, c));
    /* "unfused" read is the default, not written back */
    r->cross_entropy = 0;
    j = profile_to_json(r);
    cr_expect_null(cJSON_GetObjectItem(j, "cross_entropy"));
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "precision")), "fp8");
    cJSON_Delete(j);
    profile_free(p);
    profile_free(q);
    profile_free(r);
    profile_free(c);
}

/* "grad_accum" (how the backward times price the weight gradients' accumulation): absent
 * reads as fused and stays absent; "unfused" read, compared, cloned and written back;
 * "fused" read is the default, not written; anything else refused in one line. */
Test(profile, grad_accum_round_trip)
{
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_expect_eq(p->grad_accum, 0, "absent: fused");
    const char *at = strstr(GOOD, "\"minibatch\"");
    char text[4096];
    snprintf(text, sizeof text, "%.*s\"grad_accum\": \"unfused\", %s", (int)(at - GOOD), GOOD, at);
    profile *q = parse(text, &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_expect_eq(q->grad_accum, 1);
    cr_expect_not(profile_equal(p, q), "the accumulation is compared");
    profile *c = profile_clone(q);
    cr_assert_not_null(c);
    cr_expect(profile_equal(q, c));
    cJSON *j = profile_to_json(q);
    cr_assert_not_null(j);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(j, "grad_accum")), "unfused");
    profile *r = profile_from_json(j, "mem", &err);
    cJSON_Delete(j);
    cr_assert_not_null(r, "%s", err.msg);
    cr_expect(profile_equal(q, r));
    snprintf(text, sizeof text, "%.*s\"grad_accum\": \"fused\", %s", (int)(at - GOOD), GOOD, at);
    profile *f = parse(text, &err);
    cr_assert_not_null(f, "%s", err.msg);
    cr_expect(profile_equal(p, f));
    j = profile_to_json(f);
    cr_expect_null(cJSON_GetObjectItem(j, "grad_accum"), "fused is not written");
    cJSON_Delete(j);
    expect_bad("\"minibatch\"", "\"grad_accum\": \"foo\", \"minibatch\"",
               "t.json: grad_accum: expected fused or unfused (got \"foo\")");
    c->grad_accum = 2;
    cr_expect_eq(profile_validate(c, "m", &err), -1);
    cr_expect_str_eq(err.msg, "m: grad_accum: expected fused or unfused (got 2)");
    profile_free(p);
    profile_free(q);
    profile_free(r);
    profile_free(f);
    profile_free(c);
}

Test(profile_bad, precision_and_loss)
{
    expect_bad("\"minibatch\"", "\"precision\": \"fp4\", \"minibatch\"",
               "t.json: precision: expected one of fp32, tf32, bf16, fp16, fp8 (got \"fp4\")");
    expect_bad("\"minibatch\"", "\"precision\": 16, \"minibatch\"",
               "t.json: precision: expected one of fp32, tf32, bf16, fp16, fp8 (got 16)");
    expect_bad("\"minibatch\"", "\"cross_entropy\": \"fused\", \"minibatch\"",
               "t.json: cross_entropy: expected unfused, te or native (got \"fused\")");
    plumb_err err;
    profile *p = parse(GOOD, &err);
    cr_assert_not_null(p, "%s", err.msg);
    p->precision = DEV_NPREC;
    cr_expect_eq(profile_validate(p, "m", &err), -1);
    cr_expect_str_eq(err.msg, "m: precision: expected fp32, tf32, bf16, fp16 or fp8 (got 5)");
    p->precision = -1;
    p->cross_entropy = 3;
    cr_expect_eq(profile_validate(p, "m", &err), -1);
    cr_expect_str_eq(err.msg, "m: cross_entropy: expected unfused, te or native (got 3)");
    profile_free(p);
}
