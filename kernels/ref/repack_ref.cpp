#include "kernels/ref/repack_ref.h"

#include <cstring>

#include "kernels/ref/quant_ref_dot.h"
#include "kernels/ref/vec_dot_ref.h"

namespace strata::kernels {

namespace {

// Both layouts are one shape (repack_ref.h): the blocks of each whole group
// of kGroup keep their quants together (each byte stored as byte ^ kFlip),
// every group's fp16 scales follow all the quants, and the last nb % kGroup
// blocks keep the file layout. Block i of the grouped part has its quants at
// qs + i * kQs and its scale at d + 2 i.
template <class Block, int64_t kGroup, uint8_t kFlip>
struct Grouped {
    static constexpr int64_t kQs = sizeof(Block::qs);

    struct Row {
        uint8_t* qs;
        uint8_t* d;
        uint8_t* tail;
        int64_t grouped;  // blocks in whole groups
    };
    static Row row(const void* p, int64_t nb) {
        auto* b = static_cast<uint8_t*>(const_cast<void*>(p));
        const int64_t g = nb / kGroup * kGroup;
        return {b, b + g * kQs, b + g * (kQs + 2), g};
    }

    static Block get(const void* p, int64_t nb, int64_t i) {
        const Row r = row(p, nb);
        Block b;
        if (i < r.grouped) {
            std::memcpy(&b.d, r.d + i * 2, sizeof b.d);
            auto* q = reinterpret_cast<uint8_t*>(b.qs);
            for (int64_t j = 0; j < kQs; ++j) q[j] = r.qs[i * kQs + j] ^ kFlip;
        } else {
            std::memcpy(&b, r.tail + (i - r.grouped) * static_cast<int64_t>(sizeof(Block)), sizeof b);
        }
        return b;
    }

    static void put(const Row& r, const Block& b, int64_t i) {
        const auto* q = reinterpret_cast<const uint8_t*>(b.qs);
        for (int64_t j = 0; j < kQs; ++j) r.qs[i * kQs + j] = q[j] ^ kFlip;
        std::memcpy(r.d + i * 2, &b.d, sizeof b.d);
    }

    static void repack(const Block* src, void* dst, int64_t nb) {
        const Row r = row(dst, nb);
        for (int64_t i = 0; i < r.grouped; ++i) put(r, src[i], i);
        std::memcpy(r.tail, src + r.grouped, static_cast<size_t>(nb - r.grouped) * sizeof(Block));
    }

    static void unpack(const void* src, Block* dst, int64_t nb) {
        for (int64_t i = 0; i < nb; ++i) dst[i] = get(src, nb, i);
    }

    // Block by block through the file type's quantizer (it quantizes each
    // block on its own), so no row-sized buffer.
    static void quantize(const float* x, void* y, int64_t n, void (*quantize_file)(const float*, Block*, int64_t)) {
        const Row r = row(y, n / 32);
        for (int64_t i = 0; i < r.grouped; ++i) {
            Block b;
            quantize_file(x + i * 32, &b, 32);
            put(r, b, i);
        }
        quantize_file(x + r.grouped * 32, reinterpret_cast<Block*>(r.tail), n - r.grouped * 32);
    }

    // A layout's row seen through its file type's reference kernels, block by
    // block; dot follows dot_blocks' order (the same lane accumulator).
    static void dequantize(const void* x, float* y, int64_t n, void (*dequantize_file)(const Block*, float*, int64_t)) {
        const int64_t nb = n / 32;
        for (int64_t i = 0; i < nb; ++i) {
            const Block b = get(x, nb, i);
            dequantize_file(&b, y + i * 32, 32);
        }
    }

    static float dot_f32(const void* w, const float* x, int64_t n, void (*dequantize_file)(const Block*, float*, int64_t)) {
        const int64_t nb = n / 32;
        ref_detail::LaneAcc acc;
        float buf[32];
        for (int64_t i = 0; i < nb; ++i) {
            const Block b = get(w, nb, i);
            dequantize_file(&b, buf, 32);
            acc.add(buf, x + i * 32, 32);
        }
        return acc.sum();
    }
};

using R4 = Grouped<block_q4_0, 4, 0x00>;  // Q4_0_R4: quads, quants as they are
using R2 = Grouped<block_q8_0, 2, 0x80>;  // Q8_0_R2: pairs, quants stored unsigned

}  // namespace

// --- Q4_0_R4 -------------------------------------------------------------------

block_q4_0 q4_0_r4_block(const void* row, int64_t nb, int64_t i) { return R4::get(row, nb, i); }
void repack_row_q4_0_r4(const block_q4_0* src, void* dst, int64_t nb) { R4::repack(src, dst, nb); }
void unpack_row_q4_0_r4(const void* src, block_q4_0* dst, int64_t nb) { R4::unpack(src, dst, nb); }
void dequantize_row_q4_0_r4_ref(const void* x, float* y, int64_t n) { R4::dequantize(x, y, n, &dequantize_row_q4_0_ref); }
float dot_q4_0_r4_f32_ref(const void* w, const float* x, int64_t n) { return R4::dot_f32(w, x, n, &dequantize_row_q4_0_ref); }
void quantize_row_q4_0_r4_ref(const float* x, void* y, int64_t n) { R4::quantize(x, y, n, &quantize_row_q4_0_ref); }

float vec_dot_q4_0_r4_q8_0_ref(const void* w, const block_q8_0* x, int64_t n) {
    const int64_t nb = n / QK8_0;
    return vec_dot_q4_0_q8_0_blocks([&](int64_t i) { return R4::get(w, nb, i); }, x, n);
}

// --- Q8_0_R2 -------------------------------------------------------------------

block_q8_0 q8_0_r2_block(const void* row, int64_t nb, int64_t i) { return R2::get(row, nb, i); }
void repack_row_q8_0_r2(const block_q8_0* src, void* dst, int64_t nb) { R2::repack(src, dst, nb); }
void unpack_row_q8_0_r2(const void* src, block_q8_0* dst, int64_t nb) { R2::unpack(src, dst, nb); }
void dequantize_row_q8_0_r2_ref(const void* x, float* y, int64_t n) { R2::dequantize(x, y, n, &dequantize_row_q8_0_ref); }
float dot_q8_0_r2_f32_ref(const void* w, const float* x, int64_t n) { return R2::dot_f32(w, x, n, &dequantize_row_q8_0_ref); }
void quantize_row_q8_0_r2_ref(const float* x, void* y, int64_t n) { R2::quantize(x, y, n, &quantize_row_q8_0_ref); }

float vec_dot_q8_0_r2_q8_0_ref(const void* w, const block_q8_0* x, int64_t n) {
    const int64_t nb = n / QK8_0;
    return vec_dot_q8_0_q8_0_blocks([&](int64_t i) { return R2::get(w, nb, i); }, x, n);
}

}  // namespace strata::kernels
