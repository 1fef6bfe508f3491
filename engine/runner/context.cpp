#include "runner/context.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/error.h"
#include "model/arch/arch.h"

namespace strata::model {

Context::Context(const Model& model, const ContextParams& params, const ModelWeights* weights, ExpertProvider* experts,
                 kv::KvCache* kv, std::unique_ptr<DeviceForward> device)
    : model_(model),
      cfg_(model.config()),
      device_(std::move(device)),
      weights_(weights ? *weights : model.weights()),
      mapped_(weights_),
      experts_(experts ? experts : &mapped_) {
    const ModelConfig& c = cfg_;
    n_ctx_ = params.n_ctx > 0 ? params.n_ctx : std::min<int64_t>(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096);
    n_batch_ = std::max<int64_t>(1, std::min(params.n_batch, n_ctx_));
    if (params.max_layers < 0 || params.max_layers > c.n_layer)
        throw Error("max_layers " + std::to_string(params.max_layers) + " is out of range (0.." + std::to_string(c.n_layer) + ")");
    if (params.n_expert_used < 0 || params.n_expert_used > c.n_expert_used)
        throw Error("n_expert_used " + std::to_string(params.n_expert_used) + " is out of range (0.." +
                    std::to_string(c.n_expert_used) + ")");
    n_layers_run_ = params.max_layers > 0 ? params.max_layers : c.n_layer;
    n_used_ = params.n_expert_used > 0 ? params.n_expert_used : c.n_expert_used;
    resident_only_ = params.resident_experts_only;
    keep_hidden_ = params.keep_hidden;
    if (!device_) {
        CpuBackendParams bp;
        bp.n_batch = n_batch_;
        bp.n_ctx = n_ctx_;
        bp.n_threads = params.n_threads;
        bp.cpus = params.cpus;
        bp.pool = params.pool;
        cpu_ = std::make_unique<CpuBackend>(c, bp);  // computes every op (CpuBackend::supports)
    }
    if (kv) {
        const kv::KvCacheParams& kp = kv->params();
        if (kp.n_layer != c.n_kv_layers() || kp.n_head_kv != c.n_head_kv || kp.head_dim != c.head_dim ||
            kp.keys_only != static_cast<bool>(c.mla) || kp.state_floats != c.recurrent_state_floats())
            throw Error("the KV cache was made for another model shape");
        kv_ = kv;
    } else {
        kv::KvCacheParams kp = kv_cache_params(c, 0, params.kv_block_tokens, params.kv_type);
        kp.n_blocks = kp.blocks_for(n_ctx_);
        own_kv_ = std::make_unique<kv::KvCache>(kp);
        kv_ = own_kv_.get();
    }
    seq0_ = kv_->create_sequence(n_ctx_);
    tok_seq_.resize(static_cast<size_t>(n_batch_));
    tok_pos_.resize(static_cast<size_t>(n_batch_));
}

Context::~Context() = default;

void Context::truncate(int64_t n) {
    if (n < 0 || n > n_past())
        throw Error("cannot truncate the context to " + std::to_string(n) + " tokens: it holds " + std::to_string(n_past()));
    kv_->truncate(seq0_, n);
}

const float* Context::decode(std::span<const int32_t> tokens, bool all_logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) throw Error("decode called with no tokens");
    if (n_past() + n > n_ctx_) {
        throw Error("context is full: " + std::to_string(n_past()) + " tokens cached + " + std::to_string(n) +
                    " new > context size " + std::to_string(n_ctx_) + "; start a new conversation or raise the context size");
    }
    seq_ids_one_.assign(static_cast<size_t>(n), seq0_);
    want_one_.assign(static_cast<size_t>(n), 0);
    if (all_logits) std::fill(want_one_.begin(), want_one_.end(), 1);
    want_one_.back() = 1;
    return decode_batch(tokens, seq_ids_one_, want_one_);
}

const float* Context::decode(std::span<const int32_t> tokens, const float* hidden_in, bool all_logits) {
    if (!weights_.nextn_input) throw Error("internal: hidden rows given to a model that is not a NextN view");
    if (!hidden_in) throw Error("internal: a NextN view's decode needs the trunk's hidden rows");
    hidden_in_ = hidden_in;
    struct Reset {
        const float*& p;
        ~Reset() { p = nullptr; }
    } reset{hidden_in_};
    return decode(tokens, all_logits);
}

int64_t Context::kv_blocks_needed(std::span<const kv::SeqId> seqs) const {
    // Tokens per sequence, then blocks per sequence (no allocation: this runs per step).
    int64_t total = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; ++j) seen = seqs[j] == seqs[i];
        if (seen) continue;
        int64_t k = 0;
        for (size_t j = i; j < seqs.size(); ++j) k += seqs[j] == seqs[i];
        total += kv_->blocks_needed(seqs[i], k);
    }
    return total;
}

const float* Context::decode_batch(std::span<const int32_t> tokens, std::span<const kv::SeqId> seqs,
                                   std::span<const uint8_t> want_logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) throw Error("decode called with no tokens");
    if (seqs.size() != tokens.size() || (!want_logits.empty() && want_logits.size() != tokens.size()))
        throw Error("decode_batch: tokens, sequences and logit flags differ in length");
    // Validate everything before changing anything.
    seq_start_.clear();
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= cfg_.n_vocab) {
            throw Error("token id " + std::to_string(tokens[i]) + " is out of range (vocabulary has " +
                        std::to_string(cfg_.n_vocab) + " tokens)");
        }
        if (!kv_->has_sequence(seqs[i])) throw Error("decode_batch: sequence " + std::to_string(seqs[i]) + " does not exist");
        auto it = std::find_if(seq_start_.begin(), seq_start_.end(), [&](const auto& p) { return p.first == seqs[i]; });
        if (it == seq_start_.end()) seq_start_.emplace_back(seqs[i], kv_->n_tokens(seqs[i]));
    }
    for (const auto& [s, start] : seq_start_) {
        const int64_t k = static_cast<int64_t>(std::count(seqs.begin(), seqs.end(), s));
        if (start + k > n_ctx_) {
            throw Error("context is full: sequence " + std::to_string(s) + " holds " + std::to_string(start) + " tokens + " +
                        std::to_string(k) + " new > context size " + std::to_string(n_ctx_) +
                        "; start a new conversation or raise the context size");
        }
    }
    if (const int64_t need = kv_blocks_needed(seqs); need > kv_->available_blocks()) {
        throw Error("the KV cache is full: this batch needs " + std::to_string(need) + " more blocks of " +
                    std::to_string(kv_->params().block_tokens) + " tokens, " + std::to_string(kv_->available_blocks()) +
                    " are free; finish or cancel a conversation, or raise the KV cache size");
    }
    if (step_begin_) step_begin_(n);
    const auto t0 = std::chrono::steady_clock::now();
    int64_t rows = 0;
    for (int64_t i = 0; i < n; ++i) rows += want_logits.empty() || want_logits[i];
    if (logits_.size() < static_cast<size_t>(rows * cfg_.n_vocab)) logits_.resize(static_cast<size_t>(rows * cfg_.n_vocab));
    if (weights_.nextn_input && !hidden_in_)
        throw Error("a NextN/MTP block runs only with the trunk's hidden rows (Context::decode with hidden_in)");
    if (keep_hidden_ && hidden_.size() < static_cast<size_t>(n * cfg_.n_embd)) hidden_.resize(static_cast<size_t>(n * cfg_.n_embd));
    try {
        int64_t row = 0;
        for (int64_t done = 0; done < n; done += n_batch_) {
            const int64_t chunk = std::min(n_batch_, n - done);
            want_.assign(static_cast<size_t>(chunk), 1);
            int64_t chunk_rows = 0;
            for (int64_t t = 0; t < chunk; ++t) {
                const kv::SeqId s = seqs[done + t];
                tok_seq_[t] = s;
                tok_pos_[t] = kv_->n_tokens(s);
                kv_->append(s, tokens.subspan(static_cast<size_t>(done + t), 1));  // room checked above
                if (!want_logits.empty()) want_[t] = want_logits[done + t];
                chunk_rows += want_[t];
            }
            forward_chunk(tokens.data() + done, chunk, want_.data(), chunk_rows ? logits_.data() + row * cfg_.n_vocab : nullptr,
                          hidden_in_ ? hidden_in_ + done * cfg_.n_embd : nullptr,
                          keep_hidden_ ? hidden_.data() + done * cfg_.n_embd : nullptr);
            row += chunk_rows;
            for (int64_t t = 0; t < chunk; ++t) kv_->seal_full_blocks(tok_seq_[t]);
        }
    } catch (...) {
        for (const auto& [s, start] : seq_start_) kv_->truncate(s, start);
        throw;
    }
    if (step_) step_(n, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return logits_.data();
}

uint64_t Context::scratch_bytes() const {
    return (cpu_ ? cpu_->scratch_bytes() : 0) + logits_.capacity() * sizeof(float);
}

void Context::forward_chunk(const int32_t* tokens, int64_t n, const uint8_t* want, float* logits_out,
                            const float* hidden_in, float* hidden_out) {
    DeviceChunk chunk;
    chunk.tokens = tokens;
    chunk.n = n;
    chunk.seqs = tok_seq_.data();
    chunk.pos = tok_pos_.data();
    chunk.want = want;
    chunk.logits = logits_out;
    chunk.hidden = hidden_out;
    if (device_) {
        if (hidden_in)
            throw Error("this model computes on " + device_->name() +
                        ", which does not run a NextN/MTP block: load it with --device cpu for that");
        device_->run(chunk, *kv_, observer_, lookahead_);
        return;
    }
    Step step = chunk_step(chunk, *kv_, n_used_);
    step.experts = experts_;
    step.resident_experts_only = resident_only_;
    step.routing = &observer_;
    step.lookahead = &lookahead_;
    step.hidden_in = hidden_in;
    cpu_->begin(step);
    arch::forward(*cpu_, cfg_, weights_, n_layers_run_, static_cast<bool>(lookahead_));
}

}  // namespace strata::model
