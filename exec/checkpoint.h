/* checkpoint.h: training state on disk: a model's weights, its optimizer state and the
 * number of steps taken, so that a run can stop and resume where it was (docs/exec.md,
 * "Checkpoints"). Binary, little-endian fp32; the header identifies the model by a hash of
 * its layer kinds, shapes and parameter count, so a checkpoint cannot load into another
 * model; a CRC-32 over the header and one per tensor catch corruption. Files are written
 * atomically. */
#ifndef PLUMB_EXEC_CHECKPOINT_H
#define PLUMB_EXEC_CHECKPOINT_H

#include "err.h"
#include "exec/model.h"

typedef struct ckpt {
    int opt_kind;          /* bk_opt_kind of the state: 0 sgd (none), 1 momentum (m), 2 adam */
    long step;             /* optimizer steps taken */
    float *w;              /* [nparams] weights */
    float *m;              /* [nparams] first moment / momentum, or NULL (sgd) */
    float *v;              /* [nparams] second moment, or NULL (not adam) */
} ckpt;

/* A hash of m's architecture (kinds, shapes, parameter counts; not names or seed). */
unsigned long long model_fingerprint(const model *m);

/* Writes c (arrays of m->nparams floats) to path atomically, first removing the
 * temporary files "PATH.tmp.PID" that writers of path which died left beside it
 * (ckpt_sweep_file). 0 or -1 with err. */
int ckpt_save(const char *path, const model *m, const ckpt *c, plumb_err *err);

/* Reads path into c, allocating its arrays (free with ckpt_free). Fails with err naming
 * the file on a bad magic number, a version 1 file (no checksums), another model, a
 * truncated or oversized file, a checksum that does not match (header or tensor), or a
 * value that is not finite. */
int ckpt_load(const char *path, const model *m, ckpt *c, plumb_err *err);

/* Reads only path's header (64 bytes) and its size: checks them as ckpt_load does
 * (magic, version, header checksum, model, optimizer kind, steps; the size the header
 * implies) and gives the optimizer kind and steps. The tensors are neither read nor
 * checked: a file ckpt_load accepts, peek accepts with the same kind and steps, but a
 * damaged tensor (checksum, non-finite value) is found by ckpt_load only. 0, or -1 with
 * err as ckpt_load would fail. */
int ckpt_peek(const char *path, const model *m, int *opt_kind, long *step, plumb_err *err);

void ckpt_free(ckpt *c);

/* 1 when path is a regular file that starts with a checkpoint's magic number (any version),
 * else 0 (also when it cannot be read, or is a pipe, which it leaves unread): what a
 * checkpoint's header says is then ckpt_peek's to check. */
int ckpt_is_checkpoint(const char *path);

/* Removes the temporary files "NAME.tmp.PID" beside path (NAME its file name) whose PID
 * no longer runs: what an atomic write of path interrupted by a kill leaves behind. */
void ckpt_sweep_file(const char *path);

/* Checkpoint folders (`plumb train --checkpoint DIR --checkpoint-every N`): DIR holds
 * ckpt-SSSSSSSS.ckpt files named by their step (8 digits, zero-padded).
 *
 * ckpt_save_dir writes c as its step's file in dir (creating dir, mode 0755, when missing;
 * the file itself atomically: temporary file, fsync, rename), then removes that folder's
 * older checkpoints beyond the `keep` newest (keep >= 1). Before writing it removes the
 * temporary files "ckpt-STEP.ckpt.tmp.PID" of writers that died (PID not running).
 * Returns 0, or -1 with err set (no checkpoint is removed then). */
int ckpt_save_dir(const char *dir, const model *m, const ckpt *c, int keep, plumb_err *err);

/* Checks, before a run, that a `--checkpoint dir` is its own: 0 when dir does not exist or
 * holds no checkpoint file, or when the run resumes from dir or from a file in it (it
 * continues that run, whose older files ckpt_save_dir then prunes). Otherwise -1 with err
 * naming dir and its newest checkpoint: a fresh run would replace the files of the same
 * steps and remove the older ones, another run's work. */
int ckpt_dir_check_fresh(const char *dir, const char *resume, plumb_err *err);

/* 1 when path is one of the files a `--checkpoint dir` run writes and prunes: directly in
 * dir (its folder and dir the same by device and inode; path itself need not exist) and
 * named "ckpt-STEP.ckpt"; else 0 (also when either folder does not exist). */
int ckpt_dir_owns(const char *dir, const char *path);

/* The path (malloc'd, caller frees) of the newest checkpoint in dir, read and checked in
 * full by ckpt_load; when state is not NULL it receives that checkpoint's state, so that a
 * resume reads the file once (free with ckpt_free; zeroed on failure). NULL with err set
 * when dir holds none, or when the newest fails the checks: err then gives its reason and
 * names the newest intact one, if any (a corrupt newest file is never skipped silently). */
char *ckpt_find_latest(const char *dir, const model *m, ckpt *state, plumb_err *err);

#endif
