#include "experts/cache_policy.h"

#include "common/error.h"
#include "experts/policies.h"

namespace strata::experts {

namespace {
// Dense keys: layer * n_expert + expert. A key far beyond any model's size is
// a caller's bug, not a reason to allocate gigabytes.
constexpr ExpertKey kMaxKey = 1u << 24;
}  // namespace

void KeyedLists::ensure(ExpertKey k) {
    if (k < list_.size()) return;
    if (k >= kMaxKey) throw Error("expert key " + std::to_string(k) + " is out of range (layer * n_expert + expert)");
    const size_t n = std::max<size_t>(static_cast<size_t>(k) + 1, list_.size() * 2);
    prev_.resize(n, kNil);
    next_.resize(n, kNil);
    list_.resize(n, kNone);
}

void KeyedLists::push_front(uint8_t l, ExpertKey k) {
    ensure(k);
    List& L = lists_[l];
    prev_[k] = kNil;
    next_[k] = L.head;
    if (L.head != kNil) prev_[L.head] = k;
    L.head = k;
    if (L.tail == kNil) L.tail = k;
    list_[k] = l;
    ++L.size;
}

void KeyedLists::remove(ExpertKey k) {
    const uint8_t l = which(k);
    if (l == kNone) return;
    List& L = lists_[l];
    if (prev_[k] != kNil) next_[prev_[k]] = next_[k];
    else L.head = next_[k];
    if (next_[k] != kNil) prev_[next_[k]] = prev_[k];
    else L.tail = prev_[k];
    prev_[k] = next_[k] = kNil;
    list_[k] = kNone;
    --L.size;
}

void KeyedLists::append_oldest_first(uint8_t l, std::vector<ExpertKey>& out) const {
    for (uint32_t k = lists_[l].tail; k != kNil; k = prev_[k]) out.push_back(k);
}

std::vector<std::string> policy_names() { return {"lru", "lfu", "arc", "pinned"}; }

std::string policy_help() {
    return "  lru       least recently used\n"
           "  lfu       least frequently used, uses decaying with a half-life (in decode steps); counts\n"
           "            survive eviction, so a returning hot expert keeps its rank\n"
           "  arc       adaptive replacement cache (Megiddo & Modha): recency and frequency lists sized\n"
           "            by ghost-list hits; scan resistant\n"
           "  pinned    the hottest experts of a calibration pinned, LRU for the remaining slots";
}

std::unique_ptr<CachePolicy> make_policy(const std::string& name, int64_t capacity) {
    return make_policy(name, capacity, PolicyOptions{});
}

std::unique_ptr<CachePolicy> make_policy(const std::string& name, int64_t capacity, const PolicyOptions& options) {
    if (name == "lru") return std::make_unique<LruPolicy>("lru");
    if (name == "pinned") return std::make_unique<LruPolicy>("pinned");
    if (name == "lfu") {
        if (!(options.lfu_half_life >= 0)) throw Error("lfu: the half-life must be >= 0 steps (0 = no aging)");
        return std::make_unique<LfuPolicy>(options.lfu_half_life);
    }
    if (name == "arc") return std::make_unique<ArcPolicy>(capacity);
    std::string known;
    for (const std::string& n : policy_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown cache policy '" + name + "' (known: " + known + ")");
}

}  // namespace strata::experts
