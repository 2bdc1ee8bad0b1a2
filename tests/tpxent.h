/* tpxent.h: runs the vocabulary-parallel cross-entropy (backend.h: xent_tp_*) of a whole
 * group of T ranks on one backend context, as exec/stage_tp.c drives it, with the group's
 * sums done on the host in rank order (what the transports' all-reduce gives: rank 0's
 * floats first). Used by tests/test_tp_xent.c (the CPU backend) and tests/test_cuda.c (the
 * CUDA backend against the CPU's). Include in one test file. */
#ifndef PLUMB_TESTS_TPXENT_H
#define PLUMB_TESTS_TPXENT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"

/* Sums part (n floats) into acc in rank order: acc first holds rank 0's. */
static void tpxent_add(float *acc, const float *part, size_t n, int first)
{
    for (size_t i = 0; i < n; i++) acc[i] = first ? part[i] : acc[i] + part[i];
}

/* Rank r holds columns [r v, (r + 1) v) of Z (N, T v); t (N) are targets in [0, T v).
 * Writes the whole-vocabulary probabilities P (N, T v), loss (N) and correct (N) (rank 0's;
 * each rank's are checked equal: *ranks_differ counts rows that are not), and dZ (N, T v)
 * = the backward at scale. Returns 0, or -1 when the backend failed (err set). */
static int tpxent_group(const backend *b, bk_ctx *c, int N, int T, int v, const float *Z,
                        const int32_t *t, float scale, float *P, float *loss, float *correct,
                        float *dZ, int *ranks_differ, plumb_err *err)
{
    const size_t nv = (size_t)N * v, V = (size_t)T * v;
    float *h = malloc((nv + 1) * sizeof *h), *G = malloc(((size_t)T * N + 1) * sizeof *G),
          *Q = malloc((3 * (size_t)N + 1) * sizeof *Q), *part = malloc((T + 3) * (size_t)N *
                                                                       sizeof *part + 4);
    float *z = b->alloc(c, nv * 4, err), *e = b->alloc(c, nv * 4, err),
          *d = b->alloc(c, nv * 4, err), *g = b->alloc(c, (size_t)T * N * 4, err),
          *q = b->alloc(c, 3 * (size_t)N * 4, err), *a = b->alloc(c, 2 * (size_t)N * 4, err);
    int32_t *tg = b->alloc(c, (size_t)N * 4, err);
    int rc = -1;
    *ranks_differ = 0;
    if (!h || !G || !Q || !part || !z || !e || !d || !g || !q || !a || !tg) goto out;
    b->upload(c, tg, t, (size_t)N * 4);
    for (int pass = 0; pass < 3; pass++) /* maxima, partial sums, finish */
        for (int r = 0; r < T; r++) {
            for (int i = 0; i < N; i++) memcpy(h + (size_t)i * v, Z + i * V + (size_t)r * v,
                                               (size_t)v * 4);
            b->upload(c, z, h, nv * 4);
            if (pass == 0) {
                b->zero(c, g, (size_t)T * N * 4);
                b->xent_tp_max(c, N, v, z, g + (size_t)r * N);
                b->download(c, part, g, (size_t)T * N * 4);
                tpxent_add(G, part, (size_t)T * N, r == 0);
                continue;
            }
            b->upload(c, g, G, (size_t)T * N * 4);
            b->xent_tp_partial(c, N, v, T, r * v, g, tg, z, e, q);
            if (pass == 1) {
                b->download(c, part, q, 3 * (size_t)N * 4);
                tpxent_add(Q, part, 3 * (size_t)N, r == 0);
                continue;
            }
            b->upload(c, q, Q, 3 * (size_t)N * 4);
            b->xent_tp_finish(c, N, v, T, g, q, e, a, a + N);
            b->xent_tp_bwd(c, N, v, r * v, e, tg, scale, d);
            b->download(c, part, a, 2 * (size_t)N * 4);
            if (r == 0) memcpy(loss, part, (size_t)N * 4), memcpy(correct, part + N, (size_t)N * 4);
            for (int i = 0; i < N; i++)
                *ranks_differ += part[i] != loss[i] || part[N + i] != correct[i];
            b->download(c, h, e, nv * 4);
            for (int i = 0; i < N; i++) memcpy(P + i * V + (size_t)r * v, h + (size_t)i * v,
                                               (size_t)v * 4);
            b->download(c, h, d, nv * 4);
            for (int i = 0; i < N; i++) memcpy(dZ + i * V + (size_t)r * v, h + (size_t)i * v,
                                               (size_t)v * 4);
        }
    rc = b->sync(c, err);
out:
    free(h), free(G), free(Q), free(part);
    b->free(c, z), b->free(c, e), b->free(c, d), b->free(c, g), b->free(c, q), b->free(c, a);
    b->free(c, tg);
    return rc;
}

#endif
