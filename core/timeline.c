/* timeline.c: timed actions per track, and the one Chrome trace-event JSON writer and reader
 * that the simulator and the executor share (format in docs/formats.md).
 *
 * Layout of the trace: process 1 "devices" holds one thread (track) per device compute
 * stream (tid = device id), process 2 "collectives" one per device all-reduce stream
 * (tid = device id), process 3 "links" one per directed link (tid = 1 + link number). Every
 * track gets thread_name and thread_sort_index metadata so Perfetto shows one named row per
 * device and per link. Each action is a complete event (ph "X", ts/dur in microseconds).
 * Each transfer gets a flow to the computation that receives it (ph "s" inside the
 * transfer, ph "f" with "bp": "e" inside the receiving F, B or I; Perfetto draws an arrow),
 * and each memory sample a counter event (ph "C", name "memory dN", process "devices"). */
#include "core/grow.h"
#include "core/strbuf.h"
#include "timeline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

enum { PID_DEVICES = 1, PID_COLLECTIVES = 2, PID_LINKS = 3 };
#define TL_TID_TP_STRIDE 100000

static const char *const kind_names[TL_NKINDS] = {
    "F", "B", "I", "W", "step", "send_f", "send_b", "allreduce", "tp_allreduce",
    "tp_reduce_scatter", "tp_all_gather",
};
static const char *const track_kind_names[TL_TRACK_NKINDS] = {"device", "collective", "link"};

const char *tl_kind_name(int kind)
{
    return kind >= 0 && kind < TL_NKINDS ? kind_names[kind] : "?";
}

int tl_kind_is_compute(int k)
{
    return k == TL_F || k == TL_B || k == TL_I || k == TL_W || k == TL_STEP;
}

int tl_kind_parse(const char *name)
{
    for (int k = 0; k < TL_NKINDS; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

const char *tl_track_kind_name(int kind)
{
    return kind >= 0 && kind < TL_TRACK_NKINDS ? track_kind_names[kind] : "?";
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

timeline *timeline_new(const char *source)
{
    timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    tl->source = xstrdup(source ? source : "");
    if (!tl->source) {
        free(tl);
        return NULL;
    }
    return tl;
}

void timeline_free(timeline *tl)
{
    if (!tl)
        return;
    for (int i = 0; i < tl->ntracks; i++)
        free(tl->tracks[i].name);
    free(tl->tracks);
    free(tl->ev);
    free(tl->counters);
    free(tl->source);
    free(tl->model);
    free(tl->stage_layers);
    free(tl);
}

int timeline_set_model(timeline *tl, const char *model, int n, const int *first,
                       const int *last)
{
    free(tl->model);
    free(tl->stage_layers);
    tl->model = NULL;
    tl->stage_layers = NULL;
    tl->nstage_layers = 0;
    if (model && !(tl->model = xstrdup(model)))
        return -1;
    if (n > 0) {
        if (!(tl->stage_layers = malloc(2 * (size_t)n * sizeof *tl->stage_layers))) {
            free(tl->model);
            tl->model = NULL;
            return -1;
        }
        for (int i = 0; i < n; i++) {
            tl->stage_layers[2 * i] = first[i];
            tl->stage_layers[2 * i + 1] = last[i];
        }
        tl->nstage_layers = n;
    }
    return 0;
}

int timeline_track(timeline *tl, int kind, int device, int peer, const char *name)
{
    return timeline_track_tp(tl, kind, device, peer, 0, name);
}

int timeline_track_tp(timeline *tl, int kind, int device, int peer, int tp_rank,
                      const char *name)
{
    if (kind != TL_TRACK_LINK)
        peer = -1;
    for (int k = -1; k < tl->ntracks; k++) {  /* the last answer first: callers repeat */
        int i = k < 0 ? tl->hint : k;
        if (i < 0 || i >= tl->ntracks)
            continue;
        const tl_track *t = &tl->tracks[i];
        if (t->kind == kind && t->device == device && t->peer == peer && t->tp_rank == tp_rank)
            return tl->hint = i;
    }
    tl_track *nt = array_room(tl->tracks, tl->ntracks, &tl->cap_tracks, 16, sizeof *nt);
    if (!nt)
        return -1;
    tl->tracks = nt;
    char dflt[64];
    if (!name && tp_rank > 0) {
        snprintf(dflt, sizeof dflt, "device %d tp rank %d%s", device, tp_rank,
                 kind == TL_TRACK_LINK ? " link" : kind == TL_TRACK_COLLECTIVE ? " collectives"
                                                                              : "");
        if (kind == TL_TRACK_LINK)
            snprintf(dflt + strlen(dflt), sizeof dflt - strlen(dflt), " ->%d", peer);
        name = dflt;
    }
    if (!name) {
        if (kind == TL_TRACK_LINK)
            snprintf(dflt, sizeof dflt, "link %d->%d", device, peer);
        else if (kind == TL_TRACK_COLLECTIVE)
            snprintf(dflt, sizeof dflt, "device %d all-reduce", device);
        else
            snprintf(dflt, sizeof dflt, "device %d", device);
        name = dflt;
    }
    char *nm = xstrdup(name);
    if (!nm)
        return -1;
    tl->tracks[tl->ntracks] = (tl_track){.kind = kind, .device = device, .peer = peer,
                                         .name = nm, .peak_bytes = -1, .tp_rank = tp_rank};
    return tl->hint = tl->ntracks++;
}

int timeline_add(timeline *tl, const tl_event *e)
{
    if (tl->n == tl->cap) {
        tl_event *ne = array_grow(tl->ev, &tl->cap, 1024, sizeof *ne);
        if (!ne)
            return -1;
        tl->ev = ne;
    }
    tl->ev[tl->n++] = *e;
    return 0;
}

int timeline_counter_add(timeline *tl, int track, double t_s, double bytes)
{
    if (tl->ncounters == tl->cap_counters) {
        tl_counter *c = array_grow(tl->counters, &tl->cap_counters, 256, sizeof *c);
        if (!c)
            return -1;
        tl->counters = c;
    }
    tl->counters[tl->ncounters++] = (tl_counter){.track = track, .t_s = t_s, .bytes = bytes};
    return 0;
}

char *tl_event_name(const tl_event *e, char *buf, size_t n)
{
    switch (e->kind) {
    case TL_F: case TL_B: case TL_I: case TL_W:
        snprintf(buf, n, "%s%d s%d", kind_names[e->kind], e->microbatch, e->stage);
        break;
    case TL_SEND_F: case TL_SEND_B:
        snprintf(buf, n, "%s%d s%d>s%d", e->kind == TL_SEND_F ? "F" : "B", e->microbatch,
                 e->stage, e->peer_stage);
        break;
    case TL_ALLREDUCE:
        snprintf(buf, n, "AR s%d", e->stage);
        break;
    case TL_STEP:
        snprintf(buf, n, "step s%d", e->stage);
        break;
    case TL_TP_ALLREDUCE: case TL_TP_REDUCE_SCATTER: case TL_TP_ALL_GATHER: {
        const char *k = e->kind == TL_TP_ALLREDUCE ? "AR"
                      : e->kind == TL_TP_REDUCE_SCATTER ? "RS" : "AG";
        if (e->microbatch >= 0)
            snprintf(buf, n, "TP-%s%d s%d", k, e->microbatch, e->stage);
        else
            snprintf(buf, n, "TP-%s s%d", k, e->stage);
        break;
    }
    default:
        snprintf(buf, n, "? s%d", e->stage);
    }
    return buf;
}

static int cmp_event(const void *a, const void *b)
{
    const tl_event *x = a, *y = b;
    if (x->track != y->track)
        return x->track < y->track ? -1 : 1;
    if (x->start_s != y->start_s)
        return x->start_s < y->start_s ? -1 : 1;
    return 0;
}

void timeline_sort(timeline *tl)
{
    if (tl->n > 1)
        qsort(tl->ev, tl->n, sizeof *tl->ev, cmp_event);
}

double timeline_end(const timeline *tl)
{
    double end = 0;
    for (size_t i = 0; i < tl->n; i++)
        if (tl->ev[i].start_s + tl->ev[i].dur_s > end)
            end = tl->ev[i].start_s + tl->ev[i].dur_s;
    return end;
}

/* --- writer ---------------------------------------------------------------------------- */

/* Writes s as a JSON string literal. */
static void sb_str(sbuf *b, const char *s)
{
    sbuf_printf(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sbuf_printf(b, "\\%c", c);
        else if (c < 0x20)
            sbuf_printf(b, "\\u%04x", c);
        else
            sbuf_printf(b, "%c", c);
    }
    sbuf_printf(b, "\"");
}

static int track_pid(const tl_track *t)
{
    return t->kind == TL_TRACK_LINK ? PID_LINKS
         : t->kind == TL_TRACK_COLLECTIVE ? PID_COLLECTIVES : PID_DEVICES;
}

/* tids: device and collective tracks use the device id; links 1 + their rank among links. */
static int *track_tids(const timeline *tl)
{
    int *tid = malloc(((size_t)tl->ntracks + 1) * sizeof *tid);
    if (!tid)
        return NULL;
    int nl = 0;
    /* a tensor-parallel rank's own thread beside its device's: TL_TID_TP_STRIDE apart */
    for (int i = 0; i < tl->ntracks; i++)
        tid[i] = tl->tracks[i].kind == TL_TRACK_LINK
                     ? 1 + nl++
                     : tl->tracks[i].device + TL_TID_TP_STRIDE * tl->tracks[i].tp_rank;
    return tid;
}

/* Flows: the computations a transfer can feed, indexed by (stage, microbatch, class:
 * 0 forward, 1 backward or input gradient), each with the device it ran on. */
typedef struct recv_key {
    int stage, mb, cls;
    size_t ev;
} recv_key;

static int cmp_recv(const void *a, const void *b)
{
    const recv_key *x = a, *y = b;
    if (x->stage != y->stage)
        return x->stage < y->stage ? -1 : 1;
    if (x->mb != y->mb)
        return x->mb < y->mb ? -1 : 1;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return (x->ev > y->ev) - (x->ev < y->ev);
}

/* The event that receives transfer e (on a link track), or -1. */
static long long recv_of(const timeline *tl, const recv_key *k, size_t nk, const tl_event *e)
{
    recv_key want = {e->peer_stage, e->microbatch, e->kind == TL_SEND_B, 0};
    size_t lo = 0, hi = nk;
    while (lo < hi) { /* the first key >= want */
        size_t mid = (lo + hi) / 2;
        if (cmp_recv(&k[mid], &want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int dst = tl->tracks[e->track].peer;
    for (; lo < nk && k[lo].stage == want.stage && k[lo].mb == want.mb && k[lo].cls == want.cls;
         lo++)
        if (tl->tracks[tl->ev[k[lo].ev].track].device == dst &&
            tl->tracks[tl->ev[k[lo].ev].track].tp_rank == tl->tracks[e->track].tp_rank)
            return (long long)k[lo].ev;
    return -1;
}

/* Appends the flow events of every transfer that has a receiver; returns -1 when out of
 * memory. */
static int write_flows(const timeline *tl, const int *tid, sbuf *b)
{
    recv_key *k = malloc((tl->n + 1) * sizeof *k);
    if (!k)
        return -1;
    size_t nk = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if ((e->kind == TL_F || e->kind == TL_B || e->kind == TL_I) &&
            tl->tracks[e->track].kind == TL_TRACK_DEVICE)
            k[nk++] = (recv_key){e->stage, e->microbatch, e->kind != TL_F, i};
    }
    qsort(k, nk, sizeof *k, cmp_recv);
    char name[96];
    long long id = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if ((e->kind != TL_SEND_F && e->kind != TL_SEND_B) ||
            tl->tracks[e->track].kind != TL_TRACK_LINK)
            continue;
        long long r = recv_of(tl, k, nk, e);
        if (r < 0)
            continue;
        const tl_event *c = &tl->ev[r];
        /* both ends at their slice's middle, so each binds to its slice */
        tl_event_name(e, name, sizeof name);
        sbuf_printf(b, ",\n{\"name\": \"%s\", \"cat\": \"transfer\", \"ph\": \"s\", "
                    "\"id\": %lld, \"ts\": %.3f, \"pid\": %d, \"tid\": %d}", name, ++id,
                    (e->start_s + e->dur_s / 2) * 1e6, PID_LINKS, tid[e->track]);
        sbuf_printf(b, ",\n{\"name\": \"%s\", \"cat\": \"transfer\", \"ph\": \"f\", "
                    "\"bp\": \"e\", \"id\": %lld, \"ts\": %.3f, \"pid\": %d, \"tid\": %d}",
                    name, id, (c->start_s + c->dur_s / 2) * 1e6, PID_DEVICES, tid[c->track]);
    }
    free(k);
    return 0;
}

/* Writes (or, b->counting, counts) the whole trace of tl into b: the one place that knows
 * the format. Out of memory sets b->oom. */
static void chrome_emit(const timeline *tl, sbuf *b)
{
    int *tid = track_tids(tl);
    if (!tid) {
        b->oom = 1;
        return;
    }
    sbuf_printf(b, "{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"format\": ");
    sb_str(b, TRACE_FORMAT);
    sbuf_printf(b, ", \"source\": ");
    sb_str(b, tl->source);
    if (tl->model) {
        sbuf_printf(b, ", \"model\": ");
        sb_str(b, tl->model);
    }
    for (int i = 0; i < tl->nstage_layers; i++)
        sbuf_printf(b, "%s[%d, %d]%s", i ? ", " : ", \"stage_layers\": [",
                    tl->stage_layers[2 * i], tl->stage_layers[2 * i + 1],
                    i == tl->nstage_layers - 1 ? "]" : "");
    sbuf_printf(b, ", \"time_unit\": \"us\"},\n\"traceEvents\": [\n");
    static const char *const pnames[] = {"", "devices", "collectives", "links"};
    int used[4] = {0};
    for (int i = 0; i < tl->ntracks; i++)
        used[track_pid(&tl->tracks[i])] = 1;
    const char *sep = "";
    for (int p = 1; p <= 3; p++) {
        if (!used[p])
            continue;
        sbuf_printf(b, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
                  "\"args\": {\"name\": \"%s\"}},\n", sep, p, pnames[p]);
        sbuf_printf(b, "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, "
                  "\"tid\": 0, \"args\": {\"sort_index\": %d}}", p, p);
        sep = ",\n";
    }
    for (int i = 0; i < tl->ntracks; i++) {
        const tl_track *t = &tl->tracks[i];
        int pid = track_pid(t);
        sbuf_printf(b, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                  "\"args\": {\"name\": ", sep, pid, tid[i]);
        sb_str(b, t->name);
        sbuf_printf(b, ", \"track\": \"%s\", \"device\": %d, \"peer\": %d",
                  track_kind_names[t->kind], t->device, t->peer);
        if (t->kind == TL_TRACK_DEVICE && t->peak_bytes >= 0)
            sbuf_printf(b, ", \"peak_memory_bytes\": %.17g", t->peak_bytes);
        if (t->tp_rank > 0)
            sbuf_printf(b, ", \"tp_rank\": %d", t->tp_rank);
        sbuf_printf(b, "}},\n");
        sbuf_printf(b, "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, "
                  "\"tid\": %d, \"args\": {\"sort_index\": %d}}", pid, tid[i], i);
        sep = ",\n";
    }
    char name[96];
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        const tl_track *t = &tl->tracks[e->track];
        sbuf_printf(b, "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, "
                  "\"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {\"stage\": %d, "
                  "\"microbatch\": %d, \"kind\": \"%s\", \"iteration\": %d, "
                  "\"bytes\": %.17g",
                  sep, tl_event_name(e, name, sizeof name), tl_kind_name(e->kind),
                  e->start_s * 1e6, e->dur_s * 1e6, track_pid(t), tid[e->track], e->stage,
                  e->microbatch, tl_kind_name(e->kind), e->iteration, e->bytes);
        if (e->peer_stage >= 0)
            sbuf_printf(b, ", \"peer_stage\": %d", e->peer_stage);
        if (t->kind == TL_TRACK_LINK)
            sbuf_printf(b, ", \"src\": %d, \"dst\": %d", t->device, t->peer);
        sbuf_printf(b, "}}");
        sep = ",\n";
    }
    if (*sep && write_flows(tl, tid, b))
        b->oom = 1;
    for (size_t i = 0; *sep && i < tl->ncounters; i++) {
        const tl_counter *c = &tl->counters[i];
        if (c->track < 0 || c->track >= tl->ntracks)
            continue;
        sbuf_printf(b, ",\n{\"name\": \"memory d%d\", \"ph\": \"C\", \"ts\": %.3f, "
                    "\"pid\": %d, \"tid\": %d, \"args\": {\"bytes\": %.17g}}",
                    tl->tracks[c->track].device, c->t_s * 1e6, PID_DEVICES, tid[c->track],
                    c->bytes);
    }
    sbuf_printf(b, "\n]}\n");
    free(tid);
}

char *timeline_chrome_text(const timeline *tl, size_t *len)
{
    sbuf b = {.cap = 4096 + tl->n * 200};
    if (!(b.p = malloc(b.cap)))
        return NULL;
    chrome_emit(tl, &b);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.n;
    return b.p;
}

size_t timeline_chrome_size(const timeline *tl)
{
    sbuf b = {.counting = 1};
    chrome_emit(tl, &b);
    return b.oom ? 0 : b.n;
}

int timeline_chrome_stream(const timeline *tl, FILE *f, size_t max, size_t *len)
{
    sbuf b = {.out = f, .max = max};
    chrome_emit(tl, &b);
    *len = b.n;
    if (b.oom || b.werr) {
        errno = b.oom ? ENOMEM : b.werr;
        return -1;
    }
    return b.counting ? 1 : 0;
}

size_t timeline_chrome_max(double limit_bytes)
{
    if (!(limit_bytes >= 1))
        return 1;
    return limit_bytes >= (double)SIZE_MAX ? SIZE_MAX : (size_t)limit_bytes;
}

int timeline_chrome_file_write(FILE *f, void *ctx, plumb_err *err)
{
    timeline_chrome_file *c = ctx;
    int rc = timeline_chrome_stream(c->tl, f, c->max, &c->len);
    if (rc == 1) {
        c->over = 1;
        return err_set(err, c->path, NULL, "longer than the limit of %zu bytes", c->max);
    }
    return rc ? err_set(err, c->path, NULL, "cannot write: %s", strerror(errno)) : 0;
}

int timeline_write_chrome(const timeline *tl, const char *path, plumb_err *err)
{
    timeline_chrome_file c = {.tl = tl, .path = path};
    file_out fo = {.path = path, .write = timeline_chrome_file_write, .ctx = &c};
    return files_write_atomic_out(1, &fo, err);
}

/* --- reader ---------------------------------------------------------------------------- */

/* (pid, tid) -> track id, filled from metadata and from events. */
typedef struct tkey {
    int pid, tid, track;
} tkey;

static int find_key(const tkey *k, int n, int pid, int tid)
{
    for (int i = 0; i < n; i++)
        if (k[i].pid == pid && k[i].tid == tid)
            return i;
    return -1;
}

static int int_arg(const jctx *c, const cJSON *args, const char *path, const char *key,
                   int required, long long lo, int *out)
{
    long long v = *out;
    if (json_get_int(c, args, path, key, required, lo, 2147483647LL, &v))
        return -1;
    *out = (int)v;
    return 0;
}

/* Reads one thread_name record into a track (kind/device/peer from its args when given,
 * else from pid and tid). Returns 0 or -1 with err. */
static int read_thread_name(const jctx *c, timeline *tl, tkey **keys, int *nkeys, int *cap,
                            const cJSON *ev, const char *path, int pid, int tid)
{
    const cJSON *args;
    char p[160];
    json_path(p, sizeof p, path, "args");
    if (json_get_obj(c, ev, path, "args", 1, &args))
        return -1;
    const char *name, *tk = NULL;
    if (json_get_str(c, args, p, "name", 1, &name) || json_get_str(c, args, p, "track", 0, &tk))
        return -1;
    int kind = pid == PID_LINKS ? TL_TRACK_LINK
             : pid == PID_COLLECTIVES ? TL_TRACK_COLLECTIVE : TL_TRACK_DEVICE;
    if (tk) {
        kind = -1;
        for (int k = 0; k < TL_TRACK_NKINDS; k++)
            if (strcmp(tk, track_kind_names[k]) == 0)
                kind = k;
        if (kind < 0) {
            char pk[200];
            return err_set(c->err, c->file, json_path(pk, sizeof pk, p, "track"),
                           "expected \"device\", \"collective\" or \"link\" (got \"%s\")", tk);
        }
    }
    int device = tid, peer = -1, tp_rank = 0;
    if (int_arg(c, args, p, "device", kind == TL_TRACK_LINK, 0, &device) ||
        int_arg(c, args, p, "peer", kind == TL_TRACK_LINK, -1, &peer) ||
        int_arg(c, args, p, "tp_rank", 0, 0, &tp_rank))
        return -1;
    double peak = -1;
    if (kind == TL_TRACK_DEVICE && json_get_num(c, args, p, "peak_memory_bytes", 0, J_NONNEG,
                                                &peak))
        return -1;
    int id = timeline_track_tp(tl, kind, device, peer, tp_rank, name);
    if (id < 0)
        return err_set(c->err, c->file, NULL, "out of memory");
    if (peak >= 0)
        tl->tracks[id].peak_bytes = peak;
    if (find_key(*keys, *nkeys, pid, tid) >= 0)
        return 0;
    tkey *nk = array_room(*keys, *nkeys, cap, 16, sizeof *nk);
    if (!nk)
        return err_set(c->err, c->file, NULL, "out of memory");
    *keys = nk;
    (*keys)[(*nkeys)++] = (tkey){pid, tid, id};
    return 0;
}

static int read_event(const jctx *c, timeline *tl, tkey **keys, int *nkeys, int *cap,
                      const cJSON *ev, const char *path, int pid, int tid)
{
    double ts, dur;
    const cJSON *args;
    char p[160];
    json_path(p, sizeof p, path, "args");
    if (json_get_num(c, ev, path, "ts", 1, J_NONNEG, &ts) ||
        json_get_num(c, ev, path, "dur", 1, J_NONNEG, &dur) ||
        json_get_obj(c, ev, path, "args", 1, &args))
        return -1;
    const char *kname;
    if (json_get_str(c, args, p, "kind", 1, &kname))
        return -1;
    int kind = tl_kind_parse(kname);
    if (kind < 0) {
        char pk[200];
        return err_set(c->err, c->file, json_path(pk, sizeof pk, p, "kind"),
                       "expected F, B, I, W, step, send_f, send_b or allreduce (got \"%s\")",
                       kname);
    }
    tl_event e = {.start_s = ts * 1e-6, .dur_s = dur * 1e-6, .kind = kind, .microbatch = -1,
                  .peer_stage = -1};
    if (int_arg(c, args, p, "stage", 1, 0, &e.stage) ||
        int_arg(c, args, p, "microbatch", 0, -1, &e.microbatch) ||
        int_arg(c, args, p, "iteration", 0, 0, &e.iteration) ||
        int_arg(c, args, p, "peer_stage", 0, -1, &e.peer_stage) ||
        json_get_num(c, args, p, "bytes", 0, J_NONNEG, &e.bytes))
        return -1;
    int k = find_key(*keys, *nkeys, pid, tid);
    if (k < 0) {
        /* no metadata for this thread: derive the track from pid/tid (links need src/dst) */
        int tk = pid == PID_LINKS ? TL_TRACK_LINK
               : pid == PID_COLLECTIVES ? TL_TRACK_COLLECTIVE : TL_TRACK_DEVICE;
        int dev = tid, peer = -1;
        if (tk == TL_TRACK_LINK &&
            (int_arg(c, args, p, "src", 1, 0, &dev) || int_arg(c, args, p, "dst", 1, 0, &peer)))
            return -1;
        int id = timeline_track(tl, tk, dev, peer, NULL);
        if (id < 0)
            return err_set(c->err, c->file, NULL, "out of memory");
        if (*nkeys == *cap) {
            int nc = *cap ? 2 * *cap : 16;
            tkey *nk = realloc(*keys, (size_t)nc * sizeof *nk);
            if (!nk)
                return err_set(c->err, c->file, NULL, "out of memory");
            *keys = nk;
            *cap = nc;
        }
        (*keys)[*nkeys] = (tkey){pid, tid, id};
        k = (*nkeys)++;
    }
    e.track = (*keys)[k].track;
    if (timeline_add(tl, &e))
        return err_set(c->err, c->file, NULL, "out of memory");
    return 0;
}

/* otherData's optional "model" and "stage_layers" ([[first, last], ...]) into tl. */
static int read_model(const jctx *c, const cJSON *other, timeline *tl)
{
    const char *model = NULL;
    const cJSON *sl;
    int n, i = 0, rc = -1;
    if (json_get_str(c, other, "otherData", "model", 0, &model) ||
        json_get_arr(c, other, "otherData", "stage_layers", 0, &sl, &n))
        return -1;
    int *first = malloc(((size_t)n + 1) * sizeof *first);
    int *last = malloc(((size_t)n + 1) * sizeof *last);
    if (!first || !last) {
        err_set(c->err, c->file, NULL, "out of memory");
        goto done;
    }
    for (const cJSON *e = sl ? sl->child : NULL; e; e = e->next, i++) {
        char p[64], got[64];
        long long a, b;
        json_path_idx(p, sizeof p, "otherData", "stage_layers", i);
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2) {
            err_set(c->err, c->file, p, "expected [first layer, last layer] (got %s)",
                    json_describe(e, got, sizeof got));
            goto done;
        }
        if (json_item_int(c, cJSON_GetArrayItem(e, 0), p, 0, 0, 1 << 30, &a) ||
            json_item_int(c, cJSON_GetArrayItem(e, 1), p, 1, a, 1 << 30, &b))
            goto done;
        first[i] = (int)a;
        last[i] = (int)b;
    }
    if (timeline_set_model(tl, model, n, first, last)) {
        err_set(c->err, c->file, NULL, "out of memory");
        goto done;
    }
    rc = 0;
done:
    free(first);
    free(last);
    return rc;
}

timeline *timeline_from_chrome_json(const cJSON *root, const char *file, plumb_err *err)
{
    jctx c = {file, err};
    const cJSON *evs, *other = NULL;
    int n;
    const char *source = "";
    if (!cJSON_IsObject(root)) {
        char got[64];
        err_set(err, file, NULL, "expected a JSON object with traceEvents (got %s)",
                json_describe(root, got, sizeof got));
        return NULL;
    }
    if (json_get_obj(&c, root, "", "otherData", 0, &other))
        return NULL;
    if (other) {
        const char *fmt = NULL;
        if (json_get_str(&c, other, "otherData", "format", 0, &fmt) ||
            json_get_str(&c, other, "otherData", "source", 0, &source))
            return NULL;
        if (fmt && strcmp(fmt, TRACE_FORMAT) != 0) {
            err_set(err, file, "otherData.format", "expected \"%s\" (got \"%s\")",
                    TRACE_FORMAT, fmt);
            return NULL;
        }
    }
    if (json_get_arr(&c, root, "", "traceEvents", 1, &evs, &n))
        return NULL;
    timeline *tl = timeline_new(source);
    tkey *keys = NULL;
    int nkeys = 0, cap = 0;
    if (!tl) {
        err_set(err, file, NULL, "out of memory");
        return NULL;
    }
    if (other && read_model(&c, other, tl))
        goto fail;
    /* two passes: metadata first (it may follow the events), then the events */
    for (int pass = 0; pass < 2; pass++) {
        int i = 0;
        for (const cJSON *ev = evs->child; ev; ev = ev->next, i++) {
            char path[64];
            json_path_idx(path, sizeof path, "", "traceEvents", i);
            if (!cJSON_IsObject(ev)) {
                char got[64];
                err_set(err, file, path, "expected an object (got %s)",
                        json_describe(ev, got, sizeof got));
                goto fail;
            }
            const char *ph, *name;
            long long pid, tid = 0;
            if (json_get_str(&c, ev, path, "ph", 1, &ph) ||
                json_get_str(&c, ev, path, "name", 1, &name) ||
                json_get_int(&c, ev, path, "pid", 1, 0, 1 << 30, &pid) ||
                json_get_int(&c, ev, path, "tid", 0, 0, 1 << 30, &tid))
                goto fail;
            if (pass == 0 && strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
                if (read_thread_name(&c, tl, &keys, &nkeys, &cap, ev, path, (int)pid,
                                     (int)tid))
                    goto fail;
            } else if (pass == 1 && strcmp(ph, "X") == 0) {
                if (read_event(&c, tl, &keys, &nkeys, &cap, ev, path, (int)pid, (int)tid))
                    goto fail;
            }
        }
    }
    free(keys);
    return tl;
fail:
    free(keys);
    timeline_free(tl);
    return NULL;
}

timeline *timeline_read_chrome(const char *path, plumb_err *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root)
        return NULL;
    timeline *tl = timeline_from_chrome_json(root, path, err);
    cJSON_Delete(root);
    return tl;
}
