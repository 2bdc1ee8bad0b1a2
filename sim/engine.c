/* engine.c: the discrete-event replay of a schedule IR on a priced model (engine.h).
 *
 * Events live in a binary min-heap ordered by (time, insertion number), so equal times run
 * in the order they were posted and a run is deterministic. Two event kinds: "worker w may
 * go on" (its compute finished, its data arrived, its all-reduce finished) and "transfer x
 * released its link and ports". Everything else is looked up in arrays prepared once:
 * each RECV knows its SEND, each SEND its link and egress ports, each ALLREDUCE its group.
 * Cost per event: O(log events-in-heap); memory: O(actions). */
#include "sim/engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

/* --- a tiny open-addressing hash from fixed-width int keys to ints --------------------- */

typedef struct htab {
    int kw;          /* ints per key */
    size_t cap;      /* power of two */
    int *keys;       /* [cap * kw] */
    int *vals;       /* [cap], -1 = empty */
} htab;

static int ht_init(htab *h, int kw, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    h->kw = kw;
    h->cap = cap;
    h->keys = malloc(cap * (size_t)kw * sizeof *h->keys);
    h->vals = malloc(cap * sizeof *h->vals);
    if (!h->keys || !h->vals)
        return -1;
    memset(h->vals, 0xff, cap * sizeof *h->vals);
    return 0;
}

static void ht_free(htab *h)
{
    free(h->keys);
    free(h->vals);
}

static size_t ht_hash(const int *k, int kw)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < kw; i++) {
        x ^= (uint32_t)k[i];
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 29;
    }
    return (size_t)x;
}

/* Returns the slot of key k: found (vals >= 0) or the empty slot where it would go. */
static size_t ht_slot(const htab *h, const int *k)
{
    size_t i = ht_hash(k, h->kw) & (h->cap - 1);
    while (h->vals[i] >= 0 && memcmp(&h->keys[i * (size_t)h->kw], k,
                                     (size_t)h->kw * sizeof *k) != 0)
        i = (i + 1) & (h->cap - 1);
    return i;
}

/* Value of k, inserting `v` when absent (the table must have room: sized at init). */
static int ht_get_or_put(htab *h, const int *k, int v)
{
    size_t i = ht_slot(h, k);
    if (h->vals[i] < 0) {
        memcpy(&h->keys[i * (size_t)h->kw], k, (size_t)h->kw * sizeof *k);
        h->vals[i] = v;
    }
    return h->vals[i];
}

static int ht_find(const htab *h, const int *k)
{
    return h->vals[ht_slot(h, k)];
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

typedef struct aslot {       /* one IR action, prepared */
    double dur;              /* compute: seconds on this worker */
    int kind;                /* act_kind */
    int arg;                 /* SEND/RECV: transfer index; ALLREDUCE: group index */
    int iter;                /* iteration the action belongs to */
    int ws;                  /* worker-stage slot (stash accounting, last backward) */
} aslot;

typedef struct xfer {
    double occ, lat, bytes, arrival; /* arrival < 0 until it starts */
    int link, port_off, nports, waiter, lnext, pnext, iter, src_w, stage, peer_stage, mb;
    int kind;                /* TL_SEND_F or TL_SEND_B */
    int recvs;               /* matched receives (must end as 1) */
} xfer;

typedef struct link {
    int busy, head, tail, track;
    sim_link_stat st;
} link;

typedef struct port {
    int lanes, busy, whead, wtail;
} port;

typedef struct group {       /* one all-reduce of one stage among its replicas */
    int stage, need, count, mem_off, iter;
    double maxreach;
} group;

typedef struct eng {
    const sim_model *m;
    const schedule *s;
    sim_result *r;
    int nw, ns, niter;
    int k0, k1;              /* the steady-state window of iterations */
    size_t *off;             /* [nw + 1] action offsets */
    aslot *as;
    int *cursor;
    xfer *x;
    int nx;
    link *lk;
    int nlk;
    port *pt;
    int npt;
    int *port_ids;           /* flattened per transfer */
    group *gr;
    int ngr;
    int *gmem;               /* group members' worker ids */
    int *ws_of;              /* [nw * ns] worker-stage slot or -1 */
    int nws;
    int *ws_stage;           /* [nws] */
    double *lastb_start, *lastb_dur; /* [nws] last B/W of the slot */
    double *cur_act;         /* [nw] stashed bytes now */
    int *inflight;           /* [nw] */
    double *busy_it, *comm_it; /* [nw * niter] */
    int *dev_track, *coll_track; /* [nw] timeline tracks */
    heap h;
    int finished;
    plumb_err *err;
} eng;

static int is_compute(int k)
{
    return k == ACT_F || k == ACT_B || k == ACT_I || k == ACT_W || k == ACT_STEP;
}

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
    default: return TL_STEP;
    }
}

static int record(eng *E, int track, int kind, double start, double dur, double bytes,
                  int stage, int peer_stage, int mb, int iter)
{
    tl_event e = {.start_s = start, .dur_s = dur, .bytes = bytes, .track = track,
                  .kind = kind, .stage = stage, .peer_stage = peer_stage, .microbatch = mb,
                  .iteration = iter};
    if (timeline_add(E->r->tl, &e))
        return err_set(E->err, NULL, NULL, "out of memory recording the timeline");
    return 0;
}

static void note_end(eng *E, int iter, double t)
{
    if (t > E->r->iter_end[iter])
        E->r->iter_end[iter] = t;
    if (t > E->r->makespan_s)
        E->r->makespan_s = t;
}

/* --- transfers --------------------------------------------------------------------------- */

static int xfer_try_start(eng *E, int xi, double t)
{
    xfer *x = &E->x[xi];
    for (int i = 0; i < x->nports; i++) {
        port *p = &E->pt[E->port_ids[x->port_off + i]];
        if (p->busy >= p->lanes) {  /* wait in this port's FIFO */
            x->pnext = -1;
            if (p->wtail >= 0)
                E->x[p->wtail].pnext = xi;
            else
                p->whead = xi;
            p->wtail = xi;
            return 0;
        }
    }
    link *l = &E->lk[x->link];
    l->head = x->lnext;
    if (l->head < 0)
        l->tail = -1;
    l->busy = 1;
    for (int i = 0; i < x->nports; i++)
        E->pt[E->port_ids[x->port_off + i]].busy++;
    double end = t + x->occ;
    x->arrival = end + x->lat;
    if (heap_push(&E->h, end, -(xi + 1)))
        return err_set(E->err, NULL, NULL, "out of memory");
    if (x->waiter >= 0 && heap_push(&E->h, x->arrival, x->waiter))
        return err_set(E->err, NULL, NULL, "out of memory");
    l->st.bytes += x->bytes;
    l->st.busy_s += x->occ;
    l->st.transfers++;
    if (x->iter >= E->k0 && x->iter <= E->k1)
        l->st.bytes_window += x->bytes;
    E->comm_it[(size_t)x->src_w * E->niter + x->iter] += x->occ;
    note_end(E, x->iter, x->arrival);
    if (E->m->record)
        return record(E, l->track, x->kind, t, x->occ, x->bytes, x->stage, x->peer_stage,
                      x->mb, x->iter);
    return 0;
}

static int xfer_issue(eng *E, int xi, double t)
{
    xfer *x = &E->x[xi];
    if (x->link < 0) {  /* same device: no transfer */
        x->arrival = t;
        if (x->waiter >= 0 && heap_push(&E->h, t, x->waiter))
            return err_set(E->err, NULL, NULL, "out of memory");
        return 0;
    }
    link *l = &E->lk[x->link];
    x->lnext = -1;
    if (l->tail >= 0)
        E->x[l->tail].lnext = xi;
    else
        l->head = xi;
    l->tail = xi;
    if (!l->busy && l->head == xi)
        return xfer_try_start(E, xi, t);
    return 0;
}

static int xfer_done(eng *E, int xi, double t)
{
    xfer *x = &E->x[xi];
    link *l = &E->lk[x->link];
    for (int i = 0; i < x->nports; i++)
        E->pt[E->port_ids[x->port_off + i]].busy--;
    l->busy = 0;
    /* waiters of the freed ports first (FIFO), then the next transfer on this link */
    for (int i = 0; i < x->nports; i++) {
        port *p = &E->pt[E->port_ids[x->port_off + i]];
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
            int w = E->gmem[g->mem_off + j];
            int ws = E->ws_of[(size_t)w * E->ns + s];
            double st = E->lastb_start[ws], du = E->lastb_dur[ws];
            double rk = st < 0 ? g->maxreach : st + du * (k + 1) / K;
            if (rk > ready)
                ready = rk;
        }
        f = (f > ready ? f : ready) + c;
    }
    return f > g->maxreach ? f : g->maxreach;
}

static int group_arrive(eng *E, int gi, int w, double t)
{
    group *g = &E->gr[gi];
    E->gmem[g->mem_off + g->count++] = w;
    if (t > g->maxreach)
        g->maxreach = t;
    if (g->count < g->need)
        return 0;
    double fin = group_finish(E, g), tar = E->m->allreduce_s[g->stage];
    int comm = g->need > 1 && tar > 0;
    note_end(E, g->iter, fin);
    for (int j = 0; j < g->need; j++) {
        int mw = E->gmem[g->mem_off + j];
        E->cursor[mw]++;
        if (heap_push(&E->h, fin, mw))
            return err_set(E->err, NULL, NULL, "out of memory");
        if (comm) {
            E->comm_it[(size_t)mw * E->niter + g->iter] += tar;
            if (E->m->record &&
                record(E, E->coll_track[mw], TL_ALLREDUCE, fin - tar, tar,
                       E->m->grad_bytes[g->stage], g->stage, -1, -1, g->iter))
                return -1;
        }
    }
    return 0;
}

/* --- workers ------------------------------------------------------------------------------- */

static int worker_run(eng *E, int w, double t)
{
    const sim_model *m = E->m;
    const aslot *base = E->as + E->off[w];
    int len = E->s->len[w];
    for (;;) {
        int c = E->cursor[w];
        if (c == len) {
            E->finished++;
            return 0;
        }
        const aslot *a = &base[c];
        E->r->actions++;
        switch (a->kind) {
        case ACT_F: case ACT_B: case ACT_I: case ACT_W: case ACT_STEP: {
            int s = E->s->acts[w][c].stage;
            if (a->kind == ACT_F) {
                E->cur_act[w] += m->stash_bytes[s];
                if (++E->inflight[w] > E->r->max_inflight[w])
                    E->r->max_inflight[w] = E->inflight[w];
            } else if (a->kind == ACT_B || a->kind == ACT_I) {
                E->cur_act[w] += m->transient_bytes[s];
            }
            if (E->cur_act[w] > E->r->peak_act_bytes[w])
                E->r->peak_act_bytes[w] = E->cur_act[w];
            if (a->kind == ACT_B || a->kind == ACT_W) {
                E->cur_act[w] -= m->stash_bytes[s] + m->transient_bytes[s];
                E->inflight[w]--;
                E->lastb_start[a->ws] = t;
                E->lastb_dur[a->ws] = a->dur;
            }
            E->busy_it[(size_t)w * E->niter + a->iter] += a->dur;
            E->r->busy_total[w] += a->dur;
            note_end(E, a->iter, t + a->dur);
            if (m->record &&
                record(E, E->dev_track[w], tl_of_act(a->kind), t, a->dur, 0, s, -1,
                       E->s->acts[w][c].microbatch, a->iter))
                return -1;
            E->cursor[w] = c + 1;
            if (a->dur > 0)
                return heap_push(&E->h, t + a->dur, w) ? err_set(E->err, NULL, NULL,
                                                                 "out of memory") : 0;
            break;
        }
        case ACT_SEND_F: case ACT_SEND_B:
            E->cursor[w] = c + 1;
            if (xfer_issue(E, a->arg, t))
                return -1;
            break;
        case ACT_RECV_F: case ACT_RECV_B: {
            xfer *x = &E->x[a->arg];
            if (x->arrival < 0) {  /* not started yet: its start wakes us */
                x->waiter = w;
                E->r->actions--;
                return 0;
            }
            E->cursor[w] = c + 1;
            if (x->arrival > t)
                return heap_push(&E->h, x->arrival, w) ? err_set(E->err, NULL, NULL,
                                                                 "out of memory") : 0;
            break;
        }
        case ACT_ALLREDUCE:
            return group_arrive(E, a->arg, w, t);
        default:
            E->cursor[w] = c + 1;  /* unknown kinds take no time */
        }
    }
}

/* --- preparation ----------------------------------------------------------------------------- */

static int prepare_links(eng *E, htab *lh, htab *ph, int xi, int a_dev, int b_dev)
{
    xfer *x = &E->x[xi];
    const sim_net *n = &E->m->net;
    double rate, lat;
    int L = sim_net_path(n, a_dev, b_dev, &rate, &lat);
    if (L < 0) {
        x->link = -1;
        return 0;
    }
    x->occ = rate > 0 && isfinite(rate) ? x->bytes / rate : 0;
    x->lat = lat;
    int key[2] = {a_dev, b_dev};
    int li = ht_get_or_put(lh, key, E->nlk);
    if (li == E->nlk) {
        link *l = &E->lk[E->nlk++];
        memset(l, 0, sizeof *l);
        l->head = l->tail = -1;
        l->st.src = a_dev;
        l->st.dst = b_dev;
        l->st.level = L;
        l->track = -1;
        if (E->m->record) {
            char nm[96];
            snprintf(nm, sizeof nm, "link %d->%d (level %d)", a_dev, b_dev, L);
            l->track = timeline_track(E->r->tl, TL_TRACK_LINK, a_dev, b_dev, nm);
            if (l->track < 0)
                return err_set(E->err, NULL, NULL, "out of memory");
        }
    }
    x->link = li;
    /* egress ports of the sender's groups at levels 1..L */
    x->nports = 0;
    for (int lv = 1; lv <= L; lv++) {
        int pk[2] = {lv, (int)(a_dev / n->gsize[lv - 1])};
        int pi = ht_get_or_put(ph, pk, E->npt);
        if (pi == E->npt) {
            port *p = &E->pt[E->npt++];
            double r1 = n->bw[lv] < n->egress[lv] ? n->bw[lv] : n->egress[lv];
            double lanes = floor(n->egress[lv] / r1 + 1e-9);
            p->lanes = lanes < 1 ? 1 : lanes > 1e6 ? 1000000 : (int)lanes;
            p->busy = 0;
            p->whead = p->wtail = -1;
        }
        E->port_ids[x->port_off + x->nports++] = pi;
    }
    return 0;
}

static int prepare(eng *E)
{
    const schedule *s = E->s;
    const sim_model *m = E->m;
    int nw = E->nw, ns = E->ns;
    size_t total = 0;
    E->off = malloc(((size_t)nw + 1) * sizeof *E->off);
    if (!E->off)
        return err_set(E->err, NULL, NULL, "out of memory");
    int nsend = 0, nar = 0;
    for (int w = 0; w < nw; w++) {
        E->off[w] = total;
        total += (size_t)s->len[w];
        for (int i = 0; i < s->len[w]; i++) {
            int k = s->acts[w][i].kind;
            nsend += k == ACT_SEND_F || k == ACT_SEND_B;
            nar += k == ACT_ALLREDUCE;
        }
    }
    E->off[nw] = total;
    E->as = malloc((total ? total : 1) * sizeof *E->as);
    E->cursor = calloc((size_t)nw, sizeof *E->cursor);
    E->x = malloc(((size_t)nsend + 1) * sizeof *E->x);
    E->lk = malloc(((size_t)nsend + 1) * sizeof *E->lk);
    E->pt = malloc(((size_t)nsend * CLUSTER_MAX_LEVELS + 1) * sizeof *E->pt);
    E->port_ids = malloc(((size_t)nsend * CLUSTER_MAX_LEVELS + 1) * sizeof *E->port_ids);
    E->gr = malloc(((size_t)nar + 1) * sizeof *E->gr);
    E->gmem = malloc(((size_t)nar + 1) * sizeof *E->gmem);
    E->ws_of = malloc((size_t)nw * ns * sizeof *E->ws_of);
    E->cur_act = calloc((size_t)nw, sizeof *E->cur_act);
    E->inflight = calloc((size_t)nw, sizeof *E->inflight);
    E->busy_it = calloc((size_t)nw * E->niter, sizeof *E->busy_it);
    E->comm_it = calloc((size_t)nw * E->niter, sizeof *E->comm_it);
    E->dev_track = malloc((size_t)nw * sizeof *E->dev_track);
    E->coll_track = malloc((size_t)nw * sizeof *E->coll_track);
    if (!E->as || !E->cursor || !E->x || !E->lk || !E->pt || !E->port_ids || !E->gr ||
        !E->gmem || !E->ws_of || !E->cur_act || !E->inflight || !E->busy_it ||
        !E->comm_it || !E->dev_track || !E->coll_track)
        return err_set(E->err, NULL, NULL, "out of memory");
    memset(E->ws_of, 0xff, (size_t)nw * ns * sizeof *E->ws_of);

    /* worker-stage slots */
    E->nws = 0;
    for (int w = 0; w < nw; w++)
        for (int i = 0; i < s->len[w]; i++) {
            int st = s->acts[w][i].stage;
            if (st < 0 || st >= ns) {
                char buf[64];
                return err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): "
                               "stage %d out of range 0..%d", w, i,
                               action_format(&s->acts[w][i], buf, sizeof buf), st, ns - 1);
            }
            if (E->ws_of[(size_t)w * ns + st] < 0)
                E->ws_of[(size_t)w * ns + st] = E->nws++;
        }
    E->ws_stage = malloc(((size_t)E->nws + 1) * sizeof *E->ws_stage);
    E->lastb_start = malloc(((size_t)E->nws + 1) * sizeof *E->lastb_start);
    E->lastb_dur = calloc((size_t)E->nws + 1, sizeof *E->lastb_dur);
    if (!E->ws_stage || !E->lastb_start || !E->lastb_dur)
        return err_set(E->err, NULL, NULL, "out of memory");
    for (int i = 0; i < E->nws; i++)
        E->lastb_start[i] = -1;

    /* timeline tracks */
    for (int w = 0; w < nw; w++) {
        E->dev_track[w] = E->coll_track[w] = -1;
        if (!m->record)
            continue;
        char nm[96];
        const char *dn = m->device_names ? m->device_names[w] : NULL;
        if (dn)
            snprintf(nm, sizeof nm, "%s", dn);
        else
            snprintf(nm, sizeof nm, "device %d", m->worker_device[w]);
        E->dev_track[w] = timeline_track(E->r->tl, TL_TRACK_DEVICE, m->worker_device[w], -1,
                                         nm);
        if (E->dev_track[w] < 0)
            return err_set(E->err, NULL, NULL, "out of memory");
    }

    htab sh = {0}, lh = {0}, ph = {0}, gh = {0};
    int rc = -1;
    int *ar_occ = calloc((size_t)E->nws + 1, sizeof *ar_occ);
    if (!ar_occ || ht_init(&sh, 6, (size_t)nsend) || ht_init(&lh, 2, (size_t)nsend) ||
        ht_init(&ph, 2, (size_t)nsend * CLUSTER_MAX_LEVELS) || ht_init(&gh, 2, (size_t)nar)) {
        err_set(E->err, NULL, NULL, "out of memory");
        goto out;
    }
    E->nx = E->nlk = E->npt = E->ngr = 0;
    int port_used = 0;
    /* pass 1: compute times, iterations, sends, all-reduce groups */
    for (int w = 0; w < nw; w++) {
        int last_iter = 0;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            aslot *o = &E->as[E->off[w] + i];
            o->kind = a->kind;
            o->arg = -1;
            o->dur = 0;
            o->ws = E->ws_of[(size_t)w * ns + a->stage];
            E->ws_stage[o->ws] = a->stage;
            if (a->microbatch >= 0 && s->microbatches > 0) {
                int it = a->microbatch / s->microbatches;
                last_iter = it < 0 ? 0 : it >= E->niter ? E->niter - 1 : it;
            }
            o->iter = last_iter;
            if (is_compute(a->kind)) {
                o->dur = m->act_s[(size_t)a->stage * SIM_NC + comp_slot(a->kind)] *
                         m->worker_scale[w];
            } else if (a->kind == ACT_SEND_F || a->kind == ACT_SEND_B) {
                if (a->peer < 0 || a->peer >= nw || a->peer_stage < 0 || a->peer_stage >= ns) {
                    char buf[64];
                    err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): peer "
                            "worker %d / stage %d out of range", w, i,
                            action_format(a, buf, sizeof buf), a->peer, a->peer_stage);
                    goto out;
                }
                int xi = E->nx++;
                xfer *x = &E->x[xi];
                memset(x, 0, sizeof *x);
                int lo = a->stage < a->peer_stage ? a->stage : a->peer_stage;
                x->bytes = m->cut_bytes[lo];
                x->arrival = -1;
                x->waiter = x->lnext = x->pnext = -1;
                x->iter = o->iter;
                x->src_w = w;
                x->stage = a->stage;
                x->peer_stage = a->peer_stage;
                x->mb = a->microbatch;
                x->kind = a->kind == ACT_SEND_F ? TL_SEND_F : TL_SEND_B;
                x->port_off = port_used;
                if (prepare_links(E, &lh, &ph, xi, m->worker_device[w],
                                  m->worker_device[a->peer]))
                    goto out;
                port_used += x->nports;
                int key[6] = {w, a->peer, a->kind == ACT_SEND_F, a->stage, a->peer_stage,
                              a->microbatch};
                if (ht_get_or_put(&sh, key, xi) != xi) {
                    char buf[64];
                    err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): the "
                            "same transfer is sent twice", w, i,
                            action_format(a, buf, sizeof buf));
                    goto out;
                }
                o->arg = xi;
            } else if (a->kind == ACT_ALLREDUCE) {
                int key[2] = {a->stage, ar_occ[o->ws]++};
                int gi = ht_get_or_put(&gh, key, E->ngr);
                if (gi == E->ngr) {
                    E->ngr++;
                    E->gr[gi] = (group){.stage = a->stage, .iter = o->iter,
                                        .maxreach = -INFINITY};
                }
                E->gr[gi].need++;
                o->arg = gi;
                if (m->record && E->coll_track[w] < 0) {
                    char nm[96];
                    snprintf(nm, sizeof nm, "device %d all-reduce", m->worker_device[w]);
                    E->coll_track[w] = timeline_track(E->r->tl, TL_TRACK_COLLECTIVE,
                                                      m->worker_device[w], -1, nm);
                    if (E->coll_track[w] < 0) {
                        err_set(E->err, NULL, NULL, "out of memory");
                        goto out;
                    }
                }
            }
        }
    }
    int moff = 0;
    for (int g = 0; g < E->ngr; g++) {
        E->gr[g].mem_off = moff;
        moff += E->gr[g].need;
    }
    /* pass 2: match every RECV with its SEND */
    for (int w = 0; w < nw; w++)
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind != ACT_RECV_F && a->kind != ACT_RECV_B)
                continue;
            int key[6] = {a->peer, w, a->kind == ACT_RECV_F, a->peer_stage, a->stage,
                          a->microbatch};
            int xi = a->peer >= 0 && a->peer < nw ? ht_find(&sh, key) : -1;
            if (xi < 0 || E->x[xi].recvs++ > 0) {
                char buf[64];
                err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): %s", w, i,
                        action_format(a, buf, sizeof buf),
                        xi < 0 ? "no matching send" : "received twice");
                goto out;
            }
            E->as[E->off[w] + i].arg = xi;
        }
    for (int xi = 0; xi < E->nx; xi++)
        if (E->x[xi].recvs != 1) {
            err_set(E->err, NULL, NULL, "schedule: worker %d sends %s of stage %d "
                    "microbatch %d to stage %d but nobody receives it", E->x[xi].src_w,
                    E->x[xi].kind == TL_SEND_F ? "activations" : "gradients",
                    E->x[xi].stage, E->x[xi].mb, E->x[xi].peer_stage);
            goto out;
        }
    rc = 0;
out:
    free(ar_occ);
    ht_free(&sh);
    ht_free(&lh);
    ht_free(&ph);
    ht_free(&gh);
    return rc;
}

static void eng_free(eng *E)
{
    free(E->off);
    free(E->as);
    free(E->cursor);
    free(E->x);
    free(E->lk);
    free(E->pt);
    free(E->port_ids);
    free(E->gr);
    free(E->gmem);
    free(E->ws_of);
    free(E->ws_stage);
    free(E->lastb_start);
    free(E->lastb_dur);
    free(E->cur_act);
    free(E->inflight);
    free(E->busy_it);
    free(E->comm_it);
    free(E->dev_track);
    free(E->coll_track);
    free(E->h.a);
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

/* Names the first blocked worker and what it waits on. */
static int deadlock(eng *E)
{
    for (int w = 0; w < E->nw; w++) {
        int c = E->cursor[w];
        if (c < E->s->len[w]) {
            char buf[64];
            return err_set(E->err, NULL, NULL, "schedule deadlocks: worker %d waits forever "
                           "at action %d (%s); %d of %d workers finished", w, c,
                           action_format(&E->s->acts[w][c], buf, sizeof buf), E->finished,
                           E->nw);
        }
    }
    return err_set(E->err, NULL, NULL, "schedule deadlocks");
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
        err_set(err, NULL, NULL, "out of memory");
        goto out;
    }
    if (E.nw <= 0 || E.ns <= 0) {
        err_set(err, NULL, NULL, "schedule has no workers or no stages");
        goto out;
    }
    if (m->record && !(r->tl = timeline_new("sim"))) {
        err_set(err, NULL, NULL, "out of memory");
        goto out;
    }
    if (prepare(&E))
        goto out;
    for (int w = 0; w < E.nw; w++)
        if (heap_push(&E.h, 0.0, w)) {
            err_set(err, NULL, NULL, "out of memory");
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
        err_set(err, NULL, NULL, "out of memory");
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
