// The cache policies behind CachePolicy (cache_policy.h), visible for tests
// and for code that wants a policy's own figures (ARC's target size).
//
// Keys are dense small integers (layer * n_expert + expert), so every policy
// keeps its per-key state in arrays indexed by key: no hashing, no allocation
// per operation once the arrays have grown to the largest key.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "experts/cache_policy.h"

namespace strata::experts {

// Up to 4 intrusive doubly-linked lists over dense keys; a key is in at most
// one list. front = most recent. All operations O(1).
class KeyedLists {
public:
    static constexpr uint32_t kNil = 0xffffffffu;
    static constexpr uint8_t kNone = 0;

    uint8_t which(ExpertKey k) const { return k < list_.size() ? list_[k] : kNone; }
    int64_t size(uint8_t l) const { return lists_[l].size; }
    ExpertKey front(uint8_t l) const { return lists_[l].head; }
    ExpertKey back(uint8_t l) const { return lists_[l].tail; }
    // Toward the front (more recent); kNil at the end.
    uint32_t newer(ExpertKey k) const { return prev_[k]; }
    uint32_t older(ExpertKey k) const { return next_[k]; }

    void push_front(uint8_t l, ExpertKey k);  // k must be in no list
    void remove(ExpertKey k);                 // no-op if in no list
    void move_front(uint8_t l, ExpertKey k) {
        remove(k);
        push_front(l, k);
    }
    // Keys of list l from back (oldest) to front.
    void append_oldest_first(uint8_t l, std::vector<ExpertKey>& out) const;

private:
    struct List {
        uint32_t head = kNil, tail = kNil;
        int64_t size = 0;
    };
    void ensure(ExpertKey k);
    std::array<List, 5> lists_{};
    std::vector<uint32_t> prev_, next_;
    std::vector<uint8_t> list_;
};

// Least recently used. "pinned" is this with another name (pins live in the store).
class LruPolicy final : public CachePolicy {
public:
    explicit LruPolicy(const char* name = "lru") : name_(name) {}
    const char* name() const override { return name_; }
    void on_hit(ExpertKey k) override { lists_.move_front(kList, k); }
    void on_insert(ExpertKey k) override { lists_.move_front(kList, k); }
    void on_remove(ExpertKey k) override { lists_.remove(k); }
    std::optional<ExpertKey> victim(const EvictableFilter& filter) override;
    std::vector<ExpertKey> eviction_order() const override;
    int64_t size() const override { return lists_.size(kList); }

private:
    static constexpr uint8_t kList = 1;
    const char* name_;
    KeyedLists lists_;
};

// Least frequently used with aging. Each use adds 2^(step / half_life) to the
// expert's score, so at any step the score equals sum over its uses of
// 2^-(age in steps / half_life): exponential decay without touching every
// entry per step (scores are renormalised, order-preserving, before they
// overflow). Victim: the lowest score; ties go to the least recently used.
// Uses are counted for every expert, resident or not (on_hit and on_miss):
// an evicted expert keeps its decayed history, so a hot expert that comes
// back is not the next victim, and a burst of experts that briefly looked
// frequent cannot lock the hot ones out (in-cache-only LFU does exactly that).
// A prefetched expert enters with one use; its first real use adds nothing.
// An expert inserted without a miss (policy handover, unpinning) gets one use.
class LfuPolicy final : public CachePolicy {
public:
    explicit LfuPolicy(double half_life_steps) : half_life_(half_life_steps) {}
    const char* name() const override { return "lfu"; }
    void on_hit(ExpertKey k) override;
    void on_miss(ExpertKey k) override;
    void on_insert(ExpertKey k) override { insert(k, false); }
    void on_prefetch_insert(ExpertKey k) override { insert(k, true); }
    void on_remove(ExpertKey k) override;
    void on_step() override;
    std::optional<ExpertKey> victim(const EvictableFilter& filter) override;
    std::vector<ExpertKey> eviction_order() const override;
    int64_t size() const override { return static_cast<int64_t>(order_.size()); }

    // The decayed use count of an expert, resident or not (uses, each weighted by its age).
    double score(ExpertKey k) const;

private:
    struct Entry {
        double score = 0;
        uint64_t tick = 0;
        bool present = false;
        bool prefetched = false;  // resident by a prefetch, not used since
        bool counted = false;     // on_miss counted the use the coming insert is for
    };
    Entry& entry(ExpertKey k);
    void insert(ExpertKey k, bool prefetched);
    void renormalise();
    using Rank = std::tuple<double, uint64_t, ExpertKey>;
    double half_life_;
    double weight_ = 1.0;     // 2^((step - base) / half_life)
    int64_t steps_since_base_ = 0;
    uint64_t tick_ = 0;
    std::vector<Entry> entry_;
    std::set<Rank> order_;
};

// Adaptive Replacement Cache (Megiddo & Modha, FAST 2003). Residents are in
// T1 (seen once recently) or T2 (seen at least twice); B1 and B2 remember the
// keys recently evicted from each (ghosts, no data). A miss that hits B1 means
// T1 was too small: the target p for |T1| grows; a B2 hit shrinks it. A scan
// of one-time keys only churns T1, so the frequent set in T2 survives.
// Adapted to the store: REPLACE is victim(), which takes the LRU end of the
// list p designates, skipping what the filter refuses, and falls back to the
// other list; ghost-list sizes are kept within |T1|+|B1| <= c and the whole
// directory within 2c. A prefetched expert enters T1 flagged: its first use
// keeps it in T1 (first reference), or, if it came back from a ghost list,
// adapts p and promotes it as that ghost hit would have. Evicted unused
// prefetches leave no ghost (they were never referenced).
class ArcPolicy final : public CachePolicy {
public:
    explicit ArcPolicy(int64_t capacity) : c_(capacity < 0 ? 0 : capacity) {}
    const char* name() const override { return "arc"; }
    void on_hit(ExpertKey k) override;
    void on_miss(ExpertKey k) override;
    void on_insert(ExpertKey k) override;
    void on_prefetch_insert(ExpertKey k) override;
    void on_remove(ExpertKey k) override;
    std::optional<ExpertKey> victim(const EvictableFilter& filter) override;
    void set_capacity(int64_t n_slots) override;
    std::vector<ExpertKey> eviction_order() const override;
    int64_t size() const override { return lists_.size(kT1) + lists_.size(kT2); }

    double target_t1() const { return p_; }
    int64_t t1() const { return lists_.size(kT1); }
    int64_t t2() const { return lists_.size(kT2); }
    int64_t b1() const { return lists_.size(kB1); }
    int64_t b2() const { return lists_.size(kB2); }
    bool in_t2(ExpertKey k) const { return lists_.which(k) == kT2; }
    bool is_ghost(ExpertKey k) const { return lists_.which(k) == kB1 || lists_.which(k) == kB2; }

private:
    static constexpr uint8_t kT1 = 1, kT2 = 2, kB1 = 3, kB2 = 4;
    // Per-key flags.
    static constexpr uint8_t kPendingT2 = 1;     // ghost hit: insert into T2
    static constexpr uint8_t kPrefetchNew = 2;   // prefetched, not yet used
    static constexpr uint8_t kPrefetchB1 = 4;    // ... and it was a B1 ghost
    static constexpr uint8_t kPrefetchB2 = 8;    // ... and it was a B2 ghost
    static constexpr uint8_t kPrefetchAny = kPrefetchNew | kPrefetchB1 | kPrefetchB2;
    uint8_t& flags(ExpertKey k);
    uint8_t flags_of(ExpertKey k) const { return k < flags_.size() ? flags_[k] : 0; }
    void adapt(bool ghost_in_b1);
    void trim();
    int64_t c_;
    double p_ = 0;               // target size of T1
    bool last_from_b2_ = false;  // REPLACE's "x in B2" for the pending miss
    KeyedLists lists_;
    std::vector<uint8_t> flags_;
};

}  // namespace strata::experts
