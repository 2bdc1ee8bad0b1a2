/* cmd_sim.c: `plumb sim PLAN.json`: simulates a plan and prints its report (per-device
 * busy / idle / communication time and peak memory against capacity, throughput,
 * iteration time, bubble, bytes per link), optionally as JSON, a Chrome trace, an SVG
 * timeline or a text Gantt; with what-ifs (schedule, microbatches, straggler, bandwidth,
 * memory limit, point-to-point and gradient-reduction runtime, the pipeline sends' split,
 * and a transformer plan's runtime settings: recompute and its checkpoints, ZeRO, tp
 * overlap, the parameter all-gather apart, FP8 primary weights, the gradients' and
 * optimizer state's element) it also runs the plan as written and shows what changed. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/bounds.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/schedule_traits.h"
#include "core/units.h"
#include "planner/search3d.h"
#include "sim/sim.h"

static const char *const usage =
    "usage: plumb sim PLAN.json [options]\n"
    "Simulates the plan on its cluster and prints the report.\n"
    "  --schedule K           schedule instead of the plan's: gpipe, 1f1b-flush, pipedream,\n"
    "                         2bw, interleaved, zb-h1, zb-v, dualpipev (refused where it\n"
    "                         cannot place the plan's stages per device)\n"
    "  --microbatches M       microbatches per iteration instead of the plan's\n"
    "  --iterations N         iterations to simulate (default 3; raised to what the\n"
    "                         steady state needs: the fill and drain are left out)\n"
    "  --straggler DEV=FACTOR device DEV computes FACTOR times slower (e.g. 3=2)\n"
    "  --bandwidth LEVEL=GBPS level LEVEL (index or name) at GBPS gigabits/s; repeatable\n"
    "  --memory-limit GIB     device memory capacity at most GIB GiB\n"
    "  --p2p overlap|sync     point-to-point transfers instead of the plan's \"p2p\":\n"
    "                         sync blocks as Megatron-LM's 2021-22 runtime (not with\n"
    "                         zb-v or dualpipev, nor pipedream or 2bw on replica counts\n"
    "                         that deadlock under it: docs/sim.md)\n"
    "  --grad-sync overlap|end  the data-parallel gradient reduction instead of the plan's\n"
    "                         \"grad_sync\": end reduces after the whole forward-backward\n"
    "                         loop (not with pipedream, 2bw or overlap_param_gather)\n"
    "  --p2p-split scatter-gather|whole  the pipeline sends at tp > 1 without sequence\n"
    "                         parallelism instead of the plan's \"p2p_split\": whole sends\n"
    "                         the whole tensor from every tensor rank (current\n"
    "                         Megatron-Core), scatter-gather 1 / tp per rank (plumb plan\n"
    "                         --model --p2p-split; docs/sim.md)\n"
    "  The runtime settings of plumb plan --model, each instead of the plan's field, with\n"
    "  plan --model's names, values and rules (docs/sim.md, \"Runtime what-ifs\"):\n"
    "  --recompute none|selective|full  (full from another kind: every block's input\n"
    "                         kept, as plan --model's default --checkpoint-layers 1;\n"
    "                         selective needs the profile's selective figures)\n"
    "  --checkpoint-layers K  full recomputation keeps every K-th block's input (0: the\n"
    "                         stage's input alone) instead of the plan's or --recompute\n"
    "                         full's; at most the blocks of a virtual stage\n"
    "  --zero 0|1             1: the optimizer state sharded over a stage's replicas\n"
    "  --tp-overlap none|backward|full  tensor-parallel collectives against the GEMMs\n"
    "                         (tp > 1)\n"
    "  --overlap-param-gather the parameter all-gather under the next forward (zero 1)\n"
    "  --fp8-param-gather     FP8 primary weights (precision fp8, zero 1; a transformer)\n"
    "  --no-overlap-param-gather, --no-fp8-param-gather  each off, on a plan that has it\n"
    "                         (--zero 0 on such a plan is refused until it is added)\n"
    "  --grad-reduce fp32|bf16  the gradients' element (bf16: precision bf16 or fp8)\n"
    "  --optimizer-state fp32|bf16  the optimizer state's element (likewise)\n"
    "  --json                 print the report as JSON (plumb-sim-report/1) instead\n"
    "  --trace T.json         write the timeline as Chrome trace-event JSON (Perfetto):\n"
    "                         each all-reduce once per replica on its collective track\n"
    "  --trace-hops           and every ring hop of the all-reduces on its link track\n"
    "                         (the trace's and the Gantt's link rows; only with --trace\n"
    "                         or --gantt)\n"
    "                         (2 (r - 1) x r per bucket among r replicas: large)\n"
    "  --trace-limit GIB      refuse a trace longer than GIB GiB (default 1; only with\n"
    "                         --trace)\n"
    "  --svg T.svg            write the timeline as an SVG picture\n"
    "  --gantt                print a text Gantt chart of the timeline\n"
    "  --width N              Gantt width in columns (default 100; only with --gantt)\n"
    "  -h, --help             this help\n"
    "Exit status: 0 ok; 2 bad input (nothing written), or a plan that does not fit its\n"
    "devices' memory as written: the report is printed with those devices flagged, one\n"
    "line on stderr names the first, and no --trace/--svg file is written. A trace over\n"
    "--trace-limit is refused: one line on stderr, nothing else printed or written,\n"
    "exit 2. A what-if that does not fit is an answer, not bad input: flagged in the\n"
    "report, exit 0.\n";

enum { O_SCHED = 1000, O_MB, O_IT, O_STRAG, O_BW, O_MEM, O_JSON, O_TRACE, O_SVG, O_GANTT,
       O_WIDTH, O_HOPS, O_TLIMIT, O_P2P, O_GSYNC, O_SPLIT, O_RC, O_ZERO, O_TPO, O_OPG,
       O_GRED, O_OSTATE, O_NO_OPG, O_NO_FP8PG, O_CKPT };

/* Splits "A=B" into a (copied to buf) and b. Returns 0 or -1. */
static int split_eq(const char *s, char *buf, size_t n, const char **b)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || !eq[1] || (size_t)(eq - s) >= n)
        return -1;
    memcpy(buf, s, (size_t)(eq - s));
    buf[eq - s] = 0;
    *b = eq + 1;
    return 0;
}

/* 1 when the plan as written (base, or rep without what-ifs) fits; else 0 and one line
 * `plumb: FILE: stages[S]: ...` naming the first device that does not, into msg. */
static int plan_fits(const char *path, const sim_report *r, char *msg, size_t n)
{
    if (r->fits)
        return 1;
    int bad = 0;
    const sim_device_report *first = NULL; /* r->fits is 0 only when a device does not fit */
    for (int i = 0; i < r->ndevices; i++)
        if (!r->devices[i].mem.fits) {
            bad++;
            if (!first)
                first = &r->devices[i];
        }
    char got[32], cap[32];
    snprintf(msg, n, "plumb: %s: stages[%d]: expected to fit the memory of its devices "
             "(got %s on device %d of capacity %s; %d device%s do%s not fit)",
             path, first->nstages > 0 ? first->stages[0] : 0,
             units_bytes(first->mem.total, got, sizeof got), first->device,
             units_bytes(first->mem.capacity, cap, sizeof cap), bad, bad == 1 ? "" : "s",
             bad == 1 ? "es" : "");
    return 0;
}

/* Checks, before any work, that the --trace and --svg files can be written and are none of
 * the inputs: the plan, the profile and cluster files it names, and each other. 0 or 2. */
static int outputs_ok(const char *path, const plan *pl, const char *trace, const char *svg)
{
    const char *inputs[2] = {path, trace};
    if (trace && svg && strcmp(trace, svg) == 0)
        return cli_fail("sim", "--svg %s: is the --trace file too; expected another file", svg);
    if (trace && (cli_output_ok("sim", "--trace", trace, inputs, 1) ||
                  cli_plan_refs_ok("sim", "--trace", trace, path, pl)))
        return 2;
    if (svg && (cli_output_ok("sim", "--svg", svg, inputs, 2) ||
                cli_plan_refs_ok("sim", "--svg", svg, path, pl)))
        return 2;
    return 0;
}

/* What the command line asked for (parse_args). */
typedef struct sim_args {
    sim_options o;
    const char *path;                            /* the plan file */
    const char *trace, *svg;                     /* output files, or NULL */
    const char *strag;                           /* --straggler DEV=FACTOR, or NULL */
    const char *bws[CLUSTER_MAX_LEVELS * 4];     /* --bandwidth LEVEL=GBPS, each */
    int nbw, json, gantt, width, hops;
    int width_set, tlimit_set;                   /* --width, --trace-limit given */
    double trace_gib;                            /* --trace-limit */
} sim_args;

/* Parses argv into a. Returns -1 to go on, 0 after --help, 2 after one line on stderr. */
static int parse_args(int argc, char **argv, sim_args *a)
{
    static const struct option longopts[] = {
        {"schedule", required_argument, 0, O_SCHED},
        {"microbatches", required_argument, 0, O_MB},
        {"iterations", required_argument, 0, O_IT},
        {"straggler", required_argument, 0, O_STRAG},
        {"bandwidth", required_argument, 0, O_BW},
        {"memory-limit", required_argument, 0, O_MEM},
        {"p2p", required_argument, 0, O_P2P},
        {"grad-sync", required_argument, 0, O_GSYNC},
        {"p2p-split", required_argument, 0, O_SPLIT},
        {"recompute", required_argument, 0, O_RC},
        {"checkpoint-layers", required_argument, 0, O_CKPT},
        {"zero", required_argument, 0, O_ZERO},
        {"tp-overlap", required_argument, 0, O_TPO},
        {"overlap-param-gather", no_argument, 0, O_OPG},
        CLI_FP8PG_LONGOPT,
        {"no-overlap-param-gather", no_argument, 0, O_NO_OPG},
        {"no-fp8-param-gather", no_argument, 0, O_NO_FP8PG},
        {"grad-reduce", required_argument, 0, O_GRED},
        {"optimizer-state", required_argument, 0, O_OSTATE},
        {"json", no_argument, 0, O_JSON},
        {"trace", required_argument, 0, O_TRACE},
        {"svg", required_argument, 0, O_SVG},
        {"gantt", no_argument, 0, O_GANTT},
        {"width", required_argument, 0, O_WIDTH},
        {"trace-hops", no_argument, 0, O_HOPS},
        {"trace-limit", required_argument, 0, O_TLIMIT},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    memset(a, 0, sizeof *a);
    sim_options_init(&a->o);
    a->width = 100;
    a->trace_gib = 1;
    double gib;
    optind = 0;
    int c;
    while ((c = cli_getopt("sim", argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case O_SCHED:
            if ((a->o.schedule = sched_kind_parse(optarg)) < 0) {
                char kinds[160];
                return cli_fail("sim", "--schedule: expected %s (got \"%s\")",
                                sched_kind_list(kinds, sizeof kinds, ", "), optarg);
            }
            break;
        case O_MB:
            if (cli_int("sim", "--microbatches", optarg, 1, 1 << 24, &a->o.microbatches))
                return 2;
            break;
        case O_IT:
            if (cli_int("sim", "--iterations", optarg, 1, 100000, &a->o.iterations))
                return 2;
            break;
        case O_STRAG: a->strag = optarg; break;
        case O_BW:
            if (a->nbw == (int)(sizeof a->bws / sizeof a->bws[0]))
                return cli_fail("sim", "--bandwidth: too many (at most %d)", a->nbw);
            a->bws[a->nbw++] = optarg;
            break;
        case O_MEM:
            if (cli_num("sim", "--memory-limit", optarg, 1, 1e6, &gib))
                return 2;
            a->o.memory_limit_bytes = gib * 1073741824.0;
            break;
        case O_P2P:
            if (cli_p2p("sim", optarg, &a->o.p2p_sync))
                return 2;
            break;
        case O_GSYNC:
            if (cli_grad_sync("sim", optarg, &a->o.grad_sync_end))
                return 2;
            break;
        case O_SPLIT: /* plan --model's parser: the same line */
            if (cli_p2p_split("sim", optarg, &a->o.p2p_whole))
                return 2;
            break;
        /* the runtime settings: plan --model's parsers, so the same lines */
        case O_RC:
            if (cli_recompute("sim", optarg, &a->o.recompute))
                return 2;
            break;
        case O_CKPT: /* plan --model's range; the stages' bound once the plan is read */
            if (cli_int("sim", "--checkpoint-layers", optarg, 0, 1 << 20,
                        &a->o.checkpoint_layers))
                return 2;
            break;
        case O_ZERO:
            if (cli_int("sim", "--zero", optarg, 0, 1, &a->o.zero))
                return 2;
            break;
        case O_TPO:
            if (cli_tp_overlap("sim", optarg, &a->o.tp_overlap))
                return 2;
            break;
        case O_OPG:
        case O_NO_OPG:
        case CLI_O_FP8PG:
        case O_NO_FP8PG: { /* on or off: one of the pair */
            int opg = c == O_OPG || c == O_NO_OPG, on = c == O_OPG || c == CLI_O_FP8PG;
            int *f = opg ? &a->o.overlap_param_gather : &a->o.fp8_param_gather;
            const char *name = opg ? "overlap-param-gather" : "fp8-param-gather";
            if (*f >= 0 && *f != on)
                return cli_fail("sim", "--%s%s: expected one of --%s and --no-%s (got both)",
                                on ? "" : "no-", name, name, name);
            *f = on;
            break;
        }
        case O_GRED:
        case O_OSTATE: {
            dev_precision e;
            if (cli_state_precision("sim", c == O_GRED ? "--grad-reduce" : "--optimizer-state",
                                    optarg, &e))
                return 2;
            *(c == O_GRED ? &a->o.grad_reduce : &a->o.optimizer_state) = (int)e;
            break;
        }
        case O_JSON: a->json = 1; break;
        case O_TRACE: a->trace = optarg; break;
        case O_SVG: a->svg = optarg; break;
        case O_GANTT: a->gantt = 1; break;
        case O_HOPS: a->hops = 1; break;
        case O_TLIMIT:
            if (cli_num("sim", "--trace-limit", optarg, 1, 1e6, &a->trace_gib))
                return 2;
            a->tlimit_set = 1;
            break;
        case O_WIDTH:
            if (cli_int("sim", "--width", optarg, 20, 10000, &a->width))
                return 2;
            a->width_set = 1;
            break;
        default:
            return 2;
        }
    }
    /* an option for an output not asked for is refused, not ignored */
    if (a->hops && !a->trace && !a->gantt)
        return cli_fail("sim", "--trace-hops: goes with --trace or --gantt (the ring hops "
                        "are drawn on their link rows; the SVG and the report have none)");
    if (a->tlimit_set && !a->trace)
        return cli_fail("sim", "--trace-limit: goes with --trace");
    if (a->width_set && !a->gantt)
        return cli_fail("sim", "--width: goes with --gantt");
    if (optind + 1 != argc)
        return cli_fail("sim", "expected one plan file (got %d arguments); see plumb sim "
                        "--help", argc - optind);
    a->path = argv[optind];
    return -1;
}

/* 1 when some layer of p has selective recomputation's figures (selective_recompute_ms). */
static int has_selective(const profile *p)
{
    for (int l = 0; l < p->nlayers; l++)
        if (p->layers[l].selective_recompute_ms >= 0)
            return 1;
    return 0;
}

/* The runtime what-ifs whose answer needs figures pl's profile lacks: selective
 * recomputation without the layers' selective_recompute_ms (the simulator would price it
 * as no recomputation at all), FP8 primary weights without transformer blocks (they are
 * the blocks' weights: nothing would change). 0, or 2 after one line on stderr. */
static int runtime_data_ok(const char *path, const plan *pl, const sim_options *w)
{
    if (w->recompute == RECOMPUTE_SELECTIVE && pl->recompute != RECOMPUTE_SELECTIVE &&
        !has_selective(pl->prof))
        return cli_fail("sim", "--recompute selective: expected a profile with selective "
                        "recomputation's figures (layers' selective_recompute_ms and "
                        "selective_saved_bytes, as plumb plan --model writes); %s's profile "
                        "\"%s\" has none", path, pl->prof->name ? pl->prof->name : "");
    if (w->fp8_param_gather > 0 && !pl->fp8_param_gather && !profile_is_transformer(pl->prof))
        return cli_fail("sim", "--fp8-param-gather: expected a transformer's plan (plumb plan "
                        "--model: FP8 primary weights are its blocks' weights); %s's profile "
                        "\"%s\" has no TransformerBlock layers", path,
                        pl->prof->name ? pl->prof->name : "");
    return 0;
}

/* For a rule line (msg) naming --overlap-param-gather or --fp8-param-gather where the
 * user did not type it (the plan's setting, not a what-if): what to add to run without it,
 * e.g. --zero 0 on a plan with overlap_param_gather. "" otherwise. */
static const char *plan_setting_hint(const plan *pl, const sim_options *w, const char *msg)
{
    if (w->overlap_param_gather < 0 && pl->overlap_param_gather &&
        !strncmp(msg, "--overlap-param-gather:", 23))
        return " (the plan's overlap_param_gather: add --no-overlap-param-gather)";
    if (w->fp8_param_gather < 0 && pl->fp8_param_gather &&
        !strncmp(msg, "--fp8-param-gather:", 19))
        return " (the plan's fp8_param_gather: add --no-fp8-param-gather)";
    return "";
}

/* The plan's runtime under the what-ifs (its schedule, p2p, grad_sync and runtime settings
 * replaced where asked: search3d_options_from_plan) checked as plumb plan --model checks
 * its options (search3d_runtime_check: end with an asynchronous schedule or with
 * overlap_param_gather, sync with zb-v or dualpipev, overlap_param_gather without zero 1,
 * fp8_param_gather without precision fp8 and zero 1, bf16 states without precision bf16
 * or fp8, tp_overlap at tp 1), the checkpoint interval the view keeps against its
 * recompute and the stages' blocks (plan_checkpoint_check), sync with an asynchronous
 * schedule on the stages' replica counts by the plan's rule (plan_sync_replicas_check),
 * then what the profile must hold (runtime_data_ok). 0, or 2 after one line on stderr. */
static int runtime_ok(const char *path, const plan *pl, const sim_options *w)
{
    if (w->schedule < 0 && w->p2p_sync < 0 && w->grad_sync_end < 0 &&
        !sim_options_has_runtime(w))
        return 0; /* the plan as written: its loader's checks */
    search3d_options so;
    search3d_options_from_plan(pl, w, &so);
    plumb_err err;
    err_clear(&err);
    if (search3d_runtime_check(&so, &err))
        return cli_fail("sim", "%s%s", err.msg, plan_setting_hint(pl, w, err.msg));
    /* the checkpoints the view keeps against the blocks of the plan's stages, as plan
     * --model checks --checkpoint-layers against its layout's */
    plan view;
    sim_options_view(pl, w, &view);
    if (plan_checkpoint_check(view.recompute, view.checkpoint_layers, plan_blocks_most(pl),
                              NULL, &err))
        return cli_fail("sim", "%s", err.msg);
    /* the stages' replica counts: the plan's rule (plan_sync_replicas_check) */
    sched_kind kind = w->schedule >= 0 ? (sched_kind)w->schedule : pl->schedule;
    int sync = w->p2p_sync >= 0 ? w->p2p_sync : pl->p2p_sync;
    if (sync && plan_sync_replicas_check(pl, kind, NULL, w->p2p_sync > 0 ? "--p2p" : "--schedule",
                                         &err))
        return cli_fail("sim", "%s", err.msg);
    return runtime_data_ok(path, pl, w);
}

/* --straggler and --bandwidth into a->o, checked against pl's cluster. 0, or 2 after one
 * line on stderr. */
static int apply_whatifs(const plan *pl, sim_args *a)
{
    char name[256];
    const char *v;
    if (a->strag) {
        int dev;
        double f;
        if (split_eq(a->strag, name, sizeof name, &v))
            return cli_fail("sim", "--straggler: expected DEV=FACTOR, e.g. 3=2 (got \"%s\")",
                            a->strag);
        if (cli_int("sim", "--straggler DEV", name, 0, pl->clus->ndevices - 1, &dev) ||
            cli_num("sim", "--straggler FACTOR", v, 1, 1e6, &f))
            return 2;
        a->o.straggler_device = dev;
        a->o.straggler_factor = f;
    }
    for (int i = 0; i < a->nbw; i++) {
        double g;
        if (split_eq(a->bws[i], name, sizeof name, &v))
            return cli_fail("sim", "--bandwidth: expected LEVEL=GBPS, e.g. 1=25 or "
                            "ethernet=25 (got \"%s\")", a->bws[i]);
        int lv = -1;
        for (int l = 0; l < pl->clus->nlevels; l++)
            if (strcmp(pl->clus->levels[l].name, name) == 0)
                lv = l;
        if (lv < 0) {
            char *end;
            long x = strtol(name, &end, 10);
            if (*end || end == name || x < 0 || x >= pl->clus->nlevels)
                return cli_fail("sim", "--bandwidth: expected a level index 0..%d or a level "
                                "name of cluster \"%s\" (got \"%s\")", pl->clus->nlevels - 1,
                                pl->clus->name, name);
            lv = (int)x;
        }
        if (cli_num("sim", "--bandwidth GBPS", v, 1, BOUND_BW_BPS_MAX * 8 / 1e9, &g))
            return 2;
        if (g < BOUND_BW_BPS_MIN * 8 / 1e9)
            return cli_fail("sim", "--bandwidth GBPS: expected a number from %g to %g (1 kbit/s "
                            "to 100 Tbit/s) (got \"%s\")", BOUND_BW_BPS_MIN * 8 / 1e9,
                            BOUND_BW_BPS_MAX * 8 / 1e9, v);
        a->o.bandwidth_Bps[lv] = g * 1e9 / 8;
    }
    return 0;
}

/* The refusal of a trace of len bytes over limit_gib GiB: one line on stderr naming its
 * size and the options that narrow it; returns 2. Fewer iterations narrow it only when
 * the run did not have to raise them for its steady state. */
static int trace_refuse(const char *trace, const sim_report *rep, int hops, double limit_gib,
                        size_t len)
{
    int fewer_it = rep->iterations > 1 && rep->iterations <= rep->iterations_requested;
    cli_fail("sim", "--trace %s: expected a trace of at most %g GiB (got %.3g GiB, %zu bytes, "
             "%zu events); narrow it with %sfewer --microbatches%s, or raise --trace-limit GIB",
             trace, limit_gib, (double)len / 1073741824.0, len, rep->tl->n,
             hops ? "no --trace-hops, " : "", fewer_it ? " or --iterations" : "");
    return 2;
}

/* The fewest bytes the trace writer spends on one ring hop: an all-reduce event of stage 0,
 * microbatch 0, iteration 0, at time 0 for 0 s moving 0 bytes on the link 0->1, counted by
 * the writer itself (the size of a one-link trace with that event less without it); 0 when
 * out of memory. */
static size_t hop_min_bytes(void)
{
    timeline *tl = timeline_new("sim");
    int link = tl ? timeline_track(tl, TL_TRACK_LINK, 0, 1, NULL) : -1;
    size_t without = link >= 0 ? timeline_chrome_size(tl) : 0, with = 0;
    tl_event e = {.track = link, .kind = TL_ALLREDUCE, .peer_stage = -1};
    if (without && !timeline_add(tl, &e))
        with = timeline_chrome_size(tl);
    timeline_free(tl);
    return with > without ? with - without : 0;
}

/* With --trace-hops, before the hops are simulated: 1 (after one line on stderr) when the
 * hops alone are over the limit at hop_min_bytes each, the hops being rep's links'
 * transfers (rep run without them) less the point-to-point ones (a hop split over free
 * lanes records one more event, so this counts no more than the full timeline holds).
 * Spares the full timeline's memory: ~48 bytes per hop, 2.7 GB for gnmt on 4096 H100s. A
 * bound, not the count: the hops' events do not exist yet; a trace under this bound but
 * over the limit is refused by the trace's writer after the full run. Else 0. */
static int hops_too_big(const char *trace, const sim_report *rep, double limit_gib)
{
    long long hops = 0;
    for (int i = 0; i < rep->nlinks; i++)
        hops += rep->links[i].transfers;
    for (size_t i = 0; i < rep->tl->n; i++) {
        const tl_event *e = &rep->tl->ev[i];
        hops -= (e->kind == TL_SEND_F || e->kind == TL_SEND_B) &&
                rep->tl->tracks[e->track].kind == TL_TRACK_LINK;
    }
    double low = (double)(hops > 0 ? hops : 0) * (double)hop_min_bytes();
    if (low <= limit_gib * 1073741824.0)
        return 0;
    cli_fail("sim", "--trace %s: expected a trace of at most %g GiB (got at least %.3g GiB, "
             "%lld ring hops); narrow it with no --trace-hops, fewer --microbatches or "
             "--iterations, or raise --trace-limit GIB", trace, limit_gib, low / 1073741824.0,
             hops);
    return 1;
}

/* --trace-hops: runs o without the hops first and refuses (1, one line on stderr) when
 * hops_too_big; also 1 when that run fails. 0: go on with the full timeline. A plan
 * without replicated stages has no data-parallel ring and so no hops: 0 at once, the
 * plan is simulated once (its trace is the default one). */
static int hops_refused(const plan *pl, const sim_options *o, const char *path,
                        const char *trace, double limit_gib)
{
    int rings = 0;
    for (int s = 0; s < pl->nstages; s++)
        rings |= pl->stages[s].replicas > 1;
    if (!rings)
        return 0;
    plumb_err err;
    err_clear(&err);
    sim_options lean = *o;
    lean.timeline = SIM_TIMELINE_NO_RING_HOPS;
    sim_report *rep = sim_run(pl, &lean, &err);
    if (!rep) {
        fprintf(stderr, "plumb: %s: %s\n", path, err.msg);
        return 1;
    }
    int refused = hops_too_big(trace, rep, limit_gib);
    sim_report_free(rep);
    return refused;
}

/* --schedule k (-1: none) against the plan's stages: a kind needs the plan's chunks per
 * device within its own range and, with 2 or more, the plan's placement of them (the
 * engine's layout checks named the file's fields instead). 0, or 2 after one line. */
static int schedule_fits(const plan *pl, int k)
{
    if (k < 0) return 0;
    const sched_traits *to = sched_traits_of((sched_kind)k), *from = sched_traits_of(pl->schedule);
    if (sched_kind_chunked((sched_kind)k) && pl->chunks < 2)
        return cli_fail("sim", "--schedule: %s needs a plan with 2 or more chunks (stages) per "
                        "device (the plan has %d; with one stage per device use 1f1b-flush)",
                        to->name, pl->chunks);
    if (pl->chunks < to->chunks_min || pl->chunks > to->chunks_max) {
        char want[48];
        if (to->chunks_min == to->chunks_max)
            snprintf(want, sizeof want, "%d", to->chunks_min);
        else
            snprintf(want, sizeof want, "%d to %d", to->chunks_min, to->chunks_max);
        return cli_fail("sim", "--schedule: %s runs %s stage%s per device (the plan has %d, "
                        "placed for %s)", to->name, want, to->chunks_max > 1 ? "s" : "",
                        pl->chunks, from->name);
    }
    if (pl->chunks > 1 && to->place != from->place)
        return cli_fail("sim", "--schedule: %s places a device's stages otherwise than the "
                        "plan's %s (%s); expected a kind that places them as %s does",
                        to->name, from->name, from->place == SCHED_PLACE_V ? "rank r holds "
                        "stages r and 2p - 1 - r" : "rank r holds stages r, r + p, ...",
                        from->name);
    return 0;
}

/* The runs: *rep as asked and, with what-ifs, *base as written and *ch what changed
 * (caller frees all three). 0, or 2 (1 out of memory) after one line on stderr. */
static int run_all(const plan *pl, sim_args *a, sim_report **rep, sim_report **base,
                   sim_changes *ch)
{
    plumb_err err;
    err_clear(&err);
    /* the ring hops (2 (r - 1) x r per bucket) only when asked for: the collective tracks
     * hold each all-reduce (the SVG draws no hops either way) */
    if (a->trace || a->svg || a->gantt)
        a->o.timeline = a->hops ? SIM_TIMELINE_FULL : SIM_TIMELINE_NO_RING_HOPS;
    if (schedule_fits(pl, a->o.schedule))
        return 2;
    if (runtime_ok(a->path, pl, &a->o))
        return 2;
    if (a->trace && a->hops && hops_refused(pl, &a->o, a->path, a->trace, a->trace_gib))
        return 2;
    if (!(*rep = sim_run(pl, &a->o, &err))) {
        fprintf(stderr, "plumb: %s: %s\n", a->path, err.msg);
        return 2;
    }
    if (!sim_options_has_whatif(&a->o))
        return 0;
    sim_options b;
    sim_options_init(&b);
    b.iterations = a->o.iterations;
    if (!(*base = sim_run(pl, &b, &err))) {
        fprintf(stderr, "plumb: %s: base run: %s\n", a->path, err.msg);
        return 2;
    }
    if (sim_compare(*base, *rep, ch)) {
        fprintf(stderr, "plumb: sim: out of memory\n");
        return 1;
    }
    return 0;
}

/* The JSON report, built in memory before any file is written: *jtext (NULL when not
 * asked; caller frees); the trace and the SVG are streamed by write_outputs instead. 0, or
 * 1 (out of memory) after one line on stderr. */
static int build_outputs(const sim_args *a, const sim_report *rep, const sim_report *base,
                         const sim_changes *ch, char **jtext)
{
    if (a->json) {
        cJSON *j = sim_report_to_json(rep, base ? ch : NULL, a->path);
        *jtext = j ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (!*jtext) {
            fprintf(stderr, "plumb: sim: out of memory\n");
            return 1;
        }
    }
    return 0;
}

/* Writes the files (only when the plan as written fits: the trace streamed into its
 * temporary file within the limit, then the SVG streamed, renamed together) and prints the report
 * and the Gantt. 0; 2 when the trace is over the limit (whether or not the plan fits:
 * nothing written or printed), a file cannot be written or the plan does not fit (one
 * line on stderr). */
static int write_outputs(const sim_args *a, const sim_report *rep,
                         const sim_report *base, const sim_changes *ch, const char *jtext)
{
    plumb_err err;
    err_clear(&err);
    /* a plan that does not fit as written is bad input (README): the report still shows
     * where, no file is written, exit 2 */
    char nofit[PLUMB_ERR_MAX + 256];
    int fits = plan_fits(a->path, base ? base : rep, nofit, sizeof nofit);
    timeline_chrome_file t = {.tl = rep->tl, .path = a->trace,
                              .max = timeline_chrome_max(a->trace_gib * 1073741824.0)};
    if (a->trace && !fits) {
        /* nothing is written: the writer's own count decides the refusal */
        if (!(t.len = timeline_chrome_size(rep->tl))) {
            fprintf(stderr, "plumb: sim: out of memory\n");
            return 1;
        }
        t.over = t.len > t.max;
    } else if (fits) {
        sim_svg_file sv = {.r = rep, .path = a->svg};
        file_out fo[2] = {{.path = a->trace, .write = timeline_chrome_file_write, .ctx = &t},
                          {.path = a->svg, .write = sim_svg_file_write, .ctx = &sv}};
        if (files_write_atomic_out(2, fo, &err) && !t.over) {
            err_print(&err);
            return 2;
        }
    }
    if (t.over)
        return trace_refuse(a->trace, rep, a->hops, a->trace_gib, t.len);
    if (a->json) {
        fputs(jtext, stdout);
        fputc('\n', stdout);
    } else {
        printf("plumb sim: %s\n", a->path);
        sim_print_report(rep, base ? ch : NULL, stdout);
        if (a->trace && fits)
            printf("\ntrace written to %s (open in https://ui.perfetto.dev)\n", a->trace);
        if (a->svg && fits)
            printf("timeline written to %s\n", a->svg);
    }
    if (a->gantt) {
        FILE *g = a->json ? stderr : stdout;
        fputc('\n', g);
        sim_print_gantt(rep, a->width, g);
    }
    if (fits)
        return 0;
    fflush(stdout);
    fprintf(stderr, "%s\n", nofit);
    return 2;
}

int cmd_sim(int argc, char **argv)
{
    sim_malloc_for_one_run(); /* one plan, one run, then the process exits */
    sim_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    plumb_err err;
    err_clear(&err);
    plan *pl = plan_load(a.path, &err);
    if (!pl) {
        err_print(&err);
        return 2;
    }
    sim_report *base = NULL, *rep = NULL;
    sim_changes ch = {0};
    char *jtext = NULL;
    if (!(rc = apply_whatifs(pl, &a)) && !(rc = outputs_ok(a.path, pl, a.trace, a.svg)) &&
        !(rc = run_all(pl, &a, &rep, &base, &ch)) &&
        !(rc = build_outputs(&a, rep, base, &ch, &jtext)))
        rc = write_outputs(&a, rep, base, &ch, jtext);
    free(jtext);
    sim_changes_free(&ch);
    sim_report_free(base);
    sim_report_free(rep);
    plan_free(pl);
    return rc;
}
