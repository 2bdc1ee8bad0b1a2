/* engine_gradsync.c: the data-parallel gradient reduction at the end of the iteration
 * (sim_model.grad_sync_end; a plan's "grad_sync": "end"), the engine's model of a runtime
 * that reduces its gradients only once its whole forward-backward loop has returned:
 * Megatron-LM's own DDP (allreduce_gradients, model chunk after model chunk) and
 * Megatron-Core without --overlap-grad-reduce (finalize_model_grads), then the optimizer.
 * A pre-pass over the IR moves each worker's ALLREDUCE and STEP actions of an iteration
 * after its last computation of that iteration (and the sends that follow it): first the
 * all-reduces, in ascending stage order (an interleaved rank's chunks in model order), then
 * the steps, likewise. The engine holds a worker at each ALLREDUCE until its ring ends, so
 * the worker's rings run one after another; no backward registers the ring (eng_backward),
 * so each member's buckets are all ready when it reaches its ALLREDUCE. docs/sim.md,
 * "Gradient reduction at the end". eng_solo_order, a pass before it, gives a stage of one
 * replica that reduces over its context ranks the ALLREDUCE the IR has only for replicated
 * stages. */
#include <stdlib.h>
#include <string.h>

#include "core/schedule_impl.h"
#include "sim/engine_impl.h"

/* An ALLREDUCE or STEP to move: its iteration, kind, stage and place in the list. */
typedef struct gs_move {
    int it, kind, stage, at;
} gs_move;

static int cmp_move(const void *pa, const void *pb)
{
    const gs_move *a = pa, *b = pb;
    if (a->it != b->it) return a->it < b->it ? -1 : 1;
    if (a->kind != b->kind) return a->kind == ACT_ALLREDUCE ? -1 : 1;
    if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
    return (a->at > b->at) - (a->at < b->at);
}

/* The iteration of an action of a microbatch (the engine's rule: its microbatch's, the
 * last one's past the laid-out iterations). */
static int iter_of(const action *a, int nmb, int niter)
{
    int it = a->microbatch / nmb;
    return it >= niter ? niter - 1 : it;
}

/* Worker list acts[0 .. len) placed into out[0 .. len); scratch: it[len], mv[len],
 * last[niter]. Returns 0, or 1 when a computation or send of an iteration comes after one
 * of a later iteration (an asynchronous schedule: its steps are not the iteration's
 * end). */
static int order_worker(const action *acts, int len, int nmb, int niter, action *out,
                        int *it, gs_move *mv, int *last)
{
    int cur = 0, hi = -1, nmv = 0;
    for (int k = 0; k < niter; k++) last[k] = -1;
    for (int i = 0; i < len; i++) {
        const action *a = &acts[i];
        if (a->kind == ACT_ALLREDUCE || a->kind == ACT_STEP) {
            it[i] = cur;  /* that of the worker's last computation, as the engine counts */
            continue;
        }
        it[i] = a->microbatch >= 0 ? iter_of(a, nmb, niter) : cur;
        if (act_is_compute(a->kind))
            cur = it[i];
        if (act_is_compute(a->kind) || a->kind == ACT_SEND_F || a->kind == ACT_SEND_B) {
            if (it[i] < hi)
                return 1;
            hi = it[i];
            last[it[i]] = i;
        }
    }
    /* the moved actions: those of an iteration the worker computes in */
    for (int i = 0; i < len; i++) {
        int k = acts[i].kind;
        if ((k == ACT_ALLREDUCE || k == ACT_STEP) && last[it[i]] >= 0)
            mv[nmv++] = (gs_move){.it = it[i], .kind = k, .stage = acts[i].stage, .at = i};
    }
    qsort(mv, (size_t)nmv, sizeof *mv, cmp_move);
    int o = 0, p = 0;
    for (int i = 0; i < len; i++) {
        int k = acts[i].kind;
        if ((k == ACT_ALLREDUCE || k == ACT_STEP) && last[it[i]] >= 0)
            continue;
        out[o++] = acts[i];
        if (k != ACT_ALLREDUCE && k != ACT_STEP && last[it[i]] == i)
            for (; p < nmv && mv[p].it == it[i]; p++) out[o++] = acts[mv[p].at];
    }
    return 0;
}

int eng_gradsync_order(const schedule *s, schedule *out, plumb_err *err)
{
    int maxlen, bad = 0;
    int nmb = s->microbatches > 0 ? s->microbatches : 1;
    int niter = s->iterations > 0 ? s->iterations : 1;
    if (eng_order_alloc(s, out, &maxlen))
        return err_set(err, NULL, NULL, "out of memory");
    int *it = malloc(((size_t)maxlen + 1) * sizeof *it);
    int *last = malloc(((size_t)niter + 1) * sizeof *last);
    gs_move *mv = malloc(((size_t)maxlen + 1) * sizeof *mv);
    if (!it || !last || !mv) {
        free(it);
        free(last);
        free(mv);
        eng_sync_order_free(out);
        return err_set(err, NULL, NULL, "out of memory");
    }
    for (int w = 0; w < s->nworkers && !bad; w++)
        bad = order_worker(s->acts[w], s->len[w], nmb, niter, out->acts[w], it, mv, last);
    free(it);
    free(last);
    free(mv);
    if (bad) {
        eng_sync_order_free(out);
        const sched_traits *tr = sched_traits_of(s->kind);
        return err_set(err, NULL, "grad_sync", "expected overlap with schedule %s, whose "
                       "iterations overlap on a worker (got end)", tr ? tr->name : "?");
    }
    return 0;
}

void eng_solo_order_free(schedule *out)
{
    eng_sync_order_free(out);
    free(out->len);
    out->len = NULL;
}

int eng_solo_order(const sim_model *m, const schedule *s, schedule *out)
{
    *out = *s;
    out->acts = calloc((size_t)s->nworkers + 1, sizeof *out->acts);
    out->len = calloc((size_t)s->nworkers + 1, sizeof *out->len);
    if (!out->acts || !out->len) {
        eng_solo_order_free(out);
        return -1;
    }
    for (int w = 0; w < s->nworkers; w++) {
        int n = 0;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            n += 1 + (a->kind == ACT_STEP && eng_ring_solo(m, s, a->stage));
        }
        if (!(out->acts[w] = malloc(((size_t)n + 1) * sizeof **out->acts))) {
            eng_solo_order_free(out);
            return -1;
        }
        n = 0;
        for (int i = 0; i < s->len[w]; i++) {
            const action *a = &s->acts[w][i];
            if (a->kind == ACT_STEP && eng_ring_solo(m, s, a->stage))
                out->acts[w][n++] = act_make(ACT_ALLREDUCE, a->stage, -1);
            out->acts[w][n++] = *a;
        }
        out->len[w] = n;
    }
    return 0;
}
