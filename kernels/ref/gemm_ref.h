// Reference (scalar) type-dispatched row kernels and the multi-row,
// multi-token product gemm_q_ref: the twins of kernels/quant.h's
// quantize_activation / dot_row_q / dot_row / gemm_q that kernels/cpu's SIMD
// versions are tested against. Pointers, sizes and strides only.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"

namespace strata::kernels {

// quantize_activation with the reference quantizers (kernels/ref/vec_dot_ref.h).
void quantize_activation_ref(WeightType w, const float* x, void* xq, int64_t n);

// dot_row_q with the reference vec_dot_*_ref kernels. NaN for types without kernels.
float dot_row_q_ref(WeightType w, const void* wrow, const void* xq, int64_t n);

// dot_row (float activations) with the reference dot_*_f32_ref kernels.
float dot_row_ref(WeightType w, const void* wrow, const float* x, int64_t n);

// Y[t * ldy + r] = dot_row_q_ref(w, W + r * w_row_bytes, xq + t * act_row_bytes, cols)
// for r < rows, t < n_tokens.
void gemm_q_ref(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq,
                int64_t act_row_bytes, int64_t n_tokens, int64_t cols, float* Y, int64_t ldy);

// The twin of gemm_q_once_pair: gemm_q_ref on Wa and on Wb for one token.
void gemm_q_pair_ref(WeightType w, const void* Wa, const void* Wb, uint64_t w_row_bytes, int64_t rows, const void* xq,
                     int64_t cols, float* Ya, float* Yb);

}  // namespace strata::kernels
