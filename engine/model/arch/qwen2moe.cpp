// qwen2moe: Q/K/V biases, RoPE on halves (NeoX), top-k of the softmax as it
// is (not renormalised), and a shared expert behind a sigmoid gate.
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});  // the shared expert: ffn_block, where the layer has one
}

}  // namespace

extern const ArchTraits qwen2moe{
    .name = "qwen2moe",
    .rope = kRope,
    .layer = layer,
};

}  // namespace strata::model::arch
