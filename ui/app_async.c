/* app_async.c: a transformer's layouts evaluated on one background thread, so that the
 * terminal answers every key at once while a 1024-GPU layout is simulated (tens to
 * hundreds of ms): keys post their settings (newest wins), the front end polls for the
 * answer (ui/app.h). Quitting does not wait for a layout in progress: the thread is left
 * to finish it (or to end with the process), owning what it reads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app.h"

struct ui_worker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a job posted, quit, or an answer ready */
    ui_base base;           /* the app's base (the same pointers), read only while the
                               thread runs; the thread's own once orphaned */
    int quit, orphan;       /* orphan: the app quit while a layout was in progress */
    int has_job, busy;      /* a job waiting; the thread evaluating one */
    ui_whatif job;
    int has_done;           /* an answer not yet taken: `done` for settings `done_w` */
    ui_whatif done_w;
    ui_result done;
};

static void *run(void *arg)
{
    struct ui_worker *k = arg;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->quit && !k->has_job) pthread_cond_wait(&k->cv, &k->mu);
        if (k->quit) break;
        ui_whatif w = k->job;
        k->has_job = 0;
        k->busy = 1;
        pthread_mutex_unlock(&k->mu);
        ui_result r;
        memset(&r, 0, sizeof r);
        ui_evaluate(&k->base, &w, &r);
        pthread_mutex_lock(&k->mu);
        if (k->orphan) { /* nobody waits: free what the app left to the thread */
            pthread_mutex_unlock(&k->mu);
            ui_result_free(&r);
            ui_base_free(&k->base);
            pthread_cond_destroy(&k->cv);
            pthread_mutex_destroy(&k->mu);
            free(k);
            return NULL;
        }
        ui_result_free(&k->done); /* an answer nobody took: a newer job superseded it */
        k->done = r;
        k->done_w = w;
        k->has_done = 1;
        k->busy = 0;
        pthread_cond_broadcast(&k->cv);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

int ui_app_async_start(ui_app *a)
{
    if (!a->loaded || !a->base.model || a->worker) return 0;
    struct ui_worker *k = calloc(1, sizeof *k);
    if (!k) return -1;
    k->base = a->base;
    if (pthread_mutex_init(&k->mu, NULL)) goto fail_mu;
    if (pthread_cond_init(&k->cv, NULL)) goto fail_cv;
    if (pthread_create(&k->th, NULL, run, k)) goto fail_th;
    a->worker = k;
    return 0;
fail_th:
    pthread_cond_destroy(&k->cv);
fail_cv:
    pthread_mutex_destroy(&k->mu);
fail_mu:
    free(k);
    return -1;
}

void ui_app_async_stop(ui_app *a)
{
    struct ui_worker *k = a->worker;
    if (!k) return;
    pthread_mutex_lock(&k->mu);
    k->quit = 1;
    if (k->busy) { /* a layout in progress: the thread finishes it alone and frees it all */
        k->orphan = 1;
        memset(&a->base, 0, sizeof a->base); /* now the thread's (k->base) */
        ui_result_free(&k->done);
        pthread_mutex_unlock(&k->mu);
        pthread_detach(k->th);
        a->worker = NULL;
        a->pending = 0;
        return;
    }
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->th, NULL);
    ui_result_free(&k->done);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    free(k);
    a->worker = NULL;
    a->pending = 0;
}

int ui_app_async_evaluating(ui_app *a)
{
    struct ui_worker *k = a->worker;
    if (!k) return 0;
    pthread_mutex_lock(&k->mu);
    int on = k->busy && !k->has_job;
    pthread_mutex_unlock(&k->mu);
    return on;
}

int ui_app_async_post(ui_app *a)
{
    struct ui_worker *k = a->worker;
    if (!k) return -1;
    pthread_mutex_lock(&k->mu);
    k->job = a->st->cur;
    k->has_job = 1;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    a->pending = 1;
    return 0;
}

int ui_app_poll(ui_app *a)
{
    struct ui_worker *k = a->worker;
    if (!k) return 0;
    ui_result r;
    ui_whatif w;
    pthread_mutex_lock(&k->mu);
    int got = k->has_done;
    if (got) {
        r = k->done;
        w = k->done_w;
        memset(&k->done, 0, sizeof k->done);
        k->has_done = 0;
    }
    pthread_mutex_unlock(&k->mu);
    if (!got) return 0;
    if (a->pending && ui_whatif_equal(&w, &a->st->cur)) {
        ui_app_take(a, &r, 0);
        return 1;
    }
    ui_app_keep(a, &w, &r); /* the keys moved on: keep it for a revisit */
    return 0;
}

void ui_app_wait(ui_app *a)
{
    struct ui_worker *k = a->worker;
    while (k && a->pending) {
        pthread_mutex_lock(&k->mu);
        while (!k->has_done && (k->has_job || k->busy)) pthread_cond_wait(&k->cv, &k->mu);
        int idle = !k->has_done;
        pthread_mutex_unlock(&k->mu);
        ui_app_poll(a);
        if (idle) a->pending = 0; /* nothing left to answer (cannot happen when pending) */
    }
}
