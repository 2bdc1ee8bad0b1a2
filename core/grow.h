/* grow.h: how an array that is appended to one element at a time makes room: its capacity
 * doubles (from a first capacity when empty), and a size whose byte count would overflow
 * is refused rather than wrapped. Header-only so that the simulator's hot loop inlines it. */
#ifndef PLUMB_GROW_H
#define PLUMB_GROW_H

#include <stdint.h>
#include <stdlib.h>

/* Reallocates the array p of *cap elements of elem bytes each to twice *cap (first when
 * *cap is 0). Returns the new block (the caller stores it in place of p) with *cap updated,
 * or NULL when memory runs out or the size would overflow: p and *cap are then unchanged
 * and p still owned by the caller. */
static inline void *array_grow(void *p, size_t *cap, size_t first, size_t elem)
{
    size_t nc = *cap ? 2 * *cap : first;
    if (nc < *cap || nc > SIZE_MAX / elem)
        return NULL;
    void *np = realloc(p, nc * elem);
    if (np)
        *cap = nc;
    return np;
}

#endif
