// Fibers for the CUDA-on-CPU runtime: one per CUDA thread, each with its own
// small stack, switched by a few instructions (x86-64 only: the callee-saved
// registers and the stack pointer). glibc's swapcontext also saves the signal
// mask with a system call per switch, which made the kernel suite 12 s; OS
// threads cost ~70x a fiber switch per barrier arrival.
//
// The sanitizers are told about every switch (ASan: the stack in use;
// TSan: which fiber runs, with no implied synchronisation, so two CUDA
// threads are unordered unless a barrier, an atomic or the launch orders them).
#pragma once

#include <cstddef>

namespace cuda_on_cpu {

class Fiber {
public:
    // The calling thread's own context (the host side of a launch).
    Fiber();
    // A new fiber that will run entry(arg) the first time it is switched to;
    // entry must never return (it switches away for the last time instead).
    Fiber(void (*entry)(void*), void* arg, size_t stack_bytes);
    ~Fiber();
    Fiber(const Fiber&) = delete;
    Fiber& operator=(const Fiber&) = delete;

    // Suspends this fiber (the one running) and resumes `to`. Not seen by
    // TSan: the fibers of an OS thread share its bookkeeping unordered.
    __attribute__((no_sanitize("thread"))) void switch_to(Fiber& to);
    // The first thing a new fiber's entry does: completes the switch that
    // started it (ASan learns the stack it came from, if not yet known).
    __attribute__((no_sanitize("thread"))) void started();
    // Drops sanitizer state a fiber abandoned mid-kernel left on its stack.
    void forget_stack();

private:
    void* sp_ = nullptr;
    void* stack_ = nullptr;      // mapping, guard page first
    size_t mapped_ = 0;
    const void* stack_bottom_ = nullptr;  // for ASan: the usable stack
    size_t stack_size_ = 0;
    void* asan_fake_stack_ = nullptr;
    void* tsan_fiber_ = nullptr;
    bool owns_tsan_fiber_ = false;
};

}  // namespace cuda_on_cpu
