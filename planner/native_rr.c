/* native_rr.c: the planner's price of a pipeline whose stages have unequal replica counts.
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
 * transfer). The orders are the generator's own (schedule_generate): the planner keeps
 * no copy of the rule that hands microbatches to replicas.
 *
 * With d the greatest common divisor of the replica counts and the microbatch count, the
 * microbatches g = a d + e of lane e run on replica d (a % q) + e of a stage of q d
 * replicas: d independent, identical pipelines of q replicas and M / d microbatches. The
 * replay runs one of them (gnmt on 4096 devices: 32 replicas, 112 microbatches). */
#include "planner/native_impl.h"

#include "core/schedule.h"

#include <stdlib.h>

/* The makespan of n microbatches (per iteration, `iters` iterations) of one lane (q[s]
 * replicas per stage) in the order kind's generator lays out (schedule_generate: the
 * compute actions of each worker's list; its sends, receives, all-reduces and steps take
 * no time here). -1 when the generator refuses the lane or memory runs out. */
static double rr_lane(sched_kind kind, int S, const int *q, const double *f, const double *b,
                      const double *x, int n, int iters)
{
    sched_spec sp = {kind, 0, S, 1, n, iters, q, NULL};
    plumb_err e;
    err_clear(&e);
    schedule *sc = schedule_generate(&sp, &e);
    if (!sc) return -1;
    size_t T = (size_t)n * iters;
    int nw = sc->nworkers;
    double *fd = malloc((size_t)S * T * sizeof *fd), *bd = malloc((size_t)S * T * sizeof *bd);
    double *freet = calloc((size_t)nw, sizeof *freet);
    int *pos = calloc((size_t)nw, sizeof *pos);
    double span = -1;
    if (!fd || !bd || !freet || !pos) goto done;
    for (size_t i = 0; i < (size_t)S * T; i++) fd[i] = bd[i] = -1;
    /* sweep the workers, each as far as its inputs allow, until none moves */
    for (int moved = 1; moved;) {
        moved = 0;
        for (int w = 0; w < nw; w++) {
            while (pos[w] < sc->len[w]) {
                const action *a = &sc->acts[w][pos[w]];
                int st = a->stage;
                size_t g = (size_t)a->microbatch;
                double ready = 0, t;
                if (a->kind == ACT_F) {
                    if (st > 0 && fd[(st - 1) * T + g] < 0) break;
                    if (st > 0) ready = fd[(st - 1) * T + g] + x[st - 1];
                } else if (a->kind == ACT_B) {
                    if (st + 1 < S && bd[(st + 1) * T + g] < 0) break;
                    if (st + 1 < S) ready = bd[(st + 1) * T + g] + x[st];
                } else { /* communication and steps: priced elsewhere */
                    pos[w]++;
                    continue;
                }
                t = (freet[w] > ready ? freet[w] : ready) + (a->kind == ACT_F ? f[st] : b[st]);
                (a->kind == ACT_F ? fd : bd)[st * T + g] = t;
                freet[w] = t;
                pos[w]++;
                moved = 1;
            }
        }
    }
    span = 0;
    for (int w = 0; w < nw; w++) {
        if (pos[w] < sc->len[w]) { /* the generator's orders are deadlock-free: a guard */
            span = -1;
            break;
        }
        if (freet[w] > span) span = freet[w];
    }
done:
    free(fd), free(bd), free(freet), free(pos);
    schedule_free(sc);
    return span;
}

int nm_rr_applies(sched_kind kind, int S, const int *reps)
{
    const sched_traits *tr = sched_traits_of(kind);
    if (S < 2 || sched_kind_chunked(kind) || tr->split_backward) return 0;
    for (int s = 1; s < S; s++)
        if (reps[s] != reps[0]) return 1;
    return 0;
}

double nm_rr_time(sched_kind kind, int S, const int *reps, const double *f, const double *b,
                  const double *x, int M)
{
    if (S < 1 || S > NM_MAX_STAGES || M < 1) return -1;
    long long d = M;
    for (int s = 0; s < S; s++) {
        if (reps[s] < 1) return -1;
        d = nm_gcd(d, reps[s]);
    }
    int q[NM_MAX_STAGES], n = (int)(M / d);
    for (int s = 0; s < S; s++) q[s] = (int)(reps[s] / d);
    if (!sched_traits_of(kind)->async) return rr_lane(kind, S, q, f, b, x, n, 1);
    /* one continuous order: the steady cost of M more microbatches */
    double t1 = rr_lane(kind, S, q, f, b, x, n, 1), t2 = rr_lane(kind, S, q, f, b, x, n, 2);
    return t1 < 0 || t2 < 0 ? -1 : t2 - t1;
}
