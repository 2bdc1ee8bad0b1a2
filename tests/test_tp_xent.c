/* test_tp_xent.c: the vocabulary-parallel cross-entropy's backend entries (backend.h:
 * xent_tp_max, xent_tp_partial, xent_tp_finish, xent_tp_bwd) on the CPU backend.
 *
 * 1. Against the host arithmetic they replaced (exec/stage_tp.c and exec/tp.c downloaded
 *    the logits, computed on the host and uploaded the probabilities; written out again
 *    below as `host_*`): the same bits for probabilities, loss, correct and the backward,
 *    for several group sizes and shapes, every rank's.
 * 2. Against the softmax cross-entropy of the whole vocabulary (xent_fwd / xent_bwd on the
 *    concatenated logits): the same figures up to rounding. The whole-vocabulary entry
 *    keeps one double sum of the row's exponentials; here each rank's double sum is
 *    rounded to float and the ranks' sums are added in float, and the backward computes
 *    scale (p - 1) instead of scale p - scale. Measured: probabilities within a relative
 *    1.3e-7, the loss 7.9e-8, the backward 1.2e-7 (tp 8); allowed 1e-6. correct: equal.
 * The rows include targets on every rank, rows whose target is the maximum (correct 1) and
 * rows shifted by +60 (exp would overflow without the maximum's subtraction). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"
#include "tests/tpxent.h"

/* ---- the host arithmetic the entries replaced (the previous exec/tp.c, stage_tp.c) ---- */

static void host_rowmax(const float *z, int N, int v, float *mx)
{
    for (int i = 0; i < N; i++) {
        const float *r = z + (size_t)i * v;
        float a = r[0];
        for (int j = 1; j < v; j++)
            if (r[j] > a) a = r[j];
        mx[i] = a;
    }
}

static void host_partial(float *z, int N, int v, int lo, const int32_t *t, const float *m,
                         float *q)
{
    for (int i = 0; i < N; i++) {
        float *r = z + (size_t)i * v;
        int k = t[i] - lo;
        q[N + i] = k >= 0 && k < v ? r[k] : 0;
        q[2 * N + i] = k >= 0 && k < v && r[k] == m[i] ? 1 : 0;
        double s = 0;
        for (int j = 0; j < v; j++) {
            r[j] = expf(r[j] - m[i]);
            s += r[j];
        }
        q[i] = (float)s;
    }
}

static void host_finish(float *z, int N, int v, const float *m, const float *q, float *loss,
                        float *correct)
{
    for (int i = 0; i < N; i++) {
        float inv = (float)(1.0 / q[i]), *r = z + (size_t)i * v;
        for (int j = 0; j < v; j++) r[j] *= inv;
        loss[i] = (float)(log((double)q[i]) - (double)(q[N + i] - m[i]));
        correct[i] = q[2 * N + i] > 0 ? 1.0f : 0.0f;
    }
}

static void host_grad(float *p, int N, int v, int lo, const int32_t *t, float scale)
{
    for (int i = 0; i < N; i++) {
        float *r = p + (size_t)i * v;
        int k = t[i] - lo;
        for (int j = 0; j < v; j++) r[j] = scale * (r[j] - (j == k ? 1.0f : 0.0f));
    }
}

/* The host path for the whole group, the sums in rank order (as stage_xent_tp_fwd did:
 * the maxima zero-padded to (T, N) and summed, m the largest of each column). */
static void host_group(int N, int T, int v, const float *Z, const int32_t *t, float scale,
                       float *P, float *loss, float *correct, float *dZ)
{
    const size_t V = (size_t)T * v;
    float *z = calloc((size_t)T * N * v, 4), *G = calloc((size_t)T * N, 4), *m = calloc(N, 4),
          *Q = calloc(3 * (size_t)N, 4), *q = calloc(3 * (size_t)N, 4);
    cr_assert(z && G && m && Q && q);
    for (int r = 0; r < T; r++) {
        float *zr = z + (size_t)r * N * v;
        for (int i = 0; i < N; i++) memcpy(zr + (size_t)i * v, Z + i * V + (size_t)r * v,
                                           (size_t)v * 4);
        host_rowmax(zr, N, v, G + (size_t)r * N); /* the others' rows stay 0 in its part */
    }
    for (int i = 0; i < N; i++) {
        m[i] = G[i];
        for (int k = 1; k < T; k++)
            if (G[(size_t)k * N + i] > m[i]) m[i] = G[(size_t)k * N + i];
    }
    for (int r = 0; r < T; r++) {
        host_partial(z + (size_t)r * N * v, N, v, r * v, t, m, q);
        tpxent_add(Q, q, 3 * (size_t)N, r == 0);
    }
    for (int r = 0; r < T; r++) {
        float *zr = z + (size_t)r * N * v;
        host_finish(zr, N, v, m, Q, loss, correct);
        for (int i = 0; i < N; i++) memcpy(P + i * V + (size_t)r * v, zr + (size_t)i * v,
                                           (size_t)v * 4);
        host_grad(zr, N, v, r * v, t, scale);
        for (int i = 0; i < N; i++) memcpy(dZ + i * V + (size_t)r * v, zr + (size_t)i * v,
                                           (size_t)v * 4);
    }
    free(z), free(G), free(m), free(Q), free(q);
}

/* ---- data ---- */

typedef struct xcase {
    int N, T, v;
    float *Z;
    int32_t *t;
} xcase;

static xcase make_case(int N, int T, int v, unsigned long long seed)
{
    const int V = T * v;
    xcase c = {N, T, v, malloc((size_t)N * V * 4 + 4), malloc((size_t)N * 4 + 4)};
    unsigned long long s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < (size_t)N * V; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        c.Z[i] = -4.0f + 8.0f * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
    for (int i = 0; i < N; i++) {
        c.t[i] = (int32_t)(((long long)i * 7919 + 13) % V);
        if (i % 3 == 0) c.Z[(size_t)i * V + c.t[i]] += 8.0f; /* the target is the maximum */
        if (i % 5 == 1)
            for (int j = 0; j < V; j++) c.Z[(size_t)i * V + j] += 60.0f;
    }
    return c;
}

typedef struct xout {
    float *P, *loss, *correct, *dZ;
} xout;

static xout new_out(const xcase *c)
{
    size_t n = (size_t)c->N * c->T * c->v;
    xout o = {calloc(n + 1, 4), calloc((size_t)c->N + 1, 4), calloc((size_t)c->N + 1, 4),
              calloc(n + 1, 4)};
    cr_assert(o.P && o.loss && o.correct && o.dZ);
    return o;
}

static void free_out(xout *o) { free(o->P), free(o->loss), free(o->correct), free(o->dZ); }

static xout cpu_group(const xcase *c, float scale)
{
    const backend *b = backend_cpu();
    plumb_err e = {{0}};
    bk_ctx *ctx = b->create(0, &e);
    cr_assert_not_null(ctx, "%s", e.msg);
    xout o = new_out(c);
    int differ = 0;
    cr_assert_eq(tpxent_group(b, ctx, c->N, c->T, c->v, c->Z, c->t, scale, o.P, o.loss,
                              o.correct, o.dZ, &differ, &e), 0, "%s", e.msg);
    cr_assert_eq(differ, 0, "every rank's loss and correct are the same");
    b->destroy(ctx);
    return o;
}

/* ---- tests ---- */

Test(tp_xent, cpu_backend_gives_the_bits_of_the_host_arithmetic)
{
    const int shapes[][3] = {{23, 3, 50}, {16, 4, 37}, {9, 2, 1}, {7, 1, 20}, {64, 8, 96}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        xcase c = make_case(shapes[k][0], shapes[k][1], shapes[k][2], k + 1);
        const float scale = 1.0f / (float)c.N;
        xout got = cpu_group(&c, scale), ref = new_out(&c);
        host_group(c.N, c.T, c.v, c.Z, c.t, scale, ref.P, ref.loss, ref.correct, ref.dZ);
        size_t n = (size_t)c.N * c.T * c.v;
        cr_expect_eq(memcmp(got.P, ref.P, n * 4), 0, "probs, N %d tp %d v %d", c.N, c.T, c.v);
        cr_expect_eq(memcmp(got.loss, ref.loss, (size_t)c.N * 4), 0, "loss, tp %d", c.T);
        cr_expect_eq(memcmp(got.correct, ref.correct, (size_t)c.N * 4), 0, "correct, tp %d",
                     c.T);
        cr_expect_eq(memcmp(got.dZ, ref.dZ, n * 4), 0, "backward, tp %d", c.T);
        free_out(&got), free_out(&ref), free(c.Z), free(c.t);
    }
}

/* The largest |a - b| over n values, relative to the largest |b| (at least tiny). */
static double rel_err(const float *a, const float *b, size_t n)
{
    double mx = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        double x = fabs((double)a[i] - b[i]);
        if (!(x <= d)) d = x;
    }
    return d / fmax(mx, 1e-30);
}

Test(tp_xent, cpu_backend_matches_the_whole_vocabulary)
{
    const int shapes[][3] = {{23, 3, 50}, {16, 4, 37}, {9, 2, 1}, {64, 8, 96}};
    const backend *b = backend_cpu();
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        xcase c = make_case(shapes[k][0], shapes[k][1], shapes[k][2], k + 11);
        const int V = c.T * c.v;
        const size_t n = (size_t)c.N * V;
        const float scale = 1.0f / (float)c.N;
        xout got = cpu_group(&c, scale), ref = new_out(&c);
        plumb_err e = {{0}};
        bk_ctx *ctx = b->create(0, &e);
        cr_assert_not_null(ctx, "%s", e.msg);
        b->xent_fwd(ctx, c.N, V, c.Z, c.t, ref.P, ref.loss, ref.correct); /* CPU: host memory */
        b->xent_bwd(ctx, c.N, V, ref.P, c.t, scale, ref.dZ);
        cr_assert_eq(b->sync(ctx, &e), 0, "%s", e.msg);
        b->destroy(ctx);
        int ones = 0;
        for (int i = 0; i < c.N; i++) ones += ref.correct[i] == 1.0f;
        cr_assert_gt(ones, 0, "some rows are correct");
        cr_expect_lt(rel_err(got.P, ref.P, n), 1e-6, "probs, tp %d: %.3g", c.T,
                     rel_err(got.P, ref.P, n));
        cr_expect_lt(rel_err(got.loss, ref.loss, (size_t)c.N), 1e-6, "loss, tp %d: %.3g", c.T,
                     rel_err(got.loss, ref.loss, (size_t)c.N));
        cr_expect_eq(memcmp(got.correct, ref.correct, (size_t)c.N * 4), 0, "correct, tp %d",
                     c.T);
        cr_expect_lt(rel_err(got.dZ, ref.dZ, n), 1e-6, "backward, tp %d: %.3g", c.T,
                     rel_err(got.dZ, ref.dZ, n));
        free_out(&got), free_out(&ref), free(c.Z), free(c.t);
    }
}
