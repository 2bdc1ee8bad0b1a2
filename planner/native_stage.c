/* native_stage.c: the price of one stage, a block range on a unit range, in closed form
 * (docs/planner-native.md, "The cost model"). Per microbatch a stage costs
 *   compute  c = (F + B [+ F with recompute]) x microbatch / profiled minibatch / speed,
 *   period   max(c / replicas [+ exposed all-reduce / replicas for pipedream],
 *                output bytes / the range's outgoing transfer rate)   (links overlap compute;
 *            with blocking transfers, p2p sync, c also holds one transfer out and one back)
 *   latency  c + 2 (link latency + bytes / rate)   (the fill and drain of flushing kinds)
 * and the all-reduce of its gradients is overlapped with the backward: only
 * max(all-reduce - backward, last bucket) is exposed (all of it with grad_sync end), once
 * per iteration for the flushing kinds and 2bw, once per microbatch round for pipedream.
 * Memory: the simulator's own functions (sim/memory.h: sim_memory_layers per block
 * range, sim_memory_stage, sim_memory_add and sim_memory_close) with the planner's counts
 * of weight versions, buffer slots and staged gradients (a closed form of the schedule's warmup; the complete
 * partitions read theirs from the schedule: native_part_memory.c). */
#include "planner/native_impl.h"

#include "sim/cost.h"   /* sim_cost_gather_s */
#include "sim/memory.h" /* sim_memory_optimizer_mul */

#include <math.h>
#include <string.h>

/* The input gradients a stage holding k microbatches (km per flush; 0: no flush) can have
 * on their way back to the stage before it, each in a staging buffer of the local
 * transport (schedule_send_bound): all of them under GPipe; else the previous stage's
 * k + 1 at most, since it holds one microbatch more. */
int nm_staged_grads(sched_kind kind, int k, int km)
{
    int g = sched_traits_of(kind)->hold == SCHED_HOLD_ALL ? k : k + 1;
    return km > 0 && g > km ? km : g;
}

/* The buffer slots (schedule_slots) of a stage holding k microbatches (km per flush; 0: no
 * flush): under 1F1B, PipeDream and 2BW a stage that receives posts the next RECV_F ahead
 * of the compute before it, so it holds one more (exact without replicas; the simulator
 * counts the rest); under GPipe and the zero-bubble kinds the k already cover it. */
int nm_held_slots(sched_kind kind, int k, int km, int receives)
{
    if (!receives || sched_traits_of(kind)->hold != SCHED_HOLD_1F1B)
        return k;
    return km > 0 && k + 1 > km ? km : k + 1;
}

/* Chunked schedules hold several stages per device, placed as the trait table says
 * (sched_kind_chunked, sched_kind_rank: interleaved stage i on rank i % p; the V kinds
 * ranks 0..p-1, then p-1..0). */

/* The all-reduce of P parameter bytes over range R of n devices (sim_net_allreduce_s's
 * ring, from R's coefficients). */
static double range_allreduce_s(const nm_range *R, int n, double P)
{
    return n > 1 && P > 0 ? R->ar_a * P + R->ar_b : 0;
}

dev_precision nm_precision(const nm_model *m)
{
    return m->p->precision >= 0 ? (dev_precision)m->p->precision : DEV_FP32;
}

int nm_nccl(const nm_model *m, const nm_setting *s)
{
    dev_precision p = nm_precision(m);
    return s->zero || p == DEV_BF16 || p == DEV_FP16 || p == DEV_FP8;
}

/* How the plan nm_plan makes runs a stage of n replicas under s, for the memory model:
 * the plan's precision (nm_precision: the profile's, else fp32) and ZeRO stage (s->zero),
 * no checkpoints; the schedule's split backward (the simulator looks for I actions in the
 * generated lists: the kinds with split_backward have them); with ZeRO 1 or a 16-bit or
 * fp8 precision the Megatron-LM-style buffers the simulator gives such a plan (nm_nccl; no
 * all-reduce scratch nor staging either, which the callers leave out there). */
sim_mem_setting nm_mem_setting(const nm_model *m, const nm_setting *s, int n)
{
    sim_mem_setting ms = {(double)s->mbsize / m->p->minibatch,
                          s->recompute ? RECOMPUTE_FULL : RECOMPUTE_NONE,
                          0,
                          sched_traits_of(s->kind)->split_backward,
                          nm_nccl(m, s),
                          nm_precision(m),
                          s->zero,
                          n,
                          s->opt,
                          DEV_FP32,
                          DEV_FP32,
                          0};
    return ms;
}

/* The memory terms of blocks [b0, b1) on n replicas under s: the simulator's formula
 * (sim_memory_stage) over the simulator's sums of the range's layers. */
void nm_block_mem(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                  sim_stage_mem *t)
{
    sim_mem_setting ms = nm_mem_setting(m, s, n);
    sim_memory_stage(&m->lay[b0 * (m->nb + 1) + b1], &ms, t);
}

/* The counts of a stage starting at block b0 on n devices, W devices from it to the end
 * of the pipeline, kzb the zero-bubble kinds' pipeline-wide warmup (0: unknown). */
void nm_count_stage(const nm_setting *s, int b0, int W, int n, int kzb, nm_counts *o)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    int k;
    switch (tr->hold) {
    case SCHED_HOLD_ALL: k = nm_ceil_div(s->M, n); break;
    case SCHED_HOLD_1F1B:
        k = !tr->async && nm_ceil_div(s->M, n) < nm_ceil_div(W, n) ? nm_ceil_div(s->M, n)
                                                              : nm_ceil_div(W, n);
        break;
    case SCHED_HOLD_ZB: {
        /* every stage holds the first stage's warmup plus the deferred weight gradients:
         * the largest ceil(devices from a stage on / its replicas) of the pipeline (kzb),
         * at most its microbatches per flush; unknown (kzb 0): this stage's + 1 */
        int a = kzb > 0 ? kzb : nm_ceil_div(W, n) + 1, b = nm_ceil_div(s->M, n);
        k = a < b ? a : b;
        break;
    }
    default: k = nm_ceil_div(W, n); break;
    }
    const int km = s->M > 0 ? nm_ceil_div(s->M, n) : 0;
    /* a stage keeps no more versions than microbatches in flight (2bw's last stage: 1) */
    const int kw = nm_ceil_div(W, n);
    o->ver = tr->versions > 0 ? (tr->versions < kw ? tr->versions : kw) : k;
    o->slots = nm_held_slots(s->kind, k, km, b0 > 0);
    o->staged = nm_staged_grads(s->kind, k, km);
}

/* The memory of the first device of a stage (blocks [b0, b1) on n devices) with counts
 * cn, capacity cap: the simulator's terms (nm_block_mem) summed as the simulator sums them
 * (sim_memory_add: the all-reduce scratch of a replicated stage's fullest replica too), the
 * staging of the gradients it sends back (the input's bytes each). */
void nm_stage_memory(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                     const nm_counts *cn, double cap, sim_memory *out)
{
    sim_stage_mem t;
    nm_block_mem(m, s, b0, b1, n, &t);
    sim_memory_acc a;
    memset(&a, 0, sizeof a);
    sim_memory_add(&a, &t, cn->ver, cn->slots,
                   nm_nccl(m, s) ? 0 : sim_allreduce_scratch_max(t.gradients, n), 0);
    double in = b0 > 0 ? m->cut[b0] * ((double)s->mbsize / m->p->minibatch) : 0;
    sim_memory_close(&a, nm_nccl(m, s) ? 0 : cn->staged * in, cap, out);
}

void nm_stage_compute(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                      double *F, double *B)
{
    const nm_range *R = &m->rg[u * (m->U + 1) + r];
    double scale = (double)s->mbsize / m->p->minibatch * 1e-3 / R->speed;
    *F = (m->cF[b1] - m->cF[b0]) * scale;
    *B = (m->cB[b1] - m->cB[b0]) * scale;
    if (s->recompute) *B += *F;
    if (b0 == 0 || b1 == m->nb) /* the batch gather, priced as the simulator does */
        *F += sim_cost_gather_s(m->p, s->mbsize) / R->speed;
}

/* W: devices of this stage and every later one; given: the stage's memory (its fullest
 * device's), or NULL for the closed form's counts (nm_count_stage). Returns 1 when it fits
 * memory. */
int nm_stage_cost_k(const nm_model *m, const nm_setting *s, int b0, int b1, int u,
                    int r, int W, int kzb, const sim_memory *given, nm_cost *o)
{
    const nm_range *R = &m->rg[u * (m->U + 1) + r];
    int n = r * m->g;
    double F, B;
    nm_stage_compute(m, s, b0, b1, u, r, &F, &B);
    double c = F + B, P = m->lay[b0 * (m->nb + 1) + b1].params;
    double ar = range_allreduce_s(R, n, P), arx = 0;
    if (ar > 0 && s->grad_sync_end) {
        arx = ar; /* after the last backward: nothing to hide under */
    } else if (ar > 0) {
        double tail = ar * (NM_BUCKET_BYTES < P ? NM_BUCKET_BYTES / P : 1);
        arx = ar - B > tail ? ar - B : tail;
    }
    double bscale = (double)s->mbsize / m->p->minibatch;
    double out = b1 < m->nb ? m->cut[b1] * bscale : 0;
    double comm = 0, lat = c;
    if (out > 0) {
        if (!(R->out_total > 0)) return 0; /* no next unit */
        comm = out / R->out_total;
        lat += 2 * (R->out_lat + out / R->out_rate);
    }
    double in = b0 > 0 ? m->cut[b0] * bscale : 0;
    if (in > 0 && R->in_total > 0 && in / R->in_total > comm) comm = in / R->in_total;
    const sched_traits *tr = sched_traits_of(s->kind);
    /* blocking transfers: each replica waits for its output's transfer after a forward
     * and for its input gradient's after a backward (the link no longer overlaps) */
    double busy = c;
    if (s->p2p_sync) {
        if (out > 0) busy += R->out_lat + out / R->out_rate;
        if (in > 0 && R->in_rate > 0) busy += R->in_lat + in / R->in_rate;
    }
    double per = tr->step_each_round ? (busy + arx) / n : busy / n;
    if (comm > per) per = comm;
    sim_memory mm;
    if (given) {
        mm = *given;
    } else {
        nm_counts cn;
        nm_count_stage(s, b0, W, n, kzb, &cn);
        nm_stage_memory(m, s, b0, b1, n, &cn, R->cap, &mm);
    }
    double mem = mm.total;
    o->c = c;
    o->b = B;
    o->per = per;
    o->comm = comm;
    o->lat = lat;
    o->arx = arx;
    o->mem = mem;
    o->cap = R->cap;
    if (tr->mb_per_replica && s->M > 0 && s->M % n)
        return 0; /* a fixed microbatch count must split evenly over the replicas */
    return mem <= R->cap;
}

int nm_stage_cost(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                  int W, nm_cost *o)
{
    return nm_stage_cost_k(m, s, b0, b1, u, r, W, 0, NULL, o);
}

void nm_stage_terms(const nm_model *m, const nm_setting *s, const nm_stage *st, nm_terms *out)
{
    const nm_range *R = &m->rg[st->u * (m->U + 1) + st->r];
    const double bscale = (double)s->mbsize / m->p->minibatch;
    const double P = m->lay[st->b0 * (m->nb + 1) + st->b1].params;
    out->in_bytes = st->b0 > 0 ? m->cut[st->b0] * bscale : 0;
    out->out_bytes = st->b1 < m->nb ? m->cut[st->b1] * bscale : 0;
    out->xfer_s = out->out_bytes > 0 && R->out_rate > 0
                      ? R->out_lat + out->out_bytes / R->out_rate
                      : 0;
    out->allreduce_s = range_allreduce_s(R, st->r * m->g, P);
    nm_block_mem(m, s, st->b0, st->b1, st->r * m->g, &out->mem);
}

double nm_stage_step_s(const nm_model *m, const nm_setting *s, const nm_stage *st)
{
    const double P = m->lay[st->b0 * (m->nb + 1) + st->b1].params;
    sim_state_mul sm;
    sim_memory_state_of(nm_precision(m), DEV_FP32, DEV_FP32, s->zero, st->r * m->g, s->opt,
                        &sm);
    /* every replica steps on its own device: the slowest decides (a stage across device
     * types: each replica's next forward waits for its own step) */
    double worst = 0;
    for (int d = 0; d < st->r * m->g; d++) {
        const device_type *t = cluster_device_type(m->c, m->order[st->u * m->g + d]);
        double Bps = sim_cost_step_Bps(m->p, s->opt, t);
        if (Bps > 0 && P * sm.step / Bps > worst) worst = P * sm.step / Bps;
    }
    return worst;
}
