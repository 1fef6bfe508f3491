// Which device computes: the `--device auto|cpu|cuda[:N]` setting, what this
// machine and this build have (GPUs found, or why none), and the choice
// between them. No CUDA header here: the probe lives in backend/cuda and is
// only compiled where nvcc exists; elsewhere it reports "not built".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::backend {

enum class DeviceMode { Auto, Cpu, Cuda };

struct DeviceRequest {
    DeviceMode mode = DeviceMode::Auto;
    int index = 0;  // cuda:N (0 for plain "cuda" and auto)
};

// "auto", "cpu", "cuda" or "cuda:N"; empty when valid, else one line saying what is allowed.
std::string parse_device(const std::string& text, DeviceRequest* out);
std::string device_text(const DeviceRequest& r);

struct GpuInfo {
    int index = 0;
    std::string name;                // "NVIDIA H200"
    uint64_t total_bytes = 0;        // VRAM
    uint64_t free_bytes = 0;         // VRAM free when probed (cudaMemGetInfo)
    int cc_major = 0, cc_minor = 0;  // compute capability
    int multiprocessors = 0;
    double memory_gbs = 0;           // theoretical VRAM bandwidth from the clock and bus width (0: unknown)
    std::string pci_bus;             // "0000:41:00.0"
};

struct DeviceProbe {
    bool cuda_built = false;         // this build has the CUDA backend
    std::string runtime;             // "CUDA runtime 13.0, driver 13.0" (empty: not built)
    std::vector<GpuInfo> gpus;
    std::string why_none;            // when gpus is empty: why (not built, no driver, no device, ...)
};

// What this machine has; probed once per process (the driver's answer does
// not change while we run) and cached. Never throws.
const DeviceProbe& probe_devices();

// The device a setting comes to on this machine. kind Cpu with a reason when
// `auto` finds no usable GPU; an error (non-empty `error`) when cuda[:N] was
// asked for and cannot be had.
struct DeviceChoice {
    DeviceMode kind = DeviceMode::Cpu;  // Cpu or Cuda
    int index = 0;
    std::string reason;                 // one line for the log and About: what was chosen and why
    std::string error;                  // non-empty: the request cannot be met, and what to do
};
DeviceChoice choose_device(const DeviceRequest& r, const DeviceProbe& probe, bool cuda_forward_available);

// The host-to-device rate of GPU `index` over its link (pinned host memory to
// VRAM, 64 MiB copies timed with events, best of 3), in GB/s; 0 where there is
// no such GPU or the build has no CUDA. Takes tens of milliseconds.
double measure_link_gbs(int index);

// GPU `index`'s read bandwidth and what the weight kernel alone streams on
// raw type `type` (rows of 4096), in GB/s, timed on the device (bench's GPU
// roofline). 0 where there is no such GPU or no CUDA build.
double measure_device_read_gbs(int index);
double measure_device_gemm_gbs(int index, uint32_t type);

// One line per GPU: "cuda:0 NVIDIA H200, 139.8 GiB (139.2 GiB free), compute 9.0, 132 SMs".
std::string describe_gpu(const GpuInfo& g);
// The whole probe in a few lines (inspect, plan, About).
std::string describe_probe(const DeviceProbe& p);

// Whether this build can run the forward pass on a GPU (built with the CUDA
// toolkit: backend/cuda/cuda_forward.h).
bool cuda_forward_built();

}  // namespace strata::backend
