/* batches.h: microbatches for the training tests, taken from the data set in order, and
 * the fixture they come from (a model and its data set). Header-only: each test file is
 * its own binary. */
#ifndef PLUMB_TESTS_BATCHES_H
#define PLUMB_TESTS_BATCHES_H

#include <criterion/criterion.h>

#include "exec/data.h"
#include "exec/model.h"

/* Microbatch g of mb samples: samples [g mb, (g + 1) mb) of d, wrapping around its end,
 * into x (mb, sample_numel) and y (mb, targets_per_sample). */
static inline void gather_in_order(const dataset *d, int mb, int g, float *x, int32_t *y)
{
    int idx[64];
    cr_assert(mb >= 1 && mb <= 64, "microbatch of %d samples", mb);
    for (int b = 0; b < mb; b++) idx[b] = (g * mb + b) % d->n;
    data_gather(d, idx, mb, x, y);
}

/* A training test's model, its data set, and the samples per microbatch batch_in_order
 * takes. */
typedef struct fixture {
    model *m;
    dataset *d;
    int mb;
} fixture;

/* The runtime's batch callback (rt_cfg.batch) with a fixture as user: microbatch g is
 * samples [g mb, (g + 1) mb) of its data set, in order (gather_in_order). Returns 0. */
static inline int batch_in_order(void *user, int g, float *x, int32_t *y, plumb_err *err)
{
    (void)err;
    const fixture *f = user;
    gather_in_order(f->d, f->mb, g, x, y);
    return 0;
}

/* Model `name` parsed from spec (model_parse) and n synthetic samples of it
 * (data_synthetic, seed), mb per microbatch; fails the test when either is refused. Free
 * with fixture_free. */
static inline fixture fixture_synthetic(const char *name, const char *spec, int n,
                                        unsigned long long seed, int mb)
{
    plumb_err e = {{0}};
    fixture f = {NULL, NULL, mb};
    f.m = model_parse(name, spec, &e);
    cr_assert(f.m, "%s", e.msg);
    f.d = data_synthetic(f.m, n, seed, &e);
    cr_assert(f.d, "%s", e.msg);
    return f;
}

/* Frees f's data set and model. */
static inline void fixture_free(fixture *f)
{
    data_free(f->d);
    model_free(f->m);
}

#endif
