// DeepSeek-V2/V3 (and Kimi-K2, which reuses it): multi-head latent attention
// (the KV cache holds one latent row per token), RoPE on adjacent pairs of
// the RoPE parts, the router's probabilities by softmax (V2) or sigmoid (V3)
// with a selection bias and expert groups, and shared experts.
#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::Normal;

// The latent attention's shape. The KV cache row is the latent [kv_lora_rank |
// n_rot], one per token and layer (n_head_kv = 1, head_dim = the row).
void read_attention(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    const auto required = [&](const std::string& key, const char* what) -> int64_t {
        if (!f.has(key)) throw Error(f.path() + ": a " + c.arch_name + " file needs metadata '" + key + "' (" + what + ")");
        return metadata_in_range(f, key, f.get_uint(key), 1 << 20);
    };
    c.mla.kv_lora_rank = required(a + "attention.kv_lora_rank", "the rank of the compressed KV");
    c.mla.key_length = required(a + "attention.key_length", "the key length per head");
    c.mla.value_length = required(a + "attention.value_length", "the value length per head");
    c.mla.q_lora_rank = static_cast<int64_t>(f.get_uint_or(a + "attention.q_lora_rank", 0));
    c.n_rot = required(a + "rope.dimension_count", "the RoPE dimensions of each key");
    c.n_head_kv = 1;
    c.head_dim = c.mla.kv_lora_rank + c.n_rot;
}

// Shared experts, each expert_feed_forward_length wide: one FFN of their total width.
void read_metadata(const gguf::File& f, ModelConfig& c) {
    if (c.n_ff_shared == 0 && c.n_ff_expert > 0)
        c.n_ff_shared = c.n_ff_expert * static_cast<int64_t>(f.get_uint_or(c.arch_name + ".expert_shared_count", 0));
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    attention_block(b, L, {.rope = kRope, .latent = true, .scale = c.attention_scale()});
    RouterSpec router = router_spec(c);
    router.scored = true;  // softmax or sigmoid, the selection bias, the groups: deepseek2's scoring
    ffn_block(b, c, L, next, router, {});
}

}  // namespace

extern const ArchTraits deepseek2{
    .name = "deepseek2",
    .rope = kRope,
    .read_attention = read_attention,
    .read_metadata = read_metadata,
    .layer = layer,
};

}  // namespace strata::model::arch
