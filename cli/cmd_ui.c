/* cmd_ui.c: `plumb ui`: the terminal dashboard for what-if planning, or with --snapshot
 * one frame of it as plain text (no terminal needed). Without files it opens the shipped
 * default example, examples/plans/vgg16-hybrid-pipedream.json (PipeDream's own 15-1 plan
 * for VGG-16 on its 16-GPU Cluster-A), looked for beside the binary, one folder up, and in
 * the current folder. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ui/app.h"
#include "ui/tui.h"

#define UI_DEFAULT_PLAN "examples/plans/vgg16-hybrid-pipedream.json"
#define UI_MAX_KEYS 4096

static void usage(FILE *out)
{
    fprintf(out,
            "usage: plumb ui [-p PROFILE -c CLUSTER | PLAN.json] [options]\n\n"
            "Terminal dashboard for what-if planning: the plan's stages, the pipeline\n"
            "timeline and the figures; keys change the GPU count, bandwidths, schedule,\n"
            "microbatches, memory limit, straggler and recomputation, and re-plan and\n"
            "re-simulate at once (? in the dashboard lists the keys). Without files it\n"
            "opens the shipped example %s.\n\n"
            "options:\n"
            "  -p, --profile FILE    a profile (plumb-profile/1), with -c\n"
            "  -c, --cluster FILE    a cluster (plumb-cluster/1), with -p\n"
            "  -o, --out DIR         where s (save plan) and e (export) write (default .)\n"
            "      --planner NAME    who re-plans after a what-if: native (plumb's own,\n"
            "                        default), pipedream (PipeDream's partitioner) or even\n"
            "                        (equal compute per stage)\n"
            "      --snapshot WxH    print the frame after --keys as plain text and exit\n"
            "                        (W >= 1, H >= 1; the full layout needs 80x24)\n"
            "      --keys KEYS       keys to press first: characters, and <up> <down> <left>\n"
            "                        <right> <pgup> <pgdn> <home> <end> <esc> <tab> <lt>\n"
            "      --mono            no colours (also with NO_COLOR or a colourless TERM)\n"
            "  -h, --help            this text\n",
            UI_DEFAULT_PLAN);
}

/* Finds the default example beside the executable, one folder up, or in the current
 * folder; writes its path (the plain relative path when it is nowhere, so that the UI shows
 * the load error). */
static void find_default(char *path, size_t n)
{
    char exe[4000];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dirs[3];
    int nd = 0;
    char d0[4096], d1[4200];
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(d0, sizeof d0, "%s", exe);
        snprintf(d1, sizeof d1, "%s/..", exe);
        dirs[nd++] = d0;
        dirs[nd++] = d1;
    }
    dirs[nd++] = ".";
    for (int i = 0; i < nd; i++) {
        snprintf(path, n, "%s/%s", dirs[i], UI_DEFAULT_PLAN);
        if (access(path, R_OK) == 0) return;
    }
    snprintf(path, n, "%s", UI_DEFAULT_PLAN);
}

static int parse_size(const char *s, int *w, int *h)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return -1;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || *end || a < 1 || b < 1 || a > 4096 || b > 4096) return -1;
    *w = (int)a;
    *h = (int)b;
    return 0;
}

int cmd_ui(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "profile", required_argument, NULL, 'p' }, { "cluster", required_argument, NULL, 'c' },
        { "out", required_argument, NULL, 'o' },     { "snapshot", required_argument, NULL, 'S' },
        { "keys", required_argument, NULL, 'K' },    { "mono", no_argument, NULL, 'M' },
        { "planner", required_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
    };
    const char *prof = NULL, *clus = NULL, *out = ".", *snap = NULL, *keyspec = NULL;
    int mono = 0, planner = UI_PLANNER_NATIVE, c;
    optind = 0;
    while ((c = cli_getopt("ui", argc, argv, "p:c:o:h", longopts)) != -1) {
        switch (c) {
        case 'p': prof = optarg; break;
        case 'c': clus = optarg; break;
        case 'o': out = optarg; break;
        case 'S': snap = optarg; break;
        case 'K': keyspec = optarg; break;
        case 'M': mono = 1; break;
        case 'P':
            planner = ui_planner_parse(optarg);
            if (planner < 0)
                return cli_fail("ui", "--planner: expected native, pipedream or even (got \"%s\")",
                                optarg);
            break;
        case 'h': usage(stdout); return 0;
        default: return 2;
        }
    }
    const char *planf = NULL;
    if (optind < argc) planf = argv[optind++];
    if (optind < argc) return cli_fail("ui", "expected at most one plan file (got \"%s\" too)", argv[optind]);
    if (planf && (prof || clus))
        return cli_fail("ui", "expected a plan file or -p PROFILE -c CLUSTER, not both");
    if (!planf && (!prof != !clus))
        return cli_fail("ui", "expected both -p PROFILE and -c CLUSTER (got only %s)",
                        prof ? "-p" : "-c");
    /* s and e write into the -o folder: a missing or read-only one is refused before work */
    if (strcmp(out, ".") != 0 && cli_folder_ok("ui", "-o", out, 0)) return 2;
    int w = 0, h = 0;
    if (snap && parse_size(snap, &w, &h))
        return cli_fail("ui", "--snapshot: expected WIDTHxHEIGHT like 120x40, each 1 to 4096 "
                        "(got \"%s\")", snap);
    int *keys = malloc(UI_MAX_KEYS * sizeof *keys), nkeys = 0;
    if (!keys) return cli_fail("ui", "out of memory");
    if (keyspec) {
        plumb_err e;
        err_clear(&e);
        nkeys = ui_keys_parse(keyspec, keys, UI_MAX_KEYS, &e);
        if (nkeys < 0) {
            free(keys);
            return cli_fail("ui", "%s", e.msg);
        }
    }
    char dplan[4400];
    if (!planf && !prof) {
        find_default(dplan, sizeof dplan);
        planf = dplan;
    }
    ui_app *a = malloc(sizeof *a);
    if (!a || ui_app_open(a, prof, clus, planf, out, planner)) {
        free(a);
        free(keys);
        return cli_fail("ui", "out of memory");
    }
    int rc = 0;
    if (snap) {
        char *text = ui_app_snapshot(a, w, h, keys, nkeys);
        if (!text) rc = cli_fail("ui", "out of memory");
        else fputs(text, stdout);
        free(text);
    } else {
        rc = ui_tui_run(a, mono, keys, nkeys);
    }
    ui_app_free(a);
    free(a);
    free(keys);
    return rc;
}
