/* split.h: the dashboard's own fallback partitioner: contiguous layer ranges balanced by
 * compute time, the same replica count for every stage. It is used to re-plan after a
 * what-if (a new GPU count, a schedule with virtual stages) when no planner is linked in
 * (see ui/eval.c, ui_replan); it is simple on purpose and makes no claim to be optimal. */
#ifndef PLUMB_UI_SPLIT_H
#define PLUMB_UI_SPLIT_H

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/profile.h"

/* Splits prof's layers into `nstages` contiguous ranges minimising the largest range's
 * forward + backward time (each range at least one layer). Writes first[s] and last[s]
 * (inclusive). Returns 0, or -1 when nstages < 1 or nstages > nlayers. */
int ui_split_ranges(const profile *prof, int nstages, int *first, int *last);

/* A plan of prof on clus for schedule `kind`:
 *  - one-stage-per-device schedules: depth = the largest divisor of the device count that
 *    is at most the layer count, every stage replicated devices/depth times on consecutive
 *    devices (replicas share a server when they can);
 *  - interleaved and zb-v: 2 chunks per rank, ranks = min(devices, layers / 2), no
 *    replicas, stage s on the rank the schedule's default placement gives it.
 * Microbatching and recomputation are the caller's to set. Returns a new plan (plan_free)
 * or NULL with err set (too few layers for the schedule, out of memory). */
plan *ui_split_plan(const profile *prof, const cluster *clus, sched_kind kind, plumb_err *err);

#endif
