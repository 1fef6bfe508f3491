// A small MoE model spec for tests that make their own model: 2 layers, dim
// 256, 8 query heads over 4 KV heads, 8 experts top-4 of width 128. From 2
// threads decode takes the one-region attention, and at 2 and 4 threads a
// token's experts split evenly, so it takes the per-expert path too
// (backend/cpu/cpu_backend.h).
#pragma once

#include <string>

#include "kernels/quant_types.h"
#include "model/make_model.h"

namespace strata::test {

inline model::MakeModelSpec small_moe_spec(kernels::WeightType type, const std::string& arch = "llama") {
    model::MakeModelSpec spec;
    spec.arch = arch;
    spec.layers = 2;
    spec.dim = 256;
    spec.heads = 8;
    spec.kv_heads = 4;
    spec.experts = 8;
    spec.used = 4;
    spec.expert_ff = 128;
    spec.type = type;
    return spec;
}

// A small model of each architecture make-model writes, with what sets it
// apart: 3 layers (4 where the pattern needs them), dim 64, 8 experts top-2.
inline model::MakeModelSpec small_arch_spec(const std::string& arch) {
    model::MakeModelSpec s;
    s.arch = arch;
    s.layers = 3;
    s.dim = 64;
    s.heads = 4;
    s.kv_heads = 2;
    s.experts = 8;
    s.used = 2;
    s.expert_ff = 64;
    s.ctx = 256;
    s.threads = 2;
    if (arch == "llama") {
        s.dense_layers = 1;
        s.ff = 128;
    }
    if (arch == "qwen2moe") s.shared_ff = 96;
    if (arch == "glm4moe" || arch == "ernie4_5-moe") {
        s.dense_layers = 1;
        s.ff = 128;
    }
    if (arch == "glm4moe") {
        s.head_dim = 32;  // q wider than dim, as GLM-4.5's
        s.shared_experts = 1;
        s.weights_norm = true;
        s.weights_scale = 2.5f;
    }
    if (arch == "ernie4_5-moe") s.shared_ff = 96;
    if (arch == "qwen35moe") {
        s.layers = 4;  // three delta nets, then attention
        s.head_dim = 32;
        s.shared_ff = 64;
    }
    if (arch == "llama4") {
        s.layers = 4;  // layer 3 without RoPE
        s.moe_step = 2;
        s.used = 1;
        s.ff = 128;
    }
    return s;
}

}  // namespace strata::test
