/* cmd_sweep.c: `plumb sweep -p PROFILE -c CLUSTER --gpus A..B`: capacity planning. For each
 * GPU count the cluster is resized and the native planner finds the best plan; prints its
 * simulated throughput, scaling efficiency, cost per million samples and the fewest GPUs
 * that reach a target; optionally as JSON and as an SVG plot (planner/sweep.h). With
 * --model, a transformer's 3D layouts per count (planner/sweep3d.h): tokens/s, MFU, days
 * and cost of a token budget, the fewest GPUs within a deadline, the Pareto front. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/bounds.h"
#include "core/device.h"
#include "core/json.h"
#include "planner/native.h"
#include "planner/sweep.h"
#include "planner/sweep3d.h"

static const char *const usage =
    "usage: plumb sweep -p PROFILE -c CLUSTER --gpus A..B [options]\n"
    "       plumb sweep --model FILE -c CLUSTER --gpus A..B --global-batch B [options]\n"
    "                  (a transformer's 3D layouts: plumb sweep --model --help)\n"
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
    "                          both tried, the simulator picks, as plumb plan -p does)\n"
    "  --memory-limit GIB      device memory capacity at most GIB GiB\n"
    "  --optimizer O           sgd, momentum (default) or adam: its state counts in memory\n"
    "  --p2p overlap|sync      every plan's point-to-point transfers, as plumb plan -p takes\n"
    "                          it (sync: not with zb-v or dualpipev)\n"
    "  --grad-sync overlap|end every plan's gradient reduction, as plumb plan -p takes it\n"
    "                          (end: not with pipedream or 2bw; auto skips them)\n"
    "  --zero 0|1              1: every plan ZeRO-1 (optimizer state split over a stage's\n"
    "                          replicas), as plumb plan -p takes it\n"
    "  --overlap-param-gather  with --zero 1: the all-gather under the next forwards (not\n"
    "                          with pipedream, 2bw or --grad-sync end; auto skips the\n"
    "                          first two)\n"
    "  --json                  print the sweep as JSON (plumb-sweep/1) instead of a table\n"
    "  --svg OUT.svg           write a plot of throughput and cost against GPUs\n"
    "  -h, --help              this help\n"
    "Exit status: 0 ok, 2 bad input (nothing written).\n";

enum { O_GPUS = 1000, O_TARGET, O_PRICE, O_SCHED, O_MB, O_MBS, O_RC, O_MEM, O_OPT, O_JSON,
       O_SVG, O_P2P, O_GSYNC, O_ZERO, O_OPG };

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

static const char *const usage_model =
    "usage: plumb sweep --model FILE -c CLUSTER --gpus A..B --global-batch B [options]\n"
    "Searches the best tensor x pipeline x data layout of a transformer (as plumb plan\n"
    "--model does) on whole servers from A to B GPUs: the first multiple of a server's\n"
    "devices from A, doubled up to B, and B's; prints per count its tokens/s and MFU, the\n"
    "days and cost to train a token budget, and the Pareto front of time against cost.\n"
    "  --model FILE            the transformer (Hugging Face config.json or\n"
    "                          plumb-transformer/1)\n"
    "  -c, --cluster FILE      the cluster\n"
    "  --gpus A..B             GPU counts (also N for one)\n"
    "  --global-batch B        sequences per iteration\n"
    "  --tokens N              token budget: days to train it and its cost\n"
    "  --price USD_PER_GPU_HOUR  cost in USD (else in GPU-hours), USD per million tokens\n"
    "  --deadline DAYS         the fewest GPUs that train --tokens within DAYS\n"
    "  --tp T, --pp P, --microbatch-size b, --interleave V, --recompute KIND,\n"
    "  --checkpoint-layers K, --sequence-parallel, --zero 0|1, --schedule KIND\n"
    "                          fixed dimensions (the rest are searched), as plumb plan\n"
    "                          --model takes them\n"
    "  --cp C                  context-parallel ranks of every layout (default: searched\n"
    "                          in 1, 2, 4, 8 with --attention flash where 2 cp divides\n"
    "                          the sequence, as plan --model's search)\n"
    "  --precision P, --seq-len S, --attention standard|flash,\n"
    "  --cross-entropy unfused|te|native, --grad-accum fused|unfused\n"
    "                          how every layout computes (as plumb plan --model)\n"
    "  --p2p overlap|sync, --grad-sync overlap|end, --tp-overlap none|backward|full,\n"
    "  --overlap-param-gather, --p2p-split scatter-gather|whole,\n"
    "  --grad-reduce fp32|bf16, --optimizer-state fp32|bf16,\n"
    "  --fp8-param-gather (with --precision fp8 and --zero 1)\n"
    "                          the runtime of every layout at every count, as plumb plan\n"
    "                          --model sets it on its search's candidates\n"
    "  --balance               balance the stages of every layout simulated in full, as\n"
    "                          plumb plan --model --balance does (the estimates stay even)\n"
    "  --top K                 best estimates simulated per count (default 3; 6 under\n"
    "                          --p2p sync, as plan's search doubles its own)\n"
    "  --json                  print the sweep as JSON (plumb-sweep3d/1)\n"
    "  --svg OUT.svg           write the time-against-cost plot (needs --tokens)\n"
    "  -h, --help              this help\n"
    "Exit status: 0 ok, 2 bad input (nothing written).\n";

enum { M_MODEL = 1100, M_GPUS, M_GB, M_TOKENS, M_PRICE, M_DEADLINE, M_TP, M_PP, M_MBS, M_V,
       M_RC, M_SP, M_ZERO, M_TOP, M_JSON, M_SVG, M_CKPT, M_SCHED, M_PREC, M_SEQ, M_ATTN, M_P2P,
       M_TPO, M_OPG, M_GRED, M_OSTATE, M_BALANCE, M_GSYNC, M_SPLIT, M_CP, M_CE, M_GA };

/* The options of `plan --model` that set how a layout computes and runs (its schedule,
 * precision, sequence, attention, checkpointing, runtime) into o, with plan's messages.
 * 0, or 2 after one line; 1 when ch is none of them. */
static int parse_model_runtime(int ch, search3d_options *o)
{
    const char *cmd = "sweep";
    int v, seq;
    switch (ch) {
    case M_OPG: o->overlap_param_gather = 1; return 0;
    case M_BALANCE: o->balance = 1; return 0;
    case M_GRED: return cli_state_precision(cmd, "--grad-reduce", optarg, &o->grad_reduce);
    case M_OSTATE:
        return cli_state_precision(cmd, "--optimizer-state", optarg, &o->optimizer_state);
    case M_CKPT:
        return cli_int(cmd, "--checkpoint-layers", optarg, 0, 1 << 20, &o->checkpoint_layers)
                   ? 2 : 0;
    case M_SEQ:
        if (cli_int(cmd, "--seq-len", optarg, 1, 100000000, &seq)) return 2;
        o->seq = seq;
        return 0;
    case M_PREC:
        if (cli_precision(cmd, optarg, &v)) return 2;
        o->precision = (dev_precision)v;
        return 0;
    case M_SCHED:
        if (cli_sched_kind(cmd, optarg, &v)) return 2;
        o->schedule = v;
        return 0;
    case M_ATTN:
        if (cli_attention(cmd, optarg, &v)) return 2;
        o->attention = v;
        return 0;
    case M_CE: return cli_cross_entropy(cmd, optarg, &o->cross_entropy) ? 2 : 0;
    case M_GA: return cli_grad_accum(cmd, optarg, &o->grad_accum) ? 2 : 0;
    case M_P2P: return cli_p2p(cmd, optarg, &o->p2p_sync);
    case M_GSYNC: return cli_grad_sync(cmd, optarg, &o->grad_sync_end);
    case M_SPLIT: return cli_p2p_split(cmd, optarg, &o->p2p_whole);
    case M_TPO:
        if (cli_tp_overlap(cmd, optarg, &v)) return 2;
        o->tp_overlap = (plan_tp_overlap)v;
        return 0;
    default: return 1;
    }
}

/* Parses the --model options into o and the rest. 1 after --help, 2 after one line. */
static int parse_model(int argc, char **argv, search3d_options *o, const char **mpath,
                       const char **cpath, const char **svg, int *lo, int *hi, double *tokens,
                       double *price, double *deadline, int *json)
{
    static const struct option longopts[] = {
        {"model", required_argument, 0, M_MODEL}, {"cluster", required_argument, 0, 'c'},
        {"gpus", required_argument, 0, M_GPUS}, {"global-batch", required_argument, 0, M_GB},
        {"tokens", required_argument, 0, M_TOKENS}, {"price", required_argument, 0, M_PRICE},
        {"deadline", required_argument, 0, M_DEADLINE}, {"tp", required_argument, 0, M_TP},
        {"pp", required_argument, 0, M_PP}, {"microbatch-size", required_argument, 0, M_MBS},
        {"interleave", required_argument, 0, M_V}, {"recompute", required_argument, 0, M_RC},
        {"sequence-parallel", no_argument, 0, M_SP}, {"zero", required_argument, 0, M_ZERO},
        {"top", required_argument, 0, M_TOP}, {"json", no_argument, 0, M_JSON},
        {"svg", required_argument, 0, M_SVG},
        {"checkpoint-layers", required_argument, 0, M_CKPT},
        {"schedule", required_argument, 0, M_SCHED}, {"precision", required_argument, 0, M_PREC},
        {"seq-len", required_argument, 0, M_SEQ}, {"attention", required_argument, 0, M_ATTN},
        {"cross-entropy", required_argument, 0, M_CE},
        {"grad-accum", required_argument, 0, M_GA},
        {"p2p", required_argument, 0, M_P2P}, {"tp-overlap", required_argument, 0, M_TPO},
        {"grad-sync", required_argument, 0, M_GSYNC},
        {"p2p-split", required_argument, 0, M_SPLIT},
        {"overlap-param-gather", no_argument, 0, M_OPG},
        CLI_FP8PG_LONGOPT, /* plan and ui's (cli_split_opt parses it) */
        {"grad-reduce", required_argument, 0, M_GRED},
        {"optimizer-state", required_argument, 0, M_OSTATE},
        {"balance", no_argument, 0, M_BALANCE}, {"cp", required_argument, 0, M_CP},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = "sweep";
    int ch, v;
    optind = 0;
    while ((ch = cli_getopt(cmd, argc, argv, "hc:", longopts)) != -1) {
        switch (ch) {
        case 'h': fputs(usage_model, stdout); return 1;
        case M_MODEL: *mpath = optarg; break;
        case 'c': *cpath = optarg; break;
        case M_SVG: *svg = optarg; break;
        case M_JSON: *json = 1; break;
        case M_SP: o->sequence_parallel = 1; break;
        case M_GPUS: if (parse_range(optarg, lo, hi)) return 2; break;
        case M_GB:
            if (cli_int(cmd, "--global-batch", optarg, 1, BOUND_BATCH_MAX, &o->global_batch)) return 2;
            break;
        case M_TOKENS: if (cli_num(cmd, "--tokens", optarg, 1, 1e18, tokens)) return 2; break;
        case M_PRICE: if (cli_num(cmd, "--price", optarg, 1, 1e6, price)) return 2; break;
        case M_DEADLINE:
            if (cli_num(cmd, "--deadline", optarg, 1, 1e6, deadline)) return 2;
            break;
        case M_TP: if (cli_int(cmd, "--tp", optarg, 1, 4096, &o->tp)) return 2; break;
        case M_PP: if (cli_int(cmd, "--pp", optarg, 1, 65536, &o->pp)) return 2; break;
        case M_CP: if (cli_cp(cmd, optarg, &o->cp)) return 2; break;
        case M_MBS:
            if (cli_int(cmd, "--microbatch-size", optarg, 1, 1 << 20, &o->microbatch_size))
                return 2;
            break;
        case M_V: if (cli_int(cmd, "--interleave", optarg, 1, 64, &o->interleave)) return 2; break;
        case M_ZERO: if (cli_int(cmd, "--zero", optarg, 0, 1, &o->zero)) return 2; break;
        case M_TOP: if (cli_int(cmd, "--top", optarg, 1, 1000, &o->simulate)) return 2; break;
        case M_RC:
            if (cli_recompute(cmd, optarg, &v)) return 2;
            o->recompute = v;
            break;
        default: {
            layout3d_options none; /* no uneven split here: only --fp8-param-gather comes */
            layout3d_options_init(&none);
            int r = cli_split_opt(cmd, ch, optarg, &none, &o->fp8_param_gather);
            if (r > 0) return r;
            if (r < 0 && parse_model_runtime(ch, o)) return 2; /* its line, or an unknown
                                                                  option's */
            break;
        }
        }
    }
    if (optind != argc)
        return cli_fail(cmd, "unexpected argument \"%s\"; see plumb sweep --model --help",
                        argv[optind]);
    if (!*mpath || !*cpath || !*lo || !o->global_batch)
        return cli_fail(cmd, "expected --model FILE, -c CLUSTER, --gpus A..B and "
                        "--global-batch B; see plumb sweep --model --help");
    if (*svg && !(*tokens > 0))
        return cli_fail(cmd, "--svg: expected --tokens N with it (the plot is days to train "
                        "against cost)");
    plumb_err err = {{0}}; /* what no GPU count changes: plan --model's checks */
    if (search3d_options_check(o, &err)) return cli_fail(cmd, "%s", err.msg);
    return 0;
}

/* `plumb sweep --model`: the layout search per GPU count (planner/sweep3d.h). */
static int cmd_sweep_model(int argc, char **argv)
{
    search3d_options o;
    search3d_options_init(&o);
    const char *mpath = NULL, *cpath = NULL, *svg = NULL;
    int lo = 0, hi = 0, json = 0;
    double tokens = 0, price = 0, deadline = 0;
    int rc = parse_model(argc, argv, &o, &mpath, &cpath, &svg, &lo, &hi, &tokens, &price,
                         &deadline, &json);
    if (rc) return rc == 1 ? 0 : 2;
    const char *inputs[2] = {mpath, cpath};
    if (svg && cli_output_ok("sweep", "--svg", svg, inputs, 2)) return 2;
    plumb_err err = {{0}};
    transformer *t = transformer_load(mpath, &err);
    cluster *c = t ? cluster_load(cpath, &err) : NULL;
    sweep3d_result r = {0};
    cJSON *doc = NULL;
    char *text = NULL, *svgtext = NULL;
    size_t svglen = 0;
    rc = 2;
    if (!c) {
        err_print(&err);
        goto done;
    }
    if (sweep3d_run(t, c, cpath, &o, lo, hi, tokens, price, deadline, &r, &err)) {
        if (err.msg[0] == '-') cli_fail("sweep", "%s", err.msg);
        else err_print(&err);
        goto done;
    }
    rc = 1;
    if (svg && !(svgtext = sweep3d_svg(&r, &svglen))) goto oom;
    if (json && (!(doc = sweep3d_to_json(&r)) || !(text = cJSON_Print(doc)))) goto oom;
    rc = 2;
    if (svg && file_write_atomic(svg, svgtext, svglen, &err)) {
        err_print(&err);
        goto done;
    }
    if (json) {
        printf("%s\n", text);
    } else {
        sweep3d_print(&r, stdout);
        if (svg) printf("plot written to %s\n", svg);
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "plumb: sweep: out of memory\n");
done:
    free(text);
    free(svgtext);
    cJSON_Delete(doc);
    sweep3d_result_free(&r);
    cluster_free(c);
    transformer_free(t);
    return rc;
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
        {"p2p", required_argument, 0, O_P2P},
        {"grad-sync", required_argument, 0, O_GSYNC},
        {"zero", required_argument, 0, O_ZERO},
        {"overlap-param-gather", no_argument, 0, O_OPG},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model") || !strncmp(argv[i], "--model=", 8))
            return cmd_sweep_model(argc, argv);
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
            if (cli_int("sweep", "--microbatch-size", optarg, 1, BOUND_BATCH_MAX, &o.microbatch_size))
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
        case O_P2P:
            if (cli_p2p("sweep", optarg, &o.p2p_sync)) return 2;
            break;
        case O_GSYNC:
            if (cli_grad_sync("sweep", optarg, &o.grad_sync_end)) return 2;
            break;
        case O_ZERO:
            if (cli_int("sweep", "--zero", optarg, 0, 1, &o.zero)) return 2;
            break;
        case O_OPG: o.overlap_param_gather = 1; break;
        default: return 2;
        }
    }
    if (optind != argc)
        return cli_fail("sweep", "unexpected argument \"%s\"; see plumb sweep --help",
                        argv[optind]);
    if (!ppath || !cpath || !lo)
        return cli_fail("sweep", "expected -p PROFILE, -c CLUSTER and --gpus A..B; see plumb "
                        "sweep --help");
    { /* the runtime's rule, its owner's line (auto: the kind-free ones) */
        plumb_err re;
        err_clear(&re);
        if (native_runtime_check(&o, (sched_kind)o.schedule, &re))
            return cli_fail("sweep", "%s", re.msg);
    }
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
    if (p->tp > 1) { /* the native planner places whole layers on single devices */
        err_set(&err, ppath, "tensor_parallel", "expected 1: plumb sweep -p places whole "
                "layers on single devices (got %d); sweep a transformer's tensor-parallel "
                "layouts with plumb sweep --model FILE", p->tp);
        err_print(&err);
        goto done;
    }
    if (p->cp > 1) { /* likewise: it places whole sequences on single devices */
        err_set(&err, ppath, "context_parallel", "expected 1: plumb sweep -p places whole "
                "sequences on single devices (got %d)", p->cp);
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
