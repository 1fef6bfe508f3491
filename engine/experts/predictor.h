// The routing predictor: which experts the next MoE layer will want, early
// enough to prefetch them (DESIGN.md §5). Shared by the simulator and the
// engine: it consumes the Context's RoutingEvents and LookaheadEvents and
// answers predict(layer, pos) with a ranked set of (layer, expert, score).
//
// Strategies:
//   none       predicts nothing.
//   lookahead  layer L's router applied to the hidden state one layer earlier
//              (model/device_forward.h LookaheadEvent): the top `width` experts of
//              that predicted softmax. No prediction where no lookahead exists
//              (a MoE layer 0).
//   frequency  the experts layer L routed the most over its last `window`
//              tokens; score = share of those tokens that used the expert
//              divided by n_used (the scores sum to 1).
//   combined   score = w * lookahead probability + (1 - w) * frequency score
//              (w = lookahead_weight); frequency alone where no lookahead exists.
//
// Accounting: every predict() for (layer, pos) is scored when the router's
// choice for (layer, pos) arrives: precision = correct / predicted experts,
// recall = correct / routed experts (over the predicted layer-tokens, empty
// predictions included, so recall is the share of expert uses the prefetch
// could have covered).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/context.h"

namespace strata::experts {

struct PredictorOptions {
    std::string strategy = "none";  // none | lookahead | frequency | combined
    int64_t width = 0;              // experts per predicted layer; 0 = the model's n_used
    int64_t window = 16;            // tokens per layer for "frequency"
    double lookahead_weight = 0.5;  // "combined"
};

struct ExpertPrediction {
    int64_t layer;
    int32_t expert;
    float score;
};

struct PredictionCounts {
    int64_t layer_tokens = 0;  // predictions scored
    int64_t predicted = 0;     // experts predicted
    int64_t routed = 0;        // experts the router chose
    int64_t correct = 0;       // predicted and chosen
    double precision() const { return predicted ? double(correct) / double(predicted) : 0.0; }
    double recall() const { return routed ? double(correct) / double(routed) : 0.0; }
    void add(const PredictionCounts& o) {
        layer_tokens += o.layer_tokens;
        predicted += o.predicted;
        routed += o.routed;
        correct += o.correct;
    }
};

class Predictor {
public:
    // Throws strata::Error for an unknown strategy or a bad option.
    Predictor(const PredictorOptions& options, int64_t n_layer, int64_t n_expert, int64_t n_used,
              std::vector<int64_t> moe_layers);

    static std::vector<std::string> strategies();
    const std::string& strategy() const { return options_.strategy; }
    int64_t width() const { return width_; }

    // A new sequence (Context cleared): pending lookaheads and predictions are
    // dropped; the frequency windows persist (like the cache itself).
    void begin_sequence();
    void on_lookahead(const model::LookaheadEvent& e);
    // The router's choice: scores the prediction for (layer, pos), if any, and
    // feeds the frequency window.
    void on_route(const model::RoutingEvent& e);
    // Sets both of the context's observers to this predictor.
    void attach(model::Context& ctx);

    // Ranked prefetch set (best first, at most width) for MoE layer `layer` of
    // the token at `pos`; recorded to be scored by on_route(layer, pos).
    std::vector<ExpertPrediction> predict(int64_t layer, int64_t pos);
    // predict() into `out` (cleared first; its capacity is reused, so a caller
    // that keeps `out` allocates nothing per token once warmed up).
    void predict_into(int64_t layer, int64_t pos, std::vector<ExpertPrediction>& out);
    // The next MoE layer after `layer`, -1 after the last.
    int64_t next_moe_layer(int64_t layer) const;
    int64_t first_moe_layer() const { return moe_layers_.empty() ? -1 : moe_layers_.front(); }

    PredictionCounts totals() const;
    // Per MoE layer, in moe_layers order.
    const std::vector<PredictionCounts>& per_layer() const { return counts_; }

private:
    // Lookaheads and predictions waiting for their token's routing, keyed by
    // position. A small table of reusable entries instead of a map: a decode
    // step holds one entry per layer (a prompt chunk one per token), and an
    // entry keeps its vector's capacity when it is freed, so the per-token
    // path allocates nothing once the table has grown to its working size.
    struct PosTable {
        struct Entry {
            int64_t pos = -1;          // -1: free
            std::vector<float> probs;  // lookahead: the predicted softmax
            std::vector<int32_t> ids;  // pending: the predicted experts
        };
        std::vector<Entry> entries;
        int64_t live = 0;
        Entry* find(int64_t pos);
        Entry& insert(int64_t pos);    // the entry for pos (found, or a free one)
        void erase(Entry* e);
        void clear();
    };
    struct Layer {
        std::vector<int32_t> ring;     // window * n_used expert ids, -1 = empty
        int64_t ring_pos = 0;          // next token slot
        int64_t filled = 0;            // tokens in the window
        std::vector<int32_t> count;    // per expert, over the window
        PosTable lookahead;            // pos -> probs
        PosTable pending;              // pos -> predicted ids
    };
    int64_t moe_index(int64_t layer) const;

    PredictorOptions options_;
    int kind_ = 0;
    int64_t n_layer_, n_expert_, n_used_, width_;
    std::vector<int64_t> moe_layers_;
    std::vector<int64_t> moe_of_layer_;  // layer -> index, -1 dense
    std::vector<Layer> layers_;
    std::vector<PredictionCounts> counts_;
    std::vector<float> scratch_;
    std::vector<int32_t> idx_;
};

}  // namespace strata::experts
