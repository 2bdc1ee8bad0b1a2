/* tui.c: the dashboard on a real terminal through ncurses. The drawing itself happens in
 * a frame buffer (ui/draw.c); this file maps its styles to colours or plain attributes,
 * copies each panel's region into its own window, and runs the key loop. */
#define _XOPEN_SOURCE 700
#include "ui/tui.h"

#include <curses.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ui/draw.h"

/* The one piece of global state: set by the signal handlers, read by the loop. */
static volatile sig_atomic_t ui_quit_signal;

static void on_signal(int sig) { ui_quit_signal = sig; }

enum { NWIN = 7 };

typedef struct tui {
    ui_layout L;              /* the layout the windows were built for */
    WINDOW *win[NWIN];        /* header, stages, pstages, timeline, ptimeline, status, help */
    ui_rect rect[NWIN];
    attr_t style_attr[UI_ST_NSTYLES];
    short style_pair[UI_ST_NSTYLES];
    ui_fb fb;
} tui;

static void setup_styles(tui *t, int colour)
{
    memset(t->style_attr, 0, sizeof t->style_attr);
    memset(t->style_pair, 0, sizeof t->style_pair);
    t->style_attr[UI_ST_DIM] = A_DIM;
    t->style_attr[UI_ST_STATUS] = A_REVERSE;
    t->style_attr[UI_ST_SELECT] = A_BOLD;
    t->style_attr[UI_ST_BAD] = A_BOLD;
    t->style_attr[UI_ST_TITLE] = A_BOLD;
    for (int k = 0; k < UI_NMBCOLORS; k++)
        t->style_attr[UI_ST_MB0 + k] = k % 2 ? A_UNDERLINE : 0; /* mono: alternate blocks */
    if (!colour) return;
    static const struct { int style; short fg, bg; } P[] = {
        { UI_ST_TITLE, COLOR_CYAN, -1 },   { UI_ST_LABEL, COLOR_CYAN, -1 },
        { UI_ST_GOOD, COLOR_GREEN, -1 },   { UI_ST_BAD, COLOR_RED, -1 },
        { UI_ST_BORDER, COLOR_BLUE, -1 },  { UI_ST_STATUS, COLOR_BLACK, COLOR_CYAN },
        { UI_ST_KEY, COLOR_YELLOW, -1 },   { UI_ST_SELECT, COLOR_YELLOW, -1 },
        { UI_ST_BAR, COLOR_GREEN, -1 },
    };
    static const short MB[UI_NMBCOLORS] = { COLOR_RED, COLOR_GREEN, COLOR_YELLOW,
                                            COLOR_BLUE, COLOR_MAGENTA, COLOR_CYAN };
    short next = 1;
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        init_pair(next, P[i].fg, P[i].bg);
        t->style_pair[P[i].style] = next++;
    }
    for (int k = 0; k < UI_NMBCOLORS; k++) {
        init_pair(next, COLOR_BLACK, MB[k]);
        t->style_pair[UI_ST_MB0 + k] = next++;
        t->style_attr[UI_ST_MB0 + k] = 0;
    }
    t->style_attr[UI_ST_STATUS] = 0;
}

static chtype cell_chtype(const tui *t, const ui_cell *c)
{
    chtype ch;
    switch (c->ch) {
    case UI_CH_HLINE: ch = ACS_HLINE; break;
    case UI_CH_VLINE: ch = ACS_VLINE; break;
    case UI_CH_ULCORNER: ch = ACS_ULCORNER; break;
    case UI_CH_URCORNER: ch = ACS_URCORNER; break;
    case UI_CH_LLCORNER: ch = ACS_LLCORNER; break;
    case UI_CH_LRCORNER: ch = ACS_LRCORNER; break;
    case UI_CH_BLOCK: ch = ' ' | A_REVERSE; break;
    default: ch = (chtype)ui_fb_ascii(c->ch); break;
    }
    int st = c->style & UI_ST_MASK;
    if (st >= UI_ST_NSTYLES) st = UI_ST_NORMAL;
    chtype a = t->style_attr[st] | COLOR_PAIR(t->style_pair[st]);
    if (c->style & UI_A_BOLD) a |= A_BOLD;
    if (c->style & UI_A_REVERSE) a ^= A_REVERSE;
    return ch | a;
}

static void free_windows(tui *t)
{
    for (int i = 0; i < NWIN; i++)
        if (t->win[i]) delwin(t->win[i]);
    memset(t->win, 0, sizeof t->win);
}

/* (Re)builds one window per present panel of L; returns 0 or -1. */
static int build_windows(tui *t, const ui_layout *L)
{
    free_windows(t);
    t->L = *L;
    ui_rect r[NWIN] = { L->header, L->stages, L->pstages, L->timeline, L->ptimeline, L->status,
                        L->help };
    if (L->too_small) {
        memset(r, 0, sizeof r);
        r[0] = L->message;
    }
    for (int i = 0; i < NWIN; i++) {
        t->rect[i] = r[i];
        if (!ui_rect_present(r[i])) continue;
        t->win[i] = newwin(r[i].h, r[i].w, r[i].y, r[i].x);
        if (!t->win[i]) return -1;
        keypad(t->win[i], TRUE);
        wtimeout(t->win[i], 250);
    }
    return 0;
}

/* The window keys are read from: one that is refreshed every frame (status, or the
 * too-small message), so that wgetch never repaints a stale window. */
static WINDOW *input_window(const tui *t)
{
    return t->win[5] ? t->win[5] : t->win[0] ? t->win[0] : stdscr;
}

static int same_layout(const ui_layout *a, const ui_layout *b)
{
    return !memcmp(a, b, sizeof *a);
}

static int draw_frame(tui *t, ui_app *a)
{
    ui_layout L;
    ui_app_layout(a, COLS, LINES, &L);
    if (!t->win[0] || !same_layout(&L, &t->L)) {
        if (build_windows(t, &L)) return -1;
    }
    if (t->fb.w != COLS || t->fb.h != LINES)
        if (ui_fb_resize(&t->fb, COLS, LINES)) return -1;
    ui_draw(a, &L, &t->fb);
    for (int i = 0; i < NWIN; i++) {
        WINDOW *w = t->win[i];
        if (!w) continue;
        ui_rect r = t->rect[i];
        for (int y = 0; y < r.h; y++)
            for (int x = 0; x < r.w; x++) {
                const ui_cell *c = ui_fb_at(&t->fb, r.x + x, r.y + y);
                if (c) mvwaddch(w, y, x, cell_chtype(t, c));
            }
        wnoutrefresh(w);
    }
    doupdate();
    return 0;
}

static int map_key(int ch)
{
    switch (ch) {
    case KEY_UP: return UI_KEY_UP;
    case KEY_DOWN: return UI_KEY_DOWN;
    case KEY_LEFT: return UI_KEY_LEFT;
    case KEY_RIGHT: return UI_KEY_RIGHT;
    case KEY_PPAGE: return UI_KEY_PGUP;
    case KEY_NPAGE: return UI_KEY_PGDN;
    case KEY_HOME: return UI_KEY_HOME;
    case KEY_END: return UI_KEY_END;
    case KEY_RESIZE: return UI_KEY_RESIZE;
    default: return ch >= 0 && ch < 0x80 ? ch : -1;
    }
}

int ui_tui_run(ui_app *a, int mono, const int *keys, int nkeys)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "plumb: ui: needs a terminal on stdin and stdout (use --snapshot WxH "
                        "for a text frame)\n");
        return 2;
    }
    setlocale(LC_ALL, "");
    const char *term = getenv("TERM");
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        fprintf(stderr, "plumb: ui: cannot drive terminal type \"%s\"\n", term ? term : "");
        return 2;
    }
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked getch returns */
    ui_quit_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);

    cbreak();
    noecho();
    nonl();
    curs_set(0);
    set_escdelay(25);
    const char *nc = getenv("NO_COLOR");
    int colour = !mono && !(nc && *nc) && has_colors();
    if (colour) {
        start_color();
        use_default_colors();
    }
    tui t;
    memset(&t, 0, sizeof t);
    setup_styles(&t, colour);

    int rc = 0;
    for (int i = 0; i < nkeys; i++)
        if (ui_app_key(a, keys[i]) & UI_DO_QUIT) goto out;
    if (draw_frame(&t, a)) goto oom;
    ui_app_async_start(a); /* a transformer's layouts in the background (else a no-op) */
    while (!ui_quit_signal) {
        WINDOW *in = input_window(&t);
        wtimeout(in, a->pending ? 20 : 250); /* a layout pending: poll for it */
        int ch = wgetch(in);
        if (ui_quit_signal) break;
        if (ui_app_poll(a) && draw_frame(&t, a)) goto oom;
        if (ch == ERR) continue;
        int k = map_key(ch);
        if (k < 0) continue;
        if (k == UI_KEY_RESIZE) {
            free_windows(&t); /* the next frame rebuilds them for the new size */
            memset(&t.L, 0, sizeof t.L);
        }
        if (ui_app_key(a, k) & UI_DO_QUIT) break;
        if (draw_frame(&t, a)) goto oom;
    }
    goto out;
oom:
    rc = 1;
out:
    free_windows(&t);
    ui_fb_free(&t.fb);
    endwin();
    delscreen(scr);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    ui_app_async_stop(a); /* after the terminal is restored: a layout in progress ends first */
    if (rc) fprintf(stderr, "plumb: ui: out of memory drawing the screen\n");
    return rc;
}
