/* schedule_traits.h: what a schedule kind is, in one table (a row per kind). Every part
 * that needs to know how a kind places its stages, how many chunks a rank holds, whether
 * it trains with stale weights, how many weight versions it keeps, whether it splits the
 * backward, which microbatch counts it accepts, when it steps and how many microbatches a
 * stage holds asks this table; no other file compares kinds. Adding a schedule is a
 * generator plus a row (docs/schedules.md, "Adding a schedule"). */
#ifndef PLUMB_SCHEDULE_TRAITS_H
#define PLUMB_SCHEDULE_TRAITS_H

#include <stddef.h>

#include "plan.h"

/* Where a kind puts its (virtual) stages, with p pipeline ranks. */
typedef enum sched_place {
    SCHED_PLACE_STAGE = 0, /* one stage per rank, stages may be replicated */
    SCHED_PLACE_LOOP,      /* chunk c of rank r is stage c * p + r (interleaved) */
    SCHED_PLACE_V          /* 2 chunks: rank r holds stages r and 2p - 1 - r */
} sched_place;

/* How many microbatches a stage holds at once, for the memory model (the planner's fast
 * estimate; the simulator counts the IR itself). W: devices from the stage on, n: its
 * replicas, M: microbatches per flush. */
typedef enum sched_hold {
    SCHED_HOLD_ALL = 0,    /* every microbatch of the flush: ceil(M / n) (gpipe); each
                              input gradient may wait to be sent */
    SCHED_HOLD_1F1B,       /* ceil(W / n), at most ceil(M / n) when it flushes; the next
                              receive is posted ahead of the compute (one slot more) */
    SCHED_HOLD_ZB,         /* 1F1B plus the deferred weight gradients: the first stage's
                              warmup (zb-h1) */
    SCHED_HOLD_CHUNKED     /* ceil(W / n), priced per stage (the chunked kinds) */
} sched_hold;

typedef struct sched_traits {
    sched_kind kind;
    const char *name;          /* the name in files and on the command line */
    const char *semantics;     /* one line: what training with it means */
    int chunks_min, chunks_max;/* virtual stages per rank the generator accepts */
    int chunks_default;        /* what a plan or a command gets when it names none */
    sched_place place;
    sched_hold hold;
    int async;                 /* 1: stale weights, no flush (pipedream, 2bw) */
    int versions;              /* weight versions a stage keeps: 1, 2, or 0 = one per
                                  microbatch in flight (weight stashing) */
    int step_each_round;       /* 1: an optimizer step after each round of microbatches
                                  through the last stage's replicas (pipedream); 0: one per
                                  minibatch (after the flush, or per M for 2bw) */
    int split_backward;        /* 1: the backward is laid out as I and W */
    int mb_per_replica;        /* 1: microbatches must be a multiple of every stage's
                                  replica count */
    int mb_cover_inflight;     /* 1: microbatches must cover the microbatches in flight
                                  (2bw's 2 versions) */
    sched_kind partition_twin; /* the kind whose partitions this one reuses, repriced
                                  (itself when none) */
    sched_kind stage_twin;     /* the kind whose timing it has on one stage (itself) */
} sched_traits;

/* The row of kind k; NULL when k is not a kind. The rows live for the program. */
const sched_traits *sched_traits_of(sched_kind k);

/* The row named `name` ("1f1b-flush", "dualpipev", ...); NULL when unknown or NULL. */
const sched_traits *sched_traits_find(const char *name);

/* 1 when k lays out several virtual stages per rank (chunks_max > 1): such kinds do not
 * replicate stages. 0 for an unknown k. */
int sched_kind_chunked(sched_kind k);

/* The default rank of (virtual) stage st among p ranks under k's placement: st for one
 * stage per rank, st % p in a loop, the V for V placements. -1 when out of range. */
int sched_kind_rank(sched_kind k, int st, int p);

/* The chunks per rank a plan or command gets for k when it names none (chunks_default);
 * 1 for an unknown k. */
int sched_kind_chunks(sched_kind k);

/* "stage", "loop" or "V": the placement's name in messages. */
const char *sched_place_name(sched_place p);

/* Every kind's name in table order, separated by sep ("gpipe, 1f1b-flush, ..."), into
 * buf of n bytes (cut short when it does not fit). Returns buf. */
char *sched_kind_list(char *buf, size_t n, const char *sep);

#endif
