// The CUDA side of backend/device.h: lists the GPUs through the CUDA runtime.
// cuda_probe.cpp is compiled where the CUDA toolkit exists; cuda_probe_none.cpp
// elsewhere (it says the backend was not built). No CUDA type crosses this header.
#pragma once

#include "backend/device.h"

namespace strata::backend::cuda {

// Never throws: a machine without a driver or a device gets why_none.
DeviceProbe probe();

}  // namespace strata::backend::cuda
