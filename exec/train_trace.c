/* train_trace.c: the measured trace of a run spread over processes (mpirun, one process
 * per transport endpoint): each process timed its own workers; their events are summed
 * into one buffer over the transport and every process rebuilds the whole trace (see
 * train.h, train_trace_gather). */
#include <stdlib.h>
#include <string.h>

#include "core/timeline.h"
#include "exec/train.h"

/* Numbers per event in the exchanged buffer: its track's kind, device, peer and peak
 * memory, then the event's start, duration, bytes, kind, stage, peer stage, microbatch and
 * iteration, and its track's tensor-parallel rank. */
#define TRACE_FIELDS 13

static void pack(const timeline *tl, const tl_event *e, double *o)
{
    const tl_track *t = &tl->tracks[e->track];
    double v[TRACE_FIELDS] = {t->kind, t->device, t->peer, t->peak_bytes, e->start_s,
                              e->dur_s, e->bytes, e->kind, e->stage, e->peer_stage,
                              e->microbatch, e->iteration, t->tp_rank};
    memcpy(o, v, sizeof v);
}

/* Adds the event packed at v to tl (its track made when new, with its peak memory).
 * 0, or -1 out of memory. */
static int unpack(timeline *tl, const double *v)
{
    int track = timeline_track_tp(tl, (int)v[0], (int)v[1], (int)v[2], (int)v[12], NULL);
    if (track < 0) return -1;
    if (v[3] >= 0) tl->tracks[track].peak_bytes = v[3];
    tl_event e = {v[4], v[5], v[6], track, (int)v[7], (int)v[8], (int)v[9], (int)v[10],
                  (int)v[11]};
    return timeline_add(tl, &e);
}

int train_trace_gather(transport *tr, int rank, int nprocs, timeline **tl, plumb_err *err)
{
    const timeline *mine = *tl;
    double *counts = calloc((size_t)nprocs, sizeof *counts), *buf = NULL;
    timeline *all = NULL;
    int rc = -1;
    if (!counts || rank < 0 || rank >= nprocs) {
        err_set(err, NULL, NULL, counts ? "trace: rank %d of %d" : "out of memory", rank,
                nprocs);
        goto done;
    }
    counts[rank] = mine ? (double)mine->n : 0;
    if (tr->allsum_double(tr, counts, (size_t)nprocs, err)) goto done;
    size_t total = 0, off = 0;
    for (int p = 0; p < nprocs; p++) {
        if (p == rank) off = total;
        total += (size_t)counts[p];
    }
    if (!(buf = calloc(total * TRACE_FIELDS + 1, sizeof *buf)) ||
        !(all = timeline_new("exec"))) {
        err_set(err, NULL, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; mine && i < mine->n; i++)
        pack(mine, &mine->ev[i], buf + (off + i) * TRACE_FIELDS);
    if (tr->allsum_double(tr, buf, total * TRACE_FIELDS, err)) goto done;
    for (size_t i = 0; i < total; i++)
        if (unpack(all, buf + i * TRACE_FIELDS)) {
            err_set(err, NULL, NULL, "out of memory");
            goto done;
        }
    timeline_sort(all);
    timeline_free(*tl);
    *tl = all;
    all = NULL;
    rc = 0;
done:
    timeline_free(all);
    free(buf);
    free(counts);
    return rc;
}
