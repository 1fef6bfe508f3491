// Importance-weighted quantization (llama.cpp's imatrix path): the row's
// per-column importance, the mean squared activation of each input channel
// over calibration text, weights the scale search so the channels that carry
// the most signal lose the least. Ports of ggml's quantize_row_*_impl and
// their helpers (ggml/src/ggml-quants.c, MIT licence, Copyright (c) 2023-2024
// The ggml authors), operation for operation, so the bytes equal
// llama-quantize --imatrix's for the same importance.
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/ref/quant_ref.h"

namespace strata::kernels {

namespace {

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (!max) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * L[i];
        best_mse += quant_weights[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            const float diff = x[i] - scale_is * l;
            mse += quant_weights[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = static_cast<uint8_t>(l);
        const float w = quant_weights[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = quant_weights[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = new_l < nmax ? new_l : nmax;
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<uint8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

// q4_K and q5_K's scale search with importance (ggml's quantize_row_q4_K_impl
// and _q5_K_impl are the same up to nmax and the packing): each sub-block's
// scale and minimum, their 6-bit codes and the block's d/dmin into y, and the
// levels (0..nmax) under the rounded scales into L.
template <class Block>
void weighted_k4_levels(const float* x, Block& y, const float* qw_block, int nmax, uint8_t* L) {
    uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float* qw = qw_block + 32 * j;
        for (int l = 0; l < 32; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        // ggml calls make_qkx3_quants here: with weights given it is make_qkx2_quants.
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    pack_scale_min_k4(Ls, Lm, y.scales);
    y.d = fp32_to_fp16_ref(d_block);
    y.dmin = fp32_to_fp16_ref(m_block);
    uint8_t sc, m;
    for (int j = 0; j < QK_K / 32; ++j) {
        get_scale_min_k4(j, y.scales, &sc, &m);
        const float d = fp16_to_fp32_ref(y.d) * sc;
        if (!d) continue;
        const float dm = fp16_to_fp32_ref(y.dmin) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(l < 0 ? 0 : l > nmax ? nmax : l);
        }
    }
}

void quantize_row_q4_K_weighted(const float* x, block_q4_K* y, int64_t n_per_row, const float* quant_weights) {
    assert(n_per_row % QK_K == 0);
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n_per_row / QK_K; i++, x += QK_K) {
        weighted_k4_levels(x, y[i], quant_weights + QK_K * i, 15, L);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void quantize_row_q4_0_weighted(const float* x, block_q4_0* y, int64_t n_per_row, const float* quant_weights) {
    float weight[32];
    int8_t L[32];
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / n_per_row;
    const int64_t nb = n_per_row / 32;
    for (int64_t ib = 0; ib < nb; ++ib) {
        const float* xb = x + 32 * ib;
        const float* qw = quant_weights + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        const float d = make_qx_quants(32, 8, xb, L, 1, weight);
        y[ib].d = fp32_to_fp16_ref(d);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
    }
}

// q5_0 / q5_1's 32 levels (0..31): low nibbles in qs (element j and j + 16
// per byte), fifth bits in the little-endian uint32 qh.
void pack_q5_32(const uint8_t* L, uint8_t qs[16], uint8_t qh_bytes[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
        qh |= static_cast<uint32_t>((L[j] & 0x10u) >> 4) << j;
        qh |= static_cast<uint32_t>((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(qh_bytes, &qh, sizeof qh);
}

// q4_1 and q5_1: the scale and minimum of each block of 32 searched with the
// weights (ggml's make_qkx3_quants, which with weights is make_qkx2_quants).
template <class Block, int Nmax>
void quantize_row_qx1_weighted(const float* x, Block* y, int64_t n_per_row, const float* quant_weights) {
    float weight[32];
    uint8_t L[32], Laux[32];
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / n_per_row;
    const int64_t nb = n_per_row / 32;
    for (int64_t ib = 0; ib < nb; ++ib) {
        const float* xb = x + 32 * ib;
        const float* qw = quant_weights + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        float min;
        const float d = make_qkx2_quants(32, Nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
        y[ib].d = fp32_to_fp16_ref(d);
        y[ib].m = fp32_to_fp16_ref(-min);
        if constexpr (Nmax == 15) {
            for (int j = 0; j < 16; ++j) y[ib].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
        } else {
            pack_q5_32(L, y[ib].qs, y[ib].qh);
        }
    }
}

void quantize_row_q5_0_weighted(const float* x, block_q5_0* y, int64_t n_per_row, const float* quant_weights) {
    float weight[32];
    int8_t L[32];
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / n_per_row;
    const int64_t nb = n_per_row / 32;
    for (int64_t ib = 0; ib < nb; ++ib) {
        const float* xb = x + 32 * ib;
        const float* qw = quant_weights + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
        const float d = make_qx_quants(32, 16, xb, L, 1, weight);
        y[ib].d = fp32_to_fp16_ref(d);
        pack_q5_32(reinterpret_cast<const uint8_t*>(L), y[ib].qs, y[ib].qh);
    }
}

// q5_K: as q4_K with 5-bit levels (nmax 31); the fifth bits in qh.
void quantize_row_q5_K_weighted(const float* x, block_q5_K* y, int64_t n_per_row, const float* quant_weights) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n_per_row / QK_K; i++, x += QK_K) {
        weighted_k4_levels(x, y[i], quant_weights + QK_K * i, 31, L);
        pack_q5_K_quants(L, y[i].qh, y[i].qs);
    }
}

// q2_K: 16 sub-blocks of 16, 2-bit quants with a 4-bit scale and minimum each.
void quantize_row_q2_K_weighted(const float* x, block_q2_K* y, int64_t n_per_row, const float* quant_weights) {
    const int64_t nb = n_per_row / QK_K;
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    for (int64_t i = 0; i < nb; i++) {
        std::memset(sw, 0, sizeof sw);
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float* qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; ++l) sw[j] += weight[l];
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
        float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = fp32_to_fp16_ref(dm);
        y[i].dmin = fp32_to_fp16_ref(mm);
        dm = fp16_to_fp32_ref(y[i].d);
        mm = fp16_to_fp32_ref(y[i].dmin);
        for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
        for (int j = 0; j < QK_K / 16; ++j) {  // requantize with the rounded scales
            const float d = dm * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float m = mm * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + m) / d);
                L[16 * j + ii] = static_cast<uint8_t>(l < 0 ? 0 : l > 3 ? 3 : l);
            }
        }
        pack_2bit_planes(L, y[i].qs);
        x += QK_K;
    }
}

// q3_K: 16 sub-blocks of 16, 3-bit quants, signed 6-bit scales.
void quantize_row_q3_K_weighted(const float* x, block_q3_K* y, int64_t n_per_row, const float* quant_weights) {
    const int64_t nb = n_per_row / QK_K;
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    for (int64_t i = 0; i < nb; i++) {
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float* qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
        }
        std::memset(y[i].scales, 0, 12);
        const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, 1, sw);
        for (int j = 0; j < QK_K / 16; ++j) {
            int l = Ls[j];
            if (j < 8) y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
            else y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
            l >>= 4;
            y[i].scales[j % 4 + 8] = static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
        }
        y[i].d = fp32_to_fp16_ref(d_block);
        quantize_q3_K_levels(x, y[i], L);
        x += QK_K;
    }
}

}  // namespace

bool quantize_row_weighted_ref(WeightType t, const float* x, void* y, int64_t n, const float* importance) {
    if (!importance) return false;
    switch (t) {
        case WeightType::Q4_K: quantize_row_q4_K_weighted(x, static_cast<block_q4_K*>(y), n, importance); return true;
        case WeightType::Q6_K: quantize_row_q6_K_impl_ref(x, static_cast<block_q6_K*>(y), n, importance); return true;
        case WeightType::Q4_0: quantize_row_q4_0_weighted(x, static_cast<block_q4_0*>(y), n, importance); return true;
        case WeightType::Q4_1: quantize_row_qx1_weighted<block_q4_1, 15>(x, static_cast<block_q4_1*>(y), n, importance); return true;
        case WeightType::Q5_1: quantize_row_qx1_weighted<block_q5_1, 31>(x, static_cast<block_q5_1*>(y), n, importance); return true;
        case WeightType::Q5_0: quantize_row_q5_0_weighted(x, static_cast<block_q5_0*>(y), n, importance); return true;
        case WeightType::Q5_K: quantize_row_q5_K_weighted(x, static_cast<block_q5_K*>(y), n, importance); return true;
        case WeightType::Q2_K: quantize_row_q2_K_weighted(x, static_cast<block_q2_K*>(y), n, importance); return true;
        case WeightType::Q3_K: quantize_row_q3_K_weighted(x, static_cast<block_q3_K*>(y), n, importance); return true;
        default: return false;
    }
}

bool has_weighted_quantizer(WeightType t) {
    switch (t) {
        case WeightType::Q4_K: case WeightType::Q6_K: case WeightType::Q4_0: case WeightType::Q4_1:
        case WeightType::Q5_0: case WeightType::Q5_1: case WeightType::Q5_K: case WeightType::Q2_K:
        case WeightType::Q3_K: return true;
        default: return false;
    }
}

}  // namespace strata::kernels
