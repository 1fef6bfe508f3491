#include <cstdio>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "core/engine.h"
#include "experts/trace.h"

namespace strata::cli {

int cmd_trace(int argc, char** argv) {
    Args a("trace", "MODEL --prompts FILE --out TRACE [--greedy N] [engine options]",
           "Records a routing trace for 'strata-cli simulate': runs each prompt of FILE (one per line; a literal\n"
           "\\n is a newline) through the model in one pass, then decodes N greedy tokens after it one at a time\n"
           "(which is what decode routing looks like), and writes for every token and MoE layer the experts the\n"
           "router chose with their weights, the token ids, and the cross-layer lookahead (that layer's router\n"
           "applied to the hidden state one layer earlier). The model runs in the engine with the engine options\n"
           "below (a model larger than RAM under a budget and an expert cache); routing does not depend on them.\n"
           "Format: engine/experts/trace.h. ('run', 'eval' and 'bench' record the same with --trace FILE.)");
    a.positional("MODEL", "a GGUF MoE model");
    a.option("--prompts", "", "FILE", "prompts, one per line");
    a.option("--out", "-o", "TRACE", "the trace file to write");
    a.option("--greedy", "", "N", "greedy tokens to decode after each prompt", "0");
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");
    if (!a.has("--out")) throw UsageError("missing --out TRACE");
    if (a.has("--trace")) throw UsageError("--trace: this command writes its trace to --out");
    const int64_t n_greedy = a.integer("--greedy", 0, 1 << 20);
    EngineSettings settings = engine_settings(a);
    settings.trace_file = a.str("--out");

    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));
    auto engine = core::Engine::load(a.pos("MODEL"), settings);
    const experts::TraceHeader header = experts::TraceHeader::for_model(engine->model());
    model::Context& ctx = engine->context();
    const int64_t n_vocab = engine->model().config().n_vocab;
    int64_t prompt_tokens = 0, decoded = 0;
    for (const std::string& p : prompts) {
        const auto tokens = engine->vocab().encode(p, true);
        if (tokens.empty()) continue;
        if (static_cast<int64_t>(tokens.size()) + n_greedy > ctx.n_ctx()) {
            throw Error("prompt '" + p.substr(0, 40) + "' has " + std::to_string(tokens.size()) + " tokens; with " +
                        std::to_string(n_greedy) + " greedy tokens it exceeds the context of " +
                        std::to_string(ctx.n_ctx()) + " (use --ctx)");
        }
        ctx.clear();  // the engine starts a new sequence in the trace when positions start over
        engine->trace_tokens(0, tokens);
        const float* logits = ctx.decode(tokens, false);
        prompt_tokens += static_cast<int64_t>(tokens.size());
        int32_t next = argmax(logits, n_vocab);
        for (int64_t i = 0; i < n_greedy; ++i) {
            engine->trace_tokens(ctx.n_past(), {&next, 1});
            next = argmax(ctx.decode({&next, 1}, false), n_vocab);
            ++decoded;
        }
    }
    const core::Engine::TraceCounts written = engine->finish_trace();
    std::printf("wrote %s: %zu sequences, %lld tokens (%lld prompt, %lld decoded one at a time), %lld MoE layers x "
                "%lld experts top-%lld, %lld routing and %lld lookahead records, %s\n",
                a.str("--out").c_str(), prompts.size(), static_cast<long long>(prompt_tokens + decoded),
                static_cast<long long>(prompt_tokens), static_cast<long long>(decoded),
                static_cast<long long>(header.n_moe()), static_cast<long long>(header.n_expert),
                static_cast<long long>(header.n_used), static_cast<long long>(written.routes),
                static_cast<long long>(written.lookaheads), human_bytes(written.bytes).c_str());
    return 0;
}

}  // namespace strata::cli
