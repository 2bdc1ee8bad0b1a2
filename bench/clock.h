/* clock.h: the one clock reading the benchmarks share (header-only: each bench is its own
 * program). */
#ifndef PLUMB_BENCH_CLOCK_H
#define PLUMB_BENCH_CLOCK_H

#include <time.h>

/* Seconds on clock id: CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID for this
 * process's CPU time (all its threads). */
static inline double bench_clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
