// The CPU backend's attention (backend/cpu/cpu_backend.h): the general path over
// many tokens, latent attention (MLA), and the one-token region.
#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/ref/ops_ref.h"
#include "backend/cpu/cpu_backend.h"

namespace strata::model {

namespace ops = kernels::ops;

void CpuBackend::attention(const LayerWeights& L, const AttentionSpec& spec) {
    const int64_t n = n_;
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    const int64_t q_dim = c.n_head * hd;
    const int64_t kv_dim = c.n_head_kv * hd;
    if (spec.latent) return attention_latent(L, n, spec.scale);
    // The fused one-token path knows neither sinks nor an output gate.
    if (n == 1 && !activations_ && !spec.sinks && !spec.output_gate)
        if (const Fused f = attention_fused_one_token(L, spec); f != Fused::No)
            return output_projection(L, n, f == Fused::AttentionAndOutput);
    if (spec.output_gate) {
        // attn_q gives each head's query rows, then its gate's (into q_gate_): the queries go to q_, the gates to gate_.
        matmul_many({{&L.wq, q_gate_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, h_.data(), n);
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < c.n_head; ++h) {
                const float* qg = q_gate_.data() + (t * c.n_head + h) * 2 * hd;
                std::copy(qg, qg + hd, q_.data() + t * q_dim + h * hd);
                std::copy(qg + hd, qg + 2 * hd, gate_.data() + t * q_dim + h * hd);
            }
    } else {
        matmul_many({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, h_.data(), n);
    }
    for (int64_t t = 0; t < n; ++t) {
        float* q = q_.data() + t * q_dim;
        float* k = k_.data() + t * kv_dim;
        float* v = v_.data() + t * kv_dim;
        if (!L.q_norm.empty() && spec.qk_norm == QkNorm::WholeProjection) {  // after the biases, before RoPE
            if (!L.bq.empty()) ops::axpy(1.0f, L.bq.data(), q, q_dim);
            if (!L.bk.empty()) ops::axpy(1.0f, L.bk.data(), k, kv_dim);
            if (!L.bv.empty()) ops::axpy(1.0f, L.bv.data(), v, kv_dim);
            ops::rmsnorm(q, L.q_norm.data(), q, q_dim, c.norm_eps);
            ops::rmsnorm(k, L.k_norm.data(), k, kv_dim, c.norm_eps);
            qk_heads(L, spec, t, {q, c.n_head, 0}, {k, c.n_head_kv, 0}, v, false);
        } else {
            qk_heads(L, spec, t, {q, c.n_head, 0}, {k, c.n_head_kv, 0}, v, true);
        }
        kv_->write(step_.seqs[t], cfg_.kv_layer(L.index), step_.pos[t], k, v);
    }

    const float scale = spec.scale;
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
            const int64_t n_keys = step_.pos[t] + 1;  // causal, within the token's own sequence
            const int64_t first_key = first_visible_key(spec, n_keys);
            const float* sinks = spec.sinks ? L.attn_sinks.data() + h : nullptr;
            profiled(DecodeProfile::Attention, 0, [&] {
                kv_->attend_group(step_.seqs[t], cfg_.kv_layer(L.index), h / group, q_.data() + t * q_dim + h * hd, per_item, n_keys, scale,
                                  scores, attn_.data() + t * q_dim + h * hd, -1, false, first_key, sinks);
            });
        }
    });
    if (spec.output_gate) kernels::ref::gate_mul(attn_.data(), gate_.data(), n * q_dim, /*silu=*/false);
    output_projection(L, n);
}

// MLA in the latent space (the "absorbed" attention, as llama.cpp
// and vLLM decode it). Per token: the compressed KV c = RMSNorm(attn_kv_a x)
// and the shared RoPE key k_r go into the cache as one row [c | k_r]. Head h's
// key would be [W_UK_h c | k_r] and its value W_UV_h c (attn_kv_b's rows);
// instead of expanding every cached row, the query moves: q_h . k_h =
// (W_UK_h^T q_nope_h) . c + q_rope_h . k_r, so the latent query
// [W_UK_h^T q_nope_h | q_rope_h] attends over the cached rows directly, its
// output o_h = sum_j p_j c_j stays latent, and W_UV_h o_h is the head's value.
// Prefill takes the same path (it is exact, only the summation order differs
// from the expanded form the reference computes).
void CpuBackend::attention_latent(const LayerWeights& L, int64_t n, float scale) {
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
        kv_->write(step_.seqs[t], cfg_.kv_layer(L.index), step_.pos[t], kv, kv);  // keys only: the row is also the value
        ops::rope_apply(mla_q_.data() + t * H * kl + nope, H, kl, rot, cs, false);  // each head's RoPE part
    }
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
                kv_->attend_group(step_.seqs[t], cfg_.kv_layer(L.index), 0, q_.data() + (t * H + h0) * row, per_item, step_.pos[t] + 1, scale,
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

// Token t's query heads and key heads (with the value head(s) of the same
// rows) from their projections to what attention reads: the biases and
// per-head Q/K norms (with_biases_and_norms; the caller did them otherwise),
// RoPE, the weightless norm after it, the queries' temperature. The heads
// may be a part of the token's (the one-token region: one KV head's group),
// `first` their first element in the token's row.
void CpuBackend::qk_heads(const LayerWeights& L, const AttentionSpec& spec, int64_t t, Heads q, Heads k, float* v,
                          bool with_biases_and_norms) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    if (with_biases_and_norms) {
        if (!L.bq.empty()) ops::axpy(1.0f, L.bq.data() + q.first, q.x, q.n * hd);
        if (!L.bk.empty()) ops::axpy(1.0f, L.bk.data() + k.first, k.x, k.n * hd);
        if (!L.bv.empty()) ops::axpy(1.0f, L.bv.data() + k.first, v, k.n * hd);
        if (!L.q_norm.empty()) {
            for (int64_t h = 0; h < q.n; ++h) ops::rmsnorm(q.x + h * hd, L.q_norm.data(), q.x + h * hd, hd, c.norm_eps);
            for (int64_t h = 0; h < k.n; ++h) ops::rmsnorm(k.x + h * hd, L.k_norm.data(), k.x + h * hd, hd, c.norm_eps);
        }
    }
    if (spec.rope != RopeType::None) {
        // The position's cos/sin table is the same in every layer: made once per chunk.
        const float* cs = rope_cs_.data() + t * c.n_rot;
        const bool neox = spec.rope == RopeType::NeoX;
        ops::rope_apply(q.x, q.n, hd, c.n_rot, cs, neox);
        ops::rope_apply(k.x, k.n, hd, c.n_rot, cs, neox);
    }
    if (spec.norm_after_rope) {
        for (int64_t h = 0; h < q.n; ++h) ops::rmsnorm(q.x + h * hd, ones_.data(), q.x + h * hd, hd, c.norm_eps);
        for (int64_t h = 0; h < k.n; ++h) ops::rmsnorm(k.x + h * hd, ones_.data(), k.x + h * hd, hd, c.norm_eps);
    }
    if (spec.temperature_floor > 0) {
        const float f = attention_temperature(spec, step_.pos[t]);
        kernels::ref::scale_rows(q.x, q.n * hd, &f, 1, q.n * hd);
    }
}

// tmp_ = attn_ x wo (+ bias); product_done: the product is in tmp_ already.
void CpuBackend::output_projection(const LayerWeights& L, int64_t n, bool product_done) {
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
CpuBackend::Fused CpuBackend::attention_fused_one_token(const LayerWeights& L, const AttentionSpec& spec) {
    const ModelConfig& c = cfg_;
    if (pool_->size() < 2) return Fused::No;
    const kernels::WeightType type = L.wq.type;
    if (type == kernels::WeightType::F32 || L.wk.type != type || L.wv.type != type) return Fused::No;
    if (!L.q_norm.empty() && spec.qk_norm != QkNorm::PerHead) return Fused::No;
    uint8_t* xq = act_scratch_.data();
    kernels::quantize_activation(type, h_.data(), xq, c.n_embd);
    const kv::KvCache::Row row = kv_->row(step_.seqs[0], step_.pos[0]);  // throws here, not on a worker
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
            attention_kv_group(L, spec, head, row, scores, next < c.n_head_kv ? next : -1, asked);
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
bool CpuBackend::output_fuses(const LayerWeights& L) const {
    const kernels::WeightType t = L.wo.type;
    if (t == kernels::WeightType::F32 || !kernels::has_kernels(t)) return false;
    const int64_t group_dims = cfg_.n_head / cfg_.n_head_kv * cfg_.head_dim;
    return kernels::activation_row_bytes(t, group_dims) > 0 && L.wo.cols == cfg_.n_head * cfg_.head_dim;
}

// Rows [r0, r1) of Q, K and V in memory order (wq's rows, then wk's, then
// wv's; ResidentWeights lays them out in that order, a few KiB apart), and
// to each KV head its rows among them.
void CpuBackend::attention_qkv_rows(const LayerWeights& L, const uint8_t* xq, int64_t r0, int64_t r1) {
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
void CpuBackend::attention_kv_group(const LayerWeights& L, const AttentionSpec& spec, int64_t g, kv::KvCache::Row row, float* scores, int64_t next_g,
                                 bool asked) {
    const ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim;
    const int64_t group = c.n_head / c.n_head_kv;
    const int64_t q0 = g * group * hd, k0 = g * hd;  // this group's first Q row, its K/V rows
    float* q = q_.data() + q0;
    float* k = k_.data() + k0;
    float* v = v_.data() + k0;
    qk_heads(L, spec, 0, {q, group, q0}, {k, 1, k0}, v, true);  // per-head norms only (attention_fused_one_token checked)
    kv_->write_head(row, cfg_.kv_layer(L.index), g, k, v);
    const float scale = spec.scale;
    const int64_t n_keys = step_.pos[0] + 1;
    profiled(DecodeProfile::Attention, 0, [&] {
        kv_->attend_group(step_.seqs[0], cfg_.kv_layer(L.index), g, q, group, n_keys, scale, scores, attn_.data() + q0, next_g, asked,
                          first_visible_key(spec, n_keys));
    });
}

}  // namespace strata::model
