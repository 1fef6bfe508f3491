#include "backend/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "common/error.h"

namespace strata::backend::cuda {

void check(int code, const std::string& what) {
    if (code == 0) return;
    const auto e = static_cast<cudaError_t>(code);
    cudaGetLastError();  // clear a non-sticky error so the engine stays usable after it
    throw Error("CUDA " + what + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

void set_device(int index) { check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")"); }

void memory_info(uint64_t* free_bytes, uint64_t* total_bytes) {
    size_t f = 0, t = 0;
    check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
}

std::string device_name(int index) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties(" + std::to_string(index) + ")");
    return prop.name;
}

// --- allocators ---------------------------------------------------------------

void* device_alloc(uint64_t bytes, const std::string& what) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc of " + memory::format_bytes(bytes) + " for " + what);
    return p;
}

void device_free(void* p) noexcept {
    cudaFree(p);  // an error here (a lost device) leaves nothing to do but forget the pointer
}

void* pinned_alloc(uint64_t bytes, const std::string& what) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
          "cudaHostAlloc of " + memory::format_bytes(bytes) + " pinned host memory for " + what);
    return p;
}

void pinned_free(void* p) noexcept { cudaFreeHost(p); }

// --- streams and events ---------------------------------------------------------

Stream::Stream() {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    s_ = s;
}

Stream::~Stream() {
    if (s_) cudaStreamDestroy(s_);
}

void Stream::synchronize(const char* what) const { check(cudaStreamSynchronize(s_), what); }

void Stream::synchronize_quietly() const noexcept {
    if (cudaStreamSynchronize(s_) != cudaSuccess) cudaGetLastError();
}

Event::Event(bool timing) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreate");
    e_ = e;
}

Event::~Event() {
    if (e_) cudaEventDestroy(e_);
}

void Event::record(const Stream& s) { check(cudaEventRecord(e_, s.get()), "cudaEventRecord"); }
void Event::wait_on(const Stream& s) const { check(cudaStreamWaitEvent(s.get(), e_, 0), "cudaStreamWaitEvent"); }

bool Event::done() const {
    const cudaError_t err = cudaEventQuery(e_);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return false;
    }
    check(err, "cudaEventQuery");
    return true;
}

void Event::synchronize() const { check(cudaEventSynchronize(e_), "cudaEventSynchronize"); }

float Event::ms_since(const Event& start) const {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.e_, e_), "cudaEventElapsedTime");
    return ms;
}

// --- copies -------------------------------------------------------------------------

void copy_to_device(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what) {
    if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.get()), what);
}

void copy_to_host(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what) {
    if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s.get()), what);
}

void copy_on_device(void* dst, const void* src, uint64_t bytes, const Stream& s, const char* what) {
    if (bytes) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.get()), what);
}

void upload(void* dst, const void* src, uint64_t bytes, const char* what) {
    if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), what);
}

void fill_zero(void* dst, uint64_t bytes, const Stream& s, const char* what) {
    if (bytes) check(cudaMemsetAsync(dst, 0, bytes, s.get()), what);
}

double measure_h2d_gbs(uint64_t bytes, int passes) {
    memory::Ledger scratch;  // a probe outside the engine's budgets, freed at once
    PinnedBuffer host(scratch, memory::Account::TransferBuffers, memory::Tier::Slow, bytes);
    DeviceBuffer dev(scratch, memory::Account::TransferBuffers, memory::Tier::Fast, bytes);
    std::fill(host.data(), host.data() + bytes, uint8_t{1});
    Stream s;
    Event a(true), b(true);
    double best = 0;
    for (int i = 0; i < passes; ++i) {
        a.record(s);
        copy_to_device(dev.data(), host.data(), bytes, s, "the host-to-device rate probe");
        b.record(s);
        b.synchronize();
        const double ms = b.ms_since(a);
        if (ms > 0) best = std::max(best, static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
    return best;
}

}  // namespace strata::backend::cuda
