/* schedule_csv.c: the action IR as PyTorch's torch.distributed.pipelining CSV: one row per
 * rank, the rank's actions comma-separated, each written as _Action.__repr__ writes it
 * ("0F3", "1B2", "2I0", "2W0", "0SEND_F3", "1RECV_F3", "1SEND_B2", "0RECV_B2",
 * "0REDUCE_GRAD"), rows ended by "\r\n" as Python's csv.writer does. plumb's optimizer
 * step "0STEP" is left out unless asked for (PyTorch cannot parse it; it steps outside the
 * schedule). PyTorch 2.15 adds completion actions to the compute_comms form
 * ("0WAIT_SEND_F3", "1WAIT_SEND_B2", "0WAIT_REDUCE_GRAD"); the writer puts them where 2.15
 * does unless asked for the 2.11 form, the reader checks them by 2.15's rules and drops
 * them (plumb's sends are buffered, its all-reduce completes in place). Reading accepts
 * both PyTorch forms: compute_only (F/B/I/W, empty slots for None) gets its sends and
 * receives added; compute_comms keeps them, their peers resolved from the placement.
 * Steps, all-reduces of replicated stages and weight versions are recomputed from the
 * schedule kind unless the file carries them. */
#include "grow.h"
#include "schedule_impl.h"
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int kind;      /* act_kind (for a wait: the kind it completes), or -1: ignored (FSDP),
                      -2: overlap container */
    int wait;      /* 1 for PyTorch 2.15's WAIT_* completions */
} type_names[] = {
    /* the waits before "W", which is their prefix */
    {"WAIT_REDUCE_GRAD", ACT_ALLREDUCE, 1}, {"WAIT_SEND_F", ACT_SEND_F, 1},
    {"WAIT_SEND_B", ACT_SEND_B, 1}, {"REDUCE_GRAD", ACT_ALLREDUCE, 0},
    {"OVERLAP_F_B", -2, 0}, {"UNSHARD", -1, 0}, {"RESHARD", -1, 0},
    {"SEND_F", ACT_SEND_F, 0}, {"RECV_F", ACT_RECV_F, 0}, {"SEND_B", ACT_SEND_B, 0},
    {"RECV_B", ACT_RECV_B, 0}, {"STEP", ACT_STEP, 0}, {"F", ACT_F, 0}, {"I", ACT_I, 0},
    {"B", ACT_B, 0}, {"W", ACT_W, 0},
};

int action_parse(const char *text, action *a)
{
    if (!text || !a) return -1;
    const char *p = text;
    while (*p == ' ' || *p == '\t') p++;
    if (!isdigit((unsigned char)*p)) return -1;
    long st = 0;
    int nd = 0;
    while (isdigit((unsigned char)*p)) {
        if (++nd > 6) return -1;
        st = st * 10 + (*p++ - '0');
    }
    int kind = -3, wait = 0;
    size_t nt = sizeof type_names / sizeof type_names[0];
    for (size_t i = 0; i < nt; i++) {
        size_t l = strlen(type_names[i].name);
        if (!strncmp(p, type_names[i].name, l)) {
            kind = type_names[i].kind;
            wait = type_names[i].wait;
            p += l;
            break;
        }
    }
    if (kind == -3 || kind == -2) return -1;
    long mb = -1;
    if (isdigit((unsigned char)*p)) {
        mb = 0, nd = 0;
        while (isdigit((unsigned char)*p)) {
            if (++nd > 9) return -1;
            mb = mb * 10 + (*p++ - '0');
        }
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p) return -1;
    if (kind == -1) return 1; /* UNSHARD / RESHARD: nothing to do for plumb */
    if (st > ACT_STAGE_MAX) return -1; /* no schedule has the stage (nor can an action) */
    int needs_mb = kind != ACT_ALLREDUCE && kind != ACT_STEP;
    if (needs_mb != (mb >= 0)) return -1;
    *a = act_make(kind, (int)st, (int)mb);
    return wait ? 2 : 0;
}

/* The index of (stage, microbatch) in a stage x microbatch table, or -1 out of range. */
static long st_mb_index(const schedule *s, int stage, int mb)
{
    int T = sched_total_mb(s);
    if (stage < 0 || stage >= s->nstages || mb < 0 || mb >= T) return -1;
    return (long)stage * T + mb;
}

/* Writes row w. With waits (PyTorch 2.15's compute_comms form) each SEND_F's wait follows
 * the rank's backward (B or I) of that stage and microbatch, each REDUCE_GRAD's wait
 * follows it at once, and the waits of the sends still pending (every SEND_B, a SEND_F
 * without a local backward) end the row in the order of their sends, as 2.15's lowering
 * places them. pend is a zeroed stage x microbatch table, left zeroed. */
static void write_row(const schedule *s, int w, FILE *out, unsigned flags, char *pend)
{
    char t[48];
    int first = 1;
    for (int i = 0; i < s->len[w]; i++) {
        const action *a = &s->acts[w][i];
        if (a->kind == ACT_STEP && !(flags & SCHED_CSV_STEPS)) continue;
        if ((flags & SCHED_CSV_COMPUTE_ONLY) && !act_is_compute(a->kind) && a->kind != ACT_STEP)
            continue;
        fprintf(out, "%s%s", first ? "" : ",", action_format(a, t, sizeof t));
        first = 0;
        if (!pend) continue;
        long k = st_mb_index(s, a->stage, a->microbatch);
        if (a->kind == ACT_SEND_F && k >= 0) {
            pend[k] = 1;
        } else if ((a->kind == ACT_B || a->kind == ACT_I) && k >= 0 && pend[k]) {
            fprintf(out, ",%dWAIT_SEND_F%d", a->stage, a->microbatch);
            pend[k] = 0;
        } else if (a->kind == ACT_ALLREDUCE) {
            fprintf(out, ",%dWAIT_REDUCE_GRAD", a->stage);
        }
    }
    for (int i = 0; pend && i < s->len[w]; i++) {
        const action *a = &s->acts[w][i];
        long k = st_mb_index(s, a->stage, a->microbatch);
        if (a->kind == ACT_SEND_B || (a->kind == ACT_SEND_F && (k < 0 || pend[k]))) {
            fprintf(out, "%s%dWAIT_SEND_%c%d", first ? "" : ",", a->stage,
                    a->kind == ACT_SEND_F ? 'F' : 'B', a->microbatch);
            first = 0;
            if (k >= 0 && a->kind == ACT_SEND_F) pend[k] = 0;
        }
    }
    fputs("\r\n", out);
}

int schedule_write_csv_flags(const schedule *s, FILE *out, unsigned flags)
{
    if (!s || !out) return -1;
    char *pend = NULL;
    if (!(flags & (SCHED_CSV_NO_WAITS | SCHED_CSV_COMPUTE_ONLY))) {
        int T = sched_total_mb(s);
        pend = calloc((size_t)s->nstages * (size_t)(T > 0 ? T : 1), 1);
        if (!pend) return -1;
    }
    for (int w = 0; w < s->nworkers; w++) write_row(s, w, out, flags, pend);
    free(pend);
    return ferror(out) ? -1 : 0;
}

int schedule_write_csv(const schedule *s, FILE *out)
{
    return schedule_write_csv_flags(s, out, 0);
}

/* Parses one field into v (an OVERLAP_F_B container expands to its sub-actions). A PyTorch
 * 2.15 wait goes to wv as the action it completes (kind ACT_SEND_F, ACT_SEND_B or
 * ACT_ALLREDUCE, with stage and microbatch), its version holding the CSV field and its peer
 * the index in v it stood before. 0, or -1 with a message. */
static int parse_field(const char *file, int row, int col, const char *f, actvec *v,
                       actvec *wv, plumb_err *err)
{
    const char *p = f;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return 0; /* an empty slot (None) */
    action a;
    if (*p == '(') {
        const char *close = strchr(p, ')');
        if (!close || strcmp(close + 1, "OVERLAP_F_B") != 0) goto bad;
        char buf[256];
        const char *q = p + 1;
        while (q < close) {
            const char *e = memchr(q, ';', (size_t)(close - q));
            if (!e) e = close;
            size_t l = (size_t)(e - q);
            if (l >= sizeof buf) goto bad;
            memcpy(buf, q, l);
            buf[l] = '\0';
            int rc = action_parse(buf, &a);
            if (rc < 0 || rc == 2 || (rc == 0 && !act_is_compute(a.kind))) goto bad;
            if (rc == 0 && actvec_push(v, a)) return err_set(err, file, NULL, "out of memory");
            q = e + 1;
        }
        return 0;
    }
    int rc = action_parse(p, &a);
    if (rc < 0) goto bad;
    if (rc == 0 && actvec_push(v, a)) return err_set(err, file, NULL, "out of memory");
    if (rc == 2) {
        a.version = col;
        a.peer = v->n;
        if (actvec_push(wv, a)) return err_set(err, file, NULL, "out of memory");
    }
    return 0;
bad:
    return err_set(err, file, NULL, "row %d, field %d: expected an action like 0F3, 1RECV_B2, "
                   "0REDUCE_GRAD or 0WAIT_SEND_F3 (got \"%.60s\")", row + 1, col + 1, f);
}

/* The entry of send a (SEND_F or SEND_B) in slot, two stage x microbatch tables (SEND_F's,
 * then SEND_B's); NULL when its stage or microbatch is out of range. */
static int *send_slot(const schedule *s, int *slot, const action *a)
{
    long k = st_mb_index(s, a->stage, a->microbatch);
    if (k < 0) return NULL;
    return slot + (a->kind == ACT_SEND_F ? 0 : (size_t)s->nstages * sched_total_mb(s)) + k;
}

/* Checks row r's waits by PyTorch 2.15's rules: a WAIT_SEND_F/B follows its own send (same
 * stage and microbatch) on the rank, once; a WAIT_REDUCE_GRAD follows the rank's one
 * pending REDUCE_GRAD of its stage. With send waits in the file (sends_waited) every send
 * needs its wait, with reduce waits (reduces_waited) every REDUCE_GRAD, and only one
 * reduction may be pending at a time. slot is a zeroed nstages x total-microbatch table per
 * send kind (2 tables), left zeroed. 0, or -1 with err ("row R, field F: ..."). */
static int check_row_waits(const char *file, const schedule *s, int r, const actvec *l,
                           const actvec *wv, int sends_waited, int reduces_waited,
                           int *slot, plumb_err *err)
{
    int rc = -1, pending = -1, pending_field = -1;
    char t[48];
    int j = 0;
    for (int i = 0; i <= l->n; i++) {
        for (; j < wv->n && wv->a[j].peer == i; j++) {
            const action *on = &wv->a[j];
            if (on->kind == ACT_ALLREDUCE) {
                if (pending != on->stage) {
                    err_set(err, file, NULL, "row %d, field %d: %dWAIT_REDUCE_GRAD has no "
                            "pending %s before it on this rank", r + 1, wv->a[j].version + 1,
                            on->stage, action_format(on, t, sizeof t));
                    goto done;
                }
                pending = -1;
                continue;
            }
            int *e = send_slot(s, slot, on);
            if (!e || *e <= 0) {
                err_set(err, file, NULL, "row %d, field %d: %dWAIT_%s%d %s", r + 1,
                        wv->a[j].version + 1, on->stage, act_kind_name(on->kind),
                        on->microbatch, e && *e < 0 ? "waits a second time"
                        : "has no send before it on this rank");
                goto done;
            }
            *e = -1;
        }
        if (i == l->n) break;
        const action *a = &l->a[i];
        if (a->kind == ACT_ALLREDUCE && reduces_waited) {
            if (pending >= 0) {
                err_set(err, file, NULL, "row %d, field %d: %s while stage %d's REDUCE_GRAD "
                        "has no WAIT_REDUCE_GRAD yet (PyTorch 2.15 keeps one pending)", r + 1,
                        a->version + 1, action_format(a, t, sizeof t), pending);
                goto done;
            }
            pending = a->stage;
            pending_field = a->version;
        } else if (act_is_send(a->kind) && send_slot(s, slot, a)) {
            *send_slot(s, slot, a) = i + 1;
        }
    }
    if (pending >= 0) {
        err_set(err, file, NULL, "row %d, field %d: %dREDUCE_GRAD has no WAIT_REDUCE_GRAD "
                "after it", r + 1, pending_field + 1, pending);
        goto done;
    }
    for (int i = 0; i < l->n; i++) {
        const action *a = &l->a[i];
        int *e = act_is_send(a->kind) ? send_slot(s, slot, a) : NULL;
        if (e && *e > 0 && sends_waited) {
            err_set(err, file, NULL, "row %d, field %d: %s has no WAIT_%s%d after it (a file "
                    "with waits needs one per send, as PyTorch 2.15 does)", r + 1,
                    a->version + 1, action_format(a, t, sizeof t), act_kind_name(a->kind),
                    a->microbatch);
            goto done;
        }
    }
    rc = 0;
done:
    for (int i = 0; i < l->n; i++) { /* leave the tables zeroed */
        int *e = act_is_send(l->a[i].kind) ? send_slot(s, slot, &l->a[i]) : NULL;
        if (e) *e = 0;
    }
    return rc;
}

/* Checks every row's waits (check_row_waits); 0, or -1 with err. */
static int check_waits(const char *file, const schedule *s, const actvec *lists,
                       const actvec *wv, int nrows, plumb_err *err)
{
    int sends_waited = 0, reduces_waited = 0;
    for (int r = 0; r < nrows; r++)
        for (int j = 0; j < wv[r].n; j++) {
            if (wv[r].a[j].kind == ACT_ALLREDUCE) reduces_waited = 1;
            else sends_waited = 1;
        }
    if (!sends_waited && !reduces_waited) return 0; /* PyTorch 2.11's form */
    int *slot = calloc(2 * (size_t)s->nstages * (size_t)sched_total_mb(s), sizeof *slot);
    if (!slot) return err_set(err, file, NULL, "out of memory");
    int rc = 0;
    for (int r = 0; r < nrows && !rc; r++)
        rc = check_row_waits(file, s, r, &lists[r], &wv[r], sends_waited, reduces_waited,
                             slot, err);
    free(slot);
    return rc;
}

schedule *schedule_from_rows(const char *file, char ***rows, const int *nfields, int nrows,
                             const sched_spec *spec, plumb_err *err)
{
    if (!spec) return err_set(err, file, NULL, "no schedule spec to place the stages"), NULL;
    /* while parsing, an action's version field holds the CSV field it came from (for
     * messages); sched_assign_versions overwrites it */
    actvec *lists = calloc((size_t)(nrows > 0 ? nrows : 1), sizeof *lists);
    actvec *waits = calloc((size_t)(nrows > 0 ? nrows : 1), sizeof *waits);
    schedule *s = NULL;
    if (!lists || !waits) goto oom;
    long maxmb = -1;
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < nfields[r]; c++) {
            int before = lists[r].n;
            if (parse_field(file, r, c, rows[r][c], &lists[r], &waits[r], err)) goto fail;
            for (int i = before; i < lists[r].n; i++) {
                lists[r].a[i].version = c;
                if (lists[r].a[i].microbatch > maxmb) maxmb = lists[r].a[i].microbatch;
            }
        }
    sched_spec sp = *spec;
    if (sp.microbatches >= 1 && sp.iterations < 1)
        sp.iterations = maxmb >= 0 ? (int)(maxmb / sp.microbatches) + 1 : 1;
    s = sched_alloc(&sp, err);
    if (!s) {
        char m[PLUMB_ERR_MAX];
        snprintf(m, sizeof m, "%s", err ? err->msg : "");
        err_set(err, file, NULL, "%s", m);
        goto fail;
    }
    if (maxmb >= sched_total_mb(s)) {
        err_set(err, file, NULL, "microbatch %ld is beyond %d microbatches x %d iterations",
                maxmb, s->microbatches, s->iterations);
        goto fail;
    }
    if (nrows != s->nworkers) {
        err_set(err, file, NULL, "expected %d rows, one per rank of the %s placement (got %d)",
                s->nworkers, sched_place_name(sched_traits_of(spec->kind)->place), nrows);
        goto fail;
    }
    int has_comm = 0;
    for (int w = 0; w < nrows; w++)
        for (int i = 0; i < lists[w].n; i++) {
            const action *a = &lists[w].a[i];
            if (a->stage >= s->nstages || !sched_hosts(s, w, a->stage)) {
                char t[48];
                err_set(err, file, NULL, "row %d, field %d: stage %d is not placed on rank %d "
                        "(got \"%s\")", w + 1, lists[w].a[i].version + 1, a->stage, w,
                        action_format(a, t, sizeof t));
                goto fail;
            }
            has_comm |= act_is_comm(a->kind);
        }
    if (check_waits(file, s, lists, waits, nrows, err)) goto fail;
    /* peers: the worker that holds the neighbouring stage's work for that microbatch */
    int S = s->nstages, T = sched_total_mb(s);
    int *fw = malloc((size_t)S * T * sizeof *fw);
    if (!fw) goto oom;
    for (size_t i = 0; i < (size_t)S * T; i++) fw[i] = -1;
    for (int w = 0; w < nrows; w++)
        for (int i = 0; i < lists[w].n; i++)
            if (lists[w].a[i].kind == ACT_F)
                fw[(size_t)lists[w].a[i].stage * T + lists[w].a[i].microbatch] = w;
    for (int w = 0; w < nrows; w++)
        for (int i = 0; i < lists[w].n; i++) {
            action *a = &lists[w].a[i];
            if (!act_is_comm(a->kind)) continue;
            int ps = (a->kind == ACT_SEND_F || a->kind == ACT_RECV_B) ? a->stage + 1 : a->stage - 1;
            if (ps < 0 || ps >= S) {
                char t[48];
                err_set(err, file, NULL, "row %d, field %d: %s has no neighbouring stage %d",
                        w + 1, lists[w].a[i].version + 1, action_format(a, t, sizeof t), ps);
                free(fw);
                goto fail;
            }
            int pw = fw[(size_t)ps * T + a->microbatch];
            a->peer_stage = ps;
            a->peer = pw >= 0 ? pw : schedule_worker_of(s, ps, a->microbatch);
        }
    free(fw);
    if (sched_add_allreduce(s, lists, err)) goto fail_file;
    if (!has_comm && sched_lower(s, lists, NULL, err)) goto fail_file;
    if (sched_place_steps(s, lists, err)) goto fail_file;
    sched_assign_versions(s, lists);
    sched_adopt(s, lists, err);
    free(lists);
    for (int r = 0; r < nrows; r++) actvec_free(&waits[r]);
    free(waits);
    return s;
fail_file: {
        char m[PLUMB_ERR_MAX];
        snprintf(m, sizeof m, "%s", err ? err->msg : "");
        err_set(err, file, NULL, "%s", m);
        goto fail;
    }
oom:
    err_set(err, file, NULL, "out of memory");
fail:
    for (int r = 0; lists && r < nrows; r++) actvec_free(&lists[r]);
    free(lists);
    for (int r = 0; waits && r < nrows; r++) actvec_free(&waits[r]);
    free(waits);
    schedule_free(s);
    return NULL;
}

/* --- reading the file ---------------------------------------------------------------- */

#define CSV_MAX_BYTES (64L << 20)

typedef struct csvrows {
    char ***rows;
    int *nf;
    int n, cap;
} csvrows;

static void csvrows_free(csvrows *c)
{
    for (int r = 0; r < c->n; r++) {
        for (int f = 0; f < c->nf[r]; f++) free(c->rows[r][f]);
        free(c->rows[r]);
    }
    free(c->rows);
    free(c->nf);
}

/* Splits text into rows of fields (RFC 4180 quoting as Python's csv module writes it). */
static int csv_split(const char *text, size_t len, csvrows *out)
{
    memset(out, 0, sizeof *out);
    size_t i = 0;
    while (i < len) {
        if (out->n == out->cap) {
            int cap = out->cap ? 2 * out->cap : 16;
            char ***r = realloc(out->rows, (size_t)cap * sizeof *r);
            if (!r) return -1;
            out->rows = r;
            int *nf = realloc(out->nf, (size_t)cap * sizeof *nf);
            if (!nf) return -1;
            out->nf = nf;
            out->cap = cap;
        }
        char **fields = NULL;
        int nf = 0, fcap = 0;
        out->rows[out->n] = NULL;
        out->nf[out->n] = 0;
        out->n++;
        int line_end = 0;
        if (text[i] == '\n' || text[i] == '\r') { /* an empty row */
            if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
            i++;
            continue;
        }
        while (!line_end) {
            size_t cap = 16, l = 0;
            char *f = malloc(cap);
            if (!f) return -1;
            int quoted = i < len && text[i] == '"';
            if (quoted) i++;
            while (i < len) {
                char ch = text[i];
                if (quoted) {
                    if (ch == '"') {
                        if (i + 1 < len && text[i + 1] == '"') {
                            i += 2;
                            ch = '"';
                        } else {
                            quoted = 0;
                            i++;
                            continue;
                        }
                    } else {
                        i++;
                    }
                } else {
                    if (ch == ',' || ch == '\n' || ch == '\r') break;
                    i++;
                }
                if (l + 2 > cap) {
                    char *g = realloc(f, cap *= 2);
                    if (!g) {
                        free(f);
                        return -1;
                    }
                    f = g;
                }
                f[l++] = ch;
            }
            f[l] = '\0';
            char **g = array_room(fields, nf, &fcap, 8, sizeof *g);
            if (!g) {
                free(f);
                return -1;
            }
            fields = g;
            out->rows[out->n - 1] = fields;
            fields[nf++] = f;
            out->nf[out->n - 1] = nf;
            if (i >= len) {
                line_end = 1;
            } else if (text[i] == ',') {
                i++;
            } else {
                if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
                i++;
                line_end = 1;
            }
        }
    }
    return 0;
}

schedule *schedule_read_csv(const char *path, const sched_spec *spec, plumb_err *err)
{
    FILE *f = file_open_read(path, "a CSV file", err);
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            if ((long)cap > CSV_MAX_BYTES + 65536) {
                free(buf);
                fclose(f);
                return err_set(err, path, NULL, "larger than %ld bytes", CSV_MAX_BYTES), NULL;
            }
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return err_set(err, path, NULL, "out of memory"), NULL;
            }
            buf = b;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f), rerrno = errno;
    fclose(f);
    if (bad) { /* a folder given for a file fails here, with EISDIR */
        free(buf);
        return err_set(err, path, NULL, "cannot read: %s (expected a CSV file)",
                       strerror(rerrno)), NULL;
    }
    if (memchr(buf, '\0', len)) {
        free(buf);
        return err_set(err, path, NULL, "expected CSV text (got binary data)"), NULL;
    }
    size_t start = (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) ? 3 : 0; /* BOM */
    csvrows rows;
    if (csv_split(buf + start, len - start, &rows)) {
        csvrows_free(&rows);
        free(buf);
        return err_set(err, path, NULL, "out of memory"), NULL;
    }
    free(buf);
    schedule *s = schedule_from_rows(path, rows.rows, rows.nf, rows.n, spec, err);
    csvrows_free(&rows);
    return s;
}
