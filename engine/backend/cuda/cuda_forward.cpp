#include "backend/cuda/cuda_forward.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <thread>
#include <unordered_map>
#include <vector>

#include "platform/thread_pool.h"
#include "backend/cuda/cuda_runtime.h"
#include "common/error.h"
#include "kernels/ref/ops_ref.h"
#include "common/log.h"
#include "experts/cache_policy.h"
#include "experts/expert_store.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "memory/aligned_buffer.h"
#include "model/arch/arch.h"
#include "model/model.h"
#include "model/op_fallback.h"

#include "backend/cuda/cuda_pass.h"

namespace strata::backend::cuda::pass {

namespace kc = kernels::cuda;
using memory::Account;
using memory::Tier;


CudaForward::CudaForward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger, const CudaForwardOptions& o)
    // The device is made current before the streams are created (member
    // order: device_ comes first), since a stream belongs to the current device.
    : model_(m), cfg_(m.config()), ledger_(ledger), device_((set_device(o.device), o.device)) {
    const model::ModelConfig& c = cfg_;
    const model::ModelWeights& w = m.weights();  // the file's layout
    if (const std::string bad = cuda_unsupported_tensor(m); !bad.empty()) throw Error(bad);
    if (c.head_dim > kc::kAttentionMaxHeadDim)
        throw Error("the CUDA backend's attention takes heads of up to " + std::to_string(kc::kAttentionMaxHeadDim) +
                    " dims; this model's are " + std::to_string(c.head_dim) + " (use --device cpu)");
    if (c.ssm && (c.ssm.d_state % 32 != 0 || c.ssm.d_state > 1024))
        throw Error("the CUDA backend's gated delta net takes heads of a multiple of 32 dims up to 1024; this model's are " +
                    std::to_string(c.ssm.d_state) + " (use --device cpu)");
    const kv::KvCacheParams& kp = kv.params();
    if (kp.host_storage) throw Error("internal: the CUDA backend needs a KV cache without host storage");
    if (kp.type != kv::KvType::F32) throw Error("the CUDA backend keeps the KV cache in f32; set the KV cache type to f32");
    name_ = "cuda:" + std::to_string(o.device) + " " + device_name(o.device);
    n_batch_ = std::max<int64_t>(1, o.n_batch);
    n_used_ = std::max<int64_t>(1, c.n_expert_used);
    ff_max_ = std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}});
    for (const model::LayerWeights& L : w.layers)
        if (L.has_shared_expert()) ff_max_ = std::max(ff_max_, L.shared.gate.rows);

    // Ops the GPU leaves to the CPU: their weights stay in host memory.
    on_cpu_ = model::choose_cpu_ops(c, w, cuda_supports, o.cpu_ops, "CUDA backend");
    const auto gpu_computes = [&](model::Op op) { return std::find(on_cpu_.begin(), on_cpu_.end(), op) == on_cpu_.end(); };

    // Shared weights.
    if (gpu_computes(model::Op::Embed)) tok_embd_ = upload_matrix(w.tok_embd, Account::WeightsShared);
    if (gpu_computes(model::Op::OutputHead)) output_ = upload_matrix(w.output, Account::WeightsShared);
    output_norm_ = upload_vector(w.output_norm);
    for (const model::LayerWeights& L : w.layers) {
        DevLayer d;
        d.index = L.index;
        d.ffn = L.ffn;
        d.attn_norm = upload_vector(L.attn_norm);
        d.ffn_norm = upload_vector(L.ffn_norm);
        d.wq = upload_matrix(L.wq, Account::WeightsShared);
        d.wk = upload_matrix(L.wk, Account::WeightsShared);
        d.wv = upload_matrix(L.wv, Account::WeightsShared);
        d.wo = upload_matrix(L.wo, Account::WeightsShared);
        d.bq = upload_vector(L.bq);
        d.bk = upload_vector(L.bk);
        d.bv = upload_vector(L.bv);
        d.bo = upload_vector(L.bo);
        d.q_norm = upload_vector(L.q_norm);
        d.k_norm = upload_vector(L.k_norm);
        d.sinks = upload_vector(L.attn_sinks);
        if (c.mla) {
            d.wq_a = upload_matrix(L.wq_a, Account::WeightsShared);
            d.wkv_a = upload_matrix(L.wkv_a, Account::WeightsShared);
            d.q_a_norm = upload_vector(L.q_a_norm);
            d.kv_a_norm = upload_vector(L.kv_a_norm);
            d.k_up_t = upload_vector(*L.mla_k_up_t);
            d.v_up = upload_vector(*L.mla_v_up);
            d.kv_b_type = static_cast<kc::QType>(L.wkv_b.type);
        }
        if (c.recurrent(L.index)) {
            d.ssm_qkv = upload_matrix(L.ssm_qkv, Account::WeightsShared);
            d.ssm_z = upload_matrix(L.ssm_z, Account::WeightsShared);
            d.ssm_beta = upload_matrix(L.ssm_beta, Account::WeightsShared);
            d.ssm_alpha = upload_matrix(L.ssm_alpha, Account::WeightsShared);
            d.ssm_out = upload_matrix(L.ssm_out, Account::WeightsShared);
            d.ssm_conv = upload_vector(L.ssm_conv);
            d.ssm_dt_bias = upload_vector(L.ssm_dt_bias);
            d.ssm_a = upload_vector(L.ssm_a);
            d.ssm_norm = upload_vector(L.ssm_norm);
        }
        if (L.ffn == model::FfnKind::Dense) {
            if (gpu_computes(model::Op::DenseFfn))
                d.dense = {upload_matrix(L.dense.gate, Account::WeightsShared),
                           upload_matrix(L.dense.up, Account::WeightsShared),
                           upload_matrix(L.dense.down, Account::WeightsShared)};
        } else {
            d.router = upload_matrix(L.router, Account::WeightsRouter);
            d.n_ff_expert = L.n_ff_expert;
            d.router_bias = upload_vector(L.router_bias);
            d.select_bias = upload_vector(L.router_select_bias);
            d.expert_bias_gate = upload_vector(L.expert_bias_gate);
            d.expert_bias_up = upload_vector(L.expert_bias_up);
            d.expert_bias_down = upload_vector(L.expert_bias_down);
        }
        if (L.has_shared_expert() && gpu_computes(model::Op::SharedExpert)) {
            d.shared = {upload_matrix(L.shared.gate, Account::WeightsShared), upload_matrix(L.shared.up, Account::WeightsShared),
                        upload_matrix(L.shared.down, Account::WeightsShared)};
            if (!L.shared_gate.empty())
                d.shared_gate = {kc::QType::F32, upload_vector(L.shared_gate), 1, c.n_embd, c.n_embd * 4};
        }
        layers_.push_back(std::move(d));
    }
    cpu_layer_.assign(w.layers.size(), 0);
    int64_t moe_seen = 0;
    for (const model::LayerWeights& L : w.layers)
        if (L.ffn == model::FfnKind::Moe && (o.cpu_moe_layers < 0 || moe_seen++ < o.cpu_moe_layers))
            cpu_layer_[static_cast<size_t>(L.index)] = 1;
    host_mats_.resize(w.layers.size() * static_cast<size_t>(std::max<int64_t>(c.n_expert, 1)));
    host_cache_ = o.host_cache;
    if (host_cache_ && host_cache_->slots() < c.n_expert)
        throw Error("the host RAM expert cache has " + std::to_string(host_cache_->slots()) + " slots; the GPU needs at least " +
                    std::to_string(c.n_expert) + " (every expert of one MoE layer)");
    load_experts(o);
    load_cpu_experts(o);
    start_hybrid(o);
    start_host_compute(o);
    start_cpu_ops(o);

    // The KV pool, under the host cache's block ids.
    kv_block_tokens_ = kp.block_tokens;
    kv_head_stride_ = kp.block_tokens * kp.head_dim;
    kv_parts_ = kp.keys_only ? 1 : 2;  // latent rows are their own values
    kv_layer_stride_ = kv_parts_ * kp.n_head_kv * kv_head_stride_;
    kv_block_stride_ = kp.n_layer * kv_layer_stride_;
    kv_pool_ = DeviceBuffer(ledger_, Account::KvPages, Tier::Fast,
                            static_cast<uint64_t>(kp.n_blocks * kv_block_stride_) * sizeof(float));
    ledger_.set_used(Account::KvPages, Tier::Fast, kv_pool_.size());
    fill_zero(kv_pool_.data(), kv_pool_.size(), compute_, "clearing the KV pool");
    float* pool = kv_pool_.as<float>();
    const int64_t block_floats = kv_block_stride_;
    kv.set_block_copier([this, pool, block_floats](int32_t from, int32_t to) {
        copy_on_device(pool + to * block_floats, pool + from * block_floats, static_cast<uint64_t>(block_floats) * 4,
                       compute_, "copying a shared KV block");
    });

    // Scratch for n_batch tokens.
    const uint64_t B = static_cast<uint64_t>(n_batch_), d = static_cast<uint64_t>(c.n_embd);
    const uint64_t qd = static_cast<uint64_t>(c.n_head * c.head_dim), kvd = static_cast<uint64_t>(c.n_head_kv * c.head_dim);
    const uint64_t E = static_cast<uint64_t>(std::max<int64_t>(c.n_expert, 1)), U = static_cast<uint64_t>(n_used_);
    const uint64_t ff = static_cast<uint64_t>(ff_max_);
    x_ = scratch<float>(B * d, "x");
    h_ = scratch<float>(B * d, "h");
    tmp_ = scratch<float>(B * d, "tmp");
    q_ = scratch<float>(B * qd, "q");
    attn_ = scratch<float>(B * qd, "attn");
    k_ = scratch<float>(B * kvd, "k");
    v_ = scratch<float>(B * kvd, "v");
    logits_ = scratch<float>(B * static_cast<uint64_t>(c.n_vocab), "logits");
    rope_cs_ = scratch<float>(B * static_cast<uint64_t>(std::max<int64_t>(c.n_rot, 2)), "rope");
    router_ = scratch<float>(B * E, "router");
    route_w_ = scratch<float>(B * U, "route weights");
    look_ = scratch<float>(B * E, "lookahead");
    look_w_ = scratch<float>(B, "lookahead weights");
    xe_ = scratch<float>(B * U * d, "expert inputs");
    ye_ = scratch<float>(B * U * d, "expert outputs");
    yr_ = scratch<float>(B * U * d, "expert outputs by rank");
    ge_ = scratch<float>(B * std::max(U, uint64_t{1}) * ff, "gate");
    ue_ = scratch<float>(B * std::max(U, uint64_t{1}) * ff, "up");
    gate_logit_ = scratch<float>(B, "shared gate");
    combine_w_ = scratch<float>(B * U, "combine weights");
    row_w_ = scratch<float>(B * U, "expert input weights");
    q_temp_ = scratch<float>(B, "query temperatures");
    tokens_ = scratch<int32_t>(B, "tokens");
    route_ids_ = scratch<int32_t>(B * U, "route ids");
    look_ids_ = scratch<int32_t>(B, "lookahead ids");
    gather_ = scratch<int32_t>(B * U, "gather");
    rank_src_ = scratch<int32_t>(B * U, "rank rows");
    combine_dst_ = scratch<int32_t>(B * U, "combine rows");
    offsets_ = scratch<int32_t>(E + 1, "offsets");
    kv_block_ = scratch<int32_t>(B, "kv blocks");
    kv_slot_ = scratch<int32_t>(B, "kv slots");
    table_offset_ = scratch<int32_t>(B, "table offsets");
    n_keys_ = scratch<int32_t>(B, "key counts");
    want_rows_ = scratch<int32_t>(B, "logit rows");
    expert_ptrs_ = reinterpret_cast<const void**>(scratch<uint64_t>(3 * E, "expert pointers"));
    row_expert_ = scratch<int32_t>(B * U, "rows' experts");
    {
        int64_t widest = std::max({c.n_embd, c.n_head * c.head_dim, ff_max_, c.mla.q_lora_rank,
                                   c.n_head * c.mla.value_length});
        act_round_ = scratch<float>(B * static_cast<uint64_t>(widest), "rounded activations");
    }
    if (c.n_expert > 0) route_sel_ = scratch<float>(B * E, "router choice");
    if (c.ssm) {
        const uint64_t C = static_cast<uint64_t>(c.ssm.channels()), V = static_cast<uint64_t>(c.ssm.value_dim()),
                       H = static_cast<uint64_t>(c.ssm.n_v_heads);
        dn_mixed_ = scratch<float>(B * C, "delta net q|k|v");
        dn_conv_ = scratch<float>(B * C, "delta net conv");
        dn_z_ = scratch<float>(B * V, "delta net gate");
        dn_beta_ = scratch<float>(B * H, "delta net beta");
        dn_alpha_ = scratch<float>(B * H, "delta net decay");
        dn_o_ = scratch<float>(B * V, "delta net output");
        state_slot_ = scratch<int32_t>(2 * B, "state slots");
        h_state_slot_.resize(2 * B);
    }
    if (c.traits.attention_output_gate) {
        const uint64_t QH = B * static_cast<uint64_t>(c.n_head);
        q_gate_ = scratch<float>(2 * QH * static_cast<uint64_t>(c.head_dim), "query and gate");
        gate_ = scratch<float>(QH * static_cast<uint64_t>(c.head_dim), "attention gate");
        q_rows_ = scratch<int32_t>(QH, "query rows");
        gate_rows_ = scratch<int32_t>(QH, "gate rows");
        std::vector<int32_t> qr(QH), gr(QH);
        for (uint64_t r = 0; r < QH; ++r) {
            qr[r] = static_cast<int32_t>(2 * r);  // each head's query rows, then its gate's
            gr[r] = static_cast<int32_t>(2 * r + 1);
        }
        put(q_rows_, qr, QH);
        put(gate_rows_, gr, QH);
    }
    if (c.mla) {
        const uint64_t H = static_cast<uint64_t>(c.n_head);
        mla_qa_ = scratch<float>(B * static_cast<uint64_t>(std::max<int64_t>(c.mla.q_lora_rank, 1)), "latent query");
        mla_q_ = scratch<float>(B * H * static_cast<uint64_t>(c.mla.key_length), "query");
        mla_v_ = scratch<float>(B * H * static_cast<uint64_t>(c.mla.value_length), "values");
    }
    for (const DeviceBuffer& b : bufs_) ledger_.adjust_used(Account::Activations, Tier::Fast, static_cast<int64_t>(b.size()));

    h_tokens_.resize(B);
    h_ids_.resize(B * U);
    h_w_.resize(B * U);
    h_probs_.resize(B * E);
    h_look_.resize(B * E);
    h_gather_.resize(B * U);
    h_rank_src_.resize(B * U);
    h_dst_.resize(B * U);
    h_combine_w_.resize(B * U);
    h_row_w_.resize(B * U);
    h_q_temp_.resize(B);
    h_offsets_.resize(E + 1);
    h_count_.resize(E);
    h_fill_.resize(E);
    h_keys_.reserve(E);
    h_mats_.reserve(E);
    h_seen_.reserve(B);
    h_order_.reserve(E);
    h_ptrs_.resize(3 * E);
    h_kv_block_.resize(B);
    h_kv_slot_.resize(B);
    h_table_offset_.resize(B);
    h_n_keys_.resize(B);
    h_want_rows_.resize(B);
    h_row_expert_.resize(B * U);
    h_cs_.resize(B * static_cast<uint64_t>(std::max<int64_t>(c.n_rot, 2)));
    compute_.synchronize("loading the model onto the GPU");
    logger("cuda")->info("{}: {} in VRAM ({} expert slots of {})", name_, memory::format_bytes(ledger_.reserved(Tier::Fast)),
                         cached_ ? slots_ : stats_.experts_total, stats_.experts_total);
}

CudaForward::~CudaForward() {
    // Work in flight may still read the buffers: let it end before they go.
    compute_.synchronize_quietly();
    copy_.synchronize_quietly();
    // Experts a failed step took from the host cache go back to it.
    if (host_cache_)
        for (const int32_t e : taken_) host_cache_->release(taken_layer_, e);
}

const void* CudaForward::upload_bytes(const void* host, uint64_t bytes, Account a, const char* what) {
    if (auto it = uploaded_.find(host); it != uploaded_.end()) return it->second;
    weights_.emplace_back(ledger_, a, Tier::Fast, bytes);
    ledger_.adjust_used(a, Tier::Fast, static_cast<int64_t>(bytes));
    // From the file mapping (pageable): the runtime stages it, so the copy is
    // done when the call returns and the mapping may be dropped later.
    upload(weights_.back().data(), host, bytes, what);
    uploaded_[host] = weights_.back().data();
    return weights_.back().data();
}

DevMat CudaForward::upload_matrix(const model::Matrix& m, Account a) {
    if (!m) return {};
    const std::string what = "uploading " + std::string(m.name);
    return {static_cast<kc::QType>(m.type), upload_bytes(m.data, m.slab_bytes() * static_cast<uint64_t>(m.slabs), a, what.c_str()),
            m.rows, m.cols, static_cast<int64_t>(m.row_bytes)};
}

const float* CudaForward::upload_vector(const std::vector<float>& v) {
    if (v.empty()) return nullptr;
    return static_cast<const float*>(upload_bytes(v.data(), v.size() * sizeof(float), Account::WeightsShared, "uploading a norm or bias"));
}

void CudaForward::load_cpu_experts(const CudaForwardOptions& o) {
    const model::ModelWeights& w = model_.weights();
    uint64_t all = 0;
    for (const model::LayerWeights& L : w.layers)
        if (cpu_layer_[static_cast<size_t>(L.index)])
            for (int64_t e = 0; e < L.n_experts(); ++e) all += ffn_bytes(L.expert(e));
    if (all == 0 || host_cache_) return;  // three tiers: taken from the host cache as the CPU computes them
    // Their home: a copy in host RAM (the file's layout), in the slow tier.
    cpu_home_ = memory::AlignedBuffer(ledger_, Account::ExpertsHome, Tier::Slow, all);
    ledger_.adjust_used(Account::ExpertsHome, Tier::Slow, static_cast<int64_t>(all));
    uint64_t off = 0;
    for (const model::LayerWeights& L : w.layers) {
        if (!cpu_layer_[static_cast<size_t>(L.index)]) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            model::FfnMatrices f = L.expert(e);
            for (model::Matrix* m : {&f.gate, &f.up, &f.down}) {
                std::copy(m->data, m->data + m->slab_bytes(), cpu_home_.data() + off);
                m->data = cpu_home_.data() + off;
                m->slabs = 1;
                off += m->slab_bytes();
            }
            host_mats_[static_cast<size_t>(L.index * cfg_.n_expert + e)] = f;
        }
    }
}

void CudaForward::start_hybrid(const CudaForwardOptions& o) {
    if (o.placement != "auto" && o.placement != "transfer")
        throw Error("expert placement '" + o.placement + "' is unknown: use auto or transfer");
    if (o.placement != "auto" || !cached_) return;  // every expert resident: nothing is ever missing
    rates_ = o.rates;
    refresh_rates_ = o.refresh_rates;
    const size_t keys = home_offset_.size();
    routed_bits_.assign(keys, 0);
    routed_step_.assign(keys, 0);
    cpu_step_.assign(keys, 0);
    gpu_keys_.reserve(static_cast<size_t>(cfg_.n_expert));
    background_.reserve(static_cast<size_t>(cfg_.n_expert));
    h_cpu_.reserve(static_cast<size_t>(cfg_.n_expert));
    hybrid_ = true;
}

const std::shared_ptr<cpu::ThreadPool>& CudaForward::host_pool(const CudaForwardOptions& o) {
    if (!pool_) {
        const int threads = o.cpu_threads > 0 ? o.cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
        pool_ = std::make_shared<cpu::ThreadPool>(std::max(1, threads));
    }
    return pool_;
}

void CudaForward::start_cpu_ops(const CudaForwardOptions& o) {
    if (on_cpu_.empty()) return;
    const model::ModelConfig& c = cfg_;
    cpu_ops_ = model::cpu_ops_cost(c, model_.weights(), on_cpu_);
    model::CpuBackendParams p;
    p.n_batch = n_batch_;
    p.n_ctx = 1;  // it never attends
    p.pool = host_pool(o);
    host_ops_ = std::make_unique<model::CpuBackend>(c, p);
    fallback_ = std::make_unique<model::OpFallback>(*this, *host_ops_, c.n_embd, n_batch_, on_cpu_);
    host_ops_memory_.emplace(ledger_, Account::Activations, Tier::Slow, host_ops_->scratch_bytes() + fallback_->scratch_bytes());
    logger("cuda")->info("{}", cpu_ops_.describe());
}

void CudaForward::start_host_compute(const CudaForwardOptions& o) {
    if (!hybrid_ && std::find(cpu_layer_.begin(), cpu_layer_.end(), 1) == cpu_layer_.end()) return;
    if (cpu_step_.empty()) cpu_step_.assign(host_mats_.size(), 0);
    (void)host_pool(o);
    const size_t B = static_cast<size_t>(n_batch_), U = static_cast<size_t>(n_used_);
    const size_t d = static_cast<size_t>(cfg_.n_embd), ff = static_cast<size_t>(ff_max_);
    host_h_.resize(B * d);
    host_xe_.resize(B * U * d);
    host_ye_.resize(B * U * d);
    host_ge_.resize(B * U * ff);
    host_ue_.resize(B * U * ff);
    if (!hybrid_) return;
    if (rates_.cpu_bps <= 0 || rates_.cpu_flops <= 0) measure_cpu_rates();
    if (const std::string bad = rates_.validate(); !bad.empty()) {
        logger("cuda")->warn("{}: every missing expert is copied over the link instead", bad);
        hybrid_ = false;
        return;
    }
    stats_.link_bps = rates_.link_bps;
    stats_.cpu_bps = rates_.cpu_bps;
    stats_.cpu_flops = rates_.cpu_flops;
    logger("cuda")->info("hybrid placement: link {:.1f} GB/s, CPU experts {:.1f} GB/s and {:.0f} GFLOP/s, GPU {:.0f} GB/s "
                         "and {:.0f} GFLOP/s",
                         rates_.link_bps / 1e9, rates_.cpu_bps / 1e9, rates_.cpu_flops / 1e9, rates_.gpu_bps / 1e9,
                         rates_.gpu_flops / 1e9);
}

// The CPU's expert rates on this model's experts, with the kernels and
// threads that will compute them: one token through experts in turn (each
// read once, as a decode step reads a missing expert), then a batch of
// tokens through one expert (compute-bound).
void CudaForward::measure_cpu_rates() {
    using clock = std::chrono::steady_clock;
    int64_t taken_layer = -1;
    if (host_cache_) {
        // Three tiers: the experts of the first cached layer, loaded into the host cache.
        for (size_t li = 0; li < layers_.size() && taken_layer < 0; ++li)
            if (layers_[li].ffn == model::FfnKind::Moe && !cpu_layer_[li]) taken_layer = static_cast<int64_t>(li);
        if (taken_layer < 0) return;
        h_order_.clear();
        for (int32_t e = 0; e < cfg_.n_expert; ++e) h_order_.push_back(e);
        take_from_host_cache(taken_layer);
        h_order_.clear();
    }
    std::vector<size_t> keys;
    for (size_t k = 0; k < host_mats_.size(); ++k)
        if (host_mats_[k].gate) keys.push_back(k);
    if (keys.empty()) return;
    const int64_t d = cfg_.n_embd;
    std::fill(host_xe_.begin(), host_xe_.end(), 0.01f);
    host_ffn(host_mats_[keys[0]], host_xe_.data(), 1, host_ge_.data(), host_ue_.data(), host_ye_.data());  // warm-up
    double bytes = 0;
    const auto t0 = clock::now();
    for (size_t i = 0; i < keys.size(); ++i) {
        const model::FfnMatrices& f = host_mats_[keys[(i + 1) % keys.size()]];
        host_ffn(f, host_xe_.data(), 1, host_ge_.data(), host_ue_.data(), host_ye_.data());
        bytes += double(ffn_bytes(f));
        if (bytes >= 256.0 * (1 << 20) || clock::now() - t0 > std::chrono::milliseconds(200)) break;
    }
    const double read_s = std::chrono::duration<double>(clock::now() - t0).count();
    const int64_t tokens = std::min<int64_t>(32, static_cast<int64_t>(host_xe_.size()) / d);
    const model::FfnMatrices& f = host_mats_[keys[0]];
    double flops = 0;
    const auto t1 = clock::now();
    do {
        host_ffn(f, host_xe_.data(), tokens, host_ge_.data(), host_ue_.data(), host_ye_.data());
        flops += 2.0 * ffn_params(f) * double(tokens);
    } while (clock::now() - t1 < std::chrono::milliseconds(20));
    const double compute_s = std::chrono::duration<double>(clock::now() - t1).count();
    if (read_s > 0) rates_.cpu_bps = bytes / read_s;
    if (compute_s > 0) rates_.cpu_flops = flops / compute_s;
    if (taken_layer >= 0) release_to_host_cache(taken_layer);
}

void CudaForward::ok(int code, const char* op, int64_t layer) const {
    if (code == 0) return;
    check(code, layer >= 0 ? std::string(op) + " (layer " + std::to_string(layer) + ")" : std::string(op));
}

void CudaForward::gemm(const DevMat& w, const float* x, int64_t n, float* y, const char* op, int64_t layer) {
    if (kc::rounds_activations(w.type)) {
        // The reference multiplies quantized weights by activations rounded to 8 bits (Q8_0, Q8_1's
        // values, Q8_K): so does the GPU.
        ok(kc::round_activations(w.type, const_cast<float*>(x), w.cols, n, w.cols, act_round_, w.cols, compute_.get()), op,
           layer);
        x = act_round_;
    }
    ok(kc::gemm_q(w.type, w.data, w.row_bytes, w.rows, w.cols, x, w.cols, n, y, w.rows, compute_.get()), op, layer);
}

void CudaForward::ffn_dense(const DevFfn& f, const float* x, int64_t n, float* y, int64_t ff, int64_t layer) {
    gemm(f.gate, x, n, ge_, "ffn gate", layer);
    gemm(f.up, x, n, ue_, "ffn up", layer);
    ok(kc::swiglu(ge_, ue_, ge_, n * ff, compute_.get()), "swiglu", layer);
    gemm(f.down, ge_, n, y, "ffn down", layer);
}

void CudaForward::place_experts(int64_t li) {
    const int64_t E = cfg_.n_expert;
    const model::LayerWeights& L = model_.weights().layers[static_cast<size_t>(li)];
    h_order_.clear();
    h_cpu_.clear();
    gpu_keys_.clear();
    background_.clear();
    if (cpu_layer_[static_cast<size_t>(li)]) {
        for (int32_t e = 0; e < E; ++e)
            if (h_count_[static_cast<size_t>(e)] > 0) h_order_.push_back(e);
        gpu_groups_ = 0;
        return;
    }
    // Resident first (their compute overlaps the copies of the rest), then
    // the misses copied now; the misses the CPU computes go last.
    for (int32_t e = 0; e < E; ++e) {
        const int64_t count = h_count_[static_cast<size_t>(e)];
        if (count == 0) continue;
        const auto k = static_cast<uint32_t>(li * E + e);
        if (!cached_ || slot_of_[k] >= 0) {
            h_order_.push_back(e);
            gpu_keys_.push_back(k);
        }
    }
    for (int32_t e = 0; e < E; ++e) {
        const int64_t count = h_count_[static_cast<size_t>(e)];
        const auto k = static_cast<uint32_t>(li * E + e);
        if (count == 0 || !cached_ || slot_of_[k] >= 0) continue;
        if (hybrid_ && miss_goes_to_cpu(k, L.expert(e), count)) {
            h_cpu_.push_back(e);
        } else {
            h_order_.push_back(e);
            gpu_keys_.push_back(k);
        }
    }
    gpu_groups_ = h_order_.size();
    h_order_.insert(h_order_.end(), h_cpu_.begin(), h_cpu_.end());
    stats_.demanded += h_cpu_.size();  // misses (the GPU's are counted as they are made resident)
    if (!hybrid_) return;
    // Every routed expert's recent steps (its expected reuse), this one included.
    for (int32_t e = 0; e < E; ++e) {
        if (h_count_[static_cast<size_t>(e)] == 0) continue;
        const auto k = static_cast<size_t>(li * E + e);
        const uint64_t age = step_ - routed_step_[k];
        routed_bits_[k] = (age >= 32 ? 0u : routed_bits_[k] << age) | 1u;
        routed_step_[k] = step_;
    }
}

// The cost model's choice for a missing expert routed `tokens` tokens this
// step, as the simulator replays it (analysis/hybrid_sim.h): over the link
// when the copy beats the CPU for this step's tokens alone; otherwise on the
// CPU, and also copied in the background when its expected reuse (the steps
// of the last kReuseWindow that routed it) repays the copy and the link's
// queue of background copies drains within a step.
bool CudaForward::miss_goes_to_cpu(uint32_t k, const model::FfnMatrices& f, int64_t tokens) {
    const double bytes = double(ffn_bytes(f)), params = ffn_params(f);
    const experts::MissCost now = experts::choose_miss_path(rates_, bytes, params, tokens, 0.0);
    if (now.path == experts::MissPath::Link) {
        ++stats_.miss_link;
        return false;
    }
    const uint64_t age = step_ - routed_step_[k];
    const uint32_t earlier = age >= 32 ? 0u : routed_bits_[k] << age;  // bit i: routed i steps ago
    const double reuse = double(std::popcount(earlier & ((1u << (kReuseWindow + 1)) - 2u)));
    const double cpu1 = roofline_s(bytes, params, 1, rates_.cpu_bps, rates_.cpu_flops);
    const double gpu1 = roofline_s(bytes, params, 1, rates_.gpu_bps, rates_.gpu_flops);
    // Counted as "both" (and its link time queued) once copy_in_background makes the copy.
    if (reuse * (cpu1 - gpu1) > now.link_s && backlog_s_ + now.link_s <= last_step_s_) background_.push_back(k);
    else ++stats_.miss_cpu;
    return true;
}

void CudaForward::routed_experts(const DevLayer& L, int64_t n, int64_t rows, int64_t combine_rows) {
    const int64_t d = cfg_.n_embd, li = L.index;
    const int64_t gpu_rows = h_offsets_[gpu_groups_];
    put(rank_src_, h_rank_src_, static_cast<size_t>(combine_rows));
    put(combine_dst_, h_dst_, static_cast<size_t>(combine_rows));
    put(combine_w_, h_combine_w_, static_cast<size_t>(combine_rows));
    if (gpu_groups_ > 0) {
        put(gather_, h_gather_, static_cast<size_t>(gpu_rows));
        if (expert_act_ == model::FfnAct::SwigluOai) put(row_expert_, h_row_expert_, static_cast<size_t>(gpu_rows));
        put(offsets_, h_offsets_, gpu_groups_ + 1);
        ok(kc::get_rows(kc::QType::F32, h_, d * 4, d, gather_, gpu_rows, xe_, compute_.get()), "gathering expert inputs", li);
        if (expert_weight_before_) {
            put(row_w_, h_row_w_, static_cast<size_t>(gpu_rows));
            ok(kc::scale_rows(xe_, d, row_w_, gpu_rows, d, compute_.get()), "weighting expert inputs", li);
        }
        experts_on_gpu(L, gpu_groups_);
    }
    // Queued behind the GPU's experts: the copies run while the CPU computes.
    // From a host cache's slots (pageable memory) a copy may hold the calling
    // thread until the copy stream reaches it, behind this layer's GPU work:
    // there the copies go after the CPU's experts instead.
    if (!background_.empty() && !host_cache_) copy_in_background(li);
    if (rows > gpu_rows) experts_on_host(li, gpu_rows, rows);
    if (!background_.empty() && host_cache_) copy_in_background(li);

    // Combine in router-rank order, as the CPU does.
    ok(kc::get_rows(kc::QType::F32, ye_, d * 4, d, rank_src_, combine_rows, yr_, compute_.get()), "ordering expert outputs", li);
    fill_zero(tmp_, static_cast<uint64_t>(n * d) * 4, compute_, "clearing the expert sum");
    ok(kc::scatter_add_rows(yr_, combine_w_, combine_dst_, combine_rows, d, tmp_, compute_.get()), "combining experts", li);
}

void CudaForward::experts_on_gpu(const DevLayer& L, size_t groups) {
    const int64_t d = cfg_.n_embd, ff = L.n_ff_expert, li = L.index;
    // Waves of at most `slots` experts (all at once when every expert is resident).
    const size_t wave_max = cached_ ? static_cast<size_t>(slots_) : groups;
    std::vector<DevFfn>& mats = h_mats_;
    for (size_t g0 = 0; g0 < groups; g0 += wave_max) {
        const size_t g1 = std::min(groups, g0 + wave_max);
        const int32_t* wave = h_order_.data() + g0;
        const size_t G = g1 - g0;
        make_resident(wave, G, li, &mats);
        int32_t max_group = 1;
        for (size_t g = 0; g < G; ++g) {
            h_ptrs_[g] = mats[g].gate.data;
            h_ptrs_[G + g] = mats[g].up.data;
            h_ptrs_[2 * G + g] = mats[g].down.data;
            max_group = std::max(max_group, h_count_[static_cast<size_t>(wave[g])]);
        }
        const int64_t r0 = h_offsets_[g0], r1 = h_offsets_[g1];
        bool same = true;  // stacked tensors: one type and shape for all (split files may differ)
        for (size_t g = 1; g < G; ++g)
            for (int m = 0; m < 3; ++m) {
                const DevMat& a = m == 0 ? mats[g].gate : m == 1 ? mats[g].up : mats[g].down;
                const DevMat& b = m == 0 ? mats[0].gate : m == 1 ? mats[0].up : mats[0].down;
                same &= a.type == b.type && a.rows == b.rows && a.cols == b.cols && a.row_bytes == b.row_bytes;
            }
        if (!same) {
            for (size_t g = 0; g < G; ++g) {
                const int64_t a = h_offsets_[g0 + g], cnt = h_offsets_[g0 + g + 1] - a;
                gemm(mats[g].gate, xe_ + a * d, cnt, ge_ + a * ff, "expert gate", li);
                gemm(mats[g].up, xe_ + a * d, cnt, ue_ + a * ff, "expert up", li);
                expert_activation(L, a, a + cnt);
                gemm(mats[g].down, ge_ + a * ff, cnt, ye_ + a * d, "expert down", li);
                expert_down_bias(L, a, a + cnt);
            }
            continue;
        }
        // Stream order keeps this upload behind the previous wave's reads of the array.
        put(expert_ptrs_, h_ptrs_, 3 * G);
        // As gemm(): the gathered inputs, in place.
        ok(kc::round_activations(mats[0].gate.type, xe_ + r0 * d, d, r1 - r0, d, nullptr, 0, compute_.get()), "expert inputs",
           li);
        const DevMat& g0m = mats[0].gate;
        const DevMat& d0m = mats[0].down;
        const int32_t* off = offsets_ + g0;
        ok(kc::gemm_q_grouped(g0m.type, expert_ptrs_, g0m.row_bytes, g0m.rows, g0m.cols, xe_, d, off,
                              static_cast<int64_t>(G), max_group, ge_, ff, compute_.get()),
           "expert gate", li);
        ok(kc::gemm_q_grouped(mats[0].up.type, expert_ptrs_ + G, mats[0].up.row_bytes, mats[0].up.rows, mats[0].up.cols,
                              xe_, d, off, static_cast<int64_t>(G), max_group, ue_, ff, compute_.get()),
           "expert up", li);
        expert_activation(L, r0, r1);
        ok(kc::round_activations(d0m.type, ge_ + r0 * ff, ff, r1 - r0, ff, nullptr, 0, compute_.get()), "expert activations",
           li);
        ok(kc::gemm_q_grouped(d0m.type, expert_ptrs_ + 2 * G, d0m.row_bytes, d0m.rows, d0m.cols, ge_, ff, off,
                              static_cast<int64_t>(G), max_group, ye_, d, compute_.get()),
           "expert down", li);
        expert_down_bias(L, r0, r1);
    }

}

// Grouped rows [r0, r1) of ge_/ue_: SwiGLU into ge_, or the clamped SwiGLU
// around each row's expert's gate and up biases.
void CudaForward::expert_activation(const DevLayer& L, int64_t r0, int64_t r1) {
    const int64_t ff = L.n_ff_expert, li = L.index;
    float *g = ge_ + r0 * ff, *u = ue_ + r0 * ff;
    if (expert_act_ == model::FfnAct::Swiglu) {
        ok(kc::swiglu(g, u, g, (r1 - r0) * ff, compute_.get()), "expert swiglu", li);
        return;
    }
    ok(kc::add_bias_rows(g, ff, L.expert_bias_gate, ff, row_expert_ + r0, r1 - r0, ff, compute_.get()), "expert gate bias", li);
    ok(kc::add_bias_rows(u, ff, L.expert_bias_up, ff, row_expert_ + r0, r1 - r0, ff, compute_.get()), "expert up bias", li);
    ok(kc::swiglu_oai(g, u, g, (r1 - r0) * ff, 1.702f, 7.0f, compute_.get()), "expert clamped swiglu", li);
}

void CudaForward::expert_down_bias(const DevLayer& L, int64_t r0, int64_t r1) {
    if (expert_act_ == model::FfnAct::Swiglu) return;
    const int64_t d = cfg_.n_embd;
    ok(kc::add_bias_rows(ye_ + r0 * d, d, L.expert_bias_down, d, row_expert_ + r0, r1 - r0, d, compute_.get()),
       "expert down bias", L.index);
}

// Y[t * W.rows + r] = W.row(r) . X[t] on the host's cores, with the CPU
// kernels (activations quantized as the CPU backend quantizes them).
void CudaForward::host_matmul(const model::Matrix& W, const float* X, int64_t n, float* Y) {
    const int64_t cols = W.cols;
    const int64_t ab = (kernels::activation_row_bytes(W.type, cols) + 3) / 4 * 4;
    if (host_act_.size() < static_cast<size_t>(n * ab)) host_act_.resize(static_cast<size_t>(n * ab));
    for (int64_t t = 0; t < n; ++t) kernels::quantize_activation(W.type, X + t * cols, host_act_.data() + t * ab, cols);
    pool_->parallel_for(W.rows, 16, [&](int64_t r0, int64_t r1, int) {
        kernels::gemm_q(W.type, W.row(r0), W.row_bytes, r1 - r0, host_act_.data(), ab, n, cols, Y + r0, W.rows);
    });
}

void CudaForward::host_ffn(const model::FfnMatrices& f, const float* x, int64_t n, float* g, float* u, float* y,
                           const HostBias* bias) {
    namespace ops = kernels::ops;
    const int64_t ff = f.gate.rows, d = f.down.rows;
    host_matmul(f.gate, x, n, g);
    host_matmul(f.up, x, n, u);
    if (!bias) {
        ops::swiglu(g, u, g, n * ff);
        host_matmul(f.down, g, n, y);
        return;
    }
    for (int64_t t = 0; t < n; ++t) {  // as the CPU backend's clamped experts
        ops::axpy(1.0f, bias->gate, g + t * ff, ff);
        ops::axpy(1.0f, bias->up, u + t * ff, ff);
    }
    ops::swiglu_oai(g, u, g, n * ff, 1.702f, 7.0f);
    host_matmul(f.down, g, n, y);
    for (int64_t t = 0; t < n; ++t) ops::axpy(1.0f, bias->down, y + t * d, d);
}

// Rows [row0, rows) of the grouped experts (h_order_ from gpu_groups_ on) on
// the host's cores from host RAM, while the GPU works through what was
// queued; their outputs go to their rows of ye_ for the combine.
void CudaForward::experts_on_host(int64_t li, int64_t row0, int64_t rows) {
    using clock = std::chrono::steady_clock;
    const int64_t d = cfg_.n_embd, E = cfg_.n_expert;
    const int64_t ff = model_.weights().layers[static_cast<size_t>(li)].n_ff_expert;
    for (int64_t r = row0; r < rows; ++r) {
        std::copy_n(host_h_.data() + h_gather_[static_cast<size_t>(r)] * d, d, host_xe_.data() + r * d);
        if (expert_weight_before_) kernels::ref::scale_rows(host_xe_.data() + r * d, d, &h_row_w_[static_cast<size_t>(r)], 1, d);
    }
    const auto t0 = clock::now();
    double predicted_s = 0;
    for (size_t g = gpu_groups_; g < h_order_.size(); ++g) {
        const size_t k = static_cast<size_t>(li * E + h_order_[g]);
        const model::FfnMatrices& f = host_mats_[k];
        const int64_t a = h_offsets_[g], m = h_offsets_[g + 1] - a;
        HostBias bias;
        if (const model::LayerWeights& L = model_.weights().layers[static_cast<size_t>(li)]; !L.expert_bias_gate.empty()) {
            const int64_t e = h_order_[g];
            bias = {L.expert_bias_gate.data() + e * ff, L.expert_bias_up.data() + e * ff, L.expert_bias_down.data() + e * d};
        }
        host_ffn(f, host_xe_.data() + a * d, m, host_ge_.data() + a * ff, host_ue_.data() + a * ff, host_ye_.data() + a * d,
                 bias.gate ? &bias : nullptr);
        if (hybrid_) predicted_s += roofline_s(double(ffn_bytes(f)), ffn_params(f), m, rates_.cpu_bps, rates_.cpu_flops);
        cpu_step_[k] = step_ + 1;
        ++stats_.cpu_computed;
    }
    // The CPU's rates follow what it does now (other load, thermal limits):
    // both scaled by the step's predicted over measured time, smoothed.
    const double took_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (hybrid_ && refresh_rates_ && took_s > 0 && predicted_s > 0) {
        const double f = 1.0 + 0.2 * (std::clamp(predicted_s / took_s, 0.25, 4.0) - 1.0);
        rates_.cpu_bps *= f;
        rates_.cpu_flops *= f;
        stats_.cpu_bps = rates_.cpu_bps;
        stats_.cpu_flops = rates_.cpu_flops;
    }
    copy_to_device(ye_ + row0 * d, host_ye_.data() + row0 * d, static_cast<uint64_t>((rows - row0) * d) * 4, compute_,
                   "the CPU experts' output");
}

// The link's rate from this step's timed demand copies (bytes over their
// time on the copy stream), smoothed; untimed (emulated) copies leave it.
void CudaForward::refresh_link_rate() {
    uint64_t bytes = 0;
    double seconds = 0;
    for (const LinkTiming& t : link_timings_) {
        const double ms = t.end->ms_since(*t.begin);
        if (ms <= 0) continue;
        bytes += t.bytes;
        seconds += ms * 1e-3;
    }
    link_timings_.clear();
    if (!hybrid_ || !refresh_rates_ || bytes == 0 || seconds <= 0) return;
    rates_.link_bps += 0.2 * (double(bytes) / seconds - rates_.link_bps);
    stats_.link_bps = rates_.link_bps;
}


}  // namespace strata::backend::cuda::pass

namespace strata::backend::cuda {

namespace kc = kernels::cuda;
using pass::CudaForward;

std::string cuda_unsupported_tensor(const model::Model& m) {
    const model::ModelWeights& w = m.weights();
    const model::ModelConfig& c = m.config();
    try {
        (void)model::choose_cpu_ops(c, w, pass::cuda_supports, {}, "CUDA backend");
    } catch (const Error& e) {
        return e.what();
    }
    std::string bad;
    auto check_type = [&](const model::Matrix& x) {
        if (!bad.empty() || !x) return;
        if (!kc::known_qtype(static_cast<uint32_t>(x.type)))
            bad = "tensor " + std::string(x.name) + " has a weight type the CUDA backend has no kernel for (" +
                  kernels::type_traits(x.type)->name + "); use --device cpu";
    };
    check_type(w.tok_embd);
    check_type(w.output);
    for (const model::LayerWeights& L : w.layers) {
        for (const model::Matrix* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.wq_a, &L.wkv_a, &L.router, &L.dense.gate, &L.dense.up, &L.dense.down,
                                       &L.shared.gate, &L.shared.up, &L.shared.down})
            check_type(*x);
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            const model::FfnMatrices f = L.expert(e);
            check_type(f.gate);
            check_type(f.up);
            check_type(f.down);
        }
    }
    return bad;
}

std::string cuda_cpu_ops(const model::Model& m) {
    try {
        const std::vector<model::Op> ops = model::choose_cpu_ops(m.config(), m.weights(), pass::cuda_supports, {}, "CUDA backend");
        return model::cpu_ops_cost(m.config(), m.weights(), ops).describe();
    } catch (const Error& e) {
        return e.what();
    }
}

experts::ExpertCache* vram_expert_cache(model::DeviceForward* pass) {
    auto* f = dynamic_cast<CudaForward*>(pass);
    return f && f->experts_total() > 0 ? f : nullptr;
}

std::unique_ptr<model::DeviceForward> make_cuda_forward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger,
                                                        const CudaForwardOptions& options) {
    return std::make_unique<CudaForward>(m, kv, ledger, options);
}

}  // namespace strata::backend::cuda
