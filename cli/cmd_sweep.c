/* cmd_sweep.c: `plumb sweep -p PROFILE -c CLUSTER --gpus A..B`: capacity planning. For each
 * GPU count the cluster is resized and the native planner finds the best plan; prints its
 * simulated throughput, scaling efficiency, cost per million samples and the fewest GPUs
 * that reach a target; optionally as JSON and as an SVG plot (planner/sweep.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"
#include "planner/native.h"
#include "planner/sweep.h"

static const char *const usage =
    "usage: plumb sweep -p PROFILE -c CLUSTER --gpus A..B [options]\n"
    "Plans the model on A, A+1, ..., B GPUs of the cluster (resized: fewer devices in a\n"
    "server, or whole servers added or removed) and prints, for each count, the best plan's\n"
    "simulated throughput, its scaling efficiency against linear and its cost.\n"
    "  -p, --profile FILE      the model's profile (plumb-profile/1)\n"
    "  -c, --cluster FILE      the cluster (plumb-cluster/1)\n"
    "  --gpus A..B             GPU counts to try (also N for one count), 1..4096\n"
    "  --target SAMPLES_PER_S  report the fewest GPUs that reach this throughput\n"
    "  --price USD_PER_GPU_HOUR  cost per GPU-hour: adds USD per million samples\n"
    "  --schedule K|auto       schedule of every plan (default 1f1b-flush); auto ranks all\n"
    "  --microbatches M        microbatches per iteration (default: at least 2 x stages per\n"
    "                          replica, a multiple of the replica counts)\n"
    "  --microbatch-size N     samples per microbatch (default: the profile's minibatch)\n"
    "  --recompute             always recompute activations in the backward pass (default:\n"
    "                          only where nothing fits without)\n"
    "  --memory-limit GIB      device memory capacity at most GIB GiB\n"
    "  --optimizer O           sgd, momentum (default) or adam: its state counts in memory\n"
    "  --json                  print the sweep as JSON (plumb-sweep/1) instead of a table\n"
    "  --svg OUT.svg           write a plot of throughput and cost against GPUs\n"
    "  -h, --help              this help\n"
    "Exit status: 0 ok, 2 bad input (nothing written).\n";

enum { O_GPUS = 1000, O_TARGET, O_PRICE, O_SCHED, O_MB, O_MBS, O_RC, O_MEM, O_OPT, O_JSON,
       O_SVG };

/* "A..B" or "N" into lo, hi. */
static int parse_range(const char *s, int *lo, int *hi)
{
    const char *dots = strstr(s, "..");
    char a[32];
    if (!dots) {
        if (cli_int("sweep", "--gpus", s, 1, SWEEP_MAX_GPUS, lo)) return -1;
        *hi = *lo;
        return 0;
    }
    if ((size_t)(dots - s) >= sizeof a || dots == s) {
        cli_fail("sweep", "--gpus: expected A..B with 1 <= A <= B <= %d (got \"%s\")",
                 SWEEP_MAX_GPUS, s);
        return -1;
    }
    memcpy(a, s, (size_t)(dots - s));
    a[dots - s] = 0;
    if (cli_int("sweep", "--gpus", a, 1, SWEEP_MAX_GPUS, lo) ||
        cli_int("sweep", "--gpus", dots + 2, 1, SWEEP_MAX_GPUS, hi))
        return -1;
    if (*hi < *lo) {
        cli_fail("sweep", "--gpus: expected A..B with A <= B (got \"%s\")", s);
        return -1;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"profile", required_argument, 0, 'p'},
        {"cluster", required_argument, 0, 'c'},
        {"gpus", required_argument, 0, O_GPUS},
        {"target", required_argument, 0, O_TARGET},
        {"price", required_argument, 0, O_PRICE},
        {"schedule", required_argument, 0, O_SCHED},
        {"microbatches", required_argument, 0, O_MB},
        {"microbatch-size", required_argument, 0, O_MBS},
        {"recompute", no_argument, 0, O_RC},
        {"memory-limit", required_argument, 0, O_MEM},
        {"optimizer", required_argument, 0, O_OPT},
        {"json", no_argument, 0, O_JSON},
        {"svg", required_argument, 0, O_SVG},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    native_options o;
    native_options_init(&o);
    o.recompute = NATIVE_RECOMPUTE_AUTO; /* the best plan: recompute where it must */
    const char *ppath = NULL, *cpath = NULL, *svg = NULL;
    int lo = 0, hi = 0, json = 0, k;
    double target = 0, price = 0, gib = 0;
    optind = 0;
    int ch;
    while ((ch = cli_getopt("sweep", argc, argv, "hp:c:", longopts)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'p': ppath = optarg; break;
        case 'c': cpath = optarg; break;
        case O_GPUS:
            if (parse_range(optarg, &lo, &hi)) return 2;
            break;
        case O_TARGET:
            if (cli_num("sweep", "--target", optarg, 1, 1e12, &target)) return 2;
            break;
        case O_PRICE:
            if (cli_num("sweep", "--price", optarg, 1, 1e6, &price)) return 2;
            break;
        case O_SCHED:
            if (cli_schedule("sweep", optarg, &o.schedule)) return 2;
            break;
        case O_MB:
            if (cli_int("sweep", "--microbatches", optarg, 1, 1 << 20, &o.microbatches))
                return 2;
            break;
        case O_MBS:
            if (cli_int("sweep", "--microbatch-size", optarg, 1, 1 << 24, &o.microbatch_size))
                return 2;
            break;
        case O_RC: o.recompute = 1; break;
        case O_MEM:
            if (cli_num("sweep", "--memory-limit", optarg, 1, 1e6, &gib)) return 2;
            o.memory_limit_bytes = gib * 1073741824.0;
            break;
        case O_OPT:
            if ((k = optimizer_kind_parse(optarg)) < 0)
                return cli_fail("sweep", "--optimizer: expected sgd, momentum or adam (got "
                                "\"%s\")", optarg);
            o.optimizer = (optimizer_kind)k;
            break;
        case O_JSON: json = 1; break;
        case O_SVG: svg = optarg; break;
        default: return 2;
        }
    }
    if (optind != argc)
        return cli_fail("sweep", "unexpected argument \"%s\"; see plumb sweep --help",
                        argv[optind]);
    if (!ppath || !cpath || !lo)
        return cli_fail("sweep", "expected -p PROFILE, -c CLUSTER and --gpus A..B; see plumb "
                        "sweep --help");
    const char *inputs[2] = {ppath, cpath};
    if (svg && cli_output_ok("sweep", "--svg", svg, inputs, 2)) return 2;
    plumb_err err;
    err_clear(&err);
    int rc = 2;
    profile *p = profile_load(ppath, &err);
    cluster *c = p ? cluster_load(cpath, &err) : NULL;
    sweep_result r = {0};
    cJSON *doc = NULL;
    char *text = NULL, *svgtext = NULL;
    if (!p || !c) {
        err_print(&err);
        goto done;
    }
    if (planner_sweep(p, c, lo, hi, &o, target, price, &r, &err)) {
        fprintf(stderr, "plumb: %s + %s: %s\n", ppath, cpath, err.msg);
        goto done;
    }
    size_t svglen = 0;
    if (svg && !(svgtext = sweep_svg(&r, &svglen))) {
        fprintf(stderr, "plumb: sweep: out of memory\n");
        rc = 1;
        goto done;
    }
    if (json) {
        doc = sweep_to_json(&r);
        text = doc ? cJSON_Print(doc) : NULL;
        if (!text) {
            fprintf(stderr, "plumb: sweep: out of memory\n");
            rc = 1;
            goto done;
        }
    }
    if (svg && file_write_atomic(svg, svgtext, svglen, &err)) {
        err_print(&err);
        goto done;
    }
    if (json)
        printf("%s\n", text);
    else
        sweep_print(&r, stdout);
    if (svg && !json) printf("plot written to %s\n", svg);
    rc = 0;
done:
    free(text);
    free(svgtext);
    cJSON_Delete(doc);
    sweep_result_free(&r);
    profile_free(p);
    cluster_free(c);
    return rc;
}
