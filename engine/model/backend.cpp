#include "model/backend.h"

namespace strata::model {

const char* op_name(Op op) {
    switch (op) {
        case Op::Embed: return "embedding";
        case Op::RmsNorm: return "RMSNorm";
        case Op::Add: return "residual add";
        case Op::Attention: return "attention";
        case Op::LatentAttention: return "latent attention (MLA)";
        case Op::AttentionSinks: return "attention sinks";
        case Op::SlidingWindow: return "sliding-window attention";
        case Op::Route: return "router (softmax top-k)";
        case Op::ScoredRoute: return "router (scored: sigmoid, selection bias, groups)";
        case Op::Experts: return "routed experts (SwiGLU)";
        case Op::ClampedExperts: return "routed experts (clamped SwiGLU with biases)";
        case Op::SharedExpert: return "shared expert";
        case Op::DenseFfn: return "dense FFN";
        case Op::OutputHead: return "output head";
    }
    return "?";
}

}  // namespace strata::model
