// Reference (scalar) kernels for the GGML weight formats: block layouts,
// dequantization, dot products with float activations, and the reference
// quantizers.
//
// These are the ground truth every fast kernel (kernels/cpu, kernels/cuda) is
// tested against, so they favour being obviously right over being fast. The
// block layouts are GGML's byte for byte (ggml-common.h), because the weights
// come straight out of GGUF files; the dequantization arithmetic follows
// ggml-quants.c operation by operation, so a dequantized value here is the
// same float llama.cpp computes.
//
// Conventions for every function below:
//   - n is a number of elements; it must be a multiple of the format's block
//     size (32 for q4_0..q8_0, QK_K = 256 for the k-quants, 1 for f32/f16/bf16).
//   - dot_* computes sum_i dequant(w)[i] * x[i] over the whole row; each
//     dequantized element is bit-identical to dequantize_row_*'s, only the
//     summation order differs. dot_* never allocates.
//   - quantize_row_*_ref are the quantizers ggml uses when it has no importance
//     matrix (ggml's quantize_row_*_ref), ported to give the same bytes. The
//     tests check this byte for byte against llama.cpp's q8_0/q4_0/f16
//     fixture files. Caveat: ggml's own bytes can differ in rare rounding ties
//     when its build fuses a*b+c into an FMA (e.g. q4_0's x*id + 8.5); these
//     files are compiled with -ffp-contract=off and never do.
//
// No engine headers, no Qt, no allocation: pointers and sizes only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/quant_types.h"

namespace strata::kernels {

// ---------------------------------------------------------------------------
// Scalar conversions (IEEE binary16 and bfloat16), inline so that the row
// loops can use them. Narrowing rounds to nearest, ties to even; NaNs stay NaN
// (the payload bits that fit are kept, the quiet bit is set). The public,
// out-of-line names are fp16_to_fp32() etc. in kernels/quant.h.

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Branch-free widening (the well-known exponent-rebias trick, exact for every
// input): normal halves are rebiased by scaling by 2^-112 after moving the
// exponent into place; subnormal halves are built as 0.5 + m * 2^-24 and the
// 0.5 subtracted, which is exact. Inf/NaN map to Inf/NaN (sign and payload kept).
inline float fp16_to_fp32_ref(uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
    const float normalized = f32_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
    // Select with a mask rather than ?: so that g++ vectorizes row loops.
    const uint32_t is_denormal = 0u - static_cast<uint32_t>(two_w < (1u << 27));
    const uint32_t magnitude = (f32_bits(denormalized) & is_denormal) | (f32_bits(normalized) & ~is_denormal);
    return f32_from_bits(sign | magnitude);
}

inline uint16_t fp32_to_fp16_ref(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u)  // NaN: keep the top payload bits, force quiet
        return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536 (or Inf): Inf
    if (a < 0x38800000u) {
        // Result is a half subnormal (or zero, or rounds up to the smallest
        // normal): value = mant * 2^(e - 150), in units of 2^-24.
        const uint32_t e = a >> 23;
        const int shift = 126 - static_cast<int>(e);  // >= 14
        if (shift > 24) return sign;                   // < 2^-25: rounds to zero
        const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t q = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return static_cast<uint16_t>(sign | q);
    }
    // Normal: rebias the exponent, round the 13 dropped mantissa bits. A carry
    // out of the mantissa correctly bumps the exponent (up to Inf at 65520).
    uint32_t h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3FFu);
    const uint32_t rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_fp32_ref(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16_ref(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

// ---------------------------------------------------------------------------
// Block layouts (ggml-common.h). A "half" field is IEEE binary16 bits.

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int K_SCALE_SIZE = 12;

// x[j] = d * (q[j] - 8); element j (< 16) is the low nibble of qs[j], element
// j + 16 the high nibble of qs[j].
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
};

// MXFP4 (OCP Microscaling Formats v1.0, 6.3): 32 FP4 E2M1 values sharing one
// E8M0 scale, as ggml stores it: x[j] = e2m1(q[j]) * 2^(e - 127), nibble
// order as q4_0. kMxfp4Values holds the E2M1 values doubled (ggml's
// kvalues_mxfp4: integers, for integer dot products), so the scale applied
// to them is 2^(e - 128) (mxfp4_scale_half).
inline constexpr int QK_MXFP4 = 32;
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128) as a float (the half of E8M0's 2^(e - 127); e = 0 and 1 are subnormal).
float mxfp4_scale_half(uint8_t e);

// x[j] = d * q[j] + m; nibble order as q4_0.
struct block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[QK4_1 / 2];
};

// x[j] = d * (q[j] - 16); low 4 bits as q4_0, bit 4 of element j is bit j of
// the little-endian uint32 qh.
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};

// x[j] = d * q[j] + m; bits as q5_0.
struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};

// x[j] = d * qs[j].
struct block_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
};

// 16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4),
// q 2 bits. 2.625 bits per weight.
struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d;
    uint16_t dmin;
};

// 16 sub-blocks of 16: x = d * (scale6[s] - 32) * (q - 4 * !hbit), q 2 low
// bits in qs, the third bit in hmask. Scales: 6 bits each, packed in 12 bytes.
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
};

// 8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], q 4 bits; 6-bit sc/m
// packed in 12 bytes (see get_scale_min_k4).
struct block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};

// As q4_K with a fifth bit per element in qh.
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q 6 bits: 4 low bits in
// ql, 2 high bits in qh.
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

// The k-quant activation format: x = d * qs, plus sums of 16 quants.
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
// Blocks of 2-byte-aligned types are tightly packed in a row: alignof must
// not exceed what the row offsets guarantee.
static_assert(alignof(block_q4_0) == 2 && alignof(block_q6_K) == 2 && alignof(block_q8_K) == 4,
              "block alignment");

// ---------------------------------------------------------------------------
// Float formats (block size 1). Any n >= 0.

void dequantize_row_f32_ref(const float* x, float* y, int64_t n);
void dequantize_row_f16_ref(const uint16_t* x, float* y, int64_t n);
void dequantize_row_bf16_ref(const uint16_t* x, float* y, int64_t n);
float dot_f32_f32_ref(const float* w, const float* x, int64_t n);
float dot_f16_f32_ref(const uint16_t* w, const float* x, int64_t n);
float dot_bf16_f32_ref(const uint16_t* w, const float* x, int64_t n);
void quantize_row_f32_ref(const float* x, float* y, int64_t n);
void quantize_row_f16_ref(const float* x, uint16_t* y, int64_t n);
void quantize_row_bf16_ref(const float* x, uint16_t* y, int64_t n);

// ---------------------------------------------------------------------------
// Block formats.

void dequantize_row_q4_0_ref(const block_q4_0* x, float* y, int64_t n);
void dequantize_row_q4_1_ref(const block_q4_1* x, float* y, int64_t n);
void dequantize_row_q5_0_ref(const block_q5_0* x, float* y, int64_t n);
void dequantize_row_q5_1_ref(const block_q5_1* x, float* y, int64_t n);
void dequantize_row_q8_0_ref(const block_q8_0* x, float* y, int64_t n);
void dequantize_row_q2_K_ref(const block_q2_K* x, float* y, int64_t n);
void dequantize_row_q3_K_ref(const block_q3_K* x, float* y, int64_t n);
void dequantize_row_q4_K_ref(const block_q4_K* x, float* y, int64_t n);
void dequantize_row_q5_K_ref(const block_q5_K* x, float* y, int64_t n);
void dequantize_row_q6_K_ref(const block_q6_K* x, float* y, int64_t n);
void dequantize_row_q8_K_ref(const block_q8_K* x, float* y, int64_t n);
void dequantize_row_mxfp4_ref(const block_mxfp4* x, float* y, int64_t n);

float dot_q4_0_f32_ref(const block_q4_0* w, const float* x, int64_t n);
float dot_q4_1_f32_ref(const block_q4_1* w, const float* x, int64_t n);
float dot_q5_0_f32_ref(const block_q5_0* w, const float* x, int64_t n);
float dot_q5_1_f32_ref(const block_q5_1* w, const float* x, int64_t n);
float dot_q8_0_f32_ref(const block_q8_0* w, const float* x, int64_t n);
float dot_q2_K_f32_ref(const block_q2_K* w, const float* x, int64_t n);
float dot_q3_K_f32_ref(const block_q3_K* w, const float* x, int64_t n);
float dot_q4_K_f32_ref(const block_q4_K* w, const float* x, int64_t n);
float dot_q5_K_f32_ref(const block_q5_K* w, const float* x, int64_t n);
float dot_q6_K_f32_ref(const block_q6_K* w, const float* x, int64_t n);
float dot_q8_K_f32_ref(const block_q8_K* w, const float* x, int64_t n);
float dot_mxfp4_f32_ref(const block_mxfp4* w, const float* x, int64_t n);

void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n);
void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t n);
void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t n);
void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t n);
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n);
void quantize_row_q2_K_ref(const float* x, block_q2_K* y, int64_t n);
void quantize_row_q3_K_ref(const float* x, block_q3_K* y, int64_t n);
void quantize_row_q4_K_ref(const float* x, block_q4_K* y, int64_t n);
void quantize_row_q5_K_ref(const float* x, block_q5_K* y, int64_t n);
void quantize_row_q6_K_ref(const float* x, block_q6_K* y, int64_t n);
void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n);
// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (the largest
// magnitude lands at most on 6), each value to the nearest of the 16 codes.
void quantize_row_mxfp4_ref(const float* x, block_mxfp4* y, int64_t n);

// ---------------------------------------------------------------------------
// Building blocks of the quantizers, exposed for engine/quant (importance-
// weighted quantization reuses them). Ports of ggml's helpers of the same name.

// Round to nearest, ties to even (ggml's nearest_int). |v| is clamped to
// 4194303 so that out-of-range input cannot produce garbage.
int nearest_int(float v);

// Symmetric: finds scale s and L[i] in [0, 2*nmax) with x[i] ~ s * (L[i] - nmax).
// rmse_type 0: plain max-abs scale; 1: weights x^2 (or qw if non-null) with a
// search over 18 candidate scales; negative: one refinement step only.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);

// Symmetric 3-bit search used by q3_K (weights x^2, iterative coordinate
// descent when do_rmse). L[i] in [0, 2*nmax).
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Asymmetric: finds scale s and min m >= 0 with x[i] ~ s * L[i] - m, L[i] in
// [0, nmax], minimizing the weighted error over nstep+1 candidate scales.
// Laux is scratch of n bytes. Returns s; writes m to *the_min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// ggml's quantize_row_q6_K_impl: qw null gives quantize_row_q6_K_ref's
// bytes; else the row's importance weights each sub-block's scale search.
void quantize_row_q6_K_impl_ref(const float* x, block_q6_K* y, int64_t n, const float* qw);

// Shared by the reference and the importance-weighted quantizers:
// q2_K's / q3_K's 2-bit planes (byte l of each 32 holds levels l, l+32, l+64, l+96);
void pack_2bit_planes(const uint8_t* L, uint8_t* qs);
// q5_K's 5-bit levels into qh (the fifth bits) and ql (the low nibbles);
void pack_q5_K_quants(const uint8_t* L, uint8_t* qh, uint8_t* ql);
// q3_K's levels (0..7, in L) from x under y's scales and d, then y's hmask and
// qs. L keeps its value where a sub-block's scale is 0, as ggml's does.
void quantize_q3_K_levels(const float* x, block_q3_K& y, int8_t* L);

// 8 six-bit scales and 8 six-bit mins into q4_K/q5_K's 12 bytes (the inverse of get_scale_min_k4).
void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t scales[K_SCALE_SIZE]);

// The 6-bit scale/min packing of q4_K and q5_K (8 pairs in 12 bytes).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// Importance-weighted quantization (kernels/ref/quant_ref_weighted.cpp, ports
// of ggml's quantize_row_*_impl): one row of n elements with a non-negative
// importance per element (llama.cpp's imatrix values for the row's columns).
// False, writing nothing, for a type without a weighted quantizer.
bool quantize_row_weighted_ref(WeightType t, const float* x, void* y, int64_t n, const float* importance);
bool has_weighted_quantizer(WeightType t);

// A block's level codes under the scales it has (kernels/ref/quant_ref_levels.cpp),
// for error compensation that rounds element by element to a block's grid:
// codes 0 .. block_levels(t)-1 (q8_0's code c is the int8 c - 127), each
// element's value affine in its code. 0 / false for a type without them.
int block_levels(WeightType t);
bool set_block_levels_ref(WeightType t, void* block, const uint8_t* levels);

// The 6-bit signed scales of q3_K (16 values in 12 bytes), unpacked to
// scale6 - 32 in [-32, 31].
void unpack_q3_K_scales(const uint8_t packed[12], int8_t out[QK_K / 16]);

}  // namespace strata::kernels
