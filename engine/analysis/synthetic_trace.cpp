#include "analysis/synthetic_trace.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"

namespace strata::experts {

std::string SyntheticTraceSpec::validate() const {
    if (moe_layers < 1 || moe_layers > 4096) return "--moe-layers must be between 1 and 4096";
    if (experts < 1 || experts > 4096) return "--experts must be between 1 and 4096";
    if (used < 1 || used > experts) return "--used must be between 1 and --experts";
    if (sequences < 1 || tokens < 1 || sequences * tokens > 10'000'000) return "--sequences x --tokens must be between 1 and 10^7";
    if (!(repeat >= 0 && repeat <= 1)) return "--repeat must be a probability in [0, 1]";
    if (!(skew >= 0 && skew <= 10)) return "--skew must be between 0 and 10";
    if (expert_bytes == 0) return "--expert-bytes must be positive";
    return "";
}

Trace synthetic_trace(const SyntheticTraceSpec& s) {
    if (const std::string err = s.validate(); !err.empty()) throw Error("synthetic trace: " + err);
    Trace t;
    TraceHeader& h = t.header;
    h.model_name = "synthetic";
    h.n_layer = s.moe_layers;
    h.n_expert = s.experts;
    h.n_used = s.used;
    h.expert_bytes = s.expert_bytes;
    h.shared_bytes = s.shared_bytes;
    for (int64_t l = 0; l < s.moe_layers; ++l) h.moe_layers.push_back(l);
    std::mt19937_64 rng(s.seed);
    // Per layer: the experts in popularity order and their cumulative weights.
    std::vector<std::vector<int32_t>> order(static_cast<size_t>(s.moe_layers));
    std::vector<double> cum(static_cast<size_t>(s.experts));
    for (int64_t r = 0; r < s.experts; ++r)
        cum[static_cast<size_t>(r)] = (r ? cum[static_cast<size_t>(r - 1)] : 0.0) + 1.0 / std::pow(double(r + 1), s.skew);
    for (auto& o : order) {
        o.resize(static_cast<size_t>(s.experts));
        std::iota(o.begin(), o.end(), 0);
        std::shuffle(o.begin(), o.end(), rng);
    }
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const auto popular = [&](int64_t layer) {
        const double x = u01(rng) * cum.back();
        const auto r = std::lower_bound(cum.begin(), cum.end(), x) - cum.begin();
        return order[static_cast<size_t>(layer)][static_cast<size_t>(std::min<int64_t>(r, s.experts - 1))];
    };
    std::vector<int32_t> prev, cur;
    for (int64_t seq = 0; seq < s.sequences; ++seq)
        for (int64_t pos = 0; pos < s.tokens; ++pos) {
            t.tokens.push_back({seq, pos, pos, -1, true});
            for (int64_t l = 0; l < s.moe_layers; ++l) {
                prev.clear();
                if (pos > 0) {
                    const size_t at = (t.tokens.size() - 2) * static_cast<size_t>(s.moe_layers * s.used) +
                                      static_cast<size_t>(l * s.used);
                    prev.assign(t.experts.begin() + static_cast<std::ptrdiff_t>(at),
                                t.experts.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(s.used)));
                }
                cur.clear();
                for (int64_t k = 0; k < s.used; ++k) {
                    int32_t e = -1;
                    std::vector<int32_t> left;
                    for (int32_t p : prev)
                        if (std::find(cur.begin(), cur.end(), p) == cur.end()) left.push_back(p);
                    if (!left.empty() && u01(rng) < s.repeat)
                        e = left[static_cast<size_t>(rng() % left.size())];
                    while (e < 0 || std::find(cur.begin(), cur.end(), e) != cur.end()) e = popular(l);
                    cur.push_back(e);
                }
                for (int32_t e : cur) {
                    t.experts.push_back(e);
                    t.weights.push_back(1.0f / static_cast<float>(s.used));
                }
                t.has_lookahead.push_back(0);
            }
        }
    return t;
}

TraceLocality measure_locality(const Trace& t) {
    const int64_t M = t.header.n_moe(), U = t.header.n_used;
    int64_t sel = 0, rep = 0, win = 0;
    for (int64_t i = 1; i < t.n_tokens(); ++i) {
        if (t.tokens[i].sequence != t.tokens[i - 1].sequence) continue;
        for (int64_t m = 0; m < M; ++m)
            for (int32_t e : t.experts_of(i, m)) {
                ++sel;
                const auto p = t.experts_of(i - 1, m);
                rep += std::find(p.begin(), p.end(), e) != p.end();
                bool seen = false;
                for (int64_t j = i - 1; j >= 0 && j >= i - 8 && t.tokens[j].sequence == t.tokens[i].sequence && !seen; --j) {
                    const auto q = t.experts_of(j, m);
                    seen = std::find(q.begin(), q.end(), e) != q.end();
                }
                win += seen;
            }
    }
    (void)U;
    TraceLocality l;
    if (sel) {
        l.repeat = double(rep) / double(sel);
        l.within8 = double(win) / double(sel);
    }
    return l;
}

}  // namespace strata::experts
