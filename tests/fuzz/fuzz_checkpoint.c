/* fuzz_checkpoint.c: libFuzzer entry point for the checkpoint reader (`plumb train
 * --resume`). The input is written to a temporary file and read against a small fixed
 * model (with each optimizer's state size). Any input must be rejected with a message or
 * accepted with a step >= 0; ckpt_peek (the header and size only) must accept what ckpt_load
 * accepts and refuse what it refuses except for a tensor's damage, and an accepted file must
 * save back to the same bytes. Anything else (crash, leak, UB, disagreement) is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/checkpoint.h"
#include "exec/model.h"

static const char *SPEC =
    "{\"format\": \"plumb-model/1\", \"name\": \"fuzz\", \"input\": [6], \"classes\": 2,"
    " \"layers\": [{\"type\": \"linear\", \"out\": 3}, {\"type\": \"relu\"},"
    " {\"type\": \"linear\", \"out\": 2}, {\"type\": \"softmax_cross_entropy\"}]}";

static int write_file(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(d, 1, n, f);
    return fclose(f) || w != n ? -1 : 0;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = malloc(1 << 16);
    *n = buf ? fread(buf, 1, 1 << 16, f) : 0;
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static model *m;
    static char in[64], out[64];
    plumb_err err;
    if (!m) {
        m = model_parse("fuzz-model.json", SPEC, &err);
        if (!m) abort();
        snprintf(in, sizeof in, "/tmp/plumb-fuzz-ck-%d.in", (int)getpid());
        snprintf(out, sizeof out, "/tmp/plumb-fuzz-ck-%d.out", (int)getpid());
    }
    if (write_file(in, data, size)) return 0;
    int kind = -1;
    long step = -1;
    int peek = ckpt_peek(in, m, &kind, &step, &err);
    if (peek && !err.msg[0]) abort();
    ckpt c;
    int rc = ckpt_load(in, m, &c, &err);
    if (rc && !err.msg[0]) abort();
    if (rc == 0 && peek) abort(); /* peek (the header) accepts every file load accepts */
    if (rc && !peek && !strstr(err.msg, "checksum: expected") && !strstr(err.msg, "finite"))
        abort(); /* and refuses the rest, but for damage inside a tensor */
    if (rc == 0) {
        if (c.step < 0 || c.step != step || c.opt_kind != kind || !c.w) abort();
        if (ckpt_save(out, m, &c, &err)) abort();
        size_t n = 0;
        uint8_t *back = read_file(out, &n);
        if (!back || n != size || memcmp(back, data, size)) abort(); /* saves to the same bytes */
        free(back);
        ckpt_free(&c);
        unlink(out);
    }
    unlink(in);
    return 0;
}
