#include "backend/device.h"

#include <cstdio>
#include <mutex>

#include "backend/cuda/cuda_probe.h"
#ifdef STRATA_HAVE_CUDA
#include "backend/cuda/cuda_probes.h"
#endif

namespace strata::backend {

namespace {
std::string gib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
    return buf;
}
}  // namespace

std::string parse_device(const std::string& text, DeviceRequest* out) {
    DeviceRequest r;
    if (text == "auto") {
        r.mode = DeviceMode::Auto;
    } else if (text == "cpu") {
        r.mode = DeviceMode::Cpu;
    } else if (text == "cuda") {
        r.mode = DeviceMode::Cuda;
    } else if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8 &&
               text.find_first_not_of("0123456789", 5) == std::string::npos) {
        r.mode = DeviceMode::Cuda;
        r.index = std::stoi(text.substr(5));
    } else {
        return "device '" + text + "' is unknown (use auto, cpu, cuda or cuda:N with N the GPU's index)";
    }
    if (out) *out = r;
    return {};
}

std::string device_text(const DeviceRequest& r) {
    switch (r.mode) {
        case DeviceMode::Auto: return "auto";
        case DeviceMode::Cpu: return "cpu";
        case DeviceMode::Cuda: return "cuda:" + std::to_string(r.index);
    }
    return "auto";
}

const DeviceProbe& probe_devices() {
    static std::once_flag once;
    static DeviceProbe probe;
    std::call_once(once, [] { probe = cuda::probe(); });
    return probe;
}

bool cuda_forward_built() {
#ifdef STRATA_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

#ifdef STRATA_HAVE_CUDA
namespace {
bool has_gpu(int index) {
    for (const GpuInfo& g : probe_devices().gpus)
        if (g.index == index) return true;
    return false;
}
}  // namespace
#endif

double measure_device_read_gbs(int index) {
#ifdef STRATA_HAVE_CUDA
    if (has_gpu(index)) return cuda::device_read_gbs(index);
#endif
    (void)index;
    return 0;
}

double measure_device_gemm_gbs(int index, uint32_t type) {
#ifdef STRATA_HAVE_CUDA
    if (has_gpu(index)) return cuda::device_gemm_gbs(index, type);
#endif
    (void)index;
    (void)type;
    return 0;
}

double measure_link_gbs(int index) {
    for (const GpuInfo& g : probe_devices().gpus)
        if (g.index == index) return cuda::link_gbs(index);
    return 0;
}

DeviceChoice choose_device(const DeviceRequest& r, const DeviceProbe& probe, bool cuda_forward_available) {
    DeviceChoice c;
    if (r.mode == DeviceMode::Cpu) {
        c.reason = "device cpu (asked for)";
        return c;
    }
    const GpuInfo* gpu = nullptr;
    for (const GpuInfo& g : probe.gpus)
        if (g.index == r.index) gpu = &g;
    std::string why;
    if (probe.gpus.empty()) why = probe.why_none;
    else if (!gpu) why = "there is no GPU cuda:" + std::to_string(r.index) + " (found " + std::to_string(probe.gpus.size()) +
                         ": cuda:0.." + "cuda:" + std::to_string(probe.gpus.size() - 1) + ")";
    else if (!cuda_forward_available)
        why = "found " + gpu->name + ", but this version computes on the CPU only: the CUDA forward pass is not written yet";
    if (why.empty()) {
        c.kind = DeviceMode::Cuda;
        c.index = r.index;
        c.reason = "device " + device_text({DeviceMode::Cuda, r.index}) + ": " + describe_gpu(*gpu);
        return c;
    }
    if (r.mode == DeviceMode::Cuda) {
        c.error = "device " + device_text(r) + " cannot be used: " + why + "; use --device cpu (or auto)";
        return c;
    }
    c.reason = "device auto: the CPU, because " + why;
    return c;
}

std::string describe_gpu(const GpuInfo& g) {
    char buf[320];
    std::snprintf(buf, sizeof buf, "cuda:%d %s, %s VRAM (%s free), compute %d.%d, %d SMs", g.index, g.name.c_str(),
                  gib(g.total_bytes).c_str(), gib(g.free_bytes).c_str(), g.cc_major, g.cc_minor, g.multiprocessors);
    std::string s = buf;
    if (g.memory_gbs > 0) {
        std::snprintf(buf, sizeof buf, ", ~%.0f GB/s", g.memory_gbs);
        s += buf;
    }
    return s;
}

std::string describe_probe(const DeviceProbe& p) {
    std::string s = p.cuda_built ? "CUDA backend built (" + p.runtime + ")" : std::string("CUDA backend not built");
    if (p.gpus.empty()) return s + "; no GPU: " + p.why_none;
    for (const GpuInfo& g : p.gpus) s += "\n  " + describe_gpu(g);
    return s;
}

}  // namespace strata::backend
