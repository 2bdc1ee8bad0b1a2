/* memory.h: the simulator's memory model (sim/memory.c). Internal to sim/ and its tests. */
#ifndef PLUMB_SIM_MEMORY_H
#define PLUMB_SIM_MEMORY_H

#include "core/profile.h"
#include "sim/engine.h"
#include "sim/sim.h"

/* The optimizer state per parameter byte: sgd 0, momentum 1, adam 2 (the native planner
 * prices its estimate with the same figure). */
double sim_memory_optimizer_mul(optimizer_kind opt);

/* A stage's training state and traffic per parameter byte (the profile's parameter bytes,
 * in the plan's precision). */
typedef struct sim_state_mul {
    double gradients;  /* gradient buffers */
    double optimizer;  /* optimizer state, with mixed precision the fp32 master weights
                          too; divided by the stage's replicas with ZeRO-1 */
    double stepcopy;   /* the fp32 copy of 16-bit gradients the optimizer step makes
                          (0 with fp32 gradients), divided by the replicas with ZeRO-1:
                          held from the step to the next iteration's zero_grad, never
                          with the activations (sim_memory.step_transient) */
    double reduce;     /* the data-parallel reduction as all-reduce bytes for the ring: the
                          gradients, or with ZeRO-1 a reduce-scatter of the gradients and
                          an all-gather of the parameters, (gradients + 1) / 2 */
    double step;       /* bytes one optimizer step reads and writes (sharded with ZeRO-1) */
} sim_state_mul;

/* Fills out for precision prec, ZeRO stage zero (0 or 1) over `replicas`, optimizer opt.
 * fp32 and tf32 without ZeRO: gradients 1, optimizer sim_memory_optimizer_mul, reduce 1,
 * step sim_step_bytes_per_param (the model before mixed precision). bf16: gradients 4 / e
 * (fp32 main gradients, e = 2 bytes an element), optimizer (4 master + 4 per state
 * tensor) / e. fp16: gradients 1 (fp16, as Megatron-LM keeps them), optimizer (4 master +
 * 4 per state) / e, stepcopy 4 / e (the fp32 gradients the step makes from them). So bf16
 * with adam takes 2 + 4 + 12 = 18 bytes per parameter, 6 + 12 / d with ZeRO-1 over d
 * replicas (docs/sim.md). stepcopy is 0 but for 16-bit gradients. */
void sim_memory_state(dev_precision prec, int zero, int replicas, optimizer_kind opt,
                      sim_state_mul *out);

/* sim_memory_state with the gradients kept and reduced in grad and the optimizer state in
 * ostate (the plan's grad_reduce and optimizer_state; each DEV_FP32, the default above, or
 * DEV_BF16, which changes the figures only with prec bf16, e = 2). grad bf16: gradients
 * 1 and reduce 1 (half the bytes), optimizer (4 master + 4 per state) / e, and with an fp32
 * optimizer state its fp32 copy of the gradients at the step, stepcopy 4 / e (Megatron-Core's
 * distributed optimizer steps from `.float()` of the bf16 gradients, and the next
 * iteration's zero_grad(set_to_none) frees it before any forward). ostate bf16: optimizer 2
 * per state / e, no master copy and no gradient copy (apex's DistributedFusedAdam with
 * dtype bf16: store_params off, its fused step reads the gradients as they are), step
 * (g + 2e + 4 per state) / e. So bf16 with adam: grad bf16 16 bytes a parameter resident
 * and 4 more at the step, 4 + 12 / d (+ 4 / d at the step) with ZeRO-1; both bf16 8,
 * 4 + 4 / d (docs/sim.md). prec fp8 (bf16 weights, FP8 multiplies)
 * gives bf16's figures; its FP8 weight copies are sim_memory_stage's. */
void sim_memory_state_of(dev_precision prec, dev_precision grad, dev_precision ostate,
                         int zero, int replicas, optimizer_kind opt, sim_state_mul *out);

/* What the layers [first, last] of a stage hold, at the profile's minibatch (bytes): the
 * sums the memory model reads (sim_memory_layers fills it; the native planner keeps one per
 * block range, so that its estimate and the simulator price a stage from the same figures). */
typedef struct sim_stage_layers {
    double params;        /* parameter bytes, a tensor tied to another layer of the range
                             (profile.h, "tied") counted once */
    double acts;          /* outputs held (a chain's flatten hands on its input: 0) */
    double saved;         /* saved_bytes */
    double sel_saved;     /* saved bytes when the selective parts are recomputed */
    double sel_transient; /* the most one layer's selective parts hold while recomputed */
    double split;         /* split_saved_bytes (kept between I and W) */
    double inner;         /* grad_buffer_bytes (the blocks' inner input gradients) */
    double ws;            /* the largest workspace_bytes (not scaled with the microbatch) */
    double lastact;       /* the last layer's output */
    double gradbuf;       /* the backward's two input-gradient buffers: a chain's walk of
                             its layers (each buffer as large as the largest input written
                             into it); a DAG's 2 x (1 with one layer) the largest of the
                             range's input and its layers' outputs but the last */
    double ckpt_keep;     /* checkpoint_layers k: the inputs kept at checkpoints */
    double ckpt_group;    /* k: the largest group's outputs and saved tensors */
    double in;            /* bytes crossing the cut before the range (0 at the start) */
    double out;           /* bytes crossing the cut after the range (0 at the end) */
    double data;          /* what a slot holds as the input: the profile's input_bytes for
                             the first stage, else `in` */
    double output;        /* the output a slot keeps with full recompute: the last
                             layer's, except on a DAG before the last stage every tensor
                             crossing the cut (`out`: the stage sends them all, and the
                             receiver copies them out of its buffers) */
    double fp8_copies;    /* parameter bytes of the range's transformer blocks (layers of
                             kind TransformerBlock, 2 bytes a parameter): with precision fp8
                             the bytes of their FP8 weight copies and transposes (1 + 1
                             bytes a parameter; the norms' few counted alike) */
    double loss;          /* the last stage: the loss layer's saved bytes (its rows and
                             targets, kept with recompute too); else 0 */
    int last;             /* 1: the range ends at the profile's last layer */
} sim_stage_layers;

/* Fills o for layers [first, last] of p (0 <= first <= last < p->nlayers; cross:
 * sim_cross_bytes(p)); k > 0: full recomputation from checkpoints every k layers
 * (ckpt_keep, ckpt_group; 0 otherwise). */
void sim_memory_layers(const profile *p, const double *cross, int first, int last, int k,
                       sim_stage_layers *o);

/* How a stage is run, as far as its memory depends on it. */
typedef struct sim_mem_setting {
    double scale;         /* microbatch / the profile's minibatch */
    int recompute;        /* recompute_kind */
    int checkpoint_layers; /* with full recompute: the plan's checkpoint_layers */
    int splits;           /* 1: backwards run as I and W (zero-bubble) */
    int nccl;             /* 1: a Megatron-LM-style runtime (sim_model.nccl_buffers) */
    dev_precision precision;
    int zero;             /* ZeRO stage, 0 or 1 */
    int replicas;         /* the stage's replicas (ZeRO-1 shards over them) */
    optimizer_kind opt;
    dev_precision grad_reduce;     /* the plan's grad_reduce (sim_memory_state_of) */
    dev_precision optimizer_state; /* the plan's optimizer_state */
    int fp8_param_gather; /* 1 (precision fp8): FP8 primary weights (the plan's
                             fp8_param_gather): the blocks' weights held as FP8 and its
                             transpose, 1 + 1 bytes a parameter, with no bf16 copy */
} sim_mem_setting;

/* One stage's memory terms (bytes): what one device holding it keeps. */
typedef struct sim_stage_mem {
    double params;        /* weights of one version (fp8: with their FP8 copies; with
                             fp8_param_gather the blocks' FP8 weights instead of bf16) */
    double gradients;     /* gradient buffers (sim_memory_state) */
    double optimizer;     /* optimizer state (sim_memory_state), resident */
    double step_copy;     /* the step's fp32 copy of 16-bit gradients (sim_state_mul.stepcopy):
                             at the step only, never with the activations */
    double stash;         /* per buffer slot: the input (the first stage: its data), every
                             layer's output and saved tensors (full recompute: the output,
                             the loss's rows on the last stage, the checkpoints' inputs),
                             the W pass's gradients; with nccl less the output once sent */
    double slotbuf;       /* per buffer slot: the received output gradient and the input
                             gradient to send (0 with nccl: they move to gradbuf) */
    double transient;     /* once: what recomputation rebuilds during one backward */
    double gradbuf;       /* once: the backward's input-gradient buffers and the blocks'
                             inner ones (with nccl also one microbatch's slot gradients) */
    double workspace;     /* the backend scratch (a device's stages share the largest) */
    double kept;          /* between iterations, with nccl, a stage that receives its input
                             (not the first): its last microbatch's received input and the
                             gradient computed for it, 2 x `in`. Megatron-LM passes the
                             received tensor to the model chunk (set_input_tensor, which the
                             chunk's TransformerBlock keeps until its next forward) and
                             retains its gradient (backward_step: retain_grad), so both
                             outlive the iteration; 0 otherwise */
    double received;      /* with nccl, a stage that receives its input (not the first): one
                             input received and waiting for its forward, as a tensor rank
                             holds it, `in`: the whole tensor (1 / t of it with sequence
                             parallelism, as the profile's bytes are), though without
                             sequence parallelism the transfer (cut_bytes) moves 1 / t per
                             rank, Megatron-LM's scatter-gather all-gathering it after the
                             receive; 0 otherwise */
} sim_stage_mem;

/* Fills out from the layer sums L under setting s. The one formula of a stage's memory:
 * the simulator (sim_cost_build) and the native planner's estimate both call it. With
 * precision fp8 the weights (params) include L's fp8_copies; with fp8_param_gather too
 * those FP8 weights and transposes replace the blocks' bf16 weights (L's fp8_copies less). */
void sim_memory_stage(const sim_stage_layers *L, const sim_mem_setting *s,
                      sim_stage_mem *out);

/* A device's memory as its stages are added (sim_memory_add), then closed
 * (sim_memory_close). Start from all zeros. Both are inline: the native planner's dynamic
 * program sums a device for every stage it tries. */
typedef struct sim_memory_acc {
    sim_memory mem;       /* weights .. workspace as summed so far */
    double root;          /* the in-process all-reduce's receive scratch (the largest) */
} sim_memory_acc;

/* Bytes of the receive scratch that plumb's in-process all-reduce (exec/transport_local.c)
 * keeps on replica r (0-based) of a stage with n replicas whose fp32 gradients take
 * grad_bytes: a reduce-scatter then an all-gather, each member summing one part of
 * count / n + 1 floats at most, into a received-part buffer (replicas 0 and 1) plus a
 * running sum (replicas 2 and up); with fewer floats than replicas, a gather to replica 0,
 * which keeps the whole gradient. 0 for an unreplicated stage. */
static inline double sim_allreduce_scratch(double grad_bytes, int n, int r)
{
    if (n <= 1 || grad_bytes <= 0) return 0;
    const double count = (double)(long long)(grad_bytes / 4);
    if (count < n) return r == 0 ? count * 4 : 0;
    return (r < 2 ? 1 : 2) * ((double)(long long)(count / n) + 1) * 4;
}

/* The largest scratch any replica of such a stage keeps (the fullest device's). */
static inline double sim_allreduce_scratch_max(double grad_bytes, int n)
{
    return sim_allreduce_scratch(grad_bytes, n, n > 2 ? 2 : 0);
}

/* Adds stage t, held with `versions` weight versions (<= 0: 1) and `slots` buffer slots,
 * to a. scratch: the bytes of the all-reduce's receive scratch the device keeps for t
 * (sim_allreduce_scratch; a device keeps the largest of its stages'). nccl: a
 * Megatron-LM-style runtime (activations counted by the caller; one backward's buffers at
 * a time; no receive buffer). */
static inline void sim_memory_add(sim_memory_acc *a, const sim_stage_mem *t, int versions,
                                  double slots, double scratch, int nccl)
{
    sim_memory *m = &a->mem;
    m->weights += t->params * (versions > 0 ? versions : 1);
    m->gradients += t->gradients;
    m->optimizer += t->optimizer;
    m->step_transient += t->step_copy; /* a device steps all its chunks at once */
    m->kept_inputs += t->kept;
    if (!nccl) {
        m->activations += slots * t->stash + t->transient;
        m->buffers += t->gradbuf + slots * t->slotbuf;
        if (scratch > a->root) a->root = scratch;
    } else if (t->gradbuf > m->buffers) { /* one backward at a time */
        m->buffers = t->gradbuf;
    }
    if (t->workspace > m->workspace) m->workspace = t->workspace;
}

/* What m holds during the forwards and backwards: weights .. staging (sim_memory.total
 * when the step's moment is not larger). */
static inline double sim_memory_run_total(const sim_memory *m)
{
    return m->weights + m->gradients + m->optimizer + m->activations + m->buffers +
           m->workspace + m->staging;
}

/* What m holds at the optimizer step, 0 when it makes no copy (step_transient 0): the
 * resident weights, gradients, optimizer state, scratch, staging and kept_inputs plus
 * step_transient; the activations and gradient buffers are freed by then. */
static inline double sim_memory_step_total(const sim_memory *m)
{
    if (m->step_transient <= 0) return 0;
    return m->weights + m->gradients + m->optimizer + m->workspace + m->staging +
           m->kept_inputs + m->step_transient;
}

/* Closes a into out: buffers plus the receive buffer, staging, total (the larger of the
 * run's and the step's moments: sim_memory_run_total, sim_memory_step_total), capacity,
 * fits (kept_inputs as summed, not part of the run's moment). */
static inline void sim_memory_close(const sim_memory_acc *a, double staging,
                                    double capacity, sim_memory *out)
{
    *out = a->mem;
    out->buffers += a->root;
    out->staging = staging;
    out->total = sim_memory_run_total(out);
    double step = sim_memory_step_total(out);
    if (step > out->total) out->total = step;
    out->capacity = capacity;
    out->fits = out->total <= capacity;
}

/* Fills out with worker w's memory: weights x versions[stage] (NULL or <= 0 entries
 * count 1 version), gradients, optimizer state (m's param_bytes, gradmem_bytes and
 * optmem_bytes; in a model without them, grad_bytes and opt), activations and gradient buffers
 * for the buffer slots of w's stages, the largest scratch, the step's gradient copies
 * (m's stepcopy_bytes; 0 without them); fits = total <= capacity. With
 * m->nccl_buffers (a Megatron-LM-style runtime) the activations are the most w's list holds
 * at once (in-flight microbatches' stash_bytes, received inputs waiting for their forward
 * at cut_bytes, one backward's transient_bytes) and the gradient buffers the largest of its
 * stages' (one backward at a time), and kept_inputs the sum of its stages' kept_bytes
 * (what stays between iterations; 0 in a model without them). */
void sim_memory_of(const sim_model *m, int w, const int *versions, optimizer_kind opt,
                   double capacity, sim_memory *out);

/* Fills m->staging_bytes from m's schedule and cut_bytes: per worker, for each peer it
 * sends gradients to, schedule_send_bound's count of them x the pair's largest (a SEND_B
 * of stage s carries cut_bytes[s - 1]; activations and all-reduce messages are lent, not
 * staged). Returns 0, or -1 with err (out of memory, a schedule that deadlocks). */
int sim_memory_staging(sim_model *m, plumb_err *err);

/* Adds to tl a memory sample per change of each device's memory over the run (see
 * tl_counter): the device's peak rep->devices[i].mem.total less its buffer slots'
 * activations and buffers (with m->nccl_buffers, less its activations), plus those of the microbatches in flight at the time on each
 * of its stages (from the start of their F to the end of their B, or W when the backward
 * is split), at the per-slot size the memory model counts. The samples never exceed the
 * peak (the model reserves schedule_slots slots, the most the list can hold open).
 * Returns 0, or -1 with err when out of memory. */
int sim_memory_timeline(const sim_model *m, const sim_report *rep, timeline *tl,
                        plumb_err *err);

#endif
