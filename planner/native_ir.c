/* native_ir.c: the iteration of a chunked partition (interleaved, zb-v, dualpipev) replayed
 * from the schedule the simulator runs for it (nm_ir_time; docs/planner-native.md, section
 * 8, "The chunked kinds replayed"). A rank holds several stages, and the order in which
 * it runs their forwards and backwards (the generator's) decides where it waits; no
 * per-rank closed form sees that, so the price runs the order itself: a max-plus
 * recurrence over each worker's computations with the simulator's buffered transfers
 * (a send leaves when its data is made, FIFO on its directed link), no events and no
 * egress ports. */
#include "planner/native_impl.h"

#include <stdlib.h>

/* The replay's state: per (stage, microbatch) when its input activation (fin) and its
 * output gradient (gin) have arrived (< 0: not yet sent), each worker's next action and
 * the time it is free, each directed link's free time. */
typedef struct ir_state {
    const schedule *sc;
    const double *xs, *xl;
    int S, M, W;
    double *fin, *gin; /* [S M] */
    double *lfree;     /* [W W] */
} ir_state;

/* The worker of stage st (its one replica). */
static int ir_worker(const schedule *sc, int st) { return sc->stage_workers[sc->stage_first[st]]; }

/* Data made at time t by stage from for stage to (adjacent) of microbatch j: its arrival,
 * after the transfer over the directed link between their workers (none on one worker). */
static double ir_send(ir_state *z, int from, int to, double t)
{
    const int a = ir_worker(z->sc, from), b = ir_worker(z->sc, to);
    if (a == b) return t;
    const int c = from < to ? from : to;
    double *lf = &z->lfree[(size_t)a * z->W + b];
    const double start = t > *lf ? t : *lf;
    *lf = start + z->xs[c];
    return *lf + z->xl[c];
}

double nm_ir_time(const schedule *sc, const double *f, const double *b, const double *bi,
                  const double *bw, const double *xs, const double *xl)
{
    ir_state z = {sc, xs, xl, sc->nstages, sc->microbatches * sc->iterations, sc->nworkers,
                  NULL, NULL, NULL};
    const size_t SM = (size_t)z.S * z.M;
    double result = -1, *clock = NULL;
    int *pc = NULL;
    z.fin = malloc(2 * SM * sizeof *z.fin);
    z.lfree = calloc((size_t)z.W * z.W, sizeof *z.lfree);
    clock = calloc((size_t)z.W, sizeof *clock);
    pc = calloc((size_t)z.W, sizeof *pc);
    if (!z.fin || !z.lfree || !clock || !pc) goto cleanup;
    z.gin = z.fin + SM;
    for (size_t k = 0; k < 2 * SM; k++) z.fin[k] = -1;
    int left = z.W, moved = 1;
    for (int w = 0; w < z.W; w++)
        if (pc[w] >= sc->len[w]) left--;
    while (left > 0 && moved) {
        moved = 0;
        for (int w = 0; w < z.W; w++) {
            if (pc[w] >= sc->len[w]) continue;
            while (pc[w] < sc->len[w]) {
                const action *a = &sc->acts[w][pc[w]];
                const int st = a->stage, j = a->microbatch;
                const size_t k = (size_t)st * z.M + j;
                double need = 0, d;
                if (a->kind == ACT_F) {
                    if (st > 0 && (need = z.fin[k]) < 0) break;
                    d = f[st];
                } else if (a->kind == ACT_B || a->kind == ACT_I) {
                    if (st + 1 < z.S && (need = z.gin[k]) < 0) break;
                    d = a->kind == ACT_B ? b[st] : bi[st];
                } else if (a->kind == ACT_W) {
                    d = bw[st];
                } else {
                    pc[w]++; /* sends, receives and steps: the transfers are the producers' */
                    continue;
                }
                const double t = (clock[w] > need ? clock[w] : need) + d;
                clock[w] = t;
                if (a->kind == ACT_F && st + 1 < z.S)
                    z.fin[k + z.M] = ir_send(&z, st, st + 1, t);
                else if (a->kind != ACT_F && a->kind != ACT_W && st > 0)
                    z.gin[k - z.M] = ir_send(&z, st, st - 1, t);
                pc[w]++;
                moved = 1;
            }
            if (pc[w] >= sc->len[w]) left--;
        }
    }
    if (left == 0) {
        result = 0;
        for (int w = 0; w < z.W; w++)
            if (clock[w] > result) result = clock[w];
    }
cleanup:
    free(z.fin), free(z.lfree), free(clock), free(pc);
    return result;
}
