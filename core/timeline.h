/* timeline.h: timed actions per track, the record that both the simulator and the executor
 * produce, so that `plumb compare` reads prediction and measurement alike. A track is a
 * device's compute stream, a device's collective (all-reduce) stream, or a directed link
 * between two devices. The one writer produces Chrome trace-event JSON (opens in Perfetto
 * and chrome://tracing: one track per device and per link); the reader takes that same
 * format back. Times are seconds in memory, microseconds in the file
 * (docs/formats.md). */
#ifndef PLUMB_TIMELINE_H
#define PLUMB_TIMELINE_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

#define TRACE_FORMAT "plumb-trace/1"

typedef enum tl_track_kind {
    TL_TRACK_DEVICE = 0,      /* a device's compute stream: F, B, I, W, step */
    TL_TRACK_COLLECTIVE,      /* a device's all-reduce stream */
    TL_TRACK_LINK,            /* the directed link device -> peer: transfers */
    TL_TRACK_NKINDS
} tl_track_kind;

typedef enum tl_kind {
    TL_F = 0, TL_B, TL_I, TL_W,  /* compute: forward, backward, its input/weight halves */
    TL_STEP,                     /* optimizer step */
    TL_SEND_F,                   /* transfer of activations to the next stage */
    TL_SEND_B,                   /* transfer of gradients to the previous stage */
    TL_ALLREDUCE,                /* gradient all-reduce among a stage's replicas */
    TL_TP_ALLREDUCE,             /* tensor-parallel collectives inside a split layer's */
    TL_TP_REDUCE_SCATTER,        /* forward or backward (the executor's; the simulator */
    TL_TP_ALL_GATHER,            /* folds them into F and B), on collective tracks */
    TL_NKINDS
} tl_kind;

typedef struct tl_track {
    int kind;                 /* tl_track_kind */
    int device;               /* device id (link: the sender) */
    int peer;                 /* link: the receiver; else -1 */
    char *name;               /* shown by trace viewers, e.g. "device 3 (V100)" */
    double peak_bytes;        /* device tracks: the most memory the device held over the
                                 run (predicted or measured), bytes; < 0 unknown */
    int tp_rank;              /* tensor-parallel rank whose actions the track holds: 0 for
                                 the group's first (the track the simulator predicts) and
                                 every run without tensor parallelism */
} tl_track;

typedef struct tl_event {
    double start_s, dur_s;    /* seconds from the start of the run */
    double bytes;             /* transfers and all-reduces: bytes moved; else 0 */
    int track;                /* index into the timeline's tracks */
    int kind;                 /* tl_kind */
    int stage;                /* (virtual) stage; transfers: the sending stage */
    int peer_stage;           /* transfers: the receiving stage; else -1 */
    int microbatch;           /* global microbatch; -1 for step and all-reduce */
    int iteration;            /* iteration the action belongs to, >= 0 */
} tl_event;

/* One sample of a device's memory over time: from t_s on (until its next sample) the
 * device holds `bytes`. Written as Chrome counter events ("ph": "C"). */
typedef struct tl_counter {
    int track;                /* the device's compute track */
    double t_s;               /* seconds from the start of the run */
    double bytes;
} tl_counter;

typedef struct timeline {
    char *source;             /* "sim" or "exec" (or what the file said) */
    char *model;              /* the model the run trained or simulated; NULL unknown */
    int nstage_layers;        /* stages in stage_layers; 0 unknown */
    int *stage_layers;        /* [2 * nstage_layers]: first and last layer of each stage */
    int ntracks, cap_tracks;
    tl_track *tracks;
    int hint;                 /* the track timeline_track returned last (a lookup cache) */
    size_t n, cap;
    tl_event *ev;             /* in the order added (not necessarily by time) */
    size_t ncounters, cap_counters;
    tl_counter *counters;     /* memory samples per device track, in the order added */
} timeline;

/* Returns an empty timeline (free with timeline_free), NULL when out of memory. */
timeline *timeline_new(const char *source);
void timeline_free(timeline *tl);

/* Returns the track id of (kind, device, peer), adding it with `name` (copied; NULL = a
 * default like "device 3" / "link 3->4") and peak_bytes -1 when new; -1 when out of
 * memory. */
int timeline_track(timeline *tl, int kind, int device, int peer, const char *name);
/* The same for tensor-parallel rank tp_rank's track (>= 0; written as the track's
 * "tp_rank" when > 0): timeline_track is timeline_track_tp with tp_rank 0. */
int timeline_track_tp(timeline *tl, int kind, int device, int peer, int tp_rank,
                      const char *name);

/* Names what the run ran, so that plumb compare can refuse two runs of different models
 * or plans: the model (copied; NULL none) and, for n > 0 stages, the first and last layer
 * of each (copied). The writer puts them in otherData as "model" and "stage_layers"
 * ([[first, last], ...]). Returns 0, or -1 when out of memory (tl then names nothing). */
int timeline_set_model(timeline *tl, const char *model, int n, const int *first,
                       const int *last);

/* Appends a copy of e. Returns 0, or -1 when out of memory. */
int timeline_add(timeline *tl, const tl_event *e);

/* Appends a memory sample of device track `track` (see tl_counter). Returns 0, or -1 when
 * out of memory. */
int timeline_counter_add(timeline *tl, int track, double t_s, double bytes);

/* "F", "B", "I", "W", "step", "send_f", "send_b", "allreduce", "tp_allreduce",
 * "tp_reduce_scatter", "tp_all_gather"; tl_kind_parse: -1 unknown. */
const char *tl_kind_name(int kind);
int tl_kind_parse(const char *name);
/* 1 for the kinds that run on a device's compute stream (F, B, I, W, step), else 0. */
int tl_kind_is_compute(int kind);
const char *tl_track_kind_name(int kind); /* "device", "collective", "link" */

/* The display name of e, e.g. "F3 s1", "B3 s2", "F3 s1>s2" (transfer), "AR s1",
 * "step s1", "TP-AR3 s1" (tensor-parallel: TP-AR, TP-RS, TP-AG with the microbatch, or
 * none at a step). Returns buf. */
char *tl_event_name(const tl_event *e, char *buf, size_t n);

/* Sorts events by (track, start). */
void timeline_sort(timeline *tl);

/* End of the last event, seconds (0 when empty). */
double timeline_end(const timeline *tl);

/* The Chrome trace-event JSON text of tl (caller frees), NULL when out of memory. Besides
 * the metadata and one complete event ("X") per event, it holds a flow ("s" on the
 * transfer, "f" on the computation that consumes it, one id per pair) from each transfer
 * (send_f, send_b on a link track) to its receiver's F (activations) or B / I (gradients)
 * of the same microbatch and receiving stage, when the timeline has that computation, and
 * a counter event ("C", "memory dN", args {"bytes": ...}) per memory sample. */
char *timeline_chrome_text(const timeline *tl, size_t *len);

/* The exact length in bytes of timeline_chrome_text(tl): the writer's own code run in a
 * counting buffer (strbuf.h), which formats every field but stores nothing. 0 when out of
 * memory (the text is never empty). */
size_t timeline_chrome_size(const timeline *tl);

/* Streams the text of timeline_chrome_text(tl) into f as the writer formats it, holding no
 * more than f's buffer, while it is at most max bytes long (max 0: any length): returns 0
 * with *len its length; 1 when it would be longer than max, with *len its exact length
 * (past max the writer only counts; f then holds a prefix of no use: the caller discards
 * it); -1 when out of memory or a write to f failed (errno set). The caller flushes f and
 * checks it for errors. */
int timeline_chrome_stream(const timeline *tl, FILE *f, size_t max, size_t *len);

/* A trace streamed into the temporary file of an atomic write (core/json.h's
 * files_write_atomic_out, with timeline_chrome_file_write as the file's writer). */
typedef struct timeline_chrome_file {
    const timeline *tl;
    const char *path; /* named in the error */
    size_t max;       /* the limit in bytes; 0: any length */
    size_t len;       /* set: the text's exact length once written or refused */
    int over;         /* set to 1 when the text is longer than max (the write refused) */
} timeline_chrome_file;

/* A trace limit of limit_bytes as timeline_chrome_file's max: at least one byte (max 0
 * would mean no limit), SIZE_MAX when it is above what size_t holds; 1 when it is not a
 * number. */
size_t timeline_chrome_max(double limit_bytes);

/* files_write_atomic_out's writer of a timeline_chrome_file (ctx): streams its text into f
 * (timeline_chrome_stream). Returns 0; -1 with err set when the text is longer than max
 * (over set, len the exact length) or a write failed. */
int timeline_chrome_file_write(FILE *f, void *ctx, plumb_err *err);

/* Writes tl as Chrome trace-event JSON to path atomically, streamed into the temporary
 * file (timeline_chrome_stream). Returns 0, or -1 with err. */
int timeline_write_chrome(const timeline *tl, const char *path, plumb_err *err);

/* Reads a trace written by timeline_write_chrome (or by hand in that format). Returns a
 * new timeline or NULL with err ("FILE: traceEvents[12].args.stage: expected ..."). */
timeline *timeline_read_chrome(const char *path, plumb_err *err);
struct cJSON;
timeline *timeline_from_chrome_json(const struct cJSON *root, const char *file,
                                    plumb_err *err);

#endif
