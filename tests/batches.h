/* batches.h: microbatches for the training tests, taken from the data set in order.
 * Header-only: each test file is its own binary. */
#ifndef PLUMB_TESTS_BATCHES_H
#define PLUMB_TESTS_BATCHES_H

#include <criterion/criterion.h>

#include "exec/data.h"

/* Microbatch g of mb samples: samples [g mb, (g + 1) mb) of d, wrapping around its end,
 * into x (mb, sample_numel) and y (mb, targets_per_sample). */
static inline void gather_in_order(const dataset *d, int mb, int g, float *x, int32_t *y)
{
    int idx[64];
    cr_assert(mb >= 1 && mb <= 64, "microbatch of %d samples", mb);
    for (int b = 0; b < mb; b++) idx[b] = (g * mb + b) % d->n;
    data_gather(d, idx, mb, x, y);
}

#endif
