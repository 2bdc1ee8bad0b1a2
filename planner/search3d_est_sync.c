/* search3d_est_sync.c: the 3D search's estimate of an interleaved pipeline under p2p
 * sync (planner/search3d_impl.h): its order replayed under the simulator's synchronous
 * rules (sim/engine_sync.c: batches, rendezvous, the gate, egress ports short of lanes),
 * and the same replay without them, whose difference is the time sync adds. */
#include "planner/search3d_impl.h"

#include <math.h>
#include <stdlib.h>

#include "core/schedule_impl.h"

/* The state of est_sync_replay that its transfers read: per computation c (worker w's
 * from off[w]) its action, worker, next batch point after it and last batch point at or
 * before it (gaps of w's list); per (stage, microbatch, F/B) its computation; the ends so
 * far (-1: not yet); the lanes of each level's egress port. */
typedef struct est_sync {
    const action **ca;
    const int *who, *nbp, *pbp, *at, *off;
    const double *end;
    const est_stage *st;
    int S, M, lanes[CLUSTER_MAX_LEVELS];
} est_sync;

/* The computation on another worker that takes computation c's output, or -1 (none, or
 * on c's worker). */
static int sync_consumer(const est_sync *x, int c)
{
    const action *b = x->ca[c];
    int bf = b->kind == ACT_F, k1 = bf ? b->stage + 1 : b->stage - 1;
    if ((!bf && b->kind != ACT_B && b->kind != ACT_I) || k1 < 0 || k1 >= x->S) return -1;
    int rc = x->at[2 * (k1 * x->M + b->microbatch) + !bf];
    return rc >= 0 && x->who[rc] != x->who[c] ? rc : -1;
}

/* The cut computation c's output crosses (the stage whose send it is). */
static int sync_cut(const est_sync *x, int c)
{
    return x->ca[c]->kind == ACT_F ? x->ca[c]->stage : x->ca[c]->stage - 1;
}

/* When the transfer of c's output to rc may start: both have reached their batches (the
 * sender the first after c, the receiver the last at or before rc); -1 when not yet known. */
static double sync_start(const est_sync *x, int c, int rc)
{
    int w = x->who[c], rw = x->who[rc], rg = x->pbp[rc];
    double ps = x->end[x->off[w] + x->nbp[c] - 1], pr = rg > 0 ? x->end[x->off[rw] + rg - 1] : 0;
    return ps < 0 || pr < 0 ? -1 : fmax(ps, pr);
}

/* 1 when the sends over cuts a and b, from a device of stage k, queue at an egress port
 * (eng_path_ports: level 0's is the device's, alone inside a server; levels 1..L the
 * sender's group's): the port has fewer lanes than the two sends of every replica of the
 * stage that sends through it (st[k].peers; they run one order in step, so their batches
 * send at once). The simulator sends a replica's cut as one transfer from its worker, on
 * its tensor-parallel group's first device, holding one lane of such a port, so on a DGX
 * H100 server at tp 1 eight replicas put 16 sends on the 8 lanes of its level-1 port (half
 * of them wait a hold), at tp 2 four put 8 and at tp 4 two put 4 (none waits). With tp > 1
 * both leaving the server, a send also holds a lane per rank of its group's own lanes
 * (their NICs, st[k].own_queue: one each on a DGX server, so the two always queue there). */
static int sync_share(const est_sync *x, int a, int b, int k)
{
    int L1 = x->st[a].lvl, L2 = x->st[b].lvl;
    if (L1 < 0 || L2 < 0) return 0;
    if (L1 == 0 || L2 == 0) return L1 == L2 && x->lanes[0] < 2;
    if (x->st[k].own_queue) return 1;
    for (int l = 1; l <= (L1 < L2 ? L1 : L2); l++)
        if (x->lanes[l] < 2 * x->st[k].peers[l]) return 1;
    return 0;
}

/* When c's output arrives at rc: its start, or, when the other send of its batch queues
 * at a port with it (sync_share) or goes to the same worker (pp 2: the one link between
 * the two devices) and started first (the earlier in the list on a tie), once that one
 * has left the port; plus its send. -1 when not yet known. */
static double sync_arrival(const est_sync *x, int c, int rc)
{
    double t = sync_start(x, c, rc);
    if (t < 0) return -1;
    int w = x->who[c], g = x->nbp[c], k = sync_cut(x, c);
    for (int q = c - 1; q <= c + 1; q += 2)
        for (int i = q; i >= x->off[w] && i < x->off[w + 1] && x->nbp[i] == g; i += q - c) {
            int ri = sync_consumer(x, i), ki = sync_cut(x, i);
            /* one link between the two devices: both to one receiver (pp 2) */
            if (ri < 0 || (!sync_share(x, k, ki, x->ca[c]->stage) && x->who[ri] != x->who[rc]))
                continue;
            double ti = sync_start(x, i, ri);
            if (ti < 0) return -1;
            if (ti < t || (ti == t && i < c)) t = fmax(t, ti + x->st[ki].hold);
        }
    return t + x->st[k].send;
}

/* An interleaved or zb-h1 pipeline under p2p sync, replayed as the simulator runs it
 * (sim/engine_sync.c): each worker's forwards and backwards (F, B; F, I, W where split) in
 * its order, its exchanges in batches at its batch points (after every computation but
 * between the F and the B of an interleaved steady pair, when the rank has pairs:
 * sched_interleaved_warmup of M V short of M V; zb-h1's receive of a forward's input thus
 * waits for the W before that F); a
 * stage's output leaves in the first batch after the computation that made it, its
 * receiver posts the receive in the last batch before the computation that takes it, and
 * the transfer starts when both have reached those batches (the rendezvous) and arrives
 * one send later (latency and bytes over the path's rate); the consumer waits for it, and
 * so does the sender's next computation (the sync gate). A step in the list costs the
 * stage's step (st[k].step) and is gated, after ar[k] (the part of stage k's ring left
 * after its last backward: the ALLREDUCE before the STEP, which holds the worker, not
 * gated; the pricing schedule of one replica has none in its lists; nothing where ar is
 * NULL). The two sends of a
 * batch leave at once, or one after the other when the port they leave by has fewer lanes
 * than the sends of the stage's replicas on the server (sync_share, sync_arrival). sync 0:
 * the same replay without the rendezvous and the gate, each transfer leaving when its data
 * is made. Returns the makespan of the computations (-1 when the lists stall, or on no
 * memory); *slope: the time per microbatch of the steady pairs of the rank with the most
 * of them (its pairs' span over their count, times the chunks per rank), 0 when it has
 * fewer than two; where split, of the slowest rank's W from its (p + 1)-th to its
 * (M - p)-th, 0 when M < 2 p + 2. */
double est_sync_replay(const schedule *s, const est_stage *st, const double *ar,
                       const sim_net *net, int p, int v, int sync, double *slope)
{
    int S = s->nstages, M = s->microbatches, W = s->nworkers, n = 2 * S * M;
    for (int w = 0; w < W; w++)
        if (s->len[w] > 0) n += s->len[w]; /* the computations, steps and all-reduces */
    double mk = -1, *end = malloc((size_t)n * sizeof *end);
    int *wof = malloc((size_t)n * 5 * sizeof *wof), *off = malloc(((size_t)W + 1) * 3 * sizeof *off);
    *slope = 0;
    if (!end || !wof || !off)
        goto cleanup;
    /* per computation c (worker w's list from off[w]): kind, stage, microbatch, next and
     * previous batch point; per (stage, microbatch, F/B): its computation */
    int *who = wof, *nbp = wof + n, *pbp = wof + 2 * n, *at = wof + 3 * n, *pos = off + W + 1,
        *pair = off + 2 * (W + 1);
    const action **ca = malloc((size_t)n * sizeof *ca);
    if (!ca)
        goto cleanup;
    for (int i = 0; i < n; i++) at[i] = -1;
    int nc = 0, split = 0;
    for (int w = 0; w < W; w++) {
        off[w] = nc;
        int st0 = -1;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (act_is_comm(a->kind)) continue;
            if (a->stage < 0 || a->stage >= S || nc >= n) goto stall;
            if (act_is_compute(a->kind)) {
                if (a->microbatch < 0 || a->microbatch >= M) goto stall;
                if (st0 < 0 && a->kind == ACT_F) st0 = a->stage;
                split |= a->kind == ACT_W;
                if (a->kind != ACT_W) /* the backward's slot: B, or I where split */
                    at[2 * (a->stage * M + a->microbatch) + (a->kind != ACT_F)] = nc;
            }
            who[nc] = w, ca[nc++] = a;
        }
        /* a split kind (zb-h1) has no pairs: a batch after each F, I and W */
        pair[w] = !split && st0 >= 0 && sched_interleaved_warmup(p, v, M, st0 % p) < M * v;
    }
    off[W] = nc;
    for (int w = 0; w < W; w++) { /* gap g of w (before its computation g) a batch point */
        int c0 = off[w], c1 = off[w + 1], last = 0;
        for (int g = 0; g <= c1 - c0; g++) {
            int bp = g == 0 || g == c1 - c0;
            if (!bp) {
                int pk = ca[c0 + g - 1]->kind, nk = ca[c0 + g]->kind;
                bp = !act_is_compute(pk) ? nk == ACT_F /* after a step or all-reduce */
                                                : !pair[w] || pk != ACT_F || nk != ACT_B;
            }
            if (bp) {
                for (int i = last; i < g; i++) nbp[c0 + i] = g; /* first batch after i */
                last = g;
            }
            if (g < c1 - c0) pbp[c0 + g] = last;                /* last batch at or before g */
        }
        pos[w] = 0;
    }
    for (int i = 0; i < n; i++) end[i] = -1;
    est_sync x = {.ca = ca, .who = who, .nbp = nbp, .pbp = pbp, .at = at, .off = off,
                  .end = end, .st = st, .S = S, .M = M};
    for (int l = 0; l < net->nlevels && l < CLUSTER_MAX_LEVELS; l++)
        x.lanes[l] = sim_net_lanes(net, l);
    int left = nc;
    mk = 0;
    while (left > 0) {
        int moved = 0;
        for (int w = 0; w < W; w++) {
            int c0 = off[w];
            for (; c0 + pos[w] < off[w + 1]; pos[w]++, left--, moved++) {
                int j = pos[w], c = c0 + j;
                const action *a = ca[c];
                int k = a->stage, mb = a->microbatch, fwd = a->kind == ACT_F;
                int fb = fwd || a->kind == ACT_B || a->kind == ACT_I;
                double ready = j > 0 ? end[c - 1] : 0, arr;
                if (a->kind == ACT_STEP && ar) ready += ar[k]; /* its ALLREDUCE, ungated */
                if ((fb && !fwd) || a->kind == ACT_W) { /* its own forward (W: its own I) */
                    int oc = at[2 * (k * M + mb) + (a->kind == ACT_W)];
                    if (oc < 0) goto stall;
                    double d = end[oc];
                    if (d < 0) break;
                    if (d > ready) ready = d;
                }
                int k0 = fwd ? k - 1 : k + 1; /* the stage whose output it takes */
                if (fb && k0 >= 0 && k0 < S) {
                    int pc = at[2 * (k0 * M + mb) + !fwd];
                    if (pc < 0) goto stall;
                    int pw = who[pc];
                    double sd = st[fwd ? k0 : k].send;
                    if (end[pc] < 0) break;
                    if (pw == w) {
                        arr = end[pc];
                    } else if (!sync) {
                        arr = end[pc] + sd;
                    } else if ((arr = sync_arrival(&x, pc, c)) < 0) {
                        break; /* sent at pw's batch point after it, received at ours */
                    }
                    if (arr > ready) ready = arr;
                }
                /* the gate (not on an all-reduce): this batch point's sends have arrived */
                int blocked = 0;
                for (int i = j - 1; sync && a->kind != ACT_ALLREDUCE && i >= 0 &&
                                    nbp[c0 + i] == j; i--) {
                    int rc = sync_consumer(&x, c0 + i);
                    if (rc < 0) continue;
                    if ((arr = sync_arrival(&x, c0 + i, rc)) < 0) { blocked = 1; break; }
                    if (arr > ready) ready = arr;
                }
                if (blocked) break;
                end[c] = ready + (fwd ? st[k].F : a->kind == ACT_B ? st[k].B
                                  : a->kind == ACT_I ? st[k].I : a->kind == ACT_W ? st[k].W
                                  : a->kind == ACT_STEP ? st[k].step : 0);
                if (act_is_compute(a->kind) && end[c] > mk) mk = end[c];
            }
        }
        if (!moved) goto stall;
    }
    /* the steady pairs' rate on the rank with the most pairs */
    int best = -1, bestn = 0;
    for (int w = 0; w < W; w++) {
        int np = 0;
        for (int c = off[w] + 1; c < off[w + 1]; c++)
            np += ca[c - 1]->kind == ACT_F && ca[c]->kind == ACT_B && nbp[c - 1] != c - off[w];
        if (np > bestn) bestn = np, best = w;
    }
    if (bestn >= 2) {
        double t0 = -1, t1 = -1;
        for (int c = off[best] + 1; c < off[best + 1]; c++)
            if (ca[c - 1]->kind == ACT_F && ca[c]->kind == ACT_B &&
                nbp[c - 1] != c - off[best]) { /* c ends a steady pair */
                if (t0 < 0) t0 = end[c];
                t1 = end[c];
            }
        *slope = v * (t1 - t0) / (bestn - 1);
    }
    /* zb-h1 (one stage a rank, W apart): the steady rate of each rank's W, leaving out its
     * first and last p (the warmup and the cooldown), the slowest rank's */
    for (int w = 0; split && w < W; w++) {
        int nw = 0, lo = p, hi = M - p - 1;
        double t0 = -1, t1 = -1;
        for (int c = off[w]; c < off[w + 1]; c++)
            if (ca[c]->kind == ACT_W) {
                if (nw == lo) t0 = end[c];
                if (nw == hi) t1 = end[c];
                nw++;
            }
        if (hi > lo && t0 >= 0 && t1 >= 0 && (t1 - t0) / (hi - lo) > *slope)
            *slope = (t1 - t0) / (hi - lo);
    }
    goto done;
stall:
    mk = -1;
done:
    free(ca);
cleanup:
    free(end);
    free(wof);
    free(off);
    return mk;
}
