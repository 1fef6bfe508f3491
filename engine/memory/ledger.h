// The ledger (DESIGN.md §4): every byte the engine holds in a memory tier is an
// entry here, under an account. Allocation goes through it, and an allocation
// that would push a tier over its budget fails with a message that names the
// account and the numbers, before any memory is touched.
//
// Tiers are generic: "fast" is the memory compute reads from (RAM on a CPU-only
// machine, VRAM with a GPU), "slow" is where the experts live (the model file,
// read with O_DIRECT, on a CPU-only machine; pinned host RAM with a GPU). Each
// tier carries a human description that the caller may replace.
//
// Reserved bytes are what an account holds; used bytes are the part of that
// holding filled with live data (e.g. expert slots that hold an expert).
// Thread-safe: one mutex, held for a few arithmetic operations.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace strata::memory {

enum class Tier { Fast, Slow };
inline constexpr int kTierCount = 2;

enum class Account {
    WeightsShared,    // "weights.shared": embeddings, attention, norms, dense FFNs, shared experts, output head
    WeightsRouter,    // "weights.router": the MoE routers
    ExpertsCache,     // "experts.cache": unpinned expert slots
    ExpertsPinned,    // "experts.pinned": slots of experts pinned from calibration statistics
    KvPages,          // "kv.pages": the KV cache
    Activations,      // "activations": forward-pass scratch and logits
    TransferBuffers,  // "transfer.buffers": staging for in-flight expert loads
    DraftModel,       // "draft.model": a speculative-decoding draft model
    RuntimeReserve,   // "runtime.reserve": allocator slack, thread stacks, tables
    ExpertsHome,      // "experts.home": every routed expert's home copy (slow tier)
    RecurrentState,   // "recurrent.state": the recurrent models' per-sequence state (gated delta nets)
};
inline constexpr int kAccountCount = 11;

const char* account_name(Account a);  // "weights.shared", ...
const char* tier_name(Tier t);        // "fast", "slow"
// The default description of a tier on a CPU-only machine.
const char* tier_default_description(Tier t);

// Formats a byte count as "12.34 MiB" (binary units, as the CLI does).
std::string format_bytes(uint64_t bytes);

// Where a tier's memory is placed on a machine with several NUMA nodes (the
// engine's numa policy, platform/numa.h). Every AlignedBuffer and expert
// slot arena of the tier applies it before its memory is first touched.
struct Placement {
    enum Kind : uint8_t { Default, Bind, Interleave };
    Kind kind = Default;  // Default: the kernel's first touch
    int node = -1;        // Bind: the node
};

struct LedgerRow {
    Account account;
    Tier tier;
    uint64_t reserved = 0;
    uint64_t used = 0;
};

class Ledger {
public:
    static constexpr uint64_t kUnlimited = UINT64_MAX;

    Ledger();
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;

    // Throws strata::Error when `bytes` is below what the tier already holds
    // (the message gives both numbers and the accounts holding the bytes).
    void set_budget(Tier t, uint64_t bytes);
    uint64_t budget(Tier t) const;

    void set_description(Tier t, std::string text);
    std::string description(Tier t) const;

    // NUMA placement of the tier's buffers allocated from now on.
    void set_placement(Tier t, Placement p);
    Placement placement(Tier t) const;

    // Adds `bytes` to the account's reservation in tier `t`. Throws
    // strata::Error, naming the account, what it asks for, what is free of the
    // budget and who holds the rest, when the tier's budget would be exceeded.
    void reserve(Account a, Tier t, uint64_t bytes);
    // As reserve(), but returns false (and changes nothing) instead of throwing.
    bool try_reserve(Account a, Tier t, uint64_t bytes);
    // Gives bytes back. Releasing more than the account holds is a bug in the
    // caller: throws strata::Error (and changes nothing). Used bytes above the
    // new reservation are clamped to it.
    void release(Account a, Tier t, uint64_t bytes);

    // Used bytes of an account: at most what it has reserved (throws otherwise).
    void set_used(Account a, Tier t, uint64_t bytes);
    // Adds `delta` (may be negative) to the used bytes; same bounds as set_used.
    void adjust_used(Account a, Tier t, int64_t delta);

    uint64_t reserved(Tier t) const;
    uint64_t reserved(Account a, Tier t) const;
    uint64_t used(Tier t) const;
    uint64_t used(Account a, Tier t) const;
    // Budget minus reserved (kUnlimited when the tier has no budget).
    uint64_t free(Tier t) const;
    // High-water mark of reserved(t) since construction or reset_peak().
    uint64_t peak_reserved(Tier t) const;
    void reset_peak(Tier t);

    // Non-zero rows (reserved or used), fast tier first, each tier in account order.
    std::vector<LedgerRow> rows() const;

private:
    struct Cell {
        uint64_t reserved = 0;
        uint64_t used = 0;
    };
    Cell& cell(Account a, Tier t) { return cells_[static_cast<int>(t)][static_cast<int>(a)]; }
    const Cell& cell(Account a, Tier t) const { return cells_[static_cast<int>(t)][static_cast<int>(a)]; }
    std::string holders_locked(Tier t) const;  // "weights.shared 1.00 MiB, kv.pages 2.00 MiB"
    bool fits_locked(Tier t, uint64_t bytes) const;
    void add_locked(Account a, Tier t, uint64_t bytes);

    mutable std::mutex mu_;
    std::array<std::array<Cell, kAccountCount>, kTierCount> cells_{};
    std::array<uint64_t, kTierCount> budget_{kUnlimited, kUnlimited};
    std::array<uint64_t, kTierCount> total_{};
    std::array<uint64_t, kTierCount> peak_{};
    std::array<std::string, kTierCount> description_;
    std::array<Placement, kTierCount> placement_{};
};

}  // namespace strata::memory
