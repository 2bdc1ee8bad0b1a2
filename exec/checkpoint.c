/* checkpoint.c: saving and loading training state (weights, optimizer state, steps),
 * checked end to end. Layout (version 2), all little-endian:
 *   0 "PLUMBCK1" | 8 u32 version 2 | 12 u32 optimizer kind | 16 u64 parameters |
 *   24 u64 steps | 32 u64 model fingerprint | 40 u32 CRC-32 of the weights | 44 u32 CRC-32
 *   of m (0 without) | 48 u32 CRC-32 of v (0 without) | 52 u32 0 | 56 u32 0 | 60 u32 CRC-32
 *   of bytes 0..59 | 64 weights | m (momentum, adam) | v (adam).
 * Version 1 files (no checksums) are refused with a line saying so. Checkpoint folders
 * report a corrupt newest file instead of skipping it, and sweep the temporary files of
 * writers that died. */
#include "exec/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/grow.h"
#include "json.h"

#define CK_MAGIC "PLUMBCK1"
#define CK_VERSION 2
#define CK_HEADER 64

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

static unsigned crc_of(const unsigned char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (unsigned)c;
}

static void put32(unsigned char *p, unsigned v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static unsigned get32(const unsigned char *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24;
}

int ckpt_save(const char *path, const model *m, const ckpt *c, plumb_err *err)
{
    size_t n = (size_t)m->nparams, k = (size_t)nstate(c->opt_kind);
    size_t len = CK_HEADER + (1 + k) * n * sizeof(float);
    unsigned char *buf = calloc(1, len);
    if (!buf) return err_set(err, path, NULL, "out of memory for a %zu-byte checkpoint", len);
    memcpy(buf, CK_MAGIC, 8);
    put32(buf + 8, CK_VERSION);
    put32(buf + 12, (unsigned)c->opt_kind);
    put64(buf + 16, n);
    put64(buf + 24, (unsigned long long)c->step);
    put64(buf + 32, model_fingerprint(m));
    put_floats(buf + CK_HEADER, c->w, n);
    if (k >= 1) put_floats(buf + CK_HEADER + n * 4, c->m, n);
    if (k >= 2) put_floats(buf + CK_HEADER + 2 * n * 4, c->v, n);
    for (size_t t = 0; t <= k; t++)
        put32(buf + 40 + 4 * t, crc_of(buf + CK_HEADER + t * n * 4, n * 4));
    put32(buf + 60, crc_of(buf, 60));
    ckpt_sweep_file(path);
    int rc = file_write_atomic(path, (const char *)buf, len, err);
    free(buf);
    return rc;
}

/* Reads and checks the header of f (its checksum first, then its fields); fills kind,
 * step and the tensors' checksums. 0 or -1 with err. */
static int check_header(FILE *f, const char *path, const model *m, int *kind, long *step,
                        unsigned crc[3], plumb_err *err)
{
    unsigned char h[CK_HEADER];
    size_t n = (size_t)m->nparams;
    size_t got = fread(h, 1, CK_HEADER, f);
    if (got >= 12 && !memcmp(h, CK_MAGIC, 8) && get32(h + 8) == 1)
        return err_set(err, path, NULL, "checkpoint version 1 has no checksums; expected "
                       "version %d (written by this plumb): start the run again, or resume "
                       "it with the plumb that wrote it", CK_VERSION);
    if (got != CK_HEADER)
        return err_set(err, path, NULL, "truncated checkpoint header: expected %d bytes",
                       CK_HEADER);
    if (memcmp(h, CK_MAGIC, 8) || get32(h + 8) != CK_VERSION)
        return err_set(err, path, NULL, "not a plumb checkpoint: expected the magic \"%s\" "
                       "and version %d", CK_MAGIC, CK_VERSION);
    if (get32(h + 60) != crc_of(h, 60))
        return err_set(err, path, NULL, "header checksum: expected %08x (got %08x): the "
                       "file is corrupt", crc_of(h, 60), get32(h + 60));
    if (get32(h + 52) || get32(h + 56))
        return err_set(err, path, NULL, "reserved bytes 52..59: expected zeros");
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
    for (int t = nstate(h[12]) + 1; t < 3; t++)
        if (get32(h + 40 + 4 * t))
            return err_set(err, path, NULL, "checksum of a tensor %s optimizer has: expected "
                           "0 (got %08x)", h[12] == 0 ? "no" : "that this", get32(h + 40 + 4 * t));
    *kind = h[12];
    *step = (long)get64(h + 24);
    for (int t = 0; t < 3; t++) crc[t] = get32(h + 40 + 4 * t);
    return 0;
}

/* The error for a file whose size is not the header and k + 1 tensors of n floats: more
 * bytes, or fewer (truncated). Returns -1. */
static int size_error(const char *path, size_t n, size_t k, int more, plumb_err *err)
{
    return err_set(err, path, NULL, "expected %zu bytes of checkpoint (got %s)",
                   CK_HEADER + (1 + k) * n * 4, more ? "more" : "fewer: truncated");
}

int ckpt_peek(const char *path, const model *m, int *opt_kind, long *step, plumb_err *err)
{
    FILE *f = file_open_read(path, "a checkpoint file", err);
    if (!f) return -1;
    unsigned crc[3];
    int kind, rc = -1;
    long st;
    struct stat sb;
    if (check_header(f, path, m, &kind, &st, crc, err)) goto done;
    size_t n = (size_t)m->nparams, k = (size_t)nstate(kind);
    if (fstat(fileno(f), &sb)) {
        err_set(err, path, NULL, "cannot read: %s", strerror(errno));
        goto done;
    }
    if ((unsigned long long)sb.st_size != CK_HEADER + (1 + k) * n * 4) {
        size_error(path, n, k, (unsigned long long)sb.st_size > CK_HEADER + (1 + k) * n * 4,
                   err);
        goto done;
    }
    *opt_kind = kind;
    *step = st;
    rc = 0;
done:
    fclose(f);
    return rc;
}

int ckpt_is_checkpoint(const char *path)
{
    unsigned char h[8];
    struct stat st;
    /* a checkpoint is read by its size (ckpt_peek): only a regular file can be one, and a
     * pipe read here would have lost its first bytes for the caller's JSON reader */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    plumb_err e;
    FILE *f = file_open_read(path, "a file", &e);
    if (!f) return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    return got == sizeof h && !memcmp(h, CK_MAGIC, 8);
}

static const char *const TENSOR[3] = {"weights", "momentum (m)", "second moment (v)"};

/* Checks body's tensors against their checksums, then their values. 0 or -1 with err. */
static int check_body(const char *path, const unsigned char *body, size_t n, size_t k,
                      const unsigned crc[3], const ckpt *c, plumb_err *err)
{
    for (size_t t = 0; t <= k; t++) {
        unsigned got = crc_of(body + t * n * 4, n * 4);
        if (got != crc[t])
            return err_set(err, path, NULL, "%s checksum: expected %08x (got %08x): the file "
                           "is corrupt", TENSOR[t], crc[t], got);
    }
    const float *x[3] = {c->w, c->m, c->v};
    for (size_t t = 0; t <= k; t++)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[t][i]))
                return err_set(err, path, NULL, "%s[%zu]: expected a finite number (got %g): "
                               "the run that wrote it had diverged", TENSOR[t], i,
                               (double)x[t][i]);
    return 0;
}

int ckpt_load(const char *path, const model *m, ckpt *c, plumb_err *err)
{
    memset(c, 0, sizeof *c);
    FILE *f = file_open_read(path, "a checkpoint file", err);
    if (!f) return -1;
    int rc = -1;
    size_t n = (size_t)m->nparams;
    unsigned crc[3];
    unsigned char *body = NULL;
    if (check_header(f, path, m, &c->opt_kind, &c->step, crc, err)) goto done;
    size_t k = (size_t)nstate(c->opt_kind);
    body = malloc((1 + k) * n * 4 + 1);
    c->w = malloc(n * sizeof(float) + 1);
    if (k >= 1) c->m = malloc(n * sizeof(float) + 1);
    if (k >= 2) c->v = malloc(n * sizeof(float) + 1);
    if (!body || !c->w || (k >= 1 && !c->m) || (k >= 2 && !c->v)) {
        err_set(err, path, NULL, "out of memory");
        goto done;
    }
    size_t got = fread(body, 1, (1 + k) * n * 4, f);
    int extra = fgetc(f) != EOF;
    if (got != (1 + k) * n * 4 || extra) {
        size_error(path, n, k, extra, err);
        goto done;
    }
    get_floats(c->w, body, n);
    if (k >= 1) get_floats(c->m, body + n * 4, n);
    if (k >= 2) get_floats(c->v, body + 2 * n * 4, n);
    if (check_body(path, body, n, k, crc, c, err)) goto done;
    rc = 0;
done:
    free(body);
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

int ckpt_dir_owns(const char *dir, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (name_step(base) < 0) return 0;
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                         : strdup(".");
    struct stat d, p; /* the folders compared by device and inode */
    int same = parent && stat(parent, &p) == 0 && stat(dir, &d) == 0 &&
               p.st_dev == d.st_dev && p.st_ino == d.st_ino;
    free(parent);
    return same;
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
        long *ns = array_room(st, *n, &cap, 16, sizeof *ns);
        if (!ns) break;
        st = ns;
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

/* 1 when `name` is the temporary file "STEM.tmp.PID.IDX" of an atomic write (json.c's
 * write_temp; "STEM.tmp.PID", as older builds named it, too) by a process that no longer
 * runs: STEM equal to `stem`, or any "ckpt-STEP.ckpt" when stem is NULL. A live PID (or
 * one of another user) is left alone. */
static int dead_tmp(const char *name, const char *stem)
{
    const char *t = strstr(name, ".tmp."), *q;
    if (!t) return 0;
    for (q = t + 5; *q >= '0' && *q <= '9'; q++) {}
    if (q == t + 5 || q - (t + 5) > 9) return 0;
    if (*q == '.') { /* the write's index */
        const char *x = q + 1;
        while (*x >= '0' && *x <= '9') x++;
        if (x == q + 1 || *x) return 0;
    } else if (*q) {
        return 0;
    }
    char pre[256];
    size_t pl = (size_t)(t - name);
    if (pl >= sizeof pre) return 0;
    memcpy(pre, name, pl);
    pre[pl] = '\0';
    if (stem ? strcmp(pre, stem) != 0 : name_step(pre) < 0) return 0;
    long pid = strtol(t + 5, NULL, 10);
    if (pid <= 0 || pid == (long)getpid()) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes dir's temporary files left by dead writers (dead_tmp). */
static void sweep_tmp(const char *dir, const char *stem)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (dead_tmp(e->d_name, stem)) {
            char *p = join(dir, e->d_name);
            if (p) unlink(p);
            free(p);
        }
    closedir(d);
}

void ckpt_sweep_file(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        sweep_tmp(".", path);
        return;
    }
    size_t dl = (size_t)(slash - path);
    char *dir = malloc(dl + 2);
    if (!dir) return;
    memcpy(dir, path, dl ? dl : 1);
    dir[dl ? dl : 1] = '\0';
    sweep_tmp(dir, slash + 1);
    free(dir);
}

/* 1 when path is the folder dir, or a file directly in it (compared by device and inode). */
static int in_folder(const char *path, const char *dir)
{
    struct stat d, p;
    if (stat(dir, &d) != 0 || stat(path, &p) != 0) return 0;
    if (S_ISDIR(p.st_mode)) return p.st_dev == d.st_dev && p.st_ino == d.st_ino;
    const char *slash = strrchr(path, '/');
    char *parent = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
                         : strdup(".");
    int same = parent && stat(parent, &p) == 0 && p.st_dev == d.st_dev && p.st_ino == d.st_ino;
    free(parent);
    return same;
}

int ckpt_dir_check_fresh(const char *dir, const char *resume, plumb_err *err)
{
    int n;
    long *st = list_steps(dir, &n);
    long newest = n ? st[0] : -1;
    free(st);
    if (n == 0 || (resume && in_folder(resume, dir))) return 0;
    return err_set(err, dir, NULL, "holds the checkpoints of another run (the newest "
                   "ckpt-%08ld.ckpt), which this run's would replace or remove; expected a "
                   "new or empty folder, or --resume %s to continue that run", newest, dir);
}

int ckpt_save_dir(const char *dir, const model *m, const ckpt *c, int keep, plumb_err *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return err_set(err, dir, NULL, "cannot create the checkpoint folder: %s",
                       strerror(errno));
    sweep_tmp(dir, NULL);
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

char *ckpt_find_latest(const char *dir, const model *m, ckpt *state, plumb_err *err)
{
    if (state) memset(state, 0, sizeof *state);
    int n;
    errno = 0;
    long *st = list_steps(dir, &n);
    if (!st && errno)
        return err_set(err, dir, NULL, "cannot read the checkpoint folder: %s",
                       strerror(errno)), NULL;
    char *found = NULL;
    plumb_err bad = {{0}}; /* why the newest file failed, when it did */
    for (int i = 0; i < n && !found; i++) {
        char name[40];
        snprintf(name, sizeof name, "ckpt-%08ld.ckpt", st[i]);
        char *p = join(dir, name);
        ckpt c;
        plumb_err e2 = {{0}};
        if (!p) err_set(&e2, NULL, NULL, "out of memory");
        if (p && !ckpt_load(p, m, &c, &e2)) {
            found = p;
            if (state && i == 0) *state = c; /* the newest: kept, not read again */
            else ckpt_free(&c);
        } else {
            if (i == 0) bad = e2;
            free(p);
        }
    }
    free(st);
    if (bad.msg[0]) {
        /* the newest is corrupt: say so rather than silently resume from an older one */
        const char *prev = found ? strrchr(found, '/') + 1 : NULL;
        if (prev)
            err_set(err, NULL, NULL, "%.700s (the newest checkpoint in %.100s; the newest "
                    "intact one is %s: resume from it with --resume, or move the corrupt "
                    "file away)", bad.msg, dir, prev);
        else
            err_set(err, NULL, NULL, "%.700s (the newest checkpoint in %.100s; no older one "
                    "is intact)", bad.msg, dir);
        free(found);
        return NULL;
    }
    if (!found)
        err_set(err, dir, NULL, "expected a checkpoint of model %s (ckpt-STEP.ckpt) in this "
                "folder (found none)", m->name);
    return found;
}
