/* train.h: sequential training on one device, the reference that pipelined runs are
 * compared against: minibatch SGD (or momentum, Adam) where each minibatch is split into
 * microbatches whose gradients accumulate before one optimizer step. Also the whole
 * training run behind `plumb train` (epochs or steps, progress lines, final evaluation). */
#ifndef PLUMB_EXEC_TRAIN_H
#define PLUMB_EXEC_TRAIN_H

#include <stdio.h>

#include "exec/backend.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/model.h"
#include "exec/runtime.h"
#include "exec/stage.h"
#include "exec/transport.h"

struct schedule;
struct timeline;
/* Makes the schedule of a pipelined run's segment of `iterations` iterations (the same
 * kind, stages and workers as the whole run's). NULL with err set on failure. */
typedef struct schedule *(*train_sched_fn)(void *user, int iterations, plumb_err *err);

typedef struct train_cfg {
    int microbatch;      /* samples per microbatch, >= 1 */
    int microbatches;    /* microbatches per minibatch (gradient accumulation), >= 1 */
    bk_opt opt;          /* optimizer and its hyper-parameters; `step` is managed here */
} train_cfg;

/* Default hyper-parameters of an optimizer: lr 0.05 (sgd), 0.01 with momentum 0.9,
 * 1e-3 with betas 0.9/0.999 and eps 1e-8 (adam); no weight decay. */
bk_opt train_default_opt(int kind);

typedef struct seq_trainer seq_trainer;

/* A trainer of m on (bk, ctx): the whole model as one stage, weights from m's seed.
 * Returns NULL with err set (out of memory, bad configuration). */
seq_trainer *seqtrain_create(const backend *bk, bk_ctx *ctx, const model *m,
                             const train_cfg *cfg, plumb_err *err);
void seqtrain_free(seq_trainer *t);

/* One minibatch: x (microbatches * microbatch, sample) and y (same samples' targets) on the
 * host. Zeroes the gradients, runs forward and backward per microbatch (loss scaled by
 * 1 / targets in the minibatch so the accumulated gradient is the minibatch mean), then one
 * optimizer step. *loss and *acc (may be NULL) get the minibatch's mean loss (nats) and
 * accuracy (fraction) measured before the step. Returns 0, or -1 with err set. */
int seqtrain_step(seq_trainer *t, const float *x, const int32_t *y, double *loss,
                  double *acc, plumb_err *err);

/* Forward-only evaluation over the first `limit` samples of d (all when limit <= 0):
 * mean loss and accuracy. Returns 0 or -1. */
int seqtrain_evaluate(seq_trainer *t, const dataset *d, int limit, double *loss, double *acc,
                      plumb_err *err);

/* Replaces the parameters with host's (m->nparams floats). Returns 0 or -1. */
int seqtrain_set_params(seq_trainer *t, const float *host, plumb_err *err);

/* Copies the current parameters (m->nparams floats) to host. Returns 0 or -1. */
int seqtrain_get_params(seq_trainer *t, float *host, plumb_err *err);
stage *seqtrain_stage(seq_trainer *t);

/* Optimizer steps taken so far. */
long seqtrain_steps(const seq_trainer *t);
/* Writes the trainer's weights, optimizer state and step count to path (exec/checkpoint.h),
 * or restores them from it (the checkpoint's optimizer must be the trainer's). 0 or -1. */
int seqtrain_save(seq_trainer *t, const char *path, plumb_err *err);
int seqtrain_load(seq_trainer *t, const char *path, plumb_err *err);
/* seqtrain_load from a checkpoint already read from path (named in errors): c is only
 * read. 0 or -1. */
int seqtrain_restore(seq_trainer *t, const ckpt *c, const char *path, plumb_err *err);

/* A whole run as `plumb train` does it. */
typedef struct train_run_cfg {
    const backend *bk;
    int device;
    const model *m;
    const dataset *train, *test;  /* test may be NULL */
    train_cfg cfg;
    int epochs;               /* used when steps <= 0 */
    long steps;               /* total optimizer steps; <= 0: epochs * (n / minibatch) */
    unsigned long long seed;  /* shuffling */
    long log_every;           /* steps between progress lines; <= 0: about 20 lines */
    FILE *log;                /* progress lines; NULL for none */
    const char *resume;       /* checkpoint file to start from (its steps count toward the
                                 total, the data order continues), or NULL */
    ckpt *resume_state;       /* resume's state when already read (train_resume_open), so
                                 the file is read once; NULL: the run reads resume. The
                                 run takes its arrays (frees them once used, or keeps
                                 them): they are NULL after it; ckpt_free stays safe */
    const char *save;         /* checkpoint written at the end, or NULL */
    const char *checkpoint_dir; /* with checkpoint_every > 0: a checkpoint every that many
                                   steps (and at the end) in this folder (ckpt_save_dir,
                                   the 2 newest kept) */
    long checkpoint_every;
    int recompute;            /* pipelined runs: recompute activations in the backward */
    rt_fault fault;           /* injected failure (PLUMB_FAULT); worker < 0: none */
    /* Pipelined runs only. */
    train_sched_fn make_sched; /* segments (checkpoints, resume): schedule of a segment;
                                  NULL: the schedule is run whole (no checkpoint, no resume) */
    void *make_sched_user;
    transport *tr;            /* NULL: an in-process transport for all workers */
    const int *local_workers; /* mpirun: the workers of this process ({rank}); NULL: all */
    int nlocal;
    int node_procs;           /* processes sharing this machine's cores (BLAS threads) */
    int rank;                 /* this process: 0 prints the header and final lines,
                                 evaluates and writes files; losses are printed by the
                                 process holding the loss stage */
    double timeout_s;         /* receive timeout of the transport (<= 0: 120 s) */
    int tp;                   /* tensor-parallel ranks per worker (rt_cfg.tp; <= 1: none) */
    int sp;                   /* sequence parallelism in the groups (rt_cfg.sp) */
    int zero;                 /* ZeRO-1 among each stage's replicas (rt_cfg.zero) */
} train_run_cfg;

typedef struct train_result {
    long steps;                     /* the run's total, a resumed checkpoint's included */
    long steps_run;                 /* of them, those this run trained (0: resumed at the end) */
    double first_loss, last_loss;   /* mean loss of the first and the last minibatch */
    double train_loss, train_acc;   /* means over the last logging interval */
    double test_loss, test_acc;     /* < 0 when there is no test set */
    double samples_per_s;           /* training throughput, excluding evaluation */
    double seconds;                 /* training wall time */
} train_result;

/* Runs the training. Returns 0 with *res filled, or -1 with err set (the data do not fit
 * the model, the minibatch is larger than the data set, a backend failure). */
int train_run(const train_run_cfg *rc, train_result *res, plumb_err *err);

/* The backend device of pipeline worker w: the one owner of this policy. In a local run
 * (rc->local_workers NULL) rc->device + w mod ndevices, so the workers spread over devices
 * rc->device .. rc->device + ndevices - 1 (ndevices <= 1: all on rc->device); under mpirun
 * (rc->local_workers set) the process runs one worker, on rc->device (--device, or the
 * rank's node-local GPU for nccl), and ndevices is not used. Never fails. */
int train_worker_device(const train_run_cfg *rc, int w, int ndevices);

/* Checks, before any work, that backend bk has every device a local pipelined run on
 * devices device .. device + ndevices - 1 uses, by creating and destroying a context on
 * each. Returns 0, or -1 with err set: the backend's own line for `device` itself, a
 * "--devices" line naming the missing device for the others. */
int train_devices_check(const backend *bk, int device, int ndevices, plumb_err *err);

/* The same run executed by the pipeline runtime (exec/runtime.h) on schedule s, whose
 * stage s covers top-level layers [first[s], last[s]]; s->iterations minibatches of
 * s->microbatches microbatches of rc->cfg.microbatch samples, in the same sample order as
 * train_run. Worker w uses backend device train_worker_device(rc, w, ndevices) (all its
 * tensor-parallel ranks alike). Progress lines are printed as
 * iterations complete, one per logging interval, and at the end, for each worker whose
 * backend measures it, "worker w (device d): peak memory X MiB", d being that backend
 * device; *trace (may be NULL) receives the measured trace (caller frees).
 *
 * With rc->checkpoint_every = N or rc->resume the run is cut into segments at the multiples
 * of N (and at the resumed step), each a whole schedule from rc->make_sched that ends with
 * the pipeline drained; every segment starts from the weights and optimizer state the
 * previous one ended with. Synchronous schedules give the same weights however they are
 * cut; PipeDream and 2BW are flushed at each cut, so a run resumed from step k N continues
 * exactly a run made with the same N. Under mpirun (rc->tr spanning processes), weights
 * and losses are summed over the processes after each segment (transport allsum).
 * Returns 0 or -1 with err set. */
int train_run_pipeline(const train_run_cfg *rc, const struct schedule *s, const int *first,
                       const int *last, int ndevices, train_result *res,
                       struct timeline **trace, plumb_err *err);

/* The whole measured trace of a run spread over nprocs processes (mpirun: one process per
 * transport endpoint, this one `rank`), each of which timed its own workers into *tl (may
 * be NULL: nothing timed here): the events of every process, summed into one buffer over
 * tr (allsum_double, so every process must call it, in the same order as its other
 * collectives), replace *tl on every process, in timeline_sort's order. Times stay each
 * process's own, from the start of its run (train_run_pipeline starts the processes' runs
 * together after a barrier when tracing). Returns 0, or -1 with err set (transport
 * failure, out of memory); *tl is then unchanged. */
int train_trace_gather(transport *tr, int rank, int nprocs, struct timeline **tl,
                       plumb_err *err);

/* Monotonic wall clock in seconds. */
double train_now(void);

#endif
