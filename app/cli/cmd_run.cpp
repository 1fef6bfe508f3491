#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "core/default_model.h"
#include "core/engine.h"
#include "draft.h"
#include "sched/generator.h"
#include "sched/speculative.h"
#include "serve/backend.h"
#include "serve/serve_loop.h"

namespace strata::cli {

int cmd_run(int argc, char** argv) {
    Args a("run", "[MODEL] -p TEXT [-n N] [options]",
           "Generates a continuation of TEXT, streaming it to stdout, then prints prompt and\n"
           "generation tokens/s to stderr. Without MODEL (or --model) it runs the embedded demo model\n"
           "(or $STRATA_MODEL).");
    a.positional("MODEL", "a GGUF model file (default: the demo model)", false);
    a.option("--model", "-m", "MODEL", "the model, as an option");
    a.option("--prompt", "-p", "TEXT", "the prompt");
    a.option("--n-predict", "-n", "N", "the most tokens to generate", "128");
    a.flag("--no-special", "do not add BOS/EOS to the prompt as the model's metadata asks");
    a.flag("--chat", "TEXT is a user message: render it with the model's chat template and stop at its end of turn\n"
                     "(what 'serve' does for /v1/chat/completions); the prompt is not echoed");
    a.option("--system", "", "TEXT", "with --chat: a system message before the user's");
    a.option("--draft", "", "D",
             "speculative decoding: a GGUF with the same vocabulary, the model's own MTP block (mtp), or the model\n"
             "itself with fewer layers or experts (self:layers=N,experts=K), optionally routing only among cached\n"
             "experts (…,resident)");
    a.option("--spec-k", "", "K", "speculative decoding: draft tokens per round (adapts between 1 and 2K)", "4");
    a.option("--spec-p-min", "", "P",
             "speculative decoding: stop a round's draft at a token it gives less than probability P (0: never)", "0");
    add_engine_options(a);
    add_sampling_options(a, "0.8");
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompt")) throw UsageError("missing --prompt/-p TEXT");

    sched::SamplingParams sp = sampling_params(a);
    sp.max_tokens = static_cast<int32_t>(a.integer("--n-predict", 1, 1 << 24));
    std::string model = a.has("--model") ? a.str("--model") : a.pos("MODEL");
    if (model.empty()) model = core::default_model_path();
    if (model.empty()) {
        throw UsageError("no MODEL given and the demo model was not found (set STRATA_MODEL or pass a GGUF file)");
    }
    auto engine = core::Engine::load(model, engine_settings(a));
    const std::string prompt = a.str("--prompt");
    const bool chat = a.flag_set("--chat");
    if (a.has("--system") && !chat) throw UsageError("--system needs --chat");
    std::vector<int32_t> tokens;
    if (chat) {
        // Exactly as the server prepares /v1/chat/completions.
        serve::CompletionRequest req;
        if (a.has("--system")) req.messages.push_back({"system", a.str("--system")});
        req.messages.push_back({"user", prompt});
        req.sampling = sp;
        req.seed_given = true;
        req.stop = sp.stop;
        try {
            serve::PreparedRequest p = serve::prepare_request(req, engine->vocab(), engine->chat_template(),
                                                              engine->context().n_ctx(), sp.seed);
            tokens = std::move(p.tokens);
            sp = p.sampling;
        } catch (const serve::ApiException& e) {
            throw Error(e.error.message);
        }
    } else {
        tokens = engine->vocab().encode(prompt, !a.flag_set("--no-special"));
    }
    if (tokens.empty()) throw UsageError("the prompt is empty");

    // The draft before any output, so a bad --draft is a clean one-line error.
    Draft draft;
    const int k = static_cast<int>(a.integer("--spec-k", 1, 32));
    if (a.has("--draft")) draft = make_draft(a.str("--draft"), *engine, engine->settings().threads);

    if (!chat) std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    auto sink = [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    };
    sched::GenerationResult r;
    sched::SpeculativeStats spec;
    if (draft.drafter) {
        sched::SpeculativeParams params;
        params.k = k;
        params.k_max = std::max(2 * k, 1);
        params.p_min = static_cast<float>(a.number("--spec-p-min", 0, 1));
        r = sched::generate_speculative(engine->context(), *draft.drafter, engine->vocab(), sp, tokens, params, &spec,
                                        sink);
    } else {
        r = sched::generate(engine->context(), engine->vocab(), sp, tokens, sink);
    }
    std::printf("\n");
    std::fprintf(stderr, "\nprompt: %lld tokens, %.1f tok/s | generation: %zu tokens, %.1f tok/s | finish: %s\n",
                 static_cast<long long>(r.prompt_tokens), r.prompt_tok_s(), r.tokens.size(), r.decode_tok_s(),
                 sched::finish_reason_name(r.finish));
    if (a.has("--draft"))
        std::fprintf(stderr, "speculative: %.1f%% of %lld draft tokens accepted, %.2f tokens per target pass\n",
                     100.0 * spec.acceptance(), static_cast<long long>(spec.drafted), spec.tokens_per_round());
    return 0;
}

}  // namespace strata::cli
