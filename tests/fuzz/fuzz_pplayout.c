/* fuzz_pplayout.c: libFuzzer target for the pipeline layout string (core/pplayout.h,
 * plumb plan --model --pipeline-layout). The first input byte picks the model's blocks and
 * the pipeline ranks; the rest is the string. It must parse or fail with a one-line message,
 * never crash, overflow or run long (the unrolled layout is bounded); a parsed layout must
 * check or fail with one line; one that checks must give blocks summing to the model's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pplayout.h"

/* A message is set and holds no newline; else abort. */
static void one_line(const plumb_err *e)
{
    if (!e->msg[0] || strchr(e->msg, '\n')) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096) return 0;
    int blocks = 1 + data[0] % 32, pp = 1 + (data[0] >> 5);
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0; /* a NUL inside ends the string, as on a command line */
    plumb_err e = {{0}};
    pplayout *l = pplayout_parse(s, &e);
    if (!l) {
        one_line(&e);
        free(s);
        return 0;
    }
    if (l->nstages < 1 || l->nstages > PPLAYOUT_MAX_ITEMS + 1) abort();
    if (pplayout_check(l, blocks, pp, 0, &e) == 0) {
        int *n = malloc((size_t)l->nstages * sizeof *n), sum = 0;
        if (n && pplayout_split(s, blocks, pp, l->nstages / pp, n, &e)) abort();
        for (int k = 0; n && k < l->nstages; k++) {
            if (n[k] < 0) abort();
            sum += n[k];
        }
        if (n && sum != blocks) abort();
        free(n);
    } else {
        one_line(&e);
    }
    pplayout_free(l);
    free(s);
    return 0;
}
