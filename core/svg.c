/* svg.c: the SVG document header, text escaping, tick steps and per-pixel busy fractions
 * the plots share. */
#include "svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void svg_begin(sbuf *b, double w, double h, int font_size)
{
    sbuf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, "
                "sans-serif\" font-size=\"%d\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
                w, h, w, h, font_size);
}

void svg_escape(sbuf *b, const char *s)
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

double svg_nice_step(double span, int n)
{
    if (!(span > 0) || n < 1)
        return 1;
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static int cmp_span(const void *x, const void *y)
{
    const svg_span *a = x, *b = y;
    return (a->u0 > b->u0) - (a->u0 < b->u0);
}

/* Adds [u0, u1) (0 <= u0 <= u1 <= w) to the pixels it covers. */
static void add_span(double *busy, int w, double u0, double u1)
{
    int p = (int)u0;
    for (; p < w && p < u1; p++) {
        double lo = u0 > p ? u0 : p, hi = u1 < p + 1 ? u1 : p + 1;
        if (hi > lo) busy[p] += hi - lo;
    }
}

void svg_pixel_busy(svg_span *sp, size_t n, double *busy, int w)
{
    memset(busy, 0, (size_t)w * sizeof *busy);
    qsort(sp, n, sizeof *sp, cmp_span);
    /* sweep the spans by start, adding each maximal union of overlapping ones once */
    double lo = 0, hi = -1;
    for (size_t i = 0; i < n; i++) {
        double u0 = sp[i].u0 < 0 ? 0 : sp[i].u0, u1 = sp[i].u1 > w ? w : sp[i].u1;
        if (!(u1 > u0)) continue; /* empty, outside the row, or NaN */
        if (u0 > hi) {
            if (hi > lo) add_span(busy, w, lo, hi);
            lo = u0, hi = u1;
        } else if (u1 > hi) {
            hi = u1;
        }
    }
    if (hi > lo) add_span(busy, w, lo, hi);
    for (int p = 0; p < w; p++)
        if (busy[p] > 1) busy[p] = 1; /* rounding of the sums */
}
