// Attention over the paged KV cache, decode and prefill alike: one block of
// kWarps warps per (token, query head). Each warp takes every kWarps-th key
// of the token's sequence, its lanes splitting head_dim (so a key row is one
// coalesced read), and keeps an online softmax (running max, sum and the
// weighted sum of values); the warps' partial results are merged at the end.
// ref::attn_scores + softmax + attn_accumulate compute the same thing in
// another order (tests/kernels/test_cuda_kernels compares them).
#include <cfloat>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace strata::kernels::cuda {

using detail::kWarp;

namespace {

constexpr int kWarps = 4;
// Heads of up to 640 dims: MLA's latent rows (DeepSeek-V3, Kimi-K2: 512 + 64
// of RoPE) as well as ordinary heads. The kernel holds a head's query and
// sums in registers, kPerLane values a lane, instantiated for 128, 256 and
// 640 dims so ordinary heads keep their registers.
constexpr int kMaxHeadDim = static_cast<int>(kAttentionMaxHeadDim);

template <int kPerLane>
__global__ void attention_paged_kernel(const float* q, int64_t q_stride, int64_t n_head, int64_t n_head_kv,
                                       int64_t head_dim, const float* k, const float* v, int64_t block_tokens,
                                       int64_t block_stride, int64_t head_stride, const int32_t* tables,
                                       const int32_t* table_offset, const int32_t* n_keys, float scale,
                                       const float* sinks, int64_t window, int64_t chunk, float* out,
                                       int64_t out_stride) {
    const int64_t head = blockIdx.x;
    const int64_t t = blockIdx.y;
    const int lane = threadIdx.x & (kWarp - 1);
    const int warp = threadIdx.x / kWarp;
    const int64_t kv_head = head / (n_head / n_head_kv);
    const float* qh = q + t * q_stride + head * head_dim;
    const int32_t* table = tables + table_offset[t];
    const int64_t keys = n_keys[t];
    int64_t first = window > 0 && keys > window ? keys - window : 0;  // a sliding window's oldest key
    if (chunk > 0 && (keys - 1) / chunk * chunk > first) first = (keys - 1) / chunk * chunk;  // its chunk's first key

    float qv[kPerLane], acc[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int64_t d = lane + i * kWarp;
        qv[i] = d < head_dim ? qh[d] : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -FLT_MAX, l = 0.0f;
    for (int64_t j = first + warp; j < keys; j += kWarps) {
        const int64_t off = static_cast<int64_t>(table[j / block_tokens]) * block_stride + kv_head * head_stride +
                            (j % block_tokens) * head_dim;
        const float* kr = k + off;
        const float* vr = v + off;
        float part = 0.0f;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int64_t d = lane + i * kWarp;
            if (d < head_dim) part += qv[i] * kr[d];
        }
        const float s = detail::warp_sum(part) * scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
            const int64_t d = lane + i * kWarp;
            if (d < head_dim) acc[i] = acc[i] * corr + p * vr[d];
        }
        m = m_new;
    }

    __shared__ float s_m[kWarps], s_l[kWarps];
    __shared__ float s_acc[kWarps][kPerLane * kWarp];
    if (lane == 0) {
        s_m[warp] = m;
        s_l[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
        const int64_t d = lane + i * kWarp;
        if (d < head_dim) s_acc[warp][d] = acc[i];
    }
    __syncthreads();
    float mx = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
    if (sinks) mx = fmaxf(mx, sinks[head]);
    float sum = sinks ? expf(sinks[head] - mx) : 0.0f, f[kWarps];
    for (int w = 0; w < kWarps; ++w) {
        // A warp that saw no key has l = 0: it adds nothing.
        f[w] = s_l[w] > 0.0f ? expf(s_m[w] - mx) : 0.0f;
        sum += s_l[w] * f[w];
    }
    const float inv = 1.0f / sum;
    float* o = out + t * out_stride + head * head_dim;
    for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float x = 0.0f;
        for (int w = 0; w < kWarps; ++w) x += s_acc[w][d] * f[w];
        o[d] = x * inv;
    }
}

}  // namespace

int attention_paged(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
                    int64_t head_dim, const float* k, const float* v, int64_t block_tokens, int64_t block_stride,
                    int64_t head_stride, const int32_t* tables, const int32_t* table_offset, const int32_t* n_keys,
                    float scale, const float* sinks, int64_t window, int64_t chunk, float* out, int64_t out_stride,
                    Stream stream) {
    if (n_tokens <= 0) return 0;
    if (head_dim <= 0 || head_dim > kMaxHeadDim || n_head_kv <= 0 || n_head % n_head_kv != 0 || n_tokens > 65535 ||
        block_tokens <= 0 || window < 0 || chunk < 0)
        return static_cast<int>(cudaErrorInvalidValue);
    const dim3 grid(static_cast<unsigned>(n_head), static_cast<unsigned>(n_tokens));
    const auto launch = [&](auto per_lane) {
        attention_paged_kernel<decltype(per_lane)::value><<<grid, kWarps * kWarp, 0, stream>>>(
            q, q_stride, n_head, n_head_kv, head_dim, k, v, block_tokens, block_stride, head_stride, tables,
            table_offset, n_keys, scale, sinks, window, chunk, out, out_stride);
    };
    if (head_dim <= 4 * kWarp) launch(std::integral_constant<int, 4>{});
    else if (head_dim <= 8 * kWarp) launch(std::integral_constant<int, 8>{});
    else launch(std::integral_constant<int, kMaxHeadDim / kWarp>{});
    return detail::launched();
}

}  // namespace strata::kernels::cuda
