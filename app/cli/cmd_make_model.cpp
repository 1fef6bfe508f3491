#include <chrono>
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "model/make_model.h"

namespace strata::cli {

int cmd_make_model(int argc, char** argv) {
    Args a("make-model",
           "OUT.gguf --arch llama|qwen2moe|qwen3moe|olmoe --layers N --dim D --heads H --kv-heads K --experts E\n"
           "       --used U --expert-ff F [--dense-layers L --ff F2] [--shared-ff S] [--type T] [--vocab-from GGUF] [--seed S]",
           "Writes a random-weight model of the given shape with llama.cpp's tensor names and metadata,\n"
           "for tests and benchmarks. The same options and seed give the same file byte for byte.\n"
           "All-MoE llama/olmoe files load in llama.cpp too; --dense-layers is a Strata extension for them.\n"
           "Routers and norms stay f32; every other matrix uses --type.");
    a.positional("OUT.gguf", "where to write the model");
    a.option("--arch", "", "A", "architecture: llama, qwen2moe, qwen3moe, olmoe", "llama");
    a.option("--layers", "", "N", "transformer blocks", "4");
    a.option("--dim", "", "D", "embedding width", "256");
    a.option("--heads", "", "H", "attention heads", "8");
    a.option("--kv-heads", "", "K", "key/value heads (GQA)", "4");
    a.option("--experts", "", "E", "experts per MoE layer; 0 = dense model", "8");
    a.option("--used", "", "U", "experts routed per token", "2");
    a.option("--expert-ff", "", "F", "expert FFN width", "512");
    a.option("--dense-layers", "", "L", "leading layers with a dense FFN", "0");
    a.option("--ff", "", "F2", "dense FFN width (0: 4 x dim)", "0");
    a.option("--shared-ff", "", "S", "shared expert FFN width (qwen2moe; 0: none)", "0");
    a.option("--ctx", "", "N", "context length in the metadata", "2048");
    a.option("--vocab", "", "N", "synthetic vocabulary size (without --vocab-from)", "512");
    a.option("--vocab-from", "", "GGUF", "copy the tokenizer of this GGUF file");
    a.option("--type", "", "T", "matrix type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k", "f32");
    a.option("--seed", "", "S", "random seed", "1");
    a.option("--threads", "-t", "N", "threads (0: all cores)", "0");
    if (!a.parse(argc, argv, 2)) return 0;

    model::MakeModelSpec s;
    s.arch = a.str("--arch");
    s.layers = a.integer("--layers", 1, 1024);
    s.dim = a.integer("--dim", 2, 65536);
    s.heads = a.integer("--heads", 1, 1024);
    s.kv_heads = a.integer("--kv-heads", 1, 1024);
    s.experts = a.integer("--experts", 0, 1024);
    s.used = a.integer("--used", 1, 1024);
    s.expert_ff = a.integer("--expert-ff", 1, 1 << 20);
    s.dense_layers = a.integer("--dense-layers", 0, 1024);
    s.ff = a.integer("--ff", 0, 1 << 20);
    s.shared_ff = a.integer("--shared-ff", 0, 1 << 20);
    s.ctx = a.integer("--ctx", 1, 1 << 20);
    s.vocab = a.integer("--vocab", 1, 1 << 22);
    if (a.has("--vocab-from")) s.vocab_from = a.str("--vocab-from");
    if (!kernels::parse_type_name(a.str("--type").c_str(), &s.type)) {
        throw UsageError("--type: unknown weight type '" + a.str("--type") +
                         "' (use f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k)");
    }
    s.seed = static_cast<uint64_t>(a.integer("--seed", 0, INT64_MAX));
    s.threads = static_cast<int>(a.integer("--threads", 0, 1024));
    if (const std::string err = s.validate(); !err.empty()) throw UsageError(err);

    const auto t0 = std::chrono::steady_clock::now();
    model::make_model(s, a.pos("OUT.gguf"));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "wrote %s in %.1f s\n", a.pos("OUT.gguf").c_str(), secs);
    return 0;
}

}  // namespace strata::cli
