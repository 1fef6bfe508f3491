#include "core/calibration.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "common/json.h"
#include "core/engine.h"

namespace strata::core {

namespace {

int32_t argmax_row(const float* x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return static_cast<int32_t>(best);
}

}  // namespace

Calibration calibrate(Engine& engine, const std::vector<std::string>& prompts, const CalibrationOptions& o,
                      const std::function<bool(size_t, size_t)>& progress) {
    const model::Model& m = engine.model();
    const model::ModelConfig& c = m.config();
    if (c.n_expert == 0) throw Error(c.name + ": not a mixture-of-experts model (no experts to pin)");
    if (prompts.empty()) throw Error("calibration needs at least one prompt");
    Calibration out;
    out.model = c.name;
    out.n_layer = c.n_layer;
    out.n_expert = c.n_expert;
    out.n_expert_used = c.n_expert_used;
    out.counts.assign(static_cast<size_t>(c.n_layer * c.n_expert), 0);
    // The listener lives exactly as long as this call: removed however the
    // run ends (done, cancelled, an error), so it never writes to `out` later.
    std::vector<int64_t>* counts = &out.counts;
    const int64_t n_expert = c.n_expert;
    const Engine::ListenerId listener = engine.add_routing_listener([counts, n_expert](const model::RoutingEvent& e) {
        for (int64_t k = 0; k < e.n_used; ++k) ++(*counts)[static_cast<size_t>(e.layer * n_expert + e.experts[k])];
    });
    model::Context& ctx = engine.context();
    struct Off {
        Engine& engine;
        Engine::ListenerId listener;
        ~Off() {
            engine.remove_listener(listener);
            engine.context().clear();
        }
    } off{engine, listener};
    for (size_t i = 0; i < prompts.size(); ++i) {
        if (progress && !progress(i, prompts.size())) throw Cancelled("calibration was cancelled");
        std::vector<int32_t> toks = engine.vocab().encode(prompts[i], true);
        if (toks.empty()) continue;
        if (static_cast<int64_t>(toks.size()) + o.n_greedy > ctx.n_ctx())
            toks.resize(static_cast<size_t>(std::max<int64_t>(1, ctx.n_ctx() - o.n_greedy)));
        ctx.clear();
        const float* logits = ctx.decode(toks, false);
        out.tokens += static_cast<int64_t>(toks.size());
        for (int64_t g = 0; g < o.n_greedy && ctx.n_past() < ctx.n_ctx(); ++g) {
            const int32_t t = argmax_row(logits, c.n_vocab);
            logits = ctx.decode({&t, 1}, false);
            ++out.tokens;
        }
    }
    if (progress && !progress(prompts.size(), prompts.size())) throw Cancelled("calibration was cancelled");

    for (const auto& L : m.weights().layers)
        if (L.ffn == model::FfnKind::Moe) out.moe_layers.push_back(L.index);
    out.experts_total = static_cast<int64_t>(out.moe_layers.size()) * c.n_expert;
    int64_t n_pin = o.n_pin >= 0 ? o.n_pin : static_cast<int64_t>(o.pin_fraction * static_cast<double>(out.experts_total));
    std::vector<std::pair<int64_t, int64_t>> ranked;  // (count, key)
    for (int64_t layer : out.moe_layers)
        for (int64_t e = 0; e < c.n_expert; ++e)
            ranked.push_back({out.counts[static_cast<size_t>(layer * c.n_expert + e)], layer * c.n_expert + e});
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    n_pin = std::min<int64_t>(n_pin, static_cast<int64_t>(ranked.size()));
    int64_t pinned_uses = 0, all_uses = 0;
    for (const auto& r : ranked) all_uses += r.first;
    for (int64_t i = 0; i < n_pin; ++i) {
        out.pinned.push_back(ranked[static_cast<size_t>(i)].second);
        pinned_uses += ranked[static_cast<size_t>(i)].first;
    }
    out.pinned_share = all_uses ? static_cast<double>(pinned_uses) / static_cast<double>(all_uses) : 0.0;
    return out;
}

std::string Calibration::to_json() const {
    std::string s = "{\"strata_calibration\": 1, \"model\": \"" + json::escape(model) + "\", \"n_layer\": " +
                    std::to_string(n_layer) + ", \"n_expert\": " + std::to_string(n_expert) +
                    ", \"n_expert_used\": " + std::to_string(n_expert_used) + ", \"tokens\": " + std::to_string(tokens) +
                    ",\n \"counts\": [";
    for (int64_t layer = 0; layer < n_layer; ++layer) {
        s += layer ? ",\n  [" : "\n  [";
        const bool is_moe = std::find(moe_layers.begin(), moe_layers.end(), layer) != moe_layers.end();
        for (int64_t e = 0; is_moe && e < n_expert; ++e)
            s += (e ? ", " : "") + std::to_string(counts[static_cast<size_t>(layer * n_expert + e)]);
        s += "]";
    }
    s += "],\n \"pinned\": [";
    for (size_t i = 0; i < pinned.size(); ++i)
        s += (i ? ", " : "") + std::string("[") + std::to_string(pinned[i] / n_expert) + ", " +
             std::to_string(pinned[i] % n_expert) + "]";
    s += "]}\n";
    return s;
}

void write_calibration(const std::string& path, const Calibration& c) {
    const std::string out = c.to_json();
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw Error(path + ": cannot write the calibration file");
        f << out;
        if (!f.flush()) throw Error(path + ": write failed (disk full?)");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": cannot replace the calibration file");
}

}  // namespace strata::core
