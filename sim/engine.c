/* engine.c: the discrete-event replay of a schedule IR on a priced model (engine.h): the
 * workers and the run; communication is in engine_comm.c, the event queue in eventq.h.
 *
 * Events are ordered by (time, insertion number), so equal times run in the order they
 * were posted and a run is deterministic; a worker's event sits in the worker's slot of a
 * tournament tree, the others in a 4-ary heap (eventq.h). Three event kinds:
 * "worker w may go on" (its compute finished, its data arrived, its all-reduce finished),
 * "transfer x released its link and egress ports" and "all-reduce group g: its next bucket
 * or ring step starts, or its grouped ring step ends" (engine_comm.c, engine_ring.c).
 *
 * The engine reads the IR in place and keeps state only for what is in flight, so a run
 * costs O(log in flight) per event and its memory does not grow with the schedule's length:
 * a SEND creates a transfer record (recycled once it is received and off its link) and
 * queues it on its channel (sender, receiver, direction); a RECV is posted (kept in the
 * worker's list of posted receives) and the computation that consumes its data takes the
 * matching transfer from its channel (the head, for IR that keeps each channel in order;
 * otherwise a search of the channel's few unreceived transfers) or waits for it; an
 * ALLREDUCE joins
 * the group of the k-th all-reduce of its stage. Links, egress ports, channels and groups
 * are created on first use and looked up by hash. */
#include "sim/engine.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "sim/engine_impl.h"
#include "sim/sim.h"

/* --- shared helpers ----------------------------------------------------------------------- */

int eng_oom(eng *E)
{
    return err_set(E->err, NULL, NULL, "out of memory");
}

int eng_bad_action(eng *E, int w, int i, const char *what)
{
    char buf[64];
    return err_set(E->err, NULL, NULL, "schedule: worker %d action %d (%s): %s", w, i,
                   action_format(&E->s->acts[w][i], buf, sizeof buf), what);
}

int eng_grow(void **p, int n, int *cap, size_t size)
{
    void *np = array_room(*p, n, cap, 64, size);
    if (!np)
        return -1;
    *p = np;
    return 0;
}

int eng_grow_lines(void **p, int n, int *cap, size_t size)
{
    if (n < *cap)
        return 0;
    /* the capacity array_room would give; the block is moved here, aligned */
    int nc = *cap >= 0 && *cap <= INT_MAX / 2 ? (int)array_next_cap((size_t)*cap, 16, size) : 0;
    void *np = nc ? aligned_alloc(64, (size_t)nc * size) : NULL;
    if (!np)
        return -1;
    if (n > 0)
        memcpy(np, *p, (size_t)n * size);
    free(*p);
    *p = np;
    *cap = nc;
    return 0;
}

int eng_record(eng *E, int track, int kind, double start, double dur, double bytes,
                  int stage, int peer_stage, int mb, int iter)
{
    tl_event e = {.start_s = start, .dur_s = dur, .bytes = bytes, .track = track,
                  .kind = kind, .stage = stage, .peer_stage = peer_stage, .microbatch = mb,
                  .iteration = iter};
    return timeline_add(E->r->tl, &e) ? eng_oom(E) : 0;
}

/* --- workers ------------------------------------------------------------------------------- */

/* The index in w's posted receives of the RECV whose data compute action a consumes (F:
 * its input activations, B/I: its output gradient), or -1 when none was posted (stage 0's
 * input, the last stage's gradient, data handed over on the same worker). Oldest first:
 * the consumer of the oldest post usually comes first. */
static int post_find(const eng *E, int w, const action *a)
{
    const wstate *ws = &E->ws[w];
    int want = a->kind == ACT_F ? ACT_RECV_F
             : a->kind == ACT_B || a->kind == ACT_I ? ACT_RECV_B : -1;
    if (want < 0)
        return -1;
    for (int i = ws->p0; i < ws->npost; i++) {
        const action *r = &E->s->acts[w][ws->post[i]];
        if (r->kind == want && r->stage == a->stage && r->microbatch == a->microbatch)
            return i;
    }
    return -1;
}

/* Runs worker w from its cursor at time t until it computes (an event marks the end),
 * blocks (a computation's data not yet there, or an all-reduce: an arrival, a send or the
 * all-reduce wakes it) or finishes. A RECV only posts the receive; the computation that
 * consumes its data waits for it (docs/sim.md, "Engine"). */
static int worker_run(eng *E, int w, double t)
{
    const sim_model *m = E->m;
    const action *acts = E->s->acts[w];
    wstate *ws = &E->ws[w];
    const double *act_s = m->act_s, scale = m->worker_scale[w];
    int len = E->s->len[w], nmb = E->s->microbatches;
    for (;;) {
        int c = ws->cursor;
        if (c == len) {
            E->finished++;
            return 0;
        }
        const action *a = &acts[c];
        /* the workers' lists are read in turn, each from its cursor: fetch ahead */
        __builtin_prefetch(a + 8);
        if ((unsigned)a->stage >= (unsigned)E->ns)  /* everything below indexes by it */
            return eng_bad_action(E, w, c, "stage out of range");
        /* an action of a microbatch counts in its iteration; an all-reduce or a step in
         * that of the worker's last computation (a receive of the next iteration posted
         * before a step does not move the step) */
        int iter = mb_iteration(a->microbatch, nmb, E->niter, &ws->mb_lo, &ws->mb_iter,
                                ws->iter), rc;
        if (a->kind <= ACT_W)
            ws->iter = iter;
        E->r->actions++;
        switch (a->kind) {
        case ACT_F: case ACT_B: case ACT_I: case ACT_W: case ACT_STEP: {
            if (m->p2p_sync && (ws->sync_out > 0 || ws->sync_deliv > t)) {
                if ((rc = eng_sync_gate(E, w, t)) < 0)
                    return -1;
                if (rc) {
                    E->r->actions--;  /* not run yet: counted again when it is */
                    return 0;
                }
            }
            int s = a->stage, pi = ws->npost > ws->p0 ? post_find(E, w, a) : -1;
            if (pi >= 0) {
                rc = eng_recv(E, w, ws->post[pi], t);
                if (rc < 0)
                    return -1;
                if (rc < 2 && pi == ws->p0)  /* taken: the post is done (usually the oldest) */
                    ws->p0++;
                else if (rc < 2)
                    memmove(ws->post + pi, ws->post + pi + 1,
                            (size_t)(--ws->npost - pi) * sizeof *ws->post);
                if (ws->p0 == ws->npost)
                    ws->p0 = ws->npost = 0;
                if (rc > 0) {
                    E->r->actions--;  /* not run yet: counted again when it is */
                    return 0;
                }
            }
            double dur = act_s[(size_t)s * SIM_NC + comp_slot(a->kind)] * scale;
            if (a->kind == ACT_STEP && m->worker_mem_Bps[w] > 0)
                dur += m->step_bytes[s] / m->worker_mem_Bps[w];
            /* a forward after a ZeRO step waits for the parameters it reaches */
            if (a->kind == ACT_F && m->gather_bytes && m->gather_bytes[s] > 0 &&
                (rc = eng_gather_wait(E, w, s, t, dur, &t)) != 0) {
                E->r->actions--;  /* not run yet: counted again when it is */
                return rc < 0 ? -1 : 0;
            }
            if (a->kind == ACT_F && ++ws->inflight > E->r->max_inflight[w])
                E->r->max_inflight[w] = ws->inflight;
            if (a->kind == ACT_B || a->kind == ACT_W) {
                ws->inflight--;
                if ((E->s->replicas[s] > 1 || eng_ring_solo(m, E->s, s)) &&
                    eng_backward(E, w, c, s, t, dur))
                    return -1;
            }
            E->busy_it[(size_t)w * E->niter + iter] += dur;
            E->r->busy_total[w] += dur;
            note_end(E, iter, t + dur);
            if (m->record &&
                eng_record(E, E->dev_track[w], tl_of_act(a->kind), t, dur, 0, s, -1,
                       a->microbatch, iter))
                return -1;
            ws->cursor = c + 1;
            if (dur > 0)
                return heap_push(&E->h, t + dur, w) ? eng_oom(E) : 0;
            break;
        }
        case ACT_SEND_F: case ACT_SEND_B:
            ws->cursor = c + 1;
            if (eng_send(E, w, c, iter, t))
                return -1;
            break;
        case ACT_RECV_F: case ACT_RECV_B:
            if ((unsigned)a->peer >= (unsigned)E->nw)
                return eng_bad_action(E, w, c, "peer worker out of range");
            if (ws->npost == ws->cappost && ws->p0 > 0) {  /* reuse the taken front */
                memmove(ws->post, ws->post + ws->p0,
                        (size_t)(ws->npost - ws->p0) * sizeof *ws->post);
                ws->npost -= ws->p0;
                ws->p0 = 0;
            }
            if (eng_grow((void **)&ws->post, ws->npost, &ws->cappost, sizeof *ws->post))
                return eng_oom(E);
            ws->post[ws->npost++] = c;
            ws->cursor = c + 1;
            if (m->p2p_sync && eng_sync_post(E, w, c, t))
                return -1;
            break;
        case ACT_ALLREDUCE:
            return eng_allreduce(E, w, c, iter, t);
        default:
            ws->cursor = c + 1;  /* kinds without cost */
        }
    }
}

/* --- setup, run, results ------------------------------------------------------------------ */

static void eng_free(eng *E)
{
    for (int w = 0; E->ws && w < E->nw; w++)
        free(E->ws[w].post);
    free(E->ws);
    free(E->x);
    free(E->lk);
    free(E->pt);
    free(E->ch);
    free(E->gr);
    free(E->gmem);
    ht_free(&E->lh);
    ht_free(&E->ph);
    ht_free(&E->chh);
    ht_free(&E->gh);
    free(E->ar_occ);
    free(E->reg_occ);
    free(E->gst);
    free(E->gdu);
    free(E->bend);
    free(E->busy_it);
    free(E->comm_it);
    free(E->dev_track);
    free(E->coll_track);
    free(E->rg);
    free(E->vbs);
    free(E->hop);
    free(E->shop);
    free(E->ringw);
    free(E->ringoff);
    heap_free(&E->h);
}

static int setup(eng *E)
{
    int nw = E->nw, ns = E->ns;
    size_t nws = (size_t)nw * ns;
    E->ws = calloc((size_t)nw, sizeof *E->ws);
    E->ar_occ = calloc(nws, sizeof *E->ar_occ);
    E->reg_occ = calloc(nws, sizeof *E->reg_occ);
    E->busy_it = calloc((size_t)nw * E->niter, sizeof *E->busy_it);
    E->comm_it = calloc((size_t)nw * E->niter, sizeof *E->comm_it);
    E->dev_track = malloc((size_t)nw * sizeof *E->dev_track);
    E->coll_track = malloc((size_t)nw * sizeof *E->coll_track);
    if (!E->ws || !E->ar_occ || !E->reg_occ || !E->busy_it ||
        !E->comm_it || !E->dev_track || !E->coll_track || ht_init(&E->lh, 16) ||
        ht_init(&E->ph, 16) || ht_init(&E->chh, 16) || ht_init(&E->gh, 16))
        return eng_oom(E);
    E->xfree = -1;
    for (int w = 0; w < nw; w++) {
        wstate *ws = &E->ws[w];
        for (int k = 0; k < 4; k++)
            ws->speer[k] = ws->rpeer[k] = -1;
        ws->ring_g = -1;
        E->dev_track[w] = E->coll_track[w] = -1;
        if (!E->m->record)
            continue;
        const char *dn = E->m->device_names ? E->m->device_names[w] : NULL;
        E->dev_track[w] = timeline_track(E->r->tl, TL_TRACK_DEVICE, E->m->worker_device[w],
                                         -1, dn);
        if (E->dev_track[w] < 0)
            return eng_oom(E);
    }
    return 0;
}

/* Names the first blocked worker and what it waits on. */
static int deadlock(eng *E)
{
    for (int w = 0; w < E->nw; w++) {
        int c = E->ws[w].cursor;
        if (c < E->s->len[w]) {
            char buf[64];
            int k = E->s->acts[w][c].kind;
            return err_set(E->err, NULL, NULL, "schedule deadlocks: worker %d waits forever "
                           "at action %d (%s)%s; %d of %d workers finished", w, c,
                           action_format(&E->s->acts[w][c], buf, sizeof buf),
                           k == ACT_F || k == ACT_B || k == ACT_I
                               ? ": its data is never sent" : "",
                           E->finished, E->nw);
        }
    }
    return err_set(E->err, NULL, NULL, "schedule deadlocks");
}

/* After the run: every posted receive taken by its consumer, every transfer sent
 * received. */
static int check_channels(eng *E)
{
    for (int w = 0; w < E->nw; w++) {
        const wstate *ws = &E->ws[w];
        if (ws->npost > ws->p0)
            return eng_bad_action(E, w, ws->post[ws->p0], "receive posted but no later "
                                  "computation of its stage and microbatch takes its data");
    }
    for (int ci = 0; ci < E->nch; ci++)
        if (E->ch[ci].head >= 0) {
            const xfer *x = &E->x[E->ch[ci].head];
            return err_set(E->err, NULL, NULL, "schedule: worker %d sends %s of stage %d "
                           "microbatch %d to worker %d but nobody receives them", x->src_w,
                           x->a->kind == ACT_SEND_F ? "activations" : "gradients",
                           x->a->stage, x->a->microbatch, x->a->peer);
        }
    return 0;
}

void sim_result_free(sim_result *r)
{
    if (!r)
        return;
    free(r->iter_end);
    free(r->busy_window);
    free(r->comm_window);
    free(r->busy_total);
    free(r->max_inflight);
    free(r->links);
    timeline_free(r->tl);
    memset(r, 0, sizeof *r);
}

int sim_steady_window(const schedule *s, int *k0, int *k1)
{
    int n = s->iterations > 0 ? s->iterations : 1, nmb = s->microbatches;
    int *cnt = calloc((size_t)n, sizeof *cnt);
    if (!cnt)
        return -1;
    int overlap = 0, D = 0;
    for (int w = 0; w < s->nworkers; w++) {
        memset(cnt, 0, (size_t)n * sizeof *cnt);
        int oldest = 0, inflight = 0, most = 0, lo = 0, lo_it = 0;
        long nf = 0;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind != ACT_F && a->kind != ACT_B && a->kind != ACT_W)
                continue;
            int it = mb_iteration(a->microbatch, nmb, n, &lo, &lo_it, 0);
            if (a->kind == ACT_F) {
                while (oldest < it && cnt[oldest] == 0)
                    oldest++;
                if (inflight > 0 && oldest < it)
                    overlap = 1;  /* a forward of a later iteration while one is held */
                cnt[it]++;
                nf++;
                if (++inflight > most)
                    most = inflight;
            } else if (cnt[it] > 0) {
                cnt[it]--;
                inflight--;
            }
        }
        if (nf > 0) {
            double per = (double)nf / n;
            int d = (int)ceil(most / per - 1e-9);
            if (d > D)
                D = d;
        }
    }
    free(cnt);
    if (!overlap) {
        *k0 = 1;
        *k1 = n - 1;
        return 3;
    }
    *k0 = D + 1;
    *k1 = n - 1 - D;
    return 2 * D + 3;
}

int sim_engine_run(const sim_model *m, sim_result *r, plumb_err *err)
{
    const schedule *s = m->sched;
    schedule batched = {0};  /* p2p_sync: the transfers at the runtime's batch points */
    schedule ends = {0};     /* grad_sync_end: the reductions after the last computation */
    schedule solo = {0};     /* the context ranks' reduction of a stage of one replica */
    memset(r, 0, sizeof *r);
    int has_solo = 0;
    for (int st = 0; st < s->nstages && !has_solo; st++)
        has_solo = eng_ring_solo(m, s, st);
    if (has_solo) {
        if (eng_solo_order(m, s, &solo))
            return err_set(err, NULL, NULL, "out of memory");
        s = &solo;
    }
    if (m->grad_sync_end && eng_gradsync_order(s, &ends, err)) {
        eng_solo_order_free(&solo);
        return -1;
    }
    s = m->grad_sync_end ? &ends : s;
    if (m->p2p_sync) {
        if (eng_sync_order(s, &batched)) {
            eng_sync_order_free(&ends);
            eng_solo_order_free(&solo);
            return err_set(err, NULL, NULL, "out of memory");
        }
        s = &batched;
    }
    eng E = {.m = m, .s = s, .r = r, .nw = s->nworkers, .ns = s->nstages,
             .niter = s->iterations > 0 ? s->iterations : 1, .err = err};
    int rc = -1;
    /* the steady window (sim_steady_window); the whole run when the IR is too short */
    if (m->window_known) {
        E.k0 = m->window_k0;
        E.k1 = m->window_k1;
    } else if (sim_steady_window(s, &E.k0, &E.k1) < 0) {
        eng_oom(&E);
        if (m->p2p_sync)
            eng_sync_order_free(&batched);
        eng_sync_order_free(&ends);
        eng_solo_order_free(&solo);
        return -1;
    }
    r->steady = E.k1 >= E.k0;
    if (!r->steady) {
        E.k0 = 0;
        E.k1 = E.niter - 1;
    }
    r->k0 = E.k0;
    r->k1 = E.k1;
    r->nworkers = E.nw;
    r->iterations = E.niter;
    r->iter_end = calloc((size_t)E.niter, sizeof *r->iter_end);
    r->busy_window = calloc((size_t)E.nw + 1, sizeof *r->busy_window);
    r->comm_window = calloc((size_t)E.nw + 1, sizeof *r->comm_window);
    r->busy_total = calloc((size_t)E.nw + 1, sizeof *r->busy_total);
    r->max_inflight = calloc((size_t)E.nw + 1, sizeof *r->max_inflight);
    if (!r->iter_end || !r->busy_window || !r->comm_window || !r->busy_total ||
        !r->max_inflight) {
        eng_oom(&E);
        goto out;
    }
    if (E.nw <= 0 || E.ns <= 0) {
        err_set(err, NULL, NULL, "schedule has no workers or no stages");
        goto out;
    }
    if (m->record && !(r->tl = timeline_new("sim"))) {
        eng_oom(&E);
        goto out;
    }
    heap_init(&E.h, E.nw);
    if (setup(&E) || eng_ring_analyse(&E))
        goto out;
    E.quiet = !m->xfer_events;
    for (int st = 0; E.rg && st < E.ns; st++)
        if (E.rg[st].nshared > 0)
            E.quiet = 0;
    for (int w = 0; w < E.nw; w++)
        if (heap_push(&E.h, 0.0, w)) {
            eng_oom(&E);
            goto out;
        }
    while (heap_count(&E.h)) {
        event e = heap_pop(&E.h);
        r->events++;
        if (E.nvb && (e.id < E.nw || !eng_ring_independent(&E, e.id - E.nw)))
            eng_ring_unbatch_all(&E);
        E.now_t = e.t;
        E.now_seq = e.seq;
        if (e.id < 0 ? eng_xfer_done(&E, -e.id - 1, e.t)
            : e.id < E.nw ? worker_run(&E, e.id, e.t)
                          : eng_group_event(&E, e.id - E.nw, e.t))
            goto out;
    }
    eng_ring_unbatch_all(&E);
    if (E.finished < E.nw) {
        deadlock(&E);
        goto out;
    }
    if (check_channels(&E))
        goto out;
    /* steady state: the gaps between the ends of the window's iterations and the end of
     * the one before it; a run too short for a window: makespan / N (fill and drain
     * included) */
    int n = E.niter, k0 = E.k0, k1 = E.k1;
    r->iteration_s = r->steady ? (r->iter_end[k1] - r->iter_end[k0 - 1]) / (k1 - k0 + 1)
                               : r->makespan_s / n;
    if (r->steady) {
        /* settled: every gap of the window alike (the usual exact repetition), or a run of
         * at least SIM_SETTLE_RUN alike gaps ending the window and covering half of it
         * (a slower transient: contention can hold a pipeline in a nearly periodic
         * pattern for several iterations before it settles); then measure on that run */
        const double *e = r->iter_end;
        double last = e[k1] - e[k1 - 1];
        int j = k1;
        while (j > k0 && fabs(e[j - 1] - e[j - 2] - last) <= SIM_SETTLE_TOL * last)
            j--;
        int run = k1 - j + 1, nw = k1 - k0 + 1;
        r->settled = (run == nw && nw >= 2) || (run >= SIM_SETTLE_RUN && 2 * run >= nw);
        if (r->settled && j > k0) {
            r->iteration_s = (e[k1] - e[j - 1]) / run;
            r->k0 = k0 = j;
        }
    }
    for (int w = 0; w < E.nw; w++) {
        double b = 0, c = 0;
        for (int k = k0; k <= k1; k++) {
            b += E.busy_it[(size_t)w * n + k];
            c += E.comm_it[(size_t)w * n + k];
        }
        r->busy_window[w] = b / (k1 - k0 + 1);
        r->comm_window[w] = c / (k1 - k0 + 1);
    }
    r->nlinks = E.nlk;
    r->links = malloc(((size_t)E.nlk + 1) * sizeof *r->links);
    if (!r->links) {
        eng_oom(&E);
        goto out;
    }
    for (int i = 0; i < E.nlk; i++) {
        r->links[i] = E.lk[i].st;
        r->links[i].bytes_window /= (E.k1 - E.k0 + 1);  /* counted on the first window */
    }
    rc = 0;
out:
    eng_free(&E);
    if (m->p2p_sync)
        eng_sync_order_free(&batched);
    eng_sync_order_free(&ends);
    eng_solo_order_free(&solo);
    if (rc)
        sim_result_free(r);
    return rc;
}
