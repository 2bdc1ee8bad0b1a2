/* schedule_traits.c: the trait table of the schedule kinds (schedule_traits.h), one row per
 * kind in sched_kind order, and the lookups every part uses instead of comparing kinds. */
#include "schedule_traits.h"

#include <stdio.h>
#include <string.h>

static const sched_traits TRAITS[SCHED_NKINDS] = {
    [SCHED_GPIPE] = {
        .kind = SCHED_GPIPE, .name = "gpipe",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 1, .chunks_max = 1, .chunks_default = 1,
        .place = SCHED_PLACE_STAGE, .hold = SCHED_HOLD_ALL, .versions = 1,
        .partition_twin = SCHED_GPIPE, .stage_twin = SCHED_1F1B_FLUSH},
    [SCHED_1F1B_FLUSH] = {
        .kind = SCHED_1F1B_FLUSH, .name = "1f1b-flush",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 1, .chunks_max = 1, .chunks_default = 1,
        .place = SCHED_PLACE_STAGE, .hold = SCHED_HOLD_1F1B, .versions = 1,
        .partition_twin = SCHED_1F1B_FLUSH, .stage_twin = SCHED_1F1B_FLUSH},
    [SCHED_PIPEDREAM] = {
        .kind = SCHED_PIPEDREAM, .name = "pipedream",
        .semantics = "asynchronous: weight stashing, each microbatch updates stale weights",
        .chunks_min = 1, .chunks_max = 1, .chunks_default = 1,
        .place = SCHED_PLACE_STAGE, .hold = SCHED_HOLD_1F1B, .async = 1, .versions = 0,
        .step_each_round = 1, .mb_per_replica = 1,
        .partition_twin = SCHED_PIPEDREAM, .stage_twin = SCHED_PIPEDREAM},
    [SCHED_2BW] = {
        .kind = SCHED_2BW, .name = "2bw",
        .semantics = "asynchronous: 2 weight versions, gradients applied one step late",
        .chunks_min = 1, .chunks_max = 1, .chunks_default = 1,
        .place = SCHED_PLACE_STAGE, .hold = SCHED_HOLD_1F1B, .async = 1, .versions = 2,
        .mb_per_replica = 1, .mb_cover_inflight = 1,
        .partition_twin = SCHED_PIPEDREAM, .stage_twin = SCHED_PIPEDREAM},
    [SCHED_INTERLEAVED] = {
        .kind = SCHED_INTERLEAVED, .name = "interleaved",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 1, .chunks_max = 64, .chunks_default = 2,
        .place = SCHED_PLACE_LOOP, .hold = SCHED_HOLD_CHUNKED, .versions = 1,
        .partition_twin = SCHED_INTERLEAVED, .stage_twin = SCHED_INTERLEAVED},
    [SCHED_ZB_H1] = {
        .kind = SCHED_ZB_H1, .name = "zb-h1",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 1, .chunks_max = 1, .chunks_default = 1,
        .place = SCHED_PLACE_STAGE, .hold = SCHED_HOLD_ZB, .versions = 1,
        .split_backward = 1,
        .partition_twin = SCHED_1F1B_FLUSH, .stage_twin = SCHED_ZB_H1},
    [SCHED_ZB_V] = {
        .kind = SCHED_ZB_V, .name = "zb-v",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 2, .chunks_max = 2, .chunks_default = 2,
        .place = SCHED_PLACE_V, .hold = SCHED_HOLD_CHUNKED, .versions = 1,
        .split_backward = 1,
        .partition_twin = SCHED_ZB_V, .stage_twin = SCHED_ZB_V},
    [SCHED_DUALPIPEV] = {
        .kind = SCHED_DUALPIPEV, .name = "dualpipev",
        .semantics = "synchronous: the same updates as data parallelism",
        .chunks_min = 2, .chunks_max = 2, .chunks_default = 2,
        .place = SCHED_PLACE_V, .hold = SCHED_HOLD_CHUNKED, .versions = 1,
        .split_backward = 1,
        .partition_twin = SCHED_DUALPIPEV, .stage_twin = SCHED_DUALPIPEV},
};

const sched_traits *sched_traits_of(sched_kind k)
{
    return (int)k >= 0 && k < SCHED_NKINDS ? &TRAITS[k] : NULL;
}

const sched_traits *sched_traits_find(const char *name)
{
    for (int k = 0; name && k < SCHED_NKINDS; k++)
        if (strcmp(name, TRAITS[k].name) == 0) return &TRAITS[k];
    return NULL;
}

int sched_kind_chunked(sched_kind k)
{
    const sched_traits *t = sched_traits_of(k);
    return t && t->chunks_max > 1;
}

int sched_kind_rank(sched_kind k, int st, int p)
{
    const sched_traits *t = sched_traits_of(k);
    if (!t || st < 0 || p < 1) return -1;
    switch (t->place) {
    case SCHED_PLACE_LOOP: return st % p;
    case SCHED_PLACE_V: return (st / p) % 2 == 0 ? st % p : p - 1 - st % p;
    default: return st;
    }
}

int sched_kind_chunks(sched_kind k)
{
    const sched_traits *t = sched_traits_of(k);
    return t ? t->chunks_default : 1;
}

const char *sched_place_name(sched_place p)
{
    return p == SCHED_PLACE_V ? "V" : p == SCHED_PLACE_LOOP ? "loop" : "stage";
}

char *sched_kind_list(char *buf, size_t n, const char *sep)
{
    size_t o = 0;
    if (!n) return buf;
    buf[0] = 0;
    for (int k = 0; k < SCHED_NKINDS && o < n; k++) {
        int w = snprintf(buf + o, n - o, "%s%s", k ? sep : "", TRAITS[k].name);
        if (w < 0) break;
        o += (size_t)w;
    }
    return buf;
}

/* ---- the names plan.h promises ------------------------------------------------------- */

const char *sched_kind_name(sched_kind k)
{
    const sched_traits *t = sched_traits_of(k);
    return t ? t->name : "unknown";
}

int sched_kind_parse(const char *name)
{
    const sched_traits *t = sched_traits_find(name);
    return t ? (int)t->kind : -1;
}

int sched_kind_is_async(sched_kind k)
{
    const sched_traits *t = sched_traits_of(k);
    return t && t->async;
}
