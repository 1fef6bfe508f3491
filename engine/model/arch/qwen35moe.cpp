// Qwen3.5 / 3.6 MoE (llama.cpp's qwen35moe): three gated delta-net layers
// (linear attention over a recurrent state: Backend::delta_net) to each full
// attention layer (every full_attention_interval-th: per-head Q/K norms, NeoX
// RoPE on part of the head, an output gate per head); MoE FFNs with the
// softmax's top-k always renormalised, and a shared expert behind a sigmoid
// gate. The FFN's norm is named post_attention_norm.
#include <algorithm>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/arch/arch.h"

namespace strata::model::arch {
namespace {

constexpr RopeType kRope = RopeType::NeoX;
constexpr QkNorm kQkNorm = QkNorm::PerHead;

void read_metadata(const gguf::File& f, ModelConfig& c) {
    const std::string a = c.arch_name + ".";
    const auto required = [&](const std::string& key, const char* what) -> int64_t {
        if (!f.has(a + key)) throw Error(f.path() + ": a qwen35moe file needs metadata '" + a + key + "' (" + what + ")");
        return metadata_in_range(f, a + key, f.get_uint(a + key), 1 << 20);
    };
    if (c.n_expert <= 0) throw Error(f.path() + ": a qwen35moe file needs metadata '" + a + "expert_count'");
    c.ssm.conv_kernel = required("ssm.conv_kernel", "the delta net's conv taps");
    c.ssm.d_state = required("ssm.state_size", "a key head's length");
    c.ssm.n_k_heads = required("ssm.group_count", "key heads");
    c.ssm.n_v_heads = required("ssm.time_step_rank", "value heads");
    const int64_t inner = required("ssm.inner_size", "the value heads' total width");
    if (inner != c.ssm.n_v_heads * c.ssm.d_state)
        throw Error(f.path() + ": metadata '" + a + "ssm.inner_size' " + std::to_string(inner) + " is not ssm.time_step_rank (" +
                    std::to_string(c.ssm.n_v_heads) + ") x ssm.state_size (" + std::to_string(c.ssm.d_state) +
                    "): value heads as long as key heads are what llama.cpp computes");
    c.full_attention_interval =
        metadata_in_range(f, a + "full_attention_interval", f.get_uint_or(a + "full_attention_interval", 4), 1 << 16);
    // A per-layer pattern overrides the interval (llama.cpp's load_arch_hparams).
    const std::string pattern = a + "attention.recurrent_layers";
    if (const std::vector<gguf::Value>* p = f.get_array(pattern)) {
        if (static_cast<int64_t>(p->size()) < c.n_layer)
            throw Error(f.path() + ": metadata '" + pattern + "' has " + std::to_string(p->size()) + " entries for " +
                        std::to_string(c.n_layer) + " layers");
        c.recurrent_pattern.clear();
        for (int64_t il = 0; il < c.n_layer; ++il) c.recurrent_pattern.push_back((*p)[static_cast<size_t>(il)].u != 0);
    }
    // Text positions are (p, p, p, 0) over the sections: every rotated pair
    // turns with p when the first three sections cover them all (llama.cpp's
    // IMROPE for text, the converters' [11, 11, 10, 0]); otherwise some pairs
    // would not turn, which this engine does not compute.
    const std::string sec = a + "rope.dimension_sections";
    const std::vector<gguf::Value>* sections = f.get_array(sec);
    if (!sections || sections->size() < 3)
        throw Error(f.path() + ": a qwen35moe file needs metadata '" + sec + "' (the multi-section RoPE's sections)");
    int64_t covered = 0;
    for (size_t i = 0; i < 3; ++i) {
        const gguf::Value& v = (*sections)[i];
        if (!v.is_integer()) throw Error(f.path() + ": metadata '" + sec + "' holds a value that is not an integer");
        covered += std::max<int64_t>(v.i, static_cast<int64_t>(v.u));  // signed kinds fill i, unsigned u
    }
    if (covered < c.n_rot / 2)
        throw Error(f.path() + ": metadata '" + sec + "' leaves rotated pairs to the fourth (image) section: "
                    "text with such sections is not supported");
    c.gating = Gating::Softmax;
    c.expert_weights_norm = true;  // hard-wired in llama.cpp, the keys unread
    c.expert_weights_scale = 1.0f;
}

bool recurrent_layer(const ModelConfig& c, int64_t il) {
    if (!c.recurrent_pattern.empty()) return c.recurrent_pattern[static_cast<size_t>(il)] != 0;
    return (il + 1) % c.full_attention_interval != 0;
}

void layer(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) {
    if (c.recurrent(L.index)) {
        b.rms_norm(Act::Residual, L.attn_norm, Act::Normed);
        b.delta_net(L);
        b.add(Act::Residual, Act::Out);
    } else {
        attention_block(b, L, {.rope = kRope, .qk_norm = kQkNorm, .scale = c.attention_scale(), .output_gate = true});
    }
    ffn_block(b, c, L, next, router_spec(c), {});  // the shared expert's sigmoid gate: ffn_block
}

}  // namespace

extern const ArchTraits qwen35moe{
    .name = "qwen35moe",
    .rope = kRope,
    .qk_norm = kQkNorm,
    .ffn_norm_tensor = "post_attention_norm.weight",
    .read_metadata = read_metadata,
    .recurrent_layer = recurrent_layer,
    .attention_output_gate = true,
    .layer = layer,
};

}  // namespace strata::model::arch
