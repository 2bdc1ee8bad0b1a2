/* sim_fold.c: sim_run_folded, the simulation of a data-parallel plan by one pipeline
 * (sim/sim.h). The r replicas of a 3D layout run the same actions on devices of the same
 * type, and where their transfers never queue behind one another (sim_fold_check) each
 * replica's timing is replica 0's: the engine then needs replica 0's workers only, plus,
 * for every other replica of every stage, a worker that joins the stage's ring all-reduce
 * (its ALLREDUCE actions alone, on that replica's device), so that the ring still runs over
 * the r devices and the real links; the IR is the plan's cut to two replicas (replica 0's
 * lists are then the full IR's, under other microbatch numbers). The ring of a group starts when its last member
 * registers: the real replica at its last backward, as in the full run, since a reduced
 * member joins as soon as its previous all-reduce ends, and one reduced worker per stage
 * and replica keeps a device's chunks from waiting on each other. docs/sim.md, "Folded
 * data parallelism". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine_impl.h"
#include "sim/sim.h"

static int fold_why(char *why, size_t n, const char *msg)
{
    if (why && n) snprintf(why, n, "%s", msg);
    return 0;
}

static uint64_t link_key(int a, int b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

/* 1 when the path a -> b prices as c -> d (both absent, or the same rate and latency). */
static int same_path(const sim_net *net, int a, int b, int c, int d)
{
    double r1, l1, r2, l2;
    int L1 = sim_net_path(net, a, b, &r1, &l1), L2 = sim_net_path(net, c, d, &r2, &l2);
    return (L1 < 0) == (L2 < 0) && (L1 < 0 || (r1 == r2 && l1 == l2));
}

/* A link (or an egress port) and the lanes its widest use takes (sim_net_ring_widths). */
typedef struct wkey {
    uint64_t k;
    int w;
} wkey;

static int cmp_wkey(const void *a, const void *b)
{
    const wkey *x = a, *y = b;
    return x->k != y->k ? (x->k > y->k) - (x->k < y->k) : (x->w < y->w) - (x->w > y->w);
}

/* Sums the lanes the links leaving through each egress port take (ports as
 * eng_path_ports names them) and returns 1 when none has more than its lanes
 * (sim_net_lanes), so that no transfer ever waits for a port; keys are the distinct
 * links with their widest use. -1 when out of memory. */
static int ports_free(const sim_net *net, const wkey *keys, int n)
{
    wkey *pk = malloc(((size_t)n * CLUSTER_MAX_LEVELS + 1) * sizeof *pk);
    if (!pk) return -1;
    int np = 0;
    for (int i = 0; i < n; i++) {
        int a = (int)(keys[i].k >> 32), b = (int)(uint32_t)keys[i].k;
        double rate, lat;
        int L = sim_net_path(net, a, b, &rate, &lat), lv[CLUSTER_MAX_LEVELS];
        uint64_t grp[CLUSTER_MAX_LEVELS];
        int k = L < 0 ? 0 : eng_path_ports(net, a, L, lv, grp);
        for (int j = 0; j < k; j++) pk[np++] = (wkey){(uint64_t)lv[j] << 56 | grp[j], keys[i].w};
    }
    qsort(pk, (size_t)np, sizeof *pk, cmp_wkey);
    int ok = 1;
    for (int i = 0; i < np && ok;) {
        long long used = 0;
        int j = i;
        while (j < np && pk[j].k == pk[i].k) used += pk[j++].w;
        if (used > sim_net_lanes(net, (int)(pk[i].k >> 56))) ok = 0;
        i = j;
    }
    free(pk);
    return ok;
}

int sim_fold_check(const plan *pl, const schedule *s, const sim_options *opt, int mixed_rings,
                   char *why, size_t n)
{
    if (opt->sched)
        return fold_why(why, n, "a prebuilt IR is given");
    if (opt->straggler_device >= 0 && opt->straggler_factor != 1)
        return fold_why(why, n, "a straggler slows one replica");
    int r = pl->stages[0].replicas, S = pl->nstages;
    if (r < 2) return fold_why(why, n, "one replica: nothing to fold");
    if (pl->cp > 1) /* its ring runs over the dp x cp members (sim_model.ring_members) */
        return fold_why(why, n, "context parallelism: the ring runs over the replicas' every "
                        "context rank");
    if (s->nstages != S) return fold_why(why, n, "the IR is not the plan's");
    for (int st = 0; st < S; st++)
        if (pl->stages[st].replicas != r || s->replicas[st] != s->replicas[0])
            return fold_why(why, n, "the stages have different replica counts");
    const cluster *c = pl->clus;
    sim_net net;
    sim_net_from_cluster(&net, c, opt->bandwidth_Bps);
    int *wd = malloc(((size_t)r + 1) * sizeof *wd); /* a stage's ring hops' widths */
    if (!wd) return fold_why(why, n, "out of memory");
    const char *no = NULL;
    for (int st = 0; st < S && !no; st++) {
        const int *dv = pl->stages[st].devices;
        const device_type *t0 = cluster_device_type(c, dv[0]);
        if (!t0 || t0->cores > 0) {
            no = "the devices share a server's CPU cores";
            break;
        }
        if (sim_net_ring_widths(&net, dv, r, wd)) {
            no = "out of memory";
            break;
        }
        int twin_hop = 0, mixed = 0; /* a hop of another replica priced as replica 0's
                                        (its time stands for replica 0's in unfold_report) */
        for (int j = 1; j < r && !no; j++) {
            if (cluster_device_type(c, dv[j]) != t0)
                no = "the replicas run on different device types";
            int same = same_path(&net, dv[j], dv[(j + 1) % r], dv[0], dv[1]) &&
                       wd[j] == wd[0];
            twin_hop |= same;
            mixed |= !same;
        }
        if (!no && mixed && !mixed_rings)
            no = "the ring's hops cross different levels or run at different widths (each "
                 "device's comm_s would agree to rounding only)";
        if (!no && !twin_hop)
            no = "no other replica's ring hop crosses the levels replica 0's does";
    }
    if (no) {
        free(wd);
        return fold_why(why, n, no);
    }
    /* the stage pairs replica 0 sends between (each SEND's stage and peer stage) */
    int np = 0, ok = 1;
    int *pa = malloc(((size_t)2 * S + 1) * sizeof *pa), *pb = malloc(((size_t)2 * S + 1) *
                                                                         sizeof *pb);
    for (int st = 0; st < S && ok && pa && pb; st++) {
        int w = s->stage_workers[s->stage_first[st]];
        for (int i = 0; i < s->len[w] && ok; i++) {
            const action *a = &s->acts[w][i];
            if ((a->kind != ACT_SEND_F && a->kind != ACT_SEND_B) || a->stage != st) continue;
            if (a->peer_stage < 0 || a->peer_stage >= S ||
                s->stage_workers[s->stage_first[a->peer_stage]] != a->peer) {
                ok = fold_why(why, n, "a replica sends to another replica");
                break;
            }
            int k = 0;
            while (k < np && !(pa[k] == st && pb[k] == a->peer_stage)) k++;
            if (k < np) continue;
            if (np == 2 * S) {
                ok = fold_why(why, n, "a stage sends to more than two stages");
                break;
            }
            pa[np] = st, pb[np++] = a->peer_stage;
        }
    }
    /* every link the full run uses: each replica's pipeline sends, each stage's ring */
    int nk = 0;
    wkey *keys = malloc(((size_t)(S + np) * r + 1) * sizeof *keys);
    if (!pa || !pb || !keys) {
        free(pa), free(pb), free(keys), free(wd);
        return fold_why(why, n, "out of memory");
    }
    for (int st = 0; st < S && ok; st++) {
        const int *dv = pl->stages[st].devices;
        if (sim_net_ring_widths(&net, dv, r, wd))
            ok = fold_why(why, n, "out of memory");
        for (int j = 0; j < r && ok; j++)
            if (dv[j] != dv[(j + 1) % r])
                keys[nk++] = (wkey){link_key(dv[j], dv[(j + 1) % r]), wd[j]};
    }
    free(wd);
    for (int k = 0; k < np && ok; k++) {
        const int *da = pl->stages[pa[k]].devices, *db = pl->stages[pb[k]].devices;
        for (int j = 0; j < r && ok; j++) {
            if (!same_path(&net, da[j], db[j], da[0], db[0]))
                ok = fold_why(why, n, "the replicas' pipeline sends cross different levels");
            else if (da[j] != db[j])
                keys[nk++] = (wkey){link_key(da[j], db[j]), 1};
        }
    }
    free(pa), free(pb);
    if (ok) {
        qsort(keys, (size_t)nk, sizeof *keys, cmp_wkey);
        int u = 0;  /* each link once, with its widest use (sorted first) */
        for (int k = 0; k < nk; k++)
            if (!u || keys[k].k != keys[u - 1].k) keys[u++] = keys[k];
        int pf = ports_free(&net, keys, u);
        if (pf <= 0)
            ok = fold_why(why, n, pf < 0 ? "out of memory" : "an egress port has more links "
                          "than lanes: the replicas' transfers would queue");
    }
    free(keys);
    return ok;
}

/* The folded IR for pl (r replicas per stage, sim_fold_check passed) from s, the IR of pl
 * cut to two replicas per stage (fold_plan): s's replica-0 workers with their lists (peers
 * renumbered), then for each stage and each other replica of pl a worker holding the
 * stage's ALLREDUCE actions of replica 0's list, on that replica's device. NULL when out
 * of memory. */
static schedule *fold_schedule(const schedule *s, const plan *pl)
{
    int S = s->nstages, r = pl->stages[0].replicas, n0 = 0;
    int *id = malloc(((size_t)s->nworkers + 1) * sizeof *id);
    schedule *f = calloc(1, sizeof *f);
    if (!id || !f) goto oom;
    for (int w = 0; w < s->nworkers; w++) id[w] = -1;
    for (int st = 0; st < S; st++) {
        int w = s->stage_workers[s->stage_first[st]];
        if (id[w] < 0) id[w] = n0++;
    }
    int nw = n0 + S * (r - 1);
    *f = (schedule){.kind = s->kind, .nworkers = nw, .nstages = S, .chunks = s->chunks,
                    .microbatches = s->microbatches, .iterations = s->iterations};
    f->replicas = malloc((size_t)S * sizeof *f->replicas);
    f->stage_first = malloc((size_t)S * sizeof *f->stage_first);
    f->stage_workers = malloc((size_t)S * r * sizeof *f->stage_workers);
    f->len = calloc((size_t)nw, sizeof *f->len);
    f->acts = calloc((size_t)nw, sizeof *f->acts);
    f->worker_device = malloc((size_t)nw * sizeof *f->worker_device);
    f->worker_stage = malloc((size_t)nw * sizeof *f->worker_stage);
    if (!f->replicas || !f->stage_first || !f->stage_workers || !f->len || !f->acts ||
        !f->worker_device || !f->worker_stage)
        goto oom;
    for (int w = 0; w < s->nworkers; w++) {
        if (id[w] < 0) continue;
        int k = id[w];
        f->len[k] = s->len[w];
        f->acts[k] = malloc(((size_t)s->len[w] + 1) * sizeof *f->acts[k]);
        if (!f->acts[k]) goto oom;
        for (int i = 0; i < s->len[w]; i++) {
            action a = s->acts[w][i];
            if (a.peer >= 0) a.peer = id[a.peer];
            f->acts[k][i] = a;
        }
        f->worker_device[k] = s->worker_device[w];
        f->worker_stage[k] = s->worker_stage ? s->worker_stage[w] : -2;
    }
    for (int st = 0; st < S; st++) {
        f->replicas[st] = r;
        f->stage_first[st] = st * r;
        f->stage_workers[st * r] = id[s->stage_workers[s->stage_first[st]]];
        int w = s->stage_workers[s->stage_first[st]];
        for (int j = 1; j < r; j++) {
            int k = n0 + st * (r - 1) + j - 1;
            int cnt = 0;
            for (int i = 0; i < s->len[w]; i++)
                cnt += s->acts[w][i].kind == ACT_ALLREDUCE && s->acts[w][i].stage == st;
            f->acts[k] = malloc(((size_t)cnt + 1) * sizeof *f->acts[k]);
            if (!f->acts[k]) goto oom;
            /* each ALLREDUCE names the first microbatch of the iteration its worker was
             * in (that of its last computation): the engine counts an action of a
             * microbatch in that microbatch's iteration, and the reduced worker computes
             * nothing to tell it */
            int it = 0, nmb = s->microbatches > 0 ? s->microbatches : 1, lo = 0, lo_it = 0;
            for (int i = 0; i < s->len[w]; i++) {
                action a = s->acts[w][i];
                if (a.kind <= ACT_W && a.microbatch >= 0)
                    it = mb_iteration(a.microbatch, nmb, s->iterations, &lo, &lo_it, it);
                if (a.kind != ACT_ALLREDUCE || a.stage != st) continue;
                a.microbatch = it * nmb;
                f->acts[k][f->len[k]++] = a;
            }
            f->stage_workers[st * r + j] = k;
            f->worker_device[k] = pl->stages[st].devices[j];
            f->worker_stage[k] = st;
        }
    }
    free(id);
    return f;
oom:
    free(id);
    schedule_free(f);
    return NULL;
}

static int cmp_dev(const void *a, const void *b)
{
    const sim_device_report *x = a, *y = b;
    return (x->device > y->device) - (x->device < y->device);
}

static int cmp_link(const void *a, const void *b)
{
    const sim_link_report *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

/* Turns the folded run's report into the full run's: every replica's devices and
 * pipeline links as replica 0's, the headline figures recomputed as sim_run computes
 * them. 0 or -1 when out of memory. */
static int unfold_report(sim_report *rep, const plan *pl, int microbatches)
{
    const cluster *c = pl->clus;
    int S = pl->nstages, r = pl->stages[0].replicas, nd = c->ndevices;
    int *rank0 = malloc(((size_t)nd + 1) * sizeof *rank0); /* device -> replica-0 twin */
    int *repl = malloc(((size_t)nd + 1) * sizeof *repl);   /* device -> replica, -1 unused */
    sim_device_report *dv = malloc(((size_t)S * r + 1) * sizeof *dv);
    sim_link_report *lk = NULL;
    if (!rank0 || !repl || !dv) goto oom;
    for (int d = 0; d < nd; d++) repl[d] = -1, rank0[d] = -1;
    for (int st = 0; st < S; st++)
        for (int j = 0; j < r; j++) {
            int d = pl->stages[st].devices[j];
            repl[d] = j;
            rank0[d] = pl->stages[st].devices[0];
        }
    /* replica 0's entries, by device (the folded run has one per replica-0 device) */
    int *at = malloc(((size_t)nd + 1) * sizeof *at);
    if (!at) goto oom;
    for (int d = 0; d < nd; d++) at[d] = -1;
    for (int i = 0; i < rep->ndevices; i++) {
        int d = rep->devices[i].device;
        if (d >= 0 && d < nd && repl[d] == 0) at[d] = i;
    }
    /* comm_s: replica 0's pipeline sends (alike on every replica) plus the device's own
     * ring hops. A reduced worker holds one stage's hops of its replica; replica 0's hops
     * of stage st take the time of a reduced worker's whose hop crosses the same levels
     * (sim_fold_check found one) */
    sim_net net;
    sim_net_from_cluster(&net, c, rep->whatif.bandwidth_Bps);
    double *ring = calloc((size_t)nd + 1, sizeof *ring), *ring0 = calloc((size_t)S + 1,
                                                                        sizeof *ring0);
    char *has0 = calloc((size_t)S + 1, 1);
    int *wd = malloc(((size_t)S * r + 1) * sizeof *wd); /* each stage's ring hops' widths */
    int wfail = 0;
    for (int st = 0; wd && st < S; st++)
        wfail |= sim_net_ring_widths(&net, pl->stages[st].devices, r, wd + (size_t)st * r);
    if (!ring || !ring0 || !has0 || !wd || wfail) {
        free(at), free(ring), free(ring0), free(has0), free(wd);
        goto oom;
    }
    for (int i = 0; i < rep->ndevices; i++) {
        const sim_device_report *x = &rep->devices[i];
        int d = x->device, st = x->nstages == 1 ? x->stages[0] : -1;
        if (d < 0 || d >= nd || repl[d] < 1 || st < 0) continue;
        ring[d] += x->comm_s;
        const int *sd = pl->stages[st].devices;
        int j = repl[d];
        if (!has0[st] && same_path(&net, sd[j], sd[(j + 1) % r], sd[0], sd[1]) &&
            wd[(size_t)st * r + j] == wd[(size_t)st * r])
            ring0[st] = x->comm_s, has0[st] = 1;
    }
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (repl[d] < 0 || at[rank0[d]] < 0) continue;
        dv[n] = rep->devices[at[rank0[d]]];
        double own0 = 0;
        for (int k = 0; k < dv[n].nstages && k < SIM_DEVICE_STAGES; k++)
            own0 += ring0[dv[n].stages[k]];
        if (repl[d] > 0 && ring[d] != own0) /* else replica 0's, bit for bit */
            dv[n].comm_s = dv[n].comm_s - own0 + ring[d];
        dv[n].device = d;
        dv[n].worker = n;
        n++;
    }
    free(at), free(ring), free(ring0), free(has0), free(wd);
    qsort(dv, (size_t)n, sizeof *dv, cmp_dev);
    /* the links: replica 0's pipeline links copied to the other replicas */
    int extra = 0;
    for (int i = 0; i < rep->nlinks; i++)
        extra += repl[rep->links[i].src] == 0 && repl[rep->links[i].dst] == 0;
    lk = malloc(((size_t)rep->nlinks + (size_t)extra * (r - 1) + 1) * sizeof *lk);
    if (!lk) goto oom;
    int nl = 0;
    for (int i = 0; i < rep->nlinks; i++) {
        const sim_link_report *l = &rep->links[i];
        lk[nl++] = *l;
        if (repl[l->src] != 0 || repl[l->dst] != 0) continue;
        int sa = -1, sb = -1; /* the stages of its ends, to name their replicas */
        for (int st = 0; st < S && (sa < 0 || sb < 0); st++) {
            if (pl->stages[st].devices[0] == l->src) sa = st;
            if (pl->stages[st].devices[0] == l->dst) sb = st;
        }
        for (int j = 1; j < r && sa >= 0 && sb >= 0; j++) {
            lk[nl] = *l;
            lk[nl].src = pl->stages[sa].devices[j];
            lk[nl].dst = pl->stages[sb].devices[j];
            nl++;
        }
    }
    qsort(lk, (size_t)nl, sizeof *lk, cmp_link);
    free(rep->devices);
    free(rep->links);
    rep->devices = dv;
    rep->ndevices = n;
    rep->links = lk;
    rep->nlinks = nl;
    /* the figures sim_run derives from the devices and the microbatches */
    double busy_sum = 0;
    rep->fits = 1;
    rep->peak_memory_bytes = 0;
    for (int i = 0; i < n; i++) {
        if (!dv[i].mem.fits) rep->fits = 0;
        if (dv[i].mem.total > rep->peak_memory_bytes) rep->peak_memory_bytes = dv[i].mem.total;
        busy_sum += dv[i].busy_s;
    }
    double b = rep->iteration_s > 0 ? 1 - busy_sum / (n * rep->iteration_s) : 0;
    rep->bubble_fraction = b < 0 ? 0 : b > 1 ? 1 : b;
    rep->microbatches = microbatches;
    rep->samples_per_s = rep->iteration_s > 0
        ? (double)pl->microbatch_size * microbatches / rep->iteration_s : 0;
    rep->tokens_per_s = rep->samples_per_s * (double)rep->tokens_per_sample;
    free(rank0);
    free(repl);
    return 0;
oom:
    free(rank0);
    free(repl);
    free(dv);
    free(lk);
    return -1;
}

/* pl cut to the first two replicas of every stage, with 2 / r of its microbatches: each
 * replica takes every r-th microbatch (1F1B-RR, Megatron-LM's data parallelism), so
 * replica 0 of the cut plan runs the actions of pl's replica 0 under other microbatch
 * numbers, in the same iterations. The stages are new (free them), the rest is pl's. */
static plan fold_plan(const plan *pl, plan_stage **stages)
{
    plan v = *pl;
    int r = pl->stages[0].replicas;
    *stages = malloc((size_t)pl->nstages * sizeof **stages);
    if (!*stages) return v;
    for (int st = 0; st < pl->nstages; st++) {
        (*stages)[st] = pl->stages[st];
        (*stages)[st].replicas = 2;
    }
    v.stages = *stages;
    v.microbatches = pl->microbatches / r * 2;
    return v;
}

/* The replica-j twin of replica-0 device d (tw: device -> a stage on it), -1 when d is
 * not a replica-0 device. */
static int twin(const plan *pl, const int *tw, const int *repl, int d, int j)
{
    return d >= 0 && d < pl->clus->ndevices && repl[d] == 0 ? pl->stages[tw[d]].devices[j]
                                                            : -1;
}

/* Copies the folded run's replica-0 device and pipeline-link tracks to every replica (the
 * reduced workers' own device tracks take their twin's events, their memory samples are
 * replaced by their twin's), and renames the microbatches of the two-replica IR (replica
 * 0's g' = 2 k) to the full IR's (replica j's k-th: k r + j). 0 or -1 when out of memory. */
static int unfold_timeline(timeline *tl, const plan *pl, const sim_net *net)
{
    int r = pl->stages[0].replicas, nd = pl->clus->ndevices, nt0 = tl->ntracks;
    size_t ne0 = tl->n, nc0 = tl->ncounters;
    int *repl = malloc(((size_t)nd + 1) * sizeof *repl), *tw = malloc(((size_t)nd + 1) * sizeof *tw);
    int *to = malloc(((size_t)nt0 * r + 1) * sizeof *to);
    tl_counter *kept = malloc((nc0 + 1) * sizeof *kept);
    int rc = -1;
    if (!repl || !tw || !to || !kept) goto done;
    for (int d = 0; d < nd; d++) repl[d] = -1;
    for (int st = 0; st < pl->nstages; st++)
        for (int j = 0; j < r; j++) {
            repl[pl->stages[st].devices[j]] = j;
            tw[pl->stages[st].devices[j]] = st;
        }
    for (int k = 0; k < nt0; k++) {
        tl_track t = tl->tracks[k];
        for (int j = 0; j < r; j++) to[(size_t)k * r + j] = j ? -1 : k;
        int link = t.kind == TL_TRACK_LINK;
        if ((t.kind != TL_TRACK_DEVICE && !link) || twin(pl, tw, repl, t.device, 0) < 0 ||
            (link && twin(pl, tw, repl, t.peer, 0) < 0))
            continue;
        for (int j = 1; j < r; j++) {
            int a = twin(pl, tw, repl, t.device, j), b = link ? twin(pl, tw, repl, t.peer, j) : -1;
            char nm[96];
            if (link) {
                double rate, lat;
                snprintf(nm, sizeof nm, "link %d->%d (level %d)", a, b,
                         sim_net_path(net, a, b, &rate, &lat));
            } else {
                const device_type *ty = cluster_device_type(pl->clus, a);
                snprintf(nm, sizeof nm, "device %d (%s)", a, ty ? ty->name : "?");
            }
            int nk = timeline_track(tl, t.kind, a, b, nm);
            if (nk < 0) goto done;
            tl->tracks[nk].peak_bytes = tl->tracks[k].peak_bytes;
            to[(size_t)k * r + j] = nk;
        }
    }
    for (size_t i = 0; i < ne0; i++) {
        tl_event e = tl->ev[i];
        int copies = e.track >= 0 && e.track < nt0 && to[(size_t)e.track * r + 1] >= 0;
        if (e.microbatch >= 0 && copies) tl->ev[i].microbatch = e.microbatch / 2 * r;
        for (int j = 1; j < r && copies; j++) {
            tl_event c = e;
            c.track = to[(size_t)e.track * r + j];
            if (c.microbatch >= 0) c.microbatch = e.microbatch / 2 * r + j;
            if (timeline_add(tl, &c)) goto done;
        }
    }
    /* memory samples: the reduced workers' are dropped, replica 0's copied */
    size_t nk = 0;
    for (size_t i = 0; i < nc0; i++) {
        const tl_counter *c = &tl->counters[i];
        const tl_track *t = &tl->tracks[c->track];
        if (!(t->kind == TL_TRACK_DEVICE && t->device >= 0 && t->device < nd &&
              repl[t->device] > 0))
            kept[nk++] = *c;
    }
    tl->ncounters = 0;
    for (size_t i = 0; i < nk; i++) {
        const tl_counter *c = &kept[i];
        if (timeline_counter_add(tl, c->track, c->t_s, c->bytes)) goto done;
        for (int j = 1; j < r && c->track < nt0 && to[(size_t)c->track * r + 1] >= 0; j++)
            if (timeline_counter_add(tl, to[(size_t)c->track * r + j], c->t_s, c->bytes))
                goto done;
    }
    rc = 0;
done:
    free(repl), free(tw), free(to), free(kept);
    return rc;
}

sim_report *sim_run_folded(const plan *pl, const sim_options *opt, int mixed_rings,
                           plumb_err *err)
{
    sim_options dflt;
    if (!opt) {
        sim_options_init(&dflt);
        opt = &dflt;
    }
    if (!pl || !pl->prof || !pl->clus || pl->nstages < 1 || pl->stages[0].replicas < 2 ||
        opt->sched || opt->straggler_device >= 0 ||
        opt->schedule < -1 || opt->schedule >= SCHED_NKINDS || opt->microbatches < 0 ||
        opt->iterations < 0)
        return sim_run(pl, opt, err);
    plan view; /* as sim_run's: every what-if put in, only scalar fields change (the cut
                * plan's schedule, zb-v's and dualpipev's order included, reads it) */
    sim_options_view(pl, opt, &view);
    for (int st = 0; st < pl->nstages; st++) /* the cut plan takes two of each */
        if (pl->stages[st].replicas != pl->stages[0].replicas || !pl->stages[st].devices)
            return sim_run(pl, opt, err);
    if (view.microbatches % pl->stages[0].replicas)
        return sim_run(pl, opt, err); /* the replicas take unequal shares */
    plan_stage *cut_stages;
    plan cut = fold_plan(&view, &cut_stages);
    if (!cut_stages) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    int iters = opt->iterations > 0 ? opt->iterations : SIM_DEFAULT_ITERATIONS;
    int requested = iters;
    sim_report *rep = NULL;
    if (sim_work_check(&cut, 0, iters, SIM_MAX_ACTIONS,
                       opt->microbatches > 0 ? "--microbatches" : "microbatches", err)) {
        free(cut_stages);
        return NULL;
    }
    /* the rounds of sim_run: as many iterations as a steady window needs, doubled until the
     * window's gaps settle */
    for (int round = 0;; round++) {
        schedule *own = schedule_from_plan(&cut, iters, err);
        if (!own) {
            free(cut_stages);
            return NULL;
        }
        int k0, k1, need = sim_steady_window(own, &k0, &k1);
        if (need < 0) {
            schedule_free(own);
            free(cut_stages);
            err_set(err, NULL, NULL, "out of memory");
            return NULL;
        }
        if (need > iters && round < 8) {
            schedule_free(own);
            iters = need;
            continue;
        }
        if (!sim_fold_check(&view, own, opt, mixed_rings, NULL, 0)) {
            schedule_free(own);
            free(cut_stages);
            return sim_run(pl, opt, err);
        }
        schedule *f = fold_schedule(own, &view);
        schedule_free(own);
        if (!f) {
            free(cut_stages);
            err_set(err, NULL, NULL, "out of memory");
            return NULL;
        }
        sim_options o = *opt;
        o.schedule = -1;
        o.microbatches = 0;
        o.iterations = iters;
        o.sched = f;
        rep = sim_run(&view, &o, err);
        schedule_free(f);
        if (!rep) {
            free(cut_stages);
            return NULL;
        }
        int next = 2 * iters < SIM_MAX_ITERATIONS ? 2 * iters : SIM_MAX_ITERATIONS;
        if (rep->settled || !rep->steady || iters >= SIM_MAX_ITERATIONS ||
            sim_actions_estimate(&cut, 0, next) > SIM_MAX_ACTIONS) /* the work budget */
            break;
        sim_report_free(rep);
        rep = NULL;
        iters = next;
    }
    free(cut_stages);
    rep->iterations_requested = requested;
    rep->whatif = *opt;
    rep->whatif.sched = NULL;
    rep->whatif.timeline = 0;
    sim_net net;
    sim_net_from_cluster(&net, pl->clus, opt->bandwidth_Bps);
    if (unfold_report(rep, &view, view.microbatches) ||
        (rep->tl && unfold_timeline(rep->tl, &view, &net))) {
        sim_report_free(rep);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    return rep;
}
