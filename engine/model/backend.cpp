#include "model/backend.h"

#include <algorithm>
#include <cmath>

namespace strata::model {

float attention_temperature(const AttentionSpec& spec, int64_t pos) {
    if (spec.temperature_floor <= 0) return 1.0f;
    const double steps = std::floor((static_cast<double>(pos) + 1.0) / static_cast<double>(spec.temperature_floor));
    return static_cast<float>(std::log(steps + 1.0) * spec.temperature_scale + 1.0);
}

int64_t first_visible_key(const AttentionSpec& spec, int64_t n_keys) {
    int64_t first = spec.window > 0 ? std::max<int64_t>(0, n_keys - spec.window) : 0;
    if (spec.chunk > 0) first = std::max(first, (n_keys - 1) / spec.chunk * spec.chunk);
    return first;
}

const char* op_name(Op op) {
    switch (op) {
        case Op::Embed: return "embedding";
        case Op::RmsNorm: return "RMSNorm";
        case Op::Add: return "residual add";
        case Op::Attention: return "attention";
        case Op::LatentAttention: return "latent attention (MLA)";
        case Op::AttentionSinks: return "attention sinks";
        case Op::SlidingWindow: return "sliding-window attention";
        case Op::ChunkedAttention: return "chunked attention";
        case Op::NormAfterRope: return "Q/K norm after RoPE";
        case Op::AttentionTemperature: return "attention temperature";
        case Op::AttentionOutputGate: return "attention output gate";
        case Op::DeltaNet: return "gated delta net (linear attention with a recurrent state)";
        case Op::NextnInput: return "a NextN/MTP block's input (the trunk's hidden state mixed in)";
        case Op::Route: return "router (softmax top-k)";
        case Op::ScoredRoute: return "router (scored: selection bias, sigmoid, groups)";
        case Op::Experts: return "routed experts (SwiGLU)";
        case Op::ClampedExperts: return "routed experts (clamped SwiGLU with biases)";
        case Op::WeightedExpertInput: return "routed experts (weighted before the FFN)";
        case Op::SharedExpert: return "shared expert";
        case Op::DenseFfn: return "dense FFN";
        case Op::OutputHead: return "output head";
    }
    return "?";
}

bool can_fall_back(Op op) {
    switch (op) {
        case Op::Embed:
        case Op::RmsNorm:
        case Op::Add:
        case Op::SharedExpert:
        case Op::DenseFfn:
        case Op::OutputHead:
        case Op::NextnInput: return true;
        default: return false;
    }
}

}  // namespace strata::model
