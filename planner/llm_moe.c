/* llm_moe.c: one block's mixture of experts priced on one tensor-parallel rank
 * (planner/llm_moe.h): the router, top-k, permutation, the experts' grouped GEMMs, the
 * combine and the shared expert, their memory and parameters. */
#include "planner/llm_moe.h"

/* `groups` GEMMs of m rows from kin to nout features each, run as one grouped kernel
 * (Megatron-Core's --moe-grouped-gemm, Transformer Engine's GroupedLinear): forward, input
 * gradient and weight gradient, each priced as a batch of `groups` multiplies of its shape
 * (device_gemm_s: each group's efficiency at m rows, the tiles of all groups filling the
 * device's SMs together, one launch). */
static void add_gemms(const llm_moe *c, double groups, double m, double kin, double nout,
                      double *flops, double *fwd, double *bin, double *bw)
{
    *flops += groups * 2 * m * kin * nout;
    *fwd += device_gemm_s(c->dev, c->p, groups, m, nout, kin, 0);
    *bin += device_gemm_s(c->dev, c->p, groups, m, kin, nout, 0);
    *bw += device_gemm_s(c->dev, c->p, groups, kin, nout, m, 0);
}

void llm_moe_cost(const llm_moe *c, double *flops, double *fwd_s, double *bwd_in_s,
                  double *bwd_w_s)
{
    double M = c->M, h = c->h, E = c->E, k = c->k, e = c->e, rows = M * k / E;
    /* the router: M tokens x h to E scores, replicated on every tensor-parallel rank */
    double router = 0;
    add_gemms(c, 1, M, h, E, &router, fwd_s, bwd_in_s, bwd_w_s);
    *flops += router / c->tp; /* the model's FLOPs count it once over the ranks */
    /* the experts: E GEMMs of M k / E rows each (balanced routing) in one grouped kernel, h
     * to the gate and up projections' 2 ft, then ft to h */
    add_gemms(c, E, rows, h, 2 * c->ft, flops, fwd_s, bwd_in_s, bwd_w_s);
    add_gemms(c, E, rows, c->ft, h, flops, fwd_s, bwd_in_s, bwd_w_s);
    /* streaming kernels, forward (the backward twice the bytes in twice the kernels, as
     * llm_profile.c's add_stream): the softmax over the E scores (reads e, writes fp32
     * probabilities) and the top-k (reads them, writes k fp32 weights and k int64 indices),
     * the permutation (M k rows of h read and written), the un-permutation alike and the
     * combine (reads the M k rows and their weights, writes M rows) */
    double bytes = M * E * (e + 4) + M * E * 4 + M * k * 12 /* softmax, top-k */
                   + 2 * M * k * h * e                      /* permutation */
                   + 2 * M * k * h * e                      /* un-permutation */
                   + M * k * (h * e + 4) + M * h * e;       /* combine */
    int kernels = 5;
    if (c->fs > 0) { /* the shared expert: a dense gated MLP over the M rows, split over the
                        ranks as one; its gate's h x 1 GEMM whole on each rank */
        double fs = c->fs, gate = 0;
        add_gemms(c, 1, M, h, 2 * fs, flops, fwd_s, bwd_in_s, bwd_w_s);
        add_gemms(c, 1, M, fs, h, flops, fwd_s, bwd_in_s, bwd_w_s);
        add_gemms(c, 1, M, h, 1, &gate, fwd_s, bwd_in_s, bwd_w_s);
        *flops += gate / c->tp;
        /* its activation (two reads, one write of M fs), the sigmoid scaling of its output
         * (reads M h and the M gate values, writes M h) and the add to the experts' sum
         * (two reads, one write of M h) */
        bytes += 3 * M * fs * e + (2 * M * h * e + M * e) + 3 * M * h * e;
        kernels += 3;
    }
    *fwd_s += device_stream_s(c->dev, bytes, kernels);
    *bwd_in_s += device_stream_s(c->dev, 2 * bytes, 2 * kernels);
}

double llm_moe_saved(const llm_moe *c)
{
    double M = c->M, h = c->h, k = c->k, e = c->e, rows = M * k;
    return M * c->E * 4 + M * k * 12 /* the router's probabilities, the k weights, indices */
           + rows * h * e            /* the permuted tokens: the experts' first input */
           + 4 * e * rows * c->ft    /* fc1's 2 ft output, the SiLU's and the product */
           + rows * h * e            /* the experts' outputs, which the combine weighs */
           + (c->fs > 0 ? 4 * e * M * c->fs /* the shared expert's inner tensors */
                              + M * h * e + M * e /* its output and its gate's sigmoid */
                        : 0);
}

double llm_moe_split_saved(const llm_moe *c)
{
    return c->e * (c->M * c->E + c->M * c->k * (2 * c->ft + c->h) +
                   (c->fs > 0 ? c->M * (2 * c->fs + c->h) + c->M : 0));
}

double llm_moe_params(const llm_moe *c)
{
    return c->h * c->E + c->E * 3 * c->h * c->ft + (c->fs > 0 ? 3 * c->h * c->fs + c->h : 0);
}

int llm_moe_tensors(const llm_moe *c)
{
    return 1 + 2 * (int)c->E + (c->fs > 0 ? 3 : 0);
}
