/* eventq.h: the data structures of the simulator's engine, header-only so that the hot
 * loop inlines them: a 4-ary min-heap of events ordered by (time, insertion number), and
 * a small open-addressing hash table from (uint64, uint64) keys to ints. Internal to sim/. */
#ifndef PLUMB_SIM_EVENTQ_H
#define PLUMB_SIM_EVENTQ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The order of an event's time as an unsigned integer: the IEEE bits of a double, the
 * negatives' flipped, compare as the doubles do (-0.0 is made +0.0 at the push; times
 * are never NaN: the model's costs are checked finite). */
static inline uint64_t ev_tkey(double t)
{
    uint64_t u;
    memcpy(&u, &t, sizeof u);
    return u ^ ((uint64_t)((int64_t)u >> 63) | 0x8000000000000000ULL);
}

/* x before y: (time, insertion number), without branches (the heap's comparisons are
 * data dependent and mispredict). */
static inline int ev_less(const event *x, const event *y)
{
    uint64_t a = ev_tkey(x->t), b = ev_tkey(y->t);
    return (a < b) | ((a == b) & (x->seq < y->seq));
}

/* The heap has 4 children a node: (i - 1) / 4 is i's parent, 4 i + 1 .. 4 i + 4 its
 * children; half the levels of a binary heap, and a node's children lie side by side. */
#define HEAP_D 4

/* Puts e in the hole at i, moving the hole up past the parents e goes before. */
static inline void heap_rise(heap *h, size_t i, event e)
{
    while (i > 0) {
        size_t p = (i - 1) / HEAP_D;
        if (!ev_less(&e, &h->a[p]))
            break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
}

static inline int heap_push(heap *h, double t, int id)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 256;
        event *na = realloc(h->a, nc * sizeof *na);
        if (!na)
            return -1;
        h->a = na;
        h->cap = nc;
    }
    event e = {t == 0 ? 0.0 : t, h->seq++, id};
    heap_rise(h, h->n++, e);
    return 0;
}

/* Inserts an event with a sequence number reserved earlier (h->seq advanced past it), so
 * that it takes the place among equal-time events that a push at reservation time would
 * have: the grouped ring steps (sim/engine_ring.c) post a hop's end late with it. */
static inline int heap_push_seq(heap *h, double t, int id, uint32_t seq)
{
    uint32_t keep = h->seq;
    h->seq = seq;
    int rc = heap_push(h, t, id);
    h->seq = keep;
    return rc;
}

/* The earliest of the children c .. c + 3 of a node (those below n; c < n), without
 * branches when all four are there. */
static inline size_t heap_least_child(const event *a, size_t c, size_t n)
{
    if (c + 3 < n) {
        size_t x = c + (size_t)ev_less(&a[c + 1], &a[c]);
        size_t y = c + 2 + (size_t)ev_less(&a[c + 3], &a[c + 2]);
        return ev_less(&a[y], &a[x]) ? y : x;
    }
    size_t m = c;
    for (size_t j = c + 1; j < n; j++)
        if (ev_less(&a[j], &a[m]))
            m = j;
    return m;
}

/* Removes the earliest event. The hole left at the root goes down the earliest child to
 * a leaf, and the last event rises from there into it (it came from the bottom, so it
 * rarely rises far): fewer comparisons than sifting the last event down from the root.
 * (time, insertion number) is a strict order, so the events come out in the same order
 * either way, and in the same order as from any other heap. */
static inline event heap_pop(heap *h)
{
    event top = h->a[0], last = h->a[--h->n];
    size_t i = 0, n = h->n;
    if (!n)
        return top;
    for (;;) {
        size_t c = HEAP_D * i + 1;
        if (c >= n)
            break;
        c = heap_least_child(h->a, c, n);
        h->a[i] = h->a[c];
        i = c;
    }
    heap_rise(h, i, last);
    return top;
}

#endif
