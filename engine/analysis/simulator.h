// Trace replay: a cache policy, a number of slots, an optional pinned set and
// an optional predictor run over a recorded routing trace (trace.h), giving
// hit rate, loads per token, prefetch precision and recall; project() turns
// those into bytes moved and tokens/s on a hardware profile.
//
// Replay model. Every token of the trace is replayed as one decode step, in
// (sequence, position) order: a causal model routes a token the same whether
// it ran in a prefill chunk or alone, so this is exactly the routing of
// decoding that text one token at a time. (Batching, where one load serves
// several tokens, is not modelled.) Per token, per MoE layer in order:
//   1. the layer's experts are protected (in use), then each is used: pinned
//      or resident = hit (a resident that was prefetched and not yet used
//      counts as a prefetch hit), else a demand miss: the policy picks a
//      victim among unprotected residents and the expert is loaded;
//   2. the predictor sees the routing, then predicts the next MoE layer (the
//      first MoE layer of the next token after the last one), with that
//      layer's lookahead when the trace has it; each predicted expert not
//      resident is loaded as a prefetch (victims exclude this layer's experts
//      and earlier prefetches still waiting for their layer);
//   3. protections of this layer and of the prefetches made for it end.
// After each token the policy's on_step() runs (LFU aging).
// The cache is one pool of slots for all MoE layers (key = layer * n_expert
// + expert); pinned experts hold slots of that pool and are never evicted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "experts/cache_policy.h"
#include "analysis/hardware_profile.h"
#include "experts/predictor.h"
#include "experts/trace.h"

namespace strata::experts {

// The residency bookkeeping of an expert cache without the bytes: which
// experts hold slots, which are pinned, which may not be evicted now, and the
// policy ranking the rest. Policy, size and pinning change at run time, as in
// the store: the residents stay, the new policy learns them in the old one's
// eviction order.
class SlotCache final : private EvictableFilter {
public:
    enum class Use : uint8_t {
        Hit,          // resident
        PinnedHit,    // pinned
        PrefetchHit,  // resident because of a prefetch, first use since
        Miss,         // loaded on demand
        Streamed,     // loaded on demand but no slot could be freed (used once, not kept)
    };
    SlotCache(const std::string& policy, int64_t n_slots, const PolicyOptions& options = {});
    // With a policy made by the caller (the simulator's "opt", which needs the trace).
    SlotCache(std::unique_ptr<CachePolicy> policy, int64_t n_slots);

    // Marks `keys` in use for the current layer (never evicted until end_layer).
    void begin_layer(std::span<const ExpertKey> keys);
    // A use of `key` by the forward pass.
    Use use(ExpertKey key);
    // Loads `key` ahead of its use if absent and a slot can be freed; it stays
    // protected until the end of the layer after the current one. Returns
    // true when it was loaded.
    bool prefetch(ExpertKey key);
    // Ends the current layer: its experts and the prefetches made for it may go.
    void end_layer();
    // One decoded token finished.
    void on_step() { policy_->on_step(); }

    // Run-time changes (between layers). Throw strata::Error when impossible.
    void set_slots(int64_t n_slots);
    void set_policy(const std::string& name, const PolicyOptions& options = {});
    void set_pinned(std::vector<ExpertKey> keys);

    bool resident(ExpertKey k) const { return state(k) != kAbsent; }
    bool pinned(ExpertKey k) const { return state(k) == kPinned; }
    int64_t n_slots() const { return slots_; }
    int64_t n_pinned() const { return n_pinned_; }
    int64_t n_resident() const { return n_pinned_ + n_policy_; }
    const CachePolicy& policy() const { return *policy_; }
    // Residents, pinned first then the policy's eviction order.
    std::vector<ExpertKey> residents() const;

    int64_t evictions() const { return evictions_; }
    int64_t prefetch_evicted_unused() const { return prefetch_evicted_unused_; }
    int64_t pin_loads() const { return pin_loads_; }

private:
    static constexpr uint8_t kAbsent = 0, kResident = 1, kPinned = 2;
    bool evictable(ExpertKey k) const override { return k >= protect_.size() || protect_[k] == 0; }
    uint8_t state(ExpertKey k) const { return k < state_.size() ? state_[k] : kAbsent; }
    void grow(ExpertKey k);
    int64_t policy_capacity() const { return slots_ - n_pinned_; }
    bool make_room();  // frees a slot for one more policy resident; false when none may go
    void evict(ExpertKey k);
    void trim();       // evicts until the residents fit (ignores protection if it must)
    void protect(ExpertKey k) {
        grow(k);
        ++protect_[k];
    }

    std::unique_ptr<CachePolicy> policy_;
    int64_t slots_ = 0;
    int64_t n_pinned_ = 0, n_policy_ = 0;
    std::vector<uint8_t> state_, prefetched_unused_;
    std::vector<uint16_t> protect_;  // protections held (in use, prefetched for a layer)
    std::vector<ExpertKey> in_use_, pf_current_, pf_next_;
    int64_t evictions_ = 0, prefetch_evicted_unused_ = 0, pin_loads_ = 0;
};

// The simulator's extra policy, beside the engine's (cache_policy.h):
// "opt" is Belady's MIN: evict the resident whose next use lies furthest in
// the future. It reads the trace ahead, so no running engine can use it; it
// is the bound on the hit rate (and the least number of loads) any eviction
// policy can reach for a cache size, without prefetch. With a predictor it is
// MIN's eviction under that predictor's prefetches.
inline constexpr const char* kOptPolicy = "opt";

struct SimOptions {
    std::string policy = "lru";     // an engine policy, or kOptPolicy
    PolicyOptions policy_options;
    int64_t cache_slots = 0;         // cache size in experts of the trace, pinned included
    std::vector<ExpertKey> pinned;   // key = layer * n_expert + expert; resident from the start
    PredictorOptions predictor;      // strategy "none": no prefetch
    bool decode_only = false;        // measure only tokens recorded as decode steps (all are replayed)
};

struct SimResult {
    int64_t tokens = 0;          // measured tokens
    int64_t uses = 0;            // expert uses (tokens x MoE layers x n_used)
    int64_t hits = 0;            // all hits: resident, pinned or prefetched
    int64_t pinned_hits = 0;
    int64_t prefetch_hits = 0;   // hits on an expert a prefetch loaded (first use)
    int64_t misses = 0;          // demand loads (streamed ones included)
    int64_t streamed = 0;        // ... that found no slot to keep the expert in
    int64_t prefetch_loads = 0;
    int64_t prefetch_evicted_unused = 0;
    int64_t evictions = 0;
    int64_t pin_loads = 0;       // one-time loads of the pinned set (not per token)
    int64_t cache_slots = 0, pinned = 0, total_experts = 0;
    int64_t moe_layers = 0, n_used = 0;
    PredictionCounts prediction;

    double hit_rate() const { return uses ? double(hits) / double(uses) : 0.0; }
    double misses_per_token() const { return tokens ? double(misses) / double(tokens) : 0.0; }
    double prefetch_per_token() const { return tokens ? double(prefetch_loads) / double(tokens) : 0.0; }
    double loads_per_token() const { return misses_per_token() + prefetch_per_token(); }
    // Fraction of prefetch loads that were used before eviction.
    double prefetch_accuracy() const { return prefetch_loads ? double(prefetch_hits) / double(prefetch_loads) : 0.0; }
};

// Replays the trace. Throws strata::Error for impossible options (more pinned
// experts than slots, a pinned key outside the trace's MoE layers, ...).
SimResult simulate(const Trace& trace, const SimOptions& options);

// Projected decode speed on a profile (its model figures filled). Per token:
//   compute  = (shared_bytes + uses_per_token * expert_bytes) / fast_bps
//              (decode is bandwidth-bound: every active byte is read once)
//   demand   = demand misses * expert_bytes / link_bps   (stalls: cannot overlap)
//   prefetch = prefetch loads * expert_bytes / link_bps  (overlaps compute)
//   time     = compute + demand + max(0, prefetch - compute)     (overlap)
//            = compute + demand + prefetch                        (no overlap)
// Scaling from the trace's model to the profile's: the measured per-use
// rates are kept, i.e. misses and prefetch loads per token are multiplied by
//   scale = (profile moe_layers * n_used) / (trace moe_layers * n_used)
// (= profile MoE layers / trace MoE layers when top-k matches); the cache
// size is the same fraction of all experts (the caller scales slots).
struct Projection {
    double scale = 1;              // profile uses per token / trace uses per token
    double uses_per_token = 0;     // profile
    double misses_per_token = 0;   // profile, demand
    double prefetch_per_token = 0; // profile
    double link_bytes_per_token = 0;
    double compute_s = 0, demand_s = 0, prefetch_s = 0, time_s = 0;
    double tok_s = 0;
    double max_tok_s = 0;          // every expert resident: 1 / compute
};
Projection project(const SimResult& r, const HardwareProfile& profile, bool overlap = true);

// The hit rate a profile needs for `target_tok_s`:
//   stall:   every miss is a demand miss (no prefetch):
//            misses <= (1/target - compute) * link_bps / expert_bytes
//   overlap: every miss is prefetched in time and hidden behind compute
//            (DESIGN.md §1's bound): misses <= link_bps / (target * expert_bytes)
// hit rate = 1 - misses / uses_per_token; > 1 (reported as unreachable)
// when even an all-hit token is too slow.
struct TargetHitRates {
    double stall = 0;
    double overlap = 0;
    bool reachable = true;  // compute alone fits in 1/target
};
TargetHitRates hit_rate_needed(const HardwareProfile& profile, double target_tok_s);

// The `n` most used experts of `counts` (key = layer * n_expert + expert),
// most used first, ties by key; experts never used are not chosen.
std::vector<ExpertKey> hottest_experts(const std::vector<int64_t>& counts, int64_t n);

// Expert use counts for pinning, from a calibration file: a routing trace, a
// 'strata-cli calibrate' JSON file (its "counts"), or text lines
// "LAYER EXPERT COUNT" ('#' starts a comment). Keys and shape come from
// `header` (the trace being simulated); throws strata::Error for a file that
// does not match it.
std::vector<int64_t> read_calibration(const std::string& path, const TraceHeader& header);

}  // namespace strata::experts
