// Internal to kernels/cpu: small AVX2 helpers shared by the SIMD kernel files.
//
// Include only from a translation unit compiled with -mavx2 -mfma -mf16c (the
// *_avx2.cpp / *_avx512.cpp files), after defining STRATA_SIMD_NS.
//
// ODR rule for every SIMD translation unit: everything defined in it has
// internal linkage (anonymous namespace), and it calls no inline function or
// template from a header shared with baseline code (std::min, std::max,
// fp16_to_fp32_ref, ...). Otherwise the linker could keep an AVX2-compiled
// copy of such a function for the whole program and the reference path would
// die with SIGILL on a CPU without AVX2. Conversions use F16C intrinsics and
// local helpers instead.
#pragma once

#if !defined(STRATA_SIMD_NS)
#error "define STRATA_SIMD_NS (avx2 / avx512) before including simd_x86.h"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

// vpdpbusd on ymm registers (u8 x s8, 4 products per int32 lane): from
// AVX512_VNNI with VL (the avx512 level) or from AVX-VNNI, its VEX form (the
// avx2vnni level). vnni_dpbusd below is the one intrinsic for both.
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define STRATA_SIMD_VNNI 1
#else
#define STRATA_SIMD_VNNI 0
#endif

namespace strata::kernels {
extern int g_kernel_prefetch_bytes;  // kernels/tuning.h
}

namespace strata::kernels::cpu::STRATA_SIMD_NS {
namespace {

// Software prefetch with a hint chosen at compile time, as a template
// argument. __builtin_prefetch's locality, for GCC and clang alike (GCC's
// _mm_prefetch wants its own enum type, clang's an int): 3 emits
// prefetcht0 (into every cache level), 0 prefetchnta (weights read once:
// kept out of the outer caches where the CPU allows).
constexpr int kAskT0 = 3;
constexpr int kAskNta = 0;
template <int Ask>
inline void prefetch(const void* p) {
    __builtin_prefetch(p, 0, Ask);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t f2h(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

// The fp16 field at the start of a block (q4_0/q5_0/q8_0 d): read as 4
// bytes (the other two are the block's own quants), so the load feeds
// vcvtph2ps directly.
inline float h2f_lead(const void* block) {
    int32_t v;
    std::memcpy(&v, block, sizeof v);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v)));
}

#if STRATA_SIMD_VNNI
inline __m256i vnni_dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}
#endif

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Horizontal sum of 8 floats as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)): the
// order of the reference LaneAcc::sum (kernels/ref/quant_ref_dot.h).
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // p_k = l_k + l_{k+4}
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                            // p0+p2, p1+p3
    s = _mm_add_ss(s, _mm_movehdup_ps(s));                                             // (p0+p2)+(p1+p3)
    return _mm_cvtss_f32(s);
}

inline int32_t hsum8_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// acc + sum of 4 adjacent u8 x s8 products in each int32 lane. On the maddubs
// path a pair of products must fit int16 (|u*s + u*s| <= 32767): true for
// every caller (u <= 128 with |s| <= 127, or u <= 63 with any s).
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if STRATA_SIMD_VNNI
    return vnni_dpbusd(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// u8 x s8 products summed in pairs and multiplied by int16 scales, summed in
// pairs again: int32 lane k = scale[2k] * (u*s pair 2k) + scale[2k+1] * (pair 2k+1).
inline __m256i mul_scale(__m256i u, __m256i s, __m256i scale16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

// 16 bytes of packed nibbles -> 32 bytes: element j < 16 is the low nibble of
// byte j, element j + 16 its high nibble (ggml's q4_0/q4_1/q5 layout).
inline __m256i unpack_nibbles32(const uint8_t* p) {
    const __m128i v = loadu128(p);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0xFF where bit j is set.
inline __m256i bits_to_bytes32(uint32_t b) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(b)),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
}

// The same for 4 little-endian bytes in memory.
inline __m256i bits_to_bytes32(const uint8_t* p) {
    uint32_t b;
    std::memcpy(&b, p, sizeof b);
    return bits_to_bytes32(b);
}

// int16 vector with lanes 0..7 = lo and lanes 8..15 = hi.
inline __m256i scale_pair16(int16_t lo, int16_t hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(lo)), _mm_set1_epi16(hi), 1);
}

// Mask of the first `n` (0..8) float lanes, for maskload / maskstore.
inline __m256i tail_mask8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#if defined(__AVX512F__)
// Mask of the first min(left, 16) float lanes, for 512-bit masked loads / stores.
inline __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}
#endif

}  // namespace
}  // namespace strata::kernels::cpu::STRATA_SIMD_NS
