// The fast tier's cache of routed experts, whichever device holds it: the
// expert store in RAM (expert_store.h) or the GPU's VRAM slots
// (engine/backend/cuda). What the engine, its settings and the panels see of
// a cache; the forward pass reaches the experts through its own seam
// (model::ExpertProvider on the CPU, the CUDA pass's slots on a GPU).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "experts/cache_policy.h"

namespace strata::experts {

struct ExpertStoreStats {
    uint64_t demanded = 0;        // expert uses by the forward pass
    uint64_t hits = 0;            // ... found resident (or already loading) when demanded
    uint64_t demand_loads = 0;    // loads issued because the forward pass needed the expert
    uint64_t prefetch_loads = 0;  // loads issued by prefetch
    uint64_t prefetch_used = 0;   // prefetched experts used before eviction
    uint64_t prefetch_dropped = 0;// prefetch requests dropped (no room, or superseded)
    uint64_t evictions = 0;
    uint64_t bytes_loaded = 0;
    uint64_t bytes_repacked = 0;  // rewritten in place into the CPU kernels' layout (model::repack_for_kernels)
    uint64_t slots_moved = 0;     // cached experts moved to a lower cell when the cache shrank
    double stall_seconds = 0.0;   // forward pass blocked waiting for loads
    double hit_rate() const { return demanded ? double(hits) / double(demanded) : 0.0; }
};

// OnCpu: on a GPU, computed on the CPU from host RAM in the last ~32 steps
// (hybrid placement or a --cpu-moe layer), not resident in VRAM.
enum class Residency : uint8_t { Absent = 0, Loading = 1, Resident = 2, Pinned = 3, OnCpu = 4 };

class ExpertCache {
public:
    virtual ~ExpertCache() = default;
    // "RAM" or "VRAM": where its slots are.
    virtual std::string where() const = 0;
    // The experts predicted for `layer` (keys layer * n_expert + expert, best
    // first; they may reach past it). Starts loads behind the demand loads; a
    // cache may take fewer (the GPU's takes those of `layer` into slots that
    // no expert of `layer` needs).
    virtual void prefetch(int64_t layer, std::span<const ExpertKey> keys) = 0;
    virtual ExpertStoreStats stats() const = 0;
    // Per key (every layer's experts, MoE or not): where the expert is.
    virtual std::vector<Residency> residency() const = 0;
    virtual int64_t slots() const = 0;
    virtual int64_t experts_total() const = 0;  // routed experts over all MoE layers
    virtual uint64_t slot_bytes() const = 0;
    // Live changes, between steps. Each throws strata::Error, changing
    // nothing, where it cannot apply now, saying when it applies.
    virtual void set_slots(int64_t slots) = 0;
    virtual void set_policy(const std::string& name) = 0;
    virtual void set_pinned(std::vector<ExpertKey> keys) = 0;
    // Returns once no load it started is in flight.
    virtual void wait_idle() = 0;
};

}  // namespace strata::experts
