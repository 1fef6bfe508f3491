// A small MoE model spec for tests that make their own model: 2 layers, dim
// 256, 8 query heads over 4 KV heads, 8 experts top-4 of width 128. From 2
// threads decode takes the one-region attention, and at 2 and 4 threads a
// token's experts split evenly, so it takes the per-expert path too
// (model/context.cpp).
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

}  // namespace strata::test
