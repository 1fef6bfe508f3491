#include "experts/predictor.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace strata::experts {

namespace {
enum Kind { kNone, kLookahead, kFrequency, kCombined };
// A pending prediction or lookahead whose routing never came (a caller that
// predicts past the end of a sequence) is dropped when a layer holds more
// than this many. The tables are searched linearly: this also bounds a search
// (a prompt chunk holds at most n_batch, 256 by default, per layer).
constexpr size_t kMaxPending = 4096;
}  // namespace

Predictor::PosTable::Entry* Predictor::PosTable::find(int64_t pos) {
    if (live == 0) return nullptr;
    for (Entry& e : entries)
        if (e.pos == pos) return &e;
    return nullptr;
}

Predictor::PosTable::Entry& Predictor::PosTable::insert(int64_t pos) {
    if (Entry* e = find(pos)) return *e;
    Entry* slot = nullptr;
    for (Entry& e : entries)
        if (e.pos < 0) {
            slot = &e;
            break;
        }
    if (!slot) slot = &entries.emplace_back();
    slot->pos = pos;
    ++live;
    return *slot;
}

void Predictor::PosTable::erase(Entry* e) {
    if (e && e->pos >= 0) {
        e->pos = -1;
        --live;
    }
}

void Predictor::PosTable::clear() {
    for (Entry& e : entries) e.pos = -1;
    live = 0;
}

std::vector<std::string> Predictor::strategies() { return {"none", "lookahead", "frequency", "combined"}; }

Predictor::Predictor(const PredictorOptions& options, int64_t n_layer, int64_t n_expert, int64_t n_used,
                     std::vector<int64_t> moe_layers)
    : options_(options), n_layer_(n_layer), n_expert_(n_expert), n_used_(n_used), moe_layers_(std::move(moe_layers)) {
    const auto names = strategies();
    auto it = std::find(names.begin(), names.end(), options_.strategy);
    if (it == names.end())
        throw Error("unknown predictor '" + options_.strategy + "' (known: none, lookahead, frequency, combined)");
    kind_ = static_cast<int>(it - names.begin());
    if (n_expert_ <= 0 || n_used_ <= 0 || n_used_ > n_expert_) throw Error("predictor: bad expert counts");
    if (options_.width < 0) throw Error("predictor: the prefetch width must be >= 0");
    width_ = std::min(options_.width == 0 ? n_used_ : options_.width, n_expert_);
    if (options_.window < 1) throw Error("predictor: the frequency window must be at least 1 token");
    if (!(options_.lookahead_weight >= 0.0 && options_.lookahead_weight <= 1.0))
        throw Error("predictor: the lookahead weight must be within 0..1");
    moe_of_layer_.assign(static_cast<size_t>(std::max<int64_t>(n_layer_, 0)), -1);
    for (size_t i = 0; i < moe_layers_.size(); ++i) {
        const int64_t l = moe_layers_[i];
        if (l < 0 || l >= n_layer_ || (i > 0 && l <= moe_layers_[i - 1]))
            throw Error("predictor: MoE layers must be increasing and within the model");
        moe_of_layer_[static_cast<size_t>(l)] = static_cast<int64_t>(i);
    }
    layers_.resize(moe_layers_.size());
    for (Layer& L : layers_) {
        L.ring.assign(static_cast<size_t>(options_.window * n_used_), -1);
        L.count.assign(static_cast<size_t>(n_expert_), 0);
    }
    counts_.resize(moe_layers_.size());
    scratch_.resize(static_cast<size_t>(n_expert_));
    idx_.resize(static_cast<size_t>(n_expert_));
}

int64_t Predictor::moe_index(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(moe_of_layer_.size()) ? moe_of_layer_[static_cast<size_t>(layer)] : -1;
}

int64_t Predictor::next_moe_layer(int64_t layer) const {
    auto it = std::upper_bound(moe_layers_.begin(), moe_layers_.end(), layer);
    return it == moe_layers_.end() ? -1 : *it;
}

void Predictor::attach(model::Context& ctx) {
    ctx.set_routing_observer([this](const model::RoutingEvent& e) { on_route(e); });
    ctx.set_lookahead_observer([this](const model::LookaheadEvent& e) { on_lookahead(e); });
}

void Predictor::begin_sequence() {
    for (Layer& L : layers_) {
        L.lookahead.clear();
        L.pending.clear();
    }
}

void Predictor::on_lookahead(const model::LookaheadEvent& e) {
    if (kind_ != kLookahead && kind_ != kCombined) return;
    const int64_t m = moe_index(e.layer);
    if (m < 0 || e.n_expert != n_expert_) return;
    Layer& L = layers_[static_cast<size_t>(m)];
    if (static_cast<size_t>(L.lookahead.live) >= kMaxPending) L.lookahead.clear();
    L.lookahead.insert(e.pos).probs.assign(e.probs, e.probs + e.n_expert);
}

void Predictor::on_route(const model::RoutingEvent& e) {
    const int64_t m = moe_index(e.layer);
    if (m < 0) return;
    Layer& L = layers_[static_cast<size_t>(m)];
    L.lookahead.erase(L.lookahead.find(e.pos));
    if (PosTable::Entry* it = L.pending.find(e.pos)) {
        PredictionCounts& c = counts_[static_cast<size_t>(m)];
        ++c.layer_tokens;
        c.predicted += static_cast<int64_t>(it->ids.size());
        c.routed += e.n_used;
        for (int32_t x : it->ids)
            for (int64_t k = 0; k < e.n_used; ++k) c.correct += e.experts[k] == x;
        L.pending.erase(it);
    }
    // Frequency window: replace the oldest token's experts with these.
    const int64_t U = n_used_;
    int32_t* slot = L.ring.data() + L.ring_pos * U;
    for (int64_t k = 0; k < U; ++k) {
        if (slot[k] >= 0) --L.count[static_cast<size_t>(slot[k])];
        slot[k] = k < e.n_used ? e.experts[k] : -1;
        if (slot[k] >= 0 && slot[k] < n_expert_) ++L.count[static_cast<size_t>(slot[k])];
        else slot[k] = -1;
    }
    L.ring_pos = (L.ring_pos + 1) % options_.window;
    L.filled = std::min(L.filled + 1, options_.window);
}

std::vector<ExpertPrediction> Predictor::predict(int64_t layer, int64_t pos) {
    std::vector<ExpertPrediction> out;
    predict_into(layer, pos, out);
    return out;
}

void Predictor::predict_into(int64_t layer, int64_t pos, std::vector<ExpertPrediction>& out) {
    out.clear();
    const int64_t m = moe_index(layer);
    if (m < 0) return;
    Layer& L = layers_[static_cast<size_t>(m)];
    const float* look = nullptr;
    if (const PosTable::Entry* it = L.lookahead.find(pos)) look = it->probs.data();
    const bool use_freq = kind_ == kFrequency || (kind_ == kCombined && (!look || options_.lookahead_weight < 1.0));
    const bool use_look = (kind_ == kLookahead || kind_ == kCombined) && look;
    const double w = kind_ == kCombined && look ? options_.lookahead_weight : (use_look ? 1.0 : 0.0);
    const double fnorm = L.filled > 0 ? 1.0 / (double(L.filled) * double(n_used_)) : 0.0;
    for (int64_t e = 0; e < n_expert_; ++e) {
        double s = 0;
        if (use_look) s += w * look[e];
        if (use_freq) s += (1.0 - w) * L.count[static_cast<size_t>(e)] * fnorm;
        scratch_[static_cast<size_t>(e)] = static_cast<float>(s);
    }
    if (kind_ != kNone) {
        for (int64_t e = 0; e < n_expert_; ++e) idx_[static_cast<size_t>(e)] = static_cast<int32_t>(e);
        const int64_t k = std::min(width_, n_expert_);
        std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), [&](int32_t a, int32_t b) {
            return scratch_[a] > scratch_[b] || (scratch_[a] == scratch_[b] && a < b);
        });
        for (int64_t i = 0; i < k; ++i) {
            const int32_t e = idx_[static_cast<size_t>(i)];
            if (!(scratch_[e] > 0.0f)) break;  // no information about the rest
            out.push_back({layer, e, scratch_[e]});
        }
    }
    if (static_cast<size_t>(L.pending.live) >= kMaxPending) L.pending.clear();
    std::vector<int32_t>& p = L.pending.insert(pos).ids;
    p.clear();
    for (const ExpertPrediction& x : out) p.push_back(x.expert);
}

PredictionCounts Predictor::totals() const {
    PredictionCounts t;
    for (const PredictionCounts& c : counts_) t.add(c);
    return t;
}

}  // namespace strata::experts
