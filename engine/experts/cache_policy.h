// Expert cache replacement policies behind one interface, shared by the real
// expert store (engine/experts/expert_store.h) and the trace simulator, so a
// policy measured in simulation is exactly the policy that runs.
//
// Keys identify one expert of one layer: key = layer * n_expert + expert.
// The store owns residency; a policy only keeps the bookkeeping it needs to
// rank residents for eviction. Pinned experts and experts in use by the
// current layer are never offered as victims (the store filters them through
// `evictable`).
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
    // The expert left the cache (evicted, or removed by a resize).
    virtual void on_remove(ExpertKey key) = 0;
    // One decode step finished (LFU ages its counts here).
    virtual void on_step() {}
    // The resident expert to evict next, among those `filter` allows; nullopt
    // if none may go.
    virtual std::optional<ExpertKey> victim(const EvictableFilter& filter) = 0;
    // Capacity in experts changed (ARC's target sizes depend on it).
    virtual void set_capacity(int64_t slots) { (void)slots; }
};

// Known names: "lru", "lfu" (with aging), "arc". The pinned-hot behaviour is
// not a policy of its own: pinning (from a calibration file) works with every
// policy, and "pinned" selects LRU for the unpinned remainder.
std::unique_ptr<CachePolicy> make_policy(const std::string& name, int64_t capacity);
std::vector<std::string> policy_names();  // for --help and settings validation

}  // namespace strata::experts
