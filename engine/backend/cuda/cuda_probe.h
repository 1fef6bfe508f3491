// The CUDA side of backend/device.h: lists the GPUs through the CUDA runtime.
// cuda_probe.cpp is compiled where the CUDA toolkit exists; cuda_probe_none.cpp
// elsewhere (it says the backend was not built). No CUDA type crosses this header.
#pragma once

#include "backend/device.h"

namespace strata::backend::cuda {

// Never throws: a machine without a driver or a device gets why_none.
DeviceProbe probe();
// backend::measure_link_gbs on this build; never throws (0 on any failure).
double link_gbs(int index);

}  // namespace strata::backend::cuda
