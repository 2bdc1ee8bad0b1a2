/* text.c: the simulator's terminal output: the report table (every figure with its unit),
 * the what-if changes, and a text Gantt chart of the timeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/pplayout.h"
#include "core/units.h"
#include "sim/memory.h" /* sim_memory_step_total */
#include "sim/sim.h"

/* "12.3 ms", "4.56 s", "789 us". */
static char *fmt_time(double s, char *buf, size_t n)
{
    double a = fabs(s);
    if (a == 0)
        snprintf(buf, n, "0 s");
    else if (a < 1e-3)
        snprintf(buf, n, "%.1f us", s * 1e6);
    else if (a < 1)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.3f s", s);
    return buf;
}

static char *fmt_value(double v, const char *unit, char *buf, size_t n)
{
    if (strcmp(unit, "s") == 0)
        return fmt_time(v, buf, n);
    if (strcmp(unit, "bytes") == 0)
        return units_bytes(v, buf, n);
    if (strcmp(unit, "fraction") == 0)
        snprintf(buf, n, "%.2f %%", 100 * v);
    else if (strcmp(unit, "bool") == 0)
        snprintf(buf, n, "%s", v != 0 ? "yes" : "no");
    else
        snprintf(buf, n, "%.1f %s", v, unit);
    return buf;
}

/* The runtime settings' what-ifs of o (recompute .. optimizer_state) as plan --model's
 * options name them ("recompute full; checkpoint-layers 2; zero 1; tp-overlap full;
 * overlap-param-gather; grad-reduce bf16"), the first after sep. */
static void print_runtime_whatifs(const sim_options *o, const char *sep, FILE *out)
{
    if (o->recompute >= 0) {
        fprintf(out, "%srecompute %s", sep, recompute_kind_name((recompute_kind)o->recompute));
        sep = "; ";
    }
    if (o->checkpoint_layers >= 0) {
        fprintf(out, "%scheckpoint-layers %d", sep, o->checkpoint_layers);
        sep = "; ";
    }
    if (o->zero >= 0) {
        fprintf(out, "%szero %d", sep, o->zero);
        sep = "; ";
    }
    if (o->tp_overlap >= 0) {
        fprintf(out, "%stp-overlap %s", sep, plan_tp_overlap_name((plan_tp_overlap)o->tp_overlap));
        sep = "; ";
    }
    if (o->overlap_param_gather >= 0) {
        fprintf(out, "%s%soverlap-param-gather", sep, o->overlap_param_gather ? "" : "no ");
        sep = "; ";
    }
    if (o->fp8_param_gather >= 0) {
        fprintf(out, "%s%sfp8-param-gather", sep, o->fp8_param_gather ? "" : "no ");
        sep = "; ";
    }
    if (o->grad_reduce >= 0) {
        fprintf(out, "%sgrad-reduce %s", sep, dev_precision_name((dev_precision)o->grad_reduce));
        sep = "; ";
    }
    if (o->optimizer_state >= 0)
        fprintf(out, "%soptimizer-state %s", sep,
                dev_precision_name((dev_precision)o->optimizer_state));
}

/* One line naming every what-if the run applied, when it applied any. */
static void print_whatifs(const sim_report *r, FILE *out)
{
    const sim_options *o = &r->whatif;
    if (!sim_options_has_whatif(o))
        return;
    char a[32];
    const char *sep = "";
    fprintf(out, "what-ifs        ");
    if (o->schedule >= 0) {
        fprintf(out, "schedule %s", sched_kind_name((sched_kind)o->schedule));
        sep = "; ";
    }
    if (o->microbatches > 0) {
        fprintf(out, "%s%d microbatches", sep, o->microbatches);
        sep = "; ";
    }
    if (o->straggler_device >= 0 && o->straggler_factor != 1) {
        fprintf(out, "%sdevice %d computes x%g slower", sep, o->straggler_device,
                o->straggler_factor);
        sep = "; ";
    }
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++)
        if (o->bandwidth_Bps[l] > 0) {
            fprintf(out, "%slevel %d%s%s%s at %s", sep, l, r->level_names[l][0] ? " (" : "",
                    r->level_names[l], r->level_names[l][0] ? ")" : "",
                    units_gbit(o->bandwidth_Bps[l], a, sizeof a));
            sep = "; ";
        }
    if (o->memory_limit_bytes > 0) {
        fprintf(out, "%smemory at most %s per device", sep,
                units_bytes(o->memory_limit_bytes, a, sizeof a));
        sep = "; ";
    }
    if (o->p2p_sync >= 0) {
        fprintf(out, "%sp2p %s", sep, o->p2p_sync ? "sync" : "overlap");
        sep = "; ";
    }
    if (o->grad_sync_end >= 0) {
        fprintf(out, "%sgrad-sync %s", sep, o->grad_sync_end ? "end" : "overlap");
        sep = "; ";
    }
    if (o->p2p_whole >= 0) {
        fprintf(out, "%sp2p-split %s", sep, o->p2p_whole ? "whole" : "scatter-gather");
        sep = "; ";
    }
    print_runtime_whatifs(o, sep, out);
    fprintf(out, " (instead of the plan as written)\n");
}

/* The parallel dims, and tokens/s, TFLOP/s per GPU (or CPU worker: r->device_noun) and
 * MFU where known, for plans with tensor parallelism or a token model. */
static void print_layout(const sim_report *r, FILE *out)
{
    if (r->tp <= 1 && r->tokens_per_sample <= 0 && r->precision == DEV_FP32 && !r->zero &&
        !r->grad_sync_end)
        return;
    const char *noun = r->device_noun ? r->device_noun : "GPU";
    char cps[32] = ""; /* only when set: reports without it read as before */
    if (r->cp > 1) snprintf(cps, sizeof cps, " x cp %d", r->cp);
    char split[96] = ""; /* the plan's uneven split, as the dashboard's words */
    char w[40];
    for (int i = 0; pplayout_split_word(&r->split, i, 0, w, sizeof w); i++) {
        size_t k = strlen(split);
        snprintf(split + k, sizeof split - k, ", %s", w);
    }
    fprintf(out, "layout          tp %d%s x pp %d x dp %d = %d %ss%s, global batch %d, %s%s%s%s%s%s%s%s%s%s%s%s%s%s\n",
            r->tp, cps, r->pp, r->dp, r->gpus, noun, r->interleave > 1 ? " (interleaved)" : "",
            r->global_batch, dev_precision_name(r->precision),
            r->fp8_param_gather ? ", fp8-param-gather" : "", /* as plan --model's text */
            r->cross_entropy ? ", cross-entropy " : "", /* likewise */
            r->cross_entropy ? plan_cross_entropy_name(r->cross_entropy) : "",
            r->grad_accum ? ", grad-accum unfused" : "", /* likewise */
            r->sequence_parallel ? ", sequence parallel" : "",
            r->zero ? ", ZeRO-1 optimizer" : "",
            r->grad_reduce == DEV_BF16 ? ", bf16 gradients" : "",
            r->optimizer_state == DEV_BF16 ? ", bf16 optimizer state" : "",
            r->grad_sync_end ? ", gradients reduced at the end" : "",
            r->p2p_whole && r->tp > 1 && !r->sequence_parallel ? ", whole-tensor p2p" : "",
            split, r->pipeline_layout ? ", pipeline layout " : "", /* as plan --model's */
            r->pipeline_layout ? r->pipeline_layout : "");
    if (r->tokens_per_sample <= 0 && r->tflops_per_gpu < 0)
        return;
    fprintf(out, "model speed    ");
    if (r->tokens_per_sample > 0)
        fprintf(out, " %.0f tokens/s", r->tokens_per_s);
    if (r->tflops_per_gpu >= 0)
        fprintf(out, "%s %.1f TFLOP/s per %s (%.1f without recomputation)",
                r->tokens_per_sample > 0 ? "," : "", r->tflops_per_gpu, noun,
                r->model_tflops_per_gpu);
    if (r->mfu >= 0)
        fprintf(out, ", MFU %.1f %%%s", 100 * r->mfu,
                r->precision == DEV_FP8 ? " of the bf16 peak" : "");
    fprintf(out, "\n");
}

/* With tensor parallelism, per stage and microbatch: F and B with the collectives inside
 * them, and the data-parallel reduction. */
static void print_tp_stages(const sim_report *r, FILE *out)
{
    if (r->tp <= 1 || !r->stages)
        return;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "\nper stage, per microbatch (tensor-parallel collectives inside F and B):\n");
    fprintf(out, "%-6s %-9s %12s %12s %12s %12s %14s\n", "stage", "layers", "forward",
            "of it TP", "backward", "of it TP", "DP reduction");
    for (int i = 0; i < r->nstages; i++) {
        const sim_stage_report *g = &r->stages[i];
        char layers[24];
        snprintf(layers, sizeof layers, "%d-%d", g->first_layer, g->last_layer);
        fprintf(out, "%-6d %-9s %12s %12s %12s %12s %14s\n", i, layers,
                fmt_time(g->forward_s, a, sizeof a), fmt_time(g->tp_comm_forward_s, b, sizeof b),
                fmt_time(g->backward_s, c, sizeof c),
                fmt_time(g->tp_comm_backward_s, d, sizeof d),
                fmt_time(g->allreduce_s, e, sizeof e));
    }
}

void sim_print_report(const sim_report *r, const sim_changes *changes, FILE *out)
{
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(out, "schedule        %s, %d stages%s, %d microbatches x %d samples "
            "(minibatch %d samples), %d iterations simulated%s%s\n",
            sched_kind_name(r->schedule), r->nstages,
            r->chunks > 1 ? " (virtual)" : "", r->microbatches, r->microbatch_size,
            r->microbatches * r->microbatch_size, r->iterations,
            r->iterations > r->iterations_requested && r->iterations_requested > 0
                ? " (raised: the pipeline needs them to reach its steady state)" : "",
            r->recompute == RECOMPUTE_SELECTIVE ? ", selective recompute"
            : r->recompute ? ", recompute" : "");
    print_layout(r, out);
    print_whatifs(r, out);
    fprintf(out, "throughput      %.1f samples/s\n", r->samples_per_s);
    if (r->steady)
        fprintf(out, "iteration time  %s (steady state, iterations %d to %d)\n",
                fmt_time(r->iteration_s, a, sizeof a), r->steady_first, r->steady_last);
    else
        fprintf(out, "iteration time  %s (whole run / %d, pipeline fill and drain included: "
                "the schedule is too short for a steady state)\n",
                fmt_time(r->iteration_s, a, sizeof a), r->iterations);
    fprintf(out, "bubble          %.2f %% of device time idle\n", 100 * r->bubble_fraction);
    fprintf(out, "makespan        %s for the whole run\n", fmt_time(r->makespan_s, a, sizeof a));
    fprintf(out, "peak memory     %s on the fullest device (%s)\n",
            units_bytes(r->peak_memory_bytes, a, sizeof a),
            r->fits ? "every device fits" : "DOES NOT FIT");
    char used[160];
    if (sim_report_devices_text(r, used, sizeof used) >= 0)
        fprintf(out, "devices         %s\n", used);
    fprintf(out, "\nper device, per iteration:\n");
    fprintf(out, "%-7s %-16s %-8s %12s %12s %12s %12s %12s %5s\n", "device", "type", "stages",
            "busy", "idle", "comm", "peak memory", "capacity", "fits");
    for (int i = 0; i < r->ndevices; i++) {
        const sim_device_report *dv = &r->devices[i];
        char st[32] = "";
        size_t k = 0;
        for (int j = 0; j < dv->nstages && j < 8 && k + 4 < sizeof st; j++)
            k += (size_t)snprintf(st + k, sizeof st - k, j ? ",%d" : "%d", dv->stages[j]);
        fprintf(out, "%-7d %-16.16s %-8s %12s %12s %12s %12s %12s %5s\n", dv->device,
                dv->type, st, fmt_time(dv->busy_s, a, sizeof a),
                fmt_time(dv->idle_s, b, sizeof b), fmt_time(dv->comm_s, c, sizeof c),
                units_bytes(dv->mem.total, d, sizeof d), units_bytes(dv->mem.capacity, e, sizeof e),
                dv->mem.fits ? "yes" : "NO");
    }
    fprintf(out, "\nmemory at the peak (weights x versions + gradients + optimizer + "
            "activations + gradient buffers + scratch + staging):\n");
    for (int i = 0; i < r->ndevices; i++) {
        const sim_device_report *dv = &r->devices[i];
        char f[32], g[32];
        fprintf(out, "  device %-4d %s x %d + %s + %s + %s + %s + %s + %s (%d microbatch%s in "
                "flight)",
                dv->device, units_bytes(dv->weight_versions > 0 ? dv->mem.weights /
                                      dv->weight_versions : dv->mem.weights, a, sizeof a),
                dv->weight_versions > 0 ? dv->weight_versions : 1,
                units_bytes(dv->mem.gradients, b, sizeof b),
                units_bytes(dv->mem.optimizer, c, sizeof c),
                units_bytes(dv->mem.activations, d, sizeof d),
                units_bytes(dv->mem.buffers, e, sizeof e),
                units_bytes(dv->mem.workspace, f, sizeof f), units_bytes(dv->mem.staging, g, sizeof g),
                dv->max_inflight, dv->max_inflight == 1 ? "" : "es");
        if (dv->mem.step_transient > 0) /* the step's moment, without the activations */
            fprintf(out, "; at the step %s: + %s fp32 gradient copy, less the activations "
                    "and buffers",
                    units_bytes(sim_memory_step_total(&dv->mem), a, sizeof a),
                    units_bytes(dv->mem.step_transient, b, sizeof b));
        fputc('\n', out);
    }
    print_tp_stages(r, out);
    if (r->nlinks) {
        fprintf(out, "\nlinks:\n%-12s %5s %14s %14s %12s %10s\n", "link", "level",
                "per iteration", "whole run", "busy", "transfers");
        for (int i = 0; i < r->nlinks; i++) {
            const sim_link_report *l = &r->links[i];
            char nm[32];
            snprintf(nm, sizeof nm, "%d->%d", l->src, l->dst);
            fprintf(out, "%-12s %5d %14s %14s %12s %10lld\n", nm, l->level,
                    units_bytes(l->bytes_per_iteration, a, sizeof a),
                    units_bytes(l->bytes, b, sizeof b), fmt_time(l->busy_s, c, sizeof c),
                    l->transfers);
        }
    } else {
        fprintf(out, "\nlinks: none carried data\n");
    }
    if (changes && changes->n) {
        fprintf(out, "\nwhat changed (what-if against the base run):\n%-32s %16s %16s %10s\n",
                "figure", "base", "what-if", "ratio");
        for (int i = 0; i < changes->n; i++) {
            const sim_change *ch = &changes->c[i];
            char ratio[24];
            if (ch->base != 0)
                snprintf(ratio, sizeof ratio, "x%.3f", ch->ratio);
            else
                snprintf(ratio, sizeof ratio, "-");
            fprintf(out, "%-32s %16s %16s %10s\n", ch->figure,
                    fmt_value(ch->base, ch->unit, a, sizeof a),
                    fmt_value(ch->whatif, ch->unit, b, sizeof b), ratio);
        }
    }
}

/* --- Gantt ------------------------------------------------------------------------------ */

static const char kind_char[TL_NKINDS] = {'F', 'B', 'I', 'W', 'S', '>', '<', 'A', 't', 't', 't'};

void sim_print_gantt(const sim_report *r, int width, FILE *out)
{
    const timeline *tl = r->tl;
    if (!tl) {
        fprintf(out, "(no timeline recorded)\n");
        return;
    }
    if (width < 20)
        width = 20;
    double T = timeline_end(tl);
    if (!(T > 0) || !isfinite(T)) { /* NaN and Inf too: they never reach a column index */
        fprintf(out, "(empty timeline)\n");
        return;
    }
    int nt = tl->ntracks;
    /* cover[track][col][kind]: seconds of each kind in each column */
    double *cover = calloc((size_t)nt * width * TL_NKINDS, sizeof *cover);
    if (!cover) {
        fprintf(out, "(out of memory)\n");
        return;
    }
    double col = T / width;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        double s = e->start_s, f = e->start_s + e->dur_s;
        int c0 = (int)(s / col), c1 = (int)(f / col);
        if (c1 >= width)
            c1 = width - 1;
        for (int c = c0 < 0 ? 0 : c0; c <= c1; c++) {
            double lo = fmax(s, c * col), hi = fmin(f, (c + 1) * col);
            if (hi > lo)
                cover[((size_t)e->track * width + c) * TL_NKINDS + e->kind] += hi - lo;
            else if (e->dur_s == 0 && e->kind == TL_STEP)
                cover[((size_t)e->track * width + c) * TL_NKINDS + e->kind] += 0.5 * col;
        }
    }
    char a[32];
    fprintf(out, "timeline: %s per column; F forward, B backward, I input grad, W weight "
            "grad, S step, A all-reduce, > activations, < gradients, . idle\n",
            fmt_time(col, a, sizeof a));
    char *line = malloc((size_t)width + 1);
    for (int pass = 0; line && pass < 3; pass++) {
        int want = pass == 0 ? TL_TRACK_DEVICE : pass == 1 ? TL_TRACK_COLLECTIVE : TL_TRACK_LINK;
        for (int t = 0; t < nt; t++) {
            if (tl->tracks[t].kind != want)
                continue;
            for (int c = 0; c < width; c++) {
                const double *cv = &cover[((size_t)t * width + c) * TL_NKINDS];
                int best = -1;
                double bv = 0, sum = 0;
                for (int k = 0; k < TL_NKINDS; k++) {
                    sum += cv[k];
                    if (cv[k] > bv) {
                        bv = cv[k];
                        best = k;
                    }
                }
                line[c] = best >= 0 && sum >= 0.3 * col ? kind_char[best] : '.';
            }
            line[width] = 0;
            fprintf(out, "%-22.22s |%s|\n", tl->tracks[t].name, line);
        }
    }
    free(line);
    /* the axis: ticks every 10 columns, labelled at the ends */
    fprintf(out, "%-22s  ", "");
    for (int c = 0; c < width; c++)
        fputc(c % 10 == 0 || c == width - 1 ? '+' : '-', out);
    fprintf(out, "\n%-22s  0", "");
    char endl[32];
    fmt_time(T, endl, sizeof endl);
    int pad = width - 1 - (int)strlen(endl);
    fprintf(out, "%*s%s\n", pad > 0 ? pad : 1, "", endl);
    free(cover);
}
