// Runs a grid on the CPU: blocks one after another, each block's threads as
// fibers on this OS thread. A thread runs until it waits (a barrier, a warp
// intrinsic) or returns; then, in its own context, it does the bookkeeping of
// what it waits for and switches straight to the next ready thread (the host
// side only starts a block and sees it end, or stall). A barrier releases
// when every live thread of the block waits at it, a warp intrinsic when
// every lane of its mask has arrived at the same call. Anything else that
// stops progress is a fault naming the threads and the source lines.
//
// Thread order favours finding bugs: thread 0 runs to its first wait before
// thread 1 starts, so a read of shared memory not yet written by another
// thread (a missing barrier) reads the 0xFF bytes every block starts with.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "fiber.h"
#include "runtime_internal.h"
#include "sanitizers.h"

namespace cuda_on_cpu {

thread_local const Coordinates* current = nullptr;

namespace {

// ASan and TSan put their own frames (and reports) on the fiber's stack.
constexpr size_t kStackBytes = (kThreadSanitizer ? 256 : 128) * 1024;
// Under TSan, consecutive blocks alternate between two sets of fibers, so that
// two blocks of one launch are two sets of threads to the race detector
// (within a set, a fiber's blocks are ordered by program order).
constexpr int kPools = kThreadSanitizer ? 2 : 1;

enum class State : uint8_t { Ready, AtBarrier, AtWarp, Exited, Faulted };

struct Executor;
struct Pool;

// A CUDA thread: its fiber is reused by the same thread index of later blocks.
struct Worker {
    Executor* ex = nullptr;
    Pool* pool = nullptr;
    std::unique_ptr<Fiber> fiber;
    Coordinates coords{};
    int linear = 0, warp = 0, lane = 0;
    State state = State::Ready;
    const char* file = nullptr;  // where it waits
    int line = 0;
    unsigned gen = 0;            // the barrier generation it waits in
    WarpCall* call = nullptr;    // its pending warp call
};

struct SharedSlot {
    const void* site;
    void* memory;
    size_t bytes;
    uint64_t block_serial;  // the block it was last filled for
};

// Fibers and shared memory for blocks run one after another.
struct Pool {
    std::vector<std::unique_ptr<Worker>> workers;
    std::vector<SharedSlot> shared;
    uint64_t serial = 0;      // blocks run by this pool
    char block_sync[2] = {};  // TSan: block n of the pool happens after block n - 1
    ~Pool() {
        for (SharedSlot& s : shared) std::free(s.memory);
    }
};

struct WarpState {
    unsigned arrived = 0;
    unsigned exited = 0;
    const WarpCall* first = nullptr;
    int first_lane = 0;
    unsigned gen = 0;
    char sync[2] = {};  // TSan: __syncwarp orders memory
};

void worker_main(void* arg);

std::string where(const char* file, int line) {
    const char* slash = std::strrchr(file, '/');
    return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}

std::string xyz(const uint3& v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "(%u,%u,%u)", v.x, v.y, v.z);
    return buf;
}

// One per OS thread that launches (launches are serialised by runtime.cpp).
struct Executor {
    Fiber host;
    Pool pools[kPools];

    // The launch being run.
    const LaunchSite* site = nullptr;
    void (*body)(void*) = nullptr;
    void* closure = nullptr;
    char launch_start = 0, launch_end = 0;  // TSan: the host's writes before, its reads after

    // The block being run.
    Pool* pool = nullptr;
    int n_threads = 0;
    int live = 0;
    int at_barrier = 0;
    unsigned barrier_gen = 0;
    char barrier_sync[2] = {};
    std::vector<WarpState> warps;
    std::vector<Worker*> threads;  // the block's, by linear index (whole warps: null past the end)
    std::deque<Worker*> ready;
    KernelFault* fault = nullptr;
    bool faulted = false;
    uint3 block_idx{};

    Worker& worker(int i) { return *pool->workers[static_cast<size_t>(i)]; }

    void fail(cudaError_t code, const std::string& what, const Worker* w) {
        if (faulted) return;
        faulted = true;
        fault->code = code;
        fault->message = "kernel " + std::string(site->kernel) + " (launched at " + where(site->file, site->line) +
                         "), block " + xyz(block_idx) + (w ? ", thread " + xyz(w->coords.thread) : "") + ": " + what;
    }

    std::string thread_name(const Worker& w) const {
        return "thread " + xyz(w.coords.thread) + " (warp " + std::to_string(w.warp) + " lane " +
               std::to_string(w.lane) + ")";
    }

    void ensure_workers(Pool& p, int n) {
        while (static_cast<int>(p.workers.size()) < n) {
            auto w = std::make_unique<Worker>();
            w->ex = this;
            w->pool = &p;
            w->fiber = std::make_unique<Fiber>(worker_main, w.get(), kStackBytes);
            p.workers.push_back(std::move(w));
        }
    }

    bool run_block(const uint3& b, const dim3& grid, const dim3& block) {
        pool = &pools[(static_cast<uint64_t>(b.x) + b.y + b.z) % kPools];
        n_threads = static_cast<int>(block.x * block.y * block.z);
        ensure_workers(*pool, n_threads);
        ++pool->serial;
        block_idx = b;
        live = n_threads;
        at_barrier = 0;
        warps.assign(static_cast<size_t>((n_threads + 31) / 32), WarpState{});
        threads.assign(warps.size() * 32, nullptr);
        ready.clear();
        for (int i = 0; i < n_threads; ++i) {
            Worker& w = worker(i);
            threads[static_cast<size_t>(i)] = &w;
            const auto u = static_cast<unsigned>(i);
            w.coords = {{u % block.x, u / block.x % block.y, u / (block.x * block.y)}, b, block, grid};
            w.linear = i;
            w.warp = i / 32;
            w.lane = i % 32;
            w.state = State::Ready;
            w.call = nullptr;
            ready.push_back(&w);
        }
        while (!faulted) {
            if (ready.empty()) {
                if (live == 0) break;
                fail(cudaErrorLaunchFailure, "deadlock: no thread can go on. " + describe_waits(), nullptr);
                break;
            }
            Worker* w = ready.front();
            ready.pop_front();
            current = &w->coords;
            host.switch_to(*w->fiber);  // back when no thread is ready, or at a fault
        }
        if (faulted) abandon_pool();
        return !faulted;
    }

    // The fibers of a faulted block stopped mid-kernel: start afresh (a
    // destroyed fiber forgets what it left on its stack).
    void abandon_pool() {
        Pool& p = *pool;
        p.workers.clear();
        for (SharedSlot& s : p.shared) std::free(s.memory);
        p.shared.clear();
    }

    void after_switch(Worker& w) {
        switch (w.state) {
            case State::Exited: {
                --live;
                WarpState& ws = warps[static_cast<size_t>(w.warp)];
                ws.exited |= 1u << w.lane;
                if (ws.arrived && (ws.first->mask >> w.lane & 1u)) {
                    const Worker& other = worker(w.warp * 32 + ws.first_lane);
                    fail(cudaErrorLaunchFailure,
                         "lane " + std::to_string(w.lane) + " of warp " + std::to_string(w.warp) +
                             " returned while " + thread_name(other) + " waits for it at " + ws.first->name + " (" +
                             where(ws.first->file, ws.first->line) + ", mask 0x" + hex(ws.first->mask) + ")",
                         &w);
                    return;
                }
                if (live > 0 && at_barrier == live) release_barrier();
                return;
            }
            case State::AtBarrier:
                if (++at_barrier == live) release_barrier();
                return;
            case State::AtWarp:
                arrive(w);
                return;
            case State::Faulted:
            case State::Ready:
                return;
        }
    }

    static std::string hex(unsigned v) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08x", v);
        return buf;
    }

    void release_barrier() {
        const Worker* first = nullptr;
        for (int i = 0; i < n_threads; ++i) {
            Worker& w = worker(i);
            if (w.state != State::AtBarrier) continue;
            if (!first) {
                first = &w;
            } else if (w.line != first->line || std::strcmp(w.file, first->file) != 0) {
                fail(cudaErrorIllegalInstruction,
                     "divergent __syncthreads: " + thread_name(*first) + " waits at " + where(first->file, first->line) +
                         " while " + thread_name(w) + " waits at " + where(w.file, w.line) +
                         " (every thread of a block must reach the same barrier)",
                     &w);
                return;
            }
        }
        ++barrier_gen;
        at_barrier = 0;
        for (int i = 0; i < n_threads; ++i) {
            Worker& w = worker(i);
            if (w.state != State::AtBarrier) continue;
            w.state = State::Ready;
            ready.push_back(&w);
        }
    }

    int lanes_in_warp(int warp) const { return std::min(32, n_threads - warp * 32); }

    void arrive(Worker& w) {
        WarpCall& c = *w.call;
        WarpState& ws = warps[static_cast<size_t>(w.warp)];
        const int lanes = lanes_in_warp(w.warp);
        const unsigned valid = lanes == 32 ? ~0u : (1u << lanes) - 1u;
        auto at = [&c] { return std::string(c.name) + " (" + where(c.file, c.line) + ")"; };
        if (!(c.mask >> w.lane & 1u)) {
            fail(cudaErrorIllegalInstruction,
                 at() + " with mask 0x" + hex(c.mask) + ", which leaves out the calling lane " + std::to_string(w.lane), &w);
            return;
        }
        if (c.mask & ~valid) {
            fail(cudaErrorIllegalInstruction,
                 at() + " with mask 0x" + hex(c.mask) + ": warp " + std::to_string(w.warp) + " has only " +
                     std::to_string(lanes) + " lanes (a block of " + std::to_string(n_threads) + " threads)",
                 &w);
            return;
        }
        if (c.width <= 0 || c.width > 32 || (c.width & (c.width - 1))) {
            fail(cudaErrorIllegalInstruction, at() + " with width " + std::to_string(c.width) + " (a power of 2 up to 32)", &w);
            return;
        }
        if (ws.arrived == 0) {
            ws.first = &c;
            ws.first_lane = w.lane;
        } else if (c.op != ws.first->op || c.mask != ws.first->mask || c.line != ws.first->line ||
                   (c.file != ws.first->file && std::strcmp(c.file, ws.first->file) != 0)) {
            fail(cudaErrorIllegalInstruction,
                 "lane " + std::to_string(w.lane) + " is at " + at() + " mask 0x" + hex(c.mask) + " while lane " +
                     std::to_string(ws.first_lane) + " of its warp is at " + ws.first->name + " (" +
                     where(ws.first->file, ws.first->line) + ") mask 0x" + hex(ws.first->mask) +
                     ": the lanes of a mask must make the same call",
                 &w);
            return;
        }
        ws.arrived |= 1u << w.lane;
        if (const unsigned gone = c.mask & ws.exited) {
            const int l = __builtin_ctz(gone);
            fail(cudaErrorLaunchFailure,
                 at() + " waits for lane " + std::to_string(l) + " of warp " + std::to_string(w.warp) + " (mask 0x" +
                     hex(c.mask) + "), which has returned",
                 &w);
            return;
        }
        if (ws.arrived == c.mask) complete_warp_call(w.warp);
    }

    void complete_warp_call(int warp) {
        WarpState& ws = warps[static_cast<size_t>(warp)];
        const WarpOp op = ws.first->op;
        const unsigned mask = ws.first->mask;
        Worker* const* lanes = &threads[static_cast<size_t>(warp) * 32];
        if (op <= WarpOp::ShflXor) {
            for (unsigned m = mask; m; m &= m - 1) {
                const int l = __builtin_ctz(m);
                WarpCall& c = *lanes[l]->call;
                const int width = c.width, seg = l & ~(width - 1);
                int src = l;
                switch (op) {
                    case WarpOp::ShflIdx: src = seg + ((c.arg % width) + width) % width; break;
                    case WarpOp::ShflUp: src = l - c.arg >= seg ? l - c.arg : l; break;
                    case WarpOp::ShflDown: src = l + c.arg < seg + width ? l + c.arg : l; break;
                    default: src = (l ^ c.arg) < seg + width ? (l ^ c.arg) : l; break;
                }
                if (src < 0 || src > 31 || !(mask >> src & 1u)) {
                    fail(cudaErrorIllegalInstruction,
                         std::string(c.name) + " (" + where(c.file, c.line) + "): lane " + std::to_string(l) +
                             " reads lane " + std::to_string(src) + ", which is not in the mask 0x" + hex(mask),
                         lanes[l]);
                    return;
                }
                c.out[0] = lanes[src]->call->in[0];
                c.out[1] = lanes[src]->call->in[1];
            }
        } else if (op != WarpOp::SyncWarp) {
            // Votes and reductions over the mask's lanes.
            uint64_t ballot = 0;
            uint32_t sum = 0, mn = UINT32_MAX, mx = 0;
            for (unsigned m = mask; m; m &= m - 1) {
                const int l = __builtin_ctz(m);
                const uint64_t in = lanes[l]->call->in[0];
                const auto v = static_cast<uint32_t>(in);
                ballot |= static_cast<uint64_t>(in != 0) << l;
                sum += v;
                mn = std::min(mn, v);
                mx = std::max(mx, v);
            }
            uint64_t r = 0;
            switch (op) {
                case WarpOp::Ballot: r = ballot; break;
                case WarpOp::Any: r = ballot != 0; break;
                case WarpOp::All: r = ballot == mask; break;
                case WarpOp::ReduceAdd: r = sum; break;
                case WarpOp::ReduceMin: r = mn; break;
                default: r = mx; break;
            }
            for (unsigned m = mask; m; m &= m - 1) lanes[__builtin_ctz(m)]->call->out[0] = r;
        }
        ws.arrived = 0;
        ws.first = nullptr;
        ++ws.gen;
        for (unsigned m = mask; m; m &= m - 1) {
            Worker* w = lanes[__builtin_ctz(m)];
            w->state = State::Ready;
            ready.push_back(w);
        }
    }

    std::string describe_waits() {
        std::string out;
        int listed = 0;
        for (int i = 0; i < n_threads && listed < 6; ++i) {
            const Worker& w = worker(i);
            if (w.state == State::Exited) continue;
            // One line per run of threads waiting at the same place.
            if (i > 0) {
                const Worker& prev = worker(i - 1);
                if (prev.state == w.state && prev.line == w.line && prev.file == w.file) continue;
            }
            const char* what = w.state == State::AtBarrier ? "__syncthreads" : w.call ? w.call->name : "?";
            out += thread_name(w) + (i + 1 < n_threads ? " and the next" : "") + " wait at " + what + " (" +
                   where(w.file, w.line) + "); ";
            ++listed;
        }
        return out;
    }
};

thread_local std::unique_ptr<Executor> t_executor;

// The running thread `w` has set its state (waiting or exited): does the
// bookkeeping, then runs the next ready thread, itself included, or goes back
// to the host side when none is ready or a fault ended the block.
void park(Worker& w) {
    Executor& ex = *w.ex;
    // The host reads what the thread wrote once the launch ends, even if a
    // fault ends it with this thread stopped here.
    hb_release(&ex.launch_end);
    ex.after_switch(w);
    Worker* next = nullptr;
    if (!ex.faulted && !ex.ready.empty()) {
        next = ex.ready.front();
        ex.ready.pop_front();
    }
    if (next == &w) return;
    current = next ? &next->coords : nullptr;
    Fiber& self = *w.fiber;
    Fiber& to = next ? *next->fiber : ex.host;
    // Not parked inside an ignore region: TSan refuses to destroy such a fiber.
    runtime_accesses_end();
    self.switch_to(to);
    runtime_accesses_begin();
}

Worker& running_worker() {
    // `current` points into the running Worker (its coords member).
    auto* c = const_cast<Coordinates*>(current);
    return *reinterpret_cast<Worker*>(reinterpret_cast<char*>(c) - offsetof(Worker, coords));
}

void worker_main(void* arg) {
    auto* w = static_cast<Worker*>(arg);
    Executor& ex = *w->ex;
    w->fiber->started();
    for (;;) {
        runtime_accesses_begin();
        Pool& p = *w->pool;
        hb_acquire(&ex.launch_start);
        hb_acquire(&p.block_sync[(p.serial - 1) & 1]);
        runtime_accesses_end();
        ex.body(ex.closure);
        runtime_accesses_begin();
        hb_release(&p.block_sync[p.serial & 1]);
        w->state = State::Exited;
        park(*w);  // resumed only to run the same thread index of a later block
        runtime_accesses_end();
    }
}

}  // namespace

void sync_threads(const char* file, int line) {
    runtime_accesses_begin();
    Worker& w = running_worker();
    Executor& ex = *w.ex;
    const unsigned gen = ex.barrier_gen;
    hb_release(&ex.barrier_sync[gen & 1]);
    w.state = State::AtBarrier;
    w.file = file;
    w.line = line;
    w.gen = gen;
    park(w);
    hb_acquire(&ex.barrier_sync[gen & 1]);
    runtime_accesses_end();
}

void warp_call(WarpCall& call) {
    runtime_accesses_begin();
    Worker& w = running_worker();
    Executor& ex = *w.ex;
    WarpState& ws = ex.warps[static_cast<size_t>(w.warp)];
    const unsigned gen = ws.gen;
    const bool orders_memory = call.op == WarpOp::SyncWarp;
    if (orders_memory) hb_release(&ws.sync[gen & 1]);
    w.state = State::AtWarp;
    w.file = call.file;
    w.line = call.line;
    w.call = &call;
    park(w);
    w.call = nullptr;
    if (orders_memory) hb_acquire(&ex.warps[static_cast<size_t>(w.warp)].sync[gen & 1]);
    runtime_accesses_end();
}

void* shared_memory(const void* site, size_t bytes, size_t align, const char* name, const char* file, int line) {
    runtime_accesses_begin();
    Worker& w = running_worker();
    Executor& ex = *w.ex;
    Pool& p = *w.pool;
    SharedSlot* slot = nullptr;
    for (SharedSlot& s : p.shared)
        if (s.site == site) slot = &s;
    if (!slot) {
        const size_t a = std::max<size_t>(align, 16);
        void* mem = std::aligned_alloc(a, (bytes + a - 1) / a * a);
        p.shared.push_back({site, mem, bytes, 0});
        slot = &p.shared.back();
    }
    if (slot->block_serial != p.serial) {
        std::memset(slot->memory, 0xFF, slot->bytes);  // NaN as floats: a read before a write shows
        slot->block_serial = p.serial;
        size_t in_block = 0;
        for (const SharedSlot& s : p.shared)
            if (s.block_serial == p.serial) in_block += s.bytes;
        if (in_block > kMaxSharedPerBlock) {
            ex.fail(cudaErrorLaunchOutOfResources,
                    "__shared__ " + std::string(name) + " (" + where(file, line) + ") brings the block's shared memory to " +
                        std::to_string(in_block) + " bytes, over the " + std::to_string(kMaxSharedPerBlock) + " a block may have",
                    &w);
            w.state = State::Faulted;
            park(w);  // never resumed: the block ends at a fault
        }
    }
    void* mem = slot->memory;
    runtime_accesses_end();
    return mem;
}

bool run_grid(const LaunchSite& site, dim3 grid, dim3 block, void (*body)(void*), void* closure, KernelFault* fault) {
    if (!t_executor) t_executor = std::make_unique<Executor>();
    Executor& ex = *t_executor;
    ex.site = &site;
    ex.body = body;
    ex.closure = closure;
    ex.fault = fault;
    ex.faulted = false;
    hb_release(&ex.launch_start);
    runtime_accesses_begin();
    bool ok = true;
    for (unsigned z = 0; z < grid.z && ok; ++z)
        for (unsigned y = 0; y < grid.y && ok; ++y)
            for (unsigned x = 0; x < grid.x && ok; ++x) ok = ex.run_block({x, y, z}, grid, block);
    current = nullptr;
    runtime_accesses_end();
    hb_acquire(&ex.launch_end);
    return ok;
}

}  // namespace cuda_on_cpu
