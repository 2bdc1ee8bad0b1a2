/* test_sim_report.c: the simulator's writers: the JSON report carries the figures of the
 * report struct (and the what-if changes), the SVG has a row per device, a legend and a
 * time axis, the Gantt a row per device whose letters add up to the busy time, and the
 * table prints every figure with its unit. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"
#include "sim/sim.h"
#include "sim/synth.h"
#include "tests/synth.h"

static sim_report *sample(sim_options *o, plan **out)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    s.microbatches = 4;
    s.input_ms = s.weight_ms = 1;
    plan *pl = synth_plan(&s);
    sim_report *r = synth_run(pl, o);
    *out = pl;
    return r;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    cr_assert(cJSON_IsNumber(v), "field %s missing", k);
    return v->valuedouble;
}

Test(sim_report, json_fields)
{
    sim_options o;
    sim_options_init(&o);
    plan *pl;
    sim_report *base = sample(&o, &pl);
    o.straggler_device = 2;
    o.straggler_factor = 3;
    sim_report *r = sim_run(pl, &o, NULL);
    cr_assert_not_null(r);
    sim_changes ch;
    cr_assert_eq(sim_compare(base, r, &ch), 0);
    cJSON *j = sim_report_to_json(r, &ch, "p.json");
    cr_assert_not_null(j);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, SIM_REPORT_FORMAT);
    cr_expect_eq(num(j, "samples_per_s"), r->samples_per_s);
    cr_expect_eq(num(j, "iteration_s"), r->iteration_s);
    cr_expect_eq(num(j, "bubble_fraction"), r->bubble_fraction);
    const cJSON *devs = cJSON_GetObjectItem(j, "devices");
    cr_assert_eq(cJSON_GetArraySize(devs), 3);
    const cJSON *d2 = cJSON_GetArrayItem(devs, 2);
    cr_expect_eq(num(d2, "busy_s"), r->devices[2].busy_s);
    cr_expect_eq(num(d2, "idle_s"), r->devices[2].idle_s);
    cr_expect_eq(num(d2, "comm_s"), r->devices[2].comm_s);
    cr_expect_eq(num(d2, "peak_memory_bytes"), r->devices[2].mem.total);
    cr_expect_eq(num(d2, "memory_capacity_bytes"), r->devices[2].mem.capacity);
    const cJSON *mem = cJSON_GetObjectItem(d2, "memory");
    cr_expect_eq(num(mem, "activations_bytes"), r->devices[2].mem.activations);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "links")), 4);
    cr_expect_eq(num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "links"), 0), "bytes"),
                 r->links[0].bytes);
    const cJSON *changes = cJSON_GetObjectItem(j, "changes");
    cr_assert(cJSON_GetArraySize(changes) >= 5);
    const cJSON *c0 = cJSON_GetArrayItem(changes, 0);
    cr_expect_str_eq(cJSON_GetObjectItem(c0, "figure")->valuestring, "samples_per_s");
    cr_expect(num(c0, "ratio") < 1);
    cr_expect_eq(num(c0, "base"), base->samples_per_s);
    cJSON *w = sim_options_to_json(&o, pl->clus);
    cr_expect_eq(num(cJSON_GetObjectItem(w, "straggler"), "factor"), 3);
    cJSON_Delete(w);
    cJSON_Delete(j);
    sim_changes_free(&ch);
    sim_report_free(r);
    sim_report_free(base);
    plan_free(pl);
}

Test(sim_report, svg)
{
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    o.schedule = SCHED_ZB_H1;
    plan *pl;
    sim_report *r = sample(&o, &pl);
    size_t n;
    char *svg = sim_svg_text(r, &n);
    cr_assert_not_null(svg);
    cr_expect_eq(strlen(svg), n);
    cr_expect(strncmp(svg, "<?xml", 5) == 0);
    cr_expect(strstr(svg, "</svg>") != NULL);
    for (int d = 0; d < 3; d++) {
        char row[64];
        snprintf(row, sizeof row, ">device %d (synth)</text>", d);
        cr_expect(strstr(svg, row) != NULL, "no row for device %d", d);
    }
    cr_expect(strstr(svg, "time (ms)") != NULL);
    cr_expect(strstr(svg, "F forward") && strstr(svg, "W weight gradient"));
    cr_expect(strstr(svg, "url(#hatch)") != NULL, "W blocks are hatched");
    cr_expect(strstr(svg, ">I2</text>") != NULL, "blocks are labelled");
    free(svg);
    plumb_err e;
    sim_report *nt = sim_run(pl, NULL, &e);
    cr_expect_null(sim_svg_text(nt, NULL));
    cr_expect_neq(sim_write_svg(nt, "/tmp/never-written.svg", &e), 0);
    sim_report_free(nt);
    sim_report_free(r);
    plan_free(pl);
}

/* The Gantt letters of a device row times the column width approximate its busy time. */
Test(sim_report, gantt_and_table)
{
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    o.iterations = 1;
    plan *pl;
    sim_report *r = sample(&o, &pl);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sim_print_gantt(r, 200, f);
    fclose(f);
    char *row = strstr(buf, "device 0");
    cr_assert_not_null(row);
    char *bar = strchr(row, '|');
    cr_assert_not_null(bar);
    int busy = 0, cols = 0;
    for (char *p = bar + 1; *p && *p != '|'; p++, cols++)
        busy += *p == 'F' || *p == 'B';
    cr_expect_eq(cols, 200);
    double col = r->makespan_s / 200;
    cr_expect(fabs(busy * col - r->devices[0].total_busy_s) <= 2 * 8 * col,
              "%d columns of %g s vs %g s", busy, col, r->devices[0].total_busy_s);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    sim_print_report(r, NULL, f);
    fclose(f);
    cr_expect(strstr(buf, "samples/s") && strstr(buf, " ms") && strstr(buf, "MiB") &&
              strstr(buf, "GiB") && strstr(buf, " %"));
    free(buf);
    sim_report_free(r);
    plan_free(pl);
}

/* A device holding more than 8 stages (interleaved, 10 chunks on 2 devices) lists them all,
 * in the struct and in the JSON, so that compare's memory rows of a report find them. */
Test(sim_report, every_stage_of_a_device_is_listed)
{
    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 20;
    s.chunks = 10;
    s.schedule = SCHED_INTERLEAVED;
    s.microbatches = 4;
    plan *pl = synth_plan(&s);
    sim_report *r = synth_run(pl, NULL);
    cr_assert_eq(r->ndevices, 2);
    cr_assert_eq(r->devices[1].nstages, 10);
    for (int j = 0; j < 10; j++) cr_expect_eq(r->devices[1].stages[j], 2 * j + 1);
    cJSON *js = sim_report_to_json(r, NULL, NULL);
    cr_assert_not_null(js);
    const cJSON *st = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(js, "devices"), 1),
                                          "stages");
    cr_assert_eq(cJSON_GetArraySize(st), 10);
    cr_expect_eq(cJSON_GetArrayItem(st, 9)->valueint, 19);
    cJSON_Delete(js);
    sim_report_free(r);
    plan_free(pl);
}

/* Byte counts scale to the unit that reads well; bandwidths print in Gbit/s. */
Test(sim_report, units_scale)
{
    char b[32];
    cr_expect_str_eq(units_bytes(0, b, sizeof b), "0 B");
    cr_expect_str_eq(units_bytes(512, b, sizeof b), "512 B");
    cr_expect_str_eq(units_bytes(1536, b, sizeof b), "1.50 KiB");
    cr_expect_str_eq(units_bytes(4.2 * 1048576, b, sizeof b), "4.20 MiB");
    cr_expect_str_eq(units_bytes(1.5 * 1073741824.0, b, sizeof b), "1.50 GiB");
    cr_expect_str_eq(units_bytes(3 * 1099511627776.0, b, sizeof b), "3.00 TiB");
    cr_expect_str_eq(units_bytes(5000 * 1099511627776.0, b, sizeof b), "5000.00 TiB");
    cr_expect_str_eq(units_gbit(1.25e9, b, sizeof b), "10 Gbit/s");
    cr_expect_str_eq(units_gbit(25e9 / 8, b, sizeof b), "25 Gbit/s");
}

/* Every kind of what-if but the schedule, on top of o. */
static void five_whatifs(sim_options *o)
{
    o->straggler_device = 1;
    o->straggler_factor = 2.5;
    o->bandwidth_Bps[0] = 10e9 / 8;
    o->memory_limit_bytes = 2 * 1073741824.0;
    o->microbatches = 6;
}

/* The report lists the what-ifs its run applied, in the text and in the JSON; a run of the
 * plan as written lists none. A small model's memory prints in MiB, not as 0.00 GiB. */
Test(sim_report, lists_the_whatifs)
{
    plan *pl;
    sim_options o;
    sim_options_init(&o);
    sim_report *base = sample(&o, &pl);
    five_whatifs(&o);
    sim_report *r = synth_run(pl, &o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sim_print_report(r, NULL, f);
    fclose(f);
    const char *line = strstr(buf, "\nwhat-ifs ");
    cr_assert_not_null(line, "no what-ifs line:\n%s", buf);
    cr_expect(strstr(line, "6 microbatches; device 1 computes x2.5 slower; level 0 (intra) at "
                     "10 Gbit/s; memory at most 2.00 GiB per device"), "%.200s", line);
    free(buf);
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    const cJSON *w = cJSON_GetObjectItem(j, "whatif");
    cr_assert_not_null(w, "no whatif in the JSON");
    cr_expect_eq(num(cJSON_GetObjectItem(w, "straggler"), "device"), 1);
    cr_expect_eq(num(cJSON_GetObjectItem(w, "straggler"), "factor"), 2.5);
    cr_expect_eq(num(w, "microbatches"), 6);
    const cJSON *bw = cJSON_GetArrayItem(cJSON_GetObjectItem(w, "bandwidth"), 0);
    cr_expect_eq(num(bw, "gbit_per_s"), 10);
    cr_expect_str_eq(cJSON_GetObjectItem(bw, "name")->valuestring, "intra");
    cr_expect_str_eq(cJSON_GetObjectItem(j, "model")->valuestring, pl->prof->name);
    cJSON_Delete(j);
    /* the plan as written: no what-ifs anywhere; small memory in MiB */
    buf = NULL;
    f = open_memstream(&buf, &len);
    sim_print_report(base, NULL, f);
    fclose(f);
    cr_expect_null(strstr(buf, "what-ifs"));
    cr_assert(base->peak_memory_bytes > 0 && base->peak_memory_bytes < 1073741824.0,
              "the sample's peak is %g bytes", base->peak_memory_bytes);
    cr_expect_null(strstr(buf, " 0.00 GiB"), "%s", buf);
    const char *pk = strstr(buf, "peak memory     ");
    cr_assert_not_null(pk);
    cr_expect(strncmp(pk + 16 + strcspn(pk + 16, " "), " MiB", 4) == 0 ||
              strncmp(pk + 16 + strcspn(pk + 16, " "), " KiB", 4) == 0, "%.60s", pk);
    free(buf);
    j = sim_report_to_json(base, NULL, NULL);
    cr_expect_null(cJSON_GetObjectItem(j, "whatif"));
    cJSON_Delete(j);
    sim_report_free(r);
    sim_report_free(base);
    plan_free(pl);
}

/* The simulator's Chrome trace: a flow from every transfer to the computation receiving
 * it, and per device a memory counter that starts at the device's fixed memory, never
 * exceeds its peak, reaches it where the schedule's list order is its timing (stage 0 of
 * a flushing 1F1B holds all its slots), and returns to the start once all is done. */
Test(sim_report, trace_flows_and_memory_counters)
{
    const int kinds[] = { SCHED_1F1B_FLUSH, SCHED_ZB_H1, SCHED_GPIPE };
    for (int q = 0; q < 3; q++) {
        sim_options o;
        sim_options_init(&o);
        o.timeline = 1;
        o.schedule = kinds[q];
        plan *pl;
        sim_report *r = sample(&o, &pl);
        char *text = timeline_chrome_text(r->tl, NULL);
        cr_assert_not_null(text);
        cJSON *root = cJSON_Parse(text);
        cr_assert_not_null(root, "not JSON");
        int transfers = 0, ns = 0, nf = 0;
        int *fin = calloc(100000, sizeof *fin);
        double first[8], last[8], peak[8];
        int nc[8] = { 0 };
        cr_assert_not_null(fin);
        const cJSON *ev;
        cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents"))
        {
            const char *ph = cJSON_GetObjectItem(ev, "ph")->valuestring;
            const cJSON *args = cJSON_GetObjectItem(ev, "args");
            if (!strcmp(ph, "X") && cJSON_GetObjectItem(ev, "pid")->valueint == 3) {
                const char *k = cJSON_GetObjectItem(args, "kind")->valuestring;
                transfers += !strcmp(k, "send_f") || !strcmp(k, "send_b");
            } else if (!strcmp(ph, "s") || !strcmp(ph, "f")) {
                int id = cJSON_GetObjectItem(ev, "id")->valueint;
                cr_assert(id > 0 && id < 100000);
                if (*ph == 's') ns++, fin[id] |= 1;
                else nf++, fin[id] |= 2;
            } else if (!strcmp(ph, "C")) {
                int d = -1;
                sscanf(cJSON_GetObjectItem(ev, "name")->valuestring, "memory d%d", &d);
                cr_assert(d >= 0 && d < r->ndevices && d < 8);
                double v = cJSON_GetObjectItem(args, "bytes")->valuedouble;
                if (!nc[d]++) {
                    first[d] = peak[d] = v;
                    cr_expect_eq(cJSON_GetObjectItem(ev, "ts")->valuedouble, 0);
                }
                last[d] = v;
                if (v > peak[d]) peak[d] = v;
            }
        }
        cr_expect_gt(transfers, 0);
        cr_expect_eq(ns, transfers, "%s: a flow per transfer", sched_kind_name(kinds[q]));
        cr_expect_eq(nf, ns);
        for (int id = 1; id <= ns; id++) cr_expect_eq(fin[id], 3, "flow %d has both ends", id);
        for (int i = 0; i < r->ndevices; i++) {
            int d = r->devices[i].device;
            double total = r->devices[i].mem.total;
            cr_assert_gt(nc[d], 2, "device %d has a memory counter", d);
            cr_expect_leq(peak[d], total * (1 + 1e-12), "device %d", d);
            cr_expect_lt(first[d], peak[d]);
            cr_expect(fabs(last[d] - first[d]) <= 1e-6 * total, "device %d drains", d);
        }
        if (kinds[q] == SCHED_1F1B_FLUSH)
            cr_expect(fabs(peak[0] - r->devices[0].mem.total) <= 1e-9 * peak[0],
                      "stage 0 reaches its peak: %g of %g", peak[0], r->devices[0].mem.total);
        free(fin);
        cJSON_Delete(root);
        free(text);
        sim_report_free(r);
        plan_free(pl);
    }
}

/* a plan that leaves devices idle: the report says how many are used and lists the idle
 * ones (text and JSON), rather than leaving them out */
Test(sim_report, idle_devices_are_listed)
{
    sim_options o;
    sim_options_init(&o);
    plan *pl;
    sim_report *r = sample(&o, &pl);
    cr_assert_eq(r->devices_total, pl->clus->ndevices);
    cr_assert_eq(r->ndevices, 3);
    /* every device of the synthetic cluster runs a stage: none idle */
    char buf[160];
    cr_assert_eq(sim_report_devices_text(r, buf, sizeof buf), 3);
    char want[64];
    snprintf(want, sizeof want, "3 of %d used", pl->clus->ndevices);
    cr_assert(!strncmp(buf, want, strlen(want)), "%s", buf);
    /* pretend the cluster had 5 devices, the last two unused */
    r->devices_total = 5;
    cr_assert_eq(sim_report_devices_text(r, buf, sizeof buf), 3);
    cr_assert_str_eq(buf, "3 of 5 used (devices 3-4 idle)");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sim_print_report(r, NULL, f);
    fclose(f);
    cr_assert(strstr(text, "devices         3 of 5 used (devices 3-4 idle)"), "%s", text);
    free(text);
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    cr_assert_not_null(j);
    cr_expect_eq(num(j, "devices_used"), 3);
    cr_expect_eq(num(j, "devices_total"), 5);
    const cJSON *idle = cJSON_GetObjectItem(j, "idle_devices");
    cr_assert_eq(cJSON_GetArraySize(idle), 2);
    cr_expect_eq(cJSON_GetArrayItem(idle, 0)->valuedouble, 3);
    cr_expect_eq(cJSON_GetArrayItem(idle, 1)->valuedouble, 4);
    cJSON_Delete(j);
    sim_report_free(r);
    plan_free(pl);
}

/* sim_report_device: the entry of a device id, NULL for a device no worker runs on (a
 * gap, below the first, past the last, negative), the first of a repeated id; on a hand-made
 * report and on sim_run's of a replicated plan that leaves devices idle. */
Test(sim_report, device_lookup)
{
    sim_device_report d[5] = {{.device = 1}, {.device = 4}, {.device = 4}, {.device = 7},
                              {.device = 8}};
    sim_report h = {.ndevices = 5, .devices = d};
    /* what each id from -2 to 10 finds, by hand: index into d, -1 for none */
    const int want[13] = {-1, -1, -1, 0, -1, -1, 1, -1, -1, 3, 4, -1, -1};
    for (int dev = -2; dev <= 10; dev++)
        cr_assert_eq(sim_report_device(&h, dev), want[dev + 2] < 0 ? NULL : &d[want[dev + 2]],
                     "device %d", dev);
    h.ndevices = 0;
    cr_assert_null(sim_report_device(&h, 1));
    h.ndevices = 1;
    cr_assert_eq(sim_report_device(&h, 1), &d[0]);
    cr_assert_null(sim_report_device(&h, 4));

    sim_synth s;
    sim_synth_init(&s);
    s.nstages = 3;
    s.replicas = 3;
    s.devices_per_server = 4; /* 9 devices on 3 servers of 4: devices 9-11 idle */
    plan *pl = synth_plan(&s);
    sim_report *r = synth_run(pl, NULL);
    cr_assert_eq(r->ndevices, 9);
    cr_assert_eq(r->devices_total, 12);
    for (int dev = -1; dev <= 12; dev++) {
        const sim_device_report *got = sim_report_device(r, dev);
        if (dev < 0 || dev >= 9) {
            cr_assert_null(got, "device %d", dev);
            continue;
        }
        cr_assert_not_null(got, "device %d", dev);
        cr_assert_eq(got->device, dev);
        cr_assert_eq(got, &r->devices[dev], "device %d", dev);
    }
    sim_report_free(r);
    plan_free(pl);
}

/* Defence in depth: a timeline with an infinite or NaN time (what a 1e-308 Gbit/s link
 * once produced) gives an SVG without a time axis and an empty Gantt, in finite time
 * (the axis loop once stepped by an infinite tick forever, its memory growing); and a
 * cluster that escaped validation makes sim_run refuse the non-finite run with a line. */
Test(sim_report, non_finite_times_do_not_hang_the_writers, .timeout = 60)
{
    sim_options o;
    sim_options_init(&o);
    o.timeline = 1;
    plan *pl;
    sim_report *r = sample(&o, &pl);
    cr_assert(r->tl && r->tl->n > 1);
    r->tl->ev[0].dur_s = INFINITY;
    r->tl->ev[1].start_s = NAN;
    size_t n = 0;
    char *svg = sim_svg_text(r, &n);
    cr_assert_not_null(svg);
    cr_expect(n < 10u << 20, "an SVG of %zu bytes", n);
    free(svg);
    char *text = NULL;
    size_t tn = 0;
    FILE *f = open_memstream(&text, &tn);
    cr_assert(f);
    sim_print_gantt(r, 80, f);
    fclose(f);
    cr_expect(strstr(text, "(empty timeline)") != NULL, "%s", text);
    free(text);
    sim_report_free(r);
    plumb_err e;
    err_clear(&e);
    pl->clus->levels[0].bandwidth_Bps = 1e-320; /* in memory: no loader saw it */
    sim_options_init(&o);
    cr_expect_null(sim_run(pl, &o, &e));
    /* refused by the engine's path check (a rate below 1 byte/s never completes) or, past
     * it, by the check on the simulated times */
    cr_expect(strstr(e.msg, "never complete") || strstr(e.msg, "the simulated times are not finite"),
              "%s", e.msg);
    plan_free(pl);
}
