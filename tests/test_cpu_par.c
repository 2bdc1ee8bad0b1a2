/* test_cpu_par.c: the CPU backend's thread pool (cpu_par.c): every item runs once as its
 * range's slot at any thread count, the helpers persist across calls, concurrent callers
 * (pipeline workers are threads) and nested calls finish and stay exact, a forked child
 * gets a working pool, hint_workers honours the user's thread count, and training gives
 * the same bits at 1 and 2 threads (fmnist-cnn and gpt-mini). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cblas.h>

#include "exec/cpu/cpu.h"
#include "exec/data.h"
#include "exec/train.h"

#define ITEMS 1000

typedef struct count_arg {
    atomic_int runs[ITEMS];
    int slot_of[ITEMS];
    atomic_long slot1_tid; /* the thread that ran slot 1 last */
    int nested;            /* each range runs a nested cpu_par over its own items */
} count_arg;

typedef struct nest_arg {
    count_arg *outer;
    size_t base;
} nest_arg;

static void nest_part(void *p, size_t lo, size_t hi, int slot)
{
    nest_arg *n = p;
    (void)slot;
    for (size_t i = lo; i < hi; i++) atomic_fetch_add(&n->outer->runs[n->base + i], 1);
}

static void count_part(void *p, size_t lo, size_t hi, int slot)
{
    count_arg *a = p;
    if (slot == 1) atomic_store(&a->slot1_tid, (long)syscall(SYS_gettid));
    if (a->nested) {
        nest_arg n = {a, lo};
        cpu_par(hi - lo, 1, nest_part, &n);
    } else {
        for (size_t i = lo; i < hi; i++) atomic_fetch_add(&a->runs[i], 1);
    }
    for (size_t i = lo; i < hi; i++) a->slot_of[i] = slot;
}

/* Every item ran once, as the slot its range has at t threads. */
static void check_once(count_arg *a, size_t n, size_t min_items, int t)
{
    size_t cap = n / (min_items ? min_items : 1);
    size_t used = (size_t)t < cap ? (size_t)t : cap;
    if (used < 1) used = 1;
    for (size_t i = 0; i < n; i++) {
        size_t slot = 0; /* range s is [n s / used, n (s+1) / used) */
        while (n * (slot + 1) / used <= i) slot++;
        cr_assert_eq(atomic_load(&a->runs[i]), 1, "n %zu t %d: item %zu ran %d times", n, t, i,
                     atomic_load(&a->runs[i]));
        cr_assert_eq((size_t)a->slot_of[i], slot, "n %zu t %d: item %zu slot %d", n, t,
                     i, a->slot_of[i]);
    }
}

static count_arg *count_new(int nested)
{
    count_arg *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    a->nested = nested;
    return a;
}

Test(cpu_par, every_item_once_as_its_slot)
{
    for (int t = 1; t <= 8; t++) {
        cpu_par_set_threads(t);
        const size_t ns[] = {0, 1, 7, 64, ITEMS};
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (size_t min_items = 1; min_items <= 300; min_items *= 17) {
                count_arg *a = count_new(0);
                cpu_par(ns[k], min_items, count_part, a);
                check_once(a, ns[k], min_items, t);
                free(a);
            }
    }
}

/* The helpers are started once and reused: 200 calls at 2 threads run slot 1 on one
 * thread that is not the caller, and the pool has one helper (a thread per call, as
 * before the pool, gives a new thread id each time). */
Test(cpu_par, helpers_persist_across_calls)
{
    cpu_par_set_threads(2);
    long me = (long)syscall(SYS_gettid), first = 0;
    for (int r = 0; r < 200; r++) {
        count_arg *a = count_new(0);
        cpu_par(ITEMS, 1, count_part, a);
        check_once(a, ITEMS, 1, 2);
        long tid = atomic_load(&a->slot1_tid);
        cr_assert_neq(tid, me, "slot 1 ran on the caller");
        if (r == 0) first = tid;
        cr_assert_eq(tid, first, "call %d: slot 1 on thread %ld, first call on %ld", r, tid,
                     first);
        free(a);
    }
    cr_assert_eq(cpu_par_helpers(), 1);
}

/* Callers on several threads at once (as pipeline workers), each with nested calls from
 * inside its ranges, asking for more threads than the pool has helpers: every call
 * finishes with every item run once. */
static void *caller_main(void *p)
{
    int *ok = p;
    for (int r = 0; r < 100; r++) {
        count_arg *a = count_new(r % 2);
        cpu_par(ITEMS, 1, count_part, a);
        for (size_t i = 0; i < ITEMS; i++)
            if (atomic_load(&a->runs[i]) != 1) *ok = 0;
        free(a);
    }
    return NULL;
}

/* (Every timed test of this file has the same timeout: Criterion 2.4's runner, run with
 * --jobs 2 under LeakSanitizer, can leak 48 bytes when a file mixes timeouts.) */
Test(cpu_par, concurrent_and_nested_callers_finish_exact, .timeout = 120)
{
    enum { CALLERS = 6 };
    cpu_par_set_threads(8);
    pthread_t th[CALLERS];
    int ok[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        ok[i] = 1;
        cr_assert_eq(pthread_create(&th[i], NULL, caller_main, &ok[i]), 0);
    }
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(th[i], NULL);
        cr_assert(ok[i], "caller %d: an item did not run exactly once", i);
    }
    cr_assert_leq(cpu_par_helpers(), 15);
}

/* A child forked after the pool started has none of its threads: its calls must still
 * finish (an alarm kills a child that waits for a helper that does not exist). */
Test(cpu_par, forked_child_gets_a_working_pool, .timeout = 120)
{
    cpu_par_set_threads(2);
    count_arg *a = count_new(0);
    cpu_par(ITEMS, 1, count_part, a);
    free(a);
    cr_assert_geq(cpu_par_helpers(), 1);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        count_arg *b = calloc(1, sizeof *b);
        if (!b) _exit(3);
        cpu_par(ITEMS, 1, count_part, b);
        for (size_t i = 0; i < ITEMS; i++)
            if (atomic_load(&b->runs[i]) != 1) _exit(4);
        _exit(cpu_par_helpers() == 1 ? 0 : 5);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "the child did not exit (signal %d)",
              WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    cr_assert_eq(WEXITSTATUS(st), 0);
}

/* hint_workers splits the user's thread count (OPENBLAS_NUM_THREADS), not every core; the
 * count plumb set itself to defer OpenBLAS's pool (PLUMB_BLAS_DEFERRED) means every core. */
Test(cpu_par, hint_workers_honours_the_user_count)
{
    const backend *bk = backend_cpu();
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 16) cores = 16;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    unsetenv("PLUMB_BLAS_DEFERRED");
    bk->hint_workers(1);
    cr_assert_eq(cpu_par_threads(), 1);
    setenv("PLUMB_BLAS_DEFERRED", "1", 1);
    bk->hint_workers(1);
    cr_assert_eq(cpu_par_threads(), cores);
    cr_assert_eq(openblas_get_num_threads(), 1, "OpenBLAS runs single-threaded under the pool");
    unsetenv("PLUMB_BLAS_DEFERRED");
    if (cores >= 2) {
        setenv("OPENBLAS_NUM_THREADS", "2", 1);
        bk->hint_workers(1);
        cr_assert_eq(cpu_par_threads(), 2);
        bk->hint_workers(2); /* two pipeline workers: one thread each */
        cr_assert_eq(cpu_par_threads(), 1);
    }
    unsetenv("OPENBLAS_NUM_THREADS");
}

/* Trains steps minibatches of mb samples of the shipped model at `threads` threads;
 * returns the weights and the losses (caller frees both). */
static float *train_at(const char *path, int threads, int mb, int steps, double *loss)
{
    plumb_err e = {{0}};
    model *m = model_load(path, &e);
    cr_assert(m, "%s", e.msg);
    dataset *d = data_synthetic(m, mb * steps, 3, &e);
    cr_assert(d, "%s", e.msg);
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    cpu_par_set_threads(threads);
    cr_assert_eq(cpu_par_threads(), threads);
    train_cfg cfg = {mb, 1, train_default_opt(BK_SGD)};
    seq_trainer *t = seqtrain_create(bk, c, m, &cfg, &e);
    cr_assert(t, "%s", e.msg);
    for (int s = 0; s < steps; s++) {
        size_t off = (size_t)s * mb;
        cr_assert_eq(seqtrain_step(t, d->x + off * d->sample_numel,
                                   d->y + off * d->targets_per_sample, &loss[s], NULL, &e),
                     0, "%s", e.msg);
    }
    float *w = malloc((size_t)m->nparams * sizeof *w);
    cr_assert_not_null(w);
    cr_assert_eq(seqtrain_get_params(t, w, &e), 0);
    seqtrain_free(t);
    bk->destroy(c);
    data_free(d);
    model_free(m);
    return w;
}

/* The thread count never changes a result: the same losses and weights, bit for bit, at
 * 1 and 2 threads, on shapes where ReLU, max pooling, GELU, layer normalization and the
 * attention all split (fmnist-cnn at 16 samples: 401 K floats through the first ReLU;
 * gpt-mini at 4: 256 rows, 16 (sample, head) pairs). */
Test(cpu_par, training_same_bits_at_1_and_2_threads, .timeout = 120)
{
    const struct {
        const char *path;
        int mb;
    } runs[] = {{"examples/models/fmnist-cnn.json", 16}, {"examples/models/gpt-mini.json", 4}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        double l1[3], l2[3];
        float *w1 = train_at(runs[r].path, 1, runs[r].mb, 3, l1);
        float *w2 = train_at(runs[r].path, 2, runs[r].mb, 3, l2);
        cr_assert_eq(memcmp(l1, l2, sizeof l1), 0, "%s: losses %.17g %.17g %.17g vs %.17g "
                     "%.17g %.17g", runs[r].path, l1[0], l1[1], l1[2], l2[0], l2[1], l2[2]);
        plumb_err e = {{0}};
        model *m = model_load(runs[r].path, &e);
        cr_assert_eq(memcmp(w1, w2, (size_t)m->nparams * sizeof *w1), 0, "%s: weights differ",
                     runs[r].path);
        model_free(m);
        free(w1);
        free(w2);
    }
}

/* cpu_sgemm splits a large GEMM over the pool (by rows when M > N, else by columns): the
 * same bits at 1 to 4 threads for every transposition, alpha and beta not 1, padded
 * leading dimensions and K over several of OpenBLAS's K blocks; and it did split (the
 * pool started a helper). */
Test(cpu_par, gemm_split_same_bits_at_any_thread_count, .timeout = 120)
{
    const struct {
        int M, N, K;
    } shapes[] = {{300, 260, 700}, {2000, 64, 200}, {64, 3136, 128}};
    plumb_err e = {{0}};
    const backend *bk = backend_cpu();
    bk_ctx *c = bk->create(0, &e);
    cr_assert_not_null(c);
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[k].M, N = shapes[k].N, K = shapes[k].K;
                const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 7;
                size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
                size_t nc = (size_t)M * ldc;
                float *A = malloc(na * 4), *B = malloc(nb * 4), *C0 = malloc(nc * 4),
                      *C = malloc(nc * 4), *C1 = malloc(nc * 4);
                uint32_t s = 99 + (uint32_t)k;
                for (size_t i = 0; i < na; i++) A[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
                for (size_t i = 0; i < nb; i++) B[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
                for (size_t i = 0; i < nc; i++) C0[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f;
                for (int th = 1; th <= 4; th++) {
                    cpu_par_set_threads(th);
                    memcpy(C, C0, nc * 4);
                    cpu_sgemm(c, ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C, ldc);
                    if (th == 1) memcpy(C1, C, nc * 4);
                    else
                        cr_assert_eq(memcmp(C, C1, nc * 4), 0, "%dx%dx%d ta %d tb %d: %d threads",
                                     M, N, K, ta, tb, th);
                }
                free(A), free(B), free(C0), free(C), free(C1);
            }
    cr_assert_geq(cpu_par_helpers(), 1, "no GEMM was split");
    bk->destroy(c);
}
