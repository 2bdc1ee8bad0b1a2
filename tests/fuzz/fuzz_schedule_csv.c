/* fuzz_schedule_csv.c: libFuzzer target for schedule_read_csv (PyTorch's CSV form of the
 * action IR). The first input byte picks the schedule spec (kind, stages, microbatches,
 * replicas); the rest is the CSV. A file that loads must validate or fail with a message,
 * never crash; one that validates must survive a write/read round trip unchanged.
 * Build: clang -fsanitize=fuzzer,address,undefined -I. -Icore core/err.c core/plan.c ... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"

static int write_tmp(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(d, 1, n, f);
    return fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const int reps[4] = {1, 2, 1, 1};
    int sel = data[0];
    sched_kind kind = (sched_kind)(sel % SCHED_NKINDS);
    int ranks = 1 + (sel >> 3) % 3, chunks = sched_kind_chunks(kind);
    int mb = 1 + (sel >> 5) % 4;
    int use_reps = chunks == 1 && (sel & 4) && ranks >= 2;
    sched_spec sp = {kind, 0, ranks * chunks, chunks, mb, 0, use_reps ? reps : NULL, NULL};
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-sched-%d.csv", (int)getpid());
    if (write_tmp(path, data + 1, size - 1)) return 0;
    plumb_err e = {{0}};
    schedule *s = schedule_read_csv(path, &sp, &e);
    if (!s) {
        if (!e.msg[0]) abort(); /* a failure must say why */
        return 0;
    }
    int act[16], ver[16];
    if (s->nstages <= 16) schedule_inflight(s, act, ver, &e);
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        schedule_print(s, null);
        fclose(null);
    }
    if (schedule_validate(s, &e) == 0) {
        FILE *f = fopen(path, "wb");
        if (f) {
            schedule_write_csv_flags(s, f, SCHED_CSV_STEPS);
            fclose(f);
            sp.iterations = s->iterations;
            schedule *b = schedule_read_csv(path, &sp, &e);
            if (!b || !schedule_equal(s, b)) abort(); /* round trip mismatch */
            schedule_free(b);
        }
    } else if (!e.msg[0]) {
        abort();
    }
    schedule_free(s);
    unlink(path);
    return 0;
}
