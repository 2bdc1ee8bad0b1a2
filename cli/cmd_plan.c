/* cmd_plan.c: `plumb plan`: PipeDream's hierarchical partitioner.
 *   plumb plan -p PROFILE.json -c CLUSTER.json [-o PLAN.json] [--json] [options]
 *   plumb plan --pipedream ARGS...   (the arguments of PipeDream's optimizer, same meaning
 *                                     and defaults, plus --json and -o PLAN.json)
 *   plumb plan --model FILE -c CLUSTER --tp T --pp P --dp D --global-batch B ...
 *                                    (a fixed 3D layout of a transformer, simulated:
 *                                     cli/cmd_plan_layout.c)
 * Prints the plan (stages with layers, replicas, devices, times) or one JSON object. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bounds.h"
#include "core/cluster.h"
#include "core/import_pipedream.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/units.h"
#include "planner/planner.h"
#include "planner/native.h"

/* The native mode (cli/cmd_plan_native.c). */
int cmd_plan_native(const profile *p, const cluster *c, const native_options *o,
                    const char *ppath, const char *cpath, const char *out, int json);
/* A fixed 3D layout of a transformer (cli/cmd_plan_layout.c): argv names --model. */
int cmd_plan_layout(int argc, char **argv);

static void plan_usage(FILE *out)
{
    fprintf(out,
        "usage: plumb plan -p PROFILE.json -c CLUSTER.json [-o PLAN.json] [--json] [options]\n"
        "       plumb plan --pipedream -f GRAPH.txt -n N... [-b BYTES_PER_S...] [options]\n"
        "       plumb plan --model FILE -c CLUSTER.json --tp T --pp P --dp D --global-batch B\n"
        "                  [options]   (a fixed 3D layout: plumb plan --model --help)\n\n"
        "Splits the model into stages, each replicated over some devices. By default with\n"
        "plumb's own cost model (memory-checked, candidates ranked by the simulator, the\n"
        "schedule chosen or given); with --mode pipedream (or any PipeDream option below)\n"
        "PipeDream's hierarchical dynamic program (SOSP 2019), level by level up the\n"
        "cluster's hierarchy, with the same optimum as its optimizer: DAG profiles are\n"
        "planned over antichain states; ties are broken by a fixed rule (docs/planner.md),\n"
        "so the same input always gives the same plan.\n\n"
        "options:\n"
        "  -p, --profile FILE        plumb profile (plumb-profile/1)\n"
        "  -c, --cluster FILE        plumb cluster (plumb-cluster/1): machines and bandwidth\n"
        "                            per level, memory = smallest device memory, compute\n"
        "                            times divided by the slowest device's speed\n"
        "  -o, --output FILE         write the plan (plumb-plan/1), atomically\n"
        "      --json                print one JSON object instead of text\n"
        "      --straight            no replication (straight pipeline)\n"
        "      --memory-constraint   enforce PipeDream's memory constraint per device\n"
        "      --memory-size BYTES   memory per device for it (default: the cluster's)\n"
        "      --fewer-machines      allow using fewer devices when that is faster\n"
        "      --compression RATIO   count activation transfers, divided by RATIO\n"
        "      --max-states N        antichain states before branches are compressed\n"
        "                            (default %d)\n"
        "      --mode native|pipedream  native (the default): plumb's own cost model and\n"
        "                            partitioner: memory-checked against each device, ranked\n"
        "                            by the simulator (docs/planner-native.md); pipedream:\n"
        "                            PipeDream's partitioner (implied by the options above)\n"
        "      --schedule K|auto     native: gpipe, 1f1b-flush (default), pipedream, 2bw,\n"
        "                            interleaved, zb-h1, zb-v, dualpipev, or auto: rank them\n"
        "                            (top five)\n"
        "      --microbatches M      native: microbatches per iteration (default: at least\n"
        "                            2 x stages per replica, a multiple of the replica counts)\n"
        "      --microbatch-size N   native: samples per microbatch (default: the profile's)\n"
        "      --memory-limit GIB    native: device memory at most GIB GiB\n"
        "      --recompute           native: always recompute activations in the backward\n"
        "      --no-recompute        native: never recompute (default: both tried, the\n"
        "                            simulator picks)\n"
        "      --stages N            native: exactly N pipeline stages (ranks for\n"
        "                            interleaved and zb-v), each replicated as the planner\n"
        "                            chooses (default: the planner chooses the depth)\n"
        "      --p2p overlap|sync    native: the plan's point-to-point transfers: overlap\n"
        "                            (default) with compute, or sync: blocking, as\n"
        "                            Megatron-LM's batched exchanges (not with zb-v or\n"
        "                            dualpipev); candidates are priced and simulated so\n"
        "      --grad-sync overlap|end  native: the data-parallel gradient reduction: overlap\n"
        "                            (default) with the last backward, or end: after the\n"
        "                            whole forward-backward loop (not with pipedream or 2bw;\n"
        "                            auto skips them); priced and simulated likewise;\n"
        "                            --mode pipedream refuses both\n"
        "      --zero 0|1            native: 1: ZeRO-1, each replica of a stage keeps 1/r of\n"
        "                            the optimizer state (the candidates' memory counts it;\n"
        "                            a reduce-scatter and an all-gather replace the\n"
        "                            all-reduce); the plan carries \"zero\": 1 (default 0)\n"
        "      --overlap-param-gather  native, with --zero 1: the all-gather after the step\n"
        "                            runs under the next forwards (not with pipedream, 2bw\n"
        "                            or --grad-sync end; auto skips the first two)\n"
        "      --gpus N              use the first N devices of the cluster file (whole\n"
        "                            servers; the plan embeds that part of the cluster)\n"
        "  -h, --help                this text\n"
        "Exit status: 0 ok; 2 bad input or nothing fits (one line naming what would fit;\n"
        "nothing written).\n\n"
        "PipeDream drop-in: `plumb plan --pipedream` takes optimizer_graph_hierarchical.py's\n"
        "arguments: -f/--profile_filename GRAPH.txt, -n/--all_num_machines N..., \n"
        "-b/--network_bandwidths B... (bytes/s, default 1e9), -m/--num_machines_in_first_level,\n"
        "-s/--memory_size (default 16e9), --straight_pipeline, --use_memory_constraint,\n"
        "--use_fewer_machines, --activation_compression_ratio R, -o/--output_directory DIR\n"
        "(writes DIR/gpus=N.txt, the graph with stage ids; a path ending in .json gets a plumb\n"
        "plan instead), plus --json. These flags keep PipeDream's units (-b in bytes/s, -s in\n"
        "bytes); plumb's own files, flags and printouts give bandwidth in Gbit/s (10^9 bits/s),\n"
        "and the printed levels show both.\n",
        PD_DEFAULT_MAX_STATES);
}

/* ---- output ----------------------------------------------------------------------- */

static cJSON *result_json(const profile *p, const pd_result *r, const pd_options *o)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "model", p->name ? p->name : "");
    cJSON_AddStringToObject(j, "config", r->config);
    json_add_num(j, "time_per_stage_s", r->time_per_stage_s);
    json_add_num(j, "speedup_vs_1", r->speedup_vs_1);
    json_add_num(j, "speedup_vs_dp", r->speedup_vs_dp);
    json_add_num(j, "single_stage_s", r->single_stage_s);
    json_add_num(j, "data_parallel_s", r->data_parallel_s);
    cJSON_AddNumberToObject(j, "states", r->nstates);
    cJSON_AddStringToObject(j, "graph", r->compressed == 0   ? "exact"
                                        : r->compressed == 1 ? "branches compressed"
                                                             : "topological prefixes");
    cJSON_AddNumberToObject(j, "devices_used", r->machines_used);
    cJSON *lv = cJSON_AddArrayToObject(j, "levels");
    for (int L = 0; lv && L < o->nlevels; L++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "machines", o->machines[L]);
        json_add_num(e, "bandwidth_Bps", o->bandwidth_Bps[L]);
        cJSON_AddItemToArray(lv, e);
    }
    cJSON *st = cJSON_AddArrayToObject(j, "stages");
    int first = 0;
    for (int t = 0; st && t < r->nstages; t++) {
        const pd_stage *S = &r->stages[t];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "start", S->first_state + 1);
        cJSON_AddNumberToObject(e, "end", S->last_state + 1);
        cJSON_AddNumberToObject(e, "replicas", S->replicas);
        cJSON_AddNumberToObject(e, "first_layer", first);
        cJSON_AddNumberToObject(e, "last_layer", first + S->nlayers - 1);
        first += S->nlayers;
        cJSON *lr = cJSON_AddArrayToObject(e, "level_replicas");
        for (int L = 0; lr && L < o->nlevels; L++)
            cJSON_AddItemToArray(lr, cJSON_CreateNumber(S->level_replicas[L]));
        cJSON *dv = cJSON_AddArrayToObject(e, "devices");
        for (int q = 0; dv && q < S->replicas; q++)
            cJSON_AddItemToArray(dv, cJSON_CreateNumber(S->devices[q]));
        cJSON *ly = cJSON_AddArrayToObject(e, "layers");
        for (int q = 0; ly && q < S->nlayers; q++)
            cJSON_AddItemToArray(ly, cJSON_CreateString(p->layers[S->layers[q]].name));
        json_add_num(e, "compute_s", S->compute_s);
        json_add_num(e, "dp_sync_s", S->dp_sync_s);
        json_add_num(e, "activation_s", S->activation_s);
        cJSON_AddItemToArray(st, e);
    }
    return j;
}

static void print_devices(const pd_stage *S)
{
    for (int q = 0; q < S->replicas;) {
        int a = S->devices[q], b = a;
        while (q + 1 < S->replicas && S->devices[q + 1] == b + 1) {
            b++;
            q++;
        }
        q++;
        if (a == b) printf("%s%d", a == S->devices[0] ? "" : ",", a);
        else printf("%s%d-%d", a == S->devices[0] ? "" : ",", a, b);
    }
}

static void result_print(const profile *p, const char *cname, const pd_result *r,
                         const pd_options *o)
{
    printf("plumb plan: %s on %s (PipeDream-compatible; %d antichain states%s)\n",
           p->name ? p->name : "model", cname, r->nstates,
           r->compressed == 1 ? ", branches compressed"
           : r->compressed == 2 ? ", topological prefixes" : "");
    char bw[32];
    printf("levels (innermost first):");
    for (int L = 0; L < o->nlevels; L++)
        printf(" %d x %s (%.3g bytes/s)", o->machines[L],
               units_gbit(o->bandwidth_Bps[L], bw, sizeof bw), o->bandwidth_Bps[L]);
    printf("\n");
    for (int t = 0; t < r->nstages; t++) {
        const pd_stage *S = &r->stages[t];
        printf("stage %d: %d layers (%s .. %s), %d replica%s on devices ", t, S->nlayers,
               p->layers[S->layers[0]].name, p->layers[S->layers[S->nlayers - 1]].name,
               S->replicas, S->replicas == 1 ? "" : "s");
        print_devices(S);
        printf(", compute %.3f ms, weight sync %.3f ms, activations %.3f ms\n",
               S->compute_s * 1e3, S->dp_sync_s * 1e3, S->activation_s * 1e3);
    }
    printf("config: %s (%d devices used)\n", r->config, r->machines_used);
    printf("time per stage: %.9g s\n", r->time_per_stage_s);
    printf("single device: %.9g s per minibatch; data parallel: %.9g s\n", r->single_stage_s,
           r->data_parallel_s);
    printf("speedup over one device: %.6gx; over data parallelism: %.6gx\n", r->speedup_vs_1,
           r->speedup_vs_dp);
}

/* ---- PipeDream's argument syntax (argparse, nargs='+' for -n and -b) ---------------- */

typedef struct pd_args {
    const char *graph, *outdir;
    int json;
    pd_options o;
    int nn, nb;
} pd_args;

static const char *const PD_LONG[] = {
    "--all_num_machines", "--profile_filename", "--network_bandwidths",
    "--num_machines_in_first_level", "--memory_size", "--straight_pipeline",
    "--output_directory", "--use_memory_constraint", "--use_fewer_machines",
    "--activation_compression_ratio", "--json", "--help", "--max_states", NULL};
static const char PD_SHORT[] = "nfbmsXoXXXXhX"; /* short form of each, X = none */

static int looks_like_option(const char *s)
{
    if (s[0] != '-' || s[1] == 0) return 0;
    char *end;
    strtod(s, &end); /* a negative number is a value, as in argparse */
    return *end != 0;
}

/* Which PD_LONG entry an argument names (argparse accepts unique prefixes); -1 unknown,
 * -2 ambiguous. *val receives the text after '=' or an attached short value. */
static int pd_which(const char *a, const char **val)
{
    *val = NULL;
    if (a[0] == '-' && a[1] != '-') {
        for (int i = 0; PD_LONG[i]; i++)
            if (PD_SHORT[i] != 'X' && a[1] == PD_SHORT[i]) {
                if (a[2]) *val = a + 2;
                return i;
            }
        return -1;
    }
    size_t n = strcspn(a, "=");
    int hit = -1;
    for (int i = 0; PD_LONG[i]; i++) {
        if (strncmp(PD_LONG[i], a, n) != 0) continue;
        if (strlen(PD_LONG[i]) == n) {
            hit = i;
            break;
        }
        if (hit >= 0) return -2;
        hit = i;
    }
    if (hit >= 0 && a[n] == '=') *val = a + n + 1;
    return hit;
}

static int pd_parse(int argc, char **argv, pd_args *A)
{
    const char *cmd = "plan --pipedream";
    memset(A, 0, sizeof *A);
    pd_options_default(&A->o);
    A->o.nlevels = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val;
        if (!looks_like_option(a))
            return cli_fail(cmd, "unexpected argument \"%s\"; see plumb plan --help", a);
        int w = pd_which(a, &val);
        if (w == -2) return cli_fail(cmd, "ambiguous option %s; see plumb plan --help", a);
        if (w < 0) return cli_fail(cmd, "unknown option %s; see plumb plan --help", a);
        const char *name = PD_LONG[w];
        int is_flag = w == 5 || w == 7 || w == 8 || w == 10 || w == 11;
        if (is_flag) {
            if (val) return cli_fail(cmd, "%s takes no value", name);
            if (w == 5) A->o.straight = 1;
            if (w == 7) A->o.use_memory_constraint = 1;
            if (w == 8) A->o.use_fewer_machines = 1;
            if (w == 10) A->json = 1;
            if (w == 11) {
                plan_usage(stdout);
                return 1;
            }
            continue;
        }
        if (w == 0 || w == 2) { /* nargs='+' */
            int cnt = 0;
            const char *vals[PD_MAX_LEVELS + 1];
            if (val) vals[cnt++] = val;
            while (i + 1 < argc && !looks_like_option(argv[i + 1])) {
                if (cnt == PD_MAX_LEVELS)
                    return cli_fail(cmd, "%s: expected at most %d values", name, PD_MAX_LEVELS);
                vals[cnt++] = argv[++i];
            }
            if (cnt == 0) return cli_fail(cmd, "%s: expected one or more values", name);
            for (int k = 0; k < cnt; k++) {
                if (w == 0) {
                    if (cli_int(cmd, name, vals[k], 1, 4096, &A->o.machines[k])) return 2;
                } else if (cli_num(cmd, name, vals[k], 1, BOUND_BW_BPS_MAX,
                                   &A->o.bandwidth_Bps[k])) {
                    return 2;
                } else if (A->o.bandwidth_Bps[k] < BOUND_BW_BPS_MIN) {
                    return cli_fail(cmd, "%s: expected bytes/s from %g to %g (1 kbit/s to 100 "
                                    "Tbit/s) (got \"%s\")", name, BOUND_BW_BPS_MIN,
                                    BOUND_BW_BPS_MAX, vals[k]);
                }
            }
            if (w == 0) A->nn = cnt;
            else A->nb = cnt;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc || looks_like_option(argv[i + 1]))
                return cli_fail(cmd, "%s: expected one value", name);
            val = argv[++i];
        }
        switch (w) {
        case 1: A->graph = val; break;
        case 3:
            if (cli_int(cmd, name, val, 1, 4096, &A->o.machines_in_first_level)) return 2;
            break;
        case 4:
            if (cli_num(cmd, name, val, 1, 1e18, &A->o.memory_bytes)) return 2;
            break;
        case 6: A->outdir = val; break;
        case 9:
            if (cli_num(cmd, name, val, 1, 1e6, &A->o.activation_compression_ratio)) return 2;
            break;
        case 12:
            if (cli_int(cmd, name, val, 1, 1 << 24, &A->o.max_states)) return 2;
            break;
        }
    }
    if (!A->graph) return cli_fail(cmd, "the following argument is required: -f/--profile_filename");
    if (A->nn == 0)
        return cli_fail(cmd, "expected -n/--all_num_machines (machines per level, innermost first)");
    if (A->nb == 0) {
        A->nb = 1;
        A->o.bandwidth_Bps[0] = 1e9;
    }
    if (A->nn != A->nb)
        return cli_fail(cmd, "expected as many -n values as -b values (got %d and %d), as "
                        "PipeDream asserts", A->nn, A->nb);
    A->o.nlevels = A->nn;
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Writes DIR/gpus=N.txt: the graph with each node's stage_id, in PipeDream's format. */
static int write_partitioned_graph(const char *dir, const pd_graph *g, const int *order,
                                   const pd_result *r, int total, plumb_err *err)
{
    int *stage = malloc(((size_t)g->nnodes + 1) * sizeof *stage);
    if (!stage) return err_set(err, dir, NULL, "out of memory");
    for (int t = 0; t < r->nstages; t++)
        for (int q = 0; q < r->stages[t].nlayers; q++) stage[order[r->stages[t].layers[q]]] = t;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = -1;
    for (int pass = 0; buf && pass < 2; pass++) {
        int cnt = pass == 0 ? g->nnodes : g->nedges;
        for (int i = 0; i < cnt; i++) {
            char line[8192];
            int k;
            if (pass == 0) {
                const pd_node *nd = &g->nodes[i];
                k = snprintf(line, sizeof line,
                             "%s -- %s -- forward_compute_time=%.3f, backward_compute_time=%.3f, "
                             "activation_size=%.1f, parameter_size=%.3f -- stage_id=%d\n",
                             nd->id, nd->desc, nd->forward_ms, nd->backward_ms,
                             nd->activation_bytes, nd->parameter_bytes, stage[i]);
            } else {
                k = snprintf(line, sizeof line, "\t%s -- %s\n", g->nodes[g->edges[i].src].id,
                             g->nodes[g->edges[i].dst].id);
            }
            if (k < 0 || (size_t)k >= sizeof line) k = (int)strlen(line);
            if (len + (size_t)k + 1 > cap) {
                while (len + (size_t)k + 1 > cap) cap *= 2;
                char *nb = realloc(buf, cap);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = nb;
            }
            memcpy(buf + len, line, (size_t)k);
            len += (size_t)k;
        }
    }
    if (!buf) {
        err_set(err, dir, NULL, "out of memory");
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/gpus=%d.txt", dir, total);
        rc = file_write_atomic(path, buf, len, err);
    }
    free(buf);
    free(stage);
    return rc;
}

static int run_pipedream(int argc, char **argv)
{
    pd_args A;
    int rc = pd_parse(argc, argv, &A);
    if (rc == 1) return 0;
    if (rc) return 2;
    /* the output is checked before the search, which can take minutes on deep graphs */
    if (A.outdir) {
        const char *inputs[1] = {A.graph}, *opt = "--output_directory";
        if (ends_with(A.outdir, ".json") ? cli_output_ok("plan", opt, A.outdir, inputs, 1)
                                         : cli_folder_ok("plan", opt, A.outdir, 0))
            return 2;
    }
    plumb_err err;
    err_clear(&err);
    pd_graph *g = pd_graph_read(A.graph, &err);
    profile *p = NULL;
    int *order = NULL, *start = NULL;
    pd_result res = {0};
    int have_res = 0, status = 2;
    if (!g) goto bad;
    {
        /* PipeDream's optimizer needs no minibatch size; plumb's plan records one. When the
         * Input node does not tell it, use 1 (figures stay per minibatch). */
        pd_import_opts io = {0};
        const char *how;
        plumb_err ignore;
        if (pd_graph_infer_minibatch(g, A.graph, &how, &ignore) < 0) io.minibatch = 1;
        p = pd_graph_to_profile(g, A.graph, &io, &err);
    }
    if (!p) goto bad;
    order = malloc(((size_t)g->nnodes + 1) * sizeof *order);
    start = malloc(((size_t)g->nnodes + 1) * sizeof *start);
    if (!order || !start) goto bad;
    if (pd_graph_topo_order(g, A.graph, order, &err)) goto bad;
    for (int i = 0; i < g->nnodes; i++) start[order[i]] = i; /* file node -> layer */
    if (planner_pipedream_run(p, start, &A.o, &res, &err)) goto bad; /* nothing fits: 2 */
    have_res = 1;
    if (A.outdir) {
        int total = 1;
        for (int L = 0; L < A.o.nlevels; L++) total *= A.o.machines[L];
        if (ends_with(A.outdir, ".json")) {
            cluster *c = pd_options_to_cluster(&A.o, &err);
            plan *pl = c ? planner_pipedream_plan(p, c, &res, &err) : NULL;
            int bad = !pl || plan_save(pl, A.outdir, &err);
            plan_free(pl);
            cluster_free(c);
            if (bad) goto bad;
        } else if (write_partitioned_graph(A.outdir, g, order, &res, total, &err)) {
            goto bad;
        }
    }
    if (A.json) {
        cJSON *j = result_json(p, &res, &A.o);
        char *s = j ? cJSON_Print(j) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
    } else {
        result_print(p, "PipeDream levels", &res, &A.o);
    }
    status = 0;
    goto done;
bad:
    if (err.msg[0]) err_print(&err);
    else fprintf(stderr, "plumb: plan: out of memory\n");
done:
    if (have_res) pd_result_free(&res);
    free(order);
    free(start);
    profile_free(p);
    pd_graph_free(g);
    return status;
}

int cmd_plan(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--pipedream") == 0) {
            if (i != 1)
                return cli_fail("plan", "--pipedream must come first: plumb plan --pipedream "
                                "ARGS...");
            return run_pipedream(argc - 2, argv + 2);
        }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--model") == 0 || strncmp(argv[i], "--model=", 8) == 0)
            return cmd_plan_layout(argc, argv);
    static const struct option longopts[] = {
        {"profile", required_argument, NULL, 'p'},
        {"cluster", required_argument, NULL, 'c'},
        {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},
        {"straight", no_argument, NULL, 'S'},
        {"memory-constraint", no_argument, NULL, 'M'},
        {"memory-size", required_argument, NULL, 'z'},
        {"fewer-machines", no_argument, NULL, 'F'},
        {"compression", required_argument, NULL, 'r'},
        {"max-states", required_argument, NULL, 'x'},
        {"mode", required_argument, NULL, 1001},
        {"schedule", required_argument, NULL, 1002},
        {"microbatches", required_argument, NULL, 1003},
        {"microbatch-size", required_argument, NULL, 1004},
        {"memory-limit", required_argument, NULL, 1005},
        {"recompute", no_argument, NULL, 1006},
        {"no-recompute", no_argument, NULL, 1007},
        {"stages", required_argument, NULL, 1008},
        {"gpus", required_argument, NULL, 1009},
        {"p2p", required_argument, NULL, 1010},
        {"grad-sync", required_argument, NULL, 1011},
        {"zero", required_argument, NULL, 1012},
        {"overlap-param-gather", no_argument, NULL, 1013},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *ppath = NULL, *cpath = NULL, *out = NULL;
    int json = 0, c;
    double memsize = 0;
    pd_options o;
    pd_options_default(&o);
    native_options no; /* native mode: 0 unset, 1 native, 2 pipedream; pd_only / nat_only:
                          an option of one mode was given */
    native_options_init(&no);
    int mode = 0, pd_only = 0, nat_only = 0;
    double gib = 0;
    int gpus = 0; /* --gpus N: the first N devices of the cluster file, 0: all */
    optind = 0;
    while ((c = cli_getopt("plan", argc, argv, "p:c:o:h", longopts)) != -1) {
        if (c == 'S' || c == 'M' || c == 'z' || c == 'F' || c == 'r' || c == 'x') pd_only = 1;
        if ((c >= 1002 && c <= 1008) || (c >= 1010 && c <= 1013)) nat_only = 1;
        switch (c) {
        case 1001:
            if (strcmp(optarg, "native") && strcmp(optarg, "pipedream"))
                return cli_fail("plan", "--mode: expected native or pipedream (got \"%s\")",
                                optarg);
            mode = strcmp(optarg, "native") ? 2 : 1;
            break;
        case 1002:
            if (cli_schedule("plan", optarg, &no.schedule)) return 2;
            break;
        case 1003:
            if (cli_int("plan", "--microbatches", optarg, 1, 1 << 20, &no.microbatches))
                return 2;
            break;
        case 1004:
            if (cli_int("plan", "--microbatch-size", optarg, 1, BOUND_BATCH_MAX, &no.microbatch_size))
                return 2;
            break;
        case 1005:
            if (cli_num("plan", "--memory-limit", optarg, 1, 1e6, &gib)) return 2;
            no.memory_limit_bytes = gib * 1073741824.0;
            break;
        case 1009:
            if (cli_int("plan", "--gpus", optarg, 1, CLUSTER_MAX_DEVICES, &gpus)) return 2;
            break;
        case 1010:
            if (cli_p2p("plan", optarg, &no.p2p_sync)) return 2;
            break;
        case 1011:
            if (cli_grad_sync("plan", optarg, &no.grad_sync_end)) return 2;
            break;
        case 1012:
            if (cli_int("plan", "--zero", optarg, 0, 1, &no.zero)) return 2;
            break;
        case 1013: no.overlap_param_gather = 1; break;
        case 1006: no.recompute = 1; break;
        case 1007: no.recompute = 0; break;
        case 1008:
            if (cli_int("plan", "--stages", optarg, 1, 4096, &no.nstages)) return 2;
            break;
        case 'p': ppath = optarg; break;
        case 'c': cpath = optarg; break;
        case 'o': out = optarg; break;
        case 'j': json = 1; break;
        case 'S': o.straight = 1; break;
        case 'M': o.use_memory_constraint = 1; break;
        case 'z':
            if (cli_num("plan", "--memory-size", optarg, 1, 1e18, &memsize)) return 2;
            break;
        case 'F': o.use_fewer_machines = 1; break;
        case 'r':
            if (cli_num("plan", "--compression", optarg, 1, 1e6,
                        &o.activation_compression_ratio))
                return 2;
            break;
        case 'x':
            if (cli_int("plan", "--max-states", optarg, 1, 1 << 24, &o.max_states)) return 2;
            break;
        case 'h': plan_usage(stdout); return 0;
        default: return 2;
        }
    }
    if (optind < argc)
        return cli_fail("plan", "unexpected argument \"%s\"; see plumb plan --help", argv[optind]);
    if (!ppath) return cli_fail("plan", "expected -p PROFILE.json; see plumb plan --help");
    if (!cpath) return cli_fail("plan", "expected -c CLUSTER.json; see plumb plan --help");
    if (mode == 0) mode = pd_only ? 2 : 1;
    if (mode == 1 && pd_only)
        return cli_fail("plan", "--straight, --memory-constraint, --memory-size, "
                        "--fewer-machines, --compression and --max-states belong to --mode "
                        "pipedream");
    if (mode == 2 && nat_only)
        return cli_fail("plan", "--schedule, --microbatches, --microbatch-size, --memory-limit, "
                        "--recompute/--no-recompute, --stages, --p2p, --grad-sync, --zero and "
                        "--overlap-param-gather belong to --mode native");
    if (mode == 1) { /* the runtime's rule, its owner's line (auto: the kind-free ones) */
        plumb_err re;
        err_clear(&re);
        if (native_runtime_check(&no, (sched_kind)no.schedule, &re))
            return cli_fail("plan", "%s", re.msg);
    }
    const char *inputs[2] = {ppath, cpath};
    if (out && cli_output_ok("plan", "-o", out, inputs, 2)) return 2;
    plumb_err err;
    err_clear(&err);
    profile *p = profile_load(ppath, &err);
    cluster *cl = p ? cluster_load(cpath, &err) : NULL;
    if (cl && gpus > 0) { /* the first `gpus` devices, whole servers */
        cluster *cut = cluster_take_gpus(cl, gpus, cpath, &err);
        cluster_free(cl);
        cl = cut;
    }
    pd_result res = {0};
    plan *pl = NULL;
    int status = 2;
    if (!p || !cl) goto bad;
    if (p->tp > 1) {
        err_set(&err, ppath, "tensor_parallel", "expected 1: plumb plan -p places whole layers "
                "on single devices (got %d); lay tensor parallelism out with plumb plan "
                "--model FILE --tp T --pp P --dp D", p->tp);
        goto bad;
    }
    if (p->cp > 1) {
        err_set(&err, ppath, "context_parallel", "expected 1: plumb plan -p places whole "
                "sequences on single devices (got %d); lay context parallelism out with plumb "
                "plan --model FILE --cp C --tp T --pp P --dp D", p->cp);
        goto bad;
    }
    if (mode == 1) {
        status = cmd_plan_native(p, cl, &no, ppath, cpath, out, json);
        profile_free(p);
        cluster_free(cl);
        return status;
    }
    pd_options_from_cluster(&o, cl);
    if (memsize > 0) o.memory_bytes = memsize;
    if (planner_pipedream_run(p, NULL, &o, &res, &err)) goto bad; /* nothing fits: 2 */
    if (out) {
        pl = planner_pipedream_plan(p, cl, &res, &err);
        if (!pl || plan_save(pl, out, &err)) {
            status = 1;
            pd_result_free(&res);
            goto bad;
        }
    }
    if (json) {
        cJSON *j = result_json(p, &res, &o);
        if (j) cJSON_AddStringToObject(j, "cluster", cl->name ? cl->name : "");
        char *s = j ? cJSON_Print(j) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
    } else {
        result_print(p, cl->name ? cl->name : cpath, &res, &o);
        if (out) printf("plan written to %s\n", out);
    }
    pd_result_free(&res);
    plan_free(pl);
    profile_free(p);
    cluster_free(cl);
    return 0;
bad:
    err_print(&err);
    plan_free(pl);
    profile_free(p);
    cluster_free(cl);
    return status;
}
