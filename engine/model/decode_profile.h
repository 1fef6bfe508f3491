// Where a forward pass's time goes on each compute thread, for
// `strata-cli bench --profile`. While a Context holds one (set_profile), it
// adds up per pool thread the time and weight bytes of every weight product
// (quantized, and f32 such as a router) and the time of the attention over
// the KV cache; the pool adds each thread's time inside parallel regions. A
// thread's other time inside regions is the regions' own work (norms, RoPE,
// SiLU, quantizing activations, waiting on the other threads); its time
// outside them is serial work (the calling thread) or idle (a worker).
// Two clock reads per timed call: a few microseconds per token.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::model {

struct DecodeProfile {
    enum Part : int { QuantWeights, F32Weights, Attention, kParts };
    struct alignas(64) Thread {  // one cache line each: threads write their own
        double seconds[kParts] = {};
        uint64_t bytes[kParts] = {};  // weight bytes read (attention: 0)
        double in_regions = 0.0;      // seconds inside parallel regions
    };
    std::vector<Thread> threads;  // by pool thread index (0: the calling thread)
};

}  // namespace strata::model
