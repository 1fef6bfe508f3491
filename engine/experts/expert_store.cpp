#include "experts/expert_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/log.h"
#include "plan/plan.h"

namespace strata::experts {

using clock_type = std::chrono::steady_clock;

// What may be evicted: nothing demanded, in use, loading or pinned; and for a
// prefetch, not another prefetched expert still waiting for its use (or
// prefetches of one layer would evict each other before either is used).
class ExpertStore::Filter final : public EvictableFilter {
public:
    Filter(const ExpertStore& s, bool for_demand) : s_(s), for_demand_(for_demand) {}
    bool evictable(ExpertKey key) const override {
        if (s_.protected_locked(key)) return false;
        if (for_demand_) return true;
        // A guess may only displace a cold expert: one neither waiting for its
        // own prefetched use nor used in the last few tokens (a prefetch that
        // evicts the working set costs more misses than it saves).
        if (s_.clock_ - s_.last_use_[key] <= kPrefetchColdTokens) return false;
        const int64_t i = s_.slot_of_[key];
        return i < 0 || !s_.slots_[static_cast<size_t>(i)].prefetched_unused;
    }

private:
    const ExpertStore& s_;
    bool for_demand_;
};

ExpertStore::ExpertStore(const model::Model& model, memory::Ledger& ledger, memory::Tier tier,
                         const ExpertStoreSettings& settings, std::unique_ptr<SlowTier> source)
    : model_(model), ledger_(ledger), tier_(tier), source_(std::move(source)), repack_(settings.repack) {
    const model::ModelConfig& c = model.config();
    n_expert_ = c.n_expert;
    if (n_expert_ <= 0) throw Error(model.file().path() + ": the expert store needs a mixture-of-experts model");
    if (!source_) source_ = std::make_unique<FileSlowTier>(model.file().path(), settings.direct_io);
    const uint64_t align = source_->alignment();

    // Each expert's three byte ranges, widened to the slow tier's alignment.
    extents_.resize(static_cast<size_t>(c.n_layer * n_expert_));
    for (const model::LayerWeights& L : model.weights().layers) {
        if (L.ffn != model::FfnKind::Moe) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            Extent& x = extents_[static_cast<size_t>(L.index * n_expert_ + e)];
            x.valid = true;
            ++experts_total_;
            x.proto = L.expert(e);
            const model::Matrix* m[3] = {&x.proto.gate, &x.proto.up, &x.proto.down};
            uint64_t at = 0;
            for (int k = 0; k < 3; ++k) {
                x.win[k] = make_window(m[k]->file_offset, m[k]->slab_bytes(), align);
                x.offset_in_slot[k] = at;
                at += x.win[k].window_bytes;
            }
            slot_bytes_ = std::max(slot_bytes_, at);
        }
    }
    if (slot_bytes_ == 0) throw Error(model.file().path() + ": the model has no expert tensors");
    if (settings.slots < 1) {
        throw Error("the expert cache needs at least 1 slot (asked for " + std::to_string(settings.slots) +
                    "); raise the fast-tier budget or the cache fraction");
    }
    pinned_.assign(extents_.size(), 0);
    slot_of_.assign(extents_.size(), -1);
    demand_q_.reserve(extents_.size() + 16);
    prefetch_q_.reserve(extents_.size() + 16);
    cur_pending_.reserve(static_cast<size_t>(n_expert_));
    huge_arenas_ = memory::expert_slots_per_arena(slot_bytes_, experts_total_) > 0;
    arena_slots_ = std::max<int64_t>(1, memory::expert_slots_per_arena(slot_bytes_, experts_total_));
    wanted_.assign(extents_.size(), 0);
    last_use_.assign(extents_.size(), std::numeric_limits<int64_t>::min() / 2);
    policy_ = make_policy(settings.policy, settings.slots);
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (int64_t i = 0; i < settings.slots; ++i) add_slot_locked();
    }
    const int n_io = std::max(1, settings.io_threads);
    for (int i = 0; i < n_io; ++i) io_threads_.emplace_back([this] { io_main(); });
    if (!settings.pinned.empty()) set_pinned(settings.pinned);
    logger("experts")->info("expert store: {} slots of {} bytes ({} experts), policy {}, source {}", settings.slots,
                            slot_bytes_, experts_total_, policy_->name(), source_->name());
}

ExpertStore::~ExpertStore() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    io_cv_.notify_all();
    done_cv_.notify_all();
    for (auto& t : io_threads_) t.join();
    std::lock_guard<std::mutex> lock(mu_);
    set_filled_locked(0);
    while (!slots_.empty()) remove_last_cell_locked();
}

// Arenas. Cell i lives in arena i / arena_slots_ at (i % arena_slots_) *
// slot_bytes_. An arena reserves expert_slots_bytes(slot, cells) in the ledger:
// its live cells rounded up to whole huge pages, the most a huge-page-backed
// mapping can touch, so plan and ledger agree byte for byte. Shrinking frees
// the last cell: the arena's huge pages past its new reservation go back to the
// system at once (MADV_DONTNEED), an empty arena is unmapped. So arenas return
// memory at 2 MiB granularity, as slots of their own would (a slot of its own
// is 4 KiB-granular but then never gets a huge page: the demo model's slots are
// 216 KiB); measured on the demo model a grow/shrink cycle of 64 slots costs
// well under a millisecond either way, so there was no reason to keep
// per-slot buffers. Below kExpertArenaMinBytes of experts (plan.h) an arena is
// one 4 KiB-granular slot without huge pages.
void ExpertStore::add_slot_locked() {
    const int64_t n = static_cast<int64_t>(slots_.size());
    const size_t a = static_cast<size_t>(n / arena_slots_);
    const int64_t cells = n % arena_slots_ + 1;
    const uint64_t want = memory::expert_slots_bytes(slot_bytes_, experts_total_, cells);
    const uint64_t have = a < arenas_.size() ? arenas_[a].reserved : 0;
    ledger_.reserve(memory::Account::ExpertsCache, tier_, want - have);  // throws with the ledger's message
    if (a == arenas_.size()) {
        Arena ar;
        ar.map_bytes = memory::expert_slots_bytes(slot_bytes_, experts_total_, arena_slots_);
        try {
            ar.base = memory::map_pages(ledger_, tier_, ar.map_bytes, memory::Account::ExpertsCache, huge_arenas_);
        } catch (...) {
            ledger_.release(memory::Account::ExpertsCache, tier_, want - have);
            throw;
        }
        arenas_.push_back(ar);
    }
    Arena& ar = arenas_[a];
    ar.reserved = want;
    ar.cells = cells;
    Slot s;
    s.data = ar.base + static_cast<uint64_t>(cells - 1) * slot_bytes_;
    slots_.push_back(s);
    if (policy_) policy_->set_capacity(static_cast<int64_t>(slots_.size()));
}

void ExpertStore::remove_last_cell_locked() {
    slots_.pop_back();
    Arena& ar = arenas_.back();
    --ar.cells;
    const uint64_t want = memory::expert_slots_bytes(slot_bytes_, experts_total_, ar.cells);
    const uint64_t give = ar.reserved - want;
    if (ar.cells == 0) {
        memory::unmap_pages(ar.base, ar.map_bytes, huge_arenas_);
        arenas_.pop_back();
    } else {
        if (give) memory::discard_pages(ar.base + want, give);
        ar.reserved = want;
    }
    if (give) ledger_.release(memory::Account::ExpertsCache, tier_, give);
}

model::FfnMatrices ExpertStore::rebase(const Extent& e, uint8_t* base) const {
    model::FfnMatrices m = e.proto;
    model::Matrix* mm[3] = {&m.gate, &m.up, &m.down};
    for (int k = 0; k < 3; ++k) mm[k]->data = base + e.offset_in_slot[k] + e.win[k].inner;
    return m;
}

bool ExpertStore::protected_locked(ExpertKey k) const {
    if (pinned_[k] || wanted_[k]) return true;
    const int64_t i = slot_of_[k];
    if (i < 0) return false;
    const Slot& s = slots_[static_cast<size_t>(i)];
    return s.loading || s.in_use > 0;
}

void ExpertStore::set_filled_locked(int64_t n) {
    const int64_t delta = (n - filled_) * static_cast<int64_t>(slot_bytes_);
    filled_ = n;
    if (delta != 0) ledger_.adjust_used(memory::Account::ExpertsCache, tier_, delta);
}

void ExpertStore::evict_locked(int64_t i) {
    Slot& s = slots_[static_cast<size_t>(i)];
    if (s.key < 0) return;
    if (!s.loading) set_filled_locked(filled_ - 1);
    const auto k = static_cast<ExpertKey>(s.key);
    if (s.prefetched_unused) ++stats_.prefetch_dropped;
    policy_->on_remove(k);
    slot_of_[k] = -1;
    s.key = -1;
    s.prefetched_unused = false;
    ++stats_.evictions;
}

int64_t ExpertStore::find_slot_locked(bool for_demand) {
    for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].key < 0) return static_cast<int64_t>(i);
    const std::optional<ExpertKey> v = policy_->victim(Filter(*this, for_demand));
    if (!v) return -1;
    const int64_t i = slot_of_[*v];
    evict_locked(i);
    return i;
}

void ExpertStore::enqueue_locked(ExpertKey k, bool demand) {
    if (demand) {
        demand_q_.push_back({k, true});
    } else {
        prefetch_q_.push_back({k, false});
    }
    io_cv_.notify_one();
}

void ExpertStore::io_main() {
    std::vector<uint8_t> scratch;  // one row, for repacking (grows once)
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        io_cv_.wait(lock, [&] { return stop_ || !demand_q_.empty() || !prefetch_q_.empty(); });
        if (stop_) return;
        const bool demand = !demand_q_.empty();
        Request r = demand ? demand_q_.front() : prefetch_q_.front();
        if (demand) demand_q_.pop_front();
        else prefetch_q_.pop_front();
        if (slot_of_[r.key] >= 0) continue;  // resident or already loading
        int64_t slot = find_slot_locked(demand);
        if (slot < 0) {
            if (!demand && !pinned_[r.key]) {
                ++stats_.prefetch_dropped;
                continue;
            }
            // A demand load (or a pin) with every slot protected: wait for a
            // release, then retry from the front of the queue.
            demand_q_.push_front(r);
            done_cv_.wait(lock);
            continue;
        }
        Slot& s = slots_[static_cast<size_t>(slot)];
        s.key = r.key;
        s.loading = true;
        s.prefetched_unused = !demand && !wanted_[r.key] && !pinned_[r.key];
        slot_of_[r.key] = slot;
        ++loads_in_flight_;
        if (demand) ++stats_.demand_loads;
        else ++stats_.prefetch_loads;
        const Extent& x = extents_[r.key];
        uint8_t* base = s.data;
        lock.unlock();
        std::string error;
        model::FfnMatrices mats;
        uint64_t repacked = 0;
        try {
            for (int k = 0; k < 3; ++k) source_->read(x.win[k], base + x.offset_in_slot[k]);
            // Into the CPU kernels' layout here, on the transfer thread, off
            // the forward pass's path.
            mats = rebase(x, base);
            model::Matrix* mm[3] = {&mats.gate, &mats.up, &mats.down};
            for (int k = 0; k < 3 && repack_; ++k)
                repacked += model::repack_for_kernels(*mm[k], base + x.offset_in_slot[k] + x.win[k].inner, scratch);
        } catch (const std::exception& e) {
            error = e.what();
        }
        lock.lock();
        Slot& done = slots_[static_cast<size_t>(slot)];
        done.loading = false;
        --loads_in_flight_;
        if (!error.empty()) {
            io_error_ = error;
            slot_of_[r.key] = -1;
            done.key = -1;
        } else {
            done.mats = mats;
            set_filled_locked(filled_ + 1);
            stats_.bytes_repacked += repacked;
            stats_.bytes_loaded += x.win[0].window_bytes + x.win[1].window_bytes + x.win[2].window_bytes;
            // Pinned experts stay outside the policy (it never has to step over
            // them); a prefetch enters as a guess, not as a use.
            if (!pinned_[r.key]) {
                if (done.prefetched_unused) policy_->on_prefetch_insert(r.key);
                else policy_->on_insert(r.key);
            }
        }
        done_cv_.notify_all();
    }
}

void ExpertStore::demand(int64_t layer, std::span<const int32_t> experts) {
    std::lock_guard<std::mutex> lock(mu_);
    demand_locked(layer, experts, true);
}

void ExpertStore::demand_uncounted(int64_t layer, std::span<const int32_t> experts) {
    std::lock_guard<std::mutex> lock(mu_);
    demand_locked(layer, experts, false);
}

void ExpertStore::resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t e = 0; e < n_expert; ++e) {
        const int64_t i = slot_of_[key(layer, static_cast<int32_t>(e))];
        mask[e] = i >= 0 && !slots_[static_cast<size_t>(i)].loading;
    }
}

void ExpertStore::demand_locked(int64_t layer, std::span<const int32_t> experts, bool counted) {
    if (!io_error_.empty()) throw Error(io_error_);
    // A layer abandoned half-way (an exception in the forward pass) leaves
    // wanted marks behind; they must not protect those experts forever.
    for (int32_t e : cur_pending_) --wanted_[key(cur_layer_, e)];
    if (layer <= cur_layer_) ++clock_;  // a new token (or step) started
    cur_layer_ = layer;
    cur_pending_.assign(experts.begin(), experts.end());
    // Prefetches aimed at this layer or earlier are stale once it runs.
    prefetch_q_.remove_if([&](const Request& r) {
        const bool stale = static_cast<int64_t>(r.key / n_expert_) <= layer && !pinned_[r.key];
        stats_.prefetch_dropped += stale;
        return stale;
    });
    for (int32_t e : experts) {
        const ExpertKey k = key(layer, e);
        ++wanted_[k];
        stats_.demanded += counted;
        last_use_[k] = clock_;
        if (const int64_t i = slot_of_[k]; i >= 0) {
            stats_.hits += counted;
            if (counted && !slots_[static_cast<size_t>(i)].loading && !pinned_[k]) policy_->on_hit(k);
        } else {
            if (counted) policy_->on_miss(k);
            enqueue_locked(k, true);
        }
    }
}

int32_t ExpertStore::take(int64_t layer, model::FfnMatrices* out) { return take_impl(layer, out, true); }

int32_t ExpertStore::take_if_ready(int64_t layer, model::FfnMatrices* out) { return take_impl(layer, out, false); }

int32_t ExpertStore::take_impl(int64_t layer, model::FfnMatrices* out, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (layer != cur_layer_) return -1;
    for (;;) {
        if (!io_error_.empty()) throw Error(io_error_);
        if (cur_pending_.empty()) return -1;
        for (size_t i = 0; i < cur_pending_.size(); ++i) {
            const ExpertKey k = key(layer, cur_pending_[i]);
            const int64_t si = slot_of_[k];
            if (si < 0) continue;
            Slot& s = slots_[static_cast<size_t>(si)];
            if (s.loading) continue;
            const int32_t e = cur_pending_[i];
            cur_pending_.erase(cur_pending_.begin() + static_cast<std::ptrdiff_t>(i));
            --wanted_[k];
            ++s.in_use;
            if (s.prefetched_unused) {
                s.prefetched_unused = false;
                ++stats_.prefetch_used;
            }
            *out = s.mats;
            return e;
        }
        if (!wait) return -1;
        // Nothing ready: wait for a load (this is the stall the telemetry shows).
        const auto t0 = clock_type::now();
        done_cv_.wait(lock);
        stats_.stall_seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
        if (stop_) throw Error("the expert store is shutting down");
    }
}

void ExpertStore::release(int64_t layer, int32_t expert) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t i = slot_of_[key(layer, expert)];
    if (i >= 0) {
        Slot& s = slots_[static_cast<size_t>(i)];
        if (s.in_use > 0) --s.in_use;
    }
    done_cv_.notify_all();
}

void ExpertStore::prefetch(std::span<const ExpertKey> keys) {
    std::lock_guard<std::mutex> lock(mu_);
    for (ExpertKey k : keys) {
        if (k >= extents_.size() || !extents_[k].valid || slot_of_[k] >= 0) continue;
        bool queued = false;
        for (size_t i = 0; i < prefetch_q_.size(); ++i) queued |= prefetch_q_.at(i).key == k;
        if (!queued) prefetch_q_.push_back({k, false});
    }
    if (!prefetch_q_.empty()) io_cv_.notify_all();
}

int64_t ExpertStore::fill_free_slots() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t free = 0;
    for (const Slot& s : slots_) free += s.key < 0;
    int64_t queued = 0;
    for (ExpertKey k = 0; k < extents_.size() && queued < free; ++k) {
        if (!extents_[k].valid || slot_of_[k] >= 0) continue;
        prefetch_q_.push_back({k, false});
        ++queued;
    }
    if (queued) io_cv_.notify_all();
    return queued;
}

void ExpertStore::wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] {
        return stop_ || !io_error_.empty() || (demand_q_.empty() && prefetch_q_.empty() && loads_in_flight_ == 0);
    });
    if (!io_error_.empty()) throw Error(io_error_);
}

void ExpertStore::set_slots(int64_t n) {
    if (n < 1) throw Error("the expert cache needs at least 1 slot (asked for " + std::to_string(n) + ")");
    std::unique_lock<std::mutex> lock(mu_);
    int64_t pinned = 0;
    for (uint8_t p : pinned_) pinned += p;
    if (n <= pinned) {
        throw Error("cannot shrink the expert cache to " + std::to_string(n) + " slots: " + std::to_string(pinned) +
                    " experts are pinned and at least one slot must stay unpinned; unpin some first");
    }
    if (n > static_cast<int64_t>(slots_.size())) {
        // The whole growth against the budget first: a refusal names what the
        // cache would need and what fits (not the next arena's few MiB), and
        // leaves the cache as it was (growing slot by slot would stop half-way).
        uint64_t held = 0;
        for (const Arena& a : arenas_) held += a.reserved;
        const uint64_t need = memory::expert_slots_bytes(slot_bytes_, experts_total_, n);
        const uint64_t free = ledger_.free(tier_);
        if (need > held && need - held > free) {
            const uint64_t room = held + free;
            const int64_t most = memory::expert_slots_within(slot_bytes_, experts_total_, room);
            const double share = experts_total_ > 0 ? double(n) / double(experts_total_) : 0.0;
            const double most_share = experts_total_ > 0 ? double(most) / double(experts_total_) : 0.0;
            char b[160];
            std::snprintf(b, sizeof b, " (%.1f%% of the %lld experts)", share * 100.0, static_cast<long long>(experts_total_));
            std::string msg = "an expert cache of " + std::to_string(n) + " slots" + b + " needs " +
                              memory::format_bytes(need) + " of " + memory::tier_name(tier_) + "-tier memory, " +
                              memory::format_bytes(need - held - free) + " more than the budget leaves it (" +
                              memory::format_bytes(room) + ": its " + std::to_string(slots_.size()) + " slots now and " +
                              memory::format_bytes(free) + " free of the " +
                              memory::format_bytes(ledger_.budget(tier_)) + " budget); ";
            std::snprintf(b, sizeof b, "%.3g", most_share);
            msg += "at most " + std::to_string(most) + " slots fit (an expert cache size of " + b +
                   "): ask for that or less, or raise the " + memory::tier_name(tier_) +
                   " budget and reload the model";
            throw Error(msg);
        }
    }
    while (static_cast<int64_t>(slots_.size()) < n) add_slot_locked();  // throws with the ledger's message
    while (static_cast<int64_t>(slots_.size()) > n) {
        // Prefer a free slot; else evict an unprotected expert; else wait.
        int64_t victim = -1;
        for (size_t i = 0; i < slots_.size() && victim < 0; ++i)
            if (slots_[i].key < 0 && !slots_[i].loading) victim = static_cast<int64_t>(i);
        if (victim < 0) {
            if (auto v = policy_->victim(Filter(*this, true))) {
                victim = slot_of_[*v];
                evict_locked(victim);
            }
        }
        if (victim < 0) {
            done_cv_.wait(lock);
            continue;
        }
        // Move the last slot's expert into the hole so cells stay dense (the
        // last cell is the one given back).
        const int64_t last = static_cast<int64_t>(slots_.size()) - 1;
        if (victim != last) {
            Slot& from = slots_[static_cast<size_t>(last)];
            if (from.loading || from.in_use > 0) {  // never move a slot under a read or in use
                done_cv_.wait(lock);
                continue;
            }
            Slot& to = slots_[static_cast<size_t>(victim)];
            uint8_t* cell = to.data;
            if (from.key >= 0) {
                std::memcpy(cell, from.data, slot_bytes_);
                slot_of_[static_cast<ExpertKey>(from.key)] = victim;
                to = from;
                to.data = cell;
                // The same bytes (and layout, repacked or not) at the new cell.
                for (model::Matrix* m : {&to.mats.gate, &to.mats.up, &to.mats.down}) m->data = cell + (m->data - from.data);
                ++stats_.slots_moved;
            } else {
                to = from;
                to.data = cell;
            }
        }
        remove_last_cell_locked();
        policy_->set_capacity(static_cast<int64_t>(slots_.size()));
    }
}

void ExpertStore::set_policy(const std::string& name) {
    std::unique_ptr<CachePolicy> p = make_policy(name, 0);
    std::lock_guard<std::mutex> lock(mu_);
    p->set_capacity(static_cast<int64_t>(slots_.size()));
    // Residents move over in the old policy's eviction order (first to go
    // first), so recency survives the switch.
    for (ExpertKey k : policy_->eviction_order()) p->on_insert(k);
    policy_ = std::move(p);
}

void ExpertStore::set_pinned(std::vector<ExpertKey> keys) {
    std::lock_guard<std::mutex> lock(mu_);
    for (ExpertKey k : keys) {
        if (k >= extents_.size() || !extents_[k].valid) {
            throw Error("pinned expert " + std::to_string(k / n_expert_) + ":" + std::to_string(k % n_expert_) +
                        " does not exist in this model");
        }
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    // At least one slot must stay unpinned, or a demand load could never find room.
    if (static_cast<int64_t>(keys.size()) >= static_cast<int64_t>(slots_.size())) {
        throw Error(std::to_string(keys.size()) + " pinned experts leave no free slot in a cache of " +
                    std::to_string(slots_.size()) + " slots; raise the cache size or pin fewer experts");
    }
    std::vector<uint8_t> next(pinned_.size(), 0);
    for (ExpertKey k : keys) next[k] = 1;
    for (ExpertKey k = 0; k < next.size(); ++k) {
        if (next[k] == pinned_[k]) continue;
        const int64_t si = slot_of_[k];
        const bool resident = si >= 0 && !slots_[static_cast<size_t>(si)].loading;
        if (resident) {
            if (next[k]) policy_->on_remove(k);  // pinned: out of the policy's hands
            else policy_->on_insert(k);          // unpinned: an ordinary resident again
        }
        pinned_[k] = next[k];
        if (next[k] && si < 0) enqueue_locked(k, true);  // pins load like demand, never dropped
    }
}

int64_t ExpertStore::arenas() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(arenas_.size());
}

const uint8_t* ExpertStore::slot_data(int64_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return i >= 0 && i < static_cast<int64_t>(slots_.size()) ? slots_[static_cast<size_t>(i)].data : nullptr;
}

int64_t ExpertStore::slots() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(slots_.size());
}

std::string ExpertStore::policy_name() const {
    std::lock_guard<std::mutex> lock(mu_);
    return policy_->name();
}

ExpertStoreStats ExpertStore::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

std::vector<Residency> ExpertStore::residency() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Residency> r(extents_.size(), Residency::Absent);
    for (ExpertKey k = 0; k < slot_of_.size(); ++k) {
        const int64_t slot = slot_of_[k];
        if (slot < 0) continue;
        const Slot& s = slots_[static_cast<size_t>(slot)];
        r[k] = s.loading ? Residency::Loading : pinned_[k] ? Residency::Pinned : Residency::Resident;
    }
    return r;
}

}  // namespace strata::experts
