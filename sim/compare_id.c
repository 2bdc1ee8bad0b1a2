/* compare_id.c: what a compared run ran (its model and its stages' layer ranges), and the
 * check that a prediction and a measurement ran the same model and plan before plumb
 * compare lines their figures up (sim/compare.h). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "sim/compare.h"

/* Copies model (may be NULL) and n stage ranges (first/last interleaved in fl) into s. */
static int set_id(compare_side *s, const char *model, int n, const int *fl, const char *file,
                  plumb_err *err)
{
    if (model && *model && !(s->model = strdup(model)))
        return err_set(err, file, NULL, "out of memory");
    if (n > 0) {
        if (!(s->layers = malloc(2 * (size_t)n * sizeof *s->layers)))
            return err_set(err, file, NULL, "out of memory");
        memcpy(s->layers, fl, 2 * (size_t)n * sizeof *s->layers);
        s->nlayer_stages = n;
    }
    return 0;
}

int compare_id_from_timeline(const timeline *tl, const char *file, compare_side *s,
                             plumb_err *err)
{
    return set_id(s, tl->model, tl->nstage_layers, tl->stage_layers, file, err);
}

int compare_id_from_report(const cJSON *root, const char *file, compare_side *s,
                           plumb_err *err)
{
    jctx c = {file, err};
    const char *model = NULL;
    const cJSON *stages;
    int n, i = 0, rc = -1;
    if (json_get_str(&c, root, "", "model", 0, &model) ||
        json_get_arr(&c, root, "", "stages", 1, &stages, &n))
        return -1;
    int *fl = malloc(2 * ((size_t)n + 1) * sizeof *fl);
    if (!fl)
        return err_set(err, file, NULL, "out of memory");
    for (const cJSON *st = stages->child; st; st = st->next, i++) {
        char p[64];
        long long a = -1, b = -1;
        json_path_idx(p, sizeof p, "", "stages", i);
        if (json_get_int(&c, st, p, "first_layer", 0, 0, 1 << 30, &a) ||
            json_get_int(&c, st, p, "last_layer", 0, 0, 1 << 30, &b))
            goto done;
        if (a < 0 || b < 0) { /* a report without layer ranges: nothing to check */
            n = 0;
            break;
        }
        fl[2 * i] = (int)a;
        fl[2 * i + 1] = (int)b;
    }
    rc = set_id(s, model, n, fl, file, err);
done:
    free(fl);
    return rc;
}

int compare_id_check(const compare_side *pred, const compare_side *meas, plumb_err *err)
{
    if (pred->model && meas->model && strcmp(pred->model, meas->model) != 0)
        return err_set(err, meas->file, "model", "expected \"%s\", the model of the prediction "
                       "%s: both runs must be of the same model and plan (got \"%s\")",
                       pred->model, pred->file, meas->model);
    if (!pred->nlayer_stages || !meas->nlayer_stages)
        return 0;
    if (pred->nlayer_stages != meas->nlayer_stages)
        return err_set(err, meas->file, "stages", "expected the %d stages of the prediction %s, "
                       "a run of the same plan (got %d)", pred->nlayer_stages, pred->file,
                       meas->nlayer_stages);
    for (int i = 0; i < pred->nlayer_stages; i++) {
        const int *p = &pred->layers[2 * i], *m = &meas->layers[2 * i];
        if (p[0] != m[0] || p[1] != m[1]) {
            char path[48];
            snprintf(path, sizeof path, "stages[%d]", i);
            return err_set(err, meas->file, path, "expected layers %d..%d, as in the prediction "
                           "%s: both runs must be of the same plan (got layers %d..%d)", p[0],
                           p[1], pred->file, m[0], m[1]);
        }
    }
    return 0;
}
