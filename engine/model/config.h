// Model hyper-parameters read from GGUF metadata, and what each architecture
// is: its traits, the metadata it adds, and its layer composed of ops
// (model/arch/<arch>.cpp, model/backend.h). Adding an architecture means
// adding a file there (model/arch/README.md), not a forward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::gguf {
class File;
}

namespace strata::model {

class Backend;
struct LayerWeights;
struct ModelConfig;

enum class RopeType { Normal, NeoX, None };  // adjacent pairs, halves, or none (a NoPE layer)

// How Q/K are normalised before RoPE.
enum class QkNorm { None, PerHead, WholeProjection };

// One architecture (general.architecture), defined in model/arch/.
struct ArchTraits {
    const char* name = "";
    RopeType rope = RopeType::Normal;
    QkNorm qk_norm = QkNorm::None;
    bool qk_norm_optional = false;             // a file may leave the Q/K norms out (glm4moe)
    bool default_expert_weights_norm = false;  // renormalise top-k router weights unless the file says
    const char* ffn_norm_tensor = "ffn_norm.weight";  // blk.N.<this>: the norm before the FFN
    bool router_bias = false;                  // every router has a bias on its logits (ffn_gate_inp.bias)
    bool router_select_bias_required = false;  // every router has a selection bias (exp_probs_b.bias)
    // Metadata beyond the generic reader's (null: none): the attention's
    // shape where it is not per-head K/V (read before the generic checks of
    // it), and anything else (read last, may override what was read).
    void (*read_attention)(const gguf::File& f, ModelConfig& c) = nullptr;
    void (*read_metadata)(const gguf::File& f, ModelConfig& c) = nullptr;
    // Which layers route experts, by index (null: each layer as its tensors
    // say): the binder then refuses a file whose tensors disagree, naming them.
    bool (*routes_experts)(const ModelConfig& c, int64_t layer) = nullptr;
    // Which layers mix with a gated delta net (linear attention with a
    // recurrent state, ModelConfig::ssm) instead of attention (null: none).
    bool (*recurrent_layer)(const ModelConfig& c, int64_t layer) = nullptr;
    // attn_q holds each head's query and then its output gate (qwen35moe):
    // twice n_head * head_dim rows.
    bool attention_output_gate = false;
    // One decoder layer, composed of ops. `next`: the next layer, when it
    // routes experts and the step predicts its routes (Backend::predict_route
    // then goes between the attention and the FFN).
    void (*layer)(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next) = nullptr;
};

const ArchTraits* find_arch(const std::string& name);
std::string supported_arch_names();  // "llama, qwen2moe, ..."

// v, read from metadata `key` of f; throws strata::Error naming the file and
// the key unless 1 <= v <= max.
int64_t metadata_in_range(const gguf::File& f, const std::string& key, uint64_t v, uint64_t max);

// How router logits become expert probabilities (deepseek2's expert_gating_func).
// Softmax: top-k of the softmax over all experts, weighted by those
// probabilities (renormalised where expert_weights_norm says: gpt-oss's
// softmax over the k chosen logits alone is exactly that); Sigmoid: DeepSeek-V3's.
enum class Gating { Softmax, Sigmoid };

// The experts' activation: SwiGLU, or gpt-oss's clamped SwiGLU with biases
// on gate, up and down (ops::swiglu_oai, alpha 1.702, limit 7).
enum class FfnAct { Swiglu, SwigluOai };

// DeepSeek's multi-head latent attention (deepseek2). Per token and layer
// the KV cache holds one latent row [kv_lora_rank compressed KV | n_rot
// shared RoPE key] instead of per-head K and V: the config then says
// n_head_kv = 1 and head_dim = kv_lora_rank + n_rot (the row), and attention
// runs in that latent space (Context::attention_mla).
struct MlaConfig {
    int64_t q_lora_rank = 0;    // 0: a plain attn_q
    int64_t kv_lora_rank = 0;   // 0: not MLA
    int64_t key_length = 0;     // per head: key_length - n_rot no-RoPE dims, then n_rot RoPE dims
    int64_t value_length = 0;
    explicit operator bool() const { return kv_lora_rank > 0; }
};

// A gated delta net's shape (qwen35moe's linear-attention layers, the GGUF
// ssm.* keys): n_k_heads key/query heads and n_v_heads value heads of d_state
// dims each, a causal conv of conv_kernel taps over the q|k|v channels.
struct SsmConfig {
    int64_t conv_kernel = 0;  // ssm.conv_kernel (0: no recurrent layers)
    int64_t d_state = 0;      // ssm.state_size: a key's (and a value's) length
    int64_t n_k_heads = 0;    // ssm.group_count
    int64_t n_v_heads = 0;    // ssm.time_step_rank
    explicit operator bool() const { return conv_kernel > 0; }
    int64_t channels() const { return (2 * n_k_heads + n_v_heads) * d_state; }  // the conv's: q | k | v
    int64_t value_dim() const { return n_v_heads * d_state; }
    // A sequence's state per recurrent layer: the conv's last conv_kernel - 1
    // inputs per channel, then each value head's d_state x d_state matrix.
    int64_t conv_state_floats() const { return (conv_kernel - 1) * channels(); }
    int64_t state_floats() const { return conv_state_floats() + n_v_heads * d_state * d_state; }
};

// YaRN context extension (rope.scaling.type = yarn), as llama.cpp computes it.
struct YarnConfig {
    float factor = 0.0f;          // 0: no YaRN
    int64_t orig_ctx = 0;         // rope.scaling.original_context_length
    float log_multiplier = 0.0f;  // rope.scaling.yarn_log_multiplier (deepseek2's attention mscale)
    float beta_fast = 32.0f, beta_slow = 1.0f;
    explicit operator bool() const { return factor > 0.0f; }
};

struct ModelConfig {
    ArchTraits traits{};
    std::string arch_name;
    std::string name;          // general.name

    int64_t n_vocab = 0;
    int64_t n_embd = 0;
    int64_t n_layer = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;      // key/value length per head
    int64_t n_ctx_train = 0;
    float norm_eps = 1e-5f;

    int64_t n_rot = 0;         // rotary dims per head (<= head_dim)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // linear scaling (and YaRN's): 1 / factor
    YarnConfig yarn;
    // rope_freqs.weight (Llama 3.1, Llama 4): each rotated pair's angle
    // divided by its factor (n_rot / 2 of them; empty: none).
    std::vector<float> rope_freq_factors;
    MlaConfig mla;

    int64_t n_ff = 0;              // dense FFN width
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_ff_expert = 0;
    int64_t n_ff_shared = 0;       // qwen2moe shared expert width (0: none)
    int64_t leading_dense_blocks = 0;
    bool leading_dense_stated = false;  // the file says leading_dense_block_count: every later layer routes experts
    // NextN/MTP blocks (nextn_predict_layers) after the trunk's n_layer
    // (block_count counts both); the forward pass does not run them.
    int64_t n_nextn = 0;
    bool expert_weights_norm = false;
    float expert_weights_scale = 1.0f;
    Gating gating = Gating::Softmax;
    int64_t n_expert_groups = 0;       // group-limited routing: 0 or 1 = none
    int64_t n_group_used = 0;          // groups a token's experts may come from
    FfnAct ffn_act = FfnAct::Swiglu;

    // Sliding-window attention (gpt-oss): layer il attends to its last n_swa
    // positions (its own included) when il % swa_period < swa_period - 1,
    // to all of them otherwise (llama.cpp's set_swa_pattern). 0: none.
    int64_t n_swa = 0;
    int64_t swa_period = 0;
    bool sliding_window(int64_t layer) const { return n_swa > 0 && swa_period > 0 && layer % swa_period < swa_period - 1; }
    // Learned attention sinks per head (gpt-oss: blk.N.attn_sinks).
    bool attention_sinks = false;

    // Llama 4: the FFN of layer il routes experts when (il + 1) %
    // moe_layer_step == 0; layer il has no RoPE (NoPE) when (il + 1) %
    // no_rope_layer_step == 0, and its queries take the attention
    // temperature; the RoPE layers attend within chunks of attention_chunk
    // positions and normalise Q and K after RoPE where rope_qk_norm. 0: none.
    // Gated delta-net layers (qwen35moe): their shape, and each layer's place
    // among them (-1: an attention layer), which is its part of a sequence's
    // recurrent state (kv::KvCache::recurrent_state).
    SsmConfig ssm;
    int64_t full_attention_interval = 0;  // qwen35moe: every this-th layer attends, the others are delta nets
    std::vector<uint8_t> recurrent_pattern;  // qwen35moe's attention.recurrent_layers, where the file has it
    std::vector<int64_t> recurrent_index;
    int64_t n_recurrent_layers() const;
    // A sequence's recurrent state (every recurrent layer's), and where layer il's part of it starts.
    int64_t recurrent_state_floats() const { return n_recurrent_layers() * ssm.state_floats(); }
    int64_t recurrent_state_offset(int64_t il) const { return recurrent_index[static_cast<size_t>(il)] * ssm.state_floats(); }
    bool recurrent(int64_t layer) const {
        return !recurrent_index.empty() && recurrent_index[static_cast<size_t>(layer)] >= 0;
    }
    // The KV cache holds the attention layers alone: layer il's place among
    // them (the layer itself where no layer is recurrent).
    std::vector<int64_t> kv_index;  // per layer (empty: every layer is its own)
    int64_t kv_layer(int64_t layer) const { return kv_index.empty() ? layer : kv_index[static_cast<size_t>(layer)]; }
    int64_t n_kv_layers() const { return n_layer - n_recurrent_layers(); }

    int64_t moe_layer_step = 0;
    int64_t no_rope_layer_step = 0;
    int64_t attention_chunk = 0;
    bool rope_qk_norm = false;

    // The attention's softmax scale: 1/sqrt(key length), times mscale^2
    // where deepseek2 applies YaRN.
    float attention_scale() const;

    // Reads hyper-parameters. Throws strata::Error naming the key and the file
    // for a missing or inconsistent value.
    static ModelConfig from_gguf(const gguf::File& f);
};

// The RoPE tables of n tokens at positions pos (cos and sin of each rotated
// pair: n_rot floats a token, `stride` apart), YaRN included: one definition
// for every device, which applies them with its own rotation kernel.
void rope_tables(const ModelConfig& c, const int64_t* pos, int64_t n, int64_t stride, float* out);

}  // namespace strata::model
