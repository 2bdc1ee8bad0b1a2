/* test_train_plan.c: what `plumb train` hands the pipeline runtime (exec/train_plan.h):
 * the stages and schedule of a plan, or of --schedule/--stages split by FLOPs (checked
 * against an exhaustive search written here), the bad-input answers, and the check that a
 * plan was made for the model. */
#include <criterion/criterion.h>
#include <string.h>

#include "exec/data.h"
#include "exec/train_plan.h"

#define MODEL "examples/models/fmnist-mlp.json"
#define PLAN "tests/data/fmnist-mlp-2-replicas.json"

typedef struct fixture {
    model *m;
    dataset *d;
    train_run_cfg cfg;
} fixture;

static void fixture_init(fixture *f, long steps)
{
    plumb_err e;
    memset(f, 0, sizeof *f);
    f->m = model_load(MODEL, &e);
    cr_assert_not_null(f->m, "%s", e.msg);
    f->d = data_synthetic(f->m, 256, 1, &e);
    cr_assert_not_null(f->d, "%s", e.msg);
    f->cfg.m = f->m;
    f->cfg.train = f->d;
    f->cfg.cfg.microbatch = 16;
    f->cfg.steps = steps;
    f->cfg.epochs = 1;
}

static void fixture_free(fixture *f)
{
    data_free(f->d);
    model_free(f->m);
}

/* The smallest largest-stage cost over every way to cut n layers into k ranges. */
static double best_cut(const double *w, int n, int k, int a)
{
    double rest = 0;
    if (k == 1) {
        for (int i = a; i < n; i++) rest += w[i];
        return rest;
    }
    double best = -1, head = 0;
    for (int b = a; b <= n - k; b++) {
        head += w[b];
        double tail = best_cut(w, n, k - 1, b + 1), worst = head > tail ? head : tail;
        if (best < 0 || worst < best) best = worst;
    }
    return best;
}

Test(train_plan, schedule_split_by_flops)
{
    fixture f;
    fixture_init(&f, 5);
    double w[64];
    for (int i = 0; i < f.m->nlayers; i++) w[i] = (double)f.m->layers[i].flops + 1;
    for (int k = 1; k <= 4; k++) {
        train_pipeline tp;
        plumb_err e;
        f.cfg.make_sched = NULL;
        cr_assert_eq(train_from_plan(&f.cfg, NULL, "1f1b-flush", k, 4, &tp, &e), 0, "%s", e.msg);
        cr_assert_eq(tp.nstages, k);
        double worst = 0;
        for (int s = 0; s < k; s++) {
            cr_assert_eq(tp.first[s], s ? tp.last[s - 1] + 1 : 0);
            cr_assert_geq(tp.last[s], tp.first[s]);
            double c = 0;
            for (int i = tp.first[s]; i <= tp.last[s]; i++) c += w[i];
            if (c > worst) worst = c;
        }
        cr_assert_eq(tp.last[k - 1], f.m->nlayers - 1);
        cr_assert_float_eq(worst, best_cut(w, f.m->nlayers, k, 0), 1e-6, "k=%d", k);
        cr_assert_eq(tp.sched->nworkers, k);
        cr_assert_eq(tp.sched->microbatches, 4);
        cr_assert_eq(tp.sched->iterations, 5);
        cr_assert(f.cfg.make_sched == train_pipeline_segment);
        cr_assert(f.cfg.make_sched_user == &tp);
        schedule *seg = train_pipeline_segment(&tp, 2, &e);
        cr_assert_not_null(seg, "%s", e.msg);
        cr_assert_eq(seg->iterations, 2);
        schedule_free(seg);
        train_pipeline_free(&tp);
    }
    /* epochs: 256 samples / (16 x 4) = 4 iterations */
    train_pipeline tp;
    plumb_err e;
    f.cfg.steps = 0;
    cr_assert_eq(train_from_plan(&f.cfg, NULL, "gpipe", 2, 4, &tp, &e), 0, "%s", e.msg);
    cr_assert_eq(tp.sched->iterations, 4);
    train_pipeline_free(&tp);
    fixture_free(&f);
}

Test(train_plan, bad_stage_counts)
{
    fixture f;
    fixture_init(&f, 5);
    train_pipeline tp;
    plumb_err e;
    cr_assert_eq(train_from_plan(&f.cfg, NULL, "interleaved", 3, 4, &tp, &e), 2);
    cr_assert(strstr(e.msg, "--stages: expected a multiple of 2 for interleaved (got 3)"),
              "%s", e.msg);
    cr_assert_null(tp.first);
    cr_assert_eq(train_from_plan(&f.cfg, NULL, "gpipe", 8, 4, &tp, &e), 2);
    cr_assert(strstr(e.msg, "expected at most the model's 7 layers (got 8)"), "%s", e.msg);
    f.cfg.steps = TRAIN_MAX_PIPELINED_STEPS + 1;
    cr_assert_eq(train_from_plan(&f.cfg, NULL, "gpipe", 2, 4, &tp, &e), 2);
    cr_assert(strstr(e.msg, "--steps"), "%s", e.msg);
    cr_assert_null(f.cfg.make_sched);
    fixture_free(&f);
}

Test(train_plan, stages_and_schedule_of_a_plan)
{
    fixture f;
    fixture_init(&f, 3);
    plumb_err e;
    plan *file = plan_load(PLAN, &e);
    cr_assert_not_null(file, "%s", e.msg);
    cr_assert_eq(train_plan_check(f.m, MODEL, file, PLAN, &e), 0, "%s", e.msg);
    /* two stages: layers 0-3 on devices 0 and 1, 4-6 on device 2 */
    plan *pl = plan_new(file->prof, file->clus, 2);
    cr_assert_not_null(pl);
    int d01[] = { 0, 1 }, d2[] = { 2 };
    cr_assert_eq(plan_set_stage(pl, 0, 0, 3, 2, d01), 0);
    cr_assert_eq(plan_set_stage(pl, 1, 4, 6, 1, d2), 0);
    pl->schedule = SCHED_1F1B_FLUSH;
    pl->microbatches = 4;
    pl->microbatch_size = 16;
    train_pipeline tp;
    cr_assert_eq(train_from_plan(&f.cfg, pl, NULL, 0, 4, &tp, &e), 0, "%s", e.msg);
    cr_assert_eq(tp.nstages, 2);
    cr_assert_eq(tp.first[0], 0);
    cr_assert_eq(tp.last[0], 3);
    cr_assert_eq(tp.first[1], 4);
    cr_assert_eq(tp.last[1], 6);
    cr_assert_eq(tp.sched->nworkers, 3, "one worker per replica");
    cr_assert_eq(tp.sched->iterations, 3);
    train_pipeline_free(&tp);

    /* a plan for another model: one line naming the plan and the field */
    pl->prof->layers[1].parameter_bytes += 4;
    cr_assert_eq(train_plan_check(f.m, MODEL, pl, "other.json", &e), -1);
    cr_assert(strstr(e.msg, "other.json"), "%s", e.msg);
    cr_assert(strstr(e.msg, "profile.layers[1].parameter_bytes: expected 803840"), "%s", e.msg);
    plan_free(pl);
    plan_free(file);
    fixture_free(&f);
}
