/* svg.c: the simulator's SVG timeline: a row per device (compute stream, with its
 * all-reduces as a hatched strip along the bottom), a thinner row per link, blocks coloured
 * by microbatch (10 hues, microbatch mod 10) and shaded by kind (F light, B dark, I medium,
 * W medium and hatched), labelled when wide enough, a time axis with its unit and a
 * legend. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/json.h"
#include "sim/sim.h"

static void sb_text(sbuf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': sbuf_printf(b, "&lt;"); break;
        case '>': sbuf_printf(b, "&gt;"); break;
        case '&': sbuf_printf(b, "&amp;"); break;
        case '"': sbuf_printf(b, "&quot;"); break;
        default: sbuf_printf(b, "%c", *s);
        }
    }
}

/* 10 distinguishable hues (RGB), one per microbatch mod 10. */
static const unsigned char palette[10][3] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189},
    {140, 86, 75}, {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
};

/* The fill of a block: the microbatch's hue mixed toward white (F, W) or black (B). */
static void fill_of(int kind, int mb, char *out, size_t n, int *dark)
{
    const unsigned char *c = palette[(mb < 0 ? 0 : mb) % 10];
    double mix = 0, toward = 255; /* fraction toward `toward` */
    switch (kind) {
    case TL_F: mix = 0.55; break;
    case TL_B: mix = 0.30; toward = 0; break;
    case TL_I: mix = 0.0; break;
    case TL_W: mix = 0.25; break;
    default: mix = 0.6; break;
    }
    int rgb[3];
    for (int i = 0; i < 3; i++)
        rgb[i] = (int)lround(c[i] + (toward - c[i]) * mix);
    snprintf(out, n, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
    *dark = lum < 120;
}

/* A "nice" tick step (1, 2 or 5 x 10^k) for about n ticks over span. */
static double nice_step(double span, int n)
{
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

enum { LM = 190, PW = 1100, RM = 40, TOP = 58, RH = 30, LH = 14, GAP = 6 };

static const char *const kind_label[] = {
    "F forward", "B backward", "I input gradient", "W weight gradient", "step",
};

char *sim_svg_text(const sim_report *r, size_t *len)
{
    const timeline *tl = r->tl;
    if (!tl)
        return NULL;
    double T = timeline_end(tl);
    if (T <= 0)
        T = 1e-9;
    /* rows: device tracks (by device id), then link tracks */
    int *row = malloc(((size_t)tl->ntracks + 1) * sizeof *row);
    int *order = malloc(((size_t)tl->ntracks + 1) * sizeof *order);
    if (!row || !order) {
        free(row);
        free(order);
        return NULL;
    }
    int nrows = 0, ndev = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < tl->ntracks; i++) {
            int k = tl->tracks[i].kind;
            if ((pass == 0 && k == TL_TRACK_DEVICE) || (pass == 1 && k == TL_TRACK_LINK)) {
                int j = nrows++;
                while (j > 0 && pass == 0 &&
                       tl->tracks[order[j - 1]].device > tl->tracks[i].device) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = i;
                ndev += pass == 0;
            }
        }
    for (int i = 0; i < tl->ntracks; i++)
        row[i] = -1;
    for (int j = 0; j < nrows; j++)
        row[order[j]] = j;
    /* collective tracks draw in their device's row */
    for (int i = 0; i < tl->ntracks; i++)
        if (tl->tracks[i].kind == TL_TRACK_COLLECTIVE)
            for (int j = 0; j < ndev; j++)
                if (tl->tracks[order[j]].device == tl->tracks[i].device)
                    row[i] = j;
    double *ry = malloc(((size_t)nrows + 1) * sizeof *ry);
    if (!ry) {
        free(row);
        free(order);
        return NULL;
    }
    double y = TOP;
    for (int j = 0; j < nrows; j++) {
        ry[j] = y;
        y += (j < ndev ? RH : LH) + GAP;
    }
    double axis_y = y + 4, height = axis_y + 110;
    int width = LM + PW + RM;
    sbuf b = {0};
    sbuf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
       "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
       "viewBox=\"0 0 %d %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
       width, height, width, height);
    sbuf_printf(&b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" "
       "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<rect width=\"2\" height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.6\"/></pattern>"
       "<pattern id=\"hatchdark\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"5\" fill=\"#333333\"/>"
       "</pattern></defs>\n");
    sbuf_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    double unit = T < 2e-3 ? 1e-6 : T < 2 ? 1e-3 : 1;
    const char *uname = unit == 1e-6 ? "us" : unit == 1e-3 ? "ms" : "s";
    sbuf_printf(&b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">plumb sim: %s, "
       "%d stages, %d microbatches x %d samples, %d iteration%s</text>\n", LM,
       sched_kind_name(r->schedule), r->nstages, r->microbatches, r->microbatch_size,
       r->iterations, r->iterations == 1 ? "" : "s");
    sbuf_printf(&b, "<text x=\"%d\" y=\"42\" font-size=\"12\">%.1f samples/s, iteration %.4g %s "
       "(%s), bubble %.1f %%, peak memory %.3g GiB</text>\n", LM, r->samples_per_s,
       r->iteration_s / unit, uname, r->iterations >= 3 ? "steady state" : "whole run / N",
       100 * r->bubble_fraction,
       r->peak_memory_bytes / 1073741824.0);
    /* row labels and backgrounds */
    for (int j = 0; j < nrows; j++) {
        const tl_track *t = &tl->tracks[order[j]];
        double h = j < ndev ? RH : LH;
        sbuf_printf(&b, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.0f\" fill=\"%s\"/>\n", LM,
           ry[j], PW, h, j < ndev ? "#f3f3f3" : "#f8f8fb");
        sbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"end\">", LM - 8,
           ry[j] + h / 2 + 4, j < ndev ? 12 : 10);
        sb_text(&b, t->name);
        sbuf_printf(&b, "</text>\n");
    }
    char fill[16], label[32];
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        int j = row[e->track];
        if (j < 0)
            continue;
        double x = LM + e->start_s / T * PW, w = e->dur_s / T * PW;
        const tl_track *t = &tl->tracks[e->track];
        if (t->kind == TL_TRACK_COLLECTIVE) {
            sbuf_printf(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"6\" "
               "fill=\"url(#hatchdark)\" stroke=\"#333333\" stroke-width=\"0.5\"/>\n", x,
               ry[j] + RH - 6, w < 0.5 ? 0.5 : w);
            continue;
        }
        if (e->kind == TL_STEP) {
            sbuf_printf(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"1.5\" height=\"%d\" "
               "fill=\"#000000\"/>\n", x, ry[j], RH);
            continue;
        }
        int dark;
        fill_of(e->kind == TL_SEND_F ? TL_F : e->kind == TL_SEND_B ? TL_B : e->kind,
                e->microbatch, fill, sizeof fill, &dark);
        double h = t->kind == TL_TRACK_LINK ? LH : RH - (j < ndev ? 7 : 0);
        sbuf_printf(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
           "stroke=\"#ffffff\" stroke-width=\"0.4\"/>\n", x, ry[j], w < 0.3 ? 0.3 : w, h,
           fill);
        if (e->kind == TL_W)
            sbuf_printf(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
               "fill=\"url(#hatch)\"/>\n", x, ry[j], w, h);
        if (t->kind == TL_TRACK_DEVICE && w >= 18) {
            snprintf(label, sizeof label, "%s%d", tl_kind_name(e->kind), e->microbatch);
            sbuf_printf(&b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
               "fill=\"%s\">%s</text>\n", x + w / 2, ry[j] + h / 2 + 3.5,
               dark ? "#ffffff" : "#000000", label);
        }
    }
    /* time axis */
    sbuf_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000000\"/>\n", LM,
       axis_y, LM + PW, axis_y);
    double step = nice_step(T / unit, 10);
    for (double v = 0; isfinite(step) && step > 0 && v <= T / unit + 1e-9 * step; v += step) {
        double x = LM + v * unit / T * PW;
        sbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
           "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\" "
           "stroke-opacity=\"0.08\"/>\n"
           "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
           x, axis_y, x, axis_y + 5, x, TOP, x, axis_y, x, axis_y + 18, v);
    }
    sbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">time (%s)"
       "</text>\n", LM + PW / 2, axis_y + 36, uname);
    /* legend: kinds (shown in microbatch 0's hue) and the microbatch hues */
    double ly = axis_y + 56, lx = LM;
    for (int k = TL_F; k <= TL_W; k++) {
        int dark;
        fill_of(k, 0, fill, sizeof fill, &dark);
        sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"14\" fill=\"%s\"/>\n", lx,
           ly - 11, fill);
        if (k == TL_W)
            sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"14\" "
               "fill=\"url(#hatch)\"/>\n", lx, ly - 11);
        sbuf_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", lx + 28, ly,
           kind_label[k]);
        lx += 160;
    }
    sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"3\" height=\"14\" fill=\"#000000\"/>"
       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">optimizer step</text>\n", lx, ly - 11,
       lx + 10, ly);
    lx += 130;
    sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"6\" fill=\"url(#hatchdark)\" "
       "stroke=\"#333333\" stroke-width=\"0.5\"/><text x=\"%.1f\" y=\"%.1f\" "
       "font-size=\"12\">all-reduce</text>\n", lx, ly - 6, lx + 28, ly);
    ly += 26;
    sbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">colour = microbatch mod 10:</text>\n",
       LM, ly);
    for (int m = 0; m < 10; m++) {
        int dark;
        fill_of(TL_I, m, fill, sizeof fill, &dark);
        double x = LM + 200 + m * 34;
        sbuf_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"28\" height=\"15\" fill=\"%s\"/>"
           "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
           "fill=\"%s\">%d</text>\n", x, ly - 12, fill, x + 14, ly - 1,
           dark ? "#ffffff" : "#000000", m);
    }
    sbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#555555\">links: transfers "
       "(activations light, gradients dark) hold the link for bytes / bandwidth</text>\n",
       LM + 560, ly);
    sbuf_printf(&b, "</svg>\n");
    free(row);
    free(order);
    free(ry);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.n;
    return b.p;
}

int sim_write_svg(const sim_report *r, const char *path, plumb_err *err)
{
    if (!r->tl)
        return err_set(err, path, NULL, "the report has no timeline (run with a timeline)");
    size_t n;
    char *text = sim_svg_text(r, &n);
    if (!text)
        return err_set(err, path, NULL, "out of memory writing the SVG");
    int rc = file_write_atomic(path, text, n, err);
    free(text);
    return rc;
}
