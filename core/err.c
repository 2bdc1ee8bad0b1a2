/* err.c: the one-line error record used by every loader and verb. */
#include "err.h"

#include <stdio.h>
#include <string.h>

void err_clear(plumb_err *e)
{
    if (e) e->msg[0] = '\0';
}

int err_set(plumb_err *e, const char *file, const char *path, const char *fmt, ...)
{
    if (!e) return -1;
    size_t n = 0;
    e->msg[0] = '\0';
    if (file && *file) n += (size_t)snprintf(e->msg + n, sizeof e->msg - n, "%s: ", file);
    if (n < sizeof e->msg && path && *path)
        n += (size_t)snprintf(e->msg + n, sizeof e->msg - n, "%s: ", path);
    if (n < sizeof e->msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
        va_end(ap);
    }
    /* keep it one line */
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return -1;
}

void err_print(const plumb_err *e)
{
    fprintf(stderr, "plumb: %s\n", (e && e->msg[0]) ? e->msg : "unknown error");
}
