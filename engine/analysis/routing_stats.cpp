#include "analysis/routing_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace strata::experts {

bool LruSet::access(int32_t id) {
    if (auto it = where_.find(id); it != where_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return true;
    }
    if (capacity_ <= 0) return false;
    if (static_cast<int64_t>(order_.size()) >= capacity_) {
        where_.erase(order_.back());
        order_.pop_back();
    }
    order_.push_front(id);
    where_[id] = order_.begin();
    return false;
}

RoutingStatsCollector::RoutingStatsCollector(const model::ModelConfig& cfg, const std::vector<double>& fractions)
    : n_expert_(cfg.n_expert), n_used_(cfg.n_expert_used), fractions_(fractions) {
    layer_slot_.assign(static_cast<size_t>(cfg.n_layer), -1);
}

void RoutingStatsCollector::attach(model::Context& ctx) {
    ctx.set_routing_observer([this](const model::RoutingEvent& e) { on_route(e); });
    ctx.set_lookahead_observer([this](const model::LookaheadEvent& e) { on_lookahead(e); });
}

void RoutingStatsCollector::begin_sequence() {
    for (LayerState& L : layers_) {
        L.prev.clear();
        L.window.clear();
        L.prediction.clear();
    }
}

namespace {
std::vector<int32_t> top_k(const float* p, int64_t n, int64_t k) {
    std::vector<int32_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<int32_t>(i);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return p[a] > p[b] || (p[a] == p[b] && a < b);
    });
    idx.resize(static_cast<size_t>(k));
    return idx;
}
}  // namespace

void RoutingStatsCollector::on_lookahead(const model::LookaheadEvent& e) {
    if (e.layer < 0 || e.layer >= static_cast<int64_t>(layer_slot_.size())) return;
    if (layer_slot_[e.layer] < 0) {
        layer_slot_[e.layer] = static_cast<int64_t>(layers_.size());
        layers_.emplace_back();
    }
    LayerState& L = layers_[layer_slot_[e.layer]];
    L.prediction[e.pos] = top_k(e.probs, e.n_expert, n_used_);
}

void RoutingStatsCollector::on_route(const model::RoutingEvent& e) {
    if (e.layer < 0 || e.layer >= static_cast<int64_t>(layer_slot_.size())) return;
    if (layer_slot_[e.layer] < 0) {
        layer_slot_[e.layer] = static_cast<int64_t>(layers_.size());
        layers_.emplace_back();
    }
    LayerState& L = layers_[layer_slot_[e.layer]];
    LayerRoutingStats& s = L.stats;
    if (s.load.empty()) {
        s.layer = e.layer;
        s.load.assign(static_cast<size_t>(n_expert_), 0);
        s.lru_hits.assign(fractions_.size(), 0);
        for (double f : fractions_) L.lru.emplace_back(static_cast<int64_t>(std::llround(f * n_expert_)));
    }
    std::vector<int32_t> cur(e.experts, e.experts + e.n_used);
    for (int32_t x : cur) ++s.load[x];
    if (!L.prev.empty()) {
        ++s.pairs;
        int64_t repeated = 0;
        for (int32_t x : cur) repeated += std::find(L.prev.begin(), L.prev.end(), x) != L.prev.end();
        s.reuse_pairs += repeated > 0;
        ++s.repeat_tokens;
        s.repeat_sum += double(repeated) / double(cur.size());
    }
    if (static_cast<int>(L.window.size()) == LayerRoutingStats::kWindow) {
        int64_t seen = 0;
        for (int32_t x : cur) {
            bool hit = false;
            for (const auto& w : L.window) hit = hit || std::find(w.begin(), w.end(), x) != w.end();
            seen += hit;
        }
        ++s.window_tokens;
        s.window_sum += double(seen) / double(cur.size());
        L.window.erase(L.window.begin());
    }
    L.window.push_back(cur);
    L.prev = cur;
    if (auto it = L.prediction.find(e.pos); it != L.prediction.end()) {
        int64_t overlap = 0;
        for (int32_t x : it->second) overlap += std::find(cur.begin(), cur.end(), x) != cur.end();
        ++s.predicted;
        s.predicted_overlap += double(overlap) / double(e.n_used);
        s.predicted_exact += overlap == e.n_used;
        L.prediction.erase(it);
    }
    for (int32_t x : cur) {
        ++s.accesses;
        for (size_t i = 0; i < L.lru.size(); ++i) s.lru_hits[i] += L.lru[i].access(x);
    }
}

RoutingStatsReport RoutingStatsCollector::report() const {
    RoutingStatsReport r;
    r.n_expert = n_expert_;
    r.n_used = n_used_;
    for (const LayerState& L : layers_) r.tokens = std::max(r.tokens, n_used_ ? L.stats.accesses / n_used_ : 0);
    r.lru_fractions = fractions_;
    for (const LayerState& L : layers_) {
        if (L.stats.load.empty()) continue;
        LayerRoutingStats s = L.stats;
        int64_t total = 0;
        for (int64_t c : s.load) total += c;
        double h = 0;
        for (int64_t c : s.load)
            if (c > 0) {
                const double p = double(c) / total;
                h -= p * std::log2(p);
            }
        s.entropy_bits = h;
        r.layers.push_back(std::move(s));
    }
    std::sort(r.layers.begin(), r.layers.end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
    return r;
}

double RoutingStatsReport::max_entropy_bits() const { return n_expert > 0 ? std::log2(double(n_expert)) : 0.0; }

double RoutingStatsReport::uniform_reuse() const {
    // 1 - C(E-k, k) / C(E, k): two independent uniform top-k sets intersect.
    if (n_expert <= 0 || n_used <= 0) return 0.0;
    double disjoint = 1.0;
    for (int64_t i = 0; i < n_used; ++i) disjoint *= double(n_expert - n_used - i) / double(n_expert - i);
    return 1.0 - std::max(0.0, disjoint);
}

double RoutingStatsReport::uniform_lru_hit_rate(size_t i) const {
    if (n_expert <= 0 || n_used <= 0 || i >= lru_fractions.size()) return 0.0;
    const double cap = std::llround(lru_fractions[i] * n_expert);
    double sum = 0;
    for (int64_t j = 0; j < n_used; ++j) sum += std::max(0.0, cap - j) / double(n_expert - j);
    return sum / double(n_used);
}

namespace {
template <class F> double mean_over(const std::vector<LayerRoutingStats>& v, F f) {
    if (v.empty()) return 0.0;
    double s = 0;
    for (const auto& L : v) s += f(L);
    return s / double(v.size());
}
}  // namespace

double RoutingStatsReport::mean_entropy_bits() const { return mean_over(layers, [](const auto& L) { return L.entropy_bits; }); }
double RoutingStatsReport::mean_reuse() const { return mean_over(layers, [](const auto& L) { return L.reuse_fraction(); }); }
double RoutingStatsReport::mean_lookahead() const {
    std::vector<LayerRoutingStats> predicted;
    for (const auto& L : layers)
        if (L.predicted > 0) predicted.push_back(L);
    return mean_over(predicted, [](const auto& L) { return L.lookahead_precision(); });
}
double RoutingStatsReport::mean_selection_repeat() const {
    return mean_over(layers, [](const auto& L) { return L.selection_repeat(); });
}
double RoutingStatsReport::mean_selection_window() const {
    return mean_over(layers, [](const auto& L) { return L.selection_window(); });
}
double RoutingStatsReport::uniform_selection_window() const {
    if (n_expert <= 0) return 0.0;
    return 1.0 - std::pow(1.0 - double(n_used) / double(n_expert), LayerRoutingStats::kWindow);
}
double RoutingStatsReport::mean_lru_hit_rate(size_t i) const {
    return mean_over(layers, [i](const auto& L) { return L.lru_hit_rate(i); });
}

std::string RoutingStatsReport::to_json() const {
    std::ostringstream os;
    os.precision(6);
    os << "{\"n_expert\": " << n_expert << ", \"n_used\": " << n_used << ", \"tokens\": " << tokens
       << ", \"max_entropy_bits\": " << max_entropy_bits() << ", \"mean_entropy_bits\": " << mean_entropy_bits()
       << ", \"consecutive_reuse\": " << mean_reuse() << ", \"consecutive_reuse_uniform\": " << uniform_reuse()
       << ", \"lookahead_precision\": " << mean_lookahead()
       << ", \"lookahead_precision_uniform\": " << uniform_lookahead()
       << ", \"selection_repeat\": " << mean_selection_repeat()
       << ", \"selection_repeat_uniform\": " << uniform_selection_repeat()
       << ", \"selection_within_8\": " << mean_selection_window()
       << ", \"selection_within_8_uniform\": " << uniform_selection_window() << ", \"lru\": [";
    for (size_t i = 0; i < lru_fractions.size(); ++i) {
        os << (i ? ", " : "") << "{\"cache_fraction\": " << lru_fractions[i]
           << ", \"hit_rate\": " << mean_lru_hit_rate(i) << ", \"hit_rate_uniform\": " << uniform_lru_hit_rate(i) << "}";
    }
    os << "], \"layers\": [";
    for (size_t l = 0; l < layers.size(); ++l) {
        const LayerRoutingStats& L = layers[l];
        os << (l ? ", " : "") << "{\"layer\": " << L.layer << ", \"load\": [";
        for (size_t e = 0; e < L.load.size(); ++e) os << (e ? ", " : "") << L.load[e];
        os << "], \"entropy_bits\": " << L.entropy_bits << ", \"consecutive_reuse\": " << L.reuse_fraction()
           << ", \"selection_repeat\": " << L.selection_repeat() << ", \"selection_within_8\": " << L.selection_window();
        if (L.predicted > 0) {
            os << ", \"lookahead_precision\": " << L.lookahead_precision()
               << ", \"lookahead_exact\": " << double(L.predicted_exact) / L.predicted;
        }
        os << ", \"lru_hit_rate\": [";
        for (size_t i = 0; i < lru_fractions.size(); ++i) os << (i ? ", " : "") << L.lru_hit_rate(i);
        os << "]}";
    }
    os << "]}";
    return os.str();
}

std::string RoutingStatsReport::to_text() const {
    std::ostringstream os;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%lld tokens, %lld experts, top-%lld\n\n", static_cast<long long>(tokens),
                  static_cast<long long>(n_expert), static_cast<long long>(n_used));
    os << buf;
    os << "layer  entropy(bits)  reuse   repeat  within8  lookahead";
    for (double f : lru_fractions) {
        std::snprintf(buf, sizeof buf, "  LRU %2.0f%%", f * 100);
        os << buf;
    }
    os << "  load histogram (share per expert, %)\n";
    for (const LayerRoutingStats& L : layers) {
        std::snprintf(buf, sizeof buf, "%5lld  %13.3f  %5.3f  %6.3f  %7.3f  %9s", static_cast<long long>(L.layer),
                      L.entropy_bits, L.reuse_fraction(), L.selection_repeat(), L.selection_window(),
                      L.predicted ? std::to_string(L.lookahead_precision()).substr(0, 5).c_str() : "-");
        os << buf;
        for (size_t i = 0; i < lru_fractions.size(); ++i) {
            std::snprintf(buf, sizeof buf, "  %7.3f", L.lru_hit_rate(i));
            os << buf;
        }
        int64_t total = 0;
        for (int64_t c : L.load) total += c;
        os << " ";
        for (int64_t c : L.load) {
            std::snprintf(buf, sizeof buf, " %4.1f", total ? 100.0 * c / total : 0.0);
            os << buf;
        }
        os << "\n";
    }
    std::snprintf(buf, sizeof buf, "\nmean   %13.3f  %5.3f  %6.3f  %7.3f  %9.3f", mean_entropy_bits(), mean_reuse(),
                  mean_selection_repeat(), mean_selection_window(), mean_lookahead());
    os << buf;
    for (size_t i = 0; i < lru_fractions.size(); ++i) {
        std::snprintf(buf, sizeof buf, "  %7.3f", mean_lru_hit_rate(i));
        os << buf;
    }
    std::snprintf(buf, sizeof buf, "\nuniform%13.3f  %5.3f  %6.3f  %7.3f  %9.3f", max_entropy_bits(), uniform_reuse(),
                  uniform_selection_repeat(), uniform_selection_window(), uniform_lookahead());
    os << buf;
    for (size_t i = 0; i < lru_fractions.size(); ++i) {
        std::snprintf(buf, sizeof buf, "  %7.3f", uniform_lru_hit_rate(i));
        os << buf;
    }
    os << "   (baselines for uniform random routing)\n";
    os << "reuse: a token shares >= 1 expert with the previous one; repeat: share of its selections the previous\n"
          "token also made; within8: share made by any of the previous 8 tokens\n";
    return os.str();
}

}  // namespace strata::experts
