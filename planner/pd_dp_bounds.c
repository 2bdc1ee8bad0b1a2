/* pd_dp_bounds.c: the bounds that prune PipeDream's hierarchical dynamic program
 * (pd_dp.c): an upper bound on the optimum from two plans the program itself considers,
 * what the rest of the model after a state needs at least (machines, from compute and from
 * exact column times), and from those how far each lower row and entry can matter to the
 * top level. Each is argued where it is made: a value above what can matter reads
 * +INFINITY and changes no used value nor choice. */
#include "pd_dp_impl.h"

#include <math.h>
#include <stdlib.h>

/* On the top level L with a finite bound, the machines of level L that the rest of the
 * model (j, end] needs at least: each stage on r machines takes at least its compute
 * divided by r and by every machine below, and must stay within bnd. 0 otherwise. */
int pd_dp_top_suf(const pd_dp *d, int L, double bnd, int j)
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
 * rest after j needs pd_dp_top_suf(j), so r <= M - 1 - mmin - suf(j); and the stage takes at
 * least C(k, j) / (r x scale below), so C(k, j) <= r x scale x bnd (with a relative
 * 1e-9 of slack for the rounding of differences of sums). A candidate with more
 * machines, or at an end whose every r fails, is above bnd or lands in an entry that
 * pd_dp_top_suf sets to +INFINITY, so the lower row of k is needed only up to rmax x bnd: every
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
            int r = M - 1 - mmin - pd_dp_top_suf(d, L, bnd, j);
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
 * (o, M-1)) is used by a top stage (s, o] on r <= R(o) = Mt - 1 - mm - pd_dp_top_suf(o) top
 * machines and only when T_L(s, o) <= r bt, so it matters up to R(o) bt. An entry (j, m)
 * with value v lies on a plan of such an output only if v <= R(o) bt, the rest (j, o] on
 * the other M-1-m machines fits, C(j, o) <= (M-1-m) x unit x R(o) bt (unit: the machines
 * below L), and the output is reachable, C(s, o) <= M x unit x R(o) bt. For each rho the
 * largest C(o) allowed by the last two is hi, where pd_dp_top_suf is smallest; if even there
 * R < rho, no output o >= j can use rho, and eps[m] = bt x the largest usable rho (with
 * 1e-9 of relative slack on the compute sums). Entries above it are on no plan of any
 * output within what the top level can use, so setting them to +INFINITY changes no
 * used output nor its choice. No usable rho: -INFINITY (the entry is never needed). With
 * nl the last state is no output: the others have C(o) <= cmax2. */
void pd_dp_top_need(const pd_dp *d, int L, int s, int j, int mm, int nl, double *eps)
{
    const pd_lattice *l = d->l;
    const int T = d->top, Mt = d->o->machines[T], M = d->o->machines[L];
    const double bt = d->bound[T], unitT = d->scale[L], unit = L ? d->scale[L - 1] : 1.0;
    const double Cs = s < 0 ? 0.0 : l->C[s], Cj = l->C[j], Call = l->C[d->n - 1];
    const double slack = 1.0 + 1e-9;
    /* need by a product: its rounding is far inside the 1e-12 taken off, so this suf is
     * never above pd_dp_top_suf's for an output at hi (a smaller suf only keeps more) */
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

/* Top level L: the bound rbk[k] up to which the lower row of split state k is needed (-1:
 * not at all) and the fewest machines - 1 of a prefix at k within bnd, rmm[k] (see the
 * pair loop of row_compute). fk: the top entries of k. */
void pd_dp_top_rbk(const pd_dp *d, int L, double bnd, int k, const double *fk, int nocol,
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

/* sn (see pd_dp_suffix_prepare) from the end backwards; exact: a stage ending at a column end
 * other than the last state takes its exact inner time from that column (+INFINITY there:
 * above what any stage on r <= M-1 top machines can use, see pd_dp_col_bounds). */
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

/* Two levels with lastcol and a finite top bound bt: the fewest top machines sn[o] that
 * the rest of the model (o, end] can take within bt, and the minc tables of pd_dp_top_need.
 * The rest's stages are split stages, each (inner + 4 (r-1) P / (B r)) / r on r top
 * machines. Its last stage (o, end] has the exact inner time T_0(o, end) from the last
 * state's column (computed here, exact as far as a stage on r <= M-1 machines needs); any other
 * stage (o, c] has at least C(o, c) over the machines below as inner time. So a stage
 * needs at least the fewest r whose formula, with those, is within bt (with a relative
 * 1e-9 of slack for rounding), and sn[o] = the least over first stages (o, c] of that r +
 * sn[c] is at most the machines of any plan of the rest within bt. M_top + 1: none.
 * The column's bounds (pd_dp_col_bounds) also cover the top row's use of it at the last state. */
int pd_dp_suffix_prepare(pd_dp *d)
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
        pd_dp_col_bounds(d, n - 1, bt, NULL);
        pd_dp_col(d, n - 1, bt, d->colkb);
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
                pd_dp_col_bounds(d, c, bt, NULL);
                pd_dp_col(d, c, bt, d->colkb);
            }
        suffix_need(d, 1);
    }
    /* minc from the end backwards: o itself, then every strict descendant's */
    for (int o = n - 1; o >= 0; o--) {
        double *mc = d->minc + (size_t)o * Mt, *mn = d->mincnl + (size_t)o * Mt;
        int suf = pd_dp_top_suf(d, 1, bt, o); /* max of sn and the compute bound */
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
 * computed up to rb (+INFINITY above it): the whole row for a = -1 (the top row needs it
 * later), only b's ancestors otherwise. NAN when out of memory. */
static double bound_inner(pd_dp *d, int a, int b, int est, double rb)
{
    int T = d->top;
    if (est) return est_single(d, T - 1, a, b);
    if (a >= 0) return pd_dp_row_value(d, T - 1, a, b, rb); /* a chain stage: one end */
    if (pd_dp_need_row(d, T - 1, a, rb, PD_NO_MM, 0)) return NAN; /* the top row's too */
    return d->mat[T - 1][(size_t)b * (d->n + 1) + a + 1];
}

/* The whole model as one stage on every top machine. +INFINITY when not allowed. */
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

/* Upper bounds on the top level's optimum, to prune what cannot matter: values above the
 * optimum can never be part of an optimal plan, and one level down a stage on r top
 * machines needs T <= r * bound. Both plans below are ones PipeDream's program itself
 * considers. */
double pd_dp_upper_bound(pd_dp *d)
{
    int M = d->o->machines[d->top];
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
        /* The whole-model plan needs the top row's lower row without pd_dp_top_need's
         * bounds (unknown yet): computed only when its estimate is the better one. */
        double u0 = e0 <= e1 ? bound_dp(d, 0, e * M) : INFINITY, u1;
        if (isnan(u0)) return NAN;
        u1 = bound_chain(d, 0, e);
        if (isnan(u1)) return NAN;
        ub = u0 < u1 ? u0 : u1;
        if (e < ub) ub = e;
    }
    return ub;
}
