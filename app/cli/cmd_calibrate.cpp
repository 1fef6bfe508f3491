#include <algorithm>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "common/json.h"
#include "core/engine.h"

namespace strata::cli {

int cmd_calibrate(int argc, char** argv) {
    Args a("calibrate", "MODEL --prompts FILE --out hot.json [--pin N | --pin-fraction F] [--greedy N]",
           "Counts how often each (layer, expert) is routed to on the prompts of FILE (each prompt, then N\n"
           "greedy tokens one at a time, as decoding routes), and writes the counts and the pin list (the\n"
           "most used experts) to hot.json. Load it with --pin-file (run, eval, bench) or in the app's settings.");
    a.positional("MODEL", "a GGUF mixture-of-experts model");
    a.option("--prompts", "", "FILE", "calibration prompts, one per line (a literal \\n is a newline)");
    a.option("--out", "-o", "FILE", "where to write the calibration file");
    a.option("--pin", "", "N", "experts to pin (default: --pin-fraction of all experts)");
    a.option("--pin-fraction", "", "F", "fraction of all experts to pin", "0.125");
    a.option("--greedy", "", "N", "greedy tokens decoded after each prompt", "32");
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");
    if (!a.has("--out")) throw UsageError("missing --out FILE");
    const int64_t n_greedy = a.integer("--greedy", 0, 1 << 20);
    const double pin_fraction = a.number("--pin-fraction", 0.0, 1.0);
    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));

    auto engine = core::Engine::load(a.pos("MODEL"), engine_settings(a));
    const model::Model& m = engine->model();
    const model::ModelConfig& c = m.config();
    if (c.n_expert == 0) throw Error(a.pos("MODEL") + ": not a mixture-of-experts model (no experts to pin)");
    std::vector<int64_t> counts(static_cast<size_t>(c.n_layer * c.n_expert), 0);
    int64_t tokens = 0;
    engine->add_routing_listener([&](const model::RoutingEvent& e) {
        for (int64_t k = 0; k < e.n_used; ++k) ++counts[static_cast<size_t>(e.layer * c.n_expert + e.experts[k])];
    });
    model::Context& ctx = engine->context();
    for (const std::string& p : prompts) {
        std::vector<int32_t> toks = engine->vocab().encode(p, true);
        if (static_cast<int64_t>(toks.size()) + n_greedy > ctx.n_ctx()) toks.resize(static_cast<size_t>(std::max<int64_t>(1, ctx.n_ctx() - n_greedy)));
        ctx.clear();
        const float* logits = ctx.decode(toks, false);
        tokens += static_cast<int64_t>(toks.size());
        for (int64_t i = 0; i < n_greedy; ++i) {
            const int32_t t = argmax(logits, c.n_vocab);
            logits = ctx.decode({&t, 1}, false);
            ++tokens;
        }
    }

    std::vector<int64_t> moe;
    for (const auto& L : m.weights().layers)
        if (L.ffn == model::FfnKind::Moe) moe.push_back(L.index);
    const int64_t total = static_cast<int64_t>(moe.size()) * c.n_expert;
    int64_t n_pin = a.has("--pin") ? a.integer("--pin", 0, total) : static_cast<int64_t>(pin_fraction * total);
    std::vector<std::pair<int64_t, int64_t>> ranked;  // (count, key)
    for (int64_t layer : moe)
        for (int64_t e = 0; e < c.n_expert; ++e)
            ranked.push_back({counts[static_cast<size_t>(layer * c.n_expert + e)], layer * c.n_expert + e});
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    n_pin = std::min<int64_t>(n_pin, static_cast<int64_t>(ranked.size()));

    std::string out = "{\"strata_calibration\": 1, \"model\": \"" + json::escape(c.name) + "\", \"n_layer\": " +
                      std::to_string(c.n_layer) + ", \"n_expert\": " + std::to_string(c.n_expert) +
                      ", \"n_expert_used\": " + std::to_string(c.n_expert_used) + ", \"tokens\": " +
                      std::to_string(tokens) + ",\n \"counts\": [";
    for (int64_t layer = 0; layer < c.n_layer; ++layer) {
        out += layer ? ",\n  [" : "\n  [";
        const bool is_moe = std::find(moe.begin(), moe.end(), layer) != moe.end();
        for (int64_t e = 0; is_moe && e < c.n_expert; ++e)
            out += (e ? ", " : "") + std::to_string(counts[static_cast<size_t>(layer * c.n_expert + e)]);
        out += "]";
    }
    out += "],\n \"pinned\": [";
    int64_t pinned_uses = 0, all_uses = 0;
    for (const auto& [n, key] : ranked) all_uses += n;
    for (int64_t i = 0; i < n_pin; ++i) {
        const int64_t key = ranked[static_cast<size_t>(i)].second;
        pinned_uses += ranked[static_cast<size_t>(i)].first;
        out += (i ? ", " : "") + std::string("[") + std::to_string(key / c.n_expert) + ", " +
               std::to_string(key % c.n_expert) + "]";
    }
    out += "]}\n";
    const std::string path = a.str("--out");
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw Error(path + ": cannot write the calibration file");
        f << out;
        if (!f.flush()) throw Error(path + ": write failed (disk full?)");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": cannot replace the calibration file");
    std::printf("%lld tokens; pinned %lld of %lld experts, which took %.1f%% of all expert uses; wrote %s\n",
                static_cast<long long>(tokens), static_cast<long long>(n_pin), static_cast<long long>(total),
                all_uses ? 100.0 * pinned_uses / all_uses : 0.0, path.c_str());
    return 0;
}

}  // namespace strata::cli
