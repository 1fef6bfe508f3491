// Weight products: the GEMV of decode, small batches, the grouped expert GEMM
// and embedding rows. One warp per weight row: its lanes walk the row's
// elements 32 apart (adjacent lanes read adjacent bytes, so a warp's loads of
// a block coalesce), decode each weight once and multiply it into up to
// kTokens tokens' accumulators, then reduce across the warp.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace strata::kernels::cuda {

using detail::kWarp;

namespace {

constexpr int kRowsPerBlock = 4;  // warps per block, one row each
constexpr int kTokens = 8;        // tokens per pass over a row

// Row r of W (row bytes at `row`) times tokens [t0, t0 + nt) of X into Y.
// Every lane of the warp calls it with the same r, t0 and nt.
template <QType T>
__device__ __forceinline__ void row_times_tokens(const uint8_t* row, int64_t r, int64_t cols, const float* x,
                                                 int64_t x_stride, int64_t t0, int nt, float* y, int64_t y_stride) {
    const int lane = threadIdx.x & (kWarp - 1);
    float acc[kTokens];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
    for (int64_t j = lane; j < cols; j += kWarp) {
        const float wj = row_elem<T>(row, j);
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
            if (t < nt) acc[t] += wj * x[(t0 + t) * x_stride + j];
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
        if (t < nt) {
            const float s = detail::warp_sum(acc[t]);
            if (lane == 0) y[(t0 + t) * y_stride + r] = s;
        }
    }
}

template <QType T>
__global__ void gemm_q_kernel(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x,
                              int64_t x_stride, int64_t n, float* y, int64_t y_stride) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x / kWarp);
    if (r >= rows) return;  // the whole warp: r is per warp
    for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens; t0 < n; t0 += static_cast<int64_t>(gridDim.y) * kTokens) {
        const int nt = static_cast<int>(n - t0 < kTokens ? n - t0 : kTokens);
        row_times_tokens<T>(w + r * row_bytes, r, cols, x, x_stride, t0, nt, y, y_stride);
    }
}

template <QType T>
__global__ void gemm_q_grouped_kernel(const void* const* weights, int64_t row_bytes, int64_t rows, int64_t cols,
                                      const float* x, int64_t x_stride, const int32_t* offsets, float* y,
                                      int64_t y_stride) {
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x / kWarp);
    const int g = static_cast<int>(blockIdx.z);
    const int64_t end = offsets[g + 1];
    if (r >= rows) return;
    const uint8_t* row = static_cast<const uint8_t*>(weights[g]) + r * row_bytes;
    for (int64_t t0 = offsets[g] + static_cast<int64_t>(blockIdx.y) * kTokens; t0 < end;
         t0 += static_cast<int64_t>(gridDim.y) * kTokens) {
        const int nt = static_cast<int>(end - t0 < kTokens ? end - t0 : kTokens);
        row_times_tokens<T>(row, r, cols, x, x_stride, t0, nt, y, y_stride);
    }
}

template <QType T>
__global__ void get_rows_kernel(const uint8_t* w, int64_t row_bytes, int64_t cols, const int32_t* ids, float* out) {
    const int64_t i = blockIdx.x;
    const uint8_t* row = w + static_cast<int64_t>(ids[i]) * row_bytes;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[i * cols + j] = row_elem<T>(row, j);
}

}  // namespace

const char* error_name(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }
const char* error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int gemm_q(QType t, const void* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t x_stride,
           int64_t n, float* y, int64_t y_stride, Stream stream) {
    if (rows <= 0 || n <= 0) return 0;
    const dim3 grid(detail::blocks_for(rows, kRowsPerBlock, INT32_MAX), detail::blocks_for(n, kTokens));
    return detail::with_type(t, [&](auto tag) {
        gemm_q_kernel<decltype(tag)::value><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(
            static_cast<const uint8_t*>(w), row_bytes, rows, cols, x, x_stride, n, y, y_stride);
        return detail::launched();
    });
}

int gemm_q_grouped(QType t, const void* const* weights, int64_t row_bytes, int64_t rows, int64_t cols,
                   const float* x, int64_t x_stride, const int32_t* offsets, int64_t n_groups, int64_t max_group,
                   float* y, int64_t y_stride, Stream stream) {
    if (rows <= 0 || n_groups <= 0 || max_group <= 0) return 0;
    if (n_groups > 65535) return static_cast<int>(cudaErrorInvalidValue);
    const dim3 grid(detail::blocks_for(rows, kRowsPerBlock, INT32_MAX), detail::blocks_for(max_group, kTokens),
                    static_cast<unsigned>(n_groups));
    return detail::with_type(t, [&](auto tag) {
        gemm_q_grouped_kernel<decltype(tag)::value><<<grid, kRowsPerBlock * kWarp, 0, stream>>>(
            weights, row_bytes, rows, cols, x, x_stride, offsets, y, y_stride);
        return detail::launched();
    });
}

int get_rows(QType t, const void* w, int64_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
             Stream stream) {
    if (n <= 0) return 0;
    if (n > INT32_MAX) return static_cast<int>(cudaErrorInvalidValue);
    return detail::with_type(t, [&](auto tag) {
        get_rows_kernel<decltype(tag)::value><<<static_cast<unsigned>(n), 256, 0, stream>>>(
            static_cast<const uint8_t*>(w), row_bytes, cols, ids, out);
        return detail::launched();
    });
}

}  // namespace strata::kernels::cuda
