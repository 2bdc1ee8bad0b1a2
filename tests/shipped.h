/* shipped.h: the shipped profiles and clusters that the model-agreement tests
 * (test_model_terms.c, test_memory_terms.c, test_planner_native.c) walk, and those a test
 * names, loaded. Header-only: each test file is its own binary. */
#ifndef PLUMB_TESTS_SHIPPED_H
#define PLUMB_TESTS_SHIPPED_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/cluster.h"
#include "core/profile.h"

#define PROFILE_DIR "profiles/pipedream"
#define CLUSTER_DIR "profiles/clusters"

/* The JSON files of dir (sorted) into names, at most max; returns how many. Fails the
 * test when dir cannot be opened. */
static inline int list_json(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".json"))
            snprintf(names[n++], 256, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Calls fn(profile path, cluster path, profile, cluster, arg) for every shipped profile on
 * every shipped cluster (the DGX files, docs/llm.md: their first 4 servers), each loaded
 * once; fails the test when a file does not load or fewer than 10 profiles or 3 clusters
 * are found. */
typedef void (*shipped_fn)(const char *pname, const char *cname, const profile *p,
                           const cluster *c, void *arg);
static inline void shipped_each(shipped_fn fn, void *arg)
{
    static char profs[64][256], clus[16][256];
    int np = list_json(PROFILE_DIR, profs, 64), nc = list_json(CLUSTER_DIR, clus, 16);
    cr_assert_geq(np, 10);
    cr_assert_geq(nc, 3);
    for (int a = 0; a < nc; a++) {
        plumb_err e;
        cluster *c = cluster_load_cut(clus[a], 64, 4, &e);
        cr_assert_not_null(c, "%s", e.msg);
        for (int b = 0; b < np; b++) {
            profile *p = profile_load(profs[b], &e);
            cr_assert_not_null(p, "%s", e.msg);
            fn(profs[b], clus[a], p, c, arg);
            profile_free(p);
        }
        cluster_free(c);
    }
}

/* How many shipped profiles there are (the JSON files of PROFILE_DIR). */
static inline int shipped_profiles(void)
{
    static char names[64][256];
    return list_json(PROFILE_DIR, names, 64);
}

/* The shipped profile PROFILE_DIR/name.json, loaded; fails the test when it cannot be.
 * The caller frees it with profile_free. */
static inline profile *shipped_profile(const char *name)
{
    char path[256];
    plumb_err e;
    snprintf(path, sizeof path, PROFILE_DIR "/%s.json", name);
    profile *p = profile_load(path, &e);
    cr_assert_not_null(p, "%s", e.msg);
    return p;
}

/* The shipped cluster CLUSTER_DIR/name.json, loaded; fails the test when it cannot be.
 * The caller frees it with cluster_free. */
static inline cluster *shipped_cluster(const char *name)
{
    char path[256];
    plumb_err e;
    snprintf(path, sizeof path, CLUSTER_DIR "/%s.json", name);
    cluster *c = cluster_load(path, &e);
    cr_assert_not_null(c, "%s", e.msg);
    return c;
}

/* The profile file prof and the cluster file clus, loaded into *p and *c; fails the test
 * when either cannot be. The caller frees them with profile_free and cluster_free. */
static inline void load_pair(const char *prof, const char *clus, profile **p, cluster **c)
{
    plumb_err e;
    *p = profile_load(prof, &e);
    cr_assert(*p, "%s", e.msg);
    *c = cluster_load(clus, &e);
    cr_assert(*c, "%s", e.msg);
}

#endif
