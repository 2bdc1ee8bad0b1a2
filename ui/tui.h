/* tui.h: the ncurses front end of the dashboard: one loop of a timed getch; keys go to the
 * app, the frame buffer is drawn and copied into one window per panel, each window is
 * wnoutrefresh'ed and the screen updated once. Signal handlers only set a flag; a resize
 * (KEY_RESIZE) rebuilds the windows. The terminal is restored on every way out. */
#ifndef PLUMB_UI_TUI_H
#define PLUMB_UI_TUI_H

#include "ui/app.h"

/* Runs the dashboard on the terminal until q, Ctrl-C, SIGTERM or SIGHUP. mono = 1 forces
 * monochrome (NO_COLOR and terminals without colours get it anyway). keys/nkeys are fed
 * first (may be NULL/0). Returns 0, or 2 with one line on stderr when there is no usable
 * terminal (the exit status of bad input). */
int ui_tui_run(ui_app *a, int mono, const int *keys, int nkeys);

#endif
