#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "kernels/dispatch.h"
#include "memory/aligned_buffer.h"
#include "memory/system_memory.h"

namespace strata::memory {

namespace {

constexpr uint64_t kPage = 4096;


std::string pct(double f) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f%%", f * 100.0);
    return b;
}

std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o + "\"";
}


struct Totals {
    uint64_t shared = 0, router = 0, experts = 0, slot = 0;
    int64_t total = 0, moe_layers = 0;
};

// A buffer of `bytes` on 2 MiB huge pages from 2 MiB up (the KV pool, the
// resident shared and router weights), as AlignedBuffer reserves it: whole
// huge pages from 2 MiB up, else `bytes` rounded to `small_page`.
uint64_t reserved_bytes(uint64_t bytes, uint64_t small_page) {
    const uint64_t page = bytes >= AlignedBuffer::kHugePage ? AlignedBuffer::kHugePage : small_page;
    return (bytes + page - 1) / page * page;
}

// cpu_moe_layers: the experts of the first N MoE layers (-1: all) stay out of
// the fast tier's cache (a GPU leaves them to the CPU, in host RAM).
Totals measure(const PlanModel& m, int64_t cpu_moe_layers) {
    Totals t;
    for (const PlanModel::MoeLayer& L : m.moe_layers) {
        const bool on_cpu = cpu_moe_layers < 0 || t.moe_layers < cpu_moe_layers;
        ++t.moe_layers;
        t.router += L.router_bytes;
        if (on_cpu) continue;
        t.total += L.experts;
        t.slot = std::max(t.slot, L.max_slot_bytes);
    }
    t.experts = m.experts_bytes;
    // Small weight buffers are counted by their bytes (the file's tensors add up exactly).
    t.shared = reserved_bytes(m.shared_bytes, 1);
    t.router = reserved_bytes(t.router, 1);
    return t;
}

uint64_t mul(uint64_t a, int64_t n) { return a * static_cast<uint64_t>(n); }

}  // namespace

uint64_t direct_read_window(uint64_t offset, uint64_t bytes) {
    if (bytes == 0) return 0;
    const uint64_t start = offset / kPage * kPage;
    const uint64_t end = (offset + bytes + kPage - 1) / kPage * kPage;
    return end - start;
}

int64_t expert_slots_per_arena(uint64_t slot, int64_t total) {
    constexpr uint64_t kHuge = 2ull << 20;
    if (slot == 0 || total <= 0 || slot * static_cast<uint64_t>(total) < kExpertArenaMinBytes) return 0;
    const uint64_t g = std::gcd(slot, kHuge);
    const uint64_t lcm = slot / g * kHuge;
    if (lcm <= (1ull << 30)) return static_cast<int64_t>(lcm / slot);
    return std::max<int64_t>(1, static_cast<int64_t>((256ull << 20) / slot));
}

uint64_t expert_slots_bytes(uint64_t slot, int64_t total, int64_t slots) {
    if (slots <= 0 || slot == 0) return 0;
    const int64_t k = expert_slots_per_arena(slot, total);
    if (k == 0) return slot * static_cast<uint64_t>(slots);
    constexpr uint64_t kHuge = 2ull << 20;
    auto rnd = [](uint64_t v) { return (v + kHuge - 1) / kHuge * kHuge; };
    const uint64_t full = static_cast<uint64_t>(slots / k), rest = static_cast<uint64_t>(slots % k);
    return full * rnd(static_cast<uint64_t>(k) * slot) + rnd(rest * slot);
}

int64_t expert_slots_within(uint64_t slot, int64_t total, uint64_t bytes) {
    if (total <= 0 || slot == 0) return 0;
    if (expert_slots_bytes(slot, total, total) <= bytes) return total;
    // expert_slots_bytes is non-decreasing in the count: binary search.
    int64_t lo = 0, hi = total;  // fits(lo), !fits(hi)
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (expert_slots_bytes(slot, total, mid) <= bytes ? lo : hi) = mid;
    }
    return lo;
}

Plan make_plan(const PlanModel& m, const PlanSettings& s) {

    // --- settings -------------------------------------------------------------
    if (std::isnan(s.expert_cache_fraction) ||
        (s.expert_cache_fraction >= 0 && (s.expert_cache_fraction == 0 || s.expert_cache_fraction > 1))) {
        char b[64];
        std::snprintf(b, sizeof b, "%g", s.expert_cache_fraction);
        throw Error(std::string("expert cache fraction ") + b +
                    " is outside (0, 1]: it is the share of all routed experts that get a slot (e.g. 0.25)");
    }
    if (s.expert_slots == 0)
        throw Error("zero slots: the expert cache needs at least " + std::to_string(std::max<int64_t>(m.n_expert_used, 1)) +
                    " slots (the experts one token uses in a layer)");
    if (s.pinned_experts < 0) throw Error("the number of pinned experts cannot be negative");
    if (s.n_ctx < 0) throw Error("the context size cannot be negative (0: the model's own)");
    if (s.n_batch < 1) throw Error("the batch size must be at least 1 token");
    if (s.transfer_buffers < 0) throw Error("the number of transfer buffers cannot be negative");
    if (s.threads < 0) throw Error("the thread count cannot be negative (0: all hardware threads)");
    if (s.kv_tokens < 0) throw Error("the KV cache size cannot be negative (0: one sequence of the context size)");
    if (s.kv_block_tokens < 1 || s.kv_block_tokens > 4096)
        throw Error("the KV block size must be 1..4096 tokens (got " + std::to_string(s.kv_block_tokens) + ")");
    cpu::NumaPolicy numa_policy;
    if (const std::string err = cpu::parse_numa_policy(s.numa, &numa_policy); !err.empty()) throw Error(err);

    const Totals t = measure(m, s.cpu_moe_layers);
    Plan p;
    // What the machine will have when the load starts: free now, plus what a
    // loaded engine gives back first (a reload or a model switch unloads it).
    p.fast_returned = s.fast_available > 0 ? s.fast_returned : 0;
    p.fast_available = s.fast_available + p.fast_returned;
    if (s.fast_budget == 0) {
        const uint64_t automatic = auto_budget(p.fast_available);
        p.fast_budget_auto = automatic > 0 || p.fast_available > 0;
        // Nothing left after the reserve still is a budget (of a page): the
        // verdict then says the machine has no room, rather than planning unlimited.
        p.fast_budget = p.fast_budget_auto ? std::max<uint64_t>(automatic, 4096) : Ledger::kUnlimited;
    } else {
        p.fast_budget = s.fast_budget;
    }
    p.slow_budget = s.slow_budget == 0 ? Ledger::kUnlimited : s.slow_budget;
    p.experts_total = t.total;
    p.moe_layers = t.moe_layers;
    p.n_expert_used = m.n_expert_used;
    p.slot_bytes = t.slot;
    p.n_ctx = s.n_ctx > 0 ? s.n_ctx : std::min<int64_t>(m.n_ctx_train > 0 ? m.n_ctx_train : 4096, 4096);
    p.n_batch = std::min(s.n_batch, p.n_ctx);
    p.threads = s.threads > 0 ? s.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    {
        std::ostringstream os;
        os << m.description;
        if (t.total > 0) os << ", " << t.moe_layers << " MoE x " << m.n_expert << " experts top-" << m.n_expert_used;
        os << ")";
        p.model = os.str();
    }

    if (s.pinned_experts > t.total)
        throw Error(std::to_string(s.pinned_experts) + " pinned experts, but the model has only " +
                    std::to_string(t.total) + " routed experts");
    p.pinned_experts = s.pinned_experts;

    kv::KvCacheParams kvp = m.kv;
    kvp.n_blocks = 0;
    kvp.block_tokens = s.kv_block_tokens;
    kvp.type = s.kv_type;
    p.kv_block_tokens = s.kv_block_tokens;
    p.kv_type = s.kv_type;
    p.kv_blocks = kvp.blocks_for(s.kv_tokens > 0 ? s.kv_tokens : p.n_ctx);
    const uint64_t kv = reserved_bytes(mul(kvp.block_bytes(), p.kv_blocks), 4096);
    p.state_bytes_per_sequence = static_cast<uint64_t>(kvp.state_floats) * sizeof(float);
    p.state_sequences = kvp.state_floats > 0 ? 1 + std::max<int64_t>(1, p.kv_blocks * p.kv_block_tokens / p.n_ctx) : 0;
    const uint64_t state = mul(p.state_bytes_per_sequence, p.state_sequences);
    const uint64_t act = m.activation_bytes ? m.activation_bytes(p.n_batch, p.n_ctx, p.threads) : 0;
    const uint64_t pinned = mul(t.slot, p.pinned_experts);
    // Everything but the expert slots; slots are counted as expert_slots_bytes().
    const uint64_t base = t.shared + t.router + kv + state + act + s.draft_model_bytes + s.runtime_reserve;
    auto slots_bytes = [&](int64_t n) { return expert_slots_bytes(t.slot, t.total, n); };
    // Unpinned slots a MoE layer needs at the least (fewer when pinning covers almost everything).
    const int64_t unpinned_min = t.total > 0 ? std::min(std::max<int64_t>(m.n_expert_used, 1), t.total - p.pinned_experts) : 0;
    const int64_t min_slots = p.pinned_experts + unpinned_min;
    p.resident_minimum = base + slots_bytes(min_slots);
    const uint64_t transfer_want = (s.prefetch && t.total > 0) ? mul(t.slot, s.transfer_buffers) : 0;
    const bool limited = p.fast_budget != Ledger::kUnlimited;

    std::vector<std::string> notes;  // remarks appended to the verdict
    // --- expert slots -----------------------------------------------------------
    bool explicit_slots = false;
    int64_t slots = 0;
    if (t.total == 0) {
        slots = 0;
    } else if (s.expert_slots > 0) {
        explicit_slots = true;
        if (s.expert_slots < min_slots) {
            throw Error("too few expert slots (" + std::to_string(s.expert_slots) + "): a layer needs " +
                        std::to_string(unpinned_min) + " unpinned slots (the experts one token uses)" +
                        (p.pinned_experts > 0 ? " besides the " + std::to_string(p.pinned_experts) + " pinned ones" : "") +
                        "; use at least " + std::to_string(min_slots));
        }
        slots = std::min(s.expert_slots, t.total);
        if (s.expert_slots > t.total)
            notes.push_back(std::to_string(s.expert_slots) + " slots asked, the model has " + std::to_string(t.total) +
                            " experts");
    } else if (s.expert_cache_fraction > 0) {
        explicit_slots = true;
        slots = std::llround(s.expert_cache_fraction * static_cast<double>(t.total));
        if (slots < min_slots) {
            notes.push_back("a fraction of " + pct(s.expert_cache_fraction) + " gives fewer slots than the minimum, raised to " +
                            std::to_string(min_slots));
            slots = min_slots;
        }
    } else if (!limited) {
        slots = t.total;
    } else {
        slots = min_slots;  // the budget decides below
    }

    // --- fit ----------------------------------------------------------------------
    uint64_t transfer = 0;
    std::string why_not;
    if (!limited) {
        transfer = slots < t.total ? transfer_want : 0;
    } else if (p.resident_minimum > p.fast_budget) {
        transfer = slots < t.total ? transfer_want : 0;
        std::ostringstream os;
        os << "the fast budget of " << format_bytes(p.fast_budget) << " is below the resident minimum of "
           << format_bytes(p.resident_minimum) << " (weights.shared " << format_bytes(t.shared) << ", weights.router "
           << format_bytes(t.router) << ", kv.pages " << format_bytes(kv) << " for " << p.kv_blocks * p.kv_block_tokens
           << " tokens, activations " << format_bytes(act) << ", runtime.reserve " << format_bytes(s.runtime_reserve);
        if (state) os << ", recurrent.state " << format_bytes(state);
        if (s.draft_model_bytes) os << ", draft.model " << format_bytes(s.draft_model_bytes);
        if (t.total > 0) os << ", " << min_slots << " expert slots " << format_bytes(slots_bytes(min_slots));
        os << "); raise the fast budget to at least " << format_bytes(p.resident_minimum)
           << ", or shorten the context";
        why_not = os.str();
    } else if (!explicit_slots) {
        // Every expert that fits: transfer buffers give way first when room is short.
        const uint64_t room = p.fast_budget - base;
        if (room >= slots_bytes(t.total)) {
            slots = t.total;
        } else {
            transfer = transfer_want;
            if (room < slots_bytes(min_slots) + transfer) {
                transfer = 0;
                if (transfer_want) notes.push_back("no room for transfer buffers: they gave way (prefetch reads go straight into slots)");
            }
            slots = std::max(min_slots, expert_slots_within(t.slot, t.total, room - transfer));
        }
    } else {
        transfer = slots < t.total ? transfer_want : 0;
        const uint64_t need = base + slots_bytes(slots);
        if (need <= p.fast_budget && need + transfer > p.fast_budget) {
            transfer = 0;
            notes.push_back("no room for transfer buffers: they gave way (prefetch reads go straight into slots)");
        }
        if (need > p.fast_budget) {
            const int64_t fit_slots =
                p.fast_budget > base ? expert_slots_within(t.slot, t.total, p.fast_budget - base) : 0;
            std::ostringstream os;
            os << "experts.cache needs " << format_bytes(slots_bytes(slots) - pinned) << " for "
               << slots - p.pinned_experts << " slots of " << format_bytes(t.slot) << ", which takes the fast tier to "
               << format_bytes(need) << ", " << format_bytes(need - p.fast_budget) << " over its budget of "
               << format_bytes(p.fast_budget) << "; raise the fast budget to at least " << format_bytes(need)
               << ", or lower the expert cache to at most " << fit_slots << " slots (fraction "
               << pct(static_cast<double>(fit_slots) / static_cast<double>(t.total)) << ")";
            why_not = os.str();
        }
    }
    p.expert_slots = slots;
    p.minimum_slots = min_slots;
    p.transfer_buffers = t.slot ? static_cast<int64_t>(transfer / t.slot) : 0;
    p.cache_fraction = t.total > 0 ? static_cast<double>(slots) / static_cast<double>(t.total) : 1.0;

    // --- rows ---------------------------------------------------------------------
    auto row = [&](Account a, Tier tier, uint64_t b, std::string note) {
        p.rows.push_back({a, tier, b, 0});
        p.notes.push_back(std::move(note));
    };
    const std::string slot_x = " x " + format_bytes(t.slot);
    row(Account::WeightsShared, Tier::Fast, t.shared, "embeddings, attention, norms, dense/shared FFNs, output head");
    row(Account::WeightsRouter, Tier::Fast, t.router, std::to_string(t.moe_layers) + " routers");
    row(Account::ExpertsCache, Tier::Fast, slots_bytes(slots) - pinned,
        std::to_string(slots - p.pinned_experts) + " slots" + slot_x +
            (slots > 0 && expert_slots_per_arena(t.slot, t.total) > 0 ? ", in 2 MiB huge-page arenas (rounded up)" : ""));
    row(Account::ExpertsPinned, Tier::Fast, pinned, std::to_string(p.pinned_experts) + " pinned slots" + slot_x);
    // Bytes per token and layer of the cache's entries (MLA: one latent row, against per-head K and V).
    const int64_t elem = p.kv_type == kv::KvType::Q8 ? 1 : 4;
    std::string kv_what = std::to_string(p.kv_blocks) + " blocks x " + std::to_string(p.kv_block_tokens) + " tokens x " +
                          std::to_string(m.kv.n_layer) + " layers" +
                          (m.kv.n_layer != m.n_layer ? " (the others keep recurrent.state)" : "") + ", " + m.kv_entry + " " + kv::kv_type_name(p.kv_type) + ": " +
                          format_bytes(static_cast<uint64_t>(m.kv_entry_elems * elem)) + " per token and layer";
    if (m.kv_per_head_elems > 0)
        kv_what += ", against " + format_bytes(static_cast<uint64_t>(m.kv_per_head_elems * elem)) + " for per-head K+V";
    row(Account::KvPages, Tier::Fast, kv, kv_what);
    if (p.state_sequences > 0)
        row(Account::RecurrentState, Tier::Fast, state,
            format_bytes(p.state_bytes_per_sequence) + " per sequence x " + std::to_string(p.state_sequences) +
                " (more as sequences start, within the budget)");
    row(Account::Activations, Tier::Fast, act,
        "batch " + std::to_string(p.n_batch) + ", " + std::to_string(p.threads) + " thread" + (p.threads == 1 ? "" : "s"));
    row(Account::TransferBuffers, Tier::Fast, transfer,
        !s.prefetch || t.total == 0 ? std::string("prefetch off")
        : slots == t.total           ? std::string("none needed: every expert has a slot")
                                     : std::to_string(p.transfer_buffers) + " staging slots" + slot_x);
    row(Account::DraftModel, Tier::Fast, s.draft_model_bytes, s.draft_model_bytes ? "draft model" : "no draft model");
    row(Account::RuntimeReserve, Tier::Fast, s.runtime_reserve, "allocator slack, thread stacks, tables");
    // The slow tier: on the CPU the model file; on a GPU host RAM, with every
    // expert VRAM lacks (a copy of each, or within a slow budget a cache over
    // the file: three tiers).
    int64_t host_experts = 0;
    for (const PlanModel::MoeLayer& L : m.moe_layers) host_experts += L.experts;
    p.host_experts = host_experts;
    const bool all_in_vram = s.gpu && slots >= t.total && s.cpu_moe_layers == 0;
    const bool slow_limited = p.slow_budget != Ledger::kUnlimited;
    if (!s.gpu) {
        row(Account::ExpertsHome, Tier::Slow, t.experts, std::to_string(t.total) + " routed experts in the model file");
    } else if (all_in_vram || host_experts == 0) {
        row(Account::ExpertsHome, Tier::Slow, 0, "none: every routed expert has a VRAM slot");
    } else if (!slow_limited || t.experts <= p.slow_budget) {
        row(Account::ExpertsHome, Tier::Slow, t.experts,
            "a copy of every routed expert (" + std::to_string(host_experts) + ") in pinned host RAM");
    } else {
        const int64_t fit = expert_slots_within(t.slot, host_experts, p.slow_budget);
        const int64_t need = m.n_expert;  // a step may route to every expert of a layer
        if (fit < need) {
            const uint64_t need_bytes = expert_slots_bytes(t.slot, host_experts, need);
            std::ostringstream os;
            os << "the slow budget of " << format_bytes(p.slow_budget) << " holds " << fit
               << " experts in host RAM (slots of " << format_bytes(t.slot) << "); on a GPU it must hold at least "
               << need << ", every expert of one MoE layer (" << format_bytes(need_bytes)
               << "); raise the slow budget to at least " << format_bytes(need_bytes) << " (every expert: "
               << format_bytes(t.experts) << ")";
            if (!why_not.empty()) why_not += "; and ";
            why_not += os.str();
            row(Account::ExpertsCache, Tier::Slow, need_bytes,
                std::to_string(need) + " host slots" + slot_x + " (the fewest that run)");
        } else {
            p.host_slots = fit;
            row(Account::ExpertsCache, Tier::Slow, expert_slots_bytes(t.slot, host_experts, fit),
                std::to_string(fit) + " of " + std::to_string(host_experts) + " routed experts cached in host RAM" + slot_x +
                    ", over the model file (read with O_DIRECT): three tiers");
        }
    }
    for (const LedgerRow& r : p.rows) (r.tier == Tier::Fast ? p.fast_total : p.slow_total) += r.reserved;
    p.numa_policy = s.numa;
    p.numa_topology = cpu::numa_topology();
    p.numa = cpu::decide_numa(numa_policy, p.numa_topology, p.fast_total);
    p.huge_pages = transparent_huge_pages();
    p.kernels = kernels::kernel_level_name(kernels::kernel_level());
    p.repacked_bytes = m.repack_bytes;

    // --- verdict ------------------------------------------------------------------
    if (p.slow_budget != Ledger::kUnlimited && p.slow_total > p.slow_budget && p.host_slots == 0 &&
        why_not.find("slow budget") == std::string::npos) {
        if (!why_not.empty()) why_not += "; and ";
        why_not += "experts.home needs " + format_bytes(p.slow_total) + " in the slow tier (every routed expert), " +
                  format_bytes(p.slow_total - p.slow_budget) + " over its budget of " + format_bytes(p.slow_budget) +
                  "; raise the slow budget to at least " + format_bytes(p.slow_total);
    }
    std::string slots_text;
    if (t.total > 0)
        slots_text = "expert cache " + std::to_string(slots) + " of " + std::to_string(t.total) + " slots (" +
                     pct(p.cache_fraction) + ")";
    // An automatic budget says where it came from, so "raise the budget" is
    // not read as a setting the user made.
    const std::string returned_text =
        p.fast_returned > 0 ? ", " + format_bytes(p.fast_returned) + " of it held by the loaded model until it unloads"
                            : std::string();
    const std::string auto_text =
        p.fast_budget_auto ? " (automatic: " + format_bytes(p.fast_available) + " available on this machine" +
                                 returned_text + (returned_text.empty() ? " minus a " : ", minus a ") +
                                 format_bytes(default_budget_reserve(p.fast_available)) + " reserve)"
                           : std::string();
    if (!why_not.empty() && p.fast_budget_auto && why_not.find("fast budget") != std::string::npos)
        why_not += "; the fast budget was automatic" + auto_text +
                   ": free memory, or set a fast budget explicitly (beyond what is available the system swaps)";
    if (why_not.empty()) {
        p.fits = true;
        std::ostringstream os;
        os << "fits: " << format_bytes(p.fast_total) << " fast"
           << (limited ? " of " + format_bytes(p.fast_budget) + auto_text : std::string(" (no budget given)")) << ", "
           << format_bytes(p.slow_total) << " slow"
           << (p.slow_budget != Ledger::kUnlimited ? " of " + format_bytes(p.slow_budget) : std::string());
        if (!slots_text.empty()) os << "; " << slots_text;
        p.reason = os.str();
    } else {
        p.fits = false;
        p.reason = "does not fit: " + why_not;
    }
    for (const std::string& n : notes) p.reason += "; " + n;
    return p;
}

uint64_t Plan::bytes(Account a) const {
    uint64_t s = 0;
    for (const LedgerRow& r : rows)
        if (r.account == a) s += r.reserved;
    return s;
}

std::string Plan::to_table() const {
    std::ostringstream os;
    char line[256];
    os << "plan for " << model << "\n";
    os << "context " << n_ctx << " tokens, batch " << n_batch << ", " << threads << " thread" << (threads == 1 ? "" : "s");
    if (experts_total > 0) os << ", slot " << format_bytes(slot_bytes);
    os << "\ntiers: fast = " << tier_default_description(Tier::Fast) << "; slow = " << tier_default_description(Tier::Slow)
       << "\n\n";
    std::snprintf(line, sizeof line, "%-18s %-5s %12s  %s\n", "account", "tier", "bytes", "what");
    os << line;
    for (size_t i = 0; i < rows.size(); ++i) {
        std::snprintf(line, sizeof line, "%-18s %-5s %12s  %s\n", account_name(rows[i].account), tier_name(rows[i].tier),
                      format_bytes(rows[i].reserved).c_str(), i < notes.size() ? notes[i].c_str() : "");
        os << line;
    }
    os << "\n";
    auto total_line = [&](Tier t, uint64_t total, uint64_t budget) {
        std::string tail;
        if (budget == Ledger::kUnlimited) tail = "no budget";
        else if (total <= budget) tail = "of " + format_bytes(budget) + ", " + format_bytes(budget - total) + " spare";
        else tail = "of " + format_bytes(budget) + ", OVER by " + format_bytes(total - budget);
        if (t == Tier::Fast && fast_budget_auto)
            tail += " (automatic: " + format_bytes(fast_available) + " available" +
                    (fast_returned ? " (" + format_bytes(fast_returned) + " of it held by the loaded model until it unloads)"
                                   : std::string()) +
                    " minus a " + format_bytes(default_budget_reserve(fast_available)) + " reserve)";
        std::snprintf(line, sizeof line, "%-18s %-5s %12s  %s\n", "total", tier_name(t), format_bytes(total).c_str(),
                      tail.c_str());
        os << line;
    };
    total_line(Tier::Fast, fast_total, fast_budget);
    total_line(Tier::Slow, slow_total, slow_budget);
    const std::string min_note = experts_total > 0 ? "with " + std::to_string(minimum_slots) + " expert slots" : "";
    std::snprintf(line, sizeof line, "%-18s %-5s %12s  %s\n", "resident minimum", "fast",
                  format_bytes(resident_minimum).c_str(), min_note.c_str());
    os << line;
    if (experts_total > 0)
        os << "\nexpert cache: " << expert_slots << " of " << experts_total << " slots (" << pct(cache_fraction)
           << ")" << (pinned_experts ? ", " + std::to_string(pinned_experts) + " pinned" : std::string()) << "\n";
    if (host_slots > 0)
        os << "host RAM cache: " << host_slots << " of " << host_experts
           << " experts, over the model file (three tiers: VRAM, host RAM, file)\n";
    os << "\n" << cpu::numa_summary(numa_topology, numa) << "\n";
    os << "huge pages: " << huge_pages << " (expert slots in 2 MiB-aligned arenas, the shared weights and the KV pool from 2 MiB up: advised MADV_HUGEPAGE)\n";
    os << "kernels: " << kernels << "; "
       << (repacked_bytes ? format_bytes(repacked_bytes) + " of q4_0/q8_0 rows repacked on load into the kernels' "
                                                           "layout, in place (no extra bytes)"
                          : std::string("weights kept in the file's layout (no faster layout for this level)"))
       << "\n";
    if (!device_ops.empty()) os << "device ops: " << device_ops << "\n";
    os << "\n" << reason << "\n";
    return os.str();
}

std::string Plan::to_json() const {
    std::ostringstream os;
    auto budget = [](uint64_t b) { return b == Ledger::kUnlimited ? std::string("null") : std::to_string(b); };
    char frac[32];
    std::snprintf(frac, sizeof frac, "%.6g", cache_fraction);
    os << "{\"model\":" << json_str(model) << ",\"fits\":" << (fits ? "true" : "false") << ",\"reason\":" << json_str(reason)
       << ",\"fast_budget\":" << budget(fast_budget) << ",\"fast_budget_auto\":" << (fast_budget_auto ? "true" : "false")
       << ",\"fast_available\":" << fast_available << ",\"fast_returned\":" << fast_returned
       << ",\"slow_budget\":" << budget(slow_budget)
       << ",\"fast_total\":" << fast_total << ",\"slow_total\":" << slow_total
       << ",\"resident_minimum\":" << resident_minimum << ",\"expert_slots\":" << expert_slots
       << ",\"pinned_experts\":" << pinned_experts << ",\"experts_total\":" << experts_total
       << ",\"slot_bytes\":" << slot_bytes << ",\"cache_fraction\":" << frac
       << ",\"transfer_buffers\":" << transfer_buffers << ",\"host_slots\":" << host_slots
       << ",\"host_experts\":" << host_experts << ",\"n_ctx\":" << n_ctx << ",\"n_batch\":" << n_batch
       << ",\"kv_blocks\":" << kv_blocks << ",\"kv_block_tokens\":" << kv_block_tokens
       << ",\"kv_type\":" << json_str(kv::kv_type_name(kv_type))
       << ",\"threads\":" << threads << ",\"huge_pages\":" << json_str(huge_pages)
       << ",\"kernels\":" << json_str(kernels) << ",\"device_ops\":" << json_str(device_ops) << ",\"repacked_bytes\":" << repacked_bytes << ",\"numa\":{\"built\":"
       << (numa_topology.built ? "true" : "false") << ",\"nodes\":" << numa_topology.nodes.size()
       << ",\"cpus\":" << numa_topology.cpus << ",\"memory\":" << numa_topology.memory_bytes
       << ",\"policy\":" << json_str(numa_policy) << ",\"mode\":" << json_str(cpu::numa_mode_name(numa.mode))
       << ",\"node\":" << numa.node << ",\"summary\":" << json_str(cpu::numa_summary(numa_topology, numa))
       << ",\"error\":" << (numa.error.empty() ? std::string("null") : json_str(numa.error)) << "},\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
        if (i) os << ",";
        os << "{\"account\":" << json_str(account_name(rows[i].account)) << ",\"tier\":" << json_str(tier_name(rows[i].tier))
           << ",\"bytes\":" << rows[i].reserved << ",\"note\":" << json_str(i < notes.size() ? notes[i] : "") << "}";
    }
    os << "]}";
    return os.str();
}

void apply_budgets(const Plan& p, Ledger& ledger) {
    ledger.set_budget(Tier::Fast, p.fast_budget);
    ledger.set_budget(Tier::Slow, p.slow_budget);
}

}  // namespace strata::memory
