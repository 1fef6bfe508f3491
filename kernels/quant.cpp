#include "kernels/quant.h"

#include <cstring>
#include <limits>

#include "kernels/dispatch.h"
#include "kernels/ref/quant_ref.h"
#include "kernels/ref/repack_ref.h"
#include "kernels/ref/vec_dot_ref.h"
#include "kernels/tuning.h"

namespace strata::kernels {

bool has_kernels(WeightType t) {
    switch (t) {
        case WeightType::MXFP4:
        case WeightType::F32:
        case WeightType::F16:
        case WeightType::BF16:
        case WeightType::Q4_0:
        case WeightType::Q4_0_R4:
        case WeightType::Q8_0_R2:
        case WeightType::Q4_1:
        case WeightType::Q5_0:
        case WeightType::Q5_1:
        case WeightType::Q8_0:
        case WeightType::Q2_K:
        case WeightType::Q3_K:
        case WeightType::Q4_K:
        case WeightType::Q5_K:
        case WeightType::Q6_K:
        case WeightType::Q8_K:
            return true;
        default:
            return false;
    }
}

void dequantize_row(WeightType t, const void* src, float* dst, int64_t n) {
    switch (t) {
        case WeightType::F32: return dequantize_row_f32_ref(static_cast<const float*>(src), dst, n);
        case WeightType::F16: return dequantize_row_f16_ref(static_cast<const uint16_t*>(src), dst, n);
        case WeightType::BF16: return dequantize_row_bf16_ref(static_cast<const uint16_t*>(src), dst, n);
        case WeightType::Q4_0: return dequantize_row_q4_0_ref(static_cast<const block_q4_0*>(src), dst, n);
        case WeightType::Q4_0_R4: return dequantize_row_q4_0_r4_ref(src, dst, n);
        case WeightType::Q8_0_R2: return dequantize_row_q8_0_r2_ref(src, dst, n);
        case WeightType::Q4_1: return dequantize_row_q4_1_ref(static_cast<const block_q4_1*>(src), dst, n);
        case WeightType::Q5_0: return dequantize_row_q5_0_ref(static_cast<const block_q5_0*>(src), dst, n);
        case WeightType::Q5_1: return dequantize_row_q5_1_ref(static_cast<const block_q5_1*>(src), dst, n);
        case WeightType::Q8_0: return dequantize_row_q8_0_ref(static_cast<const block_q8_0*>(src), dst, n);
        case WeightType::Q2_K: return dequantize_row_q2_K_ref(static_cast<const block_q2_K*>(src), dst, n);
        case WeightType::Q3_K: return dequantize_row_q3_K_ref(static_cast<const block_q3_K*>(src), dst, n);
        case WeightType::Q4_K: return dequantize_row_q4_K_ref(static_cast<const block_q4_K*>(src), dst, n);
        case WeightType::Q5_K: return dequantize_row_q5_K_ref(static_cast<const block_q5_K*>(src), dst, n);
        case WeightType::Q6_K: return dequantize_row_q6_K_ref(static_cast<const block_q6_K*>(src), dst, n);
        case WeightType::Q8_K: return dequantize_row_q8_K_ref(static_cast<const block_q8_K*>(src), dst, n);
        case WeightType::MXFP4: return dequantize_row_mxfp4_ref(static_cast<const block_mxfp4*>(src), dst, n);
        default:
            for (int64_t i = 0; i < n; ++i) dst[i] = std::numeric_limits<float>::quiet_NaN();
            return;
    }
}

float dot_row(WeightType t, const void* w, const float* x, int64_t n) {
    if (!has_kernels(t)) return std::numeric_limits<float>::quiet_NaN();
    return active_kernels().dot[static_cast<int>(t)](w, x, n);
}

void quantize_row(WeightType t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case WeightType::F32: return quantize_row_f32_ref(src, static_cast<float*>(dst), n);
        case WeightType::F16: return quantize_row_f16_ref(src, static_cast<uint16_t*>(dst), n);
        case WeightType::BF16: return quantize_row_bf16_ref(src, static_cast<uint16_t*>(dst), n);
        case WeightType::Q4_0: return quantize_row_q4_0_ref(src, static_cast<block_q4_0*>(dst), n);
        case WeightType::Q4_0_R4: return quantize_row_q4_0_r4_ref(src, dst, n);
        case WeightType::Q8_0_R2: return quantize_row_q8_0_r2_ref(src, dst, n);
        case WeightType::Q4_1: return quantize_row_q4_1_ref(src, static_cast<block_q4_1*>(dst), n);
        case WeightType::Q5_0: return quantize_row_q5_0_ref(src, static_cast<block_q5_0*>(dst), n);
        case WeightType::Q5_1: return quantize_row_q5_1_ref(src, static_cast<block_q5_1*>(dst), n);
        case WeightType::Q8_0: return quantize_row_q8_0_ref(src, static_cast<block_q8_0*>(dst), n);
        case WeightType::Q2_K: return quantize_row_q2_K_ref(src, static_cast<block_q2_K*>(dst), n);
        case WeightType::Q3_K: return quantize_row_q3_K_ref(src, static_cast<block_q3_K*>(dst), n);
        case WeightType::Q4_K: return quantize_row_q4_K_ref(src, static_cast<block_q4_K*>(dst), n);
        case WeightType::Q5_K: return quantize_row_q5_K_ref(src, static_cast<block_q5_K*>(dst), n);
        case WeightType::Q6_K: return quantize_row_q6_K_ref(src, static_cast<block_q6_K*>(dst), n);
        case WeightType::Q8_K: return quantize_row_q8_K_ref(src, static_cast<block_q8_K*>(dst), n);
        case WeightType::MXFP4: return quantize_row_mxfp4_ref(src, static_cast<block_mxfp4*>(dst), n);
        default: return;
    }
}

void dequantize_activation(WeightType w, const void* xq, float* y, int64_t n) {
    const WeightType a = activation_type(w);
    if (a == WeightType::Q8_1) return dequantize_row_q8_1_ref(static_cast<const block_q8_1*>(xq), y, n);
    dequantize_row(a, xq, y, n);  // f32, f16, bf16, q8_0, q8_k
}

WeightType activation_type(WeightType w) {
    switch (w) {
        case WeightType::F32: return WeightType::F32;
        case WeightType::F16: return WeightType::F16;
        case WeightType::BF16: return WeightType::BF16;
        case WeightType::Q4_0:
        case WeightType::Q4_0_R4:
        case WeightType::Q5_0:
        case WeightType::Q8_0:
        case WeightType::MXFP4:
        case WeightType::Q8_0_R2: return WeightType::Q8_0;
        case WeightType::Q4_1:
        case WeightType::Q5_1: return WeightType::Q8_1;
        case WeightType::Q2_K:
        case WeightType::Q3_K:
        case WeightType::Q4_K:
        case WeightType::Q5_K:
        case WeightType::Q6_K:
        case WeightType::Q8_K: return WeightType::Q8_K;
        default: return WeightType::F32;
    }
}

int64_t activation_row_bytes(WeightType w, int64_t n) {
    if (!has_kernels(w) || row_bytes(w, n) < 0) return -1;
    return row_bytes(activation_type(w), n);
}

void quantize_activation(WeightType w, const float* x, void* xq, int64_t n) {
    if (!has_kernels(w)) return;
    active_kernels().quantize_act[static_cast<int>(activation_type(w))](x, xq, n);
}

float dot_row_q(WeightType w, const void* wrow, const void* xq, int64_t n) {
    if (!has_kernels(w)) return std::numeric_limits<float>::quiet_NaN();
    return active_kernels().dot_q[static_cast<int>(w)](wrow, xq, n);
}

void gemm_q(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq, int64_t act_row_bytes,
            int64_t n_tokens, int64_t cols, float* Y, int64_t ldy) {
    if (!has_kernels(w)) {
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) Y[t * ldy + r] = std::numeric_limits<float>::quiet_NaN();
        return;
    }
    active_kernels().gemm_q[static_cast<int>(w)](W, w_row_bytes, rows, xq, act_row_bytes, n_tokens, cols, Y, ldy);
}

void gemm_q_once(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq, int64_t act_row_bytes,
                 int64_t n_tokens, int64_t cols, float* Y, int64_t ldy) {
    // Not has_kernels: gemm_q's NaN rows. Read-once loops tuned off: gemm_q's loops (the same bits).
    if (!has_kernels(w) || !kernel_read_once()) return gemm_q(w, W, w_row_bytes, rows, xq, act_row_bytes, n_tokens, cols, Y, ldy);
    active_kernels().gemm_q_once[static_cast<int>(w)](W, w_row_bytes, rows, xq, act_row_bytes, n_tokens, cols, Y, ldy);
}

void gemm_q_once_pair(WeightType w, const void* Wa, const void* Wb, uint64_t w_row_bytes, int64_t rows, const void* xq,
                      int64_t cols, float* Ya, float* Yb) {
    const KernelTable::GemmQPairFn pair =
        has_kernels(w) && kernel_read_once() ? active_kernels().gemm_q_once_pair[static_cast<int>(w)] : nullptr;
    if (pair) return pair(Wa, Wb, w_row_bytes, rows, xq, cols, Ya, Yb);
    const int64_t act_row_bytes = activation_row_bytes(w, cols);  // one token: any stride will do
    gemm_q_once(w, Wa, w_row_bytes, rows, xq, act_row_bytes, 1, cols, Ya, rows);
    gemm_q_once(w, Wb, w_row_bytes, rows, xq, act_row_bytes, 1, cols, Yb, rows);
}

WeightType fast_layout(WeightType w, int64_t cols) {
    const KernelTable::PackedLayout& p = active_kernels().packed[static_cast<int>(w)];
    return p.max_cols > 0 && cols > 0 && cols <= p.max_cols ? p.type : w;
}

bool repack_rows(WeightType from, WeightType to, void* data, int64_t rows, int64_t cols, uint64_t row_stride,
                 void* scratch) {
    if (file_type(from) != file_type(to) || row_bytes(from, cols) < 0) return false;
    if (from == to) return true;
    const WeightType file = file_type(from);
    if (file != WeightType::Q4_0 && file != WeightType::Q8_0) return false;  // the types with layouts
    const int64_t nb = cols / 32;
    const auto rb = static_cast<size_t>(row_bytes(from, cols));
    auto* base = static_cast<uint8_t*>(data);
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = base + static_cast<uint64_t>(r) * row_stride;
        std::memcpy(scratch, row, rb);
        switch (to) {  // from the file's layout to `to`, or back
            case WeightType::Q4_0_R4: repack_row_q4_0_r4(static_cast<const block_q4_0*>(scratch), row, nb); break;
            case WeightType::Q4_0: unpack_row_q4_0_r4(scratch, reinterpret_cast<block_q4_0*>(row), nb); break;
            case WeightType::Q8_0_R2: repack_row_q8_0_r2(static_cast<const block_q8_0*>(scratch), row, nb); break;
            default: unpack_row_q8_0_r2(scratch, reinterpret_cast<block_q8_0*>(row), nb); break;
        }
    }
    return true;
}

float fp16_to_fp32(uint16_t h) { return fp16_to_fp32_ref(h); }
uint16_t fp32_to_fp16(float f) { return fp32_to_fp16_ref(f); }
float bf16_to_fp32(uint16_t h) { return bf16_to_fp32_ref(h); }
uint16_t fp32_to_bf16(float f) { return fp32_to_bf16_ref(f); }

}  // namespace strata::kernels
