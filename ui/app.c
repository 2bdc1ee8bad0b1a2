/* app.c: the dashboard object: opening files (errors shown, not fatal), keys -> state ->
 * re-plan and re-simulate, save and export, the --keys parser and the snapshot frame. */
#include "ui/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/json.h"
#include "ui/draw.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void set_msg(ui_app *a, int is_err, const char *fmt, const char *arg)
{
    snprintf(a->msg, sizeof a->msg, fmt, arg);
    a->msg_err = is_err;
}

/* Evaluates the pinned settings (or drops the pinned result when unpinned). */
static int take_kept(ui_app *a, const ui_whatif *w, ui_result *r);

static void eval_pin(ui_app *a)
{
    if (a->base.model) { /* a transformer's pinned layouts are kept like the live ones */
        if (a->pin.rep) ui_app_keep(a, &a->pin_w, &a->pin);
        ui_result_free(&a->pin);
        if (!a->st->pinned) return;
        a->pin_w = a->st->pin;
        if (!take_kept(a, &a->st->pin, &a->pin)) ui_evaluate(&a->base, &a->st->pin, &a->pin);
        return;
    }
    if (a->st->pinned) ui_evaluate(&a->base, &a->st->pin, &a->pin);
    else ui_result_free(&a->pin);
}

/* After an evaluation: the planner's note (why its answer was not used) as the message,
 * and the devices of the timeline rows for the cursor keys. */
static void note_msg(ui_app *a)
{
    if (a->cur.note[0]) set_msg(a, 1, "%s", a->cur.note);
    int ids[UI_MAX_GPUS], n = 0;
    if (a->cur.rep)
        for (int i = 0; i < a->cur.rep->ndevices && n < UI_MAX_GPUS; i++)
            ids[n++] = a->cur.rep->devices[i].device;
    ui_state_set_rows(a->st, ids, n);
}

/* The state machine and the first evaluation of a loaded base. */
static void start(ui_app *a, double t0)
{
    ui_whatif w;
    ui_base_whatif(&a->base, &w);
    double mem = 0;
    for (int i = 0; i < a->base.clus->ntypes; i++)
        if (a->base.clus->types[i].memory_bytes > mem) mem = a->base.clus->types[i].memory_bytes;
    ui_state_init(a->st, &w, a->base.clus->nlevels, a->base.clus->levels[0].count, mem);
    ui_state_set_plan(a->st, a->base.loaded); /* the 2D schedule keys check its runtime */
    if (a->base.model) { /* its keys check cp against the tokens laid out */
        layout3d_options lo = a->base.lopt;
        if (lo.seq <= 0) lo.seq = a->base.model->max_positions; /* llm_profile_build's */
        ui_state_set_layout3d(a->st, (int)a->base.model->layers, lo.global_batch, &lo);
        a->st->window = a->base.model->window;
    }
    ui_evaluate(&a->base, &a->st->cur, &a->cur);
    a->cur_w = a->st->cur;
    if (a->st->cur.microbatches == 0) {
        /* the planner chose the microbatches: adopt them, so that every state the keys
         * reach (and undo returns to) names its microbatches */
        a->st->cur.microbatches = a->cur.pl ? a->cur.pl->microbatches : 1;
        ui_evaluate(&a->base, &a->st->cur, &a->cur);
    }
    note_msg(a);
    char cut[PLUMB_ERR_MAX];
    if (ui_base_cut_note(&a->base, cut, sizeof cut)) set_msg(a, 1, "%s", cut);
    a->key_ms = now_ms() - t0;
}

int ui_app_open_model(ui_app *a, const char *model_path, const char *cluster_path,
                      const layout3d_options *o, const ui_runtime *rt, const char *out_dir,
                      plumb_err *err)
{
    double t0 = now_ms();
    memset(a, 0, sizeof *a);
    snprintf(a->out_dir, sizeof a->out_dir, "%s", out_dir && *out_dir ? out_dir : ".");
    if (!(a->st = calloc(1, sizeof *a->st))) return err_set(err, NULL, NULL, "out of memory");
    if (ui_base_load_model(&a->base, model_path, cluster_path, o, rt, err)) {
        ui_app_free(a);
        return -1;
    }
    a->loaded = 1;
    start(a, t0);
    return 0;
}

int ui_app_open(ui_app *a, const char *profile_path, const char *cluster_path,
                const char *plan_path, const char *out_dir, int planner)
{
    memset(a, 0, sizeof *a);
    snprintf(a->out_dir, sizeof a->out_dir, "%s", out_dir && *out_dir ? out_dir : ".");
    a->st = calloc(1, sizeof *a->st);
    if (!a->st) return -1;
    plumb_err e;
    err_clear(&e);
    if (ui_base_load(&a->base, profile_path, cluster_path, plan_path, &e)) {
        snprintf(a->load_err, sizeof a->load_err, "%s", e.msg);
        ui_whatif w;
        memset(&w, 0, sizeof w);
        w.ngpus = 1;
        w.straggler = -1;
        ui_state_init(a->st, &w, 1, 1, 0);
        return 0;
    }
    a->loaded = 1;
    if (planner >= 0 && planner < UI_PLANNER_N) a->base.planner = planner;
    start(a, now_ms());
    return 0;
}

void ui_app_free(ui_app *a)
{
    ui_app_async_stop(a);
    for (int i = 0; i < UI_KEPT_RESULTS; i++) ui_result_free(&a->kept[i].r);
    ui_result_free(&a->cur);
    ui_result_free(&a->pin);
    ui_base_free(&a->base);
    free(a->st);
    memset(a, 0, sizeof *a);
}

void ui_app_stem(const ui_app *a, char *buf, size_t n)
{
    const char *model = a->loaded && a->base.prof->name && *a->base.prof->name
                            ? a->base.prof->name : "plan";
    char safe[128];
    size_t k = 0;
    for (const char *s = model; *s && k + 1 < sizeof safe; s++)
        safe[k++] = (*s == '/' || *s == ' ') ? '_' : *s;
    safe[k] = 0;
    snprintf(buf, n, "%s/%s-%dgpu-%s", a->out_dir, safe, a->st->cur.ngpus,
             sched_kind_name((sched_kind)a->st->cur.schedule));
}

/* The dashboard's files never replace one that is there (its own input plan, an earlier
 * save or export, anyone's file): path[i] becomes STEM SUFFIX[i] for the first of STEM,
 * STEM-2, ... STEM-999 under which none of the n files exists, and *used that stem. 0, or
 * -1 when every one is taken. */
static int free_paths(const char *stem, const char *const *suffix, int n, char (*path)[800],
                      char *used, size_t used_n)
{
    for (int k = 1; k <= 999; k++) {
        char s[720];
        if (k == 1) snprintf(s, sizeof s, "%s", stem);
        else snprintf(s, sizeof s, "%s-%d", stem, k);
        int taken = 0;
        for (int i = 0; i < n && !taken; i++) {
            struct stat st;
            snprintf(path[i], 800, "%s%s", s, suffix[i]);
            taken = lstat(path[i], &st) == 0;
        }
        if (!taken) {
            snprintf(used, used_n, "%s", s);
            return 0;
        }
    }
    return -1;
}

static void do_save(ui_app *a)
{
    char stem[700], path[1][800], used[720];
    static const char *const suffix[] = {".plan.json"};
    plumb_err e;
    err_clear(&e);
    if (!a->cur.pl) {
        set_msg(a, 1, "save: %s", "no plan to save");
        return;
    }
    ui_app_stem(a, stem, sizeof stem);
    if (free_paths(stem, suffix, 1, path, used, sizeof used)) {
        set_msg(a, 1, "save: %s.plan.json and -2 ... -999 are all taken: nothing written", stem);
        return;
    }
    if (plan_save(a->cur.pl, path[0], &e)) set_msg(a, 1, "save failed: %s", e.msg);
    else set_msg(a, 0, "saved %s", path[0]);
}

/* The simulation the files are made of: what `plumb sim --trace` runs by default (the ring
 * all-reduce hops left out, each all-reduce once per replica on its collective track), the
 * dashboard's own simulation (*owned NULL), or, where that was folded to one pipeline (a
 * transformer's layout), the plan run in full (*owned, caller frees). NULL with e set when
 * that run fails. */
static const sim_report *export_report(const ui_app *a, sim_report **owned, plumb_err *e)
{
    *owned = NULL;
    if (!a->base.model) return a->cur.rep;
    sim_options o = a->cur.opt;
    o.timeline = SIM_TIMELINE_NO_RING_HOPS;
    return *owned = sim_run(a->cur.pl, &o, e);
}

static void do_export(ui_app *a)
{
    char stem[700], m[900];
    plumb_err e;
    err_clear(&e);
    if (!a->cur.rep) {
        set_msg(a, 1, "export: %s", "no simulation to export");
        return;
    }
    ui_app_stem(a, stem, sizeof stem);
    char p[3][800], used[720];
    static const char *const suffix[] = {".trace.json", ".report.json", ".svg"};
    if (free_paths(stem, suffix, 3, p, used, sizeof used)) {
        set_msg(a, 1, "export: %s.{report.json,trace.json,svg} and -2 ... -999 are all taken: "
                "nothing written", stem);
        return;
    }
    sim_report *owned;
    const sim_report *r = export_report(a, &owned, &e);
    if (!r) {
        set_msg(a, 1, "export failed: %s", e.msg);
        return;
    }
    /* the report built first; the trace streamed into its temporary file first of the
     * three, within the limit, measured by the writer as it writes (timeline_chrome_stream):
     * over it, no temporary is left and nothing renamed; the SVG streamed last */
    double lim = a->trace_limit_bytes > 0 ? a->trace_limit_bytes : UI_TRACE_LIMIT_BYTES;
    timeline_chrome_file t = {.tl = r->tl, .path = p[0], .max = timeline_chrome_max(lim)};
    sim_svg_file sv = {.r = r, .path = p[2]};
    size_t len = 0;
    char *text = NULL;
    cJSON *j = sim_report_to_json(r, NULL, NULL);
    if (j) text = json_text_exact(j, &len);
    cJSON_Delete(j);
    if (!text) {
        set_msg(a, 1, "export failed: %s", "out of memory");
        goto done;
    }
    file_out fo[3] = {{.path = p[0], .write = timeline_chrome_file_write, .ctx = &t},
                      {.path = p[1], .data = text, .len = len},
                      {.path = p[2], .write = sim_svg_file_write, .ctx = &sv}};
    if (files_write_atomic_out(3, fo, &e)) {
        if (t.over) {
            snprintf(m, sizeof m, "export: the trace would be %.3g GiB (%zu bytes, %zu events), "
                     "over the %.3g GiB limit: nothing written", (double)t.len / 1073741824.0,
                     t.len, r->tl->n, lim / 1073741824.0);
            set_msg(a, 1, "%s", m);
        } else {
            set_msg(a, 1, "export failed: %s", e.msg);
        }
    } else {
        snprintf(m, sizeof m, "%s.{report.json,trace.json,svg}", used);
        set_msg(a, 0, "exported %s", m);
    }
done:
    free(text);
    sim_report_free(owned);
}

void ui_app_keep(ui_app *a, const ui_whatif *w, ui_result *r)
{
    ui_kept *k = &a->kept[0];
    for (int i = 0; i < UI_KEPT_RESULTS; i++) {
        if (!a->kept[i].used) {
            k = &a->kept[i];
            break;
        }
        if (a->kept[i].stamp < k->stamp) k = &a->kept[i];
    }
    if (r->rep) {
        ui_result_free(&k->r);
        k->used = 1;
        k->stamp = ++a->kept_clock;
        k->w = *w;
        k->r = *r;
        memset(r, 0, sizeof *r);
    }
    ui_result_free(r);
}

/* The kept result for w (taken out of its slot), or 0 when none. */
static int take_kept(ui_app *a, const ui_whatif *w, ui_result *r)
{
    for (int i = 0; i < UI_KEPT_RESULTS; i++) {
        ui_kept *k = &a->kept[i];
        if (k->used && ui_whatif_equal(&k->w, w)) {
            *r = k->r;
            r->reused = 1;
            memset(k, 0, sizeof *k);
            return 1;
        }
    }
    return 0;
}

static int eval_layout(ui_app *a, int key);

int ui_app_take(ui_app *a, ui_result *r, int undo)
{
    a->pending = 0;
    if (r->rep || undo) {
        ui_app_keep(a, &a->cur_w, &a->cur);
        a->cur = *r;
        a->cur_w = a->st->cur;
        memset(r, 0, sizeof *r);
        note_msg(a);
        return 1;
    }
    char m[PLUMB_ERR_MAX + 32];
    snprintf(m, sizeof m, "kept the layout: %s", r->err[0] ? r->err : "no plan");
    set_msg(a, 1, "%s", m);
    ui_result_free(r);
    ui_state_reject(a->st);
    /* in the background the keys may have gone on from a layout never shown: lay out
     * where the rejection leaves them (at once when kept) */
    if (a->worker) eval_layout(a, 0);
    return 0;
}

/* A transformer's what-if: the layout shown already when the settings came back to it; a
 * kept result of the same settings; with a background worker (the terminal), the job
 * posted to it (a->pending; ui_app_poll takes the answer); else evaluated here and taken
 * by ui_app_take (or, refused, the key rejected). Undo and redo only reach layouts that
 * were taken. Returns 1 unless the key was rejected. */
static int eval_layout(ui_app *a, int key)
{
    ui_result r;
    memset(&r, 0, sizeof r);
    if (a->worker) ui_app_poll(a); /* an answer that came meanwhile: taken, or kept */
    if (a->cur.rep && ui_whatif_equal(&a->cur_w, &a->st->cur)) {
        a->pending = 0;
        return 1;
    }
    if (!take_kept(a, &a->st->cur, &r)) {
        if (a->worker && !ui_app_async_post(a)) return 1;
        ui_evaluate(&a->base, &a->st->cur, &r);
    }
    return ui_app_take(a, &r, key == 'u' || key == 'U' || key == UI_KEY_CTRL_R);
}

/* A plan file of a transformer's layout (ui_base_layout_file): the key's what-if
 * evaluated; one that has no plan (only a layout re-plans the file) is rejected like a
 * refused layout: the settings and the plan shown stay, the message says why. Undo and
 * redo are taken as they come. Returns 1 unless the key was rejected. */
static int eval_layout_file(ui_app *a, int key)
{
    ui_result r;
    memset(&r, 0, sizeof r);
    ui_evaluate(&a->base, &a->st->cur, &r);
    if (r.pl || key == 'u' || key == 'U' || key == UI_KEY_CTRL_R) {
        ui_result_free(&a->cur);
        a->cur = r;
        return 1;
    }
    set_msg(a, 1, "%s", r.err[0] ? r.err : "no plan");
    ui_result_free(&r);
    ui_state_reject(a->st);
    return 0;
}

int ui_app_key(ui_app *a, int key)
{
    double t0 = now_ms();
    a->msg[0] = 0;
    a->msg_err = 0;
    int f = ui_state_key(a->st, key);
    if (!a->loaded) return f & (UI_DO_QUIT | UI_DO_REDRAW);
    if (a->st->note[0]) set_msg(a, 1, "%s", a->st->note);
    if (a->base.model && (f & UI_DO_EVAL) && !eval_layout(a, key)) {
        a->key_ms = now_ms() - t0;
        return UI_DO_REDRAW;
    }
    if ((f & UI_DO_EVAL) && ui_base_layout_file(&a->base) && !eval_layout_file(a, key)) {
        a->key_ms = now_ms() - t0;
        return UI_DO_REDRAW;
    }
    if ((f & UI_DO_EVAL) && !a->base.model && !ui_base_layout_file(&a->base))
        ui_evaluate(&a->base, &a->st->cur, &a->cur);
    if (f & UI_DO_EVAL_PIN) eval_pin(a);
    if ((f & (UI_DO_SAVE | UI_DO_EXPORT)) && a->pending) ui_app_wait(a); /* the live one */
    if (f & UI_DO_SAVE) do_save(a);
    if (f & UI_DO_EXPORT) do_export(a);
    if (f & UI_DO_NOTHING_TO_UNDO) set_msg(a, 1, "%s", "nothing to undo or redo");
    if ((f & UI_DO_EVAL) && !a->pending) note_msg(a);
    if ((f & UI_DO_EVAL) && !a->cur.rep && !a->pending) set_msg(a, 1, "%s", "this what-if has no plan (u undoes it)");
    a->key_ms = now_ms() - t0;
    return f;
}

void ui_app_draw(ui_app *a, ui_fb *fb)
{
    ui_layout L;
    ui_app_layout(a, fb->w, fb->h, &L);
    ui_draw(a, &L, fb);
}

static const struct {
    const char *name;
    int key;
} KEYNAMES[] = {
    { "up", UI_KEY_UP }, { "down", UI_KEY_DOWN }, { "left", UI_KEY_LEFT },
    { "right", UI_KEY_RIGHT }, { "pgup", UI_KEY_PGUP }, { "pgdn", UI_KEY_PGDN },
    { "home", UI_KEY_HOME }, { "end", UI_KEY_END }, { "esc", UI_KEY_ESC }, { "tab", '\t' },
    { "enter", '\n' }, { "space", ' ' }, { "lt", '<' }, { "C-c", UI_KEY_CTRL_C },
    { "C-r", UI_KEY_CTRL_R }, { "resize", UI_KEY_RESIZE },
};

int ui_keys_parse(const char *spec, int *keys, int max, plumb_err *err)
{
    int n = 0;
    for (const char *s = spec; s && *s;) {
        int k;
        if (*s == '<') {
            const char *e = strchr(s, '>');
            size_t len = e ? (size_t)(e - s - 1) : 0;
            k = -1;
            for (size_t i = 0; e && i < sizeof KEYNAMES / sizeof KEYNAMES[0]; i++)
                if (strlen(KEYNAMES[i].name) == len && !strncmp(KEYNAMES[i].name, s + 1, len))
                    k = KEYNAMES[i].key;
            if (k < 0)
                return err_set(err, NULL, "--keys",
                               "expected a key name like <up>, <left>, <esc>, <lt> after '<' "
                               "(got \"%.20s\")", s);
            s = e + 1;
        } else {
            k = (unsigned char)*s++;
        }
        if (n >= max) return err_set(err, NULL, "--keys", "expected at most %d keys", max);
        keys[n++] = k;
    }
    return n;
}

char *ui_app_snapshot(ui_app *a, int w, int h, const int *keys, int nkeys)
{
    for (int i = 0; i < nkeys; i++)
        if (ui_app_key(a, keys[i]) & UI_DO_QUIT) break;
    ui_fb fb = { 0, 0, NULL };
    if (ui_fb_resize(&fb, w, h)) return NULL;
    ui_app_draw(a, &fb);
    char *s = ui_fb_text_dump(&fb, 0);
    ui_fb_free(&fb);
    return s;
}
