/* tmpdir.h: temporary folders for tests: files written for a test, and what a save leaves
 * on disk (a failed atomic write must leave nothing). Header-only: each test file is its
 * own binary. */
#ifndef PLUMB_TESTS_TMPDIR_H
#define PLUMB_TESTS_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* A new folder /tmp/plumb-test-NAME-XXXXXX; the caller removes it with rm_tree. */
static inline char *make_tmpdir_named(const char *name)
{
    char tmpl[128];
    snprintf(tmpl, sizeof tmpl, "/tmp/plumb-test-%s-XXXXXX", name);
    char *d = strdup(tmpl);
    cr_assert_not_null(d);
    cr_assert_not_null(mkdtemp(d));
    return d;
}

/* Entries of dir other than . and ..; -1 when it cannot be opened. */
static inline int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Creates (or replaces) the file at path with text. */
static inline void file_put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0, "%s", path);
}

/* Expects the file at path to hold exactly want (up to 255 bytes compared). */
static inline void expect_file_text(const char *path, const char *want)
{
    char got[256] = {0};
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    cr_expect(n == strlen(want) && !strcmp(got, want), "%s holds \"%s\", not \"%s\"", path,
              got, want);
}

/* Removes dir's files and dir itself, and frees the name (from make_tmpdir_named). Returns
 * 0, or -1 when dir could not be removed (it held a folder, or was not there). */
static inline int rm_tree(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    int rc = rmdir(dir);
    free(dir);
    return rc;
}

#endif
