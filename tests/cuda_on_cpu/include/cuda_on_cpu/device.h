// The CUDA device dialect on the CPU: execution-space keywords, the built-in
// coordinates, barriers, warp intrinsics, atomics and cache-hinted loads, as
// kernels/cuda uses them. Every CUDA thread of a block runs as a fiber
// (scheduler.cpp); an intrinsic that waits for other threads (a barrier, a
// shuffle) switches to the next fiber until every thread it waits for has
// arrived, and reports a divergent barrier, a lane that exited, an unknown
// lane in a mask or a deadlock as a kernel fault naming the source lines.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
// __shared__ is not defined: rewrite_cu.cmake turns each declaration into a
// reference to the block's shared memory (cuda_on_cpu::shared); one it missed
// fails to compile.

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

constexpr int warpSize = 32;

namespace cuda_on_cpu {

// The running CUDA thread's built-in variables.
struct Coordinates {
    uint3 thread;
    uint3 block;
    dim3 block_dim;
    dim3 grid_dim;
};
extern thread_local const Coordinates* current;

// --- barriers and warp intrinsics (scheduler.cpp) ---------------------------

void sync_threads(const char* file, int line);

enum class WarpOp : uint8_t { ShflIdx, ShflUp, ShflDown, ShflXor, Ballot, Any, All, SyncWarp, ReduceAdd, ReduceMin, ReduceMax };

// One lane's part in a warp-wide operation: `in` its value (a shuffled
// value's bytes, a predicate, an operand), `out` its result.
struct WarpCall {
    WarpOp op;
    unsigned mask;
    int arg;    // the shuffle's lane, delta or lane mask
    int width;  // the shuffle's segment width
    uint64_t in[2];
    uint64_t out[2];
    const char* name;
    const char* file;
    int line;
};
void warp_call(WarpCall& call);

template <class T>
T shuffle(WarpOp op, const char* name, unsigned mask, T v, int arg, int width, const char* file, int line) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "a shuffled value is at most 16 bytes");
    WarpCall c{op, mask, arg, width, {0, 0}, {0, 0}, name, file, line};
    std::memcpy(c.in, &v, sizeof(T));
    warp_call(c);
    std::memcpy(&v, c.out, sizeof(T));
    return v;
}
inline uint64_t vote(WarpOp op, const char* name, unsigned mask, uint64_t v, const char* file, int line) {
    WarpCall c{op, mask, 0, 32, {v, 0}, {0, 0}, name, file, line};
    warp_call(c);
    return c.out[0];
}

// --- shared memory (scheduler.cpp) --------------------------------------------

// The block's copy of one __shared__ declaration (`site` is a key unique to
// the declaration and the kernel instantiation): allocated on its own (so
// ASan sees an overrun), filled with 0xFF bytes (NaN as floats) at the start
// of each block, so a read before any write of the block shows.
void* shared_memory(const void* site, size_t bytes, size_t align, const char* name, const char* file, int line);

template <class T, class Site>
T& shared(Site, const char* name, const char* file, int line) {
    static const char site = 0;  // one per declaration and instantiation (Site is a lambda's type)
    return *static_cast<T*>(shared_memory(&site, sizeof(T), alignof(T), name, file, line));
}

// --- launches (runtime.cpp) ----------------------------------------------------

// A pointer argument as the launch checks it: it must point into a device
// (or mapped pinned) allocation, with at least one element left, aligned.
struct PointerArg {
    const void* p;
    size_t elem_bytes;
    size_t align;
    bool is_pointer;
};

template <class P>
PointerArg pointer_arg(const P& v) {
    if constexpr (std::is_pointer_v<P>) {
        using E = std::remove_cv_t<std::remove_pointer_t<P>>;
        if constexpr (std::is_void_v<E>)
            return {v, 1, 1, true};
        else
            return {v, sizeof(E), alignof(E), true};
    } else {
        return {nullptr, 0, 0, false};
    }
}

struct LaunchSite {
    const char* kernel;  // the kernel expression as written
    const char* file;
    int line;
};

// Runs the grid (each thread calls body(closure)), or records why not.
void launch(const LaunchSite& site, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            const char* arg_text, const PointerArg* args, int n_args, void (*body)(void*), void* closure);

template <class... P>
struct Launcher {
    void (*kernel)(P...);
    LaunchSite site;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;

    template <class... A>
    void run(const char* arg_text, A&&... a) {
        static_assert(sizeof...(A) == sizeof...(P), "a kernel launch passes one argument per parameter");
        // Converted once, as the launch copies them; every thread gets these values.
        std::tuple<P...> args(static_cast<P>(std::forward<A>(a))...);
        run_with(arg_text, args, std::index_sequence_for<P...>{});
    }

private:
    template <size_t... I>
    void run_with(const char* arg_text, std::tuple<P...>& args, std::index_sequence<I...>) {
        const PointerArg checks[sizeof...(P) + 1] = {pointer_arg(std::get<I>(args))..., PointerArg{}};
        auto body = [&] { kernel(std::get<I>(args)...); };
        launch(site, grid, block, shared_bytes, stream, arg_text, checks, static_cast<int>(sizeof...(P)),
               [](void* c) { (*static_cast<decltype(body)*>(c))(); }, &body);
    }
};

template <class... P>
Launcher<P...> launcher(void (*kernel)(P...), const char* name, const char* file, int line, dim3 grid, dim3 block,
                        size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
    return Launcher<P...>{kernel, {name, file, line}, grid, block, shared_bytes, stream};
}

}  // namespace cuda_on_cpu

// `k<<<cfg>>>(args)` becomes
// `::cuda_on_cpu::launcher(k, "k", __FILE__, __LINE__, cfg) CUDA_ON_CPU_ARGS(args)`.
#define CUDA_ON_CPU_ARGS(...) .run(#__VA_ARGS__, __VA_ARGS__)

#define threadIdx (::cuda_on_cpu::current->thread)
#define blockIdx (::cuda_on_cpu::current->block)
#define blockDim (::cuda_on_cpu::current->block_dim)
#define gridDim (::cuda_on_cpu::current->grid_dim)

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::cuda_on_cpu::sync_threads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    ::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::SyncWarp, "__syncwarp", mask, 0, file, line);
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
    return ::cuda_on_cpu::shuffle(::cuda_on_cpu::WarpOp::ShflIdx, "__shfl_sync", mask, v, src_lane, width, file, line);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
    return ::cuda_on_cpu::shuffle(::cuda_on_cpu::WarpOp::ShflUp, "__shfl_up_sync", mask, v, static_cast<int>(delta),
                                  width, file, line);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
    return ::cuda_on_cpu::shuffle(::cuda_on_cpu::WarpOp::ShflDown, "__shfl_down_sync", mask, v,
                                  static_cast<int>(delta), width, file, line);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
    return ::cuda_on_cpu::shuffle(::cuda_on_cpu::WarpOp::ShflXor, "__shfl_xor_sync", mask, v, lane_mask, width, file,
                                  line);
}
inline unsigned __ballot_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return static_cast<unsigned>(
        ::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::Ballot, "__ballot_sync", mask, pred != 0, file, line));
}
inline int __any_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return static_cast<int>(::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::Any, "__any_sync", mask, pred != 0, file, line));
}
inline int __all_sync(unsigned mask, int pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return static_cast<int>(::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::All, "__all_sync", mask, pred != 0, file, line));
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned v, const char* file = __builtin_FILE(),
                                  int line = __builtin_LINE()) {
    return static_cast<unsigned>(
        ::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::ReduceAdd, "__reduce_add_sync", mask, v, file, line));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v, const char* file = __builtin_FILE(),
                                  int line = __builtin_LINE()) {
    return static_cast<unsigned>(
        ::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::ReduceMin, "__reduce_min_sync", mask, v, file, line));
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v, const char* file = __builtin_FILE(),
                                  int line = __builtin_LINE()) {
    return static_cast<unsigned>(
        ::cuda_on_cpu::vote(::cuda_on_cpu::WarpOp::ReduceMax, "__reduce_max_sync", mask, v, file, line));
}

// Atomics: relaxed, as the GPU's are (no ordering with other memory); real
// atomic instructions, so ThreadSanitizer sees them as atomics.
template <class T>
T atomicAdd(T* p, T v) {
    if constexpr (std::is_floating_point_v<T>) {
        T old, sum;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        do {
            sum = old + v;
        } while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        return old;
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    }
}
template <class T>
T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <class T>
T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <class T>
T atomicMax(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class T>
T atomicMin(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class T>
T atomicCAS(T* p, T expected, T desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return expected;
}

// Cache-hinted loads and stores: plain accesses here.
template <class T>
T __ldg(const T* p) { return *p; }
template <class T>
T __ldcs(const T* p) { return *p; }
template <class T>
T __ldcg(const T* p) { return *p; }
template <class T>
T __ldlu(const T* p) { return *p; }
template <class T>
void __stcs(T* p, T v) { *p = v; }

inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
