// llama, and Mixtral (llama with routed experts): pre-norm blocks, RoPE on
// adjacent pairs, top-k of the softmax renormalised.
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::Normal;

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});
}

}  // namespace

extern const ArchTraits llama{
    .name = "llama",
    .rope = kRope,
    .default_expert_weights_norm = true,
    .layer = layer,
};

}  // namespace strata::model::arch
