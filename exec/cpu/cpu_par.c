/* cpu_par.c: splitting a CPU kernel's independent work items over threads, run by one
 * persistent pool per process. The pool is the CPU backend's only source of threads:
 * OpenBLAS is kept at one thread (cpu_sgemm splits large GEMMs over the pool itself), so
 * no second pool spins against this one. The thread count is the user's
 * (OPENBLAS_NUM_THREADS, else every core) or a pipeline worker's share of it
 * (hint_workers). Each item's result does not depend on which thread runs it: results
 * are the same bits at any count.
 *
 * The pool: up to PAR_MAX - 1 helper threads, started on demand (the first call that
 * wants one more than there are), each sleeping on its own condition variable until a
 * caller hands it a range. A call claims the idle helpers it needs under the pool's lock,
 * runs its first range itself, runs the ranges it found no helper for, and waits for its
 * helpers only. Several callers (pipeline workers are threads of one process) share the
 * pool, each with the helpers it claimed; a call made from inside a range (nested) claims
 * only idle helpers as well. No call ever waits for a helper it did not claim, and a
 * claimed helper only runs its range, so no call can deadlock. The helpers are joined at
 * exit (atexit); a forked child starts with an empty pool. */
#include "exec/cpu/cpu.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define PAR_MAX 16

typedef struct par_helper {
    pthread_t th;
    pthread_cond_t wake; /* signalled when a range is handed over or the pool stops */
    int claimed;         /* a caller owns it (set by the caller, cleared by the helper) */
    int has_range;       /* the range below is to run */
    cpu_par_fn fn;
    void *arg;
    size_t lo, hi;
    int slot;
    int *pending; /* the caller's count of unfinished helpers */
} par_helper;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t done; /* broadcast when a helper finishes a range */
    par_helper h[PAR_MAX - 1];
    int started;  /* helpers h[0 .. started-1] run */
    int stopping; /* set at exit: no more claims, helpers leave */
    int atexit_set;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *helper_main(void *p)
{
    par_helper *h = p;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (!h->has_range && !pool.stopping) pthread_cond_wait(&h->wake, &pool.mu);
        if (!h->has_range) break; /* stopping, and nothing handed over */
        cpu_par_fn fn = h->fn;
        void *arg = h->arg;
        size_t lo = h->lo, hi = h->hi;
        int slot = h->slot;
        pthread_mutex_unlock(&pool.mu);
        fn(arg, lo, hi, slot);
        pthread_mutex_lock(&pool.mu);
        h->has_range = 0;
        h->claimed = 0;
        if (--*h->pending == 0) pthread_cond_broadcast(&pool.done);
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* At exit: every helper finishes what it runs, then leaves, and is joined. */
static void pool_stop(void)
{
    pthread_mutex_lock(&pool.mu);
    pool.stopping = 1;
    int n = pool.started;
    for (int i = 0; i < n; i++) pthread_cond_signal(&pool.h[i].wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < n; i++) {
        pthread_join(pool.h[i].th, NULL);
        pthread_cond_destroy(&pool.h[i].wake);
    }
    pthread_mutex_lock(&pool.mu);
    pool.started = 0;
    pthread_mutex_unlock(&pool.mu);
}

/* In a forked child only the forking thread exists: the pool starts empty again. */
static void pool_forked(void)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t done = PTHREAD_COND_INITIALIZER;
    pool.mu = mu;
    pool.done = done;
    pool.started = 0;
}

/* Starts one more helper (caller holds pool.mu); 0 when it could not. */
static int helper_start(void)
{
    if (pool.started >= PAR_MAX - 1 || pool.stopping) return 0;
    if (!pool.atexit_set) {
        if (atexit(pool_stop) != 0) return 0; /* helpers that could not be joined: none */
        pthread_atfork(NULL, NULL, pool_forked);
        pool.atexit_set = 1;
    }
    par_helper *h = &pool.h[pool.started];
    h->claimed = h->has_range = 0;
    if (pthread_cond_init(&h->wake, NULL) != 0) return 0;
    if (pthread_create(&h->th, NULL, helper_main, h) != 0) {
        pthread_cond_destroy(&h->wake);
        return 0;
    }
    pool.started++;
    return 1;
}

/* The threads cpu_par splits over (0: not set yet, then the budget). */
static atomic_int par_threads;

int cpu_par_budget(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (getenv("PLUMB_BLAS_DEFERRED")) return cores > PAR_MAX ? PAR_MAX : (int)cores;
    const char *names[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        long n = v ? strtol(v, NULL, 10) : 0;
        if (n >= 1) {
            if (n > cores) n = cores;
            return n > PAR_MAX ? PAR_MAX : (int)n;
        }
    }
    return cores > PAR_MAX ? PAR_MAX : (int)cores;
}

void cpu_par_set_threads(int n)
{
    openblas_set_num_threads(1); /* before the count is seen: no GEMM runs threaded */
    atomic_store(&par_threads, n < 1 ? 1 : n > PAR_MAX ? PAR_MAX : n);
}

int cpu_par_threads(void)
{
    int t = atomic_load(&par_threads);
    if (t < 1) { /* first use in this process: the user's budget */
        cpu_par_set_threads(cpu_par_budget());
        t = atomic_load(&par_threads);
    }
    return t;
}

int cpu_par_slots(size_t n)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int t = cpu_par_threads();
    size_t s = cores > t ? (size_t)cores : (size_t)t;
    if (s > PAR_MAX) s = PAR_MAX;
    if (s > n) s = n;
    return s < 1 ? 1 : (int)s;
}

int cpu_par_helpers(void)
{
    pthread_mutex_lock(&pool.mu);
    int n = pool.started;
    pthread_mutex_unlock(&pool.mu);
    return n;
}

void cpu_par(size_t n, size_t min_items, cpu_par_fn fn, void *arg)
{
    int t = cpu_par_threads();
    if (min_items < 1) min_items = 1;
    if ((size_t)t > n / min_items) t = (int)(n / min_items);
    if (t <= 1) {
        fn(arg, 0, n, 0);
        return;
    }
    /* range i is [n i / t, n (i+1) / t) as slot i, whoever runs it */
    int pending = 0, next = 1;
    pthread_mutex_lock(&pool.mu);
    for (int i = 0; next < t && !pool.stopping; i++) {
        if (i == pool.started && !helper_start()) break;
        par_helper *h = &pool.h[i];
        if (h->claimed) continue;
        h->claimed = h->has_range = 1;
        h->fn = fn;
        h->arg = arg;
        h->lo = n * (size_t)next / (size_t)t;
        h->hi = n * (size_t)(next + 1) / (size_t)t;
        h->slot = next++;
        h->pending = &pending;
        pending++;
        pthread_cond_signal(&h->wake);
    }
    pthread_mutex_unlock(&pool.mu);
    fn(arg, 0, n / (size_t)t, 0);
    for (int i = next; i < t; i++) /* no helper free for these: the caller runs them */
        fn(arg, n * (size_t)i / (size_t)t, n * (size_t)(i + 1) / (size_t)t, i);
    if (pending) {
        pthread_mutex_lock(&pool.mu);
        while (pending) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
}
