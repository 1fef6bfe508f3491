// What a plan's expert cache means for decode speed where the experts do not
// all fit (the model larger than the fast budget): every expert a token routes
// to that has no slot is read from the model file, so the disk bounds the
// tokens per second. The plan says how many slots; this says how fast, from
// the file's measured read rate and the bytes each token's misses read.
//
// The estimate, stated in its text so nobody mistakes it for a measurement
// of decode:
//   expert bytes per token = sum over MoE layers of n_expert_used x that
//                            layer's mean expert bytes (Model::Sizes)
//   miss share             = 1 - cache fraction: the hit rate of an LRU cache
//                            under uniform routing, a conservative figure
//                            (real routing is skewed and hits more)
//   disk bytes per token   = expert bytes per token x miss share
//   tokens per second      = read rate / disk bytes per token, the disk's
//                            bound (compute and the rest come on top), given
//                            as a range over the slowest and the fastest
//                            batch of the measurement
#pragma once

#include <cstdint>
#include <string>

namespace strata::model {
class Model;
}
namespace strata::memory {
struct Plan;
}

namespace strata::experts {

// The rate at which expert reads come off the model file, as the expert
// store reads them (O_DIRECT, gate/up/down windows of random experts, one
// after another): bytes/s (1 GB = 1e9 B), slowest and fastest of a few
// batches and the whole. Reads at most about `max_bytes` or `max_seconds`.
// Cached per file (path, size, modification time) for the process: the
// second plan of a file does not read again. Throws strata::Error for a file
// that cannot be read; all 0 for a model without routed experts.
struct ReadRate {
    double low_bps = 0;   // the slowest batch
    double high_bps = 0;  // the fastest batch
    double mean_bps = 0;  // all bytes over all time
    uint64_t bytes = 0;   // read to measure it
    bool direct = false;  // O_DIRECT (else buffered, pages dropped after)
    bool cached = false;  // from an earlier measurement of this file
};
ReadRate measure_expert_read_rate(const model::Model& m, double max_seconds = 0.6, uint64_t max_bytes = 768ull << 20);

struct StreamEstimate {
    bool streams = false;                // some routed experts have no slot: misses read the file
    double expert_bytes_per_token = 0;   // every MoE layer's routed experts, one token
    double miss_share = 0;               // 1 - cache fraction
    double disk_bytes_per_token = 0;
    double low_tok_s = 0, high_tok_s = 0;  // the disk's bound, over the read rate's range
    ReadRate rate;
    std::string text;                    // one line for the plan; "" when nothing streams
};

// `rate` from measure_expert_read_rate (or given, for tests). Nothing
// streams for a dense model or a cache with every expert.
StreamEstimate estimate_stream(const memory::Plan& p, const model::Model& m, const ReadRate& rate);

}  // namespace strata::experts
