/* schedule_gen_dualpipev.c: the DualPipeV generator (DeepSeek-V3's DualPipe cut in half;
 * PyTorch's ScheduleDualPipeV). V placement: rank r of p holds stage r (chunk 0, the way
 * down) and stage 2p - 1 - r (chunk 1, the way back up). Each rank runs its two chunks in
 * opposite directions: after a warmup of chunk-0 forwards it pairs a forward of one chunk
 * with a backward of the other (on a GPU the pair overlaps its communication with the
 * other's compute; plumb's IR runs the pair in order on the compute stream), and it splits
 * the backward into I and W where that fills a bubble, the W queued and run later in the
 * order the I ran. The lowering pass (schedule_lower.c) adds the sends and receives. */
#include "schedule_impl.h"

#include <stdlib.h>

typedef struct dpv {
    actvec *v;
    int M, base, rc;
    int c[2];              /* the stages of chunk 0 and chunk 1 */
    int f[2], b[2];        /* next forward and next backward microbatch of each chunk */
    int *wq, wh, wt;       /* queue of deferred W: stage * n + microbatch, head and tail */
    int n;                 /* microbatches laid out (>= M; those past M are dropped) */
} dpv;

static void put(dpv *d, int kind, int st, int m)
{
    if (!d->rc && m < d->M) d->rc = actvec_push(d->v, act_make(kind, st, d->base + m));
}

static void fwd(dpv *d, int ch) { put(d, ACT_F, d->c[ch], d->f[ch]++); }

/* Backward of chunk ch's oldest pending microbatch: whole (B), or its I with W queued. */
static void bwd(dpv *d, int ch, int split)
{
    int m = d->b[ch]++;
    if (!split) {
        put(d, ACT_B, d->c[ch], m);
        return;
    }
    put(d, ACT_I, d->c[ch], m);
    d->wq[d->wt++] = d->c[ch] * d->n + m;
}

/* The oldest queued W. */
static void wgt(dpv *d)
{
    if (d->wh == d->wt) return;
    int x = d->wq[d->wh++];
    put(d, ACT_W, x / d->n, x % d->n);
}

/* One iteration of rank r. The phase lengths make each chunk run n forwards and n
 * backwards, and every queued W run before the iteration ends. */
static void dpv_rank(dpv *d, int r, int p)
{
    int down = p - r - 1, n = d->n;
    for (int i = 0; i < 2 * down; i++) fwd(d, 0);            /* chunk 0 fills the pipe */
    for (int i = 0; i < r + 1; i++) fwd(d, 0), fwd(d, 1);    /* both directions start */
    for (int i = 0; i < down; i++) {                         /* chunk 1's first backwards */
        bwd(d, 1, 1);
        wgt(d);
        fwd(d, 1);
    }
    for (int i = 0; i < n - 2 * p + r + 1; i++) {            /* steady: F0 B1 F1 B0 */
        fwd(d, 0), bwd(d, 1, 0);
        fwd(d, 1), bwd(d, 0, 0);
    }
    for (int i = 0; i < down; i++) {                         /* chunk 0's forwards done */
        bwd(d, 1, 0);
        fwd(d, 1), bwd(d, 0, 0);
    }
    /* the drain: whole backwards, then (from the middle on) split ones whose W fill the
     * last bubbles; an odd rank splits from its chunk-1 backward, an even one after it */
    int split = 0;
    for (int i = 0; i < r + 1; i++) {
        if (i == (r + 1) / 2 && r % 2 == 1) split = 1;
        bwd(d, 1, split);
        if (i == (r + 1) / 2 && r % 2 == 0) split = 1;
        bwd(d, 0, split);
    }
    for (int i = 0; i < down; i++) {
        wgt(d);
        bwd(d, 0, 1);
    }
    while (d->wh < d->wt) wgt(d);
}

int sched_gen_dualpipev(const schedule *s, actvec *lists)
{
    int p = sched_nranks(s), M = s->microbatches, n = M > 2 * p ? M : 2 * p;
    int *wq = malloc((size_t)2 * n * sizeof *wq);
    if (!wq) return -1;
    for (int r = 0; r < p; r++)
        for (int it = 0; it < s->iterations; it++) {
            dpv d = {.v = &lists[sched_rank_worker(s, r)], .M = M, .base = it * M,
                     .c = {r, 2 * p - 1 - r}, .wq = wq, .n = n};
            dpv_rank(&d, r, p);
            if (d.rc) {
                free(wq);
                return -1;
            }
        }
    free(wq);
    return 0;
}
