#include <cstdio>
#include <fstream>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "core/engine.h"
#include "analysis/routing_stats.h"

namespace strata::cli {

int cmd_routing_stats(int argc, char** argv) {
    Args a("routing-stats", "MODEL --prompts FILE [--json]",
           "Runs each prompt of FILE (one per line; a literal \\n is a newline) through the model and reports,\n"
           "per MoE layer: the expert load histogram and its entropy, the fraction of consecutive tokens that\n"
           "reuse an expert of the previous token, how often the cross-layer lookahead (layer L's router on\n"
           "the hidden state entering layer L-1's FFN) predicts layer L's experts (mean overlap of the top-k\n"
           "sets), and the hit rate of an LRU cache holding 25% / 50% of the layer's experts. Each figure is\n"
           "shown next to its uniform-random-routing baseline.");
    a.positional("MODEL", "a GGUF MoE model");
    a.option("--prompts", "", "FILE", "prompts, one per line");
    a.flag("--json", "print one JSON object instead of the table");
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");

    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));
    const EngineSettings settings = engine_settings(a);
    auto engine = core::Engine::load(a.pos("MODEL"), settings);
    const model::Model* m = &engine->model();
    if (m->config().n_expert == 0) throw Error(a.pos("MODEL") + ": not a mixture-of-experts model (no expert_count)");
    model::Context& ctx = engine->context();
    experts::RoutingStatsCollector stats(m->config());
    engine->add_routing_listener([&stats](const model::RoutingEvent& e) { stats.on_route(e); });
    engine->add_lookahead_listener([&stats](const model::LookaheadEvent& e) { stats.on_lookahead(e); });
    for (const std::string& p : prompts) {
        const auto tokens = m->vocab().encode(p, true);
        if (static_cast<int64_t>(tokens.size()) > ctx.n_ctx()) {
            throw Error("prompt '" + p.substr(0, 40) + "...' has " + std::to_string(tokens.size()) +
                        " tokens, more than the context of " + std::to_string(ctx.n_ctx()) + " (use --ctx)");
        }
        ctx.clear();
        stats.begin_sequence();
        ctx.decode(tokens, false);
    }
    const auto report = stats.report();
    std::fputs(a.flag_set("--json") ? (report.to_json() + "\n").c_str() : report.to_text().c_str(), stdout);
    return 0;
}

}  // namespace strata::cli
