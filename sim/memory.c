/* memory.c: the simulator's memory model for one device (docs/sim.md, "Memory model"):
 * what plumb's executor allocates for the stages the device holds, which does not depend
 * on timing. Per stage: its parameter bytes times the weight versions the schedule keeps
 * (schedule_inflight: 1 for flushing schedules, p - s for PipeDream's stashing, at most 2
 * for 2BW), one gradient buffer, the optimizer state (sgd 0, momentum 1x, adam 2x the
 * parameters); per buffer slot (schedule_slots: the most microbatches the device's list
 * holds open at once) the stage input, every layer's output and saved tensors (with
 * recompute the input and output, plus one microbatch's activations), the received output
 * gradient and the input gradient waiting to be sent; the backward's two input-gradient
 * buffers. Per device: where it holds a replica of a replicated stage, the in-process
 * all-reduce's receive scratch (sim_allreduce_scratch: about 1/n or 2/n of the stage's
 * gradients), sized to the largest such stage (NCCL's all-reduce works in place, so there
 * this is an upper bound); the backend's scratch, which the device's
 * layers share (the largest any of them needs). What a layer keeps besides its output (a
 * block's inner tensors, attention probabilities) and its scratch come from the profile
 * (saved_bytes and the other fields plumb's profiler writes; 0 where it does not say).
 * Besides, the local transport's staging buffers of the gradients the device sends, set
 * aside before the run for as many as can be in flight per peer (activations and
 * all-reduce messages are lent: the receiver copies them out of the sender's buffer).
 * Plans with 3D fields (tensor parallelism, mixed precision, ZeRO-1, selective or
 * checkpointed recomputation) describe a Megatron-LM-style runtime instead: gradients and
 * optimizer state per precision and ZeRO (sim_memory_state), no in-process all-reduce
 * buffer and no staging (sim_model.nccl_buffers; docs/sim.md), and activations as such a
 * runtime holds them (held_3d): the microbatches forwarded and not yet backwarded, an input
 * received before its forward as the one tensor that arrived, whole on each tensor rank
 * (sim_stage_mem.received; 1 / t of it with sequence parallelism), and a recomputation's
 * transient once at a time per device; between iterations (not at the peak) such a
 * runtime also keeps each received stage input of the last microbatch and its gradient
 * (sim_memory.kept_inputs). One formula serves the simulator and the native
 * planner's estimate: sim_memory_layers (a stage's sums), sim_memory_stage (its terms),
 * sim_memory_add and sim_memory_close (a device's total). */
#include "sim/memory.h"

#include <stdlib.h>

#include "core/device.h"
#include "sim/cost.h"
#include <string.h>

int sim_memory_staging(sim_model *m, plumb_err *err)
{
    const schedule *s = m->sched;
    const int W = s->nworkers;
    sched_pair_bound *pb = NULL;
    int np = 0;
    double *big = calloc((size_t)W + 1, sizeof *big); /* per peer: the largest gradient sent */
    if (!big) return err_set(err, NULL, NULL, "out of memory");
    if (schedule_send_bound_pairs(s, 1u << ACT_SEND_B, &pb, &np, err)) {
        free(big);
        return -1;
    }
    /* a generated IR with one worker per stage, as its lowering wrote it (which kept its
     * counts: s->counts), sends stage st's input gradient of every microbatch from st's
     * worker to st - 1's wherever the two differ: the senders and their peers are read
     * from the placement instead of a pass over the lists */
    const int placed = s->counts != NULL;
    for (int w = 0, k = 0; w < W; w++) {
        int one = placed && s->worker_stage ? s->worker_stage[w] : -2;
        int lo = one >= 0 ? one : 1, hi = one >= 0 ? one + 1 : one == -1 ? 0 : s->nstages;
        for (int st = lo > 0 ? lo : 1; placed && st < hi; st++) {
            int to = s->stage_workers[s->stage_first[st - 1]];
            if (s->stage_workers[s->stage_first[st]] == w && to != w &&
                m->cut_bytes[st - 1] > big[to])
                big[to] = m->cut_bytes[st - 1];
        }
        for (int i = 0; !placed && i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind == ACT_SEND_B && a->stage > 0 && a->peer >= 0 && a->peer < W &&
                m->cut_bytes[a->stage - 1] > big[a->peer])
                big[a->peer] = m->cut_bytes[a->stage - 1];
        }
        /* the sum over its peers in increasing order (every peer it sends gradients to
         * has a pair; the others add 0) */
        double total = 0;
        int k0 = k;
        for (; k < np && pb[k].from == w; k++) total += pb[k].bound * big[pb[k].to];
        for (int q = k0; q < k; q++) big[pb[q].to] = 0;
        m->staging_bytes[w] = total;
    }
    free(big), free(pb);
    return 0;
}

/* The two input-gradient buffers the executor gives the top-level layers [first, last] of
 * a chain, at the profile's minibatch: walking backward, each layer writes its input
 * gradient into the buffer that does not hold its output gradient, a flatten passes its
 * gradient through and an embedding has none; each buffer is as large as the largest
 * input written into it. */
static double chain_gradbuf(const profile *p, int first, int last)
{
    double need[2] = {0, 0};
    int hold = -1;
    for (int l = last < p->nlayers ? last : p->nlayers - 1; l >= first; l--) {
        const char *k = p->layers[l].kind;
        if (!strcmp(k, "flatten")) continue;
        if (!strcmp(k, "embedding")) {
            hold = -1;
            continue;
        }
        int b = hold == 0 ? 1 : 0;
        double in = l > 0 ? p->layers[l - 1].activation_bytes : p->input_bytes;
        if (in > need[b]) need[b] = in;
        hold = b;
    }
    return need[0] + need[1];
}

void sim_memory_layers(const profile *p, const double *cross, int first, int last, int k,
                       sim_stage_layers *o)
{
    memset(o, 0, sizeof *o);
    const int n = p->nlayers;
    if (last >= n) last = n - 1;
    double group = 0, maxact = 0;
    int nl = 0;
    for (int l = first; l <= last; l++) {
        const profile_layer *L = &p->layers[l];
        nl++;
        if (l < last && L->activation_bytes > maxact) /* the next one's input */
            maxact = L->activation_bytes;
        o->saved += L->saved_bytes;
        double sel = L->selective_saved_bytes >= 0 ? L->selective_saved_bytes : L->saved_bytes;
        o->sel_saved += sel;
        if (L->saved_bytes - sel > o->sel_transient) o->sel_transient = L->saved_bytes - sel;
        o->split += L->split_saved_bytes;
        o->inner += L->grad_buffer_bytes;
        if (L->workspace_bytes > o->ws) o->ws = L->workspace_bytes;
        o->lastact = L->activation_bytes;
        /* the executor's flatten hands on its input's buffer: nothing more is held */
        double held = !p->nedges && !strcmp(L->kind, "flatten") ? 0 : L->activation_bytes;
        if (k > 0) {
            if (l > first && (l - first) % k == 0) { /* a checkpoint: this layer's input */
                o->ckpt_keep += cross[l - 1];
                group = 0;
            }
            group += held + L->saved_bytes;
            if (group > o->ckpt_group) o->ckpt_group = group;
        }
        /* a tensor tied to another layer of the stage is held once (profile.h) */
        int tied = L->tied_bytes > 0 && L->tied_layer >= first && L->tied_layer <= last &&
                   L->tied_layer != l;
        o->params += L->parameter_bytes - (tied ? L->tied_bytes : 0);
        if (!strcmp(L->kind, "TransformerBlock")) o->fp8_copies += L->parameter_bytes;
        o->acts += held;
    }
    o->in = first > 0 ? cross[first - 1] : 0;
    o->out = last < n - 1 && last >= 0 ? cross[last] : 0;
    o->data = first == 0 ? p->input_bytes : o->in;
    o->last = last >= n - 1;
    o->loss = o->last && n > 0 ? p->layers[n - 1].saved_bytes : 0;
    o->output = p->nedges && !o->last ? o->out : o->lastact;
    double maxin = maxact > o->in ? maxact : o->in;
    o->gradbuf = p->nedges ? (nl > 1 ? 2 : 1) * maxin : chain_gradbuf(p, first, last);
}

/* sim_memory_stage with the state multipliers sm (sim_memory_state of s's precision, ZeRO
 * stage, replicas and optimizer). */
static void stage_mul(const sim_stage_layers *L, const sim_mem_setting *s,
                      const sim_state_mul *sm, sim_stage_mem *out)
{
    const double sc = s->scale;
    /* FP8 training: Transformer Engine's FP8 copy of each projection weight and its
     * transpose, one byte each, cast on a step's first microbatch and kept through it.
     * With FP8 primary weights (fp8_param_gather) those two bytes are the blocks' only
     * weights: their bf16 copy, as many bytes (2 a parameter), is not held, so the
     * weights come to L->params (docs/llm.md, "FP8 primary weights") */
    out->params = L->params +
                  (s->precision == DEV_FP8 && !s->fp8_param_gather ? L->fp8_copies : 0);
    out->gradients = L->params * sm->gradients;
    out->optimizer = L->params * sm->optimizer;
    out->step_copy = L->params * sm->stepcopy;
    out->gradbuf = (L->gradbuf + L->inner) * sc;
    out->slotbuf = (L->out + L->in) * sc;
    if (s->nccl) { /* the gradients of the microbatch in its backward only */
        out->gradbuf += out->slotbuf;
        out->slotbuf = 0;
    }
    out->workspace = L->ws;
    /* between iterations a Megatron-LM-style runtime still holds the chunk's last received
     * input and its gradient (sim_stage_mem.kept) */
    out->kept = s->nccl ? 2 * L->in * sc : 0;
    out->received = s->nccl ? L->in * sc : 0;
    double keep = s->splits ? L->split * sc : 0; /* output gradients kept for W */
    /* a Megatron-LM-style runtime frees a stage's output once it is sent (it keeps only its
     * autograd node: deallocate_pipeline_outputs); plumb's executor keeps it in the slot */
    double sent = s->nccl && !L->last ? L->output * sc : 0;
    double held_in = L->data * sc;
    if (s->recompute == RECOMPUTE_FULL) {
        /* per microbatch the input and the output (the loss stage: also its loss rows
         * and targets, the loss layer's saved bytes) and the checkpoints' inputs; one
         * microbatch's activations (of the largest group between checkpoints) */
        out->stash = held_in + (L->output + L->loss) * sc + keep - sent;
        if (s->checkpoint_layers > 0) {
            out->stash += L->ckpt_keep * sc;
            out->transient = L->ckpt_group * sc;
        } else {
            out->transient = (L->acts + L->saved) * sc;
        }
    } else if (s->recompute == RECOMPUTE_SELECTIVE) {
        out->stash = held_in + (L->acts + L->sel_saved) * sc + keep - sent;
        out->transient = L->sel_transient * sc;
    } else {
        out->stash = held_in + (L->acts + L->saved) * sc + keep - sent;
        out->transient = 0;
    }
}

void sim_memory_stage(const sim_stage_layers *L, const sim_mem_setting *s,
                      sim_stage_mem *out)
{
    sim_state_mul sm;
    sim_memory_state_of(s->precision, s->grad_reduce, s->optimizer_state, s->zero,
                        s->replicas, s->opt, &sm);
    stage_mul(L, s, &sm, out);
}

double sim_memory_optimizer_mul(optimizer_kind opt)
{
    return opt == OPT_ADAM ? 2 : opt == OPT_MOMENTUM ? 1 : 0;
}

void sim_memory_state_of(dev_precision prec, dev_precision grad, dev_precision ostate,
                         int zero, int replicas, optimizer_kind opt, sim_state_mul *out)
{
    double nstate = sim_memory_optimizer_mul(opt);
    if (prec == DEV_FP8) /* bf16 weights, the state of bf16 mixed precision (docs/llm.md) */
        prec = DEV_BF16;
    out->gradients = 1;
    out->optimizer = nstate;
    out->stepcopy = 0;
    out->reduce = 1;
    out->step = sim_step_bytes_per_param(opt);
    if (prec == DEV_BF16 || prec == DEV_FP16) {
        double e = dev_precision_bytes(prec);
        /* bytes of one gradient: fp32 main gradients with bf16 unless they are kept in
         * bf16 (grad), fp16's own */
        double g = prec == DEV_BF16 && grad != DEV_BF16 ? 4 : e;
        out->gradients = g / e;
        out->reduce = g / e;
        if (prec == DEV_BF16 && ostate == DEV_BF16) {
            /* the moments in bf16; the bf16 weights are their own master copy; the step
             * reads the gradient, reads and writes the weight and each moment */
            out->optimizer = 2 * nstate / e;
            out->step = (g + 2 * e + 4 * nstate) / e;
        } else {
            /* fp32 master weights and moments; the step reads the gradient, reads and
             * writes the master weight and each state, writes the parameter. With
             * 16-bit gradients it steps from an fp32 copy of them, made in the step
             * (Megatron-Core's distributed optimizer: `.float()` of the gradient shard;
             * Float16Optimizer's _copy_model_grads_to_main_grads) and freed by the next
             * train_step's optimizer.zero_grad(set_to_none=True) before its first
             * forward: a moment of its own, not with the activations (docs/sim.md) */
            out->optimizer = (4 + 4 * nstate) / e;
            out->stepcopy = g < 4 ? 4 / e : 0;
            out->step = (g + 8 + 8 * nstate + e) / e;
        }
    }
    if (zero && replicas > 1) {
        out->optimizer /= replicas;
        out->stepcopy /= replicas;
        out->step /= replicas;
        out->reduce = (out->reduce + 1) / 2;
    }
}

void sim_memory_state(dev_precision prec, int zero, int replicas, optimizer_kind opt,
                      sim_state_mul *out)
{
    sim_memory_state_of(prec, DEV_FP32, DEV_FP32, zero, replicas, opt, out);
}

/* The most activation bytes worker w of a 3D plan's model holds at once, walking its list:
 * each stage's stash_bytes from its F to the end of its backward (its B, or its W where
 * the backward is split into I and W: DualPipeV mixes both in one list); an input received
 * before its forward, the stage's recv_bytes (the tensor as a rank holds it: whole without
 * sequence parallelism, where the transfer, cut_bytes, moves 1 / tp of it; cut_bytes of the
 * stage before in hand-built models; its stash counts it once the forward runs); and during a backward (B or I) the stage's
 * transient_bytes (what recomputation rebuilds: a device runs one backward at a time, so
 * one stage's transient, not the sum over its stages). */
static double held_3d(const sim_model *m, int w)
{
    const schedule *s = m->sched;
    if (w < 0 || w >= s->nworkers) return 0;
    int *pending = calloc((size_t)s->nstages + 1, sizeof *pending);
    if (!pending) return 0;
    double held = 0, recv = 0, peak = 0;
    for (int i = 0; i < s->len[w]; i++) {
        const action *a = &s->acts[w][i];
        int st = a->stage;
        if (st < 0 || st >= s->nstages) continue;
        double in = st <= 0 ? 0 : m->recv_bytes ? m->recv_bytes[st] : m->cut_bytes[st - 1];
        double now = held + recv;
        switch (a->kind) {
        case ACT_RECV_F:
            pending[st]++;
            recv += in;
            now = held + recv;
            break;
        case ACT_F:
            if (pending[st] > 0) pending[st]--, recv -= in;
            held += m->stash_bytes[st];
            now = held + recv;
            break;
        case ACT_B: /* a whole backward frees its microbatch */
            now = held + recv + m->transient_bytes[st];
            held -= m->stash_bytes[st];
            break;
        case ACT_I: /* the input-gradient half: its W frees it */
            now = held + recv + m->transient_bytes[st];
            break;
        case ACT_W:
            held -= m->stash_bytes[st];
            break;
        default:
            break;
        }
        if (now > peak) peak = now;
    }
    free(pending);
    return peak;
}

/* Stage st's terms as m holds them (hand-built models: grad_bytes for the parameters). */
static void model_stage(const sim_model *m, int st, optimizer_kind opt, sim_stage_mem *t)
{
    double pb = m->param_bytes ? m->param_bytes[st] : m->grad_bytes[st];
    t->params = pb + (m->fp8_weight_bytes ? m->fp8_weight_bytes[st] : 0);
    t->gradients = m->gradmem_bytes ? m->gradmem_bytes[st] : pb;
    t->optimizer = m->optmem_bytes ? m->optmem_bytes[st] : sim_memory_optimizer_mul(opt) * pb;
    t->step_copy = m->stepcopy_bytes ? m->stepcopy_bytes[st] : 0;
    t->stash = m->stash_bytes[st];
    t->slotbuf = m->slotbuf_bytes[st];
    t->transient = m->transient_bytes[st];
    t->gradbuf = m->gradbuf_bytes[st];
    t->workspace = m->workspace_bytes[st];
    t->kept = m->kept_bytes ? m->kept_bytes[st] : 0;
    t->received = m->recv_bytes          ? m->recv_bytes[st]
                  : m->nccl_buffers && st > 0 ? m->cut_bytes[st - 1]
                                              : 0;
}

void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double capacity, sim_memory *out)
{
    const schedule *s = m->sched;
    sim_memory_acc a;
    memset(&a, 0, sizeof a);
    /* the stages it holds: the one the schedule says, when it knows (a scan of every
     * replica of every stage per device is quadratic in the devices) */
    int lo = 0, hi = s->nstages, known = s->worker_stage && w >= 0 && w < s->nworkers &&
                                         s->worker_stage[w] != -2;
    if (known) {
        lo = s->worker_stage[w] >= 0 ? s->worker_stage[w] : 0;
        hi = s->worker_stage[w] >= 0 ? lo + 1 : 0;
    }
    for (int st = lo; st < hi; st++)
        for (int j = 0; j < s->replicas[st]; j++)
            if (known || s->stage_workers[s->stage_first[st] + j] == w) {
                /* the device's replica index as far as the scratch tells them apart:
                 * 0, 1 or 2 and up */
                const int *sw = s->stage_workers + s->stage_first[st];
                int r = sw[0] == w ? 0 : s->replicas[st] > 1 && sw[1] == w ? 1 : 2;
                sim_stage_mem t;
                model_stage(m, st, opt, &t);
                sim_memory_add(&a, &t, versions ? versions[st] : 1,
                               schedule_slots_fresh(s, w, st),
                               sim_allreduce_scratch(t.gradients, s->replicas[st], r),
                               m->nccl_buffers);
                break;
            }
    if (m->nccl_buffers) a.mem.activations = held_3d(m, w);
    sim_memory_close(&a, m->staging_bytes ? m->staging_bytes[w] : 0, capacity, out);
}

/* A change of a device's in-flight memory at time t. */
typedef struct mem_step {
    int track;
    double t, delta;
} mem_step;

static int cmp_step(const void *a, const void *b)
{
    const mem_step *x = a, *y = b;
    if (x->track != y->track) return x->track < y->track ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->delta > y->delta) - (x->delta < y->delta); /* frees first */
}

/* The worker of device track `track`, or -1. */
static int worker_of_track(const sim_report *rep, const timeline *tl, int track)
{
    const tl_track *t = &tl->tracks[track];
    if (t->kind != TL_TRACK_DEVICE) return -1;
    for (int i = 0; i < rep->ndevices; i++)
        if (rep->devices[i].device == t->device) return i;
    return -1;
}

int sim_memory_timeline(const sim_model *m, const sim_report *rep, timeline *tl,
                        plumb_err *err)
{
    const schedule *s = m->sched;
    mem_step *st = malloc((tl->n + 1) * sizeof *st);
    int *dev = malloc(((size_t)tl->ntracks + 1) * sizeof *dev);
    double *fixed = calloc((size_t)rep->ndevices + 1, sizeof *fixed);
    if (!st || !dev || !fixed) goto oom;
    for (int k = 0; k < tl->ntracks; k++) dev[k] = worker_of_track(rep, tl, k);
    for (int i = 0; i < rep->ndevices; i++) {
        const sim_device_report *d = &rep->devices[i];
        double slots = m->nccl_buffers ? held_3d(m, d->worker) : 0;
        for (int g = 0; !m->nccl_buffers && g < s->nstages; g++)
            for (int j = 0; j < s->replicas[g]; j++)
                if (s->stage_workers[s->stage_first[g] + j] == d->worker) {
                    slots += schedule_slots_fresh(s, d->worker, g) *
                             (m->stash_bytes[g] + m->slotbuf_bytes[g]);
                    break;
                }
        /* the run's moment: the step's copy is never held with the activations */
        fixed[i] = sim_memory_run_total(&d->mem) - slots;
    }
    size_t n = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (e->track < 0 || e->track >= tl->ntracks || dev[e->track] < 0 || e->stage < 0 ||
            e->stage >= s->nstages)
            continue;
        double per = m->stash_bytes[e->stage] + m->slotbuf_bytes[e->stage];
        if (e->kind == TL_F)
            st[n++] = (mem_step){e->track, e->start_s, per};
        else if (e->kind == TL_B || e->kind == TL_W)
            st[n++] = (mem_step){e->track, e->start_s + e->dur_s, -per};
    }
    qsort(st, n, sizeof *st, cmp_step);
    for (int k = 0; k < tl->ntracks; k++) /* every device starts at its fixed memory */
        if (dev[k] >= 0 && timeline_counter_add(tl, k, 0, fixed[dev[k]])) goto oom;
    double cur = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || st[i].track != st[i - 1].track) cur = 0;
        cur += st[i].delta;
        if (i + 1 < n && st[i + 1].track == st[i].track && st[i + 1].t == st[i].t) continue;
        double v = fixed[dev[st[i].track]] + (cur > 0 ? cur : 0);
        if (timeline_counter_add(tl, st[i].track, st[i].t, v)) goto oom;
    }
    free(st), free(dev), free(fixed);
    return 0;
oom:
    free(st), free(dev), free(fixed);
    return err_set(err, NULL, NULL, "out of memory");
}
