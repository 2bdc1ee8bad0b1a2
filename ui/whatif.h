/* whatif.h: the dashboard's state machine, apart from any drawing or simulating: the
 * what-if settings (GPU count, per-level bandwidth, schedule, microbatches, memory limit,
 * straggler, recomputation), the pinned settings, the undo/redo stacks, and the view
 * (selected level and device, timeline zoom and scroll, help). Keys go in, and a set of
 * UI_DO_* flags comes out telling the caller what to do (re-evaluate, save, quit ...).
 * Key codes are plumb's own (UI_KEY_*), so this module needs no ncurses. */
#ifndef PLUMB_UI_WHATIF_H
#define PLUMB_UI_WHATIF_H

#include "core/cluster.h"
#include "core/plan.h"
#include "planner/layout3d.h"
#include "planner/search3d.h"

/* Keys that are not plain ASCII. */
enum {
    UI_KEY_UP = 0x1000, UI_KEY_DOWN, UI_KEY_LEFT, UI_KEY_RIGHT,
    UI_KEY_PGUP, UI_KEY_PGDN, UI_KEY_HOME, UI_KEY_END,
    UI_KEY_RESIZE,
    UI_KEY_ESC = 27,
    UI_KEY_CTRL_C = 3,
    UI_KEY_CTRL_R = 18,
};

#define UI_MAX_GPUS 4096           /* as plumb sweep; a larger loaded cluster is cut (and
                                     the status line says so) */
#define UI_MAX_MICROBATCHES 1024
#define UI_MAX_BW_EXP 10          /* bandwidth factors from 2^-10 to 2^10 */
#define UI_MAX_ZOOM 12            /* the timeline shows down to 1/2^12 of the run */
#define UI_UNDO_MAX 256
#define UI_RECOMPUTE_AUTO (-1)

/* What the plan and simulation are asked to be. */
typedef struct ui_whatif {
    int ngpus;                       /* devices of the (resized) cluster, >= 1 */
    int bw_exp[CLUSTER_MAX_LEVELS];  /* level L's bandwidth = the base's x 2^bw_exp[L] */
    int schedule;                    /* sched_kind */
    int microbatches;                /* per iteration, >= 1 */
    double mem_limit_bytes;          /* > 0: each device's memory capped here; 0 = off */
    int straggler;                   /* device whose compute is slowed, or -1 */
    double straggler_factor;         /* its compute times x this (> 1) */
    int recompute;                   /* 1: activations recomputed in backward; 0: kept;
                                        UI_RECOMPUTE_AUTO: the native planner tries both
                                        (other plans keep theirs, else off); a 3D layout:
                                        its recompute_kind (none, full, selective) */
    /* a transformer's 3D layout (ui_state.layout3d; 0 otherwise): ngpus = tp x cp x pp x
     * dp */
    int tp, pp, dp;                  /* tensor-parallel ranks, pipeline ranks, replicas */
    int cp;                          /* context-parallel ranks, >= 1 (plumb plan --model's
                                        --cp) */
    int mbs;                         /* sequences per microbatch */
    int interleave;                  /* virtual stages per pipeline rank */
    int ckpt;                        /* full recomputation's checkpoint interval
                                        (--checkpoint-layers: every ckpt-th block's input
                                        kept; 0: the stage's input alone), >= 0; used only
                                        with recompute full */
    int seqpar;                      /* 1: sequence parallelism */
    int zero;                        /* 0, or 1: the optimizer state sharded over replicas */
    /* its runtime (`plumb plan --model`'s --tp-overlap, --overlap-param-gather, --p2p,
     * --grad-sync, --attention): asked of every layout; tp_overlap and opg are set where the
     * layout takes them (search3d_apply_runtime: tp > 1; zero 1 on a synchronous schedule). The
     * 2D view: a plan file's opg, p2p_sync and grad_sync_end, kept by every what-if */
    int tp_overlap;                  /* plan_tp_overlap */
    int opg;                         /* 1: the parameter all-gather under the forward */
    int p2p_sync;                    /* 1: blocking point-to-point transfers */
    int grad_sync_end;               /* 1: the gradients reduced after the whole loop
                                        (--grad-sync end; n/a on an asynchronous kind) */
    int attention;                   /* llm_attention: standard or flash */
    int fp8pg;                       /* 1: FP8 primary weights (--fp8-param-gather, the
                                        file's "fp8_param_gather"); no key changes it, and
                                        a 3D key that would leave fp8 or ZeRO 1 is refused
                                        with plan --model's line */
} ui_whatif;

/* How things are shown; not part of undo. */
typedef struct ui_view {
    int level;                       /* cluster level the bandwidth keys change */
    int device;                      /* selected device id: timeline cursor, straggler
                                        target */
    int top;                         /* first timeline row shown (a row index) */
    int zoom;                        /* the timeline spans makespan / 2^zoom */
    double offset;                   /* left edge, as a fraction of the makespan, [0, 1) */
    int help;                        /* 1: the help overlay is open */
} ui_view;

/* One undo step: everything a what-if key can change. */
typedef struct ui_snap {
    ui_whatif cur;
    int pinned;
    ui_whatif pin;
} ui_snap;

typedef struct ui_state {
    ui_whatif cur;                   /* the live settings */
    int pinned;                      /* 1: `pin` is shown beside the live plan */
    ui_whatif pin;
    ui_view view;
    /* facts of the base cluster the keys need */
    int nlevels;                     /* levels of the cluster */
    int per_server;                  /* its level-0 count: GPU counts are divisors of it or
                                        multiples of it */
    double device_memory;            /* largest device memory, bytes (memory-limit steps) */
    int layout3d;                    /* 1: the what-ifs lay out a transformer (tp, pp, dp,
                                        microbatch size, interleave, recompute kind,
                                        sequence parallelism, ZeRO keys) */
    int layers;                      /* its blocks: pp x interleave must divide them
                                        (an uneven split: ui_split_ok) */
    int global_batch;                /* its sequences per iteration: dp x mbs divides it */
    long long window;                /* its sliding window (0: none): cp stays 1 where it is
                                        shorter than lopt.seq (llm_window_cp_check) */
    layout3d_options lopt;           /* the layout opened (ui_base.lopt, its seq the
                                        tokens laid out): each 3D what-if lays out as it
                                        with its own settings put in (ui_whatif_layout3d)
                                        and is checked so */
    search3d_options plan_rt;        /* the 2D view's plan file as its runtime is checked
                                        (ui_state_set_plan; every setting free without a
                                        file): ui_runtime2d_check puts each what-if's
                                        schedule and runtime in */
    char note[256];                  /* why the last 3D key could not move ("" = it did) */
    int nrows;                       /* timeline rows: the devices the live plan uses ... */
    int row_device[UI_MAX_GPUS];     /* ... their ids, ascending (0 rows: 0..ngpus-1) */
    int undo_n, redo_n;
    ui_snap undo[UI_UNDO_MAX];       /* oldest first; full stacks drop their oldest entry */
    ui_snap redo[UI_UNDO_MAX];
} ui_state;

/* What the caller must do after a key (flags). */
enum {
    UI_DO_REDRAW = 1,                /* the view changed */
    UI_DO_EVAL = 2,                  /* the live what-if changed: re-plan and re-simulate */
    UI_DO_EVAL_PIN = 4,              /* the pinned what-if changed */
    UI_DO_SAVE = 8,                  /* save the live plan as JSON */
    UI_DO_EXPORT = 16,               /* export report, trace and SVG */
    UI_DO_QUIT = 32,
    UI_DO_NOTHING_TO_UNDO = 64,      /* `u` / redo with an empty stack */
};

/* Sets st to start from `initial` on a cluster described by the other arguments. */
void ui_state_init(ui_state *st, const ui_whatif *initial, int nlevels, int per_server,
                   double device_memory);

/* Applies one key; returns UI_DO_* flags (0: the key means nothing here). */
int ui_state_key(ui_state *st, int key);

/* Switches st to the 3D layout keys of a transformer with `layers` blocks and a global
 * batch of `global_batch` sequences (st->cur must hold a layout that satisfies
 * ui_layout3d_ok), opened as lopt (copied; NULL: layout3d_options_init's with that global
 * batch), which ui_layout3d_check checks each what-if as. */
void ui_state_set_layout3d(ui_state *st, int layers, int global_batch,
                           const layout3d_options *lopt);

/* The 2D view's plan file pl (NULL: none, a profile planned on a cluster): its settings
 * (search3d_options_from_plan, the plan as written) into st->plan_rt, which
 * ui_runtime2d_check checks every what-if under. pl is not kept. */
void ui_state_set_plan(ui_state *st, const plan *pl);

/* Undoes the last what-if key without keeping it for redo: the caller found that its
 * settings have no plan (a 3D layout that layout3d_build refuses). Returns UI_DO_* flags
 * for going back (0 when there is nothing to undo). */
int ui_state_reject(ui_state *st);

/* 1 when w is a 3D layout the keys may reach on st: tp divides a server, pp x interleave
 * divides the layers (an uneven split: ui_split_ok), tp x cp x pp x dp = ngpus is a GPU count
 * ui_gpu_step allows, dp x mbs divides the global batch, and the interleave is within the
 * schedule's chunks. The remaining checks (heads, memory) are layout3d_build's and the
 * simulator's. */
int ui_layout3d_ok(const ui_state *st, const ui_whatif *w);

/* 1 when the pipeline of what-if w (pp x interleave virtual stages, its schedule) can split
 * st's blocks as the layout opened splits them: evenly, pp x interleave dividing them; or by
 * Megatron-Core's uneven split that st->lopt carries (first / last counts, the accountings, a
 * layout string: layout3d_split's rules, a schedule placing virtual stage k on rank k % pp; a
 * layout string's pp x interleave is its stage count, so no pp or interleave other than the
 * opened ones passes). Else 0 with the rule's one line in why (n > 0: always terminated; "" for
 * the even split). What ui_layout3d_ok asks of the pipeline. */
int ui_split_ok(const ui_state *st, const ui_whatif *w, char *why, size_t n);

/* Which of the settings a layout takes only where it can are checked as asked. */
enum { UI_ASK_TP_OVERLAP = 1, UI_ASK_OPG = 2 };

/* The layout options of what-if w on the layout opened as base (its global batch, precision,
 * sequence length, checkpoint interval, state precisions, balance): w's GPU count, tp, pp, dp,
 * cp, microbatch size, interleave, schedule, recompute kind (the checkpoint interval only with
 * full, else -1), sequence parallelism, ZeRO, p2p, grad-sync and attention. What the dashboard
 * lays out (ui/eval.c) and checks (ui_layout3d_check). */
layout3d_options ui_whatif_layout3d(const layout3d_options *base, const ui_whatif *w);

/* The runtime check of what-if w on st (search3d_runtime_check, the one owner of its
 * rules and lines) as `plumb plan --model` checks the fixed layout w lays out: the
 * search options of ui_whatif_layout3d(&st->lopt, w) (search3d_options_from_layout) with
 * w's tp_overlap and opg where `asked` (UI_ASK_* flags: the key that changes them) names
 * them, and opg too where the layout takes it (ZeRO 1, a synchronous schedule) under
 * grad-sync end; otherwise a layout takes them where it can and shows them n/a elsewhere
 * (search3d_apply_runtime). 0, or -1 with the check's one line in why (n > 0: always
 * terminated). */
int ui_layout3d_check(const ui_state *st, const ui_whatif *w, int asked, char *why, size_t n);

/* The runtime check of the 2D view's what-if w on st: the plan file's settings
 * (st->plan_rt: search3d_options_from_plan, as `plumb sim` checks its what-ifs) with w's
 * schedule and the runtime w carries (the file's "p2p", "grad_sync" and
 * "overlap_param_gather", which every what-if keeps: w->p2p_sync, w->grad_sync_end,
 * w->opg) put in, by search3d_runtime_check, the one owner of the rules (p2p sync not on
 * zb-v or dualpipev, grad-sync end and the all-gather apart not on pipedream or 2bw).
 * 0, or -1 with the check's line in why (n > 0: always terminated). The 2D view's c C
 * pass by the kinds it refuses. */
int ui_runtime2d_check(const ui_state *st, const ui_whatif *w, char *why, size_t n);

/* The 3D keys (ui/whatif3d.c), applied to st->cur: g G tensor-parallel ranks, d D
 * pipeline ranks, v V context-parallel ranks (all three keep the GPU count: dp follows;
 * tp and cp only to values where ui_cp_applies), w W + - replicas (the GPU count
 * follows), n N microbatch size up / down (m M: microbatches up / down, the size the
 * other way), i I interleave, r recompute none -> selective -> full, a sequence
 * parallelism, o ZeRO, c C schedule (the interleave follows its chunks; kinds the runtime
 * check refuses, zb-v and dualpipev under p2p sync, are skipped). Each steps to the
 * nearest value that keeps ui_layout3d_ok; where none does, st->note says why and nothing
 * changes. The runtime keys: k K tp overlap none -> backward -> full (K the other way), j
 * the parameter all-gather under the forward on / off, y p2p overlap / sync, E the
 * gradient reduction overlapped / at the end (grad-sync), f attention standard / flash
 * (standard at cp > 1 is layout3d_build's to refuse, with plan --model's line). Every
 * change is checked (ui_layout3d_check; k K and j ask for their setting): refused, the
 * check's line is st->note and nothing changes. Returns 1 when the key is one of these,
 * else 0. */
int ui_whatif3d_key(ui_state *st, int key);

/* 1 when cp context-parallel ranks apply to what-if w on st (cp 1 always does): the attention
 * is flash, 2 cp divides the sequence (st->lopt.seq; 0: not known, not checked) and tp x cp
 * divides a server (st->per_server): llm_cp_check, which plumb plan --model's search reads for
 * the cp it tries too (planner/search3d.c: cp_ok; any cp >= 1 here, not only 2, 4, 8), and the
 * model's sliding window (st->window) is not shorter than the sequence (llm_window_cp_check).
 * Else 0 with why (n > 0: always terminated) naming the first rule it breaks. */
int ui_cp_applies(const ui_state *st, const ui_whatif *w, int cp, char *why, size_t n);

/* The GPU count one step up (dir > 0) or down from n: the next valid count above or below
 * n (valid: divides per_server or is a multiple of it; at most UI_MAX_GPUS), so that
 * beyond one server each step adds or removes one server. Returns n itself when there is
 * no step that way. */
int ui_gpu_step(int n, int per_server, int dir);

/* 1 when n is a GPU count the keys may reach: 1 to UI_MAX_GPUS, dividing per_server or a
 * multiple of it. */
int ui_gpu_count_ok(int n, int per_server);

/* The memory limit one step tighter (dir < 0) or looser from `cur` (0 = off), over steps of
 * 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192 GiB below device_memory; looser
 * than the largest step is off. */
double ui_mem_step(double cur, double device_memory, int dir);

/* The straggler factors `T` cycles through. */
double ui_straggler_next(double f);

/* 1 when the two settings are equal. */
int ui_whatif_equal(const ui_whatif *a, const ui_whatif *b);

/* Tells the state which devices the timeline rows show (ids ascending, n <= UI_MAX_GPUS),
 * so that Up and Down move between them; the selected device snaps to a shown one. */
void ui_state_set_rows(ui_state *st, const int *ids, int n);

/* The row of device id `dev` among ids[0..n-1] (ascending): its index, or the nearest
 * row below it (0 when none). */
int ui_row_of(const int *ids, int n, int dev);

/* Keeps the view inside a timeline of n rows (device ids ascending) of which `rows` show:
 * the selected device snaps to a shown one and its row stays visible. */
void ui_view_follow(ui_view *v, const int *ids, int n, int rows);

#endif
