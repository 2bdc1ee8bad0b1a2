/* cmd_profile.c: `plumb profile MODEL.json -o PROFILE.json`: measures every top-level layer
 * of a model on the CPU or CUDA backend (exec/profiler.h) and writes a plumb profile that
 * `plumb plan`, `plumb sim` and `plumb ui` read, with a table of the timings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "exec/backend.h"
#include "exec/model.h"
#include "exec/profiler.h"

static const char *const usage_text =
    "usage: plumb profile MODEL.json [--backend cpu|cuda] [options] -o PROFILE.json\n"
    "       plumb profile --model CONFIG.json -c CLUSTER.json [--tp T] ... -o PROFILE.json\n"
    "                     (a transformer's analytic profile: plumb profile --model --help)\n"
    "\n"
    "Measures every top-level layer of the model (a plumb-model/1 spec) on the backend and\n"
    "writes a profile (plumb-profile/1) for plumb plan / sim / ui: per layer the median\n"
    "forward time, the fused backward time and its input-gradient / weight-gradient\n"
    "split (for zero-bubble schedules), in ms per minibatch, each timed between two\n"
    "backend syncs after a warm-up; output activation bytes (fp32, whole minibatch),\n"
    "parameter bytes and forward FLOPs from the model's shapes. On a terminal, stderr\n"
    "shows the progress of the timing rounds.\n"
    "\n"
    "  -o, --output FILE  the profile to write (atomically); without it, only the table\n"
    "  --backend NAME     cpu, cpu-bf16, cuda, cuda-tf32 or cuda-bf16 (default cpu)\n"
    "  --precision P      fp32, tf32 or bf16 (--backend cuda --precision bf16 is cuda-bf16)\n"
    "  --device N         backend device index (default 0)\n"
    "  --batch N          samples per profiled minibatch (default 64); profile at the\n"
    "                     microbatch size you will train with, times scale linearly\n"
    "  --warmup N         untimed runs of every pass first (default 3)\n"
    "  --runs N           timed rounds of every pass; the median is kept (default 20;\n"
    "                     on a CPU shared with other work, 200 steadies the medians)\n"
    "  --workers N        time as one of N pipeline workers sharing this machine (the\n"
    "                     CPU gives each 1/N of its threads, as plumb train does)\n"
    "                     (default 1)\n"
    "  --seed S           seed of the random inputs (default 1)\n"
    "  --quiet            no table (and no progress line)\n"
    "  -h, --help         this text\n"
    "Exit status: 0 ok, 1 backend failure while measuring, 2 bad input or no such device\n"
    "(nothing written).\n";

enum {
    O_BACKEND = 1000, O_DEVICE, O_BATCH, O_WARMUP, O_RUNS, O_WORKERS, O_SEED, O_QUIET,
    O_PRECISION
};

static void print_table(const model *m, const profile *p, const prof_stats *st,
                        const prof_cfg *cfg)
{
    printf("plumb profile: %s on %s, minibatch %d samples, median of %d runs (%d warm-up), "
           "as 1 of %d workers\n", p->name, p->device, p->minibatch, cfg->runs, cfg->warmup,
           cfg->workers);
    printf("%-4s %-16s %-22s %11s %11s %11s %11s %13s %13s %12s\n", "#", "layer", "kind",
           "fwd (ms)", "bwd (ms)", "I (ms)", "W (ms)", "output (B)", "params (B)",
           "fwd spread");
    double tf = 0, tb = 0;
    for (int i = 0; i < p->nlayers; i++) {
        const profile_layer *L = &p->layers[i];
        double spread = st[i].forward_ms > 0
                            ? (st[i].forward_max_ms - st[i].forward_min_ms) / st[i].forward_ms
                            : 0;
        printf("%-4d %-16.16s %-22.22s %11.4f %11.4f %11.4f %11.4f %13.0f %13.0f %10.0f %%\n",
               i, L->name, L->kind, L->forward_ms, L->backward_ms, L->backward_input_ms,
               L->backward_weight_ms, L->activation_bytes, L->parameter_bytes, 100 * spread);
        tf += L->forward_ms;
        tb += L->backward_ms;
    }
    printf("total: forward %.4f ms, backward %.4f ms per %d-sample minibatch; %lld "
           "parameters (%.0f bytes)\n", tf, tb, p->minibatch, m->nparams,
           profile_total_parameter_bytes(p));
    printf("(fwd spread = (slowest - fastest) / median of the timed forward runs; I and W "
           "are the measured halves rescaled to sum to bwd)\n");
}

/* Shows the profiler's progress on one line of stderr (a terminal), redrawn when the
 * percentage changes; `user` holds the last percentage shown. */
static void show_progress(void *user, long done, long total)
{
    int *last = user, pct = total > 0 ? (int)(100 * done / total) : 100;
    if (pct == *last) return;
    *last = pct;
    fprintf(stderr, "\rplumb profile: timing the layers: %3d %% (%ld of %ld layer-rounds)",
            pct, done, total);
    if (done >= total) fputs("\r\033[K", stderr); /* done: leave the line clear */
    fflush(stderr);
}

/* 1 when the file at path parses as a transformer config (core/transformer.h). */
static int is_transformer_config(const char *path)
{
    plumb_err err = {{0}};
    cJSON *root = json_load_file(path, &err);
    int yes = root && transformer_json_is_config(root);
    cJSON_Delete(root);
    return yes;
}

/* The analytic profile of a transformer (cli/cmd_profile_llm.c). */
int cmd_profile_llm(int argc, char **argv);

int cmd_profile(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (strcmp(argv[i], "--model") == 0 || strncmp(argv[i], "--model=", 8) == 0)
            return cmd_profile_llm(argc, argv);
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},     {"backend", required_argument, 0, O_BACKEND},
        {"device", required_argument, 0, O_DEVICE}, {"batch", required_argument, 0, O_BATCH},
        {"warmup", required_argument, 0, O_WARMUP}, {"runs", required_argument, 0, O_RUNS},
        {"workers", required_argument, 0, O_WORKERS}, {"seed", required_argument, 0, O_SEED},
        {"quiet", no_argument, 0, O_QUIET},        {"help", no_argument, 0, 'h'},
        {"precision", required_argument, 0, O_PRECISION},
        {0, 0, 0, 0}};
    prof_cfg cfg;
    profiler_cfg_init(&cfg);
    const char *out = NULL, *bkname = "cpu", *precision = NULL;
    int quiet = 0, seed = 1, c;
    optind = 1;
    while ((c = cli_getopt("profile", argc, argv, "o:h", longopts)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case O_BACKEND: bkname = optarg; break;
        case O_PRECISION: precision = optarg; break;
        case O_DEVICE:
            if (cli_int("profile", "--device", optarg, 0, 1023, &cfg.device)) return 2;
            break;
        case O_BATCH:
            if (cli_int("profile", "--batch", optarg, 1, 1 << 20, &cfg.batch)) return 2;
            break;
        case O_WARMUP:
            if (cli_int("profile", "--warmup", optarg, 0, 100000, &cfg.warmup)) return 2;
            break;
        case O_RUNS:
            if (cli_int("profile", "--runs", optarg, 1, 100000, &cfg.runs)) return 2;
            break;
        case O_WORKERS:
            if (cli_int("profile", "--workers", optarg, 1, 1024, &cfg.workers)) return 2;
            break;
        case O_SEED:
            if (cli_int("profile", "--seed", optarg, 0, 2147483647, &seed)) return 2;
            break;
        case O_QUIET: quiet = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return 2;
        }
    }
    cfg.seed = (unsigned long long)seed;
    if (argc - optind != 1)
        return cli_fail("profile", "expected one MODEL.json (got %d file arguments); see plumb "
                        "profile --help", argc - optind);
    const char *input = argv[optind];
    if (out && cli_output_ok("profile", "-o", out, &input, 1)) return 2;
    plumb_err err = {{0}};
    const backend *bk = cli_backend("profile", bkname, precision);
    if (!bk) return 2;
    cfg.bk = bk;
    model *m = model_load(argv[optind], &err);
    if (!m) {
        if (is_transformer_config(input))
            return cli_fail("profile", "%s is a transformer config, not a plumb-model/1 spec; "
                            "its analytic profile: plumb profile --model %s -c CLUSTER.json",
                            input, input);
        err_print(&err);
        return 2;
    }
    /* before any allocation; the profiler's data is 4 batches (profiler_run) */
    if (model_check_batch(m, input, cfg.batch, 4 * cfg.batch, &err)) {
        err_print(&err);
        model_free(m);
        return 2;
    }
    /* a device that is not there (no GPU, wrong index) is the user's to fix: status 2 */
    bk_ctx *probe = bk->create(cfg.device, &err);
    if (!probe) {
        fprintf(stderr, "plumb: profile: --backend %s --device %d: cannot open the device: %s\n",
                bkname, cfg.device, err.msg);
        model_free(m);
        return 2;
    }
    bk->destroy(probe);
    if (!quiet && bk->note && bk->note()) fprintf(stderr, "plumb: profile: %s\n", bk->note());
    /* a long profile shows its progress where someone is watching: a terminal */
    int shown = -1;
    if (!quiet && isatty(STDERR_FILENO)) {
        cfg.progress = show_progress;
        cfg.progress_user = &shown;
    }
    prof_stats *st = NULL;
    profile *p = profiler_run(m, &cfg, &st, &err);
    int rc = 1;
    if (!p) goto fail;
    if (out && profile_save(p, out, &err)) {
        rc = 2; /* an output path that cannot be written */
        goto fail;
    }
    if (!quiet) print_table(m, p, st, &cfg);
    if (out && !quiet) printf("wrote %s (%d layers)\n", out, p->nlayers);
    rc = 0;
    goto done;
fail:
    err_print(&err);
done:
    free(st);
    profile_free(p);
    model_free(m);
    return rc;
}
