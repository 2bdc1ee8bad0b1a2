/* cmd_plan_layout.c: `plumb plan --model FILE -c CLUSTER --tp T --pp P --dp D ...`: a fixed
 * tensor x pipeline x data layout of a transformer (planner/layout3d.h), simulated once
 * (sim/sim.h) and reported as text (the layout, iteration time, throughput, per pipeline
 * rank memory against capacity) or as the simulator's JSON report; -o writes the plan. With
 * fewer than two of --tp/--pp/--dp, or --search, the layout search (planner/search3d.h):
 * the top five with why, the best reported as a fixed layout, its plan written with -o.
 * cli/cmd_plan.c hands it the arguments when they name --model. Bad input and a layout
 * that does not fit its devices' memory: one line, exit 2, nothing written. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/bounds.h"
#include "core/device.h"
#include "core/json.h"
#include "core/schedule_traits.h"
#include "core/units.h"
#include "planner/balance3d.h"
#include "planner/layout3d.h"
#include "planner/llm_profile.h"
#include "planner/search3d.h"
#include "sim/sim.h"

int cmd_plan_layout(int argc, char **argv);

static const char usage_text[] =
    "usage: plumb plan --model FILE -c CLUSTER.json --tp T --pp P --dp D --global-batch B\n"
    "                  [--gpus N] [--cp C] [--microbatch-size b] [--interleave V]\n"
    "                  [--recompute none|selective|full] [--checkpoint-layers K]\n"
    "                  [--sequence-parallel] [--zero 0|1 [--overlap-param-gather]]\n"
    "                  [--precision bf16|fp16|tf32|fp32|fp8 [--fp8-param-gather]]\n"
    "                  [--schedule KIND] [--seq-len S] [--attention standard|flash]\n"
    "                  [--cross-entropy unfused|te|native] [--grad-accum fused|unfused]\n"
    "                  [--balance] [--p2p overlap|sync] [--grad-sync overlap|end]\n"
    "                  [--decoder-first-pipeline-num-layers N]\n"
    "                  [--decoder-last-pipeline-num-layers N]\n"
    "                  [--account-for-embedding-in-pipeline-split]\n"
    "                  [--account-for-loss-in-pipeline-split]\n"
    "                  [--pipeline-layout STRING]\n"
    "                  [--p2p-split scatter-gather|whole]\n"
    "                  [--tp-overlap none|backward|full] [--grad-reduce fp32|bf16]\n"
    "                  [--optimizer-state fp32|bf16] [--json] [-o PLAN.json]\n"
    "       plumb plan --model FILE -c CLUSTER.json --gpus N --global-batch B [--search]\n"
    "                  [any of the options above, fixed] [--top K] [--json] [-o PLAN.json]\n"
    "\n"
    "Lays a transformer out as Megatron-LM does and simulates it: the blocks split evenly\n"
    "over pp x V virtual stages (the embedding with the first, the head with the last),\n"
    "virtual stage k on pipeline rank k %% pp, ranks ordered tensor-parallel fastest, then\n"
    "context-parallel (--cp), data-parallel, then pipeline (docs/llm.md, \"3D layouts\").\n"
    "With fewer than two of --tp/--pp/--dp, or with --search, it searches the dimensions\n"
    "not given (tp, pp, dp, microbatch size, interleaving, recompute, sequence\n"
    "parallelism, ZeRO, cp; synchronous schedules), ranks the best estimates by\n"
    "simulated throughput and prints the top five (docs/llm.md, \"Searching layouts\").\n"
    "\n"
    "  --model FILE            the transformer (Hugging Face config.json or\n"
    "                          plumb-transformer/1)\n"
    "  -c, --cluster FILE      the cluster (its device type costs the layers)\n"
    "  --gpus N                the first N devices, whole servers (default: tp x pp x dp,\n"
    "                          or the whole cluster)\n"
    "  --tp T, --pp P, --dp D  tensor-parallel ranks (within one server), pipeline ranks,\n"
    "                          data-parallel replicas; give two and the third is\n"
    "                          N / (their product x cp)\n"
    "  --cp C                  context-parallel ranks (a fixed layout: default 1; the\n"
    "                          search: 1, 2, 4 or 8 where it applies, unless given):\n"
    "                          each sequence split over C ranks (Megatron-Core's\n"
    "                          --context-parallel-size, Transformer Engine's K/V ring);\n"
    "                          gpus = tp x cp x pp x dp; needs --attention flash and\n"
    "                          2 C dividing the sequence (docs/llm.md, \"Context\n"
    "                          parallelism\")\n"
    "  --global-batch B        sequences per iteration (a multiple of dp x b)\n"
    "  --microbatch-size b     sequences per microbatch (default 1)\n"
    "  --interleave V          virtual stages per pipeline rank (default 1; V > 1: the\n"
    "                          interleaved schedule)\n"
    "  --recompute KIND        none (default), selective (the attention core) or full\n"
    "  --checkpoint-layers K   full recompute keeps every K-th block's input (default 1)\n"
    "  --sequence-parallel     sequence parallelism (needs tp > 1)\n"
    "  --zero 0|1              1: the optimizer state sharded over the replicas\n"
    "  --overlap-param-gather  with --zero 1: the parameter all-gather after the step runs\n"
    "                          under the next forward, bucket by bucket (Megatron-Core's\n"
    "                          --overlap-param-gather; default: one ring with the backward;\n"
    "                          the search sets it on its zero 1 candidates)\n"
    "  --precision P           bf16 (default), fp16, tf32, fp32 or fp8 (FP8 projections)\n"
    "  --fp8-param-gather      with --precision fp8 and --zero 1: FP8 primary weights\n"
    "                          (Megatron-Core's --fp8-param-gather): the blocks' weights\n"
    "                          held only in FP8 (no bf16 copy), their all-gather at 1 byte\n"
    "  --schedule KIND         1f1b-flush (default; interleaved with V > 1), gpipe, zb-h1,\n"
    "                          pipedream, 2bw, interleaved, zb-v, dualpipev\n"
    "  --seq-len S             tokens per sequence (default: max_position_embeddings)\n"
    "  --balance               move whole blocks off the stages that carry the embedding\n"
    "                          and the head where that runs faster, and print the gain\n"
    "                          (searching: in every layout simulated in full)\n"
    "  --decoder-first-pipeline-num-layers N, --decoder-last-pipeline-num-layers N\n"
    "                          Megatron-Core's uneven split (same names): pipeline rank 0\n"
    "                          (pp - 1) holds N blocks, dealt evenly over its V virtual\n"
    "                          stages, the other ranks the rest evenly; N a multiple of V\n"
    "  --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split\n"
    "                          Megatron-Core's: the embedding (the loss) counts as a block,\n"
    "                          so the blocks + 1 (+ 2) split evenly over pp x V and the\n"
    "                          first (last) virtual stage holds one block fewer. Neither\n"
    "                          kind goes with the other, --balance or the search\n"
    "                          (docs/llm.md, \"Uneven splits\")\n"
    "  --pipeline-layout STRING\n"
    "                          Megatron-Core's --pipeline-model-parallel-layout: virtual\n"
    "                          stages split by '|', E the embedding, t a block, L the\n"
    "                          loss, x*n and (...)*n repeats, commas cosmetic, e.g.\n"
    "                          \"Et|(tt|)*62,tL\"; stage k on rank k %% pp, V = stages / pp\n"
    "                          (--interleave, if given, must agree); E first, L last, as\n"
    "                          many t as the model's layers; no m (MTP), no empty stage.\n"
    "                          Goes with none of the four options above, --balance or\n"
    "                          the search\n"
    "  --attention KIND        standard (default: softmax and dropout kernels keep the s x s\n"
    "                          probabilities) or flash (fused: keeps its output and softmax\n"
    "                          statistics, recomputes the scores in its backward)\n"
    "  --cross-entropy KIND    unfused (default: Megatron-Core's vocab-parallel loss, an fp32\n"
    "                          copy of the logits and a kernel per pass) or te (Transformer\n"
    "                          Engine's fused loss, cross_entropy_fusion_impl \"te\": three\n"
    "                          passes over the logits, the gradient written over them) or\n"
    "                          native (Megatron-Core's fused loss, cross_entropy_fusion_impl\n"
    "                          \"native\": the fp32 copy in four compiled passes)\n"
    "  --grad-accum KIND       fused (default: the weight-gradient GEMM accumulates into the\n"
    "                          main gradients, Megatron's gradient_accumulation_fusion) or\n"
    "                          unfused (every backward adds each fresh weight gradient into\n"
    "                          its main gradient in a kernel of its own: 6 bytes a parameter\n"
    "                          with fp16, 10 with bf16, 12 with fp32)\n"
    "  --p2p MODE              overlap (default: transfers between pipeline ranks overlap\n"
    "                          with compute) or sync (a send moves once its receiver has\n"
    "                          posted the receive, and the sender computes again only when\n"
    "                          it has arrived: Megatron-LM's blocking p2p; the search\n"
    "                          skips zb-v and dualpipev, which deadlock under it)\n"
    "  --grad-sync MODE        overlap (default: each stage's data-parallel all-reduce runs\n"
    "                          under its last backward, as PyTorch DDP) or end (after the\n"
    "                          rank's last backward, its stages' rings one after another,\n"
    "                          then the optimizer: Megatron-LM's own DDP, Megatron-Core\n"
    "                          without --overlap-grad-reduce)\n"
    "  --p2p-split FORM        the pipeline sends at tp > 1 without sequence parallelism:\n"
    "                          scatter-gather (default: each tensor rank sends 1 / tp of\n"
    "                          the s x b x h tensor, an all-gather after the receive\n"
    "                          rebuilds it, as Megatron-LM of 2021-2022; the all-gather\n"
    "                          is priced in the receiver's F, B and I) or whole (every\n"
    "                          tensor rank sends the whole tensor over its own link:\n"
    "                          current Megatron-Core, tp times the bytes); no effect\n"
    "                          with --sequence-parallel\n"
    "  --tp-overlap MODE       none (default: every tensor-parallel collective blocks),\n"
    "                          backward (the input-gradient all-reduce under the weight-\n"
    "                          gradient GEMM: Megatron-LM's asynchronous all-reduce) or full\n"
    "                          (each collective pipelined with its GEMM in tp chunks:\n"
    "                          --tp-comm-overlap); needs tp > 1 (the search sets it on\n"
    "                          its candidates with tp > 1)\n"
    "  --grad-reduce E         fp32 (default: with bf16, fp32 main gradients kept and\n"
    "                          reduced over the data-parallel group) or bf16 (gradients\n"
    "                          kept and reduced in bf16, half the bytes: Megatron-Core's\n"
    "                          --grad-reduce-in-bf16); bf16 needs --precision bf16 or fp8\n"
    "  --optimizer-state E     fp32 (default: fp32 master weights and Adam moments) or\n"
    "                          bf16 (the moments in bf16, the bf16 weights their own\n"
    "                          master copy: apex's DistributedFusedAdam dtype bf16);\n"
    "                          bf16 needs --precision bf16 or fp8\n"
    "  --search                search the dimensions not given even with --tp/--pp/--dp\n"
    "  --top K                 searching: simulate the K best estimates in full\n"
    "                          (default %d)\n"
    "  --json                  print the simulator's report (plumb-sim-report/1); when\n"
    "                          searching, {\"ranking\": [...], \"best\": report}\n"
    "  -o, --output FILE       write the plan (plumb-plan/1), atomically\n"
    "  -h, --help              this text\n"
    "Exit status: 0 ok; 2 bad input or a layout that does not fit its devices' memory (one\n"
    "line; nothing written).\n";

enum { O_MODEL = 1200, O_GPUS, O_CP, O_TP, O_PP, O_DP, O_GB, O_MBS, O_V, O_RC, O_CKPT, O_SP, O_ZERO,
       O_PREC, O_SCHED, O_SEQ, O_JSON, O_BALANCE, O_ATTN, O_SEARCH, O_TOP, O_P2P, O_GSYNC, O_OPG,
       O_TPO, O_GRED, O_OSTATE, O_SPLIT, O_CE, O_GA };

/* What the command line gave besides the layout options (the search's fixed ones). */
typedef struct given {
    int mbs, interleave, recompute, sp, zero, schedule, search, top;
    int overlap_param_gather;  /* --overlap-param-gather (set on the built plan) */
    int tp_overlap;            /* --tp-overlap (plan_tp_overlap; set on the built plan) */
    int fp8_param_gather;      /* --fp8-param-gather (set on the built plan) */
} given;

/* The search's options from the command line: what was given is fixed, the layout
 * dimensions not given are searched. */
static void search_options(const layout3d_options *o, const given *g, search3d_options *so)
{
    search3d_options_from_layout(o, so);
    if (!g->mbs) so->microbatch_size = 0;
    if (!g->interleave) so->interleave = 0;
    if (!g->recompute) so->recompute = SEARCH3D_FREE;
    if (!g->sp) so->sequence_parallel = SEARCH3D_FREE;
    if (!g->zero) so->zero = SEARCH3D_FREE;
    if (!g->schedule) so->schedule = SEARCH3D_FREE;
    so->simulate = g->top;
    so->tp_overlap = (plan_tp_overlap)g->tp_overlap;
    so->overlap_param_gather = g->overlap_param_gather;
    so->fp8_param_gather = g->fp8_param_gather;
}

/* Parses the options into o; 1 after --help, 2 after one line, else 0. */
static int parse(int argc, char **argv, layout3d_options *o, given *g, const char **model,
                 const char **clus, const char **out, int *json)
{
    static const struct option longopts[] = {
        {"model", required_argument, 0, O_MODEL}, {"cluster", required_argument, 0, 'c'},
        {"output", required_argument, 0, 'o'}, {"gpus", required_argument, 0, O_GPUS},
        {"tp", required_argument, 0, O_TP}, {"pp", required_argument, 0, O_PP},
        {"cp", required_argument, 0, O_CP},
        {"dp", required_argument, 0, O_DP}, {"global-batch", required_argument, 0, O_GB},
        {"microbatch-size", required_argument, 0, O_MBS},
        {"interleave", required_argument, 0, O_V}, {"recompute", required_argument, 0, O_RC},
        {"checkpoint-layers", required_argument, 0, O_CKPT},
        {"sequence-parallel", no_argument, 0, O_SP}, {"zero", required_argument, 0, O_ZERO},
        {"precision", required_argument, 0, O_PREC}, {"schedule", required_argument, 0, O_SCHED},
        {"seq-len", required_argument, 0, O_SEQ}, {"json", no_argument, 0, O_JSON},
        {"balance", no_argument, 0, O_BALANCE},
        {"attention", required_argument, 0, O_ATTN},
        {"cross-entropy", required_argument, 0, O_CE},
        {"grad-accum", required_argument, 0, O_GA},
        {"search", no_argument, 0, O_SEARCH}, {"top", required_argument, 0, O_TOP},
        {"p2p", required_argument, 0, O_P2P},
        {"grad-sync", required_argument, 0, O_GSYNC},
        {"p2p-split", required_argument, 0, O_SPLIT},
        {"overlap-param-gather", no_argument, 0, O_OPG},
        {"tp-overlap", required_argument, 0, O_TPO},
        {"grad-reduce", required_argument, 0, O_GRED},
        {"optimizer-state", required_argument, 0, O_OSTATE},
        CLI_SPLIT_LONGOPTS, /* the uneven splits and --fp8-param-gather, as ui's */
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = "plan";
    int c, v, seq;
    o->microbatch_size = 1;
    optind = 0;
    while ((c = cli_getopt(cmd, argc, argv, "c:o:h", longopts)) != -1) {
        switch (c) {
        case O_MODEL: *model = optarg; break;
        case 'c': *clus = optarg; break;
        case 'o': *out = optarg; break;
        case O_JSON: *json = 1; break;
        case O_SP: o->sequence_parallel = g->sp = 1; break;
        case O_BALANCE: o->balance = 1; break;
        case O_SEARCH: g->search = 1; break;
        case O_OPG: g->overlap_param_gather = 1; break;
        case O_TOP: if (cli_int(cmd, "--top", optarg, 1, 1000, &g->top)) return 2; break;
        case O_GPUS:
            if (cli_int(cmd, "--gpus", optarg, 1, CLUSTER_MAX_DEVICES, &o->gpus))
                return 2;
            break;
        case O_TP: if (cli_int(cmd, "--tp", optarg, 1, 4096, &o->tp)) return 2; break;
        case O_CP: if (cli_cp(cmd, optarg, &o->cp)) return 2; break;
        case O_PP: if (cli_int(cmd, "--pp", optarg, 1, 65536, &o->pp)) return 2; break;
        case O_DP: if (cli_int(cmd, "--dp", optarg, 1, 1 << 20, &o->dp)) return 2; break;
        case O_GB:
            if (cli_int(cmd, "--global-batch", optarg, 1, BOUND_BATCH_MAX, &o->global_batch))
                return 2;
            break;
        case O_MBS:
            if (cli_int(cmd, "--microbatch-size", optarg, 1, 1 << 20, &o->microbatch_size))
                return 2;
            g->mbs = 1;
            break;
        case O_V:
            if (cli_int(cmd, "--interleave", optarg, 1, 64, &o->interleave))
                return 2;
            g->interleave = 1;
            break;
        case O_CKPT:
            if (cli_int(cmd, "--checkpoint-layers", optarg, 0, 1 << 20, &o->checkpoint_layers))
                return 2;
            break;
        case O_ZERO:
            if (cli_int(cmd, "--zero", optarg, 0, 1, &o->zero)) return 2;
            g->zero = 1;
            break;
        case O_SEQ:
            if (cli_int(cmd, "--seq-len", optarg, 1, 100000000, &seq)) return 2;
            o->seq = seq;
            break;
        case O_RC:
            if (cli_recompute(cmd, optarg, &v)) return 2;
            o->recompute = v;
            g->recompute = 1;
            break;
        case O_PREC:
            if (cli_precision(cmd, optarg, &v)) return 2;
            o->precision = (dev_precision)v;
            break;
        case O_SCHED:
            if (cli_sched_kind(cmd, optarg, &v)) return 2;
            o->schedule = v;
            g->schedule = 1;
            break;
        case O_ATTN: {
            int a;
            if (cli_attention(cmd, optarg, &a)) return 2;
            o->attention = (llm_attention)a;
            break;
        }
        case O_CE: if (cli_cross_entropy(cmd, optarg, &o->cross_entropy)) return 2; break;
        case O_GA: if (cli_grad_accum(cmd, optarg, &o->grad_accum)) return 2; break;
        case O_P2P: if (cli_p2p(cmd, optarg, &o->p2p_sync)) return 2; break;
        case O_GSYNC: if (cli_grad_sync(cmd, optarg, &o->grad_sync_end)) return 2; break;
        case O_SPLIT: if (cli_p2p_split(cmd, optarg, &o->p2p_whole)) return 2; break;
        case O_TPO: if (cli_tp_overlap(cmd, optarg, &g->tp_overlap)) return 2; break;
        case O_GRED:
            if (cli_state_precision(cmd, "--grad-reduce", optarg, &o->grad_reduce)) return 2;
            break;
        case O_OSTATE:
            if (cli_state_precision(cmd, "--optimizer-state", optarg, &o->optimizer_state))
                return 2;
            break;
        case 'h': printf(usage_text, SEARCH3D_SIMULATE); return 1;
        default:
            if (cli_split_opt(cmd, c, optarg, o, &g->fp8_param_gather)) return 2;
        }
    }
    if (optind < argc)
        return cli_fail(cmd, "unexpected argument \"%s\"; see plumb plan --model --help",
                        argv[optind]);
    if (!*model) return cli_fail(cmd, "expected --model FILE");
    if (!*clus) return cli_fail(cmd, "expected -c CLUSTER.json with --model");
    if (!o->global_batch) return cli_fail(cmd, "expected --global-batch B with --model");
    int searching = g->search || (o->tp > 0) + (o->pp > 0) + (o->dp > 0) < 2;
    if (g->top && !searching)
        return cli_fail(cmd, "--top: belongs to the layout search (fewer than two of --tp, "
                        "--pp and --dp, or --search); a fixed layout is simulated once");
    if (searching && layout3d_uneven(o))
        return cli_fail(cmd, "%s: belongs to a fixed layout (two of --tp, --pp and --dp, no "
                        "--search); the search splits the blocks evenly",
                        layout3d_split_option(o));
    /* the runtime's checks, as the search and plumb sweep --model make them; the search
     * applies --overlap-param-gather to its zero 1 candidates when --zero is not given */
    search3d_options so;
    plumb_err err = {{0}};
    search_options(o, g, &so);
    if (!searching) so.zero = o->zero;
    if (search3d_runtime_check(&so, &err)) return cli_fail(cmd, "%s", err.msg);
    return 0;
}

/* The first device that does not fit, as `plumb: MODEL: stages[S]: ...` into msg; 0 when
 * every device fits. */
static int no_fit(const char *model, const sim_report *r, char *msg, size_t n)
{
    if (r->fits) return 0;
    for (int i = 0; i < r->ndevices; i++) {
        const sim_device_report *d = &r->devices[i];
        if (d->mem.fits) continue;
        char got[32], cap[32];
        snprintf(msg, n, "plumb: %s: stages[%d]: expected the layout to fit the memory of its "
                 "devices (got %s on device %d of capacity %s); try more pipeline ranks, "
                 "--recompute, --sequence-parallel or --zero 1", model,
                 d->nstages > 0 ? d->stages[0] : 0, units_bytes(d->mem.total, got, sizeof got),
                 d->device, units_bytes(d->mem.capacity, cap, sizeof cap));
        return 1;
    }
    snprintf(msg, n, "plumb: %s: expected the layout to fit its devices' memory", model);
    return 1;
}

/* The text report of the fixed layout pl (dimensions d, simulated as r); layout: its
 * --pipeline-layout string, named on the settings line (NULL: none). */
static void print_text(const plan *pl, const layout3d_dims *d, const sim_report *r,
                       const char *layout)
{
    char b[6][32];
    const profile *p = pl->prof;
    const char *noun = cluster_device_noun(pl->clus);
    char cps[32] = ""; /* only when set: outputs without --cp read as before */
    if (d->cp > 1) snprintf(cps, sizeof cps, " x cp %d", d->cp);
    printf("plumb plan: %s on %s, %d %ss: tp %d%s x pp %d x dp %d, schedule %s", p->name,
           pl->clus->name ? pl->clus->name : "cluster", d->gpus, noun, d->tp, cps, d->pp, d->dp,
           sched_kind_name(pl->schedule));
    if (pl->chunks > 1) printf(" (%d virtual stages per rank)", pl->chunks);
    printf("\n");
    const sched_traits *tr = sched_traits_of(pl->schedule);
    if (tr && tr->async) /* the search never picks these (docs/llm.md, "Searching layouts") */
        printf("schedule %s is %s: it changes training semantics\n", tr->name, tr->semantics);
    printf("recompute %s", recompute_kind_name((recompute_kind)pl->recompute));
    if (pl->recompute == RECOMPUTE_FULL) {
        if (pl->checkpoint_layers > 0) printf(" (every %d blocks)", pl->checkpoint_layers);
        else printf(" (each stage's input)");
    }
    printf(", sequence parallel %s, zero %d%s, %s", pl->sequence_parallel ? "on" : "off",
           pl->zero, pl->overlap_param_gather ? " (parameter all-gather under the forward)" : "",
           dev_precision_name(pl->precision));
    if (pl->fp8_param_gather) /* only when set: default outputs read as before */
        printf(", fp8-param-gather");
    if (pl->cross_entropy) /* only when fused: default outputs read as before */
        printf(", cross-entropy %s", plan_cross_entropy_name(pl->cross_entropy));
    if (pl->grad_accum) /* only when unfused: default outputs read as before */
        printf(", grad-accum unfused");
    if (pl->grad_reduce != DEV_FP32)
        printf(", gradients %s", dev_precision_name(pl->grad_reduce));
    if (pl->optimizer_state != DEV_FP32)
        printf(", optimizer state %s", dev_precision_name(pl->optimizer_state));
    if (pl->tp_overlap != TP_OVERLAP_NONE)
        printf(", tp overlap %s", plan_tp_overlap_name(pl->tp_overlap));
    if (pl->p2p_whole) /* only when set: default outputs read as before */
        printf(", p2p whole tensor%s", pl->tp > 1 && !pl->sequence_parallel ? ""
                                       : " (no effect: sequence parallel or tp 1)");
    if (layout) /* only when given: default outputs read as before */
        printf(", pipeline layout %s", layout);
    printf("\n");
    printf("global batch %d sequences of %lld tokens: %d microbatches of %d, %d per replica\n",
           plan_minibatch(pl), p->tokens_per_sample, pl->microbatches, pl->microbatch_size,
           pl->microbatches / d->dp);
    for (int k = 0; k < pl->nstages; k++) {
        const plan_stage *s = &pl->stages[k];
        int lo = s->devices[0], hi = s->devices[s->replicas - 1] + d->tp * d->cp - 1;
        printf("stage %d: layers %d-%d (%s .. %s) on devices %d-%d (%d group%s of %d)\n", k,
               s->first_layer, s->last_layer, p->layers[s->first_layer].name,
               p->layers[s->last_layer].name, lo, hi, s->replicas,
               s->replicas == 1 ? "" : "s", d->tp * d->cp);
    }
    printf("iteration %.4f s, %.2f samples/s", r->iteration_s, r->samples_per_s);
    if (r->tokens_per_s > 0) printf(", %.0f tokens/s", r->tokens_per_s);
    printf(", bubble %.1f %%\n", 100 * r->bubble_fraction);
    if (r->tflops_per_gpu >= 0 && r->mfu >= 0)
        printf("%.1f TFLOP/s per %s (model FLOPs %.1f), MFU %.1f %%%s\n", r->tflops_per_gpu,
               noun, r->model_tflops_per_gpu, 100 * r->mfu,
               r->precision == DEV_FP8 ? " of the bf16 peak" : "");
    printf("memory per pipeline rank (its first group's first device):\n");
    for (int rank = 0; rank < d->pp; rank++) {
        int dev = layout3d_group_device(rank, 0, d->tp * d->cp, d->dp);
        const sim_device_report *dr = sim_report_device(r, dev);
        if (!dr) continue;
        const sim_memory *m = &dr->mem;
        printf("  rank %d (device %d): weights %s, gradients %s, optimizer %s, activations %s, ",
               rank, dev, units_bytes(m->weights, b[0], sizeof b[0]),
               units_bytes(m->gradients, b[1], sizeof b[1]),
               units_bytes(m->optimizer, b[2], sizeof b[2]),
               units_bytes(m->activations, b[3], sizeof b[3]));
        if (m->step_transient > 0) /* the step's fp32 gradient copy, not with the activations */
            printf("step gradient copy %s, ", units_bytes(m->step_transient, b[0], sizeof b[0]));
        printf("peak %s of %s%s\n", units_bytes(m->total, b[4], sizeof b[4]),
               units_bytes(m->capacity, b[5], sizeof b[5]), m->fits ? "" : " DOES NOT FIT");
    }
}

/* --balance (planner/balance3d.h): what balancing the stages gained, one line. */
static void print_balance(const layout3d_balance_result *b)
{
    if (b->changed) {
        printf("balancing: %.4f s -> %.4f s per iteration (%+.1f %%), first stage %d block%s, "
               "last %d block%s + head (even: %d each%s)\n", b->even_s, b->balanced_s,
               100 * (b->balanced_s / b->even_s - 1), b->first_blocks,
               b->first_blocks == 1 ? "" : "s", b->last_blocks, b->last_blocks == 1 ? "" : "s",
               b->even_blocks, b->even_fits ? "" : ", which does not fit");
    } else if (b->tried) {
        printf("balancing: gains nothing (the best split%s, slowest stage %.2f ms against "
               "%.2f ms, simulates at %.4f s against the even %.4f s); even split kept\n",
               b->memory_rounds ? " that fits" : "", 1e3 * b->bottleneck_s,
               1e3 * b->even_bottleneck_s, b->candidate_s, b->even_s);
    } else {
        printf("balancing: gains nothing: the even split is optimal in whole blocks (slowest "
               "stage %.2f ms per microbatch)\n", 1e3 * b->even_bottleneck_s);
    }
}

/* --balance --json: what print_balance says, as the report's "balance" object (changed,
 * tried, even and balanced iteration seconds, null when nothing was simulated, blocks of the
 * even split and of the first and last virtual stage kept). 0, or -1 out of memory. */
static int balance_json(cJSON *j, const layout3d_balance_result *b)
{
    cJSON *o = cJSON_AddObjectToObject(j, "balance");
    if (!o || !cJSON_AddBoolToObject(o, "changed", b->changed) ||
        !cJSON_AddBoolToObject(o, "tried", b->tried))
        return -1;
    if (b->even_s >= 0) {
        if (!cJSON_AddNumberToObject(o, "even_iteration_s", b->even_s) ||
            !cJSON_AddNumberToObject(o, "balanced_iteration_s", b->balanced_s))
            return -1;
    } else if (!cJSON_AddNullToObject(o, "even_iteration_s") ||
               !cJSON_AddNullToObject(o, "balanced_iteration_s")) {
        return -1;
    }
    if (!cJSON_AddNumberToObject(o, "even_bottleneck_s", b->even_bottleneck_s) ||
        !cJSON_AddNumberToObject(o, "even_blocks", b->even_blocks) ||
        !cJSON_AddNumberToObject(o, "first_blocks", b->first_blocks) ||
        !cJSON_AddNumberToObject(o, "last_blocks", b->last_blocks))
        return -1;
    return 0;
}

/* One ranked layout as "tp 4 x pp 8 x dp 32, microbatch 1, interleaved V 12, ...". */
static void layout_text(const search3d_cand *c, char *buf, size_t n)
{
    char v[24] = "", cps[24] = ""; /* cp only when > 1: rankings without it read as before */
    if (c->d.interleave > 1) snprintf(v, sizeof v, " V %d", c->d.interleave);
    if (c->d.cp > 1) snprintf(cps, sizeof cps, " x cp %d", c->d.cp);
    snprintf(buf, n, "tp %d%s x pp %d x dp %d, microbatch %d, %s%s, recompute %s%s, zero %d",
             c->d.tp, cps, c->d.pp, c->d.dp, c->o.microbatch_size, sched_kind_name(c->d.schedule),
             v, recompute_kind_name((recompute_kind)c->o.recompute),
             c->o.sequence_parallel ? ", sequence parallel" : "", c->o.zero);
}

/* The runtime the search gave every candidate, and --balance, a line each; nothing at
 * the default. */
static void print_runtime(const search3d_options *so)
{
    char rt[256];
    search3d_runtime_text(so, rt, sizeof rt);
    if (rt[0]) printf("runtime of every layout: %s\n", rt);
    if (so->balance)
        printf("stages balanced (--balance) in every layout simulated; the estimates split "
               "the blocks evenly\n");
}

static void print_ranking(const search3d_result *r, const search3d_options *so, int gpus,
                          const char *noun)
{
    char lay[160], why[512], pk[32], cap[32];
    printf("plumb plan: searched %lld layouts on %d %ss (%lld fit memory by the estimate), "
           "simulated the best %d: estimate %.2f s, simulation %.2f s of CPU\n", r->enumerated,
           gpus, noun, r->fitting, r->nranked, r->estimate_cpu_s, r->simulate_cpu_s);
    print_runtime(so);
    int n = r->nranked < 5 ? r->nranked : 5;
    for (int i = 0; i < n; i++) {
        const search3d_cand *c = &r->ranked[i];
        layout_text(c, lay, sizeof lay);
        search3d_why(r, i, why, sizeof why);
        char even[48] = "";
        if (c->balanced) snprintf(even, sizeof even, "; even split %.3f s", c->even_iteration_s);
        printf("#%d %s\n   iteration %.3f s (estimate %.3f s%s), %.0f tokens/s, %.1f TFLOP/s "
               "per %s, MFU %.1f %%, peak %s of %s\n   why: %s\n", i + 1, lay, c->iteration_s,
               c->est.iteration_s, even, c->tokens_per_s, c->tflops_per_gpu, noun, 100 * c->mfu,
               units_bytes(c->peak_bytes, pk, sizeof pk),
               units_bytes(c->est.capacity_bytes, cap, sizeof cap), why);
    }
    printf("the best layout:\n");
}

/* The ranking as JSON: {"searched", "fitting", "estimate_cpu_s", "simulate_cpu_s",
 * "tp_overlap", "overlap_param_gather", "p2p", ["grad_sync", "p2p_split", "grad_reduce",
 * "optimizer_state", "fp8_param_gather", "cross_entropy", "grad_accum", "balance"
 * where set], "ranking": [...], "best": report}. */
static cJSON *ranking_json(const search3d_result *r, const search3d_options *so,
                           const char *out)
{
    cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "ranking");
    char why[512];
    if (!j || !a) {
        cJSON_Delete(j);
        return NULL;
    }
    cJSON_AddNumberToObject(j, "searched", (double)r->enumerated);
    cJSON_AddNumberToObject(j, "fitting", (double)r->fitting);
    cJSON_AddNumberToObject(j, "estimate_cpu_s", r->estimate_cpu_s);
    cJSON_AddNumberToObject(j, "simulate_cpu_s", r->simulate_cpu_s);
    cJSON_AddStringToObject(j, "tp_overlap", plan_tp_overlap_name(so->tp_overlap));
    cJSON_AddBoolToObject(j, "overlap_param_gather", so->overlap_param_gather);
    cJSON_AddStringToObject(j, "p2p", so->p2p_sync ? "sync" : "overlap");
    if (so->grad_sync_end) /* only when set: default rankings read as before */
        cJSON_AddStringToObject(j, "grad_sync", "end");
    if (so->p2p_whole) /* only when set: default rankings read as before */
        cJSON_AddStringToObject(j, "p2p_split", "whole");
    if (so->grad_reduce != DEV_FP32) /* only when set: default rankings read as before */
        cJSON_AddStringToObject(j, "grad_reduce", dev_precision_name(so->grad_reduce));
    if (so->optimizer_state != DEV_FP32)
        cJSON_AddStringToObject(j, "optimizer_state", dev_precision_name(so->optimizer_state));
    if (so->fp8_param_gather) /* only when set: default rankings read as before */
        cJSON_AddBoolToObject(j, "fp8_param_gather", 1);
    if (so->cross_entropy != LLM_CE_UNFUSED) /* likewise */
        cJSON_AddStringToObject(j, "cross_entropy", llm_cross_entropy_name(so->cross_entropy));
    if (so->grad_accum != LLM_GA_FUSED) /* likewise */
        cJSON_AddStringToObject(j, "grad_accum", llm_grad_accum_name(so->grad_accum));
    if (so->balance) cJSON_AddBoolToObject(j, "balance", 1);
    for (int i = 0; i < r->nranked; i++) {
        const search3d_cand *c = &r->ranked[i];
        cJSON *e = search3d_cand_json(c);
        if (!e) break;
        cJSON_AddItemToArray(a, e);
        search3d_why(r, i, why, sizeof why);
        cJSON_AddStringToObject(e, "why", why);
    }
    cJSON *best = sim_report_to_json(r->best_report, NULL, out);
    if (!best) {
        cJSON_Delete(j);
        return NULL;
    }
    cJSON_AddItemToObject(j, "best", best);
    return j;
}

/* The search path: rank, print, write the best plan. Returns the exit status. */
static int run_search(const transformer *t, const cluster *cl, const char *cpath,
                      const layout3d_options *o, const given *g, const char *out, int json)
{
    search3d_options so;
    search_options(o, g, &so);
    plumb_err err = {{0}};
    search3d_result *r = search3d_run(t, cl, cpath, &so, &err);
    cJSON *j = NULL;
    char *text = NULL;
    int rc = 2;
    if (!r) {
        if (err.msg[0] == '-') cli_fail("plan", "%s", err.msg);
        else err_print(&err);
        return 2;
    }
    if (json && (!(j = ranking_json(r, &so, out)) || !(text = cJSON_Print(j)))) {
        fprintf(stderr, "plumb: plan: out of memory\n");
        rc = 1;
        goto done;
    }
    if (out && plan_save(r->best, out, &err)) {
        err_print(&err);
        goto done;
    }
    if (json) {
        printf("%s\n", text);
    } else {
        const search3d_cand *b = &r->ranked[0];
        print_ranking(r, &so, b->d.gpus, cluster_device_noun(cl));
        print_text(r->best, &b->d, r->best_report, NULL);
        if (so.balance) print_balance(&r->best_balance);
        if (out) printf("plan written to %s\n", out);
    }
    rc = 0;
done:
    free(text);
    cJSON_Delete(j);
    search3d_free(r);
    return rc;
}

int cmd_plan_layout(int argc, char **argv)
{
    layout3d_options o;
    layout3d_options_init(&o);
    given g = {0};
    const char *mpath = NULL, *cpath = NULL, *out = NULL;
    int json = 0, rc = parse(argc, argv, &o, &g, &mpath, &cpath, &out, &json);
    if (rc) return rc == 1 ? 0 : 2;
    const char *inputs[2] = {mpath, cpath};
    if (out && cli_output_ok("plan", "-o", out, inputs, 2)) return 2;
    plumb_err err = {{0}};
    transformer *t = transformer_load(mpath, &err);
    cluster *cl = t ? cluster_load(cpath, &err) : NULL;
    layout3d_dims d;
    plan *pl = NULL;
    sim_report *r = NULL;
    cJSON *j = NULL;
    char *text = NULL, msg[PLUMB_ERR_MAX + 256];
    rc = 2;
    if (!cl) goto bad;
    if (g.search || (o.tp > 0) + (o.pp > 0) + (o.dp > 0) < 2) {
        rc = run_search(t, cl, cpath, &o, &g, out, json);
        goto done;
    }
    if (layout3d_resolve(t, cl, cpath, &o, &d, &err)) goto bad;
    search3d_options so; /* again with the tp the other two gave */
    search_options(&o, &g, &so);
    so.zero = o.zero, so.tp = d.tp;
    if (search3d_runtime_check(&so, &err)) goto bad;
    if (!(pl = layout3d_build(t, cl, cpath, &o, &err))) goto bad;
    pl->overlap_param_gather = g.overlap_param_gather;
    pl->fp8_param_gather = g.fp8_param_gather;
    pl->tp_overlap = (plan_tp_overlap)g.tp_overlap;
    if (!(r = sim_run_folded(pl, NULL, 0, &err))) {
        fprintf(stderr, "plumb: %s: the layout: %s\n", mpath, err.msg);
        goto done;
    }
    /* --balance: balance the stages, and simulate the plan again when they moved */
    layout3d_balance_result bal = {0};
    if (o.balance) {
        if (layout3d_balance(pl, NULL, r, &bal, &err)) goto bad;
        sim_report_free(bal.changed ? r : NULL);
        if (bal.changed && !(r = sim_run_folded(pl, NULL, 0, &err))) goto bad;
    }
    if (no_fit(mpath, r, msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        goto done;
    }
    pl->pred_iteration_s = r->iteration_s;
    pl->pred_samples_per_s = r->samples_per_s;
    if (!(j = sim_report_to_json(r, NULL, out))) goto oom;
    if (o.balance && balance_json(j, &bal)) goto oom;
    if (json && !(text = cJSON_Print(j))) goto oom;
    if (out && plan_save(pl, out, &err)) goto bad;
    if (json) {
        printf("%s\n", text);
    } else {
        print_text(pl, &d, r, o.pipeline_layout);
        if (o.balance) print_balance(&bal);
        if (out) printf("plan written to %s\n", out);
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "plumb: plan: out of memory\n");
    rc = 1;
    goto done;
bad:
    if (err.msg[0] == '-') cli_fail("plan", "%s", err.msg); /* an option's value */
    else err_print(&err);
done:
    free(text);
    cJSON_Delete(j);
    sim_report_free(r);
    plan_free(pl);
    cluster_free(cl);
    transformer_free(t);
    return rc;
}
