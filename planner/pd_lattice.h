/* pd_lattice.h: the planning graph and its antichain states, as PipeDream's planner sees
 * them (internal to planner/). A state is a down-closed set of graph nodes (an "ideal"),
 * named by its antichain of maximal nodes; states are the ones PipeDream's
 * Graph.antichain_dag() reaches from the first source, and the ancestors of a state are the
 * states from which it is reachable in that DAG. */
#ifndef PLUMB_PD_LATTICE_H
#define PLUMB_PD_LATTICE_H

#include <stdint.h>

#include "err.h"
#include "profile.h"

/* A planning node: one or more profile layers (several after branch compression). */
typedef struct pd_node {
    double c;          /* (forward + backward) / 1000 / speed, seconds */
    double act;        /* activation bytes */
    double param;      /* parameter bytes */
    int nmembers;
    int *members;      /* profile layer indices */
    int nin, nout;
    int *in, *out;     /* neighbour node indices */
} pd_node;

typedef struct pd_lattice {
    int nnodes;
    pd_node *nodes;     /* in a topological order */
    int nwords;         /* uint64 words per node bitset */
    int start;          /* node the enumeration starts from */
    int *removed_src;   /* profile layers removed as Input sources (-1 terminated) */
    int *removed_sink;  /* profile layers removed as __getitem__ sinks (-1 terminated) */
    int compressed;     /* 0, 1 (branches compressed), 2 (topological prefixes) */
    int n;              /* states */
    uint64_t *ideal;    /* [n * nwords]: nodes of each state */
    double *C, *Act, *P, *OAS; /* [n] sums over the state's nodes; OAS over its augmented
                                  antichain (only filled when want_oas) */
    int swords;         /* uint64 words per state bitset */
    uint64_t *anc;      /* [n * swords]: strict ancestors in the antichain DAG */
    uint64_t *desc;     /* [n * swords]: strict descendants (transpose of anc) */
} pd_lattice;

/* Builds the lattice of p: drops Input sources and __getitem__ sinks as PipeDream does,
 * enumerates the antichain states from the first remaining source in start_order (NULL:
 * layer order), sorted by size then by their sorted layer lists (the last state is the
 * whole graph). When more than max_states states appear, compresses branches and tries
 * again, then plans over the prefixes of the topological order. speed divides compute
 * times.
 * Returns a new lattice or NULL with err set. */
pd_lattice *pd_lattice_build(const profile *p, const int *start_order, double speed,
                             int max_states, int want_oas, plumb_err *err);

void pd_lattice_free(pd_lattice *l);

static inline int pd_bit(const uint64_t *s, int i)
{
    return (int)((s[i >> 6] >> (i & 63)) & 1u);
}

#endif
