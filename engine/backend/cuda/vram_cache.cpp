// The CUDA pass's VRAM expert cache as the engine sees any expert cache
// (experts/expert_cache.h): its figures, residency, and the live settings.
// The slots themselves (loads on the copy stream, eviction, waves) are the
// pass's (cuda_forward.cpp), since each load is ordered against its compute.
#include <algorithm>

#include "backend/cuda/cuda_pass.h"
#include "common/error.h"

namespace strata::backend::cuda::pass {

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
