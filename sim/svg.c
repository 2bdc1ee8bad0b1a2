/* svg.c: the simulator's SVG timeline. One row per device of the plan's cluster, labelled
 * with the stages it runs (idle devices too, consecutive ones folded into one row), its
 * compute as blocks coloured by microbatch (10 hues, microbatch mod 10) and shaded by kind
 * (F light, B dark, I full colour, W light and hatched), labelled when wide enough, its
 * all-reduces as a hatched strip along the bottom; below, one thin row per stage boundary
 * that carried transfers (activations in its top half, gradients in its bottom half, over
 * all the links between the two stages); a time axis with its unit and a legend of the
 * kinds the run has, each swatch drawn as the blocks are. Classes on the rows, blocks and
 * legend entries let tests check the structure (tests/test_svg.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "core/svg.h"
#include "sim/sim.h"

/* 10 distinguishable hues (RGB), one per microbatch mod 10. */
static const unsigned char palette[10][3] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189},
    {140, 86, 75}, {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207},
};

/* The fill of a block: the microbatch's hue mixed toward white (F, W) or black (B). */
static void fill_of(int kind, int mb, char *out, size_t n, int *dark)
{
    const unsigned char *c = palette[(mb < 0 ? 0 : mb) % 10];
    double mix = 0, toward = 255; /* fraction toward `toward` */
    switch (kind) {
    case TL_F: mix = 0.55; break;
    case TL_B: mix = 0.30; toward = 0; break;
    case TL_I: mix = 0.0; break;
    case TL_W: mix = 0.25; break;
    default: mix = 0.6; break;
    }
    int rgb[3];
    for (int i = 0; i < 3; i++)
        rgb[i] = (int)lround(c[i] + (toward - c[i]) * mix);
    snprintf(out, n, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
    *dark = lum < 120;
}

enum { LM = 200, PW = 1100, RM = 40, TOP = 58, RH = 30, IH = 18, CH = 20, GAP = 6 };
enum { ROW_DEVICE, ROW_IDLE, ROW_CUT };

typedef struct svg_row {
    int type;
    int track;          /* ROW_DEVICE: its compute track */
    int a, b;           /* ROW_IDLE: devices a..b; ROW_CUT: stages a < b */
    int nxfer, nlinks;  /* ROW_CUT: transfers drawn, links they used */
    double y, h;
} svg_row;

typedef struct svg_rows {
    int n;
    svg_row *row;
    int *dev_row;       /* [ntracks] row of a device or collective track, else -1 */
} svg_rows;

static int is_xfer(const timeline *tl, const tl_event *e)
{
    return (e->kind == TL_SEND_F || e->kind == TL_SEND_B) && e->track >= 0 &&
           e->track < tl->ntracks && tl->tracks[e->track].kind == TL_TRACK_LINK;
}

/* (stage pair, link track) of a transfer, sorted to count links per pair. */
typedef struct pair_link {
    int a, b, track;
} pair_link;

static int cmp_pair(const void *x, const void *y)
{
    const pair_link *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    return (p->track > q->track) - (p->track < q->track);
}

/* The device rows (idle runs folded) in device order, then the stage-boundary rows. */
static int build_rows(const sim_report *r, svg_rows *R)
{
    const timeline *tl = r->tl;
    int maxdev = r->devices_total;
    for (int i = 0; i < tl->ntracks; i++)
        if (tl->tracks[i].device + 1 > maxdev) maxdev = tl->tracks[i].device + 1;
    int *track_of = malloc(((size_t)maxdev + 1) * sizeof *track_of);
    pair_link *pl = malloc((tl->n + 1) * sizeof *pl);
    R->dev_row = malloc(((size_t)tl->ntracks + 1) * sizeof *R->dev_row);
    R->row = malloc(((size_t)maxdev + tl->n + 1) * sizeof *R->row);
    R->n = 0;
    if (!track_of || !pl || !R->dev_row || !R->row) {
        free(track_of), free(pl);
        return -1;
    }
    for (int d = 0; d < maxdev; d++) track_of[d] = -1;
    for (int i = 0; i < tl->ntracks; i++)
        if (tl->tracks[i].kind == TL_TRACK_DEVICE && tl->tracks[i].device >= 0)
            track_of[tl->tracks[i].device] = i;
    for (int d = 0; d < maxdev; d++) {
        if (track_of[d] >= 0) {
            R->row[R->n++] = (svg_row){.type = ROW_DEVICE, .track = track_of[d], .h = RH};
        } else if (R->n > 0 && R->row[R->n - 1].type == ROW_IDLE) {
            R->row[R->n - 1].b = d;
        } else {
            R->row[R->n++] = (svg_row){.type = ROW_IDLE, .a = d, .b = d, .h = IH};
        }
    }
    for (int i = 0; i < tl->ntracks; i++) {
        R->dev_row[i] = -1;
        int d = tl->tracks[i].device;
        if (tl->tracks[i].kind != TL_TRACK_LINK && d >= 0 && d < maxdev && track_of[d] >= 0)
            for (int j = 0; j < R->n; j++)
                if (R->row[j].type == ROW_DEVICE && R->row[j].track == track_of[d])
                    R->dev_row[i] = j;
    }
    size_t np = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (!is_xfer(tl, e)) continue;
        int a = e->stage < e->peer_stage ? e->stage : e->peer_stage;
        int b = e->stage < e->peer_stage ? e->peer_stage : e->stage;
        pl[np++] = (pair_link){a, b, e->track};
    }
    qsort(pl, np, sizeof *pl, cmp_pair);
    for (size_t i = 0; i < np; i++) {
        int fresh = i == 0 || pl[i].a != pl[i - 1].a || pl[i].b != pl[i - 1].b;
        if (fresh)
            R->row[R->n++] = (svg_row){.type = ROW_CUT, .a = pl[i].a, .b = pl[i].b, .h = CH};
        svg_row *c = &R->row[R->n - 1];
        c->nxfer++;
        c->nlinks += fresh || pl[i].track != pl[i - 1].track;
    }
    double y = TOP;
    for (int j = 0; j < R->n; j++) {
        if (j > 0 && R->row[j].type == ROW_CUT && R->row[j - 1].type != ROW_CUT) y += 10;
        R->row[j].y = y;
        y += R->row[j].h + GAP;
    }
    free(track_of), free(pl);
    return 0;
}

/* The cut row of stages (a, b), or -1. */
static int cut_row(const svg_rows *R, int a, int b)
{
    for (int j = 0; j < R->n; j++)
        if (R->row[j].type == ROW_CUT && R->row[j].a == a && R->row[j].b == b) return j;
    return -1;
}

/* "stage 3", "stages 0, 4" for device d (from the report), or "" when it runs none. */
static void stages_text(const sim_report *r, int d, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < r->ndevices; i++) {
        const sim_device_report *dr = &r->devices[i];
        if (dr->device != d) continue;
        int k = dr->nstages < SIM_DEVICE_STAGES ? dr->nstages : SIM_DEVICE_STAGES;
        size_t len = (size_t)snprintf(buf, n, "stage%s ", k > 1 ? "s" : "");
        for (int j = 0; j < k && len + 12 < n; j++)
            len += (size_t)snprintf(buf + len, n - len, "%s%d", j ? ", " : "", dr->stages[j]);
    }
}

static void draw_rows(sbuf *b, const sim_report *r, const svg_rows *R)
{
    const timeline *tl = r->tl;
    char st[256];
    for (int j = 0; j < R->n; j++) {
        const svg_row *w = &R->row[j];
        if (w->type == ROW_DEVICE) {
            const tl_track *t = &tl->tracks[w->track];
            stages_text(r, t->device, st, sizeof st);
            sbuf_printf(b, "<rect class=\"row device\" data-device=\"%d\" x=\"%d\" y=\"%.1f\" "
                        "width=\"%d\" height=\"%.0f\" fill=\"#f3f3f3\"/>\n", t->device, LM, w->y,
                        PW, w->h);
            sbuf_printf(b, "<text class=\"row-label stage\" x=\"%d\" y=\"%.1f\" font-size=\"12\" "
                        "font-weight=\"bold\" text-anchor=\"end\">%s</text>\n", LM - 8, w->y + 13,
                        st[0] ? st : "no stage");
            sbuf_printf(b, "<text class=\"row-label device\" x=\"%d\" y=\"%.1f\" font-size=\"10\" "
                        "fill=\"#555555\" text-anchor=\"end\">", LM - 8, w->y + 25);
            svg_escape(b, t->name);
            sbuf_printf(b, "</text>\n");
        } else if (w->type == ROW_IDLE) {
            if (w->a == w->b) snprintf(st, sizeof st, "device %d idle", w->a);
            else snprintf(st, sizeof st, "devices %d-%d idle (%d)", w->a, w->b, w->b - w->a + 1);
            sbuf_printf(b, "<rect class=\"row idle\" data-devices=\"%d-%d\" x=\"%d\" y=\"%.1f\" "
                        "width=\"%d\" height=\"%.0f\" fill=\"#fafafa\" stroke=\"#dddddd\" "
                        "stroke-dasharray=\"3 3\"/>\n", w->a, w->b, LM, w->y, PW, w->h);
            sbuf_printf(b, "<text class=\"row-label idle\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                        "fill=\"#777777\" text-anchor=\"end\">%s</text>\n", LM - 8, w->y + 13, st);
            sbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" fill=\"#999999\" "
                        "text-anchor=\"middle\">no stage: idle for the whole run</text>\n",
                        LM + PW / 2, w->y + 13);
        } else {
            sbuf_printf(b, "<rect class=\"row cut\" data-stages=\"%d-%d\" data-transfers=\"%d\" "
                        "x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.0f\" fill=\"#f6f6fa\"/>\n",
                        w->a, w->b, w->nxfer, LM, w->y, PW, w->h);
            sbuf_printf(b, "<text class=\"row-label cut\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"end\">stage %d \xe2\x86\x94 %d, %d link%s</text>\n",
                        LM - 8, w->y + 14, w->a, w->b, w->nlinks, w->nlinks == 1 ? "" : "s");
        }
    }
}

/* Draws every event; sets bit k of *kinds for each tl_kind drawn, and *maxmb. */
static void draw_events(sbuf *b, const timeline *tl, const svg_rows *R, double T,
                        unsigned *kinds, int *maxmb)
{
    char fill[16], label[32];
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (e->track < 0 || e->track >= tl->ntracks) continue;
        const tl_track *t = &tl->tracks[e->track];
        double x = LM + e->start_s / T * PW, w = e->dur_s / T * PW;
        int dark;
        if (t->kind == TL_TRACK_LINK) {
            if (!is_xfer(tl, e)) continue; /* ring hops: the device rows' all-reduce strip */
            int a = e->stage < e->peer_stage ? e->stage : e->peer_stage;
            int j = cut_row(R, a, e->stage < e->peer_stage ? e->peer_stage : e->stage);
            if (j < 0) continue;
            int grad = e->kind == TL_SEND_B;
            fill_of(grad ? TL_B : TL_F, e->microbatch, fill, sizeof fill, &dark);
            sbuf_printf(b, "<rect class=\"b %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                        "height=\"%d\" fill=\"%s\"/>\n", tl_kind_name(e->kind), x,
                        R->row[j].y + (grad ? CH / 2 : 0), w < 0.5 ? 0.5 : w, CH / 2, fill);
            *kinds |= 1u << e->kind;
            continue;
        }
        int j = R->dev_row[e->track];
        if (j < 0) continue;
        double y = R->row[j].y;
        *kinds |= 1u << e->kind;
        if (t->kind == TL_TRACK_COLLECTIVE) {
            sbuf_printf(b, "<rect class=\"b allreduce\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                        "height=\"6\" fill=\"url(#hatchdark)\" stroke=\"#333333\" "
                        "stroke-width=\"0.5\"/>\n", x, y + RH - 6, w < 0.5 ? 0.5 : w);
            continue;
        }
        if (e->kind == TL_STEP) {
            sbuf_printf(b, "<rect class=\"b step\" x=\"%.2f\" y=\"%.1f\" width=\"1.5\" "
                        "height=\"%d\" fill=\"#000000\"/>\n", x, y, RH);
            continue;
        }
        if (e->microbatch > *maxmb) *maxmb = e->microbatch;
        fill_of(e->kind, e->microbatch, fill, sizeof fill, &dark);
        sbuf_printf(b, "<rect class=\"b %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                    "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"0.4\"/>\n",
                    tl_kind_name(e->kind), x, y, w < 0.3 ? 0.3 : w, RH - 7, fill);
        if (e->kind == TL_W)
            sbuf_printf(b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                        "fill=\"url(#hatch)\"/>\n", x, y, w, RH - 7);
        if (w >= 18) {
            snprintf(label, sizeof label, "%s%d", tl_kind_name(e->kind), e->microbatch);
            sbuf_printf(b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                        "fill=\"%s\">%s</text>\n", x + w / 2, y + (RH - 7) / 2.0 + 3.5,
                        dark ? "#ffffff" : "#000000", label);
        }
    }
}

/* A legend swatch of `kind` as its blocks look: three stripes, microbatches 0, 1, 2. */
static void swatch(sbuf *b, int kind, double x, double y)
{
    char fill[16];
    int dark;
    for (int m = 0; m < 3; m++) {
        fill_of(kind, m, fill, sizeof fill, &dark);
        sbuf_printf(b, "<rect class=\"swatch %s\" x=\"%.1f\" y=\"%.1f\" width=\"10\" "
                    "height=\"14\" fill=\"%s\"/>\n", tl_kind_name(kind), x + 10 * m, y, fill);
    }
    if (kind == TL_W)
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"30\" height=\"14\" "
                    "fill=\"url(#hatch)\"/>\n", x, y);
}

/* The legend of the kinds drawn (bits of `kinds`) and the microbatch hues. */
static void draw_legend(sbuf *b, double ly, unsigned kinds, int nhues)
{
    static const char *const what[] = { "F forward (light)", "B backward (dark)",
                                        "I input gradient (full colour)",
                                        "W weight gradient (light, hatched)" };
    double lx = LM;
    for (int k = TL_F; k <= TL_W; k++) {
        if (!(kinds & (1u << k))) continue;
        swatch(b, k, lx, ly - 11);
        sbuf_printf(b, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n",
                    lx + 36, ly, what[k]);
        lx += 36 + 7.2 * strlen(what[k]) + 18;
    }
    if (kinds & (1u << TL_STEP)) {
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"3\" height=\"14\" fill=\"#000000\"/>"
                    "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">optimizer "
                    "step</text>\n", lx, ly - 11, lx + 10, ly);
        lx += 130;
    }
    if (kinds & (1u << TL_ALLREDUCE)) {
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"6\" "
                    "fill=\"url(#hatchdark)\" stroke=\"#333333\" stroke-width=\"0.5\"/><text "
                    "class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">all-reduce</text>\n",
                    lx, ly - 6, lx + 28, ly);
    }
    ly += 26;
    sbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">colour = microbatch mod 10:</text>\n",
                LM, ly);
    int back = kinds & (1u << TL_B) ? TL_B : TL_I;
    for (int m = 0; m < nhues; m++) { /* each hue as its forward and backward blocks */
        char f1[16], f2[16];
        int dark;
        fill_of(TL_F, m, f1, sizeof f1, &dark);
        fill_of(back, m, f2, sizeof f2, &dark);
        double x = LM + 190 + m * 46;
        sbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%d</text>"
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n",
                    x + 8, ly, m, x + 11, ly - 11, f1, x + 25, ly - 11, f2);
    }
    if (kinds & ((1u << TL_SEND_F) | (1u << TL_SEND_B)))
        sbuf_printf(b, "<text class=\"legend\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                    "fill=\"#555555\">stage \xe2\x86\x94 stage rows: activations (top half), "
                    "gradients (bottom half) on the links between the two stages</text>\n",
                    LM, ly + 22);
}

char *sim_svg_text(const sim_report *r, size_t *len)
{
    const timeline *tl = r->tl;
    if (!tl)
        return NULL;
    double T = timeline_end(tl);
    if (T <= 0)
        T = 1e-9;
    svg_rows R = {0};
    if (build_rows(r, &R)) {
        free(R.row), free(R.dev_row);
        return NULL;
    }
    double y = R.n ? R.row[R.n - 1].y + R.row[R.n - 1].h + GAP : TOP;
    double axis_y = y + 4, height = axis_y + 128;
    sbuf b = {0};
    svg_begin(&b, LM + PW + RM, height, 12);
    sbuf_printf(&b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" "
       "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<rect width=\"2\" height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.6\"/></pattern>"
       "<pattern id=\"hatchdark\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"5\" fill=\"#333333\"/>"
       "</pattern></defs>\n");
    double unit = T < 2e-3 ? 1e-6 : T < 2 ? 1e-3 : 1;
    const char *uname = unit == 1e-6 ? "us" : unit == 1e-3 ? "ms" : "s";
    sbuf_printf(&b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">plumb sim: %s, "
       "%d stages, %d microbatches x %d samples, %d iteration%s</text>\n", LM,
       sched_kind_name(r->schedule), r->nstages, r->microbatches, r->microbatch_size,
       r->iterations, r->iterations == 1 ? "" : "s");
    sbuf_printf(&b, "<text x=\"%d\" y=\"42\" font-size=\"12\">%.1f samples/s, iteration %.4g %s "
       "(%s), bubble %.1f %%, peak memory %.3g GiB</text>\n", LM, r->samples_per_s,
       r->iteration_s / unit, uname, r->iterations >= 3 ? "steady state" : "whole run / N",
       100 * r->bubble_fraction, r->peak_memory_bytes / 1073741824.0);
    draw_rows(&b, r, &R);
    unsigned kinds = 0;
    int maxmb = -1;
    draw_events(&b, tl, &R, T, &kinds, &maxmb);
    /* time axis */
    sbuf_printf(&b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000000\"/>\n", LM,
       axis_y, LM + PW, axis_y);
    double step = svg_nice_step(T / unit, 10);
    for (double v = 0; isfinite(step) && step > 0 && v <= T / unit + 1e-9 * step; v += step) {
        double x = LM + v * unit / T * PW;
        sbuf_printf(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
           "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\" "
           "stroke-opacity=\"0.08\"/>\n"
           "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
           x, axis_y, x, axis_y + 5, x, TOP, x, axis_y, x, axis_y + 18, v);
    }
    sbuf_printf(&b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">time (%s)"
       "</text>\n", LM + PW / 2, axis_y + 36, uname);
    draw_legend(&b, axis_y + 62, kinds, maxmb + 1 < 10 ? maxmb + 1 : 10);
    sbuf_printf(&b, "</svg>\n");
    free(R.row), free(R.dev_row);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.n;
    return b.p;
}

int sim_write_svg(const sim_report *r, const char *path, plumb_err *err)
{
    if (!r->tl)
        return err_set(err, path, NULL, "the report has no timeline (run with a timeline)");
    size_t n;
    char *text = sim_svg_text(r, &n);
    if (!text)
        return err_set(err, path, NULL, "out of memory writing the SVG");
    int rc = file_write_atomic(path, text, n, err);
    free(text);
    return rc;
}
