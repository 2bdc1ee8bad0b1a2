/* native_rr.c: the planner's price of a complete pipeline (gpipe, 1f1b-flush, pipedream,
 * 2bw): the replay of its compute order, made for stages of unequal replica counts and
 * used for every count since (docs/planner-native.md, sections 7 and 8: a replica's few
 * microbatches, each stage's all-reduce after its own last backward, stage 0's first
 * sends queued at a port; the asynchronous kinds' all-reduce and optimizer step inside
 * their loop, and each replica pair's own path, section 8, "The asynchronous kinds'
 * all-reduce in the loop" and "Per-replica paths, the optimizer step and a steady score").
 *
 * Microbatch g of a stage with r replicas runs on replica g % r (1F1B-RR,
 * docs/schedules.md), and each replica runs its microbatches in a fixed order: all
 * forwards then all backwards (gpipe), or a warmup of ceil(W / r) - 1 forwards (W: the
 * devices of this stage and those after it) and then one forward and one backward in turn
 * (the 1F1B kinds). When the counts differ, a replica's next microbatch comes from a
 * replica of the neighbouring stage that is in another phase of its own order, and it
 * waits: with r = 2, 3, 4 and balanced stages 25 % longer per microbatch than any stage
 * alone needs (docs/planner-native.md, section 7). That wait depends on every stage's
 * count at once, which the dynamic program cannot see stage by stage; this file replays
 * the compute order of a complete partition instead, as a max-plus recurrence (no events,
 * no contention): each action starts when its replica is free and its input has arrived
 * (the forward of the stage before, or the backward of the stage after, plus one
 * transfer). Each replica's order is the generator's own (sched_replica_order, which
 * core/schedule_gen.c's gen_single lays out), without the lowering that schedule_generate
 * adds (its sends, receives and steps: 1.6x the CPU of `plumb plan --schedule auto` for
 * gnmt on the heterogeneous cluster); native_rr/orders_are_the_generators checks it.
 *
 * With d the greatest common divisor of the replica counts and the microbatch count, the
 * microbatches g = a d + e of lane e run on replica d (a % q) + e of a stage of q d
 * replicas: d independent, identical pipelines of q replicas and M / d microbatches. The
 * replay runs one of them (gnmt on 4096 devices: 32 replicas, 112 microbatches). The
 * asynchronous kinds replay at least 5 iterations and 64 lane microbatches (a lane of
 * one microbatch an iteration needs them to pass its fill), and a replicated stage's ring
 * waits for the sends its replicas made through a server's port that they fill (rr_full;
 * the ports' own replay, native_rrport.c, where a port has fewer lanes than its server
 * devices).
 *
 * Under blocking transfers (p2p sync, nm_rr_time_p2p) the same sweep also keeps when each
 * receive is posted (the end of the receiver's computation before the one that takes it,
 * as Megatron-LM's batches place it): a transfer leaves no earlier than its post, and a
 * computation waits for the arrival of the send of the one before it
 * (docs/planner-native.md, section 8, "Under the runtime"). */
#include "planner/native_impl.h"

#include <stdlib.h>

#include "core/schedule.h" /* sched_replica_order: the generator's order */

/* Under blocking transfers (sync), when the send that follows action v (> 0: forward of
 * microbatch v - 1, < 0: backward) of stage s, ending at t, arrives: it leaves once its
 * receiver (stage s + 1's forward, s - 1's backward) has posted the receive (pf, pb: when
 * each was posted, -1 not yet) and takes one transfer. t when the action sends nothing
 * (the last stage's forward, the first stage's backward); -1 when the receive is not
 * posted yet. */
/* The transfer times of a replay: x[s] for every microbatch between stages s and s + 1,
 * or with t (not NULL) t[s * per + a % per] for lane microbatch a (each replica pair's
 * own path). */
typedef struct rr_x {
    const double *x, *t;
    int per;
} rr_x;

static double rr_xof(const rr_x *X, int s, int a)
{
    return X->t ? X->t[(size_t)s * X->per + a % X->per] : X->x[s];
}

static double sent(int v, int s, int S, int n, const rr_x *X, double t, const double *pf,
                   const double *pb)
{
    int a = (v > 0 ? v : -v) - 1, r = v > 0 ? s + 1 : s - 1;
    if (r < 0 || r >= S) return t;
    double p = (v > 0 ? pf : pb)[(size_t)r * n + a];
    if (p < 0) return -1;
    return (p > t ? p : t) + rr_xof(X, v > 0 ? s : s - 1, a);
}

/* The asynchronous kinds' all-reduce and step inside their loop: a group of grp lane
 * microbatches (2bw: an iteration, n / iters; 0: each stage's own q[s], pipedream's
 * round); a stage with ar[s] > 0 (replicated) holds each replica after its last backward
 * of a group until every replica of the stage has reached it and ar[s] more (the
 * simulator's ALLREDUCE releases its members when the last has joined and the ring is
 * done), and every stage then takes its optimizer step, step[s] seconds (NULL: none);
 * iend[iters] (iters <= RR_MAX_ITERS) each iteration's end (its computations' and its groups'
 * releases). The flushing kinds pass none (NULL). */
#define RR_ITERS 5
#define RR_MAX_ITERS 64 /* and more, up to this many, where a lane has few microbatches */
#define RR_STEADY_MB 64 /* the lane microbatches that many iterations reach */
typedef struct rr_groups {
    int grp, iters;
    const double *step;
    double iend[RR_MAX_ITERS];
    /* full[s] bit 0: stage s's forward sends (to s + 1), bit 1: its backward ones (to
     * s - 1) take every lane of a server's port that its ring leaves through (rr_full):
     * its ring starts when they are through */
    unsigned char full[NM_MAX_STAGES];
} rr_groups;

/* The makespan of n microbatches of one lane (q[s] replicas per stage), each stage ending
 * ar[s] seconds after its last action (ar NULL: 0; with gs, after each group instead),
 * the first forward replica a of stage 0 sends arriving late[a] seconds late (late NULL:
 * none; else q[0] of them); *plain (NULL: not asked) the last action's end. -1 when out
 * of memory or when the order cannot finish (it always can: the generator's orders are
 * deadlock-free; kept as a guard). */
static double rr_lane(int S, const int *q, const double *f, const double *b, const rr_x *x,
                      const double *ar, const double *late, int n, int hold_all, int sync,
                      rr_groups *gs, double *plain)
{
    int nw = 0, Wq = 0;
    size_t nact = 0;
    for (int s = 0; s < S; s++) {
        nw += q[s];
        nact += (size_t)q[s] * 2 * ((n + q[s] - 1) / q[s]); /* 2 ceil(n / q) per replica */
    }
    double *fd = malloc((size_t)S * n * sizeof *fd), *bd = malloc((size_t)S * n * sizeof *bd);
    double *freet = calloc((size_t)nw, sizeof *freet);
    int *acts = malloc((nact + 1) * sizeof *acts), *len = calloc((size_t)nw, sizeof *len);
    int *pos = calloc((size_t)nw, sizeof *pos), *wst = malloc((size_t)nw * sizeof *wst);
    size_t *at = malloc((size_t)nw * sizeof *at);
    /* the groups (gs): per stage and group, the replicas that reached its end and when the
     * last did; a group of stage s is G(s) lane microbatches */
    int ngrp = gs ? n : 0;
    int *gcnt = gs ? calloc((size_t)S * ngrp, sizeof *gcnt) : NULL;
    double *gmax = gs ? calloc((size_t)S * ngrp, sizeof *gmax) : NULL;
    if (gs)
        for (int k = 0; k < gs->iters; k++) gs->iend[k] = 0;
    /* sync: when each forward's (pf) and backward's (pb) receive is posted; else unused */
    double *pf = sync ? malloc((size_t)S * n * sizeof *pf) : NULL;
    double *pb = sync ? malloc((size_t)S * n * sizeof *pb) : NULL;
    /* gs: when each replica's last send through a full port (gs->full) is through */
    double *sendt = gs ? calloc((size_t)nw, sizeof *sendt) : NULL;
    double span = -1;
    if (plain) *plain = 0;
    if (!fd || !bd || !freet || !acts || !len || !pos || !wst || !at) goto done;
    if (sync && (!pf || !pb)) goto done;
    if (gs && (!gcnt || !gmax || !sendt)) goto done;
    for (size_t i = 0; i < (size_t)S * n; i++) fd[i] = bd[i] = -1;
    for (size_t i = 0; sync && i < (size_t)S * n; i++) pf[i] = pb[i] = -1;
    int w = nw;
    size_t off = nact;
    for (int s = S - 1; s >= 0; s--) {
        Wq += q[s];
        int k = (Wq + q[s] - 1) / q[s] - 1;
        for (int j = q[s] - 1; j >= 0; j--) {
            w--;
            wst[w] = s;
            off -= 2 * (size_t)((n + q[s] - 1) / q[s]);
            at[w] = off;
            len[w] = sched_replica_order(q[s], j, 0, n, k, hold_all, acts + off);
        }
    }
    /* sweep the replicas, each as far as its inputs allow, until none moves */
    for (int moved = 1; moved;) {
        moved = 0;
        for (w = 0; w < nw; w++) {
            int s = wst[w];
            const int *L = acts + at[w];
            while (pos[w] < len[w]) {
                int v = L[pos[w]], a = (v > 0 ? v : -v) - 1;
                double ready, rel = 0;
                if (sync) /* the batch before this computation posts its receive, before
                             a hold (the exchange after a backward precedes the all-reduce) */
                    (v > 0 ? pf : pb)[(size_t)s * n + a] = freet[w];
                if (gs && pos[w] > 0 && L[pos[w] - 1] < 0) {
                    /* after a group's last backward of a replicated stage: its all-reduce */
                    int pa = -L[pos[w] - 1] - 1, G = gs->grp > 0 ? gs->grp : q[s];
                    if (pa % G >= G - q[s]) {
                        double held = freet[w];
                        if (ar && ar[s] > 0) {
                            size_t gi = (size_t)s * ngrp + pa / G;
                            if (gcnt[gi] < q[s]) break; /* another replica has not reached it */
                            held = gmax[gi] + ar[s];
                        }
                        rel = held + (gs->step ? gs->step[s] : 0); /* then its step */
                    }
                }
                if (v > 0) {
                    if (s > 0 && fd[(size_t)(s - 1) * n + a] < 0) break;
                    ready = s > 0 ? fd[(size_t)(s - 1) * n + a] + rr_xof(x, s - 1, a) : 0;
                    if (sync && s > 0 && freet[w] > fd[(size_t)(s - 1) * n + a])
                        ready = freet[w] + rr_xof(x, s - 1, a); /* sent once the receive is posted */
                    if (s == 1 && late && a < q[0]) ready += late[a]; /* stage 0's first sends */
                } else {
                    if (s + 1 < S && bd[(size_t)(s + 1) * n + a] < 0) break;
                    ready = s + 1 < S ? bd[(size_t)(s + 1) * n + a] + rr_xof(x, s, a) : 0;
                    if (sync && s + 1 < S && freet[w] > bd[(size_t)(s + 1) * n + a])
                        ready = freet[w] + rr_xof(x, s, a);
                }
                if (sync && pos[w] > 0) {
                    /* the previous computation's send must have arrived */
                    double sa = sent(L[pos[w] - 1], s, S, n, x, freet[w], pf, pb);
                    if (sa < 0) break; /* its receiver has not posted the receive yet */
                    if (sa > ready) ready = sa;
                }
                if (rel > ready) ready = rel;
                double t = (freet[w] > ready ? freet[w] : ready) + (v > 0 ? f[s] : b[s]);
                (v > 0 ? fd : bd)[(size_t)s * n + a] = t;
                if (gs) {
                    int it = a / (n / gs->iters), G = gs->grp > 0 ? gs->grp : q[s];
                    if (it < gs->iters && t > gs->iend[it]) gs->iend[it] = t;
                    double st = gs->step ? gs->step[s] : 0;
                    /* a send through a port its stage's sends fill: the ring waits for it */
                    if (v > 0 && (gs->full[s] & 1) && t + rr_xof(x, s, a) > sendt[w])
                        sendt[w] = t + rr_xof(x, s, a);
                    if (v < 0 && (gs->full[s] & 2) && t + rr_xof(x, s - 1, a) > sendt[w])
                        sendt[w] = t + rr_xof(x, s - 1, a);
                    if (v < 0 && ar && ar[s] > 0 && a % G >= G - q[s]) {
                        size_t gi = (size_t)s * ngrp + a / G;
                        if (t > gmax[gi]) gmax[gi] = t;
                        if (sendt[w] > gmax[gi]) gmax[gi] = sendt[w]; /* its ring waits */
                        if (++gcnt[gi] == q[s] && it < gs->iters &&
                            gmax[gi] + ar[s] + st > gs->iend[it])
                            gs->iend[it] = gmax[gi] + ar[s] + st; /* the release counts in it */
                    } else if (v < 0 && a % G >= G - q[s] && it < gs->iters &&
                               t + st > gs->iend[it]) {
                        gs->iend[it] = t + st;
                    }
                }
                freet[w] = t;
                pos[w]++;
                moved = 1;
            }
        }
    }
    span = 0;
    for (w = 0; w < nw; w++) {
        if (pos[w] < len[w]) {
            span = -1;
            break;
        }
    }
    for (w = 0; w < nw && span >= 0; w++) {
        double last = freet[w]; /* the last computation, and under sync its send's arrival */
        if (sync && len[w] > 0) {
            double sa = sent(acts[at[w] + len[w] - 1], wst[w], S, n, x, freet[w], pf, pb);
            if (sa > last) last = sa;
        }
        double e = freet[w] + (ar ? ar[wst[w]] : 0);
        if (last > e) e = last;
        if (e > span) span = e;
        if (plain && last > *plain) *plain = last;
    }
done:
    free(fd), free(bd), free(freet), free(acts), free(len), free(pos), free(wst), free(at);
    free(pf), free(pb), free(gcnt), free(gmax), free(sendt);
    return span;
}

int nm_rr_applies(sched_kind kind, int S)
{
    const sched_traits *tr = sched_traits_of(kind);
    return S >= 2 && !sched_kind_chunked(kind) && !tr->split_backward;
}

double nm_rr_time(sched_kind kind, int S, const int *reps, const double *f, const double *b,
                  const double *x, const double *ar, const double *late0, int M,
                  double *plain)
{
    return nm_rr_time_p2p(kind, S, reps, f, b, x, ar, late0, M, 0, plain);
}

double nm_rr_time_p2p(sched_kind kind, int S, const int *reps, const double *f,
                      const double *b, const double *x, const double *ar, const double *late0,
                      int M, int sync, double *plain)
{
    return nm_rr_time_links(kind, S, reps, f, b, x, ar, late0, M, sync, NULL, plain);
}

/* Lane e's transfer times (n lane microbatches, stage boundaries S - 1) from lk into t:
 * microbatch a d + e goes from replica (a d + e) % reps[s] of stage s to replica
 * (a d + e) % reps[s + 1] of stage s + 1, over the path between their devices (bytes /
 * rate + latency, 0 on one device). Returns the lane's sum. */
static double lane_links(const nm_rr_links *lk, int S, const int *reps, int d, int e, int n,
                         double *t)
{
    double sum = 0;
    for (int s = 0; s + 1 < S; s++)
        for (int a = 0; a < n; a++) {
            long long g = (long long)a * d + e;
            int da = lk->devs[s][g % reps[s]], db = lk->devs[s + 1][g % reps[s + 1]];
            double rate, lat, v = 0;
            if (da != db && lk->bytes[s] > 0 &&
                sim_net_path(lk->net, da, db, &rate, &lat) >= 0 && rate > 0)
                v = lk->bytes[s] / rate + lat;
            t[(size_t)s * n + a] = v;
            sum += v;
        }
    return sum;
}

/* Whether stage s's sends fill a server's egress port that its ring leaves through
 * (lk's devices; S stages of reps[s] replicas): for the hops of its ring (replica order)
 * that leave a server (level 1 or above), how many of the stage's replicas in the
 * sender's server send their microbatches out of it (replica j to replica j % reps[s +-
 * 1], the partner of its microbatches where the counts are equal); as many as the port's
 * level-1 lanes, and the simulator's engine finds the hop no lane until those sends are
 * through (the d lanes run in step, so the lane replayed stands for them all). Bit 0:
 * the forward sends, bit 1: the backward ones; 0 for a stage of one replica or a net of
 * one level. */
static int rr_full(const nm_rr_links *lk, int S, const int *reps, int s)
{
    const sim_net *net = lk->net;
    const int r = reps[s];
    if (!net || net->nlevels < 2 || r < 2) return 0;
    const long long gsz = net->gsize[0];
    const int lanes = sim_net_lanes(net, 1);
    int full = 0;
    long long last = -1; /* the server of the last hop counted */
    for (int j = 0; j < r && full != 3; j++) {
        const int a = lk->devs[s][j], b = lk->devs[s][(j + 1) % r];
        double rate, lat;
        if (a / gsz == last || sim_net_path(net, a, b, &rate, &lat) < 1) continue;
        last = a / gsz;
        for (int dir = 0; dir < 2; dir++) {
            const int to = dir ? s - 1 : s + 1;
            if (to < 0 || to >= S || !(lk->bytes[dir ? s - 1 : s] > 0)) continue;
            int k = 0;
            for (int i = 0; i < r && k < lanes; i++) {
                const int da = lk->devs[s][i], db = lk->devs[to][i % reps[to]];
                if (da / gsz == a / gsz && sim_net_path(net, da, db, &rate, &lat) >= 1) k++;
            }
            if (k >= lanes) full |= 1 << dir;
        }
    }
    return full;
}

double nm_rr_time_links(sched_kind kind, int S, const int *reps, const double *f,
                        const double *b, const double *x, const double *ar,
                        const double *late0, int M, int sync, const nm_rr_links *lk,
                        double *plain)
{
    if (S < 1 || S > NM_MAX_STAGES || M < 1) return -1;
    long long d = M;
    for (int s = 0; s < S; s++) {
        if (reps[s] < 1) return -1;
        d = nm_gcd(d, reps[s]);
    }
    int q[NM_MAX_STAGES], n = (int)(M / d);
    for (int s = 0; s < S; s++) q[s] = (int)(reps[s] / d);
    const sched_traits *tr = sched_traits_of(kind);
    int hold_all = tr->hold == SCHED_HOLD_ALL;
    rr_x X = {x, NULL, n};
    double *xt = NULL, *xe = NULL;
    if (lk && S > 1) {
        /* each replica pair's own path; of the d lanes the one whose transfers take
         * longest in all is replayed (the lanes are the same pipeline on other devices) */
        xt = malloc((size_t)(S - 1) * n * sizeof *xt);
        xe = malloc((size_t)(S - 1) * n * sizeof *xe);
        if (!xt || !xe) {
            free(xt), free(xe);
            return -1;
        }
        double best = -1;
        for (int e = 0; e < d; e++) {
            double sum = lane_links(lk, S, reps, (int)d, e, n, xe);
            if (sum > best) {
                best = sum;
                double *sw = xt;
                xt = xe, xe = sw;
            }
        }
        X.t = xt;
    }
    double t;
    if (!tr->async) {
        /* lane e's microbatch a d + e, a < q[0], is replica a d + e's first: the lane
         * replayed takes the latest of the d at each a */
        double *late = NULL;
        if (late0 && !(late = calloc((size_t)q[0], sizeof *late))) {
            t = -1;
            goto done;
        }
        for (int a = 0; late && a < q[0]; a++)
            for (int e = 0; e < d; e++)
                if (late0[a * d + e] > late[a]) late[a] = late0[a * d + e];
        t = rr_lane(S, q, f, b, &X, ar, late, n, hold_all, sync, NULL, plain);
        free(late);
        goto done;
    }
    /* the asynchronous kinds: one continuous order of RR_ITERS iterations, each stage's
     * all-reduce and optimizer step inside it: 2bw's after each replica's last backward
     * of an iteration, pipedream's after every round (each replica's backward of it); a
     * replicated stage's replicas held until all have reached it and ar[s] more, then the
     * step (lk's; none without lk). The steady iteration, as the simulator's window
     * measures it: from the second iteration's end to the fourth's (past the fill,
     * before the drain) */
    if (nm_rr_ports_apply(lk, S, reps)) {
        /* replicas of a server queueing at its port: every lane at once, with the ports
         * (native_rrport.c) */
        t = nm_rr_ports_time(S, reps, f, b, ar, M, tr->step_each_round, sync, lk);
        if (t >= 0) {
            if (plain) *plain = t;
            goto done;
        }
    }
    /* a lane of few microbatches (n 1: a replica's one microbatch an iteration) needs
     * more iterations than RR_ITERS to pass its fill: at least RR_STEADY_MB lane
     * microbatches, up to RR_MAX_ITERS iterations */
    int iters = RR_ITERS;
    while (iters < RR_MAX_ITERS && (long long)iters * n < RR_STEADY_MB) iters++;
    rr_groups gs = {.grp = tr->step_each_round ? 0 : n, .iters = iters,
                    .step = lk ? lk->step : NULL};
    for (int s = 0; lk && s < S; s++) gs.full[s] = (unsigned char)rr_full(lk, S, reps, s);
    t = rr_lane(S, q, f, b, &X, ar, NULL, iters * n, 0, sync, &gs, NULL);
    if (t >= 0) {
        /* the window: from the end of iteration lo (half way) to that of the last but one
         * (RR_ITERS: the 2nd's to the 4th's), an even count of iterations (a steady state
         * may alternate between two rounds) */
        int hi = iters - 2, lo = iters / 2 - 1;
        if ((hi - lo) % 2) lo--;
        t = (gs.iend[hi] - gs.iend[lo]) / (hi - lo);
        if (plain) *plain = t;
    }
done:
    free(xt), free(xe);
    return t;
}
