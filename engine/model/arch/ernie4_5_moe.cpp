// ERNIE-4.5 MoE (21B-A3B, 300B-A47B): RoPE on adjacent pairs over the whole
// head, leading dense layers, softmax routing with an optional selection
// bias, the chosen weights always renormalised and never scaled (hard-wired
// in llama.cpp), and an ungated shared expert.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::Normal;

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    if (c.n_expert <= 0) throw Error(f.path() + ": an ernie4_5-moe file needs metadata '" + a + "expert_count'");
    const std::string step = a + "interleave_moe_layer_step";
    if (!f.has(step)) throw Error(f.path() + ": an ernie4_5-moe file needs metadata '" + step + "' (1: every layer after the dense ones is MoE)");
    // llama.cpp creates experts in every layer after the leading dense ones
    // whatever the step, so only step 1 describes a file it reads.
    if (f.get_uint(step) != 1)
        throw Error(f.path() + ": metadata '" + step + "' is " + std::to_string(f.get_uint(step)) +
                    " (supported: 1, a MoE layer after each leading dense one)");
    if (c.n_rot != c.head_dim)
        throw Error(f.path() + ": metadata '" + a + "rope.dimension_count' is " + std::to_string(c.n_rot) +
                    "; ernie4_5-moe rotates the whole head (" + std::to_string(c.head_dim) + ")");
    c.gating = Gating::Softmax;
    c.expert_weights_norm = true;
    c.expert_weights_scale = 1.0f;
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});  // scored where the layer has its selection bias (ffn_block)
}

}  // namespace

extern const ArchTraits ernie4_5_moe{
    .name = "ernie4_5-moe",
    .rope = kRope,
    .read_metadata = read_metadata,
    .layer = layer,
};

}  // namespace strata::model::arch
