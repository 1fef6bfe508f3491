// The body of ref::router_scored (ops_ref.h) over a given softmax: the
// reference passes its scalar softmax, kernels::ops its SIMD one; everything
// else is the same arithmetic, so the CPU backend's scored routing and its
// reference twin are one piece of code.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::kernels::ref {

template <class Softmax>
void router_scored_with(Softmax&& softmax, float* p, int64_t n_expert, int64_t k, bool sigmoid, const float* select_bias,
                        int64_t groups, int64_t groups_used, const uint8_t* allowed, float* sel, int32_t* ids, float* w) {
    const int64_t E = n_expert;
    if (sigmoid) {
        for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    } else {
        softmax(p, E);
    }
    constexpr float kOut = -std::numeric_limits<float>::infinity();
    for (int64_t e = 0; e < E; ++e) {
        sel[e] = p[e] + (select_bias ? select_bias[e] : 0.0f);
        if (allowed && !allowed[e]) sel[e] = kOut;
    }
    if (groups > 1 && groups_used < groups) {
        const int64_t G = groups < 256 ? groups : 256, per = E / groups;
        float score[256];
        for (int64_t g = 0; g < G; ++g) {
            float best = kOut, second = kOut;
            for (int64_t e = g * per; e < (g + 1) * per; ++e) {
                if (sel[e] > best) {
                    second = best;
                    best = sel[e];
                } else if (sel[e] > second) {
                    second = sel[e];
                }
            }
            score[g] = sigmoid ? best + second : best;
        }
        uint8_t keep[256] = {};
        for (int64_t j = 0; j < groups_used; ++j) {
            int64_t arg = -1;
            for (int64_t g = 0; g < G; ++g)
                if (!keep[g] && (arg < 0 || score[g] > score[arg])) arg = g;
            keep[arg] = 1;
        }
        for (int64_t g = 0; g < G; ++g)
            if (!keep[g])
                for (int64_t e = g * per; e < (g + 1) * per; ++e) sel[e] = kOut;
    }
    for (int64_t r = 0; r < k; ++r) {
        int64_t arg = -1;
        for (int64_t e = 0; e < E; ++e)
            if (sel[e] != kOut && (arg < 0 || sel[e] > sel[arg])) arg = e;
        if (arg < 0) {
            ids[r] = -1;
            w[r] = 0.0f;
            continue;
        }
        ids[r] = static_cast<int32_t>(arg);
        w[r] = p[arg];
        sel[arg] = kOut;
    }
}

}  // namespace strata::kernels::ref
