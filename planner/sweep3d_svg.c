/* sweep3d_svg.c: the picture of a transformer's sweep (planner/sweep3d.h): days to train the
 * token budget (log scale, across) against its cost (up), one point per GPU count that fits,
 * labelled with its GPUs; the Pareto front (no other count both sooner and cheaper) filled
 * and joined, the others hollow; the deadline as a dashed line; the runtime and the loss of
 * every layout where they are not the defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/svg.h"
#include "planner/llm_profile.h"
#include "planner/sweep3d.h"

#define W 760.0
#define H 470.0
#define PL 90.0  /* plot area: left, right, top, bottom margins */
#define PR 40.0
#define PT 56.0
#define PB 64.0

typedef struct axes {
    double lx0, lx1;   /* log10 of the days at the left and right edges */
    double y0, y1;     /* cost at the bottom and the top */
} axes;

/* A cost as "1.04M", "980k" or "12.5". */
static void fmt_cost(char *buf, size_t n, double c)
{
    if (c >= 1e6) snprintf(buf, n, "%.2fM", c / 1e6);
    else if (c >= 1e3) snprintf(buf, n, "%.0fk", c / 1e3);
    else snprintf(buf, n, "%.3g", c);
}

static double px(const axes *a, double days)
{
    return PL + (log10(days) - a->lx0) / (a->lx1 - a->lx0) * (W - PL - PR);
}

static double py(const axes *a, double cost)
{
    return H - PB - (cost - a->y0) / (a->y1 - a->y0) * (H - PT - PB);
}

/* The axes around the points (days > 0): whole decades across; up, the costs' range
 * widened to whole steps (costs vary little with the GPUs, so 0 is not on the axis). 0, or
 * -1 when no point has days. */
static int axes_of(const sweep3d_result *r, axes *a)
{
    double dmin = INFINITY, dmax = 0, cmax = 0, cmin = INFINITY;
    for (int i = 0; i < r->n; i++) {
        const sweep3d_point *p = &r->pts[i];
        if (!p->ok || !(p->days > 0)) continue;
        if (p->days < dmin) dmin = p->days;
        if (p->days > dmax) dmax = p->days;
        if (p->cost > cmax) cmax = p->cost;
        if (p->cost < cmin) cmin = p->cost;
    }
    if (r->deadline_days > 0 && dmax > 0) {
        if (r->deadline_days < dmin) dmin = r->deadline_days;
        if (r->deadline_days > dmax) dmax = r->deadline_days;
    }
    if (!(dmax > 0)) return -1;
    a->lx0 = floor(log10(dmin));
    a->lx1 = ceil(log10(dmax));
    if (a->lx1 <= a->lx0) a->lx1 = a->lx0 + 1;
    double span = cmax - cmin > 0.02 * cmax ? cmax - cmin : 0.02 * cmax + 1e-9;
    double step = svg_nice_step(span * 1.3, 5);
    a->y0 = floor((cmin - 0.15 * span) / step) * step;
    a->y1 = ceil((cmax + 0.15 * span) / step) * step;
    if (a->y0 < 0) a->y0 = 0;
    return 0;
}

static void draw_axes(sbuf *b, const axes *a, const sweep3d_result *r)
{
    double x0 = PL, x1 = W - PR, y0 = H - PB, yt = PT;
    sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                "stroke=\"#888\"/>\n", x0, yt, x1 - x0, y0 - yt);
    for (int k = (int)a->lx0; k <= (int)a->lx1; k++)
        for (int m = 1; m <= 5; m += (m == 1 ? 1 : 3)) { /* 1, 2, 5 x 10^k */
            double d = m * pow(10, k), lx = log10(d);
            if (lx < a->lx0 - 1e-9 || lx > a->lx1 + 1e-9) continue;
            double x = px(a, d);
            sbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>"
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, yt,
                        x, y0, m == 1 ? "#ddd" : "#f0f0f0", x, y0 + 16, d);
        }
    double step = svg_nice_step(a->y1 - a->y0, 5);
    for (double c = a->y0; c <= a->y1 + step * 1e-9; c += step) {
        double y = py(a, c);
        char t[24];
        fmt_cost(t, sizeof t, c);
        sbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0, y, x1,
                    y, x0 - 6, y + 4, t);
    }
    sbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">days to train %.3g "
                "tokens (log scale)</text>\n", (x0 + x1) / 2, H - 22, r->tokens);
    sbuf_printf(b, "<text transform=\"translate(22 %.1f) rotate(-90)\" text-anchor=\"middle\">"
                "%s</text>\n", (yt + y0) / 2, r->price > 0 ? "cost (USD)" : "cost (GPU-hours)");
}

char *sweep3d_svg(const sweep3d_result *r, size_t *len)
{
    axes a;
    if (!(r->tokens > 0) || axes_of(r, &a)) return NULL;
    sbuf b = {0};
    svg_begin(&b, W, H, 12);
    sbuf_printf(&b, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">plumb "
                "sweep: ", W / 2);
    svg_escape(&b, r->model);
    sbuf_printf(&b, " on ");
    svg_escape(&b, r->cluster);
    sbuf_printf(&b, ": time against cost of %.3g tokens</text>\n", r->tokens);
    sbuf_printf(&b, "<text x=\"%.0f\" y=\"40\" text-anchor=\"middle\" fill=\"#555\">a point: the "
                "best layout on that many GPUs; filled: the Pareto front (none both sooner "
                "and cheaper); cost axis not from 0</text>\n", W / 2);
    /* the settings of every layout, as the table's lines name them: the runtime, and the
     * loss where it is fused (plain text: no character of either needs escaping) */
    char rt[160];
    search3d_runtime_text(&r->opts, rt, sizeof rt);
    int ce = r->opts.cross_entropy != LLM_CE_UNFUSED;
    if (rt[0] || ce) {
        sbuf_printf(&b, "<text class=\"runtime\" x=\"8\" y=\"%.0f\" font-size=\"11\" "
                    "fill=\"#555\">", H - 6);
        if (rt[0]) sbuf_printf(&b, "runtime of every layout: %s", rt);
        if (ce)
            sbuf_printf(&b, "%sloss of every layout: cross-entropy %s", rt[0] ? "; " : "",
                        llm_cross_entropy_name((llm_cross_entropy)r->opts.cross_entropy));
        sbuf_printf(&b, "</text>\n");
    }
    draw_axes(&b, &a, r);
    if (r->deadline_days > 0) {
        double x = px(&a, r->deadline_days);
        sbuf_printf(&b, "<line class=\"deadline\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                    "y2=\"%.1f\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/><text x=\"%.1f\" "
                    "y=\"%.1f\" fill=\"#c0392b\">deadline %g days</text>\n", x, PT, x, H - PB,
                    x + 4, PT + 14, r->deadline_days);
    }
    /* the front, joined in order of days (the counts ascend, so days descend) */
    sbuf_printf(&b, "<polyline class=\"front\" fill=\"none\" stroke=\"#2471a3\" "
                "stroke-width=\"2\" points=\"");
    for (int i = r->n - 1; i >= 0; i--) {
        const sweep3d_point *p = &r->pts[i];
        if (p->pareto && p->days > 0)
            sbuf_printf(&b, "%.1f,%.1f ", px(&a, p->days), py(&a, p->cost));
    }
    sbuf_printf(&b, "\"/>\n");
    for (int i = 0; i < r->n; i++) {
        const sweep3d_point *p = &r->pts[i];
        if (!p->ok || !(p->days > 0)) continue;
        double x = px(&a, p->days), y = py(&a, p->cost);
        char c[24];
        fmt_cost(c, sizeof c, p->cost);
        /* two lines under or over the point, alternating, so neighbours do not collide */
        double ty = i % 2 ? y + 20 : y - 22;
        sbuf_printf(&b, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" "
                    "stroke=\"#2471a3\" stroke-width=\"1.5\"/><text x=\"%.1f\" y=\"%.1f\" "
                    "text-anchor=\"middle\" font-weight=\"bold\">%d GPUs</text><text "
                    "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%.1f d, %s"
                    "</text>\n", p->pareto ? "point front" : "point", x, y,
                    p->pareto ? "#2471a3" : "#ffffff", x, ty, p->gpus, x, ty + 13, p->days, c);
    }
    sbuf_printf(&b, "</svg>\n");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}
