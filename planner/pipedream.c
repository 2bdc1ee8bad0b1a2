/* pipedream.c: PipeDream-compatible planning: runs the hierarchical program of pd_dp over
 * the states of pd_lattice, walks the chosen splits level by level down to the innermost
 * stages, places them on devices, and fills the figures PipeDream prints (time per stage,
 * speedup over one machine and over data parallelism). Also builds a plumb plan. */
#include "planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_dp.h"
#include "pd_lattice.h"
#include "core/json.h" /* pd_options_to_cluster */
#include "planner/policy.h"

void pd_options_default(pd_options *o)
{
    memset(o, 0, sizeof *o);
    o->nlevels = 1;
    o->machines[0] = 1;
    o->bandwidth_Bps[0] = 1e9;
    o->memory_bytes = 16e9;
    o->speed = 1.0;
}

void pd_options_from_cluster(pd_options *o, const cluster *c)
{
    o->nlevels = c->nlevels < PD_MAX_LEVELS ? c->nlevels : PD_MAX_LEVELS;
    for (int L = 0; L < o->nlevels; L++) {
        o->machines[L] = c->levels[L].count;
        o->bandwidth_Bps[L] = c->levels[L].bandwidth_Bps;
    }
    double mem = INFINITY, speed = INFINITY;
    for (int t = 0; t < c->ntypes; t++) {
        if (c->types[t].memory_bytes < mem) mem = c->types[t].memory_bytes;
        if (c->types[t].speed < speed) speed = c->types[t].speed;
    }
    if (c->ntypes > 0) {
        o->memory_bytes = mem;
        o->speed = speed;
    }
}

cluster *pd_options_to_cluster(const pd_options *o, plumb_err *err)
{
    cJSON *r = cJSON_CreateObject();
    if (!r) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    cJSON_AddStringToObject(r, "format", CLUSTER_FORMAT);
    cJSON_AddStringToObject(r, "name", "pipedream-levels");
    cJSON_AddStringToObject(r, "description", "levels given to plumb plan --pipedream (-n, -b)");
    cJSON *lv = cJSON_AddArrayToObject(r, "levels");
    for (int L = 0; L < o->nlevels; L++) {
        cJSON *e = cJSON_CreateObject();
        char name[32];
        snprintf(name, sizeof name, "level%d", L);
        cJSON_AddStringToObject(e, "name", name);
        cJSON_AddNumberToObject(e, "count", o->machines[L]);
        json_add_num(e, "bandwidth_gbit_per_s", o->bandwidth_Bps[L] * 8.0 / 1e9);
        cJSON_AddNumberToObject(e, "latency_us", 0);
        cJSON_AddItemToArray(lv, e);
    }
    cJSON *ty = cJSON_AddArrayToObject(r, "device_types");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", "pipedream-device");
    json_add_num(t, "memory_gib", o->memory_bytes / (1024.0 * 1024.0 * 1024.0));
    cJSON_AddNumberToObject(t, "speed", 1);
    cJSON_AddItemToArray(ty, t);
    cJSON_AddStringToObject(r, "device_type", "pipedream-device");
    cluster *c = cluster_from_json(r, "(pipedream levels)", err);
    cJSON_Delete(r);
    return c;
}

void pd_result_free(pd_result *r)
{
    if (!r) return;
    for (int s = 0; s < r->nstages; s++) {
        free(r->stages[s].layers);
        free(r->stages[s].devices);
    }
    free(r->stages);
    free(r->config);
    memset(r, 0, sizeof *r);
}

static int check_options(const pd_options *o, plumb_err *err)
{
    if (o->nlevels < 1 || o->nlevels > PD_MAX_LEVELS)
        return err_set(err, NULL, NULL, "expected 1 to %d levels (got %d)", PD_MAX_LEVELS,
                       o->nlevels);
    for (int L = 0; L < o->nlevels; L++) {
        if (o->machines[L] < 1 || o->machines[L] > 4096)
            return err_set(err, NULL, NULL, "level %d: expected 1 to 4096 machines (got %d)",
                           L, o->machines[L]);
        if (!(o->bandwidth_Bps[L] > 0) || !isfinite(o->bandwidth_Bps[L]))
            return err_set(err, NULL, NULL, "level %d: expected a bandwidth > 0 bytes/s", L);
    }
    if (o->machines_in_first_level < 0 ||
        (o->machines_in_first_level > 0 && o->machines_in_first_level > o->machines[0]))
        return err_set(err, NULL, NULL, "num_machines_in_first_level: expected 1 to %d (got %d)",
                       o->machines[0], o->machines_in_first_level);
    if (!(o->memory_bytes > 0)) return err_set(err, NULL, NULL, "memory_size: expected > 0");
    if (!(o->speed > 0) || !isfinite(o->speed))
        return err_set(err, NULL, NULL, "device speed: expected > 0");
    return 0;
}

/* A walk of the chosen splits: leaf stages in order, each with its device list. */
typedef struct walk {
    pd_dp *dp;
    const pd_options *o;
    int group[PD_MAX_LEVELS]; /* devices per machine of level L */
    pd_stage *st;
    int nst, cap;
    int *bw_level;            /* level of the split that ends each stage */
} walk;

static int walk_level(walk *w, int L, int s, int e, const int *bases, int nbases,
                      const int *reps, int endlevel)
{
    int M = w->o->machines[L];
    pd_split *sp = malloc((size_t)M * sizeof *sp);
    int *nb = NULL;
    if (!sp) return -1;
    int cnt = pd_dp_split(w->dp, L, s, e, sp);
    if (cnt < 0) {
        free(sp);
        return -1;
    }
    int off = 0, rc = -1;
    for (int t = 0; t < cnt; t++) {
        int r = sp[t].replicas;
        free(nb);
        nb = malloc((size_t)nbases * r * sizeof *nb);
        if (!nb) goto done;
        int k = 0;
        for (int b = 0; b < nbases; b++)
            for (int q = 0; q < r; q++) nb[k++] = bases[b] + (off + q) * w->group[L];
        int myreps[PD_MAX_LEVELS];
        memcpy(myreps, reps, sizeof myreps);
        myreps[L] = r;
        int lvl_end = t + 1 < cnt ? L : endlevel;
        if (L > 0) {
            if (walk_level(w, L - 1, sp[t].start, sp[t].end, nb, k, myreps, lvl_end)) goto done;
        } else {
            if (w->nst == w->cap) {
                int nc = w->cap ? w->cap * 2 : 16;
                pd_stage *ns = realloc(w->st, (size_t)nc * sizeof *ns);
                int *nl = realloc(w->bw_level, (size_t)nc * sizeof *nl);
                if (ns) w->st = ns;
                if (nl) w->bw_level = nl;
                if (!ns || !nl) goto done;
                w->cap = nc;
            }
            pd_stage *S = &w->st[w->nst];
            memset(S, 0, sizeof *S);
            S->first_state = sp[t].start;
            S->last_state = sp[t].end;
            S->replicas = k;
            S->devices = nb;
            nb = NULL;
            memcpy(S->level_replicas, myreps, sizeof myreps);
            w->bw_level[w->nst] = lvl_end;
            w->nst++;
        }
        off += r;
    }
    rc = 0;
done:
    free(nb);
    free(sp);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int planner_pipedream_run(const profile *p, const int *start_order, const pd_options *o,
                          pd_result *res, plumb_err *err)
{
    memset(res, 0, sizeof *res);
    if (check_options(o, err)) return -1;
    if (p->nlayers < 1) return err_set(err, NULL, NULL, "the profile has no layers");
    pd_lattice *l = pd_lattice_build(p, start_order, o->speed,
                                     o->max_states > 0 ? o->max_states : PD_DEFAULT_MAX_STATES,
                                     o->activation_compression_ratio > 0, err);
    if (!l) return -1;
    pd_dp *dp = pd_dp_new(l, o);
    walk w = {0};
    int *stage_of = NULL;
    int rc = -1;
    if (!dp) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    double T = pd_dp_solve(dp);
    if (isnan(T)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    if (isinf(T)) {
        err_set(err, NULL, NULL, "no partition fits: every configuration breaks the %s",
                o->use_memory_constraint ? "memory constraint (--use_memory_constraint)"
                                         : "options given");
        goto done;
    }
    int n = l->n, top = o->nlevels - 1;
    res->time_per_stage_s = T;
    res->single_stage_s = l->C[n - 1];
    double dpt = l->C[n - 1];
    int within = 1;
    for (int L = 0; L < o->nlevels; L++) {
        int M = o->machines[L];
        double comm = ((double)(4 * (M - 1)) * l->P[n - 1]) / (o->bandwidth_Bps[L] * M) / within;
        dpt = (dpt + comm) / M;
        within = M;
    }
    res->data_parallel_s = dpt;
    res->speedup_vs_1 = res->single_stage_s / T;
    res->speedup_vs_dp = dpt / T;
    res->nstates = n;
    res->compressed = l->compressed;

    /* walk the splits down to the innermost stages */
    w.dp = dp;
    w.o = o;
    w.group[0] = 1;
    for (int L = 1; L < o->nlevels; L++) w.group[L] = w.group[L - 1] * o->machines[L - 1];
    int base0 = 0, reps[PD_MAX_LEVELS] = {0};
    if (walk_level(&w, top, -1, n - 1, &base0, 1, reps, -1)) {
        err_set(err, NULL, NULL, "out of memory while reading back the plan");
        goto done;
    }
    /* layers of each stage: the nodes of its end state not in its start state */
    stage_of = malloc(((size_t)p->nlayers + 1) * sizeof *stage_of);
    if (!stage_of) goto oom;
    for (int i = 0; i < p->nlayers; i++) stage_of[i] = -1;
    for (int t = 0; t < w.nst; t++) {
        const uint64_t *E = l->ideal + (size_t)w.st[t].last_state * l->nwords;
        const uint64_t *S = w.st[t].first_state >= 0
                                ? l->ideal + (size_t)w.st[t].first_state * l->nwords
                                : NULL;
        for (int v = 0; v < l->nnodes; v++) {
            if (!pd_bit(E, v) || (S && pd_bit(S, v))) continue;
            for (int m = 0; m < l->nodes[v].nmembers; m++)
                if (stage_of[l->nodes[v].members[m]] < 0)
                    stage_of[l->nodes[v].members[m]] = t;
        }
    }
    for (int q = 0; l->removed_src[q] >= 0; q++) stage_of[l->removed_src[q]] = 0;
    for (int q = 0; l->removed_sink[q] >= 0; q++) {
        int i = l->removed_sink[q], st = 0;
        for (int e = 0; e < p->nedges; e++)
            if (p->edges[e].dst == i && stage_of[p->edges[e].src] > st)
                st = stage_of[p->edges[e].src];
        stage_of[i] = st;
    }
    for (int i = 0; i < p->nlayers; i++)
        if (stage_of[i] < 0) stage_of[i] = w.nst - 1; /* not reached by the enumeration */
    for (int t = 0; t < w.nst; t++) {
        pd_stage *S = &w.st[t];
        int cnt = 0;
        for (int i = 0; i < p->nlayers; i++) cnt += stage_of[i] == t;
        S->layers = malloc(((size_t)cnt + 1) * sizeof(int));
        if (!S->layers) goto oom;
        double c = 0, P = 0, out = 0;
        for (int i = 0; i < p->nlayers; i++) {
            if (stage_of[i] != t) continue;
            S->layers[S->nlayers++] = i;
            c += (p->layers[i].forward_ms + p->layers[i].backward_ms) / 1000.0 / o->speed;
            P += p->layers[i].parameter_bytes;
        }
        for (int i = 0; i < p->nlayers; i++) {
            if (stage_of[i] != t) continue;
            for (int e = 0; e < p->nedges; e++)
                if (p->edges[e].src == i && stage_of[p->edges[e].dst] > t) {
                    out += p->layers[i].activation_bytes;
                    break;
                }
        }
        S->compute_s = c;
        double sync = 0;
        for (int L = 0; L < o->nlevels; L++) {
            int r = S->level_replicas[L];
            if (r > 1) sync += ((double)(4 * (r - 1)) * P) / (o->bandwidth_Bps[L] * r);
        }
        S->dp_sync_s = sync;
        int bl = w.bw_level[t];
        if (bl >= 0 && t + 1 < w.nst) {
            double a = 2.0 * out / o->bandwidth_Bps[bl];
            if (o->activation_compression_ratio > 0) a /= o->activation_compression_ratio;
            S->activation_s = a;
        }
        S->time_s = (c + sync) / S->replicas;
        qsort(S->devices, (size_t)S->replicas, sizeof(int), cmp_int);
    }
    /* config string */
    size_t len = 1;
    for (int t = 0; t < w.nst; t++) len += 12;
    res->config = malloc(len);
    if (!res->config) goto oom;
    res->config[0] = 0;
    size_t at = 0;
    for (int t = 0; t < w.nst; t++) {
        at += (size_t)snprintf(res->config + at, len - at, "%s%d", t ? "-" : "",
                               w.st[t].replicas);
        res->machines_used += w.st[t].replicas;
    }
    res->nstages = w.nst;
    res->stages = w.st;
    w.st = NULL;
    w.nst = 0;
    rc = 0;
    goto done;
oom:
    err_set(err, NULL, NULL, "out of memory");
done:
    if (rc) {
        for (int t = 0; t < w.nst; t++) {
            free(w.st[t].layers);
            free(w.st[t].devices);
        }
        pd_result_free(res);
    }
    free(w.st);
    free(w.bw_level);
    free(stage_of);
    pd_dp_free(dp);
    pd_lattice_free(l);
    return rc;
}

plan *planner_pipedream_plan(const profile *p, const cluster *c, const pd_result *res,
                             plumb_err *err)
{
    if (res->machines_used > c->ndevices) {
        err_set(err, NULL, NULL, "the plan needs %d devices but the cluster has %d",
                res->machines_used, c->ndevices);
        return NULL;
    }
    for (int t = 0; t < res->nstages; t++)
        for (int q = 0; q < res->stages[t].replicas; q++)
            if (res->stages[t].devices[q] >= c->ndevices) {
                err_set(err, NULL, NULL, "stage %d uses device %d but the cluster has %d", t,
                        res->stages[t].devices[q], c->ndevices);
                return NULL;
            }
    /* new order: stage by stage, each stage's layers ascending */
    int *order = malloc(((size_t)p->nlayers + 1) * sizeof *order);
    int *pos = malloc(((size_t)p->nlayers + 1) * sizeof *pos);
    profile *q = profile_clone(p);
    plan *pl = NULL;
    if (!order || !pos || !q) goto oom;
    int k = 0;
    for (int t = 0; t < res->nstages; t++)
        for (int a = 0; a < res->stages[t].nlayers; a++) order[k++] = res->stages[t].layers[a];
    if (k != p->nlayers) {
        err_set(err, NULL, NULL, "internal: stages hold %d of %d layers", k, p->nlayers);
        goto fail;
    }
    for (int i = 0; i < p->nlayers; i++) pos[order[i]] = i;
    profile_layer *old = malloc(((size_t)p->nlayers + 1) * sizeof *old);
    if (!old) goto oom;
    memcpy(old, q->layers, (size_t)p->nlayers * sizeof *old);
    for (int i = 0; i < p->nlayers; i++) q->layers[i] = old[order[i]]; /* moves ownership */
    free(old);
    for (int e = 0; e < p->nedges; e++) {
        q->edges[e].src = pos[p->edges[e].src];
        q->edges[e].dst = pos[p->edges[e].dst];
    }
    if (p->stage_ids && q->stage_ids)
        for (int i = 0; i < p->nlayers; i++) q->stage_ids[i] = p->stage_ids[order[i]];
    for (int i = 0; i < p->nlayers; i++) /* tied parameters follow their layer */
        if (q->layers[i].tied_bytes > 0) q->layers[i].tied_layer = pos[q->layers[i].tied_layer];
    pl = plan_new(q, c, res->nstages);
    if (!pl) goto oom;
    /* PipeDream's 1F1B with weight stashing, one profiled minibatch per microbatch */
    pl->schedule = SCHED_PIPEDREAM;
    pl->microbatch_size = p->minibatch > 0 ? p->minibatch : 1;
    int first = 0;
    for (int t = 0; t < res->nstages; t++) {
        const pd_stage *S = &res->stages[t];
        if (plan_set_stage(pl, t, first, first + S->nlayers - 1, S->replicas, S->devices))
            goto oom;
        pl->stages[t].compute_s = S->compute_s;
        pl->stages[t].comm_s = S->dp_sync_s + S->activation_s;
        first += S->nlayers;
    }
    /* replicated stages take microbatches round-robin, so a round holds a multiple of every
     * replica count (planner_replica_round); too many to simulate: flush-based 1F1B */
    int round = planner_replica_round(pl);
    if (!round) pl->schedule = SCHED_1F1B_FLUSH;
    pl->microbatches = round ? round : res->nstages;
    pl->pred_iteration_s = res->time_per_stage_s;
    pl->pred_samples_per_s = p->minibatch / res->time_per_stage_s;
    pl->pred_speedup_vs_dp = res->speedup_vs_dp;
    pl->pred_speedup_vs_1 = res->speedup_vs_1;
    pl->planner_config = strdup(res->config);
    if (!pl->planner_config) goto oom;
    free(order);
    free(pos);
    profile_free(q);
    return pl;
oom:
    err_set(err, NULL, NULL, "out of memory");
fail:
    free(order);
    free(pos);
    profile_free(q);
    plan_free(pl);
    return NULL;
}

plan *planner_pipedream(const profile *p, const cluster *c, const pd_options *o,
                        pd_result *res, plumb_err *err)
{
    pd_options opt;
    if (o) opt = *o;
    else pd_options_default(&opt);
    pd_options_from_cluster(&opt, c);
    pd_result local;
    pd_result *r = res ? res : &local;
    if (planner_pipedream_run(p, NULL, &opt, r, err)) return NULL;
    plan *pl = planner_pipedream_plan(p, c, r, err);
    if (!res) pd_result_free(&local);
    return pl;
}
