// MiniMax-M2: RMSNorm over the whole Q and K projections, RoPE (NeoX) on part
// of each head, sigmoid routing with a selection bias, the chosen weights
// always renormalised and never scaled (llama.cpp hard-wires both and reads
// neither key); experts are feed_forward_length wide.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;
constexpr QkNorm kQkNorm = QkNorm::WholeProjection;

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    if (c.n_expert <= 0) throw Error(f.path() + ": a minimax-m2 file needs metadata '" + a + "expert_count'");
    const std::string gating = a + "expert_gating_func";
    if (!f.has(gating)) throw Error(f.path() + ": a minimax-m2 file needs metadata '" + gating + "' (2: sigmoid)");
    if (c.n_ff <= 0) throw Error(f.path() + ": a minimax-m2 file needs metadata '" + a + "feed_forward_length' (the experts' width)");
    c.n_ff_expert = c.n_ff;
    c.expert_weights_norm = true;
    c.expert_weights_scale = 1.0f;
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .qk_norm = kQkNorm, .scale = c.attention_scale()});
    ffn_block(b, c, L, next, router_spec(c), {});  // scored where the layer has its selection bias (ffn_block)
}

}  // namespace

extern const ArchTraits minimax_m2{
    .name = "minimax-m2",
    .rope = kRope,
    .qk_norm = kQkNorm,
    .router_select_bias_required = true,
    .read_metadata = read_metadata,
    .layer = layer,
};

}  // namespace strata::model::arch
