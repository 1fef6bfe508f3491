// Internal to kernels/ref: the lane-wise float accumulator the reference dot
// products share, and the element count of each block type.
//
// Eight independent float partial sums, each updated in element order, then
// added pairwise at the end. The order is fixed (the result does not depend on
// the compiler), and the lane loop has no cross-iteration dependency, so g++
// -O2 turns it into vector multiplies and adds without -ffast-math.
#pragma once

#include <cstdint>

#include "kernels/ref/quant_ref.h"

namespace strata::kernels::ref_detail {

inline constexpr int kLanes = 8;

struct LaneAcc {
    float lane[kLanes] = {};

    // n must be a multiple of kLanes.
    inline void add(const float* __restrict w, const float* __restrict x, int64_t n) {
        for (int64_t i = 0; i < n; i += kLanes)
            for (int l = 0; l < kLanes; ++l) lane[l] += w[i + l] * x[i + l];
    }

    // Any n < kLanes (or more): element i goes to lane i % kLanes.
    inline void add_tail(const float* w, const float* x, int64_t n) {
        for (int64_t i = 0; i < n; ++i) lane[i % kLanes] += w[i] * x[i];
    }

    inline float sum() const {
        const float a = (lane[0] + lane[4]) + (lane[2] + lane[6]);
        const float b = (lane[1] + lane[5]) + (lane[3] + lane[7]);
        return a + b;
    }
};

template <class Block>
constexpr int block_elems();
template <> constexpr int block_elems<block_q4_0>() { return QK4_0; }
template <> constexpr int block_elems<block_q4_1>() { return QK4_1; }
template <> constexpr int block_elems<block_q5_0>() { return QK5_0; }
template <> constexpr int block_elems<block_q5_1>() { return QK5_1; }
template <> constexpr int block_elems<block_q8_0>() { return QK8_0; }
template <> constexpr int block_elems<block_mxfp4>() { return QK_MXFP4; }
template <> constexpr int block_elems<block_q2_K>() { return static_cast<int>(QK_K); }
template <> constexpr int block_elems<block_q3_K>() { return static_cast<int>(QK_K); }
template <> constexpr int block_elems<block_q4_K>() { return static_cast<int>(QK_K); }
template <> constexpr int block_elems<block_q5_K>() { return static_cast<int>(QK_K); }
template <> constexpr int block_elems<block_q6_K>() { return static_cast<int>(QK_K); }
template <> constexpr int block_elems<block_q8_K>() { return static_cast<int>(QK_K); }

// Row loops over whole blocks. decode_block(const Block&, float* out) is found
// by argument-dependent lookup: each .cpp defines it (static) in
// strata::kernels for its block types. Going through the same decoder is what
// makes dot_* agree with dequantize_row_* element by element.
template <class Block>
inline void dequantize_blocks(const Block* x, float* y, int64_t n) {
    constexpr int qk = block_elems<Block>();
    const int64_t nb = n / qk;
    for (int64_t i = 0; i < nb; ++i) decode_block(x[i], y + i * qk);
}

template <class Block>
inline float dot_blocks(const Block* w, const float* x, int64_t n) {
    constexpr int qk = block_elems<Block>();
    const int64_t nb = n / qk;
    LaneAcc acc;
    float buf[qk];
    for (int64_t i = 0; i < nb; ++i) {
        decode_block(w[i], buf);
        acc.add(buf, x + i * qk, qk);
    }
    return acc.sum();
}

}  // namespace strata::kernels::ref_detail
