// Between the CUDA-on-CPU runtime's API side (runtime.cpp) and its block
// scheduler (scheduler.cpp).
#pragma once

#include <string>

#include "cuda_runtime.h"

namespace cuda_on_cpu {

// What went wrong inside a kernel, as a GPU reports it (a sticky error code)
// plus what the GPU cannot say: where and why.
struct KernelFault {
    cudaError_t code = cudaSuccess;
    std::string message;
};

// Runs every block of the grid, each thread calling body(closure). Returns
// false with *fault filled at the first fault; the rest of the grid is not run.
bool run_grid(const LaunchSite& site, dim3 grid, dim3 block, void (*body)(void*), void* closure, KernelFault* fault);

// Shared memory a block may declare statically (48 KiB on every architecture
// built, without the opt-in attribute the kernels do not use).
constexpr size_t kMaxSharedPerBlock = 48 * 1024;

}  // namespace cuda_on_cpu
