#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "core/default_model.h"
#include "core/engine.h"
#include "grammar/json_schema.h"
#include "tokenizer/vocab.h"
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
    add_draft_options(a);
    a.option("--json-schema", "", "SCHEMA",
             "the output must be JSON this schema accepts: a JSON Schema, as text or @FILE (as response_format\n"
             "json_schema); the grammar's cost per token is printed at the end");
    a.option("--grammar", "", "FILE", "the output must follow this GBNF grammar (llama.cpp's notation)");
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
    double index_ms = -1.0;
    if (a.has("--json-schema") || a.has("--grammar")) {
        if (a.has("--json-schema") && a.has("--grammar")) throw UsageError("give --json-schema or --grammar, not both");
        std::string gbnf;
        if (a.has("--grammar")) {
            gbnf = read_text_file(a.str("--grammar"), "grammar");
        } else {
            std::string schema = a.str("--json-schema");
            if (!schema.empty() && schema[0] == '@') schema = read_text_file(schema.substr(1), "JSON schema");
            nlohmann::ordered_json js;
            try {
                js = nlohmann::ordered_json::parse(schema);  // in its own key order: the order the keys are written
            } catch (const nlohmann::json::exception& e) {
                throw UsageError(std::string("--json-schema is not JSON: ") + e.what());
            }
            gbnf = grammar::json_schema_gbnf(js);
        }
        sp.grammar = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
        const auto t0 = std::chrono::steady_clock::now();
        engine->vocab().piece_index();  // built once per model, on the first constrained request
        index_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (a.has("--draft")) throw UsageError("--draft does not run under a grammar: leave one out");
    }

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
    if (r.constraint) {
        const sched::ConstraintStats& c = *r.constraint;
        const double total = r.prompt_seconds + r.decode_seconds;
        std::fprintf(stderr,
                     "grammar: %.1f us per token (%.2f%% of the generation's time) | %lld tokens, %lld first draws "
                     "refused, %lld whole-vocabulary passes | token index built in %.1f ms (once per model)\n",
                     c.tokens ? 1e6 * c.seconds / double(c.tokens) : 0.0, total > 0 ? 100.0 * c.seconds / total : 0.0,
                     static_cast<long long>(c.tokens), static_cast<long long>(c.refused),
                     static_cast<long long>(c.full_passes), index_ms);
    }
    if (a.has("--draft"))
        std::fprintf(stderr, "speculative: %.1f%% of %lld draft tokens accepted, %.2f tokens per target pass\n",
                     100.0 * spec.acceptance(), static_cast<long long>(spec.drafted), spec.tokens_per_round());
    return 0;
}

}  // namespace strata::cli
