/* synth.c: synthetic profiles, clusters and plans (synth.h) built in memory: the cluster
 * through its JSON form (so it gets the loader's checks), the profile field by field. */
#include "sim/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/schedule_traits.h"

void sim_synth_init(sim_synth *s)
{
    memset(s, 0, sizeof *s);
    s->nstages = 4;
    s->layers_per_stage = 1;
    s->replicas = 1;
    s->forward_ms = 1;
    s->backward_ms = 2;
    s->input_ms = s->weight_ms = -1;
    s->activation_bytes = 1e6;
    s->parameter_bytes = 4e6;
    s->minibatch = 32;
    s->devices_per_server = 8;
    s->bw_gbit[0] = s->bw_gbit[1] = 100;
    s->memory_gib = 80;
    s->speed = 1;
    s->schedule = SCHED_1F1B_FLUSH;
    s->chunks = 1;
    s->microbatches = 8;
    s->microbatch_size = 32;
    s->optimizer = OPT_SGD;
}

static int ranks_of(const sim_synth *s)
{
    return s->chunks > 1 ? s->nstages / s->chunks : s->nstages;
}

cluster *sim_synth_cluster(const sim_synth *s, plumb_err *err)
{
    int per = s->devices_per_server > 0 ? s->devices_per_server : 1;
    int need = ranks_of(s) * (s->replicas > 0 ? s->replicas : 1);
    int servers = s->servers > 0 ? s->servers : (need + per - 1) / per;
    if (servers < 1)
        servers = 1;
    char eg[2][64];
    for (int l = 0; l < 2; l++) {
        eg[l][0] = 0;
        if (s->egress_gbit[l] > 0)
            snprintf(eg[l], sizeof eg[l], ", \"egress_gbit_per_s\": %.17g", s->egress_gbit[l]);
    }
    char text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"plumb-cluster/1\", \"name\": \"synthetic\", \"levels\": ["
             "{\"name\": \"intra\", \"count\": %d, \"bandwidth_gbit_per_s\": %.17g, "
             "\"latency_us\": %.17g%s},"
             "{\"name\": \"inter\", \"count\": %d, \"bandwidth_gbit_per_s\": %.17g, "
             "\"latency_us\": %.17g%s}],"
             "\"device_types\": [{\"name\": \"synth\", \"memory_gib\": %.17g, "
             "\"speed\": %.17g}], \"device_type\": \"synth\"}",
             per, s->bw_gbit[0], s->latency_us[0], eg[0], servers, s->bw_gbit[1],
             s->latency_us[1], eg[1], s->memory_gib, s->speed);
    cJSON *root = json_parse_text("synthetic-cluster", text, strlen(text), err);
    if (!root)
        return NULL;
    cluster *c = cluster_from_json(root, "synthetic-cluster", err);
    cJSON_Delete(root);
    return c;
}

static profile *synth_profile(const sim_synth *s, plumb_err *err)
{
    int n = s->nstages * s->layers_per_stage;
    profile *p = profile_alloc(n, 0);
    if (!p) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    p->name = strdup("synthetic");
    p->device = strdup("synth");
    p->source = strdup("sim_synth_plan");
    p->minibatch = s->minibatch;
    int ok = p->name && p->device && p->source;
    for (int i = 0; i < n && ok; i++) {
        profile_layer *L = &p->layers[i];
        char nm[32];
        snprintf(nm, sizeof nm, "layer%d", i);
        L->name = strdup(nm);
        L->kind = strdup("Linear");
        L->desc = strdup("");
        ok = L->name && L->kind && L->desc;
        L->forward_ms = s->forward_ms;
        L->backward_ms = s->backward_ms;
        L->backward_input_ms = s->input_ms;
        L->backward_weight_ms = s->weight_ms;
        L->activation_bytes = s->activation_bytes;
        L->parameter_bytes = s->parameter_bytes;
    }
    if (!ok) {
        profile_free(p);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    return p;
}

plan *sim_synth_plan(const sim_synth *s, plumb_err *err)
{
    if (s->nstages < 1 || s->layers_per_stage < 1 || s->replicas < 1 || s->chunks < 1 ||
        s->nstages % s->chunks || s->microbatches < 1 || s->microbatch_size < 1 ||
        s->minibatch < 1) {
        err_set(err, NULL, NULL, "synthetic plan: bad spec (stages %d, layers %d, replicas "
                "%d, chunks %d, microbatches %d)", s->nstages, s->layers_per_stage,
                s->replicas, s->chunks, s->microbatches);
        return NULL;
    }
    plan *pl = NULL;
    profile *p = synth_profile(s, err);
    cluster *c = p ? sim_synth_cluster(s, err) : NULL;
    int *devs = malloc((size_t)s->replicas * sizeof *devs);
    if (!p || !c || !devs)
        goto done;
    pl = plan_new(p, c, s->nstages);
    if (!pl) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    pl->schedule = s->schedule;
    pl->chunks = s->chunks;
    pl->microbatches = s->microbatches;
    pl->microbatch_size = s->microbatch_size;
    pl->recompute = s->recompute;
    pl->optimizer = s->optimizer;
    int ranks = ranks_of(s);
    for (int st = 0; st < s->nstages; st++) {
        int r = sched_kind_chunked(s->schedule) ? sched_kind_rank(s->schedule, st, ranks)
                                                 : st % ranks;
        for (int j = 0; j < s->replicas; j++)
            devs[j] = r * s->replicas + j;
        if (plan_set_stage(pl, st, st * s->layers_per_stage,
                           (st + 1) * s->layers_per_stage - 1, s->replicas, devs)) {
            plan_free(pl);
            pl = NULL;
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
    }
done:
    free(devs);
    profile_free(p);
    cluster_free(c);
    return pl;
}
