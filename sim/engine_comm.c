/* engine_comm.c: the engine's communication: directed links and egress ports (created on
 * first use, with the path's rate, latency and port lanes), channels that match each RECV
 * with its SEND, transfer records (recycled once received and off their link), and the
 * replicas' ring all-reduce with its bucketed overlap, whose hops are transfers on the same
 * links and egress ports as the point-to-point ones (docs/sim.md, "Cost model"); the
 * engine runs the steps grouped instead, a hop as a transfer only when it may wait or
 * delay something (engine_ring.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/engine_impl.h"
#include "sim/sim.h"

/* --- links, ports, channels ------------------------------------------------------------- */

int eng_path_ports(const sim_net *n, int a, int L, int *lv, uint64_t *grp)
{
    /* level 0 alone inside a server, else levels 1..L; the port of level l belongs to the
     * sender's level-(l-1) group, for level 0 the device itself */
    int k = 0;
    for (int l = L == 0 ? 0 : 1; l <= L; l++) {
        lv[k] = l;
        grp[k++] = (uint64_t)(l ? a / n->gsize[l - 1] : a);
    }
    return k;
}

int eng_link_of(eng *E, int a_dev, int b_dev)
{
    int li = ht_find(&E->lh, (uint64_t)(uint32_t)a_dev, (uint64_t)(uint32_t)b_dev);
    if (li >= 0)
        return li;
    if (eng_grow_lines((void **)&E->lk, E->nlk, &E->caplk, sizeof *E->lk))
        return -1;
    const sim_net *n = &E->m->net;
    li = E->nlk++;
    link *l = &E->lk[li];
    memset(l, 0, sizeof *l);
    l->head = l->tail = l->track = l->vg = -1;
    int L = sim_net_path(n, a_dev, b_dev, &l->rate, &l->lat);
    if (!(l->rate >= CLUSTER_MIN_BANDWIDTH_Bps) || !(l->lat >= 0) || !isfinite(l->lat)) {
        err_set(E->err, NULL, NULL, "the path from device %d to device %d (level %d) has %g "
                "bytes/s and %g s latency: its transfers never complete", a_dev, b_dev, L,
                l->rate, l->lat);
        return -2;
    }
    l->st.src = a_dev;
    l->st.dst = b_dev;
    l->st.level = L;
    if (ht_put(&E->lh, (uint64_t)(uint32_t)a_dev, (uint64_t)(uint32_t)b_dev, li))
        return -1;
    int lv[CLUSTER_MAX_LEVELS];
    uint64_t grp[CLUSTER_MAX_LEVELS];
    int np = eng_path_ports(n, a_dev, L, lv, grp);
    for (int i = 0; i < np; i++) {
        int pi = ht_find(&E->ph, (uint64_t)lv[i], grp[i]);
        if (pi < 0) {
            if (eng_grow_lines((void **)&E->pt, E->npt, &E->cappt, sizeof *E->pt))
                return -1;
            pi = E->npt++;
            port *p = &E->pt[pi];
            p->lanes = sim_net_lanes(n, lv[i]);
            p->busy = 0;
            p->whead = p->wtail = p->vhead = -1;
            p->nvirt = p->nq = 0;
            if (ht_put(&E->ph, (uint64_t)lv[i], grp[i], pi))
                return -1;
        }
        E->lk[li].ports[E->lk[li].nports++] = pi;
    }
    /* a point-to-point transfer leaving the server with tp > 1: its ranks' own lanes
     * (sim_model.p2p_lanes, sim_net_p2p_lanes), a port keyed by the sending device past
     * the levels' keys (the group's sends to either neighbour share it, other groups'
     * never), and its rate where its ranks outnumber them */
    E->lk[li].np2p = np;
    E->lk[li].pw = 1;
    E->lk[li].prate = E->lk[li].rate;
    if (E->m->p2p_lanes > 1 && L >= 1) {
        int own;
        double share;
        int w = sim_net_p2p_lanes(n, a_dev, E->m->p2p_lanes, &own, &share);
        if (own > 65535) { /* port.qw's range */
            share *= w > 65535 ? w / 65535.0 : 1;
            own = 65535;
            w = w < own ? w : own;
        }
        uint64_t key = (uint64_t)CLUSTER_MAX_LEVELS;
        int pi = ht_find(&E->ph, key, (uint64_t)(uint32_t)a_dev);
        if (pi < 0) {
            if (eng_grow_lines((void **)&E->pt, E->npt, &E->cappt, sizeof *E->pt))
                return -1;
            pi = E->npt++;
            port *p = &E->pt[pi];
            p->lanes = own;
            p->busy = 0;
            p->whead = p->wtail = p->vhead = -1;
            p->nvirt = p->nq = 0;
            if (ht_put(&E->ph, key, (uint64_t)(uint32_t)a_dev, pi))
                return -1;
        }
        link *lp = &E->lk[li];
        lp->ports[np] = pi;
        lp->np2p = np + 1;
        lp->pw = w;
        if (share > 1)
            lp->prate = lp->rate / share;
    }
    return li;
}

int eng_link_track(eng *E, int li)
{
    link *l = &E->lk[li];
    if (l->track < 0) {
        char nm[96];
        snprintf(nm, sizeof nm, "link %d->%d (level %d)", l->st.src, l->st.dst, l->st.level);
        l->track = timeline_track(E->r->tl, TL_TRACK_LINK, l->st.src, l->st.dst, nm);
    }
    return l->track;
}

/* The channel src -> dst in direction fwd (created empty when new), or -1 (memory). */
static int chan_of(eng *E, int src, int dst, int fwd)
{
    int ci = ht_find(&E->chh, pair(src, dst), (uint64_t)fwd);
    if (ci >= 0)
        return ci;
    if (eng_grow((void **)&E->ch, E->nch, &E->capch, sizeof *E->ch))
        return -1;
    ci = E->nch++;
    E->ch[ci] = (chan){-1, -1, -1};
    return ht_put(&E->chh, pair(src, dst), (uint64_t)fwd, ci) ? -1 : ci;
}

int eng_xfer_alloc(eng *E)
{
    int xi = E->xfree;
    if (xi >= 0) {
        E->xfree = E->x[xi].cnext;
        return xi;
    }
    if (eng_grow((void **)&E->x, E->nx, &E->capx, sizeof *E->x))
        return -1;
    return E->nx++;
}

static void xfer_release(eng *E, int xi)
{
    E->x[xi].cnext = E->xfree;
    E->xfree = xi;
}

/* Lanes of port i of link l (ports[i]) a point-to-point transfer holds: one of a shared
 * port, pw of its group's own (i == nports). */
static inline int p2p_lanes(const link *l, int i)
{
    return i < l->nports ? 1 : l->pw;
}

/* --- quiet transfers ----------------------------------------------------------------------
 *
 * About half the events of a chunked schedule (interleaved, zb-v, dualpipev) are transfers'
 * ends, and nearly every one of them does nothing but release its link and lanes: nothing
 * waits on them. A point-to-point transfer that starts with nothing queued behind it on its
 * link or at any of its ports therefore moves "quietly", as a ring's virtual hop does
 * (engine_ring.c): it holds its link and lanes, its end keeps the key (time, sequence
 * number reserved at its start) its event would have had, and no event is posted. The key
 * is kept in its link (vend, vseq) and in each of its ports (qend, qseq), so that a check
 * of a port reads no link. Whatever reads the link or a port first releases it there when
 * that key is at most the running event's (its end would have run by then): the link when
 * a transfer is queued on it (quiet_touch), a port when a transfer checks its lanes
 * (quiet_expire); when a transfer queues behind it while it moves (on its link, or at a
 * full port it holds), its end event is posted with the reserved key (quiet_post), so it
 * ends, and starts what waits, exactly where its own event would have. Its event is
 * counted at its start (and uncounted when posted after all), so the run's event count is
 * the same. Only runs whose rings have no shared hops use it (E->quiet): only a transfer
 * start and a queueing read a port's lanes then, and the repeated ring steps' bookkeeping
 * (which runs before every event a transfer's end could touch) is never needed. */

static int quiet_past(const eng *E, double end, uint32_t seq)
{
    return end < E->now_t || (end == E->now_t && seq <= E->now_seq);
}

/* Transfer xi, just started on link li, ends at `end` quietly (above). Its record is off
 * the link from now on (done: recycled once received); the link keeps what its end needs. */
static void quiet_hold(eng *E, int li, int xi, double end)
{
    link *l = &E->lk[li];
    E->x[xi].done = 1;
    l->vg = VG_QUIET;
    l->vh = -1;
    l->vend = end;
    l->vseq = E->h.seq++;
    for (int i = 0; i < l->np2p; i++) {
        port *p = &E->pt[l->ports[i]];
        p->qw[p->nq] = (unsigned short)p2p_lanes(l, i);
        p->qlink[p->nq] = li;
        p->qend[p->nq] = end;
        p->qseq[p->nq++] = l->vseq;
    }
    E->r->events++;
    E->r->xfers_quiet++;
}

/* Removes entry k of port p's quiet transfers. */
static void quiet_drop(port *p, int k)
{
    int n = --p->nq;
    p->qlink[k] = p->qlink[n];
    p->qw[k] = p->qw[n];
    p->qend[k] = p->qend[n];
    p->qseq[k] = p->qseq[n];
}

/* Releases the lanes of port pi held by quiet transfers that have ended. */
static void quiet_expire(eng *E, int pi)
{
    port *p = &E->pt[pi];
    for (int k = 0; k < p->nq;)
        if (quiet_past(E, p->qend[k], p->qseq[k])) {
            p->busy -= p->qw[k];
            quiet_drop(p, k);
        } else {
            k++;
        }
}

/* Link li's quiet transfer, still moving, posts its end event with its reserved key: a
 * transfer record of its own for the end (the transfer's record went with the data to its
 * receiver), which holds the link and lanes until that event. 0 or -1. */
static int quiet_post(eng *E, int li)
{
    int yi = eng_xfer_alloc(E);
    if (yi < 0)
        return eng_oom(E);
    link *l = &E->lk[li];
    E->x[yi] = (xfer){.arrival = l->vend, .group = -1, .link = li, .waiter = -1, .lnext = -1,
                      .pnext = -1, .cnext = -1, .received = 1};
    for (int i = 0; i < l->np2p; i++) {
        port *p = &E->pt[l->ports[i]];
        for (int k = 0; k < p->nq; k++)
            if (p->qlink[k] == li) {
                quiet_drop(p, k);
                break;
            }
    }
    l->vg = -1;
    E->r->events--;  /* counted at its start: its event counts when it runs */
    E->r->xfers_quiet_split++;
    return heap_push_seq(&E->h, l->vend, -(yi + 1), l->vseq) ? eng_oom(E) : 0;
}

/* A transfer queues at port pi, full: its quiet transfers (all still moving after
 * quiet_expire) post their end events. 0 or -1. */
static int quiet_post_port(eng *E, int pi)
{
    while (E->pt[pi].nq > 0)
        if (quiet_post(E, E->pt[pi].qlink[0]))
            return -1;
    return 0;
}

/* Before a transfer is queued on link li, which a quiet transfer holds: when its end has
 * passed, the link is free (its lanes are released by its ports' next check); else it
 * posts its end event. 0 or -1. */
static int quiet_touch(eng *E, int li)
{
    link *l = &E->lk[li];
    if (!quiet_past(E, l->vend, l->vseq))
        return quiet_post(E, li);
    l->vg = -1;
    l->busy = 0;
    return 0;
}

/* --- transfers --------------------------------------------------------------------------- */

/* Queues transfer xi in port pi's wait queue: at its head when front (a wide ring hop's
 * remaining lanes, first in the queue already), else at its tail. */
static void port_wait(eng *E, int pi, int xi, int front)
{
    port *p = &E->pt[pi];
    if (front && p->whead >= 0) {
        E->x[xi].pnext = p->whead;
        p->whead = xi;
        return;
    }
    E->x[xi].pnext = -1;
    if (p->wtail >= 0)
        E->x[p->wtail].pnext = xi;
    else
        p->whead = xi;
    p->wtail = xi;
}

/* A wide ring hop xi (the head of its idle link) finds only k (0 < k <= its wide) lanes
 * free on its ports: its per-lane shares are independent, as a collective library's
 * channels each leaving on its own NIC, so k of them start now as a piece of the hop (a
 * transfer of its own, k lanes wide, of their bytes, at k times the link's rate) and the
 * rest stay with xi, which waits at port pi for the next lane (at the queue's head when
 * front: it was first there already). The hop's step counts the piece as one more pending
 * hop. Returns the piece's index, or -1 when out of memory. */
static int hop_piece(eng *E, int xi, int k, int pi, int front)
{
    int yi = eng_xfer_alloc(E);
    if (yi < 0)
        return eng_oom(E);
    xfer *x = &E->x[xi], *y = &E->x[yi];
    double share = x->bytes / (x->wide + 1);
    *y = *x;
    y->bytes = share * k;
    y->wide = k - 1;
    y->piece = 1;
    x->piece = 2;
    y->lnext = y->pnext = y->cnext = -1;
    x->bytes -= y->bytes;
    x->wide -= k;
    E->gr[x->group].pending++;
    port_wait(E, pi, xi, front);
    return yi;
}

/* Starts transfer xi (the head of its idle link) at t when every egress port it needs has
 * a free lane for each lane it takes; otherwise queues it at the first full port (at the
 * queue's head when that is port from, whose queue it has just left as first; from -1:
 * none). A wide ring hop with fewer lanes free than it takes, but some, starts a piece on
 * those (hop_piece) and waits with the rest. 0, or -1 when out of memory. */
static int xfer_try_start(eng *E, int xi, double t, int from)
{
    link *l = &E->lk[E->x[xi].link];
    /* k: the lanes it can take now; a point-to-point transfer takes its ranks' lanes
     * (one of each shared port, link.pw of its group's own) on every port or waits */
    int p2p = E->x[xi].group < 0, k = E->x[xi].wide + 1, full = -1;
    int nports = p2p ? l->np2p : l->nports;
    for (int i = 0; i < nports; i++) {
        port *p = &E->pt[l->ports[i]];
        if (p->nvirt)
            eng_vport_expire(E, l->ports[i]);
        if (p->nq)
            quiet_expire(E, l->ports[i]);
        int freel = p->lanes - p->busy;
        if (p2p ? freel < p2p_lanes(l, i) : freel < k)
            k = p2p || freel <= 0 ? 0 : freel, full = i;
        if (k == 0)
            break;
    }
    if (k < E->x[xi].wide + 1) {
        int pi = l->ports[full];
        if (E->pt[pi].nvirt && eng_vport_materialize(E, pi))
            return -1;
        if (E->pt[pi].nq && quiet_post_port(E, pi))
            return -1;
        if (k == 0) {
            port_wait(E, pi, xi, pi == from);
            return 0;
        }
        int yi = hop_piece(E, xi, k, pi, pi == from);
        if (yi < 0)
            return -1;
        xi = yi;
    }
    xfer *x = &E->x[xi];
    if (x->piece != 1) {
        l->head = x->lnext;
        if (l->head < 0)
            l->tail = -1;
        l->busy = 1;
    }
    /* its lanes taken; it may move quietly (a point-to-point transfer, nothing queued
     * behind it on l, at each of its ports no waiter and room for its key) */
    int quiet = E->quiet && x->a && l->head < 0;
    for (int i = 0; i < nports; i++) {
        port *p = &E->pt[l->ports[i]];
        p->busy += p2p ? p2p_lanes(l, i) : 1 + x->wide;
        quiet &= p->whead < 0 && p->nq != PORT_QUIET;
    }
    double occ = x->bytes / (p2p ? l->prate : x->wide ? l->rate * (x->wide + 1) : l->rate),
           end = t + occ;
    /* a piece's link time is its share of the hop's (its lanes' part); the hop's last
     * piece, the transfer record that holds the link, counts the transfer */
    double lt = x->piece ? occ * (x->bytes / E->gr[x->group].hop_bytes) : occ;
    x->arrival = x->a ? end + l->lat : end;  /* a ring's latency counts per bucket */
    if (quiet)
        quiet_hold(E, x->link, xi, end);
    else if (heap_push(&E->h, end, -(xi + 1)))
        return eng_oom(E);
    if (x->waiter >= 0 && heap_push(&E->h, x->arrival, x->waiter))
        return eng_oom(E);
    l->st.bytes += x->bytes;
    l->st.busy_s += lt;
    l->st.transfers += x->piece != 1;
    if (x->iter >= E->k0 && x->iter <= E->k1)
        l->st.bytes_window += x->bytes;
    if (E->ws[x->src_w].ring_g >= 0)  /* its grouped ring steps' link time first */
        eng_ring_flush(E, x->src_w);
    E->comm_it[(size_t)x->src_w * E->niter + x->iter] += lt;
    note_end(E, x->iter, x->arrival);
    if (x->a && E->m->p2p_sync && eng_sync_started(E, xi))
        return -1;
    if (E->m->record && !(x->a == NULL && E->m->skip_ring_hops)) {
        if (eng_link_track(E, x->link) < 0)
            return eng_oom(E);
        if (!x->a)
            return eng_record(E, l->track, TL_ALLREDUCE, t, occ, x->bytes,
                              E->gr[x->group].stage, -1, -1, x->iter);
        return eng_record(E, l->track, tl_of_act(x->a->kind), t, occ, x->bytes, x->a->stage,
                      x->a->peer_stage, x->a->microbatch, x->iter);
    }
    return 0;
}

/* Queues transfer xi at the tail of link li at t (a virtual ring hop holding li becomes a
 * transfer first) and starts it when the link is free. 0, or -1 when out of memory. */
int eng_xfer_enqueue(eng *E, int xi, int li, double t)
{
    if (E->lk[li].vg >= 0 && eng_vlink_touch(E, li))
        return -1;
    if (E->lk[li].vg == VG_QUIET && quiet_touch(E, li))
        return -1;
    link *l = &E->lk[li];
    if (l->tail >= 0)
        E->x[l->tail].lnext = xi;
    else
        l->head = xi;
    l->tail = xi;
    if (!l->busy && l->head == xi)
        return xfer_try_start(E, xi, t, -1);
    return 0;
}

static int hop_done(eng *E, int gi, double t);

int eng_xfer_done(eng *E, int xi, double t)
{
    link *l = &E->lk[E->x[xi].link];
    int gi = E->x[xi].group, piece = E->x[xi].piece == 1;
    int nports = gi < 0 ? l->np2p : l->nports;
    for (int i = 0; i < nports; i++)  /* a point-to-point transfer's: its ranks' lanes */
        E->pt[l->ports[i]].busy -= gi < 0 ? p2p_lanes(l, i) : 1 + E->x[xi].wide;
    if (!piece)  /* a piece never held the link: its hop's rest is still the link's head */
        l->busy = 0;
    E->x[xi].done = 1;
    if (E->x[xi].received)
        xfer_release(E, xi);
    /* waiters of the freed ports first (FIFO; a wide hop takes what lanes are free and
     * stays first with the rest), then the next transfer on this link */
    for (int i = 0; i < nports; i++) {
        port *p = &E->pt[l->ports[i]];
        while (p->whead >= 0 && p->busy < p->lanes) {
            int y = p->whead;
            p->whead = E->x[y].pnext;
            if (p->whead < 0)
                p->wtail = -1;
            if (xfer_try_start(E, y, t, l->ports[i]))
                return -1;
            if (p->whead == y)  /* back first: too few lanes free for it */
                break;
        }
    }
    if (!piece && !l->busy && l->head >= 0 && xfer_try_start(E, l->head, t, -1))
        return -1;
    return gi >= 0 ? hop_done(E, gi, t) : 0;
}

/* SEND at t by worker w (action index c): a transfer record, queued on its channel (waking
 * a receiver that waits there) and on its link. */
int eng_send(eng *E, int w, int c, int iter, double t)
{
    const action *a = &E->s->acts[w][c];
    wstate *ws = &E->ws[w];
    int fwd = a->kind == ACT_SEND_F;
    if ((unsigned)a->peer >= (unsigned)E->nw || (unsigned)a->peer_stage >= (unsigned)E->ns)
        return eng_bad_action(E, w, c, "peer worker or stage out of range");
    int xi = eng_xfer_alloc(E);
    if (xi < 0)
        return eng_oom(E);
    int k = 2 * fwd + (a->peer > w); /* the cached link and channel of this way */
    if (a->peer != ws->speer[k]) {
        int d0 = E->m->worker_device[w], d1 = E->m->worker_device[a->peer];
        ws->link[k] = d0 == d1 ? -1 : eng_link_of(E, d0, d1);
        if (d0 != d1 && ws->link[k] < 0)
            return ws->link[k] == -2 ? -1 : eng_oom(E);
        ws->port[k] = d0 == d1 ? 0 : E->lk[ws->link[k]].ports[0];
        if ((ws->schan[k] = chan_of(E, w, a->peer, fwd)) < 0)
            return eng_oom(E);
        ws->speer[k] = a->peer;
    }
    if (ws->link[k] >= 0) {  /* read below, long out of cache: fetched meanwhile */
        __builtin_prefetch(&E->lk[ws->link[k]]);
        __builtin_prefetch(&E->pt[ws->port[k]]);
    }
    int lo = a->stage < a->peer_stage ? a->stage : a->peer_stage;
    xfer *x = &E->x[xi];
    *x = (xfer){.bytes = E->m->cut_bytes[lo], .arrival = -1, .a = a,
                .match = xfer_match(a->microbatch, a->stage, a->peer_stage), .link = ws->link[k],
                .group = -1, .waiter = -1, .lnext = -1, .pnext = -1, .cnext = -1, .iter = iter,
                .src_w = w};
    chan *ch = &E->ch[ws->schan[k]];
    if (ch->tail >= 0)
        E->x[ch->tail].cnext = xi;
    else
        ch->head = xi;
    ch->tail = xi;
    if (ch->blocked >= 0) {
        if (heap_push(&E->h, t, ch->blocked))
            return eng_oom(E);
        ch->blocked = -1;
    }
    if (x->link < 0) {  /* same device: nothing moves */
        x->arrival = t;
        x->done = 1;
        return 0;
    }
    if (E->m->p2p_sync)
        return eng_sync_send(E, w, xi, x->link, t);
    return eng_xfer_enqueue(E, xi, x->link, t);
}

/* The data of the RECV at action c of worker w, which its consumer at t needs: the
 * matching transfer from its channel. Returns 0 when it has arrived, 1 when it is taken
 * and the worker waits for its arrival (an event wakes it), 2 when it is not sent yet (the
 * send wakes the worker), -1 on error. */
int eng_recv(eng *E, int w, int c, double t)
{
    const action *a = &E->s->acts[w][c];
    wstate *ws = &E->ws[w];
    int fwd = a->kind == ACT_RECV_F;
    int k = 2 * fwd + (a->peer > w); /* the cached channel of this way */
    if (a->peer != ws->rpeer[k]) {
        if ((ws->rchan[k] = chan_of(E, a->peer, w, fwd)) < 0)
            return eng_oom(E);
        ws->rpeer[k] = a->peer;
    }
    chan *ch = &E->ch[ws->rchan[k]];
    int prev = -1, xi = ch->head;
    uint64_t want = xfer_match(a->microbatch, a->peer_stage, a->stage);
    while (xi >= 0 && E->x[xi].match != want) {
        prev = xi;
        xi = E->x[xi].cnext;
    }
    if (xi < 0) {  /* not sent yet */
        ch->blocked = w;
        return 2;
    }
    xfer *x = &E->x[xi];
    if (prev < 0)
        ch->head = x->cnext;
    else
        E->x[prev].cnext = x->cnext;
    if (ch->tail == xi)
        ch->tail = prev;
    x->received = 1;
    if (x->arrival < 0) {  /* queued on its link: its start posts our wake-up */
        x->waiter = w;
        return 1;
    }
    double arr = x->arrival;
    if (x->done)
        xfer_release(E, xi);
    if (arr > t)
        return heap_push(&E->h, arr, w) ? eng_oom(E) : 1;
    return 0;
}

/* --- all-reduce ---------------------------------------------------------------------------- */

int eng_ring_cp(const sim_model *m, const schedule *sc, int s)
{
    int r = sc->replicas[s];
    if (r < 1 || !m->ring_members || !m->ring_devices || s >= m->ring_nstages ||
        !m->ring_devices[s])
        return 0;
    int n = m->ring_members[s];
    return n > r && n % r == 0 ? n / r : 0;
}

int eng_ring_solo(const sim_model *m, const schedule *sc, int s)
{
    return sc->replicas[s] == 1 && eng_ring_cp(m, sc, s) > 0;
}

int eng_ring_moves(const eng *E, int s)
{
    return (E->s->replicas[s] > 1 || eng_ring_solo(E->m, E->s, s)) && E->m->grad_bytes[s] > 0 &&
           E->m->allreduce_s[s] > 0;
}

int eng_ring_nhops(const eng *E, int s)
{
    return eng_ring_cp(E->m, E->s, s) ? E->m->ring_members[s] : E->s->replicas[s];
}

void eng_ring_hop(const eng *E, int s, int j, int *w, int *da, int *db)
{
    const schedule *sc = E->s;
    const int *sw = &sc->stage_workers[sc->stage_first[s]];
    int cp = eng_ring_cp(E->m, sc, s);
    if (cp) { /* the members' ring: member j is replica j / cp's context rank j % cp */
        const int *d = E->m->ring_devices[s];
        int n = E->m->ring_members[s];
        *w = sw[j / cp];
        *da = d[j];
        *db = d[(j + 1) % n];
        return;
    }
    int r = sc->replicas[s];
    *w = sw[j];
    *da = E->m->worker_device[sw[j]];
    *db = E->m->worker_device[sw[(j + 1) % r]];
}

/* The bytes a group of stage s moves in each hop over its buckets: the gradients (phase
 * 0), the reduce-scatter's share (1) or the parameters (2). */
static double group_bytes(const sim_model *m, int s, int phase)
{
    return phase == 0 ? m->grad_bytes[s]
           : phase == 1 ? 2 * m->grad_bytes[s] - m->gather_bytes[s] : m->gather_bytes[s];
}

/* A new group of stage s's ring (phase 0 or 1: as the stage's all-reduce asks; 2: a
 * parameter all-gather), not yet in the table: its index, -1 when out of memory. */
static int group_new(eng *E, int s, int iter, int phase)
{
    int need = E->s->replicas[s] > 0 ? E->s->replicas[s] : 1;
    if (eng_grow((void **)&E->gr, E->ngr, &E->capgr, sizeof *E->gr))
        return -1;
    while (E->ngmem + need > E->capgmem) {
        int cap = E->capgmem;
        if (eng_grow((void **)&E->gmem, E->capgmem, &cap, sizeof *E->gmem))
            return -1;
        double *a = realloc(E->gst, (size_t)cap * sizeof *a);
        if (a)
            E->gst = a;
        double *b = a ? realloc(E->gdu, (size_t)cap * sizeof *b) : NULL;
        if (b)
            E->gdu = b;
        if (!a || !b)
            return -1;
        E->capgmem = cap;
    }
    int gi = E->ngr++, comm = eng_ring_moves(E, s);
    double kb = ceil(E->m->grad_bytes[s] / SIM_BUCKET_BYTES);
    int K = kb < 1 ? 1 : kb > 4096 ? 4096 : (int)kb;
    const double *gb = E->m->gather_bytes;
    if (phase == 0 && comm && gb && gb[s] > 0)
        phase = 1;
    /* the one ring moves grad_bytes per bucket and hop in 2 (r - 1) steps; split, the
     * reduce-scatter moves the gradients' share and the all-gather the parameters' */
    double bytes = group_bytes(E->m, s, phase);
    /* with context parallelism the ring has more members than the stage has replicas
     * (sim_model.ring_members): its steps and per-hop bytes are that ring's */
    const int *rm = E->m->ring_members;
    int N = rm && rm[s] > need ? rm[s] : need;
    E->gr[gi] = (group){.stage = s, .need = need, .mem_off = E->ngmem, .iter = iter,
                        .comm = comm, .K = K, .steps = (phase ? 1 : 2) * (N - 1),
                        .phase = phase, .ag = -1, .bend_off = -1,
                        .hop_bytes = bytes / K / N, .maxreach = -INFINITY, .start = -1};
    E->ngmem += need;
    if (phase == 2) {
        while (E->nbend + K > E->capbend)
            if (eng_grow((void **)&E->bend, E->capbend, &E->capbend, sizeof *E->bend))
                return -1;
        E->gr[gi].bend_off = E->nbend;
        E->nbend += K;
    }
    return gi;
}

/* The group of the occ-th all-reduce of stage s, created on first use; -1 when out of
 * memory. */
static int group_of(eng *E, int s, int occ, int iter)
{
    int gi = ht_find(&E->gh, (uint64_t)s, (uint64_t)occ);
    if (gi >= 0)
        return gi;
    gi = group_new(E, s, iter, 0);
    if (gi < 0)
        return -1;
    E->gr[gi].occ = occ;
    return ht_put(&E->gh, (uint64_t)s, (uint64_t)occ, gi) ? -1 : gi;
}

/* When bucket k of group g is ready: the gradient buckets become ready evenly through each
 * registered member's last backward, so the latest member decides. */
static double bucket_ready(const eng *E, const group *g, int k)
{
    double r = -INFINITY;
    for (int j = 0; j < g->nreg; j++) {
        double t = E->gst[g->mem_off + j] + E->gdu[g->mem_off + j] * (k + 1) / g->K;
        if (t > r)
            r = t;
    }
    return r;
}

/* Records group gi's span [start, fin) moving `bytes` on member mw's collective track. */
static int coll_record(eng *E, int gi, int mw, double bytes)
{
    const group *g = &E->gr[gi];
    if (E->coll_track[mw] < 0) {
        char nm[96];
        snprintf(nm, sizeof nm, "device %d all-reduce", E->m->worker_device[mw]);
        E->coll_track[mw] = timeline_track(E->r->tl, TL_TRACK_COLLECTIVE,
                                           E->m->worker_device[mw], -1, nm);
        if (E->coll_track[mw] < 0)
            return eng_oom(E);
    }
    return eng_record(E, E->coll_track[mw], TL_ALLREDUCE, g->start, g->fin - g->start, bytes,
                      g->stage, -1, -1, g->iter);
}

/* The first replica's worker of stage s: the stages it holds are a pipeline rank's. */
static int rank_worker(const eng *E, int s)
{
    return E->s->stage_workers[E->s->stage_first[s]];
}

/* The split reduce-scatter group of stage s's occ-th all-reduce, or -1 (none yet, or the
 * stage's ring is not split). */
static int split_group(const eng *E, int s, int occ)
{
    int gi = ht_find(&E->gh, (uint64_t)s, (uint64_t)occ);
    return gi >= 0 && E->gr[gi].phase == 1 ? gi : -1;
}

/* The next stage after s (-1: none) on s's pipeline rank whose ring is split. */
static int next_split_stage(const eng *E, int s)
{
    const double *gb = E->m->gather_bytes;
    for (int k = s + 1; k < E->ns; k++)
        if (rank_worker(E, k) == rank_worker(E, s) && gb[k] > 0 && eng_ring_moves(E, k))
            return k;
    return -1;
}

/* Starts the parameter all-gather of reduce-scatter group gi at t: its buckets back to
 * back, the stage's first layers first. */
static int gather_start(eng *E, int gi, double t)
{
    int ai = group_new(E, E->gr[gi].stage, E->gr[gi].iter, 2);
    if (ai < 0)
        return eng_oom(E);
    group *g = &E->gr[gi], *a = &E->gr[ai];
    for (int j = 0; j < a->need; j++) {
        E->gmem[a->mem_off + j] = E->gmem[g->mem_off + j];
        E->gst[a->mem_off + j] = t;
        E->gdu[a->mem_off + j] = 0;
    }
    a->nreg = a->need;
    a->ag = gi;
    a->occ = g->occ;
    g->ag = ai;
    return heap_push(&E->h, t, E->nw + ai) ? eng_oom(E) : 0;
}

/* Reduce-scatter group gi released its members at t. As Megatron-Core's distributed
 * optimizer: once every split stage of its pipeline rank has reduced its gradients and
 * stepped (each member's step taken right after the reduce-scatter, as the lowering places
 * it; the slowest member's end), the all-gathers run one stage after another, the rank's
 * first stage (the first layers) first, each when the one before has ended. */
static int gather_ready(eng *E, int gi, double t)
{
    const sim_model *m = E->m;
    group *g = &E->gr[gi];
    int s = g->stage;
    double at = t;
    for (int j = 0; j < g->need; j++) {
        int mw = E->gmem[g->mem_off + j];
        double d = m->act_s[(size_t)s * SIM_NC + SIM_C_STEP] * m->worker_scale[mw];
        if (m->worker_mem_Bps[mw] > 0)
            d += m->step_bytes[s] / m->worker_mem_Bps[mw];
        if (t + d > at)
            at = t + d;
    }
    g->released = 1;
    g->stepped = at;
    /* every split stage of the rank released and stepped: the latest step's end */
    int first = -1;
    for (int k = 0; k < E->ns; k++) {
        if (rank_worker(E, k) != rank_worker(E, s) || !(m->gather_bytes[k] > 0) ||
            !eng_ring_moves(E, k))
            continue;
        int gk = split_group(E, k, g->occ);
        if (gk < 0 || !E->gr[gk].released)
            return 0;  /* the last one to release starts the chain */
        if (E->gr[gk].stepped > at)
            at = E->gr[gk].stepped;
        if (first < 0)
            first = gk;
    }
    return first < 0 ? 0 : gather_start(E, first, at);
}

/* Releases the members of a finished group at t (all have arrived). */
static int group_release(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    note_end(E, g->iter, t);
    for (int j = 0; j < g->need; j++) {
        int mw = E->gmem[g->mem_off + j];
        E->ws[mw].cursor++;
        if (heap_push(&E->h, t, mw))
            return eng_oom(E);
        if (g->comm && E->m->record &&
            coll_record(E, gi, mw, group_bytes(E->m, g->stage, g->phase)))
            return -1;
    }
    return g->phase == 1 ? gather_ready(E, gi, t) : 0;
}

/* All-gather group ai ended at t: its members whose forward waits for it go on, and the
 * next split stage of the pipeline rank starts its all-gather. */
static int gather_done(eng *E, int ai, double t)
{
    const group *a = &E->gr[ai];
    for (int j = 0; j < a->need; j++) {
        int mw = E->gmem[a->mem_off + j];
        if (E->m->record && coll_record(E, ai, mw, group_bytes(E->m, a->stage, 2)))
            return -1;
        if (E->ws[mw].pg_g == a->ag + 1 && heap_push(&E->h, t, mw))
            return eng_oom(E);
    }
    int k = next_split_stage(E, a->stage), occ = a->occ;
    int gk = k >= 0 ? split_group(E, k, occ) : -1;
    return gk >= 0 ? gather_start(E, gk, t) : 0;
}

int eng_gather_wait(eng *E, int w, int s, double t, double dur, double *start)
{
    wstate *ws = &E->ws[w];
    int occ = E->ar_occ[(size_t)w * E->ns + s];
    int gi = occ > 0 ? ht_find(&E->gh, (uint64_t)s, (uint64_t)(occ - 1)) : -1;
    *start = t;
    if (gi < 0 || E->gr[gi].phase != 1)
        return 0;  /* the first iteration's parameters, or a ring that moves nothing */
    double ready = ws->pg_g == gi + 1 ? ws->pg_t : t;
    ws->pg_g = gi + 1;
    ws->pg_t = ready;
    const group *g = &E->gr[gi];
    if (g->ag < 0 || !E->gr[g->ag].done)
        return 1;  /* gather_done wakes it */
    const group *a = &E->gr[g->ag];
    double end = ready + dur, st = ready;
    if (ready < a->fin)
        for (int k = 0; k < a->K; k++) {
            double e = E->bend[a->bend_off + k] + dur * (a->K - k) / a->K;
            if (e > end)
                end = e;
        }
    if (end > ready + dur)
        st = end - dur;
    if (st > t)
        return heap_push(&E->h, st, w) ? eng_oom(E) : 1;
    ws->pg_g = 0;
    *start = st;
    return 0;
}

/* Registers worker w (its backward of stage s from st for du) in group gi; the last
 * member to register sets the first bucket going. */
static int group_register(eng *E, int gi, double st, double du)
{
    group *g = &E->gr[gi];
    E->gst[g->mem_off + g->nreg] = st;
    E->gdu[g->mem_off + g->nreg] = du;
    if (++g->nreg < g->need || !g->comm)
        return 0;
    return heap_push(&E->h, bucket_ready(E, g, 0), E->nw + gi) ? eng_oom(E) : 0;
}

int eng_backward(eng *E, int w, int c, int s, double t, double dur)
{
    const schedule *sc = E->s;
    if (E->m->allreduce_s[s] <= 0 || E->m->grad_sync_end)  /* end: eng_allreduce registers */
        return 0;
    /* the last backward of s before its next ALLREDUCE? (a few actions ahead) */
    int last = 0;
    for (int i = c + 1; i < sc->len[w] && !last; i++) {
        const action *a = &sc->acts[w][i];
        if (a->stage != s)
            continue;
        if (a->kind == ACT_ALLREDUCE)
            last = 1;
        else if (a->kind == ACT_F || a->kind == ACT_B || a->kind == ACT_I || a->kind == ACT_W)
            return 0;
    }
    if (!last)
        return 0;
    size_t k = (size_t)w * E->ns + s;
    if (E->reg_occ[k] != E->ar_occ[k])
        return 0;  /* already registered */
    int gi = group_of(E, s, E->ar_occ[k], E->ws[w].iter);
    if (gi < 0)
        return eng_oom(E);
    E->reg_occ[k]++;
    return group_register(E, gi, t, dur);
}

int eng_hop_start(eng *E, int gi, int li, int src_w, double bytes, int width, double t)
{
    int xi = eng_xfer_alloc(E);
    if (xi < 0)
        return eng_oom(E);
    E->x[xi] = (xfer){.bytes = bytes, .arrival = -1, .a = NULL, .group = gi, .link = li,
                      .waiter = -1, .lnext = -1, .pnext = -1, .cnext = -1,
                      .iter = E->gr[gi].iter, .src_w = src_w, .received = 1,
                      .wide = width > 1 ? width - 1 : 0};
    E->gr[gi].pending++;
    return eng_xfer_enqueue(E, xi, li, t);
}

/* Starts the current step of the group's current bucket at t: a transfer of 1 / r of the
 * bucket on every hop of the ring (eng_ring_hop: the stage's replicas in placement order,
 * or with context parallelism every context rank of them, r = replicas x cp), each queued
 * on its link and egress ports like a point-to-point transfer. A bucket takes 2 (r - 1)
 * such steps (reduce-scatter, then all-gather), one after another. Unless the model asks
 * for per-hop rings, the step runs grouped (engine_ring.c): its private hops and the
 * shared ones that start at once end as one event, the slowest one's end, and this event
 * then ends their part of the step. */
int eng_group_event(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    int s = g->stage;
    if (g->inflight) {  /* the grouped hops' end: as their slowest one's would be */
        g->inflight = 0;
        if (E->rg && eng_ring_chains(E, gi))
            return eng_ring_chain(E, gi, t);
        return hop_done(E, gi, t);
    }
    int nh = eng_ring_nhops(E, s);
    if (g->start < 0) {
        g->start = t;
        for (int j = 0; j < nh; j++) {  /* the slowest hop's latency, once */
            int hw, a, b;
            eng_ring_hop(E, s, j, &hw, &a, &b);
            double rate, l;
            if (sim_net_path(&E->m->net, a, b, &rate, &l) >= 0 && l > g->lat)
                g->lat = l;
        }
    }
    double bytes = g->hop_bytes;
    g->pending = 1;  /* held until every hop is queued */
    if (E->rg && E->rg[s].n > 0) {
        if (eng_ring_step(E, gi, t))
            return -1;
        return hop_done(E, gi, t);  /* drops the hold */
    }
    for (int j = 0; j < nh; j++) {
        int a, da, db;
        eng_ring_hop(E, s, j, &a, &da, &db);
        if (da == db)
            continue;
        int li = eng_link_of(E, da, db);
        if (li < 0)
            return li == -2 ? -1 : eng_oom(E);
        if (eng_hop_start(E, gi, li, a, bytes, E->ringw ? E->ringw[E->ringoff[s] + j] : 1, t))
            return -1;
    }
    return hop_done(E, gi, t);  /* drops the hold */
}

/* A hop of group gi's current step left its link at t. The step ends when its last hop
 * does, plus the slowest hop's latency (over K: the ring's 2 (r - 1) latencies are paid
 * once per all-reduce, as in sim_net_allreduce_s); then the next step starts, or the next
 * bucket when it is ready, or the group finishes. */
static int hop_done(eng *E, int gi, double t)
{
    group *g = &E->gr[gi];
    if (--g->pending > 0)
        return 0;
    double end = t + g->lat / g->K;
    if (++g->step < g->steps)
        return heap_push(&E->h, end, E->nw + gi) ? eng_oom(E) : 0;
    g->step = 0;
    eng_ring_unbatch(E, gi);
    if (g->phase == 2)
        E->bend[g->bend_off + g->bucket] = end;
    if (++g->bucket < g->K) {
        double ready = bucket_ready(E, g, g->bucket);
        return heap_push(&E->h, ready > end ? ready : end, E->nw + gi) ? eng_oom(E) : 0;
    }
    g->done = 1;
    g->fin = end;
    if (E->rg && E->rg[g->stage].priv)
        eng_ring_finish(E, gi);
    note_end(E, g->iter, end);
    if (g->phase == 2)
        return gather_done(E, gi, end);
    if (g->count == g->need)
        return group_release(E, gi, end > g->maxreach ? end : g->maxreach);
    return 0;
}

int eng_allreduce(eng *E, int w, int c, int iter, double t)
{
    const action *a = &E->s->acts[w][c];
    int s = a->stage;
    size_t k = (size_t)w * E->ns + s;
    int occ = E->ar_occ[k]++;
    int gi = group_of(E, s, occ, iter);
    if (gi < 0)
        return eng_oom(E);
    group *g = &E->gr[gi];
    if (g->count >= g->need)
        return eng_bad_action(E, w, c, "more workers join this all-reduce than the stage has "
                          "replicas");
    if (E->reg_occ[k] == occ) {  /* no backward registered it: its buckets are ready now */
        E->reg_occ[k]++;
        if (group_register(E, gi, t, 0))
            return -1;
        g = &E->gr[gi];
    }
    E->gmem[g->mem_off + g->count++] = w;
    if (t > g->maxreach)
        g->maxreach = t;
    if (g->count < g->need)
        return 0;
    if (!g->comm) {
        g->start = g->fin = g->maxreach;
        return group_release(E, gi, g->maxreach);
    }
    if (g->done)
        return group_release(E, gi, g->fin > g->maxreach ? g->fin : g->maxreach);
    return 0;  /* the ring's last bucket releases the members */
}
