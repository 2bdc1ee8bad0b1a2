/* search3d_est_dp.c: what the 3D search's estimate adds after the pipeline (planner/
 * search3d_impl.h): each rank's data-parallel all-reduce left exposed after its stages'
 * last backwards (the simulator's bucketed ring, the parameter all-gather apart under the
 * next first forward) and the optimizer steps, less the slack the rank has before the next
 * iteration reaches it; and each stage's own ring and gather, which the V kinds' replay
 * places in the order (est_stage_allreduce); the stages' rings, each priced once per layout
 * and shared by a rank's stages of one group (est_rings). */
#include "planner/search3d_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Buckets of G gradient bytes in the simulator's ring (SIM_BUCKET_BYTES each, 1 to 4096). */
static int buckets(double G)
{
    double kb = ceil(G / SIM_BUCKET_BYTES);
    return kb < 1 ? 1 : kb > 4096 ? 4096 : (int)kb;
}


int est_rings_init(est_rings *rg, const plan *pl, int p)
{
    int S = pl->nstages, nmax = 1;
    for (int k = 0; k < S; k++) {
        int n = pl->stages[k].replicas * plan_cp(pl);
        if (n > nmax) nmax = n;
    }
    *rg = (est_rings){.S = S, .p = p, .nmax = nmax};
    rg->per_byte = malloc(2 * (size_t)S * sizeof *rg->per_byte);
    rg->state = calloc((size_t)S, sizeof *rg->state);
    rg->rank_stage = malloc(((size_t)2 * p + (size_t)(p + 1) * nmax) * sizeof *rg->rank_stage);
    if (!rg->per_byte || !rg->state || !rg->rank_stage) {
        est_rings_free(rg);
        return -1;
    }
    rg->fixed = rg->per_byte + S;
    rg->rank_n = rg->rank_stage + p;
    rg->rank_devs = rg->rank_n + p;
    rg->devs = rg->rank_devs + (size_t)p * nmax;
    for (int r = 0; r < p; r++) rg->rank_stage[r] = -1;
    return 0;
}

void est_rings_free(est_rings *rg)
{
    free(rg->per_byte);
    free(rg->state);
    free(rg->rank_stage);
    *rg = (est_rings){0};
}

/* The ring of stage k's data-parallel group (with cp > 1 every context rank of its
 * replicas: sim_cost_dp_group, as the simulator's ring runs it): *per_byte and *fixed as
 * sim_net_ring's, priced once per stage in rg, and taken from the rank's first priced
 * stage where the group is the same devices in the same order. 0, or -1 when there is no
 * ring (one member) or it cannot be priced. */
static int stage_ring(const sim_net *net, est_rings *rg, const plan *pl, int k,
                      double *per_byte, double *fixed)
{
    if (!rg->state[k]) {
        const plan_stage *ps = &pl->stages[k];
        int n = ps->replicas * plan_cp(pl), r = sched_kind_rank(pl->schedule, k, rg->p);
        rg->state[k] = -1;
        if (n > 1) { /* one replica's cp ranks ring too */
            n = sim_cost_dp_group(pl, k, rg->devs);
            int j = r >= 0 && r < rg->p ? rg->rank_stage[r] : -2;
            const int *same = j >= 0 ? rg->rank_devs + (size_t)r * rg->nmax : NULL;
            if (same && rg->rank_n[r] == n &&
                !memcmp(same, rg->devs, (size_t)n * sizeof *rg->devs)) {
                rg->state[k] = rg->state[j];
                rg->per_byte[k] = rg->per_byte[j], rg->fixed[k] = rg->fixed[j];
            } else {
                rg->state[k] = sim_net_ring(net, rg->devs, n, &rg->per_byte[k], &rg->fixed[k])
                                   ? -1 : 1;
                if (j == -1) {
                    rg->rank_stage[r] = k, rg->rank_n[r] = n;
                    memcpy(rg->rank_devs + (size_t)r * rg->nmax, rg->devs,
                           (size_t)n * sizeof *rg->devs);
                }
            }
        }
    }
    *per_byte = rg->state[k] > 0 ? rg->per_byte[k] : 0;
    *fixed = rg->state[k] > 0 ? rg->fixed[k] : 0;
    return rg->state[k] > 0 ? 0 : -1;
}

/* Stage k's ring left after its last backward of du seconds (its K buckets ready evenly
 * through it), on a ring of per_byte and fixed (halved already where the gather runs
 * apart): max(a, K a - du (K - 1) / K) for buckets of a seconds. */
static double stage_tail(const sim_model *mo, double per_byte, double fixed, int k, double du)
{
    double *gather = mo->gather_bytes;
    double G = gather && gather[k] > 0 ? 2 * mo->grad_bytes[k] - gather[k] : mo->grad_bytes[k];
    int K = buckets(mo->grad_bytes[k]);
    double a = (per_byte * G + fixed) / K, tail = K * a - du * (K - 1) / K;
    return tail > a ? tail : a;
}

/* The wait of stage k's next first forward (f seconds) for its parameter all-gather in
 * the same K buckets, max_k ((k + 1) b - k f / K) for buckets of b seconds; 0 where the
 * gather does not run apart. */
static double stage_gather(const sim_model *mo, double per_byte, double fixed, int k, double f)
{
    double *gather = mo->gather_bytes;
    if (!gather || !(gather[k] > 0)) return 0;
    int K1 = buckets(mo->grad_bytes[k]);
    double b = (per_byte * gather[k] + fixed) / K1, last = K1 * b - (K1 - 1) * f / K1;
    return last > b ? last : b;
}

/* The exposed part of the all-reduces of pipeline rank r after its stages' last
 * backwards. The lowering puts each stage's ALLREDUCE right after that stage's last
 * backward (B, or W where split: st[k]), and the simulator holds the rank there until the
 * ring ends, so each stage (chunk) of the rank leaves its own tail, one after another: its
 * K buckets ready evenly through that backward of du seconds (bucket k at (k + 1) du / K;
 * du = 0 under grad_sync end, where the rings run one after another after the last one),
 * each taking a = (per_byte x G + fixed) / K on the stage's ring (its 2 (r - 1) latencies
 * are paid once per all-reduce, a K-th per bucket, as the simulator's hop_done charges
 * them), leave max(a, K a - du (K - 1) / K) after it. With one stage per rank that is the stage's own ring. Where the
 * parameter all-gather runs apart (mo->gather_bytes, overlap_param_gather), the ring
 * during the backward is the reduce-scatter alone (r - 1 of the 2 (r - 1) steps, of 2
 * grad_bytes - gather_bytes), and the all-gather of the first stage's parameters follows
 * the step in the same K buckets, under the next iteration's first forward of f seconds
 * on the rank: that forward reaches bucket k at k f / K of its run, so it waits max_k ((k
 * + 1) b - k f / K) for buckets of b seconds (docs/sim.md, "The parameter all-gather
 * apart"), which is added. */
double est_exposed_allreduce(const sim_model *mo, const sim_net *net, est_rings *rg,
                             const plan *pl, const sched_traits *tr, int r, int p,
                             const est_stage *st, int split)
{
    double per_byte, fixed, ex = 0;
    int first = -1;
    for (int k = 0; k < pl->nstages && first < 0; k++)
        if (sched_kind_rank(tr->kind, k, p) == r && mo->grad_bytes[k] > 0) first = k;
    if (first < 0 || stage_ring(net, rg, pl, first, &per_byte, &fixed)) return 0;
    double *gather = mo->gather_bytes;
    if (gather && gather[first] > 0) per_byte /= 2, fixed /= 2; /* each half: r - 1 steps */
    for (int k = first; k < pl->nstages; k++) {
        if (sched_kind_rank(tr->kind, k, p) != r || !(mo->grad_bytes[k] > 0)) continue;
        /* grad_sync end: every bucket ready at once, after the rank's last backward */
        ex += stage_tail(mo, per_byte, fixed, k,
                         pl->grad_sync_end ? 0 : split ? st[k].W : st[k].B);
    }
    return ex + stage_gather(mo, per_byte, fixed, first, st[first].F);
}

double est_stage_allreduce(const sim_model *mo, const sim_net *net, est_rings *rg,
                           const plan *pl, int k, double du, double f, double *whole)
{
    double per_byte, fixed, *gather = mo->gather_bytes;
    *whole = 0;
    if (!(mo->grad_bytes[k] > 0) || stage_ring(net, rg, pl, k, &per_byte, &fixed)) return 0;
    if (!(gather && gather[k] > 0))
        return f >= 0 ? 0 : stage_tail(mo, per_byte, fixed, k, pl->grad_sync_end ? 0 : du);
    per_byte /= 2, fixed /= 2; /* each half: r - 1 steps */
    if (f < 0) return stage_tail(mo, per_byte, fixed, k, pl->grad_sync_end ? 0 : du);
    *whole = per_byte * gather[k] + fixed;
    return stage_gather(mo, per_byte, fixed, k, f);
}


/* The time after the pipeline that the all-reduces and steps add: per rank, its first
 * stage's exposed all-reduce and its stages' steps, less the slack before the next
 * iteration's first forward reaches it (the forwards and backwards of the ranks before
 * it). */
double est_tail(const est_stage *st, const double *expo, int S, int p,
                const sched_traits *tr, double *dp_s, double *step_s)
{
    double worst = 0, slack = 0;
    *dp_s = *step_s = 0;
    for (int r = 0; r < p; r++) {
        double step = 0, ex = 0, fb = 0;
        int first = -1;
        for (int k = 0; k < S; k++)
            if (sched_kind_rank(tr->kind, k, p) == r) {
                step += st[k].step;
                if (first < 0) first = k;
            }
        if (first >= 0) {
            ex = expo[first];
            fb = st[first].F + st[first].B + 2 * st[first].send;
        }
        double t = ex + step - slack;
        if (t > worst) {
            worst = t;
            *dp_s = ex;
            *step_s = step;
            if (ex + step > 0) { /* share the slack between them */
                double f = t / (ex + step);
                *dp_s = ex * f;
                *step_s = step * f;
            }
        }
        slack += fb;
    }
    return worst;
}
