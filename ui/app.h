/* app.h: the dashboard as one object: what was loaded, the what-if state machine, the live
 * and pinned evaluations, the one-line message, and where `s` and `e` write. The terminal
 * front end (ui/tui.c) and the snapshot mode both feed it keys and draw it into a frame
 * buffer (ui/draw.c), so they show the same frames. */
#ifndef PLUMB_UI_APP_H
#define PLUMB_UI_APP_H

#include "core/err.h"
#include "ui/eval.h"
#include "ui/fb.h"
#include "ui/whatif.h"

/* A transformer's evaluated layouts kept for a revisit (undo, redo, a toggle back): each
 * costs a simulation of up to a few hundred ms at 1024 GPUs, and a revisit none. */
#define UI_KEPT_RESULTS 8

/* The longest trace `e` (export) writes: 1 GiB, `plumb sim --trace-limit`'s default. */
#define UI_TRACE_LIMIT_BYTES 1073741824.0

typedef struct ui_kept {
    int used;
    long long stamp;               /* last use, for replacement */
    ui_whatif w;                   /* the settings r was evaluated for */
    ui_result r;                   /* owned */
} ui_kept;

struct ui_worker;                  /* ui/app_async.c */

typedef struct ui_app {
    int loaded;                    /* 1: base holds a profile and cluster (or a plan) */
    ui_base base;
    char load_err[PLUMB_ERR_MAX];  /* why loading failed (shown in the UI) */
    ui_state *st;                  /* owned (large: the undo stacks) */
    ui_result cur;                 /* the live plan and its simulation */
    ui_result pin;                 /* the pinned one (when st->pinned) */
    char msg[PLUMB_ERR_MAX + 64];  /* one-line note for the status line ("" = none) */
    int msg_err;                   /* 1: msg is an error */
    char out_dir[512];             /* where s and e write */
    double key_ms;                 /* wall time of the last key: re-plan, re-sim, redraw */
    ui_whatif cur_w;               /* the settings `cur` was evaluated for (a transformer) */
    ui_whatif pin_w;               /* and `pin` */
    long long kept_clock;
    ui_kept kept[UI_KEPT_RESULTS]; /* a transformer's earlier layouts, by their settings */
    struct ui_worker *worker;      /* owned, or NULL: lays a transformer out in the
                                      background (ui_app_async_start) */
    int pending;                   /* 1: the live settings are being laid out there; `cur`
                                      still shows the layout before */
    double trace_limit_bytes;      /* `e` refuses a trace longer than this (nothing
                                      written); 0: UI_TRACE_LIMIT_BYTES */
} ui_app;

/* Opens the dashboard on a plan file (plan_path) or a profile and cluster, re-planning
 * with `planner` (ui_planner). A file that fails to load is not fatal: the UI shows
 * load_err. out_dir (NULL = ".") receives saved plans and exports. Returns 0, or -1 when
 * out of memory. */
int ui_app_open(ui_app *a, const char *profile_path, const char *cluster_path,
                const char *plan_path, const char *out_dir, int planner);

/* Opens the dashboard on a transformer laid out in 3D (ui_base_load_model: model file,
 * cluster file, layout options o, runtime rt or NULL for the default), with the 3D what-if
 * keys (ui_whatif3d_key). Returns 0; -1 with err set when a file, the runtime or the layout
 * is refused (a is then freed: nothing to show), or when out of memory. */
int ui_app_open_model(ui_app *a, const char *model_path, const char *cluster_path,
                      const layout3d_options *o, const ui_runtime *rt, const char *out_dir,
                      plumb_err *err);
void ui_app_free(ui_app *a);

/* Feeds one key (UI_KEY_* or ASCII): updates the state, re-plans and re-simulates the live
 * and pinned what-ifs as needed, saves or exports. With a transformer, a what-if whose
 * layout is refused (layout3d_build) or cannot be simulated is rejected: the settings and
 * the plan shown stay, and the message says why. Returns the UI_DO_* flags of the key
 * (the caller quits on UI_DO_QUIT). */
int ui_app_key(ui_app *a, int key);

/* A transformer's layouts in the background (the terminal front end): after
 * ui_app_async_start, a key whose layout is neither shown nor kept posts its settings to
 * one worker thread (a newer key replaces a job not yet started) and returns at once with
 * a->pending set; ui_app_poll takes the worker's answer when it is there (the layout, or
 * the key rejected with its reason, as ui_app_key does without a worker; an answer for
 * settings the keys have left since is kept for a revisit) and returns 1 when the screen
 * changed; ui_app_wait blocks until the live settings are laid out (save and export wait
 * so). The worker reads only a->base, which nothing changes while it runs. Start returns
 * 0, or -1 (no thread: everything stays synchronous); without a transformer it does
 * nothing. Stop (also done by ui_app_free) ends the thread: joined when idle; when a layout
 * is in progress the thread is detached to finish it alone and a->base becomes the
 * thread's (a->base is then empty: stop only to quit). */
int ui_app_async_start(ui_app *a);
void ui_app_async_stop(ui_app *a);
int ui_app_poll(ui_app *a);
void ui_app_wait(ui_app *a);

/* 1 while the worker evaluates the newest settings posted to it (it has taken the job and
 * none waits behind it), else 0 (also without a worker). Lets a caller act while a layout
 * is in progress without guessing how long one takes (the tests). */
int ui_app_async_evaluating(ui_app *a);

/* For ui/app_async.c: posts a->st->cur to the worker (0, or -1 when there is none);
 * takes a result r for a->st->cur (moved out of r) or, when r has no report and undo is 0,
 * rejects the key with r's reason (ui_app_key's rule), returning 1 when taken; keeps r,
 * evaluated for w, for a revisit (moved out of r). */
int ui_app_async_post(ui_app *a);
int ui_app_take(ui_app *a, ui_result *r, int undo);
void ui_app_keep(ui_app *a, const ui_whatif *w, ui_result *r);

/* Draws the whole screen into fb (its size is the screen's). */
void ui_app_draw(ui_app *a, ui_fb *fb);

/* Parses a --keys string: each character is a key, and <name> is a special key: <up>
 * <down> <left> <right> <pgup> <pgdn> <home> <end> <esc> <tab> <enter> <space> <lt> (a
 * literal '<'), <C-c>, <C-r>, <resize>. Writes at most max keys; returns the count, or -1
 * with err set on an unknown name. */
int ui_keys_parse(const char *spec, int *keys, int max, plumb_err *err);

/* The frame after `keys` (may be NULL), w x h, as plain text (ui_fb_text_dump). Returns a
 * string the caller frees, or NULL when out of memory. */
char *ui_app_snapshot(ui_app *a, int w, int h, const int *keys, int nkeys);

/* The file stem s and e use: "<out_dir>/<model>-<gpus>gpu-<schedule>". */
void ui_app_stem(const ui_app *a, char *buf, size_t n);

#endif
