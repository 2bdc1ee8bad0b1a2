/* cpu_layers.c: the CPU backend's linear layer (OpenBLAS, through cpu_sgemm) and the softmax
 * cross-entropy loss, whole and vocabulary-parallel (the element-wise activations are in
 * cpu_vec.c). */
#include "exec/cpu/cpu.h"

#include <math.h>
#include <string.h>

void cpu_linear_fwd(bk_ctx *c, int N, int in, int out, const float *x, const float *w,
                    const float *b, float *y)
{
    /* y (N, out) = x (N, in) w^T (in, out) */
    cpu_sgemm(c, 0, 1, N, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < out; j++) y[(size_t)i * out + j] += b[j];
}

void cpu_linear_bwd_data(bk_ctx *c, int N, int in, int out, const float *dy, const float *w,
                         float *dx)
{
    /* dx (N, in) = dy (N, out) w (out, in) */
    cpu_sgemm(c, 0, 0, N, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

void cpu_linear_bwd_weight(bk_ctx *c, int N, int in, int out, const float *dy,
                           const float *x, float *dw, float *db)
{
    /* dw (out, in) += dy^T (out, N) x (N, in) */
    cpu_sgemm(c, 1, 0, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < out; j++) db[j] += dy[(size_t)i * out + j];
}

void cpu_xent_fwd(bk_ctx *c, int N, int V, const float *logits, const int32_t *targets,
                  float *probs, float *loss, float *correct)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * V;
        float *p = probs + (size_t)i * V;
        int arg = 0;
        for (int j = 1; j < V; j++)
            if (z[j] > z[arg]) arg = j;
        double sum = 0;
        for (int j = 0; j < V; j++) {
            p[j] = expf(z[j] - z[arg]);
            sum += p[j];
        }
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < V; j++) p[j] *= inv;
        int t = targets[i];
        /* log p[t] computed from the logits, accurate even when p[t] underflows */
        loss[i] = (float)(log(sum) - (double)(z[t] - z[arg]));
        if (correct) correct[i] = arg == t ? 1.0f : 0.0f;
    }
}

void cpu_xent_bwd(bk_ctx *c, int N, int V, const float *probs, const int32_t *targets,
                  float scale, float *dlogits)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *p = probs + (size_t)i * V;
        float *d = dlogits + (size_t)i * V;
        for (int j = 0; j < V; j++) d[j] = scale * p[j];
        d[targets[i]] -= scale;
    }
}

/* ---- the vocabulary-parallel cross-entropy (backend.h: xent_tp_*) ---- */

/* Row i's maximum over the whole vocabulary: the largest of maxes' T rows (T, N). */
static float tp_row_max(const float *maxes, int N, int T, int i)
{
    float m = maxes[i];
    for (int k = 1; k < T; k++)
        if (maxes[(size_t)k * N + i] > m) m = maxes[(size_t)k * N + i];
    return m;
}

void cpu_xent_tp_max(bk_ctx *c, int N, int v, const float *logits, float *mx)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *r = logits + (size_t)i * v;
        float a = r[0];
        for (int j = 1; j < v; j++)
            if (r[j] > a) a = r[j];
        mx[i] = a;
    }
}

void cpu_xent_tp_partial(bk_ctx *c, int N, int v, int T, int lo, const float *maxes,
                         const int32_t *targets, const float *logits, float *e, float *q)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * v;
        float *r = e + (size_t)i * v, m = tp_row_max(maxes, N, T, i);
        int k = targets[i] - lo;
        q[N + i] = k >= 0 && k < v ? z[k] : 0;
        q[2 * N + i] = k >= 0 && k < v && z[k] == m ? 1 : 0;
        double s = 0;
        for (int j = 0; j < v; j++) {
            r[j] = expf(z[j] - m);
            s += r[j];
        }
        q[i] = (float)s;
    }
}

void cpu_xent_tp_finish(bk_ctx *c, int N, int v, int T, const float *maxes, const float *q,
                        float *e, float *loss, float *correct)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        float inv = (float)(1.0 / q[i]), *r = e + (size_t)i * v;
        for (int j = 0; j < v; j++) r[j] *= inv;
        /* log p[t] from the logits, accurate even when p[t] underflows */
        loss[i] = (float)(log((double)q[i]) - (double)(q[N + i] - tp_row_max(maxes, N, T, i)));
        correct[i] = q[2 * N + i] > 0 ? 1.0f : 0.0f;
    }
}

void cpu_xent_tp_bwd(bk_ctx *c, int N, int v, int lo, const float *probs,
                     const int32_t *targets, float scale, float *dlogits)
{
    (void)c;
    for (int i = 0; i < N; i++) {
        const float *p = probs + (size_t)i * v;
        float *d = dlogits + (size_t)i * v;
        int k = targets[i] - lo;
        for (int j = 0; j < v; j++) d[j] = scale * (p[j] - (j == k ? 1.0f : 0.0f));
    }
}
