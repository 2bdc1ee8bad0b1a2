/* cost.h: the simulator's cost model (sim/cost.c): a plan and its schedule priced into the
 * engine's sim_model. Internal to sim/, its tests and the native planner, which prices
 * its estimates with the same functions. */
#ifndef PLUMB_SIM_COST_H
#define PLUMB_SIM_COST_H

#include "core/plan.h"
#include "core/schedule.h"
#include "sim/engine.h"

/* Bytes crossing the boundary after each layer of p, at the profile's minibatch:
 * cross[i] (0 <= i < nlayers) is what a cut between layers i and i + 1 sends, every
 * output with a consumer beyond the cut (for a chain, layer i's output). Returns a malloc'd
 * array of nlayers + 1 entries (the caller frees it), or NULL when out of memory. The
 * simulator's cut_bytes and the native planner's cuts both come from here. */
double *sim_cross_bytes(const profile *p);

/* Fills m (allocating its arrays; release with sim_model_release even on failure) for
 * schedule s of plan pl on network net; compute on straggler_device (-1 = none) is
 * multiplied by straggler_factor. Returns 0, or -1 with err when the schedule's stages and
 * workers do not match the plan's stages and devices. */
int sim_cost_build(sim_model *m, const plan *pl, const schedule *s, const sim_net *net,
                   int straggler_device, double straggler_factor, plumb_err *err);

/* Sets stage st's training state in m (param_bytes, gradmem_bytes, optmem_bytes, the
 * step's gradient copy stepcopy_bytes when m has it, grad_bytes, step_bytes: `params`
 * parameter bytes times sim_memory_state's figures for pl's precision, ZeRO stage and the stage's replicas) and its ring all-reduce time
 * (allreduce_s, over the stage's replica devices; with cp > 1 over every context-parallel
 * rank of them, sim_cost_dp_group, and ZeRO sharding over those replicas x cp ranks,
 * ring_members[st] (when m has it) replicas x cp and ring_devices[st] their devices, so
 * that the engine runs that ring, every hop a transfer; 0 and NULL without cp). With FP8 primary weights (m's fp8_param_bytes, pl's
 * fp8_param_gather) the ZeRO-1 all-gather half moves fp8_param_bytes[st] / 2 fewer bytes
 * (gather_bytes; grad_bytes, the mean of the two halves, 1 / 4 of them fewer).
 * sim_cost_build prices every stage with it; the layout search (planner/search3d_est.c) prices one pipeline of a replicated plan
 * and sets each stage's state for the replicas with it. m's arrays must be allocated
 * (sim_cost_build). */
void sim_cost_stage_state(sim_model *m, const plan *pl, const sim_net *net, int st,
                          double params);

/* 1 when pl sets any 3D field (tp > 1, sequence parallelism, ZeRO, checkpoint_layers,
 * selective recomputation, bf16/fp16): a plan for a Megatron-LM-style runtime, which
 * plumb's executor refuses; its memory then counts that runtime's buffers
 * (sim_model.nccl_buffers). */
int sim_cost_plan_is_3d(const plan *pl);

/* Seconds of `collectives` all-reduces of tensor parallelism that move `bytes` in all
 * (the sum of their sizes) among the tp devices first_device .. first_device + tp - 1: a
 * ring in that order (sim_net_ring), per_byte x bytes + fixed x collectives. A
 * reduce-scatter and an all-gather of the same size (sequence parallelism) move the same
 * bytes over the same ring in the same time. 0 when tp <= 1, nothing moves or out of
 * memory. */
double sim_cost_tp_s(const sim_net *n, int first_device, int tp, double bytes, int collectives);

/* The tensor-parallel collective time of one microbatch of plan stage st (its first
 * replica's group) at the plan's microbatch: *fwd_s inside its F, *bwd_s inside its B (and
 * I). Both 0 when pl->tp <= 1. */
void sim_cost_stage_tp(const plan *pl, const sim_net *n, int st, double *fwd_s, double *bwd_s);

/* Seconds of the all-gathers stage st of pl runs after its pipeline receives, one
 * microbatch (m's cut_bytes set, sim_cost_build): with the scatter-gather sends (tp > 1,
 * no sequence parallelism, p2p_split scatter-gather) a receive brings 1 / tp of the tensor
 * to each tensor rank and Megatron-LM's gather_split_1d_tensor all-gathers it whole over
 * the stage's tensor group before it is used: a ring all-gather of the whole tensor
 * (m->cut_bytes x tp) among the tp devices of the stage's first replica, half of
 * sim_cost_tp_s's all-reduce line, (tp - 1) / tp x bytes / rate + (tp - 1) latencies.
 * *fwd_s: after the receive of the forward input (st > 0 and stage st - 1 on another
 * device), inside F; *bwd_s: after the receive of the output gradient (st + 1 < nstages
 * and stage st + 1 on another device), inside B and I. Both 0 otherwise; the times are
 * the network's (sim_cost_build divides them by the stage's communication scale, as the
 * tensor-parallel collectives). */
void sim_cost_stage_recv_gather(const sim_model *m, const plan *pl, const sim_net *n, int st,
                                double *fwd_s, double *bwd_s);

/* sim_cost_stage_recv_gather from the whole tensors themselves: in_bytes received as stage
 * st's forward input, out_bytes as its output gradient (for callers without a sim_model:
 * the balancer, planner/balance3d.c). */
void sim_cost_recv_gathers(const plan *pl, const sim_net *n, int st, double in_bytes,
                           double out_bytes, double *fwd_s, double *bwd_s);

/* Seconds of one such all-gather of a whole tensor of `bytes` among the tp devices of plan
 * stage st's first replica (sim_cost_stage_recv_gather's each); 0 when pl's sends are not
 * scatter-gather (tp <= 1, sequence parallelism or p2p_split whole) or nothing moves. */
double sim_cost_recv_gather_s(const plan *pl, const sim_net *n, int st, double bytes);

/* Stage st's tensor-parallel collectives of one microbatch (sim_cost_stage_tp3). */
typedef struct sim_tp_times {
    double f, b, i;        /* seconds that block F, B and the split backward's I */
    double comm_f, comm_b; /* the collectives' own seconds, forward and backward */
} sim_tp_times;

/* Fills *t for plan stage st (its first replica's group, the plan's microbatch). Per layer,
 * c the time of its collectives in a pass and g the pass's compute on the group's device
 * (the profile's times x microbatch / minibatch / speed): tp_overlap none blocks c;
 * backward blocks max(0, c - W) of the backward's (the input-gradient all-reduce under the
 * weight-gradient GEMM; with sequence parallelism c / 2 + max(0, c / 2 - W), the
 * output-gradient all-gathers blocking; I, which a split backward runs without W, blocks
 * c); full blocks
 * max(0, c - g) + min(c, g) / tp in each pass (each collective pipelined with its GEMM in tp
 * chunks). All 0 when pl->tp <= 1. */
void sim_cost_stage_tp3(const plan *pl, const sim_net *n, int st, sim_tp_times *t);

/* Stage st's context-parallel K/V ring of one microbatch (pl->cp > 1; all 0 otherwise),
 * as Transformer Engine's AttnFuncWithCPAndKVP2P runs it: per layer with cp_ring_bytes
 * b, cp - 1 steps forward each moving b from every rank of the ring ps->devices[0] +
 * k tp (k < cp) to the next, 2 b backward (K, V and their gradients), a step taking
 * bytes / rate + latency of that ring's slowest hop (sim_net_ring's line taken apart).
 * Each step overlaps the attention of the chunk before (the layer's cp_attention_*_ms / cp
 * on the device): comm_f / comm_b the steps' own seconds, f / b (= i) what blocks,
 * (cp - 1) max(0, step - attention / cp) per layer and pass. */
void sim_cost_stage_cp(const plan *pl, const sim_net *n, int st, sim_tp_times *t);

/* Fills devs (room for replicas x cp) with stage st's data-parallel group, in rank order:
 * for each replica r its context-parallel ranks ps->devices[r] + k tp (Megatron-Core's
 * data-parallel group with context parallelism). Returns how many. */
int sim_cost_dp_group(const plan *pl, int st, int *devs);

/* Memory bandwidth (bytes/s) the optimizer step of a device of type t runs at: a known
 * device's (matched by name: H200 4.8 TB/s, H100 3.35, A100 2.0, V100 0.9, P100 0.73,
 * Titan X 0.48, "cpu" 10 GB/s), else SIM_MEM_BYTES_PER_FLOP x its peak FLOP/s, else
 * SIM_MEM_DEFAULT_BPS x its speed (the profiled device taken as V100-class). t may be
 * NULL. */
#define SIM_MEM_BYTES_PER_FLOP 0.07   /* H200: 4.8 TB/s / 67 TFLOP/s; A100, V100 alike */
#define SIM_MEM_DEFAULT_BPS 0.9e12
double sim_device_mem_Bps(const device_type *t);

/* Bytes an optimizer step moves per parameter byte: sgd 3 (read weights and gradients,
 * write weights), momentum 5, adam 7 (each state tensor read and written too). */
double sim_step_bytes_per_param(optimizer_kind opt);

/* The optimizer step's memory bandwidth on device type t (bytes/s, as the engine divides
 * step_bytes by it): where profile p measured the step of `opt` (step_ns_per_byte), the
 * bandwidth that measurement implies, sim_step_bytes_per_param(opt) / its seconds per
 * parameter byte, times t's speed (the profiled device has speed 1, as for the layer
 * times); otherwise sim_device_mem_Bps(t). p and t may be NULL. */
double sim_cost_step_Bps(const profile *p, optimizer_kind opt, const device_type *t);

/* Seconds a first or last stage spends inside each F gathering its microbatch from the
 * data set and uploading it (the executor's batch callback): p->input_gather_ms scaled
 * linearly from p->minibatch to `microbatch` samples; 0 when the profile does not say or
 * p is NULL. Add it once to a stage that is first, last or both. */
double sim_cost_gather_s(const profile *p, int microbatch);

/* The factor by which a worker on device d computes slower because the workers of d's
 * server share its CPU cores: (workers placed on that server, counting every w of
 * worker_device[0..nworkers) there) / the server type's `cores`, at least 1; 1 when the
 * type does not give cores (a GPU's devices compute on their own). */
double sim_cost_core_share(const cluster *c, const int *worker_device, int nworkers, int d);

#endif
