/* runtime_trace.h: what the pipeline runtime's workers record as they run (each action's
 * and each tensor-parallel collective's span) and how those records become the measured
 * trace (core/timeline.h); the runtime's message tags. Internal to the executor (exec/runtime.c); the public names of
 * the same file, runtime_trace_names and runtime_tag_text, are in exec/runtime.h. */
#ifndef PLUMB_EXEC_RUNTIME_TRACE_H
#define PLUMB_EXEC_RUNTIME_TRACE_H

#include "core/schedule.h"
#include "core/timeline.h"

/* The runtime's message tags (exec/transport.h: >= 0), decoded by runtime_tag_text. A
 * pipeline message: (microbatch x stages + receiving stage) x 2 + 1 for an output
 * gradient, + 0 for activations. A collective: the replicas' all-reduce number `round` of
 * a stage, or a tensor-parallel group's collective number `round` (every rank of a group
 * makes the same calls in the same order), from RT_TP_TAG_BASE on. */
#define RT_AR_TAG_STRIDE 1000003L
#define RT_TP_TAG_BASE (1L << 40)
/* ZeRO-1's reduce-scatters and all-gathers among a stage's replicas (rt_cfg.zero): number
 * `round` of the stage from RT_ZERO_TAG_BASE + stage x RT_AR_TAG_STRIDE on */
#define RT_ZERO_TAG_BASE (1L << 36)

static inline long rt_msg_tag(const schedule *s, int mb, int recv_stage, int grad)
{
    return ((long)mb * s->nstages + recv_stage) * 2 + grad;
}

static inline long rt_ar_tag(int stage, long round)
{
    return (long)stage * RT_AR_TAG_STRIDE + round;
}

static inline long rt_zero_tag(int stage, long round)
{
    return RT_ZERO_TAG_BASE + rt_ar_tag(stage, round);
}

static inline long rt_tp_tag(long round)
{
    return RT_TP_TAG_BASE + round;
}

/* rt_rec.kind beyond the schedule's actions (ACT_*): a tensor-parallel collective inside
 * one (all-reduce, reduce-scatter, all-gather) */
enum { RT_REC_TP_AR = ACT_NKINDS, RT_REC_TP_RS, RT_REC_TP_AG };

/* One timed span of a worker: an action (kind ACT_*; not RECV_F / RECV_B, whose wait is
 * the next compute's) or a collective (RT_REC_TP_*), in seconds from the run's start. */
typedef struct rt_rec {
    int kind, stage, mb;       /* mb < 0: none */
    int peer, peer_stage;      /* sends: the receiving worker and stage; else -1 */
    int it;                    /* the iteration it belongs to */
    double t0, t1, bytes;
} rt_rec;

/* A worker's records, in the order they ran. Zero-initialised is empty. */
typedef struct rt_recs {
    rt_rec *ev;
    int n, cap;
} rt_recs;

/* Appends r to recs. Returns 0, or -1 out of memory (recs unchanged). */
int rt_recs_add(rt_recs *recs, rt_rec r);

/* Frees recs' records and empties it. */
void rt_recs_free(rt_recs *recs);

/* Adds recs, one transport endpoint's records, to tl on the tracks of device `device`
 * and tensor-parallel rank tp_rank: compute and steps on the device's track, sends on the
 * link track to the receiving worker's device (trace_device[peer], or peer when
 * trace_device is NULL), the replicas' all-reduces and the tp collectives on the
 * collective track. peak >= 0 is added to the device track's peak bytes (workers sharing
 * a device add up); < 0 is unknown and leaves it. Returns 0, or -1 out of memory (the
 * events added so far stay in tl). */
int runtime_trace_add(timeline *tl, const rt_recs *recs, int device, const int *trace_device,
                      int tp_rank, double peak);

#endif
