/* schedule_gen.c: the generators. Each lays out, per worker, the order of forward and
 * backward work of one pipeline schedule; schedule_lower.c then adds the replicas'
 * all-reduce, the sends and receives, the optimizer steps and the weight versions.
 *
 * Microbatch g (global index: iteration * microbatches + m) of a stage with r replicas
 * runs on replica g % r (PipeDream's 1F1B-RR). A replica of stage s keeps at most
 * ceil(W_s / r_s) microbatches in flight under the 1F1B kinds, W_s being the workers of
 * stages s..p-1: p - s without replication, PipeDream's NOAM for the input stage. */
#include "schedule_impl.h"

#include <stdlib.h>

int sched_inflight_1f1b(const int *replicas, int nstages, int st)
{
    if (!replicas || st < 0 || st >= nstages || replicas[st] < 1) return -1;
    int w = 0;
    for (int t = st; t < nstages; t++) w += replicas[t];
    return (w + replicas[st] - 1) / replicas[st];
}

/* Most microbatches a replica of stage st holds under 1F1B (sched_inflight_1f1b). */
static int inflight_of(const schedule *s, int st)
{
    return sched_inflight_1f1b(s->replicas, s->nstages, st);
}

int sched_replica_order(int r, int j, int lo, int hi, int k, int hold_all, int *out)
{
    int n = 0, cnt = 0;
    int g0 = lo + ((j - lo % r) % r + r) % r; /* the first g >= lo with g % r == j */
    for (int g = g0; g < hi; g += r) n++;
    if (hold_all) {
        for (int t = 0; t < n; t++) out[cnt++] = g0 + t * r + 1;
        for (int t = 0; t < n; t++) out[cnt++] = -(g0 + t * r + 1);
        return cnt;
    }
    if (k > n) k = n;
    if (k < 0) k = 0;
    for (int t = 0; t < k; t++) out[cnt++] = g0 + t * r + 1;
    for (int t = 0; t < n; t++) {
        if (t + k < n) out[cnt++] = g0 + (t + k) * r + 1;
        out[cnt++] = -(g0 + t * r + 1);
    }
    return cnt;
}

static int emit(actvec *v, int kind, int st, int m) { return actvec_push(v, act_make(kind, st, m)); }

/* The order of sched_replica_order (n codes in ord) as stage st's actions. zb: each
 * backward is split into I and W, and W of the oldest pending microbatch follows each I
 * from the d-th on (the rest come last); pend: room for n microbatches (zb only). */
static int emit_order(actvec *v, int st, const int *ord, int n, int zb, int d, int *pend)
{
    int nb = 0, wn = 0;
    for (int i = 0; i < n; i++) {
        const int g = (ord[i] > 0 ? ord[i] : -ord[i]) - 1;
        if (ord[i] > 0) {
            if (emit(v, ACT_F, st, g)) return -1;
        } else if (!zb) {
            if (emit(v, ACT_B, st, g)) return -1;
        } else {
            if (emit(v, ACT_I, st, g)) return -1;
            pend[nb] = g;
            if (nb++ >= d && emit(v, ACT_W, st, pend[wn++])) return -1;
        }
    }
    while (zb && wn < nb)
        if (emit(v, ACT_W, st, pend[wn++])) return -1;
    return 0;
}

/* The one-stage-per-rank kinds, shaped by their traits: the flushing ones per iteration,
 * then a flush (every forward then every backward when the kind holds all microbatches,
 * gpipe; 1F1B with the backward split and W deferred, zb-h1; else 1F1B); the asynchronous
 * ones (pipedream, 2bw) one continuous 1F1B over every microbatch of every iteration. */
static int gen_single(const schedule *s, actvec *lists)
{
    const sched_traits *tr = sched_traits_of(s->kind);
    int M = s->microbatches, T = sched_total_mb(s), kmax = 0;
    int async = tr->async, hold_all = tr->hold == SCHED_HOLD_ALL, span = async ? T : M;
    /* one replica's order of one iteration (all of them when async), and its pending W */
    int *ord = malloc((size_t)3 * span * sizeof *ord), *pend = ord + 2 * (size_t)span;
    if (!ord) return -1;
    for (int st = 0; st < s->nstages; st++)
        if (inflight_of(s, st) - 1 > kmax) kmax = inflight_of(s, st) - 1;
    for (int st = 0; st < s->nstages; st++) {
        int k = inflight_of(s, st) - 1, r = s->replicas[st];
        for (int j = 0; j < r; j++) {
            actvec *v = &lists[s->stage_workers[s->stage_first[st] + j]];
            for (int it = 0; it < (async ? 1 : s->iterations); it++) {
                int n = async ? sched_replica_order(r, j, 0, T, k, hold_all, ord)
                              : sched_replica_order(r, j, it * M, it * M + M, k, hold_all, ord);
                if (emit_order(v, st, ord, n, tr->split_backward, kmax - k, pend)) {
                    free(ord);
                    return -1;
                }
            }
        }
    }
    free(ord);
    return 0;
}

/* Rounds of the interleaved order: at least p microbatches each (one round when M < p). */
static int interleaved_rounds(int M, int p) { return M / p > 0 ? M / p : 1; }

int sched_interleaved_warmup(int p, int V, int M, int r)
{
    int rounds = interleaved_rounds(M, p), G = (M + rounds - 1) / rounds;
    int k = 2 * (p - r - 1) + (V - 1) * G;
    return k > M * V ? M * V : k;
}

/* Megatron-LM's interleaved 1F1B on rank r: microbatches in groups of p (the last group
 * may be smaller), each group through chunk 0, then chunk 1, ...; backwards in the same
 * order with the chunks reversed; sched_interleaved_warmup's warmup forwards. */
static int gen_interleaved(const schedule *s, actvec *lists)
{
    int p = sched_nranks(s), V = s->chunks, M = s->microbatches, total = M * V;
    int *tm = malloc((size_t)total * sizeof *tm), *tc = malloc((size_t)total * sizeof *tc);
    if (!tm || !tc) {
        free(tm), free(tc);
        return -1;
    }
    /* rounds of at least p microbatches each (one round when M < p), sizes as even as
     * possible, the larger first */
    int rounds = interleaved_rounds(M, p), n = 0, g0 = 0;
    for (int q = 0; q < rounds; q++) {
        int size = M / rounds + (q < M % rounds);
        for (int c = 0; c < V; c++)
            for (int m = g0; m < g0 + size; m++) tm[n] = m, tc[n] = c, n++;
        g0 += size;
    }
    for (int r = 0; r < p; r++) {
        actvec *v = &lists[sched_rank_worker(s, r)];
        int k = sched_interleaved_warmup(p, V, M, r);  /* M: one pipeline's */
        for (int it = 0; it < s->iterations; it++) {
            int base = it * M, rc = 0;
            for (int i = 0; i < k && !rc; i++) rc = emit(v, ACT_F, tc[i] * p + r, base + tm[i]);
            for (int t = 0; t < total && !rc; t++) {
                if (t + k < total) rc = emit(v, ACT_F, tc[t + k] * p + r, base + tm[t + k]);
                if (!rc) rc = emit(v, ACT_B, (V - 1 - tc[t]) * p + r, base + tm[t]);
            }
            if (rc) {
                free(tm), free(tc);
                return -1;
            }
        }
    }
    free(tm), free(tc);
    return 0;
}

typedef struct zbv_ctx {
    actvec *v;
    int M, base, rc;
} zbv_ctx;

static void zbv_emit(zbv_ctx *z, int kind, int st, int m)
{
    if (!z->rc && m < z->M) z->rc = emit(z->v, kind, st, z->base + m);
}

/* ZB-V (Qi et al. 2023, section 6) on rank r with the V placement: chunk 0 is stage r,
 * chunk 1 stage 2p - 1 - r. Laid out for max(2p - 1, M) microbatches, the ones past M
 * dropped, as PyTorch's ScheduleZBVZeroBubble does. */
static int gen_zbv(const schedule *s, actvec *lists)
{
    int p = sched_nranks(s), M = s->microbatches, n = M > 2 * p - 1 ? M : 2 * p - 1;
    for (int r = 0; r < p; r++) {
        int c0 = r, c1 = 2 * p - 1 - r;
        for (int it = 0; it < s->iterations; it++) {
            zbv_ctx z = {&lists[sched_rank_worker(s, r)], M, it * M, 0};
            int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
            for (int i = 0; i < 2 * (p - r) - 1; i++) zbv_emit(&z, ACT_F, c0, f0++);
            for (int i = 0; i < r; i++) {
                zbv_emit(&z, ACT_F, c1, f1++);
                zbv_emit(&z, ACT_F, c0, f0++);
            }
            for (int i = 0; i < p - r; i++) {
                zbv_emit(&z, ACT_F, c1, f1++);
                zbv_emit(&z, ACT_I, c1, b1);
                zbv_emit(&z, ACT_W, c1, b1++);
            }
            while (f1 < f0 || f0 < n) {
                if (f0 < n) zbv_emit(&z, ACT_F, c0, f0++);
                zbv_emit(&z, ACT_I, c0, b0);
                zbv_emit(&z, ACT_W, c0, b0++);
                zbv_emit(&z, ACT_F, c1, f1++);
                zbv_emit(&z, ACT_I, c1, b1);
                zbv_emit(&z, ACT_W, c1, b1++);
            }
            int w0 = b0, w1 = b1;
            for (int i = 0; i < r; i++) {
                zbv_emit(&z, ACT_I, c0, b0++);
                zbv_emit(&z, ACT_I, c1, b1++);
            }
            for (int i = 0; i < p - r; i++) {
                zbv_emit(&z, ACT_I, c0, b0++);
                zbv_emit(&z, ACT_W, c0, w0++);
            }
            while (w1 < b1) zbv_emit(&z, ACT_W, c1, w1++);
            while (w0 < b0) zbv_emit(&z, ACT_W, c0, w0++);
            if (z.rc) return -1;
        }
    }
    return 0;
}

/* Constraints of the kinds beyond sched_alloc's. */
static int check_kind(const schedule *s, plumb_err *err)
{
    int M = s->microbatches;
    const sched_traits *tr = sched_traits_of(s->kind);
    if (tr->chunks_max > 1 && M % s->replicas[0])
        return err_set(err, NULL, "microbatches", "%s runs %d whole pipelines, one per "
                       "replica: expected a multiple of %d microbatches (got %d)", tr->name,
                       s->replicas[0], s->replicas[0], M);
    if (tr->mb_per_replica)
        for (int st = 0; st < s->nstages; st++)
            if (M % s->replicas[st])
                return err_set(err, NULL, "microbatches", "%s with stage %d on %d replicas "
                               "needs a multiple of %d (got %d)", tr->name, st, s->replicas[st],
                               s->replicas[st], M);
    if (tr->mb_cover_inflight)
        for (int st = 0; st < s->nstages; st++) {
            int need = (inflight_of(s, st) - 1) * s->replicas[st];
            if (M < need)
                return err_set(err, NULL, "microbatches", "%s keeps %d weight versions only "
                               "when a minibatch covers the microbatches in flight: stage %d "
                               "needs at least %d (got %d)", tr->name, tr->versions, st, need,
                               M);
        }
    return 0;
}

/* The chunked kinds' generator for s (one replica per stage) into lists. */
static int gen_chunked(schedule *s, actvec *lists)
{
    switch (s->kind) {
    case SCHED_INTERLEAVED: return gen_interleaved(s, lists);
    case SCHED_ZB_V: return gen_zbv(s, lists);
    case SCHED_DUALPIPEV: return sched_gen_dualpipev(s, lists);
    default: return -1;
    }
}

/* A chunked kind whose stages have r > 1 replicas runs r whole pipelines side by side
 * (Megatron-LM's data parallelism): replica j of every rank takes the microbatches g with
 * g % r == j, M / r of them per iteration, in the order the generator gives one pipeline.
 * Generates that one pipeline (as the workers of replica 0, with M / r microbatches) and
 * copies each rank's list to its replicas with local microbatch it * M/r + m renamed to
 * it * M + m r + j. 0, or -1 when out of memory. */
static int gen_chunked_replicated(schedule *s, actvec *lists)
{
    int r = s->replicas[0], M = s->microbatches, Mr = M / r, p = sched_nranks(s);
    actvec *one = calloc((size_t)s->nworkers, sizeof *one);
    if (!one) return -1;
    s->microbatches = Mr;
    int rc = gen_chunked(s, one);
    s->microbatches = M;
    for (int q = 0; q < p && !rc; q++) {
        const actvec *src = &one[sched_rank_worker(s, q)];
        for (int j = 0; j < r && !rc; j++) {
            actvec *dst = &lists[s->stage_workers[s->stage_first[q] + j]];
            for (int i = 0; i < src->n && !rc; i++) {
                action a = src->a[i];
                int it = a.microbatch / Mr, m = a.microbatch % Mr;
                a.microbatch = it * M + m * r + j;
                rc = actvec_push(dst, a);
            }
        }
    }
    for (int w = 0; w < s->nworkers; w++) actvec_free(&one[w]);
    free(one);
    return rc;
}

schedule *schedule_generate(const sched_spec *spec, plumb_err *err)
{
    return schedule_generate_costed(spec, NULL, err);
}

/* The compute order of spec (checked, generated: each worker's F/B/I/W in lists, not yet
 * lowered) into a new schedule *out. 0, or -1 with err (*out and lists freed). */
static int gen_order(const sched_spec *spec, schedule **out, actvec **lists, plumb_err *err)
{
    schedule *s = sched_alloc(spec, err);
    actvec *l = NULL;
    *out = NULL, *lists = NULL;
    if (!s) return -1;
    if (check_kind(s, err)) goto fail;
    l = calloc((size_t)s->nworkers, sizeof *l);
    if (!l) goto oom;
    /* each list sized once, to what its stages' share of the microbatches needs (F and B,
     * or F, I and W), instead of doubling as it is pushed */
    int per = sched_traits_of(s->kind)->split_backward ? 3 : 2, T = sched_total_mb(s);
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++)
            l[s->stage_workers[s->stage_first[st] + j]].cap +=
                per * ((T + s->replicas[st] - 1) / s->replicas[st]);
    for (int w = 0; w < s->nworkers; w++)
        if (l[w].cap > 0 && !(l[w].a = malloc((size_t)l[w].cap * sizeof *l[w].a))) goto oom;
    int rc;
    if (!sched_kind_chunked(s->kind))
        rc = gen_single(s, l);
    else if (s->replicas[0] > 1)
        rc = gen_chunked_replicated(s, l);
    else
        rc = gen_chunked(s, l);
    if (rc) goto oom;
    *out = s, *lists = l;
    return 0;
oom:
    err_set(err, NULL, NULL, "out of memory");
fail:
    sched_order_free(s, l);
    return -1;
}

void sched_order_free(schedule *s, actvec *lists)
{
    for (int w = 0; lists && s && w < s->nworkers; w++) actvec_free(&lists[w]);
    free(lists);
    schedule_free(s);
}

schedule *schedule_generate_costed(const sched_spec *spec, const double *stage_cost,
                                   plumb_err *err)
{
    schedule *s;
    actvec *lists;
    if (gen_order(spec, &s, &lists, err)) return NULL;
    if (sched_finish(s, lists, stage_cost, err)) {
        sched_order_free(s, lists);
        return NULL;
    }
    free(lists);
    return s;
}

/* need(s) of s's compute order (lists, not yet lowered): s lent the lists as its actions
 * for the call. */
static int order_need(schedule *s, actvec *lists, int (*need)(const schedule *, void *),
                      void *ctx)
{
    action **acts = s->acts;
    int *len = s->len, rc = -1;
    s->acts = malloc(((size_t)s->nworkers + 1) * sizeof *s->acts);
    s->len = malloc(((size_t)s->nworkers + 1) * sizeof *s->len);
    if (s->acts && s->len) {
        for (int w = 0; w < s->nworkers; w++) s->acts[w] = lists[w].a, s->len[w] = lists[w].n;
        rc = need(s, ctx);
    }
    free(s->acts), free(s->len);
    s->acts = acts, s->len = len;
    return rc;
}

int schedule_plan_costs(const plan *pl, double *cost)
{
    if (!pl || !pl->prof || !pl->clus || !cost) return -1;
    for (int st = 0; st < pl->nstages; st++) {
        const plan_stage *ps = &pl->stages[st];
        double f = 0, i = 0, w = 0, speed = 0;
        for (int l = ps->first_layer; l <= ps->last_layer; l++) {
            if (l < 0 || l >= pl->prof->nlayers) return -1;
            const profile_layer *ly = &pl->prof->layers[l];
            f += ly->forward_ms;
            if (ly->backward_input_ms >= 0 && ly->backward_weight_ms >= 0) {
                i += ly->backward_input_ms;
                w += ly->backward_weight_ms;
            } else {
                i += ly->backward_ms / 2;
                w += ly->backward_ms / 2;
            }
        }
        if (pl->recompute) i += f;
        for (int j = 0; j < ps->replicas; j++) {
            const device_type *t = ps->devices ? cluster_device_type(pl->clus, ps->devices[j])
                                               : NULL;
            double sp = t && t->speed > 0 ? t->speed : 1;
            if (j == 0 || sp < speed) speed = sp;
        }
        if (!(speed > 0)) speed = 1;
        cost[3 * st] = f / speed > 1e-9 ? f / speed : 1e-9;
        cost[3 * st + 1] = i / speed > 1e-9 ? i / speed : 1e-9;
        cost[3 * st + 2] = w / speed > 1e-9 ? w / speed : 1e-9;
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

schedule *schedule_from_plan_grown(const plan *pl, int iterations,
                                   int (*need)(const schedule *, void *ctx), void *ctx,
                                   int rounds, int *grown, plumb_err *err)
{
    if (grown) *grown = 0;
    if (!pl || pl->nstages < 1 || !pl->stages)
        return err_set(err, NULL, "stages", "the plan has no stages"), NULL;
    int total = 0;
    for (int st = 0; st < pl->nstages; st++) {
        if (pl->stages[st].replicas < 1 || !pl->stages[st].devices)
            return err_set(err, NULL, "stages", "stage %d has no devices", st), NULL;
        total += pl->stages[st].replicas;
    }
    int *reps = malloc((size_t)pl->nstages * sizeof *reps);
    int *devs = malloc((size_t)total * sizeof *devs), *sorted = malloc((size_t)total * sizeof *sorted);
    int *workers = malloc((size_t)total * sizeof *workers);
    double *cost = NULL;
    schedule *s = NULL;
    if (!reps || !devs || !sorted || !workers) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    int n = 0;
    for (int st = 0; st < pl->nstages; st++) {
        reps[st] = pl->stages[st].replicas;
        for (int j = 0; j < reps[st]; j++) devs[n] = sorted[n] = pl->stages[st].devices[j], n++;
    }
    qsort(sorted, (size_t)total, sizeof *sorted, cmp_int);
    int nd = 0;
    for (int i = 0; i < total; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) sorted[nd++] = sorted[i];
    for (int i = 0; i < total; i++) {
        int lo = 0, hi = nd - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (sorted[mid] < devs[i]) lo = mid + 1; else hi = mid;
        }
        workers[i] = lo;
    }
    sched_spec spec = {pl->schedule, nd, pl->nstages, pl->chunks > 0 ? pl->chunks : 1,
                       pl->microbatches, iterations, reps, workers};
    cost = malloc((size_t)pl->nstages * 3 * sizeof *cost);
    if (!cost) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    const double *sc = schedule_plan_costs(pl, cost) ? NULL : cost;
    actvec *lists = NULL;
    for (int round = 0;; round++) { /* the compute order, grown while need asks */
        if (gen_order(&spec, &s, &lists, err)) goto done;
        int k = need ? order_need(s, lists, need, ctx) : 0;
        if (k < 0) {
            err_set(err, NULL, NULL, "out of memory");
            sched_order_free(s, lists);
            s = NULL;
            goto done;
        }
        if (k <= spec.iterations || round >= rounds) break;
        sched_order_free(s, lists);
        s = NULL;
        spec.iterations = k;
        if (grown) ++*grown;
    }
    if (sched_finish(s, lists, sc, err)) {
        sched_order_free(s, lists);
        s = NULL;
        goto done;
    }
    free(lists);
    for (int w = 0; w < s->nworkers; w++) s->worker_device[w] = sorted[w];
done:
    free(reps), free(devs), free(sorted), free(workers), free(cost);
    return s;
}

schedule *schedule_from_plan(const plan *pl, int iterations, plumb_err *err)
{
    return schedule_from_plan_grown(pl, iterations, NULL, NULL, 0, NULL, err);
}
