// Where the forward pass gets expert weights from. The default serves them
// straight from the file mapping; the expert store (engine/experts) serves
// them from a budgeted cache in the fast tier and loads the rest from the slow
// tier, so the forward pass itself does not know whether experts are resident.
//
// Per MoE layer the forward pass calls demand() once with the experts its
// tokens were routed to, then take() until it returns -1, computing each
// expert as soon as it is handed over (resident ones first, so compute runs
// while the others load), and release() when done with it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/weights.h"

namespace strata::model {

class ExpertProvider {
public:
    virtual ~ExpertProvider() = default;
    // The experts (distinct ids) layer `layer` needs now. Starts any loads.
    virtual void demand(int64_t layer, std::span<const int32_t> experts) = 0;
    // Hands over one demanded expert of `layer` that is ready, waiting for a
    // load when none is; returns its id and fills *out, or -1 when every
    // demanded expert has been taken. The matrices stay valid until release().
    virtual int32_t take(int64_t layer, FfnMatrices* out) = 0;
    virtual void release(int64_t layer, int32_t expert) = 0;
    // take() without waiting: -1 when no demanded expert is ready right now
    // (or none is left). Default: take() (a provider whose experts are always ready).
    virtual int32_t take_if_ready(int64_t layer, FfnMatrices* out) { return take(layer, out); }
    // mask[e] = 1 for the experts of `layer` that are in fast memory now (a
    // draft that routes only among them causes no loads). Default: all.
    virtual void resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) {
        (void)layer;
        for (int64_t e = 0; e < n_expert; ++e) mask[e] = 1;
    }
};

// Serves experts from the model's own weights (the file mapping).
class MappedExperts final : public ExpertProvider {
public:
    explicit MappedExperts(const ModelWeights& w) : w_(w) {}
    void demand(int64_t layer, std::span<const int32_t> experts) override {
        layer_ = layer;
        pending_.assign(experts.begin(), experts.end());
        next_ = 0;
    }
    int32_t take(int64_t layer, FfnMatrices* out) override {
        if (layer != layer_ || next_ >= pending_.size()) return -1;
        const int32_t e = pending_[next_++];
        *out = w_.layers[static_cast<size_t>(layer)].expert(e);
        return e;
    }
    void release(int64_t, int32_t) override {}

private:
    const ModelWeights& w_;
    int64_t layer_ = -1;
    std::vector<int32_t> pending_;
    size_t next_ = 0;
};

}  // namespace strata::model
