/* transport_local.c: the in-process transport: workers are threads of one process and post
 * messages to one mailbox (a list guarded by a mutex and a condition variable), matched by
 * (from, to, tag). A message is a host copy of the sender's buffer, or, where the backend
 * has the hand-off entries (CPU, CUDA), a staging buffer on the sender's device that the
 * receiver copies from on its own queue, ordered by marks, so that no host thread waits
 * for a device copy; a lent send skips the staging buffer, the receiver copying straight
 * out of the sender's. Each (sender, receiver) pair keeps its staging buffers for reuse;
 * `reserve` sets them aside before a run (schedule_send_bound says how many), so that
 * sends allocate nothing while it runs. All-reduce is a reduce-scatter then an all-gather
 * (each member sums one part of the buffer with the backend's axpy, in group order, and
 * lends it to the others), both ways lent; reduce-scatter and all-gather lend each member's
 * parts straight to their owners. A receive
 * that waits too long reports a deadlock. */
#include "exec/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A device buffer of the sending worker's context that carries one message at a time, or,
 * for a lent send, the marks that order the receiver's copy out of the sender's own buffer.
 * After the receiver has queued its copy out, it goes back to the spare list of its pool
 * (pair and class), and the sender's next message there reuses it once `done` has passed. */
typedef struct hand {
    struct hand *next;      /* in a spare list */
    void *dev;              /* cap bytes of the sender's context; lent: the sender's buffer */
    size_t cap;
    int lent;               /* dev belongs to the sender, not to the hand */
    int busy;               /* out of its pool: posted, its receiver yet to copy out */
    bk_mark *sent;          /* recorded by the sender after filling dev (sender's device) */
    bk_mark *done;          /* recorded by the receiver after copying out (its device;
                               made on its first use, NULL before) */
} hand;

typedef struct msg {
    struct msg *next;
    int from, to;
    long tag;
    int pool;               /* device path: the pool class its hand goes back to */
    size_t bytes;
    hand *h;                /* device path: the staging buffer; NULL: data holds the bytes */
    const bk_ctx *src;      /* device path: the sender's context */
    unsigned char data[];
} msg;

typedef struct local {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    msg *head, *tail;
    int nworkers;
    double timeout_s;
    int aborted;
    char why[512];
    hand **spare;           /* pools: spare lists per (from, to, class), pool_of() */
    int *held;              /* per sender: its hands a receiver is copying out of now */
    float **part;           /* per worker: the all-reduce root's receive buffer, kept between
                               calls (an allocation per call would stall a GPU's streams) */
    size_t *part_cap;       /* its bytes */
} local;

/* 1 when messages move device to device with this backend. */
static int device_path(const backend *bk)
{
    return bk->mark_new && bk->mark_free && bk->mark_record && bk->mark_wait && bk->copy_peer;
}

/* Pools of hands: per ordered pair of workers, one of staging buffers (copied sends) and
 * one of mark pairs for lent sends (no buffer). */
enum { POOL_STAGED = 0, POOL_LENT, POOL_NCLASSES };

static hand **pool_of(local *l, int from, int to, int cls)
{
    return &l->spare[((size_t)from * (size_t)l->nworkers + (size_t)to) * POOL_NCLASSES +
                     (size_t)cls];
}

static int aborted_err(local *l, plumb_err *err)
{
    return err_set(err, NULL, NULL, "%s", l->why[0] ? l->why : "transport aborted");
}

static void deadline_in(struct timespec *dl, double s)
{
    clock_gettime(CLOCK_REALTIME, dl);
    dl->tv_sec += (time_t)s;
}

static void hand_free(const backend *bk, bk_ctx *owner, hand *h)
{
    if (!h->lent) bk->free(owner, h->dev);
    bk->mark_free(h->sent);
    bk->mark_free(h->done);
    free(h);
}

/* A new hand in ctx: a staging buffer of `bytes`, or none when lent. NULL with err set
 * when out of memory. */
static hand *hand_new(const backend *bk, bk_ctx *ctx, size_t bytes, int lent, plumb_err *err)
{
    hand *h = calloc(1, sizeof *h);
    if (!h) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    h->cap = lent ? 0 : bytes;
    h->lent = lent;
    if ((!lent && !(h->dev = bk->alloc(ctx, bytes, err))) ||
        !(h->sent = bk->mark_new(ctx, err))) {
        hand_free(bk, ctx, h);
        return NULL;
    }
    return h;
}

/* A hand of class `cls` for a message of `bytes` from `from` to `to` in ctx (from's
 * context): the smallest spare one of its pool that fits, ordered after its last
 * receiver's copy, else a new one. NULL with err set when out of device memory. */
static hand *hand_take(local *l, const backend *bk, bk_ctx *ctx, int from, int to, int cls,
                       size_t bytes, plumb_err *err)
{
    const size_t need = cls == POOL_LENT ? 0 : bytes;
    hand **best = NULL;
    pthread_mutex_lock(&l->mu);
    for (hand **p = pool_of(l, from, to, cls); *p; p = &(*p)->next)
        if ((*p)->cap >= need && (!best || (*p)->cap < (*best)->cap)) best = p;
    hand *h = best ? *best : NULL;
    if (best) *best = h->next;
    pthread_mutex_unlock(&l->mu);
    if (h) {
        if (h->done) bk->mark_wait(ctx, h->done);
    } else if (!(h = hand_new(bk, ctx, need, cls == POOL_LENT, err))) {
        return NULL;
    }
    h->busy = 1;
    return h;
}

/* Puts h back in pool `cls` of (from, to); `held` says a receiver had it. */
static void hand_return(local *l, int from, int to, int cls, hand *h, int held)
{
    pthread_mutex_lock(&l->mu);
    hand **sp = pool_of(l, from, to, cls);
    h->next = *sp;
    *sp = h;
    h->busy = 0;
    if (held) l->held[from]--;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Posts a message; `lent`: the receiver copies out of buf itself (device path only).
 * Where `taken` is given it receives the message's hand (NULL on the host path), for
 * hand_wait. */
static int post(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                const void *buf, size_t bytes, int lent, hand **taken, plumb_err *err)
{
    local *l = t->impl;
    if (to < 0 || to >= l->nworkers || from < 0 || from >= l->nworkers)
        return err_set(err, NULL, NULL, "send from worker %d to worker %d: expected 0 to %d",
                       from, to, l->nworkers - 1);
    pthread_mutex_lock(&l->mu);
    const int aborted = l->aborted;
    pthread_mutex_unlock(&l->mu);
    if (aborted) return aborted_err(l, err); /* before allocating anything */
    const int dev = device_path(bk);
    lent = lent && dev;
    msg *m = malloc(sizeof *m + (dev ? 0 : bytes) + 1);
    if (!m) return err_set(err, NULL, NULL, "out of memory for a %zu-byte message", bytes);
    *m = (msg){.from = from, .to = to, .tag = tag, .bytes = bytes, .src = ctx,
               .pool = lent ? POOL_LENT : POOL_STAGED};
    if (dev) {
        if (!(m->h = hand_take(l, bk, ctx, from, to, m->pool, bytes, err))) {
            free(m);
            return -1;
        }
        if (lent) m->h->dev = (void *)buf;
        else bk->copy(ctx, m->h->dev, buf, bytes);
        bk->mark_record(ctx, m->h->sent);
        if (taken) *taken = m->h;
    } else if (bytes) {
        bk->download(ctx, m->data, buf, bytes);
    }
    pthread_mutex_lock(&l->mu);
    if (l->aborted) {
        pthread_mutex_unlock(&l->mu);
        if (m->h) hand_return(l, from, to, m->pool, m->h, 0);
        free(m);
        return aborted_err(l, err);
    }
    if (l->tail) l->tail->next = m;
    else l->head = m;
    l->tail = m;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

static int local_send(transport *t, const backend *bk, bk_ctx *ctx, int from, int to, long tag,
                      const void *buf, size_t bytes, plumb_err *err)
{
    return post(t, bk, ctx, from, to, tag, buf, bytes, 0, NULL, err);
}

static int local_send_lent(transport *t, const backend *bk, bk_ctx *ctx, int from, int to,
                           long tag, const void *buf, size_t bytes, plumb_err *err)
{
    return post(t, bk, ctx, from, to, tag, buf, bytes, 1, NULL, err);
}

/* Copies m's payload into buf (bytes long, ctx's) and disposes of m. */
static int deliver(local *l, const backend *bk, bk_ctx *ctx, msg *m, void *buf, size_t bytes,
                   plumb_err *err)
{
    int rc = 0;
    if (m->bytes != bytes)
        rc = err_set(err, NULL, NULL, "worker %d: message %ld from worker %d has %zu bytes, "
                     "expected %zu", m->to, m->tag, m->from, m->bytes, bytes);
    if (m->h) {
        hand *h = m->h;
        if (!rc && !h->done && !(h->done = bk->mark_new(ctx, err))) rc = -1;
        if (!rc) {
            bk->mark_wait(ctx, h->sent);
            bk->copy_peer(ctx, buf, m->src, h->dev, bytes);
            bk->mark_record(ctx, h->done);
        }
        hand_return(l, m->from, m->to, m->pool, h, 1);
    } else if (!rc && bytes) {
        bk->upload(ctx, buf, m->data, bytes);
    }
    free(m);
    return rc;
}

static int local_recv(transport *t, const backend *bk, bk_ctx *ctx, int to, int from, long tag,
                      void *buf, size_t bytes, plumb_err *err)
{
    local *l = t->impl;
    struct timespec dl;
    deadline_in(&dl, l->timeout_s);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->aborted) {
            pthread_mutex_unlock(&l->mu);
            return aborted_err(l, err);
        }
        msg *prev = NULL, *m = l->head;
        while (m && !(m->from == from && m->to == to && m->tag == tag)) {
            prev = m;
            m = m->next;
        }
        if (m) {
            if (prev) prev->next = m->next;
            else l->head = m->next;
            if (l->tail == m) l->tail = prev;
            if (m->h) l->held[m->from]++;
            pthread_mutex_unlock(&l->mu);
            return deliver(l, bk, ctx, m, buf, bytes, err);
        }
        int w = pthread_cond_timedwait(&l->cv, &l->mu, &dl);
        if (w == ETIMEDOUT) {
            pthread_mutex_unlock(&l->mu);
            return err_set(err, NULL, NULL, "worker %d waited %.0f s for message %ld from "
                           "worker %d: deadlock or a stalled peer", to, l->timeout_s, tag, from);
        }
    }
}

/* Waits until the receiver of h's message from worker `from` has queued its copy out and
 * orders ctx's queue after that copy. -1 with err set when the transport aborts or the
 * receiver does not come within the timeout. */
static int hand_wait(local *l, const backend *bk, bk_ctx *ctx, int from, int to, hand *h,
                     plumb_err *err)
{
    struct timespec dl;
    deadline_in(&dl, l->timeout_s);
    pthread_mutex_lock(&l->mu);
    while (h->busy && !l->aborted)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &dl) == ETIMEDOUT) {
            pthread_mutex_unlock(&l->mu);
            return err_set(err, NULL, NULL, "worker %d waited %.0f s for worker %d to take "
                           "its part of a collective: a stalled peer", from, l->timeout_s, to);
        }
    int busy = h->busy;
    pthread_mutex_unlock(&l->mu);
    if (busy) return aborted_err(l, err);
    bk->mark_wait(ctx, h->done);
    return 0;
}

/* Worker self's kept receive buffer, grown to at least bytes: the all-reduce root's, a
 * reduce-scatter's (an allocation per call would stall a GPU's streams). NULL with err
 * set when out of memory. */
static float *part_get(local *l, const backend *bk, bk_ctx *ctx, int self, size_t bytes,
                       plumb_err *err)
{
    if (l->part_cap[self] < bytes) {
        bk->free(ctx, l->part[self]);
        l->part_cap[self] = 0;
        if (!(l->part[self] = bk->alloc(ctx, bytes, err))) return NULL;
        l->part_cap[self] = bytes;
    }
    return l->part[self];
}

/* self's index in group, or -1 with err set. */
static int member_of(const int *group, int n, int self, plumb_err *err)
{
    for (int i = 0; i < n; i++)
        if (group[i] == self) return i;
    return err_set(err, NULL, NULL, "worker %d is not in the group of its collective", self);
}

/* Gathers to group[0], which sums in place with the backend's axpy (on the device where
 * there is one), then sends the sum back. Every member's buf ends bit-identical. Both ways
 * are lent, so that an all-reduce stages nothing: a member's buf is not written until the
 * sum comes back, which is after the root has copied it out; the root returns once every
 * member has queued its copy of the sum, its later writes to buf ordered after them. The
 * all-reduce of fewer floats than members. */
static int allreduce_gather(transport *t, const backend *bk, bk_ctx *ctx, int self,
                            const int *group, int n, long tag, float *buf, size_t count,
                            plumb_err *err)
{
    const size_t bytes = count * sizeof(float);
    const long up = transport_coll_tag(tag, 0), down = transport_coll_tag(tag, 1);
    int root = group[0];
    if (self != root) {
        if (post(t, bk, ctx, self, root, up, buf, bytes, 1, NULL, err)) return -1;
        return local_recv(t, bk, ctx, self, root, down, buf, bytes, err);
    }
    local *l = t->impl;
    float *part = part_get(l, bk, ctx, self, bytes, err); // (count)
    if (!part) return -1;
    for (int i = 1; i < n; i++) {
        if (local_recv(t, bk, ctx, self, group[i], up, part, bytes, err)) return -1;
        bk->axpy(ctx, count, 1.0f, part, buf);
    }
    /* only this thread takes hands from the (root, member) pools: the ones posted here
     * stay ours to wait on */
    hand **out = calloc((size_t)n, sizeof *out);
    if (!out) return err_set(err, NULL, NULL, "out of memory");
    int rc = 0;
    for (int i = 1; i < n && !rc; i++)
        rc = post(t, bk, ctx, self, group[i], down, buf, bytes, 1, &out[i], err);
    for (int i = 1; i < n && !rc; i++)
        if (out[i]) rc = hand_wait(l, bk, ctx, self, group[i], out[i], err);
    free(out);
    return rc;
}

/* Start of member i's part when count floats are split over n members: parts differ in
 * size by at most one float. */
static size_t part_at(size_t count, int n, int i)
{
    return count / (size_t)n * (size_t)i + ((size_t)i < count % (size_t)n ? (size_t)i
                                                                          : count % (size_t)n);
}

/* Lends to every member i of group but self (index me) part i of src, `total` floats cut
 * by part_at (all = 1), or the whole of src, `total` floats (all = 0), keeping each
 * message's hand in out[i] (none on the host path, where the bytes are copied at once).
 * Returns 0 or -1. */
static int lend_parts(transport *t, const backend *bk, bk_ctx *ctx, const int *group, int n,
                      int me, long tag, const float *src, size_t total, int all, hand **out,
                      plumb_err *err)
{
    for (int i = 0; i < n; i++) {
        const size_t o = all ? part_at(total, n, i) : 0;
        const size_t len = all ? part_at(total, n, i + 1) - o : total;
        if (i != me && post(t, bk, ctx, group[me], group[i], tag, src + o, len * sizeof(float),
                            1, &out[i], err))
            return -1;
    }
    return 0;
}

/* Waits for the hands in out[0..n) (skipping me and empty slots) and clears them. */
static int settle_hands(local *l, const backend *bk, bk_ctx *ctx, const int *group, int n,
                        int me, hand **out, plumb_err *err)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (i != me && out[i] && !rc) rc = hand_wait(l, bk, ctx, group[me], group[i], out[i], err);
        out[i] = NULL;
    }
    return rc;
}

/* Reduce-scatter then all-gather, in place: every member owns one part of buf (part_at),
 * receives that part of every other member's buf, and sums it in group order (member 0's,
 * then 1's, 2's ...: the order of allreduce_gather's root, so the bits are the same on
 * every member and the same as a gather's); then each lends its summed part to all the
 * others, which copy it into place. Each member moves 2 (n - 1) / n of buf, and the
 * members work at once, where a gather to one member moves all of it through that one.
 * Member me >= 2 sums into the kept part buffer first, so that its own floats are added
 * after members 0 and 1's (float addition is commutative, so members 0 and 1 sum in
 * place). Lent parts are settled before buf is written over them, and before return. */
static int local_allreduce(transport *t, const backend *bk, bk_ctx *ctx, int self,
                           const int *group, int n, long tag, float *buf, size_t count,
                           plumb_err *err)
{
    if (n <= 1) return 0;
    if (count < (size_t)n) return allreduce_gather(t, bk, ctx, self, group, n, tag, buf, count, err);
    const int me = member_of(group, n, self, err);
    if (me < 0) return -1;
    local *l = t->impl;
    const long up = transport_coll_tag(tag, 0), down = transport_coll_tag(tag, 1);
    const size_t off = part_at(count, n, me), len = part_at(count, n, me + 1) - off;
    const size_t cap = count / (size_t)n + 1;
    /* recv: a received part; acc: the running sum of member me >= 2 (sim_allreduce_scratch
     * in sim/memory.h counts these bytes) */
    float *recv = part_get(l, bk, ctx, self, (me < 2 ? 1 : 2) * cap * sizeof(float), err);
    hand **out = calloc((size_t)n, sizeof *out);
    if (!recv || !out) {
        free(out);
        return recv ? err_set(err, NULL, NULL, "out of memory") : -1;
    }
    float *acc = recv + cap; // (cap)
    float *own = buf + off;  // (len)
    int rc = lend_parts(t, bk, ctx, group, n, me, up, buf, count, 1, out, err);
    /* the sum of part me in group order, into own (me < 2) or acc */
    float *sum = me < 2 ? own : acc;
    for (int i = 0; i < n && !rc; i++) {
        if (i == me) {
            if (me >= 2) bk->axpy(ctx, len, 1.0f, own, acc);
            continue;
        }
        float *into = (me >= 2 && i == 0) ? acc : recv;
        if (local_recv(t, bk, ctx, self, group[i], up, into, len * sizeof(float), err)) {
            rc = -1;
            break;
        }
        if (into == recv) bk->axpy(ctx, len, 1.0f, recv, sum);
    }
    if (settle_hands(l, bk, ctx, group, n, me, out, err)) rc = -1;
    if (!rc && sum != own) bk->copy(ctx, own, acc, len * sizeof(float));
    if (!rc) rc = lend_parts(t, bk, ctx, group, n, me, down, own, len, 0, out, err);
    for (int i = 0; i < n && !rc; i++) {
        size_t o = part_at(count, n, i);
        if (i != me && local_recv(t, bk, ctx, self, group[i], down, buf + o,
                                  (part_at(count, n, i + 1) - o) * sizeof(float), err))
            rc = -1;
    }
    if (settle_hands(l, bk, ctx, group, n, me, out, err)) rc = -1;
    free(out);
    return rc;
}


/* Waits until every member has queued its copy out of the parts lent to it (out[i]); the
 * caller may then change what it lent. Frees out. Returns rc, or -1 when a wait failed. */
static int lent_settle(local *l, const backend *bk, bk_ctx *ctx, const int *group, int n,
                       int me, hand **out, int rc, plumb_err *err)
{
    if (!rc && settle_hands(l, bk, ctx, group, n, me, out, err)) rc = -1;
    free(out);
    return rc;
}

/* Each member sums its part: member 0's share, then members 1, 2 ... added in group
 * order with the backend's axpy, as the all-reduce's root adds, so the bits match the
 * same part of local_allreduce's sum. In place (dst = src + me count, the member's own
 * part) member me < 2 sums into dst itself (own + part 0 has the bits of part 0 + own)
 * and member me >= 2 into the kept buffer's second half, copied over its own part at the
 * end: the kept buffer is local_allreduce's (2 parts for me >= 2), so an in-place
 * reduce-scatter needs no more than the all-reduce. Own's part is never lent, so it may
 * be written before the others have copied theirs out. */
static int local_reduce_scatter(transport *t, const backend *bk, bk_ctx *ctx, int self,
                                const int *group, int n, long tag, const float *src,
                                float *dst, size_t count, plumb_err *err)
{
    const size_t bytes = count * sizeof(float);
    const int me = member_of(group, n, self, err);
    if (me < 0) return -1;
    const float *own = src + (size_t)me * count;
    const int inplace = dst == own;
    if (n == 1) {
        if (!inplace) bk->copy(ctx, dst, own, bytes);
        return 0;
    }
    local *l = t->impl;
    const long tg = transport_coll_tag(tag, 0);
    hand **out = calloc((size_t)n, sizeof *out);
    if (!out) return err_set(err, NULL, NULL, "out of memory");
    /* part: a received part; in place for me >= 2, the running sum after it */
    float *part = part_get(l, bk, ctx, self, (inplace && me >= 2 ? 2 : 1) * bytes, err);
    float *sum = inplace && me >= 2 ? part + count : dst; // (count)
    int rc = part ? lend_parts(t, bk, ctx, group, n, me, tg, src, (size_t)n * count, 1, out,
                               err)
                  : -1;
    if (!rc && me == 0 && !inplace) bk->copy(ctx, dst, own, bytes);
    else if (!rc && me == 1 && inplace) {
        if (local_recv(t, bk, ctx, self, group[0], tg, part, bytes, err)) rc = -1;
        else bk->axpy(ctx, count, 1.0f, part, dst); /* own + part 0 */
    } else if (!rc && me != 0)
        rc = local_recv(t, bk, ctx, self, group[0], tg, sum, bytes, err);
    for (int i = 1; i < n && !rc; i++) {
        if (inplace && i == me) {
            if (me >= 2) bk->axpy(ctx, count, 1.0f, own, sum);
            continue;
        }
        if (i != me && local_recv(t, bk, ctx, self, group[i], tg, part, bytes, err)) rc = -1;
        else bk->axpy(ctx, count, 1.0f, i == me ? own : part, sum);
    }
    if (!rc && sum != dst) bk->copy(ctx, dst, sum, bytes);
    return lent_settle(l, bk, ctx, group, n, me, out, rc, err);
}

/* Each member lends its src to all the others and receives theirs into place. */
static int local_all_gather(transport *t, const backend *bk, bk_ctx *ctx, int self,
                            const int *group, int n, long tag, const float *src, float *dst,
                            size_t count, plumb_err *err)
{
    const size_t bytes = count * sizeof(float);
    const int me = member_of(group, n, self, err);
    if (me < 0) return -1;
    if (src != dst + (size_t)me * count) bk->copy(ctx, dst + (size_t)me * count, src, bytes);
    if (n == 1) return 0;
    const long tg = transport_coll_tag(tag, 0);
    hand **out = calloc((size_t)n, sizeof *out);
    if (!out) return err_set(err, NULL, NULL, "out of memory");
    int rc = lend_parts(t, bk, ctx, group, n, me, tg, src, count, 0, out, err);
    for (int i = 0; i < n && !rc; i++)
        if (i != me)
            rc = local_recv(t, bk, ctx, self, group[i], tg, dst + (size_t)i * count, bytes, err);
    return lent_settle(t->impl, bk, ctx, group, n, me, out, rc, err);
}

/* Sets aside `count` staging buffers of `bytes` for pipeline messages from `from` to `to`
 * in ctx, on top of what the pair's pool holds. Without the hand-off entries messages
 * travel through host memory and nothing is set aside. */
static int local_reserve(transport *t, const backend *bk, bk_ctx *ctx, int from, int to,
                         int count, size_t bytes, plumb_err *err)
{
    local *l = t->impl;
    if (to < 0 || to >= l->nworkers || from < 0 || from >= l->nworkers)
        return err_set(err, NULL, NULL, "reserve from worker %d to worker %d: expected 0 to "
                       "%d", from, to, l->nworkers - 1);
    if (!device_path(bk)) return 0;
    for (int i = 0; i < count; i++) {
        hand *h = hand_new(bk, ctx, bytes, 0, err);
        if (!h) return -1;
        hand_return(l, from, to, POOL_STAGED, h, 0);
    }
    return 0;
}

static void local_abort(transport *t, const char *why)
{
    local *l = t->impl;
    pthread_mutex_lock(&l->mu);
    if (!l->aborted) {
        l->aborted = 1;
        strncpy(l->why, why ? why : "transport aborted", sizeof l->why - 1);
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* 1 when the mailbox holds a message from worker w. Called with the lock held. */
static int has_unread(const local *l, int w)
{
    for (const msg *m = l->head; m; m = m->next)
        if (m->from == w) return 1;
    return 0;
}

static void local_release(transport *t, const backend *bk, bk_ctx *ctx, int worker, int wait)
{
    local *l = t->impl;
    if (worker < 0 || worker >= l->nworkers) return;
    bk->free(ctx, l->part[worker]); /* the backend waits for its queue first */
    l->part[worker] = NULL;
    l->part_cap[worker] = 0;
    if (!device_path(bk)) return;
    struct timespec dl;
    deadline_in(&dl, l->timeout_s);
    hand *mine = NULL;
    pthread_mutex_lock(&l->mu);
    while (wait && !l->aborted && has_unread(l, worker))
        if (pthread_cond_timedwait(&l->cv, &l->mu, &dl) == ETIMEDOUT) break;
    /* what is still unread will never be: drop it (its receive fails as a stall) */
    for (msg **p = &l->head, *m; (m = *p);) {
        if (m->from != worker) {
            p = &m->next;
            continue;
        }
        *p = m->next;
        if (m->h) {
            m->h->next = mine;
            mine = m->h;
        }
        free(m);
    }
    l->tail = NULL;
    for (msg *m = l->head; m; m = m->next) l->tail = m;
    /* a receiver copying out of our buffers returns them at once: never blocked */
    while (l->held[worker] > 0) pthread_cond_wait(&l->cv, &l->mu);
    for (int i = 0; i < l->nworkers * POOL_NCLASSES; i++) {
        hand **sp = &l->spare[(size_t)worker * (size_t)l->nworkers * POOL_NCLASSES + (size_t)i];
        while (*sp) {
            hand *h = *sp;
            *sp = h->next;
            h->next = mine;
            mine = h;
        }
    }
    pthread_mutex_unlock(&l->mu);
    /* the receivers' copies out of our buffers come before freeing them */
    for (hand *h = mine; h; h = h->next)
        if (h->done) bk->mark_wait(ctx, h->done);
    while (mine) {
        hand *n = mine->next;
        hand_free(bk, ctx, mine);
        mine = n;
    }
}

static void local_destroy(transport *t)
{
    if (!t) return;
    local *l = t->impl;
    msg *m = l->head;
    while (m) {
        msg *n = m->next;
        free(m->h); /* device buffers were freed by release, or leaked with their context */
        free(m);
        m = n;
    }
    for (int i = 0; i < l->nworkers * l->nworkers * POOL_NCLASSES; i++)
        for (hand *h = l->spare[i], *n; h; h = n) {
            n = h->next;
            free(h);
        }
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l->spare);
    free(l->held);
    free(l->part); /* their buffers were freed by release, or leaked with their context */
    free(l->part_cap);
    free(l);
    free(t);
}

transport *transport_local_create(int nworkers, double timeout_s, plumb_err *err)
{
    transport *t = calloc(1, sizeof *t);
    local *l = calloc(1, sizeof *l);
    if (nworkers < 1) nworkers = 1;
    hand **spare = calloc((size_t)nworkers * (size_t)nworkers * POOL_NCLASSES, sizeof *spare);
    int *held = calloc((size_t)nworkers, sizeof *held);
    float **part = calloc((size_t)nworkers, sizeof *part);
    size_t *part_cap = calloc((size_t)nworkers, sizeof *part_cap);
    if (!t || !l || !spare || !held || !part || !part_cap) {
        free(t);
        free(l);
        free(spare);
        free(held);
        free(part);
        free(part_cap);
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->nworkers = nworkers;
    l->timeout_s = transport_timeout_s(timeout_s);
    l->spare = spare;
    l->held = held;
    l->part = part;
    l->part_cap = part_cap;
    t->name = "local";
    t->impl = l;
    t->send = local_send;
    t->send_lent = local_send_lent;
    t->recv = local_recv;
    t->allreduce = local_allreduce;
    t->reduce_scatter = local_reduce_scatter;
    t->all_gather = local_all_gather;
    t->reserve = local_reserve;
    t->abort = local_abort;
    t->release = local_release;
    t->destroy = local_destroy;
    return t;
}
