/* eval.h: what the dashboard shows, computed from what the user loaded (a profile and a
 * cluster, or a plan file) and the what-if settings: the resized and re-rated cluster, the
 * re-planned plan, and its simulation (with timeline) and the data-parallel baseline.
 * One call per keypress; no drawing, no terminal. */
#ifndef PLUMB_UI_EVAL_H
#define PLUMB_UI_EVAL_H

#include "core/cluster.h"
#include "core/err.h"
#include "core/plan.h"
#include "core/profile.h"
#include "core/transformer.h"
#include "planner/balance3d.h"
#include "planner/layout3d.h"
#include "planner/search3d.h"
#include "sim/sim.h"
#include "ui/whatif.h"

/* What was loaded. Exactly one of (prof and clus) or (loaded) came from the user; when a
 * plan was loaded, prof and clus are copies of its own. */
struct ui_plan_cache;

/* Which planner re-plans after a what-if. */
typedef enum ui_planner {
    UI_PLANNER_NATIVE = 0,         /* plumb's own (planner/native.h), the default: schedule-
                                      and memory-aware, simulator in the loop */
    UI_PLANNER_PIPEDREAM,          /* PipeDream's partitioner (planner/planner.h) */
    UI_PLANNER_EVEN,               /* the even split (planner_split_plan) */
    UI_PLANNER_N
} ui_planner;

/* "native", "pipedream", "even"; ui_planner_parse returns -1 for an unknown name. */
const char *ui_planner_name(int p);
int ui_planner_parse(const char *name);

/* The runtime settings of a transformer's layouts that `plumb plan --model` takes beside
 * its layout options and sets on the built plan (the others, --p2p, --grad-reduce,
 * --optimizer-state, --attention and --balance, are layout3d_options' own fields). */
typedef struct ui_runtime {
    int tp_overlap;                /* plan_tp_overlap, on every layout with tp > 1 */
    int overlap_param_gather;      /* 1: the parameter all-gather under the forward, on
                                      every zero 1 layout of a synchronous schedule */
    int fp8_param_gather;          /* 1: FP8 primary weights (--fp8-param-gather; needs
                                      precision fp8 and zero 1, which every layout keeps:
                                      the o key to zero 0 is refused) */
} ui_runtime;

/* The runtime check of `plumb plan --model`'s fixed layouts (search3d_runtime_check, the
 * one owner of its rules and messages) for layout options o and runtime rt (NULL: the
 * default) at tensor-parallel degree tp (0: not known yet). 0, or -1 with err set to the
 * option's line ("--tp-overlap: expected --tp 2 or more ..."). */
int ui_runtime_check(const layout3d_options *o, const ui_runtime *rt, int tp, plumb_err *err);

typedef struct ui_base {
    profile *prof;                 /* owned */
    cluster *clus;                 /* owned: the cluster as loaded (before what-ifs) */
    plan *loaded;                  /* owned, or NULL: the plan file opened; its stages are
                                      kept while the GPU count and the schedule's chunking
                                      stay as written */
    char *source;                  /* what the title shows: "vgg16.json + cluster-a.json" */
    int planner;                   /* ui_planner (default native) */
    struct ui_plan_cache *cache;   /* owned: planner answers by the what-ifs that shape
                                      them, so undo and repeated keys never re-plan */
    transformer *model;            /* owned, or NULL: a transformer that every what-if lays
                                      out again with layout3d_build (ui_base_load_model) */
    layout3d_options lopt;         /* the layout it was opened with: global batch,
                                      precision, sequence length, checkpoint interval;
                                      every what-if lays out and is checked as it with its
                                      own settings put in (ui_whatif_layout3d) */
    layout3d_dims dims;            /* that layout's resolved dimensions */
    search3d_options rt;           /* the layout as opened and its runtime, as `plumb plan
                                      --model` checks it: the runtime keys start from it
                                      (ui_base_whatif); its gradient and optimizer-state
                                      precision and balance ride every layout */
    char *cluster_file;            /* the cluster's path, for layout3d's messages */
    char *pipeline_layout;         /* owned, or NULL: a plan file's --pipeline-layout, which
                                      lopt.pipeline_layout points at */
} ui_base;

/* Loads the base: a plan file (plan_path != NULL), or a profile and a cluster. A plan file
 * that names its model (plan.model: written by plumb plan --model) becomes the base of that
 * transformer on the file's cluster as ui_base_load_model makes it, under the options
 * layout3d_options_from_plan reads and the file's runtime (tp overlap, the all-gather
 * apart, FP8 primary weights); b->loaded is then NULL, b->cluster_file the plan's path.
 * Returns 0, or -1 with err set ("FILE: FIELD.PATH: ...", "FILE: model: ..." for a model
 * whose layout is refused or, unbalanced, does not give the file's stages); b is then empty
 * (safe to free). */
int ui_base_load(ui_base *b, const char *profile_path, const char *cluster_path,
                 const char *plan_path, plumb_err *err);
void ui_base_free(ui_base *b);

/* Loads a transformer (model_path: Hugging Face config.json or plumb-transformer/1) and a
 * cluster, checks the runtime rt (NULL: the default) at the layout's resolved tp as `plumb
 * plan --model` does (ui_runtime_check), and lays the model out under o (layout3d_build)
 * once, to check the layout and give the base its profile (prof: that layout's). The
 * what-ifs start from rt and o's p2p and attention (ui_base_whatif; the keys change
 * them), and every layout gets o's gradient and optimizer-state precision and balance.
 * Returns 0, or -1 with err set to the file's, the runtime's or the layout's one line (b
 * is then empty). */
int ui_base_load_model(ui_base *b, const char *model_path, const char *cluster_path,
                       const layout3d_options *o, const ui_runtime *rt, plumb_err *err);

/* 1 when b is a plan file of a transformer's layout that does not name its model (its
 * profile a transformer's analytic profile, or one rank's share of tp or cp ranks; a file
 * with its model opens as a model base): a what-if that re-plans it is refused
 * (ui_replan: the file does not name its model, and the other planners would drop its
 * precision, its 3D runtime and its layout), and the dashboard rejects that key. */
int ui_base_layout_file(const ui_base *b);

/* The settings the base starts from: its GPU count, the plan's schedule, microbatches and
 * recomputation (a transformer: its layout's dimensions, microbatch size, interleave,
 * recompute kind, sequence parallelism and ZeRO, and its runtime: tp overlap, the
 * all-gather apart, p2p, attention, FP8 primary weights; or, from a profile: 1f1b-flush, pipedream for
 * PipeDream's partitioner, and microbatches 0 = "the planner chooses"; the app adopts the
 * planner's choice; a plan file: its schedule, microbatches, recomputation and runtime:
 * "p2p", "grad_sync", "overlap_param_gather", "fp8_param_gather"),
 * bandwidths as given, no memory limit, no straggler. */
void ui_base_whatif(const ui_base *b, ui_whatif *w);

/* When the base cluster has more devices than the dashboard shows (UI_MAX_GPUS), writes
 * one sentence saying so into buf and returns 1; else returns 0 and buf is "". */
int ui_base_cut_note(const ui_base *b, char *buf, size_t n);

/* The base cluster resized to w->ngpus devices by planner_cluster_resize (the rule
 * `plumb sweep` uses; devices beyond w->ngpus, if the resize makes any, stay idle: the
 * dashboard plans on the first w->ngpus) with each level's bandwidth (and egress) scaled by
 * 2^bw_exp. NULL with err when the count is out of range. */
cluster *ui_cluster_whatif(const cluster *base, const ui_whatif *w, plumb_err *err);

/* A computed frame of figures. */
typedef struct ui_result {
    plan *pl;                      /* the plan evaluated, or NULL (see err) */
    sim_report *rep;               /* its simulation with timeline, or NULL */
    sim_options opt;               /* the options it was simulated with */
    double dp_samples_per_s;       /* data parallelism on the same devices; 0: it does not
                                      fit memory; < 0: unknown */
    const char *origin;            /* "plan file", "planner", "even split" */
    double eval_ms;                /* wall time of plan + simulation */
    double plan_ms;                /* of which the partitioner ran (0 when cached) */
    int reused;                    /* 1: kept from an earlier visit of the same settings
                                      (eval_ms is that visit's) */
    char note[PLUMB_ERR_MAX];      /* why the planner's answer was not used ("" = it was) */
    char err[PLUMB_ERR_MAX];       /* why pl or rep is missing ("" when both are there) */
    int balanced;                  /* 1: a transformer's layout under --balance: pl's stages
                                      are what layout3d_balance kept, rep its run */
    layout3d_balance_result balance; /* what balancing found (when balanced) */
} ui_result;

/* Re-plans and re-simulates (a transformer's layout with the base's runtime, and under
 * --balance balanced as `plumb plan --model --balance` balances it, then simulated again).
 * Always fills r (freeing what it held first); returns 0, or -1 when the plan or the
 * simulation failed (r->err says why, and what did succeed stays). */
int ui_evaluate(const ui_base *b, const ui_whatif *w, ui_result *r);
void ui_result_free(ui_result *r);

/* The plan for w on clus (already what-if'ed): with a transformer (b->model), its layout
 * by layout3d_build under w's tp, pp, dp, microbatch size, interleave, schedule, recompute
 * kind, sequence parallelism, ZeRO, p2p and attention on the first w->ngpus devices, with
 * w's tp overlap and all-gather apart where the layout takes them (search3d_apply_runtime)
 * and b->rt's other runtime (err: layout3d's one line); else the
 * loaded plan as written while the GPU count and the schedule's chunking stay as the file
 * has them; else, for a plan file of a transformer's layout (ui_base_layout_file), NULL
 * with err naming the plumb plan / ui --model command that lays it out; else a new plan
 * from b's
 * planner: the native planner (planner_native with w's schedule, microbatches,
 * recomputation and memory limit; zb-v, which it does not plan, gets the even split),
 * PipeDream's partitioner (memory limit as its memory constraint; one stage per device, so
 * interleaved and zb-v get the even split), or the even split. When the planner finds no
 * plan (nothing fits memory), the even split stands in and *note says why (the planner's
 * message, with what would fit); *note is "" otherwise. The planners and the even split
 * plan on the first w->ngpus devices (PipeDream's partitioner, which takes whole levels,
 * only when that is all of clus). The microbatch count is planner_microbatches of
 * w->microbatches (0: the native planner's own choice, or its default rule for the stages
 * of any other origin). Every plan gets w's p2p and grad-sync (a plan file's runtime),
 * and w's FP8 primary weights where it is fp8 with ZeRO 1 (the file's
 * "fp8_param_gather": the native planner ranks without them, the plan shown runs with
 * them); the parameter all-gather apart stays with the file's own stages (ZeRO-1's). *origin says
 * where the stages came from; the partitioner's time is added to *plan_ms. NULL with err. */
plan *ui_replan(const ui_base *b, const cluster *clus, const ui_whatif *w, const char **origin,
                double *plan_ms, char *note, size_t note_n, plumb_err *err);

/* Samples/s of plain data parallelism (not computed for tensor-parallel plans, whose
 * profile holds one rank's share: -1) on the first ndev devices of pl's cluster
 * (planner_dp_plan: one stage holding every layer, 1f1b-flush, pl's microbatch size,
 * microbatches rounded up to a multiple of the devices), same straggler and memory options.
 * 0 when that does not fit the devices' memory (or the limit), -1 on failure. */
double ui_dp_samples_per_s(const plan *pl, int ndev, const sim_options *opt);

#endif
