// Every engine setting, in one plain struct, accepted alike by strata-cli's
// run, eval and bench and by the desktop app. validate() names the field, the
// value and what is allowed.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

// A budget of "none": the tier may take whatever the machine gives.
inline constexpr uint64_t kNoBudget = UINT64_MAX;

struct EngineSettings {
    // Tiers. The fast tier holds the shared weights, the expert cache, the KV
    // cache and scratch; the slow tier holds the experts (the file).
    // fast_budget 0 = automatic: the RAM available when the model loads,
    // minus a reserve (memory/system_memory.h), so a model that fits runs
    // fully resident and one that does not gets the expert cache that fits;
    // kNoBudget = none. slow_budget 0 = none on the CPU; on a GPU, where the
    // slow tier is host RAM, 0 = what is available minus the reserve, and a
    // budget below every routed expert makes host RAM a cache of them over
    // the model file (three tiers).
    uint64_t fast_budget = 0;
    uint64_t slow_budget = 0;

    // Expert cache size: an explicit slot count, else a fraction of all routed
    // expert bytes, else everything the fast budget allows (all experts without a budget).
    int64_t expert_slots = -1;
    double expert_cache_fraction = -1.0;
    std::string policy = "lru";        // lru | lfu | arc | pinned
    std::string pin_file;              // calibration file (strata-cli calibrate) to pin hot experts

    bool prefetch = true;
    int prefetch_width = 0;            // experts prefetched per layer; 0 = the model's top-k
    std::string predictor = "lookahead";  // lookahead | frequency | combined

    int threads = 0;                   // compute threads; 0 = all cores
    int io_threads = 1;                // transfer threads
    bool direct_io = true;             // O_DIRECT expert reads (bypass the page cache)
    int64_t n_ctx = 0;                 // 0 = the model's training context, at most 4096
    int64_t n_batch = 256;
    // The paged KV cache shared by all sequences: its size in tokens (0: one
    // sequence of n_ctx), block size, and element type ("f32" or "q8": int8
    // with per-block per-head scales, a quarter of the bytes).
    int64_t kv_tokens = 0;
    int64_t kv_block_tokens = 16;
    std::string kv_type = "f32";

    // NUMA placement (several memory nodes): auto | off | bind | bind:N |
    // interleave; see platform/numa.h. auto does nothing on one node.
    std::string numa = "auto";

    // The CPU kernels' knobs (engine/core/kernel_tuning.h): auto (measured
    // once per CPU model, kernel level, weight type and thread count, then
    // cached), measure (again now), cached (the cache or the defaults, never
    // measuring), off (the built-in defaults). Process-wide:
    // the last load's measurement applies. kernel_tuning_cache: where the
    // cache lives (empty: $XDG_CACHE_HOME/strata/kernel-tuning.json).
    std::string kernel_tuning = "auto";
    std::string kernel_tuning_cache;

    std::string trace_file;            // record a routing trace here (empty: off)

    // Where the forward pass runs: auto (a GPU when there is one), cpu,
    // cuda or cuda:N. A GPU that fails its first-load check against the CPU
    // is not used (auto falls back to the CPU and says why).
    std::string device = "auto";
    // On a GPU: the experts of the first N MoE layers (-1: all) computed on
    // the CPU from host RAM while the rest runs on the GPU (llama.cpp's
    // --n-cpu-moe / --cpu-moe). 0: none. No effect on the CPU.
    int64_t cpu_moe_layers = 0;
    // On a GPU whose VRAM holds only some experts, a routed expert missing
    // from it: auto (the hybrid cost model decides per expert and step:
    // computed on the CPU from host RAM while the GPU computes the rest,
    // copied over the link, or both) or transfer (always copied). No effect
    // on the CPU, or when every expert fits in VRAM.
    std::string placement = "auto";

    // Empty when valid, else one line naming the field and the allowed values.
    std::string validate() const;
};

}  // namespace strata
