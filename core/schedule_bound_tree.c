/* schedule_bound_tree.c: schedule_send_bound without its replay, for a generated IR whose
 * workers talk along a forest (every kind with one worker per stage but interleaved on
 * three ranks or more with two chunks or more, whose loop closes a ring). The bound of a
 * pair (a -> b) at a SEND of a is its sends so far less the takes of b that a knows to
 * precede it: those among b's first clock[a][b] actions (schedule_bound.c). When the only
 * path from b to a is their edge, what a knows of b came with b's own messages to a
 * (knowledge that reached a through another neighbour c went from b to c through a, so a
 * had it first), and a message from b carries b's position at its SEND. So clock[a][b] is
 * the largest (position + 1) of b's SENDs whose messages a has taken, both read off the
 * two lists without running them: one pass over every list notes each SEND's position and
 * each counted take's (the lowering posts every RECV before the computation that takes its
 * data), a second walks each list with what its worker knows of each neighbour. The values
 * are the replay's; test_schedule's schedule_bound suite compares the two on every kind's
 * grid. Only lists as the generator's lowering wrote them are read (s->counts set); one
 * with an all-reduce, a message off the placement's edges or one sent twice or taken and
 * never sent still goes back to the replay. */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "schedule.h"
#include "schedule_impl.h"

/* -1 or 1: the lists are read where sched_bound_tree applies; 0: always the replay (tests
 * compare the two). */
int sched_bound_fast = -1;

typedef struct tpair {  /* the pair (from -> to) */
    int from, to;
    int sent, bound;    /* counted sends so far; the most waiting at one */
    int known;          /* to's actions `from` knows to precede where it is */
    int next;           /* the next pair of the same `from`, or -1 */
    int nt, capt, th;   /* to's counted takes of from's messages: t[0 .. nt), in list
                           order; t[0 .. th) are known to from */
    int *t;
} tpair;

typedef struct tctx {
    const schedule *s;
    int W, S, T;
    size_t n;             /* S x T: messages of one direction */
    int *sw;              /* [S] each stage's worker */
    int *sendpos;         /* [2n] each message's SEND position + 1; 0 none */
    int *head;            /* [W] first pair from each worker, or -1 */
    tpair *pr;
    int npr, cappr;
} tctx;

static void tctx_free(tctx *c)
{
    for (int i = 0; i < c->npr; i++) free(c->pr[i].t);
    free(c->sw), free(c->sendpos), free(c->head), free(c->pr);
}

/* The pair from -> to, made on first use: its index, or -1 out of memory. */
static int tpair_get(tctx *c, int from, int to)
{
    for (int k = c->head[from]; k >= 0; k = c->pr[k].next)
        if (c->pr[k].to == to) return k;
    tpair *p = array_room(c->pr, c->npr, &c->cappr, 16, sizeof *p);
    if (!p) return -1;
    c->pr = p;
    int k = c->npr++;
    c->pr[k] = (tpair){.from = from, .to = to, .next = c->head[from]};
    c->head[from] = k;
    return k;
}

/* tpair_get through the last two pairs of the list being walked (two[], -1 none; a
 * worker of two chunks alternates between two neighbours), the one found put first. */
static inline int tpair_near(tctx *c, int *two, int from, int to)
{
    if (two[0] >= 0 && c->pr[two[0]].from == from && c->pr[two[0]].to == to) return two[0];
    int k = two[1] >= 0 && c->pr[two[1]].from == from && c->pr[two[1]].to == to
                ? two[1] : tpair_get(c, from, to);
    two[1] = two[0], two[0] = k;
    return k;
}

static int find_root(int *up, int v)
{
    while (up[v] != v) v = up[v] = up[up[v]];
    return v;
}

/* 1 when the placement's edges (the workers of neighbouring stages, where they differ)
 * form a forest, 0 when they close a cycle, -1 out of memory. */
static int placement_forest(const tctx *c)
{
    const int W = c->W, S = c->S;
    long long *e = malloc(((size_t)S + 1) * sizeof *e);
    int *up = malloc(((size_t)W + 1) * sizeof *up), ne = 0, ok = 1;
    if (!e || !up) {
        free(e), free(up);
        return -1;
    }
    for (int st = 0; st + 1 < S; st++) {
        int u = c->sw[st], v = c->sw[st + 1];
        if (u == v) continue;
        if (u > v) { int t = u; u = v; v = t; }
        e[ne++] = (long long)u * W + v;
    }
    /* each edge once (the V placement meets every edge twice) */
    for (int i = 1; i < ne; i++) /* insertion sort: ne is the stages, run once */
        for (int j = i; j > 0 && e[j - 1] > e[j]; j--) {
            long long t = e[j]; e[j] = e[j - 1]; e[j - 1] = t;
        }
    for (int w = 0; w < W; w++) up[w] = w;
    for (int i = 0; i < ne && ok; i++) {
        if (i && e[i] == e[i - 1]) continue;
        int ru = find_root(up, (int)(e[i] / W)), rv = find_root(up, (int)(e[i] % W));
        if (ru == rv) ok = 0;
        else up[ru] = rv;
    }
    free(e), free(up);
    return ok;
}

/* The message computation (kind k, stage st, microbatch mb) of worker w takes (F: its
 * input activations, B/I: its output gradient) when another worker sent it, else 2n;
 * *from its sender. */
static inline size_t take_slot(const tctx *c, int w, int k, int st, int mb, int *from)
{
    if ((unsigned)mb >= (unsigned)c->T || (unsigned)st >= (unsigned)c->S) return 2 * c->n;
    if (k == ACT_F && st > 0 && (*from = c->sw[st - 1]) != w)
        return (size_t)(st - 1) * c->T + (size_t)mb;
    if ((k == ACT_B || k == ACT_I) && st + 1 < c->S && (*from = c->sw[st + 1]) != w)
        return c->n + (size_t)(st + 1) * c->T + (size_t)mb;
    return 2 * c->n;
}

/* Notes position i of a counted take on pair k. 0 or -1 out of memory. */
static int take_add(tctx *c, int k, int i)
{
    tpair *g = &c->pr[k];
    int *t = array_room(g->t, g->nt, &g->capt, 64, sizeof *t);
    if (!t) return -1;
    g->t = t;
    g->t[g->nt++] = i;
    return 0;
}

/* The first pass: each SEND's position, each counted take noted on its pair in list
 * order (the lowering posts every RECV before the computation that takes its data).
 * 1, 0 (a list the generators never write: an all-reduce, a message sent twice or to
 * another worker than its neighbouring stage's) or -1 out of memory. */
static int note_lists(tctx *c, unsigned sends)
{
    const schedule *s = c->s;
    for (int w = 0; w < c->W; w++) {
        const action *acts = s->acts[w];
        int two[2] = {-1, -1};
        for (int i = 0, len = s->len[w]; i < len; i++) {
            const action a = acts[i];
            const int k = a.kind, st = a.stage, mb = a.microbatch;
            switch (k) {
            case ACT_SEND_F: case ACT_SEND_B: {
                const int ps = k == ACT_SEND_F ? st + 1 : st - 1;
                if ((unsigned)mb >= (unsigned)c->T || (unsigned)st >= (unsigned)c->S ||
                    (unsigned)ps >= (unsigned)c->S || a.peer != c->sw[ps] || a.peer == w)
                    return 0;
                size_t d = (k == ACT_SEND_B ? c->n : 0) + (size_t)st * c->T + (size_t)mb;
                if (c->sendpos[d]) return 0;
                c->sendpos[d] = i + 1;
                break;
            }
            case ACT_F: case ACT_B: case ACT_I: {
                int from;
                if (!(sends >> (k == ACT_F ? ACT_SEND_F : ACT_SEND_B) & 1)) break;
                if (take_slot(c, w, k, st, mb, &from) >= 2 * c->n) break;
                int p = tpair_near(c, two, from, w);
                if (p < 0 || take_add(c, p, i)) return -1;
                break;
            }
            case ACT_ALLREDUCE: return 0;
            default: break;
            }
        }
    }
    return 1;
}

/* The second pass: each list with what its worker knows of each neighbour, counting its
 * sends. 1, 0 (a message taken and never sent: the replay reports the deadlock) or -1. */
static int count_sends(tctx *c, unsigned sends)
{
    const schedule *s = c->s;
    for (int w = 0; w < c->W; w++) {
        const action *acts = s->acts[w];
        int two[2] = {-1, -1};
        for (int i = 0, len = s->len[w]; i < len; i++) {
            const action a = acts[i];
            const int k = a.kind;
            int to;
            if (k == ACT_F || k == ACT_B || k == ACT_I) {
                size_t d = take_slot(c, w, k, a.stage, a.microbatch, &to);
                if (d >= 2 * c->n) continue;
                int pos = c->sendpos[d], p; /* the sender's position comes with its data */
                if (!pos) return 0;
                if ((p = tpair_near(c, two, w, to)) < 0) return -1;
                if (pos > c->pr[p].known) c->pr[p].known = pos;
            } else if (act_is_send(k) && (sends >> k & 1)) {
                int p = tpair_near(c, two, w, a.peer);
                if (p < 0) return -1;
                tpair *g = &c->pr[p];
                while (g->th < g->nt && g->t[g->th] < g->known) g->th++;
                int waiting = ++g->sent - g->th;
                if (waiting > g->bound) g->bound = waiting;
            }
        }
    }
    return 1;
}

static int pair_order(const void *x, const void *y)
{
    const sched_pair_bound *a = x, *b = y;
    if (a->from != b->from) return (a->from > b->from) - (a->from < b->from);
    return (a->to > b->to) - (a->to < b->to);
}

int sched_bound_tree(const schedule *s, unsigned sends, sched_pair_bound **out, int *n,
                     plumb_err *err)
{
    *out = NULL, *n = 0;
    if (!sched_bound_fast || !s->counts || s->nworkers < 1 || s->nstages < 1) return 0;
    for (int st = 0; st < s->nstages; st++) {
        int w = s->stage_workers[s->stage_first[st]];
        if (s->replicas[st] != 1 || w < 0 || w >= s->nworkers) return 0;
    }
    tctx c = {.s = s, .W = s->nworkers, .S = s->nstages, .T = sched_total_mb(s)};
    c.n = (size_t)c.S * (size_t)c.T;
    int rc = -1;
    if (!(c.sw = malloc((size_t)c.S * sizeof *c.sw))) goto done;
    for (int st = 0; st < c.S; st++) c.sw[st] = s->stage_workers[s->stage_first[st]];
    if ((rc = placement_forest(&c)) <= 0) goto done;
    c.sendpos = calloc(2 * c.n + 1, sizeof *c.sendpos);
    c.head = malloc(((size_t)c.W + 1) * sizeof *c.head);
    rc = c.sendpos && c.head ? 1 : -1;
    if (rc > 0) {
        memset(c.head, 0xff, ((size_t)c.W + 1) * sizeof *c.head);
        rc = note_lists(&c, sends);
    }
    if (rc > 0) rc = count_sends(&c, sends);
    if (rc > 0) { /* the pairs with a counted send or take, as the replay lists them */
        sched_pair_bound *p = malloc(((size_t)c.npr + 1) * sizeof *p);
        int np = 0;
        for (int k = 0; p && k < c.npr; k++)
            if (c.pr[k].sent || c.pr[k].nt)
                p[np++] = (sched_pair_bound){c.pr[k].from, c.pr[k].to, c.pr[k].bound};
        if (p) {
            qsort(p, (size_t)np, sizeof *p, pair_order);
            *out = p, *n = np;
        } else {
            rc = -1;
        }
    }
done:
    tctx_free(&c);
    if (rc < 0) return err_set(err, NULL, NULL, "out of memory");
    return rc;
}
