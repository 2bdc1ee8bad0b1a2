/* err.h: plumb's error record. Library functions never print or exit; they fill a
 * plumb_err and return a failure code, and the CLI prints the one line
 * "plumb: FILE: FIELD.PATH: what was expected (got ...)" and exits 2. */
#ifndef PLUMB_ERR_H
#define PLUMB_ERR_H

#include <stdarg.h>

#define PLUMB_ERR_MAX 1024

typedef struct plumb_err {
    char msg[PLUMB_ERR_MAX]; /* full message without the "plumb: " prefix; "" when no error */
} plumb_err;

/* Clears e (e may be NULL). */
void err_clear(plumb_err *e);

/* Formats the message "FILE: PATH: text" into e (either of file/path may be NULL or "",
 * then it is left out). Always returns -1 so callers can `return err_set(...)`. */
int err_set(plumb_err *e, const char *file, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prints "plumb: <msg>" on one line to stderr. */
void err_print(const plumb_err *e);

/* Exit status for bad user input (malformed files, bad options). */
#define PLUMB_EXIT_BADINPUT 2

#endif
