/* test_svg.c: the structure of plumb's SVG pictures. The simulator's timeline: a row per
 * device labelled with its stages, idle devices of the cluster folded into rows of their
 * own, one row per stage boundary that carried transfers and none that did not (their
 * transfer counts add up to the timeline's), legend entries for exactly the kinds the run
 * has, and legend swatches drawn in the fills the blocks of that kind use. The sweep plot:
 * the last point has an x tick, the target and cost lines differ in colour and dash, and
 * the linear-scaling line is drawn over the throughput line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/svg.h"
#include "planner/sweep.h"
#include "sim/sim.h"
#include "sim/synth.h"

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
