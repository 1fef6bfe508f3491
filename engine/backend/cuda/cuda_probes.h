// GPU rooflines for bench and the hybrid cost model's GPU rates (cuda_probes.cpp). No CUDA type here.
#pragma once

#include <cstdint>

namespace strata::backend::cuda {

// The device's read bandwidth in GB/s (1e9 bytes/s): a streaming read of
// `bytes`, best of 5 passes. 0 on any failure (logged).
double device_read_gbs(int device, uint64_t bytes = 2ull << 30);
// GB/s of weights that gemm_q streams for one token over `bytes` of rows of
// `cols` elements of raw type `type`, best of 5. 0 on failure or an unknown type.
double device_gemm_gbs(int device, uint32_t type, int64_t cols = 4096, uint64_t bytes = 2ull << 30);
// FLOP/s of gemm_q over `tokens` tokens (compute-bound where decode is not):
// 2 x rows x cols x tokens over the time, best of 5. 0 on failure or an unknown type.
double device_gemm_flops(int device, uint32_t type, int64_t cols = 4096, int64_t tokens = 64,
                         uint64_t bytes = 256ull << 20);

}  // namespace strata::backend::cuda
