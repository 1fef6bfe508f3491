// Binds a GGUF file's tensors to the generic decoder: one LayerWeights per
// block, each describing its attention (biases, Q/K norms present or not) and
// its FFN (dense, or routed experts with an optional shared expert). The forward
// pass reads only these descriptions, so architectures differ in data, not code.
//
// Matrices stay in the file mapping (zero copy); 1-D tensors (norms, biases,
// the shared-expert gate) are converted to owned float vectors on load.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quant_types.h"
#include "model/config.h"

namespace strata::gguf {
class File;
struct TensorInfo;
}  // namespace strata::gguf

namespace strata::model {

// A 2-D (or 3-D, stacked) matrix view: rows of ne0 elements.
struct Matrix {
    const uint8_t* data = nullptr;
    kernels::WeightType type = kernels::WeightType::F32;
    int64_t cols = 0;       // ne0: elements per row (input width)
    int64_t rows = 0;       // ne1: output width
    int64_t slabs = 1;      // ne2: experts in a stacked tensor
    uint64_t row_bytes = 0;
    uint64_t file_offset = 0;
    // The tensor's name, a view of the model file's tensor table (which
    // outlives every Matrix made from it); a slab keeps its tensor's name. Not
    // an owning string: a Matrix is copied on the per-token path (an expert's
    // matrices, handed out per layer), and copies must not allocate.
    std::string_view name;

    explicit operator bool() const { return data != nullptr; }
    const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
    uint64_t slab_bytes() const { return row_bytes * static_cast<uint64_t>(rows); }
    // The e-th slab of a stacked tensor as a matrix of its own.
    Matrix slab(int64_t e) const;
};

// Rewrites m's rows into the layout the active CPU kernels multiply fastest
// (kernels::fast_layout: q4_0 and q8_0 rows for the AVX-512 kernels) and sets m.type.
// `copy` is m's bytes in memory the caller owns (a fast-tier copy, never the
// file mapping); m.data must point into it. The layout has the file type's
// bytes per row, so nothing grows and the ledger's figures hold; results are
// bit-identical. Returns the bytes rewritten (0: the file's layout is kept).
// `scratch` grows to one row (allocated once per caller, not per token).
uint64_t repack_for_kernels(Matrix& m, uint8_t* copy, std::vector<uint8_t>& scratch);

enum class FfnKind { Dense, Moe };

// The three matrices of one expert (or of a dense FFN): down(silu(gate x) * up x).
struct FfnMatrices {
    Matrix gate, up, down;
};

struct LayerWeights {
    int64_t index = 0;
    std::vector<float> attn_norm;
    Matrix wq, wk, wv, wo;                   // MLA: wq is attn_q_b (or attn_q), wk/wv absent
    // MLA (deepseek2): x -> attn_q_a -> RMSNorm(q_a_norm) -> wq; x -> attn_kv_a_mqa
    // -> [compressed KV | RoPE key]; attn_kv_b expands the compressed KV per head.
    Matrix wq_a, wkv_a, wkv_b;
    std::vector<float> q_a_norm, kv_a_norm;
    // attn_kv_b as f32, split for attention in the latent space: per head,
    // k_up_t [kv_lora_rank][no-RoPE key] (transposed: the query's latent is
    // one dot product per row) and v_up [value_length][kv_lora_rank]. Shared
    // by every copy of the weights (the fast-tier copy points at the same
    // floats), and counted in the ledger as weights.shared (derived_bytes).
    std::shared_ptr<const std::vector<float>> mla_k_up_t, mla_v_up;
    std::vector<float> bq, bk, bv, bo;       // empty when absent
    std::vector<float> q_norm, k_norm;       // empty when absent
    std::vector<float> ffn_norm;             // gpt-oss: post_attention_norm
    std::vector<float> attn_sinks;           // gpt-oss: a learned logit per head (empty when absent)

    // A gated delta-net layer (ModelConfig::recurrent; wq..wo then absent):
    // attn_qkv (the conv's q|k|v channels), attn_gate (z), ssm_beta and
    // ssm_alpha (per value head), ssm_out; the conv's taps (channel after
    // channel, conv_kernel each, the last for the current token), ssm_dt.bias,
    // ssm_a (-exp(A_log)) and the gated norm's weight (d_state).
    Matrix ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
    std::vector<float> ssm_conv, ssm_dt_bias, ssm_a, ssm_norm;

    FfnKind ffn = FfnKind::Dense;
    FfnMatrices dense;                       // FfnKind::Dense

    Matrix router;                           // FfnKind::Moe: [n_embd -> n_expert]
    std::vector<float> router_select_bias;   // deepseek2 V3 exp_probs_b: added for the choice only
    std::vector<float> router_bias;          // gpt-oss: added to the router's logits (empty when absent)
    // gpt-oss: per expert, biases of gate and up (n_ff_expert each) and down
    // (n_embd), expert after expert; empty for other architectures.
    std::vector<float> expert_bias_gate, expert_bias_up, expert_bias_down;
    FfnMatrices experts_stacked;             // 3-D tensors, one slab per expert
    std::vector<FfnMatrices> experts_split;  // legacy files: one tensor per expert
    int64_t n_ff_expert = 0;
    FfnMatrices shared;                      // qwen2moe shared expert (optional)
    std::vector<float> shared_gate;          // sigmoid gate weights, length n_embd

    // Every attention matrix the forward pass multiplies by (absent ones are
    // empty): what is copied to the fast tier and repacked. MLA's attn_kv_b
    // is not among them: it is used through its f32 split and stays in the file.
    std::array<Matrix*, 11> attention_matrices() {
        return {&wq, &wk, &wv, &wo, &wq_a, &wkv_a, &ssm_qkv, &ssm_z, &ssm_beta, &ssm_alpha, &ssm_out};
    }
    std::array<const Matrix*, 11> attention_matrices() const {
        return {&wq, &wk, &wv, &wo, &wq_a, &wkv_a, &ssm_qkv, &ssm_z, &ssm_beta, &ssm_alpha, &ssm_out};
    }

    int64_t n_experts() const;
    FfnMatrices expert(int64_t e) const;
    bool has_shared_expert() const { return static_cast<bool>(shared.gate); }
};

// A NextN/MTP block (DeepSeek-V3's multi-token prediction, GLM-4.5's and
// Qwen3.5's): from the trunk's last hidden state h (after its output norm)
// at position p and the embedding e of token p+1, it predicts token p+2:
//   x = eh_proj [RMSNorm(e) enorm ; RMSNorm(h) hnorm]; x = block(x);
//   logits = head(RMSNorm(x) head_norm), and RMSNorm(x) head_norm is its h
// for the next draft step (llama.cpp's graph_mtp).
struct NextnWeights {
    LayerWeights block;  // blk.{n_layer + j}: a decoder layer (attention, the trunk's FFN kind)
    Matrix eh_proj;      // [2 n_embd -> n_embd]
    std::vector<float> enorm, hnorm;
    Matrix embed;                  // empty: the trunk's token_embd
    std::vector<float> head_norm;  // empty: the trunk's output_norm
    Matrix head;                   // empty: the trunk's output
};

// What a NextN view's first op reads besides the token embedding (ModelWeights::nextn_input).
struct NextnInput {
    Matrix eh_proj;
    std::vector<float> enorm, hnorm;
};

struct ModelWeights {
    Matrix tok_embd;     // rows = vocab, cols = n_embd
    std::vector<float> output_norm;
    Matrix output;       // the tied embedding when the file has no output.weight
    bool output_tied = false;
    std::vector<LayerWeights> layers;
    // The file's MTP blocks (empty where it has none: they are optional).
    std::vector<NextnWeights> nextn;
    // Set in a NextN view (model::Model::nextn): the forward pass mixes each
    // token's embedding with the trunk's hidden row (Step::hidden_in) first.
    std::shared_ptr<const NextnInput> nextn_input;

    // Validates names, shapes and types against the config. Throws strata::Error
    // naming the tensor, what was expected and what was found.
    static ModelWeights bind(const gguf::File& f, ModelConfig& config);

    // Bytes of weights derived on load beyond the file's tensors (MLA's f32
    // split of attn_kv_b), which the fast tier holds besides the file's.
    uint64_t derived_bytes() const;

    // Bytes of the matrices the engine repacks on load for the active CPU
    // kernels (repack_for_kernels), experts included, each tensor once.
    uint64_t bytes_to_repack() const;
};

}  // namespace strata::model
