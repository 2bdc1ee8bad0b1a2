/* test_native_memo.c: the native planner's simulation memo (planner/native_memo.c) keys
 * every figure of a device type the simulator reads: two cluster files that differ only
 * in one such figure never share an entry. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "planner/native.h"
#include "planner/native_impl.h"
#include "tests/planfix.h"
#include "tests/shipped.h"

/* dgx-h100.json with its device type changed by `edit`, saved to a file of its own and
 * loaded back (the way a second cluster file reaches the planner); fails the test when
 * it cannot be. The caller frees it with cluster_free. */
static cluster *edited_dgx(void (*edit)(device_type *t), const char *name)
{
    plumb_err e;
    cluster *c = shipped_cluster("dgx-h100");
    if (edit) edit(&c->types[0]);
    char path[256];
    snprintf(path, sizeof path, "/tmp/plumb_memo_%ld_%s.json", (long)getpid(), name);
    cr_assert(cluster_save(c, path, &e) == 0, "%s", e.msg);
    cluster_free(c);
    c = cluster_load(path, &e);
    remove(path);
    cr_assert(c, "%s", e.msg);
    return c;
}

static void fp8_lower(device_type *t) { t->eff.gemm_fp8 = 0.4; }
static void tiles_other(device_type *t) { t->tiling = (device_tiling){100, 128, 256}; }

/* VGG-16's data-parallel plan on the first 8 devices of a (8 microbatches of the
 * profiled size); fails the test when it cannot be made. */
static plan *dp8(const profile *p, const cluster *c)
{
    plumb_err e;
    plan *pl = native_dp_plan(p, c, 8, &e);
    cr_assert(pl, "%s", e.msg);
    pl->microbatch_size = p->minibatch;
    pl->microbatches = 8;
    return pl;
}

/* The same plan on dgx-h100.json and on a copy whose H100 has another
 * efficiency.gemm_fp8 (0.5325 -> 0.4), or another gemm_tiling, misses the entry the
 * first put; a copy left as it is hits it. */
Test(native_memo, a_device_types_gemm_fp8_and_tiling_are_in_the_key)
{
    profile *p = shipped_profile("vgg16");
    cluster *a = edited_dgx(NULL, "a"), *same = edited_dgx(NULL, "same");
    cluster *fp8 = edited_dgx(fp8_lower, "fp8"), *tiles = edited_dgx(tiles_other, "tiles");
    cr_assert(a->types[0].eff.gemm_fp8 > 0.5 && fp8->types[0].eff.gemm_fp8 == 0.4);
    plan *pa = dp8(p, a), *ps = dp8(p, same), *pf = dp8(p, fp8), *pt = dp8(p, tiles);
    native_options o;
    native_options_init(&o);
    nm_sim_memo *mo = nm_sim_memo_new();
    cr_assert(mo);
    int dev[1] = {0};
    double mem[1] = {1};
    nm_sim_fig f = {123.0, 1.0, 0.1, 1.0, 1, 1, dev, mem};
    cr_assert_null(nm_sim_memo_get(mo, pa, &o));
    nm_sim_memo_put(mo, &f);
    const nm_sim_fig *k = nm_sim_memo_get(mo, ps, &o);
    cr_assert(k, "the same file's plan should hit");
    cr_expect_eq(k->thr, 123.0);
    cr_expect_null(nm_sim_memo_get(mo, pf, &o), "another gemm_fp8 is answered");
    cr_expect_null(nm_sim_memo_get(mo, pt, &o), "another gemm_tiling is answered");
    nm_sim_memo_free(mo);
    plan_free(pa), plan_free(ps), plan_free(pf), plan_free(pt);
    cluster_free(a), cluster_free(same), cluster_free(fp8), cluster_free(tiles);
    profile_free(p);
}
