// qwen3moe: per-head RMSNorm of Q and K before RoPE (NeoX), top-k of the
// softmax renormalised.
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;
constexpr QkNorm kQkNorm = QkNorm::PerHead;

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .qk_norm = kQkNorm, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});
}

}  // namespace

extern const ArchTraits qwen3moe{
    .name = "qwen3moe",
    .rope = kRope,
    .qk_norm = kQkNorm,
    .default_expert_weights_norm = true,
    .layer = layer,
};

}  // namespace strata::model::arch
