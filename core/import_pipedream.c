/* import_pipedream.c: parser for PipeDream's graph.txt profiles and their conversion to
 * plumb profiles (layers in a deterministic topological order). Every malformed line gets
 * one message "FILE:LINE: what was expected (got ...)". */
#include "import_pipedream.h"
#include "grow.h"
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small text helpers ---------------------------------------------------------------- */

/* Quotes s[0..n) for a "(got ...)" part, shortened to 48 characters. Returns buf. */
static char *snip(char *buf, size_t bn, const char *s, size_t n)
{
    if (n <= 48) snprintf(buf, bn, "\"%.*s\"", (int)n, s);
    else snprintf(buf, bn, "\"%.45s...\"", s);
    return buf;
}

/* Sets err to "FILE:LINE: message". Always returns -1. */
static int line_err(plumb_err *err, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int line_err(plumb_err *err, const char *file, int line, const char *fmt, ...)
{
    char text[PLUMB_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char where[512];
    snprintf(where, sizeof where, "%s:%d", file, line);
    return err_set(err, where, NULL, "%s", text);
}

/* A slice of the input text. */
typedef struct span {
    const char *s;
    size_t n;
} span;

static span trim(span x)
{
    while (x.n && (*x.s == ' ' || *x.s == '\t')) x.s++, x.n--;
    while (x.n && (x.s[x.n - 1] == ' ' || x.s[x.n - 1] == '\t' || x.s[x.n - 1] == '\r')) x.n--;
    return x;
}

/* Splits x on " -- " into at most max parts; returns the number of parts found (which may
 * exceed max, then only max are stored). */
static int split_dashes(span x, span *parts, int max)
{
    int k = 0;
    const char *p = x.s, *end = x.s + x.n;
    for (;;) {
        const char *hit = NULL;
        for (const char *q = p; q + 4 <= end; q++)
            if (q[0] == ' ' && q[1] == '-' && q[2] == '-' && q[3] == ' ') { hit = q; break; }
        const char *stop = hit ? hit : end;
        if (k < max) parts[k] = (span){p, (size_t)(stop - p)};
        k++;
        if (!hit) return k;
        p = hit + 4;
    }
}

/* Parses a whole span as a finite number >= 0. Returns 0 or -1. */
static int parse_num(span x, double *out)
{
    char buf[64];
    x = trim(x);
    if (x.n == 0 || x.n >= sizeof buf) return -1;
    memcpy(buf, x.s, x.n);
    buf[x.n] = '\0';
    /* plain decimal notation only: no "nan", "inf" or hex */
    for (size_t i = 0; i < x.n; i++)
        if (!strchr("0123456789.eE+-", buf[i])) return -1;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || errno == ERANGE || !isfinite(v) || v < 0) return -1;
    *out = v == 0 ? 0 : v; /* -0 -> 0 */
    return 0;
}

/* ---- graph building -------------------------------------------------------------------- */

void pd_graph_free(pd_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].id);
        free(g->nodes[i].desc);
    }
    free(g->nodes);
    free(g->edges);
    free(g);
}

static char *dup_span(span x)
{
    char *d = malloc(x.n + 1);
    if (d) {
        memcpy(d, x.s, x.n);
        d[x.n] = '\0';
    }
    return d;
}

static const char NODE_FORM[] =
    "\"ID -- DESCRIPTION -- forward_compute_time=MS, backward_compute_time=MS, "
    "activation_size=BYTES, parameter_size=BYTES[ -- stage_id=N]\"";

/* Parses "activation_size" as a number or a list "[a; b; c]", summing the list. */
static int parse_activation(span v, double *sum, int *count)
{
    v = trim(v);
    if (v.n >= 2 && v.s[0] == '[' && v.s[v.n - 1] == ']') {
        span in = {v.s + 1, v.n - 2};
        double s = 0;
        int k = 0;
        const char *p = in.s, *end = in.s + in.n;
        while (p <= end) {
            const char *semi = memchr(p, ';', (size_t)(end - p));
            const char *stop = semi ? semi : end;
            double x;
            if (parse_num((span){p, (size_t)(stop - p)}, &x)) return -1;
            s += x;
            k++;
            if (!semi) break;
            p = semi + 1;
        }
        *sum = s;
        *count = k;
        return 0;
    }
    *count = 1;
    return parse_num(v, sum);
}

/* Parses the metadata field "forward_compute_time=..., ..." of node n. */
static int parse_metadata(const char *file, int line, span meta, pd_node *n, plumb_err *err)
{
    static const char *const keys[4] = {"forward_compute_time", "backward_compute_time",
                                        "activation_size", "parameter_size"};
    int seen[4] = {0, 0, 0, 0};
    const char *p = meta.s, *end = meta.s + meta.n;
    char got[64];
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        span item = trim((span){p, (size_t)(stop - p)});
        const char *eq = memchr(item.s, '=', item.n);
        if (!eq)
            return line_err(err, file, line, "expected KEY=VALUE in the metadata field (got %s)",
                            snip(got, sizeof got, item.s, item.n));
        span key = trim((span){item.s, (size_t)(eq - item.s)});
        span val = {eq + 1, (size_t)(item.s + item.n - eq - 1)};
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (strlen(keys[i]) == key.n && !memcmp(keys[i], key.s, key.n)) k = i;
        if (k < 0)
            return line_err(err, file, line, "expected forward_compute_time, "
                            "backward_compute_time, activation_size or parameter_size (got %s)",
                            snip(got, sizeof got, key.s, key.n));
        if (seen[k])
            return line_err(err, file, line, "%s: expected once per node line (got it twice)",
                            keys[k]);
        seen[k] = 1;
        int bad;
        switch (k) {
        case 0: bad = parse_num(val, &n->forward_ms); break;
        case 1: bad = parse_num(val, &n->backward_ms); break;
        case 2: bad = parse_activation(val, &n->activation_bytes, &n->nactivations); break;
        default: bad = parse_num(val, &n->parameter_bytes); break;
        }
        if (bad)
            return line_err(err, file, line, "%s: expected %s (got %s)", keys[k],
                            k == 2 ? "a number >= 0 or a list [A; B; ...] of them"
                                   : "a number >= 0",
                            snip(got, sizeof got, trim(val).s, trim(val).n));
        if (!comma) break;
        p = comma + 1;
    }
    for (int i = 0; i < 4; i++)
        if (!seen[i])
            return line_err(err, file, line, "missing %s; expected a node line %s", keys[i],
                            NODE_FORM);
    return 0;
}

static int is_id(span x)
{
    if (x.n == 0) return 0;
    for (size_t i = 0; i < x.n; i++)
        if (x.s[i] == ' ' || x.s[i] == '\t') return 0;
    return 1;
}

static int parse_node(const char *file, int line, span text, pd_node *n, plumb_err *err)
{
    span f[4];
    char got[64];
    int k = split_dashes(text, f, 4);
    if (k < 3 || k > 4)
        return line_err(err, file, line, "expected a node line %s (got %d field%s separated "
                        "by \" -- \")", NODE_FORM, k, k == 1 ? "" : "s");
    span id = trim(f[0]), desc = trim(f[1]);
    if (!is_id(id))
        return line_err(err, file, line, "expected a node id without spaces (got %s)",
                        snip(got, sizeof got, id.s, id.n));
    if (desc.n == 0) return line_err(err, file, line, "expected a description (got \"\")");
    n->stage_id = -1;
    n->line = line;
    if (parse_metadata(file, line, trim(f[2]), n, err)) return -1;
    if (k == 4) {
        span s = trim(f[3]);
        const char *pre = "stage_id=";
        size_t pl = strlen(pre);
        double v;
        if (s.n <= pl || memcmp(s.s, pre, pl) ||
            parse_num((span){s.s + pl, s.n - pl}, &v) || v != floor(v) || v > 1e9)
            return line_err(err, file, line, "expected \"stage_id=N\" with N an integer >= 0 "
                            "as the 4th field (got %s)", snip(got, sizeof got, s.s, s.n));
        n->stage_id = (int)v;
    }
    n->id = dup_span(id);
    n->desc = dup_span(desc);
    if (!n->id || !n->desc) return err_set(err, file, NULL, "out of memory");
    return 0;
}

/* Node ids sorted for lookup. */
typedef struct id_ref {
    const char *id;
    int idx;
} id_ref;

static int cmp_id_ref(const void *a, const void *b)
{
    const id_ref *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int find_id(const id_ref *ids, int n, span key)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strncmp(ids[mid].id, key.s, key.n);
        if (c == 0 && ids[mid].id[key.n] != '\0') c = 1;
        if (c == 0) return ids[mid].idx;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

typedef struct raw_edge {
    span src, dst;
    int line;
} raw_edge;

static int cmp_edge(const void *a, const void *b)
{
    const pd_edge *x = a, *y = b;
    if (x->src != y->src) return (x->src > y->src) - (x->src < y->src);
    if (x->dst != y->dst) return (x->dst > y->dst) - (x->dst < y->dst);
    return (x->line > y->line) - (x->line < y->line);
}

/* Resolves edge endpoints to node indices and checks ids and edges. */
static int resolve(const char *file, pd_graph *g, const raw_edge *raw, plumb_err *err)
{
    int rc = -1, n = g->nnodes, m = g->nedges;
    id_ref *ids = malloc((n ? (size_t)n : 1) * sizeof *ids);
    pd_edge *sorted = malloc((m ? (size_t)m : 1) * sizeof *sorted);
    if (!ids || !sorted) {
        err_set(err, file, NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) ids[i] = (id_ref){g->nodes[i].id, i};
    qsort(ids, (size_t)n, sizeof *ids, cmp_id_ref);
    for (int i = 1; i < n; i++) {
        if (!strcmp(ids[i].id, ids[i - 1].id)) {
            const pd_node *a = &g->nodes[ids[i - 1].idx], *b = &g->nodes[ids[i].idx];
            const pd_node *first = a->line < b->line ? a : b, *again = a->line < b->line ? b : a;
            line_err(err, file, again->line, "expected a unique node id (got \"%s\" again, "
                     "first defined at line %d)", again->id, first->line);
            goto done;
        }
    }
    for (int e = 0; e < m; e++) {
        char got[64];
        int s = find_id(ids, n, raw[e].src), d = find_id(ids, n, raw[e].dst);
        if (s < 0 || d < 0) {
            span bad = s < 0 ? raw[e].src : raw[e].dst;
            line_err(err, file, raw[e].line, "expected an edge between node ids defined by node "
                     "lines (got the unknown node %s)", snip(got, sizeof got, bad.s, bad.n));
            goto done;
        }
        if (s == d) {
            line_err(err, file, raw[e].line, "expected an edge between two different nodes "
                     "(got a self loop on %s)", g->nodes[s].id);
            goto done;
        }
        g->edges[e] = (pd_edge){s, d, raw[e].line};
    }
    if (m > 0) memcpy(sorted, g->edges, (size_t)m * sizeof *sorted);
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_edge);
    for (int e = 1; e < m; e++) {
        if (sorted[e].src == sorted[e - 1].src && sorted[e].dst == sorted[e - 1].dst) {
            line_err(err, file, sorted[e].line, "expected each edge once (got %s -- %s again, "
                     "first at line %d)", g->nodes[sorted[e].src].id,
                     g->nodes[sorted[e].dst].id, sorted[e - 1].line);
            goto done;
        }
    }
    rc = 0;
done:
    free(ids);
    free(sorted);
    return rc;
}

pd_graph *pd_graph_parse(const char *file, const char *text, size_t len, plumb_err *err)
{
    pd_graph *g = calloc(1, sizeof *g);
    raw_edge *raw = NULL;
    int ncap = 0, ecap = 0;
    if (!g) goto oom;
    if (memchr(text, '\0', len)) {
        err_set(err, file, NULL, "expected a text file (got a NUL byte)");
        goto fail;
    }
    int line = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        span ln = {p, (size_t)(stop - p)};
        line++;
        p = nl ? nl + 1 : end;
        if (trim(ln).n == 0) continue;
        if (ln.s[0] == '\t') {
            span f[2];
            char got[64];
            span body = trim((span){ln.s + 1, ln.n - 1});
            int k = split_dashes(body, f, 2);
            if (k != 2 || !is_id(trim(f[0])) || !is_id(trim(f[1]))) {
                line_err(err, file, line, "expected an edge line \"<TAB>SRC_ID -- DST_ID\" "
                         "(got %s)", snip(got, sizeof got, body.s, body.n));
                goto fail;
            }
            raw_edge *r = array_room(raw, g->nedges, &ecap, 64, sizeof *r);
            if (!r) goto oom;
            raw = r;
            raw[g->nedges++] = (raw_edge){trim(f[0]), trim(f[1]), line};
            continue;
        }
        if (ln.s[0] == ' ') {
            char got[64];
            line_err(err, file, line, "expected a node line %s or an edge line starting with "
                     "a TAB (got a line starting with a space: %s)", NODE_FORM,
                     snip(got, sizeof got, ln.s, ln.n));
            goto fail;
        }
        pd_node *nn = array_room(g->nodes, g->nnodes, &ncap, 64, sizeof *nn);
        if (!nn) goto oom;
        g->nodes = nn;
        pd_node *n = &g->nodes[g->nnodes++];
        memset(n, 0, sizeof *n);
        if (parse_node(file, line, trim(ln), n, err)) goto fail;
    }
    if (g->nnodes == 0) {
        err_set(err, file, NULL, "expected at least one node line %s (got none)", NODE_FORM);
        goto fail;
    }
    g->edges = malloc((g->nedges ? (size_t)g->nedges : 1) * sizeof *g->edges);
    if (!g->edges) goto oom;
    if (resolve(file, g, raw, err)) goto fail;
    int *order = malloc((size_t)g->nnodes * sizeof(int));
    if (!order) goto oom;
    int bad = pd_graph_topo_order(g, file, order, err);
    free(order);
    if (bad) goto fail;
    free(raw);
    return g;
oom:
    err_set(err, file, NULL, "out of memory");
fail:
    free(raw);
    pd_graph_free(g);
    return NULL;
}

pd_graph *pd_graph_read(const char *path, plumb_err *err)
{
    size_t len;
    char *buf = file_read_all(path, (size_t)1 << 30, "expected a graph.txt of at most 1 GiB",
                              &len, err);
    if (!buf) return NULL;
    pd_graph *g = pd_graph_parse(path, buf, len, err);
    free(buf);
    return g;
}

/* ---- topological order ----------------------------------------------------------------- */

/* Min-heap of node indices: the ready node that comes first in the file is taken first. */
static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static int heap_pop(int *h, int *n)
{
    int top = h[0];
    h[0] = h[--(*n)];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m]) m = l;
        if (r < *n && h[r] < h[m]) m = r;
        if (m == i) break;
        int t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

/* After Kahn's algorithm stopped early, every node left has a predecessor that is also
 * left; walking predecessors must repeat a node, which closes a cycle. */
static void report_cycle(const pd_graph *g, const char *file, const int *indeg,
                         plumb_err *err)
{
    int n = g->nnodes;
    int *pred = malloc((size_t)n * sizeof(int));
    int *seen = malloc((size_t)n * sizeof(int));
    if (!pred || !seen) {
        free(pred);
        free(seen);
        err_set(err, file, NULL, "expected an acyclic graph (got a cycle)");
        return;
    }
    for (int i = 0; i < n; i++) pred[i] = -1, seen[i] = -1;
    for (int e = 0; e < g->nedges; e++)
        if (indeg[g->edges[e].src] > 0 && indeg[g->edges[e].dst] > 0 && pred[g->edges[e].dst] < 0)
            pred[g->edges[e].dst] = g->edges[e].src;
    int u = 0;
    while (indeg[u] == 0) u++;
    int step = 0;
    while (seen[u] < 0) {
        seen[u] = step++;
        u = pred[u];
    }
    /* u starts the cycle; walking pred from u lists it backwards */
    int k = 0, v = u;
    do {
        seen[k++] = v;
        v = pred[v];
    } while (v != u);
    char buf[700];
    size_t used = 0;
    buf[0] = '\0';
    for (int j = k; j >= 0; j--) {
        const char *id = g->nodes[seen[j % k]].id;
        int w = snprintf(buf + used, sizeof buf - used, "%s%s", j == k ? "" : " -> ", id);
        if (w < 0 || used + (size_t)w > sizeof buf - 60) {
            snprintf(buf + used, sizeof buf - used, " -> ... (%d nodes in the cycle)", k);
            break;
        }
        used += (size_t)w;
    }
    err_set(err, file, NULL, "expected an acyclic graph (got the cycle %s)", buf);
    free(pred);
    free(seen);
}

int pd_graph_topo_order(const pd_graph *g, const char *file, int *order, plumb_err *err)
{
    int n = g->nnodes, m = g->nedges, rc = -1;
    int *indeg = calloc((size_t)n, sizeof(int));
    int *off = calloc((size_t)n + 1, sizeof(int));
    int *adj = malloc((m ? (size_t)m : 1) * sizeof(int));
    int *fill = malloc((size_t)n * sizeof(int));
    int *heap = malloc((size_t)n * sizeof(int));
    if (!indeg || !off || !adj || !fill || !heap) {
        err_set(err, file, NULL, "out of memory");
        goto done;
    }
    for (int e = 0; e < m; e++) {
        off[g->edges[e].src + 1]++;
        indeg[g->edges[e].dst]++;
    }
    for (int i = 0; i < n; i++) off[i + 1] += off[i];
    for (int i = 0; i < n; i++) fill[i] = off[i];
    for (int e = 0; e < m; e++) adj[fill[g->edges[e].src]++] = g->edges[e].dst;
    int hn = 0, k = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) heap_push(heap, &hn, i);
    while (hn > 0) {
        int u = heap_pop(heap, &hn);
        order[k++] = u;
        for (int j = off[u]; j < off[u + 1]; j++)
            if (--indeg[adj[j]] == 0) heap_push(heap, &hn, adj[j]);
    }
    if (k < n) {
        report_cycle(g, file, indeg, err);
        goto done;
    }
    rc = 0;
done:
    free(indeg);
    free(off);
    free(adj);
    free(fill);
    free(heap);
    return rc;
}

/* ---- conversion ------------------------------------------------------------------------ */

static int starts_with(const char *s, const char *pre)
{
    return strncmp(s, pre, strlen(pre)) == 0;
}

int pd_graph_infer_minibatch(const pd_graph *g, const char *file, const char **how,
                             plumb_err *err)
{
    const double img224 = 4.0 * 3 * 224 * 224, img299 = 4.0 * 3 * 299 * 299;
    int ninput = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const pd_node *n = &g->nodes[i];
        if (!starts_with(n->desc, "Input")) continue;
        ninput++;
        double a = n->activation_bytes;
        if (a == 0) continue;
        double b = a / img224;
        if (b == floor(b) && b >= 1 && b <= 1e9) {
            *how = "Input activation_size / (4 x 3 x 224 x 224 bytes)";
            return (int)b;
        }
        b = a / img299;
        if (b == floor(b) && b >= 1 && b <= 1e9) {
            *how = "Input activation_size / (4 x 3 x 299 x 299 bytes)";
            return (int)b;
        }
        return line_err(err, file, n->line, "cannot infer the minibatch size: the Input "
                        "activation_size %.17g is not a multiple of 4 x 3 x 224 x 224 or "
                        "4 x 3 x 299 x 299 bytes; pass the minibatch size (--minibatch N)", a);
    }
    if (ninput > 0) {
        *how = "Input nodes of size 0 (translation profile): 64, the --batch-size of "
               "PipeDream's translation profiler README";
        return 64;
    }
    return err_set(err, file, NULL, "cannot infer the minibatch size: expected an Input node "
                   "(got none); pass the minibatch size (--minibatch N)");
}

/* "Conv2d(3, 64, ...)" -> "Conv2d"; "Input0" -> "Input"; "__getitem__(0)" -> "__getitem__". */
static char *kind_of(const char *desc)
{
    size_t n = strcspn(desc, "(");
    while (n > 0 && (desc[n - 1] == ' ' || desc[n - 1] == '\t')) n--;
    if (n == 0) return strdup("Unknown");
    if (starts_with(desc, "Input")) {
        size_t k = 5;
        while (k < n && desc[k] >= '0' && desc[k] <= '9') k++;
        if (k == n) n = 5;
    }
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, desc, n);
        s[n] = '\0';
    }
    return s;
}

/* Model name from the path: parent directory for "graph.txt", parent_stem for "graph_*.txt",
 * else the file stem. Also gives "parent/base" for the source text. */
static void names_from_path(const char *path, char *name, size_t nn, char *rel, size_t rn)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char parent[256] = "";
    if (base > path) {
        const char *pend = base - 1, *pstart = pend;
        while (pstart > path && pstart[-1] != '/') pstart--;
        snprintf(parent, sizeof parent, "%.*s", (int)(pend - pstart), pstart);
    }
    size_t stem = strlen(base);
    if (stem > 4 && !strcmp(base + stem - 4, ".txt")) stem -= 4;
    if (stem == 5 && !strncmp(base, "graph", 5) && *parent)
        snprintf(name, nn, "%s", parent);
    else if (stem > 5 && !strncmp(base, "graph", 5) && *parent)
        snprintf(name, nn, "%s_%.*s", parent, (int)stem, base);
    else
        snprintf(name, nn, "%.*s", (int)stem, base);
    if (!*name) snprintf(name, nn, "pipedream");
    if (*parent) snprintf(rel, rn, "%s/%s", parent, base);
    else snprintf(rel, rn, "%s", base);
}


/* A bound that profile_validate refused (its message "layers[i].FIELD: ...", no file) said
 * in the graph's own terms: "FILE:LINE: forward_compute_time: ..." for the node that layer
 * i came from (order maps layers to nodes); other messages get the file in front. */
static void graph_field_error(const pd_graph *g, const int *order, const char *path,
                              plumb_err *err)
{
    static const char *const names[4][2] = {
        {"forward_ms", "forward_compute_time"}, {"backward_ms", "backward_compute_time"},
        {"activation_bytes", "activation_size"}, {"parameter_bytes", "parameter_size"}};
    plumb_err e = *err;
    int i = -1, used = 0;
    char field[40];
    if (sscanf(e.msg, "layers[%d].%39[a-z_]: %n", &i, field, &used) == 2 && used > 0 &&
        i >= 0 && i < g->nnodes)
        for (int k = 0; k < 4; k++)
            if (!strcmp(field, names[k][0])) {
                err_set(err, NULL, NULL, "%s:%d: %s: %s", path, g->nodes[order[i]].line,
                        names[k][1], e.msg + used);
                return;
            }
    err_set(err, path, NULL, "%s", e.msg);
}

profile *pd_graph_to_profile(const pd_graph *g, const char *path, const pd_import_opts *o,
                             plumb_err *err)
{
    pd_import_opts def = {0};
    if (!o) o = &def;
    const char *how = "given by the user";
    int mb = o->minibatch;
    if (mb <= 0) {
        mb = pd_graph_infer_minibatch(g, path, &how, err);
        if (mb < 0) return NULL;
    }
    int *order = malloc((size_t)g->nnodes * sizeof(int));
    int *pos = malloc((size_t)g->nnodes * sizeof(int));
    profile *p = profile_alloc(g->nnodes, g->nedges);
    if (!order || !pos || !p) goto oom;
    if (pd_graph_topo_order(g, path, order, err)) goto fail;
    char name[256], rel[512], src[1024];
    names_from_path(path, name, sizeof name, rel, sizeof rel);
    snprintf(src, sizeof src, "PipeDream profile %s (github.com/msr-fiddle/pipedream, MIT "
             "licence), converted by plumb import; minibatch %d: %s", rel, mb, how);
    p->name = strdup(o->name ? o->name : name);
    p->device = strdup(o->device ? o->device : "V100");
    p->source = strdup(src);
    p->minibatch = mb;
    if (!p->name || !p->device || !p->source) goto oom;
    int staged = 0;
    for (int i = 0; i < g->nnodes; i++) staged |= g->nodes[i].stage_id >= 0;
    if (staged && !(p->stage_ids = malloc((size_t)g->nnodes * sizeof(int)))) goto oom;
    for (int i = 0; i < g->nnodes; i++) {
        const pd_node *n = &g->nodes[order[i]];
        profile_layer *l = &p->layers[i];
        pos[order[i]] = i;
        l->name = strdup(n->id);
        l->kind = kind_of(n->desc);
        l->desc = strdup(n->desc);
        if (!l->name || !l->kind || !l->desc) goto oom;
        l->forward_ms = n->forward_ms;
        l->backward_ms = n->backward_ms;
        l->activation_bytes = n->activation_bytes;
        l->parameter_bytes = n->parameter_bytes;
        if (staged) p->stage_ids[i] = n->stage_id;
    }
    for (int e = 0; e < g->nedges; e++)
        p->edges[e] = (profile_edge){pos[g->edges[e].src], pos[g->edges[e].dst]};
    if (profile_validate(p, NULL, err)) {
        graph_field_error(g, order, path, err);
        goto fail;
    }
    free(order);
    free(pos);
    return p;
oom:
    err_set(err, path, NULL, "out of memory");
fail:
    free(order);
    free(pos);
    profile_free(p);
    return NULL;
}

profile *import_pipedream_opts(const char *path, const pd_import_opts *o, plumb_err *err)
{
    pd_graph *g = pd_graph_read(path, err);
    if (!g) return NULL;
    profile *p = pd_graph_to_profile(g, path, o, err);
    pd_graph_free(g);
    return p;
}

profile *import_pipedream(const char *graph_path, plumb_err *err)
{
    return import_pipedream_opts(graph_path, NULL, err);
}
