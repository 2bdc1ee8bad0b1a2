/* cmd_plan_native.c: the native mode of `plumb plan` (the default; cli/cmd_plan.c parses
 * the options and calls cmd_plan_native): runs planner_native (planner/native.h) and prints
 * the chosen plan (stages, microbatching, simulated throughput, memory against capacity),
 * for --schedule auto the ranked top five first, or all of it as one JSON object; writes
 * the plan with -o. Nothing fits, or inputs that cannot work together: one line (naming
 * what would fit), exit 2, nothing written: a plan that does not fit is bad input, as
 * everywhere in plumb (README). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/units.h"
#include "planner/native.h"

int cmd_plan_native(const profile *p, const cluster *c, const native_options *o,
                    const char *ppath, const char *cpath, const char *out, int json);


static const native_candidate *chosen(const native_result *r)
{
    for (int i = 0; i < r->ncand; i++)
        if (r->cand[i].fits) return &r->cand[i];
    return NULL;
}

static void print_devices(const plan_stage *s)
{
    for (int q = 0; q < s->replicas;) {
        int a = s->devices[q], b = a;
        while (q + 1 < s->replicas && s->devices[q + 1] == b + 1) b = s->devices[++q];
        q++;
        printf("%s%d", a == s->devices[0] ? "" : ",", a);
        if (b != a) printf("-%d", b);
    }
}

static void print_plan(const profile *p, const cluster *c, const plan *pl,
                       const native_candidate *b, const native_result *r,
                       const native_options *o)
{
    char pk[32], cap[32], rt[160];
    native_runtime_text(o, rt, sizeof rt); /* "" at the default runtime */
    printf("plumb plan: %s on %s (native cost model; schedule %s, %s%s%s)\n",
           p->name ? p->name : "model", c->name ? c->name : "cluster",
           sched_kind_name(pl->schedule),
           sched_kind_is_async(pl->schedule) ? "ASYNCHRONOUS: stale weights"
                                             : "synchronous", rt[0] ? "; " : "", rt);
    for (int s = 0; s < pl->nstages; s++) {
        const plan_stage *st = &pl->stages[s];
        printf("stage %d: layers %d-%d (%s .. %s), %d replica%s on devices ", s,
               st->first_layer, st->last_layer, pl->prof->layers[st->first_layer].name,
               pl->prof->layers[st->last_layer].name, st->replicas,
               st->replicas == 1 ? "" : "s");
        print_devices(st);
        printf(", compute %.3f ms per microbatch, transfers %.3f ms\n", st->compute_s * 1e3,
               st->comm_s * 1e3);
    }
    unsigned char *used = calloc((size_t)pl->clus->ndevices + 1, 1);
    if (used) {
        char txt[160];
        plan_devices_used(pl, used);
        plan_devices_text(used, pl->clus->ndevices, txt, sizeof txt);
        printf("devices: %s\n", txt);
        free(used);
    }
    printf("microbatches: %d x %d samples (%d samples per iteration)\n", pl->microbatches,
           pl->microbatch_size, plan_minibatch(pl));
    if (pl->chunks > 1) printf("chunks: %d virtual stages per device\n", pl->chunks);
    printf("recompute: %s\n", pl->recompute ? "yes" : "no");
    if (b && b->simulated)
        printf("throughput: %.1f samples/s simulated (cost model: %.1f samples/s); iteration "
               "%.4f s; bubble %.1f %%\n", b->sim_samples_per_s, b->est_samples_per_s,
               b->sim_iteration_s, 100 * b->sim_bubble_fraction);
    else if (b)
        printf("throughput: %.1f samples/s (cost model, not simulated)\n", b->est_samples_per_s);
    if (b)
        printf("peak memory: %s on the fullest device, capacity %s\n",
               units_bytes(b->simulated ? b->sim_peak_memory_bytes : b->est_peak_memory_bytes,
                           pk, sizeof pk),
               units_bytes(b->capacity_bytes, cap, sizeof cap));
    if (r->single_samples_per_s > 0 && b)
        printf("speedup over one device: %.2fx (one device: %.1f samples/s, compute only)\n",
               (b->simulated ? b->sim_samples_per_s : b->est_samples_per_s) /
                   r->single_samples_per_s, r->single_samples_per_s);
    printf("planned in %.1f ms (%d dynamic programs, %d simulations)\n", r->plan_ms, r->dp_runs,
           r->nsimulated);
}

static cJSON *plan_json(const profile *p, const cluster *c, const plan *pl,
                        const native_candidate *b, const native_result *r, int ranking)
{
    cJSON *j = cJSON_CreateObject(), *st;
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "mode", "native");
    cJSON_AddStringToObject(j, "model", p->name ? p->name : "");
    cJSON_AddStringToObject(j, "cluster", c->name ? c->name : "");
    cJSON_AddStringToObject(j, "schedule", sched_kind_name(pl->schedule));
    cJSON_AddBoolToObject(j, "async", sched_kind_is_async(pl->schedule));
    json_add_num(j, "microbatches", pl->microbatches);
    json_add_num(j, "microbatch_size", pl->microbatch_size);
    json_add_num(j, "chunks", pl->chunks);
    cJSON_AddBoolToObject(j, "recompute", pl->recompute);
    if (pl->p2p_sync) /* only when set, as in plan files: default outputs read as before */
        cJSON_AddStringToObject(j, "p2p", "sync");
    if (pl->grad_sync_end)
        cJSON_AddStringToObject(j, "grad_sync", "end");
    if (pl->zero) json_add_num(j, "zero", pl->zero);
    if (pl->overlap_param_gather) cJSON_AddTrueToObject(j, "overlap_param_gather");
    cJSON_AddStringToObject(j, "replicas", pl->planner_config ? pl->planner_config : "");
    unsigned char *used = calloc((size_t)pl->clus->ndevices + 1, 1);
    if (used) {
        cJSON *idle;
        json_add_num(j, "devices_used", plan_devices_used(pl, used));
        json_add_num(j, "devices_total", pl->clus->ndevices);
        if ((idle = cJSON_AddArrayToObject(j, "idle_devices")))
            for (int d = 0; d < pl->clus->ndevices; d++)
                if (!used[d]) cJSON_AddItemToArray(idle, cJSON_CreateNumber(d));
        free(used);
    }
    if (b) {
        json_add_num(j, "samples_per_s", b->simulated ? b->sim_samples_per_s
                                                      : b->est_samples_per_s);
        cJSON_AddBoolToObject(j, "simulated", b->simulated);
        json_add_num(j, "estimated_samples_per_s", b->est_samples_per_s);
        json_add_num(j, "iteration_s", b->simulated ? b->sim_iteration_s : b->est_iteration_s);
        json_add_num(j, "peak_memory_bytes", b->simulated ? b->sim_peak_memory_bytes
                                                          : b->est_peak_memory_bytes);
        json_add_num(j, "capacity_bytes", b->capacity_bytes);
    }
    json_add_num(j, "one_device_samples_per_s", r->single_samples_per_s);
    json_add_num(j, "plan_ms", r->plan_ms);
    if ((st = cJSON_AddArrayToObject(j, "stages")))
        for (int s = 0; s < pl->nstages; s++) {
            cJSON *e = cJSON_CreateObject(), *dv;
            if (!e) break;
            json_add_num(e, "first_layer", pl->stages[s].first_layer);
            json_add_num(e, "last_layer", pl->stages[s].last_layer);
            json_add_num(e, "replicas", pl->stages[s].replicas);
            if ((dv = cJSON_AddArrayToObject(e, "devices")))
                for (int q = 0; q < pl->stages[s].replicas; q++)
                    cJSON_AddItemToArray(dv, cJSON_CreateNumber(pl->stages[s].devices[q]));
            json_add_num(e, "compute_s", pl->stages[s].compute_s);
            json_add_num(e, "comm_s", pl->stages[s].comm_s);
            cJSON_AddItemToArray(st, e);
        }
    if (ranking) {
        cJSON *rk = native_result_to_json(r, NATIVE_TOP), *sk = native_skipped_to_json(r);
        if (rk) cJSON_AddItemToObject(j, "candidates", rk);
        if (sk) cJSON_AddItemToObject(j, "skipped", sk);
    }
    return j;
}

int cmd_plan_native(const profile *p, const cluster *c, const native_options *o,
                    const char *ppath, const char *cpath, const char *out, int json)
{
    plumb_err err;
    err_clear(&err);
    native_result r;
    plan *pl = planner_native(p, c, o, &r, &err);
    int ranking = o->schedule == NATIVE_SCHED_AUTO, status = 0;
    if (!pl) {
        fprintf(stderr, "plumb: %s + %s: %s\n", ppath, cpath, err.msg);
        native_result_free(&r);
        return 2;
    }
    const native_candidate *b = chosen(&r);
    if (out && plan_save(pl, out, &err)) {
        err_print(&err);
        status = 2;
        goto done;
    }
    if (json) {
        cJSON *j = plan_json(p, c, pl, b, &r, ranking);
        char *s = j ? cJSON_Print(j) : NULL;
        if (s) printf("%s\n", s);
        else status = 1;
        free(s);
        cJSON_Delete(j);
    } else {
        if (ranking) {
            native_result_print(&r, NATIVE_TOP, stdout);
            printf("\n");
        }
        print_plan(p, c, pl, b, &r, o);
        if (out) printf("plan written to %s\n", out);
    }
done:
    plan_free(pl);
    native_result_free(&r);
    return status;
}
