/* pd_dp.c: PipeDream's hierarchical dynamic program (compute_partitioning in
 * optimizer_graph_hierarchical.py), over the antichain states of pd_lattice.
 *
 * One row = one start s: for every end state j containing s and every machine count m it
 * holds the best slowest-stage time f[j][m], from a single stage (the base case) or from a
 * split at a state k (s < k < j) whose last stage (k, j] runs on r machines:
 *     max(f[k][m - r], last(k, j, r)),
 * with last() = (inner time + 4 (r-1) P / (B r)) / r, the inner time being the compute
 * time at level 0 and the best time one level down above it. Ties keep the first
 * candidate in this order: the base case (or the use_fewer_machines copy), then k in
 * ascending state order, then r ascending. None in PipeDream is +INFINITY here. */
#include "pd_dp_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double pd_split_cost(const void *ctx, int level, double inner, double P, int r,
                            double B, int W)
{
    (void)ctx;
    (void)level;
    (void)W; /* PipeDream's split does not divide by the machines below */
    double t = inner + ((double)(4 * (r - 1)) * P) / (B * (double)r);
    return t / (double)r;
}

const pd_cost pd_cost_pipedream = {pd_base, pd_split_cost, NULL};

/* Python's math.ceil(a / b) for non-negative ints a and positive b. */
static double ceil_div(int a, int b)
{
    return (double)((a + b - 1) / b);
}

/* The columns' scratch (colmode, lastcol). 0, or -1 when out of memory (pd_dp_free frees
 * what was allocated). */
static int col_alloc(pd_dp *d)
{
    const size_t n1 = (size_t)d->n + 1, M0 = (size_t)d->o->machines[0];
    d->coldone = calloc(n1, 1);
    d->Gp = malloc(n1 * M0 * sizeof(double));
    d->Gpm = malloc(n1 * M0 * sizeof(double));
    d->colkb = malloc(n1 * sizeof(double));
    d->Gfirst = malloc(n1 * sizeof(int));
    return d->coldone && d->Gp && d->Gpm && d->colkb && d->Gfirst ? 0 : -1;
}

pd_dp *pd_dp_new(const pd_lattice *l, const pd_options *o)
{
    pd_dp *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->l = l;
    d->o = o;
    d->cost = o->cost ? o->cost : &pd_cost_pipedream;
    d->n = l->n;
    d->top = o->nlevels - 1;
    d->cmax2 = -INFINITY;
    for (int j = 0; j + 1 < d->n; j++)
        if (l->C[j] > d->cmax2) d->cmax2 = l->C[j];
    for (int L = 0; L < o->nlevels; L++) {
        size_t sz = (size_t)d->n * (size_t)o->machines[L];
        d->f[L] = malloc(sz * sizeof(double));
        d->ch[L] = malloc(sz * sizeof(choice));
        if (!d->f[L] || !d->ch[L]) goto oom;
        d->bound[L] = INFINITY;
        d->scale[L] = (L ? d->scale[L - 1] : 1.0) * o->machines[L];
        if (L < d->top) {
            d->mat[L] = malloc((size_t)d->n * ((size_t)d->n + 1) * sizeof(double));
            d->done[L] = calloc((size_t)d->n + 1, 1);
            d->rowbound[L] = malloc(((size_t)d->n + 1) * sizeof(double));
            d->rowmm[L] = malloc(((size_t)d->n + 1) * sizeof(int));
            d->rownl[L] = calloc((size_t)d->n + 1, 1);
            if (!d->mat[L] || !d->done[L] || !d->rowbound[L] || !d->rowmm[L] || !d->rownl[L])
                goto oom;
            for (int s = 0; s <= d->n; s++) d->rowmm[L][s] = PD_NO_MM;
        }
    }
    /* Columns: with two levels, the top level needs T_0(k, j) for the pairs it meets; a
     * column (one end j, every start k) comes from the recursion on the first stage, which
     * runs over the same partitions with the same stage formulas, so its values are the
     * rows' values. Not with the memory constraint or -m, whose checks depend on the
     * machines before a stage. Used when the top level has 2 machines: then only plans
     * that end at the last state can split, and one column replaces a row per split state
     * (with more top machines, many columns cost more than the rows the bounds leave). */
    if (o->nlevels == 2 && o->machines[1] == 2 && !o->use_memory_constraint &&
        o->machines_in_first_level <= 0 &&
        d->cost == &pd_cost_pipedream && o->machines[0] <= 64) {
        d->colmode = 1;
        if (col_alloc(d)) goto oom;
    } else if (o->nlevels == 2 && !o->use_memory_constraint && o->machines_in_first_level <= 0 &&
               !(o->activation_compression_ratio > 0) && !o->use_fewer_machines &&
               d->cost == &pd_cost_pipedream && o->machines[0] <= 64 && o->machines[1] <= 64) {
        /* The last state's entry of a level-0 row is needed only for the top row's last
         * entry, and almost every row is: one column (as in colmode, the same values)
         * gives T_0(k, last) for every k, so the rows skip the last state and pd_dp_top_need
         * leaves out everything that only leads there. */
        d->lastcol = 1;
        if (col_alloc(d)) goto oom;
    }
    return d;
oom:
    pd_dp_free(d);
    return NULL;
}

void pd_dp_free(pd_dp *d)
{
    if (!d) return;
    for (int L = 0; L < PD_MAX_LEVELS; L++) {
        free(d->mat[L]);
        free(d->done[L]);
        free(d->rowbound[L]);
        free(d->rowmm[L]);
        free(d->rownl[L]);
        free(d->f[L]);
        free(d->ch[L]);
    }
    free(d->coldone);
    free(d->Gp);
    free(d->Gfirst);
    free(d->Gpm);
    free(d->colkb);
    free(d->sn);
    free(d->minc);
    free(d->mincnl);
    free(d->iscol);
    free(d->toprow);
    free(d->topch);
    free(d);
}

static int row_compute(pd_dp *d, int L, int s, double bnd, int mm, int nl, double *out,
                       int ostride, choice *keep, int target);

/* Makes sure row (L, s) is in mat[L] (column storage: entry j at j * (n+1) + s+1), exact
 * up to bnd (entries above it may read +INFINITY); mm != PD_NO_MM (level top-1 only): the
 * row serves top-level stages after a prefix on at least mm + 1 top machines (mm = -1:
 * the top row's first stage), and its entries are exact up to pd_dp_top_need's smaller bounds;
 * nl (with mm): not for the column ends (d->iscol: their entries stay the columns'). A row
 * computed before with a smaller bound, for fewer prefix machines or without the column
 * ends is computed again. The flags are kept (rowmm, rownl): pd_dp_split recomputes a row
 * with those of its last computation, so its choices are the ones behind the values the
 * level above used. */
int pd_dp_need_row(pd_dp *d, int L, int s, double bnd, int mm, int nl)
{
    int pm = d->rowmm[L][s + 1];
    if (d->done[L][s + 1] && d->rowbound[L][s + 1] >= bnd &&
        (pm == PD_NO_MM || (mm != PD_NO_MM && pm <= mm)) && (!d->rownl[L][s + 1] || nl))
        return 0;
    d->rowmm[L][s + 1] = mm;
    d->rownl[L][s + 1] = (char)(mm != PD_NO_MM && nl);
    if (row_compute(d, L, s, bnd, d->rowmm[L][s + 1], d->rownl[L][s + 1], d->mat[L] + s + 1,
                    d->n + 1, NULL, -1))
        return -1;
    d->done[L][s + 1] = 1;
    d->rowbound[L][s + 1] = bnd;
    return 0;
}

/* Can split state k give a candidate of some m that matters, with PipeDream's split
 * formula (see row_compute: sp, cap, eps, ub)? pk: the prefix minima of k's entries, ikj:
 * the last stage's inner time. A candidate (m, r) is at least pk[m - r] (the prefix's best
 * on m - r + 1 or fewer machines, rising with r) and at least ikj / r (falling with r; the
 * formula adds a non-negative term before dividing, also in rounding); it matters only
 * below min(sp, cap) and at most min(eps, ub). The smallest r whose last-stage bound passes
 * gives the smallest prefix bound among those that do, so testing it alone decides whether
 * any r of m can matter (ties keep the earlier candidate, so equal to sp is not enough). */
static int pair_useful(double ikj, const double *pk, const double *sp, const double *cap,
                       const double *eps, const double *ub, const double *inv_r,
                       int min_machines, int M, int rmax)
{
    int useful = ikj < 0; /* rounding: no monotonicity, try all */
    for (int m = min_machines; m < M && !useful; m++) {
        if (cap[m] == -INFINITY) continue;
        int rm = m < rmax ? m : rmax;
        double thr = sp[m] < cap[m] ? sp[m] : cap[m];
        double e2 = eps[m] < ub[m] ? eps[m] : ub[m];
        double t = thr < e2 ? thr : e2;
        if (!(t > 0)) continue;
        /* the weakest bound first (prefix on m, last stage on rm machines), cheap */
        double w = ikj * inv_r[rm];
        if (pk[m - 1] > w) w = pk[m - 1];
        if (!(w < thr && w <= e2)) continue;
        int r = 1;
        if (!isinf(t)) {
            double q = ikj / t;
            r = q < (double)rm ? (int)q : rm;
            if (r < 1) r = 1;
        }
#define PD_LAST_OK(x) (ikj * inv_r[x] < thr && ikj * inv_r[x] <= e2)
        while (r > 1 && PD_LAST_OK(r - 1)) r--;
        while (r <= rm && !PD_LAST_OK(r)) r++;
#undef PD_LAST_OK
        if (r > rm) continue;
        double pl = pk[m - r];
        useful = pl < thr && pl <= e2;
    }
    return useful;
}

/* The next end after j in row s (every state for s = -1, else s's strict descendants,
 * ascending); n when none. */
static int next_in_row(const pd_lattice *l, int s, int j)
{
    int i = j + 1;
    if (s < 0 || i >= l->n) return i < l->n ? i : l->n;
    const uint64_t *ds = l->desc + (size_t)s * l->swords;
    int w = i >> 6;
    uint64_t bits = ds[w] & (~0ull << (i & 63));
    while (!bits) {
        if (++w >= l->swords) return l->n;
        bits = ds[w];
    }
    int k = w * 64 + __builtin_ctzll(bits);
    return k < l->n ? k : l->n;
}

/* What row_compute knows of the row (L, s) it computes, shared with its pieces (row_end
 * and below): the level's constants, the row's work arrays and, per end j, the bounds and
 * best splits so far (sp, spc for each machine count m). */
typedef struct row_ctx {
    pd_dp *d;
    const pd_lattice *l;
    const pd_cost *cost;
    int L, s, M, W, ld, first, min_machines, maxm, rmax, mem, native, lastmode;
    int do_dp;                         /* splits allowed (not the top's later rows) */
    int hintok;                        /* ub from the previous end's splits (hint) */
    int mm, nl;                        /* as for pd_dp_need_row */
    double bnd, B, memsize, ratio;
    const double *lowmat;              /* the level below's matrix (L > 0) */
    double *f;                         /* d->f[L]: f[j * M + m] */
    choice *ch;                        /* d->ch[L], alike */
    double *fmin, *pmin, *rbk;
    int *rmm;
    double *bs, *sp, *ls, *cap, *eps, *ub; /* per m: single stage, best split, ... */
    choice *spc;
    const double *sync_r, *inv_r;
    int hint[64], nhint;               /* split states to try first (level 0) */
} row_ctx;

/* The inner time of a last stage (k, j] (*ikjp), computing the lower row it comes from
 * when needed. Returns 1, 0 when no candidate of split state k can matter (every prefix
 * at k out of bounds, or the last stage too slow), -1 out of memory. */
static int row_split_inner(const row_ctx *c, int j, int k, const double *fk, double tmax,
                           double *ikjp)
{
    pd_dp *d = c->d;
    const pd_lattice *l = c->l;
    const int L = c->L, M = c->M, ld = c->ld, rmax = c->rmax, native = c->native;
    const int lastmode = c->lastmode;
    const double bnd = c->bnd, *fmin = c->fmin, *inv_r = c->inv_r, *lowmat = c->lowmat;
    double *rbk = c->rbk;
    int *rmm = c->rmm;
    if (fmin[k] > bnd || fmin[k] > tmax) return 0; /* every prefix at k out of bounds */
    if (L == 0 && native && (l->C[j] - l->C[k]) * inv_r[rmax] > tmax) return 0;
    double ikj;
    if (L == 0) {
        ikj = l->C[j] - l->C[k];
    } else if ((d->colmode && L == d->top) || (lastmode && d->iscol[j])) {
        ikj = lowmat[(size_t)j * ld + k + 1];
    } else {
        if (L == d->top) {
            /* once per k: a prefix at k on m' + 1 machines leaves at most
             * M-1-m' for the last stage, whose time is at least
             * T_{L-1}(k, j) / r (and top_rmax with a finite bound). When
             * no r can give a candidate within the bound, every candidate
             * of k is above it or in an entry set to +INFINITY: skipping
             * them changes no finite entry and no choice behind one. */
            if (rbk[k] == -2)
                pd_dp_top_rbk(d, L, bnd, k, fk, lastmode, rbk, rmm);
            if (rbk[k] < 0) return 0; /* cannot matter */
            /* with lastmode, without the last state (see there) */
            if (pd_dp_need_row(d, L - 1, k, rbk[k], rmm[k], lastmode)) return -1;
        } else if (!d->done[L - 1][k + 1]) {
            int mmin = -1;
            for (int m = 0; m < M && mmin < 0; m++)
                if (fk[m] <= bnd) mmin = m;
            if (mmin < 0 || mmin == M - 1) return 0; /* cannot matter */
            if (pd_dp_need_row(d, L - 1, k, INFINITY, PD_NO_MM, 0)) return -1;
        }
        ikj = lowmat[(size_t)j * ld + k + 1];
    }
    *ikjp = ikj;
    return 1;
}

/* Tries split state k for end j: every machine count m whose entry it can still change,
 * the last stage (k, j] (inner time ikj) on r machines after the prefix at k (fk) on
 * m - r + 1; keeps the best in c->sp and c->spc. */
static void row_split_at(const row_ctx *c, int j, int k, const double *fk, double ikj)
{
    const pd_lattice *l = c->l;
    const pd_cost *cost = c->cost;
    const int L = c->L, M = c->M, W = c->W, n = c->d->n, min_machines = c->min_machines;
    const int rmax = c->rmax, mem = c->mem, native = c->native;
    const double B = c->B, memsize = c->memsize, ratio = c->ratio;
    const double *pmin = c->pmin, *cap = c->cap, *eps = c->eps, *ub = c->ub;
    const double *sync_r = c->sync_r, *inv_r = c->inv_r;
    double *sp = c->sp, *ls = c->ls;
    choice *spc = c->spc;
    if (native && !mem && !(ratio > 0) &&
        !pair_useful(ikj, pmin + (size_t)k * M, sp, cap, eps, ub, inv_r,
                     min_machines, M, rmax))
        return; /* no candidate of k can matter */
    double Pkj = l->P[j] - l->P[k];
    double Akj = l->Act[j] - l->Act[k];
    if (native) /* PipeDream's split cost with the divisions hoisted (the
                   results differ from it by at most a few ulps) */
        for (int r = 1; r <= rmax; r++)
            ls[r] = (ikj + Pkj * sync_r[r]) * inv_r[r];
    else
        for (int r = 1; r <= rmax; r++)
            ls[r] = cost->split(cost->ctx, L, ikj, Pkj, r, B, W);
    if (!mem && !(ratio > 0)) { /* the common case, kept tight */
        /* Only candidates below min(sp[m], cap[m]) and at most eps[m]
         * can change the entry or its choice (see cap). The last stage
         * takes at least ikj / r (PipeDream's formula adds a non-negative
         * term before the division, also in rounding), falling with r;
         * the prefix at least pmin[k][m - r], its best on m - r + 1 or
         * fewer machines, rising with r: so the r worth trying form one
         * range, entered past the first and left at the second. */
        const double *pk = pmin + (size_t)k * M;
        for (int m = min_machines; m < M; m++) {
            if (cap[m] == -INFINITY) continue;
            int rm = m < rmax ? m : rmax;
            double best = sp[m];
            const double cp = cap[m], e = eps[m];
            int br = 0, r = 1;
            if (native)
                while (r <= rm && (ikj * inv_r[r] >= best ||
                                   ikj * inv_r[r] >= cp || ikj * inv_r[r] > e))
                    r++;
            for (; r <= rm; r++) {
                double pl = pk[m - r];
                if (pl >= best || pl >= cp || pl > e) break;
                double pre = fk[m - r];
                double pt = pre > ls[r] ? pre : ls[r];
                if (pt < best) {
                    best = pt;
                    br = r;
                }
            }
            if (br) {
                sp[m] = best;
                spc[m] = (choice){k, m - br, br};
            }
        }
        return;
    }
    for (int m = min_machines; m < M; m++) {
        if (cap[m] == -INFINITY) continue;
        int rm = m < rmax ? m : rmax;
        for (int r = 1; r <= rm; r++) {
            double pre = fk[m - r];
            if (isinf(pre)) continue;
            if (mem && (Akj + Pkj) * ceil_div(M - (m + 1), r) > memsize)
                continue;
            double pt = pre > ls[r] ? pre : ls[r];
            if (ratio > 0) {
                double tin = (2.0 * l->OAS[k]) / (B * (double)r) / ratio;
                if (tin > pt) pt = tin;
                if (j < n - 1) {
                    double tout = (2.0 * l->OAS[j]) / (B * (double)r) / ratio;
                    if (tout > pt) pt = tout;
                }
            }
            if (pt < sp[m]) {
                sp[m] = pt;
                spc[m] = (choice){k, m - r, r};
            }
        }
    }
}

/* Sets end j's entries to +INFINITY: every plan of (s, j] is slower than the bound (or
 * none of j's entries matters). */
static void row_end_none(const row_ctx *c, int j, int keepout, double *out, int ostride)
{
    const int M = c->M;
    double *fj = c->f + (size_t)j * M;
    choice *cj = c->ch + (size_t)j * M;
    if (keepout) out[(size_t)j * ostride] = INFINITY;
    for (int m = 0; m < M; m++) {
        fj[m] = INFINITY;
        cj[m] = (choice){-1, -1, m + 1};
    }
    c->fmin[j] = INFINITY;
    for (int m = 0; m < M; m++) c->pmin[(size_t)j * M + m] = INFINITY;
}

/* The single stage (s, j] (inner time `inner`, parameters Psj, activations Asj) on m + 1
 * machines, PipeDream's base case, into c->bs[m]: +INFINITY where it does not fit
 * (memory constraint), where the first level's machine count rules it out, or beyond a
 * straight pipeline's one machine. Clears the best splits (c->sp) too. */
static void row_end_single(const row_ctx *c, double inner, double Psj, double Asj)
{
    const int M = c->M, first = c->first;
    double *bs = c->bs, *sp = c->sp;
    for (int m = 0; m < M; m++) {
        bs[m] = INFINITY;
        sp[m] = INFINITY;
    }
    for (int m = 0; m < c->maxm; m++) {
        double stash = ceil_div(M - (m + 1), m + 1) * (Asj + Psj);
        if (c->mem && stash > c->memsize) continue;
        if (first > 0 && m != first - 1) continue;
        if (isinf(inner)) continue;
        bs[m] = c->native ? pd_base(NULL, c->L, inner, Psj, m + 1, c->B, c->W)
                          : c->cost->base(c->cost->ctx, c->L, inner, Psj, m + 1, c->B, c->W);
    }
}

/* cap[m]: a split of (s, j] (compute Csj) on m + 1 machines matters only below it,
 * -INFINITY when none can. A split wins only when strictly below the single stage (or the
 * use_fewer_machines copy, itself at most the single stage), and an entry above bnd reads
 * +INFINITY; when the split's lower bound (every stage takes at least its compute over its
 * machines and over the machines below, so the slowest at least C(s, j) over all of them,
 * less a slack for the rounding of sums) is not below the single stage, or is above bnd,
 * or the rest of the model cannot fit (suf), no split can change the entry or its choice
 * and none is tried. Returns whether some entry of j on several machines can still be in
 * a plan. */
static int row_end_caps(const row_ctx *c, int j, double Csj, int suf)
{
    const pd_dp *d = c->d;
    const int M = c->M, n = d->n;
    const double unit = c->L ? d->scale[c->L - 1] : 1.0;
    const double cl = Csj * (1.0 - 1e-9) - 1e-12 * c->l->C[n - 1];
    double *cap = c->cap;
    int any = 0;
    for (int m = 0; m < M; m++) {
        double lbm = cl / ((double)(m + 1) * unit);
        int live = m >= c->min_machines && m + 1 + suf <= M && lbm < c->bs[m] &&
                   lbm <= c->eps[m];
        cap[m] = live ? c->bs[m] : -INFINITY;
        any |= live;
    }
    if (c->lastmode && j == n - 1) { /* only the answer's entry is ever read (no
                                       use_fewer_machines copy in lastcol) */
        for (int m = 0; m < M - 1; m++) cap[m] = -INFINITY;
        any = cap[M - 1] != -INFINITY;
    }
    return any;
}

/* The level-0 columns end j's splits read, computed on first use: in column mode a last
 * stage on r <= M-1 top machines; in lastmode the last state's column and those of the
 * ends whose rest fits on one top machine (d->iscol). */
static void row_end_columns(const row_ctx *c, int j)
{
    pd_dp *d = c->d;
    const double bnd = c->bnd;
    const int M = c->M;
    if (c->L == d->top && d->colmode && !d->coldone[j]) pd_dp_col(d, j, bnd * (M - 1), NULL);
    if (c->lastmode && j == d->n - 1 && !d->coldone[j]) pd_dp_col(d, j, bnd * (M - 1), NULL);
    if (c->lastmode && d->iscol[j] && !d->coldone[j]) {
        pd_dp_col_bounds(d, j, bnd, c->f);
        pd_dp_col(d, j, bnd, d->colkb);
    }
}

/* ub[m]: the value of some split candidate of (j, m), at least the best one: a candidate
 * whose lower bound is above it can be neither the minimum nor equal to it, so it cannot
 * be chosen. From the split states chosen for the previous end (c->hint: neighbouring
 * states often split alike), with row_split_at's arithmetic (level 0, PipeDream's
 * formula, no memory constraint or compression). */
static void row_end_hint_bounds(const row_ctx *c, int j)
{
    const pd_lattice *l = c->l;
    const int M = c->M, rmax = c->rmax, sw = l->swords;
    const double *sync_r = c->sync_r, *inv_r = c->inv_r;
    double *ls = c->ls, *ub = c->ub;
    const uint64_t *aj = l->anc + (size_t)j * sw;
    const uint64_t *ds = c->s < 0 ? NULL : l->desc + (size_t)c->s * sw;
    for (int h = 0; h < c->nhint; h++) {
        int k = c->hint[h];
        if (!pd_bit(aj, k) || (ds && !pd_bit(ds, k)) || c->fmin[k] > c->bnd) continue;
        const double *fk = c->f + (size_t)k * M;
        double ikj = l->C[j] - l->C[k], Pkj = l->P[j] - l->P[k];
        for (int r = 1; r <= rmax; r++) ls[r] = (ikj + Pkj * sync_r[r]) * inv_r[r];
        for (int m = c->min_machines; m < M; m++) {
            int rm = m < rmax ? m : rmax;
            for (int r = 1; r <= rm; r++) {
                double pre = fk[m - r];
                double pt = pre > ls[r] ? pre : ls[r];
                if (pt < ub[m]) ub[m] = pt;
            }
        }
    }
}

/* Tries every split state k of (s, j] (the ancestors of j that descend from s), keeping
 * the best split per machine count in c->sp, c->spc. 0, or -1 out of memory. */
static int row_end_splits(const row_ctx *c, int j)
{
    const pd_lattice *l = c->l;
    const int M = c->M, sw = l->swords;
    const double *cap = c->cap, *eps = c->eps, *ub = c->ub;
    const uint64_t *aj = l->anc + (size_t)j * sw;
    const uint64_t *ds = c->s < 0 ? NULL : l->desc + (size_t)c->s * sw;
    /* tmax: no candidate above it can matter for any m (see cap, eps, ub); a candidate is
     * at least its prefix's best (fmin) and, with PipeDream's formula, its last stage's
     * ikj / rmax */
    double tmax = -INFINITY;
    for (int m = 0; m < M; m++) {
        if (cap[m] == -INFINITY) continue;
        double t = cap[m] < eps[m] ? cap[m] : eps[m];
        if (ub[m] < t) t = ub[m];
        if (t > tmax) tmax = t;
    }
    for (int w = 0; w < sw; w++) {
        uint64_t bits = aj[w] & (ds ? ds[w] : ~0ull);
        while (bits) {
            int k = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            const double *fk = c->f + (size_t)k * M;
            double ikj;
            int use = row_split_inner(c, j, k, fk, tmax, &ikj);
            if (use < 0) return -1;
            if (use) row_split_at(c, j, k, fk, ikj);
        }
    }
    return 0;
}

/* End j's entries from the single stage, the use_fewer_machines copy and the best split
 * (ties keep that order), +INFINITY above the bound, above eps or where the rest cannot
 * fit (suf); then out (keepout), the split states as the next end's hints, and the prefix
 * minima (pmin, fmin). */
static void row_end_pick(row_ctx *c, int j, int suf, int keepout, double *out, int ostride)
{
    const int M = c->M, min_machines = c->min_machines;
    const int fewer = c->d->o->use_fewer_machines;
    const double *bs = c->bs, *sp = c->sp, *eps = c->eps;
    const choice *spc = c->spc;
    double *fj = c->f + (size_t)j * M;
    choice *cj = c->ch + (size_t)j * M;
    for (int m = 0; m < M; m++) {
        double v = bs[m];
        choice ci = {-1, -1, m + 1};
        if (c->do_dp && m >= min_machines) {
            if (fewer && m > 0 && (isinf(bs[m]) || fj[m - 1] < bs[m])) {
                v = fj[m - 1];
                ci = cj[m - 1];
            }
            if (sp[m] < v) {
                v = sp[m];
                ci = spc[m];
            }
        }
        if (v > c->bnd || v > eps[m] || m + 1 + suf > M) v = INFINITY;
        fj[m] = v;
        cj[m] = ci;
    }
    if (keepout) out[(size_t)j * ostride] = fj[M - 1];
    if (c->hintok) { /* this end's split states, for the next end */
        int nh = 0;
        for (int m = min_machines; m < M; m++) {
            int k = spc[m].k, seen = 0;
            if (!(sp[m] < INFINITY) || k < 0) continue;
            for (int h = 0; h < nh; h++) seen |= c->hint[h] == k;
            if (!seen) c->hint[nh++] = k;
        }
        if (nh) c->nhint = nh;
    }
    double lo = INFINITY;
    for (int m = 0; m < M; m++) {
        if (fj[m] < lo) lo = fj[m];
        c->pmin[(size_t)j * M + m] = lo;
    }
    c->fmin[j] = lo;
}

/* Computes end j of the row: f[j][m] and ch[j][m] for every m, out[j * ostride] unless
 * the entry stays its column's (nl). 0, or -1 out of memory. */
static int row_end(row_ctx *c, int j, double *out, int ostride)
{
    pd_dp *d = c->d;
    const pd_lattice *l = c->l;
    const int M = c->M, L = c->L, s = c->s;
    /* nl: a column end's entry stays the column's (the row's is bounded for the other
     * ends); its f entries are still the prefixes of later ends */
    const int keepout = !(c->nl && d->iscol && d->iscol[j]);
    double Csj = s < 0 ? l->C[j] : l->C[j] - l->C[s];
    /* eps[m]: entry (j, m) matters only up to it (the bound, or pd_dp_top_need's); when no
     * entry of j matters, all read +INFINITY, as the full computation would give */
    for (int m = 0; m < M; m++) c->eps[m] = c->bnd;
    int dead = 0;
    if (c->mm != PD_NO_MM) {
        pd_dp_top_need(d, L, s, j, c->mm, c->nl, c->eps);
        dead = 1;
        for (int m = 0; m < M; m++) dead &= c->eps[m] == -INFINITY;
    }
    if (dead || Csj / d->scale[L] > c->bnd) { /* every plan of (s, j] is slower */
        row_end_none(c, j, keepout, out, ostride);
        return 0;
    }
    double inner = L == 0 ? Csj : c->lowmat[(size_t)j * c->ld + s + 1];
    /* On the top level with a finite bound, the rest of the model (j, end] needs at
     * least suf machines: each stage on r machines takes at least its compute divided
     * by r and by every machine below, and must stay within the bound. An entry on
     * m + 1 machines with m + 1 + suf > M cannot be part of a plan within the bound. */
    int suf = L == d->top ? pd_dp_top_suf(d, L, c->bnd, j) : 0;
    double Psj = s < 0 ? l->P[j] : l->P[j] - l->P[s];
    double Asj = s < 0 ? l->Act[j] : l->Act[j] - l->Act[s];
    row_end_single(c, inner, Psj, Asj);
    const int split = c->do_dp && M > c->min_machines && row_end_caps(c, j, Csj, suf);
    if (split) row_end_columns(c, j);
    for (int m = 0; m < M; m++) c->ub[m] = INFINITY;
    if (split && c->hintok) row_end_hint_bounds(c, j);
    if (split && row_end_splits(c, j)) return -1;
    row_end_pick(c, j, suf, keepout, out, ostride);
    return 0;
}

/* Computes row (L, s): out[j * ostride] = T_L(s, j, M - 1) (+INFINITY when None, when j
 * is not in the row, or when above bnd, a value no caller can use); when keep is not NULL
 * the choices are copied there ([n * M]). Lower rows (or, in column mode, level-0 columns)
 * are computed on first use, and never for a split state whose every prefix time is above
 * the bound. mm, nl: as for pd_dp_need_row (PD_NO_MM, 0: no pd_dp_top_need bounds, every
 * end). target >= 0: only the entries of target and its ancestors are computed (the
 * others, out and choices alike, are left as they were), enough for target's value and
 * split. 0 or -1 (out of memory). */
static int row_compute(pd_dp *d, int L, int s, double bnd, int mm, int nl, double *out,
                       int ostride, choice *keep, int target)
{
    const pd_lattice *l = d->l;
    const pd_options *o = d->o;
    const int n = d->n, M = o->machines[L], sw = l->swords;
    const double B = o->bandwidth_Bps[L];
    const int rmax = o->straight ? 1 : M - 1;
    const int native = d->cost == &pd_cost_pipedream && M <= 64;
    const int mem = o->use_memory_constraint;
    const double ratio = o->activation_compression_ratio;
    double small[6 * 64];
    choice splitch[64];
    double sync_r[65], inv_r[65];
    for (int r = 1; r <= 64 && r <= rmax; r++) {
        sync_r[r] = (double)(4 * (r - 1)) / (B * (double)r);
        inv_r[r] = 1.0 / (double)r;
    }
    double *fmin = malloc((size_t)n * sizeof *fmin);
    double *pmin = malloc((size_t)n * M * sizeof *pmin); /* prefix minima of f[k][0..m] */
    /* top level: the bound its lower row k is needed to, -1 for none, -2 not yet known */
    double *rbk = malloc((size_t)n * sizeof *rbk);
    int *rmm = malloc((size_t)n * sizeof *rmm); /* and the prefix's fewest machines */
    double *bigbuf = NULL;
    choice *bigch = NULL;
    int rc = -1; /* out of memory until the row is done */
    if (!fmin || !pmin || !rbk || !rmm) goto done;
    for (int k = 0; k < n; k++) rbk[k] = -2;
    if (M > 64) {
        bigbuf = malloc((size_t)M * 6 * sizeof *bigbuf);
        bigch = malloc((size_t)M * sizeof *bigch);
        if (!bigbuf || !bigch) goto done;
    }
    double *v = M > 64 ? bigbuf : small;
    const int vs = M > 64 ? M : 64;
    row_ctx c = {
        .d = d, .l = l, .cost = d->cost, .L = L, .s = s, .M = M,
        .W = L == 0 ? 1 : o->machines[L - 1], .ld = n + 1,
        .first = o->machines_in_first_level,
        .min_machines = o->machines_in_first_level > 0 ? o->machines_in_first_level : 1,
        .maxm = o->straight ? 1 : M, .rmax = rmax, .mem = mem, .native = native,
        /* lastmode (see lastcol): the top row computes its lower rows without the last
         * state; at the last state the inner times come from one level-0 column */
        .lastmode = L == d->top && s < 0 && d->lastcol && isfinite(bnd),
        .do_dp = !(L == d->top && s >= 0), .hintok = native && !mem && !(ratio > 0) && L == 0,
        .mm = mm, .nl = nl, .bnd = bnd, .B = B, .memsize = o->memory_bytes, .ratio = ratio,
        .lowmat = L > 0 ? d->mat[L - 1] : NULL, .f = d->f[L], .ch = d->ch[L],
        .fmin = fmin, .pmin = pmin, .rbk = rbk, .rmm = rmm,
        .bs = v, .sp = v + vs, .ls = v + 2 * vs, .cap = v + 3 * vs, .eps = v + 4 * vs,
        .ub = v + 5 * vs, .spc = M > 64 ? bigch : splitch, .sync_r = sync_r, .inv_r = inv_r,
        .nhint = 0,
    };

    /* the top row's single stages (-1, j] on m + 1 <= M - pd_dp_top_suf(j) machines use
     * T_{L-1}(-1, j) <= (m + 1) bnd: pd_dp_top_need with mm = -1 */
    if (L > 0 && pd_dp_need_row(d, L - 1, s, L == d->top ? bnd * M : INFINITY,
                                L == d->top && s < 0 && isfinite(bnd) ? -1 : PD_NO_MM, 0))
        goto done;
    /* only the row's own entries (s's descendants) are ever read: each is written below */
    for (int j = next_in_row(l, s, -1); j < n; j = next_in_row(l, s, j)) {
        if (target >= 0 && j != target) { /* only what target's plans use */
            if (j > target) break;
            if (!pd_bit(l->anc + (size_t)target * sw, j)) continue;
        }
        if (nl && j == n - 1) continue; /* its column's value stays */
        if (row_end(&c, j, out, ostride)) goto done;
    }
    if (keep) memcpy(keep, d->ch[L], (size_t)n * M * sizeof *keep);
    rc = 0;
done:
    free(fmin);
    free(pmin);
    free(rbk);
    free(rmm);
    free(bigbuf);
    free(bigch);
    return rc;
}

double pd_dp_solve(pd_dp *d)
{
    int M = d->o->machines[d->top];
    if (!d->toprow) {
        d->toprow = malloc((size_t)d->n * sizeof *d->toprow);
        d->topch = malloc((size_t)d->n * M * sizeof *d->topch);
        if (!d->toprow || !d->topch) return NAN;
        double ub = pd_dp_upper_bound(d);
        if (isnan(ub)) return NAN;
        d->bound[d->top] = ub;
        if (d->lastcol && d->top == 1 && isfinite(ub) && pd_dp_suffix_prepare(d)) return NAN;
        if (row_compute(d, d->top, -1, ub, PD_NO_MM, 0, d->toprow, 1, d->topch, -1))
            return NAN;
    }
    return d->toprow[d->n - 1];
}

double pd_dp_row_value(pd_dp *d, int L, int s, int e, double bnd)
{
    double *row = malloc((size_t)d->n * sizeof *row);
    if (!row) return NAN;
    row[e] = INFINITY;
    double v = row_compute(d, L, s, bnd, PD_NO_MM, 0, row, 1, NULL, e) ? NAN : row[e];
    free(row);
    return v;
}

int pd_dp_split(pd_dp *d, int level, int s, int e, pd_split *out)
{
    int M = d->o->machines[level];
    choice *ch;
    const double *row;
    choice *owned = NULL;
    double *orow = NULL;
    if (level == d->top && s < 0) {
        if (isnan(pd_dp_solve(d))) return -1;
        ch = d->topch;
        row = d->toprow;
    } else {
        owned = malloc((size_t)d->n * M * sizeof *owned);
        orow = malloc((size_t)d->n * sizeof *orow);
        double rb = level == d->top ? d->bound[level]
                : d->done[level] && d->done[level][s + 1] ? d->rowbound[level][s + 1]
                                                          : INFINITY;
        /* the flags of the row's last computation (none for a row never computed) */
        int mm = level < d->top ? d->rowmm[level][s + 1] : PD_NO_MM;
        int nl = level < d->top ? d->rownl[level][s + 1] : 0;
        /* a row computed without the column ends, for a stage ending at one: that stage
         * took its time T from the column, and the row's bounds did not count its end; the
         * row without pd_dp_top_need's bounds, exact up to T (every candidate as good as T
         * has its entries within it), gives its split */
        if (nl && d->iscol[e]) {
            mm = PD_NO_MM;
            nl = 0;
            rb = d->mat[level][(size_t)e * (d->n + 1) + s + 1] * (1.0 + 1e-9);
            if (!(rb < INFINITY)) rb = INFINITY;
        }
        int rc = owned && orow ? row_compute(d, level, s, rb, mm, nl, orow, 1, owned, e) : -1;
        if (rc) {
            free(owned);
            free(orow);
            return -1;
        }
        ch = owned;
        row = orow;
    }
    int cnt = 0;
    if (isinf(row[e])) {
        cnt = -1;
    } else {
        int j = e, m = M - 1;
        for (;;) {
            choice c = ch[(size_t)j * M + m];
            if (c.k < 0) {
                out[cnt++] = (pd_split){s, j, c.r};
                break;
            }
            out[cnt++] = (pd_split){c.k, j, c.r};
            j = c.k;
            m = c.mprev;
        }
        for (int a = 0, b = cnt - 1; a < b; a++, b--) {
            pd_split t = out[a];
            out[a] = out[b];
            out[b] = t;
        }
    }
    free(owned);
    free(orow);
    return cnt;
}
