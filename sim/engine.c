/* engine.c: the discrete-event replay of a schedule IR on a priced model (engine.h).
 *
 * Events live in a binary min-heap ordered by (time, insertion number), so equal times run
 * in the order they were posted and a run is deterministic. Two event kinds: "worker w may
 * go on" (its compute finished, its data arrived, its all-reduce finished) and "transfer x
 * released its link and egress ports".
 *
 * The engine reads the IR in place and keeps state only for what is in flight, so a run
 * costs O(log heap) per event and its memory does not grow with the schedule's length:
 * a SEND creates a transfer record (recycled once it is received and off its link) and
 * queues it on its channel (sender, receiver, direction); a RECV takes the matching
 * transfer from its channel (the head, for IR that keeps each channel in order; otherwise
 * a search of the channel's few unreceived transfers) or waits for it; an ALLREDUCE joins
 * the group of the k-th all-reduce of its stage. Links, egress ports, channels and groups
 * are created on first use and looked up by hash. */
#include "sim/engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

/* --- a small open-addressing hash from (uint64, uint64) keys to ints ------------------- */

typedef struct hslot {
    uint64_t a, b;
    int v;           /* -1 = empty */
} hslot;

typedef struct htab {
    size_t cap, n;   /* cap: a power of two, kept at least 4 n */
    hslot *s;
} htab;

static int ht_init(htab *h, size_t n)
{
    size_t cap = 16;
    while (cap < 4 * n)
        cap *= 2;
    h->cap = cap;
    h->n = 0;
    h->s = malloc(cap * sizeof *h->s);
    if (!h->s)
        return -1;
    for (size_t i = 0; i < cap; i++)
        h->s[i].v = -1;
    return 0;
}

static void ht_free(htab *h)
{
    free(h->s);
    h->s = NULL;
}

static inline size_t ht_hash(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return (size_t)x;
}

static inline hslot *ht_slot(const htab *h, uint64_t a, uint64_t b)
{
    size_t i = ht_hash(a, b) & (h->cap - 1);
    while (h->s[i].v >= 0 && (h->s[i].a != a || h->s[i].b != b))
        i = (i + 1) & (h->cap - 1);
    return &h->s[i];
}

static int ht_find(const htab *h, uint64_t a, uint64_t b)
{
    return ht_slot(h, a, b)->v;
}

/* Inserts (a, b) -> v (the key must be absent), growing the table. 0 or -1 (memory). */
static int ht_put(htab *h, uint64_t a, uint64_t b, int v)
{
    if (4 * (h->n + 1) > h->cap) {
        htab g;
        if (ht_init(&g, 2 * (h->n + 1)))
            return -1;
        for (size_t i = 0; i < h->cap; i++)
            if (h->s[i].v >= 0)
                *ht_slot(&g, h->s[i].a, h->s[i].b) = h->s[i];
        g.n = h->n;
        ht_free(h);
        *h = g;
    }
    *ht_slot(h, a, b) = (hslot){a, b, v};
    h->n++;
    return 0;
}

static uint64_t pair(int x, int y)
{
    return (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
}

/* --- the event heap -------------------------------------------------------------------- */

typedef struct event {
    double t;
    uint32_t seq;
    int32_t id;      /* >= 0: worker id resumes; < 0: transfer -(id+1) releases resources */
} event;

typedef struct heap {
    event *a;
    size_t n, cap;
    uint32_t seq;
} heap;

static inline int ev_less(const event *x, const event *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int heap_push(heap *h, double t, int id)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 256;
        event *na = realloc(h->a, nc * sizeof *na);
        if (!na)
            return -1;
        h->a = na;
        h->cap = nc;
    }
    event e = {t, h->seq++, id};
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->a[p]))
            break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static event heap_pop(heap *h)
{
    event top = h->a[0], last = h->a[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_less(&h->a[c + 1], &h->a[c]))
            c++;
        if (!ev_less(&h->a[c], &last))
            break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (n)
        h->a[i] = last;
    return top;
}

/* --- engine state ---------------------------------------------------------------------- */

typedef struct xfer {
    double bytes, arrival;   /* arrival < 0 until it starts */
    const action *a;         /* its SEND */
    int link;                /* -1: both ends on one device */
    int waiter;              /* worker whose RECV took it before it started, or -1 */
    int lnext, pnext, cnext; /* link queue, port wait queue, channel list / free list */
    int iter, src_w;
    unsigned char received, done;
} xfer;

typedef struct link {
    int busy, head, tail, track, nports;
    int ports[CLUSTER_MAX_LEVELS];   /* egress ports it leaves through */
    double rate, lat;
    sim_link_stat st;
} link;

typedef struct port {
    int lanes, busy, whead, wtail;
} port;

typedef struct chan {        /* transfers from one worker to another in one direction */
    int head, tail;          /* issued, not yet received, in issue order */
    int blocked;             /* the receiver, waiting for a send here; or -1 */
} chan;

typedef struct group {       /* the k-th all-reduce of one stage among its replicas */
    int stage, need, count, mem_off, iter;
    double maxreach;
} group;

typedef struct wstate {      /* per worker */
    int cursor, iter, inflight;
    int lpeer, link;         /* the last peer sent to and its link */
    int speer[2], schan[2];  /* the last peer sent to per direction and the channel */
    int rpeer[2], rchan[2];  /* the last peer received from per direction and the channel */
    double cur_act;          /* stashed activation bytes now */
} wstate;

typedef struct eng {
    const sim_model *m;
    const schedule *s;
    sim_result *r;
    int nw, ns, niter;
    int k0, k1;              /* the steady-state window of iterations */
    wstate *ws;
    xfer *x;
    int nx, capx, xfree;     /* pool and free list of transfer records */
    link *lk;
    int nlk, caplk;
    port *pt;
    int npt, cappt;
    chan *ch;
    int nch, capch;
    group *gr;
    int ngr, capgr;
    int *gmem, ngmem, capgmem;  /* group members' worker ids */
    htab lh, ph, chh, gh;    /* links, ports, channels, groups */
    int *ar_occ;             /* [nw * ns] all-reduces of the stage seen by the worker */
    double *lastb_start, *lastb_dur; /* [nw * ns] last B/W of the stage on the worker */
    double *busy_it, *comm_it; /* [nw * niter] */
    int *dev_track, *coll_track; /* [nw] timeline tracks */
    heap h;
    int finished;
    plumb_err *err;
} eng;

static int comp_slot(int k)
{
    switch (k) {
    case ACT_F: return SIM_C_F;
    case ACT_B: return SIM_C_B;
    case ACT_I: return SIM_C_I;
    case ACT_W: return SIM_C_W;
    default: return SIM_C_STEP;
    }
}

static int tl_of_act(int k)
{
    switch (k) {
    case ACT_F: return TL_F;
    case ACT_B: return TL_B;
    case ACT_I: return TL_I;
    case ACT_W: return TL_W;
    case ACT_SEND_F: return TL_SEND_F;
    case ACT_SEND_B: return TL_SEND_B;
    default: return TL_STEP;
    }
}

static int oom(eng *E)
{
    return err_set(E->err, NULL, NULL, "out of memory");
}

static int bad_action(eng *E, int w, int i, const char *what)
{
    char buf[64];
    return err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): %s", w, i,
                   action_format(&E->s->acts[w][i], buf, sizeof buf), what);
}

/* Makes room for one more element in a growable array. 0 or -1. */
static int grow(void **p, int n, int *cap, size_t size)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? 2 * *cap : 64;
    void *np = realloc(*p, (size_t)nc * size);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int record(eng *E, int track, int kind, double start, double dur, double bytes,
                  int stage, int peer_stage, int mb, int iter)
{
    tl_event e = {.start_s = start, .dur_s = dur, .bytes = bytes, .track = track,
                  .kind = kind, .stage = stage, .peer_stage = peer_stage, .microbatch = mb,
                  .iteration = iter};
    return timeline_add(E->r->tl, &e) ? oom(E) : 0;
}

static inline void note_end(eng *E, int iter, double t)
{
    if (t > E->r->iter_end[iter])
        E->r->iter_end[iter] = t;
    if (t > E->r->makespan_s)
        E->r->makespan_s = t;
}

/* --- links, ports, channels ------------------------------------------------------------- */

/* The link a_dev -> b_dev, created on first use with its rate, latency and egress ports:
 * its index, or -1 when out of memory. */
static int link_of(eng *E, int a_dev, int b_dev)
{
    int li = ht_find(&E->lh, (uint64_t)(uint32_t)a_dev, (uint64_t)(uint32_t)b_dev);
    if (li >= 0)
        return li;
    if (grow((void **)&E->lk, E->nlk, &E->caplk, sizeof *E->lk))
        return -1;
    const sim_net *n = &E->m->net;
    li = E->nlk++;
    link *l = &E->lk[li];
    memset(l, 0, sizeof *l);
    l->head = l->tail = l->track = -1;
    int L = sim_net_path(n, a_dev, b_dev, &l->rate, &l->lat);
    if (!(l->rate > 0) || !isfinite(l->rate))
        l->rate = INFINITY;
    l->st.src = a_dev;
    l->st.dst = b_dev;
    l->st.level = L;
    if (ht_put(&E->lh, (uint64_t)(uint32_t)a_dev, (uint64_t)(uint32_t)b_dev, li))
        return -1;
    /* the egress ports on the path (level 0 alone inside a server, else levels 1..L) of
     * the sender's level-(l-1) group, for level 0 the device itself; a port has
     * floor(egress / rate) lanes: that many transfers leave at full speed at once */
    for (int lv = L == 0 ? 0 : 1; lv <= L; lv++) {
        uint64_t grp = (uint64_t)(lv ? a_dev / n->gsize[lv - 1] : a_dev);
        int pi = ht_find(&E->ph, (uint64_t)lv, grp);
        if (pi < 0) {
            if (grow((void **)&E->pt, E->npt, &E->cappt, sizeof *E->pt))
                return -1;
            pi = E->npt++;
            port *p = &E->pt[pi];
            double r1 = n->bw[lv] < n->egress[lv] ? n->bw[lv] : n->egress[lv];
            double lanes = r1 > 0 ? floor(n->egress[lv] / r1 + 1e-9) : 1;
            p->lanes = lanes < 1 ? 1 : lanes > 1e6 ? 1000000 : (int)lanes;
            p->busy = 0;
            p->whead = p->wtail = -1;
            if (ht_put(&E->ph, (uint64_t)lv, grp, pi))
                return -1;
        }
        E->lk[li].ports[E->lk[li].nports++] = pi;
    }
    return li;
}

/* The channel src -> dst in direction fwd (created empty when new), or -1 (memory). */
static int chan_of(eng *E, int src, int dst, int fwd)
{
    int ci = ht_find(&E->chh, pair(src, dst), (uint64_t)fwd);
    if (ci >= 0)
        return ci;
    if (grow((void **)&E->ch, E->nch, &E->capch, sizeof *E->ch))
        return -1;
    ci = E->nch++;
    E->ch[ci] = (chan){-1, -1, -1};
    return ht_put(&E->chh, pair(src, dst), (uint64_t)fwd, ci) ? -1 : ci;
}

static void xfer_release(eng *E, int xi)
{
    E->x[xi].cnext = E->xfree;
    E->xfree = xi;
}

/* --- transfers --------------------------------------------------------------------------- */

/* Starts transfer xi (the head of its idle link) at t when every egress port it needs has
 * a free lane; otherwise queues it at the first full port. */
static int xfer_try_start(eng *E, int xi, double t)
{
    xfer *x = &E->x[xi];
    link *l = &E->lk[x->link];
    for (int i = 0; i < l->nports; i++) {
        port *p = &E->pt[l->ports[i]];
        if (p->busy >= p->lanes) {
            x->pnext = -1;
            if (p->wtail >= 0)
                E->x[p->wtail].pnext = xi;
            else
                p->whead = xi;
            p->wtail = xi;
            return 0;
        }
    }
    l->head = x->lnext;
    if (l->head < 0)
        l->tail = -1;
    l->busy = 1;
    for (int i = 0; i < l->nports; i++)
        E->pt[l->ports[i]].busy++;
    double occ = x->bytes / l->rate, end = t + occ;
    x->arrival = end + l->lat;
    if (heap_push(&E->h, end, -(xi + 1)))
        return oom(E);
    if (x->waiter >= 0 && heap_push(&E->h, x->arrival, x->waiter))
        return oom(E);
    l->st.bytes += x->bytes;
    l->st.busy_s += occ;
    l->st.transfers++;
    if (x->iter >= E->k0 && x->iter <= E->k1)
        l->st.bytes_window += x->bytes;
    E->comm_it[(size_t)x->src_w * E->niter + x->iter] += occ;
    note_end(E, x->iter, x->arrival);
    if (E->m->record) {
        if (l->track < 0) {  /* a track for links that carry point-to-point transfers */
            char nm[96];
            snprintf(nm, sizeof nm, "link %d->%d (level %d)", l->st.src, l->st.dst,
                     l->st.level);
            l->track = timeline_track(E->r->tl, TL_TRACK_LINK, l->st.src, l->st.dst, nm);
            if (l->track < 0)
                return oom(E);
        }
        return record(E, l->track, tl_of_act(x->a->kind), t, occ, x->bytes, x->a->stage,
                      x->a->peer_stage, x->a->microbatch, x->iter);
    }
    return 0;
}

static int xfer_done(eng *E, int xi, double t)
{
    link *l = &E->lk[E->x[xi].link];
    for (int i = 0; i < l->nports; i++)
        E->pt[l->ports[i]].busy--;
    l->busy = 0;
    E->x[xi].done = 1;
    if (E->x[xi].received)
        xfer_release(E, xi);
    /* waiters of the freed ports first (FIFO), then the next transfer on this link */
    for (int i = 0; i < l->nports; i++) {
        port *p = &E->pt[l->ports[i]];
        while (p->busy < p->lanes && p->whead >= 0) {
            int y = p->whead;
            p->whead = E->x[y].pnext;
            if (p->whead < 0)
                p->wtail = -1;
            if (xfer_try_start(E, y, t))
                return -1;
        }
    }
    if (!l->busy && l->head >= 0)
        return xfer_try_start(E, l->head, t);
    return 0;
}

/* SEND at t by worker w (action index c): a transfer record, queued on its channel (waking
 * a receiver that waits there) and on its link. */
static int do_send(eng *E, int w, int c, int iter, double t)
{
    const action *a = &E->s->acts[w][c];
    wstate *ws = &E->ws[w];
    int fwd = a->kind == ACT_SEND_F;
    if (a->peer < 0 || a->peer >= E->nw || a->peer_stage < 0 || a->peer_stage >= E->ns)
        return bad_action(E, w, c, "peer worker or stage out of range");
    int xi = E->xfree;
    if (xi >= 0) {
        E->xfree = E->x[xi].cnext;
    } else {
        if (grow((void **)&E->x, E->nx, &E->capx, sizeof *E->x))
            return oom(E);
        xi = E->nx++;
    }
    if (a->peer != ws->lpeer) {
        int d0 = E->m->worker_device[w], d1 = E->m->worker_device[a->peer];
        ws->link = d0 == d1 ? -1 : link_of(E, d0, d1);
        if (d0 != d1 && ws->link < 0)
            return oom(E);
        ws->lpeer = a->peer;
    }
    if (a->peer != ws->speer[fwd]) {
        if ((ws->schan[fwd] = chan_of(E, w, a->peer, fwd)) < 0)
            return oom(E);
        ws->speer[fwd] = a->peer;
    }
    int lo = a->stage < a->peer_stage ? a->stage : a->peer_stage;
    xfer *x = &E->x[xi];
    *x = (xfer){.bytes = E->m->cut_bytes[lo], .arrival = -1, .a = a, .link = ws->link,
                .waiter = -1, .lnext = -1, .pnext = -1, .cnext = -1, .iter = iter,
                .src_w = w};
    chan *ch = &E->ch[ws->schan[fwd]];
    if (ch->tail >= 0)
        E->x[ch->tail].cnext = xi;
    else
        ch->head = xi;
    ch->tail = xi;
    if (ch->blocked >= 0) {
        if (heap_push(&E->h, t, ch->blocked))
            return oom(E);
        ch->blocked = -1;
    }
    if (x->link < 0) {  /* same device: nothing moves */
        x->arrival = t;
        x->done = 1;
        return 0;
    }
    link *l = &E->lk[x->link];
    if (l->tail >= 0)
        E->x[l->tail].lnext = xi;
    else
        l->head = xi;
    l->tail = xi;
    if (!l->busy && l->head == xi)
        return xfer_try_start(E, xi, t);
    return 0;
}

/* RECV at t by worker w (action index c): the matching transfer from its channel. Returns
 * 1 when the worker must wait (woken by the send or the arrival), 0 to go on, -1 on error. */
static int do_recv(eng *E, int w, int c, double t)
{
    const action *a = &E->s->acts[w][c];
    wstate *ws = &E->ws[w];
    int fwd = a->kind == ACT_RECV_F;
    if (a->peer < 0 || a->peer >= E->nw)
        return bad_action(E, w, c, "peer worker out of range");
    if (a->peer != ws->rpeer[fwd]) {
        if ((ws->rchan[fwd] = chan_of(E, a->peer, w, fwd)) < 0)
            return oom(E);
        ws->rpeer[fwd] = a->peer;
    }
    chan *ch = &E->ch[ws->rchan[fwd]];
    int prev = -1, xi = ch->head;
    while (xi >= 0) {
        const action *sa = E->x[xi].a;
        if (sa->stage == a->peer_stage && sa->peer_stage == a->stage &&
            sa->microbatch == a->microbatch)
            break;
        prev = xi;
        xi = E->x[xi].cnext;
    }
    if (xi < 0) {  /* not sent yet */
        ch->blocked = w;
        return 1;
    }
    xfer *x = &E->x[xi];
    if (prev < 0)
        ch->head = x->cnext;
    else
        E->x[prev].cnext = x->cnext;
    if (ch->tail == xi)
        ch->tail = prev;
    x->received = 1;
    ws->cursor = c + 1;
    if (x->arrival < 0) {  /* queued on its link: its start posts our wake-up */
        x->waiter = w;
        return 1;
    }
    double arr = x->arrival;
    if (x->done)
        xfer_release(E, xi);
    if (arr > t)
        return heap_push(&E->h, arr, w) ? oom(E) : 1;
    return 0;
}

/* --- all-reduce ---------------------------------------------------------------------------- */

/* Finish time of a group whose members all reached it: gradient buckets become ready
 * evenly through each replica's last backward, the ring reduces them one after another. */
static double group_finish(eng *E, group *g)
{
    int s = g->stage;
    double tar = E->m->allreduce_s[s];
    if (g->need <= 1 || tar <= 0)
        return g->maxreach;
    double kb = ceil(E->m->grad_bytes[s] / SIM_BUCKET_BYTES);
    int K = kb < 1 ? 1 : kb > 4096 ? 4096 : (int)kb;
    double c = tar / K, f = -INFINITY;
    for (int k = 0; k < K; k++) {
        double ready = -INFINITY;
        for (int j = 0; j < g->need; j++) {
            size_t i = (size_t)E->gmem[g->mem_off + j] * E->ns + s;
            double st = E->lastb_start[i], du = E->lastb_dur[i];
            double rk = st < 0 ? g->maxreach : st + du * (k + 1) / K;
            if (rk > ready)
                ready = rk;
        }
        f = (f > ready ? f : ready) + c;
    }
    return f > g->maxreach ? f : g->maxreach;
}

/* Counts a ring all-reduce's traffic on the links of the ring (the stage's replicas in
 * placement order): 2 (r - 1) / r x the gradient bytes leave each replica for the next. */
static int ring_traffic(eng *E, int s, int iter)
{
    const schedule *sc = E->s;
    int r = sc->replicas[s];
    double bytes = 2.0 * (r - 1) / r * E->m->grad_bytes[s];
    for (int j = 0; j < r; j++) {
        int a = sc->stage_workers[sc->stage_first[s] + j];
        int b = sc->stage_workers[sc->stage_first[s] + (j + 1) % r];
        int da = E->m->worker_device[a], db = E->m->worker_device[b];
        if (da == db)
            continue;
        int li = link_of(E, da, db);
        if (li < 0)
            return -1;
        link *l = &E->lk[li];
        l->st.bytes += bytes;
        l->st.busy_s += bytes / l->rate;
        l->st.transfers++;
        if (iter >= E->k0 && iter <= E->k1)
            l->st.bytes_window += bytes;
    }
    return 0;
}

static int do_allreduce(eng *E, int w, int c, int iter, double t)
{
    const action *a = &E->s->acts[w][c];
    int s = a->stage;
    int occ = E->ar_occ[(size_t)w * E->ns + s]++;
    int gi = ht_find(&E->gh, (uint64_t)s, (uint64_t)occ);
    if (gi < 0) {
        int need = E->s->replicas[s] > 0 ? E->s->replicas[s] : 1;
        if (grow((void **)&E->gr, E->ngr, &E->capgr, sizeof *E->gr))
            return oom(E);
        while (E->ngmem + need > E->capgmem)
            if (grow((void **)&E->gmem, E->capgmem, &E->capgmem, sizeof *E->gmem))
                return oom(E);
        gi = E->ngr++;
        E->gr[gi] = (group){.stage = s, .need = need, .mem_off = E->ngmem, .iter = iter,
                            .maxreach = -INFINITY};
        E->ngmem += need;
        if (ht_put(&E->gh, (uint64_t)s, (uint64_t)occ, gi))
            return oom(E);
    }
    group *g = &E->gr[gi];
    if (g->count >= g->need)
        return bad_action(E, w, c, "more workers join this all-reduce than the stage has "
                          "replicas");
    E->gmem[g->mem_off + g->count++] = w;
    if (t > g->maxreach)
        g->maxreach = t;
    if (g->count < g->need)
        return 0;
    double fin = group_finish(E, g), tar = E->m->allreduce_s[s];
    int comm = g->need > 1 && tar > 0;
    note_end(E, g->iter, fin);
    if (comm && ring_traffic(E, s, g->iter))
        return oom(E);
    for (int j = 0; j < g->need; j++) {
        int mw = E->gmem[g->mem_off + j];
        E->ws[mw].cursor++;
        if (heap_push(&E->h, fin, mw))
            return oom(E);
        if (!comm)
            continue;
        E->comm_it[(size_t)mw * E->niter + g->iter] += tar;
        if (!E->m->record)
            continue;
        if (E->coll_track[mw] < 0) {
            char nm[96];
            snprintf(nm, sizeof nm, "device %d all-reduce", E->m->worker_device[mw]);
            E->coll_track[mw] = timeline_track(E->r->tl, TL_TRACK_COLLECTIVE,
                                               E->m->worker_device[mw], -1, nm);
            if (E->coll_track[mw] < 0)
                return oom(E);
        }
        if (record(E, E->coll_track[mw], TL_ALLREDUCE, fin - tar, tar, E->m->grad_bytes[s],
                   s, -1, -1, g->iter))
            return -1;
    }
    return 0;
}

/* --- workers ------------------------------------------------------------------------------- */

/* Runs worker w from its cursor at time t until it computes (an event marks the end),
 * blocks (a send, an arrival or an all-reduce wakes it) or finishes. */
static int worker_run(eng *E, int w, double t)
{
    const sim_model *m = E->m;
    const action *acts = E->s->acts[w];
    wstate *ws = &E->ws[w];
    const double *act_s = m->act_s, scale = m->worker_scale[w];
    int len = E->s->len[w], nmb = E->s->microbatches;
    for (;;) {
        int c = ws->cursor;
        if (c == len) {
            E->finished++;
            return 0;
        }
        const action *a = &acts[c];
        if ((unsigned)a->stage >= (unsigned)E->ns)  /* everything below indexes by it */
            return bad_action(E, w, c, "stage out of range");
        if (a->microbatch >= 0 && nmb > 0) {
            int it = a->microbatch / nmb;
            ws->iter = it >= E->niter ? E->niter - 1 : it;
        }
        int iter = ws->iter, rc;
        E->r->actions++;
        switch (a->kind) {
        case ACT_F: case ACT_B: case ACT_I: case ACT_W: case ACT_STEP: {
            int s = a->stage;
            double dur = act_s[(size_t)s * SIM_NC + comp_slot(a->kind)] * scale;
            if (a->kind == ACT_F) {
                ws->cur_act += m->stash_bytes[s];
                if (++ws->inflight > E->r->max_inflight[w])
                    E->r->max_inflight[w] = ws->inflight;
            } else if (a->kind == ACT_B || a->kind == ACT_I) {
                ws->cur_act += m->transient_bytes[s];
            }
            if (ws->cur_act > E->r->peak_act_bytes[w])
                E->r->peak_act_bytes[w] = ws->cur_act;
            if (a->kind == ACT_B || a->kind == ACT_W) {
                ws->cur_act -= m->stash_bytes[s] + m->transient_bytes[s];
                ws->inflight--;
                E->lastb_start[(size_t)w * E->ns + s] = t;
                E->lastb_dur[(size_t)w * E->ns + s] = dur;
            }
            E->busy_it[(size_t)w * E->niter + iter] += dur;
            E->r->busy_total[w] += dur;
            note_end(E, iter, t + dur);
            if (m->record &&
                record(E, E->dev_track[w], tl_of_act(a->kind), t, dur, 0, s, -1,
                       a->microbatch, iter))
                return -1;
            ws->cursor = c + 1;
            if (dur > 0)
                return heap_push(&E->h, t + dur, w) ? oom(E) : 0;
            break;
        }
        case ACT_SEND_F: case ACT_SEND_B:
            ws->cursor = c + 1;
            if (do_send(E, w, c, iter, t))
                return -1;
            break;
        case ACT_RECV_F: case ACT_RECV_B:
            rc = do_recv(E, w, c, t);
            if (rc) {
                if (ws->cursor == c)
                    E->r->actions--;  /* not taken yet: counted again when it is */
                return rc < 0 ? -1 : 0;
            }
            break;
        case ACT_ALLREDUCE:
            return do_allreduce(E, w, c, iter, t);
        default:
            ws->cursor = c + 1;  /* kinds without cost */
        }
    }
}

/* --- setup, run, results ------------------------------------------------------------------ */

static void eng_free(eng *E)
{
    free(E->ws);
    free(E->x);
    free(E->lk);
    free(E->pt);
    free(E->ch);
    free(E->gr);
    free(E->gmem);
    ht_free(&E->lh);
    ht_free(&E->ph);
    ht_free(&E->chh);
    ht_free(&E->gh);
    free(E->ar_occ);
    free(E->lastb_start);
    free(E->lastb_dur);
    free(E->busy_it);
    free(E->comm_it);
    free(E->dev_track);
    free(E->coll_track);
    free(E->h.a);
}

static int setup(eng *E)
{
    int nw = E->nw, ns = E->ns;
    size_t nws = (size_t)nw * ns;
    E->ws = calloc((size_t)nw, sizeof *E->ws);
    E->ar_occ = calloc(nws, sizeof *E->ar_occ);
    E->lastb_start = malloc(nws * sizeof *E->lastb_start);
    E->lastb_dur = calloc(nws, sizeof *E->lastb_dur);
    E->busy_it = calloc((size_t)nw * E->niter, sizeof *E->busy_it);
    E->comm_it = calloc((size_t)nw * E->niter, sizeof *E->comm_it);
    E->dev_track = malloc((size_t)nw * sizeof *E->dev_track);
    E->coll_track = malloc((size_t)nw * sizeof *E->coll_track);
    if (!E->ws || !E->ar_occ || !E->lastb_start || !E->lastb_dur || !E->busy_it ||
        !E->comm_it || !E->dev_track || !E->coll_track || ht_init(&E->lh, 16) ||
        ht_init(&E->ph, 16) || ht_init(&E->chh, 16) || ht_init(&E->gh, 16))
        return oom(E);
    for (size_t i = 0; i < nws; i++)
        E->lastb_start[i] = -1;
    E->xfree = -1;
    for (int w = 0; w < nw; w++) {
        wstate *ws = &E->ws[w];
        ws->lpeer = ws->speer[0] = ws->speer[1] = ws->rpeer[0] = ws->rpeer[1] = -1;
        E->dev_track[w] = E->coll_track[w] = -1;
        if (!E->m->record)
            continue;
        const char *dn = E->m->device_names ? E->m->device_names[w] : NULL;
        E->dev_track[w] = timeline_track(E->r->tl, TL_TRACK_DEVICE, E->m->worker_device[w],
                                         -1, dn);
        if (E->dev_track[w] < 0)
            return oom(E);
    }
    return 0;
}

/* Names the first blocked worker and what it waits on. */
static int deadlock(eng *E)
{
    for (int w = 0; w < E->nw; w++) {
        int c = E->ws[w].cursor;
        if (c < E->s->len[w]) {
            char buf[64];
            int k = E->s->acts[w][c].kind;
            return err_set(E->err, NULL, NULL, "schedule deadlocks: worker %d waits forever "
                           "at action %d (%s)%s; %d of %d workers finished", w, c,
                           action_format(&E->s->acts[w][c], buf, sizeof buf),
                           k == ACT_RECV_F || k == ACT_RECV_B
                               ? ": no matching send reaches it" : "",
                           E->finished, E->nw);
        }
    }
    return err_set(E->err, NULL, NULL, "schedule deadlocks");
}

/* After the run: every transfer sent must have been received. */
static int check_channels(eng *E)
{
    for (int ci = 0; ci < E->nch; ci++)
        if (E->ch[ci].head >= 0) {
            const xfer *x = &E->x[E->ch[ci].head];
            return err_set(E->err, NULL, NULL, "schedule: worker %d sends %s of stage %d "
                           "microbatch %d to worker %d but nobody receives them", x->src_w,
                           x->a->kind == ACT_SEND_F ? "activations" : "gradients",
                           x->a->stage, x->a->microbatch, x->a->peer);
        }
    return 0;
}

void sim_result_free(sim_result *r)
{
    if (!r)
        return;
    free(r->iter_end);
    free(r->busy_window);
    free(r->comm_window);
    free(r->busy_total);
    free(r->peak_act_bytes);
    free(r->max_inflight);
    free(r->links);
    timeline_free(r->tl);
    memset(r, 0, sizeof *r);
}

int sim_engine_run(const sim_model *m, sim_result *r, plumb_err *err)
{
    const schedule *s = m->sched;
    memset(r, 0, sizeof *r);
    eng E = {.m = m, .s = s, .r = r, .nw = s->nworkers, .ns = s->nstages,
             .niter = s->iterations > 0 ? s->iterations : 1, .err = err};
    E.k0 = E.niter > 1 ? 1 : 0;
    E.k1 = E.niter > 2 ? E.niter - 2 : E.niter - 1;
    int rc = -1;
    r->nworkers = E.nw;
    r->iterations = E.niter;
    r->iter_end = calloc((size_t)E.niter, sizeof *r->iter_end);
    r->busy_window = calloc((size_t)E.nw + 1, sizeof *r->busy_window);
    r->comm_window = calloc((size_t)E.nw + 1, sizeof *r->comm_window);
    r->busy_total = calloc((size_t)E.nw + 1, sizeof *r->busy_total);
    r->peak_act_bytes = calloc((size_t)E.nw + 1, sizeof *r->peak_act_bytes);
    r->max_inflight = calloc((size_t)E.nw + 1, sizeof *r->max_inflight);
    if (!r->iter_end || !r->busy_window || !r->comm_window || !r->busy_total ||
        !r->peak_act_bytes || !r->max_inflight) {
        oom(&E);
        goto out;
    }
    if (E.nw <= 0 || E.ns <= 0) {
        err_set(err, NULL, NULL, "schedule has no workers or no stages");
        goto out;
    }
    if (m->record && !(r->tl = timeline_new("sim"))) {
        oom(&E);
        goto out;
    }
    if (setup(&E))
        goto out;
    for (int w = 0; w < E.nw; w++)
        if (heap_push(&E.h, 0.0, w)) {
            oom(&E);
            goto out;
        }
    while (E.h.n) {
        event e = heap_pop(&E.h);
        r->events++;
        if ((e.id >= 0 ? worker_run(&E, e.id, e.t) : xfer_done(&E, -e.id - 1, e.t)))
            goto out;
    }
    if (E.finished < E.nw) {
        deadlock(&E);
        goto out;
    }
    if (check_channels(&E))
        goto out;
    /* steady state: iterations k0..k1, leaving out the first (pipeline fill) and, with 3 or
     * more, the last (the drain, faster for asynchronous schedules); all of a 1-iteration
     * run */
    int n = E.niter, k0 = E.k0, k1 = E.k1;
    r->iteration_s = n > 1 ? (r->iter_end[k1] - r->iter_end[0]) / (k1 - k0 + 1)
                           : r->iter_end[0];
    for (int w = 0; w < E.nw; w++) {
        double b = 0, c = 0;
        for (int k = k0; k <= k1; k++) {
            b += E.busy_it[(size_t)w * n + k];
            c += E.comm_it[(size_t)w * n + k];
        }
        r->busy_window[w] = b / (k1 - k0 + 1);
        r->comm_window[w] = c / (k1 - k0 + 1);
    }
    r->nlinks = E.nlk;
    r->links = malloc(((size_t)E.nlk + 1) * sizeof *r->links);
    if (!r->links) {
        oom(&E);
        goto out;
    }
    for (int i = 0; i < E.nlk; i++) {
        r->links[i] = E.lk[i].st;
        r->links[i].bytes_window /= (k1 - k0 + 1);
    }
    rc = 0;
out:
    eng_free(&E);
    if (rc)
        sim_result_free(r);
    return rc;
}
