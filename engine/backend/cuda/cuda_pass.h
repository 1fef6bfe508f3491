// The CUDA forward pass's class (cuda_forward.h has its factory): the
// device copies of the weights, the expert cache over VRAM slots, and the
// ops of model/backend.h on the GPU (cuda_ops.cpp) that the architectures
// compose. Internal to engine/backend/cuda.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_forward.h"
#include "backend/cuda/cuda_runtime.h"
#include "experts/cache_policy.h"
#include "experts/expert_cache.h"
#include "kernels/cuda/cuda_kernels.h"
#include "memory/aligned_buffer.h"
#include "model/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/op_fallback.h"
#include "platform/thread_pool.h"

namespace strata::backend::cuda::pass {

namespace kc = kernels::cuda;
using memory::Account;
using memory::Tier;


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
    // Latent attention (MLA): wq is attn_q_b (or attn_q); k_up_t and v_up are attn_kv_b split per head.
    DevMat wq_a, wkv_a;
    const float *q_a_norm = nullptr, *kv_a_norm = nullptr, *k_up_t = nullptr, *v_up = nullptr;
    kc::QType kv_b_type = kc::QType::F32;  // attn_kv_b's: the compressed KV is rounded as its product's input
    const float* sinks = nullptr;        // a sink logit per head
    const float* router_bias = nullptr;  // added to the router's logits
    const float* select_bias = nullptr;  // added for the scored router's choice only
    // Per expert (n_expert rows of n_ff_expert, n_ff_expert, n_embd): biases of the clamped SwiGLU's experts.
    const float *expert_bias_gate = nullptr, *expert_bias_up = nullptr, *expert_bias_down = nullptr;
    // A gated delta net (model::LayerWeights's ssm_*).
    DevMat ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out;
    const float *ssm_conv = nullptr, *ssm_dt_bias = nullptr, *ssm_a = nullptr, *ssm_norm = nullptr;
};

// One expert's matrices at a slot base: gate | up | down, each rows * row_bytes.
inline DevFfn ffn_at(const uint8_t* base, const model::FfnMatrices& f) {
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

inline uint64_t ffn_bytes(const model::FfnMatrices& f) { return f.gate.slab_bytes() + f.up.slab_bytes() + f.down.slab_bytes(); }

inline double ffn_params(const model::FfnMatrices& f) {
    return double(f.gate.rows * f.gate.cols + f.up.rows * f.up.cols + f.down.rows * f.down.cols);
}

// The roofline time of an expert of `bytes` and `params` over `tokens` tokens.
inline double roofline_s(double bytes, double params, int64_t tokens, double bps, double flops) {
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

// Bytes of host memory held in the ledger's books for as long as this lives.
class HostReservation {
public:
    HostReservation(memory::Ledger& l, Account a, Tier t, uint64_t bytes) : l_(l), a_(a), t_(t), bytes_(bytes) {
        l_.reserve(a_, t_, bytes_);
        l_.adjust_used(a_, t_, static_cast<int64_t>(bytes_));
    }
    ~HostReservation() { l_.release(a_, t_, bytes_); }
    HostReservation(const HostReservation&) = delete;
    HostReservation& operator=(const HostReservation&) = delete;

private:
    memory::Ledger& l_;
    Account a_;
    Tier t_;
    uint64_t bytes_;
};

// The ops of model/backend.h this pass computes (cuda_ops.cpp).
bool cuda_supports(model::Op op);

class CudaForward final : public model::DeviceForward, public model::Backend, public experts::ExpertCache {
public:
    CudaForward(const model::Model& m, kv::KvCache& kv, memory::Ledger& ledger, const CudaForwardOptions& o);
    ~CudaForward() override;

    void run(const model::DeviceChunk& c, const kv::KvCache& kv, const model::RoutingObserver& routing,
             const model::LookaheadObserver& lookahead) override;
    std::string name() const override { return name_; }
    std::string cpu_ops() const override { return cpu_ops_.describe(); }

    // The ops (model/backend.h, cuda_ops.cpp), run by run() through the
    // model's architecture (model/arch).
    bool supports(model::Op op) const override;
    void begin(const model::Step& step) override;
    void embed(const model::Matrix& table) override;
    void rms_norm(model::Act in, const std::vector<float>& weight, model::Act out) override;
    void add(model::Act dst, model::Act src) override;
    void attention(const model::LayerWeights& L, const model::AttentionSpec& spec) override;
    void delta_net(const model::LayerWeights& L) override;
    void predict_route(const model::LayerWeights& next) override;
    void route(const model::LayerWeights& L, const model::RouterSpec& spec) override;
    void experts(const model::LayerWeights& L, const model::ExpertSpec& spec) override;
    void shared_expert(const model::LayerWeights& L) override;
    void dense_ffn(const model::LayerWeights& L) override;
    void output_head(const std::vector<float>& norm, const model::Matrix& head) override;
    void nextn_input(const model::NextnInput& in) override;
    void read(model::Act a, float* host) override;
    void write(model::Act a, const float* host) override;
    uint64_t scratch_bytes() const override;

    // The VRAM expert cache (experts/expert_cache.h, vram_cache.cpp): live
    // size (up to the slots reserved at load), policy; pinning is the RAM cache's.
    std::string where() const override { return "VRAM"; }
    void prefetch(int64_t layer, std::span<const experts::ExpertKey> keys) override;
    experts::ExpertStoreStats stats() const override;
    std::vector<experts::Residency> residency() const override;
    int64_t slots() const override { return cached_ ? slots_ : stats_.experts_total; }
    int64_t experts_total() const override { return stats_.experts_total; }
    uint64_t slot_bytes() const override { return stats_.slot_bytes; }
    void set_slots(int64_t slots) override;
    void set_policy(const std::string& name) override;
    void set_pinned(std::vector<experts::ExpertKey> keys) override;
    void wait_idle() override;
    model::DeviceExpertStats expert_stats() const override { return stats_; }
    // mask[e] = 1 for the experts of `layer` in VRAM now (or computed in place, on the CPU).
    void resident_mask(int64_t layer, uint8_t* mask, int64_t n_expert) const;
    // mask[e] = 1 for the experts of `layer` the CPU computes: all of a --cpu-moe layer's, and under
    // hybrid placement those it computed in the last `steps` steps.
    void cpu_mask(int64_t layer, uint8_t* mask, int64_t n_expert, int64_t steps) const;
    // Starts copies of these experts of `layer` (predicted for it, best first)
    // into free slots or slots of other layers, behind the demand loads.
    void prefetch(int64_t layer, const int32_t* experts, int64_t n);

private:
    // --- loading ---
    const void* upload_bytes(const void* host, uint64_t bytes, Account a, const char* what);
    DevMat upload_matrix(const model::Matrix& m, Account a);
    const float* upload_vector(const std::vector<float>& v);
    void load_experts(const CudaForwardOptions& o);
    void load_cpu_experts(const CudaForwardOptions& o);
    void start_host_compute(const CudaForwardOptions& o);
    // The ops the GPU leaves to the CPU (model/op_fallback.h): the CPU backend behind the pass.
    void start_cpu_ops(const CudaForwardOptions& o);
    // The CPU's compute threads (the experts it computes, the ops it is left), made on first use.
    const std::shared_ptr<cpu::ThreadPool>& host_pool(const CudaForwardOptions& o);
    void start_hybrid(const CudaForwardOptions& o);
    void measure_cpu_rates();

    // --- the pass ---
    void ok(int code, const char* op, int64_t layer = -1) const;
    void gemm(const DevMat& w, const float* x, int64_t n, float* y, const char* op, int64_t layer);
    float* act(model::Act a) const;
    const float* device_vector(const std::vector<float>& v) const;  // its upload_vector copy
    void attention_latent(const DevLayer& L, const model::AttentionSpec& spec);
    void ffn_dense(const DevFfn& f, const float* x, int64_t n, float* y, int64_t ff, int64_t layer);
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
    void expert_activation(const DevLayer& L, int64_t r0, int64_t r1);
    void expert_down_bias(const DevLayer& L, int64_t r0, int64_t r1);
    void experts_on_host(int64_t layer, int64_t row0, int64_t rows);
    void copy_in_background(int64_t layer);
    void refresh_link_rate();
    void host_matmul(const model::Matrix& W, const float* X, int64_t n, float* Y);
    // bias: the expert's gate, up and down biases around the clamped SwiGLU (null: SwiGLU, no biases).
    struct HostBias {
        const float *gate = nullptr, *up = nullptr, *down = nullptr;
    };
    void host_ffn(const model::FfnMatrices& f, const float* x, int64_t n, float* g, float* u, float* y,
                  const HostBias* bias = nullptr);
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
    float *logits_ = nullptr, *rope_cs_ = nullptr, *combine_w_ = nullptr, *row_w_ = nullptr, *q_temp_ = nullptr;
    int32_t *tokens_ = nullptr, *route_ids_ = nullptr, *look_ids_ = nullptr, *gather_ = nullptr, *rank_src_ = nullptr;
    int32_t *combine_dst_ = nullptr, *offsets_ = nullptr, *kv_block_ = nullptr, *kv_slot_ = nullptr;
    int32_t *table_offset_ = nullptr, *n_keys_ = nullptr, *want_rows_ = nullptr;
    const void** expert_ptrs_ = nullptr;  // 3 x n_expert device pointers (gate, up, down of each group)
    DeviceBuffer tables_;                 // block tables of the chunk's sequences, grown as needed
    uint64_t tables_cap_ = 0;

    // The step under way (begin()), and the expert activation of the layer's experts.
    const model::Step* step_in_ = nullptr;
    int64_t n_ = 0;
    model::FfnAct expert_act_ = model::FfnAct::Swiglu;
    bool expert_weight_before_ = false;  // the layer's ExpertSpec::weight_before
    // Recurrent models: the sequences' state slots (kv::KvCache::StateStep,
    // kv::KvCacheParams::state_floats floats each), in VRAM by slot id
    // (account recurrent.state), grown as higher ids come; each token's slot
    // in (the first n) and slot out (the next n) for the kernels.
    DeviceBuffer state_;
    int64_t state_seqs_ = 0;
    int32_t* state_slot_ = nullptr;
    std::vector<int32_t> h_state_slot_;
    void reserve_states(int64_t slots);
    // Delta nets' and the attention output gate's scratch; the rows of each
    // head's query and gate in attn_q's output (get_rows ids).
    float *dn_mixed_ = nullptr, *dn_conv_ = nullptr, *dn_z_ = nullptr, *dn_beta_ = nullptr, *dn_alpha_ = nullptr,
          *dn_o_ = nullptr, *q_gate_ = nullptr, *gate_ = nullptr;
    int32_t *q_rows_ = nullptr, *gate_rows_ = nullptr;
    // Latent attention's scratch (MLA models), the scored router's, each grouped row's expert.
    float *mla_qa_ = nullptr, *mla_q_ = nullptr, *mla_v_ = nullptr, *route_sel_ = nullptr;
    int32_t* row_expert_ = nullptr;
    float* act_round_ = nullptr;  // a product's input rounded as the reference rounds it (gemm)
    std::vector<int32_t> h_row_expert_;
    int64_t kv_parts_ = 2;  // K and V per KV head in the pool; 1 where values are the keys (latent rows)

    // Host mirrors of the per-step arrays (sized once).
    std::vector<int32_t> h_tokens_, h_ids_, h_gather_, h_rank_src_, h_dst_, h_offsets_, h_kv_block_, h_kv_slot_;
    std::vector<int32_t> h_tables_, h_table_offset_, h_n_keys_, h_want_rows_, h_count_, h_order_;
    std::vector<float> h_w_, h_probs_, h_cs_, h_combine_w_, h_look_, h_row_w_, h_q_temp_;
    std::vector<const void*> h_ptrs_;
    // Per-step working lists, kept so the step allocates nothing.
    std::vector<int32_t> h_fill_;
    std::vector<uint32_t> h_keys_;
    std::vector<DevFfn> h_mats_;
    std::vector<std::pair<kv::SeqId, int32_t>> h_seen_;

    // Expert cache (when not every expert is resident).
    bool cached_ = false;
    int64_t slots_ = 0;                   // slots in use (set_slots), at most capacity_
    int64_t capacity_ = 0;                // slots the arena holds (reserved at load)
    std::vector<int32_t> h_prefetch_;     // prefetch(): the keys of its layer, as experts
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
    std::shared_ptr<cpu::ThreadPool> pool_;  // shared with host_ops_
    std::vector<float> host_h_, host_xe_, host_ge_, host_ue_, host_ye_;
    std::vector<uint8_t> host_act_;
    size_t gpu_groups_ = 0;  // h_order_[0, gpu_groups_) on the GPU, the rest on the CPU

    // Ops the GPU leaves to the CPU (choose_cpu_ops): a CPU backend computes
    // them, and run() hands the architecture fallback_ instead of this pass.
    std::vector<model::Op> on_cpu_;
    model::CpuOpsCost cpu_ops_;
    std::unique_ptr<model::CpuBackend> host_ops_;
    std::unique_ptr<model::OpFallback> fallback_;
    std::optional<HostReservation> host_ops_memory_;

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

}  // namespace strata::backend::cuda::pass
