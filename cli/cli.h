/* cli.h: the subcommands of the plumb binary and small helpers they share for options.
 * Each subcommand lives in cli/cmd_<name>.c, takes argc/argv starting at its own name,
 * and returns the process exit status (0 ok, 1 failure at run time, 2 bad input). */
#ifndef PLUMB_CLI_H
#define PLUMB_CLI_H

#include <getopt.h>

#include "core/device.h"

#define PLUMB_VERSION "0.1.0"

int cmd_import(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_schedule(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_ui(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_compare(int argc, char **argv);

/* Prints "plumb: CMD: message" on one line to stderr and returns 2. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses an integer option value in [lo, hi]; on failure prints one line naming the option
 * and returns -1. */
int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, int *out);
/* Parses a finite number > 0 (when positive) or >= 0, and at most hi; -1 with one line on
 * failure. */
int cli_num(const char *cmd, const char *opt, const char *s, int positive, double hi,
            double *out);

/* Checks, before any work, that `path` (the value of option opt) can be written: its folder
 * exists and is writable, it is not a folder, a FIFO or a device (file_check_replaceable),
 * and it is not the same file as any of the
 * `ninputs` paths in inputs (NULL entries are skipped), which writing it would destroy.
 * 0, or 2 after printing one line naming the option and the path. */
int cli_output_ok(const char *cmd, const char *opt, const char *path, const char *const *inputs,
                  int ninputs);
/* Checks, before any work, that output `path` (the value of option opt) is not the profile
 * or the cluster file that the plan pl, loaded from plan_file, names (as plan_load found
 * them: relative to the plan's folder). Call it after cli_output_ok, which checks the rest
 * (the name, the folder, the plan file itself); this checks only those two files. 0, or 2
 * after printing one line naming the option and the path. */
struct plan;
int cli_plan_refs_ok(const char *cmd, const char *opt, const char *path, const char *plan_file,
                     const struct plan *pl);
/* Checks, before any work, that `dir` (the value of option opt) is a writable folder, or,
 * with create, that it can be made (it does not exist and its parent is a writable folder).
 * 0, or 2 after printing one line naming the option and the folder. */
int cli_folder_ok(const char *cmd, const char *opt, const char *dir, int create);

/* Parses a planner's `--schedule K|auto`: a schedule kind (core/plan.h) into *out, or -1
 * (NATIVE_SCHED_AUTO) for "auto". On failure prints one line listing the kinds and returns
 * -1. */
int cli_schedule(const char *cmd, const char *s, int *out);

/* Parses `--schedule K` where auto is not taken (plan --model, sweep --model): a schedule
 * kind into *out. On failure prints one line listing the kinds and returns -1. */
int cli_sched_kind(const char *cmd, const char *s, int *out);

/* Parses a device `--precision bf16|fp16|tf32|fp32|fp8` (core/device.h's dev_precision) into
 * *out. On failure prints one line naming the option and returns -1. */
int cli_precision(const char *cmd, const char *s, int *out);

/* Parses the value of `--grad-reduce` or `--optimizer-state` (opt names it): "fp32" or
 * "bf16" into *v (plan --model and sweep --model). Returns 0, or 2 after one line naming
 * opt. */
int cli_state_precision(const char *cmd, const char *opt, const char *arg, dev_precision *v);

/* Parses `--p2p overlap|sync` into *sync (1 for sync). On failure prints one line naming
 * the option and returns 2. */
int cli_p2p(const char *cmd, const char *s, int *sync);

/* Parses `--grad-sync overlap|end` into *end (1 for end). On failure prints one line naming
 * the option and returns 2. */
int cli_grad_sync(const char *cmd, const char *s, int *end);

/* Parses `--p2p-split scatter-gather|whole` into *whole (1 for whole). On failure prints
 * one line naming the option and returns 2. */
int cli_p2p_split(const char *cmd, const char *s, int *whole);

/* Parses `--cp C` (context-parallel ranks, 1 to 4096: what plumb plan --model, sweep
 * --model and ui --model take; the layout's own rules, flash attention and 2 C dividing
 * the sequence, are checked where it is laid out) into *cp. On failure prints one line
 * naming the option and returns -1. */
int cli_cp(const char *cmd, const char *s, int *cp);

/* The options of Megatron-Core's uneven pipeline splits (its layout string included) and of
 * FP8 primary weights that plumb plan --model and plumb ui --model take alike (docs/llm.md,
 * "Uneven splits" and "FP8 primary weights"): CLI_SPLIT_LONGOPTS, six struct option entries
 * for a longopts table (codes CLI_O_FP8PG .. CLI_O_LAYOUT, clear of the commands' own), and
 * cli_split_opt for their values. plumb sweep --model, which takes no uneven split, takes
 * the first of them alone: CLI_FP8PG_LONGOPT. */
enum { CLI_O_FP8PG = 1900, CLI_O_FIRST, CLI_O_LAST, CLI_O_ACC_EMB, CLI_O_ACC_LOSS,
       CLI_O_LAYOUT };
#define CLI_FP8PG_LONGOPT {"fp8-param-gather", no_argument, 0, CLI_O_FP8PG}
#define CLI_SPLIT_LONGOPTS                                                                    \
    CLI_FP8PG_LONGOPT,                                                                        \
    {"decoder-first-pipeline-num-layers", required_argument, 0, CLI_O_FIRST},                 \
    {"decoder-last-pipeline-num-layers", required_argument, 0, CLI_O_LAST},                   \
    {"account-for-embedding-in-pipeline-split", no_argument, 0, CLI_O_ACC_EMB},               \
    {"account-for-loss-in-pipeline-split", no_argument, 0, CLI_O_ACC_LOSS},                   \
    {"pipeline-layout", required_argument, 0, CLI_O_LAYOUT}

/* One of CLI_SPLIT_LONGOPTS (option code c, value arg) into o (the split: first_blocks,
 * last_blocks 1 to 2^20, account_embedding, account_loss, pipeline_layout: arg itself, kept,
 * after its syntax is checked by pplayout_parse) or *fp8pg (--fp8-param-gather); the
 * split's rules against the layout are layout3d_split's, --fp8-param-gather's
 * search3d_runtime_check's. 0, 2 after one line naming the option, or -1 when c is none of
 * them (nothing printed). */
struct layout3d_options;
int cli_split_opt(const char *cmd, int c, const char *arg, struct layout3d_options *o,
                  int *fp8pg);

/* Parses `--recompute none|selective|full` (core/plan.h's recompute_kind) into *out. On
 * failure prints one line naming the option and returns 2. */
int cli_recompute(const char *cmd, const char *s, int *out);

/* Parses `--tp-overlap none|backward|full` (core/plan.h's plan_tp_overlap) into *out. On
 * failure prints one line naming the option and returns 2. */
int cli_tp_overlap(const char *cmd, const char *s, int *out);

/* Parses `--attention standard|flash` (planner/llm_profile.h's llm_attention) into *out.
 * On failure prints one line naming the option and returns -1. */
int cli_attention(const char *cmd, const char *s, int *out);

/* Parses `--cross-entropy unfused|te|native` (planner/llm_profile.h's llm_cross_entropy: the
 * LM head's loss unfused in fp32, Transformer Engine's fused one or Megatron-Core's) into *out: what plumb
 * profile --model, plan --model, sweep --model and ui --model take alike. On failure prints
 * one line naming the option and returns -1. */
int cli_cross_entropy(const char *cmd, const char *s, int *out);

/* Parses `--grad-accum fused|unfused` (planner/llm_profile.h's llm_grad_accum: the weight
 * gradients accumulated by their GEMM, or added into the main gradients by a kernel per
 * tensor on every backward) into *out, as plumb profile --model, plan --model, sweep --model
 * and ui --model take it. On failure prints one line naming the option and returns -1. */
int cli_grad_accum(const char *cmd, const char *s, int *out);

/* The compute backend of `--backend NAME` and `--precision P` (fp32, tf32 or bf16; NULL:
 * the name's own): cuda with bf16 is "cuda-bf16", cpu with bf16 "cpu-bf16". NULL after
 * printing one line when the name is unknown or not built, the precision is unknown, the
 * two disagree (cuda-tf32 with bf16), or the backend lacks the precision (cpu and tf32). */
struct backend;
const struct backend *cli_backend(const char *cmd, const char *name, const char *precision);

/* getopt_long with plumb's error messages: returns the option, -1 at the end, or '?' after
 * printing "plumb: CMD: unknown option ...", "... needs a value", "... takes no value" or
 * "ambiguous option ...". An option's value "--help" or "-h" returns 'h' when longopts has
 * {"help", ..., 'h'} ("plumb plan --model --help"). Resets optind when called with a new
 * argv. */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts);

#endif
