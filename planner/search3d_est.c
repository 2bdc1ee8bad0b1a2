/* search3d_est.c: the fast estimate of one tensor x pipeline x data layout
 * (planner/search3d.h). The stages are priced by the simulator's cost model (sim_cost_build)
 * on a schedule of the plan cut to a few microbatches per replica, enough for every stage to
 * reach the most microbatches it holds, so that the memory of each device is the
 * simulator's own (sim_memory_of). The iteration, per schedule kind:
 *
 *   one stage per rank, B whole (1f1b-flush, gpipe): m max_s c_s + the other stages' c_s
 *     (fill and drain), a closed form
 *   the others (interleaved, zb-h1, zb-v, dualpipev): m max_r R_r + the fill and drain of
 *     the pricing schedule's own order, replayed (est_replay): its makespan less its
 *     microbatches x max_r R_r; for the kinds with W apart over two iterations, the
 *     second's end less the first's (one iteration of the steady state, where the next
 *     iteration's forwards start under the last W, as in the simulator). Closed forms on
 *     equal stages, kept where the replay fails: interleaved (p - 1) max_s c_s, zb-h1
 *     (p - 1) max_s max(I_s, F_s + I_s - W_s)
 *
 * with c_s = F_s + B_s the time of one microbatch on virtual stage s, R_r the sum over
 * rank r's chunks and m the microbatches per replica; plus the pipeline sends on the
 * fill and drain path (the replayed kinds: the replay with the sends on the edges between
 * ranks, less the replay without), the data-parallel all-reduce left exposed after each
 * rank's last backward (the simulator's bucketed ring: buckets ready evenly through that
 * backward; each stage of a rank its own ring after its own last backward, the lowering's
 * ALLREDUCE holding the rank until it ends, so a rank's chunks' tails add up) less the
 * slack the rank has before the next iteration reaches it, and the optimizer step
 * (memory-bound, as the simulator prices it).
 *
 * The plan's runtime is priced as the simulator prices it: tp_overlap by sim_cost_build
 * and sim_cost_stage_tp3 themselves (the exposed part of each layer's collectives in F, B,
 * I); the scatter-gather sends' all-gathers after the receives by sim_cost_build and
 * sim_cost_stage_recv_gather (counted with tp_s); overlap_param_gather as the reduce-scatter under the backward and the all-gather the
 * next first forward waits for (exposed_allreduce); p2p_sync as each step's slowest rank
 * with its blocking sends, for zb-h1 with the next rank's deferred W and the slowest two
 * cuts both ways in each step (est_pipeline), for interleaved by a replay of the order
 * under the simulator's synchronous rules (est_sync_replay: batches, rendezvous, gate) less
 * the same replay without them (docs/llm.md, "Searching layouts"). */
#include "planner/search3d.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "core/schedule_impl.h"
#include "core/schedule_traits.h"
#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/memory.h"

/* Microbatches per replica the pricing schedule keeps: m cut by whole rounds of p while at
 * least p + 2 (1F1B: a stage holds at most p - s at once) or 3 p + 2 (the chunked and
 * zero-bubble kinds: their warm-up is below 3 p) stay, and m's remainder modulo p stays, so
 * that each stage holds as many at once as with m. Kinds that hold every microbatch (gpipe)
 * keep all m. */
static int est_microbatches(const sched_traits *tr, int m, int p)
{
    if (tr->hold == SCHED_HOLD_ALL) return m;
    int cap = (tr->hold == SCHED_HOLD_1F1B ? p : 3 * p) + 2;
    return m <= cap ? m : m - p * ((m - cap) / p);
}

/* Buckets of G gradient bytes in the simulator's ring (SIM_BUCKET_BYTES each, 1 to 4096). */
static int buckets(double G)
{
    double kb = ceil(G / SIM_BUCKET_BYTES);
    return kb < 1 ? 1 : kb > 4096 ? 4096 : (int)kb;
}

typedef struct est_stage {
    double F, B, I, W, tp, step, send;
    double hold; /* of send: the time it holds its link and ports (bytes over rate) */
    int lvl;     /* the level its path crosses (sim_net_path), -1 when nothing moves */
} est_stage;

/* The exposed part of the all-reduces of pipeline rank r after its stages' last
 * backwards. The lowering puts each stage's ALLREDUCE right after that stage's last
 * backward (B, or W where split: st[k]), and the simulator holds the rank there until the
 * ring ends, so each stage (chunk) of the rank leaves its own tail, one after another: its
 * K buckets ready evenly through that backward of du seconds (bucket k at (k + 1) du / K;
 * du = 0 under grad_sync end, where the rings run one after another after the last one),
 * each taking a = per_byte x G / K + fixed on the stage's ring, leave max(a, K a - du (K -
 * 1) / K) after it. With one stage per rank that is the stage's own ring. Where the
 * parameter all-gather runs apart (mo->gather_bytes, overlap_param_gather), the ring
 * during the backward is the reduce-scatter alone (r - 1 of the 2 (r - 1) steps, of 2
 * grad_bytes - gather_bytes), and the all-gather of the first stage's parameters follows
 * the step in the same K buckets, under the next iteration's first forward of f seconds
 * on the rank: that forward reaches bucket k at k f / K of its run, so it waits max_k ((k
 * + 1) b - k f / K) for buckets of b seconds (docs/sim.md, "The parameter all-gather
 * apart"), which is added. */
static double exposed_allreduce(const sim_model *mo, const sim_net *net, const plan *pl,
                                const sched_traits *tr, int r, int p, const est_stage *st,
                                int split)
{
    double per_byte, fixed, ex = 0;
    int first = -1;
    for (int k = 0; k < pl->nstages && first < 0; k++)
        if (sched_kind_rank(tr->kind, k, p) == r && mo->grad_bytes[k] > 0) first = k;
    if (first < 0) return 0;
    const plan_stage *ps = &pl->stages[first];
    if (ps->replicas * plan_cp(pl) <= 1) return 0; /* one replica's cp ranks ring too */
    /* the ring of the stage's data-parallel group: with cp > 1 every context rank of its
     * replicas (sim_cost_dp_group), as the simulator's ring runs it */
    int n = ps->replicas * plan_cp(pl), small[64];
    int *devs = n <= 64 ? small : malloc((size_t)n * sizeof *devs);
    if (!devs) return 0;
    n = sim_cost_dp_group(pl, first, devs);
    int bad = sim_net_ring(net, devs, n, &per_byte, &fixed);
    if (devs != small) free(devs);
    if (bad) return 0;
    double *gather = mo->gather_bytes;
    if (gather && gather[first] > 0) per_byte /= 2, fixed /= 2; /* each half: r - 1 steps */
    for (int k = first; k < pl->nstages; k++) {
        if (sched_kind_rank(tr->kind, k, p) != r || !(mo->grad_bytes[k] > 0)) continue;
        double G = gather && gather[k] > 0 ? 2 * mo->grad_bytes[k] - gather[k]
                                            : mo->grad_bytes[k];
        int K = buckets(mo->grad_bytes[k]);
        /* grad_sync end: every bucket ready at once, after the rank's last backward */
        double a = per_byte * G / K + fixed,
               du = pl->grad_sync_end ? 0 : split ? st[k].W : st[k].B;
        double tail = K * a - du * (K - 1) / K;
        ex += tail > a ? tail : a;
    }
    if (gather && gather[first] > 0) {
        int K1 = buckets(mo->grad_bytes[first]);
        double f = st[first].F, b = per_byte * gather[first] / K1 + fixed;
        double last = K1 * b - (K1 - 1) * f / K1;
        ex += last > b ? last : b;
    }
    return ex;
}

/* Seconds of one send of stage st's output to stage st + 1 (their first replicas); *lvl:
 * the level its path crosses (-1 when none), *hold: its bytes over the path's rate. */
static double send_s(const sim_model *mo, const sim_net *net, const plan *pl, int st,
                     int *lvl, double *hold)
{
    *lvl = -1, *hold = 0;
    if (st + 1 >= pl->nstages || !(mo->cut_bytes[st] > 0)) return 0;
    double rate, lat;
    int L = sim_net_path(net, pl->stages[st].devices[0], pl->stages[st + 1].devices[0], &rate,
                         &lat);
    if (L < 0) return 0;
    *lvl = L, *hold = mo->cut_bytes[st] / rate;
    return lat + *hold;
}

/* The pipeline of schedule s (one iteration) replayed `iters` times over (1 or 2): the
 * compute actions of s (one replica per stage) in each worker's order, iteration j's with
 * microbatch + j x microbatches, at the priced times of st, a forward waiting for the
 * previous stage's forward of its microbatch and an I or B for the next stage's, each plus
 * that stage's send when the two stages sit on different workers (sends: 0 or 1); W after
 * its I. done: scratch of 2 x stages x microbatches x iters, t: of the workers. Returns the
 * makespan, or -1 when the lists stall (a malformed schedule); *first: when the first
 * iteration's actions end (a later iteration's come after them in every list and need
 * none of them: the makespan of that iteration alone). */
static double est_replay(const schedule *s, const est_stage *st, int sends, int iters,
                         double *done, double *t, int *pos, double *first)
{
    int S = s->nstages, M = s->microbatches, n = M * iters, left = 0;
    double *fdone = done, *bdone = done + (size_t)S * n, end = 0;
    *first = 0;
    for (size_t i = 0; i < 2 * (size_t)S * n; i++) done[i] = -1;
    for (int w = 0; w < s->nworkers; w++) t[w] = 0, pos[w] = 0, left += iters * s->len[w];
    while (left > 0) {
        int moved = 0;
        for (int w = 0; w < s->nworkers; w++)
            for (; pos[w] < iters * s->len[w]; pos[w]++, left--, moved++) {
                int it = pos[w] / s->len[w];
                const action *a = &s->acts[w][pos[w] - it * s->len[w]];
                int k = a->stage, mb = a->microbatch;
                if (a->kind != ACT_F && a->kind != ACT_B && a->kind != ACT_I &&
                    a->kind != ACT_W)
                    continue;
                if (mb < 0 || mb >= M || k < 0 || k >= S) return -1;
                mb += it * M;
                double ready = 0, cost;
                if (a->kind == ACT_F) {
                    if (k > 0) {
                        double d = fdone[(size_t)(k - 1) * n + mb];
                        if (d < 0) break;
                        int ow = s->stage_workers[s->stage_first[k - 1]];
                        ready = d + (sends && ow != w ? st[k - 1].send : 0);
                    }
                    cost = st[k].F;
                } else if (a->kind == ACT_W) {
                    if ((ready = bdone[(size_t)k * n + mb]) < 0) break;
                    cost = st[k].W;
                } else {
                    if ((ready = fdone[(size_t)k * n + mb]) < 0) break;
                    if (k + 1 < S) {
                        double d = bdone[(size_t)(k + 1) * n + mb];
                        if (d < 0) break;
                        int ow = s->stage_workers[s->stage_first[k + 1]];
                        d += sends && ow != w ? st[k].send : 0;
                        if (d > ready) ready = d;
                    }
                    cost = a->kind == ACT_I ? st[k].I : st[k].B;
                }
                t[w] = (ready > t[w] ? ready : t[w]) + cost;
                if (a->kind == ACT_F) fdone[(size_t)k * n + mb] = t[w];
                else if (a->kind != ACT_W) bdone[(size_t)k * n + mb] = t[w];
                if (t[w] > end) end = t[w];
                if (!it && t[w] > *first) *first = t[w];
            }
        if (!moved) return -1;
    }
    return end;
}

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
    if ((!bf && b->kind != ACT_B) || k1 < 0 || k1 >= x->S) return -1;
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

/* 1 when the sends over cuts a and b, from one device, share an egress port of one lane
 * (eng_path_ports: level 0's is the device's, alone inside a server; levels 1..L the
 * sender's group's). */
static int sync_share(const est_sync *x, int a, int b)
{
    int L1 = x->st[a].lvl, L2 = x->st[b].lvl;
    if (L1 < 0 || L2 < 0) return 0;
    if (L1 == 0 || L2 == 0) return L1 == L2 && x->lanes[0] < 2;
    for (int l = 1; l <= (L1 < L2 ? L1 : L2); l++)
        if (x->lanes[l] < 2) return 1;
    return 0;
}

/* When c's output arrives at rc: its start, or, when the other send of its batch shares a
 * one-lane port with it and started first (the earlier in the list on a tie), once that
 * one has left the port; plus its send. -1 when not yet known. */
static double sync_arrival(const est_sync *x, int c, int rc)
{
    double t = sync_start(x, c, rc);
    if (t < 0) return -1;
    int w = x->who[c], g = x->nbp[c], k = sync_cut(x, c);
    for (int q = c - 1; q <= c + 1; q += 2)
        for (int i = q; i >= x->off[w] && i < x->off[w + 1] && x->nbp[i] == g; i += q - c) {
            int ri = sync_consumer(x, i), ki = sync_cut(x, i);
            if (ri < 0 || !sync_share(x, k, ki)) continue;
            double ti = sync_start(x, i, ri);
            if (ti < 0) return -1;
            if (ti < t || (ti == t && i < c)) t = fmax(t, ti + x->st[ki].hold);
        }
    return t + x->st[k].send;
}

/* An interleaved pipeline under p2p sync, replayed as the simulator runs it
 * (sim/engine_sync.c): each worker's forwards and backwards in its order, its exchanges
 * in batches at its batch points (after every F and B but between the F and the B of a
 * steady pair, when the rank has pairs: sched_interleaved_warmup of M V short of M V); a
 * stage's output leaves in the first batch after the computation that made it, its
 * receiver posts the receive in the last batch before the computation that takes it, and
 * the transfer starts when both have reached those batches (the rendezvous) and arrives
 * one send later (latency and bytes over the path's rate); the consumer waits for it, and
 * so does the sender's next computation (the sync gate). A step in the list costs the
 * stage's step (st[k].step) and is gated, an all-reduce costs nothing. The two sends of a
 * batch leave at once, or one after the other when they share an egress port of one lane
 * (sync_arrival; the other workers' sends through a server's port are not counted). sync 0:
 * the same replay without the rendezvous and the gate, each transfer leaving when its data
 * is made. Returns the makespan of the forwards and backwards (-1 when the lists stall or
 * hold I or W, or on no memory); *slope: the time
 * per microbatch of the steady pairs of the rank with the most of them (its pairs' span
 * over their count, times the chunks per rank), 0 when it has fewer than two. */
static double est_sync_replay(const schedule *s, const est_stage *st, const sim_net *net,
                              int p, int v, int sync, double *slope)
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
    int nc = 0;
    for (int w = 0; w < W; w++) {
        off[w] = nc;
        int st0 = -1;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind == ACT_I || a->kind == ACT_W) goto stall;
            if (act_is_comm(a->kind)) continue;
            if (a->stage < 0 || a->stage >= S || nc >= n) goto stall;
            if (a->kind == ACT_F || a->kind == ACT_B) {
                if (a->microbatch < 0 || a->microbatch >= M) goto stall;
                if (st0 < 0 && a->kind == ACT_F) st0 = a->stage;
                at[2 * (a->stage * M + a->microbatch) + (a->kind == ACT_B)] = nc;
            }
            who[nc] = w, ca[nc++] = a;
        }
        pair[w] = st0 >= 0 && sched_interleaved_warmup(p, v, M, st0 % p) < M * v;
    }
    off[W] = nc;
    for (int w = 0; w < W; w++) { /* gap g of w (before its computation g) a batch point */
        int c0 = off[w], c1 = off[w + 1], last = 0;
        for (int g = 0; g <= c1 - c0; g++) {
            int bp = g == 0 || g == c1 - c0;
            if (!bp) {
                int pk = ca[c0 + g - 1]->kind, nk = ca[c0 + g]->kind;
                bp = pk != ACT_F && pk != ACT_B ? nk == ACT_F /* after a step or all-reduce */
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
                int fb = fwd || a->kind == ACT_B;
                double ready = j > 0 ? end[c - 1] : 0, arr;
                if (fb && !fwd) { /* its own forward */
                    double d = end[at[2 * (k * M + mb)]];
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
                                  : a->kind == ACT_STEP ? st[k].step : 0);
                if (fb && end[c] > mk) mk = end[c];
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

/* The closed-form makespan and its parts from the priced stages st[0..S) of p ranks x v
 * chunks each, m microbatches per replica, split: the kind runs I and W apart, sync: the
 * plan's point-to-point transfers block (p2p_sync). *fill_p2p: the part of out->p2p_s that
 * is the sends on the fill and drain path (the rest is sync's blocking sends), which a
 * replay of the order replaces. */
static void est_pipeline(const est_stage *st, int S, int p, int m, int split, int sync,
                         const sched_traits *tr, search3d_est *out, double *fill_p2p)
{
    double cmax = 0, Rmax = 0, fill = 0, tp_rank = 0, zb = 0, step = 0;
    int v = S / (p > 0 ? p : 1);
    for (int r = 0; r < p; r++) {
        double R = 0, tpr = 0, snd = 0;
        /* the share of an interleaved rank's exchanges that are one send each: its warmup
         * forwards' and as many cooldown backwards' (the rest pair up, below) */
        double lone = tr->chunks_max > 1 && !split && m > 0
                          ? fmin(1, (double)sched_interleaved_warmup(p, v, m, r) / (m * v))
                          : 1;
        for (int k = 0; k < S; k++)
            if (sched_kind_rank(tr->kind, k, p) == r) {
                R += st[k].F + (split ? st[k].I + st[k].W : st[k].B);
                tpr += st[k].tp;
                /* its F's output forward, its backward's gradient back, blocking: one
                 * exchange each (1F1B's pairs a send with the opposite receive on the same
                 * neighbour, both ways at once); an interleaved rank exchanges with both
                 * neighbours once after each steady F-B pair, the two sends leaving at
                 * once (each over its own lane of the egress port), so the longer one (the
                 * fallback: est_sync_replay replaces interleaved's when it runs) */
                double sf = st[k].send, sb = k > 0 ? st[k - 1].send : 0;
                snd += fmax(sf, sb) + lone * fmin(sf, sb);
            }
        if (R > Rmax) Rmax = R, tp_rank = tpr;
        /* p2p sync: a rank computes again only once each of its sends has arrived, so each
         * of the m steps takes the slowest rank's compute and sends */
        if (R + snd > step) step = R + snd;
    }
    /* zb-h1 under p2p sync: rank k + 1 posts its receive of the next forward input after
     * its deferred W, so rank k's send waits for it (the lock: each step is at least
     * max_k F_k + I_k + W_k + W_k+1), and rank k + 1 exchanges with both neighbours in
     * turn, each send waiting for its receiver: a step also holds the two cuts around the
     * slowest rank both ways, 2 (s_k + s_k+1) (measured against the simulator's steps,
     * docs/llm.md, "Searching layouts") */
    if (split && tr->chunks_max == 1 && S > 1) {
        double lock = 0, cuts = 0;
        for (int k = 0; k + 1 < S; k++) {
            lock = fmax(lock, st[k].F + st[k].I + st[k].W + st[k + 1].W);
            cuts = fmax(cuts, 2 * (st[k].send + st[k + 1].send));
        }
        if (lock + cuts > step) step = lock + cuts;
    }
    for (int k = 0; k < S; k++) {
        double c = st[k].F + (split ? st[k].I + st[k].W : st[k].B);
        if (c > cmax) cmax = c;
        /* zb-h1's steady bubble per rank on equal stages: max(I, F + I - W) (docs/llm.md) */
        double z = fmax(st[k].I, st[k].F + st[k].I - st[k].W);
        if (z > zb) zb = z;
        fill += c;
    }
    if (tr->chunks_max == 1 && !split) {
        out->bubble_s = fill - cmax; /* the other stages' fill and drain */
    } else if (split) {
        out->bubble_s = (p - 1) * zb;
    } else {
        out->bubble_s = (p - 1) * cmax;
    }
    double p2p = 0;
    for (int k = 0; k + 1 < S && k < p - 1; k++) p2p += 2 * st[k].send;
    *fill_p2p = p2p;
    out->p2p_s = p2p + (sync ? m * (step - Rmax) : 0);
    out->tp_s = m * tp_rank;
    out->compute_s = m * Rmax - out->tp_s;
}

/* The time after the pipeline that the all-reduces and steps add: per rank, its first
 * stage's exposed all-reduce and its stages' steps, less the slack before the next
 * iteration's first forward reaches it (the forwards and backwards of the ranks before
 * it). */
static double est_tail(const est_stage *st, const double *expo, int S, int p,
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

/* The figures of pl (its zero stage as given) from the one-pipeline model mo of schedule
 * s on net: the stage state set for pl's replicas, the closed form (or the replay) and the
 * memory. st and expo: scratch of the plan's stages; done and pos: the replay's; rep: the
 * replay's makespans without and with sends once rep[0] is set (this sets it), kept for
 * the next ZeRO stage of the same model. */
static void est_figures(const plan *pl, const schedule *s, sim_model *mo, const sim_net *net,
                        int m, est_stage *st, double *expo, double *done, int *pos,
                        double *rep, search3d_est *out)
{
    const sched_traits *tr = sched_traits_of(pl->schedule);
    int S = pl->nstages, v = pl->chunks > 1 ? pl->chunks : 1, p = S / v;
    int split = tr->split_backward;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < S; k++) sim_cost_stage_state(mo, pl, net, k, mo->param_bytes[k]);
    for (int k = 0; k < S; k++) {
        int w0 = s->stage_workers[s->stage_first[k]];
        double sc = mo->worker_scale[w0];
        const double *a = &mo->act_s[(size_t)k * SIM_NC];
        sim_tp_times tpt; /* what of them blocks under the plan's tp_overlap */
        sim_cost_stage_tp3(pl, net, k, &tpt);
        double tpf = tpt.f, tpb = split ? tpt.i : tpt.b, gf, gb;
        /* the scatter-gather's all-gathers after the receives, inside act_s already */
        sim_cost_stage_recv_gather(mo, pl, net, k, &gf, &gb);
        int lvl;
        double hold, send = send_s(mo, net, pl, k, &lvl, &hold);
        st[k] = (est_stage){.F = a[SIM_C_F] * sc, .B = a[SIM_C_B] * sc, .I = a[SIM_C_I] * sc,
                            .W = a[SIM_C_W] * sc,
                            .tp = tpf + tpb + gf + gb +
                                  (pl->recompute == RECOMPUTE_FULL ? tpf : 0),
                            .send = send, .hold = hold, .lvl = lvl};
        st[k].step = mo->worker_mem_Bps[w0] > 0 ? mo->step_bytes[k] / mo->worker_mem_Bps[w0] : 0;
    }
    double fill_p2p;
    est_pipeline(st, S, p, m, split, pl->p2p_sync, tr, out, &fill_p2p);
    if (tr->chunks_max > 1 || split) { /* the fill and drain of the order, replayed */
        /* the split kinds over two iterations: the second's makespan less the first's is
         * one iteration of the steady state, where the next forwards start under the
         * last W (the simulator's iteration); the others end on their first rank, whose
         * next forward waits for it, so one iteration is that */
        if (!rep[0]) { /* the stages' times do not change with the ZeRO stage */
            int iters = split ? 2 : 1;
            double *t = done + 4 * (size_t)S * s->microbatches, b1, s1;
            rep[1] = est_replay(s, st, 0, iters, done, t, pos, &b1);
            rep[2] = est_replay(s, st, 1, iters, done, t, pos, &s1);
            if (iters == 2) rep[1] -= b1, rep[2] -= s1;
            rep[3] = rep[5] = -1;
            if (pl->p2p_sync && !split) {
                rep[3] = est_sync_replay(s, st, net, p, v, 1, &rep[4]);
                rep[5] = est_sync_replay(s, st, net, p, v, 0, &rep[6]);
            }
            rep[0] = 1;
        }
        double bare = rep[1], sent = rep[2], synced = rep[3], plain = rep[5];
        if (bare > 0 && sent >= bare) {
            double Rmax = (out->compute_s + out->tp_s) / m;
            int M = s->microbatches;
            out->bubble_s = fmax(bare - M * Rmax, 0);
            out->p2p_s += sent - bare - fill_p2p;
            /* interleaved under p2p sync: the synchronous replay's makespan, and its steady
             * rate for the microbatches the pricing schedule cut */
            if (synced > 0 && plain > 0 && (M == m || (rep[4] > 0 && rep[6] > 0)))
                out->p2p_s = sent - bare + fmax(synced - plain + (m - M) * (rep[4] - rep[6]), 0);
        }
    }
    for (int k = 0; k < S; k++) { /* per rank, at its first stage */
        int r = sched_kind_rank(tr->kind, k, p), first = 0;
        while (sched_kind_rank(tr->kind, first, p) != r) first++;
        expo[k] = first == k ? exposed_allreduce(mo, net, pl, tr, r, p, st, split) : 0;
    }
    double tail = est_tail(st, expo, S, p, tr, &out->dp_s, &out->step_s);
    out->iteration_s = out->compute_s + out->tp_s + out->bubble_s + out->p2p_s + tail;
    /* memory: each rank's first group, as the simulator's report */
    out->fits = 1;
    for (int r = 0; r < p; r++) {
        int k = 0;
        while (k < S && sched_kind_rank(tr->kind, k, p) != r) k++;
        if (k == S) continue;
        int w = s->stage_workers[s->stage_first[k]];
        const device_type *t = cluster_device_type(pl->clus, mo->worker_device[w]);
        sim_memory mem;
        sim_memory_of(mo, w, NULL, pl->optimizer, t ? t->memory_bytes : 0, &mem);
        if (mem.total > out->peak_bytes) {
            out->peak_bytes = mem.total;
            out->capacity_bytes = mem.capacity;
        }
        if (!mem.fits) {
            if (out->fits) out->capacity_bytes = mem.capacity;
            out->fits = 0;
        }
    }
}

int search3d_estimate_zeros(const plan *pl, int nz, const int *zeros, search3d_est *out,
                            plumb_err *err)
{
    const sched_traits *tr = sched_traits_of(pl->schedule);
    int S = pl->nstages, v = pl->chunks > 1 ? pl->chunks : 1, p = S / v;
    int dp = pl->stages[0].replicas, m = pl->microbatches / (dp > 0 ? dp : 1);
    if (!tr || p < 1 || m < 1)
        return err_set(err, NULL, NULL, "the plan's schedule, stages or microbatches");
    /* one pipeline: every replica runs the same order (docs/llm.md, "3D layouts"), so its
     * first replicas' schedule prices the stages and holds what each device holds; the
     * state and the all-reduce are then set for the replicas */
    plan view = *pl; /* shallow, with its own stages of one replica */
    view.microbatches = est_microbatches(tr, m, p);
    sim_model mo = {0};
    est_stage *st = calloc((size_t)S, sizeof *st);
    double *expo = calloc((size_t)S, sizeof *expo);
    plan_stage *one = calloc((size_t)S, sizeof *one);
    double *done = NULL;
    int *pos = NULL;
    schedule *s = NULL;
    int rc = -1, built = -1; /* sim_cost_plan_is_3d of the model built */
    double rep[7] = {0}; /* the replays of the model built: done, bare, with sends; under p2p
                           sync the synchronous replay, its steady rate, the same replay
                           without the sync rules, its rate */
    if (!st || !expo || !one) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int k = 0; k < S; k++) {
        one[k] = pl->stages[k];
        one[k].replicas = 1;
    }
    view.stages = one;
    if (!(s = schedule_from_plan(&view, 1, err))) goto done;
    done = malloc((4 * (size_t)S * s->microbatches + s->nworkers) * sizeof *done); /* 2
                                                                     iterations' replay */
    pos = malloc((size_t)s->nworkers * sizeof *pos);
    if (!done || !pos) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    for (int i = 0; i < nz; i++) {
        plan zp = *pl; /* shallow: the ZeRO stage changes the state, not the stages' times */
        zp.zero = view.zero = zeros[i];
        /* the buffers a plan's runtime has follow sim_cost_plan_is_3d, which ZeRO can
         * change: price again then */
        if (built != sim_cost_plan_is_3d(&zp)) {
            sim_model_release(&mo);
            if (sim_cost_build(&mo, &view, s, &net, -1, 1, err)) goto done;
            built = sim_cost_plan_is_3d(&zp);
            rep[0] = 0; /* priced again: replay again */
        }
        est_figures(&zp, s, &mo, &net, m, st, expo, done, pos, rep, &out[i]);
    }
    rc = 0;
done:
    sim_model_release(&mo);
    schedule_free(s);
    free(st);
    free(expo);
    free(one);
    free(done);
    free(pos);
    return rc;
}

int search3d_estimate(const plan *pl, search3d_est *out, plumb_err *err)
{
    memset(out, 0, sizeof *out);
    return search3d_estimate_zeros(pl, 1, &pl->zero, out, err);
}
