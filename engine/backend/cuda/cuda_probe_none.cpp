#include "backend/cuda/cuda_probe.h"

namespace strata::backend::cuda {

DeviceProbe probe() {
    DeviceProbe p;
    p.why_none = "this build has no CUDA backend (nvcc was not found when it was configured)";
    return p;
}

double link_gbs(int) { return 0; }

}  // namespace strata::backend::cuda
