/* test_plan.c: plumb-plan/1: schedule and optimizer names, plans built with plan_new over a
 * small in-memory profile round-trip through files (embedded and by relative path), and each
 * class of bad input is rejected with the exact field path, leaving no file on a failed save;
 * a transformer's layout names its model ("model": the plumb-transformer/1 description of any
 * family and the layout options), written, read and written again byte for byte, and each
 * bad or inconsistent "model" is one line naming the file and the field. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/schedule_traits.h"
#include "planner/layout3d.h"

/* ---- fixtures ------------------------------------------------------------------------ */

/* A chain of n layers "l0".."l{n-1}" profiled at minibatch 32. */
static profile *small_profile(int n)
{
    profile *p = profile_alloc(n, 0);
    cr_assert_not_null(p);
    p->name = strdup("tiny");
    p->device = strdup("V100");
    p->source = strdup("test");
    p->minibatch = 32;
    for (int i = 0; i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "l%d", i);
        p->layers[i].name = strdup(nm);
        p->layers[i].kind = strdup("Linear");
        p->layers[i].desc = strdup("");
        p->layers[i].forward_ms = 1.25 + i;
        p->layers[i].backward_ms = 2.5 + 2 * i;
        p->layers[i].activation_bytes = 4096.0 * (i + 1);
        p->layers[i].parameter_bytes = 1e6 / 3 * (i + 1);
    }
    plumb_err err;
    cr_assert_eq(profile_validate(p, "tiny", &err), 0, "%s", err.msg);
    return p;
}

/* 2 servers of 4 devices. */
static cluster *small_cluster(void)
{
    const char *t = "{\"format\":\"plumb-cluster/1\",\"name\":\"c\",\"levels\":["
                    "{\"name\":\"nvlink\",\"count\":4,\"bandwidth_gbit_per_s\":200,\"latency_us\":3},"
                    "{\"name\":\"eth\",\"count\":2,\"bandwidth_gbit_per_s\":25,\"latency_us\":50}],"
                    "\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,\"speed\":1}],"
                    "\"device_type\":\"V100\"}";
    plumb_err err;
    cJSON *root = json_parse_text("c.json", t, strlen(t), &err);
    cr_assert_not_null(root, "%s", err.msg);
    cluster *c = cluster_from_json(root, "c.json", &err);
    cr_assert_not_null(c, "%s", err.msg);
    cJSON_Delete(root);
    return c;
}

/* 6 layers on 8 devices: [0,1] x2 on {0,1}, [2,3] x1 on {2}, [4,5] x1 on {3}. */
static plan *good_plan(void)
{
    profile *p = small_profile(6);
    cluster *c = small_cluster();
    plan *pl = plan_new(p, c, 3);
    cr_assert_not_null(pl);
    profile_free(p);
    cluster_free(c);
    int d0[] = {0, 1}, d1[] = {2}, d2[] = {3};
    cr_assert_eq(plan_set_stage(pl, 0, 0, 1, 2, d0), 0);
    cr_assert_eq(plan_set_stage(pl, 1, 2, 3, 1, d1), 0);
    cr_assert_eq(plan_set_stage(pl, 2, 4, 5, 1, d2), 0);
    return pl;
}

static char *make_tmpdir(void) { return make_tmpdir_named("plan"); }

static void round_trip(const plan *pl)
{
    char *tmp = make_tmpdir();
    char path[512];
    plumb_err err;
    snprintf(path, sizeof path, "%s/plan.json", tmp);
    cr_assert_eq(plan_save(pl, path, &err), 0, "%s", err.msg);
    plan *b = plan_load(path, &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert(plan_equal(pl, b), "reloaded plan differs");
    cr_assert_null(b->profile_ref);
    cr_assert_null(b->cluster_ref);
    plan *k = plan_clone(b);
    cr_assert(plan_equal(k, pl));
    plan_free(k);
    plan_free(b);
    rm_tree(tmp);
}

/* ---- names --------------------------------------------------------------------------- */

Test(plan, schedule_and_optimizer_names)
{
    const char *want[] = {"gpipe", "1f1b-flush", "pipedream", "2bw", "interleaved", "zb-h1",
                          "zb-v", "dualpipev"};
    cr_assert_eq(SCHED_NKINDS, (int)(sizeof want / sizeof want[0]));
    for (int k = 0; k < SCHED_NKINDS; k++) {
        cr_assert_str_eq(sched_kind_name((sched_kind)k), want[k]);
        cr_assert_eq(sched_kind_parse(want[k]), k);
        cr_assert_eq(sched_kind_is_async((sched_kind)k), k == SCHED_PIPEDREAM || k == SCHED_2BW);
    }
    cr_assert_eq(sched_kind_parse("1F1B"), -1);
    cr_assert_eq(sched_kind_parse(""), -1);
    cr_assert_str_eq(sched_kind_name(SCHED_NKINDS), "unknown");
    const char *opt[] = {"sgd", "momentum", "adam"};
    for (int k = 0; k < OPT_NKINDS; k++) {
        cr_assert_str_eq(optimizer_kind_name((optimizer_kind)k), opt[k]);
        cr_assert_eq(optimizer_kind_parse(opt[k]), k);
    }
    cr_assert_eq(optimizer_kind_parse("lamb"), -1);
}

/* ---- building and round trips -------------------------------------------------------- */

Test(plan, plan_new_defaults)
{
    plan *pl = good_plan();
    cr_assert_eq(pl->schedule, SCHED_1F1B_FLUSH);
    cr_assert_eq(pl->chunks, 1);
    cr_assert_eq(pl->microbatch_size, 32);
    cr_assert_eq(pl->microbatches, 1);
    cr_assert_eq(plan_minibatch(pl), 32);
    cr_assert_lt(pl->pred_iteration_s, 0);
    cr_assert_lt(pl->stages[0].compute_s, 0);
    cr_assert_null(pl->pred_peak_memory_bytes);
    plumb_err err;
    cr_assert_eq(plan_validate(pl, "p", &err), 0, "%s", err.msg);
    cr_assert_eq(plan_set_stage(pl, 3, 0, 0, 1, (int[]){0}), -1);
    cr_assert_eq(plan_set_stage(pl, 0, 2, 1, 1, (int[]){0}), -1);
    cr_assert_eq(plan_set_stage(pl, 0, 0, 1, 0, (int[]){0}), -1);
    pl->microbatches = 4;
    cr_assert_eq(plan_minibatch(pl), 128);
    plan_free(pl);
}

Test(plan, round_trip_every_schedule)
{
    for (int k = 0; k < SCHED_NKINDS; k++) {
        plan *pl = good_plan();
        pl->schedule = (sched_kind)k;
        pl->microbatch_size = 8;
        pl->microbatches = 4 + k;
        pl->recompute = k % 2;
        pl->optimizer = (optimizer_kind)(k % OPT_NKINDS);
        if (sched_kind_chunked((sched_kind)k)) {
            /* 6 stages of one layer, 2 per device on devices 4..6 */
            plan_free(pl);
            profile *p = small_profile(6);
            cluster *c = small_cluster();
            pl = plan_new(p, c, 6);
            profile_free(p);
            cluster_free(c);
            pl->schedule = (sched_kind)k;
            pl->chunks = 2;
            int dev[] = {4, 5, 6, 6, 5, 4}; /* V placement */
            for (int s = 0; s < 6; s++) cr_assert_eq(plan_set_stage(pl, s, s, s, 1, &dev[s]), 0);
        }
        plumb_err err;
        cr_assert_eq(plan_validate(pl, "p", &err), 0, "%s: %s", sched_kind_name(k), err.msg);
        round_trip(pl);
        plan_free(pl);
    }
}

Test(plan, round_trip_with_predictions)
{
    plan *pl = good_plan();
    pl->pred_iteration_s = 0.1234567890123;
    pl->pred_samples_per_s = 259.2;
    pl->pred_speedup_vs_dp = 1.0 / 3;
    pl->pred_speedup_vs_1 = 2.9;
    pl->pred_peak_memory_bytes = calloc(8, sizeof(double));
    for (int d = 0; d < 8; d++) pl->pred_peak_memory_bytes[d] = d < 4 ? 1e9 / 7 * (d + 1) : 0;
    pl->stages[0].compute_s = 0.01 / 3;
    pl->stages[2].comm_s = 0;
    pl->planner_config = strdup("2-1-1");
    round_trip(pl);
    /* equality sees the predictions */
    plan *b = plan_clone(pl);
    b->pred_peak_memory_bytes[3] += 1;
    cr_assert_not(plan_equal(pl, b));
    plan_free(b);
    b = plan_clone(pl);
    b->stages[1].devices[0] = 7;
    cr_assert_not(plan_equal(pl, b));
    plan_free(b);
    plan_free(pl);
}

/* A plan file that names its profile and cluster by paths relative to its own folder. */
Test(plan, profile_and_cluster_by_relative_path)
{
    plan *pl = good_plan();
    char *tmp = make_tmpdir();
    char path[512];
    plumb_err err;
    snprintf(path, sizeof path, "%s/prof.json", tmp);
    cr_assert_eq(profile_save(pl->prof, path, &err), 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/clus.json", tmp);
    cr_assert_eq(cluster_save(pl->clus, path, &err), 0, "%s", err.msg);
    cJSON *j = plan_to_json(pl);
    cJSON_ReplaceItemInObject(j, "profile", cJSON_CreateString("prof.json"));
    cJSON_ReplaceItemInObject(j, "cluster", cJSON_CreateString("clus.json"));
    snprintf(path, sizeof path, "%s/plan.json", tmp);
    cr_assert_eq(json_save_file(path, j, &err), 0, "%s", err.msg);
    cJSON_Delete(j);
    plan *b = plan_load(path, &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert_str_eq(b->profile_ref, "prof.json");
    cr_assert_str_eq(b->cluster_ref, "clus.json");
    cr_assert(plan_equal(pl, b));
    /* saving embeds both */
    snprintf(path, sizeof path, "%s/plan2.json", tmp);
    cr_assert_eq(plan_save(b, path, &err), 0, "%s", err.msg);
    cJSON *j2 = json_load_file(path, &err);
    cr_assert(cJSON_IsObject(cJSON_GetObjectItem(j2, "profile")));
    cr_assert(cJSON_IsObject(cJSON_GetObjectItem(j2, "cluster")));
    cJSON_Delete(j2);
    /* a missing referenced file: the line names the plan, its field, the path as written
     * and as resolved against the plan's folder */
    unlink(path);
    snprintf(path, sizeof path, "%s/clus.json", tmp);
    unlink(path);
    snprintf(path, sizeof path, "%s/plan.json", tmp);
    cr_assert_null(plan_load(path, &err));
    char want[1024];
    snprintf(want, sizeof want, "%s/plan.json: cluster: expected the path of a cluster file, "
             "relative to the plan's folder, or the embedded cluster object (got \"clus.json\": "
             "%s/clus.json: No such file or directory)", tmp, tmp);
    cr_assert_str_eq(err.msg, want);
    plan_free(b);
    plan_free(pl);
    rm_tree(tmp);
}

Test(plan, layers_by_name)
{
    plan *pl = good_plan();
    cJSON *j = plan_to_json(pl);
    cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "stages"), 1);
    cJSON_ReplaceItemInObject(st, "first_layer", cJSON_CreateString("l2"));
    cJSON_ReplaceItemInObject(st, "last_layer", cJSON_CreateString("l3"));
    plumb_err err;
    plan *b = plan_from_json(j, "p.json", &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert(plan_equal(pl, b));
    plan_free(b);
    cJSON_Delete(j);
    plan_free(pl);
}

/* ---- bad input: mutate a good plan's JSON and expect the exact path ------------------- */

typedef void (*mutator)(cJSON *root);

static void expect_bad(mutator m, const char *path, const char *word)
{
    plan *pl = good_plan();
    cJSON *j = plan_to_json(pl);
    plan_free(pl);
    cr_assert_not_null(j);
    m(j);
    plumb_err err;
    err_clear(&err);
    plan *b = plan_from_json(j, "p.json", &err);
    cJSON_Delete(j);
    cr_assert_null(b, "accepted bad input, wanted error at %s", path);
    char want[256];
    snprintf(want, sizeof want, "p.json: %s: ", path);
    cr_assert(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
    if (word) cr_assert(strstr(err.msg, word) != NULL, "message \"%s\" lacks \"%s\"", err.msg, word);
}

static cJSON *stage(cJSON *r, int s) { return cJSON_GetArrayItem(cJSON_GetObjectItem(r, "stages"), s); }
static void set(cJSON *o, const char *k, cJSON *v)
{
    if (cJSON_GetObjectItem(o, k)) cJSON_ReplaceItemInObject(o, k, v);
    else cJSON_AddItemToObject(o, k, v);
}

static void m_format(cJSON *r) { set(r, "format", cJSON_CreateString("plumb-plan/2")); }
static void m_type_mb(cJSON *r) { set(r, "microbatches", cJSON_CreateString("4")); }
static void m_type_recompute(cJSON *r) { set(r, "recompute", cJSON_CreateNumber(1)); }
static void m_type_devices(cJSON *r) { set(stage(r, 0), "devices", cJSON_CreateNumber(0)); }
static void m_type_profile(cJSON *r) { set(r, "profile", cJSON_CreateNumber(3)); }
static void m_miss_sched(cJSON *r) { cJSON_DeleteItemFromObject(r, "schedule"); }
static void m_miss_replicas(cJSON *r) { cJSON_DeleteItemFromObject(stage(r, 2), "replicas"); }
static void m_miss_cluster(cJSON *r) { cJSON_DeleteItemFromObject(r, "cluster"); }
static void m_neg_mbs(cJSON *r) { set(r, "microbatch_size", cJSON_CreateNumber(-8)); }
static void m_neg_compute(cJSON *r) { set(stage(r, 1), "compute_s", cJSON_CreateNumber(-1)); }
static void m_zero_mb(cJSON *r) { set(r, "microbatches", cJSON_CreateNumber(0)); }
static void m_zero_replicas(cJSON *r) { set(stage(r, 1), "replicas", cJSON_CreateNumber(0)); }
static void m_inf_iter(cJSON *r)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddItemToObject(p, "iteration_s", cJSON_CreateNumber(INFINITY));
    set(r, "predicted", p);
}
static void m_inf_mbs(cJSON *r) { set(r, "microbatch_size", cJSON_CreateNumber(INFINITY)); }
static void m_big_mbs(cJSON *r) { set(r, "microbatch_size", cJSON_CreateNumber(4294967296.0)); }
static void m_product(cJSON *r)
{
    set(r, "microbatch_size", cJSON_CreateNumber(65536));
    set(r, "microbatches", cJSON_CreateNumber(65536));
}
static void m_sched_unknown(cJSON *r) { set(r, "schedule", cJSON_CreateString("1f1b")); }
static void m_opt_unknown(cJSON *r) { set(r, "optimizer", cJSON_CreateString("lamb")); }
static void m_layer_range(cJSON *r) { set(stage(r, 2), "last_layer", cJSON_CreateNumber(6)); }
static void m_layer_name(cJSON *r) { set(stage(r, 1), "first_layer", cJSON_CreateString("conv9")); }
static void m_device_range(cJSON *r)
{
    set(stage(r, 0), "devices", cJSON_CreateIntArray((int[]){0, 8}, 2));
}
static void m_device_neg(cJSON *r) { set(stage(r, 2), "devices", cJSON_CreateIntArray((int[]){-1}, 1)); }
static void m_device_shared(cJSON *r) { set(stage(r, 2), "devices", cJSON_CreateIntArray((int[]){1}, 1)); }
static void m_device_dup(cJSON *r) { set(stage(r, 0), "devices", cJSON_CreateIntArray((int[]){1, 1}, 2)); }
static void m_replica_count(cJSON *r) { set(stage(r, 1), "replicas", cJSON_CreateNumber(2)); }
static void m_overlap(cJSON *r) { set(stage(r, 1), "first_layer", cJSON_CreateNumber(1)); }
static void m_gap(cJSON *r) { set(stage(r, 2), "first_layer", cJSON_CreateNumber(5)); }
static void m_not_first(cJSON *r) { set(stage(r, 0), "first_layer", cJSON_CreateNumber(1)); }
static void m_short(cJSON *r) { set(stage(r, 2), "last_layer", cJSON_CreateNumber(4)); }
static void m_backwards(cJSON *r) { set(stage(r, 1), "last_layer", cJSON_CreateNumber(1)); }
static void m_no_stages(cJSON *r) { set(r, "stages", cJSON_CreateArray()); }
static void m_chunks_sync(cJSON *r) { set(r, "chunks", cJSON_CreateNumber(2)); }
static void m_zbv_chunks(cJSON *r) { set(r, "schedule", cJSON_CreateString("zb-v")); }
static void m_interleaved_uneven(cJSON *r)
{
    set(r, "schedule", cJSON_CreateString("interleaved"));
    set(r, "chunks", cJSON_CreateNumber(2));
}
static void m_peak_len(cJSON *r)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddItemToObject(p, "peak_memory_bytes", cJSON_CreateDoubleArray((double[]){1, 2}, 2));
    set(r, "predicted", p);
}
static void m_peak_neg(cJSON *r)
{
    double v[8] = {1, 2, 3, -4, 5, 6, 7, 8};
    cJSON *p = cJSON_CreateObject();
    cJSON_AddItemToObject(p, "peak_memory_bytes", cJSON_CreateDoubleArray(v, 8));
    set(r, "predicted", p);
}
static void m_unknown_key(cJSON *r) { set(stage(r, 0), "replica", cJSON_CreateNumber(2)); }
static void m_embedded_profile(cJSON *r)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "profile"), "layers"), 3);
    set(l, "forward_ms", cJSON_CreateNumber(-2));
}
static void m_embedded_cluster(cJSON *r)
{
    cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "cluster"), "levels"), 1);
    set(l, "count", cJSON_CreateNumber(0));
}
static void m_embedded_format(cJSON *r)
{
    set(cJSON_GetObjectItem(r, "cluster"), "format", cJSON_CreateString("plumb-cluster/9"));
}

Test(plan_bad, malformed_json)
{
    plumb_err err;
    const char *t = "{\"format\":\"plumb-plan/1\",\"stages\":[1,2,}";
    cr_assert_null(json_parse_text("p.json", t, strlen(t), &err));
    cr_assert(strstr(err.msg, "p.json: malformed JSON at line 1") != NULL, "%s", err.msg);
    char *tmp = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/p.json", tmp);
    FILE *f = fopen(path, "w");
    fputs(t, f);
    fclose(f);
    cr_assert_null(plan_load(path, &err));
    cr_assert(strstr(err.msg, "malformed JSON") != NULL, "%s", err.msg);
    rm_tree(tmp);
}

Test(plan_bad, unknown_format_version) { expect_bad(m_format, "format", "plumb-plan/1"); }

Test(plan_bad, wrong_type)
{
    expect_bad(m_type_mb, "microbatches", "integer");
    expect_bad(m_type_recompute, "recompute", "true or false");
    expect_bad(m_type_devices, "stages[0].devices", "array");
    expect_bad(m_type_profile, "profile", "object or a file path");
}

Test(plan_bad, missing_field)
{
    expect_bad(m_miss_sched, "schedule", "missing");
    expect_bad(m_miss_replicas, "stages[2].replicas", "missing");
    expect_bad(m_miss_cluster, "cluster", "missing");
}

Test(plan_bad, negative)
{
    expect_bad(m_neg_mbs, "microbatch_size", NULL);
    expect_bad(m_neg_compute, "stages[1].compute_s", ">= 0");
    expect_bad(m_peak_neg, "predicted.peak_memory_bytes[3]", ">= 0");
}

Test(plan_bad, zero_where_impossible)
{
    expect_bad(m_zero_mb, "microbatches", NULL);
    expect_bad(m_zero_replicas, "stages[1].replicas", NULL);
    expect_bad(m_no_stages, "stages", NULL);
}

Test(plan_bad, non_finite)
{
    expect_bad(m_inf_iter, "predicted.iteration_s", "finite");
    expect_bad(m_inf_mbs, "microbatch_size", "integer");
}

Test(plan_bad, sizes_that_overflow)
{
    expect_bad(m_big_mbs, "microbatch_size", "2147483647");
    expect_bad(m_product, "microbatches", "microbatch_size * microbatches");
    expect_bad(m_peak_len, "predicted.peak_memory_bytes", "8 numbers");
}

Test(plan_bad, unknown_names)
{
    expect_bad(m_sched_unknown, "schedule", "\"1f1b\"");
    expect_bad(m_opt_unknown, "optimizer", "\"lamb\"");
    expect_bad(m_unknown_key, "stages[0].replica", "unknown field");
}

Test(plan_bad, layers_that_do_not_exist)
{
    expect_bad(m_layer_range, "stages[2].last_layer", "0 to 5");
    expect_bad(m_layer_name, "stages[1].first_layer", "\"conv9\"");
}

Test(plan_bad, devices_that_do_not_exist)
{
    expect_bad(m_device_range, "stages[0].devices[1]", "0 to 7");
    expect_bad(m_device_neg, "stages[2].devices[0]", NULL);
}

Test(plan_bad, devices_shared_or_miscounted)
{
    expect_bad(m_device_shared, "stages[2].devices[0]", "also in stages[0]");
    expect_bad(m_device_dup, "stages[0].devices[1]", "distinct");
    expect_bad(m_replica_count, "stages[1].devices", "2 device ids");
}

Test(plan_bad, stages_overlapping_or_leaving_gaps)
{
    expect_bad(m_overlap, "stages[1].first_layer", "overlap");
    expect_bad(m_gap, "stages[2].first_layer", "gaps");
    expect_bad(m_not_first, "stages[0].first_layer", "expected 0");
    expect_bad(m_short, "stages[2].last_layer", "last layer");
    expect_bad(m_backwards, "stages[1].last_layer", NULL);
}

Test(plan_bad, chunks_only_for_interleaving_schedules)
{
    expect_bad(m_chunks_sync, "chunks", "1f1b-flush");
    expect_bad(m_zbv_chunks, "chunks", "zb-v");
    expect_bad(m_interleaved_uneven, "stages", "multiple of chunks");
}

Test(plan_bad, embedded_nouns_name_their_path)
{
    expect_bad(m_embedded_profile, "profile.layers[3].forward_ms", NULL);
    expect_bad(m_embedded_cluster, "cluster.levels[1].count", NULL);
    expect_bad(m_embedded_format, "cluster.format", "plumb-cluster/1");
}

Test(plan_bad, interleaved_device_holding_wrong_count)
{
    profile *p = small_profile(4);
    cluster *c = small_cluster();
    plan *pl = plan_new(p, c, 4);
    profile_free(p);
    cluster_free(c);
    pl->schedule = SCHED_INTERLEAVED;
    pl->chunks = 2;
    int dev[] = {0, 1, 0, 2};
    for (int s = 0; s < 4; s++) plan_set_stage(pl, s, s, s, 1, &dev[s]);
    plumb_err err;
    cr_assert_eq(plan_validate(pl, "p.json", &err), -1);
    cr_assert(strstr(err.msg, "p.json: stages[1].devices: ") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "exactly chunks = 2") != NULL, "%s", err.msg);
    int three[] = {0, 0, 0, 1};
    for (int s = 0; s < 4; s++) plan_set_stage(pl, s, s, s, 1, &three[s]);
    cr_assert_eq(plan_validate(pl, "p.json", &err), -1);
    cr_assert(strstr(err.msg, "p.json: stages[2].devices[0]: ") != NULL, "%s", err.msg);
    plan_free(pl);
}

Test(plan_bad, failed_save_leaves_no_file)
{
    plan *pl = good_plan();
    char *tmp = make_tmpdir();
    char path[512];
    plumb_err err;
    snprintf(path, sizeof path, "%s/plan.json", tmp);
    pl->stages[2].first_layer = 5; /* gap */
    cr_assert_eq(plan_save(pl, path, &err), -1);
    cr_assert(strstr(err.msg, "stages[2].first_layer") != NULL, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 0);
    pl->stages[2].first_layer = 4;
    pl->pred_samples_per_s = NAN;
    cr_assert_eq(plan_save(pl, path, &err), -1);
    cr_assert(strstr(err.msg, "predicted.samples_per_s") != NULL, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 0);
    pl->pred_samples_per_s = -1;
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/plan.json", tmp);
    cr_assert_eq(plan_save(pl, bad, &err), -1);
    cr_assert_eq(count_files(tmp), 0);
    cr_assert_eq(plan_save(pl, path, &err), 0, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 1);
    plan_free(pl);
    rm_tree(tmp);
}

/* Every ```json example of a cluster or a plan in docs/formats.md loads. */
Test(plan, documented_examples_load)
{
    plumb_err err;
    FILE *f = fopen("docs/formats.md", "r");
    cr_assert_not_null(f, "run from the project root (docs/formats.md missing)");
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    cr_assert_lt(n, sizeof text - 1, "docs/formats.md outgrew the test's buffer");
    text[n] = '\0';
    int nclusters = 0, nplans = 0;
    for (char *p = text; (p = strstr(p, "```json\n"));) {
        p += 8;
        char *end = strstr(p, "```");
        cr_assert_not_null(end);
        /* only the examples whose top-level format is a cluster or a plan */
        char head[160];
        size_t hn = (size_t)(end - p) < sizeof head - 1 ? (size_t)(end - p) : sizeof head - 1;
        memcpy(head, p, hn);
        head[hn] = '\0';
        int is_cluster = strstr(head, "\"" CLUSTER_FORMAT "\"") != NULL;
        int is_plan = strstr(head, "\"" PLAN_FORMAT "\"") != NULL;
        if (is_cluster || is_plan) {
            cJSON *j = json_parse_text("doc", p, (size_t)(end - p), &err);
            cr_assert_not_null(j, "%s", err.msg);
            if (is_cluster) {
                cluster *c = cluster_from_json(j, "doc", &err);
                cr_assert_not_null(c, "%s", err.msg);
                cluster_free(c);
                nclusters++;
            } else {
                plan *pl = plan_from_json(j, "doc", &err);
                cr_assert_not_null(pl, "%s", err.msg);
                plan_free(pl);
                nplans++;
            }
            cJSON_Delete(j);
        }
        p = end + 3;
    }
    cr_assert_geq(nclusters, 1);
    cr_assert_geq(nplans, 1);
}

/* files_write_atomic writes a set of files as one: when a later file cannot be written,
 * an earlier one that existed keeps its content and no temporary is left behind. */
Test(plan, files_write_atomic_all_or_nothing)
{
    char *tmp = make_tmpdir_named("writeall");
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/old.json", tmp);
    snprintf(b, sizeof b, "%s/missing/x.svg", tmp);
    file_put_text(a, "old");
    plumb_err err;
    err_clear(&err);
    const char *paths[2] = {a, b}, *data[2] = {"new trace", "new svg"};
    size_t lens[2] = {9, 7};
    cr_assert_eq(files_write_atomic(2, paths, data, lens, &err), -1);
    cr_expect(strstr(err.msg, "missing/x.svg") != NULL, "%s", err.msg);
    expect_file_text(a, "old");
    cr_expect_eq(count_files(tmp), 1, "temporaries left behind");
    /* both writable: both written; a NULL path is skipped */
    snprintf(b, sizeof b, "%s/x.svg", tmp);
    const char *paths3[3] = {a, NULL, b}, *data3[3] = {"new trace", NULL, "new svg"};
    size_t lens3[3] = {9, 0, 7};
    cr_assert_eq(files_write_atomic(3, paths3, data3, lens3, &err), 0, "%s", err.msg);
    expect_file_text(b, "new svg");
    cr_expect_eq(count_files(tmp), 2);
    cr_expect_eq(rm_tree(tmp), 0);
}

/* A streamed file's writer: writes ctx's text, then refuses when it starts with "no". */
static int text_writer(FILE *f, void *ctx, plumb_err *err)
{
    const char *text = ctx;
    fputs(text, f);
    return strncmp(text, "no", 2) ? 0 : err_set(err, NULL, NULL, "refused");
}

/* files_write_atomic_out: a writer that refuses after writing leaves the files there as
 * they were, no temporary, and no later file begun; a writer that succeeds is renamed into
 * place with the files beside it. */
Test(plan, files_write_atomic_out_streams_as_one)
{
    char *tmp = make_tmpdir_named("writeout");
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/t.json", tmp);
    snprintf(b, sizeof b, "%s/t.svg", tmp);
    file_put_text(a, "old");
    plumb_err err;
    err_clear(&err);
    file_out fo[2] = {{.path = a, .write = text_writer, .ctx = "no: a long streamed text"},
                      {.path = b, .data = "svg", .len = 3}};
    cr_assert_eq(files_write_atomic_out(2, fo, &err), -1);
    cr_expect_str_eq(err.msg, "refused");
    expect_file_text(a, "old");
    cr_expect_eq(count_files(tmp), 1, "a temporary or the SVG left behind");
    fo[0].ctx = "streamed trace";
    cr_assert_eq(files_write_atomic_out(2, fo, &err), 0, "%s", err.msg);
    expect_file_text(a, "streamed trace");
    expect_file_text(b, "svg");
    cr_expect_eq(count_files(tmp), 2);
    cr_expect_eq(rm_tree(tmp), 0);
}

/* The writers replace only regular files: a FIFO at a path (or a device: rename would put
 * a file in the place of /dev/null) is refused before any temporary exists, and stays. */
/* A new scratch folder (returned) holding a FIFO, whose path goes in fifo, and the path of
 * name `other` beside it in path. */
static char *tmp_with_fifo(const char *tag, char *fifo, char *path, size_t n, const char *other)
{
    char *tmp = make_tmpdir_named(tag);
    snprintf(fifo, n, "%s/fifo", tmp);
    snprintf(path, n, "%s/%s", tmp, other);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    return tmp;
}

Test(plan, files_write_atomic_keeps_a_fifo)
{
    char a[300], b[300];
    char *tmp = tmp_with_fifo("writefifo", b, a, sizeof a, "t.json");
    plumb_err err;
    err_clear(&err);
    const char *paths[2] = {a, b}, *data[2] = {"trace", "svg"};
    size_t lens[2] = {5, 3};
    cr_assert_eq(files_write_atomic(2, paths, data, lens, &err), -1);
    cr_expect(strstr(err.msg, "/fifo: is a FIFO; expected a file name"), "%s", err.msg);
    struct stat st;
    cr_expect(stat(b, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_expect_eq(count_files(tmp), 1, "a temporary or t.json left behind");
    cr_expect_eq(file_check_replaceable(a, &err), 0, "a new name is replaceable");
    cr_expect_eq(file_check_replaceable(tmp, &err), -1, "a folder is not");
    cr_expect(strstr(err.msg, ": is a folder;"), "%s", err.msg);
    cr_expect_eq(rm_tree(tmp), 0);
}

/* Readers never wait: a FIFO with no writer is refused at once; a device streaming zeros
 * stops at the first chunk (the NUL byte is the parser's to refuse); a regular file over
 * the limit is refused by its size; a key given twice is refused by json_check_unique. */
Test(plan, readers_refuse_fifos_and_stop_at_nul)
{
    char f[300], big[300];
    char *tmp = tmp_with_fifo("readfifo", f, big, sizeof f, "big.json");
    plumb_err err;
    err_clear(&err);
    size_t len = 0;
    cr_assert_null(file_read_all(f, 100, "too large", &len, &err));
    cr_expect(strstr(err.msg, "fifo: cannot read: a FIFO with no writer (expected a file)"),
              "%s", err.msg);
    char *z = file_read_all("/dev/zero", (size_t)1 << 31, "too large", &len, &err);
    cr_assert_not_null(z, "%s", err.msg);
    cr_expect(len > 0 && len <= (size_t)1 << 20 && memchr(z, '\0', len), "read %zu bytes", len);
    free(z);
    file_put_text(big, "{\"a\": 12345}");
    cr_assert_null(file_read_all(big, 4, "over the limit", &len, &err));
    cr_expect(strstr(err.msg, "big.json: over the limit"), "%s", err.msg);
    const char *text = "{\"a\": 1, \"b\": 2, \"a\": 3}";
    cJSON *root = json_parse_text("t.json", text, strlen(text), &err);
    cr_assert_not_null(root);
    jctx c = {"t.json", &err};
    cr_expect_eq(json_check_unique(&c, root, "x"), -1);
    cr_expect_str_eq(err.msg, "t.json: x.a: expected each field once (got it twice)");
    cJSON_Delete(root);
    cr_expect_eq(rm_tree(tmp), 0);
}

/* devices used: the stages' devices marked, the idle ones named as ranges */
Test(plan, devices_used_and_idle)
{
    plan *pl = good_plan(); /* devices 0-3 of 8 */
    unsigned char used[8];
    char buf[128];
    cr_assert_eq(plan_devices_used(pl, used), 4);
    cr_assert_eq(plan_devices_text(used, 8, buf, sizeof buf), 4);
    cr_assert_str_eq(buf, "4 of 8 used (devices 4-7 idle)");
    used[5] = 1;
    plan_devices_text(used, 8, buf, sizeof buf);
    cr_assert_str_eq(buf, "5 of 8 used (devices 4, 6-7 idle)");
    used[4] = used[6] = 1;
    plan_devices_text(used, 8, buf, sizeof buf);
    cr_assert_str_eq(buf, "7 of 8 used (device 7 idle)");
    used[7] = 1;
    plan_devices_text(used, 8, buf, sizeof buf);
    cr_assert_str_eq(buf, "8 of 8 used");
    /* too small a buffer: cut, terminated */
    memset(used, 0, sizeof used);
    used[0] = used[2] = used[4] = used[6] = 1;
    char small[24];
    plan_devices_text(used, 8, small, sizeof small);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert(strstr(small, "..."), "%s", small);
    plan_free(pl);
}

/* ---- 3D fields: tensor-parallel groups, recompute kinds, precision, ZeRO -------------- */

/* good_plan's layers on tensor-parallel groups of 2: [0,1] x2 on groups {0,1} {2,3},
 * [2,3] on {4,5}, [4,5] on {6,7}. */
static plan *tp_plan(void)
{
    profile *p = small_profile(6);
    p->tp = 2;
    p->sequence_parallel = 1;
    p->tokens_per_sample = 2048;
    p->layers[1].tp_collective_bytes = 1e6;
    p->layers[1].tp_forward_collectives = 2;
    p->layers[1].tp_backward_collectives = 2;
    p->layers[1].selective_recompute_ms = 0.5;
    p->layers[1].selective_saved_bytes = 0;
    cluster *c = small_cluster();
    plan *pl = plan_new(p, c, 3);
    cr_assert_not_null(pl);
    profile_free(p);
    cluster_free(c);
    cr_assert_eq(pl->tp, 2, "plan_new takes the profile's tp");
    cr_assert_eq(pl->sequence_parallel, 1);
    int d0[] = {0, 2}, d1[] = {4}, d2[] = {6};
    cr_assert_eq(plan_set_stage(pl, 0, 0, 1, 2, d0), 0);
    cr_assert_eq(plan_set_stage(pl, 1, 2, 3, 1, d1), 0);
    cr_assert_eq(plan_set_stage(pl, 2, 4, 5, 1, d2), 0);
    pl->recompute = RECOMPUTE_SELECTIVE; /* checkpoint_layers 0: full's alone */
    pl->zero = 1;
    pl->precision = DEV_BF16;
    return pl;
}

Test(plan3d, round_trip_and_devices)
{
    plan *pl = tp_plan();
    plumb_err err;
    cr_assert_eq(plan_validate(pl, "p", &err), 0, "%s", err.msg);
    round_trip(pl);
    cr_assert_eq(plan_gpus(pl), 8, "4 groups of 2");
    cr_assert_str_eq(recompute_kind_name(RECOMPUTE_SELECTIVE), "selective");
    cr_assert_eq(recompute_kind_parse("full"), RECOMPUTE_FULL);
    cr_assert_eq(recompute_kind_parse("some"), -1);
    /* each 3D field changes equality */
    plan *q = plan_clone(pl);
    q->zero = 0;
    cr_assert_not(plan_equal(pl, q));
    plan_free(q);
    /* full recomputation with its checkpoints: written, read back equal */
    q = plan_clone(pl);
    q->recompute = RECOMPUTE_FULL, q->checkpoint_layers = 2;
    cr_assert_not(plan_equal(pl, q));
    round_trip(q);
    plan_free(q);
    /* a plan file with recompute "full" reads as the boolean's full */
    cJSON *j = plan_to_json(pl);
    cJSON_ReplaceItemInObject(j, "recompute", cJSON_CreateString("full"));
    plan *b = plan_from_json(j, "p.json", &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert_eq(b->recompute, RECOMPUTE_FULL);
    plan_free(b);
    cJSON_Delete(j);
    plan_free(pl);
}

/* pl's file does not hold key (its default is not written). */
static void expect_unwritten(const plan *pl, const char *key)
{
    cJSON *j = plan_to_json(pl);
    cr_assert_null(cJSON_GetObjectItem(j, key), "%s is written", key);
    cJSON_Delete(j);
}

/* q, pl with one field changed (label names it), validates, is unequal to pl and reads
 * back equal from its file (round_trip). */
static void expect_changed_round_trip(const plan *pl, const plan *q, const char *label)
{
    plumb_err err;
    cr_assert_eq(plan_validate(q, "p", &err), 0, "%s: %s", label, err.msg);
    cr_assert_not(plan_equal(pl, q), "%s", label);
    round_trip(q);
}

/* The plan read from j as the file "p.json"; fails the test, naming label, when it is
 * refused. The caller frees it with plan_free. */
static plan *read_json(const cJSON *j, const char *label)
{
    plumb_err err;
    plan *b = plan_from_json(j, "p.json", &err);
    cr_assert_not_null(b, "%s: %s", label, err.msg);
    return b;
}

/* j, read as the file "p.json", is refused with a message holding want; in one line when
 * one_line. */
static void expect_json_refused(const cJSON *j, const char *want, int one_line)
{
    plumb_err err;
    err_clear(&err);
    cr_assert_null(plan_from_json(j, "p.json", &err), "accepted, wanted %s", want);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    if (one_line) cr_assert_null(strchr(err.msg, '\n'), "%s", err.msg);
}

static void expect_bad3d(void (*m)(plan *), const char *path, const char *word)
{
    plan *pl = tp_plan();
    m(pl);
    plumb_err err;
    err_clear(&err);
    cr_assert_neq(plan_validate(pl, "p.json", &err), 0, "accepted bad input, wanted %s", path);
    char want[256];
    snprintf(want, sizeof want, "p.json: %s: ", path);
    cr_assert(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
    cr_assert(strstr(err.msg, word) != NULL, "message \"%s\" lacks \"%s\"", err.msg, word);
    plan_free(pl);
}

static void b_group_across_servers(plan *pl) { pl->stages[1].devices[0] = 3; }
static void b_groups_overlap(plan *pl) { pl->stages[0].devices[1] = 1; }
static void b_tp_not_profile(plan *pl) { pl->tp = 4; }
static void b_sp_not_profile(plan *pl) { pl->sequence_parallel = 0; }
static void b_zero(plan *pl) { pl->zero = 3; }
static void b_checkpoint(plan *pl) { pl->recompute = RECOMPUTE_FULL, pl->checkpoint_layers = 3; }
static void b_checkpoint_selective(plan *pl) { pl->checkpoint_layers = 1; }
static void b_grad_fp32(plan *pl) { pl->precision = DEV_FP32, pl->grad_reduce = DEV_BF16; }
static void b_state_fp16(plan *pl) { pl->precision = DEV_FP16, pl->optimizer_state = DEV_BF16; }
static void b_grad_tf32(plan *pl) { pl->grad_reduce = DEV_TF32; }

Test(plan3d, bad_groups_and_fields)
{
    expect_bad3d(b_group_across_servers, "stages[1].devices[0]", "on one server");
    expect_bad3d(b_groups_overlap, "stages[0].devices[1]", "device 1");
    expect_bad3d(b_tp_not_profile, "tp", "profile's tensor_parallel");
    expect_bad3d(b_sp_not_profile, "sequence_parallel", "as the profile");
    expect_bad3d(b_zero, "zero", "0 or 1");
    expect_bad3d(b_checkpoint, "checkpoint_layers", "expected at most the 2 blocks of a "
                 "virtual stage (got 3)");
    expect_bad3d(b_checkpoint_selective, "checkpoint_layers", "expected 0 with recompute "
                 "selective");
    expect_bad3d(b_grad_fp32, "grad_reduce", "unless precision is bf16 or fp8 (got bf16 "
                 "with "
                 "precision fp32)");
    expect_bad3d(b_state_fp16, "optimizer_state", "with precision fp16");
    expect_bad3d(b_grad_tf32, "grad_reduce", "expected fp32 or bf16");
}

/* grad_reduce and optimizer_state: written only when bf16 (a default plan's file reads as
 * before), read back equal, each changing equality; a bad value in a file is one line. */
Test(plan3d, state_elements_round_trip)
{
    plan *pl = tp_plan();
    expect_unwritten(pl, "grad_reduce");
    expect_unwritten(pl, "optimizer_state");
    static const char *const label[] = {"grad_reduce", "optimizer_state", "both"};
    for (int k = 0; k < 3; k++) {
        plan *q = plan_clone(pl);
        q->grad_reduce = k != 1 ? DEV_BF16 : DEV_FP32;
        q->optimizer_state = k != 0 ? DEV_BF16 : DEV_FP32;
        expect_changed_round_trip(pl, q, label[k]);
        cJSON *j = plan_to_json(q);
        const cJSON *g = cJSON_GetObjectItem(j, "grad_reduce");
        cr_assert_eq(g != NULL, k != 1);
        if (g) cr_assert_str_eq(g->valuestring, "bf16");
        plan *b = read_json(j, label[k]);
        cr_assert_eq(b->grad_reduce, q->grad_reduce);
        cr_assert_eq(b->optimizer_state, q->optimizer_state);
        plan_free(b);
        cJSON_DeleteItemFromObject(j, "optimizer_state");
        cJSON_AddStringToObject(j, "optimizer_state", "fp8");
        expect_json_refused(j, "p.json: optimizer_state: expected fp32 or bf16 (got \"fp8\")",
                            0);
        cJSON_Delete(j);
        plan_free(q);
    }
    plan_free(pl);
}

/* p2p_split: "scatter-gather" (the default) is not written (a default plan's file reads as
 * before) and reads back as it; "whole" is written, read back equal and changes equality;
 * a bad value in a file is one line naming the field. Any tp and sequence parallelism take
 * either (with sequence parallelism or tp 1 the choice changes nothing). */
Test(plan3d, p2p_split_round_trip)
{
    plan *pl = tp_plan();
    cr_assert_eq(pl->p2p_whole, 0);
    expect_unwritten(pl, "p2p_split");
    cJSON *j = plan_to_json(pl);
    cJSON_AddStringToObject(j, "p2p_split", "scatter-gather");
    plan *b = read_json(j, "scatter-gather");
    cr_assert_eq(b->p2p_whole, 0);
    cr_assert(plan_equal(pl, b));
    plan_free(b);
    cJSON_Delete(j);
    for (int sp = 1; sp >= 0; sp--) {
        plan *q = plan_clone(pl);
        q->prof->sequence_parallel = q->sequence_parallel = sp;
        q->p2p_whole = 1;
        expect_changed_round_trip(pl, q, sp ? "whole, sequence parallel" : "whole");
        j = plan_to_json(q);
        const cJSON *v = cJSON_GetObjectItem(j, "p2p_split");
        cr_assert(cJSON_IsString(v) && !strcmp(v->valuestring, "whole"));
        b = read_json(j, "whole");
        cr_assert_eq(b->p2p_whole, 1);
        plan_free(b);
        static const char *const bad[] = {"split", "Whole", ""};
        for (int i = 0; i < 3; i++) {
            cJSON_DeleteItemFromObject(j, "p2p_split");
            cJSON_AddStringToObject(j, "p2p_split", bad[i]);
            expect_json_refused(j, "p.json: p2p_split: expected scatter-gather or whole (got", 1);
        }
        cJSON_DeleteItemFromObject(j, "p2p_split");
        cJSON_AddBoolToObject(j, "p2p_split", 1);
        expect_json_refused(j, "p.json: p2p_split: expected scatter-gather or whole (got true)",
                            0);
        cJSON_Delete(j);
        plan_free(q);
    }
    plan_free(pl);
}

/* fp8_param_gather: not written when false (a plan's file reads as before), written true,
 * read back equal and changing equality; refused, one line naming the field, without
 * precision fp8 or without zero 1 (Megatron-Core's FP8 primary weights need both). */
Test(plan3d, fp8_param_gather_round_trip)
{
    plan *pl = tp_plan();
    cr_assert_eq(pl->fp8_param_gather, 0);
    expect_unwritten(pl, "fp8_param_gather");
    plan *q = plan_clone(pl);
    q->precision = DEV_FP8;
    q->fp8_param_gather = 1;
    expect_changed_round_trip(pl, q, "fp8_param_gather");
    cJSON *j = plan_to_json(q);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "fp8_param_gather")));
    plan *b = read_json(j, "fp8_param_gather");
    cr_assert_eq(b->fp8_param_gather, 1);
    cr_assert(plan_equal(q, b));
    plan_free(b);
    /* the file's bad values: a string, precision bf16, zero 0 */
    cJSON_ReplaceItemInObject(j, "fp8_param_gather", cJSON_CreateString("yes"));
    expect_json_refused(j, "p.json: fp8_param_gather: ", 0);
    cJSON_ReplaceItemInObject(j, "fp8_param_gather", cJSON_CreateBool(1));
    cJSON_ReplaceItemInObject(j, "precision", cJSON_CreateString("bf16"));
    expect_json_refused(j, "p.json: fp8_param_gather: expected false unless precision is "
                        "fp8 (FP8 primary weights) (got true with precision bf16)", 1);
    cJSON_ReplaceItemInObject(j, "precision", cJSON_CreateString("fp8"));
    cJSON_DeleteItemFromObject(j, "zero");
    expect_json_refused(j, "p.json: fp8_param_gather: expected false unless zero is 1 ", 1);
    cJSON_Delete(j);
    plan_free(q);
    plan_free(pl);
}

/* cross_entropy (the LM head's loss as the profile prices it): not written when unfused (a
 * plan's file reads as before), "te" and "native" written, read back equal and changing
 * equality; an explicit "unfused" reads as the default; anything else refused in one line
 * naming the field. */
Test(plan3d, cross_entropy_round_trip)
{
    plan *pl = tp_plan();
    plumb_err err;
    cr_assert_eq(pl->cross_entropy, 0);
    expect_unwritten(pl, "cross_entropy");
    plan *q = plan_clone(pl);
    q->cross_entropy = 1;
    expect_changed_round_trip(pl, q, "te");
    cJSON *j = plan_to_json(q);
    const cJSON *v = cJSON_GetObjectItem(j, "cross_entropy");
    cr_assert(cJSON_IsString(v) && !strcmp(v->valuestring, "te"));
    plan *b = read_json(j, "te");
    cr_assert_eq(b->cross_entropy, 1);
    cr_assert(plan_equal(q, b));
    plan_free(b);
    plan *n = plan_clone(pl); /* Megatron-Core's fused loss: its own word, unequal to te */
    n->cross_entropy = 2;
    expect_changed_round_trip(q, n, "native");
    cJSON *jn = plan_to_json(n);
    v = cJSON_GetObjectItem(jn, "cross_entropy");
    cr_assert(cJSON_IsString(v) && !strcmp(v->valuestring, "native"));
    b = read_json(jn, "native");
    cr_assert_eq(b->cross_entropy, 2);
    plan_free(b);
    cJSON_Delete(jn);
    plan_free(n);
    cJSON_ReplaceItemInObject(j, "cross_entropy", cJSON_CreateString("unfused"));
    b = read_json(j, "unfused");
    cr_assert_eq(b->cross_entropy, 0);
    cr_assert(plan_equal(pl, b));
    plan_free(b);
    static const char *const bad[] = {"fused", "TE", ""};
    for (int i = 0; i < 3; i++) {
        cJSON_ReplaceItemInObject(j, "cross_entropy", cJSON_CreateString(bad[i]));
        expect_json_refused(j, "p.json: cross_entropy: expected unfused, te or native (got", 1);
    }
    cJSON_ReplaceItemInObject(j, "cross_entropy", cJSON_CreateBool(1));
    expect_json_refused(j, "p.json: cross_entropy: expected unfused, te or native (got true)", 0);
    q->cross_entropy = 3;
    err_clear(&err);
    cr_assert_neq(plan_validate(q, "p", &err), 0);
    cr_assert(strstr(err.msg, "p: cross_entropy: expected unfused, te or native (got 3)"), "%s",
              err.msg);
    cJSON_Delete(j);
    plan_free(q);
    plan_free(pl);
}

/* grad_accum (how the profile prices the weight gradients' accumulation): not written when
 * fused (a plan's file reads as before), "unfused" written, read back equal and changing
 * equality; an explicit "fused" reads as the default; anything else refused in one line
 * naming the field; a plan of a profile that prices it unfused takes it (plan_new) and a
 * file that says "fused" against that profile is refused. */
Test(plan3d, grad_accum_round_trip)
{
    plan *pl = tp_plan();
    plumb_err err;
    cr_assert_eq(pl->grad_accum, 0);
    expect_unwritten(pl, "grad_accum");
    plan *q = plan_clone(pl);
    q->grad_accum = 1;
    expect_changed_round_trip(pl, q, "unfused");
    cJSON *j = plan_to_json(q);
    const cJSON *v = cJSON_GetObjectItem(j, "grad_accum");
    cr_assert(cJSON_IsString(v) && !strcmp(v->valuestring, "unfused"));
    plan *b = read_json(j, "unfused");
    cr_assert_eq(b->grad_accum, 1);
    cr_assert(plan_equal(q, b));
    plan_free(b);
    cJSON_ReplaceItemInObject(j, "grad_accum", cJSON_CreateString("fused"));
    b = read_json(j, "fused");
    cr_assert_eq(b->grad_accum, 0);
    cr_assert(plan_equal(pl, b));
    plan_free(b);
    static const char *const bad[] = {"foo", "Unfused", ""};
    for (int i = 0; i < 3; i++) {
        cJSON_ReplaceItemInObject(j, "grad_accum", cJSON_CreateString(bad[i]));
        expect_json_refused(j, "p.json: grad_accum: expected fused or unfused (got", 1);
    }
    cJSON_ReplaceItemInObject(j, "grad_accum", cJSON_CreateBool(1));
    expect_json_refused(j, "p.json: grad_accum: expected fused or unfused (got true)", 0);
    q->grad_accum = 2;
    err_clear(&err);
    cr_assert_neq(plan_validate(q, "p", &err), 0);
    cr_assert(strstr(err.msg, "p: grad_accum: expected fused or unfused (got 2)"), "%s",
              err.msg);
    cJSON_Delete(j);
    plan_free(q);
    /* the profile's: taken by plan_new and by a file without the key, a contradiction refused */
    profile *p = small_profile(6);
    cluster *c = small_cluster();
    p->grad_accum = 1;
    plan *u = plan_new(p, c, 1);
    cr_assert_not_null(u);
    cr_expect_eq(u->grad_accum, 1);
    int devs[] = {0};
    cr_assert_eq(plan_set_stage(u, 0, 0, 5, 1, devs), 0);
    cr_assert_eq(plan_validate(u, "p", &err), 0, "%s", err.msg);
    cJSON *ju = plan_to_json(u);
    cJSON_DeleteItemFromObject(ju, "grad_accum");
    b = read_json(ju, "left out");
    cr_expect_eq(b->grad_accum, 1, "a file without the key takes the profile's");
    plan_free(b);
    cJSON_AddStringToObject(ju, "grad_accum", "fused");
    err_clear(&err);
    cr_expect_null(plan_from_json(ju, "p.json", &err));
    cr_expect_str_eq(err.msg, "p.json: grad_accum: expected unfused, the accumulation the "
                     "profile prices (got fused)");
    cJSON_Delete(ju);
    plan_free(u);
    cluster_free(c);
    profile_free(p);
    plan_free(pl);
}

/* The runtime rules have one owner, plan_runtime_check: over every schedule kind and every
 * combination of zero, overlap_param_gather, p2p and grad_sync, it refuses exactly what the
 * rules written out here refuse, naming the plan file's field with a file and the option
 * without one, and the first rule broken in this order. */
Test(plan_runtime, one_rule_for_files_and_options)
{
    for (int k = 0; k < SCHED_NKINDS; k++) {
        const sched_traits *tr = sched_traits_of((sched_kind)k);
        for (int bits = 0; bits < 16; bits++) {
            int zero = bits & 1, opg = bits >> 1 & 1, p2p = bits >> 2 & 1, gse = bits >> 3 & 1;
            const char *file_field = NULL, *opt_field = NULL;
            if (opg && !zero) file_field = "overlap_param_gather", opt_field = "--overlap-param-gather";
            else if (opg && tr->async) file_field = "overlap_param_gather", opt_field = "--overlap-param-gather";
            else if (p2p && tr->place == SCHED_PLACE_V) file_field = "p2p", opt_field = "--p2p";
            else if (gse && opg) file_field = "overlap_param_gather", opt_field = "--overlap-param-gather";
            else if (gse && tr->async) file_field = "grad_sync", opt_field = "--grad-sync";
            plumb_err e1 = {0}, e2 = {0};
            int r1 = plan_runtime_check(tr, zero, opg, p2p, gse, "p.json", &e1);
            int r2 = plan_runtime_check(tr, zero, opg, p2p, gse, NULL, &e2);
            cr_assert_eq(r1, file_field ? -1 : 0, "%s bits %d: %s", tr->name, bits, e1.msg);
            cr_assert_eq(r2, r1, "%s bits %d: %s", tr->name, bits, e2.msg);
            if (!file_field) continue;
            char want[128];
            snprintf(want, sizeof want, "p.json: %s: ", file_field);
            cr_assert(strstr(e1.msg, want) == e1.msg, "%s", e1.msg);
            snprintf(want, sizeof want, "%s: ", opt_field);
            cr_assert(strstr(e2.msg, want) == e2.msg, "%s", e2.msg);
            if (strstr(e2.msg, "schedule") && !strstr(e2.msg, "--grad-sync overlap"))
                cr_assert(strstr(e2.msg, tr->name), "%s", e2.msg);
        }
    }
    /* A schedule not fixed yet (the layout search's) and zero not fixed: the schedule's rules
     * and the zero rule wait for them. */
    plumb_err e = {0};
    cr_assert_eq(plan_runtime_check(NULL, -1, 1, 1, 0, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(plan_runtime_check(NULL, -1, 1, 0, 1, NULL, &e), -1);
    cr_assert(strstr(e.msg, "--overlap-param-gather: expected --grad-sync overlap") == e.msg,
              "%s", e.msg);
}

/* ---- a transformer's layout names its model ------------------------------------------- */

#define LLAMA "examples/llm/nemo/llama2-7b.json"
#define H100 "profiles/clusters/dgx-h100.json"

/* plan --model's plan of file `model` at tp 2 x pp 2 x dp 2 with o's other options. */
static plan *layout_plan(const char *model, layout3d_options *o)
{
    plumb_err e;
    err_clear(&e);
    transformer *t = transformer_load(model, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cluster *c = cluster_load(H100, &e);
    cr_assert_not_null(c, "%s", e.msg);
    o->tp = 2, o->pp = 2, o->dp = 2, o->global_batch = 16, o->microbatch_size = 1;
    plan *pl = layout3d_build(t, c, H100, o, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    transformer_free(t);
    cluster_free(c);
    return pl;
}

static char *file_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* A plan with its model saved to a.json in a new temporary folder, read back and saved
 * again to b.json. */
typedef struct saved_twice {
    char *tmp;      /* the folder: rm_tree */
    plan *back;     /* the plan read back */
    char *ta, *tb;  /* the two files' texts */
} saved_twice;

/* pl saved twice (saved_twice): read back with a model equal to pl's, and the second file
 * the first byte for byte; fails the test, naming label, when a step is refused. The
 * caller frees it with saved_twice_free. */
static saved_twice save_twice(const plan *pl, const char *label)
{
    saved_twice s;
    s.tmp = make_tmpdir();
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/a.json", s.tmp);
    snprintf(b, sizeof b, "%s/b.json", s.tmp);
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(plan_save(pl, a, &e), 0, "%s: %s", label, e.msg);
    s.back = plan_load(a, &e);
    cr_assert_not_null(s.back, "%s: %s", label, e.msg);
    cr_assert_not_null(s.back->model, "%s: the model was not read back", label);
    cr_expect(plan_model_equal(pl->model, s.back->model), "%s", label);
    cr_assert_eq(plan_save(s.back, b, &e), 0, "%s: %s", label, e.msg);
    s.ta = file_text(a);
    s.tb = file_text(b);
    cr_expect_str_eq(s.ta, s.tb, "%s: written again, the file differs", label);
    return s;
}

static void saved_twice_free(saved_twice *s)
{
    free(s->ta);
    free(s->tb);
    plan_free(s->back);
    rm_tree(s->tmp);
}

/* A plan of llama2-7b with fp8 and an uneven split (--decoder-first-pipeline-num-layers 12)
 * embeds its model; written, read and written again it is the same file byte for byte, the
 * same plan (plan_equal) and the same model, and a clone keeps it. */
Test(plan, model_round_trips_byte_identical)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.precision = DEV_FP8, o.zero = 1, o.seq = 1024, o.split.first_blocks = 12;
    plan *pl = layout_plan(LLAMA, &o);
    cr_assert_not_null(pl->model);
    cr_expect_eq(pl->model->split.first_blocks, 12);
    cr_expect_eq(pl->model->tf->seq, 1024);
    saved_twice s = save_twice(pl, "split");
    plan *back = s.back;
    cr_expect(plan_equal(pl, back));
    cr_expect(strstr(s.ta, "\"decoder_first_pipeline_num_layers\":\t12"), "%s", s.ta);
    plan *k = plan_clone(back);
    cr_expect(plan_equal(k, pl) && k->model != back->model);
    back->model->split.first_blocks = 0;
    cr_expect(!plan_equal(pl, back), "plan_equal compares the model");
    plan_free(k);
    saved_twice_free(&s);
    plan_free(pl);
}

/* A layout of Megatron-Core's layout string (--pipeline-layout) records the string in its
 * model: written, read back (checked against the stages) and written again byte for byte;
 * the options read back from the plan lay out the same stages. */
Test(plan, model_pipeline_layout_round_trips)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.seq = 1024, o.pipeline_layout = "Et*12|t*20L";
    plan *pl = layout_plan(LLAMA, &o);
    cr_assert_not_null(pl->model);
    cr_assert_str_eq(pl->model->pipeline_layout, "Et*12|t*20L");
    cr_expect_eq(pl->stages[0].last_layer, 12, "the first stage holds the embedding + 12");
    saved_twice s = save_twice(pl, "pipeline layout");
    plan *back = s.back;
    cr_expect(strstr(s.ta, "\"pipeline_model_parallel_layout\":\t\"Et*12|t*20L\""), "%s",
              s.ta);
    plan *k = plan_clone(back);
    cr_expect(plan_equal(k, back) && k->model->pipeline_layout != back->model->pipeline_layout);
    free(back->model->pipeline_layout);
    back->model->pipeline_layout = NULL;
    cr_expect(!plan_model_equal(pl->model, back->model), "plan_model_equal compares it");
    layout3d_options r;
    cr_assert_eq(layout3d_options_from_plan(k, &r), 0);
    cr_expect_str_eq(r.pipeline_layout, "Et*12|t*20L");
    plan_free(k);
    saved_twice_free(&s);
    plan_free(pl);
}

/* Every family's config.json is written as its plumb-transformer/1 equivalent, --seq-len
 * applied: read back, the same transformer (gpt2's learned positions and tied embeddings,
 * llama's, mistral's grouped-query attention), the same parameter count, and laid out
 * again the same profile. A qwen2-like config keeps its Q/K/V biases alone. */
Test(plan, model_of_every_family_reads_back_the_same)
{
    static const char *const files[] = { "examples/llm/gpt2.json", LLAMA,
                                          "examples/llm/mistral-7b.json",
                                          "examples/llm/llama3-8b.json",
                                          "examples/llm/phi3-mini-4k.json",
                                          "examples/llm/starcoder2-7b.json",
                                          "examples/llm/olmo2-7b.json",
                                          "examples/llm/granite-3-8b.json" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        layout3d_options o;
        layout3d_options_init(&o);
        o.seq = 512;
        plan *pl = layout_plan(files[i], &o);
        cJSON *j = plan_to_json(pl);
        plumb_err e;
        err_clear(&e);
        plan *back = plan_from_json(j, "p.json", &e);
        cr_assert_not_null(back, "%s: %s", files[i], e.msg);
        const transformer *t = pl->model->tf, *r = back->model->tf;
        cr_expect(transformer_equal(t, r), "%s: read back differs", files[i]);
        cr_expect_eq(r->seq, 512, "%s", files[i]);
        cr_expect_eq(transformer_param_count(r), transformer_param_count(t), "%s", files[i]);
        cluster *c = cluster_load(H100, &e);
        cr_assert_not_null(c, "%s", e.msg);
        layout3d_options_init(&o);
        o.tp = 2, o.pp = 2, o.dp = 2, o.global_batch = 16, o.microbatch_size = 1;
        o.seq = r->seq;
        plan *again = layout3d_build(r, c, H100, &o, &e);
        cr_assert_not_null(again, "%s: %s", files[i], e.msg);
        cr_expect(profile_equal(again->prof, pl->prof), "%s: the profile differs", files[i]);
        plan_free(again);
        cluster_free(c);
        plan_free(back);
        cJSON_Delete(j);
        plan_free(pl);
    }
    plumb_err e;
    err_clear(&e);
    cJSON *q = cJSON_Parse("{\"model_type\": \"qwen2\", \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"intermediate_size\": 128, \"max_position_embeddings\": 32, "
                           "\"vocab_size\": 100, \"hidden_act\": \"gelu\"}");
    transformer *t = transformer_from_json(q, "qwen.json", &e);
    cr_assert_not_null(t, "%s", e.msg);
    cJSON *w = transformer_to_json(t);
    transformer *r = transformer_from_json(w, "w.json", &e);
    cr_assert_not_null(r, "%s", e.msg);
    cr_expect(r->qkv_bias && !r->out_bias && !r->mlp_bias && r->gated_mlp &&
              r->activation == TF_GELU);
    cr_expect(transformer_equal(t, r));
    cr_expect_eq(transformer_param_count(r), transformer_param_count(t));
    transformer_free(r);
    transformer_free(t);
    cJSON_Delete(w);
    cJSON_Delete(q);
}

/* A plan of a profile (no transformer) has no model and writes none, as before. */
Test(plan, profile_plans_write_no_model)
{
    plumb_err e;
    err_clear(&e);
    plan *pl = plan_load("examples/plans/vgg16-hybrid-pipedream.json", &e);
    cr_assert_not_null(pl, "%s", e.msg);
    cr_expect_null(pl->model);
    cJSON *j = plan_to_json(pl);
    cr_expect_null(cJSON_GetObjectItem(j, "model"));
    cJSON_Delete(j);
    plan_free(pl);
}

/* The model plan to mutate: tp 2 x pp 2 x dp 2 of llama2-7b, rank 0 holding 12 blocks. */
typedef void (*model_mutator)(cJSON *model, cJSON *root);

/* The file (JSON) of llama2-7b's plan at seq 1024 with 12 blocks on the first rank
 * (layout_plan), which names its model. The caller frees it with cJSON_Delete. */
static cJSON *split_plan_json(void)
{
    layout3d_options o;
    layout3d_options_init(&o);
    o.seq = 1024, o.split.first_blocks = 12;
    plan *pl = layout_plan(LLAMA, &o);
    cJSON *j = plan_to_json(pl);
    plan_free(pl);
    return j;
}

static void expect_bad_model(model_mutator m, const char *path, const char *word)
{
    cJSON *j = split_plan_json();
    m(cJSON_GetObjectItem(j, "model"), j);
    plumb_err err;
    err_clear(&err);
    plan *b = plan_from_json(j, "p.json", &err);
    cJSON_Delete(j);
    cr_assert_null(b, "accepted a bad model, wanted an error at %s", path);
    char want[256];
    snprintf(want, sizeof want, "p.json: %s: ", path);
    cr_expect(strstr(err.msg, want) == err.msg, "message \"%s\" lacks \"%s\"", err.msg, want);
    cr_expect(!strchr(err.msg, '\n'), "more than one line: %s", err.msg);
    if (word) cr_expect(strstr(err.msg, word), "message \"%s\" lacks \"%s\"", err.msg, word);
}

static cJSON *tf_of(cJSON *m) { return cJSON_GetObjectItem(m, "transformer"); }
static void mm_type(cJSON *m, cJSON *r) { (void)m; set(r, "model", cJSON_CreateNumber(3)); }
static void mm_key(cJSON *m, cJSON *r) { (void)r; set(m, "seq_length", cJSON_CreateNumber(1)); }
static void mm_miss_tf(cJSON *m, cJSON *r) { (void)r; cJSON_DeleteItemFromObject(m, "transformer"); }
static void mm_tf_format(cJSON *m, cJSON *r)
{
    (void)r;
    cJSON_DeleteItemFromObject(tf_of(m), "format");
}
static void mm_tf_hidden(cJSON *m, cJSON *r)
{
    (void)r;
    set(tf_of(m), "hidden_size", cJSON_CreateString("4096"));
}
static void mm_tf_layers(cJSON *m, cJSON *r)
{
    (void)r;
    set(tf_of(m), "num_hidden_layers", cJSON_CreateNumber(31));
}
static void mm_seq(cJSON *m, cJSON *r) { (void)r; set(m, "seq_len", cJSON_CreateNumber(2048)); }
static void mm_miss_seq(cJSON *m, cJSON *r) { (void)r; cJSON_DeleteItemFromObject(m, "seq_len"); }
static void mm_attn(cJSON *m, cJSON *r) { (void)r; set(m, "attention", cJSON_CreateString("fast")); }
static void mm_first(cJSON *m, cJSON *r)
{
    (void)r;
    set(m, "decoder_first_pipeline_num_layers", cJSON_CreateNumber(10));
}
static void mm_last(cJSON *m, cJSON *r)
{
    (void)r;
    set(m, "decoder_last_pipeline_num_layers", cJSON_CreateNumber(12));
}
static void mm_both_kinds(cJSON *m, cJSON *r)
{
    (void)r;
    set(m, "account_for_loss_in_pipeline_split", cJSON_CreateBool(1));
}
static void mm_balance(cJSON *m, cJSON *r) { (void)r; set(m, "balance", cJSON_CreateBool(1)); }
static void mm_first_big(cJSON *m, cJSON *r)
{
    (void)r;
    set(m, "decoder_first_pipeline_num_layers", cJSON_CreateNumber(33));
}

static void mm_layout_and_first(cJSON *m, cJSON *r)
{
    (void)r;
    set(m, "pipeline_model_parallel_layout", cJSON_CreateString("Et*12|t*20L"));
}
static void mm_layout_other_stages(cJSON *m, cJSON *r)
{
    (void)r;
    cJSON_DeleteItemFromObject(m, "decoder_first_pipeline_num_layers");
    set(m, "pipeline_model_parallel_layout", cJSON_CreateString("Et*16|t*16L"));
}
static void mm_layout_syntax(cJSON *m, cJSON *r)
{
    (void)r;
    cJSON_DeleteItemFromObject(m, "decoder_first_pipeline_num_layers");
    set(m, "pipeline_model_parallel_layout", cJSON_CreateString("Et*12|t*20X"));
}
static void mm_layout_type(cJSON *m, cJSON *r)
{
    (void)r;
    cJSON_DeleteItemFromObject(m, "decoder_first_pipeline_num_layers");
    set(m, "pipeline_model_parallel_layout", cJSON_CreateNumber(12));
}

Test(plan, bad_model_one_line_each)
{
    expect_bad_model(mm_layout_and_first, "model.pipeline_model_parallel_layout", "one kind");
    expect_bad_model(mm_layout_other_stages, "model.pipeline_model_parallel_layout",
                     "expected virtual stage 0 to hold the 12 blocks of the plan's stage 0 "
                     "(the layout gives 16)");
    expect_bad_model(mm_layout_syntax, "model.pipeline_model_parallel_layout",
                     "--pipeline-layout");
    expect_bad_model(mm_layout_type, "model.pipeline_model_parallel_layout", NULL);
    expect_bad_model(mm_type, "model", "expected an object");
    expect_bad_model(mm_key, "model.seq_length", "unknown");
    expect_bad_model(mm_miss_tf, "model.transformer", "missing");
    expect_bad_model(mm_tf_format, "model.transformer.format", "plumb-transformer/1");
    expect_bad_model(mm_tf_hidden, "model.transformer.hidden_size", NULL);
    expect_bad_model(mm_tf_layers, "model.transformer.num_hidden_layers",
                     "the profile's 32 blocks");
    expect_bad_model(mm_seq, "model.seq_len", "tokens_per_sample 1024");
    expect_bad_model(mm_miss_seq, "model.seq_len", "missing");
    expect_bad_model(mm_attn, "model.attention", "standard or flash");
    expect_bad_model(mm_first, "model.decoder_first_pipeline_num_layers",
                     "the 12 blocks the stages give pipeline rank 0");
    expect_bad_model(mm_last, "model.decoder_last_pipeline_num_layers",
                     "the 20 blocks the stages give pipeline rank 1");
    expect_bad_model(mm_both_kinds, "model.decoder_first_pipeline_num_layers", "one kind");
    expect_bad_model(mm_balance, "model.balance", "uneven split");
    expect_bad_model(mm_first_big, "model.decoder_first_pipeline_num_layers", NULL);
    /* a plan of a profile that is no transformer's */
    plan *pl = good_plan();
    cJSON *j = plan_to_json(pl);
    plan_free(pl);
    pl = layout_plan(LLAMA, &(layout3d_options){ .precision = DEV_BF16, .checkpoint_layers = -1,
                                                   .schedule = -1 });
    cJSON_AddItemToObject(j, "model", plan_model_to_json(pl->model));
    plan_free(pl);
    plumb_err err;
    err_clear(&err);
    cr_expect_null(plan_from_json(j, "p.json", &err));
    cr_expect(strstr(err.msg, "p.json: model: expected a plan of a transformer's layout") ==
              err.msg, "%s", err.msg);
    cJSON_Delete(j);
}

/* checkpoint_layers of a transformer's plan file (rank 0 holding 12 blocks, rank 1 20):
 * up to the blocks of its largest stage with recompute full, as plan --model's
 * --checkpoint-layers (plan_checkpoint_check); more, or any with another recompute, is
 * refused as one line naming the file and the field. */
static void mm_ckpt(cJSON *r, int k, const char *rc)
{
    set(r, "checkpoint_layers", cJSON_CreateNumber(k));
    set(r, "recompute", cJSON_CreateString(rc));
}
static void mm_ckpt_over(cJSON *m, cJSON *r) { (void)m, mm_ckpt(r, 21, "full"); }
static void mm_ckpt_huge(cJSON *m, cJSON *r) { (void)m, mm_ckpt(r, 1000, "full"); }
static void mm_ckpt_none(cJSON *m, cJSON *r) { (void)m, mm_ckpt(r, 1, "none"); }
static void mm_ckpt_selective(cJSON *m, cJSON *r) { (void)m, mm_ckpt(r, 20, "selective"); }

Test(plan_bad, checkpoint_layers_against_the_stages_and_recompute)
{
    expect_bad_model(mm_ckpt_over, "checkpoint_layers",
                     "expected at most the 20 blocks of a virtual stage (got 21)");
    expect_bad_model(mm_ckpt_huge, "checkpoint_layers",
                     "expected at most the 20 blocks of a virtual stage (got 1000)");
    expect_bad_model(mm_ckpt_none, "checkpoint_layers",
                     "expected 0 with recompute none (the interval of full recomputation's "
                     "checkpoints) (got 1)");
    expect_bad_model(mm_ckpt_selective, "checkpoint_layers", "with recompute selective");
    /* the largest stage's 20 and 0 (the stage's input alone) are taken */
    cJSON *j = split_plan_json();
    plumb_err err;
    for (int k = 0; k <= 20; k += 20) {
        mm_ckpt(j, k, "full");
        err_clear(&err);
        plan *b = plan_from_json(j, "p.json", &err);
        cr_expect_not_null(b, "checkpoint_layers %d: %s", k, err.msg);
        if (b) cr_expect_eq(b->checkpoint_layers, k);
        plan_free(b);
    }
    cJSON_Delete(j);
}

/* A plan of a profile that says its precision and loss (an analytic one) takes both
 * (plan_new), writes and reads them back, and takes them where its file leaves them out;
 * a file whose "precision" or "cross_entropy" contradicts the embedded profile's is refused,
 * one line naming the file and the field. A profile without them (measured, PipeDream's)
 * leaves the plan's own: fp32, unfused. */
Test(plan_bad, precision_and_loss_against_the_profiles)
{
    profile *p = small_profile(6);
    cluster *c = small_cluster();
    plan *pl = plan_new(p, c, 1);
    cr_assert_not_null(pl);
    cr_expect_eq(pl->precision, DEV_FP32, "no precision said: fp32");
    cr_expect_eq(pl->cross_entropy, 0);
    plan_free(pl);
    p->precision = DEV_BF16;
    p->cross_entropy = 2; /* native */
    pl = plan_new(p, c, 1);
    cr_assert_not_null(pl);
    cr_expect_eq(pl->precision, DEV_BF16);
    cr_expect_eq(pl->cross_entropy, 2);
    int devs[] = {0};
    cr_assert_eq(plan_set_stage(pl, 0, 0, 5, 1, devs), 0);
    plumb_err err;
    cr_assert_eq(plan_validate(pl, "p", &err), 0, "%s", err.msg);
    round_trip(pl);
    cJSON *j = plan_to_json(pl);
    cr_assert_not_null(j);
    /* left out: the profile's */
    cJSON_DeleteItemFromObject(j, "precision");
    cJSON_DeleteItemFromObject(j, "cross_entropy");
    plan *q = plan_from_json(j, "p.json", &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_expect(plan_equal(pl, q));
    plan_free(q);
    cJSON_AddStringToObject(j, "precision", "fp32");
    err_clear(&err);
    cr_expect_null(plan_from_json(j, "p.json", &err));
    cr_expect_str_eq(err.msg, "p.json: precision: expected bf16, the precision the profile "
                     "was made at (got fp32)");
    cJSON_ReplaceItemInObject(j, "precision", cJSON_CreateString("bf16"));
    cJSON_AddStringToObject(j, "cross_entropy", "unfused");
    err_clear(&err);
    cr_expect_null(plan_from_json(j, "p.json", &err));
    cr_expect_str_eq(err.msg, "p.json: cross_entropy: expected native, the loss the profile "
                     "prices (got unfused)");
    cJSON_Delete(j);
    /* in memory too */
    pl->precision = DEV_FP8;
    cr_expect_eq(plan_validate(pl, "m", &err), -1);
    cr_expect_str_eq(err.msg, "m: precision: expected bf16, the precision the profile was "
                     "made at (got fp8)");
    plan_free(pl);
    profile_free(p);
    cluster_free(c);
}
