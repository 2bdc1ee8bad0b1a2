/* cmd_info.c: `plumb info FILE...` summarizes profiles, clusters and plans: what the file
 * describes, its sizes and totals, each with its unit. The file kind comes from "format". */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/cluster.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/units.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: plumb info FILE...\n\n"
            "Summarizes each plumb file (profile, cluster or plan): the model's layers and\n"
            "times, the cluster's levels and devices, or the plan's stages.\n");
}

static void info_profile(const profile *p)
{
    int kinds_input = 0;
    double act = 0;
    for (int i = 0; i < p->nlayers; i++) {
        if (!strncmp(p->layers[i].kind, "Input", 5)) kinds_input++;
        act += p->layers[i].activation_bytes;
    }
    printf("profile %s: %d layers (%d inputs), %d edges (%s), profiled on %s at minibatch %d\n",
           p->name, p->nlayers, kinds_input, p->nedges, profile_is_chain(p) ? "chain" : "DAG",
           p->device, p->minibatch);
    char pb[32], ab[32];
    printf("  forward %.3f ms, backward %.3f ms per minibatch; parameters %s; "
           "activations %s per minibatch\n",
           profile_total_forward_ms(p), profile_total_backward_ms(p),
           units_bytes(profile_total_parameter_bytes(p), pb, sizeof pb),
           units_bytes(act, ab, sizeof ab));
}

static void info_cluster(const cluster *c)
{
    printf("cluster %s: %d devices in %d servers, %d levels\n", c->name, c->ndevices,
           c->nservers, c->nlevels);
    char bw[32], mem[32];
    for (int l = 0; l < c->nlevels; l++)
        printf("  level %d %-10s x%-4d %14s  latency %.1f us\n", l, c->levels[l].name,
               c->levels[l].count, units_gbit(c->levels[l].bandwidth_Bps, bw, sizeof bw),
               c->levels[l].latency_s * 1e6);
    for (int t = 0; t < c->ntypes; t++) {
        int n = 0;
        for (int s = 0; s < c->nservers; s++) n += c->server_type[s] == t;
        printf("  device %-8s memory %s, speed x%.2f, %d servers\n", c->types[t].name,
               units_bytes(c->types[t].memory_bytes, mem, sizeof mem), c->types[t].speed, n);
    }
}

static void info_plan(const plan *pl)
{
    printf("plan: %s on %s, schedule %s, %d stages, %d microbatches of %d samples%s\n",
           pl->prof->name, pl->clus->name, sched_kind_name(pl->schedule), pl->nstages,
           pl->microbatches, pl->microbatch_size, pl->recompute ? ", recomputation" : "");
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        printf("  stage %d: layers %d-%d, %d replica%s on devices", s, st->first_layer,
               st->last_layer, st->replicas, st->replicas == 1 ? "" : "s");
        for (int r = 0; r < st->replicas; r++) printf(" %d", st->devices[r]);
        printf("\n");
    }
    if (pl->pred_samples_per_s > 0)
        printf("  predicted %.1f samples/s, %.4f s per iteration\n", pl->pred_samples_per_s,
               pl->pred_iteration_s);
}

int cmd_info(int argc, char **argv)
{
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = cli_getopt("info", argc, argv, "h", longopts)) != -1) {
        if (c == 'h') { usage(stdout); return 0; }
        return 2;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        plumb_err err;
        err_clear(&err);
        cJSON *root = json_load_file(argv[i], &err);
        if (!root) { err_print(&err); return 2; }
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
        const char *fmt = cJSON_IsString(f) ? f->valuestring : "";
        int rc = 0;
        if (!strcmp(fmt, PROFILE_FORMAT)) {
            profile *p = profile_from_json(root, argv[i], &err);
            if (p) info_profile(p); else rc = 2;
            profile_free(p);
        } else if (!strcmp(fmt, CLUSTER_FORMAT)) {
            cluster *cl = cluster_from_json(root, argv[i], &err);
            if (cl) info_cluster(cl); else rc = 2;
            cluster_free(cl);
        } else if (!strcmp(fmt, PLAN_FORMAT)) {
            cJSON_Delete(root);
            root = NULL;
            plan *pl = plan_load(argv[i], &err);
            if (pl) info_plan(pl); else rc = 2;
            plan_free(pl);
        } else {
            err_set(&err, argv[i], "format",
                    "expected \"%s\", \"%s\" or \"%s\" (got \"%s\")", PROFILE_FORMAT,
                    CLUSTER_FORMAT, PLAN_FORMAT, fmt);
            rc = 2;
        }
        cJSON_Delete(root);
        if (rc) { err_print(&err); return rc; }
    }
    return 0;
}
