/* report_json.c: the simulator's report as JSON (plumb-sim-report/1, docs/formats.md).
 * Times in seconds, memory and traffic in bytes, throughput in samples/s. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "core/device.h"
#include "core/json.h"
#include "sim/sim.h"

static cJSON *add_int(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, v);
}

/* The what-ifs of o; names[l] (NULL, or "" for none) names level l. */
static cJSON *whatif_json(const sim_options *o, const char *const *names, int nnames)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    if (o->schedule >= 0)
        cJSON_AddStringToObject(j, "schedule", sched_kind_name((sched_kind)o->schedule));
    if (o->microbatches > 0)
        add_int(j, "microbatches", o->microbatches);
    if (o->straggler_device >= 0) {
        cJSON *s = cJSON_AddObjectToObject(j, "straggler");
        if (s) {
            add_int(s, "device", o->straggler_device);
            json_add_num(s, "factor", o->straggler_factor);
        }
    }
    cJSON *bw = NULL;
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++) {
        if (o->bandwidth_Bps[l] <= 0)
            continue;
        if (!bw && !(bw = cJSON_AddArrayToObject(j, "bandwidth")))
            break;
        cJSON *e = cJSON_CreateObject();
        if (!e)
            break;
        add_int(e, "level", l);
        if (l < nnames && names[l] && *names[l])
            cJSON_AddStringToObject(e, "name", names[l]);
        json_add_num(e, "gbit_per_s", o->bandwidth_Bps[l] * 8 / 1e9);
        cJSON_AddItemToArray(bw, e);
    }
    if (o->memory_limit_bytes > 0)
        json_add_num(j, "memory_limit_bytes", o->memory_limit_bytes);
    if (o->p2p_sync >= 0) /* the plan's field and words (docs/formats.md) */
        cJSON_AddStringToObject(j, "p2p", o->p2p_sync ? "sync" : "overlap");
    if (o->grad_sync_end >= 0)
        cJSON_AddStringToObject(j, "grad_sync", o->grad_sync_end ? "end" : "overlap");
    if (o->p2p_whole >= 0) /* the plan's field and words */
        cJSON_AddStringToObject(j, "p2p_split", o->p2p_whole ? "whole" : "scatter-gather");
    /* the runtime settings: the plan file's fields, with recompute's three words */
    if (o->recompute >= 0)
        cJSON_AddStringToObject(j, "recompute", recompute_kind_name((recompute_kind)o->recompute));
    if (o->checkpoint_layers >= 0)
        add_int(j, "checkpoint_layers", o->checkpoint_layers);
    if (o->zero >= 0)
        add_int(j, "zero", o->zero);
    if (o->tp_overlap >= 0)
        cJSON_AddStringToObject(j, "tp_overlap",
                                plan_tp_overlap_name((plan_tp_overlap)o->tp_overlap));
    if (o->overlap_param_gather >= 0)
        cJSON_AddBoolToObject(j, "overlap_param_gather", o->overlap_param_gather);
    if (o->fp8_param_gather >= 0)
        cJSON_AddBoolToObject(j, "fp8_param_gather", o->fp8_param_gather);
    if (o->grad_reduce >= 0)
        cJSON_AddStringToObject(j, "grad_reduce", dev_precision_name((dev_precision)o->grad_reduce));
    if (o->optimizer_state >= 0)
        cJSON_AddStringToObject(j, "optimizer_state",
                                dev_precision_name((dev_precision)o->optimizer_state));
    return j;
}

cJSON *sim_options_to_json(const sim_options *o, const cluster *c)
{
    const char *names[CLUSTER_MAX_LEVELS] = {0};
    for (int l = 0; c && l < c->nlevels && l < CLUSTER_MAX_LEVELS; l++)
        names[l] = c->levels[l].name;
    return whatif_json(o, names, CLUSTER_MAX_LEVELS);
}

static cJSON *device_json(const sim_device_report *d)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_int(o, "device", d->device);
    add_int(o, "worker", d->worker);
    cJSON_AddStringToObject(o, "type", d->type);
    cJSON *st = cJSON_AddArrayToObject(o, "stages");
    for (int i = 0; st && i < d->nstages && i < SIM_DEVICE_STAGES; i++)
        cJSON_AddItemToArray(st, cJSON_CreateNumber(d->stages[i]));
    json_add_num(o, "busy_s", d->busy_s);
    json_add_num(o, "idle_s", d->idle_s);
    json_add_num(o, "comm_s", d->comm_s);
    json_add_num(o, "total_busy_s", d->total_busy_s);
    add_int(o, "max_inflight_microbatches", d->max_inflight);
    add_int(o, "weight_versions", d->weight_versions);
    json_add_num(o, "peak_memory_bytes", d->mem.total);
    json_add_num(o, "memory_capacity_bytes", d->mem.capacity);
    cJSON_AddBoolToObject(o, "fits", d->mem.fits);
    cJSON *m = cJSON_AddObjectToObject(o, "memory");
    if (m) {
        json_add_num(m, "weights_bytes", d->mem.weights);
        json_add_num(m, "gradients_bytes", d->mem.gradients);
        json_add_num(m, "optimizer_bytes", d->mem.optimizer);
        json_add_num(m, "activations_bytes", d->mem.activations);
        json_add_num(m, "buffers_bytes", d->mem.buffers);
        json_add_num(m, "workspace_bytes", d->mem.workspace);
        json_add_num(m, "staging_bytes", d->mem.staging);
        json_add_num(m, "peak_bytes", d->mem.total);
        if (d->mem.kept_inputs > 0) /* only when held: other reports read as before */
            json_add_num(m, "kept_inputs_bytes", d->mem.kept_inputs);
        if (d->mem.step_transient > 0) /* the step's gradient copy: only when made */
            json_add_num(m, "step_transient_bytes", d->mem.step_transient);
    }
    return o;
}

static cJSON *stage_json(const sim_stage_report *s, int i)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_int(o, "stage", i);
    add_int(o, "first_layer", s->first_layer);
    add_int(o, "last_layer", s->last_layer);
    add_int(o, "replicas", s->replicas);
    json_add_num(o, "forward_s", s->forward_s);
    json_add_num(o, "backward_s", s->backward_s);
    json_add_num(o, "input_grad_s", s->input_grad_s);
    json_add_num(o, "weight_grad_s", s->weight_grad_s);
    json_add_num(o, "step_s", s->step_s);
    json_add_num(o, "send_bytes", s->send_bytes);
    json_add_num(o, "parameter_bytes", s->parameter_bytes);
    json_add_num(o, "stash_bytes_per_microbatch", s->activation_bytes);
    json_add_num(o, "allreduce_s", s->allreduce_s);
    json_add_num(o, "tp_comm_forward_s", s->tp_comm_forward_s);
    json_add_num(o, "tp_comm_backward_s", s->tp_comm_backward_s);
    add_int(o, "weight_versions", s->weight_versions);
    add_int(o, "max_inflight_microbatches", s->max_inflight);
    return o;
}

/* The parallel layout and its throughput figures; those the profile cannot give
 * (tokens, FLOPs, the device's peak) are left out. */
static void layout_json(cJSON *o, const sim_report *r)
{
    if (r->tokens_per_sample > 0)
        json_add_num(o, "tokens_per_s", r->tokens_per_s);
    if (r->tflops_per_gpu >= 0)
        json_add_num(o, "tflops_per_gpu", r->tflops_per_gpu);
    if (r->model_tflops_per_gpu >= 0)
        json_add_num(o, "model_tflops_per_gpu", r->model_tflops_per_gpu);
    if (r->mfu >= 0)
        json_add_num(o, "mfu", r->mfu);
    add_int(o, "tp", r->tp);
    if (r->cp > 1) add_int(o, "cp", r->cp); /* only when set: reports without it as before */
    add_int(o, "pp", r->pp);
    add_int(o, "dp", r->dp);
    add_int(o, "interleave", r->interleave);
    add_int(o, "global_batch", r->global_batch);
    cJSON_AddBoolToObject(o, "sequence_parallel", r->sequence_parallel);
    add_int(o, "zero", r->zero);
    cJSON_AddStringToObject(o, "precision", dev_precision_name(r->precision));
    if (r->grad_reduce != DEV_FP32) /* only when set: default reports read as before */
        cJSON_AddStringToObject(o, "grad_reduce", dev_precision_name(r->grad_reduce));
    if (r->optimizer_state != DEV_FP32)
        cJSON_AddStringToObject(o, "optimizer_state", dev_precision_name(r->optimizer_state));
    if (r->fp8_param_gather) /* only when set: default reports read as before */
        cJSON_AddBoolToObject(o, "fp8_param_gather", 1);
    if (r->cross_entropy) /* only when fused: default reports read as before */
        cJSON_AddStringToObject(o, "cross_entropy", plan_cross_entropy_name(r->cross_entropy));
    if (r->grad_accum) /* only when unfused: likewise */
        cJSON_AddStringToObject(o, "grad_accum", plan_grad_accum_name(r->grad_accum));
    /* the uneven split, only when set: Megatron-Core's option names */
    if (r->split.first_blocks)
        add_int(o, "decoder_first_pipeline_num_layers", r->split.first_blocks);
    if (r->split.last_blocks)
        add_int(o, "decoder_last_pipeline_num_layers", r->split.last_blocks);
    if (r->split.account_embedding)
        cJSON_AddBoolToObject(o, "account_for_embedding_in_pipeline_split", 1);
    if (r->split.account_loss)
        cJSON_AddBoolToObject(o, "account_for_loss_in_pipeline_split", 1);
    if (r->pipeline_layout)
        cJSON_AddStringToObject(o, "pipeline_model_parallel_layout", r->pipeline_layout);
    if (r->grad_sync_end)
        cJSON_AddStringToObject(o, "grad_sync", "end");
    if (r->p2p_whole) /* only when set: default reports read as before */
        cJSON_AddStringToObject(o, "p2p_split", "whole");
    add_int(o, "gpus", r->gpus);
}

cJSON *sim_report_to_json(const sim_report *r, const sim_changes *changes,
                          const char *plan_file)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "format", SIM_REPORT_FORMAT);
    if (plan_file)
        cJSON_AddStringToObject(o, "plan", plan_file);
    if (r->model[0])
        cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "schedule", sched_kind_name(r->schedule));
    add_int(o, "nstages", r->nstages);
    add_int(o, "chunks", r->chunks);
    add_int(o, "microbatches", r->microbatches);
    add_int(o, "microbatch_size", r->microbatch_size);
    add_int(o, "minibatch", (double)r->microbatches * r->microbatch_size);
    add_int(o, "iterations", r->iterations);
    add_int(o, "iterations_requested", r->iterations_requested);
    cJSON_AddBoolToObject(o, "steady", r->steady);
    add_int(o, "steady_first_iteration", r->steady_first);
    add_int(o, "steady_last_iteration", r->steady_last);
    cJSON_AddStringToObject(o, "recompute", recompute_kind_name((recompute_kind)r->recompute));
    if (r->recompute == RECOMPUTE_FULL)
        add_int(o, "checkpoint_layers", r->checkpoint_layers);
    json_add_num(o, "samples_per_s", r->samples_per_s);
    json_add_num(o, "iteration_s", r->iteration_s);
    layout_json(o, r);
    json_add_num(o, "bubble_fraction", r->bubble_fraction);
    json_add_num(o, "makespan_s", r->makespan_s);
    json_add_num(o, "peak_memory_bytes", r->peak_memory_bytes);
    cJSON_AddBoolToObject(o, "fits", r->fits);
    add_int(o, "events", (double)r->events);
    add_int(o, "actions", (double)r->actions);
    /* the devices the plan leaves idle are listed, not left out */
    add_int(o, "devices_used", r->tp > 1 || r->cp > 1 ? r->gpus : r->ndevices);
    add_int(o, "devices_total", r->devices_total);
    cJSON *idle = cJSON_AddArrayToObject(o, "idle_devices");
    unsigned char *used = calloc((size_t)r->devices_total + 1, 1);
    if (used)
        sim_report_mark_used(r, used, r->devices_total);
    for (int d = 0; idle && used && d < r->devices_total; d++)
        if (!used[d])
            cJSON_AddItemToArray(idle, cJSON_CreateNumber(d));
    free(used);
    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; devs && i < r->ndevices; i++)
        cJSON_AddItemToArray(devs, device_json(&r->devices[i]));
    cJSON *links = cJSON_AddArrayToObject(o, "links");
    for (int i = 0; links && i < r->nlinks; i++) {
        const sim_link_report *l = &r->links[i];
        cJSON *e = cJSON_CreateObject();
        if (!e)
            break;
        add_int(e, "src", l->src);
        add_int(e, "dst", l->dst);
        add_int(e, "level", l->level);
        json_add_num(e, "bytes", l->bytes);
        json_add_num(e, "bytes_per_iteration", l->bytes_per_iteration);
        json_add_num(e, "busy_s", l->busy_s);
        add_int(e, "transfers", (double)l->transfers);
        cJSON_AddItemToArray(links, e);
    }
    cJSON *st = cJSON_AddArrayToObject(o, "stages");
    for (int i = 0; st && r->stages && i < r->nstages; i++)
        cJSON_AddItemToArray(st, stage_json(&r->stages[i], i));
    if (changes) {
        cJSON *ch = cJSON_AddArrayToObject(o, "changes");
        for (int i = 0; ch && i < changes->n; i++) {
            const sim_change *c = &changes->c[i];
            cJSON *e = cJSON_CreateObject();
            if (!e)
                break;
            cJSON_AddStringToObject(e, "figure", c->figure);
            cJSON_AddStringToObject(e, "unit", c->unit);
            json_add_num(e, "base", c->base);
            json_add_num(e, "whatif", c->whatif);
            json_add_num(e, "ratio", c->ratio);
            cJSON_AddItemToArray(ch, e);
        }
    }
    if (sim_options_has_whatif(&r->whatif)) {
        const char *names[CLUSTER_MAX_LEVELS];
        for (int l = 0; l < CLUSTER_MAX_LEVELS; l++)
            names[l] = r->level_names[l];
        cJSON_AddItemToObject(o, "whatif", whatif_json(&r->whatif, names, CLUSTER_MAX_LEVELS));
    }
    return o;
}
