/* test_svg.c: the structure of plumb's SVG pictures. The simulator's timeline: a row per
 * device labelled with its stages, idle devices of the cluster folded into rows of their
 * own, one row per stage boundary that carried transfers and none that did not (their
 * transfer counts add up to the timeline's), legend entries for exactly the kinds drawn
 * on their own (not merged into busy boxes), and legend swatches drawn in the fills the blocks of that kind use. The sweep plot:
 * the last point has an x tick, the target and cost lines differ in colour and dash, and
 * the linear-scaling line is drawn over the throughput line. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/json.h"
#include "core/svg.h"
#include "planner/sweep.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/tmpdir.h"

/* The value of attribute `attr` in the tag that holds `at` (a position inside it): "" when
 * the tag has none. */
static void attr_of(const char *at, const char *attr, char *out, size_t n)
{
    const char *lt = at;
    while (*lt != '<') lt--;
    const char *gt = strchr(at, '>');
    char key[32];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *p = strstr(lt, key);
    out[0] = 0;
    if (!p || p > gt) return;
    p += strlen(key);
    size_t k = 0;
    while (p[k] && p[k] != '"' && k + 1 < n) k++;
    memcpy(out, p, k);
    out[k] = 0;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Every fill of a `class="swatch K"` rect is the fill of some `class="b K"` block. */
static void swatches_match_blocks(const char *svg, const char *kind)
{
    char sw[32], blk[32], fill[16], f2[16];
    snprintf(sw, sizeof sw, "class=\"swatch %s\"", kind);
    snprintf(blk, sizeof blk, "class=\"b %s\"", kind);
    int nsw = 0;
    for (const char *p = strstr(svg, sw); p; p = strstr(p + 1, sw), nsw++) {
        attr_of(p, "fill", fill, sizeof fill);
        int found = 0;
        for (const char *q = strstr(svg, blk); q && !found; q = strstr(q + 1, blk)) {
            attr_of(q, "fill", f2, sizeof f2);
            found = !strcmp(fill, f2);
        }
        cr_expect(found, "legend swatch %s fill %s is no %s block's fill", kind, fill, kind);
    }
    cr_expect_gt(nsw, 0, "no swatch for %s", kind);
}

static sim_report *run(int kind, int replicas, plan **pl)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    s.replicas = replicas;
    s.microbatches = 6;
    if (kind == SCHED_ZB_H1) s.input_ms = s.weight_ms = 1;
    s.schedule = kind;
    plumb_err e;
    err_clear(&e);
    *pl = sim_synth_plan(&s, &e);
    cr_assert_not_null(*pl, "%s", e.msg);
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    sim_report *r = sim_run(*pl, &o, &e);
    cr_assert_not_null(r, "%s", e.msg);
    return r;
}

Test(svg, timeline_rows_are_labelled_and_carry_traffic)
{
    plan *pl;
    sim_report *r = run(SCHED_1F1B_FLUSH, 1, &pl);
    cr_assert_eq(r->devices_total, 8, "synth: one server of 8, 3 used");
    char *svg = sim_svg_text(r, NULL);
    cr_assert_not_null(svg);
    /* a stage label per device row, in device order */
    cr_expect_eq(count(svg, "class=\"row-label stage\""), r->ndevices);
    const char *p = svg;
    for (int d = 0; d < 3; d++) {
        char want[64];
        snprintf(want, sizeof want, "text-anchor=\"end\">stage %d</text>", d);
        p = strstr(p, want);
        cr_expect_not_null(p, "no label \"stage %d\"", d);
        if (!p) break;
    }
    /* the idle devices are there, folded */
    cr_expect_eq(count(svg, "class=\"row-label idle\""), 1);
    cr_expect(strstr(svg, ">devices 3-7 idle (5)</text>"), "idle devices missing");
    /* one row per stage boundary with transfers; their counts are the timeline's */
    int pair_xfers[8] = { 0 }, total = 0;
    for (size_t i = 0; i < r->tl->n; i++) {
        const tl_event *e = &r->tl->ev[i];
        if (e->kind != TL_SEND_F && e->kind != TL_SEND_B) continue;
        int lo = e->stage < e->peer_stage ? e->stage : e->peer_stage;
        cr_assert(lo >= 0 && lo < 8);
        pair_xfers[lo]++;
        total++;
    }
    int want_rows = 0;
    for (int k = 0; k < 8; k++) want_rows += pair_xfers[k] > 0;
    cr_expect_eq(count(svg, "class=\"row cut\""), want_rows);
    cr_expect_eq(want_rows, 2);
    int sum = 0;
    for (const char *q = strstr(svg, "class=\"row cut\""); q;
         q = strstr(q + 1, "class=\"row cut\"")) {
        char v[32], st[32];
        attr_of(q, "data-transfers", v, sizeof v);
        attr_of(q, "data-stages", st, sizeof st);
        int a = -1, b = -1;
        sscanf(st, "%d-%d", &a, &b);
        cr_expect_gt(atoi(v), 0, "a link row without traffic");
        cr_expect(a >= 0 && a < 8 && atoi(v) == pair_xfers[a], "stages %s: %s transfers", st, v);
        sum += atoi(v);
    }
    cr_expect_eq(sum, total);
    /* no per-link rows any more */
    cr_expect_null(strstr(svg, ">link "), "a row per link");
    free(svg);
    sim_report_free(r);
    plan_free(pl);
}

Test(svg, timeline_legend_matches_the_schedule)
{
    plan *pl;
    sim_report *r = run(SCHED_1F1B_FLUSH, 1, &pl);
    char *svg = sim_svg_text(r, NULL);
    cr_expect(strstr(svg, ">F forward (light)</text>") && strstr(svg, ">B backward (dark)</text>"));
    cr_expect_null(strstr(svg, "input gradient"), "1F1B has no I");
    cr_expect_null(strstr(svg, "weight gradient"), "1F1B has no W");
    cr_expect_null(strstr(svg, ">all-reduce</text>"), "no replicas, no all-reduce");
    swatches_match_blocks(svg, "F");
    swatches_match_blocks(svg, "B");
    free(svg);
    sim_report_free(r);
    plan_free(pl);

    r = run(SCHED_ZB_H1, 1, &pl);
    svg = sim_svg_text(r, NULL);
    cr_expect(strstr(svg, ">I input gradient (full colour)</text>"));
    cr_expect(strstr(svg, ">W weight gradient (light, hatched)</text>"));
    cr_expect_null(strstr(svg, "B backward"), "zb-h1 splits every backward");
    swatches_match_blocks(svg, "F");
    swatches_match_blocks(svg, "I");
    swatches_match_blocks(svg, "W");
    free(svg);
    sim_report_free(r);
    plan_free(pl);

    r = run(SCHED_1F1B_FLUSH, 2, &pl); /* replicated stages all-reduce */
    svg = sim_svg_text(r, NULL);
    cr_expect(strstr(svg, ">all-reduce</text>"));
    cr_expect(strstr(svg, "class=\"b allreduce\""));
    cr_expect_eq(count(svg, "class=\"row-label stage\""), 6);
    free(svg);
    sim_report_free(r);
    plan_free(pl);
}

static sweep_result fake_sweep(int n)
{
    sweep_result r;
    memset(&r, 0, sizeof r);
    r.n = n;
    r.pts = calloc((size_t)n, sizeof *r.pts);
    cr_assert_not_null(r.pts);
    r.thr1 = 100;
    for (int i = 0; i < n; i++) {
        sweep_point *p = &r.pts[i];
        p->gpus = i + 1;
        p->ok = 1;
        p->samples_per_s = 100.0 * p->gpus; /* linear: the two lines coincide */
        p->usd_per_million = 2.0 * p->gpus / 3600 / p->samples_per_s * 1e6;
    }
    r.target = 650;
    r.target_gpus = 7;
    r.price = 2;
    snprintf(r.profile_name, sizeof r.profile_name, "m<1>");
    snprintf(r.cluster_name, sizeof r.cluster_name, "c&d");
    return r;
}

Test(svg, sweep_ticks_styles_and_order)
{
    for (int n = 2; n <= 40; n += 1) {
        sweep_result r = fake_sweep(n);
        char *svg = sweep_svg(&r, NULL);
        cr_assert_not_null(svg);
        char last[32], first[32];
        snprintf(last, sizeof last, "class=\"xtick\"");
        int ticks = count(svg, last);
        cr_expect(ticks >= 2 && ticks <= 16, "%d points: %d ticks", n, ticks);
        double prev = -1e9; /* ascending, and never closer than 24 px */
        for (const char *q = strstr(svg, last); q; q = strstr(q + 1, last)) {
            char xs[32];
            attr_of(q, "x", xs, sizeof xs);
            double x = atof(xs);
            cr_expect_geq(x - prev, 24, "%d points: ticks %g and %g crowd", n, prev, x);
            prev = x;
        }
        snprintf(last, sizeof last, "middle\">%d</text>", n);
        snprintf(first, sizeof first, "middle\">1</text>");
        const char *lp = strstr(svg, last);
        cr_expect(lp && strstr(lp - 80, "xtick"), "%d points: no tick at the last point", n);
        cr_expect(strstr(svg, first), "%d points: no tick at the first point", n);
        sweep_result_free(&r);
        if (n != 13) {
            free(svg);
            continue;
        }
        /* target and cost differ in colour and in dash */
        const char *t = strstr(svg, "class=\"target\""), *c = strstr(svg, "class=\"cost\"");
        cr_assert(t && c);
        char ts[16], cs[16], td[16], cd[16];
        attr_of(t, "stroke", ts, sizeof ts);
        attr_of(c, "stroke", cs, sizeof cs);
        attr_of(t, "stroke-dasharray", td, sizeof td);
        attr_of(c, "stroke-dasharray", cd, sizeof cd);
        cr_expect_str_neq(ts, cs, "target and cost share a colour");
        cr_expect_str_neq(td, cd, "target and cost share a dash");
        /* the linear-scaling line comes after (is drawn over) the throughput line */
        const char *thr = strstr(svg, "<polyline class=\"throughput\"");
        const char *lin = strstr(svg, "<line class=\"linear\"");
        cr_assert(thr && lin);
        cr_expect_gt(lin, thr, "linear scaling hidden under the throughput line");
        char ls[16], hs[16];
        attr_of(lin, "stroke", ls, sizeof ls);
        attr_of(thr, "stroke", hs, sizeof hs);
        cr_expect_str_neq(ls, hs);
        /* names are escaped; a legend entry per series */
        cr_expect(strstr(svg, "m&lt;1&gt; on c&amp;d"));
        cr_expect_eq(count(svg, "class=\"legend "), 4);
        free(svg);
    }
}

Test(svg, shared_helpers)
{
    cr_expect_eq(svg_nice_step(10, 10), 1);
    cr_expect_eq(svg_nice_step(31, 10), 2);
    cr_expect_eq(svg_nice_step(70, 10), 5);
    cr_expect_eq(svg_nice_step(0, 10), 1);
    sbuf b = { 0 };
    svg_escape(&b, "a<b>&\"c");
    cr_assert_str_eq(b.p, "a&lt;b&gt;&amp;&quot;c");
    free(b.p);
}

/* --- boxes narrower than a pixel --------------------------------------------------------- */

/* The plot's left edge and width in pixels (sim/svg.c's LM and PW). */
enum { PLOT_X = 200, PLOT_W = 1100 };

/* A report around tl with nothing else (no devices named, schedule 0): enough to draw. */
static sim_report *bare_report(timeline *tl, int devices)
{
    sim_report *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->tl = tl;
    r->devices_total = devices;
    return r;
}

static void add(timeline *tl, int track, int kind, double start, double dur, int stage,
                int peer_stage, int mb)
{
    tl_event e = {.start_s = start, .dur_s = dur, .track = track, .kind = kind,
                  .stage = stage, .peer_stage = peer_stage, .microbatch = mb};
    cr_assert_eq(timeline_add(tl, &e), 0);
}

/* An empty timeline of two devices' tracks: each device's compute, device 1's collectives
 * and the link each way between them. */
typedef struct two_dev {
    timeline *tl;
    int d0, d1, c1, l01, l10;
} two_dev;

static two_dev two_devices(void)
{
    two_dev t = {.tl = timeline_new("sim")};
    cr_assert_not_null(t.tl);
    t.d0 = timeline_track(t.tl, TL_TRACK_DEVICE, 0, -1, NULL);
    t.d1 = timeline_track(t.tl, TL_TRACK_DEVICE, 1, -1, NULL);
    t.c1 = timeline_track(t.tl, TL_TRACK_COLLECTIVE, 1, -1, NULL);
    t.l01 = timeline_track(t.tl, TL_TRACK_LINK, 0, 1, NULL);
    t.l10 = timeline_track(t.tl, TL_TRACK_LINK, 1, 0, NULL);
    return t;
}

/* One merged box as the SVG gives it: lane ("compute", "send_f", ...), x, width, busy. */
typedef struct busy_box {
    char lane[16];
    int x, w;
    double busy;
} busy_box;

/* The merged boxes of svg in their order (at most cap), with their count. */
static int busy_boxes(const char *svg, busy_box *out, int cap)
{
    int n = 0;
    for (const char *p = strstr(svg, "class=\"b busy "); p; p = strstr(p + 1, "class=\"b busy ")) {
        char v[32], op[32];
        cr_assert_lt(n, cap);
        busy_box *b = &out[n++];
        sscanf(p, "class=\"b busy %15[^\"]", b->lane);
        attr_of(p, "x", v, sizeof v), b->x = atoi(v);
        attr_of(p, "width", v, sizeof v), b->w = atoi(v);
        attr_of(p, "data-busy", v, sizeof v), b->busy = atof(v);
        attr_of(p, "fill-opacity", op, sizeof op);
        cr_expect_str_eq(op, v, "the opacity is the busy fraction");
    }
    return n;
}

/* A picture 1.1 s wide (a pixel is 1 ms) with sub-pixel boxes whose merged boxes are worked
 * out by hand: on device 0, pixel 10 holds 0.4 + 0.3 + 0.1 ms of three boxes, pixel 11 the
 * other 0.1 ms of the third, pixels 12-14 are filled by two boxes each (one run), pixels 20
 * and 21 hold two 0.1 ms boxes each (one run of the same fraction); two activations overlap
 * on the boundary row (the union: 0.8 of pixel 500, 0.2 of 501, where a sum would give
 * 1.1); two gradients in pixel 600, two all-reduces in pixel 700. A sub-pixel box alone in
 * its pixel (30 on device 0, 650 of the gradients) is not over-dense: it is drawn on its
 * own as before, as are the boxes 1.2 px and wider. */
Test(svg, sub_pixel_boxes_merge_into_busy_fractions)
{
    two_dev t = two_devices();
    timeline *tl = t.tl;
    int d0 = t.d0, d1 = t.d1, c1 = t.c1, l01 = t.l01, l10 = t.l10;
    add(tl, d0, TL_F, 0.0100, 0.0004, 0, -1, 0);
    add(tl, d0, TL_B, 0.0104, 0.0003, 0, -1, 0);
    add(tl, d0, TL_F, 0.0109, 0.0002, 0, -1, 1);
    add(tl, d0, TL_F, 0.0120, 0.0005, 0, -1, 2);
    add(tl, d0, TL_B, 0.0125, 0.0005, 0, -1, 2);
    add(tl, d0, TL_F, 0.0130, 0.0009, 0, -1, 3);
    add(tl, d0, TL_B, 0.0139, 0.0001, 0, -1, 3);
    add(tl, d0, TL_F, 0.0140, 0.0006, 0, -1, 4);
    add(tl, d0, TL_B, 0.0146, 0.0004, 0, -1, 4);
    add(tl, d0, TL_F, 0.0201, 0.0001, 0, -1, 5);
    add(tl, d0, TL_B, 0.0205, 0.0001, 0, -1, 5);
    add(tl, d0, TL_F, 0.0213, 0.0001, 0, -1, 6);
    add(tl, d0, TL_B, 0.0217, 0.0001, 0, -1, 6);
    add(tl, d0, TL_F, 0.0302, 0.0003, 0, -1, 6);   /* alone in pixel 30 */
    add(tl, d0, TL_F, 0.1000, 0.0500, 0, -1, 7);   /* 50 px */
    add(tl, d0, TL_B, 0.2000, 0.0012, 0, -1, 7);   /* 1.2 px */
    add(tl, d0, TL_STEP, 0.3000, 0.0001, 0, -1, -1); /* a marker, never merged */
    add(tl, l01, TL_SEND_F, 0.5002, 0.0006, 0, 1, 8);
    add(tl, l01, TL_SEND_F, 0.5005, 0.0007, 0, 1, 9);
    add(tl, l10, TL_SEND_B, 0.6000, 0.0003, 1, 0, 8);
    add(tl, l10, TL_SEND_B, 0.6006, 0.0002, 1, 0, 9);
    add(tl, l10, TL_SEND_B, 0.6502, 0.0003, 1, 0, 10); /* alone in pixel 650 */
    add(tl, c1, TL_ALLREDUCE, 0.7000, 0.0001, 1, -1, -1);
    add(tl, c1, TL_ALLREDUCE, 0.7005, 0.0002, 1, -1, -1);
    add(tl, d1, TL_F, 1.0000, 0.1000, 1, -1, 8); /* the run ends at 1.1 s */
    sim_report *r = bare_report(tl, 2);
    char *svg = sim_svg_text(r, NULL);
    cr_assert_not_null(svg);
    const busy_box want[] = {
        {"compute", PLOT_X + 10, 1, 0.8}, {"compute", PLOT_X + 11, 1, 0.1},
        {"compute", PLOT_X + 12, 3, 1.0}, {"compute", PLOT_X + 20, 2, 0.2},
        {"allreduce", PLOT_X + 700, 1, 0.3},
        {"send_f", PLOT_X + 500, 1, 0.8}, {"send_f", PLOT_X + 501, 1, 0.2},
        {"send_b", PLOT_X + 600, 1, 0.5},
    };
    int nw = (int)(sizeof want / sizeof want[0]);
    busy_box got[32];
    int n = busy_boxes(svg, got, 32);
    cr_expect_eq(n, nw, "%d merged boxes, want %d", n, nw);
    for (int i = 0; i < n && i < nw; i++)
        cr_expect(!strcmp(got[i].lane, want[i].lane) && got[i].x == want[i].x &&
                  got[i].w == want[i].w && fabs(got[i].busy - want[i].busy) < 1e-9,
                  "box %d: %s x %d width %d busy %.3f, want %s x %d width %d busy %.3f", i,
                  got[i].lane, got[i].x, got[i].w, got[i].busy, want[i].lane, want[i].x,
                  want[i].w, want[i].busy);
    /* drawn one by one: the two wide F, the one alone (0.3 px), the 1.2 px B, the step,
     * the gradient alone (drawn 0.5 px wide, as every transfer narrower was) */
    cr_expect_eq(count(svg, "class=\"b F\""), 3);
    cr_expect(strstr(svg, "class=\"b F\" x=\"230.20\" y=\"58.0\" width=\"0.30\""));
    cr_expect_eq(count(svg, "class=\"b B\""), 1);
    cr_expect_eq(count(svg, "class=\"b step\""), 1);
    cr_expect_eq(count(svg, "class=\"b send_b\""), 1);
    cr_expect(strstr(svg, "class=\"b send_b\" x=\"850.20\""));
    cr_expect_eq(count(svg, "class=\"b send_f\"") + count(svg, "class=\"b allreduce\""), 0);
    cr_expect(strstr(svg, "class=\"legend busy\""), "the legend states the rule");
    /* keys for the kinds drawn on their own; every all-reduce was merged: no key for it,
     * the stage rows' line stays (the rows are there) */
    cr_expect(strstr(svg, ">F forward (light)</text>") && strstr(svg, ">B backward (dark)</text>"));
    cr_expect_null(strstr(svg, ">all-reduce</text>"), "every all-reduce was merged");
    cr_expect(strstr(svg, "activations (top half)"));
    free(svg);
    free(r);
    timeline_free(tl);
}

/* A picture in which every box was merged (each shares its pixel with another of its
 * lane): the legend keys no kind, since no block shows its colour, nor the microbatch
 * hues; it keeps the merged boxes' rule and the stage rows' line. */
Test(svg, legend_keys_only_the_kinds_drawn_unmerged)
{
    two_dev t = two_devices();
    timeline *tl = t.tl;
    int d0 = t.d0, d1 = t.d1, c1 = t.c1, l01 = t.l01;
    for (int p = 0; p < 4; p++) { /* pairs of 0.2 ms boxes in pixels 10, 20, 30, 40 */
        double t = 0.010 * (p + 1);
        add(tl, d0, TL_F, t, 0.0002, 0, -1, p);
        add(tl, d0, TL_B, t + 0.0004, 0.0002, 0, -1, p);
        add(tl, d1, TL_I, t + 0.0001, 0.0002, 1, -1, p);
        add(tl, d1, TL_W, t + 0.0005, 0.0002, 1, -1, p);
        add(tl, l01, TL_SEND_F, t, 0.0002, 0, 1, p);
        add(tl, l01, TL_SEND_F, t + 0.0005, 0.0002, 0, 1, p);
        add(tl, c1, TL_ALLREDUCE, t, 0.0002, 1, -1, -1);
        add(tl, c1, TL_ALLREDUCE, t + 0.0005, 0.0002, 1, -1, -1);
    }
    add(tl, d0, TL_F, 1.0996, 0.0002, 0, -1, 9); /* the run ends at 1.1 s, in pixel 1099 */
    add(tl, d0, TL_B, 1.0998, 0.0002, 0, -1, 9);
    sim_report *r = bare_report(tl, 2);
    char *svg = sim_svg_text(r, NULL);
    cr_assert_not_null(svg);
    cr_expect_gt(count(svg, "class=\"b busy "), 0);
    cr_expect_eq(count(svg, "class=\"b ") - count(svg, "class=\"b busy "), 0,
                 "every box was merged");
    cr_expect_eq(count(svg, "class=\"swatch ") - count(svg, "class=\"swatch busy\""), 0,
                 "no kind's swatch: no block shows a kind's colour");
    cr_expect_eq(count(svg, "class=\"legend\""), 1, "only the stage rows' line");
    cr_expect(strstr(svg, "activations (top half)"));
    cr_expect_null(strstr(svg, "colour = microbatch"), "no block shows a hue");
    cr_expect(strstr(svg, "class=\"legend busy\""), "the merged boxes' rule");
    free(svg);
    free(r);
    timeline_free(tl);
}

/* Busy fractions by sampling: each pixel of the picture (T seconds wide) at S points, the
 * share of points inside any of tl's events (every event marks the points it covers), a
 * count no one in sim/ or core/ computes. */
static void sampled_busy(const timeline *tl, double T, double *busy)
{
    enum { S = 2000 };
    unsigned char *in = calloc((size_t)PLOT_W * S, 1);
    cr_assert_not_null(in);
    double dt = T / PLOT_W / S; /* point k is at (k + 0.5) dt */
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        long k0 = (long)ceil(e->start_s / dt - 0.5);
        long k1 = (long)ceil((e->start_s + e->dur_s) / dt - 0.5);
        for (long k = k0 < 0 ? 0 : k0; k < k1 && k < (long)PLOT_W * S; k++) in[k] = 1;
    }
    for (int p = 0; p < PLOT_W; p++) {
        int c = 0;
        for (int s = 0; s < S; s++) c += in[(size_t)p * S + s];
        busy[p] = (double)c / S;
    }
    free(in);
}

/* Many random sub-pixel boxes on one device, some overlapping (as the transfers of many
 * links on one boundary row do): the merged boxes tile the busy pixels, each pixel's
 * fraction within 0.0015 of the sampled share (0.0005 rounding, 0.001 sampling), runs
 * maximal (two adjacent boxes differ), at most one box per pixel: the text no longer grows
 * with the events (4000 events, over 100 bytes each when drawn one by one). */
Test(svg, merged_boxes_match_sampled_busy_and_stay_bounded)
{
    timeline *tl = timeline_new("sim");
    cr_assert_not_null(tl);
    int d0 = timeline_track(tl, TL_TRACK_DEVICE, 0, -1, NULL);
    cr_assert_eq(d0, 0);
    unsigned seed = 12345u;
    double T = 2.0;
    for (int i = 0; i < 4000; i++) {
        seed = seed * 1103515245u + 12345u;
        double start = (seed >> 8) / 16777216.0 * (T - 0.01);
        seed = seed * 1103515245u + 12345u;
        double dur = (seed >> 8) / 16777216.0 * 0.3 * T / PLOT_W; /* under 0.3 px */
        add(tl, d0, TL_F, start, dur, 0, -1, i);
    }
    add(tl, d0, TL_B, T - 0.005, 0.005, 0, -1, 0); /* 2.75 px; ends the run at T */
    sim_report *r = bare_report(tl, 1);
    size_t len;
    char *svg = sim_svg_text(r, &len);
    cr_assert_not_null(svg);
    static busy_box got[PLOT_W + 1];
    int n = busy_boxes(svg, got, PLOT_W + 1);
    static double want[PLOT_W], have[PLOT_W];
    sampled_busy(tl, T, want);
    /* a box alone in its pixels (every pixel it touches touched by no other sub-pixel box:
     * counted per pixel here) is drawn on its own, and those pixels get no merged box */
    static int touch[PLOT_W];
    static char own[PLOT_W];
    int nown = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i + 1 < tl->n; i++) { /* the last event is the wide B */
            double u0 = tl->ev[i].start_s / T * PLOT_W;
            double u1 = (tl->ev[i].start_s + tl->ev[i].dur_s) / T * PLOT_W;
            int a = (int)floor(u0), b = (int)ceil(u1) - 1, alone = 1;
            if (b < a) b = a;
            for (int q = a; q <= b; q++) {
                if (pass == 0) touch[q]++;
                alone &= touch[q] == 1;
            }
            if (pass == 1 && alone) {
                for (int q = a; q <= b; q++) own[q] = 1;
                nown++;
            }
        }
    }
    cr_expect_eq(count(svg, "class=\"b F\""), nown, "boxes alone in their pixels");
    for (int i = 0; i < n; i++) {
        cr_assert(got[i].x >= PLOT_X && got[i].w >= 1 && got[i].x + got[i].w <= PLOT_X + PLOT_W);
        for (int p = got[i].x - PLOT_X; p < got[i].x - PLOT_X + got[i].w; p++)
            have[p] = got[i].busy;
        if (i > 0 && got[i - 1].x + got[i - 1].w == got[i].x)
            cr_expect_neq(got[i - 1].busy, got[i].busy, "run at x %d not maximal", got[i].x);
    }
    /* the last 2.75 px are the wide B's; sub-pixel boxes may start under it */
    int worst = -1;
    for (int p = 0; p < PLOT_W - 3; p++) {
        if (own[p]) cr_expect_eq(have[p], 0, "pixel %d: merged and alone", p);
        else if (fabs(have[p] - want[p]) > 0.0015 && worst < 0) worst = p;
    }
    cr_expect_lt(worst, 0, "pixel %d: busy %.4f, sampled %.4f", worst,
                 worst >= 0 ? have[worst] : 0, worst >= 0 ? want[worst] : 0);
    cr_expect_gt(n, 100, "a random picture has runs of many fractions (%d)", n);
    cr_expect(nown > 0 && nown < 200, "%d of 4000 boxes alone in their pixels", nown);
    cr_expect_lt(len, 200000u, "the SVG is %zu bytes for 4001 events", len);
    free(svg);
    free(r);
    timeline_free(tl);
}

/* sim_write_svg streams the text into the atomic write's temporary file: the file is
 * sim_svg_text's text byte for byte; a write that fails part-way (a file size limit under
 * the text's length) keeps the file that was there and leaves no temporary. */
Test(svg, streamed_file_is_the_text_and_a_failed_write_keeps_the_file)
{
    plan *pl;
    sim_report *r = run(SCHED_ZB_H1, 2, &pl);
    size_t len;
    char *text = sim_svg_text(r, &len);
    cr_assert_not_null(text);
    cr_assert_gt(len, 1u << 14, "the SVG is %zu bytes", len);
    char *dir = make_tmpdir_named("svgfail");
    char path[300];
    snprintf(path, sizeof path, "%s/t.svg", dir);
    file_put_text(path, "old");
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    struct rlimit rl = {.rlim_cur = 1u << 13, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    plumb_err e;
    err_clear(&e);
    cr_expect_eq(sim_write_svg(r, path, &e), -1);
    cr_expect(strstr(e.msg, path) && strstr(e.msg, "cannot write"), "%s", e.msg);
    expect_file_text(path, "old");
    cr_expect_eq(count_files(dir), 1, "a temporary left behind");
    rl.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    cr_expect_eq(sim_write_svg(r, path, &e), 0, "%s", e.msg);
    size_t n = 0;
    char *back = file_read_all(path, 1u << 26, "too large", &n, &e);
    cr_assert_not_null(back, "%s", e.msg);
    cr_expect(n == len && !memcmp(back, text, len), "the written SVG differs (%zu of %zu bytes)",
              n, len);
    free(back);
    free(text);
    cr_expect_eq(rm_tree(dir), 0);
    sim_report_free(r);
    plan_free(pl);
}
