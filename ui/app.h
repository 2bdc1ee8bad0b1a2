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

typedef struct ui_kept {
    int used;
    long long stamp;               /* last use, for replacement */
    ui_whatif w;                   /* the settings r was evaluated for */
    ui_result r;                   /* owned */
} ui_kept;

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
    long long kept_clock;
    ui_kept kept[UI_KEPT_RESULTS]; /* a transformer's earlier layouts, by their settings */
} ui_app;

/* Opens the dashboard on a plan file (plan_path) or a profile and cluster, re-planning
 * with `planner` (ui_planner). A file that fails to load is not fatal: the UI shows
 * load_err. out_dir (NULL = ".") receives saved plans and exports. Returns 0, or -1 when
 * out of memory. */
int ui_app_open(ui_app *a, const char *profile_path, const char *cluster_path,
                const char *plan_path, const char *out_dir, int planner);

/* Opens the dashboard on a transformer laid out in 3D (ui_base_load_model: model file,
 * cluster file, layout options o), with the 3D what-if keys (ui_whatif3d_key). Returns 0;
 * -1 with err set when a file or the layout is refused (a is then freed: nothing to show),
 * or when out of memory. */
int ui_app_open_model(ui_app *a, const char *model_path, const char *cluster_path,
                      const layout3d_options *o, const char *out_dir, plumb_err *err);
void ui_app_free(ui_app *a);

/* Feeds one key (UI_KEY_* or ASCII): updates the state, re-plans and re-simulates the live
 * and pinned what-ifs as needed, saves or exports. With a transformer, a what-if whose
 * layout is refused (layout3d_build) or cannot be simulated is rejected: the settings and
 * the plan shown stay, and the message says why. Returns the UI_DO_* flags of the key
 * (the caller quits on UI_DO_QUIT). */
int ui_app_key(ui_app *a, int key);

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
