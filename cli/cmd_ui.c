/* cmd_ui.c: `plumb ui`: the terminal dashboard for what-if planning, or with --snapshot
 * one frame of it as plain text (no terminal needed). Without files it opens the shipped
 * default example, examples/plans/vgg16-hybrid-pipedream.json (PipeDream's own 15-1 plan
 * for VGG-16 on its 16-GPU Cluster-A), looked for beside the binary, one folder up, and in
 * the current folder. */
#include "cli/cli.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bounds.h"
#include "core/device.h"
#include "core/schedule_traits.h"
#include "ui/app.h"
#include "ui/tui.h"

#define UI_DEFAULT_PLAN "examples/plans/vgg16-hybrid-pipedream.json"
#define UI_MAX_KEYS 4096

static void usage(FILE *out)
{
    fprintf(out,
            "usage: plumb ui [-p PROFILE -c CLUSTER | PLAN.json] [options]\n"
            "       plumb ui --model FILE -c CLUSTER --tp T --pp P --dp D --global-batch B\n"
            "                [--gpus N] [--cp C] [--microbatch-size b] [--interleave V]\n"
            "                [--recompute none|selective|full] [--checkpoint-layers K]\n"
            "                [--sequence-parallel] [--zero 0|1 [--overlap-param-gather]]\n"
            "                [--precision P] [--schedule KIND] [--seq-len S]\n"
            "                [--attention standard|flash] [--balance] [--p2p overlap|sync]\n"
            "                [--grad-sync overlap|end] [--p2p-split scatter-gather|whole]\n"
            "                [--tp-overlap none|backward|full] [--grad-reduce fp32|bf16]\n"
            "                [--optimizer-state fp32|bf16] [--fp8-param-gather]\n"
            "                [--decoder-first-pipeline-num-layers N]\n"
            "                [--decoder-last-pipeline-num-layers N]\n"
            "                [--account-for-embedding-in-pipeline-split]\n"
            "                [--account-for-loss-in-pipeline-split]\n"
            "                [--pipeline-layout STRING]\n"
            "                [--cross-entropy unfused|te|native]\n"
            "                [--grad-accum fused|unfused] [options]\n\n"
            "Terminal dashboard for what-if planning: the plan's stages, the pipeline\n"
            "timeline and the figures; keys change the device count, bandwidths, schedule,\n"
            "microbatches, memory limit, straggler and recomputation, and re-plan and\n"
            "re-simulate at once (? in the dashboard lists the keys). Without files it\n"
            "opens the shipped example %s.\n"
            "A plan file of plumb plan --model names its model and opens as --model with\n"
            "the file's layout and options would.\n"
            "With --model it lays a transformer out in 3D as plumb plan --model does (the\n"
            "same options and checks, docs/llm.md: plumb plan --model --help) and its keys\n"
            "change tp, pp, dp, cp (context parallelism, from --cp C: flash attention, 2 C\n"
            "dividing the sequence, tp x cp within a server), the microbatch size,\n"
            "interleave, recompute, sequence parallelism and ZeRO (docs/ui.md); the runtime\n"
            "options (--tp-overlap, --overlap-param-gather, --p2p, --grad-sync, --p2p-split,\n"
            "--grad-reduce, --optimizer-state, --attention, --balance, --fp8-param-gather,\n"
            "--cross-entropy, --grad-accum)\n"
            "and Megatron-Core's uneven split (--decoder-first/last-pipeline-num-layers,\n"
            "--account-for-embedding/loss-in-pipeline-split, --pipeline-layout) hold for\n"
            "every layout the keys reach, and the frame shows them; keys change five of\n"
            "them (k K tp overlap, j the all-gather, y p2p, E grad-sync, f attention); a\n"
            "key whose layout plan --model refuses (zero 0 under --fp8-param-gather, a pp\n"
            "the split does not take) is refused with its line.\n\n"
            "options:\n"
            "  -p, --profile FILE    a profile (plumb-profile/1), with -c\n"
            "  -c, --cluster FILE    a cluster (plumb-cluster/1), with -p or --model\n"
            "      --model FILE      a transformer (config.json or plumb-transformer/1),\n"
            "                        with -c and the layout and runtime options of plumb\n"
            "                        plan --model\n"
            "  -o, --out DIR         where s (save plan) and e (export) write (default .)\n"
            "      --planner NAME    who re-plans after a what-if: native (plumb's own,\n"
            "                        default), pipedream (PipeDream's partitioner) or even\n"
            "                        (equal compute per stage); not with --model nor a\n"
            "                        plan file that names its model\n"
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

/* The layout and runtime options (plumb plan --model's): option code, name, and the int
 * of o it sets with its range (ptr NULL: parsed by name below, with plan's parsers). */
enum { L_MODEL = 1300, L_GPUS, L_TP, L_PP, L_DP, L_GB, L_MBS, L_V, L_CKPT, L_ZERO, L_SEQ,
       L_SP, L_RC, L_PREC, L_SCHED, L_ATTN, L_BAL, L_P2P, L_GSYNC, L_TPO, L_OPG, L_GRED,
       L_OSTATE, L_SPLIT, L_CP, L_CE, L_GA };

/* One layout or runtime option c with value arg into o and rt. 0, 2 after one line, or
 * -1 for an option that is neither. */
static int layout_opt(int c, const char *arg, layout3d_options *o, ui_runtime *rt, int *seq)
{
    static const struct { int code; const char *name; size_t off; long lo, hi; } N[] = {
        { L_GPUS, "--gpus", offsetof(layout3d_options, gpus), 1, UI_MAX_GPUS },
        { L_TP, "--tp", offsetof(layout3d_options, tp), 1, 4096 },
        { L_PP, "--pp", offsetof(layout3d_options, pp), 1, 65536 },
        { L_DP, "--dp", offsetof(layout3d_options, dp), 1, UI_MAX_GPUS },
        { L_GB, "--global-batch", offsetof(layout3d_options, global_batch), 1, BOUND_BATCH_MAX },
        { L_MBS, "--microbatch-size", offsetof(layout3d_options, microbatch_size), 1, 1 << 20 },
        { L_V, "--interleave", offsetof(layout3d_options, interleave), 1, 64 },
        { L_CKPT, "--checkpoint-layers", offsetof(layout3d_options, checkpoint_layers), 0,
          1 << 20 },
        { L_ZERO, "--zero", offsetof(layout3d_options, zero), 0, 1 },
    };
    for (size_t i = 0; i < sizeof N / sizeof N[0]; i++)
        if (N[i].code == c)
            return cli_int("ui", N[i].name, arg, N[i].lo, N[i].hi, (int *)((char *)o + N[i].off))
                       ? 2 : 0;
    /* the uneven splits and FP8 primary weights: plan --model's parser */
    int v = cli_split_opt("ui", c, arg, o, &rt->fp8_param_gather);
    if (v >= 0) return v;
    switch (c) {
    case L_CP: return cli_cp("ui", arg, &o->cp) ? 2 : 0; /* plan --model's parser */
    case L_CE: return cli_cross_entropy("ui", arg, &o->cross_entropy) ? 2 : 0; /* likewise */
    case L_GA: return cli_grad_accum("ui", arg, &o->grad_accum) ? 2 : 0; /* likewise */
    case L_SEQ: return cli_int("ui", "--seq-len", arg, 1, 100000000, seq) ? 2 : 0;
    case L_SP: o->sequence_parallel = 1; return 0;
    case L_BAL: o->balance = 1; return 0;
    case L_OPG: rt->overlap_param_gather = 1; return 0;
    case L_RC:
        if (cli_recompute("ui", arg, &v)) return 2;
        o->recompute = v;
        return 0;
    case L_PREC:
        if (cli_precision("ui", arg, &v)) return 2;
        o->precision = (dev_precision)v;
        return 0;
    case L_SCHED: return cli_sched_kind("ui", arg, &o->schedule) ? 2 : 0;
    case L_ATTN:
        if (cli_attention("ui", arg, &v)) return 2;
        o->attention = v;
        return 0;
    case L_P2P: return cli_p2p("ui", arg, &o->p2p_sync) ? 2 : 0;
    case L_GSYNC: return cli_grad_sync("ui", arg, &o->grad_sync_end) ? 2 : 0;
    case L_SPLIT: return cli_p2p_split("ui", arg, &o->p2p_whole) ? 2 : 0;
    case L_TPO: return cli_tp_overlap("ui", arg, &rt->tp_overlap) ? 2 : 0;
    case L_GRED: return cli_state_precision("ui", "--grad-reduce", arg, &o->grad_reduce) ? 2 : 0;
    case L_OSTATE:
        return cli_state_precision("ui", "--optimizer-state", arg, &o->optimizer_state) ? 2 : 0;
    }
    return -1;
}

int cmd_ui(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "profile", required_argument, NULL, 'p' }, { "cluster", required_argument, NULL, 'c' },
        { "out", required_argument, NULL, 'o' },     { "snapshot", required_argument, NULL, 'S' },
        { "keys", required_argument, NULL, 'K' },    { "mono", no_argument, NULL, 'M' },
        { "planner", required_argument, NULL, 'P' }, { "model", required_argument, NULL, L_MODEL },
        { "gpus", required_argument, NULL, L_GPUS }, { "tp", required_argument, NULL, L_TP },
        { "pp", required_argument, NULL, L_PP },     { "dp", required_argument, NULL, L_DP },
        { "cp", required_argument, NULL, L_CP },
        { "global-batch", required_argument, NULL, L_GB },
        { "microbatch-size", required_argument, NULL, L_MBS },
        { "interleave", required_argument, NULL, L_V },
        { "checkpoint-layers", required_argument, NULL, L_CKPT },
        { "zero", required_argument, NULL, L_ZERO }, { "seq-len", required_argument, NULL, L_SEQ },
        { "sequence-parallel", no_argument, NULL, L_SP },
        { "recompute", required_argument, NULL, L_RC },
        { "precision", required_argument, NULL, L_PREC },
        { "schedule", required_argument, NULL, L_SCHED },
        { "attention", required_argument, NULL, L_ATTN },
        { "cross-entropy", required_argument, NULL, L_CE },
        { "grad-accum", required_argument, NULL, L_GA },
        { "balance", no_argument, NULL, L_BAL },     { "p2p", required_argument, NULL, L_P2P },
        { "grad-sync", required_argument, NULL, L_GSYNC },
        { "p2p-split", required_argument, NULL, L_SPLIT },
        { "tp-overlap", required_argument, NULL, L_TPO },
        { "overlap-param-gather", no_argument, NULL, L_OPG },
        { "grad-reduce", required_argument, NULL, L_GRED },
        { "optimizer-state", required_argument, NULL, L_OSTATE },
        CLI_SPLIT_LONGOPTS, /* plan --model's: the uneven splits, --fp8-param-gather */
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
    };
    const char *model = NULL;
    layout3d_options lo;
    layout3d_options_init(&lo);
    ui_runtime rt = { 0, 0, 0 };
    lo.microbatch_size = 1;
    int seq = 0, nlayout = 0, r;
    const char *prof = NULL, *clus = NULL, *out = ".", *snap = NULL, *keyspec = NULL;
    int mono = 0, planner = UI_PLANNER_NATIVE, planner_given = 0, c;
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
            planner_given = 1;
            if (planner < 0)
                return cli_fail("ui", "--planner: expected native, pipedream or even (got \"%s\")",
                                optarg);
            break;
        case 'h': usage(stdout); return 0;
        case L_MODEL: model = optarg; break;
        default:
            if ((r = layout_opt(c, optarg, &lo, &rt, &seq)) < 0) return 2;
            if (r) return r;
            nlayout++;
        }
    }
    lo.seq = seq;
    const char *planf = NULL;
    if (optind < argc) planf = argv[optind++];
    if (optind < argc) return cli_fail("ui", "expected at most one plan file (got \"%s\" too)", argv[optind]);
    if (model && (planf || prof))
        return cli_fail("ui", "expected --model FILE or a plan file or -p PROFILE, not two");
    if (model && !clus) return cli_fail("ui", "expected -c CLUSTER.json with --model");
    if (model && planner_given)
        return cli_fail("ui", "--planner: expected no planner with --model (its layouts are "
                        "laid out as plumb plan --model lays them out)");
    if (model && !lo.global_batch) return cli_fail("ui", "expected --global-batch B with --model");
    if (!model && nlayout)
        return cli_fail("ui", "expected --model FILE with the layout options (--tp, --pp, ...)");
    plumb_err rte;
    err_clear(&rte);
    if (model && ui_runtime_check(&lo, &rt, lo.tp, &rte)) /* plan --model's check */
        return cli_fail("ui", "%s", rte.msg);
    if (planf && (prof || clus))
        return cli_fail("ui", "expected a plan file or -p PROFILE -c CLUSTER, not both");
    if (!model && !planf && (!prof != !clus))
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
    if (!planf && !prof && !model) {
        find_default(dplan, sizeof dplan);
        planf = dplan;
    }
    ui_app *a = malloc(sizeof *a);
    if (a && model) { /* a refused model, cluster or layout: one line, exit 2 */
        plumb_err e;
        err_clear(&e);
        if (ui_app_open_model(a, model, clus, &lo, &rt, out, &e)) {
            free(a);
            free(keys);
            return cli_fail("ui", "%s", e.msg);
        }
    } else if (!a || ui_app_open(a, prof, clus, planf, out, planner)) {
        free(a);
        free(keys);
        return cli_fail("ui", "out of memory");
    }
    if (planner_given && a->loaded && a->base.model) { /* as --model refuses it */
        ui_app_free(a);
        free(a);
        free(keys);
        return cli_fail("ui", "--planner: expected no planner with %s, a plan file that names "
                        "its model (its layouts are laid out as plumb plan --model lays them "
                        "out)", planf);
    }
    int rc = 0;
    if (snap && !a->loaded) /* a batch run: the file's one line, not a frame saying it */
        rc = cli_fail("ui", "%s", a->load_err);
    else if (snap) {
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
