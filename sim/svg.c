/* svg.c: the simulator's SVG timeline. One row per device of the plan's cluster, labelled
 * with the stages it runs (idle devices too, consecutive ones folded into one row), its
 * compute as blocks coloured by microbatch (10 hues, microbatch mod 10) and shaded by kind
 * (F light, B dark, I full colour, W light and hatched), labelled when wide enough, its
 * all-reduces as a hatched strip along the bottom; below, one thin row per stage boundary
 * that carried transfers (activations in its top half, gradients in its bottom half, over
 * all the links between the two stages); a time axis with its unit and a legend of the
 * kinds drawn on their own, each swatch drawn as the blocks are. Boxes narrower than a pixel are
 * not drawn one by one: on each lane (a device's compute or all-reduce strip, a boundary
 * row's half) they are merged into one box per run of pixels of the same busy fraction,
 * drawn with that fraction as its opacity, so the picture's size grows with its rows and
 * width, not with the run's events. The text is formatted into an sbuf (core/strbuf.h):
 * built in memory, or streamed into the temporary file of an atomic write. Classes on the
 * rows, blocks and legend entries let tests check the structure (tests/test_svg.c). */
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
    int n, cut0;        /* rows; the first cut row (cut rows sorted by stages), n if none */
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
    size_t np = 0, npairs = 0;
    for (size_t i = 0; i < tl->n; i++)
        np += is_xfer(tl, &tl->ev[i]);
    int *track_of = malloc(((size_t)maxdev + 1) * 2 * sizeof *track_of);
    int *row_of = track_of + maxdev + 1; /* a device's row */
    pair_link *pl = malloc((np + 1) * sizeof *pl);
    R->dev_row = malloc(((size_t)tl->ntracks + 1) * sizeof *R->dev_row);
    R->n = 0;
    if (!track_of || !pl || !R->dev_row)
        goto fail;
    np = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        if (!is_xfer(tl, e)) continue;
        int a = e->stage < e->peer_stage ? e->stage : e->peer_stage;
        int b = e->stage < e->peer_stage ? e->peer_stage : e->stage;
        pl[np++] = (pair_link){a, b, e->track};
    }
    qsort(pl, np, sizeof *pl, cmp_pair);
    for (size_t i = 0; i < np; i++)
        npairs += i == 0 || pl[i].a != pl[i - 1].a || pl[i].b != pl[i - 1].b;
    if (!(R->row = malloc(((size_t)maxdev + npairs + 1) * sizeof *R->row)))
        goto fail;
    for (int d = 0; d < maxdev; d++) track_of[d] = -1;
    for (int i = 0; i < tl->ntracks; i++)
        if (tl->tracks[i].kind == TL_TRACK_DEVICE && tl->tracks[i].device >= 0)
            track_of[tl->tracks[i].device] = i;
    for (int d = 0; d < maxdev; d++) {
        if (track_of[d] >= 0) {
            row_of[d] = R->n;
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
            R->dev_row[i] = row_of[d];
    }
    R->cut0 = R->n;
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
fail:
    free(track_of), free(pl);
    return -1;
}

/* The cut row of stages (a, b), or -1 (the cut rows are sorted by (a, b)). */
static int cut_row(const svg_rows *R, int a, int b)
{
    int lo = R->cut0, hi = R->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const svg_row *w = &R->row[mid];
        if (w->a == a && w->b == b) return mid;
        if (w->a < a || (w->a == a && w->b < b)) lo = mid + 1;
        else hi = mid;
    }
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

/* The lanes of a row, each a strip its boxes are drawn on: a device row's compute blocks
 * and all-reduce strip, a cut row's activations (top half) and gradients (bottom half). */
enum { LANE_COMPUTE, LANE_ALLREDUCE, LANE_ACT, LANE_GRAD, LANES };

/* The lane of e (its row * LANES + the part), or -1 when e is not drawn (a ring hop, or a
 * track without a row). */
static long lane_of(const timeline *tl, const svg_rows *R, const tl_event *e)
{
    if (e->track < 0 || e->track >= tl->ntracks) return -1;
    const tl_track *t = &tl->tracks[e->track];
    if (t->kind == TL_TRACK_LINK) {
        if (!is_xfer(tl, e)) return -1; /* ring hops: the device rows' all-reduce strip */
        int a = e->stage < e->peer_stage ? e->stage : e->peer_stage;
        int j = cut_row(R, a, e->stage < e->peer_stage ? e->peer_stage : e->stage);
        return j < 0 ? -1 : (long)j * LANES + (e->kind == TL_SEND_B ? LANE_GRAD : LANE_ACT);
    }
    int j = R->dev_row[e->track];
    if (j < 0) return -1;
    return (long)j * LANES + (t->kind == TL_TRACK_COLLECTIVE ? LANE_ALLREDUCE : LANE_COMPUTE);
}

/* 1 when e is narrower than a pixel (a step is a marker of fixed width, never narrow). */
static int is_narrow(const tl_event *e, double T)
{
    return e->kind != TL_STEP && e->dur_s / T * PW < 1;
}

/* A narrow event: its span in pixels from the plot's left edge and its index. */
typedef struct narrow_ev {
    double u0, u1;
    size_t i;
} narrow_ev;

static int cmp_narrow(const void *x, const void *y)
{
    const narrow_ev *a = x, *b = y;
    if (a->u0 != b->u0) return a->u0 < b->u0 ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The narrow events of each lane that share a pixel with another narrow event of the lane
 * (merged): lane l's are sp[off[l] .. off[l + 1]), by start; alone marks (bit i) the
 * narrow events with pixels of their own, drawn one by one as the wide ones are. */
typedef struct svg_merged {
    long nlanes;
    size_t *off;
    svg_span *sp;
    unsigned char *alone;
} svg_merged;

/* x as a pixel index kept within [-2, PW], NaN at -2, so that it converts to a long (a
 * non-finite or huge time would not). */
static long pixel_clamp(double x)
{
    return x > PW ? PW : x >= -2 ? (long)x : -2;
}

/* The pixels [first, last] that [u0, u1) touches, within the plot. */
static void pixels_of(double u0, double u1, long *first, long *last)
{
    *first = pixel_clamp(floor(u0)), *last = pixel_clamp(ceil(u1)) - 1;
    if (*last < *first) *last = *first; /* no duration: the pixel it is in */
    if (*first < 0) *first = 0;
    if (*last > PW - 1) *last = PW - 1;
}

/* Of one lane's narrow events ev[0 .. n) (sorted here by start), copies the ones that share
 * a pixel with another one to sp as spans and returns their count; marks the others alone
 * (bit ev[j].i of alone). */
static size_t lane_merged(narrow_ev *ev, size_t n, svg_span *sp, unsigned char *alone)
{
    qsort(ev, n, sizeof *ev, cmp_narrow);
    size_t k = 0;
    long reach = -1; /* the last pixel touched by the events before */
    for (size_t j = 0; j < n; j++) {
        long a, b, next = PW, unused;
        pixels_of(ev[j].u0, ev[j].u1, &a, &b);
        if (j + 1 < n) pixels_of(ev[j + 1].u0, ev[j + 1].u1, &next, &unused);
        if (a > reach && b < next) alone[ev[j].i / 8] |= 1u << (ev[j].i % 8);
        else sp[k++] = (svg_span){ev[j].u0, ev[j].u1};
        if (b > reach) reach = b;
    }
    return k;
}

/* Finds the narrow events of each lane, the ones to merge and the ones alone. 0, or -1
 * when out of memory. */
static int merged_find(const timeline *tl, const svg_rows *R, double T, svg_merged *M)
{
    M->nlanes = (long)R->n * LANES;
    M->off = calloc((size_t)M->nlanes + 2, sizeof *M->off);
    M->alone = calloc(tl->n / 8 + 1, 1);
    if (!M->off || !M->alone) return -1;
    for (size_t i = 0; i < tl->n; i++) {
        long l = lane_of(tl, R, &tl->ev[i]);
        if (l >= 0 && is_narrow(&tl->ev[i], T)) M->off[l + 2]++;
    }
    for (long l = 0; l < M->nlanes; l++) M->off[l + 2] += M->off[l + 1];
    size_t total = M->off[M->nlanes + 1];
    narrow_ev *ev = malloc((total + 1) * sizeof *ev);
    M->sp = malloc((total + 1) * sizeof *M->sp);
    if (!ev || !M->sp) {
        free(ev);
        return -1;
    }
    /* off[l + 1] is lane l's start; filling advances it to lane l's end */
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        long l = lane_of(tl, R, e);
        if (l >= 0 && is_narrow(e, T))
            ev[M->off[l + 1]++] = (narrow_ev){e->start_s / T * PW,
                                              (e->start_s + e->dur_s) / T * PW, i};
    }
    /* each lane's merged spans, packed: off[l] becomes their start */
    size_t k = 0, from = 0;
    for (long l = 0; l < M->nlanes; l++) {
        size_t to = M->off[l + 1];
        M->off[l] = k;
        k += lane_merged(ev + from, to - from, M->sp + k, M->alone);
        from = to;
    }
    M->off[M->nlanes] = k;
    free(ev);
    return 0;
}

/* Draws every event but the merged ones (M); sets bit k of *kinds for each tl_kind drawn
 * or merged, of *drawn for each drawn on its own, and *maxmb to the highest microbatch of
 * a compute block drawn on its own. */
static void draw_events(sbuf *b, const timeline *tl, const svg_rows *R, double T,
                        const svg_merged *M, unsigned *kinds, unsigned *drawn, int *maxmb)
{
    char fill[16], label[32];
    for (size_t i = 0; i < tl->n; i++) {
        const tl_event *e = &tl->ev[i];
        long lane = lane_of(tl, R, e);
        if (lane < 0) continue;
        const svg_row *row = &R->row[lane / LANES];
        double x = LM + e->start_s / T * PW, w = e->dur_s / T * PW;
        int dark;
        *kinds |= 1u << e->kind;
        if (is_narrow(e, T) && !(M->alone[i / 8] & (1u << (i % 8))))
            continue;
        *drawn |= 1u << e->kind;
        if (lane % LANES == LANE_COMPUTE && e->kind != TL_STEP && e->microbatch > *maxmb)
            *maxmb = e->microbatch;
        if (lane % LANES >= LANE_ACT) {
            int grad = lane % LANES == LANE_GRAD;
            fill_of(grad ? TL_B : TL_F, e->microbatch, fill, sizeof fill, &dark);
            sbuf_printf(b, "<rect class=\"b %s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                        "height=\"%d\" fill=\"%s\"/>\n", tl_kind_name(e->kind), x,
                        row->y + (grad ? CH / 2 : 0), w < 0.5 ? 0.5 : w, CH / 2, fill);
            continue;
        }
        double y = row->y;
        if (lane % LANES == LANE_ALLREDUCE) {
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

/* A lane's merged boxes: name, fill, offset from the row's top and height. */
static const struct {
    const char *name, *fill;
    int dy, h;
} busy_look[LANES] = {
    [LANE_COMPUTE] = {"compute", "#404040", 0, RH - 7},
    [LANE_ALLREDUCE] = {"allreduce", "#202020", RH - 6, 6},
    [LANE_ACT] = {"send_f", "#6e7f91", 0, CH / 2},
    [LANE_GRAD] = {"send_b", "#2b3a4a", CH / 2, CH / 2},
};

/* Draws each lane's merged events: the busy fraction of every pixel (svg_pixel_busy: the
 * time the lane's merged events cover in it, overlaps once), rounded to 0.001, one box per
 * run of pixels of the same rounded fraction, that fraction as its opacity and data-busy;
 * pixels that round to 0 are left blank. Returns 0, -1 when out of memory. */
static int draw_busy(sbuf *b, const svg_rows *R, svg_merged *M)
{
    double *busy = malloc(PW * sizeof *busy);
    if (!busy)
        return -1;
    for (long l = 0; l < M->nlanes; l++) {
        size_t n = M->off[l + 1] - M->off[l];
        if (!n) continue;
        svg_pixel_busy(M->sp + M->off[l], n, busy, PW);
        double y = R->row[l / LANES].y + busy_look[l % LANES].dy;
        for (int p = 0, q; p < PW; p = q) {
            long f = lround(busy[p] * 1000);
            for (q = p + 1; q < PW && lround(busy[q] * 1000) == f; q++) {}
            if (!f) continue;
            sbuf_printf(b, "<rect class=\"b busy %s\" data-busy=\"%.3f\" x=\"%d\" y=\"%.1f\" "
                        "width=\"%d\" height=\"%d\" fill=\"%s\" fill-opacity=\"%.3f\"/>\n",
                        busy_look[l % LANES].name, f / 1000.0, LM + p, y, q - p,
                        busy_look[l % LANES].h, busy_look[l % LANES].fill, f / 1000.0);
        }
    }
    free(busy);
    return 0;
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

/* The legend: a key for each kind drawn on its own (bits of `drawn`; a kind whose boxes
 * were all merged has no colour to show), the microbatch hues of the nhues drawn (none:
 * no line), the stage rows' halves when the run has transfers (bits of `kinds`: drawn or
 * merged, the rows are there), and the rule of the merged boxes when busy (any were
 * drawn). */
static void draw_legend(sbuf *b, double ly, unsigned drawn, unsigned kinds, int nhues,
                        int busy)
{
    static const char *const what[] = { "F forward (light)", "B backward (dark)",
                                        "I input gradient (full colour)",
                                        "W weight gradient (light, hatched)" };
    double lx = LM;
    for (int k = TL_F; k <= TL_W; k++) {
        if (!(drawn & (1u << k))) continue;
        swatch(b, k, lx, ly - 11);
        sbuf_printf(b, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n",
                    lx + 36, ly, what[k]);
        lx += 36 + 7.2 * strlen(what[k]) + 18;
    }
    if (drawn & (1u << TL_STEP)) {
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"3\" height=\"14\" fill=\"#000000\"/>"
                    "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">optimizer "
                    "step</text>\n", lx, ly - 11, lx + 10, ly);
        lx += 130;
    }
    if (drawn & (1u << TL_ALLREDUCE)) {
        sbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"22\" height=\"6\" "
                    "fill=\"url(#hatchdark)\" stroke=\"#333333\" stroke-width=\"0.5\"/><text "
                    "class=\"legend\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\">all-reduce</text>\n",
                    lx, ly - 6, lx + 28, ly);
    }
    ly += 26;
    if (nhues > 0)
        sbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">colour = microbatch mod "
                    "10:</text>\n", LM, ly);
    int back = drawn & (1u << TL_B) ? TL_B : TL_I;
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
    if (kinds & ((1u << TL_SEND_F) | (1u << TL_SEND_B))) {
        ly += 22;
        sbuf_printf(b, "<text class=\"legend\" x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                    "fill=\"#555555\">stage \xe2\x86\x94 stage rows: activations (top half), "
                    "gradients (bottom half) on the links between the two stages</text>\n",
                    LM, ly);
    }
    if (!busy) return;
    ly += 22;
    for (int k = 0; k < 4; k++)
        sbuf_printf(b, "<rect class=\"swatch busy\" x=\"%d\" y=\"%.1f\" width=\"10\" "
                    "height=\"14\" fill=\"%s\" fill-opacity=\"%.2f\"/>\n", LM + 10 * k,
                    ly - 11, busy_look[LANE_COMPUTE].fill, 1 - 0.3 * k);
    sbuf_printf(b, "<text class=\"legend busy\" x=\"%d\" y=\"%.1f\" font-size=\"11\">boxes "
                "narrower than a pixel merged per pixel: grey, opacity = the fraction of the "
                "pixel's time busy</text>\n", LM + 48, ly);
}

/* Formats the SVG of r (which has a timeline) into b. 0, or -1 when out of memory (b
 * then holds a prefix of no use). */
static int svg_emit(const sim_report *r, sbuf *b)
{
    const timeline *tl = r->tl;
    double T = timeline_end(tl);
    if (T <= 0)
        T = 1e-9;
    svg_rows R = {0};
    svg_merged M = {0};
    int rc = -1;
    if (build_rows(r, &R) || merged_find(tl, &R, T, &M))
        goto cleanup;
    int merged = M.off[M.nlanes] > 0;
    double y = R.n ? R.row[R.n - 1].y + R.row[R.n - 1].h + GAP : TOP;
    double axis_y = y + 4, height = axis_y + 128 + (merged ? 22 : 0);
    svg_begin(b, LM + PW + RM, height, 12);
    sbuf_printf(b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" "
       "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
       "<rect width=\"2\" height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.6\"/></pattern>"
       "<pattern id=\"hatchdark\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"5\" fill=\"#333333\"/>"
       "</pattern></defs>\n");
    double unit = T < 2e-3 ? 1e-6 : T < 2 ? 1e-3 : 1;
    const char *uname = unit == 1e-6 ? "us" : unit == 1e-3 ? "ms" : "s";
    sbuf_printf(b, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">plumb sim: %s, "
       "%d stages, %d microbatches x %d samples, %d iteration%s</text>\n", LM,
       sched_kind_name(r->schedule), r->nstages, r->microbatches, r->microbatch_size,
       r->iterations, r->iterations == 1 ? "" : "s");
    sbuf_printf(b, "<text x=\"%d\" y=\"42\" font-size=\"12\">%.1f samples/s, iteration %.4g %s "
       "(%s), bubble %.1f %%, peak memory %.3g GiB</text>\n", LM, r->samples_per_s,
       r->iteration_s / unit, uname, r->iterations >= 3 ? "steady state" : "whole run / N",
       100 * r->bubble_fraction, r->peak_memory_bytes / 1073741824.0);
    draw_rows(b, r, &R);
    unsigned kinds = 0, drawn = 0;
    int maxmb = -1;
    draw_events(b, tl, &R, T, &M, &kinds, &drawn, &maxmb);
    if (draw_busy(b, &R, &M))
        goto cleanup;
    /* time axis */
    sbuf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000000\"/>\n", LM,
       axis_y, LM + PW, axis_y);
    double step = svg_nice_step(T / unit, 10);
    for (double v = 0; isfinite(step) && step > 0 && v <= T / unit + 1e-9 * step; v += step) {
        double x = LM + v * unit / T * PW;
        sbuf_printf(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
           "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\" "
           "stroke-opacity=\"0.08\"/>\n"
           "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
           x, axis_y, x, axis_y + 5, x, TOP, x, axis_y, x, axis_y + 18, v);
    }
    sbuf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">time (%s)"
       "</text>\n", LM + PW / 2, axis_y + 36, uname);
    draw_legend(b, axis_y + 62, drawn, kinds, maxmb + 1 < 10 ? maxmb + 1 : 10, merged);
    sbuf_printf(b, "</svg>\n");
    rc = 0;
cleanup:
    free(R.row), free(R.dev_row), free(M.off), free(M.sp), free(M.alone);
    return rc;
}

char *sim_svg_text(const sim_report *r, size_t *len)
{
    if (!r->tl)
        return NULL;
    sbuf b = {0};
    if (svg_emit(r, &b) || b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.n;
    return b.p;
}

int sim_svg_file_write(FILE *f, void *ctx, plumb_err *err)
{
    const sim_svg_file *c = ctx;
    if (!c->r->tl)
        return err_set(err, c->path, NULL, "the report has no timeline (run with a timeline)");
    sbuf b = {.out = f};
    if (svg_emit(c->r, &b) || b.oom)
        return err_set(err, c->path, NULL, "out of memory writing the SVG");
    if (b.werr)
        return err_set(err, c->path, NULL, "cannot write: %s", strerror(b.werr));
    return 0;
}

int sim_write_svg(const sim_report *r, const char *path, plumb_err *err)
{
    if (!r->tl)
        return err_set(err, path, NULL, "the report has no timeline (run with a timeline)");
    sim_svg_file c = {.r = r, .path = path};
    file_out fo = {.path = path, .write = sim_svg_file_write, .ctx = &c};
    return files_write_atomic_out(1, &fo, err);
}
