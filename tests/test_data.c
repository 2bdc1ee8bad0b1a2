/* test_data.c: Fashion-MNIST loading (the real Debian files and broken copies of them),
 * synthetic and text data, shuffling and gathering. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "exec/data.h"
#include "tests/tmpdir.h"

Test(data, fashion_mnist_real)
{
    plumb_err e = {{0}};
    dataset *te = data_fashion_mnist(NULL, 0, &e);
    cr_assert(te, "%s", e.msg);
    cr_expect_eq(te->n, 10000);
    cr_expect_eq(te->sample_numel, 784u);
    int count[10] = {0};
    double sum = 0;
    for (int i = 0; i < te->n; i++) count[te->y[i]]++;
    for (size_t i = 0; i < (size_t)te->n * 784; i++) sum += te->x[i];
    for (int c = 0; c < 10; c++) cr_expect_eq(count[c], 1000, "class %d", c);
    /* normalized with the training mean: the test mean is close to 0 */
    cr_expect(fabs(sum / (te->n * 784.0)) < 0.05, "mean %g", sum / (te->n * 784.0));
    data_free(te);
}

/* Writes bytes as a gzip file. */
static void write_gz(const char *path, const unsigned char *b, size_t n)
{
    gzFile f = gzopen(path, "wb");
    cr_assert(f);
    if (n) cr_assert_eq(gzwrite(f, b, (unsigned)n), (int)n);
    gzclose(f);
}

static void idx(unsigned char *b, uint32_t magic, int nd, const uint32_t *dims)
{
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(magic >> (24 - 8 * i));
    for (int d = 0; d < nd; d++)
        for (int i = 0; i < 4; i++) b[4 + 4 * d + i] = (unsigned char)(dims[d] >> (24 - 8 * i));
}

/* A t10k pair in dir with `n` images, `nl` labels, magic numbers and size tweaks. */
static void make_pair(const char *dir, uint32_t imagic, uint32_t n, uint32_t rows,
                      size_t cut, uint32_t nl, unsigned char label)
{
    char p[512];
    size_t ilen = 16 + (size_t)n * rows * 28;
    unsigned char *b = calloc(ilen + 8 + nl, 1);
    uint32_t dims[3] = {n, rows, 28};
    idx(b, imagic, 3, dims);
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    write_gz(p, b, ilen - cut);
    uint32_t ld[1] = {nl};
    idx(b, 0x801, 1, ld);
    memset(b + 8, label, nl);
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", dir);
    write_gz(p, b, 8 + nl);
    free(b);
}

static void expect_fail(const char *dir, const char *want)
{
    plumb_err e = {{0}};
    dataset *d = data_fashion_mnist(dir, 0, &e);
    cr_expect_null(d);
    data_free(d);
    cr_expect(strstr(e.msg, want) != NULL, "message \"%s\" lacks \"%s\"", e.msg, want);
}

Test(data, fashion_mnist_broken_files)
{
    char *dir = make_tmpdir_named("data");
    expect_fail(dir, "t10k-images-idx3-ubyte.gz: cannot open");
    make_pair(dir, 0x803, 3, 28, 0, 3, 1);
    plumb_err e = {{0}};
    dataset *d = data_fashion_mnist(dir, 0, &e);
    cr_expect(d, "%s", e.msg);
    if (d) cr_expect_eq(d->n, 3);
    data_free(d);
    make_pair(dir, 0x802, 3, 28, 0, 3, 1);
    expect_fail(dir, "images-idx3-ubyte.gz: bad IDX magic number: expected 0x00000803");
    make_pair(dir, 0x803, 3, 27, 0, 3, 1);
    expect_fail(dir, "expected 28x28 images (got 27x28)");
    make_pair(dir, 0x803, 3, 28, 100, 3, 1);
    expect_fail(dir, "truncated");
    make_pair(dir, 0x803, 3, 28, 0, 4, 1);
    expect_fail(dir, "labels-idx1-ubyte.gz: expected 3 labels, one per image");
    make_pair(dir, 0x803, 3, 28, 0, 3, 10);
    expect_fail(dir, "label 0: expected a class from 0 to 9 (got 10)");
    char p[600];
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    write_gz(p, (const unsigned char *)"\0\0", 2);
    expect_fail(dir, "truncated IDX header");
    cr_assert_eq(rm_tree(dir), 0);
}

static model *mk(const char *text)
{
    plumb_err e = {{0}};
    model *m = model_parse("m", text, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

Test(data, synthetic_images)
{
    model *m = mk("{\"format\":\"plumb-model/1\",\"input\":[2,3,3],\"classes\":4,\"layers\":["
                  "{\"type\":\"flatten\"},{\"type\":\"linear\",\"out\":4},"
                  "{\"type\":\"softmax_cross_entropy\"}]}");
    plumb_err e = {{0}};
    dataset *a = data_synthetic(m, 50, 3, &e), *b = data_synthetic(m, 50, 3, &e);
    cr_assert(a && b);
    cr_expect_eq(memcmp(a->x, b->x, 50 * 18 * sizeof(float)), 0, "deterministic");
    cr_expect_eq(data_check_model(a, m, &e), 0, "%s", e.msg);
    for (int i = 0; i < 50; i++) {
        double s[4] = {0};
        for (int j = 0; j < 18; j++) s[j % 4] += a->x[i * 18 + j];
        int best = 0;
        for (int c = 1; c < 4; c++)
            if (s[c] > s[best]) best = c;
        cr_expect_eq(a->y[i], best);
    }
    data_free(a);
    data_free(b);
    model_free(m);
}

Test(data, text_and_tokens)
{
    model *m = mk("{\"format\":\"plumb-model/1\",\"input\":[16],\"classes\":256,\"layers\":["
                  "{\"type\":\"embedding\",\"vocab\":256,\"dim\":4},"
                  "{\"type\":\"linear\",\"out\":256},{\"type\":\"softmax_cross_entropy\"}]}");
    plumb_err e = {{0}};
    dataset *d = data_text(m, NULL, 20, 1, &e);
    cr_assert(d, "%s", e.msg);
    cr_expect_eq(d->targets_per_sample, 16);
    cr_expect_eq(data_check_model(d, m, &e), 0, "%s", e.msg);
    for (int i = 0; i < 20; i++)
        for (int t = 0; t + 1 < 16; t++)
            cr_expect_eq((int)d->x[i * 16 + t + 1], d->y[i * 16 + t], "targets are next bytes");
    data_free(d);
    dataset *s = data_synthetic(m, 5, 1, &e);
    cr_assert(s);
    for (int i = 0; i < 5 * 16; i++) cr_expect(s->y[i] >= 0 && s->y[i] < 256);
    data_free(s);
    /* a text file shorter than the context */
    char path[] = "/tmp/plumb-text-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(write(fd, "short", 5) == 5);
    close(fd);
    cr_expect_null(data_text(m, path, 3, 1, &e));
    cr_expect(strstr(e.msg, "expected at least 17 bytes of text") != NULL, "%s", e.msg);
    unlink(path);
    model_free(m);
}

Test(data, mismatch_with_model)
{
    model *m = mk("{\"format\":\"plumb-model/1\",\"input\":[10],\"classes\":10,\"layers\":["
                  "{\"type\":\"linear\",\"out\":10},{\"type\":\"softmax_cross_entropy\"}]}");
    plumb_err e = {{0}};
    dataset *d = data_fashion_mnist(NULL, 0, &e);
    cr_assert(d, "%s", e.msg);
    cr_expect_eq(data_check_model(d, m, &e), -1);
    cr_expect(strstr(e.msg, "the model expects 10 values per sample [10]") != NULL, "%s", e.msg);
    cr_expect_null(data_text(m, NULL, 3, 1, &e));
    data_free(d);
    model_free(m);
}

Test(data, shuffle_and_gather)
{
    int a[100], b[100], c[100], seen[100] = {0};
    data_shuffle(a, 100, 7, 0);
    data_shuffle(b, 100, 7, 0);
    data_shuffle(c, 100, 7, 1);
    cr_expect_eq(memcmp(a, b, sizeof a), 0);
    cr_expect_neq(memcmp(a, c, sizeof a), 0);
    for (int i = 0; i < 100; i++) seen[a[i]]++;
    for (int i = 0; i < 100; i++) cr_expect_eq(seen[i], 1);
    float xs[6] = {0, 1, 2, 3, 4, 5}, x[4];
    int32_t ys[3] = {7, 8, 9}, y[2];
    dataset d = {.n = 3, .sample_numel = 2, .targets_per_sample = 1, .x = xs, .y = ys};
    int idx[2] = {2, 0};
    data_gather(&d, idx, 2, x, y);
    cr_expect(x[0] == 4 && x[1] == 5 && x[2] == 0 && y[0] == 9 && y[1] == 7);
}
