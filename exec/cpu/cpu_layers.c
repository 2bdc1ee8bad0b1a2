/* cpu_layers.c: the CPU backend's linear layer (OpenBLAS, through cpu_sgemm) and the softmax
 * cross-entropy loss (the element-wise activations are in cpu_vec.c). */
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
