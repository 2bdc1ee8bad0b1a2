/* engine_sync.c: synchronous point-to-point transfers (sim_model.p2p_sync; a plan's "p2p":
 * "sync"), the engine's model of a runtime whose sends and receives block: an NCCL send
 * completes only after its receiver has posted the matching receive and the data has
 * moved, and a runtime that waits on every request of a batch of sends and receives (and
 * synchronizes the device) before it computes again cannot overlap its transfers with its
 * own compute. Three rules on top of engine_comm.c's transfers (docs/sim.md, "Synchronous
 * point-to-point"):
 *  - rendezvous: a SEND's transfer stays off its link until its receiver has posted the
 *    matching RECV (the receiver has reached that RECV in its action list);
 *  - a worker's computation (F, B, I, W, STEP) waits until every transfer of the SENDs it
 *    issued before it has arrived (latency included);
 *  - a RECV is posted when the worker reaches it, and the computation that consumes its
 *    data waits for it, as without the setting.
 * Consecutive SENDs and RECVs of a worker are thus one batch: all posted, then all waited
 * for, as batch_isend_irecv followed by waiting on every request. */
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "core/schedule_impl.h"
#include "sim/engine_impl.h"

/* 1 when the receiver of transfer x (a SEND's) has posted the matching RECV whose
 * consumer has not taken its data yet. */
static int recv_posted(const eng *E, const xfer *x)
{
    const action *sa = x->a;
    const wstate *rs = &E->ws[sa->peer];
    int want = sa->kind == ACT_SEND_F ? ACT_RECV_F : ACT_RECV_B;
    for (int i = rs->p0; i < rs->npost; i++) {
        const action *r = &E->s->acts[sa->peer][rs->post[i]];
        if (r->kind == want && r->peer == x->src_w && r->stage == sa->peer_stage &&
            r->peer_stage == sa->stage && r->microbatch == sa->microbatch)
            return 1;
    }
    return 0;
}

int eng_sync_send(eng *E, int w, int xi, int li, double t)
{
    E->ws[w].sync_out++;
    if (recv_posted(E, &E->x[xi]))
        return eng_xfer_enqueue(E, xi, li, t);
    E->x[xi].held = 1;
    return 0;
}

int eng_sync_post(eng *E, int w, int c, double t)
{
    const action *a = &E->s->acts[w][c];
    int fwd = a->kind == ACT_RECV_F;
    int ci = ht_find(&E->chh, pair(a->peer, w), (uint64_t)fwd);
    if (ci < 0)  /* nothing sent on that channel yet */
        return 0;
    for (int xi = E->ch[ci].head; xi >= 0; xi = E->x[xi].cnext) {
        xfer *x = &E->x[xi];
        const action *sa = x->a;
        if (x->held && sa->stage == a->peer_stage && sa->peer_stage == a->stage &&
            sa->microbatch == a->microbatch) {
            x->held = 0;
            return eng_xfer_enqueue(E, xi, x->link, t);
        }
    }
    return 0;
}

int eng_sync_started(eng *E, int xi)
{
    const xfer *x = &E->x[xi];
    wstate *ws = &E->ws[x->src_w];
    ws->sync_out--;
    if (x->arrival > ws->sync_deliv)
        ws->sync_deliv = x->arrival;
    if (ws->sync_out == 0 && ws->sync_wait) {
        ws->sync_wait = 0;
        return heap_push(&E->h, ws->sync_deliv, x->src_w) ? eng_oom(E) : 0;
    }
    return 0;
}

int eng_sync_gate(eng *E, int w, double t)
{
    wstate *ws = &E->ws[w];
    if (ws->sync_out > 0) {  /* a send not on its way yet: its start wakes the worker */
        ws->sync_wait = 1;
        return 1;
    }
    if (ws->sync_deliv > t)
        return heap_push(&E->h, ws->sync_deliv, w) ? eng_oom(E) : 1;
    return 0;
}

/* --- batch placement ------------------------------------------------------------------- */

static int is_comm(int k)
{
    return k == ACT_SEND_F || k == ACT_SEND_B || k == ACT_RECV_F || k == ACT_RECV_B;
}

/* 1 when compute action c makes (SEND) or takes (RECV) the data of transfer action a. */
static int feeds(const action *a, const action *c)
{
    if (c->stage != a->stage || c->microbatch != a->microbatch) return 0;
    if (a->kind == ACT_SEND_F || a->kind == ACT_RECV_F) return c->kind == ACT_F;
    return c->kind == ACT_B || c->kind == ACT_I;
}

/* 1 when the gap before computation g of n (0 .. n; comp[] their actions) is a batch
 * point: every gap after a forward or backward but the one between the F and the B of a
 * chunked schedule's steady pair (pair = 1: the worker's list has steady pairs), and the
 * gap before an iteration's first forward of a flushing schedule (async = 0). A stage's
 * all-reduce and step, which the IR places after the stage's last backward (between an
 * interleaved rank's chunks), are not the runtime's: its exchanges run between its
 * forwards and backwards, its optimizer after them. An asynchronous schedule (pipedream,
 * 2bw) never drains: its steps sit in the steady 1F1B loop, after the exchange that
 * follows the backward (sending its gradient and receiving the next forward's input, as
 * a 1F1B loop does), so a step there is no batch point either. */
static int batch_point(const action *const *comp, int n, int g, int pair, int async)
{
    if (g == 0 || g == n)
        return 1;
    int prev = comp[g - 1]->kind, next = comp[g]->kind;
    if (!act_is_compute(prev))
        return !async && next == ACT_F;
    return !pair || prev != ACT_F || next != ACT_B;
}

/* Worker list acts[0 .. len) placed into out[0 .. len) (pair, async: batch_point's);
 * scratch: comp[len], gap[len], cnt[4 (len + 1)]. */
static void order_worker(const action *acts, int len, int pair, int async, action *out,
                         const action **comp, int *gap, int *cnt)
{
    int n = 0;
    for (int i = 0; i < len; i++)
        if (!is_comm(acts[i].kind)) comp[n++] = &acts[i];
    int *ns = cnt, *nr = cnt + n + 1, *at = cnt + 2 * (n + 1), *cp = cnt + 3 * (n + 1);
    memset(cnt, 0, 2 * ((size_t)n + 1) * sizeof *cnt);
    for (int i = 0, k = 0; i < len; i++) {
        const action *a = &acts[i];
        if (!is_comm(a->kind)) {
            k++;
            continue;
        }
        int g = k, send = a->kind == ACT_SEND_F || a->kind == ACT_SEND_B;
        if (send) {  /* the first batch after the computation that made its data */
            int j = k - 1;
            while (j >= 0 && !feeds(a, comp[j])) j--;
            if (j >= 0)
                for (g = j + 1; !batch_point(comp, n, g, pair, async); g++) {}
        } else {     /* the last batch before the computation that takes its data */
            int j = k;
            while (j < n && !feeds(a, comp[j])) j++;
            if (j < n)
                for (g = j; !batch_point(comp, n, g, pair, async); g--) {}
        }
        gap[i] = g;
        (send ? ns : nr)[g]++;
    }
    /* gap g: its sends, then its receives (each in list order), then computation g */
    for (int g = 0, o = 0; g <= n; g++) {
        at[g] = o;
        cp[g] = o + ns[g] + nr[g];
        o = cp[g] + (g < n);
        nr[g] = at[g] + ns[g];  /* from here on: the next receive's slot */
        ns[g] = at[g];          /* the next send's slot */
    }
    for (int i = 0, k = 0; i < len; i++) {
        int kd = acts[i].kind;
        if (!is_comm(kd)) {
            out[cp[k++]] = acts[i];
        } else if (kd == ACT_SEND_F || kd == ACT_SEND_B) {
            out[ns[gap[i]]++] = acts[i];
        } else {
            out[nr[gap[i]]++] = acts[i];
        }
    }
}

/* 1 when worker w's list has steady F-B pairs that such a runtime runs back to back: an
 * interleaved rank whose warmup leaves forwards to pair (a rank whose warmup holds every
 * forward, as rank 0 does when M = p, exchanges after each of them and then after each
 * backward); the other chunked kinds' every F then B. */
static int has_pairs(const schedule *s, int w)
{
    if (s->chunks < 2)
        return 0;
    if (s->kind != SCHED_INTERLEAVED)
        return 1;
    /* the rank and its microbatches from the list itself: a folded IR's fields count
     * replicas it does not lay out */
    int nf = 0, st = -1, V = s->chunks, p = sched_nranks(s);
    for (int i = 0; i < s->len[w]; i++)
        if (s->acts[w][i].kind == ACT_F && nf++ == 0)
            st = s->acts[w][i].stage;
    int M = nf / (V * (s->iterations > 0 ? s->iterations : 1));
    return nf > 0 && sched_interleaved_warmup(p, V, M, st % p) < M * V;
}

int eng_order_alloc(const schedule *s, schedule *out, int *maxlen)
{
    *out = *s;
    out->len = s->len;
    *maxlen = 0;
    if (!(out->acts = calloc((size_t)s->nworkers + 1, sizeof *out->acts)))
        return -1;
    for (int w = 0; w < s->nworkers; w++) {
        if (s->len[w] > *maxlen) *maxlen = s->len[w];
        if (!(out->acts[w] = malloc(((size_t)s->len[w] + 1) * sizeof **out->acts))) {
            eng_sync_order_free(out);
            return -1;
        }
    }
    return 0;
}

int eng_sync_order(const schedule *s, schedule *out)
{
    int maxlen, rc = -1;
    if (eng_order_alloc(s, out, &maxlen))
        return -1;
    const action **comp = malloc(((size_t)maxlen + 1) * sizeof *comp);
    int *gap = malloc(((size_t)maxlen + 1) * sizeof *gap);
    int *cnt = malloc(4 * ((size_t)maxlen + 1) * sizeof *cnt);
    if (comp && gap && cnt) {
        for (int w = 0; w < s->nworkers; w++)
            order_worker(s->acts[w], s->len[w], has_pairs(s, w), sched_kind_is_async(s->kind),
                         out->acts[w], comp, gap, cnt);
        rc = 0;
    }
    free(comp);
    free(gap);
    free(cnt);
    if (rc)
        eng_sync_order_free(out);
    return rc;
}

void eng_sync_order_free(schedule *out)
{
    for (int w = 0; out->acts && w < out->nworkers; w++)
        free(out->acts[w]);
    free(out->acts);
    out->acts = NULL;
}
