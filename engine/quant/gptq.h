// Layer-wise error compensation fitted on calibration text, in the manner of
// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers", 2022), for GGUF's block formats, so
// the result is still a standard file.
//
// A matrix W is quantized to minimise ||(W - Q) X||^2 over the calibration
// inputs X, not ||W - Q||^2: with H = X X^T (the inputs' second moments), each
// column's rounding error is pushed onto the columns not yet quantized, along
// the upper Cholesky factor of H^-1. A block's scales are chosen by the
// format's own (importance-weighted) quantizer on the row as updated so far;
// its elements are then rounded to that grid one by one
// (kernels::set_block_levels_ref writes the codes under those scales).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_types.h"

namespace strata::quant {

// Whether rows of type t can be quantized with compensation.
bool gptq_supports(kernels::WeightType t);

// The upper Cholesky factor U (n x n, row-major) of (H + damp * mean(diag H) * I)^-1,
// H symmetric n x n, of which only the upper triangle (j >= i) is read. Channels no token reached (H_jj = 0) get H_jj = 1.
// column_scale (n values or null): H is first taken as S^-1 H S^-1, the
// inputs of a matrix whose columns were multiplied by S (activation-aware
// scaling). Returns false (U untouched) if H is not positive definite even
// after damping.
bool gptq_factor(const double* H, int64_t n, const float* column_scale, double damp, std::vector<float>* U);

// One row of n elements (w, modified: it is the working copy) to type t,
// written to out (kernels::row_bytes(t, n)). importance (n values or null)
// weights each block's scale search.
void gptq_quantize_row(kernels::WeightType t, float* w, int64_t n, const float* U, const float* importance,
                       uint8_t* out);

}  // namespace strata::quant
