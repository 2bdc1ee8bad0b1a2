/* data.c: Fashion-MNIST IDX loading (zlib), synthetic images and tokens, byte-level text,
 * shuffling and batch gathering. */
#include "exec/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/json.h"
#include "core/schedule.h"

#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f

const char *data_default_kind(const model *m)
{
    if (!m->tokens && shape_numel(m->in_ndim, m->in_shape) == 784 && m->classes == 10)
        return "fashion-mnist";
    if (m->tokens && m->classes >= 256) return "text";
    return "synthetic";
}

void data_free(dataset *d)
{
    if (!d) return;
    free(d->name);
    free(d->x);
    free(d->y);
    free(d);
}

static dataset *data_new(const char *name, int n, size_t numel, int tps, int classes,
                         plumb_err *err)
{
    double need = (double)n * ((double)numel + tps) * sizeof(float),
           have = sched_memory_available();
    if (need > have) { /* refused, not allocated and filled until the machine stops */
        err_set(err, NULL, NULL, "%d %s samples of %zu values need %.1f GiB, above the %.1f "
                "GiB this process may use: expected fewer samples (--samples) or a smaller "
                "model input", n, name, numel, need / 1073741824.0, have / 1073741824.0);
        return NULL;
    }
    dataset *d = calloc(1, sizeof *d);
    if (d) {
        d->name = strdup(name);
        d->n = n;
        d->sample_numel = numel;
        d->targets_per_sample = tps;
        d->classes = classes;
        d->x = malloc((size_t)n * numel * sizeof *d->x + 1);
        d->y = malloc((size_t)n * tps * sizeof *d->y + 1);
    }
    if (!d || !d->name || !d->x || !d->y) {
        data_free(d);
        err_set(err, NULL, NULL, "out of memory for %d samples of %zu values", n, numel);
        return NULL;
    }
    return d;
}

/* Reads a whole gzip file into memory. Returns the bytes (caller frees) or NULL. */
static unsigned char *gz_read_all(const char *path, size_t *len, plumb_err *err)
{
    FILE *raw = file_open_read(path, "a gzip file", err);
    if (!raw) return NULL;
    int fd = dup(fileno(raw));
    fclose(raw);
    gzFile f = fd < 0 ? NULL : gzdopen(fd, "rb");
    if (!f) {
        if (fd >= 0) close(fd);
        err_set(err, path, NULL, "cannot open: %s", errno ? strerror(errno) : "gzip error");
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            unsigned char *nb = cap < ((size_t)1 << 30) ? realloc(buf, cap * 2) : NULL;
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        int got = gzread(f, buf + n, (unsigned)(cap - n));
        if (got < 0) {
            int code;
            const char *msg = gzerror(f, &code);
            err_set(err, path, NULL, "not a readable gzip file: %s", msg);
            free(buf);
            gzclose(f);
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    gzclose(f);
    if (!buf) err_set(err, path, NULL, "out of memory or file larger than 1 GiB");
    *len = n;
    return buf;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Parses an IDX header: magic 0x0000080N (unsigned bytes, N dims), then N sizes. */
static int idx_header(const char *path, const unsigned char *b, size_t len, int ndims,
                      uint32_t *dims, plumb_err *err)
{
    if (len < 4 + 4 * (size_t)ndims)
        return err_set(err, path, NULL, "truncated IDX header: expected %d bytes (got %zu)",
                       4 + 4 * ndims, len);
    uint32_t magic = be32(b), want = 0x800u + (uint32_t)ndims;
    if (magic != want)
        return err_set(err, path, NULL,
                       "bad IDX magic number: expected 0x%08x (unsigned bytes, %d dimensions) "
                       "(got 0x%08x)",
                       want, ndims, magic);
    for (int i = 0; i < ndims; i++) dims[i] = be32(b + 4 + 4 * i);
    return 0;
}

dataset *data_fashion_mnist(const char *dir, int train, plumb_err *err)
{
    char ip[4096], lp[4096];
    const char *pre = train ? "train" : "t10k";
    if (!dir) dir = FMNIST_DIR;
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, pre);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, pre);
    size_t il = 0, ll = 0;
    unsigned char *ib = NULL, *lb = NULL;
    dataset *d = NULL;
    uint32_t idims[3], ldims[1];
    if (!(ib = gz_read_all(ip, &il, err)) || idx_header(ip, ib, il, 3, idims, err)) goto done;
    if (idims[1] != 28 || idims[2] != 28) {
        err_set(err, ip, NULL, "expected 28x28 images (got %ux%u)", idims[1], idims[2]);
        goto done;
    }
    if (idims[0] == 0 || il != 16 + (size_t)idims[0] * 784) {
        err_set(err, ip, NULL, "expected %zu bytes for %u images of 28x28 (got %zu)%s",
                16 + (size_t)idims[0] * 784, idims[0], il,
                il < 16 + (size_t)idims[0] * 784 ? ": truncated" : "");
        goto done;
    }
    if (!(lb = gz_read_all(lp, &ll, err)) || idx_header(lp, lb, ll, 1, ldims, err)) goto done;
    if (ldims[0] != idims[0]) {
        err_set(err, lp, NULL, "expected %u labels, one per image of %s (got %u)", idims[0], ip,
                ldims[0]);
        goto done;
    }
    if (ll != 8 + (size_t)ldims[0]) {
        err_set(err, lp, NULL, "expected %zu bytes for %u labels (got %zu)",
                8 + (size_t)ldims[0], ldims[0], ll);
        goto done;
    }
    char name[64];
    snprintf(name, sizeof name, "fashion-mnist %s", train ? "train" : "test");
    if (!(d = data_new(name, (int)idims[0], 784, 1, 10, err))) goto done;
    for (size_t i = 0; i < (size_t)d->n * 784; i++)
        d->x[i] = ((float)ib[16 + i] / 255.0f - FMNIST_MEAN) / FMNIST_STD;
    for (int i = 0; i < d->n; i++) {
        if (lb[8 + i] >= 10) {
            err_set(err, lp, NULL, "label %d: expected a class from 0 to 9 (got %u)", i,
                    lb[8 + i]);
            data_free(d);
            d = NULL;
            goto done;
        }
        d->y[i] = lb[8 + i];
    }
done:
    free(ib);
    free(lb);
    return d;
}

dataset *data_synthetic(const model *m, int n, unsigned long long seed, plumb_err *err)
{
    size_t numel = shape_numel(m->in_ndim, m->in_shape);
    int tps = model_targets_per_sample(m);
    dataset *d = data_new("synthetic", n, numel, tps, m->classes, err);
    if (!d) return NULL;
    unsigned long long s = seed * 0x2545F4914F6CDD1DULL + 17;
    if (m->tokens) {
        /* random streams: each sample's targets are its inputs shifted by one */
        int T = m->in_shape[0];
        for (int i = 0; i < n; i++) {
            int prev = (int)(rng_next(&s) % (unsigned)m->classes);
            for (int t = 0; t < T; t++) {
                int nx = (int)(rng_next(&s) % (unsigned)m->classes);
                d->x[(size_t)i * T + t] = (float)prev;
                d->y[(size_t)i * T + t] = nx;
                prev = nx;
            }
        }
        return d;
    }
    double *score = calloc((size_t)m->classes, sizeof *score);
    if (!score) { data_free(d); err_set(err, NULL, NULL, "out of memory"); return NULL; }
    for (int i = 0; i < n; i++) {
        float *x = d->x + (size_t)i * numel;
        memset(score, 0, (size_t)m->classes * sizeof *score);
        for (size_t j = 0; j < numel; j++) {
            x[j] = (float)(2.0 * rng_uniform(&s) - 1.0);
            score[j % (size_t)m->classes] += x[j];
        }
        int best = 0;
        for (int c = 1; c < m->classes; c++)
            if (score[c] > score[best]) best = c;
        for (int t = 0; t < tps; t++) d->y[(size_t)i * tps + t] = best;
    }
    free(score);
    return d;
}

/* The built-in grammar: sentences of articles, adjectives, nouns, verbs and places. */
static const char *const g_adj[] = {"small", "quick", "red", "quiet", "old", "bright",
                                    "heavy", "green", "lazy", "clever"};
static const char *const g_noun[] = {"cat", "dog", "bird", "river", "train", "garden",
                                     "teacher", "engine", "lamp", "storm", "farmer", "ship"};
static const char *const g_verb[] = {"sees", "follows", "paints", "carries", "finds",
                                     "watches", "builds", "moves"};
static const char *const g_prep[] = {"near", "under", "behind", "over", "beside"};
#define PICK(a, s) a[rng_next(s) % (sizeof a / sizeof a[0])]

static size_t grammar_text(char *buf, size_t cap, unsigned long long seed)
{
    unsigned long long s = seed ^ 0x5DEECE66DULL;
    size_t n = 0;
    while (n + 160 < cap) {
        int form = (int)(rng_next(&s) % 3);
        int w;
        if (form == 0)
            w = snprintf(buf + n, cap - n, "the %s %s %s the %s. ", PICK(g_adj, &s),
                         PICK(g_noun, &s), PICK(g_verb, &s), PICK(g_noun, &s));
        else if (form == 1)
            w = snprintf(buf + n, cap - n, "a %s %s %s the %s %s. ", PICK(g_noun, &s),
                         PICK(g_verb, &s), PICK(g_prep, &s), PICK(g_adj, &s), PICK(g_noun, &s));
        else
            w = snprintf(buf + n, cap - n, "every %s %s a %s %s. ", PICK(g_noun, &s),
                         PICK(g_verb, &s), PICK(g_adj, &s), PICK(g_noun, &s));
        if (w < 0) break;
        n += (size_t)w;
        if (rng_next(&s) % 8 == 0) buf[n - 1] = '\n';
    }
    return n;
}

dataset *data_text(const model *m, const char *path, int n, unsigned long long seed,
                   plumb_err *err)
{
    if (!m->tokens || m->classes < 256)
        { err_set(err, NULL, "--data", "text data needs a token model (embedding first) with "
                  "at least 256 classes for byte ids (got %s with %d classes)",
                  m->tokens ? "a token model" : "a model without an embedding", m->classes);
          return NULL; }
    int T = m->in_shape[0];
    char *text = NULL;
    size_t len = 0;
    if (path) {
        FILE *f = file_open_read(path, "a text file", err);
        if (!f) return NULL;
        size_t cap = 1 << 16;
        text = malloc(cap);
        size_t got;
        while (text && (got = fread(text + len, 1, cap - len, f)) > 0) {
            len += got;
            if (len == cap) {
                char *nt = cap < ((size_t)1 << 30) ? realloc(text, cap * 2) : NULL;
                if (!nt) { free(text); text = NULL; break; }
                text = nt;
                cap *= 2;
            }
        }
        fclose(f);
        if (!text) { err_set(err, path, NULL, "out of memory or larger than 1 GiB"); return NULL; }
        if (len < (size_t)T + 1) {
            err_set(err, path, NULL, "expected at least %d bytes of text for the context of "
                    "%d tokens (got %zu)", T + 1, T, len);
            free(text);
            return NULL;
        }
    } else {
        size_t cap = (size_t)T * 64 + 4096;
        if (cap < ((size_t)1 << 18)) cap = (size_t)1 << 18;
        text = malloc(cap);
        if (!text) { err_set(err, NULL, NULL, "out of memory"); return NULL; }
        len = grammar_text(text, cap, seed);
    }
    dataset *d = data_new(path ? path : "text", n, (size_t)T, T, m->classes, err);
    if (!d) { free(text); return NULL; }
    unsigned long long s = seed * 0x9E3779B97F4A7C15ULL + 3;
    for (int i = 0; i < n; i++) {
        size_t o = rng_next(&s) % (len - (size_t)T);
        for (int t = 0; t < T; t++) {
            d->x[(size_t)i * T + t] = (float)(unsigned char)text[o + t];
            d->y[(size_t)i * T + t] = (unsigned char)text[o + t + 1];
        }
    }
    free(text);
    return d;
}

int data_check_model(const dataset *d, const model *m, plumb_err *err)
{
    size_t numel = shape_numel(m->in_ndim, m->in_shape);
    char sb[64];
    if (d->sample_numel != numel)
        return err_set(err, NULL, "input", "the model expects %zu values per sample %s, but "
                       "the %s data has %zu", numel,
                       shape_format(m->in_ndim, m->in_shape, sb, sizeof sb), d->name,
                       d->sample_numel);
    if (d->targets_per_sample != model_targets_per_sample(m))
        return err_set(err, NULL, "layers", "the model's loss expects %d targets per sample, "
                       "but the %s data has %d", model_targets_per_sample(m), d->name,
                       d->targets_per_sample);
    if (d->classes > m->classes)
        return err_set(err, NULL, "classes", "expected at least %d for the %s data (got %d)",
                       d->classes, d->name, m->classes);
    return 0;
}

void data_shuffle(int *perm, int n, unsigned long long seed, int epoch)
{
    unsigned long long s = seed * 0xD1342543DE82EF95ULL + (unsigned long long)epoch + 1;
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&s) % (unsigned long long)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void data_gather(const dataset *d, const int *idx, int B, float *x, int32_t *y)
{
    for (int b = 0; b < B; b++) {
        memcpy(x + (size_t)b * d->sample_numel, d->x + (size_t)idx[b] * d->sample_numel,
               d->sample_numel * sizeof *x);
        memcpy(y + (size_t)b * d->targets_per_sample,
               d->y + (size_t)idx[b] * d->targets_per_sample,
               (size_t)d->targets_per_sample * sizeof *y);
    }
}
