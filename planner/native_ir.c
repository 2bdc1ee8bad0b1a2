/* native_ir.c: the iteration of a chunked partition (interleaved, zb-v, dualpipev) replayed
 * from the schedule the simulator runs for it (nm_ir_time; docs/planner-native.md, section
 * 8, "The chunked kinds replayed"). A rank holds several stages, and the order in which
 * it runs their forwards and backwards (the generator's) decides where it waits; no
 * per-rank closed form sees that, so the price runs the order itself: a max-plus
 * recurrence over each worker's computations with the simulator's buffered transfers
 * (a send leaves when its data is made, FIFO on its directed link, a lane of each egress
 * port on its path), no events. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The iterations whose ends the replay tells apart (a schedule of more is priced by its
 * makespan). */
#define NM_IR_ITER_MAX 8

/* An egress port met by a transfer: the level it belongs to, the sender's group there
 * (the device itself at level 0) and when each of its lanes is free. */
typedef struct ir_port {
    int level;
    long long group;
    int lanes;
    double *free; /* [lanes] */
} ir_port;

/* A directed worker pair's path, found on its first transfer: rate and latency
 * (sim_net_path), its egress ports (indices into ir_state.port); np < 0 not yet found. */
typedef struct ir_pair {
    double rate, lat;
    int np;
    short port[CLUSTER_MAX_LEVELS + 1];
} ir_pair;

/* The replay's state: per (stage, microbatch) when its input activation (fin) and its
 * output gradient (gin) have arrived (< 0: not yet sent), each directed link's free time,
 * the egress ports met so far. */
typedef struct ir_state {
    const schedule *sc;
    const sim_net *net;
    const int *wdev;
    const double *bytes;
    int S, M, W;
    double *fin, *gin; /* [S M] */
    double *lfree;     /* [W W] */
    ir_pair *pair;     /* [W W] */
    ir_port port[2 * NM_MAX_UNITS * CLUSTER_MAX_LEVELS];
    int nport;
} ir_state;

/* The worker of stage st (its one replica). */
static int ir_worker(const schedule *sc, int st) { return sc->stage_workers[sc->stage_first[st]]; }

/* The port of level l of the sender's group g (created on first use), or NULL. */
static ir_port *ir_port_of(ir_state *z, int l, long long g)
{
    for (int i = 0; i < z->nport; i++)
        if (z->port[i].level == l && z->port[i].group == g) return &z->port[i];
    if (z->nport >= (int)(sizeof z->port / sizeof z->port[0])) return NULL;
    ir_port *p = &z->port[z->nport];
    const int lanes = sim_net_lanes(z->net, l);
    p->free = calloc((size_t)lanes, sizeof *p->free);
    if (!p->free) return NULL;
    p->level = l, p->group = g, p->lanes = lanes;
    z->nport++;
    return p;
}

/* Data made at time t by stage from for stage to (adjacent): its arrival, after the
 * transfer over the directed link between their workers and a lane of each egress port
 * it leaves through (eng_path_ports' ports: the device's own inside a server, else the
 * sender's group's at each level crossed), each taken first come first served (the
 * replay issues transfers in time order); nothing moves on one worker. < 0 out of
 * memory. */
static double ir_send(ir_state *z, int from, int to, double t)
{
    const int a = ir_worker(z->sc, from), b = ir_worker(z->sc, to);
    if (a == b) return t;
    const int c = from < to ? from : to;
    ir_pair *pr = &z->pair[(size_t)a * z->W + b];
    if (pr->np < 0) {
        const int da = z->wdev[a];
        const int L = sim_net_path(z->net, da, z->wdev[b], &pr->rate, &pr->lat);
        pr->np = 0;
        for (int l = L <= 0 ? 0 : 1; l <= (L < 0 ? 0 : L); l++) {
            ir_port *p = ir_port_of(z, l, l ? da / z->net->gsize[l - 1] : da);
            if (!p) return -1;
            pr->port[pr->np++] = (short)(p - z->port);
        }
    }
    const double d = z->bytes[c] > 0 && pr->rate > 0 ? z->bytes[c] / pr->rate : 0;
    double *lf = &z->lfree[(size_t)a * z->W + b];
    double start = t > *lf ? t : *lf;
    double *lane[CLUSTER_MAX_LEVELS + 1];
    const int np = d > 0 ? pr->np : 0;
    for (int i = 0; i < np; i++) {
        ir_port *p = &z->port[pr->port[i]];
        lane[i] = &p->free[0]; /* its lane free first */
        for (int q = 1; q < p->lanes; q++)
            if (p->free[q] < *lane[i]) lane[i] = &p->free[q];
        if (*lane[i] > start) start = *lane[i];
    }
    for (int i = 0; i < np; i++) *lane[i] = start + d;
    *lf = start + d;
    return *lf + pr->lat;
}

/* The duration of worker w's next computation and when its input is there (*need), its
 * non-computations skipped (sends, receives and steps: the transfers are the producers');
 * -1 when w is done or its input has not been sent yet. */
static double ir_next(ir_state *z, int *pc, int w, const double *f, const double *b,
                      const double *bi, const double *bw, double *need)
{
    const schedule *sc = z->sc;
    for (; pc[w] < sc->len[w]; pc[w]++) {
        const action *a = &sc->acts[w][pc[w]];
        const int st = a->stage;
        const size_t k = (size_t)st * z->M + a->microbatch;
        *need = 0;
        switch (a->kind) {
        case ACT_F:
            if (st > 0 && (*need = z->fin[k]) < 0) return -1;
            return f[st];
        case ACT_B:
        case ACT_I:
            if (st + 1 < z->S && (*need = z->gin[k]) < 0) return -1;
            return a->kind == ACT_B ? b[st] : bi[st];
        case ACT_W: return bw[st];
        default: break;
        }
    }
    return -1;
}

/* When worker w's next computation ends if it starts as soon as it can (ir_next), or -1. */
static double ir_end(ir_state *z, int *pc, const double *clock, int w, const double *f,
                     const double *b, const double *bi, const double *bw)
{
    double need, d = ir_next(z, pc, w, f, b, bi, bw, &need);
    return d < 0 ? -1 : (clock[w] > need ? clock[w] : need) + d;
}

double nm_ir_time(const schedule *sc, const sim_net *net, const int *wdev, const double *f,
                  const double *b, const double *bi, const double *bw, const double *bytes)
{
    ir_state z;
    memset(&z, 0, sizeof z);
    z.sc = sc, z.net = net, z.wdev = wdev, z.bytes = bytes;
    z.S = sc->nstages, z.M = sc->microbatches * sc->iterations, z.W = sc->nworkers;
    const size_t SM = (size_t)z.S * z.M;
    double result = -1, *clock = NULL, *nend = NULL, iend[NM_IR_ITER_MAX] = {0};
    int *pc = NULL;
    z.fin = malloc(2 * SM * sizeof *z.fin);
    z.lfree = calloc((size_t)z.W * z.W, sizeof *z.lfree);
    z.pair = malloc((size_t)z.W * z.W * sizeof *z.pair);
    clock = calloc((size_t)z.W, sizeof *clock);
    nend = calloc((size_t)z.W, sizeof *nend);
    pc = calloc((size_t)z.W, sizeof *pc);
    if (!z.fin || !z.lfree || !z.pair || !clock || !nend || !pc) goto cleanup;
    for (size_t k = 0; k < (size_t)z.W * z.W; k++) z.pair[k].np = -1;
    z.gin = z.fin + SM;
    for (size_t k = 0; k < 2 * SM; k++) z.fin[k] = -1;
    /* the computation that ends first among those whose input is there, one at a time:
     * every later one ends no earlier, so transfers are issued in time order; each
     * worker's next end is kept (< 0: waits for its input, or done) and found again only
     * when it ran or its input arrived */
    for (int v = 0; v < z.W; v++) nend[v] = ir_end(&z, pc, clock, v, f, b, bi, bw);
    for (;;) {
        int w = -1;
        double end = INFINITY;
        for (int v = 0; v < z.W; v++)
            if (nend[v] >= 0 && nend[v] < end) end = nend[v], w = v;
        if (w < 0) break;
        const action *a = &sc->acts[w][pc[w]];
        const int st = a->stage;
        const size_t k = (size_t)st * z.M + a->microbatch;
        int to = -1;
        clock[w] = end;
        const int it = a->microbatch / sc->microbatches;
        if (it >= 0 && it < NM_IR_ITER_MAX && end > iend[it]) iend[it] = end;
        double arr = 0;
        if (a->kind == ACT_F && st + 1 < z.S)
            arr = z.fin[k + z.M] = ir_send(&z, st, to = st + 1, end);
        else if ((a->kind == ACT_B || a->kind == ACT_I) && st > 0)
            arr = z.gin[k - z.M] = ir_send(&z, st, to = st - 1, end);
        if (arr < 0) goto cleanup;
        pc[w]++;
        nend[w] = ir_end(&z, pc, clock, w, f, b, bi, bw);
        if (to >= 0) {
            const int r = ir_worker(sc, to);
            if (nend[r] < 0) nend[r] = ir_end(&z, pc, clock, r, f, b, bi, bw);
        }
    }
    result = 0;
    for (int w = 0; w < z.W; w++) {
        if (pc[w] < sc->len[w]) { /* waits forever: not a schedule that finishes */
            result = -1;
            break;
        }
        if (clock[w] > result) result = clock[w];
    }
    /* several iterations: the steady one, as the simulator's report takes it (from the
     * first iteration's end to the last's) */
    const int n = sc->iterations;
    if (result > 0 && n >= 2 && n <= NM_IR_ITER_MAX && iend[n - 1] > iend[0])
        result = (iend[n - 1] - iend[0]) / (n - 1);
cleanup:
    for (int i = 0; i < z.nport; i++) free(z.port[i].free);
    free(z.fin), free(z.lfree), free(z.pair), free(clock), free(nend), free(pc);
    return result;
}
