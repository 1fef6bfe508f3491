// The expert store: a budgeted cache of expert slots in the fast tier, filled
// from the slow tier by transfer threads, behind the ExpertProvider interface
// the forward pass uses.
//
// Every expert's home is its byte ranges in the model file (gate, up and down
// slabs). A slot holds one expert: its three ranges, each read as an aligned
// window so O_DIRECT can target the slot directly (no bounce copy). Slots are
// cells of arenas: anonymous mappings aligned to 2 MiB and advised
// MADV_HUGEPAGE (a slot is usually far smaller than a huge page, so slots of
// their own could never use one), reserved in the ledger (account
// experts.cache) as memory::expert_slots_bytes() says, which is what the plan
// counts. The cache grows and shrinks at run time; cells stay dense (slot i is
// cell i), so shrinking gives back the tail's huge pages and whole arenas.
// The account's used bytes are the slots that hold an expert (slot bytes
// each), so the ledger shows how much of the cache is filled.
//
// Requests: demand loads (the layer being computed needs the expert) always go
// before prefetches (a predictor thinks the next layer will). An expert that is
// demanded, in use, loading or pinned is never evicted; the cache policy ranks
// the rest. The forward pass takes resident experts first, so compute proceeds
// while the others load.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "experts/cache_policy.h"
#include "experts/expert_cache.h"
#include "experts/slow_tier.h"
#include "memory/aligned_buffer.h"
#include "memory/ledger.h"
#include "model/expert_provider.h"
#include "model/model.h"

namespace strata::experts {

struct ExpertStoreSettings {
    int64_t slots = 0;                 // total slots, pinned ones included; >= 1
    std::string policy = "lru";
    std::vector<ExpertKey> pinned;     // kept resident, never evicted
    bool direct_io = true;
    int io_threads = 1;
    // Rewrite each loaded expert into the CPU kernels' layout
    // (model::repack_for_kernels). Off where the bytes also go to a GPU,
    // which reads the file's layout (the CPU kernels read both).
    bool repack = true;
};


class ExpertStore final : public model::ExpertProvider, public ExpertCache {
public:
    ExpertStore(const model::Model& model, memory::Ledger& ledger, memory::Tier tier,
                const ExpertStoreSettings& settings, std::unique_ptr<SlowTier> source = nullptr);
    ~ExpertStore() override;
    ExpertStore(const ExpertStore&) = delete;
    ExpertStore& operator=(const ExpertStore&) = delete;

    // ExpertProvider
    void demand(int64_t layer, std::span<const int32_t> experts) override;
    int32_t take(int64_t layer, model::FfnMatrices* out) override;
    void release(int64_t layer, int32_t expert) override;
    void resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) override;
    int32_t take_if_ready(int64_t layer, model::FfnMatrices* out) override;
    // demand() that leaves the hit/miss statistics and the policy's counts
    // alone: a speculative draft's lookups are not the model's expert uses.
    void demand_uncounted(int64_t layer, std::span<const int32_t> experts);

    // Queues prefetches (best first) behind the pending ones, skipping experts
    // already resident, loading or queued. Never delays demand loads; pending
    // prefetches for a layer are dropped when that layer is demanded.
    void prefetch(std::span<const ExpertKey> keys);
    // ExpertCache: every key, whatever its layer.
    void prefetch(int64_t layer, std::span<const ExpertKey> keys) override { (void)layer; prefetch(keys); }
    std::string where() const override { return "RAM"; }
    // Waits until no load is pending (tests, benchmarks' warm-up).
    void wait_idle() override;
    // Loads experts into the free slots (layer by layer, in expert order) until
    // none is free; evicts nothing. With a cache that holds every expert this
    // makes the model fully resident. Returns the number of loads queued.
    int64_t fill_free_slots();

    // Run-time changes, between forward passes. Throw strata::Error with the
    // reason (the ledger's message when the budget does not allow it).
    void set_slots(int64_t slots) override;
    void set_policy(const std::string& name) override;
    void set_pinned(std::vector<ExpertKey> keys) override;

    ExpertKey key(int64_t layer, int32_t expert) const { return static_cast<ExpertKey>(layer * n_expert_ + expert); }
    int64_t slots() const override;
    uint64_t slot_bytes() const override { return slot_bytes_; }
    // Arenas mapped now, and the slots one arena holds.
    int64_t arenas() const;
    int64_t slots_per_arena() const { return arena_slots_; }
    bool huge_page_arenas() const { return huge_arenas_; }
    // The first byte of slot i's cell (tests: where the slots live).
    const uint8_t* slot_data(int64_t i) const;
    int64_t experts_total() const override { return experts_total_; }  // routed experts over all MoE layers
    std::string policy_name() const;
    const char* source_name() const { return source_->name(); }
    ExpertStoreStats stats() const override;
    // One entry per (layer * n_expert + expert); layers without experts stay Absent.
    std::vector<Residency> residency() const override;

private:
    struct Extent {
        bool valid = false;
        ByteWindow win[3];
        uint64_t offset_in_slot[3] = {0, 0, 0};
        model::FfnMatrices proto;  // shapes and types; data pointers rebased per slot
    };
    struct Slot {
        uint8_t* data = nullptr;   // its cell in an arena
        int64_t key = -1;          // expert held (or being loaded), -1 when free
        bool loading = false;
        bool prefetched_unused = false;
        int in_use = 0;
        model::FfnMatrices mats;
    };
    struct Request {
        ExpertKey key;
        bool demand;
    };
    // A FIFO on a ring of reusable storage: pushing and popping never
    // allocate once it has grown to its working size (a std::deque allocates
    // and frees a block every few dozen operations).
    class RequestQueue {
    public:
        bool empty() const { return size_ == 0; }
        size_t size() const { return size_; }
        void reserve(size_t n) { if (n > buf_.size()) grow(n); }
        Request& front() { return buf_[head_]; }
        Request& at(size_t i) { return buf_[(head_ + i) % buf_.size()]; }
        const Request& at(size_t i) const { return buf_[(head_ + i) % buf_.size()]; }
        void push_back(const Request& r) {
            if (size_ == buf_.size()) grow(size_ * 2);
            buf_[(head_ + size_) % buf_.size()] = r;
            ++size_;
        }
        void push_front(const Request& r) {
            if (size_ == buf_.size()) grow(size_ * 2);
            head_ = (head_ + buf_.size() - 1) % buf_.size();
            buf_[head_] = r;
            ++size_;
        }
        void pop_front() {
            head_ = (head_ + 1) % buf_.size();
            --size_;
        }
        // Removes the requests pred() selects, keeping the others in order.
        template <class P> void remove_if(P pred) {
            size_t kept = 0;
            for (size_t i = 0; i < size_; ++i)
                if (!pred(at(i))) at(kept++) = at(i);
            size_ = kept;
        }

    private:
        void grow(size_t n) {
            std::vector<Request> b(std::max<size_t>(n, 16));
            for (size_t i = 0; i < size_; ++i) b[i] = at(i);
            buf_ = std::move(b);
            head_ = 0;
        }
        std::vector<Request> buf_;
        size_t head_ = 0, size_ = 0;
    };
    // A mapping of arena_slots_ cells; reserved: the ledger bytes it holds for
    // its `cells` live cells (memory::expert_slots_bytes of them).
    struct Arena {
        uint8_t* base = nullptr;
        uint64_t map_bytes = 0;
        uint64_t reserved = 0;
        int64_t cells = 0;
    };
    class Filter;

    void demand_locked(int64_t layer, std::span<const int32_t> experts, bool counted);
    int32_t take_impl(int64_t layer, model::FfnMatrices* out, bool wait);
    void io_main();
    bool protected_locked(ExpertKey k) const;
    int64_t find_slot_locked(bool for_demand);  // free slot or victim; -1 when none
    void evict_locked(int64_t slot);
    void set_filled_locked(int64_t n);  // and the ledger's used bytes of experts.cache
    void add_slot_locked();
    void remove_last_cell_locked();
    void enqueue_locked(ExpertKey k, bool demand);
    model::FfnMatrices rebase(const Extent& e, uint8_t* base) const;

    const model::Model& model_;
    memory::Ledger& ledger_;
    memory::Tier tier_;
    std::unique_ptr<SlowTier> source_;
    bool repack_ = true;
    int64_t n_expert_ = 0;
    uint64_t slot_bytes_ = 0;
    int64_t experts_total_ = 0;
    std::vector<Extent> extents_;   // per key; invalid in dense layers

    mutable std::mutex mu_;
    std::condition_variable io_cv_;    // work for the transfer threads
    std::condition_variable done_cv_;  // a load finished or a slot was released
    std::vector<Slot> slots_;
    // Slots holding a loaded expert: the ledger's used bytes of experts.cache
    // are filled_ x slot_bytes_ (a slot being read into counts once it is read).
    int64_t filled_ = 0;
    std::vector<Arena> arenas_;
    int64_t arena_slots_ = 1;
    bool huge_arenas_ = false;         // arenas are huge-page mappings (else one plain slot each)
    std::vector<int64_t> slot_of_;     // per key: the slot holding (or loading) it, -1 when none
    std::unique_ptr<CachePolicy> policy_;
    std::vector<uint8_t> pinned_;      // per key
    std::vector<uint16_t> wanted_;     // per key: demanded, not yet taken
    std::vector<int64_t> last_use_;    // per key: clock_ of its last demand
    int64_t clock_ = 0;                // forward-pass tokens (steps) seen by demand()
    static constexpr int64_t kPrefetchColdTokens = 1;  // measured on the demo model: 1 beats 2 and 8
    RequestQueue demand_q_, prefetch_q_;
    int64_t loads_in_flight_ = 0;
    std::string io_error_;
    bool stop_ = false;
    std::vector<std::thread> io_threads_;

    // The layer being served to the forward pass.
    int64_t cur_layer_ = -1;
    std::vector<int32_t> cur_pending_;

    ExpertStoreStats stats_;
};

// The expert store as a speculative draft sees it: the same slots, demands
// that do not count as the model's expert uses, and residency to route by.
class DraftExperts final : public model::ExpertProvider {
public:
    explicit DraftExperts(ExpertStore& store) : store_(store) {}
    void demand(int64_t layer, std::span<const int32_t> experts) override { store_.demand_uncounted(layer, experts); }
    int32_t take(int64_t layer, model::FfnMatrices* out) override { return store_.take(layer, out); }
    int32_t take_if_ready(int64_t layer, model::FfnMatrices* out) override { return store_.take_if_ready(layer, out); }
    void release(int64_t layer, int32_t expert) override { store_.release(layer, expert); }
    void resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) override {
        store_.resident_mask(layer, mask, n_expert);
    }

private:
    ExpertStore& store_;
};

}  // namespace strata::experts
