/* engine.h: the simulator's discrete-event engine and the priced model it replays. The cost
 * model (sim/cost.c) turns a plan into a sim_model: per-stage action times, per-worker
 * device and slowdown, transfer bytes and the network; the engine replays a schedule IR on
 * it and measures. Tests may build a sim_model by hand (with a hand-built schedule).
 *
 * Engine semantics (docs/sim.md): each worker runs its actions in order on its device's
 * compute stream; SEND is asynchronous (queued on the directed link, the worker goes on);
 * RECV posts the receive (the worker goes on) and the computation that consumes its data
 * (F for RECV_F, B or I for RECV_B) waits until the matching transfer has arrived;
 * ALLREDUCE blocks until the ring
 * all-reduce of every replica of the stage is done, its buckets overlapped with the last
 * backward and each of their ring steps a transfer per hop on the same links and ports as
 * the sends; F/B/I/W/STEP occupy the compute stream for their priced time (a STEP also
 * step_bytes / worker_mem_Bps). A transfer holds
 * its directed link for bytes / rate and a lane of every egress port it leaves through
 * (level 0: the device's own port; level l >= 1: the port of the sender's level-(l-1)
 * group; a port has floor(egress / bandwidth) lanes, at least 1; a ring hop of width w,
 * sim_net_ring_widths, holds w lanes of each and moves at w x rate; a pipeline send of a
 * tensor-parallel group leaving its server also holds a lane per rank of the group's own,
 * sim_net_p2p_lanes, and moves share times longer where its ranks outnumber them); it
 * arrives latency later. The hops of a ring step whose links and ports nothing else contends
 * for run as one event instead of a transfer each, with the same results
 * (sim/engine_ring.c). */
#ifndef PLUMB_SIM_ENGINE_H
#define PLUMB_SIM_ENGINE_H

#include "core/cluster.h"
#include "core/err.h"
#include "core/schedule.h"
#include "core/timeline.h"

/* Compute-kind slots of sim_model.act_s. */
enum { SIM_C_F = 0, SIM_C_B, SIM_C_I, SIM_C_W, SIM_C_STEP, SIM_NC };

/* The network as the engine sees it (a copy of the cluster's levels after overrides). */
typedef struct sim_net {
    int nlevels;
    long long gsize[CLUSTER_MAX_LEVELS]; /* devices per group of level l (prefix products) */
    double bw[CLUSTER_MAX_LEVELS];       /* bytes/s of one transfer crossing level l */
    double lat[CLUSTER_MAX_LEVELS];      /* seconds */
    double egress[CLUSTER_MAX_LEVELS];   /* bytes/s of a level-(l-1) group's port into l */
} sim_net;

/* Fills n from c, with bw_override[l] > 0 replacing level l's bandwidth (egress scaled by
 * the same ratio); bw_override may be NULL. */
void sim_net_from_cluster(sim_net *n, const cluster *c, const double *bw_override);

/* Level crossed between devices a and b (-1 when a == b), and the path's rate (bytes/s,
 * the slowest of bandwidth and egress over the levels crossed: level 0 alone inside a
 * server, else levels 1..L) and latency (sum over the levels crossed). */
int sim_net_path(const sim_net *n, int a, int b, double *rate, double *latency);

/* Lanes of a level-l egress port: floor(egress / rate), at least 1 (rate the slower of
 * the level's bandwidth and egress): that many transfers leave through it at full speed. */
int sim_net_lanes(const sim_net *n, int l);

/* A pipeline send of the tensor-parallel group of tp devices from device a (its first;
 * the group is a .. a + tp - 1) leaving a's server (level >= 1): each of the group's ranks
 * inside the server sends its share at once over its own NIC, so the send holds a lane per
 * rank of the group's own lanes of the server's level-1 port (its ranks' part of the
 * port's, sim_net_lanes x ranks / devices per server, at least 1; *own gets them) and
 * returns how many: min(ranks, *own). *share (may be NULL) gets ranks / that: how many
 * ranks' shares each lane carries one after another (1 when the lanes suffice; a port of
 * fewer lanes than devices, one NIC for the server: tp). tp <= 1, or a one-level net:
 * 1, *own 1, *share 1. */
int sim_net_p2p_lanes(const sim_net *n, int a, int tp, int *own, double *share);

/* The width of each hop of the ring devs[0..r-1] (hop i: devs[i] -> devs[(i+1) % r]): how
 * many lanes of each egress port it leaves through it moves over at once, as a collective
 * library's channels do on rail-optimized servers, each channel leaving through another
 * device's network port. For a hop crossing level l >= 1 (sender in group G of level l-1,
 * k of the ring's distinct devices in G, j of its hops leaving G at level l or above):
 * max(1, floor(min(k, lanes of level l) / j)); the least over the levels it crosses.
 * Level-0 hops and every hop where the levels it crosses have one lane: 1. Fills
 * width[0..r-1]; returns 0, or -1 when out of memory (width then all 1). */
int sim_net_ring_widths(const sim_net *n, const int *devs, int r, int *width);

/* The ring all-reduce of devs[0..r-1] (ring in the given order) as a line in its bytes:
 * X bytes take *per_byte X + *fixed seconds, *per_byte = 2(r-1)/r / rate and *fixed =
 * 2(r-1) latency, rate and latency those of the ring's slowest hop, a hop moving at its
 * path's rate times its width (sim_net_ring_widths), and hops leaving a group through the
 * same egress port sharing it. Returns 0, or -1 (both 0) when r <= 1 or no hop leaves a
 * device. sim_net_allreduce_s and the native planner both price from it. */
int sim_net_ring(const sim_net *n, const int *devs, int r, double *per_byte, double *fixed);

/* Ring all-reduce of `bytes` among the devices devs[0..r-1] (ring in the given order):
 * sim_net_ring's line at `bytes`. 0 when r <= 1 or bytes <= 0. */
double sim_net_allreduce_s(const sim_net *n, const int *devs, int r, double bytes);

typedef struct sim_model {
    const schedule *sched;    /* borrowed */
    int *worker_device;       /* [nworkers] cluster device of each worker */
    double *worker_scale;     /* [nworkers] multiplies compute times (1 / speed x straggler) */
    double *act_s;            /* [nstages * SIM_NC] seconds per microbatch at scale 1 */
    double *cut_bytes;        /* [nstages] bytes crossing the cut after stage s, per
                                 microbatch (sent s -> s+1 forward, s+1 -> s backward) */
    double *allreduce_s;      /* [nstages] ring all-reduce time of the stage's gradients */
    double *grad_bytes;       /* [nstages] gradient bytes all-reduced */
    int *ring_members;        /* [nstages] members of the stage's data-parallel ring: 0 = its
                                 replicas (NULL in hand-built models: all 0); more with
                                 context parallelism (replicas x cp, sim_cost_dp_group): the
                                 engine's ring then runs over those members' devices,
                                 ring_devices, 2 (N - 1) steps of bytes / N per hop, every
                                 hop (between a replica's own context ranks as between
                                 replicas) a link transfer at its sim_net_ring_widths width,
                                 sent by its member's replica's worker (eng_ring_cp); with
                                 one replica the engine adds the ALLREDUCE before the
                                 stage's STEPs; docs/sim.md, "Context parallelism") */
    int **ring_devices;       /* [ring_nstages] with ring_members: the ring's members' devices
                                 in ring order (sim_cost_dp_group: replica j's context rank k
                                 at j cp + k, plan_cp_device), owned (sim_model_release frees
                                 them); NULL entries (and NULL) where a ring is the replicas' */
    int ring_nstages;         /* entries of ring_devices */
    double *stash_bytes;      /* [nstages] bytes kept per buffer slot: the stage
                                 input, every layer's output and saved tensors (with
                                 recompute the input and output), the W pass's gradients */
    double *transient_bytes;  /* [nstages] once per stage with recompute: one microbatch's
                                 outputs and saved tensors */
    double *gradbuf_bytes;    /* [nstages] once per stage: the backward's two input-gradient
                                 buffers and the blocks' inner ones */
    double *slotbuf_bytes;    /* [nstages] per buffer slot: the received output gradient
                                 (not the last stage) and the input gradient waiting to be
                                 sent (not the first) */
    double *workspace_bytes;  /* [nstages] the backend scratch its layers need (the largest;
                                 a device's stages share one) */
    double *step_bytes;       /* [nstages] bytes one optimizer STEP reads and writes */
    double *staging_bytes;    /* [nworkers] the local transport's staging buffers the
                                 worker sends from (sim_memory_staging; 0 in hand-built
                                 models unless filled) */
    double *worker_mem_Bps;   /* [nworkers] memory bandwidth its STEPs run at (bytes/s,
                                 divided by any straggler factor); 0 = steps cost only
                                 act_s[SIM_C_STEP] */
    sim_net net;
    int record;               /* 1: fill the result's timeline */
    int skip_ring_hops;       /* 1 (with record): leave out the ring all-reduce hops' link
                                 events (same results, a timeline linear in replicas) */
    int ring_per_hop;         /* 1: run every hop of a ring step as a transfer, even hops
                                 whose links and ports nothing else uses (the grouped
                                 steps' reference, for tests); 0 (default): such hops run
                                 as one grouped event per step (same results) */
    const char **device_names; /* [nworkers] track names, or NULL for defaults */
    int p2p_lanes;            /* the tensor-parallel ranks a point-to-point transfer stands
                                 for (a plan's tp): each sends its share over its own NIC
                                 at once, so a transfer leaving the server holds
                                 sim_net_p2p_lanes lanes of its group's own (the group's
                                 sends to either neighbour share them) and, where its ranks
                                 outnumber them, moves share times longer (docs/sim.md,
                                 "Pipeline sends with tp > 1"); 0 or 1 (hand-built models,
                                 tp 1): none of that */
    int p2p_sync;             /* 1: synchronous point-to-point transfers (a plan's
                                 "p2p": "sync", engine_sync.c): a send moves only once its
                                 receiver has posted the matching RECV, and a worker's next
                                 computation waits until every send it issued before it
                                 has been delivered; 0 (default): sends and receives
                                 overlap with compute */
    int grad_sync_end;        /* 1: each worker reduces its gradients after its last
                                 computation of the iteration (a plan's "grad_sync": "end",
                                 engine_gradsync.c): its stages' rings one after another,
                                 all buckets ready at once, then its steps; 0 (default):
                                 a stage's ring overlaps its last backward */
    /* The memory model's training state per stage (sim/memory.c; the engine reads none of
     * them). sim_cost_build fills them; NULL in hand-built models, where grad_bytes stands
     * for all three. */
    double *param_bytes;      /* [nstages] weights of one version */
    double *fp8_weight_bytes; /* [nstages] with precision fp8, Transformer Engine's FP8 copies
                                 of the stage's projection weights and their transposes
                                 (sim_stage_layers.fp8_copies), held beside the weights;
                                 0 otherwise, NULL in hand-built models */
    double *fp8_param_bytes;  /* [nstages] with FP8 primary weights (a plan's
                                 fp8_param_gather), the stage's block weights at 2 bytes a
                                 parameter (sim_stage_layers.fp8_copies), which the ZeRO-1
                                 parameter all-gather moves at 1 byte; 0 otherwise, NULL in
                                 hand-built models */
    double *gradmem_bytes;    /* [nstages] gradient buffers (fp32 main gradients with bf16) */
    double *optmem_bytes;     /* [nstages] optimizer state (and fp32 master weights with
                                 mixed precision), sharded over the replicas with ZeRO-1 */
    double *stepcopy_bytes;   /* [nstages] the optimizer step's fp32 copy of 16-bit
                                 gradients (sim_stage_mem.step_copy), held at the step
                                 only; NULL in hand-built models */
    double *kept_bytes;       /* [nstages] what a Megatron-LM-style runtime keeps between
                                 iterations beyond the training state (sim_stage_mem.kept;
                                 0 without nccl_buffers) */
    double *recv_bytes;       /* [nstages] a received input waiting for its forward as a
                                 tensor rank of stage s holds it (sim_stage_mem.received):
                                 the whole tensor, where cut_bytes[s - 1] is what one rank's
                                 transfer moves (1 / tp of it with tp > 1 and no sequence
                                 parallelism); NULL in hand-built models: cut_bytes[s - 1] */
    double *gather_bytes;     /* [nstages] 0, or where the ZeRO parameter all-gather runs
                                 apart from the gradients' reduce-scatter (plan's
                                 overlap_param_gather): its bytes. grad_bytes is then the
                                 mean of the two halves' bytes (what the one ring moved),
                                 so the reduce-scatter moves 2 grad_bytes - gather_bytes;
                                 it ends the ALLREDUCE, the all-gather starts when the
                                 members' optimizer steps end and the next forwards wait
                                 for its buckets (docs/sim.md, "Data-parallel reduction") */
    int nccl_buffers;         /* 1: the buffers of a Megatron-LM-style runtime (plans with
                                 3D fields, which plumb's executor does not run): no
                                 in-process all-reduce receive buffer (NCCL reduces in
                                 place), no staging, one microbatch's gradients at once */
    int window_known;         /* 1: window_k0 .. window_k1 is sim_steady_window(sched), found
                                 before (sim_run: on the compute order it was lowered from);
                                 0 (hand-built models): the engine finds it */
    int window_k0, window_k1;
    int xfer_events;          /* 1: every point-to-point transfer's end runs as an event of
                                 its own (the quiet transfers' reference, for tests); 0
                                 (default): a transfer that nothing queues behind ends
                                 without one (same results, docs/sim.md, "Engine") */
} sim_model;

/* Allocates the arrays of a model for s (zeroed; worker_scale 1; worker_device = worker id);
 * the caller fills them. Returns 0 or -1 when out of memory. */
int sim_model_alloc(sim_model *m, const schedule *s);
void sim_model_release(sim_model *m);

typedef struct sim_link_stat {
    int src, dst, level;
    double bytes, bytes_window, busy_s;
    long long transfers;
} sim_link_stat;

typedef struct sim_result {
    int nworkers, iterations;
    int k0, k1;               /* the steady window of iterations (sim_steady_window); when
                                 steady is 0, the whole run */
    int steady;               /* 1: iteration_s comes from a steady window; 0: the run was
                                 too short for one and iteration_s = makespan / iterations */
    int settled;              /* 1: the window's gaps show the repetition settled (all
                                 alike, or a long enough run of alike gaps ending it, which
                                 k0..k1 then is); 0: a longer run may measure otherwise */
    double makespan_s;
    double *iter_end;         /* [iterations] completion time of each iteration's actions */
    double iteration_s;       /* steady state, see sim.h */
    double *busy_window;      /* [nworkers] compute per iteration in the steady window */
    double *comm_window;      /* [nworkers] transfers sent + all-reduce per iteration */
    double *busy_total;       /* [nworkers] compute over the run */
    int *max_inflight;        /* [nworkers] most in-flight microbatches at once */
    int nlinks;
    sim_link_stat *links;     /* in order of first use */
    long long events, actions;
    long long ring_steps_grouped; /* ring steps run grouped (docs/sim.md) */
    long long ring_hops_virtual;  /* shared hops started without a transfer of their own */
    long long ring_hops_split;    /* of those, hops made transfers again mid-step (something
                                     queued behind them) */
    long long xfers_quiet;        /* point-to-point transfers started without an end event
                                     of their own (sim_model.xfer_events) */
    long long xfers_quiet_split;  /* of those, transfers whose end event was posted after
                                     all (something queued behind them while they moved) */
    long long ring_steps_repeated; /* grouped steps that repeated the last one of their
                                      ring in O(1) (docs/sim.md) */
    timeline *tl;             /* when model.record */
} sim_result;

/* The iterations of s whose completion gaps measure the steady state (docs/sim.md, "What
 * is measured"). A replay of s measures iteration_s = (end[k1] - end[k0 - 1]) /
 * (k1 - k0 + 1), where end[k] is when the last action of iteration k ends. Found from the
 * IR alone: when no worker ever holds microbatches of two iterations at once (the
 * flushing schedules), every iteration after the first repeats exactly: k0 = 1,
 * k1 = N - 1. Otherwise (pipedream, 2bw) let D = max over workers of ceil(W / f), W the
 * most microbatches the worker holds at once and f its forwards per iteration: the first
 * D iterations end while the pipeline fills and the last D while it drains, so k0 = D + 1,
 * k1 = N - 1 - D. Sets *k0, *k1 (k1 < k0 when s has too few iterations) and returns the
 * fewest iterations that give a window of 2 (to see whether it settled: 3 for flushing
 * schedules, 2 D + 3 otherwise; a larger IR of the same kind has at least the same
 * W / f), or -1 when out of memory. */
int sim_steady_window(const schedule *s, int *k0, int *k1);
#define SIM_SETTLE_TOL 1e-3   /* relative: gaps this close count as alike */
#define SIM_SETTLE_RUN 8      /* alike gaps that show a settled repetition after a change */
#define SIM_MAX_ITERATIONS 64 /* sim_run doubles the iterations up to this until settled */

/* Replays m->sched on m. Returns 0 and fills r (free with sim_result_free), or -1 with err
 * when the IR is malformed (a RECV without its SEND, a SEND to a worker out of range) or
 * deadlocks (the message names a blocked worker and the action it waits on). */
int sim_engine_run(const sim_model *m, sim_result *r, plumb_err *err);
void sim_result_free(sim_result *r);

#endif
