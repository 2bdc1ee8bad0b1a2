/* eventq.h: the data structures of the simulator's engine, header-only so that the hot
 * loop inlines them: the event queue ordered by (time, insertion number) (a tournament
 * tree of one slot per worker, beside a 4-ary min-heap for the other events), and a small open-addressing hash table from (uint64, uint64) keys to
 * ints. Internal to sim/. */
#ifndef PLUMB_SIM_EVENTQ_H
#define PLUMB_SIM_EVENTQ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

/* --- a small open-addressing hash from (uint64, uint64) keys to ints ------------------- */

typedef struct hslot {
    uint64_t a, b;
    int v;           /* -1 = empty */
} hslot;

typedef struct htab {
    size_t cap, n;   /* cap: a power of two, kept at least 4 n */
    hslot *s;
} htab;

static inline int ht_init(htab *h, size_t n)
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

static inline void ht_free(htab *h)
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

static inline int ht_find(const htab *h, uint64_t a, uint64_t b)
{
    return ht_slot(h, a, b)->v;
}

/* Inserts (a, b) -> v (the key must be absent), growing the table. 0 or -1 (memory). */
static inline int ht_put(htab *h, uint64_t a, uint64_t b, int v)
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

static inline uint64_t pair(int x, int y)
{
    return (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
}

/* --- the event queue ------------------------------------------------------------------ */

typedef struct event {
    double t;
    uint32_t seq;
    int32_t id;      /* >= 0: worker id resumes; < 0: transfer -(id+1) releases resources */
} event;

/* An event as the queue keeps it: one 128-bit integer, its time's order key (ev_tkey)
 * above its insertion number above its id, so that one unsigned comparison orders two
 * events by (time, insertion number) (insertion numbers are unique: the id never
 * decides). */
__extension__ typedef unsigned __int128 evkey;

/* The queue. About half the events are a worker's (its computation ends, its data
 * arrives), and a worker has at most one event pending at a time: it sits in the worker's
 * slot of a tournament tree (slot w for worker w < nw), whose internal nodes hold the
 * earliest event below them, so a slot's change costs one walk up of log2(slots)
 * comparisons whatever else is pending, and a worker that runs and posts its next event
 * refills the slot it was taken from in one walk (the slot taken is cleared only when
 * something else reads the tree). Every other event (a transfer leaving its link, an
 * all-reduce group's, or a second event of a worker whose slot is full) goes to a 4-ary
 * heap: a transfer's end is posted and popped once, where a slot would cost two walks of
 * a taller tree (slots for the transfer records too: 21 % more instructions in the
 * engine, and 7 % slower, for interleaved at 64 x 1024). Both order by (time, insertion number), a strict order,
 * so the events come out in the same order as from any one heap. Fields are internal:
 * use the functions (engine_ring.c reserves insertion numbers by advancing seq). */
typedef struct heap {
    evkey *ha;       /* the 4-ary heap: ha[0 .. hn) */
    size_t hn, hcap;
    evkey *node;     /* [2 L] the tournament tree: node[L + i] is slot i's event
                        (EV_EMPTY: none), node[j] for j < L the earlier of node[2 j] and
                        node[2 j + 1]; node[1] the earliest of all slots */
    int L;           /* slots: a power of two, or 0 before the first slot is used */
    int nw;          /* ids 0 .. nw - 1 own slots 0 .. nw - 1 */
    int pend;        /* the slot whose event was popped and is not yet cleared, or -1 */
    size_t count;    /* events pending */
    uint32_t seq;    /* the next insertion number */
} heap;

#define EV_EMPTY (~(evkey)0)  /* no event's key: the time key of +inf is below it */

/* The order of an event's time as an unsigned integer: the IEEE bits of a double, the
 * negatives' flipped, compare as the doubles do (-0.0 is made +0.0 at the push; times
 * are never NaN: the model's costs are checked finite). */
static inline uint64_t ev_tkey(double t)
{
    uint64_t u;
    memcpy(&u, &t, sizeof u);
    return u ^ ((uint64_t)((int64_t)u >> 63) | 0x8000000000000000ULL);
}

/* The time whose ev_tkey is k. */
static inline double ev_time(uint64_t k)
{
    uint64_t u = k ^ ((k >> 63) ? 0x8000000000000000ULL : ~0ULL);
    double t;
    memcpy(&t, &u, sizeof t);
    return t;
}

/* The key of event id at time t (-0.0 taken as +0.0: t + 0.0 is t for every other t, and
 * +0.0 for both zeros), inserted as number seq. */
static inline evkey ev_key(double t, uint32_t seq, int32_t id)
{
    return (evkey)ev_tkey(t + 0.0) << 64 | (evkey)seq << 32 | (uint32_t)id;
}

/* The event of key e. */
static inline event ev_event(evkey e)
{
    return (event){ev_time((uint64_t)(e >> 64)), (uint32_t)(e >> 32), (int32_t)(uint32_t)e};
}

/* An empty queue whose ids 0 .. nw - 1 (the workers) own slots. */
static inline void heap_init(heap *h, int nw)
{
    memset(h, 0, sizeof *h);
    h->nw = nw;
    h->pend = -1;
}

/* Frees what the queue holds; h is then empty (heap_init before reuse). */
static inline void heap_free(heap *h)
{
    free(h->ha);
    free(h->node);
    h->ha = h->node = NULL;
}

/* --- the 4-ary heap: (i - 1) / 4 is i's parent, 4 i + 1 .. 4 i + 4 its children; half
 * the levels of a binary heap, and a node's children lie side by side */
#define HEAP_D 4

/* Puts e in the hole at i, moving the hole up past the parents e goes before. */
static inline void heap4_rise(evkey *a, size_t i, evkey e)
{
    while (i > 0) {
        size_t p = (i - 1) / HEAP_D;
        if (!(e < a[p]))
            break;
        a[i] = a[p];
        i = p;
    }
    a[i] = e;
}

static inline int heap4_push(heap *h, evkey e)
{
    if (h->hn == h->hcap) {
        evkey *na = array_grow(h->ha, &h->hcap, 64, sizeof *na);
        if (!na)
            return -1;
        h->ha = na;
    }
    heap4_rise(h->ha, h->hn++, e);
    return 0;
}

/* The earliest of the children c .. c + 3 of a node (those below n; c < n), without
 * branches when all four are there. */
static inline size_t heap4_least_child(const evkey *a, size_t c, size_t n)
{
    if (c + 3 < n) {
        size_t x = c + (size_t)(a[c + 1] < a[c]);
        size_t y = c + 2 + (size_t)(a[c + 3] < a[c + 2]);
        return a[y] < a[x] ? y : x;
    }
    size_t m = c;
    for (size_t j = c + 1; j < n; j++)
        if (a[j] < a[m])
            m = j;
    return m;
}

/* Removes the earliest event of the 4-ary heap (hn > 0). The hole left at the root goes
 * down the earliest child to a leaf, and the last event rises from there into it (it
 * came from the bottom, so it rarely rises far). */
static inline evkey heap4_pop(heap *h)
{
    evkey top = h->ha[0], last = h->ha[--h->hn];
    size_t i = 0, n = h->hn;
    if (!n)
        return top;
    for (;;) {
        size_t c = HEAP_D * i + 1;
        if (c >= n)
            break;
        c = heap4_least_child(h->ha, c, n);
        h->ha[i] = h->ha[c];
        i = c;
    }
    heap4_rise(h->ha, i, last);
    return top;
}

/* --- the slot tree */

/* The slot of event id: a worker's own; -1 for the others. */
static inline int tree_slot(const heap *h, int id)
{
    return id >= 0 && id < h->nw ? id : -1;
}

/* Slot i's event changed: each node above it takes the earlier of its two children, one
 * walk to the root without branches on the keys (each step's comparison is a toss-up
 * the branch predictor would miss half the time). */
static inline void tree_fix(heap *h, int i)
{
    evkey *nd = h->node;
    size_t j = (size_t)h->L + (size_t)i;
    evkey c = nd[j];
    for (; j > 1; j >>= 1) {
        evkey o = nd[j ^ 1];
        c = o < c ? o : c;
        nd[j >> 1] = c;
    }
}

/* The popped slot's event is gone: clears it before anything reads the tree. */
static inline void tree_settle(heap *h)
{
    if (h->pend >= 0) {
        int i = h->pend;
        h->pend = -1;
        h->node[(size_t)h->L + (size_t)i] = EV_EMPTY;
        tree_fix(h, i);
    }
}

/* Room for slot i: the tree grows to a power of two above it, rebuilt. 0 or -1. */
static inline int tree_grow(heap *h, int i)
{
    tree_settle(h);
    int L = h->L ? h->L : 64;
    while (L <= i)
        L *= 2;
    evkey *nd = malloc(2 * (size_t)L * sizeof *nd);
    if (!nd)
        return -1;
    for (int k = 0; k < L; k++)
        nd[L + k] = k < h->L ? h->node[h->L + k] : EV_EMPTY;
    for (int j = L - 1; j >= 1; j--)
        nd[j] = nd[2 * j + 1] < nd[2 * j] ? nd[2 * j + 1] : nd[2 * j];
    free(h->node);
    h->node = nd;
    h->L = L;
    return 0;
}

/* --- the queue */

/* heap_put's rarer cases: a slot beyond the tree (grown first), a worker's event while its
 * slot is full, any other event (the 4-ary heap). 0 or -1 (memory). */
static __attribute__((noinline)) int heap_put_slow(heap *h, evkey e, int id)
{
    int i = tree_slot(h, id);
    if (i >= 0) {
        if (i >= h->L && tree_grow(h, i))
            return -1;
        evkey *lf = &h->node[(size_t)h->L + (size_t)i];
        if (i == h->pend || *lf == EV_EMPTY) {
            if (i == h->pend)
                h->pend = -1;
            *lf = e;
            tree_fix(h, i);
            h->count++;
            return 0;
        }
    }
    if (heap4_push(h, e))
        return -1;
    h->count++;
    return 0;
}

/* Inserts an event with insertion number seq (see heap_push_seq). 0 or -1 (memory). The
 * usual case inline: a worker refills the slot its event was popped from, or an empty
 * one. */
static inline int heap_put(heap *h, double t, int id, uint32_t seq)
{
    evkey e = ev_key(t, seq, id);
    if (id >= 0 && id < h->nw && id < h->L) {
        evkey *lf = &h->node[(size_t)h->L + (size_t)id];
        if (id == h->pend || *lf == EV_EMPTY) {
            h->pend = id == h->pend ? -1 : h->pend;
            *lf = e;
            tree_fix(h, id);
            h->count++;
            return 0;
        }
    }
    return heap_put_slow(h, e, id);
}

/* Posts event id at time t, after every event posted before it at the same time. 0 or -1
 * (memory). */
static inline int heap_push(heap *h, double t, int id)
{
    return heap_put(h, t, id, h->seq++);
}

/* Inserts an event with a sequence number reserved earlier (h->seq advanced past it), so
 * that it takes the place among equal-time events that a push at reservation time would
 * have: the grouped ring steps (sim/engine_ring.c) post a hop's end late with it. */
static inline int heap_push_seq(heap *h, double t, int id, uint32_t seq)
{
    return heap_put(h, t, id, seq);
}

/* The number of events pending. */
static inline size_t heap_count(const heap *h)
{
    return h->count;
}

/* The earliest pending event's key (count > 0). */
static inline const evkey *heap_first(heap *h)
{
    tree_settle(h);
    const evkey *t = h->L ? &h->node[1] : NULL;
    if (h->hn && (!t || h->ha[0] < *t))
        return &h->ha[0];
    return t;
}

/* 1 when an event at (t, seq) would run before every pending one. */
static inline int heap_before(heap *h, double t, uint32_t seq)
{
    if (!h->count)
        return 1;
    return ev_key(t, seq, 0) < *heap_first(h);
}

/* Removes the earliest event (count > 0). */
static inline event heap_pop(heap *h)
{
    const evkey *f = heap_first(h);
    evkey e;
    if (h->hn && f == &h->ha[0]) {
        e = heap4_pop(h);
    } else {
        e = *f;
        h->pend = tree_slot(h, (int32_t)(uint32_t)e);  /* cleared when the tree is read
                                                          next, unless refilled */
    }
    h->count--;
    return ev_event(e);
}

#endif
