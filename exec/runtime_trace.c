/* runtime_trace.c: the pipeline runtime's measured trace: the records its workers keep of
 * what they ran, laid out as timeline tracks and events (one set of tracks per device and
 * tensor-parallel rank), and the tracks' names under tensor parallelism; and the message
 * tags of a run (the runtime's, or a transport's for a collective) read back as what they
 * carry. */
#include "exec/runtime_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "exec/runtime.h"
#include "exec/transport.h"

int rt_recs_add(rt_recs *recs, rt_rec r)
{
    rt_rec *ne = array_room(recs->ev, recs->n, &recs->cap, 256, sizeof *ne);
    if (!ne) return -1;
    recs->ev = ne;
    recs->ev[recs->n++] = r;
    return 0;
}

void rt_recs_free(rt_recs *recs)
{
    free(recs->ev);
    memset(recs, 0, sizeof *recs);
}

static int tl_kind_of(int k)
{
    switch (k) {
    case ACT_F: return TL_F;
    case ACT_B: return TL_B;
    case ACT_I: return TL_I;
    case ACT_W: return TL_W;
    case ACT_STEP: return TL_STEP;
    case ACT_SEND_F: return TL_SEND_F;
    case ACT_SEND_B: return TL_SEND_B;
    case RT_REC_TP_AR: return TL_TP_ALLREDUCE;
    case RT_REC_TP_RS: return TL_TP_REDUCE_SCATTER;
    case RT_REC_TP_AG: return TL_TP_ALL_GATHER;
    default: return TL_ALLREDUCE;
    }
}

/* The track kind of a record of kind k. */
static int track_kind_of(int k)
{
    switch (k) {
    case ACT_F: case ACT_B: case ACT_I: case ACT_W: case ACT_STEP: return TL_TRACK_DEVICE;
    case ACT_SEND_F: case ACT_SEND_B: return TL_TRACK_LINK;
    default: return TL_TRACK_COLLECTIVE; /* the replicas' all-reduce, tp collectives */
    }
}

int runtime_trace_add(timeline *tl, const rt_recs *recs, int device, const int *trace_device,
                      int tp_rank, double peak)
{
    int counted = 0;
    for (int k = 0; k < recs->n; k++) {
        const rt_rec *r = &recs->ev[k];
        int tk = track_kind_of(r->kind), peer = -1;
        if (tk == TL_TRACK_LINK) peer = trace_device ? trace_device[r->peer] : r->peer;
        int track = timeline_track_tp(tl, tk, device, peer, tp_rank, NULL);
        if (track < 0) return -1;
        if (!counted && tk == TL_TRACK_DEVICE && peak >= 0) {
            /* workers that share a device add up on it */
            tl_track *t = &tl->tracks[track];
            t->peak_bytes = (t->peak_bytes > 0 ? t->peak_bytes : 0) + peak;
            counted = 1;
        }
        tl_event e = {r->t0, r->t1 - r->t0, r->bytes, track, tl_kind_of(r->kind), r->stage,
                      -1, r->mb, r->it};
        if (tk == TL_TRACK_LINK) e.peer_stage = r->peer_stage;
        if (r->kind == ACT_STEP || r->kind == ACT_ALLREDUCE) e.microbatch = -1;
        if (timeline_add(tl, &e)) return -1;
    }
    return 0;
}

int runtime_trace_names(const schedule *s, const int *trace_device, int tp, timeline *tl)
{
    if (tp <= 1) return 0;
    for (int t = 0; t < tl->ntracks; t++) {
        tl_track *k = &tl->tracks[t];
        char name[256];
        int len = snprintf(name, sizeof name, "device %d", k->device);
        if (k->kind == TL_TRACK_LINK)
            len += snprintf(name + len, sizeof name - (size_t)len, "->%d", k->peer);
        for (int w = 0; w < s->nworkers && len < (int)sizeof name - 64; w++) {
            if ((trace_device ? trace_device[w] : w) != k->device) continue;
            len += snprintf(name + len, sizeof name - (size_t)len, ": worker %d tp rank %d", w,
                            k->tp_rank);
            for (int st = 0; st < s->nstages && len < (int)sizeof name - 32; st++)
                for (int j = 0; j < s->replicas[st]; j++)
                    if (s->stage_workers[s->stage_first[st] + j] == w)
                        len += snprintf(name + len, sizeof name - (size_t)len,
                                        " (stage %d, replica %d)", st, j);
        }
        if (k->kind == TL_TRACK_COLLECTIVE)
            snprintf(name + len, sizeof name - (size_t)len, " collectives");
        char *d = malloc(strlen(name) + 1);
        if (!d) return -1;
        strcpy(d, name);
        free(k->name);
        k->name = d;
    }
    return 0;
}

int runtime_tag_text(const schedule *s, long tag, char *buf, size_t n)
{
    long t;
    if (!transport_tag_coll(tag, &t)) {
        long r = tag / 2;
        return snprintf(buf, n, "the %s of microbatch %ld for stage %ld",
                        tag % 2 ? "output gradient" : "activations", r / s->nstages,
                        r % s->nstages);
    }
    if (t >= RT_TP_TAG_BASE)
        return snprintf(buf, n, "the tensor-parallel group's collective %ld",
                        t - RT_TP_TAG_BASE + 1);
    if (t >= RT_ZERO_TAG_BASE)
        return snprintf(buf, n, "the replicas' reduce-scatter or all-gather %ld of stage %ld "
                        "(zero 1)", (t - RT_ZERO_TAG_BASE) % RT_AR_TAG_STRIDE + 1,
                        (t - RT_ZERO_TAG_BASE) / RT_AR_TAG_STRIDE);
    return snprintf(buf, n, "the replicas' all-reduce %ld of stage %ld",
                    t % RT_AR_TAG_STRIDE + 1, t / RT_AR_TAG_STRIDE);
}
