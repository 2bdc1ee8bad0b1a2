/* train_setup.c: the data sets and the resumed checkpoint of a `plumb train` run (see
 * train_setup.h). */
#include "exec/train_setup.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


int train_data_load(const model *m, const char *model_path, const train_data_spec *spec,
                    dataset **train, dataset **test, plumb_err *err)
{
    const char *kind = spec->kind ? spec->kind : data_default_kind(m);
    const int ntest = spec->samples / 4 > 0 ? spec->samples / 4 : 1;
    dataset *tr = NULL, *te = NULL;
    *train = *test = NULL;
    /* a source the kind does not read is refused, not ignored */
    if (spec->text && strcmp(kind, "text"))
        return err_set(err, NULL, "--text", "belongs to --data text (the data is %s%s)", kind,
                       spec->kind ? "" : ", the model's default");
    if (spec->dir && strcmp(kind, "fashion-mnist"))
        return err_set(err, NULL, "--data-dir", "belongs to --data fashion-mnist (the data is "
                       "%s%s)", kind, spec->kind ? "" : ", the model's default");
    if (!strcmp(kind, "fashion-mnist")) {
        if (!(tr = data_fashion_mnist(spec->dir, 1, err)) ||
            !(te = data_fashion_mnist(spec->dir, 0, err)))
            goto fail;
    } else if (!strcmp(kind, "text")) {
        if (!(tr = data_text(m, spec->text, spec->samples, m->seed, err)) ||
            !(te = data_text(m, spec->text, ntest, m->seed + 1000003, err)))
            goto fail;
    } else if (!strcmp(kind, "synthetic")) {
        if (!(tr = data_synthetic(m, spec->samples, m->seed, err)) ||
            !(te = data_synthetic(m, ntest, m->seed + 1000003, err)))
            goto fail;
    } else {
        err_set(err, NULL, "--data", "expected fashion-mnist, synthetic or text (got \"%s\")",
                kind);
        goto fail;
    }
    if (data_check_model(tr, m, err) || data_check_model(te, m, err)) {
        plumb_err e2 = *err; /* name the model file in front of the field */
        err_set(err, model_path, NULL, "%s", e2.msg);
        goto fail;
    }
    *train = tr;
    *test = te;
    return 0;
fail:
    data_free(tr);
    data_free(te);
    return -1;
}

char *train_resume_open(const char *path, const model *m, int opt_kind, ckpt *state,
                        plumb_err *err)
{
    static const char *const names[] = {"sgd", "momentum", "adam"};
    struct stat sb;
    char *found = NULL;
    memset(state, 0, sizeof *state);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!(found = ckpt_find_latest(path, m, state, err))) return NULL;
    } else {
        if (ckpt_load(path, m, state, err)) return NULL;
        if (!(found = strdup(path))) {
            err_set(err, NULL, NULL, "out of memory");
            goto fail;
        }
    }
    if (state->opt_kind != opt_kind) {
        err_set(err, found, NULL, "expected a checkpoint of the %s optimizer (got %s); resume "
                "with --optimizer %s", names[opt_kind], names[state->opt_kind],
                names[state->opt_kind]);
        goto fail;
    }
    return found;
fail:
    free(found);
    ckpt_free(state);
    return NULL;
}
