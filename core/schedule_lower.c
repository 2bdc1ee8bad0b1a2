/* schedule_lower.c: the lowering, which turns a compute order into an action IR.
 *
 * sched_lower times the compute order (with the stages' costs when given, else F 1, I 1,
 * W 1, B 2; all-reduce and step 1/1000 of the cheapest stage) and inserts every SEND/RECV
 * pair at the moment the data is produced, so that all workers' lists are restrictions of
 * one global order in which each pair is adjacent: the IR then cannot deadlock even when a
 * send blocks until its receive is reached (and so neither with buffered sends). Each
 * worker's list is written once; sched_finish's lowering also places the optimizer STEPs
 * and fills the weight versions in that write where it can (the emitter below), else the
 * passes of core/schedule_steps.c do; where it does, it also takes schedule_inflight's
 * and schedule_slots' counts as it writes and leaves them in the schedule
 * (schedule.counts). */
#include "schedule_impl.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An event of a worker's lowered list: 16 bytes, its action rebuilt when the list is
 * written (ev_action). */
typedef struct ev {
    double t;      /* time */
    uint64_t key;  /* class << 62 | id: class 0 communication (id: the pair's, stage << 33
                      | microbatch << 1 | 0 for its activations, 1 for its input gradient:
                      ordered as 2 (stage x T + microbatch) + direction), 1 compute (id:
                      its index in the compute order) */
} ev;

#define EV_COMPUTE ((uint64_t)1 << 62)

/* The order of a worker's events: time, then transfers before computes, then id. */
static int ev_cmp(const void *pa, const void *pb)
{
    const ev *x = pa, *y = pb;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

/* 1 when x comes after y in ev_cmp's order (inline, for the merge's and the runs' checks). */
static inline int ev_after(const ev *x, const ev *y)
{
    return x->t > y->t || (x->t == y->t && x->key > y->key);
}

/* The most runs of receives a worker's list is merged from (emit_merged); more are
 * sorted (emit_sorted). */
enum { EMIT_FEW = 8 };

/* A worker's receives: e[0..n), in runs that ascend by ev_cmp, the later runs' starts
 * b[0..nb) (noted as they are pushed; only the first EMIT_FEW kept, nb counts all). */
typedef struct evvec {
    ev *e;
    int n, cap;
    int nb, b[EMIT_FEW];
} evvec;

/* The state of lowering one compute order: who computes each (stage, microbatch), when
 * each compute ends, and each worker's progress through its list. Indexes k = stage * T +
 * microbatch; the per-k arrays hold 0 for not (yet) known (an end is > 0: every compute
 * lasts > 0), so they start zeroed (zeroed_alloc; fver, written before it is read, as
 * calloc's pages). */
typedef struct lower_st {
    const schedule *s;
    actvec *lists;
    const double *cost;
    int S, T, W;
    int *fw, *bw;                /* [k] the worker of the forward / backward, + 1 */
    double *fend, *bend;  /* [k] end of the forward, of the backward (B or I: input grad) */
    int *pc, *arcnt;             /* [w] next action; [w * S + st] all-reduces done */
    double *freet;               /* [w] when the worker is free */
    double **start;              /* [w][i] start of action i (fused: NULL, emit_start
                                    times each again) */
    evvec *evs;                  /* [w] the receives of worker w, a run per producer */
    const int *room;             /* [w] room to leave in the list for the STEPs to come */
    int *arfast, *arrived;       /* [st] replicas hold only st; replicas at its all-reduce */
    char *atar;                  /* [w] counted in arrived at the all-reduce at pc */
    double tiny;                 /* duration of an all-reduce or a step */
    double *dur;                 /* [4 st + kind] duration of compute kind (F, B, I, W) of
                                    stage st under cost (NULL: F, I, W 1, B 2) */
    long done;                   /* actions timed so far */
    int *nsend;                  /* [w] the sends of worker w */
    int fused, each;             /* place the STEPs and versions while writing (emitter);
                                    the kind steps each round */
    int *gend;                   /* fused, per iteration: [st * iterations + k] the last
                                    backward end of group k of stage st in its worker's
                                    order, -1 for none */
    int *fver, *cur;             /* fused: [k] the version of the forward + 1; [st] the newest */
    int *cnt;                    /* fused: the counts taken as the lists are written (count_*,
                                    slot_*), [0, 3S) what schedule.counts keeps: [st] the most
                                    activations, [S + st] the most versions (schedule_inflight),
                                    [2S + st] the most slots (schedule_slots); [3S + st]
                                    activations, [4S + st] versions and [5S + st] slots held
                                    now, [6S + st * vmax + v] the forwards in flight that used
                                    version v of st */
    int vmax;                    /* fused: versions counted per stage (iterations + 2, T more
                                    where each round steps) */
    unsigned char *sstate;       /* fused: [k] the slot of (stage, microbatch) k: SLOT_* */
    int inplace;                 /* fused, and every compute's version and peer -1: the
                                    timing keeps each compute's start in those 8 bytes of
                                    the compute order (start_put), where the writer reads
                                    it (emit_start) and writes -1 back */
} lower_st;

/* Duration of action a (its stage's, tiny for an all-reduce or a step). */
static inline double dur_of(const lower_st *L, const action *a)
{
    _Static_assert(ACT_F == 0 && ACT_B == 1 && ACT_I == 2 && ACT_W == 3, "compute kinds");
    return act_is_compute(a->kind) ? L->dur[4 * a->stage + a->kind] : L->tiny;
}

/* n zeroed bytes written (malloc and memset), or NULL: for an array read before it is
 * written, whose fresh calloc'd pages would each fault twice (the shared zero page at the
 * first read, its copy at the first write) where a memset faults once. */
static void *zeroed_alloc(size_t n)
{
    void *p = malloc(n + 1);
    if (p) memset(p, 0, n);
    return p;
}

/* The start of a compute kept in its version and peer (L->inplace): written by the
 * timing, read by the writer. */
static inline void start_put(action *a, double t) { memcpy((char *)a + 8, &t, sizeof t); }
static inline double start_get(const action *a)
{
    double t;
    memcpy(&t, (const char *)a + 8, sizeof t);
    return t;
}
_Static_assert(offsetof(action, version) == 8 && offsetof(action, peer) == 12,
               "a compute's start takes its version and peer");

/* Fills fw and bw from the compute order, checking that it is compute-only, in range, and
 * has one forward and one backward per (stage, microbatch). Returns the action count, or
 * -1 with err set. */
static long lower_index(lower_st *L, plumb_err *err)
{
    char a_txt[48];
    long total = 0;
    for (int w = 0; w < L->W; w++) {
        const actvec *lw = &L->lists[w];
        /* fused, the writer times each compute again as it goes (emit_start) */
        L->start[w] = L->fused ? NULL : malloc((size_t)(lw->n + 1) * sizeof **L->start);
        if (!L->fused && !L->start[w]) return err_set(err, NULL, NULL, "out of memory");
        total += lw->n;
        /* the iteration of the last backward's microbatch, [glo, glo + M) (a division
         * only where the microbatches pass into another iteration) */
        const int M = L->s->microbatches;
        int g = 0, glo = 0;
        for (int i = 0; i < lw->n; i++) {
            const action *a = &lw->a[i];
            if (act_is_comm(a->kind))
                return err_set(err, NULL, NULL, "worker %d action %d (%s): lowering expects "
                               "a compute-only order", w, i,
                               action_format(a, a_txt, sizeof a_txt));
            if (!act_is_compute(a->kind)) continue;
            if ((unsigned)a->stage >= (unsigned)L->S || (unsigned)a->microbatch >= (unsigned)L->T)
                return err_set(err, NULL, NULL, "worker %d action %d (%s): stage or microbatch "
                               "out of range", w, i, action_format(a, a_txt, sizeof a_txt));
            size_t k = (size_t)a->stage * L->T + a->microbatch;
            L->inplace &= (a->version == -1) & (a->peer == -1);
            if (L->gend && act_is_bwd_end(a->kind) &&
                L->s->stage_workers[L->s->stage_first[a->stage]] == w) {
                if (a->microbatch < glo || a->microbatch - glo >= M)
                    g = a->microbatch / M, glo = g * M;
                if (g < L->s->iterations) L->gend[(size_t)a->stage * L->s->iterations + g] = i;
            }
            if (a->kind == ACT_F) {
                if (L->fw[k])
                    return err_set(err, NULL, NULL, "stage %d microbatch %d has two forwards "
                                   "(workers %d and %d)", a->stage, a->microbatch, L->fw[k] - 1,
                                   w);
                L->fw[k] = w + 1;
            } else if (a->kind == ACT_B || a->kind == ACT_I) {
                if (L->bw[k])
                    return err_set(err, NULL, NULL, "stage %d microbatch %d has two backwards "
                                   "(workers %d and %d)", a->stage, a->microbatch, L->bw[k] - 1,
                                   w);
                L->bw[k] = w + 1;
            }
        }
    }
    return total;
}

/* Starts the all-reduce at worker w's pc when every replica of its stage stands at its
 * matching one: all start when the last is free. Where every replica of the stage holds
 * only it (arfast[st]), the replicas that stand at it are counted as they arrive (a
 * replica leaves only when all start, and all start together, so their counts agree)
 * and the last to arrive starts them, O(replicas) per all-reduce; else each call scans
 * the replicas. Returns 1 started, 0 not yet. */
static int lower_allreduce(lower_st *L, int w, double ready)
{
    const schedule *s = L->s;
    int st = L->lists[w].a[L->pc[w]].stage, kth = L->arcnt[(size_t)w * L->S + st];
    const int *rw = &s->stage_workers[s->stage_first[st]];
    if (L->arfast[st] && s->worker_stage[w] == st) {
        if (!L->atar[w]) L->atar[w] = 1, L->arrived[st]++;
        if (L->arrived[st] < s->replicas[st]) return 0;
        for (int j = 0; j < s->replicas[st]; j++)
            if (L->freet[rw[j]] > ready) ready = L->freet[rw[j]];
    } else {
        for (int j = 0; j < s->replicas[st]; j++) {
            int w2 = rw[j];
            if (L->pc[w2] >= L->lists[w2].n) return 0;
            const action *b = &L->lists[w2].a[L->pc[w2]];
            if (b->kind != ACT_ALLREDUCE || b->stage != st ||
                L->arcnt[(size_t)w2 * L->S + st] != kth)
                return 0;
            if (L->freet[w2] > ready) ready = L->freet[w2];
        }
    }
    for (int j = 0; j < s->replicas[st]; j++) {
        int w2 = rw[j];
        L->start[w2][L->pc[w2]] = ready;
        L->freet[w2] = ready + L->tiny;
        L->arcnt[(size_t)w2 * L->S + st]++;
        L->atar[w2] = 0;
        L->pc[w2]++;
        L->done++;
    }
    L->arrived[st] = 0;
    return 1;
}

/* Times worker w's next action when its inputs are computed. Returns 1 when it (or an
 * all-reduce with it) was timed, 0 when it waits for another worker, -1 with err set when
 * it never can (an input never computed, or computed later on the same worker). */
static int lower_step(lower_st *L, int w, plumb_err *err)
{
    char a_txt[48];
    const action *a = &L->lists[w].a[L->pc[w]];
    __builtin_prefetch(a + 8); /* the workers' lists are read in turn: fetch ahead */
    int st = a->stage, m = a->microbatch, T = L->T;
    size_t k = (size_t)(st >= 0 ? st : 0) * T + (m >= 0 ? m : 0);
    double ready = L->freet[w];
    if (a->kind == ACT_F && st > 0) {
        size_t kp = k - (size_t)T;
        if (!(L->fend[kp] > 0)) {
            if (L->fw[kp] == w + 1 || !L->fw[kp])
                return err_set(err, NULL, NULL, "worker %d action %d (%s): its input (forward "
                               "of stage %d) is %s", w, L->pc[w],
                               action_format(a, a_txt, sizeof a_txt), st - 1,
                               !L->fw[kp] ? "never computed"
                                             : "computed later on the same worker");
            return 0;
        }
        if (L->fend[kp] > ready) ready = L->fend[kp];
    } else if (a->kind == ACT_B || a->kind == ACT_I) {
        if (!(L->fend[k] > 0) || L->fw[k] != w + 1)
            return err_set(err, NULL, NULL, "worker %d action %d (%s): backward before its "
                           "forward on this worker", w, L->pc[w],
                           action_format(a, a_txt, sizeof a_txt));
        if (st < L->S - 1) {
            size_t kn = k + (size_t)T;
            if (!(L->bend[kn] > 0)) {
                if (L->bw[kn] == w + 1 || !L->bw[kn])
                    return err_set(err, NULL, NULL, "worker %d action %d (%s): its output "
                                   "gradient (backward of stage %d) is %s", w, L->pc[w],
                                   action_format(a, a_txt, sizeof a_txt), st + 1,
                                   !L->bw[kn] ? "never computed"
                                                 : "computed later on the same worker");
                return 0;
            }
            if (L->bend[kn] > ready) ready = L->bend[kn];
        }
    } else if (a->kind == ACT_W) {
        if (!(L->bend[k] > 0)) /* no input gradient yet */
            return err_set(err, NULL, NULL, "worker %d action %d (%s): W before its I", w,
                           L->pc[w], action_format(a, a_txt, sizeof a_txt));
    } else if (a->kind == ACT_ALLREDUCE) {
        return lower_allreduce(L, w, ready);
    }
    double end = ready + dur_of(L, a);
    if (L->start[w]) L->start[w][L->pc[w]] = ready;
    else if (L->inplace) start_put(&L->lists[w].a[L->pc[w]], ready);
    L->freet[w] = end;
    if (a->kind == ACT_F) L->fend[k] = end;
    if (a->kind == ACT_B || a->kind == ACT_I) L->bend[k] = end;
    L->pc[w]++;
    L->done++;
    return 1;
}

/* lower_step for worker w's run of computes whose inputs are ready, with the worker's
 * clock and position held in registers: each compute it can time, timed as lower_step
 * would; at the first action it cannot, it stores them back and returns 0 where the input
 * is still to come from another worker, else lower_step decides (an all-reduce, an input
 * that never comes: its error). Returns 1 when the list was finished, else as lower_step;
 * sets *moved when some action was timed. */
static inline __attribute__((always_inline)) int lower_run(lower_st *L, int w, int *moved,
                                                          plumb_err *err)
{
    action *acts = L->lists[w].a;
    const int n = L->lists[w].n, T = L->T, S = L->S, inplace = L->inplace;
    double *fend = L->fend, *bend = L->bend, *start = L->start[w];
    const double *dur = L->dur;
    const int *fw = L->fw, *bw = L->bw;
    int pc = L->pc[w], r, by = 0; /* by: the producer waited for, + 1 */
    double freet = L->freet[w];
    long done = 0;
    while (pc < n) {
        action *a = &acts[pc];
        __builtin_prefetch(a + 8); /* the workers' lists are read in turn: fetch ahead */
        int kind = a->kind, st = a->stage;
        size_t k = (size_t)st * T + a->microbatch;
        double ready = freet;
        /* kind, stage and microbatch in range: checked by lower_index */
        if (kind == ACT_F) {
            if (st > 0) {
                double e = fend[k - T];
                if (!(e > 0)) {
                    by = fw[k - T];
                    goto wait;
                }
                ready = e > ready ? e : ready;
            }
        } else if (kind == ACT_B || kind == ACT_I) {
            if (!(fend[k] > 0) || fw[k] != w + 1) break;
            if (st < S - 1) {
                double e = bend[k + T];
                if (!(e > 0)) {
                    by = bw[k + T];
                    goto wait;
                }
                ready = e > ready ? e : ready;
            }
        } else if (kind == ACT_W) {
            if (!(bend[k] > 0)) break;
        } else {
            break;
        }
        double end = ready + dur[4 * st + kind]; /* dur_of */
        if (start) start[pc] = ready;
        else if (inplace) start_put(a, ready);
        freet = end;
        if (kind == ACT_F) fend[k] = end;
        else if (kind != ACT_W) bend[k] = end;
        pc++;
        done++;
    }
    L->pc[w] = pc, L->freet[w] = freet, L->done += done;
    *moved |= done > 0;
    if (pc == n) return 1;
    r = lower_step(L, w, err);
    *moved |= r > 0;
    return r;
wait: /* its input not yet computed: it waits for another worker, or (lower_step's error)
       * it never will be */
    L->pc[w] = pc, L->freet[w] = freet, L->done += done;
    *moved |= done > 0;
    return by && by != w + 1 ? 0 : lower_step(L, w, err);
}

/* Times every action of the order (each as soon as its inputs are computed and its worker
 * is free). Returns 0, or -1 with err set when the order cannot run. */
static int lower_time(lower_st *L, long total, plumb_err *err)
{
    char a_txt[48];
    while (L->done < total) {
        int progress = 0;
        for (int w = 0; w < L->W; w++) {
            for (;;) {
                int r = lower_run(L, w, &progress, err);
                if (r < 0) return -1;
                if (!r || L->pc[w] >= L->lists[w].n) break;
            }
        }
        if (!progress) {
            for (int w = 0; w < L->W; w++)
                if (L->pc[w] < L->lists[w].n)
                    return err_set(err, NULL, NULL, "the compute order cannot run: worker %d "
                                   "waits forever at action %d (%s)", w, L->pc[w],
                                   action_format(&L->lists[w].a[L->pc[w]], a_txt,
                                                 sizeof a_txt));
            return -1;
        }
    }
    return 0;
}

/* Sorts e[0..n) by ev_cmp, a strict total order on one worker's events, so the result is
 * the one any sort gives. A natural merge sort: it finds the ascending runs and merges
 * them pairwise, O(n log runs): ev_emit's way for a worker whose events form more than
 * a few runs (one that receives from many producers). Returns 0, or -1 out of memory. */
static int ev_sort(ev *e, int n)
{
    int nr = 0, *rb = NULL, rc = -1;
    ev *tmp = NULL;
    if (n < 2) return 0;
    for (int i = 1; i < n; i++)
        if (ev_cmp(&e[i - 1], &e[i]) > 0) nr++;
    if (!nr) return 0;
    nr++;
    rb = malloc((size_t)(nr + 1) * sizeof *rb);
    tmp = malloc((size_t)n * sizeof *tmp);
    if (!rb || !tmp) goto done;
    nr = 0;
    rb[nr++] = 0;
    for (int i = 1; i < n; i++)
        if (ev_cmp(&e[i - 1], &e[i]) > 0) rb[nr++] = i;
    rb[nr] = n;
    ev *src = e, *dst = tmp;
    while (nr > 1) {
        int out = 0;
        for (int r = 0; r < nr; r += 2) {
            int lo = rb[r], mid = rb[r + 1], hi = r + 1 < nr ? rb[r + 2] : mid;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = ev_cmp(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
            rb[out++] = lo;
        }
        rb[out] = n;
        nr = out;
        ev *t = src;
        src = dst, dst = t;
    }
    if (src != e) memcpy(e, src, (size_t)n * sizeof *e);
    rc = 0;
done:
    free(rb), free(tmp);
    return rc;
}

/* The action of worker w's event key: its compute src[id], or the SEND (w produced the
 * data) or RECV of pair id, as lower_pair found it. */
static inline __attribute__((always_inline)) action ev_action(const lower_st *L, int w,
                                                              const action *src,
                                                              uint64_t key)
{
    if (key & EV_COMPUTE) return src[key & ~EV_COMPUTE];
    int T = L->T, st = (int)(key >> 33), m = (int)(key >> 1 & 0xffffffffu);
    size_t k = (size_t)st * T + m;
    action a;
    if (!(key & 1)) { /* activations of stage st to st + 1 */
        int p = L->fw[k] - 1;
        a = act_make(w == p ? ACT_SEND_F : ACT_RECV_F, w == p ? st : st + 1, m);
        a.peer = w == p ? L->fw[k + T] - 1 : p;
        a.peer_stage = w == p ? st + 1 : st;
    } else { /* the input gradient of stage st to st - 1 */
        int p = L->bw[k] - 1;
        a = act_make(w == p ? ACT_SEND_B : ACT_RECV_B, w == p ? st : st - 1, m);
        a.peer = w == p ? L->bw[k - T] - 1 : p;
        a.peer_stage = w == p ? st - 1 : st;
    }
    return a;
}

/* The SEND/RECV pair, if any, of producer p's compute a (see lower_emit): fills x with
 * its time and key (the same on both workers) and returns the consumer's worker, or -1
 * when a's data stays on p (or goes nowhere). */
static inline __attribute__((always_inline)) int lower_pair(const lower_st *L, int p,
                                                          const action *a, ev *x)
{
    int S = L->S, T = L->T, st = a->stage, m = a->microbatch;
    const int *fw = L->fw, *bw = L->bw;
    size_t k = (size_t)st * T + m;
    uint64_t id = (uint64_t)st << 33 | (uint64_t)m << 1;
    if (a->kind == ACT_F && st + 1 < S && fw[k + T] && fw[k + T] != p + 1) {
        *x = (ev){L->fend[k], id};
        return fw[k + T] - 1;
    }
    if ((a->kind == ACT_B || a->kind == ACT_I) && st > 0 && bw[k - T] && bw[k - T] != p + 1) {
        *x = (ev){L->bend[k], id | 1};
        return bw[k - T] - 1;
    }
    return -1;
}

/* lower_pair of the worker's own compute a (p = the worker): when it sends its data, also
 * builds the SEND action (ev_action's, without decoding x's key) into *sa. */
static inline __attribute__((always_inline)) int lower_send(const lower_st *L, int p,
                                                          const action *a, ev *x, action *sa)
{
    int c = lower_pair(L, p, a, x);
    if (c >= 0) {
        int fwd = a->kind == ACT_F;
        *sa = act_make(fwd ? ACT_SEND_F : ACT_SEND_B, a->stage, a->microbatch);
        sa->peer = c;
        sa->peer_stage = fwd ? a->stage + 1 : a->stage - 1;
    }
    return c;
}

/* The writer of one worker's lowered list. With L->fused it also places the optimizer
 * STEPs and fills the weight versions as it writes, as sched_place_steps and
 * sched_assign_versions would (see lower_lists): a STEP anchored at compute i (the last
 * backward end of its group) goes before the first compute after i, past the transfers
 * that follow i; several at one anchor, the later stage first, a stage's own in order. */
typedef struct emitter {
    const lower_st *L;
    int w;
    const action *src;           /* the worker's compute order */
    action *dst;                 /* the list being written */
    int o;                       /* actions written */
    const sched_step_at *at;     /* the STEPs to place (kinds that step per iteration) */
    int nat, q;                  /* their count; the next to place */
    const int *hs;               /* the worker's stages, by rank (at[].rank) */
    int pend;                    /* kinds that step each round: the stage whose STEP waits,
                                    or -1 */
    double freet;                /* fused: when the last compute timed by emit_start ends */
    int nexta;                   /* the anchor of at[q], INT_MAX when none is left (or not
                                    fused): put_steps' quick test */
} emitter;

/* The start of compute i of the worker, asked for each i in order: as lower_time found
 * it, read from L->start, or, fused (no all-reduce: a compute waits only for its worker
 * and the one input it takes), timed again the same way from the ends it waits for. */
static inline __attribute__((always_inline)) double emit_start(emitter *E, int i)
{
    const lower_st *L = E->L;
    if (L->inplace) return start_get(&E->src[i]);
    if (L->start[E->w]) return L->start[E->w][i];
    const action *a = &E->src[i];
    int st = a->stage, T = L->T;
    size_t k = (size_t)st * T + a->microbatch;
    double ready = E->freet;
    if (a->kind == ACT_F && st > 0) {
        if (L->fend[k - T] > ready) ready = L->fend[k - T];
    } else if ((a->kind == ACT_B || a->kind == ACT_I) && st < L->S - 1) {
        if (L->bend[k + T] > ready) ready = L->bend[k + T];
    }
    E->freet = ready + dur_of(L, a);
    return ready;
}

/* schedule_inflight's count (sched_count_step, as count_worker in schedule_validate.c
 * takes it) of a compute or STEP of stage st: kind (ACT_F, ACT_B for a B or a W, which
 * count alike, or ACT_STEP; a constant where it is inlined, so that the step's switch
 * folds; an I changes no count and is not counted), v its version (a B or W: its
 * forward's, as put_compute wrote it; a STEP: old, the version it replaces): the same steps
 * in the same list order. Fused lowering only: no replicated stage, so a stage's counts
 * are its one worker's, and L->cur[st] before a STEP (old) is count_worker's own count of
 * the stage's STEPs so far. */
static inline __attribute__((always_inline)) void count_action(const lower_st *L, int kind,
                                                               int st, int v)
{
    int S = L->S, *c = L->cnt;
    int *infl = c + 3 * S + st, *held = c + 4 * S + st, *vr = c + 6 * S + (size_t)st * L->vmax;
    sched_count_step(kind, v, kind == ACT_STEP ? v : L->cur[st], L->vmax, infl, held, vr);
    if (*infl > c[st]) c[st] = *infl;
    if (*held > c[S + st]) c[S + st] = *held;
}

/* Sets worker w's stages' counts back to none (before its list is written again). */
static void count_reset(const lower_st *L, int w)
{
    int S = L->S, *c = L->cnt;
    for (int st = 0; st < S; st++) {
        if (!sched_hosts(L->s, w, st)) continue;
        c[st] = c[S + st] = c[2 * S + st] = c[3 * S + st] = c[5 * S + st] = 0;
        c[4 * S + st] = 1;
        memset(c + 6 * S + (size_t)st * L->vmax, 0, (size_t)L->vmax * sizeof *c);
        memset(L->sstate + (size_t)st * L->T, 0, (size_t)L->T);
    }
}

/* schedule_slots' scan (slots_scan in schedule.c) as the fused lowering writes: the slot
 * of microbatch m of stage st opens (an F or RECV_F of st, where it is not open). */
static inline void slot_open(const lower_st *L, int st, int m)
{
    unsigned char *sm = &L->sstate[(size_t)st * L->T + m];
    int S = L->S, *c = L->cnt;
    if (!(*sm & SLOT_OPEN))
        sched_slot_open(sm, st, &c[5 * S + st], &c[2 * S + st]);
}

/* ... and an open slot gets `bit` (SLOT_BWD: a B or W of st; SLOT_DX: a SEND_B of st, or
 * a B or I of st - 1 on st's worker taking its input gradient); closed with all three. */
static inline void slot_mark(const lower_st *L, int st, int m, unsigned char bit)
{
    unsigned char *sm = &L->sstate[(size_t)st * L->T + m];
    if (*sm & SLOT_OPEN)
        sched_slot_mark(sm, bit, &L->cnt[5 * L->S + st]);
}

/* Writes action a at the end of the worker's list: two 8-byte stores of its bytes (a
 * field-by-field copy writes the bitfields' word as a read-modify-write of the destination:
 * a load of a cold line, then a narrow store followed by a wider load that cannot be
 * forwarded). Fused, the caller counts the slots a changes (schedule_slots' scan: no
 * replicated stage, so a stage's slots are its one worker's), each kind where it is known:
 * put_compute, put_xfer. */
static inline __attribute__((always_inline)) void put(emitter *E, action a)
{
    uint64_t q[2];
    memcpy(q, &a, sizeof a);
    memcpy(&E->dst[E->o++], q, sizeof q);
}

/* Writes transfer end `key` of the worker (ev_action); fused, a RECV_F opens its slot and
 * a SEND_B marks it. */
static inline __attribute__((always_inline)) void put_xfer(emitter *E, uint64_t key)
{
    action a = ev_action(E->L, E->w, E->src, key);
    put(E, a);
    if (!E->L->fused) return;
    if (a.kind == ACT_RECV_F) slot_open(E->L, a.stage, a.microbatch);
    else if (a.kind == ACT_SEND_B) slot_mark(E->L, a.stage, a.microbatch, SLOT_DX);
}

static void put_step(emitter *E, int st)
{
    action a = act_make(ACT_STEP, st, -1);
    int old = E->L->cur[st];
    a.version = ++E->L->cur[st];
    count_action(E->L, ACT_STEP, st, old);
    put(E, a);
}

/* Places the STEPs anchored before compute `before` (INT_MAX: all that are left). */
static inline __attribute__((always_inline)) void put_steps(emitter *E, int before)
{
    if (E->nexta >= before && E->pend < 0) return; /* the usual case: none due */
    if (!E->L->fused) return;
    while (E->q < E->nat && E->at[E->q].after < before) put_step(E, E->hs[E->at[E->q++].rank]);
    E->nexta = E->q < E->nat ? E->at[E->q].after : INT_MAX;
    if (E->pend >= 0) {
        put_step(E, E->pend);
        E->pend = -1;
    }
}

/* Writes compute i of the order; fused, with its version, counting it (count_action) and
 * the slots it changes: an F opens its slot, a B or W marks its backward done, a B or I
 * takes the input gradient of st + 1 where st + 1 is on this worker. */
static inline __attribute__((always_inline)) void put_compute(emitter *E, int i)
{
    const lower_st *L = E->L;
    put_steps(E, i);
    action a = E->src[i];
    if (!L->fused) {
        put(E, a);
        return;
    }
    int st = a.stage, m = a.microbatch;
    size_t k = (size_t)st * L->T + m;
    if (L->inplace) a.peer = -1; /* its start was kept here: -1, as it came */
    if (a.kind == ACT_F) {
        a.version = L->cur[st];
        L->fver[k] = a.version + 1;
        count_action(L, ACT_F, st, a.version);
        put(E, a);
        slot_open(L, st, m);
        return;
    }
    a.version = L->fver[k] ? L->fver[k] - 1 : 0;
    if (L->each && act_is_bwd_end(a.kind) && sched_hosts(L->s, E->w, st)) E->pend = st;
    if (a.kind != ACT_I) count_action(L, ACT_B, st, a.version); /* a W counts as a B */
    put(E, a);
    if (act_is_bwd_end(a.kind)) slot_mark(L, st, m, SLOT_BWD);
    if (a.kind != ACT_W && st + 1 < L->S && L->s->stage_workers[L->s->stage_first[st + 1]] == E->w)
        slot_mark(L, st + 1, m, SLOT_DX); /* the input gradient of st + 1 taken here */
}

/* Writes event key of the worker (a compute, or one end of a transfer). */
static void put_ev(emitter *E, uint64_t key)
{
    if (key & EV_COMPUTE)
        put_compute(E, (int)(key & ~EV_COMPUTE));
    else
        put_xfer(E, key);
}

/* The general way: every event of the worker (computes, each followed by its send, then
 * the receives r[0..nr)) into one array, sorted (ev_sort) and written. 0, or -1 out of
 * memory. */
static int emit_sorted(emitter *E, const ev *r, int nr, int n)
{
    const lower_st *L = E->L;
    ev *e = malloc(((size_t)n + (size_t)L->nsend[E->w] + (size_t)nr + 1) * sizeof *e);
    if (!e) return -1;
    int ne = 0;
    ev x;
    for (int i = 0; i < n; i++) {
        e[ne++] = (ev){emit_start(E, i), EV_COMPUTE | (uint64_t)i};
        if (act_is_compute(E->src[i].kind) && lower_pair(L, E->w, &E->src[i], &x) >= 0)
            e[ne++] = x;
    }
    memcpy(e + ne, r, (size_t)nr * sizeof *e);
    ne += nr;
    if (ev_sort(e, ne)) {
        free(e);
        return -1;
    }
    for (int i = 0; i < ne; i++) put_ev(E, e[i].key);
    put_steps(E, INT_MAX);
    free(e);
    return 0;
}

/* The run among live[0..nl) whose head (time ht, key hk) comes first, or -1 when nl is 0. */
static inline __attribute__((always_inline)) int runs_min(const int *live, int nl,
                                                          const double *ht,
                                                          const uint64_t *hk)
{
    int m = -1;
    for (int q = 0; q < nl; q++) {
        int k = live[q];
        if (m < 0 || ht[k] < ht[m] || (ht[k] == ht[m] && hk[k] < hk[m])) m = k;
    }
    return m;
}

/* The quick way: the worker's computes, each followed by its send, form one ascending run
 * (a compute starts no earlier than the one before it ends, when that one's send leaves;
 * transfers sort before computes at one time; so only a send leaving at its own compute's
 * start, a duration lost to rounding, breaks it), read straight from the order, and the
 * receives rv form at most FEW runs (one per producer, their starts noted as they were
 * pushed); merged into the list, one pass, keeping each run's head at hand. Returns 0, or 1 when the runs are not as
 * expected (an order timed with durations lost to rounding), nothing kept. */
static int emit_merged(emitter *E, const evvec *rv, int n)
{
    enum { FEW = EMIT_FEW };
    const lower_st *L = E->L;
    const ev *r = rv->e;
    int nr = rv->n, rb[FEW + 2], at[FEW + 1], runs = 0;
    if (rv->nb >= FEW) return 1;
    rb[runs++] = 0;
    for (int q = 0; q < rv->nb; q++) rb[runs++] = rv->b[q];
    rb[runs] = nr;
    double ht[FEW + 1];
    uint64_t hk[FEW + 1];
    int live[FEW + 1], nl = 0;
    for (int q = 0; q < runs; q++) {
        at[q] = rb[q];
        if (rb[q] < rb[q + 1]) live[nl++] = q, ht[q] = r[rb[q]].t, hk[q] = r[rb[q]].key;
    }
    int i = 0, hasx = 0;
    ev x = {0, 0}; /* the compute run's pending send */
    action xa = act_make(ACT_SEND_F, 0, 0); /* the pending send's action */
    double si = n ? emit_start(E, 0) : 0; /* the start of compute i */
    /* rmin: the receive runs' least head (-1 when none are left), found again only when
     * a receive is written (the compute run's events leave the heads as they are) */
    int rmin = runs_min(live, nl, ht, hk);
    double rt = rmin >= 0 ? ht[rmin] : 0; /* its head, at hand */
    uint64_t rk = rmin >= 0 ? hk[rmin] : 0;
    for (;;) {
        if (i < n || hasx) { /* the compute run's head, when it comes first */
            double ot = hasx ? x.t : si;
            uint64_t ok = hasx ? x.key : EV_COMPUTE | (uint64_t)i;
            if (rmin < 0 || ot < rt || (ot == rt && ok < rk)) {
                if (hasx) {
                    put(E, xa);
                    if (L->fused && xa.kind == ACT_SEND_B)
                        slot_mark(L, xa.stage, xa.microbatch, SLOT_DX);
                    hasx = 0;
                } else {
                    put_compute(E, i);
                    hasx = act_is_compute(E->src[i].kind) &&
                           lower_send(L, E->w, &E->src[i], &x, &xa) >= 0;
                    /* the run ascends but where a send leaves at its compute's start (a
                     * duration lost to rounding: a transfer sorts first at one time) */
                    if (hasx && !(x.t > si)) return 1;
                    if (++i < n) si = emit_start(E, i);
                }
                continue;
            }
        } else if (rmin < 0) {
            break;
        }
        put_xfer(E, rk);
        if (++at[rmin] < rb[rmin + 1]) {
            ht[rmin] = r[at[rmin]].t, hk[rmin] = r[at[rmin]].key;
        } else {
            int q = 0;
            while (live[q] != rmin) q++;
            live[q] = live[--nl];
        }
        rmin = runs_min(live, nl, ht, hk);
        if (rmin >= 0) rt = ht[rmin], rk = hk[rmin];
    }
    put_steps(E, INT_MAX);
    return 0;
}

/* The STEPs of worker w's stages hs[0..nh) for the kinds that step per iteration: group k
 * of stage hs[r] anchored at its last backward end (L->gend, complete with the groups
 * before it), sorted by anchor, the later stage first, then k. A new array of *nat (the
 * caller frees it; NULL when none), or -1 out of memory. */
static int emit_step_anchors(const lower_st *L, const int *hs, int nh, sched_step_at **out,
                             int *nat)
{
    int it = L->s->iterations, n = 0;
    sched_step_at *at = NULL;
    *out = NULL, *nat = 0;
    if (L->each || !nh) return 0;
    at = malloc((size_t)nh * (size_t)it * sizeof *at);
    if (!at) return -1;
    for (int r = 0; r < nh; r++)
        for (int k = 0, last = -1; k < it; k++) {
            int p = L->gend[(size_t)hs[r] * it + k];
            last = p > last ? p : last;
            at[n++] = (sched_step_at){last, r, k};
        }
    if (n > 1) qsort(at, (size_t)n, sizeof *at, sched_step_at_cmp);
    *out = at, *nat = n;
    return 0;
}

/* Replaces worker w's compute order by its lowered list (computes at their times, the
 * sends after their computes, the receives r[0..nr) where they land; with L->fused the
 * STEPs and versions too), written into one new array of the final size. hs[0..nh): the
 * stages w holds. Returns 0, or -1 out of memory. */
static int emit_worker(const lower_st *L, int w, const evvec *rv, const int *hs, int nh)
{
    const ev *r = rv->e;
    int nr = rv->n;
    actvec *out = &L->lists[w];
    int n = out->n, cap = n + L->nsend[w] + nr + 1 + L->room[w], rc = -1;
    emitter E = {L, w, out->a, malloc((size_t)cap * sizeof(action)), 0, NULL, 0, 0, hs, -1, 0,
                 INT_MAX};
    if (!E.dst) return -1;
    if (L->fused) {
        for (int st = 0; st < L->S; st++) L->cur[st] = 0;
        if (emit_step_anchors(L, hs, nh, (sched_step_at **)&E.at, &E.nat)) goto done;
        E.nexta = E.nat ? E.at[0].after : INT_MAX;
    }
    int r1 = emit_merged(&E, rv, n);
    if (r1) { /* begin again the general way */
        E.o = 0, E.q = 0, E.pend = -1, E.freet = 0;
        E.nexta = E.nat ? E.at[0].after : INT_MAX;
        for (int st = 0; L->fused && st < L->S; st++) L->cur[st] = 0;
        if (L->fused) count_reset(L, w);
        if (emit_sorted(&E, r, nr, n)) goto done;
    }
    free(out->a);
    out->a = E.dst, out->n = E.o, out->cap = cap;
    E.dst = NULL;
    rc = 0;
done:
    free(E.dst);
    free((void *)E.at);
    return rc;
}

/* Rewrites each worker's list: its computes at their times, and a SEND/RECV pair wherever
 * data crosses workers (sent when the producer ends). Walking each producer p's list in
 * order (its ends grow), the receives of p's sends are pushed onto their consumer, so
 * that a consumer holds one ascending run per producer; emit_worker merges them with the
 * worker's own computes and sends. Returns 0, or -1 out of memory. */
static int lower_emit(lower_st *L)
{
    ev x;
    int rc = -1, *hs = malloc(((size_t)L->S + 1) * sizeof *hs);
    if (!hs) return -1;
    /* at most one receive per compute that takes data (an F its input, a B or I its
     * output gradient): n bounds a worker's receives, no pass needed to count them (the
     * pages past what is written are not touched) */
    for (int w = 0; w < L->W; w++) {
        evvec *v = &L->evs[w];
        v->cap = L->lists[w].n;
        v->e = malloc(((size_t)v->cap + 1) * sizeof *v->e);
        if (!v->e) goto done;
    }
    for (int p = 0; p < L->W; p++) /* the receives, a run per producer */
        for (int i = 0; i < L->lists[p].n; i++) {
            const action *a = &L->lists[p].a[i];
            if (!act_is_compute(a->kind)) continue;
            int c = lower_pair(L, p, a, &x);
            if (c < 0) continue;
            evvec *v = &L->evs[c];
            if (v->n && ev_after(&v->e[v->n - 1], &x)) { /* a run starts */
                if (v->nb < EMIT_FEW) v->b[v->nb] = v->n;
                v->nb++;
            }
            v->e[v->n++] = x, L->nsend[p]++;
        }
    for (int w = 0; w < L->W; w++) {
        int nh = 0;
        for (int st = 0; L->fused && !L->each && st < L->S; st++)
            if (sched_hosts(L->s, w, st)) hs[nh++] = st;
        if (emit_worker(L, w, &L->evs[w], hs, nh)) goto done;
        free(L->evs[w].e); /* as it goes: the next worker's list may take its memory */
        L->evs[w].e = NULL;
    }
    rc = 0;
done:
    free(hs);
    return rc;
}

/* Lowers each worker's compute-only list (lists[w], rewritten in place, with room[w]
 * actions to spare): checks it (lower_index), times it under cost (lower_time) and adds
 * the transfers (lower_emit); fused: also the STEPs and versions (an order with no STEP,
 * no ALLREDUCE and no replicated stage). Returns 0, or -1 with err set (an order that
 * cannot run, out of memory). */
static int lower_compute(const schedule *s, actvec *lists, const double *cost,
                         const int *room, int fused, int **counts, plumb_err *err)
{
    int S = s->nstages, T = sched_total_mb(s), W = s->nworkers, rc = -1;
    size_t ST = (size_t)S * (size_t)T, SI = (size_t)S * (size_t)s->iterations;
    lower_st L = {s, lists, cost, S, T, W, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  NULL, NULL, room, NULL, NULL, NULL, 1e-3, NULL, 0, NULL, fused,
                  sched_traits_of(s->kind)->step_each_round, NULL, NULL, NULL, NULL, 0, NULL,
                  0};
    L.nsend = calloc((size_t)W + 1, sizeof *L.nsend);
    if (fused) {
        L.fver = calloc(ST + 1, sizeof *L.fver), L.cur = malloc(((size_t)S + 1) * sizeof *L.cur);
        L.gend = L.each ? NULL : malloc((SI + 1) * sizeof *L.gend);
        if (!L.fver || !L.cur || (!L.each && !L.gend)) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
        for (size_t i = 0; L.gend && i < SI; i++) L.gend[i] = -1;
        /* a STEP per iteration: at most iterations + 1 versions (T more where each round
         * steps) */
        L.vmax = (L.each ? T : 0) + s->iterations + 2;
        L.cnt = zeroed_alloc((6 * (size_t)S + (size_t)S * L.vmax) * sizeof *L.cnt);
        L.sstate = zeroed_alloc(ST);
        if (!L.cnt || !L.sstate) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
        for (int st = 0; st < S; st++) L.cnt[4 * S + st] = 1;
    }
    L.fw = zeroed_alloc(ST * sizeof *L.fw), L.bw = zeroed_alloc(ST * sizeof *L.bw);
    L.fend = zeroed_alloc(ST * sizeof *L.fend), L.bend = zeroed_alloc(ST * sizeof *L.bend);
    L.pc = calloc((size_t)W, sizeof *L.pc), L.arcnt = calloc((size_t)W * S, sizeof *L.arcnt);

    L.freet = calloc((size_t)W, sizeof *L.freet);
    L.start = calloc((size_t)W, sizeof *L.start);
    L.evs = calloc((size_t)W, sizeof *L.evs);
    L.arfast = calloc((size_t)S, sizeof *L.arfast);
    L.arrived = calloc((size_t)S, sizeof *L.arrived);
    L.atar = calloc((size_t)W, sizeof *L.atar);
    L.dur = malloc((4 * (size_t)S + 1) * sizeof *L.dur);
    if (!L.dur || !L.fw || !L.bw || !L.fend || !L.bend || !L.pc || !L.arcnt || !L.freet ||
        !L.start || !L.evs || !L.arfast || !L.arrived || !L.atar || !L.nsend) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    if (cost) {
        L.tiny = -1;
        for (int i = 0; i < 3 * S; i++)
            if (!(cost[i] > 0) || cost[i] > 1e300) {
                err_set(err, NULL, "stage_cost", "stage %d: expected times > 0 (got %g)", i / 3,
                        cost[i]);
                goto done;
            }
        for (int i = 0; i < 3 * S; i++)
            if (L.tiny < 0 || cost[i] < L.tiny) L.tiny = cost[i];
        L.tiny *= 1e-3;
    }
    for (int st = 0; st < S; st++) {
        double f = cost ? cost[3 * st] : 1, i = cost ? cost[3 * st + 1] : 1;
        double w = cost ? cost[3 * st + 2] : 1;
        double *d = L.dur + 4 * st;
        d[ACT_F] = f, d[ACT_B] = i + w, d[ACT_I] = i, d[ACT_W] = w;
    }
    for (int st = 0; st < S && s->worker_stage; st++) {
        L.arfast[st] = 1;
        for (int j = 0; j < s->replicas[st]; j++) {
            int w = s->stage_workers[s->stage_first[st] + j];
            if (s->worker_stage[w] != st) L.arfast[st] = 0;
        }
    }
    L.inplace = fused;
    long total = lower_index(&L, err);
    if (total < 0 || lower_time(&L, total, err)) goto done;
    if (lower_emit(&L)) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    if (counts && fused) { /* the maxima, [0, 3S) (a version and a slot at least): the
                            * rest is scratch */
        for (int st = 0; st < S; st++) {
            if (L.cnt[S + st] < 1) L.cnt[S + st] = 1;
            if (L.cnt[2 * S + st] < 1) L.cnt[2 * S + st] = 1;
        }
        int *c = realloc(L.cnt, (3 * (size_t)S + 1) * sizeof *c);
        *counts = c ? c : L.cnt, L.cnt = NULL;
    }
    rc = 0;
done:
    free(L.cnt), free(L.sstate), free(L.dur);
    free(L.fw), free(L.bw), free(L.fend), free(L.bend), free(L.pc);
    free(L.arcnt), free(L.freet), free(L.arfast), free(L.arrived), free(L.atar);
    free(L.nsend), free(L.fver), free(L.cur), free(L.gend);
    if (L.start)
        for (int w = 0; w < W; w++) free(L.start[w]);
    free(L.start);
    if (L.evs)
        for (int w = 0; w < W; w++) free(L.evs[w].e);
    free(L.evs);
    return rc;
}

/* sched_lower, and *any_i |= 1 when some compute is an I. STEPs already in the order (an
 * imported file's) are taken out while the transfers are timed and put back after the
 * same compute action, past the sends that follow it, as sched_place_steps would place
 * them. place: when the order has no STEP and no ALLREDUCE and no stage is replicated,
 * also place the STEPs and fill the versions as the lists are written (what
 * sched_place_steps and sched_assign_versions would do after it, one pass instead of
 * three), and set *placed to 1; else *placed is 0. */
static int lower_lists(const schedule *s, actvec *lists, const double *cost, int place,
                       int *any_i, int *placed, int **counts, plumb_err *err)
{
    int W = s->nworkers, rc = -1, each = sched_traits_of(s->kind)->step_each_round;
    int fused = place;
    for (int st = 0; st < s->nstages && fused; st++) fused = s->replicas[st] == 1;
    actvec *steps = calloc((size_t)W, sizeof *steps);
    int *room = calloc((size_t)W + 1, sizeof *room);
    if (!steps || !room) {
        free(steps), free(room);
        return err_set(err, NULL, NULL, "out of memory");
    }
    for (int w = 0; w < W; w++) {
        /* the STEPs sched_place_steps adds: one per iteration of each stage the worker
         * holds, or per backward where each round steps (only room: a list that needs
         * more grows) */
        for (int st = 0; st < s->nstages && !each; st++)
            room[w] += sched_hosts(s, w, st) ? s->iterations : 0;
        /* the kinds counted first (one load and an increment per action); the STEPs,
         * which only an imported order has, taken out in a second scan */
        int nk[32] = {0}, n = 0;
        const action *a = lists[w].a;
        for (int i = 0; i < lists[w].n; i++) nk[a[i].kind & 31]++;
        int seen_i = nk[ACT_I] > 0;
        room[w] += each ? nk[ACT_B] + nk[ACT_W] : 0;
        fused &= !nk[ACT_ALLREDUCE];
        for (int i = 0; nk[ACT_STEP] && i < lists[w].n; i++) {
            if (lists[w].a[i].kind == ACT_STEP) {
                action st = lists[w].a[i];
                st.microbatch = n; /* the anchor: compute actions before it */
                if (actvec_push(&steps[w], st)) goto oom;
            } else {
                if (n < i) lists[w].a[n] = lists[w].a[i]; /* written only once moved */
                n++;
            }
        }
        if (!nk[ACT_STEP]) n = lists[w].n;
        *any_i |= seen_i;
        lists[w].n = n;
        fused &= !steps[w].n;
    }
    for (int w = 0; w < W; w++) room[w] += steps[w].n;
    if (lower_compute(s, lists, cost, room, fused, counts, err)) goto done;
    *placed = fused;
    for (int w = 0; w < W; w++) {
        if (!steps[w].n) continue;
        int *after = malloc((size_t)steps[w].n * sizeof *after);
        if (!after) goto oom;
        int k = 0, seen = 0;
        for (int i = -1; i < lists[w].n && k < steps[w].n; i++) {
            if (i >= 0 && !act_is_comm(lists[w].a[i].kind)) seen++;
            while (k < steps[w].n && steps[w].a[k].microbatch == seen) {
                int j = i;
                while (j + 1 < lists[w].n && act_is_comm(lists[w].a[j + 1].kind)) j++;
                after[k++] = j;
            }
        }
        while (k < steps[w].n) after[k++] = lists[w].n - 1;
        for (int q = 0; q < steps[w].n; q++) {
            steps[w].a[q].microbatch = -1;
            if (q && after[q] < after[q - 1]) after[q] = after[q - 1];
        }
        int bad = sched_insert_after(&lists[w], after, steps[w].a, steps[w].n);
        free(after);
        if (bad) goto oom;
    }
    rc = 0;
    goto done;
oom:
    err_set(err, NULL, NULL, "out of memory");
done:
    for (int w = 0; w < W; w++) actvec_free(&steps[w]);
    free(steps), free(room);
    return rc;
}

int sched_lower(const schedule *s, actvec *lists, const double *cost, plumb_err *err)
{
    int any_i = 0, placed = 0;
    return lower_lists(s, lists, cost, 0, &any_i, &placed, NULL, err);
}

int sched_finish(schedule *s, actvec *lists, const double *cost, plumb_err *err)
{
    int any_i = 0, placed = 0, *counts = NULL;
    if (sched_add_allreduce(s, lists, err)) return -1;
    if (lower_lists(s, lists, cost, 1, &any_i, &placed, &counts, err)) {
        free(counts);
        return -1;
    }
    if (!placed) {
        if (sched_place_steps(s, lists, err)) return -1;
        sched_assign_versions(s, lists);
    }
    /* the lowering read every compute: whether the cost model needs I's costs is known
     * (the steps and versions add no compute) */
    s->backward_split = any_i ? SCHED_SPLIT_YES : SCHED_SPLIT_NO;
    if (sched_adopt(s, lists, err)) {
        free(counts);
        return -1;
    }
    s->counts = counts; /* after the adoption, which drops counts of older lists */
    return 0;
}
