/* search3d_est.c: the fast estimate of one tensor x pipeline x data layout
 * (planner/search3d.h). The stages are priced by the simulator's cost model (sim_cost_build)
 * on a schedule of the plan cut to a few microbatches per replica, enough for every stage to
 * reach the most microbatches it holds, so that the memory of each device is the
 * simulator's own (sim_memory_of). The iteration, per schedule kind:
 *
 *   one stage per rank, B whole (1f1b-flush, gpipe): m max_s c_s + the other stages' c_s
 *     (fill and drain), a closed form
 *   the others (interleaved, zb-h1, zb-v, dualpipev): m max_r R_r + the fill and drain of
 *     the pricing schedule's own order, replayed (est_replay): its makespan less its
 *     microbatches x max_r R_r; for the kinds with W apart over two iterations, the
 *     second's end less the first's (one iteration of the steady state, where the next
 *     iteration's forwards start under the last W, as in the simulator; the V kinds on
 *     an order of up to 12 p + 2 microbatches, est_v_microbatches). Closed forms on
 *     equal stages, kept where the replay fails: interleaved (p - 1) max_s c_s, zb-h1
 *     (p - 1) max_s max(I_s, F_s + I_s - W_s)
 *
 * with c_s = F_s + B_s the time of one microbatch on virtual stage s, R_r the sum over
 * rank r's chunks and m the microbatches per replica; plus the pipeline sends on the
 * fill and drain path (the replayed kinds: the replay with the sends on the edges between
 * ranks, less the replay without), the data-parallel all-reduce left exposed after each
 * rank's last backward (the simulator's bucketed ring: buckets ready evenly through that
 * backward; each stage of a rank its own ring after its own last backward, the lowering's
 * ALLREDUCE holding the rank until it ends, so a rank's chunks' tails add up) less the
 * slack the rank has before the next iteration reaches it, and the optimizer step
 * (memory-bound, as the simulator prices it). The chunked kinds (interleaved, zb-v,
 * dualpipev) have their all-reduces, steps and parameter all-gathers replayed in their
 * places in the order instead (chunk_tail): a rank's chunks other than its last end their
 * backwards between the rank's later backwards, so their tails partly hide in the drain's
 * waits or hold the backwards the next rank waits for.
 *
 * The plan's runtime is priced as the simulator prices it: tp_overlap by sim_cost_build
 * and sim_cost_stage_tp3 themselves (the exposed part of each layer's collectives in F, B,
 * I); the scatter-gather sends' all-gathers after the receives by sim_cost_build and
 * sim_cost_stage_recv_gather (counted with tp_s); overlap_param_gather as the reduce-scatter under the backward and the all-gather the
 * next first forward waits for (est_exposed_allreduce); p2p_sync as each step's slowest rank
 * with its blocking sends (est_pipeline), for interleaved and zb-h1 by a replay of the
 * order under the simulator's synchronous rules (est_sync_replay: batches, rendezvous,
 * gate; each STEP after its stage's exposed ring, which the neighbours' rendezvous wait
 * for) less the same replay without them, plus the two replays' steady rates apart times
 * the microbatches the pricing schedule cut (docs/llm.md, "Searching layouts"); zb-h1's
 * closed form (the next rank's deferred W and the slowest two cuts both ways in each step,
 * est_pipeline) stays where the replay fails.
 *
 * This file is the driver (the stages priced, the parts put together, the memory); the
 * parts live in search3d_est_pipe.c (closed forms, the overlapped replay),
 * search3d_est_sync.c (the synchronous replay) and search3d_est_dp.c (the all-reduce and
 * the step after the pipeline), behind planner/search3d_impl.h. The estimates of one
 * layout share its pricing schedules (while the stage costs that place their transfers
 * are the same), the order they replay and its stages' rings (est_cache). */
#include "planner/search3d_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule_impl.h"
#include "sim/memory.h"

/* m cut by whole rounds of p while at least cap stay (m itself when m <= cap). */
static int cut_rounds(int m, int p, int cap)
{
    return m <= cap ? m : m - p * ((m - cap) / p);
}

/* Microbatches per replica the pricing schedule keeps: m cut by whole rounds of p while at
 * least p + 2 (1F1B: a stage holds at most p - s at once) or 3 p + 2 (the chunked and
 * zero-bubble kinds: their warm-up is below 3 p) stay, and m's remainder modulo p stays, so
 * that each stage holds as many at once as with m. Kinds that hold every microbatch (gpipe)
 * keep all m. */
static int est_microbatches(const sched_traits *tr, int m, int p)
{
    if (tr->hold == SCHED_HOLD_ALL) return m;
    return cut_rounds(m, p, (tr->hold == SCHED_HOLD_1F1B ? p : 3 * p) + 2);
}

/* Microbatches per replica the V kinds' replay keeps: m cut as est_microbatches, by whole
 * rounds of p while at least 12 p + 2 stay. Their pipelines settle into the steady state
 * over several p microbatches where the stages are uneven (GPT-3 175B, the embedding and
 * the head on rank 0: 9 p at pp 4, 5 p at pp 8), so the fill and drain of the order cut to
 * 3 p + 2 was up to +0.75 % too long; at 12 p + 2 none of a grid at m = 8 p and 16 p is
 * (at 9 p + 2 dualpipev +0.08 %). */
static int est_v_microbatches(int m, int p) { return cut_rounds(m, p, 12 * p + 2); }


/* Seconds of one send of stage st's output to stage st + 1 (their first replicas); *lvl:
 * the level its path crosses (-1 when none), *hold: its bytes over the path's rate, times
 * the ranks of the sending tensor-parallel group that share one of its own lanes where it
 * leaves the server (sim_net_p2p_lanes' share: where its ranks outnumber them), as the
 * simulator's link.prate. */
static double send_s(const sim_model *mo, const sim_net *net, const plan *pl, int st,
                     int *lvl, double *hold)
{
    *lvl = -1, *hold = 0;
    if (st + 1 >= pl->nstages || !(mo->cut_bytes[st] > 0)) return 0;
    double rate, lat;
    int L = sim_net_path(net, pl->stages[st].devices[0], pl->stages[st + 1].devices[0], &rate,
                         &lat);
    if (L < 0) return 0;
    int own;
    double share = 1;
    if (L >= 1) sim_net_p2p_lanes(net, pl->stages[st].devices[0], plan_tp(pl), &own, &share);
    *lvl = L, *hold = mo->cut_bytes[st] / (share > 1 ? rate / share : rate);
    return lat + *hold;
}


/* Into peers[l], per level l of net, how many of plan stage st's replicas send from the
 * level-(l - 1) group of its first replica's device (the group whose level-l egress port
 * the simulator queues their sends at, eng_path_ports; a replica sends from its
 * tensor-parallel group's first device, plan_stage.devices[j], 1 / tp of the cut where
 * scatter-gather splits it); peers[0] = 1 (the device's own port). *own_queue: 1 when a
 * send of its tensor-parallel group leaving the server takes more than half the group's
 * own lanes (sim_net_p2p_lanes), so that the group's two sends of a batch queue there. */
static void stage_peers(const plan *pl, const sim_net *net, int st, int *peers, int *own_queue)
{
    const plan_stage *ps = &pl->stages[st];
    int own = 1, w = ps->devices ? sim_net_p2p_lanes(net, ps->devices[0], plan_tp(pl), &own,
                                                     NULL)
                                 : 1;
    *own_queue = plan_tp(pl) > 1 && own < 2 * w;
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++) {
        peers[l] = 1;
        if (l == 0 || l >= net->nlevels || !ps->devices || ps->replicas < 2 ||
            net->gsize[l - 1] < 1)
            continue;
        long long g = ps->devices[0] / net->gsize[l - 1];
        for (int j = 1; j < ps->replicas; j++)
            peers[l] += ps->devices[j] / net->gsize[l - 1] == g;
    }
}

/* 1 when more of schedule s's backwards are whole (B) than split (I). */
static int whole_backwards(const schedule *s)
{
    long nb = 0, ni = 0;
    for (int w = 0; w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++)
            nb += s->acts[w][i].kind == ACT_B, ni += s->acts[w][i].kind == ACT_I;
    return nb > ni;
}

/* Into ar[k], the part of each stage k's data-parallel ring left exposed after its last
 * backward of the iteration (B, I or W: the one the simulator buckets its all-reduce with,
 * in its worker's order in s; est_stage_allreduce), 0 where it has none. Each list read
 * from its end until each of its stages has its last. rg: pl's rings (est_rings_init). */
static void exposed_rings(const plan *pl, const schedule *s, const sim_model *mo,
                          const sim_net *net, est_rings *rg, const est_stage *st, double *ar)
{
    double *du = ar; /* first the last backwards' times, then the rings after them */
    int S = s->nstages;
    for (int k = 0; k < S; k++) du[k] = -1;
    for (int w = 0; w < s->nworkers; w++) {
        int left = 0; /* the worker's stages without their last backward yet */
        for (int k = 0; k < S; k++) left += s->stage_workers[s->stage_first[k]] == w;
        for (int i = s->len[w] - 1; i >= 0 && left > 0; i--) {
            const action *a = &s->acts[w][i];
            int k = a->stage;
            if (k < 0 || k >= S || du[k] >= 0) continue;
            if (a->kind == ACT_B || a->kind == ACT_I || a->kind == ACT_W)
                du[k] = a->kind == ACT_B ? st[k].B : a->kind == ACT_I ? st[k].I : st[k].W,
                left--;
        }
    }
    for (int k = 0; k < S; k++) {
        double whole;
        ar[k] = est_stage_allreduce(mo, net, rg, pl, k, du[k] < 0 ? 0 : du[k], -1, &whole);
    }
}

/* One iteration's length in the steady state of an order whose first iteration was just
 * replayed with its tails (est_replay, iters 1: done and t as it left them): the second
 * iteration is the first shifted by d, the time the worker of stage 0 starts it again
 * (after its last STEP, and its gather), when each worker's first computation and each
 * stage's first forward find nothing later than their first-iteration start plus d (their
 * list's end, their gathers): every action then waits for the same things d later.
 * Returns d, or -1 when that does not hold (replay two iterations then). */
static double shifted_period(const schedule *s, const est_stage *st, const double *tail,
                             const double *done, const double *t)
{
    int S = s->nstages, M = s->microbatches;
    const double *stepped = t + s->nworkers;
    int w0 = s->stage_workers[s->stage_first[0]];
    double f0 = done[0] - st[0].F; /* F(0, 0): the first iteration starts there */
    double d = fmax(t[w0], stepped[w0] + tail[S]) - f0;
    for (int w = 0; w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind != ACT_F) {
                if (a->kind == ACT_B || a->kind == ACT_I || a->kind == ACT_W) return -1;
                continue;
            }
            if (t[w] > done[(size_t)a->stage * M + a->microbatch] - st[a->stage].F + d + 1e-12)
                return -1; /* the worker's own list ends later */
            break;
        }
    for (int k = 0; k < S; k++) { /* each stage's first forward, gated by its gather */
        int w = s->stage_workers[s->stage_first[k]];
        if (stepped[w] + tail[S + k] > done[(size_t)k * M] - st[k].F + d + 1e-12) return -1;
    }
    return d;
}

/* The chunked kinds' (interleaved, zb-v, dualpipev) all-reduces and steps after the
 * pipeline, in their places in the order: each stage's exposed all-reduce after its own
 * last backward (a whole B where the order fuses it: dualpipev's last ones, not W) and its
 * step at its STEP, and where the parameter all-gather runs apart, the rank's gathers
 * after its last step, its stages' one after another in stage order (docs/sim.md), each
 * stage's next first forward waiting for its own; replayed over two iterations with the
 * sends (est_replay), less one iteration's replay with them (sent: the V kinds' steady
 * one, interleaved's makespan). A V rank's second chunk ends its backwards while the V
 * drains through the ranks after it, so its all-reduce and step mostly run in that wait
 * (est_tail added both chunks' tails per rank); an interleaved rank's chunks but its last
 * end theirs between its later chunks' backwards, where they partly hide in the drain's
 * waits (GPT-3 tp 8 x pp 8 V 12 on 64 H100s, the summed steps +1.2 %) or hold the
 * backwards the next rank waits for. Under grad_sync end the rank's rings and steps are
 * all held at its last STEP, as the simulator's pre-pass moves them. Returns the time
 * added, *dp_s and *step_s its shares (by the stages' all-reduces against their steps); -1
 * when the replay fails. ar: scratch of 2 x the stages; done and pos: the replay's; o: s's
 * order as est_replay reads it; rg: pl's rings (est_rings_init). */
static double chunk_tail(const plan *pl, const schedule *s, const est_order *o,
                         const sim_model *mo, const sim_net *net, est_rings *rg,
                         const est_stage *st, double *ar, double *done, int *pos, double sent,
                         double *dp_s, double *step_s)
{
    int S = pl->nstages, v = pl->chunks > 1 ? pl->chunks : 1, p = S / v;
    sched_kind kind = pl->schedule;
    double ex = 0, steps = 0, first, whole;
    exposed_rings(pl, s, mo, net, rg, st, ar);
    for (int k = 0; k < S; k++) {
        ex += ar[k], steps += st[k].step;
        ar[k] += st[k].step;
    }
    /* grad_sync end: the simulator moves a worker's all-reduces and steps after its last
     * backward, so the rank's are all held at its last STEP */
    for (int w = 0; pl->grad_sync_end && w < s->nworkers; w++) {
        int last = -1;
        for (int i = 0; i < s->len[w]; i++)
            if (s->acts[w][i].kind == ACT_STEP && s->acts[w][i].stage >= 0 &&
                s->acts[w][i].stage < S) {
                int k = s->acts[w][i].stage;
                if (last >= 0) ar[k] += ar[last], ar[last] = 0;
                last = k;
            }
    }
    for (int r = 0; r < p; r++) { /* rank r's gathers, its stages in order (V: r, 2p-1-r) */
        double before = 0; /* the whole gathers of the rank's stages before k */
        for (int k = r, lead = 1; k < S; k++) {
            if (sched_kind_rank(kind, k, p) != r) continue;
            ar[S + k] = before + est_stage_allreduce(mo, net, rg, pl, k, 0, st[k].F, &whole);
            if (lead) ex += ar[S + k], lead = 0;
            before += whole;
        }
    }
    double *t = done + 4 * (size_t)S * s->microbatches, two = -1;
    /* interleaved (flushes on its first rank): its first iteration alone and the shift of
     * the second where that is exact (shifted_period), half the replay */
    if (sched_traits_of(kind)->place != SCHED_PLACE_V &&
        est_replay(s, o, st, ar, 1, 1, done, t, pos, &first) >= 0)
        two = shifted_period(s, st, ar, done, t), first = 0;
    if (two < 0) two = est_replay(s, o, st, ar, 1, 2, done, t, pos, &first);
    if (two < 0 || two - first < sent) return -1;
    double add = two - first - sent;
    *dp_s = ex + steps > 0 ? add * ex / (ex + steps) : 0;
    *step_s = add - *dp_s;
    return add;
}

/* The figures of pl (its zero stage as given) from the one-pipeline model mo of schedule
 * s on net: the stage state set for pl's replicas, the closed form (or the replay of rs:
 * s, or for the V kinds an order of more microbatches) and the memory. st and expo:
 * scratch of the plan's stages (expo of 2 x them); done and pos: the replay's; rep: the
 * replay's makespans without and with sends once rep[0] is set (this sets it), kept for
 * the next ZeRO stage of the same model; o: rs's order as est_replay reads it; rg: pl's
 * rings (est_rings_init). */
static void est_figures(const plan *pl, const schedule *s, const schedule *rs,
                        const est_order *o, sim_model *mo, const sim_net *net, est_rings *rg,
                        int m, est_stage *st, double *expo, double *done, int *pos,
                        double *rep, search3d_est *out)
{
    const sched_traits *tr = sched_traits_of(pl->schedule);
    int S = pl->nstages, v = pl->chunks > 1 ? pl->chunks : 1, p = S / v;
    int split = tr->split_backward;
    /* a V order whose steady state runs the backward whole (dualpipev: most of its
     * backwards are B) is priced per microbatch at F + B, not F + I + W (under tp_overlap
     * backward B hides its collectives under its own weight GEMM, I does not) */
    int steady = split && tr->place == SCHED_PLACE_V && whole_backwards(rs) ? 0 : split;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < S; k++) sim_cost_stage_state(mo, pl, net, k, mo->param_bytes[k]);
    for (int k = 0; k < S; k++) {
        int w0 = s->stage_workers[s->stage_first[k]];
        double sc = mo->worker_scale[w0];
        const double *a = &mo->act_s[(size_t)k * SIM_NC];
        sim_tp_times tpt; /* what of them blocks under the plan's tp_overlap */
        sim_cost_stage_tp3(pl, net, k, &tpt);
        double tpf = tpt.f, tpb = steady ? tpt.i : tpt.b, gf, gb;
        /* the scatter-gather's all-gathers after the receives, inside act_s already */
        sim_cost_stage_recv_gather(mo, pl, net, k, &gf, &gb);
        int lvl;
        double hold, send = send_s(mo, net, pl, k, &lvl, &hold);
        st[k] = (est_stage){.F = a[SIM_C_F] * sc, .B = a[SIM_C_B] * sc, .I = a[SIM_C_I] * sc,
                            .W = a[SIM_C_W] * sc,
                            .tp = tpf + tpb + gf + gb +
                                  (pl->recompute == RECOMPUTE_FULL ? tpf : 0),
                            .send = send, .hold = hold, .lvl = lvl};
        st[k].step = mo->worker_mem_Bps[w0] > 0 ? mo->step_bytes[k] / mo->worker_mem_Bps[w0] : 0;
        stage_peers(pl, net, k, st[k].peers, &st[k].own_queue);
    }
    double fill_p2p;
    est_pipeline(st, S, p, m, steady, pl->p2p_sync, tr, out, &fill_p2p);
    if (tr->chunks_max > 1 || split) { /* the fill and drain of the order, replayed */
        /* the split kinds over two iterations: the second's makespan less the first's is
         * one iteration of the steady state, where the next forwards start under the
         * last W (the simulator's iteration); the others end on their first rank, whose
         * next forward waits for it, so one iteration is that */
        if (!rep[0]) { /* the stages' times do not change with the ZeRO stage */
            int iters = split ? 2 : 1;
            double *t = done + 4 * (size_t)S * rs->microbatches, b1, s1; /* t: 2 x workers */
            rep[1] = est_replay(rs, o, st, NULL, 0, iters, done, t, pos, &b1);
            rep[2] = est_replay(rs, o, st, NULL, 1, iters, done, t, pos, &s1);
            if (iters == 2) rep[1] -= b1, rep[2] -= s1;
            rep[0] = 1;
        }
        rep[3] = rep[5] = -1;
        if (pl->p2p_sync && (!split || tr->chunks_max == 1)) { /* not the V kinds */
            /* each stage's ALLREDUCE holds its worker for its exposed ring, which the
             * rendezvous of its neighbours wait for (replayed for each ZeRO stage, whose
             * ring differs; without it GPT-3 tp 8 x pp 8 x dp 2 V 3 on 128 H100s -8.4 %) */
            exposed_rings(pl, s, mo, net, rg, st, expo);
            rep[3] = est_sync_replay(s, st, expo, net, p, v, 1, &rep[4]);
            rep[5] = est_sync_replay(s, st, expo, net, p, v, 0, &rep[6]);
        }
        double bare = rep[1], sent = rep[2], synced = rep[3], plain = rep[5];
        if (bare > 0 && sent >= bare) {
            double Rmax = (out->compute_s + out->tp_s) / m;
            int M = rs->microbatches;
            out->bubble_s = fmax(bare - M * Rmax, 0);
            out->p2p_s += sent - bare - fill_p2p;
            /* interleaved and zb-h1 under p2p sync: the synchronous replay's makespan, and
             * its steady rate for the microbatches the pricing schedule cut (zb-h1's closed
             * form charged each of the m microbatches a steady step's wait, the warm-up's
             * and cool-down's too: +3 to +4 % of the time sync adds) */
            if (synced > 0 && plain > 0 && (M == m || (rep[4] > 0 && rep[6] > 0)))
                out->p2p_s = sent - bare + fmax(synced - plain + (m - M) * (rep[4] - rep[6]), 0);
        }
    }
    double tail = -1; /* the chunked kinds' tails in the replay (chunk_tail) */
    if ((tr->place == SCHED_PLACE_V || (tr->chunks_max > 1 && !split)) && rep[2] > 0)
        tail = chunk_tail(pl, rs, o, mo, net, rg, st, expo, done, pos, rep[2], &out->dp_s,
                          &out->step_s);
    if (tail < 0) {
        for (int k = 0; k < S; k++) { /* per rank, at its first stage */
            int r = sched_kind_rank(tr->kind, k, p), first = 0;
            while (sched_kind_rank(tr->kind, first, p) != r) first++;
            expo[k] = first == k ? est_exposed_allreduce(mo, net, rg, pl, tr, r, p, st, split)
                                 : 0;
        }
        tail = est_tail(st, expo, S, p, tr, &out->dp_s, &out->step_s);
    }
    out->iteration_s = out->compute_s + out->tp_s + out->bubble_s + out->p2p_s + tail;
    /* memory: each rank's first group, as the simulator's report */
    out->fits = 1;
    for (int r = 0; r < p; r++) {
        int k = 0;
        while (k < S && sched_kind_rank(tr->kind, k, p) != r) k++;
        if (k == S) continue;
        int w = s->stage_workers[s->stage_first[k]];
        const device_type *t = cluster_device_type(pl->clus, mo->worker_device[w]);
        sim_memory mem;
        sim_memory_of(mo, w, NULL, pl->optimizer, t ? t->memory_bytes : 0, &mem);
        if (mem.total > out->peak_bytes) {
            out->peak_bytes = mem.total;
            out->capacity_bytes = mem.capacity;
        }
        if (!mem.fits) {
            if (out->fits) out->capacity_bytes = mem.capacity;
            out->fits = 0;
        }
    }
}

/* Frees what x holds and zeroes it. */
static void est_scheds_free(est_scheds *x)
{
    schedule_free(x->s);
    schedule_free(x->full);
    est_order_free(&x->ord);
    free(x->cost);
    *x = (est_scheds){0};
}

void est_cache_free(est_cache *c)
{
    est_scheds_free(&c->sc[0]);
    est_scheds_free(&c->sc[1]);
    est_rings_free(&c->rg);
    *c = (est_cache){0};
}

/* The pricing schedule of view (a plan of one replica per stage) and for the V kinds the
 * order of more microbatches (full: NULL where the pricing one has as many), from c where
 * one of its slots was placed with view's stage costs (the same layout: they place the
 * transfers, schedule_from_plan), else built into the slot set the longer ago. NULL on
 * failure, with err. */
static const est_scheds *est_schedules(const plan *view, int more, est_cache *c,
                                       plumb_err *err)
{
    int S = view->nstages, n = 3 * S;
    double *cost = malloc((size_t)n * sizeof *cost);
    if (!cost) return err_set(err, NULL, NULL, "out of memory"), NULL;
    int costed = !schedule_plan_costs(view, cost);
    for (int i = 0; i < 2; i++) {
        const est_scheds *x = &c->sc[(c->last + 2 - i) % 2];
        if (x->s && x->costed == costed &&
            (!costed || !memcmp(x->cost, cost, (size_t)n * sizeof *cost))) {
            free(cost);
            return x;
        }
    }
    c->last = !c->last;
    est_scheds *x = &c->sc[c->last];
    est_scheds_free(x);
    x->cost = cost, x->costed = costed;
    if (!(x->s = schedule_from_plan(view, 1, err))) return NULL;
    if (more > view->microbatches) {
        plan longer = *view;
        longer.microbatches = more;
        if (!(x->full = schedule_from_plan(&longer, 1, err))) {
            est_scheds_free(x);
            return NULL;
        }
    }
    if (est_order_of(x->full ? x->full : x->s, &x->ord)) {
        est_scheds_free(x);
        return err_set(err, NULL, NULL, "out of memory"), NULL;
    }
    return x;
}

int search3d_estimate_cached(const plan *pl, int nz, const int *zeros, search3d_est *out,
                             est_cache *c, plumb_err *err)
{
    const sched_traits *tr = sched_traits_of(pl->schedule);
    int S = pl->nstages, v = pl->chunks > 1 ? pl->chunks : 1, p = S / v;
    int dp = pl->stages[0].replicas, m = pl->microbatches / (dp > 0 ? dp : 1);
    if (!tr || p < 1 || m < 1)
        return err_set(err, NULL, NULL, "the plan's schedule, stages or microbatches");
    est_cache own = {0};
    if (!c) c = &own;
    /* one pipeline: every replica runs the same order (docs/llm.md, "3D layouts"), so its
     * first replicas' schedule prices the stages and holds what each device holds; the
     * state and the all-reduce are then set for the replicas */
    plan view = *pl; /* shallow, with its own stages of one replica */
    view.microbatches = est_microbatches(tr, m, p);
    sim_model mo = {0};
    est_stage *st = calloc((size_t)S, sizeof *st);
    double *expo = calloc(2 * (size_t)S, sizeof *expo); /* chunk_tail's 2 S */
    plan_stage *one = calloc((size_t)S, sizeof *one);
    double *done = NULL;
    int *pos = NULL;
    int rc = -1, built = -1; /* sim_cost_plan_is_3d of the model built */
    double rep[7] = {0}; /* the replays of the model built: done, bare, with sends; under p2p
                           sync the synchronous replay, its steady rate, the same replay
                           without the sync rules, its rate */
    if (!st || !expo || !one) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int k = 0; k < S; k++) {
        one[k] = pl->stages[k];
        one[k].replicas = 1;
    }
    view.stages = one;
    /* the V kinds replay an order of more microbatches (est_v_microbatches) */
    int more = tr->place == SCHED_PLACE_V ? est_v_microbatches(m, p) : 0;
    const est_scheds *x = est_schedules(&view, more, c, err);
    if (!x) goto done;
    const schedule *s = x->s, *rs = x->full ? x->full : s;
    done = malloc((4 * (size_t)S * rs->microbatches + 2 * (size_t)rs->nworkers) *
                  sizeof *done); /* 2 iterations' replay */
    pos = malloc((size_t)rs->nworkers * sizeof *pos);
    /* the stages' rings: neither the ZeRO stage nor the recomputation changes them */
    if (!done || !pos || (!c->rg.per_byte && est_rings_init(&c->rg, pl, p))) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, NULL);
    for (int i = 0; i < nz; i++) {
        plan zp = *pl; /* shallow: the ZeRO stage changes the state, not the stages' times */
        zp.zero = view.zero = zeros[i];
        /* the buffers a plan's runtime has follow sim_cost_plan_is_3d, which ZeRO can
         * change: price again then */
        if (built != sim_cost_plan_is_3d(&zp)) {
            sim_model_release(&mo);
            if (sim_cost_build(&mo, &view, s, &net, -1, 1, err)) goto done;
            built = sim_cost_plan_is_3d(&zp);
            rep[0] = 0; /* priced again: replay again */
        }
        est_figures(&zp, s, rs, &x->ord, &mo, &net, &c->rg, m, st, expo, done, pos, rep,
                    &out[i]);
    }
    rc = 0;
done:
    sim_model_release(&mo);
    est_cache_free(&own);
    free(st);
    free(expo);
    free(one);
    free(done);
    free(pos);
    return rc;
}

int search3d_estimate_zeros(const plan *pl, int nz, const int *zeros, search3d_est *out,
                            plumb_err *err)
{
    return search3d_estimate_cached(pl, nz, zeros, out, NULL, err);
}

int search3d_estimate(const plan *pl, search3d_est *out, plumb_err *err)
{
    memset(out, 0, sizeof *out);
    return search3d_estimate_zeros(pl, 1, &pl->zero, out, err);
}
