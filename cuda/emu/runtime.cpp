/*
 * runtime.cpp - the CUDA runtime API subset usbeam uses, emulated on the CPU (README.md says
 * what the emulator proves and what it cannot, and lists the calls).
 *
 * Streams are queues of closures.  Nothing runs when it is enqueued: work runs when the host
 * synchronises on something that orders it (cudaStreamSynchronize, cudaEventSynchronize,
 * cudaDeviceSynchronize, a blocking copy on the legacy stream, cudaFree; queries answer
 * cudaErrorNotReady and run nothing), so host code
 * that reads a result without the synchronisation CUDA requires reads stale data, as it could
 * on a GPU.  Cross-stream order comes from cudaStreamWaitEvent only (plus the legacy default
 * stream's implicit order with blocking streams), so a missing event shows up too.  What
 * CUDA runs asynchronously on the legacy stream stays queued too: cudaMemset, and the device
 * write of a pageable cudaMemcpy host-to-device (whose source is staged on return).
 *
 * Kernels: blocks run one at a time in a shuffled order, the threads of a block as fibers
 * (shuffled between barriers; in the stress mode switching at random statements too);
 * misaligned pointer arguments, __ldg and atomics are sticky cudaErrorMisalignedAddress
 * errors.  MODES.md describes these checks, their limits and the USBEAM_EMU_* variables.
 *
 * Device memory: every cudaMalloc is its own mapping with a guard page after its last page
 * (the buffer ends at the guard when its size is a multiple of 256), filled with 0xFF (NaN in
 * float32/float64, -1 in integers) so that unwritten output and reads of unwritten memory
 * show, and kept PROT_NONE while no device work runs, so that host code dereferencing a
 * device pointer faults at once instead of working by accident.  Copies check both ranges.
 * Launch limits of an sm_90 device are enforced (1024 threads, 48 KiB of dynamic shared
 * memory unless raised with cudaFuncSetAttribute up to the opt-in maximum).
 */
#include "cuda_emu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <pthread.h>
#include <csignal>
#include <set>
#include <string>
#include <thread>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace usbeam_emu {

uint3 g_threadIdx, g_blockIdx;
dim3 g_blockDim, g_gridDim;

namespace {

constexpr size_t DEFAULT_SHARED_LIMIT = 48 * 1024;
constexpr size_t SHARED_OPTIN_LIMIT = 232448; /* sm_90 */
constexpr int SM_COUNT = 8;
constexpr size_t FIBER_STACK = 256 * 1024;

std::recursive_mutex g_lock;
thread_local cudaError_t t_last_error = cudaSuccess;
/* A fault inside device code (a misaligned address) corrupts the CUDA context: from then on
 * every API call of the process returns it, as on a GPU. */
cudaError_t g_sticky = cudaSuccess;
thread_local int t_device = 0;
int g_exec_depth = 0;

/* ---------------------------------------------------------------- seeds */
/* Every choice the emulator makes at random (block order, thread order, the stress mode's
 * switches) comes from USBEAM_EMU_SEED (default 0) mixed with what identifies a launch
 * (kernel name and configuration) and the block: a failure reproduces with the same seed,
 * in the same test run alone too; another seed explores other orders. */
uint64_t mix(uint64_t x) /* splitmix64's finaliser */
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
uint64_t base_seed()
{
    static const uint64_t seed = []() {
        const char *text = getenv("USBEAM_EMU_SEED");
        return text ? (uint64_t)strtoull(text, nullptr, 0) : 0ull;
    }();
    return seed;
}
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(mix(seed) | 1) {}
    uint64_t next() /* xorshift64 */
    {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        return state;
    }
    uint64_t below(uint64_t n) { return next() % n; }
};
bool stress_mode()
{
    const char *text = getenv("USBEAM_EMU_STRESS");
    return text && *text && strcmp(text, "0") != 0;
}

size_t page_size() { static size_t p = (size_t)sysconf(_SC_PAGESIZE); return p; }
double now_ms()
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

cudaError_t fail(cudaError_t err, const char *fmt, const char *a = "", const char *b = "")
{
    if (getenv("USBEAM_EMU_QUIET") == nullptr) {
        fprintf(stderr, "[usbeam cuda emulator] ");
        fprintf(stderr, fmt, a, b);
        fprintf(stderr, "\n");
    }
    t_last_error = err;
    return err;
}

/* A fault of device code that CUDA reports as a sticky error: always printed (the process's
 * CUDA context is gone), with the seed that reproduces the run. */
void sticky_fault(cudaError_t err, const char *what)
{
    fprintf(stderr, "[usbeam cuda emulator] %s (%s, sticky: every later CUDA call fails; USBEAM_EMU_SEED=%llu)\n",
            what, cudaGetErrorName(err), (unsigned long long)base_seed());
    if (g_sticky == cudaSuccess) g_sticky = err;
    t_last_error = err;
}

/* ---------------------------------------------------------------- memory */
struct Allocation {
    char *map_base;
    size_t map_bytes, inner_bytes; /* inner: the pages before the guard */
    char *ptr;
    size_t bytes;
    bool live = true;     /* false from cudaMallocAsync until its stream reaches the allocation */
    bool freeing = false; /* cudaFreeAsync queued: the memory goes when its stream reaches the free */
};
std::map<uintptr_t, Allocation> g_device; /* by ptr */
std::map<uintptr_t, size_t> g_pinned;     /* ptr -> bytes */

const Allocation *find_device(const void *p)
{
    auto it = g_device.upper_bound((uintptr_t)p);
    if (it == g_device.begin()) return nullptr;
    --it;
    const Allocation &a = it->second;
    return (uintptr_t)p < (uintptr_t)a.ptr + a.bytes + (a.bytes == 0) ? &a : nullptr;
}
bool in_device(const void *p, size_t bytes)
{
    const Allocation *a = find_device(p);
    return a && (uintptr_t)p + bytes <= (uintptr_t)a->ptr + a->bytes;
}
bool in_pinned(const void *p, size_t bytes)
{
    auto it = g_pinned.upper_bound((uintptr_t)p);
    if (it == g_pinned.begin()) return false;
    --it;
    return (uintptr_t)p + bytes <= it->first + it->second;
}
void protect_all(int prot)
{
    /* stream-ordered allocations stay inaccessible until their stream reaches them: work not
     * ordered after the cudaMallocAsync faults, as it may on a GPU */
    for (auto &kv : g_device)
        if (kv.second.live) mprotect(kv.second.map_base, kv.second.inner_bytes, prot);
}
/* Device memory is readable only while device work (or a copy) runs. */
struct ExecScope {
    ExecScope()
    {
        if (g_exec_depth++ == 0) protect_all(PROT_READ | PROT_WRITE);
    }
    ~ExecScope()
    {
        if (--g_exec_depth == 0) protect_all(PROT_NONE);
    }
};


/* ---------------------------------------------------------------- queues */
struct Queue;
struct Op {
    std::function<void()> run;         /* empty for a wait */
    std::shared_ptr<Queue> wait_queue; /* a wait: until wait_queue->executed >= wait_count */
    uint64_t wait_count = 0;
    bool bookkeeping = false;          /* a stream-ordered free: runs as soon as it is reached */
};
struct CaptureState;
struct Queue {
    std::deque<Op> ops;
    uint64_t enqueued = 0, executed = 0;
    bool blocking = true, legacy = false;
    CaptureState *capture = nullptr;
};

std::shared_ptr<Queue> make_legacy()
{
    auto q = std::make_shared<Queue>();
    q->legacy = true;
    return q;
}
std::shared_ptr<Queue> g_legacy = make_legacy();
std::map<Queue *, std::weak_ptr<Queue>> g_streams; /* every created stream */

void run_until(Queue *q, uint64_t count)
{
    ExecScope scope;
    while (q->executed < count) {
        Op op = std::move(q->ops.front());
        q->ops.pop_front();
        if (op.wait_queue) {
            Queue *w = op.wait_queue.get();
            if (w->executed < op.wait_count) run_until(w, op.wait_count);
        } else {
            op.run();
        }
        ++q->executed;
    }
}

void push_wait(Queue *q, const std::shared_ptr<Queue> &on)
{
    if (on.get() == q || on->executed >= on->enqueued) return;
    Op w;
    w.wait_queue = on;
    w.wait_count = on->enqueued;
    q->ops.push_back(std::move(w));
    ++q->enqueued;
}

void drain_all()
{
    for (bool again = true; again;) {
        again = false;
        if (g_legacy->executed < g_legacy->enqueued) {
            run_until(g_legacy.get(), g_legacy->enqueued);
            again = true;
        }
        for (auto &kv : g_streams)
            if (auto q = kv.second.lock())
                if (q->executed < q->enqueued) {
                    run_until(q.get(), q->enqueued);
                    again = true;
                }
    }
}

} /* namespace */
} /* namespace usbeam_emu */

using namespace usbeam_emu;

struct CUstream_st {
    std::shared_ptr<Queue> queue;
};
namespace usbeam_emu {
namespace {
/* An event's state outlives cudaEventDestroy while records of it are queued. */
struct EventState {
    std::shared_ptr<Queue> queue; /* where the last record sits; null: never recorded */
    uint64_t count = 0;
    bool timing = true;
    uint64_t generation = 0, stamped_generation = 0;
    double stamp = 0.0;
    const void *captured_in = nullptr; /* recorded inside a capture still open */
    /* Last recorded by a plain cudaEventRecord in a capturing stream: as on a GPU, that adds no
     * node to the graph (the event only orders work inside the capture), and until it is
     * recorded again outside a capture, query / synchronize / elapsed time / waits outside the
     * capture fail with cudaErrorCapturedEvent.  A record with cudaEventRecordExternal adds an
     * event-record node instead and leaves the event's state alone until a launch records it. */
    bool captured = false;
    /* cudaEventDestroy was called.  Queued records still happen, but an event-record node of
     * a graph (being captured or instantiated) then names a freed event: on a GPU,
     * cudaStreamEndCapture / cudaGraphInstantiate crashed (H200, 2026-11-29); here it is an error */
    bool destroyed = false;
};
}
}
struct CUevent_st {
    std::shared_ptr<EventState> state;
};
struct GraphNode {
    std::function<void()> run;          /* kernel, copy, memset */
    std::shared_ptr<EventState> record; /* or an event-record node */
};
struct CUgraph_st {
    std::vector<GraphNode> nodes;
};
struct CUgraphExec_st {
    std::vector<GraphNode> nodes;
};

namespace usbeam_emu {
namespace {
struct CaptureState {
    cudaGraph_t graph = nullptr;
    std::vector<std::shared_ptr<EventState>> internal_events; /* plain records inside the capture */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    bool invalid = false;
    std::thread::id thread;
};
std::vector<CaptureState *> g_captures;

/* The special handles: 0 and cudaStreamLegacy (1) the legacy default stream,
 * cudaStreamPerThread (2) the calling thread's default stream (a blocking stream). */
std::shared_ptr<Queue> shared_queue_of(cudaStream_t s)
{
    if (s == nullptr || s == cudaStreamLegacy) return g_legacy;
    if (s == cudaStreamPerThread) {
        static thread_local std::shared_ptr<Queue> per_thread;
        if (!per_thread) {
            per_thread = std::make_shared<Queue>();
            g_streams[per_thread.get()] = per_thread;
        }
        return per_thread;
    }
    return s->queue;
}
Queue *queue_of(cudaStream_t s) { return shared_queue_of(s).get(); }

/* The calling thread's capture mode (cudaThreadExchangeStreamCaptureMode; global at start). */
thread_local cudaStreamCaptureMode t_capture_mode = cudaStreamCaptureModeGlobal;

/* The "potentially unsafe" calls (allocation, synchronisation, queries) CUDA forbids a thread
 * while it captures a stream (unless that capture is relaxed), or while another thread
 * captures in global mode and this thread's own mode is global; a thread switched to relaxed
 * mode may make them.  A forbidden call invalidates the capture and fails. */
bool capture_forbids(const char *what)
{
    if (t_capture_mode == cudaStreamCaptureModeRelaxed) return false;
    for (CaptureState *c : g_captures) {
        if (c->mode == cudaStreamCaptureModeRelaxed) continue;
        bool own = c->thread == std::this_thread::get_id();
        if (!own && (c->mode != cudaStreamCaptureModeGlobal || t_capture_mode != cudaStreamCaptureModeGlobal)) continue;
        c->invalid = true;
        fail(cudaErrorStreamCaptureUnsupported, "%s during a stream capture%s", what);
        return true;
    }
    return false;
}

void stamp_event(EventState *e, uint64_t generation)
{
    if (e->generation == generation) {
        e->stamp = now_ms();
        e->stamped_generation = generation;
    }
}

/* Appends work to a stream (or to the graph it captures). */
cudaError_t enqueue(cudaStream_t s, std::function<void()> run)
{
    Queue *q = queue_of(s);
    if (q->capture) {
        if (q->capture->invalid) return fail(cudaErrorStreamCaptureInvalidated, "work on an invalidated capture%s%s");
        q->capture->graph->nodes.push_back(GraphNode{std::move(run), nullptr});
        return cudaSuccess;
    }
    if (q->legacy) {
        for (auto &kv : g_streams)
            if (auto b = kv.second.lock())
                if (b->blocking) push_wait(q, b);
    } else if (q->blocking) {
        push_wait(q, g_legacy);
    }
    q->ops.push_back(Op{std::move(run), nullptr, 0});
    ++q->enqueued;
    return g_sticky;
}

bool event_complete(const EventState *e) { return !e->queue || e->queue->executed >= e->count; }

/* A GPU frees stream-ordered memory when its stream gets there, without the host asking: run
 * the frees at the head of q whose waits are already satisfied (never other work, which still
 * waits for a host synchronisation), so the emulator's memory does not grow without bound. */
void advance_bookkeeping(Queue *q)
{
    while (!q->ops.empty()) {
        Op &op = q->ops.front();
        if (op.wait_queue ? op.wait_queue->executed < op.wait_count : !op.bookkeeping) break;
        Op taken = std::move(op);
        q->ops.pop_front();
        if (taken.run) taken.run();
        ++q->executed;
    }
}

/* ---------------------------------------------------------------- fibers */
/* A fiber switch is a function call that saves the callee-saved registers on the old stack
 * and restores them from the new one.  On x86-64 it is done here in a few instructions:
 * glibc's swapcontext also saves the signal mask with a system call on every switch, which
 * made it most of the emulator's time in barrier-heavy kernels. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define USBEAM_EMU_ASAN 1
#endif

#if defined(__x86_64__)
extern "C" void usbeam_emu_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .globl usbeam_emu_switch
    .hidden usbeam_emu_switch
    .type usbeam_emu_switch, @function
usbeam_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size usbeam_emu_switch, .-usbeam_emu_switch
)");
struct FiberContext {
    void *sp = nullptr;
    void *fake_stack = nullptr;          /* AddressSanitizer's bookkeeping across switches */
    const void *stack_bottom = nullptr;  /* the stack this context runs on (for ASan) */
    size_t stack_size = 0;
};
void fiber_main();
/* A fresh stack laid out as usbeam_emu_switch leaves one: control, six registers, then the
 * return address fiber_main (entered with the stack aligned as after a call). */
void fiber_prepare(FiberContext &c, char *stack, size_t bytes)
{
    uintptr_t top = ((uintptr_t)(stack + bytes)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;              /* alignment: fiber_main sees rsp = 8 mod 16 */
    *--sp = (void *)&fiber_main;  /* ret target */
    for (int r = 0; r < 6; ++r) *--sp = nullptr; /* rbp rbx r12 r13 r14 r15 */
    uint32_t control[2] = {0x1F80u, 0x037Fu};      /* default MXCSR, x87 control word */
    *--sp = nullptr;
    memcpy(sp, control, sizeof control);
    c.sp = sp;
    c.stack_bottom = stack;
    c.stack_size = bytes;
}
void raw_switch(FiberContext &save, FiberContext &load) { usbeam_emu_switch(&save.sp, load.sp); }
#else
struct FiberContext {
    ucontext_t context;
    void *fake_stack = nullptr;
    const void *stack_bottom = nullptr;
    size_t stack_size = 0;
};
void fiber_main();
void fiber_prepare(FiberContext &c, char *stack, size_t bytes)
{
    getcontext(&c.context);
    c.context.uc_stack.ss_sp = stack;
    c.context.uc_stack.ss_size = bytes;
    c.context.uc_link = nullptr;
    makecontext(&c.context, fiber_main, 0);
    c.stack_bottom = stack;
    c.stack_size = bytes;
}
void raw_switch(FiberContext &save, FiberContext &load) { swapcontext(&save.context, &load.context); }
#endif

/* A switch AddressSanitizer is told about (otherwise it sees one stack jump to another and
 * reports false stack errors); `dying`: the saving context never runs again. */
void fiber_switch(FiberContext &save, FiberContext &load, bool dying = false)
{
#ifdef USBEAM_EMU_ASAN
    __sanitizer_start_switch_fiber(dying ? nullptr : &save.fake_stack, load.stack_bottom, load.stack_size);
#else
    (void)dying;
#endif
    raw_switch(save, load);
#ifdef USBEAM_EMU_ASAN
    __sanitizer_finish_switch_fiber(save.fake_stack, nullptr, nullptr);
#endif
}

enum FiberState { RUNNABLE, WAIT_BLOCK, WAIT_WARP, DONE };
struct Fiber {
    FiberContext context;
    char *stack = nullptr;
    FiberState state = RUNNABLE;
    bool started = false;
};
struct BlockRun {
    std::vector<Fiber> fibers;
    std::vector<unsigned char> dynamic_shared;
    std::vector<unsigned char> lanes; /* shuffle exchange: [warp][32][8] */
    FiberContext scheduler;
    const std::function<void()> *body = nullptr;
    int current = -1; /* the fiber running; -1 while the scheduler runs */
    const char *kernel_name = "";
    const char *file = "";
    int line = 0;
    uint64_t launch_seed = 0;
    bool stress = false;
    Rng rng{0};
};
BlockRun *g_block = nullptr;
pthread_t g_block_thread; /* the host thread running g_block */
std::vector<char *> g_stacks;

char *fiber_stack(size_t index)
{
    while (g_stacks.size() <= index) {
        size_t guard = page_size();
        void *p = mmap(nullptr, FIBER_STACK + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p == MAP_FAILED) return nullptr;
        mprotect(p, guard, PROT_NONE); /* a stack overflow faults */
        g_stacks.push_back((char *)p + guard);
    }
    return g_stacks[index];
}

void set_thread_index(int linear)
{
    g_threadIdx.x = (unsigned)linear % g_blockDim.x;
    g_threadIdx.y = ((unsigned)linear / g_blockDim.x) % g_blockDim.y;
    g_threadIdx.z = (unsigned)linear / (g_blockDim.x * g_blockDim.y);
}

void fiber_main()
{
    BlockRun *b = g_block;
#ifdef USBEAM_EMU_ASAN
    /* entered by a switch, not a call: finish it, and learn the scheduler's stack */
    __sanitizer_finish_switch_fiber(nullptr, &b->scheduler.stack_bottom, &b->scheduler.stack_size);
#endif
    (*b->body)();
    b->fibers[b->current].state = DONE;
    fiber_switch(b->fibers[b->current].context, b->scheduler, true); /* never resumed */
}

void yield_with(FiberState state)
{
    BlockRun *b = g_block;
    if (!b) {
        fprintf(stderr, "[usbeam cuda emulator] barrier outside a kernel\n");
        std::abort();
    }
    int me = b->current;
    b->fibers[me].state = state;
    fiber_switch(b->fibers[me].context, b->scheduler);
}

int current_lane() { return g_block->current % 32; }
int current_warp() { return g_block->current / 32; }

/* One block: every thread a fiber, run in a shuffled order between barriers (USBEAM_EMU_ORDER
 * forward or reverse: in index order).  In the stress mode a thread may also hand over at
 * every switch point (translate.py), and the order is shuffled again for every round. */
bool run_block(BlockRun &b, int n_threads, uint64_t seed)
{
    b.rng = Rng(seed);
    std::vector<int> order(n_threads);
    for (int i = 0; i < n_threads; ++i) order[i] = i;
    const char *mode = getenv("USBEAM_EMU_ORDER");
    const bool fixed = mode && (!strcmp(mode, "forward") || !strcmp(mode, "reverse"));
    auto shuffle = [&]() {
        for (int i = n_threads - 1; i > 0; --i) std::swap(order[i], order[(int)b.rng.below((uint64_t)i + 1)]);
    };
    if (mode && !strcmp(mode, "reverse")) std::reverse(order.begin(), order.end());
    else if (!fixed) shuffle();
    for (int i = 0; i < n_threads; ++i) b.fibers[i].state = RUNNABLE, b.fibers[i].started = false;
    g_block_thread = pthread_self();
    int live = n_threads;
    while (live > 0) {
        for (int i : order) {
            Fiber &f = b.fibers[i];
            if (f.state != RUNNABLE) continue;
            b.current = i;
            set_thread_index(i);
            if (!f.started) {
                f.started = true;
                fiber_prepare(f.context, f.stack, FIBER_STACK);
            }
            fiber_switch(b.scheduler, f.context);
            b.current = -1;
        }
        live = 0;
        int at_block = 0, runnable = 0;
        for (auto &f : b.fibers) {
            if (f.state != DONE) ++live;
            if (f.state == WAIT_BLOCK) ++at_block;
            if (f.state == RUNNABLE) ++runnable;
        }
        if (live == 0) break;
        if (runnable) { /* threads that handed over at a switch point (stress mode) */
            if (!fixed) shuffle();
            continue;
        }
        if (at_block == live) {
            for (auto &f : b.fibers)
                if (f.state == WAIT_BLOCK) f.state = RUNNABLE;
            continue;
        }
        bool released = false;
        for (int w = 0; w * 32 < n_threads; ++w) {
            int lanes_live = 0, lanes_waiting = 0;
            for (int t = w * 32; t < std::min(n_threads, w * 32 + 32); ++t) {
                if (b.fibers[t].state != DONE) ++lanes_live;
                if (b.fibers[t].state == WAIT_WARP) ++lanes_waiting;
            }
            if (lanes_waiting && lanes_waiting == lanes_live) {
                for (int t = w * 32; t < std::min(n_threads, w * 32 + 32); ++t)
                    if (b.fibers[t].state == WAIT_WARP) b.fibers[t].state = RUNNABLE;
                released = true;
            }
        }
        if (!released) {
            fprintf(stderr, "[usbeam cuda emulator] %s:%d: kernel %s, block (%u,%u,%u): threads wait at different "
                            "barriers (divergent __syncthreads/__syncwarp): the kernel would hang "
                            "(USBEAM_EMU_SEED=%llu)\n", b.file, b.line, b.kernel_name, g_blockIdx.x, g_blockIdx.y,
                    g_blockIdx.z, (unsigned long long)base_seed());
            return false;
        }
    }
    return true;
}

/* A fault (SIGSEGV, SIGBUS) while a kernel runs: name the kernel, block, thread and seed, then
 * hand the fault to the handler that was there before (Python's faulthandler, ASan, or the
 * default action), which sees the same fault again when the instruction is retried. */
struct sigaction g_previous_segv, g_previous_bus;
void on_fault(int sig, siginfo_t *info, void *)
{
    BlockRun *b = g_block;
    if (b && b->current >= 0 && pthread_equal(pthread_self(), g_block_thread)) {
        char text[768];
        int n = snprintf(text, sizeof text,
                         "[usbeam cuda emulator] fault at %p in %s:%d: kernel %s, block (%u,%u,%u), thread (%u,%u,%u)"
                         "%s (USBEAM_EMU_SEED=%llu)\n", info->si_addr, b->file, b->line, b->kernel_name,
                         g_blockIdx.x, g_blockIdx.y, g_blockIdx.z, g_threadIdx.x, g_threadIdx.y, g_threadIdx.z,
                         b->stress ? ", stress mode" : "", (unsigned long long)base_seed());
        if (n > 0 && write(2, text, std::min((size_t)n, sizeof text - 1)) < 0) {
        }
    }
    sigaction(sig, sig == SIGBUS ? &g_previous_bus : &g_previous_segv, nullptr);
}
void install_fault_report()
{
    static bool installed = false;
    if (installed) return;
    installed = true;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
}

/* The block order of a launch: a permutation of the linear block indices from the launch's
 * seed (Fisher-Yates; an affine map i -> (a i + c) mod n above 2^24 blocks, so that a huge grid
 * needs no table), or index order with USBEAM_EMU_ORDER=forward (reverse: reversed). */
struct BlockOrder {
    uint64_t n, a = 1, c = 0;
    bool reverse = false;
    std::vector<uint32_t> table;
    BlockOrder(uint64_t blocks, uint64_t seed) : n(blocks)
    {
        const char *mode = getenv("USBEAM_EMU_ORDER");
        if (mode && !strcmp(mode, "forward")) return;
        if (mode && !strcmp(mode, "reverse")) {
            reverse = true;
            return;
        }
        Rng rng(seed);
        if (n <= (1u << 24)) {
            table.resize(n);
            for (uint64_t i = 0; i < n; ++i) table[i] = (uint32_t)i;
            for (uint64_t i = n - 1; i > 0 && n > 1; --i) std::swap(table[i], table[rng.below(i + 1)]);
            return;
        }
        do a = rng.below(n - 1) + 1; while (std::gcd(a, n) != 1);
        c = rng.below(n);
    }
    uint64_t operator[](uint64_t i) const
    {
        if (!table.empty()) return table[i];
        if (reverse) return n - 1 - i;
        return (uint64_t)(((unsigned __int128)a * i + c) % n);
    }
};

std::map<const void *, size_t> g_shared_limit; /* cudaFuncAttributeMaxDynamicSharedMemorySize */

} /* namespace */

cudaError_t enqueue_work(cudaStream_t stream, std::function<void()> work)
{
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    return enqueue(stream, std::move(work));
}
bool is_device_range(const void *ptr, size_t bytes)
{
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    return in_device(ptr, bytes);
}

std::atomic<bool> g_stress_active{false};

/* A switch point (translate.py puts one after every statement and at every loop back-edge of
 * device code; atomics and fences have one too): in the stress mode the running GPU thread
 * hands over to another runnable thread of its block with probability 1/2, so that code
 * between two barriers interleaves with other threads' code as it may on a GPU.  A point
 * reached by another host thread (host code calling a __host__ __device__ function while a
 * kernel runs elsewhere) does nothing. */
void stress_switch()
{
    BlockRun *b = g_block;
    if (!b || !b->stress || b->current < 0 || !pthread_equal(pthread_self(), g_block_thread)) return;
    if (b->rng.next() & 1) yield_with(RUNNABLE);
}

void syncthreads() { yield_with(WAIT_BLOCK); }
void syncwarp(unsigned) { yield_with(WAIT_WARP); }
void *dynamic_shared() { return g_block ? g_block->dynamic_shared.data() : nullptr; }

void shuffle(unsigned, const void *value, void *result, unsigned bytes, int mode, int delta, int width)
{
    BlockRun *b = g_block;
    int lane = current_lane(), warp = current_warp();
    unsigned char *lanes = b->lanes.data() + (size_t)warp * 32 * 8;
    memcpy(lanes + lane * 8, value, bytes);
    yield_with(WAIT_WARP); /* every lane has published its value */
    int segment = lane / width * width, within = lane - segment, src = lane;
    switch (mode) {
    case 0: src = segment + ((delta % width) + width) % width; break;         /* idx */
    case 1: src = within + delta < width ? lane + delta : lane; break;        /* down */
    case 2: src = within - delta >= 0 ? lane - delta : lane; break;           /* up */
    default: src = segment + ((within ^ delta) < width ? (within ^ delta) : within); break; /* xor */
    }
    memcpy(result, lanes + src * 8, bytes);
    yield_with(WAIT_WARP); /* nobody overwrites its slot before every lane has read */
}

bool check_kernel_pointer(const LaunchConfig &cfg, const void *, int index, const void *ptr, size_t align,
                          const char *type)
{
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    char where[512];
    snprintf(where, sizeof where, "%s:%d: kernel %s, argument %d (%p)", cfg.file, cfg.line, cfg.name, index, ptr);
    /* a GPU loads and stores T only at a multiple of alignof(T) (8 for float2, 16 for float4
     * and double2): a kernel using a misaligned pointer argument faults with a sticky
     * cudaErrorMisalignedAddress; reported here, at the launch, which is then not run */
    if (align > 1 && (uintptr_t)ptr % align != 0) {
        /* `type` is check_argument's signature: "... [with T = const float2*]" */
        std::string pointer = type;
        size_t at = pointer.find("T = ");
        pointer = at == std::string::npos ? "a pointer" : pointer.substr(at + 4, pointer.find_first_of(";]", at) - at - 4);
        char what[800];
        snprintf(what, sizeof what, "%s: %s argument at a misaligned address (needs a multiple of %zu)", where,
                 pointer.c_str(), align);
        sticky_fault(cudaErrorMisalignedAddress, what);
        return false;
    }
    if (!ptr || find_device(ptr) || in_pinned(ptr, 0)) return true;
    /* one past the end of an allocation is a valid pointer too */
    if (find_device((const char *)ptr - 1) || in_pinned((const char *)ptr - 1, 1)) return true;
    fail(cudaErrorIllegalAddress, "%s is neither device memory nor pinned host memory%s", where);
    return false;
}

void misaligned_access(const void *ptr, size_t align, const char *what)
{
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    if (g_sticky != cudaSuccess) return; /* the first fault is the one to report */
    char text[700];
    BlockRun *b = g_block;
    snprintf(text, sizeof text, "%s:%d: kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s at %p, not a multiple of %zu",
             b ? b->file : "?", b ? b->line : 0, b ? b->kernel_name : "?", g_blockIdx.x, g_blockIdx.y, g_blockIdx.z,
             g_threadIdx.x, g_threadIdx.y, g_threadIdx.z, what, ptr, align);
    sticky_fault(cudaErrorMisalignedAddress, text);
}

void submit_kernel(const LaunchConfig &cfg, const void *kernel, std::function<void()> body)
{
    std::lock_guard<std::recursive_mutex> lock(g_lock);
    char where[512];
    snprintf(where, sizeof where, "%s:%d: kernel %s", cfg.file, cfg.line, cfg.name);
    const dim3 g = cfg.grid, bl = cfg.block;
    size_t threads = (size_t)bl.x * bl.y * bl.z;
    if (threads > (size_t)cfg.max_threads) {
        fail(cudaErrorLaunchOutOfResources, "%s: more threads than its __launch_bounds__%s", where);
        return;
    }
    if (!g.x || !g.y || !g.z || !threads || threads > 1024 || bl.z > 64 || g.y > 65535 || g.z > 65535 ||
        g.x > 2147483647u) {
        fail(cudaErrorInvalidConfiguration, "%s: invalid launch configuration%s", where);
        return;
    }
    auto lim = g_shared_limit.find(kernel);
    size_t limit = lim == g_shared_limit.end() ? DEFAULT_SHARED_LIMIT : lim->second;
    if (cfg.shared_bytes > limit) {
        char msg[700];
        snprintf(msg, sizeof msg, "%s: %zu bytes of dynamic shared memory, limit %zu (cudaFuncSetAttribute "
                 "raises it up to %zu)", where, cfg.shared_bytes, limit, SHARED_OPTIN_LIMIT);
        fail(cudaErrorInvalidValue, "%s%s", msg);
        return;
    }
    if (g_sticky != cudaSuccess) { /* the context is gone: nothing runs any more */
        t_last_error = g_sticky;
        return;
    }
    std::string name = cfg.name, file = cfg.file;
    /* the launch's seed: the same kernel with the same configuration gets the same orders
     * wherever it is launched from, so a failing test reproduces when run alone */
    uint64_t launch_seed = base_seed();
    for (char ch : name) launch_seed = mix(launch_seed ^ (unsigned char)ch);
    for (unsigned v : {g.x, g.y, g.z, bl.x, bl.y, bl.z}) launch_seed = mix(launch_seed ^ v);
    auto run = [cfg, body, name, file, launch_seed, threads]() {
        install_fault_report();
        BlockRun b;
        b.fibers.resize(threads);
        for (size_t i = 0; i < threads; ++i) b.fibers[i].stack = fiber_stack(i);
        b.dynamic_shared.assign(cfg.shared_bytes + 16, 0xFF);
        b.lanes.assign((threads + 31) / 32 * 32 * 8, 0);
        b.body = &body;
        b.kernel_name = name.c_str();
        b.file = file.c_str();
        b.line = cfg.line;
        b.launch_seed = launch_seed;
        b.stress = stress_mode();
        BlockRun *outer = g_block;
        g_block = &b;
        g_blockDim = cfg.block;
        g_gridDim = cfg.grid;
        if (b.stress) g_stress_active = true;
        /* blocks run one after another in a shuffled order: a GPU runs them in any order
         * (and at once), so a kernel that needs block 0 first or the last block last is wrong */
        const uint64_t nx = cfg.grid.x, ny = cfg.grid.y, blocks = nx * ny * cfg.grid.z;
        BlockOrder block_order(blocks, launch_seed);
        for (uint64_t k = 0; k < blocks; ++k) {
            const uint64_t linear = block_order[k];
            g_blockIdx = make_uint3((unsigned)(linear % nx), (unsigned)(linear / nx % ny), (unsigned)(linear / (nx * ny)));
            memset(b.dynamic_shared.data(), 0xFF, b.dynamic_shared.size());
            if (!run_block(b, (int)threads, mix(launch_seed + linear + 1))) std::abort();
        }
        g_block = outer;
        if (b.stress && !outer) g_stress_active = false;
    };
    enqueue(cfg.stream, std::move(run));
}

} /* namespace usbeam_emu */

/* ================================================================ the runtime API */
namespace {
struct Locked {
    std::lock_guard<std::recursive_mutex> guard{g_lock};
};
/* success, unless a sticky error has killed the context */
cudaError_t ok() { return g_sticky; }

enum class Side { Device, Host, Pinned };
Side side_of(const void *p, size_t bytes)
{
    if (in_device(p, bytes)) return Side::Device;
    if (in_pinned(p, bytes)) return Side::Pinned;
    return Side::Host;
}

/* Checks the ranges a copy of `kind` touches; returns the error or cudaSuccess. */
cudaError_t check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind &kind, const char *what)
{
    if (!bytes) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue, "%s: null pointer%s", what);
    if (kind == cudaMemcpyDefault)
        kind = (cudaMemcpyKind)((in_device(src, bytes) ? 2 : 0) + (in_device(dst, bytes) ? 1 : 0));
    bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_device && !in_device(dst, bytes))
        return fail(cudaErrorInvalidValue, "%s: destination is not a range of one device allocation%s", what);
    if (src_device && !in_device(src, bytes))
        return fail(cudaErrorInvalidValue, "%s: source is not a range of one device allocation%s", what);
    if (!dst_device && find_device(dst))
        return fail(cudaErrorInvalidValue, "%s: destination is device memory but the kind says host%s", what);
    if (!src_device && find_device(src))
        return fail(cudaErrorInvalidValue, "%s: source is device memory but the kind says host%s", what);
    return cudaSuccess;
}
} /* namespace */

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last_error;
    t_last_error = g_sticky; /* a sticky error is never cleared */
    return e != cudaSuccess ? e : g_sticky;
}
cudaError_t cudaPeekAtLastError(void) { return t_last_error != cudaSuccess ? t_last_error : g_sticky; }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorSystemNotReady: return "cudaErrorSystemNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t e)
{
    static thread_local char text[128];
    snprintf(text, sizeof text, "%s (usbeam CUDA emulator)", cudaGetErrorName(e));
    return text;
}

cudaError_t cudaDriverGetVersion(int *v) { *v = CUDART_VERSION; return ok(); }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return ok(); }
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 0;
    /* a driver that fails to initialise (e.g. a missing fabric manager), for the tests */
    if (getenv("USBEAM_EMU_DEVICE_QUERY_FAILS")) return fail(cudaErrorSystemNotReady, "cudaGetDeviceCount: system not ready%s%s");
    *n = getenv("USBEAM_EMU_NO_DEVICE") ? 0 : 1;
    return *n ? ok() : cudaErrorNoDevice;
}
cudaError_t cudaGetDevice(int *d) { *d = t_device; return ok(); }
cudaError_t cudaSetDevice(int d)
{
    if (d != 0) return fail(cudaErrorInvalidDevice, "cudaSetDevice(%s): the emulator has one device%s",
                            std::to_string(d).c_str());
    t_device = d;
    return ok();
}
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: device %s%s", std::to_string(device).c_str());
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = SM_COUNT; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)SHARED_OPTIN_LIMIT; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)DEFAULT_SHARED_LIMIT; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxGridDimX: *value = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *value = 65535; break;
    case cudaDevAttrL2CacheSize: *value = 50 << 20; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    default:
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %s not emulated%s",
                    std::to_string((int)attr).c_str());
    }
    return ok();
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device %s%s", std::to_string(device).c_str());
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "usbeam CUDA emulator (CPU)");
    p->totalGlobalMem = (size_t)16 << 30;
    p->sharedMemPerBlock = DEFAULT_SHARED_LIMIT;
    p->sharedMemPerBlockOptin = SHARED_OPTIN_LIMIT;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9, p->minor = 0;
    p->multiProcessorCount = SM_COUNT;
    p->maxThreadsPerMultiProcessor = 2048;
    p->l2CacheSize = 50 << 20;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    return ok();
}
cudaError_t cudaDeviceSynchronize(void)
{
    Locked l;
    if (capture_forbids("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
    drain_all();
    return ok();
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *free_bytes = (size_t)15 << 30;
    *total = (size_t)16 << 30;
    return ok();
}

/* ---- memory */
/* A fresh mapping filled with 0xFF, accessible while device work runs once `live`. */
static cudaError_t map_allocation(void **ptr, size_t bytes, bool live, const char *what)
{
    *ptr = nullptr;
    if (bytes > ((size_t)16 << 30)) return fail(cudaErrorMemoryAllocation, "%s: %s bytes exceed the emulated 16 GiB", what,
                                                std::to_string(bytes).c_str());
    size_t pg = page_size();
    size_t rounded = (bytes + 255) / 256 * 256;
    size_t inner = (rounded + pg - 1) / pg * pg;
    if (!inner) inner = pg;
    size_t total = inner + pg;
    void *base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return fail(cudaErrorMemoryAllocation, "%s: out of memory%s", what);
    Allocation a;
    a.map_base = (char *)base;
    a.map_bytes = total;
    a.inner_bytes = inner;
    a.ptr = a.map_base + inner - rounded;
    a.bytes = bytes;
    a.live = live;
    mprotect(base, inner, PROT_READ | PROT_WRITE);
    memset(base, 0xFF, inner); /* never-written device memory reads as NaN / -1 */
    if (g_exec_depth == 0 || !live) mprotect(base, inner, PROT_NONE);
    g_device[(uintptr_t)a.ptr] = a;
    *ptr = a.ptr;
    return ok();
}
cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    Locked l;
    *ptr = nullptr;
    if (capture_forbids("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
    return map_allocation(ptr, bytes, true, "cudaMalloc");
}

/* ---- the stream-ordered allocator: cudaMallocAsync returns the pointer at once, but the
 * memory becomes accessible only when the stream reaches the allocation (work on another
 * stream not ordered after it faults); cudaFreeAsync unmaps it when the stream reaches the
 * free (work still queued elsewhere and not ordered before it faults).  Pools are handles
 * with no state: every allocation is its own mapping, so reuse is never emulated. */
struct CUmemPoolHandle_st {
    int device;
};
cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const cudaMemPoolProps *props)
{
    if (!pool || !props) return fail(cudaErrorInvalidValue, "cudaMemPoolCreate: null argument%s%s");
    if (props->allocType != cudaMemAllocationTypePinned || props->location.type != cudaMemLocationTypeDevice ||
        props->location.id != 0)
        return fail(cudaErrorInvalidValue, "cudaMemPoolCreate: only device-0 pinned pools are emulated%s%s");
    *pool = new CUmemPoolHandle_st{0};
    return ok();
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    delete pool;
    return ok();
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value)
{
    if (!pool || !value) return fail(cudaErrorInvalidValue, "cudaMemPoolSetAttribute: null argument%s%s");
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies: return ok();
    default: return fail(cudaErrorInvalidValue, "cudaMemPoolSetAttribute: attribute %s not emulated%s",
                         std::to_string((int)attr).c_str());
    }
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t)
{
    return pool ? ok() : fail(cudaErrorInvalidValue, "cudaMemPoolTrimTo: null pool%s%s");
}
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t bytes, cudaMemPool_t pool, cudaStream_t stream)
{
    Locked l;
    if (!ptr || !pool) return fail(cudaErrorInvalidValue, "cudaMallocFromPoolAsync: null argument%s%s");
    *ptr = nullptr;
    if (queue_of(stream)->capture) return fail(cudaErrorNotSupported, "allocation nodes (cudaMallocAsync in a capture) are not emulated%s%s");
    cudaError_t err = map_allocation(ptr, bytes, false, "cudaMallocAsync");
    if (err != cudaSuccess) return err;
    const uintptr_t key = (uintptr_t)*ptr;
    err = enqueue(stream, [key]() {
        auto it = g_device.find(key);
        if (it == g_device.end()) return;
        it->second.live = true;
        if (g_exec_depth > 0) mprotect(it->second.map_base, it->second.inner_bytes, PROT_READ | PROT_WRITE);
    });
    if (err != cudaSuccess) {
        auto it = g_device.find(key);
        munmap(it->second.map_base, it->second.map_bytes);
        g_device.erase(it);
        *ptr = nullptr;
    }
    return err;
}
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream)
{
    static CUmemPoolHandle_st default_pool{0};
    return cudaMallocFromPoolAsync(ptr, bytes, &default_pool, stream);
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    Locked l;
    if (!ptr) return ok();
    auto it = g_device.find((uintptr_t)ptr);
    if (it == g_device.end() || it->second.freeing)
        return fail(cudaErrorInvalidValue, "cudaFreeAsync: not a live device allocation%s%s");
    if (queue_of(stream)->capture) return fail(cudaErrorNotSupported, "free nodes (cudaFreeAsync in a capture) are not emulated%s%s");
    const uintptr_t key = (uintptr_t)ptr;
    cudaError_t err = enqueue(stream, [key]() {
        auto found = g_device.find(key);
        if (found == g_device.end()) return;
        munmap(found->second.map_base, found->second.map_bytes);
        g_device.erase(found);
    });
    if (err != cudaSuccess) return err;
    it->second.freeing = true;
    Queue *q = queue_of(stream);
    q->ops.back().bookkeeping = true;
    advance_bookkeeping(q);
    return ok();
}
cudaError_t cudaFree(void *ptr)
{
    Locked l;
    if (!ptr) return ok();
    auto it = g_device.find((uintptr_t)ptr);
    if (it == g_device.end() || it->second.freeing)
        return fail(cudaErrorInvalidValue, "cudaFree: not a live device allocation%s%s");
    if (capture_forbids("cudaFree")) return cudaErrorStreamCaptureUnsupported;
    drain_all(); /* cudaFree waits for the device, as on a GPU */
    it = g_device.find((uintptr_t)ptr);
    munmap(it->second.map_base, it->second.map_bytes);
    g_device.erase(it);
    return ok();
}
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int)
{
    Locked l;
    if (capture_forbids("cudaHostAlloc")) return cudaErrorStreamCaptureUnsupported;
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    *ptr = aligned_alloc(4096, rounded ? rounded : 4096);
    if (!*ptr) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc: out of memory%s%s");
    g_pinned[(uintptr_t)*ptr] = bytes ? bytes : 1;
    return ok();
}
cudaError_t cudaMallocHost(void **ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, 0); }
cudaError_t cudaFreeHost(void *ptr)
{
    Locked l;
    if (!ptr) return ok();
    auto it = g_pinned.find((uintptr_t)ptr);
    if (it == g_pinned.end()) return fail(cudaErrorInvalidValue, "cudaFreeHost: %p is not pinned memory%s%s");
    drain_all();
    free(ptr);
    g_pinned.erase(it);
    return ok();
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr)
{
    Locked l;
    memset(attr, 0, sizeof *attr);
    if (find_device(ptr)) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = 0;
        attr->devicePointer = (void *)ptr;
    } else if (in_pinned(ptr, 0) || in_pinned(ptr, 1)) {
        attr->type = cudaMemoryTypeHost;
        attr->device = 0;
        attr->devicePointer = (void *)ptr;
        attr->hostPointer = (void *)ptr;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = -2;
    }
    return ok();
}

static cudaError_t copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                              bool host_synchronous, const char *what)
{
    Locked l;
    cudaError_t e = check_copy(dst, src, bytes, kind, what);
    if (e != cudaSuccess || !bytes) return e;
    Queue *q = queue_of(stream);
    /* Pageable host memory: CUDA stages it, so the call returns with the source read (H2D)
     * or the destination written (D2H). */
    bool pageable = (kind == cudaMemcpyHostToDevice && side_of(src, bytes) == Side::Host) ||
                    (kind == cudaMemcpyDeviceToHost && side_of(dst, bytes) == Side::Host);
    if ((host_synchronous || pageable) && q->capture) {
        q->capture->invalid = true;
        return fail(cudaErrorStreamCaptureUnsupported, "%s with pageable host memory during a capture%s", what);
    }
    if (host_synchronous && capture_forbids(what)) return cudaErrorStreamCaptureUnsupported;
    if (pageable && kind == cudaMemcpyHostToDevice) {
        /* The source is read now (staged), the device write happens in stream order.  For
         * cudaMemcpy that is the legacy stream, after CUDA "performs a stream sync before the
         * copy is initiated" (the API's synchronisation notes): the earlier legacy work is
         * done on return, but the DMA to dst "may not have completed", so the copy stays
         * queued here until something orders it (a legacy-stream synchronisation, a later
         * synchronous legacy copy, work on a blocking stream, cudaDeviceSynchronize, an event).
         * A non-blocking stream or a caller's stream using dst without such an order reads
         * what was there before. */
        if (host_synchronous) run_until(q, q->enqueued);
        std::shared_ptr<std::vector<char>> staged = std::make_shared<std::vector<char>>((const char *)src,
                                                                                       (const char *)src + bytes);
        e = enqueue(stream, [dst, staged, bytes]() { memcpy(dst, staged->data(), bytes); });
        return e;
    }
    e = enqueue(stream, [dst, src, bytes]() { memcpy(dst, src, bytes); });
    if (e == cudaSuccess && (host_synchronous || pageable) && !q->capture) run_until(q, q->enqueued);
    return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_async(dst, src, bytes, kind, stream, false, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    /* on the legacy default stream: ordered after blocking streams only */
    return copy_async(dst, src, bytes, kind, nullptr, kind != cudaMemcpyDeviceToDevice, "cudaMemcpy");
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream)
{
    Locked l;
    if (!bytes) return ok();
    if (!in_device(dst, bytes)) return fail(cudaErrorInvalidValue, "cudaMemsetAsync: not a range of one device allocation%s%s");
    return enqueue(stream, [dst, value, bytes]() { memset(dst, value, bytes); });
}
/* "asynchronous with respect to the host" for device memory (the API's synchronisation notes):
 * legacy-stream work like any other, queued until something orders it */
cudaError_t cudaMemset(void *dst, int value, size_t bytes) { return cudaMemsetAsync(dst, value, bytes, nullptr); }

/* ---- streams */
static cudaError_t create_stream(cudaStream_t *s, unsigned flags)
{
    Locked l;
    *s = new CUstream_st;
    (*s)->queue = std::make_shared<Queue>();
    (*s)->queue->blocking = !(flags & cudaStreamNonBlocking);
    g_streams[(*s)->queue.get()] = (*s)->queue;
    return ok();
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return create_stream(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) { return create_stream(s, flags); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int) { return create_stream(s, flags); }
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    Locked l;
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of a default stream%s%s");
    if (s->queue->capture) return fail(cudaErrorIllegalState, "cudaStreamDestroy of a capturing stream%s%s");
    /* pending work still completes, as on a GPU; waits elsewhere hold the queue alive */
    run_until(s->queue.get(), s->queue->enqueued);
    g_streams.erase(s->queue.get());
    delete s;
    return ok();
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    Locked l;
    Queue *q = queue_of(s);
    if (q->capture) {
        q->capture->invalid = true;
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize on a capturing stream%s%s");
    }
    if (capture_forbids("cudaStreamSynchronize")) return cudaErrorStreamCaptureUnsupported;
    run_until(q, q->enqueued);
    return ok();
}
cudaError_t cudaStreamQuery(cudaStream_t s)
{
    Locked l;
    Queue *q = queue_of(s);
    if (q->capture) return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery on a capturing stream%s%s");
    if (capture_forbids("cudaStreamQuery")) return cudaErrorStreamCaptureUnsupported;
    /* Pending work answers cudaErrorNotReady, as on a GPU, and stays pending: queries run
     * nothing (the emulated device runs work only when the host waits), so code that asks
     * whether work is done sees "not yet" until something synchronises.  (A loop polling a
     * query would never end here; usbeam only asks, it never polls.) */
    return q->executed < q->enqueued ? cudaErrorNotReady : ok();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int)
{
    Locked l;
    EventState *e = ev ? ev->state.get() : nullptr;
    if (!e) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: null event%s%s");
    Queue *q = queue_of(s);
    if (q->capture) {
        if (e->captured_in == q->capture) return ok(); /* ordered within the captured chain */
        if (e->queue && !event_complete(e)) {
            q->capture->invalid = true;
            return fail(cudaErrorStreamCaptureIsolation, "cudaStreamWaitEvent: a capture waits on outside work%s%s");
        }
        return ok();
    }
    if (e->captured_in) return fail(cudaErrorStreamCaptureIsolation, "waiting on an event recorded in a capture%s%s");
    if (e->captured) return fail(cudaErrorCapturedEvent, "cudaStreamWaitEvent on an event last recorded in a capture%s%s");
    if (e->queue) {
        Op w;
        w.wait_queue = e->queue;
        w.wait_count = e->count;
        if (e->queue.get() != q && e->queue->executed < e->count) {
            q->ops.push_back(std::move(w));
            ++q->enqueued;
        }
    }
    return ok();
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status)
{
    Locked l;
    Queue *q = queue_of(s);
    *status = !q->capture ? cudaStreamCaptureStatusNone
                          : (q->capture->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive);
    return ok();
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode)
{
    if (!mode) return fail(cudaErrorInvalidValue, "cudaThreadExchangeStreamCaptureMode: null mode%s%s");
    std::swap(*mode, t_capture_mode);
    return ok();
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    Locked l;
    if (!s || s == cudaStreamLegacy) return fail(cudaErrorStreamCaptureUnsupported, "capture of the legacy default stream%s%s");
    Queue *q = queue_of(s);
    if (q->capture) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture: already capturing%s%s");
    auto *c = new CaptureState;
    c->graph = new CUgraph_st;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    q->capture = c;
    g_captures.push_back(c);
    return ok();
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    Locked l;
    *graph = nullptr;
    Queue *q = queue_of(s);
    CaptureState *c = q->capture;
    if (!c) return fail(cudaErrorIllegalState, "cudaStreamEndCapture: not capturing%s%s");
    if (c->mode == cudaStreamCaptureModeThreadLocal && c->thread != std::this_thread::get_id())
        return fail(cudaErrorStreamCaptureWrongThread, "cudaStreamEndCapture from another thread%s%s");
    q->capture = nullptr;
    g_captures.erase(std::find(g_captures.begin(), g_captures.end(), c));
    for (auto &internal : c->internal_events)
        if (internal->captured_in == c) internal->captured_in = nullptr; /* stays `captured` */
    bool invalid = c->invalid;
    cudaGraph_t g = c->graph;
    delete c;
    if (invalid) {
        delete g;
        return fail(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was invalidated%s%s");
    }
    *graph = g;
    return ok();
}

/* ---- events */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    *e = new CUevent_st;
    (*e)->state = std::make_shared<EventState>();
    (*e)->state->timing = !(flags & cudaEventDisableTiming);
    return ok();
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    Locked l;
    if (!e) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy(null)%s%s");
    e->state->destroyed = true;
    delete e;
    return ok();
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned int flags)
{
    Locked l;
    if (!ev) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: null event%s%s");
    if (flags & ~(unsigned)cudaEventRecordExternal)
        return fail(cudaErrorInvalidValue, "cudaEventRecordWithFlags: flags %s%s", std::to_string(flags).c_str());
    std::shared_ptr<EventState> e = ev->state;
    Queue *q = queue_of(s);
    if (q->capture) {
        if (q->capture->invalid) return fail(cudaErrorStreamCaptureInvalidated, "cudaEventRecord on an invalidated capture%s%s");
        if (flags & cudaEventRecordExternal) {
            q->capture->graph->nodes.push_back(GraphNode{nullptr, e}); /* recorded by each launch */
        } else {
            e->captured_in = q->capture; /* orders work inside this capture only: no node */
            e->captured = true;
            q->capture->internal_events.push_back(e);
        }
        return ok();
    }
    uint64_t generation = ++e->generation;
    cudaError_t err = enqueue(s, [e, generation]() { stamp_event(e.get(), generation); });
    e->queue = shared_queue_of(s);
    e->count = q->enqueued;
    e->captured_in = nullptr;
    e->captured = false;
    return err;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) { return cudaEventRecordWithFlags(ev, s, 0); }
cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    Locked l;
    EventState *e = ev->state.get();
    if (e->captured_in) return fail(cudaErrorStreamCaptureUnsupported, "cudaEventSynchronize on a captured event%s%s");
    if (e->captured) return fail(cudaErrorCapturedEvent, "cudaEventSynchronize on an event last recorded in a capture%s%s");
    if (capture_forbids("cudaEventSynchronize")) return cudaErrorStreamCaptureUnsupported;
    if (e->queue) run_until(e->queue.get(), e->count);
    return ok();
}
cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    Locked l;
    EventState *e = ev->state.get();
    if (e->captured_in) return fail(cudaErrorStreamCaptureUnsupported, "cudaEventQuery on a captured event%s%s");
    if (e->captured) return fail(cudaErrorCapturedEvent, "cudaEventQuery on an event last recorded in a capture%s%s");
    if (capture_forbids("cudaEventQuery")) return cudaErrorStreamCaptureUnsupported;
    /* cudaErrorNotReady while the work before the record is pending (as on a GPU); nothing runs
     * (see cudaStreamQuery) */
    return event_complete(e) ? ok() : cudaErrorNotReady;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start_event, cudaEvent_t end_event)
{
    Locked l;
    const EventState *start = start_event->state.get(), *end = end_event->state.get();
    if (!start->timing || !end->timing)
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime on an event without timing%s%s");
    if (start->captured || end->captured)
        return fail(cudaErrorCapturedEvent, "cudaEventElapsedTime on an event last recorded in a capture%s%s");
    if (!start->queue || !end->queue || !event_complete(start) || !event_complete(end) ||
        start->stamped_generation != start->generation || end->stamped_generation != end->generation)
        return fail(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed%s%s");
    *ms = (float)(end->stamp - start->stamp);
    return ok();
}

/* ---- graphs */
static cudaError_t check_record_nodes(const std::vector<GraphNode> &nodes, const char *call)
{
    for (const auto &node : nodes)
        if (node.record && node.record->destroyed)
            return fail(cudaErrorInvalidResourceHandle,
                        "%s: an event-record node's event was destroyed (on a GPU this crashes)%s", call);
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long)
{
    Locked l;
    if (!graph) return fail(cudaErrorInvalidValue, "cudaGraphInstantiate: null graph%s%s");
    *exec = nullptr;
    if (cudaError_t err = check_record_nodes(graph->nodes, "cudaGraphInstantiate")) return err;
    *exec = new CUgraphExec_st;
    (*exec)->nodes = graph->nodes;
    return ok();
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
    return ok();
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    Locked l;
    drain_all(); /* launches still queued run its nodes */
    delete exec;
    return ok();
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    Locked l;
    if (!exec) return fail(cudaErrorInvalidValue, "cudaGraphLaunch: null graph%s%s");
    Queue *q = queue_of(s);
    if (q->capture) return fail(cudaErrorStreamCaptureUnsupported, "cudaGraphLaunch into a capture%s%s");
    if (cudaError_t err = check_record_nodes(exec->nodes, "cudaGraphLaunch")) return err;
    /* the event-record nodes become this launch's records of their events */
    std::vector<std::pair<std::shared_ptr<EventState>, uint64_t>> records;
    for (auto &node : exec->nodes)
        if (node.record) records.emplace_back(node.record, ++node.record->generation);
    cudaError_t err = enqueue(s, [exec, records]() {
        size_t r = 0;
        for (auto &node : exec->nodes) {
            if (node.record) {
                stamp_event(records[r].first.get(), records[r].second);
                ++r;
            } else {
                node.run();
            }
        }
    });
    for (auto &rec : records) {
        rec.first->queue = shared_queue_of(s);
        rec.first->count = q->enqueued;
        rec.first->captured = false;
    }
    return err;
}

/* ---- kernels */
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value)
{
    Locked l;
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > SHARED_OPTIN_LIMIT)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: %s bytes of shared memory exceed the opt-in limit%s",
                        std::to_string(value).c_str());
        g_shared_limit[func] = (size_t)value;
        return ok();
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return ok();
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %s not emulated%s", std::to_string((int)attr).c_str());
}

} /* extern "C" */
