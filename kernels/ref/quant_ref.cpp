// Reference kernels: float formats and the 32-element block formats
// (q4_0, q4_1, q5_0, q5_1, q8_0), plus the shared quantizer helpers.
// The k-quants live in quant_ref_k.cpp.
//
// Layout and arithmetic follow ggml (ggml-common.h, ggml-quants.c): every
// dequantized value is computed with the same float operations in the same
// order, so it is bit-identical to llama.cpp's.
#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/ref/quant_ref.h"
#include "kernels/ref/quant_ref_dot.h"

namespace strata::kernels {

// ---------------------------------------------------------------------------
// Helpers shared with quant_ref_k.cpp

int nearest_int(float v) {
    // ggml's trick: adding 1.5 * 2^23 leaves round-to-nearest-even(v) in the
    // low mantissa bits. Valid for |v| <= 2^22 - 1; clamp so that a degenerate
    // scale cannot produce garbage (values that far out are clamped by every
    // caller anyway).
    v = std::clamp(v, -4194303.f, 4194303.f);
    const float biased = v + 12582912.f;
    return static_cast<int>(f32_bits(biased) & 0x007FFFFFu) - 0x00400000;
}

// ---------------------------------------------------------------------------
// Float formats

void dequantize_row_f32_ref(const float* x, float* y, int64_t n) {
    if (n > 0) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16_ref(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32_ref(x[i]);
}

void dequantize_row_bf16_ref(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32_ref(x[i]);
}

namespace {

// Dot of a float-like row: converts kDotChunk elements at a time into a stack
// buffer, then multiplies lane-wise. Conv is the per-element widening.
template <class T, class Conv>
float dot_float_row(const T* w, const float* x, int64_t n, Conv conv) {
    constexpr int64_t kChunk = 64;
    ref_detail::LaneAcc acc;
    float buf[kChunk];
    int64_t i = 0;
    for (; i + kChunk <= n; i += kChunk) {
        for (int64_t j = 0; j < kChunk; ++j) buf[j] = conv(w[i + j]);
        acc.add(buf, x + i, kChunk);
    }
    const int64_t rest = n - i;
    for (int64_t j = 0; j < rest; ++j) buf[j] = conv(w[i + j]);
    acc.add_tail(buf, x + i, rest);
    return acc.sum();
}

}  // namespace

float dot_f32_f32_ref(const float* w, const float* x, int64_t n) {
    ref_detail::LaneAcc acc;
    const int64_t main = n - n % ref_detail::kLanes;
    acc.add(w, x, main);
    acc.add_tail(w + main, x + main, n - main);
    return acc.sum();
}

float dot_f16_f32_ref(const uint16_t* w, const float* x, int64_t n) {
    return dot_float_row(w, x, n, [](uint16_t h) { return fp16_to_fp32_ref(h); });
}

float dot_bf16_f32_ref(const uint16_t* w, const float* x, int64_t n) {
    return dot_float_row(w, x, n, [](uint16_t h) { return bf16_to_fp32_ref(h); });
}

void quantize_row_f32_ref(const float* x, float* y, int64_t n) {
    if (n > 0) std::memmove(y, x, static_cast<size_t>(n) * sizeof(float));
}

void quantize_row_f16_ref(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16_ref(x[i]);
}

void quantize_row_bf16_ref(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16_ref(x[i]);
}

// ---------------------------------------------------------------------------
// Block decoders: one block -> its 32 floats. dequantize_row_* and dot_* both
// go through these, so the two agree element by element. They are static
// members of strata::kernels (not an unnamed namespace) so that the row
// templates in quant_ref_dot.h find them by argument-dependent lookup.

static inline void decode_block(const block_q4_0& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
        const int x0 = (b.qs[j] & 0x0F) - 8;
        const int x1 = (b.qs[j] >> 4) - 8;
        y[j] = static_cast<float>(x0) * d;
        y[j + QK4_0 / 2] = static_cast<float>(x1) * d;
    }
}

float mxfp4_scale_half(uint8_t e) {
    // 2^(e-128): a normal float with exponent field e - 1 for e >= 2, else the subnormals 2^-128, 2^-127.
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

static inline void decode_block(const block_mxfp4& b, float* y) {
    const float d = mxfp4_scale_half(b.e);
    for (int j = 0; j < QK_MXFP4 / 2; ++j) {
        y[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0x0F]) * d;
        y[j + QK_MXFP4 / 2] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
    }
}

static inline void decode_block(const block_q4_1& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const float m = fp16_to_fp32_ref(b.m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
        const int x0 = b.qs[j] & 0x0F;
        const int x1 = b.qs[j] >> 4;
        y[j] = static_cast<float>(x0) * d + m;
        y[j + QK4_1 / 2] = static_cast<float>(x1) * d + m;
    }
}

static inline uint32_t load_qh(const uint8_t qh[4]) {
    // Little-endian uint32, as ggml memcpy()s it on little-endian hosts.
    return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 | static_cast<uint32_t>(qh[2]) << 16 |
           static_cast<uint32_t>(qh[3]) << 24;
}

static inline void decode_block(const block_q5_0& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < QK5_0 / 2; ++j) {
        const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        const int x0 = ((b.qs[j] & 0x0F) | h0) - 16;
        const int x1 = ((b.qs[j] >> 4) | h1) - 16;
        y[j] = static_cast<float>(x0) * d;
        y[j + QK5_0 / 2] = static_cast<float>(x1) * d;
    }
}

static inline void decode_block(const block_q5_1& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    const float m = fp16_to_fp32_ref(b.m);
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < QK5_1 / 2; ++j) {
        const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        const int x0 = (b.qs[j] & 0x0F) | h0;
        const int x1 = (b.qs[j] >> 4) | h1;
        y[j] = static_cast<float>(x0) * d + m;
        y[j + QK5_1 / 2] = static_cast<float>(x1) * d + m;
    }
}

static inline void decode_block(const block_q8_0& b, float* y) {
    const float d = fp16_to_fp32_ref(b.d);
    for (int j = 0; j < QK8_0; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

using ref_detail::dequantize_blocks;
using ref_detail::dot_blocks;

void dequantize_row_q4_0_ref(const block_q4_0* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q4_1_ref(const block_q4_1* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q5_0_ref(const block_q5_0* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q5_1_ref(const block_q5_1* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_q8_0_ref(const block_q8_0* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }
void dequantize_row_mxfp4_ref(const block_mxfp4* x, float* y, int64_t n) { dequantize_blocks(x, y, n); }

float dot_q4_0_f32_ref(const block_q4_0* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q4_1_f32_ref(const block_q4_1* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q5_0_f32_ref(const block_q5_0* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q5_1_f32_ref(const block_q5_1* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_q8_0_f32_ref(const block_q8_0* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }
float dot_mxfp4_f32_ref(const block_mxfp4* w, const float* x, int64_t n) { return dot_blocks(w, x, n); }

void quantize_row_mxfp4_ref(const float* x, block_mxfp4* y, int64_t n) {
    assert(n % QK_MXFP4 == 0);
    const int64_t nb = n / QK_MXFP4;
    for (int64_t i = 0; i < nb; ++i, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
        const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
        const float d = mxfp4_scale_half(e);
        const auto nearest = [d](float v) {
            int best = 0;
            float best_err = std::fabs(kMxfp4Values[0] * d - v);
            for (int k = 1; k < 16; ++k) {
                const float err = std::fabs(kMxfp4Values[k] * d - v);
                if (err < best_err) {
                    best = k;
                    best_err = err;
                }
            }
            return best;
        };
        y[i].e = e;
        for (int j = 0; j < QK_MXFP4 / 2; ++j)
            y[i].qs[j] = static_cast<uint8_t>(nearest(x[j]) | (nearest(x[j + QK_MXFP4 / 2]) << 4));
    }
}

// ---------------------------------------------------------------------------
// Quantizers (ggml's quantize_row_*_ref, same rounding, same bytes).

void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n) {
    assert(n % QK4_0 == 0);
    const int64_t nb = n / QK4_0;
    for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
        // The value of largest magnitude, with its sign, maps to -8 exactly.
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[j + QK4_0 / 2] * id;
            const uint8_t q0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f))));
            const uint8_t q1 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f))));
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t n) {
    assert(n % QK4_1 == 0);
    const int64_t nb = n / QK4_1;
    for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK4_1; ++j) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        y[i].m = fp32_to_fp16_ref(min);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + QK4_1 / 2] - min) * id;
            const uint8_t q0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f))));
            const uint8_t q1 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f))));
            y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

namespace {
inline void store_qh(uint8_t dst[4], uint32_t qh) {
    dst[0] = static_cast<uint8_t>(qh);
    dst[1] = static_cast<uint8_t>(qh >> 8);
    dst[2] = static_cast<uint8_t>(qh >> 16);
    dst[3] = static_cast<uint8_t>(qh >> 24);
}
}  // namespace

void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t n) {
    assert(n % QK5_0 == 0);
    const int64_t nb = n / QK5_0;
    for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[j + QK5_0 / 2] * id;
            const uint8_t q0 = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f))));
            const uint8_t q1 = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f))));
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
            qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t n) {
    assert(n % QK5_1 == 0);
    const int64_t nb = n / QK5_1;
    for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK5_1; ++j) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        y[i].m = fp32_to_fp16_ref(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + QK5_1 / 2] - min) * id;
            const uint8_t q0 = static_cast<uint8_t>(x0 + 0.5f);
            const uint8_t q1 = static_cast<uint8_t>(x1 + 0.5f);
            y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
            qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n) {
    assert(n % QK8_0 == 0);
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    }
}

}  // namespace strata::kernels
