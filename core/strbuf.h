/* strbuf.h: a growable text buffer for the writers that build a whole file in memory
 * before writing it atomically (Chrome trace, SVG pictures). It can also count: the same
 * writer's code then measures its text without storing it, so a size check before writing
 * is the writer's own count and cannot drift from what it writes. And it can stream: the
 * text goes to an open file as it is formatted (the Chrome trace into the temporary file
 * that the atomic write renames into place), counted all the same. */
#ifndef PLUMB_STRBUF_H
#define PLUMB_STRBUF_H

#include <stddef.h>
#include <stdio.h>

typedef struct sbuf {
    char *p;      /* the text, NUL-terminated once anything was written; owned (free it);
                     NULL while counting */
    size_t n;     /* bytes written (or counted), excluding the NUL */
    size_t cap;   /* bytes allocated */
    int oom;      /* set when memory ran out: later writes are ignored */
    int counting; /* 1: nothing is stored, n counts the bytes each write would add */
    size_t max;   /* with out, > 0: once the text is longer than max bytes the buffer only
                     counts and writes nothing more (the caller discards the file) */
    FILE *out;    /* non-NULL: each write goes to out (p stays NULL) */
    int werr;     /* streaming: errno of the first write to out that failed, else 0; later
                     writes are dropped */
} sbuf;

/* Appends printf-style text, growing the buffer (a zeroed sbuf is a valid empty one), or
 * writes it to b->out, or only counts it (see counting, max, out). Out of memory sets
 * b->oom and a failed write to out b->werr; either drops this and every later write. */
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
