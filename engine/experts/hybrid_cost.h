// The hybrid cost model (DESIGN.md §5, issue: hybrid expert execution): for a
// routed expert that is not in VRAM, whether to compute it on the CPU where
// its bytes are (host RAM) or to copy it over the link and compute it on the
// GPU. Decode is bandwidth-bound and batches are compute-bound, so each side
// costs its roofline:
//   cpu  = max(bytes / cpu_bps, flops / cpu_flops)
//   gpu  = max(bytes / gpu_bps, flops / gpu_flops)      flops = 2 x params x tokens
//   link = bytes / link_bps
// A copy pays the link once and then serves this step and the uses the
// predictor expects soon (expected_reuse), so its share of the link is
// link / (1 + expected_reuse); the CPU pays every use. The expert goes to the
// CPU when cpu <= link / (1 + expected_reuse) + gpu.
//
// The rates are measured (the link at load, the CPU's expert kernels at the
// thread count in use, the GPU's kernels), not guessed from hardware names.
#pragma once

#include <cstdint>
#include <string>

namespace strata::experts {

struct HybridRates {
    double link_bps = 0;    // host -> device copies, bytes/s
    double cpu_bps = 0;     // weight bytes/s the CPU's expert kernels stream (one token)
    double cpu_flops = 0;   // flop/s of the CPU's expert kernels over many tokens
    double gpu_bps = 0;     // weight bytes/s the GPU's expert kernels stream
    double gpu_flops = 0;   // flop/s of the GPU's expert kernels over many tokens

    // Empty when every rate is a positive finite number, else which is not.
    std::string validate() const;
};

enum class MissPath : uint8_t { Cpu, Link };

struct MissCost {
    MissPath path = MissPath::Cpu;
    double cpu_s = 0;    // computing it on the CPU
    double copy_s = 0;   // its share of the copy plus computing it on the GPU
    double link_s = 0;   // the whole copy
};

// The choice for one expert of `bytes` and `params` routed `tokens` tokens
// this step, with `expected_reuse` further uses expected before it would be
// evicted. Throws strata::Error for invalid rates or a negative size, count
// or reuse.
MissCost choose_miss_path(const HybridRates& rates, double bytes, double params, int64_t tokens,
                          double expected_reuse = 0.0);

// The most tokens a step may route to such an expert for the CPU to be
// chosen (0: never the CPU; INT64_MAX: always the CPU, e.g. a link slower
// than the CPU's compute at any batch).
int64_t cpu_token_limit(const HybridRates& rates, double bytes, double params, double expected_reuse = 0.0);

}  // namespace strata::experts
