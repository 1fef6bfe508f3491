// The CUDA pass's VRAM expert cache: the slots (loads on the copy stream,
// each ordered against the compute that reads it, eviction by the policy,
// prefetch, the experts taken from host RAM's cache with three tiers), and
// the cache as the engine sees any expert cache (experts/expert_cache.h):
// its figures, residency and live settings. Which path a missing expert
// takes (hybrid placement) and the compute are cuda_forward.cpp's.
#include <algorithm>
#include <chrono>

#include "backend/cuda/cuda_pass.h"
#include "common/error.h"
#include "common/log.h"
#include "experts/expert_store.h"

namespace strata::backend::cuda::pass {

void CudaForward::load_experts(const CudaForwardOptions& o) {
    const model::ModelWeights& w = model_.weights();
    const int64_t E = cfg_.n_expert;
    int64_t total = 0;
    uint64_t slot = 0, all = 0;
    for (const model::LayerWeights& L : w.layers) {
        if (L.ffn != model::FfnKind::Moe || cpu_layer_[static_cast<size_t>(L.index)]) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            const uint64_t b = ffn_bytes(L.expert(e));
            slot = std::max(slot, (b + 255) / 256 * 256);
            all += b;
            ++total;
        }
    }
    stats_.experts_total = total;
    if (total == 0) return;
    cached_ = o.expert_slots >= 0 && o.expert_slots < total;
    if (!cached_) {
        // Every expert in VRAM: each layer's experts in one buffer, expert e at its slab offset.
        for (size_t li = 0; li < layers_.size(); ++li) {
            const model::LayerWeights& L = w.layers[li];
            if (L.ffn != model::FfnKind::Moe || cpu_layer_[li]) continue;
            uint64_t layer_bytes = 0;
            for (int64_t e = 0; e < L.n_experts(); ++e) layer_bytes += ffn_bytes(L.expert(e));
            weights_.emplace_back(ledger_, Account::ExpertsCache, Tier::Fast, layer_bytes);
            ledger_.adjust_used(Account::ExpertsCache, Tier::Fast, static_cast<int64_t>(layer_bytes));
            auto* base = static_cast<uint8_t*>(weights_.back().data());
            uint64_t off = 0;
            for (int64_t e = 0; e < L.n_experts(); ++e) {
                const model::FfnMatrices f = L.expert(e);
                for (const model::Matrix* m : {&f.gate, &f.up, &f.down}) {
                    upload(base + off, m->data, m->slab_bytes(), ("uploading " + std::string(m->name)).c_str());
                    off += m->slab_bytes();
                }
                layers_[li].experts.push_back(ffn_at(base + off - ffn_bytes(f), f));
            }
        }
        stats_.slots = total;
        stats_.slot_bytes = slot;
        return;
    }
    // A VRAM cache over the experts' home in pinned host RAM.
    slots_ = std::max<int64_t>(o.expert_slots, n_used_);
    slot_bytes_ = slot;
    stats_.slots = slots_;
    stats_.slot_bytes = slot;
    if (!host_cache_) {
        home_ = PinnedBuffer(ledger_, Account::ExpertsHome, Tier::Slow, all);
        ledger_.adjust_used(Account::ExpertsHome, Tier::Slow, static_cast<int64_t>(all));
    }
    home_offset_.assign(static_cast<size_t>(w.layers.size() * static_cast<size_t>(E)), UINT64_MAX);
    uint64_t off = 0;
    for (const model::LayerWeights& L : w.layers) {
        if (L.ffn != model::FfnKind::Moe || cpu_layer_[static_cast<size_t>(L.index)]) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            model::FfnMatrices f = L.expert(e);
            const size_t k = static_cast<size_t>(L.index * E + e);
            home_offset_[k] = off;
            if (host_cache_) continue;  // taken from the cache when a step needs it
            for (model::Matrix* m : {&f.gate, &f.up, &f.down}) {
                std::copy(m->data, m->data + m->slab_bytes(), home_.data() + off);
                m->data = home_.data() + off;  // the CPU computes it from here (hybrid placement)
                m->slabs = 1;
                off += m->slab_bytes();
            }
            host_mats_[k] = f;
        }
    }
    capacity_ = slots_;
    arena_ = DeviceBuffer(ledger_, Account::ExpertsCache, Tier::Fast, static_cast<uint64_t>(slots_) * slot_bytes_);
    slot_of_.assign(home_offset_.size(), -1);
    key_of_slot_.assign(static_cast<size_t>(slots_), UINT32_MAX);
    for (int64_t s = slots_ - 1; s >= 0; --s) free_slots_.push_back(static_cast<int32_t>(s));
    policy_ = experts::make_policy(o.policy == "pinned" ? "lru" : o.policy, slots_);
    compute_done_ = std::make_unique<Event>();
    copies_done_ = std::make_unique<Event>();
    slot_prefetched_.assign(static_cast<size_t>(slots_), 0);
    for (int64_t i = 0; i < slots_; ++i) slot_ready_.push_back(std::make_unique<Event>());
}

void CudaForward::resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) const {
    // A layer computed on the CPU needs no copy: its experts count as in place.
    const bool in_place = !cached_ || cpu_layer_[static_cast<size_t>(layer)];
    for (int64_t e = 0; e < n_expert; ++e)
        mask[e] = in_place || slot_of_[static_cast<size_t>(layer * cfg_.n_expert + e)] >= 0;
}

void CudaForward::cpu_mask(int64_t layer, uint8_t* mask, int64_t n_expert, int64_t steps) const {
    const bool cpu_layer = cpu_layer_[static_cast<size_t>(layer)];  // every expert of it runs there
    for (int64_t e = 0; e < n_expert; ++e) {
        if (cpu_layer) {
            mask[e] = 1;
            continue;
        }
        const size_t k = static_cast<size_t>(layer * cfg_.n_expert + e);
        const uint64_t last = k < cpu_step_.size() ? cpu_step_[k] : 0;  // 1 + the step
        mask[e] = last > 0 && step_ + 1 - last <= static_cast<uint64_t>(std::max<int64_t>(steps, 1));
    }
}

int32_t CudaForward::free_or_evict(const experts::EvictableFilter& filter) {
    if (!free_slots_.empty()) {
        const int32_t s = free_slots_.back();
        free_slots_.pop_back();
        return s;
    }
    const std::optional<experts::ExpertKey> victim = policy_->victim(filter);
    if (!victim) return -1;
    policy_->on_remove(*victim);
    const int32_t s = slot_of_[*victim];
    slot_of_[*victim] = -1;
    return s;
}

int32_t CudaForward::take_slot(const std::vector<uint32_t>& in_use) {
    const int32_t s = free_or_evict(KeysSpared(in_use));
    if (s < 0) throw Error("the VRAM expert cache has no slot to give: every slot holds an expert this step needs");
    return s;
}

void CudaForward::copy_into_slot(uint32_t k, int32_t s, const model::FfnMatrices& f, LinkTiming* timing) {
    // A slot may have been read by compute already queued: the copy waits for it.
    compute_done_->record(compute_);
    compute_done_->wait_on(copy_);
    if (timing && !timing->begin) {
        timing->begin = std::make_unique<Event>(true);
        timing->begin->record(copy_);
    }
    if (timing) timing->bytes += ffn_bytes(f);
    auto* dst = static_cast<uint8_t*>(arena_.data()) + static_cast<uint64_t>(s) * slot_bytes_;
    const uint64_t g = f.gate.slab_bytes(), u = f.up.slab_bytes();
    if (f.up.data == f.gate.data + g && f.down.data == f.up.data + u) {  // one run (the pinned home)
        copy_to_device(dst, f.gate.data, ffn_bytes(f), copy_, "copying an expert to the GPU");
    } else {  // three (a host cache slot: each matrix in its aligned window)
        copy_to_device(dst, f.gate.data, g, copy_, "copying an expert to the GPU");
        copy_to_device(dst + g, f.up.data, u, copy_, "copying an expert to the GPU");
        copy_to_device(dst + g + u, f.down.data, f.down.slab_bytes(), copy_, "copying an expert to the GPU");
    }
    stats_.bytes_loaded += ffn_bytes(f);
    slot_of_[k] = s;
    key_of_slot_[static_cast<size_t>(s)] = k;
    slot_prefetched_[static_cast<size_t>(s)] = 0;
}

void CudaForward::prefetch(int64_t layer, const int32_t* experts_in, int64_t n) {
    if (host_cache_ && layer >= 0) {
        // Three tiers: the predicted experts move up the slower hop, file to host RAM.
        h_keys_.clear();
        // Only experts host RAM will serve: a CPU layer's, or a cached layer's missing from VRAM.
        for (int64_t i = 0; i < n; ++i) {
            if (experts_in[i] < 0 || experts_in[i] >= cfg_.n_expert) continue;
            const auto k = static_cast<uint32_t>(layer * cfg_.n_expert + experts_in[i]);
            if (cpu_layer_[static_cast<size_t>(layer)] || (cached_ && slot_of_[k] < 0)) h_keys_.push_back(k);
        }
        host_cache_->prefetch(h_keys_);
        return;
    }
    if (!cached_ || layer < 0 || cpu_layer_[static_cast<size_t>(layer)]) return;
    const int64_t E = cfg_.n_expert;
    // Spare the layer being computed and the predicted one: their experts are
    // (about to be) demanded, and a guess must not push them out.
    struct Filter final : experts::EvictableFilter {
        int64_t a, b, E;
        bool evictable(experts::ExpertKey k) const override {
            const int64_t layer = static_cast<int64_t>(k) / E;
            return layer != a && layer != b;
        }
    } filter;
    filter.a = current_layer_;
    filter.b = layer;
    filter.E = E;
    for (int64_t i = 0; i < n; ++i) {
        if (experts_in[i] < 0 || experts_in[i] >= E) continue;
        const uint32_t k = static_cast<uint32_t>(layer * E + experts_in[i]);
        if (slot_of_[k] >= 0) continue;
        const int32_t s = free_or_evict(filter);
        if (s < 0) return;  // every slot holds an expert that is needed now
        copy_into_slot(k, s, host_mats_[k]);
        slot_ready_[static_cast<size_t>(s)]->record(copy_);
        slot_prefetched_[static_cast<size_t>(s)] = kPrefetched;
        policy_->on_prefetch_insert(k);
        ++stats_.prefetch_loads;
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
}

void CudaForward::make_resident(const int32_t* experts_in, size_t n, int64_t layer, std::vector<DevFfn>* out) {
    const model::LayerWeights& L = model_.weights().layers[static_cast<size_t>(layer)];
    out->clear();
    if (!cached_) {
        for (size_t i = 0; i < n; ++i)
            out->push_back(layers_[static_cast<size_t>(layer)].experts[static_cast<size_t>(experts_in[i])]);
        return;
    }
    std::vector<uint32_t>& keys = h_keys_;
    keys.clear();
    for (size_t i = 0; i < n; ++i) keys.push_back(static_cast<uint32_t>(layer * cfg_.n_expert + experts_in[i]));
    bool copied = false;
    LinkTiming timing;
    for (size_t i = 0; i < keys.size(); ++i) {
        const uint32_t k = keys[i];
        ++stats_.demanded;
        if (const int32_t s = slot_of_[k]; s >= 0) {
            ++stats_.hits;
            policy_->on_hit(k);
            if (slot_prefetched_[static_cast<size_t>(s)]) {
                // Prefetched or copied in the background: the compute waits for that copy alone.
                if (slot_prefetched_[static_cast<size_t>(s)] == kPrefetched) ++stats_.prefetch_used;
                slot_prefetched_[static_cast<size_t>(s)] = 0;
                auto begin = std::make_unique<Event>(true), end = std::make_unique<Event>(true);
                begin->record(compute_);
                slot_ready_[static_cast<size_t>(s)]->wait_on(compute_);
                end->record(compute_);
                stalls_.emplace_back(std::move(begin), std::move(end));
            }
            continue;
        }
        policy_->on_miss(k);
        const int32_t s = take_slot(keys);
        copy_into_slot(k, s, host_mats_[k], hybrid_ ? &timing : nullptr);
        policy_->on_insert(k);
        copied = true;
    }
    if (copied) {
        // The timing's end before copies_done_, which the compute stream waits
        // for: the end is complete once the step's compute is.
        if (timing.begin) {
            timing.end = std::make_unique<Event>(true);
            timing.end->record(copy_);
            link_timings_.push_back(std::move(timing));
        }
        copies_done_->record(copy_);
        auto begin = std::make_unique<Event>(true), end = std::make_unique<Event>(true);
        begin->record(compute_);
        copies_done_->wait_on(compute_);
        end->record(compute_);
        stalls_.emplace_back(std::move(begin), std::move(end));
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
    for (size_t i = 0; i < keys.size(); ++i)
        out->push_back(ffn_at(static_cast<uint8_t*>(arena_.data()) + static_cast<uint64_t>(slot_of_[keys[i]]) * slot_bytes_,
                              L.expert(experts_in[i])));
}

void CudaForward::take_from_host_cache(int64_t li) {
    const int64_t E = cfg_.n_expert;
    // Experts an earlier layer took and did not give back (its step failed midway).
    if (!taken_.empty()) release_to_host_cache(taken_layer_);
    taken_layer_ = li;
    std::vector<int32_t>& needed = h_cpu_;  // (free while ordering is done)
    needed.clear();
    for (const int32_t e : h_order_) {
        const auto k = static_cast<size_t>(li * E + e);
        if (cpu_layer_[static_cast<size_t>(li)] || (cached_ && slot_of_[k] < 0)) needed.push_back(e);
    }
    needed_from_host_ = needed.size();
    if (needed.empty()) return;
    host_cache_->demand(li, needed);
    model::FfnMatrices f;
    size_t got = 0;
    for (int32_t e; (e = host_cache_->take(li, &f)) >= 0; ++got) {
        host_mats_[static_cast<size_t>(li * E + e)] = f;
        taken_.push_back(e);
    }
    if (got != needed_from_host_)
        throw Error("internal: the host expert cache handed over " + std::to_string(got) + " of " +
                    std::to_string(needed_from_host_) + " experts of layer " + std::to_string(li));
}

void CudaForward::release_to_host_cache(int64_t li) {
    for (const int32_t e : taken_) {
        host_cache_->release(li, e);
        host_mats_[static_cast<size_t>(li * cfg_.n_expert + e)] = {};
    }
    taken_.clear();
}

// Copies the experts the CPU computed this step and is expected to see again
// into VRAM slots, on the copy stream behind the demand copies; the compute
// stream waits for one only when it first reads it.
void CudaForward::copy_in_background(int64_t li) {
    const KeysSpared filter(gpu_keys_);
    for (const uint32_t k : background_) {
        const int32_t s = free_or_evict(filter);
        if (s < 0) {
            ++stats_.miss_cpu;  // no slot to give: computed on the CPU only
            continue;
        }
        ++stats_.miss_both;
        backlog_s_ += double(ffn_bytes(host_mats_[k])) / rates_.link_bps;
        copy_into_slot(k, s, host_mats_[k]);
        slot_ready_[static_cast<size_t>(s)]->record(copy_);
        slot_prefetched_[static_cast<size_t>(s)] = kBackground;
        policy_->on_insert(k);
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
}

void CudaForward::prefetch(int64_t layer, std::span<const experts::ExpertKey> keys) {
    const int64_t E = cfg_.n_expert;
    h_prefetch_.clear();
    for (const experts::ExpertKey k : keys)
        if (static_cast<int64_t>(k) / E == layer) h_prefetch_.push_back(static_cast<int32_t>(k % E));
    if (!h_prefetch_.empty()) prefetch(layer, h_prefetch_.data(), static_cast<int64_t>(h_prefetch_.size()));
}

experts::ExpertStoreStats CudaForward::stats() const {
    const model::DeviceExpertStats& ds = stats_;
    experts::ExpertStoreStats st;
    st.demanded = ds.demanded;
    st.hits = ds.hits;
    st.demand_loads = ds.demanded - ds.hits - ds.miss_cpu - ds.miss_both;  // those the CPU computed were not loaded
    st.bytes_loaded = ds.bytes_loaded;
    st.stall_seconds = ds.stall_seconds;
    st.prefetch_loads = ds.prefetch_loads;
    st.prefetch_used = ds.prefetch_used;
    return st;
}

std::vector<experts::Residency> CudaForward::residency() const {
    const int64_t E = cfg_.n_expert;
    std::vector<experts::Residency> r(static_cast<size_t>(cfg_.n_layer * E), experts::Residency::Absent);
    std::vector<uint8_t> resident(static_cast<size_t>(E)), on_cpu(static_cast<size_t>(E));
    for (const model::LayerWeights& L : model_.weights().layers) {
        if (L.ffn != model::FfnKind::Moe) continue;
        resident_mask(L.index, resident.data(), E);
        cpu_mask(L.index, on_cpu.data(), E, 32);
        for (int64_t e = 0; e < E; ++e) {
            const size_t i = static_cast<size_t>(e);
            // Computed on the CPU (a --cpu-moe layer, or a hybrid miss) shows as such, not as resident.
            r[static_cast<size_t>(L.index * E) + i] = on_cpu[i]     ? experts::Residency::OnCpu
                                                      : resident[i] ? experts::Residency::Resident
                                                                    : experts::Residency::Absent;
        }
    }
    return r;
}

// Within the slots reserved at load: shrinking lets go of the experts in the
// slots given up; growing hands reserved slots back to the cache.
void CudaForward::set_slots(int64_t n) {
    if (!cached_)
        throw Error("every routed expert is in VRAM on " + name_ +
                    ": a smaller expert cache applies at the next load of the model");
    if (n < n_used_)
        throw Error("the GPU's expert cache needs at least " + std::to_string(n_used_) +
                    " slots (the experts one token uses in a layer); asked for " + std::to_string(n));
    if (n > capacity_)
        throw Error("the GPU's expert cache has " + std::to_string(capacity_) +
                    " slots reserved in VRAM since the model loaded; a cache of " + std::to_string(n) +
                    " slots applies at the next load");
    if (n == slots_) return;
    set_device(device_);
    compute_.synchronize("resizing the GPU's expert cache");
    copy_.synchronize("resizing the GPU's expert cache");
    if (n < slots_) {
        for (int64_t s = n; s < slots_; ++s) {
            const uint32_t k = key_of_slot_[static_cast<size_t>(s)];
            if (k != UINT32_MAX) {
                policy_->on_remove(k);
                slot_of_[k] = -1;
                key_of_slot_[static_cast<size_t>(s)] = UINT32_MAX;
            }
            slot_prefetched_[static_cast<size_t>(s)] = 0;
        }
        std::erase_if(free_slots_, [n](int32_t s) { return s >= n; });
    } else {
        for (int64_t s = slots_; s < n; ++s) free_slots_.push_back(static_cast<int32_t>(s));
    }
    slots_ = n;
    stats_.slots = n;
    policy_->set_capacity(n);
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
}

void CudaForward::set_policy(const std::string& name) {
    std::unique_ptr<experts::CachePolicy> p = experts::make_policy(name == "pinned" ? "lru" : name, slots_);
    if (!cached_) return;  // every expert resident: nothing to evict, nothing to rank
    // Residents move over in the old policy's eviction order, so recency survives the switch.
    for (const experts::ExpertKey k : policy_->eviction_order()) p->on_insert(k);
    policy_ = std::move(p);
}

void CudaForward::set_pinned(std::vector<experts::ExpertKey> keys) {
    if (keys.empty()) return;
    throw Error("pinned experts apply to the expert cache in RAM; the GPU's cache (" + name_ +
                ") ranks every slot by its policy: load the model on the CPU to pin experts");
}

void CudaForward::wait_idle() {
    set_device(device_);
    copy_.synchronize("waiting for the GPU's expert copies");
}

}  // namespace strata::backend::cuda::pass
