#!/usr/bin/env bash
# Installs what is needed, builds Strata and runs every test: the GGUF reader
# under ASan+UBSan and its libFuzzer target for a bounded time
# (packaging/sanitize-and-fuzz.sh), the CUDA kernels on the CPU under
# ASan+UBSan and under TSan (packaging/cuda-on-cpu-sanitized.sh), then all
# CTest suites, whose summary is the last thing printed.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
packaging/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
FUZZ_SECONDS="${FUZZ_SECONDS:-60}" JOBS="$jobs" packaging/sanitize-and-fuzz.sh
JOBS="$jobs" packaging/cuda-on-cpu-sanitized.sh
cd build
exec ctest --output-on-failure -j "$jobs" --label-exclude gpu
