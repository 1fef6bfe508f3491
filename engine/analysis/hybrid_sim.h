// The simulator's hybrid projection (strata-cli simulate --hybrid): a trace
// replayed on a profile whose GPU holds a cache of experts in VRAM while the
// rest live in host RAM, where the CPU can compute them. Each routed expert
// that is not in VRAM takes one of three paths, per expert and per step:
//   cpu   computed on the CPU from host RAM, concurrently with the GPU;
//   link  copied over the link on demand (the GPU waits), then computed there;
//   both  computed on the CPU now and copied in the background for the uses
//         expected soon (the copy overlaps the step).
// Modes compare placements on the same replay: Link (transfer only: every
// miss copied, as the expert cache does today), Cpu (CPU only: every routed
// expert on the CPU, as llama.cpp's --cpu-moe), Hybrid (the cost model of
// hybrid_cost.h decides).
//
// Replay. Sequences are decoded `batch` at a time in lockstep (continuous
// batching: a finished sequence's lane takes the next sequence): a step runs
// one token of each active lane, so an expert routed by c tokens of a step
// is read once for all c. Per step and MoE layer, each routed expert is a hit
// (in VRAM) or takes a path; the VRAM cache (an engine policy) learns from
// the copies only. An expert goes over the link on demand when the copy beats
// the CPU for this step's tokens alone (hybrid_cost.h with no reuse: a large
// batch); otherwise the CPU computes it, and it is also copied in the
// background when its expected reuse r, the number of earlier steps within
// `reuse_window` that routed it (a hot expert is expected back), repays the
// copy: r x (cpu - gpu time of one token) > copy time, and the link's queue
// of background copies, this one included, drains within the previous step's
// time (a background copy must not fall behind; it counts as resident from
// then on, slightly optimistic when the queue is long).
//
// Time per step on the profile (decode is bandwidth-bound, batches compute-
// bound: each side costs its roofline, hybrid_cost.h), per MoE layer
//   gpu  = the layer's experts in VRAM and copied: max(bytes/fast_bps, flops/gpu_flops) each
//   cpu  = its CPU experts: max(bytes/cpu_bps, flops/cpu_flops) each
//   demand = on-demand copies (bytes/link_bps): the GPU waits for them
//   layer = max(gpu + demand, cpu)
// and step = shared_bytes / fast_bps + sum of layers; background copies use
// the link while layers compute (their queue is kept within a step, above). The trace's model is
// mapped onto the profile's as simulate() maps it: each layer's expert costs
// are scaled by profile top-k / trace top-k, the sum of layers by profile MoE
// layers / trace MoE layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/cache_policy.h"

#include "analysis/hardware_profile.h"
#include "experts/trace.h"

namespace strata::experts {

enum class HybridMode { Link, Cpu, Hybrid };
const char* hybrid_mode_name(HybridMode m);  // "transfer-only", "cpu-only", "hybrid"

struct HybridSimOptions {
    HybridMode mode = HybridMode::Hybrid;
    std::string policy = "lru";   // the VRAM cache's policy (an engine policy)
    int64_t cache_slots = 0;      // VRAM slots, in experts of the trace
    int64_t batch = 1;            // sequences decoded together
    int64_t reuse_window = 16;    // steps (as the frequency predictor's window)
    std::vector<ExpertKey> pinned;  // resident in VRAM from the start, never evicted (a static hot set)
};

struct HybridSimResult {
    int64_t steps = 0, tokens = 0;
    int64_t uses = 0, hits = 0;   // token-expert uses; hits: the expert was in VRAM
    // Expert-steps (an expert routed in a step, however many tokens) not in VRAM, by path.
    int64_t cpu = 0, link = 0, both = 0;
    double time_s = 0;            // projected, all steps
    double gpu_s = 0, cpu_s = 0, link_s = 0;  // the parts, summed over layers (before the max)

    int64_t misses() const { return cpu + link + both; }
    double hit_rate() const { return uses ? double(hits) / double(uses) : 0.0; }
    double tok_s() const { return time_s > 0 ? double(tokens) / time_s : 0.0; }
};

// Throws strata::Error for a profile without hybrid figures (cpu-gbs,
// cpu-tflops, gpu-tflops) or without a model, a batch below 1, or an unknown policy.
HybridSimResult simulate_hybrid(const Trace& trace, const HybridSimOptions& options, const HardwareProfile& profile);

}  // namespace strata::experts
