// A quantized block's level codes, written under the scales it already has.
//
// Error compensation (GPTQ-style, engine/quant/gptq.cpp) picks a block's
// scales once, then rounds its elements one by one to that grid while earlier
// rounding errors are pushed onto later elements; so it needs the grid of each
// element (probed by setting every code to 0 and to 1 and dequantizing) and a
// way to write the codes it chose. Codes are unsigned, 0 .. levels-1, and an
// element's value is affine in its code: x = a * code + b.
#include <cstring>

#include "kernels/ref/quant_ref.h"

namespace strata::kernels {

namespace {

// Bits 0-3 of code j and j + half in byte j (q4_0, q4_1, q5_0, q5_1).
template <int N>
void pack_nibbles_split(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < N / 2; ++j) qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | ((L[j + N / 2] & 0x0F) << 4));
}

// Bit 4 of code j is bit j of the little-endian qh (q5_0, q5_1).
template <int N>
void pack_fifth_bits(const uint8_t* L, uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < N; ++j) h |= static_cast<uint32_t>((L[j] >> 4) & 1u) << j;
    for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

void set_q3_K(block_q3_K& y, const uint8_t* L) {
    // Codes 4..7 have the high bit (hmask) set and their low two bits in qs;
    // codes 0..3 have it clear (the value then subtracts 4).
    std::memset(y.hmask, 0, QK_K / 8);
    uint8_t low[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        if (L[j] > 3) y.hmask[j % (QK_K / 8)] = static_cast<uint8_t>(y.hmask[j % (QK_K / 8)] | (1u << (j / (QK_K / 8))));
        low[j] = static_cast<uint8_t>(L[j] & 3);
    }
    pack_2bit_planes(low, y.qs);
}

void set_q4_K(block_q4_K& y, const uint8_t* L) {
    uint8_t* q = y.qs;
    for (int j = 0; j < QK_K; j += 64, q += 32)
        for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
}

void set_q6_K(block_q6_K& y, const uint8_t* L) {
    uint8_t* ql = y.ql;
    uint8_t* qh = y.qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            ql[l + 0] = static_cast<uint8_t>((L[j + l] & 0xF) | ((L[j + l + 64] & 0xF) << 4));
            ql[l + 32] = static_cast<uint8_t>((L[j + l + 32] & 0xF) | ((L[j + l + 96] & 0xF) << 4));
            qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                         ((L[j + l + 96] >> 4) << 6));
        }
    }
}

}  // namespace

int block_levels(WeightType t) {
    switch (t) {
        case WeightType::Q2_K: return 4;
        case WeightType::Q3_K: return 8;
        case WeightType::Q4_0: case WeightType::Q4_1: case WeightType::Q4_K: return 16;
        case WeightType::Q5_0: case WeightType::Q5_1: case WeightType::Q5_K: return 32;
        case WeightType::Q6_K: return 64;
        case WeightType::Q8_0: return 255;
        default: return 0;
    }
}

bool set_block_levels_ref(WeightType t, void* block, const uint8_t* L) {
    switch (t) {
        case WeightType::Q4_0: pack_nibbles_split<QK4_0>(L, static_cast<block_q4_0*>(block)->qs); return true;
        case WeightType::Q4_1: pack_nibbles_split<QK4_1>(L, static_cast<block_q4_1*>(block)->qs); return true;
        case WeightType::Q5_0: {
            auto* b = static_cast<block_q5_0*>(block);
            pack_nibbles_split<QK5_0>(L, b->qs);
            pack_fifth_bits<QK5_0>(L, b->qh);
            return true;
        }
        case WeightType::Q5_1: {
            auto* b = static_cast<block_q5_1*>(block);
            pack_nibbles_split<QK5_1>(L, b->qs);
            pack_fifth_bits<QK5_1>(L, b->qh);
            return true;
        }
        case WeightType::Q8_0: {
            auto* b = static_cast<block_q8_0*>(block);
            for (int j = 0; j < QK8_0; ++j) b->qs[j] = static_cast<int8_t>(static_cast<int>(L[j]) - 127);
            return true;
        }
        case WeightType::Q2_K: pack_2bit_planes(L, static_cast<block_q2_K*>(block)->qs); return true;
        case WeightType::Q3_K: set_q3_K(*static_cast<block_q3_K*>(block), L); return true;
        case WeightType::Q4_K: set_q4_K(*static_cast<block_q4_K*>(block), L); return true;
        case WeightType::Q5_K: {
            auto* b = static_cast<block_q5_K*>(block);
            pack_q5_K_quants(L, b->qh, b->qs);
            return true;
        }
        case WeightType::Q6_K: set_q6_K(*static_cast<block_q6_K*>(block), L); return true;
        default: return false;
    }
}

}  // namespace strata::kernels
