/* svg.h: the few pieces every plumb SVG picture shares (sim/svg.c's timeline, planner/
 * sweep.c's sweep plot): the document header, text escaping, axis tick steps, and the busy
 * fraction per pixel of spans too narrow to draw one by one. */
#ifndef PLUMB_SVG_H
#define PLUMB_SVG_H

#include <stddef.h>

#include "strbuf.h"

/* Appends the XML declaration, the <svg> element of w x h pixels (viewBox the same, the
 * shared sans-serif font at font_size) and a white background. The caller closes it with
 * "</svg>\n". */
void svg_begin(sbuf *b, double w, double h, int font_size);

/* Appends s with <, >, & and " escaped for SVG text and attribute values. */
void svg_escape(sbuf *b, const char *s);

/* A tick step of 1, 2 or 5 x 10^k giving about n ticks over span (> 0); 1 when span is
 * not positive. */
double svg_nice_step(double span, int n);

/* An interval of a row of pixels, in pixels from the row's left edge: [u0, u1). */
typedef struct svg_span {
    double u0, u1;
} svg_span;

/* The busy fraction of each pixel of a row w pixels wide: busy[p] is the length of the
 * union of the spans (clipped to [0, w]) inside pixel p's [p, p + 1), so overlapping spans
 * count once and every busy[p] is in [0, 1]. Sorts sp (n spans) by u0 in place; sets all
 * of busy[0 .. w - 1]. */
void svg_pixel_busy(svg_span *sp, size_t n, double *busy, int w);

#endif
