// One sequence's state over a Model: its KV cache, scratch buffers sized once
// for the largest batch, and the forward pass of the generic decoder.
//
// Per layer (DESIGN.md §3): RMSNorm -> Q/K/V (+bias) -> optional Q/K norm ->
// RoPE -> causal attention over the cache -> output projection -> residual ->
// RMSNorm -> FFN (dense SwiGLU, or router softmax/top-k -> tokens grouped by
// expert -> each chosen expert applied once to all its tokens -> weighted sum,
// plus an optional gated shared expert) -> residual.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/expert_provider.h"
#include "model/model.h"

namespace strata::cpu {
class ThreadPool;
}

namespace strata::model {

struct ContextParams {
    int64_t n_ctx = 0;      // 0: the model's training context, at most 4096
    int64_t n_batch = 256;  // largest number of tokens per forward chunk
    int n_threads = 0;      // 0: all hardware threads
};

// What the router chose for one token in one MoE layer.
struct RoutingEvent {
    int64_t layer;
    int64_t pos;               // position of the token in the sequence
    const int32_t* experts;    // n_used expert ids, best first
    const float* weights;      // their combine weights
    int64_t n_used;
    const float* probs;        // softmax over all n_expert experts
    int64_t n_expert;
};
using RoutingObserver = std::function<void(const RoutingEvent&)>;

// Cross-layer lookahead: the next MoE layer's router applied to the residual
// stream as it enters this layer's FFN (normalised with the next layer's FFN
// norm), one layer before that router runs. What a prefetcher can know early.
struct LookaheadEvent {
    int64_t layer;             // the MoE layer being predicted
    int64_t pos;
    const float* probs;        // predicted softmax over its n_expert experts
    int64_t n_expert;
};
using LookaheadObserver = std::function<void(const LookaheadEvent&)>;

// Before every decode() call (how many tokens it will run), and after it (how
// many it ran and how long it took).
using StepBeginObserver = std::function<void(int64_t n_tokens)>;
using StepObserver = std::function<void(int64_t n_tokens, double seconds)>;

class Context {
public:
    // `weights` (default: the model's own, in the file mapping) may be a copy
    // held in the fast tier; `experts` (default: straight from `weights`)
    // may be an expert cache. Both must outlive the context.
    Context(const Model& model, const ContextParams& params, const ModelWeights* weights = nullptr,
            ExpertProvider* experts = nullptr);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Runs `tokens` at positions n_past() .. n_past()+size-1 and appends them to
    // the cache. Returns logits: one row of n_vocab per token when all_logits,
    // else only the last token's row. The pointer stays valid until the next
    // call. Throws strata::Error for an out-of-range token or a full context.
    const float* decode(std::span<const int32_t> tokens, bool all_logits);

    int64_t n_past() const { return n_past_; }
    int64_t n_ctx() const { return n_ctx_; }
    const Model& model() const { return model_; }
    void clear() { n_past_ = 0; }
    // Forgets every position >= n (keeps the first n tokens of the cache).
    void truncate(int64_t n);

    void set_routing_observer(RoutingObserver obs) { observer_ = std::move(obs); }
    // Replaces where experts come from (nullptr: the weights' own); between decode calls.
    void set_expert_provider(ExpertProvider* experts) { experts_ = experts ? experts : &mapped_; }
    // Costs one extra router product per MoE layer and token while set.
    void set_lookahead_observer(LookaheadObserver obs) { lookahead_ = std::move(obs); }
    void set_step_observer(StepObserver obs) { step_ = std::move(obs); }
    void set_step_begin_observer(StepBeginObserver obs) { step_begin_ = std::move(obs); }

    // Bytes this context holds: the f32 KV cache and the forward-pass scratch.
    uint64_t kv_bytes() const { return (k_cache_.size() + v_cache_.size()) * sizeof(float); }
    uint64_t scratch_bytes() const;

private:
    void forward_chunk(const int32_t* tokens, int64_t n, bool all_logits, float* logits_out);
    void attention(const LayerWeights& L, int64_t n);
    void ffn_dense(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff);
    void ffn_moe(const LayerWeights& L, int64_t n);
    void lookahead(const LayerWeights& next, int64_t n);
    // Y[t, r] = W.row(r) . X[t]  for t < n
    void matmul(const Matrix& W, const float* X, int64_t n, float* Y);

    const Model& model_;
    const ModelConfig& cfg_;
    const ModelWeights& weights_;
    MappedExperts mapped_;
    ExpertProvider* experts_;
    std::unique_ptr<cpu::ThreadPool> pool_;
    int64_t n_ctx_ = 0;
    int64_t n_batch_ = 0;
    int64_t n_past_ = 0;
    RoutingObserver observer_;
    LookaheadObserver lookahead_;
    StepObserver step_;
    StepBeginObserver step_begin_;

    // KV cache, f32: [layer][pos][n_head_kv * head_dim]
    std::vector<float> k_cache_, v_cache_;

    // Scratch, sized once.
    std::vector<float> x_, h_, q_, k_, v_, attn_, tmp_;
    std::vector<float> router_logits_, route_w_;
    std::vector<int32_t> route_ids_;
    std::vector<int32_t> expert_count_, expert_offset_, expert_tokens_, needed_;
    std::vector<float> xe_, ge_, ue_, ye_, expert_out_;
    std::vector<float> shared_gate_;
    std::vector<float> row_scratch_;    // per thread: one dequantized row
    std::vector<uint8_t> act_scratch_;  // activations quantized for the weight type
    std::vector<float> score_scratch_;  // per thread: attention scores
    std::vector<float> logits_;
    std::vector<float> look_h_, look_probs_;
    int64_t max_cols_ = 0;
};

}  // namespace strata::model
