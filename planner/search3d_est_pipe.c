/* search3d_est_pipe.c: the pipeline's makespan in the 3D search's estimate (planner/
 * search3d_impl.h), overlapped transfers: the closed forms per schedule kind (with the
 * blocking sends of p2p sync on the kinds without a replay of their own) and the replay of
 * the pricing schedule's order at the priced times (its fill and drain). */
#include "planner/search3d_impl.h"

#include <math.h>
#include <stdlib.h>

#include "core/schedule_impl.h"

/* The closed-form makespan and its parts from the priced stages st[0..S) of p ranks x v
 * chunks each, m microbatches per replica, split: the kind runs I and W apart, sync: the
 * plan's point-to-point transfers block (p2p_sync). *fill_p2p: the part of out->p2p_s that
 * is the sends on the fill and drain path (the rest is sync's blocking sends), which a
 * replay of the order replaces. */
void est_pipeline(const est_stage *st, int S, int p, int m, int split, int sync,
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
     * slowest rank both ways, 2 (s_k + s_k+1) (the steady step is the simulator's; the
     * synchronous replay, est_sync_replay, replaces the m steps where it runs, since the
     * warm-up and cool-down wait less: docs/llm.md, "Searching layouts") */
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


int est_order_of(const schedule *s, est_order *o)
{
    int S = s->nstages, M = s->microbatches, W = s->nworkers, n = 0;
    for (int w = 0; w < W; w++) n += s->len[w];
    *o = (est_order){0};
    o->off = malloc(((size_t)W + 1) * sizeof *o->off);
    o->op = malloc(((size_t)n + 1) * sizeof *o->op);
    if (!o->off || !o->op) {
        est_order_free(o);
        return -1;
    }
    n = 0;
    for (int w = 0; w < W; w++) {
        o->off[w] = n;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            int k = a->stage, mb = a->microbatch, kind = a->kind, cross = 0;
            if (kind == ACT_STEP) {
                if (k < 0 || k >= S) continue;
            } else if (kind == ACT_F || kind == ACT_B || kind == ACT_I || kind == ACT_W) {
                if (mb < 0 || mb >= M || k < 0 || k >= S) {
                    o->bad = 1;
                    continue;
                }
                int from = kind == ACT_F ? k - 1 : kind == ACT_W ? -1 : k + 1;
                cross = from >= 0 && from < S && s->stage_workers[s->stage_first[from]] != w;
            } else {
                continue;
            }
            o->op[n++] = (est_op){.k = k, .mb = mb, .kind = (unsigned char)kind,
                                  .cross = (unsigned char)cross};
        }
    }
    o->off[W] = n;
    return 0;
}

void est_order_free(est_order *o)
{
    free(o->off);
    free(o->op);
    *o = (est_order){0};
}

/* The pipeline of schedule s (one iteration) replayed `iters` times over (1 or 2): the
 * compute actions of s (one replica per stage) in each worker's order, iteration j's with
 * microbatch + j x microbatches, at the priced times of st, a forward waiting for the
 * previous stage's forward of its microbatch and an I or B for the next stage's, each plus
 * that stage's send when the two stages sit on different workers (sends: 0 or 1); W after
 * its I. With tail, each STEP of stage k too, in its place in the list (after the stage's
 * last backward, where the simulator's ALLREDUCE holds the worker), for tail[k], and a
 * later iteration's first forward of stage k no earlier than tail[S + k] after the
 * worker's last STEP before it. done: scratch of 2 x stages x microbatches x iters, t: of
 * 2 x the workers. Returns the makespan, or -1 when the lists stall (a malformed
 * schedule); *first: when the first iteration's actions end (a later iteration's come
 * after them in every list and need none of them: the makespan of that iteration alone). */
double est_replay(const schedule *s, const est_order *o, const est_stage *st,
                  const double *tail, int sends, int iters, double *done, double *t, int *pos,
                  double *first)
{
    int S = s->nstages, M = s->microbatches, n = M * iters, left = 0;
    double *fdone = done, *bdone = done + (size_t)S * n, end = 0;
    *first = 0;
    if (o->bad) return -1; /* the original lists stall or fail there */
    for (size_t i = 0; i < 2 * (size_t)S * n; i++) done[i] = -1;
    double *stepped = t + s->nworkers; /* each worker's last STEP's end */
    for (int w = 0; w < s->nworkers; w++)
        t[w] = stepped[w] = 0, pos[w] = 0, left += iters * (o->off[w + 1] - o->off[w]);
    while (left > 0) {
        int moved = 0;
        for (int w = 0; w < s->nworkers; w++) {
            const est_op *ops = o->op + o->off[w];
            for (int len = o->off[w + 1] - o->off[w]; pos[w] < iters * len;
                 pos[w]++, left--, moved++) {
                int i = pos[w], it = 0;
                while (i >= len) i -= len, it++; /* iters is 1 or 2: no division */
                const est_op *a = &ops[i];
                int k = a->k, mb = a->mb + it * M;
                if (a->kind == ACT_STEP) {
                    if (!tail) continue;
                    t[w] += tail[k]; /* its all-reduce and step, in list order */
                    stepped[w] = t[w];
                    if (t[w] > end) end = t[w];
                    if (!it && t[w] > *first) *first = t[w];
                    continue;
                }
                double ready = 0, cost;
                if (a->kind == ACT_F) {
                    if (k > 0) {
                        double d = fdone[(size_t)(k - 1) * n + mb];
                        if (d < 0) break;
                        ready = d + (sends && a->cross ? st[k - 1].send : 0);
                    }
                    double g = tail && it > 0 && a->mb == 0 ? stepped[w] + tail[S + k] : 0;
                    if (g > ready) ready = g; /* its parameters gathered */
                    cost = st[k].F;
                } else if (a->kind == ACT_W) {
                    if ((ready = bdone[(size_t)k * n + mb]) < 0) break;
                    cost = st[k].W;
                } else {
                    if ((ready = fdone[(size_t)k * n + mb]) < 0) break;
                    if (k + 1 < S) {
                        double d = bdone[(size_t)(k + 1) * n + mb];
                        if (d < 0) break;
                        d += sends && a->cross ? st[k].send : 0;
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
        }
        if (!moved) return -1;
    }
    return end;
}
