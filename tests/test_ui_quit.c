/* test_ui_quit.c: quitting the 3D dashboard while its background worker lays out a slow
 * layout (GPT-3 175B at tp 1 x pp 8 x dp 128 on 1024 A100s, whose replicas share their
 * servers' ports and so are simulated in full: seconds) does not wait for it: the worker is
 * left to finish alone with the app's base, which the app gives up, and the app is freed
 * at once. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "ui/app.h"

#define GPT3 "examples/llm/gpt3-175b.json"
#define A100 "profiles/clusters/dgx-a100-80g.json"

Test(ui_quit, stop_leaves_a_layout_in_progress_to_the_worker)
{
    ui_app a;
    layout3d_options o;
    layout3d_options_init(&o);
    o.gpus = 1024, o.tp = 8, o.pp = 8, o.dp = 16;
    o.global_batch = 1536;
    o.microbatch_size = 1;
    o.recompute = RECOMPUTE_FULL;
    plumb_err e;
    err_clear(&e);
    cr_assert_eq(ui_app_open_model(&a, GPT3, A100, &o, "/tmp", &e), 0, "%s", e.msg);
    cr_assert_eq(ui_app_async_start(&a), 0);
    for (int i = 0; i < 3; i++) ui_app_key(&a, 'G'); /* tp 4, 2, then 1: dp 128 */
    cr_assert_eq(a.pending, 1);
    /* the worker takes tp 4 (a fraction of a second), then tp 1 (seconds) */
    nanosleep(&(struct timespec){1, 500000000}, NULL);
    ui_app_async_stop(&a);
    cr_assert_null(a.worker);
    cr_assert_eq(a.pending, 0);
    cr_assert_null(a.base.model, "the base went to the worker still laying out tp 1");
    ui_app_free(&a);
}
