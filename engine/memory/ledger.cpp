#include "memory/ledger.h"

#include <cstdio>

#include "common/error.h"
#include "common/log.h"

namespace strata::memory {

const char* account_name(Account a) {
    switch (a) {
        case Account::WeightsShared: return "weights.shared";
        case Account::WeightsRouter: return "weights.router";
        case Account::ExpertsCache: return "experts.cache";
        case Account::ExpertsPinned: return "experts.pinned";
        case Account::KvPages: return "kv.pages";
        case Account::Activations: return "activations";
        case Account::TransferBuffers: return "transfer.buffers";
        case Account::DraftModel: return "draft.model";
        case Account::RuntimeReserve: return "runtime.reserve";
        case Account::ExpertsHome: return "experts.home";
        case Account::RecurrentState: return "recurrent.state";
    }
    return "?";
}

const char* tier_name(Tier t) { return t == Tier::Fast ? "fast" : "slow"; }

const char* tier_default_description(Tier t) {
    return t == Tier::Fast ? "RAM the engine holds (VRAM with a GPU)"
                           : "where the experts live: the model file (pinned host RAM with a GPU)";
}

std::string format_bytes(uint64_t bytes) {
    if (bytes == Ledger::kUnlimited) return "unlimited";
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

namespace {
// Exact bytes next to the rounded figure where rounding could hide the
// difference that matters ("1.00 MiB (1048577 B)").
std::string exact(uint64_t bytes) {
    const std::string h = format_bytes(bytes);
    if (bytes < 1024 || bytes == Ledger::kUnlimited) return h;
    return h + " (" + std::to_string(bytes) + " B)";
}
}  // namespace

Ledger::Ledger() {
    for (int t = 0; t < kTierCount; ++t) description_[t] = tier_default_description(static_cast<Tier>(t));
}

std::string Ledger::holders_locked(Tier t) const {
    std::string s;
    for (int a = 0; a < kAccountCount; ++a) {
        const Cell& c = cells_[static_cast<int>(t)][a];
        if (c.reserved == 0) continue;
        if (!s.empty()) s += ", ";
        s += std::string(account_name(static_cast<Account>(a))) + " " + format_bytes(c.reserved);
    }
    return s.empty() ? "nothing reserved" : s;
}

bool Ledger::fits_locked(Tier t, uint64_t bytes) const {
    const int ti = static_cast<int>(t);
    const uint64_t budget = budget_[ti];
    if (bytes > UINT64_MAX - total_[ti]) return false;  // overflow is never a fit
    return budget == kUnlimited || total_[ti] + bytes <= budget;
}

void Ledger::add_locked(Account a, Tier t, uint64_t bytes) {
    const int ti = static_cast<int>(t);
    cell(a, t).reserved += bytes;
    total_[ti] += bytes;
    if (total_[ti] > peak_[ti]) peak_[ti] = total_[ti];
}

void Ledger::set_budget(Tier t, uint64_t bytes) {
    std::lock_guard lock(mu_);
    const int ti = static_cast<int>(t);
    if (bytes < total_[ti]) {
        throw Error(std::string("cannot set the ") + tier_name(t) + " tier budget to " + exact(bytes) + ": " +
                    exact(total_[ti]) + " are already reserved there (" + holders_locked(t) +
                    "); choose at least " + format_bytes(total_[ti]) + " or release memory first");
    }
    budget_[ti] = bytes;
    logger("memory")->debug("{} tier budget: {}", tier_name(t), format_bytes(bytes));
}

uint64_t Ledger::budget(Tier t) const {
    std::lock_guard lock(mu_);
    return budget_[static_cast<int>(t)];
}

void Ledger::set_description(Tier t, std::string text) {
    std::lock_guard lock(mu_);
    description_[static_cast<int>(t)] = std::move(text);
}

std::string Ledger::description(Tier t) const {
    std::lock_guard lock(mu_);
    return description_[static_cast<int>(t)];
}

void Ledger::set_placement(Tier t, Placement p) {
    std::lock_guard<std::mutex> lock(mu_);
    placement_[static_cast<int>(t)] = p;
}

Placement Ledger::placement(Tier t) const {
    std::lock_guard<std::mutex> lock(mu_);
    return placement_[static_cast<int>(t)];
}

void Ledger::reserve(Account a, Tier t, uint64_t bytes) {
    std::lock_guard lock(mu_);
    if (!fits_locked(t, bytes)) {
        const int ti = static_cast<int>(t);
        const uint64_t budget = budget_[ti];
        if (budget == kUnlimited) {
            throw Error(std::string("ledger: ") + account_name(a) + " asks for " + exact(bytes) + " in the " +
                        tier_name(t) + " tier, more than can be counted on top of " + exact(total_[ti]) +
                        " (a size computation overflowed)");
        }
        const uint64_t free = budget > total_[ti] ? budget - total_[ti] : 0;
        std::string msg = std::string(tier_name(t)) + " tier budget exceeded: " + account_name(a) + " asks for " +
                          exact(bytes) + " but only " + exact(free) + " of " + format_bytes(budget) + " are free (" +
                          holders_locked(t) + "); raise the " + tier_name(t) + " budget or give " + account_name(a) +
                          " less";
        logger("memory")->debug("{}", msg);
        throw Error(msg);
    }
    add_locked(a, t, bytes);
}

bool Ledger::try_reserve(Account a, Tier t, uint64_t bytes) {
    std::lock_guard lock(mu_);
    if (!fits_locked(t, bytes)) return false;
    add_locked(a, t, bytes);
    return true;
}

void Ledger::release(Account a, Tier t, uint64_t bytes) {
    std::lock_guard lock(mu_);
    Cell& c = cell(a, t);
    if (bytes > c.reserved) {
        throw Error(std::string("ledger: ") + account_name(a) + " releases " + exact(bytes) + " in the " +
                    tier_name(t) + " tier but holds only " + exact(c.reserved) + " there (a bookkeeping bug)");
    }
    c.reserved -= bytes;
    if (c.used > c.reserved) c.used = c.reserved;
    total_[static_cast<int>(t)] -= bytes;
}

void Ledger::set_used(Account a, Tier t, uint64_t bytes) {
    std::lock_guard lock(mu_);
    Cell& c = cell(a, t);
    if (bytes > c.reserved) {
        throw Error(std::string("ledger: ") + account_name(a) + " would use " + exact(bytes) + " in the " +
                    tier_name(t) + " tier but has reserved only " + exact(c.reserved) + " (a bookkeeping bug)");
    }
    c.used = bytes;
}

void Ledger::adjust_used(Account a, Tier t, int64_t delta) {
    std::lock_guard lock(mu_);
    Cell& c = cell(a, t);
    if (delta < 0 && static_cast<uint64_t>(-(delta + 1)) + 1 > c.used) {
        throw Error(std::string("ledger: ") + account_name(a) + " gives back " +
                    exact(static_cast<uint64_t>(-(delta + 1)) + 1) + " of use in the " + tier_name(t) +
                    " tier but uses only " + exact(c.used) + " (a bookkeeping bug)");
    }
    if (delta > 0 && static_cast<uint64_t>(delta) > c.reserved - c.used) {
        throw Error(std::string("ledger: ") + account_name(a) + " would use " +
                    exact(c.used + static_cast<uint64_t>(delta)) + " in the " + tier_name(t) +
                    " tier but has reserved only " + exact(c.reserved) + " (a bookkeeping bug)");
    }
    c.used = delta < 0 ? c.used - (static_cast<uint64_t>(-(delta + 1)) + 1) : c.used + static_cast<uint64_t>(delta);
}

uint64_t Ledger::reserved(Tier t) const {
    std::lock_guard lock(mu_);
    return total_[static_cast<int>(t)];
}

uint64_t Ledger::reserved(Account a, Tier t) const {
    std::lock_guard lock(mu_);
    return cell(a, t).reserved;
}

uint64_t Ledger::used(Tier t) const {
    std::lock_guard lock(mu_);
    uint64_t s = 0;
    for (const Cell& c : cells_[static_cast<int>(t)]) s += c.used;
    return s;
}

uint64_t Ledger::used(Account a, Tier t) const {
    std::lock_guard lock(mu_);
    return cell(a, t).used;
}

uint64_t Ledger::free(Tier t) const {
    std::lock_guard lock(mu_);
    const int ti = static_cast<int>(t);
    if (budget_[ti] == kUnlimited) return kUnlimited;
    return budget_[ti] > total_[ti] ? budget_[ti] - total_[ti] : 0;
}

uint64_t Ledger::peak_reserved(Tier t) const {
    std::lock_guard lock(mu_);
    return peak_[static_cast<int>(t)];
}

void Ledger::reset_peak(Tier t) {
    std::lock_guard lock(mu_);
    peak_[static_cast<int>(t)] = total_[static_cast<int>(t)];
}

std::vector<LedgerRow> Ledger::rows() const {
    std::lock_guard lock(mu_);
    std::vector<LedgerRow> out;
    for (int t = 0; t < kTierCount; ++t)
        for (int a = 0; a < kAccountCount; ++a) {
            const Cell& c = cells_[t][a];
            if (c.reserved == 0 && c.used == 0) continue;
            out.push_back({static_cast<Account>(a), static_cast<Tier>(t), c.reserved, c.used});
        }
    return out;
}

}  // namespace strata::memory
