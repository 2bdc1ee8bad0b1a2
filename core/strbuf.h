/* strbuf.h: a growable text buffer for the writers that build a whole file in memory
 * before writing it atomically (Chrome trace, SVG pictures). */
#ifndef PLUMB_STRBUF_H
#define PLUMB_STRBUF_H

#include <stddef.h>

typedef struct sbuf {
    char *p;      /* the text, NUL-terminated once anything was written; owned (free it) */
    size_t n;     /* bytes written, excluding the NUL */
    size_t cap;   /* bytes allocated */
    int oom;      /* set when memory ran out: later writes are ignored */
} sbuf;

/* Appends printf-style text, growing the buffer (a zeroed sbuf is a valid empty one).
 * Out of memory sets b->oom and drops this and every later write. */
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
