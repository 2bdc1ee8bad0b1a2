/* cuemu_fiber.cc: runs a kernel launch on the CPU. Blocks run one after another; inside a
 * block every GPU thread is a fiber on a stack of its own, run until it returns
 * or reaches a barrier (__syncthreads) or a warp shuffle, so that values written before a
 * barrier are seen after it, as on the GPU. The scheduler also checks the rules the GPU
 * leaves undefined and stops with a message when a kernel breaks them: a __syncthreads that
 * not every thread of the block reaches, a shuffle whose mask names lanes that exited or do
 * not exist, threads of one warp waiting at different places (a hang on the GPU).
 *
 * Two things make a kernel's hidden assumptions fail here rather than pass by luck:
 * - Shared memory is filled with NaN bytes (0xff) when each block starts, as it holds
 *   garbage on the GPU, so a read before the block wrote it shows.
 * - CUEMU_ORDER chooses the order in which blocks run and, between two barriers, the order
 *   in which a block's threads run: forward (the default), reverse, or shuffle[:SEED] (a new
 *   permutation each time, from SEED, default 1). A thread that reads what another wrote
 *   without a barrier between them sees the write in one order and not in the other, so
 *   the same tests run in each order catch a missing __syncthreads. */
#include "cuemu_kernel.h" /* first: it defines __shared__ and friends */
#include "cuemu.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <stdlib.h>

#include <vector>

/* Every __shared__ variable lies in this section (cuemu_kernel.h); the linker defines these
 * bounds when some object has one. */
extern "C" char __start_cuemu_shared[] __attribute__((weak));
extern "C" char __stop_cuemu_shared[] __attribute__((weak));

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUEMU_ASAN 1
#else
#define CUEMU_ASAN 0
#endif

namespace cuemu {

uint3 t_thread_idx, t_block_idx, t_block_dim, t_grid_dim;

namespace {

constexpr size_t STACK_BYTES = 256 * 1024; /* per GPU thread; kernels need little */
constexpr int WARP = 32;

void fiber_entry();

/* ---- context switches. On x86-64 a few instructions that save the callee-saved registers
 * and the floating-point control words (no system call: a kernel of a million threads
 * switches millions of times); elsewhere ucontext. */
#if defined(__x86_64__)
extern "C" void cuemu_switch(void **save_sp, void *next_sp);
asm(".text\n"
    ".globl cuemu_switch\n"
    ".type cuemu_switch,@function\n"
    "cuemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuemu_switch, .-cuemu_switch\n");

struct context {
    void *sp = nullptr;
};

void ctx_switch(context *from, context *to) { cuemu_switch(&from->sp, to->sp); }

/* A context that starts fiber_entry on [stack, stack + bytes): the first switch to it pops
 * the saved words laid out here and returns into fiber_entry. */
void ctx_make(context *c, char *stack, size_t bytes)
{
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
    uint64_t *w = (uint64_t *)top;
    *--w = 0;                          /* fiber_entry's return address: it never returns */
    *--w = (uint64_t)(uintptr_t)&fiber_entry;
    for (int i = 0; i < 6; i++) *--w = 0; /* rbp rbx r12 r13 r14 r15 */
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    *--w = (uint64_t)mxcsr | (uint64_t)fpucw << 32;
    c->sp = w;
}
#else
struct context {
    ucontext_t uc;
};

void ctx_switch(context *from, context *to) { swapcontext(&from->uc, &to->uc); }

void ctx_make(context *c, char *stack, size_t bytes)
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = bytes;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, fiber_entry, 0);
}
#endif

enum fiber_state { F_RUN, F_BARRIER, F_SHFL, F_DONE };

struct fiber {
    context ctx;
    char *stack = nullptr; /* STACK_BYTES, a guard page below */
    fiber_state state = F_DONE;
    /* a pending shuffle */
    unsigned mask = 0;
    int lane_mask = 0, width = WARP;
    uint32_t value = 0, result = 0;
#if CUEMU_ASAN
    void *fake_stack = nullptr;
#endif
};

/* The block being run. */
struct block_run {
    const char *name = nullptr;
    const std::function<void()> *body = nullptr;
    std::vector<fiber> fibers; /* grows to the largest block seen; stacks are kept */
    int nthreads = 0, current = -1;
    int done = 0, at_barrier = 0, at_shfl = 0; /* threads returned / waiting at each */
    context sched;
#if CUEMU_ASAN
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    void *sched_fake = nullptr;
#endif
};

block_run *t_run = nullptr; /* kernels run one at a time, under the lock */

/* ---- the order of blocks and threads (CUEMU_ORDER) */

enum order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };

order_kind g_order = ORDER_FORWARD;
uint64_t g_rng = 1; /* shuffle's state: launches continue one sequence */

/* Reads CUEMU_ORDER (each launch, so a test may set it); fail() on a value it does not know. */
void order_read()
{
    static const char *seen = nullptr; /* the value last parsed */
    const char *v = getenv("CUEMU_ORDER");
    if (!v || !*v) v = "forward";
    if (seen && !strcmp(seen, v)) return;
    static char keep[64];
    snprintf(keep, sizeof keep, "%s", v);
    seen = keep;
    if (!strcmp(v, "forward")) {
        g_order = ORDER_FORWARD;
    } else if (!strcmp(v, "reverse")) {
        g_order = ORDER_REVERSE;
    } else if (!strncmp(v, "shuffle", 7) && (!v[7] || v[7] == ':')) {
        char *end = nullptr;
        unsigned long long seed = v[7] ? strtoull(v + 8, &end, 10) : 1;
        if (v[7] && (end == v + 8 || *end))
            fail("CUEMU_ORDER=%s: expected shuffle:SEED with SEED a number", v);
        g_order = ORDER_SHUFFLE;
        g_rng = seed * 0x9e3779b97f4a7c15ull + 1; /* never 0 */
    } else {
        fail("CUEMU_ORDER=%s: expected forward, reverse, shuffle or shuffle:SEED", v);
    }
}

uint64_t rng_next()
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17; /* xorshift64 */
    return g_rng;
}

/* Fills order[0, n) with 0 .. n-1 in the order CUEMU_ORDER asks for. */
void order_fill(std::vector<int> &order, int n)
{
    order.resize((size_t)n);
    for (int i = 0; i < n; i++) order[(size_t)i] = g_order == ORDER_REVERSE ? n - 1 - i : i;
    if (g_order != ORDER_SHUFFLE) return;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next() % (uint64_t)(i + 1));
        int t = order[(size_t)i];
        order[(size_t)i] = order[(size_t)j], order[(size_t)j] = t;
    }
}

/* ---- shared memory: NaN bytes when a block starts */

struct span {
    char *p;
    size_t n;
};

/* The writable parts of the shared-memory section: all of it, or under AddressSanitizer the
 * variables without the redzones it puts between them. Computed once. */
const std::vector<span> &shared_spans()
{
    static std::vector<span> spans;
    static bool done = false;
    if (done) return spans;
    done = true;
    char *a = __start_cuemu_shared, *b = __stop_cuemu_shared;
    if (!a || !b || b <= a) return spans;
#if CUEMU_ASAN
    for (char *p = a; p < b;) {
        while (p < b && __asan_address_is_poisoned(p)) p++;
        char *q = p;
        while (q < b && !__asan_address_is_poisoned(q)) q++;
        if (q > p) spans.push_back(span{p, (size_t)(q - p)});
        p = q;
    }
#else
    spans.push_back(span{a, (size_t)(b - a)});
#endif
    return spans;
}

void shared_poison()
{
    for (const span &s : shared_spans()) memset(s.p, 0xff, s.n);
}

char *stack_new()
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) fail("out of memory for GPU thread stacks");
    mprotect(p, page, PROT_NONE); /* an overflow faults instead of corrupting */
    return (char *)p + page;
}

/* Switches from the running fiber back to the scheduler; returns when resumed. */
void fiber_yield(block_run *r)
{
    fiber &f = r->fibers[r->current];
#if CUEMU_ASAN
    __sanitizer_start_switch_fiber(&f.fake_stack, r->sched_bottom, r->sched_size);
#endif
    ctx_switch(&f.ctx, &r->sched);
#if CUEMU_ASAN
    __sanitizer_finish_switch_fiber(f.fake_stack, &r->sched_bottom, &r->sched_size);
#endif
}

void fiber_entry()
{
    block_run *r = t_run;
#if CUEMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r->sched_bottom, &r->sched_size);
#endif
    (*r->body)();
    r->fibers[r->current].state = F_DONE;
    r->done++;
#if CUEMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, r->sched_bottom, r->sched_size);
#endif
    context gone; /* this fiber's last state: never resumed */
    ctx_switch(&gone, &r->sched);
    fail("a finished GPU thread was resumed");
}

void set_thread_idx(const block_run *r, int i)
{
    unsigned bx = t_block_dim.x, by = t_block_dim.y;
    t_thread_idx.x = (unsigned)i % bx;
    t_thread_idx.y = ((unsigned)i / bx) % by;
    t_thread_idx.z = (unsigned)i / (bx * by);
    (void)r;
}

void resume(block_run *r, int i)
{
    fiber &f = r->fibers[i];
    r->current = i;
    set_thread_idx(r, i);
    f.state = F_RUN;
#if CUEMU_ASAN
    __sanitizer_start_switch_fiber(&r->sched_fake, f.stack, STACK_BYTES);
#endif
    ctx_switch(&r->sched, &f.ctx);
#if CUEMU_ASAN
    __sanitizer_finish_switch_fiber(r->sched_fake, nullptr, nullptr);
#endif
    r->current = -1;
}

const char *state_name(fiber_state s)
{
    switch (s) {
    case F_BARRIER: return "__syncthreads";
    case F_SHFL: return "a warp shuffle";
    case F_DONE: return "returned";
    default: return "running";
    }
}

/* Completes the shuffles of warp w when every lane its masks name is waiting at one.
 * Returns the number of lanes released (0: none). */
int resolve_warp(block_run *r, int w)
{
    int lo = w * WARP, hi = lo + WARP < r->nthreads ? lo + WARP : r->nthreads;
    int waiting = 0;
    for (int i = lo; i < hi; i++) {
        if (r->fibers[i].state == F_RUN) return 0;
        waiting += r->fibers[i].state == F_SHFL;
    }
    if (!waiting) return 0;
    for (int i = lo; i < hi; i++) {
        const fiber &f = r->fibers[i];
        if (f.state != F_SHFL) continue;
        for (int l = 0; l < WARP; l++) {
            if (!(f.mask >> l & 1u)) continue;
            int j = lo + l;
            if (j >= hi)
                fail("kernel %s, block (%u,%u,%u): thread %d shuffles with mask 0x%08x, but lane "
                     "%d does not exist (the block has %d threads)",
                     r->name, t_block_idx.x, t_block_idx.y, t_block_idx.z, i, f.mask, l,
                     r->nthreads);
            const fiber &g = r->fibers[j];
            if (g.state != F_SHFL || g.mask != f.mask)
                fail("kernel %s, block (%u,%u,%u): thread %d shuffles with mask 0x%08x, but lane "
                     "%d is at %s (a hang or garbage on the GPU)",
                     r->name, t_block_idx.x, t_block_idx.y, t_block_idx.z, i, f.mask, l,
                     g.state == F_SHFL ? "a shuffle with another mask" : state_name(g.state));
        }
    }
    for (int i = lo; i < hi; i++) {
        fiber &f = r->fibers[i];
        if (f.state != F_SHFL) continue;
        int lane = i - lo, group = lane / f.width * f.width;
        int src = group + ((lane - group) ^ f.lane_mask);
        f.result = (src < group + f.width && lo + src < hi) ? r->fibers[lo + src].value : f.value;
    }
    for (int i = lo; i < hi; i++)
        if (r->fibers[i].state == F_SHFL) r->fibers[i].state = F_RUN;
    return waiting;
}

void run_block(block_run *r)
{
    const int n = r->nthreads;
    while ((int)r->fibers.size() < n) {
        r->fibers.emplace_back();
        r->fibers.back().stack = stack_new();
    }
    for (int i = 0; i < n; i++) {
        fiber &f = r->fibers[i];
#if CUEMU_ASAN
        /* the stack's last thread ended inside fiber_entry, whose frame (at the top of the
         * stack) never returned: forget its redzones (the kernel's frames below unwound) */
        ASAN_UNPOISON_MEMORY_REGION(f.stack + STACK_BYTES - 16384, 16384);
#endif
        /* stack tops 64 bytes apart modulo 4 KiB: equal offsets would share cache sets */
        ctx_make(&f.ctx, f.stack, STACK_BYTES - (size_t)(i % 64) * 64);
        f.state = F_RUN;
    }
    r->done = r->at_barrier = r->at_shfl = 0;
    shared_poison();
    static std::vector<int> order;
    for (;;) {
        order_fill(order, n);
        for (int k = 0; k < n; k++) {
            int i = order[(size_t)k];
            if (r->fibers[i].state == F_RUN) resume(r, i);
        }
        const int alive = n - r->done;
        if (!alive) return;
        if (r->at_shfl) {
            int released = 0;
            for (int w = 0; w * WARP < n; w++) released += resolve_warp(r, w);
            r->at_shfl -= released;
            if (released) continue;
        }
        if (r->at_barrier == alive && alive == n) {
            for (int i = 0; i < n; i++) r->fibers[i].state = F_RUN;
            r->at_barrier = 0;
            continue;
        }
        if (r->at_barrier == alive)
            fail("kernel %s, block (%u,%u,%u): __syncthreads reached by %d of the block's %d "
                 "threads; the others returned (undefined on the GPU)",
                 r->name, t_block_idx.x, t_block_idx.y, t_block_idx.z, alive, n);
        fail("kernel %s, block (%u,%u,%u): %d threads wait at __syncthreads while %d wait at a "
             "warp shuffle that cannot complete (a hang on the GPU)",
             r->name, t_block_idx.x, t_block_idx.y, t_block_idx.z, r->at_barrier, r->at_shfl);
    }
}

}  // namespace

void sync_block()
{
    block_run *r = t_run;
    if (!r || r->current < 0) fail("__syncthreads called outside a kernel");
    r->fibers[r->current].state = F_BARRIER;
    r->at_barrier++;
    int self = r->current;
    fiber_yield(r);
    set_thread_idx(r, self);
}

uint32_t shfl_xor_bits(unsigned mask, uint32_t v, int lane_mask, int width)
{
    block_run *r = t_run;
    if (!r || r->current < 0) fail("__shfl_xor_sync called outside a kernel");
    if (width < 1 || width > WARP || (width & (width - 1)))
        fail("kernel %s: __shfl_xor_sync width %d is not a power of 2 up to 32", r->name, width);
    int self = r->current;
    fiber &f = r->fibers[self];
    unsigned lane_bit = 1u << (self % WARP);
    if (!(mask & lane_bit))
        fail("kernel %s: thread %d calls __shfl_xor_sync with mask 0x%08x, which leaves out its "
             "own lane", r->name, self, mask);
    f.mask = mask;
    f.lane_mask = lane_mask & (width - 1);
    f.width = width;
    f.value = v;
    f.state = F_SHFL;
    r->at_shfl++;
    fiber_yield(r);
    set_thread_idx(r, self);
    return r->fibers[self].result;
}

/* Runs the whole grid of one launch on the calling host thread (called from the stream's
 * queue, under the lock). */
void run_grid(const char *name, dim3 grid, dim3 block, const std::function<void()> &body)
{
    static block_run run;
    block_run *saved = t_run;
    if (saved && saved->current >= 0) fail("kernel %s launched from inside a kernel", name);
    t_run = &run;
    run.name = name;
    run.body = &body;
    run.nthreads = (int)(block.x * block.y * block.z);
    t_block_dim = uint3{block.x, block.y, block.z};
    t_grid_dim = uint3{grid.x, grid.y, grid.z};
    order_read();
    const long long nblocks = (long long)grid.x * grid.y * grid.z;
    if (g_order == ORDER_FORWARD || nblocks > (1 << 26)) { /* a huge grid runs forward */
        for (unsigned z = 0; z < grid.z; z++)
            for (unsigned y = 0; y < grid.y; y++)
                for (unsigned x = 0; x < grid.x; x++) {
                    t_block_idx.x = x, t_block_idx.y = y, t_block_idx.z = z;
                    run_block(&run);
                }
    } else {
        static std::vector<int> blocks;
        order_fill(blocks, (int)nblocks);
        for (int b : blocks) {
            t_block_idx.x = (unsigned)b % grid.x;
            t_block_idx.y = (unsigned)b / grid.x % grid.y;
            t_block_idx.z = (unsigned)b / grid.x / grid.y;
            run_block(&run);
        }
    }
    t_run = saved;
}

}  // namespace cuemu
