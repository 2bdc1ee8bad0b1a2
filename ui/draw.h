/* draw.h: the dashboard's panels drawn into a frame buffer: header figures (live, pinned,
 * their difference), the stage table with load-balance bars, the pipeline timeline (one
 * row per device, F/B/I/W blocks coloured by microbatch), the status line, the help overlay.
 * Pure functions of the app's state apart from keeping the timeline cursor in view. */
#ifndef PLUMB_UI_DRAW_H
#define PLUMB_UI_DRAW_H

#include <stddef.h>

#include "sim/sim.h"
#include "ui/fb.h"
#include "ui/layout.h"

struct ui_app;
struct ui_result;

/* Lines of help text (what the layout sizes the overlay by). */
int ui_help_rows(void);

/* The layout for the app on a w x h screen. */
void ui_app_layout(const struct ui_app *a, int w, int h, ui_layout *L);

/* Draws every panel of L into fb. */
void ui_draw(struct ui_app *a, const ui_layout *L, ui_fb *fb);

/* Draws the box of a panel of res in r (titled `title`); returns 1 when the caller draws
 * its rows (room for them, and res has a plan and a report), else 0 (res's error drawn in
 * the box, or no room). */
int ui_draw_panel_open(ui_fb *fb, ui_rect r, const char *title, const struct ui_result *res);

/* The memory panel of a transformer's 3D layout in r (a box titled `title`): per pipeline
 * rank its stages, devices, F+B per microbatch, the weights, gradients, optimizer state and
 * activations of its first device at the peak (GiB), the peak against the capacity, and
 * one bar of those parts (W G O A, + the other buffers, . free) against the capacity ('|'
 * marks it when the peak is over). The rank holding sel_device is highlighted. */
void ui_draw_memory(ui_fb *fb, ui_rect r, const char *title, const struct ui_result *res,
                    int sel_device);

/* Figure formatting shared with tests: "10.916 s" / "12.34 ms" / "56.7 us"; GiB with two
 * decimals. Return buf. */
char *ui_fmt_time(double s, char *buf, size_t n);
char *ui_fmt_gib(double bytes, char *buf, size_t n);

/* Compresses a device list: "0-3,8,10-11", at most n-1 characters, ending in '+' when cut. */
char *ui_fmt_devices(const int *devs, int k, char *buf, size_t n);

#endif
