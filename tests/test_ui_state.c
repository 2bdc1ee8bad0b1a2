/* test_ui_state.c: the dashboard's state machine without drawing or simulating: what-if
 * keys change the settings within their limits, every change is undoable and redoable,
 * pinning keeps a copy, and view keys stay inside the timeline. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/plan.h"
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
