/* whatif.c: the dashboard's state machine: what-if keys with undo/redo, pinning, and view
 * keys. Pure data; the caller re-plans, re-simulates and draws as the returned flags say. */
#include "ui/whatif.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/plan.h"
#include "core/schedule_traits.h"
#include "planner/search3d.h"

void ui_state_init(ui_state *st, const ui_whatif *initial, int nlevels, int per_server,
                   double device_memory)
{
    memset(st, 0, sizeof *st);
    st->cur = *initial;
    st->nlevels = nlevels < 1 ? 1 : nlevels > CLUSTER_MAX_LEVELS ? CLUSTER_MAX_LEVELS : nlevels;
    st->per_server = per_server < 1 ? 1 : per_server;
    st->device_memory = device_memory;
    st->view.level = st->nlevels - 1; /* the slowest level is the interesting one */
    search3d_options_init(&st->plan_rt); /* no plan file yet: every setting free */
}

void ui_state_set_plan(ui_state *st, const plan *pl)
{
    search3d_options_from_plan(pl, NULL, &st->plan_rt);
}

int ui_whatif_equal(const ui_whatif *a, const ui_whatif *b)
{
    if (a->ngpus != b->ngpus || a->schedule != b->schedule ||
        a->microbatches != b->microbatches || a->mem_limit_bytes != b->mem_limit_bytes ||
        a->straggler != b->straggler || a->recompute != b->recompute)
        return 0;
    if (a->straggler >= 0 && a->straggler_factor != b->straggler_factor) return 0;
    if (a->tp != b->tp || a->pp != b->pp || a->dp != b->dp || a->cp != b->cp ||
        a->mbs != b->mbs || a->interleave != b->interleave || a->ckpt != b->ckpt ||
        a->seqpar != b->seqpar ||
        a->zero != b->zero || a->tp_overlap != b->tp_overlap || a->opg != b->opg ||
        a->p2p_sync != b->p2p_sync || a->grad_sync_end != b->grad_sync_end ||
        a->attention != b->attention || a->fp8pg != b->fp8pg)
        return 0;
    for (int l = 0; l < CLUSTER_MAX_LEVELS; l++)
        if (a->bw_exp[l] != b->bw_exp[l]) return 0;
    return 1;
}

int ui_gpu_count_ok(int n, int per_server)
{
    if (n < 1 || n > UI_MAX_GPUS) return 0;
    return per_server % n == 0 || n % per_server == 0;
}

int ui_gpu_step(int n, int per_server, int dir)
{
    if (per_server < 1) per_server = 1;
    if (dir > 0) {
        for (int k = n + 1; k <= UI_MAX_GPUS; k++)
            if (ui_gpu_count_ok(k, per_server)) return k;
    } else {
        for (int k = (n > UI_MAX_GPUS ? UI_MAX_GPUS + 1 : n) - 1; k >= 1; k--)
            if (ui_gpu_count_ok(k, per_server)) return k;
    }
    return n;
}

static const double MEM_STEPS_GIB[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192 };
#define NMEM (int)(sizeof MEM_STEPS_GIB / sizeof MEM_STEPS_GIB[0])

double ui_mem_step(double cur, double device_memory, int dir)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    int top = -1; /* the largest step below the device memory */
    for (int i = 0; i < NMEM; i++)
        if (MEM_STEPS_GIB[i] * gib < device_memory) top = i;
    if (top < 0) return cur; /* devices smaller than 1 GiB: no steps */
    if (dir < 0) {
        if (cur <= 0) return MEM_STEPS_GIB[top] * gib;
        for (int i = NMEM - 1; i >= 0; i--)
            if (MEM_STEPS_GIB[i] * gib < cur) return MEM_STEPS_GIB[i] * gib;
        return cur; /* already at the tightest step */
    }
    if (cur <= 0) return 0;
    for (int i = 0; i <= top; i++)
        if (MEM_STEPS_GIB[i] * gib > cur) return MEM_STEPS_GIB[i] * gib;
    return 0; /* looser than the largest step: off */
}

double ui_straggler_next(double f)
{
    static const double F[] = { 1.5, 2, 3, 4 };
    for (int i = 0; i < 4; i++)
        if (F[i] > f + 1e-9) return F[i];
    return F[0];
}

int ui_runtime2d_check(const ui_state *st, const ui_whatif *w, char *why, size_t n)
{
    search3d_options so = st->plan_rt;
    plumb_err e;
    err_clear(&e);
    so.schedule = w->schedule;
    so.overlap_param_gather = w->opg;
    so.p2p_sync = w->p2p_sync;
    so.grad_sync_end = w->grad_sync_end;
    int rc = search3d_runtime_check(&so, &e);
    if (n) snprintf(why, n, "%s", rc ? e.msg : "");
    return rc;
}

/* The 2D view's next schedule (dir) that the plan's runtime takes (ui_runtime2d_check);
 * the same one when none other does. */
static int next_schedule2d(const ui_state *st, const ui_whatif *cur, int dir)
{
    for (int k = 1; k < SCHED_NKINDS; k++) {
        ui_whatif w = *cur;
        w.schedule = (cur->schedule + dir * k + SCHED_NKINDS * k) % SCHED_NKINDS;
        if (!ui_runtime2d_check(st, &w, NULL, 0)) return w.schedule;
    }
    return cur->schedule;
}

static ui_snap snap_of(const ui_state *st)
{
    ui_snap s;
    memset(&s, 0, sizeof s);
    s.cur = st->cur;
    s.pinned = st->pinned;
    s.pin = st->pin;
    return s;
}

static void push(ui_snap *stack, int *n, ui_snap s)
{
    if (*n == UI_UNDO_MAX) {
        memmove(stack, stack + 1, (UI_UNDO_MAX - 1) * sizeof *stack);
        (*n)--;
    }
    stack[(*n)++] = s;
}

/* Flags for going from snapshot `a` to the state now. */
static int diff_flags(const ui_snap *a, const ui_state *st)
{
    int f = UI_DO_REDRAW;
    if (!ui_whatif_equal(&a->cur, &st->cur)) f |= UI_DO_EVAL;
    if (a->pinned != st->pinned || (st->pinned && !ui_whatif_equal(&a->pin, &st->pin)))
        f |= UI_DO_EVAL_PIN;
    return f;
}

static void restore(ui_state *st, const ui_snap *s)
{
    st->cur = s->cur;
    st->pinned = s->pinned;
    st->pin = s->pin;
}

/* Records `before` for undo when the state really changed; returns the flags. */
static int commit(ui_state *st, const ui_snap *before)
{
    int f = diff_flags(before, st);
    if (f == UI_DO_REDRAW) return 0; /* nothing changed (e.g. at a limit) */
    push(st->undo, &st->undo_n, *before);
    st->redo_n = 0;
    return f;
}

static int whatif_key(ui_state *st, int key)
{
    ui_snap before = snap_of(st);
    ui_whatif *w = &st->cur;
    int l = st->view.level;
    if (st->layout3d && ui_whatif3d_key(st, key)) return commit(st, &before);
    switch (key) {
    case '+': case '=':
        w->ngpus = ui_gpu_step(w->ngpus, st->per_server, +1);
        break;
    case '-': case '_':
        w->ngpus = ui_gpu_step(w->ngpus, st->per_server, -1);
        if (w->straggler >= w->ngpus) w->straggler = -1;
        break;
    case 'b':
        if (w->bw_exp[l] < UI_MAX_BW_EXP) w->bw_exp[l]++;
        break;
    case 'B':
        if (w->bw_exp[l] > -UI_MAX_BW_EXP) w->bw_exp[l]--;
        break;
    case 'c': /* kinds the plan's runtime cannot take passed by */
        w->schedule = next_schedule2d(st, w, +1);
        break;
    case 'C':
        w->schedule = next_schedule2d(st, w, -1);
        break;
    case 'm':
        if (w->microbatches * 2 <= UI_MAX_MICROBATCHES) w->microbatches *= 2;
        break;
    case 'M':
        if (w->microbatches > 1) w->microbatches /= 2;
        break;
    case 'x':
        w->mem_limit_bytes = ui_mem_step(w->mem_limit_bytes, st->device_memory, -1);
        break;
    case 'X':
        w->mem_limit_bytes = ui_mem_step(w->mem_limit_bytes, st->device_memory, +1);
        break;
    case 't':
        if (w->straggler == st->view.device) w->straggler = -1;
        else if (st->view.device < w->ngpus) w->straggler = st->view.device;
        break;
    case 'T':
        w->straggler_factor = ui_straggler_next(w->straggler_factor);
        if (w->straggler < 0 && st->view.device < w->ngpus) w->straggler = st->view.device;
        break;
    case 'r': /* auto -> on -> off -> auto */
        w->recompute = w->recompute == UI_RECOMPUTE_AUTO ? 1
                       : w->recompute == 1               ? 0
                                                         : UI_RECOMPUTE_AUTO;
        break;
    case 'p':
        st->pinned = 1;
        st->pin = st->cur;
        break;
    case 'P':
        st->pinned = 0;
        break;
    default:
        return -1;
    }
    return commit(st, &before);
}

static int undo_redo(ui_state *st, int redo)
{
    ui_snap *from = redo ? st->redo : st->undo, *to = redo ? st->undo : st->redo;
    int *nfrom = redo ? &st->redo_n : &st->undo_n, *nto = redo ? &st->undo_n : &st->redo_n;
    if (*nfrom == 0) return UI_DO_REDRAW | UI_DO_NOTHING_TO_UNDO;
    ui_snap now = snap_of(st), prev = from[--*nfrom];
    push(to, nto, now);
    restore(st, &prev);
    return diff_flags(&now, st);
}

int ui_row_of(const int *ids, int n, int dev)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] <= dev) r = i;
    return r;
}

void ui_state_set_rows(ui_state *st, const int *ids, int n)
{
    if (n > UI_MAX_GPUS) n = UI_MAX_GPUS;
    if (n < 0) n = 0;
    for (int i = 0; i < n; i++) st->row_device[i] = ids[i];
    st->nrows = n;
    if (n > 0) st->view.device = ids[ui_row_of(ids, n, st->view.device)];
}

/* Moves the selected device by `d` rows. */
static void move_rows(ui_state *st, int d)
{
    ui_view *v = &st->view;
    if (st->nrows > 0) {
        int r = ui_row_of(st->row_device, st->nrows, v->device) + d;
        if (r < 0) r = 0;
        if (r >= st->nrows) r = st->nrows - 1;
        v->device = st->row_device[r];
    } else {
        v->device += d;
        if (v->device >= st->cur.ngpus) v->device = st->cur.ngpus - 1;
        if (v->device < 0) v->device = 0;
    }
}

static int view_key(ui_state *st, int key)
{
    ui_view *v = &st->view;
    double span = ldexp(1.0, -v->zoom);
    switch (key) {
    case UI_KEY_UP: move_rows(st, -1); break;
    case UI_KEY_DOWN: move_rows(st, 1); break;
    case UI_KEY_PGUP: move_rows(st, -10); break;
    case UI_KEY_PGDN: move_rows(st, 10); break;
    case UI_KEY_LEFT: v->offset -= span / 4; break;
    case UI_KEY_RIGHT: v->offset += span / 4; break;
    case UI_KEY_HOME: v->offset = 0; v->zoom = 0; break;
    case UI_KEY_END: v->offset = 1 - span; break;
    case 'z':
        if (v->zoom < UI_MAX_ZOOM) {
            v->offset += span / 4; /* zoom around the middle of the view */
            v->zoom++;
        }
        break;
    case 'Z':
        if (v->zoom > 0) {
            v->zoom--;
            v->offset -= span / 2;
        }
        break;
    case 'l': case '\t':
        v->level = (v->level + 1) % st->nlevels;
        break;
    default:
        if (key >= '1' && key <= '8' && key - '1' < st->nlevels) {
            v->level = key - '1';
            break;
        }
        return 0;
    }
    span = ldexp(1.0, -v->zoom);
    if (v->offset > 1 - span) v->offset = 1 - span;
    if (v->offset < 0) v->offset = 0;
    return UI_DO_REDRAW;
}

void ui_state_set_layout3d(ui_state *st, int layers, int global_batch,
                           const layout3d_options *lopt)
{
    st->layout3d = 1;
    st->layers = layers;
    st->global_batch = global_batch;
    if (lopt) {
        st->lopt = *lopt;
    } else {
        layout3d_options_init(&st->lopt);
        st->lopt.global_batch = global_batch;
    }
}

int ui_state_reject(ui_state *st)
{
    if (st->undo_n == 0) return 0;
    ui_snap now = snap_of(st), prev = st->undo[--st->undo_n];
    restore(st, &prev);
    return diff_flags(&now, st);
}

int ui_state_key(ui_state *st, int key)
{
    st->note[0] = 0;
    if (key == 'q' || key == 'Q' || key == UI_KEY_CTRL_C) return UI_DO_QUIT;
    if (key == UI_KEY_RESIZE) return UI_DO_REDRAW;
    if (st->view.help) { /* the overlay takes the next key: ? and Esc close it */
        st->view.help = 0;
        return UI_DO_REDRAW;
    }
    if (key == '?' || key == 'h') {
        st->view.help = 1;
        return UI_DO_REDRAW;
    }
    if (key == 's') return UI_DO_SAVE | UI_DO_REDRAW;
    if (key == 'e') return UI_DO_EXPORT | UI_DO_REDRAW;
    if (key == 'u') return undo_redo(st, 0);
    if (key == 'U' || key == UI_KEY_CTRL_R) return undo_redo(st, 1);
    int f = whatif_key(st, key);
    if (f >= 0) return f ? f : UI_DO_REDRAW;
    return view_key(st, key);
}

void ui_view_follow(ui_view *v, const int *ids, int n, int rows)
{
    if (rows < 1) rows = 1;
    if (n < 1) {
        v->top = 0;
        return;
    }
    int r = ui_row_of(ids, n, v->device);
    v->device = ids[r];
    if (r < v->top) v->top = r;
    if (r >= v->top + rows) v->top = r - rows + 1;
    if (v->top > n - rows) v->top = n - rows;
    if (v->top < 0) v->top = 0;
}
