// In-memory weight layouts (WeightType::Q4_0_R4, ...): a file type's blocks
// rearranged so that the SIMD kernels load them with whole-register loads,
// and the scalar reference kernels for them (the twins the SIMD versions are
// tested against). The engine repacks on load, where the active kernel level
// has a fast kernel for the layout (kernels/quant.h: fast_layout); the bytes
// per row are the file type's, so a repacked matrix fits the buffer it was
// read into and the memory ledger's figures do not change.
//
// Q4_0_R4 (a row of nb q4_0 blocks, q = nb / 4 whole quads of four blocks):
//
//   [q x 64 bytes]  quad j: the 16 quant bytes of blocks 4j, 4j+1, 4j+2, 4j+3
//   [q x  8 bytes]  quad j: the four fp16 scales d, in the same block order
//   [nb % 4 blocks] the last blocks, in q4_0's own layout (18 bytes each)
//
// The 512-bit q4_0 kernel works on quads: with the quants contiguous it loads
// a quad with one load instead of four loads and three inserts, and its
// scales with one 8-byte load instead of four 16-bit inserts. The arithmetic
// is the q4_0 kernel's, so a repacked row gives the same bits.
//
// Q8_0_R2 (a row of nb q8_0 blocks, p = nb / 2 whole pairs):
//
//   [p x 64 bytes]  pair j: the 32 quants of block 2j, then of block 2j+1,
//                   each stored as q + 128 (the byte q ^ 0x80: unsigned)
//   [p x  4 bytes]  pair j: the two fp16 scales d
//   [nb % 2 blocks] the last block, in q8_0's own layout (34 bytes)
//
// The 512-bit q8_0 kernel multiplies unsigned weight bytes (vpdpbusd); it
// loads a pair with one load instead of two loads and an insert, needs no
// flip, and loads both scales at once. Same arithmetic, same bits.
#pragma once

#include <cstdint>

#include "kernels/ref/quant_ref.h"

namespace strata::kernels {

// Block i of a Q4_0_R4 row of nb blocks, in q4_0's layout.
block_q4_0 q4_0_r4_block(const void* row, int64_t nb, int64_t i);

// One row of nb q4_0 blocks -> Q4_0_R4, and back. src and dst must not overlap.
void repack_row_q4_0_r4(const block_q4_0* src, void* dst, int64_t nb);
void unpack_row_q4_0_r4(const void* src, block_q4_0* dst, int64_t nb);

// The reference kernels on Q4_0_R4 rows (n elements): each equals the q4_0
// reference on the unpacked row bit for bit.
void dequantize_row_q4_0_r4_ref(const void* x, float* y, int64_t n);
float dot_q4_0_r4_f32_ref(const void* w, const float* x, int64_t n);
void quantize_row_q4_0_r4_ref(const float* x, void* y, int64_t n);
float vec_dot_q4_0_r4_q8_0_ref(const void* w, const block_q8_0* x, int64_t n);

// The same for Q8_0_R2 and q8_0.
block_q8_0 q8_0_r2_block(const void* row, int64_t nb, int64_t i);
void repack_row_q8_0_r2(const block_q8_0* src, void* dst, int64_t nb);
void unpack_row_q8_0_r2(const void* src, block_q8_0* dst, int64_t nb);
void dequantize_row_q8_0_r2_ref(const void* x, float* y, int64_t n);
float dot_q8_0_r2_f32_ref(const void* w, const float* x, int64_t n);
void quantize_row_q8_0_r2_ref(const float* x, void* y, int64_t n);
float vec_dot_q8_0_r2_q8_0_ref(const void* w, const block_q8_0* x, int64_t n);

}  // namespace strata::kernels
