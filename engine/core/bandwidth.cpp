#include "core/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include "platform/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "kernels/tuning.h"
#include "memory/aligned_buffer.h"
#include "memory/ledger.h"

namespace strata::core {

namespace {

// 0 or less: every hardware thread.
int threads_or_all(int threads) {
    return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// The probes' buffers are memory::AlignedBuffers with huge pages, as the
// engine keeps its weights (in a ledger of their own, without a budget): on
// this project's test host a read loop over 4 KiB pages measured ~20% less
// than the same loop over huge pages (TLB misses), and the decode's kernels
// then streamed faster than the probe said the machine could.

// One timed pass, its seconds: every thread streams its chunks with the
// widest loads the CPU has (the read_sum kernels of the best level, whatever
// STRATA_KERNELS caps the forward pass to: the roofline is the machine's,
// not the build's), each chunk as one stream or as two halves read at once.
double read_pass(cpu::ThreadPool& pool, const uint64_t* buf, size_t n, std::vector<uint64_t>& sums,
                 kernels::ref::ReadAhead ahead, int64_t ahead_bytes, int streams) {
    const kernels::KernelTable& k = *kernels::kernel_table(kernels::best_kernel_level());
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t chunks = pool.size() * 16;
    const size_t per = (n + static_cast<size_t>(chunks) - 1) / static_cast<size_t>(chunks);
    pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1, int t) {
        uint64_t acc = 0;
        for (int64_t c = c0; c < c1; ++c) {
            const size_t b = static_cast<size_t>(c) * per;
            const size_t e = std::min(n, b + per);
            if (b >= e) continue;
            if (streams == 1) {
                acc += k.read_sum(buf + b, static_cast<int64_t>(e - b), ahead, ahead_bytes);
                continue;
            }
            const size_t half = (e - b) / 2;
            acc += k.read_sum2(buf + b, buf + b + half, static_cast<int64_t>(half), ahead, ahead_bytes);
            if ((e - b) % 2) acc += buf[e - 1];
        }
        sums[static_cast<size_t>(t) * 8] += acc;
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ReadBandwidth measure_read_bandwidth(int threads, uint64_t bytes) {
    threads = threads_or_all(threads);
    const size_t n = static_cast<size_t>(bytes / sizeof(uint64_t));
    memory::Ledger ledger;
    memory::AlignedBuffer mem(ledger, memory::Account::RuntimeReserve, memory::Tier::Fast, n * sizeof(uint64_t), true);
    auto* buf = reinterpret_cast<uint64_t*>(mem.data());
    // Touch every page (and give the words distinct values) before timing.
    for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
    cpu::ThreadPool pool(threads);
    std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8, 0);
    // The best of several passes of four read loops: which one reads fastest
    // depends on the memory latency, on how many threads share the bus and,
    // on a shared host, on the moment (on this project's 2-vCPU test host
    // each of them was the fastest at some time, mostly the hardware
    // prefetchers alone when the host was quiet and prefetchnta 8 KiB ahead
    // when it was busy). The roofline is the most the machine gives, not what
    // one loop gets: the fastest pass. Each loop's passes together give its
    // sustained rate (the same measurement, no extra time). Two of the loops
    // read each chunk as two streams at once, as the decode reads an
    // expert's gate and up (here the fastest passes of one and of two
    // streams came within 1-2% of each other, and two kept up the higher
    // average in 2 of 3 runs).
    using kernels::ref::ReadAhead;
    constexpr struct {
        ReadAhead ahead;
        int64_t bytes;
        int streams;
    } kLoops[] = {{ReadAhead::None, 0, 1}, {ReadAhead::T0, 8192, 1}, {ReadAhead::Nta, 4096, 1}, {ReadAhead::Nta, 8192, 1},
                  {ReadAhead::None, 0, 2}, {ReadAhead::Nta, 8192, 2}};
    constexpr int kTimedPasses = 3;  // after one that warms up
    const double gb = static_cast<double>(n * sizeof(uint64_t)) / 1e9;
    double loop_seconds[std::size(kLoops)] = {};
    ReadBandwidth bw;
    for (int pass = 0; pass <= kTimedPasses; ++pass)
        for (size_t l = 0; l < std::size(kLoops); ++l) {
            const double s = read_pass(pool, buf, n, sums, kLoops[l].ahead, kLoops[l].bytes, kLoops[l].streams);
            if (pass == 0) continue;
            bw.peak_gbs = std::max(bw.peak_gbs, gb / s);
            loop_seconds[l] += s;
        }
    for (double s : loop_seconds) bw.sustained_gbs = std::max(bw.sustained_gbs, kTimedPasses * gb / s);
    // Keep the sums observable so the reads are not optimised away.
    volatile uint64_t sink = 0;
    for (uint64_t v : sums) sink = sink + v;
    (void)sink;
    return bw;
}

WeightStream::WeightStream(kernels::WeightType type, int64_t cols, uint64_t bytes) : type_(type), cols_(cols) {
    constexpr int64_t kTileRows = 1024;
    rb_ = kernels::row_bytes(type, cols);
    if (type == kernels::WeightType::F32 || !kernels::has_kernels(type) || rb_ <= 0) {
        rb_ = 0;
        return;
    }
    // One matrix of quantized random rows, copied over the whole buffer (the
    // kernel's speed does not depend on the values).
    std::vector<float> x(static_cast<size_t>(cols));
    tile_.resize(static_cast<size_t>(rb_ * kTileRows));
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int64_t r = 0; r < kTileRows; ++r) {
        for (float& v : x) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            v = static_cast<float>(static_cast<int64_t>(seed >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
        }
        kernels::quantize_row(type, x.data(), tile_.data() + r * rb_, cols);
    }
    rows_ = std::max<int64_t>(kTileRows, static_cast<int64_t>(bytes / static_cast<uint64_t>(rb_)) / kTileRows * kTileRows);
    ledger_ = std::make_unique<memory::Ledger>();
    mem_ = std::make_unique<memory::AlignedBuffer>(*ledger_, memory::Account::RuntimeReserve, memory::Tier::Fast,
                                                   static_cast<uint64_t>(rows_ * rb_), true);
    // One token's activations, and room for every row's result.
    ab_ = kernels::activation_row_bytes(type, cols);
    xq_.resize(static_cast<size_t>(ab_));
    kernels::quantize_activation(type, x.data(), xq_.data(), cols);
    y_.resize(static_cast<size_t>(rows_));
    refill();
}

WeightStream::~WeightStream() = default;

void WeightStream::refill() {
    if (rb_ == 0) return;
    if (filled_ && kernels::fast_layout(type_, cols_) == layout_) return;
    filled_ = true;
    uint8_t* w = mem_->data();
    for (int64_t r = 0; r < rows_; r += static_cast<int64_t>(tile_.size()) / rb_) std::memcpy(w + r * rb_, tile_.data(), tile_.size());
    layout_ = kernels::fast_layout(type_, cols_);
    std::vector<uint8_t> scratch(static_cast<size_t>(rb_));
    kernels::repack_rows(type_, layout_, w, rows_, cols_, static_cast<uint64_t>(rb_), scratch.data());
}

double WeightStream::pass_gbs(cpu::ThreadPool& pool, bool read_once, int64_t grain) {
    if (rb_ == 0) return 0.0;
    uint8_t* w = mem_->data();
    const int64_t rb = rb_, rows = rows_, ab = ab_, cols = cols_;
    const kernels::WeightType layout = layout_;
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1, int) {
        const uint64_t stride = static_cast<uint64_t>(rb);
        if (!read_once) return kernels::gemm_q(layout, w + r0 * rb, stride, r1 - r0, xq_.data(), ab, 1, cols, y_.data() + r0, rows);
        // A chunk's two halves at once, as decode reads an expert's gate and up.
        const int64_t h = (r1 - r0) / 2;
        kernels::gemm_q_once_pair(layout, w + r0 * rb, w + (r0 + h) * rb, stride, h, xq_.data(), cols, y_.data() + r0,
                                  y_.data() + r0 + h);
        if ((r1 - r0) % 2)
            kernels::gemm_q_once(layout, w + (r1 - 1) * rb, stride, 1, xq_.data(), ab, 1, cols, y_.data() + r1 - 1, rows);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float sink = y_[static_cast<size_t>(rows / 2)];
    (void)sink;
    return static_cast<double>(rows * rb) / s / 1e9;
}

double measure_gemm_gbs(int threads, kernels::WeightType type, uint64_t bytes, bool read_once) {
    WeightStream stream(type, 1024, bytes);
    if (stream.empty()) return 0.0;
    cpu::ThreadPool pool(threads_or_all(threads));
    const int64_t grain = kernels::kernel_tuning().grain_rows;
    double best = 0.0;
    for (int pass = 0; pass < 4; ++pass) {
        const double gbs = stream.pass_gbs(pool, read_once, grain);
        if (pass > 0) best = std::max(best, gbs);  // the first pass warms up
    }
    return best;
}

}  // namespace strata::core
