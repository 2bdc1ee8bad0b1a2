/* test_timeline.c: the shared timeline and its Chrome trace-event JSON writer and reader:
 * a round trip keeps every event (times to the written microsecond precision), the writer
 * names one track per device and per link (a device's peak memory with it), and the
 * reader rejects malformed traces with the field path. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/json.h"
#include "core/timeline.h"
#include "tests/tmpdir.h"

static timeline *sample(void)
{
    timeline *tl = timeline_new("sim");
    cr_assert_not_null(tl);
    int d0 = timeline_track(tl, TL_TRACK_DEVICE, 0, -1, "device 0 (V100)");
    int d1 = timeline_track(tl, TL_TRACK_DEVICE, 1, -1, NULL);
    int l01 = timeline_track(tl, TL_TRACK_LINK, 0, 1, "link 0->1 \"eth\"");
    int c0 = timeline_track(tl, TL_TRACK_COLLECTIVE, 0, -1, NULL);
    cr_assert(d0 == 0 && d1 == 1 && l01 == 2 && c0 == 3);
    cr_assert_eq(timeline_track(tl, TL_TRACK_DEVICE, 1, -1, "other name"), d1);
    cr_assert_eq(tl->tracks[d0].peak_bytes, -1, "a new track's peak is unknown");
    tl->tracks[d0].peak_bytes = 123456789012.0; /* device 1's stays unknown */
    tl_event e[] = {
        {.start_s = 0, .dur_s = 1e-3, .track = d0, .kind = TL_F, .stage = 0, .microbatch = 0,
         .peer_stage = -1},
        {.start_s = 1e-3, .dur_s = 0.5e-3, .bytes = 4096, .track = l01, .kind = TL_SEND_F,
         .stage = 0, .peer_stage = 1, .microbatch = 0},
        {.start_s = 1.5e-3, .dur_s = 1e-3, .track = d1, .kind = TL_F, .stage = 1,
         .microbatch = 0, .peer_stage = -1},
        {.start_s = 2.5e-3, .dur_s = 2e-3, .track = d1, .kind = TL_B, .stage = 1,
         .microbatch = 0, .peer_stage = -1, .iteration = 2},
        {.start_s = 5e-3, .dur_s = 3e-3, .bytes = 1e8, .track = c0, .kind = TL_ALLREDUCE,
         .stage = 0, .microbatch = -1, .peer_stage = -1},
        {.start_s = 8.123456e-3, .dur_s = 0, .track = d0, .kind = TL_STEP, .stage = 0,
         .microbatch = -1, .peer_stage = -1},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
        cr_assert_eq(timeline_add(tl, &e[i]), 0);
    return tl;
}

Test(timeline, names)
{
    char b[64];
    tl_event f = {.kind = TL_F, .stage = 1, .microbatch = 3};
    cr_expect_str_eq(tl_event_name(&f, b, sizeof b), "F3 s1");
    tl_event x = {.kind = TL_SEND_B, .stage = 2, .peer_stage = 1, .microbatch = 7};
    cr_expect_str_eq(tl_event_name(&x, b, sizeof b), "B7 s2>s1");
    for (int k = 0; k < TL_NKINDS; k++)
        cr_expect_eq(tl_kind_parse(tl_kind_name(k)), k);
    cr_expect_eq(tl_kind_parse("X"), -1);
}

Test(timeline, chrome_round_trip)
{
    timeline *tl = sample();
    char path[] = "/tmp/plumb-test-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    plumb_err e;
    cr_assert_eq(timeline_write_chrome(tl, path, &e), 0, "%s", e.msg);
    timeline *back = timeline_read_chrome(path, &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_expect_str_eq(back->source, "sim");
    cr_assert_eq(back->ntracks, tl->ntracks);
    for (int i = 0; i < tl->ntracks; i++) {
        cr_expect_eq(back->tracks[i].kind, tl->tracks[i].kind);
        cr_expect_eq(back->tracks[i].device, tl->tracks[i].device);
        cr_expect_eq(back->tracks[i].peer, tl->tracks[i].peer);
        cr_expect_str_eq(back->tracks[i].name, tl->tracks[i].name);
        cr_expect_eq(back->tracks[i].peak_bytes, tl->tracks[i].peak_bytes, "track %d peak", i);
    }
    cr_assert_eq(back->n, tl->n);
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *a = &tl->ev[i], *b = &back->ev[i];
        cr_expect(fabs(a->start_s - b->start_s) < 1e-9, "event %zu start", i);
        cr_expect(fabs(a->dur_s - b->dur_s) < 1e-9, "event %zu dur", i);
        cr_expect_eq(a->bytes, b->bytes);
        cr_expect_eq(a->track, b->track);
        cr_expect_eq(a->kind, b->kind);
        cr_expect_eq(a->stage, b->stage);
        cr_expect_eq(a->peer_stage, b->peer_stage);
        cr_expect_eq(a->microbatch, b->microbatch);
        cr_expect_eq(a->iteration, b->iteration);
    }
    cr_expect(fabs(timeline_end(back) - 8.123456e-3) < 1e-9);
    timeline_free(back);
    unlink(path);
    timeline_free(tl);
}

/* The text is valid JSON with thread_name metadata for each track and "X" events. */
Test(timeline, chrome_layout)
{
    timeline *tl = sample();
    size_t n;
    char *text = timeline_chrome_text(tl, &n);
    cr_assert_not_null(text);
    cr_expect_eq(strlen(text), n);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    const cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
    int names = 0, xs = 0;
    for (const cJSON *ev = evs->child; ev; ev = ev->next) {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        const char *nm = cJSON_GetObjectItem(ev, "name")->valuestring;
        if (strcmp(ph, "M") == 0 && strcmp(nm, "thread_name") == 0)
            names++;
        if (strcmp(ph, "X") == 0) {
            xs++;
            if (strcmp(nm, "F0 s0") == 0) {
                cr_expect_eq(cJSON_GetObjectItem(ev, "pid")->valueint, 1);
                cr_expect_eq(cJSON_GetObjectItem(ev, "dur")->valuedouble, 1000.0);
            }
            if (strcmp(nm, "F0 s0>s1") == 0)
                cr_expect_eq(cJSON_GetObjectItem(ev, "pid")->valueint, 3);
        }
    }
    cr_expect_eq(names, 4);
    cr_expect_eq(xs, 6);
    cJSON_Delete(root);
    free(text);
    timeline_free(tl);
}

static void expect_reject(const char *text, const char *needle)
{
    plumb_err e;
    err_clear(&e);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "test JSON: %s", text);
    timeline *tl = timeline_from_chrome_json(root, "t.json", &e);
    cr_expect_null(tl, "accepted: %s", text);
    cr_expect(strstr(e.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", e.msg, needle);
    timeline_free(tl);
    cJSON_Delete(root);
}

Test(timeline, reader_rejects)
{
    expect_reject("[]", "traceEvents");
    expect_reject("{}", "traceEvents");
    expect_reject("{\"traceEvents\": 3}", "traceEvents");
    expect_reject("{\"otherData\": {\"format\": \"x/9\"}, \"traceEvents\": []}",
                  "otherData.format");
    expect_reject("{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"F0 s0\", \"pid\": 1, "
                  "\"tid\": 0, \"ts\": 0, \"dur\": 1, \"args\": {\"stage\": 0}}]}",
                  "traceEvents[0].args.kind");
    expect_reject("{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"F0 s0\", \"pid\": 1, "
                  "\"tid\": 0, \"ts\": -5, \"dur\": 1, \"args\": {\"stage\": 0, "
                  "\"kind\": \"F\"}}]}", "traceEvents[0].ts");
    expect_reject("{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"F0 s0\", \"pid\": 1, "
                  "\"tid\": 0, \"ts\": 0, \"dur\": 1, \"args\": {\"stage\": 0, "
                  "\"kind\": \"Q\"}}]}", "traceEvents[0].args.kind");
    expect_reject("{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"x\", \"pid\": 3, "
                  "\"tid\": 1, \"ts\": 0, \"dur\": 1, \"args\": {\"stage\": 0, "
                  "\"kind\": \"send_f\"}}]}", "traceEvents[0].args.src");
    expect_reject("{\"traceEvents\": [7]}", "traceEvents[0]");
    expect_reject("{\"traceEvents\": [{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, "
                  "\"tid\": 0, \"args\": {\"name\": \"device 0\", \"peak_memory_bytes\": -1}}]}",
                  "traceEvents[0].args.peak_memory_bytes");
    expect_reject("{\"otherData\": {\"model\": 7}, \"traceEvents\": []}", "otherData.model");
    expect_reject("{\"otherData\": {\"stage_layers\": [[0, 3], [4]]}, \"traceEvents\": []}",
                  "otherData.stage_layers[1]");
    expect_reject("{\"otherData\": {\"stage_layers\": [[5, 3]]}, \"traceEvents\": []}",
                  "otherData.stage_layers[0][1]");
}

/* The model and the stages' layer ranges a run names go through the file unchanged. */
Test(timeline, model_round_trip)
{
    timeline *tl = sample();
    int first[3] = {0, 4, 9}, last[3] = {3, 8, 12};
    cr_assert_eq(timeline_set_model(tl, "vgg \"16\"", 3, first, last), 0);
    size_t n;
    char *text = timeline_chrome_text(tl, &n);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "the trace is not JSON");
    plumb_err e;
    timeline *back = timeline_from_chrome_json(root, "t.json", &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_assert_str_eq(back->model, "vgg \"16\"");
    cr_assert_eq(back->nstage_layers, 3);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(back->stage_layers[2 * i], first[i]);
        cr_expect_eq(back->stage_layers[2 * i + 1], last[i]);
    }
    timeline_free(back);
    cJSON_Delete(root);
    free(text);
    /* a timeline that names nothing writes neither field */
    cr_assert_eq(timeline_set_model(tl, NULL, 0, NULL, NULL), 0);
    text = timeline_chrome_text(tl, &n);
    cr_expect_null(strstr(text, "\"model\""));
    cr_expect_null(strstr(text, "stage_layers"));
    free(text);
    timeline_free(tl);
}

/* A hand-written trace without metadata still reads: tracks come from pid and tid. */
Test(timeline, reader_minimal)
{
    const char *text = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"B1 s0\", \"pid\": 1, "
                       "\"tid\": 4, \"ts\": 10, \"dur\": 20.5, \"args\": {\"stage\": 0, "
                       "\"kind\": \"B\", \"microbatch\": 1}}, {\"ph\": \"i\", \"name\": "
                       "\"marker\", \"pid\": 1, \"tid\": 4, \"ts\": 3}]}";
    plumb_err e;
    cJSON *root = cJSON_Parse(text);
    timeline *tl = timeline_from_chrome_json(root, "t.json", &e);
    cr_assert_not_null(tl, "%s", e.msg);
    cr_expect_eq(tl->ntracks, 1);
    cr_expect_eq(tl->tracks[0].device, 4);
    cr_expect_eq(tl->n, 1);
    cr_expect(fabs(tl->ev[0].dur_s - 20.5e-6) < 1e-12);
    cr_expect_eq(tl->ev[0].microbatch, 1);
    timeline_free(tl);
    cJSON_Delete(root);
}

/* Flows bind each transfer to the computation that receives it; counters carry memory. */
Test(timeline, chrome_flows_and_counters)
{
    timeline *tl = sample();
    /* a transfer whose receiver is not in the timeline gets no flow */
    int l10 = timeline_track(tl, TL_TRACK_LINK, 1, 0, NULL);
    tl_event orphan = {.start_s = 4.5e-3, .dur_s = 0.2e-3, .bytes = 64, .track = l10,
                       .kind = TL_SEND_B, .stage = 1, .peer_stage = 0, .microbatch = 0};
    cr_assert_eq(timeline_add(tl, &orphan), 0);
    cr_assert_eq(timeline_counter_add(tl, 0, 0, 1e9), 0);
    cr_assert_eq(timeline_counter_add(tl, 0, 1e-3, 1.5e9), 0);
    cr_assert_eq(timeline_counter_add(tl, 1, 0, 2e9), 0);
    char *text = timeline_chrome_text(tl, NULL);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "not JSON:\n%s", text);
    const cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
    int ns = 0, nf = 0, nc0 = 0, nc1 = 0;
    double sid = -1, fid = -2, fts = -1;
    for (const cJSON *ev = evs->child; ev; ev = ev->next) {
        const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
        if (!strcmp(ph, "s")) {
            ns++;
            sid = cJSON_GetObjectItem(ev, "id")->valuedouble;
            cr_expect_eq(cJSON_GetObjectItem(ev, "pid")->valueint, 3, "starts on the link");
            double ts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
            cr_expect(ts > 1000 && ts < 1500, "inside the transfer (1000..1500 us): %g", ts);
        } else if (!strcmp(ph, "f")) {
            nf++;
            fid = cJSON_GetObjectItem(ev, "id")->valuedouble;
            fts = cJSON_GetObjectItem(ev, "ts")->valuedouble;
            cr_expect_eq(cJSON_GetObjectItem(ev, "pid")->valueint, 1);
            cr_expect_eq(cJSON_GetObjectItem(ev, "tid")->valueint, 1, "ends on device 1");
            cr_expect_str_eq(cJSON_GetObjectItem(ev, "bp")->valuestring, "e");
        } else if (!strcmp(ph, "C")) {
            const char *nm = cJSON_GetObjectItem(ev, "name")->valuestring;
            const cJSON *args = cJSON_GetObjectItem(ev, "args");
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(args, "bytes")));
            nc0 += !strcmp(nm, "memory d0");
            nc1 += !strcmp(nm, "memory d1");
        }
    }
    cr_expect_eq(ns, 1, "one flow: the orphan transfer has none");
    cr_expect_eq(nf, 1);
    cr_expect_eq(sid, fid, "the start and the finish share their id");
    cr_expect(fts > 1500 && fts < 2500, "inside device 1's F0 s1 (1500..2500 us): %g", fts);
    cr_expect_eq(nc0, 2);
    cr_expect_eq(nc1, 1);
    /* the reader takes the trace back with its flows and counters (plumb compare reads it) */
    plumb_err e;
    err_clear(&e);
    timeline *back = timeline_from_chrome_json(root, "t.json", &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_expect_eq(back->n, tl->n);
    timeline_free(back);
    cJSON_Delete(root);
    free(text);
    timeline_free(tl);
}

/* A random mixed timeline of n events (seed x): every event kind, device, collective and
 * link tracks of tensor-parallel ranks, times from 0 to 1e5 s, zero, fractional and huge
 * byte counts, negative and six-digit numbers, names needing escapes, a model with stage
 * layers, transfers with and without a receiver (flows), memory counters. */
static timeline *random_timeline(unsigned x, int n)
{
    timeline *tl = timeline_new(x % 2 ? "sim\t\"x\"" : "exec");
    cr_assert_not_null(tl);
    int first[2] = {0, 5}, last[2] = {4, 9};
    if (x % 3)
        cr_assert_eq(timeline_set_model(tl, "m\\odel\x01", 2, first, last), 0);
    int tr[12];
    for (int d = 0; d < 4; d++) {
        int dev = (int)(x % 5) * 1000 * d + d;
        tr[3 * d] = timeline_track_tp(tl, TL_TRACK_DEVICE, dev, -1, d % 3, NULL);
        tr[3 * d + 1] = timeline_track(tl, TL_TRACK_COLLECTIVE, dev, -1, "c\n\"d\"");
        tr[3 * d + 2] = timeline_track(tl, TL_TRACK_LINK, dev, dev + 1, NULL);
        if (d != 1)
            tl->tracks[tr[3 * d]].peak_bytes = d ? 1e9 / 3 : 123456789012.0;
    }
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)(x >> 8) % TL_NKINDS, d = (int)(x >> 20) % 4;
        int on = TL_SEND_F <= k && k <= TL_SEND_B ? 2 : k >= TL_ALLREDUCE ? 1 : 0;
        if (on == 1 && (x >> 3) % 5 == 0)
            on = 2; /* a ring hop on a link */
        double t = (x >> 4) % 7 == 0 ? 1e5 * (x % 1000) / 999.0 : (x % 100000) * 1e-6;
        tl_event e = {.start_s = t, .dur_s = t / 7, .track = tr[3 * d + on], .kind = k,
                      .stage = (int)(x % 64), .iteration = i / 500,
                      .microbatch = k == TL_STEP || k == TL_ALLREDUCE ? -1 : i * 37,
                      .peer_stage = on == 2 ? (int)(x % 64) + 1 : -1,
                      .bytes = i % 3 == 0 ? 0 : i % 3 == 1 ? 1e20 / (i + 1) : (double)i * 4096};
        cr_assert_eq(timeline_add(tl, &e), 0);
        /* a receiver for most transfers: each of those has its flow */
        if ((k == TL_SEND_F || k == TL_SEND_B) && (x >> 12) % 4) {
            tl_event r = {.start_s = t + 1, .dur_s = 1e-3, .track = tr[3 * ((d + 1) % 4)],
                          .kind = k == TL_SEND_F ? TL_F : (x >> 14) % 2 ? TL_B : TL_I,
                          .stage = e.peer_stage, .microbatch = e.microbatch, .peer_stage = -1};
            tl->tracks[e.track].peer = tl->tracks[r.track].device;
            tl->tracks[e.track].tp_rank = tl->tracks[r.track].tp_rank;
            cr_assert_eq(timeline_add(tl, &r), 0);
        }
        if (i % 4 == 0)
            cr_assert_eq(timeline_counter_add(tl, tr[3 * d], t, i % 8 ? 1e9 + i : 1.5e9 / 7),
                         0);
    }
    return tl;
}

#define N_SIZED 14

/* Timeline j of N_SIZED: the sample, an empty one, random ones of 4 to 39,000 events. */
static timeline *sized(int j)
{
    timeline *tl = j == 0 ? sample() : j == 1 ? timeline_new("sim")
                                     : random_timeline(7919u * j, j < 8 ? j * j : 3000 * j);
    cr_assert_not_null(tl);
    return tl;
}

/* timeline_chrome_size is the written text's length to the byte: for the sample, random
 * timelines of every kind and size, and an empty one (within a limit, the streamed form's
 * test below). */
Test(timeline, size_is_the_written_length)
{
    for (int j = 0; j < N_SIZED; j++) {
        timeline *tl = sized(j);
        size_t len = 0;
        char *text = timeline_chrome_text(tl, &len);
        cr_assert_not_null(text);
        cr_expect_eq(timeline_chrome_size(tl), len, "timeline %d: counted %zu, wrote %zu", j,
                     timeline_chrome_size(tl), len);
        free(text);
        timeline_free(tl);
    }
}

/* The file f's whole content (caller frees), *n its length. */
static char *read_back(FILE *f, size_t *n)
{
    cr_assert_eq(fflush(f), 0);
    long end = ftell(f);
    cr_assert_geq(end, 0);
    char *buf = malloc((size_t)end + 1);
    cr_assert_not_null(buf);
    rewind(f);
    cr_assert_eq(fread(buf, 1, (size_t)end, f), (size_t)end);
    *n = (size_t)end;
    return buf;
}

/* timeline_chrome_stream writes timeline_chrome_text's bytes into the file, within its own
 * length too; within less it stops writing (what it wrote is a prefix, never the whole
 * text when the limit is a third of it) and still gives the exact length; a file that
 * cannot be written gives -1. Same timelines as above. */
Test(timeline, stream_writes_the_text_within_the_limit)
{
    for (int j = 0; j < N_SIZED; j++) {
        timeline *tl = sized(j);
        size_t len = 0;
        char *text = timeline_chrome_text(tl, &len);
        cr_assert_not_null(text);
        size_t maxes[5] = {0, len, len - 1, len / 3, 1};
        for (int m = 0; m < 5; m++) {
            FILE *f = tmpfile();
            cr_assert_not_null(f);
            size_t slen = 0, wn = 0;
            int rc = timeline_chrome_stream(tl, f, maxes[m], &slen);
            char *got = read_back(f, &wn);
            fclose(f);
            cr_expect_eq(rc, m < 2 ? 0 : 1, "timeline %d within %zu of %zu", j, maxes[m], len);
            cr_expect_eq(slen, len, "timeline %d within %zu: %zu bytes, not %zu", j, maxes[m],
                         slen, len);
            if (m < 2)
                cr_expect(wn == len && !memcmp(got, text, len),
                          "timeline %d: the streamed text differs", j);
            else
                cr_expect(wn <= len && !memcmp(got, text, wn),
                          "timeline %d within %zu: %zu bytes written, not a prefix", j,
                          maxes[m], wn);
            if (m == 3 && len > 100000)
                cr_expect_lt(wn, len, "timeline %d: wrote on past a third", j);
            free(got);
        }
        /* a stream that refuses every write */
        char path[] = "/tmp/plumb-test-ro-XXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        FILE *ro = fopen(path, "r");
        cr_assert_not_null(ro);
        setvbuf(ro, NULL, _IONBF, 0);
        size_t slen;
        cr_expect_eq(timeline_chrome_stream(tl, ro, 0, &slen), -1, "timeline %d", j);
        fclose(ro);
        unlink(path);
        free(text);
        timeline_free(tl);
    }
}

/* A trace that cannot be written whole (the file size limit hit midway through the
 * stream) leaves the file that was there as it was and no temporary beside it. */
Test(timeline, failed_write_keeps_the_file_there)
{
    char *dir = make_tmpdir_named("tracefail");
    char path[300];
    snprintf(path, sizeof path, "%s/t.json", dir);
    file_put_text(path, "old");
    timeline *tl = random_timeline(17u, 30000);
    size_t len = timeline_chrome_size(tl);
    cr_assert_gt(len, 1u << 21, "the trace is %zu bytes", len);
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    struct rlimit rl = {.rlim_cur = 1u << 20, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    plumb_err e;
    err_clear(&e);
    cr_expect_eq(timeline_write_chrome(tl, path, &e), -1);
    cr_expect(strstr(e.msg, path) != NULL, "%s", e.msg);
    expect_file_text(path, "old");
    cr_expect_eq(count_files(dir), 1, "a temporary left behind");
    /* within the limit the same call writes it, byte for byte the text */
    rl.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_expect_eq(timeline_write_chrome(tl, path, &e), 0, "%s", e.msg);
    char *text = timeline_chrome_text(tl, NULL);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    size_t wn;
    char *back = read_back(f, &wn);
    fclose(f);
    cr_expect(wn == len && !memcmp(back, text, len), "the written trace differs");
    free(back);
    free(text);
    timeline_free(tl);
    cr_expect_eq(rm_tree(dir), 0);
}

/* n events of kind k (a transfer with its receiver) on devices 0 and 1, at 1 to 2 s (every
 * time of the same width), with whole byte counts. */
static timeline *of_kind(int k, int n)
{
    timeline *tl = timeline_new("sim");
    cr_assert_not_null(tl);
    int d0 = timeline_track(tl, TL_TRACK_DEVICE, 0, -1, NULL);
    int d1 = timeline_track(tl, TL_TRACK_DEVICE, 1, -1, NULL);
    int c0 = timeline_track(tl, TL_TRACK_COLLECTIVE, 0, -1, NULL);
    int l01 = timeline_track(tl, TL_TRACK_LINK, 0, 1, NULL);
    int send = k == TL_SEND_F || k == TL_SEND_B;
    for (int i = 0; i < n; i++) {
        double t = 1 + 1e-3 * i;
        tl_event e = {.start_s = t, .dur_s = 2e-4, .bytes = 4096.0 * (i + 1), .kind = k,
                      .stage = 3, .microbatch = 100 + i, .iteration = 1, .peer_stage = -1,
                      .track = k == TL_ALLREDUCE || k >= TL_TP_ALLREDUCE ? c0 : d0};
        if (send) {
            e.track = l01;
            e.peer_stage = 4;
            tl_event r = {.start_s = t + 5e-4, .dur_s = 1e-4, .track = d1,
                          .kind = k == TL_SEND_F ? TL_F : TL_B, .stage = 4,
                          .microbatch = e.microbatch, .iteration = 1, .peer_stage = -1};
            cr_assert_eq(timeline_add(tl, &r), 0);
        }
        cr_assert_eq(timeline_add(tl, &e), 0);
        cr_assert_eq(timeline_counter_add(tl, d0, t, 1e9 + i), 0);
    }
    return tl;
}

/* Per event kind (a transfer with its flow, a counter each) the count is the text's
 * length: 10 and 100 events of each, so a count that drifts by one character per event of
 * one kind shows. */
Test(timeline, size_counts_each_event_exactly)
{
    for (int k = 0; k < TL_NKINDS; k++)
        for (int j = 0; j < 2; j++) {
            timeline *tl = of_kind(k, 10 + 90 * j);
            size_t len;
            char *text = timeline_chrome_text(tl, &len);
            cr_assert_not_null(text);
            cr_expect_eq(timeline_chrome_size(tl), len, "%s x %d: counted %zu, wrote %zu",
                         tl_kind_name(k), 10 + 90 * j, timeline_chrome_size(tl), len);
            free(text);
            timeline_free(tl);
        }
}

/* The one spelling of a trace limit in bytes (plumb sim --trace-limit, the dashboard's
 * export): never 0, which would mean no limit; whole bytes, rounded down; what size_t
 * cannot hold is its largest value; not a number is the smallest limit. */
Test(timeline, chrome_max_is_at_least_one_byte)
{
    cr_expect_eq(timeline_chrome_max(0), 1u);
    cr_expect_eq(timeline_chrome_max(0.4), 1u);
    cr_expect_eq(timeline_chrome_max(-5), 1u);
    cr_expect_eq(timeline_chrome_max(NAN), 1u);
    cr_expect_eq(timeline_chrome_max(1), 1u);
    cr_expect_eq(timeline_chrome_max(1000.9), 1000u);
    cr_expect_eq(timeline_chrome_max(0.5 * 1073741824.0), 536870912u);
    cr_expect_eq(timeline_chrome_max(1e30), SIZE_MAX);
    cr_expect_eq(timeline_chrome_max(INFINITY), SIZE_MAX);
}
