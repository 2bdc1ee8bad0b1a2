/* train_plan.c: the stages and schedule a pipelined `plumb train` runs, from a plan or
 * from --schedule/--stages (see train_plan.h). */
#include "exec/train_plan.h"

#include "core/device.h"

#include <stdlib.h>
#include <string.h>

#include "planner/policy.h"

int train_plan_check(const model *m, const char *model_path, const plan *pl,
                     const char *plan_path, plumb_err *err)
{
    if (pl->prof->nlayers != m->nlayers)
        return err_set(err, plan_path, "profile.layers",
                       "expected %d layers, one per top-level layer of %s (got %d)",
                       m->nlayers, model_path, pl->prof->nlayers);
    for (int i = 0; i < m->nlayers; i++) {
        double want = (double)m->layers[i].nparams * sizeof(float),
               got = pl->prof->layers[i].parameter_bytes;
        if (got != want)
            return err_set(err, plan_path, NULL, "profile.layers[%d].parameter_bytes: "
                           "expected %.0f, the weights of layer %d of %s (got %.0f): the "
                           "plan was made for another model", i, want, i, model_path, got);
    }
    return 0;
}

/* Splits m's top-level layers into n contiguous stages (each at least one layer) by the
 * planner's even partitioner, the cost of a layer its forward FLOPs (+ 1, so that layers
 * without FLOPs still count). Returns 0, or -1 out of memory. */
static int split_by_flops(const model *m, int n, int *first, int *last)
{
    double *cost = malloc((size_t)m->nlayers * sizeof *cost);
    if (!cost) return -1;
    for (int i = 0; i < m->nlayers; i++) cost[i] = (double)m->layers[i].flops + 1;
    int rc = planner_split_weights(cost, m->nlayers, n, first, last);
    free(cost);
    return rc;
}

schedule *train_pipeline_segment(void *user, int iterations, plumb_err *err)
{
    const train_pipeline *tp = user;
    if (tp->pl) return schedule_from_plan(tp->pl, iterations, err);
    sched_spec sp = tp->spec;
    sp.iterations = iterations;
    return schedule_generate(&sp, err);
}

void train_pipeline_free(train_pipeline *tp)
{
    if (!tp) return;
    schedule_free(tp->sched);
    free(tp->first);
    free(tp->last);
    memset(tp, 0, sizeof *tp);
}

int train_from_plan(train_run_cfg *cfg, const plan *pl, const char *schedname, int nstages,
                    int nmicro, train_pipeline *tp, plumb_err *err)
{
    memset(tp, 0, sizeof *tp);
    const model *m = cfg->m;
    if (pl && (pl->tp > 1 || pl->checkpoint_layers > 0 || pl->recompute == RECOMPUTE_SELECTIVE ||
               pl->precision == DEV_BF16 || pl->precision == DEV_FP16)) {
        /* what the plan asks for and the executor does not run yet: one line, before work */
        const char *f = pl->tp > 1 ? "tp" : pl->checkpoint_layers > 0 ? "checkpoint_layers"
                      : pl->recompute == RECOMPUTE_SELECTIVE ? "recompute" : "precision";
        return err_set(err, NULL, f, "the executor runs plans with tp 1, whole-stage "
                       "recomputation (checkpoint_layers 0, recompute none or full) and fp32 "
                       "(this plan has tp %d, checkpoint_layers %d, recompute %s, %s)%s",
                       pl->tp, pl->checkpoint_layers, recompute_kind_name(pl->recompute),
                       dev_precision_name(pl->precision),
                       pl->tp > 1 ? "; tensor parallelism runs without a plan: plumb train "
                       "MODEL --tp T [--schedule KIND --stages N]" : ""), 2;
    }
    long per_epoch = cfg->train->n / (cfg->cfg.microbatch * nmicro);
    long iters = cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * (per_epoch > 0 ? per_epoch : 1);
    if (iters > TRAIN_MAX_PIPELINED_STEPS)
        return err_set(err, NULL, "--steps", "expected at most %d pipelined steps (got %ld)",
                       TRAIN_MAX_PIPELINED_STEPS, iters), 2;
    int n = pl ? pl->nstages : schedname ? (nstages ? nstages : 2) : 1;
    if (n > m->nlayers)
        return err_set(err, NULL, "--stages", "expected at most the model's %d layers (got %d)",
                       m->nlayers, n), 2;
    tp->nstages = n;
    tp->pl = pl;
    tp->first = calloc((size_t)n, sizeof *tp->first);
    tp->last = calloc((size_t)n, sizeof *tp->last);
    if (!tp->first || !tp->last) goto oom;
    if (pl) {
        for (int i = 0; i < n; i++) {
            tp->first[i] = pl->stages[i].first_layer;
            tp->last[i] = pl->stages[i].last_layer;
        }
    } else {
        if (split_by_flops(m, n, tp->first, tp->last)) goto oom;
        int kind = schedname ? sched_kind_parse(schedname) : SCHED_1F1B_FLUSH;
        int chunks = sched_kind_chunks((sched_kind)kind);
        if (n % chunks) {
            err_set(err, NULL, "--stages", "expected a multiple of %d for %s (got %d)", chunks,
                    schedname, n);
            train_pipeline_free(tp);
            return 2;
        }
        sched_spec sp = {kind, n / chunks, n, chunks, nmicro, (int)iters, NULL, NULL};
        tp->spec = sp;
    }
    if (!(tp->sched = train_pipeline_segment(tp, (int)iters, err))) {
        train_pipeline_free(tp);
        return 2;
    }
    cfg->make_sched = train_pipeline_segment;
    cfg->make_sched_user = tp;
    return 0;
oom:
    train_pipeline_free(tp);
    err_set(err, NULL, NULL, "out of memory");
    return 1;
}
