// Llama 4 (Scout, Maverick): MoE on every interleave_moe_layer_step-th
// layer, a dense SwiGLU on the others; top-1 routing by the raw logits whose
// sigmoid weighs the expert's input (not its output), plus an ungated shared
// expert; RoPE on adjacent pairs with per-pair frequency divisors
// (rope_freqs); every fourth layer without RoPE (NoPE), attending to every
// position with its queries' temperature, the others attending within
// chunks of 8192 positions and normalising Q and K after RoPE. As llama.cpp's
// src/models/llama4.cpp.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::Normal;
// llama.cpp hard-wires these (llama_model_llama4::load_arch_hparams).
constexpr int64_t kChunk = 8192, kTemperatureFloor = 8192, kNoRopeStep = 4;
constexpr float kTemperatureScale = 0.1f;

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    if (c.n_expert <= 0) throw Error(f.path() + ": a llama4 file needs metadata '" + a + "expert_count'");
    const std::string step = a + "interleave_moe_layer_step";
    if (!f.has(step)) throw Error(f.path() + ": a llama4 file needs metadata '" + step + "' (every how many layers one routes experts)");
    c.moe_layer_step = metadata_in_range(f, step, f.get_uint(step), 1 << 16);
    if (c.n_ff_expert <= 0) throw Error(f.path() + ": a llama4 file needs metadata '" + a + "expert_feed_forward_length'");
    c.n_ff_shared = c.n_ff_expert;  // the shared expert is as wide as a routed one
    if (c.n_rot != c.head_dim)
        throw Error(f.path() + ": metadata '" + a + "rope.dimension_count' is " + std::to_string(c.n_rot) +
                    "; llama4 rotates the whole head (" + std::to_string(c.head_dim) + ")");
    // A sliding_window of 0 turns chunking off, and then llama.cpp's NoPE
    // step is the layer count (its last layer alone has no RoPE); any other
    // value, or none, means chunks of 8192 on the RoPE layers.
    const std::string swa = a + "attention.sliding_window";
    const bool chunked = !f.has(swa) || f.get_uint(swa) != 0;
    c.attention_chunk = chunked ? kChunk : 0;
    c.no_rope_layer_step = chunked ? kNoRopeStep : c.n_layer;
    // Maverick (128 experts) has no Q/K norm (llama.cpp: use_kq_norm).
    c.rope_qk_norm = c.n_expert != 128;
    // Top-1 by the raw logits, weighted by their sigmoid, neither renormalised nor scaled.
    c.gating = Gating::Sigmoid;
    c.expert_weights_norm = false;
    c.expert_weights_scale = 1.0f;
}

bool routes_experts(const ModelConfig& c, int64_t il) { return (il + 1) % c.moe_layer_step == 0; }

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    const bool nope = (L.index + 1) % c.no_rope_layer_step == 0;
    AttentionSpec attention{.rope = nope ? RopeType::None : kRope, .scale = c.attention_scale()};
    if (nope) {
        attention.temperature_floor = kTemperatureFloor;
        attention.temperature_scale = kTemperatureScale;
    } else {
        attention.norm_after_rope = c.rope_qk_norm;
        attention.chunk = c.attention_chunk;
    }
    attention_block(b, L, attention);
    ffn_block(b, c, L, next, router_spec(c), {.weight_before = true});  // sigmoid gating: router_spec scores it
}

}  // namespace

extern const ArchTraits llama4{
    .name = "llama4",
    .rope = kRope,
    .read_metadata = read_metadata,
    .routes_experts = routes_experts,
    .layer = layer,
};

}  // namespace strata::model::arch
