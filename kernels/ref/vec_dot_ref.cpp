// Reference kernels: activation quantizers and quantized-activation dot
// products, ports of ggml's generic C code (see vec_dot_ref.h for what is
// followed where). The loops keep ggml's structure on purpose, including its
// int8/int16 intermediates and 8-lane float accumulators, so that a reader can
// check them against ggml line by line and so that the float results are the
// same bits as ggml's generic build.
#include "kernels/ref/vec_dot_ref.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace strata::kernels {

namespace {

inline float h2f(uint16_t h) { return fp16_to_fp32_ref(h); }

// _mm256_cvtps_epi32 followed by the saturating packs to int8.
inline int8_t sat_i8(int v) { return static_cast<int8_t>(std::clamp(v, -128, 127)); }

// Shared by the two x86-style quantizers: amax, d, id and the quants of one
// 32-element block, as arch/x86/quants.c computes them. Returns d (float).
inline float quantize_block_x86(const float* x, int8_t* qs) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    // nearest_int rounds to nearest, ties to even, like _mm256_round_ps with
    // _MM_ROUND_NEAREST, whatever the current rounding mode.
    for (int j = 0; j < 32; ++j) qs[j] = sat_i8(nearest_int(x[j] * id));
    return d;
}

}  // namespace

// ---------------------------------------------------------------------------
// Activation quantizers

void quantize_act_q8_0_ref(const float* x, block_q8_0* y, int64_t n) {
    assert(n % QK8_0 == 0);
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; ++i, x += QK8_0) y[i].d = fp32_to_fp16_ref(quantize_block_x86(x, y[i].qs));
}

void quantize_act_q8_1_ref(const float* x, block_q8_1* y, int64_t n) {
    assert(n % QK8_1 == 0);
    const int64_t nb = n / QK8_1;
    for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
        const float d = quantize_block_x86(x, y[i].qs);
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) sum += y[i].qs[j];
        y[i].d = fp32_to_fp16_ref(d);
        y[i].s = fp32_to_fp16_ref(d * static_cast<float>(sum));
    }
}

void quantize_row_q8_1_ref(const float* x, block_q8_1* y, int64_t n) {
    assert(n % QK8_1 == 0);
    const int64_t nb = n / QK8_1;
    for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16_ref(d);
        int sum = 0;
        for (int j = 0; j < QK8_1 / 2; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
            y[i].qs[QK8_1 / 2 + j] = static_cast<int8_t>(std::round(x[QK8_1 / 2 + j] * id));
            sum += y[i].qs[j];
            sum += y[i].qs[QK8_1 / 2 + j];
        }
        y[i].s = fp32_to_fp16_ref(static_cast<float>(sum) * d);
    }
}

void dequantize_row_q8_1_ref(const block_q8_1* x, float* y, int64_t n) {
    assert(n % QK8_1 == 0);
    const int64_t nb = n / QK8_1;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = h2f(x[i].d);
        for (int j = 0; j < QK8_1; ++j) y[i * QK8_1 + j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

// ---------------------------------------------------------------------------
// Float formats (vec.cpp, the scalar branches): float products, double sum in
// element order. The products are formed a chunk at a time (a loop g++ can
// vectorize) and then added in order; the result is the same as ggml's loop.

namespace {

template <class T, class Conv>
float dot_double_sum(const T* w, const T* x, int64_t n, Conv conv) {
    constexpr int64_t kChunk = 64;
    float prod[kChunk];
    double sumf = 0.0;
    for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t len = std::min(kChunk, n - i);
        for (int64_t j = 0; j < len; ++j) prod[j] = conv(w[i + j]) * conv(x[i + j]);
        for (int64_t j = 0; j < len; ++j) sumf += static_cast<double>(prod[j]);
    }
    return static_cast<float>(sumf);
}

}  // namespace

float vec_dot_f32_ref(const float* w, const float* x, int64_t n) {
    return dot_double_sum(w, x, n, [](float f) { return f; });
}

float vec_dot_f16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
    return dot_double_sum(w, x, n, [](uint16_t v) { return fp16_to_fp32_ref(v); });
}

float vec_dot_bf16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
    return dot_double_sum(w, x, n, [](uint16_t v) { return bf16_to_fp32_ref(v); });
}

// ---------------------------------------------------------------------------
// 32-element formats (ggml_vec_dot_{q4_0,q4_1,q5_0,q5_1,q8_0}_q8_{0,1}_generic)

float vec_dot_q4_0_q8_0_ref(const block_q4_0* x, const block_q8_0* y, int64_t n) {
    return vec_dot_q4_0_q8_0_blocks([x](int64_t i) -> const block_q4_0& { return x[i]; }, y, n);
}

float vec_dot_mxfp4_q8_0_ref(const block_mxfp4* x, const block_q8_0* y, int64_t n) {
    constexpr int qk = QK_MXFP4;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        int sumi0 = 0;
        int sumi1 = 0;
        for (int j = 0; j < qk / 2; ++j) {
            sumi0 += kMxfp4Values[x[ib].qs[j] & 0x0F] * y[ib].qs[j];
            sumi1 += kMxfp4Values[x[ib].qs[j] >> 4] * y[ib].qs[j + qk / 2];
        }
        sumf += mxfp4_scale_half(x[ib].e) * fp16_to_fp32_ref(y[ib].d) * static_cast<float>(sumi0 + sumi1);
    }
    return sumf;
}

float vec_dot_q4_1_q8_1_ref(const block_q4_1* x, const block_q8_1* y, int64_t n) {
    constexpr int qk = QK8_1;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        int sumi0 = 0;
        int sumi1 = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const int v0 = x[ib].qs[j] & 0x0F;
            const int v1 = x[ib].qs[j] >> 4;
            sumi0 += v0 * y[ib].qs[j];
            sumi1 += v1 * y[ib].qs[j + qk / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (h2f(x[ib].d) * h2f(y[ib].d)) * static_cast<float>(sumi) + h2f(x[ib].m) * h2f(y[ib].s);
    }
    return sumf;
}

float vec_dot_q5_0_q8_0_ref(const block_q5_0* x, const block_q8_0* y, int64_t n) {
    constexpr int qk = QK8_0;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        uint32_t qh;
        std::memcpy(&qh, x[ib].qh, sizeof qh);
        int sumi0 = 0;
        int sumi1 = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = static_cast<uint8_t>(((qh & (1u << (j + 0))) >> (j + 0)) << 4);
            const uint8_t xh_1 = static_cast<uint8_t>((qh & (1u << (j + 16))) >> (j + 12));
            const int32_t x0 = static_cast<int8_t>(((x[ib].qs[j] & 0x0F) | xh_0) - 16);
            const int32_t x1 = static_cast<int8_t>(((x[ib].qs[j] >> 4) | xh_1) - 16);
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + qk / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (h2f(x[ib].d) * h2f(y[ib].d)) * static_cast<float>(sumi);
    }
    return sumf;
}

float vec_dot_q5_1_q8_1_ref(const block_q5_1* x, const block_q8_1* y, int64_t n) {
    constexpr int qk = QK8_1;
    const int64_t nb = n / qk;
    float sumf = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        uint32_t qh;
        std::memcpy(&qh, x[ib].qh, sizeof qh);
        int sumi0 = 0;
        int sumi1 = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = static_cast<uint8_t>(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
            const int32_t x0 = (x[ib].qs[j] & 0xF) | xh_0;
            const int32_t x1 = (x[ib].qs[j] >> 4) | xh_1;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + qk / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (h2f(x[ib].d) * h2f(y[ib].d)) * static_cast<float>(sumi) + h2f(x[ib].m) * h2f(y[ib].s);
    }
    return sumf;
}

float vec_dot_q8_0_q8_0_ref(const block_q8_0* x, const block_q8_0* y, int64_t n) {
    return vec_dot_q8_0_q8_0_blocks([x](int64_t i) -> const block_q8_0& { return x[i]; }, y, n);
}

// ---------------------------------------------------------------------------
// k-quants x q8_K (ggml_vec_dot_q{2,3,4,5,6}_K_q8_K_generic)

float vec_dot_q2_K_q8_K_ref(const block_q2_K* x, const block_q8_K* y, int64_t n) {
    const int64_t nb = n / QK_K;
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q2 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        const uint8_t* sc = x[i].scales;

        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);

        const float dall = y[i].d * h2f(x[i].d);
        const float dmin = y[i].d * h2f(x[i].dmin);

        int isum = 0;
        int is = 0;
        for (int k = 0; k < QK_K / 128; ++k) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                int d = sc[is++] & 0xF;
                int isuml = 0;
                for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                d = sc[is++] & 0xF;
                isuml = 0;
                for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                shift += 2;
                q8 += 32;
            }
            q2 += 32;
        }
        sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
    }
    return sumf;
}

float vec_dot_q3_K_q8_K_ref(const block_q3_K* x, const block_q8_K* y, int64_t n) {
    const uint32_t kmask1 = 0x03030303;
    const uint32_t kmask2 = 0x0f0f0f0f;
    const int64_t nb = n / QK_K;

    int8_t aux8[QK_K];
    int16_t aux16[8];
    float sums[8] = {};
    int32_t aux32[8];

    uint32_t auxs[4];
    int8_t scales[16];

    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q3 = x[i].qs;
        const uint8_t* hm = x[i].hmask;
        const int8_t* q8 = y[i].qs;
        std::memset(aux32, 0, sizeof aux32);
        int8_t* a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K; j += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>((q3[l] >> shift) & 3);
                for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(a[l] - ((hm[l] & m) ? 0 : 4));
                a += 32;
                m = static_cast<uint8_t>(m << 1);
            }
            q3 += 32;
        }
        a = aux8;

        std::memcpy(auxs, x[i].scales, 12);
        const uint32_t tmp = auxs[2];
        auxs[2] = ((auxs[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        auxs[3] = ((auxs[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        auxs[0] = (auxs[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        auxs[1] = (auxs[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        std::memcpy(scales, auxs, 16);
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int half = 0; half < 2; ++half) {
                for (int l = 0; l < 8; ++l) aux16[l] = static_cast<int16_t>(q8[l] * a[l]);
                for (int l = 0; l < 8; ++l) aux32[l] += (scales[j] - 32) * aux16[l];
                q8 += 8;
                a += 8;
            }
        }
        const float d = h2f(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

namespace {

// ggml's in-place unpacking of the q4_K/q5_K 6-bit scales and mins:
// scales[0..7] then mins[0..7] in the 16 returned bytes.
inline void unpack_k4_scales(const uint8_t packed[12], uint8_t out[16]) {
    constexpr uint32_t kmask1 = 0x3f3f3f3f;
    constexpr uint32_t kmask2 = 0x0f0f0f0f;
    constexpr uint32_t kmask3 = 0x03030303;
    uint32_t utmp[4];
    std::memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    std::memcpy(out, utmp, 16);
}

// The part q4_K and q5_K share once the quants are unpacked into aux8 (one
// super-block): the 8-lane integer sums and the float updates, in ggml's order.
inline void k4_block_sums(const uint8_t sm[16], const int8_t* aux8, const int8_t* q8, const int16_t* bsums, float d,
                          float dmin, float* sums, float* sumf) {
    const uint8_t* scales = sm;
    const uint8_t* mins = sm + 8;
    int16_t aux16[8];
    int32_t aux32[8] = {};

    int sumi = 0;
    for (int j = 0; j < QK_K / 16; ++j) sumi += bsums[j] * mins[j / 2];
    const int8_t* a = aux8;
    for (int j = 0; j < QK_K / 32; ++j) {
        const int32_t scale = scales[j];
        for (int part = 0; part < 4; ++part) {
            for (int l = 0; l < 8; ++l) aux16[l] = static_cast<int16_t>(q8[l] * a[l]);
            for (int l = 0; l < 8; ++l) aux32[l] += scale * aux16[l];
            q8 += 8;
            a += 8;
        }
    }
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    *sumf -= dmin * static_cast<float>(sumi);
}

}  // namespace

float vec_dot_q4_K_q8_K_ref(const block_q4_K* x, const block_q8_K* y, int64_t n) {
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    uint8_t sm[16];
    float sums[8] = {};
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q4 = x[i].qs;
        int8_t* a = aux8;
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
            a += 32;
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] >> 4);
            a += 32;
            q4 += 32;
        }
        unpack_k4_scales(x[i].scales, sm);
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        k4_block_sums(sm, aux8, y[i].qs, y[i].bsums, d, dmin, sums, &sumf);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

float vec_dot_q5_K_q8_K_ref(const block_q5_K* x, const block_q8_K* y, int64_t n) {
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    uint8_t sm[16];
    float sums[8] = {};
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q4 = x[i].qs;
        const uint8_t* hm = x[i].qh;
        int8_t* a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] & 0xF);
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(a[l] + ((hm[l] & m) ? 16 : 0));
            a += 32;
            m = static_cast<uint8_t>(m << 1);
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(q4[l] >> 4);
            for (int l = 0; l < 32; ++l) a[l] = static_cast<int8_t>(a[l] + ((hm[l] & m) ? 16 : 0));
            a += 32;
            m = static_cast<uint8_t>(m << 1);
            q4 += 32;
        }
        unpack_k4_scales(x[i].scales, sm);
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        k4_block_sums(sm, aux8, y[i].qs, y[i].bsums, d, dmin, sums, &sumf);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

float vec_dot_q6_K_q8_K_ref(const block_q6_K* x, const block_q8_K* y, int64_t n) {
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    int16_t aux16[8];
    float sums[8] = {};
    int32_t aux32[8];
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q4 = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* q8 = y[i].qs;
        std::memset(aux32, 0, sizeof aux32);
        int8_t* a = aux8;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                a[l + 0] = static_cast<int8_t>(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                a[l + 32] = static_cast<int8_t>(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                a[l + 64] = static_cast<int8_t>(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                a[l + 96] = static_cast<int8_t>(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            a += 128;
            q4 += 64;
            qh += 32;
        }
        a = aux8;
        for (int j = 0; j < QK_K / 16; ++j) {
            const int scale = x[i].scales[j];
            for (int half = 0; half < 2; ++half) {
                for (int l = 0; l < 8; ++l) aux16[l] = static_cast<int16_t>(q8[l] * a[l]);
                for (int l = 0; l < 8; ++l) aux32[l] += scale * aux16[l];
                q8 += 8;
                a += 8;
            }
        }
        const float d = h2f(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

float vec_dot_q8_K_q8_K_ref(const block_q8_K* x, const block_q8_K* y, int64_t n) {
    const int64_t nb = n / QK_K;
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        int sumi = 0;
        for (int j = 0; j < QK_K; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += static_cast<float>(sumi) * (x[i].d * y[i].d);
    }
    return sumf;
}

}  // namespace strata::kernels
