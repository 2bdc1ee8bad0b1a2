/* cmd_import.c: `plumb import pipedream GRAPH.txt -o PROFILE.json`: converts a PipeDream
 * graph.txt layer profile into a validated plumb profile, written atomically. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "core/bounds.h"
#include "core/import_pipedream.h"
#include "core/profile.h"

static void import_usage(FILE *out)
{
    fprintf(out,
            "usage: plumb import pipedream GRAPH.txt -o PROFILE.json [options]\n\n"
            "Converts a PipeDream graph.txt layer profile (the output of PipeDream's profiler)\n"
            "into a plumb profile (plumb-profile/1). Every node becomes a layer (Input nodes\n"
            "included), named by its node id, in a topological order; every edge is kept.\n\n"
            "options:\n"
            "  -o, --output FILE     profile to write (required; written atomically)\n"
            "  -n, --name NAME       model name (default: from the path, e.g. vgg16/graph.txt\n"
            "                        gives vgg16)\n"
            "  -b, --minibatch N     samples per profiled minibatch (default: inferred from the\n"
            "                        Input node: bytes / (4 x 3 x 224 x 224), or x 299 x 299;\n"
            "                        64 for translation profiles whose inputs have size 0)\n"
            "  -d, --device NAME     device the times were measured on (default: V100)\n"
            "  -h, --help            this text\n\n"
            "Prints the layer and edge counts and the totals (ms, bytes) on success.\n"
            "Bad input: one line naming FILE:LINE and what was expected, exit status 2.\n");
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"name", required_argument, NULL, 'n'},
        {"minibatch", required_argument, NULL, 'b'},
        {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pd_import_opts o = {0};
    const char *out = NULL;
    optind = 0;
    int c;
    while ((c = cli_getopt("import", argc, argv, "o:n:b:d:h", longopts)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'n':
            if (!*optarg) return cli_fail("import", "--name: expected a non-empty name");
            o.name = optarg;
            break;
        case 'b':
            if (cli_int("import", "--minibatch", optarg, 1, BOUND_BATCH_MAX, &o.minibatch)) return 2;
            break;
        case 'd':
            if (!*optarg) return cli_fail("import", "--device: expected a non-empty name");
            o.device = optarg;
            break;
        case 'h': import_usage(stdout); return 0;
        default: return 2;
        }
    }
    /* getopt_long permutes argv, so options may also follow the positional arguments */
    int npos = argc - optind;
    char **pos = argv + optind;
    if (npos > 2)
        return cli_fail("import", "unexpected argument \"%s\"; see plumb import --help",
                        pos[2]);
    if (npos == 0)
        return cli_fail("import", "expected \"pipedream GRAPH.txt -o PROFILE.json\"; see plumb "
                        "import --help");
    if (strcmp(pos[0], "pipedream") != 0)
        return cli_fail("import", "expected the source format \"pipedream\" (got \"%s\"); see "
                        "plumb import --help", pos[0]);
    if (npos < 2) return cli_fail("import", "expected a GRAPH.txt file after \"pipedream\"");
    if (!out) return cli_fail("import", "expected -o PROFILE.json (the file to write)");
    const char *inputs[1] = {pos[1]};
    if (cli_output_ok("import", "-o", out, inputs, 1)) return 2;

    plumb_err err;
    err_clear(&err);
    profile *p = import_pipedream_opts(pos[1], &o, &err);
    if (!p) {
        err_print(&err);
        return PLUMB_EXIT_BADINPUT;
    }
    if (profile_save(p, out, &err)) {
        err_print(&err);
        profile_free(p);
        return 1;
    }
    printf("plumb import: %s: %d layers, %d edges, minibatch %d, forward %.3f ms, backward "
           "%.3f ms, parameters %.0f bytes -> %s\n",
           p->name, p->nlayers, p->nedges, p->minibatch, profile_total_forward_ms(p),
           profile_total_backward_ms(p), profile_total_parameter_bytes(p), out);
    profile_free(p);
    return 0;
}
