/* draw_mem.c: the dashboard's memory panel for a transformer's 3D layout: one row per
 * pipeline rank (every device of a rank, all its tensor-parallel ranks and data-parallel
 * replicas, holds the same share), its stages and devices, F+B per microbatch, and the
 * simulator's weights, gradients, optimizer state and activations at the peak, as figures
 * and as one bar against the device's capacity. */
#include <stdio.h>
#include <string.h>

#include "ui/draw.h"
#include "ui/eval.h"

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

/* The bar's parts: letter and style, in the order they are stacked. */
static const struct { char ch; int style; } PART[] = {
    { 'W', UI_ST_MB0 + 0 }, { 'G', UI_ST_MB0 + 1 }, { 'O', UI_ST_MB0 + 2 },
    { 'A', UI_ST_MB0 + 3 }, { '+', UI_ST_DIM },
};

/* One bar of width bw at (x, y): the parts of m stacked in cells of max(capacity, total) /
 * bw bytes each, '.' for free capacity, '|' at the capacity when the total is over it. */
static void draw_bar(ui_fb *fb, int x, int y, int bw, const sim_memory *m)
{
    double part[5] = { m->weights, m->gradients, m->optimizer, m->activations,
                       m->buffers + m->workspace + m->staging };
    double scale = m->capacity > m->total ? m->capacity : m->total;
    if (!(scale > 0) || bw < 1) return;
    double acc = 0;
    int c = 0;
    for (int k = 0; k < 5; k++) {
        acc += part[k];
        int end = (int)(acc / scale * bw + 0.5);
        for (; c < end && c < bw; c++) ui_fb_put(fb, x + c, y, PART[k].ch, PART[k].style);
    }
    for (; c < bw; c++) ui_fb_put(fb, x + c, y, '.', UI_ST_DIM);
    if (!m->fits) {
        int cap = (int)(m->capacity / scale * bw);
        if (cap >= 0 && cap < bw) ui_fb_put(fb, x + cap, y, '|', UI_ST_BAD | UI_A_BOLD);
    }
}

void ui_draw_memory(ui_fb *fb, ui_rect r, const char *title, const ui_result *res,
                    int sel_device)
{
    if (!ui_draw_panel_open(fb, r, title, res)) return;
    int x = r.x + 1, w = r.w - 2, y = r.y + 1, rows = r.h - 3;
    const plan *pl = res->pl;
    const sim_report *rep = res->rep;
    int chunks = pl->chunks > 0 ? pl->chunks : 1, pp = pl->nstages / chunks;
    int dp = pl->stages[0].replicas, tp = plan_group_width(pl); /* a replica's devices */
    /* rank, stages, devices, F+B, (W G O A in GiB when wide), peak/cap, then the bar */
    int nums = w >= 110;
    const int fixed = 4 + 1 + 7 + 1 + 11 + 1 + 9 + 1 + (nums ? 4 * 7 : 0) + 13 + 1;
    int barw = w - fixed;
    char line[256], parts[80] = "";
    if (nums)
        snprintf(parts, sizeof parts, " %6s %6s %6s %6s", "W GiB", "G GiB", "O GiB", "A GiB");
    snprintf(line, sizeof line, "%4s %-7s %-11s %9s%s %13s %s", "rank", "stages", "devices",
             "F+B ms/mb", parts, "peak/cap GiB",
             barw >= 24 ? "W G O A + other . free" : barw >= 8 ? "W G O A" : "");
    ui_fb_text(fb, x, y, w, line, UI_ST_LABEL | UI_A_BOLD);
    int sel = -1;
    for (int p = 0; p < pp; p++)
        if (sel_device >= p * dp * tp && sel_device < (p + 1) * dp * tp) sel = p;
    int top = 0;
    if (pp > rows) {
        top = sel - rows / 2;
        if (top > pp - rows) top = pp - rows;
        if (top < 0) top = 0;
    }
    for (int i = 0; i < rows && top + i < pp; i++) {
        int p = top + i, first = p * dp * tp; /* layout3d_group_device(p, 0, tp, dp) */
        const sim_device_report *d = sim_report_device(rep, first);
        if (!d) continue;
        char st[32] = "", devs[32], fbms[16], pk[48], tot[16], cap[16], g[4][16];
        int ids[SIM_DEVICE_STAGES];
        double fbs = 0;
        for (int k = 0; k < d->nstages; k++) {
            const sim_stage_report *sr = &rep->stages[d->stages[k]];
            ids[k] = d->stages[k];
            fbs += sr->forward_s + (sr->backward_s > 0 ? sr->backward_s
                                                        : sr->input_grad_s + sr->weight_grad_s);
        }
        ui_fmt_devices(ids, d->nstages, st, 8);
        snprintf(devs, sizeof devs, "%d-%d", first, first + dp * tp - 1);
        snprintf(fbms, sizeof fbms, "%.2f", fbs * 1e3);
        const sim_memory *m = &d->mem;
        double v[4] = { m->weights, m->gradients, m->optimizer, m->activations };
        for (int k = 0; k < 4; k++) snprintf(g[k], sizeof g[k], "%.2f", gib(v[k]));
        parts[0] = 0;
        if (nums) snprintf(parts, sizeof parts, " %6s %6s %6s %6s", g[0], g[1], g[2], g[3]);
        snprintf(pk, sizeof pk, "%s/%s%s", ui_fmt_gib(m->total, tot, sizeof tot),
                 ui_fmt_gib(m->capacity, cap, sizeof cap), m->fits ? "" : "!");
        int yy = y + 1 + i, style = p == sel ? UI_ST_SELECT : UI_ST_NORMAL;
        snprintf(line, sizeof line, "%4d %-7s %-11s %9s%s %13s ", p, st, devs, fbms, parts, pk);
        int n = ui_fb_text(fb, x, yy, w, line, style);
        if (!m->fits)
            ui_fb_text(fb, x + fixed - 14, yy, 13, line + fixed - 14, UI_ST_BAD | UI_A_BOLD);
        if (barw >= 8) draw_bar(fb, x + n, yy, barw, m);
    }
    if (pp > rows) {
        char more[48];
        snprintf(more, sizeof more, " ranks %d-%d of %d ", top, top + rows - 1, pp);
        ui_fb_text(fb, r.x + r.w - 2 - (int)strlen(more), r.y + r.h - 1, (int)strlen(more), more,
                   UI_ST_DIM);
    }
}
