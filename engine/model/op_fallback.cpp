#include "model/op_fallback.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "memory/ledger.h"
#include "model/arch/arch.h"

namespace strata::model {

std::vector<Op> choose_cpu_ops(const ModelConfig& c, const ModelWeights& w, const std::function<bool(Op)>& supports,
                               const std::vector<Op>& forced, const std::string& device) {
    std::vector<Op> on_cpu;
    for (Op op : arch::ops_used(c, w)) {
        const bool told = std::find(forced.begin(), forced.end(), op) != forced.end();
        if (supports(op) && !told) continue;
        if (!can_fall_back(op))
            throw Error(c.arch_name + " uses " + op_name(op) + ", which the " + device +
                        (told ? " cannot leave to the CPU" : " does not compute and cannot leave to the CPU") +
                        " (its state lives in the device's memory); use --device cpu");
        on_cpu.push_back(op);
    }
    return on_cpu;
}

namespace {

// A backend that computes nothing and counts the weight bytes its ops would read.
class WeightCounter final : public Backend {
public:
    uint64_t bytes = 0;
    std::string name() const override { return "counter"; }
    bool supports(Op) const override { return true; }
    void begin(const Step&) override {}
    void embed(const Matrix& table) override { bytes += table.row_bytes; }
    void rms_norm(Act, const std::vector<float>& weight, Act) override { bytes += weight.size() * sizeof(float); }
    void add(Act, Act) override {}
    void attention(const LayerWeights&, const AttentionSpec&) override {}
    void delta_net(const LayerWeights&) override {}
    void predict_route(const LayerWeights&) override {}
    void route(const LayerWeights&, const RouterSpec&) override {}
    void experts(const LayerWeights&, const ExpertSpec&) override {}
    void shared_expert(const LayerWeights& L) override {
        bytes += ffn_bytes(L.shared) + L.shared_gate.size() * sizeof(float);
    }
    void dense_ffn(const LayerWeights& L) override { bytes += ffn_bytes(L.dense); }
    void output_head(const std::vector<float>& norm, const Matrix& head) override {
        bytes += norm.size() * sizeof(float) + head.slab_bytes();
    }
    void nextn_input(const NextnInput& in) override { bytes += in.eh_proj.slab_bytes(); }
    void read(Act, float*) override {}
    void write(Act, const float*) override {}
    uint64_t scratch_bytes() const override { return 0; }

private:
    static uint64_t ffn_bytes(const FfnMatrices& f) { return f.gate.slab_bytes() + f.up.slab_bytes() + f.down.slab_bytes(); }
};

std::string op_list(const std::vector<Op>& ops) {
    std::string s;
    for (size_t i = 0; i < ops.size(); ++i) {
        if (i > 0) s += i + 1 == ops.size() ? " and " : ", ";
        s += op_name(ops[i]);
    }
    return s;
}

}  // namespace

CpuOpsCost cpu_ops_cost(const ModelConfig& c, const ModelWeights& w, const std::vector<Op>& on_cpu) {
    CpuOpsCost cost;
    cost.ops = on_cpu;
    if (on_cpu.empty()) return cost;
    WeightCounter device, host;
    OpFallback b(device, host, c.n_embd, 1, on_cpu);
    const int32_t token = 0;
    const kv::SeqId seq = 0;
    const int64_t pos = 0;
    const uint8_t want = 1;
    Step s;
    s.tokens = &token;
    s.n = 1;
    s.seqs = &seq;
    s.pos = &pos;
    s.want = &want;
    b.begin(s);
    arch::forward(b, c, w, static_cast<int64_t>(w.layers.size()), false);
    cost.moved_bytes = b.moved_bytes();
    cost.weight_bytes = host.bytes;
    return cost;
}

std::string CpuOpsCost::describe() const {
    if (ops.empty()) return {};
    return op_list(ops) + " on the CPU: " + memory::format_bytes(moved_bytes) + " of activations moved and " +
           memory::format_bytes(weight_bytes) + " of weights read by the CPU per token";
}

OpFallback::OpFallback(Backend& device, Backend& host, int64_t n_embd, int64_t n_batch, std::vector<Op> on_cpu)
    : device_(device), host_(host), n_embd_(n_embd), on_cpu_(std::move(on_cpu)) {
    for (Op op : on_cpu_)
        if (!can_fall_back(op)) throw Error(std::string("internal: the op ") + op_name(op) + " cannot run apart from its device");
    if (!on_cpu_.empty()) stage_.resize(static_cast<size_t>(n_embd * n_batch));
}

bool OpFallback::on_cpu(Op op) const { return std::find(on_cpu_.begin(), on_cpu_.end(), op) != on_cpu_.end(); }

void OpFallback::begin(const Step& step) {
    n_ = step.n;
    device_.begin(step);
    if (!on_cpu_.empty()) host_.begin(step);
    valid_.fill(kDevice | kHost);  // nothing written yet: nothing to move
}

Backend& OpFallback::side_with(Act a) {
    return valid_[static_cast<size_t>(a)] & kDevice ? device_ : host_;
}

void OpFallback::write(Act a, const float* host) {
    device_.write(a, host);
    if (!on_cpu_.empty()) host_.write(a, host);
    valid_[static_cast<size_t>(a)] = kDevice | kHost;
}

void OpFallback::bring(Act a, Side to) {
    uint8_t& v = valid_[static_cast<size_t>(a)];
    if (v & to) return;
    const Side from = to == kHost ? kDevice : kHost;
    backend(from).read(a, stage_.data());
    backend(to).write(a, stage_.data());
    v |= to;
    moved_ += static_cast<uint64_t>(n_ * n_embd_) * sizeof(float);
}

template <class F>
void OpFallback::run(Op op, std::initializer_list<Act> reads, std::initializer_list<Act> writes, F&& compute,
                     std::initializer_list<Act> scratch) {
    const Side side = on_cpu(op) ? kHost : kDevice;
    for (Act a : reads) bring(a, side);
    compute(backend(side));
    for (Act a : writes) valid_[static_cast<size_t>(a)] = side;
    for (Act a : scratch) valid_[static_cast<size_t>(a)] &= static_cast<uint8_t>(~side);
}

void OpFallback::embed(const Matrix& table) {
    run(Op::Embed, {}, {Act::Residual}, [&](Backend& b) { b.embed(table); });
}

void OpFallback::rms_norm(Act in, const std::vector<float>& weight, Act out) {
    run(Op::RmsNorm, {in}, {out}, [&](Backend& b) { b.rms_norm(in, weight, out); });
}

void OpFallback::add(Act dst, Act src) {
    run(Op::Add, {dst, src}, {dst}, [&](Backend& b) { b.add(dst, src); });
}

// The ops below keep state on the device (choose_cpu_ops never sends them to the CPU).
void OpFallback::attention(const LayerWeights& L, const AttentionSpec& spec) {
    run(spec.latent ? Op::LatentAttention : Op::Attention, {Act::Normed}, {Act::Out},
        [&](Backend& b) { b.attention(L, spec); });
}

void OpFallback::delta_net(const LayerWeights& L) {
    run(Op::DeltaNet, {Act::Normed}, {Act::Out}, [&](Backend& b) { b.delta_net(L); });
}

void OpFallback::predict_route(const LayerWeights& next) {
    run(Op::Route, {Act::Residual}, {}, [&](Backend& b) { b.predict_route(next); });
}

void OpFallback::route(const LayerWeights& L, const RouterSpec& spec) {
    run(spec.scored ? Op::ScoredRoute : Op::Route, {Act::Normed}, {}, [&](Backend& b) { b.route(L, spec); });
}

void OpFallback::experts(const LayerWeights& L, const ExpertSpec& spec) {
    run(Op::Experts, {Act::Normed}, {Act::Out}, [&](Backend& b) { b.experts(L, spec); });
}

void OpFallback::shared_expert(const LayerWeights& L) {
    run(Op::SharedExpert, {Act::Normed, Act::Out}, {Act::Out}, [&](Backend& b) { b.shared_expert(L); });
}

void OpFallback::dense_ffn(const LayerWeights& L) {
    run(Op::DenseFfn, {Act::Normed}, {Act::Out}, [&](Backend& b) { b.dense_ffn(L); });
}

// Both backends normalise the picked rows in place of Normed.
void OpFallback::output_head(const std::vector<float>& norm, const Matrix& head) {
    run(Op::OutputHead, {Act::Residual}, {}, [&](Backend& b) { b.output_head(norm, head); }, {Act::Normed});
}

void OpFallback::nextn_input(const NextnInput& in) {
    run(Op::NextnInput, {Act::Residual}, {Act::Residual}, [&](Backend& b) { b.nextn_input(in); });
}

}  // namespace strata::model
