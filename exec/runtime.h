/* runtime.h: the pipeline runtime: executes a schedule (core/schedule.h action IR) for
 * real. Each worker is a thread with its own backend context; it builds the stages it
 * hosts and runs its action list in order: forward and backward (or their I/W halves) on
 * the weight version each action names, sends and receives through a transport, gradient
 * all-reduce among a stage's replicas, optimizer steps. Weight versions still needed by
 * in-flight microbatches are stashed (PipeDream's weight stashing, 2BW's two versions).
 * Every action is timed into a measured trace in the simulator's timeline format. */
#ifndef PLUMB_EXEC_RUNTIME_H
#define PLUMB_EXEC_RUNTIME_H

#include <stdint.h>

#include "core/schedule.h"
#include "core/timeline.h"
#include "exec/backend.h"
#include "exec/model.h"
#include "exec/transport.h"

/* Fills host x (microbatch, sample) and y (microbatch, targets per sample) with global
 * microbatch g's samples. Called from several worker threads at once; returns 0 or -1
 * with err set. */
typedef int (*rt_batch_fn)(void *user, int g, float *x, int32_t *y, plumb_err *err);

/* An injected failure (tests of failure handling; `PLUMB_FAULT=worker:W:step:S[:MODE]`):
 * worker W fails as it starts step S (1-based, counted from the start of training, resumed
 * steps included): with an error that aborts the run (RT_FAULT_ERROR), by SIGKILL of its
 * whole process (RT_FAULT_KILL), or by going silent (RT_FAULT_STALL: it sleeps for the
 * receive timeout plus 5 s, so that its peers' timeouts are what ends the run, then fails;
 * bounded, so a run of threads still ends). With tensor parallelism only rank 0 of W's
 * group fails, so that its partners are left waiting in the group's sums. */
enum { RT_FAULT_ERROR = 0, RT_FAULT_KILL = 1, RT_FAULT_STALL = 2 };
typedef struct rt_fault {
    int worker;                /* < 0: none */
    long step;
    int mode;                  /* RT_FAULT_* */
} rt_fault;

/* Parses spec ("worker:W:step:S", optionally followed by ":kill" or ":stall"; NULL or "" =
 * none) into *f. Returns 0, or -1 with err naming PLUMB_FAULT and what was expected. */
int rt_fault_parse(const char *spec, rt_fault *f, plumb_err *err);

typedef struct rt_cfg {
    const backend *bk;
    const model *m;
    const schedule *sched;
    const int *stage_first;    /* [nstages] first top-level layer of each (virtual) stage */
    const int *stage_last;     /* [nstages] last one (inclusive); ranges cover the model in
                                  order */
    const int *worker_device;  /* [nworkers] backend device of each worker; NULL: all 0 */
    const int *trace_device;   /* [nworkers] device id written to the trace; NULL: worker */
    int microbatch;            /* samples per microbatch */
    int recompute;             /* 1: keep stage inputs only, recompute activations in the
                                  backward (the plan's recompute) */
    bk_opt opt;                /* optimizer (step counts are kept per stage) */
    rt_batch_fn batch;
    void *batch_user;
    /* Called by each worker holding the loss after every forward (from several threads
     * at once: the callee synchronizes): iteration, summed loss, correct predictions and
     * targets of that microbatch. NULL: none. */
    void (*on_loss)(void *user, int iteration, double loss, double correct, double rows);
    void *on_loss_user;
    transport *tr;             /* NULL: a local transport made for the run */
    const int *local_workers;  /* the workers this process runs (one process per rank under
                                  mpirun: {rank}; with tp, transport endpoints); NULL: all
                                  of them, as threads */
    int nlocal;
    int node_procs;            /* processes sharing this machine's cores (mpirun ranks on the
                                  node); <= 1: this one only */
    double timeout_s;          /* local transport's receive timeout; <= 0: 120 s */
    /* Resuming (checkpoints): the starting weights and optimizer state (host, m->nparams
     * floats each; NULL: weights from the model's seed, zero state), and the iterations
     * already done: the schedule's microbatch g is global microbatch
     * start_iteration * microbatches + g for the batch and loss callbacks, and each stage's
     * optimizer step count continues from start_iteration iterations' worth of steps. */
    const float *init_params, *init_m, *init_v;
    long start_iteration;
    int want_state;            /* 1: fill rt_result.opt_m / opt_v */
    rt_fault fault;            /* injected failure; worker < 0 (or all zero with step 0): none */
    /* Tensor parallelism (exec/tp.h; <= 1: none): each schedule worker w is a group of tp
     * threads, ranks r = 0 .. tp-1, endpoints w tp + r of the transport (a transport made
     * by the caller needs nworkers x tp of them), all on worker w's device. Each rank runs
     * w's action list on its shard of the stages; pipeline messages go between ranks of
     * the same r, replicas' all-reduces among ranks of the same r, and the split layers'
     * sums among the group. Rank 0 records losses; every rank its trace tracks (tl_track's
 * tp_rank), its tp collectives included (TL_TP_*). local_workers then names
     * endpoints (one process per endpoint under mpirun: -np nworkers x tp). */
    int tp;
    int sp;                    /* 1: sequence parallelism within each group (stage_tp.seq;
                                  needs tp > 1; zero-bubble schedules included) */
    int want_grads;            /* 1: fill rt_result.grads */
    /* ZeRO-1 (the distributed optimizer; 0: none): each replica of a stage with r > 1
     * replicas keeps 1/r of its optimizer state (stage.h's shards): ALLREDUCE becomes a
     * reduce-scatter of the gradients, STEP steps the replica's shard and all-gathers the
     * weights. Resuming shards init_m / init_v; want_state gathers the state whole. */
    int zero;
} rt_cfg;

typedef struct rt_result {
    int iterations;
    double *loss;              /* [iterations] mean loss of each iteration's microbatches */
    double *acc;               /* [iterations] accuracy (fraction) */
    double seconds;            /* wall time of the run (workers started to all joined) */
    float *params;             /* [m->nparams] final weights (first replica of each stage) */
    float *opt_m, *opt_v;      /* [m->nparams] final optimizer state when want_state (as
                                  params; NULL where the optimizer has none) */
    timeline *trace;           /* measured trace ("exec"): compute, transfers, all-reduces */
    double *peak_bytes;        /* [nworkers] most device memory each worker's context held
                                  (< 0: not measured by the backend or not run here; with
                                  tp, rank 0's) */
    float *grads;              /* [m->nparams] want_grads: each stage's gradients (after the
                                  replicas' all-reduce) at its last optimizer step */
    /* tp > 1: the largest absolute difference between a rank's replicated weights (and
     * gradients, want_grads) and rank 0's at the end: 0 when every rank computed the same
     * values, as they must (same inputs, same order); 0 without tp. */
    double tp_weight_diff, tp_grad_diff;
} rt_result;

/* Runs the schedule to its end (this process's workers: all, or cfg->local_workers; then
 * the results hold what those workers own: the losses of the iterations whose loss they
 * computed, the weights of the stages whose first replica they are (zeros elsewhere), and
 * their timed actions). Returns 0 with *res filled (free with rt_result_free), or
 * -1 with err set to the first failure (a worker's backend error, a transport timeout that
 * reveals a deadlock, a stage range that does not cover the model, an action naming a
 * weight version that is no longer kept). */
int runtime_run(const rt_cfg *cfg, rt_result *res, plumb_err *err);
void rt_result_free(rt_result *r);

/* The two below are defined in exec/runtime_trace.c, with the rest of the trace. */

/* Names the tracks of a measured trace of schedule s run with tensor parallelism tp > 1
 * (trace_device as in rt_cfg; tp <= 1: leaves the names alone): each by its device and
 * tensor-parallel rank, the workers on that device and the stages and replicas they host,
 * e.g. "device 2: worker 1 tp rank 1 (stage 0, replica 1)", " collectives" after a
 * collective track's. Returns 0, or -1 out of memory (names kept). */
int runtime_trace_names(const schedule *s, const int *trace_device, int tp, timeline *tl);

/* Writes into buf (n bytes) what transport message tag `tag` of a run of s carries: a
 * pipeline message ("the activations of microbatch 3 for stage 1", "the output gradient
 * of ..."), or a message of a collective, which a transport tags from the collective's
 * tag (transport_coll_tag in exec/transport.h): "the tensor-parallel group's collective
 * 23" (1 for the run's first), "the replicas' all-reduce 2 of stage 1". Returns what
 * snprintf does. */
int runtime_tag_text(const schedule *s, long tag, char *buf, size_t n);

/* Loss scale of one microbatch: 1 / (targets per optimizer step), where a step covers an
 * iteration's microbatches (synchronous kinds, 2bw) or one microbatch per replica of the
 * last stage (pipedream). */
double runtime_loss_scale(const schedule *s, int microbatch, int targets_per_sample);

#endif
