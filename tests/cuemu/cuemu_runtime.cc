/* cuemu_runtime.cc: the CUDA runtime API as cuemu emulates it on the CPU: devices (count
 * and memory from CUEMU_DEVICES, default 2, and CUEMU_DEVICE_MB, default 4096; compute
 * capability from CUEMU_CC, default 9.0), device
 * memory (host memory in a registry, filled with NaN bytes on allocation as a GPU's is
 * undefined), streams as queues of deferred work, events as points in those queues, peer
 * access, and the per-thread last error. Work runs only when CUDA would let the host see its
 * effect (a synchronize, a query, a synchronous copy, cudaFree), so code that reads results
 * before waiting for them reads stale memory, as it may on a GPU.
 *
 * Copies follow CUDA's documented behaviour for pageable host memory: host to device reads
 * the source at the call (staged), device to pageable host waits for the stream and copies
 * before returning; to and from pinned memory (cudaMallocHost) the copy runs in stream
 * order, reading and writing the host buffer then. */
#include "cuemu_kernel.h" /* first: it defines __shared__ and friends */
#include "cuemu.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>


/* The opaque handle types of the runtime API. */
struct CUstream_st {
    int device;
    bool blocking;     /* synchronizes with the legacy default stream */
    bool legacy;       /* the device's default stream */
    std::deque<std::pair<const char *, std::function<void()>>> queue;
    unsigned long long queued = 0, done = 0; /* ops ever queued / run */
    bool draining = false;
    unsigned long long id;
};

struct CUevent_st {
    int device;
    bool recorded = false;
    unsigned long long stream_id = 0, seq = 0; /* the latest record: stream and queue point */
};

namespace cuemu {

void run_grid(const char *name, dim3 grid, dim3 block, const std::function<void()> &body);

namespace {

struct allocation {
    size_t bytes;
    int device;
};

struct state {
    std::recursive_mutex mu;
    int ndevices = -1;
    size_t device_bytes = 0;
    std::vector<size_t> used;              /* bytes allocated per device */
    std::vector<std::vector<char>> peer;   /* peer[a][b]: a may touch b's memory */
    std::map<uintptr_t, allocation> mem;   /* device allocations by address */
    std::map<uintptr_t, size_t> pinned;    /* cudaMallocHost allocations */
    std::map<unsigned long long, CUstream_st *> streams;
    std::vector<CUstream_st *> legacy;     /* per device */
    unsigned long long next_id = 1;
};

/* Never destroyed: threads that outlive main's return may still call the API, and
 * everything it holds stays reachable for the leak checker. */
state &st()
{
    static state *s = new state;
    return *s;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last = cudaSuccess;

long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) fail("%s=%s: expected an integer in [%ld, %ld]", name, v, lo, hi);
    return x;
}

void init_devices()
{
    state &s = st();
    if (s.ndevices >= 0) return;
    s.ndevices = (int)env_long("CUEMU_DEVICES", 2, 0, 16);
    s.device_bytes = (size_t)env_long("CUEMU_DEVICE_MB", 4096, 1, 1 << 20) << 20;
    s.used.assign(s.ndevices, 0);
    s.peer.assign(s.ndevices, std::vector<char>(s.ndevices, 0));
    for (int d = 0; d < s.ndevices; d++) {
        CUstream_st *l = new CUstream_st{};
        l->device = d;
        l->legacy = true;
        l->blocking = true;
        l->id = s.next_id++;
        s.streams[l->id] = l;
        s.legacy.push_back(l);
    }
}

cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) t_last = e;
    return e;
}

CUstream_st *resolve(cudaStream_t s)
{
    init_devices();
    state &g = st();
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) {
        if (t_device >= g.ndevices) fail("no device is current (CUEMU_DEVICES=%d)", g.ndevices);
        return g.legacy[t_device];
    }
    return s;
}

const allocation *find_alloc(const void *p, uintptr_t *base)
{
    state &s = st();
    uintptr_t a = (uintptr_t)p;
    auto it = s.mem.upper_bound(a);
    if (it == s.mem.begin()) return nullptr;
    --it;
    if (a >= it->first + (it->second.bytes ? it->second.bytes : 1)) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

int is_pinned(const void *p, size_t bytes)
{
    state &s = st();
    uintptr_t a = (uintptr_t)p;
    auto it = s.pinned.upper_bound(a);
    if (it == s.pinned.begin()) return 0;
    --it;
    return a + bytes <= it->first + it->second;
}

void drain_to(CUstream_st *q, unsigned long long seq);

/* Runs q's queued work up to queue point seq (all of it for ~0ULL). */
void drain_to(CUstream_st *q, unsigned long long seq)
{
    if (q->done >= seq || q->queue.empty()) return;
    if (q->draining)
        fail("streams wait for each other in a cycle (stream of device %d waits for itself): "
             "a hang on the GPU", q->device);
    q->draining = true;
    int saved = t_device;
    while (q->done < seq && !q->queue.empty()) {
        auto op = std::move(q->queue.front());
        q->queue.pop_front();
        t_device = q->device;
        op.second();
        q->done++;
    }
    t_device = saved;
    q->draining = false;
}

void drain_device(int d)
{
    state &s = st();
    for (auto &kv : s.streams)
        if (kv.second->device == d) drain_to(kv.second, ~0ULL);
}

void drain_all()
{
    state &s = st();
    for (auto &kv : s.streams) drain_to(kv.second, ~0ULL);
}

/* Work queued on the legacy stream waits for every blocking stream of the device, and work
 * queued on a blocking stream waits for the legacy stream (CUDA's implicit
 * synchronization); non-blocking streams are independent. */
void implicit_waits(CUstream_st *q)
{
    state &s = st();
    if (q->legacy) {
        for (auto &kv : s.streams) {
            CUstream_st *o = kv.second;
            if (o == q || o->device != q->device || !o->blocking || o->done >= o->queued) continue;
            unsigned long long id = o->id, seq = o->queued;
            q->queue.emplace_back("(implicit wait)", [id, seq] {
                auto it = st().streams.find(id);
                if (it != st().streams.end()) drain_to(it->second, seq);
            });
            q->queued++;
        }
    } else if (q->blocking) {
        CUstream_st *l = s.legacy[q->device];
        if (l->done < l->queued) {
            unsigned long long seq = l->queued;
            q->queue.emplace_back("(implicit wait)", [l, seq] { drain_to(l, seq); });
            q->queued++;
        }
    }
}

/* A GPU's queue holds about a thousand launches before the host blocks; so does cuemu. */
constexpr size_t QUEUE_LIMIT = 1024;

void push(CUstream_st *q, const char *what, std::function<void()> op)
{
    implicit_waits(q);
    q->queue.emplace_back(what, std::move(op));
    q->queued++;
    if (q->queue.size() > QUEUE_LIMIT) drain_to(q, q->done + 1);
}

}  // namespace

/* ------------------------------------------------------------------ cuemu.h */

void fail(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fflush(stdout); /* what the program printed before comes first */
    fprintf(stderr, "cuemu: %s\n", buf);
    fflush(stderr);
    abort();
}

lock::lock() { st().mu.lock(); }
lock::~lock() { st().mu.unlock(); }

int current_device() { return t_device; }

int stream_device(cudaStream_t s)
{
    lock l;
    return resolve(s)->device;
}

void enqueue(cudaStream_t s, const char *what, std::function<void()> op)
{
    lock l;
    push(resolve(s), what, std::move(op));
}

int is_device_range(int dev, const void *p, size_t bytes)
{
    lock l;
    init_devices();
    uintptr_t base;
    const allocation *a = find_alloc(p, &base);
    if (!a) return 0;
    if ((uintptr_t)p + bytes > base + a->bytes) return 0;
    if (dev < 0 || dev >= st().ndevices) return 0;
    return a->device == dev || st().peer[dev][a->device];
}

void check_device_range(const char *what, const char *arg, int dev, const void *p, size_t bytes)
{
    lock l;
    if (!p) fail("%s: %s is NULL", what, arg);
    if (is_device_range(dev, p, bytes)) return;
    uintptr_t base;
    const allocation *a = find_alloc(p, &base);
    if (!a)
        fail("%s: %s = %p is not device memory (a host pointer, or freed): an illegal address "
             "on the GPU", what, arg, p);
    if (a->device != dev)
        fail("%s: %s = %p is memory of device %d, used on device %d without peer access",
             what, arg, p, a->device, dev);
    fail("%s: %s = %p + %zu bytes runs %zu bytes past the end of its allocation of %zu bytes",
         what, arg, p, bytes, (size_t)((uintptr_t)p + bytes - base - a->bytes), a->bytes);
}

int library_device(const char *what, int handle_device, cudaStream_t s, const void *alpha,
                   const void *beta)
{
    lock l;
    const int dev = resolve(s)->device;
    if (dev != handle_device)
        fail("%s: the handle belongs to device %d but its stream (%p) to device %d", what,
             handle_device, (void *)s, dev);
    if (is_device_range(dev, alpha, sizeof(float)) || is_device_range(dev, beta, sizeof(float)))
        fail("%s: alpha or beta is device memory, but the pointer mode is host", what);
    return dev;
}

float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t float_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

float round_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x; /* Inf, NaN */
    u = (u + 0x1000u) & 0xffffe000u;                 /* 10 mantissa bits, ties away */
    memcpy(&x, &u, 4);
    return x;
}

/* ------------------------------------------------------------------ kernels */

void launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
            std::function<void()> body)
{
    lock l;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535 || shmem > 48 * 1024) {
        t_last = cudaErrorInvalidConfiguration;
        return;
    }
    push(resolve(s), name, [name, grid, block, body] { run_grid(name, grid, block, body); });
}

void check_kernel_pointer(const char *name, int index, const void *p, cudaStream_t s)
{
    lock l;
    char arg[32];
    snprintf(arg, sizeof arg, "argument %d", index + 1);
    check_device_range(name, arg, resolve(s)->device, p, 0);
}

}  // namespace cuemu

using namespace cuemu;

/* ------------------------------------------------------------------ the C API */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    lock l;
    init_devices();
    *count = st().ndevices;
    return st().ndevices ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    lock l;
    init_devices();
    if (device < 0 || device >= st().ndevices) return ret(cudaErrorInvalidDevice);
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    lock l;
    init_devices();
    if (device < 0 || device >= st().ndevices) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu %d (CUDA emulated on the CPU)", device);
    /* CUEMU_CC=MAJOR.MINOR: the compute capability the devices report (default 9.0) */
    const char *cc = getenv("CUEMU_CC");
    p->major = 9;
    p->minor = 0;
    if (cc && *cc) {
        int major = 0, minor = 0, k = 0;
        if (sscanf(cc, "%d.%d%n", &major, &minor, &k) != 2 || cc[k] || major < 1 || major > 99 ||
            minor < 0 || minor > 9)
            fail("CUEMU_CC=%s: expected a compute capability MAJOR.MINOR, e.g. 7.5", cc);
        p->major = major;
        p->minor = minor;
    }
    p->totalGlobalMem = st().device_bytes;
    p->multiProcessorCount = 1;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->sharedMemPerBlock = 48 * 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last; }

cudaError_t cudaDeviceSynchronize(void)
{
    lock l;
    init_devices();
    drain_device(t_device);
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    lock l;
    init_devices();
    int n = st().ndevices;
    if (device < 0 || device >= n || peer < 0 || peer >= n) return ret(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    lock l;
    init_devices();
    if (flags) return ret(cudaErrorInvalidValue);
    if (peer < 0 || peer >= st().ndevices || peer == t_device) return ret(cudaErrorInvalidDevice);
    if (st().peer[t_device][peer]) return ret(cudaErrorPeerAccessAlreadyEnabled);
    st().peer[t_device][peer] = 1;
    return cudaSuccess;
}

/* --- memory */

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    lock l;
    init_devices();
    state &s = st();
    if (!p) return ret(cudaErrorInvalidValue);
    *p = nullptr;
    if (t_device >= s.ndevices) return ret(cudaErrorNoDevice);
    if (bytes > s.device_bytes - s.used[t_device]) return ret(cudaErrorMemoryAllocation);
    void *q = nullptr;
    if (posix_memalign(&q, 256, bytes ? bytes : 1)) return ret(cudaErrorMemoryAllocation);
    memset(q, 0xff, bytes); /* NaN floats: device memory starts undefined */
    s.mem[(uintptr_t)q] = allocation{bytes, t_device};
    s.used[t_device] += bytes;
    *p = q;
    return cudaSuccess;
}

static cudaError_t free_now(void *p)
{
    state &s = st();
    auto it = s.mem.find((uintptr_t)p);
    if (it == s.mem.end()) return ret(cudaErrorInvalidValue);
    s.used[it->second.device] -= it->second.bytes;
    s.mem.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    lock l;
    init_devices();
    if (!p) return cudaSuccess;
    drain_device(t_device); /* cudaFree synchronizes the device */
    return free_now(p);
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s)
{
    lock l;
    int saved = t_device;
    t_device = resolve(s)->device;
    cudaError_t e = cudaMalloc(p, bytes);
    t_device = saved;
    return e;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    lock l;
    if (!p) return cudaSuccess;
    if (!find_alloc(p, nullptr)) return ret(cudaErrorInvalidValue);
    push(resolve(s), "cudaFreeAsync", [p] { free_now(p); });
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    lock l;
    if (!p) return ret(cudaErrorInvalidValue);
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return ret(cudaErrorMemoryAllocation);
    st().pinned[(uintptr_t)*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    lock l;
    if (!p) return cudaSuccess;
    drain_all(); /* it synchronizes like cudaFree */
    auto it = st().pinned.find((uintptr_t)p);
    if (it == st().pinned.end()) return ret(cudaErrorInvalidValue);
    st().pinned.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    lock l;
    init_devices();
    *total = st().device_bytes;
    *free_bytes = st().device_bytes - st().used[t_device];
    return cudaSuccess;
}

/* Checks a copy's pointers against its kind; returns cudaErrorInvalidValue on a mismatch. */
static cudaError_t copy_check(void *dst, const void *src, size_t bytes, cudaMemcpyKind *kind,
                              int dev, const char *what)
{
    int dd = find_alloc(dst, nullptr) != nullptr, sd = find_alloc(src, nullptr) != nullptr;
    if (*kind == cudaMemcpyDefault)
        *kind = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                   : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    switch (*kind) {
    case cudaMemcpyHostToDevice:
        if (sd || !dd) return ret(cudaErrorInvalidValue);
        check_device_range(what, "dst", dev, dst, bytes);
        break;
    case cudaMemcpyDeviceToHost:
        if (dd || !sd) return ret(cudaErrorInvalidValue);
        check_device_range(what, "src", dev, src, bytes);
        break;
    case cudaMemcpyDeviceToDevice:
        if (!dd || !sd) return ret(cudaErrorInvalidValue);
        check_device_range(what, "dst", dev, dst, bytes);
        check_device_range(what, "src", dev, src, bytes);
        break;
    case cudaMemcpyHostToHost:
        if (dd || sd) return ret(cudaErrorInvalidValue);
        break;
    default:
        return ret(cudaErrorInvalidMemcpyDirection);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    lock l;
    if (!bytes) return cudaSuccess;
    CUstream_st *q = resolve(s);
    cudaError_t e = copy_check(dst, src, bytes, &kind, q->device, "cudaMemcpyAsync");
    if (e) return e;
    if (kind == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
        auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + bytes);
        push(q, "cudaMemcpyAsync", [dst, staged] { memcpy(dst, staged->data(), staged->size()); });
    } else if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes)) {
        implicit_waits(q);
        drain_to(q, ~0ULL); /* the copy is in stream order and done at return */
        memcpy(dst, src, bytes);
    } else {
        push(q, "cudaMemcpyAsync", [dst, src, bytes] { memmove(dst, src, bytes); });
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    lock l;
    if (!bytes) return cudaSuccess;
    CUstream_st *q = resolve(nullptr);
    cudaError_t e = copy_check(dst, src, bytes, &kind, q->device, "cudaMemcpy");
    if (e) return e;
    push(q, "cudaMemcpy", [dst, src, bytes] { memmove(dst, src, bytes); });
    if (kind != cudaMemcpyDeviceToDevice) drain_to(q, ~0ULL);
    return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev,
                                size_t bytes, cudaStream_t s)
{
    lock l;
    init_devices();
    if (!bytes) return cudaSuccess;
    int n = st().ndevices;
    if (dst_dev < 0 || dst_dev >= n || src_dev < 0 || src_dev >= n) return ret(cudaErrorInvalidDevice);
    /* the peer copy needs no peer access: each side is checked on its own device */
    check_device_range("cudaMemcpyPeerAsync", "dst", dst_dev, dst, bytes);
    check_device_range("cudaMemcpyPeerAsync", "src", src_dev, src, bytes);
    push(resolve(s), "cudaMemcpyPeerAsync", [dst, src, bytes] { memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    lock l;
    if (!bytes) return cudaSuccess;
    CUstream_st *q = resolve(s);
    if (!is_device_range(q->device, p, bytes)) return ret(cudaErrorInvalidValue);
    push(q, "cudaMemsetAsync", [p, value, bytes] { memset(p, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    lock l;
    cudaError_t e = cudaMemsetAsync(p, value, bytes, nullptr);
    if (!e) drain_to(resolve(nullptr), ~0ULL);
    return e;
}

/* --- streams */

static cudaError_t stream_new(cudaStream_t *s, bool blocking)
{
    lock l;
    init_devices();
    if (!s) return ret(cudaErrorInvalidValue);
    if (t_device >= st().ndevices) return ret(cudaErrorNoDevice);
    CUstream_st *q = new CUstream_st{};
    q->device = t_device;
    q->blocking = blocking;
    q->id = st().next_id++;
    st().streams[q->id] = q;
    *s = q;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return stream_new(s, true); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    if (flags & ~(unsigned)cudaStreamNonBlocking) return ret(cudaErrorInvalidValue);
    return stream_new(s, !(flags & cudaStreamNonBlocking));
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    lock l;
    if (!s || s->legacy) return ret(cudaErrorInvalidResourceHandle);
    drain_to(s, ~0ULL); /* queued work still completes */
    st().streams.erase(s->id);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    lock l;
    CUstream_st *q = resolve(s);
    drain_to(q, ~0ULL);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    /* the work runs now, so it is complete: callers that poll terminate */
    return cudaStreamSynchronize(s);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    lock l;
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    (void)flags;
    if (!e->recorded) return cudaSuccess; /* never recorded: nothing to wait for */
    unsigned long long id = e->stream_id, seq = e->seq;
    push(resolve(s), "cudaStreamWaitEvent", [id, seq] {
        auto it = st().streams.find(id);
        if (it != st().streams.end()) drain_to(it->second, seq);
    });
    return cudaSuccess;
}

/* --- events */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    if (!e) return ret(cudaErrorInvalidValue);
    *e = new CUevent_st{};
    (*e)->device = t_device;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    lock l;
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    CUstream_st *q = resolve(s);
    if (q->device != e->device) return ret(cudaErrorInvalidResourceHandle);
    implicit_waits(q);
    e->recorded = true;
    e->stream_id = q->id;
    e->seq = q->queued;
    return cudaSuccess;
}

static void event_drain(cudaEvent_t e)
{
    if (!e->recorded) return;
    auto it = st().streams.find(e->stream_id);
    if (it != st().streams.end()) drain_to(it->second, e->seq);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    lock l;
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    event_drain(e);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    lock l;
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    event_drain(e);
    return cudaSuccess;
}

/* --- messages */

static const struct {
    cudaError_t code;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoKernelImageForDevice, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (const auto &x : errors)
        if (x.code == e) return x.name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (const auto &x : errors)
        if (x.code == e) return x.text;
    return "unrecognized error code";
}

}  // extern "C"
