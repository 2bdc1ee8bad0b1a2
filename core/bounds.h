/* bounds.h: the physical range of every value a profile, a cluster or a what-if may give
 * plumb. A value outside gets the usual one line at load (exit 2); the ranges hold every
 * real machine and model by orders of magnitude, and keep every time and byte count that
 * the planner and the simulator derive finite: the slowest compute action is at most
 * BOUND_LAYER_MS_MAX / BOUND_SPEED_MIN x the straggler factor (1e6) = 1e15 s per layer,
 * the slowest transfer BOUND_LATENCY_S_MAX + BOUND_BYTES_MAX / BOUND_BW_BPS_MIN = 8e12 s,
 * and sums of such terms over layers, microbatches and iterations stay below 1e40, far from
 * the overflow of a double (1.8e308). Times reach integers only as positions on a screen
 * or a picture, clipped to its width first (ui/draw.c, sim/svg.c, sim/text.c).
 * docs/formats.md lists the ranges in the files' units. */
#ifndef PLUMB_BOUNDS_H
#define PLUMB_BOUNDS_H

#define BOUND_BW_BPS_MIN 125.0        /* 1 kbit/s: a link's bandwidth or egress, bytes/s */
#define BOUND_BW_BPS_MAX 12.5e12      /* 100 Tbit/s */
#define BOUND_LATENCY_S_MAX 10.0      /* a level's latency, seconds (>= 0) */
#define BOUND_MEMORY_MIN 1048576.0    /* 1 MiB: a device's memory, bytes */
#define BOUND_MEMORY_MAX 1125899906842624.0 /* 1 PiB */
#define BOUND_SPEED_MIN 1e-3          /* a device type's speed relative to the profiled one */
#define BOUND_SPEED_MAX 1e3
#define BOUND_PEAK_FLOPS_MIN 1e6      /* a device type's peak FLOP/s: 1e-6 TFLOP/s ... */
#define BOUND_PEAK_FLOPS_MAX 1e21     /* ... 1e9 TFLOP/s (also each precision's peak) */
#define BOUND_MEMORY_BPS_MIN 1e3      /* a device's memory bandwidth, bytes/s: 1 kB/s ... */
#define BOUND_MEMORY_BPS_MAX 1e15     /* ... 1 PB/s (kernel overheads: 0 to the latency's
                                         BOUND_LATENCY_S_MAX) */
#define BOUND_EFFICIENCY_MIN 1e-3     /* a device's efficiency fractions (gemm, attention,
                                         memory, gemm_fp8): 0.1 % of the peak ... 1 (1e-308
                                         made a block's time 3e305 ms, refused as the
                                         analytic profile's, far from the cluster file) */
#define BOUND_LAYER_MS_MAX 1e9        /* a layer's forward/backward time: 1e6 s (11.6 days) */
#define BOUND_BYTES_MAX 1e15          /* 1 PB: a layer's activations, parameters, saved
                                         tensors, buffers; a profile's input bytes */
#define BOUND_FLOPS_MAX 1e21          /* a layer's FLOPs per minibatch */
#define BOUND_TP_MAX 1024             /* tensor-parallel ranks of a profile or plan */
#define BOUND_TOKENS_MAX 1073741824LL /* tokens in one sample (2^30) */
#define BOUND_BLOCKS_MAX 4096         /* a transformer's layers (n_layer, num_hidden_layers):
                                        10x the deepest published ones; the 3D search
                                        builds a profile of every block per candidate
                                        layout (100000 blocks took 146 s to refuse) */
#define BOUND_BATCH_MAX 16777216      /* samples in a profiled minibatch, a microbatch or a
                                        global batch (2^24): the planner multiplies it by
                                        microbatch counts in ints */

#endif
