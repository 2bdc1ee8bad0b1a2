/* native_part_memory.c: the memory of each device of a complete partition
 * (nm_part_memory, nm_price_exact), its counts (weight versions, buffer slots, staged
 * gradients) read from the schedule the simulator would run for the plan: generated once
 * per partition and kept in the model's memo (NM_MEMO entries), as the simulator lays out
 * the plan's; chunked kinds always, one-stage-per-rank kinds where the closed form's
 * counts may differ (docs/planner-native.md, section 3). */
#include "planner/native_impl.h"

#include "core/schedule.h"

#include <stdlib.h>
#include <string.h>

/* A schedule's structure as its memory depends on it: the worker and buffer slots of each
 * stage, and how many gradients each pair can have in flight; for one-stage-per-rank
 * kinds also each stage's weight versions and staged gradients (its first replica's). The
 * schedule is laid out as the simulator lays out the plan's (schedule_from_plan: with the
 * stages' costs, which move where the receives land, so the slots depend on the
 * partition). */
struct nm_sched_memo {
    sched_kind kind;
    int p, nst, M;    /* p == 0: unused; -1: the schedule could not be built */
    int rc;           /* recomputation (its forward adds to the costs) */
    int *b0;          /* [nst + 1] the partition's block boundaries */
    int *ur;          /* [2 nst] each stage's first unit and units */
    int *worker;      /* [nst] (its first replica's) */
    int *slots;       /* [nst] schedule_slots of the stage on its worker */
    int *bound;       /* chunked: [p x p] schedule_send_bound of gradients */
    int *ver;         /* one stage per rank: [nst] schedule_inflight's versions */
    int *staged;      /* one stage per rank: [2 nworkers] per replica (the stages' in
                         turn) its slots and the gradients its worker can have staged
                         (schedule_send_bound summed over its peers) */
    schedule *sc;     /* chunked: the schedule itself (its price replays it, native_ir.c):
                         one iteration, NM_IR_ITERATIONS for the split-backward kinds; may
                         be NULL (not built) */
};

typedef struct nm_sched_memo nm_sched_memo;

static void memo_clear(nm_sched_memo *e)
{
    free(e->b0);
    free(e->ur);
    free(e->worker);
    free(e->slots);
    free(e->bound);
    free(e->ver);
    free(e->staged);
    schedule_free(e->sc);
    memset(e, 0, sizeof *e);
}

/* 1 when memo entry e is the schedule of partition pt (p ranks) under s. */
static int memo_is(const nm_sched_memo *e, const nm_setting *s, const nm_part *pt, int p)
{
    if (!e->p || e->kind != s->kind || abs(e->p) != p || e->nst != pt->nst || e->M != s->M ||
        e->rc != s->recompute)
        return 0;
    for (int i = 0; i < pt->nst; i++)
        if (e->b0[i] != pt->st[i].b0 || e->ur[2 * i] != pt->st[i].u ||
            e->ur[2 * i + 1] != pt->st[i].r)
            return 0;
    return e->b0[pt->nst] == pt->st[pt->nst - 1].b1;
}

/* Iterations of the schedule a one-stage-per-rank plan's counts are read from: as the
 * planner's scoring simulation lays out the flushing kinds (one is not enough: a stage's
 * staged gradients and slots can peak across an iteration's boundary). */
#define NM_IR_ITERATIONS 3

/* The schedule of partition pt (p ranks) under s: generated as schedule_from_plan
 * generates nm_plan's plan of it (the stages' costs from schedule_plan_costs over a view
 * of that plan: the layers and devices, nothing copied); chunked, `iterations`
 * iterations, else NM_IR_ITERATIONS with the stages' replicas. NULL with err. */
static schedule *memo_schedule(const nm_model *m, const nm_setting *s, const nm_part *pt,
                               int p, int iterations, plumb_err *err)
{
    plan_stage st[NM_MAX_STAGES];
    plan view;
    const int chunked = sched_kind_chunked(s->kind);
    memset(&view, 0, sizeof view);
    view.prof = (profile *)m->p; /* read only: schedule_plan_costs reads it */
    view.clus = (cluster *)m->c;
    view.nstages = pt->nst;
    view.stages = st;
    view.recompute = s->recompute;
    view.schedule = s->kind;
    view.chunks = chunked ? pt->nst / p : 1;
    view.microbatches = s->M;
    for (int i = 0; i < pt->nst; i++) {
        st[i] = (plan_stage){.first_layer = m->bfirst[pt->st[i].b0],
                             .last_layer = m->bfirst[pt->st[i].b1] - 1,
                             .replicas = chunked ? 1 : pt->st[i].r * m->g,
                             .devices = &m->order[pt->st[i].u * m->g]};
    }
    if (!chunked) return schedule_from_plan(&view, NM_IR_ITERATIONS, err);
    double cost[3 * NM_MAX_STAGES];
    sched_spec sp = {s->kind, p, pt->nst, pt->nst / p, s->M, iterations, NULL, NULL};
    return schedule_generate_costed(&sp, schedule_plan_costs(&view, cost) ? NULL : cost, err);
}

/* Fills e's counts from its schedule sc: per stage its first replica's worker and slots;
 * chunked, the gradients each pair of ranks can have in flight (e->bound, p x p); one
 * stage per rank, the stage's versions (schedule_inflight) and per replica its slots and
 * the gradients its worker can have staged toward all its peers. 0, or -1 (out of memory,
 * or the IR refused). */
static int memo_fill(nm_sched_memo *e, const schedule *sc, int p)
{
    plumb_err err;
    const int nst = e->nst, nw = sc->nworkers;
    e->worker = malloc((size_t)nst * sizeof *e->worker);
    e->slots = malloc((size_t)nst * sizeof *e->slots);
    if (!e->worker || !e->slots) return -1;
    for (int i = 0; i < nst; i++) {
        e->worker[i] = sc->stage_workers[sc->stage_first[i]];
        e->slots[i] = schedule_slots(sc, e->worker[i], i);
    }
    if (sched_kind_chunked(e->kind)) {
        e->bound = malloc((size_t)p * p * sizeof *e->bound);
        return e->bound && !schedule_send_bound(sc, 1u << ACT_SEND_B, e->bound, &err) ? 0 : -1;
    }
    int *bound = malloc((size_t)nw * nw * sizeof *bound);
    e->ver = malloc((size_t)nst * sizeof *e->ver);
    e->staged = calloc(2 * (size_t)nw, sizeof *e->staged);
    /* one version wherever the kind keeps one (schedule_inflight's replay is skipped) */
    const int one = sched_traits_of(e->kind)->versions == 1;
    for (int i = 0; one && e->ver && i < nst; i++) e->ver[i] = 1;
    int rc = !bound || !e->ver || !e->staged ||
             schedule_send_bound(sc, 1u << ACT_SEND_B, bound, &err) ||
             (!one && schedule_inflight(sc, NULL, e->ver, &err));
    for (int i = 0, q = 0; i < nst && !rc; i++)
        for (int j = 0; j < sc->replicas[i] && q < nw; j++, q++) {
            const int w = sc->stage_workers[sc->stage_first[i] + j];
            e->staged[2 * q] = schedule_slots(sc, w, i);
            for (int to = 0; to < nw; to++) e->staged[2 * q + 1] += bound[w * nw + to];
        }
    free(bound);
    return rc ? -1 : 0;
}

/* The memo of partition pt (p ranks: the stages when one per rank) under s in m, built on
 * first use (the oldest entry makes room). NULL when the schedule cannot be built or
 * memory runs out. */
static const nm_sched_memo *memo_get(const nm_model *m, const nm_setting *s, const nm_part *pt,
                                     int p)
{
    if (!m->memo || s->M < 1) return NULL;
    const int nst = pt->nst;
    int slot = 0;
    for (int i = 0; i < NM_MEMO; i++) {
        nm_sched_memo *e = &m->memo[i];
        if (memo_is(e, s, pt, p)) return e->p > 0 ? e : NULL;
        if (!e->p) slot = i;
    }
    if (m->memo[slot].p) { /* full: shift out the oldest */
        memo_clear(&m->memo[0]);
        memmove(&m->memo[0], &m->memo[1], (NM_MEMO - 1) * sizeof m->memo[0]);
        memset(&m->memo[NM_MEMO - 1], 0, sizeof m->memo[0]);
        slot = NM_MEMO - 1;
    }
    nm_sched_memo *e = &m->memo[slot];
    *e = (nm_sched_memo){.kind = s->kind, .p = -p, .nst = nst, .M = s->M, .rc = s->recompute};
    plumb_err err;
    e->b0 = malloc(((size_t)nst + 1) * sizeof *e->b0);
    e->ur = malloc(2 * (size_t)nst * sizeof *e->ur);
    if (!e->b0 || !e->ur) {
        memo_clear(e);
        return NULL; /* the entry stays unused */
    }
    for (int i = 0; i < nst; i++) {
        e->b0[i] = pt->st[i].b0;
        e->ur[2 * i] = pt->st[i].u;
        e->ur[2 * i + 1] = pt->st[i].r;
    }
    e->b0[nst] = pt->st[nst - 1].b1;
    schedule *sc = memo_schedule(m, s, pt, p, 1, &err);
    int rc = !sc || memo_fill(e, sc, p);
    if (!rc && sched_kind_chunked(s->kind)) {
        /* kept for the price's replay; the split-backward kinds' iterations overlap (a
         * rank's next forwards run beside another's last weight gradients): theirs with
         * the simulator's scoring iterations, whose steady state the replay prices */
        if (sched_traits_of(s->kind)->split_backward) {
            schedule_free(sc);
            sc = memo_schedule(m, s, pt, p, NM_IR_ITERATIONS, &err);
        }
        e->sc = sc;
    } else {
        schedule_free(sc);
    }
    if (rc) {
        free(e->worker), free(e->slots), free(e->bound), free(e->ver), free(e->staged);
        e->worker = e->slots = e->bound = e->ver = e->staged = NULL;
        return NULL; /* remembered as unbuildable (p < 0) */
    }
    e->p = p;
    return e;
}

/* The memory of each rank of a chunked partition (out[pt->ranks]): per stage its terms
 * (nm_block_mem, one replica) with one weight version and its buffer slots (schedule_slots
 * of the generated schedule, each stage's own most, as the executor allocates them), and
 * per peer the staging of the gradients sent to it (schedule_send_bound x the largest:
 * stage i sends them to stage i - 1's worker), summed as the simulator sums them. When
 * the schedule cannot be built, the slots of rank r are its warmup count, 2 (p - r - 1) +
 * (v - 1) p + 1 at most M v, shared by its v stages, and no staging. */
/* Under ZeRO-1 (a Megatron-LM-style runtime, as the simulator models any zero 1 plan):
 * the most activation bytes worker w of sc holds at once, walking its list as the
 * simulator does (sim/memory.c's held_3d): each stage's stash from its F to the end of its
 * backward (its B, or W where the backward is split), an input received before its
 * forward (recv), and during a backward (B or I) its transient. */
static double held_walk(const schedule *sc, int w, const double *stash, const double *recv,
                        const double *transient)
{
    double held = 0, rcv = 0, peak = 0;
    int pending[NM_MAX_STAGES] = {0};
    for (int i = 0; i < sc->len[w]; i++) {
        const action *a = &sc->acts[w][i];
        const int st = a->stage;
        if (st < 0 || st >= sc->nstages || st >= NM_MAX_STAGES) continue;
        double now = held + rcv;
        switch (a->kind) {
        case ACT_RECV_F:
            pending[st]++;
            rcv += recv[st];
            now = held + rcv;
            break;
        case ACT_F:
            if (pending[st] > 0) pending[st]--, rcv -= recv[st];
            held += stash[st];
            now = held + rcv;
            break;
        case ACT_B:
            now = held + rcv + transient[st];
            held -= stash[st];
            break;
        case ACT_I: now = held + rcv + transient[st]; break;
        case ACT_W: held -= stash[st]; break;
        default: break;
        }
        if (now > peak) peak = now;
    }
    return peak;
}

void nm_chunked_memory(const nm_model *m, const nm_setting *s, const nm_part *pt,
                       sim_memory *out)
{
    const int p = pt->ranks > 0 ? pt->ranks : 1, v = pt->nst / p;
    const nm_sched_memo *e = p <= NM_MAX_UNITS ? memo_get(m, s, pt, p) : NULL;
    const double bscale = (double)s->mbsize / m->p->minibatch;
    sim_memory_acc acc[NM_MAX_UNITS];
    double big[NM_MAX_UNITS * NM_MAX_UNITS] = {0}; /* [p x p] largest gradient per pair */
    /* zero 1 or 16-bit (nm_nccl): the runtime's own activations, walked over the schedule
     * (held_walk) */
    const schedule *sc = nm_nccl(m, s) && e && e->sc && e->sc->nstages == pt->nst &&
                                 e->sc->nworkers == p && pt->nst <= NM_MAX_STAGES
                             ? e->sc
                             : NULL;
    double stash[NM_MAX_STAGES], recv[NM_MAX_STAGES], tr[NM_MAX_STAGES];
    int wk[NM_MAX_UNITS] = {0}; /* each rank's worker */
    memset(acc, 0, sizeof acc);
    for (int i = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        const int rk = sched_kind_rank(s->kind, i, p);
        sim_stage_mem t;
        nm_block_mem(m, s, st->b0, st->b1, 1, &t);
        if (sc) {
            stash[i] = t.stash, recv[i] = t.received, tr[i] = t.transient;
            wk[rk] = e->worker[i];
            sim_memory_add(&acc[rk], &t, 1, 0, 0, 1);
            continue;
        }
        double slots;
        if (e) {
            slots = e->slots[i];
            double in = st->b0 > 0 ? m->cut[st->b0] * bscale : 0;
            double *b = &big[e->worker[i] * p + e->worker[i > 0 ? i - 1 : 0]];
            if (i > 0 && in > *b) *b = in;
        } else {
            int k = (p - rk - 1) * 2 + (v - 1) * p + 1;
            if (k > s->M * v) k = s->M * v;
            slots = (double)k / v;
        }
        sim_memory_add(&acc[rk], &t, 1, slots, 0, 0);
    }
    for (int w = 0; w < p; w++) {
        if (sc) acc[w].mem.activations = held_walk(sc, wk[w], stash, recv, tr);
        double staging = 0;
        for (int to = 0; e && !nm_nccl(m, s) && to < p; to++) /* nccl: nm_mem_setting */
            staging += e->bound[w * p + to] * big[w * p + to];
        sim_memory_close(&acc[w], staging, m->rg[pt->st[w].u * (m->U + 1) + 1].cap, &out[w]);
    }
}

const schedule *nm_chunked_schedule(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    const int p = pt->ranks > 0 ? pt->ranks : 1;
    const nm_sched_memo *e = p <= NM_MAX_UNITS ? memo_get(m, s, pt, p) : NULL;
    return e ? e->sc : NULL;
}

/* The zero-bubble kinds' warmup of a pipeline: the largest ceil(devices from a stage on /
 * its replicas). */
int nm_pipeline_kzb(const nm_model *m, const nm_part *pt)
{
    int W = 0, kzb = 0;
    for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
    for (int i = 0, w = W; i < pt->nst; i++) {
        int k = nm_ceil_div(w, pt->st[i].r * m->g);
        if (k > kzb) kzb = k;
        w -= pt->st[i].r * m->g;
    }
    return kzb;
}

/* 1 when the closed form's counts may differ from the schedule's for pt under s (a
 * one-stage-per-rank kind): any pipeline of two stages or more. A replicated stage's
 * counts depend on the stages before it as well; zb-h1's on its deferred weight
 * gradients; and a straight pipeline's buffer slots on the stages' costs: the lowering
 * posts a RECV_F when the stage before produces the data, so a stage holds the one slot
 * more that the closed form counts for every receiver only when its input comes ahead of
 * its previous backward (alexnet on cluster-a-4x4, 12 one-device stages at random cuts:
 * the closed form a slot over on most devices, up to 46 % of a device's total). The
 * schedule owns that rule; the estimate of a complete plan reads it there, the dynamic
 * program keeps the closed form (a slot over where they differ). */
static int counts_need_ir(const nm_model *m, const nm_setting *s, const nm_part *pt)
{
    (void)m, (void)s;
    return pt->nst >= 2; /* one stage: data parallelism, nothing received or sent back */
}

/* The memory of the fullest replica (the first of the largest total) of stage i of the
 * complete partition pt under s, its replicas' counts from e (memo_fill; q0: its first
 * replica's index there), capacity cap: per replica the stage's versions, its slots and
 * staged gradients and its all-reduce scratch, as the simulator sums a device's. */
static void stage_memory_ir(const nm_model *m, const nm_setting *s, const nm_stage *st,
                            const nm_sched_memo *e, int i, int q0, double cap, sim_memory *out)
{
    const int n = st->r * m->g, nccl = nm_nccl(m, s);
    sim_stage_mem t;
    nm_block_mem(m, s, st->b0, st->b1, n, &t);
    const double in = st->b0 > 0 ? m->cut[st->b0] * ((double)s->mbsize / m->p->minibatch) : 0;
    for (int j = 0; j < n; j++) {
        const int *c = &e->staged[2 * (q0 + j)];
        sim_memory_acc a;
        sim_memory mm;
        memset(&a, 0, sizeof a);
        sim_memory_add(&a, &t, e->ver[i], c[0],
                       nccl ? 0 : sim_allreduce_scratch(t.gradients, n, j), 0);
        sim_memory_close(&a, nccl ? 0 : c[1] * in, cap, &mm); /* nccl: nm_mem_setting */
        if (j == 0 || mm.total > out->total) *out = mm;
    }
}

/* The memory of each stage's fullest device of the complete one-stage-per-rank partition
 * pt under s into out[pt->nst]: exact 1, with the schedule's counts (the plan's IR,
 * memo_get) where the closed form's may differ (counts_need_ir); else (exact 0, or the
 * schedule cannot be built) with the closed form's (nm_count_stage: the first replica, the
 * fullest replica's all-reduce scratch). */
void nm_pipeline_memory(const nm_model *m, const nm_setting *s, const nm_part *pt, int exact,
                        sim_memory *out)
{
    const nm_sched_memo *e = exact && counts_need_ir(m, s, pt) ? memo_get(m, s, pt, pt->nst)
                                                               : NULL;
    int W = 0, kzb = nm_pipeline_kzb(m, pt);
    for (int i = 0; i < pt->nst; i++) W += pt->st[i].r * m->g;
    for (int i = 0, q = 0; i < pt->nst; i++) {
        const nm_stage *st = &pt->st[i];
        const int n = st->r * m->g;
        const double cap = m->rg[st->u * (m->U + 1) + st->r].cap;
        if (e) {
            stage_memory_ir(m, s, st, e, i, q, cap, &out[i]);
        } else {
            nm_counts cn;
            nm_count_stage(s, st->b0, W, n, kzb, &cn);
            nm_stage_memory(m, s, st->b0, st->b1, n, &cn, cap, &out[i]);
        }
        W -= n;
        q += n;
    }
}

int nm_part_memory(const nm_model *m, const nm_setting *s, const nm_part *pt,
                   sim_memory *out)
{
    if (sched_kind_chunked(s->kind)) {
        nm_chunked_memory(m, s, pt, out);
        return pt->ranks;
    }
    nm_pipeline_memory(m, s, pt, 1, out);
    return pt->nst;
}

struct nm_sched_memo *nm_memo_new(void) { return calloc(NM_MEMO, sizeof(nm_sched_memo)); }

void nm_memo_free(struct nm_sched_memo *memo)
{
    for (int i = 0; memo && i < NM_MEMO; i++) memo_clear(&memo[i]);
    free(memo);
}
