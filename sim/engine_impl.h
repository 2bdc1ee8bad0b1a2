/* engine_impl.h: the engine's private state, shared by sim/engine.c (workers, the run) and
 * sim/engine_comm.c (links, egress ports, channels, transfers, all-reduce groups). Internal
 * to the engine. */
#ifndef PLUMB_SIM_ENGINE_IMPL_H
#define PLUMB_SIM_ENGINE_IMPL_H

#include "sim/engine.h"
#include "sim/eventq.h"

typedef struct xfer {
    double bytes, arrival;   /* arrival < 0 until it starts */
    const action *a;         /* its SEND; NULL for a hop of a ring all-reduce */
    uint64_t match;          /* its SEND's xfer_match: what the RECV that takes it matches,
                                without reading the SEND again (long out of cache) */
    int group;               /* the all-reduce group of a ring hop, else -1 */
    int link;                /* -1: both ends on one device */
    int waiter;              /* worker whose RECV took it before it started, or -1 */
    int lnext, pnext, cnext; /* link queue, port wait queue, channel list / free list */
    int iter, src_w;
    int wide;                /* lanes held beyond one: a ring hop of width wide + 1
                                (sim_net_ring_widths) moves at wide + 1 times its link's
                                rate over that many lanes of each port; 0 otherwise */
    unsigned char received, done;
    unsigned char held;      /* p2p_sync: issued, waiting for its receiver's RECV */
    unsigned char piece;     /* a wide ring hop split on the lanes that were free: 1 a part
                                started on them (holds lanes, not the link), 2 the hop's rest
                                (waits for more lanes, then holds the link); 0 otherwise */
} xfer;

#define VG_QUIET (-2)  /* link.vg of a quiet point-to-point transfer */
#define PORT_QUIET 2   /* the most quiet transfers a port keeps (more start with events) */

/* A link's fields in the order a transfer reads them: what every point-to-point transfer
 * reads and writes (queue, quiet end, rate, statistics, its ports) lies in the first two
 * cache lines of the record (the array is 64-byte aligned, eng_grow_lines), the rest
 * after. */
typedef struct link {
    _Alignas(64) int busy;
    int head, tail, nports;
    /* a ring hop moving here without a transfer record or event of its own (a "virtual"
     * hop, engine_ring.c), or a point-to-point transfer moving here without an end event
     * of its own (a "quiet" transfer, engine_comm.c): it holds the link and a lane of each
     * port as a transfer would, until its end event's key (vend, vseq), or until something
     * queues behind it */
    int vg;                          /* its group, VG_QUIET: a quiet transfer, or -1: none */
    int vh;                          /* its index in eng.hop */
    uint32_t vseq;
    int track;
    double vend;
    double rate, lat;
    sim_link_stat st;
    int ports[CLUSTER_MAX_LEVELS];   /* egress ports it leaves through; after them, at
                                        ports[nports] when np2p > nports, its sender's
                                        tensor-parallel group's own lanes (below) */
    int np2p;                        /* ports a point-to-point transfer holds: nports, or
                                        nports + 1 with the group's own: with tp > 1 a send
                                        leaving the server holds, besides one lane of each
                                        shared port as before, pw lanes of its group's own
                                        (its ranks' NICs, sim_net_p2p_lanes), which its
                                        sends to either neighbour share and no other
                                        group's transfer takes */
    int pw;                          /* lanes of the group's own a transfer holds */
    double prate;                    /* a point-to-point transfer's rate: rate, or rate /
                                        share where its ranks outnumber their own lanes */
    int vnext[CLUSTER_MAX_LEVELS];   /* next link with a virtual hop on ports[k] (a quiet
                                        transfer is on no list: port.qlink) */
} link;

typedef struct port {         /* one cache line (the array is aligned, eng_grow_lines) */
    _Alignas(64) int lanes;
    int busy, whead, wtail;
    int vhead, nvirt;                /* links with a virtual hop holding a lane here */
    /* the quiet transfers holding lanes here (engine_comm.c), ended or not: their links,
     * the lanes each holds (1, or link.pw on a group's own) and their ends' keys, kept
     * here so that a port's check reads no link */
    unsigned char nq;
    unsigned short qw[PORT_QUIET];
    int qlink[PORT_QUIET];
    uint32_t qseq[PORT_QUIET];
    double qend[PORT_QUIET];
} port;

typedef struct chan {        /* transfers from one worker to another in one direction */
    int head, tail;          /* issued, not yet received, in issue order */
    int blocked;             /* the receiver, waiting for a send here; or -1 */
} chan;

typedef struct group {       /* the k-th all-reduce of one stage among its replicas */
    int stage, need, count, mem_off, iter;
    int comm;                /* 1: its ring moves data (r > 1, gradient bytes > 0) */
    int nreg;                /* members whose last backward has started (registered) */
    int K, bucket, step;     /* buckets; the one on the ring and its ring step (of
                                steps) */
    int steps;               /* ring steps per bucket: 2 (r - 1) for an all-reduce (r - 1
                                reduce-scatter, r - 1 all-gather); r - 1 for either half
                                of a split ZeRO ring */
    int phase;               /* 0: the all-reduce; with the parameter all-gather apart
                                (sim_model.gather_bytes): 1 its reduce-scatter, whose
                                members it holds, 2 the all-gather after the step */
    int ag;                  /* phase 1: its all-gather's group once started, else -1;
                                phase 2: its reduce-scatter's group */
    int bend_off;            /* phase 2: its buckets' ends, eng.bend[bend_off ..+ K) */
    int occ;                 /* which all-reduce of its stage (phase 2: its
                                reduce-scatter's) */
    int released;            /* phase 1: its members went on */
    double stepped;          /* phase 1: when the slowest member's step after it ends */
    double hop_bytes;        /* bytes per hop and step */
    int pending;             /* hops of that step still moving */
    double lat;              /* the ring's slowest hop latency */
    int done;                /* every bucket reduced: fin is known */
    int inflight;            /* the step's private hops are moving as one: the group's
                                next event is their end (engine_ring.c) */
    long long gsteps;        /* steps started with grouped private hops */
    double maxreach;         /* latest arrival of a member at its ALLREDUCE */
    double vt;               /* its last step's start and first reserved sequence number */
    uint32_t vbase;          /* (the virtual hops' ends derive from them while repeating) */
    long long vb_k;          /* steps repeated, their additions deferred (engine_ring.c) */
    double start, fin;       /* first bucket's start, last bucket's end */
} group;

typedef struct wstate {      /* per worker */
    int cursor, iter, inflight;
    int mb_lo, mb_iter;      /* the first microbatch of its last microbatch's iteration
                                and that iteration (at most the last one run) */
    /* per direction and side (2 fwd + (peer > worker): a V placement sends activations
     * both ways), the last peer sent to, its link, the link's first egress port and the
     * channel; the last peer received from and the channel */
    int speer[4], link[4], port[4], schan[4];
    int rpeer[4], rchan[4];
    int *post;               /* its posted RECVs whose consumer has not run (action
                                indices, in posting order): post[p0 .. npost) */
    int p0, npost, cappost;
    int ring_g;              /* the group whose grouped ring steps have not yet added
                                their hops' link time to comm_it, or -1 */
    long long ring_base;     /* that group's steps already added */
    double ring_occ;         /* its first hop's link time per step */
    int ring_n;              /* its hops in that ring (a context-parallel ring's worker
                                sends one per context rank of its replica) */
    int ring_mixed;          /* 1: their link times differ (each step adds them one by
                                one, in ring order) */
    /* p2p_sync (engine_sync.c): its sends not yet on their way (held for the receiver's
     * post, or queued behind a busy link or port), the latest arrival of those on their
     * way, and 1 while its next computation waits for them */
    int sync_out, sync_wait;
    double sync_deliv;
    int pg_g;                /* 1 + the reduce-scatter group whose parameter all-gather
                                its next forward waits for, else 0 */
    double pg_t;             /* when that forward was first ready */
} wstate;

typedef struct ring {        /* a replicated stage's ring all-reduce (engine_ring.c) */
    int priv;                /* 1: some hops are private; they end with the step's grouped
                                event */
    int off, n;              /* its hops in eng.hop[off .. off + n), same-device hops
                                left out */
    int soff, nshared;       /* its shared hops' indices in eng.shop[soff ..] */
    int ready;               /* links created and hop times known */
    double bytes;            /* bytes per hop and step */
    double maxocc;           /* the slowest private hop's link time per step */
    double vmaxocc;          /* the slowest shared hop's link time per step */
    int cls;                 /* its class: the least stage whose ring it reaches through
                                shared hops' links, ports and workers (rings of other
                                classes never touch what its shared hops hold) */
    int multi;               /* 1: some worker sends two or more of its shared hops */
} ring;

typedef struct ringhop {     /* one hop of a ring */
    int w, da, db;           /* sending worker, its device, the next replica's device */
    int priv;                /* 1: nothing else uses its link, nor its ports beyond their
                                lanes, and its worker sends only hops like it, all in
                                this ring */
    int multi;               /* shared, and its worker sends another shared hop of the
                                ring */
    int link;                /* -1 until the ring's first step */
    int width;               /* lanes of each port it holds (sim_net_ring_widths) */
    double occ;              /* link time per step */
} ringhop;

typedef struct eng {
    const sim_model *m;
    const schedule *s;
    sim_result *r;
    int nw, ns, niter;
    int k0, k1;              /* the steady-state window of iterations */
    wstate *ws;
    xfer *x;
    int nx, capx, xfree;     /* pool and free list of transfer records */
    link *lk;
    int nlk, caplk;
    port *pt;
    int npt, cappt;
    chan *ch;
    int nch, capch;
    group *gr;
    int ngr, capgr;
    int *gmem, ngmem, capgmem;  /* group members' worker ids (in arrival order) */
    double *bend;            /* all-gather groups' bucket ends (group.bend_off) */
    int nbend, capbend;
    double *gst, *gdu;       /* [capgmem] registered members' last backward start and
                                duration (in registration order, same offsets) */
    htab lh, ph, chh, gh;    /* links, ports, channels, groups */
    int *ar_occ;             /* [nw * ns] all-reduces of the stage seen by the worker */
    int *reg_occ;            /* [nw * ns] all-reduce groups of the stage it registered in */
    double *busy_it, *comm_it; /* [nw * niter] */
    int *dev_track, *coll_track; /* [nw] timeline tracks */
    ring *rg;                /* [ns] rings, or NULL: every ring runs hop by hop */
    ringhop *hop;            /* the rings' hops */
    int *shop;               /* the rings' shared hops (indices into hop) */
    int *ringw;              /* each ring hop's width (sim_net_ring_widths), stage s's hop
                                j at ringoff[s] + j (eng_ring_hop); NULL when no stage
                                all-reduces */
    int *ringoff;            /* [ns + 1] each stage's first hop in ringw */
    heap h;
    int *vbs;                /* [ns] per ring class (ring.cls), its group whose steps repeat
                                (engine_ring.c: its last step started every shared hop
                                virtual and since then nothing but other classes' events
                                ran), or -1 */
    int nvb;                 /* classes with one */
    double now_t;            /* the key (time, sequence number) of the event being run */
    uint32_t now_seq;
    int finished;
    int quiet;               /* 1: a point-to-point transfer that starts with nothing queued
                                behind it on its link or ports moves quietly (no end event
                                unless something queues behind it; engine_comm.c): no ring
                                has shared hops and the model does not ask otherwise */
    plumb_err *err;
} eng;

/* The iteration of microbatch mb (nmb microbatches an iteration), at most niter - 1, or
 * none when mb is no microbatch (< 0) or nmb is 0. *lo and *lo_it remember the first microbatch
 * of the last iteration found and that iteration (start them at 0 and 0): while mb stays
 * in [*lo, *lo + nmb) the answer is one unsigned compare; a division only when it moves on
 * (the engine and sim_steady_window look it up per action; sim_fold per action of the
 * lists it copies). */
static inline int mb_iteration(int mb, int nmb, int niter, int *lo, int *lo_it, int none)
{
    if ((unsigned)mb - (unsigned)*lo < (unsigned)nmb)
        return *lo_it;
    if (mb < 0 || nmb <= 0)
        return none;
    int it = mb / nmb;
    *lo = it * nmb;
    return *lo_it = it >= niter ? niter - 1 : it;
}

static inline int comp_slot(int k)
{
    switch (k) {
    case ACT_F: return SIM_C_F;
    case ACT_B: return SIM_C_B;
    case ACT_I: return SIM_C_I;
    case ACT_W: return SIM_C_W;
    default: return SIM_C_STEP;
    }
}

static inline int tl_of_act(int k)
{
    switch (k) {
    case ACT_F: return TL_F;
    case ACT_B: return TL_B;
    case ACT_I: return TL_I;
    case ACT_W: return TL_W;
    case ACT_SEND_F: return TL_SEND_F;
    case ACT_SEND_B: return TL_SEND_B;
    default: return TL_STEP;
    }
}

/* The key a SEND's transfer is matched by: its microbatch, stage and peer stage (each
 * stage taken as 16 bits). A RECV of stage s from peer stage p, microbatch m, takes the
 * transfer whose key is xfer_match(m, p, s): a stage outside 0..4095 (the action's bits
 * allow -1 and a negative peer stage) never equals a valid one's key. */
static inline uint64_t xfer_match(int mb, int stage, int peer_stage)
{
    return (uint64_t)(uint32_t)mb << 32 | (uint64_t)(uint16_t)stage << 16 |
           (uint16_t)peer_stage;
}

static inline void note_end(eng *E, int iter, double t)
{
    if (t > E->r->iter_end[iter])
        E->r->iter_end[iter] = t;
    if (t > E->r->makespan_s)
        E->r->makespan_s = t;
}

/* Shared helpers (engine.c). Each error helper fills E->err and returns -1. */
int eng_oom(eng *E);
int eng_bad_action(eng *E, int w, int i, const char *what);
/* Makes room for one more element in a growable array of *cap elements (n used): the
 * capacity grows as core/grow.h says (doubling from 64), or -1 (p and *cap unchanged) when
 * memory runs out or the count would pass INT_MAX. 0 or -1. */
int eng_grow(void **p, int n, int *cap, size_t size);
/* eng_grow for an array of 64-byte aligned records (size a multiple of 64) that must
 * start on a cache line: the array is moved to a new aligned block when it grows (free
 * it with free). 0 or -1. */
int eng_grow_lines(void **p, int n, int *cap, size_t size);
/* Appends a timed action to the result's timeline; 0 or -1. */
int eng_record(eng *E, int track, int kind, double start, double dur, double bytes,
               int stage, int peer_stage, int mb, int iter);

/* Communication (engine_comm.c). Each returns 0, or -1 with E->err set. */

/* SEND at t by worker w (its action c, of iteration iter). */
int eng_send(eng *E, int w, int c, int iter, double t);
/* The data of worker w's posted RECV (its action c), needed by its consumer at t: 0 when
 * it has arrived, 1 when taken and on its way (its arrival wakes the worker), 2 when not
 * sent yet (the send wakes the worker), -1 on error. */
int eng_recv(eng *E, int w, int c, double t);
/* Transfer xi released its link and ports at t. */
int eng_xfer_done(eng *E, int xi, double t);
/* ALLREDUCE at t by worker w (its action c): joins its group; the worker goes on when
 * every member has arrived and the ring has reduced every bucket. */
int eng_allreduce(eng *E, int w, int c, int iter, double t);
/* Worker w starts a backward (B or W, action c, duration dur) of stage s at t: when it is
 * the last before the stage's next ALLREDUCE, registers w in that all-reduce's group (its
 * gradient buckets become ready through this backward). */
int eng_backward(eng *E, int w, int c, int s, double t, double dur);
/* Worker w, ready at t to run a forward of stage s lasting dur, where the stage's
 * parameter all-gather runs apart (sim_model.gather_bytes): 0 with *start the time it
 * runs from, or 1 when it waits (the all-gather of its last reduce-scatter is still
 * moving, or its buckets' ends delay the forward: the engine wakes w), -1 on error. The
 * forward reaches bucket k of K at start + k dur / K and needs its all-gather ended then,
 * so it ends at the latest of (ready + dur) and each bucket's end + (K - k) dur / K;
 * *start is that end - dur, which may be before t when w waited for the last bucket. */
int eng_gather_wait(eng *E, int w, int s, double t, double dur, double *start);
/* Event of group gi at t: its next bucket or ring step starts on the ring, or its grouped
 * ring step ends. */
int eng_group_event(eng *E, int gi, double t);
/* The link a_dev -> b_dev (devices differ), created on first use: its index, -1 when out
 * of memory, or -2 with E->err set when the path's rate is below CLUSTER_MIN_BANDWIDTH_Bps
 * or its latency not finite (its transfers would never complete). */
int eng_link_of(eng *E, int a_dev, int b_dev);
/* Queues a hop of group gi's ring step on link li at t (a transfer of `bytes` from worker
 * src_w, `width` lanes wide), started at once when the link is free; counts it in the
 * step's pending hops. 0 or -1. */
int eng_hop_start(eng *E, int gi, int li, int src_w, double bytes, int width, double t);
/* Link li's timeline track, created on first use; -1 when out of memory. */
int eng_link_track(eng *E, int li);
/* The egress ports of a transfer from device a crossing level L (sim_net_path): fills
 * lv[] and grp[] (their level and the sender's group at that level) and returns how
 * many. */
int eng_path_ports(const sim_net *n, int a, int L, int *lv, uint64_t *grp);
/* 1 when stage s's all-reduce moves data (replicas, or one replica's ring of context ranks
 * (eng_ring_solo), gradient bytes and ring time). */
int eng_ring_moves(const eng *E, int s);
/* The context ranks per replica of stage s's data-parallel ring when in model m that ring
 * has more members than schedule sc has replicas (sim_model.ring_members, replicas x cp,
 * with their devices ring_devices): cp, the ring then running over every member's device,
 * each hop sent by its member's replica's worker; 0 when the ring is the replicas'. */
int eng_ring_cp(const sim_model *m, const schedule *sc, int s);
/* 1 when stage s of schedule sc has one replica whose ring runs over its context ranks
 * (eng_ring_cp): the IR has no ALLREDUCE for it (eng_solo_order adds one). */
int eng_ring_solo(const sim_model *m, const schedule *sc, int s);
/* Hops of stage s's ring: its replicas, or its members (eng_ring_cp). */
int eng_ring_nhops(const eng *E, int s);
/* Hop j (< eng_ring_nhops) of stage s's ring: its sending worker *w and the devices it
 * leaves (*da) and reaches (*db): replica j's to replica j + 1's (its workers' devices),
 * or in a members' ring member j's device to member j + 1's (ring_devices), sent by the
 * worker of member j's replica (j / cp). */
void eng_ring_hop(const eng *E, int s, int j, int *w, int *da, int *db);

/* Queues transfer xi at the tail of link li at t and starts it when the link is free
 * (engine_comm.c). 0, or -1 when out of memory. */
int eng_xfer_enqueue(eng *E, int xi, int li, double t);

/* Synchronous point-to-point transfers (engine_sync.c; sim_model.p2p_sync). */

/* Transfer xi, just issued by worker w's SEND at t over link li (>= 0): counted among w's
 * sends in flight, and started (eng_xfer_enqueue) when its receiver has already posted the
 * matching RECV, else held until it does. 0 or -1. */
int eng_sync_send(eng *E, int w, int xi, int li, double t);
/* Worker w posted the RECV at its action c at t: starts the held transfer it matches, if
 * any. 0 or -1. */
int eng_sync_post(eng *E, int w, int c, double t);
/* Transfer xi (a point-to-point one) started: its arrival is known; wakes its sender when
 * that was the last of its sends waited for. 0 or -1. */
int eng_sync_started(eng *E, int xi);
/* Worker w, at t, is about to run a computation: 0 when every send it issued before has
 * been delivered by t; 1 when it must wait (an event wakes it: the last send's start, or
 * the latest arrival); -1 on error. */
int eng_sync_gate(eng *E, int w, double t);

/* The schedule s with each worker's SENDs and RECVs moved to the batch points of a
 * runtime with blocking point-to-point calls (Megatron-LM's schedules): a batch between
 * every two computations, except between the F and the B of a steady-state pair of a
 * chunked (interleaved) schedule; a SEND joins the first batch after the computation that
 * made its data, a RECV the last batch before the computation that takes it; a batch lists
 * its sends, then its receives. The computations keep their order. Fills out (a shallow
 * copy of s with its own action lists; free with eng_sync_order_free). 0, or -1 when out
 * of memory (out then holds nothing to free). */
int eng_sync_order(const schedule *s, schedule *out);
/* What the pre-passes (eng_sync_order, eng_gradsync_order) fill: out a copy of s's fields
 * sharing its len, with its own list of len[w] + 1 actions per worker, unfilled; *maxlen
 * the longest list. 0, or -1 out of memory (nothing left allocated). Free with
 * eng_sync_order_free. */
int eng_order_alloc(const schedule *s, schedule *out, int *maxlen);
void eng_sync_order_free(schedule *out);

/* The schedule s with an ALLREDUCE of stage st put right before each STEP of st on its
 * worker, for every stage whose one replica reduces over its context ranks (eng_ring_solo
 * of model m; the IR has no ALLREDUCE for a stage of one replica): the step waits for that
 * ring as a replicated stage's does (engine_gradsync.c). Fills out as eng_sync_order does,
 * with its own len (free with eng_solo_order_free). 0, or -1 out of memory (out then holds
 * nothing to free). */
int eng_solo_order(const sim_model *m, const schedule *s, schedule *out);
void eng_solo_order_free(schedule *out);

/* The schedule s with each worker's ALLREDUCE and STEP actions of an iteration moved after
 * its last computation of that iteration and the sends that follow it, the all-reduces
 * first, then the steps, each in ascending stage order (engine_gradsync.c;
 * sim_model.grad_sync_end). Fills out as eng_sync_order does (free with
 * eng_sync_order_free). 0, or -1 with err set: out of memory, or a schedule whose
 * iterations overlap on a worker (an asynchronous kind); out then holds nothing to free. */
int eng_gradsync_order(const schedule *s, schedule *out, plumb_err *err);

/* Grouped ring all-reduce (engine_ring.c). */

/* Finds each ring hop's width (E->ringw, when some stage all-reduces) and decides which
 * hops of the stages' rings are private (E->rg; left NULL when no stage
 * all-reduces or the model asks for per-hop rings): no point-to-point transfer and no
 * other hop uses its link, each of its ports has no more lanes in use (the widest use of
 * each link leaving through it) than it has, and its
 * worker sends in no other ring. Such a hop starts with its step, never waits and never
 * delays anything, so a step's private hops can run as one event. 0 or -1 (memory). */
int eng_ring_analyse(eng *E);
/* Starts the current step of group gi at t (the step's pending count held by the caller):
 * each shared hop that would start at once (its link idle with nothing queued, a free
 * lane on each of its ports) as a virtual hop (link.vg), the other shared hops as
 * transfers (eng_hop_start); the private and the virtual hops end as one event at the
 * slowest one's end, counted as one pending hop. The private hops' link statistics and
 * link time are deferred (eng_ring_flush, eng_ring_finish); the virtual hops' are added
 * at once, as a transfer start adds them. Records every hop on its link track as the
 * per-hop ring would. 0 or -1. */
int eng_ring_step(eng *E, int gi, double t);
/* Before anything reads link li's busy state to queue a transfer on it: a virtual hop on
 * it whose end has passed (its key at most the running event's) is released; one still
 * moving becomes a transfer with its own end event (the queued transfer will start at
 * that end). 0 or -1. */
int eng_vlink_touch(eng *E, int li);
/* Releases the virtual hops on port pi whose end has passed. */
void eng_vport_expire(eng *E, int pi);
/* A transfer queues at port pi: its virtual hops (all still moving after
 * eng_vport_expire) become transfers with their own end events. 0 or -1. */
int eng_vport_materialize(eng *E, int pi);
/* A transfer record's index (the free list or a new one; the caller fills it), or -1 when
 * out of memory. */
int eng_xfer_alloc(eng *E);
/* 1 when the grouped end of group gi's current step, now running, may go through
 * eng_ring_chain: its ring's hops are all private, nothing records them, no steps repeat,
 * that end is the step's last pending hop and the bucket has a step after it. */
int eng_ring_chains(const eng *E, int gi);
/* Ends group gi's current step at t as hop_done would (the step's grouped end event is
 * running), then runs the bucket's next steps without posting their events while each
 * event would be the earliest pending one: the engine's loop would run it next, and it
 * posts nothing but the step's next event, so the events run in the same order, with the
 * same keys, count and additions. Posts the first event that would not run next, and the
 * bucket's last step's end. 0 or -1 (memory). */
int eng_ring_chain(eng *E, int gi, double t);
/* Adds worker w's deferred ring link time to comm_it (before any other addition there,
 * keeping the per-hop ring's order of additions). */
void eng_ring_flush(eng *E, int w);
/* Group gi, whose ring has private hops, finished: adds their deferred link time and link
 * statistics. */
void eng_ring_finish(eng *E, int gi);
/* Ends the repetition of group gi's steps, if they repeat: adds what the repeated steps'
 * virtual hops deferred (link statistics, link time, iteration ends, their end keys) as
 * the per-hop ring would have added them. Called when its bucket ends. */
void eng_ring_unbatch(eng *E, int gi);
/* 1 when the event of group gi may run while other groups' steps repeat: gi's own steps
 * repeat, or no group of its ring's class (ring.cls) repeats. */
int eng_ring_independent(const eng *E, int gi);
/* eng_ring_unbatch of every group whose steps repeat: before any event that is not
 * independent (eng_ring_independent), and after the run. */
void eng_ring_unbatch_all(eng *E);
/* s after n additions s = s + v in double precision (round to nearest even), computed in
 * O(log) steps instead of n: bit for bit what the loop gives. */
double eng_add_repeated(double s, double v, long long n);

#endif
