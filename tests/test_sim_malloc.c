/* test_sim_malloc.c: sim_malloc_for_one_run, the allocator settings of a process that runs
 * one large simulation (`plumb sim`): the heap it leaves behind is not advised for
 * transparent huge pages, as the kernel reports it in /proc/self/smaps (docs/sim.md, "Huge
 * pages taken back"), and the run it serves gives the same report as without it. Criterion runs each test in a process of its own, so the
 * settings do not leak into other tests. */
#define _DEFAULT_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

/* smaps and the heap's advice can be checked: Linux, glibc's allocator (not ASan's) */
#if defined(__linux__) && defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define HEAP_CHECKABLE 1
#else
#define HEAP_CHECKABLE 0
#endif

#if HEAP_CHECKABLE
/* The VmFlags line of the mapping of /proc/self/smaps holding addr, copied into flags
 * (size n). Returns 0, or -1 when smaps cannot be read or has no such mapping. */
static int vmflags_of(const void *addr, char *flags, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, rc = -1;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = a >= lo && a < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            size_t len = strlen(line + 8);
            len = len < n ? len : n - 1;
            memcpy(flags, line + 8, len);
            flags[len] = 0;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

#endif

/* The heap sim_malloc_for_one_run leaves carries no `hg` flag (MADV_HUGEPAGE) in
 * /proc/self/smaps: a fresh process's huge pages cost more than they save where the host
 * takes free 2 MiB blocks back (fails with the advice of 1b6a1cb). */
Test(sim_malloc, heap_not_advised_for_huge_pages)
{
#if !defined(__linux__) || !defined(__GLIBC__)
    cr_skip_test("smaps is Linux's; the settings glibc's");
#elif defined(__SANITIZE_ADDRESS__)
    cr_skip_test("the address sanitizer's allocator has no heap to check");
#else
    char flags[256];
    sim_malloc_for_one_run();
    size_t n = (size_t)8 << 20; /* below the mmap threshold: from the heap */
    char *p = malloc(n);
    cr_assert_not_null(p);
    memset(p, 1, n);
    if (vmflags_of(p + n / 2, flags, sizeof flags))
        cr_skip_test("/proc/self/smaps not readable");
    cr_expect_null(strstr(flags, " hg"), "heap advised for huge pages: VmFlags:%s", flags);
    free(p);
#endif
}

/* A run after the settings reports what a run without them reports (the settings change
 * where memory comes from, nothing the simulator computes). */
Test(sim_malloc, same_report_after_settings)
{
    sim_synth sy;
    sim_synth_init(&sy);
    sy.nstages = 4;
    sy.microbatches = 8;
    plan *pl = synth_plan(&sy);
    sim_report *a = synth_run(pl, NULL);
    sim_malloc_for_one_run();
    sim_report *b = synth_run(pl, NULL);
    cr_expect_eq(a->iteration_s, b->iteration_s);
    cr_expect_eq(a->bubble_fraction, b->bubble_fraction);
    cr_expect_eq(a->makespan_s, b->makespan_s);
    cr_expect_eq(a->peak_memory_bytes, b->peak_memory_bytes);
    sim_report_free(a);
    sim_report_free(b);
    plan_free(pl);
}
