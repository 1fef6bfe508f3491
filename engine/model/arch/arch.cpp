#include "model/arch/arch.h"

#include <algorithm>

namespace strata::model::arch {

extern const ArchTraits llama, qwen2moe, qwen3moe, olmoe, deepseek2, gpt_oss, glm4moe, minimax_m2, ernie4_5_moe, llama4,
    qwen35moe;

std::span<const ArchTraits* const> all() {
    static const ArchTraits* const table[] = {&llama,   &qwen2moe, &qwen3moe,   &olmoe,       &deepseek2,
                                              &gpt_oss, &glm4moe,  &minimax_m2, &ernie4_5_moe, &llama4,
                                              &qwen35moe};
    return table;
}

void forward(Backend& b, const ModelConfig& c, const ModelWeights& w, int64_t n_layers, bool predict_routes) {
    b.embed(w.tok_embd);
    if (w.nextn_input) b.nextn_input(*w.nextn_input);
    for (int64_t i = 0; i < n_layers; ++i) {
        const LayerWeights& L = w.layers[static_cast<size_t>(i)];
        const LayerWeights* next = nullptr;
        if (predict_routes && i + 1 < n_layers && w.layers[static_cast<size_t>(i + 1)].ffn == FfnKind::Moe)
            next = &w.layers[static_cast<size_t>(i + 1)];
        c.traits.layer(b, c, L, next);
    }
    b.output_head(w.output_norm, w.output);
}

namespace {

// A backend that computes nothing and notes which ops are called.
class OpRecorder final : public Backend {
public:
    std::vector<Op> ops;
    std::string name() const override { return "recorder"; }
    bool supports(Op) const override { return true; }
    void begin(const Step&) override {}
    void embed(const Matrix&) override { note(Op::Embed); }
    void rms_norm(Act, const std::vector<float>&, Act) override { note(Op::RmsNorm); }
    void add(Act, Act) override { note(Op::Add); }
    void attention(const LayerWeights&, const AttentionSpec& s) override {
        note(s.latent ? Op::LatentAttention : Op::Attention);
        if (s.sinks) note(Op::AttentionSinks);
        if (s.window > 0) note(Op::SlidingWindow);
        if (s.chunk > 0) note(Op::ChunkedAttention);
        if (s.norm_after_rope) note(Op::NormAfterRope);
        if (s.temperature_floor > 0) note(Op::AttentionTemperature);
        if (s.output_gate) note(Op::AttentionOutputGate);
    }
    void delta_net(const LayerWeights&) override { note(Op::DeltaNet); }
    void predict_route(const LayerWeights&) override {}
    void route(const LayerWeights&, const RouterSpec& s) override { note(s.scored ? Op::ScoredRoute : Op::Route); }
    void experts(const LayerWeights&, const ExpertSpec& s) override {
        note(s.act == FfnAct::SwigluOai ? Op::ClampedExperts : Op::Experts);
        if (s.weight_before) note(Op::WeightedExpertInput);
    }
    void shared_expert(const LayerWeights&) override { note(Op::SharedExpert); }
    void dense_ffn(const LayerWeights&) override { note(Op::DenseFfn); }
    void output_head(const std::vector<float>&, const Matrix&) override { note(Op::OutputHead); }
    void nextn_input(const NextnInput&) override { note(Op::NextnInput); }
    void read(Act, float*) override {}
    void write(Act, const float*) override {}
    uint64_t scratch_bytes() const override { return 0; }

private:
    void note(Op op) {
        if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
};

}  // namespace

std::vector<Op> ops_used(const ModelConfig& c, const ModelWeights& w) {
    OpRecorder r;
    forward(r, c, w, static_cast<int64_t>(w.layers.size()), false);
    return r.ops;
}

RouterSpec router_spec(const ModelConfig& c) {
    RouterSpec r;
    r.scored = c.gating != Gating::Softmax || c.n_expert_groups > 1;
    r.gating = c.gating;
    r.groups = c.n_expert_groups;
    r.groups_used = c.n_group_used;
    r.renormalise = c.expert_weights_norm;
    r.scale = c.expert_weights_scale;
    return r;
}

void attention_block(Backend& b, const LayerWeights& L, const AttentionSpec& spec) {
    b.rms_norm(Act::Residual, L.attn_norm, Act::Normed);
    b.attention(L, spec);
    b.add(Act::Residual, Act::Out);
}

void ffn_block(Backend& b, const ModelConfig& c, const LayerWeights& L, const LayerWeights* next,
               const RouterSpec& router, const ExpertSpec& experts) {
    if (next) b.predict_route(*next);
    b.rms_norm(Act::Residual, L.ffn_norm, Act::Normed);
    if (L.ffn == FfnKind::Dense) {
        b.dense_ffn(L);
    } else {
        RouterSpec r = router;
        r.scored |= !L.router_select_bias.empty();  // the bias (exp_probs_b) chooses: only the scored router reads it
        b.route(L, r);
        b.experts(L, experts);
        if (L.has_shared_expert()) b.shared_expert(L);
    }
    b.add(Act::Residual, Act::Out);
}

}  // namespace strata::model::arch
