#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "common/error.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/tuning.h"
#include "model/expert_provider.h"

namespace strata::model {

namespace ops = kernels::ops;  // SIMD where the CPU has it, else the scalar reference

namespace {
int64_t max_expert_ff(const ModelConfig& c) { return std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}}); }
}  // namespace

CpuBackend::CpuBackend(const ModelConfig& c, const CpuBackendParams& p) : cfg_(c) {
    n_batch_ = std::max<int64_t>(1, p.n_batch);
    grain_rows_ = kernels::kernel_tuning().grain_rows;
    const int threads = p.n_threads > 0 ? p.n_threads : static_cast<int>(std::thread::hardware_concurrency());
    pool_ = p.pool ? p.pool : std::make_shared<cpu::ThreadPool>(std::max(1, threads), p.cpus);
    qkv_rows_ = std::make_unique<cpu::OwnedRanges>(pool_->size());
    wo_rows_ = std::make_unique<cpu::OwnedRanges>(pool_->size());

    const int64_t q_dim = c.n_head * c.head_dim;
    const int64_t kv_dim = c.n_head_kv * c.head_dim;
    const int64_t ff = max_expert_ff(c);
    const size_t B = static_cast<size_t>(n_batch_);
    batch_.reserve(static_cast<size_t>(2 * std::max<int64_t>(c.n_expert, 1) + 4));
    batch_start_.reserve(static_cast<size_t>(2 * std::max<int64_t>(c.n_expert, 1) + 5));
    ready_.reserve(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    down_ready_ = std::make_unique<std::atomic<uint32_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    down_chunks_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    qkv_done_ = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(std::max<int64_t>(c.n_head_kv, 1)));
    rope_cs_.resize(B * static_cast<size_t>(std::max<int64_t>(c.n_rot, 2)));
    ones_.assign(static_cast<size_t>(c.head_dim), 1.0f);
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
    max_cols_ = std::max({c.n_embd, q_dim, ff, c.mla.q_lora_rank, c.n_head * c.mla.value_length, c.ssm.value_dim()});
    if (c.ssm) {
        dn_mixed_.resize(B * c.ssm.channels());
        dn_z_.resize(B * c.ssm.value_dim());
        dn_beta_.resize(B * c.ssm.n_v_heads);
        dn_alpha_.resize(B * c.ssm.n_v_heads);
        dn_conv_.resize(static_cast<size_t>(c.ssm.channels()));
        dn_o_.resize(B * c.ssm.value_dim());
    }
    if (c.traits.attention_output_gate) {
        q_gate_.resize(B * 2 * q_dim);
        gate_.resize(B * q_dim);
    }
    if (c.mla) {
        mla_qa_.resize(B * c.mla.q_lora_rank);
        mla_q_.resize(B * c.n_head * c.mla.key_length);
        mla_v_.resize(B * c.n_head * c.mla.value_length);
    }
    if (c.n_expert > 0) route_select_.resize(E);  // scored routing's choice
    act_scratch_.resize(B * static_cast<size_t>(max_cols_) * sizeof(float));
    // Per thread: the scores of a KV head's query group (attend_group).
    scores_per_thread_ = std::max<int64_t>(1, p.n_ctx) * std::max<int64_t>(1, c.n_head / std::max<int64_t>(1, c.n_head_kv));
    score_scratch_.resize(static_cast<size_t>(pool_->size() * scores_per_thread_));
}

CpuBackend::~CpuBackend() = default;

uint64_t CpuBackend::scratch_bytes() const {
    size_t floats = x_.size() + h_.size() + q_.size() + k_.size() + v_.size() + attn_.size() + tmp_.size() +
                    router_logits_.size() + route_w_.size() + expert_out_.size() + xe_.size() + ge_.size() + ue_.size() +
                    ye_.size() + score_scratch_.size() + mla_qa_.size() + mla_q_.size() + mla_v_.size() +
                    dn_mixed_.size() + dn_z_.size() + dn_beta_.size() + dn_alpha_.size() + dn_conv_.size() +
                    dn_o_.size() + q_gate_.size() + gate_.size() +
                    route_select_.size() + rope_cs_.size();
    return floats * sizeof(float) + act_scratch_.size() +
           (route_ids_.size() + expert_count_.size() + expert_offset_.size() + expert_tokens_.size()) * sizeof(int32_t);
}

void CpuBackend::set_profile(DecodeProfile* p) {
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

float* CpuBackend::act(Act a) {
    switch (a) {
        case Act::Residual: return x_.data();
        case Act::Normed: return h_.data();
        case Act::Out: return tmp_.data();
    }
    return nullptr;
}

void CpuBackend::read(Act a, float* host) {
    const float* x = act(a);
    std::copy(x, x + n_ * cfg_.n_embd, host);
}

void CpuBackend::write(Act a, const float* host) { std::copy(host, host + n_ * cfg_.n_embd, act(a)); }

void CpuBackend::begin(const Step& step) {
    if (step.n > n_batch_) throw Error("a step of " + std::to_string(step.n) + " tokens exceeds the backend's batch of " + std::to_string(n_batch_));
    step_ = step;
    n_ = step.n;
    kv_ = step.kv;
    provider_ = step.experts;
    n_used_ = step.n_expert_used;
    // The position's cos/sin table is the same in every layer: made once per step.
    rope_tables(cfg_, step.pos, n_, cfg_.n_rot, rope_cs_.data());
}

void CpuBackend::embed(const Matrix& table) {
    const int64_t d = cfg_.n_embd;
    for (int64_t t = 0; t < n_; ++t) kernels::dequantize_row(table.type, table.row(step_.tokens[t]), x_.data() + t * d, d);
}

void CpuBackend::rms_norm(Act in, const std::vector<float>& weight, Act out) {
    const int64_t d = cfg_.n_embd;
    const float* x = act(in);
    float* y = act(out);
    for (int64_t t = 0; t < n_; ++t) ops::rmsnorm(x + t * d, weight.data(), y + t * d, d, cfg_.norm_eps);
}

void CpuBackend::add(Act dst, Act src) {
    float* y = act(dst);
    const float* x = act(src);
    for (int64_t i = 0; i < n_ * cfg_.n_embd; ++i) y[i] += x[i];
}

void CpuBackend::output_head(const std::vector<float>& norm, const Matrix& head) {
    const int64_t d = cfg_.n_embd;
    float* hidden = step_.hidden_out;
    if (hidden)
        for (int64_t t = 0; t < n_; ++t) ops::rmsnorm(x_.data() + t * d, norm.data(), hidden + t * d, d, cfg_.norm_eps);
    if (!step_.logits) return;
    int64_t rows = 0;
    for (int64_t t = 0; t < n_; ++t) {
        if (!step_.want[t]) continue;
        float* row = h_.data() + (rows++) * d;
        if (hidden) std::copy(hidden + t * d, hidden + (t + 1) * d, row);
        else ops::rmsnorm(x_.data() + t * d, norm.data(), row, d, cfg_.norm_eps);
    }
    matmul(head, h_.data(), rows, step_.logits);
}

void CpuBackend::nextn_input(const NextnInput& in) {
    if (!step_.hidden_in) throw Error("internal: a NextN step without the trunk's hidden rows (Step::hidden_in)");
    const int64_t d = cfg_.n_embd;
    nextn_cat_.resize(static_cast<size_t>(n_ * 2 * d));
    for (int64_t t = 0; t < n_; ++t) {
        float* cat = nextn_cat_.data() + t * 2 * d;
        ops::rmsnorm(x_.data() + t * d, in.enorm.data(), cat, d, cfg_.norm_eps);
        ops::rmsnorm(step_.hidden_in + t * d, in.hnorm.data(), cat + d, d, cfg_.norm_eps);
    }
    matmul(in.eh_proj, nextn_cat_.data(), n_, x_.data());
}

void CpuBackend::dense_ffn(const LayerWeights& L) { ffn(L.dense, h_.data(), n_, tmp_.data(), L.dense.gate.rows); }

void CpuBackend::matmul(const Matrix& W, const float* X, int64_t n, float* Y) {
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

void CpuBackend::matmul_many(std::initializer_list<MatOut> outs, const float* X, int64_t n) {
    batch_.clear();
    for (const MatOut& o : outs) batch_.push_back({o.W, X, n, o.Y});
    matmul_batch();
}

void CpuBackend::matmul_batch() {
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

void CpuBackend::gemm_region(std::span<MatIn> mats) {
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

void CpuBackend::quantize_for(const Matrix& W, const float* X, int64_t n, uint8_t* act) {
    if (W.type == kernels::WeightType::F32) return;  // f32 rows take X as it is
    const int64_t ab = kernels::activation_row_bytes(W.type, W.cols);
    for (int64_t t = 0; t < n; ++t) kernels::quantize_activation(W.type, X + t * W.cols, act + t * ab, W.cols);
}

void CpuBackend::rows_product(const Matrix& W, const float* X, const uint8_t* act, int64_t n, int64_t r0, int64_t r1,
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

CpuBackend::ExpertBias CpuBackend::expert_bias(const LayerWeights& L, int32_t e) const {
    ExpertBias b;
    if (L.expert_bias_gate.empty()) return b;
    const auto ff = static_cast<size_t>(L.n_ff_expert), d = static_cast<size_t>(cfg_.n_embd);
    b.gate = L.expert_bias_gate.data() + static_cast<size_t>(e) * ff;
    b.up = L.expert_bias_up.data() + static_cast<size_t>(e) * ff;
    b.down = L.expert_bias_down.data() + static_cast<size_t>(e) * d;
    return b;
}

void CpuBackend::ffn(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff, const ExpertBias* bias) {
    matmul_many({{&f.gate, ge_.data()}, {&f.up, ue_.data()}}, x, n);
    if (!bias) {
        ops::swiglu(ge_.data(), ue_.data(), ge_.data(), n * ff);
        matmul(f.down, ge_.data(), n, y);
        return;
    }
    // ExpertSpec::act SwigluOai: biases on gate, up and down around the clamped SwiGLU.
    const int64_t d = f.down.rows;
    for (int64_t t = 0; t < n; ++t) {
        ops::axpy(1.0f, bias->gate, ge_.data() + t * ff, ff);
        ops::axpy(1.0f, bias->up, ue_.data() + t * ff, ff);
    }
    ops::swiglu_oai(ge_.data(), ue_.data(), ge_.data(), n * ff, 1.702f, 7.0f);
    matmul(f.down, ge_.data(), n, y);
    for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, bias->down, y + t * d, d);
}

void CpuBackend::predict_route(const LayerWeights& next) {
    if (!step_.lookahead || !*step_.lookahead) return;
    const int64_t n = n_;
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
        (*step_.lookahead)(LookaheadEvent{next.index, step_.pos[t], p, E, step_.seqs[t]});
    }
}

void CpuBackend::route(const LayerWeights& L, const RouterSpec& spec) {
    const int64_t n = n_;
    const int64_t E = cfg_.n_expert;
    const int64_t U = n_used_;
    matmul(L.router, h_.data(), n, router_logits_.data());
    if (!L.router_bias.empty())
        for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, L.router_bias.data(), router_logits_.data() + t * E, E);
    std::fill(expert_count_.begin(), expert_count_.end(), 0);
    // A resident-only draft routes among the experts in fast memory; where
    // fewer are resident than it uses, the missing ranks are left empty (id
    // -1, weight 0) rather than loaded.
    const uint8_t* allowed = nullptr;
    if (step_.resident_experts_only) {
        resident_mask_.resize(static_cast<size_t>(E));
        provider_->resident_mask(L.index, resident_mask_.data(), E);
        allowed = resident_mask_.data();
    }
    const RoutingObserver* observer = step_.routing && *step_.routing ? step_.routing : nullptr;
    for (int64_t t = 0; t < n; ++t) {
        float* p = router_logits_.data() + t * E;
        int32_t* ids = route_ids_.data() + t * U;
        float* wts = route_w_.data() + t * U;
        if (spec.scored)
            ops::router_scored(p, E, U, spec.gating == Gating::Sigmoid,
                               L.router_select_bias.empty() ? nullptr : L.router_select_bias.data(), spec.groups,
                               spec.groups_used, allowed, route_select_.data(), ids, wts);
        else ops::router_topk(p, E, U, allowed, ids, wts);
        int64_t used = 0;
        for (int64_t k = 0; k < U; ++k) used += ids[k] >= 0;
        if (spec.renormalise && used > 0) {
            float sum = 0.0f;
            for (int64_t k = 0; k < U; ++k) sum += wts[k];
            for (int64_t k = 0; k < U; ++k) wts[k] /= sum;
        }
        for (int64_t k = 0; k < U; ++k) {
            wts[k] *= spec.scale;
            if (ids[k] >= 0) ++expert_count_[ids[k]];
        }
        if (observer) (*observer)(RoutingEvent{L.index, step_.pos[t], ids, wts, used, p, E, step_.seqs[t]});
    }
}

void CpuBackend::experts(const LayerWeights& L, const ExpertSpec& spec) {
    const int64_t n = n_;
    const int64_t d = cfg_.n_embd;
    const int64_t E = cfg_.n_expert;
    const int64_t U = n_used_;
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
    provider_->demand(L.index, needed_);
    // Expert outputs land in per-(token, rank) rows and are summed in rank
    // order afterwards, so the result does not depend on the order in which
    // experts became resident: a cached run equals a fully resident one bit
    // for bit (and the sum follows the router's ranking, as ggml's does).
    // Few tokens per expert (decode, small batches, short prompts): every
    // ready expert in one region. Past ~8 tokens an expert on average, one
    // thread's pass over an expert's rows per 4 tokens costs more than
    // splitting each expert's rows between the threads (experts_each):
    // 1.2B make-model, 2 threads, in-process A/B of the fused region against
    // _each (blocks of 3 prefills alternating, 10 rounds): 32 tokens +2% Q8_0
    // and +11% Q4_0, 64 tokens +1..7% and +5..8%, 128 tokens -2% and +4%,
    // 256 tokens -9% and -5%.
    // The clamped, biased experts and the weighted inputs take the plain
    // path (the fused ones know neither).
    if (!activations_ && spec.act == FfnAct::Swiglu && !spec.weight_before && n * U <= n_batch_ &&
        (n <= 8 || n * U <= kFusedRowsPerExpert * E))
        experts_small(L, n);
    else experts_each(L, n, spec.weight_before);
    std::fill(tmp_.begin(), tmp_.begin() + n * d, 0.0f);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k)
            if (route_ids_[t * U + k] >= 0)
                ops::axpy(spec.weight_before ? 1.0f : route_w_[t * U + k], expert_out_.data() + (t * U + k) * d,
                          tmp_.data() + t * d, d);
}

void CpuBackend::shared_expert(const LayerWeights& L) {
    const int64_t n = n_;
    const int64_t d = cfg_.n_embd;
    ffn(L.shared, h_.data(), n, ye_.data(), L.shared.gate.rows);
    for (int64_t t = 0; t < n; ++t) {
        float g = 1.0f;
        if (!L.shared_gate.empty()) g = 1.0f / (1.0f + std::exp(-ops::dot_f32(L.shared_gate.data(), h_.data() + t * d, d)));
        ops::axpy(g, ye_.data() + t * d, tmp_.data() + t * d, d);
    }
}

}  // namespace strata::model
