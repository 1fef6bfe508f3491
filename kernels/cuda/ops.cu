// The float ops of a layer on the GPU: RMSNorm, RoPE, SwiGLU, adds, the
// weighted combine of expert outputs, the router, and the read probe. Each
// mirrors its kernels/ref twin's arithmetic (ops_ref.cpp) where the order
// matters to the result.
#include <cfloat>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace strata::kernels::cuda {

using detail::kWarp;

namespace {

constexpr int kNormThreads = 256;

__global__ void rms_norm_kernel(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride,
                                int64_t n, float eps) {
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * x_stride;
    float* yr = y + static_cast<int64_t>(blockIdx.x) * y_stride;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
    __shared__ float partial[kNormThreads / kWarp];
    sum = detail::warp_sum(sum);
    if ((threadIdx.x & (kWarp - 1)) == 0) partial[threadIdx.x / kWarp] = sum;
    __syncthreads();
    if (threadIdx.x < kWarp) {
        float s = threadIdx.x < blockDim.x / kWarp ? partial[threadIdx.x] : 0.0f;
        s = detail::warp_sum(s);
        if (threadIdx.x == 0) partial[0] = s;
    }
    __syncthreads();
    // As the reference: 1 / sqrt(mean + eps), computed in double.
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(partial[0]) / static_cast<double>(n) + eps));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
}

__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                            int64_t n_rot, const float* cs, bool neox) {
    const int64_t half = n_rot / 2;
    const int64_t total = n_tokens * n_heads * half;
    for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
         k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t i = k % half;
        const int64_t h = (k / half) % n_heads;
        const int64_t t = k / (half * n_heads);
        const float c = cs[t * n_rot + 2 * i];
        const float s = cs[t * n_rot + 2 * i + 1];
        float* v = x + t * row_stride + h * head_dim;
        const int64_t a = neox ? i : 2 * i;
        const int64_t b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a];
        const float x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

__global__ void swiglu_kernel(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void axpy_kernel(float a, const float* x, float* y, int64_t n, bool plain_add) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = plain_add ? y[i] + x[i] : y[i] + a * x[i];
}

// One thread per column: rows in order, so rows with one destination add up
// in the caller's order (router rank), whatever the grid.
__global__ void scatter_add_rows_kernel(const float* x, const float* w, const int32_t* dst, int64_t rows, int64_t cols,
                                        float* y) {
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
        for (int64_t i = 0; i < rows; ++i) y[static_cast<int64_t>(dst[i]) * cols + c] += w[i] * x[i * cols + c];
}

__global__ void add_bias_kernel(float* y, int64_t stride, const float* b, int64_t rows, int64_t cols) {
    const int64_t total = rows * cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[(i / cols) * stride + i % cols] += b[i % cols];
}

__global__ void gated_add_kernel(const float* x, const float* gate_logits, int64_t rows, int64_t cols, float* y) {
    const int64_t total = rows * cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float g = gate_logits ? 1.0f / (1.0f + expf(-gate_logits[i / cols])) : 1.0f;
        y[i] += g * x[i];
    }
}

__global__ void scale_rows_kernel(float* x, int64_t stride, const float* f, int64_t rows, int64_t cols) {
    const int64_t total = rows * cols;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols;
        x[r * stride + i % cols] *= f[r];
    }
}

__global__ void gate_mul_kernel(float* y, const float* g, int64_t n, bool silu) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float s = 1.0f / (1.0f + expf(-g[i]));
        y[i] *= silu ? g[i] * s : s;
    }
}

// One thread per channel, the tokens in order.
__global__ void delta_conv_kernel(const float* mixed, int64_t n_tokens, int64_t C, int64_t K, const float* w, float* state,
                                  int64_t slot_stride, int64_t offset, const int32_t* slot_in, const int32_t* slot_out,
                                  const int32_t* n_keys, float* out) {
    const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (ch >= C) return;
    const float* wc = w + ch * K;
    for (int64_t t = 0; t < n_tokens; ++t) {
        float* st = state + slot_out[t] * slot_stride + offset + ch * (K - 1);
        const float* src = state + slot_in[t] * slot_stride + offset + ch * (K - 1);
        if (n_keys[t] == 1) {
            for (int64_t i = 0; i < K - 1; ++i) st[i] = 0.0f;
            src = st;
        }
        const float x = mixed[t * C + ch];
        float acc = 0.0f;
        for (int64_t i = 0; i < K - 1; ++i) acc += wc[i] * src[i];
        acc += wc[K - 1] * x;
        for (int64_t i = 0; i + 1 < K - 1; ++i) st[i] = src[i + 1];
        if (K > 1) st[K - 2] = x;
        out[t * C + ch] = acc / (1.0f + expf(-acc));
    }
}

// One warp per row.
__global__ void l2_norm_heads_kernel(float* x, int64_t token_stride, int64_t heads, int64_t d, float eps) {
    const int64_t t = blockIdx.x / heads, h = blockIdx.x % heads;
    float* r = x + t * token_stride + h * d;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += kWarp) sum += r[i] * r[i];
    sum = detail::warp_sum(sum);
    const float scale = 1.0f / fmaxf(sqrtf(sum), eps);
    for (int64_t i = threadIdx.x; i < d; i += kWarp) r[i] *= scale;
}

__global__ void delta_gates_kernel(float* alpha, float* beta, const float* dt_bias, const float* a, int64_t n, int64_t heads) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t h = i % heads;
        const float x = alpha[i] + dt_bias[h];
        alpha[i] = (x > 20.0f ? x : log1pf(expf(x))) * a[h];
        beta[i] = 1.0f / (1.0f + expf(-beta[i]));
    }
}

// One block per value head, one thread per column j of its state (S[., j]
// contiguous), the tokens in order; the head's key and query in shared memory.
constexpr int kMaxDeltaDim = 1024;
__global__ void gated_delta_kernel(const float* qkv, int64_t n_tokens, int64_t C, int64_t n_k_heads, int64_t d,
                                   const float* g, const float* beta, float* state, int64_t slot_stride, int64_t offset,
                                   const int32_t* slot_in, const int32_t* slot_out, const int32_t* n_keys, float* o) {
    __shared__ float ks[kMaxDeltaDim], qs[kMaxDeltaDim];
    const int64_t h = blockIdx.x, H = gridDim.x, j = threadIdx.x;
    const int64_t kh = h % n_k_heads;
    const float qscale = 1.0f / sqrtf(static_cast<float>(d));
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* row = qkv + t * C;
        ks[j] = row[n_k_heads * d + kh * d + j];
        qs[j] = row[kh * d + j];
        __syncthreads();
        float* col = state + slot_out[t] * slot_stride + offset + h * d * d + j * d;
        const float* src = state + slot_in[t] * slot_stride + offset + h * d * d + j * d;
        if (n_keys[t] == 1) {
            for (int64_t i = 0; i < d; ++i) col[i] = 0.0f;
            src = col;
        }
        const float decay = expf(g[t * H + h]);
        float sk = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
            col[i] = src[i] * decay;
            sk += col[i] * ks[i];
        }
        const float delta = beta[t * H + h] * (row[2 * n_k_heads * d + h * d + j] - sk);
        float out = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
            col[i] += ks[i] * delta;
            out += col[i] * qs[i];
        }
        o[t * H * d + h * d + j] = out * qscale;
        __syncthreads();  // before the next token's key and query overwrite these
    }
}

__global__ void kv_store_kernel(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t n,
                                int64_t n_head_kv, int64_t head_dim, float* k_pool, float* v_pool,
                                int64_t block_stride, int64_t head_stride, const int32_t* block, const int32_t* slot) {
    const int64_t kv_dim = n_head_kv * head_dim;
    const int64_t total = n * kv_dim;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = i / kv_dim, e = i % kv_dim, h = e / head_dim, d = e % head_dim;
        const int64_t off = static_cast<int64_t>(block[t]) * block_stride + h * head_stride + slot[t] * head_dim + d;
        k_pool[off] = k[t * k_stride + e];
        v_pool[off] = v[t * v_stride + e];
    }
}

// One thread per token: ref::router_topk (softmax with a double sum, then
// repeated arg-max, ties to the lower id).
__global__ void router_topk_kernel(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k,
                                   int32_t* ids, float* w) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n_tokens) return;
    float* x = logits + t * stride;
    float mx = x[0];
    for (int64_t e = 1; e < n_expert; ++e) mx = x[e] > mx ? x[e] : mx;
    double sum = 0.0;
    for (int64_t e = 0; e < n_expert; ++e) {
        x[e] = expf(x[e] - mx);
        sum += x[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < n_expert; ++e) x[e] *= inv;
    int32_t* id = ids + t * k;
    float* wt = w + t * k;
    for (int64_t r = 0; r < k; ++r) {
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; ++e) {
            bool taken = false;
            for (int64_t j = 0; j < r; ++j) taken |= id[j] == e;
            if (!taken && (best < 0 || x[e] > x[best])) best = e;
        }
        id[r] = best;
        wt[r] = best >= 0 ? x[best] : 0.0f;
    }
}

// One thread per token: ref::router_scored.
__global__ void router_scored_kernel(float* logits, int64_t stride, int64_t n_tokens, int64_t E, int64_t k, bool sigmoid,
                                     const float* select_bias, int64_t groups, int64_t groups_used, float* sel_all,
                                     int32_t* ids, float* w) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= n_tokens) return;
    float* p = logits + t * stride;
    float* sel = sel_all + t * E;
    if (sigmoid) {
        for (int64_t e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else {
        float mx = p[0];
        for (int64_t e = 1; e < E; ++e) mx = p[e] > mx ? p[e] : mx;
        double sum = 0.0;
        for (int64_t e = 0; e < E; ++e) {
            p[e] = expf(p[e] - mx);
            sum += p[e];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t e = 0; e < E; ++e) p[e] *= inv;
    }
    const float kOut = -INFINITY;
    for (int64_t e = 0; e < E; ++e) sel[e] = p[e] + (select_bias ? select_bias[e] : 0.0f);
    if (groups > 1 && groups_used < groups) {
        const int64_t G = groups < 256 ? groups : 256, per = E / groups;
        float score[256];
        bool keep[256];
        for (int64_t g = 0; g < G; ++g) {
            float best = kOut, second = kOut;
            for (int64_t e = g * per; e < (g + 1) * per; ++e) {
                if (sel[e] > best) {
                    second = best;
                    best = sel[e];
                } else if (sel[e] > second) {
                    second = sel[e];
                }
            }
            score[g] = sigmoid ? best + second : best;
            keep[g] = false;
        }
        for (int64_t j = 0; j < groups_used; ++j) {
            int64_t arg = -1;
            for (int64_t g = 0; g < G; ++g)
                if (!keep[g] && (arg < 0 || score[g] > score[arg])) arg = g;
            keep[arg] = true;
        }
        for (int64_t g = 0; g < G; ++g)
            if (!keep[g])
                for (int64_t e = g * per; e < (g + 1) * per; ++e) sel[e] = kOut;
    }
    for (int64_t r = 0; r < k; ++r) {
        int64_t arg = -1;
        for (int64_t e = 0; e < E; ++e)
            if (sel[e] != kOut && (arg < 0 || sel[e] > sel[arg])) arg = e;
        if (arg < 0) {
            ids[t * k + r] = -1;
            w[t * k + r] = 0.0f;
            continue;
        }
        ids[t * k + r] = static_cast<int32_t>(arg);
        w[t * k + r] = p[arg];
        sel[arg] = kOut;
    }
}

// One thread per block of 32: quantize_row_q8_0_ref then dequantize.
__global__ void round_q8_0_kernel(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride) {
    const int64_t per_row = cols / 32;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * per_row;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, b = i % per_row;
        const float* in = x + r * stride + b * 32;
        float* out = (y ? y + r * y_stride : x + r * stride) + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(in[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const float dh = half_bits_to_float(float_to_half_bits(d));
        for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(roundf(in[j] * id))) * dh;
    }
}

// One thread per block of 256: quantize_row_q8_K_ref then dequantize.
__global__ void round_q8_k_kernel(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride) {
    const int64_t per_row = cols / 256;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * per_row;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, b = i % per_row;
        const float* in = x + r * stride + b * 256;
        float* out = (y ? y + r * y_stride : x + r * stride) + b * 256;
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 256; ++j) {
            const float ax = fabsf(in[j]);
            if (ax > amax) {
                amax = ax;
                mx = in[j];
            }
        }
        if (amax == 0.0f) {
            for (int j = 0; j < 256; ++j) out[j] = 0.0f;
            continue;
        }
        const float iscale = -127.0f / mx;
        const float d = 1.0f / iscale;
        for (int j = 0; j < 256; ++j) {
            const int q = static_cast<int>(rintf(iscale * in[j]));  // nearest, ties to even: ggml's nearest_int
            out[j] = static_cast<float>(q < 127 ? q : 127) * d;
        }
    }
}

__global__ void swiglu_oai_kernel(const float* g, const float* u, float* y, int64_t n, float alpha, float limit) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float a = fminf(g[i], limit);
        const float b = fminf(fmaxf(u[i], -limit), limit);
        y[i] = a / (1.0f + expf(-alpha * a)) * (b + 1.0f);
    }
}

__global__ void add_bias_rows_kernel(float* y, int64_t stride, const float* table, int64_t table_stride,
                                     const int32_t* row_table, int64_t rows, int64_t cols) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = i / cols, j = i % cols;
        y[r * stride + j] += table[static_cast<int64_t>(row_table[r]) * table_stride + j];
    }
}

// One thread per output element (token, head, latent dim or RoPE dim).
__global__ void mla_absorb_query_kernel(const float* q, int64_t n_tokens, int64_t n_head, int64_t key_len, int64_t n_rot,
                                        const float* k_up_t, int64_t rank, float* out) {
    const int64_t nope = key_len - n_rot, row = rank + n_rot;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_tokens * n_head * row;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t th = i / row, l = i % row, h = th % n_head;
        const float* qh = q + th * key_len;
        if (l >= rank) {
            out[i] = qh[nope + (l - rank)];
            continue;
        }
        const float* uk = k_up_t + (h * rank + l) * nope;
        float s = 0.0f;
        for (int64_t j = 0; j < nope; ++j) s += uk[j] * qh[j];
        out[i] = s;
    }
}

__global__ void mla_value_up_kernel(const float* o, int64_t n_tokens, int64_t n_head, int64_t row, int64_t rank,
                                    const float* v_up, int64_t v_len, float* out) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_tokens * n_head * v_len;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t th = i / v_len, j = i % v_len, h = th % n_head;
        const float* oh = o + th * row;
        const float* uv = v_up + (h * v_len + j) * rank;
        float s = 0.0f;
        for (int64_t l = 0; l < rank; ++l) s += uv[l] * oh[l];
        out[i] = s;
    }
}

__global__ void read_sum_kernel(const uint4* p, int64_t n, unsigned long long* out) {
    unsigned long long acc = 0;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(p + i);  // streaming: read once, not kept in L2
        acc += static_cast<unsigned long long>(v.x) + v.y + v.z + v.w;
    }
    for (int o = kWarp / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & (kWarp - 1)) == 0) atomicAdd(out, acc);
}

constexpr int kThreads = 256;

}  // namespace

int rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride, int64_t rows, int64_t n,
             float eps, Stream stream) {
    if (rows <= 0) return 0;
    if (rows > INT32_MAX) return static_cast<int>(cudaErrorInvalidValue);
    rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, x_stride, w, y, y_stride, n, eps);
    return detail::launched();
}

int rope_apply(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t n_rot,
               const float* cs, bool neox, Stream stream) {
    const int64_t total = n_tokens * n_heads * (n_rot / 2);
    if (total <= 0) return 0;
    rope_kernel<<<detail::blocks_for(total, kThreads), kThreads, 0, stream>>>(x, n_tokens, row_stride, n_heads, head_dim,
                                                                              n_rot, cs, neox);
    return detail::launched();
}

int swiglu(const float* g, const float* u, float* y, int64_t n, Stream stream) {
    if (n <= 0) return 0;
    swiglu_kernel<<<detail::blocks_for(n, kThreads), kThreads, 0, stream>>>(g, u, y, n);
    return detail::launched();
}

int add(float* y, const float* x, int64_t n, Stream stream) {
    if (n <= 0) return 0;
    axpy_kernel<<<detail::blocks_for(n, kThreads), kThreads, 0, stream>>>(1.0f, x, y, n, true);
    return detail::launched();
}

int axpy(float a, const float* x, float* y, int64_t n, Stream stream) {
    if (n <= 0) return 0;
    axpy_kernel<<<detail::blocks_for(n, kThreads), kThreads, 0, stream>>>(a, x, y, n, false);
    return detail::launched();
}

int scatter_add_rows(const float* x, const float* w, const int32_t* dst, int64_t rows, int64_t cols, float* y,
                     Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    scatter_add_rows_kernel<<<detail::blocks_for(cols, kThreads), kThreads, 0, stream>>>(x, w, dst, rows, cols, y);
    return detail::launched();
}

int add_bias(float* y, int64_t stride, const float* b, int64_t rows, int64_t cols, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    add_bias_kernel<<<detail::blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, stride, b, rows, cols);
    return detail::launched();
}

int gated_add(const float* x, const float* gate_logits, int64_t rows, int64_t cols, float* y, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    gated_add_kernel<<<detail::blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(x, gate_logits, rows, cols, y);
    return detail::launched();
}

int scale_rows(float* x, int64_t stride, const float* f, int64_t rows, int64_t cols, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    if (stride < cols) return static_cast<int>(cudaErrorInvalidValue);
    scale_rows_kernel<<<detail::blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(x, stride, f, rows, cols);
    return detail::launched();
}

int gate_mul(float* y, const float* g, int64_t n, bool silu, Stream stream) {
    if (n <= 0) return 0;
    gate_mul_kernel<<<detail::blocks_for(n, kThreads), kThreads, 0, stream>>>(y, g, n, silu);
    return detail::launched();
}

int delta_conv(const float* mixed, int64_t n_tokens, int64_t C, int64_t K, const float* w, float* state, int64_t slot_stride,
               int64_t offset, const int32_t* slot_in, const int32_t* slot_out, const int32_t* n_keys, float* out,
               Stream stream) {
    if (n_tokens <= 0) return 0;
    if (C <= 0 || K < 1) return static_cast<int>(cudaErrorInvalidValue);
    constexpr int kPerBlock = 128;
    delta_conv_kernel<<<detail::blocks_for(C, kPerBlock, INT32_MAX), kPerBlock, 0, stream>>>(
        mixed, n_tokens, C, K, w, state, slot_stride, offset, slot_in, slot_out, n_keys, out);
    return detail::launched();
}

int l2_norm_heads(float* x, int64_t n_tokens, int64_t token_stride, int64_t heads, int64_t d, float eps, Stream stream) {
    if (n_tokens <= 0 || heads <= 0) return 0;
    l2_norm_heads_kernel<<<static_cast<unsigned>(n_tokens * heads), kWarp, 0, stream>>>(x, token_stride, heads, d, eps);
    return detail::launched();
}

int delta_gates(float* alpha, float* beta, const float* dt_bias, const float* a, int64_t n_tokens, int64_t heads,
                Stream stream) {
    if (n_tokens <= 0 || heads <= 0) return 0;
    delta_gates_kernel<<<detail::blocks_for(n_tokens * heads, kThreads), kThreads, 0, stream>>>(alpha, beta, dt_bias, a,
                                                                                               n_tokens * heads, heads);
    return detail::launched();
}

int gated_delta(const float* qkv, int64_t n_tokens, int64_t C, int64_t n_k_heads, int64_t n_v_heads, int64_t d,
                const float* g, const float* beta, float* state, int64_t slot_stride, int64_t offset, const int32_t* slot_in,
                const int32_t* slot_out, const int32_t* n_keys, float* o, Stream stream) {
    if (n_tokens <= 0) return 0;
    if (d <= 0 || d > kMaxDeltaDim || d % kWarp != 0 || n_k_heads <= 0 || n_v_heads <= 0)
        return static_cast<int>(cudaErrorInvalidValue);
    gated_delta_kernel<<<static_cast<unsigned>(n_v_heads), static_cast<unsigned>(d), 0, stream>>>(
        qkv, n_tokens, C, n_k_heads, d, g, beta, state, slot_stride, offset, slot_in, slot_out, n_keys, o);
    return detail::launched();
}

int kv_store(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t n, int64_t n_head_kv,
             int64_t head_dim, float* k_pool, float* v_pool, int64_t block_stride, int64_t head_stride,
             const int32_t* block, const int32_t* slot, Stream stream) {
    if (n <= 0) return 0;
    kv_store_kernel<<<detail::blocks_for(n * n_head_kv * head_dim, kThreads), kThreads, 0, stream>>>(
        k, k_stride, v, v_stride, n, n_head_kv, head_dim, k_pool, v_pool, block_stride, head_stride, block, slot);
    return detail::launched();
}

int router_topk(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k, int32_t* ids, float* w,
                Stream stream) {
    if (n_tokens <= 0) return 0;
    if (n_expert <= 0 || k <= 0 || k > n_expert) return static_cast<int>(cudaErrorInvalidValue);
    constexpr int kPerBlock = 64;
    router_topk_kernel<<<detail::blocks_for(n_tokens, kPerBlock, INT32_MAX), kPerBlock, 0, stream>>>(
        logits, stride, n_tokens, n_expert, k, ids, w);
    return detail::launched();
}

int router_scored(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k, bool sigmoid,
                  const float* select_bias, int64_t groups, int64_t groups_used, float* sel, int32_t* ids, float* w,
                  Stream stream) {
    if (n_tokens <= 0) return 0;
    if (n_expert <= 0 || k <= 0 || k > n_expert || groups > 256) return static_cast<int>(cudaErrorInvalidValue);
    constexpr int kPerBlock = 64;
    router_scored_kernel<<<detail::blocks_for(n_tokens, kPerBlock, INT32_MAX), kPerBlock, 0, stream>>>(
        logits, stride, n_tokens, n_expert, k, sigmoid, select_bias, groups, groups_used, sel, ids, w);
    return detail::launched();
}

int round_q8_0(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    if (cols % 32 != 0) return static_cast<int>(cudaErrorInvalidValue);
    round_q8_0_kernel<<<detail::blocks_for(rows * (cols / 32), kThreads), kThreads, 0, stream>>>(x, stride, rows, cols, y,
                                                                                               y_stride);
    return detail::launched();
}

int round_q8_k(float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    if (cols % 256 != 0) return static_cast<int>(cudaErrorInvalidValue);
    round_q8_k_kernel<<<detail::blocks_for(rows * (cols / 256), kThreads), kThreads, 0, stream>>>(x, stride, rows, cols, y,
                                                                                                y_stride);
    return detail::launched();
}

int round_activations(QType t, float* x, int64_t stride, int64_t rows, int64_t cols, float* y, int64_t y_stride,
                      Stream stream) {
    if (q8_0_activations(t)) return round_q8_0(x, stride, rows, cols, y, y_stride, stream);
    if (q8_k_activations(t)) return round_q8_k(x, stride, rows, cols, y, y_stride, stream);
    return 0;
}

int swiglu_oai(const float* g, const float* u, float* y, int64_t n, float alpha, float limit, Stream stream) {
    if (n <= 0) return 0;
    swiglu_oai_kernel<<<detail::blocks_for(n, kThreads), kThreads, 0, stream>>>(g, u, y, n, alpha, limit);
    return detail::launched();
}

int add_bias_rows(float* y, int64_t stride, const float* table, int64_t table_stride, const int32_t* row_table,
                  int64_t rows, int64_t cols, Stream stream) {
    if (rows <= 0 || cols <= 0) return 0;
    add_bias_rows_kernel<<<detail::blocks_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, stride, table, table_stride,
                                                                                            row_table, rows, cols);
    return detail::launched();
}

int mla_absorb_query(const float* q, int64_t n_tokens, int64_t n_head, int64_t key_len, int64_t n_rot,
                     const float* k_up_t, int64_t rank, float* out, Stream stream) {
    const int64_t total = n_tokens * n_head * (rank + n_rot);
    if (total <= 0) return 0;
    if (n_rot < 0 || n_rot >= key_len) return static_cast<int>(cudaErrorInvalidValue);
    mla_absorb_query_kernel<<<detail::blocks_for(total, kThreads), kThreads, 0, stream>>>(q, n_tokens, n_head, key_len,
                                                                                         n_rot, k_up_t, rank, out);
    return detail::launched();
}

int mla_value_up(const float* o, int64_t n_tokens, int64_t n_head, int64_t row, int64_t rank, const float* v_up,
                 int64_t v_len, float* out, Stream stream) {
    const int64_t total = n_tokens * n_head * v_len;
    if (total <= 0) return 0;
    if (rank > row) return static_cast<int>(cudaErrorInvalidValue);
    mla_value_up_kernel<<<detail::blocks_for(total, kThreads), kThreads, 0, stream>>>(o, n_tokens, n_head, row, rank, v_up,
                                                                                     v_len, out);
    return detail::launched();
}

int read_sum(const void* p, int64_t n16, unsigned long long* sum, Stream stream) {
    if (n16 <= 0) return 0;
    int device = 0, sms = 1;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    read_sum_kernel<<<static_cast<unsigned>(sms * 8), kThreads, 0, stream>>>(static_cast<const uint4*>(p), n16, sum);
    return detail::launched();
}

}  // namespace strata::kernels::cuda
