/* fuzz_trace.c: libFuzzer entry point for the trace reader (Chrome trace-event JSON, as
 * `plumb sim --trace` and `plumb train --trace` write it) and the comparison summary built
 * on it (`plumb compare`). The first byte is the number of iterations to skip (0-3); the
 * rest is the file. Any input must be rejected with a message or read as a timeline whose
 * events name its tracks, whose written form reads back and writes again unchanged, whose
 * counted size (timeline_chrome_size) is the written length, whose streamed form (timeline_chrome_stream, as `plumb sim
 * --trace` writes it) is the same bytes and within a shorter limit a refusal with the
 * written length, and which summarises or fails with a message. Anything else (crash,
 * leak, UB) is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/timeline.h"
#include "sim/compare.h"

/* The timeline of a JSON text, or NULL (a rejection must say why). */
static timeline *read_text(const char *file, const char *text, size_t len)
{
    plumb_err err;
    cJSON *root = json_parse_text(file, text, len, &err);
    if (!root) return NULL;
    timeline *tl = timeline_from_chrome_json(root, file, &err);
    cJSON_Delete(root);
    if (!tl && !err.msg[0]) abort();
    return tl;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int skip = data[0] % 4;
    timeline *tl = read_text("fuzz.json", (const char *)data + 1, size - 1);
    if (!tl) return 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (e->track < 0 || e->track >= tl->ntracks) abort();
        if (e->kind < 0 || e->kind >= TL_NKINDS || e->iteration < 0) abort();
        if (!(e->dur_s >= 0) || !(e->start_s >= 0)) abort(); /* NaN fails too */
    }
    size_t n1, n2;
    char *t1 = timeline_chrome_text(tl, &n1);
    if (!t1 || timeline_chrome_size(tl) != n1) abort();
    size_t lim = n1 - 1 - (size_t)skip * (n1 / 4); /* the text is never under 8 bytes */
    char *st = NULL;
    size_t stn = 0, slen = 0;
    FILE *f = open_memstream(&st, &stn);
    if (!f) abort();
    int src = timeline_chrome_stream(tl, f, 0, &slen);
    if (fclose(f) || src != 0 || slen != n1 || stn != n1 || memcmp(st, t1, n1)) abort();
    free(st);
    st = NULL;
    if (!(f = open_memstream(&st, &stn))) abort();
    src = timeline_chrome_stream(tl, f, lim, &slen);
    if (fclose(f) || src != 1 || slen != n1 || memcmp(st, t1, stn)) abort();
    free(st);
    timeline *b = read_text("again.json", t1, n1);
    if (!b || b->n != tl->n || b->ntracks != tl->ntracks) abort();
    char *t2 = timeline_chrome_text(b, &n2);
    timeline *c = t2 ? read_text("again2.json", t2, n2) : NULL;
    size_t n3;
    char *t3 = c ? timeline_chrome_text(c, &n3) : NULL;
    if (!t3 || n3 != n2 || memcmp(t2, t3, n2)) abort(); /* written form is a fixed point */
    compare_side side;
    plumb_err err;
    if (compare_side_from_timeline(tl, skip, "fuzz.json", "trace", &side, &err) == 0) {
        if (side.nstages < 0 || side.used < 0 || side.used > side.iterations) abort();
        compare_side_free(&side);
    } else if (!err.msg[0]) {
        abort();
    }
    free(t3);
    free(t2);
    free(t1);
    timeline_free(c);
    timeline_free(b);
    timeline_free(tl);
    return 0;
}
