/* train_plan.h: from what `plumb train` was given (a plan, or a schedule kind and a stage
 * count) to what the pipeline runtime runs: each stage's layer range, the schedule of the
 * run's iterations and the maker of its segments. The CLI parses and prints; this decides.
 * Memory: a train_pipeline owns its ranges and schedule (train_pipeline_free). */
#ifndef PLUMB_EXEC_TRAIN_PLAN_H
#define PLUMB_EXEC_TRAIN_PLAN_H

#include "core/err.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "exec/model.h"
#include "exec/train.h"

/* The most pipelined iterations (optimizer steps) one run may take. */
#define TRAIN_MAX_PIPELINED_STEPS 1000000

typedef struct train_pipeline {
    int nstages;       /* pipeline stages (virtual stages for the chunked kinds) */
    int *first, *last; /* owned: stage s runs top-level layers first[s]..last[s] */
    schedule *sched;   /* owned: the whole run's schedule (sched->nworkers workers) */
    int *tfirst, *tlast; /* owned: the stages as a trace names them: the plan's ranges of
                            its profile's layers (as plumb sim's trace, so plumb compare
                            pairs them), else first/last (not separately allocated) */
    const plan *pl;    /* borrowed: segments are made from the plan, or else from spec */
    sched_spec spec;
} train_pipeline;

/* Checks that pl (read from plan_path) was made for model m (read from model_path), before
 * any work: either one profiled layer per top-level layer, each with the parameter bytes of
 * that layer's fp32 weights; or, for a plan made from a transformer description (plumb
 * plan --model: an Embedding, L TransformerBlocks, an LMHead; examples/llm/gpt-mini.json
 * for examples/models/gpt-mini.json), m's embedding, 2 L residual blocks and the rest
 * (train_plan_layers), the profile's tokens per sample m's context, and per layer the
 * parameter bytes of one tensor-parallel rank's share at the plan's precision (the output
 * layer's bias left out: the analytic head has none). The plan's tp must split m
 * (tp_check; with sequence parallelism tp_check_seq). Returns 0, or -1 with err set
 * ("PLAN: profile.layers...: expected ...", or the model file and its field). */
int train_plan_check(const model *m, const char *model_path, const plan *pl,
                     const char *plan_path, plumb_err *err);

/* Where each profiled layer i of pl lies in m: top-level layers lo[i]..hi[i] (caller's
 * arrays of pl->prof->nlayers). The identity when the profile has one layer per top-level
 * layer; for a transformer's analytic profile the embedding, then per block a pair of
 * residual blocks (attention, MLP), then the rest (final norm, output layer, loss).
 * Returns 0, or -1 when the profile's layers do not map onto m (no err: train_plan_check
 * says why). */
int train_plan_layers(const model *m, const plan *pl, int *lo, int *hi);

/* The pipeline cfg runs: with pl (checked by train_plan_check), its stages mapped onto
 * m's layers (train_plan_layers), its schedule, tp, sequence parallelism and full
 * recomputation and ZeRO-1 (cfg->tp, cfg->sp, cfg->recompute, cfg->zero are set from it;
 * a plan the executor does not run, with checkpoint_layers > 0, selective recomputation,
 * bf16/fp16 or sequence parallelism under a split backward, is bad input: one line naming the field);
 * else `schedname` (NULL: 1f1b-flush) over nstages stages (0: 2; 1 when schedname is NULL
 * too) split by forward FLOPs with the planner's even partitioner, nmicro microbatches per
 * iteration. The iteration count is cfg->steps, or cfg->epochs x the minibatches in
 * cfg->train. On success fills *tp and points cfg->make_sched / make_sched_user at it (so
 * tp must outlive the run). Returns 0; 2 with err set for bad input (too many steps or
 * stages, a stage count the schedule cannot use); 1 with err set out of memory. *tp is
 * then empty. */
int train_from_plan(train_run_cfg *cfg, const plan *pl, const char *schedname, int nstages,
                    int nmicro, train_pipeline *tp, plumb_err *err);

/* The schedule of a segment of `iterations` iterations of tp (a train_sched_fn; user is the
 * train_pipeline). Returns a new schedule or NULL with err set. */
schedule *train_pipeline_segment(void *user, int iterations, plumb_err *err);

void train_pipeline_free(train_pipeline *tp);

#endif
