// The type-dispatched front door to the weight-format kernels.
//
// Callers (the engine's backends, the quantizer) name a WeightType and hand
// over raw row pointers; this picks the kernel. dot_row, quantize_activation,
// dot_row_q and gemm_q go to the best implementation this CPU runs (AVX2 /
// AVX-512 kernels in kernels/cpu/, chosen at run time; STRATA_KERNELS=ref
// forces the scalar reference kernels of kernels/ref/; see kernels/dispatch.h).
// dequantize_row and quantize_row always use the reference kernels.
//
// Rows are contiguous runs of blocks in GGML's layout (what a GGUF file
// stores). n counts elements and must be a multiple of the type's block size
// (type_traits(t)->block_elems); the byte size of a row is row_bytes(t, n).
// Calling with a type for which has_kernels() is false fills dst with NaN
// (dequantize_row), returns NaN (dot_row) or writes nothing (quantize_row).
// No function here allocates or throws.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"

namespace strata::kernels {

// True when dequantize_row, dot_row and quantize_row all support t:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K.
bool has_kernels(WeightType t);

// Dequantizes n elements of one row.
void dequantize_row(WeightType t, const void* src, float* dst, int64_t n);

// sum_i w[i] * x[i] over one row of n elements of type t, accumulated in
// float. Equals dequantize_row followed by a float dot product up to
// summation order (each dequantized element is bit-identical).
float dot_row(WeightType t, const void* w, const float* x, int64_t n);

// Quantizes n floats into type t with ggml's reference quantizer (the bytes
// llama-quantize writes without an importance matrix). For F32/F16/BF16 this
// is conversion (round to nearest even).
void quantize_row(WeightType t, const float* src, void* dst, int64_t n);

// ---------------------------------------------------------------------------
// Quantized activations: the arithmetic of llama.cpp's CPU matmul.
//
// llama.cpp does not multiply quantized weights with float activations: it
// converts each activation row once to the weight type's "vec_dot_type" and
// takes integer block dot products. These four functions do the same, so that
// an engine using them computes what the reference logits were computed with:
//
//   std::vector<uint8_t> xq(activation_row_bytes(W.type, cols));  // per token
//   quantize_activation(W.type, x, xq.data(), cols);               // once
//   for (r...) y[r] = dot_row_q(W.type, W.row(r), xq.data(), cols);
//
// A quantized row can be reused for every weight matrix of the same
// activation_type() that multiplies the same x (e.g. Q, K, V or gate and up).
//
// Semantics (see kernels/ref/vec_dot_ref.h for the details):
//   - q8_0 / q8_1 activations are quantized as x86 ggml does (AVX code, which
//     produced the fixtures): d = amax/127 as fp16, q = round_half_even(x *
//     (127/amax)); q8_1 also stores s = fp16(d * sum(q)).
//   - q8_K activations: ggml's quantize_row_q8_K_ref (d = max/-127 as float,
//     nearest_int, bsums[16] = sums of 16 quants).
//   - f16 / bf16 activations: x rounded to nearest even; f32: copied.
//   - dot_row_q: the reference (kernels/ref, STRATA_KERNELS=ref) is ggml's
//     generic vec_dot for the pair (integer sums per block, float scale
//     products accumulated in ggml's order; float formats: float products
//     summed in double), bit-exact with ggml's generic C build. The SIMD
//     kernels (like ggml's) compute the same integer block sums and add the
//     float block terms in another order: equal to the reference within
//     float rounding (see kernels/cpu/dot_x86.inc; tests/kernels/
//     test_simd_kernels.cpp states the bounds).
//   - quantize_activation: every level writes the reference's bytes.
//
// Types without kernels (has_kernels() false): activation_type returns F32,
// activation_row_bytes -1, quantize_activation writes nothing, dot_row_q NaN.

// The activation format ggml pairs with weight type w (its vec_dot_type):
// F32->F32, F16->F16, BF16->BF16, Q4_0/Q5_0/Q8_0->Q8_0, Q4_1/Q5_1->Q8_1,
// Q2_K..Q6_K->Q8_K. Q8_K (not a ggml weight type) -> Q8_K.
WeightType activation_type(WeightType w);

// Bytes of an activation row of n elements for weights of type w
// (row_bytes(activation_type(w), n)); -1 when n is not a multiple of w's block
// size or w has no kernels.
int64_t activation_row_bytes(WeightType w, int64_t n);

// Quantizes one activation row (n elements, n a multiple of w's block size)
// into activation_type(w), for dotting with weights of type w. xq must hold
// activation_row_bytes(w, n) bytes, aligned to 4 (q8_K holds a float).
void quantize_activation(WeightType w, const float* x, void* xq, int64_t n);

// The floats an activation row prepared by quantize_activation(w, ...) stands
// for: its values rounded as the products with w's weights see them.
void dequantize_activation(WeightType w, const void* xq, float* y, int64_t n);

// Dot product of one weight row of type w with an activation row prepared by
// quantize_activation (same w, same n).
float dot_row_q(WeightType w, const void* wrow, const void* xq, int64_t n);

// Many weight rows times many activation rows (prefill, an expert's tokens):
//
//   Y[t * ldy + r] = dot_row_q(w, W + r * w_row_bytes, xq + t * act_row_bytes, cols)
//
// for r < rows, t < n_tokens. W holds `rows` weight rows of `cols` elements,
// w_row_bytes apart (>= row_bytes(w, cols), keeping the type's alignment: 4
// for f32, 2 otherwise); xq holds n_tokens activation rows
// made by quantize_activation(w, ...), act_row_bytes apart (>=
// activation_row_bytes(w, cols), a multiple of 4). The SIMD versions unpack
// each weight block once for up to 4 tokens (prefill, an expert's batch);
// with one token they are the fastest decode path too (q4_0 / q5_0 prepare
// the activation row once per call: call with many rows, e.g. a thread's
// whole row range). Results are batch-invariant: each Y element depends only
// on its row and token, never on n_tokens, rows or tiling; they equal
// dot_row_q's within float rounding (bit for bit except q4_0 / q5_0). The
// reference is a loop over the reference dot. Uses up to 64 KiB of stack.
// Types without kernels fill Y with NaN.
void gemm_q(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq, int64_t act_row_bytes,
            int64_t n_tokens, int64_t cols, float* Y, int64_t ldy);

// gemm_q for weights that are read once and not again soon: a MoE expert's
// rows in decode, one of ~100 MiB a token streams past. The same results as
// gemm_q, bit for bit; with one token the SIMD kernels that prefetch (avx512:
// Q4_0_R4, Q8_0_R2; avx2: the 32-element block formats with prepared
// activations, such as Q4_0 and Q8_0) ask for the rows with non-temporal
// prefetches, so they do not evict from the caches what every token reads
// again (attention, router, output head). Elsewhere it is gemm_q.
void gemm_q_once(WeightType w, const void* W, uint64_t w_row_bytes, int64_t rows, const void* xq, int64_t act_row_bytes,
                 int64_t n_tokens, int64_t cols, float* Y, int64_t ldy);

// gemm_q_once for one token on two matrices of the same type and shape, such
// as a MoE expert's gate and up: Ya = Wa . x and Yb = Wb . x (rows rows each,
// w_row_bytes apart in both; xq one activation row of cols elements). Where
// the level has a kernel for the type (avx512: Q4_0_R4, Q8_0_R2; avx2vnni:
// the formats with a prepared form, Q8_0 among them) it reads row r of Wa,
// then row r of Wb, so each core keeps two streams of memory going instead
// of one, and each block of the activations is loaded once for both rows
// (decode of the 1.2B make-model in in-process A/Bs: Q4_0 +1-6%, Q8_0 +4%,
// Q8_0 at avx2vnni +3%; a read loop with two streams a core read ~4% more
// than one on the development VM, but two experts' down rows read as two
// streams, with two activations, gained nothing). Elsewhere it is gemm_q_once on each. The same
// results as gemm_q_once on each, bit for bit.
void gemm_q_once_pair(WeightType w, const void* Wa, const void* Wb, uint64_t w_row_bytes, int64_t rows, const void* xq,
                      int64_t cols, float* Ya, float* Yb);

// ---------------------------------------------------------------------------
// In-memory layouts (kernels/ref/repack_ref.h): a file type's rows rearranged
// for the active level's SIMD kernels, same bytes per row, same results.
//
// The layout gemm_q of the active kernel level runs fastest for rows of `cols`
// elements of file type w: at avx512 Q4_0 -> Q4_0_R4 (rows up to 32768
// elements) and Q8_0 -> Q8_0_R2 (up to 21824), otherwise w itself (nothing
// to gain: keep the file's bytes).
// Every level computes every layout correctly (a level without a fast kernel
// for a layout uses the reference), so switching levels after repacking stays
// correct; it is only slower.
WeightType fast_layout(WeightType w, int64_t cols);

// Rewrites `rows` rows of `cols` elements, row_stride bytes apart, from
// layout `from` to layout `to` in place (either may be the file type or one
// of its layouts, e.g. Q4_0 -> Q4_0_R4, Q8_0_R2 -> Q8_0). scratch must hold
// row_bytes(from, cols) bytes. Returns false (and changes nothing) when the
// two are not layouts of one file type or cols is not a whole number of blocks.
bool repack_rows(WeightType from, WeightType to, void* data, int64_t rows, int64_t cols, uint64_t row_stride,
                 void* scratch);

// IEEE binary16 and bfloat16 conversions. Narrowing rounds to nearest, ties
// to even, overflows to Inf; NaN stays NaN (payload kept where it fits).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace strata::kernels
