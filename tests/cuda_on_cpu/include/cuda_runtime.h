// The CUDA-on-CPU runtime's stand-in for <cuda_runtime.h>: the runtime API
// (cuda_runtime_api.h) and the device dialect the kernels are written in
// (cuda_on_cpu/device.h). A .cu file compiles unchanged as C++ over these once
// tests/cuda_on_cpu/rewrite_cu.cmake has turned its launches and __shared__
// declarations into calls (see tests/cuda_on_cpu/README.md).
#pragma once

#include "cuda_runtime_api.h"
#include "cuda_on_cpu/device.h"
