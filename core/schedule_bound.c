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
 * the same values. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "schedule_impl.h"
#include "schedule_vclock.h"

/* -1: the clocks are kept sparse (schedule_vclock.h) when they have more than 128
 * components and at least half the workers are replicas of replicated stages (dense, a
 * message and an all-reduce cost O(K) each, so O(replicas^2) with hundreds of replicas;
 * without all-reduces to share bases, as in a deep pipeline, sparse clocks grow dense and
 * cost more); 0: always dense; 1: always sparse. */
int sched_bound_sparse = -1;

typedef struct bctx {
    int W, S, T;
    int K;             /* clock components kept: the workers that take counted messages */
    int *tix;          /* [W] a worker's component, or -1 (no counted receive: no send
                          ever asks how many of its actions precede it, and a component
                          is joined, copied and raised apart from the others) */
    size_t n;          /* S x T: messages of one direction */
    int *pc;           /* [W] next action of each worker */
    int *clock;        /* [W x K] clock[w * K + tix[v]]: v's actions known to precede w's
                          next */
    int **msg;         /* [2n] the sender's clock of each posted message; NULL: not posted */
    int *arc;          /* [W x S] all-reduces of each stage done by each worker */
    int *roff;         /* [W + 1] the positions of worker b's computations that take
                          counted messages are rrecv[roff[b] .. roff[b + 1]), sorted by
                          (sender, position) */
    struct brecv { int peer, pos; } *rrecv;
    int *goff;         /* [W + 1] worker b's senders are grp[goff[b] .. goff[b + 1]) */
    struct bgroup {    /* a pair (sender peer -> b): its takes end at rrecv[end], those
                          before rrecv[cur] are the ones counted so far; its sends so far
                          and its bound */
        int peer, end, cur, sent, bound;
    } *grp;
    int *waiting;      /* [W] 1 while the worker waits at an all-reduce of its own stage */
    int *nwaiting;     /* [S] replicas of each stage waiting at its all-reduce */
    int **pool;        /* dense message clocks free for reuse: pool[0 .. npool) */
    int npool;
    int sparse;        /* 1: the clocks below, not clock and msg */
    vcset vs;
    vclock *vck;       /* [W] each worker's clock */
    vclock *vmsg;      /* [2n] each posted message's; base -1: not posted */
    vclock **vgrp;     /* [W] scratch: the clocks of an all-reduce's replicas */
} bctx;

static void bctx_free(bctx *c)
{
    for (size_t i = 0; c->msg && i < 2 * c->n; i++) free(c->msg[i]);
    for (int i = 0; i < c->npool; i++) free(c->pool[i]);
    for (int w = 0; c->vck && w < c->W; w++) vc_release(&c->vs, &c->vck[w]);
    for (size_t i = 0; c->vmsg && i < 2 * c->n; i++) vc_release(&c->vs, &c->vmsg[i]);
    vc_set_free(&c->vs);
    free(c->pc), free(c->clock), free(c->msg), free(c->arc), free(c->roff), free(c->rrecv);
    free(c->goff), free(c->grp), free(c->tix);
    free(c->waiting), free(c->nwaiting), free(c->pool), free(c->vck), free(c->vmsg);
    free(c->vgrp);
}

/* 1 when x sends a message of a kind in `sends`. */
static int counted_send(const action *x, unsigned sends)
{
    return act_is_send(x->kind) && (sends & (1u << x->kind));
}

/* 1 when x receives a message of a kind in `sends`. */
static int counted_recv(const action *x, unsigned sends)
{
    return (x->kind == ACT_RECV_F && (sends & (1u << ACT_SEND_F))) ||
           (x->kind == ACT_RECV_B && (sends & (1u << ACT_SEND_B)));
}

/* The message slot of a SEND or RECV (as the buffered replay of schedule_validate.c). */
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

static int brecv_cmp(const void *x, const void *y)
{
    const struct brecv *a = x, *b = y;
    if (a->peer != b->peer) return (a->peer > b->peer) - (a->peer < b->peer);
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Sorts each receiver's rrecv range by (sender, position), as brecv_cmp orders. A range
 * holds the takes of the receiver's own scan, ascending in position, and the marks
 * (sender, INT_MAX) of its senders' scans, from a few senders: so per sender in
 * increasing order its takes in array order, then its marks (alike). A range with more
 * than 16 senders is sorted with qsort. 0, or -1 out of memory. */
static int sort_takes(bctx *c)
{
    enum { FEWP = 16 };
    int most = 0;
    for (int b = 0; b < c->W; b++)
        if (c->roff[b + 1] - c->roff[b] > most) most = c->roff[b + 1] - c->roff[b];
    struct brecv *tmp = malloc(((size_t)most + 1) * sizeof *tmp);
    if (!tmp) return -1;
    for (int b = 0; b < c->W; b++) {
        struct brecv *r = c->rrecv + c->roff[b];
        int n = c->roff[b + 1] - c->roff[b], peers[FEWP], np = 0;
        for (int i = 0; i < n && np <= FEWP; i++) {
            int q = 0;
            while (q < np && peers[q] != r[i].peer) q++;
            if (q == np) {
                if (np == FEWP) { np++; break; }
                int j = np++; /* insertion in increasing order */
                while (j > 0 && peers[j - 1] > r[i].peer) peers[j] = peers[j - 1], j--;
                peers[j] = r[i].peer;
            }
        }
        if (np > FEWP) {
            qsort(r, (size_t)n, sizeof *r, brecv_cmp);
            continue;
        }
        int o = 0;
        for (int q = 0; q < np; q++) {
            for (int i = 0; i < n; i++)
                if (r[i].peer == peers[q] && r[i].pos != INT_MAX) tmp[o++] = r[i];
            for (int i = 0; i < n; i++)
                if (r[i].peer == peers[q] && r[i].pos == INT_MAX) tmp[o++] = r[i];
        }
        memcpy(r, tmp, (size_t)n * sizeof *r);
    }
    free(tmp);
    return 0;
}

static int bctx_init(bctx *c, const schedule *s, unsigned sends)
{
    int W = s->nworkers;
    c->W = W, c->S = s->nstages, c->T = sched_total_mb(s);
    c->n = (size_t)c->S * (size_t)c->T;
    c->pc = calloc((size_t)W, sizeof *c->pc);
    c->msg = calloc(2 * c->n + 1, sizeof *c->msg);
    c->arc = calloc((size_t)W * c->S + 1, sizeof *c->arc);
    c->roff = calloc((size_t)W + 1, sizeof *c->roff);
    c->waiting = calloc((size_t)W, sizeof *c->waiting);
    c->nwaiting = calloc((size_t)c->S, sizeof *c->nwaiting);
    if (!c->pc || !c->msg || !c->arc || !c->roff || !c->waiting || !c->nwaiting)
        return -1;
    /* per receiver b: the positions of its computations that take counted messages
     * (sender, position), and for each counted send to b a mark (sender, INT_MAX) that
     * makes the pair known without being counted; pend[d]: the sender of posted message
     * d whose taker is still to come */
    int *pend = malloc((2 * c->n + 1) * sizeof *pend);
    int *fill = malloc(((size_t)W + 1) * sizeof *fill);
    if (!pend || !fill) {
        free(pend), free(fill);
        return -1;
    }
    for (size_t d = 0; d < 2 * c->n; d++) pend[d] = -1; /* and so after each worker */
    for (int pass = 0; pass < 2; pass++) { /* 0: count per receiver, 1: fill */
        for (int b = 0; b < W; b++) {
            long open = 0; /* pend entries b set and has not taken */
            for (int i = 0; i < s->len[b]; i++) {
                const action *x = &s->acts[b][i];
                size_t d = taken_slot(c, x);
                if (counted_send(x, sends) && x->peer >= 0 && x->peer < W) {
                    if (pass) c->rrecv[fill[x->peer]++] = (struct brecv){b, INT_MAX};
                    else c->roff[x->peer]++;
                }
                if (counted_recv(x, sends) && x->peer >= 0 && x->peer < W) {
                    d = msg_slot(c, x);
                    if (d < 2 * c->n && pend[d] < 0) pend[d] = x->peer, open++;
                } else if (d < 2 * c->n && pend[d] >= 0) {
                    if (pass) c->rrecv[fill[b]++] = (struct brecv){pend[d], i};
                    else c->roff[b]++;
                    pend[d] = -1, open--;
                }
            }
            /* receives never taken (an invalid IR): none open, nothing to undo */
            for (int i = 0; open && i < s->len[b]; i++) {
                const action *x = &s->acts[b][i];
                size_t d = msg_slot(c, x);
                if (counted_recv(x, sends) && d < 2 * c->n) pend[d] = -1;
            }
        }
        if (pass) break;
        size_t nr = 0;
        for (int b = 0; b <= W; b++) { /* counts to offsets */
            size_t k = b < W ? (size_t)c->roff[b] : 0;
            c->roff[b] = fill[b] = (int)nr;
            nr += k;
        }
        c->rrecv = malloc((nr + 1) * sizeof *c->rrecv);
        if (!c->rrecv) {
            free(pend), free(fill);
            return -1;
        }
    }
    free(pend), free(fill);
    if (sort_takes(c)) return -1;
    int nr = c->roff[W];
    c->goff = malloc(((size_t)W + 1) * sizeof *c->goff);
    c->grp = malloc((nr + 1) * sizeof *c->grp);
    if (!c->goff || !c->grp) return -1;
    int ng = 0;
    for (int b = 0; b < W; b++) {
        c->goff[b] = ng;
        for (int i = c->roff[b]; i < c->roff[b + 1]; i++) {
            if (i == c->roff[b] || c->rrecv[i].peer != c->rrecv[i - 1].peer)
                c->grp[ng++] = (struct bgroup){c->rrecv[i].peer, i, i, 0, 0};
            c->grp[ng - 1].end = i + 1;
        }
    }
    c->goff[W] = ng;
    c->tix = malloc((size_t)W * sizeof *c->tix);
    if (!c->tix) return -1;
    c->K = 0;
    for (int b = 0; b < W; b++) c->tix[b] = c->roff[b + 1] > c->roff[b] ? c->K++ : -1;
    /* (takes without a counted send to b give b a component that is never asked:
     * harmless) */
    int nrep = 0;
    for (int st = 0; st < c->S; st++)
        if (s->replicas[st] > 1) nrep += s->replicas[st];
    c->sparse = sched_bound_sparse >= 0 ? sched_bound_sparse
                                        : c->K > 128 && 2 * nrep >= W;
    if (!c->sparse) {
        c->clock = calloc((size_t)W * c->K + 1, sizeof *c->clock);
        c->pool = malloc(((size_t)2 * c->n + 1) * sizeof *c->pool);
        return c->clock && c->pool ? 0 : -1;
    }
    c->vck = calloc((size_t)W, sizeof *c->vck);
    c->vmsg = calloc(2 * c->n + 1, sizeof *c->vmsg);
    c->vgrp = malloc(((size_t)W + 1) * sizeof *c->vgrp);
    if (!c->vck || !c->vmsg || !c->vgrp || vc_set_init(&c->vs, c->K)) return -1;
    for (int w = 0; w < W; w++) vc_zero(&c->vs, &c->vck[w]);
    for (size_t d = 0; d < 2 * c->n; d++) c->vmsg[d].base = -1;
    return 0;
}

/* The pair a -> b (every pair with a counted send has one). */
static struct bgroup *pair_of(bctx *c, int b, int a)
{
    int lo = c->goff[b], hi = c->goff[b + 1];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->grp[mid].peer < a) lo = mid + 1;
        else hi = mid;
    }
    return &c->grp[lo];
}

/* The pair's messages taken among b's first k actions. Successive calls for one pair
 * come with k never smaller (a's clock only grows), so the count moves forward over the
 * pair's takes once in the whole replay (the marks of its sends, at INT_MAX, stay
 * behind). */
static int recvs_before(bctx *c, int b, struct bgroup *g, int k)
{
    while (g->cur < g->end && c->rrecv[g->cur].pos < k) g->cur++;
    int first = g == &c->grp[c->goff[b]] ? c->roff[b] : g[-1].end;
    return g->cur - first;
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

/* into = max(into, from), component by component: 4 at a time in vector registers (GCC
 * and clang's vector extensions; x86-64's SSE2 has no integer max, so a compare and a
 * select), for a clock is joined at every message taken. */
typedef int vc4 __attribute__((vector_size(16)));
static void clock_join(int *restrict into, const int *restrict from, int W)
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

/* Component k of worker w's clock. */
static int ck_get(const bctx *c, int w, int k)
{
    return c->sparse ? vc_get(&c->vs, &c->vck[w], k) : c->clock[(size_t)w * c->K + k];
}

/* Worker w's own component one up (after one of its actions). 0 or -1 (memory). */
static int ck_tick(bctx *c, int w)
{
    int k = c->tix[w];
    if (k < 0) return 0;
    if (!c->sparse) {
        c->clock[(size_t)w * c->K + k]++;
        return 0;
    }
    return vc_raise(&c->vs, &c->vck[w], k, vc_get(&c->vs, &c->vck[w], k) + 1);
}

/* Message d posted by worker w: it carries w's clock with w's send counted (the send
 * itself precedes its receive). 0 or -1. */
static int msg_post(bctx *c, size_t d, int w)
{
    int own = c->tix[w];
    if (c->sparse) {
        vclock *m = &c->vmsg[d];
        vc_drop(&c->vs, m);
        if (vc_copy(&c->vs, m, &c->vck[w])) return -1;
        return own >= 0 ? vc_raise(&c->vs, m, own, vc_get(&c->vs, m, own) + 1) : 0;
    }
    if (!c->msg[d]) {
        c->msg[d] = c->npool ? c->pool[--c->npool] : malloc((size_t)c->K * sizeof(int) + 1);
        if (!c->msg[d]) return -1;
    }
    memcpy(c->msg[d], c->clock + (size_t)w * c->K, (size_t)c->K * sizeof(int));
    if (own >= 0) c->msg[d][own]++;
    return 0;
}

static int msg_posted(const bctx *c, size_t d)
{
    return c->sparse ? c->vmsg[d].base >= 0 : c->msg[d] != NULL;
}

/* Worker w takes posted message d: its clock joins the message's. 0 or -1. */
static int msg_take(bctx *c, size_t d, int w)
{
    if (c->sparse) {
        int rc = vc_join(&c->vs, &c->vck[w], &c->vmsg[d]);
        vc_drop(&c->vs, &c->vmsg[d]);
        return rc;
    }
    clock_join(c->clock + (size_t)w * c->K, c->msg[d], c->K);
    c->pool[c->npool++] = c->msg[d];
    c->msg[d] = NULL;
    return 0;
}

/* The all-reduce of the r replicas grp[] (w among them), a barrier: each replica's
 * all-reduce precedes every replica's next action. 0 or -1. */
static int barrier(bctx *c, const int *grp, int r, int w)
{
    for (int j = 0; j < r; j++)
        if (ck_tick(c, grp[j])) return -1;
    if (c->sparse) {
        for (int j = 0; j < r; j++) c->vgrp[j] = &c->vck[grp[j]];
        return vc_join_all(&c->vs, c->vgrp, r);
    }
    const int K = c->K;
    int *ck = c->clock + (size_t)w * K;
    for (int j = 0; j < r; j++)
        if (grp[j] != w) clock_join(ck, c->clock + (size_t)grp[j] * K, K);
    for (int j = 0; j < r; j++)
        if (grp[j] != w) memcpy(c->clock + (size_t)grp[j] * K, ck, (size_t)K * sizeof(int));
    return 0;
}

/* Runs w's next action if it can. Returns 1 when it ran, 0 when it waits, -1 when out of
 * memory. */
static int step(bctx *c, const schedule *s, int w, unsigned sends)
{
    const int W = c->W;
    const action *a = &s->acts[w][c->pc[w]];
    __builtin_prefetch(a + 8); /* the workers' lists are read in turn: fetch ahead */
    if (act_is_comm(a->kind)) {
        if (a->peer < 0 || a->peer >= W || a->microbatch < 0 || a->microbatch >= c->T)
            return 0;
        size_t d = msg_slot(c, a);
        if (d >= 2 * c->n) return 0;
        if (act_is_send(a->kind)) {
            int b = a->peer;
            if (msg_post(c, d, w)) return -1;
            if (sends & (1u << a->kind)) {
                struct bgroup *g = pair_of(c, b, w);
                int known = c->tix[b] >= 0 ? ck_get(c, w, c->tix[b]) : 0;
                int waiting = ++g->sent - recvs_before(c, b, g, known);
                if (waiting > g->bound) g->bound = waiting;
            }
        } else if (!msg_posted(c, d)) {
            return 0; /* the replay runs the receive once sent: one timing among all */
        }
    } else if (a->kind == ACT_ALLREDUCE) {
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
        }
        return 1;
    }
    size_t d = taken_slot(c, a);
    if (d < 2 * c->n && msg_posted(c, d) && msg_take(c, d, w)) /* the data has arrived */
        return -1;
    if (ck_tick(c, w)) return -1;
    c->pc[w]++;
    return 1;
}

/* Runs the replay into c (initialized here; the caller frees it with bctx_free).
 * 0, or -1 with err. */
static int bound_run(bctx *c, const schedule *s, unsigned sends, plumb_err *err)
{
    const int W = s->nworkers;
    if (bctx_init(c, s, sends)) return err_set(err, NULL, NULL, "out of memory");
    for (;;) {
        int progress = 0, left = 0;
        for (int w = 0; w < W; w++)
            while (c->pc[w] < s->len[w]) {
                int r = step(c, s, w, sends);
                if (r < 0) return err_set(err, NULL, NULL, "out of memory");
                if (!r) break;
                progress = 1;
            }
        for (int w = 0; w < W; w++) left += c->pc[w] < s->len[w];
        if (!left) return 0;
        if (!progress) {
            int w = 0;
            while (c->pc[w] >= s->len[w]) w++;
            char t[48];
            return err_set(err, NULL, NULL, "schedule: worker %d waits for ever at action %d "
                           "(%s) with buffered sends", w, c->pc[w],
                           action_format(&s->acts[w][c->pc[w]], t, sizeof t));
        }
    }
}

int schedule_send_bound(const schedule *s, unsigned sends, int *bound, plumb_err *err)
{
    if (!s || !bound) return err_set(err, NULL, NULL, "no schedule");
    const int W = s->nworkers;
    memset(bound, 0, (size_t)W * W * sizeof *bound);
    bctx c = {0};
    int rc = bound_run(&c, s, sends, err);
    for (int b = 0; !rc && b < W; b++)
        for (int g = c.goff[b]; g < c.goff[b + 1]; g++)
            bound[(size_t)c.grp[g].peer * W + b] = c.grp[g].bound;
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
    *out = NULL, *n = 0;
    bctx c = {0};
    int rc = bound_run(&c, s, sends, err);
    if (!rc) {
        int W = s->nworkers, np = c.goff[W];
        sched_pair_bound *p = malloc(((size_t)np + 1) * sizeof *p);
        if (!p) {
            rc = err_set(err, NULL, NULL, "out of memory");
        } else {
            for (int b = 0, k = 0; b < W; b++)
                for (int g = c.goff[b]; g < c.goff[b + 1]; g++, k++)
                    p[k] = (sched_pair_bound){c.grp[g].peer, b, c.grp[g].bound};
            qsort(p, (size_t)np, sizeof *p, pair_cmp);
            *out = p, *n = np;
        }
    }
    bctx_free(&c);
    return rc;
}
