/* cuemu_nccl.cc: cuemu's NCCL: the NCCL 2.28 calls plumb makes (communicators from a unique
 * id, split, finalize, destroy and abort; grouped send and receive of bytes; all-reduce and
 * reduce-scatter of floats by sum or mean, all-gather of floats; asynchronous errors),
 * across processes on one machine, so that `mpirun -np 2 build/emu/plumb train ...
 * --transport nccl` runs on the CPU.
 *
 * Every process has its own cuemu (devices and memory), so data moves through files:
 * ncclGetUniqueId makes a private directory (mkdtemp: $TMPDIR/cuemu-nccl-XXXXXX) and puts
 * its path in the id; a communicator made from that id keeps all its files there (a split
 * communicator in the sibling directory <parent>.s<K>c<color>). Each file is written under
 * a temporary name and renamed into place, so a reader never sees half of it:
 *   join.R          rank R joined (holds its process id: a peer that dies is noticed)
 *   m.S.D.K         the K-th message from rank S to rank D (deleted by its receiver)
 *   c.K.R           rank R's input to the K-th collective (all-reduce, reduce-scatter or
 *                   all-gather; deleted by R once every rank's input to collective K+1
 *                   exists: then every rank has read it)
 *   split.K.R       rank R's color and key for the K-th split
 *   fin.R, gone.R   rank R finalized / destroyed its communicator; whoever sees every
 *                   rank gone removes the directory. ncclCommAbort removes it at once, so
 *                   the peers' waits fail (ncclRemoteError) instead of hanging.
 *
 * Stream semantics. Each operation is queued on its stream (cuemu::enqueue) and runs in
 * stream order. A send runs eagerly: after queuing it, its stream is drained, so a sender
 * whose host never waits still delivers. Sends are buffered (a file), so a send completes
 * before its receive is posted: more lenient than NCCL, whose sends may wait for the
 * receiver; what cuemu checks instead is that every message sent was received by the time
 * the communicator is finalized. A receive and an all-reduce run when the host waits for
 * their stream. In a group (ncclGroupStart/End) the sends are queued first, then the rest,
 * as NCCL progresses the group's operations together.
 *
 * Locking, and ranks that are threads of one process. Queued work runs under cuemu's one
 * process-wide lock, so an operation that waited there for a peer that is a thread of this
 * process would wait forever: that thread needs the lock to send. Hence the asynchronous
 * state: on a non-blocking communicator (config.blocking = 0, as plumb makes them) a
 * receive or an all-reduce leaves the communicator ncclInProgress ("still being queued")
 * until its peers' data exists, and ncclCommGetAsyncError, which the host polls without
 * holding the lock, checks for it (for an all-reduce it first runs the stream up to this
 * rank's own input, which it writes then). NCCL asks for that polling before anything else
 * is queued behind the operation, so by the time the host waits for the stream the data is
 * there and nothing waits under the lock. Blocking communicators wait for the same state
 * inside the call, outside the lock. Queued work that still has to wait under the lock
 * waits for a peer in another process (fine), and stops the run with a cuemu: line where
 * the peer is this process (it could never arrive). The price: the host of a non-blocking
 * communicator sees ncclSuccess only once its peers have sent (NCCL says so as soon as the
 * operation is queued), and an all-reduce's inputs are computed when the host first polls.
 *
 * Failures never hang: a wait gives up when the peer's process has died (kill(pid, 0) and
 * /proc: not a zombie), when the directory is gone (a peer aborted), on ncclCommAbort, and
 * after CUEMU_NCCL_TIMEOUT seconds (default 60); the communicator's asynchronous error then
 * reads ncclRemoteError. Each error is explained on stderr ("cuemu: nccl: ...") and by
 * ncclGetLastError. nccl.h (2.28.9) #defines none of these names to other symbols; only the
 * calls plumb makes (and a few neighbours) are here, and the datatypes and operations it
 * uses: bytes (ncclUint8) for send and receive, ncclFloat by ncclSum or ncclAvg for the
 * all-reduce and the reduce-scatter, ncclFloat for the all-gather; others are
 * ncclInvalidArgument. What is said of an all-reduce here holds for all three
 * collectives: they share one sequence of inputs per communicator. */
#include <nccl.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuemu.h"

namespace {

/* A condition the communicator waits for before it is ncclSuccess again (an operation
 * still "being queued"). poll returns ncclInProgress while it must wait, ncclSuccess when
 * it is met, or an error. Polled in order, under the lock, never blocking for a peer. */
struct gate {
    const char *what;
    double t0;
    std::function<ncclResult_t()> poll;
};

}  // namespace

/* The opaque handle type of <nccl.h>. Fields are guarded by the cuemu lock, except
 * `aborted`, which ncclCommAbort sets first so that a wait under the lock gives up. */
struct ncclComm {
    std::string dir;        /* this communicator's files */
    int rank = 0, nranks = 0;
    int device = 0;         /* the current device at creation */
    bool blocking = true;
    std::atomic<bool> aborted{false};
    ncclResult_t error = ncclSuccess; /* the asynchronous error, sticky */
    std::string last_error;
    std::vector<long> pids;                 /* per rank, once read from join.R; 0 unknown */
    std::vector<unsigned long long> sent, received; /* messages queued per peer */
    unsigned long long reductions = 0;      /* collectives queued */
    unsigned long long reduced = 0;         /* collectives that have run here */
    unsigned splits = 0;                    /* splits made of this communicator */
    std::deque<gate> gates;
    std::map<std::pair<int, cudaStream_t>, int> in_flight; /* queued, not run: per stream */
    bool finalizing = false;
    double checked_at = 0;  /* the last check that the directory and a peer are there */
};

namespace {

using comm_ptr = std::shared_ptr<ncclComm>;

constexpr const char ID_MAGIC[] = "cuemu-nccl:";

/* ------------------------------------------------------------------ small helpers */

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
}

/* CUEMU_NCCL_TIMEOUT: seconds a wait for a peer may take (default 60). */
double timeout_s()
{
    static const double t = [] {
        const char *v = getenv("CUEMU_NCCL_TIMEOUT");
        if (!v || !*v) return 60.0;
        char *end;
        double x = strtod(v, &end);
        if (*end || !(x > 0))
            cuemu::fail("CUEMU_NCCL_TIMEOUT=%s: expected a number of seconds > 0", v);
        return x;
    }();
    return t;
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

thread_local std::string t_last_error; /* ncclGetLastError(NULL) */

/* Records why a call failed (for ncclGetLastError) and says so on stderr. Returns rc. */
ncclResult_t note(ncclComm *c, ncclResult_t rc, const std::string &why)
{
    std::string line = c ? fmt("rank %d (process %ld) of %s: ", c->rank, (long)getpid(),
                               c->dir.c_str()) + why
                         : why;
    if (c) c->last_error = line;
    t_last_error = line;
    fprintf(stderr, "cuemu: nccl: %s\n", line.c_str());
    fflush(stderr);
    return rc;
}

/* Sets c's asynchronous error (the first one stays) and returns it. */
ncclResult_t set_error(ncclComm *c, ncclResult_t rc, const std::string &why)
{
    if (c->error == ncclSuccess && !c->aborted.load()) {
        c->error = rc;
        note(c, rc, why);
    }
    return c->error != ncclSuccess ? c->error : rc;
}

/* ------------------------------------------------------------------ files */

std::string file(const ncclComm &c, const std::string &name) { return c.dir + "/" + name; }

bool exists(const std::string &path)
{
    struct stat sb;
    return stat(path.c_str(), &sb) == 0;
}

/* Writes n bytes to dir/name atomically (a temporary name, then rename). Returns 0 or an
 * errno (ENOENT: the directory is gone). */
int put_file(const std::string &dir, const std::string &name, const void *p, size_t n)
{
    const std::string tmp = dir + "/.tmp-" + name, dst = dir + "/" + name;
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return errno;
    const char *q = (const char *)p;
    while (n) {
        ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            unlink(tmp.c_str());
            return e;
        }
        q += w;
        n -= (size_t)w;
    }
    if (close(fd)) return errno;
    if (rename(tmp.c_str(), dst.c_str())) {
        int e = errno;
        unlink(tmp.c_str());
        return e;
    }
    return 0;
}

/* Reads all of path into *out (to its end: /proc files report size 0). Returns 0 or an
 * errno. */
int get_file(const std::string &path, std::vector<char> *out)
{
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return errno;
    struct stat sb;
    size_t cap = fstat(fd, &sb) == 0 && sb.st_size > 0 ? (size_t)sb.st_size : 4096;
    out->resize(cap);
    size_t got = 0;
    for (;;) {
        if (got == out->size()) out->resize(2 * out->size());
        ssize_t r = read(fd, out->data() + got, out->size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return e;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    out->resize(got);
    return 0;
}

/* The number of files in dir whose names begin with prefix. */
int count_files(const std::string &dir, const std::string &prefix)
{
    DIR *d = opendir(dir.c_str());
    if (!d) return 0;
    int n = 0;
    while (struct dirent *e = readdir(d)) n += !strncmp(e->d_name, prefix.c_str(), prefix.size());
    closedir(d);
    return n;
}

/* Removes directory dir and everything in it (tolerating a peer doing the same). */
void remove_tree(const std::string &dir)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        DIR *d = opendir(dir.c_str());
        if (!d) return;
        while (struct dirent *e = readdir(d)) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            const std::string p = dir + "/" + e->d_name;
            if (unlink(p.c_str()) && errno == EISDIR) remove_tree(p);
        }
        closedir(d);
        if (!rmdir(dir.c_str()) || errno == ENOENT) return;
    }
}

/* ------------------------------------------------------------------ peers */

/* Rank r's process id from its join file (0 while unknown). */
long peer_pid(ncclComm *c, int r)
{
    if (r < 0 || r >= (int)c->pids.size()) return 0;
    if (!c->pids[r]) {
        std::vector<char> b;
        if (!get_file(file(*c, fmt("join.%d", r)), &b)) {
            b.push_back('\0');
            c->pids[r] = strtol(b.data(), nullptr, 10);
        }
    }
    return c->pids[r];
}

/* Whether process pid still runs (a zombie, exited but not yet reaped, does not). */
bool alive(long pid)
{
    if (kill((pid_t)pid, 0) && errno == ESRCH) return false;
    std::vector<char> b;
    if (get_file(fmt("/proc/%ld/stat", pid), &b)) return true; /* no /proc: trust kill */
    b.push_back('\0');
    const char *state = strrchr(b.data(), ')'); /* "pid (comm) S ..." */
    return !(state && (state[1] == ' ') && (state[2] == 'Z' || state[2] == 'X'));
}

/* ncclSuccess while a wait of c for rank `peer` (-1: none in particular) that began at t0
 * may still succeed; else records and returns the error that ends it. */
ncclResult_t hopeless(ncclComm *c, int peer, double t0, const char *what)
{
    if (c->aborted.load()) return ncclInvalidUsage; /* the handle is gone: nobody asks */
    if (c->error != ncclSuccess) return c->error;
    const double t = now_s();
    if (t - c->checked_at > 0.005) { /* the costlier checks, at most every 5 ms */
        c->checked_at = t;
        struct stat sb;
        if (stat(c->dir.c_str(), &sb))
            return set_error(c, ncclRemoteError,
                             fmt("%s: the communicator's directory is gone (a peer rank "
                                 "aborted it)", what));
        long pid = peer_pid(c, peer);
        if (pid > 0 && !alive(pid))
            return set_error(c, ncclRemoteError, fmt("%s: the communicator's rank %d (process "
                                                     "%ld) has died", what, peer, pid));
    }
    if (t - t0 > timeout_s())
        return set_error(c, ncclRemoteError,
                         fmt("%s: no progress within %.0f s (CUEMU_NCCL_TIMEOUT)", what,
                             timeout_s()));
    return ncclSuccess;
}

/* Waits under the lock (from queued work) until path exists, for a peer in another process.
 * Returns ncclSuccess, or the error that ended the wait. A peer that is this process can
 * never deliver while the lock is held: that stops the run. */
ncclResult_t wait_file(ncclComm *c, const std::string &path, int peer, const char *what)
{
    const double t0 = now_s();
    long nap = 20;
    while (!exists(path)) {
        if (ncclResult_t rc = hopeless(c, peer, t0, what)) return rc;
        if (peer_pid(c, peer) == (long)getpid())
            cuemu::fail("nccl: %s: rank %d of %s waits under cuemu's lock for rank %d, which "
                        "is this process and so can never deliver: poll "
                        "ncclCommGetAsyncError until ncclSuccess (a non-blocking "
                        "communicator) before waiting for the stream", what, c->rank,
                        c->dir.c_str(), peer);
        sleep_us(nap);
        nap = std::min(nap * 2, 1000L);
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------ the registry */

std::mutex &registry_mu()
{
    static std::mutex *m = new std::mutex;
    return *m;
}

/* The live communicators (queued work holds its own references). */
std::map<const ncclComm *, comm_ptr> &registry()
{
    static auto *r = new std::map<const ncclComm *, comm_ptr>;
    return *r;
}

/* The communicator of handle h: NULL for NULL; a handle that was destroyed (or never made)
 * stops the run, as using it would read freed memory on the GPU machine. */
comm_ptr find(ncclComm_t h, const char *what)
{
    if (!h) return nullptr;
    std::lock_guard<std::mutex> g(registry_mu());
    auto it = registry().find(h);
    if (it == registry().end())
        cuemu::fail("%s: communicator %p was destroyed (or never created)", what, (void *)h);
    return it->second;
}

void forget(ncclComm *c)
{
    std::lock_guard<std::mutex> g(registry_mu());
    registry().erase(c);
}

comm_ptr make_comm(const std::string &dir, int rank, int nranks, bool blocking)
{
    auto c = std::make_shared<ncclComm>();
    c->dir = dir;
    c->rank = rank;
    c->nranks = nranks;
    c->device = cuemu::current_device();
    c->blocking = blocking;
    if (nranks > 0) {
        c->pids.assign(nranks, 0);
        c->sent.assign(nranks, 0);
        c->received.assign(nranks, 0);
    }
    std::lock_guard<std::mutex> g(registry_mu());
    registry()[c.get()] = c;
    return c;
}

/* config->blocking as NCCL reads it (unset: blocking). */
bool blocking_of(const ncclConfig_t *cfg, bool dflt)
{
    if (!cfg || cfg->blocking == NCCL_CONFIG_UNDEF_INT) return dflt;
    return cfg->blocking != 0;
}

/* ------------------------------------------------------------------ asynchronous state */

/* Polls c's gates in order (under the lock). Returns ncclSuccess when none is left,
 * ncclInProgress while one must wait, or the asynchronous error. */
ncclResult_t poll(ncclComm *c)
{
    while (!c->gates.empty()) {
        if (c->error != ncclSuccess) return c->error;
        if (c->aborted.load()) return ncclInvalidUsage;
        gate &g = c->gates.front();
        ncclResult_t rc = g.poll();
        if (rc == ncclInProgress) {
            if (now_s() - g.t0 <= timeout_s()) return ncclInProgress;
            return set_error(c, ncclRemoteError,
                             fmt("%s: no progress within %.0f s (CUEMU_NCCL_TIMEOUT)", g.what,
                                 timeout_s()));
        }
        if (rc != ncclSuccess) return set_error(c, rc, fmt("%s failed", g.what));
        c->gates.pop_front();
    }
    return c->error;
}

void add_gate(ncclComm *c, const char *what, std::function<ncclResult_t()> fn)
{
    c->gates.push_back(gate{what, now_s(), std::move(fn)});
}

/* Waits (outside the lock) until c's gates are passed: a blocking call's wait. */
ncclResult_t settle(ncclComm *c)
{
    long nap = 20;
    for (;;) {
        ncclResult_t rc;
        {
            cuemu::lock l;
            rc = poll(c);
        }
        if (rc != ncclInProgress) return rc;
        if (c->aborted.load()) return ncclInvalidUsage;
        sleep_us(nap);
        nap = std::min(nap * 2, 1000L);
    }
}

/* What a queuing call returns: a blocking communicator waits for its gates; a non-blocking
 * one says ncclInProgress while any is left. */
ncclResult_t queued(ncclComm *c)
{
    if (c->blocking) return settle(c);
    cuemu::lock l;
    return poll(c);
}

/* ------------------------------------------------------------------ stream work */

bool is_default(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* Runs the work queued on stream s (of device dev) now. */
void drain(int dev, cudaStream_t s)
{
    cuemu::lock l;
    const int saved = cuemu::current_device();
    if (is_default(s)) cudaSetDevice(dev);
    cudaStreamSynchronize(s);
    if (is_default(s)) cudaSetDevice(saved);
}

/* Queues op on stream s for c, counted in c->in_flight until it runs. The op is skipped on
 * an aborted or failed communicator (its buffers then hold whatever they held). */
void enqueue(const comm_ptr &c, int dev, cudaStream_t s, const char *what,
             std::function<void()> op)
{
    const auto key = std::make_pair(dev, s);
    c->in_flight[key]++;
    cuemu::enqueue(s, what, [c, key, op = std::move(op)] {
        auto it = c->in_flight.find(key);
        if (it != c->in_flight.end() && --it->second == 0) c->in_flight.erase(it);
        if (c->aborted.load() || c->error != ncclSuccess) return;
        op();
    });
}

/* Checks an operation's stream and buffer: the stream must be on the communicator's device
 * and the buffer device memory of it (else the run stops, as the GPU would fault). Returns
 * the stream's device. */
int check_op(const char *what, const ncclComm *c, cudaStream_t s, const char *arg,
             const void *buf, size_t bytes)
{
    const int dev = cuemu::stream_device(s);
    if (dev != c->device)
        cuemu::fail("%s: the communicator belongs to device %d but its stream (%p) to device %d",
                    what, c->device, (void *)s, dev);
    if (bytes) cuemu::check_device_range(what, arg, dev, buf, bytes);
    return dev;
}

/* A point-to-point or collective operation, as ncclSend/ncclRecv/ncclAllReduce received
 * it (held inside a group until ncclGroupEnd). */
struct op_args {
    enum { SEND, RECV, ALLREDUCE, REDUCESCATTER, ALLGATHER } kind;
    comm_ptr c;
    const void *src;
    void *dst;
    size_t bytes; /* send/recv: bytes; collectives: floats (reduce-scatter: received,
                     all-gather: sent) */
    int peer;
    bool mean;
    int dev;
    cudaStream_t s;
};

/* A CUDA event that is destroyed with its last reference. */
struct event_box {
    cudaEvent_t e = nullptr;
    event_box() = default;
    event_box(const event_box &) = delete;
    event_box &operator=(const event_box &) = delete;
    ~event_box()
    {
        if (e) cudaEventDestroy(e);
    }
};

void issue_send(const op_args &a)
{
    const comm_ptr &c = a.c;
    const unsigned long long k = c->sent[a.peer]++;
    const std::string name = fmt("m.%d.%d.%llu", c->rank, a.peer, k);
    const void *src = a.src;
    const size_t bytes = a.bytes;
    ncclComm *cp = c.get();
    enqueue(c, a.dev, a.s, "ncclSend", [cp, name, src, bytes] {
        if (int e = put_file(cp->dir, name, src, bytes))
            set_error(cp, e == ENOENT ? ncclRemoteError : ncclSystemError,
                      fmt("ncclSend: writing %s: %s", name.c_str(), strerror(e)));
    });
}

void issue_recv(const op_args &a)
{
    const comm_ptr &c = a.c;
    const unsigned long long k = c->received[a.peer]++;
    const std::string path = file(*c, fmt("m.%d.%d.%llu", a.peer, c->rank, k));
    void *dst = a.dst;
    const size_t bytes = a.bytes;
    const int peer = a.peer;
    ncclComm *cp = c.get();
    auto ran = std::make_shared<bool>(false); /* the receive ran (the host waited early) */
    enqueue(c, a.dev, a.s, "ncclRecv", [cp, path, dst, bytes, peer, ran] {
        *ran = true;
        if (wait_file(cp, path, peer, "ncclRecv")) return;
        std::vector<char> b;
        if (int e = get_file(path, &b)) {
            set_error(cp, ncclRemoteError,
                      fmt("ncclRecv: reading %s: %s", path.c_str(), strerror(e)));
            return;
        }
        if (b.size() != bytes)
            cuemu::fail("nccl: ncclRecv: rank %d receives %zu bytes from rank %d, which sent "
                        "%zu (mismatched send and receive: undefined on the GPU)",
                        cp->rank, bytes, peer, b.size());
        if (bytes) memcpy(dst, b.data(), bytes);
        unlink(path.c_str());
    });
    const double t0 = now_s();
    add_gate(cp, "ncclRecv", [cp, path, peer, t0, ran]() -> ncclResult_t {
        if (*ran || exists(path)) return ncclSuccess;
        if (ncclResult_t rc = hopeless(cp, peer, t0, "ncclRecv")) return rc;
        return ncclInProgress;
    });
}

/* The collectives: all-reduce, reduce-scatter and all-gather of n floats (the count each
 * call names). With one rank a copy; else two queued steps, (1) this rank's input to the
 * file c.K.rank, (2) once every rank's input exists, the result into dst: the sum of the
 * inputs in rank order (the same bits on every rank; divided by nranks for a mean), this
 * rank's part of that sum for a reduce-scatter, the inputs one after the other for an
 * all-gather. The gate runs the stream up to (1) and waits for the peers' inputs. */
void issue_collective(const op_args &a)
{
    const comm_ptr &c = a.c;
    ncclComm *cp = c.get();
    const void *src = a.src;
    void *dst = a.dst;
    const size_t n = a.bytes;
    const bool mean = a.mean;
    const auto kind = a.kind;
    const char *what = kind == op_args::ALLREDUCE ? "ncclAllReduce"
                       : kind == op_args::REDUCESCATTER ? "ncclReduceScatter" : "ncclAllGather";
    /* floats each rank puts in, and where this rank's result starts in the sum */
    const size_t in = kind == op_args::REDUCESCATTER ? n * (size_t)c->nranks : n;
    if (c->nranks == 1) {
        enqueue(c, a.dev, a.s, what, [src, dst, n] {
            if (src != dst && n) memmove(dst, src, n * sizeof(float));
        });
        return;
    }
    const unsigned long long k = c->reductions++;
    auto mine = std::make_shared<std::vector<float>>();
    enqueue(c, a.dev, a.s, what, [cp, src, in, k, mine, what] {
        if (cp->reduced != k)
            cuemu::fail("nccl: %s: rank %d runs collective %llu of a communicator before "
                        "collective %llu has run (queued on different streams that ran out "
                        "of order)", what, cp->rank, k, cp->reduced);
        mine->assign((const float *)src, (const float *)src + in);
        const std::string name = fmt("c.%llu.%d", k, cp->rank);
        if (int e = put_file(cp->dir, name, mine->data(), in * sizeof(float)))
            set_error(cp, e == ENOENT ? ncclRemoteError : ncclSystemError,
                      fmt("%s: writing its input: %s", what, strerror(e)));
    });
    /* the gate runs the stream up to here */
    auto ev = std::make_shared<event_box>();
    const int saved = cuemu::current_device();
    cudaSetDevice(a.dev);
    if (cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming) != cudaSuccess) ev->e = nullptr;
    if (ev->e && cudaEventRecord(ev->e, a.s) != cudaSuccess) {
        cudaEventDestroy(ev->e);
        ev->e = nullptr;
    }
    cudaSetDevice(saved);
    enqueue(c, a.dev, a.s, what, [cp, dst, n, in, k, mine, mean, kind, what] {
        const size_t lo = kind == op_args::REDUCESCATTER ? n * (size_t)cp->rank : 0;
        std::vector<float> out;
        std::vector<char> b;
        for (int r = 0; r < cp->nranks; r++) {
            const float *x = mine->data();
            if (r != cp->rank) {
                const std::string path = file(*cp, fmt("c.%llu.%d", k, r));
                if (wait_file(cp, path, r, what)) return;
                if (int e = get_file(path, &b)) {
                    set_error(cp, ncclRemoteError,
                              fmt("%s: reading %s: %s", what, path.c_str(), strerror(e)));
                    return;
                }
                if (b.size() != in * sizeof(float))
                    cuemu::fail("nccl: %s: rank %d puts in %zu floats, rank %d %zu "
                                "(mismatched counts: undefined on the GPU)", what, cp->rank,
                                in, r, b.size() / sizeof(float));
                x = (const float *)b.data();
            }
            if (kind == op_args::ALLGATHER) out.insert(out.end(), x, x + n);
            else if (r == 0) out.assign(x + lo, x + lo + n);
            else
                for (size_t i = 0; i < n; i++) out[i] += x[lo + i];
        }
        if (mean)
            for (size_t i = 0; i < n; i++) out[i] /= (float)cp->nranks;
        if (!out.empty()) memcpy(dst, out.data(), out.size() * sizeof(float));
        cp->reduced = k + 1;
        /* every rank has reached collective k, so all have read this rank's k - 1 */
        if (k) unlink(file(*cp, fmt("c.%llu.%d", k - 1, cp->rank)).c_str());
        mine->clear();
        mine->shrink_to_fit();
    });
    const double t0 = now_s();
    add_gate(cp, what, [cp, k, ev, t0, what]() -> ncclResult_t {
        if (ev->e) { /* run the stream up to this rank's input */
            cudaEventSynchronize(ev->e);
            cudaEventDestroy(ev->e);
            ev->e = nullptr;
        }
        if (cp->reduced > k) return ncclSuccess; /* it ran already (the host waited early) */
        for (int r = 0; r < cp->nranks; r++) {
            if (r == cp->rank || exists(file(*cp, fmt("c.%llu.%d", k, r)))) continue;
            if (ncclResult_t rc = hopeless(cp, r, t0, what)) return rc;
            return ncclInProgress;
        }
        return ncclSuccess;
    });
}

/* Queues the operations of a group (or one operation): sends first, then the others in
 * call order; the streams of the sends are drained, so the sends are delivered now. */
void issue(const std::vector<op_args> &ops)
{
    cuemu::lock l;
    std::vector<std::pair<int, cudaStream_t>> streams;
    for (const op_args &a : ops) {
        if (a.kind != op_args::SEND) continue;
        issue_send(a);
        auto key = std::make_pair(a.dev, a.s);
        if (std::find(streams.begin(), streams.end(), key) == streams.end()) streams.push_back(key);
    }
    for (const auto &key : streams) drain(key.first, key.second);
    for (const op_args &a : ops) {
        if (a.kind == op_args::RECV) issue_recv(a);
        else if (a.kind != op_args::SEND) issue_collective(a);
    }
}

/* ------------------------------------------------------------------ groups */

thread_local int t_group_depth = 0;
thread_local std::vector<op_args> t_group_ops;
thread_local std::vector<comm_ptr> t_group_comms; /* made or used inside the group */

void group_note(const comm_ptr &c)
{
    if (std::find(t_group_comms.begin(), t_group_comms.end(), c) == t_group_comms.end())
        t_group_comms.push_back(c);
}

/* An operation: held in a group, else queued now. Returns what the call returns. */
ncclResult_t submit(op_args a)
{
    if (t_group_depth) {
        group_note(a.c);
        t_group_ops.push_back(std::move(a));
        return ncclSuccess;
    }
    comm_ptr c = a.c;
    issue({a});
    return queued(c.get());
}

/* The common argument checks of an operation on comm; fills a.c and returns ncclSuccess. */
ncclResult_t check_comm(const char *what, ncclComm_t comm, op_args *a)
{
    a->c = find(comm, what);
    if (!a->c) return note(nullptr, ncclInvalidArgument, fmt("%s: comm is NULL", what));
    ncclComm *c = a->c.get();
    if (c->error != ncclSuccess) return c->error;
    if (c->nranks <= 0)
        return note(c, ncclInvalidUsage, fmt("%s: the communicator is not ready (its split has "
                                             "not completed)", what));
    if (c->finalizing)
        return note(c, ncclInvalidUsage, fmt("%s: the communicator was finalized", what));
    return ncclSuccess;
}

/* ------------------------------------------------------------------ split */

/* One split of a parent communicator, shared by the parent's gate and the child's (weak
 * references: the gates belong to the communicators). */
struct split_state {
    std::weak_ptr<ncclComm> parent, child; /* child: none for NCCL_SPLIT_NOCOLOR */
    bool has_child = false;
    unsigned k = 0;
    int color = 0, key = 0;
    bool done = false;
};

/* The child joins its directory: writes join.R. Returns 0 or an errno. */
int join(ncclComm *c)
{
    const std::string pid = fmt("%ld\n", (long)getpid());
    if (exists(file(*c, fmt("join.%d", c->rank)))) return EEXIST;
    return put_file(c->dir, fmt("join.%d", c->rank), pid.data(), pid.size());
}

/* The gate of a communicator's creation: every rank has joined. */
std::function<ncclResult_t()> join_gate(ncclComm *c)
{
    const double t0 = now_s();
    return [c, t0]() -> ncclResult_t {
        for (int r = 0; r < c->nranks; r++) {
            if (exists(file(*c, fmt("join.%d", r)))) continue;
            if (ncclResult_t rc = hopeless(c, -1, t0, "ncclCommInitRank")) return rc;
            return ncclInProgress;
        }
        for (int r = 0; r < c->nranks; r++) peer_pid(c, r);
        return ncclSuccess;
    };
}

/* Once every rank of the parent has written its color and key: the child's rank and size
 * (ranks of one color ordered by key, then by parent rank), its directory and its join. */
ncclResult_t resolve(split_state *s, double t0)
{
    if (s->done) return ncclSuccess;
    comm_ptr parent = s->parent.lock(), child = s->child.lock();
    if (!parent) {
        if (child)
            return set_error(child.get(), ncclInvalidUsage,
                             "ncclCommSplit: the parent was destroyed before the split completed");
        return ncclInvalidUsage;
    }
    ncclComm *p = parent.get();
    std::vector<std::pair<int, int>> members; /* (key, parent rank) of our color */
    for (int r = 0; r < p->nranks; r++) {
        std::vector<char> b;
        if (get_file(file(*p, fmt("split.%u.%d", s->k, r)), &b)) {
            if (ncclResult_t rc = hopeless(p, r, t0, "ncclCommSplit")) return rc;
            return ncclInProgress;
        }
        b.push_back('\0');
        int color = 0, key = 0;
        if (sscanf(b.data(), "%d %d", &color, &key) != 2)
            return set_error(p, ncclInternalError, "ncclCommSplit: a malformed split file");
        if (s->has_child && color == s->color) members.emplace_back(key, r);
    }
    s->done = true;
    if (!child) return ncclSuccess; /* no color, or destroyed meanwhile */
    std::sort(members.begin(), members.end());
    ncclComm *c = child.get();
    for (size_t i = 0; i < members.size(); i++)
        if (members[i].second == p->rank) c->rank = (int)i;
    c->pids.assign(members.size(), 0);
    c->sent.assign(members.size(), 0);
    c->received.assign(members.size(), 0);
    c->nranks = (int)members.size();
    if (mkdir(c->dir.c_str(), 0700) && errno != EEXIST)
        return set_error(c, ncclSystemError, fmt("ncclCommSplit: mkdir %s: %s", c->dir.c_str(),
                                                 strerror(errno)));
    if (int e = join(c))
        return set_error(c, ncclSystemError, fmt("ncclCommSplit: joining: %s", strerror(e)));
    return ncclSuccess;
}

/* ------------------------------------------------------------------ finalize / destroy */

/* The gate of ncclCommFinalize: this rank's queued operations have run, then every rank
 * has finalized. */
std::function<ncclResult_t()> finalize_gate(ncclComm *c)
{
    const double t0 = now_s();
    auto written = std::make_shared<bool>(false);
    return [c, t0, written]() -> ncclResult_t {
        while (!c->in_flight.empty()) {
            auto key = c->in_flight.begin()->first;
            drain(key.first, key.second);
            if (c->error != ncclSuccess) return c->error;
            c->in_flight.erase(key); /* drained: whatever is left has run */
        }
        if (!*written) {
            if (int e = put_file(c->dir, fmt("fin.%d", c->rank), "", 0))
                return set_error(c, e == ENOENT ? ncclRemoteError : ncclSystemError,
                                 fmt("ncclCommFinalize: %s", strerror(e)));
            *written = true;
        }
        for (int r = 0; r < c->nranks; r++) {
            if (exists(file(*c, fmt("fin.%d", r)))) continue;
            if (ncclResult_t rc = hopeless(c, r, t0, "ncclCommFinalize")) return rc;
            return ncclInProgress;
        }
        /* every rank's receives have run: a message of ours still here was never received */
        const int unmatched = count_files(c->dir, fmt("m.%d.", c->rank));
        if (unmatched)
            return set_error(c, ncclInvalidUsage,
                             fmt("ncclCommFinalize: %d message(s) this rank sent were never "
                                 "received (on a GPU those sends would never complete)",
                                 unmatched));
        return ncclSuccess;
    };
}

}  // namespace

/* ------------------------------------------------------------------ the C API */

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* cuemu's own wording; the details of each failure are on stderr and in ncclGetLastError. */
const char *ncclGetErrorString(ncclResult_t rc)
{
    switch (rc) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "a CUDA call failed inside NCCL";
    case ncclSystemError: return "a system call failed (cuemu: the communicator's files)";
    case ncclInternalError: return "internal error of the emulated NCCL";
    case ncclInvalidArgument: return "an argument is invalid";
    case ncclInvalidUsage: return "a call made in the wrong order or state";
    case ncclRemoteError: return "a peer rank failed, died or aborted its communicator";
    case ncclInProgress: return "the operation is still in progress";
    default: return "an unknown NCCL result";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    thread_local std::string out;
    comm_ptr c = comm ? find(comm, "ncclGetLastError") : nullptr;
    cuemu::lock l;
    out = c ? c->last_error : t_last_error;
    return out.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) return note(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    const char *t = getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/cuemu-nccl-XXXXXX";
    if (sizeof ID_MAGIC + tmpl.size() > sizeof id->internal)
        return note(nullptr, ncclSystemError,
                    fmt("ncclGetUniqueId: the directory %s does not fit in an id (shorten "
                        "TMPDIR)", tmpl.c_str()));
    std::vector<char> path(tmpl.begin(), tmpl.end());
    path.push_back('\0');
    if (!mkdtemp(path.data()))
        return note(nullptr, ncclSystemError,
                    fmt("ncclGetUniqueId: mkdtemp %s: %s", tmpl.c_str(), strerror(errno)));
    memset(id->internal, 0, sizeof id->internal);
    snprintf(id->internal, sizeof id->internal, "%s%s", ID_MAGIC, path.data());
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    if (!comm) return note(nullptr, ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return note(nullptr, ncclInvalidArgument,
                    fmt("ncclCommInitRankConfig: rank %d of %d", rank, nranks));
    if (config && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t)))
        return note(nullptr, ncclInvalidArgument,
                    "ncclCommInitRankConfig: the config was not set from NCCL_CONFIG_INITIALIZER");
    char raw[sizeof commId.internal + 1];
    memcpy(raw, commId.internal, sizeof commId.internal);
    raw[sizeof commId.internal] = '\0';
    if (strncmp(raw, ID_MAGIC, sizeof ID_MAGIC - 1))
        return note(nullptr, ncclInvalidArgument,
                    "ncclCommInitRankConfig: the id was not made by ncclGetUniqueId");
    const std::string dir = raw + sizeof ID_MAGIC - 1;
    if (!exists(dir))
        return note(nullptr, ncclRemoteError,
                    fmt("ncclCommInitRankConfig: %s is gone (the rank that made the id "
                        "aborted or finished)", dir.c_str()));
    comm_ptr c;
    {
        cuemu::lock l;
        c = make_comm(dir, rank, nranks, blocking_of(config, true));
        if (int e = join(c.get())) {
            forget(c.get());
            return note(nullptr, e == EEXIST ? ncclInvalidUsage : ncclSystemError,
                        fmt("ncclCommInitRankConfig: rank %d of %s: %s", rank, dir.c_str(),
                            e == EEXIST ? "this rank has joined already" : strerror(e)));
        }
        add_gate(c.get(), "ncclCommInitRank", join_gate(c.get()));
    }
    *comm = c.get();
    if (t_group_depth) { /* a blocking init waits at ncclGroupEnd */
        group_note(c);
        return ncclSuccess;
    }
    return queued(c.get());
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    comm_ptr p = find(comm, "ncclCommSplit");
    if (!p || !newcomm)
        return note(nullptr, ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
    *newcomm = nullptr;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return note(p.get(), ncclInvalidArgument, fmt("ncclCommSplit: color %d", color));
    if (config && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t)))
        return note(p.get(), ncclInvalidArgument,
                    "ncclCommSplit: the config was not set from NCCL_CONFIG_INITIALIZER");
    auto s = std::make_shared<split_state>();
    comm_ptr child;
    {
        cuemu::lock l;
        if (p->error != ncclSuccess) return p->error;
        if (p->nranks <= 0 || p->finalizing)
            return note(p.get(), ncclInvalidUsage, "ncclCommSplit: the parent is not usable");
        s->parent = p;
        s->k = p->splits++;
        s->color = color;
        s->key = key;
        const std::string line = fmt("%d %d\n", color, key);
        if (int e = put_file(p->dir, fmt("split.%u.%d", s->k, p->rank), line.data(), line.size()))
            return set_error(p.get(), e == ENOENT ? ncclRemoteError : ncclSystemError,
                             fmt("ncclCommSplit: %s", strerror(e)));
        const double t0 = now_s();
        add_gate(p.get(), "ncclCommSplit", [s, t0] { return resolve(s.get(), t0); });
        if (color != NCCL_SPLIT_NOCOLOR) {
            child = make_comm(fmt("%s.s%uc%d", p->dir.c_str(), s->k, color), 0, 0,
                              blocking_of(config, p->blocking));
            child->device = p->device;
            s->child = child;
            s->has_child = true;
            ncclComm *c = child.get();
            /* the child's state: the split resolved (the parent's gate may do it), joined */
            add_gate(c, "ncclCommSplit", [s, t0] { return resolve(s.get(), t0); });
            auto jg = std::make_shared<std::function<ncclResult_t()>>();
            add_gate(c, "ncclCommSplit (join)", [c, jg]() -> ncclResult_t {
                if (!*jg) *jg = join_gate(c);
                return (*jg)();
            });
            *newcomm = c;
        }
    }
    if (t_group_depth) {
        group_note(p);
        if (child) group_note(child);
        return ncclSuccess;
    }
    ncclResult_t rc = queued(p.get());
    if (rc != ncclSuccess && rc != ncclInProgress) return rc;
    if (child && child->blocking) return settle(child.get());
    return rc;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    comm_ptr c = find(comm, "ncclCommGetAsyncError");
    if (!c || !asyncError)
        return note(nullptr, ncclInvalidArgument,
                    "ncclCommGetAsyncError: comm or asyncError is NULL");
    cuemu::lock l;
    *asyncError = poll(c.get());
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    comm_ptr c = find(comm, "ncclCommCount");
    if (!c || !count)
        return note(nullptr, ncclInvalidArgument, "ncclCommCount: comm or count is NULL");
    cuemu::lock l;
    if (c->nranks <= 0) return ncclInProgress;
    *count = c->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    comm_ptr c = find(comm, "ncclCommUserRank");
    if (!c || !rank)
        return note(nullptr, ncclInvalidArgument, "ncclCommUserRank: comm or rank is NULL");
    cuemu::lock l;
    if (c->nranks <= 0) return ncclInProgress;
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    comm_ptr c = find(comm, "ncclCommCuDevice");
    if (!c || !device)
        return note(nullptr, ncclInvalidArgument, "ncclCommCuDevice: comm or device is NULL");
    *device = c->device;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    comm_ptr c = find(comm, "ncclCommFinalize");
    if (!c) return note(nullptr, ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
    {
        cuemu::lock l;
        if (c->finalizing) return note(c.get(), ncclInvalidUsage, "ncclCommFinalize: called twice");
        c->finalizing = true;
        if (c->error != ncclSuccess) return c->error;
        add_gate(c.get(), "ncclCommFinalize", finalize_gate(c.get()));
    }
    return queued(c.get());
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    comm_ptr c = find(comm, "ncclCommDestroy");
    if (!c) return note(nullptr, ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
    ncclResult_t rc = ncclSuccess;
    bool broken;
    {
        cuemu::lock l;
        if (!c->finalizing && c->error == ncclSuccess && c->nranks > 0) {
            c->finalizing = true; /* NCCL finalizes a communicator destroyed without it */
            add_gate(c.get(), "ncclCommFinalize", finalize_gate(c.get()));
        }
        broken = c->error != ncclSuccess || c->nranks <= 0;
    }
    if (!broken) {
        rc = settle(c.get());
        broken = rc != ncclSuccess;
    }
    cuemu::lock l;
    if (broken) {
        remove_tree(c->dir); /* the peers' waits end (ncclRemoteError) */
    } else {
        put_file(c->dir, fmt("gone.%d", c->rank), "", 0);
        bool all = true;
        for (int r = 0; r < c->nranks && all; r++) all = exists(file(*c, fmt("gone.%d", r)));
        if (all) remove_tree(c->dir);
    }
    c->gates.clear();
    forget(c.get());
    return rc;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return note(nullptr, ncclInvalidArgument, "ncclCommAbort: comm is NULL");
    comm_ptr c = find(comm, "ncclCommAbort");
    c->aborted.store(true); /* first, so that work waiting under the lock gives up */
    cuemu::lock l;
    remove_tree(c->dir);
    c->gates.clear();
    forget(c.get());
    return ncclSuccess;
}

ncclResult_t ncclGroupStart()
{
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd()
{
    if (t_group_depth <= 0)
        return note(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--t_group_depth) return ncclSuccess;
    std::vector<op_args> ops;
    std::vector<comm_ptr> comms;
    ops.swap(t_group_ops);
    comms.swap(t_group_comms);
    issue(ops);
    ncclResult_t rc = ncclSuccess;
    for (const comm_ptr &c : comms) {
        ncclResult_t r = queued(c.get());
        if (r != ncclSuccess && (rc == ncclSuccess || rc == ncclInProgress)) rc = r;
    }
    return rc;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    op_args a{};
    a.kind = op_args::SEND;
    if (ncclResult_t rc = check_comm("ncclSend", comm, &a)) return rc;
    if (datatype != ncclUint8 && datatype != ncclInt8)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclSend: datatype %d (cuemu sends bytes: ncclUint8)", (int)datatype));
    if (peer < 0 || peer >= a.c->nranks)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclSend: peer %d of %d", peer, a.c->nranks));
    a.src = sendbuff;
    a.bytes = count;
    a.peer = peer;
    a.s = stream;
    a.dev = check_op("ncclSend", a.c.get(), stream, "sendbuff", sendbuff, count);
    return submit(std::move(a));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    op_args a{};
    a.kind = op_args::RECV;
    if (ncclResult_t rc = check_comm("ncclRecv", comm, &a)) return rc;
    if (datatype != ncclUint8 && datatype != ncclInt8)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclRecv: datatype %d (cuemu receives bytes: ncclUint8)", (int)datatype));
    if (peer < 0 || peer >= a.c->nranks)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclRecv: peer %d of %d", peer, a.c->nranks));
    a.dst = recvbuff;
    a.bytes = count;
    a.peer = peer;
    a.s = stream;
    a.dev = check_op("ncclRecv", a.c.get(), stream, "recvbuff", recvbuff, count);
    return submit(std::move(a));
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    op_args a{};
    a.kind = op_args::ALLREDUCE;
    if (ncclResult_t rc = check_comm("ncclAllReduce", comm, &a)) return rc;
    if (datatype != ncclFloat32)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclAllReduce: datatype %d (cuemu reduces ncclFloat only)",
                        (int)datatype));
    if (op != ncclSum && op != ncclAvg)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclAllReduce: reduction %d (cuemu has ncclSum and ncclAvg)", (int)op));
    a.src = sendbuff;
    a.dst = recvbuff;
    a.bytes = count;
    a.mean = op == ncclAvg;
    a.s = stream;
    const size_t bytes = count * sizeof(float);
    a.dev = check_op("ncclAllReduce", a.c.get(), stream, "sendbuff", sendbuff, bytes);
    check_op("ncclAllReduce", a.c.get(), stream, "recvbuff", recvbuff, bytes);
    return submit(std::move(a));
}

/* The common checks of a reduce-scatter or an all-gather: floats; recv and send of their
 * sizes on the communicator's device. */
static ncclResult_t coll_args(op_args *a, const char *what, const void *sendbuff,
                              void *recvbuff, size_t count, ncclDataType_t datatype,
                              ncclComm_t comm, cudaStream_t stream)
{
    if (ncclResult_t rc = check_comm(what, comm, a)) return rc;
    if (datatype != ncclFloat32)
        return note(a->c.get(), ncclInvalidArgument,
                    fmt("%s: datatype %d (cuemu moves ncclFloat only)", what, (int)datatype));
    const size_t part = count * sizeof(float), whole = part * (size_t)a->c->nranks;
    const bool rs = a->kind == op_args::REDUCESCATTER;
    a->src = sendbuff;
    a->dst = recvbuff;
    a->bytes = count;
    a->s = stream;
    a->dev = check_op(what, a->c.get(), stream, "sendbuff", sendbuff, rs ? whole : part);
    check_op(what, a->c.get(), stream, "recvbuff", recvbuff, rs ? part : whole);
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    op_args a{};
    a.kind = op_args::REDUCESCATTER;
    if (ncclResult_t rc = coll_args(&a, "ncclReduceScatter", sendbuff, recvbuff, recvcount,
                                    datatype, comm, stream))
        return rc;
    if (op != ncclSum && op != ncclAvg)
        return note(a.c.get(), ncclInvalidArgument,
                    fmt("ncclReduceScatter: reduction %d (cuemu has ncclSum and ncclAvg)",
                        (int)op));
    a.mean = op == ncclAvg;
    return submit(std::move(a));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    op_args a{};
    a.kind = op_args::ALLGATHER;
    if (ncclResult_t rc = coll_args(&a, "ncclAllGather", sendbuff, recvbuff, sendcount,
                                    datatype, comm, stream))
        return rc;
    return submit(std::move(a));
}

}  // extern "C"
