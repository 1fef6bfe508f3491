#include "backend/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>

#include "backend/cuda/cuda_runtime.h"

namespace strata::backend::cuda {

namespace {
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Theoretical VRAM bandwidth: 2 transfers a clock (DDR) x bus width; HBM and
// GDDR report their effective clock this way through the runtime.
double peak_gbs(int device) {
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) return 0;
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}
}  // namespace

DeviceProbe probe() {
    DeviceProbe p;
    p.cuda_built = true;
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    p.runtime = "CUDA runtime " + version_text(runtime) +
                (driver > 0 ? ", driver " + version_text(driver) : std::string(", no NVIDIA driver"));
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess && driver == 0) {
        p.why_none = "no NVIDIA driver is installed (libcuda.so.1 was not found)";
        cudaGetLastError();
        return p;
    }
    if (err != cudaSuccess) {
        p.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
        cudaGetLastError();  // clear the sticky-free error so later calls start clean
        return p;
    }
    if (n == 0) {
        p.why_none = "the driver reports no CUDA device";
        return p;
    }
    int previous = 0;  // the probe visits each device: the caller's current one is restored after
    if (cudaGetDevice(&previous) != cudaSuccess) cudaGetLastError();
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        GpuInfo g;
        g.index = d;
        g.name = prop.name;
        g.total_bytes = prop.totalGlobalMem;
        g.cc_major = prop.major;
        g.cc_minor = prop.minor;
        g.multiprocessors = prop.multiProcessorCount;
        g.memory_gbs = peak_gbs(d);
        char bus[32];
        std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
        g.pci_bus = bus;
        // Free memory needs a context on the device; it is the one the engine would use anyway.
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) g.free_bytes = free_b;
        else cudaGetLastError();
        p.gpus.push_back(g);
    }
    if (cudaSetDevice(previous) != cudaSuccess) cudaGetLastError();
    if (p.gpus.empty()) p.why_none = "no CUDA device answered cudaGetDeviceProperties";
    return p;
}

double link_gbs(int index) {
    try {
        set_device(index);
        return measure_h2d_gbs();
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace strata::backend::cuda
