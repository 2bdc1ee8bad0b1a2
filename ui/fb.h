/* fb.h: a tiny frame buffer, the one surface every panel of the dashboard draws on. A grid
 * of cells, each an ASCII character (or a line-drawing code) and a semantic style. The
 * ncurses front end copies the grid into its windows (ui/tui.c); the snapshot mode prints
 * it as plain text (ui_fb_text). So the same drawing code serves both. */
#ifndef PLUMB_UI_FB_H
#define PLUMB_UI_FB_H

#include <stddef.h>
#include <stdint.h>

/* Line-drawing codes (cells above 0x7f): ncurses maps them to ACS_* glyphs, the text
 * rendering to '-', '|' and '+'. */
enum {
    UI_CH_HLINE = 0x100,
    UI_CH_VLINE,
    UI_CH_ULCORNER,
    UI_CH_URCORNER,
    UI_CH_LLCORNER,
    UI_CH_LRCORNER,
    UI_CH_BLOCK,          /* a full block: bars (ACS_CKBOARD / '#') */
};

/* Semantic styles: the front end turns them into colour pairs, or into plain attributes
 * in monochrome. The low byte is the style, the high bits flags. */
enum {
    UI_ST_NORMAL = 0,
    UI_ST_TITLE,          /* panel titles, the program name */
    UI_ST_LABEL,          /* field labels in the header */
    UI_ST_VALUE,          /* figures */
    UI_ST_GOOD,           /* a figure that improved / fits */
    UI_ST_BAD,            /* a figure that got worse / does not fit / errors */
    UI_ST_DIM,            /* idle time, secondary text */
    UI_ST_BORDER,
    UI_ST_STATUS,         /* the status line */
    UI_ST_KEY,            /* key names in the status line and help */
    UI_ST_SELECT,         /* the selected row / level */
    UI_ST_BAR,            /* load-balance bars */
    UI_ST_MB0,            /* microbatch colours UI_ST_MB0 .. UI_ST_MB0 + UI_NMBCOLORS - 1 */
    UI_ST_NSTYLES = UI_ST_MB0 + 6
};
#define UI_NMBCOLORS 6
#define UI_A_BOLD    0x100
#define UI_A_REVERSE 0x200
#define UI_ST_MASK   0xff

typedef struct ui_cell {
    uint16_t ch;          /* ASCII or UI_CH_* */
    uint16_t style;       /* UI_ST_* | UI_A_* */
} ui_cell;

typedef struct ui_fb {
    int w, h;
    ui_cell *cells;       /* [h][w], row-major */
} ui_fb;

/* Sets fb to w x h blank cells (reallocating). Returns 0, or -1 when out of memory or a
 * size is < 1 (fb is then left empty, w = h = 0). */
int ui_fb_resize(ui_fb *fb, int w, int h);
/* Frees the cells; fb itself belongs to the caller. */
void ui_fb_free(ui_fb *fb);
/* Blanks every cell (space, UI_ST_NORMAL). */
void ui_fb_clear(ui_fb *fb);

/* Writes one cell; outside the grid it does nothing. */
void ui_fb_put(ui_fb *fb, int x, int y, int ch, int style);
/* Writes text (bytes outside printable ASCII become '?') from (x, y), at most maxw cells
 * (and never past the grid). Returns the cells written. */
int ui_fb_text(ui_fb *fb, int x, int y, int maxw, const char *s, int style);
/* Like ui_fb_text with printf formatting. */
int ui_fb_printf(ui_fb *fb, int x, int y, int maxw, int style, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Fills the rectangle with ch in style (clipped to the grid). */
void ui_fb_fill(ui_fb *fb, int x, int y, int w, int h, int ch, int style);
/* Draws a border around the rectangle with `title` (may be NULL) in its top edge. */
void ui_fb_box(ui_fb *fb, int x, int y, int w, int h, const char *title, int style);

/* The cell at (x, y), or NULL outside the grid. */
const ui_cell *ui_fb_at(const ui_fb *fb, int x, int y);

/* The grid as plain text: h lines of w characters (trailing blanks kept only when
 * keep_trailing), each ended by '\n', line-drawing codes as '-', '|', '+', '#'. Returns a
 * NUL-terminated string the caller frees, or NULL when out of memory. */
char *ui_fb_text_dump(const ui_fb *fb, int keep_trailing);

/* The ASCII stand-in of a cell character (for the text dump and monochrome terminals). */
int ui_fb_ascii(int ch);

#endif
