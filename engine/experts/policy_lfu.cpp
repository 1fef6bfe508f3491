#include <cmath>

#include "common/error.h"
#include "experts/policies.h"

namespace strata::experts {

namespace {
// Renormalise when the per-use weight reaches 2^512 (scores stay far from
// overflow; dividing by a power of two keeps every order exactly).
constexpr double kRenormExponent = 512.0;
constexpr ExpertKey kMaxKey = 1u << 24;
}  // namespace

LfuPolicy::Entry& LfuPolicy::entry(ExpertKey k) {
    if (k >= entry_.size()) {
        if (k >= kMaxKey) throw Error("expert key " + std::to_string(k) + " is out of range (layer * n_expert + expert)");
        entry_.resize(std::max<size_t>(static_cast<size_t>(k) + 1, entry_.size() * 2));
    }
    return entry_[k];
}

void LfuPolicy::on_miss(ExpertKey k) {
    Entry& e = entry(k);
    if (e.present) return;  // a resident "miss" (the store streams it): the hit path counts
    e.score += weight_;
    e.counted = true;
}

void LfuPolicy::insert(ExpertKey k, bool prefetched) {
    Entry& e = entry(k);
    if (e.present) order_.erase({e.score, e.tick, k});
    if (!e.counted) e.score += weight_;  // a prefetch, a handover or an unpin: one use
    e.counted = false;
    e.present = true;
    e.prefetched = prefetched;
    e.tick = ++tick_;
    order_.insert({e.score, e.tick, k});
}

void LfuPolicy::on_hit(ExpertKey k) {
    Entry& e = entry(k);
    if (!e.present) {
        insert(k, false);
        return;
    }
    order_.erase({e.score, e.tick, k});
    if (e.prefetched) e.prefetched = false;  // the prefetch already counted this use
    else e.score += weight_;
    e.tick = ++tick_;
    order_.insert({e.score, e.tick, k});
}

void LfuPolicy::on_remove(ExpertKey k) {
    if (k >= entry_.size() || !entry_[k].present) return;
    Entry& e = entry_[k];
    order_.erase({e.score, e.tick, k});
    e.present = false;
    e.prefetched = false;
    e.counted = false;  // keeps its score: the history
}

void LfuPolicy::on_step() {
    if (half_life_ <= 0) return;
    ++steps_since_base_;
    const double exponent = static_cast<double>(steps_since_base_) / half_life_;
    if (exponent >= kRenormExponent) {
        renormalise();
        return;
    }
    weight_ = std::exp2(exponent);
}

void LfuPolicy::renormalise() {
    // Divide every score, resident or history, by the current weight: the
    // weight returns to 1 and every score keeps its decayed value; order is
    // unchanged. O(keys), once every 512 half-lives.
    const double w = std::exp2(static_cast<double>(steps_since_base_) / half_life_);
    for (Entry& e : entry_) e.score /= w;
    std::set<Rank> fresh;
    for (const Rank& r : order_) fresh.insert({entry_[std::get<2>(r)].score, std::get<1>(r), std::get<2>(r)});
    order_.swap(fresh);
    steps_since_base_ = 0;
    weight_ = 1.0;
}

double LfuPolicy::score(ExpertKey k) const {
    if (k >= entry_.size()) return 0.0;
    return entry_[k].score / weight_;
}

std::optional<ExpertKey> LfuPolicy::victim(const EvictableFilter& filter) {
    for (const Rank& r : order_)
        if (filter.evictable(std::get<2>(r))) return std::get<2>(r);
    return std::nullopt;
}

std::vector<ExpertKey> LfuPolicy::eviction_order() const {
    std::vector<ExpertKey> out;
    out.reserve(order_.size());
    for (const Rank& r : order_) out.push_back(std::get<2>(r));
    return out;
}

}  // namespace strata::experts
