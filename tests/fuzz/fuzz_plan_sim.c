/* fuzz_plan_sim.c: libFuzzer entry point past the loaders: a profile and a cluster with
 * fuzzed values ({"profile": {plumb-profile/1}, "cluster": {plumb-cluster/1}, "keys":
 * "dashboard keys"}) go through what plumb plan, plumb sim and plumb ui --snapshot call:
 * the native planner, a hand-made straight pipeline over the links, the simulator with the
 * extreme what-ifs (slowest bandwidth, a straggler), its report, SVG, Gantt and trace
 * writers, and the dashboard's frame after the keys. Values outside core/bounds.h must be
 * refused by the loaders with a message; everything accepted must give finite figures
 * (no "nan" or "inf" in any text), and must not crash, hang or overflow (ASan/UBSan in the
 * SAN build). Inputs with more than 64 devices or 64 layers are skipped, and keys beyond
 * the first 8 are ignored (speed, not bounds, is what they would test). */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bounds.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/timeline.h"
#include "planner/native.h"
#include "sim/sim.h"
#include "ui/app.h"

#define FUZZ_FILE "fuzz.json"
#define FUZZ_MAX 64
#define FUZZ_KEYS 8

static char tmpdir[64];

/* Removes the folder with what the target and the dashboard's keys (s, e) wrote there. */
static void tmp_remove(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            char p[sizeof tmpdir + 300];
            snprintf(p, sizeof p, "%s/%.280s", tmpdir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    rmdir(tmpdir);
}

/* 1 when text shows a number that is not finite: "nan" or "inf" as a word of its own. */
static int not_finite_text(const char *text)
{
    static const char *const bad[] = {"nan", "inf", "NaN", "Infinity"};
    for (size_t k = 0; text && k < sizeof bad / sizeof bad[0]; k++)
        for (const char *p = text; (p = strstr(p, bad[k])) != NULL; p++) {
            size_t n = strlen(bad[k]);
            int before = p > text && ((p[-1] >= 'a' && p[-1] <= 'z') ||
                                      (p[-1] >= 'A' && p[-1] <= 'Z'));
            int after = (p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z');
            if (!before && !after) return 1;
        }
    return 0;
}

static int finite_report(const sim_report *r)
{
    if (!isfinite(r->iteration_s) || !isfinite(r->samples_per_s) || !isfinite(r->makespan_s) ||
        !isfinite(r->peak_memory_bytes) || !isfinite(r->bubble_fraction))
        return 0;
    for (int i = 0; i < r->ndevices; i++)
        if (!isfinite(r->devices[i].mem.total) || !isfinite(r->devices[i].busy_s))
            return 0;
    return 1;
}

/* Simulates pl (with a timeline) under opt and runs every writer over the report. */
static void sim_all(const plan *pl, const sim_options *base)
{
    sim_options o = *base;
    o.timeline = 1;
    plumb_err err;
    err_clear(&err);
    sim_report *r = sim_run(pl, &o, &err);
    if (!r) {
        if (!err.msg[0]) abort(); /* a refusal must say why */
        return;
    }
    if (!finite_report(r)) abort();
    size_t n = 0;
    char *svg = sim_svg_text(r, &n);
    if (svg && not_finite_text(svg)) abort();
    free(svg);
    char *trace = r->tl ? timeline_chrome_text(r->tl, &n) : NULL;
    if (trace && not_finite_text(trace)) abort();
    free(trace);
    char *text = NULL;
    size_t tn = 0;
    FILE *f = open_memstream(&text, &tn);
    if (f) {
        sim_print_report(r, NULL, f);
        sim_print_gantt(r, 100, f);
        fclose(f);
        if (not_finite_text(text)) abort();
        free(text);
    }
    sim_report_free(r);
}

/* The planner's plan, and a straight pipeline of up to 4 stages over devices 0..k-1 (so
 * that the links carry data even where the planner keeps everything on one device). */
static void plan_and_sim(const profile *p, const cluster *c)
{
    native_options no;
    native_options_init(&no);
    no.no_suggest = 1;
    native_result res;
    plumb_err err;
    err_clear(&err);
    plan *pl = planner_native(p, c, &no, &res, &err);
    if (!pl && !err.msg[0]) abort();
    native_result_free(&res);
    sim_options o;
    sim_options_init(&o);
    if (pl) {
        if (!isfinite(pl->pred_iteration_s) || !isfinite(pl->pred_samples_per_s)) abort();
        sim_all(pl, &o);
        plan_free(pl);
    }
    int k = c->ndevices < p->nlayers ? c->ndevices : p->nlayers;
    if (k > 4) k = 4;
    plan *st = plan_new(p, c, k);
    if (!st) return;
    for (int s = 0; s < k; s++)
        if (plan_set_stage(st, s, s * p->nlayers / k, (s + 1) * p->nlayers / k - 1, 1, &s)) {
            plan_free(st);
            return;
        }
    if (plan_validate(st, FUZZ_FILE, &err)) {
        plan_free(st);
        return;
    }
    sim_all(st, &o);
    /* the extreme what-ifs: every level at the slowest bandwidth, a 1e6-times straggler */
    for (int l = 0; l < c->nlevels; l++) o.bandwidth_Bps[l] = BOUND_BW_BPS_MIN;
    o.straggler_device = 0;
    o.straggler_factor = 1e6;
    sim_all(st, &o);
    plan_free(st);
}

/* The dashboard on the saved profile and cluster, after `keys`. */
static void ui_frame(const profile *p, const cluster *c, const char *keyspec)
{
    char pp[128], cp[128];
    plumb_err err;
    err_clear(&err);
    snprintf(pp, sizeof pp, "%s/p.json", tmpdir);
    snprintf(cp, sizeof cp, "%s/c.json", tmpdir);
    if (profile_save(p, pp, &err) || cluster_save(c, cp, &err)) abort();
    int keys[FUZZ_KEYS], nkeys = 0; /* each key re-plans and re-simulates */
    if (keyspec) {
        nkeys = ui_keys_parse(keyspec, keys, FUZZ_KEYS, &err);
        if (nkeys < 0) nkeys = 0;
    }
    ui_app *a = malloc(sizeof *a);
    if (!a) return;
    if (ui_app_open(a, pp, cp, NULL, tmpdir, UI_PLANNER_NATIVE)) {
        free(a);
        return;
    }
    if (!a->loaded) abort(); /* the loaders took these files a moment ago */
    char *text = ui_app_snapshot(a, 120, 40, keys, nkeys);
    if (text && not_finite_text(text)) abort();
    free(text);
    ui_app_free(a);
    free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/plumb-fuzz-plan-sim.XXXXXX");
        if (!mkdtemp(tmpdir)) abort();
        atexit(tmp_remove);
    }
    plumb_err err;
    err_clear(&err);
    cJSON *root = json_parse_text(FUZZ_FILE, (const char *)data, size, &err);
    if (!root) return 0;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(root, "profile");
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(root, "cluster");
    const cJSON *kj = cJSON_GetObjectItemCaseSensitive(root, "keys");
    profile *p = pj ? profile_from_json(pj, FUZZ_FILE, &err) : NULL;
    if (pj && !p && !err.msg[0]) abort();
    cluster *c = cj ? cluster_from_json(cj, FUZZ_FILE, &err) : NULL;
    if (cj && !c && !err.msg[0]) abort();
    if (getenv("PLUMB_FUZZ_VERBOSE"))
        fprintf(stderr, "plan_sim: %s\n", p && c ? "loaded" : err.msg);
    if (p && c && c->ndevices <= FUZZ_MAX && p->nlayers <= FUZZ_MAX) {
        plan_and_sim(p, c);
        ui_frame(p, c, cJSON_IsString(kj) ? kj->valuestring : "Bm+t");
    }
    profile_free(p);
    cluster_free(c);
    cJSON_Delete(root);
    return 0;
}
