/* svg.c: the SVG document header, text escaping and tick steps the plots share. */
#include "svg.h"

#include <math.h>

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
