#include "analysis/simulator.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <numeric>
#include <sstream>

#include "common/error.h"
#include "common/json.h"

namespace strata::experts {

// ---------------------------------------------------------------- SlotCache

SlotCache::SlotCache(const std::string& policy, int64_t n_slots, const PolicyOptions& options) {
    if (n_slots < 0) throw Error("the cache size must be >= 0 slots");
    slots_ = n_slots;
    policy_ = make_policy(policy, n_slots, options);
}

SlotCache::SlotCache(std::unique_ptr<CachePolicy> policy, int64_t n_slots) : policy_(std::move(policy)) {
    if (n_slots < 0) throw Error("the cache size must be >= 0 slots");
    if (!policy_) throw Error("no cache policy");
    slots_ = n_slots;
    policy_->set_capacity(n_slots);
}

void SlotCache::grow(ExpertKey k) {
    if (k < state_.size()) return;
    if (k >= (1u << 24)) throw Error("expert key " + std::to_string(k) + " is out of range");
    const size_t n = std::max<size_t>(static_cast<size_t>(k) + 1, state_.size() * 2);
    state_.resize(n, kAbsent);
    prefetched_unused_.resize(n, 0);
    protect_.resize(n, 0);
}

void SlotCache::begin_layer(std::span<const ExpertKey> keys) {
    for (ExpertKey k : keys) {
        protect(k);
        in_use_.push_back(k);
    }
    pf_current_.swap(pf_next_);
    pf_next_.clear();
}

void SlotCache::end_layer() {
    for (ExpertKey k : in_use_) --protect_[k];
    for (ExpertKey k : pf_current_) --protect_[k];
    in_use_.clear();
    pf_current_.clear();
}

void SlotCache::evict(ExpertKey k) {
    policy_->on_remove(k);
    state_[k] = kAbsent;
    --n_policy_;
    ++evictions_;
    if (prefetched_unused_[k]) {
        prefetched_unused_[k] = 0;
        ++prefetch_evicted_unused_;
    }
}

bool SlotCache::make_room() {
    if (policy_capacity() <= 0) return false;
    while (n_policy_ >= policy_capacity()) {
        const std::optional<ExpertKey> v = policy_->victim(*this);
        if (!v) return false;
        evict(*v);
    }
    return true;
}

SlotCache::Use SlotCache::use(ExpertKey k) {
    grow(k);
    switch (state_[k]) {
        case kPinned:
            return Use::PinnedHit;
        case kResident:
            policy_->on_hit(k);
            if (prefetched_unused_[k]) {
                prefetched_unused_[k] = 0;
                return Use::PrefetchHit;
            }
            return Use::Hit;
        default:
            break;
    }
    policy_->on_miss(k);
    if (!make_room()) return Use::Streamed;
    state_[k] = kResident;
    ++n_policy_;
    policy_->on_insert(k);
    return Use::Miss;
}

bool SlotCache::prefetch(ExpertKey k) {
    grow(k);
    if (state_[k] != kAbsent) return false;
    if (!make_room()) return false;
    state_[k] = kResident;
    prefetched_unused_[k] = 1;
    ++n_policy_;
    policy_->on_prefetch_insert(k);
    protect(k);
    pf_next_.push_back(k);
    return true;
}

namespace {
struct AnyFilter final : EvictableFilter {
    bool evictable(ExpertKey) const override { return true; }
};
}  // namespace

void SlotCache::trim() {
    const int64_t cap = std::max<int64_t>(0, policy_capacity());
    while (n_policy_ > cap) {
        std::optional<ExpertKey> v = policy_->victim(*this);
        if (!v) v = policy_->victim(AnyFilter{});  // a resize must happen; protection yields
        if (!v) throw Error("cache policy lost track of its residents");
        evict(*v);
    }
}

void SlotCache::set_slots(int64_t n_slots) {
    if (n_slots < n_pinned_)
        throw Error(std::to_string(n_slots) + " slots cannot hold the " + std::to_string(n_pinned_) +
                    " pinned experts; unpin some first");
    slots_ = n_slots;
    policy_->set_capacity(policy_capacity());
    trim();
}

void SlotCache::set_policy(const std::string& name, const PolicyOptions& options) {
    std::unique_ptr<CachePolicy> p = make_policy(name, policy_capacity(), options);
    std::vector<ExpertKey> order = policy_->eviction_order();
    if (static_cast<int64_t>(order.size()) != n_policy_) {  // a policy that cannot list them: key order
        order.clear();
        for (ExpertKey k = 0; k < state_.size(); ++k)
            if (state_[k] == kResident) order.push_back(k);
    }
    for (ExpertKey k : order) {
        if (prefetched_unused_[k]) p->on_prefetch_insert(k);
        else p->on_insert(k);
    }
    policy_ = std::move(p);
}

void SlotCache::set_pinned(std::vector<ExpertKey> keys) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (static_cast<int64_t>(keys.size()) > slots_)
        throw Error(std::to_string(keys.size()) + " pinned experts do not fit in a cache of " + std::to_string(slots_) +
                    " slots; raise the cache size or pin fewer experts");
    if (!keys.empty()) grow(keys.back());
    std::vector<uint8_t> want(state_.size(), 0);
    for (ExpertKey k : keys) want[k] = 1;
    // Unpinned: they stay resident and join the policy.
    for (ExpertKey k = 0; k < state_.size(); ++k) {
        if (state_[k] == kPinned && !want[k]) {
            state_[k] = kResident;
            --n_pinned_;
            ++n_policy_;
            policy_->on_insert(k);
        }
    }
    for (ExpertKey k : keys) {
        if (state_[k] == kResident) {
            policy_->on_remove(k);
            --n_policy_;
            if (prefetched_unused_[k]) prefetched_unused_[k] = 0;
        } else if (state_[k] == kAbsent) {
            ++pin_loads_;
        } else {
            continue;
        }
        state_[k] = kPinned;
        ++n_pinned_;
    }
    policy_->set_capacity(policy_capacity());
    trim();
}

std::vector<ExpertKey> SlotCache::residents() const {
    std::vector<ExpertKey> out;
    for (ExpertKey k = 0; k < state_.size(); ++k)
        if (state_[k] == kPinned) out.push_back(k);
    const std::vector<ExpertKey> order = policy_->eviction_order();
    out.insert(out.end(), order.begin(), order.end());
    return out;
}

// ---------------------------------------------------------------- opt (MIN)

namespace {

// Belady's MIN over a trace: every resident is ranked by its next use after
// the simulator's clock (layer-steps, token * MoE layers + layer); the victim
// is the evictable one used furthest ahead (never again = furthest). A
// resident's next use only changes when it is used, and every use of a
// resident reaches on_hit, so the ranking stays exact.
class OptPolicy final : public CachePolicy {
public:
    OptPolicy(const Trace& trace, const int64_t* clock) : clock_(clock) {
        const TraceHeader& H = trace.header;
        const int64_t M = H.n_moe(), E = H.n_expert;
        for (int64_t t = 0; t < trace.n_tokens(); ++t)
            for (int64_t m = 0; m < M; ++m)
                for (int32_t e : trace.experts_of(t, m)) {
                    const size_t key = static_cast<size_t>(H.moe_layers[m] * E + e);
                    if (uses_.size() <= key) uses_.resize(key + 1);
                    uses_[key].push_back(t * M + m);  // in time order
                }
    }
    const char* name() const override { return kOptPolicy; }
    void on_hit(ExpertKey k) override { rank(k); }
    void on_insert(ExpertKey k) override { rank(k); }
    void on_remove(ExpertKey k) override {
        const auto it = next_.find(k);
        if (it == next_.end()) return;
        order_.erase({it->second, k});
        next_.erase(it);
    }
    std::optional<ExpertKey> victim(const EvictableFilter& filter) override {
        for (auto it = order_.rbegin(); it != order_.rend(); ++it)
            if (filter.evictable(it->second)) return it->second;
        return std::nullopt;
    }
    std::vector<ExpertKey> eviction_order() const override {
        std::vector<ExpertKey> out;
        for (auto it = order_.rbegin(); it != order_.rend(); ++it) out.push_back(it->second);
        return out;
    }
    int64_t size() const override { return static_cast<int64_t>(next_.size()); }

private:
    static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
    int64_t next_use(ExpertKey k) const {
        if (k >= uses_.size()) return kNever;
        const std::vector<int64_t>& u = uses_[k];
        const auto it = std::upper_bound(u.begin(), u.end(), *clock_);
        return it == u.end() ? kNever : *it;
    }
    void rank(ExpertKey k) {
        on_remove(k);
        const int64_t n = next_use(k);
        next_.emplace(k, n);
        order_.insert({n, k});
    }

    const int64_t* clock_;
    std::vector<std::vector<int64_t>> uses_;       // per key: the layer-steps that use it
    std::map<ExpertKey, int64_t> next_;            // resident -> its next use
    std::set<std::pair<int64_t, ExpertKey>> order_;  // (next use, key), furthest last
};

}  // namespace

// ---------------------------------------------------------------- simulate

SimResult simulate(const Trace& tr, const SimOptions& o) {
    const TraceHeader& H = tr.header;
    const int64_t M = H.n_moe(), U = H.n_used, E = H.n_expert;
    SimResult r;
    r.total_experts = M * E;
    r.moe_layers = M;
    r.n_used = U;
    r.cache_slots = std::min(std::max<int64_t>(o.cache_slots, 0), r.total_experts);
    for (ExpertKey k : o.pinned)
        if (H.moe_index(static_cast<int64_t>(k) / E) < 0)
            throw Error("pinned expert " + std::to_string(k / E) + ":" + std::to_string(k % E) +
                        " is not in a MoE layer of the trace");
    int64_t clock = -1;  // the layer-step being replayed (read by "opt")
    SlotCache cache = o.policy == kOptPolicy ? SlotCache(std::make_unique<OptPolicy>(tr, &clock), r.cache_slots)
                                             : SlotCache(o.policy, r.cache_slots, o.policy_options);
    cache.set_pinned(o.pinned);
    r.pinned = cache.n_pinned();
    r.pin_loads = cache.pin_loads();
    Predictor pred(o.predictor, H.n_layer, E, U, H.moe_layers);
    const bool predicting = o.predictor.strategy != "none";

    std::vector<ExpertKey> keys(static_cast<size_t>(U));
    PredictionCounts before;
    int64_t evicted_before = 0, unused_before = 0;
    for (int64_t t = 0; t < tr.n_tokens(); ++t) {
        const TraceToken& tok = tr.tokens[t];
        if (t == 0 && predicting) {
            // The first token's first MoE layer: predicted from what is known
            // before it (its lookahead if any), so every layer-token is scored.
            pred.begin_sequence();
            const int64_t l0 = H.moe_layers[0];
            if (const float* p = tr.lookahead_of(0, 0)) pred.on_lookahead({l0, tok.pos, p, E});
            for (const ExpertPrediction& x : pred.predict(l0, tok.pos))
                if (cache.prefetch(static_cast<ExpertKey>(l0 * E + x.expert)) && (!o.decode_only || tok.decode))
                    ++r.prefetch_loads;
        }
        const bool measured = !o.decode_only || tok.decode;
        if (measured) {
            before = pred.totals();
            evicted_before = cache.evictions();
            unused_before = cache.prefetch_evicted_unused();
        }
        for (int64_t m = 0; m < M; ++m) {
            const int64_t layer = H.moe_layers[m];
            const auto ids = tr.experts_of(t, m);
            for (int64_t k = 0; k < U; ++k) keys[k] = static_cast<ExpertKey>(layer * E + ids[k]);
            clock = t * M + m;
            cache.begin_layer(keys);
            for (ExpertKey k : keys) {
                const SlotCache::Use u = cache.use(k);
                if (!measured) continue;
                ++r.uses;
                switch (u) {
                    case SlotCache::Use::Hit: ++r.hits; break;
                    case SlotCache::Use::PinnedHit: ++r.hits, ++r.pinned_hits; break;
                    case SlotCache::Use::PrefetchHit: ++r.hits, ++r.prefetch_hits; break;
                    case SlotCache::Use::Miss: ++r.misses; break;
                    case SlotCache::Use::Streamed: ++r.misses, ++r.streamed; break;
                }
            }
            const auto wts = tr.weights_of(t, m);
            pred.on_route({layer, tok.pos, ids.data(), wts.data(), U, nullptr, E});
            if (predicting) {
                // The next MoE layer: of this token, or the first of the next token.
                int64_t nt = t, nm = m + 1;
                if (nm == M) {
                    nt = t + 1;
                    nm = 0;
                }
                if (nt < tr.n_tokens()) {
                    const TraceToken& next = tr.tokens[nt];
                    if (nt != t && next.sequence != tok.sequence) pred.begin_sequence();
                    const int64_t nlayer = H.moe_layers[nm];
                    if (const float* p = tr.lookahead_of(nt, nm)) pred.on_lookahead({nlayer, next.pos, p, E});
                    for (const ExpertPrediction& x : pred.predict(nlayer, next.pos)) {
                        const bool loaded = cache.prefetch(static_cast<ExpertKey>(nlayer * E + x.expert));
                        if (loaded && measured) ++r.prefetch_loads;
                    }
                }
            }
            cache.end_layer();
        }
        cache.on_step();
        if (measured) {
            ++r.tokens;
            const PredictionCounts after = pred.totals();
            r.prediction.layer_tokens += after.layer_tokens - before.layer_tokens;
            r.prediction.predicted += after.predicted - before.predicted;
            r.prediction.routed += after.routed - before.routed;
            r.prediction.correct += after.correct - before.correct;
            r.evictions += cache.evictions() - evicted_before;
            r.prefetch_evicted_unused += cache.prefetch_evicted_unused() - unused_before;
        }
    }
    // The prediction for a token's first MoE layer is scored in that token:
    // with decode_only, one made in an unmeasured token may count; negligible.
    return r;
}

// ---------------------------------------------------------------- projection

Projection project(const SimResult& r, const HardwareProfile& p, bool overlap) {
    p.validate();
    Projection j;
    const double trace_uses = static_cast<double>(r.moe_layers * r.n_used);
    j.uses_per_token = static_cast<double>(p.uses_per_token());
    j.scale = trace_uses > 0 ? j.uses_per_token / trace_uses : 1.0;
    j.misses_per_token = r.misses_per_token() * j.scale;
    j.prefetch_per_token = r.prefetch_per_token() * j.scale;
    j.link_bytes_per_token = (j.misses_per_token + j.prefetch_per_token) * p.expert_bytes;
    j.compute_s = (p.shared_bytes + j.uses_per_token * p.expert_bytes) / p.fast_bps;
    j.demand_s = j.misses_per_token * p.expert_bytes / p.link_bps;
    j.prefetch_s = j.prefetch_per_token * p.expert_bytes / p.link_bps;
    j.time_s = j.compute_s + j.demand_s + (overlap ? std::max(0.0, j.prefetch_s - j.compute_s) : j.prefetch_s);
    j.tok_s = j.time_s > 0 ? 1.0 / j.time_s : 0.0;
    j.max_tok_s = j.compute_s > 0 ? 1.0 / j.compute_s : 0.0;
    return j;
}

TargetHitRates hit_rate_needed(const HardwareProfile& p, double target) {
    p.validate();
    TargetHitRates h;
    const double uses = static_cast<double>(p.uses_per_token());
    const double compute = (p.shared_bytes + uses * p.expert_bytes) / p.fast_bps;
    const double budget = 1.0 / target;
    const double stall_misses = (budget - compute) * p.link_bps / p.expert_bytes;
    const double overlap_misses = p.link_bps / (target * p.expert_bytes);
    h.reachable = compute <= budget;
    h.stall = std::clamp(1.0 - stall_misses / uses, 0.0, std::numeric_limits<double>::infinity());
    h.overlap = h.reachable ? std::max(0.0, 1.0 - overlap_misses / uses) : h.stall;
    return h;
}

// ---------------------------------------------------------------- calibration

std::vector<ExpertKey> hottest_experts(const std::vector<int64_t>& counts, int64_t n) {
    std::vector<ExpertKey> keys;
    for (size_t k = 0; k < counts.size(); ++k)
        if (counts[k] > 0) keys.push_back(static_cast<ExpertKey>(k));
    const size_t take = std::min<size_t>(keys.size(), static_cast<size_t>(std::max<int64_t>(0, n)));
    std::partial_sort(keys.begin(), keys.begin() + take, keys.end(), [&](ExpertKey a, ExpertKey b) {
        return counts[a] > counts[b] || (counts[a] == counts[b] && a < b);
    });
    keys.resize(take);
    return keys;
}

std::vector<int64_t> read_calibration(const std::string& path, const TraceHeader& h) {
    if (is_trace_file(path)) {
        const Trace cal = read_trace(path);
        const TraceHeader& c = cal.header;
        if (c.n_expert != h.n_expert || c.moe_layers != h.moe_layers)
            throw Error(path + ": the calibration trace is of another model shape (" + std::to_string(c.n_moe()) +
                        " MoE layers x " + std::to_string(c.n_expert) + " experts, the simulated trace has " +
                        std::to_string(h.n_moe()) + " x " + std::to_string(h.n_expert) + ")");
        std::vector<int64_t> counts = cal.expert_counts();
        counts.resize(static_cast<size_t>(h.n_layer * h.n_expert), 0);
        return counts;
    }
    std::ifstream in(path);
    if (!in) throw Error(path + ": cannot open the calibration file");
    std::vector<int64_t> counts(static_cast<size_t>(h.n_layer * h.n_expert), 0);
    if (in.peek() == '{') {  // strata-cli calibrate: {"strata_calibration": 1, "n_expert": E, "counts": [[...] per layer]}
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const nlohmann::json v = json::parse(text, path);
        if (!v.is_object() || !v.contains("strata_calibration") || !v.contains("n_expert") ||
            !v["n_expert"].is_number_integer() || !v.contains("counts") || !v["counts"].is_array())
            throw Error(path + ": not a calibration file (expected strata_calibration, n_expert and counts)");
        const nlohmann::json& layers = v["counts"];
        const int64_t ne = v["n_expert"].get<int64_t>();
        if (ne != h.n_expert || static_cast<int64_t>(layers.size()) != h.n_layer)
            throw Error(path + ": the calibration is of another model shape (" + std::to_string(layers.size()) +
                        " layers x " + std::to_string(ne) + " experts, the trace has " +
                        std::to_string(h.n_layer) + " x " + std::to_string(h.n_expert) + ")");
        for (int64_t l = 0; l < h.n_layer; ++l) {
            const nlohmann::json& row = layers[static_cast<size_t>(l)];
            if (!row.is_array() || (!row.empty() && static_cast<int64_t>(row.size()) != h.n_expert))
                throw Error(path + ": counts of layer " + std::to_string(l) + " are not " + std::to_string(h.n_expert) + " numbers");
            if (!row.empty() && h.moe_index(l) < 0)
                throw Error(path + ": layer " + std::to_string(l) + " has counts but is not a MoE layer of the trace");
            for (int64_t e = 0; e < static_cast<int64_t>(row.size()); ++e) {
                const nlohmann::json& c = row[static_cast<size_t>(e)];
                if (!c.is_number() || !(c.get<double>() >= 0)) throw Error(path + ": a count of layer " + std::to_string(l) + " is not a count");
                counts[static_cast<size_t>(l * h.n_expert + e)] = static_cast<int64_t>(c.get<double>());
            }
        }
        return counts;
    }
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_no;
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream is(line);
        long long layer, expert, count;
        if (!(is >> layer)) continue;  // blank or comment
        std::string rest;
        if (!(is >> expert >> count) || (is >> rest))
            throw Error(path + ":" + std::to_string(line_no) + ": expected 'LAYER EXPERT COUNT'");
        if (h.moe_index(layer) < 0 || expert < 0 || expert >= h.n_expert || count < 0)
            throw Error(path + ":" + std::to_string(line_no) + ": expert " + std::to_string(layer) + ":" +
                        std::to_string(expert) + " is not an expert of a MoE layer of the trace (or the count is negative)");
        counts[static_cast<size_t>(layer * h.n_expert + expert)] += count;
    }
    return counts;
}

}  // namespace strata::experts
