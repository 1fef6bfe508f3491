#!/usr/bin/env bash
# Sanitizer and fuzz checks for the GGUF reader/writer.
#
#  1. Configures a clang build with AddressSanitizer + UndefinedBehaviorSanitizer
#     (STRATA_SANITIZE=ON), builds only test_gguf and runs it (the broken-file
#     corpus, round trips, and the fixture files when ../shared/fixtures exists).
#  2. Configures a clang build with STRATA_FUZZ=ON (no Qt needed), builds the
#     libFuzzer target fuzz_gguf, writes a seed corpus of small valid GGUF files
#     with the Writer, and fuzzes the reader for a bounded time.
#
# Exits non-zero on any test failure, sanitizer report or fuzzer finding; a
# finding's input is saved under $FUZZ_DIR/artifacts/ and reproduces with
#   $FUZZ_DIR/tests/fuzz/fuzz_gguf $FUZZ_DIR/artifacts/<file>
#
# Environment (all optional):
#   FUZZ_SECONDS   fuzzing time in seconds (default 60)
#   JOBS           parallel build jobs (default 2)
#   ASAN_DIR       sanitizer build directory (default <repo>/build-asan)
#   FUZZ_DIR       fuzz build directory      (default <repo>/build-fuzz)
#   CC, CXX        clang compilers            (default clang, clang++)
#   SKIP_ASAN=1 / SKIP_FUZZ=1   run only one half
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-2}"
asan_dir="${ASAN_DIR:-$repo/build-asan}"
fuzz_dir="${FUZZ_DIR:-$repo/build-fuzz}"
cc="${CC:-clang}"
cxx="${CXX:-clang++}"

for tool in cmake ninja "$cc" "$cxx"; do
    command -v "$tool" >/dev/null || { echo "sanitize-and-fuzz: '$tool' not found" >&2; exit 2; }
done
"$cxx" --version | head -n1 | grep -qi clang || { echo "sanitize-and-fuzz: $cxx is not clang" >&2; exit 2; }

# Reports stop the process with an error status; no allocation above 1 GiB
# (a count sized by the file must never get there).
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:allocator_may_return_null=0:max_allocation_size_mb=1024:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [[ "${SKIP_ASAN:-0}" != 1 ]]; then
    echo "== ASan+UBSan: configure $asan_dir"
    cmake -S "$repo" -B "$asan_dir" -G Ninja \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF \
        -DSTRATA_SANITIZE=ON -DSTRATA_BUILD_TESTS=ON -DSTRATA_FUZZ=OFF >/dev/null
    echo "== ASan+UBSan: build test_gguf"
    ninja -C "$asan_dir" -j "$jobs" test_gguf
    echo "== ASan+UBSan: run test_gguf"
    (cd "$asan_dir/tests/gguf" && ./test_gguf)
fi

if [[ "${SKIP_FUZZ:-0}" != 1 ]]; then
    echo "== fuzz: configure $fuzz_dir"
    cmake -S "$repo" -B "$fuzz_dir" -G Ninja \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF \
        -DSTRATA_SANITIZE=OFF -DSTRATA_BUILD_TESTS=OFF -DSTRATA_FUZZ=ON >/dev/null
    echo "== fuzz: build fuzz_gguf gguf_make_seeds"
    ninja -C "$fuzz_dir" -j "$jobs" fuzz_gguf gguf_make_seeds

    seeds="$fuzz_dir/fuzz-seeds"
    corpus="$fuzz_dir/fuzz-corpus"      # grows across runs in the same build directory
    artifacts="$fuzz_dir/artifacts"
    rm -rf "$seeds" "$artifacts"
    mkdir -p "$seeds" "$corpus" "$artifacts"
    "$fuzz_dir/tests/fuzz/gguf_make_seeds" "$seeds"
    echo "== fuzz: $(ls "$seeds" | wc -l) seeds, ${fuzz_seconds}s"
    # -malloc_limit_mb: one allocation above 256 MiB from inputs of at most
    # 16 KiB is a finding. -timeout: one input taking 10 s is a finding.
    status=0
    "$fuzz_dir/tests/fuzz/fuzz_gguf" "$corpus" "$seeds" \
        -dict="$repo/tests/fuzz/gguf.dict" \
        -max_total_time="$fuzz_seconds" -max_len=16384 -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=256 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?
    if [[ $status -ne 0 ]] || compgen -G "$artifacts/*" >/dev/null; then
        echo "== fuzz: FINDING (exit $status); inputs in $artifacts:" >&2
        ls -l "$artifacts" >&2 || true
        exit 1
    fi
    echo "== fuzz: no findings"
fi
echo "== sanitize-and-fuzz: OK"
