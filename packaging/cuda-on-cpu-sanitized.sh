#!/usr/bin/env bash
# The CUDA kernels on the CPU (tests/cuda_on_cpu) under the sanitizers:
#
#  1. ASan+UBSan (the clang build of sanitize-and-fuzz.sh, STRATA_SANITIZE=ON):
#     reads and writes past device buffers, __shared__ indices out of bounds,
#     undefined arithmetic in the kernels and the runtime;
#  2. TSan (a clang build with STRATA_SANITIZE_THREAD=ON): data races between
#     the CUDA threads of a launch (each a fiber that TSan sees as a thread;
#     barriers, __syncwarp, atomics and launches are its only orderings).
#
# Runs test_cuda_on_cpu_kernels, test_cuda_on_cpu_selfcheck (whose planted
# bugs each sanitizer must catch) and test_cuda_on_cpu_forward in each: the
# forward suite's quantized model with a 25% and a minimal VRAM expert cache
# and a device error mid-step, and under ASan an F32 fixture and gpt-oss's
# MXFP4 experts with sinks and windows too (all of it
# runs unsanitized in ctest; sanitized, ASan costs ~5x and TSan ~15x, which
# would take most of CI's time). Exits non-zero on any failure or report.
#
# Environment (all optional):
#   JOBS       parallel build jobs (default 2)
#   ASAN_DIR   ASan+UBSan build directory (default <repo>/build-asan)
#   TSAN_DIR   TSan build directory       (default <repo>/build-tsan)
#   CC, CXX    clang compilers            (default clang, clang++)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${JOBS:-2}"
asan_dir="${ASAN_DIR:-$repo/build-asan}"
tsan_dir="${TSAN_DIR:-$repo/build-tsan}"
cc="${CC:-clang}"
cxx="${CXX:-clang++}"
suites=(test_cuda_on_cpu_kernels test_cuda_on_cpu_selfcheck test_cuda_on_cpu_forward)
forward_cases=(expert_cache_same_text device_error_mid_step_is_an_error_and_recoverable)

# detect_stack_use_after_return=0: with fake stacks every fiber switch costs
# ~70x more (the suites took minutes instead of seconds); the fibers' real
# stacks are still checked.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:allocator_may_return_null=0:detect_stack_use_after_return=0:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/tests/cuda_on_cpu/tsan.supp"

run() {  # <build dir> <label> [more forward cases...]
    local dir=$1 label=$2 t
    shift 2
    for t in "${suites[@]}"; do
        echo "== $label: $t"
        local start=$SECONDS cases=()
        [[ $t == test_cuda_on_cpu_forward ]] && cases=("${forward_cases[@]}" "$@")
        (cd "$dir/tests/cuda_on_cpu" && "./$t" -silent "${cases[@]}")
        echo "== $label: $t passed in $((SECONDS - start)) s"
    done
}

configure() {  # <build dir> <cmake options...>
    local dir=$1
    shift
    cmake -S "$repo" -B "$dir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF -DSTRATA_BUILD_TESTS=ON \
        -DSTRATA_FUZZ=OFF "$@" >/dev/null
}

if [[ "${SKIP_ASAN:-0}" != 1 ]]; then
echo "== ASan+UBSan: build ${suites[*]}"
configure "$asan_dir" -DSTRATA_SANITIZE=ON -DSTRATA_SANITIZE_THREAD=OFF
ninja -C "$asan_dir" -j "$jobs" "${suites[@]}"
run "$asan_dir" "ASan+UBSan" fixtures:moe-tiny-f32 gptoss_tiny_mxfp4
fi

echo "== TSan: build ${suites[*]}"
configure "$tsan_dir" -DSTRATA_SANITIZE=OFF -DSTRATA_SANITIZE_THREAD=ON -DSTRATA_BUILD_APP=OFF
ninja -C "$tsan_dir" -j "$jobs" "${suites[@]}"
run "$tsan_dir" "TSan"
echo "== cuda-on-cpu-sanitized: OK"
