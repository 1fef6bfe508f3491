// A host emulation of kernels/cuda/cuda_kernels.h for tests (see
// runtime_emu.cpp): each function computes what its CUDA kernel computes, on
// host memory, in plain loops; weights are decoded with the kernels' own
// per-element decoders (dequant_elem.h). Accumulation order differs from the
// GPU's (as the GPU's differs from the reference): the tests hold it to the
// fixtures' tolerances, not to bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ref/ops_ref.h"

namespace strata::kernels::cuda {

// Test hook (emulation only): when > 0, the n-th gemm_q launch from now fails
// with an emulated error, as a failed launch or a lost device would.
int emulated_gemm_failure_in = 0;

namespace {

constexpr int kInvalid = 1;  // cudaErrorInvalidValue
constexpr int kLaunchFailure = 719;  // cudaErrorLaunchFailure

template <QType T>
float dot_row(const uint8_t* row, const float* x, int64_t cols) {
    float acc = 0.0f;
    for (int64_t j = 0; j < cols; ++j) acc += row_elem<T>(row, j) * x[j];
    return acc;
}

template <class F>
int with_type(QType t, F&& f) {
    switch (t) {
        case QType::F32: return f(std::integral_constant<QType, QType::F32>{});
        case QType::F16: return f(std::integral_constant<QType, QType::F16>{});
        case QType::BF16: return f(std::integral_constant<QType, QType::BF16>{});
        case QType::Q4_0: return f(std::integral_constant<QType, QType::Q4_0>{});
        case QType::Q4_1: return f(std::integral_constant<QType, QType::Q4_1>{});
        case QType::Q5_0: return f(std::integral_constant<QType, QType::Q5_0>{});
        case QType::Q5_1: return f(std::integral_constant<QType, QType::Q5_1>{});
        case QType::Q8_0: return f(std::integral_constant<QType, QType::Q8_0>{});
        case QType::Q2_K: return f(std::integral_constant<QType, QType::Q2_K>{});
        case QType::Q3_K: return f(std::integral_constant<QType, QType::Q3_K>{});
        case QType::Q4_K: return f(std::integral_constant<QType, QType::Q4_K>{});
        case QType::Q5_K: return f(std::integral_constant<QType, QType::Q5_K>{});
        case QType::Q6_K: return f(std::integral_constant<QType, QType::Q6_K>{});
    }
    return kInvalid;
}

}  // namespace

const char* error_name(int code) { return code ? "emulatedError" : "success"; }
const char* error_string(int code) { return code ? "an emulated kernel refused its arguments" : "no error"; }

int gemm_q(QType t, const void* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
           int64_t n, float* y, int64_t y_stride, Stream) {
    if (emulated_gemm_failure_in > 0 && --emulated_gemm_failure_in == 0) return kLaunchFailure;
    return with_type(t, [&](auto tag) {
        const auto* W = static_cast<const uint8_t*>(w);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t r = 0; r < rows; ++r)
                y[i * y_stride + r] = dot_row<decltype(tag)::value>(W + r * row_bytes, x + i * x_stride, cols);
        return 0;
    });
}

int gemm_q_grouped(QType t, const void* const* weights, int64_t row_bytes, int64_t rows, int64_t cols,
                   const float* x, int64_t x_stride, const int32_t* offsets, int64_t n_groups, int64_t max_group,
                   float* y, int64_t y_stride, Stream s) {
    if (n_groups > 65535) return kInvalid;
    for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t a = offsets[g], b = offsets[g + 1];
        if (b - a > max_group) return kInvalid;  // the real grid would not cover them
        if (const int err = gemm_q(t, weights[g], row_bytes, rows, cols, x + a * x_stride, x_stride, b - a,
                                   y + a * y_stride, y_stride, s))
            return err;
    }
    return 0;
}

int get_rows(QType t, const void* w, int64_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
             Stream) {
    return with_type(t, [&](auto tag) {
        const auto* W = static_cast<const uint8_t*>(w);
        // Through a temporary: out may be a row of w (an F32 gather within one buffer never is, but stay safe).
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < cols; ++j) row[static_cast<size_t>(j)] = row_elem<decltype(tag)::value>(W + ids[i] * row_bytes, j);
            std::copy(row.begin(), row.end(), out + i * cols);
        }
        return 0;
    });
}

int rms_norm(const float* x, int64_t x_stride, const float* w, float* y, int64_t y_stride, int64_t rows, int64_t n,
             float eps, Stream) {
    for (int64_t r = 0; r < rows; ++r) ref::rmsnorm(x + r * x_stride, w, y + r * y_stride, n, eps);
    return 0;
}

int rope_apply(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t n_rot,
               const float* cs, bool neox, Stream) {
    for (int64_t t = 0; t < n_tokens; ++t) ref::rope_apply(x + t * row_stride, n_heads, head_dim, n_rot, cs + t * n_rot, neox);
    return 0;
}

int swiglu(const float* g, const float* u, float* y, int64_t n, Stream) {
    ref::swiglu(g, u, y, n);
    return 0;
}

int add(float* y, const float* x, int64_t n, Stream) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
    return 0;
}

int axpy(float a, const float* x, float* y, int64_t n, Stream) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
    return 0;
}

int scatter_add_rows(const float* x, const float* w, const int32_t* dst, int64_t rows, int64_t cols, float* y, Stream) {
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) y[static_cast<int64_t>(dst[i]) * cols + c] += w[i] * x[i * cols + c];
    return 0;
}

int add_bias(float* y, int64_t stride, const float* b, int64_t rows, int64_t cols, Stream) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * stride + c] += b[c];
    return 0;
}

int gated_add(const float* x, const float* gate_logits, int64_t rows, int64_t cols, float* y, Stream) {
    for (int64_t r = 0; r < rows; ++r) {
        const float g = gate_logits ? 1.0f / (1.0f + std::exp(-gate_logits[r])) : 1.0f;
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += g * x[r * cols + c];
    }
    return 0;
}

int kv_store(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t n, int64_t n_head_kv,
             int64_t head_dim, float* k_pool, float* v_pool, int64_t block_stride, int64_t head_stride,
             const int32_t* block, const int32_t* slot, Stream) {
    for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < n_head_kv; ++h)
            for (int64_t d = 0; d < head_dim; ++d) {
                const int64_t off = static_cast<int64_t>(block[t]) * block_stride + h * head_stride + slot[t] * head_dim + d;
                k_pool[off] = k[t * k_stride + h * head_dim + d];
                v_pool[off] = v[t * v_stride + h * head_dim + d];
            }
    return 0;
}

int router_topk(float* logits, int64_t stride, int64_t n_tokens, int64_t n_expert, int64_t k, int32_t* ids, float* w,
                Stream) {
    if (n_expert <= 0 || k <= 0 || k > n_expert) return kInvalid;
    for (int64_t t = 0; t < n_tokens; ++t) ref::router_topk(logits + t * stride, n_expert, k, nullptr, ids + t * k, w + t * k);
    return 0;
}

int attention_paged(const float* q, int64_t q_stride, int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
                    int64_t head_dim, const float* k, const float* v, int64_t block_tokens, int64_t block_stride,
                    int64_t head_stride, const int32_t* tables, const int32_t* table_offset, const int32_t* n_keys,
                    float scale, float* out, int64_t out_stride, Stream) {
    if (head_dim <= 0 || head_dim > 256 || n_head_kv <= 0 || n_head % n_head_kv != 0 || block_tokens <= 0) return kInvalid;
    std::vector<float> s;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t m = n_keys[t];
        s.resize(static_cast<size_t>(m));
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t g = h / (n_head / n_head_kv);
            const float* qh = q + t * q_stride + h * head_dim;
            auto at = [&](int64_t j) {
                return static_cast<int64_t>(tables[table_offset[t] + j / block_tokens]) * block_stride + g * head_stride +
                       (j % block_tokens) * head_dim;
            };
            for (int64_t j = 0; j < m; ++j) s[static_cast<size_t>(j)] = ref::dot_f32(qh, k + at(j), head_dim) * scale;
            ref::softmax(s.data(), m);
            float* o = out + t * out_stride + h * head_dim;
            std::fill(o, o + head_dim, 0.0f);
            for (int64_t j = 0; j < m; ++j) ref::axpy(s[static_cast<size_t>(j)], v + at(j), o, head_dim);
        }
    }
    return 0;
}

int read_sum(const void* p, int64_t n16, unsigned long long* sum, Stream) {
    const auto* w = static_cast<const uint32_t*>(p);
    for (int64_t i = 0; i < 4 * n16; ++i) *sum += w[i];
    return 0;
}

}  // namespace strata::kernels::cuda
