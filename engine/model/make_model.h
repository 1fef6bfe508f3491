// Random-weight models of any shape, written as GGUF with the same tensor
// names and metadata llama.cpp uses, for tests and benchmarks. Deterministic:
// the same spec and seed give the same bytes, whatever the thread count.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/quant_types.h"

namespace strata::model {

// The synthetic vocabulary's distinct pieces: <unk> <s> </s>, 256 bytes, then
// letters, pairs and triples with and without SPM's word-start marker.
constexpr int64_t kMaxSyntheticVocab = 3 + 256 + 1 + 2 * 26 + 2 * 26 * 26 + 2 * 26 * 26 * 26;

struct MakeModelSpec {
    std::string arch = "llama";   // any of supported_arch_names()
    int64_t layers = 4;
    int64_t dim = 256;
    int64_t heads = 8;
    int64_t kv_heads = 4;
    int64_t head_dim = 0;         // key/value length per head (0: dim / heads)
    int64_t experts = 8;          // 0: a dense model (llama only)
    int64_t used = 2;
    int64_t expert_ff = 512;
    int64_t dense_layers = 0;     // leading layers with a dense FFN
    int64_t moe_step = 1;         // llama4: every moe_step-th layer routes experts, the others are dense
    // qwen35moe: every attention_interval-th layer attends, the others are
    // gated delta nets of ssm_k_heads key and ssm_v_heads value heads of
    // ssm_state dims (0: heads / 2, heads, the head dimension / 2).
    int64_t attention_interval = 4;
    int64_t ssm_k_heads = 0, ssm_v_heads = 0, ssm_state = 0;
    // glm4moe, qwen35moe: NextN/MTP blocks after the layers (nextn_predict_layers;
    // llama.cpp runs one): an attention layer with routed experts, eh_proj,
    // enorm, hnorm and the shared head's norm (the head is output.weight).
    int64_t nextn = 0;
    int64_t ff = 0;               // dense FFN width (0: 4 * dim rounded to the type's block)
    int64_t shared_ff = 0;        // qwen2moe, ernie4_5-moe: the shared expert's width (0: none)
    int64_t ctx = 2048;
    int64_t vocab = 512;          // synthetic vocabulary size when vocab_from is empty
    std::string vocab_from;       // copy the tokenizer of this GGUF file
    // deepseek2 (MLA): per head a key of dim/heads (its last rope_dim dims
    // rotated) and a value of dim/heads; the compressed KV has kv_lora dims.
    int64_t q_lora = 0;           // 0: a plain attn_q
    int64_t kv_lora = 64;
    // Rotated dims of each head; 0: half the key length (deepseek2, glm4moe,
    // minimax-m2), else all of it.
    int64_t rope_dim = 0;
    int64_t shared_experts = 0;   // deepseek2, glm4moe: shared experts (expert_ff wide each, no gate)
    std::string gating = "softmax";  // deepseek2: softmax (V2) | sigmoid (V3, with exp_probs_b)
    bool weights_norm = false;    // deepseek2, glm4moe: renormalise the top-k weights
    float weights_scale = 1.0f;   // deepseek2, glm4moe: expert_weights_scale
    bool qk_norm = false;         // glm4moe: per-head Q/K norms (GLM-4.5 has them, Air not)
    int64_t expert_groups = 0;    // deepseek2 group-limited routing (0: none)
    int64_t groups_used = 0;
    float yarn_factor = 0.0f;     // YaRN rope scaling (0: none), over the original context `ctx`
    float yarn_log_mul = 0.1f;    // deepseek2's rope.scaling.yarn_log_multiplier
    int64_t sliding_window = 128; // gpt-oss: the sliding-window layers' window (every other layer)
    kernels::WeightType type = kernels::WeightType::F32;
    // The routed experts' type (gpt-oss ships MXFP4 experts beside wider
    // attention); F32 with expert_type_set false: as `type`.
    kernels::WeightType expert_type = kernels::WeightType::F32;
    bool expert_type_set = false;
    uint64_t seed = 1;
    int threads = 0;

    kernels::WeightType experts_type() const { return expert_type_set ? expert_type : type; }

    // Empty when valid, else what is wrong and how to fix it.
    std::string validate() const;
};

// Writes the model to `path`. Throws strata::Error.
void make_model(const MakeModelSpec& spec, const std::string& path);

}  // namespace strata::model
