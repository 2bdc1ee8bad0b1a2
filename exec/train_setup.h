/* train_setup.h: what `plumb train` prepares before a run, as library calls the CLI and the
 * tests share: the training and test sets (the default kind is data_default_kind's) and the
 * checkpoint a run resumes from. The CLI parses and prints; this decides.
 * Memory: the data sets are the caller's (data_free), as is the resumed path. */
#ifndef PLUMB_EXEC_TRAIN_SETUP_H
#define PLUMB_EXEC_TRAIN_SETUP_H

#include "core/err.h"
#include "exec/checkpoint.h"
#include "exec/data.h"
#include "exec/model.h"

/* Where a run's data comes from (plumb train's --data, --data-dir, --text, --samples). */
typedef struct train_data_spec {
    const char *kind;   /* "fashion-mnist", "synthetic" or "text"; NULL: data_default_kind */
    const char *dir;    /* Fashion-MNIST folder, NULL: FMNIST_DIR */
    const char *text;   /* text: the file whose bytes are trained on, NULL: generated text */
    int samples;        /* synthetic/text training samples (test: samples / 4, at least 1) */
} train_data_spec;

/* Loads the training set into *train and the test set into *test as spec says (the
 * synthetic and text sets seeded from m->seed, the test set from m->seed + 1000003) and
 * checks both fit m, naming model_path in front of a mismatch. Returns 0, or -1 with err
 * set ("--data" for an unknown kind; "--text" or "--data-dir" when the kind is not the one
 * that reads it) and nothing left allocated. */
int train_data_load(const model *m, const char *model_path, const train_data_spec *spec,
                    dataset **train, dataset **test, plumb_err *err);

/* The checkpoint a run resumes from: path itself, or when path is a folder the newest
 * checkpoint in it (ckpt_find_latest), read once into *state (ckpt_load's checks; give it
 * to the run as train_run_cfg.resume_state, free with ckpt_free) and checked against the
 * run's optimizer opt_kind (bk_opt_kind; a mismatch is one line naming the file and the
 * --optimizer that would resume it). Returns the file's path (malloc'd, caller frees), or
 * NULL with err set and *state empty. */
char *train_resume_open(const char *path, const model *m, int opt_kind, ckpt *state,
                        plumb_err *err);

#endif
