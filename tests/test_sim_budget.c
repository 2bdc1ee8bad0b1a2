/* test_sim_budget.c: the simulator's work budget (sim/budget.c): sim_actions_estimate against
 * hand-counted plans and against the actions of the schedule the generator really builds,
 * and sim_work_check / sim_run refusing above the limit before any schedule is built. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

/* Every action of s's lists. */
static double ir_actions(const schedule *s)
{
    double n = 0;
    for (int w = 0; w < s->nworkers; w++) n += s->len[w];
    return n;
}

/* Hand counts: per stage and iteration 6 per microbatch (F, B, 2 sends, 2 receives; 7 for
 * PipeDream, which steps after each) and 2 per replica (all-reduce, optimizer step). */
Test(sim_budget, hand_counted)
{
    sim_synth s;
    sim_synth_init(&s);
    s.schedule = SCHED_1F1B_FLUSH;
    s.nstages = 4, s.microbatches = 8, s.replicas = 1;
    plan *pl = synth_plan(&s);
    cr_expect_eq(sim_actions_estimate(pl, 0, 2), (6.0 * 8 + 2) * 4 * 2); /* 400 */
    cr_expect_eq(sim_actions_estimate(pl, 0, 3), 600.0);
    cr_expect_eq(sim_actions_estimate(pl, 16, 1), (6.0 * 16 + 2) * 4); /* 392: --microbatches */
    cr_expect_eq(sim_actions_estimate(pl, 0, 0), 0.0);
    cr_expect_eq(sim_actions_estimate(NULL, 8, 2), 0.0);
    plan_free(pl);
    s.nstages = 2, s.microbatches = 3, s.replicas = 3;
    pl = synth_plan(&s);
    cr_expect_eq(sim_actions_estimate(pl, 0, 5), (6.0 * 3 + 2 * 3) * 2 * 5); /* 240 */
    plan_free(pl);
    s.schedule = SCHED_PIPEDREAM; /* a step after every microbatch: 7 each */
    pl = synth_plan(&s);
    cr_expect_eq(sim_actions_estimate(pl, 0, 5), (7.0 * 3 + 2 * 3) * 2 * 5); /* 270 */
    plan_free(pl);
}

/* The estimate bounds what the generator builds (the first and last stages send and
 * receive one way only, a lone replica has no all-reduce) and is within 2x of it: the
 * actions of the real IR counted, flushing and asynchronous kinds, replicated stages. */
Test(sim_budget, bounds_the_ir)
{
    sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B_FLUSH, SCHED_PIPEDREAM};
    int shapes[][3] = {{4, 8, 1}, {8, 32, 1}, {2, 6, 2}, {3, 12, 3}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            sim_synth s;
            sim_synth_init(&s);
            s.schedule = kinds[k];
            s.nstages = shapes[i][0], s.microbatches = shapes[i][1], s.replicas = shapes[i][2];
            plan *pl = synth_plan(&s);
            plumb_err e;
            err_clear(&e);
            schedule *ir = schedule_from_plan(pl, 3, &e);
            cr_assert_not_null(ir, "%s", e.msg);
            double est = sim_actions_estimate(pl, 0, 3), real = ir_actions(ir);
            cr_expect(real <= est && est <= 2 * real, "%s %dx%dx%d: %g actions, estimate %g",
                      sched_kind_name(kinds[k]), shapes[i][0], shapes[i][1], shapes[i][2],
                      real, est);
            schedule_free(ir);
            plan_free(pl);
        }
}

/* Above the limit: one line with the sizes, the estimate and the limit, on the field
 * given; at the limit: passes. */
Test(sim_budget, check_refuses_above_the_limit)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 4, s.microbatches = 8;
    plan *pl = synth_plan(&s);
    plumb_err e;
    err_clear(&e);
    cr_expect_eq(sim_work_check(pl, 0, 2, 400, "--microbatches", &e), 0);
    cr_expect_eq(sim_work_check(pl, 0, 2, 399, "--microbatches", &e), -1);
    cr_expect(strstr(e.msg, "--microbatches: 4 stages x 8 microbatches x 2 iterations make "
                            "about 400 actions to simulate, above the 399 one run may take"),
              "%s", e.msg);
    plan_free(pl);
}

/* sim_run refuses a run above SIM_MAX_ACTIONS at once (nothing generated: a 4 x 2^21 x 3
 * run would replay 1.5 x 10^8 actions, 19 GiB), unless its memory is refused first (a
 * machine with less memory: the generator's line). */
Test(sim_budget, sim_run_refuses)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 4, s.microbatches = 8;
    plan *pl = synth_plan(&s);
    sim_options o;
    sim_options_init(&o);
    o.microbatches = 1 << 21;
    plumb_err e;
    err_clear(&e);
    cr_expect_null(sim_run(pl, &o, &e));
    cr_expect(strstr(e.msg, "to simulate"), "%s", e.msg);
    double est = (6.0 * (1 << 21) + 2) * 4 * 3;
    if (est * SCHED_BYTES_PER_ACTION <= sched_memory_available())
        cr_expect(strstr(e.msg, "--microbatches: 4 stages x 2097152 microbatches x 3 "
                                "iterations make about 1.51e+08 actions"), "%s", e.msg);
    plan_free(pl);
}
