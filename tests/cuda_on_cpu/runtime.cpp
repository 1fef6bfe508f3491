// The CUDA runtime API on the CPU: device memory is host memory that the
// runtime keeps a list of, so copies and kernel arguments can be checked
// against the allocations they touch; streams execute at once, in call order
// (a legal schedule of any stream program); events record host time. Launch
// configurations are checked as the driver checks them, then the grid runs on
// fibers (scheduler.cpp). Every call is serialised: one host thread at a time.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_on_cpu/control.h"
#include "runtime_internal.h"

struct CUstream_st {
    unsigned flags;
};
struct CUevent_st {
    unsigned flags;
    bool recorded;
    std::chrono::steady_clock::time_point at;
};

namespace cuda_on_cpu {

namespace {

enum class Memory { Device, Pinned };

struct Allocation {
    size_t bytes;
    Memory kind;
};

constexpr size_t kDeviceMemory = size_t{8} << 30;  // what cudaMemGetInfo reports as total
constexpr int kMultiprocessors = 4;                // small grids for "one block per SM" kernels

struct State {
    std::recursive_mutex mutex;
    std::map<uintptr_t, Allocation> allocations;  // by base address
    std::set<CUstream_st*> streams;
    std::set<CUevent_st*> events;
    size_t device_bytes = 0;
    cudaError_t last_error = cudaSuccess;  // non-sticky: cleared by cudaGetLastError
    cudaError_t sticky = cudaSuccess;      // a kernel fault: every call returns it
    std::string fault;
    int fail_in = 0;
    cudaError_t fail_code = cudaErrorLaunchFailure;
    Counters counters;
};

State& state() {
    static State* s = new State;  // never destroyed: fibers' thread_local teardown may still ask
    return *s;
}

cudaError_t error(State& s, cudaError_t e) {
    if (e != cudaSuccess) s.last_error = e;
    return e;
}

void say(const std::string& line) { std::fprintf(stderr, "cuda_on_cpu: %s\n", line.c_str()); }

std::string hex(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

// The allocation holding [p, p + bytes), or null.
const Allocation* find(State& s, const void* p, size_t bytes, uintptr_t* base = nullptr) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = s.allocations.upper_bound(a);
    if (it == s.allocations.begin()) return nullptr;
    --it;
    if (a < it->first || a - it->first + bytes > it->second.bytes) return nullptr;
    if (base) *base = it->first;
    return &it->second;
}

// Why [p, p + bytes) is not device-accessible memory ("" when it is).
std::string not_device_memory(State& s, const void* p, size_t bytes) {
    if (find(s, p, bytes)) return "";
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = s.allocations.upper_bound(a);
    if (it != s.allocations.begin()) {
        --it;
        if (a >= it->first && a < it->first + it->second.bytes)
            return hex(p) + " + " + std::to_string(bytes) + " bytes runs past the end of its allocation (" +
                   std::to_string(it->second.bytes) + " bytes at " + hex(reinterpret_cast<void*>(it->first)) + ", " +
                   std::to_string(a - it->first) + " bytes in)";
        if (a == it->first + it->second.bytes)
            return hex(p) + " is not in any device allocation (it is just past the end of the " +
                   std::to_string(it->second.bytes) + "-byte allocation at " + hex(reinterpret_cast<void*>(it->first)) +
                   ")";
    }
    return hex(p) + " is not in any device allocation (host memory, or freed)";
}

void* allocate(State& s, size_t bytes, Memory kind) {
    void* p = nullptr;
    // 256-byte aligned as cudaMalloc's, exactly `bytes` long so ASan sees an overrun.
    if (posix_memalign(&p, 256, std::max<size_t>(bytes, 1)) != 0) return nullptr;
    if (kind == Memory::Device) std::memset(p, 0xFF, bytes);  // like VRAM: not zero, and NaN as floats
    s.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, kind};
    if (kind == Memory::Device) s.device_bytes += bytes;
    return p;
}

cudaError_t release(State& s, void* p, Memory kind) {
    if (!p) return cudaSuccess;
    auto it = s.allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == s.allocations.end() || it->second.kind != kind) {
        say(std::string(kind == Memory::Device ? "cudaFree" : "cudaFreeHost") + " of " + hex(p) +
            ", which is not the start of a live " + (kind == Memory::Device ? "cudaMalloc" : "cudaHostAlloc") +
            " allocation");
        return error(s, cudaErrorInvalidValue);
    }
    if (kind == Memory::Device) s.device_bytes -= it->second.bytes;
    s.allocations.erase(it);
    std::free(p);
    return cudaSuccess;
}

bool stream_ok(State& s, cudaStream_t st) { return st == nullptr || s.streams.count(st) != 0; }

cudaError_t copy(State& s, void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t st,
                 const char* api) {
    if (s.sticky) return error(s, s.sticky);
    if (!stream_ok(s, st)) return error(s, cudaErrorInvalidResourceHandle);
    if (n == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault) {
        const bool from_device = find(s, src, n) != nullptr, to_device = find(s, dst, n) != nullptr;
        kind = from_device ? (to_device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                           : (to_device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    }
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    std::string why;
    if (dst_dev) why = not_device_memory(s, dst, n);
    if (why.empty() && src_dev) why = not_device_memory(s, src, n);
    if (!why.empty()) {
        say(std::string(api) + " of " + std::to_string(n) + " bytes: " + why);
        return error(s, cudaErrorInvalidValue);
    }
    std::memmove(dst, src, n);
    return cudaSuccess;
}

// "a, b, f(c, d)" -> {"a", "b", "f(c, d)"}
std::vector<std::string> split_arguments(const char* text) {
    std::vector<std::string> out(1);
    int depth = 0;
    for (const char* c = text; *c; ++c) {
        if (*c == '(' || *c == '[' || *c == '{') ++depth;
        if (*c == ')' || *c == ']' || *c == '}') --depth;
        if (*c == ',' && depth == 0) {
            out.emplace_back();
            continue;
        }
        out.back() += *c;
    }
    for (std::string& a : out) {
        const auto b = a.find_first_not_of(" \t\r\n"), e = a.find_last_not_of(" \t\r\n");
        a = b == std::string::npos ? "" : a.substr(b, e - b + 1);
    }
    return out;
}

// The driver's limits (compute capability 8.x-9.x): cudaErrorInvalidConfiguration.
std::string bad_configuration(dim3 grid, dim3 block) {
    if (block.x == 0 || block.y == 0 || block.z == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return "a zero grid or block dimension";
    if (block.x > 1024 || block.y > 1024 || block.z > 64) return "a block dimension over (1024, 1024, 64)";
    if (uint64_t{block.x} * block.y * block.z > 1024) return "more than 1024 threads in a block";
    if (grid.x > static_cast<unsigned>(INT_MAX) || grid.y > 65535 || grid.z > 65535)
        return "a grid dimension over (2^31 - 1, 65535, 65535)";
    return "";
}

}  // namespace

void launch(const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            const char* arg_text, const PointerArg* args, int n_args, void (*body)(void*), void* closure) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.sticky) {
        error(s, s.sticky);
        return;
    }
    if (s.fail_in > 0 && --s.fail_in == 0) {
        error(s, s.fail_code);
        return;
    }
    const char* slash = std::strrchr(site.file, '/');
    const std::string at = "kernel " + std::string(site.kernel) + " launched at " + (slash ? slash + 1 : site.file) +
                           ":" + std::to_string(site.line);
    if (const std::string why = bad_configuration(grid, block); !why.empty()) {
        say(at + ": grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," + std::to_string(grid.z) +
            ") block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," + std::to_string(block.z) +
            "): " + why);
        error(s, cudaErrorInvalidConfiguration);
        return;
    }
    if (shared_bytes > kMaxSharedPerBlock) {
        say(at + ": " + std::to_string(shared_bytes) + " bytes of dynamic shared memory, over the 48 KiB limit");
        error(s, cudaErrorInvalidValue);
        return;
    }
    if (!stream_ok(s, stream)) {
        error(s, cudaErrorInvalidResourceHandle);
        return;
    }
    // Pointer arguments: into device memory, one element at least, aligned.
    const std::vector<std::string> names = split_arguments(arg_text);
    for (int i = 0; i < n_args; ++i) {
        const PointerArg& a = args[i];
        if (!a.is_pointer || a.p == nullptr) continue;
        const std::string arg = "argument " + std::to_string(i + 1) +
                                (static_cast<size_t>(i) < names.size() ? " '" + names[static_cast<size_t>(i)] + "'" : "");
        std::string why;
        cudaError_t code = cudaErrorIllegalAddress;
        if (reinterpret_cast<uintptr_t>(a.p) % a.align != 0) {
            why = hex(a.p) + " is not aligned to " + std::to_string(a.align) + " bytes";
            code = cudaErrorMisalignedAddress;
        } else {
            why = not_device_memory(s, a.p, a.elem_bytes);
        }
        if (!why.empty()) {
            s.sticky = code;
            s.fault = at + ": " + arg + ": " + why;
            say(s.fault);
            error(s, code);
            return;
        }
    }
    KernelFault fault;
    ++s.counters.launches;
    s.counters.blocks += uint64_t{grid.x} * grid.y * grid.z;
    s.counters.threads += uint64_t{grid.x} * grid.y * grid.z * block.x * block.y * block.z;
    if (!run_grid(site, grid, block, body, closure, &fault)) {
        s.sticky = fault.code;
        s.fault = fault.message;
        say(s.fault);
        error(s, fault.code);
    }
}

std::string last_fault() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return s.fault;
}

void clear_fault() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.sticky = cudaSuccess;
    s.last_error = cudaSuccess;
    s.fault.clear();
}

void fail_launch_in(int n, cudaError_t code) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.fail_in = n;
    s.fail_code = code;
}

Counters counters() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return s.counters;
}

uint64_t device_bytes_in_use() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return s.device_bytes;
}

int device_allocations() {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return static_cast<int>(std::count_if(s.allocations.begin(), s.allocations.end(),
                                          [](const auto& a) { return a.second.kind == Memory::Device; }));
}

}  // namespace cuda_on_cpu

using cuda_on_cpu::State;
using cuda_on_cpu::state;

namespace {
struct Locked {
    State& s = state();
    std::lock_guard<std::recursive_mutex> lock{s.mutex};
    cudaError_t ret(cudaError_t e) { return cuda_on_cpu::error(s, e); }
    // After a kernel fault every call returns it, as on a GPU.
    bool sticky() const { return s.sticky != cudaSuccess; }
};
}  // namespace

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInitializationError: return "cudaErrorInitializationError";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
        case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
        case cudaErrorAssert: return "cudaErrorAssert";
        case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
        case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorUnknown: return "cudaErrorUnknown";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInitializationError: return "initialization error";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
        case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
        case cudaErrorAssert: return "device-side assert triggered";
        case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
        case cudaErrorMisalignedAddress: return "misaligned address";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
        case cudaErrorUnknown: return "unknown error";
    }
    return "unknown error";
}

cudaError_t cudaGetLastError() {
    Locked l;
    const cudaError_t e = l.s.last_error;
    l.s.last_error = l.s.sticky;  // a sticky error stays
    return e;
}

cudaError_t cudaPeekAtLastError() {
    Locked l;
    return l.s.last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    Locked l;
    return device == 0 ? cudaSuccess : l.ret(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    Locked l;
    if (device != 0) return l.ret(cudaErrorInvalidDevice);
    *p = {};
    std::snprintf(p->name, sizeof p->name, "CUDA on the CPU (tests/cuda_on_cpu)");
    p->totalGlobalMem = cuda_on_cpu::kDeviceMemory;
    p->sharedMemPerBlock = cuda_on_cpu::kMaxSharedPerBlock;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT_MAX;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->major = 8;
    p->minor = 0;
    p->multiProcessorCount = cuda_on_cpu::kMultiprocessors;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    Locked l;
    if (device != 0) return l.ret(cudaErrorInvalidDevice);
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(cuda_on_cpu::kMaxSharedPerBlock); return cudaSuccess;
        case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
        case cudaDevAttrMultiProcessorCount: *value = cuda_on_cpu::kMultiprocessors; return cudaSuccess;
    }
    return l.ret(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize() {
    Locked l;
    return l.sticky() ? l.ret(l.s.sticky) : cudaSuccess;
}

cudaError_t cudaDeviceReset() {
    cuda_on_cpu::clear_fault();
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    *total_bytes = cuda_on_cpu::kDeviceMemory;
    *free_bytes = cuda_on_cpu::kDeviceMemory - std::min(l.s.device_bytes, cuda_on_cpu::kDeviceMemory);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;
    if (size > cuda_on_cpu::kDeviceMemory - std::min(l.s.device_bytes, cuda_on_cpu::kDeviceMemory))
        return l.ret(cudaErrorMemoryAllocation);
    *ptr = cuda_on_cpu::allocate(l.s, size, cuda_on_cpu::Memory::Device);
    return *ptr ? cudaSuccess : l.ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* ptr) {
    Locked l;
    return cuda_on_cpu::release(l.s, ptr, cuda_on_cpu::Memory::Device);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned flags) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    if (flags & ~(cudaHostAllocPortable | cudaHostAllocMapped)) return l.ret(cudaErrorInvalidValue);
    *ptr = cuda_on_cpu::allocate(l.s, size, cuda_on_cpu::Memory::Pinned);
    return *ptr ? cudaSuccess : l.ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* ptr) {
    Locked l;
    return cuda_on_cpu::release(l.s, ptr, cuda_on_cpu::Memory::Pinned);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    *stream = new CUstream_st{flags};
    l.s.streams.insert(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    Locked l;
    if (!l.s.streams.erase(stream)) return l.ret(cudaErrorInvalidResourceHandle);
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    Locked l;
    if (!cuda_on_cpu::stream_ok(l.s, stream)) return l.ret(cudaErrorInvalidResourceHandle);
    return l.sticky() ? l.ret(l.s.sticky) : cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
    Locked l;
    if (!cuda_on_cpu::stream_ok(l.s, stream) || !l.s.events.count(event)) return l.ret(cudaErrorInvalidResourceHandle);
    return l.sticky() ? l.ret(l.s.sticky) : cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    *event = new CUevent_st{flags, false, {}};
    l.s.events.insert(*event);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    Locked l;
    if (!l.s.events.erase(event)) return l.ret(cudaErrorInvalidResourceHandle);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    Locked l;
    if (!l.s.events.count(event) || !cuda_on_cpu::stream_ok(l.s, stream)) return l.ret(cudaErrorInvalidResourceHandle);
    if (l.sticky()) return l.ret(l.s.sticky);
    event->recorded = true;
    event->at = std::chrono::steady_clock::now();
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    Locked l;
    if (!l.s.events.count(event)) return l.ret(cudaErrorInvalidResourceHandle);
    return l.sticky() ? l.ret(l.s.sticky) : cudaSuccess;  // streams run at once: always complete
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return cudaEventQuery(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    Locked l;
    if (!l.s.events.count(start) || !l.s.events.count(end)) return l.ret(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return l.ret(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return l.ret(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
    Locked l;
    return cuda_on_cpu::copy(l.s, dst, src, count, kind, nullptr, "cudaMemcpy");
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
    Locked l;
    return cuda_on_cpu::copy(l.s, dst, src, count, kind, stream, "cudaMemcpyAsync");
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
    Locked l;
    if (l.sticky()) return l.ret(l.s.sticky);
    if (!cuda_on_cpu::stream_ok(l.s, stream)) return l.ret(cudaErrorInvalidResourceHandle);
    if (count == 0) return cudaSuccess;
    if (const std::string why = cuda_on_cpu::not_device_memory(l.s, dst, count); !why.empty()) {
        cuda_on_cpu::say("cudaMemset of " + std::to_string(count) + " bytes: " + why);
        return l.ret(cudaErrorInvalidValue);
    }
    std::memset(dst, value, count);
    return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t count) { return cudaMemsetAsync(dst, value, count, nullptr); }
