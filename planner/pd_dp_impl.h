/* pd_dp_impl.h: the inside of PipeDream's hierarchical dynamic program (internal to
 * planner/), shared by its files: pd_dp.c (rows, the search and the read-back of the
 * plan), pd_dp_col.c (level-0 columns) and pd_dp_bounds.c (the bounds that prune). Every
 * pruning keeps the values and choices of the plain program: only what is above what can
 * still matter is skipped, each file says why. */
#ifndef PLUMB_PD_DP_IMPL_H
#define PLUMB_PD_DP_IMPL_H

#include <stdint.h>

#include "pd_dp.h"

#define PD_NO_MM (-2) /* a lower row computed without pd_dp_top_need */
/* pd_dp_suffix_prepare computes the columns where the rest fits on one machine before the top
 * row only when they are at most 1/PD_EAGER_SHARE of the states: a column costs about as
 * much as a row, and the top row computes the ones it meets anyway */
#define PD_EAGER_SHARE 16

typedef struct choice {
    int k;      /* split state, -1 for the base case */
    int mprev;  /* machine index of the prefix */
    int r;      /* machines of the last stage */
} choice;

struct pd_dp {
    const pd_lattice *l;
    const pd_options *o;
    const pd_cost *cost;
    int n, top;
    double *mat[PD_MAX_LEVELS];   /* L < top: mat[L][j * (n+1) + s+1] = T_L(s, j, M_L - 1) */
    char *done[PD_MAX_LEVELS];    /* done[L][s+1]: row s of level L computed */
    double *rowbound[PD_MAX_LEVELS]; /* the bound row s of level L was computed with */
    char *rownl[PD_MAX_LEVELS];   /* level top-1: row s computed without the column ends
                                     (iscol; before pd_dp_suffix_prepare, the last state) */
    double cmax2;                 /* the largest compute of a state other than the last */
    int *rowmm[PD_MAX_LEVELS];    /* level top-1: the top prefix's fewest machines - 1
                                     behind the request of row s (see pd_dp_top_need): -1 for
                                     the top's row (no prefix), PD_NO_MM for none */
    double bound[PD_MAX_LEVELS];  /* values above it cannot matter (see pd_dp_solve) */
    double scale[PD_MAX_LEVELS];  /* machines at and below L: T_L(s, j) >= C(s, j) / scale */
    int colmode;                  /* level 0 below a two-level top is filled by columns */
    int lastcol;                  /* two levels, more top machines: level 0's rows are
                                     computed without the last state, its column instead */
    char *coldone;                /* coldone[j]: column j of level 0 computed */
    double *Gp;                   /* column scratch [(n+1) * M_0]: each start's rest values */
    double *Gpm;                  /* [(n+1) * M_0]: their prefix minima */
    int *Gfirst;                  /* [n]: each start's first finite one (M_0: none) */
    double *colkb;                /* [n]: per-start bounds of a column (pd_dp_col_bounds) */
    int *sn;                      /* two levels with lastcol and a finite bound: the fewest
                                     top machines the rest (j, end] can need (see
                                     pd_dp_suffix_prepare) */
    double *minc;                 /* [n * M_top]: minc[j][q] = the least C(o) over o = j or
                                     a descendant of j whose rest needs at most q machines */
    double *mincnl;               /* the same over the ends that are not columns */
    char *iscol;                  /* iscol[j]: in lastmode the top level takes T_0(k, j)
                                     from column j: the last state and every j whose rest
                                     fits on one top machine (sn[j] <= 1) */
    double *toprow;               /* T_top(-1, j, M - 1) */
    choice *topch;                /* choices of the top row, [n * M_top] */
    double *f[PD_MAX_LEVELS];     /* scratch [n * M_L] per level */
    choice *ch[PD_MAX_LEVELS];    /* scratch choices [n * M_L] */
};

/* PipeDream's single stage of inner time `inner` replicated r times (its base case):
 * (inner + 4 (r-1) P / (B r) / W) / r, W the machines below. */
static inline double pd_base(const void *ctx, int level, double inner, double P, int r,
                             double B, int W)
{
    (void)ctx;
    (void)level;
    int m = r - 1;
    double dp = ((double)(4 * m) * P) / (B * (double)(m + 1));
    dp /= (double)W;
    return (inner + dp) / (double)(m + 1);
}

/* Makes sure row (L, s) is in mat[L], exact up to bnd (see pd_dp.c). 0, or -1 when out of
 * memory. */
int pd_dp_need_row(pd_dp *d, int L, int s, double bnd, int mm, int nl);

/* T_L(s, e, M_L - 1) exact up to bnd (+INFINITY above it), from the entries of row s that
 * lead to e only, computed aside (mat is left as it was). NAN when out of memory. */
double pd_dp_row_value(pd_dp *d, int L, int s, int e, double bnd);

/* Column j of level 0 into mat[0] (pd_dp_col.c): T_0(k, j, M-1) for every ancestor k,
 * exact up to bnd, or up to kb[k] for each k when kb is not NULL. */
void pd_dp_col(pd_dp *d, int j, double bnd, const double *kb);

/* The per-start bounds of column j into d->colkb, for the top bound bt and the top row's
 * entries f (NULL: before the top row). */
void pd_dp_col_bounds(pd_dp *d, int j, double bt, const double *f);

/* The top machines the rest (j, end] needs at least within bnd on top level L (0 when bnd
 * is not finite). */
int pd_dp_top_suf(const pd_dp *d, int L, double bnd, int j);

/* Lowers eps[m] to the bound up to which entry (j, m) of row s of level top-1 matters. */
void pd_dp_top_need(const pd_dp *d, int L, int s, int j, int mm, int nl, double *eps);

/* The bound rbk[k] the top level needs the lower row of split state k to (-1: not at all)
 * and the prefix's fewest machines - 1 rmm[k]; nocol: ends with a column do not count. */
void pd_dp_top_rbk(const pd_dp *d, int L, double bnd, int k, const double *fk, int nocol,
                   double *rbk, int *rmm);

/* Two levels with lastcol and a finite top bound: sn, iscol and the minc tables (the last
 * state's column and, when few, the other column ends' too). 0, or -1 when out of memory. */
int pd_dp_suffix_prepare(pd_dp *d);

/* An upper bound on the top level's optimum (+INFINITY when none is known), NAN when out
 * of memory. */
double pd_dp_upper_bound(pd_dp *d);

#endif
