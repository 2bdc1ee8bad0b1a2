/* pd_dp.h: PipeDream's hierarchical dynamic program over antichain states (internal to
 * planner/). Level 0 is the innermost level. For a level L, a start s (-1 = the beginning
 * of the model, else a state) and an end state j that contains s, T_L(s, j, m) is the best
 * slowest-stage time for the nodes of j not in s on m+1 machines of level L (at most m+1
 * with use_fewer_machines); the level above uses T_L(s, j, M_L - 1) as a stage's compute
 * time. Only the top level's row s = -1 is needed for the answer; lower rows are computed
 * on demand and cached. */
#ifndef PLUMB_PD_DP_H
#define PLUMB_PD_DP_H

#include "pd_lattice.h"
#include "planner.h"

typedef struct pd_dp pd_dp;

/* A stage of one level's split of (s, e]: states (start, end], replicas. */
typedef struct pd_split {
    int start, end, replicas;
} pd_split;

/* Creates the solver over l with options o (both must outlive it). NULL when out of
 * memory. */
pd_dp *pd_dp_new(const pd_lattice *l, const pd_options *o);
void pd_dp_free(pd_dp *d);

/* The optimum T_top(-1, last state, M_top - 1); +INFINITY when no plan exists, NAN when out
 * of memory. */
double pd_dp_solve(pd_dp *d);

/* The stages of level L's optimal split of (s, e] on all M_L machines (the choice behind
 * T_L(s, e, M_L - 1)). Fills out[0..n-1] in order and returns n, or -1 when out of memory
 * or when (s, e] has no plan. out needs room for M_L entries. */
int pd_dp_split(pd_dp *d, int level, int s, int e, pd_split *out);

#endif
