/* pd_lattice.c: builds PipeDream's planning graph from a profile and enumerates its
 * antichain states (down-closed node sets) the way Graph.antichain_dag() does: from the
 * first source, a state I leads to I + down(y) for every node y outside I that has an
 * in-neighbour inside I. Too many states: branches are compressed (chains inside parallel
 * regions become one node), and if still too many, the prefixes of the topological order
 * become the states. */
#include "pd_lattice.h"

#include <stdlib.h>
#include <string.h>

typedef struct graph {
    int n;
    pd_node *nodes;
} graph;

static void nodes_free(pd_node *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        free(v[i].members);
        free(v[i].in);
        free(v[i].out);
    }
    free(v);
}

/* Frees the states' arrays and empties them (a lattice enumerated again reuses l). */
static void states_free(pd_lattice *l)
{
    free(l->ideal);
    free(l->C);
    free(l->Act);
    free(l->P);
    free(l->OAS);
    free(l->anc);
    free(l->desc);
    l->ideal = NULL;
    l->C = l->Act = l->P = l->OAS = NULL;
    l->anc = l->desc = NULL;
}

void pd_lattice_free(pd_lattice *l)
{
    if (!l) return;
    nodes_free(l->nodes, l->nnodes);
    free(l->removed_src);
    free(l->removed_sink);
    states_free(l);
    free(l);
}

static int starts_with(const char *s, const char *pre)
{
    return s && strncmp(s, pre, strlen(pre)) == 0;
}

static const char *layer_desc(const profile_layer *L)
{
    return (L->desc && L->desc[0]) ? L->desc : L->kind;
}

static int push_int(int **a, int *n, int *cap, int v)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 8;
        int *t = realloc(*a, (size_t)nc * sizeof **a);
        if (!t) return -1;
        *a = t;
        *cap = nc;
    }
    (*a)[(*n)++] = v;
    return 0;
}

/* Adjacency of the kept layers: fills g (node per kept layer, in layer order). kept[i] is
 * the node index of layer i or -1. Returns 0 or -1 (out of memory). */
static int graph_from_profile(const profile *p, const int *kept, int nkept, double speed,
                              graph *g)
{
    g->n = nkept;
    g->nodes = calloc(nkept ? (size_t)nkept : 1, sizeof *g->nodes);
    if (!g->nodes) return -1;
    int *incap = calloc((size_t)nkept + 1, sizeof(int));
    int *outcap = calloc((size_t)nkept + 1, sizeof(int));
    int rc = -1;
    if (!incap || !outcap) goto done;
    for (int i = 0; i < p->nlayers; i++) {
        int v = kept[i];
        if (v < 0) continue;
        const profile_layer *L = &p->layers[i];
        pd_node *nd = &g->nodes[v];
        /* PipeDream: (forward + backward) / 1000 per node, summed later */
        nd->c = (L->forward_ms + L->backward_ms) / 1000.0;
        if (speed != 1.0) nd->c /= speed;
        nd->act = L->activation_bytes;
        nd->param = L->parameter_bytes;
        nd->nmembers = 1;
        nd->members = malloc(sizeof(int));
        if (!nd->members) goto done;
        nd->members[0] = i;
    }
    for (int e = 0; e < p->nedges; e++) {
        int a = kept[p->edges[e].src], b = kept[p->edges[e].dst];
        if (a < 0 || b < 0) continue;
        if (push_int(&g->nodes[a].out, &g->nodes[a].nout, &outcap[a], b) ||
            push_int(&g->nodes[b].in, &g->nodes[b].nin, &incap[b], a))
            goto done;
    }
    rc = 0;
done:
    free(incap);
    free(outcap);
    return rc;
}

/* down[v]: v and all its ancestors, as node bitsets (nodes are in topological order). */
static uint64_t *down_sets(const graph *g, int nw)
{
    uint64_t *d = calloc((size_t)g->n * nw + 1, sizeof *d);
    if (!d) return NULL;
    for (int v = 0; v < g->n; v++) {
        uint64_t *dv = d + (size_t)v * nw;
        dv[v >> 6] |= 1ull << (v & 63);
        for (int k = 0; k < g->nodes[v].nin; k++) {
            const uint64_t *du = d + (size_t)g->nodes[v].in[k] * nw;
            for (int w = 0; w < nw; w++) dv[w] |= du[w];
        }
    }
    return d;
}

/* ---- state hash set ---------------------------------------------------------------- */

typedef struct sset {
    int nw;
    int n, cap;
    uint64_t *sets;      /* [cap * nw] */
    int *table;          /* open addressing, -1 empty */
    int tcap;
} sset;

static uint64_t hash_set(const uint64_t *s, int nw)
{
    uint64_t h = 1469598103934665603ull;
    for (int w = 0; w < nw; w++) {
        h ^= s[w];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static int sset_grow_table(sset *S)
{
    int nt = S->tcap ? S->tcap * 2 : 1024;
    int *t = malloc((size_t)nt * sizeof *t);
    if (!t) return -1;
    for (int i = 0; i < nt; i++) t[i] = -1;
    for (int i = 0; i < S->n; i++) {
        uint64_t h = hash_set(S->sets + (size_t)i * S->nw, S->nw);
        int pos = (int)(h & (uint64_t)(nt - 1));
        while (t[pos] >= 0) pos = (pos + 1) & (nt - 1);
        t[pos] = i;
    }
    free(S->table);
    S->table = t;
    S->tcap = nt;
    return 0;
}

/* Index of s in S, adding it when absent (*added = 1). -1 when out of memory. */
static int sset_add(sset *S, const uint64_t *s, int *added)
{
    if ((S->n + 1) * 2 > S->tcap && sset_grow_table(S)) return -1;
    uint64_t h = hash_set(s, S->nw);
    int pos = (int)(h & (uint64_t)(S->tcap - 1));
    while (S->table[pos] >= 0) {
        if (!memcmp(S->sets + (size_t)S->table[pos] * S->nw, s, (size_t)S->nw * 8)) {
            *added = 0;
            return S->table[pos];
        }
        pos = (pos + 1) & (S->tcap - 1);
    }
    if (S->n == S->cap) {
        int nc = S->cap ? S->cap * 2 : 256;
        uint64_t *t = realloc(S->sets, (size_t)nc * S->nw * sizeof *t);
        if (!t) return -1;
        S->sets = t;
        S->cap = nc;
    }
    memcpy(S->sets + (size_t)S->n * S->nw, s, (size_t)S->nw * 8);
    S->table[pos] = S->n;
    *added = 1;
    return S->n++;
}

/* ---- ordering of states ------------------------------------------------------------- */

typedef struct order_ctx {
    const uint64_t *sets;
    const int *pop;
    int nw;
} order_ctx;

/* Size first; then the state holding the lowest node where they differ comes first. */
static int state_cmp(const order_ctx *c, int a, int b)
{
    if (c->pop[a] != c->pop[b]) return c->pop[a] < c->pop[b] ? -1 : 1;
    const uint64_t *x = c->sets + (size_t)a * c->nw, *y = c->sets + (size_t)b * c->nw;
    for (int w = 0; w < c->nw; w++) {
        uint64_t d = x[w] ^ y[w];
        if (d) return (x[w] & (d & -d)) ? -1 : 1;
    }
    return 0;
}

static void merge_sort(int *a, int *tmp, int n, const order_ctx *c)
{
    if (n < 2) return;
    int h = n / 2;
    merge_sort(a, tmp, h, c);
    merge_sort(a + h, tmp, n - h, c);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = state_cmp(c, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

/* ---- enumeration -------------------------------------------------------------------- */

/* Enumerates the states of g from node `start` into l. Returns 0, 1 when more than
 * max_states appear, -1 when out of memory. */
static int enumerate(const graph *g, int start, int max_states, int want_oas, int prefixes,
                     pd_lattice *l)
{
    int nw = (g->n + 63) / 64;
    if (nw == 0) nw = 1;
    uint64_t *down = down_sets(g, nw);
    sset S = {.nw = nw};
    int *tfrom = NULL, *tto = NULL, nt = 0, tcap = 0, tcap2 = 0;
    uint64_t *J = calloc((size_t)nw, 8);
    int rc = -1, added;
    int *pop = NULL, *perm = NULL, *tmp = NULL, *rank = NULL, *cnt = NULL, *byto = NULL;
    if (!down || !J) goto done;
    if (prefixes) { /* the prefixes of the node order, each leading to the next */
        for (int t = 0; t < g->n; t++) {
            J[t >> 6] |= 1ull << (t & 63);
            int id = sset_add(&S, J, &added);
            if (id < 0) goto done;
            if (t == 0) continue;
            if (push_int(&tfrom, &nt, &tcap, id - 1)) goto done;
            nt--;
            if (push_int(&tto, &nt, &tcap2, id)) goto done;
        }
    } else if (sset_add(&S, down + (size_t)start * nw, &added) < 0) {
        goto done;
    }
    for (int q = 0; !prefixes && q < S.n; q++) { /* BFS: S grows while we walk it */
        for (int u = 0; u < g->n; u++) {
            if (!pd_bit(S.sets + (size_t)q * nw, u)) continue;
            for (int e = 0; e < g->nodes[u].nout; e++) {
                int y = g->nodes[u].out[e];
                const uint64_t *I = S.sets + (size_t)q * nw;
                if (pd_bit(I, y)) continue;
                const uint64_t *dy = down + (size_t)y * nw;
                for (int w = 0; w < nw; w++) J[w] = I[w] | dy[w];
                int id = sset_add(&S, J, &added);
                if (id < 0) goto done;
                if (push_int(&tfrom, &nt, &tcap, q)) goto done;
                nt--;
                if (push_int(&tto, &nt, &tcap2, id)) goto done;
                if (S.n > max_states) {
                    rc = 1;
                    goto done;
                }
            }
        }
    }
    int n = S.n;
    pop = malloc((size_t)n * sizeof *pop);
    perm = malloc((size_t)n * sizeof *perm);
    tmp = malloc((size_t)n * sizeof *tmp);
    rank = malloc((size_t)n * sizeof *rank);
    if (!pop || !perm || !tmp || !rank) goto done;
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int w = 0; w < nw; w++) c += __builtin_popcountll(S.sets[(size_t)i * nw + w]);
        pop[i] = c;
        perm[i] = i;
    }
    order_ctx oc = {S.sets, pop, nw};
    merge_sort(perm, tmp, n, &oc);
    for (int i = 0; i < n; i++) rank[perm[i]] = i;

    l->n = n;
    l->nwords = nw;
    l->swords = (n + 63) / 64;
    l->ideal = malloc((size_t)n * nw * 8);
    l->C = calloc((size_t)n, sizeof(double));
    l->Act = calloc((size_t)n, sizeof(double));
    l->P = calloc((size_t)n, sizeof(double));
    l->OAS = calloc((size_t)n, sizeof(double));
    l->anc = calloc((size_t)n * l->swords, 8);
    l->desc = calloc((size_t)n * l->swords, 8);
    if (!l->ideal || !l->C || !l->Act || !l->P || !l->OAS || !l->anc || !l->desc) goto done;
    for (int i = 0; i < n; i++) {
        const uint64_t *I = S.sets + (size_t)perm[i] * nw;
        memcpy(l->ideal + (size_t)i * nw, I, (size_t)nw * 8);
        double c = 0, a = 0, pz = 0;
        for (int v = 0; v < g->n; v++) {
            if (!pd_bit(I, v)) continue;
            c += g->nodes[v].c;
            a += g->nodes[v].act;
            pz += g->nodes[v].param;
        }
        l->C[i] = c;
        l->Act[i] = a;
        l->P[i] = pz;
    }
    /* ancestors: states in size order are in topological order of the DAG */
    cnt = calloc((size_t)n + 1, sizeof *cnt);
    byto = malloc((size_t)(nt ? nt : 1) * sizeof *byto);
    if (!cnt || !byto) goto done;
    for (int t = 0; t < nt; t++) cnt[rank[tto[t]] + 1]++;
    for (int i = 0; i < n; i++) cnt[i + 1] += cnt[i];
    {
        int *fill = tmp; /* reuse: next slot per destination */
        memcpy(fill, cnt, (size_t)n * sizeof *fill);
        for (int t = 0; t < nt; t++) byto[fill[rank[tto[t]]]++] = rank[tfrom[t]];
    }
    int sw = l->swords;
    for (int j = 0; j < n; j++) {
        uint64_t *aj = l->anc + (size_t)j * sw;
        for (int t = cnt[j]; t < cnt[j + 1]; t++) {
            int i = byto[t];
            const uint64_t *ai = l->anc + (size_t)i * sw;
            for (int w = 0; w < sw; w++) aj[w] |= ai[w];
            aj[i >> 6] |= 1ull << (i & 63);
        }
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            if (pd_bit(l->anc + (size_t)j * sw, i))
                l->desc[(size_t)i * sw + (j >> 6)] |= 1ull << (j & 63);
    if (want_oas) {
        /* PipeDream's augmented antichain: the maximal nodes a, plus every strict ancestor
         * p of some a with an out-neighbour outside down(a) */
        uint64_t *ext = calloc((size_t)nw, 8);
        if (!ext) goto done;
        for (int i = 0; i < n; i++) {
            const uint64_t *I = l->ideal + (size_t)i * nw;
            memset(ext, 0, (size_t)nw * 8);
            for (int a = 0; a < g->n; a++) {
                if (!pd_bit(I, a)) continue;
                int maximal = 1;
                for (int e = 0; e < g->nodes[a].nout; e++)
                    if (pd_bit(I, g->nodes[a].out[e])) maximal = 0;
                if (!maximal) continue;
                ext[a >> 6] |= 1ull << (a & 63);
                const uint64_t *da = down + (size_t)a * nw;
                for (int pn = 0; pn < a; pn++) {
                    if (!pd_bit(da, pn) || g->nodes[pn].nout < 2) continue;
                    for (int e = 0; e < g->nodes[pn].nout; e++)
                        if (!pd_bit(da, g->nodes[pn].out[e])) {
                            ext[pn >> 6] |= 1ull << (pn & 63);
                            break;
                        }
                }
            }
            double s = 0;
            for (int v = 0; v < g->n; v++)
                if (pd_bit(ext, v)) s += g->nodes[v].act;
            l->OAS[i] = s;
        }
        free(ext);
    }
    rc = 0;
done:
    free(down);
    free(J);
    free(S.sets);
    free(S.table);
    free(tfrom);
    free(tto);
    free(pop);
    free(perm);
    free(tmp);
    free(rank);
    free(cnt);
    free(byto);
    return rc;
}

/* ---- compression -------------------------------------------------------------------- */

/* cut[v] = 1 when v is comparable with every other node. */
static int cut_nodes(const graph *g, int *cut)
{
    int nw = (g->n + 63) / 64;
    uint64_t *d = down_sets(g, nw ? nw : 1);
    if (!d) return -1;
    int *ndesc = calloc((size_t)g->n + 1, sizeof *ndesc);
    if (!ndesc) {
        free(d);
        return -1;
    }
    for (int v = 0; v < g->n; v++)
        for (int u = 0; u < g->n; u++)
            if (u != v && pd_bit(d + (size_t)v * nw, u)) ndesc[u]++;
    for (int v = 0; v < g->n; v++) {
        int na = 0;
        for (int w = 0; w < nw; w++) na += __builtin_popcountll(d[(size_t)v * nw + w]);
        cut[v] = (na - 1) + ndesc[v] + 1 == g->n;
    }
    free(ndesc);
    free(d);
    return 0;
}

/* Contracts g by group ids (groups must be convex); the new nodes are in a topological
 * order (smallest member first among ready ones). map[v] = new node of v. 0 or -1. */
static int contract(const graph *g, const int *group, int ngroups, graph *out, int *map)
{
    out->n = ngroups;
    out->nodes = calloc((size_t)ngroups + 1, sizeof *out->nodes);
    int *first = malloc(((size_t)ngroups + 1) * sizeof *first);
    int *indeg = calloc((size_t)ngroups + 1, sizeof *indeg);
    int *order = malloc(((size_t)ngroups + 1) * sizeof *order);
    int *pos = malloc(((size_t)ngroups + 1) * sizeof *pos);
    int *caps = calloc(((size_t)ngroups + 1) * 3, sizeof *caps);
    graph tmp = {ngroups, out->nodes};
    int rc = -1;
    if (!out->nodes || !first || !indeg || !order || !pos || !caps) goto done;
    for (int i = 0; i < ngroups; i++) first[i] = -1;
    for (int v = 0; v < g->n; v++) {
        int G = group[v];
        pd_node *nd = &tmp.nodes[G];
        if (first[G] < 0) first[G] = v;
        nd->c += g->nodes[v].c;
        nd->param += g->nodes[v].param;
        int leaves = g->nodes[v].nout == 0;
        for (int e = 0; e < g->nodes[v].nout; e++) {
            int G2 = group[g->nodes[v].out[e]];
            if (G2 != G) {
                leaves = 1;
                int dup = 0;
                for (int k = 0; k < nd->nout; k++) dup |= nd->out[k] == G2;
                if (!dup) {
                    if (push_int(&nd->out, &nd->nout, &caps[G * 3], G2)) goto done;
                    if (push_int(&tmp.nodes[G2].in, &tmp.nodes[G2].nin, &caps[G2 * 3 + 1], G))
                        goto done;
                }
            }
        }
        if (leaves) nd->act += g->nodes[v].act;
        for (int m = 0; m < g->nodes[v].nmembers; m++)
            if (push_int(&nd->members, &nd->nmembers, &caps[G * 3 + 2], g->nodes[v].members[m]))
                goto done;
    }
    /* Kahn, smallest first member first */
    for (int G = 0; G < ngroups; G++) indeg[G] = tmp.nodes[G].nin;
    for (int k = 0; k < ngroups; k++) {
        int best = -1;
        for (int G = 0; G < ngroups; G++)
            if (indeg[G] == 0 && (best < 0 || first[G] < first[best])) best = G;
        if (best < 0) goto done;
        indeg[best] = -1;
        order[k] = best;
        pos[best] = k;
        for (int e = 0; e < tmp.nodes[best].nout; e++) indeg[tmp.nodes[best].out[e]]--;
    }
    /* renumber */
    pd_node *nn = calloc((size_t)ngroups + 1, sizeof *nn);
    if (!nn) goto done;
    for (int k = 0; k < ngroups; k++) {
        nn[k] = tmp.nodes[order[k]];
        for (int e = 0; e < nn[k].nin; e++) nn[k].in[e] = pos[nn[k].in[e]];
        for (int e = 0; e < nn[k].nout; e++) nn[k].out[e] = pos[nn[k].out[e]];
    }
    free(tmp.nodes);
    out->nodes = nn;
    for (int v = 0; v < g->n; v++) map[v] = pos[group[v]];
    rc = 0;
done:
    if (rc) {
        nodes_free(tmp.nodes, ngroups);
        out->nodes = NULL;
    }
    free(first);
    free(indeg);
    free(order);
    free(pos);
    free(caps);
    return rc;
}

/* Branch compression: every chain of nodes inside a parallel region (nodes not comparable
 * with every other node), each with one successor whose only predecessor it is, becomes
 * one node (activation: the chain's last node's). */
static int compress(const graph *g, graph *out, int *map)
{
    int *cut = malloc(((size_t)g->n + 1) * sizeof *cut);
    int *group = malloc(((size_t)g->n + 1) * sizeof *group);
    int rc = -1, ng = 0;
    if (!cut || !group || cut_nodes(g, cut)) goto done;
    for (int v = 0; v < g->n; v++) group[v] = -1;
    for (int v = 0; v < g->n; v++) {
        if (group[v] >= 0) continue;
        group[v] = ng;
        int x = v; /* follow the chain forward */
        while (!cut[x] && g->nodes[x].nout == 1) {
            int u = g->nodes[x].out[0];
            if (cut[u] || g->nodes[u].nin != 1 || group[u] >= 0) break;
            group[u] = ng;
            x = u;
        }
        ng++;
    }
    rc = contract(g, group, ng, out, map);
done:
    free(cut);
    free(group);
    return rc;
}

pd_lattice *pd_lattice_build(const profile *p, const int *start_order, double speed,
                             int max_states, int want_oas, plumb_err *err)
{
    pd_lattice *l = calloc(1, sizeof *l);
    int *indeg = calloc((size_t)p->nlayers + 1, sizeof(int));
    int *outdeg = calloc((size_t)p->nlayers + 1, sizeof(int));
    int *removed = calloc((size_t)p->nlayers + 1, sizeof(int));
    int *kept = malloc(((size_t)p->nlayers + 1) * sizeof(int));
    int *map = malloc(((size_t)p->nlayers + 1) * sizeof(int));
    graph g = {0, NULL}, g2 = {0, NULL};
    int ns = 0, nk = 0, nkept = 0;
    if (!l || !indeg || !outdeg || !removed || !kept || !map) goto oom;
    l->removed_src = malloc(((size_t)p->nlayers + 1) * sizeof(int));
    l->removed_sink = malloc(((size_t)p->nlayers + 1) * sizeof(int));
    if (!l->removed_src || !l->removed_sink) goto oom;
    if (max_states <= 0) max_states = 4000;
    for (int e = 0; e < p->nedges; e++) {
        outdeg[p->edges[e].src]++;
        indeg[p->edges[e].dst]++;
    }
    /* sources whose description starts with "Input" go (PipeDream keeps them on stage 0) */
    for (int t = 0; t < p->nlayers; t++) {
        int i = start_order ? start_order[t] : t;
        if (indeg[i] == 0 && starts_with(layer_desc(&p->layers[i]), "Input")) {
            removed[i] = 1;
            l->removed_src[ns++] = i;
        }
    }
    for (int e = 0; e < p->nedges; e++)
        if (removed[p->edges[e].src]) indeg[p->edges[e].dst]--;
    /* then sinks of what is left whose description starts with "__getitem__" */
    for (int t = 0; t < p->nlayers; t++) {
        int i = start_order ? start_order[t] : t;
        if (!removed[i] && outdeg[i] == 0 && starts_with(layer_desc(&p->layers[i]), "__getitem__")) {
            removed[i] = 2;
            l->removed_sink[nk++] = i;
        }
    }
    l->removed_src[ns] = -1;
    l->removed_sink[nk] = -1;
    for (int i = 0; i < p->nlayers; i++) kept[i] = removed[i] ? -1 : nkept++;
    if (nkept == 0) {
        err_set(err, NULL, NULL, "the profile has no layers to plan once Input and "
                "__getitem__ nodes are set aside");
        goto fail;
    }
    if (graph_from_profile(p, kept, nkept, speed, &g)) goto oom;
    int start = -1;
    for (int t = 0; t < p->nlayers && start < 0; t++) {
        int i = start_order ? start_order[t] : t;
        if (kept[i] >= 0 && g.nodes[kept[i]].nin == 0) start = kept[i];
    }
    for (int level = 0; level <= 2; level++) {
        if (level == 1) {
            if (compress(&g, &g2, map)) goto oom;
            nodes_free(g.nodes, g.n);
            g = g2;
            g2.nodes = NULL;
            start = map[start];
        }
        int rc = enumerate(&g, start, level == 2 ? 1 << 30 : max_states, want_oas,
                           level == 2, l);
        if (rc < 0) goto oom;
        if (rc == 0) {
            l->compressed = level;
            l->start = start;
            l->nnodes = g.n;
            l->nodes = g.nodes;
            g.nodes = NULL;
            break;
        }
        states_free(l);
    }
    if (!l->nodes) goto oom;
    free(indeg);
    free(outdeg);
    free(removed);
    free(kept);
    free(map);
    return l;
oom:
    err_set(err, NULL, NULL, "out of memory while enumerating antichain states");
fail:
    nodes_free(g.nodes, g.n);
    free(indeg);
    free(outdeg);
    free(removed);
    free(kept);
    free(map);
    pd_lattice_free(l);
    return NULL;
}
