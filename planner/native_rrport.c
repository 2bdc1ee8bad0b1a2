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
 * same steady window, but a ring whose hops leave through ports runs its buckets there
 * in turn with what they are sending: what was made before a bucket goes first, what
 * comes while it runs passes between its steps and pushes it later (rp_ring,
 * port_ring_end, rp_hold). Under blocking transfers (sync) a send leaves once its
 * receiver has posted the receive (at the end of the computation before the one that
 * takes it) and its sender's next computation waits for it, as native_rr.c's
 * nm_rr_time_p2p has it. No events. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>

#include "core/schedule.h" /* sched_replica_order: the generator's order */

#define RP_ITERS 5      /* iterations replayed, as native_rr.c's RR_ITERS */
#define RP_PORTS (2 * NM_RR_PORTS_MAX_DEVICES * CLUSTER_MAX_LEVELS)

#define RP_LOG 32 /* transfers a port of one lane remembers (rp_ring looks back) */

/* A transfer through a port of one lane: when it was made (queued), when it starts, its
 * seconds. */
typedef struct rp_tx {
    double made, start, d;
} rp_tx;

/* An egress port: its level, the sender's group there (the device at level 0), when each
 * of its lanes is free, and rgi the group whose all-reduce's ring last held it (a port of
 * one lane; < 0: none yet), running until that group's release; a port of one lane also
 * keeps its last RP_LOG transfers in the order made (log[ntx % RP_LOG] the next). */
typedef struct rp_port {
    int level;
    long long group;
    int lanes;
    double *free; /* [lanes] */
    long long rgi;
    rp_tx log[RP_LOG];
    long long ntx;
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
        if (p->lanes == 1) p->log[p->ntx++ % RP_LOG] = (rp_tx){t, start, d};
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

/* When the ring's K buckets (each T / K seconds of port time, bucket k ready at r0 + k
 * gap) are through port p of one lane, FIFO as the engine's queue is, from p's log: a
 * transfer made before a bucket starts goes first (the bucket starts once the port is
 * free of them), one made while a bucket runs goes between its steps and makes it that
 * much longer. */
static double port_ring_end(const rp_port *p, double r0, double gap, double K, double T)
{
    long long k = p->ntx > RP_LOG ? p->ntx - RP_LOG : 0;
    double pf = r0; /* the port free of what was made before the first bucket */
    for (; k < p->ntx && p->log[k % RP_LOG].made < r0; k++)
        if (p->log[k % RP_LOG].start + p->log[k % RP_LOG].d > pf)
            pf = p->log[k % RP_LOG].start + p->log[k % RP_LOG].d;
    double end = r0;
    for (int q = 0; q < (int)K; q++) {
        double bs = r0 + q * gap;
        if (end > bs) bs = end;
        if (pf > bs) bs = pf;
        for (; k < p->ntx && p->log[k % RP_LOG].made < bs; k++) { /* ahead of the bucket */
            const rp_tx *e = &p->log[k % RP_LOG];
            pf = (pf > e->made ? pf : e->made) + e->d;
            if (pf > bs) bs = pf;
        }
        end = bs + T / K;
        for (; k < p->ntx && p->log[k % RP_LOG].made < end; k++) /* between its steps */
            end += p->log[k % RP_LOG].d;
        pf = end;
    }
    return end;
}

/* The release of group gi of a stage of r replicas (workers w0..w0 + r - 1, ring in
 * replica order) once all joined at t (the end of the last one's backward of b seconds),
 * its ring of T seconds alone in K buckets, ar seconds exposed after t (docs/planner-native.md,
 * section 8, "One stage under the asynchronous kinds"): its steps run on every hop at
 * once. Bucket k of K is ready at t - b + (k + 1) b / K; a port of one lane its hops leave
 * through takes each bucket as port_ring_end has it, from the first, with the transfers
 * logged there, and the sends that come later while it runs push it later (rp_hold;
 * p->rgi); a port of more lanes gives each hop one from when one is free at t, for ar.
 * The ring ends when its slowest port is through, t + ar when no hop waits; z->grel[gi]
 * is set to that end. T <= 0 (not known): every port from when it is free at t, ar
 * seconds. Returns 0, or -1 out of memory. */
static int rp_ring(rp_state *z, long long gi, int w0, int r, double ar, double t, double T,
                   double K, double b)
{
    double start = t;
    rp_pair *hop[NM_RR_PORTS_MAX_DEVICES];
    int nh = 0, used[RP_PORTS], nu = 0;
    for (int j = 0; r > 1 && ar > 0 && j < r; j++) {
        const int a = w0 + j, c = w0 + (j + 1) % r;
        if (z->dev[a] == z->dev[c]) continue;
        rp_pair *pr = rp_path(z, a, c);
        if (!pr) return -1;
        hop[nh++] = pr;
        for (int i = 0; i < pr->np; i++) {
            const rp_port *p = &z->port[pr->port[i]];
            if (T > 0 && p->lanes == 1) {
                int seen = 0;
                for (int u = 0; u < nu && !seen; u++) seen = used[u] == pr->port[i];
                if (!seen) used[nu++] = pr->port[i];
                continue;
            }
            double fr = p->free[0];
            for (int q = 1; q < p->lanes; q++)
                if (p->free[q] < fr) fr = p->free[q];
            if (fr > start) start = fr;
        }
    }
    double end = start + ar;
    if (K < 1) K = 1;
    for (int u = 0; u < nu; u++) {
        const double e = port_ring_end(&z->port[used[u]], t - b + b / K, b / K, K, T);
        if (e > end) end = e;
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
            *fr = end;
        }
    z->grel[gi] = end;
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

/* The replay's state beyond the paths and ports: per (stage, microbatch) when its input
 * activation (fin) and gradient (gin) arrive (< 0: not yet sent); per worker its next
 * computation's end (cand), when it is free, where it is in its order (pos); per stage and
 * group how many replicas joined and the last join, then the release (gmax, z->grel).
 * Under blocking transfers (sync) also when each receive was posted (pf, pb; < 0: not
 * yet), when each worker's last send arrived (sdone) and the send it waits to start
 * (pto: its receiver's stage, < 0: none; pa, pfw: the microbatch and direction). */
typedef struct rp_run {
    rp_state z;
    int S, M, n, sync, step_each_round;
    const int *reps, *first, *acts, *len;
    const size_t *at;
    const double *ar, *fb[2]; /* ar[s]; fb[0] the forwards' seconds, fb[1] the backwards' */
    double *fin, *gin, *freet, *cand, *gmax;
    int *pos, *wst, *gcnt;
    double *pf, *pb, *sdone;
    int *pto, *pa, *pfw;
} rp_run;

/* Replica w of stage s joins group gi at t; the last to join starts the ring (rp_ring).
 * 0, or -1 out of memory. */
static int rp_join(rp_run *R, int s, long long gi, double t)
{
    if (t > R->gmax[gi]) R->gmax[gi] = t;
    if (++R->gcnt[gi] < R->reps[s]) return 0;
    if (rp_ring(&R->z, gi, R->first[s], R->reps[s], R->ar[s], R->gmax[gi], R->z.lk->ring[s],
                R->z.lk->buckets[s], R->fb[1][s]))
        return -1;
    for (int q = R->first[s]; q < R->first[s + 1]; q++) R->cand[q] = NAN; /* released */
    return 0;
}

/* Worker w's send of microbatch a (fwd: its activation to stage to, else its gradient)
 * leaves at t: its arrival is the receiver's input, and under sync the end of w's send.
 * 0, or -1 out of memory. */
static int rp_issue(rp_run *R, int w, int to, int a, int fwd, double t)
{
    const int rw = R->first[to] + a % R->reps[to], s = R->wst[w];
    const double arr = rp_send(&R->z, w, rw, R->z.lk->bytes[fwd ? s : to], t);
    if (arr < 0) return -1;
    (fwd ? R->fin : R->gin)[(size_t)to * R->n + a] = arr;
    R->cand[rw] = NAN;
    if (!R->sync) return 0;
    R->sdone[w] = arr;
    R->pto[w] = -1;
    R->cand[w] = NAN;
    return 0;
}

/* Worker w's next computation's end (INFINITY: done, or waiting for an input, a send or
 * a hold). */
static double rp_next(rp_run *R, int w)
{
    const int s = R->wst[w], *L = R->acts + R->at[w], p = R->pos[w];
    if (p >= R->len[w] || (R->sync && R->pto[w] >= 0)) return INFINITY;
    const int v = L[p], a = (v > 0 ? v : -v) - 1;
    double t = R->freet[w], in = 0;
    if (p > 0 && L[p - 1] < 0) {
        /* after a group's last backward: its all-reduce's hold, then its step */
        const int pa = -L[p - 1] - 1, G = R->step_each_round ? R->reps[s] : R->M;
        if (pa % G >= G - R->reps[s]) {
            double held = R->freet[w];
            if (R->ar && R->ar[s] > 0) {
                const size_t gi = (size_t)s * R->n + pa / G;
                if (R->gcnt[gi] < R->reps[s]) return INFINITY; /* another is not there */
                held = R->gmax[gi]; /* its release */
            }
            if (held + R->z.lk->step[s] > t) t = held + R->z.lk->step[s];
        }
    }
    if (v > 0 && s > 0 && (in = R->fin[(size_t)s * R->n + a]) < 0) return INFINITY;
    if (v < 0 && s + 1 < R->S && (in = R->gin[(size_t)s * R->n + a]) < 0) return INFINITY;
    if (in > t) t = in;
    if (R->sync && R->sdone[w] > t) t = R->sdone[w];
    return t + (v > 0 ? R->fb[0][s] : R->fb[1][s]);
}

/* Worker w's computation v (the generator's code: forward of microbatch v - 1, > 0, or
 * backward) ends at t: its receive of the next is posted (sync), its send leaves (or
 * waits for its receiver's post), its iteration's end and its group's join. 0, or -1 out
 * of memory. */
static int rp_commit(rp_run *R, int w, int v, double t, double *iend)
{
    const int s = R->wst[w], a = (v > 0 ? v : -v) - 1, *L = R->acts + R->at[w];
    R->freet[w] = t;
    R->pos[w]++;
    R->cand[w] = NAN;
    if (R->sync && R->pos[w] < R->len[w]) {
        /* the batch after this computation posts its next receive; a send that waited for
         * it leaves now */
        const int nv = L[R->pos[w]], na = (nv > 0 ? nv : -nv) - 1, from = nv > 0 ? s - 1 : s + 1;
        (nv > 0 ? R->pf : R->pb)[(size_t)s * R->n + na] = t;
        if (from >= 0 && from < R->S) {
            const int sw = R->first[from] + na % R->reps[from];
            if (R->pto[sw] == s && R->pa[sw] == na && R->pfw[sw] == (nv > 0) &&
                rp_issue(R, sw, s, na, nv > 0, t))
                return -1;
        }
    }
    const int to = v > 0 ? s + 1 : s - 1, it = a / R->M;
    if (to >= 0 && to < R->S) {
        if (R->sync && (v > 0 ? R->pf : R->pb)[(size_t)to * R->n + a] < 0)
            R->pto[w] = to, R->pa[w] = a, R->pfw[w] = v > 0; /* not posted yet */
        else if (rp_issue(R, w, to, a, v > 0, t)) {
            return -1;
        }
    } else if (R->sync) {
        R->sdone[w] = t;
    }
    if (it < RP_ITERS && t > iend[it]) iend[it] = t;
    const int G = R->step_each_round ? R->reps[s] : R->M;
    if (v > 0 || a % G < G - R->reps[s]) return 0;
    if (R->ar && R->ar[s] > 0) {
        /* the group's join: under sync once this backward's exchange is through */
        /* the group's join at the backward's end (under sync too: the exchange after it
         * runs beside the ring, as native_rr.c's replay and the simulator have it) */
        return rp_join(R, s, (long long)s * R->n + a / G, t);
    }
    if (it < RP_ITERS && t + R->z.lk->step[s] > iend[it]) iend[it] = t + R->z.lk->step[s];
    return 0;
}

double nm_rr_ports_time(int S, const int *reps, const double *f, const double *b,
                        const double *ar, int M, int step_each_round, int sync,
                        const nm_rr_links *lk)
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
    rp_run R = {.z = {.lk = lk, .W = W, .n = n, .first = first},
                .S = S, .M = M, .n = n, .sync = sync, .step_each_round = step_each_round,
                .reps = reps, .first = first, .ar = ar, .fb = {f, b}};
    rp_state *z = &R.z;
    double span = -1, iend[RP_ITERS] = {0};
    const size_t sn = (size_t)S * n;
    int *acts = malloc(nact * sizeof *acts), *len = malloc((size_t)W * sizeof *len);
    size_t *at = malloc((size_t)W * sizeof *at);
    R.acts = acts, R.len = len, R.at = at;
    R.fin = malloc(sn * sizeof *R.fin), R.gin = malloc(sn * sizeof *R.gin);
    R.freet = calloc((size_t)W, sizeof *R.freet), R.cand = malloc((size_t)W * sizeof *R.cand);
    R.pos = calloc((size_t)W, sizeof *R.pos), R.wst = malloc((size_t)W * sizeof *R.wst);
    R.gcnt = calloc(sn, sizeof *R.gcnt), R.gmax = calloc(sn, sizeof *R.gmax);
    z->grel = R.gmax, z->cand = R.cand;
    z->dev = malloc((size_t)W * sizeof *z->dev);
    z->pair = malloc((size_t)W * W * sizeof *z->pair);
    if (sync) {
        R.pf = malloc(sn * sizeof *R.pf), R.pb = malloc(sn * sizeof *R.pb);
        R.sdone = calloc((size_t)W, sizeof *R.sdone);
        R.pto = malloc((size_t)W * sizeof *R.pto), R.pa = calloc((size_t)W, sizeof *R.pa);
        R.pfw = calloc((size_t)W, sizeof *R.pfw);
    }
    if (!acts || !len || !at || !R.fin || !R.gin || !R.freet || !R.cand || !R.pos || !R.wst ||
        !R.gcnt || !R.gmax || !z->dev || !z->pair)
        goto done;
    if (sync && (!R.pf || !R.pb || !R.sdone || !R.pto || !R.pa || !R.pfw)) goto done;
    for (size_t i = 0; i < sn; i++) R.fin[i] = R.gin[i] = -1;
    for (size_t i = 0; sync && i < sn; i++) R.pf[i] = R.pb[i] = -1;
    for (size_t i = 0; i < (size_t)W * W; i++) z->pair[i] = (rp_pair){.np = -1};
    size_t off = 0;
    for (int s = 0, Wq = W; s < S; Wq -= reps[s], s++) {
        const int k = (Wq + reps[s] - 1) / reps[s] - 1; /* the generator's warmup */
        for (int j = 0; j < reps[s]; j++) {
            const int w = first[s] + j;
            R.wst[w] = s;
            z->dev[w] = lk->devs[s][j];
            at[w] = off;
            len[w] = sched_replica_order(reps[s], j, 0, n, k, 0, acts + off);
            off += (size_t)2 * (n / reps[s]);
            R.cand[w] = NAN; /* not known */
            if (sync) {
                R.pto[w] = -1;
                if (len[w] > 0) { /* its first receive, posted at the start */
                    const int v = acts[at[w]], a = (v > 0 ? v : -v) - 1;
                    (v > 0 ? R.pf : R.pb)[(size_t)s * n + a] = 0;
                }
            }
        }
    }
    for (;;) {
        /* each worker's next computation's end, the least runs next */
        int best = -1;
        for (int w = 0; w < W; w++) {
            if (isnan(R.cand[w])) R.cand[w] = rp_next(&R, w);
            if (R.cand[w] < INFINITY && (best < 0 || R.cand[w] < R.cand[best])) best = w;
        }
        if (best < 0) break;
        if (rp_commit(&R, best, acts[at[best] + R.pos[best]], R.cand[best], iend)) goto done;
    }
    span = 0;
    for (int w = 0; w < W; w++)
        if (R.pos[w] < len[w]) span = -1; /* cannot finish (a guard: the orders always can) */
    /* each held group's release (rp_hold may have pushed it since) and its step */
    for (int s = 0; s < S && ar && span >= 0; s++) {
        const int G = step_each_round ? reps[s] : M;
        for (int g = 0; ar[s] > 0 && g < n / G; g++) {
            const size_t gi = (size_t)s * n + g;
            const int it = g * G / M;
            if (R.gcnt[gi] == reps[s] && it < RP_ITERS && R.gmax[gi] + lk->step[s] > iend[it])
                iend[it] = R.gmax[gi] + lk->step[s];
        }
    }
    if (span >= 0) span = (iend[3] - iend[1]) / 2;
done:
    for (int i = 0; i < z->nport; i++) free(z->port[i].free);
    free(acts), free(len), free(at), free(R.fin), free(R.gin), free(R.freet), free(R.cand);
    free(R.pos), free(R.wst), free(R.gcnt), free(R.gmax), free(z->dev), free(z->pair);
    free(R.pf), free(R.pb), free(R.sdone), free(R.pto), free(R.pa), free(R.pfw);
    return span;
}
