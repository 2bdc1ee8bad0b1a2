/* markbk.h: the CPU backend with the hand-off entries (mark_new ... copy_peer) added, so
 * that the local transport's device path (exec/transport_local.c) runs and is checked
 * without a GPU. Each context counts as a device of its own: recording a mark from a
 * context other than the one that made it (CUDA refuses an event recorded on another
 * device's stream), or waiting on a mark before any record of it (a hand-shake out of
 * order), counts as a violation. Buffers and marks are counted, so a test can check that
 * nothing was left behind. Include in one test file; call markbk() from one thread. */
#ifndef PLUMB_TESTS_MARKBK_H
#define PLUMB_TESTS_MARKBK_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h"

struct bk_mark {
    const bk_ctx *maker;
    atomic_long records;
};

static atomic_long markbk_violations, markbk_marks_live, markbk_bufs_live, markbk_peer_copies,
    markbk_allocs;

static bk_mark *markbk_mark_new(bk_ctx *c, plumb_err *err)
{
    bk_mark *m = calloc(1, sizeof *m);
    if (!m) {
        err_set(err, NULL, NULL, "out of memory");
        return NULL;
    }
    m->maker = c;
    markbk_marks_live++;
    return m;
}

static void markbk_mark_free(bk_mark *m)
{
    if (!m) return;
    markbk_marks_live--;
    free(m);
}

static void markbk_mark_record(bk_ctx *c, bk_mark *m)
{
    if (m->maker != c) markbk_violations++;
    m->records++;
}

static void markbk_mark_wait(bk_ctx *c, bk_mark *m)
{
    (void)c;
    if (!m->records) markbk_violations++;
}

static void markbk_copy_peer(bk_ctx *to, void *dst, const bk_ctx *from, const void *src,
                             size_t bytes)
{
    (void)to;
    (void)from;
    markbk_peer_copies++;
    if (bytes) memcpy(dst, src, bytes);
}

static void *markbk_alloc(bk_ctx *c, size_t bytes, plumb_err *err)
{
    void *p = backend_cpu()->alloc(c, bytes, err);
    if (p) {
        markbk_bufs_live++;
        markbk_allocs++;
    }
    return p;
}

static void markbk_free(bk_ctx *c, void *p)
{
    if (p) markbk_bufs_live--;
    backend_cpu()->free(c, p);
}

/* The CPU backend with counted buffers and the hand-off entries. */
static const backend *markbk(void)
{
    static backend b;
    b = *backend_cpu();
    b.name = "cpu-marks";
    b.alloc = markbk_alloc;
    b.free = markbk_free;
    b.mark_new = markbk_mark_new;
    b.mark_free = markbk_mark_free;
    b.mark_record = markbk_mark_record;
    b.mark_wait = markbk_mark_wait;
    b.copy_peer = markbk_copy_peer;
    return &b;
}

/* The CPU backend with counted buffers: what the runtime, the stages and the transport's
 * staging (set aside before the run) allocate. */
static inline const backend *countbk(void)
{
    static backend b;
    b = *backend_cpu();
    b.name = "cpu-counted";
    b.alloc = markbk_alloc;
    b.free = markbk_free;
    return &b;
}

/* The CPU backend without the hand-off entries: the local transport then moves messages
 * as host copies (download, upload), the path of a backend that has no device queues. */
static inline const backend *hostbk(void)
{
    static backend b;
    b = *backend_cpu();
    b.name = "cpu-host-copies";
    b.mark_new = NULL;
    b.mark_free = NULL;
    b.mark_record = NULL;
    b.mark_wait = NULL;
    b.copy_peer = NULL;
    return &b;
}

#endif
