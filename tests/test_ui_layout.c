/* test_ui_layout.c: the dashboard layout is a pure function; for every screen size from
 * 80x24 to 300x100 and a spread of contents (pinned or not, with or without a transformer's
 * runtime row), panels lie inside the screen, never overlap, tile the rows, and leave the
 * timeline room for at least three devices. */
#include <criterion/criterion.h>

#include <string.h>

#include "ui/layout.h"

static void check_one(int w, int h, int nst, int ndev, int pinned, int help, int runtime)
{
    ui_layout_in in = { w, h, nst, ndev, pinned, help, 30, runtime };
    ui_layout L;
    ui_layout_compute(&in, &L);
    cr_assert(!L.too_small, "%dx%d reported too small", w, h);
    ui_rect panels[] = { L.header, L.stages, L.pstages, L.timeline, L.ptimeline, L.status };
    int np = (int)(sizeof panels / sizeof panels[0]);
    for (int i = 0; i < np; i++) {
        cr_assert(ui_rect_inside(panels[i], w, h), "%dx%d: panel %d outside (%d,%d %dx%d)", w,
                  h, i, panels[i].x, panels[i].y, panels[i].w, panels[i].h);
        for (int j = i + 1; j < np; j++)
            cr_assert(!ui_rect_overlap(panels[i], panels[j]), "%dx%d: panels %d and %d overlap",
                      w, h, i, j);
    }
    cr_assert(ui_rect_inside(L.help, w, h), "%dx%d: help outside", w, h);
    cr_assert_eq(ui_rect_present(L.help), help);
    /* every cell of the screen belongs to exactly one panel */
    long cells = 0;
    for (int i = 0; i < np; i++)
        if (ui_rect_present(panels[i])) cells += (long)panels[i].w * panels[i].h;
    cr_assert_eq(cells, (long)w * h, "%dx%d: panels cover %ld of %ld cells", w, h, cells,
                 (long)w * h);
    cr_assert_eq(L.status.y, h - 1);
    cr_assert_eq(L.status.h, 1);
    cr_assert_eq(L.header.y, 0);
    cr_assert_eq(L.header.h, ui_layout_header_rows(pinned, runtime));
    cr_assert_eq(L.header.h, 3 + 2 * pinned + runtime);
    cr_assert_eq(L.stages.y, L.header.h, "%dx%d: the stages do not start below the header", w,
                 h);
    cr_assert_geq(L.timeline.h, 6, "%dx%d: timeline too short (%d)", w, h, L.timeline.h);
    cr_assert_geq(L.stages.h, 4);
    cr_assert_eq(L.timeline.w, w);
    if (ui_rect_present(L.ptimeline)) cr_assert_geq(L.ptimeline.h, 6);
    cr_assert_eq(ui_rect_present(L.pstages), pinned && w >= UI_WIDE_W);
    cr_assert_eq(ui_rect_present(L.ptimeline), pinned && h >= UI_TALL_H);
}

Test(ui_layout, every_size_80x24_to_300x100)
{
    static const int nst[] = { 0, 1, 4, 16, 64 };
    static const int ndev[] = { 0, 1, 16, 64, 1024 };
    for (int w = UI_MIN_W; w <= 300; w++)
        for (int h = UI_MIN_H; h <= 100; h++)
            for (int k = 0; k < 5; k++)
                check_one(w, h, nst[k], ndev[(k + w + h) % 5], (w + h) % 2, (w * h) % 3 == 0,
                          (w / 3 + h + k) % 2);
}

Test(ui_layout, pinned_and_help_variants_at_the_corners)
{
    static const int sizes[][2] = { { 80, 24 }, { 80, 100 }, { 300, 24 }, { 300, 100 },
                                    { 159, 49 }, { 160, 50 } };
    for (int i = 0; i < 6; i++)
        for (int p = 0; p < 2; p++)
            for (int hp = 0; hp < 2; hp++)
                for (int n = 0; n <= 40; n += 8)
                    for (int rt = 0; rt < 2; rt++)
                        check_one(sizes[i][0], sizes[i][1], n, n, p, hp, rt);
}

Test(ui_layout, small_stage_tables_give_rows_to_the_timeline)
{
    ui_layout_in in = { 120, 40, 2, 16, 0, 0, 0, 0 };
    ui_layout L;
    ui_layout_compute(&in, &L);
    cr_assert_eq(L.stages.h, 5); /* box (2) + column header + 2 stages */
    cr_assert_eq(L.timeline.h, 40 - 1 - 3 - 5);
    in.nstages = 100; /* a long table is capped so the timeline keeps most rows */
    ui_layout_compute(&in, &L);
    cr_assert_leq(L.stages.h, (40 - 1 - 3) * 2 / 5);
    cr_assert_geq(L.timeline.h, 19);
}

Test(ui_layout, too_small_screens_get_one_message)
{
    static const int sizes[][2] = { { 79, 24 }, { 80, 23 }, { 10, 5 }, { 1, 1 } };
    for (int i = 0; i < 4; i++) {
        ui_layout_in in = { sizes[i][0], sizes[i][1], 4, 4, 1, 1, 10, 1 };
        ui_layout L;
        ui_layout_compute(&in, &L);
        cr_assert(L.too_small);
        cr_assert(ui_rect_inside(L.message, sizes[i][0], sizes[i][1]));
        cr_assert(!ui_rect_present(L.header) && !ui_rect_present(L.timeline));
    }
    ui_layout_in in = { 0, 0, 4, 4, 0, 0, 0, 0 };
    ui_layout L;
    ui_layout_compute(&in, &L);
    cr_assert(L.too_small && !ui_rect_present(L.message));
}

/* The keys of a status line split at their two-space separators into toks (at most 64);
 * returns the count. */
static int split_keys(const char *line, char toks[][64])
{
    int n = 0;
    const char *p = line;
    while (*p && n < 64) {
        const char *q = strstr(p, "  ");
        size_t len = q ? (size_t)(q - p) : strlen(p);
        cr_assert_lt(len, 64);
        memcpy(toks[n], p, len);
        toks[n++][len] = 0;
        p = q ? q + 2 : p + len;
    }
    return n;
}

/* The status line at every width from 80 to 300, both views: within the width, every key
 * whole (a label of the table, all full or all brief), the most useful first (a prefix of
 * the table, "q quit" and "? help" always), as many as fit (the next brief key would not),
 * never fewer on a wider screen. */
Test(ui_layout, status_keys_are_whole_and_most_useful_first)
{
    for (int l3 = 0; l3 < 2; l3++) {
        int n, last = 0;
        const ui_key_label *keys = ui_layout_keys(l3, &n);
        cr_assert(n >= 14 && !strcmp(keys[0].full, "q quit") && !strcmp(keys[1].full, "? help"));
        for (int w = UI_MIN_W; w <= 300; w++) {
            char line[512], toks[64][64];
            int m = ui_layout_keys_line(keys, n, w, line, sizeof line);
            cr_assert_leq((int)strlen(line), w, "%d: %s", w, line);
            cr_assert_eq(split_keys(line, toks), m, "%d: %s", w, line);
            cr_assert_geq(m, last, "width %d shows fewer keys than %d", w, w - 1);
            last = m;
            int full = 0, brief = 0, blen = 0;
            for (int i = 0; i < m; i++) {
                full += !strcmp(toks[i], keys[i].full);
                brief += !strcmp(toks[i], keys[i].brief);
                blen += (i ? 2 : 0) + (int)strlen(keys[i].brief);
                cr_assert(!strcmp(toks[i], keys[i].full) || !strcmp(toks[i], keys[i].brief),
                          "%d: key %d is \"%s\": %s", w, i, toks[i], line);
            }
            cr_assert(full == m || brief == m, "%d: full and brief labels mixed: %s", w, line);
            if (m < n)
                cr_assert_gt(blen + 2 + (int)strlen(keys[m].brief), w, "%d: %s fits too: %s",
                             w, keys[m].brief, line);
            cr_assert_geq(m, 9, "%d: %s", w, line);
        }
        cr_assert_eq(last, n, "300 columns show every key");
    }
}

/* The widths of the screens the dashboard is used at, by hand: a transformer's status
 * line names the runtime keys (k j y E f) from 80 columns on, the cp key (v V) from 100,
 * and 220 shows every key in full; the 2D view's from 140. */
Test(ui_layout, status_keys_at_the_usual_widths)
{
    static const struct { int l3, w; const char *line; } T[] = {
        { 1, 80, "q quit  ? help  gG tp  dD pp  wW dp  cC sched  kK tpo  j opg  y p2p  E gsync" },
        { 1, 100, "q quit  ? help  gG tp  dD pp  wW dp  cC sched  kK tpo  j opg  y p2p  E gsync"
                  "  f attn  vV cp  nN mbs" },
        { 1, 120, "q quit  ? help  gG tp  dD pp  wW dp  cC sched  kK tpo  j opg  y p2p  E gsync"
                  "  f attn  vV cp  nN mbs  iI intlv  r recomp" },
        { 1, 160, "q quit  ? help  gG tp  dD pp  wW dp  cC sched  kK tpo  j opg  y p2p  E gsync"
                  "  f attn  vV cp  nN mbs  iI intlv  r recomp  a sp  o zero  u undo  p pin  s save" },
        { 1, 220, "q quit  ? help  g/G tp  d/D pp  w/W dp  c/C schedule  k/K tp-overlap  "
                  "j param-gather  y p2p  E grad-sync  f attention  v/V cp  n/N mbs  "
                  "i/I interleave  r recompute  a seq-par  o zero  u/U undo  p/P pin  s save  "
                  "e export" },
        { 0, 80, "q quit  ? help  +- gpus  cC sched  mM mb  bB bw  xX mem  tT strag  r recomp" },
        { 0, 120, "q quit  ? help  +- gpus  cC sched  mM mb  bB bw  xX mem  tT strag  r recomp"
                  "  p pin  u undo  s save  e export  zZ view" },
        { 0, 140, "q quit  ? help  +/- devices  c/C sched  m/M mb  b/B bw  x/X mem  t/T strag  "
                  "r recomp  p/P pin  u/U undo  s save  e export  z/Z arrows view" },
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        int n;
        const ui_key_label *keys = ui_layout_keys(T[i].l3, &n);
        char line[512];
        ui_layout_keys_line(keys, n, T[i].w, line, sizeof line);
        cr_assert_str_eq(line, T[i].line, "%s view at %d", T[i].l3 ? "3D" : "2D", T[i].w);
    }
}

/* Too narrow for even the first key: nothing; a buffer too small: whole keys only. */
Test(ui_layout, status_keys_never_cut_a_key)
{
    int n;
    const ui_key_label *keys = ui_layout_keys(1, &n);
    char line[64];
    cr_assert_eq(ui_layout_keys_line(keys, n, 5, line, sizeof line), 0);
    cr_assert_str_eq(line, "");
    cr_assert_eq(ui_layout_keys_line(keys, n, 300, line, 20), 2);
    cr_assert_str_eq(line, "q quit  ? help");
}
