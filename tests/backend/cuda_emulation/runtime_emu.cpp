// A host emulation of backend/cuda/cuda_runtime.h for tests: "device" memory
// is host memory, streams run everything at once in call order (a legal
// schedule of the real streams, since the forward pass orders its work
// through them), events are always complete. With kernels_emu.cpp it lets
// the CUDA forward pass (engine/backend/cuda/cuda_forward.cpp, compiled
// unchanged) run its whole logic on the CPU: upload, the KV tables, routing,
// grouping, waves, the expert cache and the combine order. Not product code:
// linked into tests only, never beside the real runtime.
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_runtime.h"
#include "common/error.h"

namespace strata::backend::cuda {

namespace {
void* host_alloc(uint64_t bytes) {
    // Zeroed: a test must not depend on what the memory held before.
    void* p = std::calloc(1, bytes);
    if (!p) throw Error("emulated device allocation of " + memory::format_bytes(bytes) + " failed");
    return p;
}
}  // namespace

void check(int code, const std::string& what) {
    if (code != 0) throw Error("CUDA " + what + " failed: emulated error " + std::to_string(code));
}

void set_device(int) {}

void memory_info(uint64_t* free_bytes, uint64_t* total_bytes) {
    if (free_bytes) *free_bytes = 8ull << 30;
    if (total_bytes) *total_bytes = 8ull << 30;
}

std::string device_name(int) { return "host emulation"; }

void* device_alloc(uint64_t bytes, const std::string&) { return host_alloc(bytes); }
void device_free(void* p) noexcept { std::free(p); }
void* pinned_alloc(uint64_t bytes, const std::string&) { return host_alloc(bytes); }
void pinned_free(void* p) noexcept { std::free(p); }

Stream::Stream() = default;
Stream::~Stream() = default;
void Stream::synchronize(const char*) const {}
void Stream::synchronize_quietly() const noexcept {}

Event::Event(bool) {}
Event::~Event() = default;
void Event::record(const Stream&) {}
void Event::wait_on(const Stream&) const {}
bool Event::done() const { return true; }
void Event::synchronize() const {}
float Event::ms_since(const Event&) const { return 0.0f; }

void copy_to_device(void* dst, const void* src, uint64_t bytes, const Stream&, const char*) {
    if (bytes) std::memmove(dst, src, bytes);
}
void copy_to_host(void* dst, const void* src, uint64_t bytes, const Stream&, const char*) {
    if (bytes) std::memmove(dst, src, bytes);
}
void copy_on_device(void* dst, const void* src, uint64_t bytes, const Stream&, const char*) {
    if (bytes) std::memmove(dst, src, bytes);
}
void upload(void* dst, const void* src, uint64_t bytes, const char*) {
    if (bytes) std::memcpy(dst, src, bytes);
}
void fill_zero(void* dst, uint64_t bytes, const Stream&, const char*) {
    if (bytes) std::memset(dst, 0, bytes);
}

double measure_h2d_gbs(uint64_t, int) { return 0.0; }

}  // namespace strata::backend::cuda
