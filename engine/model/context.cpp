#include "model/context.h"

#include <limits>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include "platform/thread_pool.h"
#include "common/error.h"
#include "kernels/quant.h"
#include "kernels/tuning.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace strata::model {

namespace {
// A CPU hint that this thread is spinning on another's progress.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}
}  // namespace

namespace ops = kernels::ops;  // SIMD where the CPU has it, else the scalar reference

namespace {
// Whether two matrices have the same type, shape and row stride.
bool same_shape(const Matrix& a, const Matrix& b) {
    return a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes;
}
int64_t max_expert_ff(const ModelConfig& c) { return std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}}); }
}  // namespace

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
    grain_rows_ = kernels::kernel_tuning().grain_rows;
    if (params.max_layers < 0 || params.max_layers > c.n_layer)
        throw Error("max_layers " + std::to_string(params.max_layers) + " is out of range (0.." + std::to_string(c.n_layer) + ")");
    if (params.n_expert_used < 0 || params.n_expert_used > c.n_expert_used)
        throw Error("n_expert_used " + std::to_string(params.n_expert_used) + " is out of range (0.." +
                    std::to_string(c.n_expert_used) + ")");
    n_layers_run_ = params.max_layers > 0 ? params.max_layers : c.n_layer;
    n_used_ = params.n_expert_used > 0 ? params.n_expert_used : c.n_expert_used;
    resident_only_ = params.resident_experts_only;
    int threads = params.n_threads > 0 ? params.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    pool_ = std::make_unique<cpu::ThreadPool>(std::max(1, threads), params.cpus);
    qkv_rows_ = std::make_unique<cpu::OwnedRanges>(pool_->size());
    wo_rows_ = std::make_unique<cpu::OwnedRanges>(pool_->size());

    const int64_t q_dim = c.n_head * c.head_dim;
    const int64_t kv_dim = c.n_head_kv * c.head_dim;
    const int64_t ff = max_expert_ff(c);
    const size_t B = static_cast<size_t>(n_batch_);
    if (kv) {
        const kv::KvCacheParams& kp = kv->params();
        if (kp.n_layer != c.n_layer || kp.n_head_kv != c.n_head_kv || kp.head_dim != c.head_dim ||
            kp.keys_only != static_cast<bool>(c.mla))
            throw Error("the KV cache was made for another model shape");
        kv_ = kv;
    } else {
        kv::KvCacheParams kp = kv_cache_params(c, 0, params.kv_block_tokens, params.kv_type);
        kp.n_blocks = kp.blocks_for(n_ctx_);
        own_kv_ = std::make_unique<kv::KvCache>(kp);
        kv_ = own_kv_.get();
    }
    seq0_ = kv_->create_sequence(n_ctx_);
    batch_.reserve(static_cast<size_t>(2 * std::max<int64_t>(c.n_expert, 1) + 4));
    batch_start_.reserve(static_cast<size_t>(2 * std::max<int64_t>(c.n_expert, 1) + 5));
    ready_.reserve(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    down_ready_ = std::make_unique<std::atomic<uint32_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    down_chunks_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    qkv_done_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_head_kv, 1)));
    tok_seq_.resize(B);
    tok_pos_.resize(B);
    rope_cs_.resize(B * static_cast<size_t>(std::max<int64_t>(c.n_rot, 2)));
    x_.resize(B * c.n_embd);
    h_.resize(B * c.n_embd);
    tmp_.resize(B * c.n_embd);
    q_.resize(B * q_dim);
    attn_.resize(B * q_dim);
    k_.resize(B * kv_dim);
    v_.resize(B * kv_dim);
    const int64_t E = std::max<int64_t>(c.n_expert, 1);
    const int64_t U = std::max<int64_t>(c.n_expert_used, 1);
    router_logits_.resize(B * E);
    route_w_.resize(B * U);
    route_ids_.resize(B * U);
    expert_count_.resize(E);
    expert_offset_.resize(E + 1);
    expert_tokens_.resize(B * U);
    needed_.reserve(E);
    xe_.resize(B * c.n_embd);
    ge_.resize(B * ff);
    ue_.resize(B * ff);
    ye_.resize(B * c.n_embd);
    expert_out_.resize(B * U * c.n_embd);
    shared_gate_.resize(B);
    max_cols_ = std::max({c.n_embd, q_dim, ff, c.mla.q_lora_rank, c.n_head * c.mla.value_length});
    if (c.mla) {
        mla_qa_.resize(B * c.mla.q_lora_rank);
        mla_q_.resize(B * c.n_head * c.mla.key_length);
        mla_v_.resize(B * c.n_head * c.mla.value_length);
    }
    if (c.gating != Gating::Softmax || c.n_expert_groups > 1 || c.arch_name == "deepseek2") route_select_.resize(E);
    act_scratch_.resize(B * static_cast<size_t>(max_cols_) * sizeof(float));
    // Per thread: the scores of a KV head's query group (attend_group).
    scores_per_thread_ = n_ctx_ * std::max<int64_t>(1, c.n_head / std::max<int64_t>(1, c.n_head_kv));
    score_scratch_.resize(static_cast<size_t>(pool_->size() * scores_per_thread_));
}

Context::~Context() = default;

kv::KvCacheParams kv_cache_params(const ModelConfig& c, int64_t n_blocks, int64_t block_tokens, kv::KvType type) {
    kv::KvCacheParams p;
    p.n_layer = c.n_layer;
    p.n_head_kv = c.n_head_kv;
    p.head_dim = c.head_dim;
    p.keys_only = static_cast<bool>(c.mla);  // MLA: one latent row per token and layer
    p.block_tokens = block_tokens;
    p.n_blocks = n_blocks;
    p.type = type;
    return p;
}

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
            forward_chunk(tokens.data() + done, chunk, want_.data(), chunk_rows ? logits_.data() + row * cfg_.n_vocab : nullptr);
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
    size_t floats = x_.size() + h_.size() + q_.size() + k_.size() + v_.size() + attn_.size() + tmp_.size() +
                    router_logits_.size() + route_w_.size() + expert_out_.size() + xe_.size() + ge_.size() + ue_.size() + ye_.size() +
                    shared_gate_.size() + score_scratch_.size() + logits_.capacity() + mla_qa_.size() + mla_q_.size() +
                    mla_v_.size() + route_select_.size();
    return floats * sizeof(float) + act_scratch_.size() + (route_ids_.size() + expert_count_.size() + expert_offset_.size() +
                                     expert_tokens_.size()) * sizeof(int32_t);
}

void Context::set_profile(DecodeProfile* p) {
    if (p) {
        p->threads.assign(static_cast<size_t>(pool_->size()), DecodeProfile::Thread{});
        pool_->set_busy_accounting(true);
    } else if (profile_) {
        const std::vector<double> busy = pool_->busy_seconds();
        for (size_t i = 0; i < busy.size() && i < profile_->threads.size(); ++i) profile_->threads[i].in_regions = busy[i];
        if (!profile_->threads.empty()) profile_->threads[0].region_end_wait = pool_->caller_wait_seconds();
        pool_->set_busy_accounting(false);
    }
    profile_ = p;
}

template <class F>
void Context::profiled(DecodeProfile::Part part, uint64_t bytes, F&& fn) {
    if (!profile_) return fn();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    DecodeProfile::Thread& t = profile_->threads[static_cast<size_t>(cpu::ThreadPool::thread_index())];
    t.seconds[part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.bytes[part] += bytes;
}

template <class Ready>
void Context::wait_until(Ready&& ready) {
    profiled(DecodeProfile::Waiting, 0, [&] {
        while (!ready()) cpu_relax();
    });
}

void Context::matmul(const Matrix& W, const float* X, int64_t n, float* Y) {
    // The smallest chunk; the pool hands out shrinking chunks (guided), so
    // threads stream long runs of rows and still finish together.
    const int64_t grain = 8;
    if (W.type == kernels::WeightType::F32) {
        if (activations_) activations_(W, X, n, observed_expert_);  // (gemm_region sees the others)
        pool_->parallel_for(W.rows, grain, [&](int64_t r0, int64_t r1, int) { rows_product(W, X, nullptr, n, r0, r1, Y); });
        return;
    }
    // Quantized and half-precision weights: quantize each activation row once
    // to the weight type's partner format (Q8_0, Q8_1, Q8_K, F16, BF16), as
    // ggml does, and use integer block dot products.
    MatIn one{&W, X, n, Y};
    gemm_region({&one, 1});
}

void Context::matmul_many(std::initializer_list<MatOut> outs, const float* X, int64_t n) {
    batch_.clear();
    for (const MatOut& o : outs) batch_.push_back({o.W, X, n, o.Y});
    matmul_batch();
}

void Context::matmul_batch() {
    // Several matrices in one parallel region (Q/K/V; gate/up; every expert
    // of a MoE layer with few tokens): each distinct input quantized once,
    // threads split all the rows instead of meeting at a barrier after each
    // matrix. Each row is computed exactly as matmul() computes it.
    bool same = !batch_.empty();
    for (const MatIn& o : batch_)
        same &= o.W->type == batch_[0].W->type && o.W->cols == batch_[0].W->cols && o.W->type != kernels::WeightType::F32;
    if (!same) {
        for (const MatIn& o : batch_) matmul(*o.W, o.X, o.n, o.Y);  // matmul does not touch batch_
        return;
    }
    gemm_region(batch_);
}

void Context::gemm_region(std::span<MatIn> mats) {
    // gemm_q keeps each weight block in registers across the tokens, so a
    // prompt chunk reads every weight once; its result for a (row, token)
    // does not depend on the tiling or on the other matrices of the region.
    const kernels::WeightType type = mats[0].W->type;
    const int64_t cols = mats[0].W->cols;
    const int64_t ab = kernels::activation_row_bytes(type, cols);
    // Quantize each distinct input once (entries with the same X share it).
    int64_t used_rows = 0;
    batch_start_.assign(1, 0);
    for (size_t i = 0; i < mats.size(); ++i) {
        MatIn& o = mats[i];
        if (activations_) activations_(*o.W, o.X, o.n, observed_expert_);
        size_t j = 0;
        while (j < i && mats[j].X != o.X) ++j;
        if (j < i) {
            o.xq = mats[j].xq;
        } else {
            o.xq = act_scratch_.data() + used_rows * ab;
            for (int64_t t = 0; t < o.n; ++t) kernels::quantize_activation(type, o.X + t * cols, o.xq + t * ab, cols);
            used_rows += o.n;
        }
        batch_start_.push_back(batch_start_.back() + o.W->rows);
    }
    const size_t m = mats.size();
    pool_->parallel_for(batch_start_[m], grain_rows_, [&](int64_t r0, int64_t r1, int) {
        size_t i = static_cast<size_t>(std::upper_bound(batch_start_.begin(), batch_start_.end(), r0) - batch_start_.begin()) - 1;
        for (; i < m && r0 < r1; ++i) {
            const MatIn& o = mats[i];
            const int64_t a = r0 - batch_start_[i], e = std::min(r1, batch_start_[i + 1]) - batch_start_[i];
            rows_product(*o.W, o.X, o.xq, o.n, a, e, o.Y);
            r0 = batch_start_[i] + e;
        }
    });
}

void Context::ffn_moe_experts_each(const LayerWeights& L, int64_t n) {
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    FfnMatrices mats;
    for (int32_t e; (e = experts_->take(L.index, &mats)) >= 0;) {
        const int64_t m = expert_count_[e];
        const int32_t* slots = expert_tokens_.data() + expert_offset_[e];
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / U;
            std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + i * d);
        }
        observed_expert_ = e;
        const ExpertBias bias = expert_bias(L, e);
        ffn_dense(mats, xe_.data(), m, ye_.data(), L.n_ff_expert, bias.gate ? &bias : nullptr);
        observed_expert_ = -1;
        experts_->release(L.index, e);
        for (int64_t i = 0; i < m; ++i)
            std::copy(ye_.begin() + i * d, ye_.begin() + (i + 1) * d, expert_out_.begin() + slots[i] * d);
    }
    (void)n;
}

void Context::ffn_moe_experts_small(const LayerWeights& L, int64_t n) {
    // The experts that are ready go together: their gate/up rows in one
    // parallel region, their down rows in another, so two threads share a
    // layer's few small products instead of splitting each one. A token's
    // rows are computed as ffn_dense computes them (bit for bit).
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    const int64_t ff = L.n_ff_expert;
    FfnMatrices mats;
    for (int32_t e; (e = experts_->take(L.index, &mats)) >= 0;) {
        ready_.clear();
        int64_t rows = 0;
        ready_.push_back({e, mats, rows});
        rows += expert_count_[e];
        for (int32_t f; (f = experts_->take_if_ready(L.index, &mats)) >= 0;) {
            ready_.push_back({f, mats, rows});
            rows += expert_count_[f];
        }
        if (ffn_moe_experts_fused(L, n)) continue;
        batch_.clear();
        for (const ReadyExpert& r : ready_) {
            const int64_t m = expert_count_[r.e];
            const float* X = h_.data();  // every token routed here: its rows are h_ itself
            if (m != n) {
                const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
                for (int64_t i = 0; i < m; ++i) {
                    const int64_t t = slots[i] / U;
                    std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + (r.base + i) * d);
                }
                X = xe_.data() + r.base * d;
            }
            batch_.push_back({&r.mats.gate, X, m, ge_.data() + r.base * ff});
            batch_.push_back({&r.mats.up, X, m, ue_.data() + r.base * ff});
        }
        matmul_batch();
        ops::swiglu(ge_.data(), ue_.data(), ge_.data(), rows * ff);
        batch_.clear();
        for (const ReadyExpert& r : ready_)
            batch_.push_back({&r.mats.down, ge_.data() + r.base * ff, expert_count_[r.e], ye_.data() + r.base * d});
        matmul_batch();
        for (const ReadyExpert& r : ready_) {
            experts_->release(L.index, r.e);
            const int64_t m = expert_count_[r.e];
            const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
            for (int64_t i = 0; i < m; ++i)
                std::copy(ye_.begin() + (r.base + i) * d, ye_.begin() + (r.base + i + 1) * d,
                          expert_out_.begin() + slots[i] * d);
        }
    }
}

// One expert's whole FFN per thread (gate, up, SiLU*mul, down), when the
// ready experts split evenly over the threads: as many tokens each, a
// multiple of the thread count. Decode is that case (one token, top-k
// experts), and there it saves the barrier between gate/up and down and the
// serial SiLU between them, 12 regions a token on a 12-layer model, and each
// thread streams whole experts. From kFusedAnyCountsTokens tokens on
// (prefill) the experts may have any token counts: the threads claim them
// biggest first, and the down rows shared at the end even out the rest
// (64-token prefill of the 1.2B make-model, 2 threads, in-process A/B
// against the two-region path per expert, 15 rounds: +7% Q8_0, +8% Q4_0,
// and biggest first a further +2% and +6%; both against the code before,
// 20 rounds: +4% and +10%). Each row is computed as in the
// two-region path (gemm_q is batch-invariant; swiglu is element-wise), so
// the results are the same bits. False: not this case, nothing done.
bool Context::ffn_moe_experts_fused(const LayerWeights& L, int64_t n) {
    const int64_t k = static_cast<int64_t>(ready_.size());
    const int64_t threads = pool_->size();
    if (threads < 2) return false;
    if (n < kFusedAnyCountsTokens) {
        if (k % threads != 0) return false;
        for (const ReadyExpert& r : ready_)
            if (expert_count_[r.e] != expert_count_[ready_[0].e]) return false;
    } else {
        // Biggest first (the threads claim experts in this order), so the
        // last ones claimed are small and the threads end close together.
        std::stable_sort(ready_.begin(), ready_.end(),
                         [&](const ReadyExpert& a, const ReadyExpert& b) { return expert_count_[a.e] > expert_count_[b.e]; });
    }
    const int64_t d = cfg_.n_embd;
    const int64_t U = n_used_;
    // An expert with one token writes its down rows straight into that
    // token's row of expert_out_ (decode: no copy after the region); with
    // more, into ye_, copied out after the region.
    for (ReadyExpert& r : ready_)
        r.out = expert_count_[r.e] == 1 ? expert_out_.data() + expert_tokens_[expert_offset_[r.e]] * d : ye_.data() + r.base * d;
    // Each expert's rows of xe_ (its tokens), as the two-region path gathers them.
    for (const ReadyExpert& r : ready_) {
        const int64_t m = expert_count_[r.e];
        if (m == n) continue;
        const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / U;
            std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + (r.base + i) * d);
        }
    }
    const int64_t ff = L.n_ff_expert;
    // Per expert: its quantized inputs (m rows, at most 2 bytes an element)
    // in its own part of act_scratch_, which holds n_batch rows of the widest
    // matrix in floats; the small path has at most n_batch expert rows.
    const auto act_per_row = static_cast<uint64_t>(2 * std::max(d, ff));
    // Each thread owns whole experts (gate, up, SiLU*mul, then its down rows
    // from the front); a thread with no expert left takes down rows of the
    // others from the back, so the threads finish within a chunk of each
    // other instead of within an expert. (Measured on the 1.2B q4_0 model:
    // the main thread's wait at the end of this region fell from 26-32 to
    // 2-5 Mcycles per 160 tokens, and decode was ahead in 3 of 3 pairs.)
    const int64_t n_chunks = (d + kDownChunkRows - 1) / kDownChunkRows;
    for (int64_t i = 0; i < k; ++i) {
        down_ready_[i].store(0, std::memory_order_relaxed);
        down_chunks_[i].store(cpu::pack_range(0, n_chunks), std::memory_order_relaxed);
    }
    std::atomic<int64_t> next_owner{0};
    pool_->parallel_for(threads, 1, [&](int64_t, int64_t, int) {
        for (int64_t i; (i = next_owner.fetch_add(1, std::memory_order_relaxed)) < k;) {
            const ReadyExpert& r = ready_[static_cast<size_t>(i)];
            uint8_t* act = act_scratch_.data() + static_cast<uint64_t>(r.base) * act_per_row;
            expert_up_on_one_thread(r, n, ff, act);
            down_ready_[i].store(1, std::memory_order_release);
            for (Chunks c; (c = take_down_chunks(i, true)).begin < c.end;) expert_down_rows(r, ff, act, c.begin, c.end);
        }
        for (int64_t i = 0; i < k; ++i) {  // help with the others' down rows
            if (!down_left(i)) continue;
            wait_until([&] { return down_ready_[i].load(std::memory_order_acquire) != 0; });
            const ReadyExpert& r = ready_[static_cast<size_t>(i)];
            uint8_t* act = act_scratch_.data() + static_cast<uint64_t>(r.base) * act_per_row;
            for (Chunks c; (c = take_down_chunks(i, false)).begin < c.end;) expert_down_rows(r, ff, act, c.begin, c.end);
        }
    });
    for (const ReadyExpert& r : ready_) {
        experts_->release(L.index, r.e);
        const int64_t m = expert_count_[r.e];
        if (m == 1) continue;  // written in place
        const int32_t* slots = expert_tokens_.data() + expert_offset_[r.e];
        for (int64_t i = 0; i < m; ++i)
            std::copy(ye_.begin() + (r.base + i) * d, ye_.begin() + (r.base + i + 1) * d, expert_out_.begin() + slots[i] * d);
    }
    return true;
}

// Gate and up, SiLU*mul, and the down projection's input quantized into act.
void Context::expert_up_on_one_thread(const ReadyExpert& r, int64_t n, int64_t ff, uint8_t* act) {
    const int64_t d = cfg_.n_embd;
    const int64_t m = expert_count_[r.e];
    const float* X = m == n ? h_.data() : xe_.data() + r.base * d;  // every token routed here: its rows are h_ itself
    float* g = ge_.data() + r.base * ff;
    float* u = ue_.data() + r.base * ff;
    const Matrix &gate = r.mats.gate, &up = r.mats.up;
    // No burst of prefetches here for up's and down's first 8 KiB (as there
    // was): 256 of them at the expert's start held the core's line-fill
    // buffers while its gate stream should start, and the lines were asked
    // ~15 us before use. Without it, host at 70-80 GB/s: decode 5% faster
    // (median of 12 alternating pairs, 10 ahead); slow host: the same.
    quantize_for(gate, X, m, act);
    if (m == 1 && same_shape(gate, up) && gate.type != kernels::WeightType::F32) {
        // One token (decode): gate's and up's rows together, two streams of
        // memory per core instead of one, the activations loaded once for
        // both (kernels::gemm_q_once_pair; the same bits). 1.2B make-model, 2 threads, in-process A/B (blocks of 16
        // tokens alternating, 40 rounds): decode Q4_0 +1.3% and +5.9% in two
        // runs (25 and 34 ahead), Q8_0 +4.3% (32 ahead).
        profiled(DecodeProfile::QuantWeights, 2 * static_cast<uint64_t>(gate.rows) * gate.row_bytes, [&] {
            kernels::gemm_q_once_pair(gate.type, gate.data, up.data, gate.row_bytes, gate.rows, act, gate.cols, g, u);
        });
    } else {
        rows_product(gate, X, act, m, 0, gate.rows, g, true);
        if (up.type != gate.type) quantize_for(up, X, m, act);  // the same activation rows otherwise
        rows_product(up, X, act, m, 0, up.rows, u, true);
    }
    ops::swiglu(g, u, g, m * ff);
    quantize_for(r.mats.down, g, m, act);
}

// Down rows of chunks [c0, c1) of expert r for all its tokens, from the input in act.
void Context::expert_down_rows(const ReadyExpert& r, int64_t ff, const uint8_t* act, int64_t c0, int64_t c1) {
    const Matrix& W = r.mats.down;
    const int64_t r0 = c0 * kDownChunkRows;
    rows_product(W, ge_.data() + r.base * ff, act, expert_count_[r.e], r0, std::min(W.rows, c1 * kDownChunkRows), r.out,
                 true);
}

// Chunks of expert i's down rows: for its owner (front) half of those left,
// at least one, so it streams long runs while a helper is still far away;
// for a helper (back) one chunk. Empty when none is left. The owner's runs
// shrink as the helper closes in, so the two still end within a chunk of
// each other. (One chunk per call before: the owner's 16 calls and stream
// starts per expert made its down rows ~10% slower than its gate rows.)
Context::Chunks Context::take_down_chunks(int64_t i, bool front) {
    Chunks c;
    const auto want = [front](int64_t left) { return front ? left / 2 : 1; };  // at least one (take_from_range)
    if (!cpu::take_from_range(down_chunks_[i], front, want, &c.begin, &c.end)) return {};
    return c;
}

// Whether any of expert i's down rows are still untaken.
bool Context::down_left(int64_t i) const { return !cpu::range_empty(down_chunks_[i].load(std::memory_order_relaxed)); }

void Context::quantize_for(const Matrix& W, const float* X, int64_t n, uint8_t* act) {
    if (W.type == kernels::WeightType::F32) return;  // f32 rows take X as it is
    const int64_t ab = kernels::activation_row_bytes(W.type, W.cols);
    for (int64_t t = 0; t < n; ++t) kernels::quantize_activation(W.type, X + t * W.cols, act + t * ab, W.cols);
}

void Context::rows_product(const Matrix& W, const float* X, const uint8_t* act, int64_t n, int64_t r0, int64_t r1,
                           float* Y, bool read_once) {
    if (W.type == kernels::WeightType::F32) {
        // One dot product per (row, token), the same call whatever n is, so a
        // token's result does not depend on the batch it is in.
        profiled(DecodeProfile::F32Weights, static_cast<uint64_t>(r1 - r0) * W.row_bytes, [&] {
            for (int64_t r = r0; r < r1; ++r) {
                const float* row = reinterpret_cast<const float*>(W.row(r));
                for (int64_t t = 0; t < n; ++t) Y[t * W.rows + r] = ops::dot_f32(row, X + t * W.cols, W.cols);
            }
        });
        return;
    }
    const int64_t ab = kernels::activation_row_bytes(W.type, W.cols);
    const auto gemm = read_once ? &kernels::gemm_q_once : &kernels::gemm_q;
    profiled(DecodeProfile::QuantWeights, static_cast<uint64_t>(r1 - r0) * W.row_bytes,
             [&] { gemm(W.type, W.row(r0), W.row_bytes, r1 - r0, act, ab, n, W.cols, Y + r0, W.rows); });
}

void Context::forward_chunk(const int32_t* tokens, int64_t n, const uint8_t* want, float* logits_out) {
    if (device_) {
        DeviceChunk chunk;
        chunk.tokens = tokens;
        chunk.n = n;
        chunk.seqs = tok_seq_.data();
        chunk.pos = tok_pos_.data();
        chunk.want = want;
        chunk.logits = logits_out;
        device_->run(chunk, *kv_, observer_, lookahead_);
        return;
    }
    const ModelConfig& c = cfg_;
    const ModelWeights& w = weights_;
    const int64_t d = c.n_embd;

    for (int64_t t = 0; t < n; ++t)
        kernels::dequantize_row(w.tok_embd.type, w.tok_embd.row(tokens[t]), x_.data() + t * d, d);
    rope_tables(c, tok_pos_.data(), n, c.n_rot, rope_cs_.data());

    for (const LayerWeights& L : w.layers) {
        if (L.index >= n_layers_run_) break;
        for (int64_t t = 0; t < n; ++t)
            ops::rmsnorm(x_.data() + t * d, L.attn_norm.data(), h_.data() + t * d, d, c.norm_eps);
        attention(L, n);
        for (int64_t i = 0; i < n * d; ++i) x_[i] += tmp_[i];
        if (lookahead_ && L.index + 1 < n_layers_run_ && w.layers[L.index + 1].ffn == FfnKind::Moe)
            lookahead(w.layers[L.index + 1], n);

        for (int64_t t = 0; t < n; ++t)
            ops::rmsnorm(x_.data() + t * d, L.ffn_norm.data(), h_.data() + t * d, d, c.norm_eps);
        if (L.ffn == FfnKind::Dense) {
            ffn_dense(L.dense, h_.data(), n, tmp_.data(), c.n_ff);
        } else {
            ffn_moe(L, n);
        }
        for (int64_t i = 0; i < n * d; ++i) x_[i] += tmp_[i];
    }
    if (!logits_out) return;

    int64_t rows = 0;
    for (int64_t t = 0; t < n; ++t)
        if (want[t]) ops::rmsnorm(x_.data() + t * d, w.output_norm.data(), h_.data() + (rows++) * d, d, c.norm_eps);
    matmul(w.output, h_.data(), rows, logits_out);
}

void Context::attention(const LayerWeights& L, int64_t n) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    const int64_t q_dim = c.n_head * hd;
    const int64_t kv_dim = c.n_head_kv * hd;
    if (c.mla) return attention_mla(L, n);
    // The fused one-token path knows neither sinks nor a sliding window (gpt-oss).
    const bool window = c.sliding_window(L.index);
    if (n == 1 && !activations_ && L.attn_sinks.empty() && !window)
        if (const Fused f = attention_fused_one_token(L); f != Fused::No)
            return output_projection(L, n, f == Fused::AttentionAndOutput);
    matmul_many({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, h_.data(), n);
    const bool neox = c.traits.rope == RopeType::NeoX;
    for (int64_t t = 0; t < n; ++t) {
        float* q = q_.data() + t * q_dim;
        float* k = k_.data() + t * kv_dim;
        float* v = v_.data() + t * kv_dim;
        if (!L.bq.empty()) ops::axpy(1.0f, L.bq.data(), q, q_dim);
        if (!L.bk.empty()) ops::axpy(1.0f, L.bk.data(), k, kv_dim);
        if (!L.bv.empty()) ops::axpy(1.0f, L.bv.data(), v, kv_dim);
        if (!L.q_norm.empty()) {
            if (c.traits.qk_norm == QkNorm::PerHead) {
                for (int64_t h = 0; h < c.n_head; ++h) ops::rmsnorm(q + h * hd, L.q_norm.data(), q + h * hd, hd, c.norm_eps);
                for (int64_t h = 0; h < c.n_head_kv; ++h) ops::rmsnorm(k + h * hd, L.k_norm.data(), k + h * hd, hd, c.norm_eps);
            } else {
                ops::rmsnorm(q, L.q_norm.data(), q, q_dim, c.norm_eps);
                ops::rmsnorm(k, L.k_norm.data(), k, kv_dim, c.norm_eps);
            }
        }
        const int64_t pos = tok_pos_[t];
        // The position's cos/sin table is the same in every layer: made once per chunk.
        const float* cs = rope_cs_.data() + t * c.n_rot;
        ops::rope_apply(q, c.n_head, hd, c.n_rot, cs, neox);
        ops::rope_apply(k, c.n_head_kv, hd, c.n_rot, cs, neox);
        kv_->write(tok_seq_[t], L.index, pos, k, v);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t group = c.n_head / c.n_head_kv;
    // Work items of `per_item` query heads that share a KV head: a whole group
    // runs on one thread (attend_group), so its keys and values come from
    // memory once and from that core's L1 for the rest of the group (+4.5%
    // decode on the 1.2B Q4_0 model at ~150 tokens of context, +10% at ~450,
    // for the group on one thread). With fewer groups than threads (one token
    // of a model with 1 or 2 KV heads) the heads are shared out one by one.
    const int64_t per_item = n * c.n_head_kv >= pool_->size() ? group : 1;
    pool_->parallel_for(n * c.n_head / per_item, 1, [&](int64_t b, int64_t e, int thread) {
        float* scores = score_scratch_.data() + static_cast<size_t>(thread * scores_per_thread_);
        for (int64_t item = b; item < e; ++item) {
            const int64_t th = item * per_item;  // the item's first (token, head)
            const int64_t t = th / c.n_head;
            const int64_t h = th % c.n_head;
            const int64_t n_keys = tok_pos_[t] + 1;  // causal, within the token's own sequence
            // A sliding-window layer sees the last n_swa positions, its own included.
            const int64_t first_key = window ? std::max<int64_t>(0, n_keys - c.n_swa) : 0;
            const float* sinks = L.attn_sinks.empty() ? nullptr : L.attn_sinks.data() + h;
            profiled(DecodeProfile::Attention, 0, [&] {
                kv_->attend_group(tok_seq_[t], L.index, h / group, q_.data() + t * q_dim + h * hd, per_item, n_keys, scale,
                                  scores, attn_.data() + t * q_dim + h * hd, -1, false, first_key, sinks);
            });
        }
    });
    output_projection(L, n);
}

// MLA in the latent space (DeepSeek-V2's "absorbed" attention, as llama.cpp
// and vLLM decode it). Per token: the compressed KV c = RMSNorm(attn_kv_a x)
// and the shared RoPE key k_r go into the cache as one row [c | k_r]. Head h's
// key would be [W_UK_h c | k_r] and its value W_UV_h c (attn_kv_b's rows);
// instead of expanding every cached row, the query moves: q_h . k_h =
// (W_UK_h^T q_nope_h) . c + q_rope_h . k_r, so the latent query
// [W_UK_h^T q_nope_h | q_rope_h] attends over the cached rows directly, its
// output o_h = sum_j p_j c_j stays latent, and W_UV_h o_h is the head's value.
// Prefill takes the same path (it is exact, only the summation order differs
// from the expanded form the reference computes).
void Context::attention_mla(const LayerWeights& L, int64_t n) {
    const ModelConfig& c = cfg_;
    const MlaConfig& m = c.mla;
    const int64_t H = c.n_head, r = m.kv_lora_rank, rot = c.n_rot, kl = m.key_length, vl = m.value_length;
    const int64_t nope = kl - rot;
    const int64_t row = c.head_dim;  // r + rot: a latent key, and a head's latent query
    if (L.wq_a) {
        matmul(L.wq_a, h_.data(), n, mla_qa_.data());
        for (int64_t t = 0; t < n; ++t) {
            float* qa = mla_qa_.data() + t * m.q_lora_rank;
            ops::rmsnorm(qa, L.q_a_norm.data(), qa, m.q_lora_rank, c.norm_eps);
        }
        matmul(L.wq, mla_qa_.data(), n, mla_q_.data());
    } else {
        matmul(L.wq, h_.data(), n, mla_q_.data());
    }
    matmul(L.wkv_a, h_.data(), n, k_.data());
    const bool round_latent = kernels::activation_type(L.wkv_b.type) != kernels::WeightType::F32 &&
                              kernels::activation_row_bytes(L.wkv_b.type, r) > 0;
    for (int64_t t = 0; t < n; ++t) {
        const float* cs = rope_cs_.data() + t * rot;
        float* kv = k_.data() + t * row;
        ops::rmsnorm(kv, L.kv_a_norm.data(), kv, r, c.norm_eps);
        if (round_latent) {
            // As attn_kv_b's product rounds its input (llama.cpp quantizes the
            // compressed KV for the quantized weights), so the cached row is
            // the one the expanded form would multiply.
            kernels::quantize_activation(L.wkv_b.type, kv, act_scratch_.data(), r);
            kernels::dequantize_activation(L.wkv_b.type, act_scratch_.data(), kv, r);
        }
        ops::rope_apply(kv + r, 1, rot, rot, cs, false);
        kv_->write(tok_seq_[t], L.index, tok_pos_[t], kv, kv);  // keys only: the row is also the value
        ops::rope_apply(mla_q_.data() + t * H * kl + nope, H, kl, rot, cs, false);  // each head's RoPE part
    }
    const float scale = c.attention_scale();
    // Items of per_item heads of one token: a token's heads all read the same
    // latent rows, so with a token per thread or more they go together.
    const int64_t per_item = n >= pool_->size() ? H : 1;
    pool_->parallel_for(n * H / per_item, 1, [&](int64_t b, int64_t e, int thread) {
        float* scores = score_scratch_.data() + static_cast<size_t>(thread * scores_per_thread_);
        for (int64_t item = b; item < e; ++item) {
            const int64_t th = item * per_item;
            const int64_t t = th / H, h0 = th % H;
            for (int64_t h = h0; h < h0 + per_item; ++h) {
                const float* qn = mla_q_.data() + (t * H + h) * kl;
                float* ql = q_.data() + (t * H + h) * row;
                const float* uk = L.mla_k_up_t->data() + h * r * nope;
                for (int64_t l = 0; l < r; ++l) ql[l] = ops::dot_f32(uk + l * nope, qn, nope);
                std::copy(qn + nope, qn + kl, ql + r);
            }
            float* out = attn_.data() + (t * H + h0) * row;
            profiled(DecodeProfile::Attention, 0, [&] {
                kv_->attend_group(tok_seq_[t], L.index, 0, q_.data() + (t * H + h0) * row, per_item, tok_pos_[t] + 1, scale,
                                  scores, out);
            });
            for (int64_t h = h0; h < h0 + per_item; ++h) {
                const float* o = attn_.data() + (t * H + h) * row;
                float* v = mla_v_.data() + (t * H + h) * vl;
                const float* uv = L.mla_v_up->data() + h * vl * r;
                for (int64_t j = 0; j < vl; ++j) v[j] = ops::dot_f32(uv + j * r, o, r);
            }
        }
    });
    matmul(L.wo, mla_v_.data(), n, tmp_.data());
    output_projection(L, n, /*product_done=*/true);
}

// tmp_ = attn_ x wo (+ bias); product_done: the product is in tmp_ already.
void Context::output_projection(const LayerWeights& L, int64_t n, bool product_done) {
    if (!product_done) matmul(L.wo, attn_.data(), n, tmp_.data());
    if (!L.bo.empty())
        for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, L.bo.data(), tmp_.data() + t * cfg_.n_embd, cfg_.n_embd);
}

// One token's attention in one region (instead of a QKV region, serial
// per-token work, an attention region, serial quantizing and a wo region),
// in phases that need no barrier between them:
//  1. the Q/K/V rows in memory order (attention_qkv_rows), each thread
//     streaming its own stretch of them from the front and, when that is
//     done, taking from the back of another's (cpu::OwnedRanges), so every
//     thread streams until the rows run out however unevenly the host runs
//     them, and its chunks continue one another;
//  2. per KV head, once all its rows are done: biases, norms and RoPE, its
//     K/V written to the cache, attention with its query heads, and (where
//     output_fuses) its part of the attention output quantized for wo;
//  3. (where output_fuses) once every head's part is quantized, wo's rows
//     into tmp_, split as in phase 1.
// Whole KV heads per thread before: the threads ended up to ~13% of the
// region apart. Then shrinking chunks from one shared cursor, in KV-head
// order: each thread's next chunk started where the other's had ended, a new
// stream each time (the 1.2B Q4_0 model, 2 threads, in-process A/B, blocks of
// 16 tokens alternating: decode +0.6..1.8% with the owned stretches, median
// round ratios of 7 runs, 24..40 of 40..60 rounds ahead). Every value is
// computed as in the general path (gemm_q is batch-invariant, the per-head
// ops act on each head alone, and quantizing is per block), so the same bits.
// No (nothing done) where this does not apply: one thread, Q/K/V of
// different types or in f32, or a Q/K norm over the whole vector.
Context::Fused Context::attention_fused_one_token(const LayerWeights& L) {
    const ModelConfig& c = cfg_;
    if (pool_->size() < 2) return Fused::No;
    const kernels::WeightType type = L.wq.type;
    if (type == kernels::WeightType::F32 || L.wk.type != type || L.wv.type != type) return Fused::No;
    if (!L.q_norm.empty() && c.traits.qk_norm != QkNorm::PerHead) return Fused::No;
    uint8_t* xq = act_scratch_.data();
    kernels::quantize_activation(type, h_.data(), xq, c.n_embd);
    const kv::KvCache::Row row = kv_->row(tok_seq_[0], tok_pos_[0]);  // throws here, not on a worker
    const int64_t group_dims = c.n_head / c.n_head_kv * c.head_dim;  // one KV head's query group
    const int64_t per_head = group_dims + 2 * c.head_dim;           // its Q, K and V rows
    const int64_t total = c.n_head_kv * per_head;
    const int64_t parts = pool_->size();
    const bool wo_here = output_fuses(L);
    // wo's input after the Q/K/V input (act_scratch_ holds n_batch >= 1 rows of the widest matrix in floats).
    uint8_t* xo = xq + ((kernels::activation_row_bytes(type, c.n_embd) + 63) & ~int64_t{63});
    attend_next_.store(0, std::memory_order_relaxed);
    attended_.store(0, std::memory_order_relaxed);
    for (int64_t g = 0; g < c.n_head_kv; ++g) qkv_done_[g].store(0, std::memory_order_relaxed);
    qkv_rows_->reset(total, grain_rows_);
    wo_rows_->reset(L.wo.rows, grain_rows_);
    pool_->parallel_for(parts, 1, [&](int64_t, int64_t, int thread) {
        for (int64_t r0, r1; qkv_rows_->take(thread, &r0, &r1);) attention_qkv_rows(L, xq, r0, r1);
        float* scores = score_scratch_.data() + static_cast<size_t>(thread * scores_per_thread_);
        // Each KV head claims the next one before it starts, and its last
        // steps ask for that head's first pieces (KvCache::attend_group), so
        // the next head does not start with nothing in flight. (Claiming the
        // first head at the region's start too, and asking for its pieces
        // then, gained nothing: that burst met the Q/K/V stream's start.)
        bool asked = false;
        int64_t head = attend_next_.fetch_add(1, std::memory_order_relaxed);
        for (int64_t next; head < c.n_head_kv; head = next) {
            next = attend_next_.fetch_add(1, std::memory_order_relaxed);
            wait_until([&] { return qkv_done_[head].load(std::memory_order_acquire) >= per_head; });
            attention_kv_group(L, head, row, scores, next < c.n_head_kv ? next : -1, asked);
            asked = next < c.n_head_kv;
            if (!wo_here) continue;
            const int64_t d0 = head * group_dims;
            kernels::quantize_activation(L.wo.type, attn_.data() + d0, xo + kernels::activation_row_bytes(L.wo.type, d0),
                                         group_dims);
            attended_.fetch_add(1, std::memory_order_release);
        }
        if (!wo_here) return;
        wait_until([&] { return attended_.load(std::memory_order_acquire) >= c.n_head_kv; });
        for (int64_t r0, r1; wo_rows_->take(thread, &r0, &r1);) rows_product(L.wo, attn_.data(), xo, 1, r0, r1, tmp_.data());
    });
    return wo_here ? Fused::AttentionAndOutput : Fused::Attention;
}

// Whether the one-token attention region also runs wo (its phase 3): a
// quantized wo whose activation blocks do not straddle query groups, so
// each group's part of the attention output quantizes on its own.
bool Context::output_fuses(const LayerWeights& L) const {
    const kernels::WeightType t = L.wo.type;
    if (t == kernels::WeightType::F32 || !kernels::has_kernels(t)) return false;
    const int64_t group_dims = cfg_.n_head / cfg_.n_head_kv * cfg_.head_dim;
    return kernels::activation_row_bytes(t, group_dims) > 0 && L.wo.cols == cfg_.n_head * cfg_.head_dim;
}

// Rows [r0, r1) of Q, K and V in memory order (wq's rows, then wk's, then
// wv's; ResidentWeights lays them out in that order, a few KiB apart), and
// to each KV head its rows among them.
void Context::attention_qkv_rows(const LayerWeights& L, const uint8_t* xq, int64_t r0, int64_t r1) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim, group_dims = c.n_head / c.n_head_kv * hd;
    const int64_t nq = L.wq.rows, nk = L.wk.rows;
    const struct Piece {
        const Matrix* W;
        int64_t begin, per_head;
        float* out;
    } pieces[3] = {{&L.wq, 0, group_dims, q_.data()}, {&L.wk, nq, hd, k_.data()}, {&L.wv, nq + nk, hd, v_.data()}};
    for (const Piece& p : pieces) {
        const int64_t lo = std::max(r0, p.begin) - p.begin, hi = std::min(r1, p.begin + p.W->rows) - p.begin;
        if (lo >= hi) continue;
        rows_product(*p.W, h_.data(), xq, 1, lo, hi, p.out);
        for (int64_t g = lo / p.per_head; g * p.per_head < hi; ++g) {
            const int64_t done = std::min(hi, (g + 1) * p.per_head) - std::max(lo, g * p.per_head);
            qkv_done_[g].fetch_add(done, std::memory_order_release);
        }
    }
}

// KV head g of one token, once its Q/K/V rows are done: biases, per-head
// norms, RoPE, its K/V into the cache, attention with its query group.
void Context::attention_kv_group(const LayerWeights& L, int64_t g, kv::KvCache::Row row, float* scores, int64_t next_g,
                                 bool asked) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    const int64_t group = c.n_head / c.n_head_kv;
    const int64_t q0 = g * group * hd, k0 = g * hd;  // this group's first Q row, its K/V rows
    float* q = q_.data() + q0;
    float* k = k_.data() + k0;
    float* v = v_.data() + k0;
    if (!L.bq.empty()) ops::axpy(1.0f, L.bq.data() + q0, q, group * hd);
    if (!L.bk.empty()) ops::axpy(1.0f, L.bk.data() + k0, k, hd);
    if (!L.bv.empty()) ops::axpy(1.0f, L.bv.data() + k0, v, hd);
    if (!L.q_norm.empty()) {  // per head (attention_fused_one_token checked)
        for (int64_t h = 0; h < group; ++h) ops::rmsnorm(q + h * hd, L.q_norm.data(), q + h * hd, hd, c.norm_eps);
        ops::rmsnorm(k, L.k_norm.data(), k, hd, c.norm_eps);
    }
    const bool neox = c.traits.rope == RopeType::NeoX;
    ops::rope_apply(q, group, hd, c.n_rot, rope_cs_.data(), neox);
    ops::rope_apply(k, 1, hd, c.n_rot, rope_cs_.data(), neox);
    kv_->write_head(row, L.index, g, k, v);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t n_keys = tok_pos_[0] + 1;
    profiled(DecodeProfile::Attention, 0, [&] {
        kv_->attend_group(tok_seq_[0], L.index, g, q, group, n_keys, scale, scores, attn_.data() + q0, next_g, asked);
    });
}

Context::ExpertBias Context::expert_bias(const LayerWeights& L, int32_t e) const {
    ExpertBias b;
    if (L.expert_bias_gate.empty()) return b;
    const auto ff = static_cast<size_t>(L.n_ff_expert), d = static_cast<size_t>(cfg_.n_embd);
    b.gate = L.expert_bias_gate.data() + static_cast<size_t>(e) * ff;
    b.up = L.expert_bias_up.data() + static_cast<size_t>(e) * ff;
    b.down = L.expert_bias_down.data() + static_cast<size_t>(e) * d;
    return b;
}

void Context::ffn_dense(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff, const ExpertBias* bias) {
    matmul_many({{&f.gate, ge_.data()}, {&f.up, ue_.data()}}, x, n);
    if (!bias) {
        ops::swiglu(ge_.data(), ue_.data(), ge_.data(), n * ff);
        matmul(f.down, ge_.data(), n, y);
        return;
    }
    // gpt-oss: biases on gate, up and down around the clamped SwiGLU.
    const int64_t d = f.down.rows;
    for (int64_t t = 0; t < n; ++t) {
        ops::axpy(1.0f, bias->gate, ge_.data() + t * ff, ff);
        ops::axpy(1.0f, bias->up, ue_.data() + t * ff, ff);
    }
    ops::swiglu_oai(ge_.data(), ue_.data(), ge_.data(), n * ff, 1.702f, 7.0f);
    matmul(f.down, ge_.data(), n, y);
    for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, bias->down, y + t * d, d);
}

void Context::lookahead(const LayerWeights& next, int64_t n) {
    const int64_t d = cfg_.n_embd;
    const int64_t E = cfg_.n_expert;
    look_h_.resize(static_cast<size_t>(n * d));
    look_probs_.resize(static_cast<size_t>(n * E));
    for (int64_t t = 0; t < n; ++t)
        ops::rmsnorm(x_.data() + t * d, next.ffn_norm.data(), look_h_.data() + t * d, d, cfg_.norm_eps);
    matmul(next.router, look_h_.data(), n, look_probs_.data());
    for (int64_t t = 0; t < n; ++t) {
        float* p = look_probs_.data() + t * E;
        if (!next.router_bias.empty()) ops::axpy(1.0f, next.router_bias.data(), p, E);
        ops::softmax(p, E);
        lookahead_(LookaheadEvent{next.index, tok_pos_[t], p, E, tok_seq_[t]});
    }
}

// deepseek2 routing, as llama.cpp computes it: probabilities p by softmax
// (V2) or sigmoid (V3) of the router logits; the top-k chosen by p plus the
// selection bias exp_probs_b where the file has one (V3), among the experts
// of the best n_group_used groups where the file has groups (a group's score:
// the sum of its two best, or with softmax its best); each chosen expert
// weighted by p itself. probs: the logits in, p out.
void Context::route_deepseek(const LayerWeights& L, float* probs, const uint8_t* allowed, int32_t* ids, float* w) {
    const ModelConfig& c = cfg_;
    const int64_t E = c.n_expert, U = n_used_;
    if (c.gating == Gating::Sigmoid) {
        for (int64_t e = 0; e < E; ++e) probs[e] = 1.0f / (1.0f + std::exp(-probs[e]));
    } else {
        ops::softmax(probs, E);
    }
    float* sel = route_select_.data();
    constexpr float kOut = -std::numeric_limits<float>::infinity();
    for (int64_t e = 0; e < E; ++e) {
        sel[e] = probs[e] + (L.router_select_bias.empty() ? 0.0f : L.router_select_bias[static_cast<size_t>(e)]);
        if (allowed && !allowed[e]) sel[e] = kOut;
    }
    if (c.n_expert_groups > 1 && c.n_group_used < c.n_expert_groups) {
        const int64_t G = c.n_expert_groups, per = E / G;
        float group_score[256];
        const int64_t groups = std::min<int64_t>(G, 256);
        for (int64_t g = 0; g < groups; ++g) {
            float best = kOut, second = kOut;
            for (int64_t e = g * per; e < (g + 1) * per; ++e) {
                if (sel[e] > best) {
                    second = best;
                    best = sel[e];
                } else if (sel[e] > second) {
                    second = sel[e];
                }
            }
            group_score[g] = c.gating == Gating::Sigmoid ? best + second : best;
        }
        // Keep the n_group_used best groups (ties: the lower index), mask the rest.
        uint8_t keep[256] = {};
        for (int64_t k = 0; k < c.n_group_used; ++k) {
            int64_t arg = -1;
            for (int64_t g = 0; g < groups; ++g)
                if (!keep[g] && (arg < 0 || group_score[g] > group_score[arg])) arg = g;
            keep[arg] = 1;
        }
        for (int64_t g = 0; g < groups; ++g)
            if (!keep[g])
                for (int64_t e = g * per; e < (g + 1) * per; ++e) sel[e] = kOut;
    }
    for (int64_t k = 0; k < U; ++k) {
        int64_t arg = -1;
        for (int64_t e = 0; e < E; ++e)
            if (sel[e] != kOut && (arg < 0 || sel[e] > sel[arg])) arg = e;
        if (arg < 0) {  // fewer allowed experts than it uses (a resident-only draft)
            ids[k] = -1;
            w[k] = 0.0f;
            continue;
        }
        ids[k] = static_cast<int32_t>(arg);
        w[k] = probs[arg];
        sel[arg] = kOut;
    }
}

void Context::ffn_moe(const LayerWeights& L, int64_t n) {
    const ModelConfig& c = cfg_;
    const int64_t d = c.n_embd;
    const int64_t E = c.n_expert;
    const int64_t U = n_used_;

    // Route: softmax over all experts, top-k, optional renormalisation and scale.
    matmul(L.router, h_.data(), n, router_logits_.data());
    if (!L.router_bias.empty())
        for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, L.router_bias.data(), router_logits_.data() + t * E, E);
    std::fill(expert_count_.begin(), expert_count_.end(), 0);
    // A resident-only draft routes among the experts in fast memory; where
    // fewer are resident than it uses, the missing ranks are left empty (id
    // -1, weight 0) rather than loaded.
    const uint8_t* allowed = nullptr;
    if (resident_only_) {
        resident_mask_.resize(static_cast<size_t>(E));
        experts_->resident_mask(L.index, resident_mask_.data(), E);
        allowed = resident_mask_.data();
    }
    for (int64_t t = 0; t < n; ++t) {
        float* p = router_logits_.data() + t * E;
        int32_t* ids = route_ids_.data() + t * U;
        float* wts = route_w_.data() + t * U;
        if (!route_select_.empty()) route_deepseek(L, p, allowed, ids, wts);
        else ops::router_topk(p, E, U, allowed, ids, wts);
        int64_t used = 0;
        for (int64_t k = 0; k < U; ++k) used += ids[k] >= 0;
        if (c.expert_weights_norm && used > 0) {
            float sum = 0.0f;
            for (int64_t k = 0; k < U; ++k) sum += wts[k];
            for (int64_t k = 0; k < U; ++k) wts[k] /= sum;
        }
        for (int64_t k = 0; k < U; ++k) {
            wts[k] *= c.expert_weights_scale;
            if (ids[k] >= 0) ++expert_count_[ids[k]];
        }
        if (observer_) observer_(RoutingEvent{L.index, tok_pos_[t], ids, wts, used, p, E, tok_seq_[t]});
    }

    // Group tokens by expert so each expert runs once over all its tokens.
    expert_offset_[0] = 0;
    for (int64_t e = 0; e < E; ++e) expert_offset_[e + 1] = expert_offset_[e] + expert_count_[e];
    std::fill(expert_count_.begin(), expert_count_.end(), 0);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k) {
            const int32_t e = route_ids_[t * U + k];
            if (e >= 0) expert_tokens_[expert_offset_[e] + expert_count_[e]++] = static_cast<int32_t>(t * U + k);
        }

    // Each chosen expert runs once over all its tokens, in the order the
    // provider hands them over (resident first, the rest as they load).
    needed_.clear();
    for (int32_t e = 0; e < E; ++e)
        if (expert_count_[e] > 0) needed_.push_back(e);
    experts_->demand(L.index, needed_);
    // Expert outputs land in per-(token, rank) rows and are summed in rank
    // order afterwards, so the result does not depend on the order in which
    // experts became resident: a cached run equals a fully resident one bit
    // for bit (and the sum follows the router's ranking, as ggml's does).
    // Few tokens per expert (decode, small batches, short prompts): every
    // ready expert in one region. Past ~8 tokens an expert on average, one
    // thread's pass over an expert's rows per 4 tokens costs more than
    // splitting each expert's rows between the threads (ffn_moe_experts_each):
    // 1.2B make-model, 2 threads, in-process A/B of the fused region against
    // _each (blocks of 3 prefills alternating, 10 rounds): 32 tokens +2% Q8_0
    // and +11% Q4_0, 64 tokens +1..7% and +5..8%, 128 tokens -2% and +4%,
    // 256 tokens -9% and -5%.
    // gpt-oss's biased experts take the plain path (the fused ones know no biases).
    if (!activations_ && L.expert_bias_gate.empty() && n * U <= n_batch_ && (n <= 8 || n * U <= kFusedRowsPerExpert * E))
        ffn_moe_experts_small(L, n);
    else ffn_moe_experts_each(L, n);
    std::fill(tmp_.begin(), tmp_.begin() + n * d, 0.0f);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k)
            if (route_ids_[t * U + k] >= 0)
                ops::axpy(route_w_[t * U + k], expert_out_.data() + (t * U + k) * d, tmp_.data() + t * d, d);

    if (L.has_shared_expert()) {
        ffn_dense(L.shared, h_.data(), n, ye_.data(), L.shared.gate.rows);
        for (int64_t t = 0; t < n; ++t) {
            float g = 1.0f;
            if (!L.shared_gate.empty()) g = 1.0f / (1.0f + std::exp(-ops::dot_f32(L.shared_gate.data(), h_.data() + t * d, d)));
            ops::axpy(g, ye_.data() + t * d, tmp_.data() + t * d, d);
        }
    }
}

}  // namespace strata::model
