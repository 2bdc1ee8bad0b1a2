/* layout.c: the dashboard's layout, a pure function of screen size and content rows.
 *
 *   row 0 ...      header (3 rows; 5 when a plan is pinned; +1 for the runtime row)
 *   ...            stage table box | pinned stage table box (wide screens)
 *   ...            timeline box
 *   ...            pinned timeline box (tall screens, when pinned)
 *   last row       status line
 *
 * The stage table gets the rows it wants up to about two fifths of the middle, the
 * timeline the rest (its rows scroll); the help overlay is centred on top. The status
 * line's keys degrade with the width: brief labels, then the least useful keys left out. */
#include "ui/layout.h"

#include <stdio.h>
#include <string.h>

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

int ui_rect_present(ui_rect r) { return r.w > 0 && r.h > 0; }

int ui_rect_overlap(ui_rect a, ui_rect b)
{
    if (!ui_rect_present(a) || !ui_rect_present(b)) return 0;
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

int ui_rect_inside(ui_rect r, int w, int h)
{
    if (!ui_rect_present(r)) return 1;
    return r.x >= 0 && r.y >= 0 && r.x + r.w <= w && r.y + r.h <= h;
}

int ui_layout_header_rows(int pinned, int runtime)
{
    return (pinned ? 5 : 3) + (runtime ? 1 : 0);
}

static ui_rect rect(int x, int y, int w, int h) { return (ui_rect){ x, y, w, h }; }

void ui_layout_compute(const ui_layout_in *in, ui_layout *out)
{
    memset(out, 0, sizeof *out);
    int W = in->width, H = in->height;
    if (W < UI_MIN_W || H < UI_MIN_H) {
        out->too_small = 1;
        if (W > 0 && H > 0) out->message = rect(0, 0, W, H);
        return;
    }
    int hdr = ui_layout_header_rows(in->pinned, in->runtime);
    out->header = rect(0, 0, W, hdr);
    out->status = rect(0, H - 1, W, 1);

    int top = hdr, avail = H - 1 - hdr;       /* rows between header and status */
    int pin_tl = in->pinned && H >= UI_TALL_H;
    const int st_min = 4;                     /* box + column header + 1 row */
    const int tl_min = pin_tl ? 12 : 6;       /* box + axis + 3 devices, per timeline */
    int st_want = imax(st_min, imax(in->nstages, 1) + 3);
    int tl_want = imax(tl_min, (imax(in->ndevices, 1) + 3) * (pin_tl ? 2 : 1));

    /* The stage table takes what it wants when the timeline still fits; else at most two
     * fifths of the middle (never less than its minimum, never starving the timeline). */
    int st_h = imin(st_want, avail - tl_min);
    if (st_h + tl_want > avail) st_h = imin(st_h, imax(st_min, avail * 2 / 5));
    st_h = imax(st_min, imin(st_h, avail - tl_min));
    int tl_h = avail - st_h;

    if (in->pinned && W >= UI_WIDE_W) {
        int lw = W / 2;
        out->stages = rect(0, top, lw, st_h);
        out->pstages = rect(lw, top, W - lw, st_h);
    } else {
        out->stages = rect(0, top, W, st_h);
    }
    if (pin_tl) {
        int a = (tl_h + 1) / 2;
        out->timeline = rect(0, top + st_h, W, a);
        out->ptimeline = rect(0, top + st_h + a, W, tl_h - a);
    } else {
        out->timeline = rect(0, top + st_h, W, tl_h);
    }

    if (in->help) {
        int hw = imin(W - 4, 78), hh = imin(H - 2, imax(in->help_rows, 1) + 2);
        out->help = rect((W - hw) / 2, (H - hh) / 2, hw, hh);
    }
}

/* ---- the status line's keys --------------------------------------------------------- */

static const ui_key_label KEYS2D[] = {
    { "q quit", "q quit" },        { "? help", "? help" },
    { "+/- devices", "+- gpus" },  { "c/C sched", "cC sched" },
    { "m/M mb", "mM mb" },         { "b/B bw", "bB bw" },
    { "x/X mem", "xX mem" },       { "t/T strag", "tT strag" },
    { "r recomp", "r recomp" },    { "p/P pin", "p pin" },
    { "u/U undo", "u undo" },      { "s save", "s save" },
    { "e export", "e export" },    { "z/Z arrows view", "zZ view" },
};

/* a transformer's layout: its dimensions, the schedule and the runtime keys first */
static const ui_key_label KEYS3D[] = {
    { "q quit", "q quit" },           { "? help", "? help" },
    { "g/G tp", "gG tp" },            { "d/D pp", "dD pp" },
    { "w/W dp", "wW dp" },            { "c/C schedule", "cC sched" },
    { "k/K tp-overlap", "kK tpo" },   { "j param-gather", "j opg" },
    { "y p2p", "y p2p" },             { "E grad-sync", "E gsync" },
    { "f attention", "f attn" },      { "v/V cp", "vV cp" },
    { "n/N mbs", "nN mbs" },
    { "i/I interleave", "iI intlv" }, { "r recompute", "r recomp" },
    { "a seq-par", "a sp" },          { "o zero", "o zero" },
    { "u/U undo", "u undo" },         { "p/P pin", "p pin" },
    { "s save", "s save" },           { "e export", "e export" },
};

const ui_key_label *ui_layout_keys(int layout3d, int *n)
{
    *n = layout3d ? (int)(sizeof KEYS3D / sizeof KEYS3D[0])
                  : (int)(sizeof KEYS2D / sizeof KEYS2D[0]);
    return layout3d ? KEYS3D : KEYS2D;
}

#define KEYS_SEP 2 /* spaces between two keys */

int ui_layout_keys_line(const ui_key_label *keys, int n, int width, char *buf, size_t bufn)
{
    if (bufn) buf[0] = 0;
    int m = 0, used = 0;
    for (; m < n; m++) { /* the prefix that fits in brief labels */
        int need = (m ? KEYS_SEP : 0) + (int)strlen(keys[m].brief);
        if (used + need > width) break;
        used += need;
    }
    if (m == 0 || bufn == 0) return m;
    int full = 0; /* the full labels when all of the m keys fit in them */
    for (int i = 0; i < m; i++) full += (i ? KEYS_SEP : 0) + (int)strlen(keys[i].full);
    size_t len = 0;
    for (int i = 0; i < m; i++) {
        const char *l = full <= width ? keys[i].full : keys[i].brief;
        int k = snprintf(buf + len, bufn - len, "%s%s", i ? "  " : "", l);
        if (k < 0 || (size_t)k >= bufn - len) { /* buf too small: whole keys only */
            buf[len] = 0;
            return i;
        }
        len += (size_t)k;
    }
    return m;
}
