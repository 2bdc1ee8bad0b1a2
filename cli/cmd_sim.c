/* cmd_sim.c: `plumb sim PLAN.json`: simulates a plan and prints its report (per-device
 * busy / idle / communication time and peak memory against capacity, throughput,
 * iteration time, bubble, bytes per link), optionally as JSON, a Chrome trace, an SVG
 * timeline or a text Gantt; with what-ifs (schedule, microbatches, straggler, bandwidth,
 * memory limit) it also runs the plan as written and shows what changed. */
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
#include "sim/sim.h"

static const char *const usage =
    "usage: plumb sim PLAN.json [options]\n"
    "Simulates the plan on its cluster and prints the report.\n"
    "  --schedule K           schedule instead of the plan's: gpipe, 1f1b-flush, pipedream,\n"
    "                         2bw, interleaved, zb-h1, zb-v, dualpipev\n"
    "  --microbatches M       microbatches per iteration instead of the plan's\n"
    "  --iterations N         iterations to simulate (default 3; raised to what the\n"
    "                         steady state needs: the fill and drain are left out)\n"
    "  --straggler DEV=FACTOR device DEV computes FACTOR times slower (e.g. 3=2)\n"
    "  --bandwidth LEVEL=GBPS level LEVEL (index or name) at GBPS gigabits/s; repeatable\n"
    "  --memory-limit GIB     device memory capacity at most GIB GiB\n"
    "  --json                 print the report as JSON (plumb-sim-report/1) instead\n"
    "  --trace T.json         write the timeline as Chrome trace-event JSON (Perfetto):\n"
    "                         each all-reduce once per replica on its collective track\n"
    "  --trace-hops           and every ring hop of the all-reduces on its link track\n"
    "                         (the trace's and the Gantt's link rows)\n"
    "                         (2 (r - 1) x r per bucket among r replicas: large)\n"
    "  --trace-limit GIB      refuse a trace estimated above GIB GiB (default 1)\n"
    "  --svg T.svg            write the timeline as an SVG picture\n"
    "  --gantt                print a text Gantt chart of the timeline\n"
    "  --width N              Gantt width in columns (default 100)\n"
    "  -h, --help             this help\n"
    "Exit status: 0 ok; 2 bad input (nothing written), or a plan that does not fit its\n"
    "devices' memory as written: the report is printed with those devices flagged, one\n"
    "line on stderr names the first, and no --trace/--svg file is written. A trace over\n"
    "--trace-limit is refused: one line on stderr, nothing else printed or written,\n"
    "exit 2. A what-if that does not fit is an answer, not bad input: flagged in the\n"
    "report, exit 0.\n";

enum { O_SCHED = 1000, O_MB, O_IT, O_STRAG, O_BW, O_MEM, O_JSON, O_TRACE, O_SVG, O_GANTT,
       O_WIDTH, O_HOPS, O_TLIMIT };

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

/* The trace of rep rendered within limit_gib GiB (timeline_chrome_render: the writer's own
 * count, exact): 0 with *text (caller frees) and *len; 2 after one line on stderr naming its
 * size and the options that narrow it when it is longer (nothing kept); 1 after "out of
 * memory". Fewer iterations narrow it only when the run did not have to raise them for its
 * steady state. */
static int trace_render(const char *trace, const sim_report *rep, int hops, double limit_gib,
                        char **text, size_t *len)
{
    double max = limit_gib * 1073741824.0; /* at least a byte: max 0 would mean no limit */
    int rc = timeline_chrome_render(rep->tl, max < 1 ? 1 : (size_t)max, text, len);
    if (rc < 0) {
        fprintf(stderr, "plumb: sim: out of memory\n");
        return 1;
    }
    if (rc == 0)
        return 0;
    int fewer_it = rep->iterations > 1 && rep->iterations <= rep->iterations_requested;
    cli_fail("sim", "--trace %s: expected a trace of at most %g GiB (got %.3g GiB, %zu bytes, "
             "%zu events); narrow it with %sfewer --microbatches%s, or raise --trace-limit GIB",
             trace, limit_gib, (double)*len / 1073741824.0, *len, rep->tl->n,
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
 * over the limit is refused by trace_render after the full run. Else 0. */
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
 * hops_too_big; also 1 when that run fails. 0: go on with the full timeline. */
static int hops_refused(const plan *pl, const sim_options *o, const char *path,
                        const char *trace, double limit_gib)
{
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

int cmd_sim(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"schedule", required_argument, 0, O_SCHED},
        {"microbatches", required_argument, 0, O_MB},
        {"iterations", required_argument, 0, O_IT},
        {"straggler", required_argument, 0, O_STRAG},
        {"bandwidth", required_argument, 0, O_BW},
        {"memory-limit", required_argument, 0, O_MEM},
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
    sim_malloc_for_one_run(); /* one plan, one run, then the process exits */
    sim_options o;
    sim_options_init(&o);
    const char *trace = NULL, *svg = NULL;
    const char *strag = NULL, *bws[CLUSTER_MAX_LEVELS * 4];
    int nbw = 0, json = 0, gantt = 0, width = 100, hops = 0;
    double gib = 0, trace_gib = 1;
    optind = 0;
    int c;
    while ((c = cli_getopt("sim", argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case O_SCHED:
            if ((o.schedule = sched_kind_parse(optarg)) < 0) {
                char kinds[160];
                return cli_fail("sim", "--schedule: expected %s (got \"%s\")",
                                sched_kind_list(kinds, sizeof kinds, ", "), optarg);
            }
            break;
        case O_MB:
            if (cli_int("sim", "--microbatches", optarg, 1, 1 << 24, &o.microbatches))
                return 2;
            break;
        case O_IT:
            if (cli_int("sim", "--iterations", optarg, 1, 100000, &o.iterations))
                return 2;
            break;
        case O_STRAG:
            strag = optarg;
            break;
        case O_BW:
            if (nbw == (int)(sizeof bws / sizeof bws[0]))
                return cli_fail("sim", "--bandwidth: too many (at most %d)", nbw);
            bws[nbw++] = optarg;
            break;
        case O_MEM:
            if (cli_num("sim", "--memory-limit", optarg, 1, 1e6, &gib))
                return 2;
            o.memory_limit_bytes = gib * 1073741824.0;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_TRACE:
            trace = optarg;
            break;
        case O_SVG:
            svg = optarg;
            break;
        case O_GANTT:
            gantt = 1;
            break;
        case O_HOPS:
            hops = 1;
            break;
        case O_TLIMIT:
            if (cli_num("sim", "--trace-limit", optarg, 1, 1e6, &trace_gib))
                return 2;
            break;
        case O_WIDTH:
            if (cli_int("sim", "--width", optarg, 20, 10000, &width))
                return 2;
            break;
        default:
            return 2;
        }
    }
    if (optind + 1 != argc)
        return cli_fail("sim", "expected one plan file (got %d arguments); see plumb sim "
                        "--help", argc - optind);
    const char *path = argv[optind];
    plumb_err err;
    err_clear(&err);
    plan *pl = plan_load(path, &err);
    if (!pl) {
        err_print(&err);
        return 2;
    }
    int rc = 2;
    sim_report *base = NULL, *rep = NULL;
    sim_changes ch = {0};
    char *texts[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    char name[256];
    const char *v;
    if (strag) {
        int dev;
        double f;
        if (split_eq(strag, name, sizeof name, &v)) {
            cli_fail("sim", "--straggler: expected DEV=FACTOR, e.g. 3=2 (got \"%s\")", strag);
            goto out;
        }
        if (cli_int("sim", "--straggler DEV", name, 0, pl->clus->ndevices - 1, &dev) ||
            cli_num("sim", "--straggler FACTOR", v, 1, 1e6, &f))
            goto out;
        o.straggler_device = dev;
        o.straggler_factor = f;
    }
    for (int i = 0; i < nbw; i++) {
        double g;
        if (split_eq(bws[i], name, sizeof name, &v)) {
            cli_fail("sim", "--bandwidth: expected LEVEL=GBPS, e.g. 1=25 or ethernet=25 "
                     "(got \"%s\")", bws[i]);
            goto out;
        }
        int lv = -1;
        for (int l = 0; l < pl->clus->nlevels; l++)
            if (strcmp(pl->clus->levels[l].name, name) == 0)
                lv = l;
        if (lv < 0) {
            char *end;
            long x = strtol(name, &end, 10);
            if (*end || end == name || x < 0 || x >= pl->clus->nlevels) {
                cli_fail("sim", "--bandwidth: expected a level index 0..%d or a level name "
                         "of cluster \"%s\" (got \"%s\")", pl->clus->nlevels - 1,
                         pl->clus->name, name);
                goto out;
            }
            lv = (int)x;
        }
        if (cli_num("sim", "--bandwidth GBPS", v, 1, BOUND_BW_BPS_MAX * 8 / 1e9, &g))
            goto out;
        if (g < BOUND_BW_BPS_MIN * 8 / 1e9) {
            cli_fail("sim", "--bandwidth GBPS: expected a number from %g to %g (1 kbit/s to "
                     "100 Tbit/s) (got \"%s\")", BOUND_BW_BPS_MIN * 8 / 1e9,
                     BOUND_BW_BPS_MAX * 8 / 1e9, v);
            goto out;
        }
        o.bandwidth_Bps[lv] = g * 1e9 / 8;
    }
    if (outputs_ok(path, pl, trace, svg))
        goto out;
    /* the ring hops (2 (r - 1) x r per bucket) only when asked for: the collective tracks
     * hold each all-reduce (the SVG draws no hops either way) */
    if (trace || svg || gantt)
        o.timeline = hops ? SIM_TIMELINE_FULL : SIM_TIMELINE_NO_RING_HOPS;
    if (o.schedule >= 0 && sched_kind_chunked((sched_kind)o.schedule) && pl->chunks < 2) {
        cli_fail("sim", "--schedule: %s needs a plan with 2 or more chunks (stages) per device "
                 "(the plan has %d; with one stage per device use 1f1b-flush)",
                 sched_kind_name((sched_kind)o.schedule), pl->chunks);
        goto out;
    }
    if (trace && hops && hops_refused(pl, &o, path, trace, trace_gib))
        goto out;
    rep = sim_run(pl, &o, &err);
    if (!rep) {
        fprintf(stderr, "plumb: %s: %s\n", path, err.msg);
        goto out;
    }
    if (sim_options_has_whatif(&o)) {
        sim_options b;
        sim_options_init(&b);
        b.iterations = o.iterations;
        base = sim_run(pl, &b, &err);
        if (!base) {
            fprintf(stderr, "plumb: %s: base run: %s\n", path, err.msg);
            goto out;
        }
        if (sim_compare(base, rep, &ch)) {
            fprintf(stderr, "plumb: sim: out of memory\n");
            rc = 1;
            goto out;
        }
    }
    /* every output is built in memory first (the trace within the limit); files are
     * written only when all are ready */
    if (trace && (rc = trace_render(trace, rep, hops, trace_gib, &texts[0], &lens[0])))
        goto out;
    rc = 2;
    if (svg && !(texts[1] = sim_svg_text(rep, &lens[1]))) {
        fprintf(stderr, "plumb: sim: out of memory\n");
        rc = 1;
        goto out;
    }
    char *jtext = NULL;
    if (json) {
        cJSON *j = sim_report_to_json(rep, base ? &ch : NULL, path);
        jtext = j ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (!jtext) {
            fprintf(stderr, "plumb: sim: out of memory\n");
            rc = 1;
            goto out;
        }
    }
    /* a plan that does not fit as written is bad input (README): the report still shows
     * where, no file is written, exit 2 */
    char nofit[PLUMB_ERR_MAX + 256];
    int fits = plan_fits(path, base ? base : rep, nofit, sizeof nofit);
    const char *paths[2] = {fits ? trace : NULL, fits ? svg : NULL};
    const char *data[2] = {texts[0], texts[1]};
    if (files_write_atomic(2, paths, data, lens, &err)) {
        err_print(&err);
        free(jtext);
        goto out;
    }
    if (json) {
        fputs(jtext, stdout);
        fputc('\n', stdout);
        free(jtext);
    } else {
        printf("plumb sim: %s\n", path);
        sim_print_report(rep, base ? &ch : NULL, stdout);
        if (trace && fits)
            printf("\ntrace written to %s (open in https://ui.perfetto.dev)\n", trace);
        if (svg && fits)
            printf("timeline written to %s\n", svg);
    }
    if (gantt) {
        FILE *g = json ? stderr : stdout;
        fputc('\n', g);
        sim_print_gantt(rep, width, g);
    }
    rc = 0;
    if (!fits) {
        fflush(stdout);
        fprintf(stderr, "%s\n", nofit);
        rc = 2;
    }
out:
    free(texts[0]);
    free(texts[1]);
    sim_changes_free(&ch);
    sim_report_free(base);
    sim_report_free(rep);
    plan_free(pl);
    return rc;
}
