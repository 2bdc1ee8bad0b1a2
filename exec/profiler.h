/* profiler.h: measures a model's top-level layers on a real backend and turns them into a
 * plumb profile (core/profile.h, plumb-profile/1), closing PipeDream's loop: profile, plan,
 * run. Each layer is built alone as a one-layer stage (exec/stage.h) on the backend and
 * timed after a warm-up: forward, the fused backward that 1F1B-style schedules run, and
 * the input-gradient (I) and weight-gradient (W) halves that zero-bubble schedules run,
 * each bracketed by a backend sync; the median of the timed runs is kept. The layers are
 * timed in turn, round after round (as training runs them), so that a burst of load on a
 * shared machine does not land on one layer's samples only; when the device cannot hold
 * every layer's stage at once, they are timed one layer at a time. Sizes come from
 * the model's inferred shapes: activation bytes = the layer's output for the whole
 * profiled minibatch in fp32, parameter bytes = its weights and biases in fp32.
 *
 * Units: milliseconds for times, bytes for sizes, FLOPs per minibatch. */
#ifndef PLUMB_EXEC_PROFILER_H
#define PLUMB_EXEC_PROFILER_H

#include "core/profile.h"
#include "exec/backend.h"
#include "exec/model.h"

typedef struct prof_cfg {
    const backend *bk;
    int device;            /* backend device index (0 for the CPU) */
    int batch;             /* samples per profiled minibatch, >= 1 */
    int warmup;            /* untimed runs of every pass before timing, >= 0 */
    int runs;              /* timed runs of every pass, >= 1; the median is kept */
    int workers;           /* measure as one of this many workers sharing the backend
                              (bk->hint_workers: the CPU gives each 1/workers of its
                              threads, as the pipeline runtime does), >= 1 */
    unsigned long long seed; /* seeds the random inputs, output gradients and targets */
    /* The data the layers are timed on (borrowed; exec/data.h): the first layer's input and
     * the loss's targets are a batch of it, every later layer's input is the output of the
     * one before (real activations: branchy element-wise kernels see the sign patterns of
     * training), and the batch gather is timed on it. NULL: the data set `plumb train` uses
     * by default (Fashion-MNIST when the model is shaped for it and its files load, the
     * built-in text for token models, else synthetic samples). */
    const struct dataset *data;
    /* NULL, or called after every round of every layer's passes (warm-up rounds included)
     * with the layer-rounds done and their total, nlayers x (warmup + runs): a way to show
     * progress while a long profile runs. `progress_user` is passed through. */
    void (*progress)(void *progress_user, long done, long total);
    void *progress_user;
} prof_cfg;

/* Fills c with the defaults: CPU backend, device 0, batch 64, 3 warm-up runs, 20 timed
 * runs, 1 worker, seed 1, no progress callback. */
void profiler_cfg_init(prof_cfg *c);

/* The timings of one layer, ms per profiled minibatch. */
typedef struct prof_stats {
    double forward_ms, backward_ms;         /* medians: forward, fused backward */
    double input_ms, weight_ms;             /* medians of the I and W halves as timed */
    double forward_min_ms, forward_max_ms;  /* spread of the forward runs */
    double backward_min_ms, backward_max_ms;
} prof_stats;

/* The profile skeleton of m at `batch` samples: one layer per top-level layer of m, in
 * order (a chain, no edges), name = the layer's name (made unique with "_<index>" when the
 * spec repeats one), kind = its spec type ("linear", "conv2d", ...), desc = its output
 * shape, activation_bytes = batch x output floats x 4, parameter_bytes = parameters x 4,
 * flops = batch x forward FLOPs per sample; every time 0 (I/W split absent). `device` and
 * `source` are copied (NULL = ""). Returns a new profile (profile_free) or NULL with err set
 * when out of memory or batch < 1. */
profile *profiler_skeleton(const model *m, int batch, const char *device, const char *source,
                           plumb_err *err);

/* Measures every top-level layer of m as cfg says and returns the filled profile (times
 * from the medians; input_gather_ms = the median time of gathering a minibatch of the data
 * (cfg->data or the default) and uploading its inputs and targets, as a first stage's F
 * does; step_ns_per_byte = the median time of the backend's sgd, momentum and adam steps
 * over the model's parameter count, per parameter byte; backward_ms = the fused backward,
 * backward_input_ms and backward_weight_ms = the measured I/W halves rescaled to sum to it,
 * which keeps the measured split). device = "<backend>:<device>", source names the settings (and says
 * "layers timed one at a time (memory)" after the fallback). *stats (may be
 * NULL) receives a malloc'd array of m->nlayers raw timings the caller frees. Returns NULL
 * with err set: bad cfg, a data set that does not fit m (or a default one that does not
 * load), the backend cannot open the device, out of device memory, or a backend failure
 * reported by a sync. Restores the backend's worker hint to 1. */
profile *profiler_run(const model *m, const prof_cfg *cfg, prof_stats **stats, plumb_err *err);

/* Median of v[0..n-1] (sorts v in place; the mean of the two middle values for even n);
 * 0 when n < 1. */
double profiler_median(double *v, int n);

#endif
