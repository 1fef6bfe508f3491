// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE): attention sinks, a sliding
// window on every other layer, biases everywhere, routing by a softmax over
// the chosen logits, the clamped SwiGLU.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    if (c.n_expert <= 0) throw Error(f.path() + ": a gpt-oss file needs metadata '" + a + "expert_count'");
    const std::string swa = a + "attention.sliding_window";
    if (!f.has(swa)) throw Error(f.path() + ": a gpt-oss file needs metadata '" + swa + "' (the sliding window's length)");
    c.n_swa = metadata_in_range(f, swa, f.get_uint(swa), 1u << 30);
    c.swa_period = metadata_in_range(f, a + "attention.sliding_window_pattern",
                                     f.get_uint_or(a + "attention.sliding_window_pattern", 2), 1 << 16);
    // Top-k of the raw (biased) logits, weighted by a softmax over the k
    // chosen: the same choice and weights as the renormalised top-k of the
    // softmax over all (llama.cpp: SOFTMAX_WEIGHT gating).
    c.gating = Gating::Softmax;
    c.expert_weights_norm = true;
    c.ffn_act = FfnAct::SwigluOai;
    c.attention_sinks = true;
    c.expert_weights_scale = 1.0f;
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    const AttentionSpec attention{.rope = kRope,
                                  .window = c.sliding_window(L.index) ? c.n_swa : 0,
                                  .sinks = true,
                                  .scale = c.attention_scale()};
    attention_block(b, L, attention);
    ffn_block(b, c, L, next, router_spec(c), {.act = FfnAct::SwigluOai});
}

}  // namespace

extern const ArchTraits gpt_oss{
    .name = "gpt-oss",
    .rope = kRope,
    .ffn_norm_tensor = "post_attention_norm.weight",  // named after the attention it follows
    .router_bias = true,
    .read_metadata = read_metadata,
    .layer = layer,
};

}  // namespace strata::model::arch
