/* native_impl.h: internals of plumb's native planner (planner/native_model.c,
 * native_stage.c, native_part_memory.c, native_price.c, native_dp.c, native_plan.c,
 * native_rr.c, native.c, auto.c, sweep.c): the coarsened layer chain, the cost model of a stage, the dynamic
 * program over (first block, first device unit), and candidate partitions. Not a public
 * API: the rest of plumb calls planner/native.h. Units: seconds, bytes. */
#ifndef PLUMB_PLANNER_NATIVE_IMPL_H
#define PLUMB_PLANNER_NATIVE_IMPL_H

#include "core/schedule.h"
#include "core/schedule_traits.h"
#include "planner/native.h"
#include "sim/engine.h" /* sim_net: the planner prices transfers as the simulator does */
#include "sim/memory.h" /* sim_stage_layers, sim_memory_stage: and memory */

#define NM_MAX_BLOCKS 48        /* the chain is coarsened to at most this many blocks */
#define NM_MAX_UNITS 32         /* devices are grouped into at most this many units */
#define NM_MAX_STAGES 128
#define NM_BUCKET_BYTES (25.0 * 1024 * 1024) /* all-reduce bucket (the last is exposed) */

/* Per (first unit u, units r): facts of the device range [u g, (u + r) g) in the order. */
typedef struct nm_range {
    int ok;           /* 1: inside one server, or starting or ending at a server's edge
                         (the hierarchy is kept: no range cuts two servers in the middle) */
    double speed;     /* slowest device's speed */
    double cap;       /* smallest capacity, bytes */
    double ar_a, ar_b; /* ring all-reduce of X bytes takes ar_a X + ar_b seconds (the
                          rate and latency of sim_net_ring over the range) */
    double out_rate;  /* bytes/s of one transfer to the next unit's first device */
    double out_total; /* bytes/s of all the range's transfers to the next stage at once */
    double out_lat;   /* seconds per transfer to the next unit */
    double in_total;  /* bytes/s of all the range's transfers back to the previous stage
                         (over the level between the previous device and the range's end) */
    double in_rate, in_lat; /* one transfer from the range's first device back to the
                         device before it: bytes/s and seconds of latency (sim_net_path) */
} nm_range;

/* The model of one placement order of the devices. */
typedef struct nm_model {
    const profile *p;
    const cluster *c;
    int ndev;         /* devices used (max_devices or all) */
    int g;            /* devices per unit */
    int U;            /* units: ndev / g */
    int *order;       /* [ndev] device ids in placement order */
    int nb;           /* blocks */
    int *bfirst;      /* [nb + 1] first layer of each block; bfirst[nb] = nlayers */
    double *cF, *cB, *cP, *cG; /* [nb + 1] prefix sums at the profile's minibatch:
                                  forward ms, backward ms, parameter bytes (tied tensors
                                  twice), inner input-gradient buffers (once per stage) */
    double *cut;      /* [nb + 1] bytes crossing the boundary before block b; 0 at 0, nb
                         (sim_cross_bytes at the block boundaries) */
    double *cS;       /* [nb + 1] prefix sums of the outputs held and saved tensors as the
                         simulator counts them (sim_stage_layers acts + saved): a lower
                         bound of a slot's bytes that grows with the stage */
    double tied_total; /* every tied tensor's bytes (profile.h): params - this is a lower
                          bound of a range's parameter bytes that grows with the range */
    sim_stage_layers *lay; /* [nb (nb + 1)]: lay[b0 (nb + 1) + b1] what blocks [b0, b1)
                          hold (sim_memory_layers): the memory model's figures, shared
                          with the simulator */
    nm_range *rg;     /* [U * (U + 1)]: rg[u * (U + 1) + r] */
    int nr;
    int rlist[NM_MAX_UNITS]; /* replica counts (in units) the program tries */
    sim_net net;      /* the cluster's network as the simulator prices it */
    struct nm_sched_memo *memo; /* [NM_MEMO] what a schedule's memory needs (chunked kinds;
                                   complete plans with a replicated stage or zb-h1), by
                                   (kind, ranks, stages, microbatches, partition); filled
                                   as pricing asks (the model is otherwise read-only),
                                   freed with it */
    struct nm_dp_memo *kept; /* the dynamic programs solved (nm_partitions), the latest
                                NM_DP_KEPT settings: the same setting (or its quick form,
                                whose one threshold is the first of the full form's) gets
                                the same partitions without solving again; filled as the
                                programs run, freed with the model; NULL: always solved */
} nm_model;

#define NM_DP_KEPT 16

#define NM_MEMO 32


/* What a partition is priced for. */
typedef struct nm_setting {
    sched_kind kind;
    int M;            /* microbatches per iteration */
    int mbsize;       /* samples per microbatch */
    int recompute;
    int chunks;       /* interleaved */
    optimizer_kind opt;
    int quick;        /* 1: the min-max program and one fill threshold only */
    int nstages;      /* > 0: exactly this many stages (ranks for chunked kinds); 0: any */
    int p2p_sync;     /* 1: the plans' transfers block (native_options.p2p_sync): a stage
                         waits for each transfer it sends, and a transfer starts only once
                         its receiver has posted the receive (docs/planner-native.md, 8) */
    int grad_sync_end; /* 1: the rings run after the stage's last backward, none of it
                          hidden (native_options.grad_sync_end) */
    int zero;         /* 1: ZeRO-1 (native_options.zero): a stage's optimizer state is
                         split over its replicas in the memory terms (sim_memory_state) */
} nm_setting;

typedef struct nm_stage {
    int b0, b1;       /* blocks [b0, b1) */
    int u, r;         /* units [u, u + r) */
} nm_stage;

/* A priced partition. */
typedef struct nm_part {
    int nst;
    nm_stage st[NM_MAX_STAGES];
    int ranks;        /* interleaved: pipeline ranks (nst = ranks x chunks); else nst */
    double period;    /* the slowest stage's seconds per microbatch */
    double fill;      /* fill and drain, seconds */
    double ar;        /* exposed all-reduce per iteration, seconds */
    double iter_s;    /* estimated iteration time */
    double thr;       /* estimated samples/s */
    double peak_mem;  /* largest device, bytes */
    double cap;       /* smallest capacity used */
    int fits;
    int M;            /* microbatches it was priced with */
} nm_part;

/* Builds the model of p on c over devices order[0..ndev-1] (NULL = 0..ndev-1), memory
 * capped at mem_limit (> 0). Returns 0 or -1 with err (out of memory). */
int nm_model_build(nm_model *m, const profile *p, const cluster *c, int ndev,
                   const int *order, double mem_limit, plumb_err *err);
void nm_model_free(nm_model *m);

/* The communication and memory terms the planner prices stage st of a partition with,
 * per microbatch of s->mbsize samples: the bytes it receives and sends (the cuts before
 * and after it), one transfer of its output to the next stage's first device (latency +
 * bytes / rate of the path, 0 for the last stage), its ring all-reduce (0 unreplicated),
 * and its memory terms (sim_memory_stage of the stage's layers, on st->r units of
 * replicas). Each term is the simulator's (sim_cost_build, sim_net_path, sim_net_ring,
 * sim_memory_stage) for the plan nm_plan makes; tests/test_model_terms.c holds them equal. */
typedef struct nm_terms {
    double in_bytes, out_bytes;
    double xfer_s;
    double allreduce_s;
    sim_stage_mem mem;
} nm_terms;
void nm_stage_terms(const nm_model *m, const nm_setting *s, const nm_stage *st, nm_terms *out);

/* The seconds of stage st's optimizer step under s, as the simulator's engine takes it
 * (step_bytes / the device's step bandwidth: the parameters times sim_memory_state_of's
 * step bytes, over sim_cost_step_Bps), on the stage's slowest device for it (the largest
 * of its replicas' steps: a stage across device types); 0 when no device gives a
 * bandwidth. */
double nm_stage_step_s(const nm_model *m, const nm_setting *s, const nm_stage *st);

/* The memory of each device of part under s as the exact estimate (nm_price_exact)
 * counts it: for each stage its fullest replica (the first of the largest total; chunked
 * kinds: each pipeline rank), its terms (sim_memory_stage) held with the schedule's
 * weight versions, buffer slots and the staging of the gradients it sends back, summed by
 * sim_memory_add and sim_memory_close. The counts are the plan's schedule's (generated as
 * schedule_from_plan lays out the plan's, with the stages' costs) where the closed form's
 * may differ (a replicated stage, zb-h1, the chunked kinds), else the closed form's (the
 * trait table's versions, no more than microbatches in flight; the warmup's slots and
 * staged gradients; docs/planner-native.md), which equal them there. out: [part->nst]
 * (chunked: [part->ranks]); returns how many were filled. */
int nm_part_memory(const nm_model *m, const nm_setting *s, const nm_part *part,
                   sim_memory *out);

/* Prices part (its stages set) under s: fills period, fill, ar, iter_s, thr, peak_mem,
 * cap, fits, M = s->M. The memory counts (weight versions, buffer slots, staged
 * gradients) are the closed form's (docs/planner-native.md): the schedule's for a
 * straight pipeline (but zb-h1's) and the chunked kinds, an approximation (either side)
 * for replicated stages and zb-h1; fast enough for every partition the program proposes. */
void nm_price(const nm_model *m, const nm_setting *s, nm_part *part);

/* nm_price with the counts of the plan's schedule (generated as schedule_from_plan lays
 * out nm_plan's plan, kept in m's memo) where the closed form's may differ, so that
 * peak_mem and fits are the simulator's (nm_part_memory's largest). For the complete
 * plans the planner keeps and reports: a schedule per call (the memo keeps the latest). */
void nm_price_exact(const nm_model *m, const nm_setting *s, nm_part *part);

/* The greatest common divisor of a and b (>= 0; nm_gcd(a, 0) = a). */
long long nm_gcd(long long a, long long b);


/* Whether the planner prices a complete partition of S stages under kind by replaying
 * its compute order (nm_rr_time): the one-stage-per-rank kinds without a split backward
 * (gpipe, 1f1b-flush, pipedream, 2bw), two stages or more, whatever their replica counts
 * (equal counts too: a replica's few microbatches per iteration, or a fast stage after a
 * slow one, leave the closed form's fill and drain far from the order's). 1 or 0. */
int nm_rr_applies(sched_kind kind, int S);

/* The compute order of S stages with reps[s] replicas each and M microbatches, as kind's
 * generator lays it out (sched_replica_order, on reps / d replicas and M / d microbatches, d their
 * greatest common divisor: d identical lanes), replayed with f[s] and b[s] seconds of forward and
 * backward per microbatch and x[s] seconds per transfer from stage s to s + 1 (and back):
 * the seconds one flushed iteration takes (gpipe, 1f1b-flush: from the first forward to
 * the end of the last stage to finish, stage s finishing ar[s] seconds after its last
 * backward: its exposed all-reduce; ar NULL: 0; the first forward replica g of stage 0
 * sends arriving late0[g] seconds late, reps[0] of them or NULL for none: the replicas
 * start together and their first sends queue at a server's port), or for the
 * asynchronous kinds their steady iteration, from 5 iterations of one continuous order,
 * each replicated stage's replicas held after their last backward of an iteration (2bw)
 * or of a round (pipedream) until all have reached it and ar[s] more (the simulator's
 * all-reduce inside the loop), (end of the 4th - end of the 2nd) / 2 (at least 64 lane
 * microbatches: more iterations, up to 64, where a lane has few, the window from half way
 * to the last but one; late0 not read;
 * *plain the same; nm_rr_time_links adds each stage's optimizer step there). *plain
 * (NULL: not asked), flushing kinds: the same without the all-reduces (the last
 * backward's end). No contention, no optimizer step here. -1 when out of memory, or for arguments out of range (S < 1, M < 1, a count <
 * 1). */
double nm_rr_time(sched_kind kind, int S, const int *reps, const double *f, const double *b,
                  const double *x, const double *ar, const double *late0, int M,
                  double *plain);

/* nm_rr_time with blocking transfers when sync is 1 (p2p sync; docs/sim.md, "Synchronous
 * point-to-point"): each computation also waits for the send of the one before it on its
 * replica, which leaves only once its receiver has posted the receive (when the
 * receiver's computation before the one that takes it ends) and takes x; a receive's data
 * leaves no earlier than its post; a replica ends when its last send has arrived (*plain
 * too). sync 0: nm_rr_time. (grad_sync end needs nothing here: the caller's ar holds the
 * whole ring, which starts at the stage's last backward either way.) */
double nm_rr_time_p2p(sched_kind kind, int S, const int *reps, const double *f,
                      const double *b, const double *x, const double *ar, const double *late0,
                      int M, int sync, double *plain);

/* Each replica's own transfers for nm_rr_time_links: replica j of stage s on device
 * devs[s][j] (reps[s] of them, the plan's order), bytes[s] what stage s sends stage s + 1
 * a microbatch (and gets back), net the paths (sim_net_path, as the simulator takes a
 * transfer: bytes / rate + latency); step[s] the stage's optimizer step in seconds
 * (nm_stage_step_s); ring[s] a replicated stage's whole ring alone in seconds and
 * buckets[s] its K buckets (ceil(P / NM_BUCKET_BYTES)), for nm_rr_ports_time's hold of
 * the servers' ports (ring[s] 0: not known, the exposed ar[s] from the backward's end
 * instead). */
typedef struct nm_rr_links {
    const sim_net *net;
    const int *devs[NM_MAX_STAGES];
    double bytes[NM_MAX_STAGES];
    double step[NM_MAX_STAGES];
    double ring[NM_MAX_STAGES];
    double buckets[NM_MAX_STAGES];
} nm_rr_links;

/* nm_rr_time_p2p with each microbatch's transfer over the path between the two replicas
 * it leaves and reaches (lk; NULL: x[s] for every one): where a stage's replicas sit on
 * both sides of a server's slower link, the transfers of those replicas take that link's
 * time, not the stage's one x[s] (x then not read). Of the d identical lanes the one
 * whose transfers take longest in all is replayed. The asynchronous kinds also take
 * lk->step[s] seconds of optimizer step after each hold (every stage, replicated or not:
 * 2bw's once an iteration, pipedream's every round), and a replicated stage's ring waits
 * for its replica's sends through a server's port that the stage's sends fill (as many
 * senders there as lanes). Same returns. */
double nm_rr_time_links(sched_kind kind, int S, const int *reps, const double *f,
                        const double *b, const double *x, const double *ar,
                        const double *late0, int M, int sync, const nm_rr_links *lk,
                        double *plain);

/* The most devices (the replicas of every stage together) nm_rr_ports_time replays. */
#define NM_RR_PORTS_MAX_DEVICES 64

/* Whether the asynchronous kinds' replay of S stages of reps[s] replicas on lk's devices
 * takes the servers' ports (nm_rr_ports_time): lk given, at most NM_RR_PORTS_MAX_DEVICES
 * devices, and a level above the server's whose egress port has fewer lanes than a group
 * below it has devices (several of them may queue there). 1 or 0. */
int nm_rr_ports_apply(const nm_rr_links *lk, int S, const int *reps);

/* The steady iteration of pipedream (step_each_round 1) or 2bw (0), with blocking
 * transfers when sync is 1 (nm_rr_time_p2p's rules), as nm_rr_time_links prices it (5 iterations of one continuous order, the
 * holds at each replicated stage's all-reduce, ar[s] seconds exposed, and every stage's
 * step lk->step[s]; (end of the 4th - end of the 2nd) / 2), but every replica of every
 * stage replayed at once (no lanes), in time order, each transfer sent as the simulator's
 * engine sends it: FIFO on its directed link and on a lane of each egress port of its
 * path (lk's devices and bytes), bytes / rate + latency; a replicated stage's ring holds
 * each port of one lane its hops leave through bucket by bucket (lk->buckets[s] of them,
 * ready evenly through the last backward, lk->ring[s] seconds in all), FIFO with the sends
 * there: a send made before a bucket starts goes first, one made while it runs adds its
 * time to it; a port of more lanes from when one is free at the backward's end, ar[s]
 * seconds (lk->ring[s] 0: every port so; planner/native_rrport.c).
 * M microbatches an iteration, a multiple of every reps[s]. Returns seconds, or -1 out of
 * memory or for arguments out of range (more than NM_RR_PORTS_MAX_DEVICES devices, M not
 * a multiple of a count). */
double nm_rr_ports_time(int S, const int *reps, const double *f, const double *b,
                        const double *ar, int M, int step_each_round, int sync,
                        const nm_rr_links *lk);

/* The dynamic program for s: the partitions it proposes (min-max period, then least fill
 * under a few period thresholds), priced, distinct, at most `max` of them into out.
 * Returns how many (0 when no partition fits memory); *dp_runs counts programs solved. */
int nm_partitions(const nm_model *m, const nm_setting *s, nm_part *out, int max,
                  int *dp_runs);

/* The interleaved partitions (ranks x chunks stages, no replication). Same contract. */
int nm_partitions_interleaved(const nm_model *m, const nm_setting *s, nm_part *out, int max);

/* The default microbatch count of nst stages of reps[i] devices for kind k: 4 x stages,
 * and for the flushing kinds 2 x stages per replica of the most replicated stage (at most
 * 4 x the devices used), at least the largest replica count, a multiple of the
 * replica counts' lcm (or of the largest when the lcm exceeds 64; always the lcm for
 * pipedream and 2bw); for 2bw at least what its two weight versions need. */
int nm_policy_microbatches(sched_kind k, int nst, const int *reps);

/* nm_policy_microbatches of a partition (chunked kinds: 2 x ranks). */
int nm_default_microbatches(const nm_model *m, sched_kind k, const nm_part *part);

/* The fallback when the default count does not fit memory (gpipe stashes every
 * microbatch): the smaller 4 x stages rule (at least the largest replica count, same
 * rounding). Never more than nm_default_microbatches. */
int nm_legacy_microbatches(const nm_model *m, sched_kind k, const nm_part *part);

/* Builds the plan of part under s (devices from m's order). NULL with err. */
plan *nm_plan(const nm_model *m, const nm_setting *s, const nm_part *part, plumb_err *err);

/* "4-2-1-1": replicas (devices) per stage. */
void nm_config(const nm_model *m, const nm_part *part, char *buf, size_t n);

/* The placement orders worth trying on c's first ndev devices: the cluster order, and for
 * heterogeneous clusters the servers in reverse order too. Fills orders[k][ndev] (caller
 * allocates 2 x ndev) and returns the count. */
int nm_orders(const cluster *c, int ndev, int *orders);

/* --- candidates (native.c, shared with auto.c and sweep.c) ---------------------------- */

/* The placement models of one planning call: one per device order. */
typedef struct nm_models {
    int n;
    nm_model m[2];
    int ndev;
} nm_models;

/* Builds the models of p on c's first ndev devices. 0 or -1 with err. */
int nm_models_build(nm_models *ms, const profile *p, const cluster *c, int ndev,
                    double mem_limit, plumb_err *err);
void nm_models_free(nm_models *ms);

typedef struct nm_cand {
    int mod;          /* which model (device order) */
    nm_setting s;     /* M settled */
    nm_part pt;
    int simulated, sim_fits;
    double sim_thr, sim_iter, sim_bubble, sim_peak;
    double *sim_dev_peak; /* [c->ndevices] or NULL */
    int must;         /* a baseline (data parallelism, straight pipeline): always simulated */
    int copied;       /* its sim_* timing copied from a single-stage twin of the same timing
                         (1f1b-flush and gpipe; pipedream and 2bw); memory is the model's */
    int sim_exact;    /* its sim_* figures are `plumb sim`'s (nm_sim_exact, or settled) */
} nm_cand;

typedef struct nm_cands {
    int n, cap;
    nm_cand *v;
    nm_cand pre;      /* best_only: a candidate simulated before the others were gathered */
    struct plan *pre_plan; /* its plan (owned; NULL: none or taken by nm_finish) */
} nm_cands;

void nm_cands_free(nm_cands *cs);
/* Appends a copy of *c, growing cs. Returns 0, or -1 when out of memory. */
int nm_cands_push(nm_cands *cs, const nm_cand *c);

/* Adds the partitions the program finds for s on every model (M: s->M when fixedM, else
 * each partition's default count), priced; only fitting ones. Returns how many were added,
 * or -1 when out of memory. */
int nm_gather(const nm_models *ms, const nm_setting *s, int fixedM, nm_cands *out,
              int *dp_runs);

/* Adds the baselines for s, marked `must` (always simulated, so the plan returned is never
 * slower, as simulated, than they are): plain data parallelism (one stage on every device)
 * and the best straight pipelines (one device per stage) the program finds, on the first
 * model, M as in nm_gather. *have (in and out): bit 0 data parallelism, bit 1 a straight
 * pipeline already added (skipped here), set for those added. Returns how many fit, or -1
 * when out of memory. */
int nm_baselines(const nm_models *ms, const nm_setting *s, int fixedM, nm_cands *out,
                 int *dp_runs, int *have);

/* Adds the fitting candidates of cs->v[from..to) re-priced for schedule `kind` (the same
 * partitions; zb-h1 from 1f1b-flush, 2bw from pipedream). Returns how many, -1 on OOM. */
int nm_reprice(const nm_models *ms, nm_cands *cs, int from, int to, sched_kind kind,
               int fixedM);

/* Sorts cs by estimated throughput (fitting first), simulates the first nsim distinct ones
 * (iterations, memory limit from o), and fills res with every candidate ranked (simulated
 * and fitting by simulated throughput first). 0 or -1 with err (out of memory). */
/* The most samples per second c can reach by its compute alone: each microbatch runs
 * every layer's forward and backward (and the forward again with recomputation) once on
 * one of the plan's devices, none faster than the fastest device of the order, and the
 * simulator's transfers, all-reduce, step, batch gather and bubbles only add time; for
 * gpipe and 1f1b-flush also the fill and drain of the most loaded replica of each stage.
 * INFINITY when the profile has no compute. */
double nm_compute_bound(const nm_models *ms, const nm_cand *c);

/* Simulations kept for native_options.sim_memo: a plan's figures under a key of everything
 * the simulator reads of it (schedule, counts, zero, runtime (p2p, grad_sync, the
 * all-gather apart), stages, devices,
 * and of each device its type's figures and its group at every level of the cluster, the
 * levels' links), so the same plan on a resized cluster is simulated once. nm_sim_memo_new returns NULL when out
 * of memory; free with nm_sim_memo_free (NULL is fine). */
typedef struct nm_sim_memo nm_sim_memo;
nm_sim_memo *nm_sim_memo_new(void);
void nm_sim_memo_free(nm_sim_memo *mo);

/* What a scoring simulation gives the planner. */
typedef struct nm_sim_fig {
    double thr, iter, bubble, peak;
    int fits;
    int ndev;
    int *dev;          /* [ndev] devices of the report */
    double *dev_mem;   /* [ndev] their peak memory */
} nm_sim_fig;

/* The figures kept for pl (owned by mo, valid until the next nm_sim_memo_put), or NULL;
 * remembers pl's key for nm_sim_memo_put. */
const nm_sim_fig *nm_sim_memo_get(nm_sim_memo *mo, const struct plan *pl,
                                  const native_options *o);
/* Keeps a copy of fig under the key of the last nm_sim_memo_get (nothing when out of
 * memory). */
void nm_sim_memo_put(nm_sim_memo *mo, const nm_sim_fig *fig);

int nm_finish(const nm_models *ms, nm_cands *cs, const native_options *o, int nsim,
              native_result *res, plumb_err *err);

/* Fills res->suggestion (and err) with what would fit when nothing does for the setting s
 * on c: recomputation, smaller microbatches, a leaner schedule, more devices. */
void nm_suggest(const profile *p, const cluster *c, const native_options *o,
                const nm_setting *s, native_result *res, plumb_err *err);

/* The start of planner_native and planner_auto: checks the inputs, clears res, builds the
 * models, fills res->single_samples_per_s and capacity_bytes. 0 or -1 with err. */
int nm_begin(const profile *p, const cluster *c, const native_options *o, native_result *res,
             nm_models *ms, plumb_err *err);

/* planner_native's search for one schedule on the models ms (nm_begin's): s's microbatch
 * size, then a half and a quarter of it (unless o fixes it), recomputation off and on as o
 * asks, each with the baselines, then nm_finish into res (which nm_begin cleared; its
 * dp_runs and nsimulated are added to). On return s->recompute is what the suggestions
 * start from (nm_suggest). 0 or -1 with err (out of memory). */
int nm_search(const nm_models *ms, const native_options *o, nm_setting *s,
              native_result *res, plumb_err *err);

/* A result's throughput and peak memory: simulated when it was, else estimated. */
double nm_result_thr(const native_candidate *c);
double nm_result_peak(const native_candidate *c);

/* Sorts res->cand by the ranking nm_finish gives its candidates (native.c, rank_order). */
void nm_rank_results(native_result *res);

/* Writes each ranked candidate's reason (auto.c). */
void nm_reasons(native_result *res);

/* How the planner scores a candidate plan pl (its schedule, microbatches and
 * recomputation as set in pl): one steady window, without sim_run's settling rounds (which
 * double the run up to 64 iterations: 4.8 s for vgg16's 2bw plan on dgx-a100-80g): an IR
 * of 3 iterations for the flushing schedules, of what the steady window needs (at most
 * NM_SCORE_MAX_ITERATIONS) for pipedream and 2bw, o->sim_iterations when > 0; o's memory
 * limit. Where nm_sim_exact says so the figures are `plumb sim`'s of pl; else nm_finish
 * settles the leaders (nm_sim_settled). Returns the report (caller frees) or NULL with
 * err. */
#define NM_SCORE_MAX_ITERATIONS 32
struct sim_report;
struct sim_report *nm_sim_score(const plan *pl, const native_options *o, plumb_err *err);

/* pl simulated as `plumb sim` of its plan file runs it: sim_run with the default options
 * and o's memory limit (the IR grown to the steady window, then doubled up to 64
 * iterations until the window settles); nm_sim_score's fixed IR when o->sim_iterations
 * > 0. Returns the report (caller frees) or NULL with err. */
struct sim_report *nm_sim_settled(const plan *pl, const native_options *o, plumb_err *err);

/* 1 when r (nm_sim_score's) is `plumb sim`'s figure already: its window steady and
 * settled (sim_run would stop there), or the iterations fixed by o. */
int nm_sim_exact(const struct sim_report *r, const native_options *o);

/* Milliseconds on a monotonic clock. */
double nm_now_ms(void);

/* GiB from bytes, for messages. */
static inline double nm_gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

/* --- shared by the model's files (native_model.c, native_stage.c, native_part_memory.c,
 * native_price.c, native_dp.c, native_plan.c) ------------------------------------------ */

static inline int nm_ceil_div(int a, int b) { return (a + b - 1) / b; }

/* One stage's price (nm_stage_cost_k). */
typedef struct nm_cost {
    double c, b;      /* compute and backward per microbatch on one replica */
    double per;       /* period */
    double comm;      /* seconds per microbatch of its busiest link (0: none) */
    double lat;       /* latency per microbatch through the stage and its output link */
    double arx;       /* exposed all-reduce */
    double mem;       /* bytes per device */
    double cap;
} nm_cost;

/* What the closed form counts for a stage: its weight versions, buffer slots and staged
 * input gradients (the schedule's; docs/planner-native.md). */
typedef struct nm_counts {
    int ver, slots, staged;
} nm_counts;

/* The input gradients a stage holding k microbatches (km per flush; 0: no flush) can have
 * staged on their way back to the stage before it (native_stage.c). */
int nm_staged_grads(sched_kind kind, int k, int km);

/* The buffer slots a stage holding k microbatches (km per flush; 0: no flush) keeps;
 * receives: 1 when it receives from a stage before it (native_stage.c). */
int nm_held_slots(sched_kind kind, int k, int km, int receives);

/* The precision of the plans nm_plan makes of m's profile (plan_new): the profile's where
 * it says one (an analytic profile), else fp32. Pure. */
dev_precision nm_precision(const nm_model *m);

/* 1 when the simulator gives the plans of s Megatron-LM-style buffers (sim_cost_plan_is_3d:
 * ZeRO 1, or bf16, fp16 or fp8 precision): no all-reduce receive scratch, no staging, a
 * slot's gradients once per stage. Pure. */
int nm_nccl(const nm_model *m, const nm_setting *s);

/* How the plan nm_plan makes runs a stage of n replicas under s, for the memory model. */
sim_mem_setting nm_mem_setting(const nm_model *m, const nm_setting *s, int n);

/* The memory terms of blocks [b0, b1) on n replicas under s into *t (sim_memory_stage). */
void nm_block_mem(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                  sim_stage_mem *t);

/* The closed form's counts of a stage starting at block b0 on n devices, W devices from
 * it to the end of the pipeline, kzb the zero-bubble kinds' warmup (0: unknown), into *o. */
void nm_count_stage(const nm_setting *s, int b0, int W, int n, int kzb, nm_counts *o);

/* The memory of the first device of a stage (blocks [b0, b1) on n devices) with counts
 * cn and capacity cap, into *out. */
void nm_stage_memory(const nm_model *m, const nm_setting *s, int b0, int b1, int n,
                     const nm_counts *cn, double cap, sim_memory *out);

/* The price of blocks [b0, b1) on units [u, u + r) into *o, W devices from this stage to
 * the end of the pipeline, kzb the zero-bubble kinds' warmup; given: the stage's memory
 * (its fullest device's), or NULL for the closed form's counts. Returns 1 when it fits
 * memory (and its microbatches split evenly where the kind needs it), else 0 (*o filled
 * as far as priced). */
int nm_stage_cost_k(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                    int W, int kzb, const sim_memory *given, nm_cost *o);

/* The compute of one microbatch of blocks [b0, b1) on a replica of units [u, u + r) under
 * s: *F its forward (the batch gather of a first or last stage included), *B its backward
 * (the forward again with recomputation), seconds, as the simulator prices them. */
void nm_stage_compute(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                      double *F, double *B);

/* A chunked partition's stage i (one replica): the seconds of one transfer of its output
 * to stage i + 1, bytes / rate + latency over the path between the two stages' devices
 * (the interleaved wrap goes from the last rank back to rank 0; a V kind's middle stage
 * stays on its device); 0 on one device, for the last stage or a path not found. *bytes
 * (may be NULL) gets the transfer's bytes (0 for the last stage). nm_price's replay and
 * the written plan's comm_s both ask it. */
double nm_chunk_transfer(const nm_model *m, const nm_setting *s, const nm_part *pt, int i,
                         double *bytes);

/* nm_stage_cost_k with the closed form's counts and no zero-bubble warmup. */
int nm_stage_cost(const nm_model *m, const nm_setting *s, int b0, int b1, int u, int r,
                  int W, nm_cost *o);

/* The memory of each rank of the chunked partition pt under s into out[pt->ranks]
 * (native_part_memory.c). */
void nm_chunked_memory(const nm_model *m, const nm_setting *s, const nm_part *pt,
                       sim_memory *out);

/* The schedule the simulator runs for the chunked partition pt under s (one iteration;
 * the split-backward kinds the simulator's scoring iterations, 3; laid out as the plan's:
 * the memo's, built on first use), or NULL when it cannot be built. Borrowed: the model's memo owns it (valid until NM_MEMO other partitions are
 * priced). (native_part_memory.c) */
const schedule *nm_chunked_schedule(const nm_model *m, const nm_setting *s, const nm_part *pt);

/* The iteration of the chunked schedule sc as it runs (native_ir.c; docs/planner-native.md,
 * section 8, "The chunked kinds replayed"): each worker's F, B, I and W in the schedule's
 * order, each starting when its worker is free and its input has arrived; a transfer
 * leaves when its producer ends, queues FIFO on its directed link (worker pair) and takes
 * a lane of each egress port on its path for bytes / rate of the path (net: sim_net_path,
 * sim_net_lanes, as the simulator's engine), and arrives the path's latency later
 * (nothing moves between stages on one worker). wdev [sc->nworkers]: each worker's
 * device; f, b, bi, bw [sc->nstages]: a microbatch's forward, backward and its split
 * halves on the stage's worker; bytes [sc->nstages]: what cut c (stage c to c + 1) moves
 * per microbatch, each way. Returns the makespan (seconds); for a schedule of several
 * iterations the steady one's, (end of the last - end of the first) / (iterations - 1),
 * each iteration ending with its last computation; or -1 when the order cannot finish
 * (or out of memory). */
double nm_ir_time(const schedule *sc, const sim_net *net, const int *wdev, const double *f,
                  const double *b, const double *bi, const double *bw, const double *bytes);

/* The zero-bubble kinds' warmup of pt: the largest ceil(devices from a stage on / its
 * replicas). */
int nm_pipeline_kzb(const nm_model *m, const nm_part *pt);

/* The memory of each stage's fullest device of the one-stage-per-rank partition pt under
 * s into out[pt->nst]: exact 1, the schedule's counts where the closed form's may differ;
 * exact 0 (or no schedule), the closed form's. */
void nm_pipeline_memory(const nm_model *m, const nm_setting *s, const nm_part *pt, int exact,
                        sim_memory *out);

/* The model's schedule memo (NM_MEMO entries, empty), or NULL out of memory; freed with
 * nm_memo_free (NULL is fine). */
struct nm_sched_memo *nm_memo_new(void);
void nm_memo_free(struct nm_sched_memo *memo);

/* The model's kept programs (empty), or NULL out of memory; freed with free(). */
struct nm_dp_memo *nm_kept_new(void);

#endif
