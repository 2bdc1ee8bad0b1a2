/* cmd_common.c: option helpers shared by the subcommands. */
#include "cli/cli.h"
#include "core/device.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/schedule_traits.h"
#include "exec/backend.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "planner/native.h"
#include "core/pplayout.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "plumb: %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

/* The folder of path (".", "/" or the part before the last slash) into dir. */
static void parent_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* 0 when dir is a writable folder, else 2 after one line about opt's value path. */
static int writable_folder(const char *cmd, const char *opt, const char *path, const char *dir)
{
    struct stat d;
    if (stat(dir, &d) != 0 || !S_ISDIR(d.st_mode))
        return cli_fail(cmd, "%s %s: folder %s does not exist; expected an existing folder", opt,
                        path, dir);
    if (access(dir, W_OK) != 0)
        return cli_fail(cmd, "%s %s: folder %s is not writable", opt, path, dir);
    return 0;
}

/* 0 when output path (opt's value) is none of the ninputs files (NULL entries skipped),
 * else 2 after one line naming the input it is. */
static int not_an_input(const char *cmd, const char *opt, const char *path,
                        const char *const *inputs, int ninputs)
{
    struct stat out, in;
    if (stat(path, &out) != 0) return 0; /* a new file is no input */
    for (int i = 0; i < ninputs; i++)
        if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == out.st_dev &&
            in.st_ino == out.st_ino)
            return cli_fail(cmd, "%s %s: is the input %s; expected another file (writing it "
                            "would destroy the input)", opt, path, inputs[i]);
    return 0;
}

int cli_output_ok(const char *cmd, const char *opt, const char *path, const char *const *inputs,
                  int ninputs)
{
    struct stat out;
    if (!*path) return cli_fail(cmd, "%s: expected a file name (got \"\")", opt);
    if (stat(path, &out) == 0 && S_ISDIR(out.st_mode))
        return cli_fail(cmd, "%s %s: is a folder; expected a file name", opt, path);
    plumb_err e;
    err_clear(&e);
    if (file_check_replaceable(path, &e)) return cli_fail(cmd, "%s %s", opt, e.msg);
    if (not_an_input(cmd, opt, path, inputs, ninputs)) return 2;
    char dir[4096];
    parent_of(path, dir, sizeof dir);
    return writable_folder(cmd, opt, path, dir);
}

int cli_plan_refs_ok(const char *cmd, const char *opt, const char *path, const char *plan_file,
                     const plan *pl)
{
    char *prof = pl->profile_ref ? plan_ref_path(plan_file, pl->profile_ref) : NULL;
    char *clus = pl->cluster_ref ? plan_ref_path(plan_file, pl->cluster_ref) : NULL;
    const char *inputs[2] = {prof, clus};
    int rc = (pl->profile_ref && !prof) || (pl->cluster_ref && !clus)
                 ? cli_fail(cmd, "out of memory")
                 : not_an_input(cmd, opt, path, inputs, 2);
    free(prof);
    free(clus);
    return rc;
}

int cli_folder_ok(const char *cmd, const char *opt, const char *dir, int create)
{
    struct stat d;
    if (!*dir) return cli_fail(cmd, "%s: expected a folder (got \"\")", opt);
    if (stat(dir, &d) == 0) {
        if (!S_ISDIR(d.st_mode))
            return cli_fail(cmd, "%s %s: is not a folder; expected a folder", opt, dir);
        return writable_folder(cmd, opt, dir, dir);
    }
    if (!create)
        return cli_fail(cmd, "%s %s: folder does not exist; expected an existing folder", opt,
                        dir);
    char parent[4096];
    parent_of(dir, parent, sizeof parent);
    return writable_folder(cmd, opt, dir, parent);
}

int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_fail(cmd, "%s: expected an integer from %ld to %ld (got \"%s\")", opt, lo, hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_num(const char *cmd, const char *opt, const char *s, int positive, double hi,
            double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* decimal only: strtod also reads hexadecimal ("0x10" is 16) */
    int bad = errno || end == s || *end || strpbrk(s, "xX") || !isfinite(v) ||
              (positive ? !(v > 0) : !(v >= 0)) || v > hi;
    if (bad) {
        /* a value below the smallest normal double ("5e-324") underflows: say so rather
         * than call a positive number not > 0 */
        int tiny = errno == ERANGE && fabs(v) <= DBL_MIN && end != s && !*end;
        cli_fail(cmd, "%s: expected a%s number %s and at most %.15g (got \"%s\"%s)", opt,
                 strpbrk(s, "xX") ? " decimal" : "", positive ? "> 0" : ">= 0", hi, s,
                 tiny ? ", too small to represent" : "");
        return -1;
    }
    *out = v;
    return 0;
}

/* A schedule kind into *out, or with auto_ok "auto" (NATIVE_SCHED_AUTO); else one line
 * listing them and -1. */
static int schedule_of(const char *cmd, const char *s, int auto_ok, int *out)
{
    if (auto_ok && !strcmp(s, "auto")) {
        *out = NATIVE_SCHED_AUTO;
        return 0;
    }
    int k = sched_kind_parse(s);
    if (k < 0) {
        char kinds[160];
        cli_fail(cmd, "--schedule: expected %s%s (got \"%s\")",
                 sched_kind_list(kinds, sizeof kinds, ", "), auto_ok ? " or auto" : "", s);
        return -1;
    }
    *out = k;
    return 0;
}

int cli_schedule(const char *cmd, const char *s, int *out)
{
    return schedule_of(cmd, s, 1, out);
}

int cli_sched_kind(const char *cmd, const char *s, int *out)
{
    return schedule_of(cmd, s, 0, out);
}

int cli_precision(const char *cmd, const char *s, int *out)
{
    int v = dev_precision_parse(s);
    if (v < 0) {
        cli_fail(cmd, "--precision: expected bf16, fp16, tf32, fp32 or fp8 (got \"%s\")", s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_state_precision(const char *cmd, const char *opt, const char *arg, dev_precision *v)
{
    if (strcmp(arg, "fp32") && strcmp(arg, "bf16"))
        return cli_fail(cmd, "%s: expected fp32 or bf16 (got \"%s\")", opt, arg);
    *v = strcmp(arg, "bf16") ? DEV_FP32 : DEV_BF16;
    return 0;
}

int cli_p2p(const char *cmd, const char *s, int *sync)
{
    if (strcmp(s, "overlap") && strcmp(s, "sync"))
        return cli_fail(cmd, "--p2p: expected overlap or sync (got \"%s\")", s);
    *sync = !strcmp(s, "sync");
    return 0;
}

int cli_grad_sync(const char *cmd, const char *s, int *end)
{
    if (strcmp(s, "overlap") && strcmp(s, "end"))
        return cli_fail(cmd, "--grad-sync: expected overlap or end (got \"%s\")", s);
    *end = !strcmp(s, "end");
    return 0;
}

int cli_p2p_split(const char *cmd, const char *s, int *whole)
{
    if (strcmp(s, "scatter-gather") && strcmp(s, "whole"))
        return cli_fail(cmd, "--p2p-split: expected scatter-gather or whole (got \"%s\")", s);
    *whole = !strcmp(s, "whole");
    return 0;
}

int cli_cp(const char *cmd, const char *s, int *cp)
{
    return cli_int(cmd, "--cp", s, 1, 4096, cp);
}

int cli_split_opt(const char *cmd, int c, const char *arg, layout3d_options *o, int *fp8pg)
{
    switch (c) {
    case CLI_O_FP8PG: *fp8pg = 1; return 0;
    case CLI_O_FIRST:
        return cli_int(cmd, "--decoder-first-pipeline-num-layers", arg, 1, 1 << 20,
                       &o->split.first_blocks) ? 2 : 0;
    case CLI_O_LAST:
        return cli_int(cmd, "--decoder-last-pipeline-num-layers", arg, 1, 1 << 20,
                       &o->split.last_blocks) ? 2 : 0;
    case CLI_O_ACC_EMB: o->split.account_embedding = 1; return 0;
    case CLI_O_ACC_LOSS: o->split.account_loss = 1; return 0;
    case CLI_O_LAYOUT: {
        plumb_err err = {{0}};
        pplayout *l = pplayout_parse(arg, &err); /* the syntax now, the model's rules later */
        if (!l) return cli_fail(cmd, "%s", err.msg);
        pplayout_free(l);
        o->pipeline_layout = arg;
        return 0;
    }
    }
    return -1;
}

int cli_recompute(const char *cmd, const char *s, int *out)
{
    int v = recompute_kind_parse(s);
    if (v < 0)
        return cli_fail(cmd, "--recompute: expected none, selective or full (got \"%s\")", s);
    *out = v;
    return 0;
}

int cli_tp_overlap(const char *cmd, const char *s, int *out)
{
    int v = plan_tp_overlap_parse(s);
    if (v < 0)
        return cli_fail(cmd, "--tp-overlap: expected none, backward or full (got \"%s\")", s);
    *out = v;
    return 0;
}

int cli_attention(const char *cmd, const char *s, int *out)
{
    llm_attention a;
    if (llm_attention_parse(s, &a)) {
        cli_fail(cmd, "--attention: expected standard or flash (got \"%s\")", s);
        return -1;
    }
    *out = (int)a;
    return 0;
}

int cli_grad_accum(const char *cmd, const char *s, int *out)
{
    llm_grad_accum ga;
    if (llm_grad_accum_parse(s, &ga)) {
        cli_fail(cmd, "--grad-accum: expected fused or unfused (got \"%s\")", s);
        return -1;
    }
    *out = (int)ga;
    return 0;
}

int cli_cross_entropy(const char *cmd, const char *s, int *out)
{
    llm_cross_entropy ce;
    if (llm_cross_entropy_parse(s, &ce)) {
        cli_fail(cmd, "--cross-entropy: expected unfused, te or native (got \"%s\")", s);
        return -1;
    }
    *out = (int)ce;
    return 0;
}

const backend *cli_backend(const char *cmd, const char *name, const char *precision)
{
    static const char *const precs[] = {"fp32", "tf32", "bf16"};
    plumb_err e = {{0}};
    if (!precision) {
        const backend *b = backend_find(name, &e);
        if (!b) cli_fail(cmd, "%s", e.msg);
        return b;
    }
    int p = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(precision, precs[i])) p = i;
    if (p < 0) {
        cli_fail(cmd, "--precision: expected fp32, tf32 or bf16 (got \"%s\")", precision);
        return NULL;
    }
    /* the name's own precision, from its suffix: it must agree with --precision */
    char base[64];
    snprintf(base, sizeof base, "%s", name);
    int own = 0;
    size_t n = strlen(base);
    for (int i = 1; i < 3; i++)
        if (n > 5 && base[n - 5] == '-' && !strcmp(base + n - 4, precs[i])) {
            own = i;
            base[n - 5] = 0;
        }
    if (own && own != p) {
        cli_fail(cmd, "--precision %s disagrees with --backend %s; give one of them",
                 precision, name);
        return NULL;
    }
    char full[80];
    snprintf(full, sizeof full, p ? "%s-%s" : "%s", base, precs[p]);
    const backend *b = backend_find(full, &e);
    if (!b && !strcmp(base, "cpu"))
        cli_fail(cmd, "--precision %s: the CPU backend computes in fp32 or bf16", precision);
    else if (!b)
        cli_fail(cmd, "%s", e.msg);
    return b;
}

/* How many of longopts a "--name" or "--name=value" argument is a prefix of. */
static int long_matches(const char *arg, const struct option *longopts)
{
    size_t n = strcspn(arg + 2, "=");
    int hits = 0;
    for (int i = 0; longopts && longopts[i].name; i++) {
        if (strncmp(longopts[i].name, arg + 2, n)) continue;
        if (strlen(longopts[i].name) == n) return 1;
        hits++;
    }
    return hits;
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts)
{
    char so[64];
    snprintf(so, sizeof so, ":%s", shortopts); /* ':' for a missing value */
    opterr = 0;
    int c = getopt_long(argc, argv, so, longopts, NULL);
    if (c != '?' && c != ':') {
        /* "--model --help": a value that asks for the help is the help (the commands'
         * usage lines point there), where the command has --help */
        if (optarg && (!strcmp(optarg, "--help") || !strcmp(optarg, "-h")))
            for (const struct option *o = longopts; o && o->name; o++)
                if (!strcmp(o->name, "help") && o->val == 'h') return 'h';
        return c;
    }
    const char *bad = argv[optind - 1 < argc ? optind - 1 : argc - 1];
    int is_long = bad[0] == '-' && bad[1] == '-';
    if (c == ':' && is_long)
        cli_fail(cmd, "option %s needs a value; see plumb %s --help", bad, cmd);
    else if (c == ':')
        cli_fail(cmd, "option -%c needs a value; see plumb %s --help", optopt, cmd);
    else if (!is_long)
        cli_fail(cmd, "unknown option -%c; see plumb %s --help", optopt, cmd);
    else if (optopt)
        cli_fail(cmd, "option %.*s takes no value (got \"%s\"); see plumb %s --help",
                 (int)strcspn(bad, "="), bad, bad, cmd);
    else if (long_matches(bad, longopts) > 1)
        cli_fail(cmd, "ambiguous option %s (the prefix of several); see plumb %s --help", bad,
                 cmd);
    else
        cli_fail(cmd, "unknown option %s; see plumb %s --help", bad, cmd);
    return '?';
}
