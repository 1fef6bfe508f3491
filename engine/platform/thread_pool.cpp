#include "platform/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "platform/numa.h"
#include "common/log.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata::cpu {

namespace {
// A CPU hint that we are spinning (no system call, unlike sched_yield, which
// on a loaded machine hands the core away for a whole time slice).
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}
constexpr int kSpinIterations = 4000;  // ~0.1 ms of pauses before sleeping
thread_local int tls_thread_index = 0;

uint64_t now_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

int ThreadPool::thread_index() { return tls_thread_index; }

void ThreadPool::set_busy_accounting(bool on) {
    if (on) {
        for (BusyNs& b : busy_ns_) b.ns.store(0, std::memory_order_relaxed);
        caller_wait_ns_.store(0, std::memory_order_relaxed);
    }
    account_busy_.store(on, std::memory_order_relaxed);
}

double ThreadPool::caller_wait_seconds() const {
    return static_cast<double>(caller_wait_ns_.load(std::memory_order_relaxed)) * 1e-9;
}

std::vector<double> ThreadPool::busy_seconds() const {
    std::vector<double> s;
    for (const BusyNs& b : busy_ns_) s.push_back(static_cast<double>(b.ns.load(std::memory_order_relaxed)) * 1e-9);
    return s;
}

ThreadPool::ThreadPool(int n_threads, std::vector<int> cpus)
    : n_threads_(std::max(1, n_threads)), cpus_(std::move(cpus)), busy_ns_(static_cast<size_t>(n_threads_)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true, std::memory_order_relaxed);
        published_.fetch_add(1, std::memory_order_seq_cst);  // a worker that sees it sees stop_
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int thread_index) {
    // Guided: a chunk is a 1/threads share of what is left, at least
    // `grain`. Early chunks are long (long sequential streams through the
    // weights), the last ones short, so threads finish within a small chunk
    // of each other. Every chunk starts a new stream that waits on memory
    // latency before the prefetch runs ahead, so fewer chunks pay: a
    // 1/(2 x threads) share made twice as many and decoded the 1.2B Q4_0
    // model 14% slower when the host gave ~75 GB/s.
    if (!account_busy_.load(std::memory_order_relaxed)) return chunks_of_job(thread_index);
    const uint64_t t0 = now_ns();
    chunks_of_job(thread_index);
    busy_ns_[static_cast<size_t>(thread_index)].ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
}

void ThreadPool::chunks_of_job(int thread_index) {
    for (int64_t b, e; take_guided_chunk(next_, n_, grain_, n_threads_, &b, &e);) (*fn_)(b, e, thread_index);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, ChunkFn fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (workers_.empty() || n <= grain) {  // on the caller alone
        const bool account = account_busy_.load(std::memory_order_relaxed);
        const uint64_t t0 = account ? now_ns() : 0;
        for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain), 0);
        if (account) busy_ns_[0].ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
        return;
    }
    // The job's fields, then its number: a worker that sees the number sees
    // the fields. No worker reads them before: the previous job ended with
    // every worker done (active_ == 0).
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    next_.store(0, std::memory_order_relaxed);
    active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    published_.fetch_add(1, std::memory_order_seq_cst);
    // A worker going to sleep counts itself in sleepers_ and then checks
    // published_ (seq_cst both): it sees this job or is counted here.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mutex_);  // it is waiting, or about to re-check under the lock
        wake_.notify_all();
    }
    run_chunks(0);
    const bool account = account_busy_.load(std::memory_order_relaxed);
    const uint64_t wait0 = account ? now_ns() : 0;
    // Wait for workers to finish their chunks (spin first: ops are short).
    for (int spin = 0; spin < kSpinIterations && active_.load(std::memory_order_acquire) != 0; ++spin) spin_pause();
    if (active_.load(std::memory_order_acquire) != 0) {
        std::unique_lock<std::mutex> lock(mutex_);
        caller_asleep_.store(true, std::memory_order_seq_cst);
        done_.wait(lock, [this] { return active_.load(std::memory_order_seq_cst) == 0; });
        caller_asleep_.store(false, std::memory_order_relaxed);
    }
    if (account) caller_wait_ns_.fetch_add(now_ns() - wait0, std::memory_order_relaxed);
}

void ThreadPool::worker_main(int index) {
    tls_thread_index = index;
    if (!cpus_.empty()) {
        if (const std::string err = set_current_thread_cpus(cpus_); !err.empty())
            logger("cpu")->warn("compute thread {}: cannot pin to the NUMA node's CPUs: {}", index, err);
    }
    uint64_t seen = 0;
    for (;;) {
        // Spin briefly for the next job, then sleep.
        for (int spin = 0; spin < kSpinIterations && published_.load(std::memory_order_acquire) == seen; ++spin)
            spin_pause();
        if (published_.load(std::memory_order_acquire) == seen) {
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            wake_.wait(lock, [&] { return published_.load(std::memory_order_seq_cst) != seen; });
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = published_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_relaxed)) return;
        run_chunks(index);
        // The last worker out wakes the caller if it went to sleep; the
        // caller marks itself asleep and then re-checks active_ (seq_cst both).
        if (active_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_asleep_.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> lock(mutex_);
            done_.notify_all();
        }
    }
}

}  // namespace strata::cpu
