// The CUDA kernels the forward pass runs on a GPU. Like every kernel here
// they take pointers (device pointers), sizes and strides, and nothing of the
// engine; each has a scalar twin in kernels/ref and a test against it
// (tests/kernels/test_cuda_kernels, label gpu). No CUDA header: a stream is
// the runtime's opaque handle, declared here as the runtime declares it.
//
// Every function launches on `stream` and returns 0, or the CUDA error code of
// the launch (cudaGetLastError); error_name()/error_string() say what it
// means. The backend (engine/backend/cuda) turns a non-zero code into a
// strata::Error naming the op.
//
// Activations are F32 rows; weights any core format (QType), decoded element
// by element exactly as the reference decodes them (dequant_elem.h), with F32
// accumulation. GPU results differ from the reference by summation order and
// FMA contraction only, so one relative tolerance holds for every format.
#pragma once

#include <cstdint>

#include "kernels/cuda/dequant_elem.h"

struct CUstream_st;

namespace strata::kernels::cuda {

using Stream = CUstream_st*;  // cudaStream_t; nullptr: the legacy default stream

const char* error_name(int code);
const char* error_string(int code);

// Y[t * y_stride + r] = dot(W row r, X[t * x_stride ..]) for r < rows, t < n.
// W: rows of row_bytes (cols elements of type t, whole blocks).
// One token (n = 1) is the GEMV of decode; small batches read each weight
// once for up to 8 tokens.
int gemm_q(QType t, const void* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
           int64_t n, float* y, int64_t y_stride, Stream stream);

// The grouped expert GEMM (ggml's mul_mat_id): groups g < n_groups, each an
// expert's matrix weights[g] (device pointers to rows x cols of type t) over
// its tokens, rows [offsets[g], offsets[g+1]) of X (gathered, x_stride apart),
// into the same rows of Y (y_stride apart). weights and offsets are device
// arrays; max_group is the largest group's token count (sizes the grid).
int gemm_q_grouped(QType t, const void* const* weights, int64_t row_bytes, int64_t rows, int64_t cols,
                   const float* x, int64_t x_stride, const int32_t* offsets, int64_t n_groups, int64_t max_group,
                   float* y, int64_t y_stride, Stream stream);

// out[i * cols ..] = row ids[i] of W decoded (embedding lookup), i < n.
int get_rows(QType t, const void* w, int64_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
             Stream stream);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   for each of `rows` rows of n
// (w may be null); rows stride apart in x and y.
int rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride, int64_t rows, int64_t n,
             float eps, Stream stream);

// RoPE with a per-token table (ref::rope_table made on the host: n_rot floats,
// cos and sin of each pair): rotates the first n_rot dims of each of n_heads
// heads (head_dim apart) of each of n_tokens rows (row_stride apart).
int rope_apply(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t n_rot,
               const float* cs, bool neox, Stream stream);

// y[i] = silu(g[i]) * u[i]
int swiglu(const float* g, const float* u, float* y, int64_t n, Stream stream);
// y[i] += x[i]
int add(float* y, const float* x, int64_t n, Stream stream);
// y[i] += a * x[i]
int axpy(float a, const float* x, float* y, int64_t n, Stream stream);
// y[dst[i] * cols ..] += w[i] * x[i * cols ..] for i < rows (the weighted
// combine of expert outputs, one row per routed (token, expert)); rows that
// share a dst are added in i order (one thread walks them), so the sum is
// deterministic: call it with the rows sorted by router rank.
int scatter_add_rows(const float* x, const float* w, const int32_t* dst, int64_t rows, int64_t cols, float* y,
                     Stream stream);

// y[r * stride + c] += b[c] for r < rows, c < cols (a projection's bias).
int add_bias(float* y, int64_t stride, const float* b, int64_t rows, int64_t cols, Stream stream);
// y[r * cols ..] += g[r] * x[r * cols ..], g[r] = sigmoid(gate_logits[r]) (1
// when gate_logits is null): the shared expert's gated add.
int gated_add(const float* x, const float* gate_logits, int64_t rows, int64_t cols, float* y, Stream stream);
// y[i] *= silu ? g[i] sigmoid(g[i]) : sigmoid(g[i]) for i < n: ref::gate_mul
// (the delta net's gated norm, an attention head's output gate).
int gate_mul(float* y, const float* g, int64_t n, bool silu, Stream stream);

// --- the gated delta net (linear attention) over a chunk's tokens, in order (a
// sequence's tokens in position order). Token t reads the state at
// state + slot_in[t] * slot_stride + offset (the layer's part; zeros where
// n_keys[t] == 1, its position 0) and writes it after the token at slot_out[t]
// (the same slot: in place; the next one: the state before it is kept, for
// a rewind).
// The causal conv and SiLU of C channels and K taps (w: channel after
// channel, K each): ref::ssm_conv_step per token, out rows of C.
int delta_conv(const float* mixed, int64_t n_tokens, int64_t C, int64_t K, const float* w, float* state, int64_t slot_stride,
               int64_t offset, const int32_t* slot_in, const int32_t* slot_out, const int32_t* n_keys, float* out,
               Stream stream);
// Each token's first `heads` rows of d floats (token_stride apart) L2-normed: ref::l2_norm.
int l2_norm_heads(float* x, int64_t n_tokens, int64_t token_stride, int64_t heads, int64_t d, float eps, Stream stream);
// Per token and value head: alpha <- softplus(alpha + dt_bias) * a, beta <- sigmoid(beta): ref::delta_gates.
int delta_gates(float* alpha, float* beta, const float* dt_bias, const float* a, int64_t n_tokens, int64_t heads,
                Stream stream);
// The gated delta rule: ref::gated_delta_step per token over its q | k | v
// (qkv + t * C; n_k_heads query and key heads, n_v_heads value heads of d,
// d <= 1024), with g and beta from delta_gates; o rows of n_v_heads * d.
int gated_delta(const float* qkv, int64_t n_tokens, int64_t C, int64_t n_k_heads, int64_t n_v_heads, int64_t d,
                const float* g, const float* beta, float* state, int64_t slot_stride, int64_t offset, const int32_t* slot_in,
                const int32_t* slot_out, const int32_t* n_keys, float* o, Stream stream);

// x[r * stride + c] *= f[r] for r < rows, c < cols: ref::scale_rows (a
// query's temperature, an expert's input weighted before its FFN).
int scale_rows(float* x, int64_t stride, const float* f, int64_t rows, int64_t cols, Stream stream);

// Stores n tokens' keys and values (rows of n_head_kv * head_dim, k_stride
// and v_stride apart) into a paged pool: token t's head h goes to
// k_pool + block[t] * block_stride + h * head_stride + slot[t] * head_dim
// (v_pool likewise), the layout attention_paged reads.
int kv_store(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t n, int64_t n_head_kv,
             int64_t head_dim, float* k_pool, float* v_pool, int64_t block_stride, int64_t head_stride,
             const int32_t* block, const int32_t* slot, Stream stream);

// The router: for each of n_tokens rows of n_expert logits (stride apart),
// softmax in place, then the k most probable experts best first (ties to the
// lower id) into ids/w (k per token): ref::router_topk per row.
int router_topk(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k, int32_t* ids, float* w,
                Stream stream);

// Attention over a paged KV cache. K of (block b, kv head h, slot s) is at
// k + b * block_stride + h * head_stride + s * head_dim (V likewise at v),
// blocks of block_tokens positions. Token t (of n_tokens) attends with its
// n_head query heads (q row t, q_stride apart; head j uses kv head
// j / (n_head / n_head_kv)) to keys 0..n_keys[t]-1 of the sequence whose block
// table starts at tables + table_offset[t]:
//   out[t * out_stride + j * head_dim ..] = softmax(q . K * scale) . V
// head_dim at most kAttentionMaxHeadDim (MLA's latent rows of 576 fit). A sliding window (window > 0) keeps the last
// `window` of a token's keys, chunked attention (chunk > 0) those of its own
// chunk of `chunk` positions (from (n_keys[t] - 1) / chunk * chunk); sinks
// (one logit per query head, or null) add exp(sinks[j]) to the softmax's
// denominator, as ops::softmax_sink (gpt-oss).
inline constexpr int64_t kAttentionMaxHeadDim = 640;
int attention_paged(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
                     int64_t head_dim, const float* k, const float* v, int64_t block_tokens, int64_t block_stride,
                     int64_t head_stride, const int32_t* tables, const int32_t* table_offset, const int32_t* n_keys,
                     float scale, const float* sinks, int64_t window, int64_t chunk, float* out, int64_t out_stride,
                     Stream stream);

// DeepSeek-V3's scored router for each of n_tokens rows of n_expert logits
// (stride apart): ref::router_scored per row (no `allowed` mask), the
// probabilities in place; sel: n_tokens * n_expert floats of scratch.
int router_scored(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k, bool sigmoid,
                  const float* select_bias, int64_t groups, int64_t groups_used, float* sel, int32_t* ids, float* w,
                  Stream stream);

// Rows of cols floats (stride apart, cols a multiple of 32) rounded through
// Q8_0 in place, as the reference quantizes activations for the weight types
// of q8_0_activations (ref::round_q8_0 per row), or into y (y_stride apart)
// where y is not null.
int round_q8_0(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride, Stream stream);
// The same through Q8_K (cols a multiple of 256): ref::round_q8_k per row, the
// K-quants' activations (q8_k_activations).
int round_q8_k(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride, Stream stream);
// Rows rounded as the reference rounds the activations of weights of type t
// (round_q8_0 or round_q8_k; 0 and nothing done for the others).
int round_activations(QType t, float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride,
                      Stream stream);
// Whether round_activations rounds for weights of type t.
inline bool rounds_activations(QType t) { return q8_0_activations(t) || q8_k_activations(t); }

// ref::swiglu_oai: gpt-oss's clamped SwiGLU.
int swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit, Stream stream);

// y[r * stride + j] += table[row_table[r] * table_stride + j] for r < rows,
// j < cols: a per-row choice of bias (each routed expert's own).
int add_bias_rows(float* y, int64_t stride, const float* table, int64_t table_stride, const int32_t* row_table,
                  int64_t rows, int64_t cols, Stream stream);

// Multi-head latent attention: ref::mla_absorb_query and ref::mla_value_up.
int mla_absorb_query(const float* q, int64_t n_tokens, int64_t n_head, int64_t key_len, int64_t n_rot,
                     const float* k_up_t, int64_t rank, float* out, Stream stream);
int mla_value_up(const float* o, int64_t n_tokens, int64_t n_head, int64_t row, int64_t rank, const float* v_up,
                 int64_t v_len, float* out, Stream stream);

// Reads n 16-byte words and adds them into *sum (the read-bandwidth probe:
// the device's own roofline for kernel_stream_gbs).
int read_sum(const void* p, int64_t n16, unsigned long long* sum, Stream stream);

}  // namespace strata::kernels::cuda
