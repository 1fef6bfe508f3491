// One weight of a quantized row, decoded on its own: element j of a row of
// any core format, as a float. The CUDA kernels (kernels/cuda/*.cu) read
// weights this way, each thread the elements it multiplies; the same code
// compiles for the host, where tests/kernels/test_cuda_decode checks it
// against the reference decoders (kernels/ref) element by element, bit for
// bit, so the GPU kernels start from a decoding known to be right.
//
// The arithmetic is the reference decoders' (quant_ref.cpp, quant_ref_k.cpp)
// operation by operation. nvcc contracts a*b-c into one FMA where the host
// rounds twice: a GPU row agrees with the reference to a rounding, not bits.
// Plain C++ (no CUDA header): STRATA_HD marks the functions for both sides.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define STRATA_HD __host__ __device__ __forceinline__
#else
#define STRATA_HD inline
#endif

namespace strata::kernels::cuda {

// Raw file type ids (kernels/quant_types.h WeightType), repeated so that this
// header needs no engine or kernel header on the device side.
enum class QType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30, MXFP4 = 39,
};

// Elements and bytes of one block of each type.
STRATA_HD int block_elems(QType t) {
    switch (t) {
        case QType::F32: case QType::F16: case QType::BF16: return 1;
        case QType::Q4_0: case QType::Q4_1: case QType::Q5_0: case QType::Q5_1: case QType::Q8_0:
        case QType::MXFP4: return 32;
        default: return 256;
    }
}
STRATA_HD int block_bytes(QType t) {
    switch (t) {
        case QType::F32: return 4;
        case QType::F16: case QType::BF16: return 2;
        case QType::Q4_0: return 18;
        case QType::Q4_1: return 20;
        case QType::Q5_0: return 22;
        case QType::Q5_1: return 24;
        case QType::Q8_0: return 34;
        case QType::Q2_K: return 84;
        case QType::Q3_K: return 110;
        case QType::Q4_K: return 144;
        case QType::Q5_K: return 176;
        case QType::Q6_K: return 210;
        case QType::MXFP4: return 17;
    }
    return 0;
}

STRATA_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}
STRATA_HD uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

// fp16_to_fp32_ref's exponent-rebias widening, exact for every input.
STRATA_HD float half_bits_to_float(uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const float normalized = bits_to_float((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = bits_to_float((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t magnitude = two_w < (1u << 27) ? float_to_bits(denormalized) : float_to_bits(normalized);
    return bits_to_float(sign | magnitude);
}

// Little-endian loads from byte pointers (blocks are only 2-byte aligned).
STRATA_HD uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
STRATA_HD uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
}
STRATA_HD float load_half(const uint8_t* p) { return half_bits_to_float(load_u16(p)); }

// get_scale_min_k4: the 6-bit scale and min of sub-block j of a q4_K/q5_K block.
STRATA_HD void scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Element i (< block_elems) of the block at b.
template <QType T>
STRATA_HD float decode_elem(const uint8_t* b, int i);

template <>
STRATA_HD float decode_elem<QType::F32>(const uint8_t* b, int) { return bits_to_float(load_u32(b)); }
template <>
STRATA_HD float decode_elem<QType::F16>(const uint8_t* b, int) { return load_half(b); }
template <>
STRATA_HD float decode_elem<QType::BF16>(const uint8_t* b, int) { return bits_to_float(static_cast<uint32_t>(load_u16(b)) << 16); }

template <>
STRATA_HD float decode_elem<QType::Q4_0>(const uint8_t* b, int i) {
    const uint8_t q = b[2 + (i & 15)];
    const int x = (i < 16 ? (q & 0x0F) : (q >> 4)) - 8;
    return static_cast<float>(x) * load_half(b);
}
template <>
STRATA_HD float decode_elem<QType::Q4_1>(const uint8_t* b, int i) {
    const uint8_t q = b[4 + (i & 15)];
    const int x = i < 16 ? (q & 0x0F) : (q >> 4);
    return static_cast<float>(x) * load_half(b) + load_half(b + 2);
}
template <>
STRATA_HD float decode_elem<QType::Q5_0>(const uint8_t* b, int i) {
    const uint32_t qh = load_u32(b + 2);
    const uint8_t q = b[6 + (i & 15)];
    const int h = static_cast<int>((qh >> i) & 1u) << 4;
    const int x = ((i < 16 ? (q & 0x0F) : (q >> 4)) | h) - 16;
    return static_cast<float>(x) * load_half(b);
}
template <>
STRATA_HD float decode_elem<QType::Q5_1>(const uint8_t* b, int i) {
    const uint32_t qh = load_u32(b + 4);
    const uint8_t q = b[8 + (i & 15)];
    const int h = static_cast<int>((qh >> i) & 1u) << 4;
    const int x = (i < 16 ? (q & 0x0F) : (q >> 4)) | h;
    return static_cast<float>(x) * load_half(b) + load_half(b + 2);
}
template <>
STRATA_HD float decode_elem<QType::Q8_0>(const uint8_t* b, int i) {
    return static_cast<float>(static_cast<int8_t>(b[2 + i])) * load_half(b);
}

// MXFP4: e (an E8M0 scale), qs[16]; element i is the low nibble of qs[i]
// for i < 16, the high nibble of qs[i - 16] after; the E2M1 values are kept
// doubled (kMxfp4Values), so the scale is 2^(e - 128), as mxfp4_scale_half.
template <>
STRATA_HD float decode_elem<QType::MXFP4>(const uint8_t* b, int i) {
    constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t e = b[0];
    const float d = bits_to_float(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
    const uint8_t q = b[1 + (i & 15)];
    return static_cast<float>(kValues[i < 16 ? (q & 0x0F) : (q >> 4)]) * d;
}

// q2_K: scales[16] qs[64] d dmin. Element e: half e/128, plane (shift) r/32,
// part (r%32)/16, l = r%16 (r = e%128); sub-block is = 8*half + 2*plane + part.
template <>
STRATA_HD float decode_elem<QType::Q2_K>(const uint8_t* b, int e) {
    const int half = e >> 7, r = e & 127, plane = r >> 5, part = (r >> 4) & 1, l = r & 15;
    const uint8_t sc = b[8 * half + 2 * plane + part];
    const float dl = load_half(b + 80) * static_cast<float>(sc & 0xF);
    const float ml = load_half(b + 82) * static_cast<float>(sc >> 4);
    const uint8_t q = b[16 + 32 * half + 16 * part + l];
    return dl * static_cast<float>((q >> (2 * plane)) & 3) - ml;
}

// q3_K: hmask[32] qs[64] scales[12] d. Indexing as q2_K; the high bit of
// element e is bit (4*half + plane) of hmask[16*part + l].
template <>
STRATA_HD float decode_elem<QType::Q3_K>(const uint8_t* b, int e) {
    const int half = e >> 7, r = e & 127, plane = r >> 5, part = (r >> 4) & 1, l = r & 15;
    const int is = 8 * half + 2 * plane + part;
    const uint8_t* packed = b + 96;
    const int lo = is < 8 ? (packed[is] & 0xF) : (packed[is - 8] >> 4);
    const int hi = (packed[8 + is % 4] >> (2 * (is / 4))) & 3;
    const int scale = (lo | (hi << 4)) - 32;
    const float dl = load_half(b + 108) * static_cast<float>(scale);
    const uint8_t q = b[32 + 32 * half + 16 * part + l];
    const uint8_t hm = b[16 * part + l];
    const int v = ((q >> (2 * plane)) & 3) - ((hm & (1u << (4 * half + plane))) ? 0 : 4);
    return dl * static_cast<float>(v);
}

// q4_K: d dmin scales[12] qs[128]. Chunk c = e/64 of 32 bytes: low nibbles
// are sub-block 2c, high nibbles 2c+1.
template <>
STRATA_HD float decode_elem<QType::Q4_K>(const uint8_t* b, int e) {
    const int c = e >> 6, hi = (e >> 5) & 1, l = e & 31;
    int sc, mn;
    scale_min_k4(2 * c + hi, b + 4, &sc, &mn);
    const float d1 = load_half(b) * static_cast<float>(sc);
    const float m1 = load_half(b + 2) * static_cast<float>(mn);
    const uint8_t q = b[16 + 32 * c + l];
    return d1 * static_cast<float>(hi ? (q >> 4) : (q & 0xF)) - m1;
}

// q5_K: d dmin scales[12] qh[32] qs[128]; the fifth bit of element e is bit
// (2c + hi) of qh[l].
template <>
STRATA_HD float decode_elem<QType::Q5_K>(const uint8_t* b, int e) {
    const int c = e >> 6, hi = (e >> 5) & 1, l = e & 31;
    int sc, mn;
    scale_min_k4(2 * c + hi, b + 4, &sc, &mn);
    const float d1 = load_half(b) * static_cast<float>(sc);
    const float m1 = load_half(b + 2) * static_cast<float>(mn);
    const uint8_t q = b[48 + 32 * c + l];
    const int v = (hi ? (q >> 4) : (q & 0xF)) + ((b[16 + l] & (1u << (2 * c + hi))) ? 16 : 0);
    return d1 * static_cast<float>(v) - m1;
}

// q6_K: ql[128] qh[64] scales[16] d. Half e/128; quarter k = (e%128)/32 takes
// ql[l] (k 0, 2) or ql[l+32] (k 1, 3), low (k < 2) or high nibble, and bits
// 2k.. of qh[l]; its scale is scales[l/16 + 2k] of the half.
template <>
STRATA_HD float decode_elem<QType::Q6_K>(const uint8_t* b, int e) {
    const int half = e >> 7, k = (e >> 5) & 3, l = e & 31;
    const uint8_t* ql = b + 64 * half;
    const uint8_t* qh = b + 128 + 32 * half;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * half + l / 16 + 2 * k]);
    const uint8_t lo_byte = ql[l + ((k & 1) ? 32 : 0)];
    const int lo = k < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
    const int q = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
    return load_half(b + 208) * static_cast<float>(sc) * static_cast<float>(q);
}

// fp32_to_fp16_ref: round to nearest even, exact for every input.
STRATA_HD uint16_t float_to_half_bits(float f) {
    const uint32_t x = float_to_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);
    if (a < 0x38800000u) {
        const uint32_t e = a >> 23;
        const int shift = 126 - static_cast<int>(e);
        if (shift > 24) return sign;
        const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t q = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return static_cast<uint16_t>(sign | q);
    }
    uint32_t h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3FFu);
    const uint32_t rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

// Whether the reference multiplies weights of type t by activations
// quantized to Q8_0 (kernels::activation_type): the GPU rounds them the same way.
STRATA_HD bool q8_0_activations(QType t) {
    // Q8_1's values are Q8_0's (the same scale and rounding; it adds their sum).
    return t == QType::Q4_0 || t == QType::Q4_1 || t == QType::Q5_0 || t == QType::Q5_1 || t == QType::Q8_0 ||
           t == QType::MXFP4;
}
// The K-quants' activations: Q8_K (blocks of 256, a float scale, the
// extreme value mapped to -127).
STRATA_HD bool q8_k_activations(QType t) {
    return t == QType::Q2_K || t == QType::Q3_K || t == QType::Q4_K || t == QType::Q5_K || t == QType::Q6_K;
}

// Element j of a row of type T.
template <QType T>
STRATA_HD float row_elem(const uint8_t* row, int64_t j) {
    constexpr int kElems = T == QType::F32 || T == QType::F16 || T == QType::BF16 ? 1
                           : (T == QType::Q4_0 || T == QType::Q4_1 || T == QType::Q5_0 || T == QType::Q5_1 ||
                              T == QType::Q8_0 || T == QType::MXFP4)
                               ? 32
                               : 256;
    constexpr int kBytes = T == QType::F32 ? 4 : T == QType::F16 || T == QType::BF16 ? 2
                           : T == QType::Q4_0 ? 18 : T == QType::Q4_1 ? 20 : T == QType::Q5_0 ? 22
                           : T == QType::Q5_1 ? 24 : T == QType::Q8_0 ? 34 : T == QType::Q2_K ? 84
                           : T == QType::Q3_K ? 110 : T == QType::Q4_K ? 144 : T == QType::Q5_K ? 176
                           : T == QType::MXFP4 ? 17 : 210;
    return decode_elem<T>(row + (j / kElems) * kBytes, static_cast<int>(j % kElems));
}

// Whether a raw type id is one these decoders know.
STRATA_HD bool known_qtype(uint32_t t) {
    switch (static_cast<QType>(t)) {
        case QType::F32: case QType::F16: case QType::BF16: case QType::Q4_0: case QType::Q4_1: case QType::Q5_0:
        case QType::Q5_1: case QType::Q8_0: case QType::Q2_K: case QType::Q3_K: case QType::Q4_K: case QType::Q5_K:
        case QType::Q6_K: case QType::MXFP4:
            return true;
    }
    return false;
}

}  // namespace strata::kernels::cuda
