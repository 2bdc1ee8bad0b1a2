/* cmd_schedule.c: `plumb schedule`: builds a schedule's action IR (or imports PyTorch's
 * CSV form), optionally proves it deadlock-free, and prints the per-rank actions as a
 * table or as PyTorch's CSV, with the activations and weight versions each stage holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/plan.h"
#include "core/schedule.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: plumb schedule --kind K --stages P --microbatches M [options]\n"
            "       plumb schedule --plan PLAN.json [options]\n\n"
            "Lays out a pipeline schedule's actions per rank (F forward, B backward, I/W its\n"
            "input/weight halves, SEND/RECV, REDUCE_GRAD, STEP) in PyTorch's\n"
            "torch.distributed.pipelining spelling, and the activations and weight versions\n"
            "each stage holds at most.\n\n"
            "  --kind K            gpipe, 1f1b-flush, pipedream, 2bw, interleaved, zb-h1, zb-v,\n"
            "                      dualpipev\n"
            "  --stages P          pipeline ranks (stages per chunk)\n"
            "  --microbatches M    microbatches per iteration (per flush / minibatch)\n"
            "  --chunks V          virtual stages per rank (interleaved, default 2; zb-v and\n"
            "                      dualpipev need 2)\n"
            "  --iterations N      iterations to lay out (default 1)\n"
            "  --replicas LIST     replicas per stage, e.g. 1,2,1 (not with chunks)\n"
            "  --plan FILE         take kind, stages, replicas and devices from a plan\n"
            "  --import FILE.csv   read the actions from PyTorch's CSV (2.11's or 2.15's, one\n"
            "                      row per rank) instead of generating them; the options give\n"
            "                      the placement\n"
            "  --validate          prove the IR deadlock-free and well formed, even when a\n"
            "                      send blocks until its receive is reached\n"
            "  --buffered          with --validate: sends never block (the executor's and the\n"
            "                      simulator's semantics), for imported files\n"
            "  --csv               print PyTorch's CSV instead of the table\n"
            "  --steps             with --csv: also write plumb's STEP actions\n"
            "  --compute-only      with --csv: only F/B/I/W (PyTorch's compute_only form)\n"
            "  --pytorch VERSION   with --csv: the compute_comms form that PyTorch VERSION\n"
            "                      loads: 2.15 (the default; WAIT_SEND_F/WAIT_SEND_B after\n"
            "                      each send, WAIT_REDUCE_GRAD after each REDUCE_GRAD) or\n"
            "                      2.11 (no waits). --import reads both\n"
            "  --help              this text\n");
}

/* Parses "1,2,1" into n counts; -1 with one line on failure. */
static int parse_replicas(const char *s, int *out, int n)
{
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1024 || (i + 1 < n ? *end != ',' : *end != '\0')) {
            cli_fail("schedule", "--replicas: expected %d comma-separated counts from 1 to 1024, "
                     "one per stage (got \"%s\")", n, s);
            return -1;
        }
        out[i] = (int)v;
        p = end + 1;
    }
    return 0;
}

static void print_inflight(const schedule *s, const int *act, const int *ver, FILE *out)
{
    fprintf(out, "\n%-5s  %-12s  %-25s  %s\n", "stage", "workers", "max in-flight activations",
            "max weight versions");
    for (int st = 0; st < s->nstages; st++) {
        char ws[64];
        size_t off = 0;
        ws[0] = '\0';
        for (int j = 0; j < s->replicas[st] && off < sizeof ws - 8; j++)
            off += (size_t)snprintf(ws + off, sizeof ws - off, "%s%d", j ? "," : "",
                                    s->stage_workers[s->stage_first[st] + j]);
        char a[48], v[48];
        snprintf(a, sizeof a, "%d microbatch%s", act[st], act[st] == 1 ? "" : "es");
        snprintf(v, sizeof v, "%d version%s", ver[st], ver[st] == 1 ? "" : "s");
        fprintf(out, "%-5d  %-12s  %-25s  %s\n", st, ws, a, v);
    }
}

int cmd_schedule(int argc, char **argv)
{
    enum { O_KIND = 1000, O_STAGES, O_MB, O_CHUNKS, O_ITERS, O_REPS, O_PLAN, O_IMPORT,
           O_VALIDATE, O_CSV, O_STEPS, O_COMPUTE, O_BUFFERED, O_PYTORCH };
    static const struct option longopts[] = {
        {"kind", required_argument, NULL, O_KIND},
        {"stages", required_argument, NULL, O_STAGES},
        {"microbatches", required_argument, NULL, O_MB},
        {"chunks", required_argument, NULL, O_CHUNKS},
        {"iterations", required_argument, NULL, O_ITERS},
        {"replicas", required_argument, NULL, O_REPS},
        {"plan", required_argument, NULL, O_PLAN},
        {"import", required_argument, NULL, O_IMPORT},
        {"validate", no_argument, NULL, O_VALIDATE},
        {"buffered", no_argument, NULL, O_BUFFERED},
        {"csv", no_argument, NULL, O_CSV},
        {"steps", no_argument, NULL, O_STEPS},
        {"compute-only", no_argument, NULL, O_COMPUTE},
        {"pytorch", required_argument, NULL, O_PYTORCH},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    int kind = -1, ranks = 0, mb = 0, chunks = 0, iters = 1, validate = 0, csv = 0, buffered = 0;
    unsigned flags = 0;
    int pytorch = 0;
    const char *reps_arg = NULL, *plan_path = NULL, *import_path = NULL;
    int c;
    optind = 1;
    while ((c = cli_getopt("schedule", argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_KIND:
            kind = sched_kind_parse(optarg);
            if (kind < 0) {
                char kinds[160];
                return cli_fail("schedule", "--kind: expected %s (got \"%s\")",
                                sched_kind_list(kinds, sizeof kinds, ", "), optarg);
            }
            break;
        case O_STAGES:
            if (cli_int("schedule", "--stages", optarg, 1, 1024, &ranks)) return 2;
            break;
        case O_MB:
            if (cli_int("schedule", "--microbatches", optarg, 1, 100000, &mb)) return 2;
            break;
        case O_CHUNKS:
            if (cli_int("schedule", "--chunks", optarg, 1, 64, &chunks)) return 2;
            break;
        case O_ITERS:
            if (cli_int("schedule", "--iterations", optarg, 1, 10000, &iters)) return 2;
            break;
        case O_REPS: reps_arg = optarg; break;
        case O_PLAN: plan_path = optarg; break;
        case O_IMPORT: import_path = optarg; break;
        case O_VALIDATE: validate = 1; break;
        case O_BUFFERED: buffered = 1; break;
        case O_CSV: csv = 1; break;
        case O_STEPS: flags |= SCHED_CSV_STEPS; break;
        case O_COMPUTE: flags |= SCHED_CSV_COMPUTE_ONLY; break;
        case O_PYTORCH:
            if (!strcmp(optarg, "2.11")) flags |= SCHED_CSV_NO_WAITS;
            else if (strcmp(optarg, "2.15"))
                return cli_fail("schedule", "--pytorch: expected 2.11 or 2.15 (got \"%s\")",
                                optarg);
            pytorch = 1;
            break;
        default: return 2;
        }
    }
    if (optind < argc)
        return cli_fail("schedule", "unexpected argument \"%s\"; see plumb schedule --help",
                        argv[optind]);
    if ((flags || pytorch) && !csv)
        return cli_fail("schedule", "--steps, --compute-only and --pytorch go with --csv");
    if (buffered && !validate) return cli_fail("schedule", "--buffered goes with --validate");
    if (plan_path && (kind >= 0 || ranks || mb || chunks || reps_arg || import_path))
        return cli_fail("schedule", "--plan gives the kind, stages, microbatches and replicas; "
                        "use it with --iterations, --validate and --csv only");

    plumb_err err = {{0}};
    schedule *s = NULL;
    int *reps = NULL, status = 2;
    if (plan_path) {
        plan *pl = plan_load(plan_path, &err);
        if (!pl) {
            err_print(&err);
            return 2;
        }
        s = schedule_from_plan(pl, iters, &err);
        plan_free(pl);
        if (!s) {
            fprintf(stderr, "plumb: %s: %s\n", plan_path, err.msg);
            return 2;
        }
    } else {
        if (kind < 0) return cli_fail("schedule", "--kind is required; see plumb schedule --help");
        if (!ranks) return cli_fail("schedule", "--stages is required; see plumb schedule --help");
        if (!mb)
            return cli_fail("schedule", "--microbatches is required; see plumb schedule --help");
        if (!chunks) chunks = sched_kind_chunks((sched_kind)kind);
        int nstages = ranks * chunks;
        if (reps_arg) {
            reps = malloc((size_t)nstages * sizeof *reps);
            if (!reps) return cli_fail("schedule", "out of memory");
            if (parse_replicas(reps_arg, reps, nstages)) {
                free(reps);
                return 2;
            }
        }
        sched_spec sp = {kind, 0, nstages, chunks, mb, import_path ? 0 : iters, reps, NULL};
        if (import_path) {
            s = schedule_read_csv(import_path, &sp, &err);
            if (!s) {
                err_print(&err);
                goto done;
            }
        } else {
            s = schedule_generate(&sp, &err);
            if (!s) {
                cli_fail("schedule", "%s", err.msg);
                goto done;
            }
        }
    }
    if (validate &&
        schedule_validate_sem(s, buffered ? SCHED_SEM_BUFFERED : SCHED_SEM_RENDEZVOUS, &err)) {
        /* an imported file is bad input; a generated IR that fails is plumb's bug */
        if (import_path)
            fprintf(stderr, "plumb: %s: %s\n", import_path, err.msg);
        else
            cli_fail("schedule", "generated schedule failed validation: %s", err.msg);
        status = import_path ? 2 : 1;
        goto done;
    }
    int *act = calloc((size_t)s->nstages, sizeof *act), *ver = calloc((size_t)s->nstages, sizeof *ver);
    if (!act || !ver || schedule_inflight(s, act, ver, &err)) {
        free(act), free(ver);
        if (import_path)
            fprintf(stderr, "plumb: %s: %s\n", import_path, err.msg);
        else
            cli_fail("schedule", "%s", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    if (csv) {
        if (schedule_write_csv_flags(s, stdout, flags)) {
            free(act), free(ver);
            status = 1;
            goto done;
        }
    } else {
        schedule_print(s, stdout);
        print_inflight(s, act, ver, stdout);
        if (validate)
            printf("\nvalid: every send has its receive, F before B, I before W, weight "
                   "versions in order, deadlock-free %s\n",
                   buffered ? "with buffered sends" : "even with blocking sends");
    }
    free(act), free(ver);
    status = fflush(stdout) ? 1 : 0;
done:
    free(reps);
    schedule_free(s);
    return status;
}
