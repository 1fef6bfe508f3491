// ARC adapted to a store that owns residency; see policies.h. The paper's
// REPLACE(x, p) is victim(); its case IV directory bookkeeping is on_miss();
// moving the victim to a ghost list is on_remove().
#include <algorithm>

#include "experts/policies.h"

namespace strata::experts {

uint8_t& ArcPolicy::flags(ExpertKey k) {
    if (k >= flags_.size()) flags_.resize(std::max<size_t>(static_cast<size_t>(k) + 1, flags_.size() * 2), 0);
    return flags_[k];
}

void ArcPolicy::adapt(bool ghost_in_b1) {
    const double b1 = static_cast<double>(lists_.size(kB1));
    const double b2 = static_cast<double>(lists_.size(kB2));
    if (ghost_in_b1) p_ = std::min(static_cast<double>(c_), p_ + std::max(1.0, b1 > 0 ? b2 / b1 : 1.0));
    else p_ = std::max(0.0, p_ - std::max(1.0, b2 > 0 ? b1 / b2 : 1.0));
}

void ArcPolicy::trim() {
    // |T1| + |B1| <= c and |T1| + |T2| + |B1| + |B2| <= 2c; ghosts go first.
    while (lists_.size(kT1) + lists_.size(kB1) > c_ && lists_.size(kB1) > 0) lists_.remove(lists_.back(kB1));
    while (size() + lists_.size(kB1) + lists_.size(kB2) > 2 * c_) {
        if (lists_.size(kB2) > 0) lists_.remove(lists_.back(kB2));
        else if (lists_.size(kB1) > 0) lists_.remove(lists_.back(kB1));
        else break;
    }
}

void ArcPolicy::on_hit(ExpertKey k) {
    const uint8_t l = lists_.which(k);
    if (l != kT1 && l != kT2) {  // not tracked (should not happen): treat as a fresh insert
        on_insert(k);
        return;
    }
    uint8_t& f = flags(k);
    if (f & kPrefetchAny) {
        const uint8_t was = f;
        f &= static_cast<uint8_t>(~kPrefetchAny);
        if (was & kPrefetchNew) {  // first reference: stays a T1 resident
            lists_.move_front(kT1, k);
            return;
        }
        // It came back from a ghost list by a prefetch; now that it is used,
        // adapt as the ghost hit would have (case II / III).
        adapt((was & kPrefetchB1) != 0);
        lists_.move_front(kT2, k);
        return;
    }
    lists_.move_front(kT2, k);  // case I
}

void ArcPolicy::on_miss(ExpertKey k) {
    const uint8_t l = lists_.which(k);
    if (l == kB1 || l == kB2) {  // case II / III
        adapt(l == kB1);
        lists_.remove(k);
        flags(k) |= kPendingT2;
        last_from_b2_ = l == kB2;
        return;
    }
    last_from_b2_ = false;
    if (l == kT1 || l == kT2) return;  // a resident "miss" (store streaming it): nothing to learn
    // Case IV: keep the directory within bounds before the victim goes to a ghost list.
    if (lists_.size(kT1) + lists_.size(kB1) >= c_) {
        if (lists_.size(kB1) > 0) lists_.remove(lists_.back(kB1));
    } else if (size() + lists_.size(kB1) + lists_.size(kB2) >= 2 * c_ && lists_.size(kB2) > 0) {
        lists_.remove(lists_.back(kB2));
    }
}

void ArcPolicy::on_insert(ExpertKey k) {
    const uint8_t l = lists_.which(k);
    uint8_t& f = flags(k);
    if (l == kT1 || l == kT2) {  // already resident: a use
        on_hit(k);
        return;
    }
    if (l == kB1 || l == kB2) {  // inserted without on_miss (handover, unpin): forget the ghost
        lists_.remove(k);
        f |= kPendingT2;
    }
    const bool to_t2 = (f & kPendingT2) != 0;
    f = 0;
    lists_.push_front(to_t2 ? kT2 : kT1, k);
    trim();
}

void ArcPolicy::on_prefetch_insert(ExpertKey k) {
    const uint8_t l = lists_.which(k);
    if (l == kT1 || l == kT2) return;  // already resident: a prediction is not a use
    uint8_t& f = flags(k);
    f = kPrefetchNew;
    if (l == kB1) f = kPrefetchB1;
    if (l == kB2) f = kPrefetchB2;
    lists_.remove(k);
    lists_.push_front(kT1, k);
    trim();
}

void ArcPolicy::on_remove(ExpertKey k) {
    const uint8_t l = lists_.which(k);
    if (l != kT1 && l != kT2) return;
    uint8_t& f = flags(k);
    lists_.remove(k);
    uint8_t ghost = l == kT1 ? kB1 : kB2;
    if (f & kPrefetchNew) ghost = KeyedLists::kNone;  // never referenced: no ghost
    if (f & kPrefetchB1) ghost = kB1;                 // back where it was
    if (f & kPrefetchB2) ghost = kB2;
    f = 0;
    if (ghost != KeyedLists::kNone) lists_.push_front(ghost, k);
    trim();
}

std::optional<ExpertKey> ArcPolicy::victim(const EvictableFilter& filter) {
    const double t1 = static_cast<double>(lists_.size(kT1));
    const bool t1_first = t1 > 0 && (t1 > p_ || (last_from_b2_ && t1 >= p_));
    const uint8_t order[2] = {t1_first ? kT1 : kT2, t1_first ? kT2 : kT1};
    for (uint8_t l : order)
        for (uint32_t k = lists_.back(l); k != KeyedLists::kNil; k = lists_.newer(k))
            if (filter.evictable(k)) return k;
    return std::nullopt;
}

void ArcPolicy::set_capacity(int64_t n_slots) {
    c_ = std::max<int64_t>(0, n_slots);
    p_ = std::min(p_, static_cast<double>(c_));
    trim();
}

std::vector<ExpertKey> ArcPolicy::eviction_order() const {
    // Recency residents first (the side a scan fills), then the frequent ones.
    std::vector<ExpertKey> out;
    out.reserve(static_cast<size_t>(size()));
    lists_.append_oldest_first(kT1, out);
    lists_.append_oldest_first(kT2, out);
    return out;
}

}  // namespace strata::experts
