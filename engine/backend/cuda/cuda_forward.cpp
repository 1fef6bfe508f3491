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
#include "common/log.h"
#include "experts/cache_policy.h"
#include "experts/expert_store.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "memory/aligned_buffer.h"
#include "model/arch/arch.h"
#include "model/model.h"

namespace strata::backend::cuda {

namespace kc = kernels::cuda;
using memory::Account;
using memory::Tier;

namespace {

struct DevMat {
    kc::QType type = kc::QType::F32;
    const void* data = nullptr;
    int64_t rows = 0, cols = 0, row_bytes = 0;
    explicit operator bool() const { return data != nullptr; }
};

struct DevFfn {
    DevMat gate, up, down;
};

struct DevLayer {
    int64_t index = 0;
    model::FfnKind ffn = model::FfnKind::Dense;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
    const float *q_norm = nullptr, *k_norm = nullptr;
    DevMat wq, wk, wv, wo;
    DevFfn dense;
    DevMat router;
    int64_t n_ff_expert = 0;
    std::vector<DevFfn> experts;  // every routed expert in VRAM; empty when they go through the cache
    DevFfn shared;
    DevMat shared_gate;           // 1 x n_embd F32: the shared expert's gate logit per token
};

// One expert's matrices at a slot base: gate | up | down, each rows * row_bytes.
DevFfn ffn_at(const uint8_t* base, const model::FfnMatrices& f) {
    DevFfn d;
    uint64_t off = 0;
    auto one = [&](const model::Matrix& m) {
        DevMat x{static_cast<kc::QType>(m.type), base + off, m.rows, m.cols, static_cast<int64_t>(m.row_bytes)};
        off += m.slab_bytes();
        return x;
    };
    d.gate = one(f.gate);
    d.up = one(f.up);
    d.down = one(f.down);
    return d;
}

uint64_t ffn_bytes(const model::FfnMatrices& f) { return f.gate.slab_bytes() + f.up.slab_bytes() + f.down.slab_bytes(); }

double ffn_params(const model::FfnMatrices& f) {
    return double(f.gate.rows * f.gate.cols + f.up.rows * f.up.cols + f.down.rows * f.down.cols);
}

// The roofline time of an expert of `bytes` and `params` over `tokens` tokens.
double roofline_s(double bytes, double params, int64_t tokens, double bps, double flops) {
    return std::max(bytes / bps, 2.0 * params * double(tokens) / flops);
}

// Lets go every expert but those in `keys` (the ones a step still needs).
struct KeysSpared final : experts::EvictableFilter {
    explicit KeysSpared(const std::vector<uint32_t>& k) : keys(k) {}
    bool evictable(experts::ExpertKey k) const override { return std::find(keys.begin(), keys.end(), k) == keys.end(); }
    const std::vector<uint32_t>& keys;
};

// Steps that count as "recent" for an expert's expected reuse (as the
// simulator's reuse window, analysis/hybrid_sim.h).
constexpr uint64_t kReuseWindow = 16;

class CudaForward final : public model::DeviceForward {
public:
    CudaForward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger, const CudaForwardOptions& o);
    ~CudaForward() override;

    void run(const model::DeviceChunk& c, const kv::KvCache& kv, const model::RoutingObserver& routing,
             const model::LookaheadObserver& lookahead) override;
    std::string name() const override { return name_; }
    model::DeviceExpertStats expert_stats() const override { return stats_; }
    void resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) const override;
    void cpu_mask(int64_t layer, uint8_t* mask, int64_t n_expert, int64_t steps) const override;
    void prefetch(int64_t layer, const int32_t* experts, int64_t n) override;

private:
    // --- loading ---
    const void* upload_bytes(const void* host, uint64_t bytes, Account a, const char* what);
    DevMat upload_matrix(const model::Matrix& m, Account a);
    const float* upload_vector(const std::vector<float>& v);
    void load_experts(const CudaForwardOptions& o);
    void load_cpu_experts(const CudaForwardOptions& o);
    void start_host_compute(const CudaForwardOptions& o);
    void start_hybrid(const CudaForwardOptions& o);
    void measure_cpu_rates();

    // --- the pass ---
    void ok(int code, const char* op, int64_t layer = -1) const;
    void gemm(const DevMat& w, const float* x, int64_t n, float* y, const char* op, int64_t layer);
    void attention(const DevLayer& L, int64_t n);
    void ffn_dense(const DevFfn& f, const float* x, int64_t n, float* y, int64_t ff, int64_t layer);
    void ffn_moe(const DevLayer& L, const model::DeviceChunk& c, const model::RoutingObserver& routing);
    // Orders the layer's routed experts into h_order_: those the GPU computes
    // (resident, then copied now) in its first gpu_groups_ entries, then those
    // the CPU computes (a --cpu-moe layer: all; hybrid: the misses the cost
    // model sends there).
    void place_experts(int64_t layer);
    // Three tiers: takes the layer's experts VRAM lacks from the host cache
    // (waiting for its loads from the file) into host_mats_, and gives them back.
    void take_from_host_cache(int64_t layer);
    void release_to_host_cache(int64_t layer);
    bool miss_goes_to_cpu(uint32_t key, const model::FfnMatrices& f, int64_t tokens);
    // The routed experts of one layer over the grouped rows: the GPU's part
    // queued first, the CPU's computed meanwhile, then one combine of both in
    // router-rank order.
    void routed_experts(const DevLayer& L, int64_t n, int64_t rows, int64_t combine_rows);
    void experts_on_gpu(const DevLayer& L, size_t groups);
    void experts_on_host(int64_t layer, int64_t row0, int64_t rows);
    void copy_in_background(int64_t layer);
    void refresh_link_rate();
    void host_matmul(const model::Matrix& W, const float* X, int64_t n, float* Y);
    void host_ffn(const model::FfnMatrices& f, const float* x, int64_t n, float* g, float* u, float* y);
    void lookahead(const DevLayer& next, const model::DeviceChunk& c, const model::LookaheadObserver& obs);
    // The expert cache: makes `keys` resident (loading the missing ones on the
    // copy stream, ordered before the compute that follows) and returns their
    // matrices; `keys` must fit the slots together.
    void make_resident(const int32_t* experts, size_t n, int64_t layer, std::vector<DevFfn>* out);
    int32_t take_slot(const std::vector<uint32_t>& in_use);
    // A free slot, else the slot of the policy's victim among the experts
    // `filter` lets go (now out of the cache); -1 when there is none.
    int32_t free_or_evict(const experts::EvictableFilter& filter);
    // Copies key k from its host RAM copy `f` (host_mats_[k]) into slot s on
    // the copy stream (after the compute queued so far, which may still read
    // the slot's old expert).
    // With `timing`, its begin event is recorded once the copy stream is
    // through the wait, so begin..end times copies alone (the link's rate).
    struct LinkTiming;
    void copy_into_slot(uint32_t k, int32_t s, const model::FfnMatrices& f, LinkTiming* timing = nullptr);

    template <class T>
    T* scratch(uint64_t count, const char* what) {
        bufs_.emplace_back(ledger_, Account::Activations, Tier::Fast, std::max<uint64_t>(count, 1) * sizeof(T));
        (void)what;
        return bufs_.back().as<T>();
    }
    template <class T>
    void put(T* dst, const std::vector<T>& src, size_t n) {
        copy_to_device(dst, src.data(), n * sizeof(T), compute_, "copying step data to the GPU");
    }

    const model::Model& model_;
    const model::ModelConfig& cfg_;
    memory::Ledger& ledger_;
    std::string name_;
    int device_ = 0;
    int64_t n_batch_ = 0;
    int64_t n_used_ = 0;
    int64_t ff_max_ = 0;
    Stream compute_;
    Stream copy_;

    std::vector<DeviceBuffer> weights_;   // every uploaded tensor
    std::vector<DeviceBuffer> bufs_;      // scratch
    std::unordered_map<const void*, const void*> uploaded_;  // host tensor -> its device copy (tied embeddings)
    DevMat tok_embd_, output_;
    const float* output_norm_ = nullptr;
    std::vector<DevLayer> layers_;

    // KV pool: [block][layer][K|V][kv head][slot][head_dim] floats.
    DeviceBuffer kv_pool_;
    int64_t kv_block_tokens_ = 0, kv_head_stride_ = 0, kv_layer_stride_ = 0, kv_block_stride_ = 0;

    // Device scratch, sized for n_batch tokens.
    float *x_ = nullptr, *h_ = nullptr, *tmp_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr;
    float *router_ = nullptr, *route_w_ = nullptr, *look_ = nullptr, *look_w_ = nullptr;
    float *xe_ = nullptr, *ge_ = nullptr, *ue_ = nullptr, *ye_ = nullptr, *yr_ = nullptr, *gate_logit_ = nullptr;
    float *logits_ = nullptr, *rope_cs_ = nullptr, *combine_w_ = nullptr;
    int32_t *tokens_ = nullptr, *route_ids_ = nullptr, *look_ids_ = nullptr, *gather_ = nullptr, *rank_src_ = nullptr;
    int32_t *combine_dst_ = nullptr, *offsets_ = nullptr, *kv_block_ = nullptr, *kv_slot_ = nullptr;
    int32_t *table_offset_ = nullptr, *n_keys_ = nullptr, *want_rows_ = nullptr;
    const void** expert_ptrs_ = nullptr;  // 3 x n_expert device pointers (gate, up, down of each group)
    DeviceBuffer tables_;                 // block tables of the chunk's sequences, grown as needed
    uint64_t tables_cap_ = 0;

    // Host mirrors of the per-step arrays (sized once).
    std::vector<int32_t> h_tokens_, h_ids_, h_gather_, h_rank_src_, h_dst_, h_offsets_, h_kv_block_, h_kv_slot_;
    std::vector<int32_t> h_tables_, h_table_offset_, h_n_keys_, h_want_rows_, h_count_, h_order_;
    std::vector<float> h_w_, h_probs_, h_cs_, h_combine_w_, h_look_;
    std::vector<const void*> h_ptrs_;
    // Per-step working lists, kept so the step allocates nothing.
    std::vector<int32_t> h_fill_;
    std::vector<uint32_t> h_keys_;
    std::vector<DevFfn> h_mats_;
    std::vector<std::pair<kv::SeqId, int32_t>> h_seen_;

    // Expert cache (when not every expert is resident).
    bool cached_ = false;
    int64_t slots_ = 0;
    uint64_t slot_bytes_ = 0;
    DeviceBuffer arena_;
    PinnedBuffer home_;                   // every expert's copy (two tiers), else empty
    std::vector<uint64_t> home_offset_;   // per key (UINT64_MAX: not a cached expert)
    // Three tiers: host RAM is this cache over the file; the experts of the
    // layer being computed that VRAM lacks are taken from it (host_mats_
    // points into its slots meanwhile) and released after the layer.
    experts::ExpertStore* host_cache_ = nullptr;
    std::vector<int32_t> taken_;          // the experts taken from it and not given back yet
    int64_t taken_layer_ = -1;            // their layer
    size_t needed_from_host_ = 0;
    std::vector<int32_t> slot_of_;        // per key: its slot, or -1
    std::vector<uint32_t> key_of_slot_;   // per slot: its key, or UINT32_MAX
    std::vector<int32_t> free_slots_;
    std::unique_ptr<experts::CachePolicy> policy_;
    std::unique_ptr<Event> compute_done_;  // the last wave's compute: copies into reused slots wait for it
    // Per slot: a copy not yet waited for by the compute stream (a prefetch
    // or a background copy: kPrefetched, kBackground; 0: none).
    std::vector<std::unique_ptr<Event>> slot_ready_;
    std::vector<uint8_t> slot_prefetched_;
    static constexpr uint8_t kPrefetched = 1, kBackground = 2;
    int64_t current_layer_ = -1;          // the MoE layer the pass is in (prefetch spares it)
    std::unique_ptr<Event> copies_done_;
    std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>> stalls_;  // compute waiting on copies
    struct LinkTiming {
        std::unique_ptr<Event> begin, end;
        uint64_t bytes = 0;
    };
    std::vector<LinkTiming> link_timings_;  // this step's demand copies, timed on the copy stream
    model::DeviceExpertStats stats_;

    // Experts the CPU computes: per layer whether all its experts run there
    // (--cpu-moe / --n-cpu-moe), per key the expert's matrices in host RAM
    // (cpu_home_ for those layers, home_ for the cached ones under hybrid
    // placement), the compute pool and host scratch.
    std::vector<uint8_t> cpu_layer_;
    memory::AlignedBuffer cpu_home_;
    std::vector<model::FfnMatrices> host_mats_;
    std::unique_ptr<cpu::ThreadPool> pool_;
    std::vector<float> host_h_, host_xe_, host_ge_, host_ue_, host_ye_;
    std::vector<uint8_t> host_act_;
    size_t gpu_groups_ = 0;  // h_order_[0, gpu_groups_) on the GPU, the rest on the CPU

    // Hybrid placement (placement "auto" over a VRAM cache).
    bool hybrid_ = false;
    bool refresh_rates_ = true;
    experts::HybridRates rates_;
    uint64_t step_ = 0;                   // run() calls so far
    std::vector<uint32_t> routed_bits_;   // per key: bit i set = routed i steps before routed_step_[key]
    std::vector<uint64_t> routed_step_;
    std::vector<uint64_t> cpu_step_;      // per key: 1 + the last step the CPU computed it (0: never)
    std::vector<uint32_t> gpu_keys_;      // this layer's keys the GPU computes (background copies spare them)
    std::vector<uint32_t> background_;    // this layer's keys computed on the CPU and copied in the background
    std::vector<int32_t> h_cpu_;          // this layer's experts for the CPU, while ordering
    double last_step_s_ = 0;              // the previous step's wall time
    double backlog_s_ = 0;                // background copies still queued on the link (estimated)
};

CudaForward::CudaForward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger, const CudaForwardOptions& o)
    // The device is made current before the streams are created (member
    // order: device_ comes first), since a stream belongs to the current device.
    : model_(m), cfg_(m.config()), ledger_(ledger), device_((set_device(o.device), o.device)) {
    const model::ModelConfig& c = cfg_;
    const model::ModelWeights& w = m.weights();  // the file's layout
    if (const std::string bad = cuda_unsupported_tensor(m); !bad.empty()) throw Error(bad);
    if (c.head_dim > 256) throw Error("the CUDA backend's attention takes heads of up to 256 dims; this model's are " +
                                      std::to_string(c.head_dim) + " (use --device cpu)");
    const kv::KvCacheParams& kp = kv.params();
    if (kp.host_storage) throw Error("internal: the CUDA backend needs a KV cache without host storage");
    if (kp.type != kv::KvType::F32) throw Error("the CUDA backend keeps the KV cache in f32; set the KV cache type to f32");
    name_ = "cuda:" + std::to_string(o.device) + " " + device_name(o.device);
    n_batch_ = std::max<int64_t>(1, o.n_batch);
    n_used_ = std::max<int64_t>(1, c.n_expert_used);
    ff_max_ = std::max({c.n_ff, c.n_ff_expert, c.n_ff_shared, int64_t{1}});
    for (const model::LayerWeights& L : w.layers)
        if (L.has_shared_expert()) ff_max_ = std::max(ff_max_, L.shared.gate.rows);

    // Shared weights.
    tok_embd_ = upload_matrix(w.tok_embd, Account::WeightsShared);
    output_ = upload_matrix(w.output, Account::WeightsShared);
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
        if (L.ffn == model::FfnKind::Dense) {
            d.dense = {upload_matrix(L.dense.gate, Account::WeightsShared), upload_matrix(L.dense.up, Account::WeightsShared),
                       upload_matrix(L.dense.down, Account::WeightsShared)};
        } else {
            d.router = upload_matrix(L.router, Account::WeightsRouter);
            d.n_ff_expert = L.n_ff_expert;
        }
        if (L.has_shared_expert()) {
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

    // The KV pool, under the host cache's block ids.
    kv_block_tokens_ = kp.block_tokens;
    kv_head_stride_ = kp.block_tokens * kp.head_dim;
    kv_layer_stride_ = 2 * kp.n_head_kv * kv_head_stride_;
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

void CudaForward::load_experts(const CudaForwardOptions& o) {
    const model::ModelWeights& w = model_.weights();
    const int64_t E = cfg_.n_expert;
    int64_t total = 0;
    uint64_t slot = 0, all = 0;
    for (const model::LayerWeights& L : w.layers) {
        if (L.ffn != model::FfnKind::Moe || cpu_layer_[static_cast<size_t>(L.index)]) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            const uint64_t b = ffn_bytes(L.expert(e));
            slot = std::max(slot, (b + 255) / 256 * 256);
            all += b;
            ++total;
        }
    }
    stats_.experts_total = total;
    if (total == 0) return;
    cached_ = o.expert_slots >= 0 && o.expert_slots < total;
    if (!cached_) {
        // Every expert in VRAM: each layer's experts in one buffer, expert e at its slab offset.
        for (size_t li = 0; li < layers_.size(); ++li) {
            const model::LayerWeights& L = w.layers[li];
            if (L.ffn != model::FfnKind::Moe || cpu_layer_[li]) continue;
            uint64_t layer_bytes = 0;
            for (int64_t e = 0; e < L.n_experts(); ++e) layer_bytes += ffn_bytes(L.expert(e));
            weights_.emplace_back(ledger_, Account::ExpertsCache, Tier::Fast, layer_bytes);
            ledger_.adjust_used(Account::ExpertsCache, Tier::Fast, static_cast<int64_t>(layer_bytes));
            auto* base = static_cast<uint8_t*>(weights_.back().data());
            uint64_t off = 0;
            for (int64_t e = 0; e < L.n_experts(); ++e) {
                const model::FfnMatrices f = L.expert(e);
                for (const model::Matrix* m : {&f.gate, &f.up, &f.down}) {
                    upload(base + off, m->data, m->slab_bytes(), ("uploading " + std::string(m->name)).c_str());
                    off += m->slab_bytes();
                }
                layers_[li].experts.push_back(ffn_at(base + off - ffn_bytes(f), f));
            }
        }
        stats_.slots = total;
        stats_.slot_bytes = slot;
        return;
    }
    // A VRAM cache over the experts' home in pinned host RAM.
    slots_ = std::max<int64_t>(o.expert_slots, n_used_);
    slot_bytes_ = slot;
    stats_.slots = slots_;
    stats_.slot_bytes = slot;
    if (!host_cache_) {
        home_ = PinnedBuffer(ledger_, Account::ExpertsHome, Tier::Slow, all);
        ledger_.adjust_used(Account::ExpertsHome, Tier::Slow, static_cast<int64_t>(all));
    }
    home_offset_.assign(static_cast<size_t>(w.layers.size() * static_cast<size_t>(E)), UINT64_MAX);
    uint64_t off = 0;
    for (const model::LayerWeights& L : w.layers) {
        if (L.ffn != model::FfnKind::Moe || cpu_layer_[static_cast<size_t>(L.index)]) continue;
        for (int64_t e = 0; e < L.n_experts(); ++e) {
            model::FfnMatrices f = L.expert(e);
            const size_t k = static_cast<size_t>(L.index * E + e);
            home_offset_[k] = off;
            if (host_cache_) continue;  // taken from the cache when a step needs it
            for (model::Matrix* m : {&f.gate, &f.up, &f.down}) {
                std::copy(m->data, m->data + m->slab_bytes(), home_.data() + off);
                m->data = home_.data() + off;  // the CPU computes it from here (hybrid placement)
                m->slabs = 1;
                off += m->slab_bytes();
            }
            host_mats_[k] = f;
        }
    }
    arena_ = DeviceBuffer(ledger_, Account::ExpertsCache, Tier::Fast, static_cast<uint64_t>(slots_) * slot_bytes_);
    slot_of_.assign(home_offset_.size(), -1);
    key_of_slot_.assign(static_cast<size_t>(slots_), UINT32_MAX);
    for (int64_t s = slots_ - 1; s >= 0; --s) free_slots_.push_back(static_cast<int32_t>(s));
    policy_ = experts::make_policy(o.policy == "pinned" ? "lru" : o.policy, slots_);
    compute_done_ = std::make_unique<Event>();
    copies_done_ = std::make_unique<Event>();
    slot_prefetched_.assign(static_cast<size_t>(slots_), 0);
    for (int64_t i = 0; i < slots_; ++i) slot_ready_.push_back(std::make_unique<Event>());
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

void CudaForward::start_host_compute(const CudaForwardOptions& o) {
    if (!hybrid_ && std::find(cpu_layer_.begin(), cpu_layer_.end(), 1) == cpu_layer_.end()) return;
    if (cpu_step_.empty()) cpu_step_.assign(host_mats_.size(), 0);
    const int threads = o.cpu_threads > 0 ? o.cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
    pool_ = std::make_unique<cpu::ThreadPool>(std::max(1, threads));
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

void CudaForward::resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) const {
    // A layer computed on the CPU needs no copy: its experts count as in place.
    const bool in_place = !cached_ || cpu_layer_[static_cast<size_t>(layer)];
    for (int64_t e = 0; e < n_expert; ++e)
        mask[e] = in_place || slot_of_[static_cast<size_t>(layer * cfg_.n_expert + e)] >= 0;
}

void CudaForward::cpu_mask(int64_t layer, uint8_t* mask, int64_t n_expert, int64_t steps) const {
    const bool cpu_layer = cpu_layer_[static_cast<size_t>(layer)];  // every expert of it runs there
    for (int64_t e = 0; e < n_expert; ++e) {
        if (cpu_layer) {
            mask[e] = 1;
            continue;
        }
        const size_t k = static_cast<size_t>(layer * cfg_.n_expert + e);
        const uint64_t last = k < cpu_step_.size() ? cpu_step_[k] : 0;  // 1 + the step
        mask[e] = last > 0 && step_ + 1 - last <= static_cast<uint64_t>(std::max<int64_t>(steps, 1));
    }
}

void CudaForward::ok(int code, const char* op, int64_t layer) const {
    if (code == 0) return;
    check(code, layer >= 0 ? std::string(op) + " (layer " + std::to_string(layer) + ")" : std::string(op));
}

void CudaForward::gemm(const DevMat& w, const float* x, int64_t n, float* y, const char* op, int64_t layer) {
    ok(kc::gemm_q(w.type, w.data, w.row_bytes, w.rows, w.cols, x, w.cols, n, y, w.rows, compute_.get()), op, layer);
}

void CudaForward::ffn_dense(const DevFfn& f, const float* x, int64_t n, float* y, int64_t ff, int64_t layer) {
    gemm(f.gate, x, n, ge_, "ffn gate", layer);
    gemm(f.up, x, n, ue_, "ffn up", layer);
    ok(kc::swiglu(ge_, ue_, ge_, n * ff, compute_.get()), "swiglu", layer);
    gemm(f.down, ge_, n, y, "ffn down", layer);
}

void CudaForward::attention(const DevLayer& L, int64_t n) {
    const model::ModelConfig& c = cfg_;
    const int64_t hd = c.head_dim, qd = c.n_head * hd, kvd = c.n_head_kv * hd;
    const int64_t li = L.index;
    gemm(L.wq, h_, n, q_, "attention q", li);
    gemm(L.wk, h_, n, k_, "attention k", li);
    gemm(L.wv, h_, n, v_, "attention v", li);
    if (L.bq) ok(kc::add_bias(q_, qd, L.bq, n, qd, compute_.get()), "q bias", li);
    if (L.bk) ok(kc::add_bias(k_, kvd, L.bk, n, kvd, compute_.get()), "k bias", li);
    if (L.bv) ok(kc::add_bias(v_, kvd, L.bv, n, kvd, compute_.get()), "v bias", li);
    if (L.q_norm) {
        if (c.traits.qk_norm == model::QkNorm::PerHead) {
            ok(kc::rms_norm(q_, hd, L.q_norm, q_, hd, n * c.n_head, hd, c.norm_eps, compute_.get()), "q norm", li);
            ok(kc::rms_norm(k_, hd, L.k_norm, k_, hd, n * c.n_head_kv, hd, c.norm_eps, compute_.get()), "k norm", li);
        } else {
            ok(kc::rms_norm(q_, qd, L.q_norm, q_, qd, n, qd, c.norm_eps, compute_.get()), "q norm", li);
            ok(kc::rms_norm(k_, kvd, L.k_norm, k_, kvd, n, kvd, c.norm_eps, compute_.get()), "k norm", li);
        }
    }
    const bool neox = c.traits.rope == model::RopeType::NeoX;
    ok(kc::rope_apply(q_, n, qd, c.n_head, hd, c.n_rot, rope_cs_, neox, compute_.get()), "rope q", li);
    ok(kc::rope_apply(k_, n, kvd, c.n_head_kv, hd, c.n_rot, rope_cs_, neox, compute_.get()), "rope k", li);
    float* kp = kv_pool_.as<float>() + li * kv_layer_stride_;
    float* vp = kp + c.n_head_kv * kv_head_stride_;
    ok(kc::kv_store(k_, kvd, v_, kvd, n, c.n_head_kv, hd, kp, vp, kv_block_stride_, kv_head_stride_, kv_block_, kv_slot_,
                    compute_.get()),
       "kv store", li);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    ok(kc::attention_paged(q_, qd, n, c.n_head, c.n_head_kv, hd, kp, vp, kv_block_tokens_, kv_block_stride_,
                           kv_head_stride_, tables_.as<int32_t>(), table_offset_, n_keys_, scale,
                           /*sinks=*/nullptr, /*window=*/0, attn_, qd, compute_.get()),
       "attention", li);
    gemm(L.wo, attn_, n, tmp_, "attention output", li);
    if (L.bo) ok(kc::add_bias(tmp_, c.n_embd, L.bo, n, c.n_embd, compute_.get()), "output bias", li);
}

void CudaForward::lookahead(const DevLayer& next, const model::DeviceChunk& c, const model::LookaheadObserver& obs) {
    const int64_t n = c.n, d = cfg_.n_embd, E = cfg_.n_expert;
    // yr_ is free outside ffn_moe: the next layer's normalised input goes there.
    ok(kc::rms_norm(x_, d, next.ffn_norm, yr_, d, n, d, cfg_.norm_eps, compute_.get()), "lookahead norm", next.index);
    // router_topk's softmax (k = 1, its pick unused) gives the predicted probabilities.
    gemm(next.router, yr_, n, look_, "lookahead router", next.index);
    ok(kc::router_topk(look_, E, n, E, 1, look_ids_, look_w_, compute_.get()), "lookahead softmax", next.index);
    copy_to_host(h_look_.data(), look_, static_cast<uint64_t>(n * E) * 4, compute_, "reading the lookahead");
    compute_.synchronize("the lookahead router");
    for (int64_t t = 0; t < n; ++t) obs(model::LookaheadEvent{next.index, c.pos[t], h_look_.data() + t * E, E, c.seqs[t]});
}

int32_t CudaForward::free_or_evict(const experts::EvictableFilter& filter) {
    if (!free_slots_.empty()) {
        const int32_t s = free_slots_.back();
        free_slots_.pop_back();
        return s;
    }
    const std::optional<experts::ExpertKey> victim = policy_->victim(filter);
    if (!victim) return -1;
    policy_->on_remove(*victim);
    const int32_t s = slot_of_[*victim];
    slot_of_[*victim] = -1;
    return s;
}

int32_t CudaForward::take_slot(const std::vector<uint32_t>& in_use) {
    const int32_t s = free_or_evict(KeysSpared(in_use));
    if (s < 0) throw Error("the VRAM expert cache has no slot to give: every slot holds an expert this step needs");
    return s;
}

void CudaForward::copy_into_slot(uint32_t k, int32_t s, const model::FfnMatrices& f, LinkTiming* timing) {
    // A slot may have been read by compute already queued: the copy waits for it.
    compute_done_->record(compute_);
    compute_done_->wait_on(copy_);
    if (timing && !timing->begin) {
        timing->begin = std::make_unique<Event>(true);
        timing->begin->record(copy_);
    }
    if (timing) timing->bytes += ffn_bytes(f);
    auto* dst = static_cast<uint8_t*>(arena_.data()) + static_cast<uint64_t>(s) * slot_bytes_;
    const uint64_t g = f.gate.slab_bytes(), u = f.up.slab_bytes();
    if (f.up.data == f.gate.data + g && f.down.data == f.up.data + u) {  // one run (the pinned home)
        copy_to_device(dst, f.gate.data, ffn_bytes(f), copy_, "copying an expert to the GPU");
    } else {  // three (a host cache slot: each matrix in its aligned window)
        copy_to_device(dst, f.gate.data, g, copy_, "copying an expert to the GPU");
        copy_to_device(dst + g, f.up.data, u, copy_, "copying an expert to the GPU");
        copy_to_device(dst + g + u, f.down.data, f.down.slab_bytes(), copy_, "copying an expert to the GPU");
    }
    stats_.bytes_loaded += ffn_bytes(f);
    slot_of_[k] = s;
    key_of_slot_[static_cast<size_t>(s)] = k;
    slot_prefetched_[static_cast<size_t>(s)] = 0;
}

void CudaForward::prefetch(int64_t layer, const int32_t* experts_in, int64_t n) {
    if (host_cache_ && layer >= 0) {
        // Three tiers: the predicted experts move up the slower hop, file to host RAM.
        h_keys_.clear();
        // Only experts host RAM will serve: a CPU layer's, or a cached layer's missing from VRAM.
        for (int64_t i = 0; i < n; ++i) {
            if (experts_in[i] < 0 || experts_in[i] >= cfg_.n_expert) continue;
            const auto k = static_cast<uint32_t>(layer * cfg_.n_expert + experts_in[i]);
            if (cpu_layer_[static_cast<size_t>(layer)] || (cached_ && slot_of_[k] < 0)) h_keys_.push_back(k);
        }
        host_cache_->prefetch(h_keys_);
        return;
    }
    if (!cached_ || layer < 0 || cpu_layer_[static_cast<size_t>(layer)]) return;
    const int64_t E = cfg_.n_expert;
    // Spare the layer being computed and the predicted one: their experts are
    // (about to be) demanded, and a guess must not push them out.
    struct Filter final : experts::EvictableFilter {
        int64_t a, b, E;
        bool evictable(experts::ExpertKey k) const override {
            const int64_t layer = static_cast<int64_t>(k) / E;
            return layer != a && layer != b;
        }
    } filter;
    filter.a = current_layer_;
    filter.b = layer;
    filter.E = E;
    for (int64_t i = 0; i < n; ++i) {
        if (experts_in[i] < 0 || experts_in[i] >= E) continue;
        const uint32_t k = static_cast<uint32_t>(layer * E + experts_in[i]);
        if (slot_of_[k] >= 0) continue;
        const int32_t s = free_or_evict(filter);
        if (s < 0) return;  // every slot holds an expert that is needed now
        copy_into_slot(k, s, host_mats_[k]);
        slot_ready_[static_cast<size_t>(s)]->record(copy_);
        slot_prefetched_[static_cast<size_t>(s)] = kPrefetched;
        policy_->on_prefetch_insert(k);
        ++stats_.prefetch_loads;
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
}

void CudaForward::make_resident(const int32_t* experts_in, size_t n, int64_t layer, std::vector<DevFfn>* out) {
    const model::LayerWeights& L = model_.weights().layers[static_cast<size_t>(layer)];
    out->clear();
    if (!cached_) {
        for (size_t i = 0; i < n; ++i)
            out->push_back(layers_[static_cast<size_t>(layer)].experts[static_cast<size_t>(experts_in[i])]);
        return;
    }
    std::vector<uint32_t>& keys = h_keys_;
    keys.clear();
    for (size_t i = 0; i < n; ++i) keys.push_back(static_cast<uint32_t>(layer * cfg_.n_expert + experts_in[i]));
    bool copied = false;
    LinkTiming timing;
    for (size_t i = 0; i < keys.size(); ++i) {
        const uint32_t k = keys[i];
        ++stats_.demanded;
        if (const int32_t s = slot_of_[k]; s >= 0) {
            ++stats_.hits;
            policy_->on_hit(k);
            if (slot_prefetched_[static_cast<size_t>(s)]) {
                // Prefetched or copied in the background: the compute waits for that copy alone.
                if (slot_prefetched_[static_cast<size_t>(s)] == kPrefetched) ++stats_.prefetch_used;
                slot_prefetched_[static_cast<size_t>(s)] = 0;
                auto begin = std::make_unique<Event>(true), end = std::make_unique<Event>(true);
                begin->record(compute_);
                slot_ready_[static_cast<size_t>(s)]->wait_on(compute_);
                end->record(compute_);
                stalls_.emplace_back(std::move(begin), std::move(end));
            }
            continue;
        }
        policy_->on_miss(k);
        const int32_t s = take_slot(keys);
        copy_into_slot(k, s, host_mats_[k], hybrid_ ? &timing : nullptr);
        policy_->on_insert(k);
        copied = true;
    }
    if (copied) {
        // The timing's end before copies_done_, which the compute stream waits
        // for: the end is complete once the step's compute is.
        if (timing.begin) {
            timing.end = std::make_unique<Event>(true);
            timing.end->record(copy_);
            link_timings_.push_back(std::move(timing));
        }
        copies_done_->record(copy_);
        auto begin = std::make_unique<Event>(true), end = std::make_unique<Event>(true);
        begin->record(compute_);
        copies_done_->wait_on(compute_);
        end->record(compute_);
        stalls_.emplace_back(std::move(begin), std::move(end));
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
    for (size_t i = 0; i < keys.size(); ++i)
        out->push_back(ffn_at(static_cast<uint8_t*>(arena_.data()) + static_cast<uint64_t>(slot_of_[keys[i]]) * slot_bytes_,
                              L.expert(experts_in[i])));
}

void CudaForward::ffn_moe(const DevLayer& L, const model::DeviceChunk& c, const model::RoutingObserver& routing) {
    const model::ModelConfig& cf = cfg_;
    const int64_t n = c.n, d = cf.n_embd, E = cf.n_expert, U = n_used_, li = L.index;

    // Route on the device; the choices come back for the observers, the cache and the grouping.
    gemm(L.router, h_, n, router_, "router", li);
    ok(kc::router_topk(router_, E, n, E, U, route_ids_, route_w_, compute_.get()), "router top-k", li);
    copy_to_host(h_ids_.data(), route_ids_, static_cast<uint64_t>(n * U) * 4, compute_, "reading the routing");
    copy_to_host(h_w_.data(), route_w_, static_cast<uint64_t>(n * U) * 4, compute_, "reading the routing");
    copy_to_host(h_probs_.data(), router_, static_cast<uint64_t>(n * E) * 4, compute_, "reading the routing");
    // The layer's input, for experts the CPU may compute (read now, with the
    // routing, so the CPU need not wait for the GPU's experts to get it).
    if (cpu_layer_[static_cast<size_t>(li)] || hybrid_)
        copy_to_host(host_h_.data(), h_, static_cast<uint64_t>(n * d) * 4, compute_, "reading the experts' input");
    compute_.synchronize("the router");

    std::fill(h_count_.begin(), h_count_.end(), 0);
    for (int64_t t = 0; t < n; ++t) {
        int32_t* ids = h_ids_.data() + t * U;
        float* wts = h_w_.data() + t * U;
        int64_t used = 0;
        for (int64_t k = 0; k < U; ++k) used += ids[k] >= 0;
        if (cf.expert_weights_norm && used > 0) {  // as model::Context::ffn_moe
            float sum = 0.0f;
            for (int64_t k = 0; k < U; ++k) sum += wts[k];
            for (int64_t k = 0; k < U; ++k) wts[k] /= sum;
        }
        for (int64_t k = 0; k < U; ++k) {
            wts[k] *= cf.expert_weights_scale;
            if (ids[k] >= 0) ++h_count_[static_cast<size_t>(ids[k])];
        }
        if (routing)
            routing(model::RoutingEvent{li, c.pos[t], ids, wts, used, h_probs_.data() + t * E, E, c.seqs[t]});
    }

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
            h_rank_src_[static_cast<size_t>(combine_rows)] = r;
            h_dst_[static_cast<size_t>(combine_rows)] = static_cast<int32_t>(t);
            h_combine_w_[static_cast<size_t>(combine_rows)] = h_w_[static_cast<size_t>(t * U + k)];
            ++combine_rows;
        }
    routed_experts(L, n, h_offsets_[h_order_.size()], combine_rows);
    // The copies from the cache's slots are staged by the time the calls
    // return (pageable memory), and the CPU is done with them.
    if (host_cache_) release_to_host_cache(li);
    if (L.shared.gate) {
        ffn_dense(L.shared, h_, n, ye_, L.shared.gate.rows, li);
        if (L.shared_gate) gemm(L.shared_gate, h_, n, gate_logit_, "shared expert gate", li);
        ok(kc::gated_add(ye_, L.shared_gate ? gate_logit_ : nullptr, n, d, tmp_, compute_.get()), "shared expert", li);
    }
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

void CudaForward::take_from_host_cache(int64_t li) {
    const int64_t E = cfg_.n_expert;
    // Experts an earlier layer took and did not give back (its step failed midway).
    if (!taken_.empty()) release_to_host_cache(taken_layer_);
    taken_layer_ = li;
    std::vector<int32_t>& needed = h_cpu_;  // (free while ordering is done)
    needed.clear();
    for (const int32_t e : h_order_) {
        const auto k = static_cast<size_t>(li * E + e);
        if (cpu_layer_[static_cast<size_t>(li)] || (cached_ && slot_of_[k] < 0)) needed.push_back(e);
    }
    needed_from_host_ = needed.size();
    if (needed.empty()) return;
    host_cache_->demand(li, needed);
    model::FfnMatrices f;
    size_t got = 0;
    for (int32_t e; (e = host_cache_->take(li, &f)) >= 0; ++got) {
        host_mats_[static_cast<size_t>(li * E + e)] = f;
        taken_.push_back(e);
    }
    if (got != needed_from_host_)
        throw Error("internal: the host expert cache handed over " + std::to_string(got) + " of " +
                    std::to_string(needed_from_host_) + " experts of layer " + std::to_string(li));
}

void CudaForward::release_to_host_cache(int64_t li) {
    for (const int32_t e : taken_) {
        host_cache_->release(li, e);
        host_mats_[static_cast<size_t>(li * cfg_.n_expert + e)] = {};
    }
    taken_.clear();
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
        put(offsets_, h_offsets_, gpu_groups_ + 1);
        ok(kc::get_rows(kc::QType::F32, h_, d * 4, d, gather_, gpu_rows, xe_, compute_.get()), "gathering expert inputs", li);
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
                ok(kc::swiglu(ge_ + a * ff, ue_ + a * ff, ge_ + a * ff, cnt * ff, compute_.get()), "expert swiglu", li);
                gemm(mats[g].down, ge_ + a * ff, cnt, ye_ + a * d, "expert down", li);
            }
            continue;
        }
        // Stream order keeps this upload behind the previous wave's reads of the array.
        put(expert_ptrs_, h_ptrs_, 3 * G);
        const DevMat& g0m = mats[0].gate;
        const DevMat& d0m = mats[0].down;
        const int32_t* off = offsets_ + g0;
        ok(kc::gemm_q_grouped(g0m.type, expert_ptrs_, g0m.row_bytes, g0m.rows, g0m.cols, xe_, d, off,
                              static_cast<int64_t>(G), max_group, ge_, ff, compute_.get()),
           "expert gate", li);
        ok(kc::gemm_q_grouped(mats[0].up.type, expert_ptrs_ + G, mats[0].up.row_bytes, mats[0].up.rows, mats[0].up.cols,
                              xe_, d, off, static_cast<int64_t>(G), max_group, ue_, ff, compute_.get()),
           "expert up", li);
        ok(kc::swiglu(ge_ + r0 * ff, ue_ + r0 * ff, ge_ + r0 * ff, (r1 - r0) * ff, compute_.get()), "expert swiglu", li);
        ok(kc::gemm_q_grouped(d0m.type, expert_ptrs_ + 2 * G, d0m.row_bytes, d0m.rows, d0m.cols, ge_, ff, off,
                              static_cast<int64_t>(G), max_group, ye_, d, compute_.get()),
           "expert down", li);
    }

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

void CudaForward::host_ffn(const model::FfnMatrices& f, const float* x, int64_t n, float* g, float* u, float* y) {
    host_matmul(f.gate, x, n, g);
    host_matmul(f.up, x, n, u);
    kernels::ops::swiglu(g, u, g, n * f.gate.rows);
    host_matmul(f.down, g, n, y);
}

// Rows [row0, rows) of the grouped experts (h_order_ from gpu_groups_ on) on
// the host's cores from host RAM, while the GPU works through what was
// queued; their outputs go to their rows of ye_ for the combine.
void CudaForward::experts_on_host(int64_t li, int64_t row0, int64_t rows) {
    using clock = std::chrono::steady_clock;
    const int64_t d = cfg_.n_embd, E = cfg_.n_expert;
    const int64_t ff = model_.weights().layers[static_cast<size_t>(li)].n_ff_expert;
    for (int64_t r = row0; r < rows; ++r)
        std::copy_n(host_h_.data() + h_gather_[static_cast<size_t>(r)] * d, d, host_xe_.data() + r * d);
    const auto t0 = clock::now();
    double predicted_s = 0;
    for (size_t g = gpu_groups_; g < h_order_.size(); ++g) {
        const size_t k = static_cast<size_t>(li * E + h_order_[g]);
        const model::FfnMatrices& f = host_mats_[k];
        const int64_t a = h_offsets_[g], m = h_offsets_[g + 1] - a;
        host_ffn(f, host_xe_.data() + a * d, m, host_ge_.data() + a * ff, host_ue_.data() + a * ff, host_ye_.data() + a * d);
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

// Copies the experts the CPU computed this step and is expected to see again
// into VRAM slots, on the copy stream behind the demand copies; the compute
// stream waits for one only when it first reads it.
void CudaForward::copy_in_background(int64_t li) {
    const KeysSpared filter(gpu_keys_);
    for (const uint32_t k : background_) {
        const int32_t s = free_or_evict(filter);
        if (s < 0) {
            ++stats_.miss_cpu;  // no slot to give: computed on the CPU only
            continue;
        }
        ++stats_.miss_both;
        backlog_s_ += double(ffn_bytes(host_mats_[k])) / rates_.link_bps;
        copy_into_slot(k, s, host_mats_[k]);
        slot_ready_[static_cast<size_t>(s)]->record(copy_);
        slot_prefetched_[static_cast<size_t>(s)] = kBackground;
        policy_->on_insert(k);
    }
    ledger_.set_used(Account::ExpertsCache, Tier::Fast,
                     static_cast<uint64_t>(slots_ - static_cast<int64_t>(free_slots_.size())) * slot_bytes_);
}

void CudaForward::run(const model::DeviceChunk& c, const kv::KvCache& kv, const model::RoutingObserver& routing,
                      const model::LookaheadObserver& lookahead_obs) {
    const model::ModelConfig& cf = cfg_;
    const int64_t n = c.n, d = cf.n_embd;
    if (n > n_batch_) throw Error("internal: a chunk of " + std::to_string(n) + " tokens for a GPU pass sized for " +
                                  std::to_string(n_batch_));
    set_device(device_);
    const auto step_begin = std::chrono::steady_clock::now();
    backlog_s_ = std::max(0.0, backlog_s_ - last_step_s_);  // the link drained them during the previous step

    // Step data: tokens, RoPE tables, where each token's K/V goes, and the block tables.
    std::copy(c.tokens, c.tokens + n, h_tokens_.begin());
    const int64_t n_rot = std::max<int64_t>(cf.n_rot, 2);
    model::rope_tables(cf, c.pos, n, n_rot, h_cs_.data());
    h_tables_.clear();
    std::vector<std::pair<kv::SeqId, int32_t>>& seen = h_seen_;  // each sequence's table offset
    seen.clear();
    for (int64_t t = 0; t < n; ++t) {
        const kv::KvCache::Row r = kv.row(c.seqs[t], c.pos[t]);
        h_kv_block_[static_cast<size_t>(t)] = r.block;
        h_kv_slot_[static_cast<size_t>(t)] = static_cast<int32_t>(r.slot);
        auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& p) { return p.first == c.seqs[t]; });
        if (it == seen.end()) {
            seen.emplace_back(c.seqs[t], static_cast<int32_t>(h_tables_.size()));
            const std::vector<int32_t>& b = kv.blocks(c.seqs[t]);
            h_tables_.insert(h_tables_.end(), b.begin(), b.end());
            it = seen.end() - 1;
        }
        h_table_offset_[static_cast<size_t>(t)] = it->second;
        h_n_keys_[static_cast<size_t>(t)] = static_cast<int32_t>(c.pos[t] + 1);
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

    ok(kc::get_rows(tok_embd_.type, tok_embd_.data, tok_embd_.row_bytes, d, tokens_, n, x_, compute_.get()), "embedding");
    for (const DevLayer& L : layers_) {
        current_layer_ = L.index;
        ok(kc::rms_norm(x_, d, L.attn_norm, h_, d, n, d, cf.norm_eps, compute_.get()), "attention norm", L.index);
        attention(L, n);
        ok(kc::add(x_, tmp_, n * d, compute_.get()), "residual", L.index);
        const size_t next = static_cast<size_t>(L.index + 1);
        if (lookahead_obs && next < layers_.size() && layers_[next].ffn == model::FfnKind::Moe)
            lookahead(layers_[next], c, lookahead_obs);
        ok(kc::rms_norm(x_, d, L.ffn_norm, h_, d, n, d, cf.norm_eps, compute_.get()), "ffn norm", L.index);
        if (L.ffn == model::FfnKind::Dense) ffn_dense(L.dense, h_, n, tmp_, cf.n_ff, L.index);
        else ffn_moe(L, c, routing);
        ok(kc::add(x_, tmp_, n * d, compute_.get()), "residual", L.index);
    }

    int64_t rows = 0;
    if (c.logits) {
        for (int64_t t = 0; t < n; ++t)
            if (c.want[t]) h_want_rows_[static_cast<size_t>(rows++)] = static_cast<int32_t>(t);
        put(want_rows_, h_want_rows_, static_cast<size_t>(rows));
        ok(kc::get_rows(kc::QType::F32, x_, d * 4, d, want_rows_, rows, h_, compute_.get()), "picking logit rows");
        ok(kc::rms_norm(h_, d, output_norm_, h_, d, rows, d, cf.norm_eps, compute_.get()), "output norm");
        gemm(output_, h_, rows, logits_, "output head", -1);
        copy_to_host(c.logits, logits_, static_cast<uint64_t>(rows * cf.n_vocab) * 4, compute_, "reading the logits");
    }
    compute_.synchronize("the forward pass on the GPU");
    for (const auto& [begin, end] : stalls_) stats_.stall_seconds += end->ms_since(*begin) * 1e-3;
    stalls_.clear();
    refresh_link_rate();
    if (cached_) policy_->on_step();
    last_step_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_begin).count();
    ++step_;
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

}  // namespace

std::string cuda_unsupported_tensor(const model::Model& m) {
    const model::ModelWeights& w = m.weights();
    const model::ModelConfig& c = m.config();
    // The ops this pass computes (model/backend.h); the others wait for the
    // op-level CUDA backend (the model-definition issue).
    const auto supports = [](model::Op op) {
        switch (op) {
            case model::Op::Embed:
            case model::Op::RmsNorm:
            case model::Op::Add:
            case model::Op::Attention:
            case model::Op::Route:
            case model::Op::Experts:
            case model::Op::SharedExpert:
            case model::Op::DenseFfn:
            case model::Op::OutputHead: return true;
            default: return false;
        }
    };
    if (std::string op = model::arch::unsupported_op(c, w, supports, "CUDA backend"); !op.empty())
        return op + " yet; use --device cpu";
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
        for (const model::Matrix* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.router, &L.dense.gate, &L.dense.up, &L.dense.down,
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

std::unique_ptr<model::DeviceForward> make_cuda_forward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger,
                                                        const CudaForwardOptions& options) {
    return std::make_unique<CudaForward>(m, kv, ledger, options);
}

}  // namespace strata::backend::cuda
