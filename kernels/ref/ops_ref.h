// Scalar reference float ops of the forward pass: the ground truth that SIMD
// twins in kernels/cpu are tested against. Pointers and sizes only.
#pragma once

#include <cstdint>

namespace strata::kernels::ref {

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no scaling)
void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// y[i] = silu(g[i]) * u[i]
void swiglu(const float* g, const float* u, float* y, int64_t n);

// Rotates the first n_rot dims of each of n_heads heads (head_dim apart) of one
// token at position pos. neox: pairs (i, i + n_rot/2); otherwise adjacent
// pairs (2i, 2i+1). theta_i = pos * freq_scale * base^(-2i/n_rot).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
          float freq_scale, bool neox);

// rope() in two steps, for callers that rotate many rows at one position:
// the cos/sin table of a position (cs: n_rot floats, cos and sin of each
// pair), then the rotation with it. rope() is exactly the two together.
// freq_factors (n_rot / 2 floats, or null): each pair's angle divided by
// its factor (Llama 3.1 and Llama 4's rope_freqs, as ggml's freq_factors).
void rope_table(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float* cs,
                const float* freq_factors = nullptr);
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, bool neox);
// YaRN (as ggml's rope_yarn): the pairs between the correction dims blend
// interpolated (theta * freq_scale) and extrapolated angles by a linear ramp
// times ext_factor (pairs below dims[0] extrapolate, above dims[1]
// interpolate), and cos/sin are scaled by mscale. ext_factor 0 and mscale 1
// give rope_table's angles (computed the same way).
void rope_yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);
void rope_table_yarn(int64_t n_rot, int64_t pos, float freq_base, float freq_scale, float ext_factor, const float corr[2],
                     float mscale, float* cs, const float* freq_factors = nullptr);


// Float dot product, accumulated in float with 8 independent lanes (the order
// the SIMD twin uses, so both agree to rounding).
float dot_f32(const float* a, const float* b, int64_t n);

// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);
void scale_i8(const int8_t* x, float s, float* y, int64_t n);

// Attention of n_q query heads (rows of hd floats, contiguous: the heads that
// share one KV head) over m cached keys (rows of hd floats, contiguous):
// out[h * out_stride + j] = dot_f32(q + h*hd, k + j*hd, hd) * scale.
// Bit-identical to dot_f32 per (head, key).
// ask, ask_bytes (both attention functions): a prefetch hint for the SIMD
// kernels (kernels/ops.h); the reference ignores it.
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

// DeepSeek-V3's scored router over one token's n_expert logits: the
// probabilities p (in place: a sigmoid of each logit, or the softmax), the
// choice by p + select_bias[e] (select_bias may be null) among the experts of
// the groups_used best of `groups` equal groups (groups <= 1 or groups_used
// >= groups: no groups; a group's score is the sum of its two best, or with
// softmax its best; ties to the lower index), and only experts with
// allowed[e] != 0 (allowed may be null); the k best, best first, ties to the
// lower id, weighted by p itself. ids[k] = -1, w[k] = 0 where fewer are left.
// sel: n_expert floats of scratch. At most 256 groups.
void router_scored(float* logits, int64_t n_expert, int64_t k, bool sigmoid, const float* select_bias, int64_t groups,
                   int64_t groups_used, const uint8_t* allowed, float* sel, int32_t* ids, float* w);

// n floats (a multiple of 32) rounded through Q8_0 in place: what the
// reference's products see of activations quantized to Q8_0.
void round_q8_0(float* x, int64_t n);
// x rounded through Q8_K (n a multiple of 256), as the K-quants' activations.
void round_q8_k(float* x, int64_t n);

// gpt-oss's clamped SwiGLU: y = g' * sigmoid(alpha * g') * (u' + 1) with
// g' = min(g, limit), u' = clamp(u, -limit, limit).
void swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit);

// --- gated delta net (linear attention with a recurrent state; llama.cpp's
// ggml_ssm_conv and ggml_gated_delta_net, one token at a time) ---
// One token through the causal depthwise conv of C channels and K taps, then
// SiLU: y[ch] = silu(sum_i w[ch*K + i] * in_i[ch]) where in_0..in_{K-2} are
// the channel's previous inputs (state[ch*(K-1) ..], oldest first; zeros at
// a sequence's start) and in_{K-1} = x[ch]; the state then shifts x in:
// read from state_in, written to state_out (the same buffer: in place; a
// different one keeps the state before the token, for a rewind).
void ssm_conv_step(const float* x, int64_t C, int64_t K, const float* w, const float* state_in, float* state_out,
                   float* y);
// y = x / max(|x|, eps) (ggml_l2_norm).
void l2_norm(const float* x, float* y, int64_t n, float eps);
// One token of the gated delta rule for value heads [h0, h1) of d dims:
// value head h reads key/query head h % n_k_heads (tiled). Its state S_h
// (d x d, element [i][j] at S + h*d*d + j*d + i) becomes
//   S <- e^{g[h]} S;  delta = beta[h] (v_h - S^T k);  S <- S + k delta^T
// and o_h = S^T q / sqrt(d), S read from S_in and written to S_out (the
// same buffer: in place).
void gated_delta_step(const float* S_in, float* S_out, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, int64_t h0, int64_t h1, int64_t n_k_heads, int64_t d, float* o);

// alpha[h] <- softplus(alpha[h] + dt_bias[h]) * a[h] (ggml's softplus: x
// above 20 as it is), beta[h] <- sigmoid(beta[h]), for h < heads: the delta
// rule's decay (log) and its step.
void delta_gates(float* alpha, float* beta, const float* dt_bias, const float* a, int64_t heads);
// y[i] *= silu ? g[i] sigmoid(g[i]) : sigmoid(g[i]).
void gate_mul(float* y, const float* g, int64_t n, bool silu);

// x[r * stride + c] *= f[r] for r < rows, c < cols (a query's attention
// temperature, an expert's input weighted before its FFN).
void scale_rows(float* x, int64_t stride, const float* f, int64_t rows, int64_t cols);

// Multi-head latent attention's query, per token and head: the no-RoPE part
// of q (key_len - n_rot dims, then n_rot RoPE dims) taken into the latent
// space through the head's k_up_t [rank][key_len - n_rot], then the RoPE part:
//   out[(t * n_head + h) * (rank + n_rot) + l] = dot(k_up_t[h][l], q_nope)  (l < rank)
//   out[... + rank + i] = q_rope[i]
void mla_absorb_query(const float* q, int64_t n_tokens, int64_t n_head, int64_t key_len, int64_t n_rot,
                      const float* k_up_t, int64_t rank, float* out);
// Its values out of the latent space: o rows of `row` floats per (token,
// head), the first `rank` of them latent; v_up [n_head][v_len][rank]:
//   out[t * n_head * v_len + h * v_len + j] = dot(v_up[h][j], o[t, h][0..rank))
void mla_value_up(const float* o, int64_t n_tokens, int64_t n_head, int64_t row, int64_t rank, const float* v_up,
                  int64_t v_len, float* out);

// How a streaming read asks for memory ahead of its loads.
enum class ReadAhead : int {
    None = 0,  // the hardware prefetchers alone
    T0 = 1,    // prefetcht0: into every cache level
    Nta = 2,   // prefetchnta: close to the core, kept out of the outer caches where the CPU allows
};

// The sum (mod 2^64) of n 64-bit words, read in order; with `ahead` other
// than None, each cache line is asked for ahead_bytes before it is read. The
// memory bandwidth probe (core/bandwidth.cpp) times it; the sum only keeps
// the reads from being optimised away, and every implementation returns the
// same sum.
uint64_t read_sum(const uint64_t* p, int64_t n, ReadAhead ahead, int64_t ahead_bytes);

// read_sum of two runs of n words, a and b. The SIMD versions read them at
// once, a cache line of each in turn (two streams per core: on this
// project's test host that read ~4% more than one, and the decode's kernels
// read an expert's gate and up so).
uint64_t read_sum2(const uint64_t* a, const uint64_t* b, int64_t n, ReadAhead ahead, int64_t ahead_bytes);

}  // namespace strata::kernels::ref
