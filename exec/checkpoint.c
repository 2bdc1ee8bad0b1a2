/* checkpoint.c: saving and loading training state (weights, optimizer state, steps).
 * Layout: "PLUMBCK1" | u32 version 1 | u32 optimizer kind | u64 parameters | u64 steps |
 * u64 model fingerprint | weights | m (momentum, adam) | v (adam), all little-endian. */
#include "exec/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define CK_MAGIC "PLUMBCK1"
#define CK_HEADER 40

static void fnv(unsigned long long *h, long long v)
{
    for (int i = 0; i < 8; i++) {
        *h ^= (unsigned long long)(v >> (8 * i)) & 0xff;
        *h *= 0x100000001b3ULL;
    }
}

static void fp_layers(unsigned long long *h, const layer *ls, int n)
{
    for (int i = 0; i < n; i++) {
        const layer *L = &ls[i];
        fnv(h, L->kind);
        fnv(h, L->nparams);
        for (int d = 0; d < L->out_ndim; d++) fnv(h, L->out_shape[d]);
        fnv(h, L->nchildren);
        fp_layers(h, L->children, L->nchildren);
    }
}

unsigned long long model_fingerprint(const model *m)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (int d = 0; d < m->in_ndim; d++) fnv(&h, m->in_shape[d]);
    fnv(&h, m->classes);
    fp_layers(&h, m->layers, m->nlayers);
    return h;
}

static void put64(unsigned char *p, unsigned long long v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static unsigned long long get64(const unsigned char *p)
{
    unsigned long long v = 0;
    for (int i = 0; i < 8; i++) v |= (unsigned long long)p[i] << (8 * i);
    return v;
}

static int nstate(int kind) { return kind == 2 ? 2 : kind == 1 ? 1 : 0; }

/* fp32 values as little-endian bytes (the host order on every platform plumb targets;
 * a big-endian host swaps). */
static void put_floats(unsigned char *p, const float *x, size_t n)
{
    const uint16_t one = 1;
    if (*(const unsigned char *)&one) {
        memcpy(p, x, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int b = 0; b < 4; b++) p[4 * i + b] = (unsigned char)(u >> (8 * b));
    }
}

static void get_floats(float *x, const unsigned char *p, size_t n)
{
    const uint16_t one = 1;
    if (*(const unsigned char *)&one) {
        memcpy(x, p, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u = 0;
        for (int b = 0; b < 4; b++) u |= (uint32_t)p[4 * i + b] << (8 * b);
        memcpy(&x[i], &u, 4);
    }
}

int ckpt_save(const char *path, const model *m, const ckpt *c, plumb_err *err)
{
    size_t n = (size_t)m->nparams, k = (size_t)nstate(c->opt_kind);
    size_t len = CK_HEADER + (1 + k) * n * sizeof(float);
    unsigned char *buf = malloc(len);
    if (!buf) return err_set(err, path, NULL, "out of memory for a %zu-byte checkpoint", len);
    memcpy(buf, CK_MAGIC, 8);
    buf[8] = 1, buf[9] = buf[10] = buf[11] = 0;
    buf[12] = (unsigned char)c->opt_kind, buf[13] = buf[14] = buf[15] = 0;
    put64(buf + 16, n);
    put64(buf + 24, (unsigned long long)c->step);
    put64(buf + 32, model_fingerprint(m));
    put_floats(buf + CK_HEADER, c->w, n);
    if (k >= 1) put_floats(buf + CK_HEADER + n * 4, c->m, n);
    if (k >= 2) put_floats(buf + CK_HEADER + 2 * n * 4, c->v, n);
    int rc = file_write_atomic(path, (const char *)buf, len, err);
    free(buf);
    return rc;
}

/* Reads and checks the header of f; fills kind and step. 0 or -1 with err. */
static int check_header(FILE *f, const char *path, const model *m, int *kind, long *step,
                        plumb_err *err)
{
    unsigned char h[CK_HEADER];
    size_t n = (size_t)m->nparams;
    if (fread(h, 1, CK_HEADER, f) != CK_HEADER)
        return err_set(err, path, NULL, "truncated checkpoint header: expected %d bytes",
                       CK_HEADER);
    if (memcmp(h, CK_MAGIC, 8) || h[8] != 1 || h[9] || h[10] || h[11])
        return err_set(err, path, NULL, "not a plumb checkpoint: expected the magic \"%s\" "
                       "and version 1", CK_MAGIC);
    if (h[13] || h[14] || h[15])
        return err_set(err, path, NULL, "optimizer kind: expected a 32-bit 0, 1 or 2 at byte "
                       "12 (got bytes %02x %02x %02x %02x)", h[12], h[13], h[14], h[15]);
    if (h[12] > 2)
        return err_set(err, path, NULL, "optimizer kind: expected 0 (sgd), 1 (momentum) or 2 "
                       "(adam) (got %u)", h[12]);
    if (get64(h + 16) != n || get64(h + 32) != model_fingerprint(m))
        return err_set(err, path, NULL, "expected a checkpoint of model %s (%zu parameters) "
                       "(got one of another model, %llu parameters)", m->name, n,
                       get64(h + 16));
    if (get64(h + 24) > (unsigned long long)LONG_MAX)
        return err_set(err, path, NULL, "steps: expected at most %ld (got %llu)", LONG_MAX,
                       get64(h + 24));
    *kind = h[12];
    *step = (long)get64(h + 24);
    return 0;
}

int ckpt_peek(const char *path, const model *m, int *opt_kind, long *step, plumb_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, path, NULL, "cannot open: %s", strerror(errno));
    int rc = check_header(f, path, m, opt_kind, step, err);
    if (!rc) {
        size_t want = CK_HEADER + (1 + (size_t)nstate(*opt_kind)) * (size_t)m->nparams * 4;
        long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (len < 0 || (size_t)len != want)
            rc = err_set(err, path, NULL, "expected %zu bytes of checkpoint (got %ld)%s", want,
                         len, len >= 0 && (size_t)len < want ? ": truncated" : "");
    }
    fclose(f);
    return rc;
}

int ckpt_load(const char *path, const model *m, ckpt *c, plumb_err *err)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, path, NULL, "cannot open: %s", strerror(errno));
    int rc = -1;
    size_t n = (size_t)m->nparams;
    if (check_header(f, path, m, &c->opt_kind, &c->step, err)) goto done;
    size_t k = (size_t)nstate(c->opt_kind);
    unsigned char *body = malloc((1 + k) * n * 4 + 1);
    c->w = malloc(n * sizeof(float) + 1);
    if (k >= 1) c->m = malloc(n * sizeof(float) + 1);
    if (k >= 2) c->v = malloc(n * sizeof(float) + 1);
    if (!body || !c->w || (k >= 1 && !c->m) || (k >= 2 && !c->v)) {
        free(body);
        err_set(err, path, NULL, "out of memory");
        goto done;
    }
    size_t got = fread(body, 1, (1 + k) * n * 4, f);
    int extra = fgetc(f) != EOF;
    if (got != (1 + k) * n * 4 || extra) {
        free(body);
        err_set(err, path, NULL, "expected %zu bytes of weights and optimizer state (got %s)",
                (1 + k) * n * 4, extra ? "more" : "fewer: truncated");
        goto done;
    }
    get_floats(c->w, body, n);
    if (k >= 1) get_floats(c->m, body + n * 4, n);
    if (k >= 2) get_floats(c->v, body + 2 * n * 4, n);
    free(body);
    rc = 0;
done:
    fclose(f);
    if (rc) ckpt_free(c);
    return rc;
}

void ckpt_free(ckpt *c)
{
    if (!c) return;
    free(c->w);
    free(c->m);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* Step of a file name "ckpt-SSSSSSSS.ckpt", or -1. */
static long name_step(const char *name)
{
    long st = -1;
    int used = 0;
    if (strncmp(name, "ckpt-", 5) || sscanf(name + 5, "%ld%n", &st, &used) != 1 || st < 0 ||
        strcmp(name + 5 + used, ".ckpt"))
        return -1;
    return st;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The steps of dir's checkpoint files, sorted descending (malloc'd; *n of them), or NULL
 * with *n = 0 (none, or dir unreadable: errno kept). */
static long *list_steps(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    long *st = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s = name_step(e->d_name);
        if (s < 0) continue;
        if (*n == cap) {
            int nc = cap ? 2 * cap : 16;
            long *ns = realloc(st, (size_t)nc * sizeof *ns);
            if (!ns) break;
            st = ns;
            cap = nc;
        }
        st[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort, newest first */
        for (int j = i; j > 0 && st[j] > st[j - 1]; j--) {
            long t = st[j];
            st[j] = st[j - 1];
            st[j - 1] = t;
        }
    return st;
}

int ckpt_save_dir(const char *dir, const model *m, const ckpt *c, int keep, plumb_err *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return err_set(err, dir, NULL, "cannot create the checkpoint folder: %s",
                       strerror(errno));
    char name[40];
    snprintf(name, sizeof name, "ckpt-%08ld.ckpt", c->step);
    char *path = join(dir, name);
    if (!path) return err_set(err, dir, NULL, "out of memory");
    int rc = ckpt_save(path, m, c, err);
    free(path);
    if (rc) return -1;
    int n;
    long *st = list_steps(dir, &n);
    for (int i = keep < 1 ? 1 : keep; i < n; i++) {
        if (st[i] >= c->step) continue;
        snprintf(name, sizeof name, "ckpt-%08ld.ckpt", st[i]);
        char *old = join(dir, name);
        if (old) remove(old);
        free(old);
    }
    free(st);
    return 0;
}

char *ckpt_find_latest(const char *dir, const model *m, plumb_err *err)
{
    int n;
    errno = 0;
    long *st = list_steps(dir, &n);
    if (!st && errno)
        return err_set(err, dir, NULL, "cannot read the checkpoint folder: %s",
                       strerror(errno)), NULL;
    char *found = NULL;
    for (int i = 0; i < n && !found; i++) {
        char name[40];
        snprintf(name, sizeof name, "ckpt-%08ld.ckpt", st[i]);
        char *p = join(dir, name);
        int kind;
        long step;
        plumb_err e2 = {{0}};
        if (p && !ckpt_peek(p, m, &kind, &step, &e2)) found = p;
        else free(p);
    }
    free(st);
    if (!found)
        err_set(err, dir, NULL, "expected a checkpoint of model %s (ckpt-STEP.ckpt) in this "
                "folder (found none)", m->name);
    return found;
}
