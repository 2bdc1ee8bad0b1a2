/* layout.h: where each panel of the dashboard goes, as a pure function of the screen size
 * and of how many rows the content wants. No ncurses here: the same layout places the
 * windows of the terminal front end and the regions of a --snapshot frame, and the unit
 * tests check it (no overlap, everything inside the screen) for every size from 80x24 to
 * 300x100. */
#ifndef PLUMB_UI_LAYOUT_H
#define PLUMB_UI_LAYOUT_H

#include <stddef.h>

#define UI_MIN_W 80
#define UI_MIN_H 24
#define UI_WIDE_W 160        /* from this width the pinned plan's stages sit beside the live */
#define UI_TALL_H 50         /* from this height the pinned plan's timeline gets its own panel */

typedef struct ui_rect {
    int x, y, w, h;          /* a rect with w == 0 or h == 0 is absent */
} ui_rect;

typedef struct ui_layout_in {
    int width, height;       /* screen size in cells */
    int nstages;             /* stage rows the live plan has (0 when there is no plan) */
    int ndevices;            /* timeline rows (devices) the live plan has */
    int pinned;              /* 1: a pinned plan is shown beside the live one */
    int help;                /* 1: the help overlay is open */
    int help_rows;           /* lines of help text */
    int runtime;             /* 1: the header has a row for the runtime settings (a
                                transformer's layouts, plumb ui --model; a plan file's
                                p2p, grad_sync or overlap_param_gather when not the
                                default) */
} ui_layout_in;

typedef struct ui_layout {
    int too_small;           /* screen below UI_MIN_W x UI_MIN_H: only `message` is set */
    ui_rect header;          /* figures: title, live (pinned and difference), what-ifs */
    ui_rect stages;          /* the live plan's stage table (a box) */
    ui_rect pstages;         /* the pinned plan's stage table, beside it (absent if narrow) */
    ui_rect timeline;        /* the live pipeline timeline (a box) */
    ui_rect ptimeline;       /* the pinned plan's timeline below it (absent unless tall) */
    ui_rect status;          /* the last row: keys and messages */
    ui_rect help;            /* the help overlay (absent when closed); covers the panels */
    ui_rect message;         /* too_small: the whole screen for the "too small" note */
} ui_layout;

/* Rows of the header: 3 (title, figures, what-ifs), 5 when pinned (pinned figures and
 * their difference too); one more for the runtime settings when runtime is 1. */
int ui_layout_header_rows(int pinned, int runtime);

/* Computes the layout. Always succeeds; a screen smaller than the minimum gets too_small
 * and one message rect (absent when the screen has no cells). Panels never overlap one
 * another (the help overlay excepted), all lie inside the screen, and together with the
 * header and status they tile every row. */
void ui_layout_compute(const ui_layout_in *in, ui_layout *out);

/* One key of the status line: its full label ("k/K tp-overlap") and a brief one ("kK tpo")
 * for narrow screens. */
typedef struct ui_key_label {
    const char *full, *brief;
} ui_key_label;

/* The keys of the status line, most useful first: the 2D view's (layout3d 0) or a
 * transformer's 3D layout's (1). The first two are "q quit" and "? help". Sets *n to their
 * count; the table is static. */
const ui_key_label *ui_layout_keys(int layout3d, int *n);

/* The status line's keys for `width` cells into buf (always terminated when bufn > 0):
 * the longest prefix of keys[0..n-1] whose brief labels fit, two spaces apart, in their
 * full labels when those fit too (all full or all brief). Every key shown
 * is whole; none past the first left out. Returns the count shown (0 when not even the
 * first fits; fewer when buf is too small, buf then ending after a whole key). */
int ui_layout_keys_line(const ui_key_label *keys, int n, int width, char *buf, size_t bufn);

/* 1 when r is present (w > 0 and h > 0). */
int ui_rect_present(ui_rect r);
/* 1 when two present rects share a cell. */
int ui_rect_overlap(ui_rect a, ui_rect b);
/* 1 when r lies inside a w x h screen. */
int ui_rect_inside(ui_rect r, int w, int h);

#endif
