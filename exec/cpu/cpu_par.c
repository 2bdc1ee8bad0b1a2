/* cpu_par.c: splitting a CPU kernel's independent work items over threads. The thread
 * count follows OpenBLAS's (OPENBLAS_NUM_THREADS, or the pipeline's share per worker from
 * hint_workers), so a kernel and the GEMMs around it use the same cores. Each item's
 * result does not depend on which thread runs it: results are the same bits at any count. */
#include "exec/cpu/cpu.h"

#include <cblas.h>
#include <pthread.h>
#include <unistd.h>

#define PAR_MAX 16

typedef struct par_job {
    cpu_par_fn fn;
    void *arg;
    size_t lo, hi;
    int slot;
} par_job;

static void *par_run(void *p)
{
    par_job *j = p;
    j->fn(j->arg, j->lo, j->hi, j->slot);
    return NULL;
}

int cpu_par_threads(void)
{
    int t = openblas_get_num_threads();
    return t < 1 ? 1 : t > PAR_MAX ? PAR_MAX : t;
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

void cpu_par(size_t n, size_t min_items, cpu_par_fn fn, void *arg)
{
    int t = cpu_par_threads();
    if (min_items < 1) min_items = 1;
    if ((size_t)t > n / min_items) t = (int)(n / min_items);
    if (t <= 1) {
        fn(arg, 0, n, 0);
        return;
    }
    par_job job[PAR_MAX];
    pthread_t th[PAR_MAX];
    int started[PAR_MAX] = {0};
    for (int i = 0; i < t; i++)
        job[i] = (par_job){fn, arg, n * (size_t)i / (size_t)t, n * (size_t)(i + 1) / (size_t)t, i};
    for (int i = 1; i < t; i++) started[i] = pthread_create(&th[i], NULL, par_run, &job[i]) == 0;
    fn(arg, job[0].lo, job[0].hi, 0);
    for (int i = 1; i < t; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fn(arg, job[i].lo, job[i].hi, i); /* no thread: the caller runs the range */
    }
}
