/* test_ui_state.c: the dashboard's state machine without drawing or simulating: what-if
 * keys change the settings within their limits, every change is undoable and redoable,
 * pinning keeps a copy, and view keys stay inside the timeline. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/plan.h"
#include "core/schedule_traits.h"
#include "planner/llm_profile.h"
#include "ui/whatif.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static ui_state *fresh(void)
{
    static ui_state st; /* large (undo stacks); one per test process is enough */
    ui_whatif w;
    memset(&w, 0, sizeof w);
    w.ngpus = 16;
    w.schedule = SCHED_1F1B_FLUSH;
    w.microbatches = 4;
    w.straggler = -1;
    w.straggler_factor = 2;
    ui_state_init(&st, &w, 2, 4, 15 * GIB);
    return &st;
}

static int keys(ui_state *st, const char *k)
{
    int f = 0;
    for (; *k; k++) f |= ui_state_key(st, *k);
    return f;
}

Test(ui_state, gpu_steps_follow_the_hierarchy)
{
    /* beyond one server: one server more or less per step */
    cr_assert_eq(ui_gpu_step(16, 4, +1), 20);
    cr_assert_eq(ui_gpu_step(16, 4, -1), 12);
    cr_assert_eq(ui_gpu_step(8, 4, -1), 4);
    cr_assert_eq(ui_gpu_step(12, 8, +1), 16);    /* 12 is not whole servers: the next that is */
    cr_assert_eq(ui_gpu_step(12, 8, -1), 8);
    cr_assert_eq(ui_gpu_step(1016, 8, +1), 1024);
    /* within a server: the next divisor of it */
    cr_assert_eq(ui_gpu_step(4, 4, -1), 2);
    cr_assert_eq(ui_gpu_step(2, 4, +1), 4);
    cr_assert_eq(ui_gpu_step(3, 8, +1), 4);
    cr_assert_eq(ui_gpu_step(6, 12, -1), 4);
    cr_assert_eq(ui_gpu_step(1, 4, -1), 1);      /* nothing below one GPU */
    cr_assert_eq(ui_gpu_step(UI_MAX_GPUS, 8, +1), UI_MAX_GPUS);
    cr_assert_geq(UI_MAX_GPUS, 1024);            /* 1024-GPU clusters are not cut */
}

Test(ui_state, what_if_keys_change_the_settings)
{
    ui_state *st = fresh();
    cr_assert_eq(ui_state_key(st, '+') & UI_DO_EVAL, UI_DO_EVAL);
    cr_assert_eq(st->cur.ngpus, 20);
    ui_state_key(st, '-');
    ui_state_key(st, '-');
    cr_assert_eq(st->cur.ngpus, 12);
    cr_assert_eq(st->view.level, 1); /* starts on the outermost level */
    keys(st, "bb");
    cr_assert_eq(st->cur.bw_exp[1], 2);
    keys(st, "1B");
    cr_assert_eq(st->cur.bw_exp[0], -1);
    cr_assert_eq(st->cur.bw_exp[1], 2);
    ui_state_key(st, 'c');
    cr_assert_eq(st->cur.schedule, SCHED_PIPEDREAM);
    keys(st, "CC");
    cr_assert_eq(st->cur.schedule, SCHED_GPIPE);
    ui_state_key(st, 'C'); /* wraps around */
    cr_assert_eq(st->cur.schedule, SCHED_NKINDS - 1);
    keys(st, "mm");
    cr_assert_eq(st->cur.microbatches, 16);
    keys(st, "MMMMMM");
    cr_assert_eq(st->cur.microbatches, 1);
    ui_state_key(st, 'r'); /* off -> auto -> on -> off */
    cr_assert_eq(st->cur.recompute, UI_RECOMPUTE_AUTO);
    ui_state_key(st, 'r');
    cr_assert_eq(st->cur.recompute, 1);
    ui_state_key(st, 'r');
    cr_assert_eq(st->cur.recompute, 0);
}

Test(ui_state, memory_limit_steps)
{
    ui_state *st = fresh();
    ui_state_key(st, 'x');
    cr_assert_eq(st->cur.mem_limit_bytes, 12 * GIB); /* the largest step below 15 GiB */
    ui_state_key(st, 'x');
    cr_assert_eq(st->cur.mem_limit_bytes, 8 * GIB);
    keys(st, "XX");
    cr_assert_eq(st->cur.mem_limit_bytes, 0); /* looser than 12 GiB: off */
    for (int i = 0; i < 20; i++) ui_state_key(st, 'x');
    cr_assert_eq(st->cur.mem_limit_bytes, 1 * GIB);
    cr_assert_eq(ui_mem_step(0, 0.5 * GIB, -1), 0); /* no steps below a tiny device */
}

Test(ui_state, straggler_follows_the_selected_device)
{
    ui_state *st = fresh();
    cr_assert_eq(ui_state_key(st, UI_KEY_DOWN), UI_DO_REDRAW);
    ui_state_key(st, UI_KEY_DOWN);
    ui_state_key(st, 't');
    cr_assert_eq(st->cur.straggler, 2);
    cr_assert_eq(st->cur.straggler_factor, 2);
    ui_state_key(st, 'T');
    cr_assert_eq(st->cur.straggler_factor, 3);
    ui_state_key(st, 't'); /* same device again: off */
    cr_assert_eq(st->cur.straggler, -1);
    for (int i = 0; i < 20; i++) ui_state_key(st, UI_KEY_DOWN);
    cr_assert_eq(st->view.device, 15); /* clamped to the GPUs */
    ui_state_key(st, 't');
    cr_assert_eq(st->cur.straggler, 15);
    ui_state_key(st, '-'); /* the straggler's device goes away with the GPUs */
    cr_assert_eq(st->cur.straggler, -1);
}

Test(ui_state, every_change_is_undoable_and_redoable)
{
    ui_state *st = fresh();
    ui_whatif start = st->cur;
    const char *seq = "+bcmxrtT-";
    keys(st, seq);
    ui_whatif end = st->cur;
    cr_assert(!ui_whatif_equal(&start, &end));
    int n = st->undo_n;
    cr_assert_eq(n, (int)strlen(seq));
    for (int i = 0; i < n; i++) cr_assert(ui_state_key(st, 'u') & UI_DO_EVAL);
    cr_assert(ui_whatif_equal(&st->cur, &start));
    cr_assert_eq(ui_state_key(st, 'u'), UI_DO_REDRAW | UI_DO_NOTHING_TO_UNDO);
    for (int i = 0; i < n; i++) ui_state_key(st, 'U');
    cr_assert(ui_whatif_equal(&st->cur, &end));
    ui_state_key(st, 'u');
    ui_state_key(st, 'r'); /* a new change clears the redo stack */
    cr_assert_eq(ui_state_key(st, UI_KEY_CTRL_R), UI_DO_REDRAW | UI_DO_NOTHING_TO_UNDO);
}

Test(ui_state, keys_at_a_limit_record_nothing)
{
    ui_state *st = fresh();
    keys(st, "MMMM"); /* 4 -> 2 -> 1 -> 1 -> 1 */
    cr_assert_eq(st->undo_n, 2);
    cr_assert_eq(ui_state_key(st, 'M'), UI_DO_REDRAW);
}

Test(ui_state, pinning_keeps_a_copy_and_is_undoable)
{
    ui_state *st = fresh();
    int f = ui_state_key(st, 'p');
    cr_assert(f & UI_DO_EVAL_PIN);
    cr_assert(!(f & UI_DO_EVAL));
    cr_assert(st->pinned);
    keys(st, "++");
    cr_assert_eq(st->pin.ngpus, 16);
    cr_assert_eq(st->cur.ngpus, 24);
    keys(st, "P");
    cr_assert(!st->pinned);
    cr_assert(ui_state_key(st, 'u') & UI_DO_EVAL_PIN);
    cr_assert(st->pinned);
    keys(st, "uuu");
    cr_assert(!st->pinned);
}

Test(ui_state, cursor_moves_between_the_devices_the_timeline_shows)
{
    ui_state *st = fresh();
    int ids[] = { 0, 1, 2, 8, 15 };
    ui_state_set_rows(st, ids, 5);
    for (int i = 0; i < 3; i++) ui_state_key(st, UI_KEY_DOWN);
    cr_assert_eq(st->view.device, 8);
    ui_state_key(st, 't');
    cr_assert_eq(st->cur.straggler, 8);
    ui_state_key(st, UI_KEY_PGDN);
    cr_assert_eq(st->view.device, 15);
    ui_state_key(st, UI_KEY_UP);
    cr_assert_eq(st->view.device, 8);
    int two[] = { 4, 5 };
    ui_state_set_rows(st, two, 2); /* the selected device is not shown any more: snaps */
    cr_assert_eq(st->view.device, 5);
    cr_assert_eq(ui_row_of(ids, 5, 9), 3);
    cr_assert_eq(ui_row_of(ids, 5, -1), 0);
}

Test(ui_state, io_quit_and_help_keys)
{
    ui_state *st = fresh();
    cr_assert(ui_state_key(st, 's') & UI_DO_SAVE);
    cr_assert(ui_state_key(st, 'e') & UI_DO_EXPORT);
    cr_assert(ui_state_key(st, 'q') & UI_DO_QUIT);
    cr_assert(ui_state_key(st, UI_KEY_CTRL_C) & UI_DO_QUIT);
    ui_state_key(st, '?');
    cr_assert(st->view.help);
    cr_assert_eq(ui_state_key(st, '+'), UI_DO_REDRAW); /* closes help, changes nothing */
    cr_assert(!st->view.help);
    cr_assert_eq(st->cur.ngpus, 16);
    cr_assert_eq(ui_state_key(st, '~'), 0); /* unknown keys do nothing */
}

Test(ui_state, zoom_and_scroll_stay_inside_the_run)
{
    ui_state *st = fresh();
    ui_state_key(st, UI_KEY_LEFT);
    cr_assert_eq(st->view.offset, 0);
    keys(st, "zz");
    cr_assert_eq(st->view.zoom, 2);
    for (int i = 0; i < 50; i++) ui_state_key(st, UI_KEY_RIGHT);
    cr_assert_float_eq(st->view.offset, 0.75, 1e-12);
    for (int i = 0; i < 30; i++) ui_state_key(st, 'z');
    cr_assert_eq(st->view.zoom, UI_MAX_ZOOM);
    ui_state_key(st, UI_KEY_HOME);
    cr_assert_eq(st->view.zoom, 0);
    cr_assert_eq(st->view.offset, 0);
    int ids[64];
    for (int i = 0; i < 64; i++) ids[i] = i;
    ui_view v = { 0, 40, 0, 0, 0, 0 };
    ui_view_follow(&v, ids, 64, 10);
    cr_assert_eq(v.top, 31);
    v.device = 3;
    ui_view_follow(&v, ids, 64, 10);
    cr_assert_eq(v.top, 3);
    v.device = 100;
    ui_view_follow(&v, ids, 8, 10);
    cr_assert_eq(v.device, 7);
    cr_assert_eq(v.top, 0);
}

/* ---- a transformer's 3D layout (plumb ui --model) ------------------------------------ */

/* GPT-3 175B as Narayanan et al. lay it out: 96 layers, global batch 1536, tp 8 x pp 8 x
 * dp 16 on 1024 GPUs of 8-GPU servers, microbatch size 1, 1f1b-flush, full recompute. */
static ui_state *fresh3d(void)
{
    static ui_state st;
    ui_whatif w;
    memset(&w, 0, sizeof w);
    w.ngpus = 1024;
    w.tp = 8, w.pp = 8, w.dp = 16;
    w.mbs = 1;
    w.interleave = 1;
    w.schedule = SCHED_1F1B_FLUSH;
    w.recompute = RECOMPUTE_FULL;
    w.ckpt = 1; /* as ui_base_whatif opens a layout without --checkpoint-layers */
    w.straggler = -1;
    w.straggler_factor = 2;
    ui_state_init(&st, &w, 2, 8, 80 * GIB);
    ui_state_set_layout3d(&st, 96, 1536, NULL);
    return &st;
}

/* The layout rules written out here, apart from ui_layout3d_ok. */
static void assert_lays_out(const ui_whatif *w)
{
    cr_assert_eq(w->tp * w->pp * w->dp, w->ngpus, "%d x %d x %d != %d", w->tp, w->pp, w->dp,
                 w->ngpus);
    cr_assert_eq(8 % w->tp, 0, "tp %d does not divide a server", w->tp);
    cr_assert_eq(96 % (w->pp * w->interleave), 0, "pp %d x v %d", w->pp, w->interleave);
    cr_assert_eq(1536 % (w->dp * w->mbs), 0, "dp %d x mbs %d", w->dp, w->mbs);
    cr_assert(w->ngpus % 8 == 0 || 8 % w->ngpus == 0, "%d GPUs are not whole servers",
              w->ngpus);
    cr_assert(w->interleave == 1 || w->schedule == SCHED_INTERLEAVED ||
              w->schedule == SCHED_ZB_V || w->schedule == SCHED_DUALPIPEV,
              "%d chunks on schedule %d", w->interleave, w->schedule);
}

/* Presses c a round of the kinds, then C as many times, marking in seen[] each schedule
 * reached; every layout on the way lays out. */
static void schedules_reached(ui_state *st, int *seen)
{
    for (int k = 0; k < 2 * SCHED_NKINDS; k++) {
        ui_state_key(st, k < SCHED_NKINDS ? 'c' : 'C');
        seen[st->cur.schedule] = 1;
        assert_lays_out(&st->cur);
    }
}

Test(ui_state, layout3d_tp_and_pp_keep_the_gpus_and_dp_follows)
{
    ui_state *st = fresh3d();
    cr_assert_eq(ui_state_key(st, 'g'), UI_DO_REDRAW, "tp 8 is a whole server: no larger");
    cr_assert(strstr(st->note, "no larger tp 8"), "%s", st->note);
    cr_assert_eq(st->undo_n, 0);
    cr_assert(ui_state_key(st, 'G') & UI_DO_EVAL);
    cr_assert_eq(st->note[0], 0);
    cr_assert(st->cur.tp == 4 && st->cur.dp == 32 && st->cur.ngpus == 1024);
    /* pp 12 divides 96 layers but not 1024 / 4 GPUs: the next that does is 16 */
    ui_state_key(st, 'd');
    cr_assert(st->cur.pp == 16 && st->cur.dp == 16, "pp %d dp %d", st->cur.pp, st->cur.dp);
    ui_state_key(st, 'D');
    ui_state_key(st, 'D');
    cr_assert(st->cur.pp == 4 && st->cur.dp == 64, "pp %d dp %d", st->cur.pp, st->cur.dp);
    ui_state_key(st, 'G'), ui_state_key(st, 'G');
    cr_assert(st->cur.tp == 1 && st->cur.dp == 256);
    cr_assert_eq(ui_state_key(st, 'G'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no smaller tp 1"), "%s", st->note);
    assert_lays_out(&st->cur);
}

Test(ui_state, layout3d_dp_changes_the_gpus_and_skips_what_the_batch_refuses)
{
    ui_state *st = fresh3d();
    /* dp 17 .. 23 leave 1536 / dp fractional: 24 (1536 GPUs) is the next */
    ui_state_key(st, 'w');
    cr_assert(st->cur.dp == 24 && st->cur.ngpus == 1536, "dp %d gpus %d", st->cur.dp,
              st->cur.ngpus);
    ui_state_key(st, '-'); /* + and - are the same keys */
    ui_state_key(st, '-');
    cr_assert(st->cur.dp == 12 && st->cur.ngpus == 768, "dp %d", st->cur.dp);
    /* microbatch size 1 -> 2 -> 4 (3 does not divide 1536 / 12 = 128) */
    ui_state_key(st, 'n');
    ui_state_key(st, 'n');
    cr_assert_eq(st->cur.mbs, 4);
    ui_state_key(st, 'm'); /* more microbatches: smaller ones */
    cr_assert_eq(st->cur.mbs, 2);
    /* dp down from 12 with mbs 2: 11, 10, 9 leave 1536 / (2 dp) fractional: 8 */
    ui_state_key(st, 'W');
    cr_assert_eq(st->cur.dp, 8);
    assert_lays_out(&st->cur);
}

Test(ui_state, layout3d_interleave_recompute_toggles_and_schedules)
{
    ui_state *st = fresh3d();
    ui_state_key(st, 'i'); /* 2 chunks: the interleaved schedule */
    cr_assert(st->cur.interleave == 2 && st->cur.schedule == SCHED_INTERLEAVED);
    ui_state_key(st, 'i'); /* 8 x 3 = 24 divides 96 */
    cr_assert_eq(st->cur.interleave, 3);
    ui_state_key(st, 'i'); /* 8 x 4 = 32 divides 96 */
    cr_assert_eq(st->cur.interleave, 4);
    ui_state_key(st, 'i'); /* 8 x 5 = 40 does not: 8 x 6 = 48 */
    cr_assert_eq(st->cur.interleave, 6);
    for (int i = 0; i < 4; i++) ui_state_key(st, 'I');
    cr_assert(st->cur.interleave == 1 && st->cur.schedule == SCHED_1F1B_FLUSH);
    /* recompute full -> none -> selective -> full */
    ui_state_key(st, 'r');
    cr_assert_eq(st->cur.recompute, RECOMPUTE_NONE);
    ui_state_key(st, 'r');
    cr_assert_eq(st->cur.recompute, RECOMPUTE_SELECTIVE);
    ui_state_key(st, 'r');
    cr_assert_eq(st->cur.recompute, RECOMPUTE_FULL);
    ui_state_key(st, 'a');
    ui_state_key(st, 'o');
    cr_assert(st->cur.seqpar == 1 && st->cur.zero == 1);
    ui_state_key(st, 'a');
    cr_assert_eq(st->cur.seqpar, 0);
    /* every schedule, forward and back, keeps a layout (chunks follow the kind) */
    for (int k = 0; k < 2 * SCHED_NKINDS; k++) {
        cr_assert(ui_state_key(st, k < SCHED_NKINDS ? 'c' : 'C') & UI_DO_EVAL);
        assert_lays_out(&st->cur);
        const sched_traits *tr = sched_traits_of((sched_kind)st->cur.schedule);
        cr_assert(st->cur.interleave >= tr->chunks_min && st->cur.interleave <= tr->chunks_max);
    }
    cr_assert_eq(st->cur.schedule, SCHED_1F1B_FLUSH);
}

Test(ui_state, layout3d_reject_undoes_without_redo_and_random_keys_keep_a_layout)
{
    ui_state *st = fresh3d();
    ui_state_key(st, 'G');
    ui_state_key(st, 'a');
    cr_assert_eq(st->undo_n, 2);
    cr_assert(ui_state_reject(st) & UI_DO_EVAL);
    cr_assert(st->cur.seqpar == 0 && st->cur.tp == 4 && st->undo_n == 1 && st->redo_n == 0);
    ui_state_key(st, 'u');
    cr_assert(st->cur.tp == 8 && st->redo_n == 1);
    cr_assert_eq(ui_state_reject(fresh3d()), 0, "nothing to reject");
    /* any key sequence stays on layouts the rules allow */
    st = fresh3d();
    const char keys[] = "gGdDwWnNmMiIraocC+-uUkKjyf";
    unsigned seed = 12345;
    for (int i = 0; i < 3000; i++) {
        seed = seed * 1103515245u + 12345u;
        ui_state_key(st, keys[(seed >> 16) % (sizeof keys - 1)]);
        assert_lays_out(&st->cur);
        cr_assert(ui_layout3d_ok(st, &st->cur));
        /* p2p sync never on a V-placed schedule (they deadlock under it) */
        cr_assert(!st->cur.p2p_sync || (st->cur.schedule != SCHED_ZB_V &&
                                         st->cur.schedule != SCHED_DUALPIPEV));
    }
}

/* The runtime keys: k K cycle the tp overlap, j the parameter all-gather apart, y p2p, f
 * attention; each change is undoable. What `plumb plan --model` refuses (written out
 * here: tp overlap at tp 1, the all-gather without ZeRO-1 or on an asynchronous schedule,
 * p2p sync on a V-placed schedule) is refused with the check's line, the settings and the
 * undo stack kept; a layout key keeps tp overlap and the all-gather asked where the layout
 * cannot take them (n/a on screen), and the schedule keys skip zb-v and dualpipev under p2p
 * sync. */
Test(ui_state, layout3d_runtime_keys_and_the_runtime_check)
{
    ui_state *st = fresh3d();
    static const int cycle[] = { TP_OVERLAP_BACKWARD, TP_OVERLAP_FULL, TP_OVERLAP_NONE };
    for (int i = 0; i < 3; i++) {
        cr_assert(ui_state_key(st, 'k') & UI_DO_EVAL);
        cr_assert_eq(st->cur.tp_overlap, cycle[i]);
    }
    ui_state_key(st, 'K');
    cr_assert_eq(st->cur.tp_overlap, TP_OVERLAP_FULL);
    ui_state_key(st, 'f');
    ui_state_key(st, 'y');
    cr_assert(st->cur.attention == 1 && st->cur.p2p_sync == 1);
    cr_assert_eq(st->undo_n, 6);
    ui_state_key(st, 'u');
    ui_state_key(st, 'u');
    cr_assert(st->cur.attention == 0 && st->cur.p2p_sync == 0 && st->redo_n == 2);
    ui_state_key(st, 'U');
    cr_assert(st->cur.attention == 1 && st->cur.p2p_sync == 0);

    /* j without ZeRO-1: refused, nothing changes */
    ui_whatif before = st->cur;
    int undo = st->undo_n;
    cr_assert_eq(ui_state_key(st, 'j'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--overlap-param-gather: belongs to --zero 1"), "%s", st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before) && st->undo_n == undo);
    ui_state_key(st, 'o');
    cr_assert(ui_state_key(st, 'j') & UI_DO_EVAL);
    cr_assert(st->cur.opg == 1 && st->note[0] == 0);
    /* ZeRO off again, and an asynchronous schedule: taken, the all-gather kept as asked */
    ui_state_key(st, 'o');
    cr_assert(st->cur.zero == 0 && st->cur.opg == 1, "a layout key keeps the runtime asked");
    ui_state_key(st, 'o');
    ui_state_key(st, 'c'); /* 1f1b-flush -> pipedream */
    cr_assert(st->cur.schedule == SCHED_PIPEDREAM && st->cur.opg == 1);
    ui_state_key(st, 'j'); /* off: always taken */
    cr_assert_eq(st->cur.opg, 0);
    before = st->cur;
    cr_assert_eq(ui_state_key(st, 'j'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--overlap-param-gather: expected a synchronous schedule (got "
                     "pipedream"), "%s", st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
    ui_state_key(st, 'C');

    /* tp 1 keeps the tp overlap asked (n/a); k asks for the next one and is refused */
    for (int i = 0; i < 3; i++) ui_state_key(st, 'G');
    cr_assert(st->cur.tp == 1 && st->cur.tp_overlap == TP_OVERLAP_FULL);
    before = st->cur;
    cr_assert_eq(ui_state_key(st, 'K'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--tp-overlap: expected --tp 2 or more"), "%s", st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
    cr_assert(ui_state_key(st, 'k') & UI_DO_EVAL); /* full -> none */
    cr_assert_eq(st->cur.tp_overlap, TP_OVERLAP_NONE);
    cr_assert_eq(ui_state_key(st, 'k'), UI_DO_REDRAW);
    cr_assert_eq(st->cur.tp_overlap, TP_OVERLAP_NONE);

    /* p2p sync: every schedule but the V-placed ones, forward and back */
    st = fresh3d();
    ui_state_key(st, 'y');
    int seen[SCHED_NKINDS] = { 0 };
    schedules_reached(st, seen);
    for (int k = 0; k < SCHED_NKINDS; k++)
        cr_assert_eq(seen[k], sched_traits_of((sched_kind)k)->place != SCHED_PLACE_V,
                     "schedule %s", sched_kind_name((sched_kind)k));
    /* on zb-v, y asks for p2p sync and is refused with the check's line */
    st = fresh3d();
    for (int k = 0; k < SCHED_NKINDS && st->cur.schedule != SCHED_ZB_V; k++)
        ui_state_key(st, 'c');
    cr_assert_eq(st->cur.schedule, SCHED_ZB_V);
    before = st->cur;
    cr_assert_eq(ui_state_key(st, 'y'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--p2p: expected overlap with schedule zb-v"), "%s", st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
}

/* E toggles grad-sync (the reduction after the whole loop) through the runtime check:
 * undoable; under it the schedule keys skip the asynchronous kinds, on which E is refused;
 * with the parameter all-gather apart taken (ZeRO 1) E is refused, and so is the ZeRO key
 * that would take it under grad-sync end, each with plan --model's line. */
Test(ui_state, layout3d_grad_sync_key)
{
    ui_state *st = fresh3d();
    ui_whatif before = st->cur;
    cr_assert(ui_state_key(st, 'E') & UI_DO_EVAL);
    cr_assert(st->cur.grad_sync_end == 1 && !ui_whatif_equal(&st->cur, &before));
    ui_state_key(st, 'u');
    cr_assert(st->cur.grad_sync_end == 0 && ui_whatif_equal(&st->cur, &before));
    ui_state_key(st, 'U');
    cr_assert_eq(st->cur.grad_sync_end, 1);
    int seen[SCHED_NKINDS] = { 0 };
    schedules_reached(st, seen);
    for (int k = 0; k < SCHED_NKINDS; k++)
        cr_assert_eq(seen[k], !sched_traits_of((sched_kind)k)->async, "schedule %s",
                     sched_kind_name((sched_kind)k));
    st = fresh3d(); /* on pipedream E is refused */
    ui_state_key(st, 'c');
    cr_assert_eq(st->cur.schedule, SCHED_PIPEDREAM);
    before = st->cur;
    int undo = st->undo_n;
    cr_assert_eq(ui_state_key(st, 'E'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--grad-sync: expected overlap with schedule pipedream"), "%s",
              st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before) && st->undo_n == undo);
    st = fresh3d(); /* ZeRO 1 with the all-gather apart: E refused */
    ui_state_key(st, 'o');
    ui_state_key(st, 'j');
    cr_assert(st->cur.zero == 1 && st->cur.opg == 1);
    before = st->cur;
    cr_assert_eq(ui_state_key(st, 'E'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--overlap-param-gather: expected --grad-sync overlap"), "%s",
              st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
    ui_state_key(st, 'o'); /* ZeRO 0: the all-gather n/a, E taken */
    cr_assert(ui_state_key(st, 'E') & UI_DO_EVAL);
    cr_assert(st->cur.grad_sync_end == 1 && st->cur.zero == 0 && st->cur.opg == 1);
    before = st->cur;
    cr_assert_eq(ui_state_key(st, 'o'), UI_DO_REDRAW); /* back to ZeRO 1: refused */
    cr_assert(strstr(st->note, "--overlap-param-gather: expected --grad-sync overlap"), "%s",
              st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
}

/* ui_layout3d_check gives search3d_runtime_check the opened layout's options with the
 * what-if's own put in: a precision the opened layout has (fp16) refuses bf16 optimizer
 * state whatever the keys do, and checkpoint layers count only under full recompute. */
Test(ui_state, layout3d_check_takes_the_opened_options)
{
    ui_state *st = fresh3d();
    layout3d_options o;
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.precision = DEV_FP16;
    o.checkpoint_layers = 2;
    ui_state_set_layout3d(st, 96, 1536, &o);
    char why[256];
    cr_assert_eq(ui_layout3d_check(st, &st->cur, 0, why, sizeof why), 0, "%s", why);
    ui_whatif w = st->cur;
    w.recompute = RECOMPUTE_SELECTIVE; /* the layout drops the checkpoint interval */
    cr_assert_eq(ui_layout3d_check(st, &w, 0, why, sizeof why), 0, "%s", why);
    cr_assert_eq(why[0], 0);
    cr_assert_eq(ui_whatif_layout3d(&o, &w).checkpoint_layers, -1);
    cr_assert_eq(ui_whatif_layout3d(&o, &st->cur).checkpoint_layers, 1); /* the what-if's */
    w = st->cur;
    w.ckpt = 2;
    cr_assert_eq(ui_whatif_layout3d(&o, &w).checkpoint_layers, 2);
    o.optimizer_state = DEV_BF16;
    ui_state_set_layout3d(st, 96, 1536, &o);
    cr_assert_eq(ui_layout3d_check(st, &st->cur, 0, why, sizeof why), -1);
    cr_assert(strstr(why, "--optimizer-state bf16: belongs to --precision bf16"), "%s", why);
    /* every key that changes the settings is refused with that line */
    cr_assert_eq(ui_state_key(st, 'f'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--optimizer-state bf16"), "%s", st->note);
    cr_assert_eq(st->cur.attention, 0);
}

/* The 2D view (a plan file's runtime, kept by every what-if): c and C pass by the kinds
 * search3d_runtime_check refuses it (p2p sync: zb-v and dualpipev; grad-sync end or the
 * all-gather apart: pipedream and 2bw) and reach every other; with no runtime, every kind. */
Test(ui_state, schedule_keys_pass_the_kinds_the_plan_runtime_refuses)
{
    for (int rt = 0; rt < 4; rt++) {
        ui_state *st = fresh();
        st->cur.p2p_sync = rt == 1;
        st->cur.grad_sync_end = rt == 2;
        st->cur.opg = rt == 3;
        int seen[SCHED_NKINDS] = { 0 };
        for (int k = 0; k < 2 * SCHED_NKINDS; k++) {
            int f = ui_state_key(st, k < SCHED_NKINDS ? 'c' : 'C');
            cr_assert(f & UI_DO_EVAL);
            seen[st->cur.schedule] = 1;
            cr_assert_eq(ui_runtime2d_check(st, &st->cur, NULL, 0), 0);
        }
        for (int k = 0; k < SCHED_NKINDS; k++) {
            const sched_traits *tr = sched_traits_of((sched_kind)k);
            int refused = rt == 1 ? tr->place == SCHED_PLACE_V : rt >= 2 ? tr->async : 0;
            cr_assert_eq(seen[k], !refused, "runtime %d, schedule %s", rt,
                         sched_kind_name((sched_kind)k));
        }
    }
    ui_whatif w = fresh()->cur; /* the check's own line */
    w.p2p_sync = 1, w.schedule = SCHED_DUALPIPEV;
    char why[256];
    cr_assert_eq(ui_runtime2d_check(fresh(), &w, why, sizeof why), -1);
    cr_assert(strstr(why, "--p2p: expected overlap with schedule dualpipev"), "%s", why);
}

/* The 2D check reads the plan file's settings (ui_state_set_plan: search3d_options_from_plan
 * of the plan as written) with the what-if's schedule and runtime put in; without a file,
 * every setting free. */
Test(ui_state, runtime2d_check_reads_the_plan_file)
{
    plumb_err err = {{0}};
    plan *pl = plan_load("examples/plans/vgg16-4stage-1f1b.json", &err);
    cr_assert_not_null(pl, "%s", err.msg);
    ui_state *st = fresh();
    search3d_options want, free_rt;
    search3d_options_init(&free_rt);
    cr_assert_eq(memcmp(&st->plan_rt, &free_rt, sizeof free_rt), 0);
    ui_state_set_plan(st, pl);
    search3d_options_from_plan(pl, NULL, &want);
    cr_assert_eq(memcmp(&st->plan_rt, &want, sizeof want), 0);
    cr_assert_eq(st->plan_rt.zero, 0);
    ui_whatif w = st->cur;
    w.opg = 1; /* the all-gather apart is ZeRO-1's: this file's zero 0 refuses it */
    char why[256];
    cr_assert_eq(ui_runtime2d_check(st, &w, why, sizeof why), -1);
    cr_assert(strstr(why, "--overlap-param-gather: belongs to --zero 1"), "%s", why);
    w.opg = 0, w.grad_sync_end = 1, w.schedule = SCHED_2BW; /* the what-if's, not the file's */
    cr_assert_eq(ui_runtime2d_check(st, &w, why, sizeof why), -1);
    cr_assert(strstr(why, "--grad-sync: expected overlap with schedule 2bw"), "%s", why);
    w.schedule = SCHED_ZB_H1;
    cr_assert_eq(ui_runtime2d_check(st, &w, why, sizeof why), 0, "%s", why);
    cr_assert_eq(why[0], 0);
    ui_state_set_plan(st, NULL);
    cr_assert_eq(memcmp(&st->plan_rt, &free_rt, sizeof free_rt), 0);
    w = st->cur, w.opg = 1; /* no file: every other setting free */
    cr_assert_eq(ui_runtime2d_check(st, &w, NULL, 0), 0);
    plan_free(pl);
}

/* GPT-3 175B's 96 layers on 1024 GPUs of 8-GPU servers with flash attention and sequences
 * of `seq` tokens: tp 2 x pp 8 x dp 64, cp 1. */
static ui_state *fresh3d_cp(long long seq)
{
    ui_state *st = fresh3d();
    ui_whatif *w = &st->cur;
    w->tp = 2, w->pp = 8, w->dp = 64, w->cp = 1;
    w->attention = LLM_ATTN_FLASH;
    layout3d_options o;
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.seq = seq;
    ui_state_set_layout3d(st, 96, 1536, &o);
    return st;
}

/* v V change the context-parallel ranks with the GPU count kept (dp follows), only to
 * values that apply: flash attention, 2 cp dividing the sequence, tp x cp dividing a
 * server (g G keep that too); where none does the note says why and nothing is recorded;
 * each step is undoable and lays out as plan --model --cp would (ui_whatif_layout3d). */
Test(ui_state, layout3d_cp_keys_take_only_the_values_that_apply)
{
    ui_state *st = fresh3d_cp(2048);
    cr_assert(ui_state_key(st, 'v') & UI_DO_EVAL);
    cr_assert(st->cur.cp == 2 && st->cur.dp == 32 && st->cur.ngpus == 1024, "cp %d dp %d",
              st->cur.cp, st->cur.dp);
    layout3d_options o = ui_whatif_layout3d(&st->lopt, &st->cur);
    cr_assert(o.cp == 2 && o.tp == 2 && o.dp == 32 && o.gpus == 1024);
    ui_state_key(st, 'v'); /* cp 3 does not divide a server's 8 / tp 2: cp 4 */
    cr_assert(st->cur.cp == 4 && st->cur.dp == 16, "cp %d dp %d", st->cur.cp, st->cur.dp);
    cr_assert(ui_layout3d_ok(st, &st->cur));
    /* tp 2 x cp 8 = 16 is more than a server: no larger cp, nothing recorded */
    cr_assert_eq(ui_state_key(st, 'v'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no larger cp 4") && strstr(st->note, "tp x cp"), "%s",
              st->note);
    cr_assert_eq(st->undo_n, 2);
    /* g keeps tp x cp within a server: tp 4 x cp 4 is 16 */
    cr_assert_eq(ui_state_key(st, 'g'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no larger tp 2") && strstr(st->note, "tp x cp"), "%s",
              st->note);
    ui_state_key(st, 'V');
    ui_state_key(st, 'g');
    cr_assert(st->cur.tp == 4 && st->cur.cp == 2 && st->cur.dp == 16, "tp %d cp %d dp %d",
              st->cur.tp, st->cur.cp, st->cur.dp);
    ui_state_key(st, 'w'); /* dp up: the GPU count follows, tp x cp x pp x dp */
    cr_assert_eq(st->cur.ngpus, 4 * 2 * 8 * st->cur.dp);
    ui_state_key(st, 'V');
    cr_assert(st->cur.cp == 1 && st->cur.tp * st->cur.pp * st->cur.dp == st->cur.ngpus);
    cr_assert_eq(ui_state_key(st, 'V'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no smaller cp 1"), "%s", st->note);
    while (st->undo_n) ui_state_key(st, 'u');
    cr_assert(st->cur.cp == 1 && st->cur.tp == 2 && st->cur.dp == 64);

    /* 2 x cp must divide the sequence: 2052 tokens take cp 2, not 4 */
    st = fresh3d_cp(2052);
    ui_state_key(st, 'v');
    cr_assert_eq(st->cur.cp, 2);
    cr_assert_eq(ui_state_key(st, 'v'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no larger cp 2") && strstr(st->note, "sequence of 2052"),
              "%s", st->note);
    char why[256];
    cr_assert_eq(ui_cp_applies(st, &st->cur, 4, why, sizeof why), 0);
    cr_assert(strstr(why, "2 x cp = 8 to divide the sequence of 2052 tokens"), "%s", why);
    cr_assert(ui_cp_applies(st, &st->cur, 1, why, sizeof why) && !why[0]);

    /* a sliding window shorter than the sequence takes no context parallelism (as plan
     * --model --cp refuses it); one as long as the sequence does */
    st = fresh3d_cp(2048);
    st->window = 1024;
    cr_assert_eq(ui_state_key(st, 'v'), UI_DO_REDRAW);
    cr_assert_eq(st->cur.cp, 1);
    cr_assert(strstr(st->note, "no larger cp 1: cp 2: the sliding window of 1024 keys is "
                     "shorter than the sequence of 2048 tokens"), "%s", st->note);
    cr_assert_eq(ui_cp_applies(st, &st->cur, 2, why, sizeof why), 0);
    st->window = 2048;
    cr_assert(ui_state_key(st, 'v') & UI_DO_EVAL);
    cr_assert_eq(st->cur.cp, 2);

    /* standard attention has no context parallelism: the note says to switch (f) */
    st = fresh3d_cp(2048);
    st->cur.attention = LLM_ATTN_STANDARD;
    cr_assert_eq(ui_state_key(st, 'v'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no larger cp 1: cp 2 needs flash attention (f)"), "%s",
              st->note);
    cr_assert_eq(st->cur.cp, 1);

    /* any key sequence stays on layouts with tp x cp within a server */
    st = fresh3d_cp(2048);
    const char keys[] = "gGdDwWvVvnNiIcCu";
    unsigned seed = 777;
    for (int i = 0; i < 2000; i++) {
        seed = seed * 1103515245u + 12345u;
        ui_state_key(st, keys[(seed >> 16) % (sizeof keys - 1)]);
        const ui_whatif *w = &st->cur;
        cr_assert_eq(w->tp * w->cp * w->pp * w->dp, w->ngpus);
        cr_assert_eq(8 % (w->tp * w->cp), 0, "tp %d x cp %d", w->tp, w->cp);
        cr_assert_eq(2048 % (2 * w->cp), 0);
        cr_assert(ui_layout3d_ok(st, w));
    }
}

/* Megatron-Core's uneven splits (plumb ui --model --decoder-first/last-pipeline-num-layers,
 * --account-for-embedding/loss-in-pipeline-split) ride every layout the keys reach: with
 * the embedding and the loss counted, Llama 3.1 405B's 126 blocks lay out where 128
 * divides over pp x interleave (never the even split's rule: 126 / 8 is no integer), the
 * keys step to the pp and interleave Megatron takes, and each layout carries the split
 * (ui_whatif_layout3d). */
Test(ui_state, layout3d_uneven_split_keys_take_what_megatron_takes)
{
    ui_state *st = fresh3d();
    layout3d_options o;
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.split.account_embedding = o.split.account_loss = 1;
    ui_state_set_layout3d(st, 126, 1536, &o);
    cr_assert(ui_layout3d_ok(st, &st->cur), "tp 8 x pp 8: 128 / 8 virtual stages");
    char why[256];
    cr_assert(ui_split_ok(st, &st->cur, why, sizeof why) && !why[0], "%s", why);
    cr_assert(ui_state_key(st, 'd') & UI_DO_EVAL);
    cr_assert(st->cur.pp == 16 && st->cur.dp == 8, "pp %d dp %d", st->cur.pp, st->cur.dp);
    layout3d_options lo = ui_whatif_layout3d(&st->lopt, &st->cur);
    cr_assert(lo.split.account_embedding && lo.split.account_loss && lo.pp == 16,
              "the split dropped");
    /* i: interleave 2 (128 / 32), then 3 skipped (128 / 48), 4 (128 / 64) */
    ui_state_key(st, 'i');
    cr_assert_eq(st->cur.interleave, 2);
    ui_state_key(st, 'i');
    cr_assert_eq(st->cur.interleave, 4);
    /* the schedules that do not place virtual stage k on rank k % pp are skipped */
    for (int k = 0; k < 2 * SCHED_NKINDS; k++) {
        ui_state_key(st, 'c');
        cr_assert(st->cur.schedule != SCHED_ZB_V && st->cur.schedule != SCHED_DUALPIPEV,
                  "c reached %d under an uneven split", st->cur.schedule);
    }
    ui_whatif w = st->cur;
    w.schedule = SCHED_ZB_V, w.interleave = 2;
    cr_assert_not(ui_split_ok(st, &w, why, sizeof why));
    cr_assert(strstr(why, "--account-for-embedding-in-pipeline-split: expected a schedule "
                     "that places virtual stage k on pipeline rank k % pp"), "%s", why);

    /* first and last counts: GPT-3's 96 blocks, 6 on rank 0 and on rank pp - 1; pp 4
     * leaves 84 for 2 ranks, pp 2 none for the middle: D stops at 4 and says why */
    st = fresh3d();
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.split.first_blocks = o.split.last_blocks = 6;
    ui_state_set_layout3d(st, 96, 1536, &o);
    cr_assert(ui_layout3d_ok(st, &st->cur));
    ui_state_key(st, 'D');
    cr_assert_eq(st->cur.pp, 4);
    cr_assert_eq(ui_state_key(st, 'D'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no smaller pp 4: pp 2: --decoder-last-pipeline-num-layers: "
                     "expected the first and last ranks to hold all 96 blocks at --pp 2"),
              "%s", st->note);
    cr_assert_eq(st->undo_n, 1);
    /* the even split would take pp 2 here */
    st->lopt.split.first_blocks = st->lopt.split.last_blocks = 0;
    cr_assert(ui_state_key(st, 'D') & UI_DO_EVAL);
    cr_assert_eq(st->cur.pp, 2);
}

/* Megatron-Core's layout string (plumb ui --model --pipeline-layout) fixes pp x interleave
 * at its stage count and interleave at its stages per rank: GPT-3's 96 blocks as
 * "Et*12|(t*12|)*6,t*12L" (8 stages) at pp 8: d, D, i and I are refused with the string's
 * line and nothing changes; w (dp) and c (to schedules that keep one chunk on rank k % pp)
 * carry it; any key sequence stays at pp 8 x interleave 1. */
Test(ui_state, layout3d_pipeline_layout_keeps_pp_and_interleave)
{
    ui_state *st = fresh3d();
    layout3d_options o;
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.pipeline_layout = "Et*12|(t*12|)*6,t*12L";
    ui_state_set_layout3d(st, 96, 1536, &o);
    char why[256];
    cr_assert(ui_split_ok(st, &st->cur, why, sizeof why) && !why[0], "%s", why);
    cr_assert_eq(ui_state_key(st, 'd'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no larger pp 8: pp 16: --pipeline-layout: expected a number "
                     "of virtual stages ('|'-separated) that is a multiple of --pp 16 (got 8)"),
              "%s", st->note);
    cr_assert_eq(ui_state_key(st, 'D'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "no smaller pp 8: pp 4: --interleave: expected the layout's 8 "
                     "virtual stages / --pp 4 = 2 (got 1)"), "%s", st->note);
    cr_assert_eq(ui_state_key(st, 'i'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--interleave: expected the layout's 8 virtual stages / --pp 8 "
                     "= 1 (got 2)"), "%s", st->note);
    cr_assert(st->cur.pp == 8 && st->cur.interleave == 1 && st->undo_n == 0);
    cr_assert(ui_state_key(st, 'w') & UI_DO_EVAL);
    layout3d_options lo = ui_whatif_layout3d(&st->lopt, &st->cur);
    cr_assert(lo.pipeline_layout == o.pipeline_layout && lo.dp > 16, "dp %d, layout %s", lo.dp,
              lo.pipeline_layout ? lo.pipeline_layout : "dropped");
    const char keys[] = "gGdDwWnNiIcCu";
    unsigned seed = 4242;
    for (int i = 0; i < 500; i++) {
        seed = seed * 1103515245u + 12345u;
        ui_state_key(st, keys[(seed >> 16) % (sizeof keys - 1)]);
        cr_assert(st->cur.pp == 8 && st->cur.interleave == 1, "pp %d x interleave %d",
                  st->cur.pp, st->cur.interleave);
        cr_assert(st->cur.schedule != SCHED_ZB_V && st->cur.schedule != SCHED_DUALPIPEV);
    }
}

/* FP8 primary weights (plumb ui --model --fp8-param-gather) ride every layout: a key
 * that would leave ZeRO 1 under them is refused with plan --model's line, nothing
 * recorded; the what-if carries them (undo, pin and the kept layouts tell it apart). */
Test(ui_state, layout3d_fp8_param_gather_refuses_zero_0)
{
    ui_state *st = fresh3d();
    layout3d_options o;
    layout3d_options_init(&o);
    o.global_batch = 1536;
    o.precision = DEV_FP8;
    o.zero = 1;
    ui_state_set_layout3d(st, 96, 1536, &o);
    st->cur.zero = 1, st->cur.fp8pg = 1;
    cr_assert_eq(ui_state_key(st, 'o'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--fp8-param-gather: expected --zero 1"), "%s", st->note);
    cr_assert(st->cur.zero == 1 && st->cur.fp8pg == 1 && st->undo_n == 0);
    ui_state_key(st, 'w');
    cr_assert(st->cur.fp8pg == 1 && st->cur.dp > 16, "dp %d", st->cur.dp);
    ui_whatif w = st->cur;
    w.fp8pg = 0;
    cr_assert_not(ui_whatif_equal(&w, &st->cur));
    st->cur.fp8pg = 0; /* without them zero 0 is plan's to take */
    cr_assert(ui_state_key(st, 'o') & UI_DO_EVAL);
    cr_assert_eq(st->cur.zero, 0);
}

/* R steps full recomputation's checkpoint interval: 1 to the 12 blocks of a stage (96
 * layers over pp 8), then 0 (the stage's input alone), then 1 again; each step a what-if
 * (evaluated, undone by u). Under another recompute kind it is refused with a line naming
 * --checkpoint-layers and nothing changes; pp 16 (6 blocks a stage) bounds it at 6. */
Test(ui_state, checkpoint_key_steps_the_interval_of_full_recompute)
{
    ui_state *st = fresh3d();
    cr_assert_eq(st->cur.ckpt, 1);
    cr_assert(ui_state_key(st, 'R') & UI_DO_EVAL);
    cr_assert_eq(st->cur.ckpt, 2);
    for (int k = 3; k <= 12; k++) {
        ui_state_key(st, 'R');
        cr_assert_eq(st->cur.ckpt, k);
    }
    ui_state_key(st, 'R');
    cr_assert_eq(st->cur.ckpt, 0, "past the stage's 12 blocks: %d", st->cur.ckpt);
    ui_state_key(st, 'R');
    cr_assert_eq(st->cur.ckpt, 1);
    cr_assert(ui_state_key(st, 'u') & UI_DO_EVAL);
    cr_assert_eq(st->cur.ckpt, 0);
    ui_state_key(st, 'u');
    cr_assert_eq(st->cur.ckpt, 12);
    ui_state_key(st, 'd'); /* pp 16: 6 blocks a stage */
    cr_assert_eq(st->cur.pp, 16);
    st->cur.ckpt = 5;
    ui_state_key(st, 'R');
    cr_assert_eq(st->cur.ckpt, 6);
    ui_state_key(st, 'R');
    cr_assert_eq(st->cur.ckpt, 0);
    ui_state_key(st, 'r'); /* full -> none */
    cr_assert_eq(st->cur.recompute, RECOMPUTE_NONE);
    ui_whatif before = st->cur;
    int undo = st->undo_n;
    cr_assert_eq(ui_state_key(st, 'R'), UI_DO_REDRAW);
    cr_assert(strstr(st->note, "--checkpoint-layers: the interval of full recomputation's "
                     "checkpoints (r to full first; recompute is none)"), "%s", st->note);
    cr_assert(ui_whatif_equal(&st->cur, &before));
    cr_assert_eq(st->undo_n, undo);
}
