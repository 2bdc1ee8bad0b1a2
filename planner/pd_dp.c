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
#include "pd_dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PD_NO_MM (-2) /* a lower row computed without top_need */
/* suffix_prepare computes the columns where the rest fits on one machine before the top
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
                                     (iscol; before suffix_prepare, the last state) */
    double cmax2;                 /* the largest compute of a state other than the last */
    int *rowmm[PD_MAX_LEVELS];    /* level top-1: the top prefix's fewest machines - 1
                                     behind the request of row s (see top_need): -1 for
                                     the top's row (no prefix), PD_NO_MM for none */
    double bound[PD_MAX_LEVELS];  /* values above it cannot matter (see pd_dp_solve) */
    double scale[PD_MAX_LEVELS];  /* machines at and below L: T_L(s, j) >= C(s, j) / scale */
    int colmode;                  /* level 0 below a two-level top is filled by columns */
    int lastcol;                  /* two levels, more top machines: level 0's rows are
                                     computed without the last state, its column instead */
    char *coldone;                /* coldone[j]: column j of level 0 computed */
    double *G, *Gp;               /* column scratch [(n+1) * M_0] */
    double *Gmin;                 /* [n]: the least of each start's Gp entries */
    int *Gfirst;                  /* [n]: the first finite one (M_0: none) */
    double *colkb;                /* [n]: per-start bounds of a column (col_bounds) */
    int *sn;                      /* two levels with lastcol and a finite bound: the fewest
                                     top machines the rest (j, end] can need (suffix_prepare) */
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

static double pd_base(const void *ctx, int level, double inner, double P, int r, double B,
                      int W)
{
    (void)ctx;
    (void)level;
    int m = r - 1;
    double dp = ((double)(4 * m) * P) / (B * (double)(m + 1));
    dp /= (double)W;
    return (inner + dp) / (double)(m + 1);
}

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
        d->coldone = calloc((size_t)d->n + 1, 1);
        d->G = malloc(((size_t)d->n + 1) * o->machines[0] * sizeof(double));
        d->Gp = malloc(((size_t)d->n + 1) * o->machines[0] * sizeof(double));
        d->Gmin = malloc(((size_t)d->n + 1) * sizeof(double));
        d->colkb = malloc(((size_t)d->n + 1) * sizeof(double));
        d->Gfirst = malloc(((size_t)d->n + 1) * sizeof(int));
        if (!d->coldone || !d->G || !d->Gp || !d->Gmin || !d->colkb || !d->Gfirst) goto oom;
    } else if (o->nlevels == 2 && !o->use_memory_constraint && o->machines_in_first_level <= 0 &&
               !(o->activation_compression_ratio > 0) && !o->use_fewer_machines &&
               d->cost == &pd_cost_pipedream && o->machines[0] <= 64 && o->machines[1] <= 64) {
        /* The last state's entry of a level-0 row is needed only for the top row's last
         * entry, and almost every row is: one column (as in colmode, the same values)
         * gives T_0(k, last) for every k, so the rows skip the last state and top_need
         * leaves out everything that only leads there. */
        d->lastcol = 1;
        d->coldone = calloc((size_t)d->n + 1, 1);
        d->G = malloc(((size_t)d->n + 1) * o->machines[0] * sizeof(double));
        d->Gp = malloc(((size_t)d->n + 1) * o->machines[0] * sizeof(double));
        d->Gmin = malloc(((size_t)d->n + 1) * sizeof(double));
        d->colkb = malloc(((size_t)d->n + 1) * sizeof(double));
        d->Gfirst = malloc(((size_t)d->n + 1) * sizeof(int));
        if (!d->coldone || !d->G || !d->Gp || !d->Gmin || !d->colkb || !d->Gfirst) goto oom;
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
    free(d->G);
    free(d->Gp);
    free(d->Gmin);
    free(d->Gfirst);
    free(d->colkb);
    free(d->sn);
    free(d->minc);
    free(d->mincnl);
    free(d->iscol);
    free(d->toprow);
    free(d->topch);
    free(d);
}

static int row_compute(pd_dp *d, int L, int s, double bnd, double *out, int ostride,
                       choice *keep, int target);

/* Makes sure row (L, s) is in mat[L] (column storage: entry j at j * (n+1) + s+1), exact
 * up to bnd (entries above it may read +INFINITY); mm != PD_NO_MM (level top-1 only): the
 * row serves top-level stages after a prefix on at least mm + 1 top machines (mm = -1:
 * the top row's first stage), and its entries are exact up to top_need's smaller bounds;
 * nl (with mm): not for the last state (its entry reads +INFINITY). A row computed before
 * with a smaller bound, for fewer prefix machines or without the last state is computed
 * again. pd_dp_split recomputes a row with the flags of its last computation, so its
 * choices are the ones behind the values the level above used. */
static int need_row(pd_dp *d, int L, int s, double bnd, int mm, int nl)
{
    int pm = d->rowmm[L][s + 1];
    if (d->done[L][s + 1] && d->rowbound[L][s + 1] >= bnd &&
        (pm == PD_NO_MM || (mm != PD_NO_MM && pm <= mm)) && (!d->rownl[L][s + 1] || nl))
        return 0;
    d->rowmm[L][s + 1] = mm;
    d->rownl[L][s + 1] = (char)(mm != PD_NO_MM && nl);
    if (row_compute(d, L, s, bnd, d->mat[L] + s + 1, d->n + 1, NULL, -1)) return -1;
    d->done[L][s + 1] = 1;
    d->rowbound[L][s + 1] = bnd;
    return 0;
}

/* Column j of level 0 into mat[0]: T_0(k, j, M-1) for k = -1 and every ancestor k of j.
 * G[k][m]: the best time for (k, j] on m+1 machines (at most, with use_fewer_machines)
 * whose first stage is a single stage (PipeDream's base case, no transfer terms); Gp[k][m]:
 * the same where the first stage follows a split (split formula and, with a compression
 * ratio, its input and output transfers). Starts are taken from the end backwards.
 * Values above bnd cannot matter to the caller and read +INFINITY. Entries of rows computed
 * before are overwritten with the same values up to bnd. With kb, start k's bound is
 * kb[k] instead, at least that of every ancestor of k (so each rest (k2, j] a plan of (k, j]
 * within its bound uses is exact up to it); -INFINITY: no value of k is needed. */
static void col_compute(pd_dp *d, int j, double bnd, const double *kb)
{
    const pd_lattice *l = d->l;
    const pd_options *o = d->o;
    const int n = d->n, M = o->machines[0], sw = l->swords, ld = n + 1;
    const double B = o->bandwidth_Bps[0], ratio = o->activation_compression_ratio;
    const int straight = o->straight, fewer = o->use_fewer_machines;
    double sync_r[65], inv_r[65];
    for (int r = 1; r <= M && r <= 64; r++) {
        sync_r[r] = (double)(4 * (r - 1)) / (B * (double)r);
        inv_r[r] = 1.0 / (double)r;
    }
    const uint64_t *aj = l->anc + (size_t)j * sw;
    double *gpmin = d->Gmin; /* gpmin[k2]: the least rest value of k2, all m */
    int *rfirst = d->Gfirst; /* rfirst[k2]: its first finite rest entry (M: none) */
    /* k = -1 is no rest and its entry is row -1's: the starts stop at 0 */
    for (int k = j - 1; k >= 0; k--) {
        if (!pd_bit(aj, k)) continue;
        if (kb) bnd = kb[k];
        double *g = d->G + (size_t)(k + 1) * M, *gp = d->Gp + (size_t)(k + 1) * M;
        double Ckj = l->C[j] - l->C[k];
        double Pkj = l->P[j] - l->P[k];
        double tin = 0, toutj = 0;
        for (int m = 0; m < M; m++) {
            g[m] = INFINITY;
            gp[m] = INFINITY;
        }
        gpmin[k] = INFINITY;
        rfirst[k] = M;
        if (Ckj / M > bnd) { /* every plan of (k, j] is slower than the bound */
            d->mat[0][(size_t)j * ld + k + 1] = INFINITY;
            continue;
        }
        for (int m = 0; m < (straight ? 1 : M); m++) {
            g[m] = pd_base(NULL, 0, Ckj, Pkj, m + 1, B, 1);
            double v = (Ckj + Pkj * sync_r[m + 1]) * inv_r[m + 1];
            if (ratio > 0) {
                tin = (2.0 * l->OAS[k]) / (B * (double)(m + 1)) / ratio;
                if (tin > v) v = tin;
                if (j < n - 1) {
                    toutj = (2.0 * l->OAS[j]) / (B * (double)(m + 1)) / ratio;
                    if (toutj > v) v = toutj;
                }
            }
            gp[m] = v;
        }
        if (M > 1) {
            /* a first stage (k, k2] on r <= M-1 machines takes at least C(k, k2) / (M-1)
             * (rounding is monotone), and the rest at least gpmin[k2]: a candidate above
             * bnd ends in an entry that reads +INFINITY, so none of k2 is tried when either
             * is above it */
            const double c1max = bnd * (double)(M - 1), blim = bnd * (1.0 + 1e-9);
            const uint64_t *dk = l->desc + (size_t)k * sw;
            for (int w = 0; w < sw; w++) {
                uint64_t bits = aj[w] & dk[w];
                while (bits) {
                    int k2 = w * 64 + __builtin_ctzll(bits);
                    bits &= bits - 1;
                    double C1 = l->C[k2] - l->C[k];
                    if (gpmin[k2] > bnd || C1 > c1max) continue;
                    const double *rest = d->Gp + (size_t)(k2 + 1) * M;
                    double P1 = l->P[k2] - l->P[k];
                    /* both first-stage formulas take at least C1 / r: the r below the
                     * first that brings it within bnd give only candidates above it */
                    int r0 = (int)(C1 / bnd);
                    if (r0 < 1) r0 = 1;
                    while (r0 > 1 && !(C1 * inv_r[r0 - 1] > blim)) r0--;
                    while (r0 < M - 1 && C1 * inv_r[r0] > blim) r0++;
                    if (straight && r0 > 1) continue;
                    const int rlast = straight ? 1 : M - 1;
                    for (int r = r0; r <= rlast; r++) {
                        double firstp = (C1 + P1 * sync_r[r]) * inv_r[r];
                        if (ratio > 0) {
                            double a = (2.0 * l->OAS[k]) / (B * (double)r) / ratio;
                            if (a > firstp) firstp = a;
                            if (k2 < n - 1) {
                                double b = (2.0 * l->OAS[k2]) / (B * (double)r) / ratio;
                                if (b > firstp) firstp = b;
                            }
                        }
                        const double *rr = rest - r; /* rr[m] = rest[m - r] */
                        for (int m = r + rfirst[k2]; m < M; m++) {
                            double vp = firstp > rr[m] ? firstp : rr[m];
                            if (vp < gp[m]) gp[m] = vp;
                        }
                        /* g (first stage PipeDream's base case) is read only at M - 1,
                         * except with use_fewer_machines; a rest not below it gives
                         * no better candidate */
                        for (int m = fewer ? r : M - 1; m < M; m++)
                            if (rr[m] < g[m]) {
                                double first = pd_base(NULL, 0, C1, P1, r, B, 1);
                                if (first > rr[m] ? first < g[m] : 1)
                                    g[m] = first > rr[m] ? first : rr[m];
                            }
                    }
                }
            }
        }
        if (fewer)
            for (int m = 1; m < M; m++) {
                if (g[m - 1] < g[m]) g[m] = g[m - 1];
                if (gp[m - 1] < gp[m]) gp[m] = gp[m - 1];
            }
        for (int m = 0; m < M; m++) {
            if (g[m] > bnd) g[m] = INFINITY;
            if (gp[m] > bnd) gp[m] = INFINITY;
            if (gp[m] < gpmin[k]) gpmin[k] = gp[m];
            if (gp[m] < INFINITY && rfirst[k] == M) rfirst[k] = m;
        }
        d->mat[0][(size_t)j * ld + k + 1] = g[M - 1];
    }
    d->coldone[j] = 1;
}

static int top_suf(const pd_dp *d, int L, double bnd, int j);

/* lastmode, top row at column end j (top bound bt, the top entries of j's ancestors f
 * final): the bound of each start k of column j into d->colkb. A top stage (k, j] on r
 * machines is within bt only when the prefix at k is (on at least mmin(k) + 1 machines)
 * and the rest after j fits (top_suf(j) machines), so r <= R(k) = M - 1 - top_suf(j) -
 * mmin(k), and only when T_0(k, j) <= r bt - 4 (r-1) P(k, j) / (B r): nb(k), the largest
 * of those (with a relative 1e-9 of slack) that T_0(k, j) >= C(k, j) / M_0 does not rule
 * out, is what start k needs as an output. As a
 * rest, k serves its ancestors: kb[k] = the largest nb over k and its ancestors, at least
 * bt (every r = 1 stage's). The ancestors that need more than bt are listed, and when
 * there are many, all of them count for every k (a larger bound is still exact). f NULL:
 * before the top row, every prefix taken as fitting on one machine (mmin = 0); then nb
 * only grows along descendants (P(k2, j) <= P(k, j)) and is its own ancestors' bound. */
static void col_bounds(pd_dp *d, int j, double bt, const double *f)
{
    const pd_lattice *l = d->l;
    const int M = d->o->machines[1], sw = l->swords;
    const double base = bt * (1.0 + 1e-9);
    const double psync = 4.0 / d->o->bandwidth_Bps[1] * (1.0 - 1e-9);
    const uint64_t *aj = l->anc + (size_t)j * sw;
    const int suf = top_suf(d, 1, bt, j);
    enum { NSPECIAL = 128 };
    int special[NSPECIAL], ns = 0, many = 0;
    double allmax = base;
    for (int k = 0; k < j; k++) {
        if (!pd_bit(aj, k)) continue;
        int mmin = f ? -1 : 0;
        for (int m = 0; f && m < M && mmin < 0; m++)
            if (f[(size_t)k * M + m] <= bt) mmin = m;
        double nb = base;
        int R = mmin < 0 ? 0 : M - 1 - suf - mmin;
        const double lb = (l->C[j] - l->C[k]) / d->scale[0]; /* T_0(k, j) >= lb */
        for (int r = 2; r <= R; r++) {
            double b = base * r - psync * (l->P[j] - l->P[k]) * (double)(r - 1) / (double)r;
            if (b > nb && lb <= b) nb = b;
        }
        d->colkb[k] = nb;
        if (nb > base) {
            if (nb > allmax) allmax = nb;
            if (ns < NSPECIAL) special[ns++] = k;
            else many = 1;
        }
    }
    for (int k = 0; k < j && f; k++) {
        if (!pd_bit(aj, k)) continue;
        if (many) {
            d->colkb[k] = allmax;
            continue;
        }
        const uint64_t *ak = l->anc + (size_t)k * sw;
        for (int i = 0; i < ns && special[i] < k; i++)
            if (pd_bit(ak, special[i]) && d->colkb[special[i]] > d->colkb[k])
                d->colkb[k] = d->colkb[special[i]];
    }
}

/* On the top level L with a finite bound, the machines of level L that the rest of the
 * model (j, end] needs at least: each stage on r machines takes at least its compute
 * divided by r and by every machine below, and must stay within bnd. 0 otherwise. */
static int top_suf(const pd_dp *d, int L, double bnd, int j)
{
    const pd_lattice *l = d->l;
    if (!isfinite(bnd) || j >= d->n - 1) return 0;
    double need = (l->C[d->n - 1] - l->C[j]) / ((L ? d->scale[L - 1] : 1.0) * bnd);
    int suf = need > 1e-9 ? (int)ceil(need - 1e-9) : 0;
    if (d->sn && bnd == d->bound[d->top] && d->sn[j] > suf) suf = d->sn[j];
    return suf;
}

/* On the top level L (> 0) with a finite bound bnd, the most top machines r that a last
 * stage (k, j] can use in a plan within bnd, over every end j: 0 when none can. The
 * prefix at k needs at least mmin + 1 machines (its entries on fewer are above bnd), the
 * rest after j needs top_suf(j), so r <= M - 1 - mmin - suf(j); and the stage takes at
 * least C(k, j) / (r x scale below), so C(k, j) <= r x scale x bnd (with a relative
 * 1e-9 of slack for the rounding of differences of sums). A candidate with more
 * machines, or at an end whose every r fails, is above bnd or lands in an entry that
 * top_suf sets to +INFINITY, so the lower row of k is needed only up to rmax x bnd: every
 * value T_{L-1}(k, j) with T/r <= bnd for a usable r is at most that, hence exact. */
static int top_rmax(const pd_dp *d, int L, double bnd, int k, int mmin, int nocol)
{
    const pd_lattice *l = d->l;
    const int M = d->o->machines[L], sw = l->swords;
    const double unit = d->scale[L - 1] * bnd * (1.0 + 1e-9), lim = bnd * (1.0 + 1e-9);
    /* PipeDream's split formula: (inner + 4 (r-1) P / (B r)) / r, inner >= C / scale */
    const double sync = d->cost == &pd_cost_pipedream
                            ? 4.0 / d->o->bandwidth_Bps[L] * (1.0 - 1e-9) * (1.0 - 1e-9)
                            : 0.0;
    const uint64_t *dk = l->desc + (size_t)k * sw;
    int best = 0;
    for (int w = 0; w < sw; w++) {
        uint64_t bits = dk[w];
        while (bits) {
            int j = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (nocol && d->iscol[j]) continue; /* read from its column, not the row */
            int r = M - 1 - mmin - top_suf(d, L, bnd, j);
            if (r <= best) continue;
            double Ckj = l->C[j] - l->C[k];
            if (sync > 0) { /* the largest r whose formula can be within bnd */
                double lb = Ckj / d->scale[L - 1], P = (l->P[j] - l->P[k]) * sync;
                for (; r > best; r--)
                    if (lb + P * (double)(r - 1) / (double)r <= lim * r) break;
                best = r;
            } else if (Ckj <= unit * r) {
                best = r;
            }
        }
    }
    return best;
}

/* Row s of level L = top-1, requested by the top level for stages after a prefix on at
 * least mm + 1 top machines, with the top's bound bt: lowers eps[m] (the bound up to which
 * entry (j, m) must be exact) to what some output can use. An output T_L(s, o) (entry
 * (o, M-1)) is used by a top stage (s, o] on r <= R(o) = Mt - 1 - mm - top_suf(o) top
 * machines and only when T_L(s, o) <= r bt, so it matters up to R(o) bt. An entry (j, m)
 * with value v lies on a plan of such an output only if v <= R(o) bt, the rest (j, o] on
 * the other M-1-m machines fits, C(j, o) <= (M-1-m) x unit x R(o) bt (unit: the machines
 * below L), and the output is reachable, C(s, o) <= M x unit x R(o) bt. For each rho the
 * largest C(o) allowed by the last two is hi, where top_suf is smallest; if even there
 * R < rho, no output o >= j can use rho, and eps[m] = bt x the largest usable rho (with
 * 1e-9 of relative slack on the compute sums). Entries above it are on no plan of any
 * output within what the top level can use, so setting them to +INFINITY changes no
 * used output nor its choice. No usable rho: -INFINITY (the entry is never needed). With
 * nl the last state is no output: the others have C(o) <= cmax2. */
static void top_need(const pd_dp *d, int L, int s, int j, int mm, int nl, double *eps)
{
    const pd_lattice *l = d->l;
    const int T = d->top, Mt = d->o->machines[T], M = d->o->machines[L];
    const double bt = d->bound[T], unitT = d->scale[L], unit = L ? d->scale[L - 1] : 1.0;
    const double Cs = s < 0 ? 0.0 : l->C[s], Cj = l->C[j], Call = l->C[d->n - 1];
    const double slack = 1.0 + 1e-9;
    /* need by a product: its rounding is far inside the 1e-12 taken off, so this suf is
     * never above top_suf's for an output at hi (a smaller suf only keeps more) */
    const double inv = 1.0 / (unitT * bt) * (1.0 - 1e-12);
    /* With PipeDream's formulas a top stage (s, o] on rho machines takes (T_L(s, o) +
     * sync) / rho, the synchronization term 4 (rho-1) P(s, o) / (B rho), divided by the
     * machines below in the first stage (s = -1); P(s, o) >= P(s, j) for every output o
     * that j leads to, so only T_L(s, o) <= rho bt - sync(P(s, j)) can be within bt, and
     * the entry (j, m), at most its output, matters up to that. */
    double syncP = 0.0;
    if (d->cost == &pd_cost_pipedream) {
        double Psj = s < 0 ? l->P[j] : l->P[j] - l->P[s];
        syncP = 4.0 * Psj / d->o->bandwidth_Bps[T] * (1.0 - 1e-9);
        if (s < 0) syncP /= (double)d->o->machines[L];
    }
    /* hi falls as m grows, so the largest usable rho does too: start from the last one */
    int prev = Mt - 1 - mm;
    for (int m = 0; m < M; m++) {
        int best = 0;
        double e = -INFINITY;
        for (int rho = prev; rho >= 1; rho--) {
            double hi = Cs + unitT * rho * bt * slack;
            double hj = Cj + (double)(M - 1 - m) * unit * rho * bt * slack;
            if (hj < hi) hi = hj;
            if (nl && d->cmax2 < hi) hi = d->cmax2; /* outputs other than the last */
            if (hi < Cj) continue;
            int ok;
            if (d->minc) { /* some output at most hi whose rest fits beside rho */
                const double *mc = (nl ? d->mincnl : d->minc) + (size_t)j * Mt;
                ok = mc[Mt - 1 - mm - rho] <= hi;
            } else {
                double need = (Call - hi) * inv;
                int suf = need > 1e-9 ? (int)ceil(need - 1e-9) : 0;
                ok = Mt - 1 - mm - suf >= rho;
            }
            if (ok) {
                if (!best) best = rho;
                double er = bt * rho * slack - syncP * (double)(rho - 1) / (double)rho;
                if (er > e) e = er;
            }
        }
        prev = best;
        if (!(e > 0)) e = -INFINITY;
        if (e < eps[m]) eps[m] = e;
    }
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

/* Top level L: the bound rbk[k] up to which the lower row of split state k is needed (-1:
 * not at all) and the fewest machines - 1 of a prefix at k within bnd, rmm[k] (see the
 * pair loop of row_compute). fk: the top entries of k. */
static void top_rbk(const pd_dp *d, int L, double bnd, int k, const double *fk, int nocol,
                    double *rbk, int *rmm)
{
    const int M = d->o->machines[L];
    int mmin = -1;
    for (int m = 0; m < M && mmin < 0; m++)
        if (fk[m] <= bnd) mmin = m;
    int rm = mmin < 0 ? 0 : isfinite(bnd) ? top_rmax(d, L, bnd, k, mmin, nocol) : M - 1 - mmin;
    rbk[k] = rm > 0 ? bnd * rm : -1;
    rmm[k] = isfinite(bnd) ? mmin : PD_NO_MM;
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

/* Computes row (L, s): out[j * ostride] = T_L(s, j, M - 1) (+INFINITY when None, when j
 * is not in the row, or when above bnd, a value no caller can use); when keep is not NULL
 * the choices are copied there ([n * M]). Lower rows (or, in column mode, level-0 columns)
 * are computed on first use, and never for a split state whose every prefix time is above
 * the bound. target >= 0: only the entries of target and its ancestors are computed (the
 * others, out and choices alike, are left as they were), enough for target's value and
 * split. 0 or -1 (out of memory). */
static int row_compute(pd_dp *d, int L, int s, double bnd, double *out, int ostride,
                       choice *keep, int target)
{
    const pd_lattice *l = d->l;
    const pd_options *o = d->o;
    const int n = d->n, M = o->machines[L], sw = l->swords;
    const double B = o->bandwidth_Bps[L];
    const int W = L == 0 ? 1 : o->machines[L - 1];
    const int first = o->machines_in_first_level;
    const int min_machines = first > 0 ? first : 1;
    const int maxm = o->straight ? 1 : M;
    const int rmax = o->straight ? 1 : M - 1;
    const int mem = o->use_memory_constraint;
    const double memsize = o->memory_bytes;
    const double ratio = o->activation_compression_ratio;
    const int do_dp = !(L == d->top && s >= 0);
    const pd_cost *cost = d->cost;
    const int native = cost == &pd_cost_pipedream && M <= 64;
    double *f = d->f[L];
    choice *ch = d->ch[L];
    const double scale = d->scale[L];
    const double *lowmat = L > 0 ? d->mat[L - 1] : NULL;
    const int ld = n + 1;
    double base[64], split[64], last[64], capv[64], epsv[64], ubv[64];
    int hint[64], nhint = 0; /* split states to try first (level 0, common case) */
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
    if (!fmin || !pmin || !rbk || !rmm) {
        free(fmin);
        free(pmin);
        free(rbk);
        free(rmm);
        return -1;
    }
    for (int k = 0; k < n; k++) rbk[k] = -2;
    double *bigbuf = NULL;
    choice *bigch = NULL;
    if (M > 64) {
        bigbuf = malloc((size_t)M * 6 * sizeof *bigbuf);
        bigch = malloc((size_t)M * sizeof *bigch);
        if (!bigbuf || !bigch) goto oom;
    }
    double *bs = M > 64 ? bigbuf : base;
    double *sp = M > 64 ? bigbuf + M : split;
    double *ls = M > 64 ? bigbuf + 2 * M : last;
    double *cap = M > 64 ? bigbuf + 3 * M : capv;
    double *eps = M > 64 ? bigbuf + 4 * M : epsv;
    double *ub = M > 64 ? bigbuf + 5 * M : ubv;
    const int hintok = native && !mem && !(ratio > 0) && L == 0;
    /* lastmode (see lastcol): the top row computes its lower rows without the last state;
     * at the last state the inner times come from one level-0 column */
    const int lastmode = L == d->top && s < 0 && d->lastcol && isfinite(bnd);
    const int mm = L + 1 == d->top ? d->rowmm[L][s + 1] : PD_NO_MM;
    const int nl = L + 1 == d->top ? d->rownl[L][s + 1] : 0;
    choice *spc = M > 64 ? bigch : splitch;

    /* the top row's single stages (-1, j] on m + 1 <= M - top_suf(j) machines use
     * T_{L-1}(-1, j) <= (m + 1) bnd: top_need with mm = -1 */
    if (L > 0 && need_row(d, L - 1, s, L == d->top ? bnd * M : INFINITY,
                          L == d->top && s < 0 && isfinite(bnd) ? -1 : PD_NO_MM, 0))
        goto oom;
    /* only the row's own entries (s's descendants) are ever read: each is written below */
    for (int j = next_in_row(l, s, -1); j < n; j = next_in_row(l, s, j)) {
        if (target >= 0 && j != target) { /* only what target's plans use */
            if (j > target) break;
            if (!pd_bit(l->anc + (size_t)target * sw, j)) continue;
        }
        if (nl && j == n - 1) continue; /* its column's value stays */
        /* nl: a column end's entry stays the column's (the row's is bounded for the other
         * ends); its f entries are still the prefixes of later ends */
        const int keepout = !(nl && d->iscol && d->iscol[j]);
        double *fj = f + (size_t)j * M;
        choice *cj = ch + (size_t)j * M;
        double Csj = s < 0 ? l->C[j] : l->C[j] - l->C[s];
        /* eps[m]: entry (j, m) matters only up to it (the bound, or top_need's); when no
         * entry of j matters, all read +INFINITY, as the full computation would give */
        for (int m = 0; m < M; m++) eps[m] = bnd;
        int dead = 0;
        if (mm != PD_NO_MM) {
            top_need(d, L, s, j, mm, nl, eps);
            dead = 1;
            for (int m = 0; m < M; m++) dead &= eps[m] == -INFINITY;
        }
        if (dead || Csj / scale > bnd) { /* every plan of (s, j] is slower than the bound */
            if (keepout) out[(size_t)j * ostride] = INFINITY;
            for (int m = 0; m < M; m++) {
                fj[m] = INFINITY;
                cj[m] = (choice){-1, -1, m + 1};
            }
            fmin[j] = INFINITY;
            for (int m = 0; m < M; m++) pmin[(size_t)j * M + m] = INFINITY;
            continue;
        }
        double inner = L == 0 ? Csj : lowmat[(size_t)j * ld + s + 1];
        /* On the top level with a finite bound, the rest of the model (j, end] needs at
         * least suf machines: each stage on r machines takes at least its compute divided
         * by r and by every machine below, and must stay within the bound. An entry on
         * m + 1 machines with m + 1 + suf > M cannot be part of a plan within the bound. */
        int suf = L == d->top ? top_suf(d, L, bnd, j) : 0;
        double Psj = s < 0 ? l->P[j] : l->P[j] - l->P[s];
        double Asj = s < 0 ? l->Act[j] : l->Act[j] - l->Act[s];
        for (int m = 0; m < M; m++) {
            bs[m] = INFINITY;
            sp[m] = INFINITY;
        }
        for (int m = 0; m < maxm; m++) {
            double stash = ceil_div(M - (m + 1), m + 1) * (Asj + Psj);
            if (mem && stash > memsize) continue;
            if (first > 0 && m != first - 1) continue;
            if (isinf(inner)) continue;
            bs[m] = native ? pd_base(NULL, L, inner, Psj, m + 1, B, W)
                           : cost->base(cost->ctx, L, inner, Psj, m + 1, B, W);
        }
        /* cap[m]: a split of (s, j] on m + 1 machines matters only below it, -INFINITY
         * when none can. A split wins only when strictly below the single stage (or the
         * use_fewer_machines copy, itself at most the single stage), and an entry above
         * bnd reads +INFINITY; when the split's lower bound (every stage takes at least its
         * compute over its machines and over the machines below, so the slowest at least
         * C(s, j) over all of them, less a slack for the rounding of sums) is not below
         * the single stage, or is above bnd, or the rest of the model cannot fit (suf), no
         * split can change the entry or its choice and none is tried. */
        int any = 0; /* some entry of j on several machines can still be in a plan */
        {
            const double unit = L ? d->scale[L - 1] : 1.0;
            const double cl = Csj * (1.0 - 1e-9) - 1e-12 * l->C[n - 1];
            for (int m = 0; m < M; m++) {
                double lbm = cl / ((double)(m + 1) * unit);
                int live = m >= min_machines && m + 1 + suf <= M && lbm < bs[m] && lbm <= eps[m];
                cap[m] = live ? bs[m] : -INFINITY;
                any |= live;
            }
            if (lastmode && j == n - 1) { /* only the answer's entry is ever read (no
                                            use_fewer_machines copy in lastcol) */
                any = 0;
                for (int m = 0; m < M - 1; m++) cap[m] = -INFINITY;
                any = cap[M - 1] != -INFINITY;
            }
        }
        if (do_dp && M > min_machines && any && L == d->top && d->colmode && !d->coldone[j])
            col_compute(d, j, bnd * (M - 1), NULL); /* a last stage on r <= M-1 top machines */
        if (do_dp && M > min_machines && any && lastmode && j == n - 1 && !d->coldone[j])
            col_compute(d, j, bnd * (M - 1), NULL);
        if (do_dp && M > min_machines && any && lastmode && d->iscol[j] && !d->coldone[j]) {
            col_bounds(d, j, bnd, f);
            col_compute(d, j, bnd, d->colkb);
        }
        for (int m = 0; m < M; m++) ub[m] = INFINITY;
        if (do_dp && M > min_machines && any && hintok) {
            /* ub[m]: the value of some split candidate of (j, m), at least the best one:
             * a candidate whose lower bound is above it can be neither the minimum nor
             * equal to it, so it cannot be chosen. Tried first: the split states chosen
             * for the previous end (neighbouring states often split alike), with the
             * same arithmetic as below. */
            const uint64_t *aj = l->anc + (size_t)j * sw;
            const uint64_t *ds = s < 0 ? NULL : l->desc + (size_t)s * sw;
            for (int h = 0; h < nhint; h++) {
                int k = hint[h];
                if (!pd_bit(aj, k) || (ds && !pd_bit(ds, k)) || fmin[k] > bnd) continue;
                const double *fk = f + (size_t)k * M;
                double ikj = l->C[j] - l->C[k], Pkj = l->P[j] - l->P[k];
                for (int r = 1; r <= rmax; r++) ls[r] = (ikj + Pkj * sync_r[r]) * inv_r[r];
                for (int m = min_machines; m < M; m++) {
                    int rm = m < rmax ? m : rmax;
                    for (int r = 1; r <= rm; r++) {
                        double pre = fk[m - r];
                        double pt = pre > ls[r] ? pre : ls[r];
                        if (pt < ub[m]) ub[m] = pt;
                    }
                }
            }
        }
        if (do_dp && M > min_machines && any) {
            const uint64_t *aj = l->anc + (size_t)j * sw;
            const uint64_t *ds = s < 0 ? NULL : l->desc + (size_t)s * sw;
            /* tmax: no candidate above it can matter for any m (see cap, eps, ub); a
             * candidate is at least its prefix's best (fmin) and, with PipeDream's
             * formula, its last stage's ikj / rmax */
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
                    const double *fk = f + (size_t)k * M;
                    if (fmin[k] > bnd || fmin[k] > tmax) continue; /* every prefix at k is
                                                                      out of bounds */
                    if (L == 0 && native && (l->C[j] - l->C[k]) * inv_r[rmax] > tmax) continue;
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
                            if (rbk[k] == -2) top_rbk(d, L, bnd, k, fk, lastmode, rbk, rmm);
                            if (rbk[k] < 0) continue; /* cannot matter */
                            /* with lastmode, without the last state (see there) */
                            if (need_row(d, L - 1, k, rbk[k], rmm[k], lastmode)) goto oom;
                        } else if (!d->done[L - 1][k + 1]) {
                            int mmin = -1;
                            for (int m = 0; m < M && mmin < 0; m++)
                                if (fk[m] <= bnd) mmin = m;
                            if (mmin < 0 || mmin == M - 1) continue; /* cannot matter */
                            if (need_row(d, L - 1, k, INFINITY, PD_NO_MM, 0)) goto oom;
                        }
                        ikj = lowmat[(size_t)j * ld + k + 1];
                    }
                    if (native && !mem && !(ratio > 0) &&
                        !pair_useful(ikj, pmin + (size_t)k * M, sp, cap, eps, ub, inv_r,
                                     min_machines, M, rmax))
                        continue; /* no candidate of k can matter */
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
                        continue;
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
            }
        }
        for (int m = 0; m < M; m++) {
            double v = bs[m];
            choice c = {-1, -1, m + 1};
            if (do_dp && m >= min_machines) {
                if (o->use_fewer_machines && m > 0 && (isinf(bs[m]) || fj[m - 1] < bs[m])) {
                    v = fj[m - 1];
                    c = cj[m - 1];
                }
                if (sp[m] < v) {
                    v = sp[m];
                    c = spc[m];
                }
            }
            if (v > bnd || v > eps[m] || m + 1 + suf > M) v = INFINITY;
            fj[m] = v;
            cj[m] = c;
        }
        if (keepout) out[(size_t)j * ostride] = fj[M - 1];
        if (hintok) { /* this end's split states, for the next end */
            int nh = 0;
            for (int m = min_machines; m < M; m++) {
                int k = spc[m].k, seen = 0;
                if (!(sp[m] < INFINITY) || k < 0) continue;
                for (int h = 0; h < nh; h++) seen |= hint[h] == k;
                if (!seen) hint[nh++] = k;
            }
            if (nh) nhint = nh;
        }
        double lo = INFINITY;
        for (int m = 0; m < M; m++) {
            if (fj[m] < lo) lo = fj[m];
            pmin[(size_t)j * M + m] = lo;
        }
        fmin[j] = lo;
    }
    if (keep) memcpy(keep, ch, (size_t)n * M * sizeof *keep);
    free(fmin);
    free(pmin);
    free(rbk);
    free(rmm);
    free(bigbuf);
    free(bigch);
    return 0;
oom:
    free(fmin);
    free(pmin);
    free(rbk);
    free(rmm);
    free(bigbuf);
    free(bigch);
    return -1;
}

/* Two levels with lastcol and a finite top bound bt: the fewest top machines sn[o] that
 * the rest of the model (o, end] can take within bt, and the minc tables of top_need.
 * The rest's stages are split stages, each (inner + 4 (r-1) P / (B r)) / r on r top
 * machines. Its last stage (o, end] has the exact inner time T_0(o, end) from the last
 * state's column (computed here, exact as far as a stage on r <= M-1 machines needs); any other
 * stage (o, c] has at least C(o, c) over the machines below as inner time. So a stage
 * needs at least the fewest r whose formula, with those, is within bt (with a relative
 * 1e-9 of slack for rounding), and sn[o] = the least over first stages (o, c] of that r +
 * sn[c] is at most the machines of any plan of the rest within bt. M_top + 1: none.
 * The column's bounds (col_bounds) also cover the top row's use of it at the last state. */
/* sn (see suffix_prepare) from the end backwards; exact: a stage ending at a column end
 * other than the last state takes its exact inner time from that column (+INFINITY there:
 * above what any stage on r <= M-1 top machines can use, see col_bounds). */
static void suffix_need(pd_dp *d, int exact)
{
    const pd_lattice *l = d->l;
    const int n = d->n, Mt = d->o->machines[1], sw = l->swords, ld = n + 1;
    const double bt = d->bound[1], B = d->o->bandwidth_Bps[1], unit = d->scale[0];
    const double lim = bt * (1.0 + 1e-9), lo = 1.0 - 1e-9;
    d->sn[n - 1] = 0;
    for (int o = n - 2; o >= 0; o--) {
        int best = Mt + 1;
        double Pol = l->P[n - 1] - l->P[o];
        double tol = d->mat[0][(size_t)(n - 1) * ld + o + 1];
        for (int r = 1; r < Mt && r < best; r++)
            if ((tol + 4.0 * (r - 1) * Pol / (B * r) * lo) / r <= lim) best = r;
        const uint64_t *dk = l->desc + (size_t)o * sw;
        for (int w = 0; w < sw; w++) {
            uint64_t bits = dk[w];
            while (bits) {
                int c = w * 64 + __builtin_ctzll(bits);
                bits &= bits - 1;
                if (c == n - 1 || d->sn[c] + 1 >= best) continue;
                double inner = exact && d->iscol[c] ? d->mat[0][(size_t)c * ld + o + 1]
                                                    : (l->C[c] - l->C[o]) / unit * lo;
                double P = (l->P[c] - l->P[o]) * lo;
                for (int r = 1; r + d->sn[c] < best; r++)
                    if ((inner + 4.0 * (r - 1) * P / (B * r)) / r <= lim) {
                        best = r + d->sn[c];
                        break;
                    }
            }
        }
        d->sn[o] = best;
    }
}

static int suffix_prepare(pd_dp *d)
{
    const pd_lattice *l = d->l;
    const int n = d->n, Mt = d->o->machines[1], sw = l->swords;
    const double bt = d->bound[1];
    d->sn = malloc((size_t)n * sizeof *d->sn);
    d->minc = malloc((size_t)n * Mt * sizeof *d->minc);
    d->mincnl = malloc((size_t)n * Mt * sizeof *d->mincnl);
    d->iscol = calloc((size_t)n, 1);
    if (!d->sn || !d->minc || !d->mincnl || !d->iscol) return -1;
    if (!d->coldone[n - 1]) {
        col_bounds(d, n - 1, bt, NULL);
        col_compute(d, n - 1, bt, d->colkb);
    }
    suffix_need(d, 0);
    for (int o = 0; o < n; o++) d->iscol[o] = (char)(d->sn[o] <= 1);
    /* the columns of the ends whose rest fits on one machine, now when they are few
     * (else the top row computes the ones it meets): their exact times make sn tighter
     * (sn[c] <= 1 stays: it comes from the last column alone) */
    int ncol = 0;
    for (int c = 0; c + 1 < n; c++) ncol += d->iscol[c];
    if (ncol * PD_EAGER_SHARE <= n) {
        for (int c = 0; c + 1 < n; c++)
            if (d->iscol[c] && !d->coldone[c]) {
                col_bounds(d, c, bt, NULL);
                col_compute(d, c, bt, d->colkb);
            }
        suffix_need(d, 1);
    }
    /* minc from the end backwards: o itself, then every strict descendant's */
    for (int o = n - 1; o >= 0; o--) {
        double *mc = d->minc + (size_t)o * Mt, *mn = d->mincnl + (size_t)o * Mt;
        int suf = top_suf(d, 1, bt, o); /* max of sn and the compute bound */
        for (int q = 0; q < Mt; q++) {
            mc[q] = suf <= q ? l->C[o] : INFINITY;
            mn[q] = suf <= q && !d->iscol[o] ? l->C[o] : INFINITY;
        }
        const uint64_t *dk = l->desc + (size_t)o * sw;
        for (int w = 0; w < sw; w++) {
            uint64_t bits = dk[w];
            while (bits) {
                int c = w * 64 + __builtin_ctzll(bits);
                bits &= bits - 1;
                const double *cc = d->minc + (size_t)c * Mt, *cn = d->mincnl + (size_t)c * Mt;
                for (int q = 0; q < Mt; q++) {
                    if (cc[q] < mc[q]) mc[q] = cc[q];
                    if (cn[q] < mn[q]) mn[q] = cn[q];
                }
            }
        }
    }
    return 0;
}

/* Upper bounds on the top level's optimum, to prune what cannot matter: values above the
 * optimum can never be part of an optimal plan, and one level down a stage on r top
 * machines needs T <= r * bound. Both are plans PipeDream's program itself considers. */

/* The whole model as one stage on every top machine. +INFINITY when not allowed. */
/* Can est_single stand for T_L (every level plain PipeDream, single stages on all
 * machines allowed)? */
static int est_ok(const pd_dp *d)
{
    return d->cost == &pd_cost_pipedream && !d->o->straight &&
           d->o->machines_in_first_level <= 0;
}

/* An upper bound on T_L(a, b, M_L - 1): the plan with one stage on all machines at level L
 * and at every level below (PipeDream's base case at m = M - 1, which every option of
 * est_ok allows; the memory constraint never drops it, its stash count being 0). The
 * base formula grows with the inner time, and T_{L-1} is at most its own estimate. */
static double est_single(const pd_dp *d, int L, int a, int b)
{
    const pd_lattice *l = d->l;
    double C = a < 0 ? l->C[b] : l->C[b] - l->C[a];
    double P = a < 0 ? l->P[b] : l->P[b] - l->P[a];
    double inner = L == 0 ? C : est_single(d, L - 1, a, b);
    return pd_base(NULL, L, inner, P, d->o->machines[L], d->o->bandwidth_Bps[L],
                   L ? d->o->machines[L - 1] : 1);
}

/* The inner time T_{top-1}(a, b) for the bounds: est_single when est, else from row a
 * computed up to rb (+INFINITY above it). NAN when out of memory. */
static double bound_inner(pd_dp *d, int a, int b, int est, double rb)
{
    int T = d->top;
    if (est) return est_single(d, T - 1, a, b);
    if (need_row(d, T - 1, a, rb, PD_NO_MM, 0)) return NAN;
    return d->mat[T - 1][(size_t)b * (d->n + 1) + a + 1];
}

static double bound_dp(pd_dp *d, int est, double rb)
{
    const pd_options *o = d->o;
    int T = d->top, Mt = o->machines[T];
    double inner = bound_inner(d, -1, d->n - 1, est, rb);
    if (isnan(inner)) return NAN;
    if ((o->straight && Mt > 1) || isinf(inner) ||
        (o->machines_in_first_level > 0 && o->machines_in_first_level != Mt))
        return INFINITY;
    return d->cost->base(d->cost->ctx, T, inner, d->l->P[d->n - 1], Mt, o->bandwidth_Bps[T],
                         o->machines[T - 1]);
}

/* A straight split of the top level into M_top stages of about equal compute, each on one
 * top machine. +INFINITY when not allowed. */
static double bound_chain(pd_dp *d, int est, double rb)
{
    const pd_options *o = d->o;
    const pd_lattice *l = d->l;
    int T = d->top, Mt = o->machines[T], n = d->n;
    double B = o->bandwidth_Bps[T], ratio = o->activation_compression_ratio;
    if (Mt < 2 || Mt > n || (o->machines_in_first_level > 0 && o->machines_in_first_level != 1))
        return INFINITY;
    int cut[4097];
    cut[0] = -1;
    for (int t = 1; t < Mt; t++) {
        double target = l->C[n - 1] * t / Mt;
        int best = -1;
        for (int k = 0; k < n - 1; k++) {
            if (cut[t - 1] >= 0 && !pd_bit(l->anc + (size_t)k * l->swords, cut[t - 1])) continue;
            if (cut[t - 1] == k) continue;
            if (best < 0 || fabs(l->C[k] - target) < fabs(l->C[best] - target)) best = k;
        }
        if (best < 0) return INFINITY;
        cut[t] = best;
    }
    cut[Mt] = n - 1;
    double worst = 0;
    for (int t = 1; t <= Mt; t++) {
        int a = cut[t - 1], b = cut[t];
        double v = bound_inner(d, a, b, est, rb);
        if (isnan(v)) return NAN;
        double Pab = a < 0 ? l->P[b] : l->P[b] - l->P[a];
        double Aab = a < 0 ? l->Act[b] : l->Act[b] - l->Act[a];
        if (isinf(v)) return INFINITY;
        if (o->use_memory_constraint && (Aab + Pab) * (double)(Mt - t) > o->memory_bytes)
            return INFINITY;
        if (t == 1) {
            v = d->cost->base(d->cost->ctx, T, v, Pab, 1, B, o->machines[T - 1]);
        } else {
            v = d->cost->split(d->cost->ctx, T, v, Pab, 1, B, o->machines[T - 1]);
            if (ratio > 0) {
                double tin = (2.0 * l->OAS[a]) / B / ratio;
                if (tin > v) v = tin;
                if (b < n - 1) {
                    double tout = (2.0 * l->OAS[b]) / B / ratio;
                    if (tout > v) v = tout;
                }
            }
        }
        if (v > worst) worst = v;
    }
    return worst;
}

double pd_dp_solve(pd_dp *d)
{
    int M = d->o->machines[d->top];
    if (!d->toprow) {
        d->toprow = malloc((size_t)d->n * sizeof *d->toprow);
        d->topch = malloc((size_t)d->n * M * sizeof *d->topch);
        if (!d->toprow || !d->topch) return NAN;
        double ub = INFINITY;
        if (d->top > 0) {
            /* First the two plans with estimated lower levels (est_single), an upper
             * bound e on the optimum; then the same plans with the lower rows computed up
             * to what can still come under e: the whole model's inner time up to M_top x
             * e, a chain stage's (on one top machine, at least its inner time) up to e.
             * Any bound at or above the optimum gives the same plan. */
            double e = INFINITY, e0 = INFINITY, e1 = INFINITY;
            if (est_ok(d)) {
                e0 = bound_dp(d, 1, INFINITY);
                e1 = bound_chain(d, 1, INFINITY);
                e = e0 < e1 ? e0 : e1;
            }
            /* The whole-model plan needs the top row's lower row without top_need's
             * bounds (unknown yet): computed only when its estimate is the better one. */
            double u0 = e0 <= e1 ? bound_dp(d, 0, e * M) : INFINITY, u1;
            if (isnan(u0)) return NAN;
            u1 = bound_chain(d, 0, e);
            if (isnan(u1)) return NAN;
            ub = u0 < u1 ? u0 : u1;
            if (e < ub) ub = e;
        }
        d->bound[d->top] = ub;
        if (d->lastcol && d->top == 1 && isfinite(ub) && suffix_prepare(d)) return NAN;
        if (row_compute(d, d->top, -1, ub, d->toprow, 1, d->topch, -1)) return NAN;
    }
    return d->toprow[d->n - 1];
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
        /* a stage ending at a column end (lastcol: the last state, or iscol) took its
         * time T from the column, and the row's bounds, if it was computed at all, did not
         * count that end: the row without top_need's bounds, exact up to T (every
         * candidate as good as T has its entries within it), gives its split */
        char *nlp = level + 1 == d->top && d->rownl[level] ? &d->rownl[level][s + 1] : NULL;
        int *mmp = nlp ? &d->rowmm[level][s + 1] : NULL;
        char nl0 = nlp ? *nlp : 0;
        int mm0 = mmp ? *mmp : PD_NO_MM;
        if (nlp && (e == d->n - 1 || (d->iscol && d->iscol[e]))) {
            *nlp = 0;
            *mmp = PD_NO_MM;
            rb = d->mat[level][(size_t)e * (d->n + 1) + s + 1] * (1.0 + 1e-9);
            if (!(rb < INFINITY)) rb = INFINITY;
        }
        int rc = owned && orow ? row_compute(d, level, s, rb, orow, 1, owned, e) : -1;
        if (nlp) {
            *nlp = nl0;
            *mmp = mm0;
        }
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
