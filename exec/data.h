/* data.h: training data for the executor, held in host memory: Fashion-MNIST from the
 * gzipped IDX files of Debian's dataset-fashion-mnist, synthetic images with learnable
 * labels or random token sequences (speed runs), and byte-level text for language models
 * (generated from a small grammar, or read from a text file). Deterministic shuffling. */
#ifndef PLUMB_EXEC_DATA_H
#define PLUMB_EXEC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "exec/model.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct dataset {
    char *name;              /* e.g. "fashion-mnist train", "synthetic" */
    int n;                   /* samples */
    size_t sample_numel;     /* floats per sample (images, features, or token ids) */
    int targets_per_sample;  /* 1 for classes; T for next-token targets */
    int classes;             /* targets lie in [0, classes) */
    float *x;                /* (n, sample_numel) */
    int32_t *y;              /* (n, targets_per_sample) */
} dataset;

/* Loads Fashion-MNIST's training (train = 1, 60000 samples) or test split (10000) from dir
 * (NULL = FMNIST_DIR): train-images-idx3-ubyte.gz / train-labels-idx1-ubyte.gz or the
 * t10k-* pair. Pixels are scaled to [0, 1] then normalized with the training set's mean
 * 0.2860 and standard deviation 0.3530. Returns NULL with err naming the file on a
 * missing or unreadable file, a bad magic number, a size that is not 28x28, a truncated
 * file, label/image counts that differ, or a label outside [0, 10). */
dataset *data_fashion_mnist(const char *dir, int train, plumb_err *err);

/* n synthetic samples for model m (deterministic from seed). Image/feature models: values
 * uniform in [-1, 1], label = the class c whose pixels (those with index % classes == c)
 * sum highest, so a model can learn it. Token models: uniform random token ids, targets the
 * next token of the same random stream (not learnable; for speed runs). */
dataset *data_synthetic(const model *m, int n, unsigned long long seed, plumb_err *err);

/* n windows of byte-level text for a token model with context T = m->in_shape[0]: inputs
 * are T bytes, targets the T bytes that follow each. The text is `path`'s content, or when
 * path is NULL a deterministic stream of sentences from a small built-in grammar. Needs
 * m->classes >= 256 (byte ids). Windows start at seeded random offsets. */
dataset *data_text(const model *m, const char *path, int n, unsigned long long seed,
                   plumb_err *err);

/* The data set kind plumb uses for m when none is named (plumb train's default and the
 * profiler's data): "fashion-mnist" for a model without embedding that takes 784 floats
 * (e.g. [1,28,28]) into 10 classes, "text" for a token model with at least 256 classes
 * (byte ids, what data_text needs), else "synthetic". Never NULL (a static string). */
const char *data_default_kind(const model *m);

/* Checks that d fits m (floats per sample, targets per sample, classes); -1 with err. */
int data_check_model(const dataset *d, const model *m, plumb_err *err);

/* perm[0..n) = a permutation of 0..n-1 determined by (seed, epoch). */
void data_shuffle(int *perm, int n, unsigned long long seed, int epoch);

/* Copies samples idx[0..B) into x (B, sample_numel) and y (B, targets_per_sample). */
void data_gather(const dataset *d, const int *idx, int B, float *x, int32_t *y);

void data_free(dataset *d);

#endif
