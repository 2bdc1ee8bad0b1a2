/* fb.c: the dashboard's frame buffer: a clipped character grid with styles, and its plain
 * text rendering for the snapshot mode. */
#include "ui/fb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ui_fb_resize(ui_fb *fb, int w, int h)
{
    free(fb->cells);
    fb->cells = NULL;
    fb->w = fb->h = 0;
    if (w < 1 || h < 1 || w > 4096 || h > 4096) return -1;
    fb->cells = malloc((size_t)w * (size_t)h * sizeof *fb->cells);
    if (!fb->cells) return -1;
    fb->w = w;
    fb->h = h;
    ui_fb_clear(fb);
    return 0;
}

void ui_fb_free(ui_fb *fb)
{
    if (!fb) return;
    free(fb->cells);
    fb->cells = NULL;
    fb->w = fb->h = 0;
}

void ui_fb_clear(ui_fb *fb)
{
    size_t n = (size_t)fb->w * (size_t)fb->h;
    for (size_t i = 0; i < n; i++) fb->cells[i] = (ui_cell){ ' ', UI_ST_NORMAL };
}

void ui_fb_put(ui_fb *fb, int x, int y, int ch, int style)
{
    if (x < 0 || y < 0 || x >= fb->w || y >= fb->h) return;
    ui_cell *c = &fb->cells[(size_t)y * (size_t)fb->w + (size_t)x];
    c->ch = (uint16_t)ch;
    c->style = (uint16_t)style;
}

const ui_cell *ui_fb_at(const ui_fb *fb, int x, int y)
{
    if (x < 0 || y < 0 || x >= fb->w || y >= fb->h) return NULL;
    return &fb->cells[(size_t)y * (size_t)fb->w + (size_t)x];
}

int ui_fb_text(ui_fb *fb, int x, int y, int maxw, const char *s, int style)
{
    int n = 0;
    if (!s || y < 0 || y >= fb->h) return 0;
    for (; s[n] && n < maxw && x + n < fb->w; n++) {
        unsigned char ch = (unsigned char)s[n];
        ui_fb_put(fb, x + n, y, ch >= 0x20 && ch < 0x7f ? ch : '?', style);
    }
    return n;
}

int ui_fb_printf(ui_fb *fb, int x, int y, int maxw, int style, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ui_fb_text(fb, x, y, maxw, buf, style);
}

void ui_fb_fill(ui_fb *fb, int x, int y, int w, int h, int ch, int style)
{
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) ui_fb_put(fb, i, j, ch, style);
}

void ui_fb_box(ui_fb *fb, int x, int y, int w, int h, const char *title, int style)
{
    if (w < 2 || h < 2) return;
    ui_fb_fill(fb, x + 1, y, w - 2, 1, UI_CH_HLINE, style);
    ui_fb_fill(fb, x + 1, y + h - 1, w - 2, 1, UI_CH_HLINE, style);
    ui_fb_fill(fb, x, y + 1, 1, h - 2, UI_CH_VLINE, style);
    ui_fb_fill(fb, x + w - 1, y + 1, 1, h - 2, UI_CH_VLINE, style);
    ui_fb_put(fb, x, y, UI_CH_ULCORNER, style);
    ui_fb_put(fb, x + w - 1, y, UI_CH_URCORNER, style);
    ui_fb_put(fb, x, y + h - 1, UI_CH_LLCORNER, style);
    ui_fb_put(fb, x + w - 1, y + h - 1, UI_CH_LRCORNER, style);
    if (title && *title && w > 6) {
        ui_fb_put(fb, x + 1, y, ' ', style);
        int n = ui_fb_text(fb, x + 2, y, w - 5, title, UI_ST_TITLE | UI_A_BOLD);
        ui_fb_put(fb, x + 2 + n, y, ' ', style);
    }
}

int ui_fb_ascii(int ch)
{
    switch (ch) {
    case UI_CH_HLINE: return '-';
    case UI_CH_VLINE: return '|';
    case UI_CH_ULCORNER:
    case UI_CH_URCORNER:
    case UI_CH_LLCORNER:
    case UI_CH_LRCORNER: return '+';
    case UI_CH_BLOCK: return '#';
    default: return ch >= 0x20 && ch < 0x7f ? ch : '?';
    }
}

char *ui_fb_text_dump(const ui_fb *fb, int keep_trailing)
{
    size_t cap = (size_t)(fb->w + 1) * (size_t)fb->h + 1, k = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (int y = 0; y < fb->h; y++) {
        size_t start = k;
        for (int x = 0; x < fb->w; x++) out[k++] = (char)ui_fb_ascii(ui_fb_at(fb, x, y)->ch);
        if (!keep_trailing)
            while (k > start && out[k - 1] == ' ') k--;
        out[k++] = '\n';
    }
    out[k] = 0;
    return out;
}
