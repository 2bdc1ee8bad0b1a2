/* profile.c: the plumb-profile/1 noun: load with full validation, save atomically,
 * validate in memory, copy, compare, and the small graph queries every part needs.
 * Validation of the graph (names, edges, cycles, order) is shared by the loader and
 * profile_validate, so a file and an in-memory profile obey exactly the same rules. */
#include "profile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "device.h"
#include "json.h"
#include "plan.h"

/* The file fields of profile.step_ns_per_byte, in optimizer_kind order. */
static const char *const STEP_KEYS[3] = {"sgd_step_ns_per_byte", "momentum_step_ns_per_byte",
                                         "adam_step_ns_per_byte"};

/* ---- allocation, copy, compare ------------------------------------------------------ */

profile *profile_alloc(int n, int m)
{
    if (n < 0 || m < 0) return NULL;
    profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->nlayers = n;
    p->nedges = m;
    p->tp = 1;
    p->cp = 1;
    p->precision = -1;
    p->layers = calloc(n ? (size_t)n : 1, sizeof *p->layers);
    p->edges = calloc(m ? (size_t)m : 1, sizeof *p->edges);
    if (!p->layers || !p->edges) {
        profile_free(p);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        p->layers[i].backward_input_ms = -1;
        p->layers[i].backward_weight_ms = -1;
        p->layers[i].flops = -1;
        p->layers[i].selective_recompute_ms = -1;
        p->layers[i].selective_saved_bytes = -1;
        p->layers[i].tied_layer = -1;
    }
    return p;
}

void profile_free(profile *p)
{
    if (!p) return;
    for (int i = 0; p->layers && i < p->nlayers; i++) {
        free(p->layers[i].name);
        free(p->layers[i].kind);
        free(p->layers[i].desc);
    }
    free(p->layers);
    free(p->edges);
    free(p->stage_ids);
    free(p->name);
    free(p->device);
    free(p->source);
    free(p);
}

/* strdup that keeps NULL as NULL; *ok is cleared when memory runs out. */
static char *dup_or_null(const char *s, int *ok)
{
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *ok = 0;
    return d;
}

profile *profile_clone(const profile *p)
{
    if (!p) return NULL;
    profile *q = profile_alloc(p->nlayers, p->nedges);
    if (!q) return NULL;
    int ok = 1;
    q->name = dup_or_null(p->name, &ok);
    q->device = dup_or_null(p->device, &ok);
    q->source = dup_or_null(p->source, &ok);
    q->minibatch = p->minibatch;
    q->input_bytes = p->input_bytes;
    q->input_gather_ms = p->input_gather_ms;
    memcpy(q->step_ns_per_byte, p->step_ns_per_byte, sizeof q->step_ns_per_byte);
    q->tp = p->tp;
    q->cp = p->cp;
    q->sequence_parallel = p->sequence_parallel;
    q->tokens_per_sample = p->tokens_per_sample;
    q->precision = p->precision;
    q->cross_entropy = p->cross_entropy;
    q->grad_accum = p->grad_accum;
    for (int i = 0; i < p->nlayers; i++) {
        profile_layer *d = &q->layers[i];
        *d = p->layers[i];
        d->name = dup_or_null(p->layers[i].name, &ok);
        d->kind = dup_or_null(p->layers[i].kind, &ok);
        d->desc = dup_or_null(p->layers[i].desc, &ok);
    }
    if (p->nedges) memcpy(q->edges, p->edges, (size_t)p->nedges * sizeof *p->edges);
    if (p->stage_ids) {
        q->stage_ids = malloc((p->nlayers ? (size_t)p->nlayers : 1) * sizeof(int));
        if (!q->stage_ids) ok = 0;
        else if (p->nlayers) memcpy(q->stage_ids, p->stage_ids, (size_t)p->nlayers * sizeof(int));
    }
    if (!ok) {
        profile_free(q);
        return NULL;
    }
    return q;
}

static int str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static int stage_of(const profile *p, int i)
{
    return p->stage_ids ? p->stage_ids[i] : -1;
}

int profile_equal(const profile *a, const profile *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    if (!str_eq(a->name, b->name) || !str_eq(a->device, b->device) ||
        !str_eq(a->source, b->source) || a->minibatch != b->minibatch ||
        a->input_bytes != b->input_bytes || a->input_gather_ms != b->input_gather_ms ||
        memcmp(a->step_ns_per_byte, b->step_ns_per_byte, sizeof a->step_ns_per_byte) ||
        a->tp != b->tp || a->cp != b->cp || a->sequence_parallel != b->sequence_parallel ||
        a->tokens_per_sample != b->tokens_per_sample || a->precision != b->precision ||
        a->cross_entropy != b->cross_entropy || a->grad_accum != b->grad_accum ||
        a->nlayers != b->nlayers ||
        a->nedges != b->nedges)
        return 0;
    for (int i = 0; i < a->nlayers; i++) {
        const profile_layer *x = &a->layers[i], *y = &b->layers[i];
        if (!str_eq(x->name, y->name) || !str_eq(x->kind, y->kind) || !str_eq(x->desc, y->desc))
            return 0;
        if (x->forward_ms != y->forward_ms || x->backward_ms != y->backward_ms ||
            x->backward_input_ms != y->backward_input_ms ||
            x->backward_weight_ms != y->backward_weight_ms ||
            x->activation_bytes != y->activation_bytes ||
            x->parameter_bytes != y->parameter_bytes || x->flops != y->flops ||
            x->saved_bytes != y->saved_bytes || x->split_saved_bytes != y->split_saved_bytes ||
            x->grad_buffer_bytes != y->grad_buffer_bytes ||
            x->workspace_bytes != y->workspace_bytes ||
            x->tp_collective_bytes != y->tp_collective_bytes ||
            x->tp_forward_collectives != y->tp_forward_collectives ||
            x->tp_backward_collectives != y->tp_backward_collectives ||
            x->cp_ring_bytes != y->cp_ring_bytes ||
            x->cp_attention_fwd_ms != y->cp_attention_fwd_ms ||
            x->cp_attention_bwd_ms != y->cp_attention_bwd_ms ||
            x->selective_recompute_ms != y->selective_recompute_ms ||
            x->selective_saved_bytes != y->selective_saved_bytes ||
            x->tied_bytes != y->tied_bytes ||
            (x->tied_bytes > 0 && x->tied_layer != y->tied_layer))
            return 0;
        if (stage_of(a, i) != stage_of(b, i)) return 0;
    }
    for (int e = 0; e < a->nedges; e++)
        if (a->edges[e].src != b->edges[e].src || a->edges[e].dst != b->edges[e].dst) return 0;
    return 1;
}

/* ---- queries ------------------------------------------------------------------------ */

int profile_is_chain(const profile *p)
{
    for (int e = 0; e < p->nedges; e++)
        if (p->edges[e].dst != p->edges[e].src + 1) return 0;
    return 1;
}

int profile_is_transformer(const profile *p)
{
    int n = p ? p->nlayers : 0;
    if (n < 3 || !p->layers[0].kind || strcmp(p->layers[0].kind, "Embedding") ||
        !p->layers[n - 1].kind || strcmp(p->layers[n - 1].kind, "LMHead"))
        return 0;
    for (int i = 1; i < n - 1; i++)
        if (!p->layers[i].kind || strcmp(p->layers[i].kind, "TransformerBlock")) return 0;
    return 1;
}

int profile_layer_is_input(const profile_layer *L)
{
    return L->kind && !strcmp(L->kind, "Input");
}

double profile_layer_forward_ms(const profile_layer *L)
{
    return profile_layer_is_input(L) ? 0 : L->forward_ms;
}

double profile_layer_backward_ms(const profile_layer *L)
{
    return profile_layer_is_input(L) ? 0 : L->backward_ms;
}

double profile_compute_ms(const profile *p)
{
    double t = 0;
    for (int i = 0; i < p->nlayers; i++)
        t += profile_layer_forward_ms(&p->layers[i]) + profile_layer_backward_ms(&p->layers[i]);
    return t;
}

double profile_total_forward_ms(const profile *p)
{
    double s = 0;
    for (int i = 0; i < p->nlayers; i++) s += p->layers[i].forward_ms;
    return s;
}

double profile_total_backward_ms(const profile *p)
{
    double s = 0;
    for (int i = 0; i < p->nlayers; i++) s += p->layers[i].backward_ms;
    return s;
}

double profile_total_parameter_bytes(const profile *p)
{
    double s = 0;
    for (int i = 0; i < p->nlayers; i++) s += p->layers[i].parameter_bytes;
    return s;
}

double profile_total_activation_bytes(const profile *p)
{
    double s = 0;
    for (int i = 0; i < p->nlayers; i++) s += p->layers[i].activation_bytes;
    return s;
}

int profile_find_layer(const profile *p, const char *name)
{
    for (int i = 0; i < p->nlayers; i++)
        if (p->layers[i].name && !strcmp(p->layers[i].name, name)) return i;
    return -1;
}

/* ---- validation --------------------------------------------------------------------- */

/* Sort helpers: layer names by text, edges by (src, dst), keeping the original index. */
typedef struct name_ref {
    const char *name;
    int idx;
} name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

typedef struct edge_ref {
    int src, dst, idx;
} edge_ref;

static int cmp_edge_ref(const void *a, const void *b)
{
    const edge_ref *x = a, *y = b;
    if (x->src != y->src) return (x->src > y->src) - (x->src < y->src);
    if (x->dst != y->dst) return (x->dst > y->dst) - (x->dst < y->dst);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Checks one number field of layer i: from 0 to hi (core/bounds.h), or (optional) exactly
 * "absent" (< 0 but finite, which the struct uses for -1). */
static int check_layer_num(const char *file, plumb_err *err, int i, const char *key, double v,
                           int optional, double hi)
{
    if (isfinite(v) && (optional || v >= 0) && v <= hi) return 0;
    /* the field's name only for the error: a profile of 10^5 layers is checked once per
     * candidate layout of the 3D search, where formatting it for every layer took most of
     * the search's time */
    char path[96];
    snprintf(path, sizeof path, "layers[%d].%s", i, key);
    if (!isfinite(v)) return err_set(err, file, path, "expected a finite number (got %g)", v);
    if (!optional && v < 0) return err_set(err, file, path, "expected a number >= 0 (got %.17g)", v);
    return err_set(err, file, path, "expected a number from 0 to %g (got %.10g)", hi, v);
}

/* Checks layer i's tied parameters: none (tied_bytes 0), or another layer's index and at
 * most the parameter bytes of both layers. */
static int check_tied(const profile *p, int i, const char *file, plumb_err *err)
{
    const profile_layer *l = &p->layers[i];
    if (l->tied_bytes == 0) return 0; /* the common case, with no name formatted */
    char path[96];
    snprintf(path, sizeof path, "layers[%d].tied.bytes", i);
    if (!(isfinite(l->tied_bytes) && l->tied_bytes >= 0))
        return err_set(err, file, path, "expected a number >= 0 (got %.17g)", l->tied_bytes);
    if (l->tied_layer < 0 || l->tied_layer >= p->nlayers || l->tied_layer == i) {
        snprintf(path, sizeof path, "layers[%d].tied.layer", i);
        return err_set(err, file, path, "expected the index of another layer, 0 to %d (got %d)",
                       p->nlayers - 1, l->tied_layer);
    }
    double most = l->parameter_bytes < p->layers[l->tied_layer].parameter_bytes
                      ? l->parameter_bytes : p->layers[l->tied_layer].parameter_bytes;
    if (l->tied_bytes > most)
        return err_set(err, file, path, "expected at most the parameter bytes of layers %d and "
                       "%d, %.17g (got %.17g)", i, l->tied_layer, most, l->tied_bytes);
    return 0;
}

/* Formats the cycle cyc[0] -> ... -> cyc[k-1] -> cyc[0] of layer names into buf. */
static void format_cycle(const profile *p, const int *cyc, int k, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int j = 0; j <= k; j++) {
        const char *nm = p->layers[cyc[j % k]].name;
        int w = snprintf(buf + used, n - used, "%s\"%s\"", j ? " -> " : "", nm);
        if (w < 0 || (size_t)w >= n - used || used + (size_t)w > n - 80) {
            buf[used] = '\0';
            snprintf(buf + used, n - used, " -> ... (%d layers in the cycle)", k);
            return;
        }
        used += (size_t)w;
    }
}

/* Finds a directed cycle with an iterative depth-first search. Returns 0 when acyclic,
 * 1 with the cycle described in buf, or -1 when out of memory. */
static int find_cycle(const profile *p, char *buf, size_t bufn)
{
    int n = p->nlayers, m = p->nedges, rc = -1;
    int *off = calloc((size_t)n + 1, sizeof(int));
    int *adj = malloc((m ? (size_t)m : 1) * sizeof(int));
    int *color = calloc(n ? (size_t)n : 1, sizeof(int));
    int *stack = malloc((n ? (size_t)n : 1) * sizeof(int));
    int *pos = malloc((n ? (size_t)n : 1) * sizeof(int));
    int *next = malloc((n ? (size_t)n : 1) * sizeof(int));
    if (!off || !adj || !color || !stack || !pos || !next) goto done;
    for (int e = 0; e < m; e++) off[p->edges[e].src + 1]++;
    for (int i = 0; i < n; i++) off[i + 1] += off[i];
    for (int i = 0; i < n; i++) next[i] = off[i];
    for (int e = 0; e < m; e++) adj[next[p->edges[e].src]++] = p->edges[e].dst;
    for (int i = 0; i < n; i++) next[i] = off[i];
    rc = 0;
    for (int s = 0; s < n && rc == 0; s++) {
        if (color[s]) continue;
        int sp = 0;
        stack[sp] = s;
        pos[s] = sp++;
        color[s] = 1;
        while (sp > 0) {
            int u = stack[sp - 1];
            if (next[u] < off[u + 1]) {
                int v = adj[next[u]++];
                if (color[v] == 0) {
                    color[v] = 1;
                    stack[sp] = v;
                    pos[v] = sp++;
                } else if (color[v] == 1) {
                    format_cycle(p, stack + pos[v], sp - pos[v], buf, bufn);
                    rc = 1;
                    break;
                }
            } else {
                color[u] = 2;
                sp--;
            }
        }
    }
done:
    free(off);
    free(adj);
    free(color);
    free(stack);
    free(pos);
    free(next);
    return rc;
}

/* Graph rules shared by the loader and profile_validate: unique names, edges in range,
 * no self loops, no duplicate edges, no cycle, and layers listed in topological order. */
static int check_graph(const profile *p, const char *file, plumb_err *err)
{
    int n = p->nlayers, m = p->nedges, rc = -1;
    name_ref *names = malloc((n ? (size_t)n : 1) * sizeof *names);
    edge_ref *edges = malloc((m ? (size_t)m : 1) * sizeof *edges);
    if (!names || !edges) {
        err_set(err, file, NULL, "out of memory while checking the layer graph");
        goto done;
    }
    for (int i = 0; i < n; i++) names[i] = (name_ref){p->layers[i].name, i};
    qsort(names, (size_t)n, sizeof *names, cmp_name_ref);
    for (int i = 1; i < n; i++) {
        if (strcmp(names[i - 1].name, names[i].name) == 0) {
            char path[64];
            snprintf(path, sizeof path, "layers[%d].name", names[i].idx);
            err_set(err, file, path,
                    "expected a unique layer name (got \"%s\", already used by layers[%d])",
                    names[i].name, names[i - 1].idx);
            goto done;
        }
    }
    for (int e = 0; e < m; e++) {
        char path[64];
        int s = p->edges[e].src, d = p->edges[e].dst;
        snprintf(path, sizeof path, "edges[%d]", e);
        if (s < 0 || s >= n || d < 0 || d >= n) {
            err_set(err, file, path, "expected layer indices from 0 to %d (got [%d, %d])", n - 1,
                    s, d);
            goto done;
        }
        if (s == d) {
            err_set(err, file, path, "expected an edge between two different layers (got a self "
                    "loop on layer %d \"%s\")", s, p->layers[s].name);
            goto done;
        }
        edges[e] = (edge_ref){s, d, e};
    }
    qsort(edges, (size_t)m, sizeof *edges, cmp_edge_ref);
    for (int e = 1; e < m; e++) {
        if (edges[e].src == edges[e - 1].src && edges[e].dst == edges[e - 1].dst) {
            char path[64];
            snprintf(path, sizeof path, "edges[%d]", edges[e].idx);
            err_set(err, file, path, "expected each edge once (got [%d, %d] again, first at "
                    "edges[%d])", edges[e].src, edges[e].dst, edges[e - 1].idx);
            goto done;
        }
    }
    char cyc[600];
    int c = find_cycle(p, cyc, sizeof cyc);
    if (c < 0) {
        err_set(err, file, NULL, "out of memory while checking the layer graph");
        goto done;
    }
    if (c > 0) {
        err_set(err, file, "edges", "expected an acyclic graph (got the cycle %s)", cyc);
        goto done;
    }
    for (int e = 0; e < m; e++) {
        int s = p->edges[e].src, d = p->edges[e].dst;
        if (s > d) {
            char path[64];
            snprintf(path, sizeof path, "edges[%d]", e);
            err_set(err, file, path, "expected layers in topological order, each after its "
                    "inputs (got layer %d \"%s\" feeding the earlier layer %d \"%s\")", s,
                    p->layers[s].name, d, p->layers[d].name);
            goto done;
        }
    }
    rc = 0;
done:
    free(names);
    free(edges);
    return rc;
}

int profile_validate(const profile *p, const char *file, plumb_err *err)
{
    if (!p) return err_set(err, file, NULL, "expected a profile (got nothing)");
    if (!p->name || !*p->name) return err_set(err, file, "name", "expected a non-empty string");
    if (!p->device || !*p->device)
        return err_set(err, file, "device", "expected a non-empty string");
    if (p->minibatch <= 0 || p->minibatch > BOUND_BATCH_MAX)
        return err_set(err, file, "minibatch", "expected an integer from 1 to %d (got %d)",
                       BOUND_BATCH_MAX, p->minibatch);
    if (!(p->input_bytes >= 0 && p->input_bytes <= BOUND_BYTES_MAX))
        return err_set(err, file, "input_bytes", "expected a number from 0 to %g (got %g)",
                       BOUND_BYTES_MAX, p->input_bytes);
    if (!(p->input_gather_ms >= 0 && p->input_gather_ms <= BOUND_LAYER_MS_MAX))
        return err_set(err, file, "input_gather_ms", "expected a number from 0 to %g (got %g)",
                       BOUND_LAYER_MS_MAX, p->input_gather_ms);
    for (int k = 0; k < 3; k++) /* at most 1 s per byte: every step time stays finite */
        if (!(p->step_ns_per_byte[k] >= 0 && p->step_ns_per_byte[k] <= 1e9))
            return err_set(err, file, STEP_KEYS[k], "expected a number from 0 to 1e+09 (got %g)",
                           p->step_ns_per_byte[k]);
    if (p->tp < 1 || p->tp > BOUND_TP_MAX)
        return err_set(err, file, "tensor_parallel", "expected an integer from 1 to %d (got %d)",
                       BOUND_TP_MAX, p->tp);
    if (p->cp < 1 || p->cp > BOUND_TP_MAX)
        return err_set(err, file, "context_parallel", "expected an integer from 1 to %d (got "
                       "%d)", BOUND_TP_MAX, p->cp);
    if (p->sequence_parallel && p->tp < 2)
        return err_set(err, file, "sequence_parallel", "expected false when tensor_parallel "
                       "is 1 (sequence parallelism splits the tensor-parallel group's work)");
    if (p->tokens_per_sample < 0 || p->tokens_per_sample > BOUND_TOKENS_MAX)
        return err_set(err, file, "tokens_per_sample", "expected an integer from 0 to %lld "
                       "(got %lld)", (long long)BOUND_TOKENS_MAX, p->tokens_per_sample);
    if (p->precision < -1 || p->precision >= DEV_NPREC)
        return err_set(err, file, "precision", "expected fp32, tf32, bf16, fp16 or fp8 (got %d)",
                       p->precision);
    if (plan_cross_entropy_parse(plan_cross_entropy_name(p->cross_entropy)) != p->cross_entropy)
        return err_set(err, file, "cross_entropy", "expected unfused, te or native (got %d)",
                       p->cross_entropy);
    if (plan_grad_accum_parse(plan_grad_accum_name(p->grad_accum)) != p->grad_accum)
        return err_set(err, file, "grad_accum", "expected fused or unfused (got %d)",
                       p->grad_accum);
    if (p->nlayers <= 0 || !p->layers)
        return err_set(err, file, "layers", "expected at least one layer (got %d)", p->nlayers);
    if (p->nedges < 0 || (p->nedges > 0 && !p->edges))
        return err_set(err, file, "edges", "expected an array of edges (got %d)", p->nedges);
    for (int i = 0; i < p->nlayers; i++) {
        const profile_layer *l = &p->layers[i];
        char path[96];
        if (!l->name || !*l->name || !l->kind || !*l->kind) {
            snprintf(path, sizeof path, "layers[%d].%s", i, !l->name || !*l->name ? "name"
                     : "kind");
            return err_set(err, file, path, "expected a non-empty string");
        }
        if (check_layer_num(file, err, i, "forward_ms", l->forward_ms, 0, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "backward_ms", l->backward_ms, 0, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "backward_input_ms", l->backward_input_ms, 1, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "backward_weight_ms", l->backward_weight_ms, 1, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "activation_bytes", l->activation_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "parameter_bytes", l->parameter_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "flops", l->flops, 1, BOUND_FLOPS_MAX) ||
            check_layer_num(file, err, i, "saved_bytes", l->saved_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "split_saved_bytes", l->split_saved_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "grad_buffer_bytes", l->grad_buffer_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "workspace_bytes", l->workspace_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "tp_collective_bytes", l->tp_collective_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "tp_forward_collectives", l->tp_forward_collectives, 0, 64) ||
            check_layer_num(file, err, i, "tp_backward_collectives", l->tp_backward_collectives, 0, 64) ||
            check_layer_num(file, err, i, "cp_ring_bytes", l->cp_ring_bytes, 0, BOUND_BYTES_MAX) ||
            check_layer_num(file, err, i, "cp_attention_fwd_ms", l->cp_attention_fwd_ms, 0, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "cp_attention_bwd_ms", l->cp_attention_bwd_ms, 0, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "selective_recompute_ms", l->selective_recompute_ms, 1, BOUND_LAYER_MS_MAX) ||
            check_layer_num(file, err, i, "selective_saved_bytes", l->selective_saved_bytes, 1, BOUND_BYTES_MAX))
            return -1;
        if (l->cp_ring_bytes > 0 && p->cp < 2) {
            snprintf(path, sizeof path, "layers[%d].cp_ring_bytes", i);
            return err_set(err, file, path, "expected 0 when context_parallel is 1 (got %g)",
                           l->cp_ring_bytes);
        }
        if ((l->tp_forward_collectives || l->tp_backward_collectives) && p->tp < 2) {
            snprintf(path, sizeof path, "layers[%d].tp_forward_collectives", i);
            return err_set(err, file, path, "expected 0 when tensor_parallel is 1 (got %d)",
                           l->tp_forward_collectives + l->tp_backward_collectives);
        }
        if ((l->selective_recompute_ms >= 0) != (l->selective_saved_bytes >= 0)) {
            snprintf(path, sizeof path, "layers[%d].%s", i, l->selective_recompute_ms >= 0
                     ? "selective_saved_bytes" : "selective_recompute_ms");
            return err_set(err, file, path, "missing; expected selective_recompute_ms and "
                           "selective_saved_bytes together (both or neither)");
        }
        if (l->selective_saved_bytes > l->saved_bytes) {
            snprintf(path, sizeof path, "layers[%d].selective_saved_bytes", i);
            return err_set(err, file, path, "expected at most saved_bytes = %.17g (got %.17g)",
                           l->saved_bytes, l->selective_saved_bytes);
        }
        if (check_tied(p, i, file, err)) return -1;
        int hi = l->backward_input_ms >= 0, hw = l->backward_weight_ms >= 0;
        if (hi != hw) {
            snprintf(path, sizeof path, "layers[%d].%s", i,
                     hi ? "backward_weight_ms" : "backward_input_ms");
            return err_set(err, file, path, "missing; expected backward_input_ms and "
                           "backward_weight_ms together (both or neither)");
        }
        if (hi) {
            double sum = l->backward_input_ms + l->backward_weight_ms;
            if (fabs(sum - l->backward_ms) > 1e-9 * fmax(fabs(l->backward_ms), fabs(sum))) {
                snprintf(path, sizeof path, "layers[%d].backward_weight_ms", i);
                return err_set(err, file, path, "expected backward_input_ms + backward_weight_ms "
                               "= backward_ms = %.17g (got %.17g + %.17g = %.17g)",
                               l->backward_ms, l->backward_input_ms, l->backward_weight_ms, sum);
            }
        }
        if (p->stage_ids && p->stage_ids[i] < -1) {
            snprintf(path, sizeof path, "layers[%d].stage_id", i);
            return err_set(err, file, path, "expected an integer >= 0 (got %d)", p->stage_ids[i]);
        }
    }
    return check_graph(p, file, err);
}

/* ---- JSON reading ------------------------------------------------------------------- */

/* Reads layer lp's optional "tied": {"layer": L, "bytes": B} into l (range checks are
 * check_tied's, after every layer is read). */
static int tied_from_json(const jctx *c, const cJSON *item, const char *lp, int n,
                          profile_layer *l)
{
    static const char *const keys[] = {"layer", "bytes", NULL};
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "tied");
    char tp[96], got[96];
    if (!t) return 0;
    json_path(tp, sizeof tp, lp, "tied");
    if (!cJSON_IsObject(t))
        return err_set(c->err, c->file, tp, "expected an object {\"layer\": L, \"bytes\": B} "
                       "(got %s)", json_describe(t, got, sizeof got));
    long long layer = -1;
    if (json_check_keys(c, t, tp, keys) ||
        json_get_int(c, t, tp, "layer", 1, 0, n > 0 ? n - 1 : 0, &layer) ||
        json_get_num(c, t, tp, "bytes", 1, J_NONNEG, &l->tied_bytes))
        return -1;
    l->tied_layer = (int)layer;
    return 0;
}

static const char *const ROOT_KEYS[] = {"format", "name", "device", "source", "minibatch",
                                        "input_bytes", "input_gather_ms",
                                        "sgd_step_ns_per_byte", "momentum_step_ns_per_byte",
                                        "adam_step_ns_per_byte", "tensor_parallel",
                                        "context_parallel",
                                        "sequence_parallel", "tokens_per_sample",
                                        "precision", "cross_entropy", "grad_accum", "layers",
                                        "edges", NULL};
static const char *const LAYER_KEYS[] = {"name", "kind", "desc", "forward_ms", "backward_ms",
                                         "backward_input_ms", "backward_weight_ms",
                                         "activation_bytes", "parameter_bytes", "flops",
                                         "saved_bytes", "split_saved_bytes",
                                         "grad_buffer_bytes", "workspace_bytes", "stage_id",
                                         "tp_collective_bytes", "tp_forward_collectives",
                                         "tp_backward_collectives", "cp_ring_bytes",
                                         "cp_attention_fwd_ms", "cp_attention_bwd_ms",
                                         "selective_recompute_ms",
                                         "selective_saved_bytes", "tied", NULL};


static int dup_into(const jctx *c, char **dst, const char *s)
{
    *dst = strdup(s ? s : "");
    if (!*dst) return err_set(c->err, c->file, NULL, "out of memory");
    return 0;
}

static int layer_from_json(const jctx *c, const cJSON *item, int i, profile *p)
{
    char lp[64];
    json_path_idx(lp, sizeof lp, "", "layers", i);
    if (!cJSON_IsObject(item)) {
        char got[96];
        return err_set(c->err, c->file, lp, "expected a layer object (got %s)",
                       json_describe(item, got, sizeof got));
    }
    if (json_check_keys(c, item, lp, LAYER_KEYS)) return -1;
    profile_layer *l = &p->layers[i];
    const char *name = NULL, *kind = NULL, *desc = "";
    if (json_get_str(c, item, lp, "name", 1, &name) ||
        json_get_str(c, item, lp, "kind", 1, &kind) ||
        json_get_str(c, item, lp, "desc", 0, &desc))
        return -1;
    char fp[96];
    if (!*name)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, lp, "name"),
                       "expected a non-empty string (got \"\")");
    if (!*kind)
        return err_set(c->err, c->file, json_path(fp, sizeof fp, lp, "kind"),
                       "expected a non-empty string (got \"\")");
    if (dup_into(c, &l->name, name) || dup_into(c, &l->kind, kind) || dup_into(c, &l->desc, desc))
        return -1;
    if (json_get_num(c, item, lp, "forward_ms", 1, J_NONNEG, &l->forward_ms) ||
        json_get_num(c, item, lp, "backward_ms", 1, J_NONNEG, &l->backward_ms) ||
        json_get_num(c, item, lp, "backward_input_ms", 0, J_NONNEG, &l->backward_input_ms) ||
        json_get_num(c, item, lp, "backward_weight_ms", 0, J_NONNEG, &l->backward_weight_ms) ||
        json_get_num(c, item, lp, "activation_bytes", 1, J_NONNEG, &l->activation_bytes) ||
        json_get_num(c, item, lp, "parameter_bytes", 1, J_NONNEG, &l->parameter_bytes) ||
        json_get_num(c, item, lp, "flops", 0, J_NONNEG, &l->flops) ||
        json_get_num(c, item, lp, "saved_bytes", 0, J_NONNEG, &l->saved_bytes) ||
        json_get_num(c, item, lp, "split_saved_bytes", 0, J_NONNEG, &l->split_saved_bytes) ||
        json_get_num(c, item, lp, "grad_buffer_bytes", 0, J_NONNEG, &l->grad_buffer_bytes) ||
        json_get_num(c, item, lp, "workspace_bytes", 0, J_NONNEG, &l->workspace_bytes) ||
        json_get_num(c, item, lp, "tp_collective_bytes", 0, J_NONNEG, &l->tp_collective_bytes) ||
        json_get_num(c, item, lp, "cp_ring_bytes", 0, J_NONNEG, &l->cp_ring_bytes) ||
        json_get_num(c, item, lp, "cp_attention_fwd_ms", 0, J_NONNEG, &l->cp_attention_fwd_ms) ||
        json_get_num(c, item, lp, "cp_attention_bwd_ms", 0, J_NONNEG, &l->cp_attention_bwd_ms) ||
        json_get_num(c, item, lp, "selective_recompute_ms", 0, J_NONNEG,
                     &l->selective_recompute_ms) ||
        json_get_num(c, item, lp, "selective_saved_bytes", 0, J_NONNEG,
                     &l->selective_saved_bytes))
        return -1;
    long long nc = 0;
    if (json_get_int(c, item, lp, "tp_forward_collectives", 0, 0, 64, &nc)) return -1;
    l->tp_forward_collectives = (int)nc;
    nc = 0;
    if (json_get_int(c, item, lp, "tp_backward_collectives", 0, 0, 64, &nc)) return -1;
    l->tp_backward_collectives = (int)nc;
    if (tied_from_json(c, item, lp, p->nlayers, l)) return -1;
    long long sid = -1;
    if (json_get_int(c, item, lp, "stage_id", 0, 0, INT_MAX, &sid)) return -1;
    if (sid >= 0) {
        if (!p->stage_ids) {
            p->stage_ids = malloc((size_t)p->nlayers * sizeof(int));
            if (!p->stage_ids) return err_set(c->err, c->file, NULL, "out of memory");
            for (int k = 0; k < p->nlayers; k++) p->stage_ids[k] = -1;
        }
        p->stage_ids[i] = (int)sid;
    }
    return 0;
}

static int edge_from_json(const jctx *c, const cJSON *item, int e, profile *p)
{
    char ep[64], got[96];
    json_path_idx(ep, sizeof ep, "", "edges", e);
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2)
        return err_set(c->err, c->file, ep, "expected [src, dst], two layer indices (got %s)",
                       json_describe(item, got, sizeof got));
    long long s, d;
    if (json_item_int(c, cJSON_GetArrayItem(item, 0), ep, 0, 0, p->nlayers - 1, &s) ||
        json_item_int(c, cJSON_GetArrayItem(item, 1), ep, 1, 0, p->nlayers - 1, &d))
        return -1;
    p->edges[e].src = (int)s;
    p->edges[e].dst = (int)d;
    return 0;
}

/* Reads the optional word `key` of root into *out as parse reads it (-1: not one of
 * `expect`); *out is left as it is when the key is absent. */
static int word_from_json(const jctx *c, const cJSON *root, const char *key,
                          int (*parse)(const char *), const char *expect, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return 0;
    int k = cJSON_IsString(v) ? parse(v->valuestring) : -1;
    if (k >= 0) {
        *out = k;
        return 0;
    }
    char got[96];
    return err_set(c->err, c->file, key, "expected %s (got %s)", expect,
                   json_describe(v, got, sizeof got));
}

profile *profile_from_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx c = {file, err};
    profile *p = NULL;
    if (json_check_format(&c, root, PROFILE_FORMAT)) return NULL;
    if (json_check_keys(&c, root, "", ROOT_KEYS)) return NULL;
    const char *name, *device, *source = "";
    long long mb, tp = 1, cpn = 1, tokens = 0;
    int sp = 0, prec = -1, ce = 0, ga = 0;
    double inb = 0, gather = 0, step[3] = {0, 0, 0};
    const cJSON *layers, *edges;
    int nl, ne;
    if (json_get_str(&c, root, "", "name", 1, &name) ||
        json_get_str(&c, root, "", "device", 1, &device) ||
        json_get_str(&c, root, "", "source", 0, &source) ||
        json_get_int(&c, root, "", "minibatch", 1, 1, BOUND_BATCH_MAX, &mb) ||
        json_get_num(&c, root, "", "input_bytes", 0, J_NONNEG, &inb) ||
        json_get_num(&c, root, "", "input_gather_ms", 0, J_NONNEG, &gather) ||
        json_get_num(&c, root, "", STEP_KEYS[0], 0, J_NONNEG, &step[0]) ||
        json_get_num(&c, root, "", STEP_KEYS[1], 0, J_NONNEG, &step[1]) ||
        json_get_num(&c, root, "", STEP_KEYS[2], 0, J_NONNEG, &step[2]) ||
        json_get_int(&c, root, "", "tensor_parallel", 0, 1, BOUND_TP_MAX, &tp) ||
        json_get_int(&c, root, "", "context_parallel", 0, 1, BOUND_TP_MAX, &cpn) ||
        json_get_bool(&c, root, "", "sequence_parallel", 0, &sp) ||
        json_get_int(&c, root, "", "tokens_per_sample", 0, 0, BOUND_TOKENS_MAX, &tokens) ||
        word_from_json(&c, root, "precision", dev_precision_parse,
                       "one of fp32, tf32, bf16, fp16, fp8", &prec) ||
        word_from_json(&c, root, "cross_entropy", plan_cross_entropy_parse,
                       "unfused, te or native", &ce) ||
        word_from_json(&c, root, "grad_accum", plan_grad_accum_parse, "fused or unfused", &ga) ||
        json_get_arr(&c, root, "", "layers", 1, &layers, &nl) ||
        json_get_arr(&c, root, "", "edges", 0, &edges, &ne))
        return NULL;
    if (!*name) { err_set(err, file, "name", "expected a non-empty string"); return NULL; }
    if (!*device) { err_set(err, file, "device", "expected a non-empty string"); return NULL; }
    if (nl == 0) { err_set(err, file, "layers", "expected at least one layer (got [])"); return NULL; }
    p = profile_alloc(nl, ne);
    if (!p) { err_set(err, file, NULL, "out of memory"); return NULL; }
    p->minibatch = (int)mb;
    p->input_bytes = inb;
    p->input_gather_ms = gather;
    memcpy(p->step_ns_per_byte, step, sizeof step);
    p->tp = (int)tp;
    p->cp = (int)cpn;
    p->sequence_parallel = sp;
    p->tokens_per_sample = tokens;
    p->precision = prec;
    p->cross_entropy = ce;
    p->grad_accum = ga;
    if (dup_into(&c, &p->name, name) || dup_into(&c, &p->device, device) ||
        dup_into(&c, &p->source, source))
        goto fail;
    int i = 0;
    for (const cJSON *it = layers->child; it; it = it->next, i++)
        if (layer_from_json(&c, it, i, p)) goto fail;
    int e = 0;
    for (const cJSON *it = edges ? edges->child : NULL; it; it = it->next, e++)
        if (edge_from_json(&c, it, e, p)) goto fail;
    if (profile_validate(p, file, err)) goto fail;
    return p;
fail:
    profile_free(p);
    return NULL;
}

profile *profile_load(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) return NULL;
    profile *p = profile_from_json(root, path, err);
    cJSON_Delete(root);
    return p;
}

/* ---- JSON writing ------------------------------------------------------------------- */

cJSON *profile_to_json(const profile *p)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (!cJSON_AddStringToObject(root, "format", PROFILE_FORMAT) ||
        !cJSON_AddStringToObject(root, "name", p->name ? p->name : "") ||
        !cJSON_AddStringToObject(root, "device", p->device ? p->device : "") ||
        !cJSON_AddStringToObject(root, "source", p->source ? p->source : "") ||
        !json_add_num(root, "minibatch", p->minibatch) ||
        (p->input_bytes > 0 && !json_add_num(root, "input_bytes", p->input_bytes)) ||
        (p->input_gather_ms > 0 &&
         !json_add_num(root, "input_gather_ms", p->input_gather_ms)))
        goto fail;
    for (int k = 0; k < 3; k++)
        if (p->step_ns_per_byte[k] > 0 &&
            !json_add_num(root, STEP_KEYS[k], p->step_ns_per_byte[k]))
            goto fail;
    if ((p->tp > 1 && !json_add_num(root, "tensor_parallel", p->tp)) ||
        (p->cp > 1 && !json_add_num(root, "context_parallel", p->cp)) ||
        (p->sequence_parallel && !cJSON_AddBoolToObject(root, "sequence_parallel", 1)) ||
        (p->tokens_per_sample > 0 &&
         !json_add_num(root, "tokens_per_sample", (double)p->tokens_per_sample)) ||
        (p->precision >= 0 && !cJSON_AddStringToObject(root, "precision",
                                                       dev_precision_name(p->precision))) ||
        (p->cross_entropy > 0 &&
         !cJSON_AddStringToObject(root, "cross_entropy",
                                  plan_cross_entropy_name(p->cross_entropy))) ||
        (p->grad_accum > 0 &&
         !cJSON_AddStringToObject(root, "grad_accum", plan_grad_accum_name(p->grad_accum))))
        goto fail;
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    if (!layers) goto fail;
    for (int i = 0; i < p->nlayers; i++) {
        const profile_layer *l = &p->layers[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) goto fail;
        cJSON_AddItemToArray(layers, o);
        if (!cJSON_AddStringToObject(o, "name", l->name ? l->name : "") ||
            !cJSON_AddStringToObject(o, "kind", l->kind ? l->kind : "") ||
            !cJSON_AddStringToObject(o, "desc", l->desc ? l->desc : "") ||
            !json_add_num(o, "forward_ms", l->forward_ms) ||
            !json_add_num(o, "backward_ms", l->backward_ms))
            goto fail;
        if (l->backward_input_ms >= 0 &&
            !json_add_num(o, "backward_input_ms", l->backward_input_ms))
            goto fail;
        if (l->backward_weight_ms >= 0 &&
            !json_add_num(o, "backward_weight_ms", l->backward_weight_ms))
            goto fail;
        if (!json_add_num(o, "activation_bytes", l->activation_bytes) ||
            !json_add_num(o, "parameter_bytes", l->parameter_bytes))
            goto fail;
        if (l->flops >= 0 && !json_add_num(o, "flops", l->flops)) goto fail;
        if ((l->saved_bytes > 0 && !json_add_num(o, "saved_bytes", l->saved_bytes)) ||
            (l->split_saved_bytes > 0 &&
             !json_add_num(o, "split_saved_bytes", l->split_saved_bytes)) ||
            (l->grad_buffer_bytes > 0 &&
             !json_add_num(o, "grad_buffer_bytes", l->grad_buffer_bytes)) ||
            (l->workspace_bytes > 0 && !json_add_num(o, "workspace_bytes", l->workspace_bytes)))
            goto fail;
        if ((l->tp_collective_bytes > 0 &&
             !json_add_num(o, "tp_collective_bytes", l->tp_collective_bytes)) ||
            (l->tp_forward_collectives > 0 &&
             !json_add_num(o, "tp_forward_collectives", l->tp_forward_collectives)) ||
            (l->tp_backward_collectives > 0 &&
             !json_add_num(o, "tp_backward_collectives", l->tp_backward_collectives)) ||
            (l->cp_ring_bytes > 0 && !json_add_num(o, "cp_ring_bytes", l->cp_ring_bytes)) ||
            (l->cp_attention_fwd_ms > 0 &&
             !json_add_num(o, "cp_attention_fwd_ms", l->cp_attention_fwd_ms)) ||
            (l->cp_attention_bwd_ms > 0 &&
             !json_add_num(o, "cp_attention_bwd_ms", l->cp_attention_bwd_ms)) ||
            (l->selective_recompute_ms >= 0 &&
             !json_add_num(o, "selective_recompute_ms", l->selective_recompute_ms)) ||
            (l->selective_saved_bytes >= 0 &&
             !json_add_num(o, "selective_saved_bytes", l->selective_saved_bytes)))
            goto fail;
        if (l->tied_bytes > 0) {
            cJSON *t = cJSON_AddObjectToObject(o, "tied");
            if (!t || !json_add_num(t, "layer", l->tied_layer) ||
                !json_add_num(t, "bytes", l->tied_bytes))
                goto fail;
        }
        if (stage_of(p, i) >= 0 && !json_add_num(o, "stage_id", stage_of(p, i))) goto fail;
    }
    if (p->nedges > 0) {
        cJSON *edges = cJSON_AddArrayToObject(root, "edges");
        if (!edges) goto fail;
        for (int e = 0; e < p->nedges; e++) {
            int pair[2] = {p->edges[e].src, p->edges[e].dst};
            cJSON *a = cJSON_CreateIntArray(pair, 2);
            if (!a) goto fail;
            cJSON_AddItemToArray(edges, a);
        }
    }
    return root;
fail:
    cJSON_Delete(root);
    return NULL;
}

int profile_save(const profile *p, const char *path, plumb_err *err)
{
    if (profile_validate(p, path, err)) return -1;
    return json_save_tree(path, profile_to_json(p), err);
}
