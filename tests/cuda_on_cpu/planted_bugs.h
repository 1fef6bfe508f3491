// Kernels with one bug each (planted_bugs.cu), for test_cuda_on_cpu_selfcheck:
// the runtime or a sanitizer must catch every one. Each function launches its
// kernel and returns cudaGetLastError() of the launch. Each bug's line is
// marked with a comment naming it (// plant: <name>), which the test finds.
#pragma once

#include "cuda_runtime_api.h"

namespace planted {

int divergent_barrier(float* out);                  // half the block waits at another __syncthreads
int shuffle_after_return(float* out);               // lane 5 returns before a full-mask shuffle
int deadlock(float* out);                           // half a warp at a shuffle, the rest at a barrier
int block_of_2048(float* out);                      // more threads than a block may have
int grid_y_70000(float* out);                       // gridDim.y over 65535
int missing_barrier(const float* x, int n, float* out);  // a block sum without its first barrier
int block_sum(const float* x, int n, float* out);        // the same, correct
int race_between_blocks(float* out);                // non-atomic += from every block
int race_between_warps(float* out);                 // non-atomic += from each warp of a block
int atomic_between_blocks(float* out);              // the same with atomicAdd: no race
int read_past_buffer(const float* x, int n, float* out);  // reads x[n]
int shared_out_of_bounds(float* out);               // writes s[threadIdx.x] of a 32-element array with 64 threads
int copy(const float* x, float* y, int n);          // y = x (for argument checks)

}  // namespace planted
