#include "experts/policies.h"

namespace strata::experts {

std::optional<ExpertKey> LruPolicy::victim(const EvictableFilter& filter) {
    for (uint32_t k = lists_.back(kList); k != KeyedLists::kNil; k = lists_.newer(k))
        if (filter.evictable(k)) return k;
    return std::nullopt;
}

std::vector<ExpertKey> LruPolicy::eviction_order() const {
    std::vector<ExpertKey> out;
    out.reserve(static_cast<size_t>(lists_.size(kList)));
    lists_.append_oldest_first(kList, out);
    return out;
}

}  // namespace strata::experts
