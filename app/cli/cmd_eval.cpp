#include <cstdio>

#include "commands.h"
#include "common.h"
#include "common/error.h"
#include "core/engine.h"

namespace strata::cli {

namespace {

std::string ids_json(const std::vector<int32_t>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    return s + "]";
}

}  // namespace

int cmd_eval(int argc, char** argv) {
    Args a("eval", "MODEL --prompts FILE --logits OUT.f32 [--greedy N]",
           "For each line of FILE (a literal \\n is a newline): tokenizes with BOS, runs the whole prompt in\n"
           "one pass, appends one float32 row of n_vocab logits per position to OUT.f32, then decodes N tokens\n"
           "greedily one at a time. Prints one JSON line per prompt: prompt, tokens, logits_offset_rows, greedy.");
    a.positional("MODEL", "a GGUF model file");
    a.option("--prompts", "", "FILE", "prompts, one per line");
    a.option("--logits", "", "OUT.f32", "where to write the logits rows (little-endian float32)");
    a.option("--greedy", "", "N", "greedy tokens to decode after each prompt", "32");
    add_engine_options(a);
    if (!a.parse(argc, argv, 2)) return 0;
    if (!a.has("--prompts")) throw UsageError("missing --prompts FILE");
    if (!a.has("--logits")) throw UsageError("missing --logits OUT.f32");
    const int64_t n_greedy = a.integer("--greedy", 0, 1 << 20);
    const EngineSettings settings = engine_settings(a);

    const std::vector<std::string> prompts = read_prompt_file(a.str("--prompts"));

    auto engine = core::Engine::load(a.pos("MODEL"), settings);
    const model::Model* m = &engine->model();
    const int64_t n_vocab = m->config().n_vocab;
    const tok::Vocab& vocab = m->vocab();
    if (vocab.bos() < 0) throw Error(a.pos("MODEL") + ": the model has no BOS token, which eval prepends");
    FILE* out = std::fopen(a.str("--logits").c_str(), "wb");
    if (!out) throw Error(a.str("--logits") + ": cannot create the logits file");
    std::unique_ptr<FILE, int (*)(FILE*)> out_guard(out, std::fclose);

    model::Context& ctx = engine->context();
    int64_t rows = 0;
    for (const std::string& prompt : prompts) {
        std::vector<int32_t> tokens = vocab.encode(prompt, false);
        tokens.insert(tokens.begin(), vocab.bos());
        if (static_cast<int64_t>(tokens.size()) + n_greedy > ctx.n_ctx()) {
            throw Error("prompt '" + prompt.substr(0, 40) + "' has " + std::to_string(tokens.size()) + " tokens; with " +
                        std::to_string(n_greedy) + " greedy tokens it exceeds the context of " +
                        std::to_string(ctx.n_ctx()) + " (use --ctx)");
        }
        ctx.clear();
        const float* logits = ctx.decode(tokens, true);
        const size_t n_floats = tokens.size() * static_cast<size_t>(n_vocab);
        if (std::fwrite(logits, sizeof(float), n_floats, out) != n_floats)
            throw Error(a.str("--logits") + ": write failed (disk full?)");
        std::vector<int32_t> greedy;
        int32_t next = argmax(logits + (tokens.size() - 1) * n_vocab, n_vocab);
        for (int64_t i = 0; i < n_greedy; ++i) {
            greedy.push_back(next);
            if (i + 1 == n_greedy) break;
            next = argmax(ctx.decode({&next, 1}, false), n_vocab);
        }
        // greedy_text is null where the bytes are not valid UTF-8, as in the fixtures.
        const std::string text = vocab.pieces_text(greedy);
        // Quoted by the format, not by joining strings: GCC 12 misreads
        // "\"" + std::string&& as an overlapping memcpy (-Wrestrict, GCC bug 105329).
        const bool text_ok = is_valid_utf8(text);
        const std::string text_json = text_ok ? json_escape(text) : "null";
        const char* quote = text_ok ? "\"" : "";
        std::printf("{\"prompt\": \"%s\", \"tokens\": %s, \"logits_offset_rows\": %lld, \"greedy\": %s, \"greedy_text\": %s%s%s}\n",
                    json_escape(prompt).c_str(), ids_json(tokens).c_str(), static_cast<long long>(rows),
                    ids_json(greedy).c_str(), quote, text_json.c_str(), quote);
        std::fflush(stdout);
        rows += static_cast<int64_t>(tokens.size());
    }
    if (std::fflush(out) != 0) throw Error(a.str("--logits") + ": write failed (disk full?)");
    return 0;
}

}  // namespace strata::cli
