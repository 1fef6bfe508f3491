// The front door to the float ops of the forward pass: the same functions and
// signatures as kernels/ref/ops_ref.h, dispatched at run time to the best
// implementation this CPU runs (kernels/dispatch.h; STRATA_KERNELS=ref forces
// the scalar reference). An engine switches with one line:
//
//   namespace ops = kernels::ops;   // was kernels::ref
//
// Agreement with the reference (tests/kernels/test_simd_kernels.cpp):
// dot_f32, axpy, scale_i8 and rope_apply bit-identical; rmsnorm within 2 ulp; softmax
// and swiglu within a few ulp (a polynomial exp instead of std::exp);
// rope_table (once per position) is the reference itself.
#pragma once

#include <cstdint>

namespace strata::kernels::ops {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scaling). y may be x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// In-place softmax over n values.
void softmax(float* x, int64_t n);
// In-place softmax over n values whose denominator also holds exp(sink): a
// learned "attend to nothing" logit (gpt-oss's attention sinks), so the
// weights sum to less than 1. Scalar (std::exp); n may be 0.
void softmax_sink(float* x, int64_t n, float sink);
// gpt-oss's clamped SwiGLU: g' = min(g, limit), u' = clamp(u, -limit, limit),
// y = g' * sigmoid(alpha * g') * (u' + 1). Scalar.
void swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit);

// y[i] = silu(g[i]) * u[i]. y may be g or u.
void swiglu(const float* g, const float* u, float* y, int64_t n);

// As ref::rope (not dispatched: the forward pass uses the two steps below,
// and the dispatched rope_apply equals the reference's bit for bit).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          bool neox);

// rope() in two steps, for callers that rotate many rows at one position:
// the cos/sin table of a position (cs: n_rot floats, cos and sin of each
// pair), then the rotation with it. rope() is exactly the two together.
// freq_factors (n_rot / 2 floats, or null): each pair's angle divided by
// its factor (Llama 3.1 and Llama 4's rope_freqs, as ggml's freq_factors).
void rope_table(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float* cs,
                const float* freq_factors = nullptr);
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, bool neox);
// YaRN's table (ref::rope_table_yarn, once per position like rope_table).
void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);
void rope_table_yarn(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float ext_factor, const float corr[2],
                     float mscale, float* cs, const float* freq_factors = nullptr);


// Float dot product in 8 lanes (the reference's order).
float dot_f32(const float* a, const float* b, int64_t n);

// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);

// y[i] = float(x[i]) * s: int8 values (an int8 KV block) to floats. One
// rounding per element (the conversion is exact): bit-identical everywhere.
void scale_i8(const int8_t* x, float s, float* y, int64_t n);

// Attention of n_q query heads (rows of hd floats, contiguous: the heads that
// share one KV head) over m cached keys (rows of hd floats, contiguous):
// out[h * out_stride + j] = dot_f32(q + h*hd, k + j*hd, hd) * scale.
// Bit-identical to dot_f32 per (head, key).
//
// ask, ask_bytes (both attention kernels): memory the caller reads next (the
// KV cache's next piece), asked for a few cache lines per key while these
// keys are worked on; a hint only, results do not depend on it. Attention
// does little arithmetic per byte, so it has to keep the core's memory
// requests flowing alongside that arithmetic: asking for a whole piece at
// once stalls the core until its line-fill buffers drain, and then memory
// and arithmetic take turns instead of overlapping.
void attn_scores(const float* q, int64_t n_q, const float* k, int64_t m, int64_t hd, float scale, float* out,
                 int64_t out_stride, const void* ask = nullptr, int64_t ask_bytes = 0);

// For each of n_q heads: out[h*hd ..][0..hd) += sum_j p[h * p_stride + j] * v[j*hd ..],
// keys in order, each as one axpy: bit-identical to n_q * m calls of axpy.
void attn_accumulate(const float* p, int64_t p_stride, int64_t n_q, const float* v, int64_t m, int64_t hd,
                     float* out, const void* ask = nullptr, int64_t ask_bytes = 0);

// The router: softmax over n_expert logits in place (logits become the
// probabilities), then the k most probable experts, best first (ties to the
// lower id), among those with allowed[e] != 0 (allowed may be null: all).
// ids[k] = -1 and w[k] = 0 where fewer than k are allowed. w = their
// probabilities (the caller normalises / scales as the architecture says).
void router_topk(float* logits, int64_t n_expert, int64_t k, const uint8_t* allowed, int32_t* ids, float* w);
// ref::router_scored with this CPU's softmax.
void router_scored(float* logits, int64_t n_expert, int64_t k, bool sigmoid, const float* select_bias, int64_t groups,
                   int64_t groups_used, const uint8_t* allowed, float* sel, int32_t* ids, float* w);

}  // namespace strata::kernels::ops
