/* pd_dp_col.c: level-0 columns of PipeDream's hierarchical dynamic program (pd_dp.c):
 * for one end j, the best time of (k, j] on the level's machines for every start k at
 * once, by the recursion on the first stage (the same partitions and stage formulas as
 * the rows, so the same values). The top level reads a stage's inner time from the column
 * of its end where one is computed; columns hold values only, never choices. */
#include "pd_dp_impl.h"

#include <math.h>
#include <stdlib.h>

/* lastmode, top row at column end j (top bound bt; f: the top row's entries, final for
 * j's ancestors): the bound of each start k of column j into d->colkb. A top stage (k, j]
 * on r machines can be within bt only when the prefix at k is (on mmin(k) + 1 machines or
 * more) and the rest after j fits (pd_dp_top_suf(j) machines), so r <= R(k) = M - 1 -
 * suf(j) - mmin(k), and only when T_0(k, j) <= r bt - 4 (r-1) P(k, j) / (B r): nb(k), the
 * largest of those (with a relative 1e-9 of slack) that T_0(k, j) >= C(k, j) / M_0 does
 * not rule out, is what start k needs as an output. As a rest, k serves its ancestors:
 * kb[k] = the largest nb over k and its ancestors, at least bt (every r = 1 stage's). The
 * ancestors that need more than bt are listed, and when there are many, all of them count
 * for every k (a larger bound is still exact). f NULL (before the top row): every prefix
 * taken as fitting on one machine (mmin = 0); then nb only grows along descendants
 * (P(k2, j) <= P(k, j)) and is its own ancestors' bound. */
void pd_dp_col_bounds(pd_dp *d, int j, double bt, const double *f)
{
    const pd_lattice *l = d->l;
    const int M = d->o->machines[1], sw = l->swords;
    const double base = bt * (1.0 + 1e-9);
    const double psync = 4.0 / d->o->bandwidth_Bps[1] * (1.0 - 1e-9);
    const uint64_t *aj = l->anc + (size_t)j * sw;
    const int suf = pd_dp_top_suf(d, 1, bt, j);
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

/* What a column's starts share: the level's figures and the column's scratch. */
typedef struct col_ctx {
    const pd_lattice *l;
    int n, M, straight, fewer;
    double B, ratio;
    double sync_r[65], inv_r[65];
    const double *Gp, *Gpm; /* every later start's rest values and their prefix minima */
    const int *rfirst;
} col_ctx;

/* The candidates of start k whose first stage ends at k2: (k, k2] on r machines, the rest
 * (k2, j] on m - r, into g and gp (bound bnd, blim with its slack); bk2[m] = k2 where gp[m]
 * fell. */
static void col_pair(const col_ctx *c, int k, int k2, double bnd, double *g, double *gp,
                     int *bk2)
{
    const pd_lattice *l = c->l;
    const int M = c->M, fewer = c->fewer;
    const double blim = bnd * (1.0 + 1e-9);
    double C1 = l->C[k2] - l->C[k];
    const double *rest = c->Gp + (size_t)(k2 + 1) * M;
    const double *rpm = c->Gpm + (size_t)(k2 + 1) * M; /* rpm[m]: best on m + 1 or fewer */
    /* the first stage on r <= M-1 machines takes at least C1 / (M-1) (rounding is
     * monotone), the rest at least rpm[M-1]: a candidate above bnd ends in an entry that
     * reads +INFINITY */
    if (rpm[M - 1] > bnd || C1 > bnd * (double)(M - 1)) return;
    const int rf = c->rfirst[k2];
    /* a candidate for m is at least C1 / r with r <= m - rf and at least the rest's best on
     * m - 1 or fewer machines; it changes nothing unless below gp[m] (or g[m] where g is
     * kept) and within bnd: none of k2 is tried when no m passes */
    int any = 0;
    for (int m = 1 + rf; m < M && !any; m++) {
        double t = gp[m];
        if ((fewer || m == M - 1) && g[m] > t) t = g[m];
        if (t > blim) t = blim;
        double lo = C1 * c->inv_r[m - rf] * (1.0 - 1e-12);
        if (rpm[m - 1] > lo) lo = rpm[m - 1];
        any = lo < t || (lo <= t && t == blim);
    }
    if (!any) return;
    double P1 = l->P[k2] - l->P[k];
    /* both first-stage formulas take at least C1 / r: the r below the first that brings
     * it within bnd give only candidates above it */
    int r0 = (int)(C1 / bnd);
    if (r0 < 1) r0 = 1;
    while (r0 > 1 && !(C1 * c->inv_r[r0 - 1] > blim)) r0--;
    while (r0 < M - 1 && C1 * c->inv_r[r0] > blim) r0++;
    if (c->straight && r0 > 1) return;
    const int rlast = c->straight ? 1 : M - 1;
    for (int r = r0; r <= rlast; r++) {
        double firstp = (C1 + P1 * c->sync_r[r]) * c->inv_r[r];
        if (c->ratio > 0) {
            double a = (2.0 * l->OAS[k]) / (c->B * (double)r) / c->ratio;
            if (a > firstp) firstp = a;
            if (k2 < c->n - 1) {
                double b = (2.0 * l->OAS[k2]) / (c->B * (double)r) / c->ratio;
                if (b > firstp) firstp = b;
            }
        }
        const double *rr = rest - r; /* rr[m] = rest[m - r] */
        for (int m = r + rf; m < M; m++) {
            double vp = firstp > rr[m] ? firstp : rr[m];
            if (vp < gp[m]) {
                gp[m] = vp;
                bk2[m] = k2;
            }
        }
        /* g (first stage PipeDream's base case) is read only at M - 1, except with
         * use_fewer_machines; a rest not below it gives no better candidate */
        for (int m = fewer ? r : M - 1; m < M; m++)
            if (rr[m] < g[m]) {
                double first = pd_base(NULL, 0, C1, P1, r, c->B, 1);
                if (first > rr[m] ? first < g[m] : 1) g[m] = first > rr[m] ? first : rr[m];
            }
    }
}

/* Column j of level 0 into mat[0]: T_0(k, j, M-1) for every ancestor k >= 0 of j (k = -1
 * is row -1's). g[m]: the best time for (k, j] on m+1 machines (at most, with
 * use_fewer_machines) whose first stage is a single stage (PipeDream's base case, no
 * transfer terms), for the current start only; Gp[k][m]: the same where the first stage
 * follows a split (split formula and, with a compression ratio, its input and output
 * transfers), kept for every start as the rest of earlier ones. Starts are taken from the
 * end backwards. Values above bnd cannot matter to the caller and read +INFINITY. Entries
 * of rows computed before are overwritten with the same values up to bnd. With kb, start
 * k's bound is kb[k] instead, at least that of every ancestor of k (so each rest (k2, j]
 * a plan of (k, j] within its bound uses is exact up to it). */
void pd_dp_col(pd_dp *d, int j, double bnd, const double *kb)
{
    const pd_lattice *l = d->l;
    const pd_options *o = d->o;
    const int n = d->n, M = o->machines[0], sw = l->swords, ld = n + 1;
    col_ctx c = {l, n, M, o->straight, o->use_fewer_machines, o->bandwidth_Bps[0],
                 o->activation_compression_ratio, {0}, {0}, d->Gp, d->Gpm, d->Gfirst};
    for (int r = 1; r <= M && r <= 64; r++) {
        c.sync_r[r] = (double)(4 * (r - 1)) / (c.B * (double)r);
        c.inv_r[r] = 1.0 / (double)r;
    }
    const uint64_t *aj = l->anc + (size_t)j * sw;
    int *rfirst = d->Gfirst; /* rfirst[k]: k's first finite rest entry (M: none) */
    double g[64];            /* columns have M <= 64 (pd_dp_new) */
    int hint[64], nh = 0;    /* the split states behind the previous start's gp */
    /* k = -1 is no rest and its entry is row -1's: the starts stop at 0 */
    for (int k = j - 1; k >= 0; k--) {
        if (!pd_bit(aj, k)) continue;
        if (kb) bnd = kb[k];
        double *gp = d->Gp + (size_t)(k + 1) * M, *pm = d->Gpm + (size_t)(k + 1) * M;
        double Ckj = l->C[j] - l->C[k];
        double Pkj = l->P[j] - l->P[k];
        for (int m = 0; m < M; m++) {
            g[m] = INFINITY;
            gp[m] = INFINITY;
            pm[m] = INFINITY;
        }
        rfirst[k] = M;
        if (Ckj / M > bnd) { /* every plan of (k, j] is slower than the bound */
            d->mat[0][(size_t)j * ld + k + 1] = INFINITY;
            continue;
        }
        for (int m = 0; m < (c.straight ? 1 : M); m++) {
            g[m] = pd_base(NULL, 0, Ckj, Pkj, m + 1, c.B, 1);
            double v = (Ckj + Pkj * c.sync_r[m + 1]) * c.inv_r[m + 1];
            if (c.ratio > 0) {
                double tin = (2.0 * l->OAS[k]) / (c.B * (double)(m + 1)) / c.ratio;
                if (tin > v) v = tin;
                if (j < n - 1) {
                    double tout = (2.0 * l->OAS[j]) / (c.B * (double)(m + 1)) / c.ratio;
                    if (tout > v) v = tout;
                }
            }
            gp[m] = v;
        }
        if (M > 1) {
            /* columns keep values only, so the order of the candidates does not matter:
             * the previous start's best split states first (neighbouring starts split
             * alike), which lowers gp early and lets col_pair skip most of the rest */
            int bk2[64];
            for (int m = 0; m < M; m++) bk2[m] = -1;
            const uint64_t *dk = l->desc + (size_t)k * sw;
            for (int h = 0; h < nh; h++)
                if (pd_bit(aj, hint[h]) && pd_bit(dk, hint[h]))
                    col_pair(&c, k, hint[h], bnd, g, gp, bk2);
            for (int w = 0; w < sw; w++) {
                uint64_t bits = aj[w] & dk[w];
                while (bits) {
                    int k2 = w * 64 + __builtin_ctzll(bits);
                    bits &= bits - 1;
                    col_pair(&c, k, k2, bnd, g, gp, bk2);
                }
            }
            int nn = 0;
            for (int m = 0; m < M; m++) {
                int seen = bk2[m] < 0;
                for (int h = 0; h < nn && !seen; h++) seen = hint[h] == bk2[m];
                if (!seen) hint[nn++] = bk2[m];
            }
            if (nn) nh = nn;
        }
        if (c.fewer)
            for (int m = 1; m < M; m++) {
                if (g[m - 1] < g[m]) g[m] = g[m - 1];
                if (gp[m - 1] < gp[m]) gp[m] = gp[m - 1];
            }
        for (int m = 0; m < M; m++) {
            if (g[m] > bnd) g[m] = INFINITY;
            if (gp[m] > bnd) gp[m] = INFINITY;
            pm[m] = m > 0 && pm[m - 1] < gp[m] ? pm[m - 1] : gp[m]; /* on m + 1 or fewer */
            if (gp[m] < INFINITY && rfirst[k] == M) rfirst[k] = m;
        }
        d->mat[0][(size_t)j * ld + k + 1] = g[M - 1];
    }
    d->coldone[j] = 1;
}
