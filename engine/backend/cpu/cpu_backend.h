// The CPU backend: the ops of model/backend.h on the host's cores, a few
// parallel regions of a thread pool per op, activations in host memory.
//
// Its fused regions are its implementation of the block ops, so nothing is
// slower for the ops being separate: a one-token attention whose KV heads
// split evenly over the threads runs a KV head's Q/K/V rows, RoPE, K/V write
// and attention on one thread, and the output projection in the same region
// (cpu_attention.cpp); a MoE layer with few tokens runs an expert's whole FFN
// on one thread, a thread that runs out of experts taking the others' last
// down rows (cpu_experts.cpp); other steps share out the rows of Q/K/V, of the
// experts' gate/up and of their down projections region by region. Both give
// the same bits (gemm_q is batch-invariant, the rest acts per head or per
// element), which the tests check across thread counts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "model/backend.h"
#include "model/decode_profile.h"
#include "platform/thread_pool.h"

namespace strata::model {

// The input rows of a weight matrix product, before any quantization: n rows
// of W.cols floats. `expert` is the routed expert the rows went to (W is its
// slab of a stacked tensor), -1 for any other matrix. What calibration
// statistics are made of (quant/activation_stats.h).
using ActivationObserver = std::function<void(const Matrix& W, const float* X, int64_t n, int32_t expert)>;

struct CpuBackendParams {
    int64_t n_batch = 256;  // the most tokens a step has
    int64_t n_ctx = 4096;   // the longest sequence (the attention's score scratch)
    int n_threads = 0;      // 0: all hardware threads
    std::vector<int> cpus;  // CPUs the workers are pinned to (NUMA bind); empty: not pinned
    // Another backend's workers (a speculative draft's: it runs between the
    // target's steps, never beside them), instead of a pool of its own whose
    // spinning workers would take the cores from the target's.
    std::shared_ptr<cpu::ThreadPool> pool;
};

class CpuBackend final : public Backend {
public:
    CpuBackend(const ModelConfig& c, const CpuBackendParams& p);
    ~CpuBackend() override;

    std::string name() const override { return "cpu"; }
    bool supports(Op) const override { return true; }
    void begin(const Step& step) override;
    void embed(const Matrix& table) override;
    void rms_norm(Act in, const std::vector<float>& weight, Act out) override;
    void add(Act dst, Act src) override;
    void attention(const LayerWeights& L, const AttentionSpec& spec) override;
    void delta_net(const LayerWeights& L) override;
    void predict_route(const LayerWeights& next) override;
    void route(const LayerWeights& L, const RouterSpec& spec) override;
    void experts(const LayerWeights& L, const ExpertSpec& spec) override;
    void shared_expert(const LayerWeights& L) override;
    void dense_ffn(const LayerWeights& L) override;
    void output_head(const std::vector<float>& norm, const Matrix& head) override;
    void nextn_input(const NextnInput& in) override;
    void read(Act a, float* host) override;
    void write(Act a, const float* host) override;
    uint64_t scratch_bytes() const override;

    // Sees every matrix product's input while set. The ops then take their
    // plain paths (no fused one-token attention, experts one at a time),
    // which compute the same values and show every product's input.
    void set_activation_observer(ActivationObserver obs) { activations_ = std::move(obs); }
    // See model::Context::set_profile.
    void set_profile(DecodeProfile* p);
    int threads() const { return pool_->size(); }
    const std::shared_ptr<cpu::ThreadPool>& pool() const { return pool_; }

private:
    float* act(Act a);
    // One expert's biases, each null when the layer has none.
    struct ExpertBias {
        const float *gate = nullptr, *up = nullptr, *down = nullptr;
    };
    ExpertBias expert_bias(const LayerWeights& L, int32_t e) const;
    // SwiGLU FFN; with `bias`, the clamped SwiGLU with biased gate/up/down.
    void ffn(const FfnMatrices& f, const float* x, int64_t n, float* y, int64_t ff, const ExpertBias* bias = nullptr);

    // --- weight products (cpu_backend.cpp) ---
    // Y[t, r] = W.row(r) . X[t]  for t < n
    void matmul(const Matrix& W, const float* X, int64_t n, float* Y);
    struct MatOut {
        const Matrix* W;
        float* Y;
    };
    // matmul() of several matrices over the same X in one parallel region.
    void matmul_many(std::initializer_list<MatOut> outs, const float* X, int64_t n);
    // matmul() of everything in batch_ (each with its own input) in one region.
    struct MatIn {
        const Matrix* W;
        const float* X;
        int64_t n;
        float* Y;
        uint8_t* xq = nullptr;
    };
    void matmul_batch();
    // Quantized matrices of one type and width, each over its own input, in
    // one parallel region (what matmul and matmul_batch come down to).
    void gemm_region(std::span<MatIn> mats);
    // n activation rows X quantized for W's kernels into act (nothing for f32 weights).
    void quantize_for(const Matrix& W, const float* X, int64_t n, uint8_t* act);
    // Rows [r0, r1) of W times n tokens on the calling thread, Y[t * W.rows + r]:
    // f32 weights take X, the others act (X's rows quantized for W's type,
    // as quantize_for makes them). Every weight product goes through here,
    // so the profile sees each one once.
    // read_once: W's rows are read once and not again soon (an expert's in
    // decode: kernels::gemm_q_once, the same results).
    void rows_product(const Matrix& W, const float* X, const uint8_t* act, int64_t n, int64_t r0, int64_t r1, float* Y,
                      bool read_once = false);
    // Runs fn; while profiling, adds its time (and `bytes` of weights) to the calling thread's `part`.
    template <class F>
    void profiled(DecodeProfile::Part part, uint64_t bytes, F&& fn) {
        if (!profile_) return fn();
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        DecodeProfile::Thread& t = profile_->threads[static_cast<size_t>(cpu::ThreadPool::thread_index())];
        t.seconds[part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        t.bytes[part] += bytes;
    }
    // Spins until ready() (another thread's part of a region is done); while
    // profiling, the time counts as DecodeProfile::Waiting.
    template <class Ready>
    void wait_until(Ready&& ready) {
        profiled(DecodeProfile::Waiting, 0, [&] {
            while (!ready()) cpu::cpu_relax();
        });
    }

    // --- attention (cpu_attention.cpp) ---
    // Multi-head latent attention (MLA): the cache holds latent rows,
    // queries are taken into the latent space (attn_kv_b absorbed), values out of it.
    void attention_latent(const LayerWeights& L, int64_t n, float scale);
    enum class Fused { No, Attention, AttentionAndOutput };
    Fused attention_fused_one_token(const LayerWeights& L, const AttentionSpec& spec);
    bool output_fuses(const LayerWeights& L) const;
    void output_projection(const LayerWeights& L, int64_t n, bool product_done = false);
    void attention_qkv_rows(const LayerWeights& L, const uint8_t* xq, int64_t r0, int64_t r1);
    // next_g: the KV head this thread attends with next (-1: none); asked: g's first pieces were asked for.
    void attention_kv_group(const LayerWeights& L, const AttentionSpec& spec, int64_t g, kv::KvCache::Row row,
                            float* scores, int64_t next_g, bool asked);
    struct Heads {
        float* x;       // the first head's row
        int64_t n;      // heads
        int64_t first;  // its element in the token's projection (where its biases start)
    };
    void qk_heads(const LayerWeights& L, const AttentionSpec& spec, int64_t t, Heads q, Heads k, float* v,
                  bool with_biases_and_norms);

    // --- routed experts (cpu_experts.cpp) ---
    struct ReadyExpert;
    // weight_before: each row of input times its router weight (ExpertSpec::weight_before).
    void experts_each(const LayerWeights& L, int64_t n, bool weight_before = false);
    // A MoE layer with few tokens: the ready experts' gate/up in one region, their downs in another.
    void experts_small(const LayerWeights& L, int64_t n);
    bool experts_fused(const LayerWeights& L, int64_t n);
    void expert_up_on_one_thread(const ReadyExpert& r, int64_t n, int64_t ff, uint8_t* act);
    void expert_down_rows(const ReadyExpert& r, int64_t ff, const uint8_t* act, int64_t c0, int64_t c1);
    struct Chunks {
        int64_t begin = 0, end = 0;  // [begin, end) of kDownChunkRows-row chunks; empty: none left
    };
    Chunks take_down_chunks(int64_t i, bool front);
    bool down_left(int64_t i) const;
    static constexpr int64_t kDownChunkRows = 64;  // down rows taken at a time in the per-expert region
    // From this many tokens on (prefill), the per-expert region takes experts
    // of any token counts, biggest first (experts_fused).
    static constexpr int64_t kFusedAnyCountsTokens = 8;
    // MoE layers use that region up to this many expert rows (token, expert
    // pairs) per expert on average (experts()).
    static constexpr int64_t kFusedRowsPerExpert = 8;

    const ModelConfig& cfg_;
    std::shared_ptr<cpu::ThreadPool> pool_;
    int64_t n_batch_ = 0;
    // The fewest weight rows a thread takes at a time in a parallel region
    // (kernels::KernelTuning::grain_rows when the backend was made): each
    // chunk's start waits on memory; 48 decoded the 1.2B Q4_0 model 4-6%
    // faster than 16 at ~75 GB/s.
    int64_t grain_rows_ = 48;
    ActivationObserver activations_;
    int32_t observed_expert_ = -1;  // the expert experts_each is computing (for activations_)
    DecodeProfile* profile_ = nullptr;

    // The step under way.
    Step step_;
    int64_t n_ = 0;
    kv::KvCache* kv_ = nullptr;
    ExpertProvider* provider_ = nullptr;
    int64_t n_used_ = 0;
    std::vector<float> rope_cs_;  // per token of the step: its position's RoPE cos/sin table
    std::vector<float> ones_;     // head_dim ones: the weight of a weightless norm
    std::vector<uint8_t> resident_mask_;

    // Scratch, sized once.
    std::vector<float> x_, h_, q_, k_, v_, attn_, tmp_;
    std::vector<float> nextn_cat_;  // a NextN step's [embedding ; hidden] rows
    std::vector<float> mla_qa_, mla_q_, mla_v_, route_select_;  // MLA and scored routing (empty otherwise)
    // Gated delta nets and the attention's output gate (empty otherwise).
    std::vector<float> dn_mixed_, dn_z_, dn_beta_, dn_alpha_, dn_conv_, dn_o_, q_gate_, gate_;
    std::vector<float> router_logits_, route_w_;
    std::vector<int32_t> route_ids_;
    std::vector<int32_t> expert_count_, expert_offset_, expert_tokens_, needed_;
    std::vector<float> xe_, ge_, ue_, ye_, expert_out_;
    std::vector<uint8_t> act_scratch_;  // activations quantized for the weight type
    std::vector<float> score_scratch_;  // per thread: attention scores
    int64_t scores_per_thread_ = 0;     // a query group's scores over n_ctx keys
    std::vector<float> look_h_, look_probs_;
    std::vector<MatIn> batch_;
    std::vector<int64_t> batch_start_;
    struct ReadyExpert {
        int32_t e;
        FfnMatrices mats;
        int64_t base;          // first row of its tokens in the xe_/ge_/ue_/ye_ scratch
        float* out = nullptr;  // where the per-expert region writes its down rows
    };
    std::vector<ReadyExpert> ready_;
    // The per-expert FFN region's shared state, one entry per ready expert:
    // its down projection's input is ready, and its down rows not yet taken
    // (chunks, a cpu::pack_range word; the owner takes from the
    // front, a thread that ran out of experts from the back).
    std::unique_ptr<std::atomic<uint32_t>[]> down_ready_;
    std::unique_ptr<std::atomic<uint64_t>[]> down_chunks_;
    // The one-token attention region's shared state: the Q/K/V and wo rows
    // not yet taken (each thread's own stretch of them), each KV head's rows
    // done, the next KV head to attend with.
    std::unique_ptr<cpu::OwnedRanges> qkv_rows_, wo_rows_;
    std::unique_ptr<std::atomic<int64_t>[]> qkv_done_;
    alignas(64) std::atomic<int64_t> attend_next_{0};
    alignas(64) std::atomic<int64_t> attended_{0};  // KV heads whose attention output is quantized for wo
    int64_t max_cols_ = 0;
};

}  // namespace strata::model
