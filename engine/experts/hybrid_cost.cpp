#include "experts/hybrid_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace strata::experts {

namespace {
bool positive(double x) { return std::isfinite(x) && x > 0; }

double roofline(double bytes, double flops, double bps, double flops_per_s) {
    return std::max(bytes / bps, flops / flops_per_s);
}
}  // namespace

std::string HybridRates::validate() const {
    const std::pair<const char*, double> all[] = {{"link_bps", link_bps}, {"cpu_bps", cpu_bps}, {"cpu_flops", cpu_flops},
                                                  {"gpu_bps", gpu_bps},   {"gpu_flops", gpu_flops}};
    for (const auto& [name, v] : all)
        if (!positive(v)) return std::string("hybrid cost model: ") + name + " must be a positive measured rate";
    return {};
}

MissCost choose_miss_path(const HybridRates& r, double bytes, double params, int64_t tokens, double expected_reuse) {
    if (const std::string err = r.validate(); !err.empty()) throw Error(err);
    if (!(bytes >= 0) || !(params >= 0) || tokens < 0 || !(expected_reuse >= 0) || !std::isfinite(expected_reuse))
        throw Error("hybrid cost model: expert bytes, parameters, tokens and expected reuse must not be negative");
    const double flops = 2.0 * params * static_cast<double>(tokens);
    MissCost c;
    c.cpu_s = roofline(bytes, flops, r.cpu_bps, r.cpu_flops);
    c.link_s = bytes / r.link_bps;
    c.copy_s = c.link_s / (1.0 + expected_reuse) + roofline(bytes, flops, r.gpu_bps, r.gpu_flops);
    c.path = c.cpu_s <= c.copy_s ? MissPath::Cpu : MissPath::Link;
    return c;
}

int64_t cpu_token_limit(const HybridRates& r, double bytes, double params, double expected_reuse) {
    if (choose_miss_path(r, bytes, params, 1, expected_reuse).path == MissPath::Link) return 0;
    // The CPU's cost grows faster with tokens than the GPU's (a slower
    // compute rate) or not at all: search the crossover by doubling, then bisect.
    int64_t lo = 1, hi = 2;
    while (choose_miss_path(r, bytes, params, hi, expected_reuse).path == MissPath::Cpu) {
        if (hi > (int64_t{1} << 40)) return std::numeric_limits<int64_t>::max();
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (choose_miss_path(r, bytes, params, mid, expected_reuse).path == MissPath::Cpu ? lo : hi) = mid;
    }
    return lo;
}

}  // namespace strata::experts
