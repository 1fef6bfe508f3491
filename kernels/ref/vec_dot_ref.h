// Reference (scalar) kernels for ggml's quantized-activation dot products:
// the activation formats (q8_0, q8_1, q8_K, f16, bf16, f32), the quantizers
// that turn a float activation row into them, and the weight x activation dot
// products ggml's CPU backend uses for matrix multiplication.
//
// llama.cpp does not multiply quantized weights with float activations: it
// first converts each activation row to the weight type's `vec_dot_type`
// (ggml-cpu.c, type_traits_cpu) and then takes integer block dot products.
// These functions reproduce that arithmetic:
//
//   - vec_dot_*_ref follow ggml's generic C code (ggml/src/ggml-cpu/quants.c,
//     ggml_vec_dot_*_generic; vec.cpp's scalar ggml_vec_dot_f32/f16/bf16)
//     operation by operation: the same integer sums, the same float products
//     in the same order, the same 8-lane float accumulators for q3_K..q6_K,
//     double accumulation for the float formats. Compiled with
//     -ffp-contract=off, so the results are the same bits on every machine.
//     (ggml's SIMD kernels compute the same integer sums but add the float
//     block terms in another order; they differ from these in the last bits.)
//
//   - quantize_act_q8_0_ref / quantize_act_q8_1_ref reproduce what ggml's CPU
//     backend does on x86 with AVX/AVX2 (arch/x86/quants.c quantize_row_q8_0 /
//     quantize_row_q8_1), which is how the reference logits in
//     ../shared/fixtures were produced: d = amax / 127 stored as fp16, the
//     multiplier id = 127 / amax (not 1 / d), and x * id rounded to nearest
//     with ties to EVEN (_mm256_round_ps(.., _MM_ROUND_NEAREST)). ggml's
//     portable quantize_row_q8_0_ref / q8_1_ref instead use id = 1 / d and
//     roundf (ties away from zero); the two agree except when x * id lands
//     within an ulp of a half-integer (about 2 elements per million of
//     gaussian data), where a quant differs by 1. quantize_row_q8_1_ref below
//     is that portable variant, kept for comparison; quantize_row_q8_0_ref is
//     in quant_ref.h (the weight quantizer, byte-exact with llama-quantize).
//
//   - the k-quant activation format q8_K is quantized with
//     quantize_row_q8_K_ref (quant_ref.h): x86 ggml has no SIMD variant of it
//     (quantize_row_q8_K calls quantize_row_q8_K_ref), which rounds with
//     nearest_int (ties to even) at iscale = -127 / max.
//
// Conventions: n is a number of elements, a multiple of the block size (32 for
// q8_0/q8_1, QK_K = 256 for q8_K, any n >= 0 for the float formats). Blocks
// are read and written in ggml's layout; all of ggml's memcpy-based scale
// unpacking assumes a little-endian host, as does the rest of kernels/ref.
// Nothing here allocates.
#pragma once

#include <cstdint>

#include "kernels/ref/quant_ref.h"

namespace strata::kernels {

inline constexpr int QK8_1 = 32;

// The activation format of q4_1 and q5_1: x = d * qs; s = d * sum(qs), both
// fp16 (s is computed in float as (float)sum(qs) * d, then rounded to fp16).
struct block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");

// ---------------------------------------------------------------------------
// Activation quantizers.

// x86 ggml's activation quantizers (see above): ties to even, id = 127 / amax.
void quantize_act_q8_0_ref(const float* x, block_q8_0* y, int64_t n);
void quantize_act_q8_1_ref(const float* x, block_q8_1* y, int64_t n);

// ggml's portable quantize_row_q8_1_ref: id = 1 / d, roundf.
void quantize_row_q8_1_ref(const float* x, block_q8_1* y, int64_t n);

void dequantize_row_q8_1_ref(const block_q8_1* x, float* y, int64_t n);

// ---------------------------------------------------------------------------
// Dot products of one weight row (first argument) with one activation row.

// Float formats: products in float (exact for f16 x f16 and bf16 x bf16),
// summed in double in element order, rounded to float once at the end.
float vec_dot_f32_ref(const float* w, const float* x, int64_t n);
float vec_dot_f16_ref(const uint16_t* w, const uint16_t* x, int64_t n);
float vec_dot_bf16_ref(const uint16_t* w, const uint16_t* x, int64_t n);

float vec_dot_q4_0_q8_0_ref(const block_q4_0* w, const block_q8_0* x, int64_t n);
// ggml's ggml_vec_dot_mxfp4_q8_0 (generic): per block e8m0_half(e) * d_y * (sumi_lo + sumi_hi).
float vec_dot_mxfp4_q8_0_ref(const block_mxfp4* w, const block_q8_0* x, int64_t n);

// ggml's q4_0 x q8_0 loop over blocks that block_at(i) returns (a q4_0 row,
// or an in-memory layout's row seen block by block: kernels/ref/repack_ref.h).
template <class BlockAt>
float vec_dot_q4_0_q8_0_blocks(BlockAt block_at, const block_q8_0* y, int64_t n) {
    constexpr int qk = QK8_0;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        const block_q4_0& x = block_at(ib);
        int sumi0 = 0;
        int sumi1 = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const int v0 = (x.qs[j] & 0x0F) - 8;
            const int v1 = (x.qs[j] >> 4) - 8;
            sumi0 += v0 * y[ib].qs[j];
            sumi1 += v1 * y[ib].qs[j + qk / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += static_cast<float>(sumi) * fp16_to_fp32_ref(x.d) * fp16_to_fp32_ref(y[ib].d);
    }
    return sumf;
}

// ggml's q8_0 x q8_0 loop over blocks that block_at(i) returns (as above).
template <class BlockAt>
float vec_dot_q8_0_q8_0_blocks(BlockAt block_at, const block_q8_0* y, int64_t n) {
    constexpr int qk = QK8_0;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        const block_q8_0& x = block_at(ib);
        int sumi = 0;
        for (int j = 0; j < qk; ++j) sumi += x.qs[j] * y[ib].qs[j];
        sumf += static_cast<float>(sumi) * (fp16_to_fp32_ref(x.d) * fp16_to_fp32_ref(y[ib].d));
    }
    return sumf;
}
float vec_dot_q4_1_q8_1_ref(const block_q4_1* w, const block_q8_1* x, int64_t n);
float vec_dot_q5_0_q8_0_ref(const block_q5_0* w, const block_q8_0* x, int64_t n);
float vec_dot_q5_1_q8_1_ref(const block_q5_1* w, const block_q8_1* x, int64_t n);
float vec_dot_q8_0_q8_0_ref(const block_q8_0* w, const block_q8_0* x, int64_t n);
float vec_dot_q2_K_q8_K_ref(const block_q2_K* w, const block_q8_K* x, int64_t n);
float vec_dot_q3_K_q8_K_ref(const block_q3_K* w, const block_q8_K* x, int64_t n);
float vec_dot_q4_K_q8_K_ref(const block_q4_K* w, const block_q8_K* x, int64_t n);
float vec_dot_q5_K_q8_K_ref(const block_q5_K* w, const block_q8_K* x, int64_t n);
float vec_dot_q6_K_q8_K_ref(const block_q6_K* w, const block_q8_K* x, int64_t n);

// Not in ggml (q8_K is never a weight type there): sum over blocks, in block
// order, of (float)sum(qs_w * qs_x) * (d_w * d_x).
float vec_dot_q8_K_q8_K_ref(const block_q8_K* w, const block_q8_K* x, int64_t n);

}  // namespace strata::kernels
