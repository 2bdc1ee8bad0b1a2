/* replay.c: a main() for the fuzz targets without libFuzzer, so that `make test` runs every
 * target over its seeds and past findings (tests/e2e/fuzz-replay.sh) with the project's own
 * compiler and sanitizers. Each argument is one input file; a target's finding aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bytes of path (malloc'd; *n of them, plus a NUL not counted), or NULL. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0, got;
    do {
        if (len + 4096 > cap) {
            cap = 2 * cap + 4096;
            uint8_t *b = realloc(buf, cap + 1);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        size_t n = 0;
        uint8_t *d = slurp(argv[i], &n);
        if (!d) {
            fprintf(stderr, "replay: %s: cannot read\n", argv[i]);
            return 2;
        }
        LLVMFuzzerTestOneInput(d, n);
        free(d);
    }
    printf("replayed %d input(s)\n", argc - 1);
    return 0;
}
