/* json.c: validated field access with full field paths, and atomic file writes. */
#define _POSIX_C_SOURCE 200809L
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *json_path(char *buf, size_t n, const char *parent, const char *key)
{
    if (parent && *parent) snprintf(buf, n, "%s.%s", parent, key);
    else snprintf(buf, n, "%s", key);
    return buf;
}

char *json_path_idx(char *buf, size_t n, const char *parent, const char *key, int i)
{
    if (key && *key) {
        if (parent && *parent) snprintf(buf, n, "%s.%s[%d]", parent, key, i);
        else snprintf(buf, n, "%s[%d]", key, i);
    } else {
        snprintf(buf, n, "%s[%d]", parent ? parent : "", i);
    }
    return buf;
}

char *json_describe(const cJSON *v, char *buf, size_t n)
{
    if (!v) { snprintf(buf, n, "nothing"); return buf; }
    if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) {
        if (strlen(v->valuestring) <= 40) snprintf(buf, n, "\"%s\"", v->valuestring);
        else snprintf(buf, n, "\"%.37s...\"", v->valuestring);
    } else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
    else snprintf(buf, n, "an invalid value");
    return buf;
}

static void line_col(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

/* The depth of arrays and objects open at `at` (strings skipped). */
static int depth_at(const char *text, const char *at)
{
    int depth = 0, in_str = 0;
    for (const char *p = text; p < at && *p; p++) {
        if (in_str) {
            if (*p == '\\' && p + 1 < at) p++;
            else if (*p == '"') in_str = 0;
        } else if (*p == '"') in_str = 1;
        else if (*p == '[' || *p == '{') depth++;
        else if ((*p == ']' || *p == '}') && depth > 0) depth--;
    }
    return depth;
}

cJSON *json_parse_text(const char *name, const char *text, size_t len, plumb_err *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        int line, col;
        line_col(text, end ? end : text, &line, &col);
        if (end && depth_at(text, end) >= CJSON_NESTING_LIMIT)
            err_set(err, name, NULL, "malformed JSON at line %d, column %d: expected arrays "
                    "and objects nested at most %d deep", line, col, CJSON_NESTING_LIMIT);
        else
            err_set(err, name, NULL, "malformed JSON at line %d, column %d: expected a valid "
                    "JSON value", line, col);
        return NULL;
    }
    /* nothing but white space may follow the value */
    for (const char *p = end; p && (size_t)(p - text) < len && *p; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            int line, col;
            line_col(text, p, &line, &col);
            cJSON_Delete(root);
            err_set(err, name, NULL,
                    "malformed JSON at line %d, column %d: expected end of file after the value",
                    line, col);
            return NULL;
        }
    }
    return root;
}

FILE *file_open_read(const char *path, const char *expected, plumb_err *err)
{
    if (!*path) { /* else the line named no file: "plumb: cannot open: No such file ..." */
        err_set(err, "\"\"", NULL, "cannot open: an empty file name (expected %s)", expected);
        return NULL;
    }
    /* without O_NONBLOCK, opening a FIFO waits for a writer, which may never come */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        err_set(err, path, NULL, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    int head = -1; /* a FIFO's first byte, read to tell a writer from none */
    if (fstat(fd, &st) != 0) {
        err_set(err, path, NULL, "cannot read: %s (expected %s)", strerror(errno), expected);
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        err_set(err, path, NULL, "cannot read: %s (expected %s)", strerror(EISDIR), expected);
        goto fail;
    }
    if (S_ISFIFO(st.st_mode)) {
        unsigned char c;
        ssize_t r = read(fd, &c, 1);
        if (r == 0) {
            err_set(err, path, NULL, "cannot read: a FIFO with no writer (expected %s)",
                    expected);
            goto fail;
        }
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            err_set(err, path, NULL, "cannot read: %s (expected %s)", strerror(errno), expected);
            goto fail;
        }
        if (r == 1) head = c;
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        err_set(err, path, NULL, "cannot read: %s (expected %s)", strerror(errno), expected);
        goto fail;
    }
    if (head >= 0) ungetc(head, f);
    return f;
fail:
    close(fd);
    return NULL;
}

char *file_read_all(const char *path, size_t max_bytes, const char *too_large, size_t *len,
                    plumb_err *err)
{
    FILE *f = file_open_read(path, "a file", err);
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size > max_bytes) {
        fclose(f);
        err_set(err, path, NULL, "%s", too_large);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            err_set(err, path, NULL, "out of memory");
            return NULL;
        }
        if (n > max_bytes) {
            free(buf);
            fclose(f);
            err_set(err, path, NULL, "%s", too_large);
            return NULL;
        }
        if (n + 1 >= cap) { /* never more than max_bytes + 2: a stream stops past it */
            size_t ncap = cap * 2 < max_bytes + 2 ? cap * 2 : max_bytes + 2;
            char *nb = realloc(buf, ncap);
            if (!nb) free(buf);
            buf = nb;
            cap = ncap;
            continue;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        /* text only: a device that streams zeros or noise stops at its first NUL byte,
         * which the caller's parser refuses */
        if (memchr(buf + n - got, '\0', got)) break;
    }
    int rerr = ferror(f), rerrno = errno;
    fclose(f);
    if (rerr) {
        free(buf);
        err_set(err, path, NULL, "cannot read: %s (expected a file)", strerror(rerrno));
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

cJSON *json_load_file(const char *path, plumb_err *err)
{
    size_t len;
    char *buf = file_read_all(path, (size_t)1 << 31,
                              "file too large: expected at most 2 GiB of JSON", &len, err);
    if (!buf) return NULL;
    if (memchr(buf, '\0', len)) {
        free(buf);
        err_set(err, path, NULL, "malformed JSON: expected text, found a NUL byte");
        return NULL;
    }
    cJSON *root = json_parse_text(path, buf, len, err);
    free(buf);
    return root;
}

int json_check_format(const jctx *c, const cJSON *root, const char *format)
{
    char got[96];
    if (!cJSON_IsObject(root))
        return err_set(c->err, c->file, NULL, "expected a JSON object (got %s)",
                       json_describe(root, got, sizeof got));
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!f)
        return err_set(c->err, c->file, "format", "missing; expected \"%s\"", format);
    if (!cJSON_IsString(f) || strcmp(f->valuestring, format) != 0)
        return err_set(c->err, c->file, "format", "expected \"%s\" (got %s)", format,
                       json_describe(f, got, sizeof got));
    return 0;
}

int json_check_unique(const jctx *c, const cJSON *obj, const char *path)
{
    if (!cJSON_IsObject(obj)) return 0;
    for (const cJSON *it = obj->child; it; it = it->next)
        for (const cJSON *prev = obj->child; it->string && prev != it; prev = prev->next)
            if (prev->string && !strcmp(prev->string, it->string)) {
                char fp[256];
                json_path(fp, sizeof fp, path, it->string);
                return err_set(c->err, c->file, fp, "expected each field once (got it twice)");
            }
    return 0;
}

int json_check_keys(const jctx *c, const cJSON *obj, const char *path,
                    const char *const *known)
{
    if (!cJSON_IsObject(obj)) return 0;
    for (const cJSON *it = obj->child; it; it = it->next) {
        char fp[256];
        json_path(fp, sizeof fp, path, it->string ? it->string : "?");
        int ok = 0;
        for (int k = 0; known[k] && !ok; k++) ok = it->string && !strcmp(it->string, known[k]);
        if (ok) continue;
        char list[512];
        size_t used = 0;
        list[0] = '\0';
        for (int k = 0; known[k] && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "",
                                     known[k]);
        return err_set(c->err, c->file, fp, "unknown field; expected one of %s", list);
    }
    return json_check_unique(c, obj, path);
}

static const cJSON *field(const jctx *c, const cJSON *obj, const char *path, const char *key,
                          int required, char *fp, size_t fpn, int *rc)
{
    json_path(fp, fpn, path, key);
    *rc = 0;
    if (!cJSON_IsObject(obj)) {
        char got[96];
        *rc = err_set(c->err, c->file, path && *path ? path : "(root)",
                      "expected an object (got %s)", json_describe(obj, got, sizeof got));
        return NULL;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v && required) *rc = err_set(c->err, c->file, fp, "missing required field");
    return v;
}

static int check_num(const jctx *c, const cJSON *v, const char *fp, int constraint, double *out)
{
    char got[96];
    if (!cJSON_IsNumber(v))
        return err_set(c->err, c->file, fp, "expected a number (got %s)",
                       json_describe(v, got, sizeof got));
    double x = v->valuedouble;
    if (!isfinite(x))
        return err_set(c->err, c->file, fp, "expected a finite number (got %s)",
                       json_describe(v, got, sizeof got));
    if (constraint == J_POS && !(x > 0))
        return err_set(c->err, c->file, fp, "expected a number > 0 (got %.17g)", x);
    if (constraint == J_NONNEG && !(x >= 0))
        return err_set(c->err, c->file, fp, "expected a number >= 0 (got %.17g)", x);
    *out = x;
    return 0;
}

static int check_int(const jctx *c, const cJSON *v, const char *fp, long long lo, long long hi,
                     long long *out)
{
    char got[96];
    if (!cJSON_IsNumber(v))
        return err_set(c->err, c->file, fp, "expected an integer (got %s)",
                       json_describe(v, got, sizeof got));
    double x = v->valuedouble;
    if (!isfinite(x) || x != floor(x))
        return err_set(c->err, c->file, fp, "expected an integer (got %s)",
                       json_describe(v, got, sizeof got));
    if (x < (double)lo || x > (double)hi)
        return err_set(c->err, c->file, fp, "expected an integer from %lld to %lld (got %.17g)",
                       lo, hi, x);
    *out = (long long)x;
    return 0;
}

int json_get_num(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, int constraint, double *out)
{
    char fp[256];
    int rc;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    return check_num(c, v, fp, constraint, out);
}

int json_get_converted(const jctx *c, const cJSON *obj, const char *path, const char *key,
                       int required, int constraint, double (*conv)(double), double *out,
                       int *present)
{
    double x = NAN;
    if (present) *present = 0;
    if (json_get_num(c, obj, path, key, required, constraint, &x)) return -1;
    if (isnan(x)) return 0; /* optional and absent */
    double v = conv ? conv(x) : x;
    char fp[256];
    json_path(fp, sizeof fp, path, key);
    if (!isfinite(v) || (constraint == J_POS && !(v > 0)))
        return err_set(c->err, c->file, fp,
                       "expected a number that stays finite and > 0 in SI units (got %.17g)", x);
    *out = v;
    if (present) *present = 1;
    return 0;
}

int json_get_int(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, long long lo, long long hi, long long *out)
{
    char fp[256];
    int rc;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    return check_int(c, v, fp, lo, hi, out);
}

int json_get_str(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const char **out)
{
    char fp[256], got[96];
    int rc;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    if (!cJSON_IsString(v))
        return err_set(c->err, c->file, fp, "expected a string (got %s)",
                       json_describe(v, got, sizeof got));
    *out = v->valuestring;
    return 0;
}

int json_get_bool(const jctx *c, const cJSON *obj, const char *path, const char *key,
                  int required, int *out)
{
    char fp[256], got[96];
    int rc;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    if (!cJSON_IsBool(v))
        return err_set(c->err, c->file, fp, "expected true or false (got %s)",
                       json_describe(v, got, sizeof got));
    *out = cJSON_IsTrue(v);
    return 0;
}

int json_get_arr(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const cJSON **out, int *n)
{
    char fp[256], got[96];
    int rc;
    *out = NULL;
    *n = 0;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    if (!cJSON_IsArray(v))
        return err_set(c->err, c->file, fp, "expected an array (got %s)",
                       json_describe(v, got, sizeof got));
    *out = v;
    *n = cJSON_GetArraySize(v);
    return 0;
}

int json_get_obj(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const cJSON **out)
{
    char fp[256], got[96];
    int rc;
    *out = NULL;
    const cJSON *v = field(c, obj, path, key, required, fp, sizeof fp, &rc);
    if (rc || !v) return rc;
    if (!cJSON_IsObject(v))
        return err_set(c->err, c->file, fp, "expected an object (got %s)",
                       json_describe(v, got, sizeof got));
    *out = v;
    return 0;
}

int json_item_num(const jctx *c, const cJSON *item, const char *path, int i, int constraint,
                  double *out)
{
    char fp[256];
    json_path_idx(fp, sizeof fp, path, NULL, i);
    return check_num(c, item, fp, constraint, out);
}

int json_item_int(const jctx *c, const cJSON *item, const char *path, int i, long long lo,
                  long long hi, long long *out)
{
    char fp[256];
    json_path_idx(fp, sizeof fp, path, NULL, i);
    return check_int(c, item, fp, lo, hi, out);
}

/* Writes the whole of data (len bytes) to fd. 0, or -1 with errno set. */
static int write_all(int fd, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

/* Streams fo's text through its writer into fd (closed here either way). 0, or -1 with
 * err set (by the writer, or here naming path when writing or flushing failed). */
static int stream_temp(int fd, const file_out *fo, plumb_err *err)
{
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        return err_set(err, fo->path, NULL, "cannot write: %s", strerror(e));
    }
    /* large writes: the formatting, not the system calls, should cost */
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    int rc = fo->write(f, fo->ctx, err);
    if (rc) {
        fclose(f); /* abandoned: the caller removes it */
        return rc;
    }
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        int e = errno ? errno : EIO;
        fclose(f);
        return err_set(err, fo->path, NULL, "cannot write: %s", strerror(e));
    }
    if (fclose(f) != 0)
        return err_set(err, fo->path, NULL, "cannot write: %s", strerror(errno));
    return 0;
}

/* Writes fo's text to a new temporary file beside fo->path (its name, told apart by idx,
 * into tmp, n bytes) and syncs it. 0, or -1 with err set and nothing left behind. */
static int write_temp(const file_out *fo, int idx, char *tmp, size_t n, plumb_err *err)
{
    snprintf(tmp, n, "%s.tmp.%ld.%d", fo->path, (long)getpid(), idx);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return err_set(err, fo->path, NULL, "cannot write: %s", strerror(errno));
    if (fo->write) {
        if (stream_temp(fd, fo, err)) {
            unlink(tmp);
            return -1;
        }
        return 0;
    }
    if (write_all(fd, fo->data, fo->len) || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return err_set(err, fo->path, NULL, "cannot write: %s", strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return err_set(err, fo->path, NULL, "cannot write: %s", strerror(e));
    }
    return 0;
}

int file_check_replaceable(const char *path, plumb_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    const char *what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return err_set(err, path, NULL, "is %s; expected a file name (writing would replace it)",
                   what);
}

int files_write_atomic_out(int n, const file_out *files, plumb_err *err)
{
    for (int k = 0; k < n; k++)
        if (files[k].path && file_check_replaceable(files[k].path, err)) return -1;
    char **tmp = calloc((size_t)n + 1, sizeof *tmp);
    int rc = -1, i;
    if (!tmp) return err_set(err, NULL, NULL, "out of memory");
    /* every file is written beside its path first; none replaces anything until all are */
    for (i = 0; i < n; i++) {
        if (!files[i].path) continue;
        size_t tn = strlen(files[i].path) + 32;
        if (!(tmp[i] = malloc(tn))) {
            err_set(err, files[i].path, NULL, "out of memory");
            goto cleanup;
        }
        if (write_temp(&files[i], i, tmp[i], tn, err)) {
            free(tmp[i]);
            tmp[i] = NULL;
            goto cleanup;
        }
    }
    for (i = 0; i < n; i++) {
        if (!tmp[i]) continue;
        if (rename(tmp[i], files[i].path) != 0) {
            err_set(err, files[i].path, NULL, "cannot write: %s", strerror(errno));
            goto cleanup;
        }
        free(tmp[i]);
        tmp[i] = NULL;
    }
    rc = 0;
cleanup:
    for (i = 0; i < n; i++) {
        if (tmp[i]) unlink(tmp[i]);
        free(tmp[i]);
    }
    free(tmp);
    return rc;
}

int files_write_atomic(int n, const char *const *paths, const char *const *data,
                       const size_t *lens, plumb_err *err)
{
    file_out *fo = calloc((size_t)n + 1, sizeof *fo);
    if (!fo) return err_set(err, NULL, NULL, "out of memory");
    for (int i = 0; i < n; i++)
        fo[i] = (file_out){.path = paths[i], .data = data[i], .len = lens[i]};
    int rc = files_write_atomic_out(n, fo, err);
    free(fo);
    return rc;
}

int file_write_atomic(const char *path, const char *data, size_t len, plumb_err *err)
{
    return files_write_atomic(1, &path, &data, &len, err);
}

/* cJSON prints a double with 15 digits whenever that reads back within one DBL_EPSILON,
 * which is not always the same double (0.1 + 0.2 prints as 0.3). Turns each such number
 * of a (copied) tree into raw text with 17 digits, which always reads back exactly. */
static int exact_numbers(cJSON *n)
{
    for (; n; n = n->next) {
        if (cJSON_IsNumber(n) && isfinite(n->valuedouble)) {
            char buf[40];
            double d = n->valuedouble;
            snprintf(buf, sizeof buf, "%.15g", d);
            if (strtod(buf, NULL) != d) {
                snprintf(buf, sizeof buf, "%.17g", d);
                char *raw = strdup(buf);
                if (!raw) return -1;
                n->type = cJSON_Raw | (n->type & cJSON_StringIsConst);
                n->valuestring = raw;
            }
        }
        if (n->child && exact_numbers(n->child)) return -1;
    }
    return 0;
}

char *json_text_exact(const cJSON *root, size_t *len)
{
    cJSON *copy = cJSON_Duplicate(root, 1);
    if (!copy || exact_numbers(copy)) {
        cJSON_Delete(copy);
        return NULL;
    }
    char *text = cJSON_Print(copy);
    cJSON_Delete(copy);
    if (!text) return NULL;
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) { free(text); return NULL; }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    *len = n + 1;
    return withnl;
}

int json_save_file(const char *path, const cJSON *root, plumb_err *err)
{
    size_t n;
    char *text = json_text_exact(root, &n);
    if (!text) return err_set(err, path, NULL, "out of memory while formatting JSON");
    int rc = file_write_atomic(path, text, n, err);
    free(text);
    return rc;
}

int json_save_tree(const char *path, cJSON *root, plumb_err *err)
{
    if (!root) return err_set(err, path, NULL, "out of memory while building JSON");
    int rc = json_save_file(path, root, err);
    cJSON_Delete(root);
    return rc;
}

cJSON *json_add_num(cJSON *obj, const char *key, double v)
{
    /* cJSON prints with %1.15g and retries %1.17g when that does not round-trip, so
     * values saved by cJSON_Print reload identically. */
    return cJSON_AddNumberToObject(obj, key, v);
}
