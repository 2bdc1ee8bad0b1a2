/* schedule_bound.c: how many messages a pair of workers can have in flight at once, over
 * every timing of a schedule. A replay under buffered sends carries a vector clock per
 * worker (for each worker, how many of its actions must have happened before this one);
 * a message carries its sender's clock to the computation that takes it (a RECV only
 * posts the receive: the F that consumes the activations, or the B/I that consumes the
 * gradient, waits for the data and frees its staging), and an all-reduce joins its
 * replicas' clocks. At each SEND of worker a to worker b, the messages of a that b must
 * already have taken are those whose consumer is among b's first clock[b] actions; the
 * sends so far less those is the most messages of the pair that can be waiting at that
 * SEND, and running exactly the actions before it (with b as late as it may be) reaches
 * it. The executor's local transport sets aside that many staging buffers per pair for
 * gradients, and the simulator's memory model counts them. With hundreds of replicas the
 * clocks are kept sparse over shared bases (schedule_vclock.h, sched_bound_sparse), with
 * the same values. Dense clocks take 16-bit components where no list is longer than
 * 65535 actions (a component counts actions of one list), half the bytes copied with
 * each message and joined at each take (sched_bound_narrow).
 *
 * One pass over the actions: the replay runs each worker until it waits (a receive whose
 * message is not posted, an all-reduce its replicas have not all reached), and the action
 * that ends the wait marks it ready, so no wait is looked at twice. A take is noted on
 * its pair when its consumer runs: clock[b] of a sender never exceeds the actions b has
 * run, so every take a SEND asks about has been noted. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "grow.h"
#include "schedule.h"
#include "schedule_impl.h"
#include "schedule_vclock.h"

/* -1: the clocks are kept sparse (schedule_vclock.h) when they have more than 128
 * components and at least half the workers are replicas of replicated stages (dense, a
 * message and an all-reduce cost O(K) each, so O(replicas^2) with hundreds of replicas;
 * without all-reduces to share bases, as in a deep pipeline, sparse clocks grow dense and
 * cost more); 0: always dense; 1: always sparse. */
int sched_bound_sparse = -1;

/* -1: dense clocks have 16-bit components when every list has at most 65535 actions, else
 * 32-bit; 0: always 32-bit (tests compare the two). */
int sched_bound_narrow = -1;

typedef struct bpair {  /* the pair (from -> to) */
    int from, to;
    int sent, bound;     /* counted sends so far; the most waiting at one */
    int known;           /* its takes known to `from` so far */
    int qh, qn, qcap;    /* positions of the takes noted and not yet known: q[qh .. qh+qn) */
    int *q;
} bpair;

typedef struct bctx {
    int W, S, T;
    int K;             /* clock components kept: the workers a counted message may go to */
    int *tix;          /* [W] a worker's component, or -1 (no counted message of the
                          placement's comes to it: no send ever asks how many of its
                          actions precede it) */
    size_t n;          /* S x T: messages of one direction */
    unsigned sends;
    int *pc;           /* [W] next action of each worker */
    void *clock;       /* [W x K] dense: component v of row w: v's actions known to precede
                          w's next; unsigned short components when narrow, else int */
    int narrow;        /* dense: 16-bit components (every list at most 65535 long) */
    int Kp;            /* dense: components stored per clock, K rounded up to a whole
                          16 bytes (the ones past K stay 0) */
    size_t rowb;       /* dense: bytes of a clock, Kp components */
    int *slot;         /* [2n] each message: 0 not posted; > 0 posted (dense: its clock is
                          pool entry slot - 1); < 0 waited for, -(first waiter + 1) */
    long long *pend;   /* [2n] a counted receive posted and its data not yet taken:
                          (receiver + 1) << 32 | sender; 0: none (others: ov below) */
    struct bov { int b, p; size_t d; } *ov; /* pending receives whose slot of pend was
                          held by another receiver */
    int nov, capov;
    void *pool;        /* dense message clocks [pcap x K], components as clock's */
    int *pfree;        /* free entries of pool: pfree[0 .. npfree) */
    int pcap, pused, npfree;
    unsigned long long *rdy; /* [W / 64 + 1] bit w: worker w may run on */
    int *wnext;        /* [W] the next worker waiting for the same message, or -1 */
    int *arc;          /* [W x S] all-reduces of each stage done by each worker */
    int *waiting;      /* [W] 1 while the worker waits at an all-reduce of its own stage */
    int *nwaiting;     /* [S] replicas of each stage waiting at its all-reduce */
    bpair *pr;         /* the pairs, in order of first use */
    int npr, cappr;
    int *ph;           /* open-addressing index of pr by (from, to): -1 empty */
    int phcap;         /* a power of two, at least 2 npr */
    int *scache, *rcache; /* [2W] the last two pairs a worker sent on / took from (a
                             worker of two chunks alternates between two neighbours) */
    int sparse;        /* 1: the clocks below, not clock and pool */
    vcset vs;
    vclock *vck;       /* [W] each worker's clock */
    vclock *vmsg;      /* [2n] each posted message's; base -1: not posted */
    vclock **vgrp;     /* [W] scratch: the clocks of an all-reduce's replicas */
} bctx;

static void bctx_free(bctx *c)
{
    for (int w = 0; c->vck && w < c->W; w++) vc_release(&c->vs, &c->vck[w]);
    for (size_t i = 0; c->vmsg && i < 2 * c->n; i++) vc_release(&c->vs, &c->vmsg[i]);
    vc_set_free(&c->vs);
    for (int i = 0; i < c->npr; i++) free(c->pr[i].q);
    free(c->pc), free(c->tix), free(c->clock), free(c->slot), free(c->pend), free(c->ov), free(c->pool);
    free(c->pfree), free(c->rdy), free(c->wnext), free(c->arc);
    free(c->waiting), free(c->nwaiting), free(c->pr), free(c->ph), free(c->scache);
    free(c->rcache), free(c->vck), free(c->vmsg), free(c->vgrp);
}

/* The message slot of a SEND or RECV, or 2n when its fields are out of range: the
 * microbatches of one stage and direction lie in a row, which each worker walks along. */
static size_t msg_slot(const bctx *c, const action *a)
{
    if (a->microbatch < 0 || a->microbatch >= c->T || a->stage < 0 || a->stage >= c->S ||
        a->peer_stage < 0 || a->peer_stage >= c->S)
        return 2 * c->n;
    int grad = a->kind == ACT_SEND_B || a->kind == ACT_RECV_B;
    int st = act_is_send(a->kind) ? a->stage : a->peer_stage;
    return (size_t)grad * c->n + (size_t)st * c->T + (size_t)a->microbatch;
}

/* The message slot whose data compute action a takes when its RECV was posted (F: its
 * input activations, B/I: its output gradient), or 2n when a takes none. */
static size_t taken_slot(const bctx *c, const action *a)
{
    if (a->microbatch < 0 || a->microbatch >= c->T) return 2 * c->n;
    if (a->kind == ACT_F && a->stage > 0 && a->stage < c->S)
        return (size_t)(a->stage - 1) * c->T + (size_t)a->microbatch;
    if ((a->kind == ACT_B || a->kind == ACT_I) && a->stage >= 0 && a->stage + 1 < c->S)
        return c->n + (size_t)(a->stage + 1) * c->T + (size_t)a->microbatch;
    return 2 * c->n;
}

static size_t pair_hash(int from, int to, int cap)
{
    unsigned long long x = ((unsigned long long)(unsigned)from << 32 | (unsigned)to) *
                           0x9e3779b97f4a7c15ULL;
    return (size_t)(x >> 32) & (size_t)(cap - 1);
}

/* The pair from -> to, made on first use; its index, or -1 out of memory. */
static int pair_get(bctx *c, int from, int to)
{
    size_t i = pair_hash(from, to, c->phcap);
    for (; c->ph[i] >= 0; i = (i + 1) & (size_t)(c->phcap - 1))
        if (c->pr[c->ph[i]].from == from && c->pr[c->ph[i]].to == to) return c->ph[i];
    if (c->npr == c->cappr) {
        int cap = 2 * c->cappr;
        bpair *p = realloc(c->pr, (size_t)cap * sizeof *p);
        if (!p) return -1;
        c->pr = p, c->cappr = cap;
    }
    int k = c->npr++;
    c->pr[k] = (bpair){.from = from, .to = to};
    c->ph[i] = k;
    if (2 * c->npr > c->phcap) { /* grow the index */
        int cap = 2 * c->phcap, *h = malloc((size_t)cap * sizeof *h);
        if (!h) return -1;
        memset(h, 0xff, (size_t)cap * sizeof *h);
        for (int j = 0; j < c->npr; j++) {
            size_t at = pair_hash(c->pr[j].from, c->pr[j].to, cap);
            while (h[at] >= 0) at = (at + 1) & (size_t)(cap - 1);
            h[at] = j;
        }
        free(c->ph);
        c->ph = h, c->phcap = cap;
    }
    return k;
}

/* pair_get through the worker's last two pairs (cache: scache or rcache), the one found
 * put first. */
static inline __attribute__((always_inline)) int pair_cached(bctx *c, int *cache, int w,
                                                             int from, int to)
{
    int *two = cache + 2 * (size_t)w, k = two[0];
    if (k >= 0 && c->pr[k].from == from && c->pr[k].to == to) return k;
    k = two[1];
    if (k < 0 || c->pr[k].from != from || c->pr[k].to != to) k = pair_get(c, from, to);
    two[1] = two[0], two[0] = k;
    return k;
}

/* Bytes of a dense clock component. */
static size_t ck_size(const bctx *c)
{
    return c->narrow ? sizeof(unsigned short) : sizeof(int);
}

/* Row r of dense clocks rows (the worker clocks or the message pool). */
static inline void *ck_row(const bctx *c, void *rows, size_t r)
{
    return (char *)rows + r * c->rowb;
}

/* Sets up c for a replay of s counting `sends`; every: a component for every worker (else
 * for the workers of the stages that counted messages go to in the placement). 0, or -1
 * out of memory. */
static int bctx_init(bctx *c, const schedule *s, unsigned sends, int every)
{
    int W = s->nworkers;
    c->W = W, c->S = s->nstages, c->T = sched_total_mb(s), c->sends = sends;
    c->tix = malloc(((size_t)W + 1) * sizeof *c->tix);
    if (!c->tix) return -1;
    for (int w = 0; w < W; w++) c->tix[w] = every ? w : -1;
    c->K = every ? W : 0;
    for (int st = 0; st < c->S && !every; st++) /* activations go up, gradients down */
        if ((st > 0 && (sends & 1u << ACT_SEND_F)) ||
            (st + 1 < c->S && (sends & 1u << ACT_SEND_B)))
            for (int j = 0; j < s->replicas[st]; j++) {
                int w = s->stage_workers[s->stage_first[st] + j];
                if (w >= 0 && w < W && c->tix[w] < 0) c->tix[w] = c->K++;
            }
    c->n = (size_t)c->S * (size_t)c->T;
    c->pc = calloc((size_t)W + 1, sizeof *c->pc);
    c->slot = calloc(2 * c->n + 1, sizeof *c->slot);
    c->pend = calloc(2 * c->n + 1, sizeof *c->pend);
    c->rdy = calloc((size_t)W / 64 + 1, sizeof *c->rdy);
    c->wnext = malloc(((size_t)W + 1) * sizeof *c->wnext);
    c->arc = calloc((size_t)W * c->S + 1, sizeof *c->arc);
    c->waiting = calloc((size_t)W + 1, sizeof *c->waiting);
    c->nwaiting = calloc((size_t)c->S + 1, sizeof *c->nwaiting);
    c->cappr = 16, c->phcap = 32;
    c->pr = malloc((size_t)c->cappr * sizeof *c->pr);
    c->ph = malloc((size_t)c->phcap * sizeof *c->ph);
    c->scache = malloc((2 * (size_t)W + 1) * sizeof *c->scache);
    c->rcache = malloc((2 * (size_t)W + 1) * sizeof *c->rcache);
    if (!c->pc || !c->slot || !c->pend || !c->rdy || !c->wnext || !c->arc ||
        !c->waiting || !c->nwaiting || !c->pr || !c->ph || !c->scache || !c->rcache)
        return -1;
    memset(c->ph, 0xff, (size_t)c->phcap * sizeof *c->ph);
    for (int w = 0; w < 2 * W; w++) c->scache[w] = c->rcache[w] = -1;
    int nrep = 0;
    for (int st = 0; st < c->S; st++)
        if (s->replicas[st] > 1) nrep += s->replicas[st];
    c->sparse = sched_bound_sparse >= 0 ? sched_bound_sparse
                                        : c->K > 128 && 2 * nrep >= W;
    if (!c->sparse) {
        int longest = 0;
        for (int w = 0; w < W; w++) longest = s->len[w] > longest ? s->len[w] : longest;
        c->narrow = sched_bound_narrow != 0 && longest <= USHRT_MAX;
        int per16 = (int)(16 / ck_size(c));
        c->Kp = (c->K + per16 - 1) / per16 * per16;
        c->rowb = (size_t)c->Kp * ck_size(c);
        c->clock = calloc((size_t)W * c->Kp + 1, ck_size(c));
        return c->clock ? 0 : -1;
    }
    c->vck = calloc((size_t)W, sizeof *c->vck);
    c->vmsg = calloc(2 * c->n + 1, sizeof *c->vmsg);
    c->vgrp = malloc(((size_t)W + 1) * sizeof *c->vgrp);
    if (!c->vck || !c->vmsg || !c->vgrp || vc_set_init(&c->vs, c->K)) return -1;
    for (int w = 0; w < W; w++) vc_zero(&c->vs, &c->vck[w]);
    for (size_t d = 0; d < 2 * c->n; d++) c->vmsg[d].base = -1;
    return 0;
}

/* Marks w ready to run on. */
static void ready(bctx *c, int w)
{
    c->rdy[w >> 6] |= 1ull << (w & 63);
}

/* The first ready worker from w on, or -1; it is no longer marked. */
static int next_ready(bctx *c, int w)
{
    for (int i = w >> 6, n = c->W / 64 + 1; i < n; i++) {
        unsigned long long b = c->rdy[i] & (i == w >> 6 ? ~0ull << (w & 63) : ~0ull);
        if (b) {
            int v = i * 64 + __builtin_ctzll(b);
            c->rdy[i] &= ~(1ull << (v & 63));
            return v;
        }
    }
    return -1;
}

/* 1 when every replica of a's stage waits at the same all-reduce of it as worker w. A
 * replica's first look counts it among its stage's waiting replicas: replicas run their
 * stage's all-reduces together, so those waiting all wait at the same one, and the last
 * to come finds them all there without looking at each (linear in the replicas). */
static int allreduce_ready(bctx *c, const schedule *s, int w, const action *a)
{
    int st = a->stage, kth = c->arc[w * c->S + st];
    if (sched_hosts(s, w, st)) {
        if (!c->waiting[w]) c->waiting[w] = 1, c->nwaiting[st]++;
        return c->nwaiting[st] == s->replicas[st];
    }
    for (int j = 0; j < s->replicas[st]; j++) {
        int v = s->stage_workers[s->stage_first[st] + j];
        if (!(c->pc[v] < s->len[v] && s->acts[v][c->pc[v]].kind == ACT_ALLREDUCE &&
              s->acts[v][c->pc[v]].stage == st && c->arc[v * c->S + st] == kth))
            return 0;
    }
    return 1;
}

/* into = max(into, from), component by component: 4 (8 narrow) at a time in vector
 * registers (GCC and clang's vector extensions; x86-64's SSE2 has no 32-bit nor unsigned
 * 16-bit max, so a compare and a select), for a clock is joined at every message taken. */
typedef int vc4 __attribute__((vector_size(16)));
typedef unsigned short vc8 __attribute__((vector_size(16)));
static void clock_join32(int *restrict into, const int *restrict from, int W)
{
    int v = 0;
    for (; v + 4 <= W; v += 4) {
        vc4 a, b;
        memcpy(&a, into + v, sizeof a);
        memcpy(&b, from + v, sizeof b);
        vc4 gt = b > a;
        a = (b & gt) | (a & ~gt);
        memcpy(into + v, &a, sizeof a);
    }
    for (; v < W; v++) into[v] = from[v] > into[v] ? from[v] : into[v];
}

static void clock_join16(unsigned short *restrict into, const unsigned short *restrict from,
                         int W)
{
    int v = 0;
#ifdef __SSE2__
    /* max(a, b) = a + (b - a saturated at 0): two instructions per 8 components (SSE2
     * has no unsigned 16-bit max) */
    for (; v + 8 <= W; v += 8) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(into + v));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(from + v));
        _mm_storeu_si128((__m128i *)(void *)(into + v), _mm_add_epi16(a, _mm_subs_epu16(b, a)));
    }
#else
    for (; v + 8 <= W; v += 8) {
        vc8 a, b;
        memcpy(&a, into + v, sizeof a);
        memcpy(&b, from + v, sizeof b);
        vc8 gt = b > a;
        a = (b & gt) | (a & ~gt);
        memcpy(into + v, &a, sizeof a);
    }
#endif
    for (; v < W; v++) into[v] = from[v] > into[v] ? from[v] : into[v];
}

/* Dense clock rows: into = max(into, from). */
static inline void clock_join(const bctx *c, void *into, const void *from)
{
    if (c->narrow)
        clock_join16(into, from, c->Kp);
    else
        clock_join32(into, from, c->Kp);
}

/* Component k of dense clock row m. */
static int ck_at(const bctx *c, const void *m, int k)
{
    return c->narrow ? ((const unsigned short *)m)[k] : ((const int *)m)[k];
}

/* Component k of dense clock row m one up. */
static void ck_inc(const bctx *c, void *m, int k)
{
    if (c->narrow)
        ((unsigned short *)m)[k]++;
    else
        ((int *)m)[k]++;
}

/* Component k of worker w's clock. */
static int ck_get(const bctx *c, int w, int k)
{
    return c->sparse ? vc_get(&c->vs, &c->vck[w], k) : ck_at(c, ck_row(c, c->clock, w), k);
}

/* Sparse: worker w's own component one up (after one of its actions). 0 or -1 (memory).
 * A dense clock's own component is not kept per action: it is the worker's count of
 * actions run (pc), which no message raises (what a message knows of w happened before
 * it), and ck_own writes it where it is read: a message posted, an all-reduce. */
static int ck_tick(bctx *c, int w)
{
    int k = c->tix[w];
    if (k < 0) return 0;
    return vc_raise(&c->vs, &c->vck[w], k, vc_get(&c->vs, &c->vck[w], k) + 1);
}

/* Dense: worker w's own component set to n, its actions run. */
static inline void ck_own(bctx *c, int w, int n)
{
    int k = c->tix[w];
    if (k < 0) return;
    if (c->narrow)
        ((unsigned short *)ck_row(c, c->clock, w))[k] = (unsigned short)n;
    else
        ((int *)ck_row(c, c->clock, w))[k] = n;
}

/* Message d posted by worker w: it carries w's clock with w's send counted (the send
 * itself precedes its receive); the workers waiting for it are made ready. 0 or -1. */
static int msg_post(bctx *c, size_t d, int w)
{
    int at = c->slot[d];
    if (at < 0) { /* its waiters */
        for (int v = -at - 1; v >= 0; v = c->wnext[v]) ready(c, v);
        at = 0;
    }
    if (c->sparse) {
        vclock *m = &c->vmsg[d];
        vc_drop(&c->vs, m);
        int k = c->tix[w];
        if (vc_copy(&c->vs, m, &c->vck[w]) ||
            (k >= 0 && vc_raise(&c->vs, m, k, vc_get(&c->vs, m, k) + 1)))
            return -1;
        c->slot[d] = 1;
        return 0;
    }
    if (!at) { /* a free pool entry (a message posted again keeps its own) */
        if (c->npfree) {
            at = c->pfree[--c->npfree] + 1;
        } else {
            if (c->pused == c->pcap) {
                int cap = c->pcap ? 2 * c->pcap : 64;
                void *p = realloc(c->pool, (size_t)cap * c->rowb + 1);
                int *f = realloc(c->pfree, (size_t)cap * sizeof *f + 1);
                if (p) c->pool = p;
                if (f) c->pfree = f;
                if (!p || !f) return -1;
                c->pcap = cap;
            }
            at = ++c->pused;
        }
        c->slot[d] = at;
    }
    void *m = ck_row(c, c->pool, (size_t)at - 1);
    ck_own(c, w, c->pc[w]);
    memcpy(m, ck_row(c, c->clock, w), c->rowb);
    if (c->tix[w] >= 0) ck_inc(c, m, c->tix[w]);
    return 0;
}

/* Worker w takes posted message d: its clock joins the message's. 0 or -1. */
static int msg_take(bctx *c, size_t d, int w)
{
    if (c->sparse) {
        int rc = vc_join(&c->vs, &c->vck[w], &c->vmsg[d]);
        vc_drop(&c->vs, &c->vmsg[d]);
        c->slot[d] = 0;
        return rc;
    }
    int at = c->slot[d] - 1;
    clock_join(c, ck_row(c, c->clock, w), ck_row(c, c->pool, at));
    c->pfree[c->npfree++] = at;
    c->slot[d] = 0;
    return 0;
}

/* Notes worker b's counted receive of message d from peer p, posted (a later computation
 * of b takes its data). 0 or -1. */
static int pend_note(bctx *c, int b, size_t d, int p)
{
    long long v = c->pend[d], mine = (long long)(b + 1) << 32 | (unsigned)p;
    if (!v) {
        for (int i = 0; i < c->nov; i++)
            if (c->ov[i].b == b && c->ov[i].d == d) return 0; /* already pending */
        c->pend[d] = mine;
        return 0;
    }
    if ((int)(v >> 32) == b + 1) return 0;
    for (int i = 0; i < c->nov; i++)
        if (c->ov[i].b == b && c->ov[i].d == d) return 0;
    /* another receiver holds the slot: an IR the generators never make, kept aside */
    struct bov *o = array_room(c->ov, c->nov, &c->capov, 16, sizeof *o);
    if (!o) return -1;
    c->ov = o;
    c->ov[c->nov++] = (struct bov){b, p, d};
    return 0;
}

/* Worker b's computation at position i takes message d: when b had a counted receive of
 * it pending, the take is noted on the pair (sender -> b). 0 or -1. */
static int take_note(bctx *c, int b, size_t d, int i)
{
    long long v = c->pend[d];
    int p = -1;
    if (v && (int)(v >> 32) == b + 1) {
        p = (int)(unsigned)v;
        c->pend[d] = 0;
    } else {
        for (int k = 0; k < c->nov && p < 0; k++)
            if (c->ov[k].b == b && c->ov[k].d == d) p = c->ov[k].p, c->ov[k] = c->ov[--c->nov];
        if (p < 0) return 0;
    }
    int k = pair_cached(c, c->rcache, b, p, b);
    if (k < 0) return -1;
    bpair *g = &c->pr[k];
    if (g->qh + g->qn == g->qcap) {
        if (g->qh > g->qcap / 2) {
            memmove(g->q, g->q + g->qh, (size_t)g->qn * sizeof *g->q);
            g->qh = 0;
        } else {
            int *q = array_room(g->q, g->qh + g->qn, &g->qcap, 8, sizeof *q);
            if (!q) return -1;
            g->q = q;
        }
    }
    g->q[g->qh + g->qn++] = i;
    return 0;
}

/* A counted SEND of w to b: the messages of the pair b may not have taken yet. 0, -1 out
 * of memory, or -2 when b has no clock component (a send the placement does not make:
 * the replay starts again with one for every worker). */
static int send_count(bctx *c, int w, int b)
{
    if (c->tix[b] < 0) return -2;
    int k = pair_cached(c, c->scache, w, w, b);
    if (k < 0) return -1;
    bpair *g = &c->pr[k];
    int known = ck_get(c, w, c->tix[b]); /* b's actions known to precede this send */
    while (g->qn && g->q[g->qh] < known) g->qh++, g->qn--, g->known++;
    int waiting = ++g->sent - g->known;
    if (waiting > g->bound) g->bound = waiting;
    return 0;
}

/* The all-reduce of the r replicas grp[] (w among them), a barrier: each replica's
 * all-reduce precedes every replica's next action. 0 or -1. */
static int barrier(bctx *c, const int *grp, int r, int w)
{
    if (c->sparse) {
        for (int j = 0; j < r; j++)
            if (ck_tick(c, grp[j])) return -1;
        for (int j = 0; j < r; j++) c->vgrp[j] = &c->vck[grp[j]];
        return vc_join_all(&c->vs, c->vgrp, r);
    }
    for (int j = 0; j < r; j++) ck_own(c, grp[j], c->pc[grp[j]] + 1);
    void *ck = ck_row(c, c->clock, w);
    for (int j = 0; j < r; j++)
        if (grp[j] != w) clock_join(c, ck, ck_row(c, c->clock, grp[j]));
    for (int j = 0; j < r; j++)
        if (grp[j] != w) memcpy(ck_row(c, c->clock, grp[j]), ck, c->rowb);
    return 0;
}

/* Runs worker w until it waits or ends (a wait is noted where what ends it finds it).
 * 0, -1 when out of memory, or -2 when a counted message goes to a worker without a
 * clock component (send_count). */
static int run_worker(bctx *c, const schedule *s, int w)
{
    const int W = c->W, len = s->len[w];
    const unsigned sends = c->sends;
    const action *acts = s->acts[w];
    while (c->pc[w] < len) {
        const int i = c->pc[w];
        const action *a = &acts[i];
        __builtin_prefetch(a + 8);
        const int k = a->kind;
        if (act_is_comm(k)) {
            if (a->peer < 0 || a->peer >= W) return 0; /* waits for ever */
            size_t d = msg_slot(c, a);
            if (d >= 2 * c->n) return 0;
            if (act_is_send(k)) {
                int rc = msg_post(c, d, w);
                if (!rc && (sends >> k & 1)) rc = send_count(c, w, a->peer);
                if (rc) return rc;
            } else if (c->slot[d] <= 0) { /* not posted: wait for it */
                c->wnext[w] = c->slot[d] < 0 ? -c->slot[d] - 1 : -1;
                c->slot[d] = -(w + 1);
                return 0;
            } else if ((sends >> (k - 1) & 1) && pend_note(c, w, d, a->peer)) {
                return -1; /* (RECV_F - 1 = SEND_F, RECV_B - 1 = SEND_B) */
            }
        } else if (k == ACT_ALLREDUCE) {
            if (a->stage < 0 || a->stage >= c->S || !allreduce_ready(c, s, w, a)) return 0;
            const int *grp = s->stage_workers + s->stage_first[a->stage];
            int r = s->replicas[a->stage];
            if (barrier(c, grp, r, w)) return -1;
            c->nwaiting[a->stage] = 0;
            for (int j = 0; j < r; j++) {
                int v = grp[j];
                c->waiting[v] = 0;
                c->arc[v * c->S + a->stage]++;
                c->pc[v]++;
                if (v != w) ready(c, v);
            }
            continue;
        } else {
            size_t d = taken_slot(c, a);
            if (d < 2 * c->n) {
                if (c->slot[d] > 0 && msg_take(c, d, w)) return -1; /* the data arrived */
                /* a take of a counted kind (only those are ever pending) */
                if ((sends >> (d < c->n ? ACT_SEND_F : ACT_SEND_B) & 1) &&
                    (c->pend[d] || c->nov) && take_note(c, w, d, i))
                    return -1;
            }
        }
        if (c->sparse && ck_tick(c, w)) return -1;
        c->pc[w]++;
    }
    return 0;
}

/* Runs the replay into c (initialized here; the caller frees it with bctx_free).
 * 0, or -1 with err. */
static int bound_run(bctx *c, const schedule *s, unsigned sends, plumb_err *err)
{
    const int W = s->nworkers;
    for (int every = 0, rc = -2; rc == -2; every = 1) {
        if (every) { /* a send the placement does not make: every worker a component */
            bctx_free(c);
            memset(c, 0, sizeof *c);
        }
        if (bctx_init(c, s, sends, every)) return err_set(err, NULL, NULL, "out of memory");
        /* rounds over the workers in order, each run until it waits, as if every waiting
         * worker were looked at again (a worker made ready by one before it runs in the
         * same round, by one after it in the next): the order decides which messages a
         * computation that comes before its own RECV finds posted, in lists no generator
         * makes */
        for (int w = 0; w < W; w++) ready(c, w);
        rc = 0;
        for (int more = 1; more && !rc;) {
            more = 0;
            for (int w = next_ready(c, 0); w >= 0 && !rc;
                 w = w + 1 < W ? next_ready(c, w + 1) : -1) {
                more = 1;
                rc = run_worker(c, s, w);
            }
        }
        if (rc == -1) return err_set(err, NULL, NULL, "out of memory");
    }
    for (int w = 0; w < W; w++)
        if (c->pc[w] < s->len[w]) {
            char t[48];
            return err_set(err, NULL, NULL, "schedule: worker %d waits for ever at action %d "
                           "(%s) with buffered sends", w, c->pc[w],
                           action_format(&s->acts[w][c->pc[w]], t, sizeof t));
        }
    return 0;
}

int schedule_send_bound(const schedule *s, unsigned sends, int *bound, plumb_err *err)
{
    if (!s || !bound) return err_set(err, NULL, NULL, "no schedule");
    const int W = s->nworkers;
    memset(bound, 0, (size_t)W * W * sizeof *bound);
    sched_pair_bound *p = NULL;
    int np = 0, fast = sched_bound_tree(s, sends, &p, &np, err);
    if (fast) {
        for (int k = 0; fast > 0 && k < np; k++)
            bound[(size_t)p[k].from * W + p[k].to] = p[k].bound;
        free(p);
        return fast > 0 ? 0 : -1;
    }
    bctx c = {0};
    int rc = bound_run(&c, s, sends, err);
    for (int k = 0; !rc && k < c.npr; k++)
        bound[(size_t)c.pr[k].from * W + c.pr[k].to] = c.pr[k].bound;
    bctx_free(&c);
    return rc;
}

static int pair_cmp(const void *x, const void *y)
{
    const sched_pair_bound *a = x, *b = y;
    if (a->from != b->from) return (a->from > b->from) - (a->from < b->from);
    return (a->to > b->to) - (a->to < b->to);
}

int schedule_send_bound_pairs(const schedule *s, unsigned sends, sched_pair_bound **out,
                              int *n, plumb_err *err)
{
    if (!s || !out || !n) return err_set(err, NULL, NULL, "no schedule");
    int fast = sched_bound_tree(s, sends, out, n, err);
    if (fast) return fast > 0 ? 0 : -1;
    bctx c = {0};
    int rc = bound_run(&c, s, sends, err);
    if (!rc) {
        int np = c.npr;
        sched_pair_bound *p = malloc(((size_t)np + 1) * sizeof *p);
        if (!p) {
            rc = err_set(err, NULL, NULL, "out of memory");
        } else {
            for (int k = 0; k < np; k++)
                p[k] = (sched_pair_bound){c.pr[k].from, c.pr[k].to, c.pr[k].bound};
            qsort(p, (size_t)np, sizeof *p, pair_cmp);
            *out = p, *n = np;
        }
    }
    bctx_free(&c);
    return rc;
}
