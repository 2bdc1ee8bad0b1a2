/* cluster.h: a described cluster (plumb-cluster/1): a hierarchy of levels, innermost first
 * (level 0 joins the devices of one server, level 1 joins servers, ...), each with a member
 * count, a link bandwidth and a latency; device types with memory and relative speed; and
 * which device type each server holds (heterogeneous clusters allowed).
 *
 * Devices are numbered 0..ndevices-1 in order: device d sits in server d / levels[0].count,
 * and two devices communicate over the outermost level at which they differ. */
#ifndef PLUMB_CLUSTER_H
#define PLUMB_CLUSTER_H

#include "err.h"

#define CLUSTER_FORMAT "plumb-cluster/1"
#define CLUSTER_MAX_LEVELS 8
#define CLUSTER_MAX_DEVICES (1 << 20)
/* The slowest rate, bytes/s, at which the simulator runs a path (sim/engine_comm.c): below
 * it a transfer would not finish in any finite simulated time (a zero rate, or one that
 * underflows to it). Not the input bound: cluster_validate and the --bandwidth what-if
 * refuse a level's bandwidth or egress below BOUND_BW_BPS_MIN (core/bounds.h, 125 bytes/s),
 * but a path's rate is derived (a --bandwidth what-if scales a level's egress by the same
 * ratio as its bandwidth, so it can fall below that bound) and only this floor stops it. */
#define CLUSTER_MIN_BANDWIDTH_Bps 1.0

typedef struct cluster_level {
    char *name;              /* e.g. "nvlink", "ethernet" */
    int count;               /* members per group at this level (level 0: devices per server) */
    double bandwidth_Bps;    /* bytes/s of one point-to-point transfer crossing this level;
                                the file gives it as bandwidth_gbit_per_s (10^9 bits/s) */
    double latency_s;        /* seconds per transfer; the file gives latency_us */
    double egress_Bps;       /* bytes/s that one group of the level below can send out through
                                this level at once (its shared port); the file's
                                egress_gbit_per_s, default = bandwidth */
} cluster_level;

/* Number formats of the analytic cost model (core/device.h). DEV_FP8 is Transformer Engine's
 * FP8 training: the projections' multiplies in FP8, everything else (weights, activations,
 * attention, norms) in bf16 (docs/llm.md, "FP8 training"). */
typedef enum dev_precision {
    DEV_FP32 = 0, DEV_TF32, DEV_BF16, DEV_FP16, DEV_FP8, DEV_NPREC
} dev_precision;

/* The roofline's efficiency figures of a device type (core/device.h; docs/llm.md): each a
 * fraction in (0, 1], or <= 0 when the file does not give the "efficiency" object. */
typedef struct device_efficiency {
    double gemm;             /* large dense matrix multiplies: achieved / peak FLOP/s */
    double attention;        /* the attention's batched score and value multiplies */
    double memory;           /* streaming kernels: achieved / peak memory bandwidth */
    double kernel_overhead_s; /* fixed time per kernel launch, >= 0; file: kernel_overhead_us */
    double gemm_fp8;         /* the same for FP8 multiplies (of the fp8 peak); file: optional
                                gemm_fp8, <= 0 when absent (then gemm applies) */
} device_efficiency;

/* How a device runs a large matrix multiply (core/device.h; docs/llm.md): output tiles of
 * tile_m x tile_n elements, one per SM at a time, in waves over `sms` SMs. sms is 0 when the
 * file does not give the "gemm_tiling" object (then no tile or wave quantization). */
typedef struct device_tiling {
    int sms;                 /* streaming multiprocessors, >= 1 when given */
    int tile_m, tile_n;      /* the output tile, >= 1 each when sms is given */
} device_tiling;

typedef struct device_type {
    char *name;              /* e.g. "V100" */
    double memory_bytes;     /* usable memory per device; the file gives memory_gib */
    double speed;            /* compute speed relative to the profiled device (2.0 = twice as
                                fast; layer times are divided by it) */
    double peak_flops;       /* peak FLOP/s, <= 0 when not given; file: peak_tflops */
    /* Optional datasheet figures for analytic profiles (<= 0 when not given): */
    double peak_flops_prec[DEV_NPREC]; /* dense peak FLOP/s per precision; file:
                                          peak_tflops_by_precision {fp32, tf32, bf16, fp16,
                                          fp8} */
    double memory_Bps;       /* memory (HBM) bandwidth, bytes/s; file: memory_gbyte_per_s */
    device_efficiency eff;   /* file: efficiency {gemm, attention, memory, kernel_overhead_us} */
    device_tiling tiling;    /* file: gemm_tiling {sms, tile_m, tile_n}; sms 0 when absent */
    int cores;               /* CPU cores one server of this type has for its workers, 0 when
                                not given (a GPU: each device computes on its own); a plan
                                with more workers on one server than cores shares them */
} device_type;

typedef struct cluster {
    char *name;
    char *description;       /* may be "" */
    int nlevels;
    cluster_level levels[CLUSTER_MAX_LEVELS];
    int ntypes;
    device_type *types;
    int nservers;            /* product of counts of levels 1..nlevels-1 */
    int *server_type;        /* [nservers]: index into types */
    int ndevices;            /* product of all level counts */
} cluster;

/* Loads and validates a cluster file. Returns a new cluster (free with cluster_free) or NULL
 * with err set. Rejects bad JSON, wrong types, zero/negative counts, bandwidths or memory,
 * device counts that overflow CLUSTER_MAX_DEVICES, unknown device types, and server lists
 * whose total does not match the hierarchy. */
cluster *cluster_load(const char *path, plumb_err *err);
struct cJSON;
cluster *cluster_from_json(const struct cJSON *root, const char *file, plumb_err *err);
struct cJSON *cluster_to_json(const cluster *c);
int cluster_save(const cluster *c, const char *path, plumb_err *err);
int cluster_validate(const cluster *c, const char *file, plumb_err *err);
cluster *cluster_clone(const cluster *c);
int cluster_equal(const cluster *a, const cluster *b);
void cluster_free(cluster *c);

/* A copy of c cut to its first `gpus` devices, whole servers only: the innermost levels keep
 * their counts and the outer levels shrink (levels left with one group are dropped, but for
 * the level above the server in a cut of one server: it stays, counting that one server, so
 * that a cluster grown from the cut adds servers over that level's links). Returns
 * a new cluster (cluster_free), or NULL with err set (path "--gpus") when gpus is not a
 * multiple of the devices per server, exceeds c's devices, or cannot be laid out as whole
 * groups of the levels (e.g. 3 racks' worth of servers where racks are the unit). */
cluster *cluster_take_gpus(const cluster *c, int gpus, const char *file, plumb_err *err);

/* cluster_load(path), and when the cluster has more than max_devices devices, its first
 * `servers` servers (cluster_take_gpus): how the loops over every shipped cluster (tests,
 * benchmarks) keep the 3072-GPU DGX files (docs/llm.md) to a size they plan in time.
 * Returns a new cluster (cluster_free), or NULL with err set. */
cluster *cluster_load_cut(const char *path, int max_devices, int servers, plumb_err *err);

/* The device type of device d (0 <= d < ndevices). */
const device_type *cluster_device_type(const cluster *c, int d);

/* What c's devices are called in text, singular: "GPU" when no device type gives
 * `cores` (each device computes on its own), "CPU worker" when every type does (workers
 * sharing a server's CPU cores, as plumb train's threads or ranks), "device" for a mix or
 * no types. A static string; callers add "s" for a count, "8 CPU workers". */
const char *cluster_device_noun(const cluster *c);

/* Index of the server (level-0 group) holding device d. */
int cluster_server_of(const cluster *c, int d);

/* The outermost level index at which devices a and b are in different groups, i.e. the
 * level a transfer between them crosses; -1 when a == b. */
int cluster_level_between(const cluster *c, int a, int b);

/* Number of devices in one group of level L (level 0: devices per server; L = nlevels-1:
 * the whole cluster). */
int cluster_group_size(const cluster *c, int level);

#endif
