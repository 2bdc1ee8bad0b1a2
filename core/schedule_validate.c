/* schedule_validate.c: proves an action IR well formed and deadlock-free, and counts the
 * activations and weight versions each stage holds.
 *
 * Three layers of checks, the first failure reported in one line:
 *  1. fields: every action's stage is placed on its worker, microbatches in range, send and
 *     receive peers name the worker and stage that hold the neighbouring stage;
 *  2. counts: each (stage, microbatch) has exactly one F and either one B or one I and one W,
 *     all on one worker; each SEND has exactly one matching RECV and the reverse; the
 *     replicas of a stage hold the same number of all-reduces;
 *  3. order on each worker: F after its input (the RECV_F, or the previous stage's F when
 *     that stage shares the worker), B/I after its F and after its output gradient, W after
 *     its I, a SEND after what it sends; weight versions (F uses the stage's newest, B/I/W
 *     its F's, STEP produces the next), no STEP with microbatches in flight for the
 *     synchronous kinds, and a replicated stage all-reduces before each STEP;
 * then a replay of the lists as concurrent processes (blocking receives; under RENDEZVOUS
 * also blocking sends) that names the cycle of waiting workers when it gets stuck. A
 * blocking receive waits at least as long as the IR's posted receive, whose consumer
 * waits (sched_sem), so a list that passes cannot deadlock under posted receives.
 * schedule_inflight counts in one pass of its own per worker (count_worker): the order
 * pass's counters without its flags, which only explain an order's error. */
#include "schedule_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct vctx {
    const schedule *s;
    int S, T;
    int *fw, *bw;          /* [S*T] worker of the F, of the B/I (-1 none) */
    int *nf, *nb, *ni, *nw;/* [S*T] counts */
    unsigned char *fdone, *bdone, *idone, *rf, *rb; /* [S*T] per-worker order flags */
    int *fver;             /* [S*T] version the F used */
} vctx;

static void vctx_free(vctx *c)
{
    free(c->fw), free(c->bw), free(c->nf), free(c->nb), free(c->ni), free(c->nw);
    free(c->fdone), free(c->bdone), free(c->idone), free(c->rf), free(c->rb), free(c->fver);
}

/* The tables of the checks (fw, bw -1, the rest 0). 0, or -1 out of memory (nothing
 * held). */
static int vctx_init(vctx *c, const schedule *s)
{
    memset(c, 0, sizeof *c);
    c->s = s, c->S = s->nstages, c->T = sched_total_mb(s);
    size_t n = (size_t)c->S * (size_t)c->T;
    c->fw = malloc(n * sizeof(int)), c->bw = malloc(n * sizeof(int));
    c->nf = calloc(n, sizeof(int)), c->nb = calloc(n, sizeof(int));
    c->ni = calloc(n, sizeof(int)), c->nw = calloc(n, sizeof(int));
    c->fdone = calloc(n, 1), c->bdone = calloc(n, 1), c->idone = calloc(n, 1);
    c->rf = calloc(n, 1), c->rb = calloc(n, 1);
    c->fver = calloc(n, sizeof(int));
    if (!c->fw || !c->bw || !c->nf || !c->nb || !c->ni || !c->nw ||
        !c->fdone || !c->bdone || !c->idone || !c->rf || !c->rb || !c->fver) {
        vctx_free(c);
        return -1;
    }
    memset(c->fw, 0xff, n * sizeof(int)); /* -1: none */
    memset(c->bw, 0xff, n * sizeof(int));
    return 0;
}

static const char *fmt(const action *a, char *buf) { return action_format(a, buf, 48); }

/* Layer 1: fields of action i of worker w. */
static int check_fields(const schedule *s, int w, int i, plumb_err *err)
{
    const action *a = &s->acts[w][i];
    char t[48];
    int T = sched_total_mb(s);
    if (a->kind < 0 || a->kind >= ACT_NKINDS)
        return err_set(err, NULL, NULL, "worker %d action %d: unknown kind %d", w, i, a->kind);
    if (a->stage < 0 || a->stage >= s->nstages)
        return err_set(err, NULL, NULL, "worker %d action %d (%s): stage out of range 0..%d", w,
                       i, fmt(a, t), s->nstages - 1);
    if (!sched_hosts(s, w, a->stage))
        return err_set(err, NULL, NULL, "worker %d action %d (%s): stage %d is not placed on "
                       "worker %d", w, i, fmt(a, t), a->stage, w);
    int has_mb = a->kind != ACT_ALLREDUCE && a->kind != ACT_STEP;
    if (has_mb && (a->microbatch < 0 || a->microbatch >= T))
        return err_set(err, NULL, NULL, "worker %d action %d (%s): microbatch out of range "
                       "0..%d", w, i, fmt(a, t), T - 1);
    if (act_is_comm(a->kind)) {
        int want = (a->kind == ACT_SEND_F || a->kind == ACT_RECV_B) ? a->stage + 1 : a->stage - 1;
        if (want < 0 || want >= s->nstages || a->peer_stage != want)
            return err_set(err, NULL, NULL, "worker %d action %d (%s): peer stage must be %d "
                           "(got %d)", w, i, fmt(a, t), want, a->peer_stage);
        if (a->peer < 0 || a->peer >= s->nworkers || a->peer == w ||
            !sched_hosts(s, a->peer, want))
            return err_set(err, NULL, NULL, "worker %d action %d (%s): peer worker %d does not "
                           "hold stage %d", w, i, fmt(a, t), a->peer, want);
    }
    return 0;
}

/* Layer 1's verdict without its message: 1 when check_fields would pass action a of
 * worker w (T: sched_total_mb). Inline, so that the per-action pass of the counters costs
 * no call; a 0 is then explained by check_fields. */
static inline int fields_ok(const schedule *s, int w, const action *a, int T)
{
    int k = a->kind, st = a->stage;
    if ((unsigned)k >= ACT_NKINDS || (unsigned)st >= (unsigned)s->nstages ||
        !sched_hosts(s, w, st))
        return 0;
    if (k != ACT_ALLREDUCE && k != ACT_STEP && (unsigned)a->microbatch >= (unsigned)T)
        return 0;
    if (act_is_comm(k)) {
        int want = (k == ACT_SEND_F || k == ACT_RECV_B) ? st + 1 : st - 1;
        if (want < 0 || want >= s->nstages || a->peer_stage != want || a->peer < 0 ||
            a->peer >= s->nworkers || a->peer == w || !sched_hosts(s, a->peer, want))
            return 0;
    }
    return 1;
}

/* Layer 1 over every action, in worker order: 0, or -1 with err naming the first bad one. */
static int check_all_fields(const schedule *s, plumb_err *err)
{
    int T = sched_total_mb(s);
    for (int w = 0; w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++)
            if (!fields_ok(s, w, &s->acts[w][i], T) && check_fields(s, w, i, err)) return -1;
    return 0;
}

/* Layer 2: counts. */
static int check_counts(vctx *c, plumb_err *err)
{
    const schedule *s = c->s;
    int S = c->S, T = c->T;
    size_t n = (size_t)S * T;
    char t[48];
    /* sends: [dir][sender stage][mb] -> count, from, to; receives likewise */
    int *sc = calloc(2 * n, sizeof(int)), *rc = calloc(2 * n, sizeof(int));
    int *sw = malloc(2 * n * sizeof(int)), *si = malloc(2 * n * sizeof(int));
    int *rw = malloc(2 * n * sizeof(int)), *ri = malloc(2 * n * sizeof(int));
    int ret = -1;
    if (!sc || !rc || !sw || !si || !rw || !ri) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int w = 0; w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            size_t k = (size_t)a->stage * T + (a->microbatch >= 0 ? a->microbatch : 0);
            switch (a->kind) {
            case ACT_F:
                if (c->nf[k]++) {
                    err_set(err, NULL, NULL, "stage %d microbatch %d: forward duplicated "
                            "(workers %d and %d)", a->stage, a->microbatch, c->fw[k], w);
                    goto done;
                }
                c->fw[k] = w;
                break;
            case ACT_B: case ACT_I: case ACT_W: {
                int *cnt = a->kind == ACT_B ? c->nb : a->kind == ACT_I ? c->ni : c->nw;
                if (cnt[k]++) {
                    err_set(err, NULL, NULL, "stage %d microbatch %d: %s duplicated (worker %d "
                            "action %d, %s)", a->stage, a->microbatch, act_kind_name(a->kind), w,
                            i, fmt(a, t));
                    goto done;
                }
                if (a->kind != ACT_W) c->bw[k] = w;
                break;
            }
            case ACT_SEND_F: case ACT_SEND_B: {
                size_t d = (size_t)(a->kind == ACT_SEND_B) * n + k;
                if (sc[d]++) {
                    err_set(err, NULL, NULL, "worker %d action %d (%s): send duplicated", w, i,
                            fmt(a, t));
                    goto done;
                }
                sw[d] = w, si[d] = i;
                break;
            }
            case ACT_RECV_F: case ACT_RECV_B: {
                size_t d = (size_t)(a->kind == ACT_RECV_B) * n +
                           (size_t)a->peer_stage * T + a->microbatch;
                if (rc[d]++) {
                    err_set(err, NULL, NULL, "worker %d action %d (%s): receive duplicated", w,
                            i, fmt(a, t));
                    goto done;
                }
                rw[d] = w, ri[d] = i;
                break;
            }
            default: break;
            }
        }
    for (size_t d = 0; d < 2 * n; d++) {
        if (sc[d] && !rc[d]) {
            const action *a = &s->acts[sw[d]][si[d]];
            err_set(err, NULL, NULL, "worker %d action %d (%s): send without its receive: "
                    "worker %d has no %d%s%d", sw[d], si[d], fmt(a, t), a->peer, a->peer_stage,
                    a->kind == ACT_SEND_F ? "RECV_F" : "RECV_B", a->microbatch);
            goto done;
        }
        if (rc[d] && !sc[d]) {
            const action *a = &s->acts[rw[d]][ri[d]];
            err_set(err, NULL, NULL, "worker %d action %d (%s): receive without its send: "
                    "worker %d has no %d%s%d", rw[d], ri[d], fmt(a, t), a->peer, a->peer_stage,
                    a->kind == ACT_RECV_F ? "SEND_F" : "SEND_B", a->microbatch);
            goto done;
        }
        if (sc[d] && rc[d]) {
            const action *x = &s->acts[sw[d]][si[d]], *y = &s->acts[rw[d]][ri[d]];
            if (x->peer != rw[d] || y->peer != sw[d]) {
                err_set(err, NULL, NULL, "worker %d action %d (%s) sends to worker %d but the "
                        "receive is worker %d action %d (from worker %d)", sw[d], si[d],
                        fmt(x, t), x->peer, rw[d], ri[d], y->peer);
                goto done;
            }
        }
    }
    for (int st = 0; st < S; st++)
        for (int m = 0; m < T; m++) {
            size_t k = (size_t)st * T + m;
            if (!c->nf[k]) {
                err_set(err, NULL, NULL, "stage %d microbatch %d: forward missing (%dF%d)", st, m,
                        st, m);
                goto done;
            }
            int full = c->nb[k] == 1 && !c->ni[k] && !c->nw[k];
            int split = !c->nb[k] && c->ni[k] == 1 && c->nw[k] == 1;
            if (!full && !split) {
                if (!c->nb[k] && !c->ni[k])
                    err_set(err, NULL, NULL, "stage %d microbatch %d: backward missing (%dB%d)",
                            st, m, st, m);
                else if (c->ni[k] && !c->nw[k])
                    err_set(err, NULL, NULL, "stage %d microbatch %d: W missing after its I "
                            "(%dW%d)", st, m, st, m);
                else
                    err_set(err, NULL, NULL, "stage %d microbatch %d: backward given both whole "
                            "and split (B %d, I %d, W %d)", st, m, c->nb[k], c->ni[k], c->nw[k]);
                goto done;
            }
            if (c->bw[k] != c->fw[k]) {
                err_set(err, NULL, NULL, "stage %d microbatch %d: forward on worker %d but "
                        "backward on worker %d", st, m, c->fw[k], c->bw[k]);
                goto done;
            }
        }
    for (int st = 0; st < S; st++) {
        int first = -1;
        for (int j = 0; j < s->replicas[st]; j++) {
            int w = s->stage_workers[s->stage_first[st] + j], cnt = 0;
            for (int i = 0; i < s->len[w]; i++)
                cnt += s->acts[w][i].kind == ACT_ALLREDUCE && s->acts[w][i].stage == st;
            if (j == 0) first = cnt;
            else if (cnt != first) {
                err_set(err, NULL, NULL, "stage %d: its replicas hold %d and %d REDUCE_GRAD "
                        "(workers %d and %d)", st, first, cnt, s->stage_workers[s->stage_first[st]],
                        w);
                goto done;
            }
        }
    }
    ret = 0;
done:
    free(sc), free(rc), free(sw), free(si), free(rw), free(ri);
    return ret;
}

/* Layer 3 on worker w: 0, or -1 with err naming the first action out of order. */
static int check_order(vctx *c, int w, plumb_err *err)
{
    const schedule *s = c->s;
    int S = c->S, T = c->T, ret = -1;
    char t[48];
    int *cur = calloc((size_t)S, sizeof *cur), *infl = calloc((size_t)S, sizeof *infl);
    int *ar = calloc((size_t)S, sizeof *ar);
    unsigned char *mine = malloc((size_t)S + 1);
    if (!cur || !infl || !ar || !mine) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int st = 0; st < S; st++) mine[st] = (unsigned char)sched_hosts(s, w, st);
#define FAIL(...)                                                                              \
    do {                                                                                       \
        err_set(err, NULL, NULL, __VA_ARGS__);                                                 \
        goto done;                                                                             \
    } while (0)
    for (int i = 0; i < s->len[w]; i++) {
        const action *a = &s->acts[w][i];
        int st = a->stage, m = a->microbatch;
        if (st < 0 || st >= S || !mine[st]) continue;
        size_t k = (size_t)st * T + (m >= 0 && m < T ? m : 0);
        switch (a->kind) {
        case ACT_F:
            if (st > 0) {
                size_t kp = k - (size_t)T;
                if (c->fw[kp] == w ? !c->fdone[kp] : !c->rf[k])
                    FAIL("worker %d action %d (%s): forward before its input (%s)", w, i,
                         fmt(a, t), c->fw[kp] == w ? "the previous stage's F on this worker"
                                                   : "RECV_F");
            }
            if (a->version != cur[st])
                FAIL("worker %d action %d (%s): forward uses weight version %d but the newest is "
                     "%d", w, i, fmt(a, t), a->version, cur[st]);
            c->fdone[k] = 1;
            c->fver[k] = a->version;
            infl[st]++;
            break;
        case ACT_B: case ACT_I:
            if (!c->fdone[k])
                FAIL("worker %d action %d (%s): %s before its F", w, i, fmt(a, t),
                     act_kind_name(a->kind));
            if (st < S - 1) {
                size_t kn = k + (size_t)T;
                if (c->bw[kn] == w ? !c->bdone[kn] : !c->rb[k])
                    FAIL("worker %d action %d (%s): backward before its output gradient (%s)", w,
                         i, fmt(a, t), c->bw[kn] == w ? "the next stage's backward on this "
                         "worker" : "RECV_B");
            }
            if (a->version != c->fver[k])
                FAIL("worker %d action %d (%s): backward uses weight version %d but its forward "
                     "used %d", w, i, fmt(a, t), a->version, c->fver[k]);
            c->bdone[k] = 1;
            if (a->kind == ACT_I) {
                c->idone[k] = 1;
                break;
            }
            /* fall through: B ends the microbatch's work at this stage */
            goto ended;
        case ACT_W:
            if (!c->idone[k])
                FAIL("worker %d action %d (%s): W before its I", w, i, fmt(a, t));
            if (a->version != c->fver[k])
                FAIL("worker %d action %d (%s): W uses weight version %d but its forward used %d",
                     w, i, fmt(a, t), a->version, c->fver[k]);
        ended:
            if (infl[st] > 0) infl[st]--;
            break;
        case ACT_SEND_F:
            if (!c->fdone[k]) FAIL("worker %d action %d (%s): send before its F", w, i, fmt(a, t));
            break;
        case ACT_SEND_B:
            if (!c->bdone[k])
                FAIL("worker %d action %d (%s): send before its backward", w, i, fmt(a, t));
            break;
        case ACT_RECV_F: c->rf[k] = 1; break;
        case ACT_RECV_B: c->rb[k] = 1; break;
        case ACT_ALLREDUCE: ar[st] = 1; break;
        case ACT_STEP:
            if (a->version != cur[st] + 1)
                FAIL("worker %d action %d (%s): STEP version order: produces version %d after "
                     "version %d", w, i, fmt(a, t), a->version, cur[st]);
            if (!sched_traits_of(s->kind)->async && infl[st] > 0)
                FAIL("worker %d action %d (%s): %s is synchronous but %d microbatch%s still in "
                     "flight at the step", w, i, fmt(a, t), sched_kind_name(s->kind), infl[st],
                     infl[st] == 1 ? " is" : "es are");
            if (s->replicas[st] > 1 && !ar[st])
                FAIL("worker %d action %d (%s): stage %d has %d replicas but no REDUCE_GRAD "
                     "before this step", w, i, fmt(a, t), st, s->replicas[st]);
            ar[st] = 0;
            cur[st]++;
            break;
        default: break;
        }
    }
#undef FAIL
    ret = 0;
done:
    free(cur), free(infl), free(ar), free(mine);
    return ret;
}

/* 1 when b (the peer's next action) is the partner of a, sent/received by worker w. */
static int partners(const action *a, int w, const action *b)
{
    int want = a->kind == ACT_SEND_F ? ACT_RECV_F : a->kind == ACT_SEND_B ? ACT_RECV_B
             : a->kind == ACT_RECV_F ? ACT_SEND_F : ACT_SEND_B;
    return b->kind == want && b->stage == a->peer_stage && b->peer_stage == a->stage &&
           b->microbatch == a->microbatch && b->peer == w;
}

/* The replay. */
static int replay(const schedule *s, sched_sem sem, plumb_err *err)
{
    int W = s->nworkers, S = s->nstages, T = sched_total_mb(s), ret = -1;
    size_t n = (size_t)S * T;
    int *pc = calloc((size_t)W, sizeof *pc), *arc = calloc((size_t)W * S, sizeof *arc);
    int *wait = malloc((size_t)W * sizeof *wait), *seen = malloc((size_t)W * sizeof *seen);
    unsigned char *posted = calloc(2 * n, 1);
    char t[48];
    if (!pc || !arc || !wait || !seen || !posted) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (;;) {
        int progress = 0, left = 0;
        for (int w = 0; w < W; w++) {
            while (pc[w] < s->len[w]) {
                const action *a = &s->acts[w][pc[w]];
                if (act_is_comm(a->kind)) {
                    int p = a->peer;
                    if (sem == SCHED_SEM_BUFFERED) {
                        size_t d = (size_t)(a->kind == ACT_SEND_B || a->kind == ACT_RECV_B) * n +
                                   (size_t)(act_is_send(a->kind) ? a->stage : a->peer_stage) * T +
                                   a->microbatch;
                        if (act_is_send(a->kind))
                            posted[d] = 1;
                        else if (!posted[d])
                            break;
                    } else {
                        if (pc[p] >= s->len[p] || !partners(a, w, &s->acts[p][pc[p]])) break;
                        pc[p]++;
                    }
                } else if (a->kind == ACT_ALLREDUCE) {
                    int st = a->stage, kth = arc[(size_t)w * S + st], all = 1;
                    for (int j = 0; j < s->replicas[st] && all; j++) {
                        int w2 = s->stage_workers[s->stage_first[st] + j];
                        all = pc[w2] < s->len[w2] && s->acts[w2][pc[w2]].kind == ACT_ALLREDUCE &&
                              s->acts[w2][pc[w2]].stage == st && arc[(size_t)w2 * S + st] == kth;
                    }
                    if (!all) break;
                    for (int j = 0; j < s->replicas[st]; j++) {
                        int w2 = s->stage_workers[s->stage_first[st] + j];
                        arc[(size_t)w2 * S + st]++;
                        if (w2 != w) pc[w2]++;
                    }
                }
                pc[w]++;
                progress = 1;
            }
        }
        for (int w = 0; w < W; w++) left += pc[w] < s->len[w];
        if (!left) break;
        if (progress) continue;
        /* stuck: each waiting worker waits for one other */
        for (int w = 0; w < W; w++) {
            wait[w] = -1, seen[w] = -1;
            if (pc[w] >= s->len[w]) continue;
            const action *a = &s->acts[w][pc[w]];
            if (act_is_comm(a->kind)) {
                wait[w] = a->peer;
            } else if (a->kind == ACT_ALLREDUCE) {
                int st = a->stage, kth = arc[(size_t)w * S + st];
                for (int j = 0; j < s->replicas[st] && wait[w] < 0; j++) {
                    int w2 = s->stage_workers[s->stage_first[st] + j];
                    if (!(pc[w2] < s->len[w2] && s->acts[w2][pc[w2]].kind == ACT_ALLREDUCE &&
                          s->acts[w2][pc[w2]].stage == st && arc[(size_t)w2 * S + st] == kth))
                        wait[w] = w2;
                }
            }
        }
        int w0 = 0;
        while (pc[w0] >= s->len[w0]) w0++;
        int w = w0, step = 0;
        while (w >= 0 && seen[w] < 0 && pc[w] < s->len[w]) {
            seen[w] = step++;
            w = wait[w];
        }
        if (w < 0 || pc[w] >= s->len[w]) {
            /* the chain ends at a finished worker */
            int x = w0;
            while (wait[x] >= 0 && pc[wait[x]] < s->len[wait[x]]) x = wait[x];
            err_set(err, NULL, NULL, "deadlock: worker %d waits at action %d (%s) for worker %d, "
                    "which has finished", x, pc[x], fmt(&s->acts[x][pc[x]], t), wait[x]);
            goto done;
        }
        /* w is on a cycle: print it from w */
        char msg[PLUMB_ERR_MAX];
        size_t off = (size_t)snprintf(msg, sizeof msg, "deadlock:");
        int x = w;
        do {
            if (off < sizeof msg)
                off += (size_t)snprintf(msg + off, sizeof msg - off,
                                        "%s worker %d waits at action %d (%s) for worker %d",
                                        x == w ? "" : ",", x, pc[x],
                                        fmt(&s->acts[x][pc[x]], t), wait[x]);
            x = wait[x];
        } while (x != w);
        err_set(err, NULL, NULL, "%s", msg);
        goto done;
    }
    ret = 0;
done:
    free(pc), free(arc), free(wait), free(seen), free(posted);
    return ret;
}

int schedule_validate_sem(const schedule *s, sched_sem sem, plumb_err *err)
{
    if (!s) return err_set(err, NULL, NULL, "no schedule");
    if (check_all_fields(s, err)) return -1;
    vctx c;
    if (vctx_init(&c, s)) return err_set(err, NULL, NULL, "out of memory");
    int rc = check_counts(&c, err);
    for (int w = 0; w < s->nworkers && !rc; w++) rc = check_order(&c, w, err);
    vctx_free(&c);
    if (rc) return -1;
    return replay(s, sem, err);
}

int schedule_validate(const schedule *s, plumb_err *err)
{
    return schedule_validate_sem(s, SCHED_SEM_RENDEZVOUS, err);
}

/* The counts of schedule_inflight on worker w (check_order's, not strict, without the
 * order's flags that only explain its errors): per stage of w, the microbatches forwarded
 * and not yet backwarded and the weight versions held, their maxima raised into act and
 * ver. fver: [S x T] the version each F used (zero at first); cur, infl, held, okp: [S]
 * and mine: [S] scratch; vref: [vmax x S] zeroed scratch, left zeroed. 0, or -1 with err
 * naming the first bad field. */
static int count_worker(const schedule *s, int w, int *fver, int *cur, int *infl, int *held,
                        int *okp, unsigned char *mine, int *vref, int *act, int *ver,
                        plumb_err *err)
{
    const int S = s->nstages, T = sched_total_mb(s), vmax = T + s->iterations + 2;
    const action *acts = s->acts[w];
    /* okp[st]: the last peer found to hold stage st (the peers of a worker's transfers
     * are few: their placement is read once each, not per transfer) */
    for (int st = 0; st < S; st++)
        cur[st] = infl[st] = 0, held[st] = 1, okp[st] = -1,
        mine[st] = (unsigned char)sched_hosts(s, w, st);
    int rc = 0;
    for (int i = 0; i < s->len[w]; i++) {
        const action *a = &acts[i];
        int st = a->stage, m = a->microbatch;
        int here = (unsigned)st < (unsigned)S && mine[st];
        /* layer 1 (fields_ok, w's own placement read from mine, a peer's from okp) */
        int bad = !here || (unsigned)a->kind >= ACT_NKINDS ||
                  (a->kind != ACT_ALLREDUCE && a->kind != ACT_STEP &&
                   (unsigned)m >= (unsigned)T);
        if (!bad && act_is_comm(a->kind)) {
            int k = a->kind, want = (k == ACT_SEND_F || k == ACT_RECV_B) ? st + 1 : st - 1;
            if (want < 0 || want >= S || a->peer_stage != want) {
                bad = 1;
            } else if (a->peer != okp[want]) {
                bad = a->peer < 0 || a->peer >= s->nworkers || a->peer == w ||
                      !sched_hosts(s, a->peer, want);
                if (!bad) okp[want] = a->peer;
            }
        }
        if (bad) {
            if (check_fields(s, w, i, err)) {
                rc = -1;
                break;
            }
        }
        /* a transfer changes no count: the maxima stand as the stage's computes left
         * them (of a stage with transfers only, 1 version, which the floor below gives) */
        if (!here || act_is_comm(a->kind)) continue;
        size_t k = (size_t)st * T + (m >= 0 && m < T ? m : 0);
        int *vr = vref + (size_t)st * vmax;
        int v = a->kind == ACT_F ? (fver[k] = a->version)
                : a->kind == ACT_STEP ? cur[st]++ : fver[k];
        sched_count_step(a->kind, v, a->kind == ACT_STEP ? v : cur[st], vmax, &infl[st],
                         &held[st], vr);
        if (infl[st] > act[st]) act[st] = infl[st];
        if (held[st] > ver[st]) ver[st] = held[st];
    }
    /* leave vref zeroed for the next worker: only its stages' rows were written */
    for (int st = 0; st < S; st++)
        if (mine[st]) memset(vref + (size_t)st * vmax, 0, (size_t)vmax * sizeof *vref);
    return rc;
}

int schedule_inflight(const schedule *s, int *max_activations, int *max_versions,
                      plumb_err *err)
{
    if (!s) return err_set(err, NULL, NULL, "no schedule");
    const int S = s->nstages, T = sched_total_mb(s);
    const size_t vmax = (size_t)T + s->iterations + 2;
    int *act = calloc((size_t)S + 1, sizeof *act), *ver = calloc((size_t)S + 1, sizeof *ver);
    int *fver = calloc((size_t)S * T + 1, sizeof *fver);
    int *cur = malloc(((size_t)S + 1) * 4 * sizeof *cur);
    int *vref = calloc((size_t)S * vmax + 1, sizeof *vref);
    unsigned char *mine = malloc((size_t)S + 1);
    int rc = 0;
    if (!act || !ver || !fver || !cur || !vref || !mine) {
        rc = err_set(err, NULL, NULL, "out of memory");
    } else {
        /* per worker: the maxima of its own stages (a stage's replicas: the largest) */
        for (int w = 0; w < s->nworkers && !rc; w++)
            rc = count_worker(s, w, fver, cur, cur + S + 1, cur + 2 * (S + 1),
                              cur + 3 * (S + 1), mine, vref, act, ver, err);
    }
    for (int st = 0; st < S && !rc; st++) {
        if (max_activations) max_activations[st] = act[st];
        if (max_versions) max_versions[st] = ver[st] > 0 ? ver[st] : 1;
    }
    free(act), free(ver), free(fver), free(cur), free(vref), free(mine);
    return rc ? -1 : 0;
}

int schedule_inflight_fresh(const schedule *s, int *max_activations, int *max_versions,
                            plumb_err *err)
{
    if (!s || !s->counts) return schedule_inflight(s, max_activations, max_versions, err);
    const int S = s->nstages;
    if (max_activations) memcpy(max_activations, s->counts, (size_t)S * sizeof *max_activations);
    if (max_versions) memcpy(max_versions, s->counts + S, (size_t)S * sizeof *max_versions);
    return 0;
}
