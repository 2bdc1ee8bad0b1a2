/* strbuf.c: the growable text buffer (see strbuf.h). */
#include "strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Streaming: writes to b->out while the text is within b->max (counts past it). */
static void sbuf_vstream(sbuf *b, const char *fmt, va_list ap)
{
    int k = b->counting ? vsnprintf(NULL, 0, fmt, ap) : vfprintf(b->out, fmt, ap);
    if (k < 0) {
        b->werr = errno ? errno : EIO;
        return;
    }
    b->n += (size_t)k;
    if (b->max && b->n > b->max)
        b->counting = 1; /* the file is over the limit: the caller removes it */
}

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom || b->werr) return;
    if (b->out) {
        va_list ap;
        va_start(ap, fmt);
        sbuf_vstream(b, fmt, ap);
        va_end(ap);
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = b->counting ? vsnprintf(NULL, 0, fmt, ap)
                            : vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0,
                                        fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->counting || (b->p && (size_t)k < b->cap - b->n)) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 65536) + (size_t)k + 1;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}
