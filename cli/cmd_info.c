/* cmd_info.c: `plumb info FILE...` summarizes profiles, clusters, plans and training
 * checkpoints: what the file describes, its sizes and totals, each with its unit. The file
 * kind comes from "format", or a checkpoint's magic number (read against --model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/cluster.h"
#include "core/device.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/units.h"
#include "exec/checkpoint.h"
#include "exec/model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: plumb info [--model MODEL.json [--check]] FILE...\n\n"
            "Summarizes each plumb file (profile, cluster, plan or checkpoint): the model's\n"
            "layers and times, the cluster's levels and devices, the plan's stages, or a\n"
            "checkpoint's model, optimizer step and state.\n\n"
            "  --model MODEL.json  the model spec a checkpoint (plumb train --save or\n"
            "                      --checkpoint) was written from, which it is read against\n"
            "                      (only with a checkpoint among the files)\n"
            "  --check             read a checkpoint whole: every tensor's checksum and values\n"
            "                      (by default its header and size only, as a resume checks\n"
            "                      them first; with --model)\n"
            "  -h, --help          this text\n"
            "Exit status: 0 ok; 2 bad input (nothing printed: every file is read first).\n");
}

/* A checkpoint of model m: its step and optimizer state, read from the header (ckpt_peek:
 * the header's checksum and fields, the file's size), or with `check` in full (ckpt_load:
 * the tensors' checksums and values too). 0, or 2 with err set. */
static int info_checkpoint(FILE *out, const char *path, const model *m, int check,
                           plumb_err *err)
{
    static const char *const opt[] = {"sgd: weights only", "momentum: weights and momentum",
                                      "adam: weights and both moments"};
    int kind = 0;
    long step = 0;
    if (check) {
        ckpt c;
        if (ckpt_load(path, m, &c, err)) return 2;
        kind = c.opt_kind, step = c.step;
        ckpt_free(&c);
    } else if (ckpt_peek(path, m, &kind, &step, err)) {
        return 2;
    }
    struct stat sb;
    char sz[32];
    units_bytes(stat(path, &sb) ? 0 : (double)sb.st_size, sz, sizeof sz);
    fprintf(out, "checkpoint %s: model %s (%d layers, %lld parameters), %ld optimizer steps, "
           "optimizer %s; %s\n", path, m->name, m->nlayers, m->nparams, step,
           opt[kind >= 0 && kind <= 2 ? kind : 0], sz);
    fprintf(out, "  %s\n", check ? "checked whole: header, size, every tensor's checksum and values"
                           : "header and size checked (--check reads the tensors too)");
    return 0;
}

static void info_profile(FILE *out, const profile *p)
{
    int kinds_input = 0;
    double act = 0;
    for (int i = 0; i < p->nlayers; i++) {
        if (!strncmp(p->layers[i].kind, "Input", 5)) kinds_input++;
        act += p->layers[i].activation_bytes;
    }
    fprintf(out, "profile %s: %d layers (%d inputs), %d edges (%s), profiled on %s at minibatch %d\n",
           p->name, p->nlayers, kinds_input, p->nedges, profile_is_chain(p) ? "chain" : "DAG",
           p->device, p->minibatch);
    char pb[32], ab[32];
    fprintf(out, "  forward %.3f ms, backward %.3f ms per minibatch; parameters %s; "
           "activations %s per minibatch\n",
           profile_total_forward_ms(p), profile_total_backward_ms(p),
           units_bytes(profile_total_parameter_bytes(p), pb, sizeof pb),
           units_bytes(act, ab, sizeof ab));
}

static void info_cluster(FILE *out, const cluster *c)
{
    fprintf(out, "cluster %s: %d devices in %d servers, %d levels\n", c->name, c->ndevices,
           c->nservers, c->nlevels);
    char bw[32], mem[32];
    for (int l = 0; l < c->nlevels; l++)
        fprintf(out, "  level %d %-10s x%-4d %14s  latency %.1f us\n", l, c->levels[l].name,
               c->levels[l].count, units_gbit(c->levels[l].bandwidth_Bps, bw, sizeof bw),
               c->levels[l].latency_s * 1e6);
    for (int t = 0; t < c->ntypes; t++) {
        int n = 0;
        for (int s = 0; s < c->nservers; s++) n += c->server_type[s] == t;
        fprintf(out, "  device %-8s memory %s, speed x%.2f, %d servers\n", c->types[t].name,
               units_bytes(c->types[t].memory_bytes, mem, sizeof mem), c->types[t].speed, n);
        const device_type *d = &c->types[t];
        if (d->peak_flops_prec[DEV_BF16] > 0 || d->memory_Bps > 0) { /* docs/llm.md */
            fprintf(out, "    dense peak TFLOP/s:");
            for (int k = 0; k < DEV_NPREC; k++)
                if (d->peak_flops_prec[k] > 0)
                    fprintf(out, " %s %.4g", dev_precision_name((dev_precision)k),
                           d->peak_flops_prec[k] / 1e12);
            if (d->memory_Bps > 0) fprintf(out, "; memory %.4g GB/s", d->memory_Bps / 1e9);
            fputc('\n', out);
        }
        if (d->eff.gemm > 0)
            fprintf(out, "    efficiency: gemm %.2f, attention %.2f, memory %.2f, kernel %.3g us\n",
                   d->eff.gemm, d->eff.attention, d->eff.memory, d->eff.kernel_overhead_s * 1e6);
        if (d->eff.gemm_fp8 > 0) /* only then: other files' lines read as before */
            fprintf(out, "    efficiency of fp8 multiplies: gemm_fp8 %.4g\n", d->eff.gemm_fp8);
    }
}

static void info_plan(FILE *out, const plan *pl)
{
    fprintf(out, "plan: %s on %s, schedule %s, %d stages, %d microbatches of %d samples%s\n",
           pl->prof->name, pl->clus->name, sched_kind_name(pl->schedule), pl->nstages,
           pl->microbatches, pl->microbatch_size, pl->recompute ? ", recomputation" : "");
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        fprintf(out, "  stage %d: layers %d-%d, %d replica%s on devices", s, st->first_layer,
               st->last_layer, st->replicas, st->replicas == 1 ? "" : "s");
        for (int r = 0; r < st->replicas; r++) fprintf(out, " %d", st->devices[r]);
        fprintf(out, "\n");
    }
    if (pl->pred_samples_per_s > 0)
        fprintf(out, "  predicted %.1f samples/s, %.4f s per iteration\n", pl->pred_samples_per_s,
               pl->pred_iteration_s);
}

int cmd_info(int argc, char **argv)
{
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
                                             {"model", required_argument, NULL, 'm'},
                                             {"check", no_argument, NULL, 'c'},
                                             {0, 0, 0, 0}};
    int c, check = 0;
    const char *model_file = NULL;
    optind = 1;
    while ((c = cli_getopt("info", argc, argv, "h", longopts)) != -1) {
        if (c == 'h') { usage(stdout); return 0; }
        if (c == 'm') { model_file = optarg; continue; }
        if (c == 'c') { check = 1; continue; }
        return 2;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (check && !model_file) return cli_fail("info", "--check: expected --model too");
    plumb_err err;
    err_clear(&err);
    model *m = model_file ? model_load(model_file, &err) : NULL;
    if (model_file && !m) { err_print(&err); return 2; }
    /* the summaries are printed only when every file loads: no partial output */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        model_free(m);
        return cli_fail("info", "out of memory");
    }
    int rc = 0, nckpt = 0;
    for (int i = optind; i < argc && !rc; i++) {
        err_clear(&err);
        if (ckpt_is_checkpoint(argv[i])) {
            nckpt++;
            if (m) {
                rc = info_checkpoint(out, argv[i], m, check, &err);
            } else {
                err_set(&err, argv[i], NULL, "a plumb checkpoint: expected --model "
                        "MODEL.json, the model spec it was saved from");
                rc = 2;
            }
            if (rc) err_print(&err);
            continue;
        }
        cJSON *root = json_load_file(argv[i], &err);
        if (!root) {
            err_print(&err);
            rc = 2;
            break;
        }
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
        const char *fmt = cJSON_IsString(f) ? f->valuestring : "";
        if (!strcmp(fmt, PROFILE_FORMAT)) {
            profile *p = profile_from_json(root, argv[i], &err);
            if (p) info_profile(out, p); else rc = 2;
            profile_free(p);
        } else if (!strcmp(fmt, CLUSTER_FORMAT)) {
            cluster *cl = cluster_from_json(root, argv[i], &err);
            if (cl) info_cluster(out, cl); else rc = 2;
            cluster_free(cl);
        } else if (!strcmp(fmt, PLAN_FORMAT)) {
            cJSON_Delete(root);
            root = NULL;
            plan *pl = plan_load(argv[i], &err);
            if (pl) info_plan(out, pl); else rc = 2;
            plan_free(pl);
        } else {
            err_set(&err, argv[i], "format",
                    "expected \"%s\", \"%s\" or \"%s\", or a checkpoint (got \"%s\")",
                    PROFILE_FORMAT, CLUSTER_FORMAT, PLAN_FORMAT, fmt);
            rc = 2;
        }
        cJSON_Delete(root);
        if (rc) err_print(&err);
    }
    model_free(m);
    /* --model (and --check) read checkpoints only: with none among the files they were
     * ignored, exit 0 */
    if (!rc && model_file && !nckpt)
        rc = cli_fail("info", "--model: goes with a checkpoint file (expected one among the "
                      "files, got none)");
    if (fclose(out) != 0 && !rc) rc = cli_fail("info", "out of memory");
    if (!rc) fwrite(text, 1, len, stdout);
    free(text);
    return rc;
}
