/* cmd_profile_llm.c: `plumb profile --model CONFIG.json -c CLUSTER.json [--tp T] ...`: the
 * analytic profile of a transformer (a Hugging Face config.json or plumb-transformer/1) on the
 * cluster's device type (planner/llm_profile.h), written as a plumb profile with a table. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "core/cluster.h"
#include "core/device.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/llm_profile.h"

static const char *const usage_text =
    "usage: plumb profile --model CONFIG.json -c CLUSTER.json [options] -o PROFILE.json\n"
    "\n"
    "The analytic profile of a transformer: a Hugging Face config.json (gpt2, gpt_neox,\n"
    "llama, mistral, qwen2) or a plumb-transformer/1 description, costed per layer on the\n"
    "cluster's device type from its datasheet figures and roofline efficiency curve\n"
    "(docs/llm.md). One layer for the embedding, one per transformer block, one for the LM\n"
    "head; times in ms per microbatch on one tensor-parallel rank, backward split into its\n"
    "input-gradient and weight-gradient halves.\n"
    "\n"
    "  --model FILE            the transformer\n"
    "  -c, --cluster FILE      the cluster whose device type costs it (needs\n"
    "                          peak_tflops_by_precision, memory_gbyte_per_s, efficiency)\n"
    "  -o, --output FILE       the profile to write (atomically); without it, only the table\n"
    "  --tp T                  tensor-parallel ranks (default 1): heads, MLP and vocabulary\n"
    "                          are split T ways\n"
    "  --sequence-parallel     with --tp 2 or more: the activations outside the\n"
    "                          tensor-parallel regions are split over the sequence too\n"
    "  --seq-len S             tokens per sequence (default: max_position_embeddings)\n"
    "  --microbatch-size B     sequences per microbatch (default 1)\n"
    "  --precision P           bf16 (default), fp16, tf32, fp32 or fp8 (FP8 projections)\n"
    "  --attention KIND        standard (default) or flash (fused: keeps no s x s tensor)\n"
    "  --cross-entropy KIND    unfused (default: Megatron-Core's vocab-parallel loss in fp32)\n"
    "                          te (Transformer Engine's fused loss) or native\n"
    "                          (Megatron-Core's fused loss): the head's times\n"
    "  --grad-accum KIND       fused (default: the weight-gradient GEMM accumulates into the\n"
    "                          main gradients) or unfused (a kernel per parameter tensor\n"
    "                          adds each backward's weight gradients): the W times\n"
    "  --quiet                 no table (needs -o)\n"
    "  -h, --help              this text\n"
    "Exit status: 0 ok, 2 bad input (one line naming the file and key; nothing written).\n";

enum { O_MODEL = 1100, O_TP, O_SEQ, O_MBS, O_PREC, O_QUIET, O_SP, O_ATTN, O_CE, O_GA };

static void print_table(const transformer *t, const profile *p, const llm_options *o)
{
    char active[64] = ""; /* with experts: the parameters a token runs through */
    if (t->experts)
        snprintf(active, sizeof active, ", %lld active", transformer_active_param_count(t));
    printf("plumb profile: %s (%lld parameters%s) on %s, tp %d%s, microbatch %d x %lld tokens, "
           "%s%s%s%s, analytic\n", t->name, transformer_param_count(t), active, p->device, o->tp,
           o->sequence_parallel ? " (sequence parallel)" : "", o->microbatch,
           o->seq > 0 ? o->seq : t->max_positions, dev_precision_name(o->precision),
           o->cross_entropy != LLM_CE_UNFUSED ? ", cross-entropy " : "", /* only when fused */
           o->cross_entropy != LLM_CE_UNFUSED ? llm_cross_entropy_name(o->cross_entropy) : "",
           o->grad_accum == LLM_GA_UNFUSED ? ", grad-accum unfused" : ""); /* likewise */
    printf("%-4s %-12s %-17s %11s %11s %11s %11s %13s %13s %13s %11s\n", "#", "layer", "kind",
           "fwd (ms)", "bwd (ms)", "I (ms)", "W (ms)", "output (B)", "params (B)",
           "saved (B)", "TFLOP");
    double tf = 0, tb = 0, fl = 0;
    /* with the window on some blocks only (Gemma 2), the first block of each kind too */
    long long loc = -1, full = -1;
    for (long long l = 0; t->full_layers && l < t->layers; l++) {
        if (transformer_layer_window(t, l) && loc < 0) loc = l;
        if (!transformer_layer_window(t, l) && full < 0) full = l;
    }
    int dots = 0; /* the blocks not shown, once between shown rows */
    for (int i = 0; i < p->nlayers; i++) {
        const profile_layer *L = &p->layers[i];
        /* the blocks are alike: show the first and the last */
        if (i > 1 && i < p->nlayers - 2 && i != loc + 1 && i != full + 1) {
            if (i == 2 && full < 0)
                printf("%-4s ... %d more blocks like block0\n", "", p->nlayers - 4);
            else if (full >= 0 && !dots++)
                printf("%-4s ... more blocks, each like block%lld (a window of %lld keys) or "
                       "block%lld (full attention)\n", "", loc, t->window, full);
        } else {
            dots = 0;
            printf("%-4d %-12.12s %-17.17s %11.4f %11.4f %11.4f %11.4f %13.0f %13.0f %13.0f "
                   "%11.4f\n", i, L->name, L->kind, L->forward_ms, L->backward_ms,
                   L->backward_input_ms, L->backward_weight_ms, L->activation_bytes,
                   L->parameter_bytes, L->saved_bytes, L->flops / 1e12);
        }
        tf += L->forward_ms;
        tb += L->backward_ms;
        fl += L->flops;
    }
    double ms = tf + tb;
    printf("total: forward %.3f ms, backward %.3f ms per microbatch on one rank; %.4g TFLOP "
           "forward x 3 = %.4g TFLOP per microbatch on this rank (%.1f TFLOP/s)\n", tf, tb,
           fl / 1e12, 3 * fl / 1e12, ms > 0 ? 3 * fl / (ms * 1e-3) / 1e12 : 0);
    const profile_layer *B = p->nlayers > 2 ? &p->layers[1] : NULL;
    if (B && B->tp_forward_collectives + B->tp_backward_collectives > 0)
        printf("not in these times: %d + %d tensor-parallel %s (forward + backward) of %.0f "
               "bytes per block among the %d ranks; the embedding %d + %d, the head %d + %d\n",
               B->tp_forward_collectives, B->tp_backward_collectives,
               p->sequence_parallel ? "reduce-scatter + all-gather pairs" : "all-reduces",
               B->tp_collective_bytes, p->tp, p->layers[0].tp_forward_collectives,
               p->layers[0].tp_backward_collectives,
               p->layers[p->nlayers - 1].tp_forward_collectives,
               p->layers[p->nlayers - 1].tp_backward_collectives);
    if (B && B->selective_recompute_ms >= 0)
        printf("selective recomputation: %.4f ms of attention core per block run again, "
               "%.0f bytes kept instead of %.0f\n", B->selective_recompute_ms,
               B->selective_saved_bytes, B->saved_bytes);
}

int cmd_profile_llm(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"model", required_argument, 0, O_MODEL}, {"cluster", required_argument, 0, 'c'},
        {"output", required_argument, 0, 'o'},    {"tp", required_argument, 0, O_TP},
        {"seq-len", required_argument, 0, O_SEQ}, {"microbatch-size", required_argument, 0, O_MBS},
        {"precision", required_argument, 0, O_PREC}, {"quiet", no_argument, 0, O_QUIET},
        {"sequence-parallel", no_argument, 0, O_SP},
        {"attention", required_argument, 0, O_ATTN},
        {"cross-entropy", required_argument, 0, O_CE},
        {"grad-accum", required_argument, 0, O_GA},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    llm_options o;
    llm_options_init(&o);
    const char *mpath = NULL, *cpath = NULL, *out = NULL;
    int quiet = 0, c, seq = 0;
    optind = 1;
    while ((c = cli_getopt("profile", argc, argv, "c:o:h", longopts)) != -1) {
        switch (c) {
        case O_MODEL: mpath = optarg; break;
        case 'c': cpath = optarg; break;
        case 'o': out = optarg; break;
        case O_TP:
            if (cli_int("profile", "--tp", optarg, 1, 1024, &o.tp)) return 2;
            break;
        case O_SEQ:
            if (cli_int("profile", "--seq-len", optarg, 1, 100000000, &seq)) return 2;
            o.seq = seq;
            break;
        case O_MBS:
            if (cli_int("profile", "--microbatch-size", optarg, 1, 1 << 20, &o.microbatch))
                return 2;
            break;
        case O_PREC: {
            int p = dev_precision_parse(optarg);
            if (p < 0)
                return cli_fail("profile", "--precision: expected bf16, fp16, tf32, fp32 or fp8 "
                                "(got \"%s\")", optarg);
            o.precision = (dev_precision)p;
            break;
        }
        case O_QUIET: quiet = 1; break;
        case O_SP: o.sequence_parallel = 1; break;
        case O_ATTN: {
            int a;
            if (cli_attention("profile", optarg, &a)) return 2;
            o.attention = (llm_attention)a;
            break;
        }
        case O_CE:
            if (cli_cross_entropy("profile", optarg, &o.cross_entropy)) return 2;
            break;
        case O_GA:
            if (cli_grad_accum("profile", optarg, &o.grad_accum)) return 2;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return 2;
        }
    }
    if (optind < argc)
        return cli_fail("profile", "unexpected argument \"%s\" with --model; see plumb profile "
                        "--model --help", argv[optind]);
    if (!mpath) return cli_fail("profile", "expected --model CONFIG.json");
    if (!cpath)
        return cli_fail("profile", "expected -c CLUSTER.json with --model (its device type "
                        "costs the layers)");
    if (quiet && !out) /* it would print nothing and write nothing */
        return cli_fail("profile", "--quiet: expected -o PROFILE.json with it (without -o "
                        "the table is the only output)");
    const char *inputs[2] = {mpath, cpath};
    if (out && cli_output_ok("profile", "-o", out, inputs, 2)) return 2;
    plumb_err err = {{0}};
    transformer *t = transformer_load(mpath, &err);
    cluster *cl = t ? cluster_load(cpath, &err) : NULL;
    profile *p = cl ? llm_profile_build(t, cl, cpath, &o, &err) : NULL;
    int rc = 2;
    if (!p || (out && profile_save(p, out, &err))) {
        if (err.msg[0] == '-') cli_fail("profile", "%s", err.msg); /* an option's value */
        else err_print(&err);
        goto done;
    }
    if (!quiet) print_table(t, p, &o);
    if (out && !quiet) printf("wrote %s (%d layers)\n", out, p->nlayers);
    rc = 0;
done:
    profile_free(p);
    cluster_free(cl);
    transformer_free(t);
    return rc;
}
