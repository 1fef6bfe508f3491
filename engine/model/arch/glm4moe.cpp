// GLM-4.5, 4.6, 4.7 and 4.5-Air (llama.cpp's glm4moe): leading dense layers,
// Q/K/V biases, optional per-head Q/K norms, RoPE (NeoX) on part of each head,
// sigmoid routing with a selection bias, the weights renormalised and scaled
// as the file says, and an ungated shared expert. The FFN's norm is named
// post_attention_norm.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;
constexpr QkNorm kQkNorm = QkNorm::PerHead;  // GLM-4.5 (355B) has them, Air does not

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    if (c.n_expert <= 0) throw Error(f.path() + ": a glm4moe file needs metadata '" + a + "expert_count'");
    const std::string shared = a + "expert_shared_count";
    if (!f.has(shared)) throw Error(f.path() + ": a glm4moe file needs metadata '" + shared + "' (shared experts per layer)");
    // The shared experts, each expert_feed_forward_length wide, as one FFN of their total width.
    if (c.n_ff_shared == 0 && c.n_ff_expert > 0) c.n_ff_shared = c.n_ff_expert * static_cast<int64_t>(f.get_uint(shared));
    // llama.cpp: an absent gating function is GLM's sigmoid.
    if (!f.has(a + "expert_gating_func")) c.gating = Gating::Sigmoid;
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .qk_norm = kQkNorm, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});  // scored where the layer has its selection bias (ffn_block)
}

}  // namespace

extern const ArchTraits glm4moe{
    .name = "glm4moe",
    .rope = kRope,
    .qk_norm = kQkNorm,
    .qk_norm_optional = true,
    .ffn_norm_tensor = "post_attention_norm.weight",
    .router_select_bias_required = true,
    .read_metadata = read_metadata,
    .layer = layer,
};

}  // namespace strata::model::arch
