/* import_pipedream.h: reads PipeDream's graph.txt layer profiles (the output of PipeDream's
 * profiler and the input of its planner) and turns them into plumb profiles.
 *
 * graph.txt, one DAG per file: node lines, then edge lines (see docs/import.md).
 *   node11 -- ReLU(inplace) -- forward_compute_time=0.539, backward_compute_time=0.188, activation_size=44302336.000, parameter_size=0.000[ -- stage_id=0]
 *   <TAB>node10 -- node11
 * Times are milliseconds per minibatch, sizes bytes; activation_size may be a list
 * "[a; b; c]" (layers with several outputs), which is summed.
 *
 * Two levels:
 *   - pd_graph_read keeps the file exactly: nodes and edges in file order, with their line
 *     numbers and optional stage_id (the planner helper needs PipeDream's node identities).
 *   - import_pipedream / pd_graph_to_profile build a validated profile whose layers are in a
 *     deterministic topological order (Kahn's algorithm, ready nodes taken in file order).
 * Mapping back: layer i of the profile is node order[i] of the graph (pd_graph_topo_order),
 * and profile->layers[i].name is that node's id (e.g. "node11"), so
 * profile_find_layer(p, "node11") gives its layer index. Every node is kept, Input nodes
 * included, and every edge; profile->stage_ids holds the stage_ids when the file has any. */
#ifndef PLUMB_IMPORT_PIPEDREAM_H
#define PLUMB_IMPORT_PIPEDREAM_H

#include <stddef.h>

#include "err.h"
#include "profile.h"

typedef struct pd_node {
    char *id;                /* node id as written, e.g. "node11" */
    char *desc;              /* description as written, e.g. "Conv2d(3, 64, kernel_size=(3, 3))" */
    double forward_ms;       /* forward_compute_time, ms per minibatch */
    double backward_ms;      /* backward_compute_time, ms per minibatch */
    double activation_bytes; /* activation_size, summed when a list, bytes */
    int nactivations;        /* entries in activation_size (1 for a plain number) */
    double parameter_bytes;  /* parameter_size, bytes */
    int stage_id;            /* the optional 4th field, -1 when absent */
    int line;                /* 1-based line number in the file */
} pd_node;

typedef struct pd_edge {
    int src, dst; /* indices into pd_graph.nodes (file order) */
    int line;     /* 1-based line number in the file */
} pd_edge;

typedef struct pd_graph {
    int nnodes;
    pd_node *nodes; /* in file order */
    int nedges;
    pd_edge *edges; /* in file order */
} pd_graph;

/* Options for the conversion; zero/NULL fields take the defaults. */
typedef struct pd_import_opts {
    const char *name;   /* profile name; NULL: from the path ("vgg16/graph.txt" -> "vgg16",
                         * "resnet18/graph_copy.txt" -> "resnet18_graph_copy",
                         * "x/vgg16_partitioned.txt" -> "vgg16_partitioned") */
    const char *device; /* profiled device; NULL: "V100" */
    int minibatch;      /* > 0: use it; 0: infer from the Input node (see below) */
} pd_import_opts;

/* Reads and checks a graph.txt. Returns a new graph (free with pd_graph_free), or NULL with
 * err set to one line "FILE:LINE: what was expected (got ...)". Rejects malformed lines,
 * negative or non-finite numbers, duplicate node ids, edges naming unknown nodes, self
 * loops, duplicate edges, empty files, and cycles (naming the nodes of one cycle). */
pd_graph *pd_graph_read(const char *path, plumb_err *err);

/* Same on text in memory; `name` is used as the file name in messages. */
pd_graph *pd_graph_parse(const char *name, const char *text, size_t len, plumb_err *err);

void pd_graph_free(pd_graph *g);

/* Fills order[0..nnodes-1] with node indices in topological order: Kahn's algorithm, and
 * among nodes that are ready at once the one that comes first in the file. Returns 0, or -1
 * with err set (naming a cycle) when the graph has one; `file` names it in the message. */
int pd_graph_topo_order(const pd_graph *g, const char *file, int *order, plumb_err *err);

/* The minibatch size implied by the graph's Input nodes: the first Input node with a non-zero
 * activation_size divided by the fp32 ImageNet input 4 x 3 x 224 x 224 bytes, or by
 * 4 x 3 x 299 x 299 (Inception-v3), whichever divides it exactly; 64 when every Input node
 * has size 0 (the translation profiles, made with --batch-size 64 per PipeDream's profiler
 * README). *how receives a static text saying which rule applied. Returns the size, or -1
 * with err set when no rule applies (no Input node, or a size neither shape divides). */
int pd_graph_infer_minibatch(const pd_graph *g, const char *file, const char **how,
                             plumb_err *err);

/* Converts a graph into a validated profile (layers in pd_graph_topo_order's order, edges in
 * file order as layer-index pairs). `path` is the file it came from (for the name and the
 * source text); o may be NULL. Returns a new profile, or NULL with err set. */
profile *pd_graph_to_profile(const pd_graph *g, const char *path, const pd_import_opts *o,
                             plumb_err *err);

/* Reads path and converts it with the options (o may be NULL). */
profile *import_pipedream_opts(const char *path, const pd_import_opts *o, plumb_err *err);

/* Reads path and converts it with the default options. */
profile *import_pipedream(const char *graph_path, plumb_err *err);

#endif
