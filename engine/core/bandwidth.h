// Measures the machine's memory read bandwidth the way decode reads weights:
// streaming sequential reads of a buffer much larger than the caches, by
// `threads` threads, with the fastest read loop the CPU has (full-width
// loads; the hardware prefetchers alone, or software prefetch ahead), over
// memory advised for huge pages as the engine's weights are. The roofline
// every decode figure is compared against.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/quant_types.h"

namespace strata::cpu {
class ThreadPool;
}
namespace strata::memory {
class AlignedBuffer;
class Ledger;
}

namespace strata::core {

// GB/s (1e9 bytes per second) over `bytes`, from several passes of each read
// loop, one loop after another.
struct ReadBandwidth {
    // The fastest single pass of any loop: the most the machine gave in a
    // few milliseconds. The roofline.
    double peak_gbs = 0.0;
    // The fastest loop's bytes over its time, all its passes together: what
    // the machine gave over the whole measurement. On a quiet machine close
    // to the peak; on a shared host, whose bandwidth moves from one pass to
    // the next, what a decode that runs for longer can expect.
    double sustained_gbs = 0.0;
};
ReadBandwidth measure_read_bandwidth(int threads, uint64_t bytes = 512ull << 20);

// The weight kernel alone: GB/s of weight rows (1024 elements of `type`, in
// the layout the engine would repack them to) that gemm_q streams for one
// token on `threads` threads, split into chunks as the forward pass splits a
// matrix; best of several passes over about `bytes`. read_once: through
// gemm_q_once_pair on each chunk's two halves, as the forward pass reads a
// MoE expert's gate and up. Next to
// measure_read_bandwidth it says whether the kernel keeps up with the
// memory: what decode loses beyond that is in the rest of the forward pass.
// 0 for a type without quantized kernels (f32).
double measure_gemm_gbs(int threads, kernels::WeightType type, uint64_t bytes = 256ull << 20, bool read_once = false);

// The buffer behind measure_gemm_gbs and the kernel tuning: about `bytes` of
// random quantized rows of `cols` elements (huge-page memory), repacked to
// the active kernels' layout, and one token's activations.
class WeightStream {
public:
    WeightStream(kernels::WeightType type, int64_t cols, uint64_t bytes);
    ~WeightStream();
    // True for a type without quantized kernels (f32): nothing to stream.
    bool empty() const { return rb_ == 0; }
    // Rewrites the rows in the layout the active kernels repack to, when a
    // kernel tuning changed it (else nothing to do).
    void refill();
    // One pass over every row, split into chunks of at least `grain` rows as
    // the forward pass splits a matrix: GB/s. read_once: each chunk's two
    // halves through gemm_q_once_pair, as decode reads an expert's gate and up.
    double pass_gbs(cpu::ThreadPool& pool, bool read_once, int64_t grain);
    uint64_t bytes() const { return static_cast<uint64_t>(rows_ * rb_); }

private:
    kernels::WeightType type_;
    kernels::WeightType layout_ = kernels::WeightType::F32;
    int64_t cols_ = 0, rb_ = 0, rows_ = 0, ab_ = 0;
    bool filled_ = false;
    std::vector<uint8_t> tile_, xq_;
    std::vector<float> y_;
    std::unique_ptr<memory::Ledger> ledger_;
    std::unique_ptr<memory::AlignedBuffer> mem_;
};

}  // namespace strata::core
