/* native_price.c: the price of a complete partition (nm_price, nm_price_exact;
 * docs/planner-native.md, sections 1, 7 and 8): its stages' closed forms
 * (native_stage.c), the servers' ports that stages share, and for the one-stage-per-rank
 * kinds the compute order replayed (native_rr.c) with stage 0's first sends queued at a
 * port and each stage's all-reduce after its own last backward, bounded by the links and
 * ports; chunked kinds per device. The setting's runtime (p2p sync, grad_sync end) is
 * priced in the stages' terms (native_stage.c), the replay (native_rr.c) and the chunked
 * ranks' periods (section 8, "Under the runtime"); the asynchronous kinds' rings as the
 * simulator's buckets expose them, and their single stages in closed form. */
#include "planner/native_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The server of the d-th device of stage st. */
static int server_at(const nm_model *m, const nm_stage *st, int d)
{
    return cluster_server_of(m->c, m->order[st->u * m->g + d]);
}

/* Seconds per microbatch that each server's port spends on the activations (lf) and the
 * gradients (lb) of each cut leaving the server: lf[sv * (nst - 1) + i] for cut i (stage
 * i to i + 1), likewise lb. Microbatches go round-robin, so a cut's bytes spread evenly
 * over the pairs of sending and receiving replicas: a server holding a of the na senders
 * and b of the nb receivers sends x a (nb - b) / (na nb) forward and x b (na - a) /
 * (na nb) back per microbatch of x bytes. Each server is counted once per cut (its first
 * device of either stage in the order adds it). 0, or -1 out of memory. */
static int port_loads(const nm_model *m, const nm_setting *s, const nm_part *pt, double eg,
                      double *lf, double *lb)
{
    const cluster *c = m->c;
    const int nc = pt->nst - 1;
    int *ca = calloc((size_t)c->nservers, sizeof *ca), *cb = calloc((size_t)c->nservers, sizeof *cb);
    if (!ca || !cb) {
        free(ca), free(cb);
        return -1;
    }
    double bscale = (double)s->mbsize / m->p->minibatch;
    for (int i = 0; i < nc; i++) {
        const nm_stage *A = &pt->st[i], *B = &pt->st[i + 1];
        const double x = m->cut[A->b1] * bscale;
        const int na = A->r * m->g, nb = B->r * m->g, n = na + nb;
        if (x <= 0) continue;
        for (int d = 0; d < na; d++) ca[server_at(m, A, d)]++;
        for (int d = 0; d < nb; d++) cb[server_at(m, B, d)]++;
        for (int d = 0; d < n; d++) {
            const int sv = d < na ? server_at(m, A, d) : server_at(m, B, d - na);
            if (ca[sv] < 0) continue; /* counted */
            lf[sv * nc + i] = x * ((double)ca[sv] * (nb - cb[sv])) / ((double)na * nb) / eg;
            lb[sv * nc + i] = x * ((double)cb[sv] * (na - ca[sv])) / ((double)na * nb) / eg;
            ca[sv] = -1;
        }
        for (int d = 0; d < n; d++) {
            const int sv = d < na ? server_at(m, A, d) : server_at(m, B, d - na);
            ca[sv] = cb[sv] = 0;
        }
    }
    free(ca), free(cb);
    return 0;
}

/* The egress rate of a server's port (bytes/s), or 0 when no port is shared. */
static double port_rate(const nm_model *m)
{
    const cluster *c = m->c;
    if (c->nlevels < 2 || c->nservers < 2) return 0;
    return m->net.egress[1] > m->net.bw[1] ? m->net.egress[1] : m->net.bw[1];
}

/* The servers' ports of a partition: port_loads' figures (lf, lb NULL: no port shared,
 * or out of memory: none priced). */
typedef struct ports {
    int ns, nc;       /* servers, cuts */
    double *lf, *lb;  /* [ns nc] (port_loads) */
} ports;

/* The ports of pt under s into *P (ports_free after). */
static void ports_load(const nm_model *m, const nm_setting *s, const nm_part *pt, ports *P)
{
    const double eg = port_rate(m);
    P->ns = m->c->nservers, P->nc = pt->nst - 1, P->lf = P->lb = NULL;
    if (!(eg > 0) || P->nc < 1) return;
    P->lf = calloc((size_t)2 * P->ns * P->nc, sizeof *P->lf);
    if (!P->lf) return;
    P->lb = P->lf + (size_t)P->ns * P->nc;
    if (port_loads(m, s, pt, eg, P->lf, P->lb)) {
        free(P->lf);
        P->lf = P->lb = NULL;
    }
}

static void ports_free(ports *P) { free(P->lf); }

/* Seconds per microbatch that the busiest server port spends on activations and gradients
 * leaving its server, all stages together (the program prices stages one by one; this is
 * where stages sharing a server's port meet). 0 when none is priced. */
static double port_time(const ports *P)
{
    double worst = 0;
    for (int sv = 0; P->lf && sv < P->ns; sv++) {
        double t = 0;
        for (int i = 0; i < P->nc; i++) t += P->lf[sv * P->nc + i] + P->lb[sv * P->nc + i];
        if (t > worst) worst = t;
    }
    return worst;
}

/* The least a flushed iteration of M microbatches takes for its servers' ports
 * (docs/planner-native.md, section 8): per server, its M microbatches of traffic
 * (port_loads) between the first microbatch's way to its first send (head) and the way
 * from its last send to the end (tail), and the gaps the order forces on it. A stage runs
 * only w = its warmup forwards + 1 per replica (gpipe: all M) before its first backward,
 * so a server's port carries at most those activations before the first microbatch's
 * round trip brings a gradient (or a later forward) to it; and after the last activation
 * only the c = warmup + 1 backwards per replica that follow each replica's last forward.
 * Stage s computes f[s] + b[s] a microbatch, x[s] seconds per transfer to stage s + 1;
 * s->kind the schedule (hold_all: gpipe's w and c are M); P the ports' loads. 0 when none
 * is priced. */
static double port_bound(const ports *P, const nm_model *m, const nm_setting *s,
                         const nm_part *pt, const double *f, const double *b, const double *x)
{
    const double eg = port_rate(m), *lf = P->lf, *lb = P->lb;
    const int S = pt->nst, nc = S - 1, ns = P->ns, M = s->M;
    if (!lf || !(eg > 0) || nc < 1 || M < 1) return 0;
    const int hold_all = sched_traits_of(s->kind)->hold == SCHED_HOLD_ALL;
    double fend[NM_MAX_STAGES], bend[NM_MAX_STAGES], one[NM_MAX_STAGES];
    int warm[NM_MAX_STAGES], W = 0;
    double worst = 0;
    /* the first microbatch alone: its forward on stage i ends at fend[i], its backward on
     * stage i at bend[i]; one[i] a whole microbatch of cut i on one port */
    for (int i = 0; i < S; i++) W += pt->st[i].r * m->g;
    for (int i = 0; i < S; i++) {
        const int r = pt->st[i].r * m->g;
        fend[i] = (i > 0 ? fend[i - 1] + x[i - 1] : 0) + f[i];
        int k = hold_all ? M : r * ((W + r - 1) / r); /* (warmup + 1) x replicas */
        warm[i] = k < M ? k : M;
        W -= r;
        one[i] = i < nc ? m->cut[pt->st[i].b1] * ((double)s->mbsize / m->p->minibatch) / eg : 0;
    }
    for (int i = S - 1; i >= 0; i--) bend[i] = (i < nc ? bend[i + 1] + x[i] : fend[S - 1]) + b[i];
    /* the first backward of each stage (its first replica's, microbatch 0) under the
     * ports' pace: while the pipeline fills, a port carries only activations, one
     * microbatch of cut j every pace[j] (the busiest server sending across it, all its
     * cuts' activations together), so the g-th forward of stage i ends no earlier than
     * fend[i] + g pace[j] for each cut j before it; the replica turns to its first
     * backward after its warmup forwards (microbatches 0, r, ..., warm - r; gpipe all of
     * its own) and once the gradient of stage i + 1's first backward is in */
    double pace[NM_MAX_STAGES] = {0}, bfirst[NM_MAX_STAGES];
    for (int sv = 0; sv < ns; sv++) {
        double F = 0;
        for (int i = 0; i < nc; i++) F += lf[sv * nc + i];
        for (int i = 0; i < nc; i++)
            if (lf[sv * nc + i] > 0 && F > pace[i]) pace[i] = F;
    }
    for (int i = S - 1; i >= 0; i--) {
        const int r = pt->st[i].r * m->g;
        int g = hold_all ? r * (nm_ceil_div(M, r) - 1) : warm[i] - r;
        if (g > M - 1) g = M - 1;
        if (g < 0) g = 0;
        double fe = fend[i];
        for (int j = 0; j < i; j++)
            if (fend[i] + g * pace[j] > fe) fe = fend[i] + g * pace[j];
        double in = i < nc ? bfirst[i + 1] + x[i] : 0;
        bfirst[i] = (fe > in ? fe : in) + b[i];
    }
    /* gpipe: the phases (below), each at least its slowest replica's compute and the
     * first microbatch's way on from it */
    double fphase = 0, bphase = 0;
    for (int i = 0; hold_all && i < S; i++) {
        const int k = nm_ceil_div(M, pt->st[i].r * m->g);
        if (bend[0] - bend[i] + k * b[i] > bphase) bphase = bend[0] - bend[i] + k * b[i];
    }
    for (int sv = 0; sv < ns; sv++) {
        double total = 0, Wf = 0, Wd = 0, head = INFINITY, tail = INFINITY;
        double s2 = INFINITY, e2 = INFINITY, fhead = INFINITY, fon = INFINITY, btail = INFINITY;
        for (int i = 0; i < nc; i++) {
            const double F = lf[sv * nc + i], B = lb[sv * nc + i];
            total += M * (F + B);
            if (F > 0) { /* activations: sent as stage i's forwards end */
                const double t = bend[0] - fend[i] - one[i];
                if (fend[i] < head) head = fend[i];
                if (fend[i] < fhead) fhead = fend[i];
                if (fend[S - 1] - fend[i] - one[i] < fon) fon = fend[S - 1] - fend[i] - one[i];
                if (t < tail) tail = t;
                if (t < e2) e2 = t; /* the last activation, then its whole way */
                Wf += F * warm[i];
                if (warm[i] < M && bfirst[i] + f[i] < s2) s2 = bfirst[i] + f[i];
            }
            if (B > 0) { /* gradients: sent as stage i + 1's backwards end */
                const double t = bend[0] - bend[i + 1] - one[i];
                if (bend[i + 1] < head) head = bend[i + 1];
                if (bfirst[i + 1] < s2) s2 = bfirst[i + 1];
                if (t < tail) tail = t;
                if (t < btail) btail = t;
                Wd += B * warm[i + 1];
                /* a gradient before stage i + 1's last forward: that forward's way on */
                const double tn = bend[0] - fend[i + 1] + f[i + 1] - one[i];
                if (warm[i + 1] < M && tn < e2) e2 = tn;
            }
        }
        if (!(total > 0)) continue;
        if (hold_all && Wf > 0 && fhead + Wf + fon > fphase) fphase = fhead + Wf + fon;
        if (hold_all && Wd > 0 && Wd + btail > bphase) bphase = Wd + btail;
        double t;
        if (Wf + Wd > total) {
            t = head + total + tail; /* few microbatches: no steady part */
        } else {
            const double start = head + Wf > s2 || s2 == INFINITY ? head + Wf : s2;
            const double end = Wd + tail > e2 || e2 == INFINITY ? Wd + tail : e2;
            t = start + (total - Wf - Wd) + end;
        }
        if (t > worst) worst = t;
    }
    /* gpipe runs every forward before any backward: the forward phase ends no earlier than
     * a port's last activation and its way to the last stage, and the backward phase takes
     * a port's gradients or the slowest replica's backwards after that (a server sending
     * both adds them above) */
    if (fphase > 0 && fphase + bphase > worst) worst = fphase + bphase;
    return worst;
}

/* How late each of stage 0's first sends arrives (late[g] for replica g of stage 0, na
 * of them): every replica of stage 0 runs its first forward at once, and those whose
 * receiver (stage 1's replica g % r1 for replica g) is in another server queue at their
 * server's port in replica order, lanes at a time (sim_net_lanes), each bytes / rate of
 * its path: the j-th such send of a server (from 1) (ceil(j / lanes) - 1) transfers late.
 * Returns a new array (the caller frees it), or NULL when no port is shared or out of
 * memory (none late). */
static double *first_late(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    const cluster *c = m->c;
    if (pt->nst < 2 || c->nlevels < 2 || c->nservers < 2) return NULL;
    const nm_stage *A = &pt->st[0], *B = &pt->st[1];
    const double bytes = m->cut[A->b1] * ((double)s->mbsize / m->p->minibatch);
    const int na = A->r * m->g, nb = B->r * m->g;
    if (bytes <= 0) return NULL;
    int *k = calloc((size_t)c->nservers, sizeof *k);
    double *late = calloc((size_t)na, sizeof *late);
    int any = 0;
    if (!k || !late) goto done;
    for (int g = 0; g < na; g++) {
        const int a = m->order[A->u * m->g + g], b = m->order[B->u * m->g + g % nb];
        const int sv = cluster_server_of(c, a);
        double rate, lat;
        int L = sim_net_path(&m->net, a, b, &rate, &lat);
        if (L < 1 || !(rate > 0)) continue; /* inside the server */
        const int lanes = sim_net_lanes(&m->net, L);
        k[sv]++;
        late[g] = ((k[sv] + lanes - 1) / lanes - 1) * (bytes / rate);
        any |= late[g] > 0;
    }
done:
    free(k);
    if (!any) {
        free(late);
        return NULL;
    }
    return late;
}

/* K: the buckets of a ring over P parameter bytes, ceil(P / NM_BUCKET_BYTES), at least 1. */
static double ring_buckets(double P)
{
    return P > NM_BUCKET_BYTES ? ceil(P / NM_BUCKET_BYTES) : 1;
}

/* The seconds a replicated stage's ring of T seconds (its whole all-reduce alone,
 * sim_net_ring's line) in K buckets (ring_buckets of its parameter bytes) adds after the
 * backward of b seconds it overlaps, as docs/sim.md, "All-reduce", describes the engine's
 * ring: the buckets become ready evenly through that backward and are reduced one after
 * another, T / K each, so the ring ends max(b / K + T, b + T / K) after the backward
 * starts. 0 when T is. */
static double ring_exposed(double T, double K, double b)
{
    if (!(T > 0)) return 0;
    const double end = b / K + T > b + T / K ? b / K + T : b + T / K;
    return end - b;
}

/* The steady iteration of the asynchronous kinds on one stage of n replicas (data
 * parallelism: no transfer, nothing to wait on but the ring): each replica runs M / n
 * microbatches of f + b seconds an iteration; pipedream holds every replica after each of
 * them (a round) for e seconds of its ring (ring_exposed) and takes the optimizer step
 * (step seconds), 2bw only after the last of the iteration. */
static double single_async_s(int step_each_round, int n, int M, double f, double b, double e,
                             double step)
{
    const double rounds = (double)M / n;
    return step_each_round ? rounds * (f + b + e + step) : rounds * (f + b) + e + step;
}

/* nm_price, with the schedule's counts where the closed form's may differ (exact 1), or
 * the closed form's only (0). */
double nm_chunk_transfer(const nm_model *m, const nm_setting *s, const nm_part *pt, int i,
                         double *bytes)
{
    double b = 0, x = 0;
    if (i + 1 < pt->nst) {
        const nm_stage *st = &pt->st[i];
        const int a = m->order[st->u * m->g], d = m->order[pt->st[i + 1].u * m->g];
        double rate, lat;
        b = m->cut[st->b1] * ((double)s->mbsize / m->p->minibatch);
        if (a != d && b > 0 && sim_net_path(&m->net, a, d, &rate, &lat) >= 0 && rate > 0)
            x = b / rate + lat;
    }
    if (bytes) *bytes = b;
    return x;
}

static void price(const nm_model *m, const nm_setting *s, nm_part *pt, int exact)
{
    double per = 0, sumlat = 0, botlat = 0, ar = 0, peak = 0, cap = INFINITY;
    int fits = 1, memfits = 1;
    if (sched_kind_chunked(s->kind)) {
        /* per device: its chunks' compute; links per stage, each transfer over the path
         * between the two stages' devices (the V kinds' turn stays on its rank; the
         * interleaved wrap goes back to rank 0) */
        int p = pt->ranks, v = pt->nst / (p > 0 ? p : 1);
        const double bscale = (double)s->mbsize / m->p->minibatch;
        double devper[NM_MAX_UNITS] = {0};
        double f[NM_MAX_STAGES], b[NM_MAX_STAGES], bi[NM_MAX_STAGES], bw[NM_MAX_STAGES];
        double bytes[NM_MAX_STAGES] = {0};
        int wdev[NM_MAX_UNITS] = {0};
        for (int i = 0; i < pt->nst; i++) {
            const nm_stage *st = &pt->st[i];
            const nm_range *R = &m->rg[st->u * (m->U + 1) + 1];
            nm_stage_compute(m, s, st->b0, st->b1, st->u, 1, &f[i], &b[i]);
            /* the split halves: the simulator's even split of a layer's backward (the
             * profiles give no other), the forward again in I with recomputation */
            double rf = s->recompute ? (m->cF[st->b1] - m->cF[st->b0]) * bscale * 1e-3 / R->speed
                                     : 0;
            bi[i] = (b[i] - rf) / 2 + rf;
            bw[i] = (b[i] - rf) / 2;
            int rk = sched_kind_rank(s->kind, i, p);
            if (rk >= 0 && rk < NM_MAX_UNITS) wdev[rk] = m->order[st->u * m->g];
            const double x = nm_chunk_transfer(m, s, pt, i, &bytes[i]);
            /* blocking transfers: the rank waits for one exchange (one transfer, its
             * neighbours' at once) per steady F-B pair, which runs back to back */
            devper[rk] += f[i] + b[i] + (s->p2p_sync ? x : 0);
            if (x > per) per = x;
            sumlat += 2 * x;
            if (R->cap < cap) cap = R->cap;
        }
        sim_memory mem[NM_MAX_UNITS];
        nm_chunked_memory(m, s, pt, mem);
        double dmax = 0;
        for (int rk = 0; rk < p; rk++) {
            if (devper[rk] > dmax) dmax = devper[rk];
            if (mem[rk].total > peak) peak = mem[rk].total;
            if (!mem[rk].fits) memfits = 0;
        }
        if (dmax > per) per = dmax;
        pt->period = per;
        pt->fill = (p - 1) * dmax / v + sumlat;
        pt->ar = 0;
        /* overlapped transfers: the schedule's order replayed (native_ir.c); blocking
         * ones keep the closed form */
        const schedule *sc = s->p2p_sync || s->M < 1 ? NULL : nm_chunked_schedule(m, s, pt);
        double t = sc && sc->nstages == pt->nst && sc->nworkers == p
                       ? nm_ir_time(sc, &m->net, wdev, f, b, bi, bw, bytes)
                       : -1;
        if (t > 0) {
            pt->M = s->M;
            pt->iter_s = t;
            goto done;
        }
    } else {
        int W = 0, kzb = nm_pipeline_kzb(m, pt), reps[NM_MAX_STAGES];
        double f[NM_MAX_STAGES], b[NM_MAX_STAGES], x[NM_MAX_STAGES], arx[NM_MAX_STAGES];
        double comm = 0;
        /* the asynchronous kinds' replicated stages: each ring alone and its buckets (0:
         * not priced so), read by the exposed ring below and the port replay's hold */
        double ring[NM_MAX_STAGES] = {0}, kb[NM_MAX_STAGES] = {0};
        sim_memory mem[NM_MAX_STAGES];
        nm_pipeline_memory(m, s, pt, exact, mem);
        for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
        for (int i = 0; i < pt->nst; i++) {
            const nm_stage *st = &pt->st[i];
            nm_cost o = {0};
            if (!nm_stage_cost_k(m, s, st->b0, st->b1, st->u, st->r, W, kzb, &mem[i], &o)) {
                if (o.mem > o.cap) memfits = 0;
                else fits = 0; /* no next unit, or microbatches that do not split evenly */
            }
            W -= st->r * m->g;
            if (o.per > per) {
                /* the bottleneck's own latency is what M periods replace in the fill: the
                 * stage's, or when its link binds one transfer (its compute stays) */
                per = o.per;
                botlat = o.comm > 0 && o.comm >= o.per ? o.comm : o.lat;
            }
            sumlat += o.lat;
            if (o.arx > ar) ar = o.arx;
            if (o.mem > peak) peak = o.mem;
            if (o.cap < cap) cap = o.cap;
            if (o.comm > comm) comm = o.comm;
            reps[i] = st->r * m->g;
            f[i] = o.c - o.b;
            b[i] = o.b;
            x[i] = (o.lat - o.c) / 2;
            arx[i] = o.arx;
            /* the asynchronous kinds hold a replicated stage at its ring after its last
             * backward of a round (2bw: of the iteration): what the ring adds there is
             * the buckets' (ring_exposed; the closed form's max(ring - backward, last
             * bucket) starts the ring with the backward, its first bucket a K-th in) */
            if (sched_traits_of(s->kind)->async && reps[i] > 1) {
                nm_terms tm;
                nm_stage_terms(m, s, st, &tm);
                ring[i] = tm.allreduce_s;
                kb[i] = ring_buckets(m->lay[st->b0 * (m->nb + 1) + st->b1].params);
                arx[i] = ring_exposed(ring[i], kb[i], b[i]);
            }
        }
        ports P;
        ports_load(m, s, pt, &P);
        double port = port_time(&P), link = comm;
        if (port > per) {
            per = port; /* a server's port binds: every stage's latency is in the fill */
            botlat = port;
        }
        pt->period = per;
        pt->fill = sumlat - botlat;
        pt->ar = sched_traits_of(s->kind)->step_each_round ? 0 : ar;
        /* the compute order replayed prices what the closed form cannot see: replicas
         * waiting on out-of-phase neighbours (unequal counts), a replica's few
         * microbatches, each stage's all-reduce from its own last backward (native_rr.c);
         * the closed form keeps the links' and ports' bound */
        if (s->M > 0 && nm_rr_applies(s->kind, pt->nst)) {
            const sched_traits *tr = sched_traits_of(s->kind);
            double *late = tr->async ? NULL : first_late(m, s, pt);
            /* the asynchronous kinds: each replica's transfers over its own path (a
             * stage's replicas may sit on both sides of a server's Ethernet) */
            nm_rr_links lk = {.net = &m->net};
            for (int i = 0; i < pt->nst; i++) {
                lk.devs[i] = m->order + pt->st[i].u * m->g;
                lk.bytes[i] = pt->st[i].b1 < m->nb
                                  ? m->cut[pt->st[i].b1] * ((double)s->mbsize / m->p->minibatch)
                                  : 0;
                lk.step[i] = nm_stage_step_s(m, s, &pt->st[i]);
                /* the port replay runs the whole ring through the ports, bucket by bucket
                 * (native_rrport.c) */
                lk.ring[i] = ring[i];
                lk.buckets[i] = kb[i];
            }
            double plain, t = nm_rr_time_links(s->kind, pt->nst, reps, f, b, x, arx, late,
                                               s->M, s->p2p_sync, tr->async ? &lk : NULL,
                                               &plain);
            free(late);
            if (t > 0) {
                /* links or ports slower than the order: everything ends that much later;
                 * a port's traffic only from its first send to its last (port_bound), a
                 * link's every stage's latency but one transfer */
                double bound = s->M * link + sumlat - link;
                if (port > 0 && !tr->async) {
                    double pb = port_bound(&P, m, s, pt, f, b, x);
                    if (pb > bound) bound = pb;
                }
                pt->M = s->M;
                if (tr->async) pt->iter_s = t > s->M * per ? t : s->M * per;
                else pt->iter_s = t + (bound > plain ? bound - plain : 0);
                ports_free(&P);
                goto done;
            }
        }
        ports_free(&P);
        /* the asynchronous kinds on one stage: no replay (nm_rr_applies), the rounds,
         * the ring's buckets and the step in closed form (docs/planner-native.md,
         * section 8, "One stage under the asynchronous kinds") */
        const sched_traits *ta = sched_traits_of(s->kind);
        if (s->M > 0 && pt->nst == 1 && ta->async && !ta->split_backward) {
            pt->M = s->M;
            pt->iter_s = single_async_s(ta->step_each_round, reps[0], s->M, f[0], b[0],
                                        reps[0] > 1 ? arx[0] : 0,
                                        nm_stage_step_s(m, s, &pt->st[0]));
            goto done;
        }
    }
    /* the fill and drain: none without a flush, less where split backwards fill it */
    const sched_traits *tr = sched_traits_of(s->kind);
    double fillfac = tr->async ? 0 : tr->split_backward ? 0.4 : 1;
    pt->M = s->M;
    pt->iter_s = s->M * pt->period + fillfac * pt->fill + pt->ar;
done:
    pt->thr = pt->iter_s > 0 ? (double)s->M * s->mbsize / pt->iter_s : 0;
    pt->peak_mem = peak;
    pt->cap = cap;
    pt->fits = fits && memfits;
}

void nm_price(const nm_model *m, const nm_setting *s, nm_part *pt) { price(m, s, pt, 0); }

void nm_price_exact(const nm_model *m, const nm_setting *s, nm_part *pt) { price(m, s, pt, 1); }
