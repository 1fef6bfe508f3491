// What the engine reports about itself: one snapshot, taken a few times per
// second by the app and once per run by the CLI. Panels render these figures;
// they never compute one themselves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LedgerEntry {
    std::string account;   // "weights.shared", "experts.cache", ...
    std::string tier;      // "fast" / "slow"
    uint64_t reserved = 0;
    uint64_t used = 0;
};

struct TelemetrySnapshot {
    // Throughput.
    int64_t tokens_processed = 0;       // forward-pass tokens since load (prompt + generated)
    double compute_seconds = 0.0;       // wall time inside the forward pass

    // Expert cache.
    double hit_rate_total = 0.0;        // since load
    double hit_rate_recent = 0.0;       // over the last ~64 tokens
    double bytes_loaded_per_token = 0.0;
    uint64_t bytes_loaded = 0;
    double stall_fraction = 0.0;        // forward-pass time blocked on expert loads
    double prefetch_precision = 0.0;    // prefetched experts the router then chose
    double prefetch_recall = 0.0;       // chosen experts that had been prefetched
    int64_t expert_slots = 0;
    uint64_t expert_slot_bytes = 0;
    std::string policy;
    // On a GPU with an expert cache: the placement setting and each missing
    // expert's path (expert-steps since load): computed on the CPU, copied
    // over the link, or both (the CPU now, a background copy for later).
    std::string placement;
    uint64_t miss_cpu = 0, miss_link = 0, miss_both = 0;

    // Per (layer, expert), row-major [n_layer][n_expert]: recent share of
    // activations (decays by half every ~32 tokens) and residency
    // (0 absent, 1 loading, 2 resident, 3 pinned, 4 computed on the CPU
    // recently: a GPU's hybrid placement or --cpu-moe layer).
    int64_t n_layer = 0;
    int64_t n_expert = 0;
    std::vector<float> heat;
    std::vector<uint8_t> residency;

    std::vector<LedgerEntry> ledger;
    std::string fast_tier = "RAM";        // what the tiers are: "RAM", "VRAM (NVIDIA H200)"
    std::string slow_tier = "model file"; // "model file", "pinned host RAM"
    std::string device;                   // which device computes and why (Engine::device)
    uint64_t fast_budget = 0;           // 0 = none
    uint64_t slow_budget = 0;

    // The CPU kernels: their level ("avx512", "avx2vnni", "avx2", "ref") and how many of
    // the model's weight bytes are rewritten in place into their layout as
    // they load (the shared weights once, each expert on every load into the
    // cache; 0 where the file's layout is kept).
    std::string kernels;
    uint64_t repacked_bytes = 0;
};

}  // namespace strata
