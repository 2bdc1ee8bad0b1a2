/* fuzz_pipedream.c: libFuzzer entry point for PipeDream's graph.txt reader and its
 * conversion to a profile. Any input must be rejected with a message or read as a graph
 * whose edges name its nodes in a topological order; a converted profile must validate and
 * reload unchanged from its saved form. Anything else (crash, leak, UB) is a finding. */
#include <stdint.h>
#include <stdlib.h>

#include "core/import_pipedream.h"
#include "core/json.h"
#include "core/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    plumb_err err;
    pd_graph *g = pd_graph_parse("fuzz/graph.txt", (const char *)data, size, &err);
    if (!g) {
        if (!err.msg[0]) abort(); /* a rejection must say why */
        return 0;
    }
    if (g->nnodes < 1) abort();
    int *order = malloc((size_t)g->nnodes * sizeof *order);
    int *pos = malloc((size_t)g->nnodes * sizeof *pos);
    if (!order || !pos) abort();
    if (pd_graph_topo_order(g, "fuzz/graph.txt", order, &err)) abort(); /* read: acyclic */
    for (int i = 0; i < g->nnodes; i++) pos[i] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (order[i] < 0 || order[i] >= g->nnodes || pos[order[i]] >= 0) abort();
        pos[order[i]] = i;
    }
    for (int e = 0; e < g->nedges; e++)
        if (pos[g->edges[e].src] >= pos[g->edges[e].dst]) abort();
    profile *p = pd_graph_to_profile(g, "fuzz/graph.txt", NULL, &err);
    if (!p) {
        if (!err.msg[0]) abort();
    } else {
        if (p->nlayers != g->nnodes) abort();
        if (profile_validate(p, "fuzz.json", &err)) abort();
        cJSON *j = profile_to_json(p);
        if (!j) abort();
        profile *b = profile_from_json(j, "again.json", &err);
        cJSON_Delete(j);
        if (!b || !profile_equal(p, b)) abort(); /* saved form must reload identically */
        profile_free(b);
        profile_free(p);
    }
    free(pos);
    free(order);
    pd_graph_free(g);
    return 0;
}
