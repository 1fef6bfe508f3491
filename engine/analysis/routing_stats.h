// Routing statistics of a model on real text: how skewed expert load is, how
// often consecutive tokens reuse an expert, how well the cross-layer lookahead
// predicts the next layer's experts, and what hit rate an LRU expert cache of a
// given size would reach. These are the properties an expert cache and a
// prefetcher live on; each comes with its uniform-random baseline.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "runner/context.h"

namespace strata::experts {

// A fixed-capacity LRU set of expert ids (simulation only).
class LruSet {
public:
    explicit LruSet(int64_t capacity) : capacity_(capacity) {}
    // Returns true on a hit; on a miss inserts, evicting the least recent.
    bool access(int32_t id);

private:
    int64_t capacity_;
    std::list<int32_t> order_;  // front = most recent
    std::unordered_map<int32_t, std::list<int32_t>::iterator> where_;
};

struct LayerRoutingStats {
    int64_t layer = 0;
    std::vector<int64_t> load;       // selections per expert
    double entropy_bits = 0;         // of the load distribution
    int64_t pairs = 0;               // consecutive token pairs seen
    int64_t reuse_pairs = 0;         // ... sharing at least one expert
    int64_t predicted = 0;           // tokens with a lookahead prediction
    double predicted_overlap = 0;    // sum over them of |pred ∩ actual| / k
    int64_t predicted_exact = 0;     // ... where the predicted set equals the actual
    std::vector<int64_t> lru_hits;   // per capacity fraction
    int64_t accesses = 0;
    // The figures published for real models (e.g. Qwen3-30B-A3B: 45% of
    // selections repeat at the next token, 80% within 8 tokens): the share of
    // a token's k selections that the previous token also made, and that any
    // of the previous kWindow tokens made (tokens with a full window only).
    static constexpr int kWindow = 8;
    int64_t repeat_tokens = 0;
    double repeat_sum = 0;           // sum of |cur ∩ prev| / k
    int64_t window_tokens = 0;
    double window_sum = 0;           // sum of |cur ∩ (last 8)| / k

    double reuse_fraction() const { return pairs ? double(reuse_pairs) / pairs : 0.0; }
    double lookahead_precision() const { return predicted ? predicted_overlap / predicted : 0.0; }
    double lru_hit_rate(size_t i) const { return accesses ? double(lru_hits[i]) / accesses : 0.0; }
    double selection_repeat() const { return repeat_tokens ? repeat_sum / repeat_tokens : 0.0; }
    double selection_window() const { return window_tokens ? window_sum / window_tokens : 0.0; }
};

struct RoutingStatsReport {
    int64_t n_expert = 0;
    int64_t n_used = 0;
    int64_t tokens = 0;
    std::vector<double> lru_fractions;       // e.g. 0.25, 0.5
    std::vector<LayerRoutingStats> layers;   // MoE layers only

    double max_entropy_bits() const;         // log2(n_expert): uniform load
    double uniform_reuse() const;            // P(two random top-k sets intersect)
    double uniform_lookahead() const { return n_expert ? double(n_used) / n_expert : 0.0; }
    // LRU hit rate under uniform routing: the j-th of a token's k distinct
    // experts finds (C - j) other residents among (E - j) candidates.
    double uniform_lru_hit_rate(size_t i) const;
    double mean_entropy_bits() const;
    double mean_reuse() const;
    double mean_lookahead() const;
    double mean_lru_hit_rate(size_t i) const;
    double mean_selection_repeat() const;
    double mean_selection_window() const;
    // Uniform routing: an expert is among the previous token's k with
    // probability k/E, among the previous 8 tokens' with 1 - (1 - k/E)^8.
    double uniform_selection_repeat() const { return n_expert ? double(n_used) / n_expert : 0.0; }
    double uniform_selection_window() const;

    std::string to_json() const;
    std::string to_text() const;
};

class RoutingStatsCollector {
public:
    RoutingStatsCollector(const model::ModelConfig& cfg, const std::vector<double>& lru_fractions = {0.25, 0.5});

    // A new prompt: consecutive-token pairs do not cross prompts (the LRU
    // caches persist, as a real cache would).
    void begin_sequence();
    void on_route(const model::RoutingEvent& e);
    void on_lookahead(const model::LookaheadEvent& e);
    // Attaches both observers to a context.
    void attach(model::Context& ctx);

    RoutingStatsReport report() const;

private:
    struct LayerState {
        LayerRoutingStats stats;
        std::vector<int32_t> prev;                    // previous token's experts
        std::vector<std::vector<int32_t>> window;     // the last kWindow tokens' experts, oldest first
        std::unordered_map<int64_t, std::vector<int32_t>> prediction;  // pos -> predicted top-k
        std::vector<LruSet> lru;
        int64_t first_pos_seen = -1;
    };
    int64_t n_expert_, n_used_;
    std::vector<double> fractions_;
    std::vector<int64_t> layer_slot_;   // model layer -> index in layers_, -1 if dense
    std::vector<LayerState> layers_;
};

}  // namespace strata::experts
