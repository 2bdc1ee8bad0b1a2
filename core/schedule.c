/* schedule.c: the action IR's plumbing: allocation and placement of stages on workers,
 * action text (PyTorch's torch.distributed.pipelining spelling), the per-rank listing,
 * comparison and counting. Generators live in schedule_gen.c, the passes that add
 * communication, all-reduce, steps and versions in schedule_lower.c, the validator in
 * schedule_validate.c and the CSV form in schedule_csv.c. */
#include "schedule_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "grow.h"

static const char *const kind_names[ACT_NKINDS] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD", "STEP",
};

const char *act_kind_name(act_kind k)
{
    return (k >= 0 && k < ACT_NKINDS) ? kind_names[k] : "?";
}

int actvec_grow(actvec *v)
{
    action *p = array_room(v->a, v->n, &v->cap, 16, sizeof *p);
    if (!p) return -1;
    v->a = p;
    return 0;
}

void actvec_free(actvec *v)
{
    free(v->a);
    v->a = NULL;
    v->n = v->cap = 0;
}

int sched_nranks(const schedule *s) { return s->nstages / s->chunks; }
int sched_rank_worker(const schedule *s, int r)
{
    /* chunk 0 of rank r is stage r in both the interleaved and the V placement */
    return s->stage_workers[s->stage_first[r]];
}

int schedule_worker_of(const schedule *s, int stage, int microbatch)
{
    if (!s || stage < 0 || stage >= s->nstages || microbatch < 0) return -1;
    return s->stage_workers[s->stage_first[stage] + microbatch % s->replicas[stage]];
}

#define GIB (1024.0 * 1024 * 1024)

double schedule_bytes_estimate(const sched_spec *spec)
{
    if (!spec) return 0;
    double per_iter = 0; /* workers: one all-reduce and one step per stage and iteration */
    for (int st = 0; st < spec->nstages; st++)
        per_iter += 2.0 * (spec->replicas ? spec->replicas[st] : 1);
    double actions = 6.0 * spec->nstages * spec->microbatches * spec->iterations +
                     per_iter * spec->iterations;
    return actions * SCHED_BYTES_PER_ACTION;
}

double sched_memory_available(void)
{
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < have)
        have = (double)rl.rlim_cur;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < have)
        have = (double)rl.rlim_cur;
    return have > 0 ? have : 1e18;
}

/* Stages a and b (a < b, one stage per worker) that share a worker, the smallest a and
 * then the smallest b: from each worker's first two stages (user[3w], user[3w + 1]).
 * Returns the shared worker (the first of a's replicas that b also holds), or -1 when no
 * two stages share one. Linear in the replicas. */
static int shared_worker(const schedule *s, const int *user, int nw, int *a, int *b)
{
    *a = *b = -1;
    for (int w = 0; w < nw; w++)
        if (user[3 * w + 1] >= 0 &&
            (*a < 0 || user[3 * w] < *a || (user[3 * w] == *a && user[3 * w + 1] < *b)))
            *a = user[3 * w], *b = user[3 * w + 1];
    if (*a < 0) return -1;
    for (int ja = 0; ja < s->replicas[*a]; ja++) {
        int w = s->stage_workers[s->stage_first[*a] + ja];
        for (int jb = 0; jb < s->replicas[*b]; jb++)
            if (s->stage_workers[s->stage_first[*b] + jb] == w) return w;
    }
    return -1;
}

/* Fills s->stage_workers from spec (or the default placement) and checks the placement
 * rules: one stage per worker, or a whole rank's chunks per worker. Sets s->nworkers.
 * 0, or -1 with err. */
static int sched_assign_workers(schedule *s, const sched_spec *spec, int chunked,
                                plumb_err *err)
{
    const char *kn = sched_kind_name(s->kind);
    int p = s->nstages / s->chunks, maxw = -1, rc = -1;
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++) {
            int i = s->stage_first[st] + j;
            int w = spec->workers ? spec->workers[i]
                                  : (chunked ? sched_kind_rank(s->kind, st, p) + p * j : i);
            if (w < 0 || w > 65535)
                return err_set(err, NULL, "workers", "stage %d replica %d: expected a worker "
                               "id from 0 to 65535 (got %d)", st, j, w);
            s->stage_workers[i] = w;
            if (w > maxw) maxw = w;
        }
    /* user[3w], user[3w + 1]: the first two stages on worker w; user[3w + 2]: the last
     * (-1: none) */
    int *user = malloc((size_t)(maxw + 1) * 3 * sizeof *user);
    if (!user) return err_set(err, NULL, NULL, "out of memory");
    for (int i = 0; i < 3 * (maxw + 1); i++) user[i] = -1;
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++) {
            int *u = &user[3 * s->stage_workers[s->stage_first[st] + j]];
            if (u[2] == st) {
                err_set(err, NULL, "workers", "stage %d has two replicas on worker %d", st,
                        s->stage_workers[s->stage_first[st] + j]);
                goto done;
            }
            if (u[0] < 0)
                u[0] = st;
            else if (u[1] < 0)
                u[1] = st;
            u[2] = st;
        }
    s->nworkers = spec->nworkers > 0 ? spec->nworkers : maxw + 1;
    if (maxw >= s->nworkers) {
        err_set(err, NULL, "workers", "worker %d is out of range for %d workers", maxw,
                s->nworkers);
        goto done;
    }
    if (!chunked) {
        int a, b, w = shared_worker(s, user, maxw + 1, &a, &b);
        if (w >= 0) {
            err_set(err, NULL, "workers", "%s: stages %d and %d both on worker %d", kn, a, b, w);
            goto done;
        }
        rc = 0;
        goto done;
    }
    /* chunked kinds: replica j of every chunk of rank q on one worker, and each worker one
     * (rank, replica): a map each way, linear in the placements */
    int r = s->replicas[0];
    int *of = malloc((size_t)p * r * sizeof *of), *who = malloc((size_t)(maxw + 1) * sizeof *who);
    if (!of || !who) {
        free(of), free(who);
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (int i = 0; i < p * r; i++) of[i] = -1;
    for (int i = 0; i <= maxw; i++) who[i] = -1;
    int bad = 0;
    for (int st = 0; st < s->nstages && !bad; st++)
        for (int j = 0; j < r && !bad; j++) {
            int q = sched_kind_rank(s->kind, st, p), key = q * r + j;
            int w = s->stage_workers[s->stage_first[st] + j];
            if (of[key] >= 0 && of[key] != w)
                bad = err_set(err, NULL, "workers", "%s: stage %d is a chunk of rank %d, whose "
                              "replica %d is on worker %d (got %d)", kn, st, q, j, of[key], w);
            else if (who[w] >= 0 && who[w] != key)
                bad = err_set(err, NULL, "workers", "%s: stage %d replica %d on worker %d, which "
                              "holds rank %d replica %d", kn, st, j, w, who[w] / r, who[w] % r);
            of[key] = w;
            who[w] = key;
        }
    if (!bad) rc = 0;
    free(of), free(who);
done:
    free(user);
    return rc;
}

schedule *sched_alloc(const sched_spec *spec, plumb_err *err)
{
    if (!spec) return err_set(err, NULL, "spec", "missing"), NULL;
    if ((int)spec->kind < 0 || spec->kind >= SCHED_NKINDS)
        return err_set(err, NULL, "kind", "expected a schedule kind (got %d)", (int)spec->kind),
               NULL;
    const char *kn = sched_kind_name(spec->kind);
    if (spec->nstages < 1 || spec->nstages > ACT_STAGE_MAX + 1)
        return err_set(err, NULL, "stages", "expected 1 to %d (got %d)", ACT_STAGE_MAX + 1,
                       spec->nstages), NULL;
    if (spec->microbatches < 1)
        return err_set(err, NULL, "microbatches", "expected an integer >= 1 (got %d)",
                       spec->microbatches),
               NULL;
    if (spec->iterations < 1)
        return err_set(err, NULL, "iterations", "expected an integer >= 1 (got %d)",
                       spec->iterations),
               NULL;
    /* a global microbatch index is an int */
    if ((long long)spec->microbatches * spec->iterations > SCHED_MAX_TOTAL_MB)
        return err_set(err, NULL, "microbatches", "microbatches x iterations above %d (got %d "
                       "x %d)", SCHED_MAX_TOTAL_MB, spec->microbatches, spec->iterations),
               NULL;
    double need = schedule_bytes_estimate(spec), have = sched_memory_available();
    if (need > have)
        return err_set(err, NULL, "microbatches", "stages x microbatches x iterations = %d x %d "
                       "x %d needs about %.1f GiB to simulate (about %.0f actions at %d "
                       "bytes each), above the %.1f GiB this process may use",
                       spec->nstages, spec->microbatches, spec->iterations, need / GIB,
                       need / SCHED_BYTES_PER_ACTION, SCHED_BYTES_PER_ACTION, have / GIB),
               NULL;
    int chunked = sched_kind_chunked(spec->kind);
    if (spec->chunks < 1 || spec->chunks > 64)
        return err_set(err, NULL, "chunks", "expected 1 to 64 (got %d)", spec->chunks), NULL;
    if (!chunked && spec->chunks != 1)
        return err_set(err, NULL, "chunks", "%s runs one stage per rank: expected 1 (got %d)",
                       kn, spec->chunks),
               NULL;
    const sched_traits *tr = sched_traits_of(spec->kind);
    if (tr->chunks_min == tr->chunks_max && spec->chunks != tr->chunks_min)
        return err_set(err, NULL, "chunks", "%s needs exactly %d chunk%s per rank (got %d)",
                       kn, tr->chunks_min, tr->chunks_min == 1 ? "" : "s", spec->chunks),
               NULL;
    if (spec->nstages % spec->chunks)
        return err_set(err, NULL, "stages", "%s: %d virtual stages do not split into %d chunks "
                       "per rank", kn, spec->nstages, spec->chunks),
               NULL;

    schedule *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, NULL, NULL, "out of memory"), NULL;
    s->kind = spec->kind;
    s->nstages = spec->nstages;
    s->chunks = spec->chunks;
    s->microbatches = spec->microbatches;
    s->iterations = spec->iterations;
    s->replicas = malloc((size_t)s->nstages * sizeof *s->replicas);
    s->stage_first = malloc((size_t)s->nstages * sizeof *s->stage_first);
    if (!s->replicas || !s->stage_first) goto oom;
    int total = 0;
    for (int st = 0; st < s->nstages; st++) {
        int r = spec->replicas ? spec->replicas[st] : 1;
        if (r < 1 || r > SCHED_MAX_REPLICAS) {
            err_set(err, NULL, "replicas", "stage %d: expected 1 to %d replicas (got %d)", st,
                    SCHED_MAX_REPLICAS, r);
            goto fail;
        }
        if (chunked && st > 0 && r != s->replicas[0]) {
            err_set(err, NULL, "replicas", "%s replicates whole pipelines: stage %d expected "
                    "the %d replicas of stage 0 (got %d)", kn, st, s->replicas[0], r);
            goto fail;
        }
        s->replicas[st] = r;
        s->stage_first[st] = total;
        total += r;
    }
    s->stage_workers = malloc((size_t)total * sizeof *s->stage_workers);
    if (!s->stage_workers) goto oom;
    if (sched_assign_workers(s, spec, chunked, err)) goto fail;
    s->len = calloc((size_t)s->nworkers, sizeof *s->len);
    s->acts = calloc((size_t)s->nworkers, sizeof *s->acts);
    s->worker_device = malloc((size_t)s->nworkers * sizeof *s->worker_device);
    if (!s->len || !s->acts || !s->worker_device) goto oom;
    for (int w = 0; w < s->nworkers; w++) s->worker_device[w] = w;
    s->worker_stage = malloc((size_t)s->nworkers * sizeof *s->worker_stage);
    if (!s->worker_stage) goto oom;
    for (int w = 0; w < s->nworkers; w++) s->worker_stage[w] = -1;
    for (int st = 0; st < s->nstages; st++)
        for (int j = 0; j < s->replicas[st]; j++) {
            int *ws = &s->worker_stage[s->stage_workers[s->stage_first[st] + j]];
            *ws = *ws == -1 ? st : -2;
        }
    return s;
oom:
    err_set(err, NULL, NULL, "out of memory");
fail:
    schedule_free(s);
    return NULL;
}

void schedule_free(schedule *s)
{
    if (!s) return;
    if (s->acts)
        for (int w = 0; w < s->nworkers; w++) free(s->acts[w]);
    free(s->acts);
    free(s->len);
    free(s->replicas);
    free(s->stage_workers);
    free(s->stage_first);
    free(s->worker_device);
    free(s->worker_stage);
    free(s->counts);
    free(s);
}

int sched_adopt(schedule *s, actvec *lists, plumb_err *err)
{
    (void)err;
    free(s->counts); /* counts of the lists replaced */
    s->counts = NULL;
    for (int w = 0; w < s->nworkers; w++) {
        free(s->acts[w]);
        s->acts[w] = lists[w].a;
        s->len[w] = lists[w].n;
        lists[w].a = NULL;
        lists[w].n = lists[w].cap = 0;
    }
    return 0;
}

char *action_format(const action *a, char *buf, size_t n)
{
    if (!buf || n == 0) return buf;
    if (!a || a->kind < 0 || a->kind >= ACT_NKINDS) {
        snprintf(buf, n, "?");
        return buf;
    }
    if (a->microbatch >= 0 && a->kind != ACT_ALLREDUCE && a->kind != ACT_STEP)
        snprintf(buf, n, "%d%s%d", a->stage, kind_names[a->kind], a->microbatch);
    else
        snprintf(buf, n, "%d%s", a->stage, kind_names[a->kind]);
    return buf;
}

long schedule_count(const schedule *s, act_kind k)
{
    long c = 0;
    for (int w = 0; s && w < s->nworkers; w++)
        for (int i = 0; i < s->len[w]; i++) c += s->acts[w][i].kind == (int)k;
    return c;
}

int schedule_equal(const schedule *a, const schedule *b)
{
    if (!a || !b) return a == b;
    if (a->kind != b->kind || a->nworkers != b->nworkers || a->nstages != b->nstages ||
        a->chunks != b->chunks || a->microbatches != b->microbatches ||
        a->iterations != b->iterations)
        return 0;
    for (int st = 0; st < a->nstages; st++)
        if (a->replicas[st] != b->replicas[st] || a->stage_first[st] != b->stage_first[st])
            return 0;
    int total = a->stage_first[a->nstages - 1] + a->replicas[a->nstages - 1];
    if (memcmp(a->stage_workers, b->stage_workers, (size_t)total * sizeof(int))) return 0;
    for (int w = 0; w < a->nworkers; w++) {
        if (a->len[w] != b->len[w] || a->worker_device[w] != b->worker_device[w]) return 0;
        for (int i = 0; i < a->len[w]; i++) {
            const action *x = &a->acts[w][i], *y = &b->acts[w][i];
            if (x->kind != y->kind || x->stage != y->stage || x->microbatch != y->microbatch ||
                x->version != y->version || x->peer != y->peer ||
                x->peer_stage != y->peer_stage)
                return 0;
        }
    }
    return 1;
}

/* Cell text for the listing: the action, with its weight version for the kinds whose
 * versions differ within an iteration. */
static void cell_text(const schedule *s, const action *a, char *buf, size_t n)
{
    char t[48];
    action_format(a, t, sizeof t);
    int show = sched_traits_of(s->kind)->versions != 1 &&
               (act_is_compute(a->kind) || a->kind == ACT_STEP) && a->version >= 0;
    if (show)
        snprintf(buf, n, "%s/v%d", t, a->version);
    else
        snprintf(buf, n, "%s", t);
}

void schedule_print(const schedule *s, FILE *out)
{
    if (!s || !out) return;
    int maxlen = 0;
    long nact = 0;
    for (int w = 0; w < s->nworkers; w++) {
        if (s->len[w] > maxlen) maxlen = s->len[w];
        nact += s->len[w];
    }
    fprintf(out, "%s: %d stage%s on %d worker%s (%d chunk%s per rank), %d microbatch%s x %d "
            "iteration%s, %ld actions\n",
            sched_kind_name(s->kind), s->nstages, s->nstages == 1 ? "" : "s", s->nworkers,
            s->nworkers == 1 ? "" : "s", s->chunks, s->chunks == 1 ? "" : "s",
            s->microbatches, s->microbatches == 1 ? "" : "es", s->iterations,
            s->iterations == 1 ? "" : "s", nact);
    int *width = calloc((size_t)s->nworkers, sizeof *width);
    if (!width) return;
    char cell[64], label[32];
    for (int w = 0; w < s->nworkers; w++) {
        width[w] = snprintf(label, sizeof label, "Rank %d", w);
        for (int i = 0; i < s->len[w]; i++) {
            cell_text(s, &s->acts[w][i], cell, sizeof cell);
            int l = (int)strlen(cell);
            if (l > width[w]) width[w] = l;
        }
    }
    int digits = snprintf(label, sizeof label, "%d", maxlen > 0 ? maxlen - 1 : 0);
    int lw = 5 + digits; /* "Step " + digits */
    size_t cap = (size_t)lw + 3;
    for (int w = 0; w < s->nworkers; w++) cap += (size_t)width[w] + 1;
    char *line = malloc(cap + 64);
    if (!line) {
        free(width);
        return;
    }
    for (int i = -1; i < maxlen; i++) {
        size_t off = i < 0 ? (size_t)snprintf(line, cap, "%*s", lw + 2, "")
                           : (size_t)snprintf(line, cap, "Step %0*d: ", digits, i);
        for (int w = 0; w < s->nworkers; w++) {
            if (i < 0)
                snprintf(cell, sizeof cell, "Rank %d", w);
            else if (i < s->len[w])
                cell_text(s, &s->acts[w][i], cell, sizeof cell);
            else
                cell[0] = '\0';
            off += (size_t)snprintf(line + off, cap + 64 - off, "%-*s ", width[w], cell);
        }
        while (off > 0 && line[off - 1] == ' ') off--;
        line[off] = '\0';
        fprintf(out, "%s\n", line);
    }
    free(line);
    free(width);
}

/* A microbatch's dense id in an insert-only open-addressing table of cap (a power of 2)
 * slots: keys[] (-1 = empty) and ids[]; a new microbatch gets id *n and *n grows. */
static int mb_id(int *keys, int *ids, unsigned cap, int *n, int mb)
{
    unsigned h = ((unsigned)mb * 2654435761u) & (cap - 1);
    while (keys[h] >= 0 && keys[h] != mb) h = (h + 1) & (cap - 1);
    if (keys[h] < 0) keys[h] = mb, ids[h] = (*n)++;
    return ids[h];
}

/* schedule_slots' scan of worker w's list; direct: number microbatches by their own number
 * (every one the scan meets must lie in [0, T)), else through a hash table. Each
 * microbatch's state is a byte: open, its backward done, its input gradient gone (a
 * microbatch closes when both are, and may open again). Returns the most open at once,
 * -1 out of memory, or -2 when direct meets a number outside [0, T). */
static int slots_scan(const action *list, int n, int stage, int T, int direct)
{
    int open = 0, best = 0, nid = 0;
    unsigned cap = 16;
    while (!direct && cap < 2u * (unsigned)n + 2) cap *= 2;
    size_t nat = direct ? (size_t)T + 1 : (size_t)n + 1;
    int *keys = direct ? NULL : malloc(cap * sizeof *keys);
    int *ids = direct ? NULL : malloc(cap * sizeof *ids);
    unsigned char *state = calloc(nat, 1);
    if ((!direct && (!keys || !ids)) || !state) {
        free(keys), free(ids), free(state);
        return -1;
    }
    if (!direct)
        for (unsigned h = 0; h < cap; h++) keys[h] = -1;
    for (int i = 0; i < n; i++) {
        const action *a = &list[i];
        int local_take = a->stage == stage - 1 && (a->kind == ACT_B || a->kind == ACT_I);
        if (a->stage != stage && !local_take) continue;
        int id = -1;
        if (a->microbatch >= 0) {
            if (direct) {
                if (a->microbatch >= T) {
                    best = -2;
                    break;
                }
                id = a->microbatch;
            } else {
                id = mb_id(keys, ids, cap, &nid, a->microbatch);
            }
        }
        if (id < 0) continue;
        unsigned char *m = &state[id];
        if (!(*m & SLOT_OPEN)) {
            if (!local_take && (a->kind == ACT_RECV_F || a->kind == ACT_F))
                sched_slot_open(m, stage, &open, &best);
            continue;
        }
        if (local_take || a->kind == ACT_SEND_B) sched_slot_mark(m, SLOT_DX, &open);
        else if (a->kind == ACT_B || a->kind == ACT_W) sched_slot_mark(m, SLOT_BWD, &open);
    }
    free(keys), free(ids), free(state);
    return best;
}

int schedule_slots(const schedule *s, int w, int stage)
{
    if (!s || w < 0 || w >= s->nworkers) return 1;
    int n = s->len[w];
    /* microbatches get dense ids: their own number where the numbers the scan meets lie
     * in [0, T) and T is at most a few times the list (direct, in order: what an IR built
     * here has; one scan, begun again hashed if a number falls outside), else from a hash
     * table (linear in the list, whatever the numbers); open ones are kept in a list with
     * each id's index in it */
    int T = sched_total_mb(s);
    int best = -2;
    if (T >= 0 && (long)T <= 4L * n + 64)
        best = slots_scan(s->acts[w], n, stage, T, 1);
    if (best == -2)
        best = slots_scan(s->acts[w], n, stage, T, 0);
    if (best < 0)
        return n > 0 ? n : 1; /* pessimistic */
    return best > 0 ? best : 1;
}

int schedule_slots_fresh(const schedule *s, int w, int stage)
{
    if (s && s->counts && stage >= 0 && stage < s->nstages && w >= 0 && w < s->nworkers &&
        s->stage_workers[s->stage_first[stage]] == w)
        return s->counts[2 * s->nstages + stage];
    return schedule_slots(s, w, stage);
}
