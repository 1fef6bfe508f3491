// Random-weight models of any shape, written as GGUF with the same tensor
// names and metadata llama.cpp uses, for tests and benchmarks. Deterministic:
// the same spec and seed give the same bytes, whatever the thread count.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/quant_types.h"

namespace strata::model {

struct MakeModelSpec {
    std::string arch = "llama";   // llama | qwen2moe | qwen3moe | olmoe
    int64_t layers = 4;
    int64_t dim = 256;
    int64_t heads = 8;
    int64_t kv_heads = 4;
    int64_t experts = 8;          // 0: a dense model (llama only)
    int64_t used = 2;
    int64_t expert_ff = 512;
    int64_t dense_layers = 0;     // leading layers with a dense FFN
    int64_t ff = 0;               // dense FFN width (0: 4 * dim rounded to the type's block)
    int64_t shared_ff = 0;        // qwen2moe shared expert width (0: none)
    int64_t ctx = 2048;
    int64_t vocab = 512;          // synthetic vocabulary size when vocab_from is empty
    std::string vocab_from;       // copy the tokenizer of this GGUF file
    kernels::WeightType type = kernels::WeightType::F32;
    uint64_t seed = 1;
    int threads = 0;

    // Empty when valid, else what is wrong and how to fix it.
    std::string validate() const;
};

// Writes the model to `path`. Throws strata::Error.
void make_model(const MakeModelSpec& spec, const std::string& path);

}  // namespace strata::model
