/* main.c: the plumb binary: dispatches to subcommands (cli/cmd_*.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand commands[] = {
    {"import", cmd_import, "convert a PipeDream graph.txt profile into a plumb profile"},
    {"info", cmd_info, "summarize a profile, cluster or plan file"},
    {"schedule", cmd_schedule, "print or convert a pipeline schedule's per-rank actions"},
    {"sim", cmd_sim, "simulate a plan on its cluster: throughput, bubbles, memory, timeline"},
    {"plan", cmd_plan, "split a profiled model into pipeline stages for a cluster"},
    {"sweep", cmd_sweep, "capacity planning: best plan per GPU count, cost, target"},
    {"ui", cmd_ui, "terminal dashboard for what-if planning"},
    {"train", cmd_train, "train a model for real with a plan (CPU or CUDA backend)"},
    {"profile", cmd_profile, "measure a model's layers on a backend and write a profile"},
    {"compare", cmd_compare, "compare a simulated report with a measured trace"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out,
            "plumb %s: plan, simulate and run pipeline-parallel training\n\n"
            "usage: plumb COMMAND [OPTIONS]   (plumb COMMAND --help for its options)\n\n"
            "commands:\n",
            PLUMB_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n  --help     this text (plumb help COMMAND: the command's)\n"
                 "  --version  print the version\n");
}

/* The help command (also --help, -h): "plumb help" prints the usage, "plumb help CMD" runs
 * CMD --help. A --help or -h among its arguments asks the same thing again and is skipped
 * ("plumb help --help", "plumb help sim --help"), and "help" names itself: the usage. Returns
 * the exit status: 0, or 2 after one error line for an unknown command or a second name. */
static int help_run(int argc, char **argv)
{
    char *name = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) continue;
        if (name) {
            fprintf(stderr,
                    "plumb: %s: expected at most one command (got \"%s\" too); see plumb --help\n",
                    argv[1], argv[i]);
            return 2;
        }
        name = argv[i];
    }
    if (!name || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(name, commands[i].name)) {
            char *args[] = {name, "--help", NULL};
            return commands[i].run(2, args);
        }
    fprintf(stderr, "plumb: %s: unknown command \"%s\"; see plumb --help\n", argv[1], name);
    return 2;
}

/* OpenBLAS starts its thread pool when the library loads, before main, and each pool
 * thread maps its 128 MiB buffer at once; under an address-space limit (ulimit -v) a thread
 * whose buffer cannot be mapped retries forever, so that even --version hung. Under such a
 * limit, when the user chose no thread count, plumb runs itself again with
 * OPENBLAS_NUM_THREADS=1 (no pool; the variable also keeps it from doing so twice) and
 * PLUMB_BLAS_DEFERRED=1, so that the CPU backend still gives its own pool every core when a
 * command trains or profiles (OpenBLAS itself stays at one thread there). Without a
 * limit the idle pool costs nothing and plumb starts once (a second start would cost about
 * 75 ms per command). Returns only when it does not run itself again. */
static void blas_pool_defer(char **argv)
{
    struct rlimit as, data;
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("GOTO_NUM_THREADS") ||
        getenv("OMP_NUM_THREADS") || getrlimit(RLIMIT_AS, &as) || getrlimit(RLIMIT_DATA, &data))
        return;
    if (as.rlim_cur == RLIM_INFINITY && data.rlim_cur == RLIM_INFINITY) return;
    /* the mark tells the CPU backend the count is plumb's, not the user's */
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) || setenv("PLUMB_BLAS_DEFERRED", "1", 1))
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_NUM_THREADS"); /* no /proc: go on with the pool as it is */
    unsetenv("PLUMB_BLAS_DEFERRED");
}

int main(int argc, char **argv)
{
    blas_pool_defer(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help");
    int version = !strcmp(argv[1], "--version") || !strcmp(argv[1], "-V");
    if (help) return help_run(argc, argv);
    if (version && argc > 2) { /* "plumb --version extra" printed and exited 0 */
        fprintf(stderr, "plumb: %s: expected no arguments (got \"%s\" too); see plumb --help\n",
                argv[1], argv[2]);
        return 2;
    }
    if (version) {
        printf("plumb %s\n", PLUMB_VERSION);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "plumb: unknown command \"%s\"; see plumb --help\n", argv[1]);
    return 2;
}
