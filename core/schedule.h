/* schedule.h: the action IR, the heart of plumb. For each worker (a device), the ordered
 * list of actions it performs: forward F, backward B (or its halves I = input gradient and
 * W = weight gradient), send/receive of activations and gradients, the gradient all-reduce
 * among a stage's replicas, and the optimizer step. Each action names its stage, microbatch
 * and weight version. The simulator and the executor both run this IR. */
#ifndef PLUMB_SCHEDULE_H
#define PLUMB_SCHEDULE_H

#include <stdio.h>

#include "err.h"
#include "plan.h"
#include "schedule_traits.h"

typedef enum act_kind {
    ACT_F = 0,        /* forward of (stage, microbatch) */
    ACT_B,            /* full backward (input and weight gradients) */
    ACT_I,            /* input-gradient half of backward */
    ACT_W,            /* weight-gradient half of backward */
    ACT_SEND_F,       /* send the stage's output activations of microbatch to peer */
    ACT_RECV_F,       /* receive the stage's input activations of microbatch from peer */
    ACT_SEND_B,       /* send the gradient of the stage's input to peer (the previous stage) */
    ACT_RECV_B,       /* receive the gradient of the stage's output from peer (next stage) */
    ACT_ALLREDUCE,    /* all-reduce the stage's weight gradients among its replicas */
    ACT_STEP,         /* optimizer step of the stage: produces weight version `version` */
    ACT_NKINDS
} act_kind;

/* The largest stage an action can name (its bit-field's range; a schedule has at most
 * 4096 stages). */
#define ACT_STAGE_MAX 4095
/* Replicas of one stage schedule_generate accepts (more: refused, "replicas"). */
#define SCHED_MAX_REPLICAS 1024

/* One action: 16 bytes (the passes over an IR of millions of actions are bound by their
 * memory traffic). kind, stage and peer_stage are bit-fields of one 32-bit word: read and
 * assign them as ints, but their address cannot be taken. */
typedef struct action {
    signed int kind : 5;        /* act_kind */
    signed int stage : 14;      /* (virtual) stage index, -1 .. ACT_STAGE_MAX */
    signed int peer_stage : 13; /* SEND/RECV: the other stage; else -1 */
    int microbatch;   /* global microbatch index (iteration * microbatches + m); -1 for
                         ALLREDUCE and STEP */
    int version;      /* F/B/I/W: weight version used; STEP: version produced; else -1 */
    int peer;         /* SEND/RECV: the other worker; ALLREDUCE: -1 */
} action;
_Static_assert(sizeof(action) == 16, "an action is 16 bytes");

/* What a generator builds a schedule for. */
typedef struct sched_spec {
    sched_kind kind;
    int nworkers;        /* devices taking part; 0 = one more than the largest worker used */
    int nstages;         /* (virtual) stages; for the chunked kinds = pipeline ranks x chunks */
    int chunks;          /* virtual stages per pipeline rank (the chunked kinds); else 1 */
    int microbatches;    /* per iteration (per flush / per minibatch) */
    int iterations;      /* iterations to lay out, >= 1 */
    const int *replicas; /* [nstages] replica count per stage; NULL = all 1 */
    const int *workers;  /* stage s replica j runs on workers[first(s) + j] where first(s) is
                            the sum of replicas before s; NULL = the default placement
                            (the kind's placement: sched_kind_rank) */
} sched_spec;

typedef struct schedule {
    sched_kind kind;
    int nworkers, nstages, chunks, microbatches, iterations;
    int *replicas;       /* [nstages] */
    int *stage_workers;  /* flattened as in sched_spec.workers */
    int *stage_first;    /* [nstages] offset of stage s in stage_workers */
    int *len;            /* [nworkers] actions per worker */
    action **acts;       /* [nworkers][len[w]] */
    int *worker_device;  /* [nworkers] cluster device id of each worker: the plan's devices
                            for schedule_from_plan (workers numbered by increasing device
                            id), else the identity */
    int *worker_stage;   /* [nworkers] the one stage a worker holds, -1 for none, -2 for
                            several (chunks); NULL = not known (sched_hosts then scans) */
    int backward_split;  /* sched_split: whether some compute is an I (a zero-bubble split
                            backward), as the generator's lowering found; 0 = not known
                            (a schedule built elsewhere: scan the lists) */
    int *counts;         /* [3 * nstages] counts of these lists taken by the generator's
                            lowering as it wrote them (where it placed the steps and
                            versions: no replicated stage), or NULL (not taken): [st]
                            and [nstages + st] schedule_inflight's most activations and
                            versions (>= 1), [2 nstages + st] schedule_slots of st on its
                            one worker. Owned, freed by schedule_free; whoever changes the
                            lists after generation frees it and sets it to NULL. */
} schedule;

/* schedule.backward_split. */
typedef enum { SCHED_SPLIT_UNKNOWN = 0, SCHED_SPLIT_NO = 1, SCHED_SPLIT_YES = 2 } sched_split;

/* Builds the schedule for spec. Returns a new schedule (free with schedule_free), or NULL
 * with err ("FIELD: what was expected (got ...)") when the spec is impossible: counts out of
 * range, chunks outside the kind's (core/schedule_traits.h), replicated stages with chunks,
 * placements that put two stages on a worker (or split a rank's chunks), microbatches not
 * a multiple of a stage's replicas where the kind needs it (pipedream, 2bw), or too few to
 * cover the microbatches in flight (2bw). Any microbatch count works for the synchronous
 * kinds (docs/schedules.md). */
schedule *schedule_generate(const sched_spec *spec, plumb_err *err);

/* schedule_generate with the stages' costs (addition): stage_cost[3 * s + 0..2] is the time
 * of the forward, input-gradient and weight-gradient work of one microbatch on stage s
 * (B = I + W), in any unit, each > 0. Costs change no action, only where each SEND/RECV
 * pair lands among the computations: at the moment the data is produced when the stages
 * run at these speeds. Under the IR's posted receives (sched_sem) that changes no timing,
 * only how early a receive buffer is taken. NULL = unit costs (what schedule_generate
 * uses). */
schedule *schedule_generate_costed(const sched_spec *spec, const double *stage_cost,
                                   plumb_err *err);

/* Builds the schedule a plan asks for, with `iterations` iterations; its transfers are
 * placed with the stage costs of the plan's profile and devices (schedule_plan_costs). */
schedule *schedule_from_plan(const plan *pl, int iterations, plumb_err *err);
/* schedule_from_plan, with the iterations grown before the IR is lowered: while need(s,
 * ctx) of the compute order (each worker's F/B/I/W in order, as the IR will have them;
 * need >= 0) is above the iterations, and at most `rounds` times, the order is generated
 * again with need iterations, and only the last is lowered (so the last call of need saw
 * the order the IR keeps: need may note what it found in ctx, which is passed through
 * untouched). Same IR as schedule_from_plan with the final count (s->iterations); *grown
 * (may be NULL) is set to the times it grew. need returning < 0 is out of memory: NULL
 * with err. */
schedule *schedule_from_plan_grown(const plan *pl, int iterations,
                                   int (*need)(const schedule *, void *ctx), void *ctx,
                                   int rounds, int *grown, plumb_err *err);

void schedule_free(schedule *s);

/* The largest microbatches x iterations of a schedule (a global microbatch index is an
 * int). Schedules have no other limit on their size than the memory they need. */
#define SCHED_MAX_TOTAL_MB (1 << 30)
/* Peak bytes per action of generating, validating and simulating a schedule (measured:
 * docs/sim.md, Scale). */
#define SCHED_BYTES_PER_ACTION 128

/* The most microbatches a replica of stage st keeps in flight under the one-stage-per-rank
 * 1F1B kinds (the generator's warmup forwards plus one): ceil(W / r), W the replicas of
 * stages st .. nstages - 1 (the workers from st on; PipeDream's NOAM for the input stage),
 * r those of st. replicas: [nstages] counts >= 1. Returns -1 when replicas is NULL, st is
 * out of range or replicas[st] < 1. The generator and plan_sync_replicas_check both ask
 * this one. */
int sched_inflight_1f1b(const int *replicas, int nstages, int st);

/* The compute order of replica j (0 <= j < r) of a stage of r replicas over the
 * microbatches g in [lo, hi) with g % r == j (PipeDream's 1F1B-RR), as the generator lays
 * it out for the one-stage-per-rank kinds: hold_all (gpipe) every forward then every
 * backward; else k warmup forwards (clamped to [0, count]; the generator's ceil(W / r) - 1,
 * W the replicas of this stage and of every stage after it), then one forward and one
 * backward in turn, then the remaining backwards (zb-h1 then splits each backward into I
 * and W). Into out (room for 2 ceil((hi - lo) / r)): the forward of g as g + 1, its
 * backward as -(g + 1). Returns the count written. The generator and the native planner's
 * replay of the order (planner/native_rr.c) both call this one. */
int sched_replica_order(int r, int j, int lo, int hi, int k, int hold_all, int *out);

/* The memory, in bytes, that generating and simulating spec's schedule needs: its actions
 * (6 per stage, microbatch and iteration, 2 per replica and iteration) x
 * SCHED_BYTES_PER_ACTION. schedule_generate refuses a spec whose estimate is above the
 * machine's memory (or the process's address-space or data limit). 0 for NULL. */
double schedule_bytes_estimate(const sched_spec *spec);

/* Bytes of memory this process may use: the machine's physical memory, or less when an
 * address-space or data limit is set (what schedule_generate and the executor's stages
 * refuse to exceed). */
double sched_memory_available(void);

/* Fills cost[3 * nstages] for pl: per stage the forward, input-gradient and weight-gradient
 * time of its layers (ms, profiled minibatch; the backward split in half where the profile
 * does not split it; recomputation adds a forward to I) divided by the speed of the stage's
 * slowest device. Returns 0, or -1 when the plan's profile or cluster is missing. */
int schedule_plan_costs(const plan *pl, double *cost);

/* Proves the IR deadlock-free and well formed: every send has its receive, B after F,
 * W after I, each microbatch of each stage forward and backward exactly once per replica
 * assignment. Returns 0, or -1 with err naming the problem (for a deadlock, the cycle of
 * waiting workers and the actions they wait on). Replays under SCHED_SEM_RENDEZVOUS (a
 * send blocks until its receive is reached), the strictest semantics; an IR that passes
 * also runs with buffered sends and posted receives (sched_sem), the executor's.
 * docs/schedules.md lists every check. */
int schedule_validate(const schedule *s, plumb_err *err);

/* Counts found by the validator's replay: per stage, the most microbatches whose
 * activations are held at once (forwarded, backward not yet done: B, or W when the
 * backward is split) and the most weight versions held at once (the newest plus those
 * stashed by in-flight microbatches), each the maximum over the stage's replicas (per
 * device). Arrays of nstages filled by the caller-provided buffers (either may be NULL).
 * Counts even an IR that fails validation; -1 with err only for out-of-range fields. */
int schedule_inflight(const schedule *s, int *max_activations, int *max_versions,
                      plumb_err *err);

/* schedule_inflight's counts without its pass where the lowering took them
 * (s->counts), else schedule_inflight. Same contract. */
int schedule_inflight_fresh(const schedule *s, int *max_activations, int *max_versions,
                            plumb_err *err);

/* The buffer slots the executor gives stage `stage` on worker w: the most of its
 * microbatches open at once in w's list. A slot opens at RECV_F (posted before the compute
 * that comes first in the list) or at the first F, and closes once the backward is done (B,
 * or W when split) and its input gradient is gone (SEND_B, or taken by stage - 1's B or I
 * on the same worker; stage 0 has none to send). At least 1. The executor allocates, per
 * slot, the stage's input, activations and gradient buffers; the simulator's memory model
 * counts the same. */
int schedule_slots(const schedule *s, int w, int stage);
/* schedule_slots without its scan where the lowering counted them (s->counts, w the
 * stage's one worker), else schedule_slots. */
int schedule_slots_fresh(const schedule *s, int w, int stage);

/* The staging a pair of workers needs: bound[from * nworkers + to] is the most messages of
 * the kinds in `sends` (a mask of 1u << ACT_SEND_F and 1u << ACT_SEND_B; all-reduce traffic
 * is never counted) that `from` can have sent to `to` and `to` not yet taken at once (a
 * message is taken by the computation that consumes it, after its posted RECV),
 * over every timing of the schedule with buffered sends. Each is reached by some timing
 * (the receiver as late as the schedule's dependencies let it be). The executor's local
 * transport sets aside that many staging buffers per pair for the gradients (activations
 * are lent, not staged), and the simulator's memory model counts them. bound has
 * nworkers^2 entries, filled by the caller-provided buffer. Returns 0, or -1 with err (out
 * of memory, or an IR that deadlocks with buffered sends). */
int schedule_send_bound(const schedule *s, unsigned sends, int *bound, plumb_err *err);

/* schedule_send_bound as a list, in memory linear in the messages rather than the square
 * of the workers: one entry per pair (from, to) that has a send of a kind in `sends` or a
 * receive of one, sorted by from then to, with its bound (the others are 0). Sets *out (a
 * new array the caller frees; NULL when *n is 0 or on failure) and *n. 0, or -1 with err
 * as schedule_send_bound. */
typedef struct sched_pair_bound {
    int from, to, bound;
} sched_pair_bound;
int schedule_send_bound_pairs(const schedule *s, unsigned sends, sched_pair_bound **out,
                              int *n, plumb_err *err);

/* Action text in PyTorch's torch.distributed.pipelining form: "0F3", "1B2", "2I0", "2W0",
 * "0SEND_F3", "1RECV_F3", "1SEND_B2", "0RECV_B2", "0REDUCE_GRAD" (all-reduce), and
 * "0STEP" (plumb's own, for the optimizer step). Returns buf. */
char *action_format(const action *a, char *buf, size_t n);

/* Writes one CSV row per rank (PyTorch 2.15's compute_comms form: actions comma-separated,
 * "\r\n" line ends, no STEP; see schedule_write_csv_flags). Returns 0 or -1 on a write
 * error or when out of memory. */
int schedule_write_csv(const schedule *s, FILE *out);
/* Reads PyTorch's CSV (2.11's or 2.15's); peers of send/receive are resolved from the stage
 * placement given by spec (kind, nstages, chunks, replicas, workers). Empty fields are
 * empty slots; UNSHARD/RESHARD are skipped; 2.15's waits are checked (each follows its own
 * send or REDUCE_GRAD on that rank; a file with send waits has one per send, a file with
 * reduce waits one per REDUCE_GRAD) and dropped; a file without sends/receives
 * (compute_only) gets them added; steps, all-reduces of replicated
 * stages and versions are recomputed from spec->kind unless the file has them. When
 * spec->iterations < 1 it is derived from the largest microbatch. Returns NULL with err
 * ("FILE: row R, field F: ...") on bad input. */
schedule *schedule_read_csv(const char *path, const sched_spec *spec, plumb_err *err);

/* Prints a human-readable per-rank listing: a header line, then one row per position and
 * one column per worker ("Rank w"), like PyTorch's _format_pipeline_order; F/B/I/W/STEP
 * show their weight version ("0F3/v1") for pipedream and 2bw. */
void schedule_print(const schedule *s, FILE *out);

const char *act_kind_name(act_kind k); /* "F", "B", "I", "W", "SEND_F", ... */

/* --- additions (docs/schedules.md describes the semantics) ---------------------------- */

/* Communication semantics a validating replay assumes. The IR's own (the executor's and
 * the simulator's): a RECV posts the receive and does not block; the computation that
 * consumes its data (F for RECV_F, B or I for RECV_B) waits until it has arrived; a SEND
 * is buffered. Both replays below let a RECV block until the matching SEND has happened,
 * which never waits less than a posted receive's consumer does, so an IR that passes
 * cannot deadlock with posted receives either. RENDEZVOUS: also a SEND blocks until the
 * peer reaches (posts) the matching RECV (the strictest; generators guarantee it, so the
 * IR is also safe under the weaker one). BUFFERED: a SEND never blocks. ALLREDUCE is a
 * barrier among the stage's replicas (the k-th ALLREDUCE of the stage on each replica) in
 * both. */
typedef enum sched_sem {
    SCHED_SEM_RENDEZVOUS = 0,
    SCHED_SEM_BUFFERED
} sched_sem;

/* schedule_validate under the chosen semantics (schedule_validate = RENDEZVOUS). */
int schedule_validate_sem(const schedule *s, sched_sem sem, plumb_err *err);

/* The worker that runs (stage, microbatch) under round-robin replica assignment:
 * replica microbatch % replicas[stage]. -1 when out of range. */
int schedule_worker_of(const schedule *s, int stage, int microbatch);

/* Parses one action string ("0F3", "1RECV_B2", "0REDUCE_GRAD", "2STEP"): fills kind,
 * stage, microbatch (-1 when absent), version/peer/peer_stage -1. Returns 0, 1 for an
 * action plumb ignores (PyTorch's UNSHARD/RESHARD), 2 for a PyTorch 2.15 wait
 * ("0WAIT_SEND_F3", "1WAIT_SEND_B2", "0WAIT_REDUCE_GRAD": kind is then the action it
 * completes, ACT_SEND_F, ACT_SEND_B or ACT_ALLREDUCE), or -1 when malformed. */
int action_parse(const char *text, action *a);

/* CSV flags for schedule_write_csv_flags. The default (0) is PyTorch 2.15's compute_comms
 * form: every action but STEP, which PyTorch cannot parse, with a WAIT_SEND_F/WAIT_SEND_B
 * per send and a WAIT_REDUCE_GRAD per REDUCE_GRAD where 2.15's lowering puts them. */
enum {
    SCHED_CSV_STEPS = 1,        /* also write plumb's STEP actions ("0STEP") */
    SCHED_CSV_COMPUTE_ONLY = 2, /* only F, B, I, W (PyTorch's compute_only form, the same in
                                   2.11 and 2.15), and STEP with SCHED_CSV_STEPS */
    SCHED_CSV_NO_WAITS = 4      /* PyTorch 2.11's compute_comms form: no WAIT_* actions
                                   (2.11 misreads "0WAIT_SEND_F3" as "0W") */
};
int schedule_write_csv_flags(const schedule *s, FILE *out, unsigned flags);

/* Builds the schedule of spec from per-rank action strings already split into fields
 * (rows[w][i], nfields[w]; empty strings are empty slots). `file` names the source in
 * messages. Used by schedule_read_csv; exposed for tests. */
schedule *schedule_from_rows(const char *file, char ***rows, const int *nfields, int nrows,
                             const sched_spec *spec, plumb_err *err);

/* 1 when a and b have the same shape and identical action lists. */
int schedule_equal(const schedule *a, const schedule *b);

/* Actions of one kind in the whole schedule (for reports and tests). */
long schedule_count(const schedule *s, act_kind k);

#endif
