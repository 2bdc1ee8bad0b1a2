/* native_dp.c: the partitions the native planner proposes (nm_partitions,
 * nm_partitions_interleaved; docs/planner-native.md, "The partitioner").
 *
 * The dynamic program runs over suffixes: V(b, u) is the best way to place blocks b.. on
 * units u.. (trailing units may stay idle). A first pass minimises the slowest period; then,
 * for a few thresholds above that optimum, a second pass minimises the summed latency (the
 * fill) among partitions whose every period stays under the threshold. The programs of the
 * latest settings are kept in the model. The priced candidates go to the simulator
 * (native.c). */
#include "planner/native_impl.h"

#include "sim/cost.h" /* sim_cost_gather_s */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NM_DP_TAUS 4 /* latency programs solved together (nm_partitions' thresholds) */

typedef struct nm_dp {
    int nb, U;
    int K;            /* stages pinned (s->nstages), or 0: any count */
    size_t ns;        /* states of one program: L (nb + 1) (U + 1), L = K + 1 layers when
                         pinned (layer k: k stages left), else 1 */
    double *val;      /* [ns NM_DP_TAUS]: state i's values of the programs together
                         (dp_v: program t's at i NM_DP_TAUS + t, one cache line) */
    int *cj, *cr;     /* [ns NM_DP_TAUS] choice: next block, units (dp_v) */
} nm_dp;

/* Index of state (k stages left, first block b, first unit u) in the dp's arrays. */
static size_t dp_at(const nm_dp *d, int k, int b, int u)
{
    return ((size_t)k * (d->nb + 1) + b) * (d->U + 1) + u;
}

/* Where program t's value (and choice) of state i is in the dp's arrays. */
static size_t dp_v(int t, size_t i) { return i * NM_DP_TAUS + t; }

/* One layer of the program: the states with `left` stages left (d->K > 0: stages pinned;
 * a stage with one left ends at the last block, one with more leaves blocks to the rest),
 * or, unpinned (left = 0), the only layer, any count. mode 0: V = min max period (program
 * 0); mode 1: nt programs at once, program t: V = min sum latency with every period <=
 * tau[t] (ascending), each as if solved alone (a stage's costs are computed once for all).
 * The inner loop is nm_stage_cost specialised: what depends on the unit range only is hoisted
 * out of the loop over the stage's last block. */
static void dp_layer(const nm_model *m, const nm_setting *s, nm_dp *d, int mode,
                     const double *tau, int nt, int left)
{
    int nb = m->nb, U = m->U, W1 = U + 1, rc = s->recompute, K = d->K;
    double bscale = (double)s->mbsize / m->p->minibatch, kscale = bscale * 1e-3;
    const double gather = sim_cost_gather_s(m->p, s->mbsize); /* the first/last stage's */
    const sched_traits *tr = sched_traits_of(s->kind);
    int evenM = tr->mb_per_replica && s->M > 0;
    const size_t lay = dp_at(d, left, 0, 0), nxt = dp_at(d, K > 0 ? left - 1 : 0, 0, 0);
    const double tmax = mode ? tau[nt - 1] : 0;
    if (!mode) nt = 1;
    for (int t = 0; t < nt; t++) {
        for (int u = 0; u <= U; u++) d->val[dp_v(t, lay + nb * W1 + u)] = K > 0 ? INFINITY : 0;
        for (int b = 0; b < nb; b++) d->val[dp_v(t, lay + b * W1 + U)] = INFINITY;
    }
    /* the memory terms of the stages starting at block b, by their end, on one replica:
     * at ZeRO 0 they do not depend on the replicas (sim_memory_state); at ZeRO 1 (s->zero)
     * only the optimizer state does, set per count below */
    const sim_mem_setting ms1 = nm_mem_setting(m, s, 1);
    const int nccl = ms1.nccl;
    sim_stage_mem bt[NM_MAX_BLOCKS + 1];
    /* the training state per parameter byte on each replica count (ZeRO 0: the same for
     * every count, but taken as sim_memory_state gives it; ZeRO 1: the optimizer's 1/n) */
    sim_state_mul smr[NM_MAX_UNITS];
    for (int ri = 0; ri < m->nr; ri++)
        sim_memory_state(ms1.precision, ms1.zero, m->rlist[ri] * m->g, s->opt, &smr[ri]);
    for (int b = nb - 1; b >= 0; b--) {
        double in = b > 0 ? m->cut[b] * bscale : 0;
        for (int j = b + 1; j <= nb; j++) sim_memory_stage(&m->lay[b * (nb + 1) + j], &ms1, &bt[j]);
        for (int u = U - 1; u >= 0; u--) {
            double bests[NM_DP_TAUS];
            int bjs[NM_DP_TAUS], brs[NM_DP_TAUS], W = m->ndev - u * m->g;
            for (int t = 0; t < nt; t++) {
                bests[t] = INFINITY;
                bjs[t] = brs[t] = -1;
            }
            double best = INFINITY; /* mode 0's */
            for (int ri = 0; ri < m->nr; ri++) {
                int r = m->rlist[ri];
                if (u + r > U) break;
                const nm_range *R = &m->rg[u * W1 + r];
                if (!R->ok) continue;
                int n = r * m->g;
                if (evenM && s->M % n) continue;
                int k, kw = nm_ceil_div(W, n), km = nm_ceil_div(s->M, n);
                switch (tr->hold) {
                case SCHED_HOLD_ALL: k = km; break;
                case SCHED_HOLD_1F1B: k = !tr->async && km < kw ? km : kw; break;
                /* the first stage's warmup is usually the pipeline's largest */
                case SCHED_HOLD_ZB: k = (b ? kw + 1 : kw) < km ? (b ? kw + 1 : kw) : km; break;
                default: k = kw; break;
                }
                const int kf = s->M > 0 ? km : 0;
                /* versions: the kind's, no more than in flight (nm_count_stage) */
                const nm_counts cn = {tr->versions > 0 && tr->versions < kw ? tr->versions : kw,
                                         nm_held_slots(s->kind, k, kf, b > 0),
                                         nm_staged_grads(s->kind, k, kf)};
                const sim_state_mul sm = smr[ri];
                /* a lower bound of the stage's memory that grows with its last block j:
                 * the parameters (less every tied tensor) x versions, gradients (and the
                 * all-reduce's receive buffer), optimizer; per slot the input (the data)
                 * and the input gradient, the kept outputs without recompute; the inner
                 * gradient buffers; the staging */
                const double pcoef = cn.ver + sm.gradients + sm.optimizer +
                                     (n > 1 && !nccl ? sm.gradients : 0);
                /* ZeRO 1 or 16-bit (nm_nccl): no receive buffer, no staging, the slot's
                 * gradients and outputs not per slot: the data alone */
                const double fixed =
                    nccl ? cn.slots * (b ? in : m->p->input_bytes * bscale)
                            : cn.slots * ((b ? in : m->p->input_bytes * bscale) + in) +
                                  cn.staged * in;
                double sc = kscale / R->speed;
                double incomm = in > 0 && R->in_total > 0 ? in / R->in_total : 0;
                /* the last units can only hold the last stage; pinned, the last stage
                 * takes the last blocks and the others leave some */
                const int j0 = u + r == U || left == 1 ? nb : b + 1;
                const int j1 = K > 0 && left > 1 ? nb - 1 : nb;
                for (int j = j0; j <= j1; j++) {
                    const size_t at = nxt + j * W1 + u + r;
                    const double *vt = &d->val[dp_v(0, at)]; /* the programs' */
                    double next = vt[0];
                    if (!mode) {
                        if (!(next < best)) continue;
                    } else {
                        int any = 0; /* lat + next >= next: useless unless below a best */
                        for (int t = 0; t < nt && !any; t++)
                            any = vt[t] < bests[t];
                        if (!any) continue;
                    }
                    double lp = m->cP[j] - m->cP[b] - m->tied_total;
                    double lower = (lp > 0 ? lp : 0) * pcoef + fixed +
                                   (m->cG[j] - m->cG[b] +
                                    (rc || nccl ? 0 : cn.slots * (m->cS[j] - m->cS[b]))) *
                                       bscale;
                    if (lower > R->cap) break; /* memory grows with j */
                    const double P = bt[j].params;
                    double F = (m->cF[j] - m->cF[b]) * sc, B = (m->cB[j] - m->cB[b]) * sc;
                    if (rc) B += F;
                    if (b == 0 || j == nb) F += gather / R->speed;
                    double c = F + B, per = c / n;
                    /* compute grows with j: no later j can do better either (whether this
                     * one fits memory or not) */
                    if (mode == 0 && per >= best) break;
                    if (mode == 1 && per > tmax) break;
                    if (n > 1 && P > 0 && (tr->step_each_round || s->M > 0)) {
                        /* the exposed all-reduce: per microbatch round for pipedream; once
                         * per iteration for the others, M microbatches sharing it (without
                         * this share the program would always find data parallelism the
                         * fastest, however slow its all-reduce) */
                        double ar = R->ar_a * P + R->ar_b;
                        double tail = ar * (NM_BUCKET_BYTES < P ? NM_BUCKET_BYTES / P : 1);
                        double x = ar - B > tail ? ar - B : tail;
                        per += tr->step_each_round ? x / n : x / s->M;
                    }
                    double out = j < nb ? m->cut[j] * bscale : 0, comm = incomm, lat = c;
                    if (out > 0) {
                        if (!(R->out_total > 0)) continue;
                        if (out / R->out_total > comm) comm = out / R->out_total;
                        lat += 2 * (R->out_lat + out / R->out_rate);
                    }
                    if (comm > per) per = comm;
                    /* a stage that would improve no best needs no memory check */
                    double v0 = per > next ? per : next;
                    int gain = 0;
                    if (mode == 0) {
                        gain = v0 < best;
                    } else {
                        for (int t = nt - 1; t >= 0 && !(per > tau[t]) && !gain; t--)
                            gain = lat + vt[t] < bests[t];
                    }
                    if (!gain) continue;
                    /* the memory itself, as the simulator counts it (not monotone in j:
                     * with recompute a slot keeps the stage's output) */
                    sim_memory_acc acc;
                    memset(&acc, 0, sizeof acc);
                    sim_stage_mem tj = bt[j];
                    if (s->zero) { /* its 1/n */
                        tj.optimizer = tj.params * sm.optimizer;
                        tj.step_copy = tj.params * sm.stepcopy;
                    }
                    sim_memory_add(&acc, &tj, cn.ver, cn.slots,
                                   nccl ? 0 : sim_allreduce_scratch_max(bt[j].gradients, n), 0);
                    sim_memory mm;
                    sim_memory_close(&acc, nccl ? 0 : cn.staged * in, R->cap, &mm);
                    if (!mm.fits) continue;
                    if (mode == 0) {
                        best = bests[0] = v0;
                        bjs[0] = j;
                        brs[0] = r;
                        continue;
                    }
                    for (int t = nt - 1; t >= 0 && !(per > tau[t]); t--) {
                        double v = lat + vt[t];
                        if (v < bests[t]) {
                            bests[t] = v;
                            bjs[t] = j;
                            brs[t] = r;
                        }
                    }
                }
            }
            for (int t = 0; t < nt; t++) {
                const size_t here = dp_v(t, lay + b * W1 + u);
                d->val[here] = bests[t];
                d->cj[here] = bjs[t];
                d->cr[here] = brs[t];
            }
        }
    }
}

/* Solves the programs (dp_layer's modes; nt of them in mode 1): unpinned one layer;
 * pinned, layer 0 (no stage left: only the end is reached) and then 1..K. */
static void dp_solve(const nm_model *m, const nm_setting *s, nm_dp *d, int mode,
                     const double *tau, int nt)
{
    if (d->K > 0)
        for (int t = 0; t < (mode ? nt : 1); t++)
            for (int b = 0; b <= d->nb; b++)
                for (int u = 0; u <= d->U; u++)
                    d->val[dp_v(t, dp_at(d, 0, b, u))] = b == d->nb ? 0 : INFINITY;
    for (int k = d->K > 0 ? 1 : 0; k <= d->K; k++) dp_layer(m, s, d, mode, tau, nt, k);
}

/* Program t's partition (from the start state). 0, or -1 when it has none. */
static int dp_extract(const nm_model *m, const nm_dp *d, int t, nm_part *pt)
{
    int b = 0, u = 0, k = d->K;
    pt->nst = 0;
    while (b < m->nb) {
        if (d->K > 0 && k < 1) return -1;
        size_t at = dp_v(t, dp_at(d, k, b, u));
        int j = d->cj[at], r = d->cr[at];
        if (d->K > 0) k--;
        if (j < 0 || pt->nst >= NM_MAX_STAGES) return -1;
        pt->st[pt->nst++] = (nm_stage){b, j, u, r};
        b = j;
        u += r;
    }
    pt->ranks = pt->nst;
    return 0;
}

static int same_part(const nm_part *a, const nm_part *b)
{
    if (a->nst != b->nst) return 0;
    for (int i = 0; i < a->nst; i++)
        if (memcmp(&a->st[i], &b->st[i], sizeof a->st[i])) return 0;
    return 1;
}

/* One setting's programs, solved: the min-max partition and each threshold's, priced
 * (nm_model.kept; ranked out by kept_out). */
typedef struct nm_dp_kept {
    nm_setting s;             /* quick cleared */
    int nf;                   /* thresholds solved: 1 (quick, asynchronous kinds) or all */
    int solved;               /* 0: an empty slot */
    int tau_ok;               /* the min-max program has a partition that fits */
    int has0, hasf[NM_DP_TAUS];
    nm_part p0, pf[NM_DP_TAUS];
} nm_dp_kept;

struct nm_dp_memo {
    int next;                 /* the slot the next setting solved replaces */
    nm_dp_kept e[NM_DP_KEPT];
};

struct nm_dp_memo *nm_kept_new(void) { return calloc(1, sizeof(struct nm_dp_memo)); }

static int kept_is(const nm_dp_kept *e, const nm_setting *s)
{
    return e->solved && e->s.kind == s->kind && e->s.M == s->M && e->s.mbsize == s->mbsize &&
           e->s.recompute == s->recompute && e->s.chunks == s->chunks && e->s.opt == s->opt &&
           e->s.nstages == s->nstages && e->s.p2p_sync == s->p2p_sync &&
           e->s.grad_sync_end == s->grad_sync_end && e->s.zero == s->zero;
}

/* Solves the programs of s with nf thresholds into e. 0, or -1 out of memory. */
static int kept_solve(const nm_model *m, const nm_setting *s, int nf, nm_dp_kept *e)
{
    int K = s->nstages > 0 ? s->nstages : 0;
    size_t ns = (size_t)(K + 1) * (m->nb + 1) * (m->U + 1);
    nm_dp d = {m->nb, m->U, K, ns, malloc(NM_DP_TAUS * ns * sizeof(double)),
               malloc(NM_DP_TAUS * ns * sizeof(int)), malloc(NM_DP_TAUS * ns * sizeof(int))};
    int rc = -1;
    memset(e, 0, offsetof(nm_dp_kept, p0));
    e->s = *s;
    e->s.quick = 0;
    e->nf = nf;
    if (!d.val || !d.cj || !d.cr) goto done;
    const size_t top = dp_at(&d, K, 0, 0);
    dp_solve(m, s, &d, 0, NULL, 1);
    double tau = d.val[dp_v(0, top)];
    e->solved = 1;
    rc = 0;
    if (!(e->tau_ok = isfinite(tau))) goto done;
    if ((e->has0 = dp_extract(m, &d, 0, &e->p0) == 0)) nm_price(m, s, &e->p0);
    /* the latency programs under each threshold, solved together (their order and
     * results as if one after the other: the first of them is the quick setting's) */
    static const double fac_sync[NM_DP_TAUS] = {1.000001, 1.15, 1.4, 2.0};
    double taus[NM_DP_TAUS];
    for (int f = 0; f < nf; f++) taus[f] = tau * fac_sync[f];
    dp_solve(m, s, &d, 1, taus, nf);
    for (int f = 0; f < nf; f++)
        if ((e->hasf[f] = isfinite(d.val[dp_v(f, top)]) && dp_extract(m, &d, f, &e->pf[f]) == 0))
            nm_price(m, s, &e->pf[f]);
done:
    free(d.val);
    free(d.cj);
    free(d.cr);
    return rc;
}

/* The partitions of e for nf thresholds, distinct, at most max into out; counts the
 * programs into *dp_runs when fresh (as solving them one by one would). */
static int kept_out(const nm_dp_kept *e, int nf, int fresh, nm_part *out, int max,
                    int *dp_runs)
{
    int n = 0;
    if (fresh) (*dp_runs)++;
    if (!e->tau_ok) return 0;
    if (e->has0) out[n++] = e->p0;
    for (int f = 0; f < nf && n < max; f++) {
        if (fresh) (*dp_runs)++;
        if (!e->hasf[f]) continue;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= same_part(&out[i], &e->pf[f]);
        if (!dup) out[n++] = e->pf[f];
    }
    return n;
}

int nm_partitions(const nm_model *m, const nm_setting *s, nm_part *out, int max, int *dp_runs)
{
    if (sched_kind_chunked(s->kind)) return nm_partitions_interleaved(m, s, out, max);
    int K = s->nstages > 0 ? s->nstages : 0;
    if (K > m->nb || K > m->U || K > NM_MAX_STAGES) return 0; /* nm_begin says why */
    if (max < 1) return 0;
    int nf = sched_traits_of(s->kind)->async || s->quick ? 1 : NM_DP_TAUS;
    /* a setting solved before with at least these thresholds: its partitions again */
    struct nm_dp_memo *mo = m->kept;
    for (int i = 0; mo && i < NM_DP_KEPT; i++)
        if (kept_is(&mo->e[i], s) && mo->e[i].nf >= nf)
            return kept_out(&mo->e[i], nf, 0, out, max, dp_runs);
    nm_dp_kept *e = mo ? &mo->e[mo->next] : malloc(sizeof *e);
    if (!e) return 0;
    int n = kept_solve(m, s, nf, e) ? 0 : kept_out(e, nf, 1, out, max, dp_runs);
    if (!mo) free(e);
    else if (e->solved) mo->next = (mo->next + 1) % NM_DP_KEPT;
    return n;
}

/* Splits blocks into S parts whose work follows the targets share[s] (summing to 1). */
static int split_shares(const nm_model *m, int S, const double *share, nm_part *pt)
{
    if (S > m->nb || S > NM_MAX_STAGES) return -1;
    double total = m->cF[m->nb] + m->cB[m->nb], acc = 0;
    int b = 0;
    for (int s = 0; s < S; s++) {
        acc += share[s] * total;
        int j = b + 1;
        int maxj = m->nb - (S - s - 1);
        while (j < maxj && m->cF[j + 1] + m->cB[j + 1] <= acc) j++;
        if (j < maxj && fabs(m->cF[j + 1] + m->cB[j + 1] - acc) < fabs(m->cF[j] + m->cB[j] - acc))
            j++;
        if (s == S - 1) j = m->nb;
        pt->st[s] = (nm_stage){b, j, 0, 1};
        b = j;
    }
    pt->nst = S;
    return 0;
}

int nm_partitions_interleaved(const nm_model *m, const nm_setting *s, nm_part *out, int max)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    int v = tr->chunks_min == tr->chunks_max ? tr->chunks_min
            : s->chunks > 1 ? s->chunks : tr->chunks_default, n = 0;
    if (m->g != 1) return 0; /* chunked schedules do not replicate: one device per rank */
    for (int p = s->nstages > 0 ? s->nstages : m->U; p >= 2 && n < max;
         p = s->nstages > 0 ? 0 : p / 2) {
        int S = p * v;
        if (S > m->nb || S > NM_MAX_STAGES) continue;
        double share[NM_MAX_STAGES], sum = 0;
        for (int i = 0; i < S; i++)
            sum += m->rg[sched_kind_rank(s->kind, i, p) * (m->U + 1) + 1].speed;
        for (int i = 0; i < S; i++)
            share[i] = m->rg[sched_kind_rank(s->kind, i, p) * (m->U + 1) + 1].speed / sum;
        nm_part pt;
        if (split_shares(m, S, share, &pt)) continue;
        for (int i = 0; i < S; i++) pt.st[i].u = sched_kind_rank(s->kind, i, p);
        pt.ranks = p;
        nm_setting one = *s;
        one.chunks = v;
        nm_price(m, &one, &pt);
        if (pt.fits) out[n++] = pt;
    }
    return n;
}
