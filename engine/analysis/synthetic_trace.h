// Synthetic routing traces with a chosen locality, for projecting cache and
// hybrid policies onto routing like a real model's when no such model is at
// hand (strata-cli make-trace). Per MoE layer the experts have a Zipf
// popularity (rank r drawn with weight 1 / (r + 1)^skew, the ranks shuffled
// per layer); each of a token's top-k selections repeats one of the previous
// token's experts with probability `repeat`, else is drawn by popularity.
// Published for Qwen3-30B-A3B (128 experts, top-8): 45% of selections repeat
// at the next token, 80% within 8 tokens.
#pragma once

#include <cstdint>

#include "experts/trace.h"

namespace strata::experts {

struct SyntheticTraceSpec {
    int64_t moe_layers = 20;
    int64_t experts = 64;
    int64_t used = 2;
    int64_t sequences = 8;
    int64_t tokens = 256;     // per sequence
    double repeat = 0.45;     // probability a selection repeats one of the previous token's
    double skew = 1.0;        // Zipf exponent of the experts' popularity (0: uniform)
    uint64_t expert_bytes = 50'000'000;
    uint64_t shared_bytes = 2'000'000'000;
    uint64_t seed = 1;

    // Empty when valid, else what is wrong.
    std::string validate() const;
};

// Deterministic for a spec and seed. Throws strata::Error for an invalid spec.
Trace synthetic_trace(const SyntheticTraceSpec& spec);

// The locality figures routing-stats reports, measured on a trace: the share
// of a token's selections the previous token also made, and the share made by
// any of the previous 8 tokens (within a sequence).
struct TraceLocality {
    double repeat = 0, within8 = 0;
};
TraceLocality measure_locality(const Trace& trace);

}  // namespace strata::experts
