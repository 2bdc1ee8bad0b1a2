/* svg.h: the few pieces every plumb SVG picture shares (sim/svg.c's timeline, planner/
 * sweep.c's sweep plot): the document header, text escaping and axis tick steps. */
#ifndef PLUMB_SVG_H
#define PLUMB_SVG_H

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

#endif
