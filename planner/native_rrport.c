/* native_rrport.c: the asynchronous kinds' (pipedream, 2bw) replay with the servers'
 * ports (nm_rr_ports_time; docs/planner-native.md, section 8, "The servers' ports in the
 * asynchronous replay"). native_rr.c replays one of the d identical lanes of a partition
 * with a fixed time per transfer; where several replicas of a server send through one
 * egress port of fewer lanes, their transfers queue there, which a lane's replay cannot
 * see (the other lanes' transfers share the port). This one replays every replica of the
 * whole pipeline at once, in time order (each step the computation that ends first), and
 * sends each transfer as the simulator's engine does (sim/engine_comm.c): FIFO on its
 * directed link between the two devices and on a lane of each egress port of its path
 * (eng_path_ports: the device's own inside a server, else its group's at each level
 * crossed), bytes / rate + the path's latency. The holds at each group's all-reduce and
 * the optimizer steps are native_rr.c's (rr_groups), over the same 5 iterations and the
 * same steady window, but a ring whose hops leave through ports waits for what they are
 * sending, and the sends that pass through them while it runs push it later (rp_ring,
 * rp_hold). Overlapped transfers only; no events. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>

#include "core/schedule.h" /* sched_replica_order: the generator's order */

#define RP_ITERS 5      /* iterations replayed, as native_rr.c's RR_ITERS */
#define RP_PORTS (2 * NM_RR_PORTS_MAX_DEVICES * CLUSTER_MAX_LEVELS)

/* An egress port: its level, the sender's group there (the device at level 0), when each
 * of its lanes is free, and rgi the group whose all-reduce's ring last held it (a port of
 * one lane; < 0: none yet), running until that group's release. */
typedef struct rp_port {
    int level;
    long long group;
    int lanes;
    double *free; /* [lanes] */
    long long rgi;
} rp_port;

/* A directed pair of workers' path, found on its first transfer (np < 0: not yet). */
typedef struct rp_pair {
    double rate, lat, lfree; /* lfree: when the directed link is free */
    int np;
    short port[CLUSTER_MAX_LEVELS + 1];
} rp_pair;

typedef struct rp_state {
    const nm_rr_links *lk;
    int W, n;          /* workers; microbatches replayed (groups per stage) */
    int *dev;          /* [W] each worker's device */
    rp_pair *pair;     /* [W W] */
    double *grel;      /* [S n] each group's release, once all its replicas joined */
    double *cand;      /* [W] each worker's next end (NAN: to be found again) */
    const int *first;  /* [S + 1] each stage's first worker */
    rp_port port[RP_PORTS];
    int nport;
} rp_state;

/* The port of level l of group g (created on first use), or NULL (out of memory or room). */
static rp_port *port_of(rp_state *z, int l, long long g)
{
    for (int i = 0; i < z->nport; i++)
        if (z->port[i].level == l && z->port[i].group == g) return &z->port[i];
    if (z->nport >= RP_PORTS) return NULL;
    rp_port *p = &z->port[z->nport];
    const int lanes = sim_net_lanes(z->lk->net, l);
    if (!(p->free = calloc((size_t)lanes, sizeof *p->free))) return NULL;
    p->level = l, p->group = g, p->lanes = lanes;
    p->rgi = -1;
    z->nport++;
    return p;
}

/* The path of worker a to worker b (found on first use), or NULL out of memory. */
static rp_pair *rp_path(rp_state *z, int a, int b)
{
    rp_pair *pr = &z->pair[(size_t)a * z->W + b];
    if (pr->np < 0) {
        const int da = z->dev[a];
        const int L = sim_net_path(z->lk->net, da, z->dev[b], &pr->rate, &pr->lat);
        pr->np = 0;
        for (int l = L <= 0 ? 0 : 1; l <= (L < 0 ? 0 : L); l++) {
            rp_port *p = port_of(z, l, l ? da / z->lk->net->gsize[l - 1] : da);
            if (!p) return NULL;
            pr->port[pr->np++] = (short)(p - z->port);
        }
    }
    return pr;
}

/* A transfer of d seconds on path pr, made at t: it takes the directed link and a lane
 * of each egress port on the path (the one free first) when all are free, first come
 * first served (the replay sends in time order). Where a ring all-reduce holds a port of
 * one lane, the transfer goes between the ring's steps (the engine's ring moves in steps
 * of a bucket, each queued at the port as a transfer) and the ring ends d later, its
 * group's release too: its steps wait for each other, so every hop's delay adds. Returns
 * when it ends. */
static double rp_hold(rp_state *z, rp_pair *pr, double d, double t)
{
    double start = t > pr->lfree ? t : pr->lfree, *lane[CLUSTER_MAX_LEVELS + 1];
    for (int i = 0; i < pr->np; i++) {
        rp_port *p = &z->port[pr->port[i]];
        lane[i] = &p->free[0];
        for (int q = 1; q < p->lanes; q++)
            if (p->free[q] < *lane[i]) lane[i] = &p->free[q];
        if (*lane[i] > start) start = *lane[i];
    }
    long long pushed = -1;
    for (int i = 0; i < pr->np; i++) {
        rp_port *p = &z->port[pr->port[i]];
        *lane[i] = start + d;
        if (p->rgi >= 0 && p->rgi != pushed && start < z->grel[p->rgi]) {
            z->grel[p->rgi] += d; /* released later: its replicas' next ends again */
            pushed = p->rgi;
            const int s = (int)(p->rgi / z->n);
            for (int w = z->first[s]; w < z->first[s + 1]; w++) z->cand[w] = NAN;
        }
    }
    pr->lfree = start + d;
    return start + d;
}

/* bytes made at t by worker a for worker b: when they arrive (t on one device), after
 * rp_hold's link and ports, plus the path's latency. < 0 out of memory. */
static double rp_send(rp_state *z, int a, int b, double bytes, double t)
{
    if (z->dev[a] == z->dev[b] || !(bytes > 0)) return t;
    rp_pair *pr = rp_path(z, a, b);
    if (!pr) return -1;
    if (!(pr->rate > 0)) return t;
    return rp_hold(z, pr, bytes / pr->rate, t) + pr->lat;
}

/* The release of group gi of a stage of r replicas (workers w0..w0 + r - 1, ring in
 * replica order) whose all-reduce has ar seconds left once all joined at t (the rest ran
 * under the backwards, bucket by bucket): its steps run on every hop at once, so it
 * starts when each egress port its hops leave through has sent what is in it, and ends ar
 * later; a port of one lane is the ring's until then (the sends that come meanwhile pass
 * between its steps and push it later: rp_hold), a port of more lanes gives each hop one.
 * z->grel[gi] is set to that end (t + ar when no hop waits). Returns 0, or -1 out of
 * memory. */
static int rp_ring(rp_state *z, long long gi, int w0, int r, double ar, double t)
{
    double start = t;
    rp_pair *hop[NM_RR_PORTS_MAX_DEVICES];
    int nh = 0;
    for (int j = 0; r > 1 && ar > 0 && j < r; j++) {
        const int a = w0 + j, b = w0 + (j + 1) % r;
        if (z->dev[a] == z->dev[b]) continue;
        rp_pair *pr = rp_path(z, a, b);
        if (!pr) return -1;
        hop[nh++] = pr;
        for (int i = 0; i < pr->np; i++) {
            const rp_port *p = &z->port[pr->port[i]];
            double fr = p->free[0];
            for (int q = 1; q < p->lanes; q++)
                if (p->free[q] < fr) fr = p->free[q];
            if (fr > start) start = fr;
        }
    }
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < hop[h]->np; i++) {
            rp_port *p = &z->port[hop[h]->port[i]];
            if (p->lanes == 1) {
                p->rgi = gi;
                continue;
            }
            double *fr = &p->free[0];
            for (int q = 1; q < p->lanes; q++)
                if (p->free[q] < *fr) fr = &p->free[q];
            *fr = start + ar;
        }
    z->grel[gi] = start + ar;
    return 0;
}

int nm_rr_ports_apply(const nm_rr_links *lk, int S, const int *reps)
{
    if (!lk || !lk->net || lk->net->nlevels < 2 || S < 2) return 0;
    int W = 0;
    for (int s = 0; s < S; s++) W += reps[s];
    if (W > NM_RR_PORTS_MAX_DEVICES) return 0;
    for (int l = 1; l < lk->net->nlevels; l++)
        if (sim_net_lanes(lk->net, l) < lk->net->gsize[l - 1]) return 1;
    return 0;
}

double nm_rr_ports_time(int S, const int *reps, const double *f, const double *b,
                        const double *ar, int M, int step_each_round, const nm_rr_links *lk)
{
    if (S < 2 || S > NM_MAX_STAGES || M < 1 || !lk) return -1;
    const int n = RP_ITERS * M;
    int W = 0, first[NM_MAX_STAGES + 1];
    size_t nact = 0;
    for (int s = 0; s < S; s++) {
        if (reps[s] < 1 || M % reps[s]) return -1; /* M a multiple of every count */
        first[s] = W;
        W += reps[s];
        nact += (size_t)2 * (n / reps[s]) * reps[s];
    }
    first[S] = W;
    if (W > NM_RR_PORTS_MAX_DEVICES) return -1;
    rp_state z = {.lk = lk, .W = W, .n = n, .first = first};
    double span = -1, iend[RP_ITERS] = {0};
    double *fin = malloc((size_t)S * n * sizeof *fin), *gin = malloc((size_t)S * n * sizeof *gin);
    double *freet = calloc((size_t)W, sizeof *freet), *cand = malloc((size_t)W * sizeof *cand);
    int *acts = malloc(nact * sizeof *acts), *len = malloc((size_t)W * sizeof *len);
    int *pos = calloc((size_t)W, sizeof *pos), *wst = malloc((size_t)W * sizeof *wst);
    size_t *at = malloc((size_t)W * sizeof *at);
    int *gcnt = calloc((size_t)S * n, sizeof *gcnt);
    /* per stage and group: the last join, then (all joined) the release */
    double *gmax = calloc((size_t)S * n, sizeof *gmax);
    z.grel = gmax, z.cand = cand;
    z.dev = malloc((size_t)W * sizeof *z.dev);
    z.pair = malloc((size_t)W * W * sizeof *z.pair);
    if (!fin || !gin || !freet || !cand || !acts || !len || !pos || !wst || !at || !gcnt ||
        !gmax || !z.dev || !z.pair)
        goto done;
    for (size_t i = 0; i < (size_t)S * n; i++) fin[i] = gin[i] = -1;
    for (size_t i = 0; i < (size_t)W * W; i++) z.pair[i] = (rp_pair){.np = -1};
    size_t off = 0;
    for (int s = 0, Wq = W; s < S; Wq -= reps[s], s++) {
        const int k = (Wq + reps[s] - 1) / reps[s] - 1; /* the generator's warmup */
        for (int j = 0; j < reps[s]; j++) {
            const int w = first[s] + j;
            wst[w] = s;
            z.dev[w] = lk->devs[s][j];
            at[w] = off;
            len[w] = sched_replica_order(reps[s], j, 0, n, k, 0, acts + off);
            off += (size_t)2 * (n / reps[s]);
            cand[w] = NAN; /* not known */
        }
    }
    for (;;) {
        /* each worker's next computation's end (INFINITY: done or waiting), the least */
        int best = -1;
        for (int w = 0; w < W; w++) {
            if (isnan(cand[w])) {
                const int s = wst[w], *L = acts + at[w];
                cand[w] = INFINITY;
                if (pos[w] >= len[w]) continue;
                const int v = L[pos[w]], a = (v > 0 ? v : -v) - 1;
                double rel = 0, in = 0;
                if (pos[w] > 0 && L[pos[w] - 1] < 0) {
                    /* after a group's last backward: its all-reduce's hold, then its step */
                    const int pa = -L[pos[w] - 1] - 1, G = step_each_round ? reps[s] : M;
                    if (pa % G >= G - reps[s]) {
                        double held = freet[w];
                        if (ar && ar[s] > 0) {
                            const size_t gi = (size_t)s * n + pa / G;
                            if (gcnt[gi] < reps[s]) continue; /* another replica is not there */
                            held = gmax[gi]; /* its release (below) */
                        }
                        rel = held + lk->step[s];
                    }
                }
                if (v > 0 && s > 0 && (in = fin[(size_t)s * n + a]) < 0) continue;
                if (v < 0 && s + 1 < S && (in = gin[(size_t)s * n + a]) < 0) continue;
                double t = freet[w] > in ? freet[w] : in;
                if (rel > t) t = rel;
                cand[w] = t + (v > 0 ? f[s] : b[s]);
            }
            if (cand[w] < INFINITY && (best < 0 || cand[w] < cand[best])) best = w;
        }
        if (best < 0) break;
        const int w = best, s = wst[w], v = acts[at[w] + pos[w]], a = (v > 0 ? v : -v) - 1;
        const double t = cand[w];
        freet[w] = t;
        pos[w]++;
        cand[w] = NAN;
        /* its send, and the worker that takes it */
        const int to = v > 0 ? s + 1 : s - 1;
        if (to >= 0 && to < S) {
            const int rw = first[to] + a % reps[to];
            const double arr = rp_send(&z, w, rw, lk->bytes[v > 0 ? s : to], t);
            if (arr < 0) goto done;
            (v > 0 ? fin : gin)[(size_t)to * n + a] = arr;
            cand[rw] = NAN;
        }
        /* the iteration's end, and the group's hold (native_rr.c's rr_groups) */
        const int it = a / M, G = step_each_round ? reps[s] : M;
        if (it < RP_ITERS && t > iend[it]) iend[it] = t;
        const double st = lk->step[s];
        if (v < 0 && a % G >= G - reps[s]) {
            if (ar && ar[s] > 0) {
                const size_t gi = (size_t)s * n + a / G;
                if (t > gmax[gi]) gmax[gi] = t;
                if (++gcnt[gi] == reps[s]) {
                    /* all joined: released ar[s] later, or when the ring's hops are
                     * through the ports they share with the sends */
                    if (rp_ring(&z, (long long)gi, first[s], reps[s], ar[s], gmax[gi]))
                        goto done;
                    for (int q = first[s]; q < first[s + 1]; q++) cand[q] = NAN; /* released */
                }
            } else if (it < RP_ITERS && t + st > iend[it]) {
                iend[it] = t + st;
            }
        }
    }
    span = 0;
    for (int w = 0; w < W; w++)
        if (pos[w] < len[w]) span = -1; /* cannot finish (a guard: the orders always can) */
    /* each held group's release (rp_hold may have pushed it since) and its step */
    for (int s = 0; s < S && ar; s++) {
        const int G = step_each_round ? reps[s] : M;
        for (int g = 0; ar[s] > 0 && g < n / G; g++) {
            const size_t gi = (size_t)s * n + g;
            const int it = g * G / M;
            if (gcnt[gi] == reps[s] && it < RP_ITERS && gmax[gi] + lk->step[s] > iend[it])
                iend[it] = gmax[gi] + lk->step[s];
        }
    }
    if (span >= 0) span = (iend[3] - iend[1]) / 2;
done:
    for (int i = 0; i < z.nport; i++) free(z.port[i].free);
    free(fin), free(gin), free(freet), free(cand), free(acts), free(len), free(pos), free(wst);
    free(at), free(gcnt), free(gmax), free(z.dev), free(z.pair);
    return span;
}
