// strata-cli: the engine from the command line.
#include <cstdio>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "args.h"
#include "commands.h"
#include "common/error.h"

namespace {

struct Command {
    const char* name;
    int (*run)(int, char**);
    const char* summary;
};

const Command kCommands[] = {
    {"inspect", strata::cli::cmd_inspect, "architecture, hyper-parameters, tensors, expert byte ranges, sizes"},
    {"run", strata::cli::cmd_run, "generate text from a prompt, streaming, then print tokens/s"},
    {"serve", strata::cli::cmd_serve, "serve the model over the OpenAI API (chat, completions, streaming, metrics)"},
    {"eval", strata::cli::cmd_eval, "teacher-forced logits and greedy continuations for a prompt file"},
    {"tokenize", strata::cli::cmd_tokenize, "token ids and pieces of a text"},
    {"chat-template", strata::cli::cmd_chat_template, "a conversation through the model's own Jinja chat template"},
    {"bench", strata::cli::cmd_bench, "prefill/decode speed, roofline and expert-cache figures (JSON with --json)"},
    {"calibrate", strata::cli::cmd_calibrate, "count expert use on prompts and write the hot-expert pin list"},
    {"routing-stats", strata::cli::cmd_routing_stats, "expert load, reuse, lookahead and LRU figures of a MoE model"},
    {"trace", strata::cli::cmd_trace, "record a routing trace (experts, weights, lookahead) of prompts for simulate"},
    {"simulate", strata::cli::cmd_simulate, "replay a routing trace: cache policies, prefetch, projected tokens/s"},
    {"plan", strata::cli::cmd_plan, "the memory plan: ledger accounts per tier vs budgets, and whether the model fits"},
    {"quantize", strata::cli::cmd_quantize, "write a GGUF quantized by tensor class (router, attention, experts, ...)"},
    {"make-model", strata::cli::cmd_make_model, "write a random-weight model of any shape (tests, benchmarks)"},
    {"quality", strata::cli::cmd_quality, "what quantization did: perplexity, KL, top-1 and routing drift against the base model"},
    {"make-trace", strata::cli::cmd_make_trace, "write a synthetic routing trace with a chosen locality (for simulate)"},
};

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: strata-cli COMMAND [options]\n\n"
                 "Strata's inference engine from the command line.\n\ncommands:\n");
    for (const Command& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
    std::fprintf(out, "\n'strata-cli COMMAND --help' describes a command. Set STRATA_LOG=debug for engine logs.\n");
}

}  // namespace

int main(int argc, char** argv) {
    // Engine logs go to stderr; quiet unless asked, so stdout stays the output.
    const char* level = std::getenv("STRATA_LOG");
    spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    spdlog::set_default_logger(spdlog::default_logger());
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
        usage(stdout);
        return 0;
    }
    for (const Command& c : kCommands) {
        if (cmd != c.name) continue;
        try {
            return c.run(argc, argv);
        } catch (const strata::cli::UsageError& e) {
            std::fprintf(stderr, "strata-cli %s: %s\n", c.name, e.what());
            return 2;
        } catch (const strata::Error& e) {
            std::fprintf(stderr, "strata-cli %s: error: %s\n", c.name, e.what());
            return 1;
        } catch (const std::bad_alloc&) {
            std::fprintf(stderr, "strata-cli %s: error: out of memory\n", c.name);
            return 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "strata-cli %s: internal error: %s\n", c.name, e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "strata-cli: unknown command '%s' (run 'strata-cli --help' for the list)\n", cmd.c_str());
    return 2;
}
