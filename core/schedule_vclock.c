/* schedule_vclock.c: sparse vector clocks over shared bases (schedule_vclock.h). A clock's
 * value is its base's, raised by its entries; entries never sit at or below the base, so
 * two clocks on one base join by merging their entries, and clocks on two bases join
 * the bases first (cached on the left one, as the replicas of a stage meet the same pairs
 * one after another) and keep the entries above the result. A clock with more than K / 4
 * entries folds them into a base of its own, so no operation costs more than O(K). */
#include "schedule_vclock.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

/* A new base holding v (taken over), with one reference, in a free slot or a new one;
 * its index or -1. */
static int base_new(vcset *S, int *v)
{
    int i = S->free_head;
    if (i >= 0) {
        S->free_head = S->b[i].next_free;
    } else {
        vc_base *p = array_room(S->b, S->nb, &S->capb, 64, sizeof *p);
        if (!p) return -1;
        S->b = p;
        i = S->nb++;
        S->b[i].gen = 0;
    }
    vc_base *b = &S->b[i];
    b->v = v, b->refs = 1, b->cnext = 0;
    for (int k = 0; k < 4; k++) b->cp[k] = b->cr[k] = -1;
    return i;
}

/* Drops a reference to base i; the last frees its slot (base 0, the zeros, stays). */
static void base_release(vcset *S, int i)
{
    if (i > 0 && --S->b[i].refs == 0) {
        free(S->b[i].v);
        S->b[i].v = NULL;
        S->b[i].gen++;
        S->b[i].next_free = S->free_head;
        S->free_head = i;
    }
}

int vc_set_init(vcset *S, int K)
{
    memset(S, 0, sizeof *S);
    S->K = K;
    S->free_head = -1;
    int *zero = calloc((size_t)K + 1, sizeof *zero);
    S->tmp = malloc(((size_t)K + 1) * sizeof *S->tmp);
    if (!zero || !S->tmp || base_new(S, zero) < 0) {
        free(zero);
        return -1;
    }
    return 0;
}

void vc_set_free(vcset *S)
{
    for (int i = 0; i < S->nb; i++) free(S->b[i].v);
    free(S->b), free(S->tmp), free(S->etmp);
    memset(S, 0, sizeof *S);
}

void vc_zero(vcset *S, vclock *c)
{
    (void)S;
    c->base = 0, c->n = 0;
}

void vc_drop(vcset *S, vclock *c)
{
    if (c->base >= 0) base_release(S, c->base);
    c->base = -1, c->n = 0;
}

void vc_release(vcset *S, vclock *c)
{
    vc_drop(S, c);
    free(c->e);
    c->e = NULL, c->cap = 0;
}

/* The index of c's entry for k, or where it would go (then *found 0). */
static int find(const vclock *c, int k, int *found)
{
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->e[mid].c < k) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < c->n && c->e[lo].c == k;
    return lo;
}

int vc_get(const vcset *S, const vclock *c, int k)
{
    int f, i = find(c, k, &f);
    return f ? c->e[i].v : S->b[c->base].v[k];
}

static int reserve(vclock *c, int n)
{
    if (n <= c->cap) return 0;
    int cap = c->cap ? c->cap : 4;
    while (cap < n) cap *= 2;
    vc_entry *p = realloc(c->e, (size_t)cap * sizeof *p);
    if (!p) return -1;
    c->e = p, c->cap = cap;
    return 0;
}

/* Folds c's entries into a base of its own when they pass K / 4. 0 or -1. */
static int fold(vcset *S, vclock *c)
{
    if (c->n <= S->K / 4) return 0;
    int *v = malloc(((size_t)S->K + 1) * sizeof *v);
    if (!v) return -1;
    memcpy(v, S->b[c->base].v, (size_t)S->K * sizeof *v);
    for (int i = 0; i < c->n; i++) v[c->e[i].c] = c->e[i].v;
    int nb = base_new(S, v);
    if (nb < 0) {
        free(v);
        return -1;
    }
    base_release(S, c->base);
    c->base = nb, c->n = 0;
    return 0;
}

int vc_raise(vcset *S, vclock *c, int k, int v)
{
    int f, i = find(c, k, &f);
    if (f) {
        c->e[i].v = v;
        return 0;
    }
    if (reserve(c, c->n + 1)) return -1;
    memmove(c->e + i + 1, c->e + i, (size_t)(c->n - i) * sizeof *c->e);
    c->e[i] = (vc_entry){k, v};
    c->n++;
    return fold(S, c);
}

int vc_copy(vcset *S, vclock *dst, const vclock *src)
{
    if (reserve(dst, src->n)) return -1;
    dst->base = src->base;
    S->b[src->base].refs++;
    if (src->n > 0) /* an empty clock may have no entries array */
        memcpy(dst->e, src->e, (size_t)src->n * sizeof *src->e);
    dst->n = src->n;
    return 0;
}

/* The join of bases a and b (a new reference), from a's cache when it holds it; -1 out
 * of memory. */
static int base_join(vcset *S, int a, int b)
{
    vc_base *A = &S->b[a];
    for (int i = 0; i < 4; i++)
        if (A->cp[i] == b && A->cpg[i] == S->b[b].gen && A->cr[i] >= 0 &&
            S->b[A->cr[i]].v && S->b[A->cr[i]].gen == A->crg[i]) {
            S->b[A->cr[i]].refs++;
            return A->cr[i];
        }
    const int *x = S->b[a].v, *y = S->b[b].v;
    int K = S->K, r, a_ge = 1;
    for (int k = 0; k < K && a_ge; k++) a_ge = x[k] >= y[k];
    if (a_ge) { /* a holds b already */
        r = a;
        S->b[a].refs++;
    } else {
        int *v = malloc(((size_t)K + 1) * sizeof *v);
        if (!v) return -1;
        for (int k = 0; k < K; k++) v[k] = x[k] > y[k] ? x[k] : y[k];
        if ((r = base_new(S, v)) < 0) {
            free(v);
            return -1;
        }
    }
    A = &S->b[a]; /* base_new may have moved the array */
    A->cp[A->cnext] = b, A->cpg[A->cnext] = S->b[b].gen;
    A->cr[A->cnext] = r, A->crg[A->cnext] = S->b[r].gen;
    A->cnext = (A->cnext + 1) % 4;
    return r;
}

/* Merges entries x[0..nx) and y[0..ny) (each by c) into out, keeping per component the
 * larger value and only values above base v. Returns the count. */
static int merge(const vc_entry *x, int nx, const vc_entry *y, int ny, const int *v,
                 vc_entry *out)
{
    int i = 0, j = 0, n = 0;
    while (i < nx || j < ny) {
        vc_entry e;
        if (j >= ny || (i < nx && x[i].c < y[j].c)) e = x[i++];
        else if (i >= nx || y[j].c < x[i].c) e = y[j++];
        else {
            e = x[i].v >= y[j].v ? x[i] : y[j];
            i++, j++;
        }
        if (e.v > v[e.c]) out[n++] = e;
    }
    return n;
}

int vc_join(vcset *S, vclock *into, const vclock *from)
{
    int base = into->base;
    if (from->base != into->base) {
        base = base_join(S, into->base, from->base);
        if (base < 0) return -1;
    }
    int need = into->n + from->n;
    if (need > S->etcap) {
        vc_entry *p = realloc(S->etmp, (size_t)need * sizeof *p);
        if (!p) {
            if (base != into->base) base_release(S, base);
            return -1;
        }
        S->etmp = p, S->etcap = need;
    }
    int n = merge(into->e, into->n, from->e, from->n, S->b[base].v, S->etmp);
    if (reserve(into, n)) {
        if (base != into->base) base_release(S, base);
        return -1;
    }
    if (n > 0) memcpy(into->e, S->etmp, (size_t)n * sizeof *into->e);
    into->n = n;
    if (base != into->base) {
        base_release(S, into->base);
        into->base = base;
    }
    return fold(S, into);
}

int vc_join_all(vcset *S, vclock *const *cl, int r)
{
    int K = S->K;
    int *v = malloc(((size_t)K + 1) * sizeof *v);
    if (!v) return -1;
    /* the distinct bases (most often one), then every entry */
    memcpy(v, S->b[cl[0]->base].v, (size_t)K * sizeof *v);
    for (int j = 1; j < r; j++) {
        int seen = 0;
        for (int q = 0; q < j && !seen; q++) seen = cl[q]->base == cl[j]->base;
        if (seen) continue;
        const int *y = S->b[cl[j]->base].v;
        for (int k = 0; k < K; k++) v[k] = y[k] > v[k] ? y[k] : v[k];
    }
    for (int j = 0; j < r; j++)
        for (int i = 0; i < cl[j]->n; i++)
            if (cl[j]->e[i].v > v[cl[j]->e[i].c]) v[cl[j]->e[i].c] = cl[j]->e[i].v;
    int nb = base_new(S, v);
    if (nb < 0) {
        free(v);
        return -1;
    }
    S->b[nb].refs = r;
    for (int j = 0; j < r; j++) {
        base_release(S, cl[j]->base);
        cl[j]->base = nb, cl[j]->n = 0;
    }
    return 0;
}
