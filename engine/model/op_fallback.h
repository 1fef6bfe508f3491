// Ops a device lacks, computed on the CPU (DESIGN.md §9; ggml's scheduler
// splits a graph between backends the same way). OpFallback is the backend an
// architecture runs over when its device does not compute every op the model
// uses: each op of `on_cpu` runs on the host backend, every other on the
// device, and an activation crosses between them only when an op needs it
// and the other side wrote it last (a run of CPU ops keeps its activations
// on the host). Only ops that act on the step's activations and weights can
// fall back (model::can_fall_back); an op whose state lives in the device's
// memory (the KV cache, a recurrent state, the routing and the expert cache)
// cannot, and a device lacking one refuses the model at load (choose_cpu_ops).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/backend.h"

namespace strata::model {

// The ops of (c, w) that run on the CPU behind `device`: those `supports`
// says it lacks, and those in `forced` (told to run on the CPU; a diagnosis
// and test setting) that the model uses. Throws strata::Error naming the
// architecture and the first op the device lacks that cannot fall back.
std::vector<Op> choose_cpu_ops(const ModelConfig& c, const ModelWeights& w, const std::function<bool(Op)>& supports,
                               const std::vector<Op>& forced, const std::string& device);

// What running `on_cpu` on the CPU costs per token (a one-token step).
struct CpuOpsCost {
    std::vector<Op> ops;
    uint64_t moved_bytes = 0;   // activations copied between the device and the host
    uint64_t weight_bytes = 0;  // weights the CPU reads for those ops
    // "dense FFN and output head on the CPU: 64.00 KiB moved and 94.50 MiB of
    // weights read per token" (empty when no op falls back).
    std::string describe() const;
};
CpuOpsCost cpu_ops_cost(const ModelConfig& c, const ModelWeights& w, const std::vector<Op>& on_cpu);

class OpFallback final : public Backend {
public:
    // `host` computes every op of `on_cpu` (a CPU backend); both must outlive this.
    OpFallback(Backend& device, Backend& host, int64_t n_embd, int64_t n_batch, std::vector<Op> on_cpu);

    std::string name() const override { return device_.name() + " with " + host_.name() + " fallback"; }
    bool supports(Op op) const override { return on_cpu(op) ? host_.supports(op) : device_.supports(op); }
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
    void read(Act a, float* host) override { side_with(a).read(a, host); }
    void write(Act a, const float* host) override;
    uint64_t scratch_bytes() const override { return stage_.size() * sizeof(float); }

    bool on_cpu(Op op) const;
    // Activation bytes copied between the two since construction.
    uint64_t moved_bytes() const { return moved_; }

private:
    enum Side : uint8_t { kDevice = 1, kHost = 2 };
    Backend& backend(Side s) { return s == kHost ? host_ : device_; }
    // The side that holds a's latest rows (the device where both do).
    Backend& side_with(Act a);
    // Runs `op` on its side: its inputs brought there first; afterwards its
    // outputs are valid there only, and what it used as scratch is not.
    template <class F>
    void run(Op op, std::initializer_list<Act> reads, std::initializer_list<Act> writes, F&& compute,
             std::initializer_list<Act> scratch = {});
    void bring(Act a, Side to);

    Backend& device_;
    Backend& host_;
    int64_t n_embd_ = 0;
    int64_t n_ = 0;
    std::vector<Op> on_cpu_;
    std::array<uint8_t, 3> valid_{};  // per Act: the sides whose rows are the latest
    std::vector<float> stage_;        // one activation on its way across
    uint64_t moved_ = 0;
};

}  // namespace strata::model
