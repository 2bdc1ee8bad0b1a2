/* cmd_compare.c: `plumb compare PREDICTED MEASURED`: prediction error of the simulator
 * against a real run, per stage and action kind, per kind, per stage and per iteration
 * (sim/compare.h). The prediction is a simulator trace (`plumb sim --trace`) or report
 * (`plumb sim --json`); the measurement a trace of `plumb train --trace`. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/compare.h"

static const char *const usage_text =
    "usage: plumb compare PREDICTED.json MEASURED.json [--json] [--median] [--skip N]\n"
    "\n"
    "Prints the predicted against the measured time of every kind of action (F, B, I, W,\n"
    "send_f, send_b, allreduce, step) per stage, per kind over all stages, the compute\n"
    "time per iteration of every stage and the time per iteration, with the relative\n"
    "error (predicted - measured) / measured, and the peak memory of the devices that\n"
    "run each set of stages where both files carry it. Both runs must be of the same plan.\n"
    "\n"
    "PREDICTED is a simulator trace (plumb sim PLAN --trace T.json) or a simulator report\n"
    "(plumb sim PLAN --json > R.json: compute, all-reduce and iteration times only);\n"
    "MEASURED is a trace written by plumb train MODEL PLAN --trace M.json (either side\n"
    "may be any of these; traces of both tools are read by the same reader).\n"
    "\n"
    "  --skip N     leave out the first N iterations of each trace (warm-up, pipeline\n"
    "               fill; at least one iteration is kept) (default 1)\n"
    "  --median     per action, compare the medians instead of the means (a loaded\n"
    "               machine's long tail of preempted actions weighs on the means)\n"
    "  --json       print the comparison as JSON (plumb-compare/1, docs/loop.md; it\n"
    "               holds both means and medians)\n"
    "  -h, --help   this text\n"
    "Exit status: 0 ok, 2 bad input (unreadable or malformed files, different plans).\n";

enum { O_JSON = 1000, O_SKIP, O_MEDIAN };

int cmd_compare(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, 0, O_JSON},
        {"skip", required_argument, 0, O_SKIP},
        {"median", no_argument, 0, O_MEDIAN},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int json = 0, skip = 1, median = 0, c;
    optind = 1;
    while ((c = cli_getopt("compare", argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case O_JSON: json = 1; break;
        case O_MEDIAN: median = 1; break;
        case O_SKIP: if (cli_int("compare", "--skip", optarg, 0, 1 << 30, &skip)) return 2; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return 2;
        }
    }
    if (argc - optind != 2)
        return cli_fail("compare", "expected PREDICTED.json and MEASURED.json (got %d file "
                        "arguments); see plumb compare --help", argc - optind);
    plumb_err err = {{0}};
    compare_side pred, meas;
    compare_result res;
    memset(&res, 0, sizeof res);
    memset(&meas, 0, sizeof meas);
    int rc = 2;
    if (compare_side_load(argv[optind], skip, &pred, &err)) {
        err_print(&err);
        return 2;
    }
    if (compare_side_load(argv[optind + 1], skip, &meas, &err) ||
        compare_sides(&pred, &meas, &res, &err)) {
        err_print(&err);
        goto done;
    }
    if (json) {
        cJSON *o = compare_to_json(&res);
        char *text = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (!text) {
            fprintf(stderr, "plumb: compare: out of memory\n");
            rc = 1;
            goto done;
        }
        printf("%s\n", text);
        free(text);
    } else {
        compare_print(&res, median, stdout);
    }
    rc = 0;
done:
    compare_result_free(&res);
    compare_side_free(&pred);
    compare_side_free(&meas);
    return rc;
}
