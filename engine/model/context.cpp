#include "model/context.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "backend/cpu/thread_pool.h"
#include "common/error.h"
#include "kernels/quant.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"

namespace strata::model {

namespace ops = kernels::ops;  // SIMD where the CPU has it, else the scalar reference

namespace {
int64_t max_expert_ff(const ModelConfig& c) { return std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}}); }
}  // namespace

Context::Context(const Model& model, const ContextParams& params, const ModelWeights* weights, ExpertProvider* experts)
    : model_(model),
      cfg_(model.config()),
      weights_(weights ? *weights : model.weights()),
      mapped_(weights_),
      experts_(experts ? experts : &mapped_) {
    const ModelConfig& c = cfg_;
    n_ctx_ = params.n_ctx > 0 ? params.n_ctx : std::min<int64_t>(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096);
    n_batch_ = std::max<int64_t>(1, std::min(params.n_batch, n_ctx_));
    int threads = params.n_threads > 0 ? params.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    pool_ = std::make_unique<cpu::ThreadPool>(std::max(1, threads));

    const int64_t q_dim = c.n_head * c.head_dim;
    const int64_t kv_dim = c.n_head_kv * c.head_dim;
    const int64_t ff = max_expert_ff(c);
    const size_t B = static_cast<size_t>(n_batch_);
    k_cache_.assign(static_cast<size_t>(c.n_layer * n_ctx_ * kv_dim), 0.0f);
    v_cache_.assign(k_cache_.size(), 0.0f);
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
    max_cols_ = std::max({c.n_embd, q_dim, ff});
    row_scratch_.resize(static_cast<size_t>(pool_->size() * max_cols_));
    act_scratch_.resize(B * static_cast<size_t>(max_cols_) * sizeof(float));
    score_scratch_.resize(static_cast<size_t>(pool_->size() * n_ctx_));
}

Context::~Context() = default;

void Context::truncate(int64_t n) {
    if (n < 0 || n > n_past_) throw Error("cannot truncate the context to " + std::to_string(n) + " tokens: it holds " + std::to_string(n_past_));
    n_past_ = n;
}

const float* Context::decode(std::span<const int32_t> tokens, bool all_logits) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0) throw Error("decode called with no tokens");
    if (n_past_ + n > n_ctx_) {
        throw Error("context is full: " + std::to_string(n_past_) + " tokens cached + " + std::to_string(n) +
                    " new > context size " + std::to_string(n_ctx_) + "; start a new conversation or raise the context size");
    }
    for (int64_t i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= cfg_.n_vocab) {
            throw Error("token id " + std::to_string(tokens[i]) + " is out of range (vocabulary has " +
                        std::to_string(cfg_.n_vocab) + " tokens)");
        }
    }
    if (step_begin_) step_begin_(n);
    const auto t0 = std::chrono::steady_clock::now();
    const size_t rows = static_cast<size_t>(all_logits ? n : 1);
    if (logits_.size() < rows * cfg_.n_vocab) logits_.resize(rows * cfg_.n_vocab);
    for (int64_t done = 0; done < n; done += n_batch_) {
        const int64_t chunk = std::min(n_batch_, n - done);
        const bool last = done + chunk == n;
        float* out = all_logits ? logits_.data() + done * cfg_.n_vocab : (last ? logits_.data() : nullptr);
        forward_chunk(tokens.data() + done, chunk, all_logits, out);
    }
    if (step_) step_(n, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return logits_.data();
}

uint64_t Context::scratch_bytes() const {
    size_t floats = x_.size() + h_.size() + q_.size() + k_.size() + v_.size() + attn_.size() + tmp_.size() +
                    router_logits_.size() + route_w_.size() + expert_out_.size() + xe_.size() + ge_.size() + ue_.size() + ye_.size() +
                    shared_gate_.size() + row_scratch_.size() + score_scratch_.size() + logits_.capacity();
    return floats * sizeof(float) + act_scratch_.size() + (route_ids_.size() + expert_count_.size() + expert_offset_.size() +
                                     expert_tokens_.size()) * sizeof(int32_t);
}

void Context::matmul(const Matrix& W, const float* X, int64_t n, float* Y) {
    const int64_t rows = W.rows;
    const int64_t cols = W.cols;
    const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(64, rows / (4 * pool_->size()) + 1));
    if (kernels::activation_type(W.type) == kernels::WeightType::F32) {
        pool_->parallel_for(rows, grain, [&](int64_t r0, int64_t r1, int thread) {
            if (n == 1) {
                for (int64_t r = r0; r < r1; ++r) Y[r] = kernels::dot_row(W.type, W.row(r), X, cols);
                return;
            }
            // Several tokens: read each row once, reuse it for all of them.
            float* row = row_scratch_.data() + static_cast<size_t>(thread) * max_cols_;
            for (int64_t r = r0; r < r1; ++r) {
                kernels::dequantize_row(W.type, W.row(r), row, cols);
                for (int64_t t = 0; t < n; ++t) Y[t * rows + r] = ops::dot_f32(row, X + t * cols, cols);
            }
        });
        return;
    }
    // Quantized and half-precision weights: quantize each activation row once
    // to the weight type's partner format (Q8_0, Q8_1, Q8_K, F16, BF16), as
    // ggml does, and use integer block dot products.
    const int64_t ab = kernels::activation_row_bytes(W.type, cols);
    uint8_t* xq = act_scratch_.data();
    for (int64_t t = 0; t < n; ++t) kernels::quantize_activation(W.type, X + t * cols, xq + t * ab, cols);
    // gemm_q keeps each weight block in registers across the tokens, so a
    // prompt chunk reads every weight once; its result for a (row, token)
    // does not depend on the tiling.
    const int64_t qgrain = std::max<int64_t>(grain, 16);
    pool_->parallel_for(rows, qgrain, [&](int64_t r0, int64_t r1, int) {
        kernels::gemm_q(W.type, W.row(r0), W.row_bytes, r1 - r0, xq, ab, n, cols, Y + r0, rows);
    });
}

void Context::forward_chunk(const int32_t* tokens, int64_t n, bool all_logits, float* logits_out) {
    const ModelConfig& c = cfg_;
    const ModelWeights& w = weights_;
    const int64_t d = c.n_embd;

    for (int64_t t = 0; t < n; ++t)
        kernels::dequantize_row(w.tok_embd.type, w.tok_embd.row(tokens[t]), x_.data() + t * d, d);

    for (const LayerWeights& L : w.layers) {
        for (int64_t t = 0; t < n; ++t)
            ops::rmsnorm(x_.data() + t * d, L.attn_norm.data(), h_.data() + t * d, d, c.norm_eps);
        attention(L, n);
        for (int64_t i = 0; i < n * d; ++i) x_[i] += tmp_[i];
        if (lookahead_ && L.index + 1 < c.n_layer && w.layers[L.index + 1].ffn == FfnKind::Moe)
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
    n_past_ += n;
    if (!logits_out) return;

    const int64_t first = all_logits ? 0 : n - 1;
    const int64_t rows = n - first;
    for (int64_t t = first; t < n; ++t)
        ops::rmsnorm(x_.data() + t * d, w.output_norm.data(), h_.data() + (t - first) * d, d, c.norm_eps);
    matmul(w.output, h_.data(), rows, logits_out);
}

void Context::attention(const LayerWeights& L, int64_t n) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    const int64_t q_dim = c.n_head * hd;
    const int64_t kv_dim = c.n_head_kv * hd;
    matmul(L.wq, h_.data(), n, q_.data());
    matmul(L.wk, h_.data(), n, k_.data());
    matmul(L.wv, h_.data(), n, v_.data());
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
        const int64_t pos = n_past_ + t;
        ops::rope(q, c.n_head, hd, c.n_rot, pos, c.rope_freq_base, c.rope_freq_scale, neox);
        ops::rope(k, c.n_head_kv, hd, c.n_rot, pos, c.rope_freq_base, c.rope_freq_scale, neox);
        const size_t at = static_cast<size_t>((L.index * n_ctx_ + pos) * kv_dim);
        std::copy(k, k + kv_dim, k_cache_.begin() + at);
        std::copy(v, v + kv_dim, v_cache_.begin() + at);
    }

    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t group = c.n_head / c.n_head_kv;
    const float* K = k_cache_.data() + L.index * n_ctx_ * kv_dim;
    const float* V = v_cache_.data() + L.index * n_ctx_ * kv_dim;
    pool_->parallel_for(n * c.n_head, 1, [&](int64_t b, int64_t e, int thread) {
        float* scores = score_scratch_.data() + static_cast<size_t>(thread) * n_ctx_;
        for (int64_t th = b; th < e; ++th) {
            const int64_t t = th / c.n_head;
            const int64_t h = th % c.n_head;
            const int64_t kvh = h / group;
            const int64_t n_keys = n_past_ + t + 1;  // causal
            const float* q = q_.data() + t * q_dim + h * hd;
            for (int64_t j = 0; j < n_keys; ++j) scores[j] = ops::dot_f32(q, K + j * kv_dim + kvh * hd, hd) * scale;
            ops::softmax(scores, n_keys);
            float* out = attn_.data() + t * q_dim + h * hd;
            std::fill(out, out + hd, 0.0f);
            for (int64_t j = 0; j < n_keys; ++j) ops::axpy(scores[j], V + j * kv_dim + kvh * hd, out, hd);
        }
    });
    matmul(L.wo, attn_.data(), n, tmp_.data());
    if (!L.bo.empty())
        for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, L.bo.data(), tmp_.data() + t * c.n_embd, c.n_embd);
}

void Context::ffn_dense(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff) {
    matmul(f.gate, x, n, ge_.data());
    matmul(f.up, x, n, ue_.data());
    ops::swiglu(ge_.data(), ue_.data(), ge_.data(), n * ff);
    matmul(f.down, ge_.data(), n, y);
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
        ops::softmax(p, E);
        lookahead_(LookaheadEvent{next.index, n_past_ + t, p, E});
    }
}

void Context::ffn_moe(const LayerWeights& L, int64_t n) {
    const ModelConfig& c = cfg_;
    const int64_t d = c.n_embd;
    const int64_t E = c.n_expert;
    const int64_t U = c.n_expert_used;

    // Route: softmax over all experts, top-k, optional renormalisation and scale.
    matmul(L.router, h_.data(), n, router_logits_.data());
    std::fill(expert_count_.begin(), expert_count_.end(), 0);
    for (int64_t t = 0; t < n; ++t) {
        float* p = router_logits_.data() + t * E;
        ops::softmax(p, E);
        int32_t* ids = route_ids_.data() + t * U;
        float* wts = route_w_.data() + t * U;
        for (int64_t k = 0; k < U; ++k) {
            int32_t best = -1;
            for (int32_t e = 0; e < E; ++e) {
                bool taken = false;
                for (int64_t j = 0; j < k; ++j) taken |= ids[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ids[k] = best;
            wts[k] = p[best];
        }
        if (c.expert_weights_norm) {
            float sum = 0.0f;
            for (int64_t k = 0; k < U; ++k) sum += wts[k];
            for (int64_t k = 0; k < U; ++k) wts[k] /= sum;
        }
        for (int64_t k = 0; k < U; ++k) {
            wts[k] *= c.expert_weights_scale;
            ++expert_count_[ids[k]];
        }
        if (observer_) observer_(RoutingEvent{L.index, n_past_ + t, ids, wts, U, p, E});
    }

    // Group tokens by expert so each expert runs once over all its tokens.
    expert_offset_[0] = 0;
    for (int64_t e = 0; e < E; ++e) expert_offset_[e + 1] = expert_offset_[e] + expert_count_[e];
    std::fill(expert_count_.begin(), expert_count_.end(), 0);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k) {
            const int32_t e = route_ids_[t * U + k];
            expert_tokens_[expert_offset_[e] + expert_count_[e]++] = static_cast<int32_t>(t * U + k);
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
    FfnMatrices mats;
    for (int32_t e; (e = experts_->take(L.index, &mats)) >= 0;) {
        const int64_t m = expert_count_[e];
        const int32_t* slots = expert_tokens_.data() + expert_offset_[e];
        for (int64_t i = 0; i < m; ++i) {
            const int64_t t = slots[i] / U;
            std::copy(h_.begin() + t * d, h_.begin() + (t + 1) * d, xe_.begin() + i * d);
        }
        ffn_dense(mats, xe_.data(), m, ye_.data(), L.n_ff_expert);
        experts_->release(L.index, e);
        for (int64_t i = 0; i < m; ++i)
            std::copy(ye_.begin() + i * d, ye_.begin() + (i + 1) * d, expert_out_.begin() + slots[i] * d);
    }
    std::fill(tmp_.begin(), tmp_.begin() + n * d, 0.0f);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k)
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
