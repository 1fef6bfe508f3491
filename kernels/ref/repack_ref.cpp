#include "kernels/ref/repack_ref.h"

#include <cstring>

#include "kernels/ref/quant_ref_dot.h"
#include "kernels/ref/vec_dot_ref.h"

namespace strata::kernels {

namespace {

constexpr int64_t kQuadQs = 4 * QK4_0 / 2;  // 64 quant bytes per quad
constexpr int64_t kQuadD = 4 * 2;           // 4 fp16 scales per quad

struct R4Row {
    const uint8_t* qs;    // the quads' quants
    const uint8_t* d;     // the quads' scales
    const uint8_t* tail;  // the blocks after the last whole quad
    int64_t quads;
};

R4Row r4_row(const void* row, int64_t nb) {
    const auto* p = static_cast<const uint8_t*>(row);
    const int64_t q = nb / 4;
    return {p, p + q * kQuadQs, p + q * (kQuadQs + kQuadD), q};
}

}  // namespace

block_q4_0 q4_0_r4_block(const void* row, int64_t nb, int64_t i) {
    const R4Row r = r4_row(row, nb);
    block_q4_0 b;
    if (i < 4 * r.quads) {
        std::memcpy(&b.d, r.d + i * 2, sizeof b.d);
        std::memcpy(b.qs, r.qs + i * (QK4_0 / 2), sizeof b.qs);
    } else {
        std::memcpy(&b, r.tail + (i - 4 * r.quads) * static_cast<int64_t>(sizeof(block_q4_0)), sizeof b);
    }
    return b;
}

void repack_row_q4_0_r4(const block_q4_0* src, void* dst, int64_t nb) {
    auto* p = static_cast<uint8_t*>(dst);
    const int64_t q = nb / 4;
    uint8_t* qs = p;
    uint8_t* d = p + q * kQuadQs;
    for (int64_t i = 0; i < 4 * q; ++i) {
        std::memcpy(qs + i * (QK4_0 / 2), src[i].qs, sizeof src[i].qs);
        std::memcpy(d + i * 2, &src[i].d, sizeof src[i].d);
    }
    std::memcpy(p + q * (kQuadQs + kQuadD), src + 4 * q, static_cast<size_t>(nb - 4 * q) * sizeof(block_q4_0));
}

void unpack_row_q4_0_r4(const void* src, block_q4_0* dst, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) dst[i] = q4_0_r4_block(src, nb, i);
}

namespace {

// A layout's row seen through its file type's reference kernels, block by
// block: block_at(row, nb, i) gives block i, dequantize the file type's
// decoder. dot follows dot_blocks' order (the same lane accumulator).
template <class Block>
using BlockAt = Block (*)(const void*, int64_t, int64_t);
template <class Block>
using Dequantize = void (*)(const Block*, float*, int64_t);

template <class Block>
void dequantize_layout(const void* x, float* y, int64_t n, BlockAt<Block> block_at, Dequantize<Block> dequantize) {
    const int64_t nb = n / 32;
    for (int64_t i = 0; i < nb; ++i) {
        const Block b = block_at(x, nb, i);
        dequantize(&b, y + i * 32, 32);
    }
}

template <class Block>
float dot_layout_f32(const void* w, const float* x, int64_t n, BlockAt<Block> block_at, Dequantize<Block> dequantize) {
    const int64_t nb = n / 32;
    ref_detail::LaneAcc acc;
    float buf[32];
    for (int64_t i = 0; i < nb; ++i) {
        const Block b = block_at(w, nb, i);
        dequantize(&b, buf, 32);
        acc.add(buf, x + i * 32, 32);
    }
    return acc.sum();
}

}  // namespace

void dequantize_row_q4_0_r4_ref(const void* x, float* y, int64_t n) {
    dequantize_layout<block_q4_0>(x, y, n, &q4_0_r4_block, &dequantize_row_q4_0_ref);
}

float dot_q4_0_r4_f32_ref(const void* w, const float* x, int64_t n) {
    return dot_layout_f32<block_q4_0>(w, x, n, &q4_0_r4_block, &dequantize_row_q4_0_ref);
}

void quantize_row_q4_0_r4_ref(const float* x, void* y, int64_t n) {
    // A quad at a time through q4_0's quantizer, so no row-sized buffer.
    const int64_t nb = n / QK4_0;
    const R4Row r = r4_row(y, nb);
    auto* qs = const_cast<uint8_t*>(r.qs);
    auto* d = const_cast<uint8_t*>(r.d);
    for (int64_t j = 0; j < r.quads; ++j) {
        block_q4_0 quad[4];
        quantize_row_q4_0_ref(x + j * 4 * QK4_0, quad, 4 * QK4_0);
        for (int k = 0; k < 4; ++k) {
            std::memcpy(qs + (4 * j + k) * (QK4_0 / 2), quad[k].qs, sizeof quad[k].qs);
            std::memcpy(d + (4 * j + k) * 2, &quad[k].d, sizeof quad[k].d);
        }
    }
    quantize_row_q4_0_ref(x + r.quads * 4 * QK4_0, reinterpret_cast<block_q4_0*>(const_cast<uint8_t*>(r.tail)),
                          n - r.quads * 4 * QK4_0);
}

float vec_dot_q4_0_r4_q8_0_ref(const void* w, const block_q8_0* x, int64_t n) {
    const int64_t nb = n / QK8_0;
    return vec_dot_q4_0_q8_0_blocks([&](int64_t i) { return q4_0_r4_block(w, nb, i); }, x, n);
}

// ---------------------------------------------------------------------------
// Q8_0_R2

namespace {

constexpr int64_t kPairQs = 2 * QK8_0;  // 64 quant bytes per pair
constexpr int64_t kPairD = 2 * 2;       // 2 fp16 scales per pair

struct R2Row {
    const uint8_t* qs;
    const uint8_t* d;
    const uint8_t* tail;
    int64_t pairs;
};

R2Row r2_row(const void* row, int64_t nb) {
    const auto* p = static_cast<const uint8_t*>(row);
    const int64_t q = nb / 2;
    return {p, p + q * kPairQs, p + q * (kPairQs + kPairD), q};
}

// Block i's quants and scale into their places in an R2 row.
void put_r2_block(const R2Row& r, const block_q8_0& b, int64_t i) {
    auto* qs = const_cast<uint8_t*>(r.qs) + i * QK8_0;
    for (int j = 0; j < QK8_0; ++j) qs[j] = static_cast<uint8_t>(b.qs[j]) ^ 0x80u;
    std::memcpy(const_cast<uint8_t*>(r.d) + i * 2, &b.d, sizeof b.d);
}

}  // namespace

block_q8_0 q8_0_r2_block(const void* row, int64_t nb, int64_t i) {
    const R2Row r = r2_row(row, nb);
    block_q8_0 b;
    if (i < 2 * r.pairs) {
        std::memcpy(&b.d, r.d + i * 2, sizeof b.d);
        for (int j = 0; j < QK8_0; ++j) b.qs[j] = static_cast<int8_t>(r.qs[i * QK8_0 + j] ^ 0x80u);
    } else {
        std::memcpy(&b, r.tail + (i - 2 * r.pairs) * static_cast<int64_t>(sizeof(block_q8_0)), sizeof b);
    }
    return b;
}

void repack_row_q8_0_r2(const block_q8_0* src, void* dst, int64_t nb) {
    const R2Row r = r2_row(dst, nb);
    for (int64_t i = 0; i < 2 * r.pairs; ++i) put_r2_block(r, src[i], i);
    std::memcpy(const_cast<uint8_t*>(r.tail), src + 2 * r.pairs, static_cast<size_t>(nb - 2 * r.pairs) * sizeof(block_q8_0));
}

void unpack_row_q8_0_r2(const void* src, block_q8_0* dst, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i) dst[i] = q8_0_r2_block(src, nb, i);
}

void dequantize_row_q8_0_r2_ref(const void* x, float* y, int64_t n) {
    dequantize_layout<block_q8_0>(x, y, n, &q8_0_r2_block, &dequantize_row_q8_0_ref);
}

float dot_q8_0_r2_f32_ref(const void* w, const float* x, int64_t n) {
    return dot_layout_f32<block_q8_0>(w, x, n, &q8_0_r2_block, &dequantize_row_q8_0_ref);
}

void quantize_row_q8_0_r2_ref(const float* x, void* y, int64_t n) {
    const int64_t nb = n / QK8_0;
    const R2Row r = r2_row(y, nb);
    for (int64_t i = 0; i < 2 * r.pairs; ++i) {
        block_q8_0 b;
        quantize_row_q8_0_ref(x + i * QK8_0, &b, QK8_0);
        put_r2_block(r, b, i);
    }
    quantize_row_q8_0_ref(x + 2 * r.pairs * QK8_0, reinterpret_cast<block_q8_0*>(const_cast<uint8_t*>(r.tail)),
                          n - 2 * r.pairs * QK8_0);
}

float vec_dot_q8_0_r2_q8_0_ref(const void* w, const block_q8_0* x, int64_t n) {
    const int64_t nb = n / QK8_0;
    return vec_dot_q8_0_q8_0_blocks([&](int64_t i) { return q8_0_r2_block(w, nb, i); }, x, n);
}

}  // namespace strata::kernels
