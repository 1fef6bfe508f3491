// The plan (DESIGN.md §4): the whole ledger table for a model and a set of
// settings, computed before the model's weights are touched, so the app and
// the CLI can say "fits / does not fit, and why" before loading.
//
// Tiers on a CPU-only machine: fast = the RAM the engine may hold (shared
// weights copied out of the file, expert slots, KV, activations, transfer
// buffers, runtime reserve); slow = where the experts live (the model file,
// read with O_DIRECT). With a GPU: fast = VRAM, slow = pinned host RAM.
//
// Accounts and what they are planned as:
//   weights.shared    every tensor byte except routed experts and routers
//   weights.router    the MoE routers (ffn_gate_inp)
//   experts.pinned    pinned_experts slots (never evicted)
//   experts.cache     the unpinned expert slots: all slots live in huge-page
//                     arenas, so together the two hold expert_slots_bytes()
//                     (slots x slot bytes, each arena rounded up to 2 MiB);
//                     experts.pinned counts pinned x slot bytes of it
//   kv.pages          kv_tokens rounded up to blocks of kv_block_tokens, each
//                     block 2 * n_layer * n_head_kv * head_dim * block_tokens
//                     elements (f32, or int8 + per-head scales); rounded to 2 MiB
//                     (huge pages) from 2 MiB up, else to 4096
//   activations       forward-pass scratch for n_batch tokens (formula in plan.cpp)
//   transfer.buffers  transfer_buffers slots of staging when prefetch is on and
//                     not every expert has a slot
//   draft.model       draft_model_bytes (speculative decoding; 0 without a draft)
//   runtime.reserve   runtime_reserve
//   experts.home      slow tier: every routed expert's bytes in the file
//   recurrent.state   a recurrent model's state per sequence (its delta nets'
//                     conv inputs and state matrices) x state_sequences
//
// Slot counts: expert_slots counts every slot of the expert cache, pinned ones
// included (experts.pinned holds pinned_experts of them, experts.cache the
// rest), so cache_fraction = expert_slots / experts_total.
//
// Resident minimum (fast tier) = shared + router + KV + activations + draft +
// runtime reserve + pinned slots + n_expert_used unpinned slots (the fewest with
// which a MoE layer can be computed at all). Transfer buffers are not part of
// it: under pressure they give way first, then unpinned cache slots.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "platform/numa.h"
#include "kv/kv_cache.h"
#include "memory/ledger.h"

namespace strata::model {
class Model;
struct FfnMatrices;
}  // namespace strata::model

namespace strata::memory {

struct PlanSettings {
    // 0: automatic, what the machine has for the fast tier (fast_available)
    // minus memory::default_budget_reserve, or no budget when fast_available
    // is 0 (unknown); Ledger::kUnlimited: no budget.
    uint64_t fast_budget = 0;
    uint64_t fast_available = 0;         // free RAM (VRAM with a GPU) when planned; 0: unknown
    // Bytes of fast_available's tier a loaded engine holds now and gives back
    // when it unloads, which it does before the planned load (the app's plan
    // for a reload or a model switch): counted as available on top of
    // fast_available (only when that is known). 0: nothing loaded.
    uint64_t fast_returned = 0;
    uint64_t slow_budget = 0;            // 0: unlimited
    double expert_cache_fraction = -1;   // of all routed experts, in (0, 1]; <0: every expert that fits the
                                         // fast budget, or all of them without a budget
    int64_t expert_slots = -1;           // >0: explicit slot count (pinned included); overrides the fraction
    int64_t pinned_experts = 0;          // experts pinned from a calibration file
    int64_t n_ctx = 0;                   // 0: the model's training context, at most 4096 (as Context does)
    int64_t n_batch = 256;               // largest forward chunk (capped at n_ctx, as Context does)
    int threads = 1;                     // compute threads (per-thread scratch); 0: all hardware threads
    int64_t kv_tokens = 0;               // KV pool size in tokens over all sequences; 0: one sequence of n_ctx
    int64_t kv_block_tokens = 16;
    kv::KvType kv_type = kv::KvType::F32;
    bool prefetch = true;
    int64_t transfer_buffers = 2;        // slots of staging for in-flight loads while prefetching
    uint64_t draft_model_bytes = 0;
    // On a GPU: the experts of the first N MoE layers (-1: all) are computed
    // on the CPU from host RAM, so they take no expert slot (experts_total
    // and the cache count the others; experts.home still holds them all).
    int64_t cpu_moe_layers = 0;
    // The fast tier is VRAM and the slow tier host RAM. Where a slow budget is
    // below every routed expert, host RAM holds a cache of them over the model
    // file (three tiers: VRAM, host RAM, file); where VRAM holds every expert
    // (and none is left to the CPU), host RAM holds none.
    bool gpu = false;
    uint64_t runtime_reserve = 64ull << 20;
    std::string numa = "auto";           // auto | off | bind | bind:N | interleave (platform/numa.h)
};

struct Plan {
    std::vector<LedgerRow> rows;     // every account, reserved = planned bytes (used = 0); fast tier first
    std::vector<std::string> notes;  // one per row: what the bytes are
    uint64_t fast_budget = Ledger::kUnlimited;
    uint64_t slow_budget = Ledger::kUnlimited;
    bool fast_budget_auto = false;   // fast_budget came from fast_available (automatic)
    uint64_t fast_available = 0;     // what the machine has for the fast tier at the load (0: unknown),
                                     // fast_returned included
    uint64_t fast_returned = 0;      // of it, held by the loaded engine until it unloads
    uint64_t fast_total = 0;         // sum of the fast rows
    uint64_t slow_total = 0;
    uint64_t resident_minimum = 0;   // fewest fast bytes with which the model runs at all
    int64_t expert_slots = 0;        // pinned included
    int64_t minimum_slots = 0;       // slots counted in the resident minimum (pinned + n_expert_used)
    int64_t pinned_experts = 0;
    int64_t experts_total = 0;       // routed experts over all MoE layers
    int64_t moe_layers = 0;
    int64_t n_expert_used = 0;
    uint64_t slot_bytes = 0;         // one slot: the largest expert, each of gate/up/down as a 4096-aligned window
    double cache_fraction = 0;       // expert_slots / experts_total (1 for a dense model)
    int64_t transfer_buffers = 0;    // planned staging slots (0 when they gave way or are not needed)
    // On a GPU with three tiers: experts cached in host RAM over the model
    // file (0: two tiers, every expert's copy in host RAM or none needed).
    int64_t host_slots = 0;
    int64_t host_experts = 0;        // the routed experts host RAM serves (all MoE layers)
    int64_t n_ctx = 0, n_batch = 0;
    int64_t kv_blocks = 0, kv_block_tokens = 0;
    kv::KvType kv_type = kv::KvType::F32;
    // A recurrent model (gated delta nets): each sequence's state, and the sequences
    // reserved up front (the context's own and one a full context of KV
    // holds; more reserve theirs as they start).
    uint64_t state_bytes_per_sequence = 0;
    int64_t state_sequences = 0;
    int threads = 0;
    cpu::NumaTopology numa_topology;  // this machine's
    cpu::NumaDecision numa;          // what the numa setting means here for fast_total
    std::string numa_policy;         // the setting ("auto", "bind:0", ...)
    std::string huge_pages;          // transparent huge pages: "always", "madvise", "never", "unavailable"
    std::string kernels;             // the CPU kernel level ("avx512", "avx2vnni", "avx2", "ref")
    uint64_t repacked_bytes = 0;     // weight bytes repacked on load for those kernels, in place (no row of its own)
    std::string model;               // "name (arch, 4 layers, 8 experts top-2)"
    // On a device: the ops it leaves to the CPU and what they cost per token
    // (model/op_fallback.h CpuOpsCost::describe), or why it cannot run the
    // model; empty where it computes every op, and on the CPU. The caller
    // fills it in (the plan knows sizes, not ops).
    std::string device_ops;
    bool fits = false;
    std::string reason;              // "fits: ..." or "does not fit: ... ; what to do"

    uint64_t bytes(Account a) const;  // the planned bytes of an account
    std::string to_table() const;     // account, tier, bytes, note; totals per tier vs budget; verdict
    std::string to_json() const;      // one JSON object
};

// What the plan needs to know of a model: sizes, not weights (the model's
// side, model/plan_model.h, fills it in from a loaded model).
struct PlanModel {
    std::string description;          // "'name' (arch, 4 layers"; the plan adds the MoE part
    int64_t n_layer = 0, n_expert = 0, n_expert_used = 0, n_ctx_train = 0;
    struct MoeLayer {
        uint64_t router_bytes = 0;
        int64_t experts = 0;
        uint64_t max_slot_bytes = 0;  // expert_slot_bytes of its largest expert
    };
    std::vector<MoeLayer> moe_layers;  // in layer order
    uint64_t experts_bytes = 0;        // every routed expert
    // Everything but routed experts and routers that the fast tier holds (the
    // file's tensors plus what the load derives from them, less what stays in the file).
    uint64_t shared_bytes = 0;
    uint64_t repack_bytes = 0;         // bytes repacked on load for the CPU kernels
    kv::KvCacheParams kv;              // the cache's shape (n_layer, n_head_kv, head_dim, keys_only)
    std::string kv_entry;              // what one token's entry in a layer is ("K+V", "MLA latent (512 + 64)")
    int64_t kv_entry_elems = 0;        // its elements
    int64_t kv_per_head_elems = 0;     // latent entries: the per-head K+V they replace (0: not latent)
    // Forward-pass scratch for (batch, context, threads) bytes.
    std::function<uint64_t(int64_t n_batch, int64_t n_ctx, int64_t threads)> activation_bytes;
};

// Throws strata::Error for bad settings (fraction outside (0, 1], zero slots,
// fewer slots than one token needs in a layer, more pinned experts than the
// model has, negative sizes). A budget too small is not an error: the plan says
// so (fits = false, with the reason).
Plan make_plan(const PlanModel& m, const PlanSettings& s);

// The file window an O_DIRECT read of [offset, offset + bytes) covers: from
// offset rounded down to 4096 to offset + bytes rounded up to 4096.
uint64_t direct_read_window(uint64_t offset, uint64_t bytes);

// Expert slots live in arenas of expert_slots_per_arena() slots, each a
// 2 MiB-aligned mapping advised MADV_HUGEPAGE. An arena holding n slots
// reserves n x slot_bytes rounded up to 2 MiB (what huge pages can touch).
// The arena size is the least common multiple of the slot and 2 MiB when that
// is at most 1 GiB (so full arenas waste nothing and `slots` slots take
// slots x slot_bytes rounded up to 2 MiB once), else about 256 MiB of slots.
// Arenas pay only for a cache of some size: when all the model's experts take
// less than kExpertArenaMinBytes the slots are 4 KiB-granular mappings of one
// slot each, without huge pages (the whole cache is a few huge pages at most,
// TLB reach does not matter, and a 2 MiB rounding would be a large share of it):
// expert_slots_per_arena() is then 0 and the slots take slots x slot_bytes.
inline constexpr uint64_t kExpertArenaMinBytes = 8ull << 20;
int64_t expert_slots_per_arena(uint64_t slot_bytes, int64_t experts_total);
// The fast-tier bytes `slots` slots reserve (the expert store and the plan agree on it).
uint64_t expert_slots_bytes(uint64_t slot_bytes, int64_t experts_total, int64_t slots);
// The most slots (at most `cap` = experts_total) whose expert_slots_bytes fit in `bytes`.
int64_t expert_slots_within(uint64_t slot_bytes, int64_t experts_total, uint64_t bytes);

// Sets the ledger's tier budgets from the plan.
void apply_budgets(const Plan& p, Ledger& ledger);

}  // namespace strata::memory
