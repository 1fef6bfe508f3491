#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "sanitizers.h"

#if defined(__x86_64__)
// cuda_on_cpu_switch(&from_sp, to_sp): pushes the callee-saved registers,
// saves the stack pointer, loads the other's, pops. MXCSR and the x87 control
// word are not switched: nothing here changes rounding or exception modes,
// and every fiber starts with the thread's (saving them cost a third of a switch).
// A new stack starts in cuda_on_cpu_trampoline with r12 = arg, r13 = entry.
extern "C" void cuda_on_cpu_switch(void** from_sp, void* to_sp);
extern "C" void cuda_on_cpu_trampoline();
asm(R"(
    .text
    .p2align 4
    .globl cuda_on_cpu_switch
    .hidden cuda_on_cpu_switch
    .type cuda_on_cpu_switch,@function
cuda_on_cpu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_on_cpu_switch, .-cuda_on_cpu_switch

    .p2align 4
    .globl cuda_on_cpu_trampoline
    .hidden cuda_on_cpu_trampoline
    .type cuda_on_cpu_trampoline,@function
cuda_on_cpu_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size cuda_on_cpu_trampoline, .-cuda_on_cpu_trampoline
)");
#else
#error "tests/cuda_on_cpu: the fiber switch is written for x86-64; add one for this architecture (or build with STRATA_BUILD_TESTS=OFF)"
#endif

namespace cuda_on_cpu {

namespace {
thread_local Fiber* t_switching_from = nullptr;  // for a new fiber's started()

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "cuda_on_cpu: %s\n", what);
    std::abort();
}
}  // namespace

Fiber::Fiber() {
#if defined(CUDA_ON_CPU_TSAN)
    tsan_fiber_ = __tsan_get_current_fiber();
#endif
}

Fiber::Fiber(void (*entry)(void*), void* arg, size_t stack_bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    stack_bytes = (stack_bytes + page - 1) / page * page;
    mapped_ = stack_bytes + page;
    stack_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack_ == MAP_FAILED) die("cannot map a fiber stack");
    if (mprotect(stack_, page, PROT_NONE) != 0) die("cannot protect a fiber stack's guard page");  // overflow faults
    stack_bottom_ = static_cast<char*>(stack_) + page;
    stack_size_ = stack_bytes;
    // Stacks are a multiple of the page size apart, so their tops would all
    // fall in the same cache sets; each starts at its own offset instead (the
    // fibers of a warp touch each other's frames at every shuffle).
    static thread_local unsigned colour = 0;
    colour = (colour + 1) % 64;
    auto top = reinterpret_cast<uintptr_t>(stack_bottom_) + stack_size_ - colour * 64 * 7 % 4096;
    top &= ~uintptr_t{15};
    auto* frame = reinterpret_cast<uint64_t*>(top - 72);  // after 6 pops and `ret`, rsp = top - 16: 16-aligned
    frame[0] = 0;                                          // r15
    frame[1] = 0;                                          // r14
    frame[2] = reinterpret_cast<uint64_t>(entry);          // r13
    frame[3] = reinterpret_cast<uint64_t>(arg);            // r12
    frame[4] = 0;                                          // rbx
    frame[5] = 0;                                          // rbp
    frame[6] = reinterpret_cast<uint64_t>(&cuda_on_cpu_trampoline);
    sp_ = frame;
#if defined(CUDA_ON_CPU_TSAN)
    tsan_fiber_ = __tsan_create_fiber(0);
    owns_tsan_fiber_ = true;
#endif
}

Fiber::~Fiber() {
#if defined(CUDA_ON_CPU_TSAN)
    if (owns_tsan_fiber_) __tsan_destroy_fiber(tsan_fiber_);
#endif
    if (stack_) {
        forget_stack();
        munmap(stack_, mapped_);
    }
}

void Fiber::forget_stack() {
#if defined(CUDA_ON_CPU_ASAN)
    if (stack_bottom_) __asan_unpoison_memory_region(stack_bottom_, stack_size_);
#endif
}

void Fiber::switch_to(Fiber& to) {
    t_switching_from = this;
#if defined(CUDA_ON_CPU_ASAN)
    __sanitizer_start_switch_fiber(&asan_fake_stack_, to.stack_bottom_, to.stack_size_);
#endif
#if defined(CUDA_ON_CPU_TSAN)
    __tsan_switch_to_fiber(to.tsan_fiber_, __tsan_switch_to_fiber_no_sync);
#endif
    cuda_on_cpu_switch(&sp_, to.sp_);
#if defined(CUDA_ON_CPU_ASAN)
    // Back here: `from` is whoever switched to us; its stack is already known.
    __sanitizer_finish_switch_fiber(asan_fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::started() {
#if defined(CUDA_ON_CPU_ASAN)
    // The host's stack is learnt here, the first time it switches to a fiber.
    const void* bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
    Fiber* from = t_switching_from;
    if (from && !from->stack_bottom_) {
        from->stack_bottom_ = bottom;
        from->stack_size_ = size;
    }
#endif
}

}  // namespace cuda_on_cpu
