// The type-dispatched front door to the weight-format kernels.
//
// Callers (the engine's backends, the quantizer) name a WeightType and hand
// over raw row pointers; this picks the kernel. Today every call goes to the
// scalar reference kernels in kernels/ref/; a SIMD build will dispatch to
// kernels/cpu/ at run time behind the same functions.
//
// Rows are contiguous runs of blocks in GGML's layout (what a GGUF file
// stores). n counts elements and must be a multiple of the type's block size
// (type_traits(t)->block_elems); the byte size of a row is row_bytes(t, n).
// Calling with a type for which has_kernels() is false fills dst with NaN
// (dequantize_row), returns NaN (dot_row) or writes nothing (quantize_row).
// No function here allocates or throws.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"

namespace strata::kernels {

// True when dequantize_row, dot_row and quantize_row all support t:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K.
bool has_kernels(WeightType t);

// Dequantizes n elements of one row.
void dequantize_row(WeightType t, const void* src, float* dst, int64_t n);

// sum_i w[i] * x[i] over one row of n elements of type t, accumulated in
// float. Equals dequantize_row followed by a float dot product up to
// summation order (each dequantized element is bit-identical).
float dot_row(WeightType t, const void* w, const float* x, int64_t n);

// Quantizes n floats into type t with ggml's reference quantizer (the bytes
// llama-quantize writes without an importance matrix). For F32/F16/BF16 this
// is conversion (round to nearest even).
void quantize_row(WeightType t, const float* src, void* dst, int64_t n);

// IEEE binary16 and bfloat16 conversions. Narrowing rounds to nearest, ties
// to even, overflows to Inf; NaN stays NaN (payload kept where it fits).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace strata::kernels
