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

void quantize_row_q4_K_weighted(const float* x, block_q4_K* y, int64_t n_per_row, const float* quant_weights) {
    assert(n_per_row % QK_K == 0);
    const int64_t nb = n_per_row / QK_K;
    uint8_t L[QK_K];
    uint8_t Laux[32];
    uint8_t Ls[QK_K / 32];
    uint8_t Lm[QK_K / 32];
    float weights[32];
    float sw[QK_K / 32];
    float mins[QK_K / 32];
    float scales[QK_K / 32];
    for (int64_t i = 0; i < nb; i++) {
        float sum_x2 = 0;
        for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
        const float sigma2 = 2 * sum_x2 / QK_K;
        for (int j = 0; j < QK_K / 32; ++j) {
            const float* qw = quant_weights + QK_K * i + 32 * j;
            for (int l = 0; l < 32; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 32; ++l) sumw += weights[l];
            sw[j] = sumw;
            // ggml calls make_qkx3_quants here: with weights given it is make_qkx2_quants.
            scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
        const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
        pack_scale_min_k4(Ls, Lm, y[i].scales);
        y[i].d = fp32_to_fp16_ref(d_block);
        y[i].dmin = fp32_to_fp16_ref(m_block);
        uint8_t sc, m;
        for (int j = 0; j < QK_K / 32; ++j) {
            get_scale_min_k4(j, y[i].scales, &sc, &m);
            const float d = fp16_to_fp32_ref(y[i].d) * sc;
            if (!d) continue;
            const float dm = fp16_to_fp32_ref(y[i].dmin) * m;
            for (int ii = 0; ii < 32; ++ii) {
                int l = nearest_int((x[32 * j + ii] + dm) / d);
                L[32 * j + ii] = static_cast<uint8_t>(l < 0 ? 0 : l > 15 ? 15 : l);
            }
        }
        uint8_t* q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
        x += QK_K;
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
            uint32_t qh = 0;
            for (int j = 0; j < 16; ++j) {
                y[ib].qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
                qh |= static_cast<uint32_t>((L[j] & 0x10u) >> 4) << j;
                qh |= static_cast<uint32_t>((L[j + 16] & 0x10u) >> 4) << (j + 16);
            }
            std::memcpy(y[ib].qh, &qh, sizeof qh);
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
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const auto a = static_cast<uint8_t>(L[j]), b = static_cast<uint8_t>(L[j + 16]);
            y[ib].qs[j] = static_cast<uint8_t>((a & 0x0F) | ((b & 0x0F) << 4));
            qh |= static_cast<uint32_t>((a & 0x10u) >> 4) << j;
            qh |= static_cast<uint32_t>((b & 0x10u) >> 4) << (j + 16);
        }
        std::memcpy(y[ib].qh, &qh, sizeof qh);
    }
}

// q5_K: as q4_K with 5-bit quants (nmax 31); the fifth bits in qh.
void quantize_row_q5_K_weighted(const float* x, block_q5_K* y, int64_t n_per_row, const float* quant_weights) {
    const int64_t nb = n_per_row / QK_K;
    uint8_t L[QK_K], Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    for (int64_t i = 0; i < nb; i++) {
        float sum_x2 = 0;
        for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
        const float sigma2 = 2 * sum_x2 / QK_K;
        for (int j = 0; j < QK_K / 32; ++j) {
            const float* qw = quant_weights + QK_K * i + 32 * j;
            for (int l = 0; l < 32; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 32; ++l) sumw += weights[l];
            sw[j] = sumw;
            scales[j] = make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
        }
        const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
        const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
        pack_scale_min_k4(Ls, Lm, y[i].scales);
        y[i].d = fp32_to_fp16_ref(d_block);
        y[i].dmin = fp32_to_fp16_ref(m_block);
        uint8_t sc, m;
        for (int j = 0; j < QK_K / 32; ++j) {
            get_scale_min_k4(j, y[i].scales, &sc, &m);
            const float d = fp16_to_fp32_ref(y[i].d) * sc;
            if (!d) continue;
            const float dm = fp16_to_fp32_ref(y[i].dmin) * m;
            for (int ii = 0; ii < 32; ++ii) {
                const int l = nearest_int((x[32 * j + ii] + dm) / d);
                L[32 * j + ii] = static_cast<uint8_t>(l < 0 ? 0 : l > 31 ? 31 : l);
            }
        }
        uint8_t* qh = y[i].qh;
        uint8_t* ql = y[i].qs;
        std::memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) l1 -= 16, qh[j] |= m1;
                if (l2 > 15) l2 -= 16, qh[j] |= m2;
                ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<uint8_t>(m1 << 2);
            m2 = static_cast<uint8_t>(m2 << 2);
            ql += 32;
        }
        x += QK_K;
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
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] =
                    static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
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
        for (int j = 0; j < QK_K / 16; ++j) {
            int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = fp16_to_fp32_ref(y[i].d) * static_cast<float>(static_cast<int8_t>(sc));
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<int8_t>((l < -4 ? -4 : l > 3 ? 3 : l) + 4);
            }
        }
        std::memset(y[i].hmask, 0, QK_K / 8);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] -= 4;
            }
            if (++m == QK_K / 8) {
                m = 0;
                hm = static_cast<uint8_t>(hm << 1);
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] =
                    static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
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
