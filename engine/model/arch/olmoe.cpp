// OLMoE: RMSNorm over the whole Q and K projections before RoPE (NeoX),
// top-k of the softmax as it is.
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;
constexpr QkNorm kQkNorm = QkNorm::WholeProjection;

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .qk_norm = kQkNorm, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});
}

}  // namespace

extern const ArchTraits olmoe{
    .name = "olmoe",
    .rope = kRope,
    .qk_norm = kQkNorm,
    .layer = layer,
};

}  // namespace strata::model::arch
