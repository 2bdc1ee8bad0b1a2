/* schedule_impl.h: private helpers shared by core/schedule*.c (not part of plumb's API).
 * A schedule is built in passes over growable per-worker action lists: a generator lays
 * out the compute order (F, B, I, W), sched_add_allreduce adds the replicas' gradient
 * all-reduce, sched_lower adds the sends and receives, sched_place_steps adds the optimizer
 * steps and sched_assign_versions fills the weight versions (sched_finish's lowering does
 * the last two in its own write where no stage is replicated). */
#ifndef PLUMB_SCHEDULE_IMPL_H
#define PLUMB_SCHEDULE_IMPL_H

#include "schedule.h"
#include "schedule_traits.h"

typedef struct actvec {
    action *a;
    int n, cap;
} actvec;

/* Doubles v's room (16 when empty); 0 or -1 when out of memory (v unchanged). */
int actvec_grow(actvec *v);
/* Appends a; 0 or -1 when out of memory. Inline: the generators push every action. */
static inline int actvec_push(actvec *v, action a)
{
    if (v->n == v->cap && actvec_grow(v)) return -1;
    v->a[v->n++] = a;
    return 0;
}
void actvec_free(actvec *v);

/* An action with kind, stage and microbatch set and every other field -1. (Inline, as
 * the three below: the passes call them once per action.) */
static inline action act_make(int kind, int stage, int microbatch)
{
    action a = {.kind = kind, .stage = stage, .peer_stage = -1, .microbatch = microbatch,
                .version = -1, .peer = -1};
    return a;
}

/* 1 for F, B, I, W. */
static inline int act_is_compute(int k)
{
    return k == ACT_F || k == ACT_B || k == ACT_I || k == ACT_W;
}
/* 1 for the four send/receive kinds. */
static inline int act_is_comm(int k) { return k >= ACT_SEND_F && k <= ACT_RECV_B; }
/* 1 for SEND_F, SEND_B. */
static inline int act_is_send(int k) { return k == ACT_SEND_F || k == ACT_SEND_B; }
/* 1 when k finishes the backward of its microbatch at its stage (B, or W of a split). */
static inline int act_is_bwd_end(int k) { return k == ACT_B || k == ACT_W; }

/* Validates spec and allocates a schedule with its placement filled and every worker's
 * list empty. NULL with err naming the bad field. */
schedule *sched_alloc(const sched_spec *spec, plumb_err *err);
/* Frees a schedule whose compute order (lists, one per worker) was never finished; either
 * may be NULL. */
void sched_order_free(schedule *s, actvec *lists);

/* Pipeline ranks of a chunked schedule: nstages / chunks. */
int sched_nranks(const schedule *s);
/* The worker of pipeline rank r (chunked kinds). */
int sched_rank_worker(const schedule *s, int r);
/* Warmup forwards of pipeline rank r of p in an interleaved order of V chunks and M
 * microbatches (one pipeline's, per iteration): 2 (p - r - 1) + (V - 1) G, G the
 * microbatches of the order's first round (p when p divides M), at most M V (all of
 * them). The forward after them pairs with the first backward, as does each later forward
 * with the backward that follows it: the steady state's pairs. */
int sched_interleaved_warmup(int p, int V, int M, int r);
/* Total microbatches laid out: microbatches * iterations. */
static inline int sched_total_mb(const schedule *s) { return s->microbatches * s->iterations; }
/* 1 when worker w hosts a replica of stage st. Inline: the validator asks it per
 * action. */
static inline int sched_hosts(const schedule *s, int w, int st)
{
    if (s->worker_stage && w >= 0 && w < s->nworkers && s->worker_stage[w] != -2)
        return s->worker_stage[w] == st;
    for (int j = 0; j < s->replicas[st]; j++)
        if (s->stage_workers[s->stage_first[st] + j] == w) return 1;
    return 0;
}

/* One step of schedule_inflight's count of a stage on one worker (its pass, count_worker
 * in schedule_validate.c, and the fused lowering, which counts as it writes, both take
 * it): compute or STEP `kind` using version v (an F: its own; a B or W: its forward's; a
 * STEP: v is the version it replaces, the newest before it). cur is the stage's newest
 * version (before a STEP: v itself); *infl and *held the activations and versions the
 * stage holds now; vr[0..vmax) the forwards in flight per version. Other kinds change
 * nothing. */
static inline void sched_count_step(int kind, int v, int cur, int vmax, int *infl,
                                    int *held, int *vr)
{
    switch (kind) {
    case ACT_F:
        (*infl)++;
        if (v >= 0 && v < vmax && vr[v]++ == 0 && v != cur) (*held)++;
        break;
    case ACT_B: case ACT_W:
        if (*infl > 0) (*infl)--;
        if (v >= 0 && v < vmax && --vr[v] == 0 && v != cur) (*held)--;
        break;
    case ACT_STEP:
        (*held)++;
        if (v >= 0 && v < vmax && vr[v] == 0) (*held)--;
        break;
    default: break;
    }
}

/* A microbatch's buffer slot while schedule_slots scans a list (and the fused lowering
 * counts as it writes): open, its backward done, its input gradient gone (SLOT_DX: sent,
 * or taken by the stage before on the same worker). It closes when all three are set. */
enum { SLOT_OPEN = 1, SLOT_BWD = 2, SLOT_DX = 4 };

/* Opens slot *m (not open) of a microbatch of stage `stage`: *open counts the slots open
 * now, *best the most so far (schedule_slots' scan and the fused lowering both take it). */
static inline void sched_slot_open(unsigned char *m, int stage, int *open, int *best)
{
    *m = SLOT_OPEN | (stage == 0 ? SLOT_DX : 0); /* stage 0 sends no gradient */
    if (++*open > *best) *best = *open;
}

/* Marks open slot *m with bit (SLOT_BWD or SLOT_DX); it closes with all three. */
static inline void sched_slot_mark(unsigned char *m, unsigned char bit, int *open)
{
    *m |= bit;
    if (*m == (SLOT_OPEN | SLOT_BWD | SLOT_DX)) *m = 0, --*open;
}

/* Moves lists[0..nworkers) into s (replacing its lists; frees s->counts, the counts of
 * the old ones); the vectors are left empty. */
int sched_adopt(schedule *s, actvec *lists, plumb_err *err);

/* The generators that live in files of their own: the compute order (F, B, I, W) of
 * every worker into lists[nworkers]. 0, or -1 when out of memory. */
int sched_gen_dualpipev(const schedule *s, actvec *lists);

/* The passes. Each works on lists[nworkers] in place and returns 0 or -1 with err. */
int sched_add_allreduce(const schedule *s, actvec *lists, plumb_err *err);
/* cost: [nstages * 3] F, I, W time per stage (NULL = unit costs). */
int sched_lower(const schedule *s, actvec *lists, const double *cost, plumb_err *err);
int sched_place_steps(const schedule *s, actvec *lists, plumb_err *err);
void sched_assign_versions(const schedule *s, actvec *lists);

/* Rebuilds v with ins[k] placed after index after[k] (ascending; -1 = at the front), in
 * place when v has room, else into one allocation of the final size: moved from the back,
 * each action once. 0, or -1 out of memory (v unchanged). */
int sched_insert_after(actvec *v, const int *after, const action *ins, int nins);

/* A STEP to place: after the list's action `after`, of the rank-th stage the worker holds,
 * the k-th of that stage. */
typedef struct sched_step_at {
    int after, rank, k;
} sched_step_at;
/* qsort order of sched_step_at: ascending anchors; at one anchor the later stage first
 * (placed one stage after the other, a stage's STEP goes right after its anchor, before
 * those placed there already), then a stage's own in order. */
int sched_step_at_cmp(const void *pa, const void *pb);

/* Runs the passes a compute-only layout needs (allreduce when any stage is replicated,
 * lowering, steps, versions) and adopts the lists into s, setting s->backward_split. */
int sched_finish(schedule *s, actvec *lists, const double *cost, plumb_err *err);

/* How schedule_send_bound keeps its replay's vector clocks: -1 (the default) sparse
 * (schedule_vclock.h) when long and most workers are replicas, else dense; 0 always
 * dense; 1 always sparse (tests run both ways). */
extern int sched_bound_sparse;
/* Whether schedule_send_bound's dense clocks may take 16-bit components: -1 (the default)
 * when every list has at most 65535 actions; 0 always 32-bit (tests compare the two). */
extern int sched_bound_narrow;
/* Whether schedule_send_bound reads a generated IR's lists instead of replaying them
 * where sched_bound_tree applies: -1 (the default) or 1 yes; 0 always the replay (tests
 * compare the two). */
extern int sched_bound_fast;

/* schedule_send_bound_pairs without the replay (core/schedule_bound_tree.c), for an IR
 * its generator's lowering wrote (s->counts set: no replicated stage, so no all-reduce)
 * whose placement's workers talk along a forest: 1 with *out (sorted, the caller frees
 * it) and *n as schedule_send_bound_pairs sets them, the same values; 0 when it does not
 * apply (a ring, lists the generators never write, sched_bound_fast 0: *out NULL, the
 * caller replays); -1 with err out of memory. */
int sched_bound_tree(const schedule *s, unsigned sends, sched_pair_bound **out, int *n,
                     plumb_err *err);

#endif
