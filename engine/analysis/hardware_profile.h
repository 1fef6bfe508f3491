// Hardware (and optionally model) profiles the simulator projects a trace
// onto. Units: bytes and bytes/s with decimal prefixes (1 GB = 1e9 B), like
// the bandwidth figures they are quoted with.
//
// A profile's model figures are optional: where they are 0 the trace's own
// model fills them (fill_model), so "--profile cpu-nvme" projects the traced
// model onto that machine, while "--profile seed-125b" projects the trace's
// routing pattern onto the 125B reference model (DESIGN.md §1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::experts {

struct HardwareProfile {
    std::string name;
    std::string description;

    // Model (0 = from the trace).
    int64_t n_layer = 0;
    int64_t moe_layers = 0;
    int64_t n_expert = 0;       // per MoE layer
    int64_t n_used = 0;         // routed per token
    double expert_bytes = 0;    // one expert of one layer
    double shared_bytes = 0;    // weights every token reads besides its experts (resident)

    // Fast tier (where experts are computed) and the link that fills it.
    double fast_bytes = 0;      // capacity
    double fast_bps = 0;        // bandwidth, bytes/s
    double reserve_bytes = 0;   // runtime reserve
    double kv_bytes = 0;        // KV cache
    double link_bps = 0;        // slow -> fast transfer, bytes/s, one direction
    double slow_bytes = 0;      // slow tier capacity
    double slow_bps = 0;        // slow tier bandwidth

    // Hybrid execution (hybrid_sim.h): the CPU computing experts where they
    // live (host RAM), beside the GPU. 0: none (no hybrid projection).
    double cpu_bps = 0;         // weight bytes/s the CPU's expert kernels stream at batch 1
    double cpu_flops = 0;       // flop/s of the CPU's expert kernels over many tokens
    double gpu_flops = 0;       // flop/s of the GPU's expert kernels over many tokens
    double expert_params = 0;   // parameters of one expert (0: expert_bytes at 4.5 bits each)
    bool has_hybrid() const { return cpu_bps > 0 && cpu_flops > 0 && gpu_flops > 0; }
    double params_per_expert() const { return expert_params > 0 ? expert_params : expert_bytes * 8.0 / 4.5; }

    bool has_model() const { return moe_layers > 0 && n_expert > 0 && n_used > 0 && expert_bytes > 0; }
    // Fills the model figures that are 0 from a trace's model.
    void fill_model(int64_t layers, int64_t moe, int64_t experts, int64_t used, double expert_b, double shared_b);
    int64_t total_experts() const { return moe_layers * n_expert; }
    int64_t uses_per_token() const { return moe_layers * n_used; }
    // Fast-tier bytes left for expert slots: capacity - reserve - KV - shared.
    double cache_bytes() const;
    // Expert slots that fit in cache_bytes(), at most total_experts().
    int64_t cache_slots() const;

    // Overrides one figure by key ("link-gbs=13"); throws strata::Error for an
    // unknown key or a bad value. keys() lists them with their units.
    void set(const std::string& key, const std::string& value);
    static std::vector<std::pair<std::string, std::string>> keys();
    // Throws strata::Error when a figure is missing or out of range.
    void validate() const;
    // Multi-line human description of every figure.
    std::string describe() const;
};

// Named profiles: "seed-125b" (DESIGN.md §1, exactly), "pcie3-24g" (the same
// machine, model from the trace), "cpu-nvme" (no GPU: RAM cache, model on an
// NVMe SSD). Throws strata::Error for an unknown name, listing the known ones.
HardwareProfile hardware_profile(const std::string& name);
std::vector<std::string> hardware_profile_names();

}  // namespace strata::experts
