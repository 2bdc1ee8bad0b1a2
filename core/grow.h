/* grow.h: how an array that is appended to one element at a time makes room: its capacity
 * doubles (from a first capacity when empty), and a size whose byte count would overflow
 * is refused rather than wrapped. Arrays counted in size_t grow by array_grow, those
 * counted in int by array_room, an aligned block moved by hand by array_next_cap.
 * Header-only so that the simulator's hot loop inlines it. */
#ifndef PLUMB_GROW_H
#define PLUMB_GROW_H

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

/* The capacity an array of cap elements of elem bytes each grows to: twice cap (first
 * when cap is 0), or 0 when that count or its size in bytes would overflow. For a caller
 * that moves the array itself (an aligned block); the others call array_grow. */
static inline size_t array_next_cap(size_t cap, size_t first, size_t elem)
{
    size_t nc = cap ? 2 * cap : first;
    return nc < cap || nc > SIZE_MAX / elem ? 0 : nc;
}

/* Reallocates the array p of *cap elements of elem bytes each to array_next_cap's
 * capacity. Returns the new block (the caller stores it in place of p) with *cap updated,
 * or NULL when memory runs out or the size would overflow: p and *cap are then unchanged
 * and p still owned by the caller. */
static inline void *array_grow(void *p, size_t *cap, size_t first, size_t elem)
{
    size_t nc = array_next_cap(*cap, first, elem);
    void *np = nc ? realloc(p, nc * elem) : NULL;
    if (np)
        *cap = nc;
    return np;
}

/* Room for one more element in the array p of n used of *cap elements (int counts) of elem
 * bytes each: p itself when n < *cap, else p grown as array_grow grows it (doubling from
 * first) with *cap updated. NULL when memory runs out or the count would pass INT_MAX: p
 * and *cap are then unchanged and p still owned by the caller. */
static inline void *array_room(void *p, int n, int *cap, int first, size_t elem)
{
    if (n < *cap)
        return p;
    if (*cap < 0 || *cap > INT_MAX / 2 || first < 1)
        return NULL;
    size_t c = (size_t)*cap;
    void *np = array_grow(p, &c, (size_t)first, elem);
    if (np)
        *cap = (int)c;
    return np;
}

#endif
