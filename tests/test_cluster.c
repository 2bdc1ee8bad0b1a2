/* test_cluster.c: plumb-cluster/1 loading, saving and queries: every shipped cluster file
 * round-trips (load, save, load, equal), unit conversions are exact and invertible, the
 * device-numbering helpers agree with the hierarchy, and each class of bad input is rejected
 * with the exact field path, leaving no file behind on a failed save. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/tmpdir.h"
#include "core/cluster.h"
#include "core/json.h"
#include "core/units.h"

#define CLUSTER_DIR "profiles/clusters"

static char *make_tmpdir(void) { return make_tmpdir_named("cluster"); }

static cluster *from_text(const char *text, plumb_err *err)
{
    cJSON *root = json_parse_text("t.json", text, strlen(text), err);
    if (!root) return NULL;
    cluster *c = cluster_from_json(root, "t.json", err);
    cJSON_Delete(root);
    return c;
}

/* Asserts that text is rejected and that the message names file t.json and `path`
 * ("t.json: PATH: ..."), plus `word` somewhere when given. */
static void expect_bad(const char *text, const char *path, const char *word)
{
    plumb_err err;
    err_clear(&err);
    cluster *c = from_text(text, &err);
    cr_assert_null(c, "accepted bad input: %s", text);
    char want[256];
    if (*path) snprintf(want, sizeof want, "t.json: %s: ", path);
    else snprintf(want, sizeof want, "t.json: ");
    cr_assert(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
    if (word) cr_assert(strstr(err.msg, word) != NULL, "message \"%s\" lacks \"%s\"", err.msg, word);
    cr_assert(strchr(err.msg, '\n') == NULL);
}

#define HEAD "{\"format\":\"plumb-cluster/1\",\"name\":\"x\","
#define LV0 "{\"name\":\"nvlink\",\"count\":4,\"bandwidth_gbit_per_s\":200,\"latency_us\":3}"
#define LV1 "{\"name\":\"eth\",\"count\":2,\"bandwidth_gbit_per_s\":25,\"latency_us\":50}"
#define TYPES "\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,\"speed\":1}]"

static const char *GOOD = HEAD "\"levels\":[" LV0 "," LV1 "]," TYPES ",\"device_type\":\"V100\"}";

/* ---- round trips --------------------------------------------------------------------- */

static void round_trip(const cluster *c, const char *dir)
{
    plumb_err err;
    char path[512];
    snprintf(path, sizeof path, "%s/rt.json", dir);
    cr_assert_eq(cluster_save(c, path, &err), 0, "%s", err.msg);
    cluster *b = cluster_load(path, &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert(cluster_equal(c, b), "reloaded cluster differs");
    /* and a second save gives the identical text */
    char path2[512];
    snprintf(path2, sizeof path2, "%s/rt2.json", dir);
    cr_assert_eq(cluster_save(b, path2, &err), 0, "%s", err.msg);
    cJSON *j1 = json_load_file(path, &err), *j2 = json_load_file(path2, &err);
    cr_assert(cJSON_Compare(j1, j2, 1));
    cJSON_Delete(j1);
    cJSON_Delete(j2);
    cluster *k = cluster_clone(b);
    cr_assert(cluster_equal(k, c));
    cluster_free(k);
    cluster_free(b);
}

Test(cluster, shipped_files_round_trip)
{
    DIR *d = opendir(CLUSTER_DIR);
    cr_assert_not_null(d, "run from the project root (%s missing)", CLUSTER_DIR);
    char *tmp = make_tmpdir();
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[512];
        plumb_err err;
        snprintf(path, sizeof path, "%s/%s", CLUSTER_DIR, e->d_name);
        cluster *c = cluster_load(path, &err);
        cr_assert_not_null(c, "%s", err.msg);
        cr_assert_eq(cluster_validate(c, path, &err), 0, "%s", err.msg);
        cr_assert_gt(c->ndevices, 0);
        cr_assert(c->description[0] != '\0', "%s has no description", path);
        round_trip(c, tmp);
        cluster_free(c);
        n++;
    }
    closedir(d);
    rm_tree(tmp);
    cr_assert_geq(n, 5, "expected at least 5 shipped clusters, found %d", n);
}

Test(cluster, units_convert_exactly)
{
    plumb_err err;
    cluster *c = cluster_load(CLUSTER_DIR "/h200-4x8.json", &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(c->ndevices, 32);
    cr_assert_eq(c->nservers, 4);
    cr_assert_eq(c->nlevels, 2);
    cr_assert_eq(c->levels[0].bandwidth_Bps, 3600e9 / 8);      /* 450 GB/s */
    cr_assert_eq(c->levels[0].egress_Bps, c->levels[0].bandwidth_Bps); /* default */
    cr_assert_eq(c->levels[1].bandwidth_Bps, 50e9);             /* 400 Gb/s */
    cr_assert_eq(c->levels[1].egress_Bps, 400e9);               /* 3200 Gb/s */
    cr_assert_eq(c->levels[1].latency_s, 5 * 1e-6);
    cr_assert_eq(c->types[0].memory_bytes, 135.0 * 1073741824.0);
    cr_assert_eq(c->types[0].peak_flops, 67e12);
    cluster_free(c);
}

/* Load -> save -> load keeps awkward values exactly (conversions are inverted on save). */
Test(cluster, awkward_values_round_trip)
{
    char *tmp = make_tmpdir();
    unsigned long long s = 88172645463325252ULL;
    for (int i = 0; i < 300; i++) {
        double v[5];
        for (int k = 0; k < 5; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
            /* awkward mantissas in [1, 2), times 1e-3 .. 1e4: within core/bounds.h */
            v[k] = (1 + ldexp((double)(s >> 11), -53)) * pow(10, (int)(s % 8) - 3);
        }
        char text[1024];
        snprintf(text, sizeof text,
                 HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":%.17g,"
                 "\"latency_us\":%.17g,\"egress_gbit_per_s\":%.17g}],\"device_types\":[{\"name\":"
                 "\"T\",\"memory_gib\":%.17g,\"speed\":1,\"peak_tflops\":%.17g}],\"device_type\":\"T\"}",
                 v[0], v[1], v[2], v[3], v[4]);
        plumb_err err;
        cluster *c = from_text(text, &err);
        cr_assert_not_null(c, "%s", err.msg);
        round_trip(c, tmp);
        cluster_free(c);
    }
    rm_tree(tmp);
}

Test(cluster, heterogeneous_servers)
{
    plumb_err err;
    cluster *c = cluster_load(CLUSTER_DIR "/hetero-2xh200-2xv100.json", &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(c->nservers, 4);
    cr_assert_eq(c->ndevices, 32);
    cr_assert_str_eq(cluster_device_type(c, 0)->name, "H200-SXM-141GB");
    cr_assert_str_eq(cluster_device_type(c, 15)->name, "H200-SXM-141GB");
    cr_assert_str_eq(cluster_device_type(c, 16)->name, "V100-SXM2-16GB");
    cr_assert_str_eq(cluster_device_type(c, 31)->name, "V100-SXM2-16GB");
    cr_assert_null(cluster_device_type(c, 32));
    cr_assert_null(cluster_device_type(c, -1));
    /* the saved form keeps the per-server list */
    cJSON *j = cluster_to_json(c);
    cr_assert_not_null(cJSON_GetObjectItem(j, "servers"));
    cr_assert_null(cJSON_GetObjectItem(j, "device_type"));
    cJSON_Delete(j);
    cluster_free(c);
}

Test(cluster, device_numbering)
{
    plumb_err err;
    const char *t = HEAD "\"levels\":[" LV0 "," LV1 ",{\"name\":\"dc\",\"count\":3,"
                    "\"bandwidth_gbit_per_s\":1,\"latency_us\":1000}]," TYPES
                    ",\"device_type\":\"V100\"}";
    cluster *c = from_text(t, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(c->ndevices, 24);
    cr_assert_eq(c->nservers, 6);
    cr_assert_eq(cluster_group_size(c, 0), 4);
    cr_assert_eq(cluster_group_size(c, 1), 8);
    cr_assert_eq(cluster_group_size(c, 2), 24);
    cr_assert_eq(cluster_group_size(c, 3), 0);
    cr_assert_eq(cluster_server_of(c, 0), 0);
    cr_assert_eq(cluster_server_of(c, 7), 1);
    cr_assert_eq(cluster_server_of(c, 23), 5);
    cr_assert_eq(cluster_level_between(c, 5, 5), -1);
    cr_assert_eq(cluster_level_between(c, 0, 3), 0);
    cr_assert_eq(cluster_level_between(c, 3, 4), 1);
    cr_assert_eq(cluster_level_between(c, 0, 7), 1);
    cr_assert_eq(cluster_level_between(c, 7, 8), 2);
    cr_assert_eq(cluster_level_between(c, 23, 0), 2);
    cluster_free(c);
}

Test(cluster, clone_and_equal_see_every_field)
{
    plumb_err err;
    cluster *a = from_text(GOOD, &err);
    cr_assert_not_null(a, "%s", err.msg);
    cluster *b = cluster_clone(a);
    cr_assert(cluster_equal(a, b));
    b->levels[1].latency_s *= 2;
    cr_assert_not(cluster_equal(a, b));
    cluster_free(b);
    b = cluster_clone(a);
    b->types[0].speed = 1.5;
    cr_assert_not(cluster_equal(a, b));
    cluster_free(b);
    b = cluster_clone(a);
    free(b->name);
    b->name = strdup("y");
    cr_assert_not(cluster_equal(a, b));
    cluster_free(b);
    cluster_free(a);
}

/* ---- bad input, one test per class --------------------------------------------------- */

Test(cluster_bad, malformed_json)
{
    expect_bad("{\"format\": \"plumb-cluster/1\", \"name\": }", "", NULL);
}

Test(cluster_bad, unknown_format_version)
{
    expect_bad("{\"format\":\"plumb-cluster/2\",\"name\":\"x\"}", "format", "plumb-cluster/1");
    expect_bad("{\"name\":\"x\"}", "format", "missing");
    expect_bad("[1,2]", "", "object");
}

Test(cluster_bad, wrong_type)
{
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":\"4\",\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].count", "integer");
    expect_bad(HEAD "\"levels\":{}," TYPES ",\"device_type\":\"V100\"}", "levels", "array");
    expect_bad(HEAD "\"levels\":[" LV0 "]," TYPES ",\"device_type\":7}", "device_type", "string");
    expect_bad(HEAD "\"levels\":[" LV0 ",3]," TYPES ",\"device_type\":\"V100\"}", "levels[1]",
               "object");
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2.5,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].count", "integer");
}

Test(cluster_bad, missing_field)
{
    expect_bad(HEAD "\"levels\":[" LV0 ",{\"name\":\"eth\",\"count\":2,\"latency_us\":50}],"
               TYPES ",\"device_type\":\"V100\"}",
               "levels[1].bandwidth_gbit_per_s", "missing");
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"speed\":1}],"
               "\"device_type\":\"V100\"}", "device_types[0].memory_gib", "missing");
    expect_bad(HEAD "\"levels\":[" LV0 "]," TYPES "}", "device_type", "missing");
    expect_bad("{\"format\":\"plumb-cluster/1\",\"levels\":[" LV0 "]," TYPES
               ",\"device_type\":\"V100\"}", "name", "missing");
}

Test(cluster_bad, negative)
{
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":-16,"
               "\"speed\":1}],\"device_type\":\"V100\"}", "device_types[0].memory_gib", "> 0");
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":-1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].latency_us", ">= 0");
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":-2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}", "levels[0].count", NULL);
}

Test(cluster_bad, zero_where_impossible)
{
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":0,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}", "levels[0].count", NULL);
    expect_bad(HEAD "\"levels\":[" LV0 ",{\"name\":\"e\",\"count\":2,\"bandwidth_gbit_per_s\":0,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[1].bandwidth_gbit_per_s", "> 0");
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":0}],\"device_type\":\"V100\"}", "device_types[0].speed", "> 0");
    expect_bad(HEAD "\"levels\":[]," TYPES ",\"device_type\":\"V100\"}", "levels", NULL);
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[],\"device_type\":\"V100\"}",
               "device_types", NULL);
    expect_bad(HEAD "\"levels\":[" LV0 "]," TYPES ",\"servers\":[]}", "servers", NULL);
}

Test(cluster_bad, non_finite)
{
    /* JSON has no NaN or Infinity literal; 1e999 parses as infinity */
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1e999}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].latency_us", "finite");
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":1,\"peak_tflops\":-1e999}],\"device_type\":\"V100\"}",
               "device_types[0].peak_tflops", "finite");
    /* finite in the file, infinite once converted to bytes/s */
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":1e308,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].bandwidth_gbit_per_s", "finite");
}

Test(cluster_bad, sizes_that_overflow)
{
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":1024,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1},{\"name\":\"b\",\"count\":1024,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1},{\"name\":\"c\",\"count\":2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[2].count", "1048576");
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":1e12,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1}]," TYPES ",\"device_type\":\"V100\"}", "levels[0].count", NULL);
    char text[4096] = HEAD "\"levels\":[";
    for (int i = 0; i < CLUSTER_MAX_LEVELS + 1; i++)
        strcat(text, i ? ",{\"name\":\"l\",\"count\":1,\"bandwidth_gbit_per_s\":1,\"latency_us\":1}"
                       : "{\"name\":\"l\",\"count\":1,\"bandwidth_gbit_per_s\":1,\"latency_us\":1}");
    strcat(text, "]," TYPES ",\"device_type\":\"V100\"}");
    expect_bad(text, "levels", "1 to 8 levels");
}

Test(cluster_bad, unknown_or_duplicate_device_type)
{
    expect_bad(HEAD "\"levels\":[" LV0 "]," TYPES ",\"device_type\":\"A100\"}", "device_type",
               "\"A100\"");
    expect_bad(HEAD "\"levels\":[" LV0 "," LV1 "]," TYPES ",\"servers\":[{\"device_type\":\"V100\","
               "\"count\":1},{\"device_type\":\"H200\",\"count\":1}]}",
               "servers[1].device_type", "\"H200\"");
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":1},{\"name\":\"V100\",\"memory_gib\":32,\"speed\":1}],"
               "\"device_type\":\"V100\"}", "device_types[1].name", "unique");
}

Test(cluster_bad, server_totals_that_do_not_match)
{
    expect_bad(HEAD "\"levels\":[" LV0 "," LV1 "]," TYPES ",\"servers\":[{\"device_type\":\"V100\","
               "\"count\":1}]}", "servers", "total 2");
    expect_bad(HEAD "\"levels\":[" LV0 "," LV1 "]," TYPES ",\"servers\":[{\"device_type\":\"V100\","
               "\"count\":2},{\"device_type\":\"V100\",\"count\":1}]}", "servers[1].count",
               "total 2");
    expect_bad(HEAD "\"levels\":[" LV0 "," LV1 "]," TYPES ",\"device_type\":\"V100\","
               "\"servers\":[{\"device_type\":\"V100\",\"count\":2}]}", "servers", "not both");
}

Test(cluster_bad, unknown_field)
{
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1,\"egress_gbps\":3}]," TYPES ",\"device_type\":\"V100\"}",
               "levels[0].egress_gbps", "unknown field");
}

Test(cluster_bad, failed_save_leaves_no_file)
{
    plumb_err err;
    cluster *c = from_text(GOOD, &err);
    cr_assert_not_null(c, "%s", err.msg);
    char *tmp = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/out.json", tmp);
    /* invalid in memory: refused before anything is written */
    c->levels[1].count = 0;
    cr_assert_eq(cluster_save(c, path, &err), -1);
    cr_assert(strstr(err.msg, "levels[1].count") != NULL, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 0);
    c->levels[1].count = 2;
    c->types[0].memory_bytes = NAN;
    cr_assert_eq(cluster_save(c, path, &err), -1);
    cr_assert(strstr(err.msg, "device_types[0].memory_gib") != NULL, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 0);
    c->types[0].memory_bytes = 1e9;
    /* unwritable place: nothing left there either */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/out.json", tmp);
    cr_assert_eq(cluster_save(c, bad, &err), -1);
    cr_assert_eq(count_files(tmp), 0);
    cr_assert_eq(cluster_save(c, path, &err), 0, "%s", err.msg);
    cr_assert_eq(count_files(tmp), 1);
    cluster_free(c);
    rm_tree(tmp);
}

Test(cluster_bad, unreadable_file)
{
    plumb_err err;
    cluster *c = cluster_load("/nonexistent/plumb/c.json", &err);
    cr_assert_null(c);
    cr_assert(strstr(err.msg, "/nonexistent/plumb/c.json: cannot open") != NULL, "%s", err.msg);
}

/* Values finite in the file but outside core/bounds.h (a 1e-308 Gbit/s link once gave the
 * simulator NaN times, a crash in plumb ui and an endless SVG) get one line naming the
 * field and the range; the ends of each range load. */
Test(cluster_bad, out_of_physical_bounds)
{
#define LVX(bw, lat) "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":" bw \
                     ",\"latency_us\":" lat "}],"
#define TYX(mem, speed) "\"device_types\":[{\"name\":\"V100\",\"memory_gib\":" mem \
                        ",\"speed\":" speed "}],\"device_type\":\"V100\"}"
    expect_bad(HEAD LVX("1e-308", "1") TYX("16", "1"), "levels[0].bandwidth_gbit_per_s",
               "expected a bandwidth from 1e-06 to 100000 Gbit/s (1 kbit/s to 100 Tbit/s) "
               "(got 1e-308)");
    expect_bad(HEAD LVX("2e5", "1") TYX("16", "1"), "levels[0].bandwidth_gbit_per_s",
               "(got 200000)");
    expect_bad(HEAD "\"levels\":[{\"name\":\"a\",\"count\":2,\"bandwidth_gbit_per_s\":1,"
               "\"latency_us\":1,\"egress_gbit_per_s\":1e-7}]," TYX("16", "1"),
               "levels[0].egress_gbit_per_s", "from 1e-06 to 100000 Gbit/s");
    expect_bad(HEAD LVX("1", "1.5e7") TYX("16", "1"), "levels[0].latency_us",
               "expected a latency from 0 to 1e+07 us (10 s) (got 15000000)");
    expect_bad(HEAD LVX("1", "1") TYX("1e-300", "1"), "device_types[0].memory_gib",
               "expected a memory size from 0.000976562 to 1.04858e+06 GiB (1 MiB to 1 PiB)");
    expect_bad(HEAD LVX("1", "1") TYX("2e6", "1"), "device_types[0].memory_gib", "(got 2000000)");
    expect_bad(HEAD LVX("1", "1") TYX("16", "1e-308"), "device_types[0].speed",
               "expected a relative speed from 0.001 to 1000 (got 1e-308)");
    expect_bad(HEAD LVX("1", "1") TYX("16", "1e4"), "device_types[0].speed", "(got 10000)");
    expect_bad(HEAD LVX("1", "1") "\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":1,\"peak_tflops\":1e-300}],\"device_type\":\"V100\"}",
               "device_types[0].peak_tflops", "expected a peak from 1e-06 to 1e+09 TFLOP/s");
    plumb_err err;
    const char *ends[] = {
        HEAD LVX("1e-6", "0") TYX("0.0009765625", "0.001"),
        HEAD LVX("1e5", "1e7") TYX("1048576", "1000"),
    };
    for (int i = 0; i < 2; i++) {
        cluster *c = from_text(ends[i], &err);
        cr_assert_not_null(c, "%s", err.msg);
        cluster_free(c);
    }
#undef LVX
#undef TYX
}

/* A device type's CPU cores: optional (0 when absent), an integer >= 1, kept by a round
 * trip through a file and compared by cluster_equal. */
Test(cluster, cores)
{
    plumb_err err;
    cluster *c = from_text(GOOD, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_expect_eq(c->types[0].cores, 0);
    cluster_free(c);
    c = from_text(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\","
                  "\"memory_gib\":16,\"speed\":1,\"cores\":2}],\"device_type\":\"V100\"}", &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_expect_eq(c->types[0].cores, 2);
    char *dir = make_tmpdir();
    round_trip(c, dir);
    cluster *d = cluster_clone(c);
    cr_assert_not_null(d);
    cr_expect(cluster_equal(c, d));
    d->types[0].cores = 3;
    cr_expect(!cluster_equal(c, d));
    cluster_free(d);
    cluster_free(c);
    rm_tree(dir);
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":1,\"cores\":0}],\"device_type\":\"V100\"}", "device_types[0].cores",
               NULL);
    expect_bad(HEAD "\"levels\":[" LV0 "],\"device_types\":[{\"name\":\"V100\",\"memory_gib\":16,"
               "\"speed\":1,\"cores\":1.5}],\"device_type\":\"V100\"}", "device_types[0].cores",
               NULL);
}

/* cluster_load_cut: a cluster over the limit becomes its first servers, equal to what
 * cluster_take_gpus makes of the whole file; one within the limit loads as it is; a
 * missing file is cluster_load's error. */
Test(cluster, load_cut_keeps_first_servers_over_the_limit)
{
    plumb_err e = {{0}};
    const char *dgx = "profiles/clusters/dgx-h100.json";
    const char *a = "profiles/clusters/cluster-a-4x4.json";
    cluster *whole = cluster_load(dgx, &e);
    cr_assert_not_null(whole, "%s", e.msg);
    cr_assert_gt(whole->ndevices, 64);
    cluster *cut = cluster_load_cut(dgx, 64, 4, &e);
    cr_assert_not_null(cut, "%s", e.msg);
    cr_expect_eq(cut->ndevices, 4 * whole->levels[0].count);
    cr_expect_eq(cut->nservers, 4);
    cluster *ref = cluster_take_gpus(whole, 4 * whole->levels[0].count, dgx, &e);
    cr_assert_not_null(ref, "%s", e.msg);
    cr_expect(cluster_equal(cut, ref));
    cluster *small = cluster_load_cut(a, 64, 4, &e), *plain = cluster_load(a, &e);
    cr_assert(small && plain, "%s", e.msg);
    cr_expect(cluster_equal(small, plain), "within the limit: as loaded");
    cr_expect_null(cluster_load_cut("/nonexistent/c.json", 64, 4, &e));
    cr_expect(strstr(e.msg, "/nonexistent/c.json") != NULL, "%s", e.msg);
    cluster_free(whole);
    cluster_free(cut);
    cluster_free(ref);
    cluster_free(small);
    cluster_free(plain);
}

/* core/units.c's conversions back to file units give a file value that converts to the
 * very same double, also where dividing alone would not (checked: the plain quotient
 * misses for some of these values, so the search is exercised), and json_get_converted
 * refuses a value that leaves the finite range once converted. */
Test(cluster, units_invert_exactly_and_converted_reads)
{
    double (*fwd[])(double) = {units_gbit_to_Bps, units_gbyte_to_Bps, units_us_to_s,
                               units_tflops_to_flops};
    double (*back[])(double) = {units_Bps_to_gbit, units_Bps_to_gbyte, units_s_to_us,
                                units_flops_to_tflops};
    int missed = 0, n = 0;
    for (int f = 0; f < 4; f++)
        for (double x = 0.1; x < 1e4; x = x * 1.37 + 0.013, n++) {
            double v = fwd[f](x);
            cr_expect_eq(fwd[f](back[f](v)), v, "conversion %d of %.17g", f, x);
            double plain = f == 0 ? v * 8.0 / 1e9 : f == 1 ? v / 1e9 : f == 2 ? v * 1e6 : v / 1e12;
            missed += fwd[f](plain) != v;
        }
    cr_expect_gt(missed, 0, "the plain quotient never missed in %d values", n);
    cr_expect_eq(units_bytes_to_gib(units_gib_to_bytes(3.3)), 3.3);
    cr_expect_eq(units_invert(NAN, units_us_to_s, INFINITY), INFINITY);

    plumb_err e = {{0}};
    cJSON *o = cJSON_Parse("{\"a\":1e300,\"b\":2,\"z\":0}");
    cr_assert_not_null(o);
    jctx jc = {"f.json", &e};
    double v = -1;
    int present = -1;
    cr_expect_eq(json_get_converted(&jc, o, "x", "a", 1, J_POS, units_tflops_to_flops, &v, NULL),
                 -1);
    cr_expect(strstr(e.msg, "x.a") && strstr(e.msg, "stays finite"), "%s", e.msg);
    cr_expect_eq(json_get_converted(&jc, o, "x", "b", 1, J_POS, units_us_to_s, &v, &present), 0);
    cr_expect(v == 2e-6 && present == 1);
    cr_expect_eq(json_get_converted(&jc, o, "x", "c", 0, J_POS, NULL, &v, &present), 0);
    cr_expect(v == 2e-6 && present == 0, "absent and optional: unchanged");
    cr_expect_eq(json_get_converted(&jc, o, "x", "z", 1, J_POS, NULL, &v, NULL), -1);
    cJSON_Delete(o);
}

/* What a cluster's devices are called in text: GPUs unless the types give CPU cores. */
Test(cluster, device_noun_says_cpu_workers_or_gpus)
{
    plumb_err err = {{0}};
    cluster *cpu = cluster_load("examples/clusters/cpu-1x8.json", &err);
    cluster *gpu = cluster_load(CLUSTER_DIR "/hetero-2xh200-2xv100.json", &err);
    cr_assert(cpu && gpu, "%s", err.msg);
    cr_assert_str_eq(cluster_device_noun(cpu), "CPU worker");
    cr_assert_str_eq(cluster_device_noun(gpu), "GPU");
    gpu->types[0].cores = 4; /* one type of two with cores: a mix */
    cr_assert_str_eq(cluster_device_noun(gpu), "device");
    cr_assert_str_eq(cluster_device_noun(NULL), "device");
    cluster_free(cpu);
    cluster_free(gpu);
}
