/* test_model_terms.c: the native planner's estimate and the simulator agree on every
 * communication term and on the memory terms they share (docs/planner-native.md, "One
 * model"). For each shipped profile (every .json of profiles/pipedream) on each shipped
 * cluster (profiles/clusters) and a few settings, the planner proposes a partition
 * (nm_partitions), turns it into a plan (nm_plan), and the simulator runs that plan
 * (sim_run); then per stage the bytes it sends and receives, the time of one transfer of
 * its output to the next stage's first device (the bytes / rate part read from the
 * simulator's link report, the latency from its network), its ring all-reduce and the
 * bytes of one buffer slot (the simulator's priced model), and per
 * device the gradients and optimizer state (its report) are compared at 1e-9 relative. The simulator's side is
 * read from its outputs, not recomputed here: a change of pricing on either side alone
 * fails this test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/native_impl.h"
#include "sim/cost.h"
#include "sim/sim.h"
#include "tests/shipped.h"


static int close_rel(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) > fabs(b) ? fabs(a) : fabs(b)) + 1e-300;
}

/* The link report of src -> dst, or NULL. */
static const sim_link_report *link_of(const sim_report *r, int src, int dst)
{
    for (int i = 0; i < r->nlinks; i++)
        if (r->links[i].src == src && r->links[i].dst == dst) return &r->links[i];
    return NULL;
}

typedef struct counts {
    int pairs, plans, bytes, xfers, allreduces, mems, slots;
} counts;

/* Plans p on c under s, simulates the plan, compares term by term. */
static void check_one(const char *pname, const char *cname, const profile *p,
                      const cluster *c, nm_setting s, counts *k)
{
    plumb_err e;
    nm_model m;
    cr_assert_eq(nm_model_build(&m, p, c, c->ndevices, NULL, 0, &e), 0, "%s", e.msg);
    static nm_part parts[4];
    int runs = 0, n = nm_partitions(&m, &s, parts, 4, &runs);
    if (n == 0) { /* nothing fits: no plan to compare */
        nm_model_free(&m);
        return;
    }
    const nm_part *pt = &parts[0];
    plan *pl = nm_plan(&m, &s, pt, &e);
    cr_assert_not_null(pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    sim_report *r = sim_run(pl, &o, &e);
    cr_assert_not_null(r, "%s on %s: %s", pname, cname, e.msg);
    cr_assert_eq(r->nstages, pt->nst);
    sim_net net;
    sim_net_from_cluster(&net, c, NULL);
    /* the simulator's priced model of the plan: the bytes of a buffer slot per stage */
    schedule *sch = schedule_from_plan(pl, 1, &e);
    cr_assert_not_null(sch, "%s", e.msg);
    sim_model sm;
    cr_assert_eq(sim_cost_build(&sm, pl, sch, &net, -1, 1, &e), 0, "%s", e.msg);
    k->plans++;
    for (int i = 0; i < pt->nst; i++) {
        nm_terms t;
        nm_stage_terms(&m, &s, &pt->st[i], &t);
        const sim_stage_report *st = &r->stages[i];
        const plan_stage *ps = &pl->stages[i];
        /* the bytes crossing the cuts before and after the stage */
        cr_expect(close_rel(t.out_bytes, st->send_bytes), "%s on %s stage %d: sends %.17g, "
                  "simulator %.17g", pname, cname, i, t.out_bytes, st->send_bytes);
        double in = i > 0 ? r->stages[i - 1].send_bytes : 0;
        cr_expect(close_rel(t.in_bytes, in), "%s on %s stage %d: receives %.17g, simulator "
                  "%.17g", pname, cname, i, t.in_bytes, in);
        k->bytes++;
        /* its ring all-reduce */
        cr_expect(close_rel(t.allreduce_s, st->allreduce_s), "%s on %s stage %d: all-reduce "
                  "%.17g s, simulator %.17g s", pname, cname, i, t.allreduce_s,
                  st->allreduce_s);
        if (st->allreduce_s > 0) k->allreduces++;
        /* one transfer of its output to the next stage's first device: the link report's
         * busy time per transfer (the link carries only those: the two devices hold
         * different stages, and gradients go the other way) plus the path's latency */
        if (i + 1 < pt->nst && t.out_bytes > 0) {
            int a = ps->devices[0], b = pl->stages[i + 1].devices[0];
            const sim_link_report *L = link_of(r, a, b);
            if (L && L->transfers > 0) {
                double rate, lat;
                cr_assert_geq(sim_net_path(&net, a, b, &rate, &lat), 0);
                double sim_s = L->busy_s / (double)L->transfers + lat;
                cr_expect(close_rel(t.xfer_s, sim_s), "%s on %s stage %d: transfer %.17g s, "
                          "simulator %.17g s", pname, cname, i, t.xfer_s, sim_s);
                k->xfers++;
            }
        }
        /* what one buffer slot holds (the slot counts differ: docs/planner-native.md,
         * "One model"; tests/test_memory_terms.c compares every memory term) */
        double slot = sm.stash_bytes[i] + sm.slotbuf_bytes[i];
        cr_expect(close_rel(t.mem.stash + t.mem.slotbuf, slot), "%s on %s stage %d: slot "
                  "%.17g bytes, simulator %.17g", pname, cname, i,
                  t.mem.stash + t.mem.slotbuf, slot);
        k->slots++;
        /* the parameter-sized memory of each of its devices */
        for (int j = 0; j < ps->replicas; j++)
            for (int d = 0; d < r->ndevices; d++)
                if (r->devices[d].device == ps->devices[j]) {
                    const sim_memory *mem = &r->devices[d].mem;
                    cr_expect(close_rel(t.mem.gradients, mem->gradients), "%s on %s stage "
                              "%d: gradients %.17g, simulator %.17g", pname, cname, i,
                              t.mem.gradients, mem->gradients);
                    cr_expect(close_rel(t.mem.optimizer, mem->optimizer), "%s on %s stage "
                              "%d: optimizer %.17g, simulator %.17g", pname, cname, i,
                              t.mem.optimizer, mem->optimizer);
                    k->mems++;
                }
    }
    sim_model_release(&sm);
    schedule_free(sch);
    sim_report_free(r);
    plan_free(pl);
    nm_model_free(&m);
}

/* Every shipped profile on every shipped cluster, under flushing and asynchronous
 * schedules (the latter replicate more: all-reduces), sgd, adam and momentum, with and
 * without recompute. */
/* One profile on one cluster under the three settings. */
static void check_pair(const char *pname, const char *cname, const profile *p,
                       const cluster *c, void *arg)
{
    counts *k = arg;
    nm_setting s1 = {.kind = SCHED_1F1B_FLUSH, .M = 16, .mbsize = p->minibatch,
                     .recompute = 0, .chunks = 1, .opt = OPT_SGD, .quick = 1};
    nm_setting s2 = {.kind = SCHED_PIPEDREAM, .M = 16, .mbsize = p->minibatch,
                     .recompute = 0, .chunks = 1, .opt = OPT_ADAM, .quick = 1};
    nm_setting s3 = {.kind = SCHED_GPIPE, .M = 16, .mbsize = p->minibatch, .recompute = 1,
                     .chunks = 1, .opt = OPT_MOMENTUM, .quick = 1};
    check_one(pname, cname, p, c, s1, k);
    check_one(pname, cname, p, c, s2, k);
    check_one(pname, cname, p, c, s3, k);
    k->pairs++;
}

Test(model_terms, shipped_profiles_and_clusters, .timeout = 600)
{
    counts k = {0};
    shipped_each(check_pair, &k);
    /* the comparison covered every kind of term */
    cr_expect_geq(k.plans, k.pairs);
    cr_expect_gt(k.bytes, 0);
    cr_expect_gt(k.xfers, 0);
    cr_expect_gt(k.allreduces, 0);
    cr_expect_gt(k.mems, 0);
    cr_expect_gt(k.slots, 0);
    fprintf(stderr, "model_terms: %d plans, %d stages' bytes, %d slots, %d transfers, %d "
            "all-reduces, %d devices' memory compared\n", k.plans, k.bytes, k.slots, k.xfers,
            k.allreduces, k.mems);
}
