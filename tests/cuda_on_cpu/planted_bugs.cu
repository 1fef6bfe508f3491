// Kernels with one bug each (planted_bugs.h). Compiled through rewrite_cu.cmake
// like kernels/cuda, so the runtime sees them exactly as it sees the product's.
#include <cuda_runtime.h>

#include "planted_bugs.h"

namespace planted {

namespace {

__global__ void divergent_barrier_kernel(float* out) {
    if (threadIdx.x < 32) {
        __syncthreads();  // plant: divergent barrier (then)
    } else {
        __syncthreads();  // plant: divergent barrier (else)
    }
    out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_after_return_kernel(float* out) {
    float v = static_cast<float>(threadIdx.x);
    if (threadIdx.x == 5) return;
    v += __shfl_xor_sync(0xffffffffu, v, 1);  // plant: shuffle after return
    out[threadIdx.x] = v;
}

__global__ void deadlock_kernel(float* out) {
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    __syncthreads();
    out[threadIdx.x] = v;
}

__global__ void store_kernel(float* out) { out[threadIdx.x + blockIdx.y] = 1.0f; }

template <bool kBarrier>
__global__ void block_sum_kernel(const float* x, int n, float* out) {
    __shared__ float partial[8];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = s;
    if (kBarrier) __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < 8; ++w) t += partial[w];  // plant: missing barrier
        *out = t;
    }
}

__global__ void race_between_blocks_kernel(float* out) {
    *out += 1.0f;  // plant: race between blocks
}

__global__ void race_between_warps_kernel(float* out) {
    if ((threadIdx.x & 31) == 0) *out += 1.0f;  // plant: race between warps
}

__global__ void atomic_between_blocks_kernel(float* out) { atomicAdd(out, 1.0f); }

__global__ void read_past_buffer_kernel(const float* x, int n, float* out) {
    out[threadIdx.x] = x[n - 1 + threadIdx.x];  // plant: read past buffer (x[n] for thread 1)
}

__global__ void shared_out_of_bounds_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = 1.0f;  // plant: shared out of bounds
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x % 32];
}

__global__ void copy_kernel(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}

}  // namespace

int divergent_barrier(float* out) {
    divergent_barrier_kernel<<<1, 64>>>(out);
    return cudaGetLastError();
}
int shuffle_after_return(float* out) {
    shuffle_after_return_kernel<<<1, 32>>>(out);
    return cudaGetLastError();
}
int deadlock(float* out) {
    deadlock_kernel<<<1, 32>>>(out);
    return cudaGetLastError();
}
int block_of_2048(float* out) {
    store_kernel<<<1, 2048>>>(out);
    return cudaGetLastError();
}
int grid_y_70000(float* out) {
    store_kernel<<<dim3(1, 70000), 1>>>(out);
    return cudaGetLastError();
}
int missing_barrier(const float* x, int n, float* out) {
    block_sum_kernel<false><<<1, 256>>>(x, n, out);
    return cudaGetLastError();
}
int block_sum(const float* x, int n, float* out) {
    block_sum_kernel<true><<<1, 256>>>(x, n, out);
    return cudaGetLastError();
}
int race_between_blocks(float* out) {
    race_between_blocks_kernel<<<8, 1>>>(out);
    return cudaGetLastError();
}
int race_between_warps(float* out) {
    race_between_warps_kernel<<<1, 64>>>(out);
    return cudaGetLastError();
}
int atomic_between_blocks(float* out) {
    atomic_between_blocks_kernel<<<8, 64>>>(out);
    return cudaGetLastError();
}
int read_past_buffer(const float* x, int n, float* out) {
    read_past_buffer_kernel<<<1, 2>>>(x, n, out);
    return cudaGetLastError();
}
int shared_out_of_bounds(float* out) {
    shared_out_of_bounds_kernel<<<1, 64>>>(out);
    return cudaGetLastError();
}
int copy(const float* x, float* y, int n) {
    copy_kernel<<<2, 32>>>(x, y, n);
    return cudaGetLastError();
}

}  // namespace planted
