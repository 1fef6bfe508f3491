// Which sanitizers this translation unit is built with (clang and GCC spell
// it differently), and their fiber and happens-before annotations.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_ON_CPU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CUDA_ON_CPU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CUDA_ON_CPU_ASAN)
#define CUDA_ON_CPU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(CUDA_ON_CPU_TSAN)
#define CUDA_ON_CPU_TSAN 1
#endif

#if defined(CUDA_ON_CPU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(CUDA_ON_CPU_TSAN)
#include <sanitizer/tsan_interface.h>
// ThreadSanitizer's dynamic annotations (tsan_interface_ann.cpp): the
// calling fiber's memory accesses are not recorded or checked in between.
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace cuda_on_cpu {

// A happens-before edge from every release on `sync` to a later acquire on it
// (ThreadSanitizer only: the fibers of one OS thread are otherwise unordered).
inline void hb_release(void* sync) {
#if defined(CUDA_ON_CPU_TSAN)
    __tsan_release(sync);
#else
    (void)sync;
#endif
}
inline void hb_acquire(void* sync) {
#if defined(CUDA_ON_CPU_TSAN)
    __tsan_acquire(sync);
#else
    (void)sync;
#endif
}

// The runtime's own bookkeeping (queues, states, shared-memory refills) is
// touched by the host side and by every fiber with no synchronisation TSan
// could see (fiber switches are deliberately unsynchronised): it is kept out
// of the race detector, which then watches the kernels' own accesses only.
inline void runtime_accesses_begin() {
#if defined(CUDA_ON_CPU_TSAN)
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
}
inline void runtime_accesses_end() {
#if defined(CUDA_ON_CPU_TSAN)
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

#if defined(CUDA_ON_CPU_TSAN)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

}  // namespace cuda_on_cpu
