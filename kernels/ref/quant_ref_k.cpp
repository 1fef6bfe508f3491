// Reference kernels for the k-quants (q2_K, q3_K, q4_K, q5_K, q6_K) and the
// k-quant activation format q8_K: decoders, row loops and the quantizers with
// their scale searches (make_qx_quants, make_q3_quants, make_qkx2_quants).
//
// Element order and arithmetic follow ggml-quants.c (dequantize_row_q*_K,
// quantize_row_q*_K_ref) operation by operation.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/ref/quant_ref.h"
#include "kernels/ref/quant_ref_dot.h"

namespace strata::kernels {

using ref_detail::dequantize_blocks;
using ref_detail::dot_blocks;

namespace {
constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: "all zero" below this
}

// ---------------------------------------------------------------------------
// Scale unpacking

void unpack_q3_K_scales(const uint8_t packed[12], int8_t out[QK_K / 16]) {
    // Scale j (6 bits, biased by 32): low 4 bits are the low (j < 8) or high
    // (j >= 8) nibble of packed[j % 8]; bits 4-5 are bits 2*(j/4).. of packed[8 + j%4].
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
        const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
}

// ---------------------------------------------------------------------------
// Decoders: one super-block -> its 256 floats, in ggml's element order.

static inline void decode_block(const block_q2_K& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const float min = fp16_to_fp32_ref(b.dmin);
    const uint8_t* q = b.qs;
    int is = 0;
    // Two halves of 128; in each, 32 bytes of qs hold four 2-bit planes
    // (shift 0, 2, 4, 6), each plane covering 32 elements = 2 sub-blocks.
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {
                const uint8_t sc = b.scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF);
                const float ml = min * static_cast<float>(sc >> 4);
                const uint8_t* qq = q + 16 * part;
                for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((qq[l] >> shift) & 3) - ml;
            }
        }
        q += 32;
    }
}

static inline void decode_block(const block_q3_K& b, float* y) {
    const float d_all = fp16_to_fp32_ref(b.d);
    int8_t scales[16];
    unpack_q3_K_scales(b.scales, scales);
    const uint8_t* q = b.qs;
    const uint8_t* hm = b.hmask;  // not advanced: bit m of hmask[l] selects the plane
    uint8_t m = 1;
    int is = 0;
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {
                const float dl = d_all * static_cast<float>(scales[is++]);
                const uint8_t* qq = q + 16 * part;
                const uint8_t* hh = hm + 16 * part;
                for (int l = 0; l < 16; ++l) {
                    const int v = ((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4);
                    *y++ = dl * static_cast<float>(v);
                }
            }
            m = static_cast<uint8_t>(m << 1);
        }
        q += 32;
    }
}

static inline void decode_block(const block_q4_K& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const float min = fp16_to_fp32_ref(b.dmin);
    const uint8_t* q = b.qs;
    // Four chunks of 64: 32 bytes each, low nibbles = sub-block 2c, high = 2c+1.
    for (int is = 0; is < 8; is += 2) {
        uint8_t sc, mn;
        get_scale_min_k4(is + 0, b.scales, &sc, &mn);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = min * static_cast<float>(mn);
        get_scale_min_k4(is + 1, b.scales, &sc, &mn);
        const float d2 = d * static_cast<float>(sc);
        const float m2 = min * static_cast<float>(mn);
        for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        q += 32;
    }
}

static inline void decode_block(const block_q5_K& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const float min = fp16_to_fp32_ref(b.dmin);
    const uint8_t* ql = b.qs;
    const uint8_t* qh = b.qh;  // not advanced: bits 2c and 2c+1 belong to chunk c
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2) {
        uint8_t sc, mn;
        get_scale_min_k4(is + 0, b.scales, &sc, &mn);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = min * static_cast<float>(mn);
        get_scale_min_k4(is + 1, b.scales, &sc, &mn);
        const float d2 = d * static_cast<float>(sc);
        const float m2 = min * static_cast<float>(mn);
        for (int l = 0; l < 32; ++l)
            *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l)
            *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        u1 = static_cast<uint8_t>(u1 << 2);
        u2 = static_cast<uint8_t>(u2 << 2);
    }
}

static inline void decode_block(const block_q6_K& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    // Two halves of 128. In each: ql[0..31] low nibbles -> elements 0..31,
    // ql[32..63] low -> 32..63, ql[0..31] high -> 64..95, ql[32..63] high ->
    // 96..127; qh[l] holds the top 2 bits of elements l, l+32, l+64, l+96.
    for (int half = 0; half < 2; ++half) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

static inline void decode_block(const block_q8_K& b, float* y) {
    for (int j = 0; j < QK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
}

void dequantize_row_q2_K_ref(const block_q2_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q3_K_ref(const block_q3_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q4_K_ref(const block_q4_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q5_K_ref(const block_q5_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q6_K_ref(const block_q6_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q8_K_ref(const block_q8_K* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }

float dot_q2_K_f32_ref(const block_q2_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q3_K_f32_ref(const block_q3_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q4_K_f32_ref(const block_q4_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q5_K_f32_ref(const block_q5_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q6_K_f32_ref(const block_q6_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q8_K_f32_ref(const block_q8_K* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }

// ---------------------------------------------------------------------------
// Scale searches (ports of ggml's helpers; same float arithmetic, same results)

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = nearest_int(iscale * x[i]);
            L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    auto weight = [&](int i) -> float {
        if (qw) return qw[i];
        switch (rmse_type) {
            case 1: return x[i] * x[i];
            case 2: return 1;
            case 3: return std::fabs(x[i]);
            default: return std::sqrt(std::fabs(x[i]));
        }
    };
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = weight(i);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = weight(i);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            L[i] = static_cast<int8_t>(l);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        // Coordinate descent: move one quant at a time if that improves the
        // weighted fit (sumlx^2 / suml2 is the explained energy).
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                const float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = std::max(-nmax, std::min(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = static_cast<int8_t>(new_l);
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
    }
    return 1 / iscale;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        // Weighted least squares for (scale, min) given these quants.
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// ---------------------------------------------------------------------------
// Quantizers

// 2-bit planes of 128 elements: byte l of a 32-byte group holds elements
// l, l+32, l+64, l+96 at bit offsets 0, 2, 4, 6 (q2_K and the low bits of q3_K).
void pack_2bit_planes(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] =
                static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

void pack_q5_K_quants(const uint8_t* L, uint8_t* qh, uint8_t* ql) {
    std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int c = 0; c < QK_K; c += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[c + j];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] = static_cast<uint8_t>(qh[j] | m1);
            }
            int l2 = L[c + j + 32];
            if (l2 > 15) {
                l2 -= 16;
                qh[j] = static_cast<uint8_t>(qh[j] | m2);
            }
            ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
        }
        m1 = static_cast<uint8_t>(m1 << 2);
        m2 = static_cast<uint8_t>(m2 << 2);
        ql += 32;
    }
}

void quantize_q3_K_levels(const float* x, block_q3_K& y, int8_t* L) {
    int8_t sc[16];
    unpack_q3_K_scales(y.scales, sc);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = fp16_to_fp32_ref(y.d) * sc[j];
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = nearest_int(x[16 * j + ii] / d);
            l = std::max(-4, std::min(3, l));
            L[16 * j + ii] = static_cast<int8_t>(l + 4);
        }
    }
    // The high bit of level j goes to hmask[j % 32], bit j / 32.
    std::memset(y.hmask, 0, QK_K / 8);
    uint8_t Lu[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        int l = L[j];
        if (l > 3) {
            y.hmask[j % (QK_K / 8)] = static_cast<uint8_t>(y.hmask[j % (QK_K / 8)] | (1u << (j / (QK_K / 8))));
            l -= 4;
        }
        Lu[j] = static_cast<uint8_t>(l);
    }
    pack_2bit_planes(Lu, y.qs);
}

// The 6-bit (scale, min) pairs of q4_K/q5_K: the inverse of get_scale_min_k4.
void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t scales[K_SCALE_SIZE]) {
    std::memset(scales, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | ((ls[j] >> 4) << 6));
            scales[j - 0] = static_cast<uint8_t>(scales[j - 0] | ((lm[j] >> 4) << 6));
        }
    }
}

namespace {

// Shared by q4_K and q5_K: per 32-element sub-block, an asymmetric fit with
// weights av_x + |x|; then 6-bit quantization of scales and mins against their
// maxima; then requantization of every element with the final scales.
// Writes d, dmin, scales and the levels L[256] (0..nmax).
void quantize_k4_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out,
                        uint16_t* dmin_out, uint8_t scales_out[K_SCALE_SIZE], uint8_t L[QK_K]) {
    uint8_t Laux[32];
    float weights[32];
    float mins[QK_K / 32];
    float scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep,
                                     false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < QK_K / 32; ++j) {
        // ggml stores nearest_int() in a uint8_t before clamping; the values are
        // in [0, 63] up to rounding, so the truncation never bites.
        ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    }
    pack_scale_min_k4(ls, lm, scales_out);
    *d_out = fp32_to_fp16_ref(max_scale / 63.f);
    *dmin_out = fp32_to_fp16_ref(max_min / 63.f);

    const float d_all = fp16_to_fp32_ref(*d_out);
    const float dmin_all = fp16_to_fp32_ref(*dmin_out);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = d_all * sc;
        if (d == 0.0f) continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

}  // namespace

void quantize_row_q2_K_ref(const float* x, block_q2_K* y, int64_t n) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[QK_K / 16];
    float scales[QK_K / 16];
    const float q4scale = 15.f;

    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float max_scale = 0, max_min = 0;  // mins are subtracted, so scales are >= 0
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] =
                make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16_ref(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16_ref(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                const int l = nearest_int(iscale * mins[j]);
                y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | (l << 4));
            }
            y[i].dmin = fp32_to_fp16_ref(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16_ref(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_fp32_ref(y[i].d) * (y[i].scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = fp16_to_fp32_ref(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        pack_2bit_planes(L, y[i].qs);
    }
}

void quantize_row_q3_K_ref(const float* x, block_q3_K* y, int64_t n) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }

        std::memset(y[i].scales, 0, 12);
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                // ggml keeps this in an int8_t: nearest_int is in [-32, 32] here.
                int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
                } else {
                    y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
                }
                l = static_cast<int8_t>(l >> 4);
                y[i].scales[j % 4 + 8] = static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            y[i].d = fp32_to_fp16_ref(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16_ref(0.f);
        }

        quantize_q3_K_levels(x, y[i], L);
    }
}

void quantize_row_q4_K_ref(const float* x, block_q4_K* y, int64_t n) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        quantize_k4_scales(x, 15, -1.f, 0.1f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void quantize_row_q5_K_ref(const float* x, block_q5_K* y, int64_t n) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        quantize_k4_scales(x, 31, -0.5f, 0.1f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        pack_q5_K_quants(L, y[i].qh, y[i].qs);
    }
}

void quantize_row_q6_K_ref(const float* x, block_q6_K* y, int64_t n) { quantize_row_q6_K_impl_ref(x, y, n, nullptr); }

// ggml's quantize_row_q6_K_impl: qw null is the reference quantizer, else
// each sub-block's scale search is weighted by the row's importance.
void quantize_row_q6_K_impl_ref(const float* x, block_q6_K* y, int64_t n, const float* qw) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + QK_K * i + 16 * ib : nullptr);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = fp32_to_fp16_ref(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16_ref(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));

        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = fp16_to_fp32_ref(y[i].d) * y[i].scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-32, std::min(31, l));
                L[16 * j + ii] = static_cast<int8_t>(l + 32);
            }
        }

        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                             ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n) {
    assert(n % QK_K == 0);
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, QK_K);
            std::memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        // ggml maps the extreme to -127 (not -128) so that SIMD code can use
        // sign tricks; we follow it for identical bytes.
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1 / iscale;
    }
}

}  // namespace strata::kernels
