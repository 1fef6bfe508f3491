// Where a forward pass's time goes on each compute thread, for
// `strata-cli bench --profile`. While a Context holds one (set_profile), it
// adds up per pool thread the time and weight bytes of every weight product
// (quantized, and f32 such as a router) and the time of the attention over
// the KV cache, and the time a thread spins inside a region until another
// has done its part (a KV head's Q/K/V rows, every head's attention output,
// an expert's down-projection input); the pool adds each thread's time
// inside parallel regions, and the calling thread's wait at each region's
// end for the workers. A thread's other time inside regions is the regions'
// own work (norms, RoPE, SiLU, quantizing activations); the calling
// thread's time outside them, less its waits at their ends, is serial work
// (routing, residuals, norms between regions), and a worker's is idle.
// Two clock reads per timed call: a few microseconds per token.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::model {

struct DecodeProfile {
    enum Part : int { QuantWeights, F32Weights, Attention, Waiting, kParts };
    struct alignas(64) Thread {  // one cache line each: threads write their own
        double seconds[kParts] = {};
        uint64_t bytes[kParts] = {};  // weight bytes read (attention, waiting: 0)
        double in_regions = 0.0;      // seconds inside parallel regions
        double region_end_wait = 0.0;  // the calling thread: seconds waiting for workers at the regions' ends
    };
    std::vector<Thread> threads;  // by pool thread index (0: the calling thread)
};

}  // namespace strata::model
