#include "kernels/ref/gemm_ref.h"

#include <limits>

#include "kernels/ref/quant_ref.h"
#include "kernels/ref/repack_ref.h"
#include "kernels/ref/vec_dot_ref.h"

namespace strata::kernels {

void quantize_activation_ref(WeightType w, const float* x, void* xq, int64_t n) {
    switch (w) {
        case WeightType::F32: return quantize_row_f32_ref(x, static_cast<float*>(xq), n);
        case WeightType::F16: return quantize_row_f16_ref(x, static_cast<uint16_t*>(xq), n);
        case WeightType::BF16: return quantize_row_bf16_ref(x, static_cast<uint16_t*>(xq), n);
        case WeightType::Q4_0:
        case WeightType::Q4_0_R4:
        case WeightType::Q5_0:
        case WeightType::Q8_0:
        case WeightType::MXFP4:
        case WeightType::Q8_0_R2: return quantize_act_q8_0_ref(x, static_cast<block_q8_0*>(xq), n);
        case WeightType::Q4_1:
        case WeightType::Q5_1: return quantize_act_q8_1_ref(x, static_cast<block_q8_1*>(xq), n);
        case WeightType::Q2_K:
        case WeightType::Q3_K:
        case WeightType::Q4_K:
        case WeightType::Q5_K:
        case WeightType::Q6_K:
        case WeightType::Q8_K: return quantize_row_q8_K_ref(x, static_cast<block_q8_K*>(xq), n);
        default: return;
    }
}

float dot_row_q_ref(WeightType w, const void* wrow, const void* xq, int64_t n) {
    switch (w) {
        case WeightType::F32: return vec_dot_f32_ref(static_cast<const float*>(wrow), static_cast<const float*>(xq), n);
        case WeightType::F16:
            return vec_dot_f16_ref(static_cast<const uint16_t*>(wrow), static_cast<const uint16_t*>(xq), n);
        case WeightType::BF16:
            return vec_dot_bf16_ref(static_cast<const uint16_t*>(wrow), static_cast<const uint16_t*>(xq), n);
        case WeightType::Q4_0:
            return vec_dot_q4_0_q8_0_ref(static_cast<const block_q4_0*>(wrow), static_cast<const block_q8_0*>(xq), n);
        case WeightType::Q4_0_R4: return vec_dot_q4_0_r4_q8_0_ref(wrow, static_cast<const block_q8_0*>(xq), n);
        case WeightType::Q8_0_R2: return vec_dot_q8_0_r2_q8_0_ref(wrow, static_cast<const block_q8_0*>(xq), n);
        case WeightType::Q4_1:
            return vec_dot_q4_1_q8_1_ref(static_cast<const block_q4_1*>(wrow), static_cast<const block_q8_1*>(xq), n);
        case WeightType::Q5_0:
            return vec_dot_q5_0_q8_0_ref(static_cast<const block_q5_0*>(wrow), static_cast<const block_q8_0*>(xq), n);
        case WeightType::Q5_1:
            return vec_dot_q5_1_q8_1_ref(static_cast<const block_q5_1*>(wrow), static_cast<const block_q8_1*>(xq), n);
        case WeightType::Q8_0:
            return vec_dot_q8_0_q8_0_ref(static_cast<const block_q8_0*>(wrow), static_cast<const block_q8_0*>(xq), n);
        case WeightType::Q2_K:
            return vec_dot_q2_K_q8_K_ref(static_cast<const block_q2_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::Q3_K:
            return vec_dot_q3_K_q8_K_ref(static_cast<const block_q3_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::Q4_K:
            return vec_dot_q4_K_q8_K_ref(static_cast<const block_q4_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::Q5_K:
            return vec_dot_q5_K_q8_K_ref(static_cast<const block_q5_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::Q6_K:
            return vec_dot_q6_K_q8_K_ref(static_cast<const block_q6_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::Q8_K:
            return vec_dot_q8_K_q8_K_ref(static_cast<const block_q8_K*>(wrow), static_cast<const block_q8_K*>(xq), n);
        case WeightType::MXFP4:
            return vec_dot_mxfp4_q8_0_ref(static_cast<const block_mxfp4*>(wrow), static_cast<const block_q8_0*>(xq), n);
        default: return std::numeric_limits<float>::quiet_NaN();
    }
}

float dot_row_ref(WeightType t, const void* w, const float* x, int64_t n) {
    switch (t) {
        case WeightType::F32: return dot_f32_f32_ref(static_cast<const float*>(w), x, n);
        case WeightType::F16: return dot_f16_f32_ref(static_cast<const uint16_t*>(w), x, n);
        case WeightType::BF16: return dot_bf16_f32_ref(static_cast<const uint16_t*>(w), x, n);
        case WeightType::Q4_0: return dot_q4_0_f32_ref(static_cast<const block_q4_0*>(w), x, n);
        case WeightType::Q4_0_R4: return dot_q4_0_r4_f32_ref(w, x, n);
        case WeightType::Q8_0_R2: return dot_q8_0_r2_f32_ref(w, x, n);
        case WeightType::Q4_1: return dot_q4_1_f32_ref(static_cast<const block_q4_1*>(w), x, n);
        case WeightType::Q5_0: return dot_q5_0_f32_ref(static_cast<const block_q5_0*>(w), x, n);
        case WeightType::Q5_1: return dot_q5_1_f32_ref(static_cast<const block_q5_1*>(w), x, n);
        case WeightType::Q8_0: return dot_q8_0_f32_ref(static_cast<const block_q8_0*>(w), x, n);
        case WeightType::Q2_K: return dot_q2_K_f32_ref(static_cast<const block_q2_K*>(w), x, n);
        case WeightType::Q3_K: return dot_q3_K_f32_ref(static_cast<const block_q3_K*>(w), x, n);
        case WeightType::Q4_K: return dot_q4_K_f32_ref(static_cast<const block_q4_K*>(w), x, n);
        case WeightType::Q5_K: return dot_q5_K_f32_ref(static_cast<const block_q5_K*>(w), x, n);
        case WeightType::Q6_K: return dot_q6_K_f32_ref(static_cast<const block_q6_K*>(w), x, n);
        case WeightType::Q8_K: return dot_q8_K_f32_ref(static_cast<const block_q8_K*>(w), x, n);
        case WeightType::MXFP4: return dot_mxfp4_f32_ref(static_cast<const block_mxfp4*>(w), x, n);
        default: return std::numeric_limits<float>::quiet_NaN();
    }
}

void gemm_q_ref(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq,
                int64_t act_row_bytes, int64_t n_tokens, int64_t cols, float* Y, int64_t ldy) {
    const auto* wb = static_cast<const uint8_t*>(W);
    const auto* xb = static_cast<const uint8_t*>(xq);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < n_tokens; ++t)
            Y[t * ldy + r] = dot_row_q_ref(w, wb + static_cast<uint64_t>(r) * w_row_bytes, xb + t * act_row_bytes, cols);
}

void gemm_q_pair_ref(WeightType w, const void* Wa, const void* Wb, uint64_t w_row_bytes, int64_t rows, const void* xq,
                     int64_t cols, float* Ya, float* Yb) {
    gemm_q_ref(w, Wa, w_row_bytes, rows, xq, 0, 1, cols, Ya, rows);
    gemm_q_ref(w, Wb, w_row_bytes, rows, xq, 0, 1, cols, Yb, rows);
}

}  // namespace strata::kernels
