/* draw.c: the dashboard's panels, drawn into a frame buffer (ui/fb.h) so that the terminal
 * front end and the --snapshot mode share every line of drawing code. */
#include "ui/draw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"
#include "core/device.h"
#include "core/pplayout.h"
#include "core/schedule_traits.h"

static const char *const HELP[] = {
    "plumb ui: what-if planning; every change re-plans and re-simulates.",
    "",
    "  +  -          devices up / down by a server (below one: its divisors)",
    "  1..8  l  Tab  select the cluster level the bandwidth keys change",
    "  b  B          double / halve the selected level's bandwidth",
    "  c  C          next / previous schedule the plan's runtime can take",
    "  m  M          double / halve the microbatches per iteration",
    "  x  X          tighten / loosen the per-device memory limit",
    "  Up  Down      select a device (PgUp PgDn: 10 at a time)",
    "  t  T          straggler on the selected device / slowdown 1.5 2 3 4x",
    "  r             recomputation auto (the planner's) / on / off",
    "  p  P          pin the live plan (shown beside it) / unpin",
    "  u  U  ^R      undo / redo",
    "  Left  Right   scroll the timeline; z Z zoom in / out; Home whole run",
    "  s             save the live plan as JSON",
    "  e             export the report JSON, Chrome trace and SVG timeline",
    "  ?  h          this help (any key closes it)",
    "  q  ^C         quit",
    "",
    "samples/s and iteration time are steady state; bubble is the idle share",
    "of compute; vs DP is the speedup over data parallelism on the same",
    "devices (no-fit: data parallelism does not fit their memory);",
    "memory is the largest device peak against its capacity or the limit.",
    "Timeline: F forward, B backward, I/W its input/weight halves, S step,",
    ". idle, a lower-case letter a mostly idle column; blocks are coloured",
    "by microbatch (with their number when wide enough); > marks the",
    "selected device and ! the straggler.",
};
#define NHELP (int)(sizeof HELP / sizeof HELP[0])

/* A transformer's 3D layout (plumb ui --model): every key lays it out again. */
static const char *const HELP3D[] = {
    "plumb ui --model: each change lays the model out again and simulates it.",
    "  g  G        tensor-parallel ranks up / down (devices kept: dp follows)",
    "  d  D        pipeline ranks up / down (devices kept: dp follows)",
    "  v  V        context-parallel ranks up / down (flash attn; dp follows)",
    "  w W + -     data-parallel replicas up / down (device count follows)",
    "  n  N        microbatch size up / down (m M: microbatches up / down)",
    "  i  I        virtual stages per pipeline rank up / down (interleaved)",
    "  r  a  o     recompute none/selective/full; sequence parallel; ZeRO-1",
    "  R           full recompute's checkpoint interval up (to 0 past the stage)",
    "  c  C        next / previous schedule (interleave follows its chunks)",
    "  k K  j      tp overlap none/backward/full; param all-gather under fwd",
    "  y  E  f     p2p overlap/sync; grad-sync overlap/end; std/flash attn",
    "  1..8 l b B  select a cluster level; double / halve its bandwidth",
    "  x X t T     memory limit; straggler on the selected device, slowdown",
    "  p P u U     pin, unpin, undo, redo;  s e  save the plan, export",
    "  arrows z Z  select a device, scroll, zoom;  ?  help;  q  quit",
    "Keys step to the nearest value that lays out: tp (x cp) divides a server,",
    "pp x interleave the layers, dp x microbatch size the global batch, 2 cp",
    "the sequence. What plumb plan --model refuses (heads, sp or tp overlap",
    "at tp 1, the all-gather without ZeRO-1, p2p sync on zb-v, grad-sync end",
    "on pipedream, standard attention at cp > 1) refused.",
    "Memory per pipeline rank: W weights, G gradients, O optimizer state,",
    "A activations at the peak, + other buffers, . free; | capacity (red, !).",
};
#define NHELP3D (int)(sizeof HELP3D / sizeof HELP3D[0])

int ui_help_rows(void) { return NHELP > NHELP3D ? NHELP : NHELP3D; }

/* ---- formatting -------------------------------------------------------------------- */

char *ui_fmt_time(double s, char *buf, size_t n)
{
    /* four significant digits in the largest unit that keeps the value >= 1 */
    static const struct { double scale; const char *unit; } U[] = {
        { 1, "s" }, { 1e3, "ms" }, { 1e6, "us" } };
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    if (s == 0) {
        snprintf(buf, n, "0 s");
        return buf;
    }
    int u = s >= 1 ? 0 : s >= 1e-3 ? 1 : 2;
    double v = s * U[u].scale;
    snprintf(buf, n, "%.*f %s", v >= 1000 ? 0 : v >= 100 ? 1 : v >= 10 ? 2 : 3, v, U[u].unit);
    return buf;
}

char *ui_fmt_gib(double bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

char *ui_fmt_devices(const int *devs, int k, char *buf, size_t n)
{
    size_t len = 0;
    if (n == 0) return buf;
    buf[0] = 0;
    for (int i = 0; i < k;) {
        int j = i;
        while (j + 1 < k && devs[j + 1] == devs[j] + 1) j++;
        char part[32];
        if (j > i) snprintf(part, sizeof part, "%s%d-%d", i ? "," : "", devs[i], devs[j]);
        else snprintf(part, sizeof part, "%s%d", i ? "," : "", devs[i]);
        size_t pl = strlen(part);
        if (len + pl + 1 > n || (j + 1 < k && len + pl + 2 > n)) {
            if (len + 2 <= n) {
                buf[len++] = '+';
                buf[len] = 0;
            } else if (len > 0) {
                buf[len - 1] = '+';
            }
            return buf;
        }
        memcpy(buf + len, part, pl + 1);
        len += pl;
        i = j + 1;
    }
    return buf;
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

/* ---- small drawing helpers ----------------------------------------------------------- */

/* A cursor writing fields left to right on one row of a rect, never past its end. */
typedef struct pen {
    ui_fb *fb;
    int x, y, end;
    int gap;         /* blanks after a field: 2, or 1 on narrow screens */
} pen;

static int pen_room(const pen *p) { return p->end - p->x; }

static void pen_text(pen *p, const char *s, int style)
{
    p->x += ui_fb_text(p->fb, p->x, p->y, pen_room(p), s, style);
}

/* Writes "label value" plus a gap only when the whole field fits; returns 1 if written. */
static int pen_field(pen *p, const char *label, const char *value, int vstyle)
{
    int need = (int)strlen(label) + 1 + (int)strlen(value);
    if (need > pen_room(p)) return 0;
    pen_text(p, label, UI_ST_LABEL);
    pen_text(p, " ", UI_ST_NORMAL);
    pen_text(p, value, vstyle);
    pen_text(p, p->gap > 1 ? "  " : " ", UI_ST_NORMAL);
    return 1;
}

/* One word alone (a setting that is on: "fp8-param-gather"), then the gap; 0 (nothing
 * drawn) when it does not fit. */
static int pen_word(pen *p, const char *word, int style)
{
    if ((int)strlen(word) > pen_room(p)) return 0;
    pen_text(p, word, style);
    pen_text(p, p->gap > 1 ? "  " : " ", UI_ST_NORMAL);
    return 1;
}

/* The device of a result's report holding the largest memory peak, or NULL. */
static const sim_device_report *peak_device(const sim_report *r)
{
    const sim_device_report *best = NULL;
    for (int i = 0; i < r->ndevices; i++)
        if (!best || r->devices[i].mem.total > best->mem.total) best = &r->devices[i];
    return best;
}

/* ---- header ------------------------------------------------------------------------ */

static void draw_figures(ui_fb *fb, int x, int y, int w, const char *label,
                         const ui_result *res)
{
    pen p = { fb, x, y, x + w, w >= 100 ? 2 : 1 };
    char v[96];
    if (label) {
        snprintf(v, sizeof v, "%-6s", label);
        pen_text(&p, v, UI_ST_TITLE | UI_A_BOLD);
    }
    if (!res->rep) {
        pen_text(&p, "error: ", UI_ST_BAD | UI_A_BOLD);
        pen_text(&p, res->err[0] ? res->err : "no plan", UI_ST_BAD);
        return;
    }
    const sim_report *r = res->rep;
    snprintf(v, sizeof v, r->samples_per_s >= 1000 ? "%.0f" : "%.1f", r->samples_per_s);
    pen_field(&p, "samples/s", v, UI_ST_VALUE | UI_A_BOLD);
    pen_field(&p, "iter", ui_fmt_time(r->iteration_s, v, sizeof v), UI_ST_VALUE);
    snprintf(v, sizeof v, "%.1f%%", 100 * r->bubble_fraction);
    pen_field(&p, "bubble", v, UI_ST_VALUE);
    if (r->tokens_per_s > 0) { /* a transformer: tokens and model FLOPs utilisation */
        snprintf(v, sizeof v, "%.0f", r->tokens_per_s);
        pen_field(&p, "tokens/s", v, UI_ST_VALUE | UI_A_BOLD);
        if (r->mfu >= 0) snprintf(v, sizeof v, "%.1f%%", 100 * r->mfu);
        else snprintf(v, sizeof v, "n/a");
        pen_field(&p, "MFU", v, UI_ST_VALUE);
    } else if (res->dp_samples_per_s > 0)
        snprintf(v, sizeof v, "%.2fx", r->samples_per_s / res->dp_samples_per_s);
    if (r->tokens_per_s <= 0) {
        if (res->dp_samples_per_s <= 0) /* data parallelism does not fit, or unknown */
            snprintf(v, sizeof v, "%s", res->dp_samples_per_s == 0 ? "no-fit" : "n/a");
        pen_field(&p, "vs DP", v, UI_ST_VALUE);
    }
    const sim_device_report *d = peak_device(r);
    if (d) {
        char a[32], b[32];
        snprintf(v, sizeof v, "%s/%s GiB%s", ui_fmt_gib(d->mem.total, a, sizeof a),
                 ui_fmt_gib(d->mem.capacity, b, sizeof b), r->fits ? "" : "!");
        pen_field(&p, "mem", v, r->fits ? UI_ST_GOOD : UI_ST_BAD | UI_A_BOLD);
    }
}

/* The change from pinned to live: relative for rates, points for the bubble. */
static void draw_diff(ui_fb *fb, int x, int y, int w, const ui_result *live, const ui_result *pin)
{
    pen p = { fb, x, y, x + w, w >= 100 ? 2 : 1 };
    pen_text(&p, "diff  ", UI_ST_TITLE | UI_A_BOLD);
    if (!live->rep || !pin->rep) {
        pen_text(&p, "n/a (one side has no figures)", UI_ST_DIM);
        return;
    }
    const sim_report *a = pin->rep, *b = live->rep;
    char v[64];
    double ds = a->samples_per_s > 0 ? 100 * (b->samples_per_s / a->samples_per_s - 1) : 0;
    snprintf(v, sizeof v, "%+.1f%%", ds);
    pen_field(&p, "samples/s", v, ds > 0.05 ? UI_ST_GOOD : ds < -0.05 ? UI_ST_BAD : UI_ST_VALUE);
    double di = a->iteration_s > 0 ? 100 * (b->iteration_s / a->iteration_s - 1) : 0;
    snprintf(v, sizeof v, "%+.1f%%", di);
    pen_field(&p, "iter", v, di < -0.05 ? UI_ST_GOOD : di > 0.05 ? UI_ST_BAD : UI_ST_VALUE);
    double db = 100 * (b->bubble_fraction - a->bubble_fraction);
    snprintf(v, sizeof v, "%+.1f pt", db);
    pen_field(&p, "bubble", v, db < -0.05 ? UI_ST_GOOD : db > 0.05 ? UI_ST_BAD : UI_ST_VALUE);
    if (live->dp_samples_per_s > 0 && pin->dp_samples_per_s > 0) {
        double dd = b->samples_per_s / live->dp_samples_per_s -
                    a->samples_per_s / pin->dp_samples_per_s;
        snprintf(v, sizeof v, "%+.2fx", dd);
        pen_field(&p, "vs DP", v, dd > 0.005 ? UI_ST_GOOD : dd < -0.005 ? UI_ST_BAD : UI_ST_VALUE);
    }
    double dm = gib(b->peak_memory_bytes - a->peak_memory_bytes);
    snprintf(v, sizeof v, "%+.2f GiB", dm);
    pen_field(&p, "mem", v, dm < -0.005 ? UI_ST_GOOD : dm > 0.005 ? UI_ST_BAD : UI_ST_VALUE);
}

/* A 3D layout's what-ifs, first on the row: the GPUs (`devs`: or CPU workers) as tp x pp
 * x dp (tp x cp x pp x dp with context parallelism), then the rest. */
static void draw_layout3d(pen *p, const ui_whatif *wi, const char *devs)
{
    char v[96], cps[24] = ""; /* cp only when > 1: rows without it read as before */
    if (wi->cp > 1) snprintf(cps, sizeof cps, " x cp %d", wi->cp);
    snprintf(v, sizeof v, "%d = tp %d%s x pp %d x dp %d", wi->ngpus, wi->tp, cps, wi->pp,
             wi->dp);
    pen_field(p, devs, v, UI_ST_VALUE | UI_A_BOLD);
    snprintf(v, sizeof v, "%d", wi->mbs);
    pen_field(p, "mbs", v, UI_ST_VALUE);
    snprintf(v, sizeof v, "%d", wi->interleave);
    pen_field(p, "v", v, UI_ST_VALUE);
    if (wi->recompute == RECOMPUTE_FULL && wi->ckpt != 1) /* the interval when not 1 */
        snprintf(v, sizeof v, "full/%d", wi->ckpt);
    else
        snprintf(v, sizeof v, "%s", recompute_kind_name((recompute_kind)wi->recompute));
    pen_field(p, "recomp", v, UI_ST_VALUE);
    pen_field(p, "sp", wi->seqpar ? "on" : "off", UI_ST_VALUE);
    snprintf(v, sizeof v, "%d", wi->zero);
    pen_field(p, "zero", v, UI_ST_VALUE);
}

static void draw_whatifs(ui_app *a, int x, int y, int w, ui_fb *fb)
{
    const ui_state *st = a->st;
    const ui_whatif *wi = &st->cur;
    const cluster *c = a->base.clus;
    pen p = { fb, x, y, x + w, w >= 100 ? 2 : 1 };
    char v[96], devs[32];
    snprintf(devs, sizeof devs, "%ss", cluster_device_noun(c));
    if (st->layout3d) {
        draw_layout3d(&p, wi, devs);
    } else {
        snprintf(v, sizeof v, "%d", wi->ngpus);
        pen_field(&p, devs, v, UI_ST_VALUE | UI_A_BOLD);
    }
    for (int l = 0; l < c->nlevels; l++) {
        double gb = c->levels[l].bandwidth_Bps * 8 / 1e9 * ldexp(1.0, wi->bw_exp[l]);
        int e = wi->bw_exp[l];
        char f[16] = "";
        if (e > 0) snprintf(f, sizeof f, " x%d", 1 << (e > 20 ? 20 : e));
        if (e < 0) snprintf(f, sizeof f, " /%d", 1 << (-e > 20 ? 20 : -e));
        int sel = l == st->view.level;
        snprintf(v, sizeof v, "%s %s%d:%s %g Gb/s%s%s", l ? "" : "bw", sel ? "[" : "", l + 1,
                 c->levels[l].name, gb, f, sel ? "]" : "");
        if ((int)strlen(v) > pen_room(&p)) break;
        if (!l) { /* the label in its own style */
            pen_text(&p, "bw", UI_ST_LABEL);
            memmove(v, v + 2, strlen(v + 2) + 1);
        }
        pen_text(&p, v, sel ? UI_ST_SELECT | UI_A_BOLD : e ? UI_ST_VALUE | UI_A_BOLD : UI_ST_VALUE);
    }
    pen_text(&p, p.gap > 1 ? "  " : " ", UI_ST_NORMAL);
    int narrow = w < 100; /* short labels keep every what-if on an 80-column row */
    if (wi->mem_limit_bytes > 0) snprintf(v, sizeof v, "%g GiB", gib(wi->mem_limit_bytes));
    else snprintf(v, sizeof v, "off");
    pen_field(&p, narrow ? "limit" : "mem limit", v,
              wi->mem_limit_bytes > 0 ? UI_ST_VALUE | UI_A_BOLD : UI_ST_VALUE);
    if (wi->straggler >= 0) snprintf(v, sizeof v, "d%d x%g", wi->straggler, wi->straggler_factor);
    else snprintf(v, sizeof v, "off");
    pen_field(&p, narrow ? "strag" : "straggler", v,
              wi->straggler >= 0 ? UI_ST_BAD | UI_A_BOLD : UI_ST_VALUE);
    if (st->layout3d) return; /* its recomputation is on the row already */
    if (wi->recompute == UI_RECOMPUTE_AUTO) /* the plan's own choice */
        snprintf(v, sizeof v, "auto (%s)", a->cur.pl && a->cur.pl->recompute ? "on" : "off");
    else
        snprintf(v, sizeof v, "%s", wi->recompute ? "on" : "off");
    if (!pen_field(&p, narrow ? "recomp" : "recompute", v,
                   wi->recompute == 1 ? UI_ST_VALUE | UI_A_BOLD : UI_ST_VALUE))
        return;
    snprintf(v, sizeof v, "%d", st->undo_n);
    pen_field(&p, "undo", v, UI_ST_DIM);
}

/* One runtime setting: its label (short on narrow rows), and the value the live plan runs,
 * "n/a" (dim) where the setting was asked for and the layout on screen cannot take it
 * (tp overlap at tp 1; the parameter all-gather apart at zero 0 or on an async schedule). */
static void runtime_field(pen *p, const char *label, const char *value, int asked, int taken)
{
    if (asked && !taken) pen_field(p, label, "n/a", UI_ST_DIM);
    else pen_field(p, label, value, asked ? UI_ST_VALUE | UI_A_BOLD : UI_ST_VALUE);
}

/* A setting that is on, one word: the long one where it fits, else the short one; dim
 * where the plan shown does not have it (taken 0). */
static void runtime_word(pen *p, const char *word, const char *brief, int taken)
{
    int style = taken ? UI_ST_VALUE | UI_A_BOLD : UI_ST_DIM;
    if (!pen_word(p, word, style)) pen_word(p, brief, style);
}

/* The word of a fused loss (cross_entropy te or native: "cross-entropy-te", short "ce-te"),
 * as the 3D and 2D runtime rows name it; nothing for the unfused default. */
static void loss_word(pen *p, int cross_entropy)
{
    if (!cross_entropy) return;
    char v[40], s[24];
    snprintf(v, sizeof v, "cross-entropy-%s", plan_cross_entropy_name(cross_entropy));
    snprintf(s, sizeof s, "ce-%s", plan_cross_entropy_name(cross_entropy));
    runtime_word(p, v, s, 1);
}

/* The word of the unfused gradient accumulation (grad_accum unfused: "grad-accum-unfused",
 * short "ga-unfused"), as both runtime rows name it; nothing for the fused default. */
static void grad_accum_word(pen *p, int grad_accum)
{
    if (grad_accum) runtime_word(p, "grad-accum-unfused", "ga-unfused", 1);
}

/* A transformer's runtime row: the settings of `plumb plan --model` that every layout the
 * keys reach runs with (the runtime keys change tp-overlap, overlap-param-gather, p2p,
 * grad-sync and attention; the live plan's where it has them): the option names from
 * UI_WIDE_W columns, short labels below (and below 100 columns, balancing's outcome as
 * "even" or the change alone), so that every field fits 80 columns. */
static void draw_runtime(ui_app *a, int x, int y, int w, ui_fb *fb)
{
    const search3d_options *rt = &a->base.rt;
    const ui_whatif *wi = &a->st->cur; /* the runtime keys' settings */
    const plan *pl = a->cur.pl;
    int wide = w >= UI_WIDE_W, narrow = w < 100;
    pen p = { fb, x, y, x + w, w >= 100 ? 2 : 1 };
    char v[64];
    if (wide) pen_text(&p, "runtime  ", UI_ST_TITLE);
    runtime_field(&p, wide ? "tp-overlap" : "tpo",
                  plan_tp_overlap_name((plan_tp_overlap)wi->tp_overlap),
                  wi->tp_overlap != TP_OVERLAP_NONE, !pl || (int)pl->tp_overlap == wi->tp_overlap);
    runtime_field(&p, wide ? "overlap-param-gather" : "opg", wi->opg ? "on" : "off", wi->opg,
                  !pl || pl->overlap_param_gather);
    runtime_field(&p, "p2p", wi->p2p_sync ? "sync" : "overlap", wi->p2p_sync, 1);
    if (wide && rt->precision == DEV_FP8) /* only then: the other rows read as before */
        runtime_field(&p, "precision", "fp8", 1, 1);
    runtime_field(&p, wide ? "grad-reduce" : "grad", dev_precision_name(rt->grad_reduce),
                  rt->grad_reduce != DEV_FP32, 1);
    runtime_field(&p, wide ? "optimizer-state" : "state",
                  dev_precision_name(rt->optimizer_state), rt->optimizer_state != DEV_FP32, 1);
    runtime_field(&p, wide ? "attention" : "attn", wi->attention ? "flash" : "standard",
                  wi->attention != 0, 1);
    const layout3d_balance_result *b = &a->cur.balance;
    if (!rt->balance) snprintf(v, sizeof v, "off");
    else if (!a->cur.balanced) snprintf(v, sizeof v, "on");
    else if (!b->changed) snprintf(v, sizeof v, narrow ? "even" : "on (even kept)");
    else snprintf(v, sizeof v, narrow ? "%+.1f%%" : "on (%+.1f%%)",
                  100 * (b->balanced_s / b->even_s - 1));
    runtime_field(&p, wide ? "balance" : "bal", v, rt->balance, 1);
    if (wi->grad_sync_end) /* only when asked (E, --grad-sync end): n/a on an asynchronous
                              schedule */
        runtime_field(&p, wide ? "grad-sync" : "gsync", "end", 1, !pl || pl->grad_sync_end);
    if (rt->p2p_whole) /* only when asked (--p2p-split whole): n/a with sequence parallelism
                          or tp 1, where the sends are one rank's share already */
        runtime_field(&p, wide ? "p2p-split" : "split", "whole", 1,
                      !pl || (pl->tp > 1 && !pl->sequence_parallel));
    /* only when on, one word each: FP8 primary weights and Megatron-Core's uneven split (a
     * layout string as the word pipeline-layout), which every layout keeps (a key that
     * would drop them is refused) */
    if (wi->fp8pg)
        runtime_word(&p, "fp8-param-gather", "fp8pg", !pl || pl->fp8_param_gather);
    const layout3d_options *lo = &a->base.lopt;
    char s[32];
    for (int i = 0; pplayout_split_word(&lo->split, i, 0, v, sizeof v); i++) {
        pplayout_split_word(&lo->split, i, 1, s, sizeof s);
        runtime_word(&p, v, s, 1);
    }
    if (lo->pipeline_layout) runtime_word(&p, "pipeline-layout", "pp-layout", 1);
    loss_word(&p, lo->cross_entropy); /* --cross-entropy te or native: every layout's loss */
    grad_accum_word(&p, lo->grad_accum); /* --grad-accum unfused: likewise */
}

/* 1 when the 2D view's header has a runtime row: a plan file whose "p2p", "grad_sync",
 * "overlap_param_gather", "zero" or "fp8_param_gather" is not the default (every what-if keeps them;
 * ui_base_whatif), or whose plan on screen has context parallelism (cp > 1), a fused loss
 * (cross_entropy te or native: its profile's, which every plan of it records) or the
 * unfused gradient accumulation (grad_accum unfused, likewise). */
static int runtime2d_row(const ui_state *st, const plan *pl)
{
    return st && !st->layout3d &&
           (st->cur.p2p_sync || st->cur.grad_sync_end || st->cur.opg || st->cur.zero ||
            st->cur.fp8pg || (pl && (pl->cp > 1 || pl->cross_entropy || pl->grad_accum)));
}

/* The 2D view's runtime row (runtime2d_row): the plan file's settings that ride every plan
 * shown, labelled as the 3D row labels them (the option names from UI_WIDE_W columns,
 * short below, so that the row fits 80): p2p, grad-sync, the all-gather apart ("n/a
 * (zero 0)" where the plan on screen has no ZeRO-1: the all-gather is ZeRO-1's; re-plans
 * keep the file's zero, ui_replan, so only a plan without it shows this), zero, the word
 * fp8-param-gather when the file has it, and the fused loss's word as the 3D row names it
 * (loss_word) when the plan shown has one. */
static void draw_runtime2d(ui_app *a, int x, int y, int w, ui_fb *fb)
{
    const ui_whatif *wi = &a->st->cur;
    const plan *pl = a->cur.pl;
    int wide = w >= UI_WIDE_W;
    pen p = { fb, x, y, x + w, w >= 100 ? 2 : 1 };
    if (wide) pen_text(&p, "runtime  ", UI_ST_TITLE);
    runtime_field(&p, "p2p", wi->p2p_sync ? "sync" : "overlap", wi->p2p_sync, 1);
    runtime_field(&p, wide ? "grad-sync" : "gsync", wi->grad_sync_end ? "end" : "overlap",
                  wi->grad_sync_end, !pl || pl->grad_sync_end == wi->grad_sync_end);
    if (wi->opg && pl && !pl->overlap_param_gather && !pl->zero)
        pen_field(&p, wide ? "overlap-param-gather" : "opg", "n/a (zero 0)", UI_ST_DIM);
    else
        runtime_field(&p, wide ? "overlap-param-gather" : "opg", wi->opg ? "on" : "off",
                      wi->opg, !pl || pl->overlap_param_gather);
    runtime_field(&p, "zero", wi->zero ? "1" : "0", wi->zero, !pl || pl->zero == wi->zero);
    if (pl && pl->cp > 1) { /* only then: the other rows read as before */
        char v[16];
        snprintf(v, sizeof v, "%d", pl->cp);
        runtime_field(&p, "cp", v, 1, 1);
    }
    if (wi->fp8pg) /* the file's FP8 primary weights: dim where the plan shown has none */
        runtime_word(&p, "fp8-param-gather", "fp8pg", !pl || pl->fp8_param_gather);
    if (pl) loss_word(&p, pl->cross_entropy);
    if (pl) grad_accum_word(&p, pl->grad_accum);
}

/* What the header adds after an asynchronous schedule's name (no flush: updates use
 * stale weights), or NULL for a flushing one. Short form for narrow screens. */
static const char *async_note(int kind, int narrow)
{
    const sched_traits *tr = sched_traits_of((sched_kind)kind);
    if (!tr || !tr->async) return NULL;
    if (narrow) return "async";
    return tr->versions == 2 ? "async: 2 weight versions" : "async: weight stashing";
}

static void draw_header(ui_app *a, ui_rect r, ui_fb *fb)
{
    pen p = { fb, r.x, r.y, r.x + r.w, 2 };
    char v[256];
    pen_text(&p, "plumb ui", UI_ST_TITLE | UI_A_BOLD | UI_A_REVERSE);
    pen_text(&p, "  ", UI_ST_NORMAL);
    if (!a->loaded) {
        pen_text(&p, "nothing loaded", UI_ST_BAD | UI_A_BOLD);
        ui_fb_text(fb, r.x, r.y + 1, r.w, "error:", UI_ST_BAD | UI_A_BOLD);
        ui_fb_text(fb, r.x + 7, r.y + 1, r.w - 7, a->load_err, UI_ST_BAD);
        ui_fb_text(fb, r.x, r.y + 2, r.w,
                   "q quits; plumb ui --help shows how to open a plan or a profile and cluster",
                   UI_ST_DIM);
        return;
    }
    const ui_whatif *w = &a->st->cur;
    const cluster *c = a->cur.pl ? a->cur.pl->clus : a->base.clus;
    const device_type *t = cluster_device_type(c, 0);
    snprintf(v, sizeof v, "%s on %s", a->base.prof->name, a->base.clus->name);
    pen_text(&p, v, UI_ST_VALUE | UI_A_BOLD);
    snprintf(v, sizeof v, "  %s", sched_kind_name((sched_kind)w->schedule));
    pen_text(&p, v, UI_ST_SELECT | UI_A_BOLD);
    const char *async = async_note(w->schedule, r.w < 120);
    if (async) {
        snprintf(v, sizeof v, " (%s)", async);
        pen_text(&p, v, UI_ST_SELECT);
    }
    if (a->cur.pl) {
        snprintf(v, sizeof v, "  mb %dx%d  %d stages (%s)", a->cur.pl->microbatches,
                 a->cur.pl->microbatch_size, a->cur.pl->nstages, a->cur.origin);
        pen_text(&p, v, UI_ST_VALUE);
    }
    snprintf(v, sizeof v, "  %s%s", t ? t->name : "?", c->ntypes > 1 ? " (mixed)" : "");
    if (pen_room(&p) > (int)strlen(v) + 10) pen_text(&p, v, UI_ST_VALUE);
    char tm[32];
    if (a->pending) /* the figures below are the layout before; the new one is coming */
        snprintf(v, sizeof v, " laying out and simulating ...");
    else
        snprintf(v, sizeof v, " plan+sim %s%s", ui_fmt_time(a->cur.eval_ms / 1e3, tm, sizeof tm),
                 a->cur.reused ? " (kept)" : "");
    if (pen_room(&p) > (int)strlen(v) + 1)
        ui_fb_text(fb, r.x + r.w - (int)strlen(v), r.y, (int)strlen(v), v, UI_ST_DIM);

    int y = r.y + 1;
    draw_figures(fb, r.x, y++, r.w, a->st->pinned ? "live" : NULL, &a->cur);
    if (a->st->pinned) {
        draw_figures(fb, r.x, y++, r.w, "pin", &a->pin);
        draw_diff(fb, r.x, y++, r.w, &a->cur, &a->pin);
    }
    draw_whatifs(a, r.x, y, r.w, fb);
    if (a->st->layout3d) draw_runtime(a, r.x, y + 1, r.w, fb);
    else if (runtime2d_row(a->st, a->cur.pl)) draw_runtime2d(a, r.x, y + 1, r.w, fb);
}

/* ---- stage table ------------------------------------------------------------------- */

static int stage_of_device(const plan *pl, int dev)
{
    for (int s = 0; s < pl->nstages; s++)
        for (int j = 0; j < pl->stages[s].replicas; j++)
            if (pl->stages[s].devices[j] == dev) return s;
    return -1;
}

int ui_draw_panel_open(ui_fb *fb, ui_rect r, const char *title, const ui_result *res)
{
    ui_fb_box(fb, r.x, r.y, r.w, r.h, title, UI_ST_BORDER);
    if (r.w < 12 || r.h < 4) return 0;
    if (res->pl && res->rep) return 1;
    ui_fb_text(fb, r.x + 2, r.y + 1, r.w - 3, res->err[0] ? res->err : "no plan", UI_ST_BAD);
    return 0;
}

static void draw_stages(ui_fb *fb, ui_rect r, const char *title, const ui_result *res,
                        int sel_device)
{
    if (!ui_draw_panel_open(fb, r, title, res)) return;
    int x = r.x + 1, w = r.w - 2, y = r.y + 1, rows = r.h - 3;
    const plan *pl = res->pl;
    const sim_report *rep = res->rep;
    int devw = w >= 120 ? 24 : 11;
    int barw = w - (3 + 1 + 9 + 1 + 3 + 1 + devw + 1 + 9 + 1 + 9 + 1 + 13 + 1);
    char hdr[256];
    snprintf(hdr, sizeof hdr, "%3s %-9s %3s %-*s %9s %9s %13s %s", "st", "layers", "rep", devw,
             "devices", "F+B ms/mb", "comm ms/it", "mem GiB",
             barw >= 18 ? "load (busy / max)" : barw >= 8 ? "load" : "");
    ui_fb_text(fb, x, y, w, hdr, UI_ST_LABEL | UI_A_BOLD);
    double maxbusy = 0;
    for (int i = 0; i < rep->ndevices; i++)
        if (rep->devices[i].busy_s > maxbusy) maxbusy = rep->devices[i].busy_s;
    int sel = stage_of_device(pl, sel_device);
    int top = 0;
    if (pl->nstages > rows) {
        top = sel - rows / 2;
        if (top > pl->nstages - rows) top = pl->nstages - rows;
        if (top < 0) top = 0;
    }
    for (int i = 0; i < rows && top + i < pl->nstages; i++) {
        int s = top + i;
        const plan_stage *ps = &pl->stages[s];
        const sim_stage_report *sr = s < rep->nstages ? &rep->stages[s] : NULL;
        const sim_device_report *d = sim_report_device(rep, ps->devices[0]);
        /* memory: the stage's fullest replica (replicas hold different slot counts) */
        const sim_device_report *dm = d;
        for (int j = 1; j < ps->replicas; j++) {
            const sim_device_report *o = sim_report_device(rep, ps->devices[j]);
            if (o && (!dm || o->mem.total > dm->mem.total)) dm = o;
        }
        char layers[32], devs[64], fb_ms[32], comm[32], mem[48], a1[16], a2[16], line[256];
        snprintf(layers, sizeof layers, "%d-%d", ps->first_layer, ps->last_layer);
        ui_fmt_devices(ps->devices, ps->replicas, devs, (size_t)devw + 1);
        double fbs = sr ? sr->forward_s + (sr->backward_s > 0 ? sr->backward_s
                                                               : sr->input_grad_s + sr->weight_grad_s)
                        : 0;
        snprintf(fb_ms, sizeof fb_ms, "%.2f", fbs * 1e3);
        snprintf(comm, sizeof comm, "%.2f", d ? d->comm_s * 1e3 : 0);
        if (dm)
            snprintf(mem, sizeof mem, "%s/%s%s", ui_fmt_gib(dm->mem.total, a1, sizeof a1),
                     ui_fmt_gib(dm->mem.capacity, a2, sizeof a2), dm->mem.fits ? "" : "!");
        else
            snprintf(mem, sizeof mem, "-");
        snprintf(line, sizeof line, "%3d %-9s %3d %-*s %9s %9s %13s ", s, layers, ps->replicas,
                 devw, devs, fb_ms, comm, mem);
        int yy = y + 1 + i, style = s == sel ? UI_ST_SELECT : UI_ST_NORMAL;
        int n = ui_fb_text(fb, x, yy, w, line, style);
        if (d && !d->mem.fits) {
            int mx = x + 3 + 1 + 9 + 1 + 3 + 1 + devw + 1 + 9 + 1 + 9 + 1;
            ui_fb_text(fb, mx, yy, 13, line + (mx - x), UI_ST_BAD | UI_A_BOLD);
        }
        if (barw >= 8 && d) {
            double f = maxbusy > 0 ? d->busy_s / maxbusy : 0;
            int bw = barw - 5, k = (int)lround(f * bw);
            for (int j = 0; j < bw; j++)
                ui_fb_put(fb, x + n + j, yy, j < k ? UI_CH_BLOCK : ' ',
                          j < k ? UI_ST_BAR : UI_ST_DIM);
            ui_fb_printf(fb, x + n + bw, yy, 5, UI_ST_VALUE, "%4.0f%%", 100 * f);
        }
    }
    if (pl->nstages > rows) {
        char more[48];
        snprintf(more, sizeof more, " %d-%d of %d ", top, top + rows - 1, pl->nstages);
        ui_fb_text(fb, r.x + r.w - 2 - (int)strlen(more), r.y + r.h - 1, (int)strlen(more), more,
                   UI_ST_DIM);
    }
}

/* ---- timeline ---------------------------------------------------------------------- */

static int kind_letter(int k)
{
    switch (k) {
    case TL_F: return 'F';
    case TL_B: return 'B';
    case TL_I: return 'I';
    case TL_W: return 'W';
    case TL_STEP: return 'S';
    default: return '?';
    }
}

/* One row's painting: for each column, the event covering most of it and by how much. */
typedef struct rowpaint {
    double *cover;  /* [rows][cols] the best event's share of the column */
    double *busy;   /* [rows][cols] the share covered by any compute event */
    int *ev;        /* [rows][cols] the best event, -1 for none */
} rowpaint;

static void draw_timeline(ui_fb *fb, ui_rect r, const char *title, const ui_result *res,
                          ui_view *v, double total_s, int straggler, int follow)
{
    ui_fb_box(fb, r.x, r.y, r.w, r.h, title, UI_ST_BORDER);
    int x = r.x + 1, w = r.w - 2, y = r.y + 1, rows = r.h - 3;
    if (w < 10 || rows < 1) return;
    if (!res->rep || !res->rep->tl) {
        ui_fb_text(fb, x + 1, y, w - 1, res->err[0] ? res->err : "no timeline", UI_ST_BAD);
        return;
    }
    const sim_report *rep = res->rep;
    const timeline *tl = rep->tl;
    int nd = rep->ndevices;
    ui_view local = *v;
    ui_view *vv = follow ? v : &local;
    int *ids = malloc(((size_t)nd + 1) * sizeof *ids);
    if (!ids) return;
    for (int i = 0; i < nd; i++) ids[i] = rep->devices[i].device;
    ui_view_follow(vv, ids, nd, rows);
    free(ids);
    int labw = 1;
    for (int m = rep->ndevices > 0 ? rep->devices[nd - 1].device : 0; m > 0; m /= 10) labw++;
    labw += 3; /* marker, 'd', digits, mark, space */
    int tw = w - labw;
    if (tw < 4) return;
    double span = total_s * ldexp(1.0, -v->zoom), t0 = total_s * v->offset;
    if (!(span > 0)) span = 1;
    double col_s = span / tw;

    /* track of each visible row */
    int nrows = rows < nd - vv->top ? rows : nd - vv->top;
    if (nrows < 0) nrows = 0;
    int *track = malloc(((size_t)nrows + 1) * sizeof *track);
    rowpaint rp = { calloc((size_t)nrows * tw + 1, sizeof(double)),
                    calloc((size_t)nrows * tw + 1, sizeof(double)),
                    malloc(((size_t)nrows * tw + 1) * sizeof(int)) };
    if (!track || !rp.cover || !rp.busy || !rp.ev) goto done;
    for (int i = 0; i < nrows * tw; i++) rp.ev[i] = -1;
    for (int i = 0; i < nrows; i++) {
        track[i] = -1;
        int dev = rep->devices[vv->top + i].device;
        for (int k = 0; k < tl->ntracks; k++)
            if (tl->tracks[k].kind == TL_TRACK_DEVICE && tl->tracks[k].device == dev) {
                track[i] = k;
                break;
            }
    }
    for (size_t e = 0; e < tl->n; e++) {
        const tl_event *ev = &tl->ev[e];
        if (ev->kind > TL_STEP) continue;
        int row = -1;
        for (int i = 0; i < nrows; i++)
            if (track[i] == ev->track) {
                row = i;
                break;
            }
        if (row < 0) continue;
        double a = (ev->start_s - t0) / col_s, b = (ev->start_s + ev->dur_s - t0) / col_s;
        if (!(b > 0) || !(a < tw)) continue; /* NaN too: never an index */
        int c0 = a < 0 ? 0 : (int)a, c1 = b > tw ? tw - 1 : (int)ceil(b) - 1;
        for (int c = c0; c <= c1; c++) {
            double lo = a > c ? a : c, hi = b < c + 1 ? b : c + 1, cov = hi - lo;
            size_t k = (size_t)row * tw + c;
            rp.busy[k] += cov;
            if (cov > rp.cover[k]) {
                rp.cover[k] = cov;
                rp.ev[k] = (int)e;
            }
        }
    }
    for (int i = 0; i < nrows; i++) {
        const sim_device_report *d = &rep->devices[vv->top + i];
        int yy = y + i, sel = d->device == v->device, strag = d->device == straggler;
        char lab[32];
        snprintf(lab, sizeof lab, "%cd%d%c", sel ? '>' : ' ', d->device, strag ? '!' : ' ');
        ui_fb_text(fb, x, yy, labw, lab,
                   strag ? UI_ST_BAD | UI_A_BOLD : sel ? UI_ST_SELECT | UI_A_BOLD : UI_ST_LABEL);
        for (int c = 0; c < tw;) {
            size_t k = (size_t)i * tw + c;
            int e = rp.ev[k];
            if (e < 0) {
                ui_fb_put(fb, x + labw + c, yy, '.', UI_ST_DIM);
                c++;
                continue;
            }
            if (rp.busy[k] < 0.5) { /* mostly idle: the main action in lower case */
                ui_fb_put(fb, x + labw + c, yy, kind_letter(tl->ev[e].kind) - 'A' + 'a',
                          UI_ST_DIM);
                c++;
                continue;
            }
            int run = 1;
            while (c + run < tw && rp.ev[k + run] == e && rp.busy[k + run] >= 0.5) run++;
            const tl_event *ev = &tl->ev[e];
            char txt[32];
            if (ev->kind == TL_STEP) snprintf(txt, sizeof txt, "S");
            else snprintf(txt, sizeof txt, "%c%d", kind_letter(ev->kind), ev->microbatch);
            int style = ev->kind == TL_STEP ? UI_ST_DIM | UI_A_BOLD
                        : UI_ST_MB0 + (ev->microbatch < 0 ? 0 : ev->microbatch % UI_NMBCOLORS);
            if (ev->kind == TL_B || ev->kind == TL_I) style |= UI_A_REVERSE;
            if (ev->kind == TL_W || ev->kind == TL_I) style |= UI_A_BOLD;
            int tl_len = (int)strlen(txt);
            /* wide enough: "F12" then blanks; else the letter repeated */
            for (int j = 0; j < run; j++)
                ui_fb_put(fb, x + labw + c + j, yy,
                          run < tl_len ? txt[0] : j < tl_len ? txt[j] : ' ', style);
            c += run;
        }
    }
    /* time axis: a tick and its time every ~16 columns */
    {
        int yy = r.y + r.h - 2;
        ui_fb_text(fb, x, yy, labw, " time", UI_ST_DIM);
        int step = tw >= 64 ? 16 : 12;
        for (int c = 0; c + 1 < tw; c += step) {
            char tm[32];
            ui_fmt_time(t0 + c * col_s, tm, sizeof tm);
            ui_fb_put(fb, x + labw + c, yy, '|', UI_ST_DIM);
            if (c + 1 + (int)strlen(tm) < tw && (int)strlen(tm) < step)
                ui_fb_text(fb, x + labw + c + 1, yy, (int)strlen(tm), tm, UI_ST_DIM);
        }
    }
    if (nd > rows) {
        char more[48];
        snprintf(more, sizeof more, " devices %d-%d of %d ", vv->top, vv->top + nrows - 1, nd);
        ui_fb_text(fb, r.x + r.w - 2 - (int)strlen(more), r.y + r.h - 1, (int)strlen(more), more,
                   UI_ST_DIM);
    }
done:
    free(track);
    free(rp.cover);
    free(rp.busy);
    free(rp.ev);
}

/* ---- status line and overlays ------------------------------------------------------ */

/* The note of the last key (if any), then the keys that fit whole in the rest, most
 * useful first (ui_layout_keys_line); a long note leaves room for "q quit  ? help". */
static void draw_status(ui_app *a, ui_rect r, ui_fb *fb)
{
    ui_fb_fill(fb, r.x, r.y, r.w, 1, ' ', UI_ST_STATUS);
    int n, x = r.x;
    const ui_key_label *keys = ui_layout_keys(a->st->layout3d, &n);
    if (a->msg[0]) {
        char first[64]; /* "q quit  ? help" */
        ui_layout_keys_line(keys, 2, r.w, first, sizeof first);
        int room = r.w - 2 - (int)strlen(first);
        x += ui_fb_text(fb, x, r.y, room > 0 ? room : r.w, a->msg,
                        a->msg_err ? UI_ST_BAD | UI_A_BOLD : UI_ST_GOOD | UI_A_BOLD);
        x += ui_fb_text(fb, x, r.y, r.x + r.w - x, "  ", UI_ST_STATUS);
    }
    char line[512];
    ui_layout_keys_line(keys, n, r.x + r.w - x, line, sizeof line);
    ui_fb_text(fb, x, r.y, r.x + r.w - x, line, UI_ST_STATUS);
}

static void draw_help(ui_rect r, ui_fb *fb, int layout3d)
{
    const char *const *help = layout3d ? HELP3D : HELP;
    int n = layout3d ? NHELP3D : NHELP;
    ui_fb_fill(fb, r.x, r.y, r.w, r.h, ' ', UI_ST_NORMAL);
    ui_fb_box(fb, r.x, r.y, r.w, r.h, "help", UI_ST_BORDER);
    for (int i = 0; i < n && i < r.h - 2; i++)
        ui_fb_text(fb, r.x + 2, r.y + 1 + i, r.w - 4, help[i], i == 0 ? UI_ST_TITLE | UI_A_BOLD
                                                                      : UI_ST_NORMAL);
}

/* Rows the stage panel wants: a 3D layout's pipeline ranks, else the stages. */
static int panel_rows(const plan *pl, int layout3d)
{
    if (!pl) return 0;
    return layout3d && pl->chunks > 1 ? pl->nstages / pl->chunks : pl->nstages;
}

void ui_app_layout(const ui_app *a, int w, int h, ui_layout *L)
{
    int l3 = a->st && a->st->layout3d;
    ui_layout_in in = { w, h, panel_rows(a->cur.pl, l3),
                        a->cur.rep ? a->cur.rep->ndevices : 0, a->loaded && a->st->pinned,
                        a->st ? a->st->view.help : 0, l3 ? NHELP3D : NHELP,
                        a->loaded && (l3 || runtime2d_row(a->st, a->cur.pl)) };
    ui_layout_compute(&in, L);
}

/* A 3D layout's memory panels (live, and pinned beside it when wide). */
static void draw_panel_3d(ui_app *a, const ui_layout *L, ui_fb *fb)
{
    char t[96];
    snprintf(t, sizeof t, "%s%s", L->stages.w >= 100 ? "memory per pipeline rank (its first "
             "device)" : "memory per pipeline rank", a->st->pinned ? " (live)" : "");
    ui_draw_memory(fb, L->stages, t, &a->cur, a->st->view.device);
    if (ui_rect_present(L->pstages))
        ui_draw_memory(fb, L->pstages, "memory (pinned)", &a->pin, a->st->view.device);
}

void ui_draw(ui_app *a, const ui_layout *L, ui_fb *fb)
{
    ui_fb_clear(fb);
    if (L->too_small) {
        ui_rect m = L->message;
        char t[128];
        snprintf(t, sizeof t, "terminal too small: %dx%d (plumb ui needs %dx%d); q quits",
                 fb->w, fb->h, UI_MIN_W, UI_MIN_H);
        for (int i = 0, y = m.y; y < m.y + m.h && i < (int)strlen(t); y++, i += m.w)
            ui_fb_text(fb, m.x, y, m.w, t + i, UI_ST_BAD | UI_A_BOLD);
        return;
    }
    draw_header(a, L->header, fb);
    if (a->loaded) {
        int pinned = a->st->pinned;
        double total = a->cur.rep ? a->cur.rep->makespan_s : 0;
        if (pinned && a->pin.rep && (ui_rect_present(L->ptimeline)) &&
            a->pin.rep->makespan_s > total)
            total = a->pin.rep->makespan_s;
        char t[160];
        if (a->st->layout3d) {
            draw_panel_3d(a, L, fb);
        } else {
            draw_stages(fb, L->stages, pinned ? "stages (live)" : "stages", &a->cur,
                        a->st->view.device);
            if (ui_rect_present(L->pstages))
                draw_stages(fb, L->pstages, "stages (pinned)", &a->pin, a->st->view.device);
        }
        char sp[32], z[32];
        snprintf(z, sizeof z, "%d", 1 << a->st->view.zoom);
        snprintf(t, sizeof t, "timeline%s: %d iterations, %s shown, zoom x%s",
                 pinned ? " (live)" : "", a->cur.rep ? a->cur.rep->iterations : 0,
                 ui_fmt_time(total * ldexp(1.0, -a->st->view.zoom), sp, sizeof sp), z);
        draw_timeline(fb, L->timeline, t, &a->cur, &a->st->view, total, a->st->cur.straggler, 1);
        if (ui_rect_present(L->ptimeline))
            draw_timeline(fb, L->ptimeline, "timeline (pinned)", &a->pin, &a->st->view, total,
                          a->st->pin.straggler, 0);
    } else {
        ui_fb_box(fb, L->stages.x, L->stages.y, L->stages.w, L->stages.h, "stages", UI_ST_BORDER);
        ui_fb_box(fb, L->timeline.x, L->timeline.y, L->timeline.w, L->timeline.h, "timeline",
                  UI_ST_BORDER);
    }
    draw_status(a, L->status, fb);
    if (ui_rect_present(L->help)) draw_help(L->help, fb, a->loaded && a->st->layout3d);
}
