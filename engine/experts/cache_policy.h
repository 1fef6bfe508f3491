// Expert cache replacement policies behind one interface, shared by the real
// expert store (engine/experts/expert_store.h) and the trace simulator, so a
// policy measured in simulation is exactly the policy that runs.
//
// Keys identify one expert of one layer: key = layer * n_expert + expert.
// The store owns residency; a policy only keeps the bookkeeping it needs to
// rank residents for eviction. Pinned experts and experts in use by the
// current layer are never offered as victims (the store filters them through
// `evictable`).
//
// Cost: every call is O(1) (LRU, ARC) or O(log n) (LFU), except victim(),
// which walks past the entries the filter refuses: O(1 + refused). Keeping
// long-term pinned experts out of the policy (on_remove when pinned,
// on_insert when unpinned) keeps victim() O(1); the filter is then only for
// the transient exclusions (in use, loading, prefetched for the next layer).
//
// Call protocol (what the simulator and the store do):
//   use of a resident expert      -> on_hit
//   use of an absent expert       -> on_miss, then victim/on_remove as needed, then on_insert
//   prefetch of an absent expert  -> victim/on_remove as needed, then on_prefetch_insert
//   one decoded token finished    -> on_step
//   cache resized                 -> set_capacity (then victim/on_remove until it fits)
// `capacity` is the number of slots the policy manages (slots - pinned when
// pinned experts are kept out of it; all slots when they are filtered).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace strata::experts {

using ExpertKey = uint32_t;

class EvictableFilter {
public:
    virtual ~EvictableFilter() = default;
    virtual bool evictable(ExpertKey key) const = 0;
};

class CachePolicy {
public:
    virtual ~CachePolicy() = default;
    virtual const char* name() const = 0;

    // A resident expert was used.
    virtual void on_hit(ExpertKey key) = 0;
    // A miss: called before the store makes room and inserts (ARC uses its
    // ghost lists here to adapt).
    virtual void on_miss(ExpertKey key) { (void)key; }
    // The expert became resident.
    virtual void on_insert(ExpertKey key) = 0;
    // The expert became resident by a prefetch, not by a use: the predictor
    // expects a use soon. LRU treats it as a use; LFU and ARC count the first
    // real use (the next on_hit) as its first reference, so a wrong prediction
    // never looks frequent. Default: on_insert.
    virtual void on_prefetch_insert(ExpertKey key) { on_insert(key); }
    // The expert left the cache (evicted, or removed by a resize).
    virtual void on_remove(ExpertKey key) = 0;
    // One decode step finished (LFU ages its counts here).
    virtual void on_step() {}
    // The resident expert to evict next, among those `filter` allows; nullopt
    // if none may go.
    virtual std::optional<ExpertKey> victim(const EvictableFilter& filter) = 0;
    // Capacity in experts changed (ARC's target sizes depend on it).
    virtual void set_capacity(int64_t n_slots) { (void)n_slots; }

    // The residents the policy tracks, the first to be evicted first (no
    // filter applied). O(n): for handing residency to another policy at run
    // time (insert them into the new one in this order) and for tests.
    // Default: empty (unknown).
    virtual std::vector<ExpertKey> eviction_order() const { return {}; }
    // Number of residents tracked.
    virtual int64_t size() const { return static_cast<int64_t>(eviction_order().size()); }
};

struct PolicyOptions {
    // "lfu": exponential decay of use counts, in decode steps: a use counts
    // 2^-(age / half_life). 0 = no aging (plain LFU).
    double lfu_half_life = 128.0;
};

// Known names: "lru", "lfu" (with aging), "arc". The pinned-hot behaviour is
// not a policy of its own: pinning (from a calibration file) works with every
// policy, and "pinned" selects LRU for the unpinned remainder.
// Throws strata::Error for an unknown name (listing the known ones).
std::unique_ptr<CachePolicy> make_policy(const std::string& name, int64_t capacity);
std::unique_ptr<CachePolicy> make_policy(const std::string& name, int64_t capacity, const PolicyOptions& options);
std::vector<std::string> policy_names();  // for --help and settings validation
// One line per policy: what it does (for --help).
std::string policy_help();

}  // namespace strata::experts
