// Shared pieces of the .cu files: warp reductions, launch checks, and the
// dispatch from a runtime weight type to a kernel instantiated for it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/dequant_elem.h"

namespace strata::kernels::cuda::detail {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// After a launch: its configuration error, if any (a kernel's own faults
// surface at the next synchronising call, which the backend checks).
inline int launched() { return static_cast<int>(cudaGetLastError()); }

// Blocks for n items of `per_block` each, capped for grid-stride loops.
inline unsigned blocks_for(int64_t n, int per_block, int64_t cap = 65535) {
    int64_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    return static_cast<unsigned>(b < cap ? b : cap);
}

template <QType T>
using TypeTag = std::integral_constant<QType, T>;

// Calls f(TypeTag<t>{}) for a known type; cudaErrorInvalidValue otherwise.
template <class F>
int with_type(QType t, F&& f) {
    switch (t) {
        case QType::F32: return f(TypeTag<QType::F32>{});
        case QType::F16: return f(TypeTag<QType::F16>{});
        case QType::BF16: return f(TypeTag<QType::BF16>{});
        case QType::Q4_0: return f(TypeTag<QType::Q4_0>{});
        case QType::Q4_1: return f(TypeTag<QType::Q4_1>{});
        case QType::Q5_0: return f(TypeTag<QType::Q5_0>{});
        case QType::Q5_1: return f(TypeTag<QType::Q5_1>{});
        case QType::Q8_0: return f(TypeTag<QType::Q8_0>{});
        case QType::Q2_K: return f(TypeTag<QType::Q2_K>{});
        case QType::Q3_K: return f(TypeTag<QType::Q3_K>{});
        case QType::Q4_K: return f(TypeTag<QType::Q4_K>{});
        case QType::Q5_K: return f(TypeTag<QType::Q5_K>{});
        case QType::Q6_K: return f(TypeTag<QType::Q6_K>{});
        case QType::MXFP4: return f(TypeTag<QType::MXFP4>{});
    }
    return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace strata::kernels::cuda::detail
