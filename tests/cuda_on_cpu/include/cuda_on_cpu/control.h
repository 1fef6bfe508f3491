// What tests ask of the CUDA-on-CPU runtime beyond the CUDA API.
#pragma once

#include <cstdint>
#include <string>

#include "cuda_runtime_api.h"

namespace cuda_on_cpu {

// The last kernel fault's message ("" when none since clear_fault): the
// kernel, its launch line, the block and thread, and what went wrong with
// the source lines involved. The fault's code is sticky, as on a GPU: every
// later call returns it until clear_fault().
std::string last_fault();
// Forgets the sticky fault and the last error (allocations stay).
void clear_fault();

// The n-th kernel launch from now (1: the next) fails with `code` without
// running, as a launch refused by the driver (not sticky). 0 cancels.
void fail_launch_in(int n, cudaError_t code = cudaErrorLaunchFailure);

struct Counters {
    uint64_t launches = 0;  // kernels run
    uint64_t blocks = 0;
    uint64_t threads = 0;
};
Counters counters();

// Bytes and count of live device (cudaMalloc) allocations.
uint64_t device_bytes_in_use();
int device_allocations();

}  // namespace cuda_on_cpu
