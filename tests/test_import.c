/* test_import.c: `plumb import pipedream`: the graph.txt parser, its topological order, the
 * conversion rules (kind, minibatch, names), every malformed-line class, the CLI's exit
 * status and atomic output, and a re-import of PipeDream's real files (when
 * ../shared/profiles/pipedream is present) checked against an independent parser and against
 * the committed profiles/pipedream JSON files. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/import_pipedream.h"
#include "core/profile.h"

#define SHARED "../shared/profiles/pipedream"

#define META "forward_compute_time=1.500, backward_compute_time=2.250, activation_size=64.0, parameter_size=8.000"

static pd_graph *parse(const char *text, plumb_err *err)
{
    return pd_graph_parse("g.txt", text, strlen(text), err);
}

static void expect_bad(const char *text, const char *want)
{
    plumb_err err;
    err_clear(&err);
    pd_graph *g = parse(text, &err);
    cr_assert_null(g, "accepted:\n%s", text);
    cr_assert_str_eq(err.msg, want);
}

/* ---- parser and conversion ------------------------------------------------------------- */

Test(import, keeps_file_order_lines_and_stage_ids)
{
    const char *t = "node3 -- ReLU(inplace) -- " META " -- stage_id=1\n"
                    "node1 -- Input0 -- forward_compute_time=0.0, backward_compute_time=0.0, "
                    "activation_size=0.0, parameter_size=0.0 -- stage_id=0\n"
                    "\n"
                    "node2 -- LSTM(1024, 1024) -- forward_compute_time=3, backward_compute_time=4, "
                    "activation_size=[1.0; 2.5; 3], parameter_size=16 -- stage_id=0\n"
                    "\tnode1 -- node2\n"
                    "\tnode2 -- node3\n";
    plumb_err err;
    pd_graph *g = parse(t, &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(g->nnodes, 3);
    cr_assert_eq(g->nedges, 2);
    cr_assert_str_eq(g->nodes[0].id, "node3");
    cr_assert_str_eq(g->nodes[0].desc, "ReLU(inplace)");
    cr_assert_eq(g->nodes[0].forward_ms, 1.5);
    cr_assert_eq(g->nodes[0].backward_ms, 2.25);
    cr_assert_eq(g->nodes[0].activation_bytes, 64);
    cr_assert_eq(g->nodes[0].parameter_bytes, 8);
    cr_assert_eq(g->nodes[0].stage_id, 1);
    cr_assert_eq(g->nodes[2].line, 4);
    cr_assert_eq(g->nodes[2].activation_bytes, 6.5);
    cr_assert_eq(g->nodes[2].nactivations, 3);
    cr_assert_eq(g->edges[1].src, 2);
    cr_assert_eq(g->edges[1].dst, 0);
    cr_assert_eq(g->edges[1].line, 6);

    pd_import_opts o = {.name = "m", .device = "T4", .minibatch = 0};
    profile *p = pd_graph_to_profile(g, "dir/model/graph.txt", &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_str_eq(p->name, "m");
    cr_assert_str_eq(p->device, "T4");
    cr_assert_eq(p->minibatch, 64, "zero-size Input nodes mean a translation profile");
    /* topological order node1, node2, node3 */
    cr_assert_str_eq(p->layers[0].name, "node1");
    cr_assert_str_eq(p->layers[0].kind, "Input");
    cr_assert_str_eq(p->layers[0].desc, "Input0");
    cr_assert_str_eq(p->layers[1].name, "node2");
    cr_assert_str_eq(p->layers[1].kind, "LSTM");
    cr_assert_eq(p->layers[1].activation_bytes, 6.5);
    cr_assert_eq(p->layers[1].backward_input_ms, -1);
    cr_assert_eq(p->layers[1].flops, -1);
    cr_assert_str_eq(p->layers[2].name, "node3");
    cr_assert_not_null(p->stage_ids);
    cr_assert_eq(p->stage_ids[0], 0);
    cr_assert_eq(p->stage_ids[2], 1);
    cr_assert_eq(p->nedges, 2);
    cr_assert_eq(p->edges[0].src, 0);
    cr_assert_eq(p->edges[0].dst, 1);
    cr_assert_eq(p->edges[1].src, 1);
    cr_assert_eq(p->edges[1].dst, 2);
    cr_assert(strstr(p->source, "model/graph.txt"), "%s", p->source);
    profile_free(p);
    pd_graph_free(g);
}

Test(import, topological_ties_follow_file_order)
{
    /* file order c, a, b, d; edges a -> b, c -> d: ready at start c (0) and a (1) */
    const char *t = "c -- X -- " META "\n"
                    "a -- X -- " META "\n"
                    "b -- X -- " META "\n"
                    "d -- X -- " META "\n"
                    "\ta -- b\n"
                    "\tc -- d\n";
    plumb_err err;
    pd_graph *g = parse(t, &err);
    cr_assert_not_null(g, "%s", err.msg);
    int order[4];
    cr_assert_eq(pd_graph_topo_order(g, "g.txt", order, &err), 0);
    /* c first; then a and d are ready, a comes first in the file; then b, d */
    cr_assert_eq(order[0], 0);
    cr_assert_eq(order[1], 1);
    cr_assert_eq(order[2], 2);
    cr_assert_eq(order[3], 3);
    /* reverse the dependency: b -> c forces c after b */
    const char *t2 = "c -- X -- " META "\n"
                     "a -- X -- " META "\n"
                     "b -- X -- " META "\n"
                     "\tb -- c\n";
    pd_graph *g2 = parse(t2, &err);
    cr_assert_not_null(g2, "%s", err.msg);
    cr_assert_eq(pd_graph_topo_order(g2, "g.txt", order, &err), 0);
    cr_assert_eq(order[0], 1); /* a */
    cr_assert_eq(order[1], 2); /* b */
    cr_assert_eq(order[2], 0); /* c */
    pd_graph_free(g);
    pd_graph_free(g2);
}

Test(import, kinds_are_the_description_up_to_the_parenthesis)
{
    const char *t = "n1 -- Input -- forward_compute_time=1, backward_compute_time=0, "
                    "activation_size=1204224.0, parameter_size=0\n"
                    "n2 -- __getitem__(0) -- " META "\n"
                    "n3 -- Concat(1) -- " META "\n"
                    "n4 -- hidden -- " META "\n"
                    "n5 -- Input12 -- " META "\n"
                    "n6 -- InputLayerNorm(5) -- " META "\n"
                    "n7 -- (weird) -- " META "\n";
    plumb_err err;
    pd_graph *g = parse(t, &err);
    cr_assert_not_null(g, "%s", err.msg);
    profile *p = pd_graph_to_profile(g, "x.txt", NULL, &err);
    cr_assert_not_null(p, "%s", err.msg);
    const char *want[] = {"Input", "__getitem__", "Concat", "hidden", "Input",
                          "InputLayerNorm", "Unknown"};
    for (int i = 0; i < 7; i++) cr_assert_str_eq(p->layers[i].kind, want[i], "layer %d", i);
    cr_assert_eq(p->minibatch, 2, "1204224 bytes = 2 x 4 x 3 x 224 x 224");
    cr_assert_str_eq(p->device, "V100");
    cr_assert_str_eq(p->name, "x");
    cr_assert_null(p->stage_ids);
    cr_assert_eq(p->nedges, 0);
    profile_free(p);
    pd_graph_free(g);
}

Test(import, minibatch_inference_rules)
{
    plumb_err err;
    const char *how;
    /* 299 x 299 (Inception-v3): 128 x 4 x 3 x 299 x 299 = 137319936 */
    pd_graph *g = parse("n1 -- Input -- forward_compute_time=1, backward_compute_time=0, "
                        "activation_size=137319936.000, parameter_size=0\n", &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(pd_graph_infer_minibatch(g, "g.txt", &how, &err), 128);
    cr_assert(strstr(how, "299"));
    pd_graph_free(g);
    /* neither shape divides it */
    g = parse("n1 -- X -- " META "\nn2 -- Input -- forward_compute_time=1, "
              "backward_compute_time=0, activation_size=1000, parameter_size=0\n", &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(pd_graph_infer_minibatch(g, "g.txt", &how, &err), -1);
    cr_assert_str_eq(err.msg, "g.txt:2: cannot infer the minibatch size: the Input "
                     "activation_size 1000 is not a multiple of 4 x 3 x 224 x 224 or "
                     "4 x 3 x 299 x 299 bytes; pass the minibatch size (--minibatch N)");
    cr_assert_null(pd_graph_to_profile(g, "g.txt", NULL, &err));
    pd_import_opts o = {.minibatch = 7};
    profile *p = pd_graph_to_profile(g, "g.txt", &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(p->minibatch, 7);
    profile_free(p);
    pd_graph_free(g);
    /* no Input node at all */
    g = parse("n1 -- X -- " META "\n", &err);
    cr_assert_eq(pd_graph_infer_minibatch(g, "g.txt", &how, &err), -1);
    cr_assert_str_eq(err.msg, "g.txt: cannot infer the minibatch size: expected an Input node "
                     "(got none); pass the minibatch size (--minibatch N)");
    pd_graph_free(g);
}

Test(import, names_from_paths)
{
    plumb_err err;
    pd_graph *g = parse("n1 -- X -- " META "\n", &err);
    pd_import_opts o = {.minibatch = 1};
    const char *paths[] = {"a/b/vgg16/graph.txt", "resnet18/graph_copy.txt",
                           "../t/vgg16_partitioned.txt", "graph.txt"};
    const char *want[] = {"vgg16", "resnet18_graph_copy", "vgg16_partitioned", "graph"};
    for (int i = 0; i < 4; i++) {
        profile *p = pd_graph_to_profile(g, paths[i], &o, &err);
        cr_assert_not_null(p, "%s", err.msg);
        cr_assert_str_eq(p->name, want[i]);
        profile_free(p);
    }
    pd_graph_free(g);
}

/* ---- malformed input, one test per class ------------------------------------------------ */

Test(import_bad, too_few_fields)
{
    expect_bad("node1 -- Conv2d\n",
               "g.txt:1: expected a node line \"ID -- DESCRIPTION -- forward_compute_time=MS, "
               "backward_compute_time=MS, activation_size=BYTES, parameter_size=BYTES[ -- "
               "stage_id=N]\" (got 2 fields separated by \" -- \")");
}

Test(import_bad, bad_numbers)
{
    expect_bad("n1 -- X -- forward_compute_time=abc, backward_compute_time=0, "
               "activation_size=0, parameter_size=0\n",
               "g.txt:1: forward_compute_time: expected a number >= 0 (got \"abc\")");
    expect_bad("n1 -- X -- " META "\nn2 -- X -- forward_compute_time=1, "
               "backward_compute_time=-2, activation_size=0, parameter_size=0\n",
               "g.txt:2: backward_compute_time: expected a number >= 0 (got \"-2\")");
    expect_bad("n1 -- X -- forward_compute_time=1, backward_compute_time=0, "
               "activation_size=0, parameter_size=nan\n",
               "g.txt:1: parameter_size: expected a number >= 0 (got \"nan\")");
    expect_bad("n1 -- X -- forward_compute_time=1e999, backward_compute_time=0, "
               "activation_size=0, parameter_size=0\n",
               "g.txt:1: forward_compute_time: expected a number >= 0 (got \"1e999\")");
    expect_bad("n1 -- X -- forward_compute_time=1, backward_compute_time=0, "
               "activation_size=[1; x], parameter_size=0\n",
               "g.txt:1: activation_size: expected a number >= 0 or a list [A; B; ...] of them "
               "(got \"[1; x]\")");
}

Test(import_bad, metadata_keys)
{
    expect_bad("n1 -- X -- forward_compute_time=1, backward_compute_time=0, "
               "activation_size=0\n",
               "g.txt:1: missing parameter_size; expected a node line \"ID -- DESCRIPTION -- "
               "forward_compute_time=MS, backward_compute_time=MS, activation_size=BYTES, "
               "parameter_size=BYTES[ -- stage_id=N]\"");
    expect_bad("n1 -- X -- " META ", flops=3\n",
               "g.txt:1: expected forward_compute_time, backward_compute_time, "
               "activation_size or parameter_size (got \"flops\")");
    expect_bad("n1 -- X -- " META ", parameter_size=3\n",
               "g.txt:1: parameter_size: expected once per node line (got it twice)");
    expect_bad("n1 -- X -- forward_compute_time 1\n",
               "g.txt:1: expected KEY=VALUE in the metadata field (got \"forward_compute_time "
               "1\")");
}

Test(import_bad, stage_id_field)
{
    expect_bad("n1 -- X -- " META " -- stage_id=-1\n",
               "g.txt:1: expected \"stage_id=N\" with N an integer >= 0 as the 4th field (got "
               "\"stage_id=-1\")");
    expect_bad("n1 -- X -- " META " -- stage=1\n",
               "g.txt:1: expected \"stage_id=N\" with N an integer >= 0 as the 4th field (got "
               "\"stage=1\")");
}

Test(import_bad, node_ids_and_descriptions)
{
    expect_bad("node 1 -- X -- " META "\n",
               "g.txt:1: expected a node id without spaces (got \"node 1\")");
    expect_bad("n1 --  -- " META "\n", "g.txt:1: expected a description (got \"\")");
    expect_bad("n1 -- X -- " META "\nn2 -- Y -- " META "\nn1 -- Z -- " META "\n",
               "g.txt:3: expected a unique node id (got \"n1\" again, first defined at line 1)");
    expect_bad(" n1 -- X -- " META "\n",
               "g.txt:1: expected a node line \"ID -- DESCRIPTION -- forward_compute_time=MS, "
               "backward_compute_time=MS, activation_size=BYTES, parameter_size=BYTES[ -- "
               "stage_id=N]\" or an edge line starting with a TAB (got a line starting with a "
               "space: \" n1 -- X -- forward_compute_time=1.500, backw...\")");
}

Test(import_bad, edge_lines)
{
    expect_bad("n1 -- X -- " META "\n\tn1 n2\n",
               "g.txt:2: expected an edge line \"<TAB>SRC_ID -- DST_ID\" (got \"n1 n2\")");
    expect_bad("n1 -- X -- " META "\n\tn1 -- n2 -- n3\n",
               "g.txt:2: expected an edge line \"<TAB>SRC_ID -- DST_ID\" (got \"n1 -- n2 -- "
               "n3\")");
    expect_bad("n1 -- X -- " META "\n\tn1 -- n9\n",
               "g.txt:2: expected an edge between node ids defined by node lines (got the "
               "unknown node \"n9\")");
}

Test(import_bad, self_loop_and_duplicate_edge)
{
    expect_bad("n1 -- X -- " META "\n\tn1 -- n1\n",
               "g.txt:2: expected an edge between two different nodes (got a self loop on n1)");
    expect_bad("n1 -- X -- " META "\nn2 -- X -- " META "\n\tn1 -- n2\n\tn1 -- n2\n",
               "g.txt:4: expected each edge once (got n1 -- n2 again, first at line 3)");
}

Test(import_bad, cycle_names_its_nodes)
{
    expect_bad("n0 -- X -- " META "\nn1 -- X -- " META "\nn2 -- X -- " META "\n"
               "n3 -- X -- " META "\n\tn0 -- n1\n\tn1 -- n2\n\tn2 -- n3\n\tn3 -- n1\n",
               "g.txt: expected an acyclic graph (got the cycle n1 -> n2 -> n3 -> n1)");
}

Test(import_bad, empty_and_binary_files)
{
    expect_bad("", "g.txt: expected at least one node line \"ID -- DESCRIPTION -- "
               "forward_compute_time=MS, backward_compute_time=MS, activation_size=BYTES, "
               "parameter_size=BYTES[ -- stage_id=N]\" (got none)");
    plumb_err err;
    cr_assert_null(pd_graph_parse("g.txt", "n1\0x", 4, &err));
    cr_assert_str_eq(err.msg, "g.txt: expected a text file (got a NUL byte)");
    cr_assert_null(pd_graph_read("/nonexistent/graph.txt", &err));
    cr_assert_str_eq(err.msg, "/nonexistent/graph.txt: cannot open: No such file or directory");
}

Test(import_bad, windows_line_endings_are_accepted)
{
    plumb_err err;
    pd_graph *g = parse("n1 -- X -- " META "\r\nn2 -- X -- " META "\r\n\tn1 -- n2\r\n", &err);
    cr_assert_not_null(g, "%s", err.msg);
    cr_assert_eq(g->nedges, 1);
    cr_assert_eq(g->nodes[1].parameter_bytes, 8);
    pd_graph_free(g);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

static int run_import(const char *a1, const char *a2, const char *a3, const char *a4,
                      const char *a5, const char *a6)
{
    char *argv[8] = {"import"};
    int argc = 1;
    const char *a[6] = {a1, a2, a3, a4, a5, a6};
    for (int i = 0; i < 6 && a[i]; i++) argv[argc++] = (char *)a[i];
    argv[argc] = NULL;
    return cmd_import(argc, argv);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void quiet(void)
{
    cr_redirect_stdout();
    cr_redirect_stderr();
}

Test(import_cli, exit_status_and_no_partial_output, .init = quiet)
{
    char dir[] = "/tmp/plumb-test-import-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char good[256], bad[256], out[256];
    snprintf(good, sizeof good, "%s/graph.txt", dir);
    snprintf(bad, sizeof bad, "%s/bad.txt", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    write_file(good, "n1 -- Input -- forward_compute_time=1, backward_compute_time=0, "
                     "activation_size=602112, parameter_size=0\nn2 -- Linear(3, 4) -- " META
                     "\n\tn1 -- n2\n");
    write_file(bad, "n1 -- Input -- forward_compute_time=x\n");
    /* bad input: exit 2, nothing written */
    cr_assert_eq(run_import("pipedream", bad, "-o", out, NULL, NULL), 2);
    cr_assert_neq(access(out, F_OK), 0, "partial output left at %s", out);
    /* good input; options after the positionals */
    cr_assert_eq(run_import("pipedream", good, "-o", out, "--name", "tiny"), 0);
    plumb_err err;
    profile *p = profile_load(out, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_str_eq(p->name, "tiny");
    cr_assert_eq(p->minibatch, 1);
    cr_assert_eq(p->nlayers, 2);
    /* a failing import leaves the previous output as it was */
    cr_assert_eq(run_import("pipedream", bad, "-o", out, NULL, NULL), 2);
    profile *q = profile_load(out, &err);
    cr_assert_not_null(q, "%s", err.msg);
    cr_assert(profile_equal(p, q));
    /* option errors */
    cr_assert_eq(run_import("pipedream", good, "-o", out, "--minibatch", "0"), 2);
    cr_assert_eq(run_import("pipedream", good, "-o", out, "--bogus", NULL), 2);
    cr_assert_eq(run_import("onnx", good, "-o", out, NULL, NULL), 2);
    cr_assert_eq(run_import("pipedream", good, NULL, NULL, NULL, NULL), 2);
    cr_assert_eq(run_import("pipedream", NULL, NULL, NULL, NULL, NULL), 2);
    cr_assert_eq(run_import("pipedream", good, "extra", "-o", out, NULL), 2);
    cr_assert_eq(run_import("--minibatch", "5", "--device", "A100", "pipedream", good), 2,
                 "no -o");
    cr_assert_eq(run_import("--help", NULL, NULL, NULL, NULL, NULL), 0);
    profile_free(p);
    profile_free(q);
    unlink(good);
    unlink(bad);
    unlink(out);
    cr_assert_eq(rmdir(dir), 0, "temporary files left in %s", dir);
}

/* ---- PipeDream's real files ---------------------------------------------------------------- */

/* Independent sums of a graph.txt, by searching for the key names in each node line. */
typedef struct src_sums {
    int nodes, edges;
    double fwd, bwd, act, par;
    int staged[8]; /* nodes per stage_id 0..7 */
} src_sums;

static double value_after(const char *line, const char *key)
{
    const char *k = strstr(line, key);
    cr_assert_not_null(k, "no %s in: %s", key, line);
    k += strlen(key);
    if (*k != '[') return strtod(k, NULL);
    double s = 0;
    for (const char *p = k + 1; *p && *p != ']';) {
        char *end;
        s += strtod(p, &end);
        p = end;
        while (*p == ';' || *p == ' ') p++;
    }
    return s;
}

static src_sums sums_of(const char *path)
{
    src_sums s;
    memset(&s, 0, sizeof s);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '\t') { s.edges++; continue; }
        if (line[0] == '\n') continue;
        s.nodes++;
        s.fwd += value_after(line, "forward_compute_time=");
        s.bwd += value_after(line, "backward_compute_time=");
        s.act += value_after(line, "activation_size=");
        s.par += value_after(line, "parameter_size=");
        const char *st = strstr(line, "stage_id=");
        if (st) {
            int k = atoi(st + 9);
            if (k >= 0 && k < 8) s.staged[k]++;
        }
    }
    free(line);
    fclose(f);
    return s;
}

static int rel_ok(double got, double want)
{
    return fabs(got - want) <= 1e-9 * fmax(fabs(want), 1.0);
}

/* Re-imports one file exactly as profiles/pipedream/regenerate.sh does and compares. */
static void check_one(const char *graph, const char *committed)
{
    src_sums s = sums_of(graph);
    pd_import_opts o = {0};
    if (!strstr(graph, "test_graphs/test")) o.minibatch = 0;
    else o.minibatch = 1; /* test.txt, test2.txt: no Input node */
    plumb_err err;
    profile *p = import_pipedream_opts(graph, &o, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(p->nlayers, s.nodes, "%s: layers", graph);
    cr_assert_eq(p->nedges, s.edges, "%s: edges", graph);
    cr_assert(rel_ok(profile_total_forward_ms(p), s.fwd), "%s: forward %.17g vs %.17g", graph,
              profile_total_forward_ms(p), s.fwd);
    cr_assert(rel_ok(profile_total_backward_ms(p), s.bwd), "%s: backward", graph);
    cr_assert(rel_ok(profile_total_activation_bytes(p), s.act), "%s: activations", graph);
    cr_assert(rel_ok(profile_total_parameter_bytes(p), s.par), "%s: parameters", graph);
    for (int k = 0; k < 8; k++) {
        int n = 0;
        for (int i = 0; p->stage_ids && i < p->nlayers; i++) n += p->stage_ids[i] == k;
        cr_assert_eq(n, s.staged[k], "%s: nodes in stage %d", graph, k);
    }
    profile *c = profile_load(committed, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert(profile_equal(p, c), "%s differs from the committed %s (rerun "
              "profiles/pipedream/regenerate.sh)", graph, committed);
    profile_free(p);
    profile_free(c);
}

Test(import_real, every_pipedream_graph_matches_source_and_committed_profile)
{
    DIR *d = opendir(SHARED);
    if (!d) cr_skip_test("%s is absent: PipeDream's original graph.txt files are not here", SHARED);
    int checked = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "runtime_configs")) continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s", SHARED, e->d_name);
        DIR *m = opendir(sub);
        if (!m) continue;
        int tests = !strcmp(e->d_name, "test_graphs");
        struct dirent *f;
        while ((f = readdir(m))) {
            size_t n = strlen(f->d_name);
            if (n < 5 || strcmp(f->d_name + n - 4, ".txt")) continue;
            char graph[1024], committed[1024];
            snprintf(graph, sizeof graph, "%s/%s", sub, f->d_name);
            if (tests)
                snprintf(committed, sizeof committed, "profiles/pipedream/test_graphs/%.*s.json",
                         (int)(n - 4), f->d_name);
            else if (!strcmp(f->d_name, "graph.txt"))
                snprintf(committed, sizeof committed, "profiles/pipedream/%s.json", e->d_name);
            else if (!strncmp(f->d_name, "graph_", 6))
                snprintf(committed, sizeof committed, "profiles/pipedream/%s_%.*s.json",
                         e->d_name, (int)(n - 4), f->d_name);
            else
                continue;
            check_one(graph, committed);
            checked++;
        }
        closedir(m);
    }
    closedir(d);
    cr_assert_geq(checked, 20, "only %d graph files found under %s", checked, SHARED);
}

Test(import_real, committed_profiles_have_pipedream_shape)
{
    /* these checks need no source files: they hold for the shipped copies themselves */
    plumb_err err;
    profile *p = profile_load("profiles/pipedream/vgg16.json", &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(p->nlayers, 41);
    cr_assert_eq(p->minibatch, 128);
    cr_assert_str_eq(p->layers[0].kind, "Input");
    /* VGG-16 is a chain except at its flatten, where the last MaxPool feeds both Size(0)
     * and View(-1): exactly one edge skips a layer */
    cr_assert_eq(profile_is_chain(p), 0);
    int skips = 0;
    for (int e = 0; e < p->nedges; e++) {
        if (p->edges[e].dst == p->edges[e].src + 1) continue;
        skips++;
        cr_assert_str_eq(p->layers[p->edges[e].src].kind, "MaxPool2d");
        cr_assert_str_eq(p->layers[p->edges[e].dst].kind, "View");
    }
    cr_assert_eq(skips, 1);
    cr_assert(rel_ok(profile_total_parameter_bytes(p), 553430176.0));
    profile_free(p);
    p = profile_load("profiles/pipedream/resnet50.json", &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(profile_is_chain(p), 0, "ResNet-50 has skip connections");
    cr_assert_eq(p->nedges, 193);
    profile_free(p);
}
