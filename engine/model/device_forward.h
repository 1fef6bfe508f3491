// The seam between the forward pass's bookkeeping (model::Context, runner/context.h: sequences,
// positions, the KV cache's block tables, logits) and a device that computes
// whole chunks in its own memory. On the CPU, Context runs the model's
// architecture (model/arch) over the CPU backend (backend/cpu/cpu_backend.h); the
// CUDA pass (engine/backend/cuda) implements DeviceForward and runs the same
// architecture over its own ops, so Context hands it each chunk without
// knowing which device runs. Observers see the same events whichever device
// computed them. A device's expert cache is an experts::ExpertCache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kv/kv_cache.h"

namespace strata::model {

// What the router chose for one token in one MoE layer.
struct RoutingEvent {
    int64_t layer;
    int64_t pos;               // position of the token in its sequence
    const int32_t* experts;    // n_used expert ids, best first
    const float* weights;      // their combine weights
    int64_t n_used;
    const float* probs;        // softmax over all n_expert experts
    int64_t n_expert;
    kv::SeqId seq = 0;         // the token's sequence
};
using RoutingObserver = std::function<void(const RoutingEvent&)>;

// Cross-layer lookahead: the next MoE layer's router applied to the residual
// stream as it enters this layer's FFN (normalised with the next layer's FFN
// norm), one layer before that router runs. What a prefetcher can know early.
struct LookaheadEvent {
    int64_t layer;             // the MoE layer being predicted
    int64_t pos;
    const float* probs;        // predicted softmax over its n_expert experts
    int64_t n_expert;
    kv::SeqId seq = 0;
};
using LookaheadObserver = std::function<void(const LookaheadEvent&)>;

// One chunk of the forward pass: token i goes to sequence seqs[i] at
// position pos[i] (already appended to the KV cache's tables); logits gets one
// row of n_vocab floats per token with want[i] != 0, in order (null: none wanted).
struct DeviceChunk {
    const int32_t* tokens = nullptr;
    int64_t n = 0;
    const kv::SeqId* seqs = nullptr;
    const int64_t* pos = nullptr;
    const uint8_t* want = nullptr;
    float* logits = nullptr;
    // Where set: every token's normed last hidden state (n x n_embd, what the
    // output head reads), as the CPU's Step::hidden_out (embeddings, an MTP draft).
    float* hidden = nullptr;
};

// What a device's expert cache did (zero where every expert is resident).
struct DeviceExpertStats {
    uint64_t demanded = 0;       // expert uses asked for
    uint64_t hits = 0;           // of them, resident already
    uint64_t bytes_loaded = 0;   // expert bytes copied over the link
    double stall_seconds = 0;    // compute waiting for those copies
    uint64_t cpu_computed = 0;   // expert uses computed on the CPU where their bytes are (no copy)
    // Hybrid placement: each routed expert missing from the device in a step
    // (however many tokens routed it), by the path the cost model chose.
    uint64_t miss_cpu = 0;       // computed on the CPU from host RAM
    uint64_t miss_link = 0;      // copied over the link on demand, computed on the device
    uint64_t miss_both = 0;      // computed on the CPU, and copied in the background for later uses
    // The cost model's rates as they stand (measured at load, refreshed while
    // running); 0 where the placement is not hybrid.
    double link_bps = 0, cpu_bps = 0, cpu_flops = 0;
    uint64_t prefetch_loads = 0; // copies started by prefetch
    uint64_t prefetch_used = 0;  // of them, used before they were evicted
    int64_t slots = 0;           // expert slots on the device
    int64_t experts_total = 0;
    uint64_t slot_bytes = 0;
};

class DeviceForward {
public:
    virtual ~DeviceForward() = default;
    // Runs the chunk on the device. `kv` keeps the block tables (the device
    // keeps the K/V data under the same block ids). Throws strata::Error
    // naming the operation on a device error; the KV cache's tables are the
    // caller's to roll back.
    virtual void run(const DeviceChunk& c, const kv::KvCache& kv, const RoutingObserver& routing,
                     const LookaheadObserver& lookahead) = 0;
    // "cuda:0 NVIDIA H200": the device, for logs and the app.
    virtual std::string name() const = 0;
    virtual DeviceExpertStats expert_stats() const { return {}; }
    // The ops the device leaves to the CPU and what they cost per token
    // (model/op_fallback.h CpuOpsCost::describe); empty when it computes every op.
    virtual std::string cpu_ops() const { return {}; }
};

}  // namespace strata::model
