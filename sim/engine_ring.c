/* engine_ring.c: the grouped ring all-reduce. The engine runs a replicated stage's ring
 * all-reduce as 2 (r - 1) steps per gradient bucket, each a transfer on every one of the r
 * hops (engine_comm.c: the replicas', or with context parallelism every context rank of
 * them, eng_ring_cp), so r^2 transfers per bucket. A hop is private when no
 * point-to-point transfer and no other hop uses its link, each egress port it leaves
 * through has no more users (links) than lanes, and its worker sends no hop that is not
 * (a context-parallel ring's worker sends one per context rank of its replica), all in
 * this ring:
 * it then always starts with its step and never waits nor delays anything else, and
 * nothing but its step's end sees it. A step's private hops run as one event, the
 * slowest one's end, and only its shared hops as transfers, so a bucket of a ring that
 * shares nothing costs O(r) instead of O(r^2), with the same results bit for bit:
 *
 * - the private hops' end is t + the slowest one's link time, which in floating point is
 *   the latest of their t + link time (rounding is monotonic), posted when the step
 *   starts just as the hops' ends are (so it keeps their place among equal-time events;
 *   among the step's own ends, posted together, the order does not matter: a private
 *   hop's end does nothing but count, and the step ends at the last one either way); the
 *   step ends when that event and every shared hop have ended, as before;
 * - what the private hops add to their link's statistics and to their worker's link time
 *   (comm_it) is deferred and added later as the same sequence of additions
 *   (eng_add_repeated; a worker's several hops of unequal link time one by one, in ring
 *   order, step after step): a worker's before any other addition to its link time
 *   (eng_ring_flush, called by every transfer start), the rest when the all-reduce ends
 *   (eng_ring_finish); nothing reads them meanwhile and only this hop adds to its link;
 * - with a timeline, every hop is still recorded on its link track, in the same order,
 *   unless the model skips ring hops (skip_ring_hops: the dashboard's timeline, where the
 *   steps group as without one).
 *
 *
 * A shared hop that would start at once when its step starts (link idle, nothing queued,
 * a free lane on each port) runs as a virtual hop: it holds its link and lanes and adds
 * its statistics as a transfer's start would, but has no record nor event and ends with
 * the step's grouped event. Every check of its link or ports first releases it when its
 * end event's key (time, sequence number reserved at the step's start, in ring order)
 * is at most the running event's; when something queues behind it while it moves, it is
 * split back into a transfer whose end event takes that reserved key, so it ends, and
 * starts what waits, exactly where the per-hop ring's hop would. The grouped event takes
 * the key after the step's hops: among the step's ends at its time it comes last, as the
 * per-hop ring's last end does, and only the last end does anything but count.
 *
 * Only the event count differs: 2 events per step and one per shared hop that waits or is
 * split, instead of one per hop and one per step.
 *
 * Rings whose shared hops share a link, a port or a worker form a class (ring.cls: the
 * interleaved schedule's virtual stages of one device, whose rings run over the same
 * links); a ring of another class never touches what they hold. A step whose shared hops
 * all started virtual, when nothing has run since but its own group's events and those of
 * other classes' rings, is followed by a step that would start them all virtual again
 * with the same link times: ring_repeat runs it in O(1),
 * leaving the hops held, and the additions of the repeated steps (link statistics, link
 * time, iteration ends, the hops' end keys) wait in the group (vb_k, vt, vbase) until
 * eng_ring_unbatch adds them as the per-hop ring would have, with eng_add_repeated:
 * before any event that is not independent (the engine's loop), at the end of each
 * bucket, and after the run. A bucket's shared hops then cost O(r) hop starts, not
 * O(r^2). Steps repeat without a timeline and with the dashboard's (skip_ring_hops: it
 * records nothing per step), not with the full one. A worker that sends several of the
 * ring's shared hops (a context-parallel ring's) has their repeated link time added step
 * after step in ring order, as the per-hop ring adds it.
 *
 * A ring whose hops are all private posts nothing but its own next event (a step's start,
 * then its end), and nothing else reads its state but through the deferred additions. When
 * that next event would be the earliest pending one (its key, the one it would be posted
 * with, before the heap's least), the engine's loop would run it next: eng_ring_chain runs
 * it at once, without the heap, and goes on until an event would not be next (it is then
 * posted with its key) or the bucket's last step ends (hop_done). The events, their keys,
 * order and count are the same; only the heap's work is saved. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine_impl.h"
#include "sim/sim.h"

/* --- exact repeated addition --------------------------------------------------------------- */

/* x 2^k exactly as ldexp has it: a multiplication by the power of two built from its bits
 * where 2^k is a normal double (the product is then ldexp's correctly rounded result),
 * ldexp itself beyond. */
static double times_pow2(double x, int k)
{
    if (k < -1022 || k > 1023)
        return ldexp(x, k);
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double p;
    memcpy(&p, &b, sizeof p);
    return x * p;
}

double eng_add_repeated(double s, double v, long long n)
{
    /* Inside one binade [2^(e-1), 2^e) of s, with ulp u = 2^(e-53), s = S u for an integer
     * S and s + v rounds to (S + d) u with d = v / u rounded to nearest, the same d at
     * every step (on a tie d is the even one of its neighbours once S is even, and S stays
     * even): k steps add k d u at once, as long as S + k d stays inside the binade. The
     * step that leaves it, a tie with S odd, zero or a subnormal s, a v near s or anything
     * unusual is one real addition. */
    while (n > 0) {
        if (!(v > 0) || !(s >= 0) || !isfinite(s) || !isfinite(v) || v < 0x1p-1000) {
            for (; n > 0; n--)
                s += v;
            return s;
        }
        if (s < 0x1p-1000) {
            s += v;
            n--;
            continue;
        }
        /* s is normal here: its exponent from its bits, as frexp gives it */
        uint64_t sb;
        memcpy(&sb, &s, sizeof sb);
        int e = (int)((sb >> 52) & 0x7ff) - 1022;
        double S = times_pow2(s, 53 - e), x = times_pow2(v, 53 - e);
        if (x >= 0x1p51) {
            s += v;
            n--;
            continue;
        }
        /* 0 <= x < 2^51: its integer part by truncation, exactly floor's */
        unsigned long long Si = (unsigned long long)S, d = (unsigned long long)x;
        double f = x - (double)d;
        if (f == 0.5) {
            if (Si & 1) {
                s += v;
                n--;
                continue;
            }
            d += d & 1;
        } else if (f > 0.5) {
            d++;
        }
        if (d == 0)
            return s;  /* v is below half an ulp of s: nothing changes, ever */
        /* k = min(n, room) with room = (2^53 - 1 - Si) / d, without the division when all n
         * fit (Si + n d < 2^53 + 2^31 2^32 cannot overflow) */
        unsigned long long un = (unsigned long long)n, k;
        if (un < (1ULL << 31) && d < (1ULL << 32) && Si + un * d <= (1ULL << 53) - 1) {
            k = un;
        } else {
            unsigned long long room = ((1ULL << 53) - 1 - Si) / d;
            k = un < room ? un : room;
        }
        if (k > 0) {
            s = times_pow2((double)(Si + k * d), e - 53);
            n -= (long long)k;
        }
        if (n > 0) {
            s += v;
            n--;
        }
    }
    return s;
}

/* --- which rings are private --------------------------------------------------------------- */

typedef struct pairs {       /* directed device pairs used by transfers */
    htab h;
    int n, cap;
    int *a, *b, *ring;       /* devices; ring hops on the pair */
    int *wid;                /* the widest use of the pair (lanes; 1 for point-to-point) */
    unsigned char *p2p;      /* 1: point-to-point transfers use it */
} pairs;

/* The index of pair (a, b), added when new; -1 when out of memory. */
static int pair_of(pairs *P, int a, int b)
{
    int i = ht_find(&P->h, (uint64_t)(uint32_t)a, (uint64_t)(uint32_t)b);
    if (i >= 0)
        return i;
    /* the five arrays grow alike; P->cap moves only once all five have */
    int ca = P->cap, cb = P->cap, cr = P->cap, cw = P->cap, cp = P->cap;
    if (eng_grow((void **)&P->a, P->n, &ca, sizeof *P->a) ||
        eng_grow((void **)&P->b, P->n, &cb, sizeof *P->b) ||
        eng_grow((void **)&P->ring, P->n, &cr, sizeof *P->ring) ||
        eng_grow((void **)&P->wid, P->n, &cw, sizeof *P->wid) ||
        eng_grow((void **)&P->p2p, P->n, &cp, sizeof *P->p2p))
        return -1;
    P->cap = ca;
    i = P->n++;
    P->a[i] = a;
    P->b[i] = b;
    P->ring[i] = 0;
    P->wid[i] = 1;
    P->p2p[i] = 0;
    return ht_put(&P->h, (uint64_t)(uint32_t)a, (uint64_t)(uint32_t)b, i) ? -1 : i;
}

/* Fills pc[] with how many lanes the pairs using each egress port take, each its widest
 * use (ports indexed through ph, pc of
 * capacity 4 x pairs x levels); for each pair its ports' indices go to pp[pair * L ..],
 * their count to np[pair]. 0 or -1. */
static int count_ports(const sim_net *net, const pairs *P, htab *ph, int *pc, int *pp, int *np)
{
    int nports = 0;
    for (int i = 0; i < P->n; i++) {
        double rate, lat;
        int L = sim_net_path(net, P->a[i], P->b[i], &rate, &lat);
        int lv[CLUSTER_MAX_LEVELS];
        uint64_t grp[CLUSTER_MAX_LEVELS];
        np[i] = L < 0 ? 0 : eng_path_ports(net, P->a[i], L, lv, grp);
        for (int k = 0; k < np[i]; k++) {
            int pi = ht_find(ph, (uint64_t)lv[k], grp[k]);
            if (pi < 0) {
                pi = nports++;
                pc[pi] = 0;
                if (ht_put(ph, (uint64_t)lv[k], grp[k], pi))
                    return -1;
            }
            pc[pi] += P->wid[i];
            pp[(size_t)i * CLUSTER_MAX_LEVELS + k] = pi;
        }
    }
    return 0;
}

/* The class of stage s (union-find root, paths halved). */
static int ring_root(int *up, int s)
{
    while (up[s] != s) {
        up[s] = up[up[s]];
        s = up[s];
    }
    return s;
}

/* Stage s uses a resource whose first ring is *own (-1: none yet): joins their classes. */
static void ring_join(int *up, int *own, int s)
{
    if (*own < 0) {
        *own = s;
        return;
    }
    int a = ring_root(up, *own), b = ring_root(up, s);
    if (a != b)
        up[a < b ? b : a] = a < b ? a : b;
}

/* Marks the private hops among those in E->hop, lists each ring's shared hops, and puts
 * rings whose shared hops share a link, a port or a worker in one class. */
static int mark_private(eng *E, pairs *P, int *wring)
{
    const sim_net *net = &E->m->net;
    size_t cap = (size_t)P->n * CLUSTER_MAX_LEVELS + 1;
    int *pc = malloc(cap * sizeof *pc), *pp = malloc(cap * sizeof *pp);
    int *np = malloc(((size_t)P->n + 1) * sizeof *np);
    int *lanes = malloc(cap * sizeof *lanes);
    htab ph = {0};
    int rc = -1, nshop = 0;
    if (!pc || !pp || !np || !lanes || ht_init(&ph, cap) || count_ports(net, P, &ph, pc, pp, np))
        goto out;
    for (size_t i = 0; i < ph.cap; i++)  /* each port's lanes, from its level */
        if (ph.s[i].v >= 0)
            lanes[ph.s[i].v] = sim_net_lanes(net, (int)ph.s[i].a);
    /* each hop on its own (link, ports), then its worker's: wring[w] becomes -1 where the
     * worker sends a hop that is not, or hops of two rings, else its ring's stage */
    for (int w = 0; w < E->nw; w++)
        wring[w] = -2;
    for (int s = 0; s < E->ns; s++) {
        ring *R = &E->rg[s];
        for (int j = 0; j < R->n; j++) {
            ringhop *h = &E->hop[R->off + j];
            int pi = ht_find(&P->h, (uint64_t)(uint32_t)h->da, (uint64_t)(uint32_t)h->db);
            h->priv = P->ring[pi] == 1 && !P->p2p[pi];
            for (int k = 0; k < np[pi] && h->priv; k++) {
                int port = pp[(size_t)pi * CLUSTER_MAX_LEVELS + k];
                h->priv = pc[port] <= lanes[port];
            }
            wring[h->w] = !h->priv || (wring[h->w] != -2 && wring[h->w] != s) ? -1
                                                                                : s;
        }
    }
    for (int s = 0; s < E->ns; s++) {
        ring *R = &E->rg[s];
        R->soff = nshop;
        for (int j = 0; j < R->n; j++) {
            ringhop *h = &E->hop[R->off + j];
            h->priv = wring[h->w] == s;
            if (h->priv)
                R->priv = 1;
            else
                E->shop[nshop++] = R->off + j;
        }
        R->nshared = nshop - R->soff;
    }
    /* classes: rings joined by a shared hop's link, port or worker (union-find on
     * stages; pc[] reused: each port's first ring, or -1) */
    int *up = malloc(((size_t)E->ns + (size_t)P->n + 3 * (size_t)E->nw + 1) * sizeof *up);
    if (!up)
        goto out;
    int *pown = up + E->ns, *wown = pown + P->n, *wlast = wown + E->nw, *whop = wlast + E->nw;
    for (int s = 0; s < E->ns; s++)
        up[s] = s;
    for (int i = 0; i < P->n; i++)
        pown[i] = -1;
    for (int w = 0; w < E->nw; w++)
        wown[w] = wlast[w] = -1;
    for (size_t i = 0; i < ph.n; i++)
        pc[i] = -1;
    for (int s = 0; s < E->ns; s++) {
        ring *R = &E->rg[s];
        R->multi = 0;
        for (int q = 0; q < R->nshared; q++) {
            int hj = E->shop[R->soff + q];
            ringhop *h = &E->hop[hj];
            int pi = ht_find(&P->h, (uint64_t)(uint32_t)h->da, (uint64_t)(uint32_t)h->db);
            h->multi = 0;
            if (wlast[h->w] == s) {  /* two hops of one worker: their link time interleaves */
                h->multi = E->hop[whop[h->w]].multi = 1;
                R->multi = 1;
            } else {
                whop[h->w] = hj;
            }
            wlast[h->w] = s;
            ring_join(up, &wown[h->w], s);
            ring_join(up, &pown[pi], s);
            for (int k = 0; k < np[pi]; k++)
                ring_join(up, &pc[pp[(size_t)pi * CLUSTER_MAX_LEVELS + k]], s);
        }
    }
    for (int s = 0; s < E->ns; s++)
        E->rg[s].cls = ring_root(up, s);
    free(up);
    rc = 0;
out:
    free(pc);
    free(pp);
    free(np);
    free(lanes);
    ht_free(&ph);
    return rc;
}

/* E->ringw: each ring hop's width, its ring's sim_net_ring_widths over its devices (the
 * replicas' workers', or a members' ring's, eng_ring_cp); 1 for a stage whose all-reduce
 * moves nothing. 0 or -1 (memory). */
static int ring_widths(eng *E)
{
    const schedule *sc = E->s;
    int tot = 0, rmax = 1;
    E->ringoff = malloc(((size_t)E->ns + 1) * sizeof *E->ringoff);
    if (!E->ringoff)
        return eng_oom(E);
    for (int s = 0; s < E->ns; s++) {
        int nh = eng_ring_nhops(E, s);
        E->ringoff[s] = tot;
        tot += nh;
        if (nh > rmax)
            rmax = nh;
    }
    E->ringoff[E->ns] = tot;
    int *devs = malloc((size_t)rmax * sizeof *devs);
    E->ringw = malloc(((size_t)tot + 1) * sizeof *E->ringw);
    if (!devs || !E->ringw) {
        free(devs);
        return eng_oom(E);
    }
    int rc = 0;
    for (int s = 0; s < E->ns && !rc; s++) {
        int n = eng_ring_nhops(E, s), *w = E->ringw + E->ringoff[s];
        for (int j = 0; j < n; j++) w[j] = 1;
        if (!eng_ring_moves(E, s))
            continue;
        if (eng_ring_cp(E->m, sc, s)) { /* every context rank of the replicas */
            rc = sim_net_ring_widths(&E->m->net, E->m->ring_devices[s], n, w);
            continue;
        }
        for (int j = 0; j < n; j++)
            devs[j] = E->m->worker_device[sc->stage_workers[sc->stage_first[s] + j]];
        rc = sim_net_ring_widths(&E->m->net, devs, n, w);
    }
    free(devs);
    return rc ? eng_oom(E) : 0;
}

int eng_ring_analyse(eng *E)
{
    const schedule *sc = E->s;
    int nhop = 0;
    for (int s = 0; s < E->ns; s++)
        if (eng_ring_moves(E, s))
            nhop += eng_ring_nhops(E, s);
    if (nhop > 0 && ring_widths(E))
        return -1;
    if (nhop == 0 || E->m->ring_per_hop)
        return 0;
    pairs P = {0};
    int *wring = malloc(((size_t)E->nw + 1) * sizeof *wring);
    E->rg = calloc((size_t)E->ns, sizeof *E->rg);
    E->vbs = malloc((size_t)E->ns * sizeof *E->vbs);
    E->hop = malloc((size_t)nhop * sizeof *E->hop);
    E->shop = malloc((size_t)nhop * sizeof *E->shop);
    int rc = -1;
    if (!wring || !E->rg || !E->vbs || !E->hop || !E->shop || ht_init(&P.h, 64))
        goto out;
    for (int s = 0; s < E->ns; s++)
        E->vbs[s] = -1;
    /* the rings' hops (same-device hops move nothing) */
    nhop = 0;
    for (int s = 0; s < E->ns; s++) {
        if (!eng_ring_moves(E, s))
            continue;
        int nh = eng_ring_nhops(E, s);
        E->rg[s].off = nhop;
        for (int j = 0; j < nh; j++) {
            int hw, da, db;
            eng_ring_hop(E, s, j, &hw, &da, &db);
            if (da == db)
                continue;
            int pi = pair_of(&P, da, db), wd = E->ringw[E->ringoff[s] + j];
            if (pi < 0)
                goto out;
            P.ring[pi]++;
            if (wd > P.wid[pi])
                P.wid[pi] = wd;
            E->hop[nhop++] = (ringhop){.w = hw, .da = da, .db = db, .link = -1,
                                       .width = wd};
        }
        E->rg[s].n = nhop - E->rg[s].off;
    }
    /* the point-to-point transfers' pairs */
    for (int w = 0; w < E->nw; w++) {
        int last = -1;
        for (int i = 0; i < sc->len[w]; i++) {
            const action *a = &sc->acts[w][i];
            if ((a->kind != ACT_SEND_F && a->kind != ACT_SEND_B) || a->peer == last)
                continue;
            if (a->peer < 0 || a->peer >= E->nw)
                continue;  /* the run reports it */
            last = a->peer;
            int da = E->m->worker_device[w], db = E->m->worker_device[a->peer];
            if (da == db)
                continue;
            int pi = pair_of(&P, da, db);
            if (pi < 0)
                goto out;
            P.p2p[pi] = 1;
        }
    }
    rc = mark_private(E, &P, wring);
out:
    free(wring);
    ht_free(&P.h);
    free(P.a);
    free(P.b);
    free(P.ring);
    free(P.wid);
    free(P.p2p);
    return rc ? eng_oom(E) : 0;
}

/* --- grouped steps ------------------------------------------------------------------------- */

/* The ring's links (created in hop order, as the per-hop ring's first step creates them)
 * and hop times, at its first step; bytes per hop as the per-hop ring computes them. */
static int ring_ready(eng *E, ring *R, const group *g)
{
    R->bytes = g->hop_bytes;
    R->maxocc = 0;
    for (int j = 0; j < R->n; j++) {
        ringhop *h = &E->hop[R->off + j];
        h->link = eng_link_of(E, h->da, h->db);
        if (h->link < 0)
            return h->link == -2 ? -1 : eng_oom(E);
        double rate = E->lk[h->link].rate;
        h->occ = R->bytes / (h->width > 1 ? rate * h->width : rate);
        if (h->priv && h->occ > R->maxocc)
            R->maxocc = h->occ;
    }
    R->ready = 1;
    return 0;
}

/* --- virtual hops --------------------------------------------------------------------- */

/* The slot holding the next link after li in port pi's list of virtual hops. */
static int *vnext_of(eng *E, int li, int pi)
{
    link *l = &E->lk[li];
    for (int k = 0; k < l->nports; k++)
        if (l->ports[k] == pi)
            return &l->vnext[k];
    return NULL;  /* not reached: li is on pi's list only when it leaves through pi */
}

/* Takes link li off its ports' lists of virtual hops and marks it without one (its link
 * and port lanes stay held). */
static void vunlink(eng *E, int li)
{
    link *l = &E->lk[li];
    for (int k = 0; k < l->nports; k++) {
        int pi = l->ports[k];
        port *p = &E->pt[pi];
        int *slot = &p->vhead;
        while (*slot != li)
            slot = vnext_of(E, *slot, pi);
        *slot = l->vnext[k];
        p->nvirt--;
    }
    l->vg = -1;
}

/* 1 when link li's virtual hop has ended: its end event's key is at most the running
 * event's (time, sequence number), so the per-hop ring would have run that end. */
static int vpast(const eng *E, const link *l)
{
    return l->vend < E->now_t || (l->vend == E->now_t && l->vseq <= E->now_seq);
}

/* Link li's virtual hop has ended: releases the link and its port lanes, as the hop's end
 * would (nothing waits on them: a waiter would have made it a transfer). */
static void vexpire(eng *E, int li)
{
    vunlink(E, li);
    link *l = &E->lk[li];
    l->busy = 0;
    for (int k = 0; k < l->nports; k++)
        E->pt[l->ports[k]].busy -= E->hop[l->vh].width;
}

/* Link li's virtual hop, still moving, becomes a transfer whose end event has the key the
 * per-hop ring's would have (posted with its reserved sequence number); it counts as a
 * pending hop of its step on its own. */
static int vmaterialize(eng *E, int li)
{
    int xi = eng_xfer_alloc(E);
    if (xi < 0)
        return eng_oom(E);
    link *l = &E->lk[li];
    group *g = &E->gr[l->vg];
    E->x[xi] = (xfer){.bytes = E->rg[g->stage].bytes, .arrival = l->vend, .a = NULL,
                      .group = l->vg, .link = li, .waiter = -1, .lnext = -1, .pnext = -1,
                      .cnext = -1, .iter = g->iter, .src_w = E->hop[l->vh].w, .received = 1,
                      .wide = E->hop[l->vh].width - 1};
    g->pending++;
    E->r->ring_hops_split++;
    vunlink(E, li);
    return heap_push_seq(&E->h, l->vend, -(xi + 1), l->vseq) ? eng_oom(E) : 0;
}

int eng_vlink_touch(eng *E, int li)
{
    if (vpast(E, &E->lk[li])) {
        vexpire(E, li);
        return 0;
    }
    return vmaterialize(E, li);
}

void eng_vport_expire(eng *E, int pi)
{
    for (int li = E->pt[pi].vhead; li >= 0;) {
        int next = *vnext_of(E, li, pi);
        if (vpast(E, &E->lk[li]))
            vexpire(E, li);
        li = next;
    }
}

int eng_vport_materialize(eng *E, int pi)
{
    while (E->pt[pi].vhead >= 0)
        if (vmaterialize(E, E->pt[pi].vhead))
            return -1;
    return 0;
}

/* Shared hop hj of group gi's step starting at t, whose end event would take sequence
 * number seq: when it would start at once (its link idle with nothing queued, a free lane
 * on each port), starts it as a virtual hop, adding what a transfer start adds (link
 * statistics, link time, iteration end, timeline) in the same order, and returns 1;
 * else 0 (it is to be a transfer); -1 on error. */
static int vstart(eng *E, int gi, int hj, double t, uint32_t seq)
{
    const ringhop *h = &E->hop[hj];
    int li = h->link;
    link *l = &E->lk[li];
    if (l->vg >= 0 && vpast(E, l))
        vexpire(E, li);
    if (l->busy || l->head >= 0)
        return 0;
    for (int k = 0; k < l->nports; k++) {
        port *p = &E->pt[l->ports[k]];
        if (p->nvirt)
            eng_vport_expire(E, l->ports[k]);
        if (p->busy + h->width > p->lanes)
            return 0;
    }
    const group *g = &E->gr[gi];
    double bytes = E->rg[g->stage].bytes;
    l->busy = 1;
    l->vg = gi;
    l->vh = hj;
    l->vend = t + h->occ;
    l->vseq = seq;
    for (int k = 0; k < l->nports; k++) {
        port *p = &E->pt[l->ports[k]];
        p->busy += h->width;
        p->nvirt++;
        l->vnext[k] = p->vhead;
        p->vhead = li;
    }
    E->r->ring_hops_virtual++;
    l->st.bytes += bytes;
    l->st.busy_s += h->occ;
    l->st.transfers++;
    if (g->iter >= E->k0 && g->iter <= E->k1)
        l->st.bytes_window += bytes;
    if (E->ws[h->w].ring_g >= 0)
        eng_ring_flush(E, h->w);
    E->comm_it[(size_t)h->w * E->niter + g->iter] += h->occ;
    note_end(E, g->iter, l->vend);
    if (E->m->record && !E->m->skip_ring_hops) {
        if (eng_link_track(E, li) < 0)
            return eng_oom(E);
        if (eng_record(E, E->lk[li].track, TL_ALLREDUCE, t, h->occ, bytes, g->stage, -1, -1,
                       g->iter))
            return -1;
    }
    return 1;
}

/* Group gi's step at t repeats its last one (its stage's E->vbs): every shared hop held
 * its link and lanes as a virtual hop, whose end has passed, and since that step started
 * nothing has run that could touch them (only independent rings' events), so the per-hop
 * ring would release each and start it again virtual with the same link time. The hops
 * stay as they are; only the step's key, counts and grouped end event are new, and their
 * additions wait for eng_ring_unbatch. O(1). */
static int ring_repeat(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    const ring *R = &E->rg[g->stage];
    g->gsteps++;
    E->r->ring_steps_grouped++;
    E->r->ring_steps_repeated++;
    E->r->ring_hops_virtual += R->nshared;
    uint32_t base = E->h.seq;
    E->h.seq += (uint32_t)R->n + 1;
    g->vt = t;
    g->vbase = base;
    g->vb_k++;
    /* the latest of t + each hop's time is t + the slowest's (rounding is monotonic) */
    double end = t + (R->priv && R->maxocc > R->vmaxocc ? R->maxocc : R->vmaxocc);
    if (R->priv)
        note_end(E, g->iter, t + R->maxocc);
    g->inflight = 1;
    g->pending++;
    return heap_push_seq(&E->h, end, E->nw + gi, base + (uint32_t)R->n) ? eng_oom(E) : 0;
}

void eng_ring_unbatch(eng *E, int gi)
{
    group *g = &E->gr[gi];
    int c = E->rg ? E->rg[g->stage].cls : 0;
    if (!E->vbs || E->vbs[c] != gi)
        return;
    E->vbs[c] = -1;
    E->nvb--;
    long long k = g->vb_k;
    g->vb_k = 0;
    if (k == 0)
        return;
    const ring *R = &E->rg[g->stage];
    int window = g->iter >= E->k0 && g->iter <= E->k1;
    for (int q = 0; q < R->nshared; q++) {
        int hj = E->shop[R->soff + q];
        const ringhop *h = &E->hop[hj];
        link *l = &E->lk[h->link];
        l->st.bytes = eng_add_repeated(l->st.bytes, R->bytes, k);
        l->st.busy_s = eng_add_repeated(l->st.busy_s, h->occ, k);
        l->st.transfers += k;
        if (window)
            l->st.bytes_window = eng_add_repeated(l->st.bytes_window, R->bytes, k);
        double *c = &E->comm_it[(size_t)h->w * E->niter + g->iter];
        if (!h->multi)
            *c = eng_add_repeated(*c, h->occ, k);
        l->vend = g->vt + h->occ;
        l->vseq = g->vbase + (uint32_t)(hj - R->off);
        note_end(E, g->iter, l->vend);
    }
    /* a worker's several hops: step after step, in ring order, as the per-hop ring adds */
    for (long long i = 0; R->multi && i < k; i++)
        for (int q = 0; q < R->nshared; q++) {
            const ringhop *h = &E->hop[E->shop[R->soff + q]];
            if (h->multi)
                E->comm_it[(size_t)h->w * E->niter + g->iter] += h->occ;
        }
}

int eng_ring_independent(const eng *E, int gi)
{
    int c = E->rg[E->gr[gi].stage].cls;
    return E->vbs[c] < 0 || E->vbs[c] == gi;
}

void eng_ring_unbatch_all(eng *E)
{
    for (int s = 0; E->nvb > 0 && s < E->ns; s++)
        if (E->vbs[s] >= 0)
            eng_ring_unbatch(E, E->vbs[s]);
}

int eng_ring_step(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    ring *R = &E->rg[g->stage];
    if (E->vbs[R->cls] == gi)
        return ring_repeat(E, gi, t);
    if (E->vbs[R->cls] >= 0)  /* another all-reduce of its class: the same links */
        eng_ring_unbatch(E, E->vbs[R->cls]);
    if ((!R->ready || R->bytes != g->hop_bytes) && ring_ready(E, R, g))
        return -1;
    if (g->gsteps == 0)  /* the all-reduce's first step: private hops' link time defers */
        for (int j = 0; j < R->n; j++) {
            const ringhop *h = &E->hop[R->off + j];
            if (!h->priv)
                continue;
            wstate *ws = &E->ws[h->w];
            if (ws->ring_g == gi) {  /* another hop of the worker's */
                ws->ring_n++;
                ws->ring_mixed |= h->occ != ws->ring_occ;
                continue;
            }
            ws->ring_g = gi;
            ws->ring_base = 0;
            ws->ring_occ = h->occ;
            ws->ring_n = 1;
            ws->ring_mixed = 0;
        }
    g->gsteps++;
    E->r->ring_steps_grouped++;
    /* sequence numbers for the hops' ends, in ring order, and one after them for the
     * grouped end: the per-hop ring posts its hops' ends one after another here */
    uint32_t base = E->h.seq;
    E->h.seq += (uint32_t)R->n + 1;
    int fold = R->priv;
    double end = R->priv ? t + R->maxocc : -INFINITY;
    int all = E->m->record && !E->m->skip_ring_hops, n = all ? R->n : R->nshared;
    /* repeatable (ring_repeat): no timeline, shared hops, every one virtual, none of
     * whose workers defers private link time */
    int again = !all && R->nshared > 0;
    R->vmaxocc = 0;
    for (int k = 0; k < n; k++) {  /* with a timeline every hop, in ring order */
        int hj = all ? R->off + k : E->shop[R->soff + k];
        const ringhop *h = &E->hop[hj];
        if (!h->priv) {
            if (E->ws[h->w].ring_g >= 0)
                again = 0;
            if (h->occ > R->vmaxocc)
                R->vmaxocc = h->occ;
        }
        if (h->priv) {
            int track = eng_link_track(E, h->link);
            if (track < 0)
                return eng_oom(E);
            if (eng_record(E, track, TL_ALLREDUCE, t, h->occ, R->bytes, g->stage, -1, -1,
                           g->iter))
                return -1;
            continue;
        }
        int v = vstart(E, gi, hj, t, base + (uint32_t)(hj - R->off));
        if (v < 0)
            return -1;
        if (v == 0) {
            again = 0;
            if (eng_hop_start(E, gi, h->link, h->w, R->bytes, h->width, t))
                return -1;
            continue;
        }
        fold = 1;
        if (E->lk[h->link].vend > end)
            end = E->lk[h->link].vend;
    }
    if (!fold)
        return 0;
    if (R->priv)
        note_end(E, g->iter, t + R->maxocc);
    g = &E->gr[gi];
    g->inflight = 1;
    g->pending++;
    if (again) {
        E->vbs[R->cls] = gi;
        E->nvb++;
        g->vb_k = 0;
        g->vt = t;
        g->vbase = base;
    }
    return heap_push_seq(&E->h, end, E->nw + gi, base + (uint32_t)R->n) ? eng_oom(E) : 0;
}

/* 1 when an event with key (t, seq) would run before every pending one. */
static int chain_next(eng *E, double t, uint32_t seq)
{
    return heap_before(&E->h, t, seq);
}

int eng_ring_chains(const eng *E, int gi)
{
    const group *g = &E->gr[gi];
    const ring *R = &E->rg[g->stage];
    return !E->nvb && !R->nshared && R->priv && R->ready && g->gsteps > 0 && g->pending == 1 &&
           g->step + 1 < g->steps && !(E->m->record && !E->m->skip_ring_hops);
}

int eng_ring_chain(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    const ring *R = &E->rg[g->stage];
    int steps = g->steps;
    g->pending = 0;
    for (;;) {
        /* hop_done: the step ended at t; the next one starts after the latency */
        double next = t + g->lat / g->K;
        g->step++;
        event s = {next == 0 ? 0.0 : next, E->h.seq++, E->nw + gi};
        if (!chain_next(E, s.t, s.seq))
            return heap_push_seq(&E->h, s.t, s.id, s.seq) ? eng_oom(E) : 0;
        /* the start event: eng_group_event and eng_ring_step of a ring of private hops */
        E->r->events++;
        E->now_t = s.t;
        E->now_seq = s.seq;
        g->gsteps++;
        E->r->ring_steps_grouped++;
        uint32_t base = E->h.seq;
        E->h.seq += (uint32_t)R->n + 1;
        double end = s.t + R->maxocc;
        note_end(E, g->iter, end);
        end = end == 0 ? 0.0 : end;
        if (g->step + 1 >= steps || !chain_next(E, end, base + (uint32_t)R->n)) {
            g->inflight = 1;  /* its end runs as an event (the bucket's last: hop_done) */
            g->pending = 1;
            return heap_push_seq(&E->h, end, E->nw + gi, base + (uint32_t)R->n) ? eng_oom(E)
                                                                                 : 0;
        }
        /* the grouped end event */
        E->r->events++;
        E->now_t = end;
        E->now_seq = base + (uint32_t)R->n;
        t = end;
    }
}

void eng_ring_flush(eng *E, int w)
{
    wstate *ws = &E->ws[w];
    const group *g = &E->gr[ws->ring_g];
    double *c = &E->comm_it[(size_t)w * E->niter + g->iter];
    long long k = g->gsteps - ws->ring_base;
    if (!ws->ring_mixed) {  /* one hop, or hops of one link time: the same addition */
        *c = eng_add_repeated(*c, ws->ring_occ, k * ws->ring_n);
    } else {  /* step after step, its hops in ring order, as the per-hop ring adds them */
        const ring *R = &E->rg[g->stage];
        for (; k > 0; k--)
            for (int j = 0; j < R->n; j++) {
                const ringhop *h = &E->hop[R->off + j];
                if (h->priv && h->w == w)
                    *c += h->occ;
            }
    }
    ws->ring_base = g->gsteps;
}

void eng_ring_finish(eng *E, int gi)
{
    const group *g = &E->gr[gi];
    const ring *R = &E->rg[g->stage];
    int window = g->iter >= E->k0 && g->iter <= E->k1;
    for (int j = 0; j < R->n; j++) {
        const ringhop *h = &E->hop[R->off + j];
        if (!h->priv)
            continue;
        if (E->ws[h->w].ring_g == gi) {  /* the worker's first hop: all of its time */
            eng_ring_flush(E, h->w);
            E->ws[h->w].ring_g = -1;
        }
        sim_link_stat *st = &E->lk[h->link].st;
        st->bytes = eng_add_repeated(st->bytes, R->bytes, g->gsteps);
        st->busy_s = eng_add_repeated(st->busy_s, h->occ, g->gsteps);
        st->transfers += g->gsteps;
        if (window)
            st->bytes_window = eng_add_repeated(st->bytes_window, R->bytes, g->gsteps);
    }
}
