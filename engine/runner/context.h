// A model's sequences over a paged KV cache, and the steps that run them:
// one batch of tokens may mix many sequences (continuous batching) and the
// draft tokens of speculative decoding; every token attends only to its own
// sequence. The context keeps sequences, positions, the cache's block
// tables, logits and observers; the forward pass is the architecture's
// (model/arch/), computed by a backend (model/backend.h: the CPU's,
// backend/cpu/cpu_backend.h, unless a device computes whole steps, DeviceForward).
// The model runner is a floor of its own (runner/), above the CPU backend it
// makes; its namespace stays model, the name every caller knows it by.
//
// A context always has a default sequence, which the single-sequence calls
// (decode(tokens), n_past, truncate, clear) use; decode_batch() names the
// sequence of each token. Results per token do not depend on what else is in
// the batch (every op computes a token's row the same way whatever the
// batch size), so a request gives the same tokens alone or batched.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "backend/cpu/cpu_backend.h"
#include "model/decode_profile.h"
#include "model/device_forward.h"
#include "model/expert_provider.h"
#include "model/kv_shape.h"
#include "model/model.h"

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
    // Keep every decoded token's normed last hidden state (what the output
    // head reads), for hidden(): an MTP draft reads the trunk's.
    bool keep_hidden = false;
    // Compute with another context's workers (Context::thread_pool; a
    // speculative draft's, which never runs beside its target) instead of
    // n_threads of its own.
    std::shared_ptr<cpu::ThreadPool> pool;
};

// Before every decode() call (how many tokens it will run), and after it (how
// many it ran and how long it took).
using StepBeginObserver = std::function<void(int64_t n_tokens)>;
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
    // A NextN view's decode (Model::nextn): token i is mixed with the
    // trunk's hidden row hidden_in + i * n_embd.
    const float* decode(std::span<const int32_t> tokens, const float* hidden_in, bool all_logits);
    // With ContextParams::keep_hidden: the last decode call's normed hidden
    // rows, one of n_embd per token in batch order (until the next call).
    const float* hidden() const { return hidden_.data(); }
    void set_keep_hidden(bool keep) { keep_hidden_ = keep; }

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
    // Sees every matrix product's input while set (the CPU backend's; see
    // CpuBackend::set_activation_observer). No effect where a device computes.
    void set_activation_observer(ActivationObserver obs) {
        if (cpu_) cpu_->set_activation_observer(std::move(obs));
    }
    // Profiles the forward passes until set_profile(nullptr), which also
    // fills in each thread's time inside parallel regions (decode_profile.h).
    // `p` is reset (one entry per compute thread) and must outlive the
    // profiling. No effect where a device computes.
    void set_profile(DecodeProfile* p) {
        if (cpu_) cpu_->set_profile(p);
    }

    // The CPU workers (null where a device computes).
    std::shared_ptr<cpu::ThreadPool> thread_pool() const { return cpu_ ? cpu_->pool() : nullptr; }

    // The device that computes the forward pass (null: the CPU).
    DeviceForward* device() const { return device_.get(); }

    // Bytes of the KV pool (its own or the shared one) and of the forward-pass scratch.
    uint64_t kv_bytes() const { return kv_->pool_bytes(); }
    uint64_t scratch_bytes() const;

private:
    // Runs n tokens whose sequences and positions are in tok_seq_/tok_pos_
    // (already appended to the KV cache); logits for rows with want[t].
    void forward_chunk(const int32_t* tokens, int64_t n, const uint8_t* want, float* logits_out, const float* hidden_in,
                       float* hidden_out);

    const Model& model_;
    const ModelConfig& cfg_;
    std::unique_ptr<DeviceForward> device_;
    const ModelWeights& weights_;
    MappedExperts mapped_;
    ExpertProvider* experts_;
    std::unique_ptr<CpuBackend> cpu_;  // null where a device computes
    int64_t n_ctx_ = 0;
    int64_t n_batch_ = 0;
    int64_t n_layers_run_ = 0;
    int64_t n_used_ = 0;
    bool resident_only_ = false;
    std::unique_ptr<kv::KvCache> own_kv_;
    kv::KvCache* kv_ = nullptr;
    kv::SeqId seq0_ = 0;
    RoutingObserver observer_;
    LookaheadObserver lookahead_;
    StepObserver step_;
    StepBeginObserver step_begin_;

    // The chunk under way: each token's sequence and position.
    std::vector<kv::SeqId> tok_seq_;
    std::vector<int64_t> tok_pos_;
    std::vector<uint8_t> want_;
    std::vector<std::pair<kv::SeqId, int64_t>> seq_start_;  // rollback on failure
    std::vector<kv::SeqId> seq_ids_one_;                     // decode(): all the default sequence
    std::vector<uint8_t> want_one_;

    std::vector<float> logits_;
    bool keep_hidden_ = false;
    std::vector<float> hidden_;
    const float* hidden_in_ = nullptr;  // the NextN decode under way's rows
};

}  // namespace strata::model
