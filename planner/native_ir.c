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

/* A port's lanes: per lane its busy intervals, sorted (a transfer takes the earliest gap
 * that fits it: the replay visits the workers in turn, not in time order). */
typedef struct ir_lane {
    double *iv; /* [2 n]: start, end */
    int n, cap;
} ir_lane;

typedef struct ir_port {
    int level;
    long long group;
    int lanes;
    ir_lane *lane;
} ir_port;

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
    p->lane = calloc((size_t)lanes, sizeof *p->lane);
    if (!p->lane) return NULL;
    p->level = l, p->group = g, p->lanes = lanes;
    z->nport++;
    return p;
}

/* The earliest start >= t at which lane q is free for d seconds; *at its insertion index. */
static double ir_gap(const ir_lane *q, double t, double d, int *at)
{
    int i = 0;
    for (; i < q->n; i++) {
        if (t + d <= q->iv[2 * i]) break;
        if (q->iv[2 * i + 1] > t) t = q->iv[2 * i + 1];
    }
    *at = i;
    return t;
}

/* Marks lane q busy over [t, t + d) at index at. 0, or -1 out of memory. */
static int ir_take(ir_lane *q, int at, double t, double d)
{
    if (q->n == q->cap) {
        int c = q->cap ? 2 * q->cap : 16;
        double *iv = realloc(q->iv, 2 * (size_t)c * sizeof *iv);
        if (!iv) return -1;
        q->iv = iv, q->cap = c;
    }
    memmove(&q->iv[2 * (at + 1)], &q->iv[2 * at], 2 * (size_t)(q->n - at) * sizeof *q->iv);
    q->iv[2 * at] = t, q->iv[2 * at + 1] = t + d;
    q->n++;
    return 0;
}

/* Data made at time t by stage from for stage to (adjacent): its arrival, after the
 * transfer over the directed link between their workers (FIFO) and a lane of each egress
 * port it leaves through (eng_path_ports' ports: the device's own inside a server, else
 * the sender's group's at each level crossed); nothing moves on one worker. < 0 out of
 * memory. */
static double ir_send(ir_state *z, int from, int to, double t)
{
    const int a = ir_worker(z->sc, from), b = ir_worker(z->sc, to);
    if (a == b) return t;
    const int c = from < to ? from : to, da = z->wdev[a];
    double rate, lat;
    const int L = sim_net_path(z->net, da, z->wdev[b], &rate, &lat);
    const double d = z->bytes[c] > 0 && rate > 0 ? z->bytes[c] / rate : 0;
    double *lf = &z->lfree[(size_t)a * z->W + b];
    double start = t > *lf ? t : *lf;
    ir_port *ports[CLUSTER_MAX_LEVELS + 1];
    int np = 0, lane[CLUSTER_MAX_LEVELS + 1], at[CLUSTER_MAX_LEVELS + 1];
    for (int l = L <= 0 ? 0 : 1; d > 0 && l <= (L < 0 ? 0 : L); l++) {
        ports[np] = ir_port_of(z, l, l ? da / z->net->gsize[l - 1] : da);
        if (!ports[np]) return -1;
        np++;
    }
    /* the earliest start every port has a lane free for: raise it until all agree */
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < np; i++) {
            double best = INFINITY;
            for (int q = 0; q < ports[i]->lanes; q++) {
                int k;
                double s = ir_gap(&ports[i]->lane[q], start, d, &k);
                if (s < best) best = s, lane[i] = q, at[i] = k;
            }
            if (best > start) start = best, moved = 1;
        }
    }
    for (int i = 0; i < np; i++)
        if (ir_take(&ports[i]->lane[lane[i]], at[i], start, d)) return -1;
    *lf = start + d;
    return *lf + lat;
}

double nm_ir_time(const schedule *sc, const sim_net *net, const int *wdev, const double *f,
                  const double *b, const double *bi, const double *bw, const double *bytes)
{
    ir_state z;
    memset(&z, 0, sizeof z);
    z.sc = sc, z.net = net, z.wdev = wdev, z.bytes = bytes;
    z.S = sc->nstages, z.M = sc->microbatches * sc->iterations, z.W = sc->nworkers;
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
                double arr = 0;
                if (a->kind == ACT_F && st + 1 < z.S)
                    arr = z.fin[k + z.M] = ir_send(&z, st, st + 1, t);
                else if (a->kind != ACT_F && a->kind != ACT_W && st > 0)
                    arr = z.gin[k - z.M] = ir_send(&z, st, st - 1, t);
                if (arr < 0) goto cleanup;
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
    for (int i = 0; i < z.nport; i++) {
        for (int q = 0; q < z.port[i].lanes; q++) free(z.port[i].lane[q].iv);
        free(z.port[i].lane);
    }
    free(z.fin), free(z.lfree), free(clock), free(pc);
    return result;
}
