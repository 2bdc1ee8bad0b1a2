/* test_sim_eventq.c: the engine's event queue (sim/eventq.h) against a plain list scanned
 * for its earliest (time, insertion number) event: the same events come out in the same
 * order whatever mix of workers' slots, a second event of a full slot, ids without a slot
 * (transfers, groups), reserved insertion numbers, slot growth and "would this run first"
 * questions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sim/eventq.h"

typedef struct ref {
    event e[4096];
    int n;
} ref;

static void ref_put(ref *r, double t, uint32_t seq, int id)
{
    cr_assert_lt(r->n, 4096);
    r->e[r->n++] = (event){t == 0 ? 0.0 : t, seq, id};
}

/* The index of r's earliest event by (time, insertion number), or -1. */
static int ref_first(const ref *r)
{
    int m = -1;
    for (int i = 0; i < r->n; i++)
        if (m < 0 || r->e[i].t < r->e[m].t ||
            (r->e[i].t == r->e[m].t && r->e[i].seq < r->e[m].seq))
            m = i;
    return m;
}

static event ref_pop(ref *r)
{
    int m = ref_first(r);
    event e = r->e[m];
    r->e[m] = r->e[--r->n];
    return e;
}

static uint64_t rng = 88172645463325252ULL;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* An event id: a worker (0 .. nw - 1), a transfer (negative; up to ntx of them), or a
 * group (nw and above: no slot). */
static int some_id(int nw, int ntx)
{
    unsigned k = rnd(10);
    if (k < 5)
        return (int)rnd((unsigned)nw);
    if (k < 9)
        return -1 - (int)rnd((unsigned)ntx);
    return nw + (int)rnd(8);
}

/* Runs as the engine does: pop the earliest, then post 0-3 events at or after its time
 * (often its own id again, often at equal times), sometimes with a reserved insertion
 * number, asking heap_before on the way. */
static void run_mix(int nw, int ntx, int steps, int coarse)
{
    heap h;
    heap_init(&h, nw);
    h.seq = 1000; /* 0 .. 999 are never an event's: heap_before asks with them */
    ref r = {.n = 0};
    for (int w = 0; w < nw; w++) {
        ref_put(&r, 0.0, h.seq, w);
        cr_assert_eq(heap_push(&h, 0.0, w), 0);
    }
    for (int s = 0; s < steps && r.n; s++) {
        cr_assert_eq(heap_count(&h), (size_t)r.n);
        event want = ref_pop(&r), got = heap_pop(&h);
        cr_assert(got.t == want.t && got.seq == want.seq && got.id == want.id,
                  "step %d: popped (%g, %u, %d), expected (%g, %u, %d)", s, got.t, got.seq,
                  got.id, want.t, want.seq, want.id);
        int k = (int)rnd(4);
        if (r.n < 8)
            k = 3;
        for (int j = 0; j < k && r.n < 4000; j++) {
            double dt = coarse ? (double)rnd(3) : rnd(4) == 0 ? 0.0 : (double)rnd(1000) * 1e-3;
            int id = j == 0 && rnd(2) ? got.id : some_id(nw, ntx);
            if (rnd(8) == 0) { /* a reserved number, posted late as engine_ring.c does */
                uint32_t seq = h.seq;
                h.seq += 3;
                ref_put(&r, got.t + dt, seq + 1, id);
                cr_assert_eq(heap_push_seq(&h, got.t + dt, id, seq + 1), 0);
            } else {
                ref_put(&r, got.t + dt, h.seq, id);
                cr_assert_eq(heap_push(&h, got.t + dt, id), 0);
            }
        }
        if (rnd(4) == 0) { /* would (t, seq) run before every pending event? */
            double t = got.t + (double)rnd(3) * (coarse ? 1.0 : 1e-3);
            uint32_t seq = rnd(2) ? h.seq : rnd(1000);
            int f = ref_first(&r);
            int before = f < 0 || t < r.e[f].t || (t == r.e[f].t && seq < r.e[f].seq);
            cr_assert_eq(heap_before(&h, t, seq), before, "step %d: heap_before", s);
        }
    }
    heap_free(&h);
}

Test(eventq, pops_in_time_then_insertion_order)
{
    run_mix(4, 8, 20000, 1);    /* equal times everywhere */
    run_mix(64, 100, 50000, 0); /* the engine's sizes */
    run_mix(3, 600, 50000, 0);  /* many transfers */
    run_mix(600, 20, 50000, 0); /* many workers: the slots grow past 64, then 512 */
}

Test(eventq, negative_zero_and_negative_times)
{
    heap h;
    heap_init(&h, 2);
    cr_assert_eq(heap_push(&h, 0.0, 0), 0);
    cr_assert_eq(heap_push(&h, -0.0, 1), 0);  /* taken as +0.0: after the first */
    cr_assert_eq(heap_push(&h, -1.5, -1), 0);
    cr_assert_eq(heap_push(&h, 1e300, -2), 0);
    cr_assert_eq(heap_push(&h, -1e-300, 7), 0);
    double t[] = {-1.5, -1e-300, 0.0, 0.0, 1e300};
    int id[] = {-1, 7, 0, 1, -2};
    for (int i = 0; i < 5; i++) {
        event e = heap_pop(&h);
        cr_assert(e.t == t[i] && e.id == id[i] && !signbit(e.t) == !(t[i] < 0),
                  "pop %d: (%g, %d), expected (%g, %d)", i, e.t, e.id, t[i], id[i]);
    }
    cr_assert_eq(heap_count(&h), 0);
    cr_assert(heap_before(&h, 5.0, 0));
    heap_free(&h);
}
