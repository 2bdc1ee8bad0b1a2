/* balance3d.c: balanced stages for a 3D layout (planner/balance3d.h). The layers are priced
 * by the simulator's cost model, one probe plan per distinct stage device; the split is a
 * linear-partition dynamic program over whole blocks (PipeDream's planner, planner/pd_dp*,
 * solves a different problem, replication and devices per stage, so it is not used); the
 * simulator decides whether the split fits and whether it pays. */
#include "planner/balance3d.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/cost.h"
#include "sim/engine.h"

/* The F + B time of each layer of pl on device dev: out[l], seconds. 0 or -1 with err. */
static int price_on(const plan *pl, const sim_net *net, int dev, double *out, plumb_err *err)
{
    const profile *p = pl->prof;
    int L = p->nlayers, rc = -1;
    plan *probe = plan_new(p, pl->clus, L);
    schedule *s = NULL;
    sim_model m;
    memset(&m, 0, sizeof m);
    if (!probe) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int l = 0; l < L; l++)
        if (plan_set_stage(probe, l, l, l, 1, &dev)) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
    probe->microbatch_size = pl->microbatch_size;
    probe->recompute = pl->recompute;
    probe->checkpoint_layers = pl->checkpoint_layers;
    probe->tp = pl->tp;
    probe->sequence_parallel = pl->sequence_parallel;
    probe->zero = pl->zero;
    probe->tp_overlap = pl->tp_overlap; /* what of the collectives blocks, as in the run */
    probe->precision = pl->precision;
    probe->grad_reduce = pl->grad_reduce;
    probe->optimizer_state = pl->optimizer_state;
    probe->optimizer = pl->optimizer;
    /* one worker per layer, one microbatch: the cost model needs the stages' workers */
    sched_spec spec = {.kind = SCHED_1F1B_FLUSH, .nstages = L, .chunks = 1,
                       .microbatches = 1, .iterations = 1};
    if (!(s = schedule_generate(&spec, err))) goto done;
    if (sim_cost_build(&m, probe, s, net, -1, 1, err)) goto done;
    for (int l = 0; l < L; l++) {
        const double *a = &m.act_s[(size_t)l * SIM_NC];
        out[l] = (a[SIM_C_F] + a[SIM_C_B]) * m.worker_scale[s->stage_workers[s->stage_first[l]]];
    }
    rc = 0;
done:
    sim_model_release(&m);
    schedule_free(s);
    plan_free(probe);
    return rc;
}

/* 1 when stages a and b of pl cost the same per layer: their first groups are on servers of
 * one type, at the same place in the server, each group inside its server (the
 * tensor-parallel ring then crosses the same links). */
static int same_place(const plan *pl, int a, int b)
{
    const cluster *c = pl->clus;
    int da = pl->stages[a].devices[0], db = pl->stages[b].devices[0];
    int per = c->levels[0].count, tp = plan_tp(pl);
    if (da == db) return 1;
    if (da / per != (da + tp - 1) / per || db / per != (db + tp - 1) / per) return 0;
    return da % per == db % per &&
           c->server_type[cluster_server_of(c, da)] == c->server_type[cluster_server_of(c, db)];
}

double *layout3d_layer_costs(const plan *pl, plumb_err *err)
{
    int L = pl->prof->nlayers, S = pl->nstages;
    double *cost = malloc((size_t)S * L * sizeof *cost);
    if (!cost) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    for (int k = 0; k < S; k++)
        if (!pl->stages[k].devices || pl->stages[k].replicas < 1) {
            free(cost);
            err_set(err, NULL, NULL, "stages[%d]: expected devices", k);
            return NULL;
        }
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    for (int k = 0; k < S; k++) {
        int j = 0; /* a stage placed like an earlier one costs the same */
        while (j < k && !same_place(pl, j, k)) j++;
        if (j < k) {
            memcpy(cost + (size_t)k * L, cost + (size_t)j * L, (size_t)L * sizeof *cost);
        } else if (price_on(pl, &net, pl->stages[k].devices[0], cost + (size_t)k * L, err)) {
            free(cost);
            return NULL;
        }
    }
    return cost;
}

int layout3d_recv_gathers(const plan *pl, double *fixed, plumb_err *err)
{
    const profile *p = pl->prof;
    int S = pl->nstages;
    double *cross = sim_cross_bytes(p);
    if (!cross) return err_set(err, NULL, NULL, "out of memory");
    double scale = (double)pl->microbatch_size / (p->minibatch > 0 ? p->minibatch : 1);
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    for (int k = 0; k < S; k++) {
        const plan_stage *ps = &pl->stages[k];
        double f, b;
        sim_cost_recv_gathers(pl, &net, k,
                              k > 0 ? cross[pl->stages[k - 1].last_layer] * scale : 0,
                              cross[ps->last_layer] * scale, &f, &b);
        fixed[k] = f + b;
    }
    free(cross);
    return 0;
}

/* Stage k's time holding blocks [x, y) (pre: prefix sums of the blocks' costs on stage k's
 * device, pre[k * (n + 1) + x]), with the embedding (k = 0) and the head (k = S - 1), and
 * its fixed time (fixed may be NULL). */
static double stage_time(const double *cost, const double *fixed, const double *pre, int n,
                         int S, int k, int x, int y)
{
    const double *pk = pre + (size_t)k * (n + 1), *ck = cost + (size_t)k * (n + 2);
    return pk[y] - pk[x] + (k == 0 ? ck[0] : 0) + (k == S - 1 ? ck[n + 1] : 0) +
           (fixed ? fixed[k] : 0);
}

double layout3d_balance_split(const double *cost, int blocks, int nstages, const int *cap,
                              int *count)
{
    return layout3d_balance_split_fixed(cost, NULL, blocks, nstages, cap, count);
}

double layout3d_balance_split_fixed(const double *cost, const double *fixed, int blocks,
                                    int nstages, const int *cap, int *count)
{
    int n = blocks, S = nstages;
    if (n < 1 || S < 1 || S > n) return -1;
    size_t cells = (size_t)(S + 1) * (n + 1);
    double *pre = malloc((size_t)S * (n + 1) * sizeof *pre);
    double *f = malloc(cells * sizeof *f), *g = malloc(cells * sizeof *g);
    int *from = malloc(cells * sizeof *from);
    double best = -1;
    if (!pre || !f || !g || !from) goto done;
    for (int k = 0; k < S; k++) {
        double *pk = pre + (size_t)k * (n + 1);
        pk[0] = 0;
        for (int b = 0; b < n; b++) pk[b + 1] = pk[b] + cost[(size_t)k * (n + 2) + 1 + b];
    }
    /* pass 1: f[k][y], the least bottleneck of stages 0..k-1 over the first y blocks */
    for (size_t i = 0; i < cells; i++) f[i] = INFINITY;
    f[0] = 0;
    for (int k = 0; k < S; k++)
        for (int y = k + 1; y <= n - (S - 1 - k); y++) {
            double v = INFINITY;
            for (int x = k; x < y; x++) {
                if (cap && y - x > cap[k]) continue;
                double prev = f[(size_t)k * (n + 1) + x];
                if (prev == INFINITY) continue;
                double t = stage_time(cost, fixed, pre, n, S, k, x, y);
                if (t < prev) t = prev;
                if (t < v) v = t;
            }
            f[(size_t)(k + 1) * (n + 1) + y] = v;
        }
    double opt = f[(size_t)S * (n + 1) + n];
    if (opt == INFINITY) goto done;
    /* pass 2: among splits whose every stage is within the optimum (a relative 1e-12 for
     * the sums' rounding), the least distance from the even split */
    double lim = opt * (1 + 1e-12) + DBL_MIN, even = (double)n / S;
    for (size_t i = 0; i < cells; i++) g[i] = INFINITY;
    g[0] = 0;
    for (int k = 0; k < S; k++)
        for (int y = k + 1; y <= n - (S - 1 - k); y++) {
            double v = INFINITY;
            int arg = -1;
            for (int x = k; x < y; x++) {
                if (cap && y - x > cap[k]) continue;
                double prev = g[(size_t)k * (n + 1) + x];
                if (prev == INFINITY || stage_time(cost, fixed, pre, n, S, k, x, y) > lim) continue;
                double d = prev + fabs(y - x - even);
                if (d < v) v = d, arg = x;
            }
            g[(size_t)(k + 1) * (n + 1) + y] = v;
            from[(size_t)(k + 1) * (n + 1) + y] = arg;
        }
    if (g[(size_t)S * (n + 1) + n] == INFINITY) goto done; /* cannot happen: opt is met */
    for (int k = S, y = n; k > 0; k--) {
        int x = from[(size_t)k * (n + 1) + y];
        count[k - 1] = y - x;
        y = x;
    }
    best = 0;
    for (int k = 0, x = 0; k < S; x += count[k], k++) {
        double t = stage_time(cost, fixed, pre, n, S, k, x, x + count[k]);
        if (t > best) best = t;
    }
done:
    free(pre);
    free(f);
    free(g);
    free(from);
    return best;
}

/* Sets pl's stages to count[] blocks each (the embedding with the first, the head with
 * the last), devices unchanged. 0 or -1 (out of memory). */
static int apply_split(plan *pl, const int *count)
{
    int S = pl->nstages, L = pl->prof->nlayers, b = 0;
    for (int k = 0; k < S; k++) {
        int first = k == 0 ? 0 : 1 + b, last = k == S - 1 ? L - 1 : b + count[k];
        plan_stage *ps = &pl->stages[k];
        int *devs = malloc((size_t)ps->replicas * sizeof *devs);
        if (!devs) return -1;
        memcpy(devs, ps->devices, (size_t)ps->replicas * sizeof *devs);
        int rc = plan_set_stage(pl, k, first, last, ps->replicas, devs);
        free(devs);
        if (rc) return -1;
        b += count[k];
    }
    return 0;
}

/* The largest stage time of pl's current split under cost and fixed. */
static double split_bottleneck(const plan *pl, const double *cost, const double *fixed)
{
    int L = pl->prof->nlayers;
    double worst = 0;
    for (int k = 0; k < pl->nstages; k++) {
        double t = fixed[k];
        for (int l = pl->stages[k].first_layer; l <= pl->stages[k].last_layer; l++)
            t += cost[(size_t)k * L + l];
        if (t > worst) worst = t;
    }
    return worst;
}

/* Caps the blocks of every stage of cand (split as count) on a device that does not fit
 * in r, its report, one below what it holds. Returns how many caps changed. */
static int cap_unfit(const plan *cand, const sim_report *r, const int *count, int *cap)
{
    int changed = 0;
    for (int i = 0; i < r->ndevices; i++) {
        const sim_device_report *d = &r->devices[i];
        if (d->mem.fits) continue;
        for (int j = 0; j < d->nstages; j++) {
            int k = d->stages[j];
            if (k < 0 || k >= cand->nstages || count[k] <= 1) continue;
            if (cap[k] > count[k] - 1) {
                cap[k] = count[k] - 1;
                changed++;
            }
        }
    }
    return changed;
}

int layout3d_balance(plan *pl, const sim_options *so, const sim_report *even_report,
                     layout3d_balance_result *out, plumb_err *err)
{
    int S = pl->nstages, L = pl->prof->nlayers, n = L - 2, rc = -1;
    memset(out, 0, sizeof *out);
    if (S < 1 || n < S)
        return err_set(err, NULL, NULL, "expected at least one block per stage (got %d blocks "
                       "for %d stages)", n, S);
    double *cost = NULL, *fixed = NULL;
    int *count = malloc((size_t)S * sizeof *count), *cap = malloc((size_t)S * sizeof *cap);
    plan *cand = NULL;
    sim_report *own = NULL, *r = NULL;
    const sim_report *even = even_report;
    if (!count || !cap) goto oom;
    out->even_blocks = n / S;
    out->first_blocks = pl->stages[0].last_layer;
    out->last_blocks = n + 1 - pl->stages[S - 1].first_layer;
    out->even_s = out->balanced_s = even ? even->iteration_s : -1;
    out->even_fits = even ? even->fits : -1;
    if (!(cost = layout3d_layer_costs(pl, err))) goto done;
    if (!(fixed = malloc((size_t)S * sizeof *fixed))) goto oom;
    if (layout3d_recv_gathers(pl, fixed, err)) goto done;
    out->even_bottleneck_s = out->bottleneck_s = split_bottleneck(pl, cost, fixed);
    for (int k = 0; k < S; k++) cap[k] = n;
    for (;;) {
        double t = layout3d_balance_split_fixed(cost, fixed, n, S, cap, count);
        if (t < 0) break; /* the caps leave no split */
        int same = 1;
        for (int k = 0; k < S; k++)
            same &= count[k] == pl->stages[k].last_layer - pl->stages[k].first_layer + 1 -
                                    (k == 0) - (k == S - 1);
        if (same) { /* the even split is optimal (under the caps) */
            out->bottleneck_s = out->even_bottleneck_s;
            if (even && !even->fits && out->memory_rounds < BALANCE3D_MAX_ROUNDS &&
                cap_unfit(pl, even, count, cap)) {
                out->memory_rounds++; /* it does not fit: look for one that does */
                continue;
            }
            break;
        }
        if (!even) { /* simulated only when a split is to be compared with it */
            if (!(even = own = sim_run(pl, so, err))) goto done;
            out->even_s = out->balanced_s = even->iteration_s;
            out->even_fits = even->fits;
        }
        plan_free(cand);
        sim_report_free(r);
        r = NULL;
        if (!(cand = plan_clone(pl)) || apply_split(cand, count)) goto oom;
        if (!(r = sim_run(cand, so, err))) goto done;
        out->tried = 1;
        out->candidate_s = r->iteration_s;
        out->bottleneck_s = t;
        if (r->fits) {
            int better = !even->fits || r->iteration_s < even->iteration_s;
            if (better) {
                if (apply_split(pl, count)) goto oom;
                out->changed = 1;
                out->balanced_s = r->iteration_s;
                out->first_blocks = count[0];
                out->last_blocks = count[S - 1];
            }
            break;
        }
        if (++out->memory_rounds >= BALANCE3D_MAX_ROUNDS || !cap_unfit(cand, r, count, cap))
            break;
    }
    rc = 0;
    goto done;
oom:
    err_set(err, NULL, NULL, "out of memory");
done:
    sim_report_free(own);
    sim_report_free(r);
    plan_free(cand);
    free(cost);
    free(fixed);
    free(count);
    free(cap);
    return rc;
}
