// The forward pass of the generic decoder over a paged KV cache: one batch of
// tokens may mix many sequences (continuous batching) and the draft tokens of
// speculative decoding; every token attends only to its own sequence. Scratch
// buffers are sized once for the largest batch.
//
// A context always has a default sequence, which the single-sequence calls
// (decode(tokens), n_past, truncate, clear) use; decode_batch() names the
// sequence of each token. Results per token do not depend on what else is in
// the batch (every kernel computes a token's row the same way whatever the
// batch size), so a request gives the same tokens alone or batched.
//
// Per layer (DESIGN.md §3): RMSNorm -> Q/K/V (+bias) -> optional Q/K norm ->
// RoPE -> causal attention over the cache -> output projection -> residual ->
// RMSNorm -> FFN (dense SwiGLU, or router softmax/top-k -> tokens grouped by
// expert -> each chosen expert applied once to all its tokens -> weighted sum,
// plus an optional gated shared expert) -> residual.
//
// Threads: each step is a few parallel regions of the pool. A one-token step
// whose KV heads (and ready experts) split evenly over the threads runs a KV
// head's Q/K/V, RoPE, K/V write and attention on one thread, and an expert's
// whole FFN on one thread (a thread that runs out of experts takes the
// others' last down rows); other steps share out the rows of Q/K/V, of the
// experts' gate/up and of their down projections region by region. Both give
// the same bits (gemm_q is batch-invariant, the rest acts per head or per
// element), which the tests check across thread counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/decode_profile.h"
#include "model/device_forward.h"
#include "model/expert_provider.h"
#include "model/model.h"

namespace strata::cpu {
class ThreadPool;
class OwnedRanges;
}

namespace strata::model {

struct ContextParams {
    int64_t n_ctx = 0;      // longest sequence; 0: the model's training context, at most 4096
    int64_t n_batch = 256;  // largest number of tokens per forward chunk
    int n_threads = 0;      // 0: all hardware threads
    std::vector<int> cpus;  // CPUs the compute workers are pinned to (NUMA bind); empty: not pinned
    // The KV cache the context creates when it is not given one: room for one
    // sequence of n_ctx tokens.
    int64_t kv_block_tokens = 16;
    kv::KvType kv_type = kv::KvType::F32;
    // A cheaper pass over the same weights (a self-speculative draft): only
    // the first max_layers layers before the output head (0: all), and
    // n_expert_used experts per token in MoE layers (0: the model's top-k).
    int64_t max_layers = 0;
    int64_t n_expert_used = 0;
    // Route each token only among the experts the provider holds in fast
    // memory (ExpertProvider::resident_mask); where fewer are resident than it
    // uses, it uses fewer: a draft that never loads an expert.
    bool resident_experts_only = false;
};

// The paged KV cache shape of a model: n_blocks blocks of block_tokens
// positions, every layer and KV head, elements of `type`.
kv::KvCacheParams kv_cache_params(const ModelConfig& c, int64_t n_blocks, int64_t block_tokens = 16,
                                  kv::KvType type = kv::KvType::F32);

// Before every decode() call (how many tokens it will run), and after it (how
// many it ran and how long it took).
using StepBeginObserver = std::function<void(int64_t n_tokens)>;
// The input rows of a weight matrix product, before any quantization: n rows
// of W.cols floats. `expert` is the routed expert the rows went to (W is its
// slab of a stacked tensor), -1 for any other matrix. What calibration
// statistics are made of (quant/activation_stats.h).
using ActivationObserver = std::function<void(const Matrix& W, const float* X, int64_t n, int32_t expert)>;
using StepObserver = std::function<void(int64_t n_tokens, double seconds)>;

class Context {
public:
    // `weights` (default: the model's own, in the file mapping) may be a copy
    // held in the fast tier; `experts` (default: straight from `weights`)
    // may be an expert cache; `kv` (default: one of its own, for one sequence
    // of n_ctx tokens) may be a shared paged cache sized for many sequences.
    // All must outlive the context.
    // `device` (default: none, the CPU computes) runs every chunk on another
    // device (DeviceForward); the context then keeps only the bookkeeping.
    Context(const Model& model, const ContextParams& params, const ModelWeights* weights = nullptr,
            ExpertProvider* experts = nullptr, kv::KvCache* kv = nullptr,
            std::unique_ptr<DeviceForward> device = nullptr);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Runs `tokens` at positions n_past() .. n_past()+size-1 and appends them to
    // the cache. Returns logits: one row of n_vocab per token when all_logits,
    // else only the last token's row. The pointer stays valid until the next
    // call. Throws strata::Error for an out-of-range token or a full context.
    const float* decode(std::span<const int32_t> tokens, bool all_logits);

    // Runs a batch whose token i belongs to sequence seqs[i] and goes at the
    // end of it (a sequence's tokens in order). Returns one row of n_vocab
    // logits per token with want_logits[i] != 0, in batch order (empty
    // want_logits: every token). Throws strata::Error, changing nothing, for
    // an unknown sequence, a token out of range, a sequence longer than n_ctx,
    // or a KV cache without room (kv_blocks_needed() says how many blocks a
    // batch takes, so a scheduler can preempt first).
    const float* decode_batch(std::span<const int32_t> tokens, std::span<const kv::SeqId> seqs,
                              std::span<const uint8_t> want_logits = {});
    int64_t kv_blocks_needed(std::span<const kv::SeqId> seqs) const;

    int64_t n_past() const { return kv_->n_tokens(seq0_); }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_batch() const { return n_batch_; }
    const Model& model() const { return model_; }
    const ModelWeights& weights() const { return weights_; }
    void clear() { kv_->truncate(seq0_, 0); }
    // Forgets every position >= n (keeps the first n tokens of the cache).
    void truncate(int64_t n);

    kv::KvCache& kv_cache() { return *kv_; }
    const kv::KvCache& kv_cache() const { return *kv_; }
    kv::SeqId default_sequence() const { return seq0_; }

    void set_routing_observer(RoutingObserver obs) { observer_ = std::move(obs); }
    // Replaces where experts come from (nullptr: the weights' own); between decode calls.
    void set_expert_provider(ExpertProvider* experts) { experts_ = experts ? experts : &mapped_; }
    // Costs one extra router product per MoE layer and token while set.
    void set_lookahead_observer(LookaheadObserver obs) { lookahead_ = std::move(obs); }
    void set_step_observer(StepObserver obs) { step_ = std::move(obs); }
    void set_step_begin_observer(StepBeginObserver obs) { step_begin_ = std::move(obs); }
    // Sees every matrix product's input while set. The forward pass then
    // takes its plain paths (no fused one-token attention, experts one at a
    // time), which compute the same values and show every product's input.
    void set_activation_observer(ActivationObserver obs) { activations_ = std::move(obs); }
    // Profiles the forward passes until set_profile(nullptr), which also
    // fills in each thread's time inside parallel regions (decode_profile.h).
    // `p` is reset (one entry per compute thread) and must outlive the profiling.
    void set_profile(DecodeProfile* p);

    // The device that computes the forward pass (null: the CPU).
    DeviceForward* device() const { return device_.get(); }

    // Bytes of the KV pool (its own or the shared one) and of the forward-pass scratch.
    uint64_t kv_bytes() const { return kv_->pool_bytes(); }
    uint64_t scratch_bytes() const;

private:
    // Runs n tokens whose sequences and positions are in tok_seq_/tok_pos_
    // (already appended to the KV cache); logits for rows with want[t].
    void forward_chunk(const int32_t* tokens, int64_t n, const uint8_t* want, float* logits_out);
    void attention(const LayerWeights& L, int64_t n);
    // DeepSeek's multi-head latent attention: the cache holds latent rows,
    // queries are taken into the latent space (attn_kv_b absorbed), values out of it.
    void attention_mla(const LayerWeights& L, int64_t n);
    // deepseek2's routing of one token (sigmoid or softmax, selection bias, expert groups).
    void route_deepseek(const LayerWeights& L, float* probs, const uint8_t* allowed, int32_t* ids, float* w);
    // One expert's biases (gpt-oss), each null when the layer has none.
    struct ExpertBias {
        const float *gate = nullptr, *up = nullptr, *down = nullptr;
    };
    ExpertBias expert_bias(const LayerWeights& L, int32_t e) const;
    // SwiGLU FFN; with `bias`, gpt-oss's: biased gate/up/down around the clamped SwiGLU.
    void ffn_dense(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff, const ExpertBias* bias = nullptr);
    void ffn_moe(const LayerWeights& L, int64_t n);
    void lookahead(const LayerWeights& next, int64_t n);
    // Y[t, r] = W.row(r) . X[t]  for t < n
    void matmul(const Matrix& W, const float* X, int64_t n, float* Y);
    struct MatOut {
        const Matrix* W;
        float* Y;
    };
    // matmul() of several matrices over the same X in one parallel region.
    void matmul_many(std::initializer_list<MatOut> outs, const float* X, int64_t n);
    // matmul() of everything in batch_ (each with its own input) in one region.
    struct MatIn {
        const Matrix* W;
        const float* X;
        int64_t n;
        float* Y;
        uint8_t* xq = nullptr;
    };
    void matmul_batch();
    // Quantized matrices of one type and width, each over its own input, in
    // one parallel region (what matmul and matmul_batch come down to).
    void gemm_region(std::span<MatIn> mats);
    // A MoE layer with few tokens: the ready experts' gate/up in one region, their downs in another.
    void ffn_moe_experts_small(const LayerWeights& L, int64_t n);
    enum class Fused { No, Attention, AttentionAndOutput };
    Fused attention_fused_one_token(const LayerWeights& L);
    bool output_fuses(const LayerWeights& L) const;
    void output_projection(const LayerWeights& L, int64_t n, bool product_done = false);
    void attention_qkv_rows(const LayerWeights& L, const uint8_t* xq, int64_t r0, int64_t r1);
    // next_g: the KV head this thread attends with next (-1: none); asked: g's first pieces were asked for.
    void attention_kv_group(const LayerWeights& L, int64_t g, kv::KvCache::Row row, float* scores, int64_t next_g,
                            bool asked);
    struct ReadyExpert;
    bool ffn_moe_experts_fused(const LayerWeights& L, int64_t n);
    void expert_up_on_one_thread(const ReadyExpert& r, int64_t n, int64_t ff, uint8_t* act);
    void expert_down_rows(const ReadyExpert& r, int64_t ff, const uint8_t* act, int64_t c0, int64_t c1);
    struct Chunks {
        int64_t begin = 0, end = 0;  // [begin, end) of kDownChunkRows-row chunks; empty: none left
    };
    Chunks take_down_chunks(int64_t i, bool front);
    bool down_left(int64_t i) const;
    static constexpr int64_t kDownChunkRows = 64;  // down rows taken at a time in the per-expert region
    // From this many tokens on (prefill), the per-expert region takes experts
    // of any token counts, biggest first (ffn_moe_experts_fused).
    static constexpr int64_t kFusedAnyCountsTokens = 8;
    // MoE layers use that region up to this many expert rows (token, expert
    // pairs) per expert on average (ffn_moe).
    static constexpr int64_t kFusedRowsPerExpert = 8;
    // n activation rows X quantized for W's kernels into act (nothing for f32 weights).
    void quantize_for(const Matrix& W, const float* X, int64_t n, uint8_t* act);
    // Rows [r0, r1) of W times n tokens on the calling thread, Y[t * W.rows + r]:
    // f32 weights take X, the others act (X's rows quantized for W's type,
    // as quantize_for makes them). Every weight product goes through here,
    // so the profile sees each one once.
    // read_once: W's rows are read once and not again soon (an expert's in
    // decode: kernels::gemm_q_once, the same results).
    void rows_product(const Matrix& W, const float* X, const uint8_t* act, int64_t n, int64_t r0, int64_t r1, float* Y,
                      bool read_once = false);
    // Runs fn; while profiling, adds its time (and `bytes` of weights) to the calling thread's `part`.
    template <class F>
    void profiled(DecodeProfile::Part part, uint64_t bytes, F&& fn);
    // Spins until ready() (another thread's part of a region is done); while
    // profiling, the time counts as DecodeProfile::Waiting.
    template <class Ready>
    void wait_until(Ready&& ready);
    void ffn_moe_experts_each(const LayerWeights& L, int64_t n);

    const Model& model_;
    const ModelConfig& cfg_;
    std::unique_ptr<DeviceForward> device_;
    const ModelWeights& weights_;
    MappedExperts mapped_;
    ExpertProvider* experts_;
    std::unique_ptr<cpu::ThreadPool> pool_;
    int64_t n_ctx_ = 0;
    int64_t n_batch_ = 0;
    // The fewest weight rows a thread takes at a time in a parallel region
    // (kernels::KernelTuning::grain_rows when the context was made): each
    // chunk's start waits on memory; 48 decoded the 1.2B Q4_0 model 4-6%
    // faster than 16 at ~75 GB/s.
    int64_t grain_rows_ = 48;
    int64_t n_layers_run_ = 0;
    int64_t n_used_ = 0;
    bool resident_only_ = false;
    std::vector<uint8_t> resident_mask_;
    std::unique_ptr<kv::KvCache> own_kv_;
    kv::KvCache* kv_ = nullptr;
    kv::SeqId seq0_ = 0;
    RoutingObserver observer_;
    ActivationObserver activations_;
    int32_t observed_expert_ = -1;  // the expert ffn_moe_experts_each is computing (for activations_)
    LookaheadObserver lookahead_;
    DecodeProfile* profile_ = nullptr;
    StepObserver step_;
    StepBeginObserver step_begin_;

    // The chunk under way: each token's sequence and position.
    std::vector<kv::SeqId> tok_seq_;
    std::vector<int64_t> tok_pos_;
    std::vector<float> rope_cs_;   // per token of the chunk: its position's RoPE cos/sin table
    std::vector<uint8_t> want_;
    std::vector<std::pair<kv::SeqId, int64_t>> seq_start_;  // rollback on failure
    std::vector<kv::SeqId> seq_ids_one_;                     // decode(): all the default sequence
    std::vector<uint8_t> want_one_;

    // Scratch, sized once.
    std::vector<float> x_, h_, q_, k_, v_, attn_, tmp_;
    std::vector<float> mla_qa_, mla_q_, mla_v_, route_select_;  // MLA and deepseek2 routing (empty otherwise)
    std::vector<float> router_logits_, route_w_;
    std::vector<int32_t> route_ids_;
    std::vector<int32_t> expert_count_, expert_offset_, expert_tokens_, needed_;
    std::vector<float> xe_, ge_, ue_, ye_, expert_out_;
    std::vector<float> shared_gate_;
    std::vector<uint8_t> act_scratch_;  // activations quantized for the weight type
    std::vector<float> score_scratch_;  // per thread: attention scores
    int64_t scores_per_thread_ = 0;     // a query group's scores over n_ctx keys
    std::vector<float> logits_;
    std::vector<float> look_h_, look_probs_;
    std::vector<MatIn> batch_;
    std::vector<int64_t> batch_start_;
    struct ReadyExpert {
        int32_t e;
        FfnMatrices mats;
        int64_t base;  // first row of its tokens in the xe_/ge_/ue_/ye_ scratch
        float* out = nullptr;  // where the per-expert region writes its down rows
    };
    std::vector<ReadyExpert> ready_;
    // The per-expert FFN region's shared state, one entry per ready expert:
    // its down projection's input is ready, and its down rows not yet taken
    // (chunks, a cpu::pack_range word; the owner takes from the
    // front, a thread that ran out of experts from the back).
    std::unique_ptr<std::atomic<uint32_t>[]> down_ready_;
    std::unique_ptr<std::atomic<uint64_t>[]> down_chunks_;
    // The one-token attention region's shared state: the Q/K/V and wo rows
    // not yet taken (each thread's own stretch of them), each KV head's rows
    // done, the next KV head to attend with.
    std::unique_ptr<cpu::OwnedRanges> qkv_rows_, wo_rows_;
    std::unique_ptr<std::atomic<int64_t>[]> qkv_done_;
    alignas(64) std::atomic<int64_t> attend_next_{0};
    alignas(64) std::atomic<int64_t> attended_{0};  // KV heads whose attention output is quantized for wo
    int64_t max_cols_ = 0;
};

}  // namespace strata::model
