// The CUDA pass's ops (model/backend.h): what the architectures (model/arch)
// compose, kernel by kernel (kernels/cuda). run() sets up a step and hands
// the pass to the model's architecture; the expert cache behind experts()
// is cuda_forward.cpp's.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/cuda/cuda_pass.h"
#include "common/error.h"
#include "model/arch/arch.h"

namespace strata::backend::cuda::pass {

bool cuda_supports(model::Op op) {
    switch (op) {
        case model::Op::Embed:
        case model::Op::RmsNorm:
        case model::Op::Add:
        case model::Op::Attention:
        case model::Op::LatentAttention:
        case model::Op::AttentionSinks:
        case model::Op::SlidingWindow:
        case model::Op::ChunkedAttention:
        case model::Op::NormAfterRope:
        case model::Op::AttentionTemperature:
        case model::Op::WeightedExpertInput:
        case model::Op::AttentionOutputGate:
        case model::Op::DeltaNet:
        case model::Op::Route:
        case model::Op::ScoredRoute:
        case model::Op::Experts:
        case model::Op::ClampedExperts:
        case model::Op::SharedExpert:
        case model::Op::DenseFfn:
        case model::Op::OutputHead: return true;
        case model::Op::NextnInput: return false;  // MTP drafts run on the CPU (sched::MtpDrafter)
    }
    return false;
}

bool CudaForward::supports(model::Op op) const { return cuda_supports(op); }

uint64_t CudaForward::scratch_bytes() const {
    uint64_t b = 0;
    for (const DeviceBuffer& x : bufs_) b += x.size();
    return b;
}

float* CudaForward::act(model::Act a) const {
    switch (a) {
        case model::Act::Residual: return x_;
        case model::Act::Normed: return h_;
        case model::Act::Out: return tmp_;
    }
    return nullptr;
}

void CudaForward::read(model::Act a, float* host) {
    copy_to_host(host, act(a), static_cast<uint64_t>(n_ * cfg_.n_embd) * 4, compute_, "reading an activation for the CPU");
    compute_.synchronize("reading an activation for the CPU");
}

void CudaForward::write(model::Act a, const float* host) {
    copy_to_device(act(a), host, static_cast<uint64_t>(n_ * cfg_.n_embd) * 4, compute_, "writing an activation from the CPU");
    // The caller may reuse `host` at once (pageable memory).
    compute_.synchronize("writing an activation from the CPU");
}

const float* CudaForward::device_vector(const std::vector<float>& v) const {
    const auto it = uploaded_.find(v.data());
    if (it == uploaded_.end()) throw Error("internal: a norm or bias the GPU pass did not upload");
    return static_cast<const float*>(it->second);
}

void CudaForward::run(const model::DeviceChunk& c, const kv::KvCache& kv, const model::RoutingObserver& routing,
                      const model::LookaheadObserver& lookahead) {
    model::Step step = model::chunk_step(c, kv, n_used_);
    step.routing = &routing;
    step.lookahead = &lookahead;
    const auto step_begin = std::chrono::steady_clock::now();
    model::Backend& ops = fallback_ ? static_cast<model::Backend&>(*fallback_) : *this;
    ops.begin(step);
    model::arch::forward(ops, cfg_, model_.weights(), cfg_.n_layer, static_cast<bool>(lookahead));
    compute_.synchronize("the forward pass on the GPU");
    for (const auto& [b, e] : stalls_) stats_.stall_seconds += e->ms_since(*b) * 1e-3;
    stalls_.clear();
    refresh_link_rate();
    if (cached_) policy_->on_step();
    last_step_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_begin).count();
    ++step_;
    step_in_ = nullptr;
}

// Step data: tokens, RoPE tables, where each token's K/V goes, and the block tables.
void CudaForward::begin(const model::Step& s) {
    const model::ModelConfig& cf = cfg_;
    const int64_t n = s.n;
    if (n > n_batch_)
        throw Error("internal: a chunk of " + std::to_string(n) + " tokens for a GPU pass sized for " +
                    std::to_string(n_batch_));
    set_device(device_);
    step_in_ = &s;
    n_ = n;
    backlog_s_ = std::max(0.0, backlog_s_ - last_step_s_);  // the link drained them during the previous step
    const kv::KvCache& kv = *s.kv;
    std::copy(s.tokens, s.tokens + n, h_tokens_.begin());
    const int64_t n_rot = std::max<int64_t>(cf.n_rot, 2);
    model::rope_tables(cf, s.pos, n, n_rot, h_cs_.data());
    h_tables_.clear();
    std::vector<std::pair<kv::SeqId, int32_t>>& seen = h_seen_;  // each sequence's table offset
    seen.clear();
    for (int64_t t = 0; t < n; ++t) {
        const kv::KvCache::Row r = kv.row(s.seqs[t], s.pos[t]);
        h_kv_block_[static_cast<size_t>(t)] = r.block;
        h_kv_slot_[static_cast<size_t>(t)] = static_cast<int32_t>(r.slot);
        auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& p) { return p.first == s.seqs[t]; });
        if (it == seen.end()) {
            seen.emplace_back(s.seqs[t], static_cast<int32_t>(h_tables_.size()));
            const std::vector<int32_t>& b = kv.blocks(s.seqs[t]);
            h_tables_.insert(h_tables_.end(), b.begin(), b.end());
            it = seen.end() - 1;
        }
        h_table_offset_[static_cast<size_t>(t)] = it->second;
        h_n_keys_[static_cast<size_t>(t)] = static_cast<int32_t>(s.pos[t] + 1);
    }
    if (cf.ssm) {
        for (int64_t t = 0; t < n; ++t) {
            const kv::KvCache::StateStep st = s.kv->state_step(s.seqs[t], s.pos[t]);  // a rewound sequence: its error
            h_state_slot_[static_cast<size_t>(t)] = st.in;  // position 0 (n_keys 1): the kernels zero slot out
            h_state_slot_[static_cast<size_t>(n + t)] = st.out;
        }
        reserve_states(s.kv->state_slot_count());
        put(state_slot_, h_state_slot_, static_cast<size_t>(2 * n));
    }
    if (h_tables_.size() * 4 > tables_cap_) {
        compute_.synchronize("growing the block tables");
        tables_cap_ = std::max<uint64_t>(h_tables_.size() * 4 * 2, 4096);
        tables_ = DeviceBuffer(ledger_, Account::Activations, Tier::Fast, tables_cap_);
    }
    put(tokens_, h_tokens_, static_cast<size_t>(n));
    put(rope_cs_, h_cs_, static_cast<size_t>(n * n_rot));
    put(kv_block_, h_kv_block_, static_cast<size_t>(n));
    put(kv_slot_, h_kv_slot_, static_cast<size_t>(n));
    put(table_offset_, h_table_offset_, static_cast<size_t>(n));
    put(n_keys_, h_n_keys_, static_cast<size_t>(n));
    put(tables_.as<int32_t>(), h_tables_, h_tables_.size());
}

void CudaForward::embed(const model::Matrix&) {
    const int64_t d = cfg_.n_embd;
    ok(kc::get_rows(tok_embd_.type, tok_embd_.data, tok_embd_.row_bytes, d, tokens_, n_, x_, compute_.get()), "embedding");
}

void CudaForward::rms_norm(model::Act in, const std::vector<float>& weight, model::Act out) {
    const int64_t d = cfg_.n_embd;
    ok(kc::rms_norm(act(in), d, device_vector(weight), act(out), d, n_, d, cfg_.norm_eps, compute_.get()), "RMSNorm");
}

void CudaForward::add(model::Act dst, model::Act src) {
    ok(kc::add(act(dst), act(src), n_ * cfg_.n_embd, compute_.get()), "residual add");
}

void CudaForward::attention(const model::LayerWeights& host, const model::AttentionSpec& spec) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    current_layer_ = L.index;
    if (spec.latent) return attention_latent(L, spec);
    const model::ModelConfig& c = cfg_;
    const int64_t n = n_;
    const int64_t hd = c.head_dim, qd = c.n_head * hd, kvd = c.n_head_kv * hd;
    const int64_t li = L.index;
    if (spec.output_gate) {
        // attn_q's rows: each head's query, then its gate.
        gemm(L.wq, h_, n, q_gate_, "attention q and gate", li);
        ok(kc::get_rows(kc::QType::F32, q_gate_, hd * 4, hd, q_rows_, n * c.n_head, q_, compute_.get()), "queries", li);
        ok(kc::get_rows(kc::QType::F32, q_gate_, hd * 4, hd, gate_rows_, n * c.n_head, gate_, compute_.get()), "gates", li);
    } else {
        gemm(L.wq, h_, n, q_, "attention q", li);
    }
    gemm(L.wk, h_, n, k_, "attention k", li);
    gemm(L.wv, h_, n, v_, "attention v", li);
    if (L.bq) ok(kc::add_bias(q_, qd, L.bq, n, qd, compute_.get()), "q bias", li);
    if (L.bk) ok(kc::add_bias(k_, kvd, L.bk, n, kvd, compute_.get()), "k bias", li);
    if (L.bv) ok(kc::add_bias(v_, kvd, L.bv, n, kvd, compute_.get()), "v bias", li);
    if (L.q_norm) {
        if (spec.qk_norm == model::QkNorm::PerHead) {
            ok(kc::rms_norm(q_, hd, L.q_norm, q_, hd, n * c.n_head, hd, c.norm_eps, compute_.get()), "q norm", li);
            ok(kc::rms_norm(k_, hd, L.k_norm, k_, hd, n * c.n_head_kv, hd, c.norm_eps, compute_.get()), "k norm", li);
        } else {
            ok(kc::rms_norm(q_, qd, L.q_norm, q_, qd, n, qd, c.norm_eps, compute_.get()), "q norm", li);
            ok(kc::rms_norm(k_, kvd, L.k_norm, k_, kvd, n, kvd, c.norm_eps, compute_.get()), "k norm", li);
        }
    }
    if (spec.rope != model::RopeType::None) {
        const bool neox = spec.rope == model::RopeType::NeoX;
        ok(kc::rope_apply(q_, n, qd, c.n_head, hd, c.n_rot, rope_cs_, neox, compute_.get()), "rope q", li);
        ok(kc::rope_apply(k_, n, kvd, c.n_head_kv, hd, c.n_rot, rope_cs_, neox, compute_.get()), "rope k", li);
    }
    if (spec.norm_after_rope) {
        ok(kc::rms_norm(q_, hd, nullptr, q_, hd, n * c.n_head, hd, c.norm_eps, compute_.get()), "q norm after rope", li);
        ok(kc::rms_norm(k_, hd, nullptr, k_, hd, n * c.n_head_kv, hd, c.norm_eps, compute_.get()), "k norm after rope", li);
    }
    if (spec.temperature_floor > 0) {
        for (int64_t t = 0; t < n; ++t) h_q_temp_[static_cast<size_t>(t)] = model::attention_temperature(spec, step_in_->pos[t]);
        put(q_temp_, h_q_temp_, static_cast<size_t>(n));
        ok(kc::scale_rows(q_, qd, q_temp_, n, qd, compute_.get()), "query temperature", li);
    }
    float* kp = kv_pool_.as<float>() + c.kv_layer(li) * kv_layer_stride_;  // the attention layers' pool
    float* vp = kp + c.n_head_kv * kv_head_stride_;
    ok(kc::kv_store(k_, kvd, v_, kvd, n, c.n_head_kv, hd, kp, vp, kv_block_stride_, kv_head_stride_, kv_block_, kv_slot_,
                    compute_.get()),
       "kv store", li);
    ok(kc::attention_paged(q_, qd, n, c.n_head, c.n_head_kv, hd, kp, vp, kv_block_tokens_, kv_block_stride_,
                           kv_head_stride_, tables_.as<int32_t>(), table_offset_, n_keys_, spec.scale,
                           spec.sinks ? L.sinks : nullptr, spec.window, spec.chunk, attn_, qd, compute_.get()),
       "attention", li);
    if (spec.output_gate) ok(kc::gate_mul(attn_, gate_, n * qd, false, compute_.get()), "attention output gate", li);
    gemm(L.wo, attn_, n, tmp_, "attention output", li);
    if (L.bo) ok(kc::add_bias(tmp_, c.n_embd, L.bo, n, c.n_embd, compute_.get()), "output bias", li);
}

// The gated delta net as the CPU backend computes it (backend/cpu/cpu_delta_net.cpp),
// each token's state its sequence's in VRAM (state_, by sequence id).
void CudaForward::delta_net(const model::LayerWeights& host) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    const model::ModelConfig& c = cfg_;
    const model::SsmConfig& s = c.ssm;
    const int64_t n = n_, li = L.index, C = s.channels(), V = s.value_dim(), H = s.n_v_heads, d = s.d_state;
    current_layer_ = li;
    gemm(L.ssm_qkv, h_, n, dn_mixed_, "delta net q|k|v", li);
    gemm(L.ssm_z, h_, n, dn_z_, "delta net gate", li);
    gemm(L.ssm_beta, h_, n, dn_beta_, "delta net beta", li);
    gemm(L.ssm_alpha, h_, n, dn_alpha_, "delta net decay", li);
    const int64_t per_seq = c.recurrent_state_floats();
    const int64_t offset = c.recurrent_state_offset(li);
    float* state = state_.as<float>();
    ok(kc::delta_conv(dn_mixed_, n, C, s.conv_kernel, L.ssm_conv, state, per_seq, offset, state_slot_, state_slot_ + n,
                      n_keys_, dn_conv_, compute_.get()),
       "delta net conv", li);
    ok(kc::l2_norm_heads(dn_conv_, n, C, 2 * s.n_k_heads, d, c.norm_eps, compute_.get()), "delta net q/k norm", li);
    ok(kc::delta_gates(dn_alpha_, dn_beta_, L.ssm_dt_bias, L.ssm_a, n, H, compute_.get()), "delta net gates", li);
    ok(kc::gated_delta(dn_conv_, n, C, s.n_k_heads, H, d, dn_alpha_, dn_beta_, state, per_seq,
                       offset + s.conv_state_floats(), state_slot_, state_slot_ + n, n_keys_, dn_o_, compute_.get()),
       "gated delta rule", li);
    ok(kc::rms_norm(dn_o_, d, L.ssm_norm, dn_o_, d, n * H, d, c.norm_eps, compute_.get()), "delta net norm", li);
    ok(kc::gate_mul(dn_o_, dn_z_, n * V, true, compute_.get()), "delta net output gate", li);
    gemm(L.ssm_out, dn_o_, n, tmp_, "delta net output", li);
}

// VRAM for the state slots [0, slots): grown (doubling), the states so far
// copied over; a sequence's state is zeroed at its first position.
void CudaForward::reserve_states(int64_t slots) {
    if (slots <= state_seqs_) return;
    const int64_t cap = std::max(slots, 2 * state_seqs_);
    const uint64_t per_seq = static_cast<uint64_t>(cfg_.recurrent_state_floats()) * sizeof(float);
    DeviceBuffer grown(ledger_, Account::RecurrentState, Tier::Fast, static_cast<uint64_t>(cap) * per_seq);
    if (state_seqs_ > 0) {
        copy_on_device(grown.data(), state_.data(), static_cast<uint64_t>(state_seqs_) * per_seq, compute_,
                       "growing the recurrent states");
        compute_.synchronize("growing the recurrent states");  // before the old buffer goes
    }
    state_ = std::move(grown);
    state_seqs_ = cap;
}

// Latent attention as the CPU backend computes it (backend/cpu/cpu_attention.cpp):
// the cache holds one latent row [compressed KV | RoPE key] per token, the
// queries move into the latent space, and the values come out of it.
void CudaForward::attention_latent(const DevLayer& L, const model::AttentionSpec& spec) {
    const model::ModelConfig& c = cfg_;
    const model::MlaConfig& m = c.mla;
    const int64_t n = n_, H = c.n_head, r = m.kv_lora_rank, rot = c.n_rot, kl = m.key_length, vl = m.value_length;
    const int64_t row = c.head_dim, li = L.index;  // r + rot
    if (L.wq_a) {
        gemm(L.wq_a, h_, n, mla_qa_, "attention q_a", li);
        ok(kc::rms_norm(mla_qa_, m.q_lora_rank, L.q_a_norm, mla_qa_, m.q_lora_rank, n, m.q_lora_rank, c.norm_eps,
                        compute_.get()),
           "q_a norm", li);
        gemm(L.wq, mla_qa_, n, mla_q_, "attention q_b", li);
    } else {
        gemm(L.wq, h_, n, mla_q_, "attention q", li);
    }
    gemm(L.wkv_a, h_, n, k_, "attention kv_a", li);
    ok(kc::rms_norm(k_, row, L.kv_a_norm, k_, row, n, r, c.norm_eps, compute_.get()), "kv_a norm", li);
    // As attn_kv_b's product rounds its input (the CPU backend caches the rounded row).
    ok(kc::round_activations(L.kv_b_type, k_, row, n, r, nullptr, 0, compute_.get()), "rounding the compressed KV", li);
    ok(kc::rope_apply(k_ + r, n, row, 1, rot, rot, rope_cs_, false, compute_.get()), "rope k", li);
    ok(kc::rope_apply(mla_q_ + (kl - rot), n, H * kl, H, kl, rot, rope_cs_, false, compute_.get()), "rope q", li);
    float* kp = kv_pool_.as<float>() + c.kv_layer(li) * kv_layer_stride_;
    ok(kc::kv_store(k_, row, k_, row, n, 1, row, kp, kp, kv_block_stride_, kv_head_stride_, kv_block_, kv_slot_,
                    compute_.get()),
       "kv store", li);
    ok(kc::mla_absorb_query(mla_q_, n, H, kl, rot, L.k_up_t, r, q_, compute_.get()), "latent query", li);
    // Every head attends to the one latent row per position, which is also its value.
    ok(kc::attention_paged(q_, H * row, n, H, 1, row, kp, kp, kv_block_tokens_, kv_block_stride_, kv_head_stride_,
                           tables_.as<int32_t>(), table_offset_, n_keys_, spec.scale, nullptr, 0, 0, attn_, H * row,
                           compute_.get()),
       "latent attention", li);
    ok(kc::mla_value_up(attn_, n, H, row, r, L.v_up, vl, mla_v_, compute_.get()), "latent values", li);
    gemm(L.wo, mla_v_, n, tmp_, "attention output", li);
    if (L.bo) ok(kc::add_bias(tmp_, c.n_embd, L.bo, n, c.n_embd, compute_.get()), "output bias", li);
}

void CudaForward::predict_route(const model::LayerWeights& host) {
    if (!step_in_->lookahead || !*step_in_->lookahead) return;
    const DevLayer& next = layers_[static_cast<size_t>(host.index)];
    const int64_t n = n_, d = cfg_.n_embd, E = cfg_.n_expert;
    // yr_ is free outside experts(): the next layer's normalised input goes there.
    ok(kc::rms_norm(x_, d, next.ffn_norm, yr_, d, n, d, cfg_.norm_eps, compute_.get()), "lookahead norm", next.index);
    gemm(next.router, yr_, n, look_, "lookahead router", next.index);
    if (next.router_bias) ok(kc::add_bias(look_, E, next.router_bias, n, E, compute_.get()), "lookahead bias", next.index);
    // router_topk's softmax (k = 1, its pick unused) gives the predicted probabilities.
    ok(kc::router_topk(look_, E, n, E, 1, look_ids_, look_w_, compute_.get()), "lookahead softmax", next.index);
    copy_to_host(h_look_.data(), look_, static_cast<uint64_t>(n * E) * 4, compute_, "reading the lookahead");
    compute_.synchronize("the lookahead router");
    const model::Step& s = *step_in_;
    for (int64_t t = 0; t < n; ++t)
        (*s.lookahead)(model::LookaheadEvent{next.index, s.pos[t], h_look_.data() + t * E, E, s.seqs[t]});
}

// Routes on the device; the choices come back for the observers, the expert
// cache and the grouping (h_ids_, h_w_, h_count_).
void CudaForward::route(const model::LayerWeights& host, const model::RouterSpec& spec) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    const int64_t n = n_, d = cfg_.n_embd, E = cfg_.n_expert, U = n_used_, li = L.index;
    current_layer_ = li;
    gemm(L.router, h_, n, router_, "router", li);
    if (L.router_bias) ok(kc::add_bias(router_, E, L.router_bias, n, E, compute_.get()), "router bias", li);
    if (spec.scored) {
        ok(kc::router_scored(router_, E, n, E, U, spec.gating == model::Gating::Sigmoid, L.select_bias, spec.groups,
                             spec.groups_used, route_sel_, route_ids_, route_w_, compute_.get()),
           "router (scored)", li);
    } else {
        ok(kc::router_topk(router_, E, n, E, U, route_ids_, route_w_, compute_.get()), "router top-k", li);
    }
    copy_to_host(h_ids_.data(), route_ids_, static_cast<uint64_t>(n * U) * 4, compute_, "reading the routing");
    copy_to_host(h_w_.data(), route_w_, static_cast<uint64_t>(n * U) * 4, compute_, "reading the routing");
    copy_to_host(h_probs_.data(), router_, static_cast<uint64_t>(n * E) * 4, compute_, "reading the routing");
    // The layer's input, for experts the CPU may compute (read now, with the
    // routing, so the CPU need not wait for the GPU's experts to get it).
    if (cpu_layer_[static_cast<size_t>(li)] || hybrid_)
        copy_to_host(host_h_.data(), h_, static_cast<uint64_t>(n * d) * 4, compute_, "reading the experts' input");
    compute_.synchronize("the router");

    const model::Step& s = *step_in_;
    const model::RoutingObserver* observer = s.routing && *s.routing ? s.routing : nullptr;
    std::fill(h_count_.begin(), h_count_.end(), 0);
    for (int64_t t = 0; t < n; ++t) {
        int32_t* ids = h_ids_.data() + t * U;
        float* wts = h_w_.data() + t * U;
        int64_t used = 0;
        for (int64_t k = 0; k < U; ++k) used += ids[k] >= 0;
        if (spec.renormalise && used > 0) {  // as the CPU backend's route()
            float sum = 0.0f;
            for (int64_t k = 0; k < U; ++k) sum += wts[k];
            for (int64_t k = 0; k < U; ++k) wts[k] /= sum;
        }
        for (int64_t k = 0; k < U; ++k) {
            wts[k] *= spec.scale;
            if (ids[k] >= 0) ++h_count_[static_cast<size_t>(ids[k])];
        }
        if (observer) (*observer)(model::RoutingEvent{li, s.pos[t], ids, wts, used, h_probs_.data() + t * E, E, s.seqs[t]});
    }
}

void CudaForward::experts(const model::LayerWeights& host, const model::ExpertSpec& spec) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    const int64_t n = n_, U = n_used_, li = L.index;
    expert_act_ = spec.act;
    expert_weight_before_ = spec.weight_before;
    place_experts(li);
    if (host_cache_) take_from_host_cache(li);
    // fill[e]: the next row of expert e's run.
    std::vector<int32_t>& fill = h_fill_;
    h_offsets_[0] = 0;
    for (size_t g = 0; g < h_order_.size(); ++g) {
        fill[static_cast<size_t>(h_order_[g])] = h_offsets_[g];
        h_offsets_[g + 1] = h_offsets_[g] + h_count_[static_cast<size_t>(h_order_[g])];
    }
    int64_t combine_rows = 0;
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < U; ++k) {
            const int32_t e = h_ids_[static_cast<size_t>(t * U + k)];
            if (e < 0) continue;
            const int32_t r = fill[static_cast<size_t>(e)]++;
            h_gather_[static_cast<size_t>(r)] = static_cast<int32_t>(t);
            h_row_expert_[static_cast<size_t>(r)] = e;
            h_rank_src_[static_cast<size_t>(combine_rows)] = r;
            h_dst_[static_cast<size_t>(combine_rows)] = static_cast<int32_t>(t);
            // Weighted before the FFN: the input carries the weight, the output is summed as it is.
            const float w = h_w_[static_cast<size_t>(t * U + k)];
            h_row_w_[static_cast<size_t>(r)] = w;
            h_combine_w_[static_cast<size_t>(combine_rows)] = spec.weight_before ? 1.0f : w;
            ++combine_rows;
        }
    routed_experts(L, n, h_offsets_[h_order_.size()], combine_rows);
    // The copies from the cache's slots are staged by the time the calls
    // return (pageable memory), and the CPU is done with them.
    if (host_cache_) release_to_host_cache(li);
}

void CudaForward::shared_expert(const model::LayerWeights& host) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    const int64_t n = n_, d = cfg_.n_embd, li = L.index;
    ffn_dense(L.shared, h_, n, ye_, L.shared.gate.rows, li);
    if (L.shared_gate) gemm(L.shared_gate, h_, n, gate_logit_, "shared expert gate", li);
    ok(kc::gated_add(ye_, L.shared_gate ? gate_logit_ : nullptr, n, d, tmp_, compute_.get()), "shared expert", li);
}

void CudaForward::dense_ffn(const model::LayerWeights& host) {
    const DevLayer& L = layers_[static_cast<size_t>(host.index)];
    ffn_dense(L.dense, h_, n_, tmp_, L.dense.gate.rows, L.index);
}

void CudaForward::nextn_input(const model::NextnInput&) {
    throw Error("internal: the CUDA backend was given a NextN block, which it does not compute (supports says so)");
}

void CudaForward::output_head(const std::vector<float>&, const model::Matrix&) {
    const model::Step& s = *step_in_;
    const int64_t n = n_, d = cfg_.n_embd;
    if (s.hidden_out) {  // every token's normed hidden state, before the head's rows are picked
        ok(kc::rms_norm(x_, d, output_norm_, h_, d, n, d, cfg_.norm_eps, compute_.get()), "output norm");
        copy_to_host(s.hidden_out, h_, static_cast<uint64_t>(n * d) * 4, compute_, "reading the hidden states");
    }
    if (!s.logits) return;
    int64_t rows = 0;
    for (int64_t t = 0; t < n; ++t)
        if (s.want[t]) h_want_rows_[static_cast<size_t>(rows++)] = static_cast<int32_t>(t);
    put(want_rows_, h_want_rows_, static_cast<size_t>(rows));
    ok(kc::get_rows(kc::QType::F32, x_, d * 4, d, want_rows_, rows, h_, compute_.get()), "picking logit rows");
    ok(kc::rms_norm(h_, d, output_norm_, h_, d, rows, d, cfg_.norm_eps, compute_.get()), "output norm");
    gemm(output_, h_, rows, logits_, "output head", -1);
    copy_to_host(s.logits, logits_, static_cast<uint64_t>(rows * cfg_.n_vocab) * 4, compute_, "reading the logits");
}

}  // namespace strata::backend::cuda::pass
