/* json.h: validated reading and atomic writing of plumb's JSON files (through cJSON).
 * Every getter names the field by its full path (e.g. "stages[2].replicas") in the error,
 * says what was expected and what was found, and returns -1 on failure, 0 on success. */
#ifndef PLUMB_JSON_H
#define PLUMB_JSON_H

#include <stddef.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "err.h"

/* Where a value is being read from: the file (for messages) and the error sink. */
typedef struct jctx {
    const char *file;
    plumb_err *err;
} jctx;

/* Number constraints for json_get_num / json_get_int. */
enum {
    J_ANY = 0,        /* any finite number */
    J_NONNEG = 1,     /* >= 0 */
    J_POS = 2,        /* > 0 */
};

/* Reads and parses the file at path. Returns a cJSON tree the caller frees with
 * cJSON_Delete, or NULL with err set (unreadable file, or malformed JSON with line:column). */
cJSON *json_load_file(const char *path, plumb_err *err);

/* Parses text (for tests and fuzzers); `name` is used as the file name in messages. */
cJSON *json_parse_text(const char *name, const char *text, size_t len, plumb_err *err);

/* Checks that root is an object whose "format" is exactly `format` (e.g. "plumb-profile/1").
 * Returns 0, or -1 with a message naming the expected format and what was found. */
int json_check_format(const jctx *c, const cJSON *root, const char *format);

/* Rejects a key of obj that is not in `known` (a NULL-terminated list; catches misspelt
 * optional fields) and a key given twice. Returns 0, or -1 with err naming the field path
 * and the expected keys. A non-object obj passes (the getters report its type). */
int json_check_keys(const jctx *c, const cJSON *obj, const char *path,
                    const char *const *known);

/* Rejects a key of obj given twice (any key: a Hugging Face config.json's fields are not
 * all known, but a field given twice is two answers to one question). Returns 0, or -1 with
 * err naming the field path. A non-object obj passes. */
int json_check_unique(const jctx *c, const cJSON *obj, const char *path);

/* Field getters. obj must be an object; path is obj's own path ("" for the root).
 * When required is 0 and the field is absent, *out keeps its value and 0 is returned. */
int json_get_num(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, int constraint, double *out);
/* A number in file units at obj.key (as json_get_num: required, constraint) stored as
 * conv(x) in *out (conv NULL: x itself), refused unless the converted value stays finite
 * (and > 0 under J_POS): the cluster file's Gbit/s as bytes/s, for one. *present (may be
 * NULL): 1 when the field was there. 0, or -1 with c->err naming the field. */
int json_get_converted(const jctx *c, const cJSON *obj, const char *path, const char *key,
                       int required, int constraint, double (*conv)(double), double *out,
                       int *present);
int json_get_int(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, long long lo, long long hi, long long *out);
int json_get_str(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const char **out);
int json_get_bool(const jctx *c, const cJSON *obj, const char *path, const char *key,
                  int required, int *out);
/* *out is the array node and *n its length (0 and NULL when absent and not required). */
int json_get_arr(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const cJSON **out, int *n);
int json_get_obj(const jctx *c, const cJSON *obj, const char *path, const char *key,
                 int required, const cJSON **out);

/* Element checks for arrays: item is arr[i] and path the array's path. */
int json_item_num(const jctx *c, const cJSON *item, const char *path, int i, int constraint,
                  double *out);
int json_item_int(const jctx *c, const cJSON *item, const char *path, int i, long long lo,
                  long long hi, long long *out);

/* Path builders: "parent.key" and "parent.key[i]" (parent may be ""). Return buf. */
char *json_path(char *buf, size_t n, const char *parent, const char *key);
char *json_path_idx(char *buf, size_t n, const char *parent, const char *key, int i);

/* Describes a node for "(got ...)": its value when short, else its type. Returns buf. */
char *json_describe(const cJSON *v, char *buf, size_t n);

/* Opens the file at path for reading without waiting: a FIFO is opened at once (a FIFO
 * with no writer is refused instead of waited on; one with a writer is read as it comes).
 * Returns the stream (the caller fcloses it), or NULL with err set, naming path and, for a
 * folder or an unreadable one, `expected` ("a file", "a CSV file"); an empty path is named
 * "" (it named no file). */
FILE *file_open_read(const char *path, const char *expected, plumb_err *err);

/* Reads the whole file at path (opened by file_open_read) into a new NUL-terminated buffer
 * (the caller frees it) and sets *len to its size. NULL with err set when it cannot be
 * opened or read, when memory runs out, or when it is larger than max_bytes (err then says
 * `too_large`; a regular file is refused by its size before it is read, a stream as soon as
 * it passes max_bytes, holding at most max_bytes + 2 bytes). For text: reading stops after
 * the first chunk that holds a NUL byte (a device streaming zeros ends at once), which the
 * returned buffer then holds for the caller's parser to refuse. */
char *file_read_all(const char *path, size_t max_bytes, const char *too_large, size_t *len,
                    plumb_err *err);

/* The rule every write below keeps: a path that exists may be replaced only when it is a
 * regular file (or a link to one): never a folder, FIFO, device or socket (rename would put
 * a file in the place of /dev/null). 0, or -1 with err naming path and what it is. The CLI
 * calls it before any work (cli_output_ok), the writers again before writing. */
int file_check_replaceable(const char *path, plumb_err *err);

/* Writes data to path atomically: a temporary file beside it, fsync, rename. On failure
 * nothing is left behind at path or beside it; returns -1 with err set. */
int file_write_atomic(const char *path, const char *data, size_t len, plumb_err *err);

/* Writes n files as one: each data[i] (lens[i] bytes) to a temporary file beside paths[i]
 * (NULL paths are skipped), and only when every one of them was written and synced, renames
 * them into place. When a write fails, the temporaries are removed and no path is touched:
 * a file that was there before keeps its content. Returns 0, or -1 with err naming the path
 * that failed. (A rename in the same folder fails only when the path became a folder
 * meanwhile; the files renamed before it then stay written.) */
int files_write_atomic(int n, const char *const *paths, const char *const *data,
                       const size_t *lens, plumb_err *err);

/* Writes one file's text into f, the open temporary file beside its path (the caller
 * flushes, syncs and closes it). Returns 0, or -1 with err set: the set is then abandoned
 * (every temporary removed, nothing renamed). */
typedef int (*file_writer)(FILE *f, void *ctx, plumb_err *err);

/* One file of files_write_atomic_out: its text as data (len bytes), or, when write is
 * non-NULL, streamed by write(f, ctx, err) so that it is never held in memory whole. */
typedef struct file_out {
    const char *path; /* NULL: skipped */
    const char *data;
    size_t len;
    file_writer write;
    void *ctx;
} file_out;

/* files_write_atomic with files that may be streamed: same contract (every file to a
 * temporary beside its path, renamed only when all were written and synced; on failure,
 * including a writer's -1, no temporary is left and no path is touched). Files are
 * written in order, so a writer that refuses stops the set before a later file's
 * temporary exists. Returns 0, or -1 with err set. */
int files_write_atomic_out(int n, const file_out *files, plumb_err *err);

/* The text json_save_file writes of root: formatted, every number that %.15g would not read
 * back exactly in 17 digits, a trailing newline. Returns it (caller frees) with *len its
 * length, or NULL when out of memory. */
char *json_text_exact(const cJSON *root, size_t *len);

/* Prints root (formatted) and writes it atomically to path, with a trailing newline. */
int json_save_file(const char *path, const cJSON *root, plumb_err *err);

/* json_save_file for a tree built only to be saved (a noun's *_to_json): frees root (owned)
 * after writing it; a NULL root, a builder that ran out of memory, is reported against path.
 * Returns 0, or -1 with err set. */
int json_save_tree(const char *path, cJSON *root, plumb_err *err);

/* Adds a number to obj, rounding-safe: values print with 17 significant digits so that a
 * load of the saved file gives the identical double. Returns the new node or NULL. */
cJSON *json_add_num(cJSON *obj, const char *key, double v);

#endif
