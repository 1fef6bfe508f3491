// Picks the CPU weight kernels' knobs (kernels/tuning.h) by measuring them
// on this machine, for a model's bulk weight type and row length: the
// 512-bit against the 256-bit kernels, the prefetch distance, the read-once
// loops (prefetchnta, gate and up as two streams) against the plain ones,
// and the rows a thread takes at a time. Each stage times its candidates in
// alternating rounds over a buffer larger than the caches, on the engine's
// thread count, and keeps the default unless another is clearly faster
// (kMinGain, kMinGainNarrow). About 0.2-0.5 s; the result is cached per CPU model, kernel
// level, type, row length and thread count, so later loads take no time.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/quant_types.h"
#include "kernels/tuning.h"

namespace strata::model {
class Model;
}

namespace strata::core {

enum class KernelTuningMode {
    Auto,     // the cached result, else measure (and cache)
    Measure,  // measure now (and cache)
    Off,      // the defaults
    Cached,   // the cached result, else the defaults: never measures (plan)
};
// "auto", "measure", "off", "cached"; false for anything else.
bool parse_kernel_tuning_mode(const std::string& s, KernelTuningMode* out);

struct KernelTuningReport {
    kernels::KernelTuning tuning;
    std::string source = "default";  // measured | cached | default
    std::string note;                // why the defaults, when they are
    std::string cpu;                 // the CPU's brand string
    std::string level;               // the kernel level
    kernels::WeightType type = kernels::WeightType::F32;
    int64_t cols = 0;
    int threads = 0;
    double ms = 0.0;          // time spent measuring (0 when cached)
    double gbs = 0.0;         // the picked setting in the measurement
    double default_gbs = 0.0; // the defaults in the same measurement
    int loop_bits() const;         // 512 or 256: the width of the bulk type's kernels
    std::string to_json() const;   // one JSON object (bench --json's "kernel_tuning")
    std::string summary() const;   // one line for logs and inspect
};

// A gain smaller than this over the incumbent does not change a setting:
// on a shared host passes differ by a few percent (3% let noise pick).
inline constexpr double kMinGain = 0.05;
// The 256-bit kernels round differently and may repack differently: they
// replace the 512-bit ones only for a clear gain.
inline constexpr double kMinGainNarrow = 0.10;

// Measures (or reads from `cache_path`, per mode) and applies the result
// with kernels::set_kernel_tuning. cache_path empty: no cache. Never throws:
// a cache that cannot be read or written is logged and ignored.
KernelTuningReport tune_kernels(int threads, kernels::WeightType type, int64_t cols, KernelTuningMode mode,
                                const std::string& cache_path);

// The weight type most of a token's bytes are in: the first MoE layer's
// experts', else the first layer's attention's (what load tunes for).
kernels::WeightType bulk_weight_type(const model::Model& m);

// The buffer a measurement streams (allocated for its 0.3-0.5 s).
uint64_t kernel_tuning_stream_bytes();

// The row length the kernels are tuned for, from the model's width (its
// experts' gate and up rows; the bulk of a token's bytes): 1024 up to 1024
// wide, else 4096. Two classes, so a machine measures (0.3-0.5 s and a
// 96 MiB buffer, once) at most twice per type and thread count.
int64_t tuning_cols(const model::Model& m);

// $XDG_CACHE_HOME/strata/kernel-tuning.json (else ~/.cache/...); empty when
// neither is set.
std::string default_kernel_tuning_cache();

}  // namespace strata::core
