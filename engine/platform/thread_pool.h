// A persistent pool of compute threads. parallel_for splits [0, n) into chunks
// that workers (and the calling thread) claim from an atomic counter, so uneven
// work (a few experts with many tokens) still keeps every core busy; chunks
// shrink as the work runs out (guided scheduling, `grain` the smallest). Workers
// spin briefly after a job before they sleep, so back-to-back ops of one token
// do not pay a futex wake-up each; while they spin, a job starts and ends
// through atomics alone (the mutex and condition variables are only for
// threads that went to sleep).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace strata::cpu {

// A CPU hint that this thread is spinning on another's progress.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// A non-owning reference to a callable (like C++26 std::function_ref): no
// allocation, so passing a lambda to parallel_for costs nothing per call.
template <class Sig> class FunctionRef;
template <class R, class... A> class FunctionRef<R(A...)> {
public:
    template <class F>
    FunctionRef(F&& f) : obj_(const_cast<void*>(static_cast<const void*>(&f))),
                         call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
    R operator()(A... a) const { return call_(obj_, a...); }

private:
    void* obj_;
    R (*call_)(void*, A...);
};

using ChunkFn = FunctionRef<void(int64_t, int64_t, int)>;

// Guided scheduling, as parallel_for hands out [0, n): the next chunk
// [*begin, *end) from the shared cursor `next`, a 1/parts share of what is
// left and at least `grain` (long streams first, short ones at the end, so
// the threads finish close together); false once none is left. For regions
// that split several ranges among the threads themselves.
inline bool take_guided_chunk(std::atomic<int64_t>& next, int64_t n, int64_t grain, int64_t parts, int64_t* begin,
                              int64_t* end) {
    for (int64_t b = next.load(std::memory_order_relaxed); b < n;) {
        const int64_t size = std::max(grain, (n - b) / parts);
        if (next.compare_exchange_weak(b, b + size, std::memory_order_relaxed)) {
            *begin = b;
            *end = std::min(n, b + size);
            return true;
        }
    }
    return false;
}

// A range [lo, hi) packed in one 64-bit word (lo in the low half, both
// below 2^32), so threads take from either end of it with one
// compare-and-swap: each call takes want(left) items, clamped to [1, left],
// from the front or the back; false once it is empty.
inline uint64_t pack_range(int64_t lo, int64_t hi) { return static_cast<uint64_t>(hi) << 32 | static_cast<uint64_t>(lo); }
inline bool range_empty(uint64_t v) { return static_cast<uint32_t>(v) >= static_cast<uint32_t>(v >> 32); }
template <class Want>
bool take_from_range(std::atomic<uint64_t>& w, bool front, Want&& want, int64_t* begin, int64_t* end) {
    uint64_t v = w.load(std::memory_order_relaxed);
    for (;;) {
        const int64_t lo = static_cast<uint32_t>(v), hi = static_cast<uint32_t>(v >> 32);
        if (lo >= hi) return false;
        const int64_t take = std::clamp<int64_t>(want(hi - lo), 1, hi - lo);
        const int64_t b = front ? lo : hi - take, e = b + take;
        if (w.compare_exchange_weak(v, front ? pack_range(e, hi) : pack_range(lo, b), std::memory_order_relaxed)) {
            *begin = b;
            *end = e;
            return true;
        }
    }
}

// [0, n) split into one contiguous range per part (thread): a part takes
// its own range from the front, half of what is left of it each time (at
// least `grain`), so its chunks continue one another and its stream through
// the rows never jumps; a part whose range is used up takes from the back of
// another's, half of what is left there (at least `grain`), so the parts
// still finish within about a grain of each other. With guided chunks from
// one shared cursor (take_guided_chunk) a thread's next chunk starts where
// another thread's ended: each chunk is a new stream, and a new stream costs
// (in a harness on this machine, two threads streaming q4_0 rows in 72 KiB
// chunks: 11% less throughput when each thread's chunks alternate with the
// other's than when they continue one another).
class OwnedRanges {
public:
    explicit OwnedRanges(int parts)
        : parts_(std::max(1, parts)), left_(std::make_unique<Left[]>(static_cast<size_t>(parts_))) {}
    // Before the region that takes from it (not while any part takes); n < 2^32.
    void reset(int64_t n, int64_t grain) {
        grain_ = std::max<int64_t>(1, grain);
        for (int p = 0; p < parts_; ++p)
            left_[p].v.store(pack_range(n * p / parts_, n * (p + 1) / parts_), std::memory_order_relaxed);
    }
    // The next chunk [*begin, *end) for `part`; false once nothing is left anywhere.
    bool take(int part, int64_t* begin, int64_t* end) {
        const auto half = [this](int64_t left) { return std::max(grain_, left / 2); };
        if (take_from_range(left_[part].v, true, half, begin, end)) return true;
        for (int k = 1; k < parts_; ++k)
            if (take_from_range(left_[(part + k) % parts_].v, false, half, begin, end)) return true;
        return false;
    }

private:
    struct alignas(64) Left {
        std::atomic<uint64_t> v{0};  // pack_range: the part's rows not yet taken
    };
    int parts_;
    std::unique_ptr<Left[]> left_;
    int64_t grain_ = 1;
};

class ThreadPool {
public:
    // n_threads includes the caller; 1 means no worker threads at all.
    // `cpus` (optional): the CPUs the workers are pinned to (pthread_setaffinity_np;
    // NUMA bind runs the compute on one node's CPUs). Empty: the workers inherit
    // the creating thread's affinity. The caller's own affinity is left alone.
    explicit ThreadPool(int n_threads, std::vector<int> cpus = {});
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    const std::vector<int>& cpus() const { return cpus_; }

    // Calls fn(begin, end, thread_index) over chunks of at least `grain` items
    // (the last may be shorter); returns when all of [0, n) is done. Not re-entrant.
    void parallel_for(int64_t n, int64_t grain, ChunkFn fn);

    // The calling thread's index in the pool it works for: i >= 1 on worker
    // i, 0 on any other thread (a caller of parallel_for runs as thread 0).
    static int thread_index();

    // Profiling (strata-cli bench --profile): while on, each thread's time
    // inside parallel_for's chunks is added up (two clock reads per thread
    // and job; off, nothing), and the caller's time waiting for the workers
    // after its own chunks. busy_seconds(): those sums by thread index;
    // caller_wait_seconds(): the caller's waits; both since the accounting
    // was last turned on.
    void set_busy_accounting(bool on);
    std::vector<double> busy_seconds() const;
    double caller_wait_seconds() const;

private:
    void worker_main(int index);
    void run_chunks(int thread_index);
    void chunks_of_job(int thread_index);

    int n_threads_;
    std::vector<int> cpus_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;               // only for sleeping and waking
    std::condition_variable wake_;   // workers asleep wait here for a job
    std::condition_variable done_;   // the caller asleep waits here for the workers
    std::atomic<bool> stop_{false};  // set once, before the last job number

    // Current job: written by the caller before it publishes the job.
    const ChunkFn* fn_ = nullptr;
    int64_t n_ = 0;
    int64_t grain_ = 1;
    std::atomic<int64_t> next_{0};
    // Each on its own cache line: workers spin on published_ between jobs and
    // the caller on active_ at the end of one, and neither should pull in the
    // line the other is writing.
    alignas(64) std::atomic<uint64_t> published_{0};  // the job's number
    alignas(64) std::atomic<int> active_{0};          // workers still in the job
    alignas(64) std::atomic<int> sleepers_{0};        // workers asleep on wake_
    std::atomic<bool> caller_asleep_{false};          // the caller is on done_

    // Busy accounting: one counter per thread, each on its own cache line.
    struct alignas(64) BusyNs {
        std::atomic<uint64_t> ns{0};
    };
    std::atomic<bool> account_busy_{false};
    std::vector<BusyNs> busy_ns_;
    std::atomic<uint64_t> caller_wait_ns_{0};  // only the caller writes it
};

}  // namespace strata::cpu
